"""The gate: accept tonight's candidate documents only if they score better on held-out (val) tasks.

Rule ``strict`` (SkillOpt's gate): the candidate is replayed on the val tasks, the baseline (the current
documents) is replayed on the same val tasks in the same night, and each result gets a gate score
(``judges.gate_score``: hard, soft or mixed). The candidate is accepted only when

1. no val result carries an error (a failed call is not a score),
2. baseline and candidate cover the same, non-empty set of val tasks,
3. its mean gate score is strictly higher than the baseline's (by more than ``EPSILON``), and
4. it does not regress a task the baseline passed: a val task where every baseline sample had hard 1 must
   not have a candidate sample with hard 0 (a mean can hide such a regression).

Accepted candidates are ``accept_new_best`` when their mean also beats ``best_gate_score`` (the all-time
best; None = no best yet) and ``accept`` otherwise. Mode ``off`` accepts greedily without val scoring.
"""

from __future__ import annotations

from skillopt_sleep.engine.judges import gate_score
from skillopt_sleep.models import GateDecision, ReplayResult, Scores, TaskComparison

#: Differences of mean gate scores at or below this are ties (floating-point noise is not an improvement).
EPSILON = 1e-9
SUPPORTED_RULES = ("strict",)


def _result_gate(result: ReplayResult, metric: str, mixed_weight: float) -> float:
    return gate_score(result.hard, result.soft, metric, mixed_weight)


def summarize(results: list[ReplayResult], metric: str, mixed_weight: float) -> Scores:
    """Mean hard, soft and gate score over the results without an error; n counts those results."""
    scored = [result for result in results if result.error is None]
    if not scored:
        return Scores()
    count = len(scored)
    return Scores(
        hard=sum(result.hard for result in scored) / count,
        soft=sum(result.soft for result in scored) / count,
        gate=sum(_result_gate(result, metric, mixed_weight) for result in scored) / count,
        n=count,
    )


def _task_ids(*groups: list[ReplayResult]) -> list[str]:
    seen: dict[str, None] = {}
    for group in groups:
        for result in group:
            seen.setdefault(result.task_id, None)
    return list(seen)


def _mean_gate(results: list[ReplayResult], metric: str, mixed_weight: float) -> float | None:
    scored = [result for result in results if result.error is None]
    if not scored:
        return None
    return sum(_result_gate(result, metric, mixed_weight) for result in scored) / len(scored)


def compare_tasks(baseline: list[ReplayResult], candidate: list[ReplayResult], metric: str,
                  mixed_weight: float, request_heads: dict[str, str] | None = None) -> list[TaskComparison]:
    """One ``TaskComparison`` per val task id (baseline order first): win/loss/tie on the mean gate score of
    the task's samples; ``n/a`` when one side has no scored sample."""
    heads = request_heads or {}
    comparisons: list[TaskComparison] = []
    for task_id in _task_ids(baseline, candidate):
        base = [result for result in baseline if result.task_id == task_id]
        cand = [result for result in candidate if result.task_id == task_id]
        base_mean = _mean_gate(base, metric, mixed_weight)
        cand_mean = _mean_gate(cand, metric, mixed_weight)
        if base_mean is None or cand_mean is None:
            outcome = "n/a"
        elif cand_mean > base_mean + EPSILON:
            outcome = "win"
        elif cand_mean < base_mean - EPSILON:
            outcome = "loss"
        else:
            outcome = "tie"
        comparisons.append(TaskComparison(task_id=task_id, request_head=heads.get(task_id, ""), baseline=base,
                                          candidate=cand, outcome=outcome))
    return comparisons


def _regressed(comparison: TaskComparison) -> bool:
    """The baseline passed the task in every sample and the candidate failed it in at least one."""
    base_passed = bool(comparison.baseline) and all(result.hard == 1 for result in comparison.baseline)
    return base_passed and any(result.hard == 0 for result in comparison.candidate)


