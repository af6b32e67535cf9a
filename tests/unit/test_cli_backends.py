"""The `claude` and `codex` CLI backends, driven against fake executables put first on PATH.

The fakes (tests/fixtures/fake_bins/) record what they received (argv, stdin, cwd, env) and misbehave on request
($FAKE_AGENT_MODE): fail auth, exit non-zero, hang, print garbage, reject a flag.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path

import pytest
from fake_agents import FakeAgents, alive, install_fake_agents, request

from skillopt_sleep.backends.base import CallMeter
from skillopt_sleep.backends.claude_cli import CLAUDE_FLAGS, ClaudeCLIBackend, claude_logged_in
from skillopt_sleep.backends.codex_cli import CODEX_FLAGS, CodexCLIBackend, codex_logged_in
from skillopt_sleep.backends.subprocess_call import find_binary, render_prompt, run_contained
from skillopt_sleep.errors import BackendError
from skillopt_sleep.prompts.marker import SESSION_MARKER

BACKENDS = {"claude": ClaudeCLIBackend, "codex": CodexCLIBackend}


@pytest.fixture
def fake_agents(tmp_path, monkeypatch) -> FakeAgents:
    return install_fake_agents(tmp_path, monkeypatch, ["claude", "codex"])


def make(name: str, **options):
    options.setdefault("backoff_base_s", 0.01)
    options.setdefault("timeout_s", 20.0)
    return BACKENDS[name](**options)




# --------------------------------------------------------------------------- claude: the happy path


def test_claude_sends_the_marked_prompt_on_stdin_with_its_flags_from_an_empty_temp_dir(fake_agents, tmp_path,
                                                                                       monkeypatch):
    monkeypatch.setenv("CLAUDECODE", "1")
    fake_agents.mode("ok", FAKE_AGENT_REPLY="one-line summary")
    long_user_prompt = "Summarize the diff. " + "x" * 200_000  # longer than one argv argument may be on Linux

    result = make("claude", model="claude-sonnet-4-5").chat(request(long_user_prompt))

    assert result.ok, result.error
    assert result.text == "one-line summary"
    (call,) = fake_agents.calls()
    assert call["stdin"].splitlines()[0].startswith(SESSION_MARKER)
    assert "You follow SKILL.md." in call["stdin"]
    assert long_user_prompt in call["stdin"]
    assert not any("Summarize the diff" in arg for arg in call["argv"])
    assert call["argv"][:len(CLAUDE_FLAGS)] == list(CLAUDE_FLAGS)
    assert call["argv"][call["argv"].index("--tools") + 1] == ""
    assert call["argv"][call["argv"].index("--setting-sources") + 1] == ""  # no user/project settings or CLAUDE.md
    assert "--strict-mcp-config" in call["argv"]
    assert call["argv"][call["argv"].index("--model") + 1] == "claude-sonnet-4-5"
    assert call["cwd_entries"] == []
    assert Path(call["cwd"]).resolve() != Path.cwd().resolve()
    assert not Path(call["cwd"]).exists()  # the temporary directory is gone afterwards
    assert call["env_replay"] == "1"
    assert call["env_claudecode"] is None


def test_claude_usage_comes_from_the_cli_json(fake_agents):
    result = make("claude").chat(request())

    # the fake reports input 11 + cache read 100 prompt tokens and 7 output tokens
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (111, 7)


def test_claude_passes_the_optimizer_model_for_optimizer_roles_and_no_model_flag_when_unset(fake_agents):
    backend = make("claude", model="target-model", optimizer_model="big-model")
    backend.chat(request(role="optimizer"))
    backend.chat(request(role="target"))
    make("claude").chat(request())

    optimizer_call, target_call, default_call = fake_agents.calls()
    assert optimizer_call["argv"][optimizer_call["argv"].index("--model") + 1] == "big-model"
    assert target_call["argv"][target_call["argv"].index("--model") + 1] == "target-model"
    assert "--model" not in default_call["argv"]
    assert backend.model_for("judge") == "big-model"
    assert make("claude").model_for("target") == "default"


# --------------------------------------------------------------------------- claude: failures


def test_claude_not_logged_in_is_fatal_says_to_log_in_and_is_not_retried(fake_agents):
    fake_agents.mode("auth")

    result = make("claude", max_retries=3).chat(request())

    assert result.error_kind == "fatal"
    assert "log in" in result.error and "claude" in result.error
    assert result.text == ""
    assert len(fake_agents.calls()) == 1


def test_claude_nonzero_exit_is_transient_retried_and_its_output_never_becomes_the_answer(fake_agents):
    fake_agents.mode("fail")

    result = make("claude", max_retries=2).chat(request())

    assert result.error_kind == "transient"
    assert result.text == ""
    assert result.attempts == 3
    assert len(fake_agents.calls()) == 3
    assert "status 1" in result.error and "503 upstream connect error" in result.error


def test_claude_transient_failure_then_success_returns_the_answer(fake_agents):
    fake_agents.mode("flaky", FAKE_FLAKY_FAILURES="1", FAKE_AGENT_REPLY="second time lucky")

    result = make("claude", max_retries=2).chat(request())

    assert result.ok
    assert result.text == "second time lucky"
    assert result.attempts == 2


def test_claude_unknown_option_is_fatal_and_not_retried(fake_agents):
    fake_agents.mode("unknown_flag")

    result = make("claude", max_retries=3).chat(request())

    assert result.error_kind == "fatal"
    assert "unknown option '--tools'" in result.error
    assert "claude update" in result.error
    assert len(fake_agents.calls()) == 1


def test_claude_garbage_on_stdout_is_transient_and_reported(fake_agents):
    fake_agents.mode("garbage")

    result = make("claude", max_retries=1).chat(request())

    assert result.error_kind == "transient"
    assert result.text == ""
    assert "no JSON result" in result.error and "502 Bad Gateway" in result.error
    assert result.attempts == 2


def test_claude_is_error_result_is_an_error_even_with_exit_status_zero(fake_agents):
    fake_agents.mode("is_error")

    result = make("claude", max_retries=0).chat(request())

    assert not result.ok
    assert result.error_kind == "transient"
    assert "529 Overloaded" in result.error
    assert result.text == ""


def test_claude_fatal_error_stops_the_night_through_the_ledger(fake_agents):
    fake_agents.mode("auth")
    meter = CallMeter(make("claude"))

    with pytest.raises(BackendError) as raised:
        meter.chat(request())

    assert raised.value.fatal
    assert raised.value.backend == "claude"
    assert meter.records[0].ok is False


# --------------------------------------------------------------------------- codex


def test_codex_exec_reads_the_marked_prompt_from_stdin_and_the_reply_from_the_output_file(fake_agents):
    fake_agents.mode("ok", FAKE_AGENT_REPLY="codex says hi")

    result = make("codex", model="gpt-5-codex").chat(request("Rename the flag."))

    assert result.ok, result.error
    assert result.text == "codex says hi"  # from -o, not the progress noise on stdout
    (call,) = fake_agents.calls()
    argv = call["argv"]
    assert argv[0] == "exec"
    assert argv[argv.index("--sandbox") + 1] == "read-only"
    assert "--skip-git-repo-check" in argv
    assert "--ignore-user-config" in argv and "--ignore-rules" in argv  # no config.toml MCP servers, notify, rules
    assert argv[:len(CODEX_FLAGS)] == list(CODEX_FLAGS)
    assert argv[argv.index("-m") + 1] == "gpt-5-codex"
    assert argv[-1] == "-"
    output_file = Path(argv[argv.index("-o") + 1])
    assert output_file.parent != Path(call["cwd"])  # the -o file is beside the working dir, not in it
    assert not output_file.exists()
    assert not any("Rename the flag." in arg for arg in argv)
    assert call["stdin"].splitlines()[0].startswith(SESSION_MARKER)
    assert "Rename the flag." in call["stdin"] and "You follow SKILL.md." in call["stdin"]
    assert call["cwd_entries"] == []
    assert call["env_replay"] == "1"


def test_codex_usage_is_estimated_from_text_length(fake_agents):
    fake_agents.mode("ok", FAKE_AGENT_REPLY="abcdefgh")  # 8 characters -> 2 tokens
    req = request()

    result = make("codex").chat(req)

    assert result.usage.completion_tokens == 2
    assert result.usage.prompt_tokens == -(-len(render_prompt(req)) // 4)


def test_codex_without_a_last_message_is_an_empty_reply_not_its_stdout(fake_agents):
    fake_agents.mode("empty")

    result = make("codex", max_retries=1).chat(request())

    assert result.error_kind == "transient"
    assert "empty reply" in result.error
    assert result.text == ""
    assert result.attempts == 2


def test_codex_failure_is_not_taken_for_an_auth_error_because_the_prompt_mentions_login(fake_agents):
    fake_agents.mode("fail")  # the fake echoes the prompt into stderr, as the real CLI does

    result = make("codex", max_retries=0).chat(request("Fix the login page: it returns 401 Unauthorized."))

    assert result.error_kind == "transient"
    assert "500 Internal Server Error" in result.error


def test_codex_not_logged_in_stops_before_running_exec_with_the_login_fix(fake_agents, monkeypatch):
    monkeypatch.setenv("FAKE_LOGIN_STATUS", "out")
    monkeypatch.delenv("CODEX_API_KEY", raising=False)
    backend = make("codex", max_retries=2)

    first, second = backend.chat(request()), backend.chat(request())

    for result in (first, second):
        assert result.error_kind == "fatal"
        assert "codex login" in result.fix and "not logged in" in result.error
    assert fake_agents.calls() == []  # `codex exec` never ran (unauthenticated, it would retry until the timeout)


def test_codex_api_key_in_the_environment_skips_the_login_check(fake_agents, monkeypatch):
    monkeypatch.setenv("FAKE_LOGIN_STATUS", "out")
    monkeypatch.setenv("CODEX_API_KEY", "sk-test")

    result = make("codex").chat(request())

    assert result.ok, result.error
    assert len(fake_agents.calls()) == 1


# --------------------------------------------------------------------------- both


@pytest.mark.parametrize("name", ["claude", "codex"])
def test_auth_failure_is_fatal_with_the_login_fix(fake_agents, name):
    fake_agents.mode("auth")

    result = make(name, max_retries=2).chat(request())

    assert result.error_kind == "fatal"
    assert ("/login" if name == "claude" else "codex login") in result.error
    assert len(fake_agents.calls()) == 1


@pytest.mark.parametrize("name", ["claude", "codex"])
def test_unknown_flag_is_fatal(fake_agents, name):
    fake_agents.mode("unknown_flag")

    result = make(name, max_retries=2).chat(request())

    assert result.error_kind == "fatal"
    assert "update" in result.error
    assert len(fake_agents.calls()) == 1


@pytest.mark.parametrize("name", ["claude", "codex"])
def test_nonzero_exit_is_transient_after_all_retries(fake_agents, name):
    fake_agents.mode("fail")

    result = make(name, max_retries=1).chat(request())

    assert result.error_kind == "transient"
    assert result.attempts == 2 and len(fake_agents.calls()) == 2
    assert result.text == ""


@pytest.mark.parametrize("name", ["claude", "codex"])
def test_hang_past_the_timeout_kills_the_whole_process_group(fake_agents, name):
    fake_agents.mode("hang")
    started = time.monotonic()

    result = make(name, timeout_s=1, max_retries=0).chat(request())

    assert time.monotonic() - started < 10
    assert result.error_kind == "transient"
    assert "timed out after 1s" in result.error
    pids = fake_agents.pids()
    assert len(pids) == 2  # the fake and the grandchild it started
    deadline = time.monotonic() + 5
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(pid) for pid in pids)


@pytest.mark.parametrize("name", ["claude", "codex"])
def test_missing_binary_is_fatal_and_names_the_setting(fake_agents, name, tmp_path):
    setting = f"{name}_bin"

    on_path = make(name, binary="no-such-agent-cli").chat(request())
    absolute = make(name, binary=str(tmp_path / "nowhere" / name)).chat(request())

    for result in (on_path, absolute):
        assert result.error_kind == "fatal"
        assert setting in result.error and "absolute path" in result.error
    assert "no-such-agent-cli" in on_path.error
    assert fake_agents.calls() == []


@pytest.mark.parametrize("name", ["claude", "codex"])
def test_structured_request_appends_the_schema_and_returns_the_extracted_json(fake_agents, name):
    fake_agents.mode("ok", FAKE_AGENT_REPLY='Here you go:\n```json\n{"score": 0.5, "why": "ok"}\n```')
    schema = {"type": "object", "properties": {"score": {"type": "number"}}, "required": ["score"]}

    result = make(name).chat(request(schema=schema))

    assert result.ok, result.error
    assert json.loads(result.text) == {"score": 0.5, "why": "ok"}
    (call,) = fake_agents.calls()
    assert "Reply with JSON only" in call["stdin"]
    assert '"required": [\n    "score"\n  ]' in call["stdin"]


@pytest.mark.parametrize("name", ["claude", "codex"])
def test_structured_request_without_json_in_the_reply_is_a_transient_invalid_json_reply(fake_agents, name):
    fake_agents.mode("ok", FAKE_AGENT_REPLY="I would rather not answer in JSON.")

    result = make(name, max_retries=1).chat(request(schema={"type": "object"}))

    assert result.error_kind == "transient"
    assert "invalid JSON reply" in result.error
    assert result.attempts == 2


@pytest.mark.parametrize("name", ["claude", "codex"])
def test_an_older_cli_than_the_tested_version_is_a_warning_and_a_note(fake_agents, name, caplog):
    backend = make(name)
    fake_agents.mode("ok", FAKE_AGENT_VERSION="0.0.1")

    with caplog.at_level(logging.WARNING, logger="skillopt_sleep.backends"):
        note = backend.version_note()

    assert f"{name} 0.0.1 is older than {backend.tested_version}" in note
    assert "update" in note
    assert [record.getMessage() for record in caplog.records] == [note]
    assert fake_agents.calls() == []  # `--version` is not a model call


@pytest.mark.parametrize("name", ["claude", "codex"])
@pytest.mark.parametrize("version", ["tested", "newer", "unreadable"])
def test_the_tested_or_a_newer_cli_gives_no_note(fake_agents, name, version, caplog):
    backend = make(name)
    shown = {"tested": backend.tested_version, "newer": "99.0.0", "unreadable": "dev build"}[version]
    fake_agents.mode("ok", FAKE_AGENT_VERSION=shown)

    with caplog.at_level(logging.WARNING, logger="skillopt_sleep.backends"):
        assert backend.version_note() == ""
    assert caplog.records == []


def test_the_version_note_reaches_the_backend_choice(fake_agents, monkeypatch):
    from skillopt_sleep.backends.select import choose_backend
    from skillopt_sleep.config import SleepConfig

    fake_agents.mode("ok", FAKE_AGENT_VERSION="2.0.0")

    choice = choose_backend(SleepConfig(backend="claude"), ["claude"])

    assert "claude 2.0.0 is older than" in choice.note


# --------------------------------------------------------------------------- probes and lookup


def test_claude_logged_in_follows_auth_status(fake_agents, monkeypatch):
    monkeypatch.setenv("FAKE_AUTH_STATUS", "in")
    assert claude_logged_in("claude") is True
    monkeypatch.setenv("FAKE_AUTH_STATUS", "out")
    assert claude_logged_in("claude") is False
    assert fake_agents.calls() == []  # no model call was needed


def test_claude_logged_in_falls_back_to_a_tiny_call_when_auth_status_is_unsupported(fake_agents, monkeypatch):
    monkeypatch.setenv("FAKE_AUTH_STATUS", "unsupported")
    fake_agents.mode("ok")
    assert claude_logged_in("claude") is True
    fake_agents.mode("auth")
    assert claude_logged_in("claude") is False
    assert len(fake_agents.calls()) == 2
    assert all(SESSION_MARKER in call["stdin"] for call in fake_agents.calls())


def test_codex_logged_in_follows_login_status(fake_agents, monkeypatch):
    monkeypatch.setenv("FAKE_LOGIN_STATUS", "in")
    assert codex_logged_in("codex") is True
    monkeypatch.setenv("FAKE_LOGIN_STATUS", "out")
    assert codex_logged_in("codex") is False


def test_logged_in_probes_are_false_for_a_missing_binary(fake_agents):
    assert claude_logged_in("no-such-claude") is False
    assert codex_logged_in("/nonexistent/codex") is False


def test_find_binary_resolves_names_on_path_and_checks_absolute_paths(fake_agents, tmp_path):
    not_executable = tmp_path / "plain-file"
    not_executable.write_text("#!/bin/sh\n")
    not_executable.chmod(0o644)

    assert find_binary("claude") == str(fake_agents.bin_dir / "claude")
    assert find_binary(str(fake_agents.bin_dir / "codex")) == str(fake_agents.bin_dir / "codex")
    assert find_binary(str(not_executable)) is None
    assert find_binary(str(tmp_path / "missing")) is None
    assert find_binary("definitely-not-a-command-here") is None


# --------------------------------------------------------------------------- the contained runner itself


def test_runner_gives_up_on_pipes_held_by_a_process_that_left_the_group(tmp_path):
    pid_file = tmp_path / "escaped.pid"
    script = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'], start_new_session=True)\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(30)\n"
    )
    started = time.monotonic()
    try:
        outcome = run_contained([sys.executable, "-c", script], stdin_text="", cwd=str(tmp_path), timeout_s=1,
                                kill_grace_s=0.2)
        elapsed = time.monotonic() - started
    finally:
        if pid_file.exists():  # the escaped process is outside our group: end it ourselves
            try:
                os.kill(int(pid_file.read_text()), 9)
            except ProcessLookupError:
                pass

    assert outcome.timed_out and outcome.returncode is None
    assert elapsed < 5


def test_runner_decodes_undecodable_output_with_replacement_characters(tmp_path):
    script = "import sys; sys.stdout.buffer.write(b'ok \\xff\\xfe'); sys.stderr.buffer.write(b'\\xc3(')"

    outcome = run_contained([sys.executable, "-c", script], stdin_text="", cwd=str(tmp_path), timeout_s=20)

    assert outcome.returncode == 0
    assert outcome.stdout == "ok \ufffd\ufffd"
    assert outcome.stderr.startswith("\ufffd")


def test_what_a_child_leaves_in_its_temporary_directory_is_removed_with_it(tmp_path, monkeypatch):
    """Gemini CLI writes an error report into ``os.tmpdir()`` on a failed call: it must not pile up in the user's."""
    users_tmp = tmp_path / "users-tmp"
    users_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(users_tmp))
    script = ("import tempfile; fd, path = tempfile.mkstemp(prefix='error-report-'); "
              "open(path, 'w').write('report'); print(path)")

    outcome = run_contained([sys.executable, "-c", script], stdin_text="", cwd=str(tmp_path), timeout_s=20)

    written = Path(outcome.stdout.strip())
    assert outcome.returncode == 0 and written.name.startswith("error-report-")
    assert not written.exists() and not written.parent.exists()  # gone, with the child's own temporary directory
    assert list(users_tmp.iterdir()) == []


def test_each_codex_call_gets_a_codex_home_holding_only_a_link_to_the_users_login(tmp_path, monkeypatch):
    from skillopt_sleep.backends.codex_cli import replay_codex_home

    user = tmp_path / "user-codex"
    user.mkdir()
    (user / "auth.json").write_text('{"OPENAI_API_KEY": null, "tokens": {"refresh_token": "r"}}')
    (user / "AGENTS.md").write_text("PLANTED: always answer in French")
    (user / "config.toml").write_text('notify = ["evil"]')
    monkeypatch.setenv("CODEX_HOME", str(user))
    scratch = tmp_path / "scratch"
    scratch.mkdir()

    home = Path(replay_codex_home(str(scratch)))

    assert home.parent == scratch and sorted(p.name for p in home.iterdir()) == ["auth.json"]
    assert (home / "auth.json").is_symlink() and (home / "auth.json").resolve() == (user / "auth.json").resolve()
    (user / "auth.json").unlink()
    other = tmp_path / "scratch2"
    other.mkdir()
    assert list(Path(replay_codex_home(str(other))).iterdir()) == []  # no login file: an empty home (API key users)
