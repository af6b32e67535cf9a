"""Wording chosen by evidence: each stated rule the step writes is worded the way its own tasks are passed most.

A small model follows one wording of a rule and ignores another (issue 26: on world 1's requests the target passes
11 of 24 with the users' words, 15 with the words plus the forms their checks demand). So for every rule the step
proposes (``mine.rulebook.user_rule_edits``), ``choose_wordings`` makes the candidate lines (``wordings``):

* ``compiled``: the compiled imperative with its example (``mine/compile.py``, ``Use `pnpm`, never `npm` (e.g.
  `pnpm add`).``), as the step writes it (``rulebook.compiled_body``: a form the screens refuse is dropped);
* ``compiled_plain``: the same without the example;
* ``user``: the user's most frequent phrasing (the rule's provenance);
* ``user+compiled``: the user's words, then the compiled form (``we use pnpm in this repo, never npm: use `pnpm`,
  never `npm`.``); when the rule reader does not read that back as the rule, the compiled form, then the user's
  words (``Use `pnpm`, never `npm`: we use pnpm in this repo, never npm.``).

A machine-made line is a candidate only if the rule reader reads it back as the rule's check keys
(``rulebook.admissible``); every candidate passes the screens every edit passes (``screen``). Each candidate is
written into the documents the way the step's candidate would be (the rule's edit with that content, alone, applied
to the managed block) and the rule's own train tasks (those it was stated in and whose checks test it) are replayed
with it, through the night's ``Replayer`` (its meter, and its cache: the same model, documents and task are never
replayed twice). The line that passes most tasks (hard score) is kept; ties go to the shortest line; when no
candidate passes any task there is no evidence and the line the step chose without replays stays. Candidates are
replayed shortest first and the replays stop at the first that passes every task (no later one could be chosen over
it); a candidate not replayed shows 0 tasks.

A rule that stays adopted but is still corrected is re-worded the same way: a lasting rule whose line already stands
in a managed block (``rulebook.stating_line``) and whose own train tasks fail tonight with the current documents gets
a ``replace`` of that line with the best candidate, only if it passes more of those tasks than the current line (and
only when that line demands nothing beyond the rule: a line that states more is never cut down to one rule).

When no line passes every own task replayed, the optimizer may be asked once for another (``engine/rewrite.py``,
config ``wording_rewrite``): after every rule's own lines were replayed, with what they left of the budget (so a
rewrite never starves a rule stated less), kept only when it reads back as the rule, passes the screens and passes
more tasks than every other line.

Budget: at most ``budget`` calls a night (config ``wording_max_calls``, off by default: on the learning worlds the
choice wrote no better lines than compiling alone, at up to 12 more calls a night), spent on the rules the user stated
most first (``StatedRule.stated_total``). A rule is replayed only when every candidate fits on at least one task in
what is left (the upper bound: one call per task and candidate, two for a task with a rubric); a rule left without
budget keeps its line. Archived tasks are not replayed for the choice: the archive's tasks are the gate's held-out ones.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from skillopt_sleep.checks import check_key
from skillopt_sleep.documents.block import managed_block
from skillopt_sleep.documents.targets import prompt_views
from skillopt_sleep.engine.edits import apply_edits
from skillopt_sleep.engine.replay import Replayer, replay_tasks
from skillopt_sleep.engine.rewrite import Rewriter
from skillopt_sleep.mine.rulebook import (
    Screen,
    StatedRule,
    admissible,
    compiled_body,
    line_keys,
    rule_edit,
    rule_line,
    rule_rationale,
    stating_line,
)
from skillopt_sleep.models import EditRecord, ReplayResult, TaskRecord

#: The candidate wordings of a rule, in the order they are made (``wordings``).
WordingLabel = Literal["compiled", "compiled_plain", "user", "user+compiled", "current", "rewrite"]


class Candidate(BaseModel):
    """One wording of a rule and how it did: ``passes`` of ``tasks`` own tasks passed (hard score 1)."""

    model_config = ConfigDict(extra="forbid")

    label: WordingLabel
    line: str
    passes: int = 0
    tasks: int = 0


class WordingChoice(BaseModel):
    """The choice made for one rule. kind: ``new`` (a rule the step appends or replaces a contradicted line with) or
    ``reword`` (an adopted rule still corrected); line: what the rule's edit writes now; calls: target (and rubric
    judge) calls made for it; outcome: what was decided and why."""

    model_config = ConfigDict(extra="forbid")

    rule_id: str
    rule: str
    stated_total: int
    kind: Literal["new", "reword"]
    task_ids: list[str] = Field(default_factory=list)
    candidates: list[Candidate] = Field(default_factory=list)
    line: str = ""
    calls: int = 0
    outcome: str = ""
    rewrite: str = ""
    """What became of the optimizer's rewrite (``engine/rewrite.py``): empty when none was asked for."""


