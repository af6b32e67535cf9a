"""The user's rules as first-class objects: one rule however it was phrased, proposed once, in the form that works.

A *rule* is a standing instruction the user stated in their own messages (``TaskRecord.rules`` holds the
phrasings). Its identity is what it demands: the keys (``validation.check_key``) of the checks validated for it in
the sessions. Phrasings whose validated checks overlap are one rule ("use pnpm, not npm" and "we're a pnpm shop"
both demand "has pnpm"), and so are phrasings that say the same instruction (``lasting.similar``, on the words or,
for a phrasing in another language, on its English ``gloss``); a rule with no validated check is identified by its
words (``text_key``).

* ``stated_rules(tasks)``: tonight's rules from the tasks that may teach (train tasks, and tasks that are not
  replayable: their corrections still count; never a val or test task, which would leak the held-out evidence),
  each with its phrasings, tasks, sessions and how often it was stated (task recurrence).
* ``document_rules(text)``: the lines of a document and what each demands (``rules.checks_for_rule`` of the line).
* ``user_rule_edits(rules, documents, target, wording, screen)``: one edit per *lasting* rule not yet in any document
  (a candidate waits to be stated again, a one-off never is one: ``mine/lasting.py``; of two rules that contradict
  each other only the first is proposed, so a candidate never holds both): ``prepend`` the rule as one
  bullet, or ``replace`` the managed-block line it contradicts (a newer rule "we moved from yarn to pnpm" replaces
  "- always use yarn."). Rules come most-stated first (across nights, ``StatedRule.stated_total``), so recurrence
  orders the edit budget. A night's new rules stand at the top of the block, in that order, above the rules of
  earlier nights: the model has not followed a new rule yet (it was just taught), and a small model follows the
  first lines of its instructions most (world 2's night-2 candidate: its uv probes 1 of 4 with the uv line fifth, 4
  of 4 with it first; no world's compliance lowered by the order, ``docs/benchmarks.md``). The bullet
  (``written_line``) is the rule compiled from its checks ("Use `pnpm`, never `npm` (e.g. `pnpm add`).",
  ``mine/compile.py``) when that line is ``admissible`` (the rule reader reads it back as
  the same checks) and passes the screens; else, and with ``wording = "user"``, the user's most frequent phrasing.
  The user's words stay the rule's provenance: its text, the edit's rationale (``rule_rationale``), and every
  later night recognises either line as the rule (``stating_line``, ``rule_edit``: they compare what lines demand).
* ``restated_rule_reason(content, rules, documents, held)``: why an optimizer edit only restates a user-stated rule, a
  line the documents already hold, or a rule of the user's such a line was written from (the user's words win; a
  rule is never written twice); ``contradicted_rule_reason(content, rules)``: why one contradicts a rule of the
  user's (the user's rule wins).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from skillopt_sleep.checks import check_key
from skillopt_sleep.documents.block import BLOCK_BEGIN, BLOCK_END, BLOCK_HEADING, managed_block, strip_team_mark
from skillopt_sleep.grammar.statements import checks_for_rule
from skillopt_sleep.mine.compile import compile_rule
from skillopt_sleep.mine.lasting import RECURRENCE_TASKS, recurrence_needed, similar
from skillopt_sleep.models import Check, EditRecord, RuleScope, RuleStatement, TaskRecord

Key = tuple[str, str]
#: How a rule is worded in a document (config ``rule_wording``): compiled from its checks, or the user's words.
RuleWording = Literal["compiled", "user"]
#: A screen an edit's content passes: why it may not be written, or None.
Screen = Callable[[str], str | None]

_BULLET = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+")


def text_key(text: str) -> Key:
    """The key of a rule known only by its words: lower case, single spaces, no bullet or end punctuation."""
    return "text", " ".join(_BULLET.sub("", text or "").casefold().split()).rstrip(".!;:, ")


def rule_line(text: str) -> str:
    """The one bullet format of a rule in a document: ``- <text>.``"""
    body = " ".join(_BULLET.sub("", text or "").split()).rstrip(" ;,")
    if body and body[-1] not in ".!?":
        body += "."
    return f"- {body}"


def line_keys(line: str) -> set[Key]:
    """What a document line demands: the keys of the checks its words imply, and its text key (a team rule's
    attribution, ``block.team_line``, is not part of its words)."""
    statement = _BULLET.sub("", strip_team_mark(line)).strip()
    keys = {check_key(check) for check in checks_for_rule(statement)}
    return keys | {text_key(statement)}


class StatedRule(BaseModel):
    """One rule the user stated. id: ``r-`` + 10 hex of its first keys (the archive keeps it across nights);
    keys: what it demands (validated check keys, or its text key); text: the phrasing proposed (the most stated,
    then the earliest); stated: times stated tonight (sum of the recurrence of its tasks); stated_total: times
    stated over all nights (``stated`` until the archive adds earlier nights); scope: ``lasting`` (it may be
    written into the memory), ``candidate`` (waits to be stated again) or ``one_off`` (the detail of one task),
    and scope_reason why (``mine/lasting.py``)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    keys: list[Key]
    text: str
    phrasings: list[str] = Field(default_factory=list)
    checks: list[Check] = Field(default_factory=list)
    task_ids: list[str] = Field(default_factory=list)
    session_ids: list[str] = Field(default_factory=list)
    stated: int = 0
    stated_total: int = 0
    scope: RuleScope = "lasting"
    scope_reason: str = ""
    accepted_answers: list[str] = Field(default_factory=list)
    """The answers the user accepted in its tasks (``TaskEvidence.accepted_answer``), in the order of ``task_ids``:
    where a compiled line takes its example from (``compile.compile_rule``)."""
    corrected_answers: list[str] = Field(default_factory=list)
    """The answers the user corrected in its tasks (``TaskEvidence.corrected_answers``), in the order of
    ``task_ids``: where a compiled line takes the command a literal to avoid was used as (``compile.compile_rule``)."""

    @property
    def key_set(self) -> set[Key]:
        return set(map(tuple, self.keys))  # type: ignore[arg-type]

    @property
    def checked(self) -> bool:
        """The rule is known by validated checks (not only by its words)."""
        return any(kind != "text" for kind, _ in self.keys)

    @property
    def needed_tasks(self) -> int:
        """Different tasks that must state the rule for it to last by recurrence: the fewest any of its phrasings
        needs (``lasting.recurrence_needed``: a plain imperative needs a third)."""
        return min(recurrence_needed(phrasing) for phrasing in self.phrasings or [self.text])


