"""What one member keeps locally about the team: their member id, and what their nights made of each team rule.

* ``member_id(config)``: ``team_member_id`` when set, else a random id (``m-`` + 8 hex) made once and kept in
  ``<state dir>/team/member.json``: never derived from a user name, e-mail or host.
* ``<project state dir>/team.json`` (``TeamLocalState``): per team rule id, its local status (``pending``: not gated
  yet or waiting for evidence; ``accepted``: in the "Team rules" section; ``rejected``: the gate turned it down on this
  member's val tasks; ``forgotten``: the member's ``forget``; ``overridden``: a rule the member stated contradicts
  it), this member's held-out record for it (``store.Record``), the nights that tested it and the reason of the last
  verdict. The night writes it (``record_result``); ``team publish`` and ``team status`` read it.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from skillopt_sleep import paths as app_paths
from skillopt_sleep.fsio import load_json, write_json_atomic
from skillopt_sleep.paths import ProjectPaths
from skillopt_sleep.team.store import Record

LOCAL_FILE = "team.json"
LOCAL_FORMAT = "skillopt-sleep-team-local/1"
MEMBER_FILE = "member.json"
LocalStatus = Literal["pending", "accepted", "rejected", "forgotten", "overridden"]


class LocalRule(BaseModel):
    """This member's verdict on one team rule (module docstring). nights: ids of the nights that gated it; text: the
    rule's text as last read (for ``rules``)."""

    status: LocalStatus = "pending"
    text: str = ""
    record: Record = Field(default_factory=Record)
    nights: list[str] = Field(default_factory=list)
    reason: str = ""


class TeamLocalState(BaseModel):
    """``team.json``: team rule id -> ``LocalRule``."""

    format: Literal["skillopt-sleep-team-local/1"] = LOCAL_FORMAT
    rules: dict[str, LocalRule] = Field(default_factory=dict)


def load_local(paths: ProjectPaths) -> TeamLocalState:
    """The project's ``team.json`` (an empty state when there is none). Raises DamagedFileError when it does not
    parse."""
    return load_json(paths.root / LOCAL_FILE, what="the project's team-rule record",
                     validate=TeamLocalState.model_validate, default=None) or TeamLocalState()


def save_local(paths: ProjectPaths, state: TeamLocalState) -> None:
    """Write ``team.json`` atomically (mode 0600)."""
    write_json_atomic(paths.root / LOCAL_FILE, state.model_dump(mode="json"), mode=0o600)


def record_result(paths: ProjectPaths, rule_id: str, *, status: LocalStatus, night_id: str, wins: int = 0,
                  losses: int = 0, ties: int = 0, reason: str = "", text: str = "") -> LocalRule:
    """Add one night's verdict on team rule ``rule_id``: its status, the held-out wins / losses / ties it adds to
    this member's record (a night counts once: a second call for the same night replaces nothing and adds nothing),
    and the reason (and the rule's ``text`` when given). Returns the updated entry. For the night to call after its
    gate."""
    state = load_local(paths)
    entry = state.rules.get(rule_id) or LocalRule()
    if night_id not in entry.nights:
        entry.nights.append(night_id)
        entry.record = Record(wins=entry.record.wins + wins, losses=entry.record.losses + losses,
                              ties=entry.record.ties + ties)
    entry.status, entry.reason = status, reason
    entry.text = text or entry.text
    state.rules[rule_id] = entry
    save_local(paths, state)
    return entry


def member_id(configured: str | None = None, *, state_root: Path | None = None) -> str:
    """This member's id: ``configured`` (the ``team_member_id`` key) when set, else the random id kept in
    ``<state dir>/team/member.json``, made on first use (module docstring)."""
    if configured:
        return configured
    path = (state_root or app_paths.state_dir()) / "team" / MEMBER_FILE
    data = load_json(path, what="the team member id", default=None)
    if isinstance(data, dict) and isinstance(data.get("member_id"), str) and data["member_id"]:
        return data["member_id"]
    made = "m-" + secrets.token_hex(4)
    write_json_atomic(path, {"member_id": made}, mode=0o600)
    return made
