"""What both harvesters share: the streaming JSONL reader, the per-file read plan (checkpoint, lookback), scope
tests, timestamps, and the draft turn that becomes a redacted, size-bounded ``Turn``.

Reading never loads a whole file: lines are read in chunks of ``READ_CHUNK`` bytes with no line-length cap, and a
line longer than ``MAX_LINE_BYTES`` is drained without being kept (counted as ``too_long``). A last line without its
newline is used only when it parses as a complete JSON object; otherwise it is counted as ``truncated_last_line``
and the checkpoint offset stays before it, so the next night reads it again once the writer has finished it.
"""

from __future__ import annotations

import io
import os
import stat
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import BinaryIO, Callable, Iterator

import orjson

from skillopt_sleep.models import FileCheckpoint, HarvestStats, ToolUse, Turn
from skillopt_sleep.redact import REDACTED_PREFIX, redact

READ_CHUNK = 1 << 20
"""Bytes read per ``readline`` call (a longer line is assembled from several chunks)."""
MAX_LINE_BYTES = 64 << 20
"""A line longer than this (64 MiB) is skipped without parsing (``too_long``)."""

REQUEST_MAX_CHARS = 20_000
ANSWER_MAX_CHARS = 4_000
TOOL_INPUT_MAX_CHARS = 200
TOOL_ERROR_MAX_CHARS = 300
FEEDBACK_MAX_CHARS = 2_000
QUEUED_MAX_CHARS = 2_000
QUEUED_MAX_COUNT = 20
TOOLS_MAX_COUNT = 300
"""Bounds on what one turn keeps (characters; tool uses and queued messages per turn)."""
_REDACT_MARGIN = 512
"""Extra characters redacted beyond a bound before cutting, so a secret that starts inside the bound is seen whole
(token-shaped secrets are far shorter; a PEM block cut before its END line is still recognized)."""

SkipLine = Callable[[bytes], bool]


# --------------------------------------------------------------------------- small helpers


def parse_timestamp(value: object) -> datetime | None:
    """Parse an ISO-8601 string (``...Z`` or with offset) or epoch seconds/milliseconds into an aware UTC datetime.

    Returns None for anything else (missing, ``"[trimmed]"``, bad values). A naive time is taken as UTC.
    """
    if isinstance(value, str):
        if not value or not value[0].isdigit():
            return None
        text = value[:-1] + "+00:00" if value.endswith(("Z", "z")) else value
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            return None
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = value / 1000.0 if value > 1e11 else float(value)
        try:
            parsed = datetime.fromtimestamp(seconds, tz=timezone.utc)
        except (OverflowError, OSError, ValueError):
            return None
    else:
        return None
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=timezone.utc)
    return parsed.astimezone(timezone.utc)


def bounded_redact(text: str, limit: int) -> tuple[str, int]:
    """Redact ``text`` and cut it to ``limit`` characters (a cut text ends with ``…``). Returns (text, secrets)."""
    if not text:
        return "", 0
    window = text[: limit + _REDACT_MARGIN]
    cleaned, count = redact(window)
    if len(cleaned) > limit or len(text) > len(window):
        cleaned = cleaned[: max(0, limit - 1)] + "…"
        if count:
            count = min(count, cleaned.count(REDACTED_PREFIX))  # count only the secrets that were in what is kept
    return cleaned, count


def scope_roots(project: Path | None) -> tuple[str, ...]:
    """The spellings of ``project`` a session cwd is compared with (as given, normalized, and symlinks resolved)."""
    if project is None:
        return ()
    given = os.path.normpath(os.path.abspath(os.path.expanduser(str(project))))
    resolved = os.path.normpath(os.path.realpath(given))
    return tuple(dict.fromkeys((given, resolved)))


def cwd_in_scope(cwd: str | None, roots: tuple[str, ...]) -> bool:
    """True when ``cwd`` is one of ``roots`` or below it. An ancestor (e.g. ``$HOME``) never matches."""
    if not cwd or not isinstance(cwd, str):
        return False
    normalized = os.path.normpath(cwd)
    for root in roots:
        if normalized == root or normalized.startswith(root.rstrip(os.sep) + os.sep):
            return True
    return False


