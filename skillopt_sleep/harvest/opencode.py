"""OpenCode harvester: the user's own requests, and what followed each, from OpenCode's session store.

Layouts under ``$XDG_DATA_HOME/opencode`` (usually ``~/.local/share/opencode``), see ``shared/FORMATS.md`` §3/§3.1:

* v1.2 and later: the SQLite database ``opencode.db`` (builds of other channels write ``opencode-<channel>.db``; both
  are read), in WAL mode. Tables ``session`` (one row per session: ``directory`` is its working directory,
  ``parent_id`` marks a sub-agent session, ``time_updated`` in epoch ms), ``message`` (``data``: the message JSON
  without ``id``/``sessionID``, which are columns) and ``part`` (``data``: one part, ``text``/``tool``/``reasoning``/
  ``step-start``/``step-finish``/...). Fixture: ``suhd550-dev__stunning-memory`` (OpenCode 1.16.0). Only the
  ``session``, ``message`` and ``part`` tables are queried; ``account``/``control_account`` hold access tokens and are
  never read. The database is opened read-only (``mode=ro``) and read one session per short read transaction, so a
  database that a running OpenCode is writing (WAL, a writer holding its lock) is read as last committed.
* before v1.2: the JSON tree ``storage/session/<projectID>/<ses_…>.json``, ``storage/message/<ses_…>/<msg_…>.json``,
  ``storage/part/<msg_…>/<prt_…>.json`` (the same message and part objects, with their ids). Fixture:
  ``jazzyalex__agent-sessions`` storage_v2 (shapes up to 1.3.17). A JSON session whose id is also in a database is
  the copy OpenCode migrated and is skipped (``duplicate``).
* ``.opencode/opencode.db`` of the older Go OpenCode (tables ``sessions``/``messages``/``files``) is recognized and
  skipped (``unsupported_schema``); any other SQLite file is ``not_a_session``; one that cannot be read is
  ``unreadable``.

What counts as a request (``Turn``): the text parts of a ``user`` message that are not ``synthetic`` or ``ignored``
(OpenCode marks the text it writes in the user's name that way: file contents and "Called the Read tool…" of an
``@file``, "The following tool was executed by the user" of a ``!command``, the sub-agent hint of an ``@agent``,
"Summarize the task tool output above…", compaction continues). A ``subtask`` part (a slash command run as a
sub-agent) is ``/command`` of kind ``command`` with its prompt as ``command_body``. A user message with no such text
starts no turn; after a ``!command`` the span is closed (what follows is the user's shell run, not the agent's work).

What follows a request: the last assistant text (non-synthetic ``text`` parts; the ``summary`` message a compaction
writes is not an answer), tool calls (``tool`` and ``state.input``), tool errors (``state.status == "error"``, and a
``completed`` call whose ``metadata.exit`` is non-zero), user rejections of a permission or question
("The user rejected permission…", "…with the following feedback: X", "The user dismissed this question":
``rejected_tool`` and ``rejection_feedback``) and a user cancel (``MessageAbortedError`` on an assistant message:
``interrupted``). Sub-agent sessions (``parent_id``/``parentID``) are skipped (``subagent``), as are sessions holding
skillopt-sleep's own replay marker (``own_marker``).

Checkpoints: one per session. Key ``f"{database}#{session id}"`` (JSON tree: the session file's path); ``mtime_ns``
the session's ``time_updated`` (JSON tree: the later of the session file's and its message folder's mtime);
``offset`` and ``size`` the number of messages read. A session whose ``mtime_ns`` is unchanged is not read; a grown one
yields only the turns whose request is at or after ``offset`` (when a revert deleted messages, the start is capped at
the current count, so old turns are never emitted twice). A database that cannot be read keeps all its checkpoints.
"""

from __future__ import annotations

import functools
import os
import sqlite3
from contextlib import closing
from datetime import datetime
from pathlib import Path
from typing import Callable
from urllib.parse import quote

import orjson

