"""Reflect: bounded, structured, tolerant of messy replies, and strict about what an edit may be."""

from __future__ import annotations

import json

from skillopt_sleep.backends.base import CallMeter
from skillopt_sleep.backends.mock import MockBackend
from skillopt_sleep.engine.reflect import (
    MAX_TASKS_PER_CALL,
    RETRY_MESSAGE,
    EditScope,
    build_prompt,
    edits_schema,
    is_code_fragment,
    reflect,
    reject_restatements,
)
from skillopt_sleep.engine.replay import Replayer, replay_tasks
from skillopt_sleep.models import Check, EditRecord, Judge, ReplayResult, TaskEvidence, TaskRecord

PNPM_JUDGE = Judge(checks=[Check(op="contains", value="pnpm"), Check(op="not_contains", value="npm install")])


def make_task(task_id: str, request: str, *, rules: list[str] | None = None, final_answer: str = "",
              reaction_text: str = "", split: str = "train") -> TaskRecord:
    evidence = TaskEvidence(final_answer=final_answer, reaction="correction" if reaction_text else "none",
                            reaction_text=reaction_text)
    return TaskRecord(id=task_id, source="claude", request=request, rules=rules or [], evidence=evidence,
                      judge=PNPM_JUDGE, split=split)


def result(task_id: str, hard: int, response: str, sample: int = 0, **extra) -> ReplayResult:
    return ReplayResult(task_id=task_id, sample=sample, hard=hard, soft=float(hard), response=response,
                        fail_reason=None if hard else "contains 'pnpm' failed", **extra)


def edit_reply(*contents: str, target: str = "memory") -> str:
    return json.dumps({"edits": [{"target": target, "op": "add", "anchor": None, "content": content,
                                  "rationale": "r", "evidence": []} for content in contents]})


def test_reflect_with_the_mock_optimizer_proposes_the_users_rule():
    task = make_task("t-1", "install the deps with npm", rules=["Use pnpm, not npm"],
                     reaction_text="no - use pnpm, not npm")
    meter = CallMeter(MockBackend())
    results = replay_tasks([task], Replayer(meter), skill="", memory="")
    outcome = reflect(tasks=[task], results=results, documents={}, scope=EditScope(edit_budget=3), meter=meter)
    assert outcome.error is None
    assert [(e.target, e.op, e.content) for e in outcome.edits] == [("memory", "append", "- Use pnpm, not npm")]
    assert outcome.edits[0].evidence == ["t-1"] and outcome.edits[0].status == "proposed"
    # the learned rule really fixes the task when replayed
    [after] = replay_tasks([task], Replayer(meter), skill="", memory=outcome.edits[0].content)
    assert after.hard == 1


def test_reflect_prompt_holds_rules_reactions_failures_and_successes():
    failing = make_task("t-1", "install the deps with npm", rules=["Use pnpm, not npm"],
                        reaction_text="wrong tool, I said pnpm")
    passing = make_task("t-2", "format the code", rules=["Run black before committing"])
    prompt = build_prompt(tasks=[failing, passing], results=[result("t-1", 0, "npm i"), result("t-2", 1, "ok")],
                          documents={"skill": "SKILL BODY", "memory": "MEMORY BODY"}, edit_budget=2,
                          targets=["memory"], contrastive=False)
    assert "- user rule: Use pnpm, not npm" in prompt
    assert "User reaction (correction): wrong tool, I said pnpm" in prompt
    assert "### task t-1: FAIL" in prompt and "### task t-2: PASS" in prompt
    assert "SKILL BODY" in prompt and "MEMORY BODY" in prompt
    assert "at most 2 edits" in prompt and "{tasks}" not in prompt
    assert prompt.index("t-1: FAIL") < prompt.index("t-2: PASS")


def test_reflect_never_shows_held_out_tasks_or_failed_calls():
    train = make_task("t-1", "install with npm please")
    held_out = make_task("t-2", "SECRET VALIDATION REQUEST", split="val")
    errored = make_task("t-3", "ERRORED REQUEST")
    backend = MockBackend()
    reflect(tasks=[train, held_out, errored],
            results=[result("t-1", 0, "npm i"), result("t-2", 0, "x"),
                     ReplayResult(task_id="t-3", error="transient: timeout")],
            documents={}, scope=EditScope(edit_budget=1), meter=CallMeter(backend))
    prompt = backend.requests[0].messages[-1].content
    assert "install with npm please" in prompt
    assert "SECRET VALIDATION REQUEST" not in prompt
    assert "ERRORED REQUEST" not in prompt


