"""The user's own Codex CLI (``codex exec``) as a target/optimizer backend.

Command (every fixed flag in ``CODEX_FLAGS``; ``-m`` added when a model is configured)::

    codex exec --sandbox read-only --skip-git-repo-check --color never -o SCRATCH/last_message.txt [-m MODEL] -
        < prompt on stdin

* ``-`` as the prompt argument: Codex reads the prompt from stdin (never argv, where long prompts get cut).
* ``--sandbox read-only``: the agent may not write or reach the network from its shell; it runs in an empty
  temporary directory anyway, so there is nothing to read either. ``--skip-git-repo-check``: that directory is
  not a git repository.
* The reply is the agent's last message, read from the ``-o`` (``--output-last-message``) file, which lives in
  the scratch directory beside (not inside) the empty working directory. Progress on stdout/stderr is only
  used in error messages.
* The system prompt is folded into the stdin prompt (``subprocess_call.render_prompt``); the first line carries
  ``SESSION_MARKER`` and the child gets ``SKILLOPT_SLEEP_REPLAY=1``.
"""

from __future__ import annotations

import os

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
    missing_binary_message,
    render_prompt,
    run_contained,
    scratch_dirs,
    structured_text,
    without_prompt_echo,
)
from skillopt_sleep.models import Role, Usage

#: Fixed flags of every call, in one place (see the module docstring for why each is there).
CODEX_FLAGS: tuple[str, ...] = ("exec", "--sandbox", "read-only", "--skip-git-repo-check", "--color", "never")
#: Name of the ``-o`` file inside the scratch directory.
LAST_MESSAGE_FILE = "last_message.txt"
#: Seconds the ``codex login status`` probe may take.
LOGIN_STATUS_TIMEOUT_S = 15.0

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
_LOGIN_FIX = "run `codex login` in a terminal, then run the night again"
_INSTALL_HINT = "Install the Codex CLI (npm install -g @openai/codex)"


class CodexCLIBackend(AgentCLIBackend):
    """Calls ``codex exec`` once per attempt (see the module docstring for the exact command).

    binary: ``codex`` on PATH or an absolute path (config ``codex_bin``). model: the target model (``-m``; None:
    the CLI's configured default). optimizer_model: model of the miner, judge and optimizer roles (default:
    model). timeout_s: seconds per attempt, after which the process group is killed (a transient "timeout").
    max_retries: retries of a transient failure; backoff_base_s: seconds of the first wait (exponential with jitter).

    Usage tokens are **estimated** (len(text) / 4 for the prompt sent and the reply): ``codex exec`` reports no
    per-call usage in its plain output. ``temperature``, ``max_tokens`` and ``seed`` are ignored.
    """

    name = "codex"
    runs_tools = False

    def __init__(self, *, binary: str = "codex", **options):
        super().__init__(binary=binary, **options)

    def command(self, path: str, role: Role, last_message_path: str) -> list[str]:
        """The argv of one call (the prompt is not part of it: ``-`` makes Codex read stdin)."""
        argv = [path, *CODEX_FLAGS, "-o", last_message_path]
        model = self._configured_model(role)
        if model:
            argv += ["-m", model]
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
            return ChatResult(error=missing_binary_message(self.binary, setting="codex_bin",
                                                           install_hint=_INSTALL_HINT),
                              error_kind="fatal", model=model)
        prompt = render_prompt(request)
        return chat_with_retries(lambda: self._attempt(path, prompt, request), model=model,
                                 max_retries=self.max_retries, backoff_base_s=self.backoff_base_s)

    def _attempt(self, path: str, prompt: str, request: ChatRequest) -> AttemptReply:
        with scratch_dirs("skillopt-sleep-codex-") as (work_dir, scratch):
            last_message_path = os.path.join(scratch, LAST_MESSAGE_FILE)
            argv = self.command(path, request.role, last_message_path)
            try:
                outcome = run_contained(argv, stdin_text=prompt, cwd=work_dir, timeout_s=self.timeout_s,
                                        env=child_environment())
            except OSError as exc:
                raise AttemptFailed(f"cannot start {path}: {exc}; check codex_bin", "fatal") from None
            last_message = _read_text(last_message_path)
        text = read_reply(outcome, last_message, timeout_s=self.timeout_s, prompt=prompt)
        if request.json_schema is not None:
            text = structured_text(text)
        return AttemptReply(text=text, usage=Usage(prompt_tokens=estimate_tokens(prompt),
                                                   completion_tokens=estimate_tokens(text)))


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def read_reply(outcome: ProcessOutcome, last_message: str | None, *, timeout_s: float, prompt: str = "") -> str:
    """Return the reply of a finished ``codex exec`` run (its ``-o`` file); raise ``AttemptFailed`` otherwise.

    last_message: the ``-o`` file's text, or None when Codex wrote none. prompt: the prompt sent (its echo in the
    output is not taken as evidence of an error kind). stdout/stderr of a failed run are only ever part of the
    error message, never the reply.
    """
    if outcome.timed_out:
        raise AttemptFailed(f"codex timed out after {timeout_s:g}s (its process group was killed); "
                            "raise request_timeout_s if the model is slow", "transient")
    has_reply = last_message is not None and bool(last_message.strip())
    if outcome.returncode == 0 and has_reply:
        assert last_message is not None
        return last_message.strip()
    output = without_prompt_echo(f"{outcome.stderr}\n{outcome.stdout}", prompt)
    evidence = "\n".join(line for line in output.splitlines() if _ERROR_LINE.search(line))
    detail = "; ".join(part for part in (
        f"stderr: {outcome.stderr_tail()}" if outcome.stderr.strip() else "",
        f"stdout: {outcome.stdout_tail(200)}" if outcome.stdout.strip() else "",
    ) if part) or "no output"
    if matches_any(evidence, _AUTH_ERRORS):
        raise AttemptFailed(f"codex is not logged in or its credentials were rejected ({detail}): {_LOGIN_FIX}",
                            "fatal")
    if matches_any(evidence, _FATAL_ERRORS):
        raise AttemptFailed(f"codex rejected the call ({detail}): check the model name, and update the Codex CLI "
                            f"if a flag is unknown; skillopt-sleep runs `codex {' '.join(CODEX_FLAGS)} -o FILE -`",
                            "fatal")
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
    try:
        with scratch_dirs("skillopt-sleep-codex-") as (work_dir, _scratch):
            outcome = run_contained([path, "login", "status"], stdin_text="", cwd=work_dir,
                                    timeout_s=LOGIN_STATUS_TIMEOUT_S, env=child_environment())
    except OSError:
        return False
    said = f"{outcome.stdout}\n{outcome.stderr}".lower()
    return outcome.returncode == 0 and "not logged in" not in said


__all__ = ["CODEX_FLAGS", "CodexCLIBackend", "codex_logged_in", "find_binary", "read_reply"]