from skillopt_sleep.harvest.read_plan import FILE_ERROR, HarvestContext, lists_sessions, read_isolated
from skillopt_sleep.harvest.turns import DraftTurn, compact_json, harvested_turns, parse_timestamp
from skillopt_sleep.models import FileCheckpoint, HarvestStats, Session
from skillopt_sleep.paths import opencode_data_dir
from skillopt_sleep.prompts.marker import is_own_request

SOURCE = "opencode"

DATABASE_NAME = "opencode.db"
BUSY_TIMEOUT_S = 5.0
"""How long a read waits for a writer's exclusive lock (seconds); WAL readers never wait."""
SESSION_TABLES = frozenset({"session", "message", "part"})
GO_OPENCODE_TABLES = frozenset({"sessions", "messages"})
"""Tables of the older Go OpenCode's ``.opencode/opencode.db`` (another format, not read)."""

SHELL_MARKER = "The following tool was executed by the user"
REJECTION_PREFIXES = ("The user rejected permission to use this specific tool call", "The user dismissed this question")
FEEDBACK_MARKER = "with the following feedback:"
ABORTED_ERROR = "MessageAbortedError"

MessageRow = tuple[str, object, dict]
"""``(message id, creation time in epoch ms, message JSON)``."""


def default_root() -> Path:
    """OpenCode's data directory: ``$XDG_DATA_HOME/opencode``, else ``~/.local/share/opencode``
    (``paths.opencode_data_dir``)."""
    return opencode_data_dir()


def list_databases(root: Path) -> list[Path]:
    """The session databases in ``root`` (``opencode.db``, ``opencode-<channel>.db``), sorted; ``root`` itself when it
    is a file (e.g. the database ``$OPENCODE_DB`` names)."""
    if root.is_file():
        return [root]
    try:
        names = os.listdir(root)
    except OSError:
        return []
    return sorted(root / name for name in names
                  if name == DATABASE_NAME or (name.startswith("opencode-") and name.endswith(".db")))


def list_legacy_sessions(root: Path) -> list[Path]:
    """The session files of the pre-1.2 JSON tree, ``root/storage/session/<projectID>/<id>.json``, sorted."""
    found: list[Path] = []
    try:
        projects = [entry.path for entry in os.scandir(root / "storage" / "session") if entry.is_dir()]
    except OSError:
        return []
    for project in projects:
        try:
            found.extend(Path(project) / name for name in os.listdir(project) if name.endswith(".json"))
        except OSError:
            continue
    return sorted(found)


def has_sessions(root: Path) -> bool:
    """True when ``root`` holds an OpenCode database or a session file of the JSON tree."""
    return lists_sessions(lambda: list_databases(root) or list_legacy_sessions(root))


# --------------------------------------------------------------------------- messages to turns


def human_request(parts: list[dict]) -> tuple[str | None, str, str | None, bool]:
    """Return ``(request, kind, command_body, shell_run)`` of a user message's parts: the request is None when the
    user typed nothing in it; ``shell_run`` is True for the message OpenCode writes for a ``!command``."""
    texts: list[str] = []
    subtask: dict | None = None
    shell_run = False
    for part in parts:
        kind = part.get("type")
        if kind == "text":
            text = part.get("text")
            if not isinstance(text, str):
                continue
            if part.get("synthetic") or part.get("ignored"):
                shell_run = shell_run or text.startswith(SHELL_MARKER)
            elif text.strip():
                texts.append(text)
        elif kind == "subtask" and subtask is None:
            subtask = part
    if texts:
        return "\n".join(texts), "prompt", None, False
    if subtask is not None:
        command, prompt = subtask.get("command"), subtask.get("prompt")
        if isinstance(command, str) and command:
            return f"/{command}", "command", prompt if isinstance(prompt, str) else None, False
        if isinstance(prompt, str) and prompt.strip():
            return prompt, "prompt", None, False
    return None, "prompt", None, shell_run


