"""cron: the line's escaping (cron's % rule, then /bin/sh), and install/uninstall against a fake crontab binary.

The real-binary tests are in tests/integration/test_crontab_real.py.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from skillopt_sleep.errors import ScheduleError
from skillopt_sleep.schedule.cron import (
    MAX_COMMAND_CHARS,
    cron_line,
    cron_log_file,
    cron_quote,
    find_line,
    install_cron,
    line_time,
    read_crontab,
    uninstall_cron,
)

WEIRD_NAME = "it's 100% \\%done $HOME `x` #1"


def cron_command(line: str) -> tuple[str, str]:
    """Split a crontab line as cron does: five time fields, then the command with crontab(5)'s % rule applied
    (``\\%`` becomes ``%``; the first unescaped ``%`` ends the command and starts its stdin).
    Returns (command for /bin/sh, stdin)."""
    command = line.split(None, 5)[5]
    out, escaped = [], False
    for index, char in enumerate(command):
        if escaped:
            if char == "%":
                out[-1] = "%"
            else:
                out.append(char)
            escaped = False
            continue
        if char == "\\":
            escaped = True
            out.append(char)
            continue
        if char == "%":
            return "".join(out), command[index + 1:]
        out.append(char)
    return "".join(out), ""


def printer(directory: Path) -> Path:
    """An executable that prints its argv (one per line) and $SKILLOPT_SLEEP_HOME."""
    script = directory / "print-args"
    script.write_text(f"#!{sys.executable}\nimport os, sys\nprint(*sys.argv[1:], sep='\\n')\n"
                      "print('HOME=' + os.environ.get('SKILLOPT_SLEEP_HOME', ''))\n")
    script.chmod(0o755)
    return script


def fake_crontab(directory: Path, *, read_exit: int | None = None) -> Path:
    """A ``crontab`` that keeps the table in ``<directory>/table``; ``-l`` without a table says "no crontab for
    tester" and exits 1, like Debian's. ``read_exit`` makes ``-l`` fail with that code."""
    directory.mkdir(parents=True, exist_ok=True)
    table = directory / "table"
    script = directory / "crontab"
    script.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        f"table = {str(table)!r}\n"
        "if sys.argv[-1] == '-l':\n"
        + (f"    sys.stderr.write('crontab: cannot open spool\\n'); sys.exit({read_exit})\n" if read_exit else "")
        + "    try:\n"
        "        sys.stdout.buffer.write(open(table, 'rb').read())\n"
        "    except FileNotFoundError:\n"
        "        sys.stderr.write('no crontab for tester\\n'); sys.exit(1)\n"
        "elif sys.argv[-1] == '-':\n"
        "    open(table, 'wb').write(sys.stdin.buffer.read())\n")
    script.chmod(0o755)
    return script


@pytest.fixture
def weird_project(tmp_path):
    path = tmp_path / "projects" / WEIRD_NAME
    path.mkdir(parents=True)
    return path


@pytest.mark.parametrize("word", ["plain", "a b", "100%", "%", "%%x%", "it's", "back\\%slash", "trailing\\",
                                  "$HOME", "`id`", "#hash", ""])
def test_cron_quote_survives_cron_then_sh_unchanged(word):
    line = f"0 3 * * * printf '%s\\n' {cron_quote(word)}".replace("'%s", "'\\%s")
    command, stdin = cron_command(line)
    assert stdin == ""
    output = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True, check=True).stdout
    assert output == word + "\n"


def test_cron_quote_refuses_a_line_break():
    with pytest.raises(ScheduleError, match="line break"):
        cron_quote("a\nb")


def test_cron_line_runs_the_exact_argv_with_the_environment_and_appends_to_the_log(weird_project, tmp_path):
    script = printer(tmp_path)
    home = str(tmp_path / "sleep 50%")
    line = cron_line(weird_project, "03:17", argv=[str(script), "run-now", "--project", str(weird_project)],
                     environment={"PATH": "/usr/bin:/bin", "SKILLOPT_SLEEP_HOME": home})
    assert line.startswith("17 3 * * * PATH=/usr/bin:/bin ")
    assert "\n" not in line
    command, stdin = cron_command(line)
    assert stdin == ""
    log = cron_log_file(weird_project)
    log.parent.mkdir(parents=True)
    log.write_text("earlier night\n")
    subprocess.run(["/bin/sh", "-c", command], check=True, env={"PATH": "/usr/bin:/bin"})
    assert log.read_text() == f"earlier night\nrun-now\n--project\n{weird_project}\nHOME={home}\n"


