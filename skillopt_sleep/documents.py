"""The skill document and the memory document a night may edit (the managed targets).

Defaults (paths relative to the project; configurable with ``skill_path`` / ``memory_path``):

=============  ===============================================  ============
source         skill document                                   memory
=============  ===============================================  ============
Claude Code    ``.claude/skills/skillopt-sleep/SKILL.md``        ``CLAUDE.md``
Codex CLI      (none)                                           ``AGENTS.md``
=============  ===============================================  ============

When both sources are harvested, Claude Code's targets are used. A missing document is never created by a
night: it exists only in the proposal, and only when an accepted edit changes it.
"""

from __future__ import annotations

import difflib
import hashlib
import shutil
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from skillopt_sleep.engine.edits import new_skill_document
from skillopt_sleep.errors import SleepError
from skillopt_sleep.fsio import write_text_atomic

DEFAULT_SKILL_PATH = ".claude/skills/skillopt-sleep/SKILL.md"
SKILL_NAME = "skillopt-sleep"
SKILL_DESCRIPTION = (
    "House rules and procedures learned from this project's own agent sessions by skillopt-sleep. "
    "Use for every task in this repository."
)
#: Most characters of one document shown to the target model (prompt size stays bounded).
MAX_DOCUMENT_CHARS = 6000


@dataclass
class Document:
    """One managed target. ``text`` is the live content ("" when the file does not exist yet)."""

    kind: str  # "skill" | "memory"
    path: Path
    text: str
    exists: bool
    sha256: str | None = None
    evolve: bool = True
    baseline_text: str = field(default="")

    @property
    def display(self) -> str:
        return str(self.path)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def target_paths(project: Path, sources: list[str], skill_path: str | None, memory_path: str | None
                 ) -> tuple[Path | None, Path]:
    """Return ``(skill path or None, memory path)`` for a project and the harvested sources."""
    claude = "claude" in sources or not sources
    if skill_path:
        skill = project / skill_path
    else:
        skill = project / DEFAULT_SKILL_PATH if claude else None
    memory = project / (memory_path or ("CLAUDE.md" if claude else "AGENTS.md"))
    return skill, memory


def _check_target(project: Path, path: Path) -> None:
    """Refuse a target outside the project or a symlink that points elsewhere. Raises SleepError."""
    resolved_project = project.resolve()
    if path.is_symlink() and not str(path.resolve()).startswith(str(resolved_project) + "/"):
        raise SleepError(f"refusing to manage {path}: it is a symlink that points outside {resolved_project}")
    parent = path.parent.resolve() if path.parent.exists() else path.parent
    if not (str(parent) + "/").startswith(str(resolved_project) + "/") and parent != resolved_project:
        raise SleepError(f"refusing to manage {path}: it is outside the project {resolved_project}")


def load_documents(project: Path, sources: list[str], *, skill_path: str | None, memory_path: str | None,
                   evolve_skill: bool, evolve_memory: bool) -> dict[str, Document]:
    """Read the managed targets. Returns ``{"skill": Document, "memory": Document}`` (skill absent for Codex).

    A missing skill document starts as a fresh SKILL.md (valid frontmatter, empty managed block) in memory only.
    Raises SleepError for a target outside the project or a symlink pointing elsewhere.
    """
    skill, memory = target_paths(project, sources, skill_path, memory_path)
    documents: dict[str, Document] = {}
    for kind, path, evolve in (("skill", skill, evolve_skill), ("memory", memory, evolve_memory)):
        if path is None:
            continue
        _check_target(project, path)
        exists = path.exists()
        text = path.read_text("utf-8", errors="replace") if exists else ""
        baseline = text
        if kind == "skill" and not exists:
            baseline = new_skill_document(SKILL_NAME, SKILL_DESCRIPTION)
        documents[kind] = Document(kind=kind, path=path, text=text, exists=exists,
                                   sha256=sha256_text(text) if exists else None, evolve=evolve,
                                   baseline_text=baseline)
    return documents


def prompt_view(text: str) -> str:
    """Return the part of a document shown to the target (the head, bounded to MAX_DOCUMENT_CHARS)."""
    if len(text) <= MAX_DOCUMENT_CHARS:
        return text
    return text[:MAX_DOCUMENT_CHARS] + "\n[... document truncated ...]\n"


def unified_diff(before: str, after: str, name: str) -> str:
    return "".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                        fromfile=f"a/{name}", tofile=f"b/{name}"))


def stage_proposal(night_dir: Path, documents: dict[str, Document], candidate: dict[str, str]) -> list[dict]:
    """Write ``proposed/<name>`` (only documents that changed), a ``.diff`` beside each, and ``manifest.json``.

    Each manifest entry: kind, target (absolute path), file (name under proposed/), live_sha256 (of the live
    file the proposal was computed from; None if it did not exist), proposed_sha256. Returns the entries.
    """
    from skillopt_sleep.fsio import write_json_atomic

    entries = []
    proposed_dir = night_dir / "proposed"
    for kind, document in documents.items():
        new_text = candidate.get(kind)
        if new_text is None or new_text == document.text or new_text == document.baseline_text:
            continue
        name = "SKILL.md" if kind == "skill" else document.path.name
        write_text_atomic(proposed_dir / name, new_text, mode=0o600)
        write_text_atomic(proposed_dir / f"{name}.diff", unified_diff(document.text, new_text, name), mode=0o600)
        entries.append({
            "kind": kind,
            "target": str(document.path),
            "file": name,
            "live_sha256": document.sha256,
            "proposed_sha256": sha256_text(new_text),
        })
    if entries:
        write_json_atomic(proposed_dir / "manifest.json", {"format": "skillopt-sleep-proposal/1",
                                                           "documents": entries}, mode=0o600)
    return entries


def apply_proposal(night_dir: Path, entries: list[dict], backup_dir: Path) -> list[str]:
    """Write staged documents onto the live targets atomically, keeping a backup of each live file.

    Refuses (SleepError, nothing written) when a live file changed since the proposal was computed.
    Returns the paths written.
    """
    for entry in entries:
        target = Path(entry["target"])
        live = target.read_text("utf-8", errors="replace") if target.exists() else None
        live_sha = sha256_text(live) if live is not None else None
        if live_sha != entry["live_sha256"]:
            raise SleepError(f"{target} changed since the proposal was computed; not applying "
                             f"(review {night_dir / 'proposed' / entry['file']})")
    written = []
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    for entry in entries:
        target = Path(entry["target"])
        if target.exists():
            backup = backup_dir / stamp / entry["file"]
            backup.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            shutil.copy2(target, backup)
        text = (night_dir / "proposed" / entry["file"]).read_text("utf-8")
        write_text_atomic(target, text, mode=None if target.exists() else 0o644)
        written.append(str(target))
    return written
