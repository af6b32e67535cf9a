"""``skillopt-sleep harvest``: what a night would read, without advancing the checkpoint or calling a model.

``preview_harvest`` returns a ``HarvestPreview``; ``HarvestPreview.model_dump(mode="json")`` is what
``skillopt-sleep harvest --json`` prints, and ``HarvestPreview.model_json_schema()`` documents it.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from skillopt_sleep import collector
from skillopt_sleep.config import SleepConfig
from skillopt_sleep.fsio import write_jsonl_atomic
from skillopt_sleep.harvest import harvest_for_config
from skillopt_sleep.harvest.checkpoint import load_checkpoints
from skillopt_sleep.models import Check, HarvestStats, RuleStatement, Session, TaskRecord
from skillopt_sleep.paths import ProjectPaths


class _View(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class PreviewSession(_View):
    """One session a night would read (its texts are not shown)."""

    source: str
    """The transcript source (``harvest.sources.SOURCE_NAMES``)."""
    session_id: str
    path: str
    """The transcript file (or database) it was read from."""
    cwd: str | None
    """The directory the agent ran in (None: the transcript does not say)."""
    requests: int
    """Turns with a user request kept from it."""
    started_at: str | None
    """Its first timestamp (ISO 8601, UTC); None when no record had one."""

    @classmethod
    def of(cls, session: Session) -> PreviewSession:
        started = session.started_at.isoformat() if session.started_at else None
        return cls(source=session.source, session_id=session.session_id, path=session.path, cwd=session.cwd,
                   requests=len(session.turns), started_at=started)


class PreviewTask(_View):
    """One mined task (``models.TaskRecord``), as the preview lists it."""

    id: str
    split: str
    """``train``, ``val`` or ``test`` (a task that is not replayable is evidence only, never replayed)."""
    recurrence: int
    """How many near-duplicate requests were merged into it."""
    reaction: str
    """How the user reacted to the answer (``models.Reaction``)."""
    request_head: str
    """The first 100 characters of the request, newlines as spaces."""
    rules: list[RuleStatement]
    """The rules the user stated in it."""
    replayable: bool
    not_replayable: str | None
    """Why it cannot be replayed (``models.NotReplayable``); None when it can."""
    hard_evidence: bool
    """Its validated checks can decide the gate (else it is judged by its rubric: soft evidence)."""
    checks: list[Check]
    """The checks it is judged by."""
    rejected_checks: list[str]
    """Checks dropped at mining time, each with its reason."""

    @classmethod
    def of(cls, task: TaskRecord) -> PreviewTask:
        return cls(id=task.id, split=task.split, recurrence=task.recurrence, reaction=task.evidence.reaction,
                   request_head=task.request[:100].replace("\n", " "), rules=list(task.rules),
                   replayable=task.replayable, not_replayable=task.not_replayable, hard_evidence=task.hard_evidence,
                   checks=list(task.judge.checks), rejected_checks=list(task.rejected_checks))


class HarvestPreview(_View):
    """What a night would read and mine tonight (``skillopt-sleep harvest``; ``--json`` prints it)."""

    sources: list[str]
    """The sources read (those asked for, or found by ``auto``)."""
    harvest: HarvestStats
    """What was read and skipped, all sources merged."""
    per_source: dict[str, HarvestStats]
    """Source -> what was read and skipped in it."""
    sessions: list[PreviewSession]
    tasks: list[PreviewTask]


def preview_harvest(config: SleepConfig, *, project: Path, output: Path | None = None) -> HarvestPreview:
    """Harvest and mine with the night's sources, scope, checkpoint and lookback; change nothing.

    Returns a ``HarvestPreview``: the sources read, what was read and skipped (merged and per source), the sessions
    and the mined tasks (each says whether it can be replayed and why not, whether it is hard evidence, its checks
    and the checks dropped). output: when set, the mined TaskRecords are written there as JSONL (mode 0600).
    Raises HarvestError as ``harvest.harvest`` does.
    """
    # The sessions are dropped when _preview returns, before the collector is back: it never walks them (collector.py).
    with collector.paused():
        return _preview(config, Path(project).expanduser().resolve(), output)


def _preview(config: SleepConfig, project: Path, output: Path | None) -> HarvestPreview:
    paths = ProjectPaths(project)
    result = harvest_for_config(config, project=project, checkpoints=load_checkpoints(paths.checkpoints))
    tasks = []
    if result.sessions:  # nothing new: no session, nothing to mine, and the mining modules are not even imported
        from skillopt_sleep.mine import mine_for_config

        tasks = mine_for_config(result, config, project=str(project)).tasks
    if output is not None:
        write_jsonl_atomic(Path(output), [t.model_dump(mode="json") for t in tasks], mode=0o600)
    return HarvestPreview(
        sources=result.sources,
        harvest=result.stats,
        per_source=dict(result.per_source),
        sessions=[PreviewSession.of(session) for session in result.sessions],
        tasks=[PreviewTask.of(task) for task in tasks],
    )
