"""The user's rules across nights (the ``rules`` table of the task archive): how often each was stated, where it
stands, and what it won on held-out tasks.

* ``with_history(rules, archive)`` (before the step, read only): tonight's ``mine.rulebook.StatedRule``s, each matched
  to the archived rule it is (their check keys overlap, or, for rules without checks, it says what an archived
  phrasing says: ``mine.lasting.similar``), with the archived id, all the keys and phrasings known for it (so that a
  line written in an earlier night's words counts as stating it), the checks its phrasings imply for those keys (so
  that it is compiled from everything it demands) and ``stated_total`` = all nights' statements, then
  re-ordered most stated first: recurrence across nights orders the edit budget; and the archived lasting rules
  not stated tonight that no night has gated yet (status ``stated``: over an earlier night's edit budget, or
  ``pending``), carried to be proposed again (``CARRIED``), unless a newer rule contradicts it (``superseded``: the
  user changed their mind, "we moved from black to ruff"; a candidate never holds both). A ``candidate`` (stated
  once, no lasting scope) that an earlier night stated too becomes ``lasting`` ("stated on N nights"), as does any
  rule an earlier night found lasting; a ``one_off`` stays one (its words tie it to its task, and a task sent again
  on another night restates nothing).
* ``held_rules(archive, documents, tonight)`` (before the step, read only): the archived rules a document line states
  now, known by all their phrasings, so that an optimizer edit that restates one in the user's words yields and one
  that contradicts one is refused.
* ``record_night(archive, rules, step, ...)`` (after a completed night): adds tonight's statements (phrasings,
  sessions, the night; a night counts once) and sets each rule's status from what became of its edit:

  - ``adopted``: the live documents state it (its edit was written to the project tonight, or a line already says
    it); ``accepted``: in an accepted candidate that is staged, not yet written;
  - ``pending``: in a candidate the gate left pending; ``rejected``: in a candidate the gate rejected on its scores
    (``rejections`` counts such nights); ``stated``: not proposed yet (over the edit budget, or blocked);
  - ``retired``: an accepted newer rule replaced its line (``replaced_by``), or, never written, a lasting rule stated
    tonight contradicts it (``superseded``).

  Held-out record: when the rule's edit was in the tested candidate, the val tasks whose checks test what the rule
  demands add their win / loss; ``last_exercised`` is the last night a replayed task tested it.
"""

from __future__ import annotations

from typing import Any

from skillopt_sleep.archive.pending import is_pending
from skillopt_sleep.archive.tasks import TaskArchive
from skillopt_sleep.checks import check_key, check_of_key
from skillopt_sleep.engine.gate import EVIDENCE_CLAUSES
from skillopt_sleep.engine.step import StepResult
from skillopt_sleep.grammar.statements import checks_for_rule
from skillopt_sleep.mine.lasting import similar
from skillopt_sleep.mine.rulebook import (
    StatedRule,
    contradicts,
    keys_overlap,
    line_keys,
    rule_edit,
    stating_line,
    text_key,
)
from skillopt_sleep.models import Check, TaskRecord

#: A rule's scope only widens across nights: once lasting, always lasting.
_SCOPE_RANK = {"one_off": 0, "candidate": 1, "lasting": 2}
#: Most phrasings and session ids kept per rule.
MAX_PHRASINGS = 12
MAX_SESSIONS = 50


def _keys(entry: dict[str, Any]) -> set[tuple[str, str]]:
    return {tuple(key) for key in entry["keys"]}  # type: ignore[misc]


def _match(rule: StatedRule, archived: list[dict[str, Any]]) -> dict[str, Any] | None:
    for entry in archived:
        if _keys(entry) & rule.key_set:
            return entry
    if rule.checks:
        return None
    for entry in archived:
        if not any(key[0] != "text" for key in _keys(entry)) and any(
                similar(phrasing, known) for phrasing in rule.phrasings for known in entry["phrasings"]):
            return entry
    return None


def _scope_across_nights(rule: StatedRule, entry: dict[str, Any]) -> dict[str, Any]:
    """The scope of ``rule`` given its archived ``entry`` (module docstring): the fields to update, or {}."""
    if rule.scope != "candidate":
        return {}
    earlier = entry["nights"]
    if entry.get("scope") == "lasting":
        return {"scope": "lasting", "scope_reason": f"lasting since {entry.get('first_night')}: "
                                                    f"{entry.get('scope_reason') or 'stated before'}"}
    if earlier and entry.get("stated", 0) + rule.stated >= rule.needed_tasks:  # a plain imperative: a third
        return {"scope": "lasting", "scope_reason": f"stated on {len(earlier) + 1} nights"}
    return {}


