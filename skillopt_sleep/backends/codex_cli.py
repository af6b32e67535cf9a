"""The user's own Codex CLI (``codex exec``) as a target/optimizer backend.

Command (every fixed flag in ``CODEX_FLAGS``; ``-m`` added when a model is configured)::

    codex exec --sandbox read-only --skip-git-repo-check --color never --ignore-user-config --ignore-rules
        -o SCRATCH/last_message.txt [-m MODEL] -   < prompt on stdin

* ``-`` as the prompt argument: Codex reads the prompt from stdin (never argv, where long prompts get cut).
* ``--sandbox read-only``: the agent may not write or reach the network from its shell; it runs in an empty
  temporary directory anyway, so there is nothing to read either. ``--skip-git-repo-check``: that directory is
  not a git repository.
* ``--ignore-user-config`` does not load ``$CODEX_HOME/config.toml`` (its MCP servers, ``notify`` program,
  ``developer_instructions``, profiles and providers; login still comes from ``CODEX_HOME``) and
  ``--ignore-rules`` no execpolicy ``.rules`` files. (Checked with the real 0.169.0 binary: without the first, a
  planted config's MCP server starts and its instructions reach the request.) No flag keeps out the global
  ``$CODEX_HOME/AGENTS.md``: Codex 0.169.0 always sends it. So every call gets its own ``CODEX_HOME`` in the
  scratch directory (``replay_codex_home``), empty but for a link to the user's ``auth.json`` (the login:
  ``--ignore-user-config`` already makes Codex read it from the file, and a refreshed token is written through
  the link): the user's ``AGENTS.md``, skills, prompts and history stay out, and the session Codex records is
  written there and deleted with it.
* Before the first call, ``codex login status`` (no model call): "Not logged in" without ``CODEX_API_KEY`` is a
  fatal error naming ``codex login``. Without it an unauthenticated ``codex exec`` does not fail: it retries
  the network until the timeout (offline) or fails only at the API.
* The reply is the agent's last message, read from the ``-o`` (``--output-last-message``) file, which lives in
  the scratch directory beside (not inside) the empty working directory. Progress on stdout/stderr is only
  used in error messages.
* The system prompt is folded into the stdin prompt (``subprocess_call.render_prompt``); the first line carries
  ``SESSION_MARKER`` and the child gets ``SKILLOPT_SLEEP_REPLAY=1``.

With ``codex_base_url`` (a local model, or any OpenAI **Responses**-compatible endpoint; Codex 0.169 rejects
``wire_api = "chat"``) the call adds ``ENDPOINT_FLAGS`` and::

    -c model_provider=skillopt_sleep_endpoint
    -c 'model_providers.skillopt_sleep_endpoint={name=..., base_url="URL", wire_api="responses", ...}'
    -c 'model_instructions_file="SCRATCH/instructions.md"'

* the provider has no ``env_key``, so no key is sent and no login is needed (the ``codex login status`` check
  is skipped); it makes no retry of its own (``request_max_retries=0, stream_max_retries=0``, and
  ``--disable unbounded_connection_retries``): ours apply, and a refused connection is a fatal error naming
  ``codex_base_url`` after a second instead of minutes of reconnecting;
* ``model_instructions_file`` **replaces** Codex's long default instructions with the request's system messages
  (the skill and memory), which then stay out of the stdin prompt, so a small local model answers in seconds;
* ``ENDPOINT_FLAGS`` turn off the shell, sub-agent, goal, web-search and ask-the-user tools and Codex's own
  permission, environment, apps and skills messages. (Checked with the real 0.169.0 binary against a capture
  server: the request then holds only our instructions and our prompt, and one tool, ``view_image``, which
  Codex offers every model and no flag removes; the working directory it could read images from is empty.)
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from skillopt_sleep.backends.base import ChatRequest, ChatResult
from skillopt_sleep.backends.subprocess_call import (
    AgentCLIBackend,
    AttemptFailed,
    AttemptReply,
    ProcessOutcome,
    chat_with_retries,
    check_endpoint_reached,
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
    system_prompt,
    tail,
    timeout_failure,
    without_prompt_echo,
)
from skillopt_sleep.models import Role, Usage
from skillopt_sleep.paths import codex_home

#: Fixed flags of every call, in one place (see the module docstring for why each is there).
CODEX_FLAGS: tuple[str, ...] = ("exec", "--sandbox", "read-only", "--skip-git-repo-check", "--color", "never",
                                "--ignore-user-config", "--ignore-rules")
#: The Codex CLI version these flags were tested with (the pin in .ci/install-agent-clis).
TESTED_VERSION = "0.169.0"
#: Environment variable holding an API key that ``codex exec`` uses without a login.
API_KEY_ENV = "CODEX_API_KEY"
#: The login file Codex keeps in its home (``codex login`` writes it).
AUTH_FILE = "auth.json"
#: Name of the ``-o`` file inside the scratch directory.
LAST_MESSAGE_FILE = "last_message.txt"
#: Seconds the ``codex login status`` probe may take.
LOGIN_STATUS_TIMEOUT_S = 15.0
#: Id of the model provider the ``-c`` overrides define for ``codex_base_url``.
ENDPOINT_PROVIDER = "skillopt_sleep_endpoint"
#: Name of the instructions file (``model_instructions_file``) inside the scratch directory.
INSTRUCTIONS_FILE = "instructions.md"
#: Flags added with ``codex_base_url``: no tool but ``view_image``, none of Codex's own developer messages, and no
#: endless reconnecting ("Reconnecting... waiting for network") when nothing answers at the URL.
ENDPOINT_FLAGS: tuple[str, ...] = (
    "--disable", "shell_tool", "--disable", "multi_agent", "--disable", "goals",
    "--disable", "unbounded_connection_retries",
    "-c", 'web_search="disabled"', "-c", "tools.experimental_request_user_input.enabled=false",
    "-c", "include_permissions_instructions=false", "-c", "include_environment_context=false",
    "-c", "include_apps_instructions=false", "-c", "skills.include_instructions=false",
)

_AUTH_ERRORS = compile_patterns(
    r"not logged in", r"\blog ?in\b", r"\b401\b", r"unauthori[sz]ed", r"invalid[_ ]api[_ ]key",
    r"incorrect api key", r"token (has )?expired", r"refresh token",
)
_FATAL_ERRORS = compile_patterns(
    r"unexpected argument", r"unknown option", r"unrecognized (option|argument|subcommand)", r"invalid value",
    r"model_not_found", r"model[^\n]{0,80}(does not exist|not found|not supported)", r"unsupported model",
    r"\b403\b",
)
#: Only lines like these are searched for the markers above (codex also prints progress and the prompt).
_ERROR_LINE = compile_patterns(r"error|fail|denied|unauthori|not logged|log ?in|\b40[13]\b|unexpected|invalid")[0]
_LOGIN_FIX = ("run `codex login` in a terminal (or `printenv OPENAI_API_KEY | codex login --with-api-key`, or set "
              "CODEX_API_KEY), then run the night again")


class CodexCLIBackend(AgentCLIBackend):
    """Calls ``codex exec`` once per attempt (see the module docstring for the exact command).

    binary: ``codex`` on PATH or an absolute path (config ``codex_bin``). model: the target model (``-m``, config
    ``codex_model``; None: the CLI's configured default). optimizer_model: model of the miner, judge and optimizer
    roles (default: model). base_url: a Responses-compatible endpoint replacing OpenAI (config ``codex_base_url``;
    see the module docstring). timeout_s: seconds per attempt, after which the process group is killed (a transient
    "timeout"). max_retries: retries of a transient failure; backoff_base_s: seconds of the first wait (exponential
    with jitter).

    Usage tokens are **estimated** (len(text) / 4 for the prompt sent and the reply): ``codex exec`` reports no
    per-call usage in its plain output. ``temperature``, ``max_tokens`` and ``seed`` are ignored.
    """

    name = "codex"
    runs_tools = False
    binary_setting = "codex_bin"
    binary_label = "Codex CLI binary"
    install_hint = "Install the Codex CLI (npm install -g @openai/codex)"
    tested_version = TESTED_VERSION
    update_hint = "update the Codex CLI (npm install -g @openai/codex)"

    def __init__(self, *, binary: str = "codex", base_url: str | None = None, **options):
        super().__init__(binary=binary, **options)
        self.base_url = base_url.rstrip("/") if base_url else None
        self._login_lock = threading.Lock()
        self._login_checked = False
        self._not_logged_in: str | None = None

    def login_problem(self, path: str) -> str | None:
        """The error when ``codex login status`` says "Not logged in" and ``CODEX_API_KEY`` is unset, else None.

        Checked once per backend (the first call); a probe that fails some other way is not taken as an answer.
        Never with ``base_url``: a provider of our own needs no login.
        """
        if self.base_url:
            return None
        with self._login_lock:
            if not self._login_checked:
                self._login_checked = True
                if not os.environ.get(API_KEY_ENV):
                    said = _login_status(path)
                    if said is not None and "not logged in" in said.lower():
                        line = next(line.strip() for line in said.splitlines() if "not logged in" in line.lower())
                        self._not_logged_in = (f"codex is not logged in (`codex login status`: {tail(line, 200)}) "
                                               f"and {API_KEY_ENV} is not set: {_LOGIN_FIX}")
            return self._not_logged_in

    def command(self, path: str, role: Role, last_message_path: str,
                instructions_path: str | None = None) -> list[str]:
        """The argv of one call (the prompt is not part of it: ``-`` makes Codex read stdin).

        instructions_path: the file replacing Codex's instructions; used (and needed) only with ``base_url``.
        """
        argv = [path, *CODEX_FLAGS, "-o", last_message_path]
        model = self._configured_model(role)
        if model:
            argv += ["-m", model]
        if self.base_url:
            provider = (f"model_providers.{ENDPOINT_PROVIDER}={{name={_toml_string('skillopt-sleep endpoint')}, "
                        f"base_url={_toml_string(self.base_url)}, wire_api=\"responses\", "
                        "request_max_retries=0, stream_max_retries=0}")
            argv += ["-c", f"model_provider={ENDPOINT_PROVIDER}", "-c", provider, *ENDPOINT_FLAGS]
            if instructions_path:
                argv += ["-c", f"model_instructions_file={_toml_string(instructions_path)}"]
        return [*argv, "-"]

    def chat(self, request: ChatRequest) -> ChatResult:
        """Run the request through ``codex exec``; never raises for a failed call.

        Returns text (compact JSON text when ``request.json_schema`` is set), estimated usage, latency_s
        (seconds, all attempts), attempts; on failure ``error`` and ``error_kind``: fatal for a missing binary,
        a login/auth error, an unknown flag or model; transient for timeouts, other non-zero exits, an empty
        last message and replies without the requested JSON.
        """
        model = self.model_for(request.role)
        path = find_binary(self.binary)
        if path is None:
            return self.missing_binary_result(model)
        not_logged_in = self.login_problem(path)
        if not_logged_in:
            return ChatResult(error=not_logged_in, error_kind="fatal", model=model, fix=_LOGIN_FIX)
        prompt = render_prompt(request, with_system=not self.base_url)
        return chat_with_retries(lambda: self._attempt(path, prompt, request), model=model,
                                 max_retries=self.max_retries, backoff_base_s=self.backoff_base_s)

    def _attempt(self, path: str, prompt: str, request: ChatRequest) -> AttemptReply:
        with scratch_dirs("skillopt-sleep-codex-") as (work_dir, scratch):
            last_message_path = os.path.join(scratch, LAST_MESSAGE_FILE)
            instructions_path = None
            if self.base_url:
                instructions_path = os.path.join(scratch, INSTRUCTIONS_FILE)
                with open(instructions_path, "w", encoding="utf-8") as handle:
                    handle.write(system_prompt(request))
            argv = self.command(path, request.role, last_message_path, instructions_path)
            env = child_environment(extra={"CODEX_HOME": replay_codex_home(scratch)})
            try:
                outcome = run_contained(argv, stdin_text=prompt, cwd=work_dir, timeout_s=self.timeout_s, env=env)
            except OSError as exc:
                raise self.start_failed(path, exc) from None
            last_message = _read_text(last_message_path)
        text = read_reply(outcome, last_message, timeout_s=self.timeout_s, prompt=prompt, endpoint=self.base_url)
        if request.json_schema is not None:
            text = structured_text(text)
        return AttemptReply(text=text, usage=Usage(prompt_tokens=estimate_tokens(prompt),
                                                   completion_tokens=estimate_tokens(text)))


def replay_codex_home(scratch: str) -> str:
    """A ``CODEX_HOME`` for one call, made in ``scratch``: empty but for a link to the user's ``auth.json`` when
    there is one (see the module docstring). Returns its path."""
    home = Path(scratch) / "codex-home"
    home.mkdir(mode=0o700)
    auth = codex_home() / AUTH_FILE
    if auth.is_file():
        (home / AUTH_FILE).symlink_to(auth)
    return str(home)


def _toml_string(text: str) -> str:
    """``text`` as a TOML basic string (JSON's escapes, ASCII only, are valid TOML)."""
    return json.dumps(text)


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def read_reply(outcome: ProcessOutcome, last_message: str | None, *, timeout_s: float, prompt: str = "",
               endpoint: str | None = None) -> str:
    """Return the reply of a finished ``codex exec`` run (its ``-o`` file); raise ``AttemptFailed`` otherwise.

    last_message: the ``-o`` file's text, or None when Codex wrote none. prompt: the prompt sent (its echo in the
    output is not taken as evidence of an error kind). endpoint: ``codex_base_url``, when set (a refused
    connection to it is fatal). stdout/stderr of a failed run are only ever part of the
    error message, never the reply.
    """
    if outcome.timed_out:
        raise timeout_failure("codex", timeout_s)
    has_reply = last_message is not None and bool(last_message.strip())
    if outcome.returncode == 0 and has_reply:
        assert last_message is not None
        return last_message.strip()
    output = without_prompt_echo(f"{outcome.stderr}\n{outcome.stdout}", prompt)
    evidence = "\n".join(line for line in output.splitlines() if _ERROR_LINE.search(line))
    detail = outcome.failure_detail()
    check_endpoint_reached(evidence, endpoint, setting="codex_base_url", detail=detail)
    raise_if_refused("codex", detail, logged_out=matches_any(evidence, _AUTH_ERRORS),
                     rejected=matches_any(evidence, _FATAL_ERRORS), login_fix=_LOGIN_FIX,
                     rejected_hint="check the model name, and update the Codex CLI if a flag is unknown; "
                                   f"skillopt-sleep runs `codex {' '.join(CODEX_FLAGS)} -o FILE -`",
                     rejected_fix="check target_model / optimizer_model ('skillopt-sleep config show'), and update "
                                  "the Codex CLI (npm install -g @openai/codex) if a flag is unknown")
    if outcome.returncode != 0:
        raise AttemptFailed(f"codex exited with status {outcome.returncode} ({detail})", "transient")
    raise AttemptFailed(f"empty reply from codex: no last message was written ({detail})", "transient")


def codex_logged_in(binary: str = "codex") -> bool:
    """True when ``binary`` is found and ``codex login status`` says it is logged in. Used by auto-selection.

    How: runs ``codex login status`` (no model call, stdin closed, ``LOGIN_STATUS_TIMEOUT_S`` seconds); logged in
    when it exits 0 and does not print "not logged in". Never raises.
    """
    path = find_binary(binary)
    if path is None:
        return False
    outcome = _run_login_status(path)
    if outcome is None:
        return False
    said = f"{outcome.stdout}\n{outcome.stderr}".lower()
    return outcome.returncode == 0 and "not logged in" not in said


def _run_login_status(path: str) -> ProcessOutcome | None:
    try:
        with scratch_dirs("skillopt-sleep-codex-") as (work_dir, _scratch):
            return run_contained([path, "login", "status"], stdin_text="", cwd=work_dir,
                                 timeout_s=LOGIN_STATUS_TIMEOUT_S, env=child_environment())
    except OSError:
        return None


def _login_status(path: str) -> str | None:
    """What ``codex login status`` printed (stdout and stderr), or None when it could not run or timed out."""
    outcome = _run_login_status(path)
    if outcome is None or outcome.timed_out:
        return None
    return f"{outcome.stdout}\n{outcome.stderr}".strip()


__all__ = ["CODEX_FLAGS", "ENDPOINT_FLAGS", "TESTED_VERSION", "CodexCLIBackend", "codex_logged_in", "find_binary",
           "read_reply"]
