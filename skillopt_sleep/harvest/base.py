"""What the harvesters share: the streaming JSONL reader, the per-file read plan (checkpoint, lookback), scope
tests, timestamps, and the draft turn that becomes a redacted, size-bounded ``Turn``.

Reading never loads a whole file: lines are found in a buffer filled ``READ_CHUNK`` bytes at a time with no
line-length cap, and a line longer than ``MAX_LINE_BYTES`` is drained without being kept (counted as ``too_long``).
Each harvester may settle a line from its bytes before it is parsed (records it never needs are skipped; large
tool outputs that carry no error are read without parsing the output). A last line without its newline is used
only when it parses as a complete JSON object; otherwise it is counted as ``truncated_last_line`` and the checkpoint
offset stays before it, so the next night reads it again once the writer has finished it.

No single input stops a harvest: an exception raised while one record is settled or fed to a parser skips that
record (``record_error``, in ``malformed_lines``), and one raised while one file is read skips that file
(``read_isolated``: ``file_error``, in ``sessions_skipped``; its checkpoint moves to the file's current size and
modification time, so an unchanged file is not read again); the input is named in ``HarvestStats.errors``. What is
contained: every ``Exception`` but ``MemoryError`` (never ``KeyboardInterrupt`` or ``SystemExit``).

Memory: a harvest holds one read buffer (``READ_CHUNK``, or the longest line), the draft turns of the file being
read, and the finished, bounded turns it returns (about 6 KB per turn: request, answer head, at most
``TOOLS_KEPT`` tool uses); it does not grow with the bytes read.
"""

from __future__ import annotations

import io
import os
import stat
import sys
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import BinaryIO, Callable, Iterator, TypeVar

import orjson

from skillopt_sleep.errors import HarvestError
from skillopt_sleep.marker import is_own_request
from skillopt_sleep.models import FileCheckpoint, HarvestStats, ToolUse, Turn
from skillopt_sleep.redact import REDACTED_PREFIX, redact_many

READ_CHUNK = 1 << 20
"""Bytes read per read call, and the size of the read buffer (a longer line grows it)."""
MAX_LINE_BYTES = 64 << 20
"""A line longer than this (64 MiB) is skipped without parsing (``too_long``)."""

REQUEST_MAX_CHARS = 20_000
ANSWER_MAX_CHARS = 2_000
TOOL_INPUT_MAX_CHARS = 200
TOOL_ERROR_MAX_CHARS = 300
FEEDBACK_MAX_CHARS = 2_000
QUEUED_MAX_CHARS = 2_000
QUEUED_MAX_COUNT = 20
TOOLS_KEPT = 20
"""Bounds on what one turn keeps (characters; queued messages and tool uses per turn)."""
TOOLS_MAX_COUNT = 300
"""Tool calls of one turn followed while its span is read (the ``TOOLS_KEPT`` kept are chosen among them)."""
HEAD_MAX_LINES = 2_000
"""Most records read from the start of a grown file to learn its session again (``read_head``)."""
RECORD_ERROR = "record_error"
"""``malformed_lines`` reason of a record whose reading raised (the record is skipped)."""
FILE_ERROR = "file_error"
"""``sessions_skipped`` reason of a file whose reading raised (the file is skipped: ``read_isolated``)."""
_REDACT_MARGIN = 512
"""Extra characters redacted beyond a bound before cutting, so a secret that starts inside the bound is seen whole
(token-shaped secrets are far shorter; a PEM block cut before its END line is still recognized)."""

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
    return bounded_redact_many([(text, limit)])[0]


