"""The mock backend is a deterministic simulator: these tests pin down what it simulates."""

from __future__ import annotations

import json
import math

from skillopt_sleep.backends import get_backend
from skillopt_sleep.backends.base import Backend, CallMeter, ChatMessage, ChatRequest
from skillopt_sleep.backends.mock import MockBackend, read_rule
from skillopt_sleep.checks import check_passes
from skillopt_sleep.engine import judges
from skillopt_sleep.engine.reflect import edits_schema
from skillopt_sleep.engine.replay import system_prompt
from skillopt_sleep.grammar.statements import checks_for_rule
from skillopt_sleep.prompts import render_prompt


def ask_target(backend: MockBackend, request: str, *, skill: str = "", memory: str = "",
               temperature: float = 0.0, seed: int | None = None) -> str:
    chat = ChatRequest(role="target", temperature=temperature, seed=seed, messages=[
        ChatMessage(role="system", content=system_prompt(skill, memory)),
        ChatMessage(role="user", content=request),
    ])
    result = backend.chat(chat)
    assert result.ok
    return result.text


def test_mock_backend_implements_the_backend_protocol_and_is_registered():
    backend = get_backend("mock")
    assert isinstance(backend, MockBackend)
    assert isinstance(backend, Backend)
    assert backend.model_for("target") == "mock-target"
    assert backend.model_for("optimizer") == "mock-optimizer"
    assert "SIMULATOR" in MockBackend.__doc__


def test_mock_target_obeys_a_rule_only_when_it_is_in_the_system_prompt():
    backend = MockBackend()
    without_rule = ask_target(backend, "install the project dependencies with npm")
    with_rule = ask_target(backend, "install the project dependencies with npm", memory="- Use pnpm, not npm")
    assert "npm" in without_rule.split() and "pnpm" not in without_rule
    assert "pnpm" in with_rule
    assert "npm" not in with_rule.replace("pnpm", "")


def test_mock_target_ignores_a_rule_unrelated_to_the_request():
    answer = ask_target(MockBackend(), "write a haiku about autumn leaves", memory="Use pnpm, not npm")
    assert "pnpm" not in answer
    assert "Following the rule" not in answer


def test_mock_target_applies_a_general_always_rule_to_any_request():
    answer = ask_target(MockBackend(), "write a haiku about autumn leaves",
                        skill="Always end with a summary line")
    assert "Following the rule: Always end with a summary line." in answer


def test_mock_target_does_not_treat_the_template_frame_as_rules():
    assert MockBackend().rule_lines(system_prompt("", "")) == []
    assert MockBackend().rule_lines(system_prompt("", "<!-- skillopt-sleep:begin -->\n- Use pnpm\n")) == ["Use pnpm"]


def test_mock_target_is_deterministic_at_temperature_zero():
    first = ask_target(MockBackend(), "run the tests with npm", memory="Use pnpm, not npm")
    second = ask_target(MockBackend(), "run the tests with npm", memory="Use pnpm, not npm")
    assert first == second


def test_mock_target_sampling_noise_drops_the_rule_in_some_seeds_only():
    backend = MockBackend()
    answers = [ask_target(backend, "install deps with npm", memory="Use pnpm, not npm", temperature=1.0, seed=seed)
               for seed in range(16)]
    obeyed = sum("pnpm" in answer for answer in answers)
    assert 0 < obeyed < 16
    repeated = [ask_target(backend, "install deps with npm", memory="Use pnpm, not npm", temperature=1.0,
                           seed=seed) for seed in range(16)]
    assert repeated == answers


def test_read_rule_splits_positive_forms_from_the_literals_the_rule_checks_forbid():
    assert read_rule("Use pnpm, not npm") == (("Use pnpm",), frozenset({"npm"}))
    assert read_rule("Never use npm; use pnpm") == (("use pnpm",), frozenset({"npm"}))
    assert read_rule("Use `pnpm`, never `npm`.") == (("Use `pnpm`",), frozenset({"npm"}))
    # the miner's check forbids the literal "npm install", so that is what the simulator leaves out
    assert read_rule("Use pnpm install instead of npm install") == (("Use pnpm install",), frozenset({"npm install"}))
    # a style names no literal: nothing to leave out, the preferred side is still followed
    assert read_rule("use tabs, not spaces") == (("Use tabs",), frozenset())
    # not a rule form ("don't forget" is neutral): followed as written, nothing forbidden
    assert read_rule("Don't forget the tests") == (("Don't forget the tests",), frozenset())
    # a tool named by what it does beside a prohibition ("add it with uv") is the tool to use
    assert read_rule("we don't use pip in this project, add it with uv.") == (("Use uv",), frozenset({"pip"}))
    # a rule with its subject first ("Tests use vitest, never jest.") is read as "use vitest, not jest"
    assert read_rule("Tests use vitest, never jest.") == (("Use vitest",), frozenset({"jest"}))


def test_mock_target_leaves_out_exactly_what_the_miners_checks_forbid():
    rule = "we use pnpm in this repo, never npm"
    answer = ask_target(MockBackend(), "install the deps with npm", memory=f"- {rule}")
    checks = checks_for_rule(rule)
    assert checks and all(check_passes(check, answer, None) for check in checks)
    unguided = ask_target(MockBackend(), "install the deps with npm")
    assert not all(check_passes(check, unguided, None) for check in checks)


def test_mock_failure_options_return_an_error_result_for_the_chosen_roles():
    backend = MockBackend(fail_with="401 unauthorized", fail_kind="fatal", fail_roles=["target"])
    failed = backend.chat(ChatRequest(role="target", messages=[ChatMessage(role="user", content="hi")]))
    assert failed.error == "401 unauthorized" and failed.error_kind == "fatal" and failed.text == ""
    judged = backend.chat(ChatRequest(role="judge", messages=[ChatMessage(role="user", content="## Rubric\nx")]))
    assert judged.ok


