"""Retention: keep the newest ``keep_nights`` night directories of a project and delete older ones.

A night that is adopted and not reverted (or whose adoption is pending) is never deleted: ``revert`` needs its
record and its backups. Deleting a night also deletes its backups (``<state dir>/backups/<night id>/``).
A directory is first renamed to ``nights/.deleting-<id>`` and then removed, so a process killed halfway leaves
no half-deleted night that looks real; the leftovers are removed by the next prune.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from skillopt_sleep.review.adopt import night_sort_key, protected_nights
from skillopt_sleep.state import ProjectPaths

DELETING_PREFIX = ".deleting-"


def _remove(path: Path) -> None:
    if not path.exists():
        return
    trash = path.with_name(DELETING_PREFIX + path.name)
    path.rename(trash)
    shutil.rmtree(trash, ignore_errors=True)


def prune_nights(paths: ProjectPaths, keep: int) -> list[str]:
    """Delete all but the newest ``keep`` night directories of a project (and their backups).

    keep: >= 1 (``SleepConfig.keep_nights``). Nights adopted and not reverted are kept on top of the newest
    ``keep``. Call it with the project's night lock held (the night does, at its end). Returns the deleted night
    ids, oldest first. Raises ValueError when keep < 1; OSError when a directory cannot be removed.
    """
    if keep < 1:
        raise ValueError(f"keep must be >= 1, got {keep}")
    if not paths.nights.is_dir():
        return []
    for leftover in paths.nights.glob(DELETING_PREFIX + "*"):
        shutil.rmtree(leftover, ignore_errors=True)
    if paths.backups.is_dir():
        for leftover in paths.backups.glob(DELETING_PREFIX + "*"):
            shutil.rmtree(leftover, ignore_errors=True)
    nights = sorted((p.name for p in paths.nights.iterdir() if p.is_dir() and not p.name.startswith(".")),
                    key=night_sort_key)
    protected = protected_nights(paths)
    deleted = []
    for night_id in nights[:-keep]:
        if night_id in protected:
            continue
        _remove(paths.backups / night_id)
        _remove(paths.nights / night_id)
        deleted.append(night_id)
    return deleted
