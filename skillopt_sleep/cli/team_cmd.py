"""``skillopt-sleep team init [--repo PATH_OR_URL]``, ``team publish [--dry-run] [--push]``,
``team pull [--from-peer MANIFEST]``, ``team status [--json]``: house rules shared through the team's own git
(``skillopt_sleep/team``)."""

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

team_app = typer.Typer(help="Share proven house rules through the team's git; each member re-proves them.",
                       no_args_is_help=True, rich_markup_mode=None)


def _say(text: str) -> None:
    stdout.print(text, highlight=False, markup=False)


@team_app.command("init")
def init(
    repo: Annotated[Optional[str], typer.Option(
        "--repo", help="A separate rules repository (path or git URL), saved as team_repo and cloned under the "
                       "state dir. Default: the project's own repository.")] = None,
    project: ProjectOpt = None,
    json_: JsonOpt = False,
    config_file: ConfigOpt = None,
) -> None:
    """Set up team rules for the project: check its git, make your member id, and save --repo."""
    from skillopt_sleep.team.location import init_team

    project_dir = (project or Path.cwd()).expanduser().resolve()
    with user_errors():
        config = resolve_config(config_file)
        result = init_team(project_dir, repo=repo or config.team_repo, configured_member=config.team_member_id,
                           config_file=config_file)
    if json_:
        emit_json(result.model_dump(mode="json"))
        return
    where = result.location
    _say(f"team rules: {where.rules_dir} ({'the project repository' if where.mode == 'project' else where.source})")
    _say(f"your member id: {result.member} (set team_member_id to choose another; never a name or e-mail)")
    if result.config_file:
        _say(f"saved team_repo in {result.config_file}")


@team_app.command("publish")
def publish(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print exactly what would be written; write nothing.")]
    = False,
    push: Annotated[bool, typer.Option("--push", help="Push the new branch (then open a pull request).")] = False,
    project: ProjectOpt = None,
    json_: JsonOpt = False,
    config_file: ConfigOpt = None,
) -> None:
    """Share your adopted rules that won held-out tasks, as rule files committed on a new branch."""
    from skillopt_sleep.team.publish import PublishResult, plan_publish
    from skillopt_sleep.team.publish import publish as publish_plan

    project_dir = (project or Path.cwd()).expanduser().resolve()
    with user_errors():
        config = resolve_config(config_file)
        plan = plan_publish(project_dir, config)
        result = PublishResult(plan=plan) if dry_run else publish_plan(plan, push=push)
    if json_:
        emit_json({"dry_run": dry_run, **result.model_dump(mode="json")})
        return
    for blocked in plan.blocked:
        _say(f"blocked {blocked.rule_id} ({blocked.text}): {blocked.reason}")
    if not plan.files:
        _say("nothing to publish: no adopted rule that won held-out tasks is new to the team")
        return
    if dry_run:
        _say(f"would commit on branch {plan.branch} in {plan.location.repository}:")
        _say(plan.message.rstrip("\n"))
        for planned in plan.files:
            _say(f"\n--- {planned.path}")
            _say(planned.content.rstrip("\n"))
        return
    _say(f"committed {result.commit[:12] if result.commit else '-'} on branch {plan.branch}: "
         f"{plan.message.splitlines()[0]}")
    for planned in plan.files:
        _say(f"  {planned.path}")
    if result.pushed_to:
        _say(f"pushed to {result.pushed_to}: open a pull request for review")
    else:
        _say(f"push it for review: git -C {plan.location.repository} push origin {plan.branch}")


@team_app.command("pull")
def pull(
    from_peer: Annotated[Optional[Path], typer.Option(
        "--from-peer", help="Also take in a rules manifest exported by SkillOpt-Sleep ('export-rules', format 1): "
                            "its rules become team rule files, screened, that your nights re-prove on your own val "
                            "tasks.")] = None,
    project: ProjectOpt = None,
    json_: JsonOpt = False,
    config_file: ConfigOpt = None,
) -> None:
    """Fetch the team rules and list what your next night will gate on your own val tasks."""
    from skillopt_sleep.team.night import preview_team_night
    from skillopt_sleep.team.peer import import_peer_rules

    project_dir = (project or Path.cwd()).expanduser().resolve()
    with user_errors():
        config = resolve_config(config_file)
        imported = import_peer_rules(project_dir, config, from_peer) if from_peer else None
        plan = imported.preview if imported else preview_team_night(project_dir, config)
    if json_:
        report = plan.report() if plan is not None else None
        emit_json({"peer": imported.model_dump(mode="json", exclude={"preview"}), "next_night": report}
                  if imported else report)
        return
    if imported:
        for rule in imported.rules:
            where = f" -> {rule.path}" if rule.path else f": {rule.reason}"
            _say(f"peer rule {rule.peer_id} {rule.status}{where} ({rule.text})")
        _say(f"{imported.count('imported')} of {len(imported.rules)} rule(s) of {imported.manifest} (license "
             f"{imported.license}) imported into {imported.location.rules_dir}; each is gated on your val tasks")
    if plan is None:
        _say("no team rules for this project ('skillopt-sleep team init' sets them up)")
        return
    if plan.mode == "project":
        _say("team rules travel with the project's own 'git pull'; read from its work tree")
    if plan.error:
        _say(f"could not read the team rules: {plan.error}")
    for rule, edit in zip(plan.rules, plan.edits):
        _say(f"next night gates {rule.id}: {rule.text} ({edit.rationale})")
    for entry in [*plan.skipped, *plan.overridden]:
        _say(f"not gated {entry['id']}: {entry['reason']}")
    for entry in plan.contradictions:
        _say(f"contradiction: {entry['reason']}")
    if not plan.rules:
        _say("nothing new for the next night to gate")


@team_app.command("status")
def status(project: ProjectOpt = None, json_: JsonOpt = False, config_file: ConfigOpt = None) -> None:
    """What is shared, what waits or was rejected on your work, and rules that hurt more members than they help."""
    from skillopt_sleep.team.status import team_status

    project_dir = (project or Path.cwd()).expanduser().resolve()
    with user_errors():
        config = resolve_config(config_file)
        result = team_status(project_dir, config, sync=True)
    if json_:
        emit_json(result.model_dump(mode="json"))
        return
    if not result.shared and not result.local_only:
        _say(f"no team rule in {result.location.rules_dir} yet ('skillopt-sleep team publish' shares yours)")
        return
    from rich.table import Table
    from rich.text import Text

    table = Table("id", "rule", "proposer", "helped", "hurt", "tied", "here", title=f"team rules ({result.member})")
    table.columns[0].no_wrap = True
    for rule in result.shared:
        here = rule.local.status if rule.local else "not gated yet"
        table.add_row(rule.id, Text(rule.text), rule.proposer, str(len(rule.helped)), str(len(rule.hurt)),
                      str(len(rule.tied)), here + (" (hurts more than it helps)" if rule.hurts_more else ""))
    for rule_id, local in result.local_only.items():
        table.add_row(rule_id, Text("(no longer shared)"), "-", "-", "-", "-", local.status)
    print_table(table)
    if result.hurting:
        _say(f"for review: {', '.join(result.hurting)} hurt more members than they help (nothing is removed "
             "automatically)")


def register(app: typer.Typer) -> None:
    """Add the ``team`` command group to the root app."""
    app.add_typer(team_app, name="team")
