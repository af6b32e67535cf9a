"""collector.paused: the cyclic garbage collector is off inside, back on after the outermost block (also on error),
never turned on when it was off before; ``keep=True`` freezes what the block kept. The harvest preview runs its
harvest and mining inside one block, and the command line its imports (then frozen)."""

from __future__ import annotations

import gc
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from skillopt_sleep import collector
from skillopt_sleep.config import load_config
from skillopt_sleep.mine import preview

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts"


@pytest.fixture(autouse=True)
def _collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_off_inside_and_on_after_also_on_error():
    with collector.paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), collector.paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_nested_blocks_turn_it_on_only_when_the_outermost_ends():
    with collector.paused():
        with collector.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_left_off_when_it_was_off_before():
    gc.disable()
    with collector.paused():
        pass
    assert not gc.isenabled()


def test_overlapping_blocks_on_two_threads():
    """Thread A enters, thread B enters, A leaves (still off: B is inside), B leaves (on again)."""
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, bool] = {}

    def first():
        with collector.paused():
            a_in.set()
            b_in.wait(5)
        a_out.set()

    def second():
        a_in.wait(5)
        with collector.paused():
            b_in.set()
            a_out.wait(5)
            seen["after A left"] = gc.isenabled()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert seen == {"after A left": False}
    assert gc.isenabled()


def test_preview_harvests_and_mines_with_the_collector_off_and_turns_it_back_on(tmp_path, monkeypatch):
    home = tmp_path / "claude"
    project_dir = home / "projects" / "-work-app"
    project_dir.mkdir(parents=True)
    for real in sorted((FIXTURES / "claude_code").glob("*.jsonl")):
        shutil.copyfile(real, project_dir / real.name)
    monkeypatch.setenv("SKILLOPT_SLEEP_HOME", str(tmp_path / "state"))
    import skillopt_sleep.mine as mine

    real_mine = mine.mine_for_config
    seen = []

    def mine_for_config(*args, **kwargs):
        seen.append(gc.isenabled())
        return real_mine(*args, **kwargs)

    monkeypatch.setattr(mine, "mine_for_config", mine_for_config)
    config = load_config(None, cli_overrides={"source": "claude", "claude_home": str(home), "scope": "all",
                                              "lookback_hours": 0})
    found = preview.preview_harvest(config, project=tmp_path)
    assert found.sessions and found.tasks
    assert seen == [False]
    assert gc.isenabled()


def test_keep_sets_aside_what_the_block_kept():
    gc.unfreeze()
    try:
        with collector.paused(keep=True):
            kept = [{"n": n} for n in range(1000)]
        assert gc.get_freeze_count() >= len(kept)
        assert gc.isenabled()
    finally:
        gc.unfreeze()


RUN_MAIN = """
import gc, json, sys
sys.argv = ["skillopt-sleep", *sys.argv[1:]]
from skillopt_sleep.cli import main
try:
    main()
except SystemExit:
    pass
print(json.dumps({"enabled": gc.isenabled(), "frozen": gc.get_freeze_count()}), file=sys.stderr)
"""


@pytest.mark.parametrize("args", [["config", "show"], ["config", "show", "--help"]])
def test_the_command_line_sets_its_imports_aside_and_leaves_the_collector_on(args, tmp_path):
    """``config show`` is answered without typer, ``config show --help`` by the typer app: both run with the imports
    frozen (thousands of objects) and the collector on."""
    env = dict(os.environ, HOME=str(tmp_path), SKILLOPT_SLEEP_HOME=str(tmp_path / "state"),
               XDG_CONFIG_HOME=str(tmp_path / "config"))
    done = subprocess.run([sys.executable, "-c", RUN_MAIN, *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    state = json.loads(done.stderr.strip().splitlines()[-1])
    assert state["enabled"] is True
    assert state["frozen"] > 10_000
