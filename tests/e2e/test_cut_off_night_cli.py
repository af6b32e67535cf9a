"""End to end: a night whose optimizer replies are cut off at their token budget says so first in its terminal line.

The real ``skillopt-sleep run-now`` CLI, in a subprocess, on the example transcripts, against an OpenAI-compatible
server on 127.0.0.1 (pytest-httpserver) that answers every ``{"edits": ...}`` request with ``finish_reason:
"length"`` and JSON cut inside its first edit (nothing to repair); replays, the judge and the rule reader get
ordinary replies.
"""

from __future__ import annotations

import json
from pathlib import Path

from cli_subprocess import EXAMPLES, run_cli
from werkzeug import Request, Response

CUT_EDITS = '{"edits": [{"op": "add", "target": "memory", "text": "Always'


def schema_properties(body: dict) -> dict:
    response_format = body.get("response_format") or {}
    schema = (response_format.get("json_schema") or {}).get("schema") or response_format.get("schema") or {}
    return schema.get("properties", {})


def handler(request: Request) -> Response:
    body = json.loads(request.get_data())
    properties = schema_properties(body)
    content, reason = "Here is the answer.", "stop"
    if "edits" in properties:
        content, reason = CUT_EDITS, "length"
    elif "score" in properties:
        content = '{"score": 0.5, "rationale": "fine"}'
    elif properties:
        content = "{}"
    return Response(json.dumps({
        "id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": body["model"],
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": reason}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}), content_type="application/json")


def test_a_night_decided_by_cut_off_optimizer_replies_says_so_first(api, tmp_path, cli_env):
    api.expect_request("/v1/chat/completions").respond_with_handler(handler)
    project = tmp_path / "project"
    project.mkdir()
    env = {**cli_env, "NO_COLOR": "1", "OPENAI_BASE_URL": api.url_for("/v1"), "SKILLOPT_SLEEP_BACKEND": "openai",
           "SKILLOPT_SLEEP_TARGET_MODEL": "target-m", "SKILLOPT_SLEEP_OPTIMIZER_MODEL": "optimizer-m"}
    done = run_cli("run-now", "--claude-home", str(EXAMPLES / "claude-home"), "--codex-home",
                   str(EXAMPLES / "codex-home"), "--scope", "all", "--lookback-hours", "0", env=env, cwd=project)
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith("nothing changed: the optimizer's replies were cut off at 4096 tokens (1 of 1 call); "
                            "fix: raise structured_max_tokens"), first
    assert "no rule was proposed" not in done.stdout
    bodies = [json.loads(request.get_data()) for request, _response in api.log]
    asked = [body["max_tokens"] for body in bodies if "edits" in schema_properties(body)]
    assert asked == [2048, 4096]  # the reflect budget, then one retry with twice the room; no third round
    path = next(line.split("diagnostics: ", 1)[1] for line in done.stdout.splitlines()
                if line.startswith("diagnostics: "))
    diagnostics = json.loads(Path(path.strip()).read_text(encoding="utf-8"))
    assert [error["reason"] for error in diagnostics["errors"] if error.get("role") == "optimizer"] == ["reply_cut_off"]
