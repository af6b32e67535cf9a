"""The `gemini` and `copilot` CLI backends, driven against fake executables put first on PATH.

The fakes (tests/fixtures/fake_bins/gemini, copilot) record what they received (argv, stdin, cwd, env, the scratch
Gemini home) and misbehave on request ($FAKE_AGENT_MODE): fail auth, exit non-zero, hang, reject a flag.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pytest
from fake_agents import FakeAgents, alive, install_fake_agents, request

from skillopt_sleep.backends import backend_options, get_backend
from skillopt_sleep.backends.base import CallMeter
from skillopt_sleep.backends.copilot_cli import COPILOT_FLAGS, CopilotCLIBackend
from skillopt_sleep.backends.gemini_cli import DEFAULT_SYSTEM_PROMPT, GEMINI_FLAGS, GeminiCLIBackend
from skillopt_sleep.config import SleepConfig
from skillopt_sleep.errors import BackendError
from skillopt_sleep.prompts.marker import SESSION_MARKER

BACKENDS = {"gemini": GeminiCLIBackend, "copilot": CopilotCLIBackend}
LOGIN_WORDS = {"gemini": "GEMINI_API_KEY", "copilot": "copilot login"}


@pytest.fixture
def fake_agents(tmp_path, monkeypatch) -> FakeAgents:
    agents = install_fake_agents(tmp_path, monkeypatch, list(BACKENDS))
    home = tmp_path / "user-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("GEMINI_CLI_HOME", "GEMINI_SYSTEM_MD", "COPILOT_HOME", "COPILOT_ALLOW_ALL"):
        monkeypatch.delenv(name, raising=False)
    agents.home = home
    return agents


def make(name: str, **options):
    options.setdefault("backoff_base_s", 0.01)
    options.setdefault("timeout_s", 20.0)
    return BACKENDS[name](**options)




# --------------------------------------------------------------------------- gemini


def test_gemini_puts_the_skill_in_its_system_prompt_file_and_the_marked_prompt_on_stdin(fake_agents):
    fake_agents.mode("ok", FAKE_AGENT_REPLY="one-line summary")
    long_user_prompt = "Summarize the diff. " + "x" * 200_000

    result = make("gemini", model="gemini-2.5-flash").chat(request(long_user_prompt))

    assert result.ok, result.error
    assert result.text == "one-line summary"
    (call,) = fake_agents.calls()
    assert call["argv"][:len(GEMINI_FLAGS)] == list(GEMINI_FLAGS)
    assert call["argv"][call["argv"].index("-p") + 1] == ""
    assert call["argv"][call["argv"].index("--model") + 1] == "gemini-2.5-flash"
    assert not any("Summarize the diff" in arg for arg in call["argv"])
    assert call["system"] == "You follow SKILL.md."
    assert call["stdin"].splitlines()[0].startswith(SESSION_MARKER)
    assert long_user_prompt in call["stdin"] and "You follow SKILL.md." not in call["stdin"]
    assert call["cwd_entries"] == []
    assert not Path(call["cwd"]).exists() and not Path(call["home"]).exists()  # scratch dirs are gone afterwards
    assert call["env_replay"] == "1"


def test_gemini_runs_in_a_scratch_home_holding_only_the_users_login_and_no_tools(fake_agents):
    user_dir = fake_agents.home / ".gemini"
    user_dir.mkdir()
    (user_dir / "GEMINI.md").write_text("PLANTED-RULE-42\n")
    (user_dir / "oauth_creds.json").write_text("{}")
    (user_dir / "settings.json").write_text(json.dumps({
        "security": {"auth": {"selectedType": "oauth-personal"}},
        "hooks": {"SessionStart": [{"command": "touch /tmp/x"}]},
        "mcpServers": {"planted": {"command": "planted"}},
    }))

    assert make("gemini").chat(request()).ok

    (call,) = fake_agents.calls()
    assert Path(call["home"]) != fake_agents.home
    assert call["home_entries"] == ["oauth_creds.json", "settings.json"]  # no GEMINI.md, hooks or MCP servers
    assert call["links"] == {"oauth_creds.json": str(user_dir / "oauth_creds.json")}
    assert call["settings"] == {"tools": {"core": []}, "general": {"disableAutoUpdate": True},
                                "security": {"auth": {"selectedType": "oauth-personal"}}}


def test_gemini_reuses_the_login_under_the_users_own_gemini_cli_home(fake_agents, tmp_path, monkeypatch):
    own_home = tmp_path / "own-gemini-home"
    (own_home / ".gemini").mkdir(parents=True)
    (own_home / ".gemini" / "settings.json").write_text('{"selectedAuthType": "gemini-api-key"}')
    monkeypatch.setenv("GEMINI_CLI_HOME", str(own_home))

    assert make("gemini").chat(request()).ok

    (call,) = fake_agents.calls()
    assert call["home"] != str(own_home)
    assert call["settings"]["security"] == {"auth": {"selectedType": "gemini-api-key"}}


def test_gemini_without_a_system_message_gets_a_short_neutral_system_prompt(fake_agents):
    make("gemini").chat(request(system=None))

    (call,) = fake_agents.calls()
    assert call["system"] == DEFAULT_SYSTEM_PROMPT


def test_gemini_usage_comes_from_the_cli_stats(fake_agents):
    result = make("gemini").chat(request())

    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (40, 7)  # candidates 5 + thoughts 2


def test_gemini_error_json_is_transient_and_never_the_answer(fake_agents):
    fake_agents.mode("error_json")

    result = make("gemini", max_retries=1).chat(request())

    assert result.error_kind == "transient" and result.text == ""
    assert "500 INTERNAL" in result.error and result.attempts == 2


def test_gemini_empty_response_is_transient(fake_agents):
    fake_agents.mode("empty")

    result = make("gemini", max_retries=0).chat(request())

    assert result.error_kind == "transient" and "empty reply" in result.error


# --------------------------------------------------------------------------- copilot


def test_copilot_sends_the_marked_prompt_on_stdin_with_its_isolation_flags(fake_agents, monkeypatch):
    monkeypatch.setenv("COPILOT_ALLOW_ALL", "true")
    fake_agents.mode("ok", FAKE_AGENT_REPLY="copilot says hi")

    result = make("copilot", model="gpt-5").chat(request("Rename the flag."))

    assert result.ok, result.error
    assert result.text == "copilot says hi"  # the last assistant message, not the empty one before it
    (call,) = fake_agents.calls()
    argv = call["argv"]
    assert argv[:len(COPILOT_FLAGS)] == list(COPILOT_FLAGS)
    assert "--no-custom-instructions" in argv and "--available-tools=none" in argv
    assert "--disable-builtin-mcps" in argv and "-p" not in argv
    assert argv[argv.index("--model") + 1] == "gpt-5"
    usage_file = Path(argv[argv.index("--usage-output-file") + 1])
    assert usage_file.parent != Path(call["cwd"]) and not usage_file.exists()
    assert not any("Rename the flag." in arg for arg in argv)
    assert call["stdin"].splitlines()[0].startswith(SESSION_MARKER)
    assert "Rename the flag." in call["stdin"] and "You follow SKILL.md." in call["stdin"]
    assert call["cwd_entries"] == []
    assert call["env_replay"] == "1" and call["env_allow_all"] is None


def test_copilot_disables_each_mcp_server_of_the_users_config(fake_agents, tmp_path, monkeypatch):
    copilot_home = tmp_path / "copilot-home"
    copilot_home.mkdir()
    (copilot_home / "mcp-config.json").write_text(json.dumps({"mcpServers": {"zeta": {}, "alpha": {}}}))
    monkeypatch.setenv("COPILOT_HOME", str(copilot_home))

    make("copilot").chat(request())
    make("copilot", copilot_home=tmp_path / "elsewhere").chat(request())

    first, second = fake_agents.calls()
    assert [arg for arg in first["argv"] if arg.startswith("--disable-mcp-server")] == [
        "--disable-mcp-server=alpha", "--disable-mcp-server=zeta"]
    assert not any(arg.startswith("--disable-mcp-server") for arg in second["argv"])


def test_copilot_usage_comes_from_the_usage_output_file(fake_agents):
    result = make("copilot").chat(request())

    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (40, 6)


def test_copilot_session_error_is_transient_even_with_a_partial_run(fake_agents):
    fake_agents.mode("fail")

    result = make("copilot", max_retries=1).chat(request())

    assert result.error_kind == "transient" and result.text == ""
    assert "503 Service Unavailable" in result.error and result.attempts == 2


def test_copilot_without_an_assistant_message_is_an_empty_reply(fake_agents):
    fake_agents.mode("empty")

    result = make("copilot", max_retries=0).chat(request())

    assert result.error_kind == "transient" and "empty reply" in result.error


# --------------------------------------------------------------------------- both


@pytest.mark.parametrize("name", list(BACKENDS))
def test_auth_failure_is_fatal_with_the_login_fix_and_not_retried(fake_agents, name):
    fake_agents.mode("auth")

    result = make(name, max_retries=3).chat(request())

    assert result.error_kind == "fatal" and result.text == ""
    assert LOGIN_WORDS[name] in result.error and LOGIN_WORDS[name] in result.fix
    assert len(fake_agents.calls()) == 1


@pytest.mark.parametrize("name", list(BACKENDS))
def test_auth_failure_stops_the_night_through_the_ledger(fake_agents, name):
    fake_agents.mode("auth")
    meter = CallMeter(make(name))

    with pytest.raises(BackendError) as raised:
        meter.chat(request())

    assert raised.value.fatal and raised.value.backend == name
    assert LOGIN_WORDS[name] in raised.value.fix


@pytest.mark.parametrize("name", list(BACKENDS))
def test_a_prompt_about_logins_does_not_make_a_failure_look_like_an_auth_error(fake_agents, name):
    fake_agents.mode("fail")

    result = make(name, max_retries=0).chat(request("Fix the login page: it returns 401 Unauthorized."))

    assert result.error_kind == "transient"


@pytest.mark.parametrize("name", list(BACKENDS))
def test_unknown_flag_is_fatal_says_update_and_is_not_retried(fake_agents, name):
    fake_agents.mode("unknown_flag")

    result = make(name, max_retries=2).chat(request())

    assert result.error_kind == "fatal" and "update" in result.error
    assert len(fake_agents.calls()) == 1


@pytest.mark.parametrize("name", list(BACKENDS))
def test_nonzero_exit_is_transient_retried_then_succeeds(fake_agents, name):
    fake_agents.mode("flaky", FAKE_FLAKY_FAILURES="1", FAKE_AGENT_REPLY="second time lucky")

    result = make(name, max_retries=2).chat(request())

    assert result.ok and result.text == "second time lucky" and result.attempts == 2


@pytest.mark.parametrize("name", list(BACKENDS))
def test_hang_past_the_timeout_kills_the_whole_process_group(fake_agents, name):
    fake_agents.mode("hang")
    started = time.monotonic()

    result = make(name, timeout_s=1, max_retries=0).chat(request())

    assert time.monotonic() - started < 10
    assert result.error_kind == "transient" and "timed out after 1s" in result.error
    pids = fake_agents.pids()
    assert len(pids) == 2  # the fake and the grandchild it started
    deadline = time.monotonic() + 5
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(pid) for pid in pids)


@pytest.mark.parametrize("name", list(BACKENDS))
def test_missing_binary_is_fatal_and_names_the_setting(fake_agents, name, tmp_path):
    on_path = make(name, binary="no-such-agent-cli").chat(request())
    absolute = make(name, binary=str(tmp_path / "nowhere" / name)).chat(request())

    for result in (on_path, absolute):
        assert result.error_kind == "fatal"
        assert f"{name}_bin" in result.error and "absolute path" in result.error
    assert fake_agents.calls() == []


@pytest.mark.parametrize("name", list(BACKENDS))
def test_structured_request_returns_the_extracted_json(fake_agents, name):
    fake_agents.mode("ok", FAKE_AGENT_REPLY='Here you go:\n```json\n{"score": 0.5}\n```')

    result = make(name).chat(request(schema={"type": "object", "required": ["score"]}))

    assert result.ok, result.error
    assert json.loads(result.text) == {"score": 0.5}
    assert "Reply with JSON only" in fake_agents.calls()[0]["stdin"]


@pytest.mark.parametrize("name", list(BACKENDS))
def test_structured_request_without_json_is_a_transient_invalid_json_reply(fake_agents, name):
    fake_agents.mode("ok", FAKE_AGENT_REPLY="I would rather not answer in JSON.")

    result = make(name, max_retries=1).chat(request(schema={"type": "object"}))

    assert result.error_kind == "transient" and "invalid JSON reply" in result.error
    assert result.attempts == 2


@pytest.mark.parametrize("name", list(BACKENDS))
def test_optimizer_roles_get_the_optimizer_model_and_no_model_flag_when_unset(fake_agents, name):
    backend = make(name, model="target-model", optimizer_model="big-model")
    backend.chat(request(role="optimizer"))
    make(name).chat(request())

    optimizer_call, default_call = fake_agents.calls()
    assert optimizer_call["argv"][optimizer_call["argv"].index("--model") + 1] == "big-model"
    assert "--model" not in default_call["argv"]
    assert make(name).model_for("target") == "default"


@pytest.mark.parametrize("name", list(BACKENDS))
def test_an_older_cli_than_the_tested_version_is_a_warning_and_a_note(fake_agents, name, caplog):
    backend = make(name)
    fake_agents.mode("ok", FAKE_AGENT_VERSION="0.0.1")

    with caplog.at_level(logging.WARNING, logger="skillopt_sleep.backends"):
        note = backend.version_note()

    assert f"{name} 0.0.1 is older than {backend.tested_version}" in note and "update" in note
    assert fake_agents.calls() == []


@pytest.mark.parametrize("name", list(BACKENDS))
def test_the_tested_version_gives_no_note(fake_agents, name):
    assert make(name).version_note() == ""


@pytest.mark.parametrize("name", list(BACKENDS))
def test_the_config_builds_the_backend_with_its_binary_and_model(name, tmp_path):
    config = SleepConfig(backend=name, **{f"{name}_bin": str(tmp_path / name), f"{name}_model": "m-1"})

    backend = get_backend(name, **backend_options(config, name))

    assert isinstance(backend, BACKENDS[name])
    assert backend.binary == str(tmp_path / name) and backend.model_for("target") == "m-1"
