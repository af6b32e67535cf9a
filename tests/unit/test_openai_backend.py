"""OpenAIBackend construction, role -> model mapping, structured-output fallback; the backend registry.

The server is a local OpenAI-compatible fake (pytest-httpserver on 127.0.0.1).
"""

from __future__ import annotations

import json

import pytest
from werkzeug import Request, Response

from skillopt_sleep.backends import BACKENDS, backend_from_config, get_backend
from skillopt_sleep.backends.base import ChatMessage, ChatRequest
from skillopt_sleep.backends.openai_compat import PLACEHOLDER_API_KEY, OpenAIBackend
from skillopt_sleep.config import SleepConfig
from skillopt_sleep.errors import ConfigError

SCHEMA = {
    "title": "Verdict",
    "type": "object",
    "properties": {"score": {"type": "integer"}},
    "required": ["score"],
}
REJECT_FORMAT = {"error": {"message": "response_format type json_schema is not supported", "type": "invalid_request"}}


def completion(content, prompt_tokens=11, completion_tokens=7):
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": "served-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }


def make_backend(api, **options):
    defaults = dict(base_url=api.url_for("/v1"), api_key="sk-unit-test-key", target_model="target-m",
                    optimizer_model="optimizer-m", max_retries=1, backoff_base_s=0.01, timeout_s=5.0)
    defaults.update(options)
    return OpenAIBackend(**defaults)


def ask(role="target", schema=None, text="Say hi"):
    return ChatRequest(role=role, messages=[ChatMessage(role="user", content=text)], json_schema=schema)


def sent_bodies(api):
    return [json.loads(request.get_data()) for request, _response in api.log]


def respond_by_format(rejected: set[str], reply_for: dict[str, str]):
    """Handler: 400 for rejected response_format types, else the reply configured for the format used."""

    def handler(request: Request) -> Response:
        body = json.loads(request.get_data())
        kind = (body.get("response_format") or {}).get("type", "prompt")
        if kind in rejected:
            return Response(json.dumps(REJECT_FORMAT), status=400, content_type="application/json")
        return Response(json.dumps(completion(reply_for[kind])), status=200, content_type="application/json")

    return handler


# ---------------------------------------------------------------------- construction and roles


def test_judge_and_miner_default_to_the_optimizer_model_and_target_is_separate(api):
    backend = make_backend(api)
    assert backend.model_for("target") == "target-m"
    assert backend.model_for("optimizer") == "optimizer-m"
    assert backend.model_for("judge") == "optimizer-m"
    assert backend.model_for("miner") == "optimizer-m"
    assert make_backend(api, judge_model="judge-m").model_for("judge") == "judge-m"


def test_each_role_is_sent_with_its_own_model(api):
    api.expect_request("/v1/chat/completions").respond_with_json(completion("ok"))
    backend = make_backend(api, judge_model="judge-m")
    backend.chat(ask("target"))
    backend.chat(ask("judge"))
    backend.chat(ask("optimizer"))
    assert [body["model"] for body in sent_bodies(api)] == ["target-m", "judge-m", "optimizer-m"]


