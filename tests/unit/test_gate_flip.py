"""The gate's flip re-test (``gate.flip_p_value``, ``gate.tasks_to_perturb``, ``evaluate.replay_pair`` step 4,
``decide``'s perturbed samples), through ``engine/step.run_step`` with the mock simulator as target.

``HELPFUL_0`` and ``HELPFUL_1`` make the two tool val tasks pass (the mock's own rule following), so a candidate
holding both wins two val tasks. ``FlipBackend`` is the mock simulator except on the "visitor" val tasks, whose
answers it scripts: without ``HELPFUL_1`` in the memory they pass at temperature 0, and under perturbation
(temperature > 0) they pass in the samples whose seed is not 3 mod 4 (3 of seeds 0-3). ``HELPFUL_1``, a line about
something else, changes that: as a flip (``mode="flip"``) they fail at temperature 0 only, with the same pass rate
under perturbation; as a flip that costs a little (``mode="fewer"``) they also pass one perturbed sample fewer (2 of
4: p = 0.5, not a confirmed regression); as a true regression (``mode="break"``) they fail at any temperature.
"""

from __future__ import annotations

import functools
import json

import pytest

from skillopt_sleep.backends.base import CallMeter, ChatRequest
from skillopt_sleep.backends.mock import MockBackend
from skillopt_sleep.config import SleepConfig
from skillopt_sleep.documents.targets import prompt_views
from skillopt_sleep.engine.gate import (
    GateSettings,
    decide,
    flip_p_value,
    tasks_to_perturb,
)
from skillopt_sleep.engine.replay import ReplayCache, Replayer
from skillopt_sleep.engine.step import StepInput, StepSettings, _Tester, build_candidate, run_step
from skillopt_sleep.models import Check, EditRecord, Judge, ReplayResult, TaskRecord

MEMORY = "# Project notes\n\nHand-written: deploy after review.\n"
HELPFUL_0 = "- Use newtool0, not oldtool0"
HELPFUL_1 = "- Use newtool1, not oldtool1"


class FlipBackend(MockBackend):
    """The mock simulator; the visitor tasks' answers are scripted (module docstring). mode: "flip" or "break"."""

    def __init__(self, mode: str, **options):
        super().__init__(**options)
        self.mode = mode

    def _target(self, request: ChatRequest) -> str:
        asked = request.messages[-1].content
        if "visitor" not in asked:
            return super()._target(request)
        touched = HELPFUL_1 in request.messages[0].content
        if touched and (self.mode == "break" or not request.temperature):
            passes = False
        elif touched and self.mode == "fewer":
            passes = (request.seed or 0) % 4 < 2
        else:
            passes = not request.temperature or (request.seed or 0) % 4 != 3
        return "Here is my answer: hello" if passes else "Hello there"


def tool_task(split: str, index: int) -> TaskRecord:
    return TaskRecord(id=f"t-{split}-{index}", source="claude",
                      request=f"run the oldtool{index} command on this project",
                      judge=Judge(checks=[Check(op="contains", value=f"newtool{index}")]), split=split)


def visitor_task(number: int) -> TaskRecord:
    return TaskRecord(id=f"t-val-visitor-{number}", source="claude", request=f"say hello to visitor {number}",
                      judge=Judge(checks=[Check(op="contains", value="answer")]), split="val")


def reply(*contents: str) -> str:
    return json.dumps({"edits": [{"target": "memory", "op": "append", "anchor": None, "content": content,
                                  "rationale": "r", "evidence": ["t-train-0"]} for content in contents]})


def run(mode: str = "flip", visitors: int = 1, **overrides):
    backend = FlipBackend(mode, scripted={"reflect": [reply(HELPFUL_0, HELPFUL_1)]})
    settings = StepSettings(**{"edit_budget": 4, "gate_samples": 2, "propose_user_rules": False, "workers": 1,
                               "gate_repair": False, **overrides})
    val = [tool_task("val", 0), tool_task("val", 1), *(visitor_task(9 - number) for number in range(visitors))]
    result = run_step(StepInput(train=[tool_task("train", 0)], val=val, documents={"memory": MEMORY}),
                      settings=settings, replayer=Replayer(CallMeter(backend), workers=settings.workers,
                                                           cache=ReplayCache(), seed=settings.seed))
    return result, backend


