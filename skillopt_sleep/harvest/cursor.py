"""Cursor harvester: the user's own requests, and what followed each, from Cursor agent transcripts.

Layout, under ``~/.cursor`` (``default_root``): ``projects/<folder>/agent-transcripts/`` where ``<folder>`` is the
workspace path with every run of characters outside ASCII ``[A-Za-z0-9]`` turned into one ``-`` and the dashes at
both ends dropped (lossy: ``/Users/karuo/Documents/开发/2、私域银行/神射手`` becomes ``Users-karuo-Documents-2``,
the real fixture's folder). Two transcript versions, one session per file:

* ``<id>.txt`` (older, plain text; real fixture ``fnvtk__karuo-ai__cf7a11df….txt``): ``user:`` / ``assistant:``
  lines open blocks (at the top of the file or after a blank line); assistant blocks hold text, reasoning as
  ``<think>…</think>``, ``[Tool call] Name`` followed by ``  key: value`` argument lines (a multi-line value goes on
  without indent) and ``[Tool result] Name`` lines without output. No times, ids or model names. Authorship is the
  format's structure: a block opens only at the top level (not inside reasoning, a tool call's arguments before its
  ``[Tool result]`` line, a code block of the reply, or an open tag section of a user block), and a user block is
  tag sections only (``<user_query>…``): a "block" with other lines is what a file or the reply quoted, and goes back
  to the assistant block it was found in.
* ``<id>/<id>.jsonl`` (newer; schema fixtures ``jazzyalex__…stage0-cursor-*``): lines ``{"role": "user" |
  "assistant", "message": {"content": [text | tool_use | tool_result | thinking blocks]}}`` and
  ``{"type": "turn_ended", "status": …}``. Sub-agent transcripts lie in ``<id>/subagents/`` and are skipped
  (``subagent``); when ``<id>.txt`` and a JSONL of the same id both exist, only the JSONL is read.

A request is the body of the ``<user_query>…</user_query>`` envelope of a user message (``query_envelope``: it opens at
the first ``<user_query>`` at the top level and closes at the last ``</user_query>``); everything around it
(``<attached_files>``, ``<manually_attached_skills>``, ``<timestamp>``, rules, images) is injected context. Cursor
writes its own follow-ups inside the same envelope ("Briefly inform the user about the task result…", "The
beginning of the above subagent result…", context summaries): never requests. A user message without the envelope
is a request only while the file has shown no envelope (the trimmed schema fixtures); once one is seen, such
messages are runtime text. Tool results, thinking and the agent's text never are. What follows a request: the
last assistant text (``<think>`` removed), tool calls with an argument head, tool errors (JSONL ``is_error``),
``turn_ended`` with status ``error`` (``aborted``) or a cancel status (``interrupted``; not seen in a real file).
The ``.txt`` format has no tool output, so it shows no tool errors, interrupts or rejections.

Times: a ``<timestamp>Friday, Jul 17, 2026, 6:10 PM (UTC+10)</timestamp>`` tag in the message when present (seen
in public Cursor transcript exports, not in the fixtures), else the file's modification time.

Scope: the folder name is compared with each project root turned into a folder name the same way; a folder that
continues a root's name with ``-…`` is in scope when it names an existing directory below the root (found on
disk), never a sibling such as ``<root>-old``. ``Session.cwd`` is that root or directory; an unmatched folder is
``out_of_scope`` (scope ``all`` keeps it, with cwd None).

Checkpoints: JSONL files are read from the stored byte offset (``reader.read_planned_file``); a rewritten (shrunk)
file is read again from the start (Cursor replaces a transcript with a lone ``turn_ended`` error line when usage
runs out). For ``.txt`` files ``FileCheckpoint.offset`` is the number of complete user blocks already harvested:
the file is parsed again and only later blocks become turns (a last user block whose ``</user_query>`` is not yet
written waits for the next night). A ``.txt`` older than the first night's lookback is still read once, to count
its blocks.

Not read: the cursor-agent CLI store ``chats/<md5(cwd)>/<agentId>/store.db`` (SQLite ``meta`` + content-addressed
``blobs``; no real store was available to build a fixture from, so its layout is unverified). Each store whose
agent id has no agent transcript is counted once as ``unsupported_format`` (``out_of_scope`` when its md5 folder
matches no project root). The IDE's ``state.vscdb`` chat stores are not read either.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

from skillopt_sleep.errors import HarvestError
from skillopt_sleep.harvest.read_plan import (
    HarvestContext,
    checkpoint_unread,
    file_mtime,
    keep_previous_checkpoint,
    kept_unchanged,
    lists_sessions,
    plan_read,
    read_isolated,
)
from skillopt_sleep.harvest.reader import TranscriptParser, read_planned_file
from skillopt_sleep.harvest.turns import (
    ANSWER_MAX_CHARS,
    DraftTool,
    DraftTurn,
    compact_json,
    harvested_turns,
    text_of_blocks,
)
from skillopt_sleep.models import FileCheckpoint, HarvestStats, Session

SOURCE = "cursor"

QUERY_OPEN, QUERY_CLOSE = "<user_query>", "</user_query>"
CONTROL_QUERIES = (
    "Briefly inform the user about the task result",
    "The beginning of the above subagent result is already visible to the user",
    "Your conversation was summarized due to context constraints",
)
"""Text Cursor writes in the user's name (inside ``<user_query>`` too): never a request."""
CANCEL_STATUSES = frozenset({"cancelled", "canceled", "aborted", "interrupted", "stopped", "user_cancelled"})
ERROR_STATUSES = frozenset({"error", "failed", "failure"})
_ARG_CHARS = 1_000
"""Characters kept of one ``.txt`` tool argument (only the head of a tool input is stored)."""