def test_reflect_prompt_is_bounded_for_a_small_model():
    tasks = [make_task(f"t-{n}", f"request {n} " + "word " * 2000, rules=[f"rule {n}"]) for n in range(30)]
    results = [result(t.id, 0, "answer " * 2000) for t in tasks]
    prompt = build_prompt(tasks=tasks, results=results, documents={"skill": "s" * 20_000, "memory": "m" * 20_000},
                          edit_budget=3, targets=["memory", "skill"], contrastive=False)
    assert prompt.count("### task ") <= MAX_TASKS_PER_CALL
    assert len(prompt) < 14_000  # ~3.5k tokens at 4 characters per token


def test_reflect_returns_at_most_the_edit_budget():
    backend = MockBackend(scripted={"optimizer": [edit_reply("Use pnpm", "Use ruff", "Use uv", "Use tabs")]})
    outcome = reflect(tasks=[make_task("t-1", "x")], results=[result("t-1", 0, "y")], documents={},
                      scope=EditScope(edit_budget=2), meter=CallMeter(backend))
    assert [e.content for e in outcome.edits] == ["- Use pnpm", "- Use ruff"]
    assert [e.reason for e in outcome.rejected] == ["over the edit budget (2)"] * 2
    assert backend.requests[0].json_schema["properties"]["edits"]["maxItems"] == 2


def test_invalid_json_is_retried_once_then_reported():
    backend = MockBackend(scripted={"optimizer": ["I think you should use pnpm.", "Still prose, sorry." * 60]})
    outcome = reflect(tasks=[make_task("t-1", "x")], results=[result("t-1", 0, "y")], documents={},
                      scope=EditScope(edit_budget=2), meter=CallMeter(backend))
    assert backend.calls_by_role == {"optimizer": 2}
    assert backend.requests[1].messages[-1].content == RETRY_MESSAGE
    assert outcome.edits == [] and outcome.error and "not valid JSON" in outcome.error
    assert outcome.raw_head == ("Still prose, sorry." * 60)[:500]


def test_a_fenced_json_reply_after_a_bad_one_is_accepted():
    fenced = "Here you go:\n```json\n" + edit_reply("Use pnpm, not npm") + "\n```\nHope it helps."
    backend = MockBackend(scripted={"optimizer": ["{broken", fenced]})
    outcome = reflect(tasks=[make_task("t-1", "x")], results=[result("t-1", 0, "y")], documents={},
                      scope=EditScope(edit_budget=2), meter=CallMeter(backend))
    assert outcome.error is None
    assert [e.content for e in outcome.edits] == ["- Use pnpm, not npm"]


def test_edits_to_a_document_that_may_not_evolve_are_rejected_with_a_reason():
    backend = MockBackend(scripted={"optimizer": [edit_reply("Always run the tests", target="skill")]})
    outcome = reflect(tasks=[make_task("t-1", "x")], results=[result("t-1", 0, "y")], documents={},
                      scope=EditScope(edit_budget=2, evolve_skill=False), meter=CallMeter(backend))
    assert outcome.edits == []
    assert "evolve_skill = false" in outcome.rejected[0].reason
    assert backend.requests[0].json_schema["properties"]["edits"]["items"]["properties"]["target"]["enum"] == [
        "memory"]


def test_mock_optimizer_targets_the_skill_when_memory_may_not_evolve():
    task = make_task("t-1", "install with npm", rules=["Use pnpm, not npm"])
    outcome = reflect(tasks=[task], results=[result("t-1", 0, "npm i")], documents={},
                      scope=EditScope(edit_budget=1, evolve_memory=False), meter=CallMeter(MockBackend()))
    assert [(e.target, e.content) for e in outcome.edits] == [("skill", "- Use pnpm, not npm")]


