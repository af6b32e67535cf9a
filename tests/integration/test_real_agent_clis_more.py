"""The `gemini`, `copilot` and `opencode` backends against the REAL agent CLIs, at the versions pinned in
.ci/install-agent-clis.

The binaries come from ``$SKILLOPT_SLEEP_AGENT_CLIS`` (the bin directory that script prints on its last line:
``export SKILLOPT_SLEEP_AGENT_CLIS="$(.ci/install-agent-clis | tail -1)"``); every test skips when it is unset.
Nothing here needs a login, a key or the network: each test runs with an empty temporary HOME, and where a request
must be seen it goes to a capture server on 127.0.0.1 that records it and answers 400 (Gemini CLI through
``GOOGLE_GEMINI_BASE_URL`` with a dummy ``GEMINI_API_KEY``; Copilot CLI through its BYOK provider,
``COPILOT_PROVIDER_BASE_URL``; OpenCode through ``opencode_base_url``, our OpenAI-compatible provider, to a
server that answers like a model, so that one real replay returns the model's answer).

* flags: every flag our backends pass is in the real ``--help``, and the real binary runs our exact argv up to the
  request (or fails only for the missing login), never with "unknown arguments" / "unexpected argument";
* no login: a night through each backend stops at once with ``backend_error``, exit code 2 and a fix naming the
  login, never a "0.0 -> 0.0" night (OpenCode: by the ``opencode auth list`` pre-flight check, before any replay;
  a plain ``opencode run`` without a login would fall back to a hosted model and retry offline);
* isolation: a rule planted in ``~/.gemini/GEMINI.md`` / ``~/.copilot/copilot-instructions.md`` /
  ``~/.config/opencode`` / ``~/.opencode`` / ``~/.claude/CLAUDE.md`` and the user's MCP servers never reach the
  request our backends make, though they do without our isolation (the controls);
* version: the backends read the real ``--version`` and find the pinned version not older than the tested one.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer
from real_agents import PLANTED_RULE, check_no_login_night, skip_unless_installed

from skillopt_sleep.backends.base import ChatMessage, ChatRequest
from skillopt_sleep.backends.copilot_cli import COPILOT_FLAGS, CopilotCLIBackend
from skillopt_sleep.backends.gemini_cli import GEMINI_FLAGS, GeminiCLIBackend
from skillopt_sleep.backends.opencode_cli import OPENCODE_FLAGS, OpenCodeCLIBackend, auth_status
from skillopt_sleep.backends.subprocess_call import installed_version, run_contained

#: Variables that would give a CLI a login, a key, an endpoint or a config dir from the developer's environment.
CREDENTIAL_ENV = ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL", "GOOGLE_GENAI_USE_VERTEXAI",
                  "GOOGLE_GENAI_USE_GCA", "GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT", "GEMINI_CLI_HOME",
                  "GEMINI_SYSTEM_MD", "CLOUD_SHELL", "GH_TOKEN", "GITHUB_TOKEN", "COPILOT_GITHUB_TOKEN", "COPILOT_HOME",
                  "COPILOT_PROVIDER_BASE_URL", "COPILOT_PROVIDER_API_KEY", "COPILOT_MODEL", "COPILOT_ALLOW_ALL",
                  "OPENAI_API_KEY", "OPENAI_BASE_URL")
GEMINI_MODEL = "gemini-2.5-flash"

pytestmark = skip_unless_installed(("gemini", "copilot"), "test the real gemini and copilot CLIs")


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """An empty HOME, and no credential, endpoint or config dir in the environment."""
    folder = tmp_path / "home"
    (folder / ".gemini").mkdir(parents=True)
    (folder / ".copilot").mkdir()
    monkeypatch.setenv("HOME", str(folder))
    for name in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", *CREDENTIAL_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COPILOT_AUTO_UPDATE", "false")
    for name in list(os.environ):  # any provider key would count as an OpenCode login
        if name.startswith("OPENCODE_") or name.endswith(("_API_KEY", "_TOKEN", "_AUTH_TOKEN")):
            monkeypatch.delenv(name, raising=False)
    return folder


@pytest.fixture
def capture() -> HTTPServer:
    """A server on 127.0.0.1 that records every request and answers 400 (so a CLI gives up at once)."""
    server = HTTPServer(host="127.0.0.1", port=0)
    error = {"error": {"code": 400, "message": "capture server: recorded", "status": "INVALID_ARGUMENT"}}
    server.expect_request(re.compile(r"/v1beta/models/.*")).respond_with_json(error, status=400)
    server.expect_request("/v1/chat/completions").respond_with_json(error, status=400)
    server.start()
    yield server
    server.clear()
    if server.is_running():
        server.stop()


def bodies(server: HTTPServer, path_start: str) -> list[str]:
    return [request.get_data(as_text=True) for request, _response in server.log if request.path.startswith(path_start)]


def request(text: str = "Say hello.") -> ChatRequest:
    return ChatRequest(role="target", messages=[ChatMessage(role="system", content="You follow SKILL.md."),
                                                ChatMessage(role="user", content=text)])


def run(argv: list, cwd: Path, stdin: str = "hello", timeout_s: float = 90.0, env: dict | None = None):
    return run_contained([str(part) for part in argv], stdin_text=stdin, cwd=str(cwd), timeout_s=timeout_s,
                         env={**os.environ, **(env or {})})


def help_text(argv: list, cwd: Path) -> str:
    outcome = run(argv, cwd, stdin="")
    assert outcome.returncode == 0, outcome.stderr
    return outcome.stdout


def plant_mcp(home: Path) -> Path:
    script = home / "mcp.sh"
    script.write_text(f"#!/bin/sh\ntouch {home / 'mcp-ran'}\nsleep 5\n", encoding="utf-8")
    script.chmod(0o755)
    return script


# --------------------------------------------------------------------------- gemini


def plant_gemini_home(home: Path) -> None:
    """The user's global memory and an MCP server (leaving a trace if started), logged in with an API key."""
    (home / ".gemini" / "GEMINI.md").write_text(f"# My rules\n\n{PLANTED_RULE}\n", encoding="utf-8")
    settings = {"security": {"auth": {"selectedType": "gemini-api-key"}},
                "mcpServers": {"planted": {"command": str(plant_mcp(home))}}}
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings), encoding="utf-8")


