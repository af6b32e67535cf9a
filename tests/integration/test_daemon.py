"""``skillopt-sleep daemon --every-seconds 1`` in a subprocess: runs nights, logs them, survives a failing night,
stops on SIGTERM with exit 0.

Nights are quick and need no model: ``SKILLOPT_SLEEP_BACKEND=mock`` and empty Claude/Codex homes make each night
end as ``no_sessions``. The failing night: the config file is invalid TOML (run-now exits 1); the test then fixes
the file, and the next night (a fresh subprocess reading the config afresh) completes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from skillopt_sleep.schedule.daemon import daemon_files
from skillopt_sleep.state import ProjectPaths

REPO = Path(__file__).resolve().parents[2]
#: ``python -m skillopt_sleep``, also before cli/app.py registers the schedule commands.
LAUNCH = ("from skillopt_sleep.cli.app import app\n"
          "from skillopt_sleep.cli.schedule_cmd import register\n"
          "if 'daemon' not in {c.name for c in app.registered_commands}:\n"
          "    register(app)\n"
          "app()\n")


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def read(path: Path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""


@pytest.mark.timeout(60)
def test_daemon_runs_nights_survives_a_failing_one_and_stops_on_sigterm(tmp_path, monkeypatch):
    project = tmp_path / "proj"
    for directory in (project, tmp_path / "claude", tmp_path / "codex"):
        directory.mkdir()
    config = tmp_path / "config.toml"
    config.write_text("this is [not toml\n")
    monkeypatch.setenv("SKILLOPT_SLEEP_BACKEND", "mock")
    monkeypatch.setenv("SKILLOPT_SLEEP_CLAUDE_HOME", str(tmp_path / "claude"))
    monkeypatch.setenv("SKILLOPT_SLEEP_CODEX_HOME", str(tmp_path / "codex"))
    monkeypatch.setenv("SKILLOPT_SLEEP_CONFIG", str(config))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    files = daemon_files(project.resolve())
    stderr_file = tmp_path / "daemon.stderr"
    with stderr_file.open("w") as stderr:
        daemon = subprocess.Popen([sys.executable, "-c", LAUNCH, "daemon", "--every-seconds", "1",
                                   "--project", str(project)], stdout=subprocess.DEVNULL, stderr=stderr,
                                  cwd=tmp_path)
    try:
        failed = wait_for(lambda: [l for l in read(files.log).splitlines() if "status=error exit=1" in l], 20,
                          "a failing night in the log")
        assert "invalid TOML" in failed[0]
        assert read(files.pid).strip() == str(daemon.pid)
        assert daemon.poll() is None, "the daemon died with the night"
        config.write_text("# fixed\n")
        done = wait_for(lambda: [l for l in read(files.log).splitlines() if "status=no_sessions exit=0" in l], 20,
                        "a completed night in the log")
        night_dir = Path(done[0].split("night_dir=")[1].split()[0])
        assert night_dir.parent == ProjectPaths(project.resolve()).nights
        assert (night_dir / "diagnostics.json").is_file()
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=15) == 0
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
    log = read(files.log)
    assert "daemon started" in log and "received SIGTERM" in log and log.rstrip().endswith(f"stopped pid={daemon.pid}")
    assert log.splitlines()[0].split(" INFO ")[1].startswith("daemon started")
    assert read(stderr_file).count("status=no_sessions") == log.count("status=no_sessions")  # both sinks
    assert not files.pid.exists() and not files.info.exists()
