"""Four nights of the second learning world (benchmarks/world2.py) through ``run_night``, with the mock simulator.

The world's sessions are real-format Claude Code transcripts in which a data team teaches five rules tersely,
politely, indirectly, over two messages and as the reply to a refused tool call, plus noise; the formatter rule
changes on night 3. The simulator is not a model (its target follows a rule that shares a word with the request), so
this test checks what a night must do whatever the model: what is replayed, what judges it, what is written.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import world2
from skillopt_sleep.checks import check_passes
from skillopt_sleep.config import SleepConfig
from skillopt_sleep.documents.block import ensure_block, managed_block
from skillopt_sleep.engine.edits import apply_edits
from skillopt_sleep.mine.rulebook import document_rules
from skillopt_sleep.models import EditRecord
from skillopt_sleep.night import run_night


def run_world(tmp_path: Path, *, world=world2, nights: list[int] | None = None, memory: str | None = None,
              **overrides) -> list:
    """Run ``nights`` (default: all) of ``world`` with the mock, from ``memory`` (default: the world's initial
    memory); returns (diagnostics, tasks, memory after the night) per night."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "CLAUDE.md").write_text(world.INITIAL_MEMORY if memory is None else memory, encoding="utf-8")
    claude_home = tmp_path / "claude"
    config = SleepConfig(backend="mock", source="claude", scope="project", claude_home=claude_home, lookback_hours=0,
                         workers=1, **overrides)
    results = []
    for night in nights or range(1, len(world.NIGHTS) + 1):
        world.write_night_sessions(claude_home, project, night)
        result = run_night(config, project=project, apply=True, state_root=tmp_path / "state",
                           now=world.night_run_time(night))
        assert result.diagnostics.status in ("accepted", "rejected"), result.diagnostics.summary
        tasks = [json.loads(line) for line in (result.night_dir / "tasks.jsonl").read_text().splitlines()]
        results.append((result.diagnostics, tasks, (project / "CLAUDE.md").read_text(encoding="utf-8")))
    return results


@pytest.fixture(scope="module")
def nights(tmp_path_factory):
    return run_world(tmp_path_factory.mktemp("world2"))


@pytest.fixture(scope="module")
def worded_nights(tmp_path_factory):
    """The same four nights with ``rule_wording = "user"``: each rule written in the user's words."""
    return run_world(tmp_path_factory.mktemp("world2-words"), rule_wording="user")


def test_corrections_label_tasks_and_never_reach_the_replayed_prompt(nights):
    for diagnostics, tasks, _memory in nights:
        requests = [task["request"] for task in tasks]
        assert len(tasks) == 8 and diagnostics.mining["dropped"]["folded_reaction"] >= 6
        for text in ("uv.", "we're a uv shop", "logger, not print", "no, not like that.", "thanks"):
            assert not any(text in request for request in requests), text


def test_every_check_that_scores_a_corrected_task_fails_its_corrected_answer_and_passes_its_accepted_one(nights):
    checked = 0
    for _diagnostics, tasks, _memory in nights:
        for task in tasks:
            evidence = task["evidence"]
            if evidence["reaction"] != "correction":
                continue
            assert task["judge"]["checks"], task["request"]  # every corrected task of the world is judged by checks
            for raw in task["judge"]["checks"]:
                from skillopt_sleep.models import Check

                check = Check.model_validate(raw)
                assert any(check_passes(check, answer, None) is False for answer in evidence["corrected_answers"])
                if evidence["accepted_answer"] is not None:
                    assert check_passes(check, evidence["accepted_answer"], None) is True
                checked += 1
    assert checked >= 40


def test_only_replayable_train_tasks_are_replayed_and_only_hard_evidence_is_gated(nights):
    for diagnostics, tasks, _memory in nights:
        by_id = {task["id"]: task for task in tasks}
        replayed = {result.task_id for result in diagnostics.train_results}
        assert replayed <= {task["id"] for task in tasks if task["replayable"] and task["split"] == "train"}
        for comparison in diagnostics.gate.per_task:
            if comparison.origin == "tonight":
                assert by_id[comparison.task_id]["hard_evidence"]
        assert diagnostics.mining["val_pool"]["tonight"] + diagnostics.mining["val_pool"]["archive"] == len(
            diagnostics.gate.per_task)


def test_archived_val_tasks_join_the_gate_on_later_nights(nights):
    origins = [comparison.origin for diagnostics, _tasks, _memory in nights[1:] for comparison in
               diagnostics.gate.per_task]
    assert any(origin.startswith("archive ") for origin in origins)


