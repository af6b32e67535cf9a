"""The edit budget (SkillOpt's "textual learning rate"): how many edits a night may apply.

Schedules, for night n = ``state.night`` (0 for the first night), max = ``max_budget``, min = ``min_budget``,
H = ``horizon`` and t = min(n, H) / H:

- ``constant``: max every night.
- ``linear``: max - (max - min) * t, so max on night 0 and min from night H on.
- ``cosine``: min + (max - min) * (1 + cos(pi * t)) / 2, the same ends with a slow start and finish.
- ``autonomous``: max on the first night; then last night's budget (``state.current``) minus 1 after a
  rejected night, plus 1 after an accepted night.

Values are rounded half up and always kept in [min, max]; a min above max is read as max.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict

SCHEDULES = ("constant", "linear", "cosine", "autonomous")


class EditBudgetState(BaseModel):
    """Scheduler state the orchestrator keeps across nights.

    night: nights completed so far; current: the budget used on the last night (None before the first);
    accepted_streak / rejected_streak: consecutive accepted / rejected nights up to the last one.
    """

    model_config = ConfigDict(extra="forbid")
    night: int = 0
    current: int | None = None
    accepted_streak: int = 0
    rejected_streak: int = 0


def _round_half_up(value: float) -> int:
    return math.floor(value + 0.5)


def next_edit_budget(schedule: str, *, max_budget: int, min_budget: int, horizon: int,
                     state: EditBudgetState) -> int:
    """Return tonight's edit budget: an int in [min_budget, max_budget].

    horizon: nights over which ``linear`` and ``cosine`` decay (values below 1 count as 1).
    Raises ValueError for an unknown schedule or a max_budget below 1.
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown edit budget schedule {schedule!r}; supported: {', '.join(SCHEDULES)}")
    if max_budget < 1:
        raise ValueError(f"edit budget must be at least 1, got {max_budget}")
    low = max(1, min(min_budget, max_budget))
    span = max_budget - low
    progress = min(max(state.night, 0), max(horizon, 1)) / max(horizon, 1)
    if schedule == "constant":
        value = float(max_budget)
    elif schedule == "linear":
        value = max_budget - span * progress
    elif schedule == "cosine":
        value = low + span * (1.0 + math.cos(math.pi * progress)) / 2.0
    elif state.current is None:
        value = float(max_budget)
    elif state.rejected_streak > 0:
        value = float(state.current - 1)
    elif state.accepted_streak > 0:
        value = float(state.current + 1)
    else:
        value = float(state.current)
    return min(max_budget, max(low, _round_half_up(value)))


def update_edit_budget_state(state: EditBudgetState, *, budget_used: int, accepted: bool) -> EditBudgetState:
    """Return the state after a night that ran with edit budget ``budget_used`` (the budget in force, not
    the number of edits applied) and whose candidate was ``accepted`` or not. The input is not changed."""
    return EditBudgetState(
        night=state.night + 1,
        current=budget_used,
        accepted_streak=state.accepted_streak + 1 if accepted else 0,
        rejected_streak=0 if accepted else state.rejected_streak + 1,
    )
