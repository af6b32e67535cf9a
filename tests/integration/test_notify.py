"""``notify = true``: a night that wrote or staged a change calls the real ``notify-send`` interface (a stand-in
script on PATH records its arguments); where ``notify-send`` is missing or fails, the night is unaffected."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from transcripts import PNPM_CONVERSATIONS, write_claude_sessions

from skillopt_sleep.config import SleepConfig
from skillopt_sleep.night import run_night


def stand_in(bin_dir: Path, *, exit_code: int = 0) -> Path:
    """A ``notify-send`` that appends its arguments, one per line, to ``calls.txt`` beside it."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "notify-send"
    script.write_text(f'#!/bin/sh\nfor a in "$@"; do echo "$a"; done >> "{bin_dir}/calls.txt"\nexit {exit_code}\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return bin_dir / "calls.txt"


def night(tmp_path: Path, **overrides):
    project = tmp_path / "project"
    project.mkdir(parents=True, exist_ok=True)
    write_claude_sessions(tmp_path / "claude", project, PNPM_CONVERSATIONS, fixed_answer="Sorry, I will use pnpm.")
    config = SleepConfig(backend="mock", lookback_hours=0, claude_home=tmp_path / "claude", gate_rule="strict",
                         gate_samples=1, **overrides)
    return run_night(config, project=project, state_root=tmp_path / "state").diagnostics


def test_a_night_that_staged_a_change_notifies_with_its_morning_line(tmp_path, monkeypatch):
    calls = stand_in(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    diagnostics = night(tmp_path, notify=True)
    assert diagnostics.status == "accepted" and diagnostics.headline.startswith("CLAUDE.md: learned 1 rule")
    assert calls.read_text().splitlines() == ["--app-name=skillopt-sleep", "skillopt-sleep: project",
                                              diagnostics.headline]


def test_no_notification_unless_asked_or_when_nothing_changed(tmp_path, monkeypatch):
    calls = stand_in(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    assert night(tmp_path / "off").status == "accepted"  # notify defaults to false
    empty = tmp_path / "empty"
    empty.mkdir()
    quiet = run_night(SleepConfig(backend="mock", lookback_hours=0, claude_home=empty, notify=True),
                      project=empty, state_root=tmp_path / "state-empty").diagnostics
    assert quiet.status == "no_sessions"
    assert not calls.exists()


def test_a_missing_or_failing_notify_send_never_fails_the_night(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "nothing-here"))  # no notify-send at all
    assert night(tmp_path / "missing", notify=True).status == "accepted"
    calls = stand_in(tmp_path / "bin", exit_code=1)  # no session bus under cron: notify-send exits 1
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}/usr/bin:/bin")
    assert night(tmp_path / "failing", notify=True).status == "accepted"
    assert calls.exists()
