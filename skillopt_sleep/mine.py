"""Mine harvested sessions into replayable ``TaskRecord``s with judges, rules, recurrence and a split.

Input: ``list[Session]`` from ``skillopt_sleep.harvest`` (texts already secret-redacted). Output: ``MineResult``.

How turns become tasks (one simple rule, applied per session in turn order):

1. Noise is dropped and counted in ``MineResult.dropped``: ``empty`` requests, ``control_command`` (built-in
   slash commands such as ``/clear``, ``/model``; they also end the thread, so nothing after them is read as a
   reaction), and ``acknowledgement`` (a message made only of words like "thanks", "ok", "yes", "continue").
   An acknowledgement is still read as the user's reaction to the task before it (approval), and the answer
   and tools of its turn continue that task (a "continue" after an interrupt finishes the same work).
2. Every other request opens a candidate task, unless it is a **follow-up** of the open task:
   * a *correction* or *re-ask* (``rules.classify_reaction``) is evidence FOR the open task: its reaction, its
     text (``evidence.reaction_text``) and its rules (origin ``correction``). Rule sentences are NOT appended
     to the task's request, so replay tests whether the skill/memory now carries the rule; the other
     sentences of a correction carry task facts ("I meant the staging server") and ARE appended as
     ``Follow-up: ...``. A re-ask is not appended (it repeats the request).
   * a *refinement* (a message that starts with "also", "and also", "plus", "additionally", "oh and",
     "one more thing") is appended to the request as ``Follow-up: ...``.
   Messages queued while the agent was busy (``Turn.queued_messages``) are follow-ups of their own turn.
   A follow-up is counted in ``dropped["folded_followup"]`` (it is not lost: it is part of the task).
3. The evidence of a task: ``final_answer`` is the answer the user's first correction / re-ask reacted to
   (or the last answer of the task when there was none); tools and tool errors of all its turns; reaction by
   precedence correction > rejected > interrupted > aborted > reask > approval > none (the structural ones
   come from ``Turn.rejected_tool`` / ``interrupted`` / ``aborted``; rejection feedback counts as a correction
   text and its rules are mined).
4. Judge: checks from every rule (``rules.checks_for_rule``), each validated (an invalid one is stored in
   ``TaskRecord.rejected_checks`` with its reason and counted, never scored). A rubric is added when there are
   no checks or when a rule yielded none, built from the request, the reaction and those rules.
5. Near-duplicate requests (token Jaccard >= ``DUPLICATE_SIMILARITY`` after light stemming, across sessions)
   merge into one task: ``recurrence`` = number merged, union of session ids and rules, first/last seen, the
   evidence of the most telling occurrence.
6. ``max_tasks``: tasks with a correction or a rule first, then by recurrence, then by a failure signal
   (rejected, interrupted, aborted, re-ask), then most recent, then id (deterministic).
7. The optional LLM miner runs only on the kept tasks (one call each) and its ``{intent, checks, rubric,
   outcome}`` is merged (see ``_apply_miner``). Its failure never stops mining: the heuristic judge stays and
   the reason is stored in ``MineResult.miner_errors``. After a budget stop or a fatal backend error it is not
   called again this night.
8. Split (``assign_split``): a hash of the task id puts a task in val when h < val_fraction, in test when
   h < val_fraction + test_fraction, else in train, so a task keeps its split every night. Set-level rules:
   the test split is used only when there are >= ``MIN_TASKS_FOR_TEST`` (5) tasks (otherwise test tasks train);
   one task is always train; with >= 2 tasks and val_fraction > 0, val is never empty (the train task whose
   hash is closest to the val bucket moves there) and train is never empty (the test, else val, task whose
   hash is closest to the train bucket moves there).

The task id is ``task_id_for(original request)``: the first message only, without follow-ups, so it stays
stable when tomorrow's follow-ups differ.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from skillopt_sleep.errors import BackendError, BudgetExhausted
from skillopt_sleep.harvest.claude_code import CONTROL_COMMANDS
from skillopt_sleep.models import Check, Judge, Reaction, Session, Split, TaskEvidence, TaskRecord, Turn
from skillopt_sleep.rules import (
    CHECK_OPS,
    INT_OPS,
    MINER_OUTCOMES,
    checks_for_rule,
    classify_reaction,
    extract_rules,
    jaccard,
    split_clauses,
    strip_frame,
    validate_check,
)

#: Token Jaccard (after light stemming) from which two requests are the same task.
DUPLICATE_SIMILARITY = 0.7
#: Fewest tasks for which a test split is used at all.
MIN_TASKS_FOR_TEST = 5
#: Most checks taken from one miner reply.
MAX_MINER_CHECKS = 6
#: Caps on evidence texts (characters) and list lengths.
REACTION_TEXT_CHARS = 1000
TOOL_ERROR_CHARS = 200
MAX_TOOL_ERRORS = 10
RUBRIC_REQUEST_CHARS = 300
RUBRIC_QUOTE_CHARS = 300

_ACK_WORDS = frozenset(
    """ok okay k kk yes yep yeah yup y sure thanks thank you thx ty great perfect nice cool awesome lgtm continue
    go on ahead proceed do it sounds looks good fine alright right keep going carry done excellent amazing got
    that works now so much very cheers please pls let's lets"""
    .split()
)
_CONTINUE = re.compile(r"^\W*(?:continue|go on|go ahead|proceed|keep going|carry on|do it|yes|yep|yeah|sure|"
                       r"please do|please continue|resume)\b", re.IGNORECASE)
