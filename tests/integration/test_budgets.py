"""Per-night budgets hold across all roles, and a night that hits one stops cleanly.

Each case runs ``run_night`` with the mock backend (fast, deterministic, token usage = characters / 4) on a
temporary project whose eight Claude Code sessions each hold the correction "no, we use pnpm in this repo,
never npm". Without a budget that night is accepted; with one it must stop with status ``budget_exhausted``
(exit code 3), say which limit, report what was spent by role, stage nothing, leave the project's files and
state untouched even with ``apply=True``, and leave the harvest checkpoint where it was (the next night reads
the same sessions again). A night that cannot afford one reflect -> gate round makes no call at all.

``workers=1`` so that calls happen one after another and "stopped at the limit" is exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from transcripts import PNPM_CONVERSATIONS, UNEXPLAINED_CONVERSATIONS

import skillopt_sleep.night as night_module
from skillopt_sleep.backends.base import CallMeter
from skillopt_sleep.config import SleepConfig
from skillopt_sleep.night import EXIT_CODES, run_night
from skillopt_sleep.state import ProjectPaths, load_state

ORIGINAL_MEMORY = "# Web app\n\nHand-written notes: deploy on Fridays only after review.\n"


@dataclass
class Setup:
    project: Path
    claude_home: Path
    state_root: Path

    def config(self, **budget) -> SleepConfig:
        return SleepConfig(backend="mock", source="claude", scope="project", claude_home=self.claude_home,
                           lookback_hours=0, workers=1, **budget)

    def run(self, config: SleepConfig, *, apply: bool = True):
        return run_night(config, project=self.project, state_root=self.state_root, apply=apply)

    @property
    def paths(self) -> ProjectPaths:
        return ProjectPaths(self.project, self.state_root)


@pytest.fixture
def setup(tmp_path, write_sessions) -> Setup:
    project = tmp_path / "project"
    project.mkdir()
    (project / "CLAUDE.md").write_text(ORIGINAL_MEMORY, encoding="utf-8")
    claude_home = tmp_path / "claude"
    write_sessions(claude_home, project, PNPM_CONVERSATIONS)
    return Setup(project, claude_home, tmp_path / "state")


@pytest.fixture
def mixed_setup(tmp_path, write_sessions) -> Setup:
    """The pnpm sessions and three corrected without a reason (the tasks the LLM miner is asked about)."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "CLAUDE.md").write_text(ORIGINAL_MEMORY, encoding="utf-8")
    claude_home = tmp_path / "claude"
    write_sessions(claude_home, project, PNPM_CONVERSATIONS + UNEXPLAINED_CONVERSATIONS)
    return Setup(project, claude_home, tmp_path / "state")


@pytest.fixture
def ledgers(monkeypatch) -> list[CallMeter]:
    """Every CallMeter a night creates (to read its call records)."""
    made: list[CallMeter] = []

    def make(backend, budget=None, **options):
        meter = CallMeter(backend, budget, **options)
        made.append(meter)
        return meter

    monkeypatch.setattr(night_module, "CallMeter", make)
    return made


def unbounded_night(tmp_path: Path, setup: Setup):
    """The same night with no budget at all, in its own state dir: what a full night costs."""
    config = setup.config(max_calls_per_night=0, max_tokens_per_night=0, max_minutes_per_night=0)
    result = run_night(config, project=setup.project, state_root=tmp_path / "unbounded-state", apply=False)
    assert result.diagnostics.status == "accepted", result.diagnostics.summary
    return result.diagnostics


def minimal_round_calls(diagnostics, rollouts_k: int = 1) -> int:
    """Calls of one reflect -> gate round with the mock (no LLM miner, one minibatch): K samples per train task,
    one reflect call, baseline and candidate replays of every val task the gate can use (hard evidence)."""
    return diagnostics.tasks["train"] * rollouts_k + 1 + 2 * diagnostics.tasks["val_gated"]


