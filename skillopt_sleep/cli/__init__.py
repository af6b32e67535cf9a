"""The command line. ``main`` is the console script; the typer app (``cli.app``) is imported only when needed."""

from __future__ import annotations

import sys


def main() -> None:
    """Run ``skillopt-sleep``. ``--version`` / ``-V`` alone, and ``status`` and ``config show`` as they are
    (``cli.fast.FAST``), are answered without importing typer; everything else goes to the typer app."""
    if sys.argv[1:] in (["--version"], ["-V"]):
        from skillopt_sleep.cli.render import version_line

        print(version_line())
        return
    from skillopt_sleep import collector

    # Imports make the process's modules, classes and schemas in bulk; collecting among them finds next to nothing.
    with collector.paused(keep=True):
        from skillopt_sleep.cli.fast import answer

        if answer(sys.argv[1:]):
            return
        from skillopt_sleep.cli.app import main as app_main

    app_main()
