"""``team publish``: which of a member's rules are shared, the files that share them, and the commit.

``plan_publish`` (reads only) decides:

* **proposed** files: the member's rules (the rules ledger, ``review.rule_ledger.list_rules``, joined with the task
  archive's ``rules`` table for their check keys) that are ``adopted`` (a managed block states them now), known by
  validated checks, won held-out tasks (wins >= 1 and more wins than losses), and were stated at least
  ``team_min_stated`` times or have been adopted for ``team_min_nights`` nights. The file's text is the line the
  member's documents hold (the wording that won those tasks), not the words the user stated it in;
* **tested** files: the member's held-out record of team rules they re-proved on their own tasks (``local.team.json``,
  written by the night), for rules present in the shared tree that the member did not propose.

Every file is screened (``store.screen_rule``: secrets, provenance, request text) and a file with a hit is blocked,
with the reason, never written. A file whose content is already in the tree is left out. ``publish`` commits the
planned files on a new branch ``skillopt-sleep/team-<date>-<member>`` (``-2``, ``-3``, ... for a second publish
that day; ``git.commit_files``: the checkout is not touched) with a message that says what and why, and pushes it
with ``push``.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from skillopt_sleep.errors import TeamError
from skillopt_sleep.paths import ProjectPaths
from skillopt_sleep.team import git
from skillopt_sleep.team.local import load_local, member_id
from skillopt_sleep.team.location import TeamLocation, locate
from skillopt_sleep.team.store import (
    Record,
    RuleFile,
    Scope,
    check_from_key,
    load_rule_files,
    render_rule_file,
    screen_rule,
    shared_rules,
    team_rule_id,
)

#: Characters of a rule's text shown in a commit message's first line.
SHORT_TEXT_CHARS = 40


class PlannedFile(BaseModel):
    """One file ``publish`` writes. path: relative to the repository's root (POSIX); local_id: the member's own
    rule id (``rules``), None for a tested team rule; content: the file's exact text."""

    path: str
    rule_id: str
    local_id: str | None = None
    role: Literal["proposed", "tested"]
    text: str
    record: Record
    content: str


class BlockedRule(BaseModel):
    """A rule the screen kept out (``store.screen_rule``'s reason)."""

    rule_id: str
    local_id: str | None = None
    text: str
    reason: str


class PublishPlan(BaseModel):
    """What ``publish`` would do: the files, the blocked rules, the branch and the commit message."""

    location: TeamLocation
    member: str
    branch: str
    message: str
    files: list[PlannedFile] = Field(default_factory=list)
    blocked: list[BlockedRule] = Field(default_factory=list)


class PublishResult(BaseModel):
    """What ``publish`` did: the commit (None: nothing to publish, no branch made) and where it was pushed."""

    plan: PublishPlan
    commit: str | None = None
    pushed_to: str | None = None


def _nights_adopted(entry: dict[str, Any], night_ids: list[str]) -> int:
    """Nights since the rule became adopted (its ``status_night``, counted), from the project's night ids."""
    from skillopt_sleep.review.adopt import night_sort_key

    since = entry.get("status_night") or entry.get("first_night")
    if not since:
        return 0
    reference = night_sort_key(since)
    return sum(1 for night in night_ids if night_sort_key(night) >= reference)


def _scope_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "-", name).lstrip("._-") or "repository"


def _requests(archive: Any) -> list[str]:
    """The requests of every archived task (for the request screen)."""
    out = []
    for (record,) in archive.connection.execute("SELECT record FROM tasks"):
        try:
            request = json.loads(record).get("request")
        except (ValueError, AttributeError):
            continue
        if isinstance(request, str):
            out.append(request)
    return out


