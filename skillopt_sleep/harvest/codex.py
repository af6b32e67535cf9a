"""Codex CLI harvester: the user's own prompts, and what followed each, from Codex rollout files.

Format: JSON Lines under ``$CODEX_HOME`` (or ``~/.codex``): ``sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl``,
the same compressed as ``.jsonl.zst`` (read as a zstd stream; when both exist the plain file wins), and
``archived_sessions/``. Handled versions (see ``shared/FORMATS.md`` §2):

* the ``RolloutLine`` envelope ``{timestamp, type, payload}`` from Codex 0.58 to 0.14x: ``session_meta``,
  ``response_item``, ``event_msg``, ``turn_context``, ``compacted`` and newer types (``world_state``,
  ``inter_agent_communication*``; unknown types are counted and ignored);
* the legacy pre-envelope format (CLI up to ~0.3x): a bare ``{id, timestamp, instructions}`` first line,
  ``{"record_type": "state"}`` markers and bare response items.

A prompt is counted once: ``event_msg/user_message`` is the source; the ``response_item`` user message that repeats
it is merged into the same turn, and response items are used alone only in files without events (legacy). Injected
text is not a request (``<environment_context>``, ``# AGENTS.md instructions``, ``<user_instructions>``,
``<turn_aborted>``, ...), developer-role messages never are, and the IDE wrapper is cut to the text after
``## My request for Codex:``. Sub-agent, review and compaction threads (``session_meta.source`` ``subagent``/
``review``, ``parent_thread_id``) are skipped (``subagent``); headless runs (``source`` ``exec``/``mcp``) are
skipped (``headless``) unless ``include_sdk_sessions``. ``turn_aborted`` sets ``Turn.aborted``; tool errors come from
non-zero exit codes (``metadata.exit_code``, ``Exit code: N``, ``exec_command_end``) and failed patches. A prompt that
is the expansion of a custom prompt of the Codex home (``prompts/<name>.md``; some versions record the expansion as
the user's message) is a command turn, ``/prompts:<name> <arguments>``, with the expansion as its ``command_body``:
the prompt file's text is replayed, never read as the user's words.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

import orjson
import zstandard

from skillopt_sleep.errors import HarvestError
from skillopt_sleep.harvest.read_plan import HarvestContext, lists_sessions, plan_read
from skillopt_sleep.harvest.reader import SKIP, TranscriptParser, read_planned_file
from skillopt_sleep.harvest.turns import DraftTurn, compact_json, parse_timestamp, text_of_blocks
from skillopt_sleep.harvest.workers import read_files
from skillopt_sleep.models import HarvestStats, Session
from skillopt_sleep.paths import codex_home

SOURCE = "codex"

INJECTED_PREFIXES = (
    "<environment_context>", "<user_instructions>", "# AGENTS.md instructions for", "<INSTRUCTIONS>",
    "<permissions instructions>", "<turn_aborted>", "<user_shell_command>", "<skill>", "<subagent_notification>",
    "<collaboration_mode>", "<personality>", "<model_switch>", "<developer_instructions>",
)
"""Text Codex puts into user-role messages that the user did not type."""
IDE_REQUEST_MARKER = "## My request for Codex:"

ENVELOPE_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted", "world_state",
                            "inter_agent_communication", "inter_agent_communication_metadata"})
RESPONSE_ITEM_TYPES = frozenset({
    "message", "reasoning", "function_call", "function_call_output", "custom_tool_call", "custom_tool_call_output",
    "local_shell_call", "web_search_call", "ghost_snapshot", "compaction", "compaction_summary", "tool_search_call",
    "tool_search_output", "image_generation_call", "agent_message", "other",
})
TOOL_CALL_TYPES = frozenset({"function_call", "custom_tool_call", "local_shell_call", "web_search_call",
                             "tool_search_call", "image_generation_call"})
TOOL_OUTPUT_TYPES = frozenset({"function_call_output", "custom_tool_call_output", "tool_search_output"})
SUBAGENT_SOURCES = frozenset({"subagent", "review", "compact"})
HEADLESS_SOURCES = frozenset({"exec", "mcp"})

_SKIPPED_LINE = re.compile(
    rb'\{"timestamp":"[^"]{0,40}","type":"(?:turn_context"|compacted"|world_state"'
    rb'|response_item","payload":\{"type":"(?:reasoning"|ghost_snapshot"|compaction"|compaction_summary")'
    rb'|event_msg","payload":\{"type":"(?:token_count"|agent_reasoning"|agent_reasoning_raw_content"))')
"""The first bytes of the envelope lines that never matter."""


def skip_line(head: bytes) -> bool:
    """True for envelope lines that never matter (turn context, compaction, reasoning, token counts), judged from
    their first bytes: serde writes ``{"timestamp":...,"type":...,"payload":{"type":...`` in that order."""
    return _skipped(head, 0, len(head))


def _skipped(data: bytes | bytearray, start: int, end: int) -> bool:
    return _SKIPPED_LINE.match(data, start, end) is not None


PLAIN_OUTPUT_MIN_BYTES = 2 << 10
"""Lines at least this long are checked for the plain-tool-output shape before being parsed."""


def peek_line(buffer: bytearray, start: int, end: int) -> object:
    """The ``LinePeek`` of Codex rollouts: skips the lines ``skip_line`` names, reads large tool outputs that
    report no failure without parsing them (see ``plain_tool_output``), lets everything else be parsed."""
    if _SKIPPED_LINE.match(buffer, start, end) is not None:
        return SKIP
    if end - start >= PLAIN_OUTPUT_MIN_BYTES:
        return plain_tool_output(buffer, start, end)
    return None


_OUTPUT_HEADER = re.compile(rb'\{"timestamp":"([^"\\]*)","type":"response_item","payload":\{"type":"'
                            rb'(function_call_output|custom_tool_call_output)","call_id":"[^"\\]*","output":"')
_EXIT_CODE_KEY = b'\\"exit_code\\":'
_FAILURE_MARKERS = (b"Exit code: ", b"Process exited with code ")
_HEAD_CHARS = 400
"""How far into a plain-text output ``output_error`` looks for an exit-code line (characters)."""


def plain_tool_output(data: bytes | bytearray, start: int, end: int) -> dict | None:
    """Read the line ``data[start:end]`` without parsing it when it is a tool output (often tens of KB) that
    ``output_error`` would find no failure in: such a record matters only for its time.

    Returns ``{timestamp, type, payload: {type, output: ""}}``, or None when the line does not provably have that
    shape (it is then parsed in full). The shape, as Codex writes it: ``{"timestamp":"…","type":"response_item",
    "payload":{"type":"function_call_output","call_id":"…","output":"<text>"}}`` where ``<text>`` escapes no
    ASCII character as ``\\u00XX``, starts with a printable ASCII character other than a space or a backslash,
    and either is JSON (starts with ``{``) whose last ``"exit_code":`` is 0 (or absent), or names no exit code in
    its first ``_HEAD_CHARS`` characters (six bytes per character at most in JSON).
    """
    header = _OUTPUT_HEADER.match(data, start, end)
    if header is None or not data.startswith(b'"}}', end - 3, end):
        return None
    body, body_end = header.end(), end - 3
    if body >= body_end or not 0x21 <= data[body] <= 0x7E or data[body] == 0x5C:
        return None
    if _has_ascii_escape(data, body, body_end):
        return None  # a \\u00XX escape could spell a quote or a marker
    if data[body] == 0x7B:  # "{": JSON output, failed when its last exit_code is not 0
        key = data.rfind(_EXIT_CODE_KEY, body, body_end)
        if key != -1:
            after = bytes(data[key + len(_EXIT_CODE_KEY):key + len(_EXIT_CODE_KEY) + 12])
            lead = after.lstrip(b" ")[:1]
            if lead == b"\\" or lead >= b"\x80" or _leading_int(after.decode("ascii", "replace")):
                return None  # failed, or an escaped or non-ASCII space before the code makes it unsure
    else:
        head = data[body:min(body_end, body + 6 * _HEAD_CHARS)]
        if any(marker in head for marker in _FAILURE_MARKERS):
            return None
    return {"timestamp": header.group(1).decode("utf-8", "replace"), "type": "response_item",
            "payload": {"type": header.group(2).decode("ascii"), "output": ""}}


def _has_ascii_escape(data: bytes | bytearray, start: int, end: int) -> bool:
    """True when the JSON string body ``data[start:end]`` escapes an ASCII character as ``\\u00XX`` (a ``\\u00``
    after an even run of backslashes; ``\\\\u00`` is an escaped backslash followed by the letter u)."""
    position = data.find(b"\\u00", start, end)
    while position != -1:
        run = 1
        while position - run >= start and data[position - run] == 0x5C:
            run += 1
        if run % 2:
            return True
        position = data.find(b"\\u00", position + 4, end)
    return False


def _plain_name(name: str) -> str:
    return name[:-4] if name.endswith(".zst") else name


def list_files(root: Path) -> list[Path]:
    """Return the rollout files under ``root/sessions`` and ``root/archived_sessions`` (``.jsonl`` and
    ``.jsonl.zst``; a ``.zst`` whose plain twin exists is left out), sorted. Raises HarvestError when a
    directory exists but cannot be listed."""
    found: list[Path] = []
    for folder in ("sessions", "archived_sessions"):
        base = root / folder
        if not base.exists():
            continue
        if not os.access(base, os.R_OK | os.X_OK):
            raise HarvestError(f"cannot list Codex rollouts in {base}: permission denied; "
                               "fix the permissions or point --codex-home elsewhere")
        for directory, _subdirs, names in os.walk(base):
            present = set(names)
            for name in names:
                if not name.startswith("rollout-"):
                    continue
                if name.endswith(".jsonl") or (name.endswith(".jsonl.zst") and _plain_name(name) not in present):
                    found.append(Path(directory) / name)
    return sorted(found)


def default_root() -> Path:
    """Codex CLI's root: ``$CODEX_HOME``, else ``~/.codex`` (``paths.codex_home``)."""
    return codex_home()


def has_sessions(root: Path) -> bool:
    """True when ``root`` holds at least one Codex rollout."""
    return lists_sessions(lambda: list_files(root))


def strip_injected(text: str) -> str:
    """The user's own words in a user-role message: '' for injected context; the IDE wrapper cut away."""
    stripped = text.strip()
    if not stripped or stripped.startswith(INJECTED_PREFIXES):
        return ""
    marker = stripped.find(IDE_REQUEST_MARKER)
    if marker != -1:
        return stripped[marker + len(IDE_REQUEST_MARKER):].strip()
    return stripped


def output_error(output: object) -> str | None:
    """The error text of a tool output when it reports a failure (non-zero exit code), else None."""
    if isinstance(output, list):
        output = text_of_blocks(output, ("input_text", "output_text", "text"))
    elif isinstance(output, dict):
        if output.get("success") is False:
            return compact_json(output)
        output = output.get("content") if isinstance(output.get("content"), str) else ""
    if not isinstance(output, str) or not output:
        return None
    text = output.lstrip()
    if text.startswith("{"):
        position = text.rfind('"exit_code":')
        if position == -1:
            return None
        code = _leading_int(text[position + 12:position + 24])
        if not code:
            return None
        try:
            data = orjson.loads(text)
        except orjson.JSONDecodeError:
            return text
        inner = data.get("output") if isinstance(data, dict) else None
        return inner if isinstance(inner, str) and inner.strip() else f"exit code {code}"
    head = text[:400]
    for marker in ("Exit code: ", "Process exited with code "):
        position = head.find(marker)
        if position != -1:
            code = _leading_int(head[position + len(marker):position + len(marker) + 12])
            if code:
                after = text.find("Output:")
                return text[after + 7:].strip() or f"exit code {code}" if after != -1 else text
            return None
    return None


def _leading_int(text: str) -> int:
    text = text.strip()
    end = 1 if text[:1] == "-" else 0
    while end < len(text) and text[end].isdigit():
        end += 1
    try:
        return int(text[:end])
    except ValueError:
        return 0


_PLACEHOLDER = re.compile(r"\$(ARGUMENTS|[1-9]|[A-Z][A-Z0-9_]*)")
_FRONTMATTER = re.compile(r"\A---\n.*?\n---\n", re.DOTALL)
#: Largest custom prompt file read (a bigger one is not a prompt anyone types).
MAX_PROMPT_BYTES = 256 * 1024


def custom_prompts(root: Path) -> tuple[tuple[str, str], ...]:
    """Codex's custom prompts (``$CODEX_HOME/prompts/<name>.md``, run as ``/prompts:<name> args``) as ``(name,
    pattern)``: the file's text without its frontmatter, its ``$ARGUMENTS`` / ``$1``..``$9`` / ``$NAME`` placeholders
    as groups. Some Codex versions record the expansion, not what was typed, as the user's message: it is matched
    against these to tell the prompt file's text from the user's arguments. () when there is none."""
    found = []
    try:
        paths = sorted((root / "prompts").glob("*.md"))
    except OSError:
        return ()
    for path in paths:
        try:
            if path.stat().st_size > MAX_PROMPT_BYTES:
                continue
            text = _FRONTMATTER.sub("", path.read_text(encoding="utf-8", errors="replace")).strip()
        except OSError:
            continue
        if not text:
            continue
        pattern, seen, last = [], set(), 0
        for match in _PLACEHOLDER.finditer(text):
            pattern.append(re.escape(text[last:match.start()]))
            group = f"p_{match.group(1)}"
            pattern.append(f"(?P={group})" if group in seen else f"(?P<{group}>.*?)")
            seen.add(group)
            last = match.end()
        pattern.append(re.escape(text[last:]))
        found.append((path.stem, r"\A\s*" + "".join(pattern) + r"\s*\Z"))
    return tuple(found)


@functools.lru_cache(maxsize=64)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.DOTALL)


def prompt_expansion(text: str, prompts: tuple[tuple[str, str], ...]) -> tuple[str, str] | None:
    """``(name, arguments)`` when ``text`` is the expansion of one of ``prompts`` (``custom_prompts``), else None."""
    for name, pattern in prompts:
        match = _compiled(pattern).match(text)
        if match is not None:
            arguments = " ".join(value.strip() for value in dict.fromkeys(match.groups()) if value and value.strip())
            return name, arguments
    return None


class CodexRollout(TranscriptParser):
    """Reads the records of one Codex rollout into draft turns. prompts: ``custom_prompts`` of the Codex home."""

    def __init__(self, stats: HarvestStats, prompts: tuple[tuple[str, str], ...] = ()):
        super().__init__(stats)
        self.prompts = prompts
        self.meta_seen = False
        self.cwd: str | None = None
        self.version: str | None = None
        self.entrypoint: str | None = None
        self.started: str | None = None
        self.first_time: str | None = None
        self.last_time: str | None = None
        self.saw_event_prompt = False

    def head_complete(self) -> bool:
        """The head settles the rollout once its session_meta and first prompt are read."""
        return self.meta_seen and self.saw_request

    def feed(self, record: dict) -> None:
        kind = record.get("type")
        payload = record.get("payload")
        stamp = record.get("timestamp")
        if isinstance(stamp, str) and stamp[:1].isdigit():
            if self.first_time is None:
                self.first_time = stamp
            self.last_time = stamp
        if isinstance(payload, dict) and kind in ENVELOPE_TYPES:
            if kind == "response_item":
                self._response_item(payload, stamp)
            elif kind == "event_msg":
                self._event(payload, stamp)
            elif kind == "session_meta":
                self._meta(payload)
            elif kind == "turn_context" and self.cwd is None and isinstance(payload.get("cwd"), str):
                self.cwd = payload["cwd"]
        elif "record_type" in record:
            return  # legacy state marker
        elif kind in RESPONSE_ITEM_TYPES:
            self._response_item(record, stamp)  # legacy bare response item
        elif kind is None and not self.meta_seen and "id" in record:
            self._meta(record)  # legacy first line {id, timestamp, instructions}
        else:
            self.stats.records_unknown += 1

    # ------------------------------------------------------------------ record kinds

    def _meta(self, payload: dict) -> None:
        if self.meta_seen:
            return  # later session_meta lines (forks, copies) do not redefine the session
        self.meta_seen = True
        for name in ("id", "session_id"):
            value = payload.get(name)
            if isinstance(value, str) and value:
                self.session_id = value
                break
        cwd = payload.get("cwd")
        if isinstance(cwd, str) and cwd:
            self.cwd = cwd
        version = payload.get("cli_version")
        if isinstance(version, str):
            self.version = version
        stamp = payload.get("timestamp")
        if isinstance(stamp, str):
            self.started = stamp
        source = payload.get("source")
        originator = payload.get("originator")
        if isinstance(source, dict):
            if any(key in source for key in SUBAGENT_SOURCES):
                self.subagent = True
        elif isinstance(source, str):
            if source in SUBAGENT_SOURCES:
                self.subagent = True
            if source in HEADLESS_SOURCES:
                self.headless = True
        if payload.get("parent_thread_id") or payload.get("thread_source") in SUBAGENT_SOURCES:
            self.subagent = True
        if originator == "codex_exec":
            self.headless = True
        if isinstance(originator, str):
            self.entrypoint = originator
        elif isinstance(source, str):
            self.entrypoint = source

    def _event(self, payload: dict, stamp: object) -> None:
        kind = payload.get("type")
        if kind == "user_message":
            message = payload.get("message")
            if isinstance(message, str):
                self._prompt(message, stamp, "event")
            return
        current = self.current
        if current is None or self.head_mode:
            return
        if kind == "agent_message":
            message = payload.get("message")
            if isinstance(message, str):
                current.set_answer(message)
        elif kind == "task_complete":
            message = payload.get("last_agent_message")
            if isinstance(message, str):
                current.set_answer(message)
        elif kind == "turn_aborted":
            current.aborted = True
        elif kind == "exec_command_end":
            code = payload.get("exit_code")
            if isinstance(code, int) and code != 0:
                self._tool_error(payload.get("call_id"), payload.get("aggregated_output") or payload.get("stderr")
                                 or f"exit code {code}")
        elif kind == "patch_apply_end":
            if payload.get("success") is False:
                self._tool_error(payload.get("call_id"), payload.get("stderr") or "patch failed")

    def _response_item(self, payload: dict, stamp: object) -> None:
        kind = payload.get("type")
        if kind == "message":
            role = payload.get("role")
            content = payload.get("content")
            if role == "user":
                self._user_message(content, stamp)
            elif role == "assistant" and self.current is not None and not self.head_mode:
                self.current.set_answer(text_of_blocks(content, ("output_text", "text")))
            return  # developer/system messages are never requests
        if self.current is None or self.head_mode:
            return
        if kind in TOOL_CALL_TYPES:
            name = payload.get("name")
            if not isinstance(name, str) or not name:
                name = kind[:-5]
            value = payload.get("arguments")
            if value is None:
                value = payload.get("input")
            if value is None:
                value = payload.get("action")
            call_id = payload.get("call_id") or payload.get("id")
            self.current.add_tool(name, compact_json(value), call_id if isinstance(call_id, str) else None)
        elif kind in TOOL_OUTPUT_TYPES:
            error = output_error(payload.get("output"))
            if error is not None:
                self._tool_error(payload.get("call_id"), error)
        elif kind not in RESPONSE_ITEM_TYPES:
            self.stats.records_unknown += 1

    def _user_message(self, content: object, stamp: object) -> None:
        if isinstance(content, str):
            blocks = [content]
        elif isinstance(content, list):
            blocks = [block.get("text") for block in content
                      if isinstance(block, dict) and block.get("type") in ("input_text", "text")]
        else:
            return
        kept = []
        for block in blocks:
            if not isinstance(block, str):
                continue
            if self.cwd is None and "<cwd>" in block:
                start = block.find("<cwd>") + 5
                end = block.find("</cwd>", start)
                if end != -1:
                    self.cwd = block[start:end].strip() or None
            cleaned = strip_injected(block)
            if cleaned:
                kept.append(cleaned)
        if kept:
            self._prompt("\n".join(kept), stamp, "response", already_clean=True)

    def _prompt(self, text: str, stamp: object, origin: str, *, already_clean: bool = False) -> None:
        request = text.strip() if already_clean else strip_injected(text)
        if not request:
            return
        if not self.note_request(text):
            return
        current = self.current
        if origin == "event":
            self.saw_event_prompt = True
            if current is not None and current.origin == "response" and not current.has_activity:
                if current.kind != "command":  # a custom prompt's expansion keeps the command it was read as
                    current.request = request  # the same prompt, stored twice: the event text is canonical
                current.origin = "event"
                return
        elif self.saw_event_prompt:
            return  # this file records prompts as events; the response item repeats one of them
        expansion = prompt_expansion(request, self.prompts) if self.prompts else None
        if expansion is not None:  # a custom prompt's file text with the user's arguments: a command, as Claude's
            name, arguments = expansion
            draft = DraftTurn(request=f"/prompts:{name} {arguments}".strip(), kind="command", command_body=request,
                              timestamp=parse_timestamp(stamp), cwd=self.cwd, origin=origin)
        else:
            draft = DraftTurn(request=request, timestamp=parse_timestamp(stamp), cwd=self.cwd, origin=origin)
        self.turns.append(draft)
        self.current = draft

    def _tool_error(self, call_id: object, text: object) -> None:
        if self.current is None or not isinstance(call_id, str):
            return
        tool = self.current.tools_by_id.get(call_id)
        if tool is not None:
            tool.set_error(text if isinstance(text, str) else compact_json(text))


def _session_id_from_name(path: Path) -> str:
    stem = _plain_name(path.name)[: -len(".jsonl")] if path.name.endswith((".jsonl", ".jsonl.zst")) else path.stem
    return stem[-36:] if len(stem) > 36 else stem


def harvest_codex(root: Path, context: HarvestContext, stats: HarvestStats) -> list[Session]:
    """Harvest the Codex rollouts under ``root``; updates ``stats`` and ``context.new_checkpoints``.

    Returns the sessions holding at least one request, in path order. A bad file never raises: it is counted
    (``unreadable``, malformed lines) and keeps its previous checkpoint.
    """
    files = list_files(root)
    by_name: dict[str, str] = {}
    for key in (context.old_checkpoints or {}):
        name = _plain_name(os.path.basename(key))
        if name.startswith("rollout-"):
            by_name.setdefault(name, key)
    prompts = custom_prompts(root)
    return read_files(files, functools.partial(_harvest_file, by_name=by_name, prompts=prompts), context, stats)


def _harvest_file(path: Path, context: HarvestContext, stats: HarvestStats,
                  by_name: dict[str, str], prompts: tuple[tuple[str, str], ...] = ()) -> Session | None:
    fallback = by_name.get(_plain_name(path.name))
    plan = plan_read(path, context, stats, fallback_key=fallback if fallback != str(path) else None)
    if plan is None:
        return None
    rollout = CodexRollout(stats, prompts)
    read = read_planned_file(path, plan, rollout, context, stats, peek=peek_line,
                             default_session_id=_session_id_from_name(path),
                             compressed=path.name.endswith(".zst"), read_errors=(OSError, zstandard.ZstdError))
    if read is None:
        return None
    turns, session_id = read
    return Session(source=SOURCE, session_id=session_id, path=str(path), cwd=rollout.cwd, version=rollout.version,
                   started_at=parse_timestamp(rollout.started or rollout.first_time),
                   ended_at=parse_timestamp(rollout.last_time), entrypoint=rollout.entrypoint, turns=turns)
