"""Monte Carlo acceptance rates of the paired gate with and without gate repair, for two-edit candidates.

Gate repair (``skillopt_sleep/engine/repair.py``) gives a rejected candidate a second test without the edits it
blames, so it adds a path to acceptance; this measures what that path lets through. The world, the edits and
the paired replay protocol are those of ``benchmarks/gate_sim.py`` (see its docstring), with a candidate made of
two edits, each touching each val task independently; an edit set's pass probabilities apply its edits in order.
Repair runs the real ``repair.wants_repair`` and ``repair.blame`` (leave-one-out replays are fresh draws from the
candidate without that edit) and the real ``gate.decide``; the repaired candidate gets fresh candidate replays
(first pass, then ``tasks_to_resample``) against tonight's baseline replays, as the step does. ``--flips``: each
decision also gets the flip re-test as in ``gate_sim.py --flips`` (pass probabilities under perturbation from their
own random stream, ``tasks_to_perturb``, ``gate.DEFAULT_FLIP_SAMPLES`` samples per side, the default flip alpha).

Usage::

    python benchmarks/repair_sim.py --trials 2000          # the table of docs/benchmarks.md
    python benchmarks/repair_sim.py --trials 2000 --flips  # with the flip re-test (the default gate)
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.gate_sim import EDITS, World, _perturbed_pass, _replays, draw_val_set, edit_fraction  # noqa: E402
from skillopt_sleep.engine import repair  # noqa: E402
from skillopt_sleep.engine.gate import (  # noqa: E402
    DEFAULT_FLIP_MAX_TASKS,
    DEFAULT_FLIP_SAMPLES,
    GateSettings,
    decide,
    replace_task_results,
    tasks_to_perturb,
    tasks_to_resample,
)
from skillopt_sleep.models import EditRecord, ReplayResult, TaskRecord  # noqa: E402

#: Two-edit candidates: (first edit, second edit), effects from ``gate_sim.EDITS``.
PAIRS = [("no-op", "no-op"), ("harmful", "harmful"), ("helpful", "harmful"), ("helpful", "no-op")]
ACCEPTED = ("accept", "accept_new_best")
#: The gate the simulation decides with: the paired rule at its defaults, on hard scores.
PAIRED = GateSettings(mode="on", metric="hard", mixed_weight=0.0, rule="paired")


@dataclass(frozen=True)
class Edit:
    """One drawn edit: per val task, whether it touches the task and (deterministic tasks) whether it flips it."""

    effect: float
    fraction: float
    touched: tuple[bool, ...]
    flips: tuple[bool, ...]

    def apply(self, index: int, deterministic: bool, probability: float) -> float:
        if self.effect == 0 or not self.touched[index]:
            return probability
        if deterministic:
            return (1.0 if self.effect > 0 else 0.0) if self.flips[index] else probability
        if self.effect > 0:
            return probability + self.fraction * (1 - probability)
        return probability - self.fraction * probability


def draw_edit(rng: random.Random, tasks: int, effect: float, world: World) -> Edit:
    """An edit whose expected effect on the val pass rate, alone, is ``effect`` (as ``gate_sim.apply_edit``)."""
    fraction = edit_fraction(effect, world)
    return Edit(effect, fraction, tuple(rng.random() < world.touched_share for _ in range(tasks)),
                tuple(rng.random() < fraction for _ in range(tasks)))


def probabilities(val: list[tuple[bool, float]], edits: list[Edit]) -> list[float]:
    out = []
    for index, (deterministic, probability) in enumerate(val):
        for edit in edits:
            probability = edit.apply(index, deterministic, probability)
        out.append(probability)
    return out


def _flat(side: list[list[ReplayResult]], keep: set[str] | None = None, only: bool = False) -> list[ReplayResult]:
    """Every sample of the tasks in ``keep`` (all tasks when None), the first sample of the others (none with
    ``only``)."""
    return [result for task in side
            for result in (task if keep is None or task[0].task_id in keep else [] if only else task[:1])]


class Perturbation:
    """The flip re-test (``--flips``): per val task its pass probability under perturbation before any edit, and
    for an edit set the probabilities after it (a task whose temperature-0 probability an edit changed draws afresh,
    as in ``gate_sim.simulate_night``). Draws from its own stream ``qrng``."""

    def __init__(self, qrng: random.Random, val: list[tuple[bool, float]], world: World):
        self.qrng, self.val, self.world = qrng, val, world
        self.before = [_perturbed_pass(qrng, deterministic, p, world) for deterministic, p in val]
        self._drawn: dict[tuple[int, float], float] = {}  # (task, temperature-0 probability) -> q, drawn once

    def after(self, edits: list[Edit]) -> list[float]:
        out = []
        for index, ((deterministic, p), p_after) in enumerate(zip(self.val, probabilities(self.val, edits))):
            if p_after == p:
                out.append(self.before[index])
            else:
                if (index, p_after) not in self._drawn:
                    self._drawn[(index, p_after)] = _perturbed_pass(self.qrng, deterministic, p_after, self.world)
                out.append(self._drawn[(index, p_after)])
        return out

    def retest(self, baseline: list[ReplayResult], candidate: list[ReplayResult],
               edits: list[Edit]) -> tuple[list[ReplayResult], list[ReplayResult]]:
        wanted = set(tasks_to_perturb(baseline, candidate, limit=DEFAULT_FLIP_MAX_TASKS))
        if not wanted:
            return [], []
        base = _replays(self.qrng, self.before, DEFAULT_FLIP_SAMPLES, "")
        cand = _replays(self.qrng, self.after(edits), DEFAULT_FLIP_SAMPLES, "")
        return _flat(base, wanted, only=True), _flat(cand, wanted, only=True)


def _decide(baseline: list[ReplayResult], candidate: list[ReplayResult], perturbation: Perturbation | None = None,
            edits: list[Edit] | None = None):
    perturbed = perturbation.retest(baseline, candidate, edits or []) if perturbation is not None else ([], [])
    return decide(PAIRED, baseline=baseline, candidate=candidate, best_gate_score=None,
                  perturbed_baseline=perturbed[0], perturbed_candidate=perturbed[1])


def run_trial(rng: random.Random, *, tasks: int, samples: int, pair: tuple[str, str], world: World,
              qrng: random.Random | None = None) -> dict:
    """One night: {accepted_without, accepted_with, repaired, accepted_harm}; ``accepted_harm``: the accepted
    candidate (with repair) still holds a harmful edit. ``qrng``: decide with the flip re-test (``--flips``)."""
    val = draw_val_set(rng, tasks, world)
    edits = [draw_edit(rng, tasks, EDITS[name], world) for name in pair]
    perturbation = Perturbation(qrng, val, world) if qrng is not None else None
    base_all = _replays(rng, [p for _, p in val], samples, "")
    cand_all = _replays(rng, probabilities(val, edits), samples, "")
    resample = set(tasks_to_resample(_flat(base_all, set()), _flat(cand_all, set()), metric="hard",
                                     mixed_weight=0.0, gate_samples=samples))
    baseline = _flat(base_all, resample)
    first = _decide(baseline, _flat(cand_all, resample), perturbation, edits)
    accepted_without = first.verdict in ACCEPTED
    outcome = {"accepted_without": accepted_without, "accepted_with": accepted_without, "repaired": False,
               "accepted_harm": accepted_without and "harmful" in pair}
    records = [EditRecord(target="memory", op="append", content=f"edit {index}") for index in range(len(edits))]
    if repair.wants_repair(first, applied=len(records)) is not None:
        return outcome
    task_records = [TaskRecord(id=f"t-{index:03d}", source="claude", request=f"task {index}", split="val")
                    for index in range(tasks)]
    by_content = {record.content: edit for record, edit in zip(records, edits)}

    def replay(chosen_tasks: list[TaskRecord], chosen: list[EditRecord], count: int) -> list[ReplayResult]:
        probs = probabilities(val, [by_content[record.content] for record in chosen])
        wanted = {task.id for task in chosen_tasks}
        return [result for task in _replays(rng, probs, count, "") for result in task if result.task_id in wanted]

    found = repair.blame(records, first, task_records, replay=replay, metric="hard", mixed_weight=0.0)
    if not found.blamed or len(found.blamed) == len(records):
        return outcome
    kept = [edit for index, edit in enumerate(edits) if index not in found.blamed]
    fresh = _replays(rng, probabilities(val, kept), samples, "")
    first_pass = _flat(fresh, set())
    wanted = set(tasks_to_resample(baseline, first_pass, metric="hard", mixed_weight=0.0, gate_samples=samples))
    candidate = replace_task_results(first_pass, [r for task in fresh for r in task if r.task_id in wanted])
    base_resampled = _replays(rng, [p for _, p in val], samples, "")
    baseline = replace_task_results(baseline, [r for task in base_resampled for r in task
                                               if r.task_id in wanted and r.task_id not in resample])
    accepted = _decide(baseline, candidate, perturbation, kept).verdict in ACCEPTED
    kept_names = [name for index, name in enumerate(pair) if index not in found.blamed]
    outcome.update(accepted_with=accepted, repaired=True, accepted_harm=accepted and "harmful" in kept_names)
    return outcome


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--tasks", type=int, nargs="+", default=[5, 10, 20])
    parser.add_argument("--samples", type=int, default=4, help="gate_samples (default: the config's 4)")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--flips", action="store_true", help="decide with the flip re-test (gate_sim.py --flips)")
    args = parser.parse_args(argv)
    world = World()
    started = time.perf_counter()
    print("| val tasks | candidate (two edits) | accepted, repair off | accepted, repair on | repaired | "
          "accepted holding a harmful edit, repair on |")
    print("|---:|---|---:|---:|---:|---:|")
    for tasks in args.tasks:
        for pair in PAIRS:
            rng = random.Random(f"{args.seed}/{tasks}/{'+'.join(pair)}")
            qrng = random.Random(f"{args.seed}/{tasks}/{'+'.join(pair)}/perturbed") if args.flips else None
            totals: dict[str, float] = {}
            for _ in range(args.trials):
                for name, value in run_trial(rng, tasks=tasks, samples=args.samples, pair=pair,
                                             world=world, qrng=qrng).items():
                    totals[name] = totals.get(name, 0.0) + float(value)
            rate = {name: value / args.trials for name, value in totals.items()}
            print(f"| {tasks} | {' + '.join(pair)} | {rate['accepted_without']:.1%} | {rate['accepted_with']:.1%} "
                  f"| {rate['repaired']:.1%} | {rate['accepted_harm']:.1%} |", flush=True)
    print(f"\n# repair_sim: {args.trials} trials per row, gate_samples {args.samples}, seed {args.seed}, "
          f"flip re-test {'on' if args.flips else 'off'}, "
          f"{time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
