"""Mine harvested sessions into ``TaskRecord``s: requests to replay, labelled by the user's own reactions.

Input: ``list[Session]`` from ``skillopt_sleep.harvest`` (texts already secret-redacted). Output: ``MineResult``.

How turns become tasks (applied per session in turn order):

1. Noise is dropped and counted in ``MineResult.dropped``: ``empty`` requests, ``control_command`` (built-in
   slash commands such as ``/clear``, ``/model``), ``shell_command`` (a command line typed into the chat, ``npm run
   dev``), ``pasted_terminal`` / ``pasted_page`` (a pasted screen or page as the whole message:
   ``requests.pasted_reason``), ``pasted_agent_text`` (an agent's answer pasted back, e.g. a sub-agent's report
   relayed to its parent: ``requests.AgentTexts``) - these also end the thread, so nothing after them is read as a
   reaction - and ``acknowledgement`` (only words like "thanks", "ok", "continue", "retry") or ``single_key`` (``y``,
   ``a``: the answer to a prompt). These are still the user's reaction to the task before them (approval), and the
   answer and tools of their turn continue that task (a "continue" after an interrupt finishes the same work). What
   the user typed in a message is read apart from what they pasted into it (``grammar.typed``; a block an agent wrote,
   ``requests.AgentTexts.without_copies``): rules, ``authored`` and the reaction texts come from the typed part only.
   Injected text (notifications, reminders, hook and command output, compaction summaries) never reaches mining:
   the harvesters drop it.
2. A message that reacts to the open task is **never a task of its own** (``reaction_to``): a correction, a
   re-ask, a short approval, a short message right after the user stopped the agent, a request to redo the answer
   ("rewrite it with httpx"), a rule statement the last answer breaks ("we're a pnpm shop" after ``npm
   install``), or a message that only states rules. It labels the task: its reaction, its text
   (``evidence.reaction_text``), the answer it objected to (``evidence.corrected_answers``) and its rules
   (origin ``correction``). It is **never** part of the replayed prompt, so the baseline cannot pass by being told
   the answer. A *refinement* ("also ...", "plus ...", "one more thing ...") adds requirements: it is appended to
   the prompt and kept in ``TaskRecord.refinements``. Messages queued while the agent was busy
   (``Turn.queued_messages``) are read the same way. Folded messages are counted as ``folded_reaction`` /
   ``folded_refinement``. A message that only states rules before any request (``rules_only``) gives its rules to
   the session's next request.
3. The evidence of a task: what the agent did in each span (answer + tool inputs), the spans the user objected to
   (``corrected_answers``), the span the user accepted (the last one, when nothing objected to it and it is not
   vacuous: ``accepted_answer``), ``final_answer`` (the first corrected answer, else the last), tools and tool
   errors, and the reaction by precedence correction > rejected > interrupted > aborted > reask > approval > none.
4. Judge: candidate checks from every rule (``rules.checks_for_rule``) and from the names each correction
   mentions (``validation.evidence_checks``), each **validated against the session** (``validation``): it must
   fail a corrected answer and pass the accepted one; the rest are stored in ``TaskRecord.rejected_checks`` with
   the reason. A task whose validated checks fail a vacuous reply is ``hard_evidence``; a task with no validated
   check is judged by a rubric built from the request, the reaction and its rules (soft evidence).
5. Replayability (``replayable.not_replayable_reason``): a plan hand-off, a custom command without its expansion,
   a request that points at repository objects (``#8215``, ``--pr 8528``), or a long tool-driven run is kept as
   evidence (``replayable = False`` with the reason) and never replayed. A custom command is replayed with its
   expansion (``Turn.command_body``) and its arguments. A command whose arguments are only ids (``/cmd 8454``,
   ``/cmd 8463``) is one task family, with a recurrence count.
6. Near-duplicate requests (token Jaccard >= ``DUPLICATE_SIMILARITY`` after light stemming, across sessions)
   merge into one task: ``recurrence`` = number merged, union of session ids, rules and validated checks,
   first/last seen, the evidence of the most telling occurrence.
7. ``max_tasks`` applies to replayable tasks: hard evidence first, then tasks with a correction or a rule, then by
   recurrence, then by a failure signal, then most recent, then id (deterministic). Tasks that are not replayable
   are all kept (they cost no call) with split ``train``.
8. The optional LLM miner runs on the kept replayable tasks the user objected to that have no validated check
   (``wants_miner``; one call each); its checks go through the same validation. Its failure never stops mining:
   the heuristic judge stays and the reason is stored in ``MineResult.miner_errors``. After a budget stop or a
   fatal backend error it is not called again this night.
9. Split (``assign_split``, replayable tasks only): a hash of the task id puts a task in val when h <
   val_fraction, in test when h < val_fraction + test_fraction, else in train, so a task keeps its split every
   night. Set-level rules: the test split is used only when there are >= ``MIN_TASKS_FOR_TEST`` (5) tasks
   (otherwise test tasks train); one task is always train; with >= 2 tasks and val_fraction > 0, val is never
   empty (the train task whose hash is closest to the val bucket moves there) and train is never empty (the
   test, else val, task whose hash is closest to the train bucket moves there).

The task id is ``task_id_for(the user's first message)`` (a command family: ``/name <id>``), without
refinements, so it stays stable when tomorrow's follow-ups differ.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from skillopt_sleep.checks import check_key
from skillopt_sleep.grammar.statements import checks_for_rule, rule_statements
from skillopt_sleep.mine.candidates import EPOCH, REACTION_ORDER, Candidate, candidates_of, head_line
from skillopt_sleep.mine.duplicates import group_duplicates
from skillopt_sleep.mine.lasting import decide_scopes
from skillopt_sleep.mine.llm_miner import run_miner
from skillopt_sleep.mine.replayable import not_replayable_reason
from skillopt_sleep.mine.result import MineResult
from skillopt_sleep.mine.rule_reader import RULE_READER_CALLS, Reader, read_foreign_rules
from skillopt_sleep.mine.split import assign_splits, check_fractions, task_id_for
from skillopt_sleep.mine.validation import Evidence, evidence_checks, hard_evidence, validate_checks
from skillopt_sleep.models import Check, Judge, Reaction, RuleStatement, Session, TaskEvidence, TaskRecord

_FAILURE_SIGNALS = frozenset({"rejected", "interrupted", "aborted", "reask"})


RUBRIC_REQUEST_CHARS = 300


RUBRIC_QUOTE_CHARS = 300




def _rank(reaction: Reaction) -> int:
    return REACTION_ORDER.index(reaction)


def _rubric(request: str, reaction: Reaction, reaction_text: str, final_answer: str,
            unchecked_rules: list[str]) -> str:
    """A rubric from the request and how the user reacted (so a task without checks is still judgeable)."""
    parts = [f'Score how well the response does what the user asked: "{head_line(request, RUBRIC_REQUEST_CHARS)}".']
    quote = head_line(reaction_text, RUBRIC_QUOTE_CHARS)
    if reaction == "correction":
        parts.append(f'The user corrected an earlier answer with: "{quote}"; a good response already satisfies '
                     "that correction." if quote else "The user corrected an earlier answer.")
    elif reaction == "reask":
        parts.append("The user had to ask again: an earlier answer missed the point; a good response answers "
                     "the request directly.")
    elif reaction in ("interrupted", "rejected", "aborted"):
        what = {"interrupted": "interrupted", "rejected": "rejected a tool use of", "aborted": "aborted"}[reaction]
        parts.append(f"The user {what} an earlier attempt" + (f' and said: "{quote}".' if quote else "."))
    elif reaction == "approval" and final_answer.strip():
        parts.append(f'The user accepted this earlier answer: "{head_line(final_answer, RUBRIC_QUOTE_CHARS)}".')
    if unchecked_rules:
        parts.append("It must follow the user's rules: " + "; ".join(unchecked_rules) + ".")
    return " ".join(parts)


def _candidate_checks(candidate: Candidate, evidence: Evidence) -> list[Check]:
    """Every check the candidate's own words suggest (still to be validated): the checks each stated rule implies,
    and the checks the names in each correction imply (``validation.evidence_checks``)."""
    checks: list[Check] = []
    stated = {rule for rule, _origin in candidate.rules}
    for rule, origin in candidate.rules:
        checks.extend(checks_for_rule(rule, origin=origin))
    for text in candidate.corrections:
        rules = [rule for rule in rule_statements(text) if rule in stated]
        for rule in rules:
            checks.extend(evidence_checks(rule, evidence, rule=rule))
        checks.extend(evidence_checks(text, evidence, rule=None))
    return checks


def _judge(candidate: Candidate) -> tuple[list[Check], list[str], Evidence]:
    """(validated checks, rejections with reasons, the evidence) of one candidate."""
    evidence = candidate.evidence()
    checks, rejected = validate_checks(_candidate_checks(candidate, evidence), evidence)
    return checks, rejected, evidence


def _build_task(group: list[Candidate], project: str | None) -> TaskRecord:
    """One TaskRecord from a group of near-duplicate candidates (the first one is the representative)."""
    representative = group[0]
    rules: list[tuple[str, str]] = []
    for candidate in group:
        for rule, origin in candidate.rules:
            if all(rule.casefold() != known.casefold() for known, _ in rules):
                rules.append((rule, origin))
    checks: list[Check] = []
    rejected: list[str] = []
    for candidate in group:
        if not candidate.rules and not candidate.corrections:
            continue  # no words of its own to derive a check from: nothing to validate
        kept, dropped = _judge(candidate)[:2]
        rejected.extend(reason for reason in dropped if reason not in rejected)
        checks.extend(check for check in kept if all(check_key(check) != check_key(known) for known in checks))
    # the most telling occurrence: the strongest reaction, then the latest
    telling = min(group, key=lambda item: (_rank(item.reaction()[0]), -(item.last_seen or EPOCH).timestamp()))
    reaction, reaction_text = telling.reaction()
    told = telling.evidence()
    evidence = TaskEvidence(final_answer=telling.final_answer(), tools=list(telling.tools),
                            tool_errors=list(telling.tool_errors), reaction=reaction, reaction_text=reaction_text,
                            corrected_answers=told.corrected, accepted_answer=told.accepted)
    request = representative.prompt()
    why_not = not_replayable_reason(representative.request, kind=representative.kind,
                                    command_body=representative.command_body,
                                    tool_calls=max(candidate.tool_calls for candidate in group),
                                    inspections=max(candidate.inspections for candidate in group))
    checked = {check.rule for check in checks}
    unchecked = [rule for rule, _ in rules if rule not in checked]
    rubric = _rubric(request, reaction, reaction_text, telling.final_answer(), unchecked) if not checks else None
    session_ids: list[str] = []
    for candidate in group:
        if candidate.session_id not in session_ids:
            session_ids.append(candidate.session_id)
    seen = [moment for candidate in group for moment in (candidate.seen_at, candidate.last_seen) if moment]
    return TaskRecord(
        id=task_id_for(representative.family()),
        source=representative.source,
        project=project,
        request=request,
        refinements=list(representative.refinements),
        replayable=why_not is None,
        not_replayable=why_not,
        session_ids=session_ids,
        recurrence=len(group),
        evidence=evidence,
        rules=[RuleStatement(text=rule, origin=origin) for rule, origin in rules],
        authored=list(dict.fromkeys(text for candidate in group for text in candidate.authored)),
        judge=Judge(checks=checks, rubric=rubric),
        first_seen=min(seen) if seen else None,
        last_seen=max(seen) if seen else None,
        rejected_checks=rejected,
        hard_evidence=why_not is None and hard_evidence(checks, told),
    )


def _value_key(task: TaskRecord) -> tuple:
    """Sort key: most valuable first (module docstring, step 6)."""
    strong = bool(task.rules) or task.evidence.reaction == "correction"
    failure = task.evidence.reaction in _FAILURE_SIGNALS
    recency = (task.last_seen or EPOCH).timestamp()
    return (not task.hard_evidence, not strong, -task.recurrence, not failure, -recency, task.id)


def _count(values: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def mine_tasks(sessions: list[Session], *, project: str | None, val_fraction: float, test_fraction: float,
               max_tasks: int = 40, miner: Callable[[TaskRecord], dict] | None = None,
               agent_answers: list[str] = (), rule_reader: Reader | None = None,
               reader_calls: int = RULE_READER_CALLS) -> MineResult:
    """Turn harvested sessions into TaskRecords with validated judges, rules and splits.

    At most ``max_tasks`` replayable tasks are kept; tasks that are not replayable are all kept (they cost no
    call: their rules and corrections are evidence) with split ``train``. project: stored on each task;
    val_fraction, test_fraction: floats in [0, 1) (see ``assign_split``; only replayable tasks are split);
    agent_answers: answers of sub-agent sessions the harvest read but did not keep (``HarvestResult.agent_answers``):
    a message that pastes one back is dropped as ``pasted_agent_text``, like one that pastes a session's answer.
    miner: optional ``task -> {intent, checks, rubric, outcome}`` (``llm_miner.make_llm_miner``), called once per
    kept task that ``wants_miner``. rule_reader: optional ``rule_reader.make_rule_reader``, at most ``reader_calls``
    calls: English for the sentences typed in other languages, read for rules before their scopes are decided. Raises
    ValueError for a fraction outside [0, 1) or max_tasks < 1; malformed input is dropped and counted, never raised.
    """
    check_fractions(val_fraction, test_fraction)
    if max_tasks < 1:
        raise ValueError(f"max_tasks must be >= 1, got {max_tasks}")
    result = MineResult()
    candidates = candidates_of(sessions, result.dropped, agent_answers)
    groups = group_duplicates(candidates)
    result.merged_duplicates = sum(len(group) - 1 for group in groups)
    tasks = [_build_task(group, project) for group in groups]
    if rule_reader is not None and reader_calls > 0:
        report = read_foreign_rules(tasks, rule_reader, calls=reader_calls)
        result.reader_calls, result.reader_rules, result.reader_errors = report.calls, report.rules, report.errors
    decide_scopes(tasks)
    replayable = sorted((task for task in tasks if task.replayable), key=_value_key)
    evidence_only = [task for task in tasks if not task.replayable]
    if len(replayable) > max_tasks:
        result.dropped["over_max_tasks"] = len(replayable) - max_tasks
        replayable = replayable[:max_tasks]
    rejected = sum(len(task.rejected_checks) for task in replayable + evidence_only)
    if miner is not None:
        rejected += run_miner(replayable, miner, result)
    result.rejected_checks = rejected
    assign_splits(replayable, val_fraction, test_fraction)
    for task in evidence_only:
        task.split = "train"
    kept = replayable + evidence_only
    kept.sort(key=lambda task: ((task.first_seen or EPOCH), task.id))
    result.tasks = kept
    result.not_replayable = _count([task.not_replayable for task in evidence_only if task.not_replayable])
    return result


def mine_for_config(harvested: Any, config: Any, *, project: str,
                    miner: Callable[[TaskRecord], dict] | None = None,
                    rule_reader: Reader | None = None) -> MineResult:
    """``mine_tasks`` on a harvest (``harvest.HarvestResult``: its sessions and sub-agent answers) with the splits,
    task cap and rule-reader calls of a ``SleepConfig`` (night and preview alike)."""
    return mine_tasks(harvested.sessions, project=project, val_fraction=config.val_fraction,
                      test_fraction=config.test_fraction, max_tasks=config.max_tasks_per_night, miner=miner,
                      agent_answers=harvested.agent_answers, rule_reader=rule_reader,
                      reader_calls=config.rule_reader_calls)
