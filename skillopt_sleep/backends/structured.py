"""Structured (JSON) replies: how many tokens each may use, and what is done with one cut off at that budget.

Every call that expects JSON names its ``purpose`` (``ChatRequest.purpose``, a key of ``STRUCTURED_MAX_TOKENS``)
and ``CallMeter`` gives it the completion-token budget of that purpose (``structured_budget``). A backend that sees
the reply stop at the budget (finish_reason ``length`` from an OpenAI-compatible server or llama.cpp; for the agent
CLIs, JSON that ends mid-structure: ``ends_mid_structure``) returns it as a failure with ``ChatResult.cut_off`` set
and the unfinished text in ``ChatResult.partial``. The meter then asks once more with twice the budget
(``retry_budget``), and when that reply is cut too, repairs the unfinished JSON (``repair_cut_reply``, with the
``json-repair`` library); a reply that cannot be repaired into something usable is a failure with reason
``REPLY_CUT_OFF``.
"""

from __future__ import annotations

import json
from typing import Any

#: Default completion-token budget of each structured reply, by purpose (``ChatRequest.purpose``).
#: reflect/merge: the optimizer's ``{"edits": [...]}``; rank: its ``{"order": [...]}``; judge: the rubric judge's
#: ``{"score", "rationale"}``; miner: the LLM miner's task reading; reader: the rule reader's translations;
#: rewrite: the optimizer's rewrite of a rule's line (``engine/rewrite.py``).
STRUCTURED_MAX_TOKENS: dict[str, int] = {
    "reflect": 2048,
    "merge": 2048,
    "rank": 512,
    "judge": 256,
    "miner": 1024,
    "reader": 1024,
    "rewrite": 256,
}
#: ``ChatResult.reason`` / ``CallRecord.reason`` of a structured reply cut off twice and not repairable.
REPLY_CUT_OFF = "reply_cut_off"
#: ``ChatResult.reason`` / ``CallRecord.reason`` of a cut-off reply that was repaired (the call succeeded).
REPLY_REPAIRED = "reply_repaired"


def structured_budget(purpose: str, configured: int = 0) -> int:
    """Completion tokens for a structured reply of ``purpose``: ``configured`` when > 0 (the config's
    ``structured_max_tokens``), else ``STRUCTURED_MAX_TOKENS[purpose]``. Raises KeyError for an unknown purpose."""
    default = STRUCTURED_MAX_TOKENS[purpose]
    return configured if configured > 0 else default


def retry_budget(max_tokens: int, context_tokens: int | None) -> int:
    """The budget of the one retry of a cut-off reply: twice ``max_tokens``, at most half of ``context_tokens`` (the
    model's context window in tokens, None where unknown) so the prompt keeps room. A result not above
    ``max_tokens`` means there is no more room: no retry."""
    doubled = 2 * max_tokens
    return doubled if context_tokens is None else min(doubled, context_tokens // 2)


def ends_mid_structure(text: str) -> bool:
    """True when ``text`` holds the start of a JSON object or array that stops before it is complete (the reply was
    cut off), False when it holds no ``{``/``[`` or what follows the first one is complete or otherwise malformed."""
    starts = [index for index in (text.find("{"), text.find("[")) if index >= 0]
    if not starts:
        return False
    body = text[min(starts):].rstrip()
    try:
        json.loads(body, strict=False)
    except json.JSONDecodeError as exc:
        # a cut reply fails at its end (a number cut after its ".": one character before it) or inside a string
        at_end = exc.pos >= len(body) - 1 and not exc.msg.startswith("Extra data")
        return at_end or exc.msg.startswith("Unterminated string")
    return False


def _drop_last_item(value: Any) -> bool:
    """Remove the item being written when the reply stopped: the last element of the deepest list on the trailing
    path (the last key / last element at each level), else the last key of the deepest dict. True when one was."""
    path = []
    node = value
    while isinstance(node, (dict, list)) and node:
        path.append(node)
        node = node[next(reversed(node))] if isinstance(node, dict) else node[-1]
    for container in reversed(path):
        if isinstance(container, list):
            container.pop()
            return True
    if path:
        path[-1].pop(next(reversed(path[-1])))
        return True
    return False


def _has_leaf(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_has_leaf(item) for item in value.values())
    if isinstance(value, list):
        return any(_has_leaf(item) for item in value)
    return value is not None and value != ""


def repair_cut_reply(text: str) -> dict | list | None:
    """Repair the unfinished JSON of a cut-off reply, or None when nothing usable is left.

    The text from its first ``{``/``[`` is closed by ``json_repair.repair_json``; the item being written when the
    reply stopped (``_drop_last_item``: a half-written edit, translation, rationale or number) is dropped, since its
    text is cut mid-way. Usable: an object or array still holding at least one non-empty value
    (``{"edits": [{...}]}``, ``{"score": 0.8}``); ``{"edits": []}`` or nothing at all gives None. Never raises.
    """
    starts = [index for index in (text.find("{"), text.find("[")) if index >= 0]
    if not starts:
        return None
    from json_repair import repair_json  # imported when needed: ~25 ms, and only a cut-off reply needs it

    try:
        value = repair_json(text[min(starts):], return_objects=True)
    except Exception:  # the library's failure must not crash a night: the reply is simply not repairable
        return None
    if not isinstance(value, (dict, list)):
        return None
    _drop_last_item(value)
    return value if _has_leaf(value) else None
