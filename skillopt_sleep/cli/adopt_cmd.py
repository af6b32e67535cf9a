"""``skillopt-sleep adopt | revert | history``: write a night's proposal into the project, undo it, list them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from skillopt_sleep.cli.common import ConfigOpt, JsonOpt, ProjectOpt, emit_json, resolve_config, stdout, user_errors

NightArg = Annotated[Optional[str], typer.Argument(help="Night id (a directory name under the project's nights).")]


def _paths(project: Path):
    from skillopt_sleep.state import ProjectPaths

    return ProjectPaths(project)


def _configured_targets(project: Path, paths, night_id: str | None, config_file: Path | None) -> list[Path]:
    """The skill, memory and mirrored memory paths the configuration names for the night's sources."""
    from skillopt_sleep.adopt import default_night_to_adopt
    from skillopt_sleep.documents import mirror_paths, target_paths
    from skillopt_sleep.fsio import load_json

    config = resolve_config(config_file)
    night = night_id or default_night_to_adopt(paths)
    diagnostics = load_json(paths.nights / night / "diagnostics.json", what=f"night {night}'s diagnostics")
    sources = (diagnostics if isinstance(diagnostics, dict) else {}).get("sources") or []
    skill, memory = target_paths(project, sources, config.skill_path, config.memory_path, config.targets)
    mirrors = mirror_paths(project, sources, config.memory_path, config.targets)
    return [p for p in (skill, memory, *mirrors.values()) if p is not None]


def adopt(night: NightArg = None, project: ProjectOpt = None, json_: JsonOpt = False,
          config_file: ConfigOpt = None) -> None:
    """Write a night's staged proposal into the project (atomic, with a backup). NIGHT: newest not adopted."""
    from skillopt_sleep.adopt import adopt_night, default_night_to_adopt

    project_dir = (project or Path.cwd()).expanduser().resolve()
    with user_errors():
        paths = _paths(project_dir)
        night_id = night or default_night_to_adopt(paths)
        allowed = _configured_targets(project_dir, paths, night_id, config_file)
        record = adopt_night(project_dir, paths=paths, night_id=night_id, allowed_targets=allowed)
    if json_:
        emit_json(record.model_dump(mode="json"))
        return
    stdout.print(f"[green]adopted night {record.night_id}[/green]", highlight=False)
    for document in record.documents:
        note = " (re-applied the managed block onto your edited file)" if document.rebased else ""
        backup = f"; backup {document.backup}" if document.backup else "; new file"
        stdout.print(f"  {document.target}{note}{backup}", highlight=False, markup=False)
    stdout.print(f"undo with: skillopt-sleep revert {record.night_id}", highlight=False, markup=False)


def revert(night: NightArg = None, project: ProjectOpt = None,
           force: Annotated[bool, typer.Option(
               "--force", help="Restore even if the file changed since adoption.")] = False,
           json_: JsonOpt = False) -> None:
    """Restore the documents an adopted night replaced. NIGHT: the most recently adopted one."""
    from skillopt_sleep.adopt import revert_adoption

    project_dir = (project or Path.cwd()).expanduser().resolve()
    with user_errors():
        record = revert_adoption(project_dir, paths=_paths(project_dir), night_id=night, force=force)
    if json_:
        emit_json(record.model_dump(mode="json"))
        return
    stdout.print(f"[green]reverted night {record.night_id}[/green]", highlight=False)
    for document in record.documents:
        action = "restored" if document.existed_before else "removed (it did not exist before)"
        if document.kept_edit:
            action += f"; your edited version is kept at {document.kept_edit}"
        stdout.print(f"  {document.target}: {action}", highlight=False, markup=False)


def history(project: ProjectOpt = None, json_: JsonOpt = False) -> None:
    """List the adopted and reverted nights of a project."""
    from skillopt_sleep.adopt import history as adoption_history

    project_dir = (project or Path.cwd()).expanduser().resolve()
    with user_errors():
        records = adoption_history(_paths(project_dir))
    if json_:
        emit_json({"project": str(project_dir), "adoptions": [r.model_dump(mode="json") for r in records]})
        return
    if not records:
        stdout.print("no night adopted yet for this project", highlight=False)
        return
    from rich.table import Table

    table = Table("night", "status", "adopted at", "reverted at", "documents")
    for record in records:
        table.add_row(record.night_id, record.status, record.adopted_at.isoformat(timespec="seconds"),
                      record.reverted_at.isoformat(timespec="seconds") if record.reverted_at else "",
                      ", ".join(record.targets))
    stdout.print(table)


def register(app: typer.Typer) -> None:
    """Add ``adopt``, ``revert`` and ``history`` to the root app."""
    app.command("adopt")(adopt)
    app.command("revert")(revert)
    app.command("history")(history)
