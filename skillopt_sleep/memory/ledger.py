"""Memory across nights, as evidence for tonight's reflection: recall, the rejected-edit ledger, the context.

* Recall (``recall_k``): the k past TRAIN tasks of the archive (``archive.TaskArchive.recall``) most similar to
  tonight's train tasks, with their last score and the user's rules, rendered into the ``context`` that
  ``engine.step.run_step`` puts into every reflect prompt. Val and test tasks never appear: the archive keeps a
  task that was ever held out out of recall, and tonight's tasks are excluded (they are in the evidence anyway).
* The rejected-edit ledger: the edits of a candidate the gate rejected are stored in the archive
  (``rejected_edit_key``: target, op and normalized content). They are shown to the optimizer as "already tried,
  did not help", and an identical edit proposed again is not re-tested: ``RejectedEditScreen`` wraps the night's
  ``CallLedger`` and removes such edits from every reflect and merge reply before the step aggregates them, so
  they never reach the gate; each is reported with status ``rejected`` and reason
  ``already rejected on night <id>``.
* ``build_context``: the sections above (and the slow update's, ``slow_update.py``) as one text, each section
  cut to its share of ``reflect.CONTEXT_CHARS`` so that none crowds out the others.
"""

from __future__ import annotations

import threading
from typing import Any

import orjson

from skillopt_sleep.memory.archive import Recalled, TaskArchive
from skillopt_sleep.backends.base import CallLedger, ChatRequest, ChatResult
from skillopt_sleep.engine.reflect import CONTEXT_CHARS, parse_edits
from skillopt_sleep.models import EditRecord

#: Ledger entries shown to the optimizer (newest first).
MAX_LEDGER_SHOWN = 8
#: Characters of one request, rule or edit in the context.
CONTEXT_HEAD_CHARS = 160


def _normalized(text: str | None) -> str:
    return " ".join((text or "").split()).casefold().lstrip("-* ").rstrip(".!;:, ")


def rejected_edit_key(edit: EditRecord) -> str:
    """What makes two edits the same for the ledger: target, op and the content (whitespace collapsed, case
    folded, final punctuation dropped); a ``delete`` has no content, so its anchor stands in for it."""
    body = edit.anchor if edit.op == "delete" else edit.content
    return f"{edit.target}|{edit.op}|{_normalized(body)}"


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
    """A ``CallLedger`` stand-in that drops ledger edits from optimizer replies (see the module docstring).

    ledger: the night's CallLedger (every attribute but ``chat`` is its own); rejected: ledger key -> night id.
    A reply is rewritten only when it parsed as edits (``reflect.parse_edits``) and one of them is in the
    ledger; ``blocked`` holds one ``EditRecord`` per dropped edit (status ``rejected``), duplicates once.
    Thread-safe like the ledger.
    """

    def __init__(self, ledger: CallLedger, rejected: dict[str, str]):
        self._ledger = ledger
        self._rejected = dict(rejected)
        self._lock = threading.Lock()
        self.blocked: list[EditRecord] = []
        self._blocked_keys: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ledger, name)

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
        result = self._ledger.chat(request, **options)
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


def ledger_keys(archive: TaskArchive) -> dict[str, str]:
    """Every ledger key -> the night it was first rejected on."""
    return {entry["key"]: entry["night_id"] for entry in archive.rejected_edits()}


#: A rule the user keeps stating is re-tested until the gate has rejected it on this many nights: one noisy
#: rejection must not block it for good.
STATED_RULE_REJECTIONS = 2


def stated_rule_keys(archive: TaskArchive) -> dict[str, str]:
    """Ledger keys that block a rule the users stated themselves: rejected on ``STATED_RULE_REJECTIONS`` nights."""
    return {entry["key"]: entry["night_id"] for entry in archive.rejected_edits()
            if entry["rejections"] >= STATED_RULE_REJECTIONS}


# --------------------------------------------------------------------------- context


def _head(text: str | None, limit: int = CONTEXT_HEAD_CHARS) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 3].rstrip() + "..."


def render_recalled(recalled: list[Recalled]) -> str:
    """The recall section: one bullet per past train task (request, recurrence, last score, the user's
    rules); "" when nothing was recalled."""
    if not recalled:
        return ""
    lines = ["Similar past train tasks (earlier nights; what the user asked for before):"]
    for item in recalled:
        archived = item.archived
        last = (f"last score hard {item.last.hard:.2f}, soft {item.last.soft:.2f} (night {item.last.night_id})"
                if item.last else "not scored yet")
        lines.append(f"- {_head(archived.task.request)} [asked {archived.recurrence}x over {archived.nights} "
                     f"night(s); {last}]")
        for rule in archived.task.rules[:2]:
            lines.append(f"  their rule: {_head(rule)}")
    return "\n".join(lines)


def render_ledger(entries: list[dict[str, Any]]) -> str:
    """The ledger section: the edits already tested and rejected; "" when the ledger is empty."""
    if not entries:
        return ""
    lines = ["Edits already tried that did not help (the gate rejected them; do not propose them again):"]
    for entry in entries[:MAX_LEDGER_SHOWN]:
        body = entry["anchor"] if entry["op"] == "delete" else entry["content"]
        lines.append(f"- [{entry['target']} {entry['op']}] {_head(body)} (night {entry['night_id']})")
    return "\n".join(lines)


def build_context(*sections: str, limit: int = CONTEXT_CHARS) -> str:
    """Join the non-empty sections with blank lines, each cut to an equal share of ``limit`` characters (a
    section shorter than its share leaves the rest to the others)."""
    parts = [section.strip() for section in sections if section and section.strip()]
    if not parts:
        return ""
    budget = limit - 2 * (len(parts) - 1)
    out: list[str] = []
    for index, part in enumerate(parts):
        share = budget // (len(parts) - index)
        if len(part) > share:
            part = part[: max(0, share - 16)].rstrip() + "\n[... cut]"
        out.append(part)
        budget -= len(part)
    return "\n\n".join(out)