def with_history(rules: list[StatedRule], archive: TaskArchive | None) -> list[StatedRule]:
    """Tonight's rules with their archived id and all-night count (module docstring), most stated first."""
    if archive is None:
        return list(rules)
    archived = archive.rules()
    out = []
    for rule in rules:
        entry = _match(rule, archived)
        if entry is None:
            out.append(rule)
            continue
        keys = set(rule.key_set) | _keys(entry)
        phrasings = list(dict.fromkeys([*rule.phrasings, *entry["phrasings"]]))
        out.append(rule.model_copy(update={"id": entry["id"], "stated_total": entry["stated"] + rule.stated,
                                           "keys": sorted(keys), "phrasings": phrasings,
                                           "checks": _implied_checks(keys, phrasings, rule.checks),
                                           **_scope_across_nights(rule, entry)}))
    matched = {rule.id for rule in out}
    newer = _stated_tonight(out)
    newer += [(_keys(entry), entry.get("last_night") or "") for entry in archived if entry.get("scope") == "lasting"
              and entry.get("status") != "retired"]
    out += [_carried(entry) for entry in archived if entry["id"] not in matched and entry.get("status") in CARRIED
            and entry.get("scope") == "lasting" and not superseded(entry, newer)]
    out.sort(key=lambda item: (-item.stated_total, -item.stated, item.text))
    return out


#: Statuses of an archived lasting rule that a night proposes again though nobody stated it tonight: never proposed
#: (``stated``: over the edit budget, or blocked) or left pending by the gate.
CARRIED = ("stated", "pending")


def _stated_tonight(rules: list[StatedRule]) -> list[tuple[set[tuple[str, str]], str]]:
    """``superseded``'s ``newer`` for the lasting rules of ``rules`` stated tonight: (keys, ``"tonight"``)."""
    return [(rule.key_set, "tonight") for rule in rules if rule.stated and rule.scope == "lasting"]


def superseded(entry: dict[str, Any], newer: list[tuple[set[tuple[str, str]], str]]) -> bool:
    """An archived rule that a rule stated later contradicts (one demands a literal the other forbids,
    ``rulebook.contradicts``). newer: (keys, night id or ``"tonight"``, which sorts after every night id: ids are
    ``YYYY-MM-DDTHHMMSSZ``) of the rules to compare with; the entry's own night is its ``last_night``."""
    stated = entry.get("last_night") or ""
    return any(night > stated and contradicts(_keys(entry), keys) for keys, night in newer)


def held_rules(archive: TaskArchive | None, documents: dict[str, str],
               tonight: list[StatedRule] | None = None) -> list[StatedRule]:
    """The archived rules a line of ``documents`` states now (``rulebook.stating_line``; adopted on an earlier night,
    or written by hand), each known by all its archived keys and phrasings, for the step's restatement and
    contradiction tests (``rulebook.restated_rule_reason``, ``contradicted_rule_reason``): an optimizer edit that says
    such a rule again in the user's words yields, one that contradicts it is refused. Left out: retired rules, and
    rules a lasting rule of ``tonight`` contradicts (the user changed their mind tonight: the old line is about to be
    replaced). documents: kind -> text. [] without an archive."""
    if archive is None:
        return []
    newer = _stated_tonight(tonight or [])
    out = []
    for entry in archive.rules():
        if entry.get("status") == "retired" or superseded(entry, newer):
            continue
        rule = _carried(entry)
        if stating_line(rule, documents) is not None:
            out.append(rule.model_copy(update={"scope_reason": "a document states it"}))
    return out


def _carried(entry: dict[str, Any]) -> StatedRule:
    """An archived lasting rule not stated tonight, to be proposed again (``stated`` 0: tonight counts no statement
    of it). Its words are the archive's phrasings; what it demands, its archived keys; its checks, those its phrasings
    imply that demand one of those keys (so that it is worded as a rule known by checks is)."""
    keys = _keys(entry)
    checks = _implied_checks(keys, entry["phrasings"], [])
    return StatedRule(id=entry["id"], keys=sorted(keys), text=entry["text"], checks=checks,
                      phrasings=list(entry["phrasings"]), stated=0, stated_total=entry["stated"], scope="lasting",
                      scope_reason=f"{entry.get('scope_reason') or 'lasting'}; carried from night "
                                   f"{entry.get('last_night')}, not yet gated")


def _implied_checks(keys: set[tuple[str, str]], phrasings: list[str], checks: list[Check]) -> list[Check]:
    """``checks``, then the checks the ``phrasings`` imply (``checks_for_rule``) that demand one of ``keys`` and no
    check holds yet: a rule known across nights by more keys than tonight's checks demand ("we're a uv shop" tonight,
    "we don't use pip in this project, add it with uv" on an earlier night) is compiled and worded by all of them.
    A key no phrasing implies (one a gloss of a phrasing in another language gave: "no uses axios, usa siempre
    fetch" is known by ``not axios``) gets the check that demands it (``checks.check_of_key``)."""
    out = list(checks)
    for check in (check for phrasing in phrasings for check in checks_for_rule(phrasing)):
        if check_key(check) in keys and all(check_key(known) != check_key(check) for known in out):
            out.append(check)
    held = {check_key(check) for check in out}
    rule = phrasings[0] if phrasings else None
    out += [check for key in sorted(keys - held)
            if (check := check_of_key(key, origin="house_rule", rule=rule)) is not None]
    return out


