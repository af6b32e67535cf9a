"""Replay: run tasks through the target model with a skill document and memory, and score each answer.

Every call goes through the night's ``CallMeter`` (``ChatRequest(role="target")``), with at most ``workers``
calls in flight. Nothing is replayed twice: successful results are cached by ``ReplayCache`` under the key
``(target model, skill hash, memory hash, task id, sample index, settings hash)``, where the settings hash covers
what else changes the answer or its score (temperature, seed, max_tokens, the system prompt template, the task's
request and judge, and ``JUDGE_VERSION``). The key holds no night: a baseline replayed on an earlier night with the
same documents is not paid for again. A failed call is never cached, so it is tried again next time.

How to replay (the meter, the workers, the cache, the rubric judge, the seed, the rollout) is one ``Replayer``,
built once by its caller (a night, a trainer run) and handed to everything that replays; ``replay_tasks(tasks,
replayer, skill=..., memory=...)`` says what to replay.

A caller may replace the target chat call by its own rollout function (``Replayer(rollout=...)``: e.g. the
trainer runs an environment's ``rollout_one``, a multi-turn or tool-using episode); everything else (threads,
cache, ordering, errors) is the same, and ``rollout_key`` (what identifies that rollout: an environment and its
data) joins the settings hash so different rollouts never share cache entries.

Errors: a fatal backend error or an exhausted budget raises from the meter (``BackendError`` /
``BudgetExhausted``) and stops the replay; a transient error that survived the backend's retries, or an empty
reply, becomes ``ReplayResult(error=...)``, which is not a score of the skill (hard 0, soft 0, ``error`` set).
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from skillopt_sleep import prompts
from skillopt_sleep.backends.base import CallMeter, ChatMessage, ChatRequest
from skillopt_sleep.engine import judges
from skillopt_sleep.fsio import write_jsonl_atomic
from skillopt_sleep.models import ReplayResult, TaskRecord, Usage
from skillopt_sleep.prompts import render

#: (target model, skill hash, memory hash, task id, sample index, settings hash)
CacheKey = tuple[str, str, str, str, int, str]

EMPTY_DOCUMENT = "(none)"
#: Bumped when the judges' semantics change: part of every cache key, so that a cached score of an older judge is not
#: reused (a cached baseline stays valid across nights only while the judge it was scored by does).
JUDGE_VERSION = "3"

#: A rollout that replaces the target chat call: called as ``rollout(task, sample, *, skill, memory, meter,
#: temperature, seed, max_tokens, rubric_judge)`` and returning the scored ``ReplayResult`` of that task and
#: sample (``error`` set when the attempt is not a score of the skill). Called from ``workers`` threads.
Rollout = Callable[..., ReplayResult]


def doc_hash(text: str) -> str:
    """First 16 hex characters of the sha256 of ``text`` (UTF-8)."""
    return hashlib.sha256((text or "").encode("utf-8")).hexdigest()[:16]


def system_prompt(skill: str, memory: str) -> str:
    """The system message given to the target: ``target_system.md`` with the skill document and memory.

    An empty document is shown as ``(none)``.
    """
    return render(prompts.load_prompt("target_system"), {
        "skill": (skill or "").strip() or EMPTY_DOCUMENT,
        "memory": (memory or "").strip() or EMPTY_DOCUMENT,
    })


def cache_key(*, model: str, skill: str, memory: str, task: TaskRecord, sample: int, settings: str) -> CacheKey:
    """Build the cache key of one rollout. ``settings`` is the hash of the rollout settings (see module doc)."""
    task_hash = doc_hash(task.request + "\x00" + task.judge.model_dump_json())
    return (model, doc_hash(skill), doc_hash(memory), task.id, sample, doc_hash(settings + "\x00" + task_hash))


class ReplayCache:
    """Successful replay results by ``CacheKey``, in memory and optionally in a JSONL file.

    path: e.g. ``<project state dir>/replay_cache.jsonl`` (one ``{"key": [...], "result": {...}}`` per line);
    loaded at construction (malformed lines are skipped and counted in ``skipped_lines``), written by ``save()``
    atomically with mode 0600. Results with ``error`` set are never stored. Thread-safe.
    """

    def __init__(self, path: Path | None = None):
        self.path = Path(path) if path is not None else None
        self.skipped_lines = 0
        self._entries: dict[CacheKey, ReplayResult] = {}
        self._lock = threading.Lock()
        if self.path is not None and self.path.exists():
            self._load(self.path)

    def _load(self, path: Path) -> None:
        with path.open("rb") as handle:
            for line in handle:
                if not line.strip():
                    continue
                try:
                    row = orjson.loads(line)
                    key = row["key"]
                    if not isinstance(key, list) or len(key) != 6:
                        raise ValueError("bad key")
                    parsed: CacheKey = (str(key[0]), str(key[1]), str(key[2]), str(key[3]), int(key[4]),
                                        str(key[5]))
                    result = ReplayResult.model_validate(row["result"])
                except (ValueError, KeyError, TypeError, ValidationError):
                    self.skipped_lines += 1
                    continue
                if result.error is None:
                    self._entries[parsed] = result

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: CacheKey) -> ReplayResult | None:
        """Return a copy of the stored result with ``cached=True``, or None."""
        with self._lock:
            found = self._entries.get(key)
        return found.model_copy(update={"cached": True}, deep=True) if found is not None else None

    def put(self, key: CacheKey, result: ReplayResult) -> bool:
        """Store ``result`` unless it failed (``error`` set) or is empty. Returns whether it was stored."""
        if result.error is not None or not result.response.strip():
            return False
        with self._lock:
            self._entries[key] = result.model_copy(update={"cached": False}, deep=True)
        return True

    def save(self) -> None:
        """Write every entry to ``path`` (no-op without a path). Raises OSError when it cannot be written."""
        if self.path is None:
            return
        with self._lock:
            rows = [{"key": list(key), "result": result.model_dump(mode="json")}
                    for key, result in self._entries.items()]
        write_jsonl_atomic(self.path, rows, mode=0o600)


def _tools_evidence(meter: CallMeter, tools_called: list[str]) -> list[str] | None:
    """Tool names the backend reports as really run; None when the backend cannot run tools."""
    if tools_called or getattr(meter.backend, "runs_tools", False):
        return list(tools_called)
    return None


def replay_one(task: TaskRecord, sample: int, *, system: str, meter: CallMeter, temperature: float | None,
               seed: int | None, max_tokens: int, rubric_judge: Any) -> ReplayResult:
    """Replay one task once: one target call (system message ``system``, user message the request), scored by
    ``judges.score_response``. Sample ``sample`` uses seed ``seed + sample``.

    meter: a ``CallMeter``, or any object with its ``chat(request, fail_on_error=)`` and ``backend`` (the
    trainer's ``envs.base.RolloutClient``); temperature / seed None: not set on the request (the client's
    sampling settings apply). Returns a ``ReplayResult`` (``error`` set when the call failed or the reply was
    empty). Raises what ``meter.chat`` raises (fatal ``BackendError``, ``BudgetExhausted``).
    """
    sampling: dict[str, Any] = {}
    if temperature is not None:
        sampling["temperature"] = temperature
    if seed is not None:
        sampling["seed"] = seed + sample
    request = ChatRequest(
        role="target",
        messages=[ChatMessage(role="system", content=system), ChatMessage(role="user", content=task.request)],
        max_tokens=max_tokens,
        **sampling,
    )
    started = time.perf_counter()
    chat = meter.chat(request, fail_on_error=False)  # fatal errors and budgets raise here
    latency = chat.latency_s or (time.perf_counter() - started)
    if not chat.ok:
        return ReplayResult(task_id=task.id, sample=sample, usage=chat.usage, latency_s=latency,
                            error=f"{chat.error_kind or 'error'}: {chat.error}")
    if not chat.text.strip():
        return ReplayResult(task_id=task.id, sample=sample, usage=chat.usage, latency_s=latency,
                            error="empty response from the target model")
    tools = _tools_evidence(meter, chat.tools_called)
    outcome = judges.score_response(task, chat.text, tools, rubric_judge=rubric_judge)
    return ReplayResult(
        task_id=task.id,
        sample=sample,
        response=chat.text,
        hard=outcome.hard,
        soft=outcome.soft,
        fail_reason=outcome.fail_reason,
        rationale=outcome.rationale,
        llm_judged=outcome.llm_judged,
        tools_called=tools or [],
        usage=Usage(prompt_tokens=chat.usage.prompt_tokens, completion_tokens=chat.usage.completion_tokens),
        latency_s=latency,
    )


@dataclasses.dataclass(frozen=True)
class Replayer:
    """How tasks are replayed: built once by a night (``night.py``) or a trainer run (``trainer.py``) and handed to
    everything that replays (the step, the gate's paired protocol, the pending candidate's re-test, the slow update,
    the test split) through ``replay_tasks``. Immutable: ``with_meter`` gives a copy that calls through another
    meter."""

    meter: CallMeter
    """Every call goes through it: the night's ``CallMeter``, or a stand-in with its ``chat`` and ``backend`` (the
    step's ``rejected_edits.RejectedEditScreen``)."""
    workers: int = 4
    """Most replay calls in flight (threads)."""
    cache: ReplayCache | None = None
    """Successful results by ``CacheKey``; None: nothing is cached."""
    rubric_judge: judges.RubricJudge | None = None
    """Scores the rubric of a task that has one (``judges.make_rubric_judge``); None: rubrics are left unscored."""
    seed: int = 0
    """Sample ``i`` of a task uses seed ``seed + i``."""
    rollout: Rollout | None = None
    """Run instead of the single target chat call (the trainer's environment episode); None: the chat call."""
    rollout_key: str = ""
    """What identifies ``rollout`` (an environment and its data), folded into the cache key: rollouts that differ
    must have keys that differ."""

    def with_meter(self, meter: CallMeter) -> Replayer:
        """This replayer, calling through ``meter``."""
        return dataclasses.replace(self, meter=meter)


