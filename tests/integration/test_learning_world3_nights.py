"""Four nights of the third learning world (benchmarks/world3.py) through ``run_night``, with the mock simulator.

World 3's rules are stated the way real users state them: one sentence inside a longer request, "Do NOT ...", a
typed instruction block at the top of a request, Spanish, and "from now on" once. The simulator is not a model, so
this checks what a night must do whatever the model: the rules the deterministic reader finds in those forms are
written, each once, and the instructions tied to one task (a block's third bullet, "Don't touch the tests.") never
are. Which rules the reader misses is measured, not asserted (docs/benchmarks.md, "The worlds").
"""

from __future__ import annotations

import pytest
from test_learning_world_nights import run_world

from benchmarks import world3
from skillopt_sleep.documents.block import managed_block
from skillopt_sleep.mine.rulebook import document_rules


@pytest.fixture(scope="module")
def nights(tmp_path_factory):
    root = tmp_path_factory.mktemp("world3")
    with pytest.MonkeyPatch.context() as patch:  # hermetic for the module's four nights too
        patch.setenv("HOME", str(root / "home"))
        patch.setenv("SKILLOPT_SLEEP_HOME", str(root / "skillopt-home"))
        return run_world(root, world=world3)


def test_every_session_request_is_a_task(nights):
    assert len(nights) == len(world3.NIGHTS)
    for number, (_diagnostics, tasks, _memory) in enumerate(nights, 1):
        requests = {task["request"] for task in tasks}
        assert {item.steps[0].text.strip() for item in world3.sessions_for(number)} <= requests


def test_rules_stated_inside_requests_in_capitals_and_in_an_instruction_block_are_written_by_night_2(nights):
    block = managed_block(nights[1][2])
    demands = {key for _line, keys in document_rules(block) for key in keys if key[0] != "text"}
    assert ("has", "podman") in demands  # a sentence of a longer request, then "I said podman, not docker."
    assert ("has", "--force-with-lease") in demands or ("not", "--force") in demands  # "Do NOT use --force ..."
    assert "vitest" in block and ("not", "var") in demands  # the typed instruction block's two lasting bullets


def test_a_rule_is_written_once_and_instructions_tied_to_one_task_never(nights):
    for _diagnostics, _tasks, memory in nights:
        block = managed_block(memory)
        demands = [key for _line, keys in document_rules(block) for key in keys if key[0] != "text"]
        assert len(demands) == len(set(demands)), block
        for one_off in ("one test file", "empty string", "snapshot", "Mock the clock", "touch the tests",
                        "other flags"):
            assert one_off.casefold() not in block.casefold(), block
