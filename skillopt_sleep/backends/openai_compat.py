"""A backend for any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, llama.cpp's server, Ollama, ...).

Uses the official ``openai`` SDK with its own retries switched off; retries are ours (``tenacity``) so that
every attempt is counted and every failure is classified:

* fatal (returned at once, ``error_kind="fatal"``): 401/403, 404 (unknown model or wrong base_url), 429 about
  an exhausted quota, any other 4xx (except 408/409/429). The message says what to fix; ``ChatResult.fix``
  says it as one sentence (key variable, setting or endpoint), for this and for the transient failures below.
* transient (retried with exponential backoff and jitter, then ``error_kind="transient"``): 429, 408/409,
  5xx, connection errors, timeouts, malformed or truncated response bodies, empty replies.
* cut off (not retried here, ``error_kind="transient"`` with ``ChatResult.cut_off`` and ``partial``): a reply
  with ``finish_reason == "length"`` that holds no complete JSON where JSON was asked for, or no text at all;
  ``CallMeter`` retries it with more room and repairs it (``skillopt_sleep.backends.structured``).

Structured output (``ChatRequest.json_schema``) is asked for in the first way the server accepts, tried in
this order and remembered per endpoint (base_url + model), in memory and optionally on disk:
``json_schema`` response format, then ``json_object`` with the schema attached (llama.cpp's server), then
plain prompting (the schema is appended to the prompt) with tolerant extraction
(``skillopt_sleep.backends.jsonextract``).
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import openai

from skillopt_sleep.backends.base import NO_JSON_FIX, ChatRequest, ChatResult
from skillopt_sleep.backends.jsonextract import extract_json
from skillopt_sleep.backends.retry import retrying
from skillopt_sleep.errors import ConfigError
from skillopt_sleep.fsio import read_json, write_json_atomic
from skillopt_sleep.models import Role, Usage

StructuredMode = Literal["json_schema", "json_object", "prompt"]
STRUCTURED_MODES: tuple[StructuredMode, ...] = ("json_schema", "json_object", "prompt")

#: API key sent to an endpoint given by base_url when no key is configured: local servers (llama.cpp,
#: vLLM, Ollama) usually ignore the Authorization header, but the SDK requires some value.
PLACEHOLDER_API_KEY = "not-needed"
DEFAULT_ENDPOINT = "https://api.openai.com/v1"
_SERVER_MESSAGE_CHARS = 300


class _Failed(Exception):
    """One attempt failed; ``fix``: the sentence the user can act on (``ChatResult.fix``), None when there is none."""

    def __init__(self, message: str, fix: str | None = None):
        super().__init__(message)
        self.fix = fix


class _Transient(_Failed):
    """One attempt failed in a way worth retrying."""


class _Fatal(_Failed):
    """One attempt failed in a way that retrying cannot fix."""


class _CutOff(Exception):
    """The reply stopped at max_tokens (finish_reason ``length``) before it was complete; ``partial``: its text."""

    def __init__(self, message: str, partial: str):
        super().__init__(message)
        self.partial = partial


class _FormatRejected(Exception):
    """The server rejected the ``response_format`` parameter (400/422 about it)."""


@dataclass
class _Tally:
    """What the attempts of one ``chat()`` call cost."""

    attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None


def _redactor():
    """Return ``skillopt_sleep.redaction.redact.redact_text`` when that module exists, else None."""
    try:
        from skillopt_sleep.redaction.redact import redact_text
    except ImportError:
        return None
    return redact_text


class OpenAIBackend:
    """Chat completions against an OpenAI-compatible endpoint.

    base_url: endpoint root ending in ``/v1`` (default ``$OPENAI_BASE_URL``, else the OpenAI API).
    api_key: default ``$OPENAI_API_KEY``; when neither is set and a base_url is, ``PLACEHOLDER_API_KEY`` is
    sent (a local server needs no key). Raises ``ConfigError`` when there is neither a key nor a base_url.
    target_model: the model replayed as the agent; optimizer_model: reflects; judge_model and miner_model
    default to the optimizer model. timeout_s: seconds per attempt. max_retries: retries of a transient
    error (so at most max_retries + 1 attempts per request format). backoff_base_s / backoff_max_s: seconds,
    first and largest wait between attempts (exponential with jitter). structured_cache_path: JSON file
    remembering which structured-output format each endpoint accepts.
    """

    name = "openai"
    runs_tools = False

    def __init__(
        self,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        target_model: str,
        optimizer_model: str,
        judge_model: str | None = None,
        miner_model: str | None = None,
        timeout_s: float = 120.0,
        max_retries: int = 3,
        structured_cache_path: Path | None = None,
        backoff_base_s: float = 1.0,
        backoff_max_s: float = 30.0,
    ):
        base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        api_key = api_key or os.environ.get("OPENAI_API_KEY") or None
        if api_key is None:
            if base_url is None:
                raise ConfigError(
                    "the openai backend needs an API key or an endpoint: set OPENAI_API_KEY (or api_key), "
                    "or base_url / OPENAI_BASE_URL for a local OpenAI-compatible server",
                    key="api_key",
                )
            api_key = PLACEHOLDER_API_KEY
        if not target_model or not optimizer_model:
            raise ConfigError("target_model and optimizer_model must be non-empty model names", key="target_model")
        self.base_url = base_url
        self.endpoint = (base_url or DEFAULT_ENDPOINT).rstrip("/")
        self._api_key = api_key
        self.models: dict[str, str] = {
            "target": target_model,
            "optimizer": optimizer_model,
            "judge": judge_model or optimizer_model,
            "miner": miner_model or optimizer_model,
        }
        self.timeout_s = float(timeout_s)
        self.max_retries = max(0, int(max_retries))
        self.backoff_base_s = float(backoff_base_s)
        self.backoff_max_s = float(backoff_max_s)
        self.structured_cache_path = Path(structured_cache_path) if structured_cache_path else None
        self._client = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=self.timeout_s, max_retries=0)
        self._lock = threading.Lock()
        self._structured_modes: dict[str, StructuredMode] = self._load_structured_modes()

    def __repr__(self) -> str:  # never shows the key
        return f"OpenAIBackend(endpoint={self.endpoint!r}, models={self.models!r})"

    # ------------------------------------------------------------------ public

    def model_for(self, role: Role) -> str:
        """Return the model name used for ``role`` (target, optimizer, judge, miner)."""
        return self.models[role]

    def structured_mode(self, model: str) -> StructuredMode:
        """Return the structured-output format last accepted by this endpoint for ``model`` (default json_schema)."""
        with self._lock:
            return self._structured_modes.get(self._endpoint_key(model), "json_schema")

    def chat(self, request: ChatRequest) -> ChatResult:
        """Run one chat completion; never raises for a failed call.

        Returns ``ChatResult`` with text (the JSON text when ``request.json_schema`` is set), usage (tokens,
        summed over every attempt that got a reply), latency_s (seconds, all attempts and waits), attempts,
        and on failure ``error`` (redacted) with ``error_kind`` "fatal" or "transient", and ``fix`` where one
        applies (the key variable, setting or endpoint to check).
        """
        model = self.model_for(request.role)
        tally = _Tally()
        started = time.monotonic()
        try:
            if request.json_schema is None:
                text = self._call_with_retries(model, self._messages(request), request, {}, tally)
            else:
                text = self._structured_chat(model, request, tally)
        except _Fatal as exc:
            return self._failure(model, tally, started, str(exc), "fatal", exc.fix)
        except _Transient as exc:
            return self._failure(model, tally, started, str(exc), "transient", exc.fix)
        except _CutOff as exc:
            failed = self._failure(model, tally, started, str(exc), "transient", NO_JSON_FIX)
            return failed.model_copy(update={"cut_off": True, "partial": exc.partial})
        return ChatResult(
            text=text,
            usage=Usage(prompt_tokens=tally.prompt_tokens, completion_tokens=tally.completion_tokens),
            latency_s=time.monotonic() - started,
            model=model,
            attempts=max(1, tally.attempts),
        )

    # ------------------------------------------------------------------ structured output

    def _structured_chat(self, model: str, request: ChatRequest, tally: _Tally) -> str:
        schema = request.json_schema or {}
        start = STRUCTURED_MODES.index(self.structured_mode(model))
        reasons: list[str] = []
        for mode in STRUCTURED_MODES[start:]:
            messages = self._messages(request)
            extra: dict[str, Any] = {}
            if mode == "json_schema":
                extra["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": _schema_name(schema), "schema": schema, "strict": False},
                }
            elif mode == "json_object":
                extra["response_format"] = {"type": "json_object", "schema": schema}
            else:
                messages = _with_schema_instruction(messages, schema)
            try:
                text = self._call_with_retries(model, messages, request, extra, tally)
            except _FormatRejected as exc:
                reasons.append(f"{mode}: {exc}")
                continue
            parsed = _parse_json_reply(text) if mode != "prompt" else extract_json(text)
            if parsed is None and tally.finish_reason == "length":
                raise _CutOff(f"model '{model}' at {self.endpoint}: reply cut off at max_tokens={request.max_tokens} "
                              f"before its JSON was complete ({_head(text)!r})", text)
            if parsed is None:
                reasons.append(f"{mode}: reply is not JSON ({_head(text)!r})")
                continue
            self._remember_structured_mode(model, mode)
            return json.dumps(parsed, ensure_ascii=False)
        raise _Transient(
            f"model '{model}' at {self.endpoint} gave no JSON reply in any structured-output format: "
            + "; ".join(reasons),
            fix=NO_JSON_FIX,
        )

    def _endpoint_key(self, model: str) -> str:
        return f"{self.endpoint}|{model}"

    def _load_structured_modes(self) -> dict[str, StructuredMode]:
        if self.structured_cache_path is None:
            return {}
        try:
            data = read_json(self.structured_cache_path, default={})
        except (OSError, ValueError):  # unreadable or corrupt cache: start over, it is only a hint
            return {}
        if not isinstance(data, dict):
            return {}
        return {str(key): value for key, value in data.items() if value in STRUCTURED_MODES}

    def _remember_structured_mode(self, model: str, mode: StructuredMode) -> None:
        key = self._endpoint_key(model)
        with self._lock:
            if self._structured_modes.get(key) == mode:
                return
            self._structured_modes[key] = mode
            if self.structured_cache_path is None:
                return
            stored = self._load_structured_modes()
            stored[key] = mode
            try:
                write_json_atomic(self.structured_cache_path, stored)
            except OSError:  # the in-memory choice still holds for this night
                pass

    # ------------------------------------------------------------------ one request, with retries

    def _call_with_retries(self, model: str, messages: list[dict[str, str]], request: ChatRequest,
                           extra: dict[str, Any], tally: _Tally) -> str:
        """Return the reply text; raise _Fatal, _FormatRejected, or _Transient once the retries are spent."""
        policy = retrying(retry_when=lambda exc: isinstance(exc, _Transient), max_retries=self.max_retries,
                          backoff_base_s=self.backoff_base_s, backoff_max_s=self.backoff_max_s)
        return policy(self._attempt, model, messages, request, extra, tally)

    def _attempt(self, model: str, messages: list[dict[str, str]], request: ChatRequest,
                 extra: dict[str, Any], tally: _Tally) -> str:
        tally.attempts += 1
        params: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
            **extra,
        }
        if request.seed is not None:
            params["seed"] = request.seed
        try:
            completion = self._client.chat.completions.create(**params)
        except openai.APITimeoutError:
            raise self._transient(f"timed out after {self.timeout_s:g}s waiting for {self.endpoint} "
                                  f"(model '{model}'): raise request_timeout_s or check the server",
                                  fix=f"raise request_timeout_s, or check that the server at {self.endpoint} is "
                                      "reachable and not overloaded")
        except openai.APIConnectionError as exc:
            cause = exc.__cause__ or exc
            raise self._transient(f"connection to {self.endpoint} failed ({type(cause).__name__}: {cause}): "
                                  "check base_url and that the server is running",
                                  fix=f"check that the server at {self.endpoint} is reachable and running (base_url "
                                      "or OPENAI_BASE_URL), then run again")
        except openai.APIStatusError as exc:
            raise self._classify_status(exc, model, extra)
        except openai.APIResponseValidationError as exc:
            raise self._transient(f"malformed response body from {self.endpoint}: {exc}")
        except ValueError as exc:  # a body that is not JSON (json.JSONDecodeError) or cannot be read
            raise self._transient(f"malformed response body from {self.endpoint}: {type(exc).__name__}: {exc}")
        except openai.OpenAIError as exc:  # anything else the SDK raises: report it, do not crash the night
            raise self._fatal(f"request to {self.endpoint} failed: {type(exc).__name__}: {exc}")
        return self._reply_text(completion, model, tally)

    def _reply_text(self, completion: Any, model: str, tally: _Tally) -> str:
        """Return the first choice's text, counting usage; raise _Transient for a malformed or empty reply."""
        usage = getattr(completion, "usage", None)
        tally.prompt_tokens += _int(getattr(usage, "prompt_tokens", 0))
        tally.completion_tokens += _int(getattr(usage, "completion_tokens", 0))
        choices = getattr(completion, "choices", None)
        if not isinstance(choices, list) or not choices:
            raise self._transient(f"malformed reply from {self.endpoint}: no choices in the response body")
        message = getattr(choices[0], "message", None)
        content = getattr(message, "content", None)
        reason = getattr(choices[0], "finish_reason", None)
        tally.finish_reason = reason if isinstance(reason, str) else None
        if not isinstance(content, str) or not content.strip():
            if reason == "length":  # every token went before any text (a reasoning model's thinking): more room
                raise _CutOff(f"empty reply from model '{model}' at {self.endpoint}: cut off at max_tokens", "")
            raise self._transient(f"empty reply from model '{model}' at {self.endpoint}"
                                  + (f" (finish_reason={reason})" if reason else ""))
        return content

    def _classify_status(self, exc: openai.APIStatusError, model: str, extra: dict[str, Any]) -> Exception:
        status = exc.status_code
        detail = _server_message(exc)
        where = f"from {self.endpoint}"
        if status == 401:
            return self._fatal(f"401 Unauthorized {where}: check OPENAI_API_KEY / api_key ({detail})",
                               fix=f"set OPENAI_API_KEY (or api_key in the config) to a valid API key for "
                                   f"{self.endpoint}, then run 'skillopt-sleep run-now' again")
        if status == 403:
            return self._fatal(f"403 Forbidden {where} for model '{model}': check that the API key may use this "
                               f"model / project ({detail})",
                               fix=f"use an API key whose project may call model '{model}' (OPENAI_API_KEY or "
                                   "api_key), or choose another target_model / optimizer_model")
        if status == 404:
            return self._fatal(f"model '{model}' not found at {self.endpoint} (404): check target_model/"
                               f"optimizer_model, and that base_url ends in /v1 ({detail})",
                               fix=f"check target_model / optimizer_model ('skillopt-sleep config show'), and that "
                                   f"base_url ({self.endpoint}) ends in /v1")
        if status in (400, 422) and "response_format" in extra and _mentions_response_format(detail):
            return _FormatRejected(self._clean(f"{status} {detail}"))
        if status == 500 and "response_format" in extra and _is_response_format_validation_error(detail):
            # llama-cpp-python's server answers an unsupported response_format type with a 500 carrying its
            # request-validation error (0.3.x); retrying cannot fix it, the next format can.
            return _FormatRejected(self._clean(f"{status} {detail}"))
        if status == 429 and "quota" in detail.lower():  # billing, not load: waiting does not help
            return self._fatal(f"429 quota exceeded {where}: check the account's plan and billing ({detail})",
                               fix="add credit or raise the quota of the account the API key belongs to (its plan "
                                   "and billing), then run again")
        if status == 429:
            return self._transient(f"429 rate limited {where} (model '{model}'): {detail}",
                                   fix="run again later, or lower workers so that fewer calls run at once")
        if status >= 500 or status in (408, 409):
            return self._transient(f"{status} server error {where} (model '{model}'): {detail}",
                                   fix=f"check that the server at {self.endpoint} is reachable and healthy, then run "
                                       "again")
        return self._fatal(f"{status} {where} for model '{model}': {detail}")

    # ------------------------------------------------------------------ helpers

    def _messages(self, request: ChatRequest) -> list[dict[str, str]]:
        return [{"role": message.role, "content": message.content} for message in request.messages]

    def _clean(self, message: str) -> str:
        """Mask the API key (and any other secret ``skillopt_sleep.redaction.redact`` finds) in an error message."""
        if self._api_key and self._api_key != PLACEHOLDER_API_KEY:
            message = message.replace(self._api_key, "***")
        redact_text = _redactor()
        if redact_text is not None:
            try:
                redacted = redact_text(message)
            except Exception:  # redaction must never turn an error report into a crash
                return message
            message = redacted[0] if isinstance(redacted, tuple) else str(redacted)
        return message

    def _transient(self, message: str, *, fix: str | None = None) -> _Transient:
        return _Transient(self._clean(message), fix)

    def _fatal(self, message: str, *, fix: str | None = None) -> _Fatal:
        return _Fatal(self._clean(message), fix)

    def _failure(self, model: str, tally: _Tally, started: float, message: str, kind: str,
                 fix: str | None = None) -> ChatResult:
        return ChatResult(
            text="",
            usage=Usage(prompt_tokens=tally.prompt_tokens, completion_tokens=tally.completion_tokens),
            latency_s=time.monotonic() - started,
            model=model,
            error=self._clean(f"{message} (after {max(1, tally.attempts)} attempt(s))"),
            error_kind=kind,
            fix=fix,
            attempts=max(1, tally.attempts),
        )


