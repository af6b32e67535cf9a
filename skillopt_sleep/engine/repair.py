"""Gate repair and the support test: leave-one-out replays that find the edits behind a gate's decision.

Gate repair: when a candidate won some val tasks but lost others, find the edits to blame and gate the rest.

A candidate carries up to L edits (the edit budget). When one of them breaks a val task and another fixes one,
the gate blocks the whole candidate (a loss, or a regression of a protected task), and the good edit is lost
with the bad one. Repair, at most once per step (``gate_repair``, default on):

1. ``lost_tasks``: the val tasks the candidate lost (``paired``/``strict`` outcome ``loss``) or regressed (the
   baseline passed them in every sample, the candidate failed one). Repair runs only when the gate rejected the
   candidate, it won at least one task, lost between 1 and ``MAX_LOST_TASKS`` tasks, each loss resting on at least
   ``MIN_SAMPLES`` samples per side (so never with ``gate_samples`` 1), and it carries at least two applied edits.
2. ``blame``: leave-one-out on the lost tasks only. For each applied edit, the candidate without that edit is
   replayed on the lost tasks (same samples and temperature as the candidate had there); the edit is blamed for
   every lost task that is neither lost nor regressed without it. Cost: applied edits x lost tasks x samples
   target calls (3 x 1 x 1 in a typical night).
3. When some but not all edits are blamed, the step builds the candidate without the blamed edits, replays it on
   every val task (fresh candidate replays; the baseline's are reused) and asks the gate again. That second
   decision is final; its ``details["repair"]`` records the first decision, the lost tasks, the blamed edits
   and the calls spent.

The second test uses the same val tasks whose losses chose what to drop, so it is not a fresh test of the
lost tasks; it is a fresh test of everything else, and the repaired candidate is a strict subset of the tested
one. The blamed edits go to the rejected-edit ledger like the edits of a rejected candidate.

The support test (``support``) is the mirror image for an accepted candidate: every adopted line must earn its
place. When the candidate carries an optimizer edit beside other edits, the candidate without that edit is
replayed on the val tasks it won; if it still wins them all, the edit rode along on the others' wins (e.g. the
optimizer's own prompt instruction copied into the memory beside a winning user rule) and is dropped, after the
candidate without it passes the gate once more. The users' own rules are exempt: the user stated them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from skillopt_sleep.engine.gate import is_regression, paired_outcome
from skillopt_sleep.engine.val_pool import touches
from skillopt_sleep.models import EditRecord, GateDecision, ReplayResult, TaskRecord

#: Most lost val tasks repair will look into: beyond that the candidate is not a near miss.
MAX_LOST_TASKS = 3
#: Fewest samples per side of a lost task before repair blames an edit for it. With one sample a loss is often
#: noise, and repair's second test then lets more no-op and harmful candidates through (``benchmarks/repair_sim.py``,
#: ``docs/benchmarks.md``: at gate_samples 1 and 10 val tasks, harmful + harmful accepted 9.0% -> 16.4%).
MIN_SAMPLES = 2

#: ``replay(tasks, edits, samples) -> results``: replays ``tasks`` with the documents built from ``edits``.
Replay = Callable[[list[TaskRecord], list[EditRecord], int], list[ReplayResult]]


class Blame(BaseModel):
    """What leave-one-out found. blamed: indexes into the applied edits; fixes: edit index -> lost task ids that
    were neither lost nor regressed without that edit; calls: replays made (cache hits included)."""

    model_config = ConfigDict(extra="forbid")

    blamed: list[int] = Field(default_factory=list)
    fixes: dict[int, list[str]] = Field(default_factory=dict)
    calls: int = 0


def lost_tasks(decision: GateDecision) -> list[str]:
    """Val task ids the candidate lost or regressed on, in the decision's per-task order."""
    return [comparison.task_id for comparison in decision.per_task
            if comparison.outcome == "loss" or is_regression(comparison)]


def wants_repair(decision: GateDecision, applied: int) -> str | None:
    """Why repair should not run (None when it should): see the module docstring, step 1. applied: the number
    of edits that changed the candidate."""
    if decision.mode != "on" or decision.verdict != "reject":
        return "the gate did not reject a tested candidate"
    if decision.details.get("clause") not in ("regression", "margin", "sign_test", "mean"):
        return f"rejected by clause {decision.details.get('clause')!r}, not by its scores"
    if decision.details.get("wins", 0) < 1:
        return "the candidate won no val task: nothing worth keeping"
    lost = lost_tasks(decision)
    if not lost:
        return "the candidate lost no val task: nothing to blame"
    if len(lost) > MAX_LOST_TASKS:
        return f"the candidate lost {len(lost)} val tasks (more than {MAX_LOST_TASKS}): not a near miss"
    comparisons = {comparison.task_id: comparison for comparison in decision.per_task}
    thin = [task_id for task_id in lost if min(len(comparisons[task_id].baseline),
                                               len(comparisons[task_id].candidate)) < MIN_SAMPLES]
    if thin:
        return (f"the loss on {', '.join(thin)} rests on fewer than {MIN_SAMPLES} samples per side "
                "(gate_samples 1): too little to blame an edit")
    if applied < 2:
        return "the candidate has a single edit: nothing to keep without it"
    return None


