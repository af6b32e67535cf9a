"""Replay: bounded concurrency, deterministic order, a cache that never keeps failures, errors that stop."""

from __future__ import annotations

import stat
import threading
import time

import pytest

from skillopt_sleep import paths
from skillopt_sleep.backends.base import Budget, CallMeter, ChatRequest, ChatResult
from skillopt_sleep.backends.mock import MockBackend
from skillopt_sleep.engine.replay import ReplayCache, Replayer, doc_hash, replay_tasks, system_prompt
from skillopt_sleep.errors import BackendError, BudgetExhausted
from skillopt_sleep.models import Check, Judge, TaskRecord

PNPM_CHECKS = [Check(op="contains", value="pnpm"), Check(op="not_contains", value="npm install")]


def make_task(task_id: str, request: str, checks: list[Check] | None = None) -> TaskRecord:
    return TaskRecord(id=task_id, source="claude", request=request, judge=Judge(checks=checks or PNPM_CHECKS))


def test_system_prompt_gives_skill_and_memory_and_marks_empty_documents():
    prompt = system_prompt("- Run the linter first", "")
    assert "- Run the linter first" in prompt
    assert "(none)" in prompt


def test_system_prompt_template_can_be_overridden_in_the_config_dir():
    override = paths.config_dir() / "prompts" / "target_system.md"
    override.parent.mkdir(parents=True)
    override.write_text("CUSTOM {skill} | {memory} {unknown}", encoding="utf-8")
    assert system_prompt("S", "M") == "CUSTOM S | M {unknown}"


def test_doc_hash_is_stable_and_distinguishes_documents():
    assert doc_hash("a") == doc_hash("a")
    assert doc_hash("a") != doc_hash("b")


def test_replay_scores_a_task_that_passes_only_with_the_users_rule_in_memory():
    meter = CallMeter(MockBackend())
    task = make_task("t-1", "npm install the new dependency")
    [without] = replay_tasks([task], Replayer(meter), skill="", memory="")
    [with_rule] = replay_tasks([task], Replayer(meter), skill="", memory="Use pnpm, not npm")
    assert without.hard == 0 and without.fail_reason
    assert with_rule.hard == 1 and with_rule.soft == 1.0 and with_rule.fail_reason is None
    assert with_rule.usage.prompt_tokens > 0 and with_rule.usage.completion_tokens > 0
    assert with_rule.error is None and not with_rule.cached


def test_a_cache_hit_makes_no_second_call():
    backend = MockBackend()
    meter = CallMeter(backend)
    cache = ReplayCache()
    tasks = [make_task("t-1", "npm install"), make_task("t-2", "add lodash with npm install")]
    first = replay_tasks(tasks, Replayer(meter, cache=cache), skill="", memory="Use pnpm")
    assert backend.calls == 2
    second = replay_tasks(tasks, Replayer(meter, cache=cache), skill="", memory="Use pnpm")
    assert backend.calls == 2
    assert [r.cached for r in second] == [True, True]
    assert [r.response for r in second] == [r.response for r in first]
    replay_tasks(tasks, Replayer(meter, cache=cache), skill="", memory="Use pnpm, not npm")
    assert backend.calls == 4  # another memory is another key


def test_a_failed_result_is_not_cached_and_is_retried_next_time():
    backend = MockBackend(fail_with="503 service unavailable", fail_kind="transient")
    meter = CallMeter(backend)
    cache = ReplayCache()
    [failed] = replay_tasks([make_task("t-1", "npm install")], Replayer(meter, cache=cache), skill="", memory="")
    assert failed.error and "503" in failed.error
    assert failed.hard == 0 and failed.response == ""
    assert len(cache) == 0
    backend.fail_with = None
    [retried] = replay_tasks([make_task("t-1", "npm install")], Replayer(meter, cache=cache), skill="", memory="")
    assert backend.calls == 2
    assert retried.error is None and not retried.cached and retried.response


def test_an_empty_reply_is_an_error_and_is_not_cached():
    backend = MockBackend(scripted={"target": [""]})
    cache = ReplayCache()
    [result] = replay_tasks([make_task("t-1", "npm install")], Replayer(CallMeter(backend), cache=cache), skill="",
                            memory="")
    assert result.error == "empty response from the target model"
    assert len(cache) == 0


