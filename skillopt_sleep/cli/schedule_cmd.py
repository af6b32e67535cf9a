"""``skillopt-sleep install | uninstall | daemon | status``: run the night every night, and see what is scheduled.

``register(app)`` adds the four commands to the root typer app.
"""

from __future__ import annotations

import shlex
from typing import Annotated, Optional

import typer

from skillopt_sleep.cli.common import JsonOpt, ProjectOpt, emit_json, stderr, stdout, user_errors
from skillopt_sleep.cli.render import status_lines
from skillopt_sleep.schedule import DEFAULT_AT, ScheduleError, resolve_project

AtOpt = Annotated[str, typer.Option("--at", help="Nightly time, HH:MM local time (24 h).")]
SystemdOpt = Annotated[bool, typer.Option("--systemd", help="systemd user timer (Linux).")]
CronOpt = Annotated[bool, typer.Option("--cron", help="A line in your crontab.")]
ForceOpt = Annotated[bool, typer.Option(
    "--force", help="Schedule even though another scheduler already runs the night for this project.")]
CrontabOpt = Annotated[Optional[str], typer.Option("--crontab-bin", envvar="SKILLOPT_SLEEP_CRONTAB",
                                                   help="crontab executable (default: crontab on PATH).")]


def _which(systemd: bool, cron: bool) -> str:
    if systemd == cron:
        raise ScheduleError("choose exactly one of --systemd (systemd user timer) or --cron (crontab line); "
                            "without either, run 'skillopt-sleep daemon'")
    return "systemd" if systemd else "cron"


def _refuse_a_second_scheduler(project, kind: str, *, force: bool, crontab_bin: str | None) -> None:
    """Raise ScheduleError when another kind already runs the night for ``project`` (two nights a day); with
    ``force``, say so on stderr and go on."""
    from skillopt_sleep.schedule.conflicts import conflict_message, other_schedulers

    others = other_schedulers(project, kind, crontab_bin=crontab_bin)
    if others and not force:
        raise ScheduleError(conflict_message(project, kind, others))
    if others:
        stderr.print(f"[yellow]warning:[/yellow] {project} is also scheduled by {' and '.join(others)}: "
                     "the night will run more than once a day (--force)", highlight=False)


def _print_systemd(result, verb: str) -> None:
    for path in result.files:
        stdout.print(f"{verb} {path}", highlight=False)
    if result.ran:
        for command in result.commands:
            stdout.print(f"ran: {shlex.join(command)}", highlight=False)
    elif result.commands:
        stdout.print(f"systemctl not run ({result.reason}); run these yourself:", highlight=False)
        for command in result.commands:
            stdout.print(f"  {shlex.join(command)}", highlight=False, markup=False)


def install(
    systemd: SystemdOpt = False,
    cron: CronOpt = False,
    at: AtOpt = DEFAULT_AT,
    project: ProjectOpt = None,
    crontab_bin: CrontabOpt = None,
    force: ForceOpt = False,
    json_: JsonOpt = False,
) -> None:
    """Schedule the night for a project: --systemd (user timer) or --cron (crontab line). Refused when another
    scheduler already runs the night for the project (two nights a day), unless --force."""
    from skillopt_sleep.schedule.cron import install_cron
    from skillopt_sleep.schedule.systemd import install_systemd

    with user_errors():
        how = _which(systemd, cron)
        target = resolve_project(project)
        _refuse_a_second_scheduler(target, how, force=force, crontab_bin=crontab_bin)
        result = install_systemd(target, at) if how == "systemd" else install_cron(target, at,
                                                                                   crontab_bin=crontab_bin)
    if json_:
        emit_json({"method": how, "project": str(target), **result.to_json()})
    elif how == "systemd":
        _print_systemd(result, "wrote")
    else:
        stdout.print(("added to crontab: " if result.changed else "crontab already had: ") + result.line,
                     highlight=False, markup=False)
        stdout.print(f"log: {result.log_file}", highlight=False)


def uninstall(
    systemd: SystemdOpt = False,
    cron: CronOpt = False,
    project: ProjectOpt = None,
    crontab_bin: CrontabOpt = None,
    json_: JsonOpt = False,
) -> None:
    """Remove a project's schedule: --systemd (unit pair) or --cron (only our crontab line)."""
    from skillopt_sleep.schedule.cron import uninstall_cron
    from skillopt_sleep.schedule.systemd import uninstall_systemd

    with user_errors():
        how = _which(systemd, cron)
        target = resolve_project(project)
        result = uninstall_systemd(target) if how == "systemd" else uninstall_cron(target, crontab_bin=crontab_bin)
    if json_:
        emit_json({"method": how, "project": str(target), **result.to_json()})
    elif how == "systemd":
        if not result.files:
            stdout.print(f"no systemd units installed for {target}", highlight=False)
        _print_systemd(result, "removed")
    elif result.changed:
        stdout.print(f"removed from crontab: {result.line}", highlight=False, markup=False)
    else:
        stdout.print(f"no skillopt-sleep crontab line for {target}", highlight=False)


def daemon(
    at: AtOpt = DEFAULT_AT,
    project: ProjectOpt = None,
    every_seconds: Annotated[Optional[float], typer.Option("--every-seconds", hidden=True, min=0.1,
                                                           help="Run every N seconds (tests).")] = None,
    crontab_bin: CrontabOpt = None,
    force: ForceOpt = False,
) -> None:
    """Run in the foreground and start the night every day at --at (for machines without cron or systemd).
    Refused when systemd or cron already runs the night for the project, unless --force.

    Stops cleanly on SIGTERM / Ctrl-C. Logs one line per night to stderr and to the state dir.
    """
    from skillopt_sleep.schedule.daemon import run_daemon

    with user_errors():
        target = resolve_project(project)
        _refuse_a_second_scheduler(target, "daemon", force=force, crontab_bin=crontab_bin)
        code = run_daemon(target, at=at, every_seconds=every_seconds)
    raise typer.Exit(code=code)


def status(
    project: ProjectOpt = None,
    crontab_bin: CrontabOpt = None,
    json_: JsonOpt = False,
) -> None:
    """Show how the night is scheduled, the last night, pending proposals, and the next run."""
    from skillopt_sleep.schedule.status import schedule_status

    with user_errors():
        report = schedule_status(resolve_project(project), crontab_bin=crontab_bin)
    if json_:
        emit_json(report)
        return
    for line in status_lines(report, typer.style):  # the same text as the fast path (cli.fast)
        typer.echo(line)


def register(app: typer.Typer) -> None:
    """Add ``install``, ``uninstall``, ``daemon`` and ``status`` to the root app."""
    app.command("install")(install)
    app.command("uninstall")(uninstall)
    app.command("daemon")(daemon)
    app.command("status")(status)
