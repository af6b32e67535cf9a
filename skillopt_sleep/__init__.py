"""skillopt-sleep: a nightly sleep cycle for coding agents.

Public API::

    from skillopt_sleep import load_config, run_night, SleepConfig
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__", "load_config", "run_night", "SleepConfig"]


def __getattr__(name: str):  # lazy: importing the package has no side effects and stays fast
    if name in ("load_config", "SleepConfig"):
        from skillopt_sleep import config

        return getattr(config, name)
    if name == "run_night":
        from skillopt_sleep.night import run_night

        return run_night
    raise AttributeError(name)
