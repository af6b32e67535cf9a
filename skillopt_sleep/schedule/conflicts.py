"""Two schedulers for one project run two nights a day: finding the ones already in place.

``other_schedulers(project, kind)`` is what ``install`` and ``daemon`` ask before adding ``kind`` (they refuse
without ``--force``); ``two_schedulers_warning`` is the line ``status`` shows when more than one runs the night.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from skillopt_sleep.errors import ScheduleError
from skillopt_sleep.schedule.cron import crontab_binary, find_line, read_crontab
from skillopt_sleep.schedule.daemon import running_daemon
from skillopt_sleep.schedule.systemd import unit_dir, unit_names

#: The scheduler kinds, as ``status`` names them (``scheduled_by``).
KINDS = ("systemd", "cron", "daemon")
#: The command that removes each kind.
REMOVE = {"systemd": "skillopt-sleep uninstall --systemd", "cron": "skillopt-sleep uninstall --cron",
          "daemon": "stop the daemon (Ctrl-C or kill its pid)"}


def installed_schedulers(project: Path, *, crontab_bin: str | None = None) -> list[str]:
    """The kinds (``KINDS`` order) that run the night for ``project`` (absolute): ``systemd`` when its unit pair is
    in ``systemd.unit_dir()``, ``cron`` when our crontab line is there, ``daemon`` when its daemon runs. Reads files
    and ``crontab -l`` only (no ``systemctl``); a missing or unreadable crontab counts as no line. Never raises."""
    service, timer = unit_names(project)
    found = []
    if (unit_dir() / service).exists() and (unit_dir() / timer).exists():
        found.append("systemd")
    binary = crontab_binary(crontab_bin)
    if shutil.which(binary) is not None:
        try:
            if find_line(read_crontab(binary), project):
                found.append("cron")
        except ScheduleError:
            pass
    if running_daemon(project) is not None:
        found.append("daemon")
    return found


def other_schedulers(project: Path, kind: str, *, crontab_bin: str | None = None) -> list[str]:
    """``installed_schedulers`` other than ``kind`` (re-installing the same kind replaces it: no conflict)."""
    return [found for found in installed_schedulers(project, crontab_bin=crontab_bin) if found != kind]


def conflict_message(project: Path, kind: str, others: list[str]) -> str:
    """Why adding ``kind`` beside ``others`` is refused, and how to go on (remove them, or ``--force``)."""
    return (f"{project} is already scheduled by {' and '.join(others)}; adding {kind} would run two nights a day. "
            f"Remove it first ({'; '.join(REMOVE[other] for other in others)}), or pass --force to keep both")


def two_schedulers_warning(scheduled_by: list[str]) -> str | None:
    """The ``status`` warning when more than one kind runs the night (None otherwise)."""
    if len(scheduled_by) < 2:
        return None
    return (f"scheduled by {' and '.join(scheduled_by)}: the night runs {len(scheduled_by)} times a day; keep one "
            f"({'; '.join(REMOVE[kind] for kind in scheduled_by[1:])})")