def test_mock_counts_calls_and_estimates_tokens_as_characters_over_four():
    backend = MockBackend()
    content = "x" * 41
    result = backend.chat(ChatRequest(role="target", messages=[ChatMessage(role="user", content=content)]))
    assert result.usage.prompt_tokens == math.ceil(41 / 4)
    assert result.usage.completion_tokens == math.ceil(len(result.text) / 4)
    backend.chat(ChatRequest(role="judge", messages=[ChatMessage(role="user", content="## Rubric\nx")]))
    assert backend.calls == 2
    assert backend.calls_by_role == {"target": 1, "judge": 1}


def test_scripted_replies_come_first_then_the_simulation():
    backend = MockBackend(scripted={"optimizer": ["not json"]})
    request = ChatRequest(role="optimizer", messages=[ChatMessage(role="user", content="no tasks")])
    assert backend.chat(request).text == "not json"
    assert json.loads(backend.chat(request).text) == {"edits": []}


def test_mock_rubric_judge_scores_the_share_of_rubric_words_in_the_answer():
    judge = judges.make_rubric_judge(CallMeter(MockBackend()))
    score, rationale = judge("install deps", "uses pnpm and updates the lockfile", "Run pnpm install.")
    # rubric words: pnpm, update, lockfile ("uses" stems to the generic "use"); the answer has only "pnpm"
    assert score == round(1 / 3, 3)
    assert "1 of 3" in rationale


def test_mock_miner_reads_the_reaction_to_judge_the_outcome():
    backend = MockBackend()
    prompt = render_prompt("miner", request="install the deps", final_answer="npm install done",
                           reaction="no, use pnpm instead")
    reply = json.loads(backend.chat(ChatRequest(role="miner", messages=[ChatMessage(role="user", content=prompt)]
                                                )).text)
    assert set(reply) == {"intent", "checks", "rubric", "outcome"}
    assert reply["checks"] == [] and reply["outcome"] == "failure"
    assert reply["intent"] == "install the deps"
    thanked = render_prompt("miner", request="fix it", final_answer="done", reaction="thanks, works")
    reply = json.loads(backend.chat(ChatRequest(role="miner", messages=[ChatMessage(role="user", content=thanked)]
                                                )).text)
    assert reply["outcome"] == "success"


def _reflect_prompt(tasks_text: str, memory: str = "(empty)") -> str:
    return render_prompt("reflect", edit_budget=3, targets="memory, skill", skill="(empty)", memory=memory,
                         tasks=tasks_text)


def _optimize(backend: MockBackend, prompt: str, targets=("memory", "skill"), budget: int = 3) -> list[dict]:
    request = ChatRequest(role="optimizer", json_schema=edits_schema(budget, list(targets)),
                          messages=[ChatMessage(role="user", content=prompt)])
    return json.loads(backend.chat(request).text)["edits"]


FAILING_BLOCKS = """### task t-1: FAIL (hard 0, soft 0.00)
Request: install deps with npm
- user rule: Use pnpm, not npm
Answer: npm install
Judge: contains 'pnpm' failed

### task t-2: PASS (hard 1, soft 1.00)
Request: format the code
- user rule: Run black before committing
Answer: ran black
Judge: passed

### task t-3: FAIL (hard 0, soft 0.50)
Request: add the lodash package
- user rule: use pnpm, NOT npm
- user rule: Pin exact versions
Answer: npm add lodash
Judge: contains 'pnpm' failed"""


def test_mock_optimizer_proposes_one_append_edit_per_distinct_rule_of_the_failing_tasks():
    edits = _optimize(MockBackend(), _reflect_prompt(FAILING_BLOCKS))
    assert [edit["content"] for edit in edits] == ["Use pnpm, not npm", "Pin exact versions"]
    assert edits[0]["evidence"] == ["t-1", "t-3"]
    assert all(edit["op"] == "append" and edit["target"] == "memory" for edit in edits)


def test_mock_optimizer_respects_budget_and_allowed_targets():
    edits = _optimize(MockBackend(), _reflect_prompt(FAILING_BLOCKS), targets=("skill",), budget=1)
    assert len(edits) == 1 and edits[0]["target"] == "skill"


def test_mock_optimizer_skips_a_rule_already_in_the_memory():
    edits = _optimize(MockBackend(), _reflect_prompt(FAILING_BLOCKS, memory="Use pnpm, not npm"))
    assert [edit["content"] for edit in edits] == ["Pin exact versions"]


def test_mock_optimizer_without_user_rules_proposes_a_procedure_from_the_fail_reason():
    blocks = "### task t-9: FAIL (hard 0, soft 0.00)\nRequest: list files\nAnswer: ok\nJudge: max_words 5 failed"
    edits = _optimize(MockBackend(), _reflect_prompt(blocks))
    assert len(edits) == 1 and edits[0]["evidence"] == ["t-9"]
    assert edits[0]["content"] == "Before answering, keep the answer as short as the user asked."
    blocks = "### task t-8: FAIL (hard 0, soft 0.00)\nRequest: x\nAnswer: ok\nJudge: contains 'zebra-42' failed"
    [edit] = _optimize(MockBackend(), _reflect_prompt(blocks))
    assert "zebra-42" not in edit["content"]  # a procedure, never the literal the check looks for


def test_mock_optimizer_proposes_nothing_when_every_task_passes():
    blocks = "### task t-2: PASS (hard 1, soft 1.00)\nRequest: x\n- user rule: Use tabs\nJudge: passed"
    assert _optimize(MockBackend(), _reflect_prompt(blocks)) == []
