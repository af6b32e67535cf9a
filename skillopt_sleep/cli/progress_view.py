"""How the CLI shows a ``progress.Progress``: a live rich status line on stderr (``RichProgress``) and the text of
its fields (``status_parts``, ``format_seconds``, ``format_count``, ``format_bytes``).

The library only emits progress events and keeps their counts (``skillopt_sleep.progress``); this module, in the
CLI, renders them. ``common.make_progress`` decides whether a display is shown at all (a terminal, without
``--json`` or ``-q``); rich is imported only when a ``RichProgress`` is made.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from skillopt_sleep.progress import Clock, ProgressState


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
    """``950.0 MB``, ``1.20 GB`` (decimal units)."""
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB"


def status_parts(state: ProgressState) -> list[str]:
    """The status line's fields of ``state``, e.g. ``["rollout", "LLM calls 12/~40", "3.4k tokens", "0:12 elapsed",
    "~0:30 left"]``."""
    out = []
    if state.steps_total is not None:
        out.append(f"step {min(state.steps_done + 1, state.steps_total)}/{state.steps_total}"
                   + (f" {state.stage}" if state.stage else ""))
    else:
        out.append(state.stage or ("done" if state.ended else "starting"))
    if state.bytes_total is not None or state.bytes_done:
        total = f"/{format_bytes(state.bytes_total)}" if state.bytes_total else ""
        out.append(f"{format_bytes(state.bytes_done)}{total}")
        speed = state.speed()
        if speed:
            out.append(f"{format_bytes(speed)}/s")
    if state.calls_done or state.calls_planned:
        planned = f"/~{state.calls_planned}" if state.calls_planned else ""
        out.append(f"LLM calls {state.calls_done}{planned}")
    if state.tokens_used:
        out.append(f"{format_count(state.tokens_used)} tokens")
    out.append(f"{format_seconds(state.elapsed())} elapsed")
    left = state.remaining()
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
            parts = status_parts(self.state)
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
