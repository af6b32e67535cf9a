"""``progress.py``: counts, stages and the estimate of the time left with a fake clock; the meter's observer; a
night (mock backend) told to a recording ``Progress``. ``cli/progress_view.py``: the status line's fields and the
rich display rendered to a string."""

from __future__ import annotations

import io

from transcripts import PNPM_CONVERSATIONS, write_claude_sessions

from skillopt_sleep.backends.base import CallMeter, ChatMessage, ChatRequest
from skillopt_sleep.backends.mock import MockBackend
from skillopt_sleep.cli.progress_view import RichProgress, format_count, format_seconds, status_parts
from skillopt_sleep.config import SleepConfig
from skillopt_sleep.night import run_night
from skillopt_sleep.progress import NullProgress, Progress, ProgressState, watch_meter


class FakeClock:
    def __init__(self, now: float = 100.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


class Recorder(NullProgress):
    """A ``Progress`` that keeps the stages, calls and tokens it was told (the rest: ``NullProgress``'s no-ops)."""

    def __init__(self) -> None:
        self.stages: list[str] = []
        self.calls_seen: list[tuple[int, int | None]] = []
        self.tokens_used = 0
        self.closed = False

    def stage(self, name: str) -> None:
        self.stages.append(name)

    def calls(self, done: int, planned: int | None = None) -> None:
        self.calls_seen.append((done, planned))

    def tokens(self, used: int) -> None:
        self.tokens_used = max(self.tokens_used, used)

    def close(self) -> None:
        self.closed = True


def test_null_progress_and_the_recorder_are_progress_objects():
    assert isinstance(NullProgress(), Progress) and isinstance(Recorder(), Progress)
    with NullProgress() as progress:
        progress.stage("harvest")
        progress.calls(1, 3)


def test_formats():
    assert format_seconds(7) == "0:07" and format_seconds(723) == "12:03" and format_seconds(3723) == "1:02:03"
    assert format_count(950) == "950" and format_count(3400) == "3.4k" and format_count(45_000) == "45k"
    assert format_count(1_200_000) == "1.2M"


def test_stages_report_their_seconds_and_calls():
    clock = FakeClock()
    state = ProgressState(clock)
    assert state.begin_stage("harvest") is None
    clock.now += 2.0
    assert state.begin_stage("rollout") == ("harvest", 2.0, 0)
    state.set_calls(5, planned=12)
    clock.now += 3.0
    assert state.end_stage() == ("rollout", 3.0, 5)
    assert status_parts(state)[0] == "done"


def test_the_estimate_follows_the_calls_from_the_moment_they_are_planned():
    clock = FakeClock()
    state = ProgressState(clock)
    state.begin_stage("harvest")
    clock.now += 60.0  # a minute of harvesting does not count as the calls' pace
    assert state.remaining() is None  # nothing planned yet
    state.set_calls(0, planned=20)
    assert state.remaining() is None  # no call done yet: nothing to go on
    clock.now += 10.0
    state.set_calls(5)
    assert state.remaining() == 30.0  # 2 s a call, 15 to go
    assert status_parts(state) == ["harvest", "LLM calls 5/~20", "1:10 elapsed", "~0:30 left"]
    state.set_calls(4)  # a late report from a worker thread never goes backwards
    assert state.calls_done == 5
    state.set_calls(25)  # past the plan: the plan was low, the job is re-planned (25 + 10 %), never "25/~20"
    assert state.calls_planned == 28 and "LLM calls 25/~28" in status_parts(state)


def test_tokens_and_a_new_plan_keep_the_pace_origin():
    clock = FakeClock()
    state = ProgressState(clock)
    state.set_calls(0, planned=10)
    clock.now += 4.0
    state.set_calls(2, planned=8)  # re-planned after the LLM miner: the pace is still measured from the start
    state.tokens_used = 3400
    assert state.remaining() == 12.0
    assert "3.4k tokens" in status_parts(state)


def test_calls_past_the_plan_re_plan_and_never_read_above_it():
    clock = FakeClock()
    state = ProgressState(clock)
    state.begin_stage("rollout")
    state.set_calls(0, planned=9)
    for done in range(1, 21):  # the live line once read "20/~9"
        clock.now += 1.0
        state.set_calls(done)
        assert state.calls_done < state.calls_planned, status_parts(state)
    assert state.calls_planned == 21  # last re-planned at 19 done: 19 + 10 % (rounded up) still to come
    state.set_calls(20, planned=5)  # a late plan below what is done is re-planned the same way: 20 + 2
    assert state.calls_planned == 22
    assert state.remaining() == 2.0  # 1 s a call, 2 to go
    state.end_stage()  # the job ended: what was done is the plan
    assert state.calls_planned == 20 and state.remaining() == 0.0


def test_the_time_left_never_rises_without_a_re_plan_and_is_never_negative():
    clock = FakeClock()
    state = ProgressState(clock)
    state.set_calls(0, planned=100)
    clock.now += 10.0
    state.set_calls(10)
    assert state.remaining() == 90.0  # 1 s a call, 90 to go
    clock.now += 40.0  # a slow stretch: 11 calls in 50 s would read 4.5 s a call, 89 to go = 400 s
    state.set_calls(11)
    assert state.remaining() == 90.0  # held at the lowest estimate of this plan, not pushed back up
    clock.now += 1.0
    state.set_calls(60)  # fast again: 51 s for 60 calls, 40 to go = 34 s
    assert state.remaining() == 34.0
    state.set_calls(60, planned=200)  # a re-plan may raise it: 140 to go
    assert state.remaining() == 119.0
    seen = []
    for done in range(61, 200):
        clock.now += 0.5
        state.set_calls(done)
        seen.append(state.remaining())
    assert all(later <= earlier for earlier, later in zip(seen, seen[1:]))
    assert all(left is not None and left >= 0.0 for left in seen)


def test_steps_measure_the_time_left_of_a_resumed_training_run():
    clock = FakeClock()
    state = ProgressState(clock)
    state.set_steps(2, 6)  # resumed after step 2
    state.begin_stage("rollout")
    assert status_parts(state)[0] == "step 3/6 rollout"
    clock.now += 30.0
    state.set_steps(3, 6)
    assert state.remaining() == 90.0
    state.set_calls(40)  # calls without a plan do not take over from the steps
    assert state.remaining() == 90.0
    state.set_steps(6, 6)
    assert state.remaining() == 0.0 and status_parts(state)[0] == "step 6/6 rollout"


def test_a_download_reports_bytes_speed_and_the_time_left():
    clock = FakeClock()
    state = ProgressState(clock)
    state.set_transfer(0, 1_000_000_000)
    clock.now += 10.0
    state.set_transfer(250_000_000, 1_000_000_000)
    assert state.speed() == 25_000_000.0
    assert state.remaining() == 30.0
    parts = status_parts(state)
    assert "250.0 MB/1.00 GB" in parts and "25.0 MB/s" in parts and "~0:30 left" in parts


def test_the_ledger_tells_every_call_and_its_tokens():
    progress = Recorder()
    meter = CallMeter(MockBackend())
    watch_meter(meter, progress, planned=3)
    assert progress.calls_seen == [(0, 3)]
    request = ChatRequest(role="target", messages=[ChatMessage(role="user", content="install the dependencies")])
    for _ in range(2):
        meter.chat(request)
    assert progress.calls_seen[-1] == (2, None)
    assert progress.tokens_used == meter.tokens > 0


def test_the_rich_display_prints_ended_stages_and_a_last_line():
    from rich.console import Console

    clock = FakeClock()
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=120, color_system=None)
    with RichProgress(console, clock=clock, refresh_per_second=1) as progress:
        progress.stage("harvest")
        clock.now += 1.5
        progress.stage("rollout")
        progress.calls(0, 4)
        progress.calls(4)
        progress.tokens(1200)
        clock.now += 2.5
        progress.note("a line to keep")
    text = buffer.getvalue()
    assert "✓ harvest (1.5 s)" in text
    assert "✓ rollout (2.5 s, 4 LLM calls)" in text
    assert "a line to keep" in text
    assert "4 LLM calls, 1.2k tokens, 0:04 in all" in text


