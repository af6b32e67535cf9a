"""Choose the night's backend (``backend = "auto"``) and say why.

Order for ``auto``: a configured OpenAI-compatible endpoint or key (``base_url``/``api_key`` or
``$OPENAI_BASE_URL``/``$OPENAI_API_KEY``) > the user's own agent CLI for a harvested source when it is
installed and logged in, in ``AGENT_CLIS`` order (``claude`` for Claude Code, ``codex`` for Codex, ``gemini`` for
Gemini CLI, ``opencode`` for OpenCode) > the embedded local model when the ``[local]`` extra is installed > a
``ConfigError`` that says how to configure one. Never a silent fallback.

"Logged in", without a model call: ``claude auth status``, ``codex login status``, ``opencode auth list`` (a
credential or a provider key), and for Gemini CLI a login file in ``~/.gemini`` (``oauth_creds.json``,
``gemini-credentials.json``, or a ``.env`` naming a key) or ``GEMINI_API_KEY``/``GOOGLE_API_KEY``/Vertex AI in the
environment. The Copilot CLI is not chosen by ``auto`` (set ``backend = copilot``): it keeps its login in the
system keychain and has no command that reports it, and ``GH_TOKEN``/``GITHUB_TOKEN`` are often set for other
tools without Copilot access, so only a model call could tell.
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
    "install and log in to the 'claude', 'codex', 'gemini' or 'opencode' CLI, or install the embedded model with "
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


#: ``(harvested source, agent CLI backend)`` in the order ``auto`` tries them.
AGENT_CLIS: tuple[tuple[str, str], ...] = (("claude", "claude"), ("codex", "codex"), ("gemini", "gemini"),
                                           ("opencode", "opencode"))
#: Environment variables that log the Gemini CLI in (an API key, or Vertex AI).
GEMINI_KEY_ENV = ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI")


def gemini_logged_in(binary: str = "gemini") -> bool:
    """True when ``binary`` is found and the Gemini CLI has a login: a login file in the user's ``.gemini``
    (``oauth_creds.json``, ``gemini-credentials.json``, a ``.env`` naming ``GEMINI_API_KEY``/``GOOGLE_API_KEY``) or
    one of ``GEMINI_KEY_ENV`` set. No process is started (the CLI has no login-status command). Never raises."""
    from skillopt_sleep.backends.gemini_cli import find_binary, user_gemini_dir

    if not find_binary(binary):
        return False
    if any(os.environ.get(name) for name in GEMINI_KEY_ENV):
        return True
    folder = user_gemini_dir()
    if any((folder / name).is_file() for name in ("oauth_creds.json", "gemini-credentials.json")):
        return True
    try:
        dotenv = (folder / ".env").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return any(line.strip().startswith(("GEMINI_API_KEY=", "GOOGLE_API_KEY=")) for line in dotenv.splitlines())


def _cli_ready(name: str, config: SleepConfig) -> bool:
    try:
        module = importlib.import_module(f"skillopt_sleep.backends.{name}_cli")
    except ImportError:
        return False
    binary = getattr(config, f"{name}_bin")
    if not module.find_binary(binary):
        return False
    probe = gemini_logged_in if name == "gemini" else getattr(module, f"{name}_logged_in", None)
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
    for source, cli in AGENT_CLIS:
        if source in sources and _cli_ready(cli, config):
            return _with_version_note(BackendChoice(
                _build(cli, config), cli,
                f"sessions come from {source} and the '{cli}' CLI is installed and logged in"))
    if local_available():
        choice = BackendChoice(_build("local", config), "local",
                               "no endpoint or logged-in agent CLI found; using the embedded local model")
        if choice.tiny:
            choice.note = TINY_NOTE
        return choice
    raise ConfigError(NO_BACKEND_HELP, key="backend")
