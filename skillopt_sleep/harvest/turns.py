"""Turn assembly: the draft turn a harvester fills while it reads one session's records, and the redacted,
size-bounded ``Turn`` it becomes (``finish_turns``, ``harvested_turns``: the session's requests, counted).

Every text a turn stores is redacted (``redact``) and cut to its bound: about 6 KB per turn (request, answer head,
at most ``TOOLS_KEPT`` tool uses). Also the value helpers the harvesters share to build turns: timestamps
(``parse_timestamp``), the text of content blocks, and the compact form of a tool input (``compact_json``, which
never raises).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Iterator

import orjson

from skillopt_sleep.harvest.read_plan import HarvestContext
from skillopt_sleep.models import HarvestStats, ToolUse, Turn
from skillopt_sleep.redaction.redact import REDACTED_PREFIX, redact_many

REQUEST_MAX_CHARS = 20_000
ANSWER_MAX_CHARS = 2_000
TOOL_INPUT_MAX_CHARS = 200
TOOL_ERROR_MAX_CHARS = 300
FEEDBACK_MAX_CHARS = 2_000
QUEUED_MAX_CHARS = 2_000
QUEUED_MAX_COUNT = 20
TOOLS_KEPT = 20
"""Bounds on what one turn keeps (characters; queued messages and tool uses per turn)."""
TOOLS_MAX_COUNT = 300
"""Tool calls of one turn followed while its span is read (the ``TOOLS_KEPT`` kept are chosen among them)."""
_REDACT_MARGIN = 512
"""Extra characters redacted beyond a bound before cutting, so a secret that starts inside the bound is seen whole
(token-shaped secrets are far shorter; a PEM block cut before its END line is still recognized)."""


# --------------------------------------------------------------------------- values


def parse_timestamp(value: object) -> datetime | None:
    """Parse an ISO-8601 string (``...Z`` or with offset) or epoch seconds/milliseconds into an aware UTC datetime.

    Returns None for anything else (missing, ``"[trimmed]"``, bad values). A naive time is taken as UTC.
    """
    if isinstance(value, str):
        if not value or not value[0].isdigit():
            return None
        text = value[:-1] + "+00:00" if value.endswith(("Z", "z")) else value
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            return None
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = value / 1000.0 if value > 1e11 else float(value)
        try:
            parsed = datetime.fromtimestamp(seconds, tz=timezone.utc)
        except (OverflowError, OSError, ValueError):
            return None
    else:
        return None
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=timezone.utc)
    return parsed.astimezone(timezone.utc)


def bounded_redact(text: str, limit: int) -> tuple[str, int]:
    """Redact ``text`` and cut it to ``limit`` characters (a cut text ends with ``…``). Returns (text, secrets)."""
    return bounded_redact_many([(text, limit)])[0]


def bounded_redact_many(pieces: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """``bounded_redact`` of each ``(text, limit)``, with one redaction pre-filter pass over all of them."""
    windows = [text[: limit + _REDACT_MARGIN] for text, limit in pieces]
    results = []
    for (text, limit), window, (cleaned, count) in zip(pieces, windows, redact_many(windows)):
        if len(cleaned) > limit or len(text) > len(window):
            cleaned = cleaned[: max(0, limit - 1)] + "…"
            if count:
                count = min(count, cleaned.count(REDACTED_PREFIX))  # count only the secrets that were in what is kept
        results.append((cleaned, count))
    return results


def text_of_blocks(content: object, block_types: tuple[str, ...] = ("text",)) -> str:
    """Join the ``text`` of the blocks of ``content`` (a string, or a list of ``{type, text}`` blocks)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = []
    for block in content:
        if isinstance(block, dict) and block.get("type") in block_types:
            value = block.get("text")
            if isinstance(value, str):
                parts.append(value)
        elif isinstance(block, str):
            parts.append(block)
    return "\n".join(parts)


JSON_DEPTH_KEPT = 32
"""Nesting levels ``compact_json`` writes out when a value is too deep or odd for ``orjson.dumps``; a container
below them is written as ``TRUNCATED``."""
TRUNCATED = "…"


