"""``team status``: what is shared, what waits or was rejected on this member's work, and which shared rules hurt
more members than they help (listed for review; nothing is removed automatically)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from skillopt_sleep.paths import ProjectPaths
from skillopt_sleep.team.local import LocalRule, load_local, member_id
from skillopt_sleep.team.location import TeamLocation, locate
from skillopt_sleep.team.store import load_rule_files, shared_rules


class SharedRuleStatus(BaseModel):
    """One shared rule: its id, text, proposer and date, the members it helped / hurt / tied (``store.Record``
    outcomes) and what this member's nights made of it (``local.LocalRule``; None: not gated here yet)."""

    id: str
    text: str
    proposer: str
    proposed: dt.date
    repository: str
    helped: list[str] = Field(default_factory=list)
    hurt: list[str] = Field(default_factory=list)
    tied: list[str] = Field(default_factory=list)
    local: LocalRule | None = None

    @property
    def hurts_more(self) -> bool:
        """It hurt more members than it helped."""
        return len(self.hurt) > len(self.helped)


class TeamStatus(BaseModel):
    """``team status``: the location, this member, every shared rule, the local verdicts on rules no longer (or not
    yet) in the shared tree, and the ids of shared rules that hurt more members than they help."""

    location: TeamLocation
    member: str
    shared: list[SharedRuleStatus] = Field(default_factory=list)
    local_only: dict[str, LocalRule] = Field(default_factory=dict)
    hurting: list[str] = Field(default_factory=list)


def team_status(project: Path, config: Any, *, paths: ProjectPaths | None = None, state_root: Path | None = None,
                sync: bool = False) -> TeamStatus:
    """The team status of ``project`` (module docstring). config: a ``SleepConfig`` (``team_repo``,
    ``team_member_id``). sync: pull the rules repository's clone first. Raises TeamError (git, a rule file that
    does not parse) and DamagedFileError (the local record)."""
    project = Path(project).expanduser().resolve()
    paths = paths or ProjectPaths(project, state_root)
    location = locate(project, config.team_repo, sync=sync, state_root=state_root)
    local = load_local(paths).rules
    shared = []
    for rule in shared_rules(load_rule_files(location.rules_dir)):
        shared.append(SharedRuleStatus(id=rule.id, text=rule.text, proposer=rule.proposer, proposed=rule.proposed,
                                       repository=rule.scope.repository, helped=rule.members("helped"),
                                       hurt=rule.members("hurt"), tied=rule.members("tied"),
                                       local=local.get(rule.id)))
    known = {rule.id for rule in shared}
    return TeamStatus(location=location, member=member_id(config.team_member_id, state_root=state_root),
                      shared=shared, local_only={key: value for key, value in local.items() if key not in known},
                      hurting=[rule.id for rule in shared if rule.hurts_more])