def replay_tasks(tasks: list[TaskRecord], replayer: Replayer, *, skill: str, memory: str, samples: int = 1,
                 temperature: float = 0.0, max_tokens: int = 400) -> list[ReplayResult]:
    """Replay every task ``samples`` times with ``skill`` and ``memory`` through ``replayer``; return the scored
    results.

    Order: task order, then sample index (whatever the completion order of the ``replayer.workers`` threads).
    Sample ``i`` uses ``temperature`` and seed ``replayer.seed + i``; max_tokens: the target's reply limit. Cache
    hits make no call and come back with ``cached=True``.
    Raises ValueError when samples < 1; ``BackendError`` (fatal error) or ``BudgetExhausted``: calls not yet started
    are cancelled; an exception raised by ``replayer.rollout`` propagates the same way.
    """
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    meter, cache, seed = replayer.meter, replayer.cache, replayer.seed
    rubric_judge, rollout = replayer.rubric_judge, replayer.rollout
    system = system_prompt(skill, memory)
    model = meter.backend.model_for("target")
    frame = doc_hash(prompts.load_prompt("target_system"))
    settings = f"t={temperature}|seed={seed}|max_tokens={max_tokens}|system={frame}|judge={JUDGE_VERSION}"
    if rollout is not None:
        settings += f"|rollout={replayer.rollout_key}"
    jobs = [(task, sample) for task in tasks for sample in range(samples)]
    results: list[ReplayResult | None] = [None] * len(jobs)
    pending: dict[Future, tuple[int, CacheKey]] = {}

    with ThreadPoolExecutor(max_workers=max(1, replayer.workers), thread_name_prefix="replay") as pool:
        for index, (task, sample) in enumerate(jobs):
            key = cache_key(model=model, skill=skill, memory=memory, task=task, sample=sample, settings=settings)
            hit = cache.get(key) if cache is not None else None
            if hit is not None:
                results[index] = hit
                continue
            if rollout is None:
                future = pool.submit(replay_one, task, sample, system=system, meter=meter,
                                     temperature=temperature, seed=seed, max_tokens=max_tokens,
                                     rubric_judge=rubric_judge)
            else:
                future = pool.submit(rollout, task, sample, skill=skill, memory=memory, meter=meter,
                                     temperature=temperature, seed=seed, max_tokens=max_tokens,
                                     rubric_judge=rubric_judge)
            pending[future] = (index, key)
        try:
            done, not_done = wait(pending, return_when=FIRST_EXCEPTION)
        except BaseException:  # a signal (``interrupts.Interrupted``): drop the queued calls, let running ones end
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        failed = [future for future in done if future.exception() is not None]
        if failed:
            for future in not_done:
                future.cancel()
            if cache is not None:  # keep what was already paid for
                for future in done:
                    if future.exception() is None:
                        cache.put(pending[future][1], future.result())
            first = min(failed, key=lambda future: pending[future][0])
            raise first.exception()  # type: ignore[misc]

    for future, (index, key) in pending.items():
        result = future.result()
        results[index] = result
        if cache is not None:
            cache.put(key, result)
    return [result for result in results if result is not None]