_NON_ALNUM = re.compile(r"[^A-Za-z0-9]+")
_ARG_LINE = re.compile(r"  ([A-Za-z_][A-Za-z0-9_]*):(?: (.*))?$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_TAG_LINE = re.compile(r"^<(?P<tag>[A-Za-z_][\w-]*)(?:\s[^>]*)?>")
_TIMESTAMP = re.compile(
    r"<timestamp>\s*(?:[A-Za-z]+,\s*)?([A-Za-z]{3})[A-Za-z]*\.?\s+(\d{1,2}),\s*(\d{4}),?\s+(\d{1,2}):(\d{2})"
    r"\s*([AaPp][Mm])\s*\(\s*(?:UTC|GMT)\s*(?:([+-])(\d{1,2})(?::?(\d{2}))?)?\s*\)\s*</timestamp>")
_MONTHS = {name: number for number, name in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1)}


def default_root() -> Path:
    """``~/.cursor`` (absolute): agent transcripts under ``projects/``, cursor-agent stores under ``chats/``.
    No environment variable moves them (``CURSOR_CONFIG_DIR`` relocates only ``cli-config.json``)."""
    return (Path.home() / ".cursor").absolute()


def project_folder_name(path: str) -> str:
    """The ``projects/`` folder name Cursor derives from a workspace path (runs of non-alphanumerics -> ``-``)."""
    return _NON_ALNUM.sub("-", path).strip("-")


def _fold(name: str) -> str:
    return name.casefold() if os.name == "nt" else name  # Cursor lower-cases a Windows drive letter


# --------------------------------------------------------------------------- listing


@dataclass
class CursorFiles:
    """The files under a Cursor root: ``mains`` as ``(project folder name, transcript)``, sorted by path."""

    mains: list[tuple[str, Path]] = field(default_factory=list)
    subagents: list[Path] = field(default_factory=list)
    stores: list[Path] = field(default_factory=list)


def _scandir(path: Path) -> list[os.DirEntry]:
    try:
        return sorted(os.scandir(path), key=lambda entry: entry.name)
    except OSError:
        return []


