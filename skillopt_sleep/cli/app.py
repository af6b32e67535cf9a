"""The ``skillopt-sleep`` command (typer). Each command parses, calls one library function, and renders."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from skillopt_sleep.cli import (
    adopt_cmd,
    config_cmd,
    models_cmd,
    report_cmd,
    rules_cmd,
    schedule_cmd,
    team_cmd,
    train_cmd,
)
from skillopt_sleep.cli.common import (
    ConfigOpt,
    JsonOpt,
    ProjectOpt,
    QuietOpt,
    emit_json,
    home_flags,
    make_progress,
    resolve_config,
    stderr,
    stdout,
    user_errors,
)
from skillopt_sleep.cli.render import version_line

app = typer.Typer(
    name="skillopt-sleep",
    help="A nightly sleep cycle for coding agents: learn your house rules from your own sessions.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},  # click hands it down to every sub-command
    add_completion=True,  # --install-completion / --show-completion (bash, zsh, fish, PowerShell)
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain click help: rendering it with rich would double the start-up of --help
)

ScopeOpt = Annotated[Optional[str], typer.Option("--scope", help="project | all")]
SourceOpt = Annotated[Optional[str], typer.Option(
    "--source", help="auto | all | a source (claude, codex, gemini, copilot, opencode, cursor, aider, cline) | "
                     "several, comma-separated")]
LookbackOpt = Annotated[Optional[float], typer.Option("--lookback-hours", help="First-night lookback (0 = all).")]
ClaudeHomeOpt = Annotated[Optional[Path], typer.Option("--claude-home", help="Claude Code root to read.")]
CodexHomeOpt = Annotated[Optional[Path], typer.Option("--codex-home", help="Codex CLI root to read.")]
HomeOpt = Annotated[Optional[list[str]], typer.Option(
    "--home", help="SOURCE=PATH: the root to read for a source (repeatable), e.g. --home gemini=~/.gemini")]


def _version(value: bool) -> None:
    if value:
        typer.echo(version_line())
        raise typer.Exit()


@app.callback()
def _root(version: Annotated[bool, typer.Option("--version", "-V", callback=_version, is_eager=True,
                                                help="Print the version and exit.")] = False,
          verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log stages and every LLM call to stderr.")]
          = False) -> None:
    """skillopt-sleep"""
    if verbose:
        import logging

        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", stream=sys.stderr)


@app.command("run-now")
def run_now(
    project: ProjectOpt = None,
    scope: ScopeOpt = None,
    source: SourceOpt = None,
    backend: Annotated[Optional[str], typer.Option(
        "--backend", help="auto | openai | local | claude | codex | gemini | copilot | opencode | mock")] = None,
    model_path: Annotated[Optional[Path], typer.Option("--model-path", help="GGUF file for --backend local.")] = None,
    gate_mode: Annotated[Optional[str], typer.Option("--gate-mode", help="on | off")] = None,
    lookback_hours: LookbackOpt = None,
    claude_home: ClaudeHomeOpt = None,
    codex_home: CodexHomeOpt = None,
    home: HomeOpt = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Harvest and mine only: no LLM call, nothing written (no night directory, the "
                          "checkpoint stays).")] = False,
    apply: Annotated[bool, typer.Option(
        "--apply", help="Write accepted documents to the project (atomic, with backup).")] = False,
    json_: JsonOpt = False,
    quiet: QuietOpt = False,
    config_file: ConfigOpt = None,
) -> None:
    """Run one night now: harvest -> mine -> replay -> reflect -> bounded edits -> gate -> diagnostics.json."""
    from skillopt_sleep.night import run_night

    with user_errors():
        config = resolve_config(config_file, scope=scope, source=source, backend=backend, model_path=model_path,
                                gate_mode=gate_mode, lookback_hours=lookback_hours,
                                **home_flags(home, claude_home=claude_home, codex_home=codex_home))
        with make_progress(quiet=quiet, json_=json_) as progress:
            result = run_night(config, project=project or Path.cwd(), dry_run=dry_run, apply=apply,
                               progress=progress)
    diagnostics = result.diagnostics
    if json_:
        emit_json({"night_dir": None if dry_run else str(result.night_dir), "exit_code": result.exit_code,
                   **diagnostics.model_dump(mode="json")})
    else:
        from rich.text import Text

        from skillopt_sleep.model_store import size_text
        from skillopt_sleep.review.changes import learned_lines
        from skillopt_sleep.review.verdicts import verdict

        color = {"learned": "green", "waiting": "yellow", "rejected": "yellow", "failed": "red",
                 "interrupted": "red"}.get(verdict(diagnostics.model_dump(mode="json")), "cyan")
        stdout.print(Text(diagnostics.summary, style=color))  # plain text: a rule may hold "[...]"
        for line in learned_lines(diagnostics):
            stdout.print(Text(line))
        pulled = (diagnostics.backend or {}).get("model_pull")
        if pulled:
            stdout.print(f"model: pulled {pulled['model']} on first use from {pulled['source']} "
                         f"({size_text(pulled['size_bytes'])}, {pulled['seconds']:.0f} s): {pulled['path']}",
                         highlight=False)
        backend = diagnostics.backend
        if backend:
            stdout.print(f"backend: {backend.get('name')} ({backend.get('reason')}); models: "
                         f"{backend.get('models', {}).get('target')} / {backend.get('models', {}).get('optimizer')}",
                         highlight=False)
            if backend.get("note"):
                stdout.print(f"note: {backend['note']}", highlight=False)
        if diagnostics.proposed:
            stdout.print("proposed: " + ", ".join(diagnostics.proposed), highlight=False)
        if diagnostics.applied:
            stdout.print("applied: " + ", ".join(diagnostics.applied), highlight=False)
        if dry_run:
            stdout.print("dry run: nothing was written (the tasks: skillopt-sleep harvest)", highlight=False)
        else:
            stdout.print(f"diagnostics: {result.night_dir / 'diagnostics.json'}", highlight=False)
    raise typer.Exit(code=result.exit_code)


@app.command("harvest")
def harvest_cmd(
    project: ProjectOpt = None,
    scope: ScopeOpt = None,
    source: SourceOpt = None,
    lookback_hours: LookbackOpt = None,
    claude_home: ClaudeHomeOpt = None,
    codex_home: CodexHomeOpt = None,
    home: HomeOpt = None,
    output: Annotated[Optional[Path], typer.Option(
        "--output", help="Write the mined tasks (JSONL, mode 0600).")] = None,
    json_: JsonOpt = False,
    config_file: ConfigOpt = None,
) -> None:
    """Show the sessions and tasks a night would use (does not advance the checkpoint)."""
    from skillopt_sleep.mine.preview import preview_harvest

    with user_errors():
        config = resolve_config(config_file, scope=scope, source=source, lookback_hours=lookback_hours,
                                **home_flags(home, claude_home=claude_home, codex_home=codex_home))
        preview = preview_harvest(config, project=project or Path.cwd(), output=output)
    if json_:
        emit_json(preview.model_dump(mode="json"))  # the shape: mine.preview.HarvestPreview
        return
    if not preview.sources:
        stdout.print("sources: none found", highlight=False)
    for name, stats in preview.per_source.items():
        line = (f"{name}: files scanned {stats.files_scanned}, sessions {stats.sessions_harvested}, "
                f"requests {stats.requests}, secrets redacted {stats.secrets_redacted}")
        if stats.sessions_skipped:
            line += "; skipped sessions: " + ", ".join(f"{k} {v}" for k, v in stats.sessions_skipped.items())
        if stats.malformed_lines:
            line += "; malformed lines: " + ", ".join(f"{k} {v}" for k, v in stats.malformed_lines.items())
        stdout.print(line, highlight=False, markup=False)
    for task in preview.tasks:
        stated = [f"{rule.text} ({rule.scope.replace('_', '-')})" for rule in task.rules]
        rules = f"  rules: {'; '.join(stated)}" if stated else ""
        split = task.split if task.replayable else "kept"  # evidence only: its rules count, never replayed
        why = f"  (not replayable: {task.not_replayable})" if not task.replayable else ""
        judged = "checks" if task.hard_evidence else ("rubric" if task.replayable else "-")
        stdout.print(f"[{split:>5}] {task.id} x{task.recurrence} {task.reaction:<11} {judged:<6} "
                     f"{task.request_head}{rules}{why}", highlight=False, markup=False)
    if output:
        stderr.print(f"tasks written to {output}", highlight=False)


# The other command groups, listed after run-now and harvest in --help.
schedule_cmd.register(app)
adopt_cmd.register(app)
rules_cmd.register(app)
report_cmd.register(app)
app.add_typer(config_cmd.app, name="config")
models_cmd.register(app)
train_cmd.register(app)
team_cmd.register(app)


def main() -> None:
    app(prog_name="skillopt-sleep")  # the same name under ``python -m skillopt_sleep``: help and completion name it
