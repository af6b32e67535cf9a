"""End to end: the real ``skillopt-sleep`` CLI, in a subprocess, on the bundled real transcripts.

The backend is the mock simulator (fast and deterministic); the harvest, mining, replay, reflection, edits, gate
and diagnostics are the real code. The expected counts come from reading the transcripts themselves
(see tests/fixtures/transcripts/PROVENANCE.md):

* 7 Claude Code files + 3 Codex rollouts = 10 files.
* skipped: the 2.1.152 ``sdk-cli`` session (headless ``claude -p``), the Codex 0.135 ``codex_exec`` rollout
  (headless), and two files with no human request at all (daaain: only tool results and a sidechain; the
  vr-forest excerpt: tool results and a compaction summary) -> 6 sessions harvested.
* requests: beddc0be 3 (``/erk:plan-implement``, "restacked onto it, restart plan", "implement it here"),
  998201d9 1, 1af7fc5e 1 (``/init``), 5c0375b4 1 (``/orchestrator ...``), Codex 0.58 1, Codex 0.77 1 -> 8.
"""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from cli_subprocess import EXAMPLES, run_cli


@pytest.fixture
def cli_env(cli_env):
    """The e2e environment (``tests/e2e/conftest.py``) with the mock simulator as the backend."""
    return {**cli_env, "SKILLOPT_SLEEP_BACKEND": "mock"}


def night_args(*extra: str) -> list[str]:
    return ["run-now", "--claude-home", str(EXAMPLES / "claude-home"), "--codex-home", str(EXAMPLES / "codex-home"),
            "--scope", "all", "--lookback-hours", "0", *extra]


def test_run_now_on_the_bundled_transcripts_writes_diagnostics_that_match_them(tmp_path, cli_env):
    project = tmp_path / "project"
    project.mkdir()
    done = run_cli(*night_args("--json"), env=cli_env, cwd=project)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    night_dir = Path(out["night_dir"])
    diagnostics = json.loads((night_dir / "diagnostics.json").read_text())

    # what was read
    assert diagnostics["format"] == "skillopt-sleep-diagnostics/1"
    assert diagnostics["night_id"] == night_dir.name
    assert diagnostics["project"] == str(project.resolve())
    assert diagnostics["sources"] == ["claude", "codex"]
    harvest = diagnostics["harvest"]
    assert harvest["files_scanned"] == 10
    assert harvest["sessions_harvested"] == 6
    assert harvest["sessions_skipped"] == {"sdk_cli": 1, "headless": 1, "no_requests": 2}
    assert harvest["requests"] == 8
    assert harvest["malformed_lines"] == {}

    # the tasks mined, their splits, and the file that holds them (private: transcript text)
    tasks = [json.loads(line) for line in (night_dir / "tasks.jsonl").read_text().splitlines()]
    assert diagnostics["tasks"]["total"] == len(tasks) >= 5
    for split in ("train", "val", "test"):
        assert diagnostics["tasks"][split] == sum(1 for t in tasks if t["split"] == split and t["replayable"])
    assert stat.S_IMODE((night_dir / "tasks.jsonl").stat().st_mode) == 0o600
    assert stat.S_IMODE((night_dir / "diagnostics.json").stat().st_mode) == 0o600
    requests = " | ".join(t["request"] for t in tasks)
    assert "/erk:plan-implement" in requests and "lmstudio" in requests  # a command replays its expansion
    assert "This session is being continued" not in requests  # a compaction summary is not a request
    # real histories are mostly not replayable as text: plan implementations, /init and the lmstudio work (answers
    # that read the repository first) are kept as evidence with their reason, never replayed; the user's "implement
    # it here" is a reaction, not a task
    mining = diagnostics["mining"]
    assert mining["not_replayable"] == {"needs_repo_state": 5}
    assert diagnostics["tasks"]["not_replayable"] == 5 and mining["replayable"] == 1
    assert mining["dropped"]["folded_reaction"] == 2
    assert "implement it here" not in [t["request"] for t in tasks]
    assert {t["not_replayable"] for t in tasks if not t["replayable"]} == {"needs_repo_state"}

    # the backend and what it cost, consistent with the replays recorded: only replayable tasks were replayed
    assert diagnostics["backend"]["name"] == "mock"
    assert diagnostics["backend"]["models"]["target"] == "mock-target"
    replayed_ids = {t["id"] for t in tasks if t["split"] == "train" and t["replayable"]}
    assert {r["task_id"] for r in diagnostics["train_results"]} == replayed_ids
    gate = diagnostics["gate"]
    replays = (len(diagnostics["train_results"])
               + sum(len(row["baseline"]) + len(row["candidate"]) for row in gate["per_task"]))
    assert diagnostics["cost"]["target"]["calls"] == replays
    # no rule was stated and no task carries a validated check: there is nothing the gate could test
    assert mining["rules"] == [] and mining["hard_evidence"] == 0 and gate["per_task"] == []

    # the decision, explained and consistent
    assert gate["mode"] == "on" and gate["verdict"] == "reject" and gate["reason"]
    assert diagnostics["status"] == "rejected"
    # the morning line leads with the user's files: nothing changed, and why; then the status and its numbers
    assert diagnostics["summary"].startswith("nothing changed: no rule was proposed: the 1 replayed request gave "
                                             "nothing to learn (5 more kept as evidence only). KEPT")
    # every managed file of both agents read tonight, each unchanged
    assert [(c["file"], c["kind"], c["state"], c["added"]) for c in diagnostics["changes"]] == [
        (".claude/skills/skillopt-sleep/SKILL.md", "skill", "unchanged", []),
        ("CLAUDE.md", "memory", "unchanged", []), ("AGENTS.md", "memory:codex", "unchanged", [])]
    for edit in diagnostics["edits"]:
        assert edit["status"] in ("applied", "unmatched", "rejected")
        assert edit["status"] == "applied" or edit["reason"]
    assert not (night_dir / "proposed").exists() and diagnostics["proposed"] == []
    assert not (project / "CLAUDE.md").exists()  # proposing never writes the project

    for stage in ("harvest", "mine", "rollout", "reflect", "gate"):
        assert stage in diagnostics["stage_seconds"]
    assert diagnostics["config"]["backend"] == "mock"
    assert diagnostics["versions"]["skillopt-sleep"]


