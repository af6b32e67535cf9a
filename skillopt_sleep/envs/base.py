"""What an environment is to the trainer: the ``SkillEnv`` protocol, its ``RolloutResult``, and the client a
rollout talks through.

An environment owns its data (items per split), the skill document training starts from, and one episode:
``rollout_one(item=..., skill=..., target_client=...)`` runs the target model with the skill document on one item
(one chat call, or a multi-turn / tool-using conversation) and scores it. The trainer (``skillopt_sleep.trainer``)
does the rest with the engine's one step (``engine/step.run_step``).

Optional methods an environment may define (looked up with ``getattr``):

* ``task_for(item) -> TaskRecord``: how the item is shown to the optimizer when it reflects (request, user rules).
  Default: ``default_task_for``.
* ``fingerprint() -> str``: what identifies the environment's behaviour and data in the replay cache. Default:
  the class name plus a hash of the items of every split the trainer uses.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol, runtime_checkable

import orjson
from pydantic import BaseModel, ConfigDict, Field, field_validator

from skillopt_sleep.backends.base import Backend, ChatRequest, ChatResult
from skillopt_sleep.models import Role, TaskRecord, Usage


class RolloutResult(BaseModel):
    """One scored episode of an environment.

    hard: 0 or 1 (the item is solved); soft: float in [0, 1] (partial credit); fail_reason: why it is not solved
    (shown to the optimizer for train items; None when hard is 1); conversation: the messages of the episode, each
    ``{"role": "system" | "user" | "assistant" | "tool", "content": str, ...}``; response: the final answer (default:
    the content of the last assistant message); rationale: how the score was reached; tools_called: tools that
    really ran; llm_judged: an LLM judge's opinion is part of the soft score; error: set when the episode failed
    for a reason that is not the skill's (the target call failed): the result is then not a score.
    """

    model_config = ConfigDict(extra="forbid")

    hard: int = Field(ge=0, le=1)
    soft: float = Field(ge=0.0, le=1.0)
    fail_reason: str | None = None
    conversation: list[dict[str, Any]] = Field(default_factory=list)
    response: str = ""
    rationale: str = ""
    tools_called: list[str] = Field(default_factory=list)
    llm_judged: bool = False
    error: str | None = None

    @field_validator("hard", mode="before")
    @classmethod
    def _hard_is_binary(cls, value: Any) -> Any:
        if isinstance(value, bool):
            return int(value)
        if isinstance(value, float) and value in (0.0, 1.0):
            return int(value)
        if value not in (0, 1):
            raise ValueError(f"hard must be 0 or 1, got {value!r}")
        return value

    def final_response(self) -> str:
        """``response``, or the content of the last assistant message of ``conversation`` ("" when none)."""
        if self.response:
            return self.response
        for message in reversed(self.conversation):
            if message.get("role") == "assistant" and isinstance(message.get("content"), str):
                return message["content"]
        return ""


@runtime_checkable
class SkillEnv(Protocol):
    """An environment the trainer optimizes a skill document on.

    get_items(split) -> list of items (dicts with a unique string ``"id"``) for ``"train"``, the selection split
    (default ``"val"``) and the test split (default ``"test"``); an unknown split returns []. get_initial_skill()
    -> the skill document training starts from (Markdown; may be ""). rollout_one(item=, skill=, target_client=)
    -> ``RolloutResult``: run one episode with ``skill`` as the target's instructions, every model call going
    through ``target_client.chat(ChatRequest(role="target", ...))``. It is called from several threads at once
    (``workers``), so it must not keep per-episode state on the environment.
    """

    def get_items(self, split: str) -> list[dict[str, Any]]: ...

    def get_initial_skill(self) -> str: ...

    def rollout_one(self, *, item: dict[str, Any], skill: str, target_client: Backend) -> RolloutResult: ...


def default_task_for(item: dict[str, Any]) -> TaskRecord:
    """The TaskRecord the optimizer sees for an item: id ``item["id"]``; request: the item's ``question``,
    ``request``, ``prompt`` or ``input`` (else its JSON); rules: ``item["rules"]`` when it is a list of strings.

    ``source`` is ``"claude"`` only because TaskRecord requires a transcript source; nothing reads it here.
    Raises ValueError for an item without an ``id``.
    """
    if "id" not in item:
        raise ValueError(f"an environment item needs an 'id': {str(item)[:120]}")
    request = next((item[key] for key in ("question", "request", "prompt", "input")
                    if isinstance(item.get(key), str) and item[key].strip()), None)
    if request is None:
        request = orjson.dumps(item, option=orjson.OPT_SORT_KEYS).decode()
    rules = item.get("rules")
    rules = [rule for rule in rules if isinstance(rule, str)] if isinstance(rules, list) else []
    # the environment's author is the "user" of a training run: its items are the provenance of the run's edits
    return TaskRecord(id=str(item["id"]), source="claude", request=request, rules=rules, authored=[request, *rules])


class RolloutClient:
    """The ``target_client`` an environment's ``rollout_one`` receives from the trainer: a ``Backend`` whose calls
    go through the run's ``CallMeter`` (recorded, budgeted; a fatal error raises ``BackendError``).

    For role ``"target"`` requests it applies the rollout's sampling settings: ``temperature`` and ``seed`` (seed
    + sample index) unless the environment set them explicitly on the request. A failed call is returned as a
    ``ChatResult`` with ``error`` set (never raised, unless fatal), so the environment can report it in
    ``RolloutResult.error``. ``usage``: tokens of the calls made through this client. Thread-safe.
    """

    def __init__(self, meter: Any, *, temperature: float = 0.0, seed: int | None = None):
        self.meter = meter
        self.temperature = temperature
        self.seed = seed
        self.usage = Usage()
        self._lock = threading.Lock()

    @property
    def backend(self) -> Backend:
        """The backend behind the meter (``engine.replay.replay_one`` reads its ``runs_tools``)."""
        return self.meter.backend

    @property
    def name(self) -> str:
        return self.meter.backend.name

    @property
    def runs_tools(self) -> bool:
        backend = self.meter.backend
        return bool(getattr(backend, "runs_tools", False))

    def model_for(self, role: Role) -> str:
        return self.meter.backend.model_for(role)

    def chat(self, request: ChatRequest, *, fail_on_error: bool = False) -> ChatResult:
        """Make one call through the meter (see the class docstring); fail_on_error as in ``CallMeter.chat``."""
        if request.role == "target":
            update: dict[str, Any] = {}
            if "temperature" not in request.model_fields_set:
                update["temperature"] = self.temperature
            if "seed" not in request.model_fields_set and self.seed is not None:
                update["seed"] = self.seed
            if update:
                request = request.model_copy(update=update)
        result = self.meter.chat(request, fail_on_error=fail_on_error)
        with self._lock:
            self.usage = Usage(prompt_tokens=self.usage.prompt_tokens + result.usage.prompt_tokens,
                               completion_tokens=self.usage.completion_tokens + result.usage.completion_tokens)
        return result
