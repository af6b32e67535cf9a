"""The `claude` and `codex` backends against the REAL agent CLIs, at the versions pinned in .ci/install-agent-clis.

The binaries come from ``$SKILLOPT_SLEEP_AGENT_CLIS`` (the bin directory that script prints on its last line:
``export SKILLOPT_SLEEP_AGENT_CLIS="$(.ci/install-agent-clis | tail -1)"``); every test skips when it is unset.
Nothing here needs a login, a key or the network: each test runs with an empty temporary HOME (and
``CLAUDE_CONFIG_DIR`` / ``CODEX_HOME`` inside it), and where a request must be seen it goes to a capture server
on 127.0.0.1 that records it and answers 400.

* flags: every flag our backends pass is in the real ``--help``, and the real binary starts with our exact argv
  (it fails only for the missing login, or reaches the capture server), never with "unknown option";
* no login: a night through each backend stops at once with ``backend_error``, exit code 2 and a fix naming the
  login command, never a "0.0 -> 0.0" night;
* isolation: a rule planted in ``~/.claude/CLAUDE.md`` (and the user's hooks and MCP servers) never reaches the
  request Claude Code sends with our flags, though it does without them; Codex with our flags leaves out the
  user's ``config.toml`` (instructions, MCP servers) but, no flag preventing it, still sends ``~/.codex/AGENTS.md``;
* version: the backends read the real ``--version`` and find the pinned version not older than the tested one.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer
from real_agents import PLANTED_RULE, check_no_login_night, skip_unless_installed

from skillopt_sleep.backends.base import ChatMessage, ChatRequest
from skillopt_sleep.backends.claude_cli import CLAUDE_FLAGS, ClaudeCLIBackend
from skillopt_sleep.backends.codex_cli import CODEX_FLAGS, CodexCLIBackend
from skillopt_sleep.backends.subprocess_call import run_contained

#: Variables that would give a CLI a login, a key or an endpoint from the developer's own environment.
CREDENTIAL_ENV = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "CLAUDE_CODE_OAUTH_TOKEN",
                  "CLAUDECODE", "OPENAI_API_KEY", "OPENAI_BASE_URL", "CODEX_API_KEY", "CODEX_ACCESS_TOKEN")


pytestmark = skip_unless_installed(("claude", "codex"), "test the real claude and codex CLIs")


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """An empty HOME, with the CLIs' config dirs inside it and no credential in the environment."""
    folder = tmp_path / "home"
    (folder / ".claude").mkdir(parents=True)
    (folder / ".codex").mkdir()
    monkeypatch.setenv("HOME", str(folder))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(folder / ".claude"))
    monkeypatch.setenv("CODEX_HOME", str(folder / ".codex"))
    for name in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    for name in CREDENTIAL_ENV:
        monkeypatch.delenv(name, raising=False)
    return folder


@pytest.fixture
def capture() -> HTTPServer:
    """A server on 127.0.0.1 that records every request and answers 400 (so a CLI gives up at once)."""
    server = HTTPServer(host="127.0.0.1", port=0)
    error = {"type": "error", "error": {"type": "invalid_request_error", "message": "capture server: recorded"}}
    server.expect_request("/v1/messages").respond_with_json(error, status=400)
    server.expect_request("/v1/responses").respond_with_json(error, status=400)
    server.start()
    yield server
    server.clear()
    if server.is_running():
        server.stop()


def bodies(server: HTTPServer, path: str) -> list[str]:
    return [request.get_data(as_text=True) for request, _response in server.log if request.path == path]


def request(text: str = "Say hello.") -> ChatRequest:
    return ChatRequest(role="target", messages=[ChatMessage(role="system", content="You follow SKILL.md."),
                                                ChatMessage(role="user", content=text)])


def run(argv: list[str], cwd: Path, stdin: str = "hello", timeout_s: float = 60.0):
    return run_contained([str(part) for part in argv], stdin_text=stdin, cwd=str(cwd), timeout_s=timeout_s)


def help_text(argv: list[str], cwd: Path) -> str:
    outcome = run(argv, cwd, stdin="")
    assert outcome.returncode == 0, outcome.stderr
    return outcome.stdout


def long_flags(flags: tuple[str, ...]) -> list[str]:
    return [flag for flag in flags if flag.startswith("-")]


# --------------------------------------------------------------------------- (a) every flag we pass is accepted