def point_gemini_at(capture: HTTPServer, monkeypatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "capture-only")
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", capture.url_for("/").rstrip("/"))


def test_every_gemini_flag_is_in_the_real_help_and_the_real_binary_fails_only_for_the_missing_login(bins, home):
    shown = help_text([bins / "gemini", "--help"], home)
    for flag in ["--prompt", "--output-format", "--skip-trust", "--model"]:
        assert f"{flag} " in shown, f"gemini --help does not list {flag}"
    assert "-p, --prompt" in shown and '"json"' in shown

    result = GeminiCLIBackend(binary=str(bins / "gemini"), model=GEMINI_MODEL, max_retries=2).chat(request())

    assert result.error_kind == "fatal", result.error
    assert "unknown argument" not in result.error.lower()
    assert "Please set an Auth method" in result.error and "GEMINI_API_KEY" in result.fix
    assert result.attempts == 1


def test_gemini_replay_sends_only_our_system_prompt_no_tools_and_never_the_users_gemini_md(
        bins, home, capture, monkeypatch):
    plant_gemini_home(home)
    point_gemini_at(capture, monkeypatch)

    result = GeminiCLIBackend(binary=str(bins / "gemini"), model=GEMINI_MODEL, max_retries=0,
                              timeout_s=90).chat(request())

    assert not result.ok  # the capture server answers 400
    sent = bodies(capture, "/v1beta/models/")
    assert sent, result.error
    assert all("PLANTED-RULE-42" not in body for body in sent)
    main = json.loads(sent[-1])
    assert main["systemInstruction"]["parts"][0]["text"] == "You follow SKILL.md."  # ours replaces the default one
    assert all(tool.get("functionDeclarations", []) == [] for tool in main.get("tools", []))
    assert "automated replay call made by skillopt-sleep" in json.dumps(main["contents"])  # the marker survives
    assert not (home / "mcp-ran").exists()
    assert not list((home / ".gemini").glob("tmp/*/chats/*"))  # the session was written in the scratch home


