"""The gate: accept tonight's candidate documents only if they score better on held-out (val) tasks.

The candidate is replayed on the val tasks, the baseline (the current documents) is replayed on the same val
tasks in the same night, and each result gets a gate score (``judges.gate_score``: hard, soft or mixed).
Both rules first require that

1. no val result carries an error (a failed call is not a score), and
2. baseline and candidate cover the same, non-empty set of val tasks.

Rule ``strict`` (SkillOpt's gate, kept for compatibility): the candidate is accepted only when

3. its mean gate score is strictly higher than the baseline's (by more than ``EPSILON``), and
4. it does not regress a task the baseline passed: a val task where every baseline sample had hard 1 must
   not have a candidate sample with hard 0 (a mean can hide such a regression).

``strict`` lets flaky val tasks decide: on 10 simulated val tasks it accepts 30% of no-op edits and 17% of
harmful ones (``docs/benchmarks.md``, "Gate simulation"; paired with the defaults: 0.9% and 0.3%).

Rule ``paired`` (the default) counts per-task wins and losses (``paired_outcome``): a task is won when every
candidate sample scores above every baseline sample (with one sample per side: the candidate scored higher),
lost in the mirror case, tied otherwise. When an LLM judge scored the task, only hard scores count, so a
soft-only rise is a tie. The candidate is accepted only when

3. no protected task regresses: a task the baseline passed in every sample (hard 1) must not have a
   candidate sample with hard 0 (clause ``regression``), unless the flip re-test calls it a flip (below),
4. wins - losses >= ``margin`` (clause ``margin``), and
5. a one-sided exact sign test over the won and lost tasks gives p <= ``alpha`` (clause ``sign_test``):
   p = P(X >= wins) for X ~ Binomial(wins + losses, 1/2) (``sign_test_p_value``; ties are left out).

Flaky tasks and extra samples (the step's job, before it calls ``decide``): replay every val task once per
side, then ask ``tasks_to_resample(baseline, candidate, ...)`` which tasks need more samples (a win, a loss or
a regression that rests on one sample each, or a task whose samples disagree: ``flaky_task_ids``); replay
those tasks with ``gate_samples`` samples on both sides and merge them with ``replace_task_results``.

Flips (the step's job too, after the resampling): at temperature 0 a line added to a document can change a small
model's answer to an unrelated request, so one protected task can fail at temperature 0 whatever the edit's worth.
``tasks_to_perturb`` names the regressed tasks whose regression held on at least ``FLIP_MIN_SAMPLES`` samples per
side (at most a limit); the step replays each with ``gate_flip_samples``
samples per side at ``gate_flip_temperature`` and passes them to ``decide`` (``perturbed_baseline``,
``perturbed_candidate``). Such a task still vetoes only when the candidate passes it significantly less often under
perturbation: a one-sided Fisher exact test (``flip_p_value``) gives p <= ``flip_alpha``. Otherwise it is a flip
(``details["flips"]``) and does not veto; both rules honour it (``GateContext.regressed``). A flip's lost outcome
stands (it counts against ``margin`` and the sign test) while the candidate passes fewer perturbed samples than the
baseline; where it passes as many or more, the perturbation shows no drop at all and the task is a tie
(``settle_flips``, ``details["flips_tied"]``: world 3's archived podman task, passed 1 of 4 perturbed samples on
either side, had vetoed a night that won its own task). A regressed task without perturbed samples on both sides
vetoes as before.

A candidate that is not worse but lacks the evidence (blocked by ``margin`` or ``sign_test`` with
wins >= losses) gets verdict ``reject`` with ``details["pending"] = True``: the night may keep it and re-test
it on the next night's fresh val tasks, promoting it only if it is accepted then.

Accepted candidates are ``accept_new_best`` when their mean also beats ``best_gate_score`` (the all-time
best; None = no best yet) and ``accept`` otherwise. Mode ``off`` accepts greedily without val scoring.

Each rule is a ``GateRule`` object (``StrictRule``, ``PairedRule``; ``RULES`` maps the config names to them):
``decide`` checks clauses 1 and 2 and words the acceptance once, the rule compares the tasks and judges the rest.
Its settings come as one ``GateSettings`` (mode, metric, rule, margin, alpha, flip_alpha), whose rule may also be a
``GateRule`` of a library user's own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from math import comb
from typing import Any, Literal, Protocol

from skillopt_sleep.engine.judges import gate_score
from skillopt_sleep.models import GateDecision, GateVerdict, ReplayResult, Scores, TaskComparison

#: Differences of gate scores at or below this are ties (floating-point noise is not an improvement).
EPSILON = 1e-9
#: Defaults of the paired rule (config keys ``gate_margin``, ``gate_alpha``, ``gate_samples``), chosen with
#: ``benchmarks/gate_sim.py`` (``docs/benchmarks.md``, "Gate simulation"). With alpha 0.5 the sign test blocks
#: nothing that margin 1 lets through (p <= 0.5 iff wins > losses); the noise resistance comes from wins that
#: must hold over ``DEFAULT_SAMPLES`` samples per side and the regression clause. Lower alpha for more caution.
DEFAULT_MARGIN = 1
DEFAULT_ALPHA = 0.5
DEFAULT_SAMPLES = 4
#: Defaults of the flip re-test (config keys ``gate_flip_samples``, ``gate_flip_temperature``, ``gate_flip_alpha``,
#: ``gate_flip_max_tasks``), chosen with ``benchmarks/gate_sim.py`` (``--flips``). With 4 samples per side, alpha
#: 0.25 confirms a regression when the candidate passes at least two fewer (4 vs 2, p = 0.21; 3 vs 1, p = 0.24) and
#: calls one fewer a flip (4 vs 3, p = 0.5).
DEFAULT_FLIP_SAMPLES = 4
DEFAULT_FLIP_TEMPERATURE = 0.7
DEFAULT_FLIP_ALPHA = 0.25
DEFAULT_FLIP_MAX_TASKS = 2
#: Least scored samples per side a regression must rest on to be re-tested for a flip: a one-sample regression is as
#: often flaky noise as a flip, and excusing those doubled the no-op acceptance at ``gate_samples = 1`` in the
#: simulation, so with one sample the gate stays as it was (like ``repair.MIN_SAMPLES``).
FLIP_MIN_SAMPLES = 2
#: Clauses of a rejection that are evidence against the candidate's edits (a failed call, missing coverage or no
#: val task is not: those say nothing about the edits).
EVIDENCE_CLAUSES = ("mean", "regression", "margin", "sign_test")

Outcome = Literal["win", "loss", "tie", "n/a"]


def _result_gate(result: ReplayResult, metric: str, mixed_weight: float) -> float:
    return gate_score(result.hard, result.soft, metric, mixed_weight)


def _scored(results: list[ReplayResult]) -> list[ReplayResult]:
    return [result for result in results if result.error is None]


def summarize(results: list[ReplayResult], metric: str, mixed_weight: float) -> Scores:
    """Mean hard, soft and gate score over the results without an error; n counts those results."""
    scored = _scored(results)
    if not scored:
        return Scores()
    count = len(scored)
    return Scores(
        hard=sum(result.hard for result in scored) / count,
        soft=sum(result.soft for result in scored) / count,
        gate=sum(_result_gate(result, metric, mixed_weight) for result in scored) / count,
        n=count,
    )


def _task_ids(*groups: list[ReplayResult]) -> list[str]:
    seen: dict[str, None] = {}
    for group in groups:
        for result in group:
            seen.setdefault(result.task_id, None)
    return list(seen)


def _by_task(results: list[ReplayResult], task_id: str) -> list[ReplayResult]:
    return [result for result in results if result.task_id == task_id]


def _mean_gate(results: list[ReplayResult], metric: str, mixed_weight: float) -> float | None:
    scored = _scored(results)
    if not scored:
        return None
    return sum(_result_gate(result, metric, mixed_weight) for result in scored) / len(scored)


def compare_tasks(baseline: list[ReplayResult], candidate: list[ReplayResult], metric: str,
                  mixed_weight: float, request_heads: dict[str, str] | None = None) -> list[TaskComparison]:
    """Rule ``strict``: one ``TaskComparison`` per val task id (baseline order first): win/loss/tie on the
    mean gate score of the task's samples; ``n/a`` when one side has no scored sample."""
    heads = request_heads or {}
    comparisons: list[TaskComparison] = []
    for task_id in _task_ids(baseline, candidate):
        base = _by_task(baseline, task_id)
        cand = _by_task(candidate, task_id)
        base_mean = _mean_gate(base, metric, mixed_weight)
        cand_mean = _mean_gate(cand, metric, mixed_weight)
        if base_mean is None or cand_mean is None:
            outcome = "n/a"
        elif cand_mean > base_mean + EPSILON:
            outcome = "win"
        elif cand_mean < base_mean - EPSILON:
            outcome = "loss"
        else:
            outcome = "tie"
        comparisons.append(TaskComparison(task_id=task_id, request_head=heads.get(task_id, ""), baseline=base,
                                          candidate=cand, outcome=outcome))
    return comparisons


