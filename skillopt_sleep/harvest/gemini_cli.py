"""Gemini CLI harvester: the user's own requests, and what followed each, from Gemini CLI chat recordings.

Layout: ``<root>/tmp/<project>/chats/session-<YYYY-MM-DDTHH-MM>-<id8>.json(l)`` (some docs say ``<root>/data/``:
both are read), where ``<root>`` is ``$GEMINI_CLI_HOME/.gemini`` or ``~/.gemini``. ``<project>`` is
``sha256(project root)`` in older builds and a short slug in newer ones (the slug folder holds a ``.project_root``
file naming the project, and ``<root>/projects.json`` maps project paths to slugs). Sub-agent recordings live in
``chats/<parentSessionId>/<id>.jsonl``; ``logs.json`` and ``checkpoint-*.json`` (``/chat save``) sit outside
``chats/`` and are not sessions. Formats handled (see ``shared/FORMATS.md`` §3 and §3.1):

* legacy ``.json``: one object ``{sessionId, projectHash, startTime, lastUpdated, messages[], kind}``, rewritten
  whole on every save (fixture ``…@894772f.json``);
* current ``.jsonl``: a metadata first line ``{sessionId, projectHash, startTime, lastUpdated, kind}``, then message
  records, ``{"$set": {...}}`` metadata updates and ``{"$rewindTo": id}`` rewinds, which drop that message and every
  later one (fixture ``…@dc22676.jsonl``). A message id written again replaces the earlier copy in place (the later
  copy adds ``toolCalls``). A ``.json`` resumed by Gemini CLI is copied whole into a ``.jsonl`` twin: the twin wins.
  The whole-history ``$set.messages`` snapshots of newer builds (after a rollback or compression) add no request
  and remove none (a cancelled prompt stays, flagged ``interrupted``); their other keys (``lastUpdated``) are
  metadata updates like any ``$set``.

A request is a ``user`` message the human typed: its ``displayContent`` when recorded (what was typed: ``/init``
becomes a ``command`` turn whose ``command_body`` is the expanded prompt in ``content``; ``@file`` references keep
only the typed text), else its text. Not requests: user messages holding tool responses (``functionResponse``
parts), the tool's own continuations ("Please continue.", "System: Please continue.") and injected context
(``<session_context>``, ``<state_snapshot>``, ``<hook_context>``, editor context, shell-mode output, plan-mode
notices); a steering hint typed while the agent works ("User steering update:") is a queued message. What follows
a request: the last ``gemini`` text (thoughts excluded), ``toolCalls`` (name, args head; ``error`` or
``cancelled`` status and non-zero ``Exit Code`` outputs are tool errors; a denied call sets ``rejected_tool``,
another cancel ``interrupted``) and the ``info`` record "Request cancelled." (``interrupted``). Sub-agent sessions
(folder or ``kind: "subagent"``) are skipped (``subagent``).

Scope: a session records no cwd. Its project is the folder's ``.project_root``, its slug in ``projects.json``, or
the project root whose sha256 equals the folder name or the ``projectHash``; a session mapped to no project is
``out_of_scope`` unless the scope is ``all``.

Checkpoint: ``FileCheckpoint.offset`` is the number of messages already harvested (the file is re-read whole when
it changes; only turns whose request comes at or after that position are emitted). A rewind written since the
last read that cut below that count lowers it to the rewind point, so a re-asked request is emitted.
``UNCOUNTED`` (-1) marks a file that was never counted (too old, out of scope): when it changes, only turns asked
after its checkpointed modification time are new.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import orjson

from skillopt_sleep.errors import HarvestError
from skillopt_sleep.harvest.read_plan import (
    HarvestContext,
    file_mtime,
    keep_previous_checkpoint,
    kept_unchanged,
    lists_sessions,
    plan_read,
    read_isolated,
)
from skillopt_sleep.harvest.reader import MAX_LINE_BYTES, RECORD_ERROR, RecordReader, feed, open_binary
from skillopt_sleep.harvest.turns import DraftTurn, compact_json, harvested_turns, parse_timestamp
from skillopt_sleep.models import FileCheckpoint, HarvestStats, Session
from skillopt_sleep.prompts.marker import is_own_request

SOURCE = "gemini"

AREAS = ("tmp", "data")
"""Folders of ``<root>`` holding one folder per project (``tmp`` in every build seen; ``data`` in newer docs)."""
SESSION_PREFIX = "session-"
PROJECT_MARKER = ".project_root"
UNCOUNTED = -1
"""``FileCheckpoint.offset`` of a file whose messages were never counted."""

CONTINUATIONS = frozenset({"Please continue.", "System: Please continue."})
"""Texts Gemini CLI sends in the user's name when it decides the model should go on."""
INJECTED_PREFIXES = (
    "<session_context>", "This is the Gemini CLI. We are setting up the context", "<state_snapshot>",
    "<hook_context>", "Here is the user's editor context", "Here is a summary of changes in the user's editor",
    "I ran the following shell command:", "User has manually exited Plan Mode.", "Plan approved. Switching to",
    "- **Workspace Directories:**", "User hints:",
)
"""Context Gemini CLI records as ``user`` messages that the user did not type."""
STEERING_PREFIX = "User steering update:"
REFERENCE_MARKER = "--- Content from referenced files ---"
CANCELLED_INFO = "Request cancelled."
REJECTION_MARKERS = ("User did not allow tool call", "User denied execution")
_COMMAND = re.compile(r"/[A-Za-z][\w:.-]*(?:\s|$)")
_EXIT_CODE = re.compile(r"^Exit Code: (-?\d+)", re.MULTILINE)
_HASH_NAME = re.compile(r"[0-9a-f]{64}")


