"""Write sessions of every agent skillopt-sleep reads, in that agent's real on-disk layout, for the tests.

One writer per source, ``write_<source>(home, project, conversations, *, fixed_answer=...)``: ``home`` is the root
its harvester's ``default_root()`` would return (``~/.gemini``, ``~/.local/share/opencode``, ``~/.cursor``,
``~/.copilot``, VS Code's ``globalStorage`` for cline; for aider the project directory itself) and each
``(request, answer, correction)`` becomes one session: the user's request, the assistant's answer, the user's
correction, the assistant's ``fixed_answer``. It is
the world of ``transcripts.write_claude_sessions``: ids are fixed (derived from the conversation index, so task ids
and the train/val/test split are the same on every run), the sessions start about 3 hours ago, ten minutes apart,
and they were run in ``project`` (so the default project scope keeps them).

The records follow each harvester's real fixtures (``tests/fixtures/transcripts/<agent>/``, read by
``tests/unit/test_harvest_<module>.py``) and its module docstring:

* gemini: ``tmp/<sha256(project)>/chats/session-<YYYY-MM-DDTHH-MM>-<id8>.jsonl``, a metadata line then ``user`` /
  ``gemini`` messages and ``$set`` ``lastUpdated`` updates (as the Gemini CLI 2026-04 ``.jsonl`` recording).
* opencode: the SQLite ``opencode.db`` of OpenCode 1.2+, with the ``project``/``session``/``message``/``part``
  tables copied from the real v1.16 database fixture; message and part JSON without their ids (columns hold them).
* cursor: ``projects/<workspace path as a folder name>/agent-transcripts/<id>/<id>.jsonl``: ``user`` messages in the
  ``<user_query>`` envelope with a ``<timestamp>`` tag, ``assistant`` messages, ``turn_ended`` lines.
* copilot: ``session-state/<id>/events.jsonl`` (with ``workspace.yaml``): ``session.start`` (``context.cwd``),
  ``user.message``, ``assistant.turn_start`` / ``assistant.message`` / ``assistant.turn_end`` events chained by
  ``parentId`` (as the Copilot CLI 1.0.34 log).
* aider: ``.aider.chat.history.md`` in the project, one ``# aider chat started at`` run per conversation, typed
  lines as ``#### …  ``, aider's own lines as ``> …  `` (as the v0.86.0 history).
* cline: ``saoudrizwan.claude-dev/tasks/<epoch-ms id>/`` under VS Code's ``globalStorage``: ``ui_messages.json``
  (``say task``, ``completion_result``, ``user_feedback``), ``api_conversation_history.json`` (``<task>``,
  ``attempt_completion`` tool uses, ``<feedback>``, ``<environment_details>`` naming the cwd) and
  ``task_metadata.json`` (as Cline 3.51).

``WRITERS`` maps each source name to its writer.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing
from datetime import datetime, timedelta, timezone
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "transcripts"
OPENCODE_FIXTURE_DB = FIXTURES / "opencode" / "suhd550-dev__stunning-memory__opencode.REAL-DERIVED.events-seq0-119.db"
OPENCODE_TABLES = ("project", "session", "message", "part")
FIXED_ANSWER = "Sorry, I will use pnpm."

Conversation = tuple[str, str, str]
Writer = Callable[..., None]


def _turns(conversations: list[Conversation], fixed_answer: str, hours_ago: float = 3.0
           ) -> Iterator[tuple[int, datetime, list[tuple[str, str, datetime]]]]:
    """``(index, session start, [(role, text, time)] * 4)`` per conversation: user, assistant, user, assistant, 20 s
    apart, sessions ten minutes apart starting ``hours_ago`` hours ago."""
    start = datetime.now(timezone.utc) - timedelta(hours=hours_ago)
    for number, (request, answer, correction) in enumerate(conversations):
        moment = began = start + timedelta(minutes=10 * number)
        turns = []
        for role, text in (("user", request), ("assistant", answer), ("user", correction),
                           ("assistant", fixed_answer)):
            moment += timedelta(seconds=20)
            turns.append((role, text, moment))
        yield number, began, turns


def _iso(moment: datetime) -> str:
    """``2026-04-23T12:53:05.283Z`` (milliseconds, as every agent here writes its times)."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def _uuid(number: int, turn: int = 0) -> str:
    return str(uuid.UUID(int=(number + 1) * 1000 + turn))


