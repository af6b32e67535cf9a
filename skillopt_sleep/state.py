"""Per-project state kept across nights (under ``<state dir>/projects/<project key>/``).

Layout::

    state.json            ProjectState (below), written atomically when a night completes
    checkpoints.json      harvest checkpoints (per file: size, mtime, byte offset)
    replay_cache.jsonl    successful replays keyed by (model, skill hash, memory hash, task, sample, settings hash)
    archive.sqlite3       the task archive and the rejected-edit ledger (``skillopt_sleep.archive.tasks``)
    documents/<sha256>    document texts the archive features need again (``skillopt_sleep.archive.docstore``)
    nights/<night id>/    diagnostics.json, tasks.jsonl, proposed/
    backups/              live documents saved before --apply / auto_adopt wrote over them
    night.lock            one night at a time
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from skillopt_sleep.engine.edit_budget import EditBudgetState
from skillopt_sleep.fsio import load_json, write_json_atomic
from skillopt_sleep.models import EditRecord
from skillopt_sleep.paths import ProjectPaths  # re-exported: defined in paths so status can skip these models

STATE_FORMAT = "skillopt-sleep-state/1"


class PendingCandidate(BaseModel):
    """A candidate the paired gate rejected for lack of evidence only (``details["pending"]``), kept for one
    re-test on a later night's fresh val tasks (``skillopt_sleep.archive.pending``).

    night_id: the night that tested it; documents / baseline: kind -> sha256 of the candidate texts and of the
    baseline texts it was tested against (texts in ``documents/<sha256>``); tested_val_ids: val task ids already
    used; wins / losses: its paired outcomes that night; gate_score: its mean val gate score; edits: the applied
    edits that made it (they go to the rejected-edit ledger if it is dropped after its re-test).
    """

    model_config = ConfigDict(extra="ignore")
    night_id: str
    documents: dict[str, str]
    baseline: dict[str, str]
    tested_val_ids: list[str] = Field(default_factory=list)
    wins: int = 0
    losses: int = 0
    gate_score: float | None = None
    edits: list[EditRecord] = Field(default_factory=list)


class NightDocuments(BaseModel):
    """The documents of one completed night (for the slow update): number is the night's 1-based count;
    baseline / accepted: kind -> sha256 of the documents replayed that night and of the accepted candidate
    (empty when nothing was accepted); texts in ``documents/<sha256>``."""

    model_config = ConfigDict(extra="ignore")
    night_id: str
    number: int
    baseline: dict[str, str] = Field(default_factory=dict)
    accepted: dict[str, str] = Field(default_factory=dict)


class ProjectState(BaseModel):
    """What a project remembers between nights."""

    model_config = ConfigDict(extra="ignore")
    format: str = STATE_FORMAT
    project: str | None = None
    nights_completed: int = 0
    last_night_id: str | None = None
    last_status: str | None = None
    last_finished_at: datetime | None = None
    best_gate_score: float | None = None
    """All-time best held-out gate score of an accepted candidate."""
    best_documents: dict[str, str] = Field(default_factory=dict)
    """kind -> sha256 of the all-time best accepted document."""
    current_documents: dict[str, str] = Field(default_factory=dict)
    """kind -> sha256 of the latest accepted document."""
    edit_budget: EditBudgetState = Field(default_factory=EditBudgetState)
    pending: PendingCandidate | None = None
    """The candidate waiting for its one re-test on fresh val tasks (see ``PendingCandidate``)."""
    document_history: list[NightDocuments] = Field(default_factory=list)
    """The documents of the latest nights, oldest first (the slow update compares against one of them)."""
    slow_update_at: int = 0
    """Night number (``nights_completed`` count) of the last slow update; 0 = never."""


#: What to do with a damaged ``state.json``, and what that costs (the nights' directories, the task archive, the
#: backups and the adoption records are separate files, kept).
STATE_FIX = ("move it aside (mv {path} {path}.bad) to start the project's history afresh: the edit budget, the best "
             "and current documents and a pending candidate are forgotten; nights, backups and adoptions are kept")


def load_state(paths: ProjectPaths) -> ProjectState:
    """The project's state (a fresh ``ProjectState`` before the first night). Raises ``DamagedFileError`` naming
    ``state.json`` when it is not valid JSON or has the wrong shape (``fsio.load_json``)."""
    state = load_json(paths.state_file, what="the project's state", validate=_validate_state,
                      fix=STATE_FIX.format(path=paths.state_file))
    return state if state is not None else ProjectState()


def _validate_state(data: object) -> ProjectState:
    if not isinstance(data, dict):
        raise TypeError(f"expected a JSON object, got {type(data).__name__}")
    return ProjectState.model_validate(data)


def save_state(paths: ProjectPaths, state: ProjectState) -> None:
    write_json_atomic(paths.state_file, state.model_dump(mode="json"), mode=0o600)