def _message(member: str, files: list[PlannedFile]) -> str:
    proposed = [f for f in files if f.role == "proposed"]
    tested = [f for f in files if f.role == "tested"]
    lines = []
    if proposed:
        shorts = "; ".join(f.text if len(f.text) <= SHORT_TEXT_CHARS else f.text[:SHORT_TEXT_CHARS - 1] + "…"
                           for f in proposed)
        wins = sum(f.record.wins for f in proposed)
        lines.append(f"team rules: add {len(proposed)} ({shorts}) — won {wins} held-out tasks on {member}'s work")
    if tested:
        if not lines:
            lines.append(f"team rules: record {len(tested)} rule(s) re-proved on {member}'s work")
        lines.append("")
        lines += [f"- {f.rule_id}: won {f.record.wins}, lost {f.record.losses}, tied {f.record.ties} on "
                  f"{member}'s held-out tasks" for f in tested]
    return "\n".join(lines) + "\n"


def _existing(location: TeamLocation) -> dict[tuple[str, str], RuleFile]:
    return {(rule.id, rule.member): rule for rule in load_rule_files(location.rules_dir)}


def _planned(rule: RuleFile, existing: dict[tuple[str, str], RuleFile], local_id: str | None) -> PlannedFile | None:
    """The file for ``rule``, keeping the existing file's ``first`` date; None when its content is unchanged."""
    before = existing.get((rule.id, rule.member))
    if before is not None:
        rule = rule.model_copy(update={"first": before.first})
        if rule.model_copy(update={"updated": before.updated}) == before:
            return None
    return PlannedFile(path=str(rule.relative_path()), rule_id=rule.id, local_id=local_id, role=rule.role,
                       text=rule.text, record=rule.record, content=render_rule_file(rule))


def plan_publish(project: Path, config: Any, *, paths: ProjectPaths | None = None, today: dt.date | None = None,
                 state_root: Path | None = None) -> PublishPlan:
    """What ``publish`` would write for ``project`` (module docstring); reads only (in ``rules_repo`` mode the
    rules repository's clone is pulled first). config: a ``SleepConfig`` (``team_*`` keys, ``skill_path``,
    ``memory_path``, ``stale_after_nights``). Raises TeamError (git, a rule file that does not parse) and
    DamagedFileError (a local record that does not parse)."""
    from skillopt_sleep.archive.tasks import TaskArchive
    from skillopt_sleep.mine.provenance import UserText
    from skillopt_sleep.review.report import night_ids
    from skillopt_sleep.review.rule_ledger import list_rules

    project = Path(project).expanduser().resolve()
    paths = paths or ProjectPaths(project, state_root)
    today = today or dt.date.today()
    location = locate(project, config.team_repo, sync=True, state_root=state_root)
    member = member_id(config.team_member_id, state_root=state_root)
    existing = _existing(location)
    scope = Scope(repository=_scope_name(location.project_name))
    files: list[PlannedFile] = []
    blocked: list[BlockedRule] = []

    archived: dict[str, dict[str, Any]] = {}
    requests: list[str] = []
    user_text = UserText([])
    if paths.archive.exists():
        archive = TaskArchive(paths.archive)
        try:
            archived = {entry["id"]: entry for entry in archive.rules()}
            requests = _requests(archive)
            user_text = UserText(archive.authored_texts())
        finally:
            archive.close()
    nights = night_ids(paths)
    ledger = list_rules(project, paths, stale_after_nights=config.stale_after_nights, skill_path=config.skill_path,
                        memory_path=config.memory_path) if archived else []
    for entry in ledger:
        archived_entry = archived.get(entry.id)
        if entry.origin != "you" or entry.status != "adopted" or archived_entry is None:
            continue
        if entry.wins < 1 or entry.wins <= entry.losses:
            continue
        if entry.stated < config.team_min_stated and _nights_adopted(archived_entry, nights) < config.team_min_nights:
            continue
        checks = [check for check in map(check_from_key, archived_entry["keys"]) if check is not None]
        if not checks:
            continue
        rule_id = team_rule_id(checks)
        # the line the member's documents hold is what won the held-out tasks, not the words it was stated in
        text = entry.locations[0].text.lstrip("-*+ ").strip() if entry.locations else entry.text
        rationale = (f"stated {entry.stated} times on {len(entry.nights)} night(s); won {entry.wins} held-out "
                     f"task(s), lost {entry.losses}")
        try:
            rule = RuleFile(id=rule_id, text=text, rationale=rationale, member=member, role="proposed",
                            first=today, updated=today, scope=scope, record=Record(wins=entry.wins,
                                                                                   losses=entry.losses),
                            checks=checks)
        except ValueError as exc:  # a text longer than a line allows, a multi-line text
            blocked.append(BlockedRule(rule_id=rule_id, local_id=entry.id, text=text,
                                       reason=f"text: {str(exc).splitlines()[-1].strip()}"))
            continue
        reason = screen_rule(rule, user_text=user_text, requests=requests)
        if reason:
            blocked.append(BlockedRule(rule_id=rule_id, local_id=entry.id, text=text, reason=reason))
            continue
        planned = _planned(rule, existing, entry.id)
        if planned is not None:
            files.append(planned)

    proposed_here = {f.rule_id for f in files} | {key[0] for key, rule in existing.items()
                                                  if key[1] == member and rule.role == "proposed"}
    local = load_local(paths)
    for shared in shared_rules(existing.values()):
        result = local.rules.get(shared.id)
        if result is None or shared.id in proposed_here or not (result.record.wins + result.record.losses
                                                                  + result.record.ties):
            continue
        rule = RuleFile(id=shared.id, text=shared.text, member=member, role="tested", first=today, updated=today,
                        scope=shared.scope, record=result.record, checks=shared.checks,
                        rationale=(f"re-proved on {len(result.nights)} night(s) of {member}'s work: won "
                                   f"{result.record.wins}, lost {result.record.losses}, tied {result.record.ties}"))
        reason = screen_rule(rule, requests=requests)
        if reason:
            blocked.append(BlockedRule(rule_id=shared.id, text=shared.text, reason=reason))
            continue
        planned = _planned(rule, existing, None)
        if planned is not None:
            files.append(planned)
    branch = _free_branch(location.repository, f"skillopt-sleep/team-{today.isoformat()}-{member}")
    return PublishPlan(location=location, member=member, branch=branch, message=_message(member, files), files=files,
                       blocked=blocked)


