"""Wall-clock seconds (and, given a meter, LLM calls) per stage: the one stage timer of the night and the step.

``StageClock.stage(name)`` is a context manager; each stage is logged at INFO on ``skillopt_sleep.stages`` and
announced to ``on_stage(name, "begin" | "end")`` (the night's progress display, the trainer's stage events).
Repeated stages add up.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

logger = logging.getLogger("skillopt_sleep.stages")


class StageClock:
    """seconds: stage -> wall-clock seconds (rounded to ms); calls: stage -> LLM calls made during it (only with a
    ``meter``: anything with a ``calls`` count, e.g. ``backends.base.CallMeter``), starting at 0 for ``stages``."""

    def __init__(self, meter: Any = None, on_stage: Callable[[str, str], None] | None = None,
                 stages: Iterable[str] = ()):
        self.meter = meter
        self.on_stage = on_stage
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {stage: 0 for stage in stages}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        logger.info("stage %s ...", name)
        if self.on_stage is not None:
            self.on_stage(name, "begin")
        calls = self.meter.calls if self.meter is not None else 0
        started = time.monotonic()
        try:
            yield
        finally:
            elapsed = time.monotonic() - started
            self.seconds[name] = round(self.seconds.get(name, 0.0) + elapsed, 3)
            if self.meter is not None:
                self.calls[name] = self.calls.get(name, 0) + self.meter.calls - calls
            logger.info("stage %s done in %.1fs", name, elapsed)
        if self.on_stage is not None:
            self.on_stage(name, "end")
