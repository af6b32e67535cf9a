"""CLI conventions (issue 24, item 6): ``-h``, ``-V``, shell completion, ``config validate``, ``config show`` as
TOML, and tables that neither wrap nor cut when piped.

Each command runs the real entry point in a subprocess (stdout is a pipe, not a terminal) in the hermetic
environment of ``tests/conftest.py``.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
import tomllib

from skillopt_sleep import __version__
from skillopt_sleep.config import load_config
from skillopt_sleep.paths import ProjectPaths


def cli(*args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "skillopt_sleep", *args], capture_output=True, text=True,
                          cwd=cwd, env={**os.environ, "COLUMNS": "80", **env}, timeout=120)


# --------------------------------------------------------------------------- -h, -V, completion


@pytest.mark.parametrize("args", [["-h"], ["status", "-h"], ["config", "-h"], ["config", "validate", "-h"],
                                  ["install", "-h"], ["models", "list", "-h"]])
def test_dash_h_is_help_everywhere(args):
    done = cli(*args)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Usage: skillopt-sleep ")
    assert "-h, --help" in done.stdout


@pytest.mark.parametrize("args", [["-V"], ["--version"], ["--verbose", "-V"]])
def test_dash_capital_v_prints_the_program_and_its_version(args):
    done = cli(*args)
    assert (done.returncode, done.stdout) == (0, f"skillopt-sleep {__version__}\n"), done.stderr


def test_shell_completion_is_offered():
    assert "--install-completion" in cli("--help").stdout
    # typer finds the shell from the parent processes (shellingham): run it from bash, as a user would, whatever
    # started pytest (a terminal, CI, a detached job)
    done = subprocess.run(["bash", "-c", f"{shlex.quote(sys.executable)} -m skillopt_sleep --show-completion; exit $?"],
                          capture_output=True, text=True, env={**os.environ, "COLUMNS": "80"}, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "_SKILLOPT_SLEEP_COMPLETE" in done.stdout and "complete " in done.stdout


def test_completion_completes_commands():
    done = cli(_SKILLOPT_SLEEP_COMPLETE="complete_bash", COMP_WORDS="skillopt-sleep conf", COMP_CWORD="1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["config"]


# --------------------------------------------------------------------------- config validate


def test_config_validate_reports_every_problem_with_its_line_and_a_suggestion(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('# my settings\ngate_mode = "off"\nedit_budgte = 4\n\nworkers = 0\n"gate_mod" = "sideways"\n')
    done = cli("config", "validate", "--config", str(config))
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:3] == [
        f"{config}:3: key 'edit_budgte': unknown key; did you mean 'edit_budget'?",
        f"{config}:5: key 'workers': Input should be greater than or equal to 1 (got 0)",
        f"{config}:6: key 'gate_mod': unknown key; did you mean 'gate_mode'?",
    ]
    assert lines[3] == f"3 problems in {config}"
    report = json.loads(cli("config", "validate", "--config", str(config), "--json").stdout)
    assert report["valid"] is False
    assert [(p["line"], p["key"]) for p in report["problems"]] == [(3, "edit_budgte"), (5, "workers"),
                                                                    (6, "gate_mod")]


def test_config_validate_passes_a_valid_file_and_no_file(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('gate_mode = "off"\nedit_budget = 5\n')
    done = cli("config", "validate", "--config", str(config))
    assert (done.returncode, done.stdout) == (0, f"{config}: valid\n"), done.stderr
    default = cli("config", "validate")  # no config file at all: the defaults, which are valid
    assert default.returncode == 0 and "the defaults apply" in default.stdout


def test_config_validate_fails_on_a_missing_explicit_file_and_on_bad_toml(tmp_path):
    missing = cli("config", "validate", "--config", str(tmp_path / "nope.toml"))
    assert missing.returncode == 1 and "config file not found" in missing.stdout
    broken = tmp_path / "broken.toml"
    broken.write_text('gate_mode = "off"\nedit_budget = = 5\n')
    done = cli("config", "validate", "--config", str(broken))
    assert done.returncode == 1
    assert done.stdout.startswith(f"{broken}:2: invalid TOML")


@pytest.mark.parametrize("command", [["config", "show"], ["run-now", "--dry-run"], ["harvest"]])
def test_a_bad_key_points_to_config_validate_not_to_config_show(tmp_path, command):
    config = tmp_path / "config.toml"
    config.write_text("edit_budgte = 4\n")
    done = cli(*command, "--config", str(config), cwd=tmp_path)
    assert done.returncode == 1 and done.stdout == ""
    assert "did you mean 'edit_budget'?" in done.stderr
    assert "skillopt-sleep config validate --config" in done.stderr and "config show" not in done.stderr


# --------------------------------------------------------------------------- config show prints TOML


def test_config_show_prints_toml_that_reads_back_to_the_same_config(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('gate_mode = "off"\nedit_budget = 5\nsource = "gemini,aider"\ntargets = ["claude", "codex"]\n'
                      'claude_home = "/srv/claude home"\nlookback_hours = 0.5\ntarget_model = "a \\"quoted\\" name"\n'
                      'api_key = "sk-do-not-print-0123456789"\n')
    for done in (cli("config", "show", "--config", str(config)),  # the typer command
                 cli("config", "show", SKILLOPT_SLEEP_CONFIG=str(config))):  # the fast path (cli.fast)
        assert done.returncode == 0, done.stderr
        assert "sk-do-not-print" not in done.stdout
        shown = tomllib.loads(done.stdout)  # valid TOML
        assert "api_key" not in shown and "# api_key: set, not printed" in done.stdout
        echoed = tmp_path / "echoed.toml"
        echoed.write_text(done.stdout)
        expected = load_config(config).model_dump()
        expected["api_key"] = None  # the secret is not printed
        assert load_config(echoed).model_dump() == expected


# --------------------------------------------------------------------------- piped tables


def test_history_piped_keeps_the_whole_night_id_on_one_row(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    night_id = "20260501T031700Z-" + "a" * 70  # longer than a whole 80-column line
    targets = [".claude/skills/skillopt-sleep/SKILL.md", "CLAUDE.md", "AGENTS.md"]
    record = {"night_id": night_id, "status": "adopted",
              "adopted_at": datetime(2026, 5, 1, 3, 20, tzinfo=timezone.utc).isoformat(),
              "documents": [{"kind": "memory", "target": target, "file": Path(target).name, "existed_before": True,
                             "sha256_after": "0" * 64} for target in targets]}
    paths = ProjectPaths(project.resolve())
    paths.root.mkdir(parents=True)
    (paths.root / "adoptions.json").write_text(json.dumps({"adoptions": [record]}))
    done = cli("history", "--project", str(project))
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if night_id in line]
    assert len(rows) == 1, done.stdout  # the whole id, on one line
    assert "adopted" in rows[0] and ", ".join(targets) in rows[0]  # the row is not wrapped either
    assert "…" not in done.stdout
    revert_by_id = json.loads(cli("history", "--project", str(project), "--json").stdout)
    assert revert_by_id["adoptions"][0]["night_id"] == night_id


def test_history_on_a_narrow_terminal_keeps_the_night_id_whole(tmp_path, monkeypatch):
    import io

    from rich.console import Console

    from skillopt_sleep.cli import adopt_cmd, common

    project = tmp_path / "project"
    project.mkdir()
    night_id = "2026-11-27T024818Z-2"  # the shape of a night id (``night._new_night_id``)
    record = {"night_id": night_id, "status": "adopted", "adopted_at": "2026-05-01T03:20:00+00:00",
              "documents": [{"kind": "skill", "target": ".claude/skills/skillopt-sleep/SKILL.md", "file": "SKILL.md",
                             "existed_before": True, "sha256_after": "0" * 64}]}
    paths = ProjectPaths(project.resolve())
    paths.root.mkdir(parents=True)
    (paths.root / "adoptions.json").write_text(json.dumps({"adoptions": [record]}))
    screen = io.StringIO()
    monkeypatch.setattr(common, "stdout", Console(file=screen, width=45, force_terminal=True, color_system=None))
    adopt_cmd.history(project=project, json_=False)
    assert f"│ {night_id} │" in screen.getvalue()  # the other columns shrank, the id did not
