"""What both harvesters share: roots, source selection, scope, lookback, checkpoints (unchanged, grown, shrunk,
replaced, truncated last line, zst and archive moves), malformed input, huge lines, unreadable files, redaction."""

from __future__ import annotations

import os
import stat
from datetime import datetime, timedelta, timezone
from pathlib import Path

import orjson
import pytest
import zstandard

from skillopt_sleep.errors import HarvestError
from skillopt_sleep.harvest import claude_code, harvest, reader, resolve_claude_home, resolve_codex_home, turns
from skillopt_sleep.harvest.checkpoint import load_checkpoints, save_checkpoints
from skillopt_sleep.models import FileCheckpoint, HarvestStats
from skillopt_sleep.prompts.marker import SESSION_MARKER

NOW = datetime(2026, 3, 2, 0, 0, tzinfo=timezone.utc)
PROJECT = Path("/home/u/repo")


def claude_user(text, when: str, cwd: str = "/home/u/repo", session: str = "s1", **fields) -> dict:
    record = {"type": "user", "sessionId": session, "cwd": cwd, "version": "2.1.51", "timestamp": when,
              "message": {"role": "user", "content": text}}
    record.update(fields)
    return record


def claude_answer(text: str, when: str, message_id: str = "msg_1", blocks: list | None = None) -> dict:
    return {"type": "assistant", "sessionId": "s1", "cwd": "/home/u/repo", "timestamp": when,
            "message": {"id": message_id, "role": "assistant", "model": "claude-sonnet-4",
                        "content": blocks if blocks is not None else [{"type": "text", "text": text}]}}


def jsonl(records: list[dict]) -> bytes:
    return b"".join(orjson.dumps(record) + b"\n" for record in records)


def claude_file(home: Path, records: list[dict], name: str = "s1", folder: str = "-home-u-repo") -> Path:
    path = home / "projects" / folder / f"{name}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(jsonl(records))
    return path


def codex_file(home: Path, records: list[dict], name: str = "rollout-2026-03-01T10-00-00-t1.jsonl",
               folder: str = "sessions/2026/03/01") -> Path:
    path = home / folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(jsonl(records))
    return path


def codex_lines(prompt: str, cwd: str = "/home/u/repo", when: str = "2026-03-01T10:00:00Z") -> list[dict]:
    return [{"timestamp": when, "type": "session_meta",
             "payload": {"id": "t1", "cwd": cwd, "cli_version": "0.120.0", "source": "cli"}},
            {"timestamp": when, "type": "event_msg", "payload": {"type": "user_message", "message": prompt}}]


def claude_run(home: Path, **options):
    options.setdefault("scope", "all")
    options.setdefault("lookback_hours", 0)
    options.setdefault("now", NOW)
    return harvest(source="claude", claude_home=home, **options)


def requests_of(result) -> list[str]:
    return [turn.request for session in result.sessions for turn in session.turns]


# --------------------------------------------------------------------------- roots and sources


def test_roots_prefer_the_explicit_path_then_the_environment_then_home(tmp_path, monkeypatch, hermetic_env):
    assert resolve_claude_home(None) == hermetic_env / ".claude"
    assert resolve_codex_home(None) == hermetic_env / ".codex"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "cc"))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "cx"))
    assert resolve_claude_home(None) == tmp_path / "cc"
    assert resolve_codex_home(None) == tmp_path / "cx"
    assert resolve_claude_home(tmp_path / "explicit") == tmp_path / "explicit"
    assert resolve_codex_home(tmp_path / "explicit") == tmp_path / "explicit"


def test_default_roots_are_read_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "cc"))
    claude_file(tmp_path / "cc", [claude_user("from the env root", "2026-03-01T10:00:00Z")])
    result = harvest(source="claude", scope="all", lookback_hours=0)
    assert requests_of(result) == ["from the env root"]


