"""Copilot CLI harvester: the real 1.0.34 event log, the schema fixture of 1.0.77 shapes and the real legacy
``history-session-state`` JSON, laid out as under ``~/.copilot``, plus synthetic logs in the same shapes for the
rules the fixtures do not show.

Read off the fixtures. ``…@dc22676.jsonl`` (real, 51 lines): line 1 ``session.start`` (session 96ef38f0…,
copilotVersion 1.0.34, startTime 17:08:08.893Z, cwd /home/wei/repo/VibeCodingTracker); lines 6 and 43 the system
prompt ("You are an interactive CLI tool"); line 7 the only typed request (its ``transformedContent`` adds a
``<current_datetime>`` block); lines 9-48 eleven tool calls; line 41 the assistant's report; line 44 the autopilot
nudge written by the tool (``content: ""``, only ``transformedContent``); line 49 ``session.task_complete``; line 51
``session.shutdown`` at 17:18:20.178Z. ``…stage0-copilot-small.SCHEMA-FIXTURE.jsonl`` (32 lines): line 7 "List the
files", lines 9-11 a ``shell`` call, lines 19-21 a sub-agent's events (``parentToolCallId``), line 25 a tool request
whose failure is line 26, line 27 ``abort``, line 30 a second ``user.message`` whose values are trimmed.
``…@bcec23f.json`` (real legacy): timeline[2] the request, 15 ``tool_call_completed`` entries, timeline[22] the
last ``copilot`` text.

Where FORMATS.md §3/§3.1 and the files disagree, the files win: ``session.start.version`` is the number 1 (the
build is ``copilotVersion``); ``assistant.message`` that only calls tools has ``content: ""``; tool ``arguments``
are an object in ``tool.execution_start`` but may be a JSON *string* in ``toolRequests`` (schema fixture line 9);
the legacy JSON's ``chatMessages`` is empty in the real file and the timeline carries everything; the legacy file
records no working directory (so it can only be harvested with scope ``all``).
"""

from __future__ import annotations

import os
import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path

import orjson
import pytest
from source_run import run_source

from skillopt_sleep.harvest import copilot_cli
from skillopt_sleep.harvest import reader as harvest_reader
from skillopt_sleep.harvest.copilot_cli import (
    default_root,
    harvest_copilot,
    has_sessions,
)
from skillopt_sleep.prompts.marker import SESSION_MARKER

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts" / "copilot_cli"
REAL = "Mai0313__VibeCodingTracker__test_conversation_copilot@dc22676.jsonl"
SCHEMA = "jazzyalex__agent-sessions__stage0-copilot-small.SCHEMA-FIXTURE.jsonl"
LEGACY = "Mai0313__VibeCodingTracker__test_conversation_copilot@bcec23f.json"
REAL_ID = "96ef38f0-9d09-45c3-8124-6448c36090ed"
LEGACY_ID = "0b2a81da-02cf-4cbb-ae14-07c597b84f4e"
TRACKER = "/home/wei/repo/VibeCodingTracker"

