"""The slow update (``slow_update_every`` N > 0): every N nights, look for what the documents forgot.

Each completed night records the documents it replayed and the ones it accepted (``record_night_documents``:
``ProjectState.document_history``, texts in the ``DocumentStore``). The slow update is due when N nights have
passed since the last one (``is_due``). It then takes the documents of N nights ago (the latest history entry
at least N nights old, else the oldest), and when they differ from tonight's baseline it replays a sample of at
most ``slow_update_max_tasks`` archived TRAIN tasks (never val or test; not tonight's tasks; those that passed
with the old documents in their score history first, then the most recurrent) once with each. A task that
passed with the old documents (hard 1) and fails now (hard 0) was forgotten: it joins tonight's train tasks,
and ``context`` shows the optimizer the contrast (the lines of the old documents that are gone), so the step
proposes repairs that go through the gate like any other edit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from skillopt_sleep.archive.docstore import DocumentStore
from skillopt_sleep.archive.tasks import ArchivedTask, TaskArchive
from skillopt_sleep.documents.targets import prompt_views
from skillopt_sleep.engine.replay import Replayer, replay_tasks
from skillopt_sleep.hashing import sha256_text
from skillopt_sleep.models import EditRecord, ReplayResult, TaskRecord
from skillopt_sleep.state import NightDocuments, ProjectState

#: Night entries kept in ``ProjectState.document_history``.
HISTORY_NIGHTS = 60
#: Removed lines of the old documents shown in the context.
MAX_GONE_LINES = 12


@dataclass
class SlowUpdate:
    """What the slow update did. ran: replays were made; reason: why not, or what it compared; compared_night:
    the night whose documents were replayed; sampled / forgotten: task ids; forgotten_tasks: those tasks, for
    tonight's train set; context: the contrast for the reflect prompts."""

    ran: bool
    reason: str
    compared_night: str | None = None
    sampled: list[str] = field(default_factory=list)
    forgotten: list[str] = field(default_factory=list)
    forgotten_tasks: list[TaskRecord] = field(default_factory=list)
    context: str = ""

    def report(self, edits: list[EditRecord] | None = None) -> dict[str, Any]:
        """The diagnostics entry; ``repairs``: tonight's edits whose evidence names a forgotten task."""
        forgotten = set(self.forgotten)
        repairs = [edit.content for edit in edits or [] if forgotten & set(edit.evidence)]
        return {"ran": self.ran, "reason": self.reason, "compared_night": self.compared_night,
                "sampled": list(self.sampled), "forgotten": list(self.forgotten), "repairs": repairs}


def is_due(state: ProjectState, every: int) -> bool:
    """True when ``every`` > 0 and at least ``every`` nights passed since the last slow update (tonight is
    night ``state.nights_completed + 1``)."""
    return every > 0 and state.nights_completed + 1 - state.slow_update_at >= every


def record_night_documents(state: ProjectState, store: DocumentStore, *, night_id: str,
                           baseline: dict[str, str], accepted: dict[str, str] | None) -> None:
    """Append tonight's documents (kind -> text) to ``state.document_history`` (texts into ``store``), keep the
    latest ``HISTORY_NIGHTS`` entries, and prune the texts nothing refers to any more."""
    entry = NightDocuments(night_id=night_id, number=state.nights_completed + 1,
                           baseline={kind: store.put(text) for kind, text in baseline.items()},
                           accepted={kind: store.put(text) for kind, text in (accepted or {}).items()})
    state.document_history = [*state.document_history, entry][-HISTORY_NIGHTS:]
    keep = {digest for night in state.document_history for digest in [*night.baseline.values(),
                                                                      *night.accepted.values()]}
    keep |= set(state.best_documents.values()) | set(state.current_documents.values())
    if state.pending is not None:
        keep |= set(state.pending.documents.values()) | set(state.pending.baseline.values())
    store.prune(keep)


def _old_entry(state: ProjectState, every: int) -> NightDocuments | None:
    tonight = state.nights_completed + 1
    history = state.document_history
    old_enough = [entry for entry in history if entry.number <= tonight - every]
    if old_enough:
        return old_enough[-1]
    return history[0] if history else None


