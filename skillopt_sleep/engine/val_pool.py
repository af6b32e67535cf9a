"""The gate's val tasks: tonight's, then archived ones, so that a night has the evidence to decide.

A night of eight sessions holds two to six val tasks, and most of tonight's rules have none of them. Val tasks
therefore accumulate in the task archive, and each night the gate replays up to ``gate_max_val`` of them
(``select_val``). The night hands it only tasks that are hard evidence (validated checks:
``TaskRecord.hard_evidence``); an environment's val items (the trainer) are judged by the environment itself:

1. tonight's val tasks (newest first);
2. archived val tasks whose checks test what tonight's edits demand (the keys of an edit's content, or the rule it
   states: ``mine.rulebook.line_keys``), newest first;
3. the other archived val tasks, newest first.

An archived val task whose checks demand the opposite of a rule the user stated since (the candidate carries the
newer rule: "we moved from black to ruff" against a task that wants ``black``) is stale evidence and is left out
(``stale``): it would call the user's own change a regression. Only the users' rules retire old val tasks; an
optimizer's edit never does. Tonight's val tasks are never stale.

Test tasks are never here (report only). Replaying an archived task with unchanged documents costs nothing: the
replay cache keys on the documents, the task and its judge, not on the night.
"""

from __future__ import annotations

from datetime import datetime, timezone

from skillopt_sleep.checks import check_key
from skillopt_sleep.mine.rulebook import line_keys, opposite_keys
from skillopt_sleep.models import EditRecord, TaskRecord

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _newest_first(tasks: list[TaskRecord]) -> list[TaskRecord]:
    return sorted(tasks, key=lambda task: task.last_seen or _EPOCH, reverse=True)  # stable: ties keep their order


def touches(task: TaskRecord, edits: list[EditRecord]) -> bool:
    """Some edit demands what one of the task's checks tests."""
    demanded = {key for edit in edits for key in line_keys(edit.content or "") if key[0] != "text"}
    return any(check_key(check) in demanded for check in task.judge.checks)


def stale(task: TaskRecord, stated: list[EditRecord]) -> bool:
    """One of the task's checks demands the opposite of what a newer user-stated rule edit demands."""
    opposite = {key for edit in stated for key in opposite_keys(line_keys(edit.content or ""))}
    return any(check_key(check) in opposite for check in task.judge.checks)


def select_val(tonight: list[TaskRecord], archived: list[TaskRecord], edits: list[EditRecord], *,
               limit: int, stated: list[EditRecord] | None = None) -> list[TaskRecord]:
    """The val tasks the gate replays (module docstring): at most ``limit``, each task once (tonight's copy wins
    over an archived one). stated: the edits among ``edits`` that state the users' own rules (they retire the
    archived val tasks they contradict)."""
    chosen: list[TaskRecord] = []
    seen: set[str] = set()
    archived = [task for task in archived if not stale(task, stated or [])]

    def take(tasks: list[TaskRecord]) -> None:
        for task in tasks:
            if len(chosen) >= limit:
                return
            if task.id not in seen:
                seen.add(task.id)
                chosen.append(task)

    take(_newest_first(tonight))
    older = [task for task in archived if task.id not in seen]
    take(_newest_first([task for task in older if touches(task, edits)]))
    take(_newest_first(older))
    return chosen
