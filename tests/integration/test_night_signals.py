"""A night stopped by SIGTERM or SIGINT records ``status: interrupted`` with the stage it was in, leaves the user's
files and the harvest checkpoint alone, restores the signal handlers it found, and exits 143 / 130; ``status`` and
``report`` show it. A signal during the night's last writes waits for them (``interrupts.night_signals``).

In process, a progress display sends the signal to the test process when a stage begins; end to end, a small driver
prints each stage of a real ``python -m skillopt_sleep run-now`` (mock backend) and pauses at ``rollout``, where the
test sends SIGTERM.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from transcripts import PNPM_CONVERSATIONS, write_claude_sessions

import skillopt_sleep.night as night_module
from skillopt_sleep.config import SleepConfig
from skillopt_sleep.errors import Interrupted
from skillopt_sleep.night import run_night
from skillopt_sleep.progress import NullProgress
from skillopt_sleep.review.adopt import load_adoptions
from skillopt_sleep.state import ProjectPaths, load_state

REPO = Path(__file__).resolve().parents[2]
ORIGINAL = "# Notes\n\nHand-written.\n"

DRIVER = r'''
import sys, time
import skillopt_sleep.progress as progress

def stage(self, name):
    sys.stderr.write(f"STAGE {name}\n")
    sys.stderr.flush()
    if name == "rollout":
        time.sleep(60)

progress.NullProgress.stage = stage
from skillopt_sleep.cli.app import main
sys.argv = ["skillopt-sleep", *sys.argv[1:]]
main()
'''


class SignalAt(NullProgress):
    """Sends ``signum`` to this process when stage ``at`` begins."""

    def __init__(self, at: str, signum: int) -> None:
        self.at, self.signum = at, signum

    def stage(self, name: str) -> None:
        if name == self.at:
            os.kill(os.getpid(), self.signum)


@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "CLAUDE.md").write_text(ORIGINAL, encoding="utf-8")
    write_claude_sessions(tmp_path / "claude", root, PNPM_CONVERSATIONS)
    return root


def config(tmp_path: Path) -> SleepConfig:
    return SleepConfig(backend="mock", source="claude", scope="project", claude_home=tmp_path / "claude",
                       lookback_hours=0)


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_mid_night_records_interrupted_with_its_stage_and_restores_the_handlers(project, tmp_path, signum,
                                                                                       code):
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    paths = ProjectPaths(project, tmp_path / "state")
    with pytest.raises(Interrupted) as stopped:
        run_night(config(tmp_path), project=project, state_root=tmp_path / "state", apply=True,
                  progress=SignalAt("rollout", signum))
    assert stopped.value.exit_code == code and stopped.value.stage == "rollout"
    assert {s: signal.getsignal(s) for s in before} == before

    [night_dir] = paths.nights.iterdir()
    diagnostics = json.loads((night_dir / "diagnostics.json").read_text())
    assert diagnostics["status"] == "interrupted"
    assert diagnostics["failure"]["stage"] == "rollout"
    assert diagnostics["failure"]["signal"] == signal.Signals(signum).name
    state = load_state(paths)
    assert (state.last_status, state.last_night_id, state.nights_completed) == ("interrupted", night_dir.name, 0)
    assert (project / "CLAUDE.md").read_text() == ORIGINAL and sorted(p.name for p in project.iterdir()) == [
        "CLAUDE.md"]
    assert not (night_dir / "proposed").exists() and not paths.checkpoints.exists()
    after = run_night(config(tmp_path), project=project, state_root=tmp_path / "state")  # lock released, state ok
    assert after.diagnostics.status in ("accepted", "rejected") and load_state(paths).nights_completed == 1


def test_a_signal_during_the_last_writes_waits_for_them(project, tmp_path, monkeypatch):
    real = night_module.file_changes

    def file_changes(*args, **kwargs):  # runs in stage(), after the adoption wrote CLAUDE.md
        os.kill(os.getpid(), signal.SIGTERM)
        return real(*args, **kwargs)

    monkeypatch.setattr(night_module, "file_changes", file_changes)
    paths = ProjectPaths(project, tmp_path / "state")
    with pytest.raises(Interrupted) as stopped:
        run_night(config(tmp_path), project=project, state_root=tmp_path / "state", apply=True)
    assert stopped.value.stage is None and "after the night finished" in str(stopped.value)
    state = load_state(paths)
    assert state.last_status == "accepted" and state.nights_completed == 1
    [adoption] = load_adoptions(paths)
    assert adoption.status == "adopted" and "pnpm" in (project / "CLAUDE.md").read_text()
    assert paths.checkpoints.exists()


def test_sigterm_to_a_real_run_now_exits_143_and_status_and_report_show_it(project, tmp_path):
    env = {**os.environ, "HOME": str(tmp_path / "home"), "SKILLOPT_SLEEP_HOME": str(tmp_path / "skillopt"),
           "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER, encoding="utf-8")
    process = subprocess.Popen([sys.executable, str(driver), "run-now", "--backend", "mock", "--apply",
                                "--lookback-hours", "0", "--project", str(project), "--claude-home",
                                str(tmp_path / "claude"), "--source", "claude"],
                               cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        seen = []
        while (line := process.stderr.readline()) and line.strip() != "STAGE rollout":
            seen.append(line)
        assert line.strip() == "STAGE rollout", "".join(seen)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 143
        rest = process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
        process.stdout.close()
        process.stderr.close()
    assert "interrupted:" in rest and "SIGTERM during rollout" in rest
    assert (project / "CLAUDE.md").read_text() == ORIGINAL

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "skillopt_sleep", *args, "--project", str(project)], env=env,
                              cwd=tmp_path, capture_output=True, text=True, timeout=120)

    status = cli("status")
    assert status.returncode == 0, status.stderr
    [last] = [line for line in status.stdout.splitlines() if line.startswith("last night:")]
    assert " interrupted during rollout " in last, status.stdout
    report = cli("report")
    assert report.returncode == 0, report.stderr
    assert "INTERRUPTED" in report.stdout and "stopped by SIGTERM during rollout" in report.stdout