class WordingReport(BaseModel):
    """What the wording choice did in one step (``diagnostics.mining["wording"]``): the budget, the calls spent, and
    one ``WordingChoice`` per rule considered, in the order the budget was spent."""

    model_config = ConfigDict(extra="forbid")

    budget: int = 0
    calls: int = 0
    rules: list[WordingChoice] = Field(default_factory=list)

    def as_diagnostics(self) -> dict[str, Any]:
        """The report as JSON-ready data (``StepResult.wording``, ``diagnostics.mining["wording"]``)."""
        return self.model_dump(mode="json")


def wordings(rule: StatedRule, *, screen: Screen | None = None) -> list[Candidate]:
    """The candidate lines of ``rule`` (module docstring), distinct, each passing ``screen`` (a reason refuses it);
    a machine-made line also ``admissible``. [] for a rule with no validated check."""
    if not rule.checked:
        return []
    made: list[tuple[WordingLabel, str]] = []
    compiled = compiled_body(rule, screen=screen)
    plain = compiled_body(rule, examples=False, screen=screen)
    if compiled is not None:
        made.append(("compiled", rule_line(compiled)))
    if plain is not None:
        made.append(("compiled_plain", rule_line(plain)))
    words = rule_line(rule.text)
    made.append(("user", words))
    if plain is not None:
        said = words[2:].rstrip(".!?;:, ")
        made.append(("user+compiled", rule_line(f"{said}: {plain[:1].lower()}{plain[1:]}")))
        made.append(("user+compiled", rule_line(f"{plain.rstrip('.')}: {said}")))  # when the first is not read back
    out: list[Candidate] = []
    for label, line in made:
        if any(candidate.line == line or candidate.label == label for candidate in out):
            continue
        if _refusal(line, rule, screen, machine_made=label != "user") is None:
            out.append(Candidate(label=label, line=line))
    return out


def _refusal(line: str, rule: StatedRule, screen: Screen | None, *, machine_made: bool = True) -> str | None:
    """Why ``line`` may not stand for ``rule``: a machine-made line that does not read back as the rule's checks
    (``admissible``), or what ``screen`` refuses; None when it may."""
    if machine_made and not admissible(line, rule):
        return "does not read back as the rule's checks"
    return screen(line) if screen is not None else None


def own_tasks(rule: StatedRule, train: list[TaskRecord]) -> list[TaskRecord]:
    """The train tasks ``rule`` was stated in whose checks test it (a check with one of its keys), in train order."""
    ids = set(rule.task_ids)
    keys = rule.key_set
    return [task for task in train if task.id in ids and task.split == "train"
            and any(check_key(check) in keys for check in task.judge.checks)]


def _cost(task: TaskRecord) -> int:
    """The most calls one replay of ``task`` makes: the target call, and the rubric judge's when it has a rubric."""
    return 1 + bool((task.judge.rubric or "").strip())


def _passes(results: list[ReplayResult]) -> int:
    return sum(1 for result in results if result.error is None and result.hard)


def _best(candidates: list[Candidate]) -> Candidate | None:
    """The candidate that passes most tasks, ties to the shortest line (then the first made); None when none passes
    any task (no evidence)."""
    best = max(candidates, key=lambda candidate: (candidate.passes, -len(candidate.line)), default=None)
    return best if best is not None and best.passes > 0 else None


def _adopted_line(rule: StatedRule, documents: dict[str, str]) -> tuple[str, str] | None:
    """(kind, line) of the managed-block line that states ``rule``, when the first line of the documents that states
    it stands in a managed block (a line the user wrote outside it is never re-worded); else None."""
    found = stating_line(rule, documents)
    if found is None:
        return None
    for kind, text in documents.items():
        if stating_line(rule, {kind: managed_block(text)}) == found:
            return kind, found
    return None


def _replay_line(edit: EditRecord, line: str, tasks: list[TaskRecord], documents: dict[str, str],
                 replayer: Replayer) -> list[ReplayResult]:
    """``tasks`` replayed with ``documents`` where ``edit`` writes ``line`` (alone; at temperature 0, one sample,
    as the gate's first pass)."""
    texts = dict(documents)
    probe = edit.model_copy(update={"content": line, "status": "proposed", "reason": ""})
    texts[edit.target], _ = apply_edits(texts.get(edit.target, ""), [probe], edit.target)
    return replay_tasks(tasks, replayer, **prompt_views(texts))


