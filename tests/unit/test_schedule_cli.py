"""``install`` / ``uninstall`` / ``status`` through typer (the commands ``register`` adds)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from skillopt_sleep.cli.schedule_cmd import register
from skillopt_sleep.schedule.systemd import unit_dir, unit_names

sys.path.insert(0, str(Path(__file__).parent))
from test_schedule_cron import fake_crontab  # noqa: E402
from test_schedule_systemd import calls, fake_systemctl  # noqa: E402


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
def no_user_manager(tmp_path, monkeypatch):
    """A ``systemctl`` first on PATH that cannot reach a user manager (never the real one)."""
    script = fake_systemctl(tmp_path / "systemd-bin", user_manager=False)
    monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{os.environ['PATH']}")
    return script


def test_register_adds_the_four_commands(app):
    names = {command.name for command in app.registered_commands}
    assert names == {"install", "uninstall", "daemon", "status"}


def test_install_requires_exactly_one_method(app, project):
    for args in ([], ["--systemd", "--cron"]):
        result = CliRunner().invoke(app, ["install", "--project", str(project), *args])
        assert result.exit_code == 1
        assert "exactly one of --systemd" in result.output


def test_install_systemd_without_user_manager_prints_the_exact_commands(app, project, no_user_manager):
    result = CliRunner().invoke(app, ["install", "--systemd", "--at", "02:40", "--project", str(project)])
    assert result.exit_code == 0, result.output
    timer = unit_names(project)[1]
    assert f"  systemctl --user daemon-reload\n  systemctl --user enable --now {timer}\n" in result.output
    assert "OnCalendar=*-*-* 02:40:00" in (unit_dir() / timer).read_text()
    assert calls(no_user_manager) == ["--user show-environment"]


def test_install_rejects_a_bad_time(app, project, no_user_manager):
    result = CliRunner().invoke(app, ["install", "--systemd", "--at", "25:00", "--project", str(project)])
    assert result.exit_code == 1 and "HH:MM" in result.output
    assert not unit_dir().exists()


def test_install_cron_then_status_json_then_uninstall(app, project, tmp_path, monkeypatch, no_user_manager):
    crontab = fake_crontab(tmp_path / "cron")
    monkeypatch.setenv("SKILLOPT_SLEEP_CRONTAB", str(crontab))
    installed = CliRunner().invoke(app, ["install", "--cron", "--project", str(project), "--json"])
    assert installed.exit_code == 0, installed.output
    line = json.loads(installed.stdout)["line"]
    assert (crontab.parent / "table").read_text() == line + "\n"
    status = CliRunner().invoke(app, ["status", "--project", str(project), "--json"])
    report = json.loads(status.stdout)
    assert report["scheduled_by"] == ["cron"] and report["cron"]["line"] == line
    removed = CliRunner().invoke(app, ["uninstall", "--cron", "--project", str(project)])
    assert removed.exit_code == 0 and "removed from crontab" in removed.output
    assert (crontab.parent / "table").read_text() == ""


def test_status_defaults_to_the_current_directory(app, project, tmp_path, monkeypatch, no_user_manager):
    monkeypatch.setenv("SKILLOPT_SLEEP_CRONTAB", str(fake_crontab(tmp_path / "cron")))
    monkeypatch.chdir(project)
    result = CliRunner().invoke(app, ["status"])
    assert result.exit_code == 0, result.output
    assert f"project: {project}" in result.output
    assert "scheduled by: nothing" in result.output
