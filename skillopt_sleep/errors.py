"""Errors meant to be shown to the user, and the exit codes they end a command with.

Every class here is a ``SleepError``, but ``Interrupted`` (a ``BaseException``, like ``KeyboardInterrupt``). Each
carries a message that says what went wrong, ``fix`` (optional: one sentence the user can act on, written where the
error is raised, e.g. by the backend that knows its login command, key variable or endpoint) and ``exit_code`` (a
class attribute). ``str(error)`` is the message followed by the fix (``"<message>; <fix>"``); ``error.message`` is
the message alone. The CLI (``cli.common.user_errors``) prints ``str(error)`` as one red line and exits with
``error.exit_code``; anything that is not a ``SleepError`` (or ``Interrupted``) is a bug.

Exit codes (README's "Exit codes" paragraph says the same):

====  =============================================================================================================
0     success: a completed night (accepted, rejected, or nothing to learn), a command that did its job
1     ``SleepError`` (``ConfigError``, ``HarvestError``, ``ScheduleError``, ``ModelPullError``, the adopt errors,
      ``TeamError``, ...): a bad config or a refused request; also a pydantic validation error
2     ``BackendError``: the LLM backend failed (the night stops, nothing is staged); typer also exits 2 for a
      bad command-line option
3     ``BudgetExhausted``: a per-night budget was reached (``train`` keeps its completed steps)
4     ``LockedError``: another night (or adopt / revert) is running for the project
70    ``INTERNAL_ERROR_EXIT_CODE``: a bug (anything that is not a ``SleepError``), shown as one line
====  =============================================================================================================

A night stopped by a signal (``Interrupted``) exits 128 + the signal's number, as shells do: 130 for SIGINT
(Ctrl-C), 143 for SIGTERM (a shutdown, ``systemctl stop``); it is recorded as ``interrupted``, with its stage.

``run-now`` reports a backend error or an exhausted budget in ``diagnostics.json`` (status ``backend_error`` /
``budget_exhausted``) and exits with that class's code; ``train`` exits with it after printing the error.
"""

from __future__ import annotations

from pathlib import Path

#: Exit code of a command that failed on a bug (an exception that is not a ``SleepError``).
INTERNAL_ERROR_EXIT_CODE = 70


class SleepError(Exception):
    """An error that is displayed to the user: one line, the message then the fix. Exit code 1.

    message: what went wrong. fix: one sentence the user can act on (None: the message says it, or there is
    nothing to do).
    """

    exit_code = 1

    def __init__(self, message: str = "", *, fix: str | None = None):
        self.message = message
        self.fix = fix
        super().__init__(message)

    def __str__(self) -> str:
        return f"{self.message}; {self.fix}" if self.fix else self.message


class ConfigError(SleepError):
    """Invalid configuration: names the file (or source) and the key."""

    def __init__(self, message: str, *, source: str | None = None, key: str | None = None,
                 fix: str | None = None):
        self.source = source
        self.key = key
        where = ""
        if source and key:
            where = f"{source}: key '{key}': "
        elif source:
            where = f"{source}: "
        elif key:
            where = f"key '{key}': "
        super().__init__(f"{where}{message}", fix=fix)


class HarvestError(SleepError):
    """A transcript source cannot be read at all (not a single malformed line: those are counted)."""


class BackendError(SleepError):
    """An LLM call failed for good. Exit code 2.

    ``fatal`` errors (401/403, unknown model, missing binary, unknown CLI flag) stop the night at once;
    transient ones (429, 5xx, timeouts, empty replies) are retried by the backend and only surface here
    once the retries are spent. ``fix`` comes from the backend that failed (``ChatResult.fix``): its login
    command, key variable, setting or endpoint; None when it named none.
    """

    exit_code = 2

    def __init__(self, message: str, *, role: str = "", model: str = "", backend: str = "",
                 fatal: bool = True, kind: str = "error", fix: str | None = None):
        self.role = role
        self.model = model
        self.backend = backend
        self.fatal = fatal
        self.kind = kind
        super().__init__(message, fix=fix)