def list_files(root: Path) -> CursorFiles:
    """Find the agent transcripts, sub-agent transcripts and cursor-agent stores under ``root``. Raises
    HarvestError when ``root/projects`` exists but cannot be listed."""
    found = CursorFiles()
    projects = root / "projects"
    try:
        folders = [entry for entry in os.scandir(projects) if entry.is_dir(follow_symlinks=False)]
    except FileNotFoundError:
        folders = []
    except OSError as error:
        raise HarvestError(f"cannot list Cursor transcripts in {projects}: {error.strerror}; "
                           "fix the permissions or point the Cursor root elsewhere") from error
    for folder in folders:
        texts: dict[str, Path] = {}
        jsonl: dict[str, Path] = {}
        for entry in _scandir(Path(folder.path) / "agent-transcripts"):
            name = entry.name
            if entry.is_dir(follow_symlinks=False):
                main = Path(entry.path) / f"{name}.jsonl"
                if main.exists():
                    jsonl[name] = main
                subagents = Path(entry.path) / "subagents"
                if subagents.is_dir():
                    found.subagents.extend(sorted(subagents.rglob("*.jsonl")))
            elif name.endswith(".txt"):
                texts[name[:-4]] = Path(entry.path)
            elif name.endswith(".jsonl"):
                jsonl.setdefault(name[:-6], Path(entry.path))
        for path in {**texts, **jsonl}.values():  # the JSONL of an id wins over its .txt
            found.mains.append((folder.name, path))
    for workspace in _scandir(root / "chats"):
        if workspace.is_dir(follow_symlinks=False):
            for agent in _scandir(Path(workspace.path)):
                store = Path(agent.path) / "store.db"
                if agent.is_dir(follow_symlinks=False) and store.is_file():
                    found.stores.append(store)
    found.mains.sort(key=lambda item: item[1])
    return found


def has_sessions(root: Path) -> bool:
    """True when ``root`` holds at least one agent transcript or cursor-agent store. Never raises."""

    def listed() -> bool:
        files = list_files(root)
        return bool(files.mains or files.stores)

    return lists_sessions(listed)


# --------------------------------------------------------------------------- scope


def folder_cwd(folder: str, context: HarvestContext, cache: dict[str, str | None]) -> str | None:
    """The project root (or directory below it) that the projects/ ``folder`` names, or None."""
    if folder in cache:
        return cache[folder]
    name = _fold(project_folder_name(folder))
    found = None
    for root in context.roots:
        slug = _fold(project_folder_name(root))
        if not slug:
            continue
        if name == slug:
            found = root
        elif name.startswith(slug + "-"):
            found = _directory_below(root, name[len(slug) + 1:], [200])
        if found:
            break
    cache[folder] = found
    return found


def _directory_below(directory: str, rest: str, budget: list[int]) -> str | None:
    """A directory below ``directory`` whose path after it folds to ``rest`` (at most ``budget`` listings)."""
    if budget[0] <= 0:
        return None
    budget[0] -= 1
    for entry in _scandir(Path(directory)):
        if not entry.is_dir(follow_symlinks=False):
            continue
        slug = _fold(project_folder_name(entry.name))
        if slug and slug == rest:
            return entry.path
        if slug and rest.startswith(slug + "-"):
            below = _directory_below(entry.path, rest[len(slug) + 1:], budget)
            if below:
                return below
    return None


# --------------------------------------------------------------------------- messages


def message_time(text: str) -> datetime | None:
    """The UTC time of a ``<timestamp>Friday, Jul 17, 2026, 6:10 PM (UTC+10)</timestamp>`` tag, or None."""
    match = _TIMESTAMP.search(text)
    if match is None:
        return None
    month, day, year, hour, minute, half, sign, off_hours, off_minutes = match.groups()
    number = _MONTHS.get(month.lower())
    hour_of_day = int(hour) % 12 + (12 if half.lower() == "pm" else 0)
    offset = timedelta(hours=int(off_hours or 0), minutes=int(off_minutes or 0))
    try:
        local = datetime(int(year), number or 0, int(day), hour_of_day, int(minute),
                         tzinfo=timezone(-offset if sign == "-" else offset))
    except (ValueError, OverflowError):
        return None
    return local.astimezone(timezone.utc)


_SECTION = re.compile(r"(?m)^[ \t]*<(?P<tag>[A-Za-z_][\w-]*)(?:\s[^>\n]*)?>")