def _protected(baseline: list[ReplayResult]) -> bool:
    """The baseline passed the task (hard 1) in every scored sample."""
    scored = _scored(baseline)
    return bool(scored) and all(result.hard == 1 for result in scored)


def is_regression(comparison: TaskComparison) -> bool:
    """The baseline passed the task in every sample and the candidate failed it in at least one."""
    return _protected(comparison.baseline) and any(result.hard == 0 for result in _scored(comparison.candidate))


# --------------------------------------------------------------------------- paired rule


def sign_test_p_value(wins: int, losses: int) -> float:
    """One-sided exact sign test: p = P(X >= wins) for X ~ Binomial(wins + losses, 1/2).

    wins, losses: counts of won and lost val tasks (ties are left out), each >= 0. Returns a float in
    (0, 1]; 1.0 when there is no won or lost task. Raises ValueError for a negative count.
    """
    if wins < 0 or losses < 0:
        raise ValueError(f"wins and losses must be >= 0, got {wins} and {losses}")
    trials = wins + losses
    if trials == 0:
        return 1.0
    return sum(comb(trials, k) for k in range(wins, trials + 1)) / 2 ** trials


def flaky_task_ids(results: list[ReplayResult]) -> set[str]:
    """Task ids whose scored samples (error None) disagree on the hard score (some pass, some fail).

    Pass one side's results (baseline or candidate), not both together: baseline and candidate are meant to
    differ. Soft scores are not compared (an LLM judge's soft score varies from call to call).
    """
    outcomes: dict[str, set[int]] = {}
    for result in _scored(results):
        outcomes.setdefault(result.task_id, set()).add(result.hard)
    return {task_id for task_id, seen in outcomes.items() if len(seen) > 1}


