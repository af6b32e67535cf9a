"""The `opencode` CLI backend, driven against a fake executable put first on PATH, and `auto` choosing an agent CLI.

The fake (tests/fixtures/fake_bins/opencode) answers `opencode auth list` as $FAKE_OPENCODE_AUTH says, records
what `opencode run` received (argv, stdin, environment, the config and agent prompt, the scratch data dir) and
misbehaves on request ($FAKE_AGENT_MODE): fail auth, exit non-zero, hang, reject a flag, refuse a connection.
"""

from __future__ import annotations

import json
import logging
import socket
import time
from pathlib import Path

import pytest
from fake_agents import FakeAgents, install_fake_agents, request

from skillopt_sleep.backends import backend_options, get_backend
from skillopt_sleep.backends.base import CallMeter
from skillopt_sleep.backends.opencode_cli import (
    AGENT_NAME,
    ENDPOINT_PROVIDER,
    OPENCODE_FLAGS,
    OpenCodeCLIBackend,
    opencode_logged_in,
    parse_auth_list,
)
from skillopt_sleep.backends.select import choose_backend, gemini_logged_in
from skillopt_sleep.config import SleepConfig
from skillopt_sleep.errors import BackendError
from skillopt_sleep.prompts.marker import SESSION_MARKER


@pytest.fixture
def fake_agents(tmp_path, monkeypatch) -> FakeAgents:
    agents = install_fake_agents(tmp_path, monkeypatch, ["opencode"])
    home = tmp_path / "user-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    for name in ("OPENCODE_CONFIG", "OPENCODE_CONFIG_CONTENT", "OPENCODE_CONFIG_DIR", "OPENCODE_PERMISSION",
                 "FAKE_OPENCODE_AUTH"):
        monkeypatch.delenv(name, raising=False)
    agents.home = home
    return agents


@pytest.fixture
def logged_in(fake_agents) -> FakeAgents:
    fake_agents.mode("ok", FAKE_OPENCODE_AUTH="creds")
    return fake_agents


