"""One source's harvester run the way ``harvest()`` runs it, for the per-source tests (``test_harvest_*.py``).

``harvest_context`` builds the settings one harvest applies to every file (``read_plan.HarvestContext``);
``run_source`` reads one root with one source's reader and returns what the tests look at.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from skillopt_sleep.harvest.read_plan import HarvestContext
from skillopt_sleep.models import FileCheckpoint, HarvestStats, Session

SourceReader = Callable[[Path, HarvestContext, HarvestStats], list[Session]]
"""A source's ``read(root, context, stats)`` (``harvest.sources.Source.read``), e.g. ``aider.harvest_aider``."""


def harvest_context(*, scope: str = "all", project: str | Path | None = None,
                    checkpoints: dict[str, FileCheckpoint] | None = None, lookback_hours: float = 0,
                    now: datetime | None = None, include_sdk_sessions: bool = False, workers: int = 0
                    ) -> HarvestContext:
    """A ``HarvestContext`` as ``harvest()`` builds it; lookback_hours 0 (keep every turn) unless given."""
    return HarvestContext.build(scope=scope, project=Path(project) if project else None,
                                include_sdk_sessions=include_sdk_sessions, lookback_hours=lookback_hours,
                                checkpoints=checkpoints, now=now, new_checkpoints={}, workers=workers)


def run_source(read: SourceReader, root: Path, **options) -> tuple[list[Session], HarvestStats,
                                                                   dict[str, FileCheckpoint]]:
    """Harvest ``root`` with ``read`` under ``harvest_context(**options)``; returns (sessions, stats, the new
    checkpoints)."""
    context = harvest_context(**options)
    stats = HarvestStats()
    sessions = read(root, context, stats)
    return sessions, stats, context.new_checkpoints