def perturbed_requests(backend: MockBackend) -> list[tuple[float, int | None]]:
    return [(request.temperature, request.seed) for request in backend.requests
            if request.role == "target" and request.temperature]


# --------------------------------------------------------------------------- through the step


def test_a_flip_that_holds_under_perturbation_does_not_veto_and_is_a_tie():
    result, backend = run()
    assert result.accepted and result.gate.details["clause"] == "accepted"
    assert result.gate.details["support"]["outcome"] == "kept all"  # both lines earn their place
    # the candidate passes as many perturbed samples as the baseline (3 of 4): no drop at all, so a tie
    assert (result.gate.details["wins"], result.gate.details["losses"]) == (2, 0)
    assert result.gate.details["flips_tied"] == ["t-val-visitor-9"]
    assert [(c.task_id, c.outcome) for c in result.gate.per_task if "visitor" in c.task_id] == [
        ("t-val-visitor-9", "tie")]
    assert result.gate.details["regressions"] == []
    assert result.gate.details["flips"] == [{"task": "t-val-visitor-9", "baseline_passes": 3, "candidate_passes": 3,
                                             "samples": 4, "p_value": pytest.approx(55 / 70), "flip": True}]
    assert result.gate.details["flip_tests"] == result.gate.details["flips"]
    assert "1 flip(s) not confirmed under perturbation (t-val-visitor-9: 3 vs 3 of 4)" in result.gate.reason
    # 4 samples per side at the configured temperature, seeds 0-3 on each side
    assert sorted(perturbed_requests(backend)) == sorted([(0.7, seed) for seed in range(4)] * 2)


def test_a_flip_that_passes_fewer_perturbed_samples_does_not_veto_but_stays_a_loss():
    result, _ = run("fewer")
    [test] = result.gate.details["flips"]
    assert (test["baseline_passes"], test["candidate_passes"], test["p_value"]) == (3, 2, pytest.approx(0.5))
    # its temperature-0 outcome stands: a loss (2 wins - 1 loss = margin 1, p = 0.5)
    assert (result.gate.details["wins"], result.gate.details["losses"]) == (2, 1)
    assert result.gate.details["flips_tied"] == [] and result.accepted


def test_without_the_flip_retest_the_same_flip_vetoes_as_before():
    result, backend = run(gate_flip_samples=0)
    assert result.gate.verdict == "reject" and result.gate.details["clause"] == "regression"
    assert result.gate.details["regressions"] == ["t-val-visitor-9"]
    assert "flips" not in result.gate.details and perturbed_requests(backend) == []


def test_a_regression_confirmed_under_perturbation_still_vetoes():
    result, _ = run("break")
    assert result.gate.verdict == "reject" and result.gate.details["clause"] == "regression"
    assert result.gate.details["regressions"] == ["t-val-visitor-9"]
    assert result.gate.details["flips"] == []
    [test] = result.gate.details["flip_tests"]
    assert (test["baseline_passes"], test["candidate_passes"], test["flip"]) == (3, 0, False)
    assert test["p_value"] == pytest.approx(5 / 70)  # <= gate_flip_alpha 0.25


def test_the_flip_retest_is_metered_as_target_calls():
    # two flipped tasks, one re-tested: both runs reject, so they differ by the re-test alone
    with_flips, backend_on = run(visitors=2, gate_flip_max_tasks=1)
    without, backend_off = run(visitors=2, gate_flip_samples=0)
    extra = 2 * 4  # one task, 4 samples per side
    assert with_flips.gate.details["clause"] == without.gate.details["clause"] == "regression"
    assert with_flips.calls_by_stage["gate"] == without.calls_by_stage["gate"] + extra
    assert backend_on.calls_by_kind["target"] == backend_off.calls_by_kind["target"] + extra
    assert sum(with_flips.calls_by_stage.values()) == backend_on.calls