def assert_stopped_cleanly(setup: Setup, result, limit: str) -> None:
    diagnostics = result.diagnostics
    assert diagnostics.status == "budget_exhausted"
    assert result.exit_code == EXIT_CODES["budget_exhausted"] == 3
    assert diagnostics.failure["limit"] == limit
    assert limit in diagnostics.summary and "FAILED: budget exhausted" in diagnostics.summary
    assert limit in diagnostics.failure["fix"]
    # nothing half-applied: no proposal, the project untouched although apply=True, no document state moved
    assert not (result.night_dir / "proposed").exists()
    assert diagnostics.proposed == [] and diagnostics.applied == []
    assert (setup.project / "CLAUDE.md").read_text(encoding="utf-8") == ORIGINAL_MEMORY
    assert sorted(p.name for p in setup.project.iterdir()) == ["CLAUDE.md"]
    state = load_state(setup.paths)
    assert state.best_documents == {} and state.current_documents == {} and state.nights_completed == 0
    assert not diagnostics.gate or diagnostics.gate.verdict not in ("accept", "accept_new_best")


def assert_cost_matches_the_ledger(diagnostics, meter: CallMeter) -> None:
    by_role: dict[str, tuple[int, int]] = {}
    for record in meter.records:
        calls, tokens = by_role.get(record.role, (0, 0))
        by_role[record.role] = (calls + 1, tokens + record.usage.total)
    assert {role: (cost.calls, cost.prompt_tokens + cost.completion_tokens)
            for role, cost in diagnostics.cost.items()} == by_role


def assert_the_next_night_reads_the_same_sessions(setup: Setup, stopped_diagnostics) -> None:
    again = setup.run(setup.config(max_calls_per_night=0, max_tokens_per_night=0), apply=False)
    harvested = stopped_diagnostics.harvest.sessions_harvested
    assert harvested == len(PNPM_CONVERSATIONS)
    assert again.diagnostics.harvest.sessions_harvested == harvested
    assert again.diagnostics.status == "accepted"


def test_a_night_that_cannot_afford_one_round_skips_before_making_any_call(setup, tmp_path, ledgers):
    full = unbounded_night(tmp_path, setup)
    needed = minimal_round_calls(full)
    result = setup.run(setup.config(max_calls_per_night=needed - 1))
    assert_stopped_cleanly(setup, result, "max_calls_per_night")
    assert ledgers[-1].calls == 0
    assert sum(cost.calls for cost in result.diagnostics.cost.values()) == 0
    assert "skipped before spending" in result.diagnostics.failure["reason"]
    assert f"{needed} calls" in result.diagnostics.failure["reason"]
    assert_the_next_night_reads_the_same_sessions(setup, result.diagnostics)


def test_the_preflight_counts_every_rollout_sample(setup, tmp_path, ledgers):
    full = unbounded_night(tmp_path, setup)
    # enough for a round with one sample per train task, not with three
    budget = minimal_round_calls(full, rollouts_k=3) - 1
    assert budget >= minimal_round_calls(full, rollouts_k=1)
    result = setup.run(setup.config(max_calls_per_night=budget, rollouts_k=3))
    assert result.diagnostics.status == "budget_exhausted"
    assert ledgers[-1].calls == 0


def test_max_calls_stops_the_night_at_exactly_that_many_calls_across_roles(setup, tmp_path, ledgers):
    full = unbounded_night(tmp_path, setup)
    budget = minimal_round_calls(full)  # affordable, but the full night (resamples, test split) needs more
    assert sum(cost.calls for cost in full.cost.values()) > budget
    result = setup.run(setup.config(max_calls_per_night=budget))
    assert_stopped_cleanly(setup, result, "max_calls_per_night")
    meter = ledgers[-1]
    assert meter.calls == budget
    assert result.diagnostics.cost["optimizer"].calls == 1  # the reflect call was paid for before the gate
    assert result.diagnostics.cost["target"].calls == budget - 1
    assert_cost_matches_the_ledger(result.diagnostics, meter)
    assert_the_next_night_reads_the_same_sessions(setup, result.diagnostics)