def test_auto_reads_only_the_sources_that_have_sessions(tmp_path):
    claude_file(tmp_path / "claude", [claude_user("hello", "2026-03-01T10:00:00Z")])
    (tmp_path / "codex" / "sessions").mkdir(parents=True)
    result = harvest(source="auto", scope="all", claude_home=tmp_path / "claude", codex_home=tmp_path / "codex",
                     lookback_hours=0)
    assert result.sources == ["claude"]
    assert list(result.per_source) == ["claude"]
    nothing = harvest(source="auto", scope="all", claude_home=tmp_path / "none1", codex_home=tmp_path / "none2")
    assert (nothing.sources, nothing.sessions) == ([], [])


def test_every_known_source_has_a_harvester_and_a_memory_file_and_is_read_in_one_order():
    import sys

    from skillopt_sleep.documents.targets import MEMORY_FILES
    from skillopt_sleep.harvest.sources import REGISTRY, SOURCE_NAMES, parse_sources

    assert list(REGISTRY) == [name for name in SOURCE_NAMES if name in REGISTRY]
    for name, spec in REGISTRY.items():
        assert sys.modules[spec.read.__module__].SOURCE == name  # the reader's module is that source's harvester
        assert name in MEMORY_FILES
    assert parse_sources("all") == list(REGISTRY)
    assert parse_sources(" Cursor , GEMINI ") == ["gemini", "cursor"]  # known order, whatever the typed order


def test_auto_finds_each_new_source_at_its_default_root(tmp_path, hermetic_env):
    # default roots under the (temporary) HOME and XDG_DATA_HOME; one minimal session marker each
    (hermetic_env / ".gemini" / "tmp" / "abc" / "chats").mkdir(parents=True)
    (hermetic_env / ".gemini" / "tmp" / "abc" / "chats" / "session-1.jsonl").write_text("{}\n")
    (hermetic_env / ".copilot" / "session-state" / "s1").mkdir(parents=True)
    (hermetic_env / ".copilot" / "session-state" / "s1" / "events.jsonl").write_text("{}\n")
    result = harvest(source="auto", scope="all", lookback_hours=0)
    assert result.sources == ["gemini", "copilot"]


def test_an_explicit_source_without_sessions_is_listed_with_zero_sessions(tmp_path):
    claude_file(tmp_path / "claude", [claude_user("hello", "2026-03-01T10:00:00Z")])
    result = harvest(source="codex", scope="all", claude_home=tmp_path / "claude", codex_home=tmp_path / "missing",
                     lookback_hours=0)
    assert result.sources == ["codex"]
    assert result.sessions == []  # no silent fallback to the Claude transcripts
    assert result.per_source["codex"].files_scanned == 0


def test_both_sources_are_merged_with_per_source_stats(tmp_path):
    claude_file(tmp_path / "claude", [claude_user("claude task", "2026-03-01T10:00:00Z")])
    codex_file(tmp_path / "codex", codex_lines("codex task"))
    result = harvest(source="all", scope="all", claude_home=tmp_path / "claude", codex_home=tmp_path / "codex",
                     lookback_hours=0)
    assert sorted(requests_of(result)) == ["claude task", "codex task"]
    assert result.per_source["claude"].requests == 1
    assert result.per_source["codex"].requests == 1
    assert result.stats.requests == 2
    assert result.stats.sessions_harvested == 2


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"source": "windsurf", "scope": "all"}, "unknown source"),
    ({"source": "claude", "scope": "everything"}, "unknown scope"),
    ({"source": "claude", "scope": "project", "project": None}, "needs a project"),
])
def test_bad_arguments_raise_a_clear_harvest_error(tmp_path, kwargs, message):
    with pytest.raises(HarvestError, match=message):
        harvest(claude_home=tmp_path, codex_home=tmp_path, **kwargs)


# --------------------------------------------------------------------------- scope


