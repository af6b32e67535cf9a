"""``run-now --dry-run`` writes nothing (issue 24, item 6): no night directory, no tasks, no state, no lock file;
the real CLI in a subprocess, on the bundled transcripts, with the mock simulator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_subprocess import EXAMPLES, run_cli


@pytest.fixture
def cli_env(cli_env):
    return {**cli_env, "SKILLOPT_SLEEP_BACKEND": "mock"}


def night_args(*extra: str) -> list[str]:
    return ["run-now", "--claude-home", str(EXAMPLES / "claude-home"), "--codex-home", str(EXAMPLES / "codex-home"),
            "--scope", "all", "--lookback-hours", "0", *extra]


def listing(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``root`` -> (size, mtime in ns) ({} when ``root`` does not exist)."""
    if not root.exists():
        return {}
    return {str(path.relative_to(root)): (path.stat().st_size, path.stat().st_mtime_ns)
            for path in sorted(root.rglob("*"))}


def test_a_first_dry_run_creates_no_state_at_all(tmp_path, cli_env):
    project = tmp_path / "project"
    project.mkdir()
    home = Path(cli_env["SKILLOPT_SLEEP_HOME"])
    done = run_cli(*night_args("--dry-run"), env=cli_env, cwd=project)
    assert done.returncode == 0, done.stderr
    assert "dry run:" in done.stdout and "nothing was written" in done.stdout
    assert "diagnostics:" not in done.stdout  # no file to point to
    assert listing(home) == {}
    assert sorted(p.name for p in project.iterdir()) == []


def test_dry_runs_after_a_night_leave_every_file_as_it_was(tmp_path, cli_env):
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    home = Path(cli_env["SKILLOPT_SLEEP_HOME"])
    night = run_cli(*night_args("--json"), env=cli_env, cwd=first)
    assert night.returncode == 0, night.stderr
    before = listing(home)
    assert any(name.endswith("diagnostics.json") for name in before)
    # the same project (its checkpoint has read everything: no sessions) and a new one (tasks mined)
    again = json.loads(run_cli(*night_args("--dry-run", "--json"), env=cli_env, cwd=first).stdout)
    assert again["night_dir"] is None
    dry = run_cli(*night_args("--dry-run", "--json"), env=cli_env, cwd=second)
    assert dry.returncode == 0, dry.stderr
    result = json.loads(dry.stdout)
    assert result["status"] == "dry_run" and result["night_dir"] is None
    assert result["tasks"]["total"] > 0  # it did harvest and mine: the answer is in the output, not on disk
    assert listing(home) == before
