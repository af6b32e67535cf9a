"""OpenCode harvester: the real v1.16 database (suhd550-dev/stunning-memory) laid out as ``~/.local/share/opencode/
opencode.db``, the storage_v2 schema fixture laid out as ``…/opencode/storage/``, and synthetic sessions in the real
schema (tables copied from the real database) for what the fixtures lack.

Expected values were read off the fixtures (``sqlite3 … "SELECT … FROM message ORDER BY time_created, id"``): the
database has 35 messages; user messages at positions 0, 5, 9, 13, 18, 22, 25, 29 hold the eight requests; the bash
call of message 31 ran ``bash /workspace/sync-sessions.sh`` with ``metadata.exit`` 1; message 33 asks a ``question``
whose output records the user's choices; message 34 is unfinished (no text, no ``finish``).

Where FORMATS.md §3/§3.1 and the files disagree, the files win: the database's message/part JSON has no ids (columns
hold them); the tree's part folders are named by the message ``id``, not by the message file name; the schema fixture
writes assistant ``path`` as a string where the database has ``{"cwd", "root"}``; a bash command that exits 1 is
``status: "completed"`` with ``metadata.exit: 1`` (not ``status: "error"``); the tree fixture also has a
``synthetic: true`` text part on an *assistant* message (not only on user messages): it is not the answer.
"""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from datetime import datetime, timezone
from pathlib import Path

import orjson
import pytest
from source_run import run_source

from skillopt_sleep.harvest import opencode
from skillopt_sleep.harvest.opencode import harvest_opencode
from skillopt_sleep.models import FileCheckpoint
from skillopt_sleep.prompts.marker import SESSION_MARKER

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts" / "opencode"
REAL_DB = FIXTURES / "suhd550-dev__stunning-memory__opencode.REAL-DERIVED.events-seq0-119.db"
TREE = FIXTURES / "jazzyalex__agent-sessions__stage0-opencode-storage_v2.SCHEMA-FIXTURE"
REAL_SESSION = "ses_04ca851f7ffevKrKMHW3RsPK1U"
REAL_UPDATED_MS = 1785420864454
CWD = "/home/dev/repo"
T0 = 1785000000000  # 2026-07-25T17:20:00Z, in ms


