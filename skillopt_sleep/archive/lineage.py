"""Split lineage across nights and projects: a request that was ever train is never val or test again.

The task archives (``tasks.py``, one per project under ``<state dir>/projects/<key>/archive.sqlite3``) remember
every night's split of every task in ``sightings``. ``trained_keys`` reads, from every project's archive, the
requests with a ``train`` sighting and returns their ``mine.split.content_key`` (NFKC without format characters,
casefolded, whitespace collapsed): a near-copy re-typed under another id, or in another project, has the same key.
``hold_lineage`` re-runs the night's split (``assign_splits``, deterministic) with those keys, so that such a
task is train tonight and the set-level rules cannot move it to val or test.

No schema change: the keys are computed from the stored requests, so archives written by any earlier version
count. Other projects' archives are opened read-only (``mode=ro``; their night may be running); one that cannot
be read is skipped and named in ``Lineage.errors`` (the split then goes on with what could be read).
"""

from __future__ import annotations

import logging
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from skillopt_sleep.mine.split import assign_splits, content_key
from skillopt_sleep.models import TaskRecord

logger = logging.getLogger("skillopt_sleep.archive.lineage")

#: Seconds a read waits for another night's write to the same archive.
READ_TIMEOUT_S = 2.0

_TRAINED_REQUESTS = ("SELECT request FROM tasks WHERE EXISTS "
                     "(SELECT 1 FROM sightings WHERE sightings.task_id = tasks.id AND sightings.split = 'train')")


@dataclass
class Lineage:
    """What ``hold_lineage`` did: keys (content keys ever trained, all projects), moved (task ids that the hash
    put in val or test and the lineage put in train), errors (archives that could not be read, with why)."""

    keys: set[str] = field(default_factory=set)
    moved: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def report(self) -> dict:
        """``diagnostics.mining["lineage"]``: counts and the moved ids."""
        return {"trained_keys": len(self.keys), "moved_to_train": list(self.moved), "errors": list(self.errors)}


def trained_keys(projects_dir: Path) -> Lineage:
    """The content keys of every request that was ever train in any archive under ``projects_dir``
    (``<state dir>/projects``: ``*/archive.sqlite3``). A missing dir gives no keys; an unreadable archive is
    skipped and named in ``errors``. Never writes."""
    lineage = Lineage()
    for path in sorted(Path(projects_dir).glob("*/archive.sqlite3")):
        try:
            connection = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True, timeout=READ_TIMEOUT_S)
            try:
                lineage.keys.update(content_key(request) for (request,) in connection.execute(_TRAINED_REQUESTS))
            finally:
                connection.close()
        except sqlite3.Error as exc:  # damaged, locked, or made before the tables existed
            lineage.errors.append(f"{path.parent.name}: {exc}")
            logger.warning("split lineage: could not read %s (%s)", path, exc)
    return lineage


def hold_lineage(tasks: list[TaskRecord], *, projects_dir: Path, val_fraction: float,
                 test_fraction: float) -> Lineage:
    """Make every replayable task whose request was ever train (``trained_keys``) train tonight.

    tasks: tonight's mined tasks, splits already set by ``mine_tasks`` with the same fractions; the replayable
    ones are split again with ``assign_splits(..., trained=keys)`` (deterministic: a task the lineage does not
    touch keeps its split unless a set-level rule must fill the val slot a locked task left). Changes ``split``
    in place; returns the ``Lineage`` (``moved``: ids that were val or test and are now train).
    """
    lineage = trained_keys(projects_dir)
    replayable = [task for task in tasks if task.replayable]
    if not lineage.keys or not any(task.split != "train" and content_key(task.request) in lineage.keys
                                   for task in replayable):
        return lineage
    before = {task.id: task.split for task in replayable}
    assign_splits(replayable, val_fraction, test_fraction, trained=lineage.keys)
    lineage.moved = [task.id for task in replayable if before[task.id] != "train" and task.split == "train"
                     and content_key(task.request) in lineage.keys]
    return lineage