def test_max_tokens_stops_the_night_at_the_first_call_past_the_limit(setup, tmp_path, ledgers):
    full = unbounded_night(tmp_path, setup)
    total = sum(cost.prompt_tokens + cost.completion_tokens for cost in full.cost.values())
    limit = total // 2
    result = setup.run(setup.config(max_tokens_per_night=limit))
    assert_stopped_cleanly(setup, result, "max_tokens_per_night")
    meter = ledgers[-1]
    spent = [record.usage.total for record in meter.records]
    assert sum(spent[:-1]) < limit <= sum(spent)  # every call started under the limit; the last one reached it
    assert_cost_matches_the_ledger(result.diagnostics, meter)
    assert_the_next_night_reads_the_same_sessions(setup, result.diagnostics)


def test_max_usd_is_enforced_when_a_price_is_set(setup, tmp_path, ledgers):
    full = unbounded_night(tmp_path, setup)
    total = sum(cost.prompt_tokens + cost.completion_tokens for cost in full.cost.values())
    price = 2.0  # USD per 1000 tokens
    max_usd = round(total / 2 / 1000 * price, 4)
    result = setup.run(setup.config(max_usd_per_night=max_usd, usd_per_1k_tokens=price))
    assert_stopped_cleanly(setup, result, "max_usd_per_night")
    meter = ledgers[-1]
    spent_usd = [record.usage.total / 1000 * price for record in meter.records]
    assert sum(spent_usd[:-1]) < max_usd <= sum(spent_usd)
    assert_cost_matches_the_ledger(result.diagnostics, meter)


def test_max_usd_without_a_price_limits_nothing(setup, tmp_path):
    result = setup.run(setup.config(max_usd_per_night=0.0001), apply=False)
    assert result.diagnostics.status == "accepted"


class SimulatedClock:
    """A monotonic clock (seconds) that only moves when a call is made."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def __call__(self) -> float:
        return self.seconds


class MinutePerCallBackend:
    """Wraps a backend: every call takes one simulated minute."""

    def __init__(self, inner, clock: SimulatedClock):
        self.inner, self.clock = inner, clock
        self.name = inner.name

    def model_for(self, role):
        return self.inner.model_for(role)

    def chat(self, request):
        self.clock.seconds += 60.0
        return self.inner.chat(request)


def test_max_minutes_stops_the_night_once_that_much_wall_clock_time_was_spent(setup, tmp_path, monkeypatch):
    clock = SimulatedClock()
    made: list[CallMeter] = []

    def make(backend, budget=None, **options):
        made.append(CallMeter(MinutePerCallBackend(backend, clock), budget, clock=clock, **options))
        return made[-1]

    monkeypatch.setattr(night_module, "CallMeter", make)
    result = setup.run(setup.config(max_minutes_per_night=5))
    assert_stopped_cleanly(setup, result, "max_minutes_per_night")
    assert made[-1].calls == 5  # five one-minute calls; the sixth is refused before it starts
    assert sum(cost.calls for cost in result.diagnostics.cost.values()) == 5


def test_budgets_count_every_role_together(mixed_setup, tmp_path, ledgers):
    # The LLM miner (role "miner") is on here: its calls count against the same max_calls_per_night as the
    # target's and the optimizer's, and the preflight reserves one miner call per task it will ask about (the
    # three corrected without a reason; the pnpm tasks have validated checks of their own).
    full = unbounded_night(tmp_path, mixed_setup)
    asked = 3
    budget = minimal_round_calls(full) + asked
    result = mixed_setup.run(mixed_setup.config(max_calls_per_night=budget, llm_mine=True))
    assert result.diagnostics.status == "budget_exhausted"
    cost = result.diagnostics.cost
    assert cost["miner"].calls == asked == 3
    assert sum(role.calls for role in cost.values()) == budget
    assert_cost_matches_the_ledger(result.diagnostics, ledgers[-1])


def test_a_miner_heavy_night_that_cannot_afford_the_round_skips_before_mining(mixed_setup, tmp_path, ledgers):
    full = unbounded_night(tmp_path, mixed_setup)
    budget = minimal_round_calls(full) + 3 - 1
    result = mixed_setup.run(mixed_setup.config(max_calls_per_night=budget, llm_mine=True))
    assert result.diagnostics.status == "budget_exhausted"
    assert ledgers[-1].calls == 0