def rule_id(keys: set[Key]) -> str:
    digest = hashlib.sha256("\n".join(f"{kind}\x00{value}" for kind, value in sorted(keys)).encode()).hexdigest()
    return "r-" + digest[:10]


def teaches(task: TaskRecord) -> bool:
    """A task whose rules may be proposed: a train task, or one that is not replayable (never val or test)."""
    return not task.replayable or task.split == "train"


def _phrasing_keys(task: TaskRecord, phrasing: str) -> set[Key]:
    keys = {check_key(check) for check in task.judge.checks if check.rule == phrasing}
    return keys or {text_key(phrasing)}


def _scope(statements: list[RuleStatement], tasks: int, needed: int) -> tuple[RuleScope, str]:
    """A rule is lasting when one of its statements is, or when it was stated in the ``needed`` tasks its phrasings
    need (``StatedRule.needed_tasks``); else a candidate (or one-off, when every statement was)."""
    lasting = next((statement for statement in statements if statement.scope == "lasting"), None)
    if lasting is not None:
        return "lasting", lasting.why
    tied = all(statement.scope == "one_off" for statement in statements)
    if tasks >= needed and not (tied and needed > RECURRENCE_TASKS):  # a kind of task, each naming its object
        return "lasting", f"stated in {tasks} tasks"
    if tied:
        return "one_off", statements[0].why
    waiting = next(statement for statement in statements if statement.scope == "candidate")
    return "candidate", waiting.why


