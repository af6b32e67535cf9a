"""Worker processes for a big harvest (``harvest.workers``): the same sessions, stats and checkpoints as one loop.

Input: the real Claude Code and Codex sessions of ``tests/fixtures/transcripts/`` (see PROVENANCE.md there), each
copied several times into its agent's layout (new file names, so each copy is a session of its own), plus a
malformed file and a Claude Code sub-agent file. The workers are forced with ``harvest(workers=N)`` (config
``harvest_workers``), as the corpus is far below ``PARALLEL_MIN_BYTES``.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import types
from pathlib import Path

import pytest
from source_run import harvest_context

from skillopt_sleep.harvest import harvest, workers
from skillopt_sleep.harvest.read_plan import HarvestContext
from skillopt_sleep.models import HarvestStats

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts"


def _homes(tmp_path: Path) -> dict[str, Path]:
    claude = tmp_path / "claude"
    project_dir = claude / "projects" / "-work-app"
    project_dir.mkdir(parents=True)
    for copy in range(3):
        for number, real in enumerate(sorted((FIXTURES / "claude_code").glob("*.jsonl"))):
            shutil.copyfile(real, project_dir / f"{copy:02d}{number:02d}0000-0000-4000-8000-000000000000.jsonl")
    (project_dir / "ffffffff-0000-4000-8000-000000000000.jsonl").write_bytes(b'{"type":"user",\n\x00\x01garbage\n')
    agents = project_dir / "01000000-0000-4000-8000-000000000000" / "subagents"
    agents.mkdir(parents=True)
    shutil.copyfile(sorted((FIXTURES / "claude_code").glob("dagster*"))[0], agents / "agent-a1.jsonl")
    codex = tmp_path / "codex"
    day = codex / "sessions" / "2025" / "11" / "17"
    day.mkdir(parents=True)
    for copy in range(3):
        for number, real in enumerate(sorted((FIXTURES / "codex").glob("*.jsonl"))):
            shutil.copyfile(real, day / f"rollout-2025-11-17T15-30-{copy}{number}-"
                                        f"019a93b9-f380-7600-98ff-94{copy}{number}e6b99603c.jsonl")
    return {"claude": claude, "codex": codex}


def _harvest(homes: dict[str, Path], monkeypatch, count: str, checkpoints=None):
    return harvest(source="claude,codex", scope="all", homes=homes, lookback_hours=0, checkpoints=checkpoints,
                   workers=int(count))


def _same(one, other) -> None:
    assert [s.model_dump() for s in one.sessions] == [s.model_dump() for s in other.sessions]
    assert one.stats == other.stats
    assert one.per_source == other.per_source
    assert list(one.checkpoints.items()) == list(other.checkpoints.items())


def test_workers_return_what_one_loop_returns_cold_and_on_the_next_night(tmp_path, monkeypatch):
    homes = _homes(tmp_path)
    forks = []
    real = workers._read_in_workers
    monkeypatch.setattr(workers, "_read_in_workers", lambda *args: forks.append(args[-2:]) or real(*args))
    serial = _harvest(homes, monkeypatch, "1")
    assert forks == []
    forked = _harvest(homes, monkeypatch, "3")
    assert forks == [(3, "fork"), (3, "fork")]  # both sources were read by three forked workers
    assert len(serial.sessions) >= 12 and serial.stats.sessions_skipped.get("subagent") == 1
    assert serial.stats.malformed_lines  # the garbage file is counted, not lost
    _same(serial, forked)
    # the next night: a file grows, the rest are unchanged
    grown = next((homes["claude"] / "projects" / "-work-app").glob("00*.jsonl"))
    with grown.open("ab") as handle:
        handle.write(b'{"type":"user","message":{"role":"user","content":"and add a test"},"uuid":"u-9",'
                     b'"timestamp":"2026-11-20T10:00:00Z","cwd":"/work/app","sessionId":"s"}\n')
    _same(_harvest(homes, monkeypatch, "1", serial.checkpoints), _harvest(homes, monkeypatch, "3", serial.checkpoints))


def _context(count: int = 0) -> HarvestContext:
    return harvest_context(workers=count)


def _exit_in_worker(path: Path, context: HarvestContext, stats: HarvestStats):
    if os.getpid() != PARENT:
        os._exit(3)  # a worker killed mid-harvest
    stats.files_scanned += 1
    return None


PARENT = os.getpid()


def test_a_worker_that_dies_leaves_the_files_to_one_loop(tmp_path):
    paths = []
    for number in range(6):
        paths.append(tmp_path / f"{number}.jsonl")
        paths[-1].write_text("{}\n")
    stats = HarvestStats()
    assert workers.read_files(paths, _exit_in_worker, _context(2), stats) == []
    assert stats.files_scanned == 6  # each file once, by the parent, nothing merged from the dead pool


class _OtherThread:
    """A thread that runs until the block ends (as ``run-now``'s progress display or the daemon's scheduler)."""

    def __enter__(self):
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.stop.wait)
        self.thread.start()

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def test_forked_alone_a_forkserver_beside_other_threads_one_loop_below_the_size_bound(tmp_path, monkeypatch):
    paths = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    for path in paths:
        path.write_text("{}\n")
    assert workers._workers(paths, _context())[0] == 1  # a few bytes: not worth a process
    assert workers._workers(paths, _context(4))[::2] == (2, "fork")  # a number set: forced, at most one per file
    with _OtherThread():
        # forking beside a thread could leave a lock held in the child: a fresh forkserver forks them, when the
        # program is our command line (its workers import __main__ again)
        monkeypatch.setattr(workers, "_main_is_ours", lambda: False)
        assert workers._workers(paths, _context(4))[::2] == (1, "forkserver")
        monkeypatch.setattr(workers, "_main_is_ours", lambda: True)
        assert workers._workers(paths, _context(4))[::2] == (2, "forkserver")
        monkeypatch.setattr(workers, "FORKSERVER_MIN_BYTES", 10)
        monkeypatch.setattr(workers, "PARALLEL_MIN_BYTES", 5)
        assert workers._workers(paths, _context())[::2] == (1, "forkserver")  # 6 bytes: not worth a server
    assert workers._workers(paths, _context())[::2] == (2, "fork")  # alone again: above the fork bound
    assert workers._workers(paths, _context(1))[0] == 1


def test_a_forkserver_returns_what_one_loop_returns(tmp_path, monkeypatch):
    homes = _homes(tmp_path)
    methods = []
    real = workers._read_in_workers
    monkeypatch.setattr(workers, "_read_in_workers", lambda *args: methods.append(args[-1]) or real(*args))
    serial = _harvest(homes, monkeypatch, "1")
    monkeypatch.setattr(workers, "_main_is_ours", lambda: True)  # pytest's __main__ is guarded too
    with _OtherThread():
        served = _harvest(homes, monkeypatch, "2")
    assert methods == ["forkserver", "forkserver"]  # both sources
    _same(serial, served)


@pytest.mark.parametrize("count", [1, 2, 5, 40])
def test_chunks_cover_every_file_once_in_order(tmp_path, count):
    paths = []
    for number, size in enumerate([10, 5000, 3, 3, 900, 1, 1, 20000, 7, 7]):
        paths.append(tmp_path / f"{number}.jsonl")
        paths[-1].write_bytes(b"x" * size)
    bounds = workers._chunks(workers._bytes_left(paths, _context()), count)
    assert bounds[0][0] == 0 and bounds[-1][1] == len(paths)
    assert all(start < end for start, end in bounds)
    assert all(bounds[i][1] == bounds[i + 1][0] for i in range(len(bounds) - 1))
    assert len(bounds) <= min(count, len(paths))


@pytest.mark.parametrize(("spec", "file", "ours"), [
    ("skillopt_sleep.__main__", None, True),  # python -m skillopt_sleep
    (None, "/home/u/.venv/bin/skillopt-sleep", True),  # the console script
    ("pytest.__main__", None, False),
    (None, "/home/u/nightly.py", False),  # a library caller's script, maybe without a __name__ guard
    (None, None, False),
])
def test_only_our_command_line_is_imported_again_by_a_forkserver(monkeypatch, spec, file, ours):
    main = types.ModuleType("__main__")
    main.__spec__ = types.SimpleNamespace(name=spec) if spec else None
    if file:
        main.__file__ = file
    monkeypatch.setitem(sys.modules, "__main__", main)
    assert workers._main_is_ours() is ours
