"""The rules ledger: every rule learned or proposed for a project, where it lives, where it stands; and ``forget``.

``list_rules`` joins three sources:

* the ``rules`` table of the task archive (``archive.rule_history``): the rules the user stated, with the nights and
  sessions that taught them, how often, held-out wins and losses, the last night a replayed task tested them, and
  the status the nights gave them (adopted, accepted, pending, rejected, stated, retired);
* the managed blocks of the project's files (every agent's memory file, ``documents.targets.MEMORY_FILES``, and the
  skill): the file and line where each rule lives now. A managed-block line no stated rule matches was learned from the
  scored replays (``origin = "replays"``), or is a team rule's (``origin = "team"``, its team rule id: the line's
  attribution, ``documents.block.team_line``);
* ``forgotten.json`` in the project's state dir: the rules removed with ``forget``.

Status, as shown: ``adopted`` (in a file), ``staged`` (accepted, waiting for ``skillopt-sleep adopt``),
``pending`` (waiting for more held-out evidence), ``rejected`` (the gate rejected it on ``rejections`` nights),
``not proposed`` (lasting, not proposed yet: over the edit budget, or blocked), ``candidate`` (stated once without a
lasting scope: waits to be stated again), ``one-off`` (the scope or detail of one task: never proposed), ``retired``
(a newer rule replaced it), ``forgotten``. ``scope`` and ``scope_reason`` say why a rule is lasting, a candidate or a
one-off (``mine/lasting.py``). ``stale``: an adopted rule that no replayed task has tested for ``stale_after_nights``
nights (shown, never deleted).

``forget_rule`` removes one rule's line from every managed block that holds it, as a change of its own
(``<UTC stamp>-forget-<rule id>`` under the nights dir): written atomically with backups through ``adopt``, so it
is listed by ``history`` and undone by ``revert <change id>`` (which restores the line and the rule's status: a
forget counts only while its change is adopted, ``load_forgotten``). It records the rule in ``forgotten.json`` (a night
does not propose it again unless the user states it again after the forget: ``drop_forgotten``) and the line in
the rejected-edit ledger (the optimizer is not re-tested on the same words).
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from skillopt_sleep.documents.block import block_rule_lines, strip_team_mark, team_rule_of
from skillopt_sleep.documents.targets import (
    DEFAULT_SKILL_PATH,
    MEMORY_FILES,
    Document,
    check_target,
    read_document,
    sha256_text,
    stage_proposal,
)
from skillopt_sleep.errors import SleepError
from skillopt_sleep.fsio import read_json, write_json_atomic
from skillopt_sleep.mine.rulebook import StatedRule, line_keys, rule_line, text_key
from skillopt_sleep.models import EditRecord, TaskRecord
from skillopt_sleep.review.adopt import adopt_night, load_adoptions, night_sort_key
from skillopt_sleep.state import ProjectPaths

FORGOTTEN_FILE = "forgotten.json"
#: The reason the rejected-edit ledger gives for a forgotten rule's line.
FORGOTTEN_REASON = "forgotten by the user (skillopt-sleep forget)"


class RuleLocation(BaseModel):
    """Where a rule lives: file (project-relative), kind (``skill``, ``memory`` or ``memory:<agent>``), line
    (1-based) and the line's text."""

    file: str
    kind: str
    line: int
    text: str


class RuleEntry(BaseModel):
    """One rule of the ledger (module docstring). nights / sessions: ids that taught it; stated: statements over
    all nights; wins / losses: held-out tasks testing it that its candidate won / lost; last_exercised: the last
    night a replayed task tested it; nights_unexercised: completed nights since then (or since it was first
    stated); stale: adopted and unexercised for ``stale_after_nights`` (None when unknown: learned from replays)."""

    id: str
    text: str
    origin: str
    """``you`` (you stated it), ``replays`` (learned from the scored replays) or ``team`` (a team rule this member's
    gate accepted: ``skillopt_sleep/team``)."""
    status: str
    locations: list[RuleLocation] = Field(default_factory=list)
    nights: list[str] = Field(default_factory=list)
    sessions: list[str] = Field(default_factory=list)
    stated: int = 0
    rejections: int = 0
    wins: int = 0
    losses: int = 0
    last_exercised: str | None = None
    nights_unexercised: int | None = None
    stale: bool | None = None
    forgotten_at: str | None = None
    scope: str = "lasting"
    """``lasting``, ``candidate`` or ``one_off`` (``models.RuleStatement``); ``replays`` rules are lasting."""
    scope_reason: str = ""


