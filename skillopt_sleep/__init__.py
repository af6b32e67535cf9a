"""skillopt-sleep: a nightly sleep cycle for coding agents.

Public API::

    from skillopt_sleep import load_config, run_night, SleepConfig
    from skillopt_sleep import SkillOptConfig, SkillOptTrainer, SkillEnv, RolloutResult, QAEnv, TaskFileEnv
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__", "load_config", "run_night", "SleepConfig", "SkillOptConfig", "SkillOptTrainer", "SkillEnv",
           "RolloutResult", "QAEnv", "TaskFileEnv"]

#: name -> module that defines it (imported on first use)
_LAZY = {
    "SkillOptConfig": "skillopt_sleep.trainer",
    "SkillOptTrainer": "skillopt_sleep.trainer",
    "SkillEnv": "skillopt_sleep.envs.base",
    "RolloutResult": "skillopt_sleep.envs.base",
    "QAEnv": "skillopt_sleep.envs.qa",
    "TaskFileEnv": "skillopt_sleep.envs.task_file",
}


def __getattr__(name: str):  # lazy: importing the package has no side effects and stays fast
    if name in ("load_config", "SleepConfig"):
        from skillopt_sleep import config

        return getattr(config, name)
    if name == "run_night":
        from skillopt_sleep.night import run_night

        return run_night
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(name)
