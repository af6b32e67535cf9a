"""Fake agent CLIs (``tests/fixtures/fake_bins/<name>``) put first on PATH, for the CLI backend tests.

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