def paired_outcome(baseline: list[ReplayResult], candidate: list[ReplayResult], metric: str,
                   mixed_weight: float) -> Outcome:
    """Rule ``paired``: the outcome of one val task from its baseline and candidate samples.

    ``win`` when every scored candidate sample scores above every scored baseline sample (by more than
    ``EPSILON``), ``loss`` in the mirror case, ``tie`` otherwise, ``n/a`` when a side has no scored sample.
    The score is the gate score, except that only hard scores count when an LLM judge scored any sample of the
    task (``llm_judged``): a soft-only rise judged by an LLM is a tie.
    """
    base, cand = _scored(baseline), _scored(candidate)
    if not base or not cand:
        return "n/a"
    llm_judged = any(result.llm_judged for result in base + cand)

    def score(result: ReplayResult) -> float:
        return float(result.hard) if llm_judged else _result_gate(result, metric, mixed_weight)

    base_scores = [score(result) for result in base]
    cand_scores = [score(result) for result in cand]
    if min(cand_scores) > max(base_scores) + EPSILON:
        return "win"
    if max(cand_scores) < min(base_scores) - EPSILON:
        return "loss"
    return "tie"


def compare_tasks_paired(baseline: list[ReplayResult], candidate: list[ReplayResult], metric: str,
                         mixed_weight: float, request_heads: dict[str, str] | None = None) -> list[TaskComparison]:
    """Rule ``paired``: one ``TaskComparison`` per val task id (baseline order first), outcome from
    ``paired_outcome``."""
    heads = request_heads or {}
    comparisons: list[TaskComparison] = []
    for task_id in _task_ids(baseline, candidate):
        base = _by_task(baseline, task_id)
        cand = _by_task(candidate, task_id)
        comparisons.append(TaskComparison(task_id=task_id, request_head=heads.get(task_id, ""), baseline=base,
                                          candidate=cand, outcome=paired_outcome(base, cand, metric, mixed_weight)))
    return comparisons


def tasks_to_resample(baseline: list[ReplayResult], candidate: list[ReplayResult], *, metric: str,
                      mixed_weight: float, gate_samples: int) -> list[str]:
    """Val task ids the step should replay with ``gate_samples`` samples on both sides before ``decide``.

    A task needs more samples when its outcome could be noise: it is a win or a loss (``paired_outcome``),
    it would count as a regression, or its samples disagree on either side (``flaky_task_ids``); and one
    side has fewer than ``gate_samples`` scored samples. Stable ties are not resampled (they cost calls and
    cannot change the decision much). Returns ids in baseline order; [] when ``gate_samples`` <= 1.
    """
    if gate_samples <= 1:
        return []
    flaky = flaky_task_ids(baseline) | flaky_task_ids(candidate)
    wanted: list[str] = []
    for task_id in _task_ids(baseline, candidate):
        base = _by_task(baseline, task_id)
        cand = _by_task(candidate, task_id)
        if min(len(_scored(base)), len(_scored(cand))) >= gate_samples:
            continue
        comparison = TaskComparison(task_id=task_id, baseline=base, candidate=cand)
        if (task_id in flaky or is_regression(comparison)
                or paired_outcome(base, cand, metric, mixed_weight) in ("win", "loss")):
            wanted.append(task_id)
    return wanted


