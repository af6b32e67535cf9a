"""Run an agent CLI (``claude``, ``codex``) once, contained, and retry its transient failures.

Shared by ``claude_cli.py`` and ``codex_cli.py``; one job: turn a ``ChatRequest`` into one contained child
process per attempt and the attempts into one ``ChatResult``.

Containment of a call:

* the prompt goes on **stdin**, never on argv (argv is limited to ~128 KiB per argument on Linux, and long
  prompts were silently truncated there by the closest existing tool);
* the child runs in its own session (``start_new_session=True``), so its whole process group is killed
  (SIGTERM, then SIGKILL) when it hangs past ``timeout_s`` and after it exits (no stray grandchildren);
* the working directory is an empty temporary directory, removed afterwards;
* the child's environment carries ``SKILLOPT_SLEEP_REPLAY=1`` and every prompt starts with a line holding
  ``SESSION_MARKER``, so the harvester never mines the sessions these calls leave behind;
* output is decoded as UTF-8 with ``errors="replace"``; error messages carry only tails of stdout/stderr.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from skillopt_sleep.backends.base import NO_JSON_FIX, ChatRequest, ChatResult, ErrorKind
from skillopt_sleep.backends.jsonextract import extract_json
from skillopt_sleep.backends.retry import retrying
from skillopt_sleep.backends.structured import ends_mid_structure
from skillopt_sleep.models import Role, Usage
from skillopt_sleep.prompts.marker import SESSION_MARKER

#: Environment variable set to "1" for every agent CLI child process.
REPLAY_ENV_VAR = "SKILLOPT_SLEEP_REPLAY"
#: First line of every prompt sent to an agent CLI; it ends up in the user message of the CLI's own transcript.
MARKER_LINE = f"{SESSION_MARKER} automated replay call made by skillopt-sleep; not a user session."
#: Characters of stdout/stderr kept in an error message.
TAIL_CHARS = 600
#: Seconds between SIGTERM and SIGKILL of a timed-out process group.
KILL_GRACE_S = 2.0
#: The environment variables that name a child's temporary directory (POSIX ``TMPDIR``; ``TMP``/``TEMP`` elsewhere).
TEMP_ENV_VARS = ("TMPDIR", "TMP", "TEMP")
#: Most seconds waited between two attempts.
BACKOFF_MAX_S = 30.0
#: System prompt of a call without system messages whose CLI's own default prompt is replaced (local endpoints).
BARE_SYSTEM_PROMPT = "You are a helpful assistant. Answer the user's request directly."
#: Sentence appended (with the schema) to a structured-output prompt.
JSON_ONLY_INSTRUCTION = (
    "Reply with JSON only: a single JSON value that satisfies the JSON schema below, "
    "with no other text before or after it."
)


# --------------------------------------------------------------------------- finding the binary


DEFAULT_MODEL_LABEL = "default"
#: Seconds ``BINARY --version`` may take (the version check).
VERSION_TIMEOUT_S = 15.0

logger = logging.getLogger("skillopt_sleep.backends")


class AgentCLIBackend:
    """What the agent CLI backends (``claude``, ``codex``, ``gemini``, ``copilot``) share: the binary, the models
    per role, retries and timeout, and the failures of a binary that is missing or cannot be started.

    model: the model for the ``target`` role (None = the CLI's own default); optimizer_model: the model for the
    other roles (None = ``model``). timeout_s: seconds per call; backoff_base_s: seconds of the first retry wait.
    """

    name = "agent-cli"
    runs_tools = False

    def __init__(self, *, binary: str, model: str | None = None, optimizer_model: str | None = None,
                 timeout_s: float = 300.0, max_retries: int = 2, backoff_base_s: float = 1.0):
        self.binary = binary
        self.model = model or None
        self.optimizer_model = optimizer_model or None
        self.timeout_s = float(timeout_s)
        self.max_retries = max(0, int(max_retries))
        self.backoff_base_s = float(backoff_base_s)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(binary={self.binary!r}, model={self.model!r}, "
                f"optimizer_model={self.optimizer_model!r})")

    def _configured_model(self, role: Role) -> str | None:
        if role == "target":
            return self.model
        return self.optimizer_model or self.model

    def model_for(self, role: Role) -> str:
        """The model passed to the CLI for ``role``, or ``"default"`` (the CLI's configured default)."""
        return self._configured_model(role) or DEFAULT_MODEL_LABEL

    #: The config key naming the binary, what the fix calls it, and how to install it.
    binary_setting = "agent_bin"
    binary_label = "agent CLI"
    install_hint = "Install the agent CLI"

    def missing_binary_result(self, model: str) -> ChatResult:
        """The fatal ``ChatResult`` of a call whose binary cannot be found (the message and fix name
        ``binary_setting``)."""
        return ChatResult(error=missing_binary_message(self.binary, setting=self.binary_setting,
                                                       install_hint=self.install_hint),
                          error_kind="fatal", model=model,
                          fix=missing_binary_fix(self.binary, setting=self.binary_setting,
                                                 install_hint=self.install_hint))

    def start_failed(self, program: str, exc: OSError) -> AttemptFailed:
        """The fatal ``AttemptFailed`` of a binary that was found but cannot be started (raise it ``from None``)."""
        return AttemptFailed(f"cannot start {program}: {exc}; check {self.binary_setting}", "fatal",
                             fix=f"set {self.binary_setting} to an executable {self.binary_label} ({program} "
                                 "cannot be started)")

    #: The CLI version the flags were tested with (``.ci/install-agent-clis`` pins it); None: no check.
    tested_version: str | None = None
    #: How to update the CLI, for the version note.
    update_hint = "update it"

    def version_note(self) -> str:
        """A note when the installed CLI is older than ``tested_version`` (also logged as a warning), else "".

        How: runs ``BINARY --version`` once per backend (``VERSION_TIMEOUT_S`` seconds) and compares the first
        ``X.Y.Z`` it prints. A missing binary or an unreadable version gives "" (a call reports the binary itself).
        """
        if self.tested_version is None:
            return ""
        if self._version_note is None:
            installed = installed_version(self.binary)
            self._version_note = ""
            if installed is not None and version_tuple(installed) < version_tuple(self.tested_version):
                self._version_note = (
                    f"{self.name} {installed} is older than {self.tested_version}, the version skillopt-sleep was "
                    f"tested with; if a call fails with an unknown flag, {self.update_hint}")
                logger.warning("%s", self._version_note)
        return self._version_note

    _version_note: str | None = None


def find_binary(binary: str) -> str | None:
    """Return the executable's absolute path, or None when there is none.

    binary: a name looked up on ``$PATH`` (``shutil.which``), or a path (absolute, or containing a ``/``) that
    must exist, be a file and be executable. Cron and launchd run with a minimal PATH, so a configured
    absolute path is the reliable choice there.
    """
    if not binary:
        return None
    expanded = os.path.expanduser(binary)
    if os.sep in expanded or (os.altsep and os.altsep in expanded):
        path = os.path.abspath(expanded)
        return path if os.path.isfile(path) and os.access(path, os.X_OK) else None
    found = shutil.which(expanded)
    return os.path.abspath(found) if found else None


def version_tuple(version: str) -> tuple[int, ...]:
    """``"2.1.30"`` -> ``(2, 1, 30)`` (numeric parts only)."""
    return tuple(int(part) for part in re.findall(r"\d+", version))


def installed_version(binary: str) -> str | None:
    """The first ``X.Y.Z`` that ``BINARY --version`` prints (e.g. ``2.1.330 (Claude Code)``, ``codex-cli
    0.169.0``), or None when the binary is missing, fails, or prints none. Never raises."""
    path = find_binary(binary)
    if path is None:
        return None
    try:
        with scratch_dirs("skillopt-sleep-version-") as (work_dir, _scratch):
            outcome = run_contained([path, "--version"], stdin_text="", cwd=work_dir, timeout_s=VERSION_TIMEOUT_S,
                                    env=child_environment(drop=("CLAUDECODE",)))
    except OSError:
        return None
    found = re.search(r"\b(\d+\.\d+\.\d+)\b", outcome.stdout)
    return found.group(1) if outcome.returncode == 0 and found else None


def missing_binary_message(binary: str, *, setting: str, install_hint: str) -> str:
    """The fatal error text for an agent CLI that cannot be found (names the setting that fixes it)."""
    where = "that path does not exist or is not executable" if os.sep in binary else "it is not on PATH"
    return (f"'{binary}' executable not found: {where} (PATH={os.environ.get('PATH', '')}). "
            f"{missing_binary_fix(binary, setting=setting, install_hint=install_hint)}")


def missing_binary_fix(binary: str, *, setting: str, install_hint: str) -> str:
    """The fix for an agent CLI that cannot be found (``ChatResult.fix``): install it or set ``setting``."""
    return (f"{install_hint} or set {setting} to its absolute path (see `command -v "
            f"{os.path.basename(binary) or binary}` in your shell); cron and launchd run with a minimal PATH")


# --------------------------------------------------------------------------- one contained process


@dataclass(frozen=True)
class ProcessOutcome:
    """What one child process did.

    returncode: exit status, or None when it was killed for running past the timeout (``timed_out``).
    stdout, stderr: decoded text (UTF-8, undecodable bytes replaced). latency_s: seconds. pid: the child's pid
    (also its process-group id).
    """

    argv: tuple[str, ...]
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    latency_s: float
    pid: int

    def stdout_tail(self, chars: int = TAIL_CHARS) -> str:
        return tail(self.stdout, chars)

    def stderr_tail(self, chars: int = TAIL_CHARS) -> str:
        return tail(self.stderr, chars)

    def failure_detail(self, said: str = "", *, said_label: str = "error", show_stdout: bool = True) -> str:
        """What a failed run showed, for an error message: ``"<said_label>: <said>; stderr: ...; stdout: ..."``
        (each part only when not empty; stdout only when ``show_stdout``, its last 200 characters), or
        ``"no output"``. said: what the CLI's own output said went wrong (tailed)."""
        return "; ".join(part for part in (
            f"{said_label}: {tail(said)}" if said else "",
            f"stderr: {self.stderr_tail()}" if self.stderr.strip() else "",
            f"stdout: {self.stdout_tail(200)}" if show_stdout and self.stdout.strip() else "",
        ) if part) or "no output"


def tail(text: str, chars: int = TAIL_CHARS) -> str:
    """The last ``chars`` characters of ``text``, whitespace-collapsed ("..." marks a cut)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= chars else "..." + flat[-chars:]


def child_environment(*, drop: Iterable[str] = (), extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of this process's environment without ``drop``, with ``SKILLOPT_SLEEP_REPLAY=1`` and ``extra``."""
    env = {key: value for key, value in os.environ.items() if key not in set(drop)}
    env[REPLAY_ENV_VAR] = "1"
    env.update(extra or {})
    return env


def _kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):  # the group is already gone
        pass


def run_contained(argv: list[str], *, stdin_text: str, cwd: str, timeout_s: float,
                  env: Mapping[str, str] | None = None, kill_grace_s: float = KILL_GRACE_S) -> ProcessOutcome:
    """Run ``argv`` in its own session with ``stdin_text`` on stdin; wait at most ``timeout_s`` seconds.

    On timeout the whole process group gets SIGTERM, then SIGKILL after ``kill_grace_s`` seconds; after a
    normal exit any process left in the group is killed too. The child's temporary directory (``TEMP_ENV_VARS``)
    is one of its own, removed when it is done: what an agent CLI leaves there (Gemini CLI writes an error report
    into it on a failed call) never stays behind in the user's. Raises ``OSError`` (e.g. FileNotFoundError,
    PermissionError) when the program cannot be started at all.
    """
    with tempfile.TemporaryDirectory(prefix="skillopt-sleep-child-") as child_tmp:
        child_env = dict(os.environ if env is None else env)
        child_env.update(dict.fromkeys(TEMP_ENV_VARS, child_tmp))
        return _run_group(argv, stdin_text=stdin_text, cwd=cwd, timeout_s=timeout_s, env=child_env,
                          kill_grace_s=kill_grace_s)


def _run_group(argv: list[str], *, stdin_text: str, cwd: str, timeout_s: float, env: dict[str, str],
               kill_grace_s: float) -> ProcessOutcome:
    """``run_contained`` with the child's environment made."""
    started = time.monotonic()
    process = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=env,
        start_new_session=True,
    )
    timed_out = False
    try:
        out, err = process.communicate(stdin_text.encode("utf-8"), timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(process.pid, signal.SIGTERM)
        try:
            out, err = process.communicate(timeout=kill_grace_s)
        except subprocess.TimeoutExpired:
            _kill_group(process.pid, signal.SIGKILL)
            try:
                out, err = process.communicate(timeout=kill_grace_s)
            except subprocess.TimeoutExpired:  # a process that left the group still holds the pipes: stop reading
                process.kill()
                process.wait()
                for pipe in (process.stdout, process.stderr):
                    if pipe is not None:
                        pipe.close()
                out, err = b"", b""
    finally:
        _kill_group(process.pid, signal.SIGKILL)  # leaves nothing of the group running
        if process.poll() is None:  # only on an unexpected exception above
            process.kill()
            process.wait()
    return ProcessOutcome(
        argv=tuple(argv),
        returncode=None if timed_out else process.returncode,
        stdout=(out or b"").decode("utf-8", errors="replace"),
        stderr=(err or b"").decode("utf-8", errors="replace"),
        timed_out=timed_out,
        latency_s=time.monotonic() - started,
        pid=process.pid,
    )


@contextmanager
def scratch_dirs(prefix: str) -> Iterator[tuple[str, str]]:
    """Yield ``(work_dir, scratch_dir)``: an empty directory to run the child in, and its parent for files
    the call itself needs (e.g. Codex's ``-o`` file). Both are removed afterwards."""
    with tempfile.TemporaryDirectory(prefix=prefix) as scratch:
        work = os.path.join(scratch, "work")
        os.mkdir(work)
        yield work, scratch


# --------------------------------------------------------------------------- the prompt


def render_prompt(request: ChatRequest, *, with_system: bool = True) -> str:
    """Fold a ``ChatRequest`` into the one text an agent CLI reads on stdin.

    Layout: ``MARKER_LINE``; the system messages inside ``<instructions>`` (left out with ``with_system=False``,
    when they go to the CLI as its system prompt: ``system_prompt``); then the conversation: a lone user message
    as plain text, several messages each inside ``<user>``/``<assistant>`` tags; with a ``json_schema``,
    ``JSON_ONLY_INSTRUCTION`` and the schema inside ``<json_schema>``.
    """
    parts = [MARKER_LINE]
    system = system_text(request)
    if system and with_system:
        parts.append(f"<instructions>\n{system}\n</instructions>")
    turns = [m for m in request.messages if m.role != "system"]
    if len(turns) == 1 and turns[0].role == "user":
        parts.append(turns[0].content)
    else:
        parts.extend(f"<{m.role}>\n{m.content}\n</{m.role}>" for m in turns)
    if request.json_schema is not None:
        schema = json.dumps(request.json_schema, ensure_ascii=False, indent=2)
        parts.append(f"{JSON_ONLY_INSTRUCTION}\n<json_schema>\n{schema}\n</json_schema>")
    return "\n\n".join(parts)


def system_text(request: ChatRequest) -> str:
    """The request's system messages (the skill and memory of a replay), joined by blank lines; "" when none."""
    return "\n\n".join(m.content for m in request.messages if m.role == "system" and m.content.strip())


def system_prompt(request: ChatRequest) -> str:
    """The system prompt that replaces an agent CLI's own default one: the request's system messages, or
    ``BARE_SYSTEM_PROMPT`` when it has none (an empty one would bring the CLI's long default back)."""
    return system_text(request) or BARE_SYSTEM_PROMPT


def estimate_tokens(text: str) -> int:
    """A rough token count: ceil(len(text) / 4)."""
    return math.ceil(len(text) / 4)


# --------------------------------------------------------------------------- classifying failures


class AttemptFailed(Exception):
    """One attempt failed; ``kind`` says whether retrying can help ("fatal" or "transient"); ``fix`` is the sentence
    the user can act on (``ChatResult.fix``), None when there is none."""

    def __init__(self, message: str, kind: ErrorKind, fix: str | None = None, *, partial: str | None = None):
        self.kind = kind
        self.fix = fix
        self.partial = partial  # a structured reply cut off mid-JSON: its text (``structured_text``); else None
        super().__init__(message)


def matches_any(text: str, patterns: Iterable[re.Pattern[str]]) -> bool:
    return any(pattern.search(text) for pattern in patterns)


def timeout_failure(name: str, timeout_s: float) -> AttemptFailed:
    """The transient failure of a ``name`` run killed after ``timeout_s`` seconds, with the setting to raise."""
    return AttemptFailed(f"{name} timed out after {timeout_s:g}s (its process group was killed); "
                         "raise request_timeout_s if the model is slow", "transient",
                         fix=f"raise request_timeout_s (now {timeout_s:g}s) if the model is slow")


def raise_if_refused(name: str, detail: str, *, logged_out: bool, rejected: bool, login_fix: str,
                     rejected_hint: str, rejected_fix: str) -> None:
    """Raise the fatal ``AttemptFailed`` of a failed ``name`` run that retrying cannot help: ``logged_out`` (no
    login, or credentials refused: the fix is ``login_fix``), else ``rejected`` (the CLI or the API refused the call:
    ``rejected_hint`` follows the message, ``rejected_fix`` is the fix). detail: what the run printed, for the
    message. Returns when neither holds (the caller then says what else failed)."""
    if logged_out:
        raise AttemptFailed(f"{name} is not logged in or its credentials were rejected ({detail}): {login_fix}",
                            "fatal", fix=login_fix)
    if rejected:
        raise AttemptFailed(f"{name} rejected the call ({detail}): {rejected_hint}", "fatal", fix=rejected_fix)


def without_prompt_echo(text: str, prompt: str) -> str:
    """``text`` without the lines that also occur in ``prompt``.

    Agent CLIs echo the prompt into their progress output; a task about "the login page" must not make a
    failed call look like an authentication error.
    """
    prompt_lines = {line.strip() for line in prompt.splitlines() if line.strip()}
    return "\n".join(line for line in text.splitlines() if line.strip() not in prompt_lines)


def json_line_events(stdout: str) -> list[dict[str, Any]]:
    """The JSON objects of a CLI's JSON-lines stdout, one per line (lines that are not a JSON object are skipped)."""
    events = []
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events


def compile_patterns(*patterns: str) -> tuple[re.Pattern[str], ...]:
    """Case-insensitive regular expressions (a small helper so each backend lists its markers in one place)."""
    return tuple(re.compile(pattern, re.IGNORECASE) for pattern in patterns)


#: What an agent CLI says when nothing answers at its endpoint (Codex: "Connection failed: error sending request";
#: Claude Code: "Connection refused ... (ECONNREFUSED)").
_UNREACHABLE = compile_patterns(r"connection (failed|refused)", r"error sending request", r"econnrefused")


def check_endpoint_reached(evidence: str, endpoint: str | None, *, setting: str, detail: str) -> None:
    """Raise a fatal ``AttemptFailed`` naming ``setting`` when ``evidence`` (a failed call's output) says the CLI
    could not connect to ``endpoint``, a URL of the user's own; do nothing without one.

    Fatal: a server that refuses connections does not come back within a night's retries, and every later call
    would fail the same way.
    """
    if endpoint and matches_any(evidence, _UNREACHABLE):
        fix = f"start the model server at {endpoint}, or fix {setting} ('skillopt-sleep config show')"
        raise AttemptFailed(f"nothing answers at {setting} = {endpoint} ({detail}): {fix}", "fatal", fix=fix)


# --------------------------------------------------------------------------- attempts and retries


@dataclass(frozen=True)
class AttemptReply:
    """A successful attempt: the reply text and its usage."""

    text: str
    usage: Usage


def structured_text(text: str) -> str:
    """Return the JSON found in ``text`` as compact JSON text; raise transient ``AttemptFailed`` when none, with
    ``partial`` set to the text when its JSON ends mid-structure (``structured.ends_mid_structure``: cut off)."""
    parsed: Any = extract_json(text)
    if parsed is None and ends_mid_structure(text):
        raise AttemptFailed(f"reply cut off before its JSON was complete ({tail(text, 200)!r})", "transient",
                            fix=NO_JSON_FIX, partial=text)
    if parsed is None:
        raise AttemptFailed(f"invalid JSON reply (no JSON object or array in: {tail(text, 200)!r})", "transient",
                            fix=NO_JSON_FIX)
    return json.dumps(parsed, ensure_ascii=False)


def chat_with_retries(attempt: Callable[[], AttemptReply], *, model: str, max_retries: int,
                      backoff_base_s: float, backoff_max_s: float = BACKOFF_MAX_S) -> ChatResult:
    """Run ``attempt`` until it succeeds, fails fatally, or ``max_retries`` retries are spent.

    ``attempt`` returns an ``AttemptReply`` or raises ``AttemptFailed``; transient failures are retried with
    exponential backoff and jitter (tenacity), starting at ``backoff_base_s`` seconds, except a reply cut off
    mid-JSON (``AttemptFailed.partial``), returned at once with ``cut_off`` and ``partial`` for ``CallMeter`` to
    retry and repair. Never raises for a failed call: returns ``ChatResult(error=..., error_kind=...)`` with the
    number of attempts made.
    """
    started = time.monotonic()
    attempts = 0

    def counted() -> AttemptReply:
        nonlocal attempts
        attempts += 1
        return attempt()

    policy = retrying(retry_when=_is_transient, max_retries=max_retries, backoff_base_s=backoff_base_s,
                      backoff_max_s=backoff_max_s)
    try:
        reply = policy(counted)
    except AttemptFailed as exc:
        return ChatResult(
            text="",
            latency_s=time.monotonic() - started,
            model=model,
            error=f"{exc} (after {max(1, attempts)} attempt(s))",
            error_kind=exc.kind,
            fix=exc.fix,
            attempts=max(1, attempts),
            cut_off=exc.partial is not None,
            partial=exc.partial or "",
        )
    return ChatResult(text=reply.text, usage=reply.usage, latency_s=time.monotonic() - started, model=model,
                      attempts=max(1, attempts))



def _is_transient(exc: BaseException) -> bool:
    return isinstance(exc, AttemptFailed) and exc.kind == "transient" and exc.partial is None
