"""The edit budget scheduler (textual learning rate)."""

from __future__ import annotations

import pytest

from skillopt_sleep.engine.edit_budget import EditBudgetState, next_edit_budget, update_edit_budget_state


def budget_at(schedule: str, night: int, *, max_budget=5, min_budget=1, horizon=4) -> int:
    return next_edit_budget(schedule, max_budget=max_budget, min_budget=min_budget, horizon=horizon,
                            state=EditBudgetState(night=night))


@pytest.mark.parametrize(("schedule", "nights", "budgets"), [
    ("constant", (0, 3, 100), [5, 5, 5]),
    # 5 - 4 * n / 4 for n = 0..4, then held at the min
    ("linear", range(7), [5, 4, 3, 2, 1, 1, 1]),
    # 1 + 4 * (1 + cos(pi * n / 4)) / 2 = 5, 4.41, 3, 1.59, 1 -> rounded half up
    ("cosine", range(6), [5, 4, 3, 2, 1, 1]),
], ids=["constant-always-gives-the-max", "linear-decays-from-max-to-min-over-the-horizon",
        "cosine-decays-slowly-at-both-ends"])
def test_a_fixed_schedule_gives_each_nights_budget(schedule, nights, budgets):
    assert [budget_at(schedule, night) for night in nights] == budgets


def test_cosine_stays_above_linear_in_the_first_half():
    horizon = 10
    for night in range(1, 5):
        assert budget_at("cosine", night, max_budget=10, horizon=horizon) >= budget_at(
            "linear", night, max_budget=10, horizon=horizon)


def test_autonomous_starts_at_max_shrinks_after_rejections_and_grows_after_acceptance():
    state = EditBudgetState()
    seen = []
    for accepted in (False, False, False, False, False, True, True, True, True):
        budget = next_edit_budget("autonomous", max_budget=3, min_budget=1, horizon=30, state=state)
        seen.append(budget)
        state = update_edit_budget_state(state, budget_used=budget, accepted=accepted)
    seen.append(next_edit_budget("autonomous", max_budget=3, min_budget=1, horizon=30, state=state))
    assert seen == [3, 2, 1, 1, 1, 1, 2, 3, 3, 3]


def test_update_counts_nights_and_streaks_without_mutating_the_input():
    state = EditBudgetState(night=2, current=3, accepted_streak=2)
    after = update_edit_budget_state(state, budget_used=3, accepted=False)
    assert (after.night, after.current, after.accepted_streak, after.rejected_streak) == (3, 3, 0, 1)
    assert state.night == 2 and state.accepted_streak == 2
    assert EditBudgetState.model_validate(after.model_dump()) == after


@pytest.mark.parametrize("schedule", ["constant", "linear", "cosine", "autonomous"])
def test_budget_is_always_an_int_within_min_and_max(schedule):
    for night in range(0, 40, 3):
        state = EditBudgetState(night=night, current=night % 9, rejected_streak=night % 2,
                                accepted_streak=1 - night % 2)
        value = next_edit_budget(schedule, max_budget=6, min_budget=2, horizon=7, state=state)
        assert isinstance(value, int) and 2 <= value <= 6


def test_a_min_above_the_max_is_read_as_the_max():
    assert budget_at("linear", 10, max_budget=2, min_budget=5) == 2


def test_unknown_schedule_is_refused():
    with pytest.raises(ValueError, match="unknown edit budget schedule"):
        budget_at("exponential", 0)
