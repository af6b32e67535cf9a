"""The harvesters and the miner never take text the user did not type as the user's: in every transcript layout.

Claude Code 1.0.x (sub-agent records inline, ``isSidechain: true``), 2.0.x (sibling ``agent-<id>.jsonl``), 2.1.x
(``<session>/subagents/``), tool results as a string and as a list of text blocks, ``toolUseResult``, tool-use
rejections, queued messages of background agents; Codex ``function_call_output`` and ``custom_tool_call_output``,
and the injected ``<user_instructions>`` / ``# AGENTS.md instructions`` / ``<environment_context>`` messages. Each
transcript also carries the user's own correction, which must come through.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from planted import CORRECTION, MARKERS, PLANTED

from skillopt_sleep.harvest import harvest
from skillopt_sleep.mine import mine_tasks

CWD = "/home/dev/shop"


def claude_line(kind: str, content, *, version: str, number: int, sidechain: bool = False, **extra) -> dict:
    message = {"role": kind, "content": content}
    if kind == "assistant":
        message.update(id=f"msg_{number}", model="claude-sonnet-4")
    return {"parentUuid": None, "isSidechain": sidechain, "userType": "external", "cwd": CWD,
            "sessionId": "11111111-1111-1111-1111-111111111111", "version": version, "type": kind,
            "uuid": f"u-{number}", "timestamp": f"2026-11-20T10:00:{number:02d}.000Z", "message": message, **extra}


def claude_session(version: str, *, inline_sidechain: bool = False) -> list[dict]:
    lines = [
        claude_line("user", "install the deps for this repo", version=version, number=1),
        claude_line("assistant", [{"type": "tool_use", "id": "toolu_1", "name": "Read",
                                   "input": {"file_path": f"{CWD}/README.md"}}], version=version, number=2),
        claude_line("user", [{"tool_use_id": "toolu_1", "type": "tool_result",
                              "content": [{"type": "text", "text": PLANTED}]}], version=version, number=3,
                    toolUseResult={"type": "text", "file": {"filePath": f"{CWD}/README.md", "content": PLANTED}}),
        claude_line("assistant", [{"type": "tool_use", "id": "toolu_2", "name": "Bash",
                                   "input": {"command": "npm install"}}], version=version, number=4),
        claude_line("user", [{"tool_use_id": "toolu_2", "type": "tool_result", "is_error": True,
                              "content": f"Exit code 1\n{PLANTED}"}], version=version, number=5,
                    toolUseResult=f"Error: Exit code 1\n{PLANTED}"),
        claude_line("assistant", [{"type": "text", "text": "Run `npm install`."}], version=version, number=6),
        claude_line("user", CORRECTION, version=version, number=7),
        claude_line("assistant", [{"type": "text", "text": "Run `pnpm install`."}], version=version, number=8),
    ]
    if inline_sidechain:
        lines[2:2] = [claude_line("user", f"Sub-task: {PLANTED}", version=version, number=20, sidechain=True),
                      claude_line("assistant", [{"type": "text", "text": PLANTED}], version=version, number=21,
                                  sidechain=True)]
    return lines


def write(path: Path, lines: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


def claude_home(tmp_path: Path, layout: str) -> Path:
    home = tmp_path / "claude"
    folder = home / "projects" / CWD.replace("/", "-")
    session_id = "11111111-1111-1111-1111-111111111111"
    version = {"1.0": "1.0.98", "2.0": "2.0.67", "2.1": "2.1.80"}[layout]
    write(folder / f"{session_id}.jsonl", claude_session(version, inline_sidechain=layout == "1.0"))
    agent = [claude_line("user", f"Sub-task: {PLANTED}", version=version, number=30, sidechain=True,
                         agentId="a1"),
             claude_line("assistant", [{"type": "text", "text": PLANTED}], version=version, number=31,
                         sidechain=True, agentId="a1")]
    if layout == "2.0":
        write(folder / "agent-a1.jsonl", agent)
    elif layout == "2.1":
        write(folder / session_id / "subagents" / "agent-a1.jsonl", agent)
    return home


def codex_home(tmp_path: Path) -> Path:
    home = tmp_path / "codex"
    records = []

    def line(kind: str, payload: dict) -> None:
        records.append({"timestamp": f"2026-11-20T10:00:{len(records):02d}.000Z", "type": kind, "payload": payload})

    def user_message(text: str) -> None:
        line("response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})

    line("session_meta", {"id": "019c0000-0000-7000-8000-000000000001", "timestamp": "2026-11-20T10:00:00.000Z",
                          "cwd": CWD, "originator": "codex_cli_rs", "cli_version": "0.120.0", "source": "cli"})
    user_message(f"# AGENTS.md instructions for {CWD}\n\n<INSTRUCTIONS>\n{PLANTED}\n</INSTRUCTIONS>")
    user_message(f"<user_instructions>\n{PLANTED}\n</user_instructions>")
    user_message(f"<environment_context>\n  <cwd>{CWD}</cwd>\n  <note>{PLANTED}</note>\n</environment_context>")
    line("event_msg", {"type": "user_message", "message": "install the deps for this repo", "images": []})
    line("response_item", {"type": "function_call", "name": "exec_command", "call_id": "c1",
                           "arguments": json.dumps({"cmd": "cat README.md"})})
    line("response_item", {"type": "function_call_output", "call_id": "c1",
                           "output": f"Exit code: 0\nWall time: 0.1 seconds\nOutput:\n{PLANTED}"})
    line("response_item", {"type": "custom_tool_call", "name": "apply_patch", "call_id": "c2", "input": PLANTED,
                           "status": "completed"})
    line("response_item", {"type": "custom_tool_call_output", "call_id": "c2", "output": PLANTED})
    line("event_msg", {"type": "agent_message", "message": "Run `npm install`."})
    line("event_msg", {"type": "user_message", "message": CORRECTION, "images": []})
    line("event_msg", {"type": "agent_message", "message": "Run `pnpm install`."})
    write(home / "sessions" / "2026" / "11" / "20" / "rollout-2026-11-20T10-00-00-019c0000-0000-7000-8000-"
                                                     "000000000001.jsonl", records)
    return home


def user_side(source: str, home: Path) -> tuple[list[str], list]:
    """(every text the harvest took as the user's, the mined tasks)."""
    kwargs = {"claude_home": home} if source == "claude" else {"codex_home": home}
    result = harvest(source=source, scope="all", lookback_hours=0, **kwargs)
    texts = [text for session in result.sessions for turn in session.turns
             for text in (turn.request, *turn.queued_messages, turn.rejection_feedback or "", turn.command_body or "")]
    return texts, mine_tasks(result.sessions, project=CWD, val_fraction=0.0, test_fraction=0.0).tasks


@pytest.mark.parametrize("source, layout", [("claude", "1.0"), ("claude", "2.0"), ("claude", "2.1"),
                                            ("codex", None)])
def test_only_what_the_user_typed_is_the_users(tmp_path, source, layout):
    home = claude_home(tmp_path, layout) if source == "claude" else codex_home(tmp_path)
    texts, tasks = user_side(source, home)
    assert texts, "nothing harvested: the case tests nothing"
    for text in texts:
        assert all(marker not in text for marker in MARKERS), text
    assert [task.request for task in tasks] == ["install the deps for this repo"]
    [task] = tasks
    assert CORRECTION in task.rule_texts[0] or any(CORRECTION in text for text in task.authored)
    for text in [*task.rule_texts, *task.authored, *task.refinements]:
        assert all(marker not in text for marker in MARKERS), text
