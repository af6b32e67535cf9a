"""A judge score outside [0, 1] is an error named ``judge_score_out_of_range``, never a clamped score."""

from __future__ import annotations

import json
import math

import pytest

from skillopt_sleep.backends.base import CallMeter, ChatResult
from skillopt_sleep.engine.gate import GateSettings, decide
from skillopt_sleep.engine.judges import make_rubric_judge, rescale_judge_score, score_response
from skillopt_sleep.engine.replay import replay_one
from skillopt_sleep.models import Judge, TaskRecord


def rubric_task(task_id: str = "t-000000000001") -> TaskRecord:
    return TaskRecord(id=task_id, source="claude", request="Explain the failing build",
                      judge=Judge(rubric="names the root cause"))


class OneReplyBackend:
    """Answers every target call with the text the system message asks for (``ANSWER: <text>``)."""

    name = "fake"
    runs_tools = False

    def __init__(self, replies=None):
        self.replies = list(replies or [])

    def model_for(self, role):
        return "fake-model"

    def chat(self, request):
        if request.role == "judge":
            return ChatResult(text=self.replies.pop(0))
        return ChatResult(text=request.messages[0].content.removeprefix("ANSWER: "))


@pytest.mark.parametrize("raw", [2.0, -0.1, math.inf, -math.inf, "high", None, True])
def test_score_response_never_clamps_an_out_of_range_score(raw):
    outcome = score_response(rubric_task(), "the cause is X", None, rubric_judge=lambda *a: (raw, "fine"))
    assert outcome.verifiable is False and outcome.llm_judged is False
    assert (outcome.hard, outcome.soft) == (0, 0.0)
    assert outcome.fail_reason == "judge_score_out_of_range"
    assert "judge_score_out_of_range" in outcome.rationale


def test_score_response_keeps_the_bounds_and_a_judge_failure_keeps_its_own_reason():
    assert score_response(rubric_task(), "x", None, rubric_judge=lambda *a: (1.0, "ok")).soft == 1.0
    assert score_response(rubric_task(), "x", None, rubric_judge=lambda *a: (0.0, "no")).verifiable is True
    failed = score_response(rubric_task(), "x", None, rubric_judge=lambda *a: (math.nan, "judge call failed: 503"))
    assert failed.fail_reason == "no verifiable judge" and "judge call failed: 503" in failed.rationale


@pytest.mark.parametrize("reply", [2.0, 7, 85, -0.1, 1000, "11/10", "-1/10", "120%", "high", "inf", "nan", "2/0"])
def test_rescale_rejects_scores_outside_their_declared_scale(reply):
    assert rescale_judge_score(reply) is None


def test_llm_rubric_judge_reports_an_out_of_range_reply_as_the_error():
    backend = OneReplyBackend([json.dumps({"score": 2.0, "rationale": "excellent"})])
    score, rationale = make_rubric_judge(CallMeter(backend), "judge-m")("q", "rubric", "answer")
    assert math.isnan(score)
    assert rationale == "[judge-m] judge_score_out_of_range: 2.0"
    outcome = score_response(rubric_task(), "answer", None,
                             rubric_judge=lambda *a: (score, rationale))
    assert outcome.fail_reason == "judge_score_out_of_range"


def test_a_judge_score_of_two_does_not_let_a_candidate_win_the_gate():
    """The peer's failure: the candidate's answer got 2.0 from the judge, clamped to 1.0, and beat a baseline
    the judge scored 0.6 on a soft gate. The score is now an error, so the candidate cannot win."""
    tasks = [rubric_task(f"t-00000000000{i}") for i in range(1, 4)]

    def judge(request, rubric, response):
        return (2.0, "perfect!!") if response == "candidate answer" else (0.6, "adequate")

    meter = CallMeter(OneReplyBackend())

    def replay(answer):
        return [replay_one(task, 0, system=f"ANSWER: {answer}", meter=meter, temperature=None, seed=None,
                           max_tokens=100, rubric_judge=judge) for task in tasks]

    baseline, candidate = replay("baseline answer"), replay("candidate answer")
    assert all(result.fail_reason == "judge_score_out_of_range" for result in candidate)
    assert all("judge_score_out_of_range: 2.0" in result.rationale for result in candidate)
    for rule in ("strict", "paired"):
        for metric in ("soft", "mixed", "hard"):
            decision = decide(GateSettings(mode="on", metric=metric, mixed_weight=0.5, rule=rule), baseline=baseline,
                              candidate=candidate, best_gate_score=None)
            assert decision.verdict == "reject", (rule, metric, decision.reason)
            assert all(comparison.outcome != "win" for comparison in decision.per_task)
