"""The SkillOpt step, one code path for the nightly cycle (``night.run_night``) and an offline trainer.

``run_step(StepInput(train=..., documents=..., val=...), settings=StepSettings(...), replayer=Replayer(meter, ...))``
runs six stages on the current skill document and memory (``StepInput.documents``: ``{"skill": text, "memory":
text}``; a missing kind is shown to the target as empty and is not editable) and returns a ``StepResult``. What the
step works on is one ``StepInput``, what it may do one ``StepSettings``, how it replays one ``replay.Replayer``:

1. rollout: replay the train tasks with the current documents (``rollouts_k`` samples per task; temperature
   ``rollout_temperature`` when K > 1, else 0), through ``replay.replay_tasks`` and the ``Replayer``'s cache.
2. reflect: ``reflect.plan_minibatches`` cuts the N scored train tasks into ceil(N / ``minibatch_size``)
   minibatches (failing tasks first; ``failure_only`` keeps only failing tasks) and ``reflect.reflect`` makes one
   optimizer call per minibatch, ``workers`` at a time. One minibatch = exactly one reflect call, showing the
   same evidence as a single-shot reflection. K > 1 uses the contrastive prompt. ``context`` (extra evidence text:
   recalled past tasks, the rejected-edit ledger) goes into every reflect prompt.
3. aggregate: the minibatches' patch lists (failure lists first) are deduped exactly
   (``aggregate.dedupe_edits``) and, when at least two lists proposed edits and more than one distinct edit
   remains, merged hierarchically: groups of ``merge_batch_size`` lists, one ``merge.md`` call per group, level
   after level until one list is left. Merged edits are screened again like reflected ones
   (``reflect.screen_edits``: first provenance, ``provenance.provenance_reason``: every command, URL, path or
   package an edit names must come from what users typed; then restatements, code, the optimizer's own
   instructions, targets that may not evolve). Every screen runs with the gate on or off.
   Then the users' own rules (``propose_user_rules``; ``rules``, default ``mine.rulebook.stated_rules(train)``) are put
   first, one edit per rule no document states yet (``mine.rulebook.user_rule_edits``), compiled from its checks when
   the compiled line reads back as the same checks and passes these screens as it is, else in their words
   (``rule_wording``, ``mine.rulebook.written_line``); with ``wording_max_calls`` > 0 each rule's line is then chosen
   by replaying its own train tasks with each candidate wording (and, with ``wording_rewrite``, one optimizer rewrite
   when none passes them all: ``engine/rewrite.py``), and an adopted rule still corrected is re-worded
   (``engine/wording.py``; these calls count in ``aggregate``); an optimizer
   edit that restates one of them, a line a document already holds, or a rule such a line was written from
   (``held_rules``), yields (``mine.rulebook.restated_rule_reason``); one that contradicts a rule of the user's is
   rejected (``contradicted_rule_reason``).
   Then the team rules the night proposes (``team_rules``, ``team/night.py``), right after the users' own rules,
   screened like every edit (``_team_rules_stage``).
4. select: when more than L = ``edit_budget`` edits remain, the users' rules come first (most stated first) and
   one ``rank.md`` call orders the others for the room left (an invalid reply keeps the merged order, recorded in
   ``rank_fallback`` and ``errors``); the rest are ``rejected`` with the reason.
5. update: ``edits.apply_edits`` applies the selected edits, in order, to each document's managed block.
6. gated evaluate: the gate's val tasks are ``val`` then ``archived_val`` (``val_pool.select_val``: at most
   ``gate_max_val``; archived tasks a newer user rule contradicts are stale and left out). Gate on: the candidate
   and the baseline are replayed on them with the paired protocol (``evaluate.replay_pair``: once per side, then up
   to ``gate_samples`` per side for a task whose outcome could be noise, stopping at two when both sides repeat
   their answers; then the flip re-test: a protected task the candidate now fails on two samples or more is replayed
   ``gate_flip_samples``
   times per side at ``gate_flip_temperature``, at most ``gate_flip_max_tasks`` tasks a step), and ``gate.decide``
   rules (a regression the re-test does not confirm is a flip: a lost task, no veto). Gate repair (``gate_repair``,
   ``engine/repair.py``): when the gate
   rejects a candidate that won some val tasks and lost one to three, leave-one-out replays of the lost tasks find
   the edits to blame; the candidate without them is gated once more (``gate.details["repair"]``). The users' own
   rules (``gate_stated_rules = "own_tasks"``): a candidate made only of them that the gate left pending with no loss
   and no regression is accepted when it wins the train tasks the rules came from (``gate.details["stated_rules"]``).
   The support test (``repair.support``): in an accepted candidate, an optimizer edit the candidate wins just as
   much without is dropped, if the candidate without it passes the gate too (``gate.details["support"]``).
   Gate off: accepted greedily without val replays. No document changed: rejected with nothing to test (the
   baseline val replay still runs with the gate on, so the step reports a held-out baseline score). Train is never
   replayed a second time.

Callers: ``night.run_night`` (one step a night) and ``trainer.SkillOptTrainer`` (one step per batch of an
environment's train items; its ``Replayer`` has a ``rollout`` so every replay runs the environment's episode
instead of the single target call, and it passes ``on_stage=`` for its progress display).

Every call goes through ``replayer.meter`` (budgets; ``BackendError`` / ``BudgetExhausted`` propagate and stop the
step).
``StepResult.calls_by_stage`` counts the meter's calls per stage (``rollout`` includes rubric-judge calls).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from skillopt_sleep.backends.base import CallMeter
from skillopt_sleep.config import NightStepConfig
from skillopt_sleep.documents.block import strip_team_mark, team_line, team_rule_of
from skillopt_sleep.documents.targets import prompt_views
from skillopt_sleep.engine import repair
from skillopt_sleep.engine.aggregate import PatchList, dedupe_edits, merge_patches, rank_edits
from skillopt_sleep.engine.edits import apply_edits
from skillopt_sleep.engine.evaluate import Evaluation, SamplingPlan, replay_pair
from skillopt_sleep.engine.gate import GateSettings, decide, summarize
from skillopt_sleep.engine.reflect import (
    MAX_PASSING_TASKS,
    EditScope,
    Minibatch,
    plan_minibatches,
    reflect,
    screen_edits,
)
from skillopt_sleep.engine.replay import Replayer, replay_tasks
from skillopt_sleep.engine.rewrite import make_rewriter
from skillopt_sleep.engine.val_pool import select_val
from skillopt_sleep.engine.wording import choose_wordings
from skillopt_sleep.mine.provenance import UserText, provenance_reason
from skillopt_sleep.mine.rulebook import (
    StatedRule,
    contradicted_rule_reason,
    restated_rule_reason,
    stated_rules,
    user_rule_edits,
)
from skillopt_sleep.models import EditRecord, GateDecision, ReplayResult, TaskRecord
from skillopt_sleep.parallel import map_parallel
from skillopt_sleep.redaction.redact import redact_text
from skillopt_sleep.stage_clock import StageClock

DOCUMENT_KINDS = ("skill", "memory")
STAGES = ("rollout", "reflect", "aggregate", "select", "update", "gate")

_Item = TypeVar("_Item")


class StepSettings(NightStepConfig):
    """What one step may do: the step and gate keys (``config.StepConfig``, ``config.NightStepConfig``: defined
    there once, with the night's defaults), this step's edit budget, and the gate's resampling temperature.

    Made with ``StepSettings.from_config(config, edit_budget=...)`` from a ``SleepConfig`` (a night) or a
    ``SkillOptConfig`` (the trainer, which fixes the night-only keys), or directly in tests."""

    edit_budget: int = Field(ge=0)
    """L: the most edits this step applies (0 = reflect nothing); a night's or a trainer step's value of the edit
    budget schedule (``engine/edit_budget.py``)."""
    gate_temperature: float = Field(0.0, ge=0)
    """Sampling temperature of the gate's extra samples (``gate.tasks_to_resample``); 0 = the first pass's. No
    config key yet."""

    @classmethod
    def from_config(cls, config: BaseModel, *, edit_budget: int, **values: Any) -> StepSettings:
        """The settings of one step: the step and gate keys ``config`` holds, this step's ``edit_budget`` (not the
        config's maximum), ``values`` on top."""
        return super().from_config(config, edit_budget=edit_budget, **values)

    @property
    def gate(self) -> GateSettings:
        """The gate keys as ``gate.decide`` takes them (mode, metric, mixed weight, rule, margin, alpha, flip
        alpha)."""
        return GateSettings(mode=self.gate_mode, metric=self.gate_metric, mixed_weight=self.gate_mixed_weight,
                            rule=self.gate_rule, margin=self.gate_margin, alpha=self.gate_alpha,
                            flip_alpha=self.gate_flip_alpha)

    def sampling(self, flip_tasks: int) -> SamplingPlan:
        """How a test of this step samples (``evaluate.replay_pair``): the gate's samples and temperature, its metric,
        and the flip re-test's samples and temperature, on at most ``flip_tasks`` tasks."""
        return SamplingPlan(gate_samples=self.gate_samples, gate_temperature=self.gate_temperature,
                            metric=self.gate_metric, mixed_weight=self.gate_mixed_weight,
                            flip_samples=self.gate_flip_samples, flip_temperature=self.gate_flip_temperature,
                            flip_tasks=flip_tasks)


#: Applied to the edits the step proposes itself (``StepInput.edit_filter``): returns those that may go on.
EditFilter = Callable[[list[EditRecord]], list[EditRecord]]


@dataclass(frozen=True)
class StepInput:
    """What one step works on (``run_step``): the tasks, the documents, and what the night knows around them."""

    train: list[TaskRecord]
    """The tasks replayed and reflected on (split ``train``; the night adds dream variants and forgotten tasks)."""
    documents: dict[str, str]
    """``{"skill": text, "memory": text}``: the documents the step starts from (the baseline); a missing kind is
    shown to the target as empty and is not editable."""
    val: list[TaskRecord] = field(default_factory=list)
    """Tonight's held-out tasks for the gate: never reflected on."""
    context: str = ""
    """Extra evidence text for every reflect prompt (recalled past tasks, the rejected-edit ledger)."""
    recalled: list[TaskRecord] = field(default_factory=list)
    """The past train tasks ``context`` shows (the archive's recall): evidence like ``train``, so an optimizer edit
    that restates one of their requests is rejected as one that restates a train task is
    (``reflect.restatement_reason``); never replayed."""
    rules: list[StatedRule] | None = None
    """The users' stated rules to propose (``mine.rulebook.stated_rules``); None: those of ``train``."""
    held_rules: list[StatedRule] = field(default_factory=list)
    """The users' rules a document already states (``archive.rule_history.held_rules``): an optimizer edit that
    restates one in the user's words yields (``mine.rulebook.restated_rule_reason``), one that contradicts one is
    rejected (``contradicted_rule_reason``)."""
    archived_val: list[TaskRecord] = field(default_factory=list)
    """Val tasks of earlier nights the gate may add to ``val`` (``val_pool.select_val``: at most ``gate_max_val`` in
    all)."""
    val_origins: dict[str, str] = field(default_factory=dict)
    """Task id -> where it came from, for the report; a task not named is ``tonight``'s."""
    user_text: UserText | None = None
    """What users typed: the only source an edit's commands, URLs and paths may come from (``provenance``); every
    edit, the users' rules included, is screened against it, with the gate on or off. None: the ``authored`` text
    of train, val and archived val, the stated rules and ``documents``."""
    edit_filter: EditFilter | None = None
    """Applied to the edits the step proposes itself (the users' stated rules), e.g. the night's rejected-edit
    ledger (the optimizer's edits are screened where its replies are read); None: none."""
    best_gate_score: float | None = None
    """The all-time best mean gate score, for ``accept_new_best`` (None: none yet)."""
    team_rules: list[EditRecord] = field(default_factory=list)
    """Team rules to gate on this member's val tasks (``team.night.plan_team_night``): ``append`` edits whose
    content is a team rule's line with its attribution (``documents.block.team_line``), written to the document the
    users' rules go to; screened like every edit
    (``_team_rules_stage``), then selected right after the users' own rules and gated with them in one candidate."""


class StepResult(BaseModel):
    """What one step did.

    train_results: the rollouts; minibatches: reflect calls planned (0 when nothing could be reflected on);
    raw_patches: the edits each reflect call proposed (one list per minibatch, after screening); merged: the
    aggregated edits; ranked: ``merged`` in rank order (the merged order when there was no rank call or its reply
    was invalid); selected: the top L of ``ranked``, as given to the update; rank_fallback: why the rank reply was
    not used (None otherwise); edits: every edit with its final status (rejected by screening, not selected,
    applied, unmatched), as reported in diagnostics; candidate: the documents after the update (same keys as
    ``documents``); changed: the kinds whose text changed; baseline_val / candidate_val: val replays (empty with
    the gate off, or candidate_val when nothing changed); gate: the decision; errors: ``{"stage", "message"}`` for
    reflect, merge and rank replies that could not be used; optimizer_raw_head: the head of the first reflect
    reply; calls_by_stage: meter calls per stage; stage_seconds: wall-clock seconds per stage.
    """

    model_config = ConfigDict(extra="forbid")

    train_results: list[ReplayResult] = Field(default_factory=list)
    minibatches: int = 0
    user_rules: int = 0
    """Edits proposed verbatim from the users' stated rules (``propose_user_rules``); first in ``merged``."""
    team_rules: int = 0
    """Team rules' edits that passed the screens (``StepInput.team_rules``); in ``merged`` right after the users'
    rules."""
    val: list[TaskRecord] = Field(default_factory=list)
    """The val tasks the gate replayed (``val_pool.select_val``: tonight's, then archived ones)."""
    settled: list[str] = Field(default_factory=list)
    """Val tasks that stopped at two samples because both sides repeated their answers (``evaluate``)."""
    unsupported: list[EditRecord] = Field(default_factory=list)
    """Optimizer edits dropped from an accepted candidate because its wins held without them (``repair.support``)."""
    blamed: list[EditRecord] = Field(default_factory=list)
    """Edits gate repair dropped from the tested candidate (as they were applied there); see ``engine/repair.py``."""
    raw_patches: list[list[EditRecord]] = Field(default_factory=list)
    merged: list[EditRecord] = Field(default_factory=list)
    ranked: list[EditRecord] = Field(default_factory=list)
    selected: list[EditRecord] = Field(default_factory=list)
    rank_fallback: str | None = None
    edits: list[EditRecord] = Field(default_factory=list)
    candidate: dict[str, str] = Field(default_factory=dict)
    changed: list[str] = Field(default_factory=list)
    baseline_val: list[ReplayResult] = Field(default_factory=list)
    candidate_val: list[ReplayResult] = Field(default_factory=list)
    gate: GateDecision
    errors: list[dict[str, str]] = Field(default_factory=list)
    optimizer_raw_head: str = ""
    calls_by_stage: dict[str, int] = Field(default_factory=dict)
    wording: dict[str, Any] = Field(default_factory=dict)
    """How the users' rules were worded (``engine.wording.WordingReport``; empty when no rule was replayed for it)."""
    stage_seconds: dict[str, float] = Field(default_factory=dict)

    @property
    def accepted(self) -> bool:
        return self.gate.verdict in ("accept", "accept_new_best")


# --------------------------------------------------------------------------- helpers


def _chunks(items: list[_Item], size: int) -> list[list[_Item]]:
    return [items[start:start + size] for start in range(0, len(items), size)]


def planned_optimizer_calls(train_tasks: int, settings: StepSettings) -> int:
    """Most optimizer calls one step makes for ``train_tasks`` scored train tasks, not counting retries of
    invalid replies: ceil(N / minibatch_size) reflect calls, the merge calls of the hierarchy and one rank call
    when there is more than one minibatch (a single minibatch makes exactly one call)."""
    batches = math.ceil(train_tasks / settings.minibatch_size) if train_tasks else 0
    if batches <= 1:
        return batches
    calls, lists = batches + 1, batches
    while lists > 1:
        groups = _chunks(list(range(lists)), settings.merge_batch_size)
        calls += sum(1 for group in groups if len(group) > 1)
        lists = len(groups)
    return calls


def _not_selected(edit: EditRecord, budget: int) -> EditRecord:
    return edit.model_copy(update={"status": "rejected",
                                   "reason": f"not selected: ranked below the top {budget} (the edit budget)"})


# --------------------------------------------------------------------------- stages


def _reflect_stage(train: list[TaskRecord], *, documents: dict[str, str], settings: StepSettings, scope: EditScope,
                   meter: CallMeter, context: str, recalled: list[TaskRecord],
                   result: StepResult) -> tuple[list[PatchList], list[EditRecord]]:
    """The train tasks' replays (``result.train_results``) in minibatches (``minibatch.plan_minibatches``), one
    reflect call per minibatch (``recalled``: the past tasks ``context`` shows); returns (patch lists in minibatch
    order, edits rejected by screening)."""
    batches = plan_minibatches(train, result.train_results, minibatch_size=settings.minibatch_size,
                               failure_only=settings.failure_only)
    result.minibatches = len(batches)
    if not batches and train:
        why = "no failing train task" if settings.failure_only else "no scored train task"
        result.errors.append({"stage": "reflect", "message": f"{why}: nothing to reflect on"})
    several = len(batches) > 1

    def one(batch: Minibatch):
        return reflect(tasks=batch.tasks, results=batch.results, documents=documents, scope=scope, meter=meter,
                       contrastive=settings.rollouts_k > 1, context=context, recalled=recalled,
                       max_passing=settings.minibatch_size if several else MAX_PASSING_TASKS)

    outcomes = map_parallel(one, batches, settings.workers)
    patches: list[PatchList] = []
    rejected: list[EditRecord] = []
    for batch, outcome in zip(batches, outcomes):
        patches.append(PatchList(kind=batch.kind, edits=outcome.edits))
        rejected.extend(outcome.rejected)
        if outcome.error:
            where = f"minibatch {batch.index + 1} of {len(batches)}: " if several else ""
            result.errors.append({"stage": "reflect", "message": where + outcome.error})
    result.optimizer_raw_head = outcomes[0].raw_head if outcomes else ""
    return patches, rejected


def _aggregate_stage(patches: list[PatchList], *, documents: dict[str, str], train: list[TaskRecord],
                     settings: StepSettings, scope: EditScope, meter: CallMeter,
                     result: StepResult) -> tuple[list[EditRecord], list[EditRecord]]:
    """Dedupe, then merge hierarchically when there is something to merge; returns (merged, rejected). ``train``:
    every task the reflect prompts showed (the merged edits are screened against them again)."""
    lists = sorted((patch for patch in patches if patch.edits), key=lambda patch: patch.kind != "failure")
    pooled = dedupe_edits([edit for patch in lists for edit in patch.edits])
    if len(lists) <= 1 or len(pooled) <= 1:
        return pooled, []

    def merge(group: list[PatchList]) -> PatchList:
        kind = "failure" if any(patch.kind == "failure" for patch in group) else "success"
        if len(group) == 1:
            return group[0]
        outcome = merge_patches(group, skill=documents.get("skill", ""), memory=documents.get("memory", ""),
                                targets=scope.targets, meter=meter)
        if outcome.error:
            result.errors.append({"stage": "merge", "message": outcome.error})
        return PatchList(kind=kind, edits=outcome.edits)

    while len(lists) > 1:
        lists = map_parallel(merge, _chunks(lists, settings.merge_batch_size), settings.workers)
    merged = dedupe_edits(lists[0].edits)
    kept, rejected = screen_edits(merged, train, edit_budget=len(merged), evolve_skill=scope.evolve_skill,
                                  evolve_memory=scope.evolve_memory, screen=scope.screen)
    return kept, rejected


def _select_stage(merged: list[EditRecord], *, documents: dict[str, str], settings: StepSettings,
                  meter: CallMeter, result: StepResult) -> None:
    """Keep the top L edits. The users' own rules (``result.user_rules`` of them, first in ``merged``) come first,
    most-stated first, then the team rules (``result.team_rules``); the optimizer ranks the other edits for what
    budget is left (no call when they fit)."""
    budget = settings.edit_budget
    if len(merged) <= budget:
        result.ranked = list(merged)
        result.selected = list(merged)
        return
    head = result.user_rules + result.team_rules
    stated, proposed = merged[:head], merged[head:]
    room = max(0, budget - len(stated))
    if room and len(proposed) > room:
        outcome = rank_edits(proposed, keep=room, skill=documents.get("skill", ""),
                             memory=documents.get("memory", ""), meter=meter)
        if outcome.fallback:
            result.rank_fallback = outcome.fallback
            result.errors.append({"stage": "rank", "message": outcome.fallback})
        proposed = [proposed[index] for index in outcome.order]
    result.ranked = [*stated, *proposed]
    result.selected = result.ranked[:budget]


def build_candidate(texts: dict[str, str], selected: list[EditRecord]) -> tuple[dict[str, str], list[EditRecord]]:
    """Apply ``selected`` (proposed edits, in order) to each document kind of ``texts``; returns (the candidate
    documents, the edits with their status from ``edits.apply_edits``, kinds in ``DOCUMENT_KINDS`` order)."""
    candidate = dict(texts)
    out: list[EditRecord] = []
    for kind in DOCUMENT_KINDS:
        wanted = [edit for edit in selected if edit.target == kind]
        if kind in candidate and wanted:
            candidate[kind], applied = apply_edits(candidate[kind], wanted, kind)
            out.extend(applied)
    return candidate, out


class _Tester:
    """Test candidates built from edits against the step's baseline on the gate's val tasks (one protocol:
    ``evaluate.replay_pair``, then ``gate.decide``). The step's tests share one flip re-test allowance
    (``gate_flip_max_tasks`` tasks; ``flips_left``)."""

    def __init__(self, *, val: list[TaskRecord], texts: dict[str, str], settings: StepSettings, replayer: Replayer,
                 views: Callable[[dict[str, str]], dict[str, str]], gate: Callable[..., GateDecision]):
        self.val, self.texts, self.settings = val, texts, settings
        self.replayer, self.views, self.gate = replayer, views, gate
        self.flips_left = settings.gate_flip_max_tasks

    def replay(self, tasks: list[TaskRecord], edits: list[EditRecord], samples: int) -> list[ReplayResult]:
        """``repair.Replay``: the candidate built from ``edits`` replayed on ``tasks``."""
        documents, _ = build_candidate(self.texts, edits)
        temperature = self.settings.gate_temperature if samples > 1 else 0.0
        return replay_tasks(tasks, self.replayer, **self.views(documents), samples=samples, temperature=temperature)

    def test(self, candidate: dict[str, str]) -> tuple[Evaluation, GateDecision]:
        evaluation = replay_pair(self.val, self.replayer, baseline_views=self.views(self.texts),
                                 candidate_views=self.views(candidate), plan=self.settings.sampling(self.flips_left))
        self.flips_left -= len(evaluation.perturbed)
        decision = self.gate(baseline=evaluation.baseline, candidate=evaluation.candidate,
                             perturbed_baseline=evaluation.perturbed_baseline,
                             perturbed_candidate=evaluation.perturbed_candidate)
        if evaluation.resampled:
            decision.details["resampled_tasks"] = evaluation.resampled
        if evaluation.settled:
            decision.details["settled_tasks"] = evaluation.settled
        return evaluation, decision


def _take(result: StepResult, candidate: dict[str, str], evaluation: Evaluation, decision: GateDecision,
          texts: dict[str, str]) -> None:
    result.candidate = candidate
    result.changed = [kind for kind in texts if candidate[kind] != texts[kind]]
    result.baseline_val, result.candidate_val = evaluation.baseline, evaluation.candidate
    result.settled = list(evaluation.settled)
    result.gate = decision


def _replace_edits(result: StepResult, applied: list[EditRecord], dropped: dict[int, str],
                   reapplied: list[EditRecord]) -> None:
    """Mark the applied edits at ``dropped`` (index -> reason) rejected and the others as re-applied."""
    replacement: dict[int, EditRecord] = {}
    kept_status = iter(reapplied)  # the kept edits, in the same order as in ``applied``
    for index, edit in enumerate(applied):
        if index in dropped:
            replacement[id(edit)] = edit.model_copy(update={"status": "rejected", "reason": dropped[index]})
        else:
            replacement[id(edit)] = next(kept_status)
    result.edits = [replacement.get(id(edit), edit) for edit in result.edits]


def _repair_stage(result: StepResult, tester: _Tester, *, meter: CallMeter) -> None:
    """Gate repair (``engine/repair.py``): blame, rebuild the candidate without the blamed edits, gate it again.
    Updates ``result`` (candidate, changed, val replays, gate, edits, blamed) when a repaired candidate is
    tested; records why not in ``gate.details["repair"]`` when repair looked but found nothing to drop."""
    applied = [edit for edit in result.edits if edit.status == "applied"]
    if repair.wants_repair(result.gate, len(applied)) is not None:
        return
    originals = [edit.model_copy(update={"status": "proposed", "reason": ""}) for edit in applied]
    calls_before = meter.calls
    first = result.gate
    found = repair.blame(originals, first, tester.val, replay=tester.replay, metric=tester.settings.gate_metric,
                         mixed_weight=tester.settings.gate_mixed_weight)
    if not found.blamed or len(found.blamed) == len(originals):
        why = "no single edit to blame" if not found.blamed else "every edit is to blame"
        first.details["repair"] = repair.repair_report(first, applied, found, calls=meter.calls - calls_before,
                                                       outcome=f"not repaired: {why}")
        return
    kept = [edit for index, edit in enumerate(originals) if index not in found.blamed]
    candidate, reapplied = build_candidate(tester.texts, kept)
    evaluation, decision = tester.test(candidate)
    decision.details["repair"] = repair.repair_report(first, applied, found, calls=meter.calls - calls_before,
                                                      outcome=f"repaired: {decision.verdict}")
    _take(result, candidate, evaluation, decision, tester.texts)
    _replace_edits(result, applied, {index: f"gate repair: blamed for val task(s) {', '.join(found.fixes[index])}, "
                                            "which the candidate without this edit did not lose"
                                     for index in found.blamed}, reapplied)
    result.blamed = [applied[index] for index in found.blamed]


def _stated_rules_stage(result: StepResult, tester: _Tester, *, proposed: list[EditRecord], train: list[TaskRecord],
                        meter: CallMeter) -> None:
    """A tie is no evidence against the user's own rules (``gate_stated_rules = "own_tasks"``): when the gate left
    pending a candidate made only of rules the users stated, and it lost no val task and regressed none (at least one
    val task replayed), the candidate is replayed on the train tasks those rules came from; it is accepted when it
    passes one the baseline failed and fails none the baseline passed. A flip is no evidence against them either: a
    candidate whose only val losses are flips the perturbation re-test did not confirm (``gate.details["flips"]``) is
    judged here as if they were ties, with or without a val win (a rule change, "we moved from black to ruff", must not
    wait on an unrelated answer that changed at temperature 0). A rule change (the candidate replaces a line a newer
    rule of the user's contradicts, ``rulebook.user_rule_edits``) is accepted when it fails none of its own tasks the
    baseline passed, win or not: the user's newest statement is the rule, and the old line would now teach the opposite.
    Recorded in ``gate.details["stated_rules"]`` (``changes``: the lines replaced)."""
    gate = result.gate
    applied = [edit for edit in result.edits if edit.status == "applied"]
    contents = {edit.content for edit in proposed}
    flips = {flip.get("task") for flip in gate.details.get("flips", [])}
    lost_val = {comparison.task_id for comparison in gate.per_task if comparison.outcome == "loss"}
    only_flips = bool(lost_val) and lost_val <= flips
    if (not (gate.details.get("pending") or only_flips) or not gate.per_task or not applied
            or any(edit.content not in contents for edit in applied)
            or (gate.details.get("losses") and not only_flips) or gate.details.get("regressions")):
        return
    sources = {task_id for edit in applied for task_id in edit.evidence}
    own = [task for task in train if task.id in sources]
    report: dict[str, Any] = {"own_tasks": [task.id for task in own], "calls": 0}
    if not own:
        report["outcome"] = "pending: none of the rules' own tasks can be replayed"
        gate.details["stated_rules"] = report
        return
    calls_before = meter.calls
    baseline = {r.task_id: r for r in result.train_results if r.error is None}
    edits = [edit.model_copy(update={"status": "proposed", "reason": ""}) for edit in applied]
    candidate = {r.task_id: r for r in tester.replay(own, edits, 1) if r.error is None}
    compared = [task.id for task in own if task.id in baseline and task.id in candidate]
    won = [task_id for task_id in compared if not baseline[task_id].hard and candidate[task_id].hard]
    lost = [task_id for task_id in compared if baseline[task_id].hard and not candidate[task_id].hard]
    changes = [edit.anchor for edit in applied if edit.op == "replace"]
    report.update(won=won, lost=lost, calls=meter.calls - calls_before, changes=changes)
    if (won or (changes and compared)) and not lost:
        report["outcome"] = "accepted"
        evidence = (f"they won {len(won)} of their {len(own)} own task(s)" if won else
                    f"a rule change that replaces {len(changes)} rule(s) it contradicts and regressed none of its "
                    f"{len(own)} own task(s)")
        result.gate = gate.model_copy(update={
            "verdict": "accept",
            "reason": (f"the user's own rules: {evidence} and lost no val "
                       f"task ({gate.details.get('wins', 0)} win(s), {gate.details.get('ties', 0)} tie(s)"
                       + (f", {len(lost_val)} unconfirmed flip(s)" if only_flips else "")
                       + f", no regression); {gate.reason}"),
            "details": {**gate.details, "clause": "stated_rules", "pending": False}})
    else:
        report["outcome"] = "pending: " + ("lost an own task" if lost else "won none of its own tasks")
    result.gate.details["stated_rules"] = report


def _support_stage(result: StepResult, tester: _Tester, *, stated: set[str], meter: CallMeter) -> None:
    """Every adopted line earns its place (``repair.support``): when an accepted candidate carries optimizer edits
    beside other edits, an optimizer edit whose candidate wins just as much without it is dropped, and the
    candidate without it is gated once more; it replaces the accepted one only if accepted too. ``stated``: the
    contents of the edits that state the users' rules (exempt: the user stated them)."""
    applied = [edit for edit in result.edits if edit.status == "applied"]
    optimizer = [index for index, edit in enumerate(applied) if edit.content not in stated]
    if not result.accepted or len(applied) < 2 or not optimizer:
        return
    calls_before = meter.calls
    originals = [edit.model_copy(update={"status": "proposed", "reason": ""}) for edit in applied]
    found = repair.support(originals, result.gate, tester.val, replay=tester.replay, candidates=optimizer,
                           metric=tester.settings.gate_metric, mixed_weight=tester.settings.gate_mixed_weight)
    report: dict[str, Any] = {"checked": len(optimizer), "unsupported": len(found), "calls": 0, "outcome": "kept all"}
    if found and len(found) < len(applied):
        kept = [edit for index, edit in enumerate(originals) if index not in found]
        candidate, reapplied = build_candidate(tester.texts, kept)
        evaluation, decision = tester.test(candidate)
        if decision.verdict in ("accept", "accept_new_best"):
            if "repair" in result.gate.details:  # the record of the edits repair dropped (``result.blamed``) stays
                decision.details["repair"] = result.gate.details["repair"]
            _take(result, candidate, evaluation, decision, tester.texts)
            _replace_edits(result, applied, {index: "unsupported: the candidate won just as much without this edit, "
                                                    "which no user stated" for index in found}, reapplied)
            result.unsupported = [applied[index] for index in found]
            report["outcome"] = f"dropped {len(found)} unsupported edit(s)"
        else:
            report["outcome"] = f"kept all: without the unsupported edits the gate said {decision.verdict}"
    report["calls"] = meter.calls - calls_before
    result.gate.details["support"] = report


def _annotate(decision: GateDecision, val: list[TaskRecord], origins: dict[str, str]) -> None:
    """Say per val task where it came from and which rules its checks test."""
    by_id = {task.id: task for task in val}
    for comparison in decision.per_task:
        task = by_id.get(comparison.task_id)
        comparison.origin = origins.get(comparison.task_id, "tonight")
        if task is not None:
            comparison.rules = list(dict.fromkeys(check.rule for check in task.judge.checks if check.rule))


def _edit_screen(scope: EditScope, target: str) -> Callable[[str], str | None]:
    """The screens every edit passes (``screen_edits``: provenance first), as one test of a line appended to
    ``target``: why they would reject it, or that they would rewrite it (clean it), or None. A compiled rule line
    must pass it as it is (``mine.rulebook.written_line``)."""

    def screen(content: str) -> str | None:
        probe = EditRecord(target=target, op="append", content=content)
        accepted, rejected = screen_edits([probe], [], edit_budget=1, evolve_skill=scope.evolve_skill,
                                          evolve_memory=scope.evolve_memory, screen=scope.screen)
        if rejected:
            return rejected[0].reason
        return None if accepted[0].content == content else "the screens would rewrite it"

    return screen


def _wording(result: StepResult, inputs: StepInput, *, stated: list[StatedRule], texts: dict[str, str],
             settings: StepSettings, scope: EditScope, replayer: Replayer) -> EditFilter:
    """The wording choice of the users' rules' edits (``engine/wording.py``), within ``wording_max_calls`` (0 with
    ``rule_wording = "user"``) and what the meter's call budget leaves after the gate's first val replays; records
    the choice in ``result.wording``."""

    def choose(edits: list[EditRecord]) -> list[EditRecord]:
        budget = settings.wording_max_calls if settings.rule_wording == "compiled" else 0
        left = replayer.meter.remaining_calls()
        if budget and left is not None:
            pool = min(settings.gate_max_val, len(inputs.val) + len(inputs.archived_val))
            budget = min(budget, max(0, left - (2 * pool if settings.gate_mode == "on" else 0)))
        chosen, report = choose_wordings(stated, edits, train=inputs.train, train_results=result.train_results,
                                         documents=texts, replayer=replayer, budget=budget,
                                         screen=_edit_screen(scope, scope.targets[0]),
                                         rewriter=make_rewriter(replayer.meter) if settings.wording_rewrite else None)
        if report.rules:
            result.wording = report.as_diagnostics()
        return chosen

    return choose


def _team_rules_stage(team: list[EditRecord], *, user_text: UserText, scope: EditScope,
                      rejected: list[EditRecord]) -> list[EditRecord]:
    """The team rules' edits (``StepInput.team_rules``) through the screens every edit passes (``screen_edits``),
    their attribution taken off for the screens and put back after. Provenance: a team rule's own text passed the
    team's review in git, so it counts as typed for that rule's edit only (``UserText.plus``): a command, URL or
    path the team file states is allowed in its own line; a secret never is (``provenance.secret_reason``), nor is
    a line the other screens refuse. Returns the edits that passed; the others are added to ``rejected``."""
    kept: list[EditRecord] = []
    for edit in team:
        rule_id, line = team_rule_of(edit.content or ""), strip_team_mark(edit.content or "")
        if rule_id is None or not scope.targets or edit.op != "append":
            rejected.append(edit.model_copy(update={"status": "rejected",
                                                    "reason": "not a team rule's attributed append"}))
            continue
        own = user_text.plus([line])
        probe = edit.model_copy(update={"content": line, "target": scope.targets[0]})  # where the users' rules go
        passed, screened = screen_edits([probe], [], edit_budget=1,
                                        evolve_skill=scope.evolve_skill, evolve_memory=scope.evolve_memory,
                                        screen=lambda content, own=own: provenance_reason(content, own))
        kept += [edit.model_copy(update={"content": team_line(e.content, rule_id)}) for e in passed]
        rejected += [e.model_copy(update={"content": team_line(redact_text(e.content or line), rule_id)})
                     for e in screened]  # a secret a team file carried is not repeated in diagnostics
    return kept


def _user_rules_stage(merged: list[EditRecord], *, stated: list[StatedRule], texts: dict[str, str],
                      settings: StepSettings, scope: EditScope, edit_filter: EditFilter | None,
                      rejected: list[EditRecord], choose: EditFilter | None = None,
                      held: Sequence[StatedRule] = ()) -> tuple[list[EditRecord], list[EditRecord]]:
    """The users' own rules, one edit each (``mine.rulebook.user_rule_edits``), worded by ``choose`` (``_wording``),
    put first; the optimizer's restatements of a stated rule yield to the user's words, and its restatements of a
    rule a document holds (``held``, ``StepInput.held_rules``) to that line; an optimizer edit that contradicts
    either is rejected (the user's rule wins). Returns (the rules' edits, every edit in order); the edits screened out
    are added to ``rejected``."""
    proposed_rules: list[EditRecord] = []
    if settings.propose_user_rules and scope.targets:
        proposed_rules = user_rule_edits(stated, texts, target=scope.targets[0], wording=settings.rule_wording,
                                         screen=_edit_screen(scope, scope.targets[0]))
        if choose is not None:
            proposed_rules = choose(proposed_rules)
        if edit_filter is not None:
            proposed_rules = edit_filter(proposed_rules)
        proposed_rules, rules_rejected = screen_edits(proposed_rules, [], edit_budget=len(proposed_rules),
                                                      evolve_skill=scope.evolve_skill,
                                                      evolve_memory=scope.evolve_memory, screen=scope.screen)
        rejected.extend(rules_rejected)
    kept_merged: list[EditRecord] = []
    yielding = stated if settings.propose_user_rules else []  # the user's words are proposed instead
    users = [*stated, *held]
    for edit in merged:
        reason = None if edit.op == "delete" else (restated_rule_reason(edit.content, yielding, texts, held)
                                                   or contradicted_rule_reason(edit.content, users))
        if reason:
            rejected.append(edit.model_copy(update={"status": "rejected", "reason": reason}))
        else:
            kept_merged.append(edit)
    return proposed_rules, [*proposed_rules, *kept_merged]


def _gate_stage(result: StepResult, inputs: StepInput, *, texts: dict[str, str], proposed_rules: list[EditRecord],
                settings: StepSettings, replayer: Replayer) -> None:
    """The val pool (tonight's and archived val tasks), then the gate on the candidate in ``result`` (and gate
    repair, the stated rules' own-task test and the support check, gate on), or the gate-off verdict; the verdict
    is annotated with each val task's origin."""
    applied_edits = [edit for edit in result.edits if edit.status == "applied"]
    stated_contents = {edit.content for edit in proposed_rules}
    meter = replayer.meter
    pool = select_val(inputs.val, inputs.archived_val, applied_edits, limit=settings.gate_max_val,
                      stated=[edit for edit in applied_edits if edit.content in stated_contents])
    result.val = pool
    baseline_views = prompt_views(texts)
    if settings.gate_mode == "on" and not result.changed:
        result.baseline_val = replay_tasks(pool, replayer, **baseline_views)
    if not result.changed:
        baseline = summarize(result.baseline_val or result.train_results, settings.gate_metric,
                             settings.gate_mixed_weight)
        result.gate = GateDecision(mode=settings.gate_mode, metric=settings.gate_metric, rule=settings.gate_rule,
                                   verdict="reject", reason="no edit changed a document: nothing to test",
                                   baseline=baseline)
    else:
        gate = functools.partial(decide, settings.gate, best_gate_score=inputs.best_gate_score,
                                 request_heads={task.id: task.request[:120] for task in pool})
        tester = _Tester(val=pool, texts=texts, settings=settings, replayer=replayer, views=prompt_views, gate=gate)
        if settings.gate_mode == "on":
            evaluation, decision = tester.test(result.candidate)
            _take(result, result.candidate, evaluation, decision, texts)
            if settings.gate_repair:
                _repair_stage(result, tester, meter=meter)
            if settings.gate_stated_rules == "own_tasks":
                _stated_rules_stage(result, tester, proposed=proposed_rules, train=inputs.train, meter=meter)
            _support_stage(result, tester, stated=stated_contents, meter=meter)
        else:
            result.gate = gate(baseline=[], candidate=[])
    _annotate(result.gate, pool, inputs.val_origins)


def run_step(inputs: StepInput, *, settings: StepSettings, replayer: Replayer,
             on_stage: Callable[[str, str], None] | None = None) -> StepResult:
    """Run one SkillOpt step on ``inputs`` (see the module docstring) and return what it did.

    settings: what the step may do; replayer: how it replays (every call, the optimizer's too, goes through
    ``replayer.meter``); on_stage: called as ``on_stage(stage, "begin" | "end")`` around each of the six stages
    (progress display).
    Raises ``BackendError`` / ``BudgetExhausted`` from the meter; ValueError for unknown gate settings (from
    ``gate.GateSettings``).
    """
    meter, train = replayer.meter, inputs.train
    clock = StageClock(meter, on_stage, stages=STAGES)
    texts = {kind: inputs.documents[kind] for kind in DOCUMENT_KINDS if kind in inputs.documents}
    stated = inputs.rules if inputs.rules is not None else stated_rules(train)
    user_text = inputs.user_text
    if user_text is None:
        user_text = UserText.of_tasks([*train, *inputs.val, *inputs.archived_val],
                                      rules=[text for rule in stated for text in (rule.phrasings or [rule.text])],
                                      documents=texts.values())

    def screen(content: str) -> str | None:
        return provenance_reason(content, user_text)

    scope = EditScope(edit_budget=settings.edit_budget, evolve_skill=settings.evolve_skill and "skill" in texts,
                      evolve_memory=settings.evolve_memory and "memory" in texts, screen=screen)
    baseline_views = prompt_views(texts)

    # 1. rollout
    with clock.stage("rollout"):
        train_results = replay_tasks(
            train, replayer, **baseline_views, samples=settings.rollouts_k,
            temperature=settings.rollout_temperature if settings.rollouts_k > 1 else 0.0)
    result = StepResult(train_results=train_results, gate=GateDecision(
        mode=settings.gate_mode, metric=settings.gate_metric, rule=settings.gate_rule, verdict="skipped",
        reason="the step did not reach the gate"))

    # 2. reflect
    rejected: list[EditRecord] = []
    patches: list[PatchList] = []
    with clock.stage("reflect"):
        if not scope.targets:
            result.errors.append({"stage": "reflect", "message": "no document may evolve: nothing to reflect on"})
        elif settings.edit_budget < 1:
            result.errors.append({"stage": "reflect", "message": f"edit budget is {settings.edit_budget}: "
                                                                 "nothing to propose"})
        else:
            patches, rejected = _reflect_stage(train, documents=texts, settings=settings, scope=scope, meter=meter,
                                               context=inputs.context, recalled=inputs.recalled, result=result)
    result.raw_patches = [patch.edits for patch in patches]

    # 3. aggregate: the optimizer's edits, then the users' own rules first (one edit per rule, never restated)
    with clock.stage("aggregate"):
        merged, merge_rejected = _aggregate_stage(patches, documents=texts, train=[*train, *inputs.recalled],
                                                  settings=settings,
                                                  scope=scope, meter=meter, result=result)
        proposed_rules, merged = _user_rules_stage(
            merged, stated=stated, texts=texts, settings=settings, scope=scope, edit_filter=inputs.edit_filter,
            rejected=rejected, choose=_wording(result, inputs, stated=stated, texts=texts, settings=settings,
                                               scope=scope, replayer=replayer), held=inputs.held_rules)
    team_edits = _team_rules_stage(inputs.team_rules, user_text=user_text, scope=scope, rejected=rejected)
    merged = [*merged[:len(proposed_rules)], *team_edits, *merged[len(proposed_rules):]]
    result.user_rules, result.team_rules = len(proposed_rules), len(team_edits)
    result.merged = merged

    # 4. select
    with clock.stage("select"):
        _select_stage(merged, documents=texts, settings=settings, meter=meter, result=result)

    # 5. update
    with clock.stage("update"):
        candidate, applied = build_candidate(texts, result.selected)
        edits = [*rejected, *merge_rejected, *applied]
        edits.extend(_not_selected(edit, settings.edit_budget) for edit in result.ranked[settings.edit_budget:])
    result.edits = edits
    result.candidate = candidate
    result.changed = [kind for kind in texts if candidate[kind] != texts[kind]]

    # 6. gated evaluate
    with clock.stage("gate"):
        _gate_stage(result, inputs, texts=texts, proposed_rules=proposed_rules, settings=settings, replayer=replayer)
    result.calls_by_stage = clock.calls
    result.stage_seconds = clock.seconds
    return result