def query_envelope(text: str) -> tuple[int, int] | None:
    """``(start, end)`` of the body of a user message's ``<user_query>`` envelope, or None when it has none.

    Cursor writes a user message as tag sections at line starts (``<attached_files>…</attached_files>``, then the
    ``<user_query>`` that wraps what the user typed). The envelope opens at the first ``<user_query>`` at the top
    level (the sections before it are passed over whole: a file they hold may hold the tags) and closes at the last
    ``</user_query>``: a paste of the user's own that holds the tags stays inside it."""
    close = text.rfind(QUERY_CLOSE)
    if close == -1:
        return None
    position = 0
    for match in _SECTION.finditer(text):
        if match.start() < position:
            continue
        if match.group("tag") == QUERY_OPEN[1:-1]:
            return (match.end(), close) if match.end() <= close else None
        end = text.find(f"</{match.group('tag')}>", match.end())
        if end == -1:
            return None
        position = end
    return None


def user_request(text: str, envelopes_seen: bool) -> tuple[str | None, bool, datetime | None]:
    """Split a user message into ``(request or None, holds an envelope, time of its <timestamp> tag)``."""
    envelope = query_envelope(text)
    if envelope is None:
        if envelopes_seen or QUERY_OPEN in text or QUERY_CLOSE in text:
            return None, envelopes_seen, None
        stripped = text.strip()
        if not stripped or stripped.startswith(("<", *CONTROL_QUERIES)):
            return None, False, None
        return stripped, False, None
    start, close = envelope
    body = text[start:close].strip()
    stamp = message_time(text[:start] + text[close:])
    if not body or body.startswith(CONTROL_QUERIES):
        return None, True, stamp
    return body, True, stamp


class Conversation(TranscriptParser):
    """Draft turns of one transcript, fed message by message by the ``.txt`` or the JSONL reader."""

    def __init__(self, cwd: str | None, fallback_time: datetime, stats: HarvestStats):
        super().__init__(stats)
        self.cwd = cwd
        self.fallback_time = fallback_time
        self.envelopes = False
        self.records = 0

    def user(self, text: str, emit: bool = True) -> None:
        """A user message: a new turn when it holds a request (``emit`` False: an already harvested one)."""
        request, envelope, stamp = user_request(text, self.envelopes)
        self.envelopes = self.envelopes or envelope
        if request is None:
            return
        if not self.note_request(request) or not emit:
            self.current = None
            return
        self.current = DraftTurn(request=request, timestamp=stamp or self.fallback_time, cwd=self.cwd)
        self.turns.append(self.current)

    def answer(self, text: str, message_id: object) -> None:
        if self.current is not None and not self.head_mode:
            self.current.set_answer(text.strip(), message_id)

    def tool(self, name: str, input_text: str, call_id: object) -> DraftTool | None:
        if self.current is None or self.head_mode:
            return None
        return self.current.add_tool(name, input_text, call_id if isinstance(call_id, str) else None)

    # ------------------------------------------------------------------ JSONL records

    def feed(self, record: dict) -> None:
        """One JSONL record (the ``parser.feed`` of ``reader.read_planned_file``)."""
        self.records += 1
        role = record.get("role")
        if self.records == 1 and role not in ("user", "assistant") and record.get("type") != "turn_ended":
            self.not_a_session = True  # a JSON Lines file, but not a Cursor transcript
            return
        message = record.get("message")
        content = message.get("content") if isinstance(message, dict) else record.get("content")
        if role == "user":
            self._user_record(content)
        elif role == "assistant":
            self._assistant_record(content)
        elif record.get("type") == "turn_ended":
            status = str(record.get("status") or "").lower()
            if self.current is not None and not self.head_mode:
                if status in CANCEL_STATUSES:
                    self.current.interrupted = True
                elif status in ERROR_STATUSES:
                    self.current.aborted = True
        else:
            self.stats.records_unknown += 1

    def _user_record(self, content: object) -> None:
        results = [block for block in content if isinstance(block, dict) and block.get("type") == "tool_result"] \
            if isinstance(content, list) else []
        if not results:
            self.user(text_of_blocks(content))
            return
        current = self.current  # tool output, never the user's words: only its errors are kept
        for block in results:
            if block.get("is_error") is True and current is not None and current.tools and not self.head_mode:
                call_id, body = block.get("tool_use_id"), block.get("content")
                tool = current.tools_by_id.get(call_id) if isinstance(call_id, str) else None
                (tool or current.tools[-1]).set_error(body if isinstance(body, str) else text_of_blocks(body))

    def _assistant_record(self, content: object) -> None:
        if isinstance(content, str):
            self.answer(content, self.records)
            return
        if not isinstance(content, list):
            return
        texts = []
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif block.get("type") == "tool_use":
                self.tool(str(block.get("name") or "unknown"), compact_json(block.get("input")), block.get("id"))
        if texts:
            self.answer("\n".join(texts), self.records)


