"""Environments (skillopt_sleep/envs): the RolloutResult contract, QAEnv scoring and episodes, TaskFileEnv loading
and its equivalence with the night's replay, and the RolloutClient the trainer hands to rollout_one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from skillopt_sleep.backends.base import CallMeter, ChatMessage, ChatRequest
from skillopt_sleep.backends.mock import MockBackend
from skillopt_sleep.engine.judges import make_rubric_judge
from skillopt_sleep.engine.replay import Replayer, replay_tasks
from skillopt_sleep.envs import QAEnv, RolloutClient, RolloutResult, SkillEnv, TaskFileEnv, default_task_for
from skillopt_sleep.envs.qa import final_answer, normalize_answer, score_answer, token_f1
from skillopt_sleep.errors import ConfigError
from skillopt_sleep.models import Check, Judge, TaskRecord

SKILL = "# Tools\n\nUse pnpm to install the dependencies.\n"


def qa(number: int, question: str, *answers: str) -> dict:
    return {"id": f"q{number}", "question": question, "answers": list(answers)}


# --------------------------------------------------------------------------- RolloutResult


@pytest.mark.parametrize(("hard", "soft", "field"), [(2, 0.5, "hard"), (0, 1.5, "soft")],
                         ids=["a-hard-score-that-is-not-zero-or-one", "a-soft-score-outside-zero-to-one"])
def test_rollout_result_rejects_a_score_out_of_range_naming_it(hard, soft, field):
    with pytest.raises(ValidationError, match=field):
        RolloutResult(hard=hard, soft=soft)


def test_rollout_result_final_response_falls_back_to_the_last_assistant_message():
    result = RolloutResult(hard=1, soft=1.0, conversation=[
        {"role": "user", "content": "q"}, {"role": "assistant", "content": "first"},
        {"role": "tool", "content": "output"}, {"role": "assistant", "content": "final"}])
    assert result.final_response() == "final"
    assert RolloutResult(hard=1, soft=1.0, response="given").final_response() == "given"


# --------------------------------------------------------------------------- QA scoring


def test_normalize_answer_drops_case_punctuation_and_articles():
    assert normalize_answer("  The Eiffel-Tower!  ") == "eiffel tower"
    assert normalize_answer("(A)") == "a"  # a multiple-choice answer is not an article to drop


def test_final_answer_takes_the_text_after_the_last_answer_marker():
    assert final_answer("Let me think.\nAnswer: 12\nWait.\n**Answer:** 14") == "14"
    assert final_answer("  just this  ") == "just this"


def test_exact_match_needs_the_whole_final_answer_while_contains_accepts_a_whole_word_phrase():
    response = "I think it is Paris, France."
    assert score_answer(response, ["Paris"], match="exact")[0] == 0
    assert score_answer(response, ["Paris"], match="contains")[0] == 1
    # a whole-word phrase only: "par" is not found inside "paris"
    assert score_answer(response, ["par"], match="contains")[0] == 0
    assert score_answer("Answer: the Paris", ["paris"], match="exact")[:2] == (1, 1.0)


def test_soft_score_is_the_best_token_f1_and_the_fail_reason_names_the_expected_answers():
    # "new york city" vs "new york": precision 2/3, recall 1 -> F1 0.8
    hard, soft, fail_reason, _ = score_answer("New York City", ["New York", "Boston"], match="exact")
    assert hard == 0 and soft == pytest.approx(0.8)
    assert fail_reason is not None and "'New York'" in fail_reason
    assert token_f1("", "x") == 0.0


# --------------------------------------------------------------------------- QAEnv


def test_qa_env_is_a_skill_env_with_its_splits_and_initial_skill():
    env = QAEnv(train_items=[qa(1, "q one?", "a")], val_items=[qa(2, "q two?", "b")], initial_skill=SKILL)
    assert isinstance(env, SkillEnv)
    assert [item["id"] for item in env.get_items("train")] == ["q1"]
    assert [item["id"] for item in env.get_items("val")] == ["q2"]
    assert env.get_items("test") == [] and env.get_items("nonsense") == []
    assert env.get_initial_skill() == SKILL


@pytest.mark.parametrize(("item", "field"), [
    ({"question": "q?", "answers": ["a"]}, "'id'"),
    ({"id": "x", "question": " ", "answers": ["a"]}, "'question'"),
    ({"id": "x", "question": "q?", "answers": []}, "'answers'"),
    ({"id": "x", "question": "q?", "answers": "a"}, "'answers'"),
])
def test_qa_env_names_the_split_position_and_field_of_an_invalid_item(item, field):
    with pytest.raises(ValueError, match=f"val item 1.*{field}"):
        QAEnv(train_items=[qa(1, "q?", "a")], val_items=[qa(2, "q?", "b"), item])


def test_qa_env_refuses_an_id_used_in_two_splits():
    with pytest.raises(ValueError, match="'q1' is used twice"):
        QAEnv(train_items=[qa(1, "q?", "a")], val_items=[qa(1, "other?", "b")])


def test_qa_rollout_shows_the_skill_to_the_target_and_scores_its_reply():
    # The mock target follows a skill line that shares a word with the question ("install", "dependencies"),
    # so with the skill its reply names pnpm; without it the reply only restates the question.
    env = QAEnv(train_items=[qa(1, "Which tool should install the dependencies?", "pnpm")], match="contains")
    item = env.get_items("train")[0]
    backend = MockBackend()
    with_skill = env.rollout_one(item=item, skill=SKILL, target_client=backend)
    without = env.rollout_one(item=item, skill="", target_client=backend)
    assert (with_skill.hard, with_skill.soft, with_skill.fail_reason) == (1, 1.0, None)
    assert without.hard == 0 and "pnpm" in (without.fail_reason or "")
    assert [message["role"] for message in with_skill.conversation] == ["system", "user", "assistant"]
    assert "Use pnpm to install the dependencies." in with_skill.conversation[0]["content"]
    assert with_skill.final_response() == with_skill.conversation[-1]["content"]


def test_qa_rollout_reports_a_failed_target_call_as_an_error_not_a_score():
    env = QAEnv(train_items=[qa(1, "Which tool?", "pnpm")])
    backend = MockBackend(fail_with="503 overloaded", fail_kind="transient")
    result = env.rollout_one(item=env.get_items("train")[0], skill=SKILL, target_client=backend)
    assert result.error is not None and "503 overloaded" in result.error and result.hard == 0


def test_qa_task_for_shows_the_question_and_the_items_rules_to_the_optimizer():
    env = QAEnv(train_items=[{**qa(1, "Which tool?", "pnpm"), "rules": ["Use pnpm, not npm"]}])
    task = env.task_for(env.get_items("train")[0])
    assert (task.id, task.request, task.rule_texts) == ("q1", "Which tool?", ["Use pnpm, not npm"])


def test_default_task_for_uses_the_request_like_field_or_the_items_json():
    assert default_task_for({"id": 3, "prompt": "do it"}).request == "do it"
    task = default_task_for({"id": "a", "x": 1})
    assert task.id == "a" and json.loads(task.request) == {"id": "a", "x": 1}
    with pytest.raises(ValueError, match="'id'"):
        default_task_for({"question": "q"})


# --------------------------------------------------------------------------- TaskFileEnv


def record(task_id: str, split: str, **fields) -> dict:
    return TaskRecord(id=task_id, source="claude", request=f"install the deps ({task_id})", split=split,
                      **fields).model_dump(mode="json")


def test_task_file_env_reads_the_splits_and_counts_each_malformed_line_by_reason(tmp_path):
    path = tmp_path / "tasks.jsonl"
    lines = [json.dumps(record("t-1", "train")), "{not json", "[1, 2]", json.dumps({"id": "t-x"}),
             json.dumps(record("t-1", "val")), "", json.dumps(record("t-2", "val")), json.dumps(record("t-3", "test"))]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    env = TaskFileEnv(path)
    assert [item["id"] for item in env.get_items("train")] == ["t-1"]
    assert [item["id"] for item in env.get_items("val")] == ["t-2"]
    assert [item["id"] for item in env.get_items("test")] == ["t-3"]
    assert env.skipped == {"bad_json": 1, "not_an_object": 1, "invalid_task": 1, "duplicate_id": 1}
    assert "skillopt-sleep:begin" in env.get_initial_skill()  # the fresh SKILL.md a night starts from


def test_task_file_env_without_a_valid_task_raises_a_config_error_that_says_how_to_make_one(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_text("garbage\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="no valid task.*bad_json 1.*harvest --output"):
        TaskFileEnv(path)
    with pytest.raises(ConfigError, match="cannot read"):
        TaskFileEnv(tmp_path / "missing.jsonl")


def test_task_file_rollout_scores_exactly_like_the_nights_replay(tmp_path):
    # Same task, same skill, same memory: the env's episode and replay_tasks (what the night runs) give the same
    # answer and the same judge verdict, rubric included (the judge call goes through the same client).
    task = TaskRecord(id="t-1", source="claude", request="run the oldtool command", split="train",
                      rules=["Use newtool, not oldtool"],
                      judge=Judge(checks=[Check(op="contains", value="newtool"), Check(op="not_contains",
                                                                                     value="oldtool")],
                                  rubric="answer names newtool"))
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(task.model_dump(mode="json")) + "\n", encoding="utf-8")
    memory = "# Notes\n\nUse newtool, not oldtool\n"
    env = TaskFileEnv(path, memory=memory)
    episode = env.rollout_one(item=env.get_items("train")[0], skill="", target_client=MockBackend())
    meter = CallMeter(MockBackend())
    night = replay_tasks([task], Replayer(meter, rubric_judge=make_rubric_judge(meter)), skill="", memory=memory)[0]
    assert (episode.response, episode.hard, episode.soft, episode.fail_reason, episode.rationale,
            episode.llm_judged) == (night.response, night.hard, night.soft, night.fail_reason, night.rationale,
                                    night.llm_judged)
    assert episode.hard == 1 and episode.llm_judged


# --------------------------------------------------------------------------- RolloutClient


def test_rollout_client_applies_the_rollout_sampling_to_target_requests_the_env_left_unset():
    backend = MockBackend()
    client = RolloutClient(CallMeter(backend), temperature=0.7, seed=12)
    message = [ChatMessage(role="user", content="hi")]
    client.chat(ChatRequest(role="target", messages=message))
    client.chat(ChatRequest(role="target", messages=message, temperature=0.0, seed=1))
    client.chat(ChatRequest(role="judge", messages=message))
    sent = backend.requests
    assert (sent[0].temperature, sent[0].seed) == (0.7, 12)
    assert (sent[1].temperature, sent[1].seed) == (0.0, 1)  # set explicitly by the env: kept
    assert (sent[2].temperature, sent[2].seed) == (0.0, None)  # not a target call: untouched
    assert client.usage.prompt_tokens > 0 and client.model_for("target") == "mock-target"


# --------------------------------------------------------------------------- the documented tool-using env


def docs_block(heading: str) -> str:
    text = (Path(__file__).resolve().parents[2] / "docs" / "library.md").read_text(encoding="utf-8")
    section = text.split(heading, 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_documented_tool_using_env_runs_a_multi_turn_episode_with_the_tool_result():
    namespace: dict = {}
    exec(compile(docs_block("### Example: a tool-using environment"), "docs/library.md", "exec"), namespace)
    env = namespace["env"]
    assert isinstance(env, SkillEnv) and [item["id"] for item in env.get_items("val")] == ["v1"]
    item = env.get_items("train")[0]  # "Which port does the API listen on?" -> 8080
    backend = MockBackend(scripted={"target": ["LOOKUP: api.port", "Answer: 8080"]})
    result = env.rollout_one(item=item, skill="Look settings up before answering.", target_client=backend)
    assert (result.hard, result.soft, result.tools_called) == (1, 1.0, ["lookup"])
    assert [message["role"] for message in result.conversation] == ["system", "user", "assistant", "user",
                                                                     "assistant"]
    assert result.conversation[3]["content"] == "LOOKUP result for api.port: 8080"
    assert "Look settings up before answering." in backend.requests[0].messages[0].content
    # without a tool call the first reply is the final answer, scored as it is
    guess = env.rollout_one(item=item, skill="", target_client=MockBackend(scripted={"target": ["Answer: 80"]}))
    assert guess.hard == 0 and guess.tools_called == [] and len(guess.conversation) == 3


def test_the_readme_and_docs_show_the_same_library_example():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    readme_block = readme.split("\n## Library", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    assert readme_block == docs_block("## A complete example")
