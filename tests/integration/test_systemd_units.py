"""The rendered systemd user units pass ``systemd-analyze --user verify`` (Debian's ``systemd`` package).

``verify`` needs no running systemd, only a runtime dir: the test points XDG_RUNTIME_DIR at a temp dir. Skipped
(with the reason) when systemd-analyze is missing or cannot verify in this environment.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from skillopt_sleep.schedule.systemd import install_systemd, unit_dir, unit_names

sys.path.insert(0, str(Path(__file__).parents[1] / "unit"))
from test_schedule_cron import WEIRD_NAME  # noqa: E402
from test_schedule_systemd import fake_systemctl  # noqa: E402

ANALYZE = shutil.which("systemd-analyze")
pytestmark = pytest.mark.skipif(ANALYZE is None, reason="no systemd-analyze (Debian: apt-get install systemd)")


def verify(paths: list[Path], runtime_dir: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime_dir), "SYSTEMD_LOG_LEVEL": "info"}
    return subprocess.run([ANALYZE, "--user", "verify", *map(str, paths)], capture_output=True, text=True,
                          env=env, timeout=60)


@pytest.fixture
def runtime_dir(tmp_path):
    path = tmp_path / "runtime"
    path.mkdir(mode=0o700)
    probe = tmp_path / "probe" / "probe.service"
    probe.parent.mkdir()
    probe.write_text("[Service]\nType=oneshot\nExecStart=/bin/true\n")
    result = verify([probe], path)
    if result.returncode != 0:
        pytest.skip(f"systemd-analyze --user verify does not work here: {result.stderr.strip()[:300]}")
    return path


def test_installed_units_verify_cleanly_with_odd_characters_in_every_path(tmp_path, runtime_dir):
    project = tmp_path / "projects" / WEIRD_NAME
    project.mkdir(parents=True)
    executable = tmp_path / "bin dir 50%" / "skillopt-sleep"
    executable.parent.mkdir()
    executable.write_text("#!/bin/sh\nexit 0\n")
    executable.chmod(0o755)
    systemctl = fake_systemctl(tmp_path / "fake", user_manager=False)
    result = install_systemd(project, "03:17", systemctl=str(systemctl),
                             argv=[str(executable), "run-now", "--project", str(project)])
    assert not result.ran
    checked = verify(result.files, runtime_dir)
    assert checked.returncode == 0, checked.stderr
    ours = [line for line in checked.stderr.splitlines() if str(unit_dir()) in line]
    assert ours == [], "systemd warned about our units"


def test_verify_catches_an_executable_that_does_not_exist(tmp_path, runtime_dir):
    project = tmp_path / "proj"
    project.mkdir()
    systemctl = fake_systemctl(tmp_path / "fake", user_manager=False)
    install_systemd(project, "03:17", systemctl=str(systemctl),
                    argv=[str(tmp_path / "missing dir" / "skillopt-sleep"), "run-now"])
    service = unit_dir() / unit_names(project)[0]
    checked = verify([service], runtime_dir)
    assert checked.returncode != 0 and "is not executable" in checked.stderr  # the clean check is not vacuous


def test_the_default_install_runs_this_interpreters_command(tmp_path, runtime_dir):
    project = tmp_path / "proj"
    project.mkdir()
    systemctl = fake_systemctl(tmp_path / "fake", user_manager=False)
    result = install_systemd(project, "03:17", systemctl=str(systemctl))
    checked = verify(result.files, runtime_dir)
    assert checked.returncode == 0, checked.stderr
    service = (unit_dir() / unit_names(project)[0]).read_text()
    exec_start = next(line for line in service.splitlines() if line.startswith("ExecStart="))
    assert exec_start.startswith(f'ExecStart="{Path(sys.executable).absolute().parent}/')
    assert f'Environment="SKILLOPT_SLEEP_HOME={os.environ["SKILLOPT_SLEEP_HOME"]}"' in service
