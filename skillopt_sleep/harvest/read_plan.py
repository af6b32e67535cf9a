"""The read plan: which files a harvest reads and from where (the per-file checkpoint, the first night's lookback,
the scope), and what is skipped without being read.

``HarvestContext`` holds the settings one harvest applies to every file; ``plan_read`` decides, per file, whether it
is read (from which byte offset), left ``unchanged`` or ``too_old``; the checkpoint helpers record where the next
night resumes. No single file stops a harvest: one whose reading raises is skipped by ``read_isolated``
(``file_error``, in ``sessions_skipped``; its checkpoint moves to the file's current size and modification time, so
an unchanged file is not read again) and named in ``HarvestStats.errors``.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable, TypeVar

from skillopt_sleep.errors import HarvestError
from skillopt_sleep.models import FileCheckpoint, HarvestStats

FILE_ERROR = "file_error"
"""``sessions_skipped`` reason of a file whose reading raised (the file is skipped: ``read_isolated``)."""


# --------------------------------------------------------------------------- scope


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


def previous_byte_is_newline(path: Path, offset: int) -> bool:
    """True when the byte just before ``offset`` is a newline (the file still holds what was read before)."""
    if offset <= 0:
        return True
    with open(path, "rb") as handle:
        handle.seek(offset - 1)
        return handle.read(1) == b"\n"


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
