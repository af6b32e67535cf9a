"""GitHub Copilot CLI harvester: the user's own requests, and what followed each, from Copilot CLI session logs.

Layout under ``$COPILOT_HOME`` (or ``~/.copilot``; see ``default_root``):

* ``session-state/<sessionId>/events.jsonl`` (with ``workspace.yaml``, ``checkpoints/``, ``files/`` beside it),
  and the older flat ``session-state/<sessionId>.jsonl``: one event per line, ``{type, data, id, timestamp,
  parentId[, agentId]}``. Shown by the real 1.0.34 session (fixture ``...copilot@dc22676.jsonl``) and the schema
  fixture of shapes up to 1.0.77 (``...stage0-copilot-small.SCHEMA-FIXTURE.jsonl``).
* ``history-session-state/<sessionId>.json``: the older single-JSON log (Oct 2025) ``{sessionId, startTime,
  chatMessages[], timeline[]}`` whose timeline holds ``user``, ``copilot``, ``tool_call_completed`` and ``info``
  entries (fixture ``...copilot@bcec23f.json``). It records no working directory: such a session is only
  harvested with scope ``all``.

A request is the ``content`` of a main-agent ``user.message``, never its ``transformedContent`` (the text sent to
the model, with ``<current_datetime>`` and ``<reminder>`` blocks added). Not requests: a ``user.message`` with empty
``content`` (the autopilot nudge "You have not yet marked the task as complete...": only ``transformedContent``),
``isAutopilotContinuation``, a ``source`` naming a skill or another agent (``skill-*``, ``agent-*``), content that
is a ``<system_notification>``/reminder block, ``system.message`` prompts, ``system.notification``, tool results,
hook payloads and assistant text. A message typed while the agent was busy (``delivery: "steering"``) is queued
on the turn it steers. Events of sub-agents inside a session (top-level ``agentId`` or ``data.parentToolCallId``)
are not the main agent's work and are ignored; a session spawned by another one
(``session.start.detachedFromSpawningParentSessionId``) is skipped (``subagent``). A non-interactive run
(``copilot -p``: its system prompt says "non-interactive mode") is skipped (``headless``) unless
``include_sdk_sessions``.

What follows a request: the last assistant ``content`` (chunks of one model call, ``apiCallId``, are joined) or the
``session.task_complete`` summary, tool calls (``toolRequests`` and ``tool.execution_start``), tool errors
(``success: false`` with ``error.message``, or a shell result ending ``<exited with exit code N>`` with N != 0),
``abort`` (``user_initiated``, ``user_abort``, ``remote_command``: ``interrupted``; any other reason: ``aborted``),
tool permissions the user refused (``permission.completed`` ``denied-interactively-by-user``, with its
``feedback``, or a tool error coded ``rejected``: ``rejected_tool``). A ``session.snapshot_rewind`` drops the turns
from the rewound message on.

The working directory is ``session.start.context.cwd``, else ``session.resume``'s, else ``cwd:`` in
``workspace.yaml``, else the system prompt's "Current working directory:" line; each turn keeps the directory
current when it was typed (``session.context_changed``).

Checkpoints: event logs are append-only and are read from the stored byte offset (a grown file's head is read
again for the session's cwd, mode and first request); a log rewritten shorter (a rewind) is read again, and the
turns typed before its previous modification time are not emitted twice. The legacy JSON file is rewritten on every
save: its checkpoint offset is the number of timeline entries already harvested.
"""

from __future__ import annotations

import os
import re
from datetime import datetime, timezone
from pathlib import Path

import orjson

from skillopt_sleep.errors import HarvestError
from skillopt_sleep.harvest.read_plan import (
    HarvestContext,
    ReadPlan,
    file_mtime,
    keep_previous_checkpoint,
    kept_unchanged,
    lists_sessions,
    plan_read,
    read_isolated,
)
from skillopt_sleep.harvest.reader import SKIP, TranscriptParser, open_binary, read_planned_file
from skillopt_sleep.harvest.turns import DraftTurn, compact_json, harvested_turns, parse_timestamp
from skillopt_sleep.models import FileCheckpoint, HarvestStats, Session
from skillopt_sleep.prompts.marker import is_own_request

