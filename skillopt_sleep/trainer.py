"""Offline training of a skill document over any environment: ``SkillOptTrainer`` (TRL-like) and ``SkillOptConfig``.

    trainer = SkillOptTrainer(config=SkillOptConfig(num_epochs=2, out_root="runs/qa"), env=QAEnv(...),
                              optimizer_client=get_backend("openai", ...), target_client=get_backend("local"))
    summary = trainer.train()

An epoch walks the environment's train items in batches of ``batch_size`` (shuffled per epoch with ``seed`` unless
``shuffle`` is off); each batch is one SkillOpt step, the very code the nightly cycle runs
(``engine.step.run_step``: rollout -> reflect -> aggregate -> select -> update -> gated evaluate). The selection
split (default ``val``) is the gate's held-out set; the test split is scored once at the end, for the initial and
the best skill document, and never reaches the optimizer. A night is the same thing as one epoch of one batch over
the night's tasks (plus harvest and staging).

Two clients, one meter: the step makes every call through one ``CallMeter``; the trainer gives it a
``RoleRouterBackend`` that sends role ``target`` to ``target_client`` and the other roles (``optimizer``,
``judge``) to ``optimizer_client``. Rollouts go through ``SkillEnv.rollout_one`` (the run's ``Replayer(rollout=...)``),
whose ``target_client`` is an ``envs.base.RolloutClient`` over that meter. Only the skill document is trained:
the memory is empty (an environment may show its own fixed context, as ``TaskFileEnv(memory=...)`` does).

Artifacts under ``out_root`` (JSON written atomically by ``skillopt_sleep.fsio``, each with a ``format`` version):

    config.json             the config, the environment's fingerprint, the clients' models
    trainer_state.json      everything resume needs (written last after each step: the commit point)
    history.json            one record per completed step (deterministic: no timings, no cache flags)
    summary.json            the result of ``train()``
    best_skill.md, current_skill.md, skills/skill_vNNNN.md (v0000: the initial skill; one per accepted step)
    replay_cache.jsonl      rollouts by (target model, skill hash, item, sample, settings): the selection cache
    steps/step_0000/        selection.json: the initial skill on the selection split
    steps/step_NNNN/        rollouts.json, patches_raw.json, patches_merged.json, patches_ranked.json,
                            candidate_skill.md, edits.json (the edit-apply report), selection.json, step.json

Resume: ``train()`` on an ``out_root`` that holds a run continues after its last completed step, with the edit
budget scheduler's state, the gate's best score and the current and best skills restored; with the same seed the
result equals an uninterrupted run. Selection scores are cached by skill-document hash (the replay cache key holds
it): an identical candidate is never evaluated twice, within a run or across a resume.
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, model_validator

from skillopt_sleep import prompts
from skillopt_sleep.backends.base import Backend, Budget, CallMeter, ChatRequest, ChatResult
from skillopt_sleep.config import RENAMED_KEYS, EditBudgetConfig, StepConfig
from skillopt_sleep.documents.targets import prompt_view
from skillopt_sleep.engine.edit_budget import EditBudgetState, next_edit_budget, update_edit_budget_state
from skillopt_sleep.engine.gate import summarize
from skillopt_sleep.engine.replay import ReplayCache, Replayer, doc_hash, replay_tasks
from skillopt_sleep.engine.step import StepInput, StepResult, StepSettings, run_step
from skillopt_sleep.envs.base import RolloutClient, RolloutResult, SkillEnv, default_task_for
from skillopt_sleep.errors import ConfigError
from skillopt_sleep.fsio import load_json, write_json_atomic, write_text_atomic
from skillopt_sleep.hashing import sha256_text
from skillopt_sleep.models import ReplayResult, Role, Scores, TaskRecord

CONFIG_FORMAT = "skillopt-sleep-train-config/1"
STATE_FORMAT = "skillopt-sleep-train-state/1"
HISTORY_FORMAT = "skillopt-sleep-train-history/1"
SUMMARY_FORMAT = "skillopt-sleep-train-summary/1"
STEP_FORMAT = "skillopt-sleep-train-step/1"

#: Config fields that may differ when a run is resumed (they do not change what a completed step did).
RESUMABLE_CHANGES = frozenset({"num_epochs", "workers", "eval_test", "save_every_step", "out_root", "extras"})

logger = logging.getLogger("skillopt_sleep.trainer")

Event = dict[str, Any]


#: The trainer gates on the environment's whole val split (a night caps its val pool with ``gate_max_val``).
TRAINER_MAX_VAL = 1_000_000
#: The night-only step keys (``config.NightStepConfig``) as the trainer fixes them: every step gates, on the whole
#: selection split, and evolves the skill document only.
TRAINER_STEP = {"gate_mode": "on", "gate_max_val": TRAINER_MAX_VAL, "evolve_skill": True, "evolve_memory": False}


class SkillOptConfig(StepConfig, EditBudgetConfig):
    """How ``SkillOptTrainer`` trains. Invalid values raise pydantic's ``ValidationError``, naming the field.

    The step and gate keys and the edit budget are the night's, defined once in ``config.StepConfig`` and
    ``config.EditBudgetConfig`` with the same defaults (``edit_budget_schedule`` runs over the run's steps: the
    horizon is the run's length; ``lr_scheduler``, its old name here, is still accepted, deprecated);
    ``SkillOptConfig.from_config(sleep_config, **overrides)`` takes them from a night's ``SleepConfig``. Each step
    gates (``gate_mode`` on) on the whole selection split and evolves the skill document only.

    The trainer's own keys: num_epochs: passes over the train split; batch_size: train items per step; shuffle:
    shuffle the train items each epoch (with ``seed``); out_root: the run directory; selection_split: the env split
    the gate holds out (not ``train``); test_split: the split scored at the end; eval_test: score it;
    save_every_step: write ``steps/step_NNNN/`` and ``skills/`` (resume works either way); max_calls: most LLM calls
    of the whole run (0 = no limit); extras: free-form metadata kept in config.json (e.g. a dataset name).
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    num_epochs: int = Field(1, ge=1)
    batch_size: int = Field(8, ge=1)
    shuffle: bool = True
    out_root: Path = Path("skillopt-runs/run")
    selection_split: str = Field("val", min_length=1)
    test_split: str = Field("test", min_length=1)
    eval_test: bool = True
    save_every_step: bool = True
    max_calls: int = Field(0, ge=0)
    extras: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _held_out(self) -> SkillOptConfig:
        if self.selection_split == "train":
            raise ValueError("selection_split must be a held-out split, not 'train'")
        if self.test_split in ("train", self.selection_split):
            raise ValueError(f"test_split must differ from 'train' and from selection_split "
                             f"({self.selection_split!r})")
        return self


class RoleRouterBackend:
    """One ``Backend`` over two clients: role ``target`` goes to ``target``, every other role (``optimizer``,
    ``judge``, ``miner``) to ``optimizer``. name: the clients' names (``"a"``, or ``"a+b"`` when they differ);
    runs_tools: the target's."""

    def __init__(self, optimizer: Backend, target: Backend | None = None):
        self.optimizer = optimizer
        self.target = target if target is not None else optimizer
        names = [self.optimizer.name] if self.target.name == self.optimizer.name else [self.optimizer.name,
                                                                                       self.target.name]
        self.name = "+".join(names)
        self.runs_tools = bool(getattr(self.target, "runs_tools", False))

    def client_for(self, role: Role) -> Backend:
        return self.target if role == "target" else self.optimizer

    def model_for(self, role: Role) -> str:
        return self.client_for(role).model_for(role)

    def chat(self, request: ChatRequest) -> ChatResult:
        return self.client_for(request.role).chat(request)


_PROMPT_LOCK = threading.Lock()


def _prompt_file_name(name: str) -> str:
    file_name = name if name.endswith(".md") else f"{name}.md"
    if file_name not in prompts.PROMPT_NAMES:
        raise ConfigError(f"unknown prompt template {name!r}; known: {', '.join(prompts.PROMPT_NAMES)}",
                          key="prompt_overrides")
    return file_name


@contextmanager
def prompt_overrides_applied(overrides: Mapping[str, str]) -> Iterator[None]:
    """Serve ``overrides`` (template name -> text, e.g. ``{"reflect": "..."}``) instead of the shipped or user
    templates while the block runs. Process-wide (one trainer with overrides at a time; others wait)."""
    if not overrides:
        yield
        return
    table = {_prompt_file_name(name): text for name, text in overrides.items()}
    with _PROMPT_LOCK:
        original = prompts.load_prompt

        def load(name: str) -> str:
            file_name = _prompt_file_name(name)
            return table[file_name] if file_name in table else original(name)

        prompts.load_prompt = load
        try:
            yield
        finally:
            prompts.load_prompt = original


class TrainState(BaseModel):
    """What resume needs (``trainer_state.json``). Skill texts are stored whole; scores are ``Scores``."""

    model_config = ConfigDict(extra="forbid")

    format: str = STATE_FORMAT
    completed_steps: int = 0
    initial_skill: str
    current_skill: str
    best_skill: str
    best_step: int = 0
    best_score: float | None = None
    baseline_selection: Scores = Field(default_factory=Scores)
    best_selection: Scores = Field(default_factory=Scores)
    edit_budget: EditBudgetState = Field(default_factory=EditBudgetState)
    skill_version: int = 0
    selection_scores: dict[str, Scores] = Field(default_factory=dict)
    """sha256 of a skill document -> its selection scores (every skill the gate evaluated)."""
    history: list[dict[str, Any]] = Field(default_factory=list)


def _scores_dict(scores: Scores) -> dict[str, Any]:
    return scores.model_dump(mode="json")


def _train_state(raw: object) -> TrainState:
    """``trainer_state.json``'s data as a ``TrainState``; TypeError for another ``format``, ValidationError for a
    bad field."""
    if not isinstance(raw, dict) or raw.get("format") != STATE_FORMAT:
        found = raw.get("format") if isinstance(raw, dict) else type(raw).__name__
        raise TypeError(f"format {found!r}, expected {STATE_FORMAT!r}")
    return TrainState.model_validate(raw)


def _dump(results: list[Any]) -> list[dict[str, Any]]:
    return [result.model_dump(mode="json") for result in results]


class SkillOptTrainer:
    """Train a skill document on a ``SkillEnv`` (see the module docstring).

    config: ``SkillOptConfig``; env: a ``SkillEnv``; optimizer_client: the backend for reflection, merge, rank and
    rubric judging (``skillopt_sleep.backends.get_backend(name, **options)``); target_client: the backend that runs
    the skill (default: optimizer_client); initial_skill: the document to start from (default:
    ``env.get_initial_skill()``); prompt_overrides: engine template name -> text (``reflect``, ``merge``, ``rank``,
    ``judge_rubric``, ``target_system``, ...) used while ``train()`` runs; on_event: called with each progress event
    (a dict with ``"event"``: ``train_begin``, ``step_begin``, ``stage`` (``stage``, ``phase`` begin/end),
    ``rollout``, ``call`` (``calls``, ``tokens``: the run's LLM calls and tokens so far), ``step_end`` (``record``),
    ``evaluate`` (``split``, ``skill``), ``train_end`` (``summary``)); it runs in worker threads for ``rollout`` and
    ``call`` events, and an exception it raises stops the run like any error (resumable).
    Raises ConfigError for an unknown prompt template name.
    """

    def __init__(self, *, config: SkillOptConfig, env: SkillEnv, optimizer_client: Backend,
                 target_client: Backend | None = None, initial_skill: str | None = None,
                 prompt_overrides: Mapping[str, str] | None = None, on_event: Callable[[Event], None] | None = None):
        for method in ("get_items", "get_initial_skill", "rollout_one"):
            if not callable(getattr(env, method, None)):
                raise TypeError(f"env {type(env).__name__} is not a SkillEnv: it has no {method}()")
        self.config = config
        self.env = env
        self.optimizer_client = optimizer_client
        self.target_client = target_client if target_client is not None else optimizer_client
        self.initial_skill = initial_skill
        self.prompt_overrides = dict(prompt_overrides or {})
        for name in self.prompt_overrides:
            _prompt_file_name(name)
        self.on_event = on_event
        self.backend = RoleRouterBackend(self.optimizer_client, self.target_client)
        self.meter: CallMeter | None = None
        self._items: dict[str, dict[str, Any]] = {}
        self._tasks: dict[str, TaskRecord] = {}
        self._step = 0
        self._stage = ""

    # ------------------------------------------------------------------ events
    def _emit(self, event: str, **fields: Any) -> None:
        if self.on_event is not None:
            self.on_event({"event": event, **fields})

    # ------------------------------------------------------------------ data
    def _split_tasks(self, split: str) -> list[TaskRecord]:
        items = self.env.get_items(split) or []
        to_task = getattr(self.env, "task_for", None) or default_task_for
        tasks = []
        for item in items:
            if not isinstance(item, dict) or "id" not in item:
                raise ConfigError(f"env {type(self.env).__name__}: every {split} item needs an 'id'", key=split)
            task = to_task(item)
            task_id = str(item["id"])
            if task.id != task_id:
                task = task.model_copy(update={"id": task_id})
            if task_id in self._items:
                raise ConfigError(f"item id {task_id!r} appears twice (ids must be unique across splits)",
                                  key=split)
            self._items[task_id] = item
            self._tasks[task_id] = task
            tasks.append(task)
        return tasks

    def _fingerprint(self, splits: dict[str, list[TaskRecord]]) -> str:
        custom = getattr(self.env, "fingerprint", None)
        if callable(custom):
            return str(custom())
        data = orjson.dumps({split: [self._items[task.id] for task in tasks] for split, tasks in splits.items()},
                            option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=str)
        return f"{type(self.env).__module__}.{type(self.env).__qualname__}|items={doc_hash(data.decode())}"

    def plan(self, train_ids: list[str]) -> list[tuple[int, int, list[str]]]:
        """The run's steps: ``(epoch, batch index, item ids)`` in order (shuffled per epoch with the seed)."""
        size = self.config.batch_size
        steps = []
        for epoch in range(self.config.num_epochs):
            order = list(train_ids)
            if self.config.shuffle:
                random.Random(f"{self.config.seed}:{epoch}").shuffle(order)
            for index, start in enumerate(range(0, len(order), size)):
                steps.append((epoch, index, order[start:start + size]))
        return steps

    # ------------------------------------------------------------------ rollout through the env
    def _rollout(self, task: TaskRecord, sample: int, *, skill: str, memory: str, meter: CallMeter,
                 temperature: float, seed: int, max_tokens: int, rubric_judge: Any) -> ReplayResult:
        """``replay.Rollout``: one ``env.rollout_one`` episode, as a ``ReplayResult``."""
        client = RolloutClient(meter, temperature=temperature, seed=seed + sample)
        started = time.perf_counter()
        outcome = self.env.rollout_one(item=self._items[task.id], skill=skill, target_client=client)
        if not isinstance(outcome, RolloutResult):
            raise TypeError(f"{type(self.env).__name__}.rollout_one returned {type(outcome).__name__}, "
                            "not a RolloutResult")
        response = outcome.final_response()
        if outcome.error is None and not response.strip():
            response = "(no final answer)"
        self._emit("rollout", step=self._step, stage=self._stage, item=task.id, hard=outcome.hard)
        return ReplayResult(task_id=task.id, sample=sample, response=response, hard=outcome.hard, soft=outcome.soft,
                            fail_reason=None if outcome.hard else (outcome.fail_reason or "not solved"),
                            rationale=outcome.rationale, tools_called=outcome.tools_called, usage=client.usage,
                            latency_s=round(time.perf_counter() - started, 3), error=outcome.error,
                            llm_judged=outcome.llm_judged)

    def _replay(self, tasks: list[TaskRecord], skill: str, replayer: Replayer) -> list[ReplayResult]:
        return replay_tasks(tasks, replayer, skill=prompt_view(skill), memory="")

    def _scores(self, results: list[ReplayResult]) -> Scores:
        return summarize(results, self.config.gate_metric, self.config.gate_mixed_weight)

    # ------------------------------------------------------------------ run directory
    def _config_record(self, fingerprint: str, initial_skill: str) -> dict[str, Any]:
        return {
            "format": CONFIG_FORMAT,
            "config": self.config.model_dump(mode="json"),
            "env": {"class": f"{type(self.env).__module__}.{type(self.env).__qualname__}",
                    "fingerprint": fingerprint},
            "initial_skill_sha256": sha256_text(initial_skill),
            "clients": {"optimizer": {"backend": self.optimizer_client.name,
                                      "model": self.optimizer_client.model_for("optimizer")},
                        "target": {"backend": self.target_client.name,
                                   "model": self.target_client.model_for("target")}},
        }

    def _check_resumable(self, out: Path, record: dict[str, Any]) -> None:
        """Raise ConfigError when ``out`` holds a run this trainer cannot continue."""
        stored = load_json(out / "config.json", what="the training run's config",
                           fix="use another out_root (this one holds a run it cannot be checked against)")
        if not isinstance(stored, dict) or stored.get("format") != CONFIG_FORMAT:
            raise ConfigError(f"{out} holds a trainer state but no readable config.json ({CONFIG_FORMAT}); "
                              "use another out_root", key="out_root")
        old, new = stored.get("config", {}), record["config"]
        old = {RENAMED_KEYS.get(key, key): value for key, value in old.items()}  # a run saved under an old key name
        changed = sorted(key for key in set(old) | set(new)
                         if key not in RESUMABLE_CHANGES and old.get(key) != new.get(key))
        problems = [f"{key} {old.get(key)!r} -> {new.get(key)!r}" for key in changed]
        if stored.get("env", {}).get("fingerprint") != record["env"]["fingerprint"]:
            problems.append("the environment or its items changed")
        if stored.get("initial_skill_sha256") != record["initial_skill_sha256"]:
            problems.append("the initial skill document changed")
        if problems:
            raise ConfigError(f"{out} holds a run with other settings ({'; '.join(problems)}); resume it with the "
                              "same settings or choose another out_root", key="out_root")

    def _write_skill_files(self, out: Path, state: TrainState) -> None:
        write_text_atomic(out / "current_skill.md", state.current_skill)
        write_text_atomic(out / "best_skill.md", state.best_skill)

    def _commit(self, out: Path, state: TrainState) -> None:
        """Write history.json and the skill files, then trainer_state.json (the commit point of a step)."""
        self._write_skill_files(out, state)
        write_json_atomic(out / "history.json", {"format": HISTORY_FORMAT, "steps": state.history})
        write_json_atomic(out / "trainer_state.json", state.model_dump(mode="json"))

    def _load_state(self, out: Path) -> TrainState | None:
        """The run's ``trainer_state.json`` (None: a new run). Raises DamagedFileError naming it and what is wrong
        (not JSON, another ``format``, the first bad field)."""
        path = out / "trainer_state.json"
        return load_json(path, what="the training run's state", validate=_train_state,
                         fix=f"resume from another out_root, or move it aside (mv {path} {path}.bad) to train afresh")

    # ------------------------------------------------------------------ one step
    def _write_step(self, out: Path, number: int, step: StepResult, record: dict[str, Any]) -> None:
        folder = out / "steps" / f"step_{number:04d}"
        head = {"format": STEP_FORMAT, "step": number}
        write_json_atomic(folder / "rollouts.json", {**head, "results": _dump(step.train_results)})
        write_json_atomic(folder / "patches_raw.json",
                          {**head, "minibatches": step.minibatches, "patches": [_dump(p) for p in step.raw_patches]})
        write_json_atomic(folder / "patches_merged.json", {**head, "edits": _dump(step.merged)})
        write_json_atomic(folder / "patches_ranked.json", {**head, "edits": _dump(step.ranked),
                                                           "selected": _dump(step.selected),
                                                           "rank_fallback": step.rank_fallback})
        write_text_atomic(folder / "candidate_skill.md", step.candidate.get("skill", ""))
        write_json_atomic(folder / "edits.json", {**head, "edits": _dump(step.edits), "changed": step.changed})
        write_json_atomic(folder / "selection.json", {**head, "gate": step.gate.model_dump(mode="json"),
                                                      "baseline": _dump(step.baseline_val),
                                                      "candidate": _dump(step.candidate_val)})
        write_json_atomic(folder / "step.json", {**head, "record": record, "errors": step.errors,
                                                 "calls_by_stage": step.calls_by_stage,
                                                 "stage_seconds": step.stage_seconds,
                                                 "optimizer_raw_head": step.optimizer_raw_head})

    def _run_step(self, out: Path, state: TrainState, *, number: int, epoch: int, batch: int, ids: list[str],
                  total: int, selection: list[TaskRecord], replayer: Replayer) -> None:
        config = self.config
        budget = next_edit_budget(config.edit_budget_schedule, max_budget=config.edit_budget,
                                  min_budget=min(config.min_edit_budget, config.edit_budget),
                                  horizon=max(1, total - 1), state=state.edit_budget)
        self._step = number
        self._emit("step_begin", step=number, total=total, epoch=epoch, batch=batch, edit_budget=budget)

        def on_stage(stage: str, phase: str) -> None:
            self._stage = stage
            self._emit("stage", step=number, stage=stage, phase=phase)

        settings = StepSettings.from_config(config, edit_budget=budget, **TRAINER_STEP)
        step = run_step(StepInput(train=[self._tasks[item_id] for item_id in ids], val=selection,
                                  documents={"skill": state.current_skill}, best_gate_score=state.best_score),
                        settings=settings, replayer=replayer, on_stage=on_stage)
        gate = step.gate
        candidate = step.candidate.get("skill", state.current_skill)
        accepted, new_best = step.accepted, gate.verdict == "accept_new_best"
        if step.changed and gate.candidate.n:
            state.selection_scores[sha256_text(candidate)] = gate.candidate
        if accepted:
            state.current_skill = candidate
            state.skill_version += 1
            if config.save_every_step:
                write_text_atomic(out / "skills" / f"skill_v{state.skill_version:04d}.md", candidate)
        if new_best:
            state.best_skill, state.best_step = candidate, number
            state.best_score, state.best_selection = gate.candidate.gate, gate.candidate
        state.edit_budget = update_edit_budget_state(state.edit_budget, budget_used=budget, accepted=accepted)
        train_scored = [result for result in step.train_results if result.error is None]
        record = {
            "step": number, "epoch": epoch, "batch": batch, "items": ids, "edit_budget": budget,
            "verdict": gate.verdict, "clause": gate.details.get("clause"), "reason": gate.reason,
            "accepted": accepted, "new_best": new_best,
            "train": {"hard": round(sum(r.hard for r in train_scored) / len(train_scored), 4) if train_scored else 0.0,
                      "soft": round(sum(r.soft for r in train_scored) / len(train_scored), 4) if train_scored else 0.0,
                      "n": len(train_scored)},
            "selection": {"baseline": _scores_dict(gate.baseline), "candidate": _scores_dict(gate.candidate)},
            "edits": {"proposed": len(step.edits),
                      "applied": [edit.content for edit in step.edits if edit.status == "applied"],
                      "statuses": {status: sum(1 for e in step.edits if e.status == status)
                                   for status in sorted({e.status for e in step.edits})}},
            "changed": bool(step.changed),
            "candidate_sha256": sha256_text(candidate),
            "skill_version": state.skill_version,
            "best_step": state.best_step,
            "best_score": state.best_score,
        }
        state.history.append(record)
        state.completed_steps = number
        if config.save_every_step:
            self._write_step(out, number, step, record)
        if replayer.cache is not None:
            replayer.cache.save()
        self._commit(out, state)
        logger.info("step %d/%d: %s (%s)", number, total, gate.verdict, gate.reason)
        self._emit("step_end", step=number, total=total, record=record)

    # ------------------------------------------------------------------ train
    def train(self) -> dict[str, Any]:
        """Run (or resume) the training; return the summary (also written to ``summary.json``).

        Summary: ``best_selection_score`` (gate score of the best skill on the selection split),
        ``baseline_selection_score`` (the initial skill's), ``best_step`` (0 = the initial skill stayed best),
        ``selection`` / ``test``: ``{"baseline": Scores, "best": Scores}`` (``test`` None when not evaluated),
        ``steps_completed``, ``steps_total``, ``accepted_steps``, ``skill_versions``, ``metric``,
        ``best_skill_sha256``. Raises ConfigError (empty train or selection split, duplicate item ids, an out_root
        holding another run), ``BackendError`` / ``BudgetExhausted`` from the calls; the run directory then holds
        every completed step and a later ``train()`` resumes.
        """
        with prompt_overrides_applied(self.prompt_overrides):
            return self._train()

    def _train(self) -> dict[str, Any]:
        config = self.config
        out = Path(config.out_root).expanduser()
        self._items, self._tasks = {}, {}
        splits = {split: self._split_tasks(split) for split in ("train", config.selection_split, config.test_split)}
        train, selection = splits["train"], splits[config.selection_split]
        if not train:
            raise ConfigError(f"env {type(self.env).__name__} has no train items: nothing to learn from", key="train")
        if not selection:
            raise ConfigError(f"env {type(self.env).__name__} has no {config.selection_split!r} items: the gate needs "
                              "held-out items (set selection_split to a split that has some)", key="selection_split")
        fingerprint = self._fingerprint(splits)
        initial = self.initial_skill if self.initial_skill is not None else self.env.get_initial_skill() or ""
        record = self._config_record(fingerprint, initial)
        state = self._load_state(out)
        if state is not None:
            self._check_resumable(out, record)
        out.mkdir(parents=True, exist_ok=True)
        write_json_atomic(out / "config.json", record)
        self.meter = CallMeter(self.backend, Budget(max_calls=config.max_calls),
                                 on_record=lambda record, calls, tokens: self._emit("call", calls=calls, tokens=tokens))
        cache = ReplayCache(out / "replay_cache.jsonl")
        # the run's one way to replay: every rollout is the environment's episode (``_rollout``)
        replayer = Replayer(self.meter, workers=config.workers, cache=cache, seed=config.seed, rollout=self._rollout,
                            rollout_key=doc_hash(fingerprint))
        steps = self.plan([task.id for task in train])
        self._emit("train_begin", total=len(steps), completed=state.completed_steps if state else 0,
                   out_root=str(out))

        if state is None:  # step 0: the initial skill on the selection split
            self._step, self._stage = 0, "selection"
            self._emit("evaluate", split=config.selection_split, skill="initial")
            results = self._replay(selection, initial, replayer)
            baseline = self._scores(results)
            state = TrainState(initial_skill=initial, current_skill=initial, best_skill=initial,
                               best_score=baseline.gate, baseline_selection=baseline, best_selection=baseline,
                               selection_scores={sha256_text(initial): baseline})
            write_text_atomic(out / "skills" / "skill_v0000.md", initial)
            write_json_atomic(out / "steps" / "step_0000" / "selection.json",
                              {"format": STEP_FORMAT, "step": 0, "scores": _scores_dict(baseline),
                               "results": _dump(results)})
            cache.save()
            self._commit(out, state)

        for number, (epoch, batch, ids) in enumerate(steps, start=1):
            if number <= state.completed_steps:
                continue
            self._run_step(out, state, number=number, epoch=epoch, batch=batch, ids=ids, total=len(steps),
                           selection=selection, replayer=replayer)

        test = None
        if config.eval_test and splits.get(config.test_split):
            test_tasks = splits[config.test_split]
            self._step, self._stage = len(steps), "test"
            self._emit("evaluate", split=config.test_split, skill="initial")
            baseline_test = self._scores(self._replay(test_tasks, state.initial_skill, replayer))
            self._emit("evaluate", split=config.test_split, skill="best")
            best_test = self._scores(self._replay(test_tasks, state.best_skill, replayer))
            cache.save()
            test = {"split": config.test_split, "baseline": _scores_dict(baseline_test),
                    "best": _scores_dict(best_test)}
        summary = {
            "format": SUMMARY_FORMAT,
            "metric": config.gate_metric,
            "steps_total": len(steps),
            "steps_completed": state.completed_steps,
            "epochs": config.num_epochs,
            "accepted_steps": sum(1 for step in state.history if step["accepted"]),
            "skill_versions": state.skill_version + 1,
            "best_step": state.best_step,
            "best_selection_score": state.best_score,
            "baseline_selection_score": state.baseline_selection.gate,
            "selection": {"split": config.selection_split, "baseline": _scores_dict(state.baseline_selection),
                          "best": _scores_dict(state.best_selection)},
            "test": test,
            "best_skill_sha256": sha256_text(state.best_skill),
        }
        write_json_atomic(out / "summary.json", summary)
        self._emit("train_end", summary=summary)
        return summary


def steps_planned(train_items: int, config: SkillOptConfig) -> int:
    """Steps of a run over ``train_items`` train items: num_epochs x ceil(train_items / batch_size)."""
    return config.num_epochs * math.ceil(train_items / config.batch_size)


__all__ = ["RoleRouterBackend", "SkillOptConfig", "SkillOptTrainer", "TrainState", "prompt_overrides_applied",
           "steps_planned"]