def test_the_flip_retest_is_bounded_per_step():
    result, backend = run(visitors=2, gate_flip_max_tasks=1)
    # both visitor tasks flipped; only the first is re-tested, the other still vetoes
    assert [test["task"] for test in result.gate.details["flips"]] == ["t-val-visitor-9"]
    assert result.gate.details["regressions"] == ["t-val-visitor-8"]
    assert result.gate.details["clause"] == "regression" and len(perturbed_requests(backend)) == 2 * 4
    none, backend = run(gate_flip_max_tasks=0)
    assert none.gate.details["clause"] == "regression" and perturbed_requests(backend) == []


def test_the_steps_tests_share_one_flip_allowance():
    # the step's tests (first test, repair's and the support test's re-gating) go through one _Tester
    settings = StepSettings(edit_budget=2, gate_samples=2, workers=1, gate_flip_max_tasks=1)
    backend = FlipBackend("fewer")
    tester = _Tester(val=[tool_task("val", 1), visitor_task(9)], texts={"memory": MEMORY}, settings=settings,
                     replayer=Replayer(CallMeter(backend), workers=1, cache=ReplayCache()), views=prompt_views,
                     gate=functools.partial(decide, settings.gate, best_gate_score=None))
    candidate, _ = build_candidate({"memory": MEMORY}, [EditRecord(target="memory", op="append", content=HELPFUL_1)])
    first, decision = tester.test(candidate)
    assert first.perturbed == ["t-val-visitor-9"] and decision.details["flips"][0]["flip"]
    assert decision.verdict == "reject" and decision.details["clause"] == "margin"  # 1 win, 1 loss: pending
    second, decision = tester.test(candidate)
    assert second.perturbed == [] and decision.details["clause"] == "regression"
    assert tester.flips_left == 0 and len(perturbed_requests(backend)) == 2 * 4


def test_gate_off_makes_no_flip_retest():
    result, backend = run(gate_mode="off")
    assert result.accepted and result.gate.details["clause"] == "gate_off"
    assert "flips" not in result.gate.details and perturbed_requests(backend) == []


def test_a_regression_the_retest_confirms_is_repaired_as_before():
    """``test_repair``'s first scenario with the flip re-test on: the mock's own sampling noise skips HARMFUL in 2
    of 4 samples (4 vs 2 passes, p = 0.21 <= 0.25), so the regression stands and repair drops HARMFUL."""
    from tests.unit.test_repair import HARMFUL, HELPFUL
    from tests.unit.test_repair import run as run_repair

    result, backend = run_repair(HELPFUL, HARMFUL, gate_flip_samples=4)
    report = result.gate.details["repair"]
    assert (report["first_clause"], report["outcome"]) == ("regression", "repaired: accept_new_best")
    # test_repair's count (8 + 4 + 2) plus the flip re-test's 4 samples x 2 sides
    assert result.calls_by_stage["gate"] == 8 + 8 + 4 + 2 == report["calls"] + 16
    assert backend.calls_by_kind["target"] == 1 + 22


# --------------------------------------------------------------------------- the test and the decision


@pytest.mark.parametrize(("baseline", "candidate", "expected"), [
    ((4, 4), (4, 4), 1.0), ((4, 4), (3, 4), 0.5), ((4, 4), (2, 4), 15 / 70), ((4, 4), (0, 4), 1 / 70),
    ((3, 4), (1, 4), 17 / 70), ((2, 4), (4, 4), 1.0), ((0, 0), (0, 4), 1.0),
])
def test_flip_p_value_is_the_one_sided_fisher_exact_test(baseline, candidate, expected):
    assert flip_p_value(*baseline, *candidate) == pytest.approx(expected)


def test_flip_p_value_refuses_impossible_counts():
    with pytest.raises(ValueError):
        flip_p_value(5, 4, 0, 4)
    with pytest.raises(ValueError):
        flip_p_value(1, 4, -1, 4)