# --------------------------------------------------------------------------- listing


def default_root() -> Path:
    """Gemini CLI's root: ``$GEMINI_CLI_HOME/.gemini`` (Gemini CLI takes that variable as its home directory),
    else ``~/.gemini`` (absolute, ``~`` expanded)."""
    home = os.environ.get("GEMINI_CLI_HOME")
    return ((Path(home).expanduser() if home else Path.home()) / ".gemini").absolute()


def list_files(root: Path) -> tuple[list[Path], list[Path]]:
    """Return ``(main session files, sub-agent files)`` under ``root/tmp`` and ``root/data``, sorted.

    Main files are ``<project>/chats/session-*.jsonl`` and ``session-*.json`` (a ``.json`` with a ``.jsonl`` twin is
    left out); sub-agent files are ``<project>/chats/<parentSessionId>/*.json(l)``. Raises HarvestError when
    ``tmp`` or ``data`` exists but cannot be listed.
    """
    mains: list[Path] = []
    agents: list[Path] = []
    for area in AREAS:
        base = root / area
        try:
            projects = [entry.path for entry in os.scandir(base) if entry.is_dir(follow_symlinks=False)]
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as error:
            raise HarvestError(f"cannot list Gemini CLI sessions in {base}: {error.strerror}; "
                               "fix the permissions or point the gemini home elsewhere") from error
        for project in projects:
            try:
                entries = list(os.scandir(os.path.join(project, "chats")))
            except OSError:
                continue
            names = {entry.name for entry in entries}
            for entry in entries:
                name = entry.name
                if entry.is_dir(follow_symlinks=False):
                    try:
                        agents.extend(Path(child.path) for child in os.scandir(entry.path)
                                      if child.name.endswith((".jsonl", ".json")))
                    except OSError:
                        continue
                elif name.startswith(SESSION_PREFIX) and (
                        name.endswith(".jsonl") or (name.endswith(".json") and name + "l" not in names)):
                    mains.append(Path(entry.path))
    return sorted(mains), sorted(agents)


def has_sessions(root: Path) -> bool:
    """True when ``root`` holds at least one Gemini CLI session file (listing only)."""
    return lists_sessions(lambda: list_files(root)[0])