def test_an_edit_copying_a_long_run_of_the_request_is_rejected_as_a_restatement():
    task = make_task("t-1", "please rename the fetch_user helper in api/client.py to load_user and update callers")
    [edit] = reject_restatements(
        [EditRecord(target="memory", op="add", content="Rename the fetch_user helper in api/client.py to load_user "
                                                       "and update callers.")], [task])
    assert edit.status == "rejected" and "consecutive words" in edit.reason and "t-1" in edit.reason


def test_an_edit_copying_a_recalled_past_request_and_its_note_is_rejected_like_a_train_restatement():
    # world 2, night 4: the optimizer wrote a request the recall context showed, with the context's own note, into
    # the memory ("- Use `uv add scikit-learn` for the churn model please [asked 1x over 1 night(s); ...]")
    tonight = make_task("t-1", "add a cli flag for the export path", rules=["we're a uv shop"])
    past = make_task("t-0", "uv add scikit-learn for the churn model please")
    copied = ("Use `uv add scikit-learn` for the churn model please [asked 1x over 1 night(s); last score hard "
              "0.00, soft 0.00]")
    general = "Add every dependency with `uv add`, never with pip."

    def run(recalled):
        backend = MockBackend(scripted={"optimizer": [edit_reply(copied, general)]})
        return reflect(tasks=[tonight], results=[result("t-1", 0, "pip install")], documents={},
                       scope=EditScope(edit_budget=3), meter=CallMeter(backend),
                       context="Similar past train tasks:\n- " + past.request, recalled=recalled)

    shown = run([past])
    assert [edit.content for edit in shown.edits] == ["- " + general]
    [rejected] = shown.rejected
    assert rejected.content.startswith("- Use `uv add scikit-learn`") and "restates task t-0" in rejected.reason
    assert len(run([]).edits) == 2  # the train task alone does not hold it: the recalled task is what it copies


def test_an_edit_copying_most_content_words_of_the_final_answer_is_rejected():
    task = make_task("t-1", "why is the build failing", final_answer=(
        "The build fails because webpack cannot resolve lodash-es; pinning typescript 5.4 and clearing "
        "node_modules cache fixed the resolver error."))
    [edit] = reject_restatements([EditRecord(target="memory", op="add", content=(
        "Fix resolver error: clear node_modules cache, pin typescript 5.4, webpack resolve lodash-es build."))],
        [task])
    assert edit.status == "rejected" and "content words copied" in edit.reason


def test_a_general_procedure_on_the_same_topic_as_a_task_is_kept():
    task = make_task("t-1", "add tests for the parser module and run pytest in tests/unit with -q before commit")
    [edit] = reject_restatements([EditRecord(target="memory", op="add", content=(
        "When adding tests, put them in tests/unit and run pytest -q before every commit."))], [task])
    assert edit.status == "proposed"


def test_a_short_user_rule_is_kept_even_when_the_request_holds_it():
    task = make_task("t-1", "install the deps. Use pnpm, never npm", rules=["Use pnpm, never npm"])
    [edit] = reject_restatements([EditRecord(target="memory", op="add", content="Use pnpm, never npm")], [task])
    assert edit.status == "proposed" and edit.reason == ""


def test_a_long_user_rule_is_kept_because_the_users_rules_are_exempt():
    rule = "Always run the full test suite with pytest before you commit anything"
    request = f"commit the fix. {rule}"
    kept = reject_restatements([EditRecord(target="memory", op="add", content=rule)],
                               [make_task("t-1", request, rules=[rule])])
    assert kept[0].status == "proposed"
    # the same text without the rule on record is a copy of the request
    copied = reject_restatements([EditRecord(target="memory", op="add", content=rule)],
                                 [make_task("t-1", request)])
    assert copied[0].status == "rejected"


def test_a_code_fragment_edit_is_rejected_but_a_rule_with_inline_code_is_kept():
    code = "```python\nimport os\nos.system('pnpm install')\n```"
    assert is_code_fragment(code)
    assert not is_code_fragment("Run `pytest -q` before committing; never skip failing tests.")
    backend = MockBackend(scripted={"optimizer": [edit_reply(code, "Run `pytest -q` before committing")]})
    outcome = reflect(tasks=[make_task("t-1", "x")], results=[result("t-1", 0, "y")], documents={},
                      scope=EditScope(edit_budget=3), meter=CallMeter(backend))
    assert [e.content for e in outcome.edits] == ["- Run `pytest -q` before committing"]
    assert "code" in outcome.rejected[0].reason


