"""Is a user message a request at all?

* ``noise_reason(turn)``: ``empty``, ``control_command`` (``/clear``, ``/model``), ``acknowledgement`` (only words such
  as "thanks", "ok", "continue"), ``pasted_terminal`` / ``pasted_page`` (``pasted_reason``), or None;
* ``pasted_reason(text)``: a message that is a pasted terminal screen or web page as a whole (a copy of the agent's
  own terminal UI, a page of a pull request) is not a request the user wrote: ``pasted_terminal`` when it holds the
  glyphs of a terminal UI (box drawing, block elements, the agent's ``❯ ● ⎿`` markers), ``pasted_page`` when it is long
  and mostly made of lines of at most three characters (navigation chrome). A question followed by a pasted log or
  traceback is still a request: such lines are long.
* ``AgentTexts``: a message that is an agent's answer pasted back (a sub-agent's or another session's report the user
  relays, as Roo Code users do when they resume an orchestrator task) is the agent's text, not the user's:
  ``pasted_agent_text`` when at least ``COPY_MIN_WORDS`` words long and all but a few of its words lie in runs of
  ``COPY_RUN`` words that an answer of *another* session (or of a sub-agent) holds. Quoting the answer the user is
  correcting is a reaction in its own session, and a quote with the user's own sentences around it stays theirs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from skillopt_sleep.grammar.typed import command_line
from skillopt_sleep.harvest.control_commands import CONTROL_COMMANDS
from skillopt_sleep.models import Turn

_ACK_WORDS = frozenset(
    """ok okay k kk yes yep yeah yup y sure thanks thank you thx ty great perfect nice cool awesome lgtm continue
    go on ahead proceed do it sounds looks good fine alright right keep going carry done excellent amazing got
    that works now so much very cheers please pls let's lets retry try again"""
    .split()
)


def _command_name(request: str) -> str | None:
    match = re.match(r"^/([A-Za-z][\w:-]*)", request.strip())
    return match.group(1).lower() if match else None


def is_acknowledgement(text: str) -> bool:
    words = re.findall(r"[a-z']+", text.casefold())
    if not words:  # only emoji / punctuation ("👍", "!!")
        return not re.search(r"\w", text)
    return len(words) <= 5 and all(word.strip("'") in _ACK_WORDS for word in words)


def noise_reason(turn: Turn) -> str | None:
    """Return why a turn is not a request (``empty``, ``control_command``, ``acknowledgement``, ``single_key``: one
    letter or digit, the answer to a prompt such as aider's ``(Y)es/(N)o/(A)ll``; ``shell_command``: a command line
    typed into the chat, ``npm run dev`` (``grammar.typed.command_line``); ``pasted_terminal``, ``pasted_page``), or
    None."""
    text = (turn.request or "").strip()
    if not text:
        return "empty"
    name = _command_name(text)
    if name is not None and name in CONTROL_COMMANDS:
        return "control_command"
    if is_acknowledgement(text):
        return "acknowledgement"
    if len(text) == 1 and text.isalnum():
        return "single_key"
    if "\n" not in text and command_line(text):
        return "shell_command"
    return pasted_reason(text)


#: Lines of a message from which the short-line test of a pasted page applies.
PAGE_MIN_LINES = 12


#: Share of lines of at most three characters that makes a pasted page.
PAGE_SHORT_LINE_SHARE = 0.3


#: Terminal-UI glyphs from which a message is a pasted screen.
SCREEN_MIN_GLYPHS = 3


_SCREEN_GLYPHS = frozenset("▐▛▜▌▝▘▗▖▀▄█⎿●❯╭╮╰╯│─┌┐└┘├┤┬┴┼═║✻✶✳⏺")


