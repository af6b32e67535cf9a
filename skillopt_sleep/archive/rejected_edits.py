"""The rejected-edit ledger: the edits of candidates the gate rejected, kept in the task archive so that no night
tests them again.

* ``record_rejected``: the edits of a candidate the gate rejected (or that gate repair blamed, or of a pending
  candidate dropped after its re-test) are stored in the archive's ``rejected_edits`` table
  (``rejected_edit_key``: target, op and normalized content).
* ``RejectedEditScreen`` wraps the night's ``CallMeter`` and removes such edits from every reflect and merge reply
  before the step aggregates them, so an identical edit proposed again never reaches the gate; each is reported
  with status ``rejected`` and reason ``already rejected on night <id>``. ``rejected_keys`` is what it screens;
  ``stated_rule_keys`` is the narrower set for the users' own rules (re-tested until rejected on
  ``STATED_RULE_REJECTIONS`` nights).

The ledger is also shown to the optimizer as "already tried, did not help": ``context.render_rejected_edits``.
"""

from __future__ import annotations

import threading
from typing import Any

import orjson

from skillopt_sleep.archive.tasks import TaskArchive
from skillopt_sleep.backends.base import CallMeter, ChatRequest, ChatResult
from skillopt_sleep.engine.reflect import parse_edits
from skillopt_sleep.models import EditRecord


def _normalized(text: str | None) -> str:
    return " ".join((text or "").split()).casefold().lstrip("-* ").rstrip(".!;:, ")


def rejected_edit_key(edit: EditRecord) -> str:
    """What makes two edits the same for the ledger: target, op and the content (whitespace collapsed, case
    folded, final punctuation dropped); a ``delete`` has no content, so its anchor stands in for it. A ``prepend``
    is keyed as an ``append``: both add the line to the block, only its place differs (an edit rejected before the
    night wrote new rules first stays rejected)."""
    body = edit.anchor if edit.op == "delete" else edit.content
    op = "append" if edit.op == "prepend" else edit.op
    return f"{edit.target}|{op}|{_normalized(body)}"


def already_rejected_reason(night_id: str) -> str:
    return f"already rejected on night {night_id}"


def record_rejected(archive: TaskArchive, edits: list[EditRecord], *, night_id: str, reason: str) -> int:
    """Add the edits that made a rejected candidate (status ``applied``) to the ledger; returns how many
    were new."""
    added = 0
    for edit in edits:
        if edit.status != "applied":
            continue
        added += archive.add_rejected_edit(key=rejected_edit_key(edit), night_id=night_id, target=edit.target,
                                           op=edit.op, anchor=edit.anchor, content=edit.content, reason=reason)
    return added


class RejectedEditScreen:
    """A ``CallMeter`` stand-in that drops ledger edits from optimizer replies (see the module docstring).

    meter: the night's CallMeter (every attribute but ``chat`` is its own); rejected: ledger key -> night id.
    A reply is rewritten only when it parsed as edits (``reflect.parse_edits``) and one of them is in the
    ledger; ``blocked`` holds one ``EditRecord`` per dropped edit (status ``rejected``), duplicates once.
    Thread-safe like the meter.
    """

    def __init__(self, meter: CallMeter, rejected: dict[str, str]):
        self._meter = meter
        self._rejected = dict(rejected)
        self._lock = threading.Lock()
        self.blocked: list[EditRecord] = []
        self._blocked_keys: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._meter, name)

    def filter(self, edits: list[EditRecord]) -> list[EditRecord]:
        """Return the edits not in the ledger; the dropped ones are added to ``blocked`` (once each)."""
        kept = []
        for edit in edits:
            key = rejected_edit_key(edit)
            night = self._rejected.get(key)
            if night is None:
                kept.append(edit)
                continue
            with self._lock:
                if key not in self._blocked_keys:
                    self._blocked_keys.add(key)
                    self.blocked.append(edit.model_copy(update={"status": "rejected",
                                                                "reason": already_rejected_reason(night)}))
        return kept

    def chat(self, request: ChatRequest, **options: Any) -> ChatResult:
        result = self._meter.chat(request, **options)
        properties = (request.json_schema or {}).get("properties", {})
        if request.role != "optimizer" or "edits" not in properties or not result.ok or not self._rejected:
            return result
        parsed = parse_edits(result.text)
        if parsed is None:
            return result
        edits, _invalid = parsed
        kept = self.filter(edits)
        if len(kept) == len(edits):
            return result
        text = orjson.dumps({"edits": [edit.model_dump(include={"target", "op", "anchor", "content", "rationale",
                                                                 "evidence"}) for edit in kept]}).decode()
        return result.model_copy(update={"text": text})


def rejected_keys(archive: TaskArchive) -> dict[str, str]:
    """Every ledger key -> the night it was first rejected on."""
    return {entry["key"]: entry["night_id"] for entry in archive.rejected_edits()}


#: A rule the user keeps stating is re-tested until the gate has rejected it on this many nights: one noisy
#: rejection must not block it for good.
STATED_RULE_REJECTIONS = 2


def stated_rule_keys(archive: TaskArchive) -> dict[str, str]:
    """Ledger keys that block a rule the users stated themselves: rejected on ``STATED_RULE_REJECTIONS`` nights."""
    return {entry["key"]: entry["night_id"] for entry in archive.rejected_edits()
            if entry["rejections"] >= STATED_RULE_REJECTIONS}
