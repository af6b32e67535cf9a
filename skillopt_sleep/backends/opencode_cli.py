"""The user's own OpenCode CLI (``opencode run``) as a target/optimizer backend.

Command (every flag in ``OPENCODE_FLAGS``; ``-m PROVIDER/MODEL`` added when a model is known)::

    HOME=SCRATCH/home XDG_CONFIG_HOME=SCRATCH/xdg/config XDG_DATA_HOME=SCRATCH/xdg/data (and STATE, CACHE)
    OPENCODE_CONFIG=SCRATCH/opencode.json OPENCODE_DISABLE_CLAUDE_CODE=1 ... \\
    opencode run --format json --agent skillopt-sleep --title "skillopt-sleep replay" --print-logs
        --log-level ERROR [-m PROVIDER/MODEL]  < prompt on stdin

* No message argument: ``opencode run`` reads the prompt from **stdin** (to EOF) when stdin is not a terminal, so
  the prompt never goes on argv (where long prompts get cut).
* ``--format json``: JSON lines of events (``step_start``, ``text`` with ``part.text``, ``step_finish`` with
  ``part.tokens``, ``error`` with ``error.name`` and ``error.data.message``/``statusCode``).
* ``--agent skillopt-sleep``: the agent our config defines, whose ``prompt`` (read from ``SCRATCH/system.md``
  through OpenCode's ``{file:...}`` substitution) **replaces** OpenCode's long default system prompt with the
  request's system messages (the skill and memory); OpenCode appends only a short note (model name, working
  directory, platform, date). ``"tools": {"*": false}`` and ``"permission": {"*": "deny"}``: the request carries no
  tool at all. (Checked with the real 1.18.33 binary against a capture server: without the ``tools`` entry the
  request lists bash, edit, read, write, webfetch, task, ...; with it none.)
* ``--title``: the session has a title, so OpenCode makes no second model call to write one.
* ``--print-logs --log-level ERROR``: OpenCode's error log goes to stderr, which is read only when a call fails
  (the JSON ``error`` event of e.g. an unknown model says just "Unexpected server error").
* Isolation: ``HOME`` and the four XDG directories point into the scratch directory and ``OPENCODE_CONFIG`` at our
  config, so none of the user's ``~/.config/opencode`` (``opencode.json``, global ``AGENTS.md``, agents, commands,
  plugins, MCP servers), ``~/.opencode`` or ``~/.claude/CLAUDE.md`` and skills reach the replay, and the session
  OpenCode records is written in the scratch directory and removed with it. (Checked with the real 1.18.33 binary:
  with only ``XDG_CONFIG_HOME`` moved, ``~/.opencode/opencode.json``'s instructions and MCP server and
  ``~/.claude/CLAUDE.md`` still reach the request; with the scratch ``HOME`` none does.) The login comes along as a
  symlink to the user's ``auth.json`` (``opencode auth login`` writes it; a refreshed token is written through the
  link) and the provider keys in the environment (``ANTHROPIC_API_KEY``, ...). ``ISOLATION_ENV`` also turns off
  the Claude Code fallbacks, external skills, project config, auto-update, LSP downloads and external plugins.
  Credentials kept in other files under ``HOME`` (an AWS profile, gcloud's application-default login) are not
  seen: give such providers their environment variables.
* The child runs in an empty temporary directory with ``SKILLOPT_SLEEP_REPLAY=1``; the prompt's first line carries
  ``SESSION_MARKER``.

Before the first call, ``opencode auth list`` (no model call, about a second, no network needed): with no
credential in ``auth.json`` and no provider key in the environment, every call fails at once with a fatal error
naming ``opencode auth login``. Without this check an ``opencode run`` with no login does not fail: it falls back
to OpenCode's hosted free model and, offline, retries the network until the timeout.

With ``opencode_base_url`` (any OpenAI-compatible Chat Completions endpoint, e.g. a local model) our config adds a
provider ``skillopt_sleep_endpoint`` on the bundled ``@ai-sdk/openai-compatible`` package (no download, works
offline) with that ``baseURL``, the placeholder key ``ENDPOINT_PLACEHOLDER_KEY`` and the model ``opencode_model``
(``ENDPOINT_DEFAULT_MODEL`` when unset), and ``ENDPOINT_ENV`` (no models.dev fetch, no built-in auth plugins). No
login is needed and none is linked. Before the first call the endpoint's host and port must accept a TCP
connection: OpenCode itself retries a refused connection five times with backoff (about 70 seconds) before it
fails, so a dead URL is a fatal error naming ``opencode_base_url`` at once instead.
"""

