"""Run the real ``skillopt-sleep`` CLI in a subprocess, for the end-to-end tests (``tests/`` is on ``sys.path``
through ``tests/conftest.py``; the hermetic ``cli_env`` fixture is in ``tests/e2e/conftest.py``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"


def run_cli(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    """``python -m skillopt_sleep ARGS`` with ``env`` in ``cwd``; output captured as text; 240 s timeout."""
    return subprocess.run([sys.executable, "-m", "skillopt_sleep", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=240)
