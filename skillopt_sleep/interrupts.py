"""SIGINT and SIGTERM during a night: stop it, record it, exit 128 + the signal's number.

``night_signals()`` installs, for the duration of its block only, handlers for SIGINT (Ctrl-C) and SIGTERM (a
shutdown, ``systemctl stop``, a suspend script) that raise ``errors.Interrupted`` in the main thread, and restores
the handlers that were there before when the block ends. The night catches it, records ``status: interrupted`` with
the stage it was in, and the CLI exits 130 (SIGINT) or 143 (SIGTERM).

``SignalGuard.hold()`` starts the night's last stretch (staging, adoption, diagnostics, checkpoints, state): from
then on a signal is held, not raised, so that those writes are never cut between one file and the next; a held
signal raises ``Interrupted`` (stage None: the night finished) when the block ends. Outside the main thread (where
Python cannot install handlers) the block does nothing.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from skillopt_sleep.errors import Interrupted

#: The signals a night stops on.
SIGNALS = (signal.SIGINT, signal.SIGTERM)


class SignalGuard:
    """What ``night_signals`` yields: ``hold()`` holds any later signal until the block ends; ``held`` is the
    signal held so far (None when none came)."""

    def __init__(self) -> None:
        self.holding = False
        self.held: int | None = None

    def hold(self) -> None:
        """From now until the block ends, a signal is held (the first one kept), not raised."""
        self.holding = True

    def handle(self, signum: int, frame: FrameType | None) -> None:
        if self.holding:
            if self.held is None:
                self.held = signum
            return
        self.holding = True  # a second signal while the night records the first one is held, not raised again
        raise Interrupted(signum)


@contextmanager
def night_signals() -> Iterator[SignalGuard]:
    """Within the block, SIGINT and SIGTERM raise ``Interrupted`` (or are held after ``hold()``); the previous
    handlers are restored when it ends. A signal held and not yet raised is raised as ``Interrupted`` (stage None)
    once the handlers are restored, unless the block is already ending with an exception."""
    guard = SignalGuard()
    if threading.current_thread() is not threading.main_thread():
        yield guard
        return
    previous: dict[int, Any] = {}
    try:
        for signum in SIGNALS:
            previous[signum] = signal.signal(signum, guard.handle)
        yield guard
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if guard.held is not None:
        raise Interrupted(guard.held)