# ---------------------------------------------------------------------- module helpers


def _int(value: Any) -> int:
    return value if isinstance(value, int) and value > 0 else 0


def _head(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _server_message(exc: openai.APIStatusError) -> str:
    """Return the server's own error message (``{"error": {"message": ...}}`` or the raw body), shortened."""
    body = exc.body
    message: Any = None
    if isinstance(body, dict):
        error = body.get("error", body)
        message = error.get("message") if isinstance(error, dict) else error
    if not message:
        message = exc.message
    return _head(" ".join(str(message).split()), _SERVER_MESSAGE_CHARS)


def _mentions_response_format(detail: str) -> bool:
    lowered = detail.lower()
    return any(word in lowered for word in ("response_format", "json_schema", "json_object", "response format",
                                            "structured output", "grammar"))


def _is_response_format_validation_error(detail: str) -> bool:
    lowered = detail.lower()
    return "validation error" in lowered and "response_format" in lowered


def _parse_json_reply(text: str) -> dict | list | None:
    """A reply in a JSON response format must be JSON as a whole (a fenced block is tolerated). Raw control
    characters (newlines, tabs) inside strings are accepted: llama.cpp's JSON grammar lets a model write them."""
    try:
        value = json.loads(text, strict=False)
    except ValueError:
        return extract_json(text) if text.lstrip().startswith("```") else None
    return value if isinstance(value, (dict, list)) else None


def _schema_name(schema: dict[str, Any]) -> str:
    title = str(schema.get("title") or "reply")
    name = "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in title)[:64]
    return name or "reply"


def _with_schema_instruction(messages: list[dict[str, str]], schema: dict[str, Any]) -> list[dict[str, str]]:
    """Append "reply with JSON only" and the schema to the last user message (or as a new user message)."""
    instruction = ("Reply with JSON only: one JSON value, no prose and no code fences, that satisfies this "
                   "JSON schema:\n" + json.dumps(schema, ensure_ascii=False))
    messages = [dict(message) for message in messages]
    if messages and messages[-1]["role"] == "user":
        messages[-1]["content"] = messages[-1]["content"].rstrip() + "\n\n" + instruction
    else:
        messages.append({"role": "user", "content": instruction})
    return messages