def text_of_blocks(content: object, block_types: tuple[str, ...] = ("text",)) -> str:
    """Join the ``text`` of the blocks of ``content`` (a string, or a list of ``{type, text}`` blocks)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = []
    for block in content:
        if isinstance(block, dict) and block.get("type") in block_types:
            value = block.get("text")
            if isinstance(value, str):
                parts.append(value)
        elif isinstance(block, str):
            parts.append(block)
    return "\n".join(parts)


def compact_json(value: object, limit: int = TOOL_INPUT_MAX_CHARS + _REDACT_MARGIN) -> str:
    """A short text form of a tool input: strings as they are, other values as compact JSON, cut to ``limit``."""
    if isinstance(value, str):
        return value[:limit]
    try:
        return orjson.dumps(value).decode("utf-8", "replace")[:limit]
    except TypeError:
        return str(value)[:limit]


# --------------------------------------------------------------------------- reading


def open_binary(path: Path) -> BinaryIO:
    """Open a transcript for binary reading; ``.zst`` files are decompressed as a stream (``zstandard``)."""
    handle = open(path, "rb")
    if path.name.endswith(".zst"):
        import zstandard

        try:
            reader = zstandard.ZstdDecompressor().stream_reader(handle, read_across_frames=True, closefd=True)
        except BaseException:
            handle.close()
            raise
        return io.BufferedReader(reader, buffer_size=READ_CHUNK)  # type: ignore[arg-type]
    return handle


class RecordReader:
    """Stream the JSON objects of one JSONL transcript from a byte offset.

    ``offset`` is the checkpoint offset: just after the last complete line consumed (for ``.zst`` files, an offset
    in the decompressed stream). Malformed lines are counted in ``stats.malformed_lines`` by reason: ``bad_json``,
    ``not_an_object``, ``binary``, ``too_long``, ``truncated_last_line``. ``skip_line(head)`` may reject a line
    from its first bytes without parsing it (counted nowhere: it is a known, irrelevant record).
    """

    def __init__(self, handle: BinaryIO, start: int, stats: HarvestStats, *, compressed: bool,
                 skip_line: SkipLine | None = None):
        self.handle = handle
        self.stats = stats
        self.offset = start
        self.skip_line = skip_line
        self.lines = 0
        self.bytes_read = 0
        if start:
            if compressed:
                _discard(handle, start)
            else:
                handle.seek(start)

    def records(self) -> Iterator[dict]:
        """Yield each complete line's JSON object, advancing ``offset`` past every complete line."""
        try:
            yield from self._records()
        finally:
            self.stats.bytes_read += self.bytes_read

    def _records(self) -> Iterator[dict]:
        handle = self.handle
        stats = self.stats
        while True:
            line, length, complete, oversized = _read_line(handle)
            if length == 0:
                return
            self.lines += 1
            self.bytes_read += length
            if oversized:
                stats.malformed("too_long")
                if not complete:
                    return
                self.offset += length
                continue
            if not complete:
                record = _parse_object(line)
                if isinstance(record, dict):
                    self.offset += length
                    yield record
                else:
                    stats.malformed("truncated_last_line")
                return
            self.offset += length
            stripped = line.strip()
            if not stripped:
                continue
            if self.skip_line is not None and self.skip_line(stripped[:1024]):
                continue
            record = _parse_object(stripped)
            if isinstance(record, dict):
                yield record
            elif record is _BAD:
                stats.malformed("binary" if _looks_binary(stripped) else "bad_json")
            else:
                stats.malformed("not_an_object")


_BAD = object()


def _parse_object(line: bytes) -> object:
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return _BAD


def _looks_binary(line: bytes) -> bool:
    if b"\x00" in line:
        return True
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def _read_line(handle: BinaryIO) -> tuple[bytes, int, bool, bool]:
    """Read one line: ``(bytes without the newline, bytes consumed, ended by a newline, too long to keep)``."""
    first = handle.readline(READ_CHUNK)
    if not first:
        return b"", 0, False, False
    if first.endswith(b"\n"):
        return first[:-1], len(first), True, False
    parts = [first]
    length = len(first)
    oversized = False
    while True:
        chunk = handle.readline(READ_CHUNK)
        if not chunk:
            break
        length += len(chunk)
        if not oversized:
            if length > MAX_LINE_BYTES:
                oversized = True
                parts = []
            else:
                parts.append(chunk)
        if chunk.endswith(b"\n"):
            if oversized:
                return b"", length, True, True
            line = b"".join(parts)
            return line[:-1], length, True, False
    if oversized:
        return b"", length, False, True
    return b"".join(parts), length, False, False


def _discard(handle: BinaryIO, count: int) -> None:
    while count > 0:
        chunk = handle.read(min(count, READ_CHUNK))
        if not chunk:
            return
        count -= len(chunk)


def previous_byte_is_newline(path: Path, offset: int) -> bool:
    """True when the byte just before ``offset`` is a newline (the file still holds what was read before)."""
    if offset <= 0:
        return True
    with open(path, "rb") as handle:
        handle.seek(offset - 1)
        return handle.read(1) == b"\n"


def last_line_end(path: Path, floor: int, size: int) -> int:
    """Offset just after the last newline in ``path`` before ``size`` (at least ``floor``): where a checkpoint
    can stop when the rest of a plain file was skipped unread. Reads backwards in chunks."""
    position = size
    with open(path, "rb") as handle:
        while position > floor:
            start = max(floor, position - READ_CHUNK)
            handle.seek(start)
            chunk = handle.read(position - start)
            newline = chunk.rfind(b"\n")
            if newline != -1:
                return start + newline + 1
            position = start
    return floor


