"""Task ids and the train / val / test split: a task keeps its id and its split every night.

The task id is ``task_id_for(the user's first message)`` (``t-`` + 12 hex of sha256 of the normalized request).
``assign_split`` puts a task in val when a hash of its id h < val_fraction, in test when h < val_fraction +
test_fraction, else in train; ``assign_splits`` adds the set-level rules (``tasks`` module docstring, step 9).

Lineage: a request that was ever train, on an earlier night or in another project, is never val or test again
(held-out must stay held out). Requests are matched by ``content_key`` (the normalized request), not by id, so a
re-typed near-copy (other case, whitespace, surrounding punctuation, format characters) under another id is the
same request. ``assign_splits(..., trained=keys)`` puts such tasks in train and the set-level rules never move
them out. The reverse is allowed: a task once val or test may later be train (the peer's rule is only "ever train
-> never held out"; the archive still marks it ``held_out`` so it is never recalled into reflection). The keys
come from the archives of every project (``archive.lineage``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection

from skillopt_sleep.models import Split, TaskRecord
from skillopt_sleep.text import normalize

#: Fewest tasks for which a test split is used at all.
MIN_TASKS_FOR_TEST = 5


def normalize_request(request: str) -> str:
    """``text.normalize`` (NFKC, no format characters), casefolded, whitespace collapsed, surrounding
    punctuation stripped."""
    text = normalize(request or "").casefold()
    return " ".join(text.split()).strip(" \t.,;:!?")


def content_key(request: str) -> str:
    """The lineage key of a request (``normalize_request``): requests with one key are one request for the
    train / held-out lineage, whatever their task ids or projects."""
    return normalize_request(request)


def task_id_for(request: str) -> str:
    """Return ``"t-"`` + the first 12 hex digits of sha256(normalized request)."""
    return "t-" + hashlib.sha256(normalize_request(request).encode("utf-8")).hexdigest()[:12]


def _unit_hash(task_id: str) -> float:
    """A number in [0, 1) from the task id (stable across nights and machines)."""
    return int(hashlib.sha256(task_id.encode("utf-8")).hexdigest()[:12], 16) / float(16**12)


def check_fractions(val_fraction: float, test_fraction: float) -> None:
    for name, value in (("val_fraction", val_fraction), ("test_fraction", test_fraction)):
        if not 0.0 <= value < 1.0:
            raise ValueError(f"{name} must be in [0, 1), got {value}")


def assign_split(task_id: str, val_fraction: float, test_fraction: float) -> Split:
    """Return the split of one task from a hash of its id: val if h < val_fraction, test if
    h < val_fraction + test_fraction, else train (h in [0, 1)). Raises ValueError for a fraction outside [0, 1).

    This is the per-task rule; ``mine_tasks`` adds the set-level rules (module docstring, step 8).
    """
    check_fractions(val_fraction, test_fraction)
    value = _unit_hash(task_id)
    if value < val_fraction:
        return "val"
    if value < val_fraction + test_fraction:
        return "test"
    return "train"


def _distance_to_val(task_id: str, val_fraction: float) -> float:
    """Circular distance of a task's hash to the val bucket [0, val_fraction)."""
    value = _unit_hash(task_id)
    if value < val_fraction:
        return 0.0
    return min(value - val_fraction, 1.0 - value)


def assign_splits(tasks: list[TaskRecord], val_fraction: float, test_fraction: float, *,
                  trained: Collection[str] = frozenset()) -> None:
    """Set ``split`` on every task (see the module docstring, step 8).

    trained: ``content_key``s of requests that were ever train (earlier nights, any project). A task whose
    request has one of them is train, and the set-level rules never move it to val or test (val may then stay
    empty). Never raises for an empty ``tasks``.
    """
    locked = {task.id for task in tasks if trained and content_key(task.request) in trained}
    for task in tasks:
        task.split = "train" if task.id in locked else assign_split(task.id, val_fraction, test_fraction)
    count = len(tasks)
    if count < 2:
        for task in tasks:
            task.split = "train"
        return
    if count < MIN_TASKS_FOR_TEST:
        for task in tasks:
            if task.split == "test":
                task.split = "train"

    def of(split: str) -> list[TaskRecord]:
        return [task for task in tasks if task.split == split and task.id not in locked]

    if val_fraction > 0 and not of("val"):
        pool = of("train") or of("test")
        if pool:
            chosen = min(pool, key=lambda task: (_distance_to_val(task.id, val_fraction), task.id))
            chosen.split = "val"
    if not of("train") and not locked:
        pool = of("test") or (of("val") if len(of("val")) >= 2 else [])
        if pool:
            chosen = max(pool, key=lambda task: (_unit_hash(task.id), task.id))
            chosen.split = "train"