def bounded_redact_many(pieces: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """``bounded_redact`` of each ``(text, limit)``, with one redaction pre-filter pass over all of them."""
    windows = [text[: limit + _REDACT_MARGIN] for text, limit in pieces]
    results = []
    for (text, limit), window, (cleaned, count) in zip(pieces, windows, redact_many(windows)):
        if len(cleaned) > limit or len(text) > len(window):
            cleaned = cleaned[: max(0, limit - 1)] + "…"
            if count:
                count = min(count, cleaned.count(REDACTED_PREFIX))  # count only the secrets that were in what is kept
        results.append((cleaned, count))
    return results


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


def lists_sessions(listing: Callable[[], object]) -> bool:
    """A source's ``has_sessions``: ``bool(listing())``, never raising. True when the listing raises HarvestError
    (the folder is there but cannot be listed: the harvest itself then says why), False on any other OSError."""
    try:
        return bool(listing())
    except HarvestError:
        return True
    except OSError:
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


JSON_DEPTH_KEPT = 32
"""Nesting levels ``compact_json`` writes out when a value is too deep or odd for ``orjson.dumps``; a container
below them is written as ``TRUNCATED``."""
TRUNCATED = "…"


def compact_json(value: object, limit: int = TOOL_INPUT_MAX_CHARS + _REDACT_MARGIN) -> str:
    """A short text form of a tool input: strings as they are, other values as compact JSON, cut to ``limit``
    characters. Never raises: a value ``orjson`` cannot write (nested deeper than its 254 levels, an integer beyond
    64 bits, a key that is not a string, a lone surrogate) is written from a copy cut to ``JSON_DEPTH_KEPT`` levels
    and about ``limit`` values, with ``TRUNCATED`` in place of what was cut."""
    if isinstance(value, str):
        return value[:limit]
    try:
        return orjson.dumps(value).decode("utf-8", "replace")[:limit]
    except TypeError:  # orjson.JSONEncodeError
        return orjson.dumps(_pruned(value, JSON_DEPTH_KEPT, [limit], limit)).decode("utf-8", "replace")[:limit]


def _pruned(value: object, depth: int, budget: list[int], limit: int) -> object:
    """A copy of ``value`` that ``orjson.dumps`` can write: at most ``depth`` levels, about ``budget[0]`` values
    (a shared countdown), strings cut to ``limit``; anything else becomes ``TRUNCATED`` or its type's name."""
    budget[0] -= 1
    if value is None or isinstance(value, (bool, float)):
        return value
    if isinstance(value, int):
        return value if -(1 << 63) <= value < (1 << 64) else TRUNCATED
    if isinstance(value, str):
        return value[:limit].encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, (dict, list, tuple)):
        if depth <= 0 or budget[0] < 0:
            return TRUNCATED
        if isinstance(value, dict):
            copy: dict[str, object] = {}
            for key, item in value.items():
                if budget[0] < 0:
                    break
                copy[_pruned(key, 0, budget, limit) if isinstance(key, str) else type(key).__name__] = _pruned(
                    item, depth - 1, budget, limit)
            return copy
        items: list[object] = []
        for item in value:
            if budget[0] < 0:
                break
            items.append(_pruned(item, depth - 1, budget, limit))
        return items
    return type(value).__name__


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


SKIP = object()
"""What a line peek returns for a known, irrelevant record: the line is not parsed and counted nowhere."""

LinePeek = Callable[[bytearray, int, int], object]
"""``peek(buffer, start, end)`` sees one complete, non-blank line ``buffer[start:end]`` (stripped, no newline)
before it is parsed and returns ``SKIP``, the record as a dict (read without a full parse), or None (parse it)."""

_WHITESPACE = frozenset(b" \t\r\n\x0b\x0c")