# --------------------------------------------------------------------------- read plan (checkpoint and lookback)


@dataclass
class HarvestContext:
    """The settings one harvest applies to every file of a source.

    cutoff: first night only (no checkpoints): turns older than this are dropped (None = keep all).
    """

    roots: tuple[str, ...]
    scope_all: bool
    include_sdk_sessions: bool
    old_checkpoints: dict[str, FileCheckpoint] | None
    new_checkpoints: dict[str, FileCheckpoint]
    cutoff: datetime | None
    now: datetime

    @classmethod
    def build(cls, *, scope: str, project: Path | None, include_sdk_sessions: bool, lookback_hours: float,
              checkpoints: dict[str, FileCheckpoint] | None, now: datetime | None,
              new_checkpoints: dict[str, FileCheckpoint]) -> "HarvestContext":
        moment = now or datetime.now(timezone.utc)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        cutoff = None
        if checkpoints is None and lookback_hours and lookback_hours > 0:
            cutoff = moment - timedelta(hours=lookback_hours)
        return cls(roots=scope_roots(project), scope_all=scope == "all", include_sdk_sessions=include_sdk_sessions,
                   old_checkpoints=checkpoints, new_checkpoints=new_checkpoints, cutoff=cutoff, now=moment)

    def in_scope(self, cwd: str | None) -> bool:
        return self.scope_all or cwd_in_scope(cwd, self.roots)


@dataclass
class ReadPlan:
    """What to do with one file: ``action`` is ``read``, ``unchanged`` or ``too_old``; ``start`` a byte offset."""

    action: str
    key: str
    size: int
    mtime_ns: int
    start: int = 0
    grown: bool = False
    previous: FileCheckpoint | None = None


def plan_read(path: Path, context: HarvestContext, stats: HarvestStats, *,
              fallback_key: str | None = None) -> ReadPlan | None:
    """Stat ``path`` and decide how to read it; None when it cannot be stat-ed (counted as ``unreadable``).

    * same size and mtime as its checkpoint: ``unchanged`` (not opened);
    * grown, and the byte before the stored offset is still a newline: read from the stored offset;
    * shrunk or replaced: read from 0;
    * first night, file not modified since the lookback cutoff: ``too_old`` (not opened).
    ``fallback_key`` names another checkpoint to resume from when this file has none: a rollout that Codex
    compressed to ``.zst`` (its decompressed stream continues the plain file's offsets) or moved to
    ``archived_sessions/`` since the last night.
    """
    key = str(path)
    try:
        info = path.stat()
    except OSError:
        stats.skip("unreadable")
        if context.old_checkpoints and key in context.old_checkpoints:
            context.new_checkpoints[key] = context.old_checkpoints[key]
        return None
    if not stat.S_ISREG(info.st_mode):
        stats.skip("not_a_file")  # a FIFO or device named like a transcript would block or never end
        return None
    size, mtime_ns = info.st_size, info.st_mtime_ns
    stats.files_scanned += 1
    old = context.old_checkpoints or {}
    previous = old.get(key)
    if previous is None and fallback_key is not None and fallback_key in old:
        fallback = old[fallback_key]
        compressed = path.name.endswith(".zst")
        if compressed or (fallback.offset <= size and _safe_previous_newline(path, fallback.offset)):
            return ReadPlan("read", key, size, mtime_ns, start=fallback.offset, grown=fallback.offset > 0,
                            previous=fallback)
        return ReadPlan("read", key, size, mtime_ns)
    if previous is not None:
        if previous.size == size and previous.mtime_ns == mtime_ns:
            return ReadPlan("unchanged", key, size, mtime_ns, start=previous.offset, previous=previous)
        compressed = path.name.endswith(".zst")
        if (not compressed and size >= previous.size and 0 <= previous.offset <= size
                and _safe_previous_newline(path, previous.offset)):
            return ReadPlan("read", key, size, mtime_ns, start=previous.offset, grown=previous.offset > 0,
                            previous=previous)
        return ReadPlan("read", key, size, mtime_ns, start=0, previous=previous)
    if context.cutoff is not None:
        modified = datetime.fromtimestamp(mtime_ns / 1e9, tz=timezone.utc)
        if modified < context.cutoff:
            return ReadPlan("too_old", key, size, mtime_ns, start=size)
    return ReadPlan("read", key, size, mtime_ns)


def _safe_previous_newline(path: Path, offset: int) -> bool:
    try:
        return previous_byte_is_newline(path, offset)
    except OSError:
        return False


