"""End to end: ``skillopt-sleep harvest --output`` on Claude Code sessions, then ``skillopt-sleep train`` on that
task file, through the real CLI in subprocesses, with the mock simulator as the backend.

The sessions are the eight pnpm-corrected conversations of ``tests/transcripts.py`` (the bundled real transcripts
hold one replayable task only: see tests/e2e/test_run_now_cli.py); they mine into train, val and test tasks, so with
the default batch size (8) an epoch is one step.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_subprocess import run_cli
from transcripts import PNPM_CONVERSATIONS, write_claude_sessions


@pytest.fixture
def tasks_file(tmp_path, cli_env) -> Path:
    output = tmp_path / "tasks.jsonl"
    project = tmp_path / "project"
    project.mkdir()
    write_claude_sessions(tmp_path / "claude", project, PNPM_CONVERSATIONS)
    done = run_cli("harvest", "--claude-home", str(tmp_path / "claude"), "--scope", "all", "--lookback-hours", "0",
                   "--output", str(output), env=cli_env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return output


def split_counts(path: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for line in path.read_text().splitlines():
        split = json.loads(line)["split"]
        counts[split] = counts.get(split, 0) + 1
    return counts


def test_train_on_the_harvested_bundled_transcripts_writes_a_complete_run(tmp_path, cli_env, tasks_file):
    counts = split_counts(tasks_file)
    assert counts.get("train", 0) >= 1 and counts.get("val", 0) >= 1
    out = tmp_path / "run"
    done = run_cli("train", "--tasks", str(tasks_file), "--backend", "mock", "--epochs", "2", "--out", str(out),
                   "--json", env=cli_env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["out_root"] == str(out) and summary["resumed"] is False
    steps = -(-counts["train"] // 8) * 2  # ceil(train / batch 8) per epoch, 2 epochs
    assert summary["steps_total"] == summary["steps_completed"] == steps
    assert summary["selection"]["split"] == "val" and summary["selection"]["baseline"]["n"] == counts["val"]
    assert (summary["test"] is None) == (counts.get("test", 0) == 0)
    history = json.loads((out / "history.json").read_text())["steps"]
    assert [step["step"] for step in history] == list(range(1, steps + 1))
    for name in ("config.json", "best_skill.md", "current_skill.md", "summary.json", "trainer_state.json",
                 "skills/skill_v0000.md", "steps/step_0001/selection.json", "steps/step_0001/step.json"):
        assert (out / name).is_file(), name
    config = json.loads((out / "config.json").read_text())
    assert config["clients"]["target"] == {"backend": "mock", "model": "mock-target"}
    assert config["config"]["num_epochs"] == 2
    # the progress display shows only on a terminal (tests/e2e/test_progress_cli.py): nothing on this pipe
    for stage in ("rollout", "reflect", "aggregate", "select", "update", "gate"):
        assert stage not in done.stderr


def test_running_train_again_on_the_same_out_resumes_and_adds_nothing(tmp_path, cli_env, tasks_file):
    out = tmp_path / "run"
    first = run_cli("train", "--tasks", str(tasks_file), "--backend", "mock", "--out", str(out), "--json",
                    env=cli_env, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    history = (out / "history.json").read_text()
    again = run_cli("train", "--tasks", str(tasks_file), "--backend", "mock", "--out", str(out), "--json",
                    env=cli_env, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    first_summary, again_summary = json.loads(first.stdout), json.loads(again.stdout)
    assert again_summary.pop("resumed") is True and first_summary.pop("resumed") is False
    assert again_summary == first_summary
    assert (out / "history.json").read_text() == history
    assert "resuming the run" in again.stderr


def test_train_prints_a_final_table_without_json(tmp_path, cli_env, tasks_file):
    done = run_cli("train", "--tasks", str(tasks_file), "--backend", "mock", "--out", str(tmp_path / "run"),
                   env=cli_env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "training summary" in done.stdout and "selection (val) gate score" in done.stdout
    assert f"best skill: {tmp_path / 'run' / 'best_skill.md'}" in done.stdout


def test_train_skips_malformed_task_lines_and_says_how_many(tmp_path, cli_env, tasks_file):
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_text(tasks_file.read_text() + "{truncated\n[]\n", encoding="utf-8")
    done = run_cli("train", "--tasks", str(damaged), "--backend", "mock", "--out", str(tmp_path / "run"), "--json",
                   env=cli_env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "skipped malformed task lines: bad_json 1, not_an_object 1" in done.stderr


def test_train_on_a_missing_task_file_fails_with_one_clear_line(tmp_path, cli_env):
    done = run_cli("train", "--tasks", str(tmp_path / "nope.jsonl"), "--backend", "mock", env=cli_env, cwd=tmp_path)
    assert done.returncode == 1
    assert "cannot read the task file" in done.stderr and "harvest --output" in done.stderr
    assert "Traceback" not in done.stderr