def _jsonl(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records), encoding="utf-8")


def _touch(path: Path, moment: datetime) -> None:
    os.utime(path, (moment.timestamp(), moment.timestamp()))


# --------------------------------------------------------------------------- Gemini CLI


def write_gemini(home: Path, project: Path, conversations: list[Conversation], *,
                 fixed_answer: str = FIXED_ANSWER) -> None:
    """Gemini CLI ``.jsonl`` recordings under ``home`` (the ``.gemini`` folder):
    ``tmp/<sha256(project)>/chats/session-<start>-<id8>.jsonl``."""
    project_hash = hashlib.sha256(str(project).encode("utf-8")).hexdigest()
    chats = home / "tmp" / project_hash / "chats"
    for number, began, turns in _turns(conversations, fixed_answer):
        session_id = _uuid(number)
        records: list[dict] = [{"sessionId": session_id, "projectHash": project_hash, "startTime": _iso(began),
                                "lastUpdated": _iso(began), "kind": "main"}]
        for turn, (role, text, moment) in enumerate(turns, start=1):
            message_id = _uuid(number, turn)
            if role == "user":
                records.append({"id": message_id, "timestamp": _iso(moment), "type": "user",
                                "content": [{"text": text}]})
            else:
                records.append({"id": message_id, "timestamp": _iso(moment), "type": "gemini", "content": text,
                                "thoughts": [], "tokens": {"input": 1200, "output": 12, "cached": 0, "thoughts": 0,
                                                           "tool": 0, "total": 1212},
                                "model": "gemini-2.5-pro"})
            records.append({"$set": {"lastUpdated": _iso(moment)}})
        name = f"session-{began.strftime('%Y-%m-%dT%H-%M')}-{session_id[:8]}.jsonl"
        _jsonl(chats / name, records)
        _touch(chats / name, turns[-1][2])


# --------------------------------------------------------------------------- OpenCode