def replace_task_results(results: list[ReplayResult], replacement: list[ReplayResult]) -> list[ReplayResult]:
    """Return ``results`` with every result of a task that ``replacement`` covers swapped for the
    replacement's results of that task (e.g. the same task replayed with ``gate_samples`` samples); the
    order of first appearance of each task is kept."""
    replaced = {result.task_id for result in replacement}
    merged: list[ReplayResult] = []
    for task_id in _task_ids(results, replacement):
        merged.extend(_by_task(replacement if task_id in replaced else results, task_id))
    return merged


# --------------------------------------------------------------------------- flips


def flip_p_value(baseline_passes: int, baseline_samples: int, candidate_passes: int, candidate_samples: int) -> float:
    """One-sided Fisher exact test that the candidate passes a task less often than the baseline.

    Given the passes of both sides together, the candidate's passes follow a hypergeometric law under "same pass
    rate"; p = P(candidate passes <= ``candidate_passes``). Exact and deterministic given the counts, valid at any
    sample count (a binomial test against the baseline's observed rate would treat that rate as known, and 4 of 4
    as a certainty). Counts are scored samples (no error). Returns a float in (0, 1]; 1.0 when a side has no
    sample. Raises ValueError when a count is negative or passes exceed samples.
    """
    if not (0 <= baseline_passes <= baseline_samples and 0 <= candidate_passes <= candidate_samples):
        raise ValueError(f"passes must be in [0, samples], got {baseline_passes}/{baseline_samples} and "
                         f"{candidate_passes}/{candidate_samples}")
    if not baseline_samples or not candidate_samples:
        return 1.0
    total, passes = baseline_samples + candidate_samples, baseline_passes + candidate_passes
    tail = sum(comb(passes, k) * comb(total - passes, candidate_samples - k) for k in range(candidate_passes + 1))
    return tail / comb(total, candidate_samples)


def tasks_to_perturb(baseline: list[ReplayResult], candidate: list[ReplayResult], *, limit: int) -> list[str]:
    """Val task ids the step should re-test under perturbation before ``decide``: the regressed tasks
    (``is_regression``) with at least ``FLIP_MIN_SAMPLES`` scored samples per side, in baseline order, at most
    ``limit`` (<= 0: none)."""
    if limit <= 0:
        return []
    regressed = []
    for task_id in _task_ids(baseline, candidate):
        base, cand = _by_task(baseline, task_id), _by_task(candidate, task_id)
        if (min(len(_scored(base)), len(_scored(cand))) >= FLIP_MIN_SAMPLES
                and is_regression(TaskComparison(task_id=task_id, baseline=base, candidate=cand))):
            regressed.append(task_id)
    return regressed[:limit]


def flip_test(task_id: str, baseline: list[ReplayResult], candidate: list[ReplayResult],
              alpha: float) -> dict[str, Any] | None:
    """The flip re-test of one regressed task from its perturbed samples (any order, other tasks ignored).

    Returns ``{"task", "baseline_passes", "candidate_passes", "samples", "p_value", "flip"}`` (samples: scored
    samples per side, the smaller side's count when they differ; flip: p > alpha, the task does not veto), or
    None when a side has no scored perturbed sample (the regression stands).
    """
    base, cand = _scored(_by_task(baseline, task_id)), _scored(_by_task(candidate, task_id))
    if not base or not cand:
        return None
    base_passes = sum(1 for result in base if result.hard == 1)
    cand_passes = sum(1 for result in cand if result.hard == 1)
    p_value = flip_p_value(base_passes, len(base), cand_passes, len(cand))
    return {"task": task_id, "baseline_passes": base_passes, "candidate_passes": cand_passes,
            "samples": min(len(base), len(cand)), "p_value": p_value, "flip": p_value > alpha}


def settle_flips(per_task: list[TaskComparison], perturbed_baseline: list[ReplayResult],
                 perturbed_candidate: list[ReplayResult], alpha: float) -> tuple[list[TaskComparison], list[str]]:
    """``per_task`` with every lost task that is a flip (``flip_test``) whose candidate passed at least as many
    perturbed samples as the baseline made a tie (module docstring, "Flips"), and the ids of those tasks."""
    settled, tied = [], []
    for comparison in per_task:
        test = (flip_test(comparison.task_id, perturbed_baseline, perturbed_candidate, alpha)
                if comparison.outcome == "loss" and is_regression(comparison) else None)
        if test is not None and test["flip"] and test["candidate_passes"] >= test["baseline_passes"]:
            comparison = comparison.model_copy(update={"outcome": "tie"})
            tied.append(comparison.task_id)
        settled.append(comparison)
    return settled, tied


# --------------------------------------------------------------------------- rules


