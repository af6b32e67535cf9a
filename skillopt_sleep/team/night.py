"""Every night pulls: which team rules tonight gates on this member's own val tasks, and what the gate made of them.

``plan_team_night`` (before the step) reads the team rules where ``location.locate`` finds them (the project's work
tree, or the rules repository's clone, pulled first; in that mode only rules scoped to this project's repository
name), and keeps those this member has not settled:

* skipped, silently: a project outside git or with no team rules folder (``None``: nothing to do);
* skipped, with the reason (``TeamNight.skipped``): a rule whose local status (``local.team.json``) is
  ``forgotten``, ``overridden`` or ``accepted``; a rule the member holds already (a check key of it is demanded by
  a line of their documents, ``mine.rulebook.document_rules``) or stated themselves (tonight's stated rules, the
  archive's rules: their own edit is proposed instead);
* **overridden** (recorded at once, ``local.record_result``): a rule that contradicts a rule the member stated or a
  line of their documents (one demands a literal the other forbids, the test of ``rulebook.contradicted_line``):
  the member's own rule wins for them;
* two team rules that contradict each other: both are reported (``TeamNight.contradictions``) and the newer one (the
  later ``proposed`` date of its files; the greater id on one day) is the one gated.

Each kept rule becomes one ``append`` edit (``team_edit``: the rule's line attributed with its id,
``documents.block.team_line``; rationale ``team rule <id>, proven by N member(s)``), handed to the step
(``StepInput.team_rules``), which screens it like every edit and gates it in the same candidate, with the same
paired gate, on this member's val tasks. ``record_team_night`` (after the night staged) records each rule's verdict
and held-out record (``local.record_result``: the val tasks testing its checks that the tested candidate won, lost
or tied; a task tests a rule when a check of it demands or forbids what the rule demands) and returns
``diagnostics.team``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from skillopt_sleep.checks import check_key
from skillopt_sleep.documents.block import team_line, team_rule_of
from skillopt_sleep.errors import TeamError
from skillopt_sleep.mine.provenance import UserText
from skillopt_sleep.mine.rulebook import (
    StatedRule,
    contradicts,
    document_rules,
    keys_overlap,
    opposite_keys,
    rule_line,
)
from skillopt_sleep.models import EditRecord, TaskRecord
from skillopt_sleep.paths import ProjectPaths
from skillopt_sleep.team.local import load_local, record_result
from skillopt_sleep.team.location import locate
from skillopt_sleep.team.store import SharedRule, load_rule_files, shared_rules

Key = tuple[str, str]
#: Local statuses a night does not gate again.
SETTLED = ("forgotten", "overridden", "accepted")
#: Archived rule statuses that no longer state anything for the member.
_INACTIVE = ("retired", "forgotten")


class TeamNight(BaseModel):
    """What tonight does with the team rules (module docstring). mode: ``project`` or ``rules_repo``; read: rule ids
    read; rules: the rules gated tonight (each one edit in ``edits``, same order); skipped: ``{id, reason}``;
    overridden: ``{id, reason}`` (recorded); contradictions: ``{ids, kept, reason}``; error: why the team rules could
    not be read (a rule file that does not parse, a failed pull), else None."""

    mode: str
    read: list[str] = Field(default_factory=list)
    rules: list[SharedRule] = Field(default_factory=list)
    edits: list[EditRecord] = Field(default_factory=list)
    skipped: list[dict[str, str]] = Field(default_factory=list)
    overridden: list[dict[str, str]] = Field(default_factory=list)
    contradictions: list[dict[str, Any]] = Field(default_factory=list)
    error: str | None = None

    def provenance(self, user_text: UserText) -> UserText:
        """``user_text`` and the reviewed text of tonight's team rules: the source the night's last provenance check
        of a candidate holding their lines reads (their own literals are theirs, ``step._team_rules_stage``)."""
        return user_text.plus(rule_line(rule.text) for rule in self.rules)

    def report(self) -> dict[str, Any]:
        """``diagnostics.team`` before the gate: mode, rules read, skipped and why, overridden, contradictions,
        proposed (ids), error."""
        return {"mode": self.mode, "read": len(self.read), "proposed": [rule.id for rule in self.rules],
                "skipped": self.skipped, "overridden": self.overridden, "contradictions": self.contradictions,
                "error": self.error}


def rule_keys(rule: SharedRule) -> set[Key]:
    """What a team rule demands: the keys of its checks (``checks.check_key``)."""
    return {check_key(check) for check in rule.checks}


def team_edit(rule: SharedRule, target: str = "memory") -> EditRecord:
    """The edit that proposes team rule ``rule``: append its line, attributed (``documents.block.team_line``)."""
    helped = rule.members("helped")
    return EditRecord(target=target, op="append", content=team_line(rule_line(rule.text), rule.id),
                      rationale=f"team rule {rule.id}, proven by {len(helped)} member(s)")


def _archived_keys(paths: ProjectPaths) -> list[tuple[str, set[Key]]]:
    """(text, keys) of the member's archived rules that still state something (not retired or forgotten)."""
    from skillopt_sleep.archive.tasks import TaskArchive

    if not paths.archive.exists():
        return []
    archive = TaskArchive(paths.archive)
    try:
        return [(entry["text"], {tuple(key) for key in entry["keys"] or []})  # type: ignore[misc]
                for entry in archive.rules() if entry["status"] not in _INACTIVE]
    finally:
        archive.close()