def test_without_the_scratch_home_the_planted_gemini_md_and_mcp_server_do_reach_the_replay(
        bins, home, capture, monkeypatch, tmp_path):
    """The control: the plain CLI sends the planted rule and starts the MCP server, so the test above is not vacuous."""
    plant_gemini_home(home)
    point_gemini_at(capture, monkeypatch)
    work = tmp_path / "work"
    work.mkdir()

    run([bins / "gemini", *GEMINI_FLAGS, "--model", GEMINI_MODEL], work)

    assert any("PLANTED-RULE-42" in body for body in bodies(capture, "/v1beta/models/"))
    assert (home / "mcp-ran").exists()


# --------------------------------------------------------------------------- copilot


def plant_copilot_home(home: Path) -> None:
    (home / ".copilot" / "copilot-instructions.md").write_text(f"# My rules\n\n{PLANTED_RULE}\n", encoding="utf-8")
    servers = {"mcpServers": {"planted": {"type": "local", "command": str(plant_mcp(home)), "args": [],
                                          "tools": ["*"]}}}
    (home / ".copilot" / "mcp-config.json").write_text(json.dumps(servers), encoding="utf-8")


def point_copilot_at(capture: HTTPServer, monkeypatch) -> None:
    monkeypatch.setenv("COPILOT_PROVIDER_BASE_URL", capture.url_for("/v1"))
    monkeypatch.setenv("COPILOT_PROVIDER_API_KEY", "capture-only")


def test_every_copilot_flag_is_in_the_real_help_and_the_real_binary_fails_only_for_the_missing_login(bins, home):
    shown = help_text([bins / "copilot", "--help"], home)
    for flag in [*(flag.split("=")[0] for flag in COPILOT_FLAGS if flag.startswith("-")), "--usage-output-file",
                 "--disable-mcp-server", "--model"]:
        assert f"{flag} " in shown or f"{flag}\n" in shown, f"copilot --help does not list {flag}"
    assert "text, json" in shown  # the values of --output-format

    result = CopilotCLIBackend(binary=str(bins / "copilot"), model="gpt-4.1", max_retries=2).chat(request())

    assert result.error_kind == "fatal", result.error
    assert "unexpected argument" not in result.error
    assert "No authentication information found" in result.error and "copilot login" in result.fix
    assert result.attempts == 1


def test_copilot_replay_sends_no_personal_instructions_no_tools_and_starts_no_mcp_server(
        bins, home, capture, monkeypatch):
    plant_copilot_home(home)
    point_copilot_at(capture, monkeypatch)

    result = CopilotCLIBackend(binary=str(bins / "copilot"), model="gpt-4.1", max_retries=0,
                               timeout_s=90).chat(request())

    assert not result.ok
    sent = bodies(capture, "/v1/chat/completions")
    assert sent, result.error  # the real binary parsed our whole argv and sent the request
    assert all("PLANTED-RULE-42" not in body for body in sent)
    main = json.loads(sent[-1])
    assert not main.get("tools")
    assert any("You follow SKILL.md." in body and "automated replay call made by skillopt-sleep" in body
               for body in sent)
    assert not (home / "mcp-ran").exists()


def test_without_our_flags_copilot_does_send_the_planted_instructions_and_start_the_mcp_server(
        bins, home, capture, monkeypatch, tmp_path):
    """The control of the test above."""
    plant_copilot_home(home)
    point_copilot_at(capture, monkeypatch)
    work = tmp_path / "work"
    work.mkdir()

    run([bins / "copilot", "--output-format", "json", "--no-auto-update", "--model", "gpt-4.1"], work)

    assert any("PLANTED-RULE-42" in body for body in bodies(capture, "/v1/chat/completions"))
    assert (home / "mcp-ran").exists()


