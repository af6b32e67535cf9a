"""benchmarks/world_rules.py: the rules a learning world's nights state, mined by the real pipeline (no LLM)."""

from __future__ import annotations

from benchmarks import world3, world_rules


def test_a_worlds_nights_list_their_lasting_rules_and_the_candidates_that_wait():
    lines = world_rules.world_rules(world3, 1)
    assert lines[0].startswith("night 1: ")
    lasting = [line for line in lines if line.startswith("  lasting ")]
    assert any("podman" in line and "stated in 2 tasks" in line for line in lasting)
    assert any("from now on use rg instead of grep" in line for line in lasting)
    assert not any("slugify" in line for line in lasting)  # the typed block's request is the task, not a rule
    assert world_rules.world_rules(world3, 1, candidates=False) == [lines[0], *lasting]
