"""``skillopt-sleep harvest``: what a night would read, without advancing the checkpoint or calling a model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from skillopt_sleep import collector
from skillopt_sleep.config import SleepConfig
from skillopt_sleep.fsio import write_jsonl_atomic
from skillopt_sleep.harvest import harvest_for_config
from skillopt_sleep.harvest.checkpoint import load_checkpoints
from skillopt_sleep.state import ProjectPaths


def preview_harvest(config: SleepConfig, *, project: Path, output: Path | None = None) -> dict[str, Any]:
    """Harvest and mine with the night's sources, scope, checkpoint and lookback; change nothing.

    Returns ``{"sources", "harvest" (HarvestStats as dict, all sources), "per_source" (source -> HarvestStats as
    dict), "sessions": [...], "tasks": [...]}``; each task says
    whether it can be replayed (and why not), whether it is hard evidence, its checks and the checks dropped.
    output: when set, the mined TaskRecords are written there as JSONL (mode 0600).
    """
    # The sessions are dropped when _preview returns, before the collector is back: it never walks them (collector.py).
    with collector.paused():
        return _preview(config, Path(project).expanduser().resolve(), output)


def _preview(config: SleepConfig, project: Path, output: Path | None) -> dict[str, Any]:
    paths = ProjectPaths(project)
    result = harvest_for_config(config, project=project, checkpoints=load_checkpoints(paths.checkpoints))
    tasks = []
    if result.sessions:  # nothing new: no session, nothing to mine, and the mining modules are not even imported
        from skillopt_sleep.mine import mine_for_config

        tasks = mine_for_config(result, config, project=str(project)).tasks
    if output is not None:
        write_jsonl_atomic(Path(output), [t.model_dump(mode="json") for t in tasks], mode=0o600)
    return {
        "sources": result.sources,
        "harvest": result.stats.model_dump(mode="json"),
        "per_source": {name: stats.model_dump(mode="json") for name, stats in result.per_source.items()},
        "sessions": [
            {"source": s.source, "session_id": s.session_id, "path": s.path, "cwd": s.cwd,
             "requests": len(s.turns), "started_at": s.started_at.isoformat() if s.started_at else None}
            for s in result.sessions
        ],
        "tasks": [
            {"id": t.id, "split": t.split, "recurrence": t.recurrence, "reaction": t.evidence.reaction,
             "request_head": t.request[:100].replace("\n", " "),
             "rules": [rule.model_dump(mode="json") for rule in t.rules],
             "replayable": t.replayable, "not_replayable": t.not_replayable, "hard_evidence": t.hard_evidence,
             "checks": [c.model_dump(mode="json") for c in t.judge.checks], "rejected_checks": t.rejected_checks}
            for t in tasks
        ],
    }
