"""Read a source's transcript files in worker processes when there is much to read.

``read_files(paths, read_one, context, stats)`` returns the sessions ``read_one(path, context, stats)`` returns for
``paths``, in path order (None dropped), and leaves ``context.new_checkpoints``, ``context.agent_answers`` and
``stats`` as one loop over the paths would. Each file is read through ``read_plan.read_isolated``: one that raises is
counted (``file_error``) and skipped, in a worker as in one loop. The parsing of a transcript is pure Python, one
record at a time, so a first night over a long history is bound by one core; worker processes split the files between
the cores.

When: at least ``PARALLEL_MIN_BYTES`` left to read (file sizes less their checkpoint offsets), more than one file,
more than one core and a POSIX system. The workers are forked (they inherit the imported modules, so they start in
milliseconds). Forking beside other threads can leave a lock held in the child, so a process that runs other
threads (``run-now`` drawing progress on a terminal) has them forked by a ``forkserver`` instead: a fresh
single-threaded process that imports the harvesters once (about 0.15 s, once per process), used from
``FORKSERVER_MIN_BYTES`` left to read. A forkserver's workers import the program's ``__main__`` again
(multiprocessing's "safe importing of main module"), so this is done only when ``__main__`` is this package's command
line (``skillopt-sleep``, ``python -m skillopt_sleep``); a library caller with other threads gets one loop.
``context.workers`` (config ``harvest_workers``): the number of workers (``1``: always one loop; ``0``: one per core,
at most ``MAX_WORKERS``); a number set there splits the files whatever their size.

Each worker reads contiguous runs of files (``CHUNKS_PER_WORKER`` runs per worker, cut by bytes) with a fresh copy
of the context and its own stats; the parent merges them in order. A worker that dies (killed, out of memory)
raises ``BrokenProcessPool`` (a forkserver that cannot start, ``OSError``), and the files are then read again in one
loop: nothing is lost or counted twice. The sessions come back as ``Session.model_dump()`` dicts and are validated
again in the parent: on the real-mix benchmark corpus (343 sessions, 3,058 turns, 42,000 tool uses) that is 0.11 s
of CPU instead of 0.20 s for pickling the model objects themselves, and the same sessions.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from skillopt_sleep import collector
from skillopt_sleep.harvest.read_plan import HarvestContext, read_isolated
from skillopt_sleep.models import FileCheckpoint, HarvestStats, Session

#: Bytes left to read from which the files are split between worker processes.
PARALLEL_MIN_BYTES = 32 * 1024 * 1024
#: The same when other threads run and a forkserver must start first (~0.15 s; docs/benchmarks.md, "forkserver").
FORKSERVER_MIN_BYTES = 128 * 1024 * 1024
#: Most worker processes (more add little: the files are read from the page cache or one disk).
MAX_WORKERS = 8
#: Runs of files per worker (several, so that one worker's big files do not leave the others idle).
CHUNKS_PER_WORKER = 4

ReadOne = Callable[[Path, HarvestContext, HarvestStats], "Session | None"]
_Chunk = tuple[list[dict], HarvestStats, dict[str, FileCheckpoint], list[str]]

# What a worker reads, set in it by ``_start_worker`` (inherited when forked, sent once when started by a forkserver),
# so that each task sends only chunk bounds.
_job: tuple[list[Path], ReadOne, HarvestContext] | None = None


def read_files(paths: list[Path], read_one: ReadOne, context: HarvestContext, stats: HarvestStats) -> list[Session]:
    """The sessions ``read_one`` returns for ``paths``, in order; see the module docstring."""
    workers, left, method = _workers(paths, context)
    if workers > 1:
        # multiprocessing is imported only here: ~13 ms that a night with little to read does not pay
        from concurrent.futures.process import BrokenProcessPool

        try:
            return _read_in_workers(paths, read_one, context, stats, _chunks(left, workers * CHUNKS_PER_WORKER),
                                    workers, method)
        except (BrokenProcessPool, OSError):
            pass  # nothing of the workers was merged: read everything in this process
    return [session for path in paths if (session := read_isolated(path, context, stats, read_one)) is not None]


def _workers(paths: list[Path], context: HarvestContext) -> tuple[int, list[int], str]:
    """(worker processes to use, 1 for one loop; the bytes left per file, which the chunks are cut by: empty when
    one loop is decided before any file is stat-ed; the start method, ``fork`` or ``forkserver``)."""
    workers = context.workers or min(os.cpu_count() or 1, MAX_WORKERS)
    if workers < 2 or len(paths) < 2 or os.name != "posix":
        return 1, [], "fork"
    method = "fork" if threading.active_count() == 1 else "forkserver"
    if method == "forkserver":
        from multiprocessing import get_all_start_methods

        if not (_main_is_ours() and method in get_all_start_methods()):
            return 1, [], method
    left = _bytes_left(paths, context)
    if not context.workers and sum(left) < (PARALLEL_MIN_BYTES if method == "fork" else FORKSERVER_MIN_BYTES):
        return 1, left, method
    return min(workers, len(paths)), left, method


def _main_is_ours() -> bool:
    """Whether ``__main__`` is this package's command line, which a forkserver's workers may import again: ``python
    -m skillopt_sleep`` or the ``skillopt-sleep`` console script (both run ``cli.main`` under a ``__name__`` guard)."""
    main = sys.modules.get("__main__")
    name = getattr(getattr(main, "__spec__", None), "name", None)
    if name is not None:
        return name == "skillopt_sleep.__main__"
    return Path(getattr(main, "__file__", None) or "").name in ("skillopt-sleep", "skillopt-sleep.exe")


def _bytes_left(paths: list[Path], context: HarvestContext) -> list[int]:
    """Per file, the bytes left to read: its size less its checkpoint's offset (0 when it cannot be stat-ed)."""
    old = context.old_checkpoints or {}
    left = []
    for path in paths:
        try:
            size = path.stat().st_size
        except OSError:
            size = 0
        previous = old.get(str(path))
        left.append(max(0, size - previous.offset) if previous is not None and previous.offset > 0 else size)
    return left


