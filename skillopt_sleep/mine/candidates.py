"""Candidate tasks: each request, assembled from its turn, its refinements and the user's reactions.

``candidates_of(sessions, dropped, agent_answers)`` walks every session's turns in order (``tasks`` module docstring,
steps 1-3) and returns one ``Candidate`` per request: its prompt, the spans of what the agent did, the spans the user
objected to, the reactions, the rules stated, and what the user typed (``authored``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import lru_cache
from itertools import islice

from skillopt_sleep.grammar.statements import rule_statements, states_only_rules
from skillopt_sleep.grammar.typed import authored_text, typed_text
from skillopt_sleep.mine.reactions import REFINEMENT, classify_reaction, reaction_to
from skillopt_sleep.mine.replayable import INSPECTION_CALLS, inspects, needs_repo_state
from skillopt_sleep.mine.requests import AgentTexts, is_acknowledgement, noise_reason
from skillopt_sleep.mine.split import normalize_request
from skillopt_sleep.mine.validation import Evidence, behaviour, is_vacuous, wants_artefact
from skillopt_sleep.models import Reaction, Session, Turn

#: Caps on evidence texts (characters) and list lengths.
REACTION_TEXT_CHARS = 1000


TOOL_ERROR_CHARS = 200


MAX_TOOL_ERRORS = 10


#: Characters kept of what the agent did in one span (answer and tool inputs), and spans kept per task.
BEHAVIOUR_CHARS = 1500


MAX_CORRECTED_ANSWERS = 3


#: Tool inputs kept per span for the evidence.
MAX_ACTIONS = 8


_CONTINUE = re.compile(r"^\W*(?:continue|go on|go ahead|proceed|keep going|carry on|do it|yes|yep|yeah|sure|"
                       r"please do|please continue|resume|retry|try again)\b", re.IGNORECASE)


REACTION_ORDER: tuple[Reaction, ...] = ("correction", "rejected", "interrupted", "aborted", "reask", "approval",
                                         "none")


EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def aware(moment: datetime | None) -> datetime | None:
    if moment is None:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def head_line(text: str, limit: int) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def head_block(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass
class Span:
    """What the agent did for one turn of a task: its answer and tool inputs (``validation.behaviour``)."""

    answer: str
    actions: list[str]

    @property
    def behaviour(self) -> str:
        return head_block(behaviour(self.answer, self.actions), BEHAVIOUR_CHARS)


@dataclass
class Candidate:
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
    spans: list[Span] = field(default_factory=list)
    objected: set[int] = field(default_factory=set)  # span indexes the user corrected, re-asked, stopped
    tools: list[str] = field(default_factory=list)
    tool_errors: list[str] = field(default_factory=list)
    tool_calls: int = 0
    inspections: int = 0  # tool calls that read the repository (``replayable.inspects``), up to INSPECTION_CALLS
    reactions: list[tuple[Reaction, str]] = field(default_factory=list)  # (reaction, text)
    authored: list[str] = field(default_factory=list)  # what the user typed (``provenance.authored_text``)
    last_seen: datetime | None = None
    stopped: bool = False  # the latest turn of this task was interrupted / rejected / aborted
    own_words: Callable[[str], str] = typed_text
    """What the user wrote of a message: ``grammar.typed.typed_text`` of it without what an agent wrote
    (``candidates_of``)."""

    # -- building
    def typed(self, text: str) -> None:
        """Keep a message the user typed for this task as provenance (``TaskRecord.authored``)."""
        kept = authored_text(self.own_words(text))
        if kept and kept not in self.authored:
            self.authored.append(kept)

    def add_rules(self, text: str, origin: str) -> None:
        for rule in rule_statements(self.own_words(text)):
            self.rules.append((rule, origin))

    def react(self, reaction: Reaction, text: str) -> None:
        """A reaction labels the task with the user's own words only (``evidence.reaction_text``): never a paste."""
        self.typed(text)
        if reaction != "none":
            self.reactions.append((reaction, self.own_words(text)))

    def last_behaviour(self) -> str:
        return self.spans[-1].behaviour if self.spans else ""

    def object(self, reaction: Reaction, text: str) -> None:
        """The user objected to the last span (correction, re-ask, rejection, interrupt)."""
        if self.spans:
            self.objected.add(len(self.spans) - 1)
        self.react(reaction, text)
        if text and reaction in ("correction", "rejected", "interrupted", "aborted"):
            self.corrections.append(self.own_words(text))
            self.add_rules(text, "correction")

    def absorb(self, turn: Turn, session: Session, *, take_answer: bool = True) -> None:
        """Take a turn's answer (a new span), tools, structural signals and queued messages into this task."""
        actions = list(islice((f"[{tool.name}] {tool.input_head}".strip() for tool in turn.tools
                               if tool.input_head.strip()), MAX_ACTIONS))
        if take_answer and (turn.final_answer.strip() or actions):
            self.spans.append(Span(turn.final_answer, actions))
        self.tool_calls += turn.tool_calls or len(turn.tools)
        for tool in turn.tools:
            if self.inspections < INSPECTION_CALLS:  # only whether INSPECTION_CALLS is reached matters
                self.inspections += inspects(tool.name, tool.input_head)
            if tool.name not in self.tools:
                self.tools.append(tool.name)
            if tool.error and len(self.tool_errors) < MAX_TOOL_ERRORS:
                self.tool_errors.append(f"{tool.name}: {head_line(tool.error, TOOL_ERROR_CHARS)}")
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
        moment = aware(turn.timestamp) or aware(session.started_at)
        if moment is not None:
            self.last_seen = moment if self.last_seen is None else max(self.last_seen, moment)

    def follow_up(self, text: str) -> str | None:
        """Take a message as a ``reaction`` (a label: never part of the prompt) or a ``refinement`` (part of the
        prompt); None when it is neither (a new request)."""
        if not text:
            return None
        if is_acknowledgement(text):
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
        if REFINEMENT.match(text):
            self.refinements.append(text)
            self.typed(text)
            self.add_rules(text, "house_rule")
            return "refinement"
        return None

    # -- reading
    def reaction(self) -> tuple[Reaction, str]:
        for wanted in REACTION_ORDER[:-1]:
            texts = [text for reaction, text in self.reactions if reaction == wanted and text]
            if any(reaction == wanted for reaction, _ in self.reactions):
                return wanted, head_block("\n".join(texts), REACTION_TEXT_CHARS)
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
    return (aware(session.started_at) or EPOCH, session.session_id)


