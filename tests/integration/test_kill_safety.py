"""A night killed with SIGKILL at any point leaves the user's files untouched (or fully adopted), the state
consistent, and the next night runs.

Each case runs a real ``skillopt-sleep run-now --backend mock --apply`` subprocess on a temporary project whose
Claude Code transcripts hold a correction ("no, we use pnpm in this repo, never npm") that the mock optimizer turns
into an accepted edit of CLAUDE.md, and kills it:

- at named points: a small driver wraps ``skillopt_sleep.fsio.write_text_atomic`` (every state, proposal, backup,
  adoption record and document write goes through it) and, just before or just after the write to a given path, prints
  ``PAUSED`` and sleeps; the test kills the process on that line. No hook in the product code is needed.
- after fixed delays, on the plain ``python -m skillopt_sleep`` entry point.

Then it checks: CLAUDE.md is byte-identical to before or exactly a staged proposal (never partial); the project
holds no stray file; state.json and adoptions.json parse; the next night exits 0; and reverting every adoption
adoptions.json lists brings back the original CLAUDE.md byte for byte (so nothing was adopted without a record).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from transcripts import write_claude_sessions

from skillopt_sleep.errors import SleepError
from skillopt_sleep.review.adopt import load_adoptions, revert_adoption
from skillopt_sleep.state import ProjectPaths, ProjectState

REPO = Path(__file__).resolve().parents[2]
ORIGINAL = "# Web app\n\nHand-written notes: deploy on Fridays only after review.\n"
CORRECTION = "no, we use pnpm in this repo, never npm"
CONVERSATIONS = [
    ("install the deps for this repo", "Run `npm install` to install the dependencies."),
    ("add lodash to this repo", "Run `npm install lodash`."),
    ("how do I run the tests in this repo", "Run `npm test`."),
    ("update the dependencies of this repo", "Run `npm update`."),
    ("start the dev server of this repo", "Run `npm run dev`."),
    ("remove the unused left-pad package from this repo", "Run `npm uninstall left-pad`."),
    ("build this repo for production", "Run `npm run build`."),
    ("audit this repo for vulnerable dependencies", "Run `npm audit`."),
]

DRIVER = r'''
import os, sys, time
import skillopt_sleep.fsio as fsio

when, _, needle = os.environ["PAUSE_AT"].partition(":")
real_write = fsio.write_text_atomic

def matches(path):
    return str(path) == needle[1:] if needle.startswith("=") else needle in str(path)

def pause():
    sys.stderr.write("PAUSED\n")
    sys.stderr.flush()
    time.sleep(120)

def write_text_atomic(path, text, **kwargs):
    if when == "before" and matches(path):
        pause()
    real_write(path, text, **kwargs)
    if when == "after" and matches(path):
        pause()

fsio.write_text_atomic = write_text_atomic  # before any module imports it by name
from skillopt_sleep.cli.app import main
sys.argv = ["skillopt-sleep", *sys.argv[1:]]
main()
'''


def write_transcripts(claude_home: Path, project: Path) -> None:
    """Claude Code 2.1 JSONL: one session per conversation, each request answered with npm, then corrected."""
    write_claude_sessions(claude_home, project, [(request, answer, CORRECTION) for request, answer in CONVERSATIONS],
                          fixed_answer="Sorry, I will use pnpm.")


class Setup:
    def __init__(self, base: Path):
        self.base = base
        self.project = base / "project"
        self.project.mkdir()
        (self.project / "CLAUDE.md").write_text(ORIGINAL, encoding="utf-8")
        self.claude_home = base / "claude"
        write_transcripts(self.claude_home, self.project)
        self.driver = base / "driver.py"
        self.driver.write_text(DRIVER, encoding="utf-8")
        self.env = {**os.environ, "HOME": str(base / "home"), "SKILLOPT_SLEEP_HOME": str(base / "skillopt"),
                    "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
        self.env.pop("SKILLOPT_SLEEP_TEST_PAUSE_AT", None)
        self.paths = ProjectPaths(self.project, state_root=base / "skillopt" / "state")

    @property
    def args(self) -> list[str]:
        return ["run-now", "--backend", "mock", "--apply", "--lookback-hours", "0", "--project", str(self.project),
                "--claude-home", str(self.claude_home)]

    def run(self) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "skillopt_sleep", *self.args], env=self.env, cwd=self.base,
                              capture_output=True, text=True, timeout=120)

    def claude_md(self) -> bytes:
        return (self.project / "CLAUDE.md").read_bytes()

    def staged_proposals(self) -> set[bytes]:
        return {p.read_bytes() for p in self.paths.nights.glob("*/proposed/CLAUDE.md")}


def kill_at(setup: Setup, pause_at: str) -> None:
    """Run the night through the driver, wait for PAUSED, SIGKILL it."""
    process = subprocess.Popen([sys.executable, str(setup.driver), *setup.args], cwd=setup.base,
                               env={**setup.env, "PAUSE_AT": pause_at}, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        line = process.stderr.readline()
        while line and "PAUSED" not in line:
            line = process.stderr.readline()
        assert "PAUSED" in line, (f"pause point {pause_at!r} never reached; exit {process.wait()}: "
                                  f"{process.stdout.read()}")
        process.send_signal(signal.SIGKILL)
        assert process.wait(timeout=30) == -signal.SIGKILL
    finally:
        if process.poll() is None:
            process.kill()
        process.stdout.close()
        process.stderr.close()


def kill_after(setup: Setup, delay_s: float) -> None:
    process = subprocess.Popen([sys.executable, "-m", "skillopt_sleep", *setup.args], cwd=setup.base, env=setup.env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(delay_s)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)


def assert_consistent_and_recoverable(setup: Setup) -> None:
    after_kill = setup.claude_md()
    assert after_kill == ORIGINAL.encode() or after_kill in setup.staged_proposals(), after_kill.decode()
    assert sorted(p.name for p in setup.project.iterdir()) == ["CLAUDE.md"], "stray file in the project"
    if setup.paths.state_file.exists():
        ProjectState.model_validate(json.loads(setup.paths.state_file.read_text()))
    load_adoptions(setup.paths)  # adoptions.json parses (raises SleepError otherwise)

    nxt = setup.run()
    assert nxt.returncode == 0, nxt.stdout + nxt.stderr
    assert "pnpm" in setup.claude_md().decode()  # the rule is in force after the next night
    ProjectState.model_validate(json.loads(setup.paths.state_file.read_text()))

    for _ in range(5):  # undo every adoption adoptions.json records: the original comes back exactly
        try:
            revert_adoption(setup.project, paths=setup.paths)
        except SleepError as exc:
            assert "nothing to revert" in str(exc)
            break
    assert setup.claude_md() == ORIGINAL.encode()
    assert all(a.status == "reverted" for a in load_adoptions(setup.paths))


@pytest.fixture
def setup(tmp_path) -> Setup:
    return Setup(tmp_path)


def test_an_uninterrupted_night_adopts_the_rule_and_records_it(setup):
    completed = setup.run()
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "LEARNED" in completed.stdout
    text = setup.claude_md().decode()
    assert text.startswith(ORIGINAL) and "- Use `pnpm`, never `npm`" in text
    [adoption] = load_adoptions(setup.paths)
    assert adoption.status == "adopted"


PAUSE_POINTS = [
    "before:tasks.jsonl",
    "before:CLAUDE.md.diff",
    "before:manifest.json",
    "before:/backups/",
    "before:adoptions.json",
    "before:=PROJECT/CLAUDE.md",
    "after:=PROJECT/CLAUDE.md",
    "before:diagnostics.json",
    "before:checkpoints.json",
    "before:state.json",
]


@pytest.mark.parametrize("pause_at", PAUSE_POINTS)
def test_a_night_killed_at_a_write_leaves_files_whole_and_state_consistent(setup, pause_at):
    kill_at(setup, pause_at.replace("PROJECT", str(setup.project)))
    assert_consistent_and_recoverable(setup)


@pytest.mark.parametrize("delay_s", [0.15, 0.45, 0.6])
def test_a_night_killed_after_a_delay_leaves_files_whole_and_state_consistent(setup, delay_s):
    kill_after(setup, delay_s)
    assert_consistent_and_recoverable(setup)
