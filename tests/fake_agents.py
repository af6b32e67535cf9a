"""Fake agent CLIs (``tests/fixtures/fake_bins/<name>``) put first on PATH, for the CLI backend tests, and what those
tests share besides: ``request`` (a ``ChatRequest`` with a system and a user message) and ``alive`` (is a pid
running, for the tests that kill a hung CLI).

The fakes record what they received (argv, stdin, cwd, env) to ``$FAKE_AGENT_RECORD`` and misbehave on request
(``$FAKE_AGENT_MODE``): fail auth, exit non-zero, hang, print garbage, reject a flag.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from skillopt_sleep.backends.base import ChatMessage, ChatRequest
from skillopt_sleep.schedule.daemon import pid_alive

FAKE_BINS = Path(__file__).parent / "fixtures" / "fake_bins"


@dataclass
class FakeAgents:
    bin_dir: Path
    record: Path
    pids_file: Path
    monkeypatch: pytest.MonkeyPatch
    home: Path | None = None

    def mode(self, mode: str, **env: str) -> None:
        self.monkeypatch.setenv("FAKE_AGENT_MODE", mode)
        for key, value in env.items():
            self.monkeypatch.setenv(key, value)

    def calls(self) -> list[dict]:
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines()]

    def pids(self) -> list[int]:
        return [int(pid) for line in self.pids_file.read_text().splitlines() for pid in line.split()]


def install_fake_agents(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, names: list[str]) -> FakeAgents:
    """Copy the fakes ``names`` into ``tmp_path/bin`` (run by this interpreter, whatever PATH says), put that
    directory first on PATH and point their record, pid and counter files into ``tmp_path``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in names:
        body = (FAKE_BINS / name).read_text(encoding="utf-8").split("\n", 1)[1]
        target = bin_dir / name
        target.write_text(f"#!{sys.executable}\n{body}", encoding="utf-8")
        target.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("FAKE_AGENT_RECORD", str(tmp_path / "record.jsonl"))
    monkeypatch.setenv("FAKE_AGENT_PIDS", str(tmp_path / "pids.txt"))
    monkeypatch.setenv("FAKE_AGENT_COUNTER", str(tmp_path / "counter.txt"))
    monkeypatch.delenv("FAKE_AGENT_MODE", raising=False)
    monkeypatch.delenv("FAKE_AGENT_REPLY", raising=False)
    return FakeAgents(bin_dir, tmp_path / "record.jsonl", tmp_path / "pids.txt", monkeypatch)


def request(user: str = "Summarize the diff in one line.", *, system: str | None = "You follow SKILL.md.",
            role: str = "target", schema: dict | None = None) -> ChatRequest:
    """A ``ChatRequest`` for ``role``: the system message (when given), then the user message."""
    messages = [ChatMessage(role="system", content=system)] if system else []
    messages.append(ChatMessage(role="user", content=user))
    return ChatRequest(role=role, messages=messages, json_schema=schema)


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting for its parent to reap it counts as dead, where ``/proc`` says so)."""
    stat = Path(f"/proc/{pid}/stat")
    if Path("/proc/self").exists():
        try:
            return stat.read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
        except (OSError, IndexError):
            return False
    return pid_alive(pid)
