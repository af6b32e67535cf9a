"""Is a user message a request at all, and can a task be replayed as text?

Mining asks two questions that the transcript's format cannot answer alone:

* ``pasted_reason(text)``: a message that is a pasted terminal screen or web page as a whole (a copy of the
  agent's own terminal UI, a page of a pull request) is not a request the user wrote: ``pasted_terminal`` when it
  holds the glyphs of a terminal UI (box drawing, block elements, the agent's ``❯ ● ⎿`` markers),
  ``pasted_page`` when it is long and mostly made of lines of at most three characters (navigation chrome).
  A question followed by a pasted log or traceback is still a request: such lines are long.
* ``AgentTexts``: a message that is an agent's answer pasted back (a sub-agent's or another session's report the
  user relays, as Roo Code users do when they resume an orchestrator task) is the agent's text, not the user's:
  ``pasted_agent_text`` when at least ``COPY_MIN_WORDS`` words long and all but a few of its words lie in runs of
  ``COPY_RUN`` words that an answer of *another* session (or of a sub-agent) holds. Quoting the answer the user is
  correcting is a reaction in its own session, and a quote with the user's own sentences around it stays theirs.
* ``not_replayable_reason(...)``: a task whose text cannot be answered or judged on its own is kept as evidence
  (its corrections and rules count) but never replayed or gated. Reasons, in this order:

  - ``plan_handoff``: "Implement the following plan:" (the plan is the agent's text, its work the repository's);
  - ``command_body_missing``: a custom slash command or skill whose expansion the transcript does not hold
    (``/team:plan 8511`` alone does not say what to do);
  - ``needs_repo_state``: the request points at repository objects by number or id and says little else: an
    issue, pull request, plan or objective number (``#8215``, ``PR 8528``, ``--pr 8528``, a GitHub URL to one),
    or a commit hash; or a slash command whose arguments are only such ids;
    It also needs the repository when the agent read it to answer: at least ``INSPECTION_CALLS`` calls that read
    files or search the tree (``Read``, ``Grep``, ``Glob``, ``read_file``, a shell ``cat`` / ``rg`` / ``ls`` ...);
    commands that act (install, build, commit) do not count: "install the deps" stays replayable;
  - ``long_tool_run``: the original span made at least ``LONG_TOOL_RUN`` tool calls: work done in the repository,
    of which a text answer shows nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from skillopt_sleep.models import NotReplayable

#: Tool calls in one span from which the work is a long tool-driven run.
LONG_TOOL_RUN = 20
#: Calls that read the repository (files, searches) from which the answer depended on its content.
INSPECTION_CALLS = 3
#: Tool names that read files or search the tree (Claude Code, Codex, Gemini CLI, Cursor and others), lower case.
INSPECTION_TOOLS = frozenset({
    "read", "grep", "glob", "ls", "notebookread", "read_file", "read_many_files", "list_dir", "list_directory",
    "glob_file_search", "grep_search", "codebase_search", "file_search", "search_files", "view", "find",
    "search_file_content", "web_fetch", "webfetch",
})
_SHELL_READ = re.compile(r"^\W*(?:bash\s+-lc\s+\W*)?(?:cat|rg|grep|ls|find|head|tail|sed\s+-n|less|tree|wc|git\s+"
                         r"(?:show|log|diff|status|grep|blame))\b")
#: Lines of a message from which the short-line test of a pasted page applies.
PAGE_MIN_LINES = 12
#: Share of lines of at most three characters that makes a pasted page.
PAGE_SHORT_LINE_SHARE = 0.3
#: Terminal-UI glyphs from which a message is a pasted screen.
SCREEN_MIN_GLYPHS = 3

_SCREEN_GLYPHS = frozenset("▐▛▜▌▝▘▗▖▀▄█⎿●❯╭╮╰╯│─┌┐└┘├┤┬┴┼═║✻✶✳⏺")
_ISSUE_REF = re.compile(
    r"(?:(?<![\w&])#\d{1,7}\b"
    r"|\b(?:pr|pull request|pull|issue|ticket|plan|objective|mr|merge request|bug|story)\s*(?:#|no\.?\s*|number\s*)?"
    r"\d{1,7}\b"
    r"|--(?:pr|issue|plan|objective)[= ]\d+"
    r"|github\.com/[^\s/]+/[^\s/]+/(?:pull|issues)/\d+"
    r"|\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b)",
    re.IGNORECASE,
)
_ID_ARGUMENT = re.compile(r"^(?:--?[\w-]+[= ]?)?#?\d+$|^https?://\S+$|^(?=[0-9a-f]*\d)[0-9a-f]{7,40}$",
                          re.IGNORECASE)
_WORD = re.compile(r"[A-Za-z]{3,}")
#: Content words besides the reference up to which a request is "only a reference".
REFERENCE_ONLY_WORDS = 12


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


def _command_arguments(request: str) -> list[str]:
    """The arguments of a ``/name args`` request, split on whitespace (``--pr 8528`` stays one argument)."""
    parts = request.strip().split()[1:]
    joined: list[str] = []
    for part in parts:
        if joined and joined[-1].startswith("-") and "=" not in joined[-1] and not _ID_ARGUMENT.match(joined[-1]):
            joined[-1] += " " + part
        else:
            joined.append(part)
    return joined


def needs_repo_state(request: str, *, kind: str = "prompt") -> bool:
    """True when the request points at repository objects by number or id and says little else (module
    docstring); a slash command whose every argument is such an id counts too."""
    text = (request or "").strip()
    if kind == "command":
        arguments = _command_arguments(text)
        if arguments and all(_ID_ARGUMENT.match(argument) for argument in arguments):
            return True
    references = list(_ISSUE_REF.finditer(text))
    if not references:
        return False
    rest = _ISSUE_REF.sub(" ", text)
    return len(_WORD.findall(rest)) <= REFERENCE_ONLY_WORDS


# Compiled once: ``inspects`` runs for every tool call of every mined turn.
_LISTED_COMMAND = re.compile(r'"(?:command|cmd)"\s*:\s*\[([^\]]*)')
# A JSON string's body as an unrolled loop (runs of plain characters between escapes): the same matches as
# (?:[^"\\]|\\.)*, without one alternation per character.
_SINGLE_COMMAND = re.compile(r'"(?:command|cmd)"\s*:\s*"([^"\\]*(?:\\.[^"\\]*)*)"')
_JSON_STRING = re.compile(r'"([^"\\]*(?:\\.[^"\\]*)*)"')


def inspects(name: str, input_head: str) -> bool:
    """A tool call that reads the repository: a reading tool, or a shell command that reads (``cat``, ``rg``...)."""
    if name.casefold() in INSPECTION_TOOLS:
        return True
    if name.casefold() in ("bash", "shell", "exec_command", "local_shell", "run_shell_command", "terminal"):
        command = input_head
        if command.startswith("{"):  # JSON arguments: {"command": "..."} or {"command": ["bash", "-lc", "..."]}
            if listed := _LISTED_COMMAND.search(command):
                command = " ".join(_JSON_STRING.findall(listed.group(1)))
            elif single := _SINGLE_COMMAND.search(command):
                command = single.group(1)
        return _SHELL_READ.match(command) is not None
    return False


def not_replayable_reason(request: str, *, kind: str, command_body: str | None, tool_calls: int,
                          inspections: int = 0) -> NotReplayable | None:
    """Why a task cannot be replayed as text (module docstring), or None when it can.

    request: the user's own words (``/name args`` for a command); kind: ``Turn.kind``; command_body: the
    command's expansion (None when the transcript has none); tool_calls: tool calls of the original span;
    inspections: those of them that read the repository (``inspects``).
    """
    if kind == "plan":
        return "plan_handoff"
    if kind == "command" and not (command_body or "").strip():
        return "command_body_missing"
    if needs_repo_state(request, kind=kind) or inspections >= INSPECTION_CALLS:
        return "needs_repo_state"
    if tool_calls >= LONG_TOOL_RUN:
        return "long_tool_run"
    return None
