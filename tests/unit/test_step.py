"""The SkillOpt step (engine/step.py): rollout -> reflect -> aggregate -> select -> update -> gated evaluate.

The world: task i asks to "run the oldtool<i> command"; its user said "Use newtool<i>, not oldtool<i>", and its judge
wants "newtool<i>" in the answer. The mock target only says newtool<i> when that rule is in its memory, so a
task fails before reflection and passes once its rule is learned. Passing tasks ask for nothing a rule governs.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from transcripts import PNPM_CONVERSATIONS, write_claude_sessions

from skillopt_sleep.backends.base import CallMeter
from skillopt_sleep.backends.mock import MockBackend
from skillopt_sleep.checks import negative_word_regex
from skillopt_sleep.config import SleepConfig
from skillopt_sleep.engine.reflect import plan_minibatches
from skillopt_sleep.engine.replay import ReplayCache, Replayer, replay_tasks
from skillopt_sleep.engine.step import StepInput, StepSettings, planned_optimizer_calls, run_step
from skillopt_sleep.errors import BackendError
from skillopt_sleep.mine.rulebook import stated_rules, written_line
from skillopt_sleep.models import Check, Judge, TaskRecord
from skillopt_sleep.night import run_night
from skillopt_sleep.prompts import TASK_HEADER

MEMORY = "# Project notes\n\nHand-written: deploy after review.\n"


def rule_task(number: int, split: str = "train", *, rule: str | None = None) -> TaskRecord:
    old, new = f"oldtool{number}", f"newtool{number}"
    return TaskRecord(id=f"t-{split}-{number}", source="claude", request=f"run the {old} command on this project",
                      rules=[rule or f"Use {new}, not {old}"], judge=Judge(checks=[Check(op="contains", value=new)]),
                      split=split)


def passing_task(number: int) -> TaskRecord:
    return TaskRecord(id=f"t-pass-{number}", source="claude", request=f"say hello to visitor {number}",
                      judge=Judge(checks=[Check(op="contains", value="answer")]))


def settings(**overrides) -> StepSettings:
    # the optimizer path alone unless a test turns the users' own rules on
    return StepSettings(**{"edit_budget": 3, "gate_samples": 1, "propose_user_rules": False, **overrides})


def step(train, val=(), *, backend=None, documents=None, context="", held_rules=(), **overrides):
    backend = backend or MockBackend()
    chosen = settings(**overrides)
    replayer = Replayer(CallMeter(backend), workers=chosen.workers, cache=ReplayCache(), seed=chosen.seed)
    result = run_step(StepInput(train=list(train), val=list(val), documents=documents or {"memory": MEMORY},
                                context=context, held_rules=list(held_rules)), settings=chosen, replayer=replayer)
    return result, backend


def reflect_prompts(backend: MockBackend) -> list[str]:
    return [r.messages[0].content for r in backend.requests if MockBackend.prompt_kind(r) == "reflect"]


def edits_reply(*contents: str, evidence: list[str] | None = None, op: str = "append") -> str:
    return json.dumps({"edits": [{"target": "memory", "op": op, "anchor": None, "content": content,
                                  "rationale": "r", "evidence": evidence or []} for content in contents]})


# --------------------------------------------------------------------------- reflect: minibatches


@pytest.mark.parametrize(("tasks", "minibatch"), [(10, 4), (9, 8), (17, 8)])
def test_many_train_tasks_are_reflected_on_in_ceil_n_over_minibatch_calls(tasks, minibatch):
    result, backend = step([rule_task(n) for n in range(tasks)], minibatch_size=minibatch, gate_mode="off")
    assert backend.calls_by_kind["reflect"] == math.ceil(tasks / minibatch) == result.minibatches
    assert result.calls_by_stage["reflect"] == math.ceil(tasks / minibatch)
    # every train task is seen by exactly one reflect call, and no call sees more than a minibatch
    seen = [match.group(1) for prompt in reflect_prompts(backend) for match in TASK_HEADER.finditer(prompt)]
    assert sorted(seen) == sorted(f"t-train-{n}" for n in range(tasks))
    assert max(prompt.count("### task ") for prompt in reflect_prompts(backend)) <= minibatch


def test_a_single_minibatch_makes_one_reflect_call_and_no_merge_or_rank_call():
    result, backend = step([rule_task(n) for n in range(5)], minibatch_size=8, edit_budget=2, gate_mode="off")
    assert backend.calls_by_kind == {"target": 5, "reflect": 1}
    assert result.calls_by_stage["aggregate"] == result.calls_by_stage["select"] == 0
    assert planned_optimizer_calls(5, settings(minibatch_size=8)) == 1
    # two of the five rules were learned (the budget), and the update applied them
    assert [e.status for e in result.edits] == ["applied", "applied"]
    assert result.changed == ["memory"] and result.candidate["memory"].startswith(MEMORY.rstrip())


def test_minibatches_put_failing_tasks_first_and_failure_only_drops_the_passing_ones():
    tasks = [passing_task(0), passing_task(1), rule_task(0), passing_task(2), rule_task(1)]
    results = replay_tasks(tasks, Replayer(CallMeter(MockBackend())), skill="", memory="")
    batches = plan_minibatches(tasks, results, minibatch_size=2)
    assert [[t.id for t in b.tasks] for b in batches] == [["t-train-0", "t-train-1"], ["t-pass-0", "t-pass-1"],
                                                          ["t-pass-2"]]
    assert [b.kind for b in batches] == ["failure", "success", "success"]
    only = plan_minibatches(tasks, results, minibatch_size=2, failure_only=True)
    assert [[t.id for t in b.tasks] for b in only] == [["t-train-0", "t-train-1"]]


def test_failure_only_shows_reflection_no_passing_task():
    tasks = [passing_task(n) for n in range(3)] + [rule_task(n) for n in range(3)]
    result, backend = step(tasks, minibatch_size=2, failure_only=True, gate_mode="off")
    prompts = reflect_prompts(backend)
    assert len(prompts) == 2 == result.minibatches  # ceil(3 failing / 2)
    assert all("PASS" not in match.group(2) for p in prompts for match in TASK_HEADER.finditer(p))
    assert not any("visitor" in prompt for prompt in prompts)


def test_a_fatal_optimizer_error_during_minibatch_reflection_stops_the_step():
    backend = MockBackend(fail_with="401 unauthorized", fail_roles=["optimizer"])
    with pytest.raises(BackendError):
        step([rule_task(n) for n in range(6)], backend=backend, minibatch_size=2, gate_mode="off")


def test_context_reaches_every_reflect_prompt():
    result, backend = step([rule_task(n) for n in range(4)], minibatch_size=2, gate_mode="off",
                           context="Rejected on an earlier night: 'Always use tabs'")
    prompts = reflect_prompts(backend)
    assert len(prompts) == 2
    assert all("## Context\n<data>\nRejected on an earlier night: 'Always use tabs'\n</data>" in p for p in prompts)
    _, plain = step([rule_task(0)], gate_mode="off")
    assert "## Context" not in reflect_prompts(plain)[0]


# --------------------------------------------------------------------------- aggregate and select


def test_the_same_rule_from_two_minibatches_is_deduped_without_a_merge_call():
    shared = "Use newtool0, not oldtool0"
    tasks = [rule_task(0), rule_task(1, rule=shared), rule_task(2, rule=shared)]
    result, backend = step(tasks, minibatch_size=2, edit_budget=1, gate_mode="off")
    # screening gives a one-line edit the one bullet format of the documents
    assert [[e.content for e in patch] for patch in result.raw_patches] == [[f"- {shared}"], [f"- {shared}"]]
    assert [e.content for e in result.merged] == [f"- {shared}"]
    assert result.merged[0].evidence == ["t-train-0", "t-train-1", "t-train-2"]
    assert "merge" not in backend.calls_by_kind and "rank" not in backend.calls_by_kind


def test_patch_lists_are_merged_hierarchically_in_groups_of_merge_batch_size():
    result, backend = step([rule_task(n) for n in range(5)], minibatch_size=1, merge_batch_size=2, edit_budget=1,
                           gate_mode="off")
    # 5 lists -> groups (2, 2, 1): 2 calls -> 3 lists -> (2, 1): 1 call -> 2 lists -> 1 call
    assert backend.calls_by_kind["merge"] == 4 == result.calls_by_stage["aggregate"]
    assert planned_optimizer_calls(5, settings(minibatch_size=1, merge_batch_size=2)) == 5 + 4 + 1
    assert sorted(e.content for e in result.merged) == sorted(f"- Use newtool{n}, not oldtool{n}" for n in range(5))


def test_merge_prompts_list_patches_from_failing_tasks_before_those_from_passing_tasks():
    # minibatches are failing first and run one at a time (workers=1): the first reply is the failing task's
    backend = MockBackend(scripted={"reflect": [edits_reply("Use newtool0, not oldtool0", evidence=["t-train-0"]),
                                                edits_reply("Prefer short answers", evidence=["t-pass-0"])]})
    result, _ = step([passing_task(0), rule_task(0)], backend=backend, minibatch_size=1, workers=1, gate_mode="off")
    [merge_request] = [r for r in backend.requests if MockBackend.prompt_kind(r) == "merge"]
    prompt = merge_request.messages[0].content
    failing_list = prompt.index('(failing tasks)\n{"target":"memory","op":"append","anchor":null,"content":"- Use')
    passing_list = prompt.index('(passing tasks)\n{"target":"memory","op":"append","anchor":null,"content":"- Pre')
    assert failing_list < passing_list
    assert [e.content for e in result.merged] == ["- Use newtool0, not oldtool0", "- Prefer short answers"]


def scripted_three_edits(rank_replies: list[str] | None = None) -> MockBackend:
    scripted = {"reflect": [edits_reply("Run the linter first", "Answer in English", evidence=["t-train-0"]),
                            edits_reply("Keep answers short", evidence=["t-train-0", "t-train-1"])]}
    if rank_replies is not None:
        scripted["rank"] = rank_replies
    return MockBackend(scripted=scripted)


def test_rank_keeps_the_top_l_merged_edits_and_rejects_the_rest_with_a_reason():
    backend = scripted_three_edits()
    result, _ = step([rule_task(0), rule_task(1)], backend=backend, minibatch_size=1, workers=1, edit_budget=2,
                     gate_mode="off")
    assert backend.calls_by_kind["rank"] == 1
    # the mock ranks by evidence count: "Keep answers short" (2 tasks) first, then the merged order
    assert [e.content for e in result.ranked] == ["- Keep answers short", "- Run the linter first",
                                                  "- Answer in English"]
    assert [e.content for e in result.selected] == ["- Keep answers short", "- Run the linter first"]
    statuses = {e.content: (e.status, e.reason) for e in result.edits}
    assert statuses["- Answer in English"][0] == "rejected" and "not selected" in statuses["- Answer in English"][1]
    assert statuses["- Keep answers short"][0] == statuses["- Run the linter first"][0] == "applied"
    memory = result.candidate["memory"]
    assert "Keep answers short" in memory and "Run the linter first" in memory and "Answer in English" not in memory
    assert memory.index("Keep answers short") < memory.index("Run the linter first")  # applied in rank order


def test_an_invalid_rank_reply_falls_back_to_the_merged_order_and_is_recorded():
    backend = scripted_three_edits(rank_replies=["The second one, clearly."])
    result, _ = step([rule_task(0), rule_task(1)], backend=backend, minibatch_size=1, workers=1, edit_budget=2,
                     gate_mode="off")
    assert [e.content for e in result.selected] == ["- Run the linter first", "- Answer in English"]
    assert result.rank_fallback and "invalid rank reply" in result.rank_fallback
    assert {"stage": "rank", "message": result.rank_fallback} in result.errors


def test_an_optimizer_reply_with_the_old_op_add_is_applied_as_append():
    backend = MockBackend(scripted={"reflect": [edits_reply("Use newtool0, not oldtool0", op="add")]})
    result, _ = step([rule_task(0)], backend=backend, gate_mode="off")
    [applied] = result.edits
    assert (applied.op, applied.status) == ("append", "applied")
    assert "Use newtool0, not oldtool0" in result.candidate["memory"]


def test_an_optimizer_edit_restating_a_rule_the_memory_holds_in_the_users_words_yields():
    words = "always use timezone-aware UTC: datetime.now(timezone.utc)"
    [held] = stated_rules([TaskRecord(id="t-0", source="claude", request="log the time", rules=[words],
                                      judge=Judge(checks=[Check(op="contains", value="datetime.now(timezone.utc)",
                                                                rule=words)]), split="train")])
    memory = MEMORY + "\n" + written_line(held) + "\n"
    restated = "Always use timezone-aware UTC when working with dates and times."
    other = "Keep every log message under eighty characters."
    backend = MockBackend(scripted={"reflect": [edits_reply(restated, other)]})
    result, _ = step([rule_task(1)], backend=backend, documents={"memory": memory}, held_rules=[held])
    reasons = {edit.content: edit.reason for edit in result.edits}
    assert reasons["- " + restated].startswith("already stated in the documents") and words in reasons["- " + restated]
    assert [edit.content for edit in result.selected] == ["- " + other]
    backend = MockBackend(scripted={"reflect": [edits_reply(restated)]})
    result, _ = step([rule_task(1)], backend=backend, documents={"memory": memory})  # not known as held: kept
    assert [edit.content for edit in result.selected] == ["- " + restated]


def test_an_optimizer_edit_that_contradicts_the_users_rule_is_rejected_and_the_rule_is_written():
    ruff = "we moved from black to ruff: use ruff format, never black"
    train = TaskRecord(id="t-fmt", source="claude", request="format the module, autopep8 is gone too", rules=[ruff],
                       split="train", authored=["format the module, autopep8 is gone too"],
                       judge=Judge(checks=[Check(op="contains", value="ruff format", rule=ruff),
                                           Check(op="regex", value=negative_word_regex("black"), rule=ruff)]))
    backend = MockBackend(scripted={"reflect": [edits_reply("Use `black`, never `autopep8`.")]})
    result, _ = step([train], backend=backend, propose_user_rules=True)
    [refused] = [edit for edit in result.edits if "autopep8" in edit.content]
    assert refused.status == "rejected" and refused.reason.startswith(f"contradicts the user's rule {ruff!r}")
    assert [edit.content for edit in result.selected] == ["- Use `ruff format`, never `black`."]


def test_a_missing_document_is_not_editable():
    backend = MockBackend(scripted={"reflect": [json.dumps({"edits": [
        {"target": "skill", "op": "append", "content": "Always run the tests"}]})]})
    result, _ = step([rule_task(0)], backend=backend, gate_mode="off")
    assert result.changed == [] and set(result.candidate) == {"memory"}
    assert backend.requests[-1].json_schema["properties"]["edits"]["items"]["properties"]["target"]["enum"] == [
        "memory"]


# --------------------------------------------------------------------------- gated evaluate


def test_gate_off_accepts_greedily_and_replays_no_val_task():
    train, val = [rule_task(n) for n in range(3)], [rule_task(n, "val") for n in range(3)]
    result, backend = step(train, val, gate_mode="off")
    assert result.gate.verdict == "accept" and result.accepted
    assert result.baseline_val == [] and result.candidate_val == []
    assert backend.calls_by_kind["target"] == len(train) and result.calls_by_stage["gate"] == 0


def test_gate_on_replays_val_once_per_side_and_accepts_the_learned_rule():
    train, val = [rule_task(n) for n in range(3)], [rule_task(n, "val") for n in range(3)]
    result, backend = step(train, val, gate_rule="strict")
    assert result.gate.verdict == "accept_new_best"
    assert [r.hard for r in result.baseline_val] == [0, 0, 0] and [r.hard for r in result.candidate_val] == [1, 1, 1]
    # nothing replayed twice: train once (rollout), val once with each document set (gate); then the support
    # test replays, per edit, the candidate without it on the won task that tests what the edit states: each edit
    # loses its task without it (it earns its place), one call each
    assert result.calls_by_stage["rollout"] == 3 and result.calls_by_stage["gate"] == 6 + 3
    assert result.gate.details["support"] == {"checked": 3, "unsupported": 0, "calls": 3, "outcome": "kept all"}
    assert backend.calls_by_kind["target"] == 12


def test_gate_samples_resample_only_the_deciding_val_tasks_when_their_samples_differ():
    # at temperature 1 the simulator skips a rule in some samples: the won task's samples disagree, so it gets all
    # 3 samples per side; the stable passing task is not resampled
    train = [rule_task(0)]
    val = [rule_task(0, "val"), passing_task(9).model_copy(update={"split": "val", "id": "t-val-pass"})]
    result, _ = step(train, val, gate_rule="paired", gate_samples=3, gate_temperature=1.0)
    assert result.gate.details["resampled_tasks"] == ["t-val-0"] and result.settled == []
    assert [r.hard for r in result.candidate_val if r.task_id == "t-val-0"] == [1, 0, 0]
    assert sum(1 for r in result.candidate_val if r.task_id == "t-val-pass") == 1
    # first pass 2 tasks x 2 sides; then samples 0-1 at temperature 1 (new cache keys) per side; then sample 2
    assert result.calls_by_stage["gate"] == 2 * 2 + 2 * 2 + 2 * 1
    assert result.gate.verdict == "reject"  # the win did not hold over every sample


def test_a_val_task_whose_second_samples_repeat_the_first_stops_at_two():
    # at temperature 0 the simulator answers the same prompt identically: a third sample would only repeat it
    train = [rule_task(0)]
    val = [rule_task(0, "val"), passing_task(9).model_copy(update={"split": "val", "id": "t-val-pass"})]
    result, _ = step(train, val, gate_rule="paired", gate_samples=4)
    assert result.gate.details["resampled_tasks"] == ["t-val-0"]
    assert result.gate.details["settled_tasks"] == ["t-val-0"] == result.settled
    assert sum(1 for r in result.candidate_val if r.task_id == "t-val-0") == 2
    assert result.gate.verdict == "accept_new_best"
    # first pass 2 tasks x 2 sides, then one more sample of the won task per side (sample 0 is cached)
    assert result.calls_by_stage["gate"] == 2 * 2 + 2 * 1


def test_no_changed_document_is_rejected_without_a_candidate_replay():
    result, _ = step([passing_task(0)], [rule_task(0, "val")])
    assert result.gate.verdict == "reject" and "nothing to test" in result.gate.reason
    assert len(result.baseline_val) == 1 and result.candidate_val == []


# --------------------------------------------------------------------------- the night uses the step


def write_transcripts(claude_home: Path, project: Path) -> None:
    """Claude Code JSONL: one session per conversation, each request answered with npm, then corrected."""
    write_claude_sessions(claude_home, project, PNPM_CONVERSATIONS, fixed_answer="Sorry, I will use pnpm.")


def night(tmp_path: Path, name: str, **overrides):
    project = tmp_path / name / "project"
    project.mkdir(parents=True)
    (project / "CLAUDE.md").write_text("# Web app\n\nHand-written notes.\n", encoding="utf-8")
    write_transcripts(tmp_path / name / "claude", project)
    config = SleepConfig(backend="mock", lookback_hours=0, claude_home=tmp_path / name / "claude", **overrides)
    return run_night(config, project=project, state_root=tmp_path / name / "state").diagnostics


def test_run_night_learns_the_users_correction_through_the_step(tmp_path):
    # The user corrected every npm answer with "we use pnpm in this repo, never npm": that stated rule is proposed
    # (propose_user_rules, on by default), compiled from its validated checks (rule_wording; the mock optimizer
    # proposes the user's words, which yield), and with it in CLAUDE.md the mock target drops npm and says pnpm, so
    # every held-out task goes from failing (hard 0) to passing (hard 1). A night with 5 train tasks makes one
    # reflect call.
    diagnostics = night(tmp_path, "strict", gate_rule="strict", gate_samples=1)
    assert diagnostics.status == "accepted" and diagnostics.gate.verdict == "accept_new_best"
    # the mock optimizer proposes the same rule: it yields to the user's words, proposed by the step itself
    assert [(e.target, e.op, e.content, e.status) for e in diagnostics.edits] == [
        ("memory", "append", "- we use pnpm in this repo, never npm", "rejected"),
        ("memory", "prepend", "- Use `pnpm`, never `npm`.", "applied")]
    assert diagnostics.edits[0].reason.startswith("restates the user's rule")
    assert diagnostics.tasks["train"] == 5 and diagnostics.cost["optimizer"].calls == 1
    assert (diagnostics.baseline.hard, diagnostics.candidate.hard) == (0.0, 1.0)
    assert {"rollout", "reflect", "aggregate", "select", "update", "gate"} <= set(diagnostics.stage_seconds)


def test_run_night_decides_the_same_with_one_minibatch_or_several(tmp_path):
    one = night(tmp_path, "one", minibatch_size=8)
    several = night(tmp_path, "several", minibatch_size=2)
    assert several.cost["optimizer"].calls == 3 + 0  # ceil(5 / 2) reflect calls; the same rule is deduped
    assert one.cost["optimizer"].calls == 1
    for diagnostics in (one, several):
        assert diagnostics.status == "accepted" and diagnostics.gate.verdict == "accept_new_best"
    assert [(e.content, e.status) for e in several.edits] == [(e.content, e.status) for e in one.edits]
    assert sorted(several.edits[0].evidence) == sorted(one.edits[0].evidence)
    assert [(c.task_id, c.outcome) for c in several.gate.per_task] == [(c.task_id, c.outcome)
                                                                       for c in one.gate.per_task]
    assert (several.baseline, several.candidate) == (one.baseline, one.candidate)


# --------------------------------------------------------------------------- rule mining from corrections


def test_the_users_stated_rules_are_proposed_verbatim_first_and_most_stated_first():
    tasks = [rule_task(0, rule="Use pnpm, never npm"), rule_task(1, rule="Dates are ISO, YYYY-MM-DD"),
             rule_task(2, rule="use pnpm,  never npm.")]
    optimizer = MockBackend(scripted={"optimizer": [edits_reply("A rule the optimizer wrote itself")]})
    result, _ = step(tasks, backend=optimizer, propose_user_rules=True, edit_budget=2, gate_mode="off")
    assert result.user_rules == 2
    assert [e.content for e in result.selected] == ["- Use pnpm, never npm.", "- Dates are ISO, YYYY-MM-DD."]
    assert result.selected[0].evidence == ["t-train-0", "t-train-2"]  # stated twice: first in line
    not_selected = [e for e in result.edits if e.content == "- A rule the optimizer wrote itself"]
    assert not_selected and not_selected[0].status == "rejected"


# --------------------------------------------------------------------------- the users' own rules at the gate


def stated_task(number: int) -> TaskRecord:
    """A train task whose user stated "Use newtool<n>, not oldtool<n>" and whose validated check tests it."""
    rule = f"Use newtool{number}, not oldtool{number}"
    return rule_task(number).model_copy(update={"judge": Judge(checks=[Check(op="contains", value=f"newtool{number}",
                                                                             rule=rule)])})


def test_a_tie_on_val_is_no_evidence_against_the_users_own_rule_when_it_wins_its_own_tasks():
    val = [passing_task(9).model_copy(update={"split": "val", "id": "t-val-pass"})]
    # wording_max_calls=0: the wording choice would replay the own task first, and this replay would hit the cache
    result, _ = step([stated_task(0)], val, propose_user_rules=True, gate_samples=1, wording_max_calls=0,
                     backend=MockBackend(scripted={"reflect": [edits_reply()]}))
    assert result.gate.verdict == "accept" and result.gate.details["clause"] == "stated_rules"
    report = result.gate.details["stated_rules"]
    assert report == {"own_tasks": ["t-train-0"], "won": ["t-train-0"], "lost": [], "calls": 1, "changes": [],
                      "outcome": "accepted"}
    assert "the user's own rules" in result.gate.reason


def rule_change(own_check: str, *, old_line: str = "- Use oldtool0.", request: str = "say hello to visitor 0"):
    """The user now states "Use newtool0, not oldtool0" where the managed block says ``old_line``; the rule's own
    train task asks something unrelated (the simulator applies a rule only to a request that shares its words) and
    is judged by ``own_check``; the one val task ties."""
    from skillopt_sleep.documents.block import BLOCK_BEGIN, BLOCK_END, BLOCK_HEADING
    from skillopt_sleep.mine.rulebook import StatedRule

    text = "Use newtool0, not oldtool0"
    rule = StatedRule(id="r-newtool0", keys=[("has", "newtool0"), ("not", "oldtool0")], text=text, phrasings=[text],
                      checks=[Check(op="contains", value="newtool0", rule=text)], task_ids=["t-own"], stated=1,
                      stated_total=1, scope="lasting")
    own = TaskRecord(id="t-own", source="claude", request=request, rules=[text], split="train",
                     judge=Judge(checks=[Check(op="contains", value=own_check, rule=text)]))
    memory = f"{MEMORY}\n{BLOCK_BEGIN}\n{BLOCK_HEADING}\n\n{old_line}\n\n{BLOCK_END}\n"
    val = [passing_task(9).model_copy(update={"split": "val", "id": "t-val-pass"})]
    chosen = settings(propose_user_rules=True, gate_samples=1, wording_max_calls=0, rule_wording="user")
    backend = MockBackend(scripted={"reflect": [edits_reply()]})
    return run_step(StepInput(train=[own], val=val, documents={"memory": memory}, rules=[rule]), settings=chosen,
                    replayer=Replayer(CallMeter(backend), workers=1, cache=ReplayCache(), seed=chosen.seed))


def test_a_rule_change_lands_the_night_it_is_stated_when_its_own_tasks_do_not_regress():
    """Issue 26's "we moved from black to ruff": the newer rule replaces the line it contradicts; every task ties
    (its own task fails both ways), which leaves an ordinary rule pending, but a change is accepted: the old line
    would now teach the opposite of what the user says."""
    result = rule_change("newtool0")
    [edit] = [edit for edit in result.edits if edit.status == "applied"]
    assert (edit.op, edit.anchor, edit.content) == ("replace", "- Use oldtool0.", "- Use newtool0, not oldtool0.")
    report = result.gate.details["stated_rules"]
    assert (report["won"], report["lost"], report["changes"]) == ([], [], ["- Use oldtool0."])
    assert result.accepted and result.gate.details["clause"] == "stated_rules"
    assert "a rule change that replaces 1 rule(s)" in result.gate.reason


def test_an_appended_rule_that_wins_none_of_its_own_tasks_still_waits():
    """The same tie without a line to replace is no rule change: the rule waits for evidence."""
    result = rule_change("newtool0", old_line="- Deploy after review.")
    [edit] = [edit for edit in result.edits if edit.status == "applied"]
    assert edit.op == "prepend"
    outcome = result.gate.details["stated_rules"]["outcome"]
    assert not result.accepted and outcome == "pending: won none of its own tasks"


def test_a_rule_change_that_breaks_its_own_task_is_not_accepted():
    """Its own task asks about oldtool0 and wants it named (the baseline's echo of the request passes); the change
    forbids oldtool0, so the candidate fails it: a loss, and the change waits."""
    result = rule_change("oldtool0", request="run the oldtool0 command on this project")
    report = result.gate.details["stated_rules"]
    assert (report["lost"], report["changes"]) == (["t-own"], ["- Use oldtool0."])
    assert not result.accepted and report["outcome"] == "pending: lost an own task"


def test_the_users_own_rules_can_be_gated_like_any_edit():
    val = [passing_task(9).model_copy(update={"split": "val", "id": "t-val-pass"})]
    result, _ = step([stated_task(0)], val, propose_user_rules=True, gate_samples=1, gate_stated_rules="held_out",
                     backend=MockBackend(scripted={"reflect": [edits_reply()]}))
    assert result.gate.verdict == "reject" and result.gate.details["pending"] is True
    assert "stated_rules" not in result.gate.details


def test_an_optimizer_edit_beside_the_users_rules_needs_a_val_win():
    val = [passing_task(9).model_copy(update={"split": "val", "id": "t-val-pass"})]
    result, _ = step([stated_task(0)], val, propose_user_rules=True, gate_samples=1,
                     backend=MockBackend(scripted={"reflect": [edits_reply("Answer in full sentences")]}))
    assert result.gate.verdict == "reject" and "stated_rules" not in result.gate.details
