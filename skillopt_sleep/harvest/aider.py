"""Aider harvester: the human's own requests, and what followed each, from ``.aider.chat.history.md``.

Format (written by aider's ``InputOutput``, append-only Markdown in the project, one file for every run):

* ``# aider chat started at YYYY-MM-DD HH:MM:SS`` (local time, no zone) starts a run: one ``Session`` each.
* ``#### <text>  `` lines are what was typed at aider's prompt; a multi-line message is consecutive ``#### `` lines.
  Every such line ends with two spaces (a Markdown line break) and the block follows a blank line: a ``#### ``
  heading inside the assistant's reply has neither, so it stays the reply's text.
* ``> <text>  `` lines are aider's own output: notices, confirm prompts with the answer appended
  (``> Create new file? (Y)es/(N)o [Yes]: y``), ``Applied edit to …``, ``Tokens: …``, errors. A message of several
  lines may carry ``> `` on its first line only, up to the line that ends with two spaces (v0.72.2, real fixture
  ``sabelosimelane__prompt_sail_2__…`` lines 21-26; also every confirm subject of several lines).
* Everything else is the assistant's reply (a ``> `` quote inside it has no two trailing spaces: same fixture, 227).
* A committed history may have lost its trailing spaces (an editor, a pre-commit hook or ``git --whitespace=fix``
  trimmed it: ``spaces_stripped``). Then a ``####`` block counts as typed only where aider writes one: after a blank
  line that follows a run's header, aider's own ``> `` output (``> Tokens: …`` ends every reply of v0.46+) or another
  typed block, never right after reply text; ``####`` lines parted only by blank lines are one message, unless one
  is a command; and every ``> `` line is a message of its own.

Versions: v0.72.2 (``sabelosimelane__prompt_sail_2__…``), v0.83.1 (``Ahmedrali__rfp_response_platform__…``, also
``/code X`` echoed as a second ``####`` block) and v0.86.0 (``10on__lego-parts-storage__…``).

A request is a ``####`` block the human typed, and authorship is read from structure (``aider/io.py``: ``user_input``
writes a typed message as ``#### `` lines after a blank line; ``ai_output`` writes a reply in one piece; aider's own
lines are ``> `` lines), never from what the text says:

* inside a reply's fence (```` ``` ````, ``~~~``, or the ``<source>``-style fences aider picks for a file that holds
  backticks) or edit block (``<<<<<<< SEARCH`` … ``>>>>>>> REPLACE``) every line is the reply's: a file's ``#### …  ``
  line quoted or written by the model stays the file's;
* in a run whose version writes ``> Tokens: …`` after its replies, a ``####`` block right after reply text with no
  line of aider's between is inside that reply (``inside_reply``); versions that write no usage line (v0.45) keep it;
* when ``.aider.input.history`` (``$AIDER_INPUT_HISTORY_FILE``) covers a run (inputs recorded in the day after it
  started), a block it does not hold was not typed at the prompt (``not_typed``);
* written by aider in the user's name, never a request: the architect's proposal handed to the editor model (after
  ``Edit the files? … y``, or with auto-accept: a block whose text is the reply just before it, reasoning left out;
  ``architect_handoff``), a confirm answer given for a whole group (``#### Add URL to the chat? (Y)es/… [Yes]: a``;
  ``confirm_answer``), the prompt ``/help X`` sends (``# Question: X`` and the docs) and the ``--watch-files`` prompts
  around a file's "AI" comments (``aider_prompt``).

Slash commands (``/add``, ``/run``, ``/drop``, ``/undo``, ``!cmd``…) and mode switches are not requests (counted in
``stats.messages_skipped["command"]``, like every reason above) and end the current turn, so their output (e.g. the
``/run`` "Add … of command output to the chat? … n") never lands on a request. ``/ask``, ``/code``, ``/architect``,
``/context`` with text, and ``/ok``, are requests (the text; a unique prefix such as ``/arch`` counts), and the copy
of that text aider writes right after as its own ``####`` block is dropped.

What followed a request: the last assistant reply (replies are separated by aider's lines), ``Applied edit to X``
(tool ``edit``), ``Running X`` (tool ``shell``), edit failures (``The LLM did not conform to the edit format``,
``SEARCH/REPLACE block failed to match``, ``Failed to apply edit``…: the error of the turn's last tool, or of a new
``edit`` tool), a confirm answered ``n``/``s``/``d`` (``rejected_tool``; not the "open URL" / "what's new" offers),
``^C`` before the reply completed (no ``Tokens:`` line yet: ``interrupted``) and a model API error with no reply
after it (``aborted``).

Times: aider records only the run's start, in the machine's local zone without an offset. It is read in this
machine's local zone (ambiguous DST hours take the first reading) and stored as aware UTC; every turn of a run carries
that time. ``Session.cwd`` is the directory holding the history file; ``session_id`` is ``<sha1(path)[:12]>:<byte
offset of the header>``. A run whose first request is our own (``prompts.marker.is_own_request``) is skipped
(``own_marker``).

Checkpoint: ``FileCheckpoint.offset`` is the byte offset just after the last complete line read. A grown file is read
from there; the run it continues is found by reading back to the last header before the offset (its start time, and
its first request for the marker). A half-written last line waits for the next night.
"""

