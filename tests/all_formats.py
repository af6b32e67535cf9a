"""The real transcripts of ``tests/fixtures/transcripts/`` (PROVENANCE.md there), laid out in each agent's folders
under one directory, for the harvest fuzz tests: every format's files in one ``harvest(source="all")`` run."""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "transcripts"


@dataclass(frozen=True)
class Target:
    """One file a fuzz example may mutate: its source, its path, and the prefix of the ``Session.path`` of every
    session it may change (the file itself, a Cline task folder, an OpenCode store)."""

    source: str
    path: Path
    affects: str


def lay_out(base: Path) -> tuple[dict[str, Path], list[Target]]:
    """Copy the fixtures of all eight formats under ``base``; return (``homes`` for ``harvest``, the targets)."""
    targets: list[Target] = []

    def put(source: str, fixture: Path, path: Path, affects: Path | None = None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(fixture, path)
        targets.append(Target(source, path, str(affects or path)))

    claude = base / "claude"
    for number, real in enumerate(sorted((FIXTURES / "claude_code").glob("*.jsonl"))):
        put("claude", real, claude / "projects" / "-work-app" / f"{number:08d}-0000-4000-8000-000000000000.jsonl")
    codex = base / "codex"
    for number, real in enumerate(sorted((FIXTURES / "codex").glob("*.jsonl"))):
        put("codex", real, codex / "sessions" / "2025" / "11" / "17" /
            f"rollout-2025-11-17T15-30-0{number}-019a93b9-f380-7600-98ff-94{number:02d}e6b99603c.jsonl")
    gemini = base / "gemini"
    chats = gemini / "tmp" / hashlib.sha256(b"/work/app").hexdigest() / "chats"
    for number, real in enumerate(sorted((FIXTURES / "gemini_cli").glob("*.json*"))):
        put("gemini", real, chats / f"session-2026-05-01T10-0{number}-a{number}b{number}{real.suffix}")
    copilot = base / "copilot"
    for number, real in enumerate(sorted((FIXTURES / "copilot_cli").glob("*.jsonl"))):
        folder = copilot / "session-state" / f"0000000{number}-aaaa-4bbb-8ccc-dddddddddddd"
        put("copilot", real, folder / "events.jsonl")
    for real in sorted((FIXTURES / "copilot_cli").glob("*.json")):
        put("copilot", real, copilot / "history-session-state" / "11111111-aaaa-4bbb-8ccc-dddddddddddd.json")
    cursor = base / "cursor"
    transcripts = cursor / "projects" / "work-app" / "agent-transcripts"
    put("cursor", FIXTURES / "cursor" / "fnvtk__karuo-ai__cf7a11df-64d9-44aa-acce-4957276b62f0.txt",
        transcripts / "cf7a11df-64d9-44aa-acce-4957276b62f0.txt")
    for number, real in enumerate(sorted((FIXTURES / "cursor").glob("*.jsonl"))):
        session = f"2222222{number}-aaaa-4bbb-8ccc-dddddddddddd"
        put("cursor", real, transcripts / session / f"{session}.jsonl")
    aider = base / "aider"
    real = sorted((FIXTURES / "aider").glob("*.md"))
    put("aider", [path for path in real if not path.name.startswith("PROVENANCE")][0],
        aider / ".aider.chat.history.md")
    cline = base / "cline"
    for extension, task, prefix in (("saoudrizwan.claude-dev", "1760000000000", "gmfstu__Online-Card-Architecture__"),
                                    ("rooveterinaryinc.roo-cline", "bc93a6f7-0000-4000-8000-000000000000",
                                     "jsboige__jsboige-mcp-servers__roo-bc93a6f7__")):
        folder = cline / extension / "tasks" / task
        for real in sorted((FIXTURES / "cline").glob(prefix + "*.json")):
            put("cline", real, folder / real.name[len(prefix):], affects=folder)
    opencode = base / "opencode"
    database = opencode / "opencode.db"
    put("opencode", next((FIXTURES / "opencode").glob("*.db")), database)
    tree = opencode / "storage"
    for real in sorted((FIXTURES / "opencode").glob("*storage_v2*/**/*.json")):
        relative = real.relative_to(next((FIXTURES / "opencode").glob("*storage_v2*")))
        put("opencode", real, tree / relative, affects=tree)
    homes = {"claude": claude, "codex": codex, "gemini": gemini, "copilot": copilot, "cursor": cursor,
             "aider": aider, "cline": cline, "opencode": opencode}
    return homes, targets
