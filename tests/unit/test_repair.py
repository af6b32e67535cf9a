"""Gate repair (``engine/repair.py`` through ``engine/step.run_step``), with the mock simulator as target.

The mock target obeys a memory rule when the rule shares a content word with the request and then removes the
literals the rule's checks forbid from its answer. ``HELPFUL`` makes val task ``t-val-0`` pass (it wants "newtool0");
``HARMFUL`` applies to the "visitor" task only and removes the word "answer" its judge wants, so it regresses a
task the baseline passes in every sample.
"""

from __future__ import annotations

import json

from skillopt_sleep.backends.base import CallMeter
from skillopt_sleep.backends.mock import MockBackend
from skillopt_sleep.engine import repair
from skillopt_sleep.engine.gate import GateSettings, decide
from skillopt_sleep.engine.replay import ReplayCache, Replayer
from skillopt_sleep.engine.step import StepInput, StepSettings, run_step
from skillopt_sleep.models import Check, Judge, ReplayResult, TaskRecord

MEMORY = "# Project notes\n\nHand-written: deploy after review.\n"
# as the optimizer writes them ("- " is the one bullet format screening gives every one-line edit)
HELPFUL = "- Use newtool0, not oldtool0"
HARMFUL = "- When greeting a visitor, do not write answer"
# "never answer" (a verb: do not answer) names no literal for the rule reader, so it forbids nothing; "never write
# answer" forbids the word "answer" (``grammar.statements.checks_for_rule``), and the mock target reads rules as the
# miner does
ALSO_HARMFUL = "- For each visitor, never write answer"


def tool_task(split: str) -> TaskRecord:
    return TaskRecord(id=f"t-{split}-0", source="claude", request="run the oldtool0 command on this project",
                      judge=Judge(checks=[Check(op="contains", value="newtool0")]), split=split)


def visitor_task() -> TaskRecord:
    return TaskRecord(id="t-val-visitor", source="claude", request="say hello to visitor 9",
                      judge=Judge(checks=[Check(op="contains", value="answer")]), split="val")


def reply(*contents: str) -> str:
    return json.dumps({"edits": [{"target": "memory", "op": "append", "anchor": None, "content": content,
                                  "rationale": "r", "evidence": ["t-train-0"]} for content in contents]})


def run(*contents: str, **overrides):
    backend = MockBackend(scripted={"reflect": [reply(*contents)]})
    # the flip re-test is off here so that the call counts are repair's own (with it: tests/unit/test_gate_flip.py)
    settings = StepSettings(**{"edit_budget": 3, "gate_samples": 2, "propose_user_rules": False, "workers": 1,
                               "gate_flip_samples": 0, **overrides})
    result = run_step(StepInput(train=[tool_task("train")], val=[tool_task("val"), visitor_task()],
                                documents={"memory": MEMORY}), settings=settings,
                      replayer=Replayer(CallMeter(backend), workers=settings.workers, cache=ReplayCache(),
                                        seed=settings.seed))
    return result, backend


def test_repair_drops_the_edit_that_regressed_a_protected_task_and_accepts_the_rest():
    result, backend = run(HELPFUL, HARMFUL)
    report = result.gate.details["repair"]
    assert (report["first_verdict"], report["first_clause"]) == ("reject", "regression")
    assert report["lost_tasks"] == ["t-val-visitor"]
    assert [(entry["content"], entry["fixes"]) for entry in report["blamed"]] == [(HARMFUL, ["t-val-visitor"])]
    assert report["kept"] == 1 and report["outcome"] == "repaired: accept_new_best"
    # the second decision is the final one: one win, no regression
    assert result.accepted and result.gate.details["clause"] == "accepted"
    assert (result.gate.details["wins"], result.gate.details["losses"]) == (1, 0)
    assert HELPFUL in result.candidate["memory"] and HARMFUL not in result.candidate["memory"]
    statuses = {edit.content: (edit.status, edit.reason) for edit in result.edits}
    assert statuses[HELPFUL][0] == "applied"
    assert statuses[HARMFUL][0] == "rejected" and "t-val-visitor" in statuses[HARMFUL][1]
    assert [edit.content for edit in result.blamed] == [HARMFUL]
    # cost: 1 rollout; gate: 2 val tasks x 2 sides, both resampled to 2 samples (sample 0 cached): 4 + 4; blame:
    # 2 edits x 1 lost task x 2 samples; the repaired candidate has the documents of the blame replay without
    # HARMFUL, so only t-val-0 is new: 1 sample, then its second one (it is a win resting on one sample)
    assert result.calls_by_stage["gate"] == 8 + 4 + 2 == report["calls"] + 8
    assert backend.calls_by_kind["target"] == 1 + 14


