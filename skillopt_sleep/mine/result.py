"""What mining produced (``MineResult``): the tasks, and the counts that explain them (``diagnostics.json``'s
``mining``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from skillopt_sleep.models import TaskRecord


class MineResult(BaseModel):
    """What mining produced.

    tasks: kept tasks (at most ``max_tasks``), ordered by first_seen then id; rejected_checks: number of checks
    dropped at mining time (their reasons are in each task's ``rejected_checks``); merged_duplicates: requests
    merged into an earlier near-duplicate; dropped: reason -> count (``empty``, ``acknowledgement``,
    ``control_command``, ``folded_followup``, ``over_max_tasks``); miner_calls: LLM miner calls made;
    miner_errors: task id -> why the miner's reply was not used; miner_outcomes: task id -> the miner's
    verdict on the original attempt (success|partial|failure|unknown).
    """

    model_config = ConfigDict(extra="forbid")
    tasks: list[TaskRecord] = Field(default_factory=list)
    rejected_checks: int = 0
    merged_duplicates: int = 0
    dropped: dict[str, int] = Field(default_factory=dict)
    miner_calls: int = 0
    miner_errors: dict[str, str] = Field(default_factory=dict)
    miner_outcomes: dict[str, str] = Field(default_factory=dict)
    not_replayable: dict[str, int] = Field(default_factory=dict)
    reader_calls: int = 0
    """Calls of the LLM rule reader (``rule_reader``)."""
    reader_rules: int = 0
    """Rule statements it added (sentences typed in another language whose English states an instruction)."""
    reader_errors: list[str] = Field(default_factory=list)
