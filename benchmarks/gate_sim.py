"""Monte Carlo acceptance rates of the gate rules (``strict`` vs ``paired``) on simulated val tasks.

Every trial draws a val set, an edit, and replay outcomes, builds real ``ReplayResult`` objects and calls the
real ``skillopt_sleep.engine.gate.decide`` (and ``tasks_to_resample`` for the paired protocol). Nothing of the
gate is re-implemented here. Definitions (also in ``docs/benchmarks.md``, "Gate simulation"):

* val set of N tasks: ``round(0.7 N)`` deterministic tasks (pass probability 1 with probability
  ``base_pass_rate`` = 0.5, else 0) and the rest flaky (pass probability uniform in [0.3, 0.7]).
* edit with effect d (pass-rate points: no-op 0, harmful -0.06, helpful +0.10): each task is touched with
  probability 0.5; on a touched task the edit moves the pass probability p by a fraction k of the room left,
  helpful p + k(1 - p), harmful p - k p, where k = |d| / (0.5 * E[room]) so the expected change of the val
  pass rate is exactly d. A deterministic task stays deterministic: it flips with probability k.
* replays: hard = 1 with the task's pass probability (baseline: before the edit, candidate: after), soft = hard,
  deterministic judges, gate metric ``hard``.
* ``strict`` with S samples: every val task replayed S times per side (``replay_tasks(samples=S)``).
  ``paired`` with S samples: one sample per side, then ``tasks_to_resample(..., gate_samples=S)`` tasks get
  S samples per side (the step's protocol). The two rules see the same random draws.
* flips (``--flips``): every task also has a pass probability under perturbation q (the flip re-test's samples at
  ``gate_flip_temperature``): a deterministic task that passes at temperature 0 has q uniform in [0.7, 1.0], one
  that fails q uniform in [0.0, 0.3], a flaky task q = p. An edit that really changes a deterministic task draws its
  q afresh from the other range; an untouched task keeps its q. Scenario "+ flip": after the edit, one protected
  task (deterministic, passing before and after the edit) fails at temperature 0, with its q unchanged: a flip.
  ``paired +flip`` runs the real ``tasks_to_perturb`` (at most ``gate.DEFAULT_FLIP_MAX_TASKS``) and replays those
  tasks ``flip_samples`` times per side with q, then ``decide`` with the perturbed samples. These draws come from
  their own random stream, so the tables without ``--flips`` are unchanged.

Usage::

    python benchmarks/gate_sim.py --trials 2000                 # the table of docs/benchmarks.md
    python benchmarks/gate_sim.py --trials 2000 --sweep         # + margin/alpha grid of the paired rule
    python benchmarks/gate_sim.py --trials 200 --json out.json  # quick run, raw numbers as JSON
    python benchmarks/gate_sim.py --trials 2000 --samples 4 --flips   # + the flip re-test (tables 4 and 5)
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from skillopt_sleep.engine.gate import (  # noqa: E402
    DEFAULT_ALPHA,
    DEFAULT_FLIP_ALPHA,
    DEFAULT_FLIP_MAX_TASKS,
    DEFAULT_FLIP_SAMPLES,
    DEFAULT_MARGIN,
    GateSettings,
    decide,
    tasks_to_perturb,
    tasks_to_resample,
)
from skillopt_sleep.models import ReplayResult  # noqa: E402

EDITS = {"no-op": 0.0, "harmful": -0.06, "helpful": 0.10}
ACCEPTED = ("accept", "accept_new_best")


@dataclass(frozen=True)
class World:
    """The simulated val-task population (shares and probabilities in [0, 1])."""

    deterministic_share: float = 0.7
    base_pass_rate: float = 0.5
    flaky_low: float = 0.3
    flaky_high: float = 0.7
    touched_share: float = 0.5
    perturbed_pass_low: float = 0.7
    """A deterministic task passing at temperature 0 passes under perturbation with q in [this, 1]; a failing one
    with q in [0, 1 - this]."""

    def expected_pass_rate(self) -> float:
        flaky_mean = (self.flaky_low + self.flaky_high) / 2
        return self.deterministic_share * self.base_pass_rate + (1 - self.deterministic_share) * flaky_mean


@dataclass(frozen=True)
class GateSetting:
    """One gate configuration to measure: rule, and for ``paired`` its margin and alpha."""

    rule: str
    margin: int = DEFAULT_MARGIN
    alpha: float = DEFAULT_ALPHA
    flip_samples: int = 0
    flip_alpha: float = DEFAULT_FLIP_ALPHA

    @property
    def label(self) -> str:
        if self.rule == "strict":
            return self.rule
        flips = f" +flip({self.flip_samples}, a={self.flip_alpha:g})" if self.flip_samples else ""
        return f"paired m={self.margin} a={self.alpha:g}{flips}"


def draw_val_set(rng: random.Random, tasks: int, world: World) -> list[tuple[bool, float]]:
    """Return ``(deterministic, pass probability)`` per val task."""
    deterministic = round(world.deterministic_share * tasks)
    val = []
    for index in range(tasks):
        if index < deterministic:
            val.append((True, 1.0 if rng.random() < world.base_pass_rate else 0.0))
        else:
            val.append((False, rng.uniform(world.flaky_low, world.flaky_high)))
    return val


def edit_fraction(effect: float, world: World) -> float:
    """k: the share of the room left that an edit of expected effect ``effect`` moves a touched task by (see the
    module docstring). Raises ValueError when k > 1 (the effect is too large for this world)."""
    if effect == 0:
        return 0.0
    mean_pass = world.expected_pass_rate()
    room = (1 - mean_pass) if effect > 0 else mean_pass
    fraction = abs(effect) / (world.touched_share * room)
    if fraction > 1:
        raise ValueError(f"effect {effect} is too large for this world (k = {fraction:.2f} > 1)")
    return fraction


def apply_edit(rng: random.Random, val: list[tuple[bool, float]], effect: float, world: World) -> list[float]:
    """Pass probabilities after an edit whose expected effect on the val pass rate is ``effect``."""
    if effect == 0:
        return [probability for _, probability in val]
    fraction = edit_fraction(effect, world)
    after = []
    for deterministic, probability in val:
        if rng.random() >= world.touched_share:
            after.append(probability)
        elif deterministic:
            flips = rng.random() < fraction
            after.append((1.0 if effect > 0 else 0.0) if flips else probability)
        elif effect > 0:
            after.append(probability + fraction * (1 - probability))
        else:
            after.append(probability - fraction * probability)
    return after


def _replays(rng: random.Random, probabilities: list[float], samples: int, prefix: str) -> list[list[ReplayResult]]:
    """``samples`` scored replays per task: hard = 1 with the task's pass probability, soft = hard."""
    out = []
    for index, probability in enumerate(probabilities):
        task_results = []
        for sample in range(samples):
            hard = 1 if rng.random() < probability else 0
            task_results.append(ReplayResult(task_id=f"{prefix}t-{index:03d}", sample=sample, hard=hard,
                                             soft=float(hard)))
        out.append(task_results)
    return out