def compact_json(value: object, limit: int = TOOL_INPUT_MAX_CHARS + _REDACT_MARGIN) -> str:
    """A short text form of a tool input: strings as they are, other values as compact JSON, cut to ``limit``
    characters. Never raises: a value ``orjson`` cannot write (nested deeper than its 254 levels, an integer beyond
    64 bits, a key that is not a string, a lone surrogate) is written from a copy cut to ``JSON_DEPTH_KEPT`` levels
    and about ``limit`` values, with ``TRUNCATED`` in place of what was cut."""
    if isinstance(value, str):
        return value[:limit]
    try:
        return orjson.dumps(value).decode("utf-8", "replace")[:limit]
    except TypeError:  # orjson.JSONEncodeError
        return orjson.dumps(_pruned(value, JSON_DEPTH_KEPT, [limit], limit)).decode("utf-8", "replace")[:limit]


def _pruned(value: object, depth: int, budget: list[int], limit: int) -> object:
    """A copy of ``value`` that ``orjson.dumps`` can write: at most ``depth`` levels, about ``budget[0]`` values
    (a shared countdown), strings cut to ``limit``; anything else becomes ``TRUNCATED`` or its type's name."""
    budget[0] -= 1
    if value is None or isinstance(value, (bool, float)):
        return value
    if isinstance(value, int):
        return value if -(1 << 63) <= value < (1 << 64) else TRUNCATED
    if isinstance(value, str):
        return value[:limit].encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, (dict, list, tuple)):
        if depth <= 0 or budget[0] < 0:
            return TRUNCATED
        if isinstance(value, dict):
            copy: dict[str, object] = {}
            for key, item in value.items():
                if budget[0] < 0:
                    break
                copy[_pruned(key, 0, budget, limit) if isinstance(key, str) else type(key).__name__] = _pruned(
                    item, depth - 1, budget, limit)
            return copy
        items: list[object] = []
        for item in value:
            if budget[0] < 0:
                break
            items.append(_pruned(item, depth - 1, budget, limit))
        return items
    return type(value).__name__


# --------------------------------------------------------------------------- turns


@dataclass
class DraftTool:
    name: str
    input_text: str = ""
    error_text: str | None = None
    """The error text, stripped, cut one character beyond what is redacted (so a cut still shows)."""

    def set_error(self, text: str) -> None:
        """Record the tool's error text (a tool output can be hundreds of KB: only its head is kept)."""
        self.error_text = (text.strip() or "error")[: TOOL_ERROR_MAX_CHARS + _REDACT_MARGIN + 1]


@dataclass
class DraftTurn:
    """A turn while its span is being read; ``finish`` makes the stored, redacted, bounded ``Turn``."""

    request: str
    kind: str = "prompt"
    timestamp: datetime | None = None
    cwd: str | None = None
    answer_parts: list[str] = field(default_factory=list)
    answer_id: object = None
    tools: list[DraftTool] = field(default_factory=list)
    tools_by_id: dict[str, DraftTool] = field(default_factory=dict)
    interrupted: bool = False
    rejected_tool: bool = False
    aborted: bool = False
    rejection_feedback: str | None = None
    queued: list[str] = field(default_factory=list)
    command_body: str | None = None
    tool_calls: int = 0
    origin: str = ""
    """Where the request came from (Codex: ``event`` or ``response``), for de-duplication."""

    def set_answer(self, text: str, message_id: object = None) -> None:
        """Record assistant text: parts of the same message (``message_id``) are joined; a new message replaces."""
        if not text or not text.strip():
            return
        if message_id is not None and message_id == self.answer_id and self.answer_parts:
            if sum(map(len, self.answer_parts)) < ANSWER_MAX_CHARS + _REDACT_MARGIN:
                self.answer_parts.append(text)
            return
        self.answer_id = message_id
        self.answer_parts = [text[: ANSWER_MAX_CHARS + _REDACT_MARGIN]]

    def add_tool(self, name: str, input_text: str, call_id: str | None) -> DraftTool | None:
        if call_id and call_id in self.tools_by_id:
            return self.tools_by_id[call_id]
        self.tool_calls += 1
        if len(self.tools) >= TOOLS_MAX_COUNT:
            return None
        tool = DraftTool(name=sys.intern(name or "unknown"), input_text=input_text)  # one "Read" for all calls
        self.tools.append(tool)
        if call_id:
            self.tools_by_id[call_id] = tool
        return tool

    def add_queued(self, text: str) -> None:
        if text and text.strip() and len(self.queued) < QUEUED_MAX_COUNT:
            self.queued.append(text[: QUEUED_MAX_CHARS + _REDACT_MARGIN])

    @property
    def has_activity(self) -> bool:
        return bool(self.answer_parts or self.tools)

    def texts(self) -> list[tuple[str, int]]:
        """``(text, limit)`` of every text the finished turn stores, in the order ``finish`` takes them back."""
        texts = [(self.request.strip(), REQUEST_MAX_CHARS),
                 ("\n".join(self.answer_parts).strip(), ANSWER_MAX_CHARS)]
        for tool in kept_tools(self.tools):
            texts.append((tool.input_text, TOOL_INPUT_MAX_CHARS))
            if tool.error_text is not None:
                texts.append((tool.error_text, TOOL_ERROR_MAX_CHARS))
        if self.rejection_feedback:
            texts.append((self.rejection_feedback.strip(), FEEDBACK_MAX_CHARS))
        texts.extend((text.strip(), QUEUED_MAX_CHARS) for text in self.queued)
        if self.command_body:
            texts.append((self.command_body.strip(), REQUEST_MAX_CHARS))
        return texts

    def finish(self, index: int, cleaned: Iterator[tuple[str, int]]) -> tuple[Turn, int]:
        """Return ``(Turn, secrets redacted)``; ``cleaned`` yields ``bounded_redact`` of each of ``texts()``."""
        taken: list[int] = []

        def take() -> str:
            text, count = next(cleaned)
            taken.append(count)
            return text

        request, answer = take(), take()
        tools = []
        for draft in kept_tools(self.tools):
            input_head = take()
            error = take() if draft.error_text is not None else None
            tools.append(ToolUse(name=draft.name, input_head=input_head, error=error))
        feedback = take() if self.rejection_feedback else None
        queued = [take() for _ in self.queued]
        body = take() if self.command_body else None
        turn = Turn(index=index, request=request, timestamp=self.timestamp, cwd=self.cwd, kind=self.kind,
                    final_answer=answer, tools=tools, interrupted=self.interrupted, rejected_tool=self.rejected_tool,
                    aborted=self.aborted, rejection_feedback=feedback, queued_messages=queued, command_body=body,
                    tool_calls=self.tool_calls)
        return turn, sum(taken)


