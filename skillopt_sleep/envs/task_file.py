"""``TaskFileEnv``: the tasks mined from real sessions, as an environment.

Input: a JSONL file of ``TaskRecord``s, one per line: what ``skillopt-sleep harvest --output FILE`` writes, and a
night's ``tasks.jsonl``. Splits are the records' own ``split`` (train / val / test). An episode is exactly a
night's replay (``engine.replay.replay_one``): one target call with the ``target_system.md`` system prompt holding
the skill document and the fixed memory, scored by the task's judges (``engine/judges.py``: rule checks,
reference, and the rubric through a ``judge`` call). So on the same tasks the trainer and the night see the same
scores.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from skillopt_sleep.backends.base import Backend, CallMeter
from skillopt_sleep.documents.block import new_skill_document
from skillopt_sleep.documents.targets import SKILL_DESCRIPTION, SKILL_NAME, prompt_view
from skillopt_sleep.engine.judges import make_rubric_judge
from skillopt_sleep.engine.replay import doc_hash, replay_one, system_prompt
from skillopt_sleep.envs.base import RolloutClient, RolloutResult
from skillopt_sleep.errors import ConfigError
from skillopt_sleep.models import TaskRecord

#: Most tokens of one target answer (the night's replay uses the same).
MAX_TOKENS = 400


def as_rollout_client(client: Any) -> RolloutClient:
    """``client`` as a ``RolloutClient``: itself, or a ``CallMeter`` / bare ``Backend`` wrapped (so an environment
    can also be driven directly, outside the trainer)."""
    if isinstance(client, RolloutClient):
        return client
    if isinstance(client, CallMeter):
        return RolloutClient(client)
    return RolloutClient(CallMeter(client))


def load_task_file(path: Path) -> tuple[list[TaskRecord], dict[str, int]]:
    """Read TaskRecords from a JSONL file; return (tasks in file order, skipped lines by reason).

    Reasons: ``bad_json``, ``not_an_object``, ``invalid_task`` (does not validate as a TaskRecord),
    ``duplicate_id`` (a later record with an id already read), ``not_replayable`` (a task mining kept as evidence
    only: ``TaskRecord.not_replayable`` says why; a text episode of it would mean nothing). Blank lines are ignored.
    Raises ConfigError when the file cannot be read.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read the task file {path}: {exc.strerror or exc}; write one with "
                          "'skillopt-sleep harvest --output FILE'", key="tasks") from None
    tasks: list[TaskRecord] = []
    seen: set[str] = set()
    skipped: dict[str, int] = {}

    def skip(reason: str) -> None:
        skipped[reason] = skipped.get(reason, 0) + 1

    for line in raw.splitlines():
        if not line.strip():
            continue
        try:
            row = orjson.loads(line)
        except orjson.JSONDecodeError:
            skip("bad_json")
            continue
        if not isinstance(row, dict):
            skip("not_an_object")
            continue
        try:
            task = TaskRecord.model_validate(row)
        except ValidationError:
            skip("invalid_task")
            continue
        if task.id in seen:
            skip("duplicate_id")
            continue
        if not task.replayable:
            skip("not_replayable")
            continue
        seen.add(task.id)
        tasks.append(task)
    return tasks, skipped


class TaskFileEnv:
    """Mined tasks (a TaskRecord JSONL file) as a ``SkillEnv``.

    path: the JSONL file; memory: the memory text shown to the target beside the skill document (fixed: the
    trainer trains the skill document only); initial_skill: the skill document to start from (default: the fresh
    SKILL.md a night starts from when the project has none). ``skipped``: malformed lines by reason (see
    ``load_task_file``). Raises ConfigError when the file cannot be read or holds no valid task.
    """

    def __init__(self, path: Path | str, *, memory: str = "", initial_skill: str | None = None):
        self.path = Path(path)
        self.memory = memory
        self.initial_skill = initial_skill
        self.tasks, self.skipped = load_task_file(self.path)
        if not self.tasks:
            detail = (f" (skipped lines: {', '.join(f'{k} {v}' for k, v in self.skipped.items())})"
                      if self.skipped else "")
            raise ConfigError(f"{self.path} holds no valid task{detail}; write one with "
                              "'skillopt-sleep harvest --output FILE'", key="tasks")

    def get_items(self, split: str) -> list[dict[str, Any]]:
        """The tasks of ``split`` as JSON dicts (TaskRecord fields), in file order."""
        return [task.model_dump(mode="json") for task in self.tasks if task.split == split]

    def get_initial_skill(self) -> str:
        return self.initial_skill if self.initial_skill is not None else new_skill_document(SKILL_NAME,
                                                                                            SKILL_DESCRIPTION)

    def task_for(self, item: dict[str, Any]) -> TaskRecord:
        """The item is a TaskRecord already: the optimizer sees its request, rules and reactions."""
        return TaskRecord.model_validate(item)

    def fingerprint(self) -> str:
        """Class, memory and every task (ids, requests, judges, splits) hashed."""
        tasks = orjson.dumps([task.model_dump(mode="json") for task in self.tasks], option=orjson.OPT_SORT_KEYS)
        return f"TaskFileEnv|memory={doc_hash(self.memory)}|tasks={doc_hash(tasks.decode())}"

    def rollout_one(self, *, item: dict[str, Any], skill: str, target_client: Backend) -> RolloutResult:
        """Replay the task once with ``skill`` and the memory, scored by its judges (a rubric through a
        ``judge`` call on ``target_client``). A failed target call gives ``RolloutResult(error=...)``."""
        task = TaskRecord.model_validate(item)
        client = as_rollout_client(target_client)
        system = system_prompt(skill, prompt_view(self.memory))
        result = replay_one(task, 0, system=system, meter=client, temperature=None, seed=None, max_tokens=MAX_TOKENS,
                            rubric_judge=make_rubric_judge(client))
        conversation = [{"role": "system", "content": system}, {"role": "user", "content": task.request}]
        if result.response:
            conversation.append({"role": "assistant", "content": result.response})
        return RolloutResult(hard=result.hard, soft=result.soft, fail_reason=result.fail_reason,
                             conversation=conversation, response=result.response, rationale=result.rationale,
                             tools_called=result.tools_called, llm_judged=result.llm_judged, error=result.error)
