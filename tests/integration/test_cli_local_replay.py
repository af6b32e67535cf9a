"""One real night through the real ``codex`` and ``claude`` CLIs against a local model on 127.0.0.1.

The binaries come from ``$SKILLOPT_SLEEP_AGENT_CLIS`` (``.ci/install-agent-clis``; every test skips when it is
unset); the model is the bundled SmolLM2-135M served by llama-cpp-python's real server (the ``llama_server``
fixture in ``conftest.py``). Nothing is mocked on our side: ``skillopt-sleep run-now --backend codex`` (and
``claude``) runs in a subprocess with ``codex_base_url`` / ``claude_base_url`` set, and every replay is a real
``codex exec`` / ``claude -p`` process that sends its request over HTTP.

llama-cpp-python's server speaks only Chat Completions, while Codex 0.169 speaks only the Responses API
(``wire_api = "chat"`` is refused) and Claude Code only Anthropic's Messages API. ``ApiShim`` below, test code
only, translates both to the server's ``/v1/chat/completions``: it stands where a user runs an endpoint that
speaks these APIs (vLLM or a LiteLLM proxy; for Claude Code also llama.cpp's own ``llama-server``). It also
records what each CLI sent, so the tests can check that the skill and memory arrived as the whole system prompt
and no tool went out.

Then the marker round trip: the sessions the real Claude Code wrote under the temporary ``CLAUDE_CONFIG_DIR`` are
harvested like a user's (``harvest --source claude --home claude=...``, headless runs included, every project in
scope), and every one of them is skipped as ``own_marker``: no request is mined. Codex writes none in the user's
``CODEX_HOME``: each call runs with a ``CODEX_HOME`` of its own in the scratch directory (deleted with it).

And a URL where nothing listens stops each CLI at its first call with a fatal error naming the setting (the
CLIs' own retries, minutes of reconnecting, are turned off).

Kept fast (about a minute on 2 cores): four tasks, no LLM miner, an edit budget of 1, one gate sample, no retry,
and the shim caps every reply at ``SHIM_MAX_TOKENS`` tokens.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from real_agents import BIN_DIR, REPO, skip_unless_installed
from transcripts import PNPM_CONVERSATIONS, write_claude_sessions

from skillopt_sleep.backends.base import ChatMessage, ChatRequest
from skillopt_sleep.backends.claude_cli import ClaudeCLIBackend
from skillopt_sleep.backends.codex_cli import ENDPOINT_FLAGS, CodexCLIBackend
from skillopt_sleep.prompts.marker import SESSION_MARKER

#: Most tokens of one reply (the CLIs ask for thousands; a 135M model would ramble to the context's end).
SHIM_MAX_TOKENS = 48
#: Variables that would give a CLI a login, a key or an endpoint from the developer's own environment.
CREDENTIAL_ENV = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "CLAUDE_CODE_OAUTH_TOKEN",
                  "CLAUDECODE", "OPENAI_API_KEY", "OPENAI_BASE_URL", "CODEX_API_KEY", "CODEX_ACCESS_TOKEN")
ORIGINAL_MEMORY = "# Web app\n\nHand-written notes: deploy after review.\n"


pytestmark = [pytest.mark.llama, skip_unless_installed(("claude", "codex"),
                                                      "run a night through the real claude and codex CLIs")]


# --------------------------------------------------------------------------- the API shim (test code only)


def _text_of(content: Any) -> str:
    """The text of a message's content: a string, or the ``text`` of its parts (other parts are left out)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def _chat(system: list[str], turns: list[dict[str, str]]) -> list[dict[str, str]]:
    joined = "\n\n".join(text for text in system if text.strip())
    return ([{"role": "system", "content": joined}] if joined else []) + turns


def responses_to_chat(body: dict) -> list[dict[str, str]]:
    """Chat messages from a Responses API request: ``instructions`` and developer/system items become the system
    message; user and assistant messages are kept in order (tool items are left out: none should be there)."""
    system = [body["instructions"]] if isinstance(body.get("instructions"), str) else []
    items = body.get("input") or []
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    turns = []
    for item in items:
        if not isinstance(item, dict) or item.get("type", "message") != "message":
            continue
        text = _text_of(item.get("content"))
        if item.get("role") in ("system", "developer"):
            system.append(text)
        else:
            turns.append({"role": "assistant" if item.get("role") == "assistant" else "user", "content": text})
    return _chat(system, turns)


