"""``skillopt-sleep rules [--json]`` and ``forget RULE_ID``: the rules ledger of a project, and removing one rule."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from skillopt_sleep.cli.common import (
    ConfigOpt,
    JsonOpt,
    ProjectOpt,
    emit_json,
    print_table,
    resolve_config,
    stdout,
    user_errors,
)


def rules(project: ProjectOpt = None, json_: JsonOpt = False, config_file: ConfigOpt = None) -> None:
    """List every rule learned or proposed for the project: where it lives, its status, what taught it."""
    from skillopt_sleep.review.rule_ledger import list_rules
    from skillopt_sleep.state import ProjectPaths

    project_dir = (project or Path.cwd()).expanduser().resolve()
    with user_errors():
        config = resolve_config(config_file)
        entries = list_rules(project_dir, ProjectPaths(project_dir), stale_after_nights=config.stale_after_nights,
                             skill_path=config.skill_path, memory_path=config.memory_path)
    if json_:
        emit_json({"project": str(project_dir), "stale_after_nights": config.stale_after_nights,
                   "rules": [entry.model_dump(mode="json") for entry in entries]})
        return
    if not entries:
        stdout.print("no rule learned or proposed for this project yet", highlight=False)
        return
    from rich.table import Table
    from rich.text import Text

    table = Table("id", "rule", "status", "where", "stated", "held-out", "last tested", title="rules ledger")
    for column in (0, 3):  # ids and file:line are copied into commands: never wrapped
        table.columns[column].no_wrap = True
    for entry in entries:
        status = entry.status + (" (stale)" if entry.stale else "")
        if entry.status == "rejected" and entry.rejections:
            status = f"rejected {entry.rejections}x"
        if entry.status in ("candidate", "one-off") and entry.scope_reason:
            status += f": {entry.scope_reason}"
        where = ", ".join(f"{loc.file}:{loc.line}" for loc in entry.locations) or "-"
        taught = (f"{entry.stated}x, {len(entry.nights)} night(s), {len(entry.sessions)} session(s)"
                  if entry.origin == "you" else "team rule" if entry.origin == "team" else "from replays")
        tested = entry.last_exercised or "-"
        if entry.nights_unexercised:
            tested += f" ({entry.nights_unexercised} nights ago)"
        table.add_row(entry.id, Text(entry.text), status, where, taught, f"{entry.wins} won / {entry.losses} lost",
                      tested)
    print_table(table)


def forget(rule_id: Annotated[str, typer.Argument(help="Rule id, as 'skillopt-sleep rules' lists it.")],
           project: ProjectOpt = None, json_: JsonOpt = False, config_file: ConfigOpt = None) -> None:
    """Remove one learned rule from your files (atomic, with a backup; 'revert CHANGE_ID' undoes it)."""
    from skillopt_sleep.review.rule_ledger import forget_rule
    from skillopt_sleep.state import ProjectPaths

    project_dir = (project or Path.cwd()).expanduser().resolve()
    with user_errors():
        config = resolve_config(config_file)
        result = forget_rule(project_dir, ProjectPaths(project_dir), rule_id, skill_path=config.skill_path,
                             memory_path=config.memory_path)
    if json_:
        emit_json(result)
        return
    stdout.print(f"forgot {rule_id}: {result['rule']['text']}", highlight=False, markup=False)
    stdout.print(f"removed from {', '.join(result['files'])}; undo with 'skillopt-sleep revert "
                 f"{result['change_id']}'", highlight=False, markup=False)


def register(app: typer.Typer) -> None:
    """Add ``rules`` and ``forget`` to the root app."""
    app.command("rules")(rules)
    app.command("forget")(forget)