_REFINEMENT = re.compile(r"^(?:also|and also|oh and|plus|additionally|one more thing|btw,? also)\b", re.IGNORECASE)
_CUE_WORDS = frozenset(
    """no nope nah wrong that that's s not what i asked said wanted meant told you it it's this is isn't still
    doesn't does didn't did work works working broken try again please stop why the a an instead actually hmm
    ugh revert undo that undo do don't was were""".split()
)
_REACTION_ORDER: tuple[Reaction, ...] = ("correction", "rejected", "interrupted", "aborted", "reask", "approval",
                                         "none")
_FAILURE_SIGNALS = frozenset({"rejected", "interrupted", "aborted", "reask"})
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


class MineResult(BaseModel):
    """What mining produced.

    tasks: kept tasks (at most ``max_tasks``), ordered by first_seen then id; rejected_checks: number of checks
    dropped at mining time (their reasons are in each task's ``rejected_checks``); merged_duplicates: requests
    merged into an earlier near-duplicate; dropped: reason -> count (``empty``, ``acknowledgement``,
    ``control_command``, ``folded_followup``, ``over_max_tasks``); miner_calls: LLM miner calls made;
    miner_errors: task id -> why the miner's reply was not used; miner_outcomes: task id -> the miner's
    verdict on the original attempt (success|partial|failure|unknown).
    """

    model_config = ConfigDict(extra="forbid")
    tasks: list[TaskRecord] = Field(default_factory=list)
    rejected_checks: int = 0
    merged_duplicates: int = 0
    dropped: dict[str, int] = Field(default_factory=dict)
    miner_calls: int = 0
    miner_errors: dict[str, str] = Field(default_factory=dict)
    miner_outcomes: dict[str, str] = Field(default_factory=dict)


# --------------------------------------------------------------------------- ids and splits


def normalize_request(request: str) -> str:
    """NFKC, lower-case, whitespace collapsed, surrounding punctuation stripped."""
    text = unicodedata.normalize("NFKC", request or "").casefold()
    return " ".join(text.split()).strip(" \t.,;:!?")


def task_id_for(request: str) -> str:
    """Return ``"t-"`` + the first 12 hex digits of sha256(normalized request)."""
    return "t-" + hashlib.sha256(normalize_request(request).encode("utf-8")).hexdigest()[:12]