class RecordReader:
    """Stream the JSON objects of one JSONL transcript from a byte offset.

    ``offset`` is the checkpoint offset: just after the last complete line consumed (for ``.zst`` files, an offset
    in the decompressed stream). Malformed lines are counted in ``stats.malformed_lines`` by reason: ``bad_json``,
    ``not_an_object``, ``binary``, ``too_long``, ``truncated_last_line``. Lines are found in a buffer filled
    ``READ_CHUNK`` bytes at a time (``buffer``, reused from file to file when given), so a line is never copied
    before it is parsed; a line longer than the buffer grows it (up to ``MAX_LINE_BYTES``; it shrinks back
    afterwards). ``peek`` (a ``LinePeek``) may settle a line without parsing it; a peek that raises skips its line
    (``contained``). ``error``: the first exception contained in this file (None: none).
    """

    def __init__(self, handle: BinaryIO, start: int, stats: HarvestStats, *, compressed: bool,
                 peek: LinePeek | None = None, buffer: bytearray | None = None):
        self.handle = handle
        self.stats = stats
        self.offset = start
        self.peek = peek
        self.buffer = buffer
        self.lines = 0
        self.bytes_read = 0
        self.error: Exception | None = None
        if start:
            if compressed:
                _discard(handle, start)
            else:
                handle.seek(start)

    def contained(self, error: Exception) -> None:
        """Count a record whose reading raised ``error`` (``record_error``) and keep the file's first such error."""
        self.stats.malformed(RECORD_ERROR)
        if self.error is None:
            self.error = error

    def records(self) -> Iterator[dict]:
        """Yield each complete line's JSON object, advancing ``offset`` past every complete line."""
        try:
            yield from self._records()
        finally:
            self.stats.bytes_read += self.bytes_read

    def _records(self) -> Iterator[dict]:
        handle, stats, peek = self.handle, self.stats, self.peek
        chunk, limit = READ_CHUNK, MAX_LINE_BYTES
        buffer = self.buffer if self.buffer is not None else bytearray()
        wanted = min(chunk, _bytes_left(handle) + 1)  # most transcripts are smaller than a chunk
        if len(buffer) < wanted:
            buffer.extend(bytes(wanted - len(buffer)))
        loads, decode_error, whitespace = orjson.loads, orjson.JSONDecodeError, _WHITESPACE
        filled = position = 0
        at_end = False
        while True:
            newline = buffer.find(b"\n", position, filled)
            if newline == -1:
                if at_end:
                    break
                if position:  # keep the partial line at the front of the buffer
                    rest = filled - position
                    if rest:
                        buffer[:rest] = buffer[position:filled]
                    filled, position = rest, 0
                    if len(buffer) > 2 * chunk and rest <= chunk:  # shrink back after a long line
                        del buffer[chunk:]
                if filled == len(buffer):
                    if filled > limit:
                        length, rest = self._drain(buffer, filled)
                        self.lines += 1
                        self.bytes_read += length
                        stats.malformed("too_long")
                        if rest is None:
                            return
                        self.offset += length
                        filled, position = rest, 0
                        continue
                    buffer.extend(bytes(min(len(buffer) or chunk, limit + 1 - len(buffer))))
                count = handle.readinto(memoryview(buffer)[filled:])
                if count:
                    filled += count
                else:
                    at_end = True
                continue
            length = newline + 1 - position
            self.lines += 1
            self.bytes_read += length
            self.offset += length
            start, end = position, newline
            position = newline + 1
            if start == end:
                continue
            if buffer[start] in whitespace or buffer[end - 1] in whitespace:
                while start < end and buffer[start] in whitespace:
                    start += 1
                while end > start and buffer[end - 1] in whitespace:
                    end -= 1
                if start == end:
                    continue
            if peek is not None:
                try:
                    settled = peek(buffer, start, end)
                except MemoryError:
                    raise
                except Exception as error:  # a record no peek expected: skipped, counted, the file goes on
                    self.contained(error)
                    continue
                if settled is not None:
                    if settled is not SKIP:
                        yield settled  # type: ignore[misc]
                    continue
            try:
                record = loads(memoryview(buffer)[start:end])
            except decode_error:
                stats.malformed("binary" if _looks_binary(bytes(buffer[start:end])) else "bad_json")
                continue
            if isinstance(record, dict):
                yield record
            else:
                stats.malformed("not_an_object")
        if filled > position:  # a last line without its newline: used only when it is a complete object
            length = filled - position
            self.lines += 1
            self.bytes_read += length
            record = _parse_object(memoryview(buffer)[position:filled])
            if isinstance(record, dict):
                self.offset += length
                yield record
            else:
                stats.malformed("truncated_last_line")

    def _drain(self, buffer: bytearray, length: int) -> tuple[int, int | None]:
        """Read past the rest of an over-long line without keeping it; what follows it is left at the front of
        ``buffer`` (shrunk back to ``READ_CHUNK``). Returns (the line's length in bytes, newline included; the
        number of bytes left in ``buffer``, or None at the end of the stream)."""
        while True:
            count = self.handle.readinto(buffer)
            if not count:
                return length, None
            newline = buffer.find(b"\n", 0, count)
            if newline == -1:
                length += count
                continue
            rest = count - newline - 1
            buffer[:rest] = buffer[newline + 1:count]
            del buffer[max(rest, READ_CHUNK):]
            return length + newline + 1, rest


def _bytes_left(handle: BinaryIO) -> int:
    """Bytes from the current position to the end of a plain file; a large number for a stream."""
    try:
        return max(0, os.fstat(handle.fileno()).st_size - handle.tell())
    except (AttributeError, OSError, ValueError):  # a decompressing stream has no file number
        return 1 << 62