from __future__ import annotations

import json
import os
import re
import socket
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from skillopt_sleep.backends.base import ChatRequest, ChatResult
from skillopt_sleep.backends.subprocess_call import (
    AgentCLIBackend,
    AttemptFailed,
    AttemptReply,
    ProcessOutcome,
    chat_with_retries,
    child_environment,
    compile_patterns,
    estimate_tokens,
    find_binary,
    json_line_events,
    matches_any,
    raise_if_refused,
    render_prompt,
    run_contained,
    scratch_dirs,
    structured_text,
    system_prompt,
    timeout_failure,
    without_prompt_echo,
)
from skillopt_sleep.models import Role, Usage
from skillopt_sleep.paths import opencode_data_dir

#: The agent our config defines (its prompt replaces OpenCode's; no tools).
AGENT_NAME = "skillopt-sleep"
#: The session title (a title given up front saves OpenCode's title-writing model call).
SESSION_TITLE = "skillopt-sleep replay"
#: Fixed flags of every call, in one place (see the module docstring for why each is there).
OPENCODE_FLAGS: tuple[str, ...] = ("run", "--format", "json", "--agent", AGENT_NAME, "--title", SESSION_TITLE,
                                   "--print-logs", "--log-level", "ERROR")
#: The OpenCode version these flags were tested with (the pin in .ci/install-agent-clis).
TESTED_VERSION = "1.18.33"
#: Id of the provider our config defines for ``opencode_base_url``.
ENDPOINT_PROVIDER = "skillopt_sleep_endpoint"
#: The key sent to ``opencode_base_url`` (local servers ignore it).
ENDPOINT_PLACEHOLDER_KEY = "skillopt-sleep-local-endpoint"
#: Model id asked of ``opencode_base_url`` when ``opencode_model`` is unset (llama.cpp-style servers ignore it).
ENDPOINT_DEFAULT_MODEL = "default"
#: Environment of every call: none of the user's extras (the scratch HOME and XDG dirs do the rest).
ISOLATION_ENV: dict[str, str] = {
    "OPENCODE_DISABLE_CLAUDE_CODE": "1", "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1",
    "OPENCODE_DISABLE_PROJECT_CONFIG": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_PURE": "1", "OPENCODE_DISABLE_TERMINAL_TITLE": "1",
}
#: Added with ``opencode_base_url``: offline, and no built-in auth plugin (our provider needs none).
ENDPOINT_ENV: dict[str, str] = {"OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1"}
#: Variables of the user's shell that would bring their own config, permissions or database back.
DROPPED_ENV = ("OPENCODE_CONFIG", "OPENCODE_CONFIG_DIR", "OPENCODE_CONFIG_CONTENT", "OPENCODE_PERMISSION",
               "OPENCODE_TUI_CONFIG", "OPENCODE_DB", "OPENCODE_AUTO_SHARE", "OPENCODE_ENABLE_EXA",
               "OPENCODE_EXPERIMENTAL")
#: The login file OpenCode keeps in its data directory (``opencode auth login`` writes it).
AUTH_FILE = "auth.json"
#: Seconds the ``opencode auth list`` probe may take.
AUTH_LIST_TIMEOUT_S = 30.0
#: Seconds the TCP probe of ``opencode_base_url`` may take.
ENDPOINT_PROBE_TIMEOUT_S = 5.0

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_AUTH_ERRORS = compile_patterns(
    r"ProviderAuthError", r"\b401\b", r"unauthori[sz]ed", r"invalid[_ ]api[_ ]key", r"incorrect api key",
    r"authentication", r"api key (is )?(missing|required|not set)", r"token (has )?expired", r"not logged in",
)
_FATAL_ERRORS = compile_patterns(
    r"ProviderModelNotFoundError", r"model not found", r"model[^\n]{0,80}(does not exist|not supported)",
    r"agent[^\n]{0,40}not found", r"\b403\b", r"forbidden", r"ConfigInvalidError", r"ConfigJsonError",
    r"insufficient[_ ]quota", r"credit balance",
)
_UNREACHABLE = compile_patterns(r"cannot connect to api", r"unable to connect", r"econnrefused",
                                r"connection refused")
