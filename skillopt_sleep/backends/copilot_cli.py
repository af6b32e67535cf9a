"""The user's own GitHub Copilot CLI (``copilot``, prompt mode) as a target/optimizer backend.

Command (every flag in ``COPILOT_FLAGS``; one ``--disable-mcp-server=NAME`` per server of the user's
``mcp-config.json``; ``--model`` added when configured)::

    copilot --output-format json --no-auto-update --no-custom-instructions --available-tools=none
        --disable-builtin-mcps --no-ask-user --usage-output-file SCRATCH/usage.json
        [--disable-mcp-server=NAME ...] [--model MODEL]  < prompt on stdin

* The prompt is read from **stdin** (piped stdin runs the same non-interactive prompt mode as ``-p TEXT``,
  without putting the prompt on argv, where long prompts get cut).
* ``--no-custom-instructions`` loads none of the user's ``~/.copilot/copilot-instructions.md`` and no
  ``AGENTS.md``-style files. (Checked with the real 1.0.102 binary against a capture server: without it a planted
  rule in ``~/.copilot/copilot-instructions.md`` is in the request; with it it is not.)
* ``--available-tools=none`` makes only a tool named "none" (there is none) available: the request carries no tool
  and no skill list (the default one mounts ~19 tools). It is written with ``=``: the option takes several values
  and would swallow the next argument.
* ``--disable-builtin-mcps`` and ``--disable-mcp-server=NAME`` for each server in
  ``$COPILOT_HOME/mcp-config.json`` (default ``~/.copilot``): none of the user's MCP servers is started.
* ``--no-auto-update``: a night never downloads a CLI update; ``--no-ask-user``: no question tool.
* Agentic memory is off in prompt mode unless ``--enable-memory`` is given (we do not give it).
* The system prompt is **folded into the stdin prompt** (``<instructions>`` block, see
  ``subprocess_call.render_prompt``): the CLI has no option to pass or replace it.
* The child runs in an empty temporary directory (no repository instructions, skills or MCP config), with
  ``SKILLOPT_SLEEP_REPLAY=1``; the prompt's first line carries ``SESSION_MARKER``, so the session the CLI records
  under ``~/.copilot/session-state/`` is skipped by the harvester.

Output (``--output-format json``, Copilot CLI 1.0): JSON lines of events; the reply is the ``content`` of the last
``assistant.message`` event, errors are ``session.error`` events, and a final ``{"type": "result", "exitCode": ..}``.
Token usage comes from the ``--usage-output-file`` JSON (``modelMetrics.*.usage``). Without a login the CLI exits
at once with status 1 and "No authentication information found" (no browser, no network wait), so no up-front
probe is made.
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
    json_line_events,
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

#: Fixed flags of every call, in one place (see the module docstring for why each is there).
COPILOT_FLAGS: tuple[str, ...] = ("--output-format", "json", "--no-auto-update", "--no-custom-instructions",
                                  "--available-tools=none", "--disable-builtin-mcps", "--no-ask-user")
#: The Copilot CLI version these flags were tested with (the pin in .ci/install-agent-clis).
TESTED_VERSION = "1.0.102"
#: Name of the ``--usage-output-file`` inside the scratch directory.
USAGE_FILE = "usage.json"
#: Environment variables removed for the child: a replay never auto-approves tools or runs in remote mode.
DROPPED_ENV = ("COPILOT_ALLOW_ALL", "COPILOT_ASSISTED_APPROVAL")

_AUTH_ERRORS = compile_patterns(
    r"no authentication information", r"not authenticated", r"authentication (failed|required)", r"\b401\b",
    r"unauthori[sz]ed", r"bad credentials", r"token (has )?(expired|is invalid|invalid)", r"not (logged|signed) in",
    r"/login",
)
_FATAL_ERRORS = compile_patterns(
    r"unexpected argument", r"unknown option", r"unrecognized (option|argument)", r"invalid value",
    r"model[^\n]{0,80}(not found|not available|not supported|unavailable)", r"\b403\b", r"forbidden",
    r"not (enabled|entitled)", r"no access to (github )?copilot", r"subscription",
)
_LOGIN_FIX = ("log in to the GitHub Copilot CLI: run `copilot login` (or /login inside `copilot`), or `gh auth login`, "
              "or set COPILOT_GITHUB_TOKEN (or GH_TOKEN / GITHUB_TOKEN) to a token with Copilot access; then run the "
              "night again")


class CopilotCLIBackend(AgentCLIBackend):
    """Calls the ``copilot`` CLI in prompt mode once per attempt (see the module docstring for the exact command).

    binary: ``copilot`` on PATH or an absolute path (config ``copilot_bin``). model: the target model
    (``--model``; None: the CLI's default). optimizer_model: model of the miner, judge and optimizer roles (default:
    model). timeout_s: seconds per attempt, after which the process group is killed (a transient "timeout").
    max_retries: retries of a transient failure; backoff_base_s: seconds of the first wait (exponential with jitter).
    copilot_home: the user's Copilot directory whose ``mcp-config.json`` names the servers to disable (default
    ``$COPILOT_HOME``, else ``~/.copilot``).

    Usage tokens come from the ``--usage-output-file`` JSON (prompt = input + cache-read + cache-write tokens,
    completion = output tokens); estimated as len(text) / 4 when it reports none. ``temperature``,
    ``max_tokens`` and ``seed`` are ignored.
    """

    name = "copilot"
    runs_tools = False
    binary_setting = "copilot_bin"
    binary_label = "Copilot CLI"
    install_hint = "Install the GitHub Copilot CLI (npm install -g @github/copilot)"
    tested_version = TESTED_VERSION
    update_hint = "update the Copilot CLI (`copilot update`, or npm install -g @github/copilot)"

    def __init__(self, *, binary: str = "copilot", copilot_home: str | os.PathLike[str] | None = None, **options):
        super().__init__(binary=binary, **options)
        self.copilot_home = Path(copilot_home) if copilot_home else None

    def command(self, path: str, role: Role, usage_path: str) -> list[str]:
        """The argv of one call (the prompt is not part of it: it goes on stdin)."""
        argv = [path, *COPILOT_FLAGS, "--usage-output-file", usage_path]
        argv += [f"--disable-mcp-server={name}" for name in user_mcp_servers(self.copilot_home or user_copilot_home())]
        model = self._configured_model(role)
        if model:
            argv += ["--model", model]
        return argv

    def chat(self, request: ChatRequest) -> ChatResult:
        """Run the request through ``copilot``; never raises for a failed call.

        Returns text (compact JSON text when ``request.json_schema`` is set), usage, latency_s (seconds, all
        attempts), attempts; on failure ``error`` and ``error_kind``: fatal for a missing binary, a login/auth
        error, an unknown flag or model, no Copilot access; transient for timeouts, other failures, empty replies
        and replies without the requested JSON.
        """
        model = self.model_for(request.role)
        path = find_binary(self.binary)
        if path is None:
            return self.missing_binary_result(model)
        prompt = render_prompt(request)
        return chat_with_retries(lambda: self._attempt(path, prompt, request), model=model,
                                 max_retries=self.max_retries, backoff_base_s=self.backoff_base_s)

    def _attempt(self, path: str, prompt: str, request: ChatRequest) -> AttemptReply:
        with scratch_dirs("skillopt-sleep-copilot-") as (work_dir, scratch):
            usage_path = os.path.join(scratch, USAGE_FILE)
            argv = self.command(path, request.role, usage_path)
            try:
                outcome = run_contained(argv, stdin_text=prompt, cwd=work_dir, timeout_s=self.timeout_s,
                                        env=child_environment(drop=DROPPED_ENV))
            except OSError as exc:
                raise self.start_failed(path, exc) from None
            usage = read_usage(usage_path)
        text = read_reply(outcome, timeout_s=self.timeout_s, prompt=prompt)
        if request.json_schema is not None:
            text = structured_text(text)
        if usage is None:
            usage = Usage(prompt_tokens=estimate_tokens(prompt), completion_tokens=estimate_tokens(text))
        return AttemptReply(text=text, usage=usage)


# --------------------------------------------------------------------------- the user's setup


def user_copilot_home() -> Path:
    """The user's Copilot directory: ``$COPILOT_HOME``, else ``~/.copilot``."""
    return Path(os.environ.get("COPILOT_HOME") or os.path.expanduser("~/.copilot"))


