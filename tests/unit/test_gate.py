"""The gate accepts only a strict held-out improvement over tonight's baseline."""

from __future__ import annotations

import pytest

from skillopt_sleep.engine.gate import decide
from skillopt_sleep.models import ReplayResult


def results(scores: dict[str, list[tuple[int, float]]]) -> list[ReplayResult]:
    return [ReplayResult(task_id=task_id, sample=index, hard=hard, soft=soft)
            for task_id, samples in scores.items() for index, (hard, soft) in enumerate(samples)]


def gate(baseline, candidate, *, best=None, metric="hard", weight=0.3, mode="on", heads=None):
    return decide(mode=mode, metric=metric, mixed_weight=weight, rule="strict", baseline=baseline,
                  candidate=candidate, best_gate_score=best, request_heads=heads)


BASE = results({"t-a": [(0, 0.2)], "t-b": [(1, 1.0)], "t-c": [(0, 0.5)]})


def test_gate_accepts_a_strict_improvement_as_new_best_when_there_is_no_best_yet():
    better = results({"t-a": [(1, 1.0)], "t-b": [(1, 1.0)], "t-c": [(0, 0.5)]})
    decision = gate(BASE, better, heads={"t-a": "install deps"})
    assert decision.verdict == "accept_new_best"
    assert decision.baseline.gate == pytest.approx(1 / 3)
    assert decision.candidate.gate == pytest.approx(2 / 3)
    assert "0.667 vs baseline 0.333" in decision.reason
    outcomes = {c.task_id: c.outcome for c in decision.per_task}
    assert outcomes == {"t-a": "win", "t-b": "tie", "t-c": "tie"}
    assert decision.per_task[0].request_head == "install deps"


def test_gate_rejects_when_candidate_is_not_strictly_better():
    same = results({"t-a": [(0, 0.9)], "t-b": [(1, 1.0)], "t-c": [(0, 0.5)]})
    decision = gate(BASE, same)
    assert decision.verdict == "reject"
    assert "not a strict improvement" in decision.reason and "0.333 vs baseline 0.333" in decision.reason


def test_gate_rejects_a_worse_candidate():
    worse = results({"t-a": [(0, 0.0)], "t-b": [(0, 0.0)], "t-c": [(0, 0.0)]})
    decision = gate(BASE, worse)
    assert decision.verdict == "reject"
    assert {c.task_id: c.outcome for c in decision.per_task}["t-b"] == "loss"


def test_gate_accepts_without_new_best_when_below_the_all_time_best():
    better = results({"t-a": [(1, 1.0)], "t-b": [(1, 1.0)], "t-c": [(0, 0.5)]})
    assert gate(BASE, better, best=0.9).verdict == "accept"
    assert gate(BASE, better, best=2 / 3).verdict == "accept"
    assert gate(BASE, better, best=0.5).verdict == "accept_new_best"


def test_gate_rejects_a_better_mean_that_hides_a_regression_on_a_passing_task():
    base = results({"t-a": [(0, 0.0)], "t-b": [(0, 0.0)], "t-c": [(1, 1.0)]})
    cand = results({"t-a": [(1, 1.0)], "t-b": [(1, 1.0)], "t-c": [(0, 0.0)]})
    decision = gate(base, cand)
    assert decision.verdict == "reject"
    assert "regressed 1 task" in decision.reason and "t-c" in decision.reason


def test_soft_and_mixed_metrics_can_accept_what_hard_calls_a_tie():
    base = results({"t-a": [(0, 0.2)], "t-b": [(1, 1.0)]})
    cand = results({"t-a": [(0, 0.6)], "t-b": [(1, 1.0)]})
    assert gate(base, cand, metric="hard").verdict == "reject"
    assert gate(base, cand, metric="soft").verdict == "accept_new_best"
    mixed = gate(base, cand, metric="mixed", weight=0.5)
    assert mixed.verdict == "accept_new_best"
    assert mixed.candidate.gate == pytest.approx(((0.5 * 0 + 0.5 * 0.6) + 1.0) / 2)


def test_per_task_outcome_uses_the_mean_of_the_task_samples():
    base = results({"t-a": [(1, 1.0), (0, 0.0)]})
    cand = results({"t-a": [(1, 1.0), (1, 1.0)]})
    decision = gate(base, cand)
    assert decision.per_task[0].outcome == "win"
    assert len(decision.per_task[0].baseline) == 2


def test_gate_off_accepts_greedily_without_val_results():
    decision = gate([], [], mode="off")
    assert decision.verdict == "accept"
    assert decision.mode == "off"
    assert "without val scoring" in decision.reason


def test_gate_rejects_when_a_val_call_failed():
    cand = results({"t-a": [(1, 1.0)], "t-b": [(1, 1.0)], "t-c": [(1, 1.0)]})
    cand[2] = cand[2].model_copy(update={"error": "HTTP 503", "hard": 0, "soft": 0.0})
    decision = gate(BASE, cand)
    assert decision.verdict == "reject"
    assert "1 of 6 val calls failed" in decision.reason
    assert decision.candidate.n == 2


def test_gate_rejects_with_no_held_out_tasks():
    decision = gate([], [])
    assert decision.verdict == "reject"
    assert decision.reason == "no held-out tasks"


def test_gate_rejects_when_baseline_and_candidate_cover_different_tasks():
    cand = results({"t-a": [(1, 1.0)], "t-b": [(1, 1.0)]})
    decision = gate(BASE, cand)
    assert decision.verdict == "reject"
    assert "same val tasks" in decision.reason and "t-c" in decision.reason


def test_gate_refuses_unknown_rules_and_metrics():
    with pytest.raises(ValueError, match="unknown gate rule"):
        decide(mode="on", metric="hard", mixed_weight=0.3, rule="lenient", baseline=BASE, candidate=BASE,
               best_gate_score=None)
    with pytest.raises(ValueError, match="unknown gate metric"):
        gate(BASE, BASE, metric="f1")
