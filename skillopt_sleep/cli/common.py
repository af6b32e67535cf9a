"""What every command shares: loading the config from flags, printing, and turning errors into one line."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from skillopt_sleep.cli.render import json_text
from skillopt_sleep.errors import INTERNAL_ERROR_EXIT_CODE, ConfigError, Interrupted, SleepError

if TYPE_CHECKING:
    from skillopt_sleep.config import SleepConfig


class _LazyConsole:
    """A rich ``Console`` created on first use: importing rich costs more than ``--version``, ``--help`` or
    ``status`` need. Attribute reads and writes go to the console."""

    def __init__(self, **options: Any) -> None:
        object.__setattr__(self, "_options", options)
        object.__setattr__(self, "_console", None)

    def _get(self) -> Any:
        if self._console is None:
            from rich.console import Console

            object.__setattr__(self, "_console", Console(**self._options))
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self._get(), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._get(), name, value)


stdout: Any = _LazyConsole(soft_wrap=True)
stderr: Any = _LazyConsole(stderr=True, soft_wrap=True)


#: The width a table is laid out in when stdout is not a terminal: wide enough that no cell wraps or is cut.
UNLIMITED_WIDTH = 1_000_000


def print_table(table: Any) -> None:
    """Print a rich ``Table`` to stdout. On a terminal it fits the terminal (rich wraps long cells); piped or
    redirected, it is laid out at its natural width (``UNLIMITED_WIDTH``), so no row wraps and no cell is cut: a
    script or ``grep`` reads each row on one line, whole ids included. (A rich table is as wide as its cells, not
    as the console, unless ``expand``.)"""
    if stdout.is_terminal:
        stdout.print(table)
        return
    from rich.console import Console

    Console(file=stdout.file, width=UNLIMITED_WIDTH, soft_wrap=True, color_system=stdout.color_system).print(table)


def _validation_error(exc: BaseException) -> bool:
    """Whether ``exc`` is a pydantic ValidationError (one can only exist once pydantic_core has been imported)."""
    pydantic_core = sys.modules.get("pydantic_core")
    return pydantic_core is not None and isinstance(exc, pydantic_core.ValidationError)


QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress display on stderr.")]
#: The options several commands share (one definition each).
ProjectOpt = Annotated[Optional[Path], typer.Option(
    "--project", help="Project directory (default: current directory).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON to stdout.")]
ConfigOpt = Annotated[Optional[Path], typer.Option("--config", help="Config TOML file (default: user config dir).",
                                                    envvar="SKILLOPT_SLEEP_CONFIG")]


def make_progress(*, quiet: bool = False, json_: bool = False, stage_lines: bool = True) -> Any:
    """A live progress display on stderr (``progress_view.RichProgress``) when stderr is a terminal and neither
    ``-q`` nor ``--json`` was given; else ``progress.NullProgress`` (cron, systemd, the daemon, a pipe, a log file).
    With ``-v`` the log lines take stderr instead (a live line would be torn by them)."""
    import logging

    from skillopt_sleep.progress import NullProgress

    verbose = logging.getLogger().handlers and logging.getLogger().getEffectiveLevel() <= logging.INFO
    if quiet or json_ or verbose or not sys.stderr.isatty():
        return NullProgress()
    from rich.console import Console

    from skillopt_sleep.cli.progress_view import RichProgress

    return RichProgress(Console(stderr=True, soft_wrap=True), stage_lines=stage_lines)


def emit_json(data: Any) -> None:
    """Print JSON to stdout (nothing else goes to stdout with --json)."""
    typer.echo(json_text(data))


@contextmanager
def user_errors():
    """Show a SleepError as one red line (its message and fix) and exit with its ``exit_code`` (``errors``: 1, or
    2 backend, 3 budget, 4 locked); ``Interrupted`` (a night stopped by a signal) as one line, exit 130 / 143;
    a ValidationError as one line per field and exit 1; anything else (a bug) is
    re-raised under tests, else shown as one line with exit code 70."""
    try:
        yield
    except SleepError as exc:
        stderr.print(f"[red]error:[/red] {exc}", highlight=False)
        raise typer.Exit(code=exc.exit_code) from None
    except Interrupted as exc:  # a night stopped by SIGINT / SIGTERM: recorded, exit 128 + the signal
        stderr.print(f"[yellow]interrupted:[/yellow] {exc}", highlight=False)
        raise typer.Exit(code=exc.exit_code) from None
    except (typer.Exit, typer.Abort, KeyboardInterrupt):
        raise
    except Exception as exc:
        if _validation_error(exc):
            for error in exc.errors():
                location = ".".join(str(part) for part in error["loc"])
                stderr.print(f"[red]error:[/red] {location}: {error['msg']}", highlight=False)
            raise typer.Exit(code=ConfigError.exit_code) from None
        # a bug: show it, but keep the traceback for tests and developers
        if getattr(sys, "_called_from_test", False) or os.environ.get("SKILLOPT_SLEEP_RAISE_ERRORS"):
            raise
        stderr.print(f"[red]internal error:[/red] {type(exc).__name__}: {exc} "
                     "(set SKILLOPT_SLEEP_RAISE_ERRORS=1 for a traceback)", highlight=False)
        raise typer.Exit(code=INTERNAL_ERROR_EXIT_CODE) from None


def home_flags(values: list[str] | None, **named: Path | None) -> dict[str, Path | None]:
    """``--home SOURCE=PATH`` values as config flags (``{"gemini_home": Path(...)}``), merged with the dedicated flags
    ``named`` (``claude_home=``, ``codex_home=``: a dedicated flag that is set wins over ``--home`` for its source).
    Raises ConfigError for a value without ``=`` (a bad source name is caught by the config, naming the key)."""
    flags: dict[str, Path | None] = {}
    for value in values or []:
        name, sep, path = value.partition("=")
        if not sep or not name.strip() or not path.strip():
            raise ConfigError(f"--home expects SOURCE=PATH, got {value!r}", source="--home", key="home")
        flags[f"{name.strip().lower()}_home"] = Path(path.strip()).expanduser()
    for key, path in named.items():
        if path is not None or key not in flags:
            flags[key] = path
    return flags


def resolve_config(config_file: Path | None, **flags: Any) -> SleepConfig:
    """Load the layered config with the flags the user set (None = not set)."""
    from skillopt_sleep.config import load_config

    return load_config(config_file, cli_overrides=flags)
