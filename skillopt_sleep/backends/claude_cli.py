"""The user's own Claude Code CLI (``claude -p``) as a target/optimizer backend.

Command (every flag in ``CLAUDE_FLAGS``, ``--model`` added when configured)::

    claude -p --output-format json --tools "" --strict-mcp-config --setting-sources "" [--model MODEL]
        < prompt on stdin

* ``-p`` with **no prompt argument**: the prompt is read from stdin (never argv, where long prompts get cut).
* ``--tools ""`` mounts no built-in tool and ``--strict-mcp-config`` (with no ``--mcp-config``) none of the
  user's MCP servers: a plain call answers in text only. ``--tools`` needs a recent Claude Code (2.x); an older
  one rejects it with "unknown option", which is a fatal error telling the user to update.
* ``--setting-sources ""`` loads none of the user, project or local settings files, and with them neither the
  user's ``~/.claude/CLAUDE.md`` memory nor their hooks, plugins or ``env``: the replay sees only the skill and
  memory we pass. (Checked with the real 2.1.330 binary: without it a planted ``~/.claude/CLAUDE.md`` rule is in
  the request sent to the API and a ``SessionStart`` hook runs; with it neither happens. Login is unaffected.)
* The system prompt is **folded into the stdin prompt** (``<instructions>`` block, see
  ``subprocess_call.render_prompt``) rather than passed with ``--system-prompt``: it holds the skill document
  and memory, can be long, and would meet argv's limits. Claude Code's own system prompt stays in place, so the
  target is replayed as the agent the user runs.
* The child runs in an empty temporary directory (no project files, no project ``CLAUDE.md``), with
  ``SKILLOPT_SLEEP_REPLAY=1`` and without ``CLAUDECODE`` (so a night started from inside a Claude Code session
  is not refused as a nested session). The prompt's first line carries ``SESSION_MARKER``.

With ``claude_base_url`` (a local model behind an Anthropic Messages-compatible endpoint) the call adds
``--system-prompt-file SCRATCH/system.md`` and the child gets ``ANTHROPIC_BASE_URL`` (the endpoint),
``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1``, ``CLAUDE_CODE_MAX_RETRIES=0`` and, unless ``ANTHROPIC_API_KEY`` or
``ANTHROPIC_AUTH_TOKEN`` is set (an endpoint that wants a key), ``ANTHROPIC_API_KEY=ENDPOINT_PLACEHOLDER_KEY``, so
no Claude login is needed:

* the request's system messages (the skill and memory) **replace** Claude Code's long default system prompt
  and stay out of the stdin prompt, so a small local model answers in seconds; with ``--tools ""`` the request
  carries no tool. (Checked with the real 2.1.330 binary: the request then holds one SDK line, our system
  prompt, a short environment note, our prompt and ``"tools": []``.)
* a file, not ``--system-prompt``, because the skill and memory can be long and argv has limits.
* no retry of its own: ours apply, and a refused connection is a fatal error naming ``claude_base_url`` after a
  second (with its own retries Claude Code kept reconnecting for minutes).

Output: one JSON object ``{"type": "result", "subtype": "success", "is_error": false, "result": "...",
"usage": {"input_tokens": .., "output_tokens": .., "cache_read_input_tokens": .., ...}}`` (format: Claude Code
2.x ``--output-format json``; a JSON array of events, as printed with ``--verbose``, is read too).
"""

from __future__ import annotations

import json
import os
from typing import Any

from skillopt_sleep.backends.base import ChatMessage, ChatRequest, ChatResult
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
    timeout_failure,
    without_prompt_echo,
)
from skillopt_sleep.models import Role, Usage

#: Flags of every call, in one place (see the module docstring for why each is there).
CLAUDE_FLAGS: tuple[str, ...] = ("-p", "--output-format", "json", "--tools", "", "--strict-mcp-config",
                                 "--setting-sources", "")
