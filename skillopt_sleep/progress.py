"""Progress of a long job (a night, a training run, a model download), told by the library to whoever shows it.

The library calls a ``Progress``: ``stage(name)`` when a stage begins, ``calls(done, planned)`` and
``tokens(used)`` as LLM calls come back (``watch_meter`` wires a ``CallMeter`` to it), ``steps(done, total)``
for a training run, ``transfer(done, total)`` for a download, ``note(text)`` for a line worth keeping, and
``close()`` at the end. The default is ``NullProgress``, which does nothing: a night under cron, systemd or the
daemon shows nothing extra. This module holds only those events and their counts; showing them is the CLI's
(``cli.progress_view.RichProgress``, on stderr, only when it is a terminal, without ``--json`` or ``-q``).

``ProgressState`` holds the counts and makes the estimate of the time left; it takes a clock, for tests. The
estimate is rough: the rate since the first planned unit (byte, step or LLM call) times what is left, and the
planned LLM calls of a night are themselves an estimate (cache hits, rubric judging and gate resamples move it).
Both stay monotone: the calls shown never exceed the plan (``12/~40``, never ``20/~9``: past it the job is
re-planned), and the time left never rises without a re-plan and is never negative.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

Clock = Callable[[], float]
#: Past its planned LLM calls, a job is re-planned to this share of the calls done still to come (at least one).
REPLAN_SHARE = 0.1


@runtime_checkable
class Progress(Protocol):
    """What the library reports; every method must be cheap and may be called from worker threads."""

    def stage(self, name: str) -> None: ...

    def calls(self, done: int, planned: int | None = None) -> None: ...

    def tokens(self, used: int) -> None: ...

    def steps(self, done: int, total: int) -> None: ...

    def transfer(self, done: int, total: int | None) -> None: ...

    def note(self, text: str) -> None: ...

    def close(self) -> None: ...


class NullProgress:
    """Shows nothing (the default everywhere in the library)."""

    def stage(self, name: str) -> None:
        pass

    def calls(self, done: int, planned: int | None = None) -> None:
        pass

    def tokens(self, used: int) -> None:
        pass

    def steps(self, done: int, total: int) -> None:
        pass

    def transfer(self, done: int, total: int | None) -> None:
        pass

    def note(self, text: str) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> NullProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def watch_meter(meter: Any, progress: Progress, planned: int | None = None) -> None:
    """Report every call ``meter`` (a ``backends.base.CallMeter``) records to ``progress``: calls so far, out of
    ``planned`` (an estimate; None keeps the last one), and tokens so far."""

    def on_record(record: Any, calls: int, tokens: int) -> None:
        progress.calls(calls)
        progress.tokens(tokens)

    meter.on_record = on_record
    progress.calls(meter.calls, planned)
    progress.tokens(meter.tokens)


class ProgressState:
    """Counts, elapsed time and the estimate of the time left; not thread-safe by itself (a display locks it).

    The estimate follows the most precise measure there is: bytes (a download), else steps (training), else LLM
    calls against the planned ones (a night). Its rate is measured from the moment that measure got its total, so
    the minutes spent harvesting before the first call do not count as calls.
    """

    def __init__(self, clock: Clock = time.monotonic):
        self.clock = clock
        self.started = clock()
        self.stage = ""
        self.ended = False
        self.stage_started = self.started
        self.stage_first_call = 0
        self.calls_done = 0
        self.calls_planned: int | None = None
        self.tokens_used = 0
        self.steps_done = 0
        self.steps_total: int | None = None
        self.bytes_done = 0
        self.bytes_total: int | None = None
        self._origin: dict[str, tuple[float, int]] = {}  # measure -> (time, done) when its total became known
        self._lowest: tuple[tuple[str, int], float] | None = None  # ((measure, total), lowest estimate of that plan)

    # -- updates
    def begin_stage(self, name: str) -> tuple[str, float, int] | None:
        """Start stage ``name``; return the stage it ends as (name, seconds, LLM calls), or None."""
        now = self.clock()
        ended = None
        if self.stage:
            ended = (self.stage, now - self.stage_started, self.calls_done - self.stage_first_call)
        self.stage, self.stage_started, self.stage_first_call = name, now, self.calls_done
        return ended

    def end_stage(self) -> tuple[str, float, int] | None:
        """End the current stage (at the end of the job); return it as ``begin_stage`` does."""
        ended = self.begin_stage("")
        self.stage, self.ended = "", True
        self._replan_calls()
        return ended

    def set_calls(self, done: int, planned: int | None = None) -> None:
        """Calls done so far (never goes back: worker threads may report out of order) and, when given, a new plan.
        The plan never reads below what is done: at or past it, it is re-planned (``_replan_calls``)."""
        self.calls_done = max(self.calls_done, done)
        if planned is not None:
            self.calls_planned = planned
            self._origin.setdefault("calls", (self.clock(), self.calls_done))
        self._replan_calls()

    def _replan_calls(self) -> None:
        """Past the planned calls the plan was low: planned = done + an estimate of what is left (``REPLAN_SHARE``
        of the calls done, at least 1) while the job runs; done itself once it has ended."""
        if self.calls_planned is None:
            return
        if self.ended:
            self.calls_planned = self.calls_done
        elif self.calls_done >= self.calls_planned:
            self.calls_planned = self.calls_done + max(1, math.ceil(self.calls_done * REPLAN_SHARE))

    def set_steps(self, done: int, total: int) -> None:
        self.steps_done, self.steps_total = done, total
        self._origin.setdefault("steps", (self.clock(), done))

    def set_transfer(self, done: int, total: int | None) -> None:
        self.bytes_done, self.bytes_total = done, total
        self._origin.setdefault("bytes", (self.clock(), done))

    # -- reading
    def elapsed(self) -> float:
        return self.clock() - self.started

    def _measure(self) -> tuple[str, int, int | None]:
        if "bytes" in self._origin:
            return "bytes", self.bytes_done, self.bytes_total
        if "steps" in self._origin:
            return "steps", self.steps_done, self.steps_total
        return "calls", self.calls_done, self.calls_planned

    def remaining(self) -> float | None:
        """Seconds left (a rough estimate, never negative), 0 when done, None when there is nothing to go on yet.

        The estimate never rises while the plan stays the same (a slow call does not push it back up): it is the
        lowest one since the measure's total last changed; a new total (a re-plan) starts afresh. Reading it
        records that lowest estimate.
        """
        measure, done, total = self._measure()
        if measure not in self._origin or total is None:
            return None
        if done >= total:
            return 0.0
        since, done_then = self._origin[measure]
        if done <= done_then:
            return None
        estimate = max(0.0, (self.clock() - since) / (done - done_then) * (total - done))
        plan = (measure, total)
        if self._lowest is not None and self._lowest[0] == plan:
            estimate = min(estimate, self._lowest[1])
        self._lowest = (plan, estimate)
        return estimate

    def speed(self) -> float | None:
        """Bytes per second since the download began (None before any)."""
        if "bytes" not in self._origin:
            return None
        since, done_then = self._origin["bytes"]
        seconds = self.clock() - since
        return (self.bytes_done - done_then) / seconds if seconds > 0 and self.bytes_done > done_then else None


__all__ = ["Clock", "NullProgress", "Progress", "ProgressState", "watch_meter"]
