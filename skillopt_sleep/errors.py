"""Errors meant to be shown to the user.

Every class here carries a message that says what went wrong *and* how to fix it.
The CLI catches ``SleepError`` and prints it as one line; anything else is a bug.
"""

from __future__ import annotations


class SleepError(Exception):
    """An error that is displayed to the user (one line, with the fix)."""


class ConfigError(SleepError):
    """Invalid configuration: names the file (or source) and the key."""

    def __init__(self, message: str, *, source: str | None = None, key: str | None = None):
        self.source = source
        self.key = key
        where = ""
        if source and key:
            where = f"{source}: key '{key}': "
        elif source:
            where = f"{source}: "
        elif key:
            where = f"key '{key}': "
        super().__init__(f"{where}{message}")


class HarvestError(SleepError):
    """A transcript source cannot be read at all (not a single malformed line: those are counted)."""


class BackendError(SleepError):
    """An LLM call failed for good.

    ``fatal`` errors (401/403, unknown model, missing binary, unknown CLI flag) stop the night at once;
    transient ones (429, 5xx, timeouts, empty replies) are retried by the backend and only surface here
    once the retries are spent.
    """

    def __init__(self, message: str, *, role: str = "", model: str = "", backend: str = "",
                 fatal: bool = True, kind: str = "error"):
        self.role = role
        self.model = model
        self.backend = backend
        self.fatal = fatal
        self.kind = kind
        super().__init__(message)


class BudgetExhausted(SleepError):
    """A per-night budget (calls, tokens, minutes, USD) was reached; the night stops cleanly."""

    def __init__(self, message: str, *, limit: str = ""):
        self.limit = limit
        super().__init__(message)


class LockedError(SleepError):
    """Another night for the same project is running (exit code 4)."""

    exit_code = 4
