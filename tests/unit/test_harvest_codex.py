"""Codex CLI harvester: the real rollouts (0.58, 0.77, 0.135, 0.146 schema baseline) laid out as
``~/.codex/sessions/YYYY/MM/DD/``, plus synthetic rollouts for zst, archived sessions, legacy files, IDE wrappers
and sub-agent threads.

Expected requests were read off the fixture lines: AcidicSoil (0.58) holds one prompt (line 3 response item and
line 4 event are the same text; line 2 is <environment_context>), simonw (0.77) one prompt (line 2 AGENTS.md and
line 3 environment context are injected), kvsankar (0.135) one redacted prompt in a `codex exec` run.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import orjson
import pytest
import zstandard

from skillopt_sleep.harvest import harvest
from skillopt_sleep.harvest.codex import output_error, skip_line, strip_injected
from skillopt_sleep.prompts.marker import SESSION_MARKER

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts" / "codex"
ACIDIC = "AcidicSoil__codex-session-view__rollout-2025-11-17T15-30-28-019a93b9-f380-7600-98ff-940e6b99603c.jsonl"
SIMONW = "simonw__claude-code-transcripts__sample_codex_session@871966d.jsonl"
EXEC = "kvsankar__agent-history__real_sessions-codex-session-01.jsonl"
SCHEMA = "jazzyalex__agent-sessions__stage0-codex-small.SCHEMA-FIXTURE.jsonl"

THREAD = "019c0000-0000-7000-8000-000000000001"
ROLLOUT = f"rollout-2026-03-01T10-00-00-{THREAD}.jsonl"
CWD = "/home/dev/repo"


def day_dir(codex_home: Path, day: str = "2026/03/01") -> Path:
    folder = codex_home / "sessions" / day
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def install(codex_home: Path, fixture: str, name: str | None = None) -> Path:
    target = day_dir(codex_home) / (name or f"rollout-2026-03-01T10-00-00-{fixture[:8]}.jsonl")
    shutil.copyfile(FIXTURES / fixture, target)
    return target


def line(kind: str, payload: dict, second: int = 0) -> dict:
    return {"timestamp": f"2026-03-01T10:00:{second:02d}.000Z", "type": kind, "payload": payload}


def meta(**fields) -> dict:
    payload = {"id": THREAD, "timestamp": "2026-03-01T10:00:00.000Z", "cwd": CWD, "originator": "codex_cli_rs",
               "cli_version": "0.120.0", "source": "cli"}
    payload.update(fields)
    return line("session_meta", payload)


def user_item(text: str, second: int = 1) -> dict:
    return line("response_item", {"type": "message", "role": "user",
                                  "content": [{"type": "input_text", "text": text}]}, second)


def user_event(text: str, second: int = 1) -> dict:
    return line("event_msg", {"type": "user_message", "message": text, "images": []}, second)


def agent_event(text: str, second: int = 5) -> dict:
    return line("event_msg", {"type": "agent_message", "message": text}, second)


def write_rollout(folder: Path, records: list[dict], name: str = ROLLOUT) -> Path:
    target = folder / name
    target.write_bytes(b"".join(orjson.dumps(record) + b"\n" for record in records))
    return target


def run(codex_home: Path, **options):
    options.setdefault("scope", "all")
    options.setdefault("lookback_hours", 0)
    return harvest(source="codex", codex_home=codex_home, **options)


def fixture_line(fixture: str, number: int) -> dict:
    with open(FIXTURES / fixture, "rb") as handle:
        for index, raw in enumerate(handle, 1):
            if index == number:
                return orjson.loads(raw)
    raise AssertionError(number)


# --------------------------------------------------------------------------- real fixtures


def test_0_58_rollout_counts_its_prompt_once_without_the_environment_context(tmp_path):
    install(tmp_path, ACIDIC, ACIDIC.split("__")[-1])
    result = run(tmp_path)
    [session] = result.sessions
    assert (session.session_id, session.version, session.entrypoint) == (
        "019a93b9-f380-7600-98ff-940e6b99603c", "0.58.0", "codex_cli_rs")
    assert session.cwd == "/home/user/projects/temp/chatbot-ui"
    [turn] = session.turns
    assert turn.request == fixture_line(ACIDIC, 4)["payload"]["message"].strip()
    assert turn.request.startswith("finish up the users work by rigging up the chatbot-ui to use lmstudio")
    assert "<environment_context>" not in turn.request
    assert turn.timestamp.isoformat() == "2025-11-17T21:32:46.911000+00:00"
    # shell outputs carry metadata.exit_code: 2, 2 and 1 are the failures (the rest are 0)
    assert turn.tool_errors == 3
    assert {tool.name for tool in turn.tools} == {"shell", "update_plan"}
    assert turn.final_answer == ""  # the rollout ends mid-turn
    assert result.stats.requests == 1


def test_0_77_rollout_skips_agents_md_and_environment_context(tmp_path):
    install(tmp_path, SIMONW)
    [session] = run(tmp_path).sessions
    assert [t.request for t in session.turns] == [
        "can you analyse the MD files in this directory and determine if the info we have is clear enough to start "
        "planning the migration?"]
    assert session.version == "0.77.0"


def test_0_135_exec_run_is_headless_and_skipped_unless_asked(tmp_path):
    install(tmp_path, EXEC)
    skipped = run(tmp_path)
    assert skipped.sessions == []
    assert skipped.stats.sessions_skipped == {"headless": 1}
    [session] = run(tmp_path, include_sdk_sessions=True).sessions
    [turn] = session.turns  # the developer message (line 3) is never a request
    assert (turn.request, turn.final_answer) == ("[REDACTED_PROMPT]", "[REDACTED_ASSISTANT_TEXT]")
    assert session.entrypoint == "codex_exec"


def test_0_146_schema_fixture_prompts_abort_and_answer(tmp_path):
    install(tmp_path, SCHEMA)
    result = run(tmp_path)
    assert result.stats.malformed_lines == {}
    [session] = result.sessions
    assert session.cwd == "/tmp/repo"
    assert session.version == "0.146.0"
    # line 4 (event) and line 6 (response item) are one prompt; lines 71 and 85 are two more events
    assert [t.request for t in session.turns] == ["List the files", "[trimmed for fixture]", "[trimmed for fixture]"]
    first = session.turns[0]
    assert first.aborted is True  # event_msg turn_aborted (line 20)
    assert first.final_answer == "Found 2 files."
    assert "shell" in [tool.name for tool in first.tools]


# --------------------------------------------------------------------------- synthetic variants


def test_ide_wrapper_keeps_only_the_request(tmp_path):
    wrapped = ("# Context from my IDE setup:\n\n## Active file: src/app.ts\n\n## Open tabs:\n- src/app.ts\n\n"
               "## My request for Codex:\nrename the handler to onSubmit\n")
    write_rollout(day_dir(tmp_path), [meta(source="vscode", originator="codex_vscode"), user_item(wrapped, 1),
                                      user_event(wrapped, 1), agent_event("Renamed.")])
    [turn] = run(tmp_path).sessions[0].turns
    assert turn.request == "rename the handler to onSubmit"
    assert turn.final_answer == "Renamed."


def test_event_before_response_item_still_counts_one_prompt(tmp_path):
    write_rollout(day_dir(tmp_path), [meta(), user_event("add a README", 1), user_item("add a README", 2),
                                      agent_event("Added."), user_event("now a LICENSE", 6),
                                      user_item("now a LICENSE", 7)])
    assert [t.request for t in run(tmp_path).sessions[0].turns] == ["add a README", "now a LICENSE"]


def test_response_items_alone_give_the_prompts_of_files_without_events(tmp_path):
    write_rollout(day_dir(tmp_path), [
        meta(),
        user_item("<environment_context>\n  <cwd>/home/dev/repo</cwd>\n</environment_context>", 1),
        line("response_item", {"type": "message", "role": "developer",
                               "content": [{"type": "input_text", "text": "You are Codex, follow the rules"}]}, 1),
        user_item("fix the flaky test", 2),
        line("response_item", {"type": "message", "role": "assistant",
                               "content": [{"type": "output_text", "text": "Fixed by pinning the seed."}]}, 3),
    ])
    [turn] = run(tmp_path).sessions[0].turns
    assert (turn.request, turn.final_answer) == ("fix the flaky test", "Fixed by pinning the seed.")


def test_legacy_pre_envelope_rollout_is_read(tmp_path):
    records = [
        {"id": THREAD, "timestamp": "2025-06-01T10:00:00.000Z", "instructions": None},
        {"record_type": "state"},
        {"type": "message", "role": "user", "content": [
            {"type": "input_text",
             "text": "<environment_context>\n<cwd>/home/dev/repo</cwd>\n</environment_context>"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "add type hints"}]},
        {"type": "function_call", "name": "shell", "arguments": "{\"command\":[\"mypy\",\".\"]}", "call_id": "c1"},
        {"type": "function_call_output", "call_id": "c1",
         "output": "{\"output\":\"error: 3 issues\",\"metadata\":{\"exit_code\":1,\"duration_seconds\":0.5}}"},
        {"record_type": "state"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Added hints."}]},
    ]
    write_rollout(day_dir(tmp_path, "2025/06/01"), records, name=f"rollout-2025-06-01T10-00-00-{THREAD}.jsonl")
    result = run(tmp_path, scope="project", project=Path(CWD))
    [session] = result.sessions
    assert session.cwd == CWD  # taken from <environment_context>, the legacy header has no cwd
    [turn] = session.turns
    assert turn.request == "add type hints"
    assert turn.tools[0].error == "error: 3 issues"
    assert turn.final_answer == "Added hints."
    assert result.stats.records_unknown == 0


@pytest.mark.parametrize("fields", [
    {"source": {"subagent": "review"}},
    {"source": {"subagent": {"thread_spawn": {"parent_thread_id": "p", "depth": 1}}}},
    {"source": "review"},
    {"parent_thread_id": "019b0000-0000-7000-8000-00000000000f"},
])
def test_subagent_and_review_threads_are_skipped(tmp_path, fields):
    write_rollout(day_dir(tmp_path), [meta(**fields), user_event("review the diff"), agent_event("LGTM")])
    result = run(tmp_path)
    assert result.sessions == []
    assert result.stats.sessions_skipped == {"subagent": 1}


def test_developer_and_injected_user_messages_are_never_requests(tmp_path):
    write_rollout(day_dir(tmp_path), [
        meta(),
        user_item("# AGENTS.md instructions for /home/dev/repo\n\n<INSTRUCTIONS>be terse</INSTRUCTIONS>", 1),
        user_item("<user_instructions>always test</user_instructions>", 1),
        user_item("<turn_aborted>\nThe user interrupted the previous turn on purpose.\n</turn_aborted>", 1),
        line("response_item", {"type": "message", "role": "developer",
                               "content": [{"type": "input_text", "text": "<permissions instructions>"}]}, 1),
    ])
    result = run(tmp_path)
    assert result.sessions == []
    assert result.stats.sessions_skipped == {"no_requests": 1}


def test_turn_aborted_marks_the_turn_and_the_next_prompt_starts_a_new_one(tmp_path):
    write_rollout(day_dir(tmp_path), [
        meta(), user_event("migrate the db", 1),
        line("event_msg", {"type": "turn_aborted", "reason": "interrupted"}, 2),
        user_event("forget it, just add the column", 3),
    ])
    first, second = run(tmp_path).sessions[0].turns
    assert (first.aborted, second.aborted) == (True, False)


def test_tool_errors_come_from_exit_codes_and_failed_patches(tmp_path):
    write_rollout(day_dir(tmp_path), [
        meta(), user_event("run the build", 1),
        line("response_item", {"type": "function_call", "name": "exec_command", "arguments": "{\"cmd\":\"make\"}",
                               "call_id": "c1"}, 2),
        line("response_item", {"type": "function_call_output", "call_id": "c1",
                               "output": "Exit code: 2\nWall time: 1.2 seconds\nOutput:\nmake: *** [all] Error 2"}, 3),
        line("response_item", {"type": "custom_tool_call", "name": "apply_patch", "input": "*** Begin Patch",
                               "call_id": "c2", "status": "completed"}, 4),
        line("event_msg", {"type": "patch_apply_end", "call_id": "c2", "success": False,
                           "stderr": "hunk failed"}, 5),
        line("response_item", {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c3"}, 6),
        line("response_item", {"type": "function_call_output", "call_id": "c3",
                               "output": "Exit code: 0\nWall time: 0.1 seconds\nOutput:\nok"}, 7),
    ])
    [turn] = run(tmp_path).sessions[0].turns
    assert [(tool.name, tool.error) for tool in turn.tools] == [
        ("exec_command", "make: *** [all] Error 2"), ("apply_patch", "hunk failed"), ("shell", None)]


def test_zst_rollout_is_read_as_a_stream(tmp_path):
    compressed = zstandard.ZstdCompressor().compress((FIXTURES / SIMONW).read_bytes())
    (day_dir(tmp_path) / (ROLLOUT + ".zst")).write_bytes(compressed)
    [session] = run(tmp_path).sessions
    assert session.turns[0].request.startswith("can you analyse the MD files")
    assert session.path.endswith(".jsonl.zst")


def test_plain_rollout_wins_over_its_zst_twin(tmp_path):
    folder = day_dir(tmp_path)
    shutil.copyfile(FIXTURES / SIMONW, folder / ROLLOUT)
    (folder / (ROLLOUT + ".zst")).write_bytes(zstandard.ZstdCompressor().compress((FIXTURES / SIMONW).read_bytes()))
    result = run(tmp_path)
    assert [session.path for session in result.sessions] == [str(folder / ROLLOUT)]
    assert result.stats.files_scanned == 1


def test_corrupt_zst_file_is_counted_unreadable(tmp_path):
    (day_dir(tmp_path) / (ROLLOUT + ".zst")).write_bytes(b"\x28\xb5\x2f\xfd" + b"not really zstd" * 10)
    result = run(tmp_path)
    assert result.sessions == []
    assert result.stats.sessions_skipped == {"unreadable": 1}


def test_archived_sessions_are_read(tmp_path):
    archived = tmp_path / "archived_sessions"
    archived.mkdir()
    write_rollout(archived, [meta(), user_event("archive me"), agent_event("ok")])
    assert [t.request for t in run(tmp_path).sessions[0].turns] == ["archive me"]


def test_rollout_with_our_own_replay_marker_is_skipped(tmp_path):
    write_rollout(day_dir(tmp_path), [meta(), user_event(f"{SESSION_MARKER} Task: add tests"), agent_event("ok")])
    result = run(tmp_path)
    assert result.sessions == []
    assert result.stats.sessions_skipped == {"own_marker": 1}


def test_cheap_line_skip_recognizes_only_irrelevant_envelopes():
    def head(kind: str, payload_type: str) -> bytes:
        return orjson.dumps(line(kind, {"type": payload_type, "x": 1}))[:256]

    assert skip_line(head("response_item", "reasoning"))
    assert skip_line(head("event_msg", "token_count"))
    assert skip_line(orjson.dumps(line("turn_context", {"cwd": "/x"})))
    assert not skip_line(head("response_item", "message"))
    assert not skip_line(head("event_msg", "user_message"))
    assert not skip_line(b'{"type":"message","role":"user"}')


@pytest.mark.parametrize(("text", "expected"), [
    ("# Context from my IDE setup:\n\n## My request for Codex:\nfix it", "fix it"),
    ("<environment_context><cwd>/x</cwd></environment_context>", ""),
    ("  plain request  ", "plain request"),
])
def test_strip_injected(text, expected):
    assert strip_injected(text) == expected


@pytest.mark.parametrize(("output", "expected"), [
    ('{"output":"boom","metadata":{"exit_code":1,"duration_seconds":0.1}}', "boom"),
    ('{"output":"fine","metadata":{"exit_code":0,"duration_seconds":0.1}}', None),
    ("Plan updated", None),
    ("Process exited with code 3\nOutput:\nsegfault", "segfault"),
    ([{"type": "input_text", "text": "Exit code: 1\nOutput:\nno"}], "no"),
])
def test_output_error_reads_exit_codes(output, expected):
    assert output_error(output) == expected


# --------------------------------------------------------------------------- large tool outputs read without a parse

PYTEST_LOG = "tests/test_a.py::test_one PASSED \u2192 ok\n" * 200  # ~9 KB


def tool_output(call_id: str, output: str, second: int = 3) -> dict:
    return line("response_item", {"type": "function_call_output", "call_id": call_id, "output": output}, second)


def shell_output(text: str, exit_code: int) -> str:
    """The output of a shell call as Codex stores it: JSON in a string."""
    return orjson.dumps({"output": text, "metadata": {"exit_code": exit_code, "duration_seconds": 1.5}}).decode()


@pytest.mark.parametrize(("output", "raw_edit", "light", "failed"), [
    (shell_output(PYTEST_LOG, 0), None, True, False),
    (PYTEST_LOG, None, True, False),
    ("Exit code: 0\nWall time: 2 seconds\nOutput:\n" + PYTEST_LOG, None, False, False),  # a marker: parsed
    (shell_output(PYTEST_LOG, 2), None, False, True),
    ("Exit code: 1\nWall time: 2 seconds\nOutput:\n" + PYTEST_LOG, None, False, True),
    ("Process exited with code 3\n" + PYTEST_LOG, None, False, True),
    (PYTEST_LOG, (b'"output":"tests', b'"output":"\\u0045xit code: 1\\ntests'), False, True),  # escaped marker
])
def test_large_tool_output_is_read_without_a_parse_only_when_it_reports_no_failure(tmp_path, monkeypatch, output,
                                                                                    raw_edit, light, failed):
    from skillopt_sleep.harvest import codex

    records = [meta(), user_event("run the tests", 1),
               line("response_item", {"type": "function_call", "name": "shell", "call_id": "c1",
                                      "arguments": '{"command":["pytest"]}'}, 2)]
    path = write_rollout(day_dir(tmp_path), records)
    raw = orjson.dumps(tool_output("c1", output))
    if raw_edit is not None:
        raw = raw.replace(*raw_edit, 1)
    with open(path, "ab") as handle:
        handle.write(raw + b"\n")
    assert (codex.plain_tool_output(raw, 0, len(raw)) is not None) is light
    fast = run(tmp_path)
    monkeypatch.setattr(codex, "PLAIN_OUTPUT_MIN_BYTES", 1 << 40)
    full = run(tmp_path)
    assert [session.model_dump() for session in fast.sessions] == [session.model_dump() for session in full.sessions]
    [turn] = fast.sessions[0].turns
    assert turn.tool_errors == (1 if failed else 0)


def test_the_expansion_of_a_custom_prompt_is_a_command_and_only_its_arguments_are_typed(tmp_path):
    # Codex 0.5x records a custom prompt's expansion as the user's message (real: Kooksun/Lotto645, spec-kit prompts)
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "speckit.specify.md").write_text(
        "---\ndescription: Create the feature specification.\n---\n\n## User Input\n\n```text\n$ARGUMENTS\n```\n\n"
        "You **MUST** consider the user input before proceeding. Never skip a section; `$ARGUMENTS` is the text.\n",
        encoding="utf-8")
    typed = "A lottery web app. Keep the implementation simple."
    expansion = (f"\n## User Input\n\n```text\n{typed}\n```\n\nYou **MUST** consider the user input before "
                 f"proceeding. Never skip a section; `{typed}` is the text.\n")
    records = [{"timestamp": "2026-03-01T10:00:00.000Z", "type": "session_meta",
                "payload": {"id": "019a0000-0000-7000-8000-000000000001", "cwd": "/repo", "originator": "codex_cli_rs",
                            "cli_version": "0.58.0", "source": "cli"}},
               {"timestamp": "2026-03-01T10:00:01.000Z", "type": "event_msg",
                "payload": {"type": "user_message", "message": expansion, "images": []}},
               {"timestamp": "2026-03-01T10:00:02.000Z", "type": "event_msg",
                "payload": {"type": "agent_message", "message": "Spec written."}}]
    target = day_dir(tmp_path) / "rollout-2026-03-01T10-00-00-019a0000-0000-7000-8000-000000000001.jsonl"
    target.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    (session,) = run(tmp_path).sessions
    (turn,) = session.turns
    assert turn.kind == "command" and turn.request == f"/prompts:speckit.specify {typed}"
    assert turn.command_body == expansion.strip()
