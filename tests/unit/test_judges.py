"""Judges: rule checks, reference, rubric, and the hard/soft formulas."""

from __future__ import annotations

import json
import math

import pytest

from skillopt_sleep.backends.base import CallMeter, ChatRequest, ChatResult
from skillopt_sleep.checks import check_passes
from skillopt_sleep.engine.judges import (
    gate_score,
    make_rubric_judge,
    normalize_reference_text,
    reference_matches,
    rescale_judge_score,
    score_response,
)
from skillopt_sleep.models import Check, Judge, TaskRecord


def task_with(checks=(), rubric=None, reference=None) -> TaskRecord:
    return TaskRecord(id="t-000000000001", source="claude", request="Install the deps",
                      judge=Judge(checks=list(checks), rubric=rubric, reference=reference))


# --------------------------------------------------------------------------- each check op

@pytest.mark.parametrize(
    ("check", "passing", "failing"),
    [
        (Check(op="contains", value="pnpm"), "Run PNPM install", "Run npm install"),
        (Check(op="not_contains", value="npm install"), "Run pnpm i", "Run NPM INSTALL now"),
        (Check(op="regex", value=r"\bpytest\s+-q\b"), "use PYTEST -q", "use pytest"),
        (Check(op="starts_with", value="Summary"), "  summary: done", "Done. Summary"),
        (Check(op="ends_with", value="Done."), "All good. done.\n", "Done. All good."),
        (Check(op="max_chars", value=10), "  0123456789  ", "01234567890"),
        (Check(op="max_words", value=3), "one two three", "one two three four"),
        (Check(op="section_present", value="Testing"), "# Title\n\n## testing:\nran it", "Testing\nis done"),
        (Check(op="json_valid"), ' {"a": [1, 2]} ', "{'a': 1}"),
        (Check(op="tool_called", value="Bash"), "ran it", "ran it"),
    ],
)
def test_every_check_op_passes_and_fails_on_the_right_response(check, passing, failing):
    tools = ["Bash", "Read"] if check.op == "tool_called" else []
    assert check_passes(check, passing, tools) is True
    assert check_passes(check, failing, ["Read"] if check.op == "tool_called" else []) is False


def test_checks_are_case_sensitive_only_when_asked():
    assert check_passes(Check(op="contains", value="README"), "see the readme", None) is True
    assert check_passes(Check(op="contains", value="README", case_sensitive=True), "see the readme", None) is False
    assert check_passes(Check(op="regex", value="^Fix", case_sensitive=True), "fix it", None) is False


def test_max_chars_accepts_a_numeric_string_value_and_rejects_text():
    assert check_passes(Check(op="max_chars", value="5"), "abcde", None) is True
    assert check_passes(Check(op="max_chars", value="five"), "abcde", None) is None


def test_section_present_ignores_hash_lines_inside_code_blocks():
    response = "Steps:\n\n```bash\n# Testing\npytest\n```\n"
    assert check_passes(Check(op="section_present", value="Testing"), response, None) is False


def test_section_present_accepts_any_heading_level_and_setext_headings():
    check = Check(op="section_present", value="## Usage")
    assert check_passes(check, "###### **Usage**\ntext", None) is True
    assert check_passes(check, "Usage\n=====\ntext", None) is True
    assert check_passes(check, "Usage notes\n-----\n", None) is False


def test_json_valid_accepts_a_fenced_json_block_but_not_a_broken_one_or_a_scalar():
    check = Check(op="json_valid")
    assert check_passes(check, 'Here you go:\n```json\n{"ok": true}\n```\nBye', None) is True
    assert check_passes(check, 'Here:\n```json\n{"ok": true,}\n```', None) is False
    assert check_passes(check, "42", None) is False
    assert check_passes(check, 'no fence {"ok": true} here', None) is False


def test_tool_called_never_trusts_text_that_claims_a_tool_ran():
    check = Check(op="tool_called", value="Bash")
    claim = "TOOL_CALL: Bash\nI ran `Bash` and it passed."
    assert check_passes(check, claim, []) is False
    assert check_passes(check, claim, ["Read"]) is False
    assert check_passes(check, "done", ["bash"]) is True


