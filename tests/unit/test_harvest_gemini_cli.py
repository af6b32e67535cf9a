"""Gemini CLI harvester: the two real recordings (legacy ``.json`` 2026-03, current ``.jsonl`` 2026-04) laid out
as ``~/.gemini/tmp/<sha256(project root)>/chats/``, plus synthetic recordings in the same shapes for the rules the
fixtures do not show.

Read off the fixtures. ``…@dc22676.jsonl``: line 1 metadata (session 0ab84937…, projectHash = sha256 of
``/home/wei/repo/discordbot``, the root named by the write_file output on line 14); line 4 the ``/init`` request
(``displayContent`` "/init", ``content`` its expansion); lines 6/8, 9/11, 12/14, 15/17 the same ``gemini`` ids
written twice, the second copy with ``toolCalls``; line 18 "System: Please continue." written by the tool; line 20
the last answer of the first request; line 22 the human follow-up; line 26 its tools; line 27 "Request cancelled.".
11 distinct message ids. ``…@894772f.json``: one request (messages[0]), read_file x3 then write_file x4, answer
in messages[3], projectHash = sha256 of ``/home/wei/repo/VibeCodingTracker``.

Where FORMATS.md and the files disagree, the files win: ``gemini`` messages that only call tools have ``content:
""`` (a string, while user content is a parts list); the legacy ``.json`` also carries ``kind`` (written last);
``$set`` lines in the real file only carry ``lastUpdated``; and the ``.json`` did not need a ``.jsonl`` to be
current in March 2026 (FORMATS §3 calls it legacy).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path

import orjson
from source_run import run_source

from skillopt_sleep.harvest import gemini_cli
from skillopt_sleep.harvest.gemini_cli import UNCOUNTED, default_root, harvest_gemini, has_sessions
from skillopt_sleep.prompts.marker import SESSION_MARKER

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts" / "gemini_cli"
CURRENT = "Mai0313__VibeCodingTracker__test_conversation_gemini@dc22676.jsonl"
LEGACY = "Mai0313__VibeCodingTracker__test_conversation_gemini@894772f.json"
DISCORDBOT = "/home/wei/repo/discordbot"
TRACKER = "/home/wei/repo/VibeCodingTracker"

PROJECT = "/home/dev/app"
SESSION = "5b1c2d3e-0000-4000-8000-000000000001"
NAME = "session-2026-05-01T10-00-5b1c2d3e.jsonl"


def digest(path: str) -> str:
    return hashlib.sha256(path.encode()).hexdigest()


def chats(root: Path, folder: str = digest(PROJECT), area: str = "tmp") -> Path:
    target = root / area / folder / "chats"
    target.mkdir(parents=True, exist_ok=True)
    return target


def install(root: Path, fixture: str, project: str, name: str) -> Path:
    target = chats(root, digest(project)) / name
    shutil.copyfile(FIXTURES / fixture, target)
    return target


def stamp(second: int) -> str:
    return (datetime(2026, 5, 1, 10, 0) + timedelta(seconds=second)).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def meta(**fields) -> dict:
    record = {"sessionId": SESSION, "projectHash": digest(PROJECT), "startTime": stamp(0), "lastUpdated": stamp(0),
              "kind": "main"}
    record.update(fields)
    return record


def user(message_id: str, text, second: int = 1, display=None) -> dict:
    record = {"id": message_id, "timestamp": stamp(second), "type": "user",
              "content": [{"text": text}] if isinstance(text, str) else text}
    if display is not None:
        record["displayContent"] = [{"text": display}] if isinstance(display, str) else display
    return record


def gemini(message_id: str, text: str = "", second: int = 2, calls: list[dict] | None = None) -> dict:
    record = {"id": message_id, "timestamp": stamp(second), "type": "gemini", "content": text, "thoughts": [],
              "model": "gemini-2.5-pro"}
    if calls is not None:
        record["toolCalls"] = calls
    return record


def call(call_id: str, name: str, args: dict, status: str = "success", output: str = "ok",
         error: str | None = None) -> dict:
    response = {"error": error} if error is not None else {"output": output}
    return {"id": call_id, "name": name, "args": args, "status": status, "timestamp": stamp(3),
            "result": [{"functionResponse": {"id": call_id, "name": name, "response": response}}]}


def info(message_id: str, text: str, second: int = 4) -> dict:
    return {"id": message_id, "timestamp": stamp(second), "type": "info", "content": text}


def write(path: Path, records: list[dict], mode: str = "wb") -> Path:
    with open(path, mode) as handle:
        handle.write(b"".join(orjson.dumps(record) + b"\n" for record in records))
    return path


def run(root: Path, **options):
    """Harvest ``root`` (scope ``PROJECT`` unless given); returns (sessions, stats, new checkpoints)."""
    return run_source(harvest_gemini, root, **{"scope": "project", "project": PROJECT, **options})


def requests(sessions) -> list[str]:
    return [turn.request for session in sessions for turn in session.turns]


# --------------------------------------------------------------------------- real fixtures


def test_current_jsonl_yields_the_init_command_and_the_cancelled_follow_up(tmp_path):
    path = install(tmp_path, CURRENT, DISCORDBOT, "session-2026-04-23T12-52-0ab84937.jsonl")
    [session], stats, checkpoints = run(tmp_path, project=DISCORDBOT)
    assert session.source == "gemini" and session.session_id == "0ab84937-9fe7-4284-986a-33c832af0b6a"
    assert session.cwd == DISCORDBOT  # mapped back from the folder's sha256 name
    assert session.started_at.isoformat() == "2026-04-23T12:52:52.759000+00:00"  # line 1
    assert session.ended_at.isoformat() == "2026-04-23T12:58:35.591000+00:00"  # last $set, line 28
    first, second = session.turns
    assert (first.request, first.kind) == ("/init", "command")  # line 4 displayContent
    assert first.command_body.startswith("You are an AI agent that brings the power of Gemini directly")
    assert first.timestamp.isoformat() == "2026-04-23T12:53:05.283000+00:00"
    # lines 8, 11, 14, 17: the copies with toolCalls (the copies without them on lines 6, 9, 12, 15 add nothing)
    assert [tool.name for tool in first.tools] == (["update_topic"] + ["read_file"] * 7 + ["write_file",
                                                                                         "update_topic"])
    assert first.tool_calls == 10 and first.tools[1].input_head == '{"file_path":"README.md"}'
    assert first.final_answer.startswith("我已經完成了 `GEMINI.md` 的撰寫")  # line 20, after the tool's line 18
    assert not first.interrupted and first.tool_errors == 0
    assert second.request == "幫我做一個小修改 請幫我將上面確保執行時要透過 uv run 來執行 避免環境有問題"  # line 22
    assert [tool.name for tool in second.tools] == ["update_topic", "replace"]  # line 26
    assert second.interrupted and second.final_answer == ""  # line 27 "Request cancelled."
    assert "System: Please continue." not in requests([session])
    assert stats.requests == 2 and stats.malformed_lines == {}
    assert checkpoints[str(path)].offset == 11  # distinct message ids


def test_legacy_json_yields_its_one_request_with_tools_and_answer(tmp_path):
    path = install(tmp_path, LEGACY, TRACKER, "session-2026-03-27T10-19-8a20078e.json")
    [session], _, checkpoints = run(tmp_path, project=TRACKER)
    data = json.loads(path.read_text())
    assert (session.session_id, session.cwd) == ("8a20078e-2d5e-4f81-a640-9b879bbb7e6d", TRACKER)
    assert session.ended_at.isoformat() == "2026-03-27T10:22:00.022000+00:00"
    [turn] = session.turns
    assert turn.request == data["messages"][0]["content"][0]["text"].strip()
    assert turn.request.startswith("請幫我依照專案實際狀況更新 README.md")
    assert [tool.name for tool in turn.tools] == ["read_file"] * 3 + ["write_file"] * 4
    assert turn.final_answer.startswith("已經幫你整理好囉！")
    assert checkpoints[str(path)].offset == 4


def test_project_scope_maps_hashed_folders_and_does_not_open_other_projects(tmp_path):
    install(tmp_path, CURRENT, DISCORDBOT, "session-2026-04-23T12-52-0ab84937.jsonl")
    legacy = install(tmp_path, LEGACY, TRACKER, "session-2026-03-27T10-19-8a20078e.json")
    sessions, stats, checkpoints = run(tmp_path, project=DISCORDBOT)
    assert [session.session_id[:8] for session in sessions] == ["0ab84937"]
    assert stats.sessions_skipped == {"out_of_scope": 1}
    assert stats.bytes_read == (FIXTURES / CURRENT).stat().st_size  # the other project's file was not read
    assert checkpoints[str(legacy)].offset == UNCOUNTED
    everything, _, _ = run(tmp_path, scope="all", project=None)
    assert len(everything) == 2 and {session.cwd for session in everything} == {None}


# --------------------------------------------------------------------------- what is a request


def test_injected_context_tool_responses_and_continuations_are_not_requests(tmp_path):
    response = [{"functionResponse": {"id": "c1", "name": "read_file", "response": {"output": "file text"}}}]
    write(chats(tmp_path) / NAME, [
        meta(),
        user("u0", "<session_context>\nThis is the Gemini CLI. We are setting up the context for our chat.\n"
                   "</session_context>", 1),
        user("u1", "add a health check endpoint", 2),
        gemini("g1", "", 3, [call("c1", "read_file", {"file_path": "app.py"})]),
        user("u2", response, 4),  # the tool response, recorded as a user message by newer builds
        user("u3", "Please continue.", 5, display="add a health check endpoint"),  # next-speaker continuation
        user("u4", "System: Please continue.", 6, display=response),
        user("u5", "<state_snapshot>\n<overall_goal>health check</overall_goal>\n</state_snapshot>", 7),
        user("u6", "<hook_context>branch main</hook_context>", 8),
        user("u7", "Here is the user's editor context as a JSON object. This is for your information only.", 9),
        user("u8", "I ran the following shell command:\n```sh\nls\n```", 10),
        gemini("g2", "Added /health.", 11),
    ])
    [session], _, _ = run(tmp_path)
    [turn] = session.turns
    assert turn.request == "add a health check endpoint"
    assert turn.final_answer == "Added /health." and [tool.name for tool in turn.tools] == ["read_file"]


def test_typed_text_wins_over_expanded_file_references_and_commands_keep_their_body(tmp_path):
    expanded = ("explain @src/app.py\n--- Content from referenced files ---\nContent from @src/app.py:\n"
                "API_TOKEN = load()\n--- End of content ---")
    write(chats(tmp_path) / NAME, [
        meta(),
        user("u1", expanded, 1, display="explain @src/app.py"),
        user("u2", "Review the staged diff for bugs.", 2, display="/review staged"),
        user("u3", "summarize @notes.md\n--- Content from referenced files ---\nsecret notes", 3),
        user("u4", "/home/dev/app is where the code lives", 4),
    ])
    [session], _, _ = run(tmp_path)
    first, second, third, fourth = session.turns
    assert (first.request, first.kind, first.command_body) == ("explain @src/app.py", "prompt", None)
    assert (second.request, second.kind) == ("/review staged", "command")
    assert second.command_body == "Review the staged diff for bugs."
    assert third.request == "summarize @notes.md"  # builds without displayContent: the files are cut away
    assert (fourth.kind, fourth.request) == ("prompt", "/home/dev/app is where the code lives")


def test_a_steering_hint_is_a_queued_message_of_the_open_turn(tmp_path):
    hint = ("User steering update:\n<user_input>\nuse pytest, not unittest\n</user_input>\n"
            "Internal instruction: Re-evaluate the active plan using this user steering update.")
    response = {"functionResponse": {"id": "c1", "name": "run_shell_command", "response": {"output": "ok"}}}
    write(chats(tmp_path) / NAME, [
        meta(), user("u1", "write tests for utils", 1),
        gemini("g1", "", 2, [call("c1", "run_shell_command", {"command": "ls"})]),
        user("u2", [{"text": hint}, response], 3), gemini("g2", "Switched to pytest.", 4),
    ])
    [session], _, _ = run(tmp_path)
    [turn] = session.turns
    assert turn.queued_messages == ["use pytest, not unittest"] and turn.final_answer == "Switched to pytest."


def test_thoughts_are_not_the_answer(tmp_path):
    write(chats(tmp_path) / NAME, [
        meta(), user("u1", "why is CI red", 1),
        {**gemini("g1", "", 2), "content": [{"text": "Thinking about CI", "thought": True},
                                            {"text": "The lint step fails."}]},
    ])
    [session], _, _ = run(tmp_path)
    assert session.turns[0].final_answer == "The lint step fails."


def test_session_with_our_own_replay_marker_is_skipped(tmp_path):
    write(chats(tmp_path) / NAME, [meta(), user("u1", f"{SESSION_MARKER} fix the bug", 1), gemini("g1", "done")])
    sessions, stats, _ = run(tmp_path)
    assert sessions == [] and stats.sessions_skipped == {"own_marker": 1}


def test_secrets_in_requests_are_redacted(tmp_path):
    key = "sk-ant-api03-" + "A" * 40
    write(chats(tmp_path) / NAME, [meta(), user("u1", f"use the key {key} to call the API", 1)])
    [session], stats, _ = run(tmp_path)
    assert key not in session.turns[0].request and "[REDACTED:" in session.turns[0].request
    assert stats.secrets_redacted == 1


# --------------------------------------------------------------------------- what followed a request


def test_tool_errors_rejections_and_cancels_attach_to_the_open_turn(tmp_path):
    write(chats(tmp_path) / NAME, [
        meta(), user("u1", "run the tests", 1),
        gemini("g1", "", 2, [
            call("c1", "run_shell_command", {"command": "pytest"}, status="error", error="Command failed: pytest"),
            call("c2", "run_shell_command", {"command": "make"},
                 output="Command: make\nStdout: boom\nExit Code: 2"),
            call("c3", "run_shell_command", {"command": "ls"}, output="Output: a b\nExit Code: 0"),
        ]),
        user("u2", "now format the code", 3),
        gemini("g2", "", 4, [call("c4", "write_file", {"file_path": "a.py"}, status="cancelled",
                                  error="[Operation Cancelled] Reason: User denied execution.")]),
        user("u3", "deploy it", 5),
        gemini("g3", "", 6, [call("c5", "run_shell_command", {"command": "deploy"}, status="cancelled",
                                  error="[Operation Cancelled] Reason: Operation cancelled")]),
    ])
    [session], _, _ = run(tmp_path)
    tests, fmt, deploy = session.turns
    assert [tool.error for tool in tests.tools] == [
        "Command failed: pytest", "Command: make\nStdout: boom\nExit Code: 2", None]
    assert not tests.rejected_tool and not tests.interrupted
    assert fmt.rejected_tool and not fmt.interrupted and "User denied execution" in fmt.tools[0].error
    assert deploy.interrupted and not deploy.rejected_tool


def test_a_rejection_in_older_wording_is_a_rejected_tool(tmp_path):
    write(chats(tmp_path) / NAME, [
        meta(), user("u1", "delete the cache", 1),
        gemini("g1", "", 2, [call("c1", "run_shell_command", {"command": "rm -rf .cache"}, status="cancelled",
                                  error="[Operation Cancelled] Reason: User did not allow tool call")]),
    ])
    [session], _, _ = run(tmp_path)
    assert session.turns[0].rejected_tool


# --------------------------------------------------------------------------- sub-agents, scope, layout


def test_sub_agent_recordings_are_skipped(tmp_path):
    folder = chats(tmp_path)
    write(folder / "session-2026-05-01T10-00-77777777.jsonl",
          [meta(sessionId="77777777-0000", kind="subagent"), user("u1", "investigate the codebase", 1)])
    (folder / SESSION).mkdir()
    write(folder / SESSION / "a1b2c3d4.jsonl", [meta(sessionId="a1b2c3d4", kind="subagent"),
                                                user("u1", "find the config loader", 1)])
    sessions, stats, checkpoints = run(tmp_path)
    assert sessions == [] and stats.sessions_skipped == {"subagent": 2}
    _, again, _ = run(tmp_path, checkpoints=checkpoints)
    assert again.files_unchanged == 2 and again.sessions_skipped == {}


def test_slug_folders_are_mapped_by_their_project_root_marker_or_the_registry(tmp_path):
    below = chats(tmp_path, "app")  # a session started in a subdirectory of the project
    (below.parent / ".project_root").write_text(PROJECT + "/api\n")
    write(below / NAME, [meta(projectHash=digest(PROJECT + "/api")), user("u1", "fix the api", 1)])
    other = chats(tmp_path, "blog")
    (other.parent / ".project_root").write_text("/home/dev/blog")
    write(other / NAME, [meta(projectHash=digest("/home/dev/blog")), user("u1", "new post", 1)])
    listed = chats(tmp_path, "app-1")
    (tmp_path / "projects.json").write_text(json.dumps({"projects": {PROJECT: "app-1"}}))
    write(listed / NAME, [meta(sessionId="s2"), user("u1", "add logging", 1)])
    sessions, stats, _ = run(tmp_path)
    assert sorted((session.cwd, session.turns[0].request) for session in sessions) == [
        (PROJECT, "add logging"), (PROJECT + "/api", "fix the api")]
    assert stats.sessions_skipped == {"out_of_scope": 1}


def test_an_unmapped_slug_folder_is_scoped_by_the_recorded_project_hash(tmp_path):
    write(chats(tmp_path, "app") / NAME, [meta(), user("u1", "bump the version", 1)])
    write(chats(tmp_path, "misc") / NAME, [meta(projectHash=digest("/elsewhere")), user("u1", "hello", 1)])
    sessions, stats, _ = run(tmp_path)
    assert [(session.cwd, session.turns[0].request) for session in sessions] == [(PROJECT, "bump the version")]
    assert stats.sessions_skipped == {"out_of_scope": 1}
    assert len(run(tmp_path, scope="all", project=None)[0]) == 2


def test_the_data_area_is_read_and_non_session_files_are_not(tmp_path):
    folder = chats(tmp_path, area="data")
    write(folder / NAME, [meta(), user("u1", "add a README", 1)])
    (folder.parent / "logs.json").write_text(json.dumps([{"sessionId": SESSION, "type": "user",
                                                          "message": "add a README"}]))
    (folder.parent / "checkpoint-mytag.json").write_text(json.dumps([{"role": "user", "parts": [{"text": "x"}]}]))
    (folder / "notes.txt").write_text("not a session")
    sessions, stats, _ = run(tmp_path)
    assert requests(sessions) == ["add a README"] and stats.files_scanned == 1


def test_a_resumed_json_is_read_from_its_jsonl_twin_only(tmp_path):
    folder = chats(tmp_path)
    legacy = folder / NAME[:-1]
    records = [user("u1", "first task", 1), gemini("g1", "done", 2)]
    legacy.write_text(json.dumps({**meta(), "messages": records}, indent=2))
    _, _, first_night = run(tmp_path)
    write(folder / NAME, [meta(), *records, {"$set": {"sessionId": SESSION}},
                          user("u2", "second task", 3), gemini("g2", "done too", 4)])
    sessions, stats, checkpoints = run(tmp_path, checkpoints=first_night)
    assert requests(sessions) == ["second task"]  # the .json's count carries over to the .jsonl
    assert stats.files_scanned == 1 and str(legacy) not in checkpoints
    assert requests(run(tmp_path)[0]) == ["first task", "second task"]


def test_default_root_honours_gemini_cli_home(tmp_path, monkeypatch):
    monkeypatch.delenv("GEMINI_CLI_HOME", raising=False)
    assert default_root() == Path.home().absolute() / ".gemini"
    monkeypatch.setenv("GEMINI_CLI_HOME", str(tmp_path / "profile"))
    assert default_root() == tmp_path / "profile" / ".gemini"


def test_has_sessions_lists_without_parsing(tmp_path):
    assert not has_sessions(tmp_path)
    (chats(tmp_path) / "session-2026-05-01T10-00-5b1c2d3e.json").write_text("not even json")
    assert has_sessions(tmp_path)
    assert not has_sessions(tmp_path / "missing")


# --------------------------------------------------------------------------- lookback and checkpoints


def test_first_night_lookback_drops_old_turns_and_does_not_open_old_files(tmp_path):
    now = datetime(2026, 5, 1, 12, 0, tzinfo=timezone.utc)
    # the cutoff is 2026-04-30T12:00Z: the first request is older, the second newer
    recent = write(chats(tmp_path) / NAME, [
        meta(startTime="2026-04-30T09:00:00.000Z"),
        {**user("u1", "yesterday's task", 1), "timestamp": "2026-04-30T09:00:00.000Z"},
        {**gemini("g1", "ok", 2), "timestamp": "2026-04-30T09:00:05.000Z"},
        {**user("u2", "today's task", 3), "timestamp": "2026-05-01T11:30:00.000Z"},
    ])
    os.utime(recent, (now.timestamp(),) * 2)  # independent of the machine's clock
    old = write(chats(tmp_path) / "session-2026-04-01T10-00-0a0a0a0a.jsonl",
                [meta(sessionId="old", startTime="2026-04-01T10:00:00.000Z"),
                 {**user("u1", "last month's task", 1), "timestamp": "2026-04-01T10:00:00.000Z"}])
    os.utime(old, (now.timestamp() - 30 * 86400,) * 2)  # 2026-04-01T12:00Z, after its last request
    sessions, stats, checkpoints = run(tmp_path, lookback_hours=24, now=now)
    assert requests(sessions) == ["today's task"]
    assert stats.sessions_skipped == {"too_old": 1} and stats.bytes_read == recent.stat().st_size
    assert checkpoints[str(old)].offset == UNCOUNTED
    # the old file grows later: only the turn asked after its checkpointed mtime is new
    write(old, [{**user("u2", "a new task in the old session", 2), "timestamp": "2026-05-02T09:00:00.000Z"}],
          mode="ab")
    sessions, _, _ = run(tmp_path, checkpoints=checkpoints, now=now + timedelta(days=1))
    assert requests(sessions) == ["a new task in the old session"]


def test_a_grown_file_yields_only_its_new_turns_and_an_unchanged_file_is_not_read(tmp_path):
    path = write(chats(tmp_path) / NAME, [meta(), user("u1", "first", 1), gemini("g1", "one", 2)])
    _, _, checkpoints = run(tmp_path)
    assert checkpoints[str(path)].offset == 2
    write(path, [{"$set": {"lastUpdated": stamp(3)}}, user("u2", "second", 4), gemini("g2", "two", 5)], mode="ab")
    sessions, stats, checkpoints = run(tmp_path, checkpoints=checkpoints)
    assert requests(sessions) == ["second"] and sessions[0].turns[0].final_answer == "two"
    assert stats.files_grown == 1 and checkpoints[str(path)].offset == 4
    sessions, stats, again = run(tmp_path, checkpoints=checkpoints)
    assert sessions == [] and stats.files_unchanged == 1 and stats.bytes_read == 0
    assert again == checkpoints


def test_a_new_rewind_below_the_checkpoint_yields_the_re_asked_request(tmp_path):
    path = write(chats(tmp_path) / NAME, [
        meta(), user("u1", "first", 1), gemini("g1", "one", 2), user("u2", "second", 3), gemini("g2", "two", 4),
        user("u3", "third", 5), gemini("g3", "three", 6),
    ])
    _, _, checkpoints = run(tmp_path)
    assert checkpoints[str(path)].offset == 6
    write(path, [{"$rewindTo": "u2"}, user("u4", "second, but in Rust", 7), gemini("g4", "rewritten", 8)], mode="ab")
    sessions, _, checkpoints = run(tmp_path, checkpoints=checkpoints)
    assert requests(sessions) == ["second, but in Rust"] and checkpoints[str(path)].offset == 4
    # an old rewind does not lower the count again; a request appended after it is new
    write(path, [user("u5", "fourth", 9)], mode="ab")
    assert requests(run(tmp_path, checkpoints=checkpoints)[0]) == ["fourth"]


def test_a_rewind_truncates_the_conversation_it_is_read_with(tmp_path):
    write(chats(tmp_path) / NAME, [
        meta(), user("u1", "first", 1), gemini("g1", "one", 2), user("u2", "typo'd request", 3),
        gemini("g2", "two", 4), {"$rewindTo": "u2"}, user("u3", "fixed request", 5), gemini("g3", "three", 6),
    ])
    [session], _, _ = run(tmp_path)
    assert [(turn.request, turn.final_answer) for turn in session.turns] == [
        ("first", "one"), ("fixed request", "three")]


def test_whole_history_set_snapshots_neither_add_nor_remove_requests(tmp_path):
    snapshot = {"$set": {"messages": [user("env", "<session_context>...</session_context>", 0),
                                      user("x9", "a synthetic turn", 0)], "lastUpdated": stamp(6)}}
    write(chats(tmp_path) / NAME, [
        meta(), user("u1", "refactor the parser", 1), gemini("g1", "", 2), info("i1", "Request cancelled.", 3),
        snapshot,  # the rollback after the cancel rewrites the history without u1
    ])
    [session], _, _ = run(tmp_path)
    [turn] = session.turns
    assert turn.request == "refactor the parser" and turn.interrupted
    assert session.ended_at.isoformat() == "2026-05-01T10:00:06+00:00"


def test_a_rewritten_legacy_json_yields_only_the_messages_after_the_stored_count(tmp_path):
    path = chats(tmp_path) / NAME[:-1]
    records = [user("u1", "first", 1), gemini("g1", "one", 2)]
    path.write_text(json.dumps({**meta(), "messages": records}, indent=2))
    _, _, checkpoints = run(tmp_path)
    records += [user("u2", "second", 3), gemini("g2", "two", 4)]
    path.write_text(json.dumps({**meta(), "messages": records}, indent=2))
    sessions, _, checkpoints = run(tmp_path, checkpoints=checkpoints)
    assert requests(sessions) == ["second"] and checkpoints[str(path)].offset == 4


# --------------------------------------------------------------------------- malformed input


def test_bad_lines_are_counted_and_the_rest_is_read(tmp_path):
    path = write(chats(tmp_path) / NAME, [meta(), user("u1", "first", 1)])
    with open(path, "ab") as handle:
        handle.write(b'{"id": "g1", "type": "gemini", "conte\n[1, 2]\n')
    write(path, [user("u2", "second", 3)], mode="ab")
    with open(path, "ab") as handle:
        handle.write(b'{"id": "u3", "type": "us')  # a last line still being written
    [session], stats, _ = run(tmp_path)
    assert [turn.request for turn in session.turns] == ["first", "second"]
    assert stats.malformed_lines == {"bad_json": 1, "not_an_object": 1, "truncated_last_line": 1}


def test_broken_legacy_json_is_counted_and_keeps_no_checkpoint(tmp_path):
    path = chats(tmp_path) / NAME[:-1]
    path.write_text('{"sessionId": "x", "messages": [{"id": "u1", "type": "us')
    sessions, stats, checkpoints = run(tmp_path)
    assert sessions == [] and stats.malformed_lines == {"bad_json": 1} and str(path) not in checkpoints


def test_files_that_are_not_sessions_are_skipped(tmp_path):
    folder = chats(tmp_path)
    write(folder / NAME, [{"hello": "world"}])
    (folder / "session-2026-05-01T10-00-0b0b0b0b.json").write_text(json.dumps(["not", "an", "object"]))
    sessions, stats, _ = run(tmp_path, scope="all", project=None)
    assert sessions == [] and stats.sessions_skipped == {"not_a_session": 2} and stats.records_unknown == 1


def test_an_unreadable_file_is_counted_and_keeps_its_previous_checkpoint(tmp_path, monkeypatch):
    path = write(chats(tmp_path) / NAME, [meta(), user("u1", "first", 1)])
    _, _, checkpoints = run(tmp_path)
    write(path, [user("u2", "second", 2)], mode="ab")

    def denied(target):
        raise PermissionError(13, "Permission denied", str(target))

    monkeypatch.setattr(gemini_cli, "open_binary", denied)  # as a chmod 000 file would (tests may run as root)
    sessions, stats, after = run(tmp_path, checkpoints=checkpoints)
    assert sessions == [] and stats.sessions_skipped == {"unreadable": 1}
    assert after[str(path)] == checkpoints[str(path)]
