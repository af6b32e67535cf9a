"""Gate rules are strategy objects: ``decide``'s ``GateSettings`` take a config name or any ``GateRule`` object."""

from __future__ import annotations

import re

import pytest

from skillopt_sleep.engine.gate import (
    RULES,
    SUPPORTED_RULES,
    GateContext,
    GateSettings,
    PairedRule,
    RuleVerdict,
    StrictRule,
    compare_tasks,
    decide,
    rule_for,
)
from skillopt_sleep.models import ReplayResult, TaskComparison


def hard_only(outcomes: dict[str, list[int]]) -> list[ReplayResult]:
    return [ReplayResult(task_id=task_id, sample=index, hard=hard, soft=float(hard))
            for task_id, hards in outcomes.items() for index, hard in enumerate(hards)]


BASE = hard_only({"t-a": [0], "t-b": [0], "t-c": [1]})
BETTER = hard_only({"t-a": [1], "t-b": [1], "t-c": [1]})


class VetoRule:
    """Rejects every candidate with a clause of its own; records what ``decide`` handed it."""

    name = "veto"

    def __init__(self) -> None:
        self.contexts: list[GateContext] = []

    def compare(self, baseline: list[ReplayResult], candidate: list[ReplayResult], metric: str,
                mixed_weight: float, request_heads: dict[str, str] | None = None) -> list[TaskComparison]:
        return compare_tasks(baseline, candidate, metric, mixed_weight, request_heads)

    def judge(self, context: GateContext) -> RuleVerdict:
        self.contexts.append(context)
        return RuleVerdict.reject("veto", f"vetoed: {context.numbers}", {"vetoed_by": "test"})


class AlwaysAcceptRule(VetoRule):
    name = "always"

    def judge(self, context: GateContext) -> RuleVerdict:
        return RuleVerdict.accept("waved through")


def gate(rule, baseline=BASE, candidate=BETTER, *, best=None, mode="on"):
    return decide(GateSettings(mode=mode, metric="hard", mixed_weight=0.3, rule=rule), baseline=baseline,
                  candidate=candidate, best_gate_score=best)


def test_a_custom_rule_object_decides_with_its_own_clause():
    veto = VetoRule()
    decision = gate(veto)
    assert decision.verdict == "reject" and decision.rule == "veto"
    assert decision.details["clause"] == "veto" and decision.details["vetoed_by"] == "test"
    assert decision.details["pending"] is False
    assert decision.reason == "vetoed: val hard score 1.000 vs baseline 0.333 (delta +0.667, 3 tasks, " \
                              "2 win / 0 loss / 1 tie)"
    assert [c.outcome for c in decision.per_task] == ["win", "win", "tie"]
    (context,) = veto.contexts
    assert context.count("win") == 2 and context.regressed() == []
    assert context.candidate_scores.gate == pytest.approx(1.0)


def test_the_shared_clauses_come_before_a_custom_rule():
    veto = VetoRule()
    assert gate(veto, mode="off").details["clause"] == "gate_off"
    assert gate(veto, candidate=hard_only({"t-a": [1]})).details["clause"] == "coverage"
    assert gate(veto, baseline=[], candidate=[]).details["clause"] == "no_tasks"
    assert veto.contexts == []


def test_a_custom_rule_acceptance_gets_the_shared_new_best_wording():
    first = gate(AlwaysAcceptRule())
    assert first.verdict == "accept_new_best" and first.reason.startswith("waved through, first best: val hard")
    below = gate(AlwaysAcceptRule(), best=1.0)
    assert below.verdict == "accept" and below.reason.startswith("waved through, below the best 1.000")
    assert below.details["clause"] == "accepted"


def test_rule_objects_decide_like_their_config_names():
    cases = [("strict", StrictRule()), ("paired", PairedRule(margin=2, alpha=0.25))]
    for name, rule in cases:
        by_name = decide(GateSettings(mode="on", metric="hard", mixed_weight=0.3, rule=name, margin=2, alpha=0.25),
                         baseline=BASE, candidate=BETTER, best_gate_score=0.5)
        assert gate(rule, best=0.5) == by_name
    assert rule_for("paired", margin=2, alpha=0.25) == PairedRule(2, 0.25)
    assert isinstance(rule_for("strict"), StrictRule)


def test_the_registry_lists_the_supported_rules():
    assert SUPPORTED_RULES == tuple(RULES) == ("strict", "paired")
    assert [rule_for(name).name for name in SUPPORTED_RULES] == ["strict", "paired"]


def test_an_unknown_rule_name_still_raises_the_same_value_error():
    message = "unknown gate rule 'lenient'; supported: 'strict', 'paired'"
    with pytest.raises(ValueError, match=re.escape(message)):
        gate("lenient")
    with pytest.raises(ValueError, match=re.escape(message)):
        rule_for("lenient")


def test_a_paired_rule_object_refuses_a_margin_or_alpha_out_of_range():
    with pytest.raises(ValueError, match="margin must be >= 0"):
        PairedRule(margin=-1)
    with pytest.raises(ValueError, match="alpha in"):
        PairedRule(alpha=1.5)


@pytest.mark.parametrize(("values", "message"), [
    ({"mode": "sideways"}, "unknown gate mode 'sideways'"),
    ({"rule": "lenient"}, "unknown gate rule 'lenient'"),
    ({"metric": "f1"}, "unknown gate metric"),
    ({"margin": -1}, "margin must be >= 0"),
    ({"rule": StrictRule(), "alpha": 1.5}, "alpha in"),  # a rule object's margin and alpha are range-checked too
], ids=["mode", "rule", "metric", "margin", "alpha-with-a-rule-object"])
def test_gate_settings_refuse_what_decide_cannot_judge_when_built(values, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        GateSettings(**{"mode": "on", "metric": "hard", "mixed_weight": 0.3, "rule": "paired", **values})


def test_the_step_settings_carry_the_config_gate_keys_as_one_gate_settings():
    from skillopt_sleep.config import SleepConfig
    from skillopt_sleep.engine.step import StepSettings

    config = SleepConfig(gate_mode="off", gate_metric="mixed", gate_mixed_weight=0.7, gate_rule="strict",
                         gate_margin=3, gate_alpha=0.1)
    settings = StepSettings.from_config(config, edit_budget=2).gate
    assert settings == GateSettings(mode="off", metric="mixed", mixed_weight=0.7, rule="strict", margin=3, alpha=0.1)
    assert settings.gate_rule == StrictRule()
    assert StepSettings.from_config(SleepConfig(gate_margin=2, gate_alpha=0.25), edit_budget=1).gate.gate_rule == \
        PairedRule(margin=2, alpha=0.25)