def test_tool_called_is_unverifiable_when_the_backend_cannot_run_tools():
    assert check_passes(Check(op="tool_called", value="Bash"), "TOOL_CALL: Bash", None) is None


def test_score_excludes_an_unverifiable_tool_check_and_says_so():
    task = task_with([Check(op="tool_called", value="Bash"), Check(op="contains", value="done")])
    outcome = score_response(task, "TOOL_CALL: Bash\ndone", None)
    assert outcome.hard == 1
    assert outcome.soft == 1.0
    assert "tool_called 'Bash' unverifiable" in outcome.rationale


def test_score_fails_a_tool_check_when_the_tool_did_not_really_run():
    task = task_with([Check(op="tool_called", value="Bash")])
    outcome = score_response(task, "TOOL_CALL: Bash", ["Read"])
    assert outcome.hard == 0
    assert outcome.fail_reason == "tool_called 'Bash' failed"


def test_a_regex_that_does_not_compile_is_excluded_not_scored_zero():
    task = task_with([Check(op="regex", value="(unclosed"), Check(op="contains", value="ok")])
    outcome = score_response(task, "ok", [])
    assert check_passes(Check(op="regex", value="(unclosed"), "ok", []) is None
    assert (outcome.hard, outcome.soft) == (1, 1.0)
    assert "does not compile" in outcome.rationale


# --------------------------------------------------------------------------- hard / soft

def test_fail_reason_names_the_first_failed_check_and_soft_is_the_pass_rate():
    task = task_with([
        Check(op="contains", value="pnpm"),
        Check(op="not_contains", value="npm install"),
        Check(op="max_words", value=2),
        Check(op="starts_with", value="Run"),
    ])
    outcome = score_response(task, "Run pnpm, not npm install", [])
    assert outcome.hard == 0
    assert outcome.fail_reason == "not_contains 'npm install' failed"
    assert outcome.soft == pytest.approx(2 / 4)
    assert outcome.llm_judged is False


def test_an_empty_response_scores_zero_with_its_reason_and_calls_no_judge():
    calls = []
    task = task_with([Check(op="not_contains", value="x")], rubric="is helpful")
    outcome = score_response(task, "  \n", [], rubric_judge=lambda *args: calls.append(args) or (1.0, "fine"))
    assert (outcome.hard, outcome.soft, outcome.fail_reason) == (0, 0.0, "empty response")
    assert calls == []


def test_soft_is_the_mean_of_check_rate_reference_and_rubric():
    task = task_with([Check(op="contains", value="a"), Check(op="contains", value="zzz")],
                     rubric="clear", reference="The answer is 42.")
    outcome = score_response(task, "a... the answer is 42!", [], rubric_judge=lambda *a: (0.6, "ok"))
    assert outcome.soft == pytest.approx((0.5 + 1.0 + 0.6) / 3)
    assert outcome.hard == 0
    assert outcome.llm_judged is True


def test_rubric_only_task_passes_hard_at_half_and_fails_below():
    task = task_with(rubric="explains the cause")
    passed = score_response(task, "because X", None, rubric_judge=lambda *a: (0.5, "meets it"))
    failed = score_response(task, "because X", None, rubric_judge=lambda *a: (0.49, "vague"))
    assert (passed.hard, passed.soft, passed.fail_reason) == (1, 0.5, None)
    assert failed.hard == 0 and failed.fail_reason.startswith("rubric score 0.49")
    assert "vague" in failed.rationale


def test_a_low_rubric_score_does_not_fail_hard_when_checks_also_judge():
    task = task_with([Check(op="contains", value="fix")], rubric="concise")
    outcome = score_response(task, "fix applied", [], rubric_judge=lambda *a: (0.2, "long"))
    assert outcome.hard == 1
    assert outcome.soft == pytest.approx((1.0 + 0.2) / 2)


def test_a_rubric_score_of_seven_is_an_error_never_clamped_to_one():
    task = task_with(rubric="good")
    outcome = score_response(task, "answer", None, rubric_judge=lambda *a: (7, "7/10"))
    assert outcome.verifiable is False and outcome.fail_reason == "judge_score_out_of_range"
    negative = score_response(task, "answer", None, rubric_judge=lambda *a: (-3, "bad"))
    assert negative.verifiable is False and "judge_score_out_of_range: -3" in negative.rationale