def _unit_hash(task_id: str) -> float:
    """A number in [0, 1) from the task id (stable across nights and machines)."""
    return int(hashlib.sha256(task_id.encode("utf-8")).hexdigest()[:12], 16) / float(16**12)


def _check_fractions(val_fraction: float, test_fraction: float) -> None:
    for name, value in (("val_fraction", val_fraction), ("test_fraction", test_fraction)):
        if not 0.0 <= value < 1.0:
            raise ValueError(f"{name} must be in [0, 1), got {value}")


def assign_split(task_id: str, val_fraction: float, test_fraction: float) -> Split:
    """Return the split of one task from a hash of its id: val if h < val_fraction, test if
    h < val_fraction + test_fraction, else train (h in [0, 1)). Raises ValueError for a fraction outside [0, 1).

    This is the per-task rule; ``mine_tasks`` adds the set-level rules (module docstring, step 8).
    """
    _check_fractions(val_fraction, test_fraction)
    value = _unit_hash(task_id)
    if value < val_fraction:
        return "val"
    if value < val_fraction + test_fraction:
        return "test"
    return "train"


def _distance_to_val(task_id: str, val_fraction: float) -> float:
    """Circular distance of a task's hash to the val bucket [0, val_fraction)."""
    value = _unit_hash(task_id)
    if value < val_fraction:
        return 0.0
    return min(value - val_fraction, 1.0 - value)


def _assign_splits(tasks: list[TaskRecord], val_fraction: float, test_fraction: float) -> None:
    """Set ``split`` on every task (see the module docstring, step 8)."""
    for task in tasks:
        task.split = assign_split(task.id, val_fraction, test_fraction)
    count = len(tasks)
    if count < 2:
        for task in tasks:
            task.split = "train"
        return
    if count < MIN_TASKS_FOR_TEST:
        for task in tasks:
            if task.split == "test":
                task.split = "train"

    def of(split: str) -> list[TaskRecord]:
        return [task for task in tasks if task.split == split]

    if val_fraction > 0 and not of("val"):
        pool = of("train") or of("test")
        chosen = min(pool, key=lambda task: (_distance_to_val(task.id, val_fraction), task.id))
        chosen.split = "val"
    if not of("train"):
        pool = of("test") or (of("val") if len(of("val")) >= 2 else [])
        if pool:
            chosen = max(pool, key=lambda task: (_unit_hash(task.id), task.id))
            chosen.split = "train"


# --------------------------------------------------------------------------- noise


def _command_name(request: str) -> str | None:
    match = re.match(r"^/([A-Za-z][\w:-]*)", request.strip())
    return match.group(1).lower() if match else None


def _is_acknowledgement(text: str) -> bool:
    words = re.findall(r"[a-z']+", text.casefold())
    if not words:  # only emoji / punctuation ("👍", "!!")
        return not re.search(r"\w", text)
    return len(words) <= 5 and all(word.strip("'") in _ACK_WORDS for word in words)


def noise_reason(turn: Turn) -> str | None:
    """Return why a turn is not a task (``empty``, ``control_command``, ``acknowledgement``), or None."""
    text = (turn.request or "").strip()
    if not text:
        return "empty"
    name = _command_name(text)
    if name is not None and name in CONTROL_COMMANDS:
        return "control_command"
    if _is_acknowledgement(text):
        return "acknowledgement"
    return None


# --------------------------------------------------------------------------- candidates


def _aware(moment: datetime | None) -> datetime | None:
    if moment is None:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def _head(text: str, limit: int) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _correction_details(text: str) -> str:
    """The sentences of a correction that carry task facts: not rules, not bare reaction words."""
    kept: list[str] = []
    for clause in split_clauses(text):
        stripped = strip_frame(clause)
        if not stripped or extract_rules(clause):
            continue
        words = {word.strip("'") for word in re.findall(r"[a-z0-9_']+", stripped.casefold())}
        if words - _CUE_WORDS:
            kept.append(stripped)
    return " ".join(kept)