def messages_to_chat(body: dict) -> list[dict[str, str]]:
    """Chat messages from an Anthropic Messages request (Claude Code's billing-header block is left out)."""
    system = [_text_of(body.get("system"))] if isinstance(body.get("system"), str) else [
        block.get("text", "") for block in body.get("system") or []
        if isinstance(block, dict) and not block.get("text", "").startswith("x-anthropic-billing-header")]
    turns = []
    for message in body.get("messages") or []:
        text = _text_of(message.get("content"))
        if message.get("role") == "system":
            system.append(text)
        else:
            turns.append({"role": "assistant" if message.get("role") == "assistant" else "user", "content": text})
    return _chat(system, turns)


def _sse(event: str, data: dict) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


class ApiShim:
    """Responses API (Codex) and Anthropic Messages API (Claude Code) on 127.0.0.1, answered by a real
    ``llama_cpp.server`` through its ``/v1/chat/completions`` (greedy, at most ``SHIM_MAX_TOKENS`` tokens).

    requests: every request body received, as ``(api, body)`` with api ``responses`` or ``messages``.
    """

    def __init__(self, chat_url: str):
        self.chat_url = chat_url
        self.requests: list[tuple[str, dict]] = []
        self.lock = threading.Lock()
        shim = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep pytest's output clean
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                path = self.path.split("?")[0]
                if path.endswith("/messages/count_tokens"):
                    return self._json({"input_tokens": len(json.dumps(body)) // 4})
                if path.endswith("/responses"):
                    api, messages = "responses", responses_to_chat(body)
                elif path.endswith("/messages"):
                    api, messages = "messages", messages_to_chat(body)
                else:
                    return self._json({"error": {"message": f"no route {path}"}}, status=404)
                with shim.lock:
                    shim.requests.append((api, body))
                text, usage = shim.complete(messages)
                events = (shim.responses_events if api == "responses" else shim.messages_events)(text, usage)
                if body.get("stream"):
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.end_headers()
                    for event, data in events:
                        self.wfile.write(_sse(event, data))
                    return None
                return self._json(events[-1][1]["response"] if api == "responses" else events[0][1]["message"]
                                  | {"content": [{"type": "text", "text": text}], "stop_reason": "end_turn"})

            def _json(self, data: dict, status: int = 200):
                payload = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def complete(self, messages: list[dict[str, str]]) -> tuple[str, dict[str, int]]:
        payload = {"messages": messages, "max_tokens": SHIM_MAX_TOKENS, "temperature": 0, "seed": 0}
        request = urllib.request.Request(self.chat_url, data=json.dumps(payload).encode(),
                                         headers={"content-type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as response:
            reply = json.load(response)
        text = reply["choices"][0]["message"].get("content") or "OK"
        usage = reply.get("usage") or {}
        return text, {"input": usage.get("prompt_tokens", 0), "output": usage.get("completion_tokens", 0)}

    @staticmethod
    def responses_events(text: str, usage: dict[str, int]) -> list[tuple[str, dict]]:
        item = {"type": "message", "id": "msg_shim", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}
        response = {"id": "resp_shim", "object": "response", "status": "completed", "output": [item],
                    "usage": {"input_tokens": usage["input"], "output_tokens": usage["output"],
                              "total_tokens": usage["input"] + usage["output"]}}
        return [("response.created", {"type": "response.created", "response": {**response, "status": "in_progress",
                                                                             "output": []}}),
                ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0,
                                                "item": {**item, "content": [], "status": "in_progress"}}),
                ("response.output_text.delta", {"type": "response.output_text.delta", "output_index": 0,
                                                "content_index": 0, "item_id": "msg_shim", "delta": text}),
                ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0,
                                               "item": item}),
                ("response.completed", {"type": "response.completed", "response": response})]

    @staticmethod
    def messages_events(text: str, usage: dict[str, int]) -> list[tuple[str, dict]]:
        message = {"id": "msg_shim", "type": "message", "role": "assistant", "model": "local", "content": [],
                   "stop_reason": None, "stop_sequence": None,
                   "usage": {"input_tokens": usage["input"], "output_tokens": 0}}
        return [("message_start", {"type": "message_start", "message": message}),
                ("content_block_start", {"type": "content_block_start", "index": 0,
                                         "content_block": {"type": "text", "text": ""}}),
                ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                         "delta": {"type": "text_delta", "text": text}}),
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn",
                                                                      "stop_sequence": None},
                                   "usage": {"output_tokens": usage["output"]}}),
                ("message_stop", {"type": "message_stop"})]

    def bodies(self, api: str) -> list[dict]:
        with self.lock:
            return [body for kind, body in self.requests if kind == api]


@pytest.fixture(scope="module")
def shim(llama_server):
    server = ApiShim(f"{llama_server.base_url}/chat/completions")
    server.thread.start()
    yield server
    server.server.shutdown()
    server.server.server_close()


