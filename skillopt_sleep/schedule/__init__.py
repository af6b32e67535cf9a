"""Running the night every night: systemd user timer, cron line, or a foreground daemon, and ``status``.

Shared here (used by ``systemd.py``, ``cron.py``, ``daemon.py`` and ``status.py``):

* ``parse_at("03:17") -> (3, 17)``: the nightly time, local time of the machine (24 h clock).
* ``night_command()``: the absolute command that runs the CLI (the ``skillopt-sleep`` script next to
  ``sys.executable``, else ``sys.executable -m skillopt_sleep``).
* ``night_environment()``: the environment a scheduled night needs, captured at install time (PATH so that
  ``claude`` / ``codex`` are found, ``SKILLOPT_SLEEP_*``, ``CLAUDE_CONFIG_DIR``, ``CODEX_HOME``,
  ``OPENAI_BASE_URL``). API keys are never captured: a scheduled night reads them from the config file or from
  the optional environment file ``<config dir>/environment`` (systemd's ``EnvironmentFile=``).
* ``next_fire_time(hour, minute)``: the next run, computed with APScheduler's ``CronTrigger``.

Which scheduler to pick: systemd on Linux desktops and servers (a missed night runs at the next boot);
cron where there is no systemd user manager; ``skillopt-sleep daemon`` where there is neither.
"""

from __future__ import annotations

import os
import re
import sys
from datetime import datetime
from pathlib import Path

from skillopt_sleep.errors import ScheduleError
from skillopt_sleep.paths import project_key

DEFAULT_AT = "03:17"

#: Variables a scheduled night needs besides ``SKILLOPT_SLEEP_*`` (only when set at install time).
PASSED_VARIABLES = ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "OPENAI_BASE_URL")
#: ``SKILLOPT_SLEEP_*`` variables that configure the installer, not the night (never captured).
INSTALLER_VARIABLES = ("SKILLOPT_SLEEP_CRONTAB",)
_SECRET_SUFFIXES = ("_KEY", "_TOKEN", "_SECRET", "_PASSWORD")
_AT_PATTERN = re.compile(r"^(\d{1,2}):(\d{2})$")


def parse_at(at: str) -> tuple[int, int]:
    """Return ``(hour, minute)`` of ``"HH:MM"`` (24 h, local time). Raises ScheduleError for anything else."""
    match = _AT_PATTERN.match(at.strip())
    if not match or int(match.group(1)) > 23 or int(match.group(2)) > 59:
        raise ScheduleError(f"--at {at!r}: expected HH:MM on a 24-hour clock, e.g. 03:17")
    return int(match.group(1)), int(match.group(2))


def resolve_project(project: Path | None) -> Path:
    """Return the absolute project directory (default: the current directory)."""
    return Path(project or Path.cwd()).expanduser().resolve()


def schedule_key(project: Path) -> str:
    """Return the project key naming this project's units, cron tag, pid and log files (``paths.project_key``)."""
    return project_key(project)


def night_command(python: str | None = None) -> list[str]:
    """Return the absolute argv prefix that runs the CLI: ``[<bin dir>/skillopt-sleep]`` when that script exists
    next to the interpreter, else ``[<python>, "-m", "skillopt_sleep"]``.

    The interpreter path is made absolute but symlinks are kept (a virtualenv's python is a symlink).
    """
    interpreter = Path(python or sys.executable).absolute()
    script = interpreter.parent / "skillopt-sleep"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [str(interpreter), "-m", "skillopt_sleep"]


def run_now_argv(project: Path, python: str | None = None) -> list[str]:
    """Return the full argv of one scheduled night for ``project`` (absolute paths)."""
    return [*night_command(python), "run-now", "--project", str(project)]


def _is_secret(name: str) -> bool:
    return name.upper().endswith(_SECRET_SUFFIXES)


def captured_path(path: str) -> str:
    """Return ``path`` (a PATH value) with relative, missing and repeated entries dropped, order kept."""
    kept: list[str] = []
    for entry in path.split(os.pathsep):
        if entry and os.path.isabs(entry) and os.path.isdir(entry) and entry not in kept:
            kept.append(entry)
    return os.pathsep.join(kept)


def night_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    """Return the environment to write into a unit file / cron line, captured from ``environ`` (default
    ``os.environ``): ``PATH`` (cleaned by ``captured_path``), ``SKILLOPT_SLEEP_*`` except installer settings and
    anything named like a secret (``*_KEY``, ``*_TOKEN``, ``*_SECRET``, ``*_PASSWORD``), and ``CLAUDE_CONFIG_DIR``,
    ``CODEX_HOME``, ``OPENAI_BASE_URL`` when set. Keys are sorted, PATH first.
    """
    environ = os.environ if environ is None else environ
    out: dict[str, str] = {}
    path = captured_path(environ.get("PATH", ""))
    if path:
        out["PATH"] = path
    for name in sorted(environ):
        value = environ[name]
        if not value or _is_secret(name) or name in INSTALLER_VARIABLES:
            continue
        if name.startswith("SKILLOPT_SLEEP_") or name in PASSED_VARIABLES:
            out[name] = value
    return out


def next_fire_time(hour: int, minute: int, now: datetime | None = None) -> datetime:
    """Return the first local time ``hour:minute`` at or after ``now`` (aware datetime; default: now).

    Source: APScheduler 3.x ``CronTrigger(hour=, minute=).get_next_fire_time``.
    """
    from apscheduler.triggers.cron import CronTrigger
    from tzlocal import get_localzone

    zone = get_localzone()
    trigger = CronTrigger(hour=hour, minute=minute, second=0, timezone=zone)
    current = now.astimezone(zone) if now else datetime.now(zone)
    return trigger.get_next_fire_time(None, current)
