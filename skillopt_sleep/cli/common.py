"""What every command shares: loading the config from flags, printing, and turning errors into one line."""

from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer
from pydantic import ValidationError
from rich.console import Console

from skillopt_sleep.config import SleepConfig, load_config
from skillopt_sleep.errors import ConfigError, SleepError

stdout = Console(soft_wrap=True)
stderr = Console(stderr=True, soft_wrap=True)


def emit_json(data: Any) -> None:
    """Print JSON to stdout (nothing else goes to stdout with --json)."""
    typer.echo(json.dumps(data, indent=2, sort_keys=True, default=str))


@contextmanager
def user_errors():
    """Show a SleepError / ValidationError as one red line and exit 1; re-raise anything else under tests."""
    try:
        yield
    except SleepError as exc:
        stderr.print(f"[red]error:[/red] {exc}", highlight=False)
        raise typer.Exit(code=getattr(exc, "exit_code", 1)) from None
    except ValidationError as exc:
        for error in exc.errors():
            location = ".".join(str(part) for part in error["loc"])
            stderr.print(f"[red]error:[/red] {location}: {error['msg']}", highlight=False)
        raise typer.Exit(code=1) from None
    except (typer.Exit, typer.Abort, KeyboardInterrupt):
        raise
    except Exception as exc:  # a bug: show it, but keep the traceback for tests and developers
        if getattr(sys, "_called_from_test", False) or os.environ.get("SKILLOPT_SLEEP_RAISE_ERRORS"):
            raise
        stderr.print(f"[red]internal error:[/red] {type(exc).__name__}: {exc} "
                     "(set SKILLOPT_SLEEP_RAISE_ERRORS=1 for a traceback)", highlight=False)
        raise typer.Exit(code=70) from None


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
    return load_config(config_file, cli_overrides=flags)
