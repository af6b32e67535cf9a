"""Where skillopt-sleep keeps its files.

Resolution order for each directory (first wins):

* config dir: ``$SKILLOPT_SLEEP_CONFIG_DIR`` > ``$SKILLOPT_SLEEP_HOME/config`` > platformdirs user config dir
* state dir:  ``$SKILLOPT_SLEEP_STATE_DIR``  > ``$SKILLOPT_SLEEP_HOME/state``  > ``$STATE_DIRECTORY`` (systemd)
  > platformdirs user state dir
* data dir:   ``$SKILLOPT_SLEEP_DATA_DIR``   > ``$SKILLOPT_SLEEP_HOME/data``   > platformdirs user data dir

And where two agents keep their own files, read by both their harvester and their CLI backend:
``codex_home()`` (``$CODEX_HOME`` > ``~/.codex``) and ``opencode_data_dir()`` (``$XDG_DATA_HOME/opencode`` >
``~/.local/share/opencode``).

Nothing here creates a directory: callers create what they write into (no side effects at import).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import platformdirs

APP_NAME = "skillopt-sleep"


def _override(specific: str, sub: str) -> Path | None:
    if os.environ.get(specific):
        return Path(os.environ[specific]).expanduser()
    if os.environ.get("SKILLOPT_SLEEP_HOME"):
        return Path(os.environ["SKILLOPT_SLEEP_HOME"]).expanduser() / sub
    return None


def config_dir() -> Path:
    """Return the user config dir (holds ``config.toml`` and prompt overrides)."""
    return _override("SKILLOPT_SLEEP_CONFIG_DIR", "config") or Path(platformdirs.user_config_dir(APP_NAME))


def config_file() -> Path:
    """Return the config file path: ``$SKILLOPT_SLEEP_CONFIG`` or ``<config dir>/config.toml``."""
    if os.environ.get("SKILLOPT_SLEEP_CONFIG"):
        return Path(os.environ["SKILLOPT_SLEEP_CONFIG"]).expanduser()
    return config_dir() / "config.toml"


def state_dir() -> Path:
    """Return the state dir (nights, checkpoints, per-project state, locks)."""
    found = _override("SKILLOPT_SLEEP_STATE_DIR", "state")
    if found:
        return found
    if os.environ.get("STATE_DIRECTORY"):  # set by systemd's StateDirectory=
        return Path(os.environ["STATE_DIRECTORY"].split(":")[0])
    return Path(platformdirs.user_state_dir(APP_NAME))


def data_dir() -> Path:
    """Return the data dir (downloaded models, caches)."""
    return _override("SKILLOPT_SLEEP_DATA_DIR", "data") or Path(platformdirs.user_data_dir(APP_NAME))


def project_key(project: Path | None) -> str:
    """Return a stable, filesystem-safe key for a project path (``all`` for the unscoped harvest).

    format: ``<basename>-<first 10 hex of sha256(resolved path)>``
    """
    if project is None:
        return "all"
    resolved = str(Path(project).expanduser().resolve())
    digest = hashlib.sha256(resolved.encode()).hexdigest()[:10]
    name = "".join(c if c.isalnum() or c in "-_." else "-" for c in Path(resolved).name) or "root"
    return f"{name}-{digest}"


def project_state_dir(project: Path | None, state_root: Path | None = None) -> Path:
    """Return ``<state dir>/projects/<project key>``."""
    return (state_root or state_dir()) / "projects" / project_key(project)


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
        self.archive = self.root / "archive.sqlite3"
        self.documents = self.root / "documents"


def codex_home() -> Path:
    """Codex CLI's home (sessions, login, ``AGENTS.md``): ``$CODEX_HOME``, else ``~/.codex`` (absolute, ``~``
    expanded)."""
    configured = os.environ.get("CODEX_HOME")
    return (Path(configured).expanduser() if configured else Path.home() / ".codex").absolute()


def opencode_data_dir() -> Path:
    """OpenCode's data directory (sessions, login): ``$XDG_DATA_HOME/opencode``, else ``~/.local/share/opencode``
    (absolute)."""
    configured = os.environ.get("XDG_DATA_HOME")
    base = Path(configured).expanduser() if configured else Path.home() / ".local" / "share"
    return (base / "opencode").absolute()