def _free_branch(repository: Path, name: str) -> str:
    """``name``, or ``name-2``, ``name-3``, ... the first that is neither a local branch of ``repository`` nor a
    remote-tracking one: a second publish on one day (after a second night, or once the first branch was merged and
    deleted here) gets a branch of its own."""
    taken = git.branch_names(repository)
    candidate, number = name, 1
    while candidate in taken:
        number += 1
        candidate = f"{name}-{number}"
    return candidate


def publish(plan: PublishPlan, *, push: bool = False) -> PublishResult:
    """Commit ``plan``'s files on its new branch (based on the current branch's upstream, else HEAD; the work tree,
    index and current branch untouched) and, with ``push``, push the branch. Nothing is done when the plan has no
    file. Raises TeamError (the branch exists, git fails; then no branch was made, or it was made and not pushed)."""
    if not plan.files:
        return PublishResult(plan=plan)
    repository = plan.location.repository
    base = git.upstream(repository) or ("HEAD" if git.has_commits(repository) else None)
    if base is not None:
        base = git.git(repository, "rev-parse", f"{base}^{{commit}}")
    commit = git.commit_files(repository, branch=plan.branch, base=base,
                              files={f.path: f.content for f in plan.files}, message=plan.message)
    pushed = None
    if push:
        try:
            pushed = git.push(repository, plan.branch)
        except TeamError as exc:
            raise TeamError(f"committed {commit[:12]} on branch {plan.branch}, but the push failed: {exc.message}",
                            fix=f"push it yourself ('git push origin {plan.branch}')") from None
    return PublishResult(plan=plan, commit=commit, pushed_to=pushed)