# --------------------------------------------------------------------------- no login: a loud, immediate stop


@pytest.mark.parametrize(("backend", "login_words"), [
    ("gemini", ("gemini", "GEMINI_API_KEY")),
    ("copilot", ("copilot login", "GH_TOKEN")),
    pytest.param("opencode", ("opencode auth login", "ANTHROPIC_API_KEY"),
                 marks=skip_unless_installed(("opencode",), "test the real opencode CLI")),
])
def test_a_night_without_a_login_stops_at_once_with_backend_error_exit_2_and_the_login_fix(
        bins, home, tmp_path, backend, login_words):
    check_no_login_night(tmp_path, backend, bins, login_words)


# --------------------------------------------------------------------------- the version check


@pytest.mark.parametrize("backend_class", [
    GeminiCLIBackend, CopilotCLIBackend,
    pytest.param(OpenCodeCLIBackend, marks=skip_unless_installed(("opencode",), "test the real opencode CLI")),
])
def test_the_pinned_cli_reads_as_not_older_than_the_tested_version(bins, home, backend_class):
    backend = backend_class(binary=str(bins / backend_class.name))

    assert installed_version(backend.binary) == backend.tested_version  # the pin and the constant agree
    assert backend.version_note() == ""


# --------------------------------------------------------------------------- opencode

opencode_installed = skip_unless_installed(("opencode",), "test the real opencode CLI")
MODEL_ANSWER = "PONG from the local model"


@pytest.fixture
def model_server() -> HTTPServer:
    """An OpenAI-compatible endpoint on 127.0.0.1 that records every request and answers ``MODEL_ANSWER`` (streamed
    as Chat Completions chunks, as OpenCode asks, with usage)."""
    from werkzeug import Response

    def answer(request) -> Response:
        body = request.get_json(silent=True) or {}
        chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": body.get("model")}
        events = [
            {**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": MODEL_ANSWER},
                                   "finish_reason": None}]},
            {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
             "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}},
        ]
        text = "".join(f"data: {json.dumps(event)}\n\n" for event in events) + "data: [DONE]\n\n"
        return Response(text, content_type="text/event-stream")

    server = HTTPServer(host="127.0.0.1", port=0)
    server.expect_request("/v1/chat/completions", method="POST").respond_with_handler(answer)
    server.start()
    yield server
    server.clear()
    if server.is_running():
        server.stop()


def plant_opencode_home(home: Path) -> None:
    """The user's global config (an instructions file and an MCP server) in both places OpenCode reads it from
    (``~/.config/opencode`` and ``~/.opencode``), and a ``~/.claude/CLAUDE.md`` (OpenCode's Claude Code fallback)."""
    rules = home / "my-rules.md"
    rules.write_text(f"# My rules\n\n{PLANTED_RULE} (instructions)\n", encoding="utf-8")
    config = json.dumps({"instructions": [str(rules)],
                         "mcp": {"planted": {"type": "local", "command": [str(plant_mcp(home))]}}})
    for folder in (home / ".config" / "opencode", home / ".opencode"):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "opencode.json").write_text(config, encoding="utf-8")
    (home / ".claude").mkdir(exist_ok=True)
    (home / ".claude" / "CLAUDE.md").write_text(f"{PLANTED_RULE} (claude)\n", encoding="utf-8")


@opencode_installed
def test_every_opencode_flag_is_in_the_real_help(bins, home):
    outcome = run([bins / "opencode", "run", "--help"], home, stdin="")
    assert outcome.returncode == 0
    shown = outcome.stdout + outcome.stderr  # OpenCode prints its help on stderr

    for flag in [flag for flag in OPENCODE_FLAGS if flag.startswith("-")] + ["--model"]:
        assert f"{flag} " in shown, f"opencode run --help does not list {flag}"
    assert '"default", "json"' in shown and '"ERROR"' in shown  # the values of --format and --log-level