@pytest.mark.parametrize("source", ["claude", "codex"])
def test_project_scope_keeps_the_project_and_below_but_never_an_ancestor_or_a_sibling(tmp_path, source):
    cwds = {"home": "/home/u", "repo": "/home/u/repo", "sub": "/home/u/repo/pkg/sub", "sibling": "/home/u/repo-other"}
    for name, cwd in cwds.items():
        if source == "claude":
            claude_file(tmp_path, [claude_user(f"task in {name}", "2026-03-01T10:00:00Z", cwd=cwd)], name=name,
                        folder=cwd.replace("/", "-"))
        else:
            codex_file(tmp_path, codex_lines(f"task in {name}", cwd=cwd),
                       name=f"rollout-2026-03-01T10-00-00-{name}.jsonl")
    homes = {"claude_home": tmp_path} if source == "claude" else {"codex_home": tmp_path}
    project = harvest(source=source, scope="project", project=PROJECT, lookback_hours=0, **homes)
    assert sorted(requests_of(project)) == ["task in repo", "task in sub"]
    assert project.stats.sessions_skipped == {"out_of_scope": 2}
    everything = harvest(source=source, scope="all", lookback_hours=0, **homes)
    assert len(requests_of(everything)) == 4


def test_out_of_scope_file_is_not_parsed_to_the_end_but_its_checkpoint_covers_it(tmp_path, monkeypatch):
    path = claude_file(tmp_path, [claude_user(f"prompt {n}", "2026-03-01T10:00:00Z", cwd="/srv/other")
                                  for n in range(50)])
    fed = []
    original = claude_code.ClaudeTranscript.feed
    monkeypatch.setattr(claude_code.ClaudeTranscript, "feed",
                        lambda self, record: (fed.append(1), original(self, record)))
    result = harvest(source="claude", scope="project", project=PROJECT, claude_home=tmp_path, lookback_hours=0)
    assert len(fed) == 1
    assert result.checkpoints[str(path)].offset == path.stat().st_size


# --------------------------------------------------------------------------- lookback (first night)


def test_first_night_keeps_only_turns_inside_the_lookback_window(tmp_path):
    claude_file(tmp_path, [claude_user("ten days ago", "2026-02-20T10:00:00Z"),
                           claude_user("yesterday", "2026-03-01T10:00:00+00:00"),
                           claude_user("east of utc, 2h ago", "2026-03-02T03:00:00+05:00")])
    assert requests_of(claude_run(tmp_path, lookback_hours=72)) == ["yesterday", "east of utc, 2h ago"]
    assert len(requests_of(claude_run(tmp_path, lookback_hours=0))) == 3


def test_lookback_applies_only_on_the_first_night(tmp_path):
    claude_file(tmp_path, [claude_user("ten days ago", "2026-02-20T10:00:00Z")])
    assert requests_of(claude_run(tmp_path, lookback_hours=72, checkpoints={})) == ["ten days ago"]


def forbid_opening_files(monkeypatch) -> None:
    # the reader opens the files and a grown file's head (read_head)
    monkeypatch.setattr(reader, "open_binary", lambda path: pytest.fail(f"opened {path}"))


def test_first_night_skips_files_untouched_since_the_window_without_opening_them(tmp_path, monkeypatch):
    old = claude_file(tmp_path, [claude_user("old", "2026-02-01T10:00:00Z")], name="old")
    stamp = (NOW - timedelta(days=30)).timestamp()
    os.utime(old, (stamp, stamp))
    forbid_opening_files(monkeypatch)
    result = claude_run(tmp_path, lookback_hours=72)
    assert result.stats.sessions_skipped == {"too_old": 1}
    assert result.checkpoints[str(old)].offset == old.stat().st_size


def test_all_turns_too_old_counts_the_session_as_too_old(tmp_path):
    path = claude_file(tmp_path, [claude_user("ten days ago", "2026-02-20T10:00:00Z")])
    os.utime(path, (NOW.timestamp(), NOW.timestamp()))
    result = claude_run(tmp_path, lookback_hours=72)
    assert result.sessions == []
    assert result.stats.sessions_skipped == {"too_old": 1}


# --------------------------------------------------------------------------- checkpoints across nights


