"""Choose the night's backend (``backend = "auto"``) and say why.

Order for ``auto``: a configured OpenAI-compatible endpoint or key (``base_url``/``api_key`` or
``$OPENAI_BASE_URL``/``$OPENAI_API_KEY``) > the user's own agent CLI for the harvested source when it is
installed and logged in (``claude`` for Claude Code, ``codex`` for Codex) > the embedded local model when the
``[local]`` extra is installed > a ``ConfigError`` that says how to configure one. Never a silent fallback.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from dataclasses import dataclass

from skillopt_sleep.backends.base import Backend
from skillopt_sleep.config import SleepConfig
from skillopt_sleep.errors import ConfigError

NO_BACKEND_HELP = (
    "no LLM backend available: set OPENAI_BASE_URL/OPENAI_API_KEY (or 'skillopt-sleep config set base_url URL'), "
    "install and log in to the 'claude' or 'codex' CLI, or install the embedded model with "
    "pip install 'skillopt-sleep[local]'"
)

TINY_NOTE = ("running the tiny embedded model (SmolLM2-135M): the whole night runs with zero setup, but expect few "
             "accepted edits; 'skillopt-sleep models pull qwen2.5-coder-1.5b' or a real endpoint learns for real")


@dataclass
class BackendChoice:
    backend: Backend
    name: str
    reason: str
    note: str = ""

    @property
    def tiny(self) -> bool:
        """True for the bundled SmolLM2-135M: too small to mine tasks or follow rules (see ``LocalBackend.tiny``)."""
        return bool(getattr(self.backend, "tiny", False))


def _build(name: str, config: SleepConfig) -> Backend:
    from skillopt_sleep.backends import backend_options, get_backend

    return get_backend(name, **backend_options(config, name))


def _cli_ready(name: str, config: SleepConfig) -> bool:
    try:
        module = importlib.import_module(f"skillopt_sleep.backends.{name}_cli")
    except ImportError:
        return False
    binary = config.claude_bin if name == "claude" else config.codex_bin
    if not module.find_binary(binary):
        return False
    probe = getattr(module, f"{name}_logged_in", None)
    return bool(probe and probe(binary))


def local_available() -> bool:
    """True when llama-cpp-python is importable (the ``[local]`` extra)."""
    return importlib.util.find_spec("llama_cpp") is not None


def _with_version_note(choice: BackendChoice) -> BackendChoice:
    """Add an agent CLI's note about a version older than the tested one (``AgentCLIBackend.version_note``)."""
    version_note = getattr(choice.backend, "version_note", None)
    note = version_note() if callable(version_note) else ""
    if note:
        choice.note = f"{choice.note}; {note}" if choice.note else note
    return choice


def choose_backend(config: SleepConfig, sources: list[str]) -> BackendChoice:
    """Return the backend for tonight and why. Raises ConfigError when ``auto`` finds none."""
    if config.backend != "auto":
        choice = BackendChoice(_build(config.backend, config), config.backend,
                               f"backend = '{config.backend}' (configured)")
        if choice.tiny:
            choice.note = TINY_NOTE
        return _with_version_note(choice)
    if config.base_url or config.api_key or os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_KEY"):
        return BackendChoice(_build("openai", config), "openai", "an OpenAI-compatible endpoint/key is configured")
    for source, cli in (("claude", "claude"), ("codex", "codex")):
        if source in sources and _cli_ready(cli, config):
            return _with_version_note(BackendChoice(
                _build(cli, config), cli, f"sessions come from {source} and the '{cli}' CLI is installed and logged in"))
    if local_available():
        choice = BackendChoice(_build("local", config), "local",
                               "no endpoint or logged-in agent CLI found; using the embedded local model")
        if choice.tiny:
            choice.note = TINY_NOTE
        return choice
    raise ConfigError(NO_BACKEND_HELP, key="backend")
