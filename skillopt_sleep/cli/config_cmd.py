"""``skillopt-sleep config show | validate | set KEY VALUE | path``."""

from __future__ import annotations

from typing import Annotated

import typer

from skillopt_sleep.cli.common import ConfigOpt, JsonOpt, emit_json, resolve_config, stdout, user_errors
from skillopt_sleep.cli.render import config_lines

app = typer.Typer(help="Show or change the configuration.", no_args_is_help=True, rich_markup_mode=None)


@app.command("show")
def show(json_: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
         config_file: ConfigOpt = None) -> None:
    """Show the effective configuration (defaults < file < environment), secrets masked."""
    from skillopt_sleep.config import SleepConfig

    with user_errors():
        config = resolve_config(config_file)
    data = config.public_dump()
    if json_:
        emit_json(data)
        return
    for line in config_lines(SleepConfig.model_fields, data, typer.style):  # the same text as cli.fast
        typer.echo(line)


@app.command("validate")
def validate(config_file: ConfigOpt = None, json_: JsonOpt = False) -> None:
    """Check the config file: every problem with its file, line and key (a mistyped key gets the closest valid
    one). Exit 0 when it is valid, 1 otherwise."""
    from skillopt_sleep.config_check import validate_config_file

    with user_errors():
        path, problems = validate_config_file(config_file)
    if json_:
        emit_json({"file": str(path), "valid": not problems,
                   "problems": [{"line": p.line, "key": p.key, "message": p.message} for p in problems]})
    elif problems:
        for problem in problems:
            typer.echo(str(problem))
        typer.echo(f"{len(problems)} problem{'s' if len(problems) > 1 else ''} in {path}")
    else:
        typer.echo(f"{path}: valid" if path.exists() else f"{path}: no config file, the defaults apply")
    raise typer.Exit(code=1 if problems else 0)


@app.command("set")
def set_(key: str, value: str, config_file: ConfigOpt = None) -> None:
    """Set KEY to VALUE in the config file (validated; comments and other keys kept)."""
    from skillopt_sleep.config import set_config_value

    with user_errors():
        written = set_config_value(key, value, config_file)
    stdout.print(f"{key} = {value}  ({written})", highlight=False)


@app.command("path")
def path(config_file: ConfigOpt = None) -> None:
    """Print the config file path."""
    from skillopt_sleep import paths

    typer.echo(str(config_file or paths.config_file()))
