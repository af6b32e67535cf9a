"""The archive features of one night, in the order ``night.run_night`` calls them around the step.

``AcrossNights(config, paths, state, night_id)`` opens the task archive (``tasks.py``) and the document store
(``docstore.py``), then:

1. ``before_step(...)`` (inside the night's try block, so backend and budget errors stop the night as usual):
   dream variants (``dream.py``), the pending candidate's re-test (``pending.py``; a promoted candidate becomes
   the step's starting documents), the slow update (``slow_update.py``), recall and the rejected-edit ledger
   (``context.py``, ``rejected_edits.py``). Returns a ``Prepared``: the step's ``StepInput`` (train tasks,
   documents, ``context``, rules, archived val tasks) and the ``Replayer`` to run it with (the night's, calling
   through the ``rejected_edits.RejectedEditScreen`` that wraps its meter).
2. ``decide(step)``: tonight's outcome: the step's candidate when it was accepted, else a promoted pending
   candidate, else nothing.
3. ``after_step(...)`` (completed nights only): the archive records tonight's tasks and scores, rejected edits
   go to the rejected-edit ledger, a pending verdict is stored, the documents of the night are recorded;
   ``report()`` is ``diagnostics.memory`` (the field keeps its name: diagnostics.json is a format).

Nothing here writes ``state.json``: the night does, once, at its end. A state dir whose archive cannot be
opened (e.g. a read-only disk) runs the night without archive features and says so in ``report()["errors"]``.
"""

from __future__ import annotations

import logging
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from skillopt_sleep.archive.context import MAX_REJECTED_SHOWN, build_context, render_recalled, render_rejected_edits
from skillopt_sleep.archive.docstore import DocumentStore
from skillopt_sleep.archive.dream import DreamOutcome, dream_variants
from skillopt_sleep.archive.lineage import trained_keys
from skillopt_sleep.archive.pending import PendingOutcome, is_pending, keep_pending, retest_pending
from skillopt_sleep.archive.rejected_edits import RejectedEditScreen, record_rejected, rejected_keys, stated_rule_keys
from skillopt_sleep.archive.rule_history import held_rules, record_night, with_history
from skillopt_sleep.archive.slow_update import SlowUpdate, record_night_documents, run_slow_update
from skillopt_sleep.archive.tasks import Recalled, TaskArchive
from skillopt_sleep.config import SleepConfig
from skillopt_sleep.engine.gate import EVIDENCE_CLAUSES
from skillopt_sleep.engine.replay import Replayer
from skillopt_sleep.engine.step import StepInput, StepResult, StepSettings
from skillopt_sleep.hashing import sha256_text
from skillopt_sleep.mine.rulebook import StatedRule
from skillopt_sleep.mine.split import content_key
from skillopt_sleep.models import GateDecision, ReplayResult, TaskRecord
from skillopt_sleep.state import ProjectPaths, ProjectState

logger = logging.getLogger("skillopt_sleep.archive.around_step")



@dataclass(frozen=True)
class Prepared:
    """What the step gets from the archive features."""

    step_input: StepInput
    """train: tonight's train tasks + dream variants + forgotten tasks; documents: the baseline, or a promoted
    pending candidate; val: tonight's; context: for every reflect prompt; recalled: the past train tasks it shows;
    rules: tonight's stated rules with their history (``rule_history.with_history``); held_rules: the archived rules
    a document states (``rule_history.held_rules``); archived_val / val_origins: val tasks of earlier nights (hard
    evidence) the gate may replay beside tonight's (``val_pool``); edit_filter: drops edits the rejected-edit ledger
    holds from the proposals the step makes itself (the users' rules). ``user_text`` and ``best_gate_score`` are the
    night's."""
    replayer: Replayer
    """The night's, calling through the ``RejectedEditScreen`` (the optimizer's replies lose ledger edits)."""


@dataclass
class Outcome:
    """Tonight's result: accepted, the candidate documents and the gate decision that accepted them."""

    accepted: bool
    candidate: dict[str, str] = field(default_factory=dict)
    gate: GateDecision | None = None


