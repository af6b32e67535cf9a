"""The gate accepts only a strict held-out improvement over tonight's baseline."""

from __future__ import annotations

import pytest

from skillopt_sleep.engine.gate import GateSettings, decide
from skillopt_sleep.models import ReplayResult


def results(scores: dict[str, list[tuple[int, float]]]) -> list[ReplayResult]:
    return [ReplayResult(task_id=task_id, sample=index, hard=hard, soft=soft)
            for task_id, samples in scores.items() for index, (hard, soft) in enumerate(samples)]


def gate(baseline, candidate, *, best=None, metric="hard", weight=0.3, mode="on", heads=None):
    return decide(GateSettings(mode=mode, metric=metric, mixed_weight=weight, rule="strict"), baseline=baseline,
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
    assert decision.verdict == "reject" and decision.details["clause"] == "no_tasks"
    assert decision.reason.startswith("no held-out task with validated checks")
    assert decision.details["pending"] is True  # nothing says the candidate is worse: re-test it next night


def test_gate_rejects_when_baseline_and_candidate_cover_different_tasks():
    cand = results({"t-a": [(1, 1.0)], "t-b": [(1, 1.0)]})
    decision = gate(BASE, cand)
    assert decision.verdict == "reject"
    assert "same val tasks" in decision.reason and "t-c" in decision.reason


def test_gate_refuses_unknown_rules_and_metrics():
    with pytest.raises(ValueError, match="unknown gate rule"):
        decide(GateSettings(mode="on", metric="hard", mixed_weight=0.3, rule="lenient"), baseline=BASE,
               candidate=BASE, best_gate_score=None)
    with pytest.raises(ValueError, match="unknown gate metric"):
        gate(BASE, BASE, metric="f1")


# --------------------------------------------------------------------------- rule "paired"

from skillopt_sleep.config import SleepConfig  # noqa: E402
from skillopt_sleep.engine.gate import (  # noqa: E402
    DEFAULT_ALPHA,
    DEFAULT_MARGIN,
    DEFAULT_SAMPLES,
    flaky_task_ids,
    paired_outcome,
    replace_task_results,
    sign_test_p_value,
    tasks_to_resample,
)


def paired(baseline, candidate, *, margin=1, alpha=0.25, metric="hard", weight=0.3, best=None):
    settings = GateSettings(mode="on", metric=metric, mixed_weight=weight, rule="paired", margin=margin, alpha=alpha)
    return decide(settings, baseline=baseline, candidate=candidate, best_gate_score=best)


def hard_only(outcomes: dict[str, list[int]]) -> list[ReplayResult]:
    return results({task_id: [(hard, float(hard)) for hard in hards] for task_id, hards in outcomes.items()})


def test_sign_test_p_values_match_hand_computed_binomial_tails():
    # P(X >= w) for X ~ Binomial(n, 1/2): sum of C(n, k) for k >= w, over 2^n.
    assert sign_test_p_value(1, 0) == 0.5            # 1/2
    assert sign_test_p_value(2, 0) == 0.25           # 1/4
    assert sign_test_p_value(3, 0) == 0.125          # 1/8
    assert sign_test_p_value(2, 1) == 0.5            # (3 + 1)/8
    assert sign_test_p_value(3, 1) == 5 / 16         # (4 + 1)/16
    assert sign_test_p_value(4, 1) == 6 / 32         # (5 + 1)/32
    assert sign_test_p_value(5, 2) == 29 / 128       # (21 + 7 + 1)/128
    assert sign_test_p_value(0, 3) == 1.0            # every outcome has X >= 0
    assert sign_test_p_value(0, 0) == 1.0            # no evidence at all
    with pytest.raises(ValueError):
        sign_test_p_value(-1, 2)


def test_paired_gate_accepts_enough_consistent_wins_and_reports_the_evidence():
    base = hard_only({"t-a": [0], "t-b": [0], "t-c": [0], "t-d": [1]})
    cand = hard_only({"t-a": [1], "t-b": [1], "t-c": [1], "t-d": [1]})
    decision = paired(base, cand, alpha=0.25)
    assert decision.verdict == "accept_new_best"
    assert decision.rule == "paired"
    details = decision.details
    assert (details["wins"], details["losses"], details["ties"]) == (3, 0, 1)
    assert details["p_value"] == 0.125 and details["clause"] == "accepted"
    assert details["margin"] == 1 and details["alpha"] == 0.25
    assert details["protected"] == ["t-d"] and details["regressions"] == []
    assert details["pending"] is False
    assert "p = 0.125" in decision.reason


def test_paired_gate_blocks_by_the_sign_test_and_keeps_the_candidate_pending():
    base = hard_only({"t-a": [0], "t-b": [0], "t-c": [0]})
    cand = hard_only({"t-a": [1], "t-b": [0], "t-c": [0]})
    decision = paired(base, cand, alpha=0.25)  # 1 win, 0 loss: p = 0.5 > 0.25
    assert decision.verdict == "reject"
    assert decision.details["clause"] == "sign_test"
    assert decision.details["pending"] is True
    assert "pending" in decision.reason
    assert paired(base, cand, alpha=0.5).verdict == "accept_new_best"


def test_paired_gate_blocks_by_the_margin_clause():
    base = hard_only({"t-a": [0], "t-b": [0], "t-c": [0], "t-d": [0]})
    cand = hard_only({"t-a": [1], "t-b": [1], "t-c": [0], "t-d": [0]})
    assert paired(base, cand, margin=2, alpha=0.5).verdict == "accept_new_best"
    decision = paired(base, cand, margin=3, alpha=0.5)
    assert decision.verdict == "reject"
    assert decision.details["clause"] == "margin"
    assert decision.details["pending"] is True


def test_a_tie_everywhere_is_pending_and_more_losses_than_wins_is_not():
    base = hard_only({"t-a": [0], "t-b": [1]})
    tie = paired(base, hard_only({"t-a": [0], "t-b": [1]}))
    assert tie.verdict == "reject" and tie.details["pending"] is True and tie.details["clause"] == "margin"
    soft_base = results({"t-a": [(0, 0.8)], "t-b": [(0, 0.5)]})
    worse = paired(soft_base, results({"t-a": [(0, 0.2)], "t-b": [(0, 0.5)]}), metric="soft")
    assert worse.verdict == "reject"
    assert worse.details["losses"] == 1 and worse.details["pending"] is False
    assert "more losses than wins" in worse.reason


def test_paired_gate_rejects_a_regression_on_a_protected_task_whatever_the_wins():
    base = hard_only({"t-a": [0], "t-b": [0], "t-c": [0], "t-d": [1, 1, 1]})
    cand = hard_only({"t-a": [1], "t-b": [1], "t-c": [1], "t-d": [1, 0, 1]})
    decision = paired(base, cand, alpha=0.5)
    assert decision.verdict == "reject"
    assert decision.details["clause"] == "regression"
    assert decision.details["regressions"] == ["t-d"]
    assert decision.details["pending"] is False
    # t-d is no loss (the candidate's samples do not all score below the baseline's) yet it still blocks
    assert {c.task_id: c.outcome for c in decision.per_task}["t-d"] == "tie"


def test_a_task_the_baseline_only_sometimes_passes_is_not_protected():
    base = hard_only({"t-a": [0], "t-b": [0], "t-c": [1, 0, 1]})
    cand = hard_only({"t-a": [1], "t-b": [1], "t-c": [0, 1, 0]})
    decision = paired(base, cand, alpha=0.25)
    assert decision.details["protected"] == []
    assert decision.verdict == "accept_new_best"


def test_a_paired_win_needs_every_candidate_sample_above_every_baseline_sample():
    assert paired_outcome(hard_only({"t": [0, 0, 0]}), hard_only({"t": [1, 1, 1]}), "hard", 0.3) == "win"
    assert paired_outcome(hard_only({"t": [0, 0, 0]}), hard_only({"t": [1, 1, 0]}), "hard", 0.3) == "tie"
    assert paired_outcome(hard_only({"t": [1, 1]}), hard_only({"t": [0, 0]}), "hard", 0.3) == "loss"
    assert paired_outcome(hard_only({"t": [1, 0]}), [], "hard", 0.3) == "n/a"


def test_soft_only_rise_is_a_tie_with_an_llm_judge_but_a_win_with_deterministic_judges():
    base = [ReplayResult(task_id="t-a", hard=0, soft=0.3)]
    cand = [ReplayResult(task_id="t-a", hard=0, soft=0.9)]
    assert paired_outcome(base, cand, "soft", 0.3) == "win"
    assert paired_outcome(base, cand, "mixed", 0.3) == "win"
    llm_base = [base[0].model_copy(update={"llm_judged": True})]
    llm_cand = [cand[0].model_copy(update={"llm_judged": True})]
    assert paired_outcome(llm_base, llm_cand, "soft", 0.3) == "tie"
    decision = paired(llm_base, llm_cand, metric="soft", alpha=0.5)
    assert decision.verdict == "reject" and decision.details["llm_ties"] == ["t-a"]
    # a hard win still counts when an LLM judged the task
    llm_win = [cand[0].model_copy(update={"llm_judged": True, "hard": 1})]
    assert paired_outcome(llm_base, llm_win, "soft", 0.3) == "win"


def test_flaky_tasks_are_those_whose_samples_disagree_on_the_hard_score():
    scored = hard_only({"t-a": [1, 0, 1], "t-b": [1, 1], "t-c": [0], "t-d": [0, 0]})
    scored.append(ReplayResult(task_id="t-b", sample=2, error="HTTP 503"))  # a failed call is no sample
    scored += [ReplayResult(task_id="t-e", sample=0, hard=1, soft=0.2),
               ReplayResult(task_id="t-e", sample=1, hard=1, soft=0.9)]  # soft disagreement only
    assert flaky_task_ids(scored) == {"t-a"}


def test_resampling_targets_wins_losses_regressions_and_flaky_tasks_below_the_sample_count():
    base = hard_only({"t-win": [0], "t-loss": [1], "t-tie": [1], "t-flaky": [1, 0], "t-done": [0, 0, 0]})
    cand = hard_only({"t-win": [1], "t-loss": [0], "t-tie": [1], "t-flaky": [1, 1], "t-done": [1, 1, 1]})
    wanted = tasks_to_resample(base, cand, metric="hard", mixed_weight=0.3, gate_samples=3)
    assert wanted == ["t-win", "t-loss", "t-flaky"]
    assert tasks_to_resample(base, cand, metric="hard", mixed_weight=0.3, gate_samples=1) == []


def test_replace_task_results_swaps_a_resampled_task_and_keeps_the_others():
    first = hard_only({"t-a": [0], "t-b": [1]})
    more = hard_only({"t-a": [0, 1, 1]})
    merged = replace_task_results(first, more)
    assert [(r.task_id, r.sample, r.hard) for r in merged] == [
        ("t-a", 0, 0), ("t-a", 1, 1), ("t-a", 2, 1), ("t-b", 0, 1)]


def test_a_flaky_task_resampled_stops_looking_like_a_win():
    base = hard_only({"t-a": [0], "t-b": [0], "t-c": [0]})
    cand = hard_only({"t-a": [1], "t-b": [1], "t-c": [0]})
    assert paired(base, cand, alpha=0.25).verdict == "accept_new_best"  # 2 wins on one sample each
    base = replace_task_results(base, hard_only({"t-b": [0, 1, 0]}))
    cand = replace_task_results(cand, hard_only({"t-b": [1, 0, 1]}))
    decision = paired(base, cand, alpha=0.25)
    assert decision.details["wins"] == 1 and decision.details["flaky"] == ["t-b"]
    assert decision.verdict == "reject"


def test_strict_rule_is_unchanged_by_the_paired_settings():
    base = hard_only({"t-a": [0], "t-b": [0]})
    cand = hard_only({"t-a": [1], "t-b": [0]})  # one win: strict accepts, paired at alpha 0.25 does not
    strict = decide(GateSettings(mode="on", metric="hard", mixed_weight=0.3, rule="strict", margin=5, alpha=0.0),
                    baseline=base, candidate=cand, best_gate_score=None)
    assert strict.verdict == "accept_new_best" and strict.details["clause"] == "accepted"
    assert "p_value" not in strict.details
    assert paired(base, cand, alpha=0.25).verdict == "reject"


def test_paired_gate_shares_the_failed_call_and_coverage_checks():
    cand = hard_only({"t-a": [1], "t-b": [1], "t-c": [1]})
    cand[0] = cand[0].model_copy(update={"error": "timeout"})
    failed = paired(BASE, cand)
    assert failed.verdict == "reject" and failed.details["clause"] == "failed_calls"
    assert failed.details["pending"] is False
    uncovered = paired(BASE, hard_only({"t-a": [1]}))
    assert uncovered.details["clause"] == "coverage"


def test_paired_gate_refuses_a_negative_margin_or_an_alpha_outside_zero_one():
    with pytest.raises(ValueError, match="margin"):
        paired(BASE, BASE, margin=-1)
    with pytest.raises(ValueError, match="alpha"):
        paired(BASE, BASE, alpha=1.5)


def test_config_defaults_select_the_paired_gate_with_the_gate_module_defaults():
    config = SleepConfig()
    assert config.gate_rule == "paired"
    assert (config.gate_margin, config.gate_alpha, config.gate_samples) == (
        DEFAULT_MARGIN, DEFAULT_ALPHA, DEFAULT_SAMPLES)
    assert SleepConfig(gate_rule="strict").gate_rule == "strict"