@dataclass(frozen=True)
class GateContext:
    """What a rule judges: val results that carry no error and cover the same non-empty set of tasks.

    baseline/candidate: the val ``ReplayResult``s; per_task: the rule's own ``compare`` of them; baseline_scores/
    candidate_scores: ``summarize`` of each side; metric/mixed_weight: the gate score's settings; numbers: the
    summary every reason ends with ("val hard score 0.667 vs baseline 0.333 (delta ..., 3 tasks, ...)");
    perturbed_baseline/perturbed_candidate: the flip re-test's samples of regressed tasks (module docstring;
    empty: none); flip_alpha: the flip test's alpha.
    """

    baseline: list[ReplayResult]
    candidate: list[ReplayResult]
    per_task: list[TaskComparison]
    baseline_scores: Scores
    candidate_scores: Scores
    metric: str
    mixed_weight: float
    numbers: str
    perturbed_baseline: list[ReplayResult] = field(default_factory=list)
    perturbed_candidate: list[ReplayResult] = field(default_factory=list)
    flip_alpha: float = DEFAULT_FLIP_ALPHA

    def count(self, outcome: Outcome) -> int:
        """How many val tasks of ``per_task`` have this outcome."""
        return sum(1 for comparison in self.per_task if comparison.outcome == outcome)

    def flip_tests(self) -> list[dict[str, Any]]:
        """``flip_test`` of every regressed task with perturbed samples on both sides, in ``per_task`` order."""
        tests = (flip_test(comparison.task_id, self.perturbed_baseline, self.perturbed_candidate, self.flip_alpha)
                 for comparison in self.per_task if is_regression(comparison))
        return [test for test in tests if test is not None]

    def regressed(self) -> list[str]:
        """Ids of the tasks the candidate regressed (``is_regression``) that the flip re-test did not call a flip,
        in ``per_task`` order."""
        flips = {test["task"] for test in self.flip_tests() if test["flip"]}
        return [comparison.task_id for comparison in self.per_task
                if is_regression(comparison) and comparison.task_id not in flips]


@dataclass(frozen=True)
class RuleVerdict:
    """A rule's judgement (``GateRule.judge``); build it with ``accept`` or ``reject``.

    clause: ``"accepted"``, or the clause that rejected (e.g. ``"mean"``; ``EVIDENCE_CLAUSES`` lists the ones
    that count against the edits); reason: for a rejection the whole reason, for an acceptance the kind of win
    (``decide`` adds the best-score wording and the numbers); details: keys added to ``GateDecision.details``;
    pending: rejected for lack of evidence only (the night may re-test the candidate next night).
    """

    clause: str
    reason: str
    details: dict[str, Any] = field(default_factory=dict)
    pending: bool = False

    @classmethod
    def accept(cls, kind_of_win: str, details: dict[str, Any] | None = None) -> RuleVerdict:
        return cls("accepted", kind_of_win, dict(details or {}))

    @classmethod
    def reject(cls, clause: str, reason: str, details: dict[str, Any] | None = None, *,
               pending: bool = False) -> RuleVerdict:
        return cls(clause, reason, dict(details or {}), pending)

    @property
    def accepted(self) -> bool:
        return self.clause == "accepted"


class GateRule(Protocol):
    """A gate rule: how val tasks are compared and what the comparison must show for the candidate to pass.

    ``decide`` handles what every rule shares (gate off, failed calls, no val task, coverage, the accepted /
    new-best wording) and asks the rule the rest. name: recorded as ``GateDecision.rule``; compare: one
    ``TaskComparison`` per val task id (outcome ``win``, ``loss``, ``tie`` or ``n/a``); judge: the verdict on
    an error-free, fully covered comparison.
    """

    @property
    def name(self) -> str: ...

    def compare(self, baseline: list[ReplayResult], candidate: list[ReplayResult], metric: str,
                mixed_weight: float, request_heads: dict[str, str] | None = None) -> list[TaskComparison]: ...

    def judge(self, context: GateContext) -> RuleVerdict: ...


@dataclass(frozen=True)
class StrictRule:
    """Rule ``strict``: a strictly higher mean gate score (clause ``mean``) and no regressed task the baseline
    passed (clause ``regression``; ``details["regressed_tasks"]``)."""

    name = "strict"

    def compare(self, baseline: list[ReplayResult], candidate: list[ReplayResult], metric: str,
                mixed_weight: float, request_heads: dict[str, str] | None = None) -> list[TaskComparison]:
        return compare_tasks(baseline, candidate, metric, mixed_weight, request_heads)

    def judge(self, context: GateContext) -> RuleVerdict:
        if not context.candidate_scores.gate > context.baseline_scores.gate + EPSILON:
            return RuleVerdict.reject("mean", f"not a strict improvement: {context.numbers}")
        regressed = context.regressed()
        details = {"regressed_tasks": regressed}
        if regressed:
            return RuleVerdict.reject("regression", f"regressed {len(regressed)} task(s) the baseline passed "
                                                    f"({', '.join(regressed[:5])}): {context.numbers}", details)
        return RuleVerdict.accept("strict improvement", details)