_BAD = object()


def _parse_object(line) -> object:
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
    read_buffer: bytearray = field(default_factory=bytearray)
    """The line buffer every ``RecordReader`` of this harvest reuses (one allocation, not one per file)."""
    scope_by_cwd: dict[str, bool] = field(default_factory=dict)
    """Cache of ``in_scope``."""
    workers: int = 0
    """Worker processes for a big source (``harvest.workers``): 0 = one per core, 1 = one loop."""
    agent_answers: list[str] = field(default_factory=list)
    """Answers of sub-agent sessions read but not kept (``subagent``): never requests nor user text, only what a
    pasted-back answer is recognised by (``replayable.AgentTexts``)."""

    @classmethod
    def build(cls, *, scope: str, project: Path | None, include_sdk_sessions: bool, lookback_hours: float,
              checkpoints: dict[str, FileCheckpoint] | None, now: datetime | None,
              new_checkpoints: dict[str, FileCheckpoint], workers: int = 0) -> "HarvestContext":
        moment = now or datetime.now(timezone.utc)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        cutoff = None
        if checkpoints is None and lookback_hours and lookback_hours > 0:
            cutoff = moment - timedelta(hours=lookback_hours)
        return cls(roots=scope_roots(project), scope_all=scope == "all", include_sdk_sessions=include_sdk_sessions,
                   old_checkpoints=checkpoints, new_checkpoints=new_checkpoints, cutoff=cutoff, now=moment,
                   workers=workers)

    def in_scope(self, cwd: str | None) -> bool:
        """``cwd_in_scope`` for this harvest's scope, remembered per cwd (it is asked after every record)."""
        if self.scope_all:
            return True
        known = self.scope_by_cwd.get(cwd)  # type: ignore[arg-type]
        if known is None:
            known = self.scope_by_cwd[cwd] = cwd_in_scope(cwd, self.roots)  # type: ignore[index]
        return known


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


def kept_unchanged(plan: ReadPlan, context: HarvestContext, stats: HarvestStats) -> bool:
    """True (counted ``files_unchanged``, last night's checkpoint carried over) when ``plan`` says the file did not
    change since last night."""
    if plan.action != "unchanged":
        return False
    stats.files_unchanged += 1
    context.new_checkpoints[plan.key] = plan.previous  # type: ignore[assignment]
    return True


def keep_previous_checkpoint(plan: ReadPlan, context: HarvestContext) -> None:
    """Carry last night's checkpoint over (a file that could not be read is read again from there next night)."""
    if plan.previous is not None:
        context.new_checkpoints[plan.key] = plan.previous


def checkpoint_unread(path: Path, context: HarvestContext, stats: HarvestStats, reason: str) -> None:
    """Count a file that is never read (skip ``reason``, e.g. ``subagent``) once: checkpointed at its end; an
    unchanged one keeps its checkpoint."""
    plan = plan_read(path, context, stats)
    if plan is None or kept_unchanged(plan, context, stats):
        return
    stats.skip(reason)
    context.new_checkpoints[plan.key] = FileCheckpoint(size=plan.size, mtime_ns=plan.mtime_ns, offset=plan.size)


Found = TypeVar("Found")


def read_isolated(path: Path, context: HarvestContext, stats: HarvestStats,
                  read_one: Callable[[Path, HarvestContext, HarvestStats], Found]) -> Found | None:
    """``read_one(path, context, counts)`` for one file, whatever the file holds: what it returns, with its counts
    merged into ``stats``; or, when it raises (a parser bug, a value no harvester expected), None.

    A file that raised is counted once as ``file_error`` (its scanned file and bytes read kept, its other counts
    dropped), named in ``stats.errors``, and checkpointed at its current size and modification time with last
    night's offset and session id (0 and none on a first read): unchanged, it is not read again; changed, it is read
    again from where the last good read stopped. ``MemoryError`` (and ``BaseException``s such as
    ``KeyboardInterrupt``) propagate.
    """
    counts = HarvestStats()
    try:
        found = read_one(path, context, counts)
    except MemoryError:
        raise
    except Exception as error:
        stats.files_scanned += counts.files_scanned
        stats.bytes_read += counts.bytes_read
        stats.skip(FILE_ERROR)
        stats.error(FILE_ERROR, path, error)
        checkpoint_failed(path, context)
        return None
    stats.merge(counts)
    return found