def test_unchanged_file_is_not_opened_on_the_next_night(tmp_path, monkeypatch):
    claude_file(tmp_path, [claude_user("once", "2026-03-01T10:00:00Z")])
    first = claude_run(tmp_path)
    assert requests_of(first) == ["once"]
    forbid_opening_files(monkeypatch)
    second = claude_run(tmp_path, checkpoints=first.checkpoints)
    assert second.sessions == []
    assert second.stats.files_unchanged == 1
    assert second.checkpoints == first.checkpoints


def test_grown_file_returns_only_the_new_turns(tmp_path):
    path = claude_file(tmp_path, [claude_user("first", "2026-03-01T10:00:00Z"),
                                  claude_answer("done first", "2026-03-01T10:01:00Z")])
    first = claude_run(tmp_path)
    with open(path, "ab") as handle:
        handle.write(jsonl([claude_user("second", "2026-03-02T10:00:00Z"),
                            claude_answer("done second", "2026-03-02T10:01:00Z", message_id="msg_2")]))
    second = claude_run(tmp_path, checkpoints=first.checkpoints)
    [session] = second.sessions
    assert [(t.request, t.final_answer) for t in session.turns] == [("second", "done second")]
    assert session.cwd == "/home/u/repo"
    assert second.stats.files_grown == 1
    assert second.checkpoints[str(path)].offset == path.stat().st_size
    assert second.stats.bytes_read < path.stat().st_size


def test_grown_file_of_an_out_of_scope_session_stays_out_of_scope(tmp_path):
    """The session cwd comes from the start of the file, even when a later record has cd'ed into the project."""
    path = claude_file(tmp_path, [claude_user("in home", "2026-03-01T10:00:00Z", cwd="/home/u")])
    first = harvest(source="claude", scope="project", project=PROJECT, claude_home=tmp_path, lookback_hours=0)
    with open(path, "ab") as handle:
        handle.write(jsonl([claude_user("now in repo", "2026-03-02T10:00:00Z", cwd="/home/u/repo")]))
    second = harvest(source="claude", scope="project", project=PROJECT, claude_home=tmp_path,
                     checkpoints=first.checkpoints)
    assert second.sessions == []
    assert second.stats.sessions_skipped == {"out_of_scope": 1}


def test_grown_session_of_our_own_backend_stays_skipped(tmp_path):
    path = claude_file(tmp_path, [claude_user(f"{SESSION_MARKER} replay this task", "2026-03-01T10:00:00Z")])
    first = claude_run(tmp_path)
    assert first.stats.sessions_skipped == {"own_marker": 1}
    with open(path, "ab") as handle:
        handle.write(jsonl([claude_user("follow-up without the marker", "2026-03-02T10:00:00Z")]))
    second = claude_run(tmp_path, checkpoints=first.checkpoints)
    assert second.sessions == []
    assert second.stats.sessions_skipped == {"own_marker": 1}


def test_shrunk_file_is_read_again_from_the_start(tmp_path):
    path = claude_file(tmp_path, [claude_user("a long first prompt " * 20, "2026-03-01T10:00:00Z"),
                                  claude_user("second", "2026-03-01T11:00:00Z")])
    first = claude_run(tmp_path)
    path.write_bytes(jsonl([claude_user("rewritten", "2026-03-02T10:00:00Z")]))
    second = claude_run(tmp_path, checkpoints=first.checkpoints)
    assert requests_of(second) == ["rewritten"]


def test_replaced_file_of_a_larger_size_is_read_again_from_the_start(tmp_path):
    path = claude_file(tmp_path, [claude_user("old", "2026-03-01T10:00:00Z")])
    first = claude_run(tmp_path)
    offset = first.checkpoints[str(path)].offset
    replacement = jsonl([claude_user("brand new session with a longer prompt", "2026-03-02T10:00:00Z")])
    assert replacement[offset - 1:offset] != b"\n"
    path.write_bytes(replacement)
    second = claude_run(tmp_path, checkpoints=first.checkpoints)
    assert requests_of(second) == ["brand new session with a longer prompt"]
    assert second.stats.files_grown == 0