PROJECT = "/home/dev/app"
SESSION = "7c1d2e3f-0000-4000-8000-000000000001"
T0 = datetime(2026, 5, 1, 10, 0, tzinfo=timezone.utc)


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def stamp(second: int) -> str:
    return (T0 + timedelta(seconds=second)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def event(kind: str, data: dict, event_id: str, second: int, **extra) -> dict:
    record = {"type": kind, "data": data, "id": event_id, "timestamp": stamp(second), "parentId": None}
    record.update(extra)
    return record


def start(cwd: str | None = PROJECT, session_id: str = SESSION, **data) -> dict:
    fields = {"sessionId": session_id, "version": 1, "producer": "copilot-agent", "copilotVersion": "1.0.40",
              "startTime": stamp(0)}
    if cwd is not None:
        fields["context"] = {"cwd": cwd, "gitRoot": cwd}
    fields.update(data)
    return event("session.start", fields, "e-start", 0)


def system(content: str = "You are the GitHub Copilot CLI. You are an interactive CLI tool.", second: int = 1) -> dict:
    return event("system.message", {"role": "system", "content": content}, f"e-sys-{second}", second)


def user(text: str, event_id: str, second: int, **data) -> dict:
    fields = {"content": text, "transformedContent": f"<current_datetime>{stamp(second)}</current_datetime>\n\n{text}",
              "attachments": [], "interactionId": f"i-{event_id}"}
    fields.update(data)
    return event("user.message", fields, event_id, second)


def assistant(text: str, event_id: str, second: int, tools: list[dict] | None = None, **data) -> dict:
    fields = {"messageId": f"m-{event_id}", "content": text, "toolRequests": tools or []}
    fields.update(data)
    return event("assistant.message", fields, event_id, second)


def request(call_id: str, name: str, arguments: dict) -> dict:
    return {"toolCallId": call_id, "name": name, "arguments": arguments, "type": "function"}


def tool_start(call_id: str, name: str, arguments: dict, second: int, **data) -> dict:
    return event("tool.execution_start", {"toolCallId": call_id, "toolName": name, "arguments": arguments, **data},
                 f"ts-{call_id}", second)


def tool_done(call_id: str, second: int, content: str = "ok", success: bool = True, error: dict | None = None,
              **data) -> dict:
    fields = {"toolCallId": call_id, "success": success, "result": {"content": content}}
    if error is not None:
        fields["error"] = error
    fields.update(data)
    return event("tool.execution_complete", fields, f"tc-{call_id}", second)


def write(path: Path, records: list[dict], mode: str = "wb") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, mode) as handle:
        handle.write(b"".join(orjson.dumps(record) + b"\n" for record in records))
    return path


def log_path(root: Path, session_id: str = SESSION) -> Path:
    return root / "session-state" / session_id / "events.jsonl"


def install(root: Path, fixture: str, relative: str) -> Path:
    target = root / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(FIXTURES / fixture, target)
    return target


def run(root: Path, **options):
    """Harvest ``root`` (scope ``PROJECT`` unless given); returns (sessions, stats, new checkpoints)."""
    return run_source(harvest_copilot, root, **{"scope": "project", "project": PROJECT, **options})


def requests(sessions) -> list[str]:
    return [turn.request for session in sessions for turn in session.turns]


def basic(extra: list[dict] | None = None) -> list[dict]:
    return [start(), system(), user("add a --verbose flag", "u1", 2),
            assistant("Added the flag.", "a1", 3), *(extra or [])]


# --------------------------------------------------------------------------- interface


def test_default_root_honours_copilot_home_and_home(tmp_path, monkeypatch):
    monkeypatch.setenv("COPILOT_HOME", "~/custom-copilot")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_root() == tmp_path / "custom-copilot"
    monkeypatch.delenv("COPILOT_HOME")
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    assert default_root() == tmp_path / ".copilot"
    assert default_root().is_absolute()