def pasted_reason(text: str) -> str | None:
    """``pasted_terminal`` / ``pasted_page`` when the whole message is a pasted screen or page (see the module
    docstring), else None."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    if len(lines) >= 3 and sum(1 for char in text if char in _SCREEN_GLYPHS) >= SCREEN_MIN_GLYPHS:
        return "pasted_terminal"
    if len(lines) >= PAGE_MIN_LINES:
        short = sum(1 for line in lines if len(line) <= 3)
        if short / len(lines) >= PAGE_SHORT_LINE_SHARE:
            return "pasted_page"
    return None


#: Words in a run shared with an answer that count as copied (shorter runs are common phrases).
COPY_RUN = 8


#: Answers are indexed at every ``COPY_STRIDE``-th word (a copy of ``COPY_RUN + COPY_STRIDE - 1`` words or more
#: always holds an indexed run; a copied stretch may then show up to ``COPY_STRIDE - 1`` words short at each end).
COPY_STRIDE = 4


#: Least words from which a message can be a pasted answer (a short message is typed).
COPY_MIN_WORDS = 40


#: Words of its own (outside copied runs, beyond what the stride may miss) from which a message is the user's.
COPY_OWN_WORDS = 5


_ANY_SESSION = -1


def _copy_words(text: str) -> list[str]:
    return text.casefold().split()


def _run_hashes(words: list[str]) -> map:
    """The hash of each run of ``COPY_RUN`` consecutive words, in order (tuples built by ``zip``, in C)."""
    return map(hash, zip(*(words[offset:] for offset in range(COPY_RUN))))


class AgentTexts:
    """The answers of a night's sessions (``Turn.final_answer``) and of the sub-agent sessions the harvest read but
    did not keep, indexed by runs of ``COPY_RUN`` words, to tell an answer pasted back from a message the user wrote
    (module docstring). Only answers of *other* sessions count for a message: quoting the answer just given to
    correct it is a reaction, not a paste. Built on first use (a night without a long message never builds it)."""

    def __init__(self, answers: Iterable[tuple[int, str]]) -> None:
        """answers: (session number, answer text); ``_ANY_SESSION`` for an answer of no mined session."""
        self._answers = answers
        self._index: dict[int, int] | None = None

    @classmethod
    def of_sessions(cls, sessions: list, extra: Iterable[str] = ()) -> AgentTexts:
        """From ``list[Session]`` (numbered in list order): every turn's final answer, and ``extra`` answers
        (sub-agent sessions the harvest read but did not keep: ``HarvestResult.agent_answers``)."""
        return cls([*((number, turn.final_answer) for number, session in enumerate(sessions)
                      for turn in session.turns if turn.final_answer),
                    *((_ANY_SESSION, text) for text in extra)])

    def _runs(self) -> dict[int, int]:
        """Run hash -> the session number that holds it (``_ANY_SESSION`` when several, or none, do)."""
        if self._index is None:
            self._index = {}
            for number, answer in self._answers:
                words = _copy_words(answer)
                if len(words) < COPY_RUN:
                    continue
                for run in list(_run_hashes(words))[::COPY_STRIDE]:
                    owner = self._index.get(run, number)
                    self._index[run] = number if owner == number else _ANY_SESSION
        return self._index

    def without_copies(self, text: str) -> str:
        """``text`` without the paragraphs an agent wrote (any session's answer, the same session's included: a quote
        of the answer being corrected is the agent's words, not the user's): a paragraph of at least ``COPY_RUN``
        words all but a few of whose words lie in runs an answer holds. What is left is the user's."""
        if len(_copy_words(text)) < COPY_RUN:
            return text
        runs = self._runs()
        if not runs:
            return text
        kept = []
        for paragraph in re.split(r"\n\s*\n", text):
            words = _copy_words(paragraph)
            copied = [False] * len(words)
            for i, run in enumerate(_run_hashes(words)):
                if run in runs:
                    copied[i:i + COPY_RUN] = [True] * COPY_RUN
            if len(words) < COPY_RUN or copied.count(False) >= COPY_OWN_WORDS + COPY_STRIDE - 1:
                kept.append(paragraph)
        return "\n\n".join(kept)

    def pasted(self, text: str, session: int = _ANY_SESSION) -> bool:
        """True when ``text``, a message of session number ``session``, is an answer of another session pasted back:
        ``COPY_MIN_WORDS`` words or more, fewer than ``COPY_OWN_WORDS`` (plus the stride's margin) of them outside
        runs such an answer holds."""
        words = _copy_words(text)
        if len(words) < COPY_MIN_WORDS:
            return False
        runs = self._runs()
        copied = [False] * len(words)
        for i, run in enumerate(_run_hashes(words)):
            owner = runs.get(run)
            if owner is not None and (owner == _ANY_SESSION or owner != session):
                copied[i:i + COPY_RUN] = [True] * COPY_RUN
        return copied.count(False) < COPY_OWN_WORDS + COPY_STRIDE - 1