def test_a_second_night_reads_nothing_new_and_says_so(tmp_path, cli_env):
    project = tmp_path / "project"
    project.mkdir()
    assert run_cli(*night_args(), env=cli_env, cwd=project).returncode == 0
    second = run_cli(*night_args("--json"), env=cli_env, cwd=project)
    assert second.returncode == 0, second.stderr
    diagnostics = json.loads(second.stdout)
    assert diagnostics["status"] == "no_sessions"
    assert diagnostics["harvest"]["files_unchanged"] == 10
    assert diagnostics["harvest"]["bytes_read"] == 0
    assert "nothing to learn" in diagnostics["summary"]


def test_dry_run_calls_no_model_and_does_not_advance_the_checkpoint(tmp_path, cli_env):
    project = tmp_path / "project"
    project.mkdir()
    dry = run_cli(*night_args("--dry-run", "--json"), env=cli_env, cwd=project)
    assert dry.returncode == 0, dry.stderr
    diagnostics = json.loads(dry.stdout)
    assert diagnostics["status"] == "dry_run" and diagnostics["cost"] == {}
    real = json.loads(run_cli(*night_args("--json"), env=cli_env, cwd=project).stdout)
    assert real["harvest"]["sessions_harvested"] == 6  # the dry run left the checkpoint where it was


def test_harvest_command_previews_sessions_and_tasks_without_advancing_the_checkpoint(tmp_path, cli_env):
    project = tmp_path / "project"
    project.mkdir()
    args = ["harvest", "--claude-home", str(EXAMPLES / "claude-home"), "--codex-home", str(EXAMPLES / "codex-home"),
            "--scope", "all", "--lookback-hours", "0"]
    output = tmp_path / "tasks.jsonl"
    first = run_cli(*args, "--json", "--output", str(output), env=cli_env, cwd=project)
    assert first.returncode == 0, first.stderr
    preview = json.loads(first.stdout)
    assert preview["harvest"]["sessions_harvested"] == 6
    assert len(preview["sessions"]) == 6
    assert len(output.read_text().splitlines()) == len(preview["tasks"])
    assert stat.S_IMODE(output.stat().st_mode) == 0o600
    again = json.loads(run_cli(*args, "--json", env=cli_env, cwd=project).stdout)
    assert again["harvest"]["sessions_harvested"] == 6


def test_a_project_scope_keeps_only_sessions_under_the_project(tmp_path, cli_env):
    claude_home = tmp_path / "claude"
    shutil.copytree(EXAMPLES / "claude-home", claude_home)
    project = Path("/home/runner/work/erk/erk")  # the cwd recorded in the 2.0.67 session
    done = run_cli("harvest", "--claude-home", str(claude_home), "--codex-home", str(tmp_path / "none"),
                   "--project", str(project), "--source", "claude", "--lookback-hours", "0", "--json",
                   env=cli_env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    preview = json.loads(done.stdout)
    assert [s["session_id"][:8] for s in preview["sessions"]] == ["998201d9"]
    assert preview["harvest"]["sessions_skipped"].get("out_of_scope", 0) >= 4


def test_the_console_script_is_installed_and_prints_its_version(cli_env, tmp_path):
    script = shutil.which("skillopt-sleep", path=str(Path(sys.executable).parent))
    if script is None:
        pytest.skip("skillopt-sleep console script not installed beside this interpreter (pip install -e .)")
    done = subprocess.run([script, "--version"], capture_output=True, text=True, env=cli_env, timeout=60)
    assert done.returncode == 0
    from skillopt_sleep import __version__

    assert done.stdout.strip() == f"skillopt-sleep {__version__}"