def test_with_gate_repair_off_the_candidate_stays_rejected():
    result, _ = run(HELPFUL, HARMFUL, gate_repair=False)
    assert result.gate.verdict == "reject" and result.gate.details["clause"] == "regression"
    assert "repair" not in result.gate.details and result.blamed == []
    assert HARMFUL in result.candidate["memory"] and result.calls_by_stage["gate"] == 8


def test_repair_does_not_blame_on_one_sample_per_side():
    result, _ = run(HELPFUL, HARMFUL, gate_samples=1)
    assert result.gate.details["clause"] == "regression" and "repair" not in result.gate.details
    assert HARMFUL in result.candidate["memory"] and result.calls_by_stage["gate"] == 4


def test_repair_does_not_look_when_the_candidate_won_nothing():
    result, _ = run(HARMFUL, ALSO_HARMFUL)
    assert result.gate.details["clause"] == "regression" and result.gate.details["wins"] == 0
    assert "repair" not in result.gate.details and result.calls_by_stage["gate"] == 4 + 2


def test_repair_reports_when_no_single_edit_is_to_blame():
    # two edits each break the visitor task alone: leaving out either one still loses it
    result, _ = run(HELPFUL, HARMFUL, ALSO_HARMFUL)
    report = result.gate.details["repair"]
    assert report["outcome"] == "not repaired: no single edit to blame" and report["blamed"] == []
    assert result.gate.verdict == "reject" and result.gate.details["clause"] == "regression"
    assert HARMFUL in result.candidate["memory"] and ALSO_HARMFUL in result.candidate["memory"]
    assert report["calls"] == 3 * 2 and result.calls_by_stage["gate"] == 8 + 6
    assert all(edit.status == "applied" for edit in result.edits)


def results(task_id: str, *hards: int) -> list[ReplayResult]:
    return [ReplayResult(task_id=task_id, sample=index, response="a", hard=hard, soft=float(hard))
            for index, hard in enumerate(hards)]


def decision(baseline: list[ReplayResult], candidate: list[ReplayResult], alpha: float = 0.5):
    return decide(GateSettings(mode="on", metric="hard", mixed_weight=0.3, rule="paired", alpha=alpha),
                  baseline=baseline, candidate=candidate, best_gate_score=None)


def test_wants_repair_needs_a_win_a_few_losses_on_two_samples_and_two_edits():
    failing, passing = results("w", 0), results("w", 1)
    near_miss = decision([*results("w", 0), *results("l", 1, 1)], [*results("w", 1), *results("l", 0, 0)])
    assert repair.wants_repair(near_miss, applied=2) is None
    one_sample = decision([*results("w", 0), *results("l", 1)], [*results("w", 1), *results("l", 0)])
    assert "fewer than 2 samples" in repair.wants_repair(one_sample, applied=2)
    assert "single edit" in repair.wants_repair(near_miss, applied=1)
    assert "won no val task" in repair.wants_repair(decision(passing, failing), applied=3)
    unproven = decision(failing, passing, alpha=0.25)  # one win, no loss: blocked by the sign test alone
    assert unproven.details["clause"] == "sign_test"
    assert "lost no val task" in repair.wants_repair(unproven, applied=3)
    many = [f"l{n}" for n in range(repair.MAX_LOST_TASKS + 1)]
    base = [*results("w", 0), *(r for task in many for r in results(task, 1, 1))]
    cand = [*results("w", 1), *(r for task in many for r in results(task, 0, 0))]
    assert "not a near miss" in repair.wants_repair(decision(base, cand), applied=3)
    accepted = decision(results("w", 0), results("w", 1))
    assert accepted.verdict == "accept_new_best" and repair.wants_repair(accepted, applied=2) is not None


def test_a_night_puts_the_blamed_edit_in_the_rejected_edit_ledger_and_not_the_kept_one(tmp_path):
    from skillopt_sleep.archive.around_step import AcrossNights, Outcome
    from skillopt_sleep.archive.rejected_edits import rejected_edit_key, rejected_keys
    from skillopt_sleep.config import SleepConfig
    from skillopt_sleep.state import ProjectPaths, load_state

    result, _ = run(HELPFUL, HARMFUL)
    assert result.accepted
    paths = ProjectPaths(tmp_path / "project", tmp_path / "state")
    memory = AcrossNights(SleepConfig(backend="mock"), paths, load_state(paths), night_id="n1")
    memory.baseline = {"memory": MEMORY}
    memory.after_step(result, tasks=[tool_task("train"), tool_task("val"), visitor_task()],
                      val=[tool_task("val"), visitor_task()],
                      outcome=Outcome(True, result.candidate, result.gate), test_results={}, test_documents={})
    [blamed] = result.blamed
    applied = next(edit for edit in result.edits if edit.content == HELPFUL)
    keys = rejected_keys(memory.archive)
    assert keys == {rejected_edit_key(blamed): "n1"} and rejected_edit_key(applied) not in keys
    memory.close()