def checkpoint_failed(path: Path, context: HarvestContext) -> None:
    """The checkpoint of a file whose reading raised (``read_isolated``): its current size and modification time,
    last night's offset and session id; last night's checkpoint as it was (or none) when it cannot be stat-ed."""
    key = str(path)
    previous = (context.old_checkpoints or {}).get(key)
    try:
        info = path.stat()
    except OSError:
        context.new_checkpoints.pop(key, None)
        if previous is not None:
            context.new_checkpoints[key] = previous
        return
    context.new_checkpoints[key] = FileCheckpoint(
        size=info.st_size, mtime_ns=info.st_mtime_ns, offset=previous.offset if previous is not None else 0,
        session_id=previous.session_id if previous is not None else None)


# --------------------------------------------------------------------------- turns


@dataclass
class DraftTool:
    name: str
    input_text: str = ""
    error_text: str | None = None
    """The error text, stripped, cut one character beyond what is redacted (so a cut still shows)."""

    def set_error(self, text: str) -> None:
        """Record the tool's error text (a tool output can be hundreds of KB: only its head is kept)."""
        self.error_text = (text.strip() or "error")[: TOOL_ERROR_MAX_CHARS + _REDACT_MARGIN + 1]


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
    command_body: str | None = None
    tool_calls: int = 0
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
        self.tool_calls += 1
        if len(self.tools) >= TOOLS_MAX_COUNT:
            return None
        tool = DraftTool(name=sys.intern(name or "unknown"), input_text=input_text)  # one "Read" for all calls
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

    def texts(self) -> list[tuple[str, int]]:
        """``(text, limit)`` of every text the finished turn stores, in the order ``finish`` takes them back."""
        texts = [(self.request.strip(), REQUEST_MAX_CHARS),
                 ("\n".join(self.answer_parts).strip(), ANSWER_MAX_CHARS)]
        for tool in kept_tools(self.tools):
            texts.append((tool.input_text, TOOL_INPUT_MAX_CHARS))
            if tool.error_text is not None:
                texts.append((tool.error_text, TOOL_ERROR_MAX_CHARS))
        if self.rejection_feedback:
            texts.append((self.rejection_feedback.strip(), FEEDBACK_MAX_CHARS))
        texts.extend((text.strip(), QUEUED_MAX_CHARS) for text in self.queued)
        if self.command_body:
            texts.append((self.command_body.strip(), REQUEST_MAX_CHARS))
        return texts

    def finish(self, index: int, cleaned: Iterator[tuple[str, int]]) -> tuple[Turn, int]:
        """Return ``(Turn, secrets redacted)``; ``cleaned`` yields ``bounded_redact`` of each of ``texts()``."""
        taken: list[int] = []

        def take() -> str:
            text, count = next(cleaned)
            taken.append(count)
            return text

        request, answer = take(), take()
        tools = []
        for draft in kept_tools(self.tools):
            input_head = take()
            error = take() if draft.error_text is not None else None
            tools.append(ToolUse(name=draft.name, input_head=input_head, error=error))
        feedback = take() if self.rejection_feedback else None
        queued = [take() for _ in self.queued]
        body = take() if self.command_body else None
        turn = Turn(index=index, request=request, timestamp=self.timestamp, cwd=self.cwd, kind=self.kind,
                    final_answer=answer, tools=tools, interrupted=self.interrupted, rejected_tool=self.rejected_tool,
                    aborted=self.aborted, rejection_feedback=feedback, queued_messages=queued, command_body=body,
                    tool_calls=self.tool_calls)
        return turn, sum(taken)


def kept_tools(tools: list[DraftTool]) -> list[DraftTool]:
    """At most ``TOOLS_KEPT`` of ``tools``, in call order: the failed calls first, then the first call of each tool
    name, then the earliest calls (what a task's evidence uses: the tools called and their errors)."""
    if len(tools) <= TOOLS_KEPT:
        return tools
    chosen: set[int] = set()
    names: set[str] = set()
    first_of_name = []
    for index, tool in enumerate(tools):
        if tool.name not in names:
            names.add(tool.name)
            first_of_name.append(index)
    failed = [index for index, tool in enumerate(tools) if tool.error_text is not None]
    for index in failed + first_of_name + list(range(len(tools))):
        if len(chosen) == TOOLS_KEPT:
            break
        chosen.add(index)
    return [tool for index, tool in enumerate(tools) if index in chosen]


