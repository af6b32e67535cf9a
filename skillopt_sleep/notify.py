"""An optional desktop notification after a night that wrote or staged a change (``notify = true``).

Uses ``notify-send`` (libnotify, Linux desktops) where it is on PATH; where it is not, or it fails (no session
bus under cron), nothing happens: a notification is a courtesy, never a reason for a night to fail.
"""

from __future__ import annotations

import logging
import shutil
import subprocess

logger = logging.getLogger("skillopt_sleep.notify")

#: Seconds ``notify-send`` may take before it is abandoned.
NOTIFY_TIMEOUT_S = 5.0


def notify(title: str, body: str) -> bool:
    """Show ``title`` / ``body`` with ``notify-send``. Returns True when it ran and exited 0; False when it is not
    installed, failed or timed out (logged at debug level, never raised)."""
    binary = shutil.which("notify-send")
    if binary is None:
        return False
    try:
        done = subprocess.run([binary, "--app-name=skillopt-sleep", title, body], capture_output=True,
                              timeout=NOTIFY_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        logger.debug("notify-send failed: %s", exc)
        return False
    return done.returncode == 0