def test_every_claude_flag_is_in_the_real_help_and_the_real_binary_fails_only_for_the_missing_login(bins, home):
    shown = help_text([bins / "claude", "--help"], home)
    for flag in [*long_flags(CLAUDE_FLAGS), "--model"]:
        assert f"{flag} " in shown or f"{flag}," in shown, f"claude --help does not list {flag}"

    argv = ClaudeCLIBackend(binary=str(bins / "claude"), model="sonnet").command(str(bins / "claude"), "target")
    outcome = run(argv, home)

    said = outcome.stdout + outcome.stderr
    assert "unknown option" not in said.lower() and "error: " not in outcome.stderr.lower(), said
    result = json.loads(outcome.stdout)
    assert outcome.returncode == 1 and result["is_error"] is True
    assert "Not logged in" in result["result"] and "/login" in result["result"]


def test_every_codex_flag_is_in_the_real_help_and_the_real_binary_runs_our_argv_up_to_the_request(
        bins, home, capture, monkeypatch):
    shown = help_text([bins / "codex", "exec", "--help"], home)
    for flag in [*long_flags(CODEX_FLAGS), "--output-last-message", "--model"]:
        assert f"{flag} " in shown or f"{flag}\n" in shown or f"{flag}," in shown, f"codex exec --help lacks {flag}"
    assert "-o, --output-last-message" in shown and "-m, --model" in shown
    assert "read-only" in shown and "never" in shown  # the values we give --sandbox and --color

    monkeypatch.setenv("CODEX_API_KEY", "capture-only")  # the capture provider's key
    backend = CapturedCodex(capture, binary=str(bins / "codex"), model="gpt-5")
    argv = backend.command(str(bins / "codex"), "target", str(home / "last.txt"))
    outcome = run(argv, home, timeout_s=60, stdin="hello")

    said = outcome.stdout + outcome.stderr
    assert "unexpected argument" not in said and "unrecognized" not in said.lower(), said
    assert bodies(capture, "/v1/responses"), said  # it parsed our argv and sent the request


# --------------------------------------------------------------------------- (b) no login: a loud, immediate stop


@pytest.mark.parametrize(("backend", "login_commands"), [
    ("claude", ("claude auth login", "/login", "claude setup-token")),
    ("codex", ("codex login",)),
])
def test_a_night_without_a_login_stops_at_once_with_backend_error_exit_2_and_the_login_fix(
        bins, home, tmp_path, backend, login_commands):
    check_no_login_night(tmp_path, backend, bins, login_commands)


# --------------------------------------------------------------------------- (c) isolation from the user's setup


def plant_claude_home(home: Path) -> None:
    """The user's global memory, a hook and an MCP server, each leaving a trace if loaded."""
    (home / ".claude" / "CLAUDE.md").write_text(f"# My rules\n\n{PLANTED_RULE}\n", encoding="utf-8")
    hook = {"hooks": [{"type": "command", "command": f"touch {home / 'hook-ran'}"}]}
    (home / ".claude" / "settings.json").write_text(
        json.dumps({"hooks": {"SessionStart": [hook], "UserPromptSubmit": [hook]}}), encoding="utf-8")
    mcp = home / "mcp.sh"
    mcp.write_text(f"#!/bin/sh\ntouch {home / 'mcp-ran'}\nsleep 5\n", encoding="utf-8")
    mcp.chmod(0o755)
    (home / ".claude" / ".claude.json").write_text(
        json.dumps({"mcpServers": {"planted": {"type": "stdio", "command": str(mcp)}}}), encoding="utf-8")


def point_claude_at(capture: HTTPServer, monkeypatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-capture-only")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", capture.url_for("/").rstrip("/"))


def test_claude_replay_never_sends_the_users_global_claude_md_nor_runs_their_hooks_or_mcp_servers(
        bins, home, capture, monkeypatch):
    plant_claude_home(home)
    point_claude_at(capture, monkeypatch)

    result = ClaudeCLIBackend(binary=str(bins / "claude"), max_retries=0, timeout_s=60).chat(request())

    assert not result.ok  # the capture server answers 400
    sent = bodies(capture, "/v1/messages")
    assert sent, result.error
    assert all("PLANTED-RULE-42" not in body for body in sent)
    assert any("You follow SKILL.md." in body for body in sent)  # what we pass does reach the model
    assert not (home / "hook-ran").exists() and not (home / "mcp-ran").exists()