def decide(*, mode: str, metric: str, mixed_weight: float, rule: str, baseline: list[ReplayResult],
           candidate: list[ReplayResult], best_gate_score: float | None,
           request_heads: dict[str, str] | None = None) -> GateDecision:
    """Decide whether tonight's candidate documents are accepted.

    mode: ``"on"`` or ``"off"``; metric: ``"hard"``, ``"soft"`` or ``"mixed"``; mixed_weight: w in [0, 1];
    rule: ``"strict"``; baseline/candidate: val ``ReplayResult``s (may be empty when mode is off);
    best_gate_score: the all-time best mean gate score, or None; request_heads: task id -> request head
    for the per-task report. Returns a ``GateDecision`` whose ``reason`` states the numbers. Raises
    ValueError for an unknown mode, rule or metric.
    """
    if mode not in ("on", "off"):
        raise ValueError(f"unknown gate mode {mode!r}; supported: 'on', 'off'")
    if rule not in SUPPORTED_RULES:
        raise ValueError(f"unknown gate rule {rule!r}; supported: {', '.join(map(repr, SUPPORTED_RULES))}")
    gate_score(0.0, 0.0, metric, mixed_weight)  # validates the metric name

    base_scores = summarize(baseline, metric, mixed_weight)
    cand_scores = summarize(candidate, metric, mixed_weight)
    per_task = compare_tasks(baseline, candidate, metric, mixed_weight, request_heads)
    outcomes = [comparison.outcome for comparison in per_task]
    details: dict = {
        "baseline_gate": base_scores.gate,
        "candidate_gate": cand_scores.gate,
        "delta": cand_scores.gate - base_scores.gate,
        "best_gate_score": best_gate_score,
        "wins": outcomes.count("win"),
        "losses": outcomes.count("loss"),
        "ties": outcomes.count("tie"),
    }

    def verdict(kind: str, reason: str) -> GateDecision:
        return GateDecision(mode=mode, metric=metric, rule=rule, verdict=kind, reason=reason,
                            baseline=base_scores, candidate=cand_scores, per_task=per_task, details=details)

    if mode == "off":
        return verdict("accept", "gate off: accepted greedily, without val scoring")

    failed_base = sum(1 for result in baseline if result.error is not None)
    failed_cand = sum(1 for result in candidate if result.error is not None)
    details["failed_calls"] = failed_base + failed_cand
    if failed_base or failed_cand:
        return verdict("reject", f"{failed_base + failed_cand} of {len(baseline) + len(candidate)} val calls "
                                 f"failed (baseline {failed_base}, candidate {failed_cand}); failed calls are "
                                 "not scores, so the candidate cannot be judged")

    base_ids = set(_task_ids(baseline))
    cand_ids = set(_task_ids(candidate))
    if not base_ids and not cand_ids:
        return verdict("reject", "no held-out tasks")
    if base_ids != cand_ids:
        missing = sorted(base_ids ^ cand_ids)
        return verdict("reject", f"baseline and candidate were not replayed on the same val tasks "
                                 f"({len(missing)} differ: {', '.join(missing[:5])})")

    base_mean, cand_mean = base_scores.gate, cand_scores.gate
    numbers = (f"val {metric} score {cand_mean:.3f} vs baseline {base_mean:.3f} "
               f"(delta {cand_mean - base_mean:+.3f}, {len(base_ids)} tasks, "
               f"{details['wins']} win / {details['losses']} loss / {details['ties']} tie)")
    if not cand_mean > base_mean + EPSILON:
        return verdict("reject", f"not a strict improvement: {numbers}")
    regressed = [comparison.task_id for comparison in per_task if _regressed(comparison)]
    details["regressed_tasks"] = regressed
    if regressed:
        return verdict("reject", f"regressed {len(regressed)} task(s) the baseline passed "
                                 f"({', '.join(regressed[:5])}): {numbers}")
    if best_gate_score is None:
        return verdict("accept_new_best", f"strict improvement, first best: {numbers}")
    if cand_mean > best_gate_score + EPSILON:
        return verdict("accept_new_best", f"strict improvement and new best (previous best "
                                          f"{best_gate_score:.3f}): {numbers}")
    return verdict("accept", f"strict improvement, below the best {best_gate_score:.3f}: {numbers}")