#: The Claude Code version these flags were tested with (the pin in .ci/install-agent-clis).
TESTED_VERSION = "2.1.330"
#: Environment variables removed for the child (Claude Code refuses to start "inside another session").
DROPPED_ENV = ("CLAUDECODE",)
#: Model name reported when none is configured (the CLI's own default model is used).
#: The key sent to ``claude_base_url`` when the environment has none (local servers ignore it).
ENDPOINT_PLACEHOLDER_KEY = "skillopt-sleep-local-endpoint"
#: Name of the ``--system-prompt-file`` inside the scratch directory.
SYSTEM_PROMPT_FILE = "system.md"
#: Seconds the ``claude auth status`` probe may take.
AUTH_STATUS_TIMEOUT_S = 15.0

_AUTH_ERRORS = compile_patterns(
    r"invalid api key", r"/login", r"not logged in", r"authenticat", r"unauthori[sz]ed", r"\b401\b",
    r"oauth token (has )?expired", r"invalid x-api-key", r"credentials",
)
_FATAL_ERRORS = compile_patterns(
    r"unknown option", r"unknown flag", r"unknown argument", r"unexpected argument", r"unrecognized option",
    r"not_found_error", r"model[^\n]{0,80}not found", r"invalid model", r"\b403\b", r"permission_error",
    r"credit balance is too low", r"cannot be launched inside another",
)
_LOGIN_FIX = ("log in to Claude Code: run `claude auth login` (or /login inside `claude`), or `claude setup-token` "
              "for a long-lived token, or set ANTHROPIC_API_KEY; then run the night again")