def kept_tools(tools: list[DraftTool]) -> list[DraftTool]:
    """At most ``TOOLS_KEPT`` of ``tools``, in call order: the failed calls first, then the first call of each tool
    name, then the earliest calls (what a task's evidence uses: the tools called and their errors)."""
    if len(tools) <= TOOLS_KEPT:
        return tools
    chosen: set[int] = set()
    names: set[str] = set()
    first_of_name = []
    for index, tool in enumerate(tools):
        if tool.name not in names:
            names.add(tool.name)
            first_of_name.append(index)
    failed = [index for index, tool in enumerate(tools) if tool.error_text is not None]
    for index in failed + first_of_name + list(range(len(tools))):
        if len(chosen) == TOOLS_KEPT:
            break
        chosen.add(index)
    return [tool for index, tool in enumerate(tools) if index in chosen]


def keep_turn(draft: DraftTurn, context: HarvestContext, fallback_time: datetime) -> bool:
    """First night: keep a turn only when it is not older than the lookback cutoff (its timestamp, or the file's
    modification time when the record had none)."""
    if context.cutoff is None:
        return True
    moment = draft.timestamp or fallback_time
    return moment >= context.cutoff


def finish_turns(drafts: list[DraftTurn], context: HarvestContext, fallback_time: datetime,
                 stats: HarvestStats) -> tuple[list[Turn], bool]:
    """Filter drafts by the lookback and finish them (the texts of all of them redacted together). Returns
    ``(turns, some were dropped as too old)``."""
    kept: list[DraftTurn] = []
    dropped = False
    for draft in drafts:
        if not draft.request.strip():
            continue
        if not keep_turn(draft, context, fallback_time):
            dropped = True
            continue
        kept.append(draft)
    cleaned = iter(bounded_redact_many([piece for draft in kept for piece in draft.texts()]))
    turns: list[Turn] = []
    for draft in kept:
        turn, secrets = draft.finish(len(turns), cleaned)
        stats.secrets_redacted += secrets
        turns.append(turn)
    return turns, dropped


def harvested_turns(drafts: list[DraftTurn], context: HarvestContext, fallback_time: datetime,
                    stats: HarvestStats) -> list[Turn] | None:
    """``finish_turns``, counted: the finished turns of one session, added to ``stats`` (a session harvested, its
    requests), or None when none is left (the session counted as skipped: ``too_old`` or ``no_requests``)."""
    turns, dropped = finish_turns(drafts, context, fallback_time, stats)
    if not turns:
        stats.skip("too_old" if dropped else "no_requests")
        return None
    stats.sessions_harvested += 1
    stats.requests += len(turns)
    return turns
