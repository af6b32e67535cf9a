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


def run_cli_tty(*args: str, env: dict[str, str], cwd: Path, columns: int = 120) -> tuple[int, str, str]:
    """``python -m skillopt_sleep ARGS`` with stderr on a pseudo-terminal (as in an interactive shell) and stdout on a
    pipe; returns (exit code, stdout, what the terminal received). 240 s timeout."""
    import fcntl
    import os
    import pty
    import struct
    import termios
    import threading

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    env = {**env, "TERM": "xterm-256color", "COLUMNS": str(columns)}
    env.pop("NO_COLOR", None)
    received: list[bytes] = []

    def read() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every copy of the slave side is closed
                return
            if not data:
                return
            received.append(data)

    try:
        process = subprocess.Popen([sys.executable, "-m", "skillopt_sleep", *args], stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=slave, env=env, cwd=cwd)
    finally:
        os.close(slave)
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        out, _ = process.communicate(timeout=240)
    finally:
        reader.join(timeout=10)
        os.close(master)
    return process.returncode, out.decode(), b"".join(received).decode(errors="replace")