def test_cache_persists_to_a_private_jsonl_file_and_skips_malformed_lines(tmp_path):
    path = tmp_path / "state" / "replay_cache.jsonl"
    backend = MockBackend()
    cache = ReplayCache(path)
    replay_tasks([make_task("t-1", "npm install")], Replayer(CallMeter(backend), cache=cache), skill="", memory="")
    cache.save()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    with path.open("a", encoding="utf-8") as handle:
        handle.write("{not json\n")
    reloaded = ReplayCache(path)
    assert len(reloaded) == 1 and reloaded.skipped_lines == 1
    [again] = replay_tasks([make_task("t-1", "npm install")], Replayer(CallMeter(backend), cache=reloaded), skill="",
                           memory="")
    assert again.cached and backend.calls == 1


class SlowFirstBackend(MockBackend):
    """Early tasks answer slowest, so completion order is the reverse of task order."""

    def __init__(self):
        super().__init__()
        self.in_flight = 0
        self.most_in_flight = 0
        self._gauge = threading.Lock()

    def chat(self, request: ChatRequest) -> ChatResult:
        with self._gauge:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        number = int(request.messages[-1].content.split()[-1])
        time.sleep(0.004 * (10 - number))
        try:
            return super().chat(request)
        finally:
            with self._gauge:
                self.in_flight -= 1


def test_concurrent_replay_returns_results_in_task_then_sample_order():
    tasks = [make_task(f"t-{n}", f"npm install package {n}") for n in range(8)]
    backend = SlowFirstBackend()
    results = replay_tasks(tasks, Replayer(CallMeter(backend), workers=3), skill="", memory="", samples=2,
                           temperature=0.5)
    assert [(r.task_id, r.sample) for r in results] == [(t.id, s) for t in tasks for s in range(2)]
    assert 1 < backend.most_in_flight <= 3
    serial = replay_tasks(tasks, Replayer(CallMeter(MockBackend()), workers=1), skill="", memory="", samples=2,
                          temperature=0.5)
    assert [r.response for r in serial] == [r.response for r in results]


def test_samples_use_the_given_temperature_and_distinct_seeds():
    backend = MockBackend()
    replay_tasks([make_task("t-1", "npm install")], Replayer(CallMeter(backend), seed=10), skill="", memory="",
                 samples=3, temperature=0.7, max_tokens=123)
    assert sorted(request.seed for request in backend.requests) == [10, 11, 12]
    assert {request.temperature for request in backend.requests} == {0.7}
    assert {request.max_tokens for request in backend.requests} == {123}
    assert {request.role for request in backend.requests} == {"target"}


def test_a_fatal_backend_error_stops_the_replay():
    backend = MockBackend(fail_with="401 unauthorized: check the API key", fail_kind="fatal")
    cache = ReplayCache()
    with pytest.raises(BackendError, match="401"):
        replay_tasks([make_task(f"t-{n}", "npm install") for n in range(6)],
                     Replayer(CallMeter(backend), workers=2, cache=cache), skill="", memory="")
    assert len(cache) == 0


def test_an_exhausted_budget_stops_the_replay():
    meter = CallMeter(MockBackend(), Budget(max_calls=2))
    with pytest.raises(BudgetExhausted):
        replay_tasks([make_task(f"t-{n}", "npm install") for n in range(5)], Replayer(meter, workers=1), skill="",
                     memory="")
    assert meter.calls == 2


class ToolRunningBackend(MockBackend):
    runs_tools = True

    def chat(self, request: ChatRequest) -> ChatResult:
        result = super().chat(request)
        return result.model_copy(update={"tools_called": ["Bash"]})


def test_tool_evidence_comes_from_the_backend_and_is_none_when_it_cannot_run_tools():
    task = make_task("t-1", "run the tests", checks=[Check(op="tool_called", value="Bash")])
    [with_tools] = replay_tasks([task], Replayer(CallMeter(ToolRunningBackend())), skill="", memory="")
    assert with_tools.hard == 1 and with_tools.tools_called == ["Bash"]
    [without_tools] = replay_tasks([task], Replayer(CallMeter(MockBackend())), skill="", memory="")
    # the mock cannot run tools: the check is unverifiable, never a silent pass
    assert without_tools.hard == 0 and without_tools.fail_reason == "no verifiable judge"
    assert without_tools.tools_called == []