def test_truncated_last_line_is_not_consumed_and_is_read_once_complete(tmp_path):
    complete = jsonl([claude_user("first", "2026-03-01T10:00:00Z")])
    partial = orjson.dumps(claude_user("second", "2026-03-01T11:00:00Z"))
    path = claude_file(tmp_path, [])
    path.write_bytes(complete + partial[:25])
    first = claude_run(tmp_path)
    assert requests_of(first) == ["first"]
    assert first.stats.malformed_lines == {"truncated_last_line": 1}
    assert first.checkpoints[str(path)].offset == len(complete)
    with open(path, "ab") as handle:
        handle.write(partial[25:] + b"\n")
    second = claude_run(tmp_path, checkpoints=first.checkpoints)
    assert requests_of(second) == ["second"]
    assert second.stats.malformed_lines == {}


def test_complete_last_line_without_newline_is_used(tmp_path):
    path = claude_file(tmp_path, [])
    path.write_bytes(orjson.dumps(claude_user("no newline at the end", "2026-03-01T10:00:00Z")))
    result = claude_run(tmp_path)
    assert requests_of(result) == ["no newline at the end"]
    assert result.checkpoints[str(path)].offset == path.stat().st_size


def test_grown_codex_rollout_returns_only_the_new_prompt_with_the_session_meta_of_its_start(tmp_path):
    path = codex_file(tmp_path, codex_lines("first prompt"))
    first = harvest(source="codex", scope="project", project=PROJECT, codex_home=tmp_path, lookback_hours=0)
    with open(path, "ab") as handle:
        handle.write(jsonl([{"timestamp": "2026-03-02T10:00:00Z", "type": "event_msg",
                             "payload": {"type": "user_message", "message": "second prompt"}}]))
    second = harvest(source="codex", scope="project", project=PROJECT, codex_home=tmp_path,
                     checkpoints=first.checkpoints)
    [session] = second.sessions
    assert [t.request for t in session.turns] == ["second prompt"]
    assert (session.session_id, session.cwd, session.version) == ("t1", "/home/u/repo", "0.120.0")
    assert second.stats.files_grown == 1


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_a_fifo_named_like_a_rollout_is_skipped_not_read(tmp_path):
    folder = tmp_path / "sessions" / "2026" / "03" / "01"
    folder.mkdir(parents=True)
    os.mkfifo(folder / "rollout-2026-03-01T10-00-00-fifo.jsonl")
    result = harvest(source="codex", scope="all", codex_home=tmp_path, lookback_hours=0)
    assert result.stats.sessions_skipped == {"not_a_file": 1}


def test_codex_rollout_compressed_after_it_was_read_resumes_at_the_same_offset(tmp_path):
    plain = codex_file(tmp_path, codex_lines("first prompt"))
    first = harvest(source="codex", scope="all", codex_home=tmp_path, lookback_hours=0)
    assert requests_of(first) == ["first prompt"]
    grown = plain.read_bytes() + jsonl([{"timestamp": "2026-03-02T10:00:00Z", "type": "event_msg",
                                         "payload": {"type": "user_message", "message": "second prompt"}}])
    Path(str(plain) + ".zst").write_bytes(zstandard.ZstdCompressor().compress(grown))
    plain.unlink()
    second = harvest(source="codex", scope="all", codex_home=tmp_path, checkpoints=first.checkpoints)
    assert requests_of(second) == ["second prompt"]


def test_codex_rollout_moved_to_the_archive_is_not_harvested_twice(tmp_path):
    plain = codex_file(tmp_path, codex_lines("only prompt"))
    first = harvest(source="codex", scope="all", codex_home=tmp_path, lookback_hours=0)
    archived = tmp_path / "archived_sessions" / plain.name
    archived.parent.mkdir()
    plain.rename(archived)
    second = harvest(source="codex", scope="all", codex_home=tmp_path, checkpoints=first.checkpoints)
    assert second.sessions == []
    assert second.checkpoints[str(archived)].offset == archived.stat().st_size


