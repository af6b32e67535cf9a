"""Judges: score one response to a ``TaskRecord`` with its rule checks, reference and rubric.

Scores (the SkillOpt convention):

- ``hard`` in {0, 1}: 1 when every verifiable check passes, the reference matches (if the task has one) and,
  when the rubric is the only verifiable judge, the rubric score is >= 0.5.
- ``soft`` in [0, 1]: the mean of the components that are present and verifiable, each weighted equally:
  the check pass rate (passed / verifiable checks), the reference match (1.0 or 0.0) and the rubric score.
  Example: 3 of 4 checks pass, no reference, rubric 0.6 -> soft = (0.75 + 0.6) / 2 = 0.675.

A check that cannot be verified is never a silent 0: it is left out of both scores and named in the
rationale. Unverifiable are: ``tool_called`` when the backend cannot run tools (``tools_called`` is None),
a ``regex`` that does not compile, a check whose value has the wrong type, and a rubric without a rubric
judge (or whose judge call failed, signalled by a NaN score). When nothing at all is verifiable the outcome
is hard 0, soft 0.0 with ``verifiable=False``.

A rubric score that is not a finite number in [0, 1] (2.0, -0.1, inf, "high") is an error of the judge, never
a score: it is never clamped or guessed into range. The rubric is left out as for a failed judge call and the
rationale names ``JUDGE_SCORE_OUT_OF_RANGE`` (``"rubric excluded (judge_score_out_of_range: 2.0)"``); when it
was the only judge, ``fail_reason`` is ``"judge_score_out_of_range"``. (A judge's 2.0 clamped to 1.0 once let
a regressing candidate win a gate.)

Tool evidence is only the ``tools_called`` list the backend reports (tools that really ran). Text in the
response that claims a tool ran (``TOOL_CALL: Bash``) is never evidence.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from skillopt_sleep.backends.base import ChatMessage, ChatRequest
from skillopt_sleep.backends.jsonextract import extract_json
from skillopt_sleep.checks import UnverifiableCheck, describe_check, evaluate_check
from skillopt_sleep.models import TaskRecord
from skillopt_sleep.prompts import quote_data, render_prompt

#: (request, rubric, response) -> (score, rationale). The score must be a finite number in [0, 1]; NaN means
#: "the judge could not score" (left out, never a 0); anything else is the error ``JUDGE_SCORE_OUT_OF_RANGE``.
RubricJudge = Callable[[str, str, str], tuple[float, str]]

#: The reason named when a judge's score is not a finite number in [0, 1] (the rubric is then left out).
JUDGE_SCORE_OUT_OF_RANGE = "judge_score_out_of_range"

#: A rubric score at or above this passes ``hard`` when the rubric is the only judge.
RUBRIC_PASS = 0.5
#: Most characters of a response sent to the rubric judge.
JUDGE_RESPONSE_CHARS = 12_000

RUBRIC_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "score": {"type": "number", "minimum": 0, "maximum": 1},
        "rationale": {"type": "string"},
    },
    "required": ["score", "rationale"],
    "additionalProperties": False,
}


class JudgeOutcome(BaseModel):
    """The judges' verdict on one response.

    hard: 0 or 1; soft: float in [0, 1]; fail_reason: the first failure (``"not_contains 'npm install'
    failed"``, ``"empty response"``, ``"judge_score_out_of_range"``), None when hard is 1; rationale: one line
    per judge, joined by ``"; "``;
    llm_judged: a rubric score was used; verifiable: False when no judge of the task could be verified
    (hard and soft are then 0 and say nothing about the response).
    """

    hard: int
    soft: float
    fail_reason: str | None
    rationale: str
    llm_judged: bool
    verifiable: bool = True


# --------------------------------------------------------------------------- reference


def normalize_reference_text(text: str) -> str:
    """Case-, whitespace- and punctuation-insensitive form of a text.

    Casefolded; every Unicode punctuation character (categories P*) and modifier symbol (Sk: backtick,
    caret) becomes a space; runs of whitespace collapse to one space; ends stripped.
    """
    chars = [" " if unicodedata.category(char).startswith("P") or unicodedata.category(char) == "Sk" else char
             for char in text.casefold()]
    return " ".join("".join(chars).split())


def reference_matches(reference: str, response: str) -> bool | None:
    """True when the normalized reference equals the normalized response or occurs in it as a run of whole
    words (``"42"`` matches ``"The answer is 42."`` but not ``"420"``). None when the reference is empty
    after normalization (unverifiable)."""
    wanted = normalize_reference_text(reference)
    if not wanted:
        return None
    return f" {wanted} " in f" {normalize_reference_text(response)} "


# --------------------------------------------------------------------------- rubric


def score_in_range(value: Any) -> float | None:
    """``value`` as a float when it is a finite number in [0, 1]; None otherwise (NaN, infinities, 2.0, -0.1,
    booleans, strings). Never clamps: an out-of-range score is an error of the judge, not a score."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    if math.isnan(number) or not 0.0 <= number <= 1.0:
        return None
    return number


def rescale_judge_score(value: Any) -> float | None:
    """Read a judge model's score on the declared 0..1 scale, or on a scale the reply itself declares.

    A number (or numeric string, ``"0.8"``) must lie in [0, 1]. A fraction string declares its scale:
    ``"7/10"`` -> 0.7, ``"4/5"`` -> 0.8, valid while 0 <= numerator <= denominator. A percentage string
    declares 0..100: ``"85%"`` -> 0.85, valid from 0% to 100%. None for anything else: a bare 7 or 85 (no
    declared scale: the schema asks for 0..1), 2.0, -0.1, ``"11/10"``, ``"120%"``, NaN, infinities,
    booleans and text (``"high"``). The caller reports None as ``JUDGE_SCORE_OUT_OF_RANGE``.
    """
    if isinstance(value, str):
        text = value.strip()
        fraction = re.fullmatch(r"(-?\d+(?:\.\d+)?)\s*/\s*(\d+(?:\.\d+)?)", text)
        if fraction:
            denominator = float(fraction.group(2))
            return score_in_range(float(fraction.group(1)) / denominator) if denominator > 0 else None
        try:
            number = float(text[:-1] if text.endswith("%") else text)
        except ValueError:
            return None
        return score_in_range(number / 100.0 if text.endswith("%") else number)
    return score_in_range(value)


def make_rubric_judge(meter, model_hint: str = "") -> RubricJudge:
    """Return a ``RubricJudge`` that makes one structured call with role ``"judge"`` through ``meter``.

    meter: a ``CallMeter``. model_hint: a label for the judge model, put in front of the rationale (the
    backend itself picks the model for the role). The reply must match ``RUBRIC_SCHEMA``
    (``{"score": number 0..1, "rationale": string}``), read by ``rescale_judge_score`` (a declared scale such
    as ``"7/10"`` is kept). When the call fails transiently (the meter records it) or the reply has no score,
    the judge returns ``(nan, why)``; a score outside [0, 1] (2.0, a bare 7, ``"high"``) returns
    ``(nan, "judge_score_out_of_range: 2.0")``. ``score_response`` then leaves the rubric out.
    Fatal backend errors and exhausted budgets propagate (``BackendError``, ``BudgetExhausted``).
    """
    label = f"[{model_hint}] " if model_hint else ""

    def judge(request: str, rubric: str, response: str) -> tuple[float, str]:
        shown = response if len(response) <= JUDGE_RESPONSE_CHARS else response[:JUDGE_RESPONSE_CHARS] + "\n[...]"
        user = render_prompt("judge_rubric", request=quote_data(request), rubric=rubric, response=quote_data(shown))
        chat = ChatRequest(
            role="judge",
            messages=[ChatMessage(role="user", content=user)],
            json_schema=RUBRIC_SCHEMA,
            temperature=0.0,
            purpose="judge",
        )
        result = meter.chat(chat, fail_on_error=False)
        if not result.ok:
            return math.nan, f"{label}judge call failed: {result.error}"
        reply = extract_json(result.text)
        if not isinstance(reply, dict) or "score" not in reply:
            return math.nan, f"{label}judge reply has no score: {result.text[:120]!r}"
        score = rescale_judge_score(reply.get("score"))
        if score is None:
            return math.nan, f"{label}{JUDGE_SCORE_OUT_OF_RANGE}: {reply.get('score')!r}"
        rationale = reply.get("rationale")
        return score, f"{label}{rationale if isinstance(rationale, str) else ''}".strip()

    return judge


# --------------------------------------------------------------------------- scoring


def score_response(task: TaskRecord, response: str, tools_called: list[str] | None, *,
                   rubric_judge: RubricJudge | None = None) -> JudgeOutcome:
    """Score one response to ``task`` with the task's judge (checks, reference, rubric).

    tools_called: tools that really ran (backend evidence), or None when the backend cannot run tools.
    rubric_judge: called once when the task has a rubric and the response is not empty; its score must be a
    finite number in [0, 1]: NaN leaves the rubric out with the judge's rationale, anything else (a 7, 2.0,
    -0.1, inf, ``"high"``) leaves it out as ``JUDGE_SCORE_OUT_OF_RANGE`` (never clamped; a judge that means
    7/10 must rescale itself, as ``make_rubric_judge`` does). See the module docstring for the hard/soft
    formulas. An empty (or
    whitespace-only) response is hard 0, soft 0.0, fail_reason ``"empty response"``, with no judge call.
    """
    judge = task.judge
    if not response.strip():
        return JudgeOutcome(hard=0, soft=0.0, fail_reason="empty response", rationale="empty response",
                            llm_judged=False)

    notes: list[str] = []
    failures: list[str] = []
    passed = verified = 0
    for check in judge.checks:
        try:
            ok = evaluate_check(check, response, tools_called)
        except UnverifiableCheck as exc:
            notes.append(f"excluded ({exc})")
            continue
        verified += 1
        if ok:
            passed += 1
        else:
            failures.append(f"{describe_check(check)} failed")

    components: list[float] = []
    if verified:
        components.append(passed / verified)
        notes.insert(0, f"checks {passed}/{verified} passed")
        notes[1:1] = failures

    reference_ok: bool | None = None
    if judge.reference is not None and judge.reference.strip():
        reference_ok = reference_matches(judge.reference, response)
        if reference_ok is None:
            notes.append("reference excluded (empty after normalization)")
        else:
            components.append(1.0 if reference_ok else 0.0)
            notes.append("reference matches" if reference_ok else "reference mismatch")
            if not reference_ok:
                failures.append("reference mismatch")

    rubric_score: float | None = None
    judge_error: str | None = None
    if judge.rubric and judge.rubric.strip():
        if rubric_judge is None:
            notes.append("rubric excluded (no rubric judge)")
        else:
            raw, judge_rationale = rubric_judge(task.request, judge.rubric, response)
            rubric_score = score_in_range(raw)
            if rubric_score is None and isinstance(raw, float) and math.isnan(raw) and judge_rationale:
                notes.append(f"rubric excluded ({judge_rationale})")  # the judge could not score; it says why
                if f"{JUDGE_SCORE_OUT_OF_RANGE}: " in judge_rationale:  # make_rubric_judge's reply check
                    judge_error = JUDGE_SCORE_OUT_OF_RANGE
            elif rubric_score is None:
                judge_error = JUDGE_SCORE_OUT_OF_RANGE
                notes.append(f"rubric excluded ({JUDGE_SCORE_OUT_OF_RANGE}: {raw!r})")
            else:
                components.append(rubric_score)
                notes.append(f"rubric {rubric_score:.2f}: {judge_rationale}".rstrip(": "))
                if not verified and reference_ok is None and rubric_score < RUBRIC_PASS:
                    failures.append(f"rubric score {rubric_score:.2f} < {RUBRIC_PASS}")

    llm_judged = rubric_score is not None
    rationale = "; ".join(notes)
    if not components:
        return JudgeOutcome(hard=0, soft=0.0, fail_reason=judge_error or "no verifiable judge",
                            rationale=rationale or "task has no judge", llm_judged=False, verifiable=False)
    soft = sum(components) / len(components)
    hard = 0 if failures else 1
    return JudgeOutcome(hard=hard, soft=min(1.0, max(0.0, soft)), fail_reason=failures[0] if failures else None,
                        rationale=rationale, llm_judged=llm_judged)


def gate_score(hard: float, soft: float, metric: str, mixed_weight: float) -> float:
    """The score the gate compares: ``hard``, ``soft`` or ``mixed`` = (1 - w) * hard + w * soft.

    hard, soft: floats in [0, 1] (means are fine); mixed_weight w: float in [0, 1] (clamped).
    Raises ValueError for another metric name.
    """
    if metric == "hard":
        return float(hard)
    if metric == "soft":
        return float(soft)
    if metric == "mixed":
        weight = min(1.0, max(0.0, float(mixed_weight)))
        return (1.0 - weight) * float(hard) + weight * float(soft)
    raise ValueError(f"unknown gate metric {metric!r}; supported: 'hard', 'soft', 'mixed'")
