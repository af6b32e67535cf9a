"""Replay a candidate and the baseline on val tasks: the paired protocol the gate decides on.

One function, used wherever a candidate is tested (the step's gate, gate repair's second test, the pending
candidate's re-test), so that every test samples the same way:

1. every val task is replayed once per side (temperature 0). A side already replayed with the same documents
   (the baseline, on an earlier night or earlier in this one) comes from the ``ReplayCache`` at no cost;
2. ``gate.tasks_to_resample`` names the tasks whose outcome could be noise (a win, a loss, a regression, or
   samples that disagree). Each gets a second sample per side first. When both sides reproduce their first answer
   word for word, the backend is deterministic for that prompt (a greedy decoder at temperature 0): more samples
   would only repeat it, so the task stops at two (``Evaluation.settled``);
3. the other named tasks get ``gate_samples`` samples per side (``gate_temperature``);
4. the flip re-test: ``gate.tasks_to_perturb`` names the tasks the candidate now regresses (at most ``flip_tasks``);
   each is replayed ``flip_samples`` times per side at ``flip_temperature`` (sample i with seed + i, so the samples
   differ and are cached apart from the temperature-0 ones), for ``gate.decide`` to tell a flip from a regression
   (``Evaluation.perturbed_baseline`` / ``perturbed_candidate``). Off when ``flip_samples`` or ``flip_tasks`` is 0.

Raises ``BackendError`` / ``BudgetExhausted`` from the meter.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from skillopt_sleep.engine.gate import replace_task_results, tasks_to_perturb, tasks_to_resample
from skillopt_sleep.engine.replay import Replayer, replay_tasks
from skillopt_sleep.models import ReplayResult, TaskRecord


class Evaluation(BaseModel):
    """The val replays of one test. baseline / candidate: every val task, resampled tasks with their samples;
    resampled: the task ids that got more than one sample; settled: those that stopped at two samples because
    both sides repeated their answers exactly; perturbed: the regressed task ids re-tested under perturbation,
    with their samples in perturbed_baseline / perturbed_candidate (not in baseline / candidate)."""

    model_config = ConfigDict(extra="forbid")

    baseline: list[ReplayResult] = Field(default_factory=list)
    candidate: list[ReplayResult] = Field(default_factory=list)
    resampled: list[str] = Field(default_factory=list)
    settled: list[str] = Field(default_factory=list)
    perturbed: list[str] = Field(default_factory=list)
    perturbed_baseline: list[ReplayResult] = Field(default_factory=list)
    perturbed_candidate: list[ReplayResult] = Field(default_factory=list)


@dataclass(frozen=True)
class SamplingPlan:
    """How one test samples (module docstring): gate_samples: samples per side for a task whose outcome could be noise
    (1 = none) at gate_temperature; metric / mixed_weight: the gate metric that names those tasks; flip_samples /
    flip_temperature / flip_tasks: the flip re-test's samples per side, temperature and most tasks (step 4; 0 samples
    or 0 tasks = no re-test). Built by ``StepSettings.sampling``."""

    gate_samples: int
    gate_temperature: float
    metric: str
    mixed_weight: float
    flip_samples: int = 0
    flip_temperature: float = 0.0
    flip_tasks: int = 0


def _repeats(results: list[ReplayResult], task_id: str) -> bool:
    """The task's scored samples all have the same response (and there are at least two)."""
    responses = [result.response for result in results if result.task_id == task_id and result.error is None]
    return len(responses) >= 2 and len(set(responses)) == 1


def replay_pair(val: list[TaskRecord], replayer: Replayer, *, baseline_views: dict[str, str],
                candidate_views: dict[str, str], plan: SamplingPlan) -> Evaluation:
    """Replay ``val`` with the baseline and the candidate documents through ``replayer`` (module docstring), sampling
    as ``plan`` says.

    baseline_views / candidate_views: ``{"skill": text, "memory": text}`` as the target sees them
    (``documents.targets.prompt_view``).
    """
    out = Evaluation(baseline=replay_tasks(val, replayer, **baseline_views),
                     candidate=replay_tasks(val, replayer, **candidate_views))
    _resample(out, val, replayer, baseline_views=baseline_views, candidate_views=candidate_views, plan=plan)
    if plan.flip_samples > 0:
        wanted = set(tasks_to_perturb(out.baseline, out.candidate, limit=plan.flip_tasks))
        flipped = [task for task in val if task.id in wanted]
        if flipped:
            out.perturbed = [task.id for task in flipped]
            out.perturbed_baseline = replay_tasks(flipped, replayer, **baseline_views, samples=plan.flip_samples,
                                                  temperature=plan.flip_temperature)
            out.perturbed_candidate = replay_tasks(flipped, replayer, **candidate_views, samples=plan.flip_samples,
                                                   temperature=plan.flip_temperature)
    return out


def _resample(out: Evaluation, val: list[TaskRecord], replayer: Replayer, *, baseline_views: dict[str, str],
              candidate_views: dict[str, str], plan: SamplingPlan) -> None:
    """Steps 2 and 3 of the module docstring, on ``out`` in place."""
    gate_samples, gate_temperature = plan.gate_samples, plan.gate_temperature
    wanted = set(tasks_to_resample(out.baseline, out.candidate, metric=plan.metric, mixed_weight=plan.mixed_weight,
                                   gate_samples=gate_samples))
    noisy = [task for task in val if task.id in wanted]
    for samples in sorted({2, gate_samples}):
        if not noisy:
            break
        baseline = replay_tasks(noisy, replayer, **baseline_views, samples=samples, temperature=gate_temperature)
        candidate = replay_tasks(noisy, replayer, **candidate_views, samples=samples, temperature=gate_temperature)
        out.baseline = replace_task_results(out.baseline, baseline)
        out.candidate = replace_task_results(out.candidate, candidate)
        out.resampled = list(dict.fromkeys([*out.resampled, *(task.id for task in noisy)]))
        if samples == 2 and gate_samples > 2:
            settled = [task.id for task in noisy if _repeats(baseline, task.id) and _repeats(candidate, task.id)]
            out.settled.extend(settled)
            noisy = [task for task in noisy if task.id not in settled]