def tool_error(state: dict) -> str | None:
    """The error text of a tool part's ``state``: its ``error`` when it failed, its output when a command it ran
    exited non-zero (``metadata.exit``), else None."""
    status = state.get("status")
    if status == "error":
        error = state.get("error")
        return (error if isinstance(error, str) else compact_json(error)) or "error"
    if status == "completed":
        metadata = state.get("metadata")
        code = metadata.get("exit") if isinstance(metadata, dict) else None
        if isinstance(code, int) and not isinstance(code, bool) and code != 0:
            output = state.get("output")
            return output if isinstance(output, str) and output.strip() else f"exit code {code}"
    return None


class SessionReader:
    """Turns the messages of one session, in order, into draft turns; messages before ``start`` (read on an earlier
    night) start no turn and only serve the replay-marker check."""

    def __init__(self, stats: HarvestStats, cwd: str | None, start: int):
        self.stats = stats
        self.cwd = cwd
        self.start = start
        self.turns: list[DraftTurn] = []
        self.current: DraftTurn | None = None
        self.saw_request = False
        self.own_marker = False

    def wants_parts(self, index: int, info: dict) -> bool:
        """Whether message ``index`` must be read with its parts."""
        return index >= self.start or (info.get("role") == "user" and not self.saw_request)

    def feed(self, index: int, message_id: str, created: object, info: dict, parts: list[dict]) -> None:
        role = info.get("role")
        if role == "user":
            self._user(index, created, info, parts)
        elif role == "assistant":
            if index >= self.start:
                self._assistant(message_id, info, parts)
        else:
            self.stats.records_unknown += 1

    def _user(self, index: int, created: object, info: dict, parts: list[dict]) -> None:
        request, kind, body, shell_run = human_request(parts)
        if request is not None:
            self.saw_request = True
            if is_own_request(request):
                self.own_marker = True
        if index < self.start:
            return
        if request is None:
            if shell_run:
                self.current = None
            return
        stamp = info.get("time", {}).get("created") if isinstance(info.get("time"), dict) else None
        self.current = DraftTurn(request=request, kind=kind, command_body=body, cwd=self.cwd,
                                 timestamp=parse_timestamp(stamp) or parse_timestamp(created))
        self.turns.append(self.current)

    def _assistant(self, message_id: str, info: dict, parts: list[dict]) -> None:
        current = self.current
        if current is None or info.get("summary") is True:
            return
        error = info.get("error")
        if isinstance(error, dict) and error.get("name") == ABORTED_ERROR:
            current.interrupted = True
        for part in parts:
            kind = part.get("type")
            if kind == "text" and isinstance(part.get("text"), str):
                if not (part.get("synthetic") or part.get("ignored")):  # OpenCode wrote it, not the model
                    current.set_answer(part["text"], message_id)
            elif kind == "tool":
                self._tool(current, part)

    @staticmethod
    def _tool(current: DraftTurn, part: dict) -> None:
        state = part.get("state") if isinstance(part.get("state"), dict) else {}
        name, call_id = part.get("tool"), part.get("callID")
        tool = current.add_tool(name if isinstance(name, str) else "unknown", compact_json(state.get("input")),
                                call_id if isinstance(call_id, str) else None)
        error = tool_error(state)
        if error is None:
            return
        if error.startswith(REJECTION_PREFIXES):
            current.rejected_tool = True
            marker = error.find(FEEDBACK_MARKER)
            feedback = error[marker + len(FEEDBACK_MARKER):].strip() if marker != -1 else ""
            if feedback:
                current.rejection_feedback = feedback
        if tool is not None:
            tool.set_error(error)


def read_messages(messages: list[MessageRow], load_parts: Callable[[str], list[dict]], cwd: str | None, start: int,
                  stats: HarvestStats) -> SessionReader:
    """Feed ``messages`` (in order) to a ``SessionReader``, loading the parts of those it needs."""
    reader = SessionReader(stats, cwd, start)
    for index, (message_id, created, info) in enumerate(messages):
        if reader.wants_parts(index, info):
            reader.feed(index, message_id, created, info, load_parts(message_id))
    return reader


