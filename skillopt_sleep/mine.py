"""Mine harvested sessions into ``TaskRecord``s: requests to replay, labelled by the user's own reactions.

Input: ``list[Session]`` from ``skillopt_sleep.harvest`` (texts already secret-redacted). Output: ``MineResult``.

How turns become tasks (applied per session in turn order):

1. Noise is dropped and counted in ``MineResult.dropped``: ``empty`` requests, ``control_command`` (built-in
   slash commands such as ``/clear``, ``/model``), ``pasted_terminal`` / ``pasted_page`` (a pasted screen or page
   as the whole message: ``replayable.pasted_reason``), ``pasted_agent_text`` (an agent's answer pasted back, e.g. a
   sub-agent's report relayed to its parent: ``replayable.AgentTexts``) - these four also end the thread, so nothing
   after them is read as a reaction - and ``acknowledgement`` (only words like "thanks", "ok", "continue", "retry"). An
   acknowledgement is still the user's reaction to the task before it (approval), and the answer and tools of
   its turn continue that task (a "continue" after an interrupt finishes the same work). Injected text
   (notifications, reminders, hook and command output, compaction summaries) never reaches mining: the
   harvesters drop it.
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

import hashlib
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from itertools import islice
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from skillopt_sleep.control_commands import CONTROL_COMMANDS
from skillopt_sleep.engine.judges import check_passes
from skillopt_sleep.errors import BackendError, BudgetExhausted
from skillopt_sleep.models import Check, Judge, Reaction, Session, Split, TaskEvidence, TaskRecord, Turn
from skillopt_sleep.provenance import authored_text
from skillopt_sleep.replayable import (
    INSPECTION_CALLS,
    AgentTexts,
    inspects,
    needs_repo_state,
    not_replayable_reason,
    pasted_reason,
)
from skillopt_sleep.rules import (
    CHECK_OPS,
    INT_OPS,
    MINER_OUTCOMES,
    checks_for_rule,
    classify_reaction,
    extract_rules,
    jaccard,
    split_clauses,
    states_only_rules,
    strip_frame,
    validate_check,
)
from skillopt_sleep.validation import (
    Evidence,
    behaviour,
    check_key,
    evidence_checks,
    hard_evidence,
    is_vacuous,
    validate_checks,
    wants_artefact,
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
#: Characters kept of what the agent did in one span (answer and tool inputs), and spans kept per task.
BEHAVIOUR_CHARS = 1500
MAX_CORRECTED_ANSWERS = 3
#: Tool inputs kept per span for the evidence.
MAX_ACTIONS = 8
#: A message right after the user stopped the agent, of at most this many words, says what went wrong.
STEER_MAX_WORDS = 25
#: An approval of at most this many words is a reaction; a longer message may carry a new request.
APPROVAL_MAX_WORDS = 12
#: A request to redo the answer ("rewrite it with httpx") of at most this many words is a correction.
REDO_MAX_WORDS = 20
#: A first clause of at most this many words without a verb ("uv.", "httpx pls") is a terse correction.
TERSE_MAX_WORDS = 3
#: Verbs a short request starts with ("fix lint", "run tests"): such a message is a request, not a terse correction.
_REQUEST_VERBS = frozenset(
    """add fix run write make create update remove delete explain show list build install test refactor rename
    implement check review deploy commit push pull merge format generate convert move find read open set use
    describe summarize summarise translate draft give tell help try redo undo revert continue stop start restart
    clean lint debug profile document bump release publish ship sort count compute calculate plot print save load
    parse split join compare optimize optimise improve simplify rewrite edit change do go""".split()
)

_ACK_WORDS = frozenset(
    """ok okay k kk yes yep yeah yup y sure thanks thank you thx ty great perfect nice cool awesome lgtm continue
    go on ahead proceed do it sounds looks good fine alright right keep going carry done excellent amazing got
    that works now so much very cheers please pls let's lets retry try again"""
    .split()
)
_CONTINUE = re.compile(r"^\W*(?:continue|go on|go ahead|proceed|keep going|carry on|do it|yes|yep|yeah|sure|"
                       r"please do|please continue|resume|retry|try again)\b", re.IGNORECASE)