def candidates_of(sessions: list[Session], dropped: dict[str, int], agent_answers: list[str] = ()) -> list[Candidate]:
    """Turn every session's turns into candidate tasks (module docstring, steps 1-3)."""

    def drop(reason: str) -> None:
        dropped[reason] = dropped.get(reason, 0) + 1

    found: list[Candidate] = []
    answers = AgentTexts.of_sessions(sessions, extra=agent_answers)

    @lru_cache(maxsize=512)
    def own_words(text: str) -> str:
        return typed_text(answers.without_copies(text))

    numbers = {id(session): number for number, session in enumerate(sessions)}
    for session in sorted(sessions, key=_session_key):
        current: Candidate | None = None
        orphan_rules: list[str] = []
        for turn in sorted(session.turns, key=lambda item: item.index):
            text = (turn.request or "").strip()
            reason = noise_reason(turn) or ("pasted_agent_text" if answers.pasted(text, numbers[id(session)]) else None)
            if reason in ("empty", "control_command", "shell_command", "pasted_terminal", "pasted_page",
                          "pasted_agent_text"):
                drop(reason)
                if reason != "empty":  # what follows answers the command or the paste, not the task before
                    current = None
                continue
            if reason in ("acknowledgement", "single_key"):
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
            current = Candidate(source=session.source, session_id=session.session_id, request=text, kind=turn.kind,
                                own_words=own_words,
                                 seen_at=aware(turn.timestamp) or aware(session.started_at),
                                 command_body=turn.command_body)
            if turn.kind != "plan":  # a plan is the agent's text; a command's body is its file's, not the user's
                current.typed(text)
            if turn.kind == "prompt":
                current.add_rules(text, "house_rule")
            elif turn.kind == "command" and len(text.split(None, 1)) > 1:  # what the user typed after the command
                current.add_rules(text.split(None, 1)[1], "house_rule")
            for statement in orphan_rules:
                current.typed(statement)
                current.add_rules(statement, "house_rule")
            orphan_rules = []
            current.absorb(turn, session)
            found.append(current)
    return found
