"""Where a project's team rules live, and ``team init``.

Two modes (config ``team_repo``):

* ``project`` (``team_repo`` unset): the project's own git repository; rule files sit in its work tree under
  ``store.RULES_DIR`` and travel with ``git pull``; ``publish`` commits them on a branch of the project's repository.
* ``rules_repo``: a separate repository (a path or git URL) shared across projects, cloned once under
  ``<state dir>/team/repos/<key>`` and pulled (fast-forward) before it is read; rules are scoped by repository name.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from skillopt_sleep import paths as app_paths
from skillopt_sleep.team import git
from skillopt_sleep.team.local import member_id
from skillopt_sleep.team.store import RULES_DIR


class TeamLocation(BaseModel):
    """Where team rules are read and committed. repository: the git work tree (the project's root, or the rules
    repository's clone); rules_dir: ``repository / RULES_DIR``; project_name: the scope name of the project's rules
    (its root folder's name); source: the rules repository as configured (None in ``project`` mode)."""

    mode: Literal["project", "rules_repo"]
    repository: Path
    rules_dir: Path
    project_name: str
    source: str | None = None


def clone_dir(source: str, *, state_root: Path | None = None) -> Path:
    """Where the rules repository ``source`` is cloned: ``<state dir>/team/repos/<name>-<10 hex of its sha256>``."""
    name = re.sub(r"[^A-Za-z0-9._-]", "-", source.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git")) or "rules"
    return (state_root or app_paths.state_dir()) / "team" / "repos" / (
        f"{name}-{hashlib.sha256(source.encode()).hexdigest()[:10]}")


def _source(value: str) -> str:
    """A configured ``team_repo``: an existing local path made absolute, else as given (a URL)."""
    path = Path(value).expanduser()
    return str(path.resolve()) if path.exists() else value


def locate(project: Path, team_repo: str | None, *, sync: bool = False, state_root: Path | None = None
           ) -> TeamLocation:
    """The project's ``TeamLocation``. In ``rules_repo`` mode the clone is made when missing, and with ``sync`` it
    is pulled first. Raises TeamError when the project is not in a git work tree, or cloning / pulling fails."""
    root = git.toplevel(Path(project).expanduser().resolve())
    if not team_repo:
        return TeamLocation(mode="project", repository=root, rules_dir=root / RULES_DIR, project_name=root.name)
    source = _source(team_repo)
    clone = clone_dir(source, state_root=state_root)
    if not (clone / ".git").exists():
        git.clone(source, clone)
    elif sync:
        git.pull(clone)
    return TeamLocation(mode="rules_repo", repository=clone, rules_dir=clone / RULES_DIR, project_name=root.name,
                        source=source)


class InitResult(BaseModel):
    """What ``team init`` set up: the location, this member's id, and the config file written (None: nothing to
    write, ``project`` mode with no ``team_repo`` set)."""

    location: TeamLocation
    member: str
    config_file: Path | None = None


def init_team(project: Path, *, repo: str | None, configured_member: str | None, config_file: Path | None = None,
              state_root: Path | None = None) -> InitResult:
    """Set up team rules for ``project``: check it is a git work tree, make this member's id, and with ``repo`` (a
    path or URL of a rules repository) save it as ``team_repo`` in the config file and clone it. Writes nothing in
    the project's work tree. Raises TeamError (git) or ConfigError (the config file)."""
    from skillopt_sleep.config import set_config_value

    written = None
    if repo:
        location = locate(project, repo, sync=True, state_root=state_root)
        written = set_config_value("team_repo", location.source or repo, config_file)
    else:
        location = locate(project, None)
    return InitResult(location=location, member=member_id(configured_member, state_root=state_root),
                      config_file=written)
