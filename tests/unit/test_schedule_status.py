"""``status``: schedules found, last night, pending proposals, next run."""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
from tzlocal import get_localzone

from skillopt_sleep.schedule.cron import install_cron
from skillopt_sleep.schedule.daemon import daemon_files
from skillopt_sleep.schedule.status import adopted_night_ids, pending_proposals, schedule_status
from skillopt_sleep.schedule.systemd import install_systemd
from skillopt_sleep.state import ProjectPaths, ProjectState, save_state

sys.path.insert(0, str(Path(__file__).parent))
from test_schedule_cron import fake_crontab  # noqa: E402
from test_schedule_systemd import fake_systemctl  # noqa: E402


@pytest.fixture
def project(tmp_path):
    path = tmp_path / "proj"
    path.mkdir()
    return path


@pytest.fixture
def bins(tmp_path):
    return {"crontab_bin": str(fake_crontab(tmp_path / "cron")),
            "systemctl": str(fake_systemctl(tmp_path / "systemd", user_manager=False))}


def make_night(paths: ProjectPaths, night_id: str, *, proposed: bool) -> None:
    night = paths.nights / night_id
    night.mkdir(parents=True)
    (night / "diagnostics.json").write_text('{"status": "accepted"}')
    if proposed:
        (night / "proposed").mkdir()
        (night / "proposed" / "manifest.json").write_text('{"entries": []}')


def test_nothing_scheduled_reports_nothing_and_no_next_run(project, bins):
    report = schedule_status(project, **bins)
    assert report["scheduled_by"] == [] and report["next_run"] is None
    assert report["cron"]["installed"] is False and report["systemd"]["installed"] is False
    assert report["daemon"]["running"] is False
    assert report["last_night"] == {"id": None, "status": None, "finished_at": None, "headline": "", "changed": [],
                                     "verdict": None, "stage": None}
    assert report["pending_proposals"] == []


def test_last_night_comes_from_the_project_state(project, bins):
    finished = datetime(2026, 5, 1, 3, 20, tzinfo=timezone.utc)
    save_state(ProjectPaths(project), ProjectState(last_night_id="2026-05-01T031700Z", last_status="rejected",
                                                   last_finished_at=finished))
    report = schedule_status(project, **bins)
    assert report["last_night"] == {"id": "2026-05-01T031700Z", "status": "rejected",
                                    "finished_at": finished.isoformat(), "headline": "", "changed": [], "verdict": None,
                                    "stage": None}


def test_status_leads_with_what_the_last_night_changed_in_the_users_files(project, bins, monkeypatch):
    from typer.testing import CliRunner

    from skillopt_sleep.cli.app import app

    paths = ProjectPaths(project)
    night_id = "2026-05-01T031700Z"
    headline = 'CLAUDE.md: learned 1 rule ("use pnpm, never npm [sic]"); SKILL.md: unchanged'
    (paths.nights / night_id).mkdir(parents=True)
    (paths.nights / night_id / "diagnostics.json").write_text(json.dumps({
        "headline": headline, "changes": [{"file": "CLAUDE.md", "state": "written"},
                                          {"file": "SKILL.md", "state": "unchanged"}]}))
    save_state(paths, ProjectState(last_night_id=night_id, last_status="accepted"))
    report = schedule_status(project, **bins)
    assert report["last_night"]["changed"] == ["CLAUDE.md"] and report["last_night"]["headline"] == headline
    monkeypatch.setenv("PATH", str(Path(bins["crontab_bin"]).parent) + os.pathsep + os.environ["PATH"])
    out = CliRunner().invoke(app, ["status", "--project", str(project), "--crontab-bin", bins["crontab_bin"]],
                             terminal_width=300)
    assert out.exit_code == 0, out.output
    assert out.output.splitlines()[0] == f"last night ({night_id}): {headline}"  # markup-like text kept as is
    # a night that changed nothing does not lead
    (paths.nights / night_id / "diagnostics.json").write_text(json.dumps({"headline": "nothing changed: x",
                                                                          "changes": []}))
    out = CliRunner().invoke(app, ["status", "--project", str(project), "--crontab-bin", bins["crontab_bin"]],
                             terminal_width=300)
    assert out.output.startswith("project: ")


def test_pending_proposals_are_staged_nights_not_yet_adopted(project):
    paths = ProjectPaths(project)
    make_night(paths, "2026-05-01T031700Z", proposed=True)
    make_night(paths, "2026-05-02T031700Z", proposed=False)
    make_night(paths, "2026-05-03T031700Z", proposed=True)
    make_night(paths, "2026-05-04T031700Z", proposed=True)
    assert pending_proposals(paths) == (["2026-05-01T031700Z", "2026-05-03T031700Z", "2026-05-04T031700Z"], None)
    (paths.root / "adoptions.json").write_text(json.dumps([{"night_id": "2026-05-03T031700Z", "files": []}]))
    assert pending_proposals(paths) == (["2026-05-01T031700Z", "2026-05-04T031700Z"], None)