def _check_margin_alpha(margin: int, alpha: float) -> None:
    if margin < 0 or not 0.0 <= alpha <= 1.0:
        raise ValueError(f"gate margin must be >= 0 and alpha in [0, 1], got {margin} and {alpha}")


@dataclass(frozen=True)
class PairedRule:
    """Rule ``paired``: per-task wins and losses (``paired_outcome``); clauses ``regression``, ``margin``
    (wins - losses >= margin) and ``sign_test`` (p <= alpha). margin: int >= 0; alpha: float in [0, 1];
    ValueError otherwise."""

    margin: int = DEFAULT_MARGIN
    alpha: float = DEFAULT_ALPHA
    name = "paired"

    def __post_init__(self) -> None:
        _check_margin_alpha(self.margin, self.alpha)

    def compare(self, baseline: list[ReplayResult], candidate: list[ReplayResult], metric: str,
                mixed_weight: float, request_heads: dict[str, str] | None = None) -> list[TaskComparison]:
        return compare_tasks_paired(baseline, candidate, metric, mixed_weight, request_heads)

    def judge(self, context: GateContext) -> RuleVerdict:
        wins, losses = context.count("win"), context.count("loss")
        p_value = sign_test_p_value(wins, losses)
        details = self._details(context, p_value)
        regressed = details["regressions"]
        if regressed:
            return RuleVerdict.reject("regression", f"regressed {len(regressed)} protected task(s) the baseline "
                                                    f"passed in every sample ({', '.join(regressed[:5])}): "
                                                    f"{context.numbers}", details)
        evidence = (f"wins - losses {wins - losses} (margin {self.margin}), sign test p = {p_value:.3f} "
                    f"(alpha {self.alpha:g}), {len(details['protected'])} protected task(s)")
        flips = [test for test in context.flip_tests() if test["flip"]]
        if flips:
            evidence += f", {len(flips)} flip(s) not confirmed under perturbation (" + ", ".join(
                f"{test['task']}: {test['candidate_passes']} vs {test['baseline_passes']} of {test['samples']}"
                for test in flips[:5]) + ")"
        if wins - losses >= self.margin and p_value <= self.alpha:
            return RuleVerdict.accept(f"paired improvement ({evidence})", details)
        clause = "margin" if wins - losses < self.margin else "sign_test"
        if wins >= losses:
            return RuleVerdict.reject(clause, f"not enough evidence ({evidence}); pending: re-test on the next "
                                              f"night's fresh val tasks: {context.numbers}", details, pending=True)
        return RuleVerdict.reject(clause, f"more losses than wins ({evidence}): {context.numbers}", details)

    def _details(self, context: GateContext, p_value: float) -> dict[str, Any]:
        per_task = context.per_task
        return {
            "p_value": p_value,
            "margin": self.margin,
            "alpha": self.alpha,
            "protected": [comparison.task_id for comparison in per_task if _protected(comparison.baseline)],
            "regressions": context.regressed(),
            "flaky": sorted(flaky_task_ids(context.baseline) | flaky_task_ids(context.candidate)),
            "llm_ties": [comparison.task_id for comparison in per_task
                         if _is_llm_tie(comparison, context.metric, context.mixed_weight)],
        }


def _is_llm_tie(comparison: TaskComparison, metric: str, mixed_weight: float) -> bool:
    """A tie only because an LLM judged the task: the mean gate scores differ, yet only hard scores counted."""
    return (comparison.outcome == "tie"
            and any(result.llm_judged for result in comparison.baseline + comparison.candidate)
            and _mean_gate(comparison.candidate, metric, mixed_weight)
            != _mean_gate(comparison.baseline, metric, mixed_weight))


#: The config's rule names (``gate_rule``) and how each rule is built from ``gate_margin`` and ``gate_alpha``.
RULES: dict[str, Callable[[int, float], GateRule]] = {
    "strict": lambda margin, alpha: StrictRule(),
    "paired": PairedRule,
}
SUPPORTED_RULES = tuple(RULES)


def rule_for(name: str, *, margin: int = DEFAULT_MARGIN, alpha: float = DEFAULT_ALPHA) -> GateRule:
    """The rule a config name stands for (``RULES``). Raises ValueError for an unknown name, or a margin or
    alpha out of range (margin: int >= 0, alpha: float in [0, 1], checked whatever the rule)."""
    _check_rule_name(name)
    _check_margin_alpha(margin, alpha)
    return RULES[name](margin, alpha)


def _check_rule_name(name: str) -> None:
    if name not in RULES:
        raise ValueError(f"unknown gate rule {name!r}; supported: {', '.join(map(repr, SUPPORTED_RULES))}")


# --------------------------------------------------------------------------- decision