def write_opencode(home: Path, project: Path, conversations: list[Conversation], *,
                   fixed_answer: str = FIXED_ANSWER) -> None:
    """OpenCode 1.2+ sessions in ``home/opencode.db`` (``home``: ``~/.local/share/opencode``), one ``session`` row
    per conversation with its ``message`` and ``part`` rows, in the schema of the real v1.16 database."""
    home.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(f"file:{OPENCODE_FIXTURE_DB}?mode=ro", uri=True)) as source:
        marks = ",".join("?" * len(OPENCODE_TABLES))
        schema = [sql for (sql,) in source.execute(
            f"SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND tbl_name IN ({marks}) "
            "ORDER BY type = 'index', name", OPENCODE_TABLES)]
    worktree = str(project)
    project_id = hashlib.sha1(worktree.encode("utf-8")).hexdigest()
    model = {"providerID": "anthropic", "modelID": "claude-sonnet-4-5"}
    with closing(sqlite3.connect(home / "opencode.db", isolation_level=None)) as db:
        for sql in schema:
            db.execute(sql)
        db.execute("BEGIN")
        created = None
        for number, began, turns in _turns(conversations, fixed_answer):
            if created is None:
                created = _ms(began)
                db.execute("INSERT INTO project (id, worktree, vcs, time_created, time_updated, sandboxes) "
                           "VALUES (?, ?, 'git', ?, ?, '[]')", (project_id, worktree, created, created))
            session_id = f"ses_{number + 1:026d}"
            updated = _ms(turns[-1][2]) + 500
            db.execute("INSERT INTO session (id, project_id, parent_id, slug, directory, title, version, "
                       "time_created, time_updated) VALUES (?, ?, NULL, ?, ?, ?, 'v1.16.0', ?, ?)",
                       (session_id, project_id, f"session-{number + 1}", worktree, turns[0][1][:50], _ms(began),
                        updated))
            parent = None
            for turn, (role, text, moment) in enumerate(turns, start=1):
                stamp = _ms(moment)
                message_id = f"msg_{number + 1:04d}{turn:02d}{'0' * 20}"
                if role == "user":
                    data = {"role": "user", "time": {"created": stamp}, "agent": "build", "model": model}
                    parts = [{"type": "text", "text": text}]
                    parent = message_id
                else:
                    data = {"parentID": parent, "role": "assistant", "mode": "build", "agent": "build",
                            "path": {"cwd": worktree, "root": worktree}, "cost": 0,
                            "tokens": {"total": 1212, "input": 1200, "output": 12, "reasoning": 0,
                                       "cache": {"write": 0, "read": 0}},
                            "modelID": model["modelID"], "providerID": model["providerID"],
                            "time": {"created": stamp, "completed": stamp + 400}, "finish": "stop"}
                    parts = [{"type": "step-start"}, {"type": "text", "text": text,
                                                      "time": {"start": stamp + 100, "end": stamp + 300}},
                             {"type": "step-finish", "reason": "stop", "cost": 0,
                              "tokens": data["tokens"]}]
                db.execute("INSERT INTO message (id, session_id, time_created, time_updated, data) "
                           "VALUES (?, ?, ?, ?, ?)", (message_id, session_id, stamp, stamp + 400, json.dumps(data)))
                for index, part in enumerate(parts):
                    db.execute("INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) "
                               "VALUES (?, ?, ?, ?, ?, ?)",
                               (f"prt_{number + 1:04d}{turn:02d}{index:02d}{'0' * 18}", message_id, session_id,
                                stamp + index, stamp + index, json.dumps(part)))
        db.execute("COMMIT")


# --------------------------------------------------------------------------- Cursor


def _cursor_timestamp(moment: datetime) -> str:
    """Cursor's ``<timestamp>`` tag: ``Friday, Jul 17, 2026, 6:10 PM (UTC)``."""
    moment = moment.astimezone(timezone.utc)
    hour = moment.hour % 12 or 12
    return (f"<timestamp>{moment.strftime('%A')}, {moment.strftime('%b')} {moment.day}, {moment.year}, "
            f"{hour}:{moment.minute:02d} {'PM' if moment.hour >= 12 else 'AM'} (UTC)</timestamp>")


def write_cursor(home: Path, project: Path, conversations: list[Conversation], *,
                 fixed_answer: str = FIXED_ANSWER) -> None:
    """Cursor agent transcripts (JSONL) under ``home`` (``~/.cursor``):
    ``projects/<project path as a folder name>/agent-transcripts/<id>/<id>.jsonl``."""
    folder = re.sub(r"[^A-Za-z0-9]+", "-", str(project)).strip("-")
    transcripts = home / "projects" / folder / "agent-transcripts"
    for number, _began, turns in _turns(conversations, fixed_answer):
        session_id = _uuid(number)
        records: list[dict] = []
        for role, text, moment in turns:
            if role == "user":
                body = f"{_cursor_timestamp(moment)}\n<user_query>\n{text}\n</user_query>"
                records.append({"role": "user", "message": {"content": [{"type": "text", "text": body}]}})
            else:
                records.append({"role": "assistant", "message": {"content": [{"type": "text", "text": text}]}})
                records.append({"type": "turn_ended", "status": "success"})
        path = transcripts / session_id / f"{session_id}.jsonl"
        _jsonl(path, records)
        _touch(path, turns[-1][2])


# --------------------------------------------------------------------------- Copilot CLI