def load_registry(root: Path) -> dict[str, str]:
    """``<root>/projects.json`` (``{"projects": {path: slug}}``) as ``{slug: path}``; empty when absent or bad."""
    try:
        data = orjson.loads((root / "projects.json").read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    projects = data.get("projects") if isinstance(data, dict) else None
    if not isinstance(projects, dict):
        return {}
    return {slug: path for path, slug in projects.items() if isinstance(slug, str) and isinstance(path, str)}


def folder_project(folder: Path, registry: dict[str, str], hashes: dict[str, str]) -> str | None:
    """The project root a ``<root>/tmp/<project>`` folder belongs to: its ``.project_root`` file, its slug in
    ``projects.json``, or the root (among ``hashes``: sha256 -> root) whose hash is the folder name."""
    try:
        with open(folder / PROJECT_MARKER, "rb") as handle:
            marked = handle.read(4096).decode("utf-8", "replace").strip()
    except OSError:
        marked = ""
    return marked or registry.get(folder.name) or hashes.get(folder.name)


# --------------------------------------------------------------------------- messages


@dataclass
class ToolCall:
    call_id: str | None
    name: str
    input_text: str
    status: object
    error: str | None


@dataclass
class Message:
    """One message, reduced to what a turn needs. role: ``request``, ``steering``, ``agent``, ``cancel`` or
    ``other``."""

    message_id: str
    role: str
    timestamp: object = None
    text: str = ""
    kind: str = "prompt"
    command_body: str | None = None
    tools: list[ToolCall] = field(default_factory=list)


def parts_text(value: object) -> tuple[str, bool]:
    """``(text of the non-thought text parts, joined; whether a functionResponse part was present)`` of a
    ``PartListUnion`` (a string, one part, or a list of strings and parts)."""
    if isinstance(value, str):
        return value, False
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        return "", False
    texts: list[str] = []
    response = False
    for part in value:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and part.get("thought") is not True:
            text = part.get("text")
            if isinstance(text, str):
                texts.append(text)
            elif "functionResponse" in part:
                response = True
    return "".join(texts), response


def read_message(record: dict, message_id: str) -> Message:
    """Reduce one message record to a ``Message``."""
    kind = record.get("type")
    stamp = record.get("timestamp")
    if kind == "user":
        return _user_message(record, message_id, stamp)
    if kind == "gemini":
        text, _ = parts_text(record.get("content"))
        calls = record.get("toolCalls")
        tools = [_tool_call(call) for call in calls if isinstance(call, dict)] if isinstance(calls, list) else []
        return Message(message_id, "agent", stamp, text, tools=tools)
    if kind == "info":
        text, _ = parts_text(record.get("content"))
        if text.strip().startswith(CANCELLED_INFO):
            return Message(message_id, "cancel", stamp)
    return Message(message_id, "other", stamp)


def _user_message(record: dict, message_id: str, stamp: object) -> Message:
    content, has_response = parts_text(record.get("content"))
    stripped = content.strip()
    if stripped in CONTINUATIONS:
        return Message(message_id, "other", stamp)
    if stripped.startswith(STEERING_PREFIX):
        hint = stripped.partition("<user_input>")[2].partition("</user_input>")[0].strip()
        return Message(message_id, "steering" if hint else "other", stamp, hint)
    if "displayContent" in record and record["displayContent"] is not None:
        typed = parts_text(record["displayContent"])[0].strip()
        if not typed:
            return Message(message_id, "other", stamp)  # e.g. a tool response shown in the user's place
        if _COMMAND.match(typed):
            body = stripped if stripped and stripped != typed else None
            return Message(message_id, "request", stamp, typed, kind="command", command_body=body)
        return Message(message_id, "request", stamp, typed)
    if has_response or not stripped or stripped.startswith(INJECTED_PREFIXES):
        return Message(message_id, "other", stamp)
    typed = stripped.partition(REFERENCE_MARKER)[0].strip()  # builds that did not record displayContent
    return Message(message_id, "request" if typed else "other", stamp, typed)


def _tool_call(call: dict) -> ToolCall:
    name = call.get("name") or call.get("displayName") or "unknown"
    call_id = call.get("id")
    return ToolCall(call_id if isinstance(call_id, str) else None, str(name), compact_json(call.get("args")),
                    call.get("status"), tool_error(call))


def tool_error(call: dict) -> str | None:
    """The error text of a tool call that failed (status ``error``/``cancelled``, or an output whose
    ``Exit Code:`` line is not 0), else None."""
    errors: list[str] = []
    outputs: list[str] = []
    result = call.get("result")
    for part in result if isinstance(result, list) else [result]:
        response = part.get("functionResponse") if isinstance(part, dict) else None
        payload = response.get("response") if isinstance(response, dict) else None
        if isinstance(payload, dict):
            if isinstance(payload.get("error"), str):
                errors.append(payload["error"])
            if isinstance(payload.get("output"), str):
                outputs.append(payload["output"])
    status = call.get("status")
    if status in ("error", "cancelled"):
        display = call.get("resultDisplay")
        return (errors[0] if errors else outputs[0] if outputs else display if isinstance(display, str) and display
                else str(status))
    if errors:
        return errors[0]
    for output in outputs:
        if "Exit Code: " not in output:  # a substring test first: the regex over a whole read_file output is slow
            continue
        match = _EXIT_CODE.search(output)
        if match and int(match.group(1)) != 0:
            return output
    return None


# --------------------------------------------------------------------------- one session file


class GeminiRecording:
    """The messages of one session file in order (later copies replace earlier ones in place; rewinds drop the
    tail), its metadata, and the lowest rewind point written after byte ``rewinds_after``."""

    def __init__(self, stats: HarvestStats, rewinds_after: int | None):
        self.stats = stats
        self.rewinds_after = rewinds_after
        self.meta: dict = {}
        self.messages: dict[str, Message] = {}
        self.rewind_cut: int | None = None
        self.last_time: object = None

    def feed(self, record: dict, line_end: int) -> None:
        """Take one JSONL record; ``line_end`` is the byte offset just after its line."""
        target = record.get("$rewindTo")
        update = record.get("$set")
        if isinstance(target, str):
            order = list(self.messages)
            cut = order.index(target) if target in self.messages else 0
            for message_id in order[cut:]:
                del self.messages[message_id]
            if self.rewinds_after is not None and line_end > self.rewinds_after:
                self.rewind_cut = cut if self.rewind_cut is None else min(self.rewind_cut, cut)
        elif isinstance(update, dict):
            self.meta.update((key, value) for key, value in update.items() if key != "messages")
        elif isinstance(record.get("id"), str):
            self.add(record, record["id"])
        elif isinstance(record.get("sessionId"), str):
            self.meta.update(record)
        else:
            self.stats.records_unknown += 1

    def add(self, record: dict, message_id: str) -> None:
        self.messages[message_id] = read_message(record, message_id)
        if isinstance(record.get("timestamp"), str):
            self.last_time = record["timestamp"]

    @property
    def is_session(self) -> bool:
        return bool(self.messages) or isinstance(self.meta.get("sessionId"), str)


def read_recording(path: Path, recording: GeminiRecording, context: HarvestContext, stats: HarvestStats) -> bool:
    """Fill ``recording`` from ``path``. Returns False when a legacy ``.json`` does not parse (counted
    ``bad_json``) or is larger than ``MAX_LINE_BYTES`` (``too_large``). Raises OSError when unreadable."""
    if path.name.endswith(".jsonl"):
        with open_binary(path) as handle:
            reader = RecordReader(handle, 0, stats, compressed=False, buffer=context.read_buffer)
            for record in reader.records():
                feed(recording, reader, record, reader.offset)
        if reader.error is not None:
            stats.error(RECORD_ERROR, path, reader.error)
        return True
    with open(path, "rb") as handle:
        raw = handle.read(MAX_LINE_BYTES + 1)
    stats.bytes_read += len(raw)
    if len(raw) > MAX_LINE_BYTES:
        stats.skip("too_large")
        return False
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        stats.malformed("bad_json")
        return False
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        return True  # not a session: recording stays empty
    recording.meta.update((key, value) for key, value in data.items() if key != "messages")
    for index, message in enumerate(data["messages"]):
        if isinstance(message, dict):
            message_id = message.get("id")
            recording.add(message, message_id if isinstance(message_id, str) else f"#{index}")
    return True


def build_turns(messages: list[Message], cwd: str | None) -> list[tuple[int, DraftTurn]]:
    """One draft turn per request, with its position among ``messages`` and what followed it."""
    drafts: list[tuple[int, DraftTurn]] = []
    current: DraftTurn | None = None
    for index, message in enumerate(messages):
        if message.role == "request":
            current = DraftTurn(request=message.text, kind=message.kind, timestamp=parse_timestamp(message.timestamp),
                                cwd=cwd, command_body=message.command_body)
            drafts.append((index, current))
        elif current is None:
            continue
        elif message.role == "agent":
            current.set_answer(message.text, message.message_id)
            for call in message.tools:
                tool = current.add_tool(call.name, call.input_text, call.call_id)
                if tool is not None and call.error is not None:
                    tool.set_error(call.error)
                if call.status == "cancelled":
                    if any(marker in (call.error or "") for marker in REJECTION_MARKERS):
                        current.rejected_tool = True
                    else:
                        current.interrupted = True
        elif message.role == "cancel":
            current.interrupted = True
        elif message.role == "steering":
            current.add_queued(message.text)
    return drafts


def new_turns(drafts: list[tuple[int, DraftTurn]], previous: FileCheckpoint | None,
              recording: GeminiRecording) -> list[DraftTurn]:
    """The drafts not harvested before: all on a first read; else those at or after the stored message count
    (lowered by a newer rewind), or, for an ``UNCOUNTED`` checkpoint, those asked after its mtime."""
    if previous is None:
        return [draft for _, draft in drafts]
    if previous.offset < 0:
        since = datetime.fromtimestamp(previous.mtime_ns / 1e9, tz=timezone.utc)
        return [draft for _, draft in drafts if draft.timestamp is not None and draft.timestamp > since]
    boundary = previous.offset if recording.rewind_cut is None else min(previous.offset, recording.rewind_cut)
    return [draft for index, draft in drafts if index >= boundary]


def _session_id_from_name(path: Path) -> str:
    stem = path.name.rsplit(".", 1)[0]
    return stem.rsplit("-", 1)[-1] if stem.startswith(SESSION_PREFIX) else stem


# --------------------------------------------------------------------------- harvest


def harvest_gemini(root: Path, context: HarvestContext, stats: HarvestStats) -> list[Session]:
    """Harvest the Gemini CLI sessions under ``root``; updates ``stats`` and ``context.new_checkpoints``.

    Returns the sessions that hold at least one new request, in path order. A bad file never raises: it is
    counted (``unreadable``, ``bad_json``, ``not_a_session``, ...) and keeps its previous checkpoint.
    """
    mains, agents = list_files(root)
    old = context.old_checkpoints or {}
    for path in agents:
        plan = plan_read(path, context, stats)
        if plan is None:
            continue
        if plan.action == "unchanged":
            stats.files_unchanged += 1
        else:
            stats.skip("subagent")
        context.new_checkpoints[plan.key] = FileCheckpoint(size=plan.size, mtime_ns=plan.mtime_ns, offset=UNCOUNTED)
    registry = load_registry(root)
    hashes = {hashlib.sha256(spelling.encode("utf-8")).hexdigest(): spelling for spelling in context.roots}
    folders: dict[Path, str | None] = {}
    sessions: list[Session] = []
    for path in mains:
        folder = path.parent.parent
        if folder not in folders:
            folders[folder] = folder_project(folder, registry, hashes)
        twin = old.get(str(path)[:-1]) if path.name.endswith(".jsonl") else None
        read_one = functools.partial(_harvest_file, folder_cwd=folders[folder], hashes=hashes, twin=twin)
        session = read_isolated(path, context, stats, read_one)
        if session is not None:
            sessions.append(session)
    return sessions


def _harvest_file(path: Path, context: HarvestContext, stats: HarvestStats, *, folder_cwd: str | None,
                  hashes: dict[str, str], twin: FileCheckpoint | None) -> Session | None:
    plan = plan_read(path, context, stats)
    if plan is None:
        return None
    previous = plan.previous or twin  # a .jsonl resumed from a .json continues the .json's count

    def checkpoint(offset: int, session_id: str | None = None) -> None:
        context.new_checkpoints[plan.key] = FileCheckpoint(size=plan.size, mtime_ns=plan.mtime_ns, offset=offset,
                                                           session_id=session_id)

    if kept_unchanged(plan, context, stats):
        return None
    if plan.action == "too_old":
        stats.skip("too_old")
        checkpoint(UNCOUNTED)
        return None
    decided = folder_cwd is not None or _HASH_NAME.fullmatch(path.parent.parent.name) is not None
    if decided and not context.scope_all and not context.in_scope(folder_cwd):
        stats.skip("out_of_scope")  # decided by the folder: the file is not opened
        checkpoint(previous.offset if previous is not None else UNCOUNTED)
        return None
    rewinds_after: int | None = None  # rewinds in lines ending past this byte were written since the last read
    if plan.previous is not None and plan.size >= plan.previous.size:
        stats.files_grown += 1
        rewinds_after = plan.previous.size
    elif plan.previous is None and twin is not None:
        rewinds_after = 0  # the migrated copy of the .json holds no rewind: every rewind in the .jsonl is new
    recording = GeminiRecording(stats, rewinds_after)
    try:
        complete = read_recording(path, recording, context, stats)
    except OSError:
        stats.skip("unreadable")
        keep_previous_checkpoint(plan, context)
        return None
    if not complete:
        keep_previous_checkpoint(plan, context)
        return None
    meta = recording.meta
    session_id = meta.get("sessionId") if isinstance(meta.get("sessionId"), str) else _session_id_from_name(path)
    checkpoint(len(recording.messages), session_id)
    if not recording.is_session:
        stats.skip("not_a_session")
        return None
    if meta.get("kind") == "subagent":
        stats.skip("subagent")
        return None
    cwd = folder_cwd or hashes.get(meta.get("projectHash"))  # type: ignore[arg-type]
    if not context.scope_all and (cwd is None or not context.in_scope(cwd)):
        stats.skip("out_of_scope")
        return None
    drafts = build_turns(list(recording.messages.values()), cwd)
    if any(is_own_request(draft.request) or is_own_request(draft.command_body or "") for _, draft in drafts):
        stats.skip("own_marker")
        return None
    turns = harvested_turns(new_turns(drafts, previous, recording), context, file_mtime(plan), stats)
    if turns is None:
        return None
    return Session(source=SOURCE, session_id=session_id, path=str(path), cwd=cwd,
                   started_at=parse_timestamp(meta.get("startTime")),
                   ended_at=parse_timestamp(meta.get("lastUpdated")) or parse_timestamp(recording.last_time),
                   turns=turns)