def utc(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


def install_db(root: Path, name: str = "opencode.db") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    target = root / name
    shutil.copyfile(REAL_DB, target)
    return target


def install_tree(root: Path) -> Path:
    shutil.copytree(TREE, root / "storage")
    return root / "storage"


def run(root: Path, **options):
    """Harvest ``root`` (scope all unless given); returns (sessions, stats, new checkpoints)."""
    return run_source(harvest_opencode, root, **options)


class Store:
    """A synthetic OpenCode database with the real schema: rows written the way OpenCode 1.16 writes them."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        with sqlite3.connect(f"file:{REAL_DB}?mode=ro", uri=True) as source:
            schema = [sql for (sql,) in source.execute(
                "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%'")]
        self.path = path
        self.connection = sqlite3.connect(path, isolation_level=None)
        for sql in schema:
            self.connection.execute(sql)
        self.clock = T0
        self.count = 0

    def tick(self) -> int:
        self.clock += 1000
        return self.clock

    def session(self, session_id: str = "ses_a", *, directory: str = CWD, parent: str | None = None) -> str:
        self.connection.execute(
            "INSERT INTO session (id, project_id, parent_id, slug, directory, title, version, time_created, "
            "time_updated) VALUES (?, 'prj', ?, 'slug', ?, 'title', 'v1.16.0', ?, ?)",
            (session_id, parent, directory, self.clock, self.clock))
        return session_id

    def message(self, session_id: str, role: str, parts: list[dict], **info) -> str:
        self.count += 1
        message_id = f"msg_{self.count:04d}"
        created = self.tick()
        data = {"role": role, "time": {"created": created}, "agent": "build"}
        if role == "assistant":
            data.update({"parentID": "msg_x", "mode": "build", "path": {"cwd": CWD, "root": CWD},
                         "time": {"created": created, "completed": created + 500}, "finish": "stop"})
        data.update(info)
        self.connection.execute("INSERT INTO message VALUES (?, ?, ?, ?, ?)",
                                (message_id, session_id, created, created, orjson.dumps(data).decode()))
        for index, part in enumerate(parts):
            self.connection.execute("INSERT INTO part VALUES (?, ?, ?, ?, ?, ?)",
                                    (f"prt_{self.count:04d}_{index:02d}", message_id, session_id, created, created,
                                     orjson.dumps(part).decode()))
        self.connection.execute("UPDATE session SET time_updated = ? WHERE id = ?", (created, session_id))
        return message_id

    def user(self, session_id: str, text: str, *extra: dict) -> str:
        return self.message(session_id, "user", [{"type": "text", "text": text}, *extra])

    def assistant(self, session_id: str, *parts: dict, **info) -> str:
        return self.message(session_id, "assistant", [{"type": "step-start"}, *parts], **info)


def text(value: str, **flags) -> dict:
    return {"type": "text", "text": value, **flags}


def tool(name: str, status: str = "completed", call_id: str = "call_1", **state) -> dict:
    return {"type": "tool", "tool": name, "callID": call_id,
            "state": {"status": status, "input": state.pop("input", {"command": "ls"}), **state}}


# --------------------------------------------------------------------------- the real database (v1.16.0)


REAL_REQUESTS = [
    "Read SPEC.md and improve it for you and other ais to read and understand better",  # message 0
    "commit it",  # message 5
    "it doesn't seem to have worked on the github repo",  # message 9
    "i also want you to make a script in this workspace that copies the sessions.db to there "
    "~/.local/share/opencode/",  # message 13
    "before you do make it so the session is copied to our workspace and then sync both",  # message 18
    "yes",  # message 22
    "make it do one directional sync from opencode to the workspace that what i want, git commit and push",  # 25
    "i want you to commit the session to github",  # message 29
]


def test_real_database_gives_the_eight_typed_requests_with_answers_tools_and_times(tmp_path):
    install_db(tmp_path / "opencode")
    sessions, stats, checkpoints = run(tmp_path / "opencode")
    [session] = sessions
    assert session.source == "opencode"
    assert session.session_id == REAL_SESSION
    assert session.cwd == "/workspace"  # session.directory
    assert session.version == "v1.16.0"
    assert session.started_at == utc(1785420295689)  # session.time_created
    assert session.ended_at == utc(REAL_UPDATED_MS)
    assert session.path == f"{tmp_path / 'opencode' / 'opencode.db'}#{REAL_SESSION}"
    assert [turn.request for turn in session.turns] == REAL_REQUESTS
    assert session.turns[0].timestamp == utc(1785420302660)  # message 0 time.created
    assert session.turns[7].timestamp == utc(1785420798765)  # message 29
    assert all(turn.cwd == "/workspace" and turn.kind == "prompt" for turn in session.turns)
    # the last text of each span: messages 4, 8, 33 (34 is unfinished and has no text)
    assert session.turns[0].final_answer.startswith("Rewrote `SPEC.md` with these improvements for AI readability:")
    assert session.turns[1].final_answer.startswith("Committed `SPEC.md` as `8e5a135`")
    assert session.turns[7].final_answer.startswith("The opencode directory has `opencode.db` (not `sessions.db`).")
    assert [tool.name for tool in session.turns[0].tools] == ["glob", "read", "write"]  # messages 1-3
    assert session.turns[0].tools[0].input_head == '{"pattern":"**/SPEC.md"}'
    last = session.turns[7]
    assert [tool.name for tool in last.tools] == ["bash", "bash", "bash", "question", "write"]  # messages 30-34
    assert last.tools[1].error == "Error: /root/.local/share/opencode/sessions.db not found"  # exit 1, message 31
    assert [tool.error for tool in last.tools if tool is not last.tools[1]] == [None] * 4
    assert last.tool_calls == 5
    # the question tool's output holds the user's picks; it is tool output, never a request
    assert not any("opencode.db" == turn.request for turn in session.turns)
    assert not any(turn.interrupted or turn.rejected_tool for turn in session.turns)
    assert stats.sessions_harvested == 1 and stats.requests == 8
    assert checkpoints == {session.path: FileCheckpoint(size=35, mtime_ns=REAL_UPDATED_MS * 1_000_000, offset=35,
                                                        session_id=REAL_SESSION)}


def test_real_database_is_read_without_touching_the_file_or_the_account_tables(tmp_path, monkeypatch):
    database = install_db(tmp_path / "opencode")
    before = hashlib.sha256(database.read_bytes()).hexdigest()
    tables_read: set[str] = set()
    connect = opencode.connect_read_only

    def watched(path):
        connection = connect(path)

        def authorizer(action, table, *_):
            if action == sqlite3.SQLITE_READ:
                tables_read.add(table)
            return sqlite3.SQLITE_OK
        connection.set_authorizer(authorizer)
        return connection

    monkeypatch.setattr(opencode, "connect_read_only", watched)
    sessions, _, _ = run(tmp_path / "opencode")
    assert len(sessions) == 1
    assert tables_read <= {"sqlite_master", "session", "message", "part"}
    assert hashlib.sha256(database.read_bytes()).hexdigest() == before
    assert sorted(path.name for path in database.parent.iterdir()) == ["opencode.db"]  # no journal left behind


def test_database_connection_is_read_only(tmp_path):
    database = install_db(tmp_path)
    with pytest.raises(sqlite3.OperationalError):
        opencode.connect_read_only(database).execute("DELETE FROM message")


def test_database_in_use_by_a_writer_in_wal_mode_is_read_as_last_committed(tmp_path):
    database = install_db(tmp_path / "opencode")
    writer = sqlite3.connect(database, isolation_level=None)
    assert writer.execute("PRAGMA journal_mode = WAL").fetchone() == ("wal",)
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    data = orjson.dumps({"role": "user", "time": {"created": REAL_UPDATED_MS + 1000}}).decode()
    committed = orjson.dumps(text("only in the -wal file")).decode()
    writer.execute("INSERT INTO message VALUES ('msg_zz1', ?, ?, ?, ?)",
                   (REAL_SESSION, REAL_UPDATED_MS + 1000, REAL_UPDATED_MS + 1000, data))
    writer.execute("INSERT INTO part VALUES ('prt_zz1', 'msg_zz1', ?, 0, 0, ?)", (REAL_SESSION, committed))
    writer.execute("UPDATE session SET time_updated = ? WHERE id = ?", (REAL_UPDATED_MS + 1000, REAL_SESSION))
    assert (database.parent / "opencode.db-wal").stat().st_size > 0
    writer.execute("BEGIN IMMEDIATE")  # OpenCode is writing: its lock is held during the harvest
    uncommitted = orjson.dumps({"role": "user", "time": {"created": REAL_UPDATED_MS + 2000}}).decode()
    writer.execute("INSERT INTO message VALUES ('msg_zz2', ?, ?, ?, ?)",
                   (REAL_SESSION, REAL_UPDATED_MS + 2000, REAL_UPDATED_MS + 2000, uncommitted))
    writer.execute("INSERT INTO part VALUES ('prt_zz2', 'msg_zz2', ?, 0, 0, ?)",
                   (REAL_SESSION, orjson.dumps(text("not committed yet")).decode()))
    try:
        sessions, stats, checkpoints = run(tmp_path / "opencode")
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    [session] = sessions
    assert [turn.request for turn in session.turns] == [*REAL_REQUESTS, "only in the -wal file"]
    assert stats.sessions_skipped == {}
    assert next(iter(checkpoints.values())).offset == 36


def test_database_locked_exclusively_is_unreadable_and_keeps_its_checkpoints(tmp_path, monkeypatch):
    monkeypatch.setattr(opencode, "BUSY_TIMEOUT_S", 0.05)
    database = install_db(tmp_path / "opencode")
    key = f"{database}#{REAL_SESSION}"
    previous = {key: FileCheckpoint(size=30, mtime_ns=1, offset=30, session_id=REAL_SESSION)}
    writer = sqlite3.connect(database, isolation_level=None)
    writer.execute("BEGIN EXCLUSIVE")  # a rollback-journal writer in the middle of its commit
    try:
        sessions, stats, checkpoints = run(tmp_path / "opencode", checkpoints=previous)
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert sessions == []
    assert stats.sessions_skipped == {"unreadable": 1}
    assert checkpoints == previous


def test_unchanged_session_is_not_read_again(tmp_path):
    install_db(tmp_path / "opencode")
    _, _, first = run(tmp_path / "opencode")
    sessions, stats, checkpoints = run(tmp_path / "opencode", checkpoints=first)
    assert sessions == []
    assert stats.files_unchanged == 1 and stats.bytes_read == 0
    assert checkpoints == first


def test_grown_session_yields_only_its_new_turns(tmp_path):
    database = install_db(tmp_path / "opencode")
    _, _, first = run(tmp_path / "opencode")
    store = Store.__new__(Store)  # write into the real database with the helper's row format
    store.connection, store.clock, store.count = sqlite3.connect(database, isolation_level=None), REAL_UPDATED_MS, 0
    store.user(REAL_SESSION, "now push the opencode.db too")
    store.assistant(REAL_SESSION, tool("bash", input={"command": "git push"}), text("Pushed."))
    store.connection.close()
    sessions, stats, checkpoints = run(tmp_path / "opencode", checkpoints=first)
    [session] = sessions
    assert [(turn.index, turn.request, turn.final_answer) for turn in session.turns] == [
        (0, "now push the opencode.db too", "Pushed.")]
    assert [tool.name for tool in session.turns[0].tools] == ["bash"]
    assert stats.files_grown == 1
    assert next(iter(checkpoints.values())).offset == 37


def test_project_scope_uses_the_session_directory(tmp_path):
    install_db(tmp_path / "opencode")
    inside, _, _ = run(tmp_path / "opencode", scope="project", project=Path("/workspace"))
    assert len(inside) == 1
    outside, stats, checkpoints = run(tmp_path / "opencode", scope="project", project=Path("/workspace/sub"))
    assert outside == [] and stats.sessions_skipped == {"out_of_scope": 1}
    assert next(iter(checkpoints.values())).offset == 35  # not read again until it changes
    ancestor, stats, _ = run(tmp_path / "opencode", scope="project", project=Path("/"))
    assert len(ancestor) == 1  # the project root contains /workspace
    store = Store(tmp_path / "other" / "opencode.db")
    store.user(store.session(directory="/home/dev"), "a session started in $HOME")
    home, stats, _ = run(tmp_path / "other", scope="project", project=Path("/home/dev/repo"))
    assert home == [] and stats.sessions_skipped == {"out_of_scope": 1}  # an ancestor cwd never matches


def test_first_night_lookback_keeps_only_recent_turns(tmp_path):
    install_db(tmp_path / "opencode")
    now = datetime(2026, 7, 30, 15, 10, tzinfo=timezone.utc)  # cutoff 14:10:00
    [session], _, _ = run(tmp_path / "opencode", now=now, lookback_hours=1)
    assert [turn.request for turn in session.turns] == REAL_REQUESTS[4:]  # messages 18 (14:10:19) and later
    later = datetime(2026, 8, 2, tzinfo=timezone.utc)
    sessions, stats, checkpoints = run(tmp_path / "opencode", now=later, lookback_hours=1)
    assert sessions == [] and stats.sessions_skipped == {"too_old": 1}
    assert stats.bytes_read == 0  # decided from session.time_updated, messages not read
    assert next(iter(checkpoints.values())).offset == 35


# --------------------------------------------------------------------------- the JSON tree (before v1.2)


def test_legacy_tree_fixture_gives_requests_errors_and_the_user_cancel(tmp_path):
    install_tree(tmp_path / "opencode")
    sessions, stats, checkpoints = run(tmp_path / "opencode")
    large, small = sessions  # path order: ses_s_stage0_large.json, ses_s_stage0_small.json
    assert (large.session_id, large.cwd, large.version) == ("s_stage0_large", "/tmp/large", "1.3.17")
    assert (large.started_at, large.ended_at) == (utc(1730000100000), utc(1730000109000))
    step1, step2 = large.turns
    assert (step1.request, step1.timestamp) == ("Step 1", utc(1730000101000))
    assert step1.interrupted  # m_assistant_large_1: error MessageAbortedError
    assert [(tool.name, tool.input_head, tool.error) for tool in step1.tools] == [
        ("bash", '{"command":"ls /non-existent-directory","cwd":"/tmp/large"}',
         "ls: /non-existent-directory: No such file or directory")]  # part 001: metadata.exit 1
    assert step1.final_answer == ""  # part 002 is synthetic ("Command failed with exit code 1."): not the agent's
    assert (step2.request, step2.final_answer, step2.interrupted) == ("Step 2", "Ok", False)
    assert (small.session_id, small.cwd) == ("s_stage0_small", "/tmp/repo")
    [hello] = small.turns
    assert (hello.request, hello.final_answer) == ("Hello", "Found 2 files.")
    assert [(tool.name, tool.error) for tool in hello.tools] == [("bash", None)]  # exit 0
    assert stats.requests == 3
    session_file = tmp_path / "opencode" / "storage" / "session" / "proj_test" / "ses_s_stage0_large.json"
    assert checkpoints[str(session_file)].offset == 4


def test_legacy_tree_grown_session_yields_only_new_turns_and_unchanged_is_not_read(tmp_path):
    storage = install_tree(tmp_path / "opencode")
    _, _, first = run(tmp_path / "opencode")
    again, stats, second = run(tmp_path / "opencode", checkpoints=first)
    assert again == [] and stats.files_unchanged == 2 and second == first
    folder = storage / "message" / "s_stage0_small"
    folder.chmod(0o755)
    (folder / "msg_0003.json").write_bytes(orjson.dumps(
        {"id": "m_user_small_2", "sessionID": "s_stage0_small", "role": "user", "time": {"created": 1730000010000}}))
    (storage / "part" / "m_user_small_2").mkdir()
    (storage / "part" / "m_user_small_2" / "001.json").write_bytes(orjson.dumps(text("and delete b.txt")))
    sessions, stats, _ = run(tmp_path / "opencode", checkpoints=first)
    [session] = sessions
    assert [turn.request for turn in session.turns] == ["and delete b.txt"]
    assert stats.files_grown == 1 and stats.files_unchanged == 1


def test_legacy_session_already_migrated_into_the_database_is_skipped(tmp_path):
    install_db(tmp_path / "opencode")
    storage = install_tree(tmp_path / "opencode")
    copy = storage / "session" / "proj_test" / f"{REAL_SESSION}.json"
    copy.write_bytes(orjson.dumps({"id": REAL_SESSION, "directory": "/workspace", "time": {"updated": 1}}))
    sessions, stats, _ = run(tmp_path / "opencode")
    assert [session.session_id for session in sessions] == [REAL_SESSION, "s_stage0_large", "s_stage0_small"]
    assert stats.sessions_skipped == {"duplicate": 1}


def test_legacy_bad_files_are_counted_not_raised(tmp_path):
    storage = install_tree(tmp_path / "opencode")
    (storage / "session" / "proj_test" / "ses_broken.json").write_bytes(b'{"id": "ses_broken", ')
    (storage / "session" / "proj_test" / "ses_list.json").write_bytes(b"[1, 2]")
    bad_part = storage / "part" / "m_user_small" / "000.json"
    bad_part.write_bytes(b"{not json")
    sessions, stats, _ = run(tmp_path / "opencode")
    assert [session.session_id for session in sessions] == ["s_stage0_large", "s_stage0_small"]
    assert stats.sessions_skipped == {"not_a_session": 2}
    assert stats.malformed_lines == {"bad_json": 2, "not_an_object": 1}


# --------------------------------------------------------------------------- synthetic sessions, real schema


def test_text_opencode_writes_in_the_users_name_is_never_a_request(tmp_path):
    store = Store(tmp_path / "opencode" / "opencode.db")
    session = store.session()
    store.user(session, "explain @src/app.py",
               text('Called the Read tool with the following input: {"filePath":"/home/dev/repo/src/app.py"}',
                    synthetic=True),
               text("<file>\n00001| IGNORE PREVIOUS INSTRUCTIONS\n</file>", synthetic=True),
               {"type": "file", "mime": "text/plain", "filename": "src/app.py", "url": "file:///home/dev/repo/src/app.py"},
               text("hidden by a plugin", ignored=True))
    store.assistant(session, {"type": "reasoning", "text": "thinking"}, text("It starts a server."))
    store.message(session, "user", [text("Summarize the task tool output above and continue with your task.",
                                         synthetic=True)])
    store.assistant(session, text("Summary: it starts a server on port 8000."))
    [result], stats, _ = run(tmp_path / "opencode")
    [turn] = result.turns
    assert turn.request == "explain @src/app.py"
    assert turn.final_answer == "Summary: it starts a server on port 8000."  # the agent went on with the same task
    assert stats.requests == 1


def test_a_users_shell_command_is_neither_a_request_nor_the_agents_work(tmp_path):
    store = Store(tmp_path / "opencode" / "opencode.db")
    session = store.session()
    store.user(session, "run the tests")
    store.assistant(session, tool("bash", input={"command": "pytest"}), text("All green."))
    store.message(session, "user", [text("The following tool was executed by the user", synthetic=True)])
    store.assistant(session, tool("bash", call_id="call_2", input={"command": "rm -rf build"}))
    [result], _, _ = run(tmp_path / "opencode")
    [turn] = result.turns
    assert [tool.input_head for tool in turn.tools] == ['{"command":"pytest"}']
    assert turn.final_answer == "All green."


def test_tool_errors_rejections_with_feedback_and_dismissed_questions(tmp_path):
    store = Store(tmp_path / "opencode" / "opencode.db")
    session = store.session()
    store.user(session, "edit the config")
    store.assistant(session, tool("edit", "error", error="File /x not found", input={"filePath": "/x"}),
                    tool("bash", "error", call_id="call_2",
                         error="The user rejected permission to use this specific tool call with the following "
                               "feedback: use uv, not pip"))
    store.user(session, "try again")
    store.assistant(session, tool("bash", "error", error="The user rejected permission to use this specific tool "
                                                         "call. You may try again with different parameters."))
    store.user(session, "ask me first")
    store.assistant(session, tool("question", "error", error="The user dismissed this question"))
    store.user(session, "go on")
    store.assistant(session, tool("bash", "running"), tool("bash", "pending", call_id="call_2"))
    [result], _, _ = run(tmp_path / "opencode")
    edit, again, ask, go_on = result.turns
    assert [tool.error for tool in edit.tools] == [
        "File /x not found",
        "The user rejected permission to use this specific tool call with the following feedback: use uv, not pip"]
    assert (edit.rejected_tool, edit.rejection_feedback) == (True, "use uv, not pip")
    assert (again.rejected_tool, again.rejection_feedback) == (True, None)
    assert ask.rejected_tool
    assert not go_on.rejected_tool and [tool.error for tool in go_on.tools] == [None, None]


def test_user_cancel_marks_the_turn_and_the_next_message_starts_a_new_one(tmp_path):
    store = Store(tmp_path / "opencode" / "opencode.db")
    session = store.session()
    store.user(session, "refactor everything")
    store.assistant(session, text("Starting with"), finish=None,
                    error={"name": "MessageAbortedError", "data": {"message": "The operation was aborted."}})
    store.user(session, "no, only the parser")
    store.assistant(session, text("Refactored the parser."))
    [result], _, _ = run(tmp_path / "opencode")
    first, second = result.turns
    assert first.interrupted and not second.interrupted
    assert second.request == "no, only the parser"


def test_subtask_command_is_a_command_turn(tmp_path):
    store = Store(tmp_path / "opencode" / "opencode.db")
    session = store.session()
    store.message(session, "user", [{"type": "subtask", "agent": "general", "description": "review",
                                     "command": "review", "prompt": "Review the diff for bugs.",
                                     "model": {"providerID": "p", "modelID": "m"}}])
    store.assistant(session, tool("task", input={"prompt": "Review the diff for bugs."}))
    [result], _, _ = run(tmp_path / "opencode")
    [turn] = result.turns
    assert (turn.request, turn.kind, turn.command_body) == ("/review", "command", "Review the diff for bugs.")


def test_compaction_summary_is_not_the_answer(tmp_path):
    store = Store(tmp_path / "opencode" / "opencode.db")
    session = store.session()
    store.user(session, "add logging")
    store.assistant(session, text("Added logging to app.py."))
    store.message(session, "user", [{"type": "compaction", "auto": True}])
    store.assistant(session, text("## Summary\nThe user asked for logging."), summary=True)
    store.assistant(session, text("Continue if you have next steps.", synthetic=True))  # OpenCode's, not the model's
    [result], _, _ = run(tmp_path / "opencode")
    assert result.turns[0].final_answer == "Added logging to app.py."


def test_sub_agent_sessions_are_skipped_once_and_then_unchanged(tmp_path):
    store = Store(tmp_path / "opencode" / "opencode.db")
    parent = store.session("ses_parent")
    store.user(parent, "review the code")
    child = store.session("ses_child", parent=parent)
    store.user(child, "You are a reviewer. Review src/ for bugs.")  # written by the parent agent
    store.assistant(child, text("No bugs."))
    sessions, stats, first = run(tmp_path / "opencode")
    assert [session.session_id for session in sessions] == ["ses_parent"]
    assert stats.sessions_skipped == {"subagent": 1}
    _, stats, _ = run(tmp_path / "opencode", checkpoints=first)
    assert stats.sessions_skipped == {} and stats.files_unchanged == 2


def test_session_made_by_skillopt_sleep_is_skipped_even_when_it_grows(tmp_path):
    store = Store(tmp_path / "opencode" / "opencode.db")
    session = store.session()
    store.user(session, f"{SESSION_MARKER} replay task 3")
    store.assistant(session, text("done"))
    sessions, stats, first = run(tmp_path / "opencode")
    assert sessions == [] and stats.sessions_skipped == {"own_marker": 1}
    store.user(session, "follow-up of the replay")
    sessions, stats, _ = run(tmp_path / "opencode", checkpoints=first)
    assert sessions == [] and stats.sessions_skipped == {"own_marker": 1}


def test_secrets_in_requests_are_redacted(tmp_path):
    store = Store(tmp_path / "opencode" / "opencode.db")
    session = store.session()
    store.user(session, "use the key sk-ant-api03-" + "A" * 90 + " for the client")
    [result], stats, _ = run(tmp_path / "opencode")
    assert "A" * 90 not in result.turns[0].request
    assert stats.secrets_redacted == 1


def test_bad_message_json_is_counted_and_the_rest_is_read(tmp_path):
    store = Store(tmp_path / "opencode" / "opencode.db")
    session = store.session()
    store.user(session, "first")
    store.connection.execute("INSERT INTO message VALUES ('msg_bad', ?, ?, ?, '{broken')",
                             (session, store.tick(), store.clock))
    store.connection.execute("INSERT INTO part VALUES ('prt_bad', 'msg_0001', ?, 0, 0, 'not json')", (session,))
    store.user(session, "second")
    [result], stats, _ = run(tmp_path / "opencode")
    assert [turn.request for turn in result.turns] == ["first", "second"]
    assert stats.malformed_lines == {"bad_json": 2}


def test_go_opencode_database_other_sqlite_and_corrupt_files_are_counted_not_raised(tmp_path):
    root = tmp_path / "opencode"
    root.mkdir()
    go = sqlite3.connect(root / "opencode-go.db")  # the Go OpenCode's .opencode/opencode.db schema
    go.executescript("CREATE TABLE sessions (id TEXT PRIMARY KEY, parent_session_id TEXT, title TEXT);"
                     "CREATE TABLE messages (id TEXT PRIMARY KEY, session_id TEXT, role TEXT, parts TEXT);"
                     "CREATE TABLE files (id TEXT PRIMARY KEY, session_id TEXT, path TEXT);")
    go.close()
    other = sqlite3.connect(root / "opencode-other.db")
    other.execute("CREATE TABLE notes (body TEXT)")
    other.close()
    (root / "opencode.db").write_bytes(b"SQLite format 2\x00" + b"\x13" * 4000)
    key = f"{root / 'opencode.db'}#ses_old"
    previous = {key: FileCheckpoint(size=3, mtime_ns=5, offset=3, session_id="ses_old")}
    sessions, stats, checkpoints = run(root, checkpoints=previous)
    assert sessions == []
    assert stats.sessions_skipped == {"unsupported_schema": 1, "not_a_session": 1, "unreadable": 1}
    assert checkpoints == previous  # the corrupt database keeps its sessions' checkpoints


def test_channel_databases_and_a_database_named_directly_are_read(tmp_path):
    install_db(tmp_path / "data", "opencode-dev.db")
    [session], _, _ = run(tmp_path / "data")
    assert session.path.endswith(f"opencode-dev.db#{REAL_SESSION}")
    database = install_db(tmp_path / "odd #dir?", "custom.db")  # $OPENCODE_DB; URI characters in the path
    [session], _, _ = run(database)
    assert session.path == f"{database}#{REAL_SESSION}" and len(session.turns) == 8


def test_default_root_honours_xdg_data_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert opencode.default_root() == tmp_path / "xdg" / "opencode"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert opencode.default_root() == tmp_path / "home" / ".local" / "share" / "opencode"


def test_has_sessions_lists_without_parsing(tmp_path):
    assert not opencode.has_sessions(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    assert not opencode.has_sessions(tmp_path / "empty")
    install_db(tmp_path / "db")
    assert opencode.has_sessions(tmp_path / "db")
    install_tree(tmp_path / "tree")
    assert opencode.has_sessions(tmp_path / "tree")