# --------------------------------------------------------------------------- the managed files


def managed_files(project: Path, *, skill_path: str | None = None, memory_path: str | None = None
                  ) -> list[tuple[str, Path]]:
    """(kind, path) of every managed target that exists in ``project``: the skill, the configured memory, and each
    agent's memory file (``memory:<agent>``), one entry per distinct file."""
    candidates = [("skill", skill_path or DEFAULT_SKILL_PATH)]
    if memory_path:
        candidates.append(("memory", memory_path))
    # CLAUDE.md is "memory" unless memory_path names another file (kinds key the documents of a forget: unique)
    candidates += [("memory" if agent == "claude" and not memory_path else f"memory:{agent}", name)
                   for agent, name in MEMORY_FILES.items()]
    out: list[tuple[str, Path]] = []
    for kind, name in candidates:
        path = project / name
        if path.is_file() and all(path != known for _, known in out):
            check_target(project, path)
            out.append((kind, path))
    return out


def _learned_id(line: str) -> str:
    return "l-" + hashlib.sha256(text_key(line)[1].encode()).hexdigest()[:10]


def _demands(entry: dict[str, Any]) -> set[tuple[str, str]]:
    """What an archived or forgotten rule demands: its check keys and the words of its text and phrasings
    (``mine.rulebook.text_key``), the same identity ``mine.rulebook.stating_line`` matches on."""
    keys = {tuple(key) for key in entry.get("keys") or []}
    return keys | {text_key(phrasing) for phrasing in [entry.get("text"), *(entry.get("phrasings") or [])] if phrasing}


def _matches(entry: dict[str, Any], line: str) -> bool:
    return bool(_demands(entry) & (line_keys(line) | {text_key(line)}))


# --------------------------------------------------------------------------- forgotten rules


def load_forgotten(paths: ProjectPaths) -> dict[str, dict[str, Any]]:
    """Rule id -> ``{text, keys, at (ISO time), change}`` of every forgotten rule ({} when none). A forget whose
    change was reverted (``revert <change id>``: its latest adoption record says ``reverted``) is not one: the
    adoption records are the one truth of what is in force, so ``rules``, ``history`` and the nights agree. Raises
    SleepError for a file that is not valid JSON (naming it), DamagedFileError for damaged adoption records."""
    try:
        data = read_json(paths.root / FORGOTTEN_FILE, default=None) or {}
    except ValueError as exc:
        raise SleepError(f"{paths.root / FORGOTTEN_FILE} is not valid JSON ({exc}); move it aside") from None
    latest = {adoption.night_id: adoption.status for adoption in load_adoptions(paths)}
    return {str(rule_id): entry for rule_id, entry in (data.get("rules") or {}).items()
            if isinstance(entry, dict) and latest.get(str(entry.get("change"))) != "reverted"}


def drop_forgotten(rules: list[StatedRule], tasks: list[TaskRecord], paths: ProjectPaths) -> list[StatedRule]:
    """Tonight's stated rules without the forgotten ones the user has not stated again since the forget (a rule is
    stated again when one of its tasks was last seen after the forget's time). An unreadable ``forgotten.json``
    forgets nothing."""
    try:
        forgotten = list(load_forgotten(paths).values())
    except SleepError:
        return list(rules)
    if not forgotten:
        return list(rules)
    seen = {task.id: task.last_seen for task in tasks}
    kept = []
    for rule in rules:
        wanted = rule.key_set | {text_key(phrasing) for phrasing in rule.phrasings}
        entry = next((f for f in forgotten if _demands(f) & wanted), None)
        if entry is None:
            kept.append(rule)
            continue
        at = datetime.fromisoformat(entry["at"])
        latest = [seen[task_id] for task_id in rule.task_ids if seen.get(task_id) is not None]
        if latest and max(latest) > at:
            kept.append(rule)
    return kept


# --------------------------------------------------------------------------- the ledger