def plan_team_night(project: Path, config: Any, paths: ProjectPaths, *, documents: dict[str, str],
                    stated: list[StatedRule], night_id: str, state_root: Path | None = None,
                    record: bool = True, val: list[TaskRecord] | None = None) -> TeamNight | None:
    """Tonight's team rules (module docstring). config: a ``SleepConfig`` (``team_repo``); documents: kind -> the
    documents the member's agent obeys tonight; stated: tonight's stated rules; val: the val tasks tonight's gate may
    replay: the rules one of them tests (``_tests``) come first in ``TeamNight.rules``, so the edit budget goes to
    rules this member's tasks can prove before those none tests (with many members, rules personal to others would
    fill it every night). Records ``overridden`` verdicts under ``night_id`` (with ``record``; ``team pull``'s
    preview records nothing). None when there is nothing to do
    (not a git work tree, no team rules folder). Never raises for the team's files: a rule file that does not parse
    is ``TeamNight.error`` (no rule gated); a failed pull of the rules repository is too, and its last fetched rules
    are used."""
    pulled: str | None = None
    try:
        location = locate(project, config.team_repo, sync=True, state_root=state_root)
    except TeamError as exc:
        if not config.team_repo:
            return None  # not a git work tree: no team rules here
        try:  # offline, or the remote is gone: the last fetched rules
            location, pulled = locate(project, config.team_repo, state_root=state_root), exc.message
        except TeamError as again:
            return TeamNight(mode="rules_repo", error=again.message)
    if not location.rules_dir.is_dir():
        return None
    plan = TeamNight(mode=location.mode, error=pulled and f"pull failed, last fetched rules used: {pulled}")
    try:
        team = shared_rules(load_rule_files(location.rules_dir))
    except TeamError as exc:
        plan.error = exc.message
        return plan
    if location.mode == "rules_repo":
        team = [rule for rule in team if rule.scope.repository == location.project_name]
    plan.read = [rule.id for rule in team]
    local = load_local(paths).rules
    lines = [(line, keys) for text in documents.values() for line, keys in document_rules(text)]
    own_lines = [(line, {key for key in keys if key[0] != "text"}) for line, keys in lines if not team_rule_of(line)]
    own_rules = [(rule.text, {key for key in rule.key_set if key[0] != "text"}) for rule in stated]
    own_rules += [(text, {key for key in keys if key[0] != "text"}) for text, keys in _archived_keys(paths)]
    candidates: list[SharedRule] = []
    for rule in team:
        keys = rule_keys(rule)
        status = local[rule.id].status if rule.id in local else None
        if status in SETTLED:
            plan.skipped.append({"id": rule.id, "reason": f"{status} here"})
            continue
        against = next((text for text, own in [*own_rules, *own_lines] if contradicts(keys, own)), None)
        if against is not None:
            reason = f"contradicts your rule {against.strip()[:120]!r}: yours wins here"
            if record:
                record_result(paths, rule.id, status="overridden", night_id=night_id, reason=reason, text=rule.text)
            plan.overridden.append({"id": rule.id, "reason": reason})
            continue
        held = next((line for line, own in lines if keys_overlap(keys, own)), None)
        if held is not None:
            plan.skipped.append({"id": rule.id, "reason": f"your documents hold it: {held.strip()[:120]!r}"})
            continue
        mine = next((text for text, own in own_rules if keys_overlap(keys, own)), None)
        if mine is not None:
            plan.skipped.append({"id": rule.id, "reason": f"you stated it yourself: {mine[:120]!r}"})
            continue
        candidates.append(rule)
    losers: set[str] = set()
    for index, rule in enumerate(candidates):
        for other in candidates[index + 1:]:
            if contradicts(rule_keys(rule), rule_keys(other)):
                newer, older = sorted((rule, other), key=lambda r: (r.proposed, r.id), reverse=True)
                losers.add(older.id)
                plan.contradictions.append({"ids": [rule.id, other.id], "kept": newer.id,
                                            "reason": f"{rule.id} and {other.id} contradict: the newer "
                                                      f"{newer.id} ({newer.proposed}) is gated"})
    for rule in sorted(candidates, key=lambda r: not any(_tests(task, rule_keys(r)) for task in val or [])):
        if rule.id in losers:
            plan.skipped.append({"id": rule.id, "reason": "contradicts a newer team rule"})
        else:
            plan.rules.append(rule)
            plan.edits.append(team_edit(rule))
    return plan


