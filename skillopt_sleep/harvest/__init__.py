"""Transcript harvesters, one module per source (``sources.REGISTRY``), and ``harvest()`` that runs them.

``harvest`` reads every requested source, applies the scope (project: the session's cwd is the project or below
it; all: every session), the per-file checkpoints (only what was appended since the last completed night) and, on
the first night, the lookback window; it returns the sessions, merged and per-source counts, and the new
checkpoint map that the caller persists only once the night completes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from skillopt_sleep import collector
from skillopt_sleep.errors import HarvestError
from skillopt_sleep.harvest.read_plan import HarvestContext
from skillopt_sleep.harvest.sources import REGISTRY, parse_sources, resolve_root
from skillopt_sleep.models import FileCheckpoint, HarvestStats, Session

#: The sources this version reads, in order (``sources.REGISTRY``).
SOURCES = tuple(REGISTRY)
#: ``sessions_skipped`` reason of a source whose reading raised outside its per-file reads (``harvest``).
SOURCE_ERROR = "source_error"


@dataclass
class HarvestResult:
    """What one harvest read.

    sessions: sessions with at least one request (texts redacted); stats: all sources merged;
    sources: the sources that were read; per_source: stats by source;
    checkpoints: the new checkpoint map (key: absolute file path) to persist when the night completes;
    agent_answers: answers of sub-agent sessions read but not kept (Cline / Roo / Kilo sub-tasks), for mining to
    recognise them when the user pastes one back (``mine_tasks(agent_answers=...)``).
    """

    sessions: list[Session] = field(default_factory=list)
    stats: HarvestStats = field(default_factory=HarvestStats)
    sources: list[str] = field(default_factory=list)
    per_source: dict[str, HarvestStats] = field(default_factory=dict)
    checkpoints: dict[str, FileCheckpoint] = field(default_factory=dict)
    agent_answers: list[str] = field(default_factory=list)


def resolve_claude_home(explicit: Path | None) -> Path:
    """Claude Code root: ``explicit`` > ``$CLAUDE_CONFIG_DIR`` > ``~/.claude`` (absolute, ``~`` expanded)."""
    return resolve_root("claude", explicit)


def resolve_codex_home(explicit: Path | None) -> Path:
    """Codex CLI root: ``explicit`` > ``$CODEX_HOME`` > ``~/.codex`` (absolute, ``~`` expanded)."""
    return resolve_root("codex", explicit)


def harvest(*, source: str = "auto", scope: str = "project", project: Path | None = None,
            claude_home: Path | None = None, codex_home: Path | None = None,
            homes: dict[str, Path | None] | None = None,
            include_sdk_sessions: bool = False, lookback_hours: float = 72.0,
            checkpoints: dict[str, FileCheckpoint] | None = None, now: datetime | None = None,
            workers: int = 0) -> HarvestResult:
    """Read the transcripts of ``source`` and return a ``HarvestResult``.

    source: ``auto`` (every source whose root holds session files), ``all``, one source name or several separated
    by commas (``sources.parse_sources``). A source asked for explicitly is listed in ``sources`` even when it has
    no sessions (never a silent fallback). homes: source name -> root to read (None or missing: its default,
    ``sources.resolve_root``); claude_home / codex_home: the same for those two. scope: ``project`` (needs
    ``project``) or ``all``. lookback_hours: first night only (``checkpoints is None``): turns older than
    ``now - lookback_hours`` are dropped; 0 keeps all. now: aware datetime (default: UTC now). workers: processes
    that read a big source's files (``harvest.workers``; 0: one per core, 1: one loop).
    Raises HarvestError for an unknown source or scope, ``scope="project"`` without a project, or a source root
    that exists but cannot be listed. Malformed files and lines never raise: they are counted in the stats, and so is
    an exception raised while a record, a file or (last resort) a whole source is read (``record_error``,
    ``file_error``, ``source_error``: ``read_plan.read_isolated``); a source that raised keeps last night's checkpoints.
    """
    if scope not in ("project", "all"):
        raise HarvestError(f"unknown scope {scope!r}; use 'project' or 'all'")
    if scope == "project" and project is None:
        raise HarvestError("scope 'project' needs a project directory; pass --project or use --scope all")
    explicit = {"claude": claude_home, "codex": codex_home, **{k: v for k, v in (homes or {}).items() if v}}
    roots = {name: resolve_root(name, explicit.get(name), project) for name in REGISTRY}
    named = parse_sources(source)
    selected = named if named is not None else [name for name, spec in REGISTRY.items()
                                                if spec.has_sessions(roots[name])]
    result = HarvestResult(sources=selected)
    context = HarvestContext.build(scope=scope, project=project, include_sdk_sessions=include_sdk_sessions,
                                   lookback_hours=lookback_hours, checkpoints=checkpoints, now=now,
                                   new_checkpoints=result.checkpoints, workers=workers)
    failed: set[str] = set()
    with collector.paused():  # records in bulk, no reference cycles (collector.py)
        for name in selected:
            stats = HarvestStats()
            found = _read_source(name, roots[name], context, stats)
            if found is None:
                failed.add(name)
            else:
                result.sessions.extend(found)
            result.per_source[name] = stats
            result.stats.merge(stats)
    result.agent_answers = context.agent_answers
    # Files outside tonight's roots (another source, another root) keep last night's checkpoints, so reading them
    # again later resumes there; files that vanished from a root read tonight are dropped. A source that raised
    # keeps last night's checkpoints too.
    read_roots = tuple(str(roots[name]).rstrip(os.sep) + os.sep for name in selected if name not in failed)
    for key, checkpoint in (checkpoints or {}).items():
        if not key.startswith(read_roots):
            result.checkpoints.setdefault(key, checkpoint)
    return result


def _read_source(name: str, root: Path, context: HarvestContext, stats: HarvestStats) -> list[Session] | None:
    """``REGISTRY[name].read``; None when it raised anything but HarvestError or MemoryError (a bug outside the
    per-file reads, which contain their own errors): counted as ``source_error`` and named in ``stats.errors``, its
    checkpoints written so far dropped."""
    before = dict(context.new_checkpoints)
    try:
        return REGISTRY[name].read(root, context, stats)
    except (HarvestError, MemoryError):
        raise
    except Exception as error:
        stats.skip(SOURCE_ERROR)
        stats.error(SOURCE_ERROR, f"{name} {root}", error)
        context.new_checkpoints.clear()
        context.new_checkpoints.update(before)
        return None


def harvest_for_config(config, *, project: Path, checkpoints: dict[str, FileCheckpoint] | None,
                       now: datetime | None = None) -> HarvestResult:
    """Run ``harvest`` with the sources, scope, roots and lookback of a ``SleepConfig`` (night and preview alike)."""
    return harvest(
        source=config.source,
        scope=config.scope,
        project=project if config.scope == "project" else None,
        homes=config.homes(),
        include_sdk_sessions=config.include_sdk_sessions,
        lookback_hours=config.lookback_hours,
        checkpoints=checkpoints,
        now=now,
        workers=config.harvest_workers,
    )