def results(task_id: str, hards: list[int]) -> list[ReplayResult]:
    return [ReplayResult(task_id=task_id, sample=index, hard=hard, soft=float(hard))
            for index, hard in enumerate(hards)]


GATE = GateSettings(mode="on", metric="hard", mixed_weight=0.0, rule="paired")
BASELINE = [*results("win-a", [0, 0]), *results("win-b", [0, 0]), *results("flip", [1, 1])]
CANDIDATE = [*results("win-a", [1, 1]), *results("win-b", [1, 1]), *results("flip", [0, 0])]


def test_tasks_to_perturb_names_the_regressed_tasks_up_to_the_limit():
    assert tasks_to_perturb(BASELINE, CANDIDATE, limit=2) == ["flip"]
    assert tasks_to_perturb(BASELINE, CANDIDATE, limit=0) == []
    assert tasks_to_perturb(BASELINE[:4], CANDIDATE[:4], limit=2) == []
    # a regression resting on one sample per side is not re-tested (gate_samples 1 keeps the veto)
    assert tasks_to_perturb(results("flip", [1]), results("flip", [0]), limit=2) == []
    assert tasks_to_perturb(results("flip", [1, 1]), results("flip", [0]), limit=2) == []


@pytest.mark.parametrize("rule", ["paired", "strict"])
def test_both_rules_let_a_flip_through_and_a_missing_retest_veto(rule):
    gate = GateSettings(mode="on", metric="hard", mixed_weight=0.0, rule=rule)
    vetoed = decide(gate, baseline=BASELINE, candidate=CANDIDATE, best_gate_score=None)
    assert vetoed.details["clause"] == "regression"
    flipped = decide(gate, baseline=BASELINE, candidate=CANDIDATE, best_gate_score=None,
                     perturbed_baseline=results("flip", [1, 1, 0, 1]),
                     perturbed_candidate=results("flip", [1, 0, 1, 1]))
    assert flipped.verdict == "accept_new_best" and flipped.details["flips"][0]["task"] == "flip"
    assert flipped.details["flips_tied"] == ["flip"] and flipped.details["losses"] == 0  # 3 vs 3: no drop
    # perturbed samples on one side only: no test, the regression stands
    one_side = decide(gate, baseline=BASELINE, candidate=CANDIDATE, best_gate_score=None,
                      perturbed_baseline=results("flip", [1, 1, 1, 1]), perturbed_candidate=[])
    assert one_side.details["clause"] == "regression" and "flip_tests" not in one_side.details


def test_the_flip_alpha_decides_where_a_drop_is_confirmed():
    base, cand = results("flip", [1, 1, 1, 1]), results("flip", [1, 0, 1, 1])  # 4 vs 3: p = 0.5
    lenient = decide(GATE, baseline=BASELINE, candidate=CANDIDATE, best_gate_score=None,
                     perturbed_baseline=base, perturbed_candidate=cand)
    strict = decide(GateSettings(mode="on", metric="hard", mixed_weight=0.0, rule="paired", flip_alpha=0.5),
                    baseline=BASELINE, candidate=CANDIDATE, best_gate_score=None,
                    perturbed_baseline=base, perturbed_candidate=cand)
    assert lenient.details["clause"] == "accepted" and strict.details["clause"] == "regression"


def test_the_flip_settings_come_from_the_config():
    config = SleepConfig()
    assert (config.gate_flip_samples, config.gate_flip_temperature, config.gate_flip_alpha,
            config.gate_flip_max_tasks) == (4, 0.7, 0.25, 2)
    settings = StepSettings.from_config(SleepConfig(gate_flip_alpha=0.1), edit_budget=1)
    assert settings.gate.flip_alpha == 0.1
    with pytest.raises(ValueError, match="flip_alpha"):
        GateSettings(mode="on", metric="hard", mixed_weight=0.0, rule="paired", flip_alpha=1.5)