def stated_rules(tasks: list[TaskRecord]) -> list[StatedRule]:
    """Tonight's rules from the tasks that ``teaches`` allows (module docstring), most stated first."""
    groups: list[dict] = []
    for task in tasks:
        if not teaches(task):
            continue
        for statement in task.rules:
            phrasing = statement.text
            keys = _phrasing_keys(task, phrasing)
            checks = [check for check in task.judge.checks if check.rule == phrasing]
            readings = [phrasing, statement.gloss] if statement.gloss else [phrasing]  # in English too
            matches = [index for index, group in enumerate(groups) if group["keys"] & keys
                       or any(similar(reading, known) for reading in readings for known in group["readings"])]
            if matches:
                target = groups[matches[0]]
                for index in sorted(matches[1:], reverse=True):  # the phrasing joins rules: merge them
                    other = groups.pop(index)
                    for name in ("keys", "tasks", "sessions"):
                        target[name] |= other[name]
                    target["phrasings"].extend(other["phrasings"])
                    target["readings"].extend(other["readings"])
                    target["accepted"].update(other["accepted"])
                    target["corrected"].update(other["corrected"])
                    target["statements"].extend(other["statements"])
                    target["checks"].extend(other["checks"])
                    target["stated"] += other["stated"]
            else:
                target = {"keys": set(), "tasks": set(), "sessions": set(), "phrasings": [], "readings": [],
                          "checks": [], "statements": [], "stated": 0, "order": len(groups), "accepted": {},
                          "corrected": {}}
                groups.append(target)
            target["keys"] |= keys
            target["phrasings"].append(phrasing)
            target["readings"].extend(readings)
            target["statements"].append(statement)
            target["checks"].extend(check for check in checks
                                    if all(check_key(check) != check_key(known) for known in target["checks"]))
            if task.id not in target["tasks"]:
                target["stated"] += task.recurrence
            if task.evidence.accepted_answer:
                target["accepted"][task.id] = task.evidence.accepted_answer
            if task.evidence.corrected_answers:
                target["corrected"][task.id] = task.evidence.corrected_answers
            target["tasks"].add(task.id)
            target["sessions"] |= set(task.session_ids)
    out: list[StatedRule] = []
    for group in groups:
        counts: dict[str, int] = {}
        for phrasing in group["phrasings"]:
            counts[phrasing] = counts.get(phrasing, 0) + 1
        text = max(counts, key=lambda phrasing: (counts[phrasing], -group["phrasings"].index(phrasing)))
        rule = StatedRule(id=rule_id(group["keys"]), keys=sorted(group["keys"]), text=text,
                          phrasings=list(dict.fromkeys(group["phrasings"])), checks=group["checks"],
                          task_ids=sorted(group["tasks"]), session_ids=sorted(group["sessions"]),
                          stated=group["stated"], stated_total=group["stated"],
                          accepted_answers=[group["accepted"][task_id] for task_id in sorted(group["accepted"])],
                          corrected_answers=[answer for task_id in sorted(group["corrected"])
                                             for answer in group["corrected"][task_id]])
        rule.scope, rule.scope_reason = _scope(group["statements"], len(group["tasks"]), rule.needed_tasks)
        out.append(rule)
    out.sort(key=lambda rule: (-rule.stated_total, -rule.stated, rule.text))
    return out


# --------------------------------------------------------------------------- rules in the documents


def document_rules(text: str) -> list[tuple[str, set[Key]]]:
    """Each non-empty line of a document that could state a rule (not a heading, marker or frontmatter), with
    what it demands (``line_keys``)."""
    out = []
    for line in (text or "").splitlines():
        stripped = line.strip()
        if (not stripped or stripped.startswith(("#", "<!--", "---")) or stripped in (BLOCK_BEGIN, BLOCK_END)
                or re.match(r"^(?:name|description):", stripped)):
            continue
        out.append((line.rstrip(), line_keys(stripped)))
    return out


def keys_overlap(some: set[Key], others: set[Key]) -> bool:
    """The two demand something in common: a shared key, or a literal one uses as a command the other demands
    (``has "uv add"``, the line ``Use `uv add`...``, demands ``has "uv"``; ``_command_of``)."""
    return bool(some & others) or any(_command_of(key, others) for key in some) or any(
        _command_of(key, some) for key in others)


def _demands(rule: StatedRule) -> set[Key]:
    """What a stated rule demands, read as a document line is read (``line_keys``): its keys (validated checks, or its
    words), and the keys of the checks each of its phrasings implies, validated or not. So "Tests use vitest, never
    jest" is held by a line "Use `vitest`, never `jest`." even when no session validated its checks."""
    return rule.key_set.union(*(line_keys(phrasing) for phrasing in rule.phrasings))


def stating_line(rule: StatedRule, documents: dict[str, str]) -> str | None:
    """The document line that already states ``rule`` (what it demands overlaps the rule's, ``_demands``), or
    None."""
    return _held_by(_demands(rule), documents)


def _held_by(wanted: set[Key], documents: dict[str, str]) -> str | None:
    """The first document line whose demands overlap ``wanted``, or None."""
    for text in documents.values():
        for line, keys in document_rules(text):
            if keys_overlap(wanted, keys):
                return line
    return None