from __future__ import annotations

import bisect
import hashlib
import os
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

from skillopt_sleep.harvest.read_plan import HarvestContext, file_mtime, plan_read, read_isolated
from skillopt_sleep.harvest.reader import READ_CHUNK
from skillopt_sleep.harvest.turns import ANSWER_MAX_CHARS, TOOL_ERROR_MAX_CHARS, DraftTool, DraftTurn, finish_turns
from skillopt_sleep.models import FileCheckpoint, HarvestStats, Session
from skillopt_sleep.prompts.marker import is_own_request

SOURCE = "aider"

HISTORY_NAME = ".aider.chat.history.md"
INPUT_HISTORY_NAME = ".aider.input.history"
HEADER = "# aider chat started at "
_HEADER_BYTES = b"\n" + HEADER.encode()

COMMANDS = ("add", "architect", "ask", "chat-mode", "clear", "code", "commit", "context", "copy", "copy-context",
            "diff", "drop", "edit", "editor", "editor-model", "exit", "git", "help", "lint", "load", "ls", "map",
            "map-refresh", "model", "models", "multiline-mode", "ok", "paste", "quit", "read-only",
            "reasoning-effort", "report", "reset", "run", "save", "settings", "test", "think-tokens", "tokens",
            "undo", "voice", "weak-model", "web")
"""aider's slash commands (``aider/commands.py``); a command may be typed as any unique prefix."""
CHAT_COMMANDS = frozenset({"ask", "code", "architect", "context"})
"""Commands whose text is sent to the model as a request."""
OK_TEXT = "Ok, please go ahead and make those changes."
"""What ``/ok`` sends (``cmd_ok``), followed by its arguments."""
EDIT_ERRORS = ("The LLM did not conform to the edit format", "failed to match", "Failed to apply edit",
               "Unable to create ", "Exception while updating files", "Unable to commit", "Malformed")
API_ERRORS = ("litellm.", "The API provider ")
BENIGN_QUESTIONS = ("Open ", "Would you like to see", "Add .aider")
"""Confirm prompts whose "no" rejects no action of the agent."""
_CONFIRM = re.compile(r"^(?P<question>.*?\?) \(Y\)es/\(N\)o[^\]]*\]: ?(?P<answer>\S*)\s*$")
_CTRL_C = ("^C again to exit", "^C KeyboardInterrupt")
_VERSION = re.compile(r"^Aider v(\d[\w.\-]*)")
_COMMAND = re.compile(r"/(\S*)\s*(.*)", re.DOTALL)


def default_root(project: Path | None = None) -> Path:
    """The history to read (absolute): the file named by ``$AIDER_CHAT_HISTORY_FILE`` when set (a relative name is
    taken from the project directory, as aider takes it from where it starts), else the project directory (else the
    current directory), which holds ``.aider.chat.history.md``."""
    base = Path(project).expanduser() if project is not None else Path.cwd()
    base = Path(os.path.abspath(base))
    named = os.environ.get("AIDER_CHAT_HISTORY_FILE")
    if named:
        path = Path(named).expanduser()
        return Path(os.path.abspath(path if path.is_absolute() else base / path))
    return base