def test_checkpoints_of_a_source_not_read_tonight_are_kept(tmp_path):
    kept = {"/elsewhere/rollout-x.jsonl": FileCheckpoint(size=10, mtime_ns=1, offset=10)}
    claude_file(tmp_path, [claude_user("hello", "2026-03-01T10:00:00Z")])
    result = claude_run(tmp_path, checkpoints=kept)
    assert result.checkpoints["/elsewhere/rollout-x.jsonl"] == kept["/elsewhere/rollout-x.jsonl"]
    assert len(result.checkpoints) == 2


def test_checkpoints_of_deleted_files_are_dropped(tmp_path):
    gone = claude_file(tmp_path, [claude_user("soon gone", "2026-03-01T10:00:00Z")], name="gone")
    claude_file(tmp_path, [claude_user("stays", "2026-03-01T10:00:00Z")], name="stays")
    first = claude_run(tmp_path)
    assert str(gone) in first.checkpoints
    gone.unlink()
    second = claude_run(tmp_path, checkpoints=first.checkpoints)
    assert str(gone) not in second.checkpoints
    assert len(second.checkpoints) == 1


def test_checkpoints_round_trip_through_a_private_file(tmp_path):
    path = tmp_path / "state" / "checkpoints.json"
    assert load_checkpoints(path) is None
    checkpoints = {"/a/b.jsonl": FileCheckpoint(size=100, mtime_ns=1_700_000_000_000_000_000, offset=90,
                                                session_id="s")}
    save_checkpoints(path, checkpoints)
    assert load_checkpoints(path) == checkpoints
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_checkpoint_file_that_is_not_json_is_moved_aside_and_the_window_read_again(tmp_path, caplog):
    path = tmp_path / "checkpoints.json"
    path.write_text("{not json")
    assert load_checkpoints(path) is None  # as on a first night: the lookback window is read again
    [aside] = tmp_path.glob("checkpoints.json.corrupt-*")
    assert aside.read_text() == "{not json" and not path.exists()
    assert str(path) in caplog.text and aside.name in caplog.text


def test_invalid_checkpoint_entries_are_dropped(tmp_path):
    path = tmp_path / "checkpoints.json"
    path.write_bytes(orjson.dumps({"files": {"/ok.jsonl": {"size": 1, "mtime_ns": 2, "offset": 1},
                                             "/bad.jsonl": {"size": "big"}}}))
    assert list(load_checkpoints(path)) == ["/ok.jsonl"]


# --------------------------------------------------------------------------- malformed input


def test_malformed_lines_are_skipped_and_counted_by_reason(tmp_path):
    path = claude_file(tmp_path, [])
    path.write_bytes(b"".join([
        b'{"type": "user", "broken\n',
        b"[1, 2, 3]\n",
        b'"just a string"\n',
        b"\x00\x01\xff\xfe binary junk \x89PNG\n",
        b"\n   \n",
        orjson.dumps({"type": "brand-new-record-type", "x": 1}) + b"\n",
        orjson.dumps(claude_user("still harvested", "2026-03-01T10:00:00Z")) + b"\n",
    ]))
    result = claude_run(tmp_path)
    assert requests_of(result) == ["still harvested"]
    assert result.stats.malformed_lines == {"bad_json": 1, "not_an_object": 2, "binary": 1}
    assert result.stats.records_unknown == 1


def test_codex_malformed_lines_are_counted_too(tmp_path):
    path = codex_file(tmp_path, codex_lines("survives"))
    with open(path, "ab") as handle:
        handle.write(b"{oops\n" + b"\xff\xfe\x00\n" + b"42\n")
    result = harvest(source="codex", scope="all", codex_home=tmp_path, lookback_hours=0)
    assert requests_of(result) == ["survives"]
    assert result.stats.malformed_lines == {"bad_json": 1, "binary": 1, "not_an_object": 1}