@pytest.mark.parametrize("run", ["nights", "worded_nights"])
def test_a_rule_is_written_once_however_often_and_however_it_was_phrased(run, request):
    for _diagnostics, _tasks, memory in request.getfixturevalue(run):
        demands = [key for _line, keys in document_rules(managed_block(memory)) for key in keys if key[0] != "text"]
        assert len(demands) == len(set(demands)), managed_block(memory)
        assert "(night" not in memory and "t-" not in managed_block(memory)


def test_the_rules_stated_in_train_sessions_are_proposed_in_the_users_words(worded_nights):
    proposed = {edit.content for diagnostics, _tasks, _memory in worded_nights for edit in diagnostics.edits
                if edit.rationale.startswith("stated by the user")}
    # a substitution the session validates (night 1's polite httpx correction), or a team convention ("we format
    # with"), is proposed in the words the user typed
    assert "- use httpx instead of requests." in proposed
    assert "- we format with black, not autopep8." in proposed


def test_compiled_rules_keep_the_users_words_as_their_provenance_and_the_rule_change_lands(nights):
    proposed = {(edit.content, edit.rationale.split("; you said: ")[1].split("; wording chosen")[0])
                for diagnostics, _tasks, _memory in nights for edit in diagnostics.edits
                if edit.rationale.startswith("stated by the user")}
    # the polite httpx correction and the team convention, compiled from their validated checks, each edit citing the
    # words the user typed; the example (`import httpx`) is from the answer the user accepted
    assert ("- Use `httpx`, never `requests` (e.g. `import httpx`).", '"use httpx instead of requests"') in proposed
    assert ("- Use `black`, never `autopep8`.", '"we format with black, not autopep8"') in proposed
    # night 3's "we moved from black to ruff" is written as the form its checks demand and still holds on night 4
    for _diagnostics, _tasks, memory in nights[2:]:
        block = managed_block(memory)
        assert "- Use `ruff format`, never `black` (e.g. `ruff format .`)." in block.splitlines()
        assert not any(("has", "black") in keys for _line, keys in document_rules(block))


def test_greedy_nights_do_not_write_a_rule_twice(tmp_path):
    nights = run_world(tmp_path, gate_mode="off")
    memory = nights[-1][2]
    demands = [key for _line, keys in document_rules(managed_block(memory)) for key in keys if key[0] != "text"]
    assert demands and len(demands) == len(set(demands)), managed_block(memory)
    # the formatter rule changed on night 3: the newer rule replaced the black line (in whatever words)
    assert "black, not autopep8" not in memory
    assert not any(("has", "black") in keys for _line, keys in document_rules(managed_block(memory)))
    assert "ruff" in managed_block(memory)


def test_a_val_task_replayed_last_night_costs_no_baseline_call_tonight(nights):
    # the replay cache keys on the documents, the task and its judge, never on the night: tonight's baseline is
    # last night's candidate (accepted) or last night's baseline (rejected), already replayed on that task
    checked = 0
    for (previous, _t, _m), (diagnostics, _tasks, _memory) in zip(nights, nights[1:]):
        before = {comparison.task_id for comparison in previous.gate.per_task}
        for comparison in diagnostics.gate.per_task:
            if comparison.task_id in before:
                assert comparison.baseline[0].cached, comparison.task_id
                checked += 1
    assert checked >= 2


@pytest.mark.parametrize("old_line", ["- Use `black`, never `autopep8`.", "- we format with black, not autopep8."])
def test_the_rule_change_replaces_the_adopted_rule_the_night_it_is_stated_and_holds(tmp_path, old_line):
    # the black rule adopted before night 3 (compiled, or in the user's words); nights 3-4 state the move to ruff in
    # world 2's own words ("we moved from black to ruff: use ruff format, never black", "ruff format, not black")
    memory, _ = apply_edits(ensure_block(world2.INITIAL_MEMORY),
                            [EditRecord(target="memory", op="append", content=old_line)], "memory")
    nights = run_world(tmp_path, nights=[3, 4], memory=memory)
    (night3, tasks3, memory3), (_night4, _tasks4, memory4) = nights
    ruff = "- Use `ruff format`, never `black` (e.g. `ruff format .`)."  # the command the user accepted
    [change] = [edit for edit in night3.edits if edit.op == "replace"]
    assert (change.status, change.anchor, change.content) == ("applied", old_line, ruff)
    # its own tasks are the new rule's: night 3's formatter sessions, never the old rule's
    formatter = {task["id"] for task in tasks3 if task["request"] in {
        item.steps[0].text for item in world2.NIGHTS[2] if item.rule == "formatter"}}
    assert change.evidence and set(change.evidence) <= formatter
    assert night3.status == "accepted"
    for after in (memory3, memory4):  # gone the night it is stated, and still gone a night later
        lines = managed_block(after).splitlines()
        assert old_line not in lines and ruff in lines
        assert not any(("has", "black") in keys for _line, keys in document_rules(managed_block(after)))
