"""No single input stops a harvest: a record or file whose reading raises is skipped, counted (``record_error``,
``file_error``, ``source_error``), named in ``HarvestStats.errors``, and checkpointed so the next night goes on;
``compact_json`` never raises (issue 23: a tool input nested 1,000 levels deep ended every night with exit 70)."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path

import orjson
import pytest
from source_run import harvest_context
from typer.testing import CliRunner

from skillopt_sleep.cli.app import app
from skillopt_sleep.harvest import claude_code, harvest, read_plan, reader, sources, turns, workers
from skillopt_sleep.harvest.read_plan import HarvestContext
from skillopt_sleep.harvest.turns import compact_json
from skillopt_sleep.models import FileCheckpoint, HarvestStats

NOW = datetime(2026, 3, 2, 0, 0, tzinfo=timezone.utc)
DEEP = 1_000
DEEP_LIST = b"[" * DEEP + b"]" * DEEP


def _line(record: dict) -> bytes:
    """``record`` as a JSONL line; the value ``"DEEP"`` written as a list nested ``DEEP`` levels (orjson reads
    up to 1,024 levels but writes at most 254)."""
    return orjson.dumps(record).replace(b'"DEEP"', DEEP_LIST) + b"\n"


def _session(home: Path, name: str, request: str, tool_input: object = None, tool_name: object = "Bash") -> Path:
    when = "2026-03-01T10:00:0{}Z"
    user = {"type": "user", "sessionId": name, "cwd": "/home/u/repo", "version": "2.1.51", "timestamp": when.format(0),
            "message": {"role": "user", "content": request}}
    tool = {"type": "assistant", "sessionId": name, "cwd": "/home/u/repo", "timestamp": when.format(1),
            "message": {"id": "m1", "role": "assistant", "model": "claude-sonnet-4", "content": [
                {"type": "tool_use", "id": "t1", "name": tool_name, "input": tool_input or {"command": "ls"}}]}}
    answer = {"type": "assistant", "sessionId": name, "cwd": "/home/u/repo", "timestamp": when.format(2),
              "message": {"id": "m2", "role": "assistant", "model": "claude-sonnet-4",
                          "content": [{"type": "text", "text": "Done."}]}}
    path = home / "projects" / "-home-u-repo" / f"{name}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(_line(user) + _line(tool) + _line(answer))
    return path


def _run(home: Path, checkpoints=None, **options):
    return harvest(source="claude", claude_home=home, scope="all", lookback_hours=0, now=NOW,
                   checkpoints=checkpoints, **options)


def test_a_tool_input_nested_1000_deep_is_harvested_and_the_next_night_goes_on(tmp_path):
    home = tmp_path / "claude"
    deep = _session(home, "deep", "fix the parser", tool_input="DEEP")
    good = _session(home, "good", "add a test")
    runner = CliRunner()
    shown = runner.invoke(app, ["harvest", "--json", "--claude-home", str(home), "--source", "claude", "--scope",
                                "all", "--lookback-hours", "0", "--project", str(tmp_path)])
    assert shown.exit_code == 0, shown.output
    preview = json.loads(shown.stdout)
    assert {session["path"]: session["requests"] for session in preview["sessions"]} == {str(deep): 1, str(good): 1}
    first = _run(home)
    tools = {session.path: session.turns[0].tools[0] for session in first.sessions}
    assert tools[str(deep)].input_head == "[" * turns.JSON_DEPTH_KEPT + '"…"' + "]" * turns.JSON_DEPTH_KEPT
    assert tools[str(good)].input_head == '{"command":"ls"}'
    assert first.stats.errors == [] and first.checkpoints[str(deep)].offset == deep.stat().st_size
    second = _run(home, checkpoints=first.checkpoints)  # the next night: nothing new, nothing raised
    assert (second.sessions, second.stats.files_unchanged, second.stats.errors) == ([], 2, [])


def test_a_record_that_makes_the_parser_raise_is_skipped_counted_and_named(tmp_path):
    home = tmp_path / "claude"
    bad = _session(home, "bad", "fix the parser", tool_name="DEEP")  # str() of it raises RecursionError
    good = _session(home, "good", "add a test")
    first = _run(home)
    assert first.stats.malformed_lines == {reader.RECORD_ERROR: 1}
    assert first.stats.errors == [f"record_error {bad}: RecursionError"]
    turns = {session.path: session.turns for session in first.sessions}
    assert turns[str(bad)][0].request == "fix the parser" and turns[str(bad)][0].final_answer == "Done."
    assert turns[str(bad)][0].tools == []  # the bad record only is lost
    assert turns[str(good)][0].tools[0].name == "Bash"
    assert first.checkpoints[str(bad)].offset == bad.stat().st_size
    second = _run(home, checkpoints=first.checkpoints)
    assert (second.sessions, second.stats.errors, second.stats.files_unchanged) == ([], [], 2)


def test_a_file_whose_reading_raises_is_skipped_named_and_not_read_again_until_it_changes(tmp_path, monkeypatch):
    home = tmp_path / "claude"
    bad = _session(home, "bad", "explode please")
    good = _session(home, "good", "add a test")
    real = claude_code.Session

    def session(**fields):  # raises after the file was read and its turns counted
        if fields["path"] == str(bad):
            raise ValueError("a parser bug")
        return real(**fields)

    monkeypatch.setattr(claude_code, "Session", session)
    first = _run(home)
    assert [session.path for session in first.sessions] == [str(good)]
    assert first.stats.sessions_skipped == {read_plan.FILE_ERROR: 1}
    assert first.stats.errors == [f"file_error {bad}: ValueError"]
    assert first.stats.files_scanned == 2 and first.stats.sessions_harvested == 1 and first.stats.requests == 1
    assert first.stats.bytes_read == bad.stat().st_size + good.stat().st_size
    checkpoint = first.checkpoints[str(bad)]
    assert (checkpoint.size, checkpoint.mtime_ns, checkpoint.offset) == (bad.stat().st_size, bad.stat().st_mtime_ns, 0)
    second = _run(home, checkpoints=first.checkpoints)
    assert (second.stats.files_unchanged, second.stats.errors) == (2, [])  # unchanged: not read again
    with bad.open("ab") as handle:  # changed: read again from the last good offset, and counted again
        handle.write(b"\n")
    third = _run(home, checkpoints=second.checkpoints)
    assert third.stats.sessions_skipped == {read_plan.FILE_ERROR: 1} and third.stats.files_unchanged == 1


def _context(count: int) -> HarvestContext:
    return harvest_context(now=NOW, workers=count)


def _raise_on_odd(path: Path, context: HarvestContext, stats: HarvestStats):
    stats.files_scanned += 1
    if int(path.stem) % 2:
        raise KeyError(path.stem)
    return None


@pytest.mark.skipif(os.name != "posix", reason="worker processes are forked")
def test_worker_processes_contain_a_file_error_as_one_loop_does(tmp_path):
    paths = []
    for number in range(6):
        paths.append(tmp_path / f"{number}.jsonl")
        paths[-1].write_text("{}\n")
    counted = {}
    for count in (1, 3):
        stats, context = HarvestStats(), _context(count)
        assert workers.read_files(paths, _raise_on_odd, context, stats) == []
        counted[count] = (stats, context.new_checkpoints)
    stats, checkpoints = counted[1]
    assert counted[3] == counted[1]
    assert stats.sessions_skipped == {read_plan.FILE_ERROR: 3} and stats.files_scanned == 6
    assert sorted(checkpoints) == [str(tmp_path / f"{number}.jsonl") for number in (1, 3, 5)]


@pytest.mark.parametrize("error", [KeyboardInterrupt, SystemExit, MemoryError])
def test_interrupts_and_memory_errors_are_never_contained(tmp_path, error):
    path = tmp_path / "0.jsonl"
    path.write_text("{}\n")

    def read_one(*args):
        raise error()

    with pytest.raises(error):
        read_plan.read_isolated(path, _context(1), HarvestStats(), read_one)


def test_a_source_that_raises_outside_its_files_keeps_its_checkpoints_and_the_others_are_read(tmp_path, monkeypatch):
    claude, codex = tmp_path / "claude", tmp_path / "codex"
    good = _session(claude, "good", "add a test")
    rollout = str(codex / "sessions" / "rollout-x.jsonl")
    old = {rollout: FileCheckpoint(size=1, mtime_ns=1, offset=1)}
    broken = sources.REGISTRY["codex"]

    def explode(root, context, stats):
        context.new_checkpoints[str(codex / "half-read")] = FileCheckpoint(size=0, mtime_ns=0, offset=0)
        raise TypeError("a listing bug")

    monkeypatch.setitem(sources.REGISTRY, "codex", sources.Source(broken.name, broken.label, broken.default_root,
                                                                  broken.has_sessions, explode))
    result = harvest(source="claude,codex", homes={"claude": claude, "codex": codex}, scope="all", lookback_hours=0,
                     now=NOW, checkpoints=old)
    assert [session.path for session in result.sessions] == [str(good)]
    assert result.per_source["codex"].sessions_skipped == {"source_error": 1}
    assert result.stats.errors == [f"source_error codex {codex}: TypeError"]
    assert result.checkpoints[rollout] == old[rollout]  # read again from there next night
    assert str(codex / "half-read") not in result.checkpoints


class _Odd:
    def __repr__(self):
        raise RuntimeError("no repr")


@pytest.mark.parametrize("value", [
    orjson.loads(DEEP_LIST),
    orjson.loads(b'{"a":' * DEEP + b"1" + b"}" * DEEP),
    {"n": 10 ** 40, 3: "int key", "s": "\ud800 lone surrogate", "o": _Odd(), "t": (1, 2)},
    [list(range(100_000))] * 50,
])
def test_compact_json_never_raises_and_stays_bounded(value):
    text = compact_json(value)
    assert isinstance(text, str) and len(text) <= turns.TOOL_INPUT_MAX_CHARS + turns._REDACT_MARGIN
    text.encode("utf-8")  # no lone surrogate left


def test_compact_json_writes_plain_values_as_before():
    written = compact_json({"command": "ls -la", "n": [1, 2.5, None, True]})
    assert written == '{"command":"ls -la","n":[1,2.5,null,true]}'
    assert compact_json("text as is") == "text as is"
