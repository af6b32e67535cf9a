"""The user's own Gemini CLI (``gemini -p``) as a target/optimizer backend.

Command (every flag in ``GEMINI_FLAGS``, ``--model`` added when configured)::

    GEMINI_CLI_HOME=SCRATCH/home GEMINI_SYSTEM_MD=SCRATCH/system.md \\
    gemini -p "" --output-format json --skip-trust [--model MODEL]  < prompt on stdin

* ``-p ""``: headless mode; the CLI appends the (empty) ``-p`` text to what it reads on **stdin**, so the prompt
  never goes on argv (where long prompts get cut).
* ``GEMINI_CLI_HOME`` points the CLI at a scratch home whose ``.gemini/`` holds only what logs it in: symlinks to
  the user's ``oauth_creds.json``, ``gemini-credentials.json``, ``google_accounts.json`` and ``.env`` (when they
  exist) and a ``settings.json`` with the user's ``security.auth`` section and ``tools.core = []``. So none of the
  user's ``~/.gemini/GEMINI.md`` memory, settings, hooks, MCP servers, extensions, skills or agents reach the replay,
  no tool is registered, and the session the CLI records is written in the scratch home and removed with it.
  (Checked with the real 0.61.0 binary against a capture server: without it a planted ``~/.gemini/GEMINI.md`` rule
  is in the request; with it the request holds only our system prompt and ``"functionDeclarations": []``.)
* ``GEMINI_SYSTEM_MD`` replaces the CLI's long default system prompt with the request's system messages (the skill
  and memory); the rest of the conversation goes on stdin after the ``SESSION_MARKER`` line.
* ``--skip-trust``: the empty working directory is trusted for this session only (the CLI refuses to run headless
  in an untrusted directory, and the scratch home has no trusted-folders list).
* The child runs in an empty temporary directory with ``SKILLOPT_SLEEP_REPLAY=1``.

Output (``--output-format json``, Gemini CLI 0.61): one JSON object ``{"session_id": .., "response": "...",
"stats": {"models": {NAME: {"tokens": {"prompt": .., "candidates": .., "thoughts": ..}}}}}``, or on failure
``{"error": {"type": .., "message": .., "code": ..}}``. Without a login it exits at once with status 41 ("Please
set an Auth method ..." or "Manual authorization is required but the current session is non-interactive"): no
browser is opened and no network is needed to fail, so no up-front probe is made.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

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
    matches_any,
    raise_if_refused,
    render_prompt,
    run_contained,
    scratch_dirs,
    structured_text,
    timeout_failure,
    without_prompt_echo,
)
from skillopt_sleep.models import Role, Usage

#: Flags of every call, in one place (see the module docstring for why each is there).
GEMINI_FLAGS: tuple[str, ...] = ("-p", "", "--output-format", "json", "--skip-trust")
#: The Gemini CLI version these flags were tested with (the pin in .ci/install-agent-clis).
TESTED_VERSION = "0.61.0"
#: Files of the user's ``~/.gemini`` linked into the scratch home: the login, nothing else.
LOGIN_FILES = ("oauth_creds.json", "gemini-credentials.json", "google_accounts.json", ".env")
#: Exit status of the Gemini CLI for an authentication failure (``FATAL_AUTHENTICATION_ERROR``).
AUTH_EXIT_CODE = 41
#: Environment variables the CLI reads that must come from us, not from the user's shell.
DROPPED_ENV = ("GEMINI_CLI_HOME", "GEMINI_SYSTEM_MD", "GEMINI_CLI_SYSTEM_SETTINGS_PATH", "GEMINI_WRITE_SYSTEM_MD")
#: The system prompt used when a request has no system message (the CLI's default one is long and tool-bound).
DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant. Answer the user's request directly."

_AUTH_ERRORS = compile_patterns(
    r"set an auth method", r"manual authorization is required", r"api key not valid", r"invalid api key",
    r"\bunauthenticated\b", r"\b401\b", r"invalid auth method", r"login required", r"re-authenticate",
)
_FATAL_ERRORS = compile_patterns(
    r"unknown arguments?", r"unknown option", r"not enough arguments", r"invalid values?:",
    r"models/[^\s]+ is not found", r"model[^\n]{0,80}not found", r"\b403\b", r"permission_denied",
    r"missing system prompt file",
)
_LOGIN_FIX = ("log in to the Gemini CLI: run `gemini` in a terminal once and choose \"Sign in with Google\", or set "
              "GEMINI_API_KEY (or Vertex AI: GOOGLE_GENAI_USE_VERTEXAI=true with GOOGLE_API_KEY); then run the night "
              "again")


class GeminiCLIBackend(AgentCLIBackend):
    """Calls ``gemini -p`` once per attempt (see the module docstring for the exact command and environment).

    binary: ``gemini`` on PATH or an absolute path (config ``gemini_bin``). model: the target model (``--model``;
    None: the CLI's default). optimizer_model: model of the miner, judge and optimizer roles (default: model).
    timeout_s: seconds per attempt, after which the process group is killed (a transient "timeout").
    max_retries: retries of a transient failure; backoff_base_s: seconds of the first wait (exponential with jitter).
    user_gemini_dir: the user's ``.gemini`` directory whose login is reused (default ``$GEMINI_CLI_HOME/.gemini``,
    else ``~/.gemini``).

    Usage tokens come from the CLI's JSON ``stats`` (prompt tokens; candidate + thought tokens); estimated as
    len(text) / 4 when it reports none. ``temperature``, ``max_tokens`` and ``seed`` are ignored.
    """

    name = "gemini"
    runs_tools = False
    binary_setting = "gemini_bin"
    binary_label = "Gemini CLI"
    install_hint = "Install the Gemini CLI (npm install -g @google/gemini-cli)"
    tested_version = TESTED_VERSION
    update_hint = "update the Gemini CLI (npm install -g @google/gemini-cli)"

    def __init__(self, *, binary: str = "gemini", user_gemini_dir: str | os.PathLike[str] | None = None, **options):
        super().__init__(binary=binary, **options)
        self.user_gemini_dir = Path(user_gemini_dir) if user_gemini_dir else None

    def command(self, path: str, role: Role) -> list[str]:
        """The argv of one call (the prompt is not part of it: it goes on stdin)."""
        argv = [path, *GEMINI_FLAGS]
        model = self._configured_model(role)
        if model:
            argv += ["--model", model]
        return argv

    def chat(self, request: ChatRequest) -> ChatResult:
        """Run the request through ``gemini -p``; never raises for a failed call.

        Returns text (compact JSON text when ``request.json_schema`` is set), usage, latency_s (seconds, all
        attempts), attempts; on failure ``error`` and ``error_kind``: fatal for a missing binary, a login/auth
        error (exit status 41), an unknown flag or model; transient for timeouts, other failures, output without a
        JSON result, empty replies and replies without the requested JSON.
        """
        model = self.model_for(request.role)
        path = find_binary(self.binary)
        if path is None:
            return self.missing_binary_result(model)
        system, prompt = split_prompt(request)
        argv = self.command(path, request.role)
        return chat_with_retries(lambda: self._attempt(argv, system, prompt, request), model=model,
                                 max_retries=self.max_retries, backoff_base_s=self.backoff_base_s)

    def _attempt(self, argv: list[str], system: str, prompt: str, request: ChatRequest) -> AttemptReply:
        with scratch_dirs("skillopt-sleep-gemini-") as (work_dir, scratch):
            home = prepare_home(Path(scratch) / "home", self.user_gemini_dir or user_gemini_dir())
            system_file = Path(scratch) / "system.md"
            system_file.write_text(system, encoding="utf-8")
            env = child_environment(drop=DROPPED_ENV, extra={"GEMINI_CLI_HOME": str(home),
                                                             "GEMINI_SYSTEM_MD": str(system_file)})
            try:
                outcome = run_contained(argv, stdin_text=prompt, cwd=work_dir, timeout_s=self.timeout_s, env=env)
            except OSError as exc:
                raise self.start_failed(argv[0], exc) from None
        text, usage = read_reply(outcome, timeout_s=self.timeout_s, prompt=prompt)
        if request.json_schema is not None:
            text = structured_text(text)
        if usage is None:
            usage = Usage(prompt_tokens=estimate_tokens(system + prompt), completion_tokens=estimate_tokens(text))
        return AttemptReply(text=text, usage=usage)


# --------------------------------------------------------------------------- the scratch home and the prompt


def user_gemini_dir() -> Path:
    """The user's own ``.gemini`` directory: ``$GEMINI_CLI_HOME/.gemini``, else ``~/.gemini``."""
    home = os.environ.get("GEMINI_CLI_HOME") or os.path.expanduser("~")
    return Path(home) / ".gemini"