# --------------------------------------------------------------------------- the .txt format


class _AssistantBlock:
    """One ``assistant:`` block of a ``.txt`` transcript, read line by line."""

    def __init__(self, conversation: Conversation, number: int):
        self.conversation = conversation
        self.number = number
        self.thinking = False
        self.text: list[str] = []
        self.text_chars = 0
        self.region = "text"  # text, then tool (arguments) / result
        self.tool_name: str | None = None
        self.arguments: dict[str, str] = {}
        self.argument: str | None = None
        self.pending = 0  # tool calls whose ``[Tool result]`` line has not come yet
        self.fence: str | None = None  # the fence of an open code block in the text

    def top_level(self) -> bool:
        """Not inside reasoning, a tool call's arguments or a code block: where Cursor may open the next block."""
        return not self.thinking and not self.pending and self.fence is None

    def line(self, line: str) -> None:
        line = self._visible(line)
        if line is None:
            return
        if self.region == "text" and (self.fence is not None or _FENCE.match(line)):
            self._fence(line)
        elif line.startswith("[Tool call] "):
            self._close_tool()
            self.region, self.tool_name = "tool", line[12:].strip() or "unknown"
            self.pending += 1
            return
        elif line.startswith("[Tool result] "):
            self._close_tool()
            self.region = "result"
            self.pending = max(0, self.pending - 1)
            return
        if self.region == "text":
            if not line.startswith("[Thinking]") and self.text_chars < 2 * ANSWER_MAX_CHARS:
                self.text.append(line)
                self.text_chars += len(line) + 1
        elif self.region == "tool":
            match = _ARG_LINE.match(line)
            if match is not None:
                self.argument = match.group(1)
                self.arguments[self.argument] = match.group(2) or ""
            elif self.argument is not None and len(self.arguments[self.argument]) < _ARG_CHARS:
                self.arguments[self.argument] += "\n" + line  # a multi-line value goes on without indent

    def _fence(self, line: str) -> None:
        """Open or close a code block of the text (a closing fence: only the opening's characters, as many or more)."""
        match = _FENCE.match(line)
        if self.fence is None:
            self.fence = match.group(1) if match else None
        elif match and line.strip() == match.group(1) and match.group(1)[0] == self.fence[0] \
                and len(match.group(1)) >= len(self.fence):
            self.fence = None

    def _visible(self, line: str) -> str | None:
        """``line`` without its ``<think>…</think>`` parts (None when it was all reasoning)."""
        if not self.thinking and "<think>" not in line:
            return line
        kept, rest = [], line
        while rest:
            if self.thinking:
                end = rest.find("</think>")
                if end == -1:
                    break
                rest, self.thinking = rest[end + 8:], False
            else:
                start = rest.find("<think>")
                if start == -1:
                    kept.append(rest)
                    break
                kept.append(rest[:start])
                rest, self.thinking = rest[start + 7:], True
        visible = "".join(kept)
        return visible if visible.strip() else None

    def _close_tool(self) -> None:
        if self.tool_name is not None:
            arguments = {key: value[:_ARG_CHARS].rstrip() for key, value in self.arguments.items()}
            self.conversation.tool(self.tool_name, compact_json(arguments), None)
        self.tool_name, self.arguments, self.argument = None, {}, None

    def close(self) -> None:
        self._close_tool()
        text = "\n".join(self.text).strip()
        if text:
            self.conversation.answer(text, ("txt", self.number))


