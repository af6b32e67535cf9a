"""Environments for the trainer (``skillopt_sleep.trainer.SkillOptTrainer``).

``SkillEnv`` (the protocol) and ``RolloutResult`` live in ``envs.base``; the reference environments are
``TaskFileEnv`` (mined TaskRecords from ``skillopt-sleep harvest --output``, scored by the engine's judges) and
``QAEnv`` (questions with accepted answers). Names are imported lazily (no side effects at import).
"""

from __future__ import annotations

__all__ = ["QAEnv", "RolloutClient", "RolloutResult", "SkillEnv", "TaskFileEnv", "default_task_for"]

_HOMES = {
    "QAEnv": "skillopt_sleep.envs.qa",
    "RolloutClient": "skillopt_sleep.envs.base",
    "RolloutResult": "skillopt_sleep.envs.base",
    "SkillEnv": "skillopt_sleep.envs.base",
    "default_task_for": "skillopt_sleep.envs.base",
    "TaskFileEnv": "skillopt_sleep.envs.task_file",
}


def __getattr__(name: str):
    if name in _HOMES:
        import importlib

        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(name)
