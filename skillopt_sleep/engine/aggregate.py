"""Aggregate and select: turn the patches of several reflect calls into at most ``L`` edits (L = the edit budget).

Stages 3 and 4 of the SkillOpt step (``engine/step.py`` runs them; every function here makes at most one call):

* aggregate: ``dedupe_edits`` removes exact duplicates deterministically (same target, op, anchor and content
  after collapsing whitespace and case; their evidence task ids are joined). ``merge_patches`` asks the
  optimizer (``merge.md``, ``ChatRequest(role="optimizer")``, schema ``{"edits": [...]}``) to merge a group of
  patch lists into one: same-rule edits combined, conflicts resolved, nothing invented. An invalid reply is
  retried once; a second invalid reply falls back to the deduped concatenation of the group (reported in
  ``MergeOutcome.error``).
* select: ``rank_edits`` asks the optimizer (``rank.md``, schema ``{"order": [int, ...]}``) for the edits
  ordered best first, one call, no retry. ``parse_order`` validates the reply: distinct indices in range; a
  partial order is completed with the unlisted edits in merged order; anything else falls back to the merged
  order (``RankOutcome.fallback`` says why).

Prompt formats the mock optimizer parses: a merge prompt holds ``### patch list <n> (<kind>)`` headers each
followed by one compact JSON edit per line (``render_edit``); a rank prompt holds one ``[<i>] <JSON edit>`` line
per edit (``prompts.RANK_ITEM``; the merge headers are ``prompts.PATCH_LIST_HEADER``).
"""

from __future__ import annotations

from typing import Any, Literal

import orjson
from pydantic import BaseModel, Field

from skillopt_sleep.backends.base import CallMeter, ChatMessage, ChatRequest
from skillopt_sleep.backends.jsonextract import extract_json
from skillopt_sleep.engine.reflect import RAW_HEAD_CHARS, document_view, edits_schema, request_edits
from skillopt_sleep.models import EditRecord
from skillopt_sleep.prompts import quote_data, render_prompt

PatchKind = Literal["failure", "success"]


class PatchList(BaseModel):
    """Edits proposed together: by one reflect call (a minibatch), or by one merge of several lists.

    kind: ``"failure"`` when a failing task stands behind it (a failure minibatch, or a merge including one).
    """

    kind: PatchKind
    edits: list[EditRecord] = Field(default_factory=list)


class MergeOutcome(BaseModel):
    """One merge call: edits (status ``proposed``), raw_head (first 500 characters of the reply), error (why the
    fallback was used, None when the reply parsed), invalid_items (reply items that were not valid edits)."""

    edits: list[EditRecord] = Field(default_factory=list)
    raw_head: str = ""
    error: str | None = None
    invalid_items: int = 0


class RankOutcome(BaseModel):
    """One rank call: order (indices into the ranked list, best first, every index once), raw_head, and
    fallback (None when the reply was used; else why the merged order was kept)."""

    order: list[int]
    raw_head: str = ""
    fallback: str | None = None


# --------------------------------------------------------------------------- dedupe


def _normalized(text: str | None) -> str:
    return " ".join((text or "").split()).casefold()


def edit_key(edit: EditRecord) -> tuple[str, str, str, str]:
    """What makes two edits exact duplicates: target, op, anchor and content, whitespace collapsed, case folded."""
    return edit.target, edit.op, _normalized(edit.anchor), _normalized(edit.content)


def dedupe_edits(edits: list[EditRecord]) -> list[EditRecord]:
    """Drop exact duplicates (``edit_key``), keeping the first of each in order; the kept copy gets the union of
    the duplicates' evidence task ids (first-seen order). Returns new ``EditRecord`` copies; input unchanged."""
    kept: dict[tuple[str, str, str, str], EditRecord] = {}
    for edit in edits:
        key = edit_key(edit)
        if key not in kept:
            kept[key] = edit.model_copy(deep=True)
            continue
        first = kept[key]
        first.evidence = list(dict.fromkeys([*first.evidence, *edit.evidence]))
    return list(kept.values())


# --------------------------------------------------------------------------- merge


def render_edit(edit: EditRecord) -> str:
    """One edit as compact JSON on one line: target, op, anchor, content, rationale, evidence."""
    return orjson.dumps({"target": edit.target, "op": edit.op, "anchor": edit.anchor, "content": edit.content,
                         "rationale": edit.rationale, "evidence": edit.evidence}).decode()


def render_patch_lists(patch_lists: list[PatchList]) -> str:
    """The ``{patches}`` value of ``merge.md``: per list a ``### patch list <n> (failing|passing tasks)`` header
    and one ``render_edit`` line per edit, lists separated by a blank line."""
    sections = []
    for number, patch in enumerate(patch_lists, start=1):
        label = "failing" if patch.kind == "failure" else "passing"
        lines = [f"### patch list {number} ({label} tasks)", *(render_edit(edit) for edit in patch.edits)]
        sections.append("\n".join(lines))
    return "\n\n".join(sections)


