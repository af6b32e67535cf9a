"""``skillopt-sleep report [NIGHT] [--json] [--html PATH]``: what a night did and why."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from skillopt_sleep.cli.common import ProjectOpt, emit_json, print_table, stdout, user_errors

if TYPE_CHECKING:
    from skillopt_sleep.review.report_view import NightView


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def render_view(view: NightView) -> None:
    """Print one night's view (``report.night_view``) with rich. Transcript text is printed as plain text."""
    from rich.syntax import Syntax
    from rich.table import Table
    from rich.text import Text

    color = {"learned": "green", "waiting": "yellow", "rejected": "yellow", "failed": "red",
             "interrupted": "red"}.get(view.outcome, "cyan")
    # plain lines, not a panel: the console soft-wraps (a panel would crop a long rule)
    stdout.print(Text(f"night {view.night_id} ({view.project or '-'}): what changed in your files",
                      style="bold underline"))
    stdout.print(Text(view.outcome.upper(), style=f"bold {color}"))
    for change in view.changes:
        stdout.print(Text(change.line, style="green" if change.state == "written" else ""))
    if not view.changes or all(change.state == "unchanged" for change in view.changes):
        stdout.print(Text(view.headline))
    if view.staged_from:
        stdout.print(Text(f"(the candidate of night {view.staged_from}: it waited for more evidence and won "
                          "its re-test tonight)"))
    why = Text("why: ", style="bold")
    why.append(f"tonight's own candidate -- gate {view.verdict}: {view.why}" if view.verdict else view.why)
    if view.adoption:
        why.append(f"\nadoption: {view.adoption}")
    stdout.print(why)
    if view.failure:
        stdout.print(Text(f"{view.failure.get('reason')} -- fix: {view.failure.get('fix')}", style="red"))
    for number, edit in enumerate(view.staged_edits, 1):
        stdout.print(Text(f"staged/written rule {number}: {edit.op} -> {edit.target}", style="bold green"))
        stdout.print(Syntax(edit.diff or "(empty)", "diff", theme="ansi_dark", background_color="default"))
    stdout.print(Text("statistics", style="bold underline"))

    scores = Table("scores", "hard", "soft", "gate", "n", title="scores (baseline -> candidate)")
    for name, s in (("baseline (val)", view.scores.baseline), ("candidate (val)", view.scores.candidate)):
        scores.add_row(name, _fmt(s.hard), _fmt(s.soft), _fmt(s.gate), str(s.n))
    for name, s in view.scores.test.items():
        scores.add_row(f"{name} (test)", _fmt(s.hard), _fmt(s.soft), _fmt(s.gate), str(s.n))
    print_table(scores)

    if view.per_task:
        tasks = Table("task", "request", "base hard", "base soft", "cand hard", "cand soft", "outcome",
                      title="held-out (val) tasks")
        for t in view.per_task:
            style = {"win": "green", "loss": "red"}.get(t.outcome, "")
            tasks.add_row(t.task_id, Text(t.request), _fmt(t.baseline_hard), _fmt(t.baseline_soft),
                          _fmt(t.candidate_hard), _fmt(t.candidate_soft), Text(t.outcome, style=style))
        print_table(tasks)

    if view.blocked:
        blocked = Table("document", "token", "edit", title="blocked edits: no user provenance (docs/security.md)",
                        title_style="bold red")
        for b in view.blocked:
            blocked.add_row(b.target, Text(str(b.token), style="red"), Text(b.content))
        print_table(blocked)

    for number, edit in enumerate(view.edits, 1):
        reason = f": {edit.reason}" if edit.reason else ""
        title = f"step edit {number}: {edit.op} -> {edit.target} ({edit.status}{reason})"
        stdout.print(Text(title, style="bold"))
        if edit.rationale:
            stdout.print(Text(f"  why: {edit.rationale}"))
        stdout.print(Syntax(edit.diff or "(empty)", "diff", theme="ansi_dark", background_color="default"))
    for document in view.document_diffs:
        stdout.print(Text(f"proposed change to {document.target}", style="bold"))
        stdout.print(Syntax(document.diff or "(empty)", "diff", theme="ansi_dark", background_color="default"))

    if view.errors:
        errors = Table("stage / role", "kind", "message", title="errors")
        for e in view.errors:
            errors.add_row(e.stage, e.kind, Text(e.message))
        print_table(errors)

    if view.cost:
        cost = Table("role", "calls", "failed", "cached", "prompt tok", "completion tok", "seconds",
                     title="cost by role")
        for role, c in view.cost.items():
            cost.add_row(role, str(c.calls), str(c.failed_calls), str(c.cached_calls),
                         str(c.prompt_tokens), str(c.completion_tokens), _fmt(c.seconds))
        print_table(cost)
    if view.stage_seconds:
        stages = Table("stage", "seconds", title="time by stage")
        for stage, seconds in view.stage_seconds.items():
            stages.add_row(stage, _fmt(float(seconds)))
        print_table(stages)


def report(
    night: Annotated[Optional[str], typer.Argument(help="Night id (default: the newest night).")] = None,
    project: ProjectOpt = None,
    json_: Annotated[bool, typer.Option("--json", help="Print the night's diagnostics.json.")] = False,
    html: Annotated[Optional[Path], typer.Option("--html", help="Write a self-contained HTML report to PATH.")] = None,
) -> None:
    """Show what a night did: verdict and why, scores, held-out tasks, edits with diffs, errors, cost, time."""
    from skillopt_sleep.review.report import load_night, night_view, write_html_report
    from skillopt_sleep.state import ProjectPaths

    project_dir = (project or Path.cwd()).expanduser().resolve()
    with user_errors():
        paths = ProjectPaths(project_dir)
        diagnostics, night_dir = load_night(paths, night)
        if html is not None:
            written = write_html_report(html, paths, diagnostics.night_id)
        view = night_view(diagnostics, night_dir, paths)
    if json_:
        emit_json(diagnostics.model_dump(mode="json"))
        return
    if html is not None:
        stdout.print(f"HTML report: {written}", highlight=False, markup=False)
        return
    render_view(view)


def register(app: typer.Typer) -> None:
    """Add ``report`` to the root app."""
    app.command("report")(report)