def blame(applied: list[EditRecord], decision: GateDecision, val: list[TaskRecord], *, replay: Replay,
          metric: str, mixed_weight: float) -> Blame:
    """Leave-one-out on the lost val tasks (module docstring, step 2).

    applied: the candidate's applied edits, in application order; decision: the gate's rejection of that
    candidate (its ``per_task`` gives the baseline samples and how many candidate samples each task had);
    replay: see ``Replay``. Raises what ``replay`` raises (``BackendError``, ``BudgetExhausted``).
    """
    lost = lost_tasks(decision)
    by_id = {task.id: task for task in val}
    comparisons = {comparison.task_id: comparison for comparison in decision.per_task}
    tasks = [by_id[task_id] for task_id in lost if task_id in by_id]
    samples = max((len(comparisons[task.id].candidate) for task in tasks), default=1)
    out = Blame()
    for index in range(len(applied)):
        without = [edit for position, edit in enumerate(applied) if position != index]
        results = replay(tasks, without, samples)
        out.calls += len(results)
        fixed = []
        for task in tasks:
            base = comparisons[task.id].baseline
            cand = [result for result in results if result.task_id == task.id]
            probe = comparisons[task.id].model_copy(update={"candidate": cand})
            if paired_outcome(base, cand, metric, mixed_weight) != "loss" and not is_regression(probe):
                fixed.append(task.id)
        if fixed:
            out.blamed.append(index)
            out.fixes[index] = fixed
    return out


def won_tasks(decision: GateDecision) -> list[str]:
    """Val task ids the candidate won, in the decision's per-task order."""
    return [comparison.task_id for comparison in decision.per_task if comparison.outcome == "win"]


def support(applied: list[EditRecord], decision: GateDecision, val: list[TaskRecord], *, replay: Replay,
            candidates: list[int], metric: str, mixed_weight: float) -> list[int]:
    """The support test of an accepted candidate: which of the edits at ``candidates`` (indexes into ``applied``)
    are unsupported, i.e. the candidate without the edit still wins every val task it won (leave-one-out on the won
    tasks only, same samples as the candidate had there, the tasks that test what the edit states first, stopping at
    the first task the candidate no longer wins without it). Returns their indexes; [] when the candidate won
    nothing. Cost: at most len(candidates) x won tasks x samples target calls, usually one task per supported edit.
    Raises what ``replay`` raises."""
    won = won_tasks(decision)
    by_id = {task.id: task for task in val}
    comparisons = {comparison.task_id: comparison for comparison in decision.per_task}
    tasks = [by_id[task_id] for task_id in won if task_id in by_id]
    if not tasks:
        return []
    samples = max(len(comparisons[task.id].candidate) for task in tasks)
    unsupported = []
    for index in candidates:
        without = [edit for position, edit in enumerate(applied) if position != index]
        # the tasks that test what the edit states first: losing one of them settles it (one call, usually)
        ordered = sorted(tasks, key=lambda task: not touches(task, [applied[index]]))
        for task in ordered:
            results = replay([task], without, samples)
            if paired_outcome(comparisons[task.id].baseline, results, metric, mixed_weight) != "win":
                break
        else:
            unsupported.append(index)
    return unsupported


def repair_report(first: GateDecision, applied: list[EditRecord], found: Blame, *, calls: int,
                  outcome: str) -> dict[str, Any]:
    """``GateDecision.details["repair"]``: the first decision, the lost tasks, the blamed edits (target, op,
    content head, the lost tasks they fixed), the calls spent (blame + the second val replay) and what repair
    did (``outcome``)."""
    return {
        "first_verdict": first.verdict,
        "first_clause": first.details.get("clause"),
        "first_reason": first.reason,
        "lost_tasks": lost_tasks(first),
        "blamed": [{"target": applied[index].target, "op": applied[index].op,
                    "content": (applied[index].content or applied[index].anchor or "")[:200],
                    "fixes": found.fixes[index]} for index in found.blamed],
        "kept": len(applied) - len(found.blamed),
        "calls": calls,
        "outcome": outcome,
    }
