"""Two schedulers for one project (issue 24, item 6): ``install`` and ``daemon`` refuse a second kind without
``--force`` (two nights a day), and ``status`` warns when two are in place. Fakes: ``fake_crontab`` and
``fake_systemctl`` of the schedule tests (no user manager: the unit files are written, systemctl is not run)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from skillopt_sleep.cli.schedule_cmd import register
from skillopt_sleep.schedule.conflicts import installed_schedulers, two_schedulers_warning
from skillopt_sleep.schedule.systemd import unit_dir, unit_names

sys.path.insert(0, str(Path(__file__).parent))
from test_schedule_cron import fake_crontab  # noqa: E402
from test_schedule_systemd import fake_systemctl  # noqa: E402


@pytest.fixture
def app():
    root = typer.Typer()
    register(root)
    return root


@pytest.fixture
def project(tmp_path):
    path = tmp_path / "proj"
    path.mkdir()
    return path


@pytest.fixture
def crontab(tmp_path, monkeypatch):
    script = fake_crontab(tmp_path / "cron")
    monkeypatch.setenv("SKILLOPT_SLEEP_CRONTAB", str(script))
    systemctl = fake_systemctl(tmp_path / "systemd-bin", user_manager=False)
    monkeypatch.setenv("PATH", f"{systemctl.parent}{os.pathsep}{os.environ['PATH']}")
    return script


def invoke(app, *args: str):
    return CliRunner().invoke(app, list(args))


def test_systemd_is_refused_beside_cron_without_force(app, project, crontab):
    assert invoke(app, "install", "--cron", "--project", str(project)).exit_code == 0
    refused = invoke(app, "install", "--systemd", "--project", str(project))
    assert refused.exit_code == 1
    assert "already scheduled by cron" in refused.output and "--force" in refused.output
    assert "skillopt-sleep uninstall --cron" in refused.output
    assert not (unit_dir() / unit_names(project)[1]).exists()
    assert installed_schedulers(project) == ["cron"]


def test_cron_is_refused_beside_systemd_and_the_crontab_is_untouched(app, project, crontab):
    assert invoke(app, "install", "--systemd", "--project", str(project)).exit_code == 0
    refused = invoke(app, "install", "--cron", "--project", str(project))
    assert refused.exit_code == 1 and "already scheduled by systemd" in refused.output
    assert not (crontab.parent / "table").exists()


def test_force_installs_both_with_a_warning_and_status_warns(app, project, crontab):
    assert invoke(app, "install", "--cron", "--project", str(project)).exit_code == 0
    forced = invoke(app, "install", "--systemd", "--force", "--project", str(project))
    assert forced.exit_code == 0, forced.output
    assert "warning:" in forced.output and "also scheduled by cron" in forced.output
    assert installed_schedulers(project) == ["systemd", "cron"]
    report = json.loads(invoke(app, "status", "--project", str(project), "--json").stdout)
    assert report["scheduled_by"] == ["systemd", "cron"]
    assert two_schedulers_warning(["systemd", "cron"]) in report["warnings"]
    text = invoke(app, "status", "--project", str(project)).output
    assert "warning: scheduled by systemd and cron: the night runs 2 times a day" in text


def test_reinstalling_the_same_kind_is_no_conflict(app, project, crontab):
    assert invoke(app, "install", "--cron", "--project", str(project)).exit_code == 0
    again = invoke(app, "install", "--cron", "--at", "04:00", "--project", str(project))
    assert again.exit_code == 0, again.output
    assert "warning" not in again.output
    report = json.loads(invoke(app, "status", "--project", str(project), "--json").stdout)
    assert report["warnings"] == []


def test_the_daemon_is_refused_beside_cron(app, project, crontab):
    assert invoke(app, "install", "--cron", "--project", str(project)).exit_code == 0
    refused = invoke(app, "daemon", "--project", str(project), "--every-seconds", "0.1")
    assert refused.exit_code == 1 and "already scheduled by cron" in refused.output


def test_other_projects_do_not_conflict(app, project, tmp_path, crontab):
    other = tmp_path / "other"
    other.mkdir()
    assert invoke(app, "install", "--cron", "--project", str(other)).exit_code == 0
    installed = invoke(app, "install", "--systemd", "--project", str(project))
    assert installed.exit_code == 0, installed.output
    assert installed_schedulers(project) == ["systemd"] and installed_schedulers(other) == ["cron"]