def _chunks(weights: list[int], count: int) -> list[tuple[int, int]]:
    """``count`` contiguous runs of the files of ``weights`` (bytes left per file) of about equal bytes, as (start,
    end) index pairs (none empty)."""
    sizes = [weight + 1 for weight in weights]
    target = sum(sizes) / count
    bounds, start, filled = [], 0, 0.0
    for index, size in enumerate(sizes):
        filled += size
        if filled >= target * (len(bounds) + 1) and index + 1 < len(sizes):
            bounds.append((start, index + 1))
            start = index + 1
    bounds.append((start, len(sizes)))
    return bounds


def _read_in_workers(paths: list[Path], read_one: ReadOne, context: HarvestContext, stats: HarvestStats,
                     bounds: list[tuple[int, int]], workers: int, method: str = "fork") -> list[Session]:
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    start = get_context(method)
    if method == "forkserver":
        start.set_forkserver_preload(["skillopt_sleep.harvest"])  # takes effect when the server starts
    # What every worker starts from: the settings, with nothing read yet (a forkserver pickles it once per worker).
    blank = replace(context, new_checkpoints={}, read_buffer=bytearray(), scope_by_cwd=dict(context.scope_by_cwd),
                    agent_answers=[])
    chunks = []
    with ProcessPoolExecutor(max_workers=workers, mp_context=start, initializer=_start_worker,
                             initargs=(paths, read_one, blank)) as pool:
        # each chunk's sessions are rebuilt as it arrives, while the workers read the next ones; nothing is merged
        # into stats or context before every chunk is in (a worker that dies leaves them untouched)
        for found, chunk_stats, checkpoints, answers in pool.map(_read_chunk, bounds):
            chunks.append(([Session.model_validate(data) for data in found], chunk_stats, checkpoints, answers))
    sessions: list[Session] = []
    for found, chunk_stats, checkpoints, answers in chunks:
        sessions.extend(found)
        stats.merge(chunk_stats)
        context.new_checkpoints.update(checkpoints)
        context.agent_answers.extend(answers)
    return sessions


def _start_worker(paths: list[Path], read_one: ReadOne, context: HarvestContext) -> None:
    """A worker's initializer: remember what its chunks are cut from."""
    global _job
    _job = (paths, read_one, context)


def _read_chunk(bounds: tuple[int, int]) -> _Chunk:
    """In a worker: read ``paths[start:end]`` with a fresh copy of the context and stats."""
    assert _job is not None, "_start_worker runs first in every worker"
    paths, read_one, blank = _job
    context = replace(blank, new_checkpoints={}, read_buffer=bytearray(), scope_by_cwd=dict(blank.scope_by_cwd),
                      agent_answers=[])
    stats = HarvestStats()
    start, end = bounds
    with collector.paused():  # as in the parent's harvest (a forkserver's worker starts with the collector on)
        found = [session for path in paths[start:end]
                 if (session := read_isolated(path, context, stats, read_one)) is not None]
    # Sessions travel as plain dicts: pickle copies them in C and pydantic rebuilds the models in Rust, less work
    # on both sides than pickling tens of thousands of model objects one by one (module docstring).
    return [session.model_dump() for session in found], stats, context.new_checkpoints, context.agent_answers