def _gone_lines(old: dict[str, str], new: dict[str, str]) -> list[str]:
    out = []
    for kind, text in old.items():
        remaining = {" ".join(line.split()) for line in new.get(kind, "").splitlines()}
        for line in text.splitlines():
            flat = " ".join(line.split())
            if flat and not flat.startswith("<!--") and flat not in remaining:
                out.append(f"[{kind}] {flat[:160]}")
    return out[:MAX_GONE_LINES]


def _sample(archive: TaskArchive, *, old_hashes: dict[str, str], exclude_ids: set[str],
            limit: int) -> list[ArchivedTask]:
    candidates = archive.train_tasks(exclude_ids=exclude_ids, limit=max(limit * 5, 50))

    def passed_with_old(archived: ArchivedTask) -> bool:
        return any(row.documents == old_hashes and row.hard >= 1.0 for row in archive.history(archived.task.id))

    ordered = sorted(candidates, key=lambda archived: not passed_with_old(archived))  # stable: keeps recurrence
    return ordered[:limit]


def run_slow_update(state: ProjectState, replayer: Replayer, *, every: int, max_tasks: int, archive: TaskArchive,
                    store: DocumentStore, documents: dict[str, str], exclude_ids: set[str]) -> SlowUpdate:
    """Run the slow update if due (see the module docstring), replaying through ``replayer``; ``documents``:
    tonight's baseline (kind -> text).

    exclude_ids: tonight's task ids (all splits). Changes no state: the caller sets ``state.slow_update_at``
    (tonight's number) when the result has a ``compared_night`` and the night completes.
    Raises ``BackendError`` / ``BudgetExhausted`` from the meter.
    """
    if not is_due(state, every):
        return SlowUpdate(False, "not due" if every > 0 else "off (slow_update_every = 0)")
    entry = _old_entry(state, every)
    if entry is None:
        return SlowUpdate(False, "no earlier night's documents recorded yet")
    old = {kind: store.get(digest) for kind, digest in entry.baseline.items()}
    if any(text is None for text in old.values()):
        return SlowUpdate(False, f"the documents of night {entry.night_id} are no longer stored",
                          compared_night=entry.night_id)
    old_texts = {kind: text for kind, text in old.items() if text is not None}
    if {kind: sha256_text(text) for kind, text in documents.items()} == entry.baseline:
        return SlowUpdate(False, f"the documents did not change since night {entry.night_id}",
                          compared_night=entry.night_id)
    sample = _sample(archive, old_hashes=entry.baseline, exclude_ids=exclude_ids, limit=max_tasks)
    if not sample:
        return SlowUpdate(False, "no archived train task to replay", compared_night=entry.night_id)
    tasks = [archived.task.model_copy(update={"split": "train"}) for archived in sample]

    old_results = replay_tasks(tasks, replayer, **prompt_views(old_texts))
    new_results = replay_tasks(tasks, replayer, **prompt_views(documents))
    forgotten = [task for task in tasks if _passed(old_results, task.id) and _failed(new_results, task.id)]
    update = SlowUpdate(True, f"compared the documents of night {entry.night_id} with tonight's on "
                              f"{len(tasks)} archived train task(s): {len(forgotten)} forgotten",
                        compared_night=entry.night_id, sampled=[task.id for task in tasks],
                        forgotten=[task.id for task in forgotten], forgotten_tasks=forgotten)
    if forgotten:
        gone = _gone_lines(old_texts, documents)
        lines = [f"Forgotten since night {entry.night_id}: these train tasks passed with that night's documents "
                 "and fail with today's; propose edits that restore what they need:"]
        lines += [f"- task {task.id}: {' '.join(task.request.split())[:160]}" for task in forgotten]
        if gone:
            lines.append("Lines of that night's documents that are gone today:")
            lines += [f"- {line}" for line in gone]
        update.context = "\n".join(lines)
    return update


def _scored(results: list[ReplayResult], task_id: str) -> list[ReplayResult]:
    return [result for result in results if result.task_id == task_id and result.error is None]


def _passed(results: list[ReplayResult], task_id: str) -> bool:
    scored = _scored(results, task_id)
    return bool(scored) and all(result.hard == 1 for result in scored)


def _failed(results: list[ReplayResult], task_id: str) -> bool:
    scored = _scored(results, task_id)
    return bool(scored) and all(result.hard == 0 for result in scored)
