"""The one small protocol every LLM backend implements, and the meter every call goes through.

A backend turns a ``ChatRequest`` into a ``ChatResult``. It never raises for a failed call: it returns
``ChatResult(error=..., error_kind="fatal"|"transient")`` after its own retries. The ``CallMeter`` wraps a
backend for one night: it records every call (``CallRecord``), enforces the night's budgets, and raises
``BackendError`` on a fatal error so the night stops at once.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from skillopt_sleep.backends.structured import (
    REPLY_CUT_OFF,
    REPLY_REPAIRED,
    repair_cut_reply,
    retry_budget,
    structured_budget,
)
from skillopt_sleep.errors import BackendError, BudgetExhausted
from skillopt_sleep.models import CallRecord, Role, RoleCost, Usage

ErrorKind = Literal["fatal", "transient"]
#: ``ChatResult.fix`` of a reply that holds no JSON where JSON was asked for (a model too small for the task).
NO_JSON_FIX = ("the model did not return valid JSON: configure a larger model (target_model / optimizer_model, or "
               "model_path for the local backend; one under ~1B parameters often cannot), then run again")

logger = logging.getLogger("skillopt_sleep.calls")


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["system", "user", "assistant"]
    content: str


class ChatRequest(BaseModel):
    """One chat completion.

    json_schema: a JSON schema the reply must satisfy (structured output), or None for free text.
    temperature: float >= 0; max_tokens: int (completion tokens); seed: int or None.
    purpose: with ``json_schema``, which structured reply this is (a key of ``structured.STRUCTURED_MAX_TOKENS``:
    reflect, merge, rank, judge, miner, reader, rewrite): ``CallMeter`` then sets ``max_tokens`` to that purpose's
    budget and retries / repairs a reply cut off at it. None: ``max_tokens`` is used as given.
    """

    model_config = ConfigDict(extra="forbid")
    role: Role
    messages: list[ChatMessage]
    json_schema: dict[str, Any] | None = None
    temperature: float = 0.0
    max_tokens: int = 512
    seed: int | None = None
    purpose: str | None = None


class ChatResult(BaseModel):
    """The reply. ``error`` is set (and ``text`` empty) when the call failed; latency_s in seconds. ``fix``: with
    ``error``, one sentence the user can act on, written by the backend that knows it (its login command, key
    variable, setting or endpoint); it becomes ``BackendError.fix``. None: the backend has none to give.
    cut_off: with ``error``, a structured reply stopped at ``max_tokens`` before its JSON was complete; ``partial``
    then holds its unfinished text (``CallMeter`` retries and repairs it). reason: a machine-readable cause set by
    ``CallMeter`` (``structured.REPLY_CUT_OFF`` on a failure, ``structured.REPLY_REPAIRED`` on a repaired success),
    else None."""

    model_config = ConfigDict(extra="forbid")
    text: str = ""
    usage: Usage = Field(default_factory=Usage)
    latency_s: float = 0.0
    model: str = ""
    error: str | None = None
    error_kind: ErrorKind | None = None
    fix: str | None = None
    attempts: int = 1
    tools_called: list[str] = Field(default_factory=list)
    cut_off: bool = False
    partial: str = ""
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@runtime_checkable
class Backend(Protocol):
    """An LLM backend. ``name`` is the registry name; ``model_for(role)`` the model used for a role."""

    name: str

    def model_for(self, role: Role) -> str: ...

    def chat(self, request: ChatRequest) -> ChatResult:
        """Send one chat completion for ``request.role`` to ``model_for(request.role)`` and return its reply.

        Input: ``request.messages`` in order; ``json_schema``, when set, asks for structured output;
        ``temperature``, ``max_tokens`` (a cap on completion tokens) and ``seed`` are hints a backend may clamp or
        ignore (the agent CLIs ignore all three). A backend whose calls leave transcripts behind (the agent CLIs)
        puts ``SESSION_MARKER`` into the prompt, so the harvesters skip them.

        On success: ``text`` is the reply, ``error`` and ``error_kind`` are None. With ``json_schema`` set,
        ``text`` is one JSON value (the real backends extract it from the reply and re-serialize it with
        ``json.dumps``); it is not validated against the schema here, and a reply holding no JSON is a
        transient failure. A structured reply that stopped at ``max_tokens`` before its JSON was complete is a
        transient failure with ``cut_off=True`` and its text in ``partial``, not retried by the backend (the meter
        retries it with more room, bounded by the backend's optional ``context_tokens`` attribute, and repairs it).
        On failure: ``text`` is empty, ``error`` is a message saying what failed and, where the backend knows,
        what to fix (API keys masked), and ``error_kind`` is ``"fatal"`` (retrying cannot help: missing binary
        or model file, unknown model, login or key rejected, exhausted quota, bad flag) or ``"transient"``
        (timeout, connection error, 408/409/429/5xx, malformed or empty reply, no JSON where JSON was asked).
        Always: ``usage`` in tokens spent by the call's attempts (estimated as characters / 4 where the backend
        reports none; on a failure 0 when no attempt got a reply, which ``CallMeter`` counts as the backend being
        down, and the agent CLIs report 0 for every failure), ``latency_s`` in seconds (wall clock of the whole
        call, retries and waits included),
        ``attempts`` >= 1, ``model`` the model name used, ``tools_called`` the tools that really ran (empty
        unless the backend runs tools, see its ``runs_tools``).

        Errors: a failed call is returned, never raised, and only after the backend's own retries of transient
        failures; an exception that escapes is a bug, which ``CallMeter.chat`` records as a fatal error.
        Thread-safe: replay calls it from ``workers`` threads at once (a backend that cannot run calls in
        parallel, like ``local``, serializes them itself).
        """
        ...


class Budget(BaseModel):
    """Per-night limits across all roles; 0 (or None) means no limit."""

    model_config = ConfigDict(extra="forbid")
    max_calls: int = 0
    max_tokens: int = 0
    max_minutes: float = 0.0
    max_usd: float = 0.0
    usd_per_1k_tokens: float = 0.0


class CallMeter:
    """Wraps a backend for one night: records calls, enforces budgets, stops on fatal errors.

    ``chat()`` raises ``BudgetExhausted`` before a call that a budget no longer allows, and
    ``BackendError`` when the backend reports a fatal error, a transient one after its retries (unless the
    caller passes ``fail_on_error=False``), or, whatever the caller asked, a fatal ``BackendError`` (kind
    ``"repeated_failures"``) once ``max_consecutive_failures`` calls in a row got no reply at all (failed
    after their retries with zero tokens used: unreachable, timing out, crashing): a backend that is down
    stops the night instead of being scored as wrong answers. A failed call that used tokens (e.g. a reply
    that is not valid JSON) is the model's failure, not the backend's, and does not count; any successful
    call ends the streak.
    Thread-safe (replay runs with ``workers`` threads). clock: a monotonic clock in seconds (for tests).
    on_record: called as ``on_record(record, calls, tokens)`` after each call is recorded (totals so far), from the
    calling thread (a progress display: ``progress.watch_meter``); what it raises propagates from ``chat()``.

    Structured replies (a request with ``json_schema`` and ``purpose``): ``max_tokens`` is set to
    ``structured.structured_budget(purpose, structured_max_tokens)`` (the config's ``structured_max_tokens``, 0 =
    the per-purpose table). A reply the backend reports cut off at that budget (``ChatResult.cut_off``) is asked
    once more with ``structured.retry_budget`` tokens (twice as many, at most half the backend's
    ``context_tokens`` where it has that attribute); still cut, its unfinished JSON is repaired
    (``structured.repair_cut_reply``; the result has ``reason == REPLY_REPAIRED``), and when nothing usable is left
    the call fails (transient, ``reason == REPLY_CUT_OFF``, ``fix`` naming ``structured_max_tokens``). Both tries
    make one ``CallRecord`` (tokens, attempts and seconds summed; ``max_tokens`` the last budget asked).
    """

    def __init__(self, backend: Backend, budget: Budget | None = None, *, clock=time.monotonic,
                 max_consecutive_failures: int = 3,
                 on_record: Callable[[CallRecord, int, int], None] | None = None,
                 structured_max_tokens: int = 0):
        self.backend = backend
        self.structured_max_tokens = structured_max_tokens
        self.budget = budget or Budget()
        self.records: list[CallRecord] = []
        self.max_consecutive_failures = max_consecutive_failures
        self._clock = clock
        self._started = clock()
        self._lock = threading.Lock()
        self._reserved = 0
        self._failures_in_a_row = 0
        self._last_fix: str | None = None  # the fix of the last failed call (for check_alive)
        self._tokens = 0
        self.on_record = on_record

    # -- accounting
    @property
    def calls(self) -> int:
        return len(self.records)

    @property
    def tokens(self) -> int:
        return sum(r.usage.total for r in self.records)

    def usd(self) -> float:
        return self.tokens / 1000.0 * self.budget.usd_per_1k_tokens

    def elapsed_minutes(self) -> float:
        return (self._clock() - self._started) / 60.0

    def remaining_calls(self) -> int | None:
        if not self.budget.max_calls:
            return None
        return max(0, self.budget.max_calls - self.calls - self._reserved)

    def check_budget(self) -> None:
        """Raise ``BudgetExhausted`` if any budget is already spent."""
        budget = self.budget
        if budget.max_calls and self.calls + self._reserved >= budget.max_calls:
            raise BudgetExhausted(f"max_calls_per_night={budget.max_calls} reached", limit="max_calls_per_night")
        if budget.max_tokens and self.tokens >= budget.max_tokens:
            raise BudgetExhausted(f"max_tokens_per_night={budget.max_tokens} reached", limit="max_tokens_per_night")
        if budget.max_minutes and self.elapsed_minutes() >= budget.max_minutes:
            raise BudgetExhausted(f"max_minutes_per_night={budget.max_minutes} reached",
                                  limit="max_minutes_per_night")
        if budget.max_usd and budget.usd_per_1k_tokens and self.usd() >= budget.max_usd:
            raise BudgetExhausted(f"max_usd_per_night={budget.max_usd} reached", limit="max_usd_per_night")

    def cost_by_role(self) -> dict[str, RoleCost]:
        out: dict[str, RoleCost] = {}
        for record in self.records:
            cost = out.setdefault(record.role, RoleCost())
            cost.calls += 1
            cost.failed_calls += 0 if record.ok else 1
            cost.cached_calls += 1 if record.cached else 0
            cost.prompt_tokens += record.usage.prompt_tokens
            cost.completion_tokens += record.usage.completion_tokens
            cost.seconds += record.latency_s
        return out

    def errors(self) -> list[dict[str, Any]]:
        return [
            {"role": r.role, "model": r.model, "backend": r.backend, "kind": r.error_kind, "message": r.error,
             "attempts": r.attempts, **({"reason": r.reason, "max_tokens": r.max_tokens} if r.reason else {})}
            for r in self.records if not r.ok
        ]

    # -- calls
    def check_alive(self) -> None:
        """Raise a fatal ``BackendError`` (kind ``repeated_failures``) when calls were made and not one of them got a
        reply: a night too small to reach ``max_consecutive_failures`` must not end as "nothing to learn" either."""
        with self._lock:
            records = list(self.records)
            fix = self._last_fix
        if records and not any(record.ok or record.usage.total for record in records):
            last = records[-1]
            raise BackendError(f"none of the night's {len(records)} call(s) got a reply after their retries, the "
                               f"backend looks down; last: {last.error or 'unknown error'}", role=last.role,
                               model=last.model, backend=self.backend.name, fatal=True, kind="repeated_failures",
                               fix=fix)

    def chat(self, request: ChatRequest, *, fail_on_error: bool = True) -> ChatResult:
        """Make one call through the backend and record it.

        fail_on_error: raise ``BackendError`` for any error that survived the backend's retries (fatal
        ones always raise). With False, a transient error is returned in the result for the caller to
        count (e.g. one judge call that timed out), unless the backend looks down (see the class docstring).
        """
        with self._lock:
            self.check_budget()
            self._reserved += 1
        if request.json_schema is not None and request.purpose is not None:
            request = request.model_copy(update={
                "max_tokens": structured_budget(request.purpose, self.structured_max_tokens)})
        try:
            result = self.backend.chat(request)
            if result.cut_off and request.json_schema is not None:
                request, result = self._recover_cut_reply(request, result)
        except BackendError:
            raise
        except Exception as exc:  # a backend bug must not look like a score of 0
            result = ChatResult(error=f"{type(exc).__name__}: {exc}", error_kind="fatal")
        finally:
            with self._lock:
                self._reserved -= 1
        record = CallRecord(
            role=request.role,
            backend=self.backend.name,
            model=result.model or self.backend.model_for(request.role),
            ok=result.ok,
            usage=result.usage,
            latency_s=result.latency_s,
            attempts=result.attempts,
            error=result.error,
            error_kind=result.error_kind,
            reason=result.reason,
            max_tokens=request.max_tokens if request.json_schema is not None else None,
        )
        with self._lock:
            self.records.append(record)
            number = len(self.records)
            self._tokens += record.usage.total
            tokens = self._tokens
            if result.ok:
                self._failures_in_a_row = 0
            else:
                self._last_fix = result.fix
                if result.usage.total == 0:
                    self._failures_in_a_row += 1
            failures_in_a_row = self._failures_in_a_row
        logger.info("call %d %s %s/%s: %s, %d+%d tokens, %.1fs", number, record.role, record.backend, record.model,
                    "ok" if record.ok else f"{record.error_kind} error: {record.error}",
                    record.usage.prompt_tokens, record.usage.completion_tokens, record.latency_s)
        if self.on_record is not None:
            self.on_record(record, number, tokens)
        if (not result.ok and result.error_kind != "fatal" and self.max_consecutive_failures
                and failures_in_a_row >= self.max_consecutive_failures):
            raise BackendError(
                f"{failures_in_a_row} calls in a row got no reply after their retries, the backend looks down; "
                f"last: {result.error or 'unknown error'}",
                role=request.role,
                model=record.model,
                backend=self.backend.name,
                fatal=True,
                kind="repeated_failures",
                fix=result.fix,
            )
        if not result.ok and (result.error_kind == "fatal" or fail_on_error):
            raise BackendError(
                result.error or "unknown error",
                role=request.role,
                model=record.model,
                backend=self.backend.name,
                fatal=result.error_kind == "fatal",
                kind=result.error_kind or "error",
                fix=result.fix,
            )
        return result

    def _recover_cut_reply(self, request: ChatRequest, first: ChatResult) -> tuple[ChatRequest, ChatResult]:
        """Retry a cut-off structured reply once with more room, then repair it (see the class docstring).
        Returns the last request made and the combined result."""
        results, caps, last = [first], [request.max_tokens], first
        room = retry_budget(request.max_tokens, getattr(self.backend, "context_tokens", None))
        if room > request.max_tokens:
            request = request.model_copy(update={"max_tokens": room})
            last = self.backend.chat(request)
            results.append(last)
            caps.append(room)
            logger.info("%s reply cut off at %d tokens; retried with %d: %s", request.role, caps[0], room,
                        "cut off again" if last.cut_off else "ok" if last.ok else "failed")
            if not last.cut_off:
                return request, _combined(results, last)
        repaired = repair_cut_reply(last.partial)
        if repaired is not None:
            logger.info("%s reply cut off at %d tokens: repaired its JSON", request.role, request.max_tokens)
            done = ChatResult(text=json.dumps(repaired, ensure_ascii=False), model=last.model,
                              reason=REPLY_REPAIRED)
            return request, _combined(results, done)
        tried = " then ".join(str(cap) for cap in caps)
        failed = ChatResult(
            model=last.model, error_kind="transient", reason=REPLY_CUT_OFF,
            error=(f"the {request.purpose or 'structured'} reply was cut off at max_tokens={request.max_tokens} "
                   f"(asked with {tried} tokens) and its JSON could not be repaired: {last.partial[:80]!r}"),
            fix=(f"raise structured_max_tokens (the reply was cut at {request.max_tokens} tokens): "
                 f"'skillopt-sleep config set structured_max_tokens {2 * request.max_tokens}', or use a model with a "
                 "larger context"))
        return request, _combined(results, failed)


def _combined(results: list[ChatResult], final: ChatResult) -> ChatResult:
    """``final`` with the tokens, attempts and seconds of every try in ``results`` summed."""
    return final.model_copy(update={
        "usage": Usage(prompt_tokens=sum(r.usage.prompt_tokens for r in results),
                       completion_tokens=sum(r.usage.completion_tokens for r in results)),
        "attempts": sum(r.attempts for r in results),
        "latency_s": sum(r.latency_s for r in results),
        "cut_off": False, "partial": ""})