def write_copilot(home: Path, project: Path, conversations: list[Conversation], *,
                  fixed_answer: str = FIXED_ANSWER) -> None:
    """Copilot CLI event logs under ``home`` (``~/.copilot``): ``session-state/<id>/events.jsonl`` beside its
    ``workspace.yaml``."""
    for number, began, turns in _turns(conversations, fixed_answer):
        session_id = _uuid(number)
        folder = home / "session-state" / session_id
        events: list[dict] = []

        def event(kind: str, data: dict, moment: datetime, events: list[dict] = events, number: int = number) -> None:
            parent = events[-1]["id"] if events else None
            events.append({"type": kind, "data": data, "id": _uuid(number, len(events) + 1),
                           "timestamp": _iso(moment), "parentId": parent})

        event("session.start", {"sessionId": session_id, "version": 1, "producer": "copilot-agent",
                                "copilotVersion": "1.0.34", "startTime": _iso(began),
                                "context": {"cwd": str(project), "gitRoot": str(project), "branch": "main"},
                                "alreadyInUse": False, "remoteSteerable": False}, began)
        event("session.model_change", {"newModel": "claude-sonnet-4.6"}, began + timedelta(seconds=1))
        interaction = None
        for turn, (role, text, moment) in enumerate(turns):
            if role == "user":
                interaction = _uuid(number, 500 + turn)
                event("user.message", {"content": text, "transformedContent": f"<current_datetime>{_iso(moment)}"
                                       f"</current_datetime>\n\n{text}", "attachments": [],
                                       "supportedNativeDocumentMimeTypes": [], "agentMode": "interactive",
                                       "interactionId": interaction}, moment)
            else:
                event("assistant.turn_start", {"turnId": str(turn // 2), "interactionId": interaction},
                      moment - timedelta(seconds=5))
                event("assistant.message", {"messageId": _uuid(number, 700 + turn), "content": text,
                                            "toolRequests": [], "interactionId": interaction}, moment)
                event("assistant.turn_end", {"turnId": str(turn // 2)}, moment + timedelta(milliseconds=5))
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "workspace.yaml").write_text(
            f"id: {session_id}\ncwd: {project}\ngit_root: {project}\nbranch: main\n"
            f"created_at: {_iso(began)}\nupdated_at: {_iso(turns[-1][2])}\n", encoding="utf-8")
        _jsonl(folder / "events.jsonl", events)
        _touch(folder / "events.jsonl", turns[-1][2])


# --------------------------------------------------------------------------- Aider


def write_aider(home: Path, project: Path, conversations: list[Conversation], *,
                fixed_answer: str = FIXED_ANSWER) -> None:
    """Aider runs appended to ``home/.aider.chat.history.md`` (``home``: the project directory, where aider keeps
    its history), one ``# aider chat started at`` run per conversation, as aider v0.86 writes them (the start time in
    this machine's local zone, aider's ``> `` notices, ``#### `` typed lines, ``> Tokens:`` after each reply)."""
    home.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []
    for _number, began, turns in _turns(conversations, fixed_answer):
        local = began.astimezone()  # aider writes the local time, without a zone
        lines += ["", f"# aider chat started at {local.strftime('%Y-%m-%d %H:%M:%S')}", "",
                  "> /usr/local/bin/aider --model sonnet  ", "> Aider v0.86.0  ",
                  "> Main model: anthropic/claude-sonnet-4-5 with diff edit format  ",
                  "> Git repo: .git with 12 files  ", "> Repo-map: using 4096 tokens, auto refresh  ", ""]
        for role, text, _moment in turns:
            if role == "user":  # every line of a message as aider's user_input writes it: "#### line  "
                lines += ["#### " + "  \n#### ".join(text.splitlines() or ["<blank>"]) + "  ", ""]
            else:
                lines += [text, "", "> Tokens: 2.4k sent, 12 received. Cost: $0.0074 message, $0.0074 session.  ",
                          ""]
    path = home / ".aider.chat.history.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    _touch(path, datetime.now(timezone.utc) - timedelta(hours=1))


# --------------------------------------------------------------------------- Cline


CLINE_FEEDBACK = ("The user has provided feedback on the results. Consider their input to continue the task, and then "
                  "attempt completion again.")


def write_cline(home: Path, project: Path, conversations: list[Conversation], *,
                fixed_answer: str = FIXED_ANSWER) -> None:
    """Cline tasks under ``home`` (VS Code's ``globalStorage``): ``saoudrizwan.claude-dev/tasks/<task id>/`` with
    ``ui_messages.json`` (the task, ``completion_result`` answers, the correction as ``user_feedback``),
    ``api_conversation_history.json`` (``<task>``, ``attempt_completion`` tool uses, the ``<feedback>`` result,
    ``<environment_details>`` naming the project as the working directory) and ``task_metadata.json``."""
    environment = (f"<environment_details>\n# Visual Studio Code Visible Files\npackage.json\n\n"
                   f"# Current Working Directory ({project}) Files\npackage.json\nsrc/\n</environment_details>")
    for number, began, turns in _turns(conversations, fixed_answer):
        task_id = str(1769000000000 + (number + 1) * 600_000)  # an epoch-ms id, as Cline names tasks; fixed
        folder = home / "saoudrizwan.claude-dev" / "tasks" / task_id
        folder.mkdir(parents=True, exist_ok=True)
        (_, request, _), (_, answer, _), (_, correction, _), (_, fixed, last) = turns
        ui: list[dict] = []

        def say(kind: str, text: str, moment: datetime, asked: bool = False, ui: list[dict] = ui) -> None:
            ui.append({"ts": _ms(moment), "type": "ask" if asked else "say", "ask" if asked else "say": kind,
                       "text": text})

        def api_request(text: str, moment: datetime) -> None:
            say("api_req_started", json.dumps({"request": f"{text}\n\n{environment}", "tokensIn": 2400,
                                               "tokensOut": 12, "cacheWrites": 0, "cacheReads": 0, "cost": 0.0074}),
                moment)

        def completion(text: str, turn: int, number: int = number) -> dict:
            return {"role": "assistant", "content": [{"type": "tool_use", "id": f"toolu_{number + 1:04d}{turn:02d}",
                                                      "name": "attempt_completion", "input": {"result": text}}]}

        feedback = f"[attempt_completion] Result:\n\n{CLINE_FEEDBACK}\n<feedback>\n{correction}\n</feedback>"
        say("task", request, turns[0][2])
        api_request(f"<task>\n{request}\n</task>", turns[0][2] + timedelta(milliseconds=50))
        say("completion_result", answer, turns[1][2])
        say("completion_result", "", turns[1][2] + timedelta(milliseconds=50), asked=True)
        say("user_feedback", correction, turns[2][2])
        api_request(feedback, turns[2][2] + timedelta(milliseconds=50))
        say("completion_result", fixed, last)
        say("completion_result", "", last + timedelta(milliseconds=50), asked=True)
        api = [{"role": "user", "content": [{"type": "text", "text": f"<task>\n{request}\n</task>"},
                                            {"type": "text", "text": environment}]},
               completion(answer, 1),
               {"role": "user", "content": [{"type": "text", "text": feedback},
                                            {"type": "text", "text": environment}]},
               completion(fixed, 3)]
        metadata = {"files_in_context": [], "model_usage": [{"ts": _ms(began), "model_id": "claude-sonnet-4-5",
                                                             "model_provider_id": "anthropic", "mode": "act"}],
                    "environment_history": [{"ts": _ms(began), "os_name": "linux", "os_arch": "x64",
                                             "host_name": "Visual Studio Code", "host_version": "1.108.1",
                                             "cline_version": "3.51.0"}]}
        for name, data in (("api_conversation_history.json", api), ("task_metadata.json", metadata),
                           ("ui_messages.json", ui)):
            (folder / name).write_text(json.dumps(data), encoding="utf-8")
            _touch(folder / name, last)


WRITERS: dict[str, Writer] = {
    "gemini": write_gemini,
    "opencode": write_opencode,
    "cursor": write_cursor,
    "copilot": write_copilot,
    "aider": write_aider,
    "cline": write_cline,
}
