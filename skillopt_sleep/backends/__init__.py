"""LLM backends: ``base.py`` holds the protocol; this module is the registry.

Backends are registered by import path and imported only when asked for, so an optional backend whose
module or dependency is missing (e.g. ``local`` without llama-cpp-python) breaks nothing else.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from skillopt_sleep.errors import ConfigError

if TYPE_CHECKING:
    from skillopt_sleep.backends.base import Backend
    from skillopt_sleep.config import SleepConfig

#: registry name -> "package.module.ClassName"
BACKENDS: dict[str, str] = {
    "openai": "skillopt_sleep.backends.openai_compat.OpenAIBackend",
    "mock": "skillopt_sleep.backends.mock.MockBackend",
    "local": "skillopt_sleep.backends.local.LocalBackend",
    "claude": "skillopt_sleep.backends.claude_cli.ClaudeCLIBackend",
    "codex": "skillopt_sleep.backends.codex_cli.CodexCLIBackend",
    "gemini": "skillopt_sleep.backends.gemini_cli.GeminiCLIBackend",
    "copilot": "skillopt_sleep.backends.copilot_cli.CopilotCLIBackend",
    "opencode": "skillopt_sleep.backends.opencode_cli.OpenCodeCLIBackend",
}

#: File (under the state dir) remembering which structured-output format each endpoint accepts.
STRUCTURED_CACHE_FILE = "structured_output_modes.json"


def _import_class(path: str, *, shown_name: str) -> type:
    """Import ``package.module.ClassName`` (or ``package.module:ClassName``); raise ConfigError on failure."""
    module_name, separator, class_name = path.replace(":", ".").rpartition(".")
    if not separator or not module_name or not class_name:
        raise ConfigError(f"'{path}' is not a dotted path 'package.module.ClassName'", key="backend")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(
            f"backend '{shown_name}' is not available: cannot import {module_name} ({exc}); "
            f"install its extra dependencies or choose another backend ({', '.join(BACKENDS)})",
            key="backend",
        ) from None
    found = getattr(module, class_name, None)
    if not isinstance(found, type):
        raise ConfigError(f"backend '{shown_name}': {module_name} has no class {class_name}", key="backend")
    return found


def get_backend(name: str, **options: Any) -> Backend:
    """Return a new backend instance.

    name: a registry name (``openai``, ``mock``, ``local``, ``claude``, ``codex``, ``gemini``, ``copilot``,
    ``opencode``) or a dotted path ``package.module.ClassName``; options: keyword arguments of that class's constructor.
    Raises ConfigError for an unknown name (listing the valid ones) or a backend that cannot be imported.
    """
    if name in BACKENDS:
        path = BACKENDS[name]
    elif "." in name or ":" in name:
        path = name
    else:
        raise ConfigError(f"unknown backend '{name}'; valid names: {', '.join(BACKENDS)} "
                          "(or a dotted path package.module.ClassName)", key="backend")
    backend_class = _import_class(path, shown_name=name)
    return backend_class(**options)


def backend_options(config: SleepConfig, name: str) -> dict[str, Any]:
    """Return the constructor options of backend ``name`` taken from the config."""
    from skillopt_sleep import paths

    if name == "openai":
        return {
            "base_url": config.base_url,
            "api_key": config.api_key,
            "target_model": config.target_model,
            "optimizer_model": config.optimizer_model,
            "judge_model": config.judge_model,
            "timeout_s": config.request_timeout_s,
            "max_retries": config.max_retries,
            "structured_cache_path": paths.state_dir() / STRUCTURED_CACHE_FILE,
        }
    if name == "local":
        return {"model_path": config.model_path, "seed": config.seed}
    if name in ("claude", "codex", "gemini", "copilot", "opencode"):  # the agent CLIs: <name>_bin, <name>_model
        options: dict[str, Any] = {
            "binary": getattr(config, f"{name}_bin"),
            "model": getattr(config, f"{name}_model"),
            "timeout_s": max(config.request_timeout_s, 60.0),
            "max_retries": config.max_retries,
        }
        if name in ("claude", "codex", "opencode"):  # those that run against an endpoint of the user's
            options["base_url"] = getattr(config, f"{name}_base_url")
        if name == "opencode":
            options["user_data_dir"] = config.opencode_home
        return options
    return {}


def backend_from_config(config: SleepConfig, sources: list[str] | None = None) -> Backend:
    """Build the backend the config names; ``auto`` is resolved by ``select.choose_backend`` (see there).

    sources: the harvested transcript sources (``auto`` prefers the matching agent CLI).
    Raises ConfigError for an unknown backend or when ``auto`` finds none.
    """
    from skillopt_sleep.backends.select import choose_backend

    return choose_backend(config, sources or []).backend


__all__ = ["BACKENDS", "backend_from_config", "backend_options", "get_backend"]
