"""The error hierarchy: exit codes on the classes (one table, the README says the same), the fix written where an
error is raised (adopt's refusals, the budget, the backend that failed) and carried to the user."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from skillopt_sleep import errors
from skillopt_sleep.backends.base import CallMeter, ChatMessage, ChatRequest, ChatResult
from skillopt_sleep.backends.claude_cli import ClaudeCLIBackend
from skillopt_sleep.backends.mock import MockBackend
from skillopt_sleep.errors import (
    AdoptError,
    BackendError,
    BudgetExhausted,
    ConfigError,
    LockedError,
    ModelPullError,
    NothingToAdopt,
    ProposalTampered,
    ScheduleError,
    SleepError,
    TargetRefused,
)
from skillopt_sleep.models import Usage
from skillopt_sleep.night import EXIT_CODES, FALLBACK_BACKEND_FIX
from skillopt_sleep.paths import ProjectPaths
from skillopt_sleep.review.adopt import adopt_night, revert_adoption

REPO = Path(__file__).resolve().parents[2]


def test_every_error_is_a_sleep_error_with_its_exit_code_on_the_class():
    codes = (SleepError.exit_code, BackendError.exit_code, BudgetExhausted.exit_code, LockedError.exit_code)
    assert codes == (1, 2, 3, 4)
    for cls in (ConfigError, ScheduleError, ModelPullError, AdoptError, NothingToAdopt, TargetRefused,
                ProposalTampered):
        assert issubclass(cls, SleepError) and cls.exit_code == 1
    assert EXIT_CODES == {"backend_error": 2, "budget_exhausted": 3}


def test_the_old_homes_of_schedule_and_model_pull_errors_still_import_the_same_classes():
    from skillopt_sleep.model_store import ModelPullError as from_model_store
    from skillopt_sleep.schedule import ScheduleError as from_schedule

    assert from_schedule is ScheduleError and from_model_store is ModelPullError


def test_the_exit_code_table_and_the_readme_agree_with_the_classes():
    table = dict(re.findall(r"^(\d+) +(\S.*)$", errors.__doc__, re.MULTILINE))
    assert {int(code) for code in table} == {0, 1, 2, 3, 4, errors.INTERNAL_ERROR_EXIT_CODE}
    for cls in (SleepError, BackendError, BudgetExhausted, LockedError):
        assert cls.__name__ in table[str(cls.exit_code)]
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    paragraph = readme[readme.index("Exit codes of `run-now`"):].split("\n\n", 1)[0]
    said = {int(code) for code in re.findall(r"\b(\d+) (?:a|an|backend|budget|another)\b", paragraph)}
    assert said == {int(code) for code in table}


def test_the_message_comes_first_and_the_fix_after_it():
    error = SleepError("night n1 is already adopted", fix="'skillopt-sleep revert n1' undoes it")
    assert error.message == "night n1 is already adopted"
    assert str(error) == "night n1 is already adopted; 'skillopt-sleep revert n1' undoes it"
    assert str(SleepError("no fix")) == "no fix" and SleepError("no fix").fix is None
    config = ConfigError("must be 'on' or 'off'", source="config.toml", key="gate_mode", fix="set it to 'on'")
    assert str(config) == "config.toml: key 'gate_mode': must be 'on' or 'off'; set it to 'on'"


def test_an_exhausted_budget_says_which_key_to_raise():
    error = BudgetExhausted("max_calls_per_night=5 reached", limit="max_calls_per_night")
    assert error.message == "max_calls_per_night=5 reached"
    assert "skillopt-sleep config set max_calls_per_night N" in error.fix


# --------------------------------------------------------------------------- the fix comes from the backend


class FailingBackend(MockBackend):
    """Every call fails with ``error`` and the backend's ``fix``; ``tokens`` > 0: the reply used tokens."""

    def __init__(self, kind: str, fix: str | None, tokens: int = 0):
        super().__init__()
        self.kind, self.fix, self.tokens = kind, fix, tokens

    def chat(self, request):
        return ChatResult(error="it failed", error_kind=self.kind, fix=self.fix, model="m",
                          usage=Usage(prompt_tokens=self.tokens))


def request() -> ChatRequest:
    return ChatRequest(role="target", messages=[ChatMessage(role="user", content="hi")])


def test_a_fatal_error_carries_the_fix_the_backend_wrote():
    with pytest.raises(BackendError) as raised:
        CallMeter(FailingBackend("fatal", "run `claude` and log in")).chat(request())
    assert raised.value.fix == "run `claude` and log in" and raised.value.message == "it failed"
    assert raised.value.exit_code == 2


def test_a_dead_backend_carries_the_fix_of_its_last_failure():
    meter = CallMeter(FailingBackend("transient", "check that the server is reachable"), max_consecutive_failures=2)
    meter.chat(request(), fail_on_error=False)  # one failure: returned to the caller
    with pytest.raises(BackendError) as alive:  # but not one call got a reply
        meter.check_alive()
    assert alive.value.kind == "repeated_failures" and alive.value.fix == "check that the server is reachable"
    with pytest.raises(BackendError) as raised:  # the second in a row
        meter.chat(request(), fail_on_error=False)
    assert raised.value.kind == "repeated_failures" and raised.value.fix == "check that the server is reachable"


def test_a_backend_without_a_fix_leaves_it_to_the_generic_one():
    with pytest.raises(BackendError) as raised:
        CallMeter(FailingBackend("fatal", None)).chat(request())
    assert raised.value.fix is None and str(raised.value) == "it failed"
    assert "reachable" in FALLBACK_BACKEND_FIX


def test_a_missing_agent_cli_names_its_setting_in_the_fix(tmp_path):
    result = ClaudeCLIBackend(binary=str(tmp_path / "nowhere" / "claude")).chat(request())
    assert result.error_kind == "fatal" and "claude_bin" in result.fix and "absolute path" in result.fix


# --------------------------------------------------------------------------- adopt's refusals


def test_adopt_refusals_are_told_apart_by_class(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    paths = ProjectPaths(project, tmp_path / "state")
    with pytest.raises(NothingToAdopt, match="nothing to adopt") as nothing:
        adopt_night(project, paths=paths)
    assert nothing.value.fix and "history" in nothing.value.fix
    with pytest.raises(NothingToAdopt, match="no night 'n9'"):
        adopt_night(project, paths=paths, night_id="n9")
    with pytest.raises(NothingToAdopt, match="nothing to revert"):
        revert_adoption(project, paths=paths)
    night = paths.nights / "n1" / "proposed"
    night.mkdir(parents=True)
    (night / "manifest.json").write_text('{"format": "skillopt-sleep-proposal/1", "documents": [{"target": '
                                         '"CLAUDE.md", "file": "CLAUDE.md"}]}', encoding="utf-8")
    with pytest.raises(TargetRefused, match="not an absolute path"):
        adopt_night(project, paths=paths, night_id="n1")
    (night / "manifest.json").write_text('{"format": "skillopt-sleep-proposal/9", "documents": [{}]}',
                                         encoding="utf-8")
    with pytest.raises(ProposalTampered, match="unknown format"):
        adopt_night(project, paths=paths, night_id="n1")