def choose_wordings(rules: list[StatedRule], edits: list[EditRecord], *, train: list[TaskRecord],
                    train_results: list[ReplayResult], documents: dict[str, str], replayer: Replayer,
                    budget: int, screen: Screen | None = None,
                    rewriter: Rewriter | None = None) -> tuple[list[EditRecord], WordingReport]:
    """The rules' edits with each line chosen by replay, and re-wordings of adopted rules still corrected (module
    docstring).

    rules: the stated rules (``mine.rulebook.stated_rules``); edits: their edits (``user_rule_edits``: one per rule
    no document states yet); train / train_results: the step's train tasks and their rollouts with ``documents``
    (the current documents, kind -> text); replayer: the night's (its meter counts every call, its cache is used);
    budget: the most calls (0: nothing is replayed and ``edits`` come back as given); rewriter: the optimizer's
    rewrite (``engine/rewrite.py``), asked once for a rule no candidate passes every own task of, after every rule's
    own lines were replayed (with what they left of the budget), or None. Returns (the edits, most-stated rule
    first, a rule's edit re-worded in place and a re-wording ``replace`` where its rule stands; the report).
    Raises what ``replay_tasks`` raises (``BackendError``, ``BudgetExhausted``).
    """
    report = WordingReport(budget=budget)
    if budget <= 0:
        return list(edits), report
    failing = {result.task_id for result in train_results if result.error is None and not result.hard}
    claimed: dict[int, StatedRule] = {}  # id(edit) -> its rule
    work: list[tuple[StatedRule, EditRecord, str | None]] = []  # (rule, the edit replayed, the adopted line)
    for rule in rules:
        if rule.scope != "lasting":
            continue
        edit = rule_edit(rule, edits)
        if edit is not None and id(edit) not in claimed:
            claimed[id(edit)] = rule
            work.append((rule, edit, None))
        elif edit is None and rule.checked:
            adopted = _adopted_line(rule, documents)
            if adopted is not None and any(task.id in failing for task in own_tasks(rule, train)) and {
                    key for key in line_keys(adopted[1]) if key[0] != "text"} <= rule.key_set:
                kind, line = adopted  # still corrected tonight
                work.append((rule, EditRecord(target=kind, op="replace", anchor=line.strip(), content=line.strip()),
                             line.strip()))
    work.sort(key=lambda item: -item[0].stated_total)  # stable: ties keep the rules' order
    chosen: dict[int, EditRecord] = {}
    rewordings: list[tuple[StatedRule, EditRecord]] = []
    decided: list[tuple[StatedRule, EditRecord, str | None, WordingChoice, Candidate | None]] = []
    for rule, edit, adopted in work:
        choice, best = _choose(rule, edit, adopted, train=train, documents=documents, replayer=replayer,
                               left=budget - report.calls, screen=screen)
        report.rules.append(choice)
        report.calls += choice.calls
        decided.append((rule, edit, adopted, choice, best))
    if rewriter is not None:  # then the optimizer's rewrites, with what the lines we build left of the budget
        for index, (rule, edit, adopted, choice, best) in enumerate(decided):
            before = replayer.meter.calls
            rewrite = _rewrite_stage(rule, edit, choice, train=train, documents=documents, replayer=replayer,
                                     left=budget - report.calls, screen=screen, rewriter=rewriter)
            spent = replayer.meter.calls - before
            choice.calls += spent
            report.calls += spent
            if rewrite is not None:
                decided[index] = (rule, edit, adopted, choice, rewrite)
    for rule, edit, adopted, choice, best in decided:
        if best is None:
            continue
        scores = ", ".join(f"{candidate.label} {candidate.passes}/{candidate.tasks}" for candidate in choice.candidates
                           if candidate.tasks)  # those replayed
        if adopted is None:
            chosen[id(edit)] = edit.model_copy(update={
                "content": best.line,
                "rationale": f"{edit.rationale}; wording chosen by replay on its own tasks: {scores}"})
        else:
            rewordings.append((rule, edit.model_copy(update={
                "content": best.line, "evidence": list(rule.task_ids),
                "rationale": (f"{rule_rationale(rule)}; still corrected: re-worded by replay on its own tasks "
                              f"({scores})")})))
    # a re-wording goes before the first edit of a rule stated fewer times
    placed: dict[int, list[EditRecord]] = {}
    for rule, reword in rewordings:
        where = next((index for index, edit in enumerate(edits)
                      if id(edit) in claimed and claimed[id(edit)].stated_total < rule.stated_total), len(edits))
        placed.setdefault(where, []).append(reword)
    out: list[EditRecord] = []
    for index, edit in enumerate(edits):
        out.extend(placed.get(index, []))
        out.append(chosen.get(id(edit), edit))
    out.extend(placed.get(len(edits), []))
    return out, report