class ClaudeCLIBackend(AgentCLIBackend):
    """Calls ``claude -p`` once per attempt (see the module docstring for the exact command).

    binary: ``claude`` on PATH or an absolute path (config ``claude_bin``). model: the target model (``--model``,
    config ``claude_model``; None: the CLI's default). optimizer_model: model of the miner, judge and optimizer
    roles (default: model). base_url: an Anthropic Messages-compatible endpoint replacing Anthropic's (config
    ``claude_base_url``; see the module docstring).
    timeout_s: seconds per attempt, after which the process group is killed (a transient "timeout").
    max_retries: retries of a transient failure; backoff_base_s: seconds of the first wait (exponential with jitter).

    Usage tokens come from the CLI's JSON (``usage``: prompt = input + cache-creation + cache-read tokens,
    completion = output tokens); when the JSON has no usage they are estimated as len(text) / 4.
    ``temperature``, ``max_tokens`` and ``seed`` of a request are not supported by the CLI and are ignored.
    """

    name = "claude"
    runs_tools = False
    binary_setting = "claude_bin"
    binary_label = "Claude Code binary"
    install_hint = "Install Claude Code (npm install -g @anthropic-ai/claude-code)"
    tested_version = TESTED_VERSION
    update_hint = "update Claude Code (`claude update`)"

    def __init__(self, *, binary: str = "claude", base_url: str | None = None, **options):
        super().__init__(binary=binary, **options)
        self.base_url = base_url.rstrip("/") if base_url else None

    def command(self, path: str, role: Role, system_prompt_path: str | None = None) -> list[str]:
        """The argv of one call (the prompt is not part of it: it goes on stdin).

        system_prompt_path: the file replacing Claude Code's system prompt (``--system-prompt-file``).
        """
        argv = [path, *CLAUDE_FLAGS]
        model = self._configured_model(role)
        if model:
            argv += ["--model", model]
        if system_prompt_path:
            argv += ["--system-prompt-file", system_prompt_path]
        return argv

    def endpoint_environment(self) -> dict[str, str]:
        """The variables that point the child at ``base_url`` (none without one)."""
        if not self.base_url:
            return {}
        env = {"ANTHROPIC_BASE_URL": self.base_url, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
               "CLAUDE_CODE_MAX_RETRIES": "0"}
        if not (os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN")):
            env["ANTHROPIC_API_KEY"] = ENDPOINT_PLACEHOLDER_KEY
        return env

    def chat(self, request: ChatRequest) -> ChatResult:
        """Run the request through ``claude -p``; never raises for a failed call.

        Returns text (compact JSON text when ``request.json_schema`` is set), usage, latency_s (seconds, all
        attempts), attempts; on failure ``error`` and ``error_kind``: fatal for a missing binary, a login/auth
        error, an unknown flag or model; transient for timeouts, other non-zero exits, non-JSON output,
        ``is_error`` results, empty replies and replies without the requested JSON.
        """
        model = self.model_for(request.role)
        path = find_binary(self.binary)
        if path is None:
            return self.missing_binary_result(model)
        prompt = render_prompt(request, with_system=not self.base_url)
        return chat_with_retries(lambda: self._attempt(path, prompt, request), model=model,
                                 max_retries=self.max_retries, backoff_base_s=self.backoff_base_s)

    def _attempt(self, path: str, prompt: str, request: ChatRequest) -> AttemptReply:
        with scratch_dirs("skillopt-sleep-claude-") as (work_dir, scratch):
            system_prompt_path = None
            if self.base_url:
                system_prompt_path = os.path.join(scratch, SYSTEM_PROMPT_FILE)
                with open(system_prompt_path, "w", encoding="utf-8") as handle:
                    handle.write(system_prompt(request))
            argv = self.command(path, request.role, system_prompt_path)
            try:
                outcome = run_contained(argv, stdin_text=prompt, cwd=work_dir, timeout_s=self.timeout_s,
                                        env=child_environment(drop=DROPPED_ENV, extra=self.endpoint_environment()))
            except OSError as exc:
                raise self.start_failed(argv[0], exc) from None
        text, usage = read_reply(outcome, timeout_s=self.timeout_s, prompt=prompt, endpoint=self.base_url)
        if request.json_schema is not None:
            text = structured_text(text)
        if usage is None:
            usage = Usage(prompt_tokens=estimate_tokens(prompt), completion_tokens=estimate_tokens(text))
        return AttemptReply(text=text, usage=usage)


# --------------------------------------------------------------------------- reading the CLI's output


def parse_result(stdout: str) -> dict[str, Any] | None:
    """Return the ``{"type": "result", ...}`` object from ``claude -p --output-format json`` stdout, or None.

    Accepts one JSON object, a JSON array of events (``--verbose``), or JSON lines with other text around them.
    """
    candidates: list[Any] = []
    try:
        candidates.append(json.loads(stdout))
    except ValueError:
        for line in reversed(stdout.splitlines()):
            line = line.strip()
            if line.startswith(("{", "[")):
                try:
                    candidates.append(json.loads(line))
                except ValueError:
                    continue
    for candidate in candidates:
        events = candidate if isinstance(candidate, list) else [candidate]
        for event in reversed(events):
            if isinstance(event, dict) and (event.get("type") == "result" or "result" in event):
                return event
    return None


def _usage(result: dict[str, Any]) -> Usage | None:
    usage = result.get("usage")
    if not isinstance(usage, dict):
        return None

    def count(key: str) -> int:
        value = usage.get(key)
        return value if isinstance(value, int) and value > 0 else 0

    prompt = count("input_tokens") + count("cache_creation_input_tokens") + count("cache_read_input_tokens")
    completion = count("output_tokens")
    if prompt == 0 and completion == 0:
        return None
    return Usage(prompt_tokens=prompt, completion_tokens=completion)


def read_reply(outcome: ProcessOutcome, *, timeout_s: float, prompt: str = "",
               endpoint: str | None = None) -> tuple[str, Usage | None]:
    """Return ``(text, usage or None)`` of a finished ``claude -p`` run; raise ``AttemptFailed`` otherwise.

    prompt: the prompt sent (an echo of it is not taken as evidence of an error kind). endpoint:
    ``claude_base_url``, when set (a refused connection to it is fatal). The stderr of a failed
    run is only ever part of the error message, never the reply.
    """
    if outcome.timed_out:
        raise timeout_failure("claude", timeout_s)
    result = parse_result(outcome.stdout)
    failed = outcome.returncode != 0 or result is None or bool(result.get("is_error"))
    if failed:
        said = ""
        if result is not None:
            said = str(result.get("result") or result.get("error") or result.get("subtype") or "")
        detail = outcome.failure_detail(said, said_label="result", show_stdout=result is None)
        evidence = without_prompt_echo(f"{said}\n{outcome.stderr}", prompt)
        check_endpoint_reached(evidence, endpoint, setting="claude_base_url", detail=detail)
        raise_if_refused("claude", detail, logged_out=matches_any(evidence, _AUTH_ERRORS),
                         rejected=matches_any(evidence, _FATAL_ERRORS), login_fix=_LOGIN_FIX,
                         rejected_hint="check the model name, and update Claude Code (`claude update`) if a flag is "
                                       f"unknown; skillopt-sleep runs `claude {' '.join(_shown(CLAUDE_FLAGS))}`",
                         rejected_fix="check target_model / optimizer_model ('skillopt-sleep config show'), and "
                                      "run `claude update` if a flag is unknown")
        if outcome.returncode != 0:
            raise AttemptFailed(f"claude exited with status {outcome.returncode} ({detail})", "transient")
        if result is None:
            raise AttemptFailed(f"claude printed no JSON result ({detail})", "transient")
        raise AttemptFailed(f"claude reported an error, subtype {result.get('subtype')!r} ({detail})", "transient")
    assert result is not None
    text = result.get("result")
    if not isinstance(text, str) or not text.strip():
        raise AttemptFailed(f"empty reply from claude (subtype {result.get('subtype')!r})", "transient")
    return text, _usage(result)


def _shown(flags: tuple[str, ...]) -> list[str]:
    return [flag if flag else '""' for flag in flags]


# --------------------------------------------------------------------------- is the CLI usable?


def claude_logged_in(binary: str = "claude", *, timeout_s: float = 60.0) -> bool:
    """True when ``binary`` is found and logged in. Used by backend auto-selection.

    How: ``claude auth status`` (no model call, stdin closed, ``AUTH_STATUS_TIMEOUT_S`` seconds) when it prints
    JSON with a ``loggedIn`` (or ``logged_in``) boolean; otherwise (an older CLI without ``auth status``) one
    tiny ``claude -p`` call ("Reply with OK", no retries, ``timeout_s`` seconds) through this backend, and True
    when it succeeds. Never raises.
    """
    path = find_binary(binary)
    if path is None:
        return False
    try:
        with scratch_dirs("skillopt-sleep-claude-") as (work_dir, _scratch):
            outcome = run_contained([path, "auth", "status"], stdin_text="", cwd=work_dir,
                                    timeout_s=AUTH_STATUS_TIMEOUT_S, env=child_environment(drop=DROPPED_ENV))
    except OSError:
        return False
    status = _logged_in_flag(outcome.stdout)
    if status is not None:
        return status
    probe = ChatRequest(role="judge", messages=[ChatMessage(role="user", content="Reply with the word OK.")],
                        max_tokens=4)
    return ClaudeCLIBackend(binary=path, timeout_s=timeout_s, max_retries=0).chat(probe).ok


def _logged_in_flag(stdout: str) -> bool | None:
    try:
        data = json.loads(stdout)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    for key in ("loggedIn", "logged_in"):
        if isinstance(data.get(key), bool):
            return data[key]
    return None


__all__ = ["CLAUDE_FLAGS", "ENDPOINT_PLACEHOLDER_KEY", "TESTED_VERSION", "ClaudeCLIBackend", "claude_logged_in",
           "find_binary", "parse_result", "read_reply"]