def user_mcp_servers(copilot_home: Path) -> list[str]:
    """Names of the MCP servers in ``copilot_home/mcp-config.json`` (``mcpServers``), sorted; [] when none."""
    try:
        data = json.loads((copilot_home / "mcp-config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    return sorted(name for name in servers if isinstance(name, str) and name) if isinstance(servers, dict) else []


# --------------------------------------------------------------------------- reading the CLI's output


def read_usage(path: str) -> Usage | None:
    """Tokens from a ``--usage-output-file`` JSON (summed over ``modelMetrics``), or None when there are none."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    metrics = data.get("modelMetrics") if isinstance(data, dict) else None
    if not isinstance(metrics, dict):
        return None
    prompt = completion = 0
    for entry in metrics.values():
        usage = entry.get("usage") if isinstance(entry, dict) else None
        if not isinstance(usage, dict):
            continue

        def count(key: str, usage: dict[str, Any] = usage) -> int:
            value = usage.get(key)
            return value if isinstance(value, int) and value > 0 else 0

        prompt += count("inputTokens") + count("cacheReadTokens") + count("cacheWriteTokens")
        completion += count("outputTokens")
    if prompt == 0 and completion == 0:
        return None
    return Usage(prompt_tokens=prompt, completion_tokens=completion)


def _data(event: dict[str, Any]) -> dict[str, Any]:
    data = event.get("data")
    return data if isinstance(data, dict) else {}


def read_reply(outcome: ProcessOutcome, *, timeout_s: float, prompt: str = "") -> str:
    """Return the reply of a finished ``copilot`` run (its last ``assistant.message``); raise ``AttemptFailed``
    otherwise. prompt: the prompt sent (an echo of it is not taken as evidence of an error kind)."""
    if outcome.timed_out:
        raise timeout_failure("copilot", timeout_s)
    events = json_line_events(outcome.stdout)
    errors = [str(_data(event).get("message") or "") for event in events if event.get("type") == "session.error"]
    replies = [_data(event).get("content") for event in events if event.get("type") == "assistant.message"]
    replies = [reply for reply in replies if isinstance(reply, str) and reply.strip()]
    results = [event for event in events if event.get("type") == "result"]
    exit_code = results[-1].get("exitCode") if results else None
    if outcome.returncode == 0 and not errors and exit_code in (0, None) and replies:
        return replies[-1]
    said = "; ".join(error for error in errors if error)
    detail = outcome.failure_detail(said, show_stdout=not events)
    evidence = without_prompt_echo(f"{said}\n{outcome.stderr}\n{outcome.stdout if not events else ''}", prompt)
    raise_if_refused("copilot", detail, logged_out=matches_any(evidence, _AUTH_ERRORS),
                     rejected=matches_any(evidence, _FATAL_ERRORS), login_fix=_LOGIN_FIX,
                     rejected_hint="check the model name and your Copilot access, and update the Copilot CLI if a "
                                   f"flag is unknown; skillopt-sleep runs `copilot {' '.join(COPILOT_FLAGS)} "
                                   "--usage-output-file FILE`",
                     rejected_fix="check copilot_model ('skillopt-sleep config show') and that your GitHub account "
                                  "has Copilot, and update the Copilot CLI (`copilot update`) if a flag is unknown")
    if outcome.returncode != 0 or errors or exit_code not in (0, None):
        status = outcome.returncode if outcome.returncode != 0 else exit_code
        raise AttemptFailed(f"copilot exited with status {status} ({detail})", "transient")
    raise AttemptFailed(f"empty reply from copilot: no assistant message ({detail})", "transient")


__all__ = ["COPILOT_FLAGS", "TESTED_VERSION", "CopilotCLIBackend", "find_binary", "read_reply",
           "read_usage", "user_mcp_servers"]