def _perturbed_pass(qrng: random.Random, deterministic: bool, probability: float, world: World) -> float:
    if not deterministic:
        return probability
    low = world.perturbed_pass_low
    return qrng.uniform(low, 1.0) if probability == 1.0 else qrng.uniform(0.0, 1.0 - low)


@dataclass
class Night:
    """One night's val replays: every sample (``strict``) and the paired protocol's subset; with flips modelled,
    each task's pass probability under perturbation before and after the edit."""

    full_base: list[ReplayResult]
    full_cand: list[ReplayResult]
    paired_base: list[ReplayResult]
    paired_cand: list[ReplayResult]
    perturbed_before: list[float] | None = None
    perturbed_after: list[float] | None = None
    prefix: str = ""
    _perturbed: dict[int, tuple[list[ReplayResult], list[ReplayResult]]] = field(default_factory=dict)

    def perturbed(self, qrng: random.Random, setting: GateSetting) -> tuple[list[ReplayResult], list[ReplayResult]]:
        """The flip re-test of ``setting``: ``tasks_to_perturb`` tasks replayed ``flip_samples`` times per side
        (drawn once per night and sample count: settings that differ in ``flip_alpha`` judge the same samples)."""
        if not setting.flip_samples or self.perturbed_before is None or self.perturbed_after is None:
            return [], []
        if setting.flip_samples not in self._perturbed:
            wanted = set(tasks_to_perturb(self.paired_base, self.paired_cand, limit=DEFAULT_FLIP_MAX_TASKS))
            base = _replays(qrng, self.perturbed_before, setting.flip_samples, self.prefix) if wanted else []
            cand = _replays(qrng, self.perturbed_after, setting.flip_samples, self.prefix) if wanted else []
            self._perturbed[setting.flip_samples] = ([r for task in base for r in task if r.task_id in wanted],
                                                     [r for task in cand for r in task if r.task_id in wanted])
        return self._perturbed[setting.flip_samples]