SOURCE = "copilot"

EVENTS_NAME = "events.jsonl"
LEGACY_MAX_BYTES = 256 << 20
"""A legacy JSON session larger than this (256 MiB) is not read (``too_large``)."""
WORKSPACE_MAX_BYTES = 64 << 10

INJECTED_PREFIXES = ("<system_notification", "<system_reminder", "<system-reminder", "<reminder>",
                     "<current_datetime>")
"""Content the tool writes into a ``user.message`` that the user did not type."""
NOT_HUMAN_SOURCES = ("skill-", "agent-")
"""``user.message.source`` prefixes of hidden skill injections and prompts sent by another agent."""
USER_ABORTS = frozenset({"user_initiated", "user_abort", "remote_command"})
HEADLESS_MARK = "non-interactive mode"
CWD_LINE = "Current working directory: "
_EXIT_CODE = re.compile(r"<exited with exit code (-?\d+)>\s*\Z")

_SKIPPED_LINE = re.compile(rb'\{"type":"(?:hook\.|session\.binary_asset"|assistant\.reasoning"|'
                           rb'session\.usage_checkpoint"|session\.auto_mode_resolved"|session\.compaction_complete"|'
                           rb'assistant\.usage")')
"""The first bytes of event lines that never matter (hook payloads repeat whole tool results)."""


def peek_line(buffer: bytearray, start: int, end: int) -> object:
    """The ``LinePeek`` of event logs: ``SKIP`` for the event types ``_SKIPPED_LINE`` names (Copilot writes
    ``type`` as the first key), None (parse it) for everything else."""
    return SKIP if _SKIPPED_LINE.match(buffer, start, end) is not None else None


def default_root() -> Path:
    """Copilot CLI's root (absolute, ``~`` expanded): ``$COPILOT_HOME``, else ``~/.copilot``. Builds before 1.0.5
    kept their state in ``$XDG_STATE_HOME/.copilot`` (newer builds move it to ``~/.copilot`` on start): that folder
    is used when ``~/.copilot/session-state`` does not exist and it holds one."""
    configured = os.environ.get("COPILOT_HOME", "").strip()
    if configured:
        return Path(configured).expanduser().absolute()
    home = Path.home() / ".copilot"
    state = os.environ.get("XDG_STATE_HOME", "").strip()
    if state and not (home / "session-state").exists():
        legacy = Path(state).expanduser() / ".copilot"
        if (legacy / "session-state").is_dir():
            return legacy.absolute()
    return home.absolute()


def _entries(folder: Path) -> list[os.DirEntry]:
    try:
        return list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as error:
        raise HarvestError(f"cannot list Copilot CLI sessions in {folder}: {error.strerror}; "
                           "fix the permissions or point the copilot home elsewhere") from error


def list_files(root: Path) -> tuple[list[Path], list[Path]]:
    """Return ``(event logs, legacy JSON sessions)`` under ``root``, each sorted: ``session-state/<id>/events.jsonl``
    and ``session-state/<id>.jsonl``; ``history-session-state/<id>.json``. Raises HarvestError when one of these
    folders exists but cannot be listed."""
    logs: list[Path] = []
    for entry in _entries(root / "session-state"):
        if entry.is_dir(follow_symlinks=False):
            candidate = Path(entry.path) / EVENTS_NAME
            if candidate.is_file():
                logs.append(candidate)
        elif entry.name.endswith(".jsonl") and entry.is_file():
            logs.append(Path(entry.path))
    legacy = [Path(entry.path) for entry in _entries(root / "history-session-state")
              if entry.name.endswith(".json") and entry.is_file()]
    return sorted(logs), sorted(legacy)


