"""The gate's pending candidate across nights: kept once, re-tested once on fresh val tasks.

When the paired gate rejects a candidate for lack of evidence only (verdict ``reject`` with
``details["pending"] = True``: not worse, but too few wins), ``keep_pending`` stores it in ``ProjectState``
(``state.PendingCandidate``: the night, the candidate and baseline documents by sha256 with their texts in the
``DocumentStore``, the val task ids already tested, wins and losses).

On a later night, ``retest_pending`` runs before the step:

* the baseline documents changed since (the user adopted or edited something): dropped, nothing replayed;
* a stored text is missing: dropped;
* no val task tonight that it was not already tested on: kept, not re-tested (it waits for fresh tasks);
* else re-tested, once: baseline and candidate replayed on the fresh val tasks (tonight's, then archived ones it
  was not tested on: ``val_pool.select_val``) with the step's protocol (``evaluate.replay_pair``), and
  ``gate.decide`` rules. ``accept`` / ``accept_new_best`` promotes it (the night stages it like any accepted
  candidate, and tonight's step starts from it); anything else, a new pending verdict included, drops it and puts
  its edits in the rejected-edit ledger. A pending candidate is never re-tested twice.

A candidate kept on a night that started from a promoted one was tested against that promoted text; unless the
user adopts it, the next night's live documents differ and it is dropped for a changed baseline. With the gate
off, a pending candidate is dropped (``around_step.AcrossNights.before_step``): there is nothing to re-test it against.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from skillopt_sleep.archive.docstore import DocumentStore
from skillopt_sleep.documents.targets import prompt_views
from skillopt_sleep.engine.evaluate import replay_pair
from skillopt_sleep.engine.gate import decide
from skillopt_sleep.engine.replay import Replayer
from skillopt_sleep.engine.step import StepResult, StepSettings
from skillopt_sleep.engine.val_pool import select_val
from skillopt_sleep.hashing import sha256_text
from skillopt_sleep.models import GateDecision, TaskRecord
from skillopt_sleep.state import PendingCandidate

Action = Literal["promoted", "dropped", "kept"]


@dataclass
class PendingOutcome:
    """What became of the pending candidate tonight. documents: the candidate texts (promoted only);
    gate: the re-test decision (None when it was not re-tested); report: the diagnostics entry."""

    action: Action
    reason: str
    pending: PendingCandidate
    documents: dict[str, str] = field(default_factory=dict)
    gate: GateDecision | None = None
    fresh_val_ids: list[str] = field(default_factory=list)

    @property
    def promoted(self) -> bool:
        return self.action == "promoted"

    def report(self) -> dict[str, Any]:
        """The ``diagnostics.pending`` entry: from_night, action, reason, earlier wins/losses, fresh val ids,
        and the re-test's verdict, reason, wins and losses."""
        entry: dict[str, Any] = {"from_night": self.pending.night_id, "action": self.action, "reason": self.reason,
                                 "earlier": {"wins": self.pending.wins, "losses": self.pending.losses,
                                             "tested_val_ids": list(self.pending.tested_val_ids)},
                                 "fresh_val_ids": list(self.fresh_val_ids), "documents": dict(self.pending.documents)}
        if self.gate is not None:
            entry["retest"] = {"verdict": self.gate.verdict, "reason": self.gate.reason,
                               "wins": self.gate.details.get("wins"), "losses": self.gate.details.get("losses"),
                               "candidate_gate": self.gate.candidate.gate, "baseline_gate": self.gate.baseline.gate}
        return entry


def is_pending(step: StepResult) -> bool:
    """The step's candidate changed a document and the gate left it pending (``details["pending"]``)."""
    return bool(step.changed) and step.gate.verdict == "reject" and bool(step.gate.details.get("pending"))


def keep_pending(step: StepResult, *, night_id: str, baseline: dict[str, str], val: list[TaskRecord],
                 store: DocumentStore) -> PendingCandidate:
    """Store tonight's pending candidate: its texts in ``store``, hashes and evidence in the returned record.
    baseline: the documents it was tested against (kind -> text)."""
    details = step.gate.details
    return PendingCandidate(
        night_id=night_id,
        documents={kind: store.put(text) for kind, text in step.candidate.items()},
        baseline={kind: store.put(text) for kind, text in baseline.items()},
        tested_val_ids=[task.id for task in val],
        wins=int(details.get("wins", 0)), losses=int(details.get("losses", 0)),
        gate_score=step.gate.candidate.gate,
        edits=[edit for edit in step.edits if edit.status == "applied"],
    )


def retest_pending(pending: PendingCandidate, replayer: Replayer, *, documents: dict[str, str],
                   val: list[TaskRecord], settings: StepSettings, store: DocumentStore, best_gate_score: float | None,
                   archived_val: list[TaskRecord] | None = None) -> PendingOutcome:
    """Re-test ``pending`` (see the module docstring) against tonight's baseline ``documents`` (kind -> text),
    replaying through ``replayer``.

    val: tonight's val tasks (hard evidence); archived_val: val tasks of earlier nights, used after tonight's
    (``val_pool.select_val``, at most ``gate_max_val`` in all) when the candidate was not tested on them.
    Raises ``BackendError`` / ``BudgetExhausted`` from the meter.
    """
    tonight = {kind: sha256_text(text) for kind, text in documents.items()}
    if tonight != pending.baseline:
        changed = sorted(kind for kind in set(tonight) | set(pending.baseline)
                         if tonight.get(kind) != pending.baseline.get(kind))
        return PendingOutcome("dropped", f"the baseline documents changed since night {pending.night_id} "
                                         f"({', '.join(changed)}): its test no longer applies", pending)
    candidate = {kind: store.get(digest) for kind, digest in pending.documents.items()}
    missing = sorted(kind for kind, text in candidate.items() if text is None)
    if missing:
        return PendingOutcome("dropped", f"stored candidate text missing ({', '.join(missing)})", pending)
    tested = set(pending.tested_val_ids)
    fresh = select_val([task for task in val if task.split == "val" and task.id not in tested],
                       [task for task in archived_val or [] if task.id not in tested], pending.edits,
                       limit=settings.gate_max_val)
    if not fresh:
        return PendingOutcome("kept", "no fresh val task tonight: waiting for one", pending)

    evaluation = replay_pair(fresh, replayer, baseline_views=prompt_views(documents),
                             candidate_views=prompt_views(candidate),
                             plan=settings.sampling(settings.gate_flip_max_tasks))
    gate = decide(settings.gate, baseline=evaluation.baseline, candidate=evaluation.candidate,
                  best_gate_score=best_gate_score, request_heads={task.id: task.request[:120] for task in fresh},
                  perturbed_baseline=evaluation.perturbed_baseline, perturbed_candidate=evaluation.perturbed_candidate)
    fresh_ids = [task.id for task in fresh]
    if gate.verdict in ("accept", "accept_new_best"):
        return PendingOutcome("promoted", f"re-tested on {len(fresh)} fresh val task(s): {gate.reason}", pending,
                              documents={kind: text for kind, text in candidate.items() if text is not None},
                              gate=gate, fresh_val_ids=fresh_ids)
    return PendingOutcome("dropped", f"re-tested on {len(fresh)} fresh val task(s) and not accepted: {gate.reason}",
                          pending, gate=gate, fresh_val_ids=fresh_ids)
