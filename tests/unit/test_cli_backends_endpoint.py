"""The `claude` and `codex` backends pointed at an endpoint of the user's own (``claude_base_url``,
``codex_base_url``): what each call passes, without running a CLI (``run_contained`` is replaced by a recorder
that reads the instructions file while the call is running). The real CLIs against a real local model:
tests/integration/test_cli_local_replay.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from skillopt_sleep.backends import backend_options, claude_cli, codex_cli
from skillopt_sleep.backends.base import ChatMessage, ChatRequest
from skillopt_sleep.backends.subprocess_call import BARE_SYSTEM_PROMPT, ProcessOutcome
from skillopt_sleep.config import SleepConfig
from skillopt_sleep.prompts.marker import SESSION_MARKER

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

SKILL = "You follow SKILL.md: use pnpm, never npm."


def request(system: str | None = SKILL) -> ChatRequest:
    messages = [ChatMessage(role="system", content=system)] if system else []
    return ChatRequest(role="target", messages=[*messages, ChatMessage(role="user", content="Install the deps.")])


class Recorder:
    """Stands in for ``run_contained``: records argv, stdin, env and the file an option names, answers OK."""

    def __init__(self, file_option: str, claude: bool):
        self.file_option = file_option
        self.claude = claude
        self.calls: list[dict] = []

    def __call__(self, argv, *, stdin_text, cwd, timeout_s, env=None, **_):
        file_text = None
        if self.file_option == "-c":
            for value in argv[1:]:
                if value.startswith("model_instructions_file="):
                    path = tomllib.loads(value)["model_instructions_file"]
                    file_text = Path(path).read_text(encoding="utf-8")
        elif self.file_option in argv:
            file_text = Path(argv[argv.index(self.file_option) + 1]).read_text(encoding="utf-8")
        self.calls.append({"argv": argv, "stdin": stdin_text, "env": dict(env or {}), "file": file_text})
        if self.claude:
            stdout = '{"type": "result", "subtype": "success", "is_error": false, "result": "pnpm install"}'
        else:
            stdout = ""
            with open(argv[argv.index("-o") + 1], "w", encoding="utf-8") as handle:
                handle.write("pnpm install")
        return ProcessOutcome(argv=tuple(argv), returncode=0, stdout=stdout, stderr="", timed_out=False,
                              latency_s=0.1, pid=1)


@pytest.fixture
def codex_recorder(monkeypatch, tmp_path) -> Recorder:
    binary = tmp_path / "codex"
    binary.write_text("#!/bin/sh\n", encoding="utf-8")
    binary.chmod(0o755)
    recorder = Recorder("-c", claude=False)
    monkeypatch.setattr(codex_cli, "run_contained", recorder)
    monkeypatch.setattr(codex_cli, "_login_status", lambda path: "Not logged in")
    monkeypatch.delenv("CODEX_API_KEY", raising=False)
    recorder.binary = str(binary)
    return recorder


@pytest.fixture
def claude_recorder(monkeypatch, tmp_path) -> Recorder:
    binary = tmp_path / "claude"
    binary.write_text("#!/bin/sh\n", encoding="utf-8")
    binary.chmod(0o755)
    recorder = Recorder("--system-prompt-file", claude=True)
    monkeypatch.setattr(claude_cli, "run_contained", recorder)
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    recorder.binary = str(binary)
    return recorder


def test_codex_with_a_base_url_defines_a_provider_on_it_needs_no_login_and_sends_the_skill_as_instructions(
        codex_recorder):
    backend = codex_cli.CodexCLIBackend(binary=codex_recorder.binary, base_url="http://127.0.0.1:8080/v1/",
                                        model="qwen")

    result = backend.chat(request())

    assert result.ok, result.error  # "Not logged in" does not matter: the provider needs no login
    (call,) = codex_recorder.calls
    argv = call["argv"]
    overrides = [argv[at + 1] for at, flag in enumerate(argv) if flag == "-c"]
    assert "model_provider=skillopt_sleep_endpoint" in overrides
    provider = next(value for value in overrides if value.startswith("model_providers."))
    table = tomllib.loads(provider)["model_providers"]["skillopt_sleep_endpoint"]
    assert table["base_url"] == "http://127.0.0.1:8080/v1" and table["wire_api"] == "responses"
    assert "env_key" not in table  # no key is sent
    assert call["file"] == SKILL  # the skill replaces Codex's instructions ...
    assert SKILL not in call["stdin"] and call["stdin"].startswith(SESSION_MARKER)  # ... and leaves the prompt
    assert argv[argv.index("-m") + 1] == "qwen"
    assert all(flag in argv for flag in codex_cli.ENDPOINT_FLAGS)
    assert argv[1:len(codex_cli.CODEX_FLAGS) + 1] == list(codex_cli.CODEX_FLAGS)


def test_codex_without_a_base_url_keeps_its_own_instructions_and_tools(codex_recorder, monkeypatch):
    monkeypatch.setenv("CODEX_API_KEY", "sk-test")

    result = codex_cli.CodexCLIBackend(binary=codex_recorder.binary).chat(request())

    assert result.ok, result.error
    (call,) = codex_recorder.calls
    assert call["file"] is None and SKILL in call["stdin"]
    assert not any(flag.startswith("model_provider") for flag in call["argv"])
    assert "--disable" not in call["argv"]


def test_a_request_without_system_messages_still_replaces_the_default_prompt(codex_recorder):
    backend = codex_cli.CodexCLIBackend(binary=codex_recorder.binary, base_url="http://127.0.0.1:8080/v1")

    assert backend.chat(request(system=None)).ok

    assert codex_recorder.calls[0]["file"] == BARE_SYSTEM_PROMPT


def test_claude_with_a_base_url_points_the_cli_at_it_with_a_placeholder_key_and_the_skill_as_system_prompt(
        claude_recorder):
    backend = claude_cli.ClaudeCLIBackend(binary=claude_recorder.binary, base_url="http://127.0.0.1:8080/",
                                          model="qwen")

    result = backend.chat(request())

    assert result.ok, result.error
    (call,) = claude_recorder.calls
    assert call["env"]["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:8080"
    assert call["env"]["ANTHROPIC_API_KEY"] == claude_cli.ENDPOINT_PLACEHOLDER_KEY
    assert call["env"]["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    assert call["file"] == SKILL
    assert SKILL not in call["stdin"] and call["stdin"].startswith(SESSION_MARKER)
    assert call["argv"][call["argv"].index("--tools") + 1] == ""
    assert call["argv"][call["argv"].index("--model") + 1] == "qwen"


def test_claude_with_a_base_url_keeps_the_users_own_key_for_an_endpoint_that_wants_one(claude_recorder,
                                                                                        monkeypatch):
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "gateway-token")
    backend = claude_cli.ClaudeCLIBackend(binary=claude_recorder.binary, base_url="http://127.0.0.1:4000")

    assert backend.chat(request()).ok

    env = claude_recorder.calls[0]["env"]
    assert "ANTHROPIC_API_KEY" not in env  # no placeholder beside the gateway's own token
    assert env["ANTHROPIC_AUTH_TOKEN"] == "gateway-token"


def test_claude_without_a_base_url_changes_nothing_in_the_environment(claude_recorder):
    assert claude_cli.ClaudeCLIBackend(binary=claude_recorder.binary).chat(request()).ok

    (call,) = claude_recorder.calls
    assert "ANTHROPIC_BASE_URL" not in call["env"] and call["file"] is None and SKILL in call["stdin"]


def test_the_config_keys_reach_the_backends():
    config = SleepConfig(codex_base_url="http://127.0.0.1:1/v1", codex_model="m1",
                         claude_base_url="http://127.0.0.1:2", claude_model="m2")

    assert backend_options(config, "codex")["base_url"] == "http://127.0.0.1:1/v1"
    assert backend_options(config, "codex")["model"] == "m1"
    assert backend_options(config, "claude")["base_url"] == "http://127.0.0.1:2"
    assert backend_options(config, "claude")["model"] == "m2"


def test_a_refused_connection_is_fatal_only_with_an_endpoint_of_the_users_own():
    from skillopt_sleep.backends.subprocess_call import AttemptFailed

    outcome = ProcessOutcome(argv=("codex",), returncode=1, stdout="",
                             stderr="ERROR: Connection failed: error sending request", timed_out=False,
                             latency_s=0.3, pid=1)

    with pytest.raises(AttemptFailed) as own:
        codex_cli.read_reply(outcome, None, timeout_s=60, endpoint="http://127.0.0.1:9/v1")
    with pytest.raises(AttemptFailed) as openai:
        codex_cli.read_reply(outcome, None, timeout_s=60)

    assert own.value.kind == "fatal" and "codex_base_url" in own.value.fix and "127.0.0.1:9" in own.value.fix
    assert openai.value.kind == "transient"