def has_sessions(root: Path) -> bool:
    """True when ``root`` holds at least one Copilot CLI session file (listing only). Never raises."""
    return lists_sessions(lambda: any(list_files(root)))


def workspace_cwd(folder: Path) -> str | None:
    """The ``cwd:`` value of ``folder/workspace.yaml`` (a flat ``key: value`` file), or None."""
    try:
        with open(folder / "workspace.yaml", "rb") as handle:
            text = handle.read(WORKSPACE_MAX_BYTES).decode("utf-8", "replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("cwd:"):
            value = line[4:].strip()
            if value.startswith('"'):
                try:
                    value = orjson.loads(value)
                except orjson.JSONDecodeError:
                    return None
            elif value.startswith("'") and value.endswith("'") and len(value) > 1:
                value = value[1:-1].replace("''", "'")
            return value if isinstance(value, str) and value else None
    return None


def _human_text(data: dict) -> str | None:
    """The text the user typed in a ``user.message``'s data, or None when the tool wrote it."""
    content = data.get("content")
    if not isinstance(content, str) or data.get("isAutopilotContinuation") is True:
        return None
    text = content.strip()
    source = data.get("source")
    if not text or text.startswith(INJECTED_PREFIXES) or (isinstance(source, str)
                                                          and source.startswith(NOT_HUMAN_SOURCES)):
        return None
    return text


def _exit_error(content: object) -> str | None:
    """A shell result's text when it ends ``<exited with exit code N>`` with N != 0."""
    if not isinstance(content, str):
        return None
    match = _EXIT_CODE.search(content[-200:])
    return content if match is not None and int(match.group(1)) != 0 else None


class CopilotEvents(TranscriptParser):
    """Reads the events of one Copilot CLI session log into draft turns."""

    def __init__(self, stats: HarvestStats, *, fallback_cwd: str | None = None,
                 not_before: datetime | None = None):
        super().__init__(stats)
        self.version: str | None = None
        self.started: str | None = None
        self.first_time: str | None = None
        self.last_time: str | None = None
        self.start_cwd: str | None = None
        self.prompt_cwd: str | None = None
        self.fallback_cwd = fallback_cwd
        self.current_cwd: str | None = None
        self.headless = None  # unknown until a system message tells
        self.records = 0
        self.not_before = not_before
        """Turns typed at or before this moment were harvested from an earlier copy of the file."""
        self.turn_of_event: dict[str, int] = {}

    @property
    def cwd(self) -> str | None:
        return self.start_cwd or self.fallback_cwd or self.prompt_cwd

    @property
    def entrypoint(self) -> str | None:
        return None if self.headless is None else ("non-interactive" if self.headless else "interactive")

    def feed(self, record: dict) -> None:
        kind = record.get("type")
        data = record.get("data")
        if not isinstance(kind, str) or not isinstance(data, dict):
            if self.records == 0:
                self.not_a_session = True  # not a Copilot event log
            if not self.head_mode:
                self.stats.records_unknown += 1
            return
        self.records += 1
        stamp = record.get("timestamp")
        if isinstance(stamp, str) and stamp[:1].isdigit():
            self.first_time = self.first_time or stamp
            self.last_time = stamp
        if record.get("agentId") or data.get("parentToolCallId"):
            return  # a sub-agent's own messages and tool calls
        handler = _HANDLERS.get(kind)
        if handler is not None:
            handler(self, data, record)

    # ------------------------------------------------------------------ session events

    def _start(self, data: dict, record: dict) -> None:
        if self.session_id is None and isinstance(data.get("sessionId"), str):
            self.session_id = data["sessionId"]
        if isinstance(data.get("copilotVersion"), str):
            self.version = data["copilotVersion"]
        if isinstance(data.get("startTime"), str):
            self.started = data["startTime"]
        if data.get("detachedFromSpawningParentSessionId"):
            self.subagent = True
        self._context(data.get("context"), primary=True)

    def _resume(self, data: dict, record: dict) -> None:
        self._context(data.get("context"), primary=False)

    def _context_changed(self, data: dict, record: dict) -> None:
        self._context(data, primary=False)

    def _context(self, context: object, *, primary: bool) -> None:
        cwd = context.get("cwd") if isinstance(context, dict) else None
        if isinstance(cwd, str) and cwd:
            if primary or self.start_cwd is None:
                self.start_cwd = self.start_cwd or cwd
            self.current_cwd = cwd

    def _system(self, data: dict, record: dict) -> None:
        content = data.get("content")
        if not isinstance(content, str) or data.get("role", "system") != "system":
            return
        if self.headless is None:
            self.headless = HEADLESS_MARK in content[:1000]
        if self.prompt_cwd is None:
            start = content.find(CWD_LINE)
            if start != -1:
                start += len(CWD_LINE)
                end = content.find("\n", start)
                self.prompt_cwd = content[start:end if end != -1 else len(content)].strip() or None

    # ------------------------------------------------------------------ requests

    def _user(self, data: dict, record: dict) -> None:
        text = _human_text(data)
        if text is None:
            return
        if not self.note_request(text):
            return
        if data.get("delivery") == "steering" and self.current is not None:
            self.current.add_queued(text)  # typed while the agent was busy, injected into the running turn
            return
        stamp = parse_timestamp(record.get("timestamp"))
        draft = DraftTurn(request=text, timestamp=stamp, cwd=self.current_cwd or self.cwd)
        self.current = draft
        if self.not_before is not None and stamp is not None and stamp <= self.not_before:
            return  # harvested from the file before it was rewritten
        event_id = record.get("id")
        if isinstance(event_id, str):
            self.turn_of_event[event_id] = len(self.turns)
        self.turns.append(draft)

    def _rewind(self, data: dict, record: dict) -> None:
        index = self.turn_of_event.get(data.get("upToEventId"))  # type: ignore[arg-type]
        if index is not None and not self.head_mode:
            del self.turns[index:]
            self.current = self.turns[-1] if self.turns else None

    # ------------------------------------------------------------------ what followed

    def _assistant(self, data: dict, record: dict) -> None:
        current = self.current
        if current is None or self.head_mode:
            return
        content = data.get("content")
        if isinstance(content, str):
            current.set_answer(content, data.get("apiCallId") or data.get("messageId"))
        requests = data.get("toolRequests")
        for request in requests if isinstance(requests, list) else ():
            if isinstance(request, dict):
                self._add_tool(request.get("name"), request.get("arguments"), request.get("toolCallId"))

    def _tool_start(self, data: dict, record: dict) -> None:
        if self.current is not None and not self.head_mode:
            self._add_tool(data.get("toolName"), data.get("arguments"), data.get("toolCallId"))

    def _add_tool(self, name: object, arguments: object, call_id: object) -> None:
        self.current.add_tool(name if isinstance(name, str) else "unknown",  # type: ignore[union-attr]
                              compact_json(arguments) if arguments is not None else "",
                              call_id if isinstance(call_id, str) else None)

    def _tool_complete(self, data: dict, record: dict) -> None:
        current = self.current
        if current is None or self.head_mode:
            return
        error = data.get("error")
        result = data.get("result")
        content = result.get("content") if isinstance(result, dict) else None
        if isinstance(error, dict) and error.get("code") == "rejected":
            current.rejected_tool = True
        if data.get("success") is False:
            message = error.get("message") if isinstance(error, dict) else error
            text = message if isinstance(message, str) and message.strip() else content
            if not isinstance(text, str) or not text.strip():
                text = str(error.get("code") or "failed") if isinstance(error, dict) else "failed"
        else:
            text = _exit_error(content)
        tool = current.tools_by_id.get(data.get("toolCallId"))  # type: ignore[arg-type]
        if text is not None and tool is not None:
            tool.set_error(text)

    def _permission(self, data: dict, record: dict) -> None:
        current = self.current
        if current is None or self.head_mode:
            return
        result = data.get("result")
        outcome = result if isinstance(result, dict) else data
        if outcome.get("kind") != "denied-interactively-by-user":
            return
        current.rejected_tool = True
        feedback = outcome.get("feedback")
        if isinstance(feedback, str) and feedback.strip():
            current.rejection_feedback = feedback.strip()
        tool = current.tools_by_id.get(data.get("toolCallId"))  # type: ignore[arg-type]
        if tool is not None and tool.error_text is None:
            tool.set_error("rejected by the user")

    def _abort(self, data: dict, record: dict) -> None:
        if self.current is not None and not self.head_mode:
            if data.get("reason") in USER_ABORTS:
                self.current.interrupted = True
            else:
                self.current.aborted = True

    def _task_complete(self, data: dict, record: dict) -> None:
        summary = data.get("summary")
        if self.current is not None and not self.head_mode and isinstance(summary, str):
            self.current.set_answer(summary)


_HANDLERS = {
    "session.start": CopilotEvents._start, "session.resume": CopilotEvents._resume,
    "session.context_changed": CopilotEvents._context_changed, "system.message": CopilotEvents._system,
    "user.message": CopilotEvents._user, "session.snapshot_rewind": CopilotEvents._rewind,
    "assistant.message": CopilotEvents._assistant, "tool.execution_start": CopilotEvents._tool_start,
    "tool.execution_complete": CopilotEvents._tool_complete, "permission.completed": CopilotEvents._permission,
    "abort": CopilotEvents._abort, "session.task_complete": CopilotEvents._task_complete,
}


def _rewritten_since(plan: ReadPlan) -> datetime | None:
    """For a file read again from the start although it has a checkpoint (rewritten, e.g. by a rewind): the
    modification time of the copy read last time; turns typed by then were harvested."""
    if plan.previous is None or plan.start > 0 or plan.previous.offset <= 0:
        return None
    return datetime.fromtimestamp(plan.previous.mtime_ns / 1e9, tz=timezone.utc)


def harvest_copilot(root: Path, context: HarvestContext, stats: HarvestStats) -> list[Session]:
    """Harvest the Copilot CLI sessions under ``root``; updates ``stats`` and ``context.new_checkpoints``.

    Returns the sessions that hold at least one request: event logs first, then legacy JSON sessions, each in path
    order. A bad file never raises: it is counted (``unreadable``, ``not_a_session``, malformed lines) and an
    unreadable one keeps its previous checkpoint. Raises HarvestError only when a session folder cannot be listed.
    """
    logs, legacy = list_files(root)
    sessions = [read_isolated(path, context, stats, _harvest_log) for path in logs]
    sessions += [read_isolated(path, context, stats, _harvest_legacy) for path in legacy]
    return [session for session in sessions if session is not None]


def _harvest_log(path: Path, context: HarvestContext, stats: HarvestStats) -> Session | None:
    plan = plan_read(path, context, stats)
    if plan is None:
        return None
    in_folder = path.name == EVENTS_NAME
    fallback = workspace_cwd(path.parent) if in_folder and plan.action == "read" else None
    events = CopilotEvents(stats, fallback_cwd=fallback, not_before=_rewritten_since(plan))
    default_id = path.parent.name if in_folder else path.stem
    read = read_planned_file(path, plan, events, context, stats, peek=peek_line, default_session_id=default_id)
    if read is None:
        return None
    turns, session_id = read
    return Session(source=SOURCE, session_id=session_id, path=str(path), cwd=events.cwd, version=events.version,
                   started_at=parse_timestamp(events.started or events.first_time),
                   ended_at=parse_timestamp(events.last_time), entrypoint=events.entrypoint, turns=turns)


def _harvest_legacy(path: Path, context: HarvestContext, stats: HarvestStats) -> Session | None:
    """One ``history-session-state/<id>.json`` file; its checkpoint offset counts the timeline entries read."""
    plan = plan_read(path, context, stats)
    if plan is None:
        return None
    if kept_unchanged(plan, context, stats):
        return None
    checkpoint = FileCheckpoint(size=plan.size, mtime_ns=plan.mtime_ns, offset=0)
    if plan.action == "too_old" or not context.scope_all:
        # offset 0: when the file is read later, the turns typed before this checkpoint's mtime are dropped
        stats.skip("too_old" if plan.action == "too_old" else "out_of_scope")  # no cwd: only scope "all" reads it
        context.new_checkpoints[plan.key] = checkpoint
        return None
    if plan.size > LEGACY_MAX_BYTES:
        stats.skip("too_large")
        context.new_checkpoints[plan.key] = checkpoint
        return None
    try:
        with open_binary(path) as handle:
            raw = handle.read()
    except OSError:
        stats.skip("unreadable")
        keep_previous_checkpoint(plan, context)
        return None
    stats.bytes_read += len(raw)
    try:
        document = orjson.loads(raw)
    except orjson.JSONDecodeError:
        document = None
        stats.malformed("bad_json")
    timeline = document.get("timeline") if isinstance(document, dict) else None
    context.new_checkpoints[plan.key] = checkpoint
    if not isinstance(timeline, list) or not isinstance(document.get("sessionId"), str):  # type: ignore[union-attr]
        stats.skip("not_a_session")
        return None
    session_id = document["sessionId"]  # type: ignore[index]
    checkpoint.session_id = session_id
    checkpoint.offset = len(timeline)
    previous = plan.previous
    start = previous.offset if previous is not None and 0 <= previous.offset <= len(timeline) else 0
    if previous is not None:
        stats.files_grown += 1
    not_before = None if previous is None else datetime.fromtimestamp(previous.mtime_ns / 1e9, tz=timezone.utc)
    drafts, last_time = _legacy_turns(timeline[start:], not_before)
    if any(is_own_request(draft.request) for draft in drafts):
        stats.skip("own_marker")
        return None
    turns = harvested_turns(drafts, context, file_mtime(plan), stats)
    if turns is None:
        return None
    return Session(source=SOURCE, session_id=session_id, path=str(path), cwd=None, version=None,
                   started_at=parse_timestamp(document.get("startTime")),  # type: ignore[union-attr]
                   ended_at=parse_timestamp(last_time), entrypoint=None, turns=turns)


def _legacy_turns(entries: list, not_before: datetime | None) -> tuple[list[DraftTurn], object]:
    """Draft turns of legacy timeline entries (``user`` starts a turn; ``copilot`` text is its answer;
    ``tool_call_completed`` a tool use, failed unless ``result.type`` is ``success``). Returns (drafts, last time)."""
    drafts: list[DraftTurn] = []
    current: DraftTurn | None = None
    last_time: object = None
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        kind, text = entry.get("type"), entry.get("text")
        last_time = entry.get("timestamp") or last_time
        if kind == "user":
            request = text.strip() if isinstance(text, str) else ""
            if not request or request.startswith(INJECTED_PREFIXES):
                continue
            stamp = parse_timestamp(entry.get("timestamp"))
            current = DraftTurn(request=request, timestamp=stamp)
            if not_before is None or stamp is None or stamp > not_before:
                drafts.append(current)
        elif current is None:
            continue
        elif kind == "copilot" and isinstance(text, str):
            current.set_answer(text, entry.get("id"))
        elif kind == "tool_call_completed":
            name = entry.get("name")
            tool = current.add_tool(name if isinstance(name, str) else "unknown", compact_json(entry.get("arguments")),
                                    entry.get("callId") if isinstance(entry.get("callId"), str) else None)
            result = entry.get("result")
            outcome = result.get("type") if isinstance(result, dict) else None
            log = result.get("log") if isinstance(result, dict) else None
            if outcome == "rejected":
                current.rejected_tool = True
            error = (log if isinstance(log, str) and log.strip() else str(outcome)) if outcome not in (
                None, "success") else _exit_error(log)
            if tool is not None and error is not None:
                tool.set_error(error)
    return drafts, last_time
