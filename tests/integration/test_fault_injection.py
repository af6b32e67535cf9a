"""The OpenAI backend and the CallMeter against a fault-injecting OpenAI-compatible server on 127.0.0.1.

Each case makes the server misbehave in one way a real endpoint does (auth, unknown model, rate limit, 5xx,
garbage bodies, slow replies, empty replies) and checks that the failure is classified (fatal stops at once,
transient is retried then reported), counted in attempts, and never leaks the API key.
"""

from __future__ import annotations

import json
import socket
import time

import pytest
from werkzeug import Request, Response

from skillopt_sleep.backends.base import Budget, CallMeter, ChatMessage, ChatRequest
from skillopt_sleep.backends.openai_compat import OpenAIBackend
from skillopt_sleep.errors import BackendError, BudgetExhausted

API_KEY = "sk-fault-test-0123456789abcdef"
PATH = "/v1/chat/completions"


def completion(content, prompt_tokens=12, completion_tokens=5, usage=True):
    body = {
        "id": "chatcmpl-fault",
        "object": "chat.completion",
        "created": 0,
        "model": "served-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
    }
    if usage:
        body["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                         "total_tokens": prompt_tokens + completion_tokens}
    return body


def error_body(message):
    return {"error": {"message": message, "type": "error"}}


def json_response(body, status=200):
    return Response(json.dumps(body), status=status, content_type="application/json")


def in_sequence(*responses: Response):
    """Handler answering with each response in turn, then repeating the last one."""
    served = []

    def handler(_request: Request) -> Response:
        response = responses[min(len(served), len(responses) - 1)]
        served.append(response.status_code)
        return response

    return handler


def make_backend(api, **options):
    defaults = dict(base_url=api.url_for("/v1"), api_key=API_KEY, target_model="target-m",
                    optimizer_model="optimizer-m", max_retries=2, backoff_base_s=0.01, timeout_s=5.0)
    defaults.update(options)
    return OpenAIBackend(**defaults)


def ask(role="target"):
    return ChatRequest(role=role, messages=[ChatMessage(role="user", content="Fix the failing test")])


# ---------------------------------------------------------------------- success


def test_200_returns_the_text_and_records_usage_and_latency(api):
    api.expect_request(PATH).respond_with_json(completion("Done.", prompt_tokens=21, completion_tokens=4))
    result = make_backend(api).chat(ask())
    assert result.ok and result.text == "Done."
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (21, 4)
    assert result.attempts == 1 and result.model == "target-m" and result.latency_s > 0


def test_a_reply_without_usage_counts_zero_tokens(api):
    api.expect_request(PATH).respond_with_json(completion("Done.", usage=False))
    result = make_backend(api).chat(ask())
    assert result.ok and result.usage.total == 0


# ---------------------------------------------------------------------- fatal: returned at once


def test_401_is_fatal_after_one_attempt_and_says_to_check_the_key(api):
    api.expect_request(PATH).respond_with_json(error_body(f"Incorrect API key provided: {API_KEY}"), status=401)
    result = make_backend(api).chat(ask())
    assert result.error_kind == "fatal" and result.attempts == 1 and len(api.log) == 1
    assert result.error.startswith(f"401 Unauthorized from {api.url_for('/v1')}: check OPENAI_API_KEY / api_key")
    assert API_KEY not in result.error  # the server echoed the key; the message must not


def test_403_is_fatal_and_names_the_model(api):
    api.expect_request(PATH).respond_with_json(error_body("project has no access"), status=403)
    result = make_backend(api).chat(ask())
    assert result.error_kind == "fatal" and result.attempts == 1
    assert "403" in result.error and "target-m" in result.error and "project has no access" in result.error


def test_404_model_not_found_is_fatal_and_says_which_setting_to_fix(api):
    api.expect_request(PATH).respond_with_json(error_body("The model `target-m` does not exist"), status=404)
    result = make_backend(api).chat(ask())
    assert result.error_kind == "fatal" and result.attempts == 1 and len(api.log) == 1
    assert f"model 'target-m' not found at {api.url_for('/v1')}" in result.error
    assert "target_model/optimizer_model" in result.error


# ---------------------------------------------------------------------- transient: retried


def test_429_then_200_is_retried_and_succeeds_on_the_second_attempt(api):
    api.expect_request(PATH).respond_with_handler(in_sequence(
        json_response(error_body("Rate limit reached"), status=429), json_response(completion("after wait"))))
    result = make_backend(api).chat(ask())
    assert result.ok and result.text == "after wait" and result.attempts == 2
    assert len(api.log) == 2


def test_429_for_an_exhausted_quota_is_fatal_because_waiting_cannot_fix_it(api):
    api.expect_request(PATH).respond_with_json(error_body("You exceeded your current quota"), status=429)
    result = make_backend(api).chat(ask())
    assert result.error_kind == "fatal" and result.attempts == 1 and "billing" in result.error


def test_500_every_time_is_transient_after_max_retries_plus_one_attempts(api):
    api.expect_request(PATH).respond_with_json(error_body("upstream exploded"), status=500)
    result = make_backend(api, max_retries=2).chat(ask())
    assert result.error_kind == "transient" and result.attempts == 3 and len(api.log) == 3
    assert "500" in result.error and "upstream exploded" in result.error


def test_malformed_json_body_is_retried_then_reported_as_transient(api):
    api.expect_request(PATH).respond_with_data("{this is not json", content_type="application/json")
    result = make_backend(api, max_retries=1).chat(ask())
    assert result.error_kind == "transient" and result.attempts == 2
    assert "malformed response body" in result.error


def test_malformed_body_then_a_good_one_succeeds(api):
    api.expect_request(PATH).respond_with_handler(in_sequence(
        Response("<html>Bad gateway</html>", status=200, content_type="application/json"),
        json_response(completion("recovered"))))
    result = make_backend(api).chat(ask())
    assert result.ok and result.text == "recovered" and result.attempts == 2


def test_truncated_body_is_transient(api):
    whole = json.dumps(completion("a complete answer"))
    api.expect_request(PATH).respond_with_data(whole[: len(whole) // 2], content_type="application/json")
    result = make_backend(api, max_retries=1).chat(ask())
    assert result.error_kind == "transient" and result.attempts == 2


def test_a_body_without_choices_is_transient(api):
    api.expect_request(PATH).respond_with_json({"object": "chat.completion", "id": "x"})
    result = make_backend(api, max_retries=0).chat(ask())
    assert result.error_kind == "transient" and "no choices" in result.error


def test_a_reply_slower_than_the_timeout_is_a_transient_timeout(api):
    def slow(_request: Request) -> Response:
        time.sleep(0.8)
        return json_response(completion("too late"))

    api.expect_request(PATH).respond_with_handler(slow)
    started = time.monotonic()
    result = make_backend(api, timeout_s=0.3, max_retries=0).chat(ask())
    assert result.error_kind == "transient" and result.attempts == 1
    assert "timed out after 0.3s" in result.error and "request_timeout_s" in result.error
    assert time.monotonic() - started < 0.8  # the client gave up; it did not wait for the reply
    time.sleep(0.6)  # let the single-threaded server finish the slow handler before the next test


def test_empty_content_is_transient_and_retried(api):
    api.expect_request(PATH).respond_with_handler(in_sequence(
        json_response(completion("")), json_response(completion("   ")), json_response(completion("finally"))))
    result = make_backend(api, max_retries=2).chat(ask())
    assert result.ok and result.text == "finally" and result.attempts == 3


def test_empty_content_every_time_is_reported_as_an_empty_reply(api):
    api.expect_request(PATH).respond_with_json(completion(""))
    result = make_backend(api, max_retries=1).chat(ask())
    assert result.error_kind == "transient" and result.attempts == 2 and "empty reply" in result.error


def test_a_server_that_is_not_running_is_a_transient_connection_error():
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    backend = OpenAIBackend(base_url=f"http://127.0.0.1:{port}/v1", api_key=API_KEY, target_model="t",
                            optimizer_model="o", max_retries=1, backoff_base_s=0.01, timeout_s=2.0)
    result = backend.chat(ask())
    assert result.error_kind == "transient" and result.attempts == 2
    assert "connection to" in result.error and "check base_url" in result.error


# ---------------------------------------------------------------------- the meter over the backend


def test_ledger_raises_a_fatal_backend_error_on_401_and_records_the_failed_call(api):
    api.expect_request(PATH).respond_with_json(error_body("bad key"), status=401)
    meter = CallMeter(make_backend(api))
    with pytest.raises(BackendError) as caught:
        meter.chat(ask("optimizer"))
    assert caught.value.fatal and caught.value.role == "optimizer" and caught.value.model == "optimizer-m"
    assert "check OPENAI_API_KEY" in str(caught.value)
    [record] = meter.records
    assert (record.ok, record.error_kind, record.attempts, record.backend) == (False, "fatal", 1, "openai")
    assert meter.errors()[0]["kind"] == "fatal"


def test_ledger_returns_a_transient_failure_when_asked_not_to_fail(api):
    api.expect_request(PATH).respond_with_json(error_body("overloaded"), status=503)
    meter = CallMeter(make_backend(api, max_retries=1))
    result = meter.chat(ask("judge"), fail_on_error=False)
    assert result.error_kind == "transient" and meter.records[0].attempts == 2
    assert meter.cost_by_role()["judge"].failed_calls == 1


def test_ledger_max_calls_budget_stops_the_third_call_before_it_reaches_the_server(api):
    api.expect_request(PATH).respond_with_json(completion("ok", prompt_tokens=10, completion_tokens=2))
    meter = CallMeter(make_backend(api), Budget(max_calls=2))
    meter.chat(ask())
    meter.chat(ask())
    with pytest.raises(BudgetExhausted):
        meter.chat(ask())
    assert len(api.log) == 2 and meter.calls == 2 and meter.tokens == 24