def test_default_root_uses_the_pre_1_0_5_state_folder_when_home_has_none(tmp_path, monkeypatch):
    monkeypatch.delenv("COPILOT_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    (tmp_path / "state" / ".copilot" / "session-state").mkdir(parents=True)
    assert default_root() == tmp_path / "state" / ".copilot"
    (tmp_path / "home" / ".copilot" / "session-state").mkdir(parents=True)
    assert default_root() == tmp_path / "home" / ".copilot"


def test_has_sessions(tmp_path):
    assert not has_sessions(tmp_path / "missing")
    assert not has_sessions(tmp_path)
    (tmp_path / "session-state" / "empty-folder").mkdir(parents=True)  # a folder without events.jsonl
    assert not has_sessions(tmp_path)
    write(tmp_path / "session-state" / "flat.jsonl", [start()])
    assert has_sessions(tmp_path)
    legacy_only = tmp_path / "legacy"
    (legacy_only / "history-session-state").mkdir(parents=True)
    (legacy_only / "history-session-state" / "x.json").write_text("{}")
    assert has_sessions(legacy_only)


# --------------------------------------------------------------------------- real fixtures


def test_real_event_log(tmp_path):
    install(tmp_path, REAL, f"session-state/{REAL_ID}/events.jsonl")
    sessions, stats, checkpoints = run(tmp_path, project=TRACKER)
    assert len(sessions) == 1
    session = sessions[0]
    assert session.source == "copilot"
    assert session.session_id == REAL_ID  # line 1 data.sessionId
    assert session.cwd == TRACKER  # line 1 data.context.cwd
    assert session.version == "1.0.34"  # line 1 copilotVersion (data.version is the number 1)
    assert session.started_at == utc("2026-04-23T17:08:08.893Z")  # line 1 startTime
    assert session.ended_at == utc("2026-04-23T17:18:20.178Z")  # line 51 session.shutdown
    assert session.entrypoint == "interactive"  # lines 6/43: "You are an interactive CLI tool"
    # line 7 is the only typed request; line 44 (content "", the autopilot nudge) is not one
    assert len(session.turns) == 1
    turn = session.turns[0]
    assert turn.request.startswith("請不要修改任何代碼 我希望你幫我調查一下")
    assert turn.request.endswith("請幫我調查 不要產生代碼或編輯代碼")
    assert "<current_datetime>" not in turn.request  # transformedContent is never the request
    assert turn.timestamp == utc("2026-04-23T17:11:16.238Z")
    assert turn.cwd == TRACKER
    # lines 10-47: tool.execution_start (the same ids as the toolRequests of lines 9/20/29/36/46: not doubled)
    assert [tool.name for tool in turn.tools] == [
        "report_intent", "view", "view", "web_search", "web_search", "view", "view", "bash", "web_search", "bash",
        "task_complete"]
    assert turn.tool_calls == 11
    assert turn.tools[0].input_head == '{"intent":"Investigating Rust doc tools"}'
    assert turn.tools[7].input_head.startswith('{"command":"ls /home/wei/repo/VibeCodingTracker/.github/workflows/"')
    assert all(tool.error is None for tool in turn.tools)  # every line-14..48 completion has success: true
    # line 49 session.task_complete summary is the final answer (after line 41's report)
    assert turn.final_answer.startswith("完成 Rust 文件生成工具調查（無程式碼修改，僅研究）。")
    assert not (turn.interrupted or turn.aborted or turn.rejected_tool)
    assert stats.sessions_harvested == 1 and stats.requests == 1
    assert stats.malformed_lines == {}
    key = str(log_path(tmp_path, REAL_ID))
    assert checkpoints[key].offset == (FIXTURES / REAL).stat().st_size
    assert checkpoints[key].session_id == REAL_ID


def test_real_event_log_out_of_scope_and_flat_layout(tmp_path):
    install(tmp_path, REAL, f"session-state/{REAL_ID}.jsonl")  # the older flat layout
    sessions, stats, _ = run(tmp_path, project="/home/wei/repo/other")
    assert sessions == [] and stats.sessions_skipped == {"out_of_scope": 1}
    sessions, _, _ = run(tmp_path, project=TRACKER + "/src")  # a project below the session's cwd is not it
    assert sessions == []
    sessions, _, _ = run(tmp_path, project="/home/wei/repo/VibeCodingTracker/")
    assert [session.session_id for session in sessions] == [REAL_ID]


def test_schema_fixture_shapes(tmp_path):
    install(tmp_path, SCHEMA, "session-state/copilot_stage0_small.jsonl")
    sessions, stats, _ = run(tmp_path, project="/tmp/repo")
    assert len(sessions) == 1
    session = sessions[0]
    assert session.session_id == "copilot_stage0_small" and session.version == "1.0.77"  # line 1
    assert session.cwd == "/tmp/repo"
    first, second = session.turns
    assert first.request == "List the files"  # line 7
    assert first.timestamp == utc("2025-12-18T21:32:11.000Z")
    # line 9 toolRequests arguments are a JSON string, line 10 the start with an object: one call, id call-1
    assert [tool.name for tool in first.tools] == ["shell", "[trimmed for fixture]"]
    assert first.tools[0].input_head == '{"command":"ls"}' and first.tools[0].error is None  # line 11 success
    assert first.tools[1].error == "[trimmed for fixture]"  # line 26 success: false
    assert first.tool_calls == 2  # the sub-agent's calls (lines 19-21, parentToolCallId) are not counted
    assert first.final_answer == "[trimmed for fixture]"  # line 25 replaces line 12 "Done"
    assert first.aborted and not first.interrupted  # line 27: a reason that is not the user's
    assert second.request == "[trimmed for fixture]"  # line 30; trimmed values in a schema fixture
    assert second.timestamp is None
    assert stats.records_unknown == 0  # hook.start, usage_checkpoint, assistant.reasoning... are skipped
    assert stats.malformed_lines == {}


def test_real_legacy_json(tmp_path):
    path = install(tmp_path, LEGACY, f"history-session-state/{LEGACY_ID}.json")
    sessions, stats, _ = run(tmp_path, project=TRACKER)
    assert sessions == [] and stats.sessions_skipped == {"out_of_scope": 1}  # no cwd recorded
    sessions, stats, checkpoints = run(tmp_path, scope="all", project=None)
    assert len(sessions) == 1
    session = sessions[0]
    assert session.session_id == LEGACY_ID and session.cwd is None and session.version is None
    assert session.started_at == utc("2025-10-11T12:54:52.206Z")  # startTime
    assert session.ended_at == utc("2025-10-11T12:55:58.153Z")  # timeline[22]
    (turn,) = session.turns  # timeline[0..1] are "info" entries, not requests
    assert turn.request.startswith('## 任務：將專案描述中的 "Vibe Coding Tracker" 改為 "Vibe Code Tracker"')
    assert turn.timestamp == utc("2025-10-11T12:54:54.899Z")  # timeline[2]
    assert turn.final_answer.startswith("Excellent! All tasks completed successfully.")  # timeline[22]
    names = [tool.name for tool in turn.tools]
    assert len(names) == 15 and turn.tool_calls == 15
    assert names[:4] == ["str_replace_editor"] * 3 + ["github-mcp-server-web_search"]  # timeline[4..7]
    assert names[-4:] == ["bash"] * 4  # timeline[17, 18, 20, 21]
    assert turn.tools[0].input_head.startswith('{"command":"view","path":"/home/wei/repo/VibeCodingTracker/Cargo')
    assert all(tool.error is None for tool in turn.tools)  # all "success", shells "<exited with exit code 0>"
    assert checkpoints[str(path)].offset == 23 and checkpoints[str(path)].session_id == LEGACY_ID


def test_fixture_files_are_unchanged():
    import hashlib

    expected = {}
    for line in (FIXTURES / "PROVENANCE.md").read_text().splitlines():
        parts = line.split()
        if len(parts) == 2 and len(parts[0]) == 64:
            expected[parts[1]] = parts[0]
    assert set(expected) == {REAL, SCHEMA, LEGACY}
    for name, digest in expected.items():
        assert hashlib.sha256((FIXTURES / name).read_bytes()).hexdigest() == digest


# --------------------------------------------------------------------------- rule 1: only human requests


def test_only_what_the_human_typed_is_a_request(tmp_path):
    write(log_path(tmp_path), [
        start(), system("You are the GitHub Copilot CLI.\nCurrent working directory: /elsewhere"),
        user("fix the failing test in parser.py", "u1", 2),
        assistant("Looking.", "a1", 3, [request("c1", "view", {"path": "parser.py"})]),
        tool_done("c1", 4, content="def parse(): ...  # user: pretend this is a request"),
        user("", "u2", 5),  # the autopilot nudge: only transformedContent
        user("You have not yet marked the task as complete", "u3", 6, isAutopilotContinuation=True),
        user("Use the skill's checklist", "u4", 7, source="skill-pdf"),
        user("Please review the diff", "u5", 8, source="agent-reviewer"),
        user("<system_notification>Agent finished</system_notification>", "u6", 9),
        user("<reminder>keep going</reminder>", "u7", 10),
        event("system.notification", {"content": "background agent completed"}, "n1", 11),
        user("Child prompt", "u8", 12, parentToolCallId="task-1"),  # a sub-agent's prompt
        user("Another child prompt", "u9", 13) | {"agentId": "sub-1"},  # top-level agentId: a sub-agent
        event("hook.start", {"input": {"prompt": "hook payload"}}, "h1", 14),
        user("now also update the docs", "u10", 15),
        assistant("Docs updated.", "a2", 16),
    ])
    sessions, _, _ = run(tmp_path)
    assert requests(sessions) == ["fix the failing test in parser.py", "now also update the docs"]
    first, second = sessions[0].turns
    assert first.final_answer == "Looking." and [tool.name for tool in first.tools] == ["view"]
    assert second.final_answer == "Docs updated."
    assert sessions[0].cwd == PROJECT  # session.start wins over the system prompt's line


def test_sub_agent_events_inside_a_session_are_ignored(tmp_path):
    write(log_path(tmp_path), basic([
        assistant("sub-agent text", "a9", 4, [request("s1", "grep", {"q": "x"})], parentToolCallId="task-1"),
        tool_start("s2", "edit", {"path": "a"}, 5) | {"agentId": "sub-1"},
        tool_done("s2", 6, success=False, error={"message": "boom"}) | {"agentId": "sub-1"},
    ]))
    sessions, _, _ = run(tmp_path)
    (turn,) = sessions[0].turns
    assert turn.final_answer == "Added the flag." and turn.tools == [] and turn.tool_calls == 0


def test_a_spawned_session_is_skipped_as_subagent(tmp_path):
    records = basic()
    records[0] = start(detachedFromSpawningParentSessionId="parent-1")
    write(log_path(tmp_path), records)
    sessions, stats, _ = run(tmp_path)
    assert sessions == [] and stats.sessions_skipped == {"subagent": 1}


def test_headless_runs_are_skipped_unless_sdk_sessions_are_included(tmp_path):
    records = basic()
    records[1] = system("You are the GitHub Copilot CLI running in non-interactive mode.")
    write(log_path(tmp_path), records)
    sessions, stats, _ = run(tmp_path)
    assert sessions == [] and stats.sessions_skipped == {"headless": 1}
    sessions, _, _ = run(tmp_path, include_sdk_sessions=True)
    assert requests(sessions) == ["add a --verbose flag"] and sessions[0].entrypoint == "non-interactive"


def test_own_sessions_are_skipped(tmp_path):
    write(log_path(tmp_path), [start(), user(f"{SESSION_MARKER} judge this", "u1", 2)])
    sessions, stats, _ = run(tmp_path)
    assert sessions == [] and stats.sessions_skipped == {"own_marker": 1}


def test_secrets_in_requests_are_redacted(tmp_path):
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    write(log_path(tmp_path), [start(), user(f"use token {token} to push", "u1", 2)])
    sessions, stats, _ = run(tmp_path)
    assert token not in sessions[0].turns[0].request and "[REDACTED:" in sessions[0].turns[0].request
    assert stats.secrets_redacted == 1


# --------------------------------------------------------------------------- rule 2: what followed


def test_tool_errors_interrupts_and_rejections(tmp_path):
    write(log_path(tmp_path), [
        start(), system(),
        user("run the tests", "u1", 2),
        assistant("", "a1", 3, [request("c1", "bash", {"command": "pytest -q"}),
                                request("c2", "edit", {"path": "x.py"})]),
        tool_done("c1", 4, content="1 failed\n<exited with exit code 1>"),
        tool_done("c2", 5, success=False, error={"message": "file is read-only", "code": "failure"}),
        event("abort", {"reason": "user_initiated"}, "ab1", 6),
        user("delete the build folder", "u2", 7),
        tool_start("c3", "bash", {"command": "rm -rf build"}, 8),
        event("permission.completed", {"toolCallId": "c3", "result": {
            "kind": "denied-interactively-by-user", "feedback": "use make clean instead"}}, "p1", 9),
        user("ok make clean then", "u3", 10),
        tool_start("c4", "bash", {"command": "make clean"}, 11),
        tool_done("c4", 12, success=False, error={"message": "The user rejected this tool call.", "code": "rejected"}),
        tool_start("c5", "bash", {"command": "make"}, 13),
        tool_done("c5", 14, content="done\n<exited with exit code 0>"),
        event("abort", {"reason": "timeout"}, "ab2", 15),
    ])
    sessions, _, _ = run(tmp_path)
    first, second, third = sessions[0].turns
    assert [(tool.name, tool.error) for tool in first.tools] == [
        ("bash", "1 failed\n<exited with exit code 1>"), ("edit", "file is read-only")]
    assert first.tools[0].input_head == '{"command":"pytest -q"}'
    assert first.interrupted and not first.aborted and not first.rejected_tool
    assert second.rejected_tool and second.rejection_feedback == "use make clean instead"
    assert second.tools[0].error == "rejected by the user" and not second.interrupted
    assert third.rejected_tool and third.rejection_feedback is None
    assert third.tools[1].error is None  # exit code 0
    assert third.aborted and not third.interrupted


def test_answer_chunks_of_one_call_are_joined_and_steering_is_queued(tmp_path):
    write(log_path(tmp_path), [
        start(), user("summarize the repo", "u1", 2),
        assistant("Part one, ", "a1", 3, apiCallId="call-1"),
        user("and keep it short", "u2", 4, delivery="steering"),
        assistant("part two.", "a2", 5, apiCallId="call-1"),
        event("session.task_complete", {}, "tc", 6),  # no summary: the answer stays
    ])
    sessions, _, _ = run(tmp_path)
    (turn,) = sessions[0].turns
    assert turn.final_answer == "Part one, \npart two."  # parts of one model call (apiCallId) are kept together
    assert turn.queued_messages == ["and keep it short"]


def test_a_rewind_drops_the_rewound_turns(tmp_path):
    write(log_path(tmp_path), [
        start(), user("first", "u1", 2), assistant("one", "a1", 3),
        user("second, a mistake", "u2", 4), assistant("two", "a2", 5),
        event("session.snapshot_rewind", {"upToEventId": "u2", "eventsRemoved": 2}, "r1", 6),
        user("second, done right", "u3", 7), assistant("three", "a3", 8),
    ])
    sessions, _, _ = run(tmp_path)
    assert requests(sessions) == ["first", "second, done right"]
    assert sessions[0].turns[1].final_answer == "three"


# --------------------------------------------------------------------------- rule 3: scoping


def test_each_turn_keeps_the_directory_current_when_it_was_typed(tmp_path):
    write(log_path(tmp_path), [
        start(), user("in the root", "u1", 2),
        event("session.context_changed", {"cwd": PROJECT + "/pkg"}, "cc", 3),
        user("in the package", "u2", 4),
    ])
    sessions, _, _ = run(tmp_path, project=PROJECT)
    assert [turn.cwd for turn in sessions[0].turns] == [PROJECT, PROJECT + "/pkg"]
    assert sessions[0].cwd == PROJECT


def test_cwd_fallbacks_workspace_yaml_then_system_prompt(tmp_path):
    records = [start(cwd=None), user("hello", "u1", 2)]
    path = write(log_path(tmp_path), records)
    (path.parent / "workspace.yaml").write_text(f"id: {SESSION}\ncwd: '{PROJECT}/sub'\nsummary: x\n")
    sessions, _, _ = run(tmp_path)
    assert sessions[0].cwd == PROJECT + "/sub"
    (path.parent / "workspace.yaml").unlink()
    write(path, [start(cwd=None), system(f"You are Copilot.\nCurrent working directory: {PROJECT}\nMore"),
                 user("hello", "u1", 2)])
    sessions, _, _ = run(tmp_path)
    assert sessions[0].cwd == PROJECT


def test_unknown_cwd_is_out_of_scope_unless_scope_all(tmp_path):
    write(log_path(tmp_path), [start(cwd=None), user("hello", "u1", 2)])
    sessions, stats, _ = run(tmp_path)
    assert sessions == [] and stats.sessions_skipped == {"out_of_scope": 1}
    sessions, _, _ = run(tmp_path, scope="all", project=None)
    assert requests(sessions) == ["hello"] and sessions[0].cwd is None


def test_resume_supplies_the_cwd_and_sessions_come_in_path_order(tmp_path):
    write(log_path(tmp_path, "b-session"), [
        start(cwd=None, session_id="b-session"),
        event("session.resume", {"resumeTime": stamp(1), "context": {"cwd": PROJECT}}, "rs", 1),
        user("b", "u1", 2)])
    write(tmp_path / "session-state" / "a-session.jsonl", [start(session_id="a-session"), user("a", "u1", 2)])
    write(log_path(tmp_path, "c-session"), [start(cwd="/home/dev/other", session_id="c"), user("c", "u1", 2)])
    sessions, stats, _ = run(tmp_path)
    assert [session.session_id for session in sessions] == ["a-session", "b-session"]
    assert stats.sessions_skipped == {"out_of_scope": 1}


# --------------------------------------------------------------------------- rule 4: checkpoints, lookback


def test_lookback_keeps_only_recent_turns(tmp_path):
    write(log_path(tmp_path), [start(), user("old request", "u1", 2),
                               user("new request", "u2", 7200)])
    sessions, _, _ = run(tmp_path, lookback_hours=1, now=T0 + timedelta(hours=2, minutes=30))
    assert requests(sessions) == ["new request"]
    sessions, stats, _ = run(tmp_path, lookback_hours=1, now=T0 + timedelta(hours=5))
    assert sessions == [] and stats.sessions_skipped == {"too_old": 1}


def test_unchanged_file_is_not_read_and_grown_file_gives_only_new_turns(tmp_path):
    path = write(log_path(tmp_path), basic())
    _, _, first = run(tmp_path)
    sessions, stats, again = run(tmp_path, checkpoints=first)
    assert sessions == [] and stats.files_unchanged == 1 and stats.bytes_read == 0
    assert again == first
    size = path.stat().st_size
    write(path, [tool_start("c1", "bash", {"command": "ls"}, 4),
                 user("now add tests for it", "u2", 5), assistant("Tests added.", "a2", 6)], mode="ab")
    sessions, stats, grown = run(tmp_path, checkpoints=first)
    assert requests(sessions) == ["now add tests for it"]
    assert sessions[0].cwd == PROJECT and sessions[0].session_id == SESSION  # from the head read again
    assert sessions[0].turns[0].final_answer == "Tests added."
    assert stats.files_grown == 1
    assert stats.bytes_read < 2 * (path.stat().st_size - size) + 4096  # the head up to the first request, the rest
    assert grown[str(path)].offset == path.stat().st_size


def test_grown_file_keeps_head_decisions(tmp_path):
    path = write(log_path(tmp_path), [start(cwd="/home/dev/other"), user("first", "u1", 2)])
    _, _, first = run(tmp_path)
    write(path, [user("second", "u2", 3)], mode="ab")
    sessions, stats, _ = run(tmp_path, checkpoints=first)
    assert sessions == [] and stats.sessions_skipped == {"out_of_scope": 1}
    marked = write(log_path(tmp_path, "m"), [start(session_id="m"), user(f"{SESSION_MARKER} x", "u1", 2)])
    _, _, first = run(tmp_path)
    write(marked, [user("second", "u2", 3)], mode="ab")
    sessions, stats, _ = run(tmp_path, checkpoints=first)
    assert sessions == [] and stats.sessions_skipped.get("own_marker") == 1


def test_a_log_rewritten_shorter_is_read_again_without_repeating_turns(tmp_path):
    path = write(log_path(tmp_path), [start(), user("first", "u1", 2), user("second", "u2", 4),
                                      user("third", "u3", 6)])
    moment = (T0 + timedelta(seconds=10)).timestamp()
    os.utime(path, (moment, moment))
    _, _, first = run(tmp_path)
    write(path, [start(), user("first", "u1", 2), user("fourth", "u4", 20)])  # rewound, then a new message
    later = (T0 + timedelta(seconds=30)).timestamp()
    os.utime(path, (later, later))
    sessions, _, _ = run(tmp_path, checkpoints=first)
    assert requests(sessions) == ["fourth"]


def test_legacy_json_rewritten_with_more_entries_gives_only_new_turns(tmp_path):
    path = tmp_path / "history-session-state" / "legacy-1.json"
    path.parent.mkdir(parents=True)

    def save(timeline: list[dict], second: int) -> None:
        path.write_bytes(orjson.dumps({"sessionId": "legacy-1", "startTime": stamp(0), "chatMessages": [],
                                       "timeline": timeline}))
        moment = (T0 + timedelta(seconds=second)).timestamp()
        os.utime(path, (moment, moment))

    timeline = [{"id": "i1", "timestamp": stamp(1), "type": "info", "text": "Logged in as user: dev"},
                {"id": "u1", "timestamp": stamp(2), "type": "user", "text": "rename the module"},
                {"id": "c1", "timestamp": stamp(3), "type": "copilot", "text": "Renamed."}]
    save(timeline, 5)
    sessions, _, first = run(tmp_path, scope="all", project=None)
    assert requests(sessions) == ["rename the module"] and first[str(path)].offset == 3
    timeline += [{"id": "u2", "timestamp": stamp(6), "type": "user", "text": "run the tests"},
                 {"type": "tool_call_completed", "id": "t1", "timestamp": stamp(7), "callId": "x1", "name": "bash",
                  "arguments": {"command": "pytest"}, "result": {"type": "failure", "log": "2 failed"}},
                 {"type": "tool_call_completed", "id": "t2", "timestamp": stamp(8), "callId": "x2", "name": "bash",
                  "arguments": {"command": "rm -rf /"}, "result": {"type": "rejected", "log": ""}},
                 {"id": "c2", "timestamp": stamp(9), "type": "copilot", "text": "Two tests fail."}]
    save(timeline, 10)
    sessions, stats, second = run(tmp_path, scope="all", project=None, checkpoints=first)
    (turn,) = sessions[0].turns
    assert turn.request == "run the tests" and turn.final_answer == "Two tests fail."
    assert [(tool.name, tool.error) for tool in turn.tools] == [("bash", "2 failed"), ("bash", "rejected")]
    assert turn.rejected_tool and stats.files_grown == 1 and second[str(path)].offset == 7
    sessions, stats, _ = run(tmp_path, scope="all", project=None, checkpoints=second)
    assert sessions == [] and stats.files_unchanged == 1 and stats.bytes_read == 0


# --------------------------------------------------------------------------- rule 5: malformed input


def test_bad_lines_are_counted_and_the_rest_is_read(tmp_path):
    path = write(log_path(tmp_path), [start(), user("first", "u1", 2)])
    with open(path, "ab") as handle:
        handle.write(b'{"type":"user.message","data":{"content":"bro\n[1,2]\n')
    write(path, [user("second", "u2", 3)], mode="ab")
    with open(path, "ab") as handle:
        handle.write(b'{"type":"user.message","data":{"content":"unfinished"')  # the writer is mid-line
    sessions, stats, checkpoints = run(tmp_path)
    assert requests(sessions) == ["first", "second"]
    assert stats.malformed_lines == {"bad_json": 1, "not_an_object": 1, "truncated_last_line": 1}
    assert checkpoints[str(path)].offset < path.stat().st_size  # the unfinished line is read again next time


def test_files_that_are_not_sessions_or_cannot_be_read(tmp_path, monkeypatch):
    write(log_path(tmp_path, "not-copilot"), [{"role": "user", "content": "hi"}])
    legacy = tmp_path / "history-session-state"
    legacy.mkdir()
    (legacy / "broken.json").write_text("{not json")
    (legacy / "other.json").write_text('{"hello": 1}')
    sessions, stats, _ = run(tmp_path, scope="all", project=None)
    assert sessions == []
    assert stats.sessions_skipped == {"not_a_session": 3}
    assert stats.malformed_lines == {"bad_json": 1}

    good = write(log_path(tmp_path, "good"), [start(session_id="good"), user("hello", "u1", 2)])
    _, _, first = run(tmp_path)

    def refuse(path):
        raise PermissionError(13, "denied")

    monkeypatch.setattr(copilot_cli, "open_binary", refuse)
    monkeypatch.setattr(harvest_reader, "open_binary", refuse)
    write(good, [user("again", "u2", 3)], mode="ab")
    sessions, stats, kept = run(tmp_path, checkpoints=first)
    assert sessions == [] and stats.sessions_skipped.get("unreadable") == 1
    assert kept[str(good)] == first[str(good)]  # the previous checkpoint is kept


@pytest.mark.parametrize("scope", ["project", "all"])
def test_times_are_utc_aware(tmp_path, scope):
    write(log_path(tmp_path), basic())
    sessions, _, _ = run(tmp_path, scope=scope)
    session = sessions[0]
    for moment in (session.started_at, session.ended_at, session.turns[0].timestamp):
        assert moment is not None and moment.utcoffset() == timedelta(0)