def _json_object(data: object, stats: HarvestStats) -> dict | None:
    """Parse one stored JSON object (text or bytes); None, counted ``bad_json``/``not_an_object``, otherwise."""
    if isinstance(data, str):
        data = data.encode("utf-8", "replace")
    if not isinstance(data, (bytes, bytearray)):
        stats.malformed("bad_json")
        return None
    stats.bytes_read += len(data)
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        stats.malformed("bad_json")
        return None
    if not isinstance(value, dict):
        stats.malformed("not_an_object")
        return None
    return value


# --------------------------------------------------------------------------- checkpoints and session outcome


def _skip_reason(parent: object, cwd: str | None, updated: datetime | None, previous: FileCheckpoint | None,
                 context: HarvestContext) -> str | None:
    """Why a session is skipped before its messages are read (None: read it)."""
    if parent:
        return "subagent"
    if not context.in_scope(cwd):
        return "out_of_scope"
    if previous is None and context.cutoff is not None and updated is not None and updated < context.cutoff:
        return "too_old"
    return None


def _finish(reader: SessionReader, context: HarvestContext, stats: HarvestStats, fallback_time: datetime):
    """The finished turns of a read session, or None (the skip reason counted)."""
    if reader.own_marker:
        stats.skip("own_marker")
        return None
    turns = harvested_turns(reader.turns, context, fallback_time, stats)
    if turns is None:
        return None
    return turns


def _keep_checkpoints(prefix: str, context: HarvestContext) -> None:
    """Carry the previous checkpoints under ``prefix`` over (their store could not be read tonight)."""
    for key, checkpoint in (context.old_checkpoints or {}).items():
        if key.startswith(prefix):
            context.new_checkpoints.setdefault(key, checkpoint)


def _epoch_ms(value: object) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


# --------------------------------------------------------------------------- the SQLite database (v1.2+)


def connect_read_only(path: Path) -> sqlite3.Connection:
    """Open ``path`` read-only (``mode=ro`` URI, queries only), in autocommit mode. Raises sqlite3.Error."""
    uri = "file:" + quote(os.path.abspath(path)) + "?mode=ro"
    connection = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    connection.execute("PRAGMA query_only = ON")
    return connection


def _harvest_database(path: Path, context: HarvestContext, stats: HarvestStats, known_ids: set[str]) -> list[Session]:
    prefix = f"{path}#"
    try:
        connection = connect_read_only(path)
    except sqlite3.Error:
        stats.skip("unreadable")
        _keep_checkpoints(prefix, context)
        return []
    sessions: list[Session] = []
    with closing(connection):
        try:
            tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not SESSION_TABLES <= tables:
                stats.skip("unsupported_schema" if GO_OPENCODE_TABLES <= tables else "not_a_session")
                return []
            rows = connection.execute("SELECT id, parent_id, directory, version, time_created, time_updated "
                                      "FROM session ORDER BY time_created, id").fetchall()
        except sqlite3.Error:
            stats.skip("unreadable")
            _keep_checkpoints(prefix, context)
            return []
        for row in rows:
            if not isinstance(row[0], str):
                stats.skip("not_a_session")
                continue
            known_ids.add(row[0])
            try:
                session = _harvest_row(connection, path, row, context, stats)
            except MemoryError:
                raise
            except Exception as error:  # unreadable, or a row no reader expected: that session only is skipped
                key = f"{prefix}{row[0]}"
                context.new_checkpoints.pop(key, None)
                if context.old_checkpoints and key in context.old_checkpoints:
                    context.new_checkpoints[key] = context.old_checkpoints[key]
                if isinstance(error, sqlite3.Error):
                    stats.skip("unreadable")
                else:
                    stats.skip(FILE_ERROR)
                    stats.error(FILE_ERROR, key, error)
                _end_read(connection)
                continue
            if session is not None:
                sessions.append(session)
    return sessions


