"""A dead or misconfigured backend makes a night fail loudly, end to end through the real CLI.

Each case runs ``python -m skillopt_sleep run-now`` as a subprocess on the example transcripts
(``examples/claude-home`` and ``examples/codex-home``, ``--scope all --lookback-hours 0``) against a backend that
cannot work: a wrong API key (a 401 server on 127.0.0.1), a server that is not running (a closed port), and a
``claude`` CLI that does not exist. Every time: exit code 2, status ``backend_error`` in diagnostics.json with
``failure.reason``, ``failure.role`` and a fix, a summary that says what to fix, nothing staged, the project's
files untouched, no gate decision (a dead backend must never look like a rejected "0.0 -> 0.0" night), and the
harvest checkpoint not advanced: a second run harvests the same sessions again.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer

from skillopt_sleep.backends.base import CallMeter, ChatMessage, ChatRequest
from skillopt_sleep.backends.mock import MockBackend
from skillopt_sleep.errors import BackendError
from skillopt_sleep.models import Usage

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
WRONG_KEY = "sk-wrong-key-000000000000000000000000"
PROJECT_FILES = {"CLAUDE.md": "# Mine\n\nHand-written, keep as is.\n", "AGENTS.md": "# Agents\n\nAlso mine.\n"}


def run_now(project: Path, *args: str, env: dict[str, str] | None = None, json_output: bool = True):
    command = [sys.executable, "-m", "skillopt_sleep", "run-now", "--scope", "all", "--lookback-hours", "0",
               "--claude-home", str(EXAMPLES / "claude-home"), "--codex-home", str(EXAMPLES / "codex-home"),
               "--project", str(project), *args]
    if json_output:
        command.append("--json")
    environment = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1", "SKILLOPT_SLEEP_MAX_RETRIES": "1",
                   **(env or {})}
    return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=project, env=environment)


@pytest.fixture
def project(tmp_path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    for name, text in PROJECT_FILES.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def check_failed_loudly(project: Path, completed, *, reason_has: str, fix_has: str) -> dict:
    """The common contract of a night that died on its backend; returns the diagnostics."""
    assert completed.returncode == 2, completed.stdout + completed.stderr
    report = json.loads(completed.stdout)
    night_dir = Path(report["night_dir"])
    diagnostics = json.loads((night_dir / "diagnostics.json").read_text(encoding="utf-8"))
    assert diagnostics["status"] == report["status"] == "backend_error"
    failure = diagnostics["failure"]
    assert failure["role"] in ("miner", "target", "judge", "optimizer")
    assert reason_has in failure["reason"]
    assert fix_has in failure["fix"]
    assert (diagnostics["summary"].startswith("nothing changed: FAILED: backend error")
            and failure["fix"] in diagnostics["summary"])
    # never a rejection in disguise
    assert diagnostics["gate"] is None
    assert "0.0 -> 0.0" not in diagnostics["summary"] and "reject" not in diagnostics["summary"].lower()
    # nothing staged, nothing written to the project
    assert not (night_dir / "proposed").exists() and diagnostics["proposed"] == [] and diagnostics["applied"] == []
    assert {p.name: p.read_text(encoding="utf-8") for p in project.iterdir()} == PROJECT_FILES
    assert diagnostics["harvest"]["sessions_harvested"] > 0
    return diagnostics


def check_the_next_run_harvests_the_same_sessions(project: Path, first: dict, *args: str, env: dict[str, str]) -> None:
    """Run again (same arguments) in the terminal format: it says FAILED and reads the same sessions."""
    again = run_now(project, *args, env=env, json_output=False)
    assert again.returncode == 2
    assert "FAILED: backend error" in again.stdout and "fix:" in again.stdout
    path = next(line.split("diagnostics: ", 1)[1] for line in again.stdout.splitlines()
                if line.startswith("diagnostics: "))
    second = json.loads(Path(path.strip()).read_text(encoding="utf-8"))
    assert second["night_id"] != first["night_id"]
    assert second["harvest"]["sessions_harvested"] == first["harvest"]["sessions_harvested"]
    assert second["harvest"]["requests"] == first["harvest"]["requests"]


def test_a_wrong_api_key_stops_the_night_with_exit_2_and_says_to_check_the_key(project):
    server = HTTPServer(host="127.0.0.1", port=0)
    server.expect_request("/v1/chat/completions").respond_with_json(
        {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error",
                   "code": "invalid_api_key"}}, status=401)
    server.start()
    try:
        env = {"OPENAI_BASE_URL": server.url_for("/v1"), "OPENAI_API_KEY": WRONG_KEY}
        completed = run_now(project, "--backend", "openai", env=env)
        diagnostics = check_failed_loudly(project, completed, reason_has="401", fix_has="API key")
        assert WRONG_KEY not in completed.stdout + completed.stderr
        assert WRONG_KEY not in json.dumps(diagnostics)
        # fatal: never retried; the night stops at its first refused call (and the replays already in flight)
        assert sum(cost["calls"] for cost in diagnostics["cost"].values()) <= 4  # workers
        assert all(error["attempts"] == 1 for error in diagnostics["errors"] if "attempts" in error)
        assert sum(cost["calls"] for cost in diagnostics["cost"].values()) < 1 + diagnostics["tasks"]["total"]
        check_the_next_run_harvests_the_same_sessions(project, diagnostics, "--backend", "openai", env=env)
    finally:
        server.clear()
        if server.is_running():
            server.stop()


def test_an_unreachable_server_stops_the_night_with_exit_2_instead_of_scoring_empty_answers(project):
    env = {"OPENAI_BASE_URL": f"http://127.0.0.1:{closed_port()}/v1", "OPENAI_API_KEY": WRONG_KEY}
    completed = run_now(project, "--backend", "openai", env=env)
    diagnostics = check_failed_loudly(project, completed, reason_has="connection", fix_has="reachable")
    assert "base_url" in diagnostics["failure"]["reason"]
    assert diagnostics["train_results"] == []  # no replay was scored as a 0
    assert diagnostics["baseline"] is None or diagnostics["baseline"]["n"] == 0
    check_the_next_run_harvests_the_same_sessions(project, diagnostics, "--backend", "openai", env=env)


def test_a_missing_claude_cli_stops_the_night_with_exit_2_and_says_to_install_it_or_set_claude_bin(project, tmp_path):
    missing = tmp_path / "nowhere" / "claude"
    env = {"SKILLOPT_SLEEP_CLAUDE_BIN": str(missing)}
    completed = run_now(project, "--backend", "claude", env=env)
    diagnostics = check_failed_loudly(project, completed, reason_has=str(missing), fix_has="claude_bin")
    check_the_next_run_harvests_the_same_sessions(project, diagnostics, "--backend", "claude", env=env)


# --------------------------------------------------------------------------- the meter's dead-backend stop


class SilentBackend(MockBackend):
    """Every call fails after its retries; ``tokens`` says whether the failed reply still used tokens."""

    def __init__(self, tokens: int):
        super().__init__()
        self.tokens = tokens

    def chat(self, request):
        result = super().chat(request)
        result.text, result.error, result.error_kind = "", "connection refused", "transient"
        result.usage = Usage(prompt_tokens=self.tokens)
        return result


def target_request() -> ChatRequest:
    return ChatRequest(role="target", messages=[ChatMessage(role="user", content="install the deps")])


def test_three_calls_in_a_row_without_any_reply_stop_even_callers_that_tolerate_errors():
    meter = CallMeter(SilentBackend(tokens=0))
    for _ in range(2):
        assert not meter.chat(target_request(), fail_on_error=False).ok  # a failed replay, counted by the caller
    with pytest.raises(BackendError) as raised:
        meter.chat(target_request(), fail_on_error=False)
    assert raised.value.fatal and raised.value.kind == "repeated_failures"
    assert "3 calls in a row" in str(raised.value) and "connection refused" in str(raised.value)


def test_failed_calls_that_used_tokens_are_the_models_failure_and_do_not_stop_the_night():
    meter = CallMeter(SilentBackend(tokens=12))
    for _ in range(5):
        assert not meter.chat(target_request(), fail_on_error=False).ok
    assert meter.calls == 5


def test_one_answered_call_ends_the_streak():
    backend = SilentBackend(tokens=0)
    meter = CallMeter(backend)
    for _ in range(2):
        meter.chat(target_request(), fail_on_error=False)
    healthy = CallMeter(MockBackend())
    meter.backend = healthy.backend  # the backend comes back
    assert meter.chat(target_request()).ok
    meter.backend = backend
    for _ in range(2):
        assert not meter.chat(target_request(), fail_on_error=False).ok
    assert meter.calls == 5