def history_file(root: Path) -> Path:
    """The history file ``root`` names: ``root`` itself unless it is a directory (then its history file)."""
    root = Path(os.path.abspath(Path(root).expanduser()))
    return root / HISTORY_NAME if root.is_dir() else root


def has_sessions(root: Path) -> bool:
    """True when ``root`` is, or is a directory holding, a non-empty aider chat history. Never raises."""
    try:
        path = history_file(root)
        return path.is_file() and path.stat().st_size > 0
    except OSError:
        return False


def session_id(path: Path, offset: int) -> str:
    """The stable id of the run whose header starts at byte ``offset`` of ``path``."""
    return f"{hashlib.sha1(str(path).encode('utf-8')).hexdigest()[:12]}:{offset}"


def header_time(line: str) -> datetime | None:
    """The aware UTC time of a ``# aider chat started at …`` line (local time of this machine), or None."""
    if not line.startswith(HEADER):
        return None
    try:
        return datetime.strptime(line[len(HEADER):].strip(), "%Y-%m-%d %H:%M:%S").astimezone(timezone.utc)
    except (ValueError, OverflowError, OSError):
        return None


def resolve_command(text: str) -> tuple[str | None, str]:
    """``(command name or None when ambiguous/unknown, arguments)`` of a line typed as ``/name args``."""
    match = _COMMAND.match(text)
    word, rest = (match.group(1).lower(), match.group(2).strip()) if match else ("", "")
    if word in COMMANDS:
        return word, rest
    matches = [name for name in COMMANDS if name.startswith(word)] if word else []
    return (matches[0] if len(matches) == 1 else None), rest


# --------------------------------------------------------------------------- one file


@dataclass
class _Run:
    """One ``# aider chat started at`` run while it is read."""

    offset: int
    started_at: datetime | None
    version: str | None = None
    turns: list[DraftTurn] = field(default_factory=list)
    requests: int = 0
    own_marker: bool = False
    usage_lines: int = 0
    """aider's ``Tokens: …`` lines: the run's version writes one after every reply."""
    after_reply: list[DraftTurn] = field(default_factory=list)
    """Turns whose ``####`` block came right after reply text, with no line of aider's between."""


_FENCE_OPEN = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})")
_TAG_FENCES = ("source", "code", "pre", "codeblock", "sourcecode")
"""The fences aider itself writes around a file that holds triple backticks (``aider/utils.py`` ``choose_fence``)."""
_TAG_OPEN = re.compile(r"^\s*<(?P<tag>" + "|".join(_TAG_FENCES) + r")>\s*$")
_EDIT_OPEN = re.compile(r"^\s*<{5,9} ?(?:SEARCH|ORIGINAL|HEAD)\b", re.IGNORECASE)
_EDIT_CLOSE = re.compile(r"^\s*>{5,9} ?(?:REPLACE|UPDATED)\b", re.IGNORECASE)
_AFTER_REPLY = re.compile(r"^> (?:Tokens: \S+ sent, \S+ received|Model .{1,200} has hit a token limit|"
                          r"\^C (?:KeyboardInterrupt|again to exit)|Applied edit to |Commit [0-9a-f]{7,40} |litellm\.|"
                          r"The API provider )")
"""aider's lines that only ever follow a reply (its usage, a token-limit stop, an interrupt, an applied edit and its
commit, an API error). After a blank line or another line of aider's they end a reply whose fence or edit block was
left open (a reply cut by a limit or interrupted), and they are aider's even when they wrap onto a second line."""
_THINK = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.DOTALL)
WATCH_PROMPTS = ('I\'ve written your instructions in comments in the code and marked them with "ai"',
                 '/ask\nFind the "AI" comments below')
"""How aider's ``--watch-files`` prompts begin (``aider/watch_prompts.py``): its text around the "AI" comments of a
file, sent in the user's name, never typed."""
HELP_QUESTION = "# Question: "
"""How the prompt ``/help X`` sends begins (``cmd_help``): aider's text around the docs it found."""