@dataclass
class _Candidate:
    """A request being assembled from its turn and follow-ups (internal)."""

    source: str
    session_id: str
    request: str
    seen_at: datetime | None
    followups: list[str] = field(default_factory=list)
    rules: list[tuple[str, str]] = field(default_factory=list)  # (rule, origin)
    final_answer: str = ""
    answer_frozen: bool = False
    tools: list[str] = field(default_factory=list)
    tool_errors: list[str] = field(default_factory=list)
    reactions: list[tuple[Reaction, str]] = field(default_factory=list)  # (reaction, text)
    last_seen: datetime | None = None
    stopped: bool = False  # the latest turn of this task was interrupted / rejected / aborted

    # -- building
    def add_rules(self, text: str, origin: str) -> None:
        for rule in extract_rules(text):
            self.rules.append((rule, origin))

    def react(self, reaction: Reaction, text: str) -> None:
        if reaction != "none":
            self.reactions.append((reaction, text))

    def absorb(self, turn: Turn, session: Session, *, take_answer: bool = True) -> None:
        """Take a turn's answer, tools, structural signals and queued messages into this task."""
        if take_answer and turn.final_answer.strip() and not self.answer_frozen:
            self.final_answer = turn.final_answer
        for tool in turn.tools:
            if tool.name not in self.tools:
                self.tools.append(tool.name)
            if tool.error and len(self.tool_errors) < MAX_TOOL_ERRORS:
                self.tool_errors.append(f"{tool.name}: {_head(tool.error, TOOL_ERROR_CHARS)}")
        self.stopped = False
        if turn.rejected_tool:
            feedback = (turn.rejection_feedback or "").strip()
            self.react("rejected", feedback)
            if feedback:
                self.add_rules(feedback, "correction")
            self.stopped = True
        if turn.interrupted:
            self.react("interrupted", "")
            self.stopped = True
        if turn.aborted:
            self.react("aborted", "")
            self.stopped = True
        for message in turn.queued_messages:
            self.follow_up(message.strip(), queued=True)
        moment = _aware(turn.timestamp) or _aware(session.started_at)
        if moment is not None:
            self.last_seen = moment if self.last_seen is None else max(self.last_seen, moment)

    def follow_up(self, text: str, *, queued: bool = False) -> bool:
        """Fold a follow-up message into this task; return False when it is not one (a new request)."""
        if not text or _is_acknowledgement(text):
            if text:
                self.react(classify_reaction(text, self.request), text)
            return bool(text)
        reaction = classify_reaction(text, self.request)
        if reaction in ("correction", "reask"):
            self.react(reaction, text)
            self.add_rules(text, "correction")
            if not queued:
                self.answer_frozen = True
            if reaction == "correction":
                details = _correction_details(text)
                if details:
                    self.followups.append(details)
            return True
        if queued or _REFINEMENT.match(text):
            self.followups.append(text)
            self.add_rules(text, "house_rule")
            return True
        return False

    # -- reading
    def reaction(self) -> tuple[Reaction, str]:
        for wanted in _REACTION_ORDER[:-1]:
            texts = [text for reaction, text in self.reactions if reaction == wanted and text]
            if any(reaction == wanted for reaction, _ in self.reactions):
                return wanted, _head_block("\n".join(texts), REACTION_TEXT_CHARS)
        return "none", ""

    def full_request(self) -> str:
        parts = [self.request.strip()] + [f"Follow-up: {text}" for text in self.followups]
        return "\n\n".join(parts)


