"""Pause Python's cyclic garbage collector while objects are made in bulk: a harvest and its mining, the imports.

Reading a long history makes hundreds of thousands of parsed records, and keeps tens of thousands of sessions, turns
and tool uses. None of them form reference cycles (reference counting frees them), yet every 700 allocations the
collector runs, and a few times it walks every object still alive: on the real-mix benchmark corpus, 0.11 s of a
1.2 s ``harvest`` command went to the collector, which found 26 objects to free (``docs/benchmarks.md``, "After:
the collector paused"). ``paused()`` turns it off for a block and back on after it, also on error;
``paused(keep=True)`` also sets aside what the block made and kept, for objects that live as long as the process
(the command line's imports).

Nested and concurrent blocks are counted: the collector comes back on when the last one ends, and only if it was on
when the first one began. Worker processes forked inside a block inherit it paused.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_restore = False


@contextmanager
def paused(*, keep: bool = False) -> Iterator[None]:
    """Run the block with the cyclic garbage collector disabled (``gc.disable``); restored when the outermost block
    ends. Objects made in the block that the block drops are still freed at once by reference counting; only
    garbage in reference cycles waits for the collector to run again.

    keep: on leaving, first move every object then alive to the permanent generation (``gc.freeze``), which no
    collection walks. For what lives as long as the process (the command line's imports: modules, classes, pydantic
    schemas): without it, the first collection after the block walks every one of them. Cycles that are garbage at
    that moment are never collected (after the command line's imports: a few hundred objects).
    """
    global _depth, _restore
    with _lock:
        if _depth == 0:
            _restore = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            if keep:
                gc.freeze()
            _depth -= 1
            if _depth == 0 and _restore:
                gc.enable()