def test_cron_line_refuses_a_command_cron_would_reject_as_too_long(tmp_path):
    with pytest.raises(ScheduleError, match="--systemd"):
        cron_line(tmp_path, "03:17", argv=["/bin/true"], environment={"PATH": "/x" * MAX_COMMAND_CHARS})


def test_find_line_and_line_time_read_back_our_line(tmp_path):
    line = cron_line(tmp_path, "4:09", argv=["/bin/true"], environment={})
    content = f"# mine\n{line}\n5 5 * * * other\n".encode()
    assert find_line(content, tmp_path) == line
    assert line_time(line) == (4, 9)
    assert find_line(content, tmp_path / "elsewhere") is None


def test_install_into_an_empty_crontab_then_reinstall_replaces_in_place(weird_project, tmp_path):
    crontab = fake_crontab(tmp_path / "fake")
    table = crontab.parent / "table"
    first = install_cron(weird_project, "03:17", crontab_bin=str(crontab))
    assert first.changed and table.read_bytes() == first.line.encode() + b"\n"
    table.write_bytes(b"MAILTO=\"\"\n" + table.read_bytes() + b"0 1 * * * backup \\%d  \n")
    again = install_cron(weird_project, "04:30", crontab_bin=str(crontab))
    lines = table.read_bytes().split(b"\n")
    assert lines[0] == b'MAILTO=""' and lines[2] == b"0 1 * * * backup \\%d  " and lines[3] == b""
    assert lines[1] == again.line.encode() and again.line.startswith("30 4 * * * ")
    unchanged = install_cron(weird_project, "04:30", crontab_bin=str(crontab))
    assert not unchanged.changed


def test_install_adds_a_newline_to_a_last_line_that_lacks_one(tmp_path):
    crontab = fake_crontab(tmp_path / "fake")
    table = crontab.parent / "table"
    table.write_bytes(b"0 1 * * * a")
    result = install_cron(tmp_path, "03:17", crontab_bin=str(crontab), argv=["/bin/true"])
    assert table.read_bytes() == b"0 1 * * * a\n" + result.line.encode() + b"\n"


def test_uninstall_removes_only_this_projects_line(tmp_path):
    crontab = fake_crontab(tmp_path / "fake")
    table = crontab.parent / "table"
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir(), two.mkdir()
    table.write_bytes(b"# keep me\r\n")
    install_cron(one, "03:17", crontab_bin=str(crontab))
    kept_two = install_cron(two, "03:17", crontab_bin=str(crontab))
    removed = uninstall_cron(one, crontab_bin=str(crontab))
    assert removed.changed
    assert table.read_bytes() == b"# keep me\r\n" + kept_two.line.encode() + b"\n"
    assert not uninstall_cron(one, crontab_bin=str(crontab)).changed


def test_no_crontab_for_user_reads_as_empty(tmp_path):
    assert read_crontab(str(fake_crontab(tmp_path / "fake"))) == b""


@pytest.mark.parametrize("code", [1, 2])
def test_any_other_read_failure_is_an_error_and_nothing_is_written(tmp_path, code):
    crontab = fake_crontab(tmp_path / "fake", read_exit=code)
    with pytest.raises(ScheduleError, match=rf"exited {code}\): crontab: cannot open spool"):
        install_cron(tmp_path, "03:17", crontab_bin=str(crontab))
    assert not (crontab.parent / "table").exists()


def test_a_missing_crontab_binary_is_an_error_naming_the_alternatives(tmp_path):
    with pytest.raises(ScheduleError, match="not found.*--systemd"):
        read_crontab(str(tmp_path / "no-such-crontab"))


def test_the_crontab_binary_comes_from_the_environment(tmp_path, monkeypatch):
    crontab = fake_crontab(tmp_path / "fake")
    monkeypatch.setenv("SKILLOPT_SLEEP_CRONTAB", str(crontab))
    install_cron(tmp_path, "03:17")
    assert (crontab.parent / "table").exists()


def test_the_installer_setting_is_not_copied_into_the_line(tmp_path, monkeypatch):
    crontab = fake_crontab(tmp_path / "fake")
    monkeypatch.setenv("SKILLOPT_SLEEP_CRONTAB", str(crontab))
    line = install_cron(tmp_path, "03:17").line
    assert "SKILLOPT_SLEEP_CRONTAB" not in line
    assert f"SKILLOPT_SLEEP_HOME={shlex.quote(os.environ['SKILLOPT_SLEEP_HOME'])}" in line