def _head_block(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _session_key(session: Session) -> tuple[datetime, str]:
    return (_aware(session.started_at) or _EPOCH, session.session_id)


def _candidates(sessions: list[Session], dropped: dict[str, int]) -> list[_Candidate]:
    """Turn every session's turns into candidate tasks (module docstring, steps 1-3)."""

    def drop(reason: str) -> None:
        dropped[reason] = dropped.get(reason, 0) + 1

    found: list[_Candidate] = []
    for session in sorted(sessions, key=_session_key):
        current: _Candidate | None = None
        for turn in sorted(session.turns, key=lambda item: item.index):
            reason = noise_reason(turn)
            text = (turn.request or "").strip()
            if reason in ("empty", "control_command"):
                drop(reason)
                if reason == "control_command":
                    current = None
                continue
            if reason == "acknowledgement":
                drop(reason)
                if current is not None:
                    current.follow_up(text)
                    # "continue" / "yes, go ahead" (or anything after an interrupt) carry on the work;
                    # "thanks" / "ok" after a finished answer only close it
                    carries_on = bool(_CONTINUE.match(text)) or current.stopped or not current.final_answer.strip()
                    current.absorb(turn, session, take_answer=carries_on)
                continue
            if current is not None:
                was_stopped = current.stopped
                if current.follow_up(text):
                    drop("folded_followup")
                    current.absorb(turn, session)
                    continue
                reaction = classify_reaction(text, current.request)
                if reaction == "approval":
                    current.react("approval", text)
                elif was_stopped:  # the message right after an interrupt/rejection says what went wrong
                    kind = next(r for r, _ in reversed(current.reactions) if r in ("rejected", "interrupted",
                                                                                   "aborted"))
                    current.react(kind, text)
            current = _Candidate(source=session.source, session_id=session.session_id, request=text,
                                 seen_at=_aware(turn.timestamp) or _aware(session.started_at))
            if turn.kind != "plan":  # a plan's text is the agent's words, not the user's rules
                current.add_rules(text, "house_rule")
            current.absorb(turn, session)
            found.append(current)
    return found


# --------------------------------------------------------------------------- tasks


def _stem_tokens(text: str) -> set[str]:
    words = re.findall(r"[a-z0-9_]+", normalize_request(text))
    return {word[:-1] if len(word) > 3 and word.endswith("s") else word for word in words}


def _group_duplicates(candidates: list[_Candidate]) -> list[list[_Candidate]]:
    """Cluster near-duplicate requests (greedy, earliest first); each group's first item is its representative."""
    ordered = sorted(candidates, key=lambda item: (item.seen_at or _EPOCH,))
    groups: list[list[_Candidate]] = []
    keys: list[tuple[str, set[str]]] = []
    for candidate in ordered:
        normalized = normalize_request(candidate.request)
        candidate_tokens = _stem_tokens(candidate.request)
        for index, (group_text, group_tokens) in enumerate(keys):
            if normalized == group_text:
                groups[index].append(candidate)
                break
            small, large = sorted((len(candidate_tokens), len(group_tokens)))
            if large and small / large < DUPLICATE_SIMILARITY:
                continue
            if jaccard(candidate_tokens, group_tokens) >= DUPLICATE_SIMILARITY:
                groups[index].append(candidate)
                break
        else:
            groups.append([candidate])
            keys.append((normalized, candidate_tokens))
    return groups


def _rank(reaction: Reaction) -> int:
    return _REACTION_ORDER.index(reaction)


def _rubric(request: str, reaction: Reaction, reaction_text: str, final_answer: str,
            unchecked_rules: list[str]) -> str:
    """A rubric from the request and how the user reacted (so a task without checks is still judgeable)."""
    parts = [f'Score how well the response does what the user asked: "{_head(request, RUBRIC_REQUEST_CHARS)}".']
    quote = _head(reaction_text, RUBRIC_QUOTE_CHARS)
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
        parts.append(f'The user accepted this earlier answer: "{_head(final_answer, RUBRIC_QUOTE_CHARS)}".')
    if unchecked_rules:
        parts.append("It must follow the user's rules: " + "; ".join(unchecked_rules) + ".")
    return " ".join(parts)


def _build_task(group: list[_Candidate], project: str | None) -> TaskRecord:
    """One TaskRecord from a group of near-duplicate candidates (the first one is the representative)."""
    representative = group[0]
    rules: list[tuple[str, str]] = []
    for candidate in group:
        for rule, origin in candidate.rules:
            if all(rule.casefold() != known.casefold() for known, _ in rules):
                rules.append((rule, origin))
    checks: list[Check] = []
    rejected: list[str] = []
    unchecked: list[str] = []
    for rule, origin in rules:
        derived = checks_for_rule(rule, origin=origin)
        if not derived:
            unchecked.append(rule)
        for check in derived:
            reason = validate_check(check)
            if reason:
                rejected.append(f"{origin} {check.op}={check.value!r}: {reason}")
            elif all((known.op, known.value) != (check.op, check.value) for known in checks):
                checks.append(check)
    # the most telling occurrence: the strongest reaction, then the latest
    telling = min(group, key=lambda item: (_rank(item.reaction()[0]), -(item.last_seen or _EPOCH).timestamp()))
    reaction, reaction_text = telling.reaction()
    evidence = TaskEvidence(final_answer=telling.final_answer, tools=list(telling.tools),
                            tool_errors=list(telling.tool_errors), reaction=reaction, reaction_text=reaction_text)
    request = representative.full_request()
    rubric = _rubric(request, reaction, reaction_text, telling.final_answer, unchecked) \
        if (not checks or unchecked) else None
    session_ids: list[str] = []
    for candidate in group:
        if candidate.session_id not in session_ids:
            session_ids.append(candidate.session_id)
    seen = [moment for candidate in group for moment in (candidate.seen_at, candidate.last_seen) if moment]
    return TaskRecord(
        id=task_id_for(representative.request),
        source=representative.source,
        project=project,
        request=request,
        session_ids=session_ids,
        recurrence=len(group),
        evidence=evidence,
        rules=[rule for rule, _ in rules],
        judge=Judge(checks=checks, rubric=rubric),
        first_seen=min(seen) if seen else None,
        last_seen=max(seen) if seen else None,
        rejected_checks=rejected,
    )


def _value_key(task: TaskRecord) -> tuple:
    """Sort key: most valuable first (module docstring, step 6)."""
    strong = bool(task.rules) or task.evidence.reaction == "correction"
    failure = task.evidence.reaction in _FAILURE_SIGNALS
    recency = (task.last_seen or _EPOCH).timestamp()
    return (not strong, -task.recurrence, not failure, -recency, task.id)


# --------------------------------------------------------------------------- the LLM miner


def _apply_miner(task: TaskRecord, reply: Any) -> tuple[int, str | None]:
    """Merge one miner reply into ``task``; return (checks rejected, outcome or None).

    Raises ValueError when the reply is not a JSON object. Invalid checks (unknown op, wrong value type, bad
    regex, empty value, not an object) are stored in ``task.rejected_checks`` with the reason.
    """
    if not isinstance(reply, dict):
        raise ValueError(f"miner reply is not an object: {type(reply).__name__}")
    rejected = 0
    intent = reply.get("intent")
    if isinstance(intent, str) and intent.strip():
        task.intent = _head(intent, 200)
    raw_checks = reply.get("checks") or []
    if not isinstance(raw_checks, list):
        task.rejected_checks.append(f"llm_miner checks: not a list ({type(raw_checks).__name__})")
        raw_checks, rejected = [], 1
    for position, item in enumerate(raw_checks):
        if position >= MAX_MINER_CHECKS:
            task.rejected_checks.append(f"llm_miner: more than {MAX_MINER_CHECKS} checks, the rest ignored")
            rejected += len(raw_checks) - MAX_MINER_CHECKS
            break
        reason, check = _miner_check(item)
        if reason:
            label = f"{item.get('op')}={item.get('value')!r}" if isinstance(item, dict) else repr(item)[:60]
            task.rejected_checks.append(f"llm_miner {label}: {reason}")
            rejected += 1
        elif all((known.op, known.value) != (check.op, check.value) for known in task.judge.checks):
            task.judge.checks.append(check)
    rubric = reply.get("rubric")
    if isinstance(rubric, str) and rubric.strip():
        rubric = _head_block(rubric, 1000)
        checked = {check.rule for check in task.judge.checks}
        unchecked = [rule for rule in task.rules if rule not in checked and rule.casefold() not in rubric.casefold()]
        if unchecked:  # the heuristic rubric carried these rules; keep them judged
            rubric += " It must follow the user's rules: " + "; ".join(unchecked) + "."
        task.judge.rubric = rubric
    outcome = reply.get("outcome")
    return rejected, outcome if outcome in MINER_OUTCOMES else None


def _miner_check(item: Any) -> tuple[str | None, Check | None]:
    if not isinstance(item, dict):
        return "not an object", None
    op, value = item.get("op"), item.get("value")
    if op not in CHECK_OPS:
        return f"unknown op {op!r}", None
    if op in INT_OPS and isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if op == "json_valid" and value == "":
        value = None
    try:
        check = Check(op=op, value=value, origin="llm_miner")
    except ValidationError:
        return f"wrong value type {type(value).__name__}", None
    reason = validate_check(check)
    return (reason, None) if reason else (None, check)


def _run_miner(tasks: list[TaskRecord], miner: Callable[[TaskRecord], dict], result: MineResult) -> int:
    """Call the miner once per task; return the number of checks it proposed that were rejected."""
    rejected = 0
    stopped_because: str | None = None
    for task in tasks:
        if stopped_because:
            result.miner_errors[task.id] = f"miner not called: {stopped_because}"
            continue
        snapshot = task.model_copy(deep=True)
        result.miner_calls += 1
        try:
            count, outcome = _apply_miner(task, miner(task))
        except Exception as exc:  # a failed call, a bad reply or a miner bug keeps the heuristic judge
            for name in ("intent", "judge", "rejected_checks"):
                setattr(task, name, getattr(snapshot, name))
            if isinstance(exc, BudgetExhausted):
                stopped_because = f"budget exhausted ({exc})"
                result.miner_errors[task.id] = stopped_because
            elif isinstance(exc, BackendError):
                result.miner_errors[task.id] = f"backend error: {exc}"
                if exc.fatal:
                    stopped_because = f"fatal backend error ({exc})"
            else:
                result.miner_errors[task.id] = f"{type(exc).__name__}: {exc}"
            continue
        rejected += count
        if outcome:
            result.miner_outcomes[task.id] = outcome
    return rejected


# --------------------------------------------------------------------------- entry point


def mine_tasks(sessions: list[Session], *, project: str | None, val_fraction: float, test_fraction: float,
               max_tasks: int = 40, miner: Callable[[TaskRecord], dict] | None = None) -> MineResult:
    """Turn harvested sessions into at most ``max_tasks`` TaskRecords with judges, rules and splits.

    project: stored on each task; val_fraction, test_fraction: floats in [0, 1) (see ``assign_split``);
    miner: optional ``task -> {intent, checks, rubric, outcome}`` (``rules.make_llm_miner``), called once per
    kept task. Raises ValueError for a fraction outside [0, 1) or max_tasks < 1; malformed input is dropped
    and counted, never raised.
    """
    _check_fractions(val_fraction, test_fraction)
    if max_tasks < 1:
        raise ValueError(f"max_tasks must be >= 1, got {max_tasks}")
    result = MineResult()
    candidates = _candidates(sessions, result.dropped)
    groups = _group_duplicates(candidates)
    result.merged_duplicates = sum(len(group) - 1 for group in groups)
    tasks = [_build_task(group, project) for group in groups]
    tasks.sort(key=_value_key)
    if len(tasks) > max_tasks:
        result.dropped["over_max_tasks"] = len(tasks) - max_tasks
        tasks = tasks[:max_tasks]
    rejected = sum(len(task.rejected_checks) for task in tasks)
    if miner is not None:
        rejected += _run_miner(tasks, miner, result)
    result.rejected_checks = rejected
    _assign_splits(tasks, val_fraction, test_fraction)
    tasks.sort(key=lambda task: ((task.first_seen or _EPOCH), task.id))
    result.tasks = tasks
    return result