@dataclass(frozen=True)
class GateSettings:
    """How ``decide`` judges: the gate keys of a night or a trainer step (``StepSettings.gate`` builds it from the
    config keys ``gate_mode``, ``gate_metric``, ``gate_mixed_weight``, ``gate_rule``, ``gate_margin``, ``gate_alpha``).

    mode: ``"on"`` or ``"off"``; metric: ``"hard"``, ``"soft"`` or ``"mixed"``; mixed_weight: w in [0, 1];
    rule: ``"strict"`` or ``"paired"`` (built by ``rule_for`` with margin and alpha), or any ``GateRule`` object
    (e.g. ``PairedRule(margin=2)`` or a rule of your own; margin and alpha are then only range-checked); margin:
    int >= 0, least wins - losses (paired); alpha: float in [0, 1], largest sign-test p-value accepted (paired);
    flip_alpha: float in [0, 1], largest flip-test p-value that confirms a regression (``flip_p_value``; config
    key ``gate_flip_alpha``). Raises ValueError for an unknown mode, rule name or metric, or a margin/alpha/
    flip_alpha out of range.
    """

    mode: str
    metric: str
    mixed_weight: float
    rule: str | GateRule
    margin: int = DEFAULT_MARGIN
    alpha: float = DEFAULT_ALPHA
    flip_alpha: float = DEFAULT_FLIP_ALPHA

    def __post_init__(self) -> None:
        if self.mode not in ("on", "off"):
            raise ValueError(f"unknown gate mode {self.mode!r}; supported: 'on', 'off'")
        if isinstance(self.rule, str):
            _check_rule_name(self.rule)
        _check_margin_alpha(self.margin, self.alpha)  # for a rule object too: they are still settings of the gate
        if not 0.0 <= self.flip_alpha <= 1.0:
            raise ValueError(f"gate flip_alpha must be in [0, 1], got {self.flip_alpha}")
        gate_score(0.0, 0.0, self.metric, self.mixed_weight)  # validates the metric name

    @property
    def gate_rule(self) -> GateRule:
        """The rule object: ``rule`` itself, or the rule its name stands for (``rule_for``)."""
        if isinstance(self.rule, str):
            return rule_for(self.rule, margin=self.margin, alpha=self.alpha)
        return self.rule


def decide(settings: GateSettings, *, baseline: list[ReplayResult], candidate: list[ReplayResult],
           best_gate_score: float | None, request_heads: dict[str, str] | None = None,
           perturbed_baseline: list[ReplayResult] | None = None,
           perturbed_candidate: list[ReplayResult] | None = None) -> GateDecision:
    """Decide whether tonight's candidate documents are accepted.

    settings: the gate's mode, metric, rule, margin and alpha (``GateSettings``, validated when built);
    baseline/candidate: val ``ReplayResult``s, any number of samples per task (may be empty when mode is off);
    best_gate_score: the all-time best mean gate score, or None; request_heads: task id -> request head for the
    per-task report; perturbed_baseline/perturbed_candidate: the flip re-test's samples of regressed tasks (module
    docstring, "Flips"; None: no re-test, every regression vetoes).

    The shared clauses come first (gate off, failed calls, no val task, coverage); the rule's ``judge`` decides
    the rest. Returns a ``GateDecision`` (``rule`` = the rule's name) whose ``reason`` states the numbers and
    whose ``details`` hold ``clause`` (what decided: ``gate_off``, ``failed_calls``, ``no_tasks``,
    ``coverage``, ``mean``, ``regression``, ``margin``, ``sign_test``, ``accepted`` or a custom rule's own),
    ``pending`` (rejected for lack of evidence only), ``wins``/``losses``/``ties``, and the rule's keys: for
    paired ``p_value``, ``margin``, ``alpha``, ``protected``, ``regressions``, ``flaky`` and ``llm_ties`` (task
    id lists), for strict ``regressed_tasks``; with perturbed samples, ``flip_tests`` (every ``flip_test``),
    ``flips`` (those that did not veto) and ``flips_tied`` (the lost tasks ``settle_flips`` made ties).
    """
    mode, metric, mixed_weight = settings.mode, settings.metric, settings.mixed_weight
    gate_rule = settings.gate_rule
    per_task = gate_rule.compare(baseline, candidate, metric, mixed_weight, request_heads)
    per_task, tied = settle_flips(per_task, list(perturbed_baseline or []), list(perturbed_candidate or []),
                                  settings.flip_alpha)
    build = _DecisionBuilder(mode, metric, gate_rule.name, summarize(baseline, metric, mixed_weight),
                             summarize(candidate, metric, mixed_weight), per_task, best_gate_score)
    if mode == "off":
        return build.decision("accept", "gate_off", "gate off: accepted greedily, without val scoring")
    build.details["failed_calls"] = _failed(baseline) + _failed(candidate)
    shared = _failed_calls(baseline, candidate) or _coverage(baseline, candidate)
    if shared is not None:
        return build.rejected(shared)
    context = GateContext(baseline, candidate, per_task, build.baseline, build.candidate, metric, mixed_weight,
                          build.numbers(len(_task_ids(baseline))), list(perturbed_baseline or []),
                          list(perturbed_candidate or []), settings.flip_alpha)
    tests = context.flip_tests()
    if tests:
        build.details["flip_tests"] = tests
        build.details["flips"] = [test for test in tests if test["flip"]]
        build.details["flips_tied"] = tied
    judged = gate_rule.judge(context)
    return build.accepted(judged, context.numbers) if judged.accepted else build.rejected(judged)


