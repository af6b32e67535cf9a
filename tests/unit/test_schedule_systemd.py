"""systemd user units: rendering, escaping, install/uninstall with and without a user manager."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

from skillopt_sleep.errors import ScheduleError
from skillopt_sleep.schedule.systemd import (
    TEMPLATE_NAMES,
    environment_line,
    install_systemd,
    parse_on_calendar,
    quote_exec_argument,
    read_on_calendar,
    render_units,
    template_text,
    uninstall_systemd,
    unit_dir,
    unit_names,
)

REPO = Path(__file__).resolve().parents[2]


def fake_systemctl(directory: Path, *, user_manager: bool) -> Path:
    """A ``systemctl`` that logs its argv to ``calls.log``; ``show-environment`` fails without a user manager."""
    directory.mkdir(parents=True, exist_ok=True)
    log = directory / "calls.log"
    script = directory / "systemctl"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {shlex.quote(str(log))}\n'
        'if [ "$2" = show-environment ]; then\n'
        + ("  exit 0\n" if user_manager else '  echo "Failed to connect to bus: No medium found" >&2; exit 1\n')
        + "fi\nexit 0\n")
    script.chmod(0o755)
    return script


def calls(script: Path) -> list[str]:
    log = script.parent / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


@pytest.fixture
def project(tmp_path):
    path = tmp_path / "work" / "my project"
    path.mkdir(parents=True)
    return path


def test_top_level_systemd_templates_are_identical_to_the_packaged_ones():
    for name in TEMPLATE_NAMES:
        assert (REPO / "systemd" / name).read_text("utf-8") == template_text(name), name


def test_rendered_units_run_the_absolute_command_nightly_at_the_requested_time(project):
    argv = ["/opt/venv/bin/skillopt-sleep", "run-now", "--project", str(project)]
    units = render_units(project, "04:05", argv=argv, environment={"PATH": "/opt/venv/bin:/usr/bin"})
    service_name, timer_name = unit_names(project)
    assert set(units) == {service_name, timer_name}
    service, timer = units[service_name], units[timer_name]
    assert f'ExecStart="/opt/venv/bin/skillopt-sleep" "run-now" "--project" "{project}"' in service.splitlines()
    assert 'Environment="PATH=/opt/venv/bin:/usr/bin"' in service.splitlines()
    assert "Type=oneshot" in service.splitlines()
    assert "Nice=19" in service.splitlines()
    assert "OnCalendar=*-*-* 04:05:00" in timer.splitlines()
    assert "Persistent=true" in timer.splitlines()
    assert "RandomizedDelaySec=10min" in timer.splitlines()
    assert f"Unit={service_name}" in timer.splitlines()
    assert "WantedBy=timers.target" in timer.splitlines()
    assert "${" not in service + timer


def test_render_refuses_a_relative_executable(project):
    with pytest.raises(ScheduleError, match="absolute"):
        render_units(project, "03:17", argv=["skillopt-sleep", "run-now"], environment={})


def test_exec_arguments_escape_specifiers_variables_quotes_and_backslashes():
    assert quote_exec_argument('/a b/100%/$HOME/"q"\\x') == '"/a b/100%%/$$HOME/\\"q\\"\\\\x"'
    with pytest.raises(ScheduleError, match="line break"):
        quote_exec_argument("a\nb")


def test_environment_lines_escape_specifiers_and_quotes():
    assert environment_line("PATH", '/opt/50% "x"') == 'Environment="PATH=/opt/50%% \\"x\\""'


def test_on_calendar_round_trips_through_the_timer_file(project, tmp_path):
    units = render_units(project, "23:59", argv=["/bin/true"], environment={})
    timer = tmp_path / "t.timer"
    timer.write_text(units[unit_names(project)[1]])
    assert read_on_calendar(timer) == "*-*-* 23:59:00"
    assert parse_on_calendar("*-*-* 23:59:00") == (23, 59)
    assert parse_on_calendar("Mon *-*-* 03:00:00") is None


def test_units_never_contain_api_keys(project, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-live-should-not-leak")
    monkeypatch.setenv("SKILLOPT_SLEEP_API_KEY", "sk-config-should-not-leak")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    text = "".join(render_units(project, "03:17").values())
    assert "should-not-leak" not in text
    assert 'Environment="OPENAI_BASE_URL=http://127.0.0.1:9/v1"' in text


def test_unit_dir_follows_xdg_config_home(hermetic_env, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert unit_dir() == tmp_path / "xdg" / "systemd" / "user"
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative")
    assert unit_dir() == hermetic_env / ".config" / "systemd" / "user"


def test_install_without_user_manager_writes_units_and_returns_the_commands_to_run(project, tmp_path):
    systemctl = fake_systemctl(tmp_path / "fake", user_manager=False)
    result = install_systemd(project, "03:17", systemctl=str(systemctl))
    service, timer = unit_names(project)
    assert not result.ran
    assert "No medium found" in result.reason
    assert result.commands == [[str(systemctl), "--user", "daemon-reload"],
                               [str(systemctl), "--user", "enable", "--now", timer]]
    assert sorted(p.name for p in result.files) == sorted([service, timer])
    assert all(p.parent == Path(os.environ["XDG_CONFIG_HOME"]) / "systemd" / "user" for p in result.files)
    assert calls(systemctl) == ["--user show-environment"]
    assert (result.unit_dir / service).stat().st_mode & 0o777 == 0o600


def test_install_with_user_manager_reloads_and_enables_the_timer(project, tmp_path):
    systemctl = fake_systemctl(tmp_path / "fake", user_manager=True)
    result = install_systemd(project, "03:17", systemctl=str(systemctl))
    timer = unit_names(project)[1]
    assert result.ran
    assert calls(systemctl) == ["--user show-environment", "--user daemon-reload", f"--user enable --now {timer}"]
    install_systemd(project, "05:00", systemctl=str(systemctl))
    assert calls(systemctl)[-1] == f"--user restart {timer}"
    assert read_on_calendar(result.unit_dir / timer) == "*-*-* 05:00:00"


def test_a_failing_systemctl_command_is_an_error_with_its_output(project, tmp_path):
    script = tmp_path / "fake" / "systemctl"
    script.parent.mkdir()
    script.write_text('#!/bin/sh\n[ "$2" = show-environment ] && exit 0\necho "Unit file is masked." >&2\nexit 1\n')
    script.chmod(0o755)
    with pytest.raises(ScheduleError, match="masked"):
        install_systemd(project, "03:17", systemctl=str(script))


def test_uninstall_disables_and_removes_only_this_projects_units(project, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    systemctl = fake_systemctl(tmp_path / "fake", user_manager=True)
    install_systemd(project, "03:17", systemctl=str(systemctl))
    install_systemd(other, "03:17", systemctl=str(systemctl))
    directory = unit_dir()
    wants = directory / "timers.target.wants"
    wants.mkdir()
    timer = unit_names(project)[1]
    (wants / timer).symlink_to(directory / timer)
    result = uninstall_systemd(project, systemctl=str(systemctl))
    assert calls(systemctl)[-2:] == [f"--user disable --now {timer}", "--user daemon-reload"]
    assert not (directory / timer).exists() and not (wants / timer).is_symlink()
    assert not (directory / unit_names(project)[0]).exists()
    assert all((directory / name).exists() for name in unit_names(other))
    assert len(result.files) == 3


def test_uninstall_without_anything_installed_changes_nothing(project, tmp_path):
    systemctl = fake_systemctl(tmp_path / "fake", user_manager=True)
    result = uninstall_systemd(project, systemctl=str(systemctl))
    assert result.files == [] and result.reason == "not installed"
    assert calls(systemctl) == []