def test_multi_megabyte_tool_result_line_is_streamed(tmp_path):
    huge_output = "x" * (3 << 20)
    path = claude_file(tmp_path, [
        claude_user("read the big file", "2026-03-01T10:00:00Z"),
        claude_answer("", "2026-03-01T10:01:00Z", blocks=[{"type": "tool_use", "id": "t1", "name": "Read",
                                                           "input": {"file_path": "/big"}}]),
        claude_user([{"type": "tool_result", "tool_use_id": "t1", "content": huge_output, "is_error": True}],
                    "2026-03-01T10:02:00Z"),
        claude_user("next request", "2026-03-01T10:03:00Z"),
    ])
    assert path.stat().st_size > 3 << 20
    [session] = claude_run(tmp_path).sessions
    first, second = session.turns
    assert len(first.tools[0].error) <= turns.TOOL_ERROR_MAX_CHARS
    assert second.request == "next request"


def test_line_above_the_size_cap_is_skipped_without_being_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(reader, "MAX_LINE_BYTES", 200_000)
    monkeypatch.setattr(reader, "READ_CHUNK", 4096)
    claude_file(tmp_path, [claude_user("y" * 500_000, "2026-03-01T10:00:00Z"),
                           claude_user("after the giant line", "2026-03-01T10:01:00Z")])
    result = claude_run(tmp_path)
    assert requests_of(result) == ["after the giant line"]
    assert result.stats.malformed_lines == {"too_long": 1}


def read_records(path: Path, chunk: int, monkeypatch) -> tuple[list[dict], int, HarvestStats]:
    monkeypatch.setattr(reader, "READ_CHUNK", chunk)
    stats = HarvestStats()
    with open(path, "rb") as handle:
        records_reader = reader.RecordReader(handle, 0, stats, compressed=False)
        records = list(records_reader.records())
    return records, records_reader.offset, stats


@pytest.mark.parametrize("chunk", [7, 64, 1000])
def test_lines_longer_than_the_read_buffer_come_out_whole_with_the_same_offsets(tmp_path, monkeypatch, chunk):
    records = [{"n": index, "text": "z" * size} for index, size in enumerate([0, 5, 63, 64, 65, 999, 5000, 3])]
    body = b"".join(orjson.dumps(record) + (b"\r\n" if index % 3 == 0 else b"\n")
                    for index, record in enumerate(records))
    path = tmp_path / "lines.jsonl"
    path.write_bytes(b"\n  \n" + body + orjson.dumps({"n": "last"}))  # blank lines first, last line unterminated
    got, offset, stats = read_records(path, chunk, monkeypatch)
    assert got == [*records, {"n": "last"}]
    assert offset == path.stat().st_size
    assert stats.malformed_lines == {}
    assert stats.bytes_read == path.stat().st_size


def test_unfinished_last_line_stays_before_the_checkpoint_whatever_the_buffer_size(tmp_path, monkeypatch):
    complete = orjson.dumps({"n": 1}) + b"\n"
    path = tmp_path / "lines.jsonl"
    path.write_bytes(complete + b'{"n": 2, "still being writ')
    for chunk in (5, 1 << 20):
        got, offset, stats = read_records(path, chunk, monkeypatch)
        assert (got, offset, stats.malformed_lines) == ([{"n": 1}], len(complete), {"truncated_last_line": 1})


def test_over_long_line_between_small_reads_is_drained_and_the_next_line_is_read(tmp_path, monkeypatch):
    monkeypatch.setattr(reader, "MAX_LINE_BYTES", 1000)
    path = tmp_path / "lines.jsonl"
    path.write_bytes(orjson.dumps({"n": 1}) + b"\n" + orjson.dumps({"big": "q" * 5000}) + b"\n"
                     + orjson.dumps({"n": 3}) + b"\n")
    got, offset, stats = read_records(path, 64, monkeypatch)
    assert got == [{"n": 1}, {"n": 3}]
    assert offset == path.stat().st_size
    assert stats.malformed_lines == {"too_long": 1}


