"""Claude Code harvester: the user's own requests, and what followed each, from Claude Code session transcripts.

Format: JSON Lines, one record per line, under ``$CLAUDE_CONFIG_DIR`` (or ``~/.claude``)
``projects/<sanitized-cwd>/<sessionId>.jsonl``. Handled versions (see ``shared/FORMATS.md`` §1):

* 1.0.x (1.0.98, 1.0.108): sub-agent records inline in the main file with ``isSidechain: true`` (excluded);
  ``summary`` title lines.
* 2.0.x (2.0.46, 2.0.67): sub-agents in sibling ``agent-<id>.jsonl`` files (excluded, counted ``subagent``).
* 2.1.x (2.1.37 ... 2.1.2xx): sub-agents in ``<sessionId>/subagents/`` (excluded, counted ``subagent``);
  ``progress``/``attachment``/``last-prompt`` and the other newer record types; ``entrypoint: "sdk-cli"`` marks a
  headless SDK run (excluded unless ``include_sdk_sessions``, counted ``sdk_cli``).

What counts as a request (``Turn``): a main-chain ``user`` record with text, not ``isMeta``/``isCompactSummary``/
``isVisibleInTranscriptOnly``, holding no ``tool_result``, and not injected text (``<local-command-*>``,
``<task-notification>``, ``<agent-notification>``, ``<system-reminder>``, ``<bash-*>``, ``Caveat:``, ``This session
is being continued``, interrupt markers; a ``<system-reminder>`` block inside a typed message is cut out). A slash
command or skill becomes ``/name args`` (kind ``command``) with its expansion (the ``isMeta`` record that follows)
as ``command_body``; session-control built-ins
(``CONTROL_COMMANDS``: /exit, /clear, /model, /compact, /resume, /config, /cost, /login, /help, ...) are not tasks,
while the built-ins that make the agent do work (/init, /review, /security-review, /pr-comments) are.
``Implement the following plan:`` is a task of kind ``plan``.

What follows a request, up to the next one: the final answer (text of the last non-``<synthetic>`` assistant message,
streamed records merged by ``message.id``), tool uses with errors (``is_error`` or ``Exit code N``), user tool
rejections (``rejected_tool`` and the feedback after "the user said:"), ``[Request interrupted by user...]``
(``interrupted`` on the turn it interrupts), ``queue-operation`` enqueues (``queued_messages``; notifications of
background agents and registrations of background tasks that arrive the same way are not the user's and are dropped)
and the number of tool calls.
Records are taken in file order (the ``parentUuid`` graph is not rebuilt: rewinds keep both branches).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import orjson

from skillopt_sleep.errors import HarvestError
from skillopt_sleep.harvest.control_commands import CONTROL_COMMANDS
from skillopt_sleep.harvest.read_plan import HarvestContext, checkpoint_unread, lists_sessions, plan_read
from skillopt_sleep.harvest.reader import SKIP, TranscriptParser, read_planned_file
from skillopt_sleep.harvest.turns import DraftTurn, compact_json, parse_timestamp, text_of_blocks
from skillopt_sleep.harvest.workers import read_files
from skillopt_sleep.models import HarvestStats, Session

SOURCE = "claude"

INJECTED_PREFIXES = (
    "<local-command-caveat>", "<local-command-stdout>", "<local-command-stderr>", "<task-notification>",
    "<agent-notification>", "<system-reminder>", "This session is being continued", "Caveat:", "<bash-input>",
    "<bash-stdout>", "<bash-stderr>", "<user-prompt-submit-hook>", "<command-stdout>", "<command-stderr>",
)
"""Text that Claude Code puts into ``user`` records (and queued messages) but the user did not type as a request."""
_REMINDER_BLOCK = re.compile(r"<system-reminder>.*?(?:</system-reminder>|\Z)", re.DOTALL)
"""A reminder block Claude Code appends to a message the user typed (removed; the rest is the user's)."""
_IDE_BLOCK = re.compile(r"<(ide_opened_file|ide_selection|ide_diagnostics)>.*?(?:</\1>|\Z)", re.DOTALL)
"""What Claude Code's IDE integration adds to a message (the file the user has open, the lines selected in it, the
editor's diagnostics): a file's text, never the user's (removed; the rest is the user's)."""

INTERRUPT_PREFIX = "[Request interrupted by user"
REJECTION_TEXT = "The user doesn't want to proceed with this tool use"
FEEDBACK_MARKER = "the user said:"
PLAN_PREFIX = "Implement the following plan:"

KNOWN_TYPES = frozenset({
    "user", "assistant", "system", "progress", "queue-operation", "file-history-snapshot", "summary", "last-prompt",
    "attachment", "permission-mode", "mode", "agent-name", "custom-title", "ai-title", "pr-link", "frame-link",
    "worktree-state", "relocated", "bridge-session", "started", "result", "tag", "atis-latch",
})

_TYPE_VALUE = re.compile(rb'"type":"(progress"|file-history-snapshot")?')
"""The first ``"type":"`` of a line; the group holds the type when it is one of the skipped record types."""
HEAD_BYTES = 1024
"""How far into a line its record type is looked for."""
PLAIN_RESULT_MIN_BYTES = 4 << 10
"""Lines at least this long are checked for the plain-tool-result shape before being parsed."""


def skip_line(head: bytes) -> bool:
    """True for ``progress`` and ``file-history-snapshot`` records (often the largest lines: copies of sub-agent
    messages, backups), judged without parsing from the first ``"type":"..."`` of the line: these records
    carry their own type before any nested object, while user and assistant records hold no such type before
    theirs."""
    return _skipped(head, 0, len(head))


def _skipped(data: bytes | bytearray, start: int, end: int) -> bool:
    match = _TYPE_VALUE.search(data, start, min(end, start + HEAD_BYTES))
    return match is not None and match.group(1) is not None


def peek_line(buffer: bytearray, start: int, end: int) -> object:
    """The ``LinePeek`` of Claude Code transcripts: skips progress and snapshots, reads large plain tool results
    without parsing their output (see ``plain_tool_result``), lets everything else be parsed."""
    match = _TYPE_VALUE.search(buffer, start, min(end, start + HEAD_BYTES))
    if match is not None and match.group(1) is not None:
        return SKIP
    if end - start >= PLAIN_RESULT_MIN_BYTES:
        return plain_tool_result(buffer, start, end)
    return None


_MESSAGE_OPENING = b',"message":{"role":"user","content":[{"tool_use_id":"'
_RESULT_HEADER = re.compile(rb'[^"\\]*","type":"tool_result","content":"')
_MESSAGE_CLOSING = b'}]},"toolUseResult":{'
_RESULT_MARKERS = tuple(marker.encode() for marker in (REJECTION_TEXT, INTERRUPT_PREFIX, "Exit code "))


def plain_tool_result(data: bytes | bytearray, start: int, end: int) -> dict | None:
    """Read the line ``data[start:end]`` without parsing the tool output when it is a ``user`` record holding
    one successful tool result, the common large line (a whole file read, a long command output, and the same
    again in ``toolUseResult``); such a record matters only for its envelope (cwd, session, time).

    Returns the envelope (every key before ``message``) with ``message`` holding one empty tool result, or None
    when the line does not provably have that shape; it is then parsed in full. The shape, as Claude Code
    writes it (compact JSON, keys in this order): ``{<envelope>,"message":{"role":"user","content":[
    {"tool_use_id":"…","type":"tool_result","content":"<text>"[,"is_error":false]}]},"toolUseResult":{…}…}``,
    where ``<text>`` does not start with a rejection, an interrupt or ``Exit code `` (escapes count as unsure),
    no ``"is_error":true`` and no second block (``},{"``) follow it before ``toolUseResult``, and the envelope
    has a ``timestamp``. Inside a JSON string every quote is escaped, so these byte patterns, each holding an
    unescaped quote, can only be structure.
    """
    opening = data.find(_MESSAGE_OPENING, start, min(end, start + 8 * HEAD_BYTES))
    if opening == -1:
        return None
    header = _RESULT_HEADER.match(data, opening + len(_MESSAGE_OPENING), end)
    if header is None:
        return None
    content = header.end()
    text_head = bytes(data[content:content + 64])
    if any(_may_start_with(text_head, marker) for marker in _RESULT_MARKERS):
        return None
    closing = data.rfind(_MESSAGE_CLOSING, content, end)
    if (closing == -1 or data.find(b'"is_error":true', content, closing) != -1
            or data.find(b'},{"', content, closing) != -1):
        return None
    try:
        envelope = orjson.loads(bytes(data[start:opening]) + b"}")
    except orjson.JSONDecodeError:
        return None  # the message key was not at the top level
    if not isinstance(envelope, dict) or envelope.get("type") != "user" or "timestamp" not in envelope:
        return None
    envelope["message"] = {"role": "user", "content": [{"type": "tool_result", "content": ""}]}
    return envelope


def _may_start_with(raw: bytes, marker: bytes) -> bool:
    """Whether the JSON string body ``raw`` may decode to a text that starts with ``marker`` (plain ASCII): True
    when it does, and when an escape sequence inside the first ``len(marker)`` bytes makes it unsure."""
    escape = raw.find(b"\\", 0, len(marker))
    if escape == -1:
        return raw.startswith(marker)
    return raw.startswith(marker[:escape])


def list_files(root: Path) -> tuple[list[Path], list[Path]]:
    """Return ``(main session files, sub-agent files)`` under ``root/projects``, sorted.

    Main files are ``projects/<dir>/<id>.jsonl`` (not ``agent-*``); sub-agent files are ``agent-*.jsonl`` siblings
    (2.0.x) and ``projects/<dir>/<session>/subagents/**.jsonl`` (2.1.x). Raises HarvestError when ``projects``
    exists but cannot be listed.
    """
    projects = root / "projects"
    mains: list[Path] = []
    agents: list[Path] = []
    try:
        project_dirs = [entry for entry in os.scandir(projects) if entry.is_dir(follow_symlinks=False)]
    except FileNotFoundError:
        return mains, agents
    except OSError as error:
        raise HarvestError(f"cannot list Claude Code transcripts in {projects}: {error.strerror}; "
                           "fix the permissions or point --claude-home elsewhere") from error
    for project_dir in project_dirs:
        try:
            entries = list(os.scandir(project_dir.path))
        except OSError:
            continue
        for entry in entries:
            name = entry.name
            if entry.is_file() and name.endswith(".jsonl"):
                (agents if name.startswith("agent-") else mains).append(Path(entry.path))
            elif entry.is_dir(follow_symlinks=False):
                subagents = Path(entry.path) / "subagents"
                if subagents.is_dir():
                    agents.extend(sorted(subagents.rglob("*.jsonl")))
    return sorted(mains), sorted(agents)


def default_root() -> Path:
    """Claude Code's root: ``$CLAUDE_CONFIG_DIR``, else ``~/.claude`` (absolute, ``~`` expanded)."""
    configured = os.environ.get("CLAUDE_CONFIG_DIR")
    return (Path(configured).expanduser() if configured else Path.home() / ".claude").absolute()


def has_sessions(root: Path) -> bool:
    """True when ``root`` holds at least one main Claude Code transcript."""
    return lists_sessions(lambda: list_files(root)[0])


class ClaudeTranscript(TranscriptParser):
    """Reads the records of one Claude Code transcript (main file) into draft turns."""

    HEADLESS_REASON = "sdk_cli"

    def __init__(self, stats: HarvestStats):
        super().__init__(stats)
        self.cwd: str | None = None
        self.version: str | None = None
        self.entrypoint: str | None = None
        self.first_time: str | None = None
        self.last_time: str | None = None

    def head_complete(self) -> bool:
        """The head settles the session once its cwd and first request are known."""
        return self.cwd is not None and self.saw_request

    # ------------------------------------------------------------------ records

    def feed(self, record: dict) -> None:
        kind = record.get("type")
        if kind == "user" or kind == "assistant":
            self._envelope(record)
            if kind == "user":
                self._user(record)
            elif not self.head_mode:
                self._assistant(record)
        elif kind == "queue-operation":
            if not self.head_mode and record.get("operation") == "enqueue" and self.current is not None:
                self._queued(text_of_blocks(record.get("content")))
        elif kind == "attachment":
            self._envelope(record)
            attachment = record.get("attachment")
            if (not self.head_mode and self.current is not None and isinstance(attachment, dict)
                    and attachment.get("type") == "queued_command"):
                self._queued(text_of_blocks(attachment.get("prompt")))
        elif kind in KNOWN_TYPES:
            if kind == "system" or kind == "progress":
                self._envelope(record)
        else:
            self.stats.records_unknown += 1

    def _queued(self, text: str) -> None:
        """A message typed while the agent was busy; notifications of background agents arrive the same way and are
        not the user's."""
        text = _REMINDER_BLOCK.sub("", text).strip()
        if not text or text.startswith(INJECTED_PREFIXES) or self.current is None:
            return
        if text.startswith("{") and isinstance(_json_object(text), dict):
            return  # a background task's registration ({"task_id": ..., "tool_use_id": ...}), not typed text
        self.current.add_queued(text)

    def _envelope(self, record: dict) -> None:
        if self.cwd is None:
            cwd = record.get("cwd")
            if isinstance(cwd, str) and cwd:
                self.cwd = cwd
        if self.session_id is None:
            session_id = record.get("sessionId")
            if isinstance(session_id, str) and session_id:
                self.session_id = session_id
        if self.version is None:
            version = record.get("version")
            if isinstance(version, str):
                self.version = version
        entrypoint = record.get("entrypoint")
        if isinstance(entrypoint, str):
            if self.entrypoint is None:
                self.entrypoint = entrypoint
            if entrypoint == "sdk-cli":
                self.headless = True
                self.entrypoint = entrypoint
        stamp = record.get("timestamp")
        if isinstance(stamp, str) and stamp[:1].isdigit():
            if self.first_time is None:
                self.first_time = stamp
            self.last_time = stamp

    def _user(self, record: dict) -> None:
        if record.get("isSidechain") is True:
            return
        message = record.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            texts: list[str] = []
            has_result = False
            for block in content:
                if not isinstance(block, dict):
                    continue
                block_type = block.get("type")
                if block_type == "tool_result":
                    has_result = True
                    if not self.head_mode:
                        self._tool_result(block, record)
                elif block_type == "text":
                    text = block.get("text")
                    if isinstance(text, str):
                        texts.append(text)
            if has_result:
                if any(text.lstrip().startswith(INTERRUPT_PREFIX) for text in texts):
                    self._interrupt()
                return
            if len(texts) > 1:  # typed words sent with a command's tags or a bare "/compact": the words are the message
                texts = [text for text in texts if not _command_block(text)] or texts
            text = "\n".join(texts)
        elif isinstance(content, str):
            text = content
        else:
            return
        if record.get("isMeta") is True:
            self._expansion(text)
            return
        if record.get("isCompactSummary") or record.get("isVisibleInTranscriptOnly"):
            return
        origin = record.get("origin")
        if isinstance(origin, dict) and (origin.get("senderTaskId") or origin.get("from")):
            return  # a message sent by another agent, not typed by the user
        self._human(text, record)

    def _expansion(self, text: str) -> None:
        """The ``isMeta`` record right after a slash command or skill holds its expanded body: kept as the
        command's ``command_body`` (the prompt a replay sends), never as the user's words."""
        current = self.current
        stripped = text.strip()
        if (self.head_mode or current is None or current.kind != "command" or current.command_body is not None
                or current.has_activity or not stripped or stripped.startswith(INJECTED_PREFIXES)):
            return
        current.command_body = stripped

    def _human(self, text: str, record: dict) -> None:
        stripped = _REMINDER_BLOCK.sub("", text) if "<system-reminder>" in text else text
        stripped = _IDE_BLOCK.sub("", stripped).strip() if "<ide_" in stripped else stripped.strip()
        if not stripped:
            return
        if stripped.startswith(INTERRUPT_PREFIX):
            self._interrupt()
            return
        kind = "prompt"
        request = stripped
        if stripped.startswith("<command-"):
            name = _between(stripped, "<command-name>", "</command-name>").strip().lstrip("/")
            if not name:
                return
            if name.lower() in CONTROL_COMMANDS:
                return
            args = _between(stripped, "<command-args>", "</command-args>").strip()
            request = f"/{name} {args}".strip()
            kind = "command"
        elif stripped.startswith(INJECTED_PREFIXES):
            return
        elif stripped.startswith(PLAN_PREFIX):
            kind = "plan"
        if not self.note_request(stripped):
            return
        cwd = record.get("cwd")
        draft = DraftTurn(request=request, kind=kind, timestamp=parse_timestamp(record.get("timestamp")),
                          cwd=sys.intern(cwd) if isinstance(cwd, str) else None)
        self.turns.append(draft)
        self.current = draft

    def _interrupt(self) -> None:
        if self.current is not None and not self.head_mode:
            self.current.interrupted = True

    def _tool_result(self, block: dict, record: dict) -> None:
        current = self.current
        if current is None:
            return
        body = block.get("content")
        text = body if isinstance(body, str) else text_of_blocks(body)
        is_error = block.get("is_error") is True
        if text.startswith(REJECTION_TEXT) or record.get("toolUseResult") == "User rejected tool use":
            current.rejected_tool = True
            is_error = True
            marker = text.find(FEEDBACK_MARKER)
            if marker != -1:
                feedback = text[marker + len(FEEDBACK_MARKER):].strip()
                if feedback:
                    current.rejection_feedback = feedback
        elif text.startswith(INTERRUPT_PREFIX):
            current.interrupted = True
        elif not is_error and text.startswith("Exit code "):
            code = text[10:].split(None, 1)[0] if len(text) > 10 else ""
            is_error = code.lstrip("-").isdigit() and int(code) != 0
        if is_error:
            tool_id = block.get("tool_use_id")
            tool = current.tools_by_id.get(tool_id) if isinstance(tool_id, str) else None
            if tool is not None:
                tool.set_error(text)

    def _assistant(self, record: dict) -> None:
        if record.get("isSidechain") is True or self.current is None:
            return
        message = record.get("message")
        if not isinstance(message, dict) or message.get("model") == "<synthetic>":
            return
        message_id = message.get("id")
        content = message.get("content")
        current = self.current
        if isinstance(content, str):
            current.set_answer(content, message_id)
            return
        if not isinstance(content, list):
            return
        for block in content:
            if not isinstance(block, dict):
                continue
            block_type = block.get("type")
            if block_type == "text":
                text = block.get("text")
                if isinstance(text, str):
                    current.set_answer(text, message_id)
            elif block_type == "tool_use":
                tool_id = block.get("id")
                current.add_tool(str(block.get("name") or "unknown"), compact_json(block.get("input")),
                                 tool_id if isinstance(tool_id, str) else None)


def _json_object(text: str) -> object:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return None


def _command_block(text: str) -> bool:
    """A content block that is a slash command, not typed words: its tags (``<command-name>`` ...), injected
    output, or a bare ``/name`` line."""
    stripped = text.strip()
    return stripped.startswith(("<command-", *INJECTED_PREFIXES)) or re.fullmatch(r"/[\w:.-]+", stripped) is not None


def _between(text: str, start: str, end: str) -> str:
    begin = text.find(start)
    if begin == -1:
        return ""
    begin += len(start)
    finish = text.find(end, begin)
    return text[begin:] if finish == -1 else text[begin:finish]


def harvest_claude(root: Path, context: HarvestContext, stats: HarvestStats) -> list[Session]:
    """Harvest the Claude Code sessions under ``root``; updates ``stats`` and ``context.new_checkpoints``.

    Returns the sessions that hold at least one request (in path order). Never raises for a bad file: an
    unreadable one is counted as ``unreadable`` and keeps its previous checkpoint.
    """
    mains, agents = list_files(root)
    for path in agents:
        checkpoint_unread(path, context, stats, "subagent")
    return read_files(mains, _harvest_file, context, stats)


def _harvest_file(path: Path, context: HarvestContext, stats: HarvestStats) -> Session | None:
    plan = plan_read(path, context, stats)
    if plan is None:
        return None
    transcript = ClaudeTranscript(stats)
    read = read_planned_file(path, plan, transcript, context, stats, peek=peek_line, default_session_id=path.stem)
    if read is None:
        return None
    turns, session_id = read
    return Session(source=SOURCE, session_id=session_id, path=str(path), cwd=transcript.cwd,
                   version=transcript.version, started_at=parse_timestamp(transcript.first_time),
                   ended_at=parse_timestamp(transcript.last_time), entrypoint=transcript.entrypoint, turns=turns)