def merge_patches(patch_lists: list[PatchList], *, skill: str, memory: str, targets: list[str],
                  meter: CallMeter) -> MergeOutcome:
    """Merge a group of patch lists into one list with one optimizer call (two when the first reply is invalid).

    patch_lists: the group (failure lists first); skill, memory: the current documents (shown trimmed, as in
    reflection); targets: the documents that may be edited. The reply may hold at most as many edits as the
    group's deduped input. Invalid reply twice: falls back to ``dedupe_edits`` of the concatenated lists.
    Raises ``BackendError`` / ``BudgetExhausted`` from the meter.
    """
    pooled = dedupe_edits([edit for patch in patch_lists for edit in patch.edits])
    prompt = render_prompt("merge", max_edits=len(pooled), targets=", ".join(targets),
                           skill=document_view(skill), memory=document_view(memory),
                           patches=quote_data(render_patch_lists(patch_lists)))
    parsed, raw = request_edits(meter, prompt, edits_schema(len(pooled), targets), purpose="merge")
    raw_head = raw[:RAW_HEAD_CHARS]
    if parsed is None:
        return MergeOutcome(edits=pooled, raw_head=raw_head,
                            error="merge reply was not valid JSON matching the edits schema (retried once); "
                                  "kept the deduped concatenation")
    edits, invalid = parsed
    for edit in edits:
        edit.status, edit.reason = "proposed", ""
    return MergeOutcome(edits=dedupe_edits(edits)[: len(pooled)], raw_head=raw_head, invalid_items=invalid)


# --------------------------------------------------------------------------- rank


def rank_schema(count: int) -> dict[str, Any]:
    """JSON schema of a rank reply: ``{"order": [int, ...]}``, each int an edit number in [0, count - 1]."""
    return {
        "type": "object",
        "properties": {"order": {"type": "array", "items": {"type": "integer", "minimum": 0,
                                                            "maximum": max(0, count - 1)}}},
        "required": ["order"],
        "additionalProperties": False,
    }


def parse_order(text: str, count: int) -> list[int] | str:
    """Parse a rank reply into a complete order of ``range(count)``, or return why it is invalid.

    Accepted shapes: ``{"order": [...]}`` or a bare list. Every item must be an integer (or a string of digits)
    in [0, count - 1], none repeated, at least one; the indices not listed follow in their own order.
    """
    data = extract_json(text)
    items = data.get("order") if isinstance(data, dict) else data
    if not isinstance(items, list) or not items:
        return "the reply holds no non-empty 'order' list"
    order: list[int] = []
    for item in items:
        if isinstance(item, str) and item.strip().isdigit():
            item = int(item.strip())
        if isinstance(item, bool) or not isinstance(item, int):
            return f"{item!r} is not an edit number"
        if not 0 <= item < count:
            return f"edit number {item} is out of range (0..{count - 1})"
        if item in order:
            return f"edit number {item} is listed twice"
        order.append(item)
    return order + [index for index in range(count) if index not in order]


def rank_edits(edits: list[EditRecord], *, keep: int, skill: str, memory: str, meter: CallMeter) -> RankOutcome:
    """Ask the optimizer to order ``edits`` best first (one call, ``rank.md``) so the top ``keep`` can be applied.

    Returns the order; an invalid reply falls back to ``list(range(len(edits)))`` with the reason in
    ``fallback``. A transient error that survived the backend's retries is a fallback too, not a failed night.
    Raises ``BackendError`` (fatal) / ``BudgetExhausted`` from the meter.
    """
    listing = "\n".join(f"[{index}] {render_edit(edit)}" for index, edit in enumerate(edits))
    prompt = render_prompt("rank", keep=keep, count=len(edits), skill=document_view(skill),
                           memory=document_view(memory), edits=quote_data(listing))
    result = meter.chat(ChatRequest(role="optimizer", messages=[ChatMessage(role="user", content=prompt)],
                                     json_schema=rank_schema(len(edits)), temperature=0.0, purpose="rank"),
                         fail_on_error=False)
    merged_order = list(range(len(edits)))
    if not result.ok:
        return RankOutcome(order=merged_order, fallback=f"rank call failed ({result.error}); kept the merged order")
    parsed = parse_order(result.text, len(edits))
    raw_head = result.text[:RAW_HEAD_CHARS]
    if isinstance(parsed, str):
        return RankOutcome(order=merged_order, raw_head=raw_head,
                           fallback=f"invalid rank reply ({parsed}); kept the merged order")
    return RankOutcome(order=parsed, raw_head=raw_head)