def run_stated_rule(val: list[TaskRecord]):
    """A rule the user stated ("Use newtool1, not oldtool1": its line contains HELPFUL_1, so the visitor task flips)
    as the only edit, its own train task the newtool1 one, gated on ``val``."""
    from skillopt_sleep.mine.rulebook import StatedRule

    rule = StatedRule(id="r-newtool1", keys=[("has", "newtool1")], text="Use newtool1, not oldtool1",
                      phrasings=["Use newtool1, not oldtool1"], checks=[Check(op="contains", value="newtool1")],
                      task_ids=["t-train-1"], stated=3, stated_total=3, scope="lasting")
    backend = FlipBackend("fewer", scripted={"reflect": [reply()]})  # the flip stays a loss
    settings = StepSettings(edit_budget=4, gate_samples=2, propose_user_rules=True, rule_wording="user",
                            wording_max_calls=0, workers=1, gate_repair=False)
    return run_step(StepInput(train=[tool_task("train", 1)], val=val, documents={"memory": MEMORY}, rules=[rule]),
                    settings=settings, replayer=Replayer(CallMeter(backend), workers=1, cache=ReplayCache(),
                                                         seed=settings.seed))


def test_a_stated_rule_whose_only_val_loss_is_an_unconfirmed_flip_is_judged_on_its_own_tasks():
    """The stated rule wins no val task and loses only the flip: without the flip clause the gate rejects it
    outright; with it, its own train task decides."""
    result = run_stated_rule([tool_task("val", 0), visitor_task(9)])
    details = result.gate.details
    assert (details["wins"], details["losses"]) == (0, 1) and [flip["task"] for flip in details["flips"]] == [
        "t-val-visitor-9"]
    assert details["stated_rules"]["won"] == ["t-train-1"] and details["stated_rules"]["lost"] == []
    assert result.accepted and details["clause"] == "stated_rules"
    assert "1 unconfirmed flip(s)" in result.gate.reason


def test_a_stated_rule_with_a_val_win_and_an_unconfirmed_flip_is_judged_on_its_own_tasks_too():
    """World 2 on Qwen, night 3 (``969918a``): the rule change won one val task and lost one to a flip the
    perturbation re-test did not confirm; wins - losses = 0 left it to the own-task clause, which skipped it because
    of the win. A win is more evidence for the rule, not less."""
    result = run_stated_rule([tool_task("val", 0), tool_task("val", 1), visitor_task(9)])
    details = result.gate.details
    assert (details["wins"], details["losses"]) == (1, 1)
    assert details["stated_rules"]["won"] == ["t-train-1"] and result.accepted
    assert "1 win(s)" in result.gate.reason and "1 unconfirmed flip(s)" in result.gate.reason


def test_a_flip_is_a_tie_only_where_the_candidate_passes_as_many_perturbed_samples():
    """World 3 on Qwen, night 2 (``ec6ae33``): an archived podman task passed at temperature 0 by the baseline and
    failed by the candidate passed 1 of 4 perturbed samples on either side; counted a loss, it left a night that won
    its own task with wins - losses 0. One sample fewer still counts as the loss it was at temperature 0."""
    base = [*results("win", [0, 0]), *results("flip", [1, 1])]
    cand = [*results("win", [1, 1]), *results("flip", [0, 0])]
    same = decide(GATE, baseline=base, candidate=cand, best_gate_score=None,
                  perturbed_baseline=results("flip", [0, 1, 0, 0]), perturbed_candidate=results("flip", [0, 0, 1, 0]))
    assert (same.details["wins"], same.details["losses"], same.details["ties"]) == (1, 0, 1)
    assert same.verdict == "accept_new_best" and same.details["flips_tied"] == ["flip"]
    fewer = decide(GATE, baseline=base, candidate=cand, best_gate_score=None,
                   perturbed_baseline=results("flip", [1, 1, 0, 1]), perturbed_candidate=results("flip", [1, 0, 0, 1]))
    assert (fewer.details["wins"], fewer.details["losses"]) == (1, 1) and fewer.details["flips_tied"] == []
    assert fewer.verdict == "reject" and fewer.details["clause"] == "margin"
    assert sorted(comparison.outcome for comparison in fewer.per_task) == ["loss", "win"]