@pytest.mark.parametrize("content", [
    ["a", {"night_id": "b"}],
    {"adoptions": [{"night_id": "a"}, {"night_id": "b"}]},
    {"a": {"at": "x"}, "b": {"at": "y"}},
])
def test_adoptions_file_shapes_all_name_the_adopted_nights(tmp_path, content):
    path = tmp_path / "adoptions.json"
    path.write_text(json.dumps(content))
    assert adopted_night_ids(path) == {"a", "b"}


def test_an_unreadable_adoptions_file_is_a_warning_not_a_crash(project, bins):
    paths = ProjectPaths(project)
    make_night(paths, "n1", proposed=True)
    (paths.root / "adoptions.json").write_text("{not json")
    report = schedule_status(project, **bins)
    assert report["pending_proposals"] == ["n1"]
    assert "adoptions.json is not valid JSON" in report["warnings"][0]


def test_cron_and_systemd_schedules_are_found_with_their_next_run(project, bins):
    install_cron(project, "03:17", crontab_bin=bins["crontab_bin"])
    install_systemd(project, "05:45", systemctl=bins["systemctl"])
    now = datetime(2026, 5, 1, 4, 0, tzinfo=get_localzone())
    report = schedule_status(project, now=now, **bins)
    assert report["scheduled_by"] == ["systemd", "cron"]
    assert report["cron"]["next_run"].startswith("2026-05-02T03:17:00")
    assert report["systemd"]["next_run"].startswith("2026-05-01T05:45:00")
    assert report["systemd"]["on_calendar"] == "*-*-* 05:45:00"
    assert report["systemd"]["enabled"] is None  # no user manager to ask
    assert report["next_run"] == report["systemd"]["next_run"]


def test_an_unreadable_crontab_is_reported_not_guessed(project, tmp_path, bins):
    broken = fake_crontab(tmp_path / "broken", read_exit=2)
    report = schedule_status(project, crontab_bin=str(broken), systemctl=bins["systemctl"])
    assert report["cron"]["installed"] is None
    assert "cannot open spool" in report["warnings"][0]


def test_a_live_daemon_pid_file_is_reported_and_a_stale_one_is_not(project, bins):
    files = daemon_files(project)
    files.pid.parent.mkdir(parents=True, exist_ok=True)
    files.pid.write_text(f"{os.getpid()}\n")
    files.info.write_text(json.dumps({"pid": os.getpid(), "at": "02:30", "every_seconds": None}))
    now = datetime(2026, 5, 1, 1, 0, tzinfo=get_localzone())
    report = schedule_status(project, now=now, **bins)
    assert report["daemon"]["running"] and report["daemon"]["pid"] == os.getpid()
    assert report["daemon"]["trigger"] == "daily at 02:30"
    assert report["next_run"].startswith("2026-05-01T02:30:00")
    files.pid.write_text("999999999\n")
    assert schedule_status(project, **bins)["daemon"]["running"] is False


def test_a_staged_headline_reads_as_what_became_of_it_so_status_and_adopt_agree(project, bins):
    from skillopt_sleep.review.adopt import adoptable
    from skillopt_sleep.review.staged import STAGED_NOTE

    paths = ProjectPaths(project)
    night_id = "2026-05-01T031700Z"
    make_night(paths, night_id, proposed=True)
    headline = f'CLAUDE.md: learned 1 rule ("x"){STAGED_NOTE}'
    (paths.nights / night_id / "diagnostics.json").write_text(json.dumps({
        "status": "accepted", "headline": headline, "changes": [{"file": "CLAUDE.md", "state": "staged"}]}))
    save_state(paths, ProjectState(last_night_id=night_id, last_status="accepted"))
    report = schedule_status(project, **bins)
    assert report["pending_proposals"] == adoptable(paths) == [night_id]
    assert report["last_night"]["headline"] == headline and report["last_night"]["verdict"] == "learned"
    (paths.root / "adoptions.json").write_text(json.dumps({"adoptions": [
        {"night_id": night_id, "status": "reverted", "adopted_at": "2026-05-01T05:00:00Z", "documents": []}]}))
    report = schedule_status(project, **bins)
    assert report["pending_proposals"] == adoptable(paths) == []
    assert report["last_night"]["headline"] == 'CLAUDE.md: learned 1 rule ("x") -- reverted'
