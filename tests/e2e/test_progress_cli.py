"""End to end: the progress display of ``run-now`` and ``train`` appears on stderr when it is a terminal (a
pseudo-terminal here), and nowhere else: not on a pipe (cron, systemd, the daemon, a log file), not with ``-q``, and
never in the ``--json`` output. The backend is the mock simulator; the nights read the bundled real transcripts."""

from __future__ import annotations

import json
import re

import pytest
from cli_subprocess import EXAMPLES, run_cli, run_cli_tty
from transcripts import PNPM_CONVERSATIONS, write_claude_sessions

#: What only the progress display writes.
PROGRESS_MARKS = ("LLM call", "elapsed", "in all", "✓")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.fixture
def cli_env(cli_env):
    return {**cli_env, "SKILLOPT_SLEEP_BACKEND": "mock"}


@pytest.fixture
def project(tmp_path):
    path = tmp_path / "project"
    path.mkdir()
    return path


def night_args(*extra: str) -> list[str]:
    return ["run-now", "--claude-home", str(EXAMPLES / "claude-home"), "--codex-home", str(EXAMPLES / "codex-home"),
            "--scope", "all", "--lookback-hours", "0", *extra]


def plain(terminal: str) -> str:
    return ANSI.sub("", terminal)


def shows_progress(text: str) -> bool:
    return any(mark in text for mark in PROGRESS_MARKS)


def test_run_now_on_a_terminal_shows_the_stages_and_the_llm_calls(project, cli_env):
    code, out, terminal = run_cli_tty(*night_args(), env=cli_env, cwd=project)
    assert code == 0, terminal
    shown = plain(terminal)
    for stage in ("harvest", "mine", "memory", "rollout", "reflect", "gate"):
        assert re.search(rf"✓ {stage} \(\d+\.\d s", shown), (stage, shown)
    diagnostics = json.loads(next((project.parent / "sleep-home").rglob("diagnostics.json")).read_text())
    calls = sum(cost["calls"] for cost in diagnostics["cost"].values())
    assert calls > 0
    assert re.search(rf"LLM calls {calls}/~\d+", shown), shown  # done / planned (an estimate)
    assert f"{calls} LLM calls, " in shown and "tokens" in shown and "in all" in shown
    assert "rollout" in shown and re.search(r"rollout \(\d+\.\d s, \d+ LLM calls?\)", shown)
    assert "diagnostics:" in out and not shows_progress(out)  # stdout holds the summary only


def test_run_now_with_stderr_on_a_pipe_shows_no_progress(project, cli_env):
    done = run_cli(*night_args(), env=cli_env, cwd=project)
    assert done.returncode == 0, done.stderr
    assert not shows_progress(done.stderr), done.stderr
    assert done.stderr == ""
    assert "diagnostics:" in done.stdout


def test_run_now_quiet_on_a_terminal_shows_nothing(project, cli_env):
    code, out, terminal = run_cli_tty(*night_args("-q"), env=cli_env, cwd=project)
    assert code == 0, terminal
    assert plain(terminal).strip() == ""
    assert "diagnostics:" in out


def test_run_now_verbose_on_a_terminal_logs_instead_of_the_live_line(project, cli_env):
    code, out, terminal = run_cli_tty("-v", *night_args(), env=cli_env, cwd=project)
    assert code == 0, terminal
    shown = plain(terminal)
    assert "stage harvest done" in shown and not shows_progress(shown)


def test_run_now_json_on_a_terminal_keeps_stdout_pure_json(project, cli_env):
    code, out, terminal = run_cli_tty(*night_args("--json"), env=cli_env, cwd=project)
    assert code == 0, terminal
    data = json.loads(out)  # nothing but the JSON document
    assert data["status"] in ("accepted", "rejected")
    assert not shows_progress(plain(terminal)), terminal


@pytest.fixture
def tasks_file(tmp_path, cli_env):
    output = tmp_path / "tasks.jsonl"
    project = tmp_path / "train-project"
    project.mkdir()
    write_claude_sessions(tmp_path / "claude", project, PNPM_CONVERSATIONS)
    done = run_cli("harvest", "--claude-home", str(tmp_path / "claude"), "--scope", "all", "--lookback-hours", "0",
                   "--output", str(output), env=cli_env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return output


def test_train_on_a_terminal_shows_steps_and_calls_and_nothing_on_a_pipe_or_with_q(tmp_path, cli_env, tasks_file):
    args = ["train", "--tasks", str(tasks_file), "--backend", "mock", "--epochs", "2"]
    code, out, terminal = run_cli_tty(*args, "--out", str(tmp_path / "tty"), env=cli_env, cwd=tmp_path)
    assert code == 0, terminal
    shown = plain(terminal)
    assert re.search(r"step 1/2: \w+ \(edit budget \d+", shown) and re.search(r"step 2/2: \w+", shown), shown
    assert re.search(r"\d+ LLM calls, [\d.]+k? tokens, \d+:\d\d in all", shown), shown
    assert "training summary" in out and not shows_progress(out)

    piped = run_cli(*args, "--out", str(tmp_path / "piped"), env=cli_env, cwd=tmp_path)
    assert piped.returncode == 0, piped.stderr
    assert not shows_progress(piped.stderr) and "step 1/2" not in piped.stderr, piped.stderr

    code, out, terminal = run_cli_tty(*args, "-q", "--json", "--out", str(tmp_path / "quiet"), env=cli_env,
                                      cwd=tmp_path)
    assert code == 0, terminal
    assert plain(terminal).strip() == ""
    assert json.loads(out)["steps_completed"] == 2


def test_run_now_on_a_terminal_reads_in_forkserver_workers_what_one_loop_reads(tmp_path, cli_env):
    """The progress display runs a thread, so the harvest's workers (forced to 2 here) are started by a forkserver,
    whose workers import ``python -m skillopt_sleep``'s ``__main__`` again: the night reads what one loop reads,
    and no worker fails (a failed one would print its traceback on the terminal)."""
    nights = {}
    for name, workers in (("forkserver", "2"), ("one loop", "1")):
        project = tmp_path / name / "project"
        project.mkdir(parents=True)
        env = {**cli_env, "SKILLOPT_SLEEP_HARVEST_WORKERS": workers,
               "SKILLOPT_SLEEP_HOME": str(tmp_path / name / "sleep-home")}
        code, out, terminal = run_cli_tty(*night_args(), env=env, cwd=project)
        assert code == 0, terminal
        assert "Traceback" not in terminal and "Error" not in terminal, terminal
        diagnostics = json.loads(next((tmp_path / name / "sleep-home").rglob("diagnostics.json")).read_text())
        nights[name] = (diagnostics["harvest"], diagnostics["harvest_per_source"], diagnostics["tasks"],
                        diagnostics["mining"])
    assert nights["forkserver"][0]["sessions_harvested"] > 1
    assert nights["forkserver"] == nights["one loop"]