def _nights_since(night_ids: list[str], night: str | None) -> int | None:
    if night is None:
        return None
    reference = night_sort_key(night)
    return sum(1 for night_id in night_ids if night_sort_key(night_id) > reference)


def list_rules(project: Path, paths: ProjectPaths, *, stale_after_nights: int = 30, skill_path: str | None = None,
               memory_path: str | None = None) -> list[RuleEntry]:
    """Every rule learned or proposed for ``project`` (module docstring): the user's rules most stated first, then
    the lines learned from replays in file order. Reads only; raises SleepError for an unreadable forgotten.json or
    a managed file outside the project."""
    from skillopt_sleep.archive.tasks import TaskArchive
    from skillopt_sleep.review.report import night_ids

    project = Path(project).expanduser().resolve()
    lines: list[RuleLocation] = []
    for kind, path in managed_files(project, skill_path=skill_path, memory_path=memory_path):
        name = str(path.relative_to(project))
        lines += [RuleLocation(file=name, kind=kind, line=number, text=text)
                  for number, text in block_rule_lines(read_document(path))]
    archived: list[dict[str, Any]] = []
    if paths.archive.exists():
        archive = TaskArchive(paths.archive)
        try:
            archived = archive.rules()
        finally:
            archive.close()
    forgotten = load_forgotten(paths)
    nights = night_ids(paths)
    out: list[RuleEntry] = []
    claimed: set[int] = set()
    for entry in archived:
        where = []
        for index, location in enumerate(lines):
            if index not in claimed and _matches(entry, location.text):
                claimed.add(index)
                where.append(location)
        status = entry["status"]
        forgot = forgotten.get(entry["id"])
        if where:
            status = "adopted"
        elif forgot is not None and not (entry.get("last_night") and night_sort_key(entry["last_night"])
                                         > night_sort_key(forgot.get("change", ""))):
            status = "forgotten"
        scope = entry.get("scope") or "lasting"
        if status == "stated" and scope != "lasting":
            status = "one-off" if scope == "one_off" else "candidate"
        status = {"accepted": "staged", "stated": "not proposed"}.get(status, status)
        unexercised = _nights_since(nights, entry.get("last_exercised") or entry.get("first_night"))
        out.append(RuleEntry(
            id=entry["id"], text=entry["text"], origin="you", status=status, locations=where,
            nights=list(entry.get("nights") or []), sessions=list(entry.get("sessions") or []),
            stated=entry.get("stated") or 0, rejections=entry.get("rejections") or 0, wins=entry.get("wins") or 0,
            losses=entry.get("losses") or 0, last_exercised=entry.get("last_exercised"),
            nights_unexercised=unexercised,
            stale=status == "adopted" and unexercised is not None and unexercised >= stale_after_nights,
            forgotten_at=forgot.get("at") if forgot and status == "forgotten" else None, scope=scope,
            scope_reason=entry.get("scope_reason") or ""))
    learned: dict[str, RuleEntry] = {}
    for index, location in enumerate(lines):
        if index in claimed:
            continue
        team = team_rule_of(location.text)
        rule_id = team or _learned_id(location.text)
        if rule_id in learned:
            learned[rule_id].locations.append(location)
        else:
            learned[rule_id] = RuleEntry(id=rule_id, text=strip_team_mark(location.text).lstrip("-*+ ").strip(),
                                         origin="team" if team else "replays", status="adopted",
                                         locations=[location])
    for rule_id, forgot in forgotten.items():
        if rule_id not in learned and rule_id.startswith(("l-", "t-")):
            learned[rule_id] = RuleEntry(id=rule_id, text=str(forgot.get("text") or ""),
                                         origin="team" if rule_id.startswith("t-") else "replays",
                                         status="forgotten", forgotten_at=forgot.get("at"))
    out += list(learned.values())
    return out + _team_waiting(paths, {entry.id for entry in out})


def _team_waiting(paths: ProjectPaths, known: set[str]) -> list[RuleEntry]:
    """The team rules this member's nights gated that are in no file (``team.json``: pending, rejected, overridden,
    forgotten), with their status here and held-out record."""
    from skillopt_sleep.errors import DamagedFileError
    from skillopt_sleep.team.local import load_local

    try:
        local = load_local(paths).rules
    except DamagedFileError:
        return []
    return [RuleEntry(id=rule_id, text=entry.text or "(team rule)", origin="team", status=entry.status,
                      nights=list(entry.nights), wins=entry.record.wins, losses=entry.record.losses)
            for rule_id, entry in local.items() if rule_id not in known and entry.status != "accepted"]