def test_unreadable_file_is_counted_and_keeps_its_previous_checkpoint(tmp_path, monkeypatch):
    locked = claude_file(tmp_path, [claude_user("locked", "2026-03-01T10:00:00Z")], name="locked")
    claude_file(tmp_path, [claude_user("readable", "2026-03-01T10:00:00Z")], name="open")
    previous = {str(locked): FileCheckpoint(size=1, mtime_ns=1, offset=0)}
    real_open = reader.open_binary

    def open_or_deny(path):
        if Path(path) == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path)

    monkeypatch.setattr(reader, "open_binary", open_or_deny)  # where both sources open their files
    result = claude_run(tmp_path, checkpoints=previous)
    assert requests_of(result) == ["readable"]
    assert result.stats.sessions_skipped == {"unreadable": 1}
    assert result.checkpoints[str(locked)] == previous[str(locked)]


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_file_without_read_permission_is_counted_unreadable(tmp_path):
    locked = claude_file(tmp_path, [claude_user("locked", "2026-03-01T10:00:00Z")])
    locked.chmod(0)
    try:
        result = claude_run(tmp_path)
    finally:
        locked.chmod(0o600)
    assert result.stats.sessions_skipped == {"unreadable": 1}


# --------------------------------------------------------------------------- texts: timestamps, bounds, secrets


@pytest.mark.parametrize(("value", "expected"), [
    ("2026-03-01T10:00:00.123Z", datetime(2026, 3, 1, 10, 0, 0, 123000, tzinfo=timezone.utc)),
    ("2026-03-01T15:00:00+05:00", datetime(2026, 3, 1, 10, 0, tzinfo=timezone.utc)),
    ("2026-03-01T10:00:00", datetime(2026, 3, 1, 10, 0, tzinfo=timezone.utc)),
    (1772359200000, datetime(2026, 3, 1, 10, 0, tzinfo=timezone.utc)),
    ("[trimmed for fixture]", None),
    (None, None),
])
def test_timestamps_become_aware_utc_datetimes(value, expected):
    assert turns.parse_timestamp(value) == expected


def test_long_texts_are_bounded_per_turn(tmp_path):
    claude_file(tmp_path, [claude_user("explain everything", "2026-03-01T10:00:00Z"),
                           claude_answer("word " * 5000, "2026-03-01T10:01:00Z")])
    [turn] = claude_run(tmp_path).sessions[0].turns
    assert len(turn.final_answer) <= turns.ANSWER_MAX_CHARS
    assert turn.final_answer.endswith("…")


def test_secrets_are_redacted_in_every_stored_text(tmp_path):
    token = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0" * 2
    password = "Hunter2!secretpw"
    rejection = ("The user doesn't want to proceed with this tool use. To tell you how to proceed, the user said:\n"
                 f"use the token {token} instead")
    claude_file(tmp_path, [
        claude_user(f"deploy with {token}", "2026-03-01T10:00:00Z"),
        {"type": "queue-operation", "operation": "enqueue", "content": f"DB_PASSWORD={password}",
         "timestamp": "2026-03-01T10:00:30Z"},
        claude_answer("", "2026-03-01T10:01:00Z", blocks=[
            {"type": "text", "text": f"Used password = \"{password}\""},
            {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": f"export GH={token}"}},
            {"type": "tool_use", "id": "t2", "name": "Bash", "input": {"command": "deploy"}}]),
        claude_user([{"type": "tool_result", "tool_use_id": "t1", "is_error": True,
                      "content": f"Exit code 1\nbad credentials {token}"},
                     {"type": "tool_result", "tool_use_id": "t2", "is_error": True, "content": rejection}],
                    "2026-03-01T10:02:00Z"),
    ])
    codex_file(tmp_path / "codex", codex_lines(f"use {token} for the API"))
    result = harvest(source="all", scope="all", claude_home=tmp_path, codex_home=tmp_path / "codex",
                     lookback_hours=0)
    dumped = "".join(session.model_dump_json() for session in result.sessions)
    assert token not in dumped and password not in dumped
    # request, queued message, answer, tool input, tool error, rejection error and feedback; codex prompt
    assert result.stats.secrets_redacted == 8
    claude_turn = next(s for s in result.sessions if s.source == "claude").turns[0]
    assert claude_turn.rejection_feedback == "use the token [REDACTED:github_token] instead"