def simulate_night(rng: random.Random, *, tasks: int, samples: int, effect: float, world: World,
                   prefix: str = "", qrng: random.Random | None = None, flip: bool = False) -> Night:
    """Draw a fresh val set and an edit realization, replay both sides, apply the paired resampling. With
    ``qrng`` (flips modelled, module docstring) also the pass probabilities under perturbation, and with ``flip``
    one protected task flipped at temperature 0; ``rng`` sees the same draws either way."""
    val = draw_val_set(rng, tasks, world)
    before = [probability for _, probability in val]
    after = apply_edit(rng, val, effect, world)
    q_before = q_after = None
    if qrng is not None:
        q_before = [_perturbed_pass(qrng, deterministic, p, world) for deterministic, p in val]
        q_after = [q if p_after == p else _perturbed_pass(qrng, deterministic, p_after, world)
                   for (deterministic, p), p_after, q in zip(val, after, q_before)]
        protected = [index for index, ((deterministic, p), p_after) in enumerate(zip(val, after))
                     if deterministic and p == 1.0 and p_after == 1.0]
        if flip and protected:
            after = list(after)
            after[qrng.choice(protected)] = 0.0  # fails at temperature 0; q_after unchanged
    base_all = _replays(rng, before, samples, prefix)
    cand_all = _replays(rng, after, samples, prefix)
    resample = set(tasks_to_resample([task[0] for task in base_all], [task[0] for task in cand_all],
                                     metric="hard", mixed_weight=0.0, gate_samples=samples))

    def paired(side: list[list[ReplayResult]]) -> list[ReplayResult]:
        return [result for task in side for result in (task if task[0].task_id in resample else task[:1])]

    return Night(full_base=[result for task in base_all for result in task],
                 full_cand=[result for task in cand_all for result in task],
                 paired_base=paired(base_all), paired_cand=paired(cand_all), perturbed_before=q_before,
                 perturbed_after=q_after, prefix=prefix)


def _decide(setting: GateSetting, baseline: list[ReplayResult], candidate: list[ReplayResult],
            perturbed: tuple[list[ReplayResult], list[ReplayResult]] = ([], [])):
    gate = GateSettings(mode="on", metric="hard", mixed_weight=0.0, rule=setting.rule, margin=setting.margin,
                        alpha=setting.alpha, flip_alpha=setting.flip_alpha)
    return decide(gate, baseline=baseline, candidate=candidate, best_gate_score=None,
                  perturbed_baseline=perturbed[0], perturbed_candidate=perturbed[1])