# --------------------------------------------------------------------------- forget


def forget_rule(project: Path, paths: ProjectPaths, rule_id: str, *, skill_path: str | None = None,
                memory_path: str | None = None, now: datetime | None = None) -> dict[str, Any]:
    """Remove rule ``rule_id``'s lines from every managed block that holds them, as one adopted change (module
    docstring). Returns ``{"rule", "change_id", "files", "adoption"}``. Raises SleepError for an unknown rule or one
    that is in no file (naming its status), and whatever ``adopt_night`` raises (nothing written then);
    LockedError while a night runs."""
    from skillopt_sleep.archive.rejected_edits import rejected_edit_key
    from skillopt_sleep.archive.tasks import TaskArchive

    project = Path(project).expanduser().resolve()
    rules = list_rules(project, paths, skill_path=skill_path, memory_path=memory_path)
    rule = next((r for r in rules if r.id == rule_id), None)
    if rule is None:
        known = ", ".join(r.id for r in rules[:8]) or "none"
        raise SleepError(f"no rule {rule_id!r} for this project (known: {known}); 'skillopt-sleep rules' lists them")
    if not rule.locations:
        raise SleepError(f"rule {rule_id} is {rule.status}, not in any of your files: nothing to forget")
    moment = now or datetime.now(timezone.utc)
    change_id = f"{moment.strftime('%Y-%m-%dT%H%M%SZ')}-forget-{rule_id}"
    by_file: dict[str, list[int]] = {}
    for location in rule.locations:
        by_file.setdefault(location.file, []).append(location.line)
    documents: dict[str, Document] = {}
    candidate: dict[str, str] = {}
    for name, numbers in by_file.items():
        path = project / name
        text = read_document(path)
        kind = next(location.kind for location in rule.locations if location.file == name)
        kept = [line for number, line in enumerate(text.splitlines(keepends=True), 1) if number not in numbers]
        documents[kind] = Document(kind=kind, path=path, text=text, exists=True, sha256=sha256_text(text),
                                   evolve=True, baseline_text=text)
        candidate[kind] = "".join(kept)
    night_dir = paths.nights / change_id
    stage_proposal(night_dir, documents, candidate)
    adoption = adopt_night(project, paths=paths, night_id=change_id,
                           allowed_targets=[document.path for document in documents.values()])
    forgotten = load_forgotten(paths)
    archived_keys: list[list[str]] = []
    archive = TaskArchive(paths.archive)
    try:
        entry = next((e for e in archive.rules() if e["id"] == rule_id), None)
        archived_keys = list(entry["keys"]) if entry else []
        # the optimizer is not re-tested on the same words: the lines removed, and the user's words of the rule (a
        # line compiled from its checks is not how the user, nor the optimizer, phrases it)
        words = [rule.text, *((entry or {}).get("phrasings") or [])] if rule.origin == "you" else []
        for location in rule.locations:
            for content in dict.fromkeys([location.text, *(rule_line(text) for text in words if text)]):
                edit = EditRecord(target=location.kind.split(":")[0], op="append", content=content)
                archive.add_rejected_edit(key=rejected_edit_key(edit), night_id=change_id, target=edit.target,
                                          op="append", anchor=None, content=content, reason=FORGOTTEN_REASON)
    finally:
        archive.close()
    forgotten[rule_id] = {"text": rule.text, "keys": archived_keys, "at": moment.isoformat(), "change": change_id}
    write_json_atomic(paths.root / FORGOTTEN_FILE, {"format": "skillopt-sleep-forgotten/1", "rules": forgotten},
                      mode=0o600)
    if rule.origin == "team":  # no night gates it again (team/night.py), and ``team status`` shows it
        from skillopt_sleep.team.local import record_result

        record_result(paths, rule_id, status="forgotten", night_id=change_id, reason=FORGOTTEN_REASON)
    return {"rule": rule.model_dump(mode="json"), "change_id": change_id, "files": sorted(by_file),
            "adoption": adoption.model_dump(mode="json")}
