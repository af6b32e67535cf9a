"""Per-project state kept across nights (under ``<state dir>/projects/<project key>/``).

Layout::

    state.json            ProjectState (below), written atomically when a night completes
    checkpoints.json      harvest checkpoints (per file: size, mtime, byte offset)
    replay_cache.jsonl    successful replays keyed by (model, skill hash, memory hash, task, sample, settings hash)
    nights/<night id>/    diagnostics.json, tasks.jsonl, proposed/
    backups/              live documents saved before --apply / auto_adopt wrote over them
    night.lock            one night at a time
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from skillopt_sleep.engine.edit_budget import EditBudgetState
from skillopt_sleep.fsio import read_json, write_json_atomic
from skillopt_sleep.paths import project_state_dir

STATE_FORMAT = "skillopt-sleep-state/1"


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


class ProjectPaths:
    """Paths of one project's state."""

    def __init__(self, project: Path | None, state_root: Path | None = None):
        self.root = project_state_dir(project, state_root)
        self.state_file = self.root / "state.json"
        self.checkpoints = self.root / "checkpoints.json"
        self.replay_cache = self.root / "replay_cache.jsonl"
        self.nights = self.root / "nights"
        self.backups = self.root / "backups"
        self.lock = self.root / "night.lock"


def load_state(paths: ProjectPaths) -> ProjectState:
    data = read_json(paths.state_file)
    return ProjectState.model_validate(data) if data else ProjectState()


def save_state(paths: ProjectPaths, state: ProjectState) -> None:
    write_json_atomic(paths.state_file, state.model_dump(mode="json"), mode=0o600)