def _failed(results: list[ReplayResult]) -> int:
    return sum(1 for result in results if result.error is not None)


def _failed_calls(baseline: list[ReplayResult], candidate: list[ReplayResult]) -> RuleVerdict | None:
    failed_base, failed_cand = _failed(baseline), _failed(candidate)
    if not failed_base and not failed_cand:
        return None
    return RuleVerdict.reject("failed_calls", f"{failed_base + failed_cand} of {len(baseline) + len(candidate)} "
                                              f"val calls failed (baseline {failed_base}, candidate {failed_cand}); "
                                              "failed calls are not scores, so the candidate cannot be judged")


def _coverage(baseline: list[ReplayResult], candidate: list[ReplayResult]) -> RuleVerdict | None:
    base_ids, cand_ids = set(_task_ids(baseline)), set(_task_ids(candidate))
    if not base_ids and not cand_ids:
        return RuleVerdict.reject("no_tasks", "no held-out task with validated checks to test on; pending: re-test "
                                              "on the next night's val tasks", pending=True)
    if base_ids != cand_ids:
        missing = sorted(base_ids ^ cand_ids)
        return RuleVerdict.reject("coverage", f"baseline and candidate were not replayed on the same val tasks "
                                              f"({len(missing)} differ: {', '.join(missing[:5])})")
    return None


class _DecisionBuilder:
    """Builds ``decide``'s ``GateDecision``: the parts every clause shares and the details gathered so far."""

    def __init__(self, mode: str, metric: str, rule: str, baseline: Scores, candidate: Scores,
                 per_task: list[TaskComparison], best_gate_score: float | None) -> None:
        self.mode, self.metric, self.rule = mode, metric, rule
        self.baseline, self.candidate, self.per_task = baseline, candidate, per_task
        self.best_gate_score = best_gate_score
        outcomes = [comparison.outcome for comparison in per_task]
        self.details: dict[str, Any] = {
            "baseline_gate": baseline.gate,
            "candidate_gate": candidate.gate,
            "delta": candidate.gate - baseline.gate,
            "best_gate_score": best_gate_score,
            "wins": outcomes.count("win"),
            "losses": outcomes.count("loss"),
            "ties": outcomes.count("tie"),
            "pending": False,
        }

    def numbers(self, task_count: int) -> str:
        base_mean, cand_mean = self.baseline.gate, self.candidate.gate
        return (f"val {self.metric} score {cand_mean:.3f} vs baseline {base_mean:.3f} "
                f"(delta {cand_mean - base_mean:+.3f}, {task_count} tasks, {self.details['wins']} win / "
                f"{self.details['losses']} loss / {self.details['ties']} tie)")

    def decision(self, kind: GateVerdict, clause: str, reason: str) -> GateDecision:
        self.details["clause"] = clause
        return GateDecision(mode=self.mode, metric=self.metric, rule=self.rule, verdict=kind, reason=reason,
                            baseline=self.baseline, candidate=self.candidate, per_task=self.per_task,
                            details=self.details)

    def rejected(self, verdict: RuleVerdict) -> GateDecision:
        self.details.update(verdict.details)
        self.details["pending"] = verdict.pending
        return self.decision("reject", verdict.clause, verdict.reason)

    def accepted(self, verdict: RuleVerdict, numbers: str) -> GateDecision:
        """``accept_new_best`` when the candidate's mean beats the all-time best (or there is none yet), else
        ``accept``; the reason names the rule's kind of win, the best and the numbers."""
        self.details.update(verdict.details)
        best, kind_of_win = self.best_gate_score, verdict.reason
        if best is None:
            return self.decision("accept_new_best", "accepted", f"{kind_of_win}, first best: {numbers}")
        if self.candidate.gate > best + EPSILON:
            return self.decision("accept_new_best", "accepted", f"{kind_of_win} and new best (previous best "
                                                                f"{best:.3f}): {numbers}")
        return self.decision("accept", "accepted", f"{kind_of_win}, below the best {best:.3f}: {numbers}")