def _fingerprint(text: str) -> str:
    """Whitespace-insensitive identity of a text, without reasoning blocks: a reply and the hand-off that repeats it
    (lines stripped, blank lines dropped) have one fingerprint."""
    body = _THINK.sub("", text)
    lines = [line.strip() for line in body.splitlines() if line.strip()]
    return hashlib.sha1("\n".join(lines).encode("utf-8", "replace")).hexdigest()


def _fence_end(line: str) -> re.Pattern[str] | None:
    """The pattern that closes the fence ``line`` opens in a reply (a closing fence is only its characters), or None."""
    match = _FENCE_OPEN.match(line)
    if match is not None:
        fence = match.group("fence")
        return re.compile(r"^ {0,3}" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}\s*$")
    tag = _TAG_OPEN.match(line)
    if tag is not None:
        return re.compile(r"^\s*</" + tag.group("tag") + r">\s*$")
    return None


class InputHistory:
    """What was typed at aider's prompt, from ``.aider.input.history`` (prompt_toolkit's ``FileHistory``: a ``# <local
    time>`` line, then the input as ``+`` lines). aider writes it as the user submits, never for its own messages (an
    architect hand-off, a confirm answer, a ``/help`` or watch prompt), so when it covers a run it decides which
    ``####`` blocks were typed."""

    #: Most bytes read of an input history (a larger one is read up to here).
    MAX_BYTES = 64 * 1024 * 1024

    def __init__(self, entries: list[tuple[datetime | None, str]]):
        self.texts = {_typed_key(text) for _moment, text in entries}
        self.times = sorted(moment for moment, _text in entries if moment is not None)

    @classmethod
    def read(cls, path: Path) -> InputHistory | None:
        """The input history at ``path``, or None when there is none (or it cannot be read)."""
        try:
            with open(path, "rb") as handle:
                raw = handle.read(cls.MAX_BYTES)
        except OSError:
            return None
        entries: list[tuple[datetime | None, str]] = []
        moment: datetime | None = None
        lines: list[str] | None = None
        for line in raw.decode("utf-8", "replace").splitlines():
            if line.startswith("# "):
                if lines is not None:
                    entries.append((moment, "\n".join(lines)))
                moment, lines = _local_time(line[2:].strip()), []
            elif line.startswith("+") and lines is not None:
                lines.append(line[1:])
        if lines is not None:
            entries.append((moment, "\n".join(lines)))
        return cls(entries) if entries else None

    def covers(self, started: datetime | None) -> bool:
        """Inputs were recorded in the day after a run started at ``started``: the history speaks for that run."""
        if started is None:
            return False
        index = bisect.bisect_left(self.times, started)
        return index < len(self.times) and self.times[index] - started <= timedelta(days=1)

    def typed(self, text: str) -> bool:
        return _typed_key(text) in self.texts