def test_contrastive_prompt_shows_a_passing_and_a_failing_sample():
    task = make_task("t-1", "install the deps", rules=["Use pnpm, not npm"])
    results = [result("t-1", 1, "PASSING ANSWER with pnpm", sample=0),
               result("t-1", 0, "FAILING ANSWER with npm", sample=1),
               result("t-1", 1, "another pass", sample=2)]
    backend = MockBackend()
    outcome = reflect(tasks=[task], results=results, documents={}, scope=EditScope(edit_budget=2),
                      meter=CallMeter(backend), contrastive=True)
    prompt = backend.requests[0].messages[-1].content
    assert "### task t-1: MIXED (2 of 3 samples passed)" in prompt
    assert "Passing answer (sample 0): <data>PASSING ANSWER with pnpm</data>" in prompt  # answers are data
    assert "Failing answer (sample 1): <data>FAILING ANSWER with npm</data>" in prompt
    assert "general rule explains" in prompt
    assert [e.content for e in outcome.edits] == ["- Use pnpm, not npm"]


def test_contrastive_reflection_works_from_real_k_rollouts():
    task = make_task("t-1", "npm install the deps", rules=["Use pnpm, not npm"])
    meter = CallMeter(MockBackend())
    results = replay_tasks([task], Replayer(meter), skill="", memory="Use pnpm, not npm", samples=8,
                           temperature=1.0)
    assert {r.hard for r in results} == {0, 1}  # the simulator's sampling noise drops the rule sometimes
    backend = MockBackend()
    reflect(tasks=[task], results=results, documents={}, scope=EditScope(edit_budget=1), meter=CallMeter(backend),
            contrastive=True)
    assert "MIXED" in backend.requests[0].messages[-1].content


def test_edits_schema_bounds_items_and_targets_and_requires_every_field():
    schema = edits_schema(2, ["memory"])
    edits = schema["properties"]["edits"]
    assert edits["maxItems"] == 2
    assert edits["items"]["properties"]["target"]["enum"] == ["memory"]
    assert set(edits["items"]["required"]) == set(edits["items"]["properties"])
    assert edits["items"]["additionalProperties"] is False


def test_reflect_makes_no_call_when_nothing_may_evolve():
    backend = MockBackend()
    outcome = reflect(tasks=[make_task("t-1", "x")], results=[result("t-1", 0, "y")], documents={},
                      scope=EditScope(edit_budget=2, evolve_skill=False, evolve_memory=False),
                      meter=CallMeter(backend))
    assert outcome.error and backend.calls == 0


def test_placeholder_content_copied_from_a_schema_example_is_rejected_before_the_gate():
    from skillopt_sleep.engine.reflect import is_placeholder, screen_edits
    from skillopt_sleep.models import EditRecord

    placeholder = EditRecord(target="memory", op="append", content="...", rationale="...")
    rule = EditRecord(target="memory", op="append", content="- Use pnpm, never npm.")
    accepted, rejected = screen_edits([placeholder, rule], [], edit_budget=3, evolve_skill=True, evolve_memory=True)
    assert accepted == [rule]
    assert rejected == [placeholder] and "placeholder" in placeholder.reason
    assert is_placeholder("TBD") and is_placeholder("- ...") and not is_placeholder("Use pnpm")
    assert is_placeholder("<the rule in one short line>")


def test_a_transient_optimizer_failure_is_retried_once_then_reported_not_a_backend_error():
    from skillopt_sleep.backends.base import ChatResult

    class CutJSON(MockBackend):
        def chat(self, request):
            if request.role == "optimizer":
                self.calls_by_role["optimizer"] = self.calls_by_role.get("optimizer", 0) + 1
                return ChatResult(error="reply is not JSON (cut at max_tokens)", error_kind="transient")
            return super().chat(request)

    backend = CutJSON()
    outcome = reflect(tasks=[make_task("t-1", "x")], results=[result("t-1", 0, "y")], documents={},
                      scope=EditScope(edit_budget=2), meter=CallMeter(backend))
    assert backend.calls_by_role["optimizer"] == 2
    assert outcome.edits == [] and outcome.error and "call failed" in outcome.raw_head