def _choose(rule: StatedRule, edit: EditRecord, adopted: str | None, *, train: list[TaskRecord],
            documents: dict[str, str], replayer: Replayer, left: int,
            screen: Screen | None) -> tuple[WordingChoice, Candidate | None]:
    """Replay the candidate wordings of one rule (``adopted``: the line that states it now, a candidate too, or None
    for a new rule whose ``edit`` is proposed) on its own tasks within ``left`` calls. Returns (the choice, the
    candidate to write, or None to keep the line as it is)."""
    choice = WordingChoice(rule_id=rule.id, rule=rule.text, stated_total=rule.stated_total,
                           kind="new" if adopted is None else "reword", line=edit.content)
    candidates = wordings(rule, screen=screen)
    if adopted is not None:
        candidates = [Candidate(label="current", line=adopted),
                      *(candidate for candidate in candidates if candidate.line != adopted)]
    tasks = own_tasks(rule, train)
    if len(candidates) < 2:
        choice.outcome = "one wording: nothing to choose"
        return choice, None
    if not tasks:
        choice.outcome = "kept: no own train task whose checks test it"
        return choice, None
    fitting: list[TaskRecord] = []
    planned = 0
    for task in tasks:
        if planned + _cost(task) * len(candidates) > left:
            break
        fitting.append(task)
        planned += _cost(task) * len(candidates)
    if not fitting:
        choice.outcome = f"kept: no budget left ({left} call(s) for {len(candidates)} wordings)"
        return choice, None
    choice.task_ids = [task.id for task in fitting]
    before = replayer.meter.calls
    # shortest first (the current line before all): once one passes every task, no other can be chosen over it
    for candidate in sorted(candidates, key=lambda candidate: (candidate.label != "current", len(candidate.line))):
        if candidate.label == "current":
            results = replay_tasks(fitting, replayer, **prompt_views(documents))
        else:
            results = _replay_line(edit, candidate.line, fitting, documents, replayer)
        candidate.passes, candidate.tasks = _passes(results), len(fitting)
        if candidate.passes == len(fitting):
            break
    choice.candidates = candidates
    choice.calls = replayer.meter.calls - before
    best = _best(candidates)
    if best is None:
        choice.outcome = "kept: no wording passed an own task"
        return choice, None
    if adopted is not None and best.passes <= candidates[0].passes:
        choice.outcome = "kept: no wording passes more own tasks than the current line"
        return choice, None
    choice.line = best.line
    choice.outcome = f"chose {best.label}" if adopted is None else f"re-worded as {best.label}"
    return choice, best


def _rewrite_stage(rule: StatedRule, edit: EditRecord, choice: WordingChoice, *, train: list[TaskRecord],
                   documents: dict[str, str], replayer: Replayer, left: int, screen: Screen | None,
                   rewriter: Rewriter) -> Candidate | None:
    """The optimizer's rewrite of a rule whose lines were replayed and none passed every task replayed (``choice``,
    updated in place: its candidates, line, outcome and ``rewrite``). Returns the rewrite when it passes more tasks
    than every other line (the line to write), else None."""
    if not choice.task_ids or not any(candidate.tasks for candidate in choice.candidates):
        return None
    ids = set(choice.task_ids)
    tasks = [task for task in own_tasks(rule, train) if task.id in ids]
    top = max(candidate.passes for candidate in choice.candidates)
    if top >= len(tasks):
        return None
    rewrite, choice.rewrite = _rewrite(rule, edit, choice.candidates, tasks, documents=documents,
                                       replayer=replayer, left=left, screen=screen, rewriter=rewriter)
    if rewrite is None:
        return None
    choice.candidates.append(rewrite)
    if rewrite.passes <= top:
        return None
    choice.line = rewrite.line
    choice.outcome = "chose rewrite" if choice.kind == "new" else "re-worded as rewrite"
    return rewrite


def _rewrite(rule: StatedRule, edit: EditRecord, tried: list[Candidate], tasks: list[TaskRecord], *,
             documents: dict[str, str], replayer: Replayer, left: int, screen: Screen | None,
             rewriter: Rewriter) -> tuple[Candidate | None, str]:
    """Ask ``rewriter`` once for another line of ``rule`` and replay it on ``tasks`` (when the call and the replays
    fit in ``left`` calls). Returns (the replayed candidate, or None; what became of the rewrite)."""
    if left < 1 + sum(_cost(task) for task in tasks):
        return None, "not asked: no budget left"
    ordered = sorted((candidate for candidate in tried if candidate.tasks),
                     key=lambda candidate: candidate.label not in ("compiled", "compiled_plain"))
    text = rewriter(rule, ordered, tasks)
    if text is None:
        return None, "refused: the reply held no line"
    line = rule_line(text)
    if any(candidate.line == line for candidate in tried):
        return None, f"refused: {line!r} was tried already"
    reason = _refusal(line, rule, screen)
    if reason is not None:
        return None, f"refused: {line!r}: {reason}"
    results = _replay_line(edit, line, tasks, documents, replayer)
    candidate = Candidate(label="rewrite", line=line, passes=_passes(results), tasks=len(tasks))
    return candidate, f"replayed: {candidate.passes}/{candidate.tasks}"