#: What the CLI prints on stderr when it rejects its argv (yargs prints the usage and exits 1, no message).
_USAGE = compile_patterns(r"run opencode with a message", r"unknown argument")
_LOGIN_FIX = ("log in to OpenCode: run `opencode auth login` in a terminal and choose a provider (or set its key, "
              "e.g. ANTHROPIC_API_KEY or OPENAI_API_KEY), or point opencode_base_url at an OpenAI-compatible "
              "endpoint; then run the night again")


class OpenCodeCLIBackend(AgentCLIBackend):
    """Calls ``opencode run`` once per attempt (see the module docstring for the exact command and environment).

    binary: ``opencode`` on PATH or an absolute path (config ``opencode_bin``). model: the target model (``-m``,
    config ``opencode_model``: ``provider/model`` such as ``anthropic/claude-sonnet-4-5``, or with ``base_url`` the
    model id at that endpoint; None: OpenCode's default for your login). optimizer_model: model of the miner, judge
    and optimizer roles (default: model). base_url: an OpenAI-compatible endpoint (config ``opencode_base_url``;
    see the module docstring). timeout_s: seconds per attempt, after which the process group is killed (a transient
    "timeout"). max_retries: retries of a transient failure; backoff_base_s: seconds of the first wait.
    user_data_dir: the user's OpenCode data folder whose ``auth.json`` is linked (config ``opencode_home``; default
    ``$XDG_DATA_HOME/opencode``, else ``~/.local/share/opencode``).

    Usage tokens come from the ``step_finish`` events (prompt = input + cache read + cache write tokens,
    completion = output + reasoning tokens); estimated as len(text) / 4 when they report none. ``temperature``,
    ``max_tokens`` and ``seed`` are ignored.
    """

    name = "opencode"
    runs_tools = False
    binary_setting = "opencode_bin"
    binary_label = "OpenCode CLI"
    install_hint = "Install OpenCode (npm install -g opencode-ai)"
    tested_version = TESTED_VERSION
    update_hint = "update OpenCode (`opencode upgrade`, or npm install -g opencode-ai)"

    def __init__(self, *, binary: str = "opencode", base_url: str | None = None,
                 user_data_dir: str | os.PathLike[str] | None = None, **options):
        super().__init__(binary=binary, **options)
        self.base_url = base_url.rstrip("/") if base_url else None
        self.user_data_dir = Path(user_data_dir).expanduser() if user_data_dir else None
        self._preflight_lock = threading.Lock()
        self._preflight_done = False
        self._preflight_error: tuple[str, str] | None = None

    # -- the pre-flight check

    def preflight_problem(self, path: str) -> tuple[str, str] | None:
        """``(error, fix)`` when no call can work, else None; checked once per backend (the first call).

        Without ``base_url``: ``opencode auth list`` reports no credential and no provider key (``opencode_logged_in``
        semantics; a probe that fails some other way is not taken as an answer). With it: nothing accepts a TCP
        connection at its host and port.
        """
        with self._preflight_lock:
            if not self._preflight_done:
                self._preflight_done = True
                if self.base_url:
                    self._preflight_error = _endpoint_problem(self.base_url)
                else:
                    status = auth_status(path)
                    if status is not None and not status.logged_in:
                        self._preflight_error = (
                            f"opencode is not logged in (`opencode auth list`: {status.summary}): {_LOGIN_FIX}",
                            _LOGIN_FIX)
            return self._preflight_error

    # -- one call

    def cli_model(self, role: Role) -> str | None:
        """The ``-m`` value for ``role``: ``skillopt_sleep_endpoint/MODEL`` with ``base_url``, else the configured
        ``provider/model`` (None: OpenCode's default)."""
        model = self._configured_model(role)
        if self.base_url:
            return f"{ENDPOINT_PROVIDER}/{model or ENDPOINT_DEFAULT_MODEL}"
        return model

    def command(self, path: str, role: Role) -> list[str]:
        """The argv of one call (the prompt is not part of it: it goes on stdin)."""
        argv = [path, *OPENCODE_FLAGS]
        model = self.cli_model(role)
        if model:
            argv += ["-m", model]
        return argv

    def config(self, system_path: str, role: Role) -> dict[str, Any]:
        """The OpenCode config of one call (``OPENCODE_CONFIG``): our agent, and with ``base_url`` our provider."""
        config: dict[str, Any] = {
            "$schema": "https://opencode.ai/config.json",
            "autoupdate": False,
            "share": "disabled",
            "snapshot": False,
            "instructions": [],
            "permission": {"*": "deny"},
            "agent": {AGENT_NAME: {"mode": "primary", "prompt": "{file:" + system_path + "}",
                                   "tools": {"*": False}, "permission": {"*": "deny"}}},
        }
        if self.base_url:
            model = self._configured_model(role) or ENDPOINT_DEFAULT_MODEL
            config["provider"] = {ENDPOINT_PROVIDER: {
                "npm": "@ai-sdk/openai-compatible", "name": "skillopt-sleep endpoint",
                "options": {"baseURL": self.base_url, "apiKey": ENDPOINT_PLACEHOLDER_KEY},
                "models": {model: {"name": model}},
            }}
            config["enabled_providers"] = [ENDPOINT_PROVIDER]
            config["model"] = config["small_model"] = f"{ENDPOINT_PROVIDER}/{model}"
        return config

    def chat(self, request: ChatRequest) -> ChatResult:
        """Run the request through ``opencode run``; never raises for a failed call.

        Returns text (compact JSON text when ``request.json_schema`` is set), usage, latency_s (seconds, all
        attempts), attempts; on failure ``error`` and ``error_kind``: fatal for a missing binary, no login (the
        pre-flight check), an endpoint that refuses connections, an auth error, an unknown flag, model or agent;
        transient for timeouts, other failures, empty replies and replies without the requested JSON.
        """
        model = self.model_for(request.role)
        path = find_binary(self.binary)
        if path is None:
            return self.missing_binary_result(model)
        problem = self.preflight_problem(path)
        if problem:
            error, fix = problem
            return ChatResult(error=error, error_kind="fatal", model=model, fix=fix)
        rest = request.model_copy(update={"messages": [m for m in request.messages if m.role != "system"]})
        system, prompt = system_prompt(request), render_prompt(rest)
        return chat_with_retries(lambda: self._attempt(path, system, prompt, request), model=model,
                                 max_retries=self.max_retries, backoff_base_s=self.backoff_base_s)

    def _attempt(self, path: str, system: str, prompt: str, request: ChatRequest) -> AttemptReply:
        with scratch_dirs("skillopt-sleep-opencode-") as (work_dir, scratch):
            env = self.environment(Path(scratch))
            system_path = Path(scratch) / "system.md"
            system_path.write_text(system, encoding="utf-8")
            Path(env["OPENCODE_CONFIG"]).write_text(
                json.dumps(self.config(str(system_path), request.role), indent=2), encoding="utf-8")
            argv = self.command(path, request.role)
            try:
                outcome = run_contained(argv, stdin_text=prompt, cwd=work_dir, timeout_s=self.timeout_s, env=env)
            except OSError as exc:
                raise self.start_failed(path, exc) from None
        text, usage = read_reply(outcome, timeout_s=self.timeout_s, prompt=prompt, endpoint=self.base_url)
        if request.json_schema is not None:
            text = structured_text(text)
        if usage is None:
            usage = Usage(prompt_tokens=estimate_tokens(system + prompt), completion_tokens=estimate_tokens(text))
        return AttemptReply(text=text, usage=usage)

    def environment(self, scratch: Path) -> dict[str, str]:
        """The child's environment: the scratch HOME and XDG dirs (the login linked in, without ``base_url``),
        ``OPENCODE_CONFIG`` (written by the caller) and ``ISOLATION_ENV`` (plus ``ENDPOINT_ENV`` with ``base_url``)."""
        home, xdg = scratch / "home", scratch / "xdg"
        dirs = {name: xdg / name.split("_")[1].lower() for name in
                ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME")}
        for folder in (home, *dirs.values()):
            folder.mkdir(parents=True)
        if not self.base_url:
            link_login(self.user_data_dir or opencode_data_dir(), dirs["XDG_DATA_HOME"] / "opencode")
        extra = {"HOME": str(home), **{name: str(folder) for name, folder in dirs.items()},
                 "OPENCODE_CONFIG": str(scratch / "opencode.json"), **ISOLATION_ENV,
                 **(ENDPOINT_ENV if self.base_url else {})}
        return child_environment(drop=DROPPED_ENV, extra=extra)


# --------------------------------------------------------------------------- the user's login


def link_login(user_dir: Path, scratch_data_dir: Path) -> None:
    """Create ``scratch_data_dir`` holding a symlink to the user's ``auth.json`` when it exists (nothing else)."""
    scratch_data_dir.mkdir(parents=True, exist_ok=True)
    source = user_dir / AUTH_FILE
    if source.is_file():
        (scratch_data_dir / AUTH_FILE).symlink_to(source)


class AuthStatus:
    """What ``opencode auth list`` said: ``credentials`` in ``auth.json``, provider ``keys`` in the environment."""

    def __init__(self, credentials: int, keys: int):
        self.credentials = credentials
        self.keys = keys

    @property
    def logged_in(self) -> bool:
        return self.credentials > 0 or self.keys > 0

    @property
    def summary(self) -> str:
        return f"{self.credentials} credentials, {self.keys} environment variables"


def parse_auth_list(output: str) -> AuthStatus | None:
    """The counts ``opencode auth list`` prints (``N credentials``, and ``N environment variables`` when a provider
    key is set), colors stripped; None when the output holds no ``N credentials`` line."""
    text = _ANSI.sub("", output)
    credentials = re.search(r"(\d+)\s+credentials?\b", text)
    if credentials is None:
        return None
    keys = re.search(r"(\d+)\s+environment variables?\b", text)
    return AuthStatus(int(credentials.group(1)), int(keys.group(1)) if keys else 0)


def auth_status(path: str) -> AuthStatus | None:
    """Run ``opencode auth list`` (the user's own environment, stdin closed, ``AUTH_LIST_TIMEOUT_S`` seconds) and
    parse it; None when it cannot run, times out, fails or prints no count. Never raises."""
    try:
        with scratch_dirs("skillopt-sleep-opencode-") as (work_dir, _scratch):
            outcome = run_contained([path, "auth", "list"], stdin_text="", cwd=work_dir,
                                    timeout_s=AUTH_LIST_TIMEOUT_S, env=child_environment())
    except OSError:
        return None
    if outcome.timed_out or outcome.returncode != 0:
        return None
    return parse_auth_list(f"{outcome.stdout}\n{outcome.stderr}")


def opencode_logged_in(binary: str = "opencode") -> bool:
    """True when ``binary`` is found and ``opencode auth list`` shows a credential or a provider key. Used by
    auto-selection. Never raises."""
    path = find_binary(binary)
    status = auth_status(path) if path else None
    return bool(status and status.logged_in)


def _endpoint_problem(base_url: str) -> tuple[str, str] | None:
    """``(error, fix)`` when nothing accepts a TCP connection at ``base_url``'s host and port, else None."""
    parts = urlsplit(base_url)
    fix = f"start the model server at {base_url}, or fix opencode_base_url ('skillopt-sleep config show')"
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        port = None
    if parts.scheme not in ("http", "https") or not parts.hostname or port is None:
        return (f"opencode_base_url = {base_url} is not an http(s) URL", "set opencode_base_url to the endpoint's "
                "URL ending in /v1, e.g. http://127.0.0.1:8080/v1")
    try:
        with socket.create_connection((parts.hostname, port), timeout=ENDPOINT_PROBE_TIMEOUT_S):
            return None
    except OSError as exc:
        return f"nothing answers at opencode_base_url = {base_url} ({exc}): {fix}", fix


# --------------------------------------------------------------------------- reading the CLI's output


def _part(event: dict[str, Any]) -> dict[str, Any]:
    part = event.get("part")
    return part if isinstance(part, dict) else {}


def reply_text(events: list[dict[str, Any]]) -> str:
    """The text of the last assistant message: its ``text`` parts in order (earlier messages are left out)."""
    texts = [_part(event) for event in events if event.get("type") == "text"]
    texts = [part for part in texts if isinstance(part.get("text"), str)]
    if not texts:
        return ""
    last = texts[-1].get("messageID")
    return "".join(part["text"] for part in texts if part.get("messageID") == last).strip()


def read_usage(events: list[dict[str, Any]]) -> Usage | None:
    """Tokens summed over the ``step_finish`` events, or None when they report none."""
    prompt = completion = 0
    for event in events:
        if event.get("type") != "step_finish":
            continue
        tokens = _part(event).get("tokens")
        if not isinstance(tokens, dict):
            continue
        cache = tokens.get("cache") if isinstance(tokens.get("cache"), dict) else {}

        def count(source: dict[str, Any], key: str) -> int:
            value = source.get(key)
            return value if isinstance(value, int) and value > 0 else 0

        prompt += count(tokens, "input") + count(cache, "read") + count(cache, "write")
        completion += count(tokens, "output") + count(tokens, "reasoning")
    if prompt == 0 and completion == 0:
        return None
    return Usage(prompt_tokens=prompt, completion_tokens=completion)


def _error_message(event: dict[str, Any]) -> str:
    error = event.get("error")
    if not isinstance(error, dict):
        return str(error or "")
    data = error.get("data") if isinstance(error.get("data"), dict) else {}
    parts = [str(error.get("name") or ""), str(data.get("message") or "")]
    if data.get("statusCode"):
        parts.append(f"status {data['statusCode']}")
    return ": ".join(part for part in parts if part)


def read_reply(outcome: ProcessOutcome, *, timeout_s: float, prompt: str = "",
               endpoint: str | None = None) -> tuple[str, Usage | None]:
    """Return ``(text, usage or None)`` of a finished ``opencode run``; raise ``AttemptFailed`` otherwise.

    prompt: the prompt sent (an echo of it is not taken as evidence of an error kind). endpoint:
    ``opencode_base_url``, when set (a refused connection to it is fatal). stderr (OpenCode's error log) is only
    ever part of an error message, never the reply.
    """
    if outcome.timed_out:
        raise timeout_failure("opencode", timeout_s)
    events = json_line_events(outcome.stdout)
    errors = [_error_message(event) for event in events if event.get("type") == "error"]
    text = reply_text(events)
    if outcome.returncode == 0 and not errors and text:
        return text, read_usage(events)
    said = "; ".join(error for error in errors if error)
    detail = outcome.failure_detail(said, show_stdout=not events)
    evidence = without_prompt_echo(f"{said}\n{outcome.stderr}\n{outcome.stdout if not events else ''}", prompt)
    if endpoint and matches_any(evidence, _UNREACHABLE):
        fix = f"start the model server at {endpoint}, or fix opencode_base_url ('skillopt-sleep config show')"
        raise AttemptFailed(f"nothing answers at opencode_base_url = {endpoint} ({detail}): {fix}", "fatal", fix=fix)
    if not events and outcome.returncode != 0 and matches_any(outcome.stderr, _USAGE):
        raise AttemptFailed(f"opencode rejected its command line and printed its usage ({detail}): update OpenCode; "
                            f"skillopt-sleep runs `opencode {' '.join(_shown(OPENCODE_FLAGS))}`", "fatal",
                            fix="update OpenCode (`opencode upgrade`, or npm install -g opencode-ai)")
    raise_if_refused("opencode", detail, logged_out=matches_any(evidence, _AUTH_ERRORS),
                     rejected=matches_any(evidence, _FATAL_ERRORS), login_fix=_LOGIN_FIX,
                     rejected_hint="check the model name (provider/model), and update OpenCode if a flag is unknown",
                     rejected_fix="check opencode_model ('skillopt-sleep config show'; `opencode models` lists "
                                  "yours), and update OpenCode (`opencode upgrade`) if a flag is unknown")
    if outcome.returncode != 0 or errors:
        status = outcome.returncode if outcome.returncode != 0 else "0 with an error event"
        raise AttemptFailed(f"opencode exited with status {status} ({detail})", "transient")
    raise AttemptFailed(f"empty reply from opencode: no text event ({detail})", "transient")


def _shown(flags: tuple[str, ...]) -> list[str]:
    return [json.dumps(flag) if " " in flag else flag for flag in flags]


__all__ = ["AGENT_NAME", "ENDPOINT_PROVIDER", "OPENCODE_FLAGS", "TESTED_VERSION", "OpenCodeCLIBackend", "find_binary",
           "opencode_logged_in", "parse_auth_list", "read_reply", "read_usage"]
