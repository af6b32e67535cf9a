"""End to end, per agent: the real ``skillopt-sleep`` CLI, in a subprocess, on sessions written in each agent's own
on-disk layout (``tests/agent_sessions.py``), learning the pnpm rule and writing it to that agent's memory file.

The world is ``transcripts.PNPM_CONVERSATIONS``: eight sessions, each a request about "this repo" answered with npm,
corrected with "no, we use pnpm in this repo, never npm", then fixed. So every source harvests 8 sessions and 16
requests (the correction is a request of its own), mines 8 tasks carrying the user's rule, and a night with
``--apply`` writes the rule inside the managed block of ``documents.MEMORY_FILES[source]``. The backend is the mock
simulator (fast and deterministic); everything else is the real code.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agent_sessions import WRITERS
from cli_subprocess import run_cli
from transcripts import PNPM_CONVERSATIONS, PNPM_CORRECTION, write_claude_sessions

from skillopt_sleep.documents.block import BLOCK_BEGIN, BLOCK_END, managed_block_segments
from skillopt_sleep.documents.targets import AIDER_NOTE, MEMORY_FILES

RULE = PNPM_CORRECTION.removeprefix("no, ")  # "we use pnpm in this repo, never npm"
FIXED_ANSWER = "Sorry, I will use pnpm."
#: Where each agent keeps its sessions below $HOME (its harvester's ``default_root()``); aider: the project itself.
HOMES = {"claude": ".claude", "gemini": ".gemini", "opencode": ".local/share/opencode", "cursor": ".cursor",
         "copilot": ".copilot", "cline": ".config/Code/User/globalStorage"}
#: ``files_scanned`` for the eight conversations, as each layout implies: one recording / transcript / event log /
#: task folder per session (gemini, cursor, copilot, cline: its ``ui_messages.json``), one row of the ``session``
#: table per session (opencode: the harvester counts sessions, not the one database file), and aider's one
#: ``.aider.chat.history.md`` holding all eight runs.
FILES_SCANNED = {"gemini": 8, "opencode": 8, "cursor": 8, "copilot": 8, "cline": 8, "aider": 1}
@pytest.fixture
def cli_env(cli_env):
    """The e2e environment (``tests/e2e/conftest.py``) with the mock simulator as the backend."""
    return {**cli_env, "SKILLOPT_SLEEP_BACKEND": "mock"}


def agent_home(source: str, cli_env: dict[str, str], project: Path) -> Path:
    """The agent's root under the test's $HOME (aider keeps its history in the project)."""
    return project if source == "aider" else Path(cli_env["HOME"]) / HOMES[source]


def make_project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    return project


def managed_block(text: str) -> str:
    """The managed block of a document (markers included); fails when it has none."""
    segments = managed_block_segments(text)
    assert segments is not None, f"no managed block in:\n{text}"
    return segments[1]


@pytest.mark.parametrize("source", list(WRITERS))
def test_run_now_learns_the_rule_from_the_agents_sessions_and_writes_its_memory_file(source, tmp_path, cli_env):
    project = make_project(tmp_path)
    home = agent_home(source, cli_env, project)
    WRITERS[source](home, project, PNPM_CONVERSATIONS, fixed_answer=FIXED_ANSWER)
    done = run_cli("run-now", "--source", source, "--home", f"{source}={home}", "--lookback-hours", "0", "--json",
                   "--apply", env=cli_env, cwd=project)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    night_dir = Path(out["night_dir"])
    diagnostics = json.loads((night_dir / "diagnostics.json").read_text())

    # what was read
    assert diagnostics["project"] == str(project.resolve())
    assert diagnostics["sources"] == [source]
    harvest = diagnostics["harvest"]
    assert harvest["sessions_harvested"] == 8
    assert harvest["requests"] == 16
    assert harvest["files_scanned"] == FILES_SCANNED[source]
    assert harvest["sessions_skipped"] == {} and harvest["malformed_lines"] == {}
    assert harvest["bytes_read"] > 0

    # what was mined: one task per request, each carrying the rule the user stated
    tasks = [json.loads(line) for line in (night_dir / "tasks.jsonl").read_text().splitlines()]
    assert diagnostics["tasks"]["total"] == len(tasks) == 8
    assert {task["request"] for task in tasks} == {request for request, _, _ in PNPM_CONVERSATIONS}
    assert all(RULE in [rule["text"] for rule in task["rules"]] for task in tasks)
    mining = diagnostics["mining"]
    assert RULE in [rule["text"] for rule in mining["rules"]]
    assert mining["replayable"] == 8 and mining["hard_evidence"] == 8

    # the decision and the edit
    assert diagnostics["status"] == "accepted", diagnostics["summary"]
    # the morning line leads with what changed in the agent's file: the rule compiled from its checks
    assert diagnostics["summary"].startswith(f'{MEMORY_FILES[source]}: learned 1 rule ("Use `pnpm`, never `npm`.")')
    assert "LEARNED" in diagnostics["summary"]
    assert [(c["file"], c["state"]) for c in diagnostics["changes"]] == [(MEMORY_FILES[source], "written")]
    applied = [edit for edit in diagnostics["edits"] if edit["status"] == "applied"]
    assert applied and any("pnpm" in edit["content"] for edit in applied)
    memory = project / MEMORY_FILES[source]
    assert diagnostics["proposed"] == [str(memory)]
    assert out["applied"] == [str(memory)]

    # the memory file the agent reads, written with the rule inside the managed block
    text = memory.read_text(encoding="utf-8")
    block = managed_block(text)
    assert block.startswith(BLOCK_BEGIN) and block.rstrip().endswith(BLOCK_END)
    assert "pnpm" in block
    if source == "cursor":
        assert text.startswith("---\n")
        frontmatter = text.split("---\n")[1]
        assert "alwaysApply: true" in frontmatter.splitlines()
    if source == "aider":
        assert "--read" in diagnostics["summary"] and AIDER_NOTE in diagnostics["summary"]
    others = {name for name in MEMORY_FILES.values() if name != MEMORY_FILES[source]}
    assert not any((project / name).exists() for name in others)  # no other agent's file is written


@pytest.mark.parametrize("source", list(WRITERS))
def test_harvest_reports_what_it_read_from_the_agents_sessions(source, tmp_path, cli_env):
    project = make_project(tmp_path)
    home = agent_home(source, cli_env, project)
    WRITERS[source](home, project, PNPM_CONVERSATIONS, fixed_answer=FIXED_ANSWER)
    done = run_cli("harvest", "--source", source, "--home", f"{source}={home}", "--lookback-hours", "0", "--json",
                   env=cli_env, cwd=project)
    assert done.returncode == 0, done.stderr
    preview = json.loads(done.stdout)
    assert preview["sources"] == [source]
    assert preview["harvest"]["sessions_harvested"] == 8 and preview["harvest"]["requests"] == 16
    assert preview["harvest"]["files_scanned"] == FILES_SCANNED[source]
    assert preview["per_source"] == {source: preview["harvest"]}
    sessions = preview["sessions"]
    assert len(sessions) == 8 and len({s["session_id"] for s in sessions}) == 8
    for session in sessions:
        assert session["source"] == source
        assert session["cwd"] == str(project)
        assert session["requests"] == 2
        assert session["path"].startswith(str(home))
    assert len(preview["tasks"]) == 8
    assert all([rule["text"] for rule in task["rules"]] == [RULE] and task["replayable"] for task in preview["tasks"])
    # a preview: the night after it still reads everything
    again = json.loads(run_cli("harvest", "--source", source, "--home", f"{source}={home}", "--lookback-hours",
                               "0", "--json", env=cli_env, cwd=project).stdout)
    assert again["harvest"]["sessions_harvested"] == 8


def test_a_night_with_two_sources_writes_both_memory_files_as_one_change_and_revert_restores_both(tmp_path,
                                                                                               cli_env):
    project = make_project(tmp_path)
    claude_home = agent_home("claude", cli_env, project)
    gemini_home = agent_home("gemini", cli_env, project)
    write_claude_sessions(claude_home, project, PNPM_CONVERSATIONS, fixed_answer=FIXED_ANSWER)
    WRITERS["gemini"](gemini_home, project, PNPM_CONVERSATIONS, fixed_answer=FIXED_ANSWER)
    claude_md, gemini_md = project / "CLAUDE.md", project / "GEMINI.md"
    skill = project / ".claude" / "skills" / "skillopt-sleep" / "SKILL.md"
    notes = "# Notes\n\nKeep commits small.\n"
    claude_md.write_text(notes, encoding="utf-8")  # the user's own text, kept outside the block

    done = run_cli("run-now", "--source", "claude,gemini", "--claude-home", str(claude_home),
                   "--home", f"gemini={gemini_home}", "--lookback-hours", "0", "--json", "--apply",
                   env=cli_env, cwd=project)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    diagnostics = json.loads((Path(out["night_dir"]) / "diagnostics.json").read_text())
    assert diagnostics["sources"] == ["claude", "gemini"]
    assert diagnostics["harvest"]["sessions_harvested"] == 16 and diagnostics["harvest"]["requests"] == 32
    per_source = diagnostics["harvest_per_source"]
    assert list(per_source) == ["claude", "gemini"]
    assert [(s["sessions_harvested"], s["requests"]) for s in per_source.values()] == [(8, 16), (8, 16)]
    assert diagnostics["status"] == "accepted", diagnostics["summary"]
    assert diagnostics["proposed"] == out["applied"] == [str(claude_md), str(gemini_md)]

    claude_text, gemini_text = claude_md.read_text(encoding="utf-8"), gemini_md.read_text(encoding="utf-8")
    assert claude_text.startswith(notes)
    block = managed_block(claude_text)
    assert "pnpm" in block and managed_block(gemini_text) == block  # the same block, mirrored
    # every accepted edit targets the memory: the skill (absent) is not created by the night
    assert {edit["target"] for edit in diagnostics["edits"] if edit["status"] == "applied"} == {"memory"}
    assert not skill.exists()

    reverted = run_cli("revert", "--json", env=cli_env, cwd=project)
    assert reverted.returncode == 0, reverted.stderr
    record = json.loads(reverted.stdout)
    assert record["status"] == "reverted" and record["night_id"] == diagnostics["night_id"]
    assert sorted((d["file"], d["kind"], d["status"]) for d in record["documents"]) == [
        ("CLAUDE.md", "memory", "reverted"), ("GEMINI.md", "memory:gemini", "reverted")]
    assert claude_md.read_text(encoding="utf-8") == notes
    assert not gemini_md.exists()


def test_home_flag_also_names_the_claude_root(tmp_path, cli_env):
    project = make_project(tmp_path)
    claude_home = agent_home("claude", cli_env, project)
    write_claude_sessions(claude_home, project, PNPM_CONVERSATIONS, fixed_answer=FIXED_ANSWER)
    done = run_cli("harvest", "--source", "claude", "--home", f"claude={claude_home}", "--lookback-hours", "0",
                   "--json", env=cli_env, cwd=project)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["harvest"]["sessions_harvested"] == 8


def test_harvest_prints_one_line_per_source_with_what_it_skipped(tmp_path, cli_env):
    project = make_project(tmp_path)
    gemini_home, cursor_home = agent_home("gemini", cli_env, project), agent_home("cursor", cli_env, project)
    WRITERS["gemini"](gemini_home, project, PNPM_CONVERSATIONS[:2], fixed_answer=FIXED_ANSWER)
    WRITERS["cursor"](cursor_home, tmp_path / "elsewhere", PNPM_CONVERSATIONS[:3], fixed_answer=FIXED_ANSWER)
    (tmp_path / "elsewhere").mkdir()
    done = run_cli("harvest", "--source", "gemini,cursor", "--lookback-hours", "0", env=cli_env, cwd=project)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("gemini: files scanned 2, sessions 2, requests 4")
    assert lines[1].startswith("cursor: files scanned 3, sessions 0, requests 0")
    assert "skipped sessions: out_of_scope 3" in lines[1]  # another project's sessions, counted, not read