@opencode_installed
def test_without_a_login_the_real_auth_list_says_so_and_a_provider_key_counts(bins, home, monkeypatch):
    status = auth_status(str(bins / "opencode"))
    assert status is not None and not status.logged_in and status.credentials == 0

    monkeypatch.setenv("ANTHROPIC_API_KEY", "dummy")
    status = auth_status(str(bins / "opencode"))
    assert status is not None and status.logged_in and status.keys == 1


@opencode_installed
def test_opencode_without_a_login_fails_at_once_and_never_starts_a_replay(bins, home):
    started = time.monotonic()

    result = OpenCodeCLIBackend(binary=str(bins / "opencode"), max_retries=2, timeout_s=120).chat(request())

    assert time.monotonic() - started < 20  # `opencode run` itself would retry a hosted model for minutes offline
    assert result.error_kind == "fatal" and result.attempts == 1
    assert "not logged in" in result.error and "0 credentials" in result.error
    assert "opencode auth login" in result.fix


@opencode_installed
def test_one_real_opencode_replay_against_a_local_endpoint_returns_the_models_answer_in_isolation(
        bins, home, model_server):
    """Our exact argv and config through the real binary: the answer comes back, the request holds our system
    prompt (no default one, no planted rule), the marked prompt and no tool, and no MCP server starts."""
    plant_opencode_home(home)
    backend = OpenCodeCLIBackend(binary=str(bins / "opencode"), base_url=model_server.url_for("/v1"),
                                 model="local-model", max_retries=0, timeout_s=120)

    result = backend.chat(request())

    assert result.ok, result.error
    assert result.text == MODEL_ANSWER
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (11, 3)
    sent = bodies(model_server, "/v1/chat/completions")
    assert len(sent) == 1  # --title: no second call to write a title
    main = json.loads(sent[0])
    assert main["model"] == "local-model"
    assert not main.get("tools")
    system, user = main["messages"][0], main["messages"][-1]
    assert system["role"] == "system" and system["content"].startswith("You follow SKILL.md.")
    assert "You are opencode" not in system["content"] and len(system["content"]) < 1000
    assert "automated replay call made by skillopt-sleep" in json.dumps(user)  # the marker survives
    assert "PLANTED-RULE-42" not in sent[0]
    assert not (home / "mcp-ran").exists()
    assert not (home / ".local" / "share" / "opencode").exists()  # the session went to the scratch data dir


@opencode_installed
def test_without_our_isolation_opencode_does_send_the_planted_rules_and_start_the_mcp_server(
        bins, home, model_server, tmp_path):
    """The control of the test above: the same provider, but the user's HOME and config."""
    plant_opencode_home(home)
    work = tmp_path / "work"
    work.mkdir()
    provider = {"skillopt": {"npm": "@ai-sdk/openai-compatible", "options": {
        "baseURL": model_server.url_for("/v1"), "apiKey": "x"}, "models": {"local-model": {}}}}
    env = {"OPENCODE_CONFIG_CONTENT": json.dumps({"provider": provider, "model": "skillopt/local-model"}),
           "OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1"}

    outcome = run([bins / "opencode", "run", "--format", "json", "--title", "control"], work, stdin="Say hello.",
                  env=env)

    sent = bodies(model_server, "/v1/chat/completions")
    assert MODEL_ANSWER in outcome.stdout, outcome.stderr[-2000:]
    assert any("PLANTED-RULE-42 (instructions)" in body for body in sent)
    assert any("PLANTED-RULE-42 (claude)" in body for body in sent)
    assert any(json.loads(body).get("tools") for body in sent)  # OpenCode's own tools, which ours turns off
    assert (home / "mcp-ran").exists()


@opencode_installed
def test_a_dead_opencode_base_url_is_fatal_at_once(bins, home):
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
    started = time.monotonic()

    result = OpenCodeCLIBackend(binary=str(bins / "opencode"), base_url=dead, max_retries=2).chat(request())

    assert time.monotonic() - started < 10  # OpenCode's own retries would take about 70 s
    assert result.error_kind == "fatal" and "opencode_base_url" in result.error
