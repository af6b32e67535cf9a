"""Shared by the tests that drive the REAL agent CLIs (``tests/integration/test_real_agent_clis*.py``,
``test_cli_local_replay.py``): where the pinned binaries are, the skip rule, and a night run through one of them.

The binaries come from ``$SKILLOPT_SLEEP_AGENT_CLIS`` (the bin directory ``.ci/install-agent-clis`` prints on its
last line); it is read at import, because the autouse ``hermetic_env`` fixture removes every ``SKILLOPT_SLEEP_*``
variable from each test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from transcripts import PNPM_CONVERSATIONS, write_claude_sessions

REPO = Path(__file__).resolve().parents[1]
BIN_ENV = "SKILLOPT_SLEEP_AGENT_CLIS"
BIN_DIR: Path | None = Path(os.environ[BIN_ENV]) if os.environ.get(BIN_ENV) else None
PLANTED_RULE = "Always answer in French, this is PLANTED-RULE-42"
#: Seconds a night without a login may take: it must stop at its first call, not after retries or timeouts.
PROMPT_STOP_S = 60.0


def skip_unless_installed(names: tuple[str, ...], what: str) -> pytest.MarkDecorator:
    """Skip (with how to install them) unless ``BIN_DIR`` holds executables ``names``; ``what``: what the tests
    would do with them, for the reason."""
    reason = None
    if BIN_DIR is None:
        reason = f"{BIN_ENV} is not set: run `export {BIN_ENV}=\"$(.ci/install-agent-clis | tail -1)\"` to {what}"
    else:
        missing = [name for name in names if not os.access(BIN_DIR / name, os.X_OK)]
        if missing:
            reason = f"{BIN_ENV}={BIN_DIR} has no executable {', '.join(missing)} (rerun .ci/install-agent-clis)"
    return pytest.mark.skipif(reason is not None, reason=reason or "")


def run_now(project: Path, claude_home: Path, backend: str, bins: Path) -> subprocess.CompletedProcess:
    """``skillopt-sleep run-now --json`` in a subprocess on ``project``'s Claude Code sessions under
    ``claude_home``, through the real ``backend`` CLI in ``bins`` (two retries, 300 s timeout)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1", "SKILLOPT_SLEEP_MAX_RETRIES": "2",
           f"SKILLOPT_SLEEP_{backend.upper()}_BIN": str(bins / backend)}
    command = [sys.executable, "-m", "skillopt_sleep", "run-now", "--scope", "project", "--lookback-hours", "0",
               "--source", "claude", "--claude-home", str(claude_home), "--project", str(project),
               "--backend", backend, "--json"]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=project, env=env)


def check_no_login_night(tmp_path: Path, backend: str, bins: Path, login_words: tuple[str, ...]) -> None:
    """A night through the real ``backend`` CLI without a login (the caller's empty HOME): it stops at its first call
    with ``backend_error`` and exit code 2, a fix naming each of ``login_words``, no gate, no replay, no retry, within
    ``PROMPT_STOP_S`` seconds: never a 0.0 -> 0.0 night."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "CLAUDE.md").write_text("# Web app\n\nHand-written notes.\n", encoding="utf-8")
    claude_home = tmp_path / "harvested-claude"
    write_claude_sessions(claude_home, project, PNPM_CONVERSATIONS)

    started = time.monotonic()
    completed = run_now(project, claude_home, backend, bins)
    elapsed = time.monotonic() - started

    assert completed.returncode == 2, completed.stdout + completed.stderr
    report = json.loads(completed.stdout)
    diagnostics = json.loads((Path(report["night_dir"]) / "diagnostics.json").read_text(encoding="utf-8"))
    assert diagnostics["status"] == report["status"] == "backend_error"
    assert diagnostics["harvest"]["sessions_harvested"] == len(PNPM_CONVERSATIONS)
    for word in login_words:
        assert word in diagnostics["failure"]["fix"]
    assert "not logged in" in diagnostics["failure"]["reason"].lower()
    assert diagnostics["gate"] is None and "0.0 -> 0.0" not in diagnostics["summary"]
    assert diagnostics["train_results"] == []
    assert all(error["attempts"] == 1 for error in diagnostics["errors"] if "attempts" in error)  # fatal: no retry
    assert elapsed < PROMPT_STOP_S
