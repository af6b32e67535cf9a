"""What the archive tells tonight's reflection: the ``context`` that ``engine.step.run_step`` puts into every
reflect prompt.

* Recall (``recall_k``): the k past TRAIN tasks of the archive (``tasks.TaskArchive.recall``) most similar to
  tonight's train tasks, with their last score and the user's rules (``render_recalled``). Val and test tasks never
  appear: the archive keeps a task that was ever held out out of recall, and tonight's tasks are excluded (they
  are in the evidence anyway).
* The rejected-edit ledger (``rejected_edits.py``), shown as "already tried, did not help"
  (``render_rejected_edits``).
* ``build_context``: these sections (and the slow update's, ``slow_update.py``) as one text, each section cut to
  its share of ``reflect.CONTEXT_CHARS`` so that none crowds out the others.
"""

from __future__ import annotations

from typing import Any

from skillopt_sleep.archive.tasks import Recalled
from skillopt_sleep.engine.reflect import CONTEXT_CHARS
from skillopt_sleep.text import head

#: Rejected edits shown to the optimizer (newest first).
MAX_REJECTED_SHOWN = 8
#: Characters of one request, rule or edit in the context.
CONTEXT_HEAD_CHARS = 160


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
        request = head(archived.task.request, CONTEXT_HEAD_CHARS)
        lines.append(f"- {request} [asked {archived.recurrence}x over {archived.nights} night(s); {last}]")
        for rule in archived.task.rule_texts[:2]:
            lines.append(f"  their rule: {head(rule, CONTEXT_HEAD_CHARS)}")
    return "\n".join(lines)


def render_rejected_edits(entries: list[dict[str, Any]]) -> str:
    """The rejected-edit section: the edits already tested and rejected; "" when the ledger is empty."""
    if not entries:
        return ""
    lines = ["Edits already tried that did not help (the gate rejected them; do not propose them again):"]
    for entry in entries[:MAX_REJECTED_SHOWN]:
        body = entry["anchor"] if entry["op"] == "delete" else entry["content"]
        shown = head(body, CONTEXT_HEAD_CHARS)
        lines.append(f"- [{entry['target']} {entry['op']}] {shown} (night {entry['night_id']})")
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
