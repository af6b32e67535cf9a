"""The hermetic environment of the end-to-end tests' CLI subprocesses (``cli.run_cli``)."""

from __future__ import annotations

import os

import pytest


@pytest.fixture
def cli_env(tmp_path) -> dict[str, str]:
    """This process's environment without ``OPENAI_*`` / ``SKILLOPT_SLEEP_*``, with a temporary HOME and
    ``SKILLOPT_SLEEP_HOME``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "SKILLOPT_SLEEP_"))}
    env["HOME"] = str(tmp_path / "home")
    env["SKILLOPT_SLEEP_HOME"] = str(tmp_path / "sleep-home")
    return env
