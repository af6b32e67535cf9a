"""The optional LLM miner: checks for tasks whose own words gave none (role ``miner``).

``make_llm_miner(meter)`` returns ``miner(task) -> {intent, checks, rubric, outcome}`` (one structured call per task,
``llm_miner_schema``); ``run_miner(tasks, miner, result)`` asks it only about the replayable tasks the user objected to
that have no validated check (``wants_miner``), and every check it proposes goes through the same validation as the
heuristic ones (``validation.validate_checks``). Its failure never stops mining.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from skillopt_sleep.backends.base import ChatMessage, ChatRequest
from skillopt_sleep.backends.jsonextract import extract_json
from skillopt_sleep.checks import CHECK_OPS, INT_OPS, validate_check
from skillopt_sleep.errors import BackendError, BudgetExhausted
from skillopt_sleep.mine.candidates import head_block, head_line
from skillopt_sleep.mine.result import MineResult
from skillopt_sleep.mine.validation import add_checks, task_evidence, validate_checks
from skillopt_sleep.models import Check, TaskRecord
from skillopt_sleep.prompts import quote_data, render_prompt

MINER_OUTCOMES = ("success", "partial", "failure", "unknown")


#: Characters of the request / final answer / reaction put into the miner prompt.
MINER_REQUEST_CHARS = 2000


MINER_ANSWER_CHARS = 800


MINER_REACTION_CHARS = 600


def llm_miner_schema() -> dict[str, Any]:
    """JSON schema of the miner's reply: ``{intent: str, checks: [{op, value}], rubric: str, outcome: str}``.

    op: one of the ``CheckOp`` names; value: string, integer or null; outcome: success|partial|failure|unknown.
    Every property is required and no other is allowed (strict structured output).
    """
    return {
        "type": "object",
        "properties": {
            "intent": {"type": "string"},
            "checks": {
                "type": "array",
                "maxItems": 6,
                "items": {
                    "type": "object",
                    "properties": {
                        "op": {"type": "string", "enum": list(CHECK_OPS)},
                        "value": {"type": ["string", "integer", "null"]},
                    },
                    "required": ["op", "value"],
                    "additionalProperties": False,
                },
            },
            "rubric": {"type": "string"},
            "outcome": {"type": "string", "enum": list(MINER_OUTCOMES)},
        },
        "required": ["intent", "checks", "rubric", "outcome"],
        "additionalProperties": False,
    }


def _head(text: str, limit: int) -> str:
    text = (text or "").strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def miner_prompt(task: TaskRecord) -> str:
    """Render the short miner prompt (template ``miner.md``) for one task."""
    reaction = task.evidence.reaction
    if task.evidence.reaction_text:
        reaction += ": " + _head(task.evidence.reaction_text, MINER_REACTION_CHARS)
    if task.rules:
        reaction += "\nRules the user stated: " + "; ".join(task.rule_texts)
    rejected = task.evidence.corrected_answers[0] if task.evidence.corrected_answers else task.evidence.final_answer
    return render_prompt(
        "miner",
        request=quote_data(_head(task.request, MINER_REQUEST_CHARS)),
        final_answer=quote_data(_head(rejected, MINER_ANSWER_CHARS) or "(none)"),
        accepted_answer=quote_data(_head(task.evidence.accepted_answer or "", MINER_ANSWER_CHARS) or "(none)"),
        reaction=reaction,
    )


def make_llm_miner(meter) -> Callable[[TaskRecord], dict[str, Any]]:
    """Return the optional LLM miner: ``miner(task) -> {intent, checks, rubric, outcome}``.

    meter: a ``CallMeter``. Each call makes one ``ChatRequest(role="miner", json_schema=llm_miner_schema(),
    temperature=0)`` through it. Raises ``BackendError``/``BudgetExhausted`` (from the meter) when the call
    fails, and ValueError when the reply holds no JSON object; ``mine_tasks`` catches both and keeps the
    heuristic judge.
    """

    def miner(task: TaskRecord) -> dict[str, Any]:
        request = ChatRequest(
            role="miner",
            messages=[ChatMessage(role="user", content=miner_prompt(task))],
            json_schema=llm_miner_schema(),
            temperature=0.0,
            purpose="miner",
        )
        result = meter.chat(request)
        reply = extract_json(result.text)
        if not isinstance(reply, dict):
            raise ValueError(f"miner reply is not a JSON object: {_head(result.text, 120)!r}")
        return reply

    return miner


#: Most checks taken from one miner reply.
MAX_MINER_CHECKS = 6


def wants_miner(task: TaskRecord) -> bool:
    """The LLM miner is asked only about replayable tasks the user objected to whose own words gave no validated
    check: that is where a check is missing, and where the session holds an answer to validate it against."""
    return task.replayable and not task.judge.checks and bool(task.evidence.corrected_answers)


def _apply_miner(task: TaskRecord, reply: Any) -> tuple[int, str | None]:
    """Merge one miner reply into ``task``; return (checks rejected, outcome or None).

    Raises ValueError when the reply is not a JSON object. Every check goes through the same validation as the
    heuristic ones (``validation.validate_checks`` against the task's evidence); malformed and unsupported checks
    are stored in ``task.rejected_checks`` with the reason.
    """
    if not isinstance(reply, dict):
        raise ValueError(f"miner reply is not an object: {type(reply).__name__}")
    rejected = 0
    intent = reply.get("intent")
    if isinstance(intent, str) and intent.strip():
        task.intent = head_line(intent, 200)
    raw_checks = reply.get("checks") or []
    if not isinstance(raw_checks, list):
        task.rejected_checks.append(f"llm_miner checks: not a list ({type(raw_checks).__name__})")
        raw_checks, rejected = [], 1
    proposed: list[Check] = []
    for position, item in enumerate(raw_checks):
        if position >= MAX_MINER_CHECKS:
            task.rejected_checks.append(f"llm_miner: more than {MAX_MINER_CHECKS} checks, the rest ignored")
            rejected += len(raw_checks) - MAX_MINER_CHECKS
            break
        reason, check = _miner_check(item)
        if reason or check is None:
            label = f"{item.get('op')}={item.get('value')!r}" if isinstance(item, dict) else repr(item)[:60]
            task.rejected_checks.append(f"llm_miner {label}: {reason}")
            rejected += 1
        else:
            proposed.append(check)
    kept, unsupported = validate_checks(proposed, task_evidence(task))
    task.rejected_checks.extend(unsupported)
    rejected += len(unsupported)
    add_checks(task, kept)  # the task held no check (``wants_miner``), so hard_evidence stays False without one
    if task.judge.checks:
        task.judge.rubric = None
        return rejected, _outcome(reply)
    rubric = reply.get("rubric")
    if isinstance(rubric, str) and rubric.strip():
        rubric = head_block(rubric, 1000)
        unchecked = [rule for rule in task.rule_texts if rule.casefold() not in rubric.casefold()]
        if unchecked:  # the heuristic rubric carried these rules; keep them judged
            rubric += " It must follow the user's rules: " + "; ".join(unchecked) + "."
        task.judge.rubric = rubric
    return rejected, _outcome(reply)


def _outcome(reply: dict) -> str | None:
    outcome = reply.get("outcome")
    return outcome if outcome in MINER_OUTCOMES else None


def _miner_check(item: Any) -> tuple[str | None, Check | None]:
    if not isinstance(item, dict):
        return "not an object", None
    op, value = item.get("op"), item.get("value")
    if op not in CHECK_OPS:
        return f"unknown op {op!r}", None
    if op in INT_OPS and isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if op == "json_valid" and value == "":
        value = None
    try:
        check = Check(op=op, value=value, origin="llm_miner")
    except ValidationError:
        return f"wrong value type {type(value).__name__}", None
    reason = validate_check(check)
    return (reason, None) if reason else (None, check)


def run_miner(tasks: list[TaskRecord], miner: Callable[[TaskRecord], dict], result: MineResult) -> int:
    """Call the miner once per task that ``wants_miner``; return the number of its checks that were rejected."""
    rejected = 0
    stopped_because: str | None = None
    for task in tasks:
        if not wants_miner(task):
            continue
        if stopped_because:
            result.miner_errors[task.id] = f"miner not called: {stopped_because}"
            continue
        snapshot = task.model_copy(deep=True)
        result.miner_calls += 1
        try:
            count, outcome = _apply_miner(task, miner(task))
        except Exception as exc:  # a failed call, a bad reply or a miner bug keeps the heuristic judge
            for name in ("intent", "judge", "rejected_checks", "hard_evidence"):
                setattr(task, name, getattr(snapshot, name))
            if isinstance(exc, BudgetExhausted):
                stopped_because = f"budget exhausted ({exc})"
                result.miner_errors[task.id] = stopped_because
            elif isinstance(exc, BackendError):
                result.miner_errors[task.id] = f"backend error: {exc}"
                if exc.fatal:
                    stopped_because = f"fatal backend error ({exc})"
            else:
                result.miner_errors[task.id] = f"{type(exc).__name__}: {exc}"
            continue
        rejected += count
        if outcome:
            result.miner_outcomes[task.id] = outcome
    return rejected
