"""``skillopt-sleep adopt | revert | history``: write a night's proposal into the project, undo it, list them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

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

NightArg = Annotated[Optional[str], typer.Argument(help="Night id (a directory name under the project's nights).")]


def _paths(project: Path):
    from skillopt_sleep.state import ProjectPaths

    return ProjectPaths(project)


def _configured_targets(project: Path, paths, night: str, config_file: Path | None) -> list[Path]:
    """The skill, memory and mirrored memory paths the configuration names for the night's sources."""
    from skillopt_sleep.documents.targets import mirror_paths, target_paths
    from skillopt_sleep.fsio import load_json

    config = resolve_config(config_file)
    diagnostics = load_json(paths.nights / night / "diagnostics.json", what=f"night {night}'s diagnostics")
    sources = (diagnostics if isinstance(diagnostics, dict) else {}).get("sources") or []
    skill, memory = target_paths(project, sources, config.skill_path, config.memory_path, config.targets)
    mirrors = mirror_paths(project, sources, config.memory_path, config.targets)
    return [p for p in (skill, memory, *mirrors.values()) if p is not None]


def adopt(night: NightArg = None, project: ProjectOpt = None, json_: JsonOpt = False,
          config_file: ConfigOpt = None) -> None:
    """Write staged proposals into the project (atomic, with backups). NIGHT: that one night; default: every
    staged night not adopted yet, oldest first, each on top of the previous."""
    from skillopt_sleep.review.adopt import adopt_all, adopt_night

    project_dir = (project or Path.cwd()).expanduser().resolve()
    with user_errors():
        paths = _paths(project_dir)
        if night:
            records = [adopt_night(project_dir, paths=paths, night_id=night,
                                   allowed_targets=_configured_targets(project_dir, paths, night, config_file))]
            refused: dict[str, str] = {}
        else:
            done = adopt_all(project_dir, paths=paths,
                             allowed_targets=lambda night_id: _configured_targets(project_dir, paths, night_id,
                                                                                  config_file))
            records, refused = done.adopted, done.refused
    if json_:
        emit_json({"adopted": [record.model_dump(mode="json") for record in records], "refused": refused}
                  if not night else records[0].model_dump(mode="json"))
        if refused and not records:
            raise typer.Exit(1)
        return
    for record in records:
        stdout.print(f"[green]adopted night {record.night_id}[/green]", highlight=False)
        for document in record.documents:
            note = " (re-applied its change onto the file as it is now)" if document.rebased else ""
            backup = f"; backup {document.backup}" if document.backup else "; new file"
            stdout.print(f"  {document.target}{note}{backup}", highlight=False, markup=False)
        stdout.print(f"undo with: skillopt-sleep revert {record.night_id}", highlight=False, markup=False)
    for night_id, why in refused.items():
        stdout.print(f"[yellow]not adopted: night {night_id}[/yellow] (still staged)", highlight=False)
        stdout.print(f"  {why}", highlight=False, markup=False)
    if refused and not records:
        raise typer.Exit(1)


def revert(night: NightArg = None, project: ProjectOpt = None,
           force: Annotated[bool, typer.Option(
               "--force", help="Restore even if the file changed since adoption.")] = False,
           json_: JsonOpt = False) -> None:
    """Restore the documents an adopted night replaced. NIGHT: the most recently adopted one."""
    from skillopt_sleep.review.adopt import revert_adoption

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


def _night_verdict(paths, night_id: str) -> str:
    """The night's verdict word (``verdicts.verdict``), or ``-`` when its diagnostics are gone or unreadable."""
    from skillopt_sleep.fsio import read_json
    from skillopt_sleep.review.verdicts import verdict

    try:
        data = read_json(paths.nights / night_id / "diagnostics.json", default=None)
    except (ValueError, OSError):
        return "-"
    return verdict(data) if isinstance(data, dict) else "-"


def history(project: ProjectOpt = None, json_: JsonOpt = False) -> None:
    """List the adopted and reverted nights of a project, with each night's verdict."""
    from skillopt_sleep.review.adopt import history as adoption_history

    project_dir = (project or Path.cwd()).expanduser().resolve()
    with user_errors():
        paths = _paths(project_dir)
        records = adoption_history(paths)
    verdicts = [_night_verdict(paths, record.night_id) for record in records]
    if json_:
        emit_json({"project": str(project_dir),
                   "adoptions": [{**r.model_dump(mode="json"), "verdict": word} for r, word in zip(records, verdicts)]})
        return
    if not records:
        stdout.print("no night adopted yet for this project", highlight=False)
        return
    from rich.table import Column, Table

    # the night id is what ``revert`` takes: on one line, whole (on a terminal the other columns give way; piped,
    # nothing is cut: ``print_table``); "night" is the night's verdict, "adoption" what became of its proposal
    table = Table(Column("night id", no_wrap=True), "night", "adoption", "adopted at", "reverted at", "documents")
    for record, word in zip(records, verdicts):
        table.add_row(record.night_id, word, record.status, record.adopted_at.isoformat(timespec="seconds"),
                      record.reverted_at.isoformat(timespec="seconds") if record.reverted_at else "",
                      ", ".join(record.targets))
    print_table(table)


def register(app: typer.Typer) -> None:
    """Add ``adopt``, ``revert`` and ``history`` to the root app."""
    app.command("adopt")(adopt)
    app.command("revert")(revert)
    app.command("history")(history)