def file_mtime(plan: ReadPlan) -> datetime:
    return datetime.fromtimestamp(plan.mtime_ns / 1e9, tz=timezone.utc)


# --------------------------------------------------------------------------- turns


@dataclass
class DraftTool:
    name: str
    input_text: str = ""
    error_text: str | None = None


@dataclass
class DraftTurn:
    """A turn while its span is being read; ``finish`` makes the stored, redacted, bounded ``Turn``."""

    request: str
    kind: str = "prompt"
    timestamp: datetime | None = None
    cwd: str | None = None
    answer_parts: list[str] = field(default_factory=list)
    answer_id: object = None
    tools: list[DraftTool] = field(default_factory=list)
    tools_by_id: dict[str, DraftTool] = field(default_factory=dict)
    interrupted: bool = False
    rejected_tool: bool = False
    aborted: bool = False
    rejection_feedback: str | None = None
    queued: list[str] = field(default_factory=list)
    origin: str = ""
    """Where the request came from (Codex: ``event`` or ``response``), for de-duplication."""

    def set_answer(self, text: str, message_id: object = None) -> None:
        """Record assistant text: parts of the same message (``message_id``) are joined; a new message replaces."""
        if not text or not text.strip():
            return
        if message_id is not None and message_id == self.answer_id and self.answer_parts:
            if sum(map(len, self.answer_parts)) < ANSWER_MAX_CHARS + _REDACT_MARGIN:
                self.answer_parts.append(text)
            return
        self.answer_id = message_id
        self.answer_parts = [text[: ANSWER_MAX_CHARS + _REDACT_MARGIN]]

    def add_tool(self, name: str, input_text: str, call_id: str | None) -> DraftTool | None:
        if call_id and call_id in self.tools_by_id:
            return self.tools_by_id[call_id]
        if len(self.tools) >= TOOLS_MAX_COUNT:
            return None
        tool = DraftTool(name=name or "unknown", input_text=input_text)
        self.tools.append(tool)
        if call_id:
            self.tools_by_id[call_id] = tool
        return tool

    def add_queued(self, text: str) -> None:
        if text and text.strip() and len(self.queued) < QUEUED_MAX_COUNT:
            self.queued.append(text[: QUEUED_MAX_CHARS + _REDACT_MARGIN])

    @property
    def has_activity(self) -> bool:
        return bool(self.answer_parts or self.tools)

    def finish(self, index: int) -> tuple[Turn, int]:
        """Return ``(Turn, secrets redacted)`` with every text redacted and bounded."""
        secrets = 0
        request, count = bounded_redact(self.request.strip(), REQUEST_MAX_CHARS)
        secrets += count
        answer, count = bounded_redact("\n".join(self.answer_parts).strip(), ANSWER_MAX_CHARS)
        secrets += count
        tools = []
        for draft in self.tools:
            input_head, count = bounded_redact(draft.input_text, TOOL_INPUT_MAX_CHARS)
            secrets += count
            error = None
            if draft.error_text is not None:
                error, count = bounded_redact(draft.error_text.strip() or "error", TOOL_ERROR_MAX_CHARS)
                secrets += count
            tools.append(ToolUse(name=draft.name, input_head=input_head, error=error))
        feedback = None
        if self.rejection_feedback:
            feedback, count = bounded_redact(self.rejection_feedback.strip(), FEEDBACK_MAX_CHARS)
            secrets += count
        queued = []
        for text in self.queued:
            cleaned, count = bounded_redact(text.strip(), QUEUED_MAX_CHARS)
            secrets += count
            queued.append(cleaned)
        turn = Turn(index=index, request=request, timestamp=self.timestamp, cwd=self.cwd, kind=self.kind,
                    final_answer=answer, tools=tools, interrupted=self.interrupted, rejected_tool=self.rejected_tool,
                    aborted=self.aborted, rejection_feedback=feedback, queued_messages=queued)
        return turn, secrets


def keep_turn(draft: DraftTurn, context: HarvestContext, fallback_time: datetime) -> bool:
    """First night: keep a turn only when it is not older than the lookback cutoff (its timestamp, or the file's
    modification time when the record had none)."""
    if context.cutoff is None:
        return True
    moment = draft.timestamp or fallback_time
    return moment >= context.cutoff


def finish_turns(drafts: list[DraftTurn], context: HarvestContext, fallback_time: datetime,
                 stats: HarvestStats) -> tuple[list[Turn], bool]:
    """Filter drafts by the lookback and finish them. Returns ``(turns, some were dropped as too old)``."""
    turns: list[Turn] = []
    dropped = False
    for draft in drafts:
        if not draft.request.strip():
            continue
        if not keep_turn(draft, context, fallback_time):
            dropped = True
            continue
        turn, secrets = draft.finish(len(turns))
        stats.secrets_redacted += secrets
        turns.append(turn)
    return turns, dropped
