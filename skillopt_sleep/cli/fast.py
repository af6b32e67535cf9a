"""``status`` and ``config show`` (each with or without ``--json``), answered without typer.

Importing typer and building the pydantic adapters it coerces option values with take 0.11 s on a small machine,
more than these commands need in all (a status bar or a shell prompt may run ``status --json`` every few seconds).
``answer(argv)`` handles exactly the argument lists in ``FAST`` and returns True; anything else (any other option,
``--help``, a typo) returns False and goes to the typer app, which stays the one definition of every command. The
text comes from ``cli.render``, the same functions the typer commands print with, and the options keep their
environment variables (``SKILLOPT_SLEEP_CONFIG``, ``SKILLOPT_SLEEP_CRONTAB``). Errors are never reported here: on
any exception nothing has been printed yet, and the typer app runs the command again and reports it as usual.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from skillopt_sleep.cli.render import config_lines, json_text, status_lines

#: The argument lists answered here.
FAST = frozenset({("status",), ("status", "--json"), ("config", "show"), ("config", "show", "--json")})
_CODES = {"bold": "\x1b[1m", "dim": "\x1b[2m", "yellow": "\x1b[33m"}


def terminal_style(text: str, *, bold: bool = False, dim: bool = False, fg: str | None = None) -> str:
    """``click.style``'s codes for the styles ``cli.render`` uses, on a terminal only (``click.echo`` drops them
    elsewhere)."""
    if not sys.stdout.isatty():
        return text
    codes = (_CODES[fg] if fg else "") + (_CODES["bold"] if bold else "") + (_CODES["dim"] if dim else "")
    return f"{codes}{text}\x1b[0m" if codes else text


def _env_path(name: str) -> str | None:
    return os.environ.get(name) or None  # an empty variable is unset, as for click's envvar


def answer(argv: list[str]) -> bool:
    """Print the answer to ``argv`` (the arguments after the program name) and return True, or return False when
    it is not one of ``FAST`` or computing it raised (the typer app then runs it and reports the error)."""
    key = tuple(argv)
    if key not in FAST:
        return False
    try:
        if key[0] == "status":
            from skillopt_sleep.schedule import resolve_project
            from skillopt_sleep.schedule.status import schedule_status

            report = schedule_status(resolve_project(None), crontab_bin=_env_path("SKILLOPT_SLEEP_CRONTAB"))
            lines = [json_text(report)] if "--json" in key else status_lines(report, terminal_style)
        else:
            from skillopt_sleep.config import SleepConfig, load_config

            config_file = _env_path("SKILLOPT_SLEEP_CONFIG")
            config = load_config(Path(config_file) if config_file else None, cli_overrides={})
            data = config.public_dump()
            lines = [json_text(data)] if "--json" in key else config_lines(SleepConfig.model_fields, data,
                                                                             terminal_style)
    except Exception:  # noqa: BLE001 - reported by the typer app, which runs the command again
        return False
    sys.stdout.write("".join(f"{line}\n" for line in lines))
    return True
