"""cron: one tagged line per project in the user's crontab, through the real ``crontab`` binary.

The line (``M H * * *``, local time of the cron daemon)::

    17 3 * * * PATH=... SKILLOPT_SLEEP_HOME=... /abs/skillopt-sleep run-now --project /abs/project
        >> <log> 2>&1 # skillopt-sleep:<key>          (one line in the crontab)

* read with ``crontab -l``; exit 1 with "no crontab for USER" is the one case that means empty, any other
  failure raises ScheduleError with the stderr (never treated as an empty crontab, which would wipe it);
* written with ``crontab -`` (stdin), every other line kept byte for byte (the text is handled as bytes);
  re-installing replaces our line for that project in place; uninstalling removes only that line;
* every word is shell-quoted, and each ``%`` is written ``\\%`` outside the quotes (cron turns an unescaped ``%``
  into a newline); the trailing ``# skillopt-sleep:<key>`` is a shell comment and our tag;
* the night appends its output to ``<state dir>/logs/cron-<key>.log``.

The binary: ``crontab_bin`` argument, else ``$SKILLOPT_SLEEP_CRONTAB``, else ``crontab`` on PATH.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

from skillopt_sleep.errors import ScheduleError
from skillopt_sleep.paths import state_dir
from skillopt_sleep.schedule import night_environment, parse_at, run_now_argv, schedule_key

TAG_PREFIX = "# skillopt-sleep:"
#: Longest command Vixie/Debian cron accepts (``MAX_COMMAND`` 1000, terminator included).
MAX_COMMAND_CHARS = 999
_LINE_PATTERN = re.compile(
    rb"^\s*(?P<minute>\d{1,2}) (?P<hour>\d{1,2}) \* \* \* .* # skillopt-sleep:(?P<key>[A-Za-z0-9._-]+)\s*$")


@dataclass
class CronResult:
    """What ``install_cron`` / ``uninstall_cron`` did: ``changed`` is false when nothing needed writing."""

    action: str
    line: str | None
    changed: bool
    log_file: Path | None = None

    def to_json(self) -> dict:
        return {"action": self.action, "line": self.line, "changed": self.changed,
                "log_file": str(self.log_file) if self.log_file else None}


def crontab_binary(crontab_bin: str | None = None) -> str:
    """Return the crontab binary to use: argument > ``$SKILLOPT_SLEEP_CRONTAB`` > ``crontab``."""
    return crontab_bin or os.environ.get("SKILLOPT_SLEEP_CRONTAB") or "crontab"


def cron_quote(word: str) -> str:
    """Quote one word for a crontab command: ``shlex.quote`` of the parts between ``%`` signs, joined by ``\\%``
    (so no ``%`` reaches cron unescaped, and no backslash ever precedes the escape). Raises ScheduleError for a
    line break."""
    if "\n" in word or "\r" in word:
        raise ScheduleError(f"cannot put a value with a line break into a crontab line: {word!r}")
    if word == "":
        return "''"
    return "\\%".join(shlex.quote(part) if part else "" for part in word.split("%"))


def cron_log_file(project: Path) -> Path:
    """Return ``<state dir>/logs/cron-<key>.log`` (appended to by every night)."""
    return state_dir() / "logs" / f"cron-{schedule_key(project)}.log"


def tag(project: Path) -> str:
    return f"{TAG_PREFIX}{schedule_key(project)}"


def cron_line(project: Path, at: str, *, argv: list[str] | None = None,
              environment: dict[str, str] | None = None) -> str:
    """Return our crontab line for ``project`` at ``at`` (no trailing newline).

    argv: the night's command (default ``run_now_argv(project)``); environment: ``NAME=value`` prefixes
    (default ``night_environment()``). Raises ScheduleError for a bad ``at`` or a command cron would reject
    as too long (drop unneeded PATH entries, or use --systemd / the daemon).
    """
    hour, minute = parse_at(at)
    argv = argv or run_now_argv(project)
    environment = night_environment() if environment is None else environment
    words = [f"{name}={cron_quote(value)}" for name, value in environment.items()]
    words += [cron_quote(word) for word in argv]
    command = " ".join(words) + f" >> {cron_quote(str(cron_log_file(project)))} 2>&1 {tag(project)}"
    if len(command) > MAX_COMMAND_CHARS:
        raise ScheduleError(f"the cron command would be {len(command)} characters, more than cron accepts "
                            f"({MAX_COMMAND_CHARS}); shorten PATH or the project path, or use "
                            "'skillopt-sleep install --systemd' / 'skillopt-sleep daemon'")
    return f"{minute} {hour} * * * {command}"


def read_crontab(crontab_bin: str | None = None, user: str | None = None) -> bytes:
    """Return the user's crontab as bytes (``b""`` when the user has none).

    user: passed as ``crontab -u USER`` (root only). Raises ScheduleError when the binary is missing or
    ``crontab -l`` fails for any reason other than "no crontab for USER" (exit 1).
    """
    argv = [crontab_binary(crontab_bin), *(["-u", user] if user else []), "-l"]
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=30)
    except FileNotFoundError:
        raise ScheduleError(f"{argv[0]!r} not found: install cron (Debian: apt-get install cron) or use "
                            "'skillopt-sleep install --systemd' / 'skillopt-sleep daemon'") from None
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ScheduleError(f"'{' '.join(argv)}' failed: {exc}") from None
    if proc.returncode == 0:
        return proc.stdout
    stderr = proc.stderr.decode("utf-8", "replace").strip()
    if proc.returncode == 1 and stderr.lower().startswith("no crontab for"):
        return b""
    raise ScheduleError(f"cannot read the crontab ('{' '.join(argv)}' exited {proc.returncode}): "
                        f"{stderr or 'no error message'}; nothing was changed")


def write_crontab(content: bytes, crontab_bin: str | None = None, user: str | None = None) -> None:
    """Replace the user's crontab with ``content`` via ``crontab -`` (stdin). Raises ScheduleError with the
    stderr when cron rejects it."""
    argv = [crontab_binary(crontab_bin), *(["-u", user] if user else []), "-"]
    try:
        proc = subprocess.run(argv, input=content, capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ScheduleError(f"'{' '.join(argv)}' failed: {exc}") from None
    if proc.returncode != 0:
        raise ScheduleError(f"'{' '.join(argv)}' exited {proc.returncode}: "
                            f"{proc.stderr.decode('utf-8', 'replace').strip()}")


def _split_on_newline(content: bytes) -> list[bytes]:
    """Split into lines that keep their ``\\n`` (the last one may lack it); ``\\r`` stays inside its line."""
    parts = content.split(b"\n")
    lines = [part + b"\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _is_ours(line: bytes, key: str) -> bool:
    match = _LINE_PATTERN.match(line.rstrip(b"\n"))
    return bool(match) and match.group("key").decode() == key


def find_line(content: bytes, project: Path) -> str | None:
    """Return our line for ``project`` in ``content`` (no newline), or None."""
    key = schedule_key(project)
    for line in _split_on_newline(content):
        if _is_ours(line, key):
            return line.rstrip(b"\n").decode("utf-8", "replace")
    return None


def line_time(line: str) -> tuple[int, int] | None:
    """Return ``(hour, minute)`` of one of our lines, or None."""
    match = _LINE_PATTERN.match(line.encode())
    return (int(match.group("hour")), int(match.group("minute"))) if match else None


def install_cron(project: Path, at: str, *, crontab_bin: str | None = None, user: str | None = None,
                 argv: list[str] | None = None) -> CronResult:
    """Add or replace our line for ``project`` (in place when present; appended otherwise), keeping every other
    line byte for byte (a last line without ``\\n`` gets one, which cron requires). Creates the log dir (0700).
    Raises ScheduleError when the crontab cannot be read or written.
    """
    line = cron_line(project, at, argv=argv)
    content = read_crontab(crontab_bin, user)
    key = schedule_key(project)
    new = line.encode("utf-8") + b"\n"
    lines, placed = [], False
    for existing in _split_on_newline(content):
        if _is_ours(existing, key):
            if not placed:
                lines.append(new)
                placed = True
            continue
        lines.append(existing)
    if not placed:
        if lines and not lines[-1].endswith(b"\n"):
            lines[-1] += b"\n"
        lines.append(new)
    updated = b"".join(lines)
    log_file = cron_log_file(project)
    log_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if updated == content:
        return CronResult("install", line, changed=False, log_file=log_file)
    write_crontab(updated, crontab_bin, user)
    return CronResult("install", line, changed=True, log_file=log_file)


def uninstall_cron(project: Path, *, crontab_bin: str | None = None, user: str | None = None) -> CronResult:
    """Remove our line(s) for ``project``, keeping every other line byte for byte. ``changed`` is false (and
    nothing is written) when there was none. Raises ScheduleError when the crontab cannot be read or written.
    """
    content = read_crontab(crontab_bin, user)
    key = schedule_key(project)
    lines = _split_on_newline(content)
    kept = [line for line in lines if not _is_ours(line, key)]
    if len(kept) == len(lines):
        return CronResult("uninstall", None, changed=False)
    removed = next(line for line in lines if _is_ours(line, key)).rstrip(b"\n").decode("utf-8", "replace")
    write_crontab(b"".join(kept), crontab_bin, user)
    return CronResult("uninstall", removed, changed=True)