def test_base_url_and_key_come_from_the_environment_when_not_given(api, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", api.url_for("/v1"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    api.expect_request("/v1/chat/completions", headers={"Authorization": "Bearer sk-from-env"}) \
        .respond_with_json(completion("from env"))
    backend = OpenAIBackend(target_model="t", optimizer_model="o", max_retries=0)
    result = backend.chat(ask())
    assert result.ok and result.text == "from env"


def test_a_local_server_without_a_key_gets_the_placeholder_key(api):
    api.expect_request("/v1/chat/completions", headers={"Authorization": f"Bearer {PLACEHOLDER_API_KEY}"}) \
        .respond_with_json(completion("local"))
    backend = OpenAIBackend(base_url=api.url_for("/v1"), target_model="t", optimizer_model="o", max_retries=0)
    assert backend.chat(ask()).text == "local"


def test_no_key_and_no_endpoint_is_a_config_error_that_says_what_to_set():
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        OpenAIBackend(target_model="t", optimizer_model="o")


def test_repr_never_shows_the_api_key(api):
    assert "sk-unit-test-key" not in repr(make_backend(api))


def test_plain_chat_reports_no_tool_evidence(api):
    api.expect_request("/v1/chat/completions").respond_with_json(completion("I ran pytest and it passed."))
    result = make_backend(api).chat(ask())
    assert result.tools_called == []
    assert OpenAIBackend.runs_tools is False


def test_temperature_max_tokens_and_seed_are_sent(api):
    api.expect_request("/v1/chat/completions").respond_with_json(completion("ok"))
    request = ChatRequest(role="target", messages=[ChatMessage(role="system", content="be brief"),
                                                   ChatMessage(role="user", content="hi")],
                          temperature=0.7, max_tokens=64, seed=5)
    make_backend(api).chat(request)
    body = sent_bodies(api)[0]
    assert (body["temperature"], body["max_tokens"], body["seed"]) == (0.7, 64, 5)
    assert body["messages"] == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    assert "response_format" not in body


# ---------------------------------------------------------------------- structured output


def test_structured_call_uses_json_schema_when_the_server_accepts_it(api):
    api.expect_request("/v1/chat/completions").respond_with_handler(
        respond_by_format(set(), {"json_schema": '{"score": 3}'}))
    result = make_backend(api).chat(ask("judge", SCHEMA))
    assert result.ok and json.loads(result.text) == {"score": 3}
    sent = sent_bodies(api)[0]["response_format"]
    assert sent["type"] == "json_schema"
    assert sent["json_schema"] == {"name": "Verdict", "schema": SCHEMA, "strict": False}


def test_rejected_json_schema_falls_back_to_json_object_and_is_remembered(api):
    api.expect_request("/v1/chat/completions").respond_with_handler(
        respond_by_format({"json_schema"}, {"json_object": '{"score": 4}'}))
    backend = make_backend(api)

    first = backend.chat(ask("judge", SCHEMA))
    second = backend.chat(ask("judge", SCHEMA))

    assert json.loads(first.text) == {"score": 4} and json.loads(second.text) == {"score": 4}
    formats = [body["response_format"]["type"] for body in sent_bodies(api)]
    assert formats == ["json_schema", "json_object", "json_object"]  # the second call went straight there
    assert sent_bodies(api)[1]["response_format"]["schema"] == SCHEMA
    assert first.attempts == 2 and second.attempts == 1
    assert backend.structured_mode("optimizer-m") == "json_object"


def test_the_remembered_format_survives_a_new_backend_through_the_cache_file(api, tmp_path):
    cache = tmp_path / "structured.json"
    api.expect_request("/v1/chat/completions").respond_with_handler(
        respond_by_format({"json_schema"}, {"json_object": '{"score": 1}'}))
    make_backend(api, structured_cache_path=cache).chat(ask("judge", SCHEMA))
    api.clear_log()

    fresh = make_backend(api, structured_cache_path=cache)
    fresh.chat(ask("judge", SCHEMA))

    assert [body["response_format"]["type"] for body in sent_bodies(api)] == ["json_object"]
    assert list(json.loads(cache.read_text()).values()) == ["json_object"]


def test_a_corrupt_cache_file_is_ignored(api, tmp_path):
    cache = tmp_path / "structured.json"
    cache.write_text("{not json")
    backend = make_backend(api, structured_cache_path=cache)
    assert backend.structured_mode("optimizer-m") == "json_schema"


def test_both_formats_rejected_falls_back_to_prompting_with_extraction(api):
    api.expect_request("/v1/chat/completions").respond_with_handler(respond_by_format(
        {"json_schema", "json_object"}, {"prompt": 'Sure:\n```json\n{"score": 5}\n```\nanything else?'}))
    backend = make_backend(api)
    result = backend.chat(ask("judge", SCHEMA, text="Rate this"))

    assert result.ok and json.loads(result.text) == {"score": 5}
    last = sent_bodies(api)[-1]
    assert "response_format" not in last
    prompt = last["messages"][-1]["content"]
    assert prompt.startswith("Rate this") and "JSON only" in prompt and '"required": ["score"]' in prompt
    assert backend.structured_mode("optimizer-m") == "prompt"


def test_a_json_format_reply_that_is_not_json_moves_to_the_next_format(api):
    api.expect_request("/v1/chat/completions").respond_with_handler(respond_by_format(
        set(), {"json_schema": "The score is 2.", "json_object": '{"score": 2}'}))
    result = make_backend(api).chat(ask("judge", SCHEMA))
    assert json.loads(result.text) == {"score": 2}
    assert [body["response_format"]["type"] for body in sent_bodies(api)] == ["json_schema", "json_object"]


def test_no_json_in_any_format_is_a_transient_error_naming_the_formats(api):
    api.expect_request("/v1/chat/completions").respond_with_handler(respond_by_format(
        {"json_schema", "json_object"}, {"prompt": "I would rather not."}))
    result = make_backend(api).chat(ask("judge", SCHEMA))
    assert not result.ok and result.error_kind == "transient"
    assert "json_schema" in result.error and "prompt: reply is not JSON" in result.error
    assert result.attempts == 3


def test_a_400_about_something_else_is_fatal_not_a_format_fallback(api):
    api.expect_request("/v1/chat/completions").respond_with_json(
        {"error": {"message": "messages: too many messages"}}, status=400)
    result = make_backend(api).chat(ask("judge", SCHEMA))
    assert result.error_kind == "fatal" and "too many messages" in result.error
    assert len(api.log) == 1


# ---------------------------------------------------------------------- registry


def test_get_backend_builds_the_openai_backend_by_name(api):
    backend = get_backend("openai", base_url=api.url_for("/v1"), target_model="t", optimizer_model="o")
    assert isinstance(backend, OpenAIBackend) and backend.name == "openai"


def test_registry_knows_every_planned_backend_name():
    assert set(BACKENDS) == {"openai", "mock", "local", "claude", "codex", "gemini", "copilot", "opencode"}


def test_unknown_backend_name_is_a_config_error_listing_the_valid_names():
    with pytest.raises(ConfigError) as caught:
        get_backend("cursor")
    message = str(caught.value)
    assert "unknown backend 'cursor'" in message
    for name in BACKENDS:
        assert name in message


def test_a_dotted_path_builds_that_class(api):
    backend = get_backend("skillopt_sleep.backends.openai_compat.OpenAIBackend", base_url=api.url_for("/v1"),
                          target_model="t", optimizer_model="o")
    assert isinstance(backend, OpenAIBackend)


@pytest.mark.parametrize(("path", "message"), [
    ("skillopt_sleep.backends.no_such_module.Thing", "not available"),  # a config error, not an ImportError
    ("skillopt_sleep.backends.openai_compat.NoSuchBackend", "has no class"),
], ids=["a-missing-module", "a-missing-class"])
def test_a_dotted_path_to_nothing_is_a_config_error(path, message):
    with pytest.raises(ConfigError, match=message):
        get_backend(path)


def test_backend_from_config_passes_models_timeout_and_retries(api, tmp_path):
    config = SleepConfig(backend="openai", base_url=api.url_for("/v1"), api_key="sk-config-key",
                         target_model="tm", optimizer_model="om", judge_model="jm", request_timeout_s=7.5,
                         max_retries=2)
    backend = backend_from_config(config)
    assert isinstance(backend, OpenAIBackend)
    assert (backend.model_for("target"), backend.model_for("optimizer"), backend.model_for("judge")) == \
        ("tm", "om", "jm")
    assert (backend.timeout_s, backend.max_retries, backend.base_url) == (7.5, 2, api.url_for("/v1"))
    assert backend.structured_cache_path is not None


def test_backend_from_config_auto_picks_openai_when_an_endpoint_is_configured(api):
    backend = backend_from_config(SleepConfig(backend="auto", base_url=api.url_for("/v1")))
    assert backend.name == "openai"


def test_backend_from_config_auto_without_an_endpoint_says_what_to_set(monkeypatch):
    monkeypatch.setattr("skillopt_sleep.backends.select.local_available", lambda: False)
    with pytest.raises(ConfigError, match="OPENAI_BASE_URL"):
        backend_from_config(SleepConfig(backend="auto"))