def test_without_setting_sources_the_planted_claude_md_and_hooks_do_reach_the_replay(bins, home, capture,
                                                                                       monkeypatch):
    """The control: the capture sees the planted rule when the flag is left out, so the test above is not vacuous."""
    plant_claude_home(home)
    point_claude_at(capture, monkeypatch)
    flags = list(CLAUDE_FLAGS)
    at = flags.index("--setting-sources")
    del flags[at:at + 2]

    run([bins / "claude", *flags], home)

    assert any("PLANTED-RULE-42" in body for body in bodies(capture, "/v1/messages"))
    assert (home / "hook-ran").exists()


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
def test_claude_with_our_flags_never_opens_the_global_claude_md_for_reading(bins, home, tmp_path):
    plant_claude_home(home)
    trace = tmp_path / "trace"
    argv = ClaudeCLIBackend(binary=str(bins / "claude")).command(str(bins / "claude"), "target")

    outcome = run(["strace", "-f", "-qq", "-e", "trace=openat,open", "-o", trace, *argv], home)

    if not trace.exists() or "Not logged in" not in outcome.stdout:
        pytest.skip(f"strace could not trace here: {outcome.stderr[-300:]}")
    planted = str(home / ".claude" / "CLAUDE.md")
    reads = [line for line in trace.read_text(errors="replace").splitlines()
             if f'"{planted}"' in line and "O_PATH" not in line and "ENOENT" not in line]
    assert reads == []
    settings_trace = trace.read_text(errors="replace")
    assert str(home / ".claude") in settings_trace  # it did look at the config dir: the trace is not empty


class CapturedCodex(CodexCLIBackend):
    """Our codex backend, its argv plus a model provider on the capture server (a ``-c`` override)."""

    def __init__(self, capture: HTTPServer, **options):
        super().__init__(**options)
        self.capture_url = capture.url_for("/v1")  # not ``base_url``: that would switch on codex_base_url's mode

    def command(self, path, role, last_message_path, instructions_path=None):
        argv = super().command(path, role, last_message_path, instructions_path)
        provider = (f'model_providers.capture={{name="capture", base_url="{self.capture_url}", '
                    'env_key="CODEX_API_KEY", wire_api="responses"}')
        return [*argv[:-1], "-c", "model_provider=capture", "-c", provider, argv[-1]]


def plant_codex_home(home: Path) -> None:
    mcp = home / "mcp.sh"
    mcp.write_text(f"#!/bin/sh\ntouch {home / 'mcp-ran'}\nsleep 5\n", encoding="utf-8")
    mcp.chmod(0o755)
    (home / ".codex" / "config.toml").write_text(
        'developer_instructions = "PLANTED-CONFIG-43"\n'
        f'[mcp_servers.planted]\ncommand = "{mcp}"\n', encoding="utf-8")
    (home / ".codex" / "AGENTS.md").write_text(f"# My rules\n\n{PLANTED_RULE}\n", encoding="utf-8")


def test_codex_replay_never_loads_the_users_config_toml(bins, home, capture, monkeypatch):
    plant_codex_home(home)
    monkeypatch.setenv("CODEX_API_KEY", "capture-only")  # the capture provider's key (and no login check)

    result = CapturedCodex(capture, binary=str(bins / "codex"), max_retries=0, timeout_s=60).chat(request())

    assert not result.ok
    sent = bodies(capture, "/v1/responses")
    assert sent, result.error
    assert all("PLANTED-CONFIG-43" not in body for body in sent)
    assert any("You follow SKILL.md." in body for body in sent)
    assert not (home / "mcp-ran").exists()


def test_without_ignore_user_config_codex_does_load_the_planted_config(bins, home, capture, monkeypatch):
    """The control of the test above."""
    plant_codex_home(home)
    monkeypatch.setenv("CODEX_API_KEY", "capture-only")
    argv = CapturedCodex(capture, binary=str(bins / "codex")).command(str(bins / "codex"), "target",
                                                                        str(home / "last.txt"))
    argv.remove("--ignore-user-config")

    run(argv, home)

    assert any("PLANTED-CONFIG-43" in body for body in bodies(capture, "/v1/responses"))


def test_codex_replay_never_sends_the_users_global_agents_md(bins, home, capture, monkeypatch):
    """Codex 0.169.0 always sends $CODEX_HOME/AGENTS.md (no flag turns it off): each call gets a CODEX_HOME of its
    own, holding only a link to the user's auth.json."""
    plant_codex_home(home)
    monkeypatch.setenv("CODEX_API_KEY", "capture-only")

    CapturedCodex(capture, binary=str(bins / "codex"), max_retries=0, timeout_s=60).chat(request())

    sent = bodies(capture, "/v1/responses")
    assert sent and all("PLANTED-RULE-42" not in body for body in sent)


# --------------------------------------------------------------------------- (d) the version check


@pytest.mark.parametrize("backend_class", [ClaudeCLIBackend, CodexCLIBackend])
def test_the_pinned_cli_reads_as_not_older_than_the_tested_version(bins, home, backend_class):
    from skillopt_sleep.backends.subprocess_call import installed_version

    backend = backend_class(binary=str(bins / backend_class.name))

    assert installed_version(backend.binary) == backend.tested_version  # the pin and the constant agree
    assert backend.version_note() == ""