@pytest.fixture
def listening() -> str:
    """A base URL on 127.0.0.1 whose port accepts TCP connections (nothing is read from them)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield f"http://127.0.0.1:{server.getsockname()[1]}/v1"


def make(**options) -> OpenCodeCLIBackend:
    options.setdefault("backoff_base_s", 0.01)
    options.setdefault("timeout_s", 20.0)
    return OpenCodeCLIBackend(**options)



def runs(agents: FakeAgents) -> list[dict]:
    return [call for call in agents.calls() if call["argv"][:1] == ["run"]]


# --------------------------------------------------------------------------- the call


def test_the_skill_becomes_the_agents_prompt_and_the_marked_prompt_goes_on_stdin(logged_in):
    logged_in.mode("ok", FAKE_AGENT_REPLY="one-line summary")
    long_user_prompt = "Summarize the diff. " + "x" * 200_000

    result = make(model="anthropic/claude-sonnet-4-5").chat(request(long_user_prompt))

    assert result.ok, result.error
    assert result.text == "one-line summary"
    (call,) = runs(logged_in)
    argv = call["argv"]
    assert argv[:len(OPENCODE_FLAGS)] == list(OPENCODE_FLAGS)
    assert argv[argv.index("--agent") + 1] == AGENT_NAME and argv[argv.index("-m") + 1] == "anthropic/claude-sonnet-4-5"
    assert "--title" in argv  # no extra model call to write a title
    assert not any("Summarize the diff" in arg for arg in argv)
    assert call["system"] == "You follow SKILL.md."
    assert call["stdin"].splitlines()[0].startswith(SESSION_MARKER)
    assert long_user_prompt in call["stdin"] and "You follow SKILL.md." not in call["stdin"]
    agent = call["config"]["agent"][AGENT_NAME]
    assert agent["tools"] == {"*": False} and agent["permission"] == {"*": "deny"}
    assert "provider" not in call["config"]  # the user's own login and provider
    assert call["cwd_entries"] == [] and not Path(call["cwd"]).exists()
    assert call["env"]["SKILLOPT_SLEEP_REPLAY"] == "1"


def test_the_call_runs_in_a_scratch_home_and_xdg_dirs_holding_only_a_link_to_the_users_login(
        logged_in, monkeypatch):
    user_data = logged_in.home / ".local" / "share" / "opencode"
    user_data.mkdir(parents=True)
    (user_data / "auth.json").write_text('{"anthropic": {"type": "api", "key": "k"}}')
    (user_data / "opencode.db").write_text("the user's sessions")
    monkeypatch.setenv("OPENCODE_CONFIG_CONTENT", '{"instructions": ["PLANTED"]}')
    monkeypatch.setenv("OPENCODE_CONFIG_DIR", str(logged_in.home / "elsewhere"))
    monkeypatch.setenv("OPENCODE_PERMISSION", '{"*": "allow"}')

    assert make().chat(request()).ok

    (call,) = runs(logged_in)
    env = call["env"]
    scratch = Path(env["OPENCODE_CONFIG"]).parent
    assert env["HOME"] == str(scratch / "home") and env["HOME"] != str(logged_in.home)
    for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        assert Path(env[name]).is_relative_to(scratch), name
    assert env["OPENCODE_CONFIG_CONTENT"] is None and env["OPENCODE_CONFIG_DIR"] is None
    assert env["OPENCODE_PERMISSION"] is None
    assert env["OPENCODE_DISABLE_CLAUDE_CODE"] == env["OPENCODE_DISABLE_EXTERNAL_SKILLS"] == "1"
    assert env["OPENCODE_DISABLE_PROJECT_CONFIG"] == env["OPENCODE_PURE"] == "1"
    assert env["OPENCODE_DISABLE_DEFAULT_PLUGINS"] is None  # the built-in auth plugins refresh OAuth logins
    assert call["data_entries"] == ["auth.json"] and call["links"] == {"auth.json": str(user_data / "auth.json")}
    assert not scratch.exists()  # removed afterwards


def test_the_login_is_taken_from_the_configured_opencode_home(logged_in, tmp_path):
    own = tmp_path / "own-opencode-data"
    own.mkdir()
    (own / "auth.json").write_text("{}")

    assert make(user_data_dir=own).chat(request()).ok

    assert runs(logged_in)[0]["links"] == {"auth.json": str(own / "auth.json")}


def test_without_a_system_message_the_agent_gets_a_short_neutral_prompt(logged_in):
    make().chat(request(system=None))

    (call,) = runs(logged_in)
    assert call["system"].startswith("You are a helpful assistant.")


def test_usage_comes_from_the_step_finish_tokens(logged_in):
    result = make().chat(request())

    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (40, 7)


def test_the_reply_is_the_last_messages_text_only(logged_in):
    logged_in.mode("two_messages", FAKE_AGENT_REPLY="final answer")

    assert make().chat(request()).text == "final answer"


def test_optimizer_roles_get_the_optimizer_model_and_no_model_flag_when_unset(logged_in):
    make(model="openai/gpt-5-mini", optimizer_model="anthropic/claude-opus-4").chat(request(role="optimizer"))
    make().chat(request())

    optimizer_call, default_call = runs(logged_in)
    assert optimizer_call["argv"][optimizer_call["argv"].index("-m") + 1] == "anthropic/claude-opus-4"
    assert "-m" not in default_call["argv"]
    assert make().model_for("target") == "default"


# --------------------------------------------------------------------------- the pre-flight login check


def test_without_a_login_every_call_fails_at_once_naming_opencode_auth_login_and_nothing_runs(fake_agents):
    fake_agents.mode("ok", FAKE_OPENCODE_AUTH="none")
    backend = make(max_retries=3)

    first, second = backend.chat(request()), backend.chat(request())

    for result in (first, second):
        assert result.error_kind == "fatal" and result.text == "" and result.attempts == 1
        assert "not logged in" in result.error and "0 credentials" in result.error
        assert "opencode auth login" in result.fix
    assert runs(fake_agents) == []
    with pytest.raises(BackendError) as raised:
        CallMeter(make()).chat(request())
    assert raised.value.fatal and raised.value.backend == "opencode" and "opencode auth login" in raised.value.fix


@pytest.mark.parametrize("auth", ["creds", "env"])
def test_a_credential_or_a_provider_key_counts_as_logged_in(fake_agents, auth):
    fake_agents.mode("ok", FAKE_OPENCODE_AUTH=auth)

    assert make().chat(request()).ok
    assert opencode_logged_in(str(fake_agents.bin_dir / "opencode"))


def test_a_probe_that_fails_is_not_taken_as_no_login(fake_agents):
    fake_agents.mode("ok", FAKE_OPENCODE_AUTH="broken")

    assert make().chat(request()).ok
    assert not opencode_logged_in(str(fake_agents.bin_dir / "opencode"))


def test_the_auth_list_output_of_the_real_cli_is_parsed():
    plain = "\x1b[0m\n\u250c  Credentials \x1b[90m~/.local/share/opencode/auth.json\n\u2502\n\u2514  0 credentials\n"
    keys = plain + ("\u250c  Environment\n\u2502\n\u25cf  Anthropic \x1b[90mANTHROPIC_API_KEY\n"
                    "\u2514  2 environment variables\n")

    assert not parse_auth_list(plain).logged_in
    status = parse_auth_list(keys)
    assert status.logged_in and (status.credentials, status.keys) == (0, 2)
    assert parse_auth_list("1 credential").logged_in
    assert parse_auth_list("something else entirely") is None


# --------------------------------------------------------------------------- an endpoint of the user's own


def test_with_a_base_url_the_config_defines_our_provider_and_no_login_is_checked_or_linked(
        fake_agents, listening, monkeypatch):
    fake_agents.mode("ok", FAKE_OPENCODE_AUTH="none", FAKE_AGENT_REPLY="local answer")
    user_data = fake_agents.home / ".local" / "share" / "opencode"
    user_data.mkdir(parents=True)
    (user_data / "auth.json").write_text("{}")

    result = make(base_url=listening + "/", model="Qwen/Qwen2.5-0.5B").chat(request())

    assert result.ok and result.text == "local answer"
    (call,) = runs(fake_agents)
    assert call["argv"][call["argv"].index("-m") + 1] == f"{ENDPOINT_PROVIDER}/Qwen/Qwen2.5-0.5B"
    provider = call["config"]["provider"][ENDPOINT_PROVIDER]
    assert provider["npm"] == "@ai-sdk/openai-compatible" and provider["options"]["baseURL"] == listening
    assert list(provider["models"]) == ["Qwen/Qwen2.5-0.5B"]
    assert call["config"]["enabled_providers"] == [ENDPOINT_PROVIDER]
    assert call["env"]["OPENCODE_DISABLE_MODELS_FETCH"] == call["env"]["OPENCODE_DISABLE_DEFAULT_PLUGINS"] == "1"
    assert call["data_entries"] == []  # no login goes to a provider of our own


def test_a_base_url_where_nothing_listens_is_fatal_at_once_and_names_the_setting(fake_agents):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"  # bound, not listening: refused
    started = time.monotonic()

    result = make(base_url=dead, max_retries=3).chat(request())

    assert time.monotonic() - started < 10
    assert result.error_kind == "fatal" and "opencode_base_url" in result.error and dead in result.fix
    assert runs(fake_agents) == []


def test_a_connection_failure_reported_by_the_cli_is_fatal_with_a_base_url(fake_agents, listening):
    fake_agents.mode("unreachable")

    result = make(base_url=listening, max_retries=3).chat(request())

    assert result.error_kind == "fatal" and "opencode_base_url" in result.fix
    assert len(runs(fake_agents)) == 1


# --------------------------------------------------------------------------- failures


def test_an_auth_error_is_fatal_with_the_login_fix_and_not_retried(logged_in):
    logged_in.mode("auth", FAKE_OPENCODE_AUTH="creds")

    result = make(max_retries=3).chat(request())

    assert result.error_kind == "fatal" and "opencode auth login" in result.fix and "401" in result.error
    assert len(runs(logged_in)) == 1


def test_a_prompt_about_logins_does_not_make_a_failure_look_like_an_auth_error(logged_in):
    logged_in.mode("fail", FAKE_OPENCODE_AUTH="creds")

    result = make(max_retries=0).chat(request("Fix the login page: it returns 401 Unauthorized."))

    assert result.error_kind == "transient" and "503" in result.error


def test_an_unknown_model_is_fatal_from_the_error_log(logged_in):
    logged_in.mode("model", FAKE_OPENCODE_AUTH="creds")

    result = make(model="x/y", max_retries=2).chat(request())

    assert result.error_kind == "fatal" and "opencode_model" in result.fix
    assert len(runs(logged_in)) == 1


def test_a_rejected_command_line_is_fatal_and_says_update(logged_in):
    logged_in.mode("unknown_flag", FAKE_OPENCODE_AUTH="creds")

    result = make(max_retries=2).chat(request())

    assert result.error_kind == "fatal" and "update" in result.error and "opencode upgrade" in result.fix
    assert len(runs(logged_in)) == 1


def test_a_failed_call_is_transient_retried_then_succeeds(logged_in):
    logged_in.mode("flaky", FAKE_OPENCODE_AUTH="creds", FAKE_FLAKY_FAILURES="1", FAKE_AGENT_REPLY="second time lucky")

    result = make(max_retries=2).chat(request())

    assert result.ok and result.text == "second time lucky" and result.attempts == 2


def test_an_empty_reply_is_transient(logged_in):
    logged_in.mode("empty", FAKE_OPENCODE_AUTH="creds")

    result = make(max_retries=0).chat(request())

    assert result.error_kind == "transient" and "empty reply" in result.error


def test_a_hang_past_the_timeout_kills_the_whole_process_group(logged_in):
    from test_cli_backends_more import alive

    logged_in.mode("hang", FAKE_OPENCODE_AUTH="creds")
    started = time.monotonic()

    result = make(timeout_s=1, max_retries=0).chat(request())

    assert time.monotonic() - started < 15
    assert result.error_kind == "transient" and "timed out after 1s" in result.error
    pids = logged_in.pids()
    assert len(pids) == 2
    deadline = time.monotonic() + 5
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(pid) for pid in pids)


def test_a_missing_binary_is_fatal_and_names_the_setting(fake_agents, tmp_path):
    for binary in ("no-such-opencode", str(tmp_path / "nowhere" / "opencode")):
        result = make(binary=binary).chat(request())
        assert result.error_kind == "fatal" and "opencode_bin" in result.error and "absolute path" in result.error
    assert fake_agents.calls() == []


def test_a_structured_request_returns_the_extracted_json(logged_in):
    logged_in.mode("ok", FAKE_OPENCODE_AUTH="creds", FAKE_AGENT_REPLY='Here:\n```json\n{"score": 0.5}\n```')

    result = make().chat(request(schema={"type": "object", "required": ["score"]}))

    assert result.ok, result.error
    assert json.loads(result.text) == {"score": 0.5}
    assert "Reply with JSON only" in runs(logged_in)[0]["stdin"]


def test_an_older_cli_than_the_tested_version_is_a_warning_and_a_note(fake_agents, caplog):
    backend = make()
    fake_agents.mode("ok", FAKE_AGENT_VERSION="1.0.0")

    with caplog.at_level(logging.WARNING, logger="skillopt_sleep.backends"):
        note = backend.version_note()

    assert f"opencode 1.0.0 is older than {backend.tested_version}" in note and "opencode upgrade" in note
    assert runs(fake_agents) == []
    fake_agents.mode("ok", FAKE_AGENT_VERSION="1.18.33")
    assert make().version_note() == ""


def test_the_config_builds_the_backend_with_its_binary_model_endpoint_and_data_folder(tmp_path):
    config = SleepConfig(backend="opencode", opencode_bin=str(tmp_path / "opencode"), opencode_model="m/1",
                         opencode_base_url="http://127.0.0.1:9/v1", opencode_home=tmp_path / "data")

    backend = get_backend("opencode", **backend_options(config, "opencode"))

    assert isinstance(backend, OpenCodeCLIBackend)
    assert backend.binary == str(tmp_path / "opencode") and backend.model_for("target") == "m/1"
    assert backend.base_url == "http://127.0.0.1:9/v1" and backend.user_data_dir == tmp_path / "data"


# --------------------------------------------------------------------------- auto


def _no_other_clis(tmp_path) -> dict:
    return {"claude_bin": str(tmp_path / "no-claude"), "codex_bin": str(tmp_path / "no-codex"),
            "gemini_bin": str(tmp_path / "no-gemini")}


def test_auto_picks_a_logged_in_opencode_for_opencode_sessions_and_says_why(fake_agents, tmp_path):
    fake_agents.mode("ok", FAKE_OPENCODE_AUTH="creds")

    choice = choose_backend(SleepConfig(backend="auto", **_no_other_clis(tmp_path)), ["opencode"])

    assert choice.name == "opencode" and isinstance(choice.backend, OpenCodeCLIBackend)
    assert "opencode" in choice.reason and "logged in" in choice.reason


def test_auto_skips_opencode_without_a_login_or_without_its_sessions(fake_agents, tmp_path, monkeypatch):
    monkeypatch.setattr("skillopt_sleep.backends.select.local_available", lambda: False)
    fake_agents.mode("ok", FAKE_OPENCODE_AUTH="none")
    with pytest.raises(Exception, match="no LLM backend available"):
        choose_backend(SleepConfig(backend="auto", **_no_other_clis(tmp_path)), ["opencode"])

    fake_agents.mode("ok", FAKE_OPENCODE_AUTH="creds")
    with pytest.raises(Exception, match="no LLM backend available"):
        choose_backend(SleepConfig(backend="auto", **_no_other_clis(tmp_path)), ["aider"])
    assert choose_backend(SleepConfig(backend="auto", **_no_other_clis(tmp_path)), ["opencode"]).name == "opencode"


def test_auto_keeps_the_agent_cli_order_and_prefers_a_configured_endpoint(fake_agents, tmp_path, monkeypatch):
    fake_agents.mode("ok", FAKE_OPENCODE_AUTH="creds")
    gemini = tmp_path / "gemini"
    gemini.write_text("#!/bin/sh\nexit 0\n")
    gemini.chmod(0o755)
    monkeypatch.setenv("GEMINI_API_KEY", "k")
    config = SleepConfig(backend="auto", **{**_no_other_clis(tmp_path), "gemini_bin": str(gemini)})

    assert choose_backend(config, ["opencode", "gemini"]).name == "gemini"  # AGENT_CLIS order, not the sources'
    assert choose_backend(config, ["opencode"]).name == "opencode"
    with_endpoint = config.model_copy(update={"base_url": "http://127.0.0.1:9/v1"})
    assert choose_backend(with_endpoint, ["opencode", "gemini"]).name == "openai"


def test_gemini_counts_as_logged_in_with_a_login_file_or_key(tmp_path, monkeypatch):
    gemini = tmp_path / "gemini"
    gemini.write_text("#!/bin/sh\nexit 0\n")
    gemini.chmod(0o755)
    home = tmp_path / "gh"
    (home / ".gemini").mkdir(parents=True)
    monkeypatch.setenv("GEMINI_CLI_HOME", str(home))
    for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI"):
        monkeypatch.delenv(name, raising=False)

    assert not gemini_logged_in(str(gemini))
    (home / ".gemini" / ".env").write_text("OTHER=1\n")
    assert not gemini_logged_in(str(gemini))
    (home / ".gemini" / ".env").write_text("GEMINI_API_KEY=abc\n")
    assert gemini_logged_in(str(gemini))
    (home / ".gemini" / ".env").unlink()
    (home / ".gemini" / "oauth_creds.json").write_text("{}")
    assert gemini_logged_in(str(gemini))
    assert not gemini_logged_in(str(tmp_path / "no-gemini"))
    (home / ".gemini" / "oauth_creds.json").unlink()
    monkeypatch.setenv("GOOGLE_API_KEY", "k")
    assert gemini_logged_in(str(gemini))


def test_auto_never_picks_copilot(tmp_path, monkeypatch):
    monkeypatch.setattr("skillopt_sleep.backends.select.local_available", lambda: False)
    copilot = tmp_path / "copilot"
    copilot.write_text("#!/bin/sh\nexit 0\n")
    copilot.chmod(0o755)
    monkeypatch.setenv("GH_TOKEN", "token")

    with pytest.raises(Exception, match="no LLM backend available"):
        choose_backend(SleepConfig(backend="auto", copilot_bin=str(copilot), **_no_other_clis(tmp_path),
                                   opencode_bin=str(tmp_path / "no-opencode")), ["copilot"])
