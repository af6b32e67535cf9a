"""The project lock: one night, adopt, revert or forget at a time per project (``<state dir>/night.lock``).

A ``filelock.FileLock`` taken without waiting: the second process is refused with ``LockedError`` (exit code 4)
instead of queueing behind a night that may run for an hour.
"""

from __future__ import annotations

from filelock import FileLock, Timeout

from skillopt_sleep.errors import LockedError
from skillopt_sleep.paths import ProjectPaths


def take_project_lock(paths: ProjectPaths, busy: str) -> FileLock:
    """Acquire the project's lock (creating the state dir 0700) and return it; the caller releases it.

    busy: what is running, for the error (``"another night is running for /p"``). Raises LockedError when
    another process holds the lock."""
    paths.root.mkdir(parents=True, exist_ok=True, mode=0o700)
    lock = FileLock(str(paths.lock), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise LockedError(f"{busy} (lock {paths.lock})", fix="try again when it has finished") from None
    return lock
