"""One word per night, the same in ``status``, ``history``, the report (terminal and HTML) and ``run-now``'s line.

=============  ===========================================================================================
verdict        the night
=============  ===========================================================================================
learned        changed a file tonight, or staged a change for ``skillopt-sleep adopt``
waiting        its candidate waits for more held-out evidence (a pending candidate, re-tested later)
rejected       the gate rejected the rules it proposed
kept           nothing to learn: the files stay as they were (no sessions, no task, nothing proposed, dry run)
failed         the model backend failed or the call/token budget ran out
interrupted    a signal stopped it before a decision
=============  ===========================================================================================

Reads a night's ``diagnostics.json`` as plain JSON (no pydantic model): ``status`` imports it on its fast path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

VERDICTS = ("learned", "waiting", "rejected", "kept", "failed", "interrupted")


def verdict(night: Mapping[str, Any]) -> str:
    """The verdict word (module table) of a night's diagnostics (``Diagnostics.model_dump(mode="json")`` or the
    ``diagnostics.json`` it wrote). An empty mapping (a night with no diagnostics) is ``kept``."""
    status = night.get("status")
    if status in ("backend_error", "budget_exhausted"):
        return "failed"
    if status == "interrupted":
        return "interrupted"
    changes = [c for c in night.get("changes") or [] if isinstance(c, Mapping)]
    states = {c.get("state") for c in changes}
    if not changes:  # diagnostics written before ``changes`` existed
        states = {"written"} if night.get("applied") else {"staged"} if night.get("proposed") else set()
    if states & {"written", "staged"}:
        return "learned"
    if ((night.get("pending") or {}).get("action")) in ("stored", "kept"):
        return "waiting"
    edits = [e for e in night.get("edits") or [] if isinstance(e, Mapping)]
    if status == "rejected" and any(edit.get("status") == "applied" for edit in edits):
        return "rejected"
    return "kept"