def run_trial(rng: random.Random, *, tasks: int, samples: int, effect: float, world: World,
              settings: list[GateSetting], qrng: random.Random | None = None,
              flip: bool = False) -> dict[str, dict[str, float]]:
    """One trial: {setting label: {accepted, pending, calls, two_night_pooled, two_night_fresh}}.

    ``two_night_*`` (paired only): accepted tonight, or pending tonight and accepted on the next night's
    fresh val set, judged on the fresh tasks alone (``fresh``) or on both nights' results together
    (``pooled``; the baseline documents are assumed unchanged in between). With ``qrng``: flips modelled
    (module docstring); ``flip``: one protected task flips tonight (and on the next night).
    """
    tonight = simulate_night(rng, tasks=tasks, samples=samples, effect=effect, world=world, qrng=qrng, flip=flip)
    tomorrow: Night | None = None
    outcome = {}
    for setting in settings:
        perturbed = tonight.perturbed(qrng, setting) if qrng is not None else ([], [])
        if setting.rule == "strict":
            decision = _decide(setting, tonight.full_base, tonight.full_cand)
            calls = len(tonight.full_base) + len(tonight.full_cand)
        else:
            decision = _decide(setting, tonight.paired_base, tonight.paired_cand, perturbed)
            calls = len(tonight.paired_base) + len(tonight.paired_cand) + len(perturbed[0]) + len(perturbed[1])
        accepted = decision.verdict in ACCEPTED
        pending = bool(decision.details.get("pending"))
        pooled = fresh = accepted
        if pending:
            if tomorrow is None:  # a flip setting draws from its own stream: ``rng`` stays as without --flips
                source = qrng if qrng is not None and setting.flip_samples else rng
                tomorrow = simulate_night(source, tasks=tasks, samples=samples, effect=effect, world=world,
                                          prefix="n2-", qrng=qrng, flip=flip)
            later = tomorrow.perturbed(qrng, setting) if qrng is not None else ([], [])
            fresh = _decide(setting, tomorrow.paired_base, tomorrow.paired_cand, later).verdict in ACCEPTED
            pooled = _decide(setting, tonight.paired_base + tomorrow.paired_base,
                             tonight.paired_cand + tomorrow.paired_cand,
                             (perturbed[0] + later[0], perturbed[1] + later[1])).verdict in ACCEPTED
        outcome[setting.label] = {"accepted": accepted, "pending": pending, "calls": calls,
                                  "two_night_fresh": fresh, "two_night_pooled": pooled}
    return outcome


def simulate(*, trials: int, task_counts: list[int], sample_counts: list[int], settings: list[GateSetting],
             world: World, seed: int, flips: bool = False) -> list[dict]:
    """Rates (accepted, pending, two_night_fresh, two_night_pooled) and mean val calls per
    (tasks, samples, edit, setting). ``flips``: model the flip re-test (module docstring) and add the scenarios
    "<edit> + flip", whose ``rng`` is seeded like "<edit>"'s (the same val sets and edits until a pending
    candidate's next night draws differently)."""
    scenarios = [(edit, edit, False) for edit in EDITS]
    if flips:
        scenarios += [(f"{edit} + flip", edit, True) for edit in EDITS]
    rows = []
    for tasks in task_counts:
        for samples in sample_counts:
            for scenario, edit, flip in scenarios:
                effect = EDITS[edit]
                rng = random.Random(f"{seed}/{tasks}/{samples}/{edit}")
                qrng = random.Random(f"{seed}/{tasks}/{samples}/{scenario}/perturbed") if flips else None
                totals: dict[str, dict[str, float]] = {}
                for _ in range(trials):
                    for label, measured in run_trial(rng, tasks=tasks, samples=samples, effect=effect,
                                                     world=world, settings=settings, qrng=qrng,
                                                     flip=flip).items():
                        cell = totals.setdefault(label, {})
                        for name, value in measured.items():
                            cell[name] = cell.get(name, 0.0) + float(value)
                for label, cell in totals.items():
                    rows.append({"tasks": tasks, "samples": samples, "edit": scenario, "setting": label,
                                 **{name: value / trials for name, value in cell.items()}})
    return rows