class _TxtReader:
    """Splits a ``.txt`` transcript into blocks the way Cursor writes them. ``assistant:`` after a blank line (or at the
    top) opens an assistant block, and ``user:`` a user block when the next line opens a tag (``<user_query>``,
    ``<attached_files>``, ...); both only at the top level: never inside the assistant's reasoning, a tool call's
    arguments (until its ``[Tool result]`` line) or a code block of its text, and never inside an open tag section of a
    user block. A user block holds tag sections only: one that holds anything else is not a block Cursor wrote (a
    written file's or a quoted transcript's ``user:`` lines), and its lines go back to the assistant block they were
    found in."""

    def __init__(self, conversation: Conversation, harvested: int):
        self.conversation = conversation
        self.harvested = harvested
        self.user_blocks = 0
        self.blocks = 0
        self.user_lines: list[str] | None = None
        self.open_tag: str | None = None  # the tag section a user block is inside
        self.tags_only = True  # every line of the user block so far lies in a tag section
        self.assistant: _AssistantBlock | None = None
        self.before_user: _AssistantBlock | None = None  # the assistant block a user block follows, until it proves
        self.foreign = False

    def lines(self, lines) -> None:
        previous_blank, pending_user = True, False
        for line in lines:
            if pending_user:
                pending_user = False
                if line.startswith("<"):
                    self._open(None)
                    self._add(line)
                    previous_blank = False
                    continue
                self._add("user:")
            top = self._top_level()
            if previous_blank and top and line == "assistant:":
                self._open(_AssistantBlock(self.conversation, self.blocks + 1))
            elif previous_blank and top and line == "user:":
                pending_user = True
            else:
                self._add(line)
            if self.foreign:
                return
            previous_blank = not line.strip()
        if pending_user:
            self._add("user:")
        self._open(None, final=True)

    def _top_level(self) -> bool:
        if self.user_lines is not None:
            return self.open_tag is None
        return self.assistant is None or self.assistant.top_level()

    def _add(self, line: str) -> None:
        if self.user_lines is not None:
            self.user_lines.append(line)
            if self.open_tag is not None:
                if f"</{self.open_tag}>" in line:
                    self.open_tag = None
            elif line.strip():
                tag = _TAG_LINE.match(line)
                if tag is None:
                    self.tags_only = False
                elif f"</{tag.group('tag')}>" not in line[tag.end():]:
                    self.open_tag = tag.group("tag")
        elif self.assistant is not None:
            self.assistant.line(line)
        elif line.strip():
            self.foreign = True  # text before any block: not a Cursor transcript

    def _open(self, assistant: _AssistantBlock | None, final: bool = False) -> None:
        """Close the current block and start the next (an assistant block, or a user block when None)."""
        current = self.assistant
        if self.user_lines is not None:
            current = None
            if self.tags_only and (self.open_tag is None or final):
                if self.before_user is not None:
                    self.before_user.close()
                text = "\n".join(self.user_lines)
                if not (final and QUERY_OPEN in text and QUERY_CLOSE not in text):  # else still being written
                    self.conversation.user(text, emit=self.user_blocks >= self.harvested)
                    self.user_blocks += 1
            elif self.before_user is not None:  # not a block Cursor wrote: its lines go back where they were found
                for line in ["user:", *self.user_lines]:
                    self.before_user.line(line)
                current = self.before_user
            self.user_lines, self.before_user = None, None
        self.assistant = None
        if final or assistant is not None:
            if current is not None:
                current.close()
        else:  # a user block starts; the assistant block it follows closes once the user block proves Cursor's
            self.before_user = current
            self.user_lines, self.open_tag, self.tags_only = [], None, True
        if not final:
            self.blocks += 1
            self.assistant = assistant