# --------------------------------------------------------------------------- one night per CLI


class Night:
    def __init__(self, backend: str, completed: subprocess.CompletedProcess, base: Path, cli_home: Path):
        self.backend = backend
        self.completed = completed
        self.base = base
        self.cli_home = cli_home
        report = json.loads(completed.stdout)
        self.report = report
        self.diagnostics = json.loads((Path(report["night_dir"]) / "diagnostics.json").read_text(encoding="utf-8"))


def cli_environment(base: Path) -> dict[str, str]:
    """This process's environment with an empty HOME (the CLIs' config dirs inside it) and no credential."""
    env = {key: value for key, value in os.environ.items()
           if key not in CREDENTIAL_ENV and not key.startswith(("SKILLOPT_SLEEP_", "XDG_"))}
    home = base / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".codex").mkdir()
    env.update({"HOME": str(home), "CLAUDE_CONFIG_DIR": str(home / ".claude"), "CODEX_HOME": str(home / ".codex"),
                "SKILLOPT_SLEEP_HOME": str(base / "skillopt"), "PYTHONPATH": str(REPO), "NO_COLOR": "1"})
    return env


def skillopt(args: list[str], env: dict[str, str], cwd: Path, timeout_s: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "skillopt_sleep", *args], capture_output=True, text=True,
                          timeout=timeout_s, cwd=cwd, env=env)


def run_night(backend: str, shim: ApiShim, base: Path) -> Night:
    project = base / "project"
    project.mkdir()
    (project / "CLAUDE.md").write_text(ORIGINAL_MEMORY, encoding="utf-8")
    harvested = base / "harvested-claude"
    write_claude_sessions(harvested, project, PNPM_CONVERSATIONS)
    env = cli_environment(base)
    endpoint = f"{shim.url}/v1" if backend == "codex" else shim.url
    env.update({f"SKILLOPT_SLEEP_{backend.upper()}_BIN": str(Path(BIN_DIR or "") / backend),
                f"SKILLOPT_SLEEP_{backend.upper()}_BASE_URL": endpoint,
                f"SKILLOPT_SLEEP_{backend.upper()}_MODEL": "smollm2-135m",
                "SKILLOPT_SLEEP_MAX_TASKS_PER_NIGHT": "4", "SKILLOPT_SLEEP_LLM_MINE": "false",
                "SKILLOPT_SLEEP_EDIT_BUDGET": "1", "SKILLOPT_SLEEP_GATE_SAMPLES": "1",
                "SKILLOPT_SLEEP_VAL_FRACTION": "0.4", "SKILLOPT_SLEEP_TEST_FRACTION": "0",
                "SKILLOPT_SLEEP_MAX_RETRIES": "0", "SKILLOPT_SLEEP_WORKERS": "2"})
    completed = skillopt(["run-now", "--scope", "project", "--lookback-hours", "0", "--source", "claude",
                          "--claude-home", str(harvested), "--project", str(project), "--backend", backend, "--json"],
                         env, project)
    assert completed.stdout.strip(), completed.stderr[-3000:]
    return Night(backend, completed, base, Path(env["CODEX_HOME"] if backend == "codex" else env["CLAUDE_CONFIG_DIR"]))


@pytest.fixture(scope="module")
def codex_night(shim, tmp_path_factory) -> Night:
    return run_night("codex", shim, tmp_path_factory.mktemp("codex-night"))


@pytest.fixture(scope="module")
def claude_night(shim, tmp_path_factory) -> Night:
    return run_night("claude", shim, tmp_path_factory.mktemp("claude-night"))


@pytest.fixture(params=["codex", "claude"])
def night(request) -> Night:
    return request.getfixturevalue(f"{request.param}_night")


def test_a_night_through_the_real_cli_against_the_local_model_completes(night):
    diagnostics = night.diagnostics
    assert diagnostics["status"] in ("accepted", "rejected"), (diagnostics["summary"], diagnostics.get("failure"),
                                                               night.completed.stderr[-2000:])
    assert night.completed.returncode in (0, 1), night.completed.stderr[-2000:]
    assert diagnostics["backend"]["name"] == night.backend
    target = diagnostics["cost"]["target"]
    assert target["calls"] > 0 and target["failed_calls"] < target["calls"]
    assert diagnostics["train_results"] and diagnostics["baseline"]["n"] > 0


