"""``skillopt-sleep train --tasks FILE [--epochs N] [--out DIR] [--backend B] [--json]``: train a skill document
offline on mined tasks (``TaskFileEnv`` + ``SkillOptTrainer``), with a progress display on stderr when it is a
terminal (``-q``: none) and a final table. A ``--out`` directory that already holds a run is resumed after its last
completed step. Exit codes: those of ``errors`` (2 backend error, 3 budget exhausted: the run directory keeps every
completed step)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from skillopt_sleep.cli.common import (
    QuietOpt,
    emit_json,
    make_progress,
    print_table,
    resolve_config,
    stderr,
    stdout,
    user_errors,
)


class StageProgress:
    """The trainer's events told to a ``progress.Progress`` (``common.make_progress``: nothing unless stderr is a
    terminal): steps done / total (the estimate of the time left follows the steps), the stage of the current step,
    the LLM calls and tokens so far, and one line per step ended."""

    def __init__(self, progress: Any) -> None:
        self.progress = progress

    def __enter__(self) -> StageProgress:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.close()

    def handle(self, event: dict[str, Any]) -> None:
        """The trainer's ``on_event`` callback."""
        kind = event["event"]
        if kind == "train_begin":
            self.progress.steps(event["completed"], event["total"])
        elif kind == "evaluate":
            self.progress.stage(f"evaluating the {event['skill']} skill on the {event['split']} split")
        elif kind == "stage" and event["phase"] == "begin":
            self.progress.stage(event["stage"])
        elif kind == "call":
            self.progress.calls(event["calls"])
            self.progress.tokens(event["tokens"])
        elif kind == "step_end":
            record = event["record"]
            self.progress.steps(event["step"], event["total"])
            self.progress.note(f"step {record['step']}/{event['total']}: {record['verdict']} "
                               f"(edit budget {record['edit_budget']}, {len(record['edits']['applied'])} applied)")


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def render_summary(summary: dict[str, Any], out_root: Path, resumed: bool) -> None:
    """Print the final table of a training run to stdout."""
    from rich.table import Table

    table = Table("", "initial skill", "best skill", title=f"training summary ({summary['metric']} gate)")
    selection = summary["selection"]
    table.add_row(f"selection ({selection['split']}) gate score", _fmt(selection["baseline"]["gate"]),
                  _fmt(selection["best"]["gate"]))
    if summary["test"]:
        test = summary["test"]
        table.add_row(f"test ({test['split']}) hard", _fmt(test["baseline"]["hard"]), _fmt(test["best"]["hard"]))
        table.add_row(f"test ({test['split']}) soft", _fmt(test["baseline"]["soft"]), _fmt(test["best"]["soft"]))
    print_table(table)
    stdout.print(f"steps {summary['steps_completed']}/{summary['steps_total']}"
                 f"{' (resumed)' if resumed else ''}, accepted {summary['accepted_steps']}, "
                 f"best step {summary['best_step']}", highlight=False)
    stdout.print(f"best skill: {out_root / 'best_skill.md'}", highlight=False)


def train(
    tasks: Annotated[Path, typer.Option("--tasks", help="TaskRecord JSONL ('skillopt-sleep harvest --output FILE').")],
    epochs: Annotated[int, typer.Option("--epochs", min=1, help="Passes over the train tasks.")] = 1,
    out: Annotated[Optional[Path], typer.Option("--out", help="Run directory (default: skillopt-runs/<tasks name>); "
                                                "one that holds a run is resumed.")] = None,
    backend: Annotated[Optional[str], typer.Option(
        "--backend", help="auto | openai | local | claude | codex | gemini | copilot | opencode | mock")] = None,
    batch_size: Annotated[Optional[int], typer.Option("--batch-size", min=1, help="Train tasks per step.")] = None,
    memory: Annotated[Optional[Path], typer.Option("--memory", help="Fixed memory text shown to the target "
                                                   "(e.g. the project's CLAUDE.md).")] = None,
    json_: Annotated[bool, typer.Option("--json", help="Print the summary as JSON to stdout.")] = False,
    quiet: QuietOpt = False,
    config_file: Annotated[Optional[Path], typer.Option("--config", help="Config TOML file.",
                                                        envvar="SKILLOPT_SLEEP_CONFIG")] = None,
) -> None:
    """Train the skill document offline on mined tasks: epochs of SkillOpt steps, the night's own step code."""
    from skillopt_sleep.backends.select import choose_backend
    from skillopt_sleep.envs.task_file import TaskFileEnv
    from skillopt_sleep.errors import BackendError, BudgetExhausted
    from skillopt_sleep.trainer import SkillOptConfig, SkillOptTrainer

    out_root = out or Path("skillopt-runs") / tasks.stem
    resumed = (out_root / "trainer_state.json").exists()
    with user_errors():
        config = resolve_config(config_file, backend=backend)
        env = TaskFileEnv(tasks, memory=memory.read_text(encoding="utf-8") if memory else "")
        if env.skipped:
            stderr.print(f"skipped malformed task lines: {', '.join(f'{k} {v}' for k, v in env.skipped.items())}",
                         highlight=False)
        overrides: dict[str, Any] = {"num_epochs": epochs, "out_root": out_root}
        if batch_size is not None:
            overrides["batch_size"] = batch_size
        train_config = SkillOptConfig.from_config(config, **overrides)
        choice = choose_backend(config, sorted({task.source for task in env.tasks}))
        if choice.note:
            stderr.print(f"note: {choice.note}", highlight=False)
        if resumed:
            stderr.print(f"resuming the run in {out_root}", highlight=False)
        progress = StageProgress(make_progress(quiet=quiet, json_=json_, stage_lines=False))
        trainer = SkillOptTrainer(config=train_config, env=env, optimizer_client=choice.backend,
                                  on_event=progress.handle)
        try:
            with progress:
                summary = trainer.train()
        except (BackendError, BudgetExhausted) as exc:
            stderr.print(f"[red]error:[/red] {exc}; completed steps are kept in {out_root}: run the same command "
                         "again to resume", highlight=False)
            raise typer.Exit(code=exc.exit_code) from None
    if json_:
        emit_json({"out_root": str(out_root), "resumed": resumed, **summary})
    else:
        render_summary(summary, out_root, resumed)


def register(app: typer.Typer) -> None:
    """Add ``train`` to the root app."""
    app.command("train")(train)