_REFINEMENT = re.compile(r"^(?:also|and also|oh and|plus|additionally|one more thing|btw,? also)\b", re.IGNORECASE)
_REDO = re.compile(
    r"^(?:(?:ok|okay|now|then|hmm|please|pls|can you|could you|would you|just|no|nope)[,.!\s]+)*"
    r"(?:rewrite|redo|re-do|change|convert|make|turn|update|fix|switch|rename|use|try|do|write|put|move|format|"
    r"translate|shorten|simplify|implement|finish|close|restart|rerun|re-run|undo|revert|split|merge|drop|remove)"
    r"\b(?:\W+\w+){0,6}?\W+(?:it|that|this|them|those|these)\b",
    re.IGNORECASE,
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
    not_replayable: dict[str, int] = Field(default_factory=dict)


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
    """Return why a turn is not a request (``empty``, ``control_command``, ``acknowledgement``,
    ``pasted_terminal``, ``pasted_page``), or None."""
    text = (turn.request or "").strip()
    if not text:
        return "empty"
    name = _command_name(text)
    if name is not None and name in CONTROL_COMMANDS:
        return "control_command"
    if _is_acknowledgement(text):
        return "acknowledgement"
    return pasted_reason(text)


# --------------------------------------------------------------------------- reactions


def _aware(moment: datetime | None) -> datetime | None:
    if moment is None:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def _head(text: str, limit: int) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _head_block(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _contradicts(text: str, answer: str) -> bool:
    """The message states a rule whose checks (from its words, or from the names it mentions) fail ``answer``: the
    user is correcting what the agent just did, however they phrased it ("we're a pnpm shop" after ``npm
    install``)."""
    if not answer.strip():
        return False
    evidence = Evidence(corrected=[answer])
    for rule in extract_rules(text):
        candidates = checks_for_rule(rule, origin="correction") + evidence_checks(rule, evidence, rule=rule)
        if any(check_passes(check, answer, None) is False for check in candidates):
            return True
    return False


_LEAD = re.compile(r"^(?:(?:now|then|next|and|ok|okay|so|also|great|thanks|thank you)[,.!:\s]+)+", re.IGNORECASE)


def _terse(text: str) -> bool:
    """The message opens with a bare name or two ("uv.", "httpx pls", "black. not autopep8"): no verb, no question,
    nothing to do on its own; after an answer it says what the answer should have used."""
    clauses = split_clauses(text)
    if not clauses:
        return False
    first = _LEAD.sub("", strip_frame(clauses[0]))
    words = first.split()
    return (1 <= len(words) <= TERSE_MAX_WORDS and not clauses[0].rstrip().endswith("?")
            and words[0].casefold().strip(",.") not in _REQUEST_VERBS and not _is_acknowledgement(first))


def _asks_for_more(text: str) -> bool:
    """A clause of the message that is not a rule starts with a request verb ("now add axios"): it asks for new work."""
    for clause in split_clauses(text):
        if extract_rules(clause):
            continue
        words = _LEAD.sub("", strip_frame(clause)).split()
        if words and words[0].casefold().strip(",.") in _REQUEST_VERBS - {"use", "try", "do", "go", "continue"}:
            return True
    return False


def reaction_to(text: str, *, request: str, answer: str, stopped: bool) -> Reaction | None:
    """How a message reacts to the task before it, or None when it is not a reaction (a new request, or a
    refinement). request: that task's request; answer: what the agent did last (``validation.behaviour``);
    stopped: the last turn was interrupted, rejected or aborted.

    ``correction``: ``rules.classify_reaction`` says so (no / wrong / I said / a contrastive rule / a pasted error /
    a short rule-only reply ...); or the message came right after the user stopped the agent and is short (it says
    what went wrong); or it asks to redo the answer ("rewrite it with httpx", "make that shorter"); or it states a
    rule that the answer breaks (unless another of its clauses asks for new work: "now add axios; we use pnpm here"
    is a new request). ``reask`` / ``approval``: ``classify_reaction`` (a short approval only; "thanks, now add a
    test" is a new request). A message that only states rules is a reaction too (``none``: a label).
    """
    if _REFINEMENT.match(text):
        return None
    words = len(text.split())
    reaction = classify_reaction(text, request)
    if reaction in ("correction", "reask"):
        return reaction
    if stopped and words <= STEER_MAX_WORDS:
        return "correction"
    if words <= REDO_MAX_WORDS and _REDO.match(text):
        return "correction"
    if _asks_for_more(text):
        return None  # "thanks, now add a test", "now add axios; we use pnpm here": new work
    if reaction == "approval" and words <= APPROVAL_MAX_WORDS:
        return "approval"
    if _terse(text):
        return "correction"
    if _contradicts(text, answer):
        return "correction"
    if states_only_rules(text):
        return "none"
    return None


# --------------------------------------------------------------------------- candidates


@dataclass
class _Span:
    """What the agent did for one turn of a task: its answer and tool inputs (``validation.behaviour``)."""

    answer: str
    actions: list[str]

    @property
    def behaviour(self) -> str:
        return _head_block(behaviour(self.answer, self.actions), BEHAVIOUR_CHARS)


@dataclass
class _Candidate:
    """A request being assembled from its turn, its refinements and the user's reactions (internal)."""

    source: str
    session_id: str
    request: str
    kind: str
    seen_at: datetime | None
    command_body: str | None = None
    refinements: list[str] = field(default_factory=list)
    rules: list[tuple[str, str]] = field(default_factory=list)  # (rule, origin)
    corrections: list[str] = field(default_factory=list)  # correction texts (labels), for evidence checks
    spans: list[_Span] = field(default_factory=list)
    objected: set[int] = field(default_factory=set)  # span indexes the user corrected, re-asked, stopped
    tools: list[str] = field(default_factory=list)
    tool_errors: list[str] = field(default_factory=list)
    tool_calls: int = 0
    inspections: int = 0  # tool calls that read the repository (``replayable.inspects``), up to INSPECTION_CALLS
    reactions: list[tuple[Reaction, str]] = field(default_factory=list)  # (reaction, text)
    authored: list[str] = field(default_factory=list)  # what the user typed (``provenance.authored_text``)
    last_seen: datetime | None = None
    stopped: bool = False  # the latest turn of this task was interrupted / rejected / aborted

    # -- building
    def typed(self, text: str) -> None:
        """Keep a message the user typed for this task as provenance (``TaskRecord.authored``)."""
        kept = authored_text(text)
        if kept and kept not in self.authored:
            self.authored.append(kept)

    def add_rules(self, text: str, origin: str) -> None:
        for rule in extract_rules(text):
            self.rules.append((rule, origin))

    def react(self, reaction: Reaction, text: str) -> None:
        self.typed(text)
        if reaction != "none":
            self.reactions.append((reaction, text))

    def last_behaviour(self) -> str:
        return self.spans[-1].behaviour if self.spans else ""

    def object(self, reaction: Reaction, text: str) -> None:
        """The user objected to the last span (correction, re-ask, rejection, interrupt)."""
        if self.spans:
            self.objected.add(len(self.spans) - 1)
        self.react(reaction, text)
        if text and reaction in ("correction", "rejected", "interrupted", "aborted"):
            self.corrections.append(text)
            self.add_rules(text, "correction")

    def absorb(self, turn: Turn, session: Session, *, take_answer: bool = True) -> None:
        """Take a turn's answer (a new span), tools, structural signals and queued messages into this task."""
        actions = list(islice((f"[{tool.name}] {tool.input_head}".strip() for tool in turn.tools
                               if tool.input_head.strip()), MAX_ACTIONS))
        if take_answer and (turn.final_answer.strip() or actions):
            self.spans.append(_Span(turn.final_answer, actions))
        self.tool_calls += turn.tool_calls or len(turn.tools)
        for tool in turn.tools:
            if self.inspections < INSPECTION_CALLS:  # only whether INSPECTION_CALLS is reached matters
                self.inspections += inspects(tool.name, tool.input_head)
            if tool.name not in self.tools:
                self.tools.append(tool.name)
            if tool.error and len(self.tool_errors) < MAX_TOOL_ERRORS:
                self.tool_errors.append(f"{tool.name}: {_head(tool.error, TOOL_ERROR_CHARS)}")
        self.stopped = False
        if turn.rejected_tool:
            self.object("rejected", (turn.rejection_feedback or "").strip())
            self.stopped = True
        if turn.interrupted:
            self.object("interrupted", "")
            self.stopped = True
        if turn.aborted:
            self.object("aborted", "")
            self.stopped = True
        for message in turn.queued_messages:
            self.follow_up(message.strip())
        moment = _aware(turn.timestamp) or _aware(session.started_at)
        if moment is not None:
            self.last_seen = moment if self.last_seen is None else max(self.last_seen, moment)

    def follow_up(self, text: str) -> str | None:
        """Take a message as a ``reaction`` (a label: never part of the prompt) or a ``refinement`` (part of the
        prompt); None when it is neither (a new request)."""
        if not text:
            return None
        if _is_acknowledgement(text):
            self.react(classify_reaction(text, self.request), text)
            return "reaction"
        reaction = reaction_to(text, request=self.request, answer=self.last_behaviour(), stopped=self.stopped)
        if reaction in ("correction", "reask"):
            self.object(reaction, text)
            return "reaction"
        if reaction == "approval":  # "yes, we use pnpm here": the rule it states still counts
            self.react("approval", text)
            self.add_rules(text, "house_rule")
            return "reaction"
        if reaction == "none":  # states rules, asks for nothing
            self.typed(text)
            self.add_rules(text, "house_rule")
            return "reaction"
        if _REFINEMENT.match(text):
            self.refinements.append(text)
            self.typed(text)
            self.add_rules(text, "house_rule")
            return "refinement"
        return None

    # -- reading
    def reaction(self) -> tuple[Reaction, str]:
        for wanted in _REACTION_ORDER[:-1]:
            texts = [text for reaction, text in self.reactions if reaction == wanted and text]
            if any(reaction == wanted for reaction, _ in self.reactions):
                return wanted, _head_block("\n".join(texts), REACTION_TEXT_CHARS)
        return "none", ""

    def prompt(self) -> str:
        """The replayed prompt: the request (a command: its expansion and arguments) and its refinements."""
        text = self.request.strip()
        if self.kind == "command" and self.command_body:
            arguments = text.split(None, 1)[1] if len(text.split(None, 1)) > 1 else ""
            text = self.command_body.strip()
            if arguments and arguments not in text:
                text += f"\n\nARGUMENTS: {arguments}"
        return "\n\n".join([text, *self.refinements])

    def family(self) -> str:
        """The grouping key: a slash command whose arguments are only ids (``/cmd 8454``) is one family."""
        if self.kind == "command" and needs_repo_state(self.request, kind="command"):
            return normalize_request(self.request.split(None, 1)[0] + " <id>")
        return normalize_request(self.request)

    def evidence(self) -> Evidence:
        corrected = [self.spans[index].behaviour for index in sorted(self.objected)][:MAX_CORRECTED_ANSWERS]
        accepted = None
        if self.spans and not self.stopped:
            last = len(self.spans) - 1
            if last not in self.objected and last > max(self.objected, default=-1):
                text = self.spans[last].behaviour
                accepted = None if is_vacuous(text) else text
        return Evidence(corrected=corrected, accepted=accepted, wants_artefact=wants_artefact(self.prompt()))

    def final_answer(self) -> str:
        if self.objected:
            return self.spans[min(self.objected)].answer
        return self.spans[-1].answer if self.spans else ""


def _session_key(session: Session) -> tuple[datetime, str]:
    return (_aware(session.started_at) or _EPOCH, session.session_id)


def _candidates(sessions: list[Session], dropped: dict[str, int], agent_answers: list[str] = ()) -> list[_Candidate]:
    """Turn every session's turns into candidate tasks (module docstring, steps 1-3)."""

    def drop(reason: str) -> None:
        dropped[reason] = dropped.get(reason, 0) + 1

    found: list[_Candidate] = []
    answers = AgentTexts.of_sessions(sessions, extra=agent_answers)
    numbers = {id(session): number for number, session in enumerate(sessions)}
    for session in sorted(sessions, key=_session_key):
        current: _Candidate | None = None
        orphan_rules: list[str] = []
        for turn in sorted(session.turns, key=lambda item: item.index):
            text = (turn.request or "").strip()
            reason = noise_reason(turn) or ("pasted_agent_text" if answers.pasted(text, numbers[id(session)]) else None)
            if reason in ("empty", "control_command", "pasted_terminal", "pasted_page", "pasted_agent_text"):
                drop(reason)
                if reason != "empty":  # what follows answers the command or the paste, not the task before
                    current = None
                continue
            if reason == "acknowledgement":
                drop(reason)
                if current is not None:
                    current.follow_up(text)
                    # "continue" / "yes, go ahead" (or anything after an interrupt) carry on the work;
                    # "thanks" / "ok" after a finished answer only close it
                    carries_on = bool(_CONTINUE.match(text)) or current.stopped or not current.spans
                    current.absorb(turn, session, take_answer=carries_on)
                continue
            folded = current.follow_up(text) if current is not None and turn.kind == "prompt" else None
            if folded is not None and current is not None:
                drop(f"folded_{folded}")
                current.absorb(turn, session)
                continue
            if current is not None and classify_reaction(text, current.request) == "approval":
                current.react("approval", text)  # "thanks! now add a test": approves the task before it, asks anew
            if current is None and turn.kind == "prompt" and states_only_rules(text):
                orphan_rules.append(text)  # house rules with nothing to react to: kept for the next request
                drop("rules_only")
                continue
            current = _Candidate(source=session.source, session_id=session.session_id, request=text, kind=turn.kind,
                                 seen_at=_aware(turn.timestamp) or _aware(session.started_at),
                                 command_body=turn.command_body)
            if turn.kind != "plan":  # a plan is the agent's text; a command's body is its file's, not the user's
                current.typed(text)
            if turn.kind == "prompt":
                current.add_rules(text, "house_rule")
            for statement in orphan_rules:
                current.typed(statement)
                current.add_rules(statement, "house_rule")
            orphan_rules = []
            current.absorb(turn, session)
            found.append(current)
    return found


# --------------------------------------------------------------------------- tasks


def _stem_tokens(text: str) -> set[str]:
    words = re.findall(r"[a-z0-9_]+", normalize_request(text))
    return {word[:-1] if len(word) > 3 and word.endswith("s") else word for word in words}


def _group_duplicates(candidates: list[_Candidate]) -> list[list[_Candidate]]:
    """Cluster near-duplicate requests (greedy, earliest first); each group's first item is its representative.
    A command family (``_Candidate.family``) groups by its key alone.

    A candidate joins the first group, in the order groups were made, whose representative has its grouping key or
    (not a command) a token Jaccard >= ``DUPLICATE_SIMILARITY`` with it; else it makes a new group. Only the groups
    that could pass are compared (prefix filtering, as in Bayardo et al.'s All-Pairs): with the tokens of every
    request in one order, rarest first, two sets with Jaccard >= t share a token among the first ``|x| - ceil(t*|x|)
    + 1`` of each (``_prefix``), so each group is indexed by the tokens of its representative's prefix and a
    candidate is compared with the groups its own prefix finds. Same groups as comparing with every group (tested),
    without the time that grows with requests x groups on a long history."""
    ordered = sorted(candidates, key=lambda item: (item.seen_at or _EPOCH,))
    token_sets = [_stem_tokens(candidate.request) for candidate in ordered]
    frequency = Counter(token for tokens in token_sets for token in tokens)
    groups: list[list[_Candidate]] = []
    representatives: list[set[str]] = []
    by_key: dict[str, int] = {}
    by_prefix_token: dict[str, list[int]] = {}
    for candidate, candidate_tokens in zip(ordered, token_sets):
        key = candidate.family()
        found = by_key.get(key)
        prefix = _prefix(candidate_tokens, frequency)
        if candidate.kind != "command":
            for index in sorted({index for token in prefix for index in by_prefix_token.get(token, ())}):
                if found is not None and index >= found:
                    break
                group_tokens = representatives[index]
                small, large = sorted((len(candidate_tokens), len(group_tokens)))
                if small / large < DUPLICATE_SIMILARITY:
                    continue
                if jaccard(candidate_tokens, group_tokens) >= DUPLICATE_SIMILARITY:
                    found = index
                    break
        if found is not None:
            groups[found].append(candidate)
            continue
        by_key[key] = len(groups)
        for token in prefix:
            by_prefix_token.setdefault(token, []).append(len(groups))
        groups.append([candidate])
        representatives.append(candidate_tokens)
    return groups


def _prefix(tokens: set[str], frequency: Counter[str]) -> list[str]:
    """The first ``|tokens| - ceil(DUPLICATE_SIMILARITY * |tokens|) + 1`` tokens, rarest first (ties by the token)."""
    if not tokens:
        return []
    length = len(tokens) - math.ceil(DUPLICATE_SIMILARITY * len(tokens) - 1e-9) + 1
    return sorted(tokens, key=lambda token: (frequency[token], token))[:length]


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


def _candidate_checks(candidate: _Candidate, evidence: Evidence) -> list[Check]:
    """Every check the candidate's own words suggest (still to be validated): the checks each stated rule implies,
    and the checks the names in each correction imply (``validation.evidence_checks``)."""
    checks: list[Check] = []
    stated = {rule for rule, _origin in candidate.rules}
    for rule, origin in candidate.rules:
        checks.extend(checks_for_rule(rule, origin=origin))
    for text in candidate.corrections:
        rules = [rule for rule in extract_rules(text) if rule in stated]
        for rule in rules:
            checks.extend(evidence_checks(rule, evidence, rule=rule))
        checks.extend(evidence_checks(text, evidence, rule=None))
    return checks


def _judge(candidate: _Candidate) -> tuple[list[Check], list[str], Evidence]:
    """(validated checks, rejections with reasons, the evidence) of one candidate."""
    evidence = candidate.evidence()
    checks, rejected = validate_checks(_candidate_checks(candidate, evidence), evidence)
    return checks, rejected, evidence


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
    for candidate in group:
        if not candidate.rules and not candidate.corrections:
            continue  # no words of its own to derive a check from: nothing to validate
        kept, dropped = _judge(candidate)[:2]
        rejected.extend(reason for reason in dropped if reason not in rejected)
        checks.extend(check for check in kept if all(check_key(check) != check_key(known) for known in checks))
    # the most telling occurrence: the strongest reaction, then the latest
    telling = min(group, key=lambda item: (_rank(item.reaction()[0]), -(item.last_seen or _EPOCH).timestamp()))
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
        rules=[rule for rule, _ in rules],
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
    recency = (task.last_seen or _EPOCH).timestamp()
    return (not task.hard_evidence, not strong, -task.recurrence, not failure, -recency, task.id)


def task_evidence(task: TaskRecord) -> Evidence:
    """The session evidence of a mined task, for validating checks proposed after mining (the LLM miner)."""
    return Evidence(corrected=list(task.evidence.corrected_answers), accepted=task.evidence.accepted_answer,
                    wants_artefact=wants_artefact(task.request))


# --------------------------------------------------------------------------- the LLM miner


def wants_miner(task: TaskRecord) -> bool:
    """The LLM miner is asked only about replayable tasks the user objected to whose own words gave no validated
    check: that is where a check is missing, and where the session holds an answer to validate it against."""
    return task.replayable and not task.judge.checks and bool(task.evidence.corrected_answers)


def _apply_miner(task: TaskRecord, reply: Any) -> tuple[int, str | None]:
    """Merge one miner reply into ``task``; return (checks rejected, outcome or None).

    Raises ValueError when the reply is not a JSON object. Every check goes through the same validation as the
    heuristic ones (``validation.validate_checks`` against the task's evidence); malformed and unsupported checks
    are stored in ``task.rejected_checks`` with the reason.
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
    proposed: list[Check] = []
    for position, item in enumerate(raw_checks):
        if position >= MAX_MINER_CHECKS:
            task.rejected_checks.append(f"llm_miner: more than {MAX_MINER_CHECKS} checks, the rest ignored")
            rejected += len(raw_checks) - MAX_MINER_CHECKS
            break
        reason, check = _miner_check(item)
        if reason or check is None:
            label = f"{item.get('op')}={item.get('value')!r}" if isinstance(item, dict) else repr(item)[:60]
            task.rejected_checks.append(f"llm_miner {label}: {reason}")
            rejected += 1
        else:
            proposed.append(check)
    evidence = task_evidence(task)
    kept, unsupported = validate_checks(proposed, evidence)
    task.rejected_checks.extend(unsupported)
    rejected += len(unsupported)
    for check in kept:
        if all(check_key(check) != check_key(known) for known in task.judge.checks):
            task.judge.checks.append(check)
    task.hard_evidence = task.replayable and hard_evidence(task.judge.checks, evidence)
    if task.judge.checks:
        task.judge.rubric = None
        return rejected, _outcome(reply)
    rubric = reply.get("rubric")
    if isinstance(rubric, str) and rubric.strip():
        rubric = _head_block(rubric, 1000)
        unchecked = [rule for rule in task.rules if rule.casefold() not in rubric.casefold()]
        if unchecked:  # the heuristic rubric carried these rules; keep them judged
            rubric += " It must follow the user's rules: " + "; ".join(unchecked) + "."
        task.judge.rubric = rubric
    return rejected, _outcome(reply)


def _outcome(reply: dict) -> str | None:
    outcome = reply.get("outcome")
    return outcome if outcome in MINER_OUTCOMES else None


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
    """Call the miner once per task that ``wants_miner``; return the number of its checks that were rejected."""
    rejected = 0
    stopped_because: str | None = None
    for task in tasks:
        if not wants_miner(task):
            continue
        if stopped_because:
            result.miner_errors[task.id] = f"miner not called: {stopped_because}"
            continue
        snapshot = task.model_copy(deep=True)
        result.miner_calls += 1
        try:
            count, outcome = _apply_miner(task, miner(task))
        except Exception as exc:  # a failed call, a bad reply or a miner bug keeps the heuristic judge
            for name in ("intent", "judge", "rejected_checks", "hard_evidence"):
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


def _count(values: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def mine_tasks(sessions: list[Session], *, project: str | None, val_fraction: float, test_fraction: float,
               max_tasks: int = 40, miner: Callable[[TaskRecord], dict] | None = None,
               agent_answers: list[str] = ()) -> MineResult:
    """Turn harvested sessions into TaskRecords with validated judges, rules and splits.

    At most ``max_tasks`` replayable tasks are kept; tasks that are not replayable are all kept (they cost no
    call: their rules and corrections are evidence) with split ``train``. project: stored on each task;
    val_fraction, test_fraction: floats in [0, 1) (see ``assign_split``; only replayable tasks are split);
    agent_answers: answers of sub-agent sessions the harvest read but did not keep (``HarvestResult.agent_answers``):
    a message that pastes one back is dropped as ``pasted_agent_text``, like one that pastes a session's answer.
    miner: optional ``task -> {intent, checks, rubric, outcome}`` (``rules.make_llm_miner``), called once per
    kept task that ``wants_miner``. Raises ValueError for a fraction outside [0, 1) or max_tasks < 1; malformed
    input is dropped and counted, never raised.
    """
    _check_fractions(val_fraction, test_fraction)
    if max_tasks < 1:
        raise ValueError(f"max_tasks must be >= 1, got {max_tasks}")
    result = MineResult()
    candidates = _candidates(sessions, result.dropped, agent_answers)
    groups = _group_duplicates(candidates)
    result.merged_duplicates = sum(len(group) - 1 for group in groups)
    tasks = [_build_task(group, project) for group in groups]
    replayable = sorted((task for task in tasks if task.replayable), key=_value_key)
    evidence_only = [task for task in tasks if not task.replayable]
    if len(replayable) > max_tasks:
        result.dropped["over_max_tasks"] = len(replayable) - max_tasks
        replayable = replayable[:max_tasks]
    rejected = sum(len(task.rejected_checks) for task in replayable + evidence_only)
    if miner is not None:
        rejected += _run_miner(replayable, miner, result)
    result.rejected_checks = rejected
    _assign_splits(replayable, val_fraction, test_fraction)
    for task in evidence_only:
        task.split = "train"
    kept = replayable + evidence_only
    kept.sort(key=lambda task: ((task.first_seen or _EPOCH), task.id))
    result.tasks = kept
    result.not_replayable = _count([task.not_replayable for task in evidence_only if task.not_replayable])
    return result


def mine_for_config(harvested: Any, config: Any, *, project: str,
                    miner: Callable[[TaskRecord], dict] | None = None) -> MineResult:
    """``mine_tasks`` on a harvest (``harvest.HarvestResult``: its sessions and sub-agent answers) with the splits and
    task cap of a ``SleepConfig`` (night and preview alike)."""
    return mine_tasks(harvested.sessions, project=project, val_fraction=config.val_fraction,
                      test_fraction=config.test_fraction, max_tasks=config.max_tasks_per_night, miner=miner,
                      agent_answers=harvested.agent_answers)
