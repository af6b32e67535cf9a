"""One night at a time per project: a second night exits with a clear message; a crashed holder's lock is recovered."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from filelock import FileLock

from skillopt_sleep.state import ProjectPaths

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


def run_now(project: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "SKILLOPT_SLEEP_BACKEND": "mock"}
    return subprocess.run(
        [sys.executable, "-m", "skillopt_sleep", "run-now", "--project", str(project), "--scope", "all",
         "--claude-home", str(EXAMPLES / "claude-home"), "--codex-home", str(EXAMPLES / "codex-home"),
         "--lookback-hours", "0"],
        capture_output=True, text=True, env=env, timeout=240)


def test_a_second_night_for_the_same_project_exits_with_a_clear_message(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    paths = ProjectPaths(project.resolve())
    paths.root.mkdir(parents=True)
    with FileLock(str(paths.lock)):  # a night (cron, daemon or by hand) is running
        second = run_now(project)
    assert second.returncode == 4
    assert "another night is running" in second.stderr
    assert not paths.nights.exists()  # it did nothing: no night directory, no state written
    assert not paths.state_file.exists()


def test_a_lock_left_by_a_killed_night_does_not_block_the_next_one(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    paths = ProjectPaths(project.resolve())
    paths.root.mkdir(parents=True)
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from filelock import FileLock; FileLock(sys.argv[1]).acquire(); "
         "print('locked', flush=True); time.sleep(600)", str(paths.lock)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        os.kill(holder.pid, signal.SIGKILL)  # crashes while holding the lock; the lock file stays behind
        holder.wait(timeout=10)
    finally:
        if holder.poll() is None:
            holder.kill()
    assert paths.lock.exists()
    done = run_now(project)
    assert done.returncode == 0, done.stderr
    assert paths.state_file.exists()
