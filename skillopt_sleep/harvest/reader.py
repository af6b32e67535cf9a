"""The reader: opening a transcript (plain or ``.zst``), streaming its JSONL records from a byte offset, and the
incremental, checkpointed read of one planned file that the streamed sources share (``read_planned_file``).

Reading never loads a whole file: lines are found in a buffer filled ``READ_CHUNK`` bytes at a time with no
line-length cap, and a line longer than ``MAX_LINE_BYTES`` is drained without being kept (counted as ``too_long``).
Each harvester may settle a line from its bytes before it is parsed (records it never needs are skipped; large
tool outputs that carry no error are read without parsing the output). A last line without its newline is used
only when it parses as a complete JSON object; otherwise it is counted as ``truncated_last_line`` and the checkpoint
offset stays before it, so the next night reads it again once the writer has finished it.

An exception raised while one record is settled or fed to a parser skips that record (``record_error``, in
``malformed_lines``, the input named in ``HarvestStats.errors``); a whole file is isolated by
``read_plan.read_isolated``. What is contained: every ``Exception`` but ``MemoryError`` (never
``KeyboardInterrupt`` or ``SystemExit``).

Memory: a harvest holds one read buffer (``READ_CHUNK``, or the longest line), the draft turns of the file being
read, and the finished, bounded turns it returns (``turns``); it does not grow with the bytes read.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import BinaryIO, Callable, Iterator

import orjson

from skillopt_sleep.harvest.read_plan import (
    HarvestContext,
    ReadPlan,
    file_mtime,
    keep_previous_checkpoint,
    kept_unchanged,
)
from skillopt_sleep.harvest.turns import DraftTurn, harvested_turns
from skillopt_sleep.models import FileCheckpoint, HarvestStats, Turn
from skillopt_sleep.prompts.marker import is_own_request

READ_CHUNK = 1 << 20
"""Bytes read per read call, and the size of the read buffer (a longer line grows it)."""
MAX_LINE_BYTES = 64 << 20
"""A line longer than this (64 MiB) is skipped without parsing (``too_long``)."""
HEAD_MAX_LINES = 2_000
"""Most records read from the start of a grown file to learn its session again (``read_head``)."""
RECORD_ERROR = "record_error"
"""``malformed_lines`` reason of a record whose reading raised (the record is skipped)."""


# --------------------------------------------------------------------------- reading a JSONL stream


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


# --------------------------------------------------------------------------- one streamed transcript file


class TranscriptParser:
    """What ``read_planned_file`` asks of a source's streaming parser, and what every such parser shares.

    A parser is fed one record at a time (``feed``), drafts ``turns`` (``current`` is the open one) and learns
    ``session_id`` and ``cwd``. Flags, set as the records reveal them, decide whether the session is skipped
    (``skip_reason``): ``not_a_session`` (the file is not a transcript of this source), ``subagent`` (a sub-agent's,
    review or compaction session: never the user's), ``headless`` (a non-interactive run: ``exec``, the SDK, ``-p``;
    skipped unless ``include_sdk_sessions``) and ``own_marker`` (a request is skillopt-sleep's
    own call: ``prompts.marker.is_own_request``).
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
        ``prompts.marker.is_own_request``, the ``SESSION_MARKER`` or a registered template's fixed text). Returns True
        when its turn is to be drafted, False while only the head is read."""
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