class AcrossNights:
    """See the module docstring. ``use_fts5``: None detects FTS5, False forces the LIKE scorer (tests)."""

    def __init__(self, config: SleepConfig, paths: ProjectPaths, state: ProjectState, *, night_id: str,
                 use_fts5: bool | None = None):
        self.config = config
        self.state = state
        self.night_id = night_id
        self.store = DocumentStore(paths.documents)
        self.projects_dir = paths.root.parent  # every project's archive: the split lineage (lineage.py)
        self.errors: list[str] = []
        self.archive: TaskArchive | None = None
        try:
            self.archive = TaskArchive(paths.archive, use_fts5=use_fts5)
            if self.archive.moved_aside is not None:
                self.errors.append(f"the task archive was damaged; moved aside to {self.archive.moved_aside}")
        except (sqlite3.Error, OSError) as exc:
            self.errors.append(f"task archive unavailable ({exc}); recall, the rejected-edit ledger and the slow "
                               "update are off tonight")
            logger.warning("task archive %s unavailable: %s", paths.archive, exc)
        self.screen: RejectedEditScreen | None = None
        self.stated_screen: RejectedEditScreen | None = None
        self.dream = DreamOutcome()
        self.pending: PendingOutcome | None = None
        self.slow: SlowUpdate | None = None
        self.recalled: list[str] = []
        self.rejected_shown = 0
        self.archived: dict[str, int] = {}
        self.stored_pending: dict[str, Any] | None = None
        self.baseline: dict[str, str] = {}
        self.rules: list[StatedRule] = []

    def close(self) -> None:
        if self.archive is not None:
            self.archive.close()
            self.archive = None

    # ------------------------------------------------------------------ before the step
    def before_step(self, replayer: Replayer, *, train: list[TaskRecord], val: list[TaskRecord],
                    test: list[TaskRecord], documents: dict[str, str], settings: StepSettings,
                    rules: list[StatedRule] | None = None, tonight_ids: set[str] | None = None) -> Prepared:
        """Dream, re-test the pending candidate, slow update, recall, the rejected-edit ledger, the rules' history and
        the archived val tasks (see the module docstring; none whose request was ever train, in any project or in
        ``train``: ``lineage.py``), replaying through ``replayer``. rules: tonight's stated rules; tonight_ids: every
        task id mined tonight (default: those of train, val and test). Raises ``BackendError`` / ``BudgetExhausted``
        from the meter."""
        config, meter = self.config, replayer.meter
        self.baseline = dict(documents)
        tonight_ids = set(tonight_ids or ()) | {task.id for task in [*train, *val, *test]}
        self.rules = with_history(list(rules or []), self.archive)
        archived_val: list[TaskRecord] = []
        origins: dict[str, str] = {}
        if self.archive is not None:
            # an archived val task whose request was ever train (any project, or tonight) is not held out
            trained = trained_keys(self.projects_dir).keys | {content_key(task.request) for task in train}
            for archived in self.archive.val_tasks(exclude_ids=tonight_ids):
                if (archived.task.hard_evidence and archived.task.replayable
                        and content_key(archived.task.request) not in trained):
                    archived_val.append(archived.task)
                    origins[archived.task.id] = f"archive {archived.last_night}"
        step_train = list(train)
        if config.dream_factor > 0:
            self.dream = dream_variants(train, factor=config.dream_factor, meter=meter, held_out=[*val, *test],
                                        workers=config.workers)
            step_train += self.dream.variants
        step_documents = dict(documents)
        if self.state.pending is not None and config.gate_mode == "off":
            self.pending = PendingOutcome("dropped", "the gate is off: candidates are accepted greedily, there is "
                                                     "nothing to re-test", self.state.pending)
        elif self.state.pending is not None:
            self.pending = retest_pending(self.state.pending, replayer, documents=documents, val=val,
                                          settings=settings, archived_val=archived_val, store=self.store,
                                          best_gate_score=self.state.best_gate_score)
            if self.pending.promoted:
                step_documents = {kind: self.pending.documents.get(kind, text) for kind, text in documents.items()}
            elif self.pending.action == "dropped" and self.pending.gate is not None and self.archive is not None:
                # into the rejected-edit ledger now, so that tonight's step cannot propose the same edits again
                record_rejected(self.archive, self.pending.pending.edits, night_id=self.night_id,
                                reason=f"pending candidate of night {self.pending.pending.night_id} dropped "
                                       f"after its re-test: {self.pending.gate.reason}")
        sections: list[str] = []
        recalled: list[Recalled] = []
        if self.archive is not None:
            self.slow = run_slow_update(self.state, replayer, every=config.slow_update_every,
                                        max_tasks=config.slow_update_max_tasks, archive=self.archive,
                                        store=self.store, documents=step_documents, exclude_ids=tonight_ids)
            step_train += self.slow.forgotten_tasks
            sections.append(self.slow.context)
            entries = self.archive.rejected_edits()
            self.rejected_shown = min(len(entries), MAX_REJECTED_SHOWN)
            sections.append(render_rejected_edits(entries))
            recalled = self.archive.recall([task.request for task in train], k=config.recall_k,
                                           exclude_ids=tonight_ids)
            self.recalled = [item.archived.task.id for item in recalled]
            sections.append(render_recalled(recalled))
            self.screen = RejectedEditScreen(meter, rejected_keys(self.archive))
            # the users' own rules are re-tested until rejected on STATED_RULE_REJECTIONS nights
            self.stated_screen = RejectedEditScreen(meter, stated_rule_keys(self.archive))
        step_input = StepInput(train=step_train, documents=step_documents, val=val, context=build_context(*sections),
                               recalled=[item.archived.task for item in recalled], rules=self.rules,
                               held_rules=held_rules(self.archive, step_documents, self.rules),
                               archived_val=archived_val, val_origins=origins,
                               edit_filter=self.stated_screen.filter if self.stated_screen else None)
        return Prepared(step_input, replayer.with_meter(self.screen) if self.screen is not None else replayer)

    def authored_texts(self) -> list[str]:
        """What users typed on earlier nights (``TaskArchive.authored_texts``); [] without an archive."""
        if self.archive is None:
            return []
        try:
            return self.archive.authored_texts()
        except sqlite3.Error as exc:
            self.errors.append(f"could not read the archive's user text ({exc}); provenance uses tonight's only")
            return []

    # ------------------------------------------------------------------ the outcome
    def decide(self, step: StepResult) -> Outcome:
        if step.accepted:
            return Outcome(True, dict(step.candidate), step.gate)
        if self.pending is not None and self.pending.promoted:
            return Outcome(True, self.baseline_for(step), self.pending.gate)  # the step started from it
        return Outcome(False)

    @property
    def blocked_edits(self):
        return [*(self.screen.blocked if self.screen else []),
                *(self.stated_screen.blocked if self.stated_screen else [])]

    # ------------------------------------------------------------------ after the step (completed nights)
    def after_step(self, step: StepResult, *, tasks: list[TaskRecord], val: list[TaskRecord],
                   outcome: Outcome, test_results: dict[str, list[ReplayResult]],
                   test_documents: dict[str, dict[str, str]], adopted: bool = False,
                   documents_after: dict[str, str] | None = None) -> None:
        """Record tonight (see the module docstring). test_results / test_documents: ``"baseline"`` /
        ``"candidate"`` -> the test replays and the documents (kind -> text) they used; adopted: the accepted
        documents were written to the project; documents_after: the live documents after tonight."""
        night_id, state = self.night_id, self.state
        archive = self.archive
        # the pending candidate: tonight's re-test, then tonight's own verdict
        if self.pending is not None and self.pending.action != "kept":
            state.pending = None
        if is_pending(step) and self.config.gate_mode == "on":
            state.pending = keep_pending(step, night_id=night_id, baseline=self.baseline_for(step),
                                         val=step.val or val, store=self.store)
            self.stored_pending = {"from_night": night_id, "action": "stored", "reason": step.gate.reason,
                                   "wins": state.pending.wins, "losses": state.pending.losses}
        elif (archive is not None and step.changed and not step.accepted
              and step.gate.details.get("clause") in EVIDENCE_CLAUSES):
            record_rejected(archive, step.edits, night_id=night_id, reason=step.gate.reason)
        if archive is not None and step.blamed:  # gate repair dropped them for losing val tasks
            record_rejected(archive, step.blamed, night_id=night_id,
                            reason="gate repair: blamed for " + ", ".join(step.gate.details["repair"]["lost_tasks"]))
        if self.slow is not None and self.slow.compared_night is not None:
            state.slow_update_at = state.nights_completed + 1
        # the archive: tasks, then scores with the documents they were replayed with
        if archive is not None:
            counts = archive.record_tasks(tasks, night_id=night_id)
            split_of = {task.id: task.split for task in tasks}
            base = {kind: sha256_text(text) for kind, text in self.baseline_for(step).items()}
            archive.record_scores(step.train_results, night_id=night_id, split_of=split_of, documents=base)
            archive.record_scores(step.baseline_val, night_id=night_id, split_of=split_of, documents=base)
            if step.candidate_val:
                archive.record_scores(step.candidate_val, night_id=night_id, split_of=split_of,
                                      documents={k: sha256_text(t) for k, t in step.candidate.items()})
            for side, results in test_results.items():
                archive.record_scores(results, night_id=night_id, split_of=split_of,
                                      documents={k: sha256_text(t) for k, t in test_documents[side].items()})
            self.archived = {"new": counts.new, "recurring": counts.recurring, "total": archive.count()}
        record_night_documents(state, self.store, night_id=night_id, baseline=self.baseline,
                               accepted=outcome.candidate if outcome.accepted else None)
        if archive is not None and self.rules:
            record_night(archive, self.rules, step, night_id=night_id, adopted=adopted,
                         replayed=[*step.val, *(task for task in tasks if task.split == "train" and task.replayable)],
                         documents_after=documents_after if documents_after is not None else self.baseline)

    def baseline_for(self, step: StepResult) -> dict[str, str]:
        """The documents the step started from (tonight's baseline, or a promoted pending candidate)."""
        if self.pending is not None and self.pending.promoted:
            return {kind: self.pending.documents.get(kind, text) for kind, text in self.baseline.items()}
        return dict(self.baseline)

    # ------------------------------------------------------------------ diagnostics
    def pending_report(self) -> dict[str, Any] | None:
        """``diagnostics.pending``: the re-test of an earlier candidate (with ``stored_tonight`` when tonight
        left a new one), or tonight's stored candidate, or None."""
        if self.pending is not None:
            report = self.pending.report()
            report["stored_tonight"] = self.stored_pending
            return report
        return self.stored_pending

    def report(self) -> dict[str, Any]:
        """``diagnostics.memory``."""
        out: dict[str, Any] = {
            "archive": {"search": self.archive.search_backend if self.archive is not None else None,
                        **self.archived},
            "recalled": list(self.recalled),
            "ledger": {"shown": self.rejected_shown, "blocked": len(self.blocked_edits)},
            "rules": [{"id": rule.id, "text": rule.text, "stated": rule.stated, "stated_total": rule.stated_total,
                       "phrasings": len(rule.phrasings), "checked": rule.checked} for rule in self.rules],
            "dream": self.dream.summary() if self.config.dream_factor > 0 else None,
            "slow_update": None,
        }
        if self.slow is not None and (self.slow.ran or self.slow.compared_night is not None):
            out["slow_update"] = self.slow.report()
        elif self.slow is not None:
            out["slow_update"] = {"ran": False, "reason": self.slow.reason}
        if self.errors:
            out["errors"] = list(self.errors)
        return out

    def report_with_edits(self, edits) -> dict[str, Any]:
        out = self.report()
        if self.slow is not None and self.slow.ran:
            out["slow_update"] = self.slow.report(edits)
        return out
