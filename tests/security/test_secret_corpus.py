"""The secret corpus (``secret_shapes.py``): every shape is redacted, every look-alike is left alone, and a whole
night stores and sends none of them.

Unit level: ``redact`` removes each secret (and its tail: half a secret is still a leak), counts it, is
idempotent on it, and finds the same with and without its pre-filter. Integration level: every shape is planted in
the typed requests, the tool inputs (commands the agent ran) and a tool error of real-format Claude Code 2.1
sessions in a temporary HOME; the real CLI runs one night (``run-now``, openai backend) against a recording
OpenAI-compatible server on 127.0.0.1, then ``harvest``. No secret may occur in any file the night wrote (state,
night dir with tasks.jsonl and diagnostics.json, the archive's raw bytes), in any table of the archive nor in its
FTS5 index (queried), in the CLI's output, nor in any request body the server received.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sqlite3
import subprocess
import sys
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from secret_shapes import NEGATIVES, SHAPES, Shape
from transcripts import PNPM_CONVERSATIONS, UNEXPLAINED_CONVERSATIONS
from werkzeug import Request, Response

from skillopt_sleep.archive.tasks import fts5_available
from skillopt_sleep.redaction import redact as redact_module
from skillopt_sleep.redaction.redact import REDACTED_PREFIX, redact

REPO = Path(__file__).resolve().parents[2]


def test_the_corpus_is_large_and_its_secrets_are_distinct():
    assert len(SHAPES) >= 40 and len(NEGATIVES) >= 10
    assert len({shape.name for shape in SHAPES}) == len(SHAPES)
    assert len({shape.secret for shape in SHAPES}) == len(SHAPES)
    assert all(shape.secret in shape.text for shape in SHAPES)


# --------------------------------------------------------------------------- unit: redact() on each shape


@pytest.mark.parametrize("shape", SHAPES, ids=lambda shape: shape.name)
def test_each_shape_is_redacted(shape: Shape):
    redacted, count = redact(shape.text)
    assert count >= 1 and REDACTED_PREFIX in redacted, redacted
    for piece in shape.pieces:
        assert piece not in redacted, redacted
    assert redact(redacted) == (redacted, 0)  # idempotent


@pytest.mark.parametrize(("name", "text"), NEGATIVES, ids=[name for name, _ in NEGATIVES])
def test_a_look_alike_is_left_alone(name: str, text: str):
    assert redact(text) == (text, 0)


def test_the_shapes_are_found_inside_json_and_across_lines_as_harvested():
    """A tool input is harvested as compact JSON (quotes escaped), several commands to a text."""
    text = "\n".join(json.dumps({"command": shape.text}) for shape in SHAPES)
    redacted, count = redact(text)
    assert count >= len(SHAPES)
    assert [shape.name for shape in SHAPES if any(piece in redacted for piece in shape.pieces)] == []


def test_the_prefilter_finds_what_the_full_pass_finds():
    rule_set = redact_module._rule_set()
    if rule_set.prefilter is None:
        pytest.skip("google-re2 is not installed, or the detector patterns changed (redact._PATTERNS_DIGEST)")
    texts = [shape.text for shape in SHAPES] + [text for _, text in NEGATIVES]
    texts += [f"{a.text} then {b.text}" for a, b in zip(SHAPES, SHAPES[1:])]
    for text in texts:
        assert redact(text) == redact_module._redact_all(text, rule_set, None), text
    with_prefilter = redact_module.redact_many(texts)
    without = dataclasses.replace(rule_set, prefilter=None)
    assert with_prefilter == [redact_module._redact_all(text, without, None) for text in texts]


# --------------------------------------------------------------------------- integration: one night


class Recorder:
    """An OpenAI-compatible endpoint that answers every role of a night with a minimal valid reply (no edits) and
    keeps every request body as received."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    def __call__(self, request: Request) -> Response:
        self.bodies.append(request.get_data())
        body = json.loads(self.bodies[-1])
        response_format = body.get("response_format") or {}
        schema = (response_format.get("json_schema") or {}).get("schema") or response_format.get("schema") or {}
        properties = schema.get("properties", {})
        if "edits" in properties:
            text = json.dumps({"edits": []})
        elif "order" in properties:
            text = json.dumps({"order": []})
        elif "score" in properties:
            text = json.dumps({"score": 0.5, "rationale": "partly"})
        elif "checks" in properties:
            text = json.dumps({"intent": "install", "checks": [], "rubric": "uses the right tool",
                               "outcome": "failure"})
        else:
            text = "Run `npm install`."
        reply = {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": body.get("model", "m"),
                 "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                              "finish_reason": "stop"}],
                 "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
        return Response(json.dumps(reply), content_type="application/json")


def _write_sessions(claude_home: Path, project: Path, groups: list[list[Shape]]) -> None:
    """One Claude Code 2.1 session per group: the request carries the group's shapes, the agent runs each shape as
    a Bash command (the first one fails, its error quoting the command), answers with npm, and is corrected."""
    folder = claude_home / "projects" / str(project).replace("/", "-")
    folder.mkdir(parents=True)
    moment = datetime.now(timezone.utc) - timedelta(hours=2)
    for number, group in enumerate(groups):
        # a correction that says why gives the task a check; one that does not sends the task, with what the agent
        # ran, to the LLM miner
        conversations = PNPM_CONVERSATIONS if number % 2 == 0 else UNEXPLAINED_CONVERSATIONS
        request, answer, correction = conversations[number // 2 % len(conversations)]
        session_id = str(uuid.UUID(int=number + 1))
        lines: list[dict] = []

        def record(kind: str, message: dict, **extra) -> None:
            nonlocal moment
            moment += timedelta(seconds=5)
            lines.append({"parentUuid": lines[-1]["uuid"] if lines else None, "isSidechain": False,
                          "userType": "external", "cwd": str(project), "sessionId": session_id,
                          "version": "2.1.80", "gitBranch": "main", "type": kind,
                          "uuid": str(uuid.UUID(int=(number + 1) * 1000 + len(lines))), "entrypoint": "cli",
                          "timestamp": moment.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                          "message": message, **extra})

        def assistant(*blocks: dict) -> None:
            record("assistant", {"role": "assistant", "id": f"msg_{number}_{len(lines)}", "model": "claude-sonnet-4",
                                 "content": list(blocks), "stop_reason": None})

        notes = "\n".join(f"- {shape.name}: {shape.text}" for shape in group)
        record("user", {"role": "user", "content": f"{request}. My setup notes:\n{notes}"})
        for index, shape in enumerate(group):
            tool_id = f"toolu_{number:02d}{index:04d}"
            assistant({"type": "tool_use", "id": tool_id, "name": "Bash",
                       "input": {"command": shape.text, "description": f"step {shape.name}"}})
            failed = index == 0
            output = f"Exit code 1\nfailed: {shape.text}" if failed else "ok"
            record("user", {"role": "user", "content": [{"tool_use_id": tool_id, "type": "tool_result",
                                                         "content": output, "is_error": failed}]},
                   toolUseResult={"stdout": "" if failed else output, "stderr": output if failed else "",
                                  "interrupted": False, "isImage": False}, sourceToolUseID=tool_id)
        assistant({"type": "text", "text": answer})
        record("user", {"role": "user", "content": correction})
        assistant({"type": "text", "text": "Sorry, fixed: use pnpm."})
        (folder / f"{session_id}.jsonl").write_text("\n".join(json.dumps(line) for line in lines) + "\n",
                                                    encoding="utf-8")


def _cli(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "skillopt_sleep", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=120)


def _archive_text(path: Path) -> tuple[str, sqlite3.Connection]:
    """Every row of every table of the archive (the FTS5 table and its shadow tables included), as text."""
    connection = sqlite3.connect(path)
    tables = [name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    assert "tasks" in tables
    rows = []
    for table in tables:
        for row in connection.execute(f'SELECT * FROM "{table}"'):
            rows.append(" ".join(value.decode("latin-1") if isinstance(value, bytes) else str(value)
                                 for value in row))
    return "\n".join(rows), connection


def test_a_night_stores_and_sends_no_secret_of_the_corpus(tmp_path, api, hermetic_env):
    project = tmp_path / "project"
    project.mkdir()
    (project / "CLAUDE.md").write_text("# Shop\n\nHand-written notes.\n", encoding="utf-8")
    claude_home = tmp_path / "claude"
    groups = [SHAPES[start:start + 9] for start in range(0, len(SHAPES), 9)]
    _write_sessions(claude_home, project, groups)
    recorder = Recorder()
    api.expect_request("/v1/chat/completions", method="POST").respond_with_handler(recorder)
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1", "OPENAI_BASE_URL": api.url_for("/v1"),
           "OPENAI_API_KEY": "sk-test", "SKILLOPT_SLEEP_MAX_RETRIES": "0"}
    common = ("--claude-home", str(claude_home), "--scope", "all", "--lookback-hours", "0", "--project", str(project))
    night = _cli("run-now", "--backend", "openai", "--json", *common, env=env, cwd=project)
    assert night.returncode in (0, 1), night.stdout[-2000:] + night.stderr[-2000:]
    report = json.loads(night.stdout)
    preview = _cli("harvest", *common, env=env, cwd=project)
    assert preview.returncode == 0, preview.stderr[-2000:]
    output = night.stdout + night.stderr + preview.stdout + preview.stderr

    # the test can fail: every session was read, its secrets counted, its texts stored and sent
    night_dir = Path(report["night_dir"])
    harvest = report["harvest"]
    assert harvest["sessions_harvested"] == len(groups), harvest
    assert harvest["secrets_redacted"] >= 2 * len(SHAPES), harvest  # each in a request and a tool input
    tasks = (night_dir / "tasks.jsonl").read_text(encoding="utf-8")
    assert "registry.example.com" in tasks and "[REDACTED:command_line_password]" in tasks
    assert "step docker_login_pat" in tasks  # a tool input (its description) was stored
    assert "[REDACTED:docker_token]" in output
    sent = [body.decode("utf-8") for body in recorder.bodies]
    assert sent and any("[REDACTED:command_line_password]" in body for body in sent)
    # every request reached a model (its shapes' labels), and the tool inputs of the sessions the miner read
    assert all(any(f"{shape.name}: " in body for body in sent) for shape in SHAPES)
    assert sum(any(f"step {shape.name}" in body for body in sent) for shape in SHAPES) >= 9

    # every file written under the temporary HOME, state and project (the transcripts themselves excepted)
    written = {path: path.read_bytes().decode("utf-8", errors="replace") for path in sorted(tmp_path.rglob("*"))
               if path.is_file() and claude_home not in path.parents}
    archives = [path for path in written if path.name == "archive.sqlite3"]
    assert len(archives) == 1 and any(path.name == "diagnostics.json" for path in written)
    archive_text, connection = _archive_text(archives[0])
    assert "[REDACTED:" in archive_text
    fts = [name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE name = 'tasks_fts'")]
    assert fts == (["tasks_fts"] if fts5_available(connection) else [])
    # what a request sent to the model says, decoded (a JSON body escapes quotes and non-ASCII characters)
    decoded = [json.dumps(json.loads(body), ensure_ascii=False) + "\n".join(
        str(message.get("content")) for message in json.loads(body).get("messages", [])) for body in sent]
    places = {**{str(path.relative_to(tmp_path)): text for path, text in written.items()},
              "archive tables": archive_text, "CLI output": output,
              **{f"request {index}": body + text for index, (body, text) in enumerate(zip(sent, decoded))}}
    leaks = [(shape.name, where) for shape in SHAPES for where, text in places.items()
             if any(piece in text for piece in shape.pieces)]
    assert leaks == [], leaks
    if fts:  # FTS5 is compiled in: its index holds no token of a secret
        assert connection.execute("SELECT count(*) FROM tasks_fts").fetchone()[0] > 0
        for shape in SHAPES:
            for token in {token for token in re.findall(r"[A-Za-z0-9]{8,}", shape.secret[-16:])}:
                hits = connection.execute("SELECT count(*) FROM tasks_fts WHERE tasks_fts MATCH ?",
                                          (f'"{token}"',)).fetchone()[0]
                assert hits == 0, (shape.name, token)
    connection.close()
