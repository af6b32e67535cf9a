"""Progress of a long job (a night, a training run, a model download), told by the library to whoever shows it.

The library calls a ``Progress``: ``stage(name)`` when a stage begins, ``calls(done, planned)`` and
``tokens(used)`` as LLM calls come back (``watch_meter`` wires a ``CallMeter`` to it), ``steps(done, total)``
for a training run, ``transfer(done, total)`` for a download, ``note(text)`` for a line worth keeping, and
``close()`` at the end. The default is ``NullProgress``, which does nothing: a night under cron, systemd or the
daemon shows nothing extra. The CLI alone decides to show progress (``RichProgress``, on stderr, only when it is
a terminal, without ``--json`` or ``-q``); this module imports rich only when one is made.

``ProgressState`` holds the counts and makes the estimate of the time left; it takes a clock, for tests. The
estimate is rough: the rate since the first planned unit (byte, step or LLM call) times what is left, and the
planned LLM calls of a night are themselves an estimate (cache hits, rubric judging and gate resamples move it).
Both stay monotone: the calls shown never exceed the plan (``12/~40``, never ``20/~9``: past it the job is
re-planned), and the time left never rises without a re-plan and is never negative.
"""

from __future__ import annotations

import math
import threading
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


def format_seconds(seconds: float) -> str:
    """``0:07``, ``12:03``, ``1:02:03``."""
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def format_count(n: float) -> str:
    """``950``, ``3.4k``, ``1.2M``."""
    if n >= 1e6:
        return f"{n / 1e6:.1f}M"
    if n >= 1e4:
        return f"{n / 1e3:.0f}k"
    if n >= 1e3:
        return f"{n / 1e3:.1f}k"
    return str(int(n))


def format_bytes(n: float) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB"


class ProgressState:
    """Counts, elapsed time and the estimate of the time left; not thread-safe by itself (``RichProgress`` locks).

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

    def parts(self) -> list[str]:
        """The status line's fields, e.g. ``["rollout", "LLM calls 12/~40", "3.4k tokens", "0:12 elapsed",
        "~0:30 left"]``."""
        out = []
        if self.steps_total is not None:
            out.append(f"step {min(self.steps_done + 1, self.steps_total)}/{self.steps_total}"
                       + (f" {self.stage}" if self.stage else ""))
        else:
            out.append(self.stage or ("done" if self.ended else "starting"))
        if self.bytes_total is not None or self.bytes_done:
            total = f"/{format_bytes(self.bytes_total)}" if self.bytes_total else ""
            out.append(f"{format_bytes(self.bytes_done)}{total}")
            speed = self.speed()
            if speed:
                out.append(f"{format_bytes(speed)}/s")
        if self.calls_done or self.calls_planned:
            planned = f"/~{self.calls_planned}" if self.calls_planned else ""
            out.append(f"LLM calls {self.calls_done}{planned}")
        if self.tokens_used:
            out.append(f"{format_count(self.tokens_used)} tokens")
        out.append(f"{format_seconds(self.elapsed())} elapsed")
        left = self.remaining()
        if left is not None:
            out.append(f"~{format_seconds(left)} left")
        return out


class RichProgress:
    """A live status line on ``console`` (a rich Console, stderr): spinner, stage, LLM calls done / planned,
    tokens, elapsed, the time left, and a bar for a download. stage_lines: print a line as each stage ends (its
    seconds and calls), kept above the status line. Use as a context manager; the status line is removed at the
    end and one line says what the job took."""

    def __init__(self, console: Any, *, clock: Clock = time.monotonic, stage_lines: bool = True,
                 refresh_per_second: float = 8):
        from rich.live import Live
        from rich.spinner import Spinner

        self.console = console
        self.state = ProgressState(clock)
        self.stage_lines = stage_lines
        self._lock = threading.Lock()
        self._spinner = Spinner("dots", style="cyan")
        self._live = Live(console=console, get_renderable=self._render, transient=True,
                          refresh_per_second=refresh_per_second, redirect_stdout=False, redirect_stderr=False)
        self._started = False

    def __enter__(self) -> RichProgress:
        self._live.start()
        self._started = True
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _render(self) -> Any:
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        with self._lock:
            parts = self.state.parts()
            done, total = self.state.bytes_done, self.state.bytes_total
        grid = Table.grid(padding=(0, 1))
        self._spinner.update(text=Text(parts[0], style="bold"))
        cells: list[Any] = [self._spinner]
        if total:
            cells.append(ProgressBar(total=total, completed=done, width=30))
        cells.append(Text(" · ".join(parts[1:]), style="dim"))
        grid.add_row(*cells)
        return grid

    def _print_ended(self, ended: tuple[str, float, int] | None) -> None:
        if ended is None or not self.stage_lines or not ended[0]:
            return
        name, seconds, calls = ended
        extra = f", {calls} LLM call{'s' if calls != 1 else ''}" if calls else ""
        self.console.print(f"[green]✓[/green] {name} [dim]({seconds:.1f} s{extra})[/dim]", highlight=False)

    def stage(self, name: str) -> None:
        with self._lock:
            if name == self.state.stage:
                return
            ended = self.state.begin_stage(name)
        self._print_ended(ended)
        if self._started:
            self._live.refresh()  # show the new stage at once, not at the next tick

    def calls(self, done: int, planned: int | None = None) -> None:
        with self._lock:
            self.state.set_calls(done, planned)

    def tokens(self, used: int) -> None:
        with self._lock:
            self.state.tokens_used = max(self.state.tokens_used, used)

    def steps(self, done: int, total: int) -> None:
        with self._lock:
            self.state.set_steps(done, total)

    def transfer(self, done: int, total: int | None) -> None:
        with self._lock:
            self.state.set_transfer(done, total)

    def note(self, text: str) -> None:
        self.console.print(text, highlight=False, markup=False)

    def close(self) -> None:
        if not self._started:
            return
        self._started = False
        with self._lock:
            ended = self.state.end_stage()
            calls, tokens, elapsed = self.state.calls_done, self.state.tokens_used, self.state.elapsed()
        self._print_ended(ended)
        self._live.stop()
        spent = f"{calls} LLM call{'s' if calls != 1 else ''}, {format_count(tokens)} tokens, " if calls else ""
        self.console.print(f"[dim]{spent}{format_seconds(elapsed)} in all[/dim]", highlight=False)


__all__ = ["NullProgress", "Progress", "ProgressState", "RichProgress", "format_seconds", "watch_meter"]