def test_a_night_tells_its_stages_calls_and_tokens(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    write_claude_sessions(tmp_path / "claude", project, PNPM_CONVERSATIONS)
    config = SleepConfig(backend="mock", source="claude", scope="project", claude_home=tmp_path / "claude",
                         lookback_hours=0)
    progress = Recorder()
    result = run_night(config, project=project, state_root=tmp_path / "state", progress=progress)
    diagnostics = result.diagnostics
    assert diagnostics.status in ("accepted", "rejected")
    stages = progress.stages
    assert stages[:3] == ["harvest", "mine", "memory"]
    for stage in ("rollout", "reflect", "aggregate", "select", "update", "gate"):
        assert stage in stages
    calls = sum(cost.calls for cost in diagnostics.cost.values())
    assert progress.calls_seen[-1][0] == calls > 0
    planned = [p for _, p in progress.calls_seen if p is not None]
    assert planned and planned[-1] > 0
    assert calls / 4 <= planned[-1] <= calls * 4  # a rough estimate, not a wild one
    assert progress.tokens_used == sum(c.prompt_tokens + c.completion_tokens for c in diagnostics.cost.values())
    assert not progress.closed  # the caller owns the display


def test_a_night_without_progress_still_runs(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    config = SleepConfig(backend="mock", source="claude", scope="project", claude_home=tmp_path / "none",
                         lookback_hours=0)
    result = run_night(config, project=project, state_root=tmp_path / "state")
    assert result.diagnostics.status == "no_sessions"
