"""Structured (JSON) replies cut off at their token budget: budget per purpose, one retry with twice the room, repair
of the unfinished JSON, and a ``reply_cut_off`` failure when nothing usable is left (``backends/structured.py``,
``CallMeter``).

The server is a local OpenAI-compatible fake (pytest-httpserver on 127.0.0.1) that answers
``finish_reason: "length"`` with the JSON cut where the test says.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from werkzeug import Request, Response

from skillopt_sleep.backends.base import CallMeter, ChatMessage, ChatRequest
from skillopt_sleep.backends.local import LocalBackend
from skillopt_sleep.backends.openai_compat import OpenAIBackend
from skillopt_sleep.backends.structured import (
    REPLY_CUT_OFF,
    REPLY_REPAIRED,
    STRUCTURED_MAX_TOKENS,
    ends_mid_structure,
    repair_cut_reply,
)
from skillopt_sleep.backends.subprocess_call import AttemptFailed, AttemptReply, chat_with_retries, structured_text
from skillopt_sleep.engine.reflect import request_edits
from skillopt_sleep.errors import BackendError
from skillopt_sleep.models import Diagnostics, RoleCost, Usage
from skillopt_sleep.review.changes import changes_sentence

EDITS_SCHEMA = {"title": "Edits", "type": "object", "properties": {"edits": {"type": "array"}}, "required": ["edits"]}
FIRST_EDIT = {"op": "add", "target": "memory", "text": "Run the tests before committing."}
FULL = json.dumps({"edits": [FIRST_EDIT, {"op": "add", "target": "memory", "text": "Use uv, not pip."}]})
#: Cut inside the second edit's text: the first edit is complete.
CUT_AFTER_ONE = FULL[:FULL.index("Use uv") + 3]
#: Cut inside the first edit's text: nothing complete.
CUT_IN_FIRST = FULL[:FULL.index("Run the") + 7]


def completion(content: str, finish_reason: str) -> dict:
    return {"id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": "served-model",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": finish_reason}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30}}


def scripted(api, replies: list[tuple[str, str]]):
    """Answer the n-th request with ``replies[n]`` (content, finish_reason); the last one repeats."""
    count = [0]

    def handler(request: Request) -> Response:
        content, reason = replies[min(count[0], len(replies) - 1)]
        count[0] += 1
        return Response(json.dumps(completion(content, reason)), content_type="application/json")

    api.expect_request("/v1/chat/completions").respond_with_handler(handler)


def sent_max_tokens(api) -> list[int]:
    return [json.loads(request.get_data())["max_tokens"] for request, _response in api.log]


def meter_for(api, **options) -> CallMeter:
    backend = OpenAIBackend(base_url=api.url_for("/v1"), api_key="sk-unit-test-key", target_model="target-m",
                            optimizer_model="optimizer-m", max_retries=1, backoff_base_s=0.01, timeout_s=5.0)
    return CallMeter(backend, **options)


def edits_request(purpose: str | None = "reflect") -> ChatRequest:
    return ChatRequest(role="optimizer", messages=[ChatMessage(role="user", content="Propose edits.")],
                       json_schema=EDITS_SCHEMA, purpose=purpose)


def test_a_cut_off_reply_is_asked_again_with_twice_the_room_and_the_full_reply_is_used(api):
    scripted(api, [(CUT_AFTER_ONE, "length"), (FULL, "stop")])
    meter = meter_for(api)
    result = meter.chat(edits_request())
    assert result.ok and json.loads(result.text) == json.loads(FULL)
    budget = STRUCTURED_MAX_TOKENS["reflect"]
    assert sent_max_tokens(api) == [budget, 2 * budget]
    [record] = meter.records  # one call, both tries counted in it
    assert record.ok and record.attempts == 2 and record.max_tokens == 2 * budget
    assert record.usage == Usage(prompt_tokens=40, completion_tokens=20)


def test_the_configured_structured_max_tokens_is_the_budget_of_every_purpose(api):
    scripted(api, [(CUT_AFTER_ONE, "length"), (FULL, "stop")])
    meter = meter_for(api, structured_max_tokens=300)
    assert meter.chat(edits_request()).ok
    assert sent_max_tokens(api) == [300, 600]


def test_a_request_without_a_purpose_keeps_its_max_tokens(api):
    scripted(api, [(FULL, "stop")])
    meter_for(api).chat(edits_request(purpose=None).model_copy(update={"max_tokens": 77}))
    assert sent_max_tokens(api) == [77]


def test_a_reply_cut_twice_is_repaired_without_its_half_written_item(api):
    scripted(api, [(CUT_AFTER_ONE, "length")])
    meter = meter_for(api)
    result = meter.chat(edits_request())
    assert result.ok and result.reason == REPLY_REPAIRED
    assert json.loads(result.text) == {"edits": [FIRST_EDIT]}  # "Use" (cut mid-sentence) is not a rule
    assert len(api.log) == 2 and meter.records[0].reason == REPLY_REPAIRED and meter.errors() == []


def test_a_reply_cut_twice_that_cannot_be_repaired_fails_with_reason_reply_cut_off(api):
    scripted(api, [(CUT_IN_FIRST, "length")])
    meter = meter_for(api)
    result = meter.chat(edits_request(), fail_on_error=False)
    budget = STRUCTURED_MAX_TOKENS["reflect"]
    assert not result.ok and result.error_kind == "transient" and result.reason == REPLY_CUT_OFF
    assert f"max_tokens={2 * budget}" in result.error and "structured_max_tokens" in result.fix
    [error] = meter.errors()
    assert error["reason"] == REPLY_CUT_OFF and error["max_tokens"] == 2 * budget and error["role"] == "optimizer"
    with pytest.raises(BackendError) as raised:  # a caller that does not tolerate errors gets it raised
        meter.chat(edits_request())
    assert not raised.value.fatal and "cut off" in str(raised.value)


def test_reflection_does_not_ask_a_third_time_after_the_meter_gave_up_on_a_cut_reply(api):
    scripted(api, [(CUT_IN_FIRST, "length")])
    parsed, raw = request_edits(meter_for(api), "Propose edits.", EDITS_SCHEMA, purpose="reflect")
    assert parsed is None and "cut off" in raw
    assert len(api.log) == 2  # the first try and the meter's retry with more room; no RETRY_MESSAGE round


def test_an_empty_reply_cut_off_by_thinking_is_retried_with_more_room(api):
    scripted(api, [("", "length"), (FULL, "stop")])
    assert meter_for(api).chat(edits_request()).ok
    assert sent_max_tokens(api) == [2048, 4096]


def test_a_free_text_reply_at_its_limit_is_returned_as_it_is(api):
    scripted(api, [("The answer is", "length")])
    meter = meter_for(api)
    result = meter.chat(ChatRequest(role="target", messages=[ChatMessage(role="user", content="?")], max_tokens=3))
    assert result.ok and result.text == "The answer is" and len(api.log) == 1


# --------------------------------------------------------------------------- detection and repair


@pytest.mark.parametrize(("text", "cut"), [
    ('{"edits": [{"op": "add", "text": "Alw', True),
    ('Here you go: {"order": [3, 1, 2', True),
    ('{"rationale": "x", "score": 0.', True),
    ('{"score": 1}', False),
    ('{"a": 1,, }', False),
    ('{"a": 1} and more', False),
    ("no JSON at all", False),
])
def test_ends_mid_structure_tells_a_cut_reply_from_a_malformed_one(text, cut):
    assert ends_mid_structure(text) is cut


@pytest.mark.parametrize(("text", "repaired"), [
    (CUT_AFTER_ONE, {"edits": [FIRST_EDIT]}),
    ('{"score": 0.8, "rationale": "the ans', {"score": 0.8}),
    ('{"order": [3, 1, 2', {"order": [3, 1]}),
    (CUT_IN_FIRST, None),
    ('{"ed', None),
    ("plain words", None),
])
def test_repair_keeps_what_was_complete_and_drops_the_item_being_written(text, repaired):
    assert repair_cut_reply(text) == repaired


def test_an_agent_cli_reply_cut_mid_json_is_returned_at_once_for_the_meter_to_recover():
    with pytest.raises(AttemptFailed) as raised:
        structured_text('Sure: {"edits": [{"op": "add", "text": "Run')
    assert raised.value.partial is not None

    def attempt() -> AttemptReply:
        return AttemptReply(text=structured_text('{"edits": [{"op": "add", "text": "Run'), usage=Usage())

    result = chat_with_retries(attempt, model="cli-model", max_retries=3, backoff_base_s=0.0)
    assert result.cut_off and result.attempts == 1 and result.partial.startswith('{"edits"')


class CutLlama:
    """A loaded ``llama_cpp.Llama`` stand-in whose every structured reply is cut at max_tokens."""

    def __init__(self, content: str):
        self.content = content
        self.calls: list[dict] = []

    def tokenize(self, data: bytes, add_bos: bool = False) -> list[int]:
        return list(range(len(data.split())))

    def create_chat_completion(self, **kwargs):
        self.calls.append(kwargs)
        return {"choices": [{"message": {"content": self.content}, "finish_reason": "length"}],
                "usage": {"prompt_tokens": 9, "completion_tokens": 4}}


def test_the_local_backend_gets_at_most_half_its_context_and_a_cut_reply_is_repaired(tmp_path):
    llama = CutLlama(CUT_AFTER_ONE)
    backend = LocalBackend(model_path=tmp_path / "canned.gguf", n_ctx=1024)
    backend._llama = llama  # loaded already: no model file is read
    result = CallMeter(backend).chat(edits_request())
    assert [call["max_tokens"] for call in llama.calls] == [512]  # reflect's 2048 bounded by n_ctx / 2: no retry
    assert result.ok and json.loads(result.text) == {"edits": [FIRST_EDIT]}


# --------------------------------------------------------------------------- the morning line


def night(**fields) -> Diagnostics:
    return Diagnostics(night_id="n1", status="rejected", summary="", started_at=datetime.now(UTC),
                       tasks={"train": 2}, **fields)


def test_the_morning_line_leads_with_the_cut_off_optimizer_replies():
    cut = {"role": "optimizer", "kind": "transient", "message": "the reflect reply was cut off",
           "reason": REPLY_CUT_OFF, "max_tokens": 512}
    line = changes_sentence(night(errors=[cut, cut], cost={"optimizer": RoleCost(calls=2, failed_calls=2)}))
    assert line.startswith("nothing changed: the optimizer's replies were cut off at 512 tokens (2 of 2 calls); "
                           "fix: raise structured_max_tokens")
    assert "no rule was proposed" not in line


def test_the_morning_line_says_when_every_optimizer_call_failed():
    failed = {"role": "optimizer", "kind": "transient", "message": "no JSON in any structured-output format"}
    line = changes_sentence(night(errors=[failed], cost={"optimizer": RoleCost(calls=1, failed_calls=1)}))
    assert line.startswith("nothing changed: the optimizer's 1 call(s) all failed (no JSON")
    ok_night = changes_sentence(night(cost={"optimizer": RoleCost(calls=1)}))
    assert "no rule was proposed" in ok_night