def _end_read(connection: sqlite3.Connection) -> None:
    if connection.in_transaction:
        try:
            connection.execute("ROLLBACK")
        except sqlite3.Error:
            pass


def _harvest_row(connection: sqlite3.Connection, path: Path, row: tuple, context: HarvestContext,
                 stats: HarvestStats) -> Session | None:
    session_id, parent, directory, version, created, updated = row
    key = f"{path}#{session_id}"
    mtime_ns = _epoch_ms(updated) * 1_000_000
    stats.files_scanned += 1
    previous = (context.old_checkpoints or {}).get(key)
    if previous is not None and previous.mtime_ns == mtime_ns:
        stats.files_unchanged += 1
        context.new_checkpoints[key] = previous
        return None
    cwd = directory if isinstance(directory, str) and directory else None
    ended = parse_timestamp(updated)
    reason = _skip_reason(parent, cwd, ended, previous, context)
    if reason is not None:
        count = connection.execute("SELECT COUNT(*) FROM message WHERE session_id = ?", (session_id,)).fetchone()[0]
        stats.skip(reason)
        context.new_checkpoints[key] = FileCheckpoint(size=count, mtime_ns=mtime_ns, offset=count,
                                                      session_id=session_id)
        return None
    connection.execute("BEGIN")  # one snapshot for the session's messages and parts
    try:
        messages: list[MessageRow] = []
        for message_id, message_created, data in connection.execute(
                "SELECT id, time_created, data FROM message WHERE session_id = ? ORDER BY time_created, id",
                (session_id,)):
            info = _json_object(data, stats)
            messages.append((message_id, message_created, info if info is not None else {}))

        def load_parts(message_id: str) -> list[dict]:
            rows = connection.execute("SELECT data FROM part WHERE message_id = ? ORDER BY id", (message_id,))
            return [part for (data,) in rows if (part := _json_object(data, stats)) is not None]

        start = min(previous.offset, len(messages)) if previous is not None else 0
        if start:
            stats.files_grown += 1
        reader = read_messages(messages, load_parts, cwd, start, stats)
    finally:
        _end_read(connection)
    context.new_checkpoints[key] = FileCheckpoint(size=len(messages), mtime_ns=mtime_ns, offset=len(messages),
                                                  session_id=session_id)
    turns = _finish(reader, context, stats, ended or context.now)
    if turns is None:
        return None
    return Session(source=SOURCE, session_id=session_id, path=key, cwd=cwd,
                   version=version if isinstance(version, str) else None, started_at=parse_timestamp(created),
                   ended_at=ended, turns=turns)


# --------------------------------------------------------------------------- the JSON tree (before v1.2)


def _read_json_file(path: Path, stats: HarvestStats) -> dict | None:
    try:
        data = path.read_bytes()
    except OSError:
        stats.malformed("unreadable")
        return None
    return _json_object(data, stats)


def _legacy_messages(folder: Path, stats: HarvestStats) -> list[MessageRow]:
    """The messages of one session of the JSON tree, ordered by creation time then id."""
    try:
        names = sorted(name for name in os.listdir(folder) if name.endswith(".json"))
    except OSError:
        return []
    messages: list[MessageRow] = []
    for name in names:
        info = _read_json_file(folder / name, stats)
        if info is None:
            continue
        message_id = info.get("id") if isinstance(info.get("id"), str) else name[:-5]
        created = info.get("time", {}).get("created") if isinstance(info.get("time"), dict) else None
        messages.append((message_id, created, info))
    messages.sort(key=lambda message: (_epoch_ms(message[1]), message[0]))
    return messages


def _message_cwd(messages: list[MessageRow]) -> str | None:
    """The working directory an assistant message recorded (``path.cwd``; a plain string in the schema fixture)."""
    for _, _, info in messages:
        where = info.get("path")
        cwd = where.get("cwd") if isinstance(where, dict) else where
        if isinstance(cwd, str) and cwd:
            return cwd
    return None