def read_txt(path: Path, conversation: Conversation, harvested: int, stats: HarvestStats) -> tuple[int, bool]:
    """Feed the blocks of a ``.txt`` transcript to ``conversation``; user blocks before ``harvested`` (their
    count) make no turn. Returns ``(complete user blocks, whether the file is a Cursor transcript)``; a last user
    block whose ``</user_query>`` is not written yet is not counted (it is read again next time)."""
    reader = _TxtReader(conversation, harvested)
    with open(path, "rb") as handle:

        def lines():
            for raw in handle:
                stats.bytes_read += len(raw)
                yield raw.decode("utf-8", "replace").rstrip("\r\n")

        reader.lines(lines())
    return reader.user_blocks, reader.blocks > 0 and not reader.foreign


# --------------------------------------------------------------------------- harvest


def harvest_cursor(root: Path, context: HarvestContext, stats: HarvestStats) -> list[Session]:
    """Harvest the Cursor agent transcripts under ``root`` (see ``default_root``); updates ``stats`` and
    ``context.new_checkpoints``. Returns the sessions holding at least one request, in path order. A bad file
    never raises: it is counted (``unreadable``, ``not_a_session``, malformed lines) and keeps its checkpoint."""
    files = list_files(root)
    for path in files.subagents:
        checkpoint_unread(path, context, stats, "subagent")
    transcript_ids = {path.stem for _folder, path in files.mains}
    hashes = {hashlib.md5(spelling.encode("utf-8")).hexdigest() for spelling in context.roots}
    for store in files.stores:
        if store.parent.name not in transcript_ids:
            in_scope = context.scope_all or store.parent.parent.name in hashes
            checkpoint_unread(store, context, stats, "unsupported_format" if in_scope else "out_of_scope")
    sessions: list[Session] = []
    cache: dict[str, str | None] = {}
    for folder, path in files.mains:
        cwd = folder_cwd(folder, context, cache)
        if cwd is None and not context.scope_all:
            checkpoint_unread(path, context, stats, "out_of_scope")
            continue
        read_one = functools.partial(_harvest_txt if path.suffix == ".txt" else _harvest_jsonl, cwd=cwd)
        session = read_isolated(path, context, stats, read_one)
        if session is not None:
            sessions.append(session)
    return sessions


def _session(path: Path, session_id: str, cwd: str | None, turns: list, plan) -> Session:
    return Session(source=SOURCE, session_id=session_id, path=str(path), cwd=cwd, started_at=turns[0].timestamp,
                   ended_at=file_mtime(plan), turns=turns)


def _harvest_jsonl(path: Path, context: HarvestContext, stats: HarvestStats, cwd: str | None) -> Session | None:
    plan = plan_read(path, context, stats)
    if plan is None:
        return None
    conversation = Conversation(cwd, file_mtime(plan), stats)
    read = read_planned_file(path, plan, conversation, context, stats, peek=None, default_session_id=path.stem)
    return None if read is None else _session(path, read[1], cwd, read[0], plan)


def _harvest_txt(path: Path, context: HarvestContext, stats: HarvestStats, cwd: str | None) -> Session | None:
    plan = plan_read(path, context, stats)
    if plan is None or kept_unchanged(plan, context, stats):
        return None
    previous = plan.previous
    if previous is not None and plan.size != previous.size:
        stats.files_grown += 1
    too_old = plan.action == "too_old"  # still read once, to count its user blocks
    conversation = Conversation(cwd, file_mtime(plan), stats)
    try:
        harvested = 1 << 62 if too_old else previous.offset if previous is not None else 0
        count, is_session = read_txt(path, conversation, harvested, stats)
    except OSError:
        stats.skip("unreadable")
        keep_previous_checkpoint(plan, context)
        return None
    context.new_checkpoints[plan.key] = FileCheckpoint(size=plan.size, mtime_ns=plan.mtime_ns,
                                                       offset=count, session_id=path.stem)
    reason = ("too_old" if too_old else "not_a_session" if not is_session
              else "own_marker" if conversation.own_marker else None)
    if reason is not None:
        stats.skip(reason)
        return None
    turns = harvested_turns(conversation.turns, context, file_mtime(plan), stats)
    if turns is None:
        return None
    return _session(path, path.stem, cwd, turns, plan)