def opposite_keys(keys: set[Key]) -> set[Key]:
    """What contradicts ``keys``: forbidding each literal they demand, demanding each one they forbid (``has`` <->
    ``not``; other keys have no opposite)."""
    return {("not" if kind == "has" else "has", value) for kind, value in keys if kind in ("has", "not")}


def contradicts(keys: set[Key], other: set[Key]) -> bool:
    """One demands a literal the other forbids (``opposite_keys``), a literal's command form included
    (``keys_overlap``): the one test of a contradiction between rules, lines and team rules."""
    return keys_overlap(opposite_keys(keys), other)


def contradicted_line(rule: StatedRule, block: str) -> str | None:
    """The managed-block line a newer rule contradicts: it demands a literal the rule forbids, or forbids one the
    rule demands ("- always use yarn." against "we moved from yarn to pnpm"). None when there is none."""
    for line, keys in document_rules(block):
        if line.strip() != BLOCK_HEADING and contradicts(rule.key_set, keys):
            return line
    return None


def admissible(line: str, rule: StatedRule) -> bool:
    """A line may state ``rule`` in other words than the user's: read back by the deterministic rule reader
    (``line_keys``), it demands what the rule demands, no more and no less (its check keys, text keys aside; a
    ``has`` key is also demanded by a longer literal that holds it, ``has "ruff format"`` demands ``has "ruff"``, and
    a ``not`` key by a shorter one it holds, ``not "os"`` demands ``not "os.path"``; a ``has`` key is read as the
    literal it is a command form of, ``has "uv add"`` as ``has "uv"``). A rule known only by its words never is."""
    demanded = {key for key in rule.key_set if key[0] != "text"}
    read = {key for key in line_keys(line) if key[0] != "text"}
    read = {key if key in demanded else _command_of(key, demanded) or key for key in read}

    def implied(kind: str, value: str) -> bool:
        return (kind, value) in read or any(
            kind == other_kind and (value in other if kind == "has" else other in value)
            for other_kind, other in read if kind in ("has", "not"))

    return bool(demanded) and read <= demanded and all(implied(*key) for key in demanded)


def _command_of(key: Key, demanded: set[Key]) -> Key | None:
    """The ``demanded`` key of the same kind (``has`` or ``not``) that ``key`` names as a command (``has "uv add"`` of
    ``has "uv"``, ``not "pip install"`` of ``not "pip"``: the literal, a space and one more word, as ``compile`` writes
    ``Use `uv add```, ``never `pip install```), or None."""
    kind, value = key
    if kind not in ("has", "not"):
        return None
    return next((other for other in demanded if other[0] == kind and value.startswith(other[1] + " ")
                 and len(value[len(other[1]) + 1:].split()) == 1), None)


def compiled_body(rule: StatedRule, *, examples: bool = True, screen: Screen | None = None) -> str | None:
    """The rule's compiled imperative (``compile.compile_rule``, no bullet) as the night writes it: with its example
    from the accepted answers and its forbidden command from the corrected ones, else without the forbidden command,
    else without the example, else without either (with ``examples = False``, only the last two), the first whose
    line (``rule_line``) is ``admissible`` and that ``screen`` (the screens every edit passes; a reason refuses) lets
    through; None when none is, or the rule has no imperative."""
    accepted, corrected = rule.accepted_answers, rule.corrected_answers
    ladder = ((accepted, corrected), (accepted, []), ([], corrected), ([], []))
    for example_answers, avoided in (ladder if examples else ladder[2:]):
        body = compile_rule(rule, example_answers, avoided)
        if body is None:
            return None
        line = rule_line(body)
        if admissible(line, rule) and (screen is None or screen(line) is None):
            return body
    return None


def written_line(rule: StatedRule, *, wording: RuleWording = "compiled", screen: Screen | None = None) -> str:
    """The document line a rule is written as: with ``wording = "compiled"``, its ``compiled_body`` as a line;
    otherwise, and when it has none, the user's most frequent phrasing (``rule_line(rule.text)``)."""
    body = compiled_body(rule, screen=screen) if wording == "compiled" else None
    return rule_line(body if body is not None else rule.text)


def rule_rationale(rule: StatedRule) -> str:
    """Why a rule's edit is proposed, with the user's words it came from: ``stated by the user 4 time(s) (2
    tonight); you said: "we use pnpm in this repo, never npm"``."""
    tonight = f" ({rule.stated} tonight)" if rule.stated != rule.stated_total else ""
    return f'stated by the user {rule.stated_total} time(s){tonight}; you said: "{rule.text}"'


