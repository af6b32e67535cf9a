"""The daemon's job (NightRunner): one log line per night whatever the night does; one daemon per project.

The full daemon (scheduler, signals) runs in tests/integration/test_daemon.py.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time

import pytest
from filelock import FileLock

from skillopt_sleep.errors import ScheduleError
from skillopt_sleep.schedule.daemon import NightRunner, daemon_files, run_daemon, running_daemon


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


@pytest.fixture
def logger(caplog):
    caplog.set_level(logging.INFO, logger="skillopt_sleep.daemon.test")
    return logging.getLogger("skillopt_sleep.daemon.test")


def test_a_completed_night_logs_its_status_and_night_dir(tmp_path, logger, caplog):
    report = json.dumps({"status": "accepted", "night_dir": "/state/nights/n1", "exit_code": 0})
    NightRunner(tmp_path, logger, python(f"print({report!r})"))()
    [record] = caplog.records
    assert record.levelno == logging.INFO
    assert "status=accepted exit=0 night_dir=/state/nights/n1" in record.getMessage()


def test_a_backend_error_night_is_logged_as_an_error_with_its_status(tmp_path, logger, caplog):
    report = json.dumps({"status": "backend_error", "night_dir": "/state/nights/n2", "exit_code": 2})
    NightRunner(tmp_path, logger, python(f"import sys; print({report!r}); sys.exit(2)"))()
    [record] = caplog.records
    assert record.levelno == logging.ERROR and "status=backend_error exit=2" in record.getMessage()


def test_a_night_that_crashes_is_logged_with_its_last_stderr_line(tmp_path, logger, caplog):
    NightRunner(tmp_path, logger, python("raise SystemExit('error: boom at the end')"))()
    [record] = caplog.records
    assert "status=error exit=1" in record.getMessage()
    assert record.getMessage().endswith("error=error: boom at the end")


def test_a_locked_night_is_logged_as_locked(tmp_path, logger, caplog):
    NightRunner(tmp_path, logger, python("import sys; sys.stderr.write('error: another night\\n'); sys.exit(4)"))()
    assert "status=locked exit=4" in caplog.records[0].getMessage()


def test_a_missing_night_command_is_logged_not_raised(tmp_path, logger, caplog):
    NightRunner(tmp_path, logger, [str(tmp_path / "no-such-binary")])()
    assert "status=error" in caplog.records[0].getMessage()


def test_stop_terminates_a_running_night_and_refuses_new_ones(tmp_path, logger, caplog):
    runner = NightRunner(tmp_path, logger, python("import time; time.sleep(30)"))
    thread = threading.Thread(target=runner)
    thread.start()
    time.sleep(0.5)
    started = time.monotonic()
    runner.stop()
    thread.join(10)
    assert not thread.is_alive() and time.monotonic() - started < 10
    assert "status=interrupted" in caplog.records[-1].getMessage()
    runner()  # refused: no new subprocess, no new line
    assert len(caplog.records) == 1


def test_a_second_daemon_for_the_same_project_is_refused(tmp_path):
    files = daemon_files(tmp_path)
    files.lock.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(files.lock)):
        with pytest.raises(ScheduleError, match="already running"):
            run_daemon(tmp_path, every_seconds=1)


def test_a_bad_time_is_refused_before_anything_starts(tmp_path):
    with pytest.raises(ScheduleError, match="HH:MM"):
        run_daemon(tmp_path, at="7pm")
    assert running_daemon(tmp_path) is None
