"""systemd user timer: one ``.service`` + ``.timer`` pair per project, rendered from the packaged templates.

Units: ``skillopt-sleep-<project key>.service`` (oneshot: ``skillopt-sleep run-now --project P``) and
``skillopt-sleep-<project key>.timer`` (``OnCalendar=*-*-* HH:MM:00``, ``Persistent=true``,
``RandomizedDelaySec``), written into ``$XDG_CONFIG_HOME/systemd/user/`` (default ``~/.config/systemd/user/``).
One concrete pair per project rather than a template unit ``skillopt-sleep@.service``: each project keeps its own
time and environment, and the instance name needs no ``systemd-escape`` of the project path.

Templates: the canonical copies are package data (``skillopt_sleep/schedule/templates/``); the top-level
``systemd/`` folder of the repository holds identical files for readers (a test keeps them equal).
Placeholders use ``string.Template`` syntax; the templates hold no other ``$``.

No API key is ever written into a unit: keys come from the config file or from the optional
``EnvironmentFile=-<config dir>/environment`` (``NAME=value`` lines, mode 0600).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from string import Template

from skillopt_sleep.errors import ScheduleError
from skillopt_sleep.fsio import write_text_atomic
from skillopt_sleep.paths import config_dir
from skillopt_sleep.schedule import night_environment, parse_at, run_now_argv, schedule_key

TEMPLATE_NAMES = ("skillopt-sleep.service", "skillopt-sleep.timer")
DEFAULT_RANDOMIZED_DELAY_S = 600
_ON_CALENDAR_PATTERN = re.compile(r"^\*-\*-\* (\d{2}):(\d{2}):00$")


@dataclass
class SystemdResult:
    """What ``install_systemd`` / ``uninstall_systemd`` did.

    files: unit files written (install) or removed (uninstall); commands: the ``systemctl --user`` argv lists,
    run when ``ran`` is true, otherwise for the user to run (``reason`` says why they were not run).
    """

    action: str
    unit_dir: Path
    files: list[Path] = field(default_factory=list)
    commands: list[list[str]] = field(default_factory=list)
    ran: bool = False
    reason: str = ""

    def to_json(self) -> dict:
        return {"action": self.action, "unit_dir": str(self.unit_dir), "files": [str(f) for f in self.files],
                "commands": self.commands, "ran": self.ran, "reason": self.reason}


def template_text(name: str) -> str:
    """Return the packaged template ``name`` (one of TEMPLATE_NAMES)."""
    return resources.files("skillopt_sleep.schedule").joinpath("templates", name).read_text("utf-8")


def unit_dir(environ: dict[str, str] | None = None) -> Path:
    """Return the user unit dir: ``$XDG_CONFIG_HOME/systemd/user`` (a relative XDG_CONFIG_HOME is ignored)."""
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_CONFIG_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".config"
    return root / "systemd" / "user"


def unit_names(project: Path) -> tuple[str, str]:
    """Return ``(service name, timer name)`` of ``project``."""
    stem = f"skillopt-sleep-{schedule_key(project)}"
    return f"{stem}.service", f"{stem}.timer"


def _check_line(value: str, what: str) -> str:
    if "\n" in value or "\r" in value:
        raise ScheduleError(f"{what} contains a line break and cannot go into a systemd unit: {value!r}")
    return value


def quote_exec_argument(argument: str) -> str:
    """Quote one ``ExecStart=`` word: double quotes, C-style ``\\\\`` and ``\\"``, ``%%`` (specifiers), ``$$``
    (no variable expansion). Raises ScheduleError for a line break."""
    _check_line(argument, "an ExecStart argument")
    escaped = (argument.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$"))
    return f'"{escaped}"'


def environment_line(name: str, value: str) -> str:
    """Return one ``Environment="NAME=value"`` line (``\\\\``, ``\\"`` and ``%%`` escaped)."""
    _check_line(value, f"environment variable {name}")
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    return f'Environment="{name}={escaped}"'


def on_calendar(hour: int, minute: int) -> str:
    """Return the ``OnCalendar=`` value of a daily run at ``hour:minute`` local time."""
    return f"*-*-* {hour:02d}:{minute:02d}:00"


def parse_on_calendar(value: str) -> tuple[int, int] | None:
    """Return ``(hour, minute)`` of an ``OnCalendar=`` value written by ``on_calendar``; None for anything else."""
    match = _ON_CALENDAR_PATTERN.match(value.strip())
    return (int(match.group(1)), int(match.group(2))) if match else None


def read_on_calendar(timer_file: Path) -> str | None:
    """Return the ``OnCalendar=`` value of an installed timer file, or None when absent/unreadable."""
    try:
        text = Path(timer_file).read_text("utf-8")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("OnCalendar="):
            return line.split("=", 1)[1].strip()
    return None


def _delay_text(seconds: int) -> str:
    return f"{seconds // 60}min" if seconds % 60 == 0 else f"{seconds}s"


def render_units(project: Path, at: str, *, argv: list[str] | None = None, environment: dict[str, str] | None = None,
                 randomized_delay_s: int = DEFAULT_RANDOMIZED_DELAY_S) -> dict[str, str]:
    """Return ``{unit file name: text}`` of the service and timer for ``project`` at ``at`` ("HH:MM").

    argv: the night's command (default ``run_now_argv(project)``, absolute); environment: variables to set
    (default ``night_environment()``). Raises ScheduleError for a bad ``at`` or a value with a line break.
    """
    hour, minute = parse_at(at)
    argv = argv or run_now_argv(project)
    if not os.path.isabs(argv[0]):
        raise ScheduleError(f"ExecStart needs an absolute executable, got {argv[0]!r}")
    environment = night_environment() if environment is None else environment
    service, timer = unit_names(project)
    fields = {
        "project": f"project {schedule_key(project)}",
        "exec_start": " ".join(quote_exec_argument(a) for a in argv),
        "environment": "\n".join(environment_line(k, v) for k, v in environment.items()),
        "environment_file": _check_line(str(config_dir() / "environment"), "the config dir").replace("%", "%%"),
        "on_calendar": on_calendar(hour, minute),
        "randomized_delay": _delay_text(randomized_delay_s),
        "service": service,
    }
    return {service: Template(template_text(TEMPLATE_NAMES[0])).substitute(fields),
            timer: Template(template_text(TEMPLATE_NAMES[1])).substitute(fields)}


def systemd_unavailable_reason(systemctl: str = "systemctl") -> str:
    """Return "" when ``systemctl --user`` reaches a user manager, else why not (binary missing, no bus)."""
    if shutil.which(systemctl) is None:
        return f"{systemctl!r} not found on PATH"
    try:
        proc = subprocess.run([systemctl, "--user", "show-environment"], capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"'{systemctl} --user' failed: {exc}"
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        return f"no systemd user manager ('{systemctl} --user show-environment' exited {proc.returncode}" + (
            f": {detail[-1]})" if detail else ")")
    return ""


def _run(commands: list[list[str]]) -> None:
    for command in commands:
        try:
            proc = subprocess.run(command, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ScheduleError(f"'{' '.join(command)}' failed: {exc}") from None
        if proc.returncode != 0:
            raise ScheduleError(f"'{' '.join(command)}' exited {proc.returncode}: "
                                f"{(proc.stderr or proc.stdout).strip()}")


def install_systemd(project: Path, at: str, *, systemctl: str = "systemctl", argv: list[str] | None = None,
                    randomized_delay_s: int = DEFAULT_RANDOMIZED_DELAY_S) -> SystemdResult:
    """Write the unit pair of ``project`` into ``unit_dir()`` (mode 0600, atomically, replacing an older pair),
    then run ``systemctl --user daemon-reload`` and ``enable --now <timer>`` (plus ``restart`` on a re-install)
    when a user manager is reachable; otherwise return those commands with the reason.

    Raises ScheduleError for a bad ``at`` or when a systemctl command fails (with its stderr).
    """
    units = render_units(project, at, argv=argv, randomized_delay_s=randomized_delay_s)
    directory = unit_dir()
    service, timer = unit_names(project)
    replacing = (directory / timer).exists()
    result = SystemdResult(action="install", unit_dir=directory)
    for name, text in units.items():
        write_text_atomic(directory / name, text, mode=0o600)
        result.files.append(directory / name)
    result.commands = [[systemctl, "--user", "daemon-reload"], [systemctl, "--user", "enable", "--now", timer]]
    if replacing:
        result.commands.append([systemctl, "--user", "restart", timer])
    result.reason = systemd_unavailable_reason(systemctl)
    if not result.reason:
        _run(result.commands)
        result.ran = True
    return result


def uninstall_systemd(project: Path, *, systemctl: str = "systemctl") -> SystemdResult:
    """Stop and disable the timer of ``project`` (when a user manager is reachable), remove its unit pair and the
    ``timers.target.wants`` link, and reload. Without a user manager the files are still removed and the commands
    left to run are returned. Raises ScheduleError when a systemctl command fails.
    """
    directory = unit_dir()
    service, timer = unit_names(project)
    result = SystemdResult(action="uninstall", unit_dir=directory)
    present = [directory / name for name in (service, timer) if (directory / name).exists()]
    if not present:
        result.reason = "not installed"
        return result
    result.reason = systemd_unavailable_reason(systemctl)
    if not result.reason:
        _run([[systemctl, "--user", "disable", "--now", timer]])
    for path in [*present, directory / "timers.target.wants" / timer]:
        if path.is_symlink() or path.exists():
            path.unlink()
            result.files.append(path)
    if result.reason:
        result.commands = [[systemctl, "--user", "stop", timer], [systemctl, "--user", "daemon-reload"]]
    else:
        result.commands = [[systemctl, "--user", "disable", "--now", timer], [systemctl, "--user", "daemon-reload"]]
        _run(result.commands[1:])
        result.ran = True
    return result


def unit_state(project: Path, *, systemctl: str = "systemctl") -> dict:
    """Return what is installed for ``project``: ``{installed, service, timer, on_calendar, enabled, active}``;
    ``enabled`` / ``active`` are ``systemctl --user is-enabled / is-active`` words, or None without a user manager.
    """
    directory = unit_dir()
    service, timer = unit_names(project)
    state = {"installed": (directory / service).exists() and (directory / timer).exists(),
             "service": str(directory / service), "timer": str(directory / timer),
             "on_calendar": read_on_calendar(directory / timer), "enabled": None, "active": None}
    if state["installed"] and not systemd_unavailable_reason(systemctl):
        for key, verb in (("enabled", "is-enabled"), ("active", "is-active")):
            try:
                proc = subprocess.run([systemctl, "--user", verb, timer], capture_output=True, text=True, timeout=15)
                state[key] = proc.stdout.strip() or proc.stderr.strip()
            except (OSError, subprocess.TimeoutExpired) as exc:
                state[key] = f"unknown ({exc})"
    return state