def _harvest_legacy(path: Path, context: HarvestContext, stats: HarvestStats, *, root: Path,
                    known_ids: set[str]) -> Session | None:
    if path.stem in known_ids:
        stats.skip("duplicate")  # migrated into the database, which was read
        return None
    key = str(path)
    storage = root / "storage"
    previous = (context.old_checkpoints or {}).get(key)

    def unreadable() -> None:  # counted; last night's checkpoint carried over, so the file is read again
        stats.skip("unreadable")
        if previous is not None:
            context.new_checkpoints[key] = previous

    try:
        info = path.stat()
    except OSError:
        unreadable()
        return None
    folder_id = previous.session_id if previous is not None and previous.session_id else path.stem
    try:  # a new message adds a file to the session's message folder
        mtime_ns = max(info.st_mtime_ns, (storage / "message" / folder_id).stat().st_mtime_ns)
    except OSError:
        mtime_ns = info.st_mtime_ns
    stats.files_scanned += 1
    if previous is not None and previous.mtime_ns == mtime_ns and previous.size == info.st_size:
        stats.files_unchanged += 1
        context.new_checkpoints[key] = previous
        return None
    try:
        raw = path.read_bytes()
    except OSError:
        unreadable()
        return None
    data = _json_object(raw, stats)
    session_id = data.get("id") if data is not None else None
    if not isinstance(session_id, str) or not session_id:
        stats.skip("not_a_session")
        context.new_checkpoints[key] = FileCheckpoint(size=info.st_size, mtime_ns=mtime_ns, offset=0)
        return None
    times = data.get("time") if isinstance(data.get("time"), dict) else {}
    ended = parse_timestamp(times.get("updated")) or parse_timestamp(info.st_mtime_ns / 1e9)
    messages = _legacy_messages(storage / "message" / session_id, stats)
    directory = data.get("directory")
    cwd = directory if isinstance(directory, str) and directory else _message_cwd(messages)
    reason = _skip_reason(data.get("parentID"), cwd, ended, previous, context)
    context.new_checkpoints[key] = FileCheckpoint(size=info.st_size, mtime_ns=mtime_ns, offset=len(messages),
                                                  session_id=session_id)
    if reason is not None:
        stats.skip(reason)
        return None

    def load_parts(message_id: str) -> list[dict]:
        folder = storage / "part" / message_id
        try:
            names = sorted(name for name in os.listdir(folder) if name.endswith(".json"))
        except OSError:
            return []
        return [part for name in names if (part := _read_json_file(folder / name, stats)) is not None]

    start = min(previous.offset, len(messages)) if previous is not None else 0
    if start:
        stats.files_grown += 1
    reader = read_messages(messages, load_parts, cwd, start, stats)
    turns = _finish(reader, context, stats, ended or context.now)
    if turns is None:
        return None
    version = data.get("version")
    return Session(source=SOURCE, session_id=session_id, path=key, cwd=cwd,
                   version=version if isinstance(version, str) else None,
                   started_at=parse_timestamp(times.get("created")), ended_at=ended, turns=turns)


# --------------------------------------------------------------------------- entry point


def harvest_opencode(root: Path, context: HarvestContext, stats: HarvestStats) -> list[Session]:
    """Harvest the OpenCode sessions under ``root`` (databases first, then the JSON tree); updates ``stats`` and
    ``context.new_checkpoints``.

    Returns the sessions holding at least one request: each database's in (creation time, id) order, then the JSON
    tree's in path order. A bad database, row or file never raises: it is counted and keeps its previous checkpoints.
    """
    sessions: list[Session] = []
    known_ids: set[str] = set()
    for path in list_databases(root):
        sessions.extend(_harvest_database(path, context, stats, known_ids))
    for path in list_legacy_sessions(root):
        session = read_isolated(path, context, stats,
                                functools.partial(_harvest_legacy, root=root, known_ids=known_ids))
        if session is not None:
            sessions.append(session)
    return sessions