def _tests(task: TaskRecord, keys: set[Key]) -> bool:
    """A val task tests a team rule when one of its checks demands what the rule demands, or the opposite (a task
    that forbids the rule's literal tests it too)."""
    related = keys | opposite_keys(keys)
    return any(check_key(check) in related for check in task.judge.checks)


def _verdict(rule: SharedRule, step: Any, *, accepted: bool) -> tuple[str, dict[str, int], str]:
    """(local status, {wins, losses, ties}, reason) of one gated team rule from the step's result."""
    counts = {"wins": 0, "losses": 0, "ties": 0}
    edit = next((e for e in step.edits if team_rule_of(e.content or "") == rule.id), None)
    if edit is None:
        return "pending", counts, "not proposed tonight"
    if edit.status == "applied":
        keys = rule_keys(rule)
        by_id = {task.id: task for task in step.val}
        for comparison in step.gate.per_task:
            task = by_id.get(comparison.task_id)
            if task is not None and _tests(task, keys) and comparison.outcome in ("win", "loss", "tie"):
                counts[{"win": "wins", "loss": "losses", "tie": "ties"}[comparison.outcome]] += 1
        if accepted:
            return "accepted", counts, f"accepted by the gate on your val tasks: {step.gate.reason}"[:300]
        if step.gate.details.get("pending"):
            return "pending", counts, "the gate wants more evidence"
        if not any(counts.values()):  # untested here: it waits for a val task of this member that tests it
            return "pending", counts, ("no val task of yours tests it yet (the candidate it was gated in was "
                                       f"rejected: {step.gate.reason})")[:300]
        return "rejected", counts, f"the gate rejected the candidate: {step.gate.reason}"[:300]
    reason = edit.reason or edit.status
    if reason.startswith("gate repair"):
        blamed = next((b for b in (step.gate.details.get("repair") or {}).get("blamed", [])
                       if b.get("content") == (edit.content or "")[:200]), {})
        counts["losses"] = len(blamed.get("fixes") or [])
        return "rejected", counts, reason
    if reason.startswith(("unsupported", "not selected")) or edit.status == "unmatched":
        return "pending", counts, reason
    return "rejected", counts, reason


def record_team_night(paths: ProjectPaths, plan: TeamNight, step: Any, *, night_id: str,
                      accepted: bool) -> dict[str, Any]:
    """Record each gated team rule's verdict on this member's work (``local.record_result``) and return
    ``diagnostics.team``: ``plan.report()`` plus ``accepted``, ``rejected`` and ``pending`` (``{id, wins, losses,
    ties, reason}``). step: tonight's ``StepResult``; accepted: the night staged the step's own candidate."""
    report = plan.report()
    for name in ("accepted", "rejected", "pending"):
        report[name] = []
    for rule in plan.rules:
        status, counts, reason = _verdict(rule, step, accepted=accepted)
        record_result(paths, rule.id, status=status, night_id=night_id, reason=reason, text=rule.text,  # type: ignore[arg-type]
                      **counts)
        report[status].append({"id": rule.id, **counts, "reason": reason})
    return report


def preview_team_night(project: Path, config: Any, *, paths: ProjectPaths | None = None,
                       state_root: Path | None = None) -> TeamNight | None:
    """``team pull``: pull the rules repository (``rules_repo`` mode; in ``project`` mode rules travel with the
    project's own ``git pull``) and say what the next night will gate, against the member's managed files as they
    are now (``review.rule_ledger.managed_files``). Records nothing. None: no team rules here."""
    from skillopt_sleep.documents.targets import read_document
    from skillopt_sleep.review.rule_ledger import managed_files

    project = Path(project).expanduser().resolve()
    paths = paths or ProjectPaths(project, state_root)
    documents = {kind: read_document(path) for kind, path in managed_files(project, skill_path=config.skill_path,
                                                                             memory_path=config.memory_path)}
    return plan_team_night(project, config, paths, documents=documents, stated=[], night_id="preview",
                           state_root=state_root, record=False)