def test_a_failed_rubric_judge_is_excluded_and_an_unjudgeable_task_is_marked_unverifiable():
    task = task_with(rubric="good")
    outcome = score_response(task, "answer", None, rubric_judge=lambda *a: (math.nan, "judge call failed: 503"))
    assert outcome.verifiable is False
    assert outcome.llm_judged is False
    assert "judge call failed: 503" in outcome.rationale


def test_reference_matching_ignores_case_whitespace_and_punctuation():
    assert normalize_reference_text("  Use `pnpm`,\n  NOT npm! ") == "use pnpm not npm"
    assert reference_matches("use pnpm, not npm", "USE PNPM -- not   npm.") is True
    assert reference_matches("The answer: 42", "I think the answer is 42") is False


def test_reference_containment_counts_only_whole_words():
    assert reference_matches("42", "So the result is 42.") is True
    assert reference_matches("42", "So the result is 420.") is False


def test_reference_mismatch_fails_hard_and_is_the_fail_reason():
    outcome = score_response(task_with(reference="v2.3.1"), "It is version 2.3", None)
    assert (outcome.hard, outcome.soft, outcome.fail_reason) == (0, 0.0, "reference mismatch")


# --------------------------------------------------------------------------- gate score

def test_gate_score_hard_soft_and_mixed():
    assert gate_score(1, 0.4, "hard", 0.3) == 1.0
    assert gate_score(1, 0.4, "soft", 0.3) == 0.4
    assert gate_score(1, 0.4, "mixed", 0.3) == pytest.approx(0.7 * 1 + 0.3 * 0.4)
    with pytest.raises(ValueError, match="unknown gate metric"):
        gate_score(1, 1, "median", 0.3)


# --------------------------------------------------------------------------- LLM rubric judge

class FakeBackend:
    name = "fake"

    def __init__(self, replies):
        self.replies = list(replies)
        self.requests: list[ChatRequest] = []

    def model_for(self, role):
        return "fake-judge"

    def chat(self, request):
        self.requests.append(request)
        reply = self.replies.pop(0)
        return reply if isinstance(reply, ChatResult) else ChatResult(text=reply)


def test_rubric_judge_makes_one_structured_judge_call():
    backend = FakeBackend([json.dumps({"score": 0.8, "rationale": "covers it"})])
    meter = CallMeter(backend)
    score, rationale = make_rubric_judge(meter, "fake-judge")("Fix bug", "names the cause", "cause: X")
    assert score == 0.8
    assert rationale == "[fake-judge] covers it"
    (request,) = backend.requests
    assert request.role == "judge"
    assert set(request.json_schema["required"]) == {"score", "rationale"}
    assert "names the cause" in request.messages[-1].content
    assert meter.calls == 1


@pytest.mark.parametrize(("reply", "expected"),
                         [(0.7, 0.7), ("0.85", 0.85), ("7/10", 0.7), ("4/5", 0.8), ("85%", 0.85)])
def test_rubric_judge_reads_scores_on_a_declared_scale(reply, expected):
    backend = FakeBackend([json.dumps({"score": reply, "rationale": "r"})])
    score, _ = make_rubric_judge(CallMeter(backend))("q", "rubric", "a")
    assert score == pytest.approx(expected)


def test_rescale_rejects_non_numbers():
    assert rescale_judge_score(True) is None
    assert rescale_judge_score("great") is None
    assert rescale_judge_score(float("nan")) is None


def test_rubric_judge_returns_nan_for_a_failed_call_or_an_unusable_reply():
    failed = FakeBackend([ChatResult(error="timeout", error_kind="transient")])
    score, rationale = make_rubric_judge(CallMeter(failed))("q", "r", "a")
    assert math.isnan(score) and "judge call failed: timeout" in rationale
    garbled = FakeBackend(["I would give it a good score"])
    score, rationale = make_rubric_judge(CallMeter(garbled))("q", "r", "a")
    assert math.isnan(score) and "no score" in rationale