def keep_turn(draft: DraftTurn, context: HarvestContext, fallback_time: datetime) -> bool:
    """First night: keep a turn only when it is not older than the lookback cutoff (its timestamp, or the file's
    modification time when the record had none)."""
    if context.cutoff is None:
        return True
    moment = draft.timestamp or fallback_time
    return moment >= context.cutoff


def finish_turns(drafts: list[DraftTurn], context: HarvestContext, fallback_time: datetime,
                 stats: HarvestStats) -> tuple[list[Turn], bool]:
    """Filter drafts by the lookback and finish them (the texts of all of them redacted together). Returns
    ``(turns, some were dropped as too old)``."""
    kept: list[DraftTurn] = []
    dropped = False
    for draft in drafts:
        if not draft.request.strip():
            continue
        if not keep_turn(draft, context, fallback_time):
            dropped = True
            continue
        kept.append(draft)
    cleaned = iter(bounded_redact_many([piece for draft in kept for piece in draft.texts()]))
    turns: list[Turn] = []
    for draft in kept:
        turn, secrets = draft.finish(len(turns), cleaned)
        stats.secrets_redacted += secrets
        turns.append(turn)
    return turns, dropped


def harvested_turns(drafts: list[DraftTurn], context: HarvestContext, fallback_time: datetime,
                    stats: HarvestStats) -> list[Turn] | None:
    """``finish_turns``, counted: the finished turns of one session, added to ``stats`` (a session harvested, its
    requests), or None when none is left (the session counted as skipped: ``too_old`` or ``no_requests``)."""
    turns, dropped = finish_turns(drafts, context, fallback_time, stats)
    if not turns:
        stats.skip("too_old" if dropped else "no_requests")
        return None
    stats.sessions_harvested += 1
    stats.requests += len(turns)
    return turns


# --------------------------------------------------------------------------- one streamed transcript file


class TranscriptParser:
    """What ``read_planned_file`` asks of a source's streaming parser, and what every such parser shares.

    A parser is fed one record at a time (``feed``), drafts ``turns`` (``current`` is the open one) and learns
    ``session_id`` and ``cwd``. Flags, set as the records reveal them, decide whether the session is skipped
    (``skip_reason``): ``not_a_session`` (the file is not a transcript of this source), ``subagent`` (a sub-agent's,
    review or compaction session: never the user's), ``headless`` (a non-interactive run: ``exec``, the SDK, ``-p``;
    skipped unless ``include_sdk_sessions``) and ``own_marker`` (a request is skillopt-sleep's
    own call: ``marker.is_own_request``).
    While ``head_mode`` is set (``read_head``) a parser learns the flags and drafts no turn.
    """

    HEADLESS_REASON = "headless"
    """The skip reason of a headless session (Claude Code's SDK runs are ``sdk_cli``)."""

    cwd: str | None = None

    def __init__(self, stats: HarvestStats):
        self.stats = stats
        self.session_id: str | None = None
        self.turns: list[DraftTurn] = []
        self.current: DraftTurn | None = None
        self.not_a_session = False
        self.subagent = False
        self.headless: bool | None = False
        self.own_marker = False
        self.saw_request = False
        self.head_mode = False

    def note_request(self, text: str) -> bool:
        """Note that the user typed a request (``own_marker`` when ``text`` is our own prompt:
        ``marker.is_own_request``, the ``SESSION_MARKER`` or a registered template's fixed text). Returns True when
        its turn is to be drafted, False while only the head is read."""
        if is_own_request(text):
            self.own_marker = True
        self.saw_request = True
        return not self.head_mode

    def feed(self, record: dict) -> None:
        raise NotImplementedError

    def head_complete(self) -> bool:
        """True once the start of a file read so far settles the skip decision (by default: the first request)."""
        return self.saw_request

    def skip_reason(self, context: HarvestContext) -> str | None:
        """Why the session is skipped, as soon as the records read so far decide it (None: not decided)."""
        if self.not_a_session:
            return "not_a_session"
        if self.subagent:
            return "subagent"
        cwd = self.cwd
        if cwd is not None and not context.in_scope(cwd):
            return "out_of_scope"
        if self.headless and not context.include_sdk_sessions:
            return self.HEADLESS_REASON
        if self.own_marker:
            return "own_marker"
        return None