def _typed_key(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def _local_time(text: str) -> datetime | None:
    """An input history's ``YYYY-MM-DD HH:MM:SS[.ffffff]`` (this machine's local time) as aware UTC, or None."""
    try:
        return datetime.fromisoformat(text).astimezone(timezone.utc)
    except (ValueError, OverflowError, OSError):
        return None


def input_history_file(chat_history: Path) -> Path:
    """Where aider keeps the input history beside ``chat_history``: ``$AIDER_INPUT_HISTORY_FILE`` (a relative name is
    taken from the chat history's directory), else ``.aider.input.history`` in that directory."""
    named = os.environ.get("AIDER_INPUT_HISTORY_FILE")
    if named:
        path = Path(named).expanduser()
        return path if path.is_absolute() else chat_history.parent / path
    return chat_history.parent / INPUT_HISTORY_NAME


class _Parser:
    """Classifies the lines of a history file and builds the runs and their draft turns (see the module doc)."""

    def __init__(self, cwd: str, stats: HarvestStats, typed: InputHistory | None = None, *, stripped: bool = False):
        self.cwd = cwd
        self.stats = stats
        self.typed = typed
        self.stripped = stripped  # the file lost its trailing spaces (``spaces_stripped``)
        self.runs: list[_Run] = []
        self.run: _Run | None = None
        self.emit = True
        self.previous = "blank"  # kind of the line just before: blank, header, user, tool, text
        self.last = "blank"  # kind of the last line that was not blank
        self.previous_line = ""
        self.user_lines: list[str] = []
        self.block_after_reply = False  # the block being read came right after reply text
        self.tool_lines: list[str] | None = None  # a "> " message of several lines, until one ends with "  "
        self.fence_end: re.Pattern[str] | None = None  # inside a fence of a reply, until this matches
        self.in_edit = False  # inside an edit block of a reply (``<<<<<<< SEARCH`` … ``>>>>>>> REPLACE``)
        self.answer: list[str] = []
        self.answer_chars = 0
        self.reply_lines: list[str] = []  # the reply's lines while they are few enough to fingerprint exactly
        self.last_reply: str | None = None  # fingerprint of the reply just ended
        self.reset_turn()

    def reset_turn(self, turn: DraftTurn | None = None) -> None:
        self.turn = turn
        self.echo: str | None = None
        self.editor_next = False
        self.aider_next = False  # the next block is aider's prompt in the user's name (``/help``)
        self.reply_done = False
        self.api_error = False
        self.error_tool: DraftTool | None = None

    def skipped(self, reason: str) -> None:
        self.stats.messages_skipped[reason] = self.stats.messages_skipped.get(reason, 0) + 1

    # ------------------------------------------------------------------ lines

    def feed(self, line: str, offset: int) -> None:
        """One line (without its newline) that starts at byte ``offset``."""
        self._feed(line, offset)
        self.previous_line = line

    def _feed(self, line: str, offset: int) -> None:
        if self.in_edit or self.fence_end is not None:
            after = self.previous == "blank" or self.previous_line.startswith(">")
            self.previous_line = line
            if not (after and (_AFTER_REPLY.match(line) or (self.previous == "blank" and header_time(line)))):
                self._quoted_text(line)  # a file's content or code in a reply: text, whatever it looks like
                return
            self.in_edit, self.fence_end = False, None  # a reply cut or interrupted before its fence closed
        if self.tool_lines is not None:
            if self.previous == "blank" and self._is_user(line) or header_time(line) is not None or (
                    self.stripped and not line.startswith(">")):
                self._tool(" ".join(self.tool_lines))  # cut short by what is surely not aider's output
            else:
                self.tool_lines.append(line.strip())
                if line.endswith("  ") or len(self.tool_lines) > 500:
                    self._tool(" ".join(part for part in self.tool_lines if part))
                self.previous = "tool" if line.strip() else "blank"
                self.last = "tool"
                return
        if self.user_lines:
            if self._is_user(line):
                if self.stripped and self.previous == "blank" and not self.user_lines[0].startswith(
                        HELP_QUESTION) and (_command_like(self.user_lines[0]) or _command_like(line[5:])):
                    self._user_block()  # a command is a message of its own (not a line of /help's docs)
            elif self.stripped and not line.strip():
                self.previous = "blank"  # a trimmed file may part one message's lines with blank lines
                return
            else:
                self._user_block()
        if not line.strip():
            if self.answer:
                self.answer.append("")  # a reply goes on across blank lines
            self.previous = "blank"
            return
        started = header_time(line) if self.previous == "blank" else None
        if started is not None:
            self._end_answer()
            self._start_run(offset, started)
            self.previous = self.last = "header"
        elif self._is_user(line) and (self.user_lines or self.previous == "blank" and not (
                self.stripped and self.last == "text")):  # stripped: only where aider's own lines put it
            if not self.user_lines:
                self.block_after_reply = self.last == "text"
            self._end_answer()
            self.user_lines.append(line[5:-2] if line.endswith("  ") else line[5:])
            self.previous = self.last = "user"
        elif line.startswith(">") and (line.endswith("  ") or self.previous in ("tool", "user")
                                       or _AFTER_REPLY.match(line) or self.stripped and self.last != "text"):
            self._end_answer()
            text = line[1:].strip()
            if line.endswith("  "):
                self._tool(text)
            else:
                self.tool_lines = [text]
            self.previous = self.last = "tool"
        else:
            self.in_edit = _EDIT_OPEN.match(line) is not None
            self.fence_end = None if self.in_edit else _fence_end(line)
            self._text(line)
            self.previous = self.last = "text"

    def _quoted_text(self, line: str) -> None:
        """A line inside a fence or edit block of a reply; an edit block may stand inside a fence and hold fences of
        its own (a file's code blocks), so only its end marker ends it."""
        if self.in_edit:
            self.in_edit = _EDIT_CLOSE.match(line) is None
        elif _EDIT_OPEN.match(line):
            self.in_edit = True
        elif self.fence_end is not None and self.fence_end.match(line):
            self.fence_end = None
        self._text(line)
        self.previous = "blank" if not line.strip() else "text"
        self.last = "text"

    def close(self) -> None:
        if self.tool_lines is not None:
            self._tool(" ".join(self.tool_lines))
        if self.user_lines:
            self._user_block()
        self._end_answer()
        self._end_turn()
        self._end_run()

    def _is_user(self, line: str) -> bool:
        return line.startswith("####") and (len(line) == 4 or line[4] == " ") and (
            line.endswith("  ") or self.stripped)

    def _start_run(self, offset: int, started: datetime | None) -> _Run:
        self._end_turn()
        self._end_run()
        self.run = _Run(offset=offset, started_at=started)
        self.runs.append(self.run)
        return self.run

    def _end_run(self) -> None:
        """A run whose version writes a ``Tokens:`` line after its replies wrote one after every reply: a ``####``
        block right after reply text, with none between, is inside that reply (the model's words, or a file's)."""
        run = self.run
        if run is None or not run.usage_lines or not run.after_reply:
            return
        inside = {id(turn) for turn in run.after_reply}
        kept = [turn for turn in run.turns if id(turn) not in inside]
        for _ in range(len(run.turns) - len(kept)):
            self.skipped("inside_reply")
        run.turns, run.after_reply = kept, []

    def _end_turn(self) -> None:
        if self.turn is not None and self.api_error:
            self.turn.aborted = True
        self.reset_turn()

    # ------------------------------------------------------------------ the human's blocks

    def _user_block(self) -> None:
        text = "\n".join(self.user_lines).strip()
        self.user_lines = []
        after_reply, self.block_after_reply = self.block_after_reply, False
        # lines before any header: a file aider did not start (or a run whose header could not be read)
        run = self.run if self.run is not None else self._start_run(0, None)
        last_reply, self.last_reply = self.last_reply, None
        if self.editor_next or (last_reply is not None and text and _fingerprint(text) == last_reply):
            self.editor_next = False  # the architect's proposal, handed to the editor model in the user's name
            self.skipped("architect_handoff")
            return
        aider_next, self.aider_next = self.aider_next, False
        if aider_next and text.startswith(HELP_QUESTION):  # the prompt ``/help`` sends, written in the user's name
            self.skipped("aider_prompt")
            return
        confirm = _CONFIRM.match(text)
        if confirm is not None and "\n" not in text:  # a group's confirm answer, written as input
            self._confirm(confirm)
            self.skipped("confirm_answer")
            return
        if self.echo is not None and text == self.echo:
            self.echo = None
            return
        if not text or text == "<blank>":
            return
        if text.startswith(WATCH_PROMPTS):
            self.skipped("aider_prompt")
            return
        if self.typed is not None and self.typed.covers(run.started_at) and not self.typed.typed(text):
            self.skipped("not_typed")  # the input history of this run does not hold it: aider or a file wrote it
            return
        request = text
        if text.startswith(("/", "!")):
            name, arguments = resolve_command(text) if text[0] == "/" else ("run", text[1:])
            if name == "ok":
                request = f"{OK_TEXT} {arguments}".strip()
            elif name in CHAT_COMMANDS and arguments:
                request = arguments
            else:
                self.skipped("command")
                self._end_turn()
                self.aider_next = name == "help" and bool(arguments)
                return
        self._end_turn()
        run.requests += 1
        if run.requests == 1 and is_own_request(request):
            run.own_marker = True
        turn = DraftTurn(request=request, timestamp=run.started_at, cwd=self.cwd)
        if self.emit:
            run.turns.append(turn)
            if after_reply:
                run.after_reply.append(turn)
        self.reset_turn(turn)
        self.echo = request if request != text else None

    # ------------------------------------------------------------------ aider's lines

    def _tool(self, text: str) -> None:
        self.tool_lines = None
        self.echo = None
        version = _VERSION.match(text)
        if version is not None and self.run is not None:
            self.run.version = version.group(1)
        if text.startswith("Tokens:") and self.run is not None:
            self.run.usage_lines += 1
        turn, explaining, self.error_tool = self.turn, self.error_tool, None
        if turn is None:
            return
        confirm = _CONFIRM.match(text)
        if confirm is not None:
            self._confirm(confirm)
        elif text.startswith("Tokens:"):
            self.reply_done = True
        elif text.startswith("Applied edit to "):
            turn.add_tool("edit", text[len("Applied edit to "):].strip(), None)
        elif text.startswith("Running "):
            turn.add_tool("shell", text[len("Running "):].strip(), None)
        elif text.startswith(_CTRL_C):
            if not self.reply_done and not self.api_error:
                turn.interrupted = True
        elif text.startswith(API_ERRORS):
            self.api_error = True
        elif explaining is not None and explaining.error_text is not None:  # the lines that explain the error
            if text and len(explaining.error_text) < TOOL_ERROR_MAX_CHARS:
                explaining.set_error(f"{explaining.error_text}\n{text}")
            self.error_tool = explaining
        elif any(marker in text for marker in EDIT_ERRORS):
            tool = turn.tools[-1] if turn.tools and turn.tools[-1].error_text is None else None
            tool = tool or turn.add_tool("edit", "", None)
            if tool is not None:
                tool.set_error(text)
            self.error_tool = tool

    def _confirm(self, match: re.Match) -> None:
        question, answer = match.group("question"), match.group("answer").lower()[:1]
        if self.turn is None:
            return
        if question.startswith("Edit the files?") and answer in ("y", "a", ""):
            self.editor_next = True
        elif answer in ("n", "s", "d") and not question.startswith(BENIGN_QUESTIONS):
            self.turn.rejected_tool = True

    def _text(self, line: str) -> None:
        self.echo = None
        self.error_tool = None
        if not self.answer:
            self.reply_lines = []
        self.reply_lines.append(line)
        if self.turn is not None and self.answer_chars < 2 * ANSWER_MAX_CHARS:
            self.answer.append(line)
            self.answer_chars += len(line) + 1
        elif not self.answer:
            self.answer.append(line)  # a reply with no turn still ends (its fingerprint is kept)

    def _end_answer(self) -> None:
        """Aider's line, the human's block or a header ends a reply: it replaces the turn's answer so far."""
        if not self.answer:
            return
        text = "\n".join(self.answer).strip()
        self.last_reply = _fingerprint("\n".join(self.reply_lines))
        self.answer, self.answer_chars, self.reply_lines = [], 0, []
        if self.turn is not None and text:
            self.turn.set_answer(text, None)
            self.reply_done = False
            self.api_error = False


def _last_header_before(path: Path, offset: int) -> int | None:
    """Byte offset of the last ``# aider chat started at`` line that starts before ``offset`` (None: none)."""
    position = offset
    with open(path, "rb") as handle:
        while position > 0:
            start = max(0, position - READ_CHUNK)
            handle.seek(start)
            chunk = handle.read(position - start + len(_HEADER_BYTES))[: offset - start]
            found = chunk.rfind(_HEADER_BYTES)
            if found != -1:
                return start + found + 1
            if start == 0:
                return 0 if chunk.startswith(_HEADER_BYTES[1:]) else None
            position = start
    return None


def _command_like(text: str) -> bool:
    return text.lstrip().startswith(("/", "!"))


#: Fewest ``#### `` lines from which a file whose lines lost their two trailing spaces is recognised.
STRIPPED_MIN_LINES = 3


def spaces_stripped(path: Path, start: int) -> bool:
    """True when the history from byte ``start`` lost the two trailing spaces aider writes after every ``#### `` line
    (``aider/io.py`` ``user_input`` with ``linebreak=True``, in every version): most of its ``#### `` lines end
    without them, as when an editor, a pre-commit hook or ``git --whitespace=fix`` trimmed the file before it was
    committed. Such a file's typed blocks are told apart by where aider writes them (module docstring)."""
    lines = spaced = 0
    with open(path, "rb") as handle:
        handle.seek(start)
        for raw in handle:
            if raw.startswith(b"#### "):
                lines += 1
                spaced += raw.rstrip(b"\r\n").endswith(b"  ")
    return lines >= STRIPPED_MIN_LINES and 2 * spaced < lines


def _read(path: Path, parser: _Parser, start: int, stop: int | None, stats: HarvestStats | None) -> int:
    """Feed complete lines from byte ``start`` (up to ``stop``) to ``parser``; returns the offset after them."""
    offset = start
    with open(path, "rb") as handle:
        handle.seek(start)
        for raw in handle:
            if not raw.endswith(b"\n") or (stop is not None and offset >= stop):
                break
            if stats is not None:
                stats.bytes_read += len(raw)
            parser.feed(raw.decode("utf-8", "replace").rstrip("\r\n"), offset)
            offset += len(raw)
            if stop is not None and parser.run is not None and parser.run.requests:
                break  # the head of a run: its first request is all that is needed
    return offset


# --------------------------------------------------------------------------- harvest


def harvest_aider(root: Path, context: HarvestContext, stats: HarvestStats) -> list[Session]:
    """Harvest the aider chat history at ``root`` (a project directory holding ``.aider.chat.history.md``, or the
    history file itself). Updates ``stats`` and ``context.new_checkpoints`` (key: the file's absolute path). Returns
    one ``Session`` per run that holds at least one request, in file order. A bad file never raises."""
    path = history_file(root)
    if not path.exists():
        return []
    return read_isolated(path, context, stats, _harvest_history) or []


def _harvest_history(path: Path, context: HarvestContext, stats: HarvestStats) -> list[Session]:
    cwd = os.path.normpath(str(path.parent))
    plan = plan_read(path, context, stats)
    if plan is None:
        return []
    if plan.action == "unchanged":
        stats.files_unchanged += 1
        context.new_checkpoints[plan.key] = plan.previous  # type: ignore[assignment]
        return []
    if plan.action == "too_old" or not context.in_scope(cwd):
        stats.skip("too_old" if plan.action == "too_old" else "out_of_scope")
        context.new_checkpoints[plan.key] = FileCheckpoint(size=plan.size, mtime_ns=plan.mtime_ns, offset=plan.size)
        return []
    if plan.grown:
        stats.files_grown += 1
    typed = InputHistory.read(input_history_file(path))
    try:
        stripped = spaces_stripped(path, plan.start)
        parser = _Parser(cwd, stats, typed, stripped=stripped)
        header = _last_header_before(path, plan.start) if plan.start > 0 else None
        if header is not None:  # the run the new lines continue: its time, version and first request
            head = _Parser(cwd, HarvestStats(), typed, stripped=stripped)
            head.emit = False
            _read(path, head, header, plan.start, None)
            head.close()
            if head.runs:
                parser.run = head.runs[-1]
                parser.runs.append(parser.run)
        offset = _read(path, parser, plan.start, None, stats)
        parser.close()
    except OSError:
        stats.skip("unreadable")
        if plan.previous is not None:
            context.new_checkpoints[plan.key] = plan.previous
        return []
    runs = parser.runs
    context.new_checkpoints[plan.key] = FileCheckpoint(
        size=plan.size, mtime_ns=plan.mtime_ns, offset=offset,
        session_id=session_id(path, runs[-1].offset) if runs else None)
    if plan.start == 0 and not runs and offset > 0:
        stats.skip("not_a_session")
        return []
    sessions = []
    for index, run in enumerate(runs):
        if run.own_marker:
            stats.skip("own_marker")
            continue
        ended = runs[index + 1].started_at if index + 1 < len(runs) else None
        turns, dropped = finish_turns(run.turns, context, run.started_at or file_mtime(plan), stats)
        if not turns:
            if run.turns or plan.start == 0 or index > 0:
                stats.skip("too_old" if dropped else "no_requests")
            continue
        stats.sessions_harvested += 1
        stats.requests += len(turns)
        sessions.append(Session(source=SOURCE, session_id=session_id(path, run.offset), path=str(path), cwd=cwd,
                                version=run.version, started_at=run.started_at,
                                ended_at=ended or file_mtime(plan), turns=turns))
    return sessions