class BudgetExhausted(SleepError):
    """A per-night budget (calls, tokens, minutes, USD) was reached; the night stops cleanly. Exit code 3.

    limit: the config key of the budget (e.g. ``max_calls_per_night``); the fix says to raise it unless
    ``fix`` is given.
    """

    exit_code = 3

    def __init__(self, message: str, *, limit: str = "", fix: str | None = None):
        self.limit = limit
        if fix is None and limit:
            fix = f"raise {limit} ('skillopt-sleep config set {limit} N') or lower max_tasks_per_night / rollouts_k"
        super().__init__(message, fix=fix)


class LockedError(SleepError):
    """Another night (or adopt / revert) for the same project is running. Exit code 4."""

    exit_code = 4


class DamagedFileError(SleepError):
    """A file skillopt-sleep wrote and reads back (``state.json``, ``adoptions.json``, a proposal's manifest, a
    night's diagnostics) cannot be read, is not valid JSON or has the wrong shape (``fsio.load_json``). The message
    names the file and what is wrong; the fix says how to start afresh and what that forgets. Exit code 1."""


class ScheduleError(SleepError):
    """Installing, removing or reading a schedule failed (the message names the command and its stderr)."""


class ModelPullError(SleepError):
    """A model could not be pulled (pip failed, a wheel lacks its part, or the sha256 does not match)."""


class TeamError(SleepError):
    """A team-rules operation failed: a ``git`` command (the message names it and its stderr), a rule file that does
    not parse (the message names the file and the key), or a publish that was refused. Nothing half-written: rule
    files are written atomically, and a branch is created only with its commit."""


class AdoptError(SleepError):
    """Adopting or reverting a night's proposal was refused; nothing was written."""


class NothingToAdopt(AdoptError):
    """There is no such night, or nothing in it to adopt or revert (not accepted, already adopted, not adopted)."""


class TargetRefused(AdoptError):
    """A proposal's target is not a configured document inside the project (or not a regular file)."""


class ProposalTampered(AdoptError):
    """A staged proposal is missing, unreadable, or does not match the sha256 recorded when it was staged."""


class LiveFileChanged(AdoptError):
    """The live document changed since the night (or the adoption) in a way that cannot be merged safely."""


class Interrupted(BaseException):  # noqa: N818 - named for what happened, like KeyboardInterrupt
    """A night stopped by SIGINT or SIGTERM (``interrupts.night_signals``). Exit code 128 + the signal's number.

    A ``BaseException`` like ``KeyboardInterrupt``, so that no ``except Exception`` on the way (a harvester's, a
    backend's) swallows it. signum: the signal; stage: the stage the night was in (None: the night had finished
    when the signal came, and stopped after its last write); night_dir: where its ``diagnostics.json`` is (None
    before the night started).
    """

    def __init__(self, signum: int, *, stage: str | None = None, night_dir: Path | None = None):
        import signal

        self.signum = signum
        self.signal_name = signal.Signals(signum).name
        self.exit_code = 128 + signum
        self.stage = stage
        self.night_dir = night_dir
        super().__init__(signum)

    def __str__(self) -> str:
        where = f" in {self.night_dir}" if self.night_dir else ""
        if self.stage is None:
            return f"stopped by {self.signal_name} after the night finished (its result is recorded{where})"
        return (f"the night was stopped by {self.signal_name} during {self.stage}; nothing in your project changed and "
                f"nothing was staged; recorded as interrupted{where}. The next night reads the same sessions again")


__all__ = [
    "INTERNAL_ERROR_EXIT_CODE", "AdoptError", "BackendError", "BudgetExhausted", "ConfigError", "DamagedFileError",
    "HarvestError", "Interrupted", "LiveFileChanged", "LockedError", "ModelPullError", "NothingToAdopt",
    "ProposalTampered", "ScheduleError", "SleepError", "TargetRefused", "TeamError",
]