def _table(rows: list[dict], columns: list[tuple[str, str]], calls: bool = True) -> str:
    """Markdown table: one row per (tasks, samples); per (setting label, rate name) the rate for each edit."""
    index = {(r["tasks"], r["samples"], r["edit"], r["setting"]): r for r in rows}
    keys = sorted({(r["tasks"], r["samples"]) for r in rows})
    header = ["val tasks", "samples"]
    for label, rate in columns:
        name = label if rate == "accepted" else f"{label}, {rate.replace('_', ' ')}"
        header += [f"{name}: {edit}" for edit in EDITS] + ([f"{name}: calls"] if calls else [])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for tasks, samples in keys:
        cells = [str(tasks), str(samples)]
        for label, rate in columns:
            cells += [f"{index[(tasks, samples, edit, label)][rate]:.1%}" for edit in EDITS]
            if calls:
                cells.append(f"{index[(tasks, samples, 'no-op', label)]['calls']:.1f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _flip_table(rows: list[dict], labels: list[str]) -> str:
    """Markdown table: one row per (tasks, samples, scenario); per setting label its acceptance rate, two-night
    (pooled) rate and mean val calls."""
    index = {(r["tasks"], r["samples"], r["edit"], r["setting"]): r for r in rows}
    keys = sorted({(r["tasks"], r["samples"]) for r in rows})
    scenarios = list(dict.fromkeys(r["edit"] for r in rows))
    header = ["val tasks", "samples", "candidate"]
    for label in labels:
        header += [f"{label}: accepted", f"{label}: two nights", f"{label}: calls"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for tasks, samples in keys:
        for scenario in scenarios:
            cells = [str(tasks), str(samples), scenario]
            for label in labels:
                row = index[(tasks, samples, scenario, label)]
                cells += [f"{row['accepted']:.1%}", f"{row['two_night_pooled']:.1%}", f"{row['calls']:.1f}"]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2000, help="trials per cell (default 2000)")
    parser.add_argument("--tasks", type=int, nargs="+", default=[5, 10, 20], help="val task counts")
    parser.add_argument("--samples", type=int, nargs="+", default=[1, 3, 4], help="gate_samples values")
    parser.add_argument("--margin", type=int, default=DEFAULT_MARGIN, help="paired gate margin")
    parser.add_argument("--alpha", type=float, default=DEFAULT_ALPHA, help="paired gate alpha")
    parser.add_argument("--sweep", action="store_true",
                        help="also measure paired with margin 1..2 x alpha 0.125/0.25/0.5")
    parser.add_argument("--flips", action="store_true",
                        help="model flips and measure the flip re-test (paired + gate_flip_samples, flip alpha "
                             "0.25 and 0.5; scenarios '<edit> + flip')")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path, help="write the raw rows here")
    args = parser.parse_args(argv)

    settings = [GateSetting("strict"), GateSetting("paired", args.margin, args.alpha)]
    if args.sweep:
        for margin in (1, 2):
            for alpha in (0.125, 0.25, 0.5):
                if (margin, alpha) != (args.margin, args.alpha):
                    settings.append(GateSetting("paired", margin, alpha))
    flip_settings = []
    if args.flips:
        flip_settings = [GateSetting("paired", args.margin, args.alpha, DEFAULT_FLIP_SAMPLES, flip_alpha)
                         for flip_alpha in dict.fromkeys((DEFAULT_FLIP_ALPHA, 0.5))]
    world = World()
    started = time.perf_counter()
    rows = simulate(trials=args.trials, task_counts=args.tasks, sample_counts=args.samples,
                    settings=settings + flip_settings, world=world, seed=args.seed, flips=args.flips)
    elapsed = time.perf_counter() - started
    print(f"# gate_sim: {args.trials} trials per cell, seed {args.seed}, {elapsed:.1f} s; acceptance rates "
          f"(no-op / harmful {EDITS['harmful']:+.0%} / helpful {EDITS['helpful']:+.0%}); calls = mean val "
          f"replays per trial, both sides")
    strict, paired = settings[0].label, settings[1].label
    print(_table(rows, [(strict, "accepted"), (paired, "accepted")]))
    print()
    print(_table(rows, [(paired, "pending"), (paired, "two_night_fresh"), (paired, "two_night_pooled")],
                 calls=False))
    if args.flips:
        print()
        print(_flip_table(rows, [paired, *(setting.label for setting in flip_settings)]))
    if args.sweep:
        print()
        print(_table(rows, [(setting.label, "accepted") for setting in settings[1:]], calls=False))
        print()
        print(_table(rows, [(setting.label, "two_night_pooled") for setting in settings[1:]], calls=False))
    if args.json:
        args.json.write_text(json.dumps({"trials": args.trials, "seed": args.seed, "world": vars(world),
                                         "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
