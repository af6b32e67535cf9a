"""Shared scheduling helpers: the nightly time, the command, the captured environment, the next run."""

from __future__ import annotations

import os
import sys
from datetime import datetime
from pathlib import Path

import pytest
from tzlocal import get_localzone

from skillopt_sleep.errors import ScheduleError
from skillopt_sleep.schedule import (
    captured_path,
    next_fire_time,
    night_command,
    night_environment,
    parse_at,
    run_now_argv,
)


@pytest.mark.parametrize("text, expected", [("03:17", (3, 17)), ("3:05", (3, 5)), ("23:59", (23, 59)),
                                             ("00:00", (0, 0))])
def test_parse_at_reads_hours_and_minutes_on_a_24_hour_clock(text, expected):
    assert parse_at(text) == expected


@pytest.mark.parametrize("text", ["24:00", "12:60", "3", "03:17:00", "3pm", "", "-1:10"])
def test_parse_at_rejects_anything_but_hh_mm(text):
    with pytest.raises(ScheduleError, match="HH:MM"):
        parse_at(text)


def test_night_command_prefers_the_script_next_to_the_interpreter(tmp_path):
    python = tmp_path / "bin" / "python"
    python.parent.mkdir()
    python.write_text("")
    assert night_command(str(python)) == [str(python), "-m", "skillopt_sleep"]
    script = tmp_path / "bin" / "skillopt-sleep"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    assert night_command(str(python)) == [str(script)]


def test_run_now_argv_is_absolute_and_names_the_project(tmp_path):
    argv = run_now_argv(tmp_path)
    assert os.path.isabs(argv[0])
    assert argv[-3:] == ["run-now", "--project", str(tmp_path)]


def test_captured_path_drops_relative_missing_and_repeated_entries(tmp_path):
    real = tmp_path / "bin"
    real.mkdir()
    value = os.pathsep.join([str(real), "relative/bin", str(tmp_path / "missing"), "", str(real), "/usr/bin"])
    assert captured_path(value) == os.pathsep.join([str(real), "/usr/bin"])


def test_night_environment_keeps_what_the_night_needs_and_never_a_key(tmp_path):
    environ = {
        "PATH": f"{tmp_path}:/usr/bin",
        "SKILLOPT_SLEEP_HOME": "/data/sleep",
        "SKILLOPT_SLEEP_MAX_TOKENS_PER_NIGHT": "1000",
        "SKILLOPT_SLEEP_API_KEY": "sk-secret",
        "SKILLOPT_SLEEP_CRONTAB": "/opt/crontab",
        "OPENAI_API_KEY": "sk-other",
        "ANTHROPIC_API_KEY": "sk-ant",
        "OPENAI_BASE_URL": "http://127.0.0.1:8080/v1",
        "CLAUDE_CONFIG_DIR": "/data/claude",
        "CODEX_HOME": "/data/codex",
        "GITHUB_TOKEN": "ghp_x",
        "EDITOR": "vim",
    }
    env = night_environment(environ)
    assert list(env)[0] == "PATH"
    assert env == {
        "PATH": f"{tmp_path}:/usr/bin",
        "CLAUDE_CONFIG_DIR": "/data/claude",
        "CODEX_HOME": "/data/codex",
        "OPENAI_BASE_URL": "http://127.0.0.1:8080/v1",
        "SKILLOPT_SLEEP_HOME": "/data/sleep",
        "SKILLOPT_SLEEP_MAX_TOKENS_PER_NIGHT": "1000",
    }
    assert not any("sk-" in value for value in env.values())


def test_next_fire_time_is_today_before_the_hour_and_tomorrow_after_it():
    zone = get_localzone()
    morning = datetime(2026, 3, 10, 1, 0, tzinfo=zone)
    assert next_fire_time(3, 17, now=morning).replace(tzinfo=None) == datetime(2026, 3, 10, 3, 17)
    evening = datetime(2026, 3, 10, 22, 0, tzinfo=zone)
    assert next_fire_time(3, 17, now=evening).replace(tzinfo=None) == datetime(2026, 3, 11, 3, 17)


def test_night_command_default_uses_the_running_interpreter_dir():
    command = night_command()
    assert Path(command[0]).parent == Path(sys.executable).absolute().parent