def test_every_replay_went_through_the_real_cli_to_the_endpoint_with_our_system_prompt_and_no_tools(
        night, shim):
    api = "responses" if night.backend == "codex" else "messages"
    to_chat = responses_to_chat if api == "responses" else messages_to_chat
    chats = [(body, to_chat(body)) for body in shim.bodies(api)]
    memory_line = "Hand-written notes: deploy after review."
    replays = [chat for _body, chat in chats if chat[0]["role"] == "system" and memory_line in chat[0]["content"]]
    target = night.diagnostics["cost"]["target"]
    assert len(replays) >= target["calls"] - target["cached_calls"]  # one request (at least) per target call
    for chat in replays:
        first_user = next(message for message in chat if message["role"] == "user")
        assert SESSION_MARKER in first_user["content"] and memory_line not in first_user["content"]
    for body, chat in chats:
        assert len(chat[0]["content"]) < 8000  # the CLI's own long default prompt is gone from every request
        tools = [tool.get("name") or tool.get("type") for tool in body.get("tools") or []]
        assert tools == ([] if api == "messages" else ["view_image"]), tools  # Codex offers view_image always


def session_files(night: Night) -> list[Path]:
    """The transcripts the real CLI wrote during the night (Codex: rollouts; Claude Code: project sessions)."""
    if night.backend == "codex":
        return sorted((night.cli_home / "sessions").rglob("rollout-*.jsonl"))
    return sorted((night.cli_home / "projects").rglob("*.jsonl"))


def test_the_sessions_the_real_cli_wrote_are_not_harvested_the_next_night(night):
    written = session_files(night)
    if night.backend == "codex":  # each call had a CODEX_HOME of its own, deleted with it: nothing left to harvest
        assert written == []
        return
    assert len(written) >= night.diagnostics["cost"]["target"]["calls"]  # one session per call, at least
    env = cli_environment(night.base / "next-night")
    env["SKILLOPT_SLEEP_INCLUDE_SDK_SESSIONS"] = "true"  # else they are skipped as headless before the marker counts
    completed = skillopt(["harvest", "--source", night.backend, "--home", f"{night.backend}={night.cli_home}",
                          "--scope", "all", "--lookback-hours", "0", "--json"], env, night.base)

    assert completed.returncode == 0, completed.stderr[-2000:]
    preview = json.loads(completed.stdout)
    stats = preview["per_source"][night.backend]
    assert stats["sessions_skipped"] == {"own_marker": len(written)}, stats
    assert stats["sessions_harvested"] == 0 and stats["requests"] == 0
    assert preview["tasks"] == []


def test_the_real_codex_knows_every_endpoint_flag_and_answers_from_the_endpoint(shim, tmp_path):
    """No "ignoring unrecognized configuration" warning: each ``-c`` key and ``--disable``d feature of
    ``ENDPOINT_FLAGS`` exists in the pinned binary (an unknown feature name fails, an unknown key only warns)."""
    codex = str(Path(BIN_DIR or "") / "codex")
    backend = CodexCLIBackend(binary=codex, base_url=f"{shim.url}/v1", model="smollm2-135m")
    instructions = tmp_path / "instructions.md"
    instructions.write_text("Answer in one short sentence.", encoding="utf-8")
    argv = backend.command(codex, "target", str(tmp_path / "last.txt"), str(instructions))
    env = cli_environment(tmp_path)
    work = tmp_path / "work"
    work.mkdir()

    outcome = subprocess.run(argv, input="Say hello.", capture_output=True, text=True, timeout=120, cwd=work, env=env)

    assert outcome.returncode == 0, outcome.stderr[-2000:]
    assert "unrecognized configuration" not in outcome.stderr and "is ignored" not in outcome.stderr, outcome.stderr
    assert (tmp_path / "last.txt").read_text(encoding="utf-8").strip()
    assert all(flag in argv for flag in ENDPOINT_FLAGS)


@pytest.mark.parametrize("backend_class", [CodexCLIBackend, ClaudeCLIBackend])
def test_an_endpoint_where_nothing_answers_is_a_fatal_error_naming_the_setting_within_seconds(backend_class,
                                                                                              tmp_path, monkeypatch):
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    for key, value in cli_environment(tmp_path).items():
        monkeypatch.setenv(key, value)
    url = f"http://127.0.0.1:{port}" + ("/v1" if backend_class is CodexCLIBackend else "")
    backend = backend_class(binary=str(Path(BIN_DIR or "") / backend_class.name), base_url=url, model="local",
                            max_retries=2, timeout_s=120)
    started = time.monotonic()

    result = backend.chat(ChatRequest(role="target", messages=[ChatMessage(role="user", content="Say hello.")]))

    assert result.error_kind == "fatal" and result.attempts == 1, result.error
    assert f"{backend_class.name}_base_url" in result.fix and url in result.fix
    assert time.monotonic() - started < 30  # not minutes of reconnecting inside the CLI
