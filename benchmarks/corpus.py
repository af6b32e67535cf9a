"""A realistic, deterministic transcript corpus for benchmarks.

Writes Claude Code and Codex CLI session files shaped like the real ones described in
``shared/FORMATS.md`` (Claude Code 2.1.x envelopes, Codex rollouts 0.77-0.135), with the
features that make harvesting slow in practice: long tool-result lines (Read of whole files,
tens of KB; a few lines of several hundred KB), duplicated payloads (``toolUseResult``
repeats the tool result), streamed assistant records sharing one ``message.id``,
``progress`` and ``file-history-snapshot`` records, sub-agent (sidechain) files, slash
commands with their ``isMeta`` expansions, and Codex prompts stored twice.

Layout under the output directory ``root``::

    root/corpus.json                                         marker: parameters and totals
    root/claude/projects/-home-dev-proj<N>/<uuid>.jsonl      Claude Code sessions
    root/claude/projects/-home-dev-proj<N>/<uuid>/subagents/agent-<id>.jsonl
    root/codex/sessions/YYYY/MM/DD/rollout-<stamp>-<uuid>.jsonl

``root/claude`` is a Claude config dir (``CLAUDE_CONFIG_DIR``) and ``root/codex`` a
``CODEX_HOME``. The same (sessions, target_mb, seed) always gives byte-identical files.

Command line (a smoke run, then the full size)::

    python benchmarks/corpus.py --quick --out /tmp/corpus-quick
    python benchmarks/corpus.py --sessions 2000 --target-mb 1000 --out /tmp/corpus-full
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import sys
import tempfile
import time
import uuid
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

try:  # orjson writes big strings several times faster; the stdlib gives the same bytes shape.
    import orjson

    def _dumps(record: dict) -> bytes:
        return orjson.dumps(record)

except ImportError:  # pragma: no cover - exercised only without orjson

    def _dumps(record: dict) -> bytes:
        return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


MARKER_NAME = "corpus.json"
CORPUS_FORMAT = 1
QUICK_SESSIONS = 200
QUICK_TARGET_MB = 100.0
DEFAULT_SESSIONS = 2000
DEFAULT_TARGET_MB = 1000.0
CODEX_SHARE = 0.35
PROJECT_COUNT = 24
CORPUS_END = datetime(2026, 3, 2, 18, 0, 0, tzinfo=timezone.utc)
CORPUS_DAYS = 21
MIN_SESSION_BYTES = 6_000
MAX_SESSION_BYTES = 60_000_000


@dataclass
class CorpusInfo:
    """What was written. Sizes in bytes; paths absolute."""

    root: str
    sessions: int
    target_mb: float
    seed: int
    claude_home: str
    codex_home: str
    claude_sessions: int = 0
    codex_sessions: int = 0
    sidechain_files: int = 0
    claude_bytes: int = 0
    codex_bytes: int = 0
    longest_line: int = 0
    generation_s: float = 0.0
    format: int = CORPUS_FORMAT
    files: list[str] = field(default_factory=list)

    @property
    def total_bytes(self) -> int:
        return self.claude_bytes + self.codex_bytes

    def main_files(self) -> list[str]:
        """Session files (Claude main transcripts and Codex rollouts), not sub-agent files."""
        return [path for path in self.files if "/subagents/" not in path]


# ---------------------------------------------------------------------------------------------
# Text pools: built once per process, sliced for payloads (no per-character Python work).

_WORDS = (
    "config session parser record stream buffer token offset checkpoint harvest request "
    "result index window cache worker budget judge replay skill memory edit anchor gate "
    "split sample score retry timeout backend ledger prompt answer tool error value path "
    "project branch commit patch diff test fixture module handler client server queue"
).split()
_PROMPTS = (
    "fix the failing test in {file}",
    "add a --{word} option to the {word2} command and document it",
    "why does {file} raise KeyError when the {word} is empty?",
    "refactor {file} so the {word} handling lives in one function",
    "write tests for the {word} {word2} edge cases",
    "the build is broken after my last change to {file}, can you look?",
    "rename {word} to {word2} everywhere and update the docs",
    "make the {word} parser stream instead of loading the whole file",
    "no, that's wrong, keep the old {word} behaviour and only change {word2}",
    "run the test suite and fix whatever fails",
    "explain how the {word} {word2} flow works in {file}",
    "try again, it still doesn't work: {word} is None in {file}",
)
_SLASH_COMMANDS = ("review", "commit", "test-all", "explain")
_BUILTIN_COMMANDS = ("/clear", "/model", "/compact")
_TOOLS_WEIGHTED = ("Read",) * 5 + ("Bash",) * 3 + ("Edit",) * 2 + ("Grep", "Write", "TodoWrite")


class TextPools:
    """Deterministic code-like text. ``raw`` is file content; ``numbered`` is the Read view."""

    def __init__(self, seed: int, characters: int = 3_000_000) -> None:
        rng = random.Random(seed)
        lines: list[str] = []
        total = 0
        indent = ""
        while total < characters:
            word, word2 = rng.choice(_WORDS), rng.choice(_WORDS)
            kind = rng.random()
            if kind < 0.12:
                indent = ""
                line = f"def {word}_{word2}_{rng.randrange(1000)}(self, {word2}: str) -> dict:"
            elif kind < 0.2:
                indent = "    "
                line = f'    """Return the {word} for one {word2}; raises ValueError when it is empty."""'
            elif kind < 0.3:
                line = f"{indent}# {word} → {word2}: keep the order stable (see issue #{rng.randrange(900)})"
            elif kind < 0.36:
                line = ""
            else:
                line = f"{indent}{word} = self.{word2}.get({word!r}, {rng.randrange(10000)}) + len({word2})"
            lines.append(line)
            total += len(line) + 1
        self.raw = "\n".join(lines)
        self.numbered = "\n".join(f"{number:>6}→{line}" for number, line in enumerate(lines, 1))
        self.shell = "\n".join(
            f"tests/test_{rng.choice(_WORDS)}.py::test_{rng.choice(_WORDS)}_{rng.choice(_WORDS)} "
            + rng.choice(("PASSED", "PASSED", "PASSED", "FAILED", "SKIPPED"))
            for _ in range(characters // 60)
        )
        self.encrypted = "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
                                 for _ in range(64)) * (characters // 64 // 8)

    @staticmethod
    def slice(text: str, rng: random.Random, size: int) -> str:
        size = max(1, min(size, len(text)))
        start = rng.randrange(0, len(text) - size + 1)
        return text[start:start + size]


_POOLS: TextPools | None = None


def _pools(seed: int) -> TextPools:
    global _POOLS
    if _POOLS is None:
        _POOLS = TextPools(seed)
    return _POOLS


# ---------------------------------------------------------------------------------------------
# Small helpers


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _prompt(rng: random.Random) -> str:
    template = rng.choice(_PROMPTS)
    return template.format(
        file=f"src/{rng.choice(_WORDS)}/{rng.choice(_WORDS)}.py",
        word=rng.choice(_WORDS),
        word2=rng.choice(_WORDS),
    )


def _payload_size(rng: random.Random, scale: float) -> int:
    """Tool output size in characters: mostly a few KB to tens of KB, sometimes several hundred KB."""
    roll = rng.random()
    if roll < 0.03:
        return int(rng.uniform(150_000, 300_000))
    if roll < 0.35:
        return int(rng.uniform(300, 3_000))
    return int(rng.uniform(4_000, 45_000) * scale)


class _Clock:
    def __init__(self, start: datetime, rng: random.Random) -> None:
        self.now = start
        self.rng = rng

    def tick(self, low: float = 0.2, high: float = 8.0) -> str:
        self.now += timedelta(seconds=self.rng.uniform(low, high))
        return _stamp(self.now)


# ---------------------------------------------------------------------------------------------
# Claude Code 2.1.x


class _ClaudeWriter:
    """Builds the lines of one Claude Code session (main file plus sub-agent files)."""

    VERSION = "2.1.56"

    def __init__(self, rng: random.Random, pools: TextPools, session_id: str, cwd: str,
                 start: datetime, scale: float) -> None:
        self.rng = rng
        self.pools = pools
        self.session_id = session_id
        self.cwd = cwd
        self.clock = _Clock(start, rng)
        self.scale = scale
        self.slug = f"{rng.choice(_WORDS)}-{rng.choice(_WORDS)}-{rng.choice(_WORDS)}"
        self.branch = rng.choice(("main", "main", "feature/" + rng.choice(_WORDS), "HEAD"))
        self.parent: str | None = None
        self.lines: list[bytes] = []
        self.size = 0
        self.side_files: dict[str, list[bytes]] = {}
        self.longest = 0

    # -- plumbing --
    def _emit(self, record: dict, into: list[bytes] | None = None) -> None:
        line = _dumps(record)
        self.longest = max(self.longest, len(line))
        (self.lines if into is None else into).append(line)
        self.size += len(line) + 1

    def _envelope(self, kind: str, *, sidechain: bool = False, agent_id: str | None = None,
                  parent: str | None = None) -> dict:
        record_id = _uuid(self.rng)
        record = {
            "parentUuid": parent if parent is not None or sidechain else self.parent,
            "isSidechain": sidechain,
            "userType": "external",
            "cwd": self.cwd,
            "sessionId": self.session_id,
            "version": self.VERSION,
            "gitBranch": self.branch,
            "slug": self.slug,
        }
        if agent_id:
            record["agentId"] = agent_id
        record["type"] = kind
        record["uuid"] = record_id
        record["timestamp"] = self.clock.tick()
        return record

    def _advance(self, record: dict) -> dict:
        self.parent = record["uuid"]
        return record

    # -- records --
    def user_prompt(self, text: str | None = None) -> str:
        record = self._envelope("user")
        text = text or _prompt(self.rng)
        content: object = text if self.rng.random() < 0.6 else [{"type": "text", "text": text}]
        record["message"] = {"role": "user", "content": content}
        record["permissionMode"] = self.rng.choice(("default", "acceptEdits", "default"))
        record["thinkingMetadata"] = {"maxThinkingTokens": 31999}
        self._emit(self._advance(record))
        snapshot = {
            "type": "file-history-snapshot",
            "messageId": record["uuid"],
            "snapshot": {
                "messageId": record["uuid"],
                "trackedFileBackups": {
                    f"src/{self.rng.choice(_WORDS)}.py": {
                        "backupFileName": f"{self.rng.getrandbits(64):016x}@v{self.rng.randrange(1, 6)}",
                        "version": self.rng.randrange(1, 6),
                        "backupTime": record["timestamp"],
                    }
                    for _ in range(self.rng.randrange(0, 4))
                },
                "timestamp": record["timestamp"],
            },
            "isSnapshotUpdate": False,
        }
        self._emit(snapshot)
        return text

    def slash_command(self) -> None:
        name = self.rng.choice(_SLASH_COMMANDS)
        args = _prompt(self.rng)
        record = self._envelope("user")
        record["message"] = {
            "role": "user",
            "content": f"<command-message>{name} is running…</command-message>\n"
                       f"<command-name>/{name}</command-name>\n<command-args>{args}</command-args>",
        }
        self._emit(self._advance(record))
        expansion = self._envelope("user")
        expansion["isMeta"] = True
        body = self.pools.slice(self.pools.raw, self.rng, int(self.rng.uniform(800, 4000)))
        expansion["message"] = {"role": "user", "content": [
            {"type": "text", "text": f"# /{name}\n\nFollow these steps for: {args}\n\n{body}"}]}
        self._emit(self._advance(expansion))

    def builtin_command(self) -> None:
        caveat = self._envelope("user")
        caveat["isMeta"] = True
        caveat["message"] = {"role": "user", "content": (
            "<local-command-caveat>Caveat: The messages below were generated by the user while running "
            "local commands. DO NOT respond to these messages or otherwise consider them in your response "
            "unless the user explicitly asks you to.</local-command-caveat>")}
        self._emit(self._advance(caveat))
        name = self.rng.choice(_BUILTIN_COMMANDS)
        command = self._envelope("user")
        command["message"] = {"role": "user", "content": (
            f"<command-name>{name}</command-name>\n            <command-message>{name[1:]}</command-message>\n"
            "            <command-args></command-args>")}
        self._emit(self._advance(command))
        output = self._envelope("user")
        output["message"] = {"role": "user", "content": "<local-command-stdout>Done.</local-command-stdout>"}
        self._emit(self._advance(output))

    def _assistant_blocks(self, blocks: list[dict], stop_reason: str | None,
                          into: list[bytes] | None = None, sidechain: bool = False,
                          agent_id: str | None = None) -> str:
        """One API response, written as one record per content block sharing message.id."""
        message_id = f"msg_01{self.rng.getrandbits(96):024x}"
        request_id = f"req_011{self.rng.getrandbits(96):024x}"
        usage = {
            "input_tokens": self.rng.randrange(3, 40),
            "cache_creation_input_tokens": self.rng.randrange(0, 6000),
            "cache_read_input_tokens": self.rng.randrange(10_000, 160_000),
            "output_tokens": self.rng.randrange(20, 900),
            "service_tier": "standard",
        }
        last_uuid = ""
        for position, block in enumerate(blocks):
            record = self._envelope("assistant", sidechain=sidechain, agent_id=agent_id,
                                    parent=self.parent)
            record["message"] = {
                "model": "claude-sonnet-4-5-20250929",
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "content": [block],
                "stop_reason": stop_reason if position == len(blocks) - 1 else None,
                "stop_sequence": None,
                "usage": usage,
            }
            record["requestId"] = request_id
            self._emit(self._advance(record), into)
            last_uuid = record["uuid"]
        return last_uuid

    def _tool_call(self, tool: str) -> tuple[dict, str, object]:
        """Returns (tool_use block, tool_result text, toolUseResult)."""
        rng, pools = self.rng, self.pools
        path = f"{self.cwd}/src/{rng.choice(_WORDS)}/{rng.choice(_WORDS)}.py"
        tool_id = f"toolu_01{rng.getrandbits(96):024x}"
        size = _payload_size(rng, self.scale)
        if tool == "Read":
            raw = pools.slice(pools.raw, rng, size)
            lines = raw.count("\n") + 1
            shown = pools.slice(pools.numbered, rng, size + lines * 7)
            block_input: dict = {"file_path": path}
            result: object = {"type": "text", "file": {"filePath": path, "content": raw, "numLines": lines,
                                                       "startLine": 1, "totalLines": lines}}
            text = shown
        elif tool == "Bash":
            command = rng.choice(("pytest -q", "ruff check .", "git status", "make build", "ls -la src"))
            stdout = pools.slice(pools.shell, rng, size // 2)
            block_input = {"command": command, "description": f"Run {command}"}
            result = {"stdout": stdout, "stderr": "", "interrupted": False, "isImage": False}
            text = stdout
        elif tool == "Edit":
            original = pools.slice(pools.raw, rng, size)
            old = pools.slice(original, rng, 200)
            new = old.replace("self", "this", 1) + "\n    # edited"
            block_input = {"file_path": path, "old_string": old, "new_string": new}
            result = {"filePath": path, "oldString": old, "newString": new, "originalFile": original,
                      "replaceAll": False, "userModified": False,
                      "structuredPatch": [{"oldStart": 10, "oldLines": 3, "newStart": 10, "newLines": 4,
                                           "lines": [" " + old[:80], "-" + old[:80], "+" + new[:80]]}]}
            text = f"The file {path} has been updated. Here's the result of running `cat -n` on a snippet:\n" \
                   + pools.slice(pools.numbered, rng, 1500)
        elif tool == "Write":
            content = pools.slice(pools.raw, rng, size // 2)
            block_input = {"file_path": path, "content": content}
            result = {"type": "create", "filePath": path, "content": content, "structuredPatch": []}
            text = f"File created successfully at: {path}"
        elif tool == "Grep":
            names = [f"src/{rng.choice(_WORDS)}/{rng.choice(_WORDS)}.py" for _ in range(rng.randrange(1, 40))]
            block_input = {"pattern": rng.choice(_WORDS), "output_mode": "files_with_matches"}
            result = {"mode": "files_with_matches", "filenames": names, "numFiles": len(names)}
            text = f"Found {len(names)} files\n" + "\n".join(names)
        else:  # TodoWrite
            todos = [{"content": _prompt(rng), "status": rng.choice(("pending", "completed", "in_progress")),
                      "activeForm": "Working"} for _ in range(rng.randrange(2, 7))]
            block_input = {"todos": todos}
            result = {"oldTodos": todos[:-1], "newTodos": todos}
            text = "Todos have been modified successfully."
        block = {"type": "tool_use", "id": tool_id, "name": tool, "input": block_input,
                 "caller": {"type": "direct"}}
        return block, text, result

    def _tool_result(self, block: dict, text: str, result: object, assistant_uuid: str, *,
                     is_error: bool = False, into: list[bytes] | None = None,
                     sidechain: bool = False, agent_id: str | None = None) -> None:
        record = self._envelope("user", sidechain=sidechain, agent_id=agent_id, parent=self.parent)
        item: dict = {"tool_use_id": block["id"], "type": "tool_result", "content": text}
        if is_error:
            item["is_error"] = True
        record["message"] = {"role": "user", "content": [item]}
        record["toolUseResult"] = result
        record["sourceToolAssistantUUID"] = assistant_uuid
        self._emit(self._advance(record), into)

    def _progress(self, block: dict) -> None:
        record = self._envelope("progress")
        record["data"] = {"type": "bash_progress", "output": self.pools.slice(self.pools.shell, self.rng, 300),
                          "fullOutput": self.pools.slice(self.pools.shell, self.rng, 900),
                          "elapsedTimeSeconds": self.rng.randrange(1, 30), "totalLines": 40}
        record["toolUseID"] = f"bash-progress-{self.rng.randrange(10)}"
        record["parentToolUseID"] = block["id"]
        self._emit(record)

    def sub_agent(self) -> None:
        """A Task call whose sub-agent writes its own file under <session>/subagents/."""
        agent_id = "a" + f"{self.rng.getrandbits(64):016x}"
        prompt = "Investigate " + _prompt(self.rng)
        block = {"type": "tool_use", "id": f"toolu_01{self.rng.getrandbits(96):024x}", "name": "Task",
                 "input": {"description": "Investigate", "prompt": prompt, "subagent_type": "Explore"},
                 "caller": {"type": "direct"}}
        caller_uuid = self._assistant_blocks([block], "tool_use")
        side: list[bytes] = []
        saved_parent = self.parent
        self.parent = None
        first = self._envelope("user", sidechain=True, agent_id=agent_id, parent=None)
        first["message"] = {"role": "user", "content": prompt}
        self._emit(self._advance(first), side)
        for _ in range(self.rng.randrange(1, 4)):
            tool_block, text, result = self._tool_call(self.rng.choice(("Read", "Grep", "Bash")))
            used = self._assistant_blocks([tool_block], "tool_use", side, True, agent_id)
            self._tool_result(tool_block, text, result, used, into=side, sidechain=True, agent_id=agent_id)
        summary = f"Found the {self.rng.choice(_WORDS)} handling in three places."
        self._assistant_blocks([{"type": "text", "text": summary}], None, side, True, agent_id)
        self.side_files[f"{self.session_id}/subagents/agent-{agent_id}.jsonl"] = side
        self.parent = saved_parent
        progress = self._envelope("progress")
        copied = {"type": "assistant", "uuid": _uuid(self.rng), "timestamp": progress["timestamp"],
                  "message": {"role": "assistant", "content": [{"type": "text", "text": summary}]}}
        progress["data"] = {"type": "agent_progress", "agentId": agent_id, "prompt": prompt, "message": copied,
                            "normalizedMessages": []}
        progress["toolUseID"] = f"agent_msg_{self.rng.getrandbits(32):08x}"
        progress["parentToolUseID"] = block["id"]
        self._emit(progress)
        result = {"agentId": agent_id, "status": "completed", "prompt": prompt,
                  "content": [{"type": "text", "text": summary}], "totalDurationMs": self.rng.randrange(5000, 90000),
                  "totalTokens": self.rng.randrange(5000, 60000), "totalToolUseCount": 3}
        self._tool_result(block, summary, result, caller_uuid)

    def turn(self) -> None:
        """One human turn: prompt (or command), tool loop, final answer, turn_duration."""
        roll = self.rng.random()
        if roll < 0.08:
            self.slash_command()
        elif roll < 0.11:
            self.builtin_command()
            return
        else:
            self.user_prompt()
        for _ in range(self.rng.randrange(1, 7)):
            blocks: list[dict] = []
            if self.rng.random() < 0.3:
                blocks.append({"type": "thinking", "thinking": self.pools.slice(self.pools.raw, self.rng, 600),
                               "signature": self.pools.encrypted[: self.rng.randrange(300, 1200)]})
            if self.rng.random() < 0.5:
                blocks.append({"type": "text", "text": f"Let me look at the {self.rng.choice(_WORDS)} code."})
            if self.rng.random() < 0.02:
                self.sub_agent()
                continue
            tool = self.rng.choice(_TOOLS_WEIGHTED)
            block, text, result = self._tool_call(tool)
            blocks.append(block)
            used = self._assistant_blocks(blocks, "tool_use")
            if tool == "Bash" and self.rng.random() < 0.5:
                self._progress(block)
            failed = self.rng.random() < 0.03
            if failed:
                text, result = "Error: Exit code 1\n" + text[:2000], "Error: Exit code 1"
            self._tool_result(block, text, result, used, is_error=failed)
        answer = f"Done: I changed the {self.rng.choice(_WORDS)} handling and the tests pass. " \
                 + self.pools.slice(self.pools.raw, self.rng, int(self.rng.uniform(100, 1500)))
        self._assistant_blocks([{"type": "text", "text": answer}], None)
        duration = self._envelope("system")
        duration.update({"subtype": "turn_duration", "durationMs": self.rng.randrange(2000, 400000),
                         "isMeta": False})
        self._emit(self._advance(duration))


def _fill(writer: "_ClaudeWriter | _CodexWriter", budget: int) -> None:
    """Add turns until the session is about ``budget`` bytes (stop when half a mean turn short)."""
    turns = 0
    while turns == 0 or writer.size + writer.size / turns / 2 < budget:
        writer.turn()
        turns += 1


def _claude_session(index: int, seed: int, budget: int, root: Path) -> tuple[str, list[tuple[str, bytes]], int]:
    rng = random.Random(seed * 1_000_003 + index)
    pools = _pools(seed)
    project = index % PROJECT_COUNT
    cwd = f"/home/dev/proj{project}"
    session_id = _uuid(rng)
    start = CORPUS_END - timedelta(days=rng.uniform(0.2, CORPUS_DAYS))
    scale = min(1.0, max(0.15, budget / 400_000))
    writer = _ClaudeWriter(rng, pools, session_id, cwd, start, scale)
    _fill(writer, budget)
    directory = root / "claude" / "projects" / f"-home-dev-proj{project}"
    files = [(str(directory / f"{session_id}.jsonl"), b"\n".join(writer.lines) + b"\n")]
    for relative, lines in writer.side_files.items():
        files.append((str(directory / relative), b"\n".join(lines) + b"\n"))
    return "claude", files, writer.longest


# ---------------------------------------------------------------------------------------------
# Codex CLI rollouts


class _CodexWriter:
    VERSION = "0.77.0"

    def __init__(self, rng: random.Random, pools: TextPools, session_id: str, cwd: str,
                 start: datetime, scale: float) -> None:
        self.rng, self.pools, self.session_id, self.cwd, self.scale = rng, pools, session_id, cwd, scale
        self.clock = _Clock(start, rng)
        self.lines: list[bytes] = []
        self.size = 0
        self.longest = 0
        self.tokens = 0

    def _emit(self, kind: str, payload: dict) -> None:
        line = _dumps({"timestamp": self.clock.tick(0.05, 6.0), "type": kind, "payload": payload})
        self.longest = max(self.longest, len(line))
        self.lines.append(line)
        self.size += len(line) + 1

    def header(self) -> None:
        rng = self.rng
        self._emit("session_meta", {
            "id": self.session_id, "timestamp": _stamp(self.clock.now), "cwd": self.cwd,
            "originator": "codex_cli_rs", "cli_version": self.VERSION, "source": "cli",
            "model_provider": "openai",
            "instructions": "## Skills\n" + self.pools.slice(self.pools.raw, rng, 2500),
            "git": {"commit_hash": f"{rng.getrandbits(160):040x}", "branch": "main",
                    "repository_url": f"git@github.com:dev/{self.cwd.rsplit('/', 1)[-1]}.git"},
        })
        self._emit("response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": (
            f"# AGENTS.md instructions for {self.cwd}\n\n<INSTRUCTIONS>\n"
            + self.pools.slice(self.pools.raw, rng, 1500) + "\n</INSTRUCTIONS>")}]})
        self._emit("response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": (
            f"<environment_context>\n  <cwd>{self.cwd}</cwd>\n  <approval_policy>on-request</approval_policy>\n"
            "  <sandbox_mode>workspace-write</sandbox_mode>\n  <network_access>restricted</network_access>\n"
            "  <shell>bash</shell>\n</environment_context>")}]})

    def _token_count(self) -> None:
        self.tokens += self.rng.randrange(2000, 30000)
        usage = {"input_tokens": self.tokens, "cached_input_tokens": self.tokens // 2,
                 "output_tokens": self.tokens // 20, "reasoning_output_tokens": self.tokens // 40,
                 "total_tokens": self.tokens + self.tokens // 20}
        self._emit("event_msg", {"type": "token_count", "info": {
            "total_token_usage": usage, "last_token_usage": usage, "model_context_window": 272000},
            "rate_limits": {"primary": {"used_percent": 12.0, "window_minutes": 300, "resets_at": 1772470000},
                            "secondary": {"used_percent": 31.0, "window_minutes": 10080, "resets_at": 1772900000}}})

    def turn(self) -> None:
        rng, pools = self.rng, self.pools
        prompt = _prompt(rng)
        turn_id = f"{rng.getrandbits(32):08x}"
        self._emit("turn_context", {"turn_id": turn_id, "cwd": self.cwd, "approval_policy": "on-request",
                                    "sandbox_policy": {"type": "workspace-write", "network_access": False},
                                    "model": "gpt-5.1-codex", "effort": "high", "summary": "auto"})
        self._emit("event_msg", {"type": "task_started", "turn_id": turn_id, "model_context_window": 272000})
        self._emit("response_item", {"type": "message", "role": "user",
                                     "content": [{"type": "input_text", "text": prompt}]})
        self._emit("event_msg", {"type": "user_message", "message": prompt, "images": []})
        for _ in range(rng.randrange(1, 8)):
            heading = f"**Inspecting {rng.choice(_WORDS)} {rng.choice(_WORDS)}**"
            self._emit("response_item", {"type": "reasoning", "summary": [{"type": "summary_text", "text": heading}],
                                         "content": None,
                                         "encrypted_content": "gAAAAA" + pools.encrypted[: rng.randrange(2000, 9000)]})
            self._emit("event_msg", {"type": "agent_reasoning", "text": heading})
            call_id = f"call_{rng.getrandbits(96):024x}"
            if rng.random() < 0.15:
                patch = (f"*** Begin Patch\n*** Update File: src/{rng.choice(_WORDS)}.py\n@@\n-"
                         + pools.slice(pools.raw, rng, 400) + "\n+" + pools.slice(pools.raw, rng, 400)
                         + "\n*** End Patch")
                self._emit("response_item", {"type": "custom_tool_call", "status": "completed", "call_id": call_id,
                                             "name": "apply_patch", "input": patch})
                self._emit("response_item", {"type": "custom_tool_call_output", "call_id": call_id,
                                             "output": "Success. Updated the following files:\nM src/x.py"})
            else:
                command = rng.choice(("sed -n '1,400p' src/app.py", "pytest -q", "rg -n parser", "cat README.md"))
                self._emit("response_item", {"type": "function_call", "name": "shell", "call_id": call_id,
                                             "arguments": json.dumps({"command": ["bash", "-lc", command],
                                                                      "workdir": self.cwd})})
                output = pools.slice(pools.raw if "sed" in command or "cat" in command else pools.shell,
                                     rng, _payload_size(rng, self.scale))
                exit_code = 0 if rng.random() > 0.05 else 1
                self._emit("response_item", {"type": "function_call_output", "call_id": call_id, "output": json.dumps(
                    {"output": output, "metadata": {"exit_code": exit_code,
                                                    "duration_seconds": round(rng.uniform(0.01, 9), 2)}})})
            self._token_count()
        answer = f"I updated the {rng.choice(_WORDS)} handling; all tests pass. " \
                 + pools.slice(pools.raw, rng, int(rng.uniform(100, 1200)))
        self._emit("event_msg", {"type": "agent_message", "message": answer})
        self._emit("response_item", {"type": "message", "role": "assistant",
                                     "content": [{"type": "output_text", "text": answer}]})
        self._token_count()
        self._emit("event_msg", {"type": "task_complete", "turn_id": turn_id, "last_agent_message": answer})


def _codex_session(index: int, seed: int, budget: int, root: Path) -> tuple[str, list[tuple[str, bytes]], int]:
    rng = random.Random(seed * 1_000_003 + index)
    pools = _pools(seed)
    cwd = f"/home/dev/proj{index % PROJECT_COUNT}"
    start = CORPUS_END - timedelta(days=rng.uniform(0.2, CORPUS_DAYS))
    # Codex thread ids are UUIDv7; the leading 48 bits are milliseconds.
    millis = int(start.timestamp() * 1000)
    session_id = str(uuid.UUID(int=(millis << 80) | (0x7 << 76) | (rng.getrandbits(12) << 64)
                               | (0b10 << 62) | rng.getrandbits(62)))
    writer = _CodexWriter(rng, pools, session_id, cwd, start, min(1.0, max(0.15, budget / 400_000)))
    writer.header()
    _fill(writer, budget)
    name = f"rollout-{start.strftime('%Y-%m-%dT%H-%M-%S')}-{session_id}.jsonl"
    path = root / "codex" / "sessions" / start.strftime("%Y/%m/%d") / name
    return "codex", [(str(path), b"\n".join(writer.lines) + b"\n")], writer.longest


# ---------------------------------------------------------------------------------------------
# Corpus


def _budgets(sessions: int, target_bytes: int, seed: int) -> list[int]:
    """Per-session byte budgets: log-normal (a few huge sessions, many small), summing to the target."""
    rng = random.Random(seed)
    weights = [math.exp(rng.gauss(0.0, 1.1)) for _ in range(sessions)]
    scale = target_bytes / sum(weights)
    return [int(min(MAX_SESSION_BYTES, max(MIN_SESSION_BYTES, weight * scale))) for weight in weights]


def _write_session(job: tuple[int, int, int, str, bool]) -> tuple[str, list[tuple[str, int]], int]:
    index, seed, budget, root, codex = job
    maker = _codex_session if codex else _claude_session
    source, files, longest = maker(index, seed, budget, Path(root))
    written = []
    for path, data in files:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as handle:
            handle.write(data)
        written.append((path, len(data)))
    return source, written, longest


def _read_marker(root: Path) -> CorpusInfo | None:
    try:
        data = json.loads((root / MARKER_NAME).read_text())
        return CorpusInfo(**data)
    except (OSError, ValueError, TypeError):
        return None


def generate_corpus(out: str | os.PathLike[str] | None = None, *, sessions: int = DEFAULT_SESSIONS,
                    target_mb: float = DEFAULT_TARGET_MB, seed: int = 7, workers: int | None = None,
                    log=print) -> CorpusInfo:
    """Write (or reuse) a corpus under ``out`` and return what it holds.

    sessions: number of session files (Claude main transcripts + Codex rollouts; sub-agent files extra).
    target_mb: approximate total size in MB (10**6 bytes); the result usually lands 5-15% above it
    (small sessions are padded to a minimum size and the last turn of a session overshoots).
    out: directory; a fresh temp dir when None. If ``out/corpus.json`` records the same sessions,
    target_mb, seed and format, the corpus is reused as is. An existing non-empty ``out`` without
    the marker raises FileExistsError (nothing is deleted that this function did not write).
    workers: processes used to write (default: CPU count).
    """
    root = Path(out) if out else Path(tempfile.mkdtemp(prefix="skillopt-corpus-"))
    marker = _read_marker(root)
    if marker and (marker.sessions, marker.target_mb, marker.seed, marker.format) == (
            sessions, float(target_mb), seed, CORPUS_FORMAT) and all(os.path.exists(f) for f in marker.files[:50]):
        log(f"corpus: reusing {root} ({marker.total_bytes / 1e6:.0f} MB, {marker.sessions} sessions)")
        return marker
    if marker:
        for child in ("claude", "codex"):
            shutil.rmtree(root / child, ignore_errors=True)
        (root / MARKER_NAME).unlink()
    elif root.exists() and any(root.iterdir()):
        raise FileExistsError(f"{root} is not empty and has no {MARKER_NAME}; choose another --out")
    root.mkdir(parents=True, exist_ok=True)

    started = time.perf_counter()
    budgets = _budgets(sessions, int(target_mb * 1e6), seed)
    codex_rng = random.Random(seed + 1)
    jobs = [(index, seed, budget, str(root), codex_rng.random() < CODEX_SHARE)
            for index, budget in enumerate(budgets)]
    info = CorpusInfo(root=str(root), sessions=sessions, target_mb=float(target_mb), seed=seed,
                      claude_home=str(root / "claude"), codex_home=str(root / "codex"))
    workers = workers or os.cpu_count() or 1
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for source, written, longest in pool.map(_write_session, jobs, chunksize=4):
            info.longest_line = max(info.longest_line, longest)
            for number, (path, size) in enumerate(written):
                info.files.append(path)
                if source == "codex":
                    info.codex_bytes += size
                else:
                    info.claude_bytes += size
                if number > 0:
                    info.sidechain_files += 1
            if source == "codex":
                info.codex_sessions += 1
            else:
                info.claude_sessions += 1
    info.generation_s = round(time.perf_counter() - started, 2)
    (root / MARKER_NAME).write_text(json.dumps(asdict(info)))
    log(f"corpus: wrote {root} ({info.total_bytes / 1e6:.0f} MB, {info.claude_sessions} Claude + "
        f"{info.codex_sessions} Codex sessions, {info.sidechain_files} sub-agent files) in {info.generation_s:.1f} s")
    return info


# ---------------------------------------------------------------------------------------------
# Growth: append new turns to a few files, then restore them


def _last_line(path: str) -> bytes:
    """The last complete line of a file, read backwards in chunks (lines can be 600 KB)."""
    with open(path, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        end = handle.tell()
        position, tail = end, b""
        while position > 0:
            step = min(65536, position)
            position -= step
            handle.seek(position)
            tail = handle.read(step) + tail
            stripped = tail.rstrip(b"\n")
            cut = stripped.rfind(b"\n")
            if cut >= 0:
                return stripped[cut + 1:]
        return tail.rstrip(b"\n")


def _appended_turns(path: str, rng: random.Random, pools: TextPools) -> bytes:
    last = json.loads(_last_line(path))
    moment = datetime.strptime(last["timestamp"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    moment += timedelta(hours=rng.uniform(1, 20))
    scale = 0.5
    if "/codex/" in path:
        writer: _ClaudeWriter | _CodexWriter = _CodexWriter(rng, pools, "", "", moment, scale)
        meta = json.loads(_first_line(path))["payload"]
        writer.session_id, writer.cwd = meta["id"], meta["cwd"]
    else:
        writer = _ClaudeWriter(rng, pools, last["sessionId"], last["cwd"], moment, scale)
        writer.parent = last.get("uuid")
    for _ in range(rng.randrange(1, 3)):
        writer.turn()
    return b"\n".join(writer.lines) + b"\n"


def _first_line(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.readline()


def grow_files(info: CorpusInfo, *, fraction: float = 0.01, seed: int = 11) -> list[tuple[str, int]]:
    """Append one or two new turns to ``fraction`` of the session files (at least one).

    Returns [(path, size before growth)] so that ``restore_files`` can undo it.
    Sub-agent files are not chosen (a new turn belongs to a main transcript).
    """
    rng = random.Random(seed)
    candidates = sorted(info.main_files())
    chosen = rng.sample(candidates, max(1, round(len(candidates) * fraction)))
    pools = _pools(info.seed)
    grown = []
    for path in chosen:
        before = os.path.getsize(path)
        data = _appended_turns(path, rng, pools)
        with open(path, "ab") as handle:
            handle.write(data)
        grown.append((path, before))
    return grown


def restore_files(grown: list[tuple[str, int]]) -> None:
    """Truncate grown files back to their recorded sizes."""
    for path, size in grown:
        os.truncate(path, size)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=None, help=f"session files (default {DEFAULT_SESSIONS})")
    parser.add_argument("--target-mb", type=float, default=None, help=f"total MB (default {DEFAULT_TARGET_MB:.0f})")
    parser.add_argument("--quick", action="store_true",
                        help=f"smoke size: {QUICK_SESSIONS} sessions, {QUICK_TARGET_MB:.0f} MB")
    parser.add_argument("--out", default=None, help="output directory (default: a new temp dir)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    sessions = args.sessions or (QUICK_SESSIONS if args.quick else DEFAULT_SESSIONS)
    target_mb = args.target_mb or (QUICK_TARGET_MB if args.quick else DEFAULT_TARGET_MB)
    info = generate_corpus(args.out, sessions=sessions, target_mb=target_mb, seed=args.seed)
    print(json.dumps({key: value for key, value in asdict(info).items() if key != "files"}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