def user_rule_edits(rules: list[StatedRule], documents: dict[str, str], *, target: str,
                    wording: RuleWording = "compiled", screen: Screen | None = None) -> list[EditRecord]:
    """One edit per stated rule that no document states yet (module docstring), in the order of ``rules``.

    documents: kind -> text (``skill``, ``memory``); target: the document a new rule is appended to. A rule that
    contradicts a line of a managed block replaces that line in its document. wording, screen: how each rule is
    worded (``written_line``; config ``rule_wording``); the rationale keeps the user's words (``rule_rationale``).
    """
    edits: list[EditRecord] = []
    written: set[Key] = set()
    for rule in rules:
        demands = _demands(rule)
        if (rule.scope != "lasting" or keys_overlap(demands, written)
                or contradicts(rule.key_set, written) or _held_by(demands, documents) is not None):
            continue  # a candidate waits to be stated again; a one-off is never a memory line; no candidate holds
            # two rules that contradict each other (the first, most stated, is proposed)
        written |= demands
        evidence = list(rule.task_ids)
        rationale = rule_rationale(rule)
        content = written_line(rule, wording=wording, screen=screen)
        replaced = None
        for kind, text in documents.items():
            line = contradicted_line(rule, managed_block(text))
            if line is not None:
                replaced = (kind, line)
                break
        if replaced is not None:
            kind, line = replaced
            edits.append(EditRecord(target=kind, op="replace", anchor=line.strip(), content=content,
                                    rationale=f"{rationale}; replaces the rule it contradicts", evidence=evidence))
        else:
            edits.append(EditRecord(target=target, op="prepend", content=content, rationale=rationale,
                                    evidence=evidence))
    return edits


def rule_edit(rule: StatedRule, edits: list[EditRecord]) -> EditRecord | None:
    """The edit of ``edits`` that writes ``rule`` (in the user's words or compiled: its content states what the rule
    demands, ``stating_line``'s test), an applied one first; None when there is none."""
    wanted = rule.key_set | {text_key(phrasing) for phrasing in rule.phrasings} | {text_key(rule.text)}
    stating = [edit for edit in edits if edit.op != "delete" and edit.content
               and keys_overlap(wanted, line_keys(edit.content))]
    return next((edit for edit in stating if edit.status == "applied"), stating[0] if stating else None)


def contradicted_rule_reason(content: str, rules: Sequence[StatedRule]) -> str | None:
    """Why an edit's content contradicts a lasting rule of the user's (``contradicts``: it demands a literal the rule
    forbids, or forbids one the rule demands), or None. The user's rule wins: the optimizer proposed ``Use `black`,
    never `autopep8`.`` (read in a recalled task's words) on the night the user said "we moved from black to ruff"
    (learning world 2, night 3). rules: tonight's stated rules and the rules a document holds."""
    keys = {key for key in line_keys(content) if key[0] != "text"}
    for rule in rules:
        if rule.scope == "lasting" and contradicts(rule.key_set, keys):
            return f"contradicts the user's rule {rule.text!r}: the user's rule wins"
    return None


def restated_rule_reason(content: str, rules: list[StatedRule], documents: dict[str, str],
                         held: Sequence[StatedRule] = ()) -> str | None:
    """Why an edit's content only restates a user-stated rule (the user's words are proposed instead) or a rule a
    document already holds, or None. Compared by what they demand (``line_keys``), not by wording. held: the users'
    rules a document states (adopted on earlier nights, ``archive.rule_history.held_rules``), known by everything
    their phrasings demand: the line a document holds is the compiled form, and an edit that says the rule in the
    user's words ("Always use timezone-aware UTC ...", beside ``Use `datetime.now(timezone.utc)`.``) restates it."""
    keys = line_keys(content)
    demanded = {key for key in keys if key[0] != "text"} | {text_key(content)}  # what it demands, or its very words
    for rule in rules:
        if keys_overlap(_demands(rule), demanded):
            return f"restates the user's rule {rule.text!r}: the user's own words are proposed instead"
    line = _held_by(demanded, documents)
    if line is not None:
        return f"already stated in the documents: {line.strip()[:120]!r}"
    for rule in held:
        if keys_overlap(_demands(rule), demanded) and (line := stating_line(rule, documents)) is not None:
            return f"already stated in the documents: {line.strip()[:120]!r} (the user's rule {rule.text!r})"
    return None