def feed(parser, reader: RecordReader, record: dict, *extra: object) -> None:
    """``parser.feed(record, *extra)`` (a ``TranscriptParser`` or any parser with such a ``feed``); a record that
    makes it raise is skipped and counted (``reader.contained``)."""
    try:
        parser.feed(record, *extra)
    except MemoryError:
        raise
    except Exception as error:
        reader.contained(error)


def read_head(path: Path, parser: TranscriptParser, limit: int, buffer: bytearray, *, peek: LinePeek | None,
              compressed: bool = False, read_errors: tuple[type[BaseException], ...] = (OSError,)) -> None:
    """Learn a grown file's session (cwd, flags, first request) from its start, without keeping any turn, so the
    new part is judged like the whole session: up to ``limit`` (decompressed) bytes, ``HEAD_MAX_LINES`` records,
    or until ``parser.head_complete()``. A head that cannot be read is left unread."""
    parser.head_mode = True
    try:
        with open_binary(path) as handle:
            reader = RecordReader(handle, 0, HarvestStats(), compressed=compressed, peek=peek, buffer=buffer)
            for record in reader.records():
                feed(parser, reader, record)
                if reader.offset >= limit or reader.lines >= HEAD_MAX_LINES or parser.head_complete():
                    break
    except read_errors:
        pass
    parser.head_mode = False


def read_planned_file(path: Path, plan: ReadPlan, parser: TranscriptParser, context: HarvestContext,
                      stats: HarvestStats, *, peek: LinePeek | None, default_session_id: str,
                      compressed: bool = False, read_errors: tuple[type[BaseException], ...] = (OSError,)
                      ) -> tuple[list[Turn], str] | None:
    """Read one planned transcript file with a source's ``parser`` and return ``(turns, session id)``.

    The flow the streamed sources share: unchanged and too-old files are only checkpointed; a grown file's head is
    read again (``read_head``) so scope and marker decisions see the whole session; records stream from the planned
    offset until ``parser.skip_reason(context)`` decides the session is skipped; the new checkpoint is set (an
    unreadable file keeps its previous one); the turns are bounded and filtered by ``finish_turns``. Returns None
    for a skipped session (the reason is counted in ``stats``).
    """
    if kept_unchanged(plan, context, stats):
        return None
    if plan.action == "too_old":
        stats.skip("too_old")
        context.new_checkpoints[plan.key] = FileCheckpoint(size=plan.size, mtime_ns=plan.mtime_ns, offset=plan.start)
        return None
    if plan.grown:
        stats.files_grown += 1
    if plan.start > 0:
        read_head(path, parser, plan.start, context.read_buffer, peek=peek, compressed=compressed,
                  read_errors=read_errors)
    reason: str | None = None
    try:
        with open_binary(path) as handle:
            reader = RecordReader(handle, plan.start, stats, compressed=compressed, peek=peek,
                                  buffer=context.read_buffer)
            for record in reader.records():
                try:  # ``feed`` inline: this loop runs once per record of every transcript
                    parser.feed(record)
                except MemoryError:
                    raise
                except Exception as error:
                    reader.contained(error)
                reason = parser.skip_reason(context)
                if reason is not None:
                    break  # decided: the rest of the file is not parsed
            offset = reader.offset
        if reader.error is not None:
            stats.error(RECORD_ERROR, path, reader.error)
        if reason is not None and not compressed:
            offset = last_line_end(path, offset, plan.size)
    except read_errors:  # unreadable (or, for .zst, a corrupt stream): keep the previous checkpoint
        stats.skip("unreadable")
        keep_previous_checkpoint(plan, context)
        return None
    session_id = parser.session_id or default_session_id
    context.new_checkpoints[plan.key] = FileCheckpoint(size=plan.size, mtime_ns=plan.mtime_ns, offset=offset,
                                                       session_id=session_id)
    if reason is None and parser.cwd is None and not context.scope_all:
        reason = "out_of_scope"
    if reason is not None:
        stats.skip(reason)
        return None
    turns = harvested_turns(parser.turns, context, file_mtime(plan), stats)
    if turns is None:
        return None
    return turns, session_id