def prepare_home(home: Path, user_dir: Path) -> Path:
    """Create the scratch ``GEMINI_CLI_HOME``: ``.gemini/settings.json`` (the user's ``security.auth`` only, no
    tools) and symlinks to the user's ``LOGIN_FILES`` that exist. Return ``home``."""
    gemini_dir = home / ".gemini"
    gemini_dir.mkdir(parents=True)
    settings: dict[str, Any] = {"tools": {"core": []}, "general": {"disableAutoUpdate": True}}
    auth = _user_auth_settings(user_dir / "settings.json")
    if auth:
        settings["security"] = {"auth": auth}
    (gemini_dir / "settings.json").write_text(json.dumps(settings, indent=2), encoding="utf-8")
    for name in LOGIN_FILES:
        source = user_dir / name
        if source.is_file():
            (gemini_dir / name).symlink_to(source)
    return home


def _user_auth_settings(path: Path) -> dict[str, Any]:
    """The ``security.auth`` section of the user's settings (or the older top-level ``selectedAuthType``)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    security = data.get("security")
    auth = security.get("auth") if isinstance(security, dict) else None
    if isinstance(auth, dict):
        return {key: value for key, value in auth.items() if key in ("selectedType", "enforcedType", "useExternal")}
    legacy = data.get("selectedAuthType")
    return {"selectedType": legacy} if isinstance(legacy, str) else {}


def split_prompt(request: ChatRequest) -> tuple[str, str]:
    """Return ``(system prompt, stdin prompt)``: the system messages (or ``DEFAULT_SYSTEM_PROMPT``), and the rest
    rendered by ``render_prompt`` (``SESSION_MARKER`` line first)."""
    system = "\n\n".join(m.content for m in request.messages if m.role == "system" and m.content.strip())
    rest = request.model_copy(update={"messages": [m for m in request.messages if m.role != "system"]})
    return system or DEFAULT_SYSTEM_PROMPT, render_prompt(rest)


# --------------------------------------------------------------------------- reading the CLI's output


def parse_output(stdout: str) -> dict[str, Any] | None:
    """Return the JSON object ``gemini --output-format json`` printed on stdout, or None.

    Accepts the object alone or with other text around it (it is read from its first ``{`` at a line start).
    """
    text = stdout.strip()
    decoder = json.JSONDecoder()
    starts = [0] if text.startswith("{") else []
    starts += [index + 1 for index in range(len(text)) if text[index] == "\n" and text[index + 1:index + 2] == "{"]
    for start in starts:
        try:
            value, _end = decoder.raw_decode(text, start)
        except ValueError:
            continue
        if isinstance(value, dict) and ("response" in value or "error" in value):
            return value
    return None


def _usage(result: dict[str, Any]) -> Usage | None:
    stats = result.get("stats")
    models = stats.get("models") if isinstance(stats, dict) else None
    if not isinstance(models, dict):
        return None
    prompt = completion = 0
    for entry in models.values():
        tokens = entry.get("tokens") if isinstance(entry, dict) else None
        if not isinstance(tokens, dict):
            continue

        def count(key: str, tokens: dict[str, Any] = tokens) -> int:
            value = tokens.get(key)
            return value if isinstance(value, int) and value > 0 else 0

        prompt += count("prompt") or count("input")
        completion += count("candidates") + count("thoughts")
    if prompt == 0 and completion == 0:
        return None
    return Usage(prompt_tokens=prompt, completion_tokens=completion)


def read_reply(outcome: ProcessOutcome, *, timeout_s: float, prompt: str = "") -> tuple[str, Usage | None]:
    """Return ``(text, usage or None)`` of a finished ``gemini -p`` run; raise ``AttemptFailed`` otherwise.

    prompt: the prompt sent (an echo of it is not taken as evidence of an error kind). stderr is only ever part
    of an error message, never the reply.
    """
    if outcome.timed_out:
        raise timeout_failure("gemini", timeout_s)
    result = parse_output(outcome.stdout)
    error = result.get("error") if result is not None else None
    if outcome.returncode != 0 or result is None or error:
        said = ""
        if isinstance(error, dict):
            said = str(error.get("message") or error.get("type") or "")
        elif error:
            said = str(error)
        detail = outcome.failure_detail(said, show_stdout=result is None)
        evidence = without_prompt_echo(f"{said}\n{outcome.stderr}\n{outcome.stdout if result is None else ''}",
                                       prompt)
        code = error.get("code") if isinstance(error, dict) else None
        logged_out = AUTH_EXIT_CODE in (outcome.returncode, code) or matches_any(evidence, _AUTH_ERRORS)
        raise_if_refused("gemini", detail, logged_out=logged_out, rejected=matches_any(evidence, _FATAL_ERRORS),
                         login_fix=_LOGIN_FIX,
                         rejected_hint="check the model name, and update the Gemini CLI if a flag is unknown; "
                                       f"skillopt-sleep runs `gemini -p \"\" {' '.join(GEMINI_FLAGS[2:])}`",
                         rejected_fix="check gemini_model ('skillopt-sleep config show'), and update the Gemini CLI "
                                      "(npm install -g @google/gemini-cli) if a flag is unknown")
        if outcome.returncode != 0:
            raise AttemptFailed(f"gemini exited with status {outcome.returncode} ({detail})", "transient")
        if result is None:
            raise AttemptFailed(f"gemini printed no JSON result ({detail})", "transient")
        raise AttemptFailed(f"gemini reported an error ({detail})", "transient")
    text = result.get("response")
    if not isinstance(text, str) or not text.strip():
        raise AttemptFailed("empty reply from gemini (no \"response\" in its JSON)", "transient")
    return text, _usage(result)


__all__ = ["GEMINI_FLAGS", "TESTED_VERSION", "GeminiCLIBackend", "find_binary", "parse_output", "prepare_home",
           "read_reply", "split_prompt"]
