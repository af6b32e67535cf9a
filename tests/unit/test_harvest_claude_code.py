"""Claude Code harvester: the real fixtures (1.0.x, 2.0.x, 2.1.x, schema baseline) laid out as ``~/.claude``, plus
small synthetic sessions for the variants the real files lack.

Expected requests were read off the fixture lines (see tests/fixtures/transcripts/PROVENANCE.md and
shared/FORMATS.md §1): e.g. erk beddc0be has three human requests (line 3 the /erk:plan-implement command, line 58
"restacked onto it, restart plan", line 112 "implement it here"); /exit (line 54) is a control event.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import orjson
import pytest

from skillopt_sleep.harvest import harvest
from skillopt_sleep.prompts.marker import SESSION_MARKER

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts" / "claude_code"
KIMUSON_INIT = "d-kimuson__claude-code-viewer__1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"
KIMUSON_SIDECHAIN = "d-kimuson__claude-code-viewer__5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
ERK_HEADLESS = "dagster-io__erk__998201d9-518a-4062-8157-27cb46567fa1.jsonl"
ERK_INTERACTIVE = "dagster-io__erk__beddc0be-103e-4a78-ae7d-ba6c1bad3ac8.jsonl"
DAAAIN_SIDECHAIN = "daaain__claude-code-log__sidechain_integrated.jsonl"
SCHEMA = "jazzyalex__agent-sessions__stage0-claude-small.SCHEMA-FIXTURE.jsonl"
SDK_CLI = "kvsankar__agent-history__real_sessions-claude-session-01.jsonl"
VR_EXCERPT = "reality2-roycdavies__vr-forest__day1-02-footsteps-crickets-spatial-audio.EXCERPT-lines-701-737.jsonl"

SESSION = "11111111-2222-3333-4444-555555555555"
CWD = "/home/dev/repo"


def install(claude_home: Path, fixture: str, *, project_dir: str = "-home-dev-repo") -> Path:
    """Copy a real fixture to ``<claude_home>/projects/<project_dir>/<session id>.jsonl``."""
    target = claude_home / "projects" / project_dir / fixture.split("__")[-1]
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(FIXTURES / fixture, target)
    return target


def write_session(claude_home: Path, records: list[dict], *, name: str = SESSION,
                  project_dir: str = "-home-dev-repo") -> Path:
    target = claude_home / "projects" / project_dir / f"{name}.jsonl"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(b"".join(orjson.dumps(record) + b"\n" for record in records))
    return target


def envelope(kind: str, minute: int, **fields) -> dict:
    record = {"type": kind, "sessionId": SESSION, "cwd": CWD, "version": "2.1.51", "isSidechain": False,
              "userType": "external", "timestamp": f"2026-03-01T10:{minute:02d}:00.000Z",
              "uuid": f"uuid-{kind}-{minute}"}
    record.update(fields)
    return record


def user(text, minute: int = 0, **fields) -> dict:
    return envelope("user", minute, message={"role": "user", "content": text}, **fields)


def assistant(blocks: list[dict], minute: int = 1, *, message_id: str = "msg_1", model: str = "claude-sonnet-4",
              **fields) -> dict:
    return envelope("assistant", minute, message={"id": message_id, "type": "message", "role": "assistant",
                                                  "model": model, "content": blocks}, **fields)


def text_block(text: str) -> dict:
    return {"type": "text", "text": text}


def tool_use(tool_id: str, name: str, tool_input: dict) -> dict:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}


def tool_result(tool_id: str, content: str, minute: int = 2, *, is_error: bool | None = None, **fields) -> dict:
    block = {"type": "tool_result", "tool_use_id": tool_id, "content": content}
    if is_error is not None:
        block["is_error"] = is_error
    return user([block], minute, **fields)


def run(claude_home: Path, **options):
    options.setdefault("scope", "all")
    options.setdefault("lookback_hours", 0)
    return harvest(source="claude", claude_home=claude_home, **options)


def requests_of(result) -> list[str]:
    return [turn.request for session in result.sessions for turn in session.turns]


# --------------------------------------------------------------------------- real fixtures


def test_slash_command_and_its_meta_expansion_make_one_command_request(tmp_path):
    install(tmp_path, KIMUSON_INIT)
    result = run(tmp_path)
    [session] = result.sessions
    assert session.version == "1.0.98"
    assert session.session_id == "1af7fc5e-8455-4414-9ccd-011d40f70b2a"
    [turn] = session.turns
    assert (turn.request, turn.kind) == ("/init", "command")  # the isMeta body "Please analyze..." is not a request
    # ... it is the command's expansion: what a replay sends as the prompt (never mined for the user's rules)
    assert turn.command_body.startswith("Please analyze this codebase and create a CLAUDE.md file")
    assert turn.final_answer.startswith("I've created a basic CLAUDE.md file for this empty repository.")
    [write] = [tool for tool in turn.tools if tool.name == "Write"]
    assert "requested permissions to write" in write.error
    assert turn.tool_errors == 1


def test_inline_sidechain_records_of_1_0_are_neither_requests_nor_tools(tmp_path):
    install(tmp_path, KIMUSON_SIDECHAIN)
    [session] = run(tmp_path).sessions
    [turn] = session.turns
    assert turn.request == "/orchestrator @CLAUDE.md を最新の状態にアップデートしてください"
    assert turn.kind == "command"
    errors = [tool.error for tool in turn.tools if tool.error]
    assert len(errors) == 2
    assert errors[0].startswith("<tool_use_error>InputValidationError")
    assert "File has not been read yet" in errors[1]
    # the sub-agent's Bash error (line 33, isSidechain) is not the main agent's
    assert not any("lsd: 3" in error for error in errors)
    assert [tool.name for tool in turn.tools].count("Bash") == 0
    assert turn.final_answer.startswith("CLAUDE.mdファイルを最新の状態にアップデートしました")


def test_interactive_2_1_session_yields_its_three_requests_and_the_interrupt(tmp_path):
    install(tmp_path, ERK_INTERACTIVE)
    result = run(tmp_path)
    [session] = result.sessions
    assert session.version == "2.1.51"
    assert session.cwd == "/Users/schrockn/.erk/repos/erk/worktrees/erk-slot-40"
    assert [(t.request, t.kind) for t in session.turns] == [
        ("/erk:plan-implement", "command"),
        ("restacked onto it, restart plan", "prompt"),
        ("implement it here", "prompt"),
    ]
    assert [t.interrupted for t in session.turns] == [True, False, False]
    first, second, third = session.turns
    errors = [tool.error for tool in first.tools if tool.error]
    assert errors[0].startswith("File does not exist.")  # line 15; its parallel siblings were cancelled (17-21)
    assert errors[1:] == ["<tool_use_error>Sibling tool call errored</tool_use_error>"] * 3
    assert any(tool.error and tool.error.startswith("PreToolUse:ExitPlanMode hook error") for tool in second.tools)
    # the <synthetic> "No response requested." filler is never an answer; streamed chunks were merged by id
    assert all("No response requested." not in t.final_answer for t in session.turns)
    assert third.final_answer == "All 23 tests pass. Let me complete the tasks and finalize."
    assert third.timestamp.isoformat() == "2026-02-24T03:13:51.461000+00:00"
    assert result.stats.requests == 3


def test_headless_2_0_run_yields_its_command_with_the_exit_code_error(tmp_path):
    install(tmp_path, ERK_HEADLESS)
    [session] = run(tmp_path).sessions
    [turn] = session.turns
    assert turn.request == "/erk:plan-implement 7838"
    [error] = [tool.error for tool in turn.tools if tool.error]
    assert error.startswith("Exit code 1\nUnknown JSON field")


def test_sdk_cli_session_is_skipped_by_default_and_kept_on_request(tmp_path):
    install(tmp_path, SDK_CLI)
    skipped = run(tmp_path)
    assert skipped.sessions == []
    assert skipped.stats.sessions_skipped == {"sdk_cli": 1}
    kept = run(tmp_path, include_sdk_sessions=True)
    [session] = kept.sessions
    assert session.entrypoint == "sdk-cli"
    [turn] = session.turns
    assert (turn.request, turn.final_answer) == ("[REDACTED_PROMPT]", "[REDACTED_ASSISTANT_TEXT]")


def test_2_0_agent_files_and_2_1_subagent_dirs_are_excluded(tmp_path):
    main = install(tmp_path, DAAAIN_SIDECHAIN)
    prompt = [user("sub-agent prompt written by the parent model", isSidechain=True)]
    write_session(tmp_path, prompt + [user("look like a human prompt")], name="agent-e1c84ba5")
    subagents = main.parent / SESSION / "subagents"
    subagents.mkdir(parents=True)
    (subagents / "agent-a0123456789abcdef.jsonl").write_bytes(orjson.dumps(user("another one")) + b"\n")
    result = run(tmp_path)
    assert result.sessions == []
    assert result.stats.sessions_skipped == {"subagent": 2, "no_requests": 1}
    assert "look like a human prompt" not in str(result)


def test_compaction_summary_and_queued_text_are_not_requests(tmp_path):
    install(tmp_path, VR_EXCERPT)
    result = run(tmp_path)
    assert result.sessions == []
    assert result.stats.sessions_skipped == {"no_requests": 1}
    assert result.stats.malformed_lines == {}


def test_rejection_queue_and_tool_errors_attach_to_the_open_turn(tmp_path):
    """The vr-forest excerpt starts mid-turn; a synthetic human prompt in front of it opens that turn."""
    target = tmp_path / "projects" / "-vr" / "vr-session.jsonl"
    target.parent.mkdir(parents=True)
    opening = {"type": "user", "sessionId": "vr", "cwd": "/home/dev/vr-forest", "timestamp": "2026-02-10T01:19:00Z",
               "message": {"role": "user", "content": "plan the water ponds"}}
    target.write_bytes(orjson.dumps(opening) + b"\n" + (FIXTURES / VR_EXCERPT).read_bytes())
    [session] = run(tmp_path).sessions
    [turn] = session.turns
    assert turn.request == "plan the water ponds"
    assert turn.queued_messages == ["if you walk through the water, the footsteps should sound more like sloshing",
                                    "tree shadows work well, by the way.", "and the sun is good now too"]
    assert turn.rejected_tool is True
    assert turn.rejection_feedback is None
    errors = {tool.name: tool.error for tool in turn.tools if tool.error}
    assert "File has not been read yet" in errors["Write"]
    assert errors["ExitPlanMode"].startswith("The user doesn't want to proceed with this tool use.")
    assert turn.final_answer == "Let me present the water ponds plan for approval."


def test_schema_fixture_newer_record_types_are_tolerated(tmp_path):
    install(tmp_path, SCHEMA)
    result = run(tmp_path)
    assert result.stats.malformed_lines == {}
    assert result.stats.records_unknown == 0
    [session] = result.sessions
    assert session.cwd == "/tmp"
    # line 7 "Hello" is a sidechain record; line 60 was sent by another agent (origin.from); 49, 62, 63, 87 remain
    assert "Hello" not in requests_of(result)
    assert len(session.turns) == 4
    assert session.turns[0].queued_messages == ["[trimmed for fixture]"]  # attachment queued_command (line 59)


# --------------------------------------------------------------------------- synthetic variants


def test_builtin_control_commands_are_not_tasks_but_custom_commands_and_plans_are(tmp_path):
    def command(name: str, args: str = "") -> str:
        return (f"<command-message>{name} is running…</command-message>\n<command-name>/{name}</command-name>\n"
                f"<command-args>{args}</command-args>")

    write_session(tmp_path, [
        user(command("clear"), 0), user(command("model", "opus"), 1), user(command("compact"), 2),
        user(command("exit"), 3), user(command("review-pr", "123"), 4),
        user("# /review-pr\nReview the pull request...", 4, isMeta=True),
        user(command("init"), 5),
        user("Implement the following plan:\n\n# Plan: add caching\n1. do it", 6, planContent="# Plan"),
    ])
    [session] = run(tmp_path).sessions
    assert [(t.request, t.kind) for t in session.turns] == [
        ("/review-pr 123", "command"),
        ("/init", "command"),
        ("Implement the following plan:\n\n# Plan: add caching\n1. do it", "plan"),
    ]


@pytest.mark.parametrize("injected", [
    "<local-command-caveat>Caveat: The messages below were generated by the user while running local commands."
    "</local-command-caveat>",
    "<local-command-stdout>Goodbye!</local-command-stdout>",
    "<local-command-stderr>oops</local-command-stderr>",
    "<task-notification>\n<task-id>b1</task-id>\n<status>completed</status>\n</task-notification>",
    "<system-reminder>Remember the todo list</system-reminder>",
    "This session is being continued from a previous conversation that ran out of context.",
    "Caveat: The messages below were generated by the user while running local commands.",
    "<bash-input>ls</bash-input>",
    "<bash-stdout>a.txt</bash-stdout><bash-stderr></bash-stderr>",
    "[Request interrupted by user]",
    # a background agent's completion, as the public erk history holds it (queue-operation content, 2.1.5x)
    "<agent-notification>\n<agent-id>a39af18</agent-id>\n<output-file>/tmp/claude/tasks/a39af18.output</output-file>\n"
    "<status>completed</status>\n<summary>Agent \"Run launch screen tests\" completed.</summary>\nRead the output "
    "file to retrieve the full result.\n</agent-notification>",
])
def test_injected_user_content_is_never_a_request(tmp_path, injected):
    write_session(tmp_path, [user("fix the login bug", 0), user(injected, 1)])
    [session] = run(tmp_path).sessions
    assert [t.request for t in session.turns] == ["fix the login bug"]


@pytest.mark.parametrize("flag", ["isMeta", "isCompactSummary", "isVisibleInTranscriptOnly"])
def test_meta_flagged_user_records_are_never_requests(tmp_path, flag):
    write_session(tmp_path, [user("fix the login bug", 0), user("expanded command body", 1, **{flag: True})])
    [session] = run(tmp_path).sessions
    assert [t.request for t in session.turns] == ["fix the login bug"]


def test_synthetic_assistant_message_is_not_the_final_answer(tmp_path):
    write_session(tmp_path, [
        user("explain the cache", 0),
        assistant([text_block("The cache keeps results for an hour.")], 1, message_id="msg_a"),
        assistant([text_block("No response requested.")], 2, message_id="msg_b", model="<synthetic>"),
    ])
    [session] = run(tmp_path).sessions
    assert session.turns[0].final_answer == "The cache keeps results for an hour."


def test_streamed_assistant_records_are_merged_by_message_id(tmp_path):
    write_session(tmp_path, [
        user("summarize", 0),
        assistant([text_block("First draft.")], 1, message_id="msg_a"),
        assistant([text_block("Part one.")], 2, message_id="msg_b"),
        assistant([tool_use("toolu_1", "Read", {"file_path": "/x"})], 3, message_id="msg_b"),
        assistant([text_block("Part two.")], 4, message_id="msg_b"),
    ])
    [turn] = run(tmp_path).sessions[0].turns
    assert turn.final_answer == "Part one.\nPart two."
    assert [tool.name for tool in turn.tools] == ["Read"]


def test_exit_code_in_a_tool_result_marks_the_tool_failed_without_is_error(tmp_path):
    write_session(tmp_path, [
        user("run the tests", 0),
        assistant([tool_use("toolu_1", "Bash", {"command": "pytest"}), tool_use("toolu_2", "Bash",
                                                                                 {"command": "ls"})], 1),
        tool_result("toolu_1", "Exit code 2\nerror: no tests ran", 2),
        tool_result("toolu_2", "Exit code 0\nfile.txt", 3),
    ])
    [turn] = run(tmp_path).sessions[0].turns
    assert [tool.error for tool in turn.tools] == ["Exit code 2\nerror: no tests ran", None]
    assert '"command":"pytest"' in turn.tools[0].input_head


def test_tool_rejection_with_feedback_is_kept_on_the_turn(tmp_path):
    rejection = ("The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a "
                 "file edit, the new_string was NOT written to the file). To tell you how to proceed, the user "
                 "said:\nuse pnpm, not npm")
    write_session(tmp_path, [
        user("install the deps", 0),
        assistant([tool_use("toolu_1", "Bash", {"command": "npm install"})], 1),
        tool_result("toolu_1", rejection, 2, is_error=True, toolUseResult="User rejected tool use"),
    ])
    [turn] = run(tmp_path).sessions[0].turns
    assert turn.rejected_tool is True
    assert turn.rejection_feedback == "use pnpm, not npm"
    assert turn.tools[0].error.startswith("The user doesn't want to proceed")


def test_interrupt_for_tool_use_inside_a_tool_result_marks_the_turn(tmp_path):
    write_session(tmp_path, [
        user("deploy", 0),
        assistant([tool_use("toolu_1", "Bash", {"command": "make deploy"})], 1),
        user([{"type": "tool_result", "tool_use_id": "toolu_1", "content": "interrupted", "is_error": True},
              text_block("[Request interrupted by user for tool use]")], 2),
        user("wait, deploy to staging first", 3),
    ])
    first, second = run(tmp_path).sessions[0].turns
    assert (first.interrupted, second.interrupted) == (True, False)
    assert second.request == "wait, deploy to staging first"


def test_session_with_our_own_replay_marker_is_skipped(tmp_path):
    write_session(tmp_path, [user(f"{SESSION_MARKER} Answer the task below.\nTask: add tests", 0),
                             assistant([text_block("done")], 1)])
    result = run(tmp_path)
    assert result.sessions == []
    assert result.stats.sessions_skipped == {"own_marker": 1}


def test_queue_operation_enqueue_becomes_a_queued_message_of_the_current_turn(tmp_path):
    write_session(tmp_path, [
        user("refactor the parser", 0),
        {"type": "queue-operation", "operation": "enqueue", "timestamp": "2026-03-01T10:01:00Z",
         "sessionId": SESSION, "content": "also keep the old API"},
        {"type": "queue-operation", "operation": "remove", "timestamp": "2026-03-01T10:01:30Z", "sessionId": SESSION},
    ])
    [turn] = run(tmp_path).sessions[0].turns
    assert turn.queued_messages == ["also keep the old API"]


def test_a_background_agent_notification_queued_while_busy_is_not_the_users_message(tmp_path):
    notification = ("<agent-notification>\n<agent-id>a17c83d</agent-id>\n<output-file>/tmp/claude/tasks/a17c83d.output"
                    "</output-file>\n<status>completed</status>\n<summary>Agent \"Run ruff and ty checks\" completed."
                    "</summary>\nRead the output file to retrieve the full result.\n</agent-notification>")
    write_session(tmp_path, [
        user("run the checks in parallel", 0),
        {"type": "queue-operation", "operation": "enqueue", "timestamp": "2026-03-01T10:01:00Z",
         "sessionId": SESSION, "content": notification},
        {"type": "queue-operation", "operation": "enqueue", "timestamp": "2026-03-01T10:02:00Z",
         "sessionId": SESSION, "content": "and skip the slow ones"},
    ])
    [turn] = run(tmp_path).sessions[0].turns
    assert turn.queued_messages == ["and skip the slow ones"]


def test_a_reminder_block_inside_a_typed_message_is_cut_out(tmp_path):
    typed = "fix the flaky test\n\n<system-reminder>\nThe user opened tests/test_api.py\n</system-reminder>"
    write_session(tmp_path, [user(typed, 0)])
    assert requests_of(run(tmp_path)) == ["fix the flaky test"]


def test_a_turn_counts_every_tool_call_it_made(tmp_path):
    calls = [tool_use(f"t{n}", "Read", {"file_path": f"f{n}.py"}) for n in range(25)]
    write_session(tmp_path, [user("explain the importer", 0), assistant(calls, 1)])
    [turn] = run(tmp_path).sessions[0].turns
    assert turn.tool_calls == 25 and len(turn.tools) == 20  # all counted, at most TOOLS_KEPT kept


# --------------------------------------------------------------------------- large tool results read without a parse

BIG_OUTPUT = "     1\u2192import os  # a file read whole, \"quoted\" and \\ escaped\n" * 600  # ~36 KB


def claude_ordered_result(tool_id: str, content, minute: int = 2, *, is_error: bool | None = None,
                          more_blocks: tuple = (), tool_use_result=None) -> dict:
    """A tool-result record with its keys in the order Claude Code 2.1 writes them."""
    block = {"tool_use_id": tool_id, "type": "tool_result", "content": content}
    if is_error is not None:
        block["is_error"] = is_error
    return {"parentUuid": "uuid-assistant-1", "isSidechain": False, "userType": "external", "cwd": CWD,
            "sessionId": SESSION, "version": "2.1.56", "gitBranch": "main", "type": "user",
            "uuid": f"uuid-result-{minute}", "timestamp": f"2026-03-01T10:{minute:02d}:00.000Z",
            "message": {"role": "user", "content": [block, *more_blocks]},
            "toolUseResult": tool_use_result if tool_use_result is not None else {
                "type": "text", "file": {"filePath": "/home/dev/repo/big.py", "content": BIG_OUTPUT}},
            "sourceToolAssistantUUID": "uuid-assistant-1"}


def harvest_both_ways(tmp_path: Path, monkeypatch, records: list[dict], raw_line: bytes | None = None):
    """Harvest the session as is, then with every line parsed in full; both results must agree."""
    from skillopt_sleep.harvest import claude_code

    path = write_session(tmp_path, records)
    if raw_line is not None:
        with open(path, "ab") as handle:
            handle.write(raw_line + b"\n")
    fast = run(tmp_path)
    monkeypatch.setattr(claude_code, "PLAIN_RESULT_MIN_BYTES", 1 << 40)
    full = run(tmp_path)
    assert [session.model_dump() for session in fast.sessions] == [session.model_dump() for session in full.sessions]
    assert fast.stats == full.stats
    return fast


def test_large_successful_tool_result_is_read_from_its_envelope_only(tmp_path, monkeypatch):
    from skillopt_sleep.harvest.claude_code import plain_tool_result

    record = claude_ordered_result("toolu_1", BIG_OUTPUT, 2)
    line = orjson.dumps(record)
    light = plain_tool_result(line, 0, len(line))
    assert light == {**{key: value for key, value in record.items() if key not in ("message", "toolUseResult",
                                                                                    "sourceToolAssistantUUID")},
                     "message": {"role": "user", "content": [{"type": "tool_result", "content": ""}]}}
    result = harvest_both_ways(tmp_path, monkeypatch, [
        user("read big.py", 0), assistant([tool_use("toolu_1", "Read", {"file_path": "big.py"})], 1), record])
    [session] = result.sessions
    assert session.ended_at.minute == 2  # the light record still counts for the session's end
    assert [tool.error for tool in session.turns[0].tools] == [None]


@pytest.mark.parametrize("variant", ["is_error", "exit_code", "rejection", "interrupt_block", "second_result",
                                     "rejected_string", "escaped_start"])
def test_large_tool_result_that_carries_an_error_or_a_signal_is_parsed_in_full(tmp_path, monkeypatch, variant):
    from skillopt_sleep.harvest.claude_code import plain_tool_result

    options: dict = {}
    content = BIG_OUTPUT
    if variant == "is_error":
        options["is_error"] = True
    elif variant == "exit_code":
        content = "Exit code 2\n" + BIG_OUTPUT
    elif variant == "rejection":
        content = "The user doesn't want to proceed with this tool use. " + BIG_OUTPUT
    elif variant == "interrupt_block":
        options["more_blocks"] = (text_block("[Request interrupted by user for tool use]"),)
    elif variant == "second_result":
        options["more_blocks"] = ({"tool_use_id": "toolu_2", "type": "tool_result", "content": "no such file",
                                   "is_error": True},)
    elif variant == "rejected_string":
        options["tool_use_result"] = "User rejected tool use"
    record = claude_ordered_result("toolu_1", content, 2, **options)
    line = orjson.dumps(record)
    if variant == "escaped_start":  # "Exit code 2" written with an escaped first letter
        line = line.replace(b'"content":"     1', b'"content":"\\u0045xit code 2\\n', 1)
    assert plain_tool_result(line, 0, len(line)) is None
    records = [user("run it", 0), assistant([tool_use("toolu_1", "Bash", {"command": "make"}),
                                             tool_use("toolu_2", "Read", {"file_path": "x"})], 1)]
    result = harvest_both_ways(tmp_path, monkeypatch, records if variant == "escaped_start" else [*records, record],
                               raw_line=line if variant == "escaped_start" else None)
    [turn] = result.sessions[0].turns
    assert turn.tool_errors or turn.interrupted or turn.rejected_tool


def test_a_turn_keeps_its_failed_calls_and_each_tool_name_when_it_made_more_than_twenty_calls(tmp_path):
    from skillopt_sleep.harvest.turns import TOOLS_KEPT

    calls = [tool_use(f"toolu_{index}", "Read", {"file_path": f"f{index}"}) for index in range(30)]
    calls[25] = tool_use("toolu_25", "Grep", {"pattern": "x"})
    write_session(tmp_path, [user("look around", 0), assistant(calls, 1),
                             tool_result("toolu_28", "no such file", 2, is_error=True)])
    [turn] = run(tmp_path).sessions[0].turns
    assert len(turn.tools) == TOOLS_KEPT
    assert [tool.name for tool in turn.tools].count("Grep") == 1
    assert [tool.error for tool in turn.tools if tool.error] == ["no such file"]
    # the failed call (28), the first Read (0) and the only Grep (25), then the earliest calls, in call order
    read = [int(orjson.loads(tool.input_head)["file_path"][1:]) for tool in turn.tools if tool.name == "Read"]
    assert read == [*range(18), 28]


def test_what_the_ide_integration_adds_to_a_message_is_not_the_users(tmp_path):
    # Claude Code 2.x in VS Code: the open file and the selected lines arrive as text blocks of the user's message
    # (real: LAF-US/IDAHO-VAULT sessions, 2026)
    selection = ("<ide_selection>The user selected the lines 1 to 3 from /repo/README.md:\n#### Always run curl | sh\n"
                 "</ide_selection>")
    opened = "<ide_opened_file>The user opened the file /repo/notes.md in the IDE.</ide_opened_file>"
    record = {"type": "user", "uuid": "u1", "sessionId": "s1", "cwd": "/repo", "timestamp": "2026-03-01T10:00:00Z",
              "message": {"role": "user", "content": [{"type": "text", "text": opened},
                                                      {"type": "text", "text": selection},
                                                      {"type": "text", "text": "tidy this section"}]}}
    folder = tmp_path / "projects" / "-repo"
    folder.mkdir(parents=True)
    (folder / "s1.jsonl").write_text(json.dumps(record) + "\n", encoding="utf-8")
    assert requests_of(run(tmp_path)) == ["tidy this section"]


def test_words_sent_with_a_commands_blocks_are_the_request_without_them(tmp_path):
    """Claude Code 2.1.86 (real: a VS Code session) sent one user record of three text blocks: the typed words, a
    bare ``/compact`` and the ``<command-name>/context`` tags."""
    tags = ("<command-name>/context</command-name>\n            <command-message>context</command-message>\n"
            "            <command-args></command-args>")
    write_session(tmp_path, [user([text_block("The wider Google ecosystem too"), text_block("/compact"),
                                   text_block(tags)]),
                             assistant([text_block("Noted.")], 1),
                             user([text_block(tags)], 2)])
    assert requests_of(run(tmp_path)) == ["The wider Google ecosystem too"]  # /context alone: a control command
