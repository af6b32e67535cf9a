"""install/uninstall --cron against the real ``crontab`` binary (Debian's ``cron`` package).

Isolation: every crontab operation runs as a throwaway user made by ``useradd`` for the test (root only), through
a wrapper that always passes ``-u USER``; the developer's own crontab is never read or written. Skipped when
``crontab`` is missing or the test cannot create that user.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from skillopt_sleep.cli.schedule_cmd import register
from skillopt_sleep.errors import ScheduleError
from skillopt_sleep.schedule.cron import install_cron, read_crontab, uninstall_cron

sys.path.insert(0, str(Path(__file__).parents[1] / "unit"))
from test_schedule_cron import WEIRD_NAME, cron_command, printer  # noqa: E402

CRONTAB = shutil.which("crontab")
pytestmark = [
    pytest.mark.skipif(CRONTAB is None, reason="no crontab binary (Debian: apt-get install cron)"),
    pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("useradd") is None,
                       reason="needs root and useradd to isolate the test in a throwaway user's crontab"),
]

OTHER_LINES = (b"# the user's own crontab: every byte must survive\n"
               b'MAILTO=""\n'
               b"SHELL=/bin/bash\n"
               b"\n"
               b"0 1 * * * date +\\%Y-\\%m-\\%d >> /tmp/dates   \t\n"
               b"@reboot  echo 'caf\xc3\xa9'   # trailing comment\n"
               b"*/5 * * * * true # skillopt-sleep:someone-elses-tag-lookalike\n")


@pytest.fixture
def cron_user(tmp_path):
    """A throwaway user, and a ``crontab`` wrapper bound to it with ``-u``."""
    name = f"sotest{secrets.token_hex(4)}"
    made = subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot create a throwaway user: {made.stderr.strip()}")
    wrapper = tmp_path / "crontab-as-user"
    wrapper.write_text(f'#!/bin/sh\nexec {CRONTAB} -u {name} "$@"\n')
    wrapper.chmod(0o755)
    try:
        yield name, str(wrapper)
    finally:
        subprocess.run([CRONTAB, "-u", name, "-r"], capture_output=True)
        subprocess.run(["userdel", name], capture_output=True)


def seed(user: str, content: bytes) -> None:
    subprocess.run([CRONTAB, "-u", user, "-"], input=content, check=True)


def table(user: str) -> bytes:
    return read_crontab(CRONTAB, user=user)


@pytest.fixture
def weird_project(tmp_path):
    path = tmp_path / "projects" / WEIRD_NAME
    path.mkdir(parents=True)
    return path


def test_a_new_user_has_an_empty_crontab_not_an_error(cron_user):
    user, wrapper = cron_user
    assert read_crontab(wrapper) == b""


def test_install_is_idempotent_and_keeps_every_other_line_byte_for_byte(cron_user, weird_project):
    user, wrapper = cron_user
    seed(user, OTHER_LINES)
    first = install_cron(weird_project, "03:17", crontab_bin=wrapper)
    assert table(user) == OTHER_LINES + first.line.encode() + b"\n"
    second = install_cron(weird_project, "03:17", crontab_bin=wrapper)
    assert not second.changed and table(user) == OTHER_LINES + first.line.encode() + b"\n"
    moved = install_cron(weird_project, "22:05", crontab_bin=wrapper)
    assert table(user) == OTHER_LINES + moved.line.encode() + b"\n"
    assert moved.line.startswith("5 22 * * * ")


def test_percent_and_spaces_in_the_project_path_survive_cron_and_the_shell(cron_user, weird_project, tmp_path):
    user, wrapper = cron_user
    script = printer(tmp_path)
    install_cron(weird_project, "03:17", crontab_bin=wrapper,
                 argv=[str(script), "run-now", "--project", str(weird_project)])
    [line] = table(user).decode().splitlines()  # the real crontab accepted it and gives it back
    command, stdin = cron_command(line)
    assert stdin == "", "an unescaped % would cut the command"
    subprocess.run(["/bin/sh", "-c", command], check=True, env={"PATH": "/usr/bin:/bin"})
    log = Path(os.environ["SKILLOPT_SLEEP_HOME"]) / "state" / "logs"
    [log_file] = log.glob("cron-*.log")
    assert log_file.read_text().splitlines()[:3] == ["run-now", "--project", str(weird_project)]


def test_uninstall_removes_only_our_line_for_that_project(cron_user, weird_project, tmp_path):
    user, wrapper = cron_user
    other = tmp_path / "other"
    other.mkdir()
    seed(user, OTHER_LINES)
    install_cron(weird_project, "03:17", crontab_bin=wrapper)
    kept = install_cron(other, "04:00", crontab_bin=wrapper)
    removed = uninstall_cron(weird_project, crontab_bin=wrapper)
    assert removed.changed
    assert table(user) == OTHER_LINES + kept.line.encode() + b"\n"
    uninstall_cron(other, crontab_bin=wrapper)
    assert table(user) == OTHER_LINES


def test_a_crontab_that_cannot_be_read_is_an_error_and_is_left_alone(cron_user, tmp_path, monkeypatch, weird_project):
    user, wrapper = cron_user
    seed(user, OTHER_LINES)
    fake = tmp_path / "fake-bin"
    fake.mkdir()
    (fake / "crontab").write_text("#!/bin/sh\necho 'crontab: cannot open the spool' >&2\nexit 2\n")
    (fake / "crontab").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(ScheduleError, match="exited 2.*cannot open the spool"):
        install_cron(weird_project, "03:17")
    assert table(user) == OTHER_LINES


def test_cli_install_and_uninstall_through_the_real_binary(cron_user, weird_project, monkeypatch):
    user, wrapper = cron_user
    seed(user, OTHER_LINES)
    monkeypatch.setenv("SKILLOPT_SLEEP_CRONTAB", wrapper)
    app = typer.Typer()
    register(app)
    installed = CliRunner().invoke(app, ["install", "--cron", "--at", "01:02", "--project", str(weird_project),
                                         "--json"])
    assert installed.exit_code == 0, installed.output
    line = json.loads(installed.stdout)["line"]
    assert line.startswith("2 1 * * * ") and "SKILLOPT_SLEEP_CRONTAB" not in line
    assert table(user) == OTHER_LINES + line.encode() + b"\n"
    removed = CliRunner().invoke(app, ["uninstall", "--cron", "--project", str(weird_project)])
    assert removed.exit_code == 0, removed.output
    assert table(user) == OTHER_LINES