def _tests(task: TaskRecord, keys: set[tuple[str, str]]) -> bool:
    return any(check_key(check) in keys for check in task.judge.checks)


def record_night(archive: TaskArchive, rules: list[StatedRule], step: StepResult, *, night_id: str, adopted: bool,
                 replayed: list[TaskRecord], documents_after: dict[str, str]) -> None:
    """Store tonight in the ``rules`` table (module docstring).

    step: tonight's step (its edits with their final status, the gate's decision on the tested candidate, the
    gate's val tasks); adopted: the accepted documents were written to the project tonight; replayed: every task
    replayed tonight (train and val); documents_after: the live documents after tonight (kind -> text).
    """
    archived = archive.rules()
    edits, gate = step.edits, step.gate
    accepted, pending, clause = step.accepted, is_pending(step), gate.details.get("clause")
    per_task = gate.per_task
    by_id = {task.id: task for task in step.val}
    for rule in rules:
        entry = _match(rule, archived)
        if entry is None:
            entry = {"id": rule.id, "keys": [], "text": rule.text, "phrasings": [], "sessions": [], "nights": [],
                     "stated": 0, "status": "stated", "rejections": 0, "wins": 0, "losses": 0,
                     "first_night": night_id, "last_night": night_id, "last_exercised": None,
                     "status_night": None, "replaced_by": None, "scope": rule.scope,
                     "scope_reason": rule.scope_reason}
            archived.append(entry)
        keys = _keys(entry) | rule.key_set
        entry["keys"] = sorted([list(key) for key in keys])
        entry["phrasings"] = list(dict.fromkeys([*entry["phrasings"], *rule.phrasings]))[-MAX_PHRASINGS:]
        entry["sessions"] = list(dict.fromkeys([*entry["sessions"], *rule.session_ids]))[-MAX_SESSIONS:]
        if night_id not in entry["nights"] and rule.stated:  # a carried rule was not stated tonight
            entry["nights"].append(night_id)
            entry["stated"] += rule.stated
            entry["last_night"] = night_id
        if _SCOPE_RANK[rule.scope] >= _SCOPE_RANK.get(entry.get("scope") or "lasting", 2):
            entry["scope"], entry["scope_reason"] = rule.scope, rule.scope_reason
        if any(_tests(task, keys) for task in replayed):
            entry["last_exercised"] = night_id
        edit = rule_edit(rule, edits)
        status = entry["status"]
        if edit is not None and edit.status == "applied":
            if accepted:
                status = "adopted" if adopted else "accepted"
            elif pending:
                status = "pending"
            elif clause in EVIDENCE_CLAUSES:
                status = "rejected"
                entry["rejections"] += 1
            for comparison in per_task:
                task = by_id.get(comparison.task_id)
                if task is not None and _tests(task, keys) and comparison.outcome in ("win", "loss"):
                    entry["wins" if comparison.outcome == "win" else "losses"] += 1
            if accepted and edit.op == "replace" and edit.anchor:
                _retire(archived, edit.anchor, replaced_by=entry["id"], night_id=night_id)
        elif stating_line(rule, documents_after) is not None and status not in ("retired",):
            status = "adopted"
        if status != entry["status"]:
            entry["status"], entry["status_night"] = status, night_id
        entry["text"] = entry["text"] or rule.text
        if rule.stated and rule.scope == "lasting":
            _supersede(archived, entry, night_id=night_id)
    for entry in archived:
        archive.put_rule(entry)


def _supersede(archived: list[dict[str, Any]], newer: dict[str, Any], *, night_id: str) -> None:
    """The rules never written (status ``CARRIED`` or ``rejected``) that ``newer``, stated tonight, contradicts
    retire: the user's newest statement is the rule. A written one retires only when its line is replaced."""
    for entry in archived:
        if entry["id"] != newer["id"] and entry["status"] in (*CARRIED, "rejected") and contradicts(_keys(newer),
                                                                                                   _keys(entry)):
            entry["status"], entry["status_night"], entry["replaced_by"] = "retired", night_id, newer["id"]


def _retire(archived: list[dict[str, Any]], line: str, *, replaced_by: str, night_id: str) -> None:
    """The rules the replaced ``line`` stated (what it demands, or its words) retire."""
    demanded = line_keys(line)
    for entry in archived:
        known = _keys(entry) | {text_key(phrasing) for phrasing in entry["phrasings"]} | {text_key(entry["text"])}
        if entry["id"] != replaced_by and keys_overlap(known, demanded):
            entry["status"], entry["status_night"], entry["replaced_by"] = "retired", night_id, replaced_by
