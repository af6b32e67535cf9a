"""The skill document and the memory documents a night may edit (the managed targets).

Each agent reads its own memory file (``MEMORY_FILES``, relative to the project):

===========  =====================================  ==========================================================
source       memory file                            notes
===========  =====================================  ==========================================================
claude       ``CLAUDE.md``                          also the skill ``.claude/skills/skillopt-sleep/SKILL.md``
codex        ``AGENTS.md``
gemini       ``GEMINI.md``
copilot      ``.github/copilot-instructions.md``
opencode     ``AGENTS.md``
cursor       ``.cursor/rules/skillopt-sleep.mdc``   a new file gets MDC frontmatter (``alwaysApply: true``)
aider        ``CONVENTIONS.md``                     Aider reads it only when started with ``--read CONVENTIONS.md``
cline        ``.clinerules/skillopt-sleep.md``
===========  =====================================  ==========================================================

The agents written (``targets``, default: every source read tonight, in ``SOURCE_NAMES`` order) share what a night
learns: the first one's file is *the* memory (``memory_path`` overrides it), replayed and edited by the step; every
other agent's file is a *mirror* (document kind ``memory:<source>``) that receives the memory's managed block when
a candidate is staged (``mirror_candidates``), its text outside the block left as it is. Adoption and revert cover
all of them as one change. A missing document is never created by a night: it exists only in the proposal, and
only when an accepted edit changes it.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path

from skillopt_sleep.documents.block import (
    ensure_block,
    managed_block_segments,
    managed_block_sha256,
    new_skill_document,
    raw_block,
    without_marks,
)
from skillopt_sleep.errors import SleepError
from skillopt_sleep.fsio import write_text_atomic
from skillopt_sleep.hashing import sha256_text

DEFAULT_SKILL_PATH = ".claude/skills/skillopt-sleep/SKILL.md"
#: The memory file each agent reads, relative to the project.
MEMORY_FILES: dict[str, str] = {
    "claude": "CLAUDE.md",
    "codex": "AGENTS.md",
    "gemini": "GEMINI.md",
    "copilot": ".github/copilot-instructions.md",
    "opencode": "AGENTS.md",
    "cursor": ".cursor/rules/skillopt-sleep.mdc",
    "aider": "CONVENTIONS.md",
    "cline": ".clinerules/skillopt-sleep.md",
}
#: What the night's summary says when it stages Aider's file (Aider does not read it unless told to).
AIDER_NOTE = "Aider reads CONVENTIONS.md only when started with `--read CONVENTIONS.md` (or `read:` in .aider.conf.yml)"
#: The frontmatter a new Cursor rule file starts with (without it Cursor does not apply the rule to every request).
MDC_FRONTMATTER = ("---\ndescription: House rules learned from this project's agent sessions by skillopt-sleep\n"
                   "alwaysApply: true\n---\n\n")
SKILL_NAME = "skillopt-sleep"
SKILL_DESCRIPTION = (
    "House rules and procedures learned from this project's own agent sessions by skillopt-sleep. "
    "Use for every task in this repository."
)
#: Most characters of one document shown to the target model (prompt size stays bounded).
MAX_DOCUMENT_CHARS = 6000
#: The lines this tool writes when it creates a document: a new skill document's frontmatter, title and note
#: (``block.new_skill_document``), a new Cursor rule's frontmatter. Never words the document's authors wrote.
TOOL_LINES = frozenset(line.strip() for line in
                       (new_skill_document(SKILL_NAME, SKILL_DESCRIPTION) + MDC_FRONTMATTER).splitlines()
                       if line.strip())


def authors_text(document: str) -> str:
    """``document`` without what this tool wrote into it: the managed block's marks (``block.without_marks``) and
    the scaffold of a document it created (``TOOL_LINES``). What is left is what the document's authors wrote, which
    an edit may name (``mine.provenance.UserText``): world 2 on Qwen (``a149cdc``) wrote "- Use `skillopt-sleep` for
    all tasks in this project." because the new SKILL.md's own ``name: skillopt-sleep`` counted as theirs."""
    return "\n".join(line for line in without_marks(document).splitlines() if line.strip() not in TOOL_LINES)


@dataclass
class Document:
    """One managed target. ``text`` is the live content ("" when the file does not exist yet)."""

    kind: str  # "skill" | "memory" | "memory:<agent>" (a mirror)
    path: Path
    text: str
    exists: bool
    sha256: str | None = None
    evolve: bool = True
    baseline_text: str = field(default="")

    @property
    def display(self) -> str:
        return str(self.path)


def read_document(path: Path) -> str:
    """Return a document's text exactly as stored (UTF-8, line endings kept: ``\r\n`` stays ``\r\n``).

    Bytes that are not UTF-8 become U+FFFD. Raises OSError when the file cannot be read.
    """
    with open(path, encoding="utf-8", errors="replace", newline="") as handle:
        return handle.read()


def written_agents(sources: list[str], targets: list[str] | None = None) -> list[str]:
    """The agents whose memory files a night writes, in ``MEMORY_FILES`` order: ``targets`` when given, else the
    harvested ``sources`` (``claude`` when there are none)."""
    chosen = set(targets or sources or ["claude"])
    return [name for name in MEMORY_FILES if name in chosen]


def target_paths(project: Path, sources: list[str], skill_path: str | None, memory_path: str | None,
                 targets: list[str] | None = None) -> tuple[Path | None, Path]:
    """Return ``(skill path or None, memory path)`` for a project, the harvested sources and the ``targets``
    setting: the skill document when Claude Code is written (or ``skill_path`` is set); the memory: ``memory_path``,
    else the first written agent's file."""
    agents = written_agents(sources, targets)
    if skill_path:
        skill = project / skill_path
    else:
        skill = project / DEFAULT_SKILL_PATH if "claude" in agents else None
    memory = project / (memory_path or MEMORY_FILES[agents[0]])
    return skill, memory


def mirror_paths(project: Path, sources: list[str], memory_path: str | None,
                 targets: list[str] | None = None) -> dict[str, Path]:
    """Agent -> memory file of every written agent but the first (whose file is the memory, or ``memory_path``
    instead), one per distinct file."""
    memory = target_paths(project, sources, None, memory_path, targets)[1]
    out: dict[str, Path] = {}
    for agent in written_agents(sources, targets)[1:]:
        path = project / MEMORY_FILES[agent]
        if path != memory and path not in out.values():
            out[agent] = path
    return out


def mirror_text(live: str, memory: str, path: Path) -> str | None:
    """A mirror document carrying ``memory``'s managed block: ``live`` (or a new file: MDC frontmatter for a
    ``.mdc`` rule) with its managed block replaced, everything else kept byte for byte. None when ``memory`` has no
    managed block. Raises SleepError for malformed markers in either."""
    source = managed_block_segments(memory)
    if source is None:
        return None
    base = live if live else (MDC_FRONTMATTER if path.suffix == ".mdc" else "")
    target = managed_block_segments(base) or managed_block_segments(ensure_block(base))
    assert target is not None
    before, _, after = target
    return before + source[1] + after


def mirror_candidates(documents: dict[str, Document], candidate: dict[str, str]) -> dict[str, str]:
    """``candidate`` plus, for every mirror document (kind ``memory:<agent>``), its text carrying the candidate
    memory's managed block (``mirror_text``). Mirrors that may not evolve, or a candidate without a memory, add
    nothing."""
    out = dict(candidate)
    memory = candidate.get("memory")
    if memory is None:
        return out
    for kind, document in documents.items():
        if kind.startswith("memory:") and document.evolve:
            mirrored = mirror_text(document.text, memory, document.path)
            if mirrored is not None:
                out[kind] = mirrored
    return out


def is_within(path: Path, root: Path) -> bool:
    """True when ``path`` is ``root`` or lies below it, compared by path components (``/a/bc`` is not below
    ``/a/b``) and as given: resolve both first where symlinks must be followed. The one containment test of the
    package (the managed targets here, the adopted and reverted files in ``review/adopt.py``)."""
    return path.is_relative_to(root)


def via_symlink(path: Path, project: Path) -> bool:
    """True when ``path`` or one of its folders below ``project`` (as written, not resolved) is a symlink: how a
    refusal explains a target that resolves outside the project."""
    return any(part.is_symlink() for part in (path, *path.parents) if is_within(part, project) and part != project)


def check_target(project: Path, path: Path) -> None:
    """Refuse a target that is not a file inside the project, judged on its fully resolved path (``Path.resolve``:
    symlinks followed as far as the path exists, ``..`` applied to the parts that do not exist yet, so a folder
    still to be created cannot lead outside). Raises SleepError."""
    resolved_project = project.resolve()
    real = path.resolve()
    if real == resolved_project or not is_within(real, resolved_project):
        what = "a symlink that points outside" if via_symlink(path, project) else "outside"
        raise SleepError(f"refusing to manage {path}: it is {what} the project {resolved_project} (it resolves to "
                         f"{real})")
    if real.is_dir():
        raise SleepError(f"refusing to manage {path}: it is a directory")


def load_documents(project: Path, sources: list[str], *, skill_path: str | None, memory_path: str | None,
                   evolve_skill: bool, evolve_memory: bool, targets: list[str] | None = None) -> dict[str, Document]:
    """Read the managed targets. Returns ``{"skill": Document, "memory": Document, "memory:<agent>": Document, ...}``
    (skill absent unless Claude Code is written; one ``memory:<agent>`` mirror per other written agent's file).

    A missing skill document starts as a fresh SKILL.md (valid frontmatter, empty managed block) in memory only; a
    missing Cursor rule file (``.mdc``) starts with ``MDC_FRONTMATTER``.
    Raises SleepError for a target outside the project or a symlink pointing elsewhere.
    """
    skill, memory = target_paths(project, sources, skill_path, memory_path, targets)
    documents: dict[str, Document] = {}
    mirrors = [(f"memory:{agent}", path, evolve_memory)
               for agent, path in mirror_paths(project, sources, memory_path, targets).items()]
    for kind, path, evolve in (("skill", skill, evolve_skill), ("memory", memory, evolve_memory), *mirrors):
        if path is None:
            continue
        check_target(project, path)
        exists = path.exists()
        text = read_document(path) if exists else ""
        baseline = text
        if kind == "skill" and not exists:
            baseline = new_skill_document(SKILL_NAME, SKILL_DESCRIPTION)
        elif not exists and path.suffix == ".mdc":
            baseline = MDC_FRONTMATTER
        documents[kind] = Document(kind=kind, path=path, text=text, exists=exists,
                                   sha256=sha256_text(text) if exists else None, evolve=evolve,
                                   baseline_text=baseline)
    return documents


def prompt_views(documents: dict[str, str | None]) -> dict[str, str]:
    """``{"skill": ..., "memory": ...}``: the ``prompt_view`` of each document (a missing one is ``""``), as
    ``replay_tasks`` takes them."""
    return {"skill": prompt_view(documents.get("skill") or ""), "memory": prompt_view(documents.get("memory") or "")}


def prompt_view(text: str) -> str:
    """Return the part of a document shown to the target, about MAX_DOCUMENT_CHARS long.

    The managed block (what the nights learned) is always shown whole; the rest of a long document is cut from
    its end, so a rule learned at the bottom of a long CLAUDE.md is never hidden from the target.
    """
    if len(text) <= MAX_DOCUMENT_CHARS:
        return text
    marker = "\n[... document truncated ...]\n"
    try:
        segments = managed_block_segments(text)
    except SleepError:
        segments = None
    if segments is None:
        return text[:MAX_DOCUMENT_CHARS] + marker
    before, block, after = segments
    room = max(0, MAX_DOCUMENT_CHARS - len(block))
    head = before[:room]
    tail = after[: max(0, room - len(head))]
    return (head + (marker if len(head) < len(before) else "") + block + tail
            + (marker if len(tail) < len(after) else ""))


def unified_diff(before: str, after: str, name: str) -> str:
    return "".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                        fromfile=f"a/{name}", tofile=f"b/{name}"))


def stage_proposal(night_dir: Path, documents: dict[str, Document], candidate: dict[str, str]) -> list[dict]:
    """Write ``proposed/<name>`` (only documents that changed), a ``.diff`` beside each, and ``manifest.json``.

    Each manifest entry: kind, target (absolute path), file (name under proposed/), live_sha256 (of the live
    file the proposal was computed from; None if it did not exist), live_block_sha256 (of that file's raw managed
    block; None if it had none), live_block (that raw block itself, markers included, or None: ``adopt`` re-applies
    the night's change of the block onto a live file edited or adopted into since, ``documents.merge.merge_block``),
    proposed_sha256. Returns the entries.
    """
    from skillopt_sleep.fsio import write_json_atomic

    entries = []
    proposed_dir = night_dir / "proposed"
    for kind, document in documents.items():
        new_text = candidate.get(kind)
        if new_text is None or new_text == document.text or new_text == document.baseline_text:
            continue
        name = "SKILL.md" if kind == "skill" else document.path.name
        if any(entry["file"] == name for entry in entries):  # two agents' files of one name: keep both
            name = f"{kind.replace(':', '-')}-{name}"
        write_text_atomic(proposed_dir / name, new_text, mode=0o600)
        write_text_atomic(proposed_dir / f"{name}.diff", unified_diff(document.text, new_text, name), mode=0o600)
        entries.append({
            "kind": kind,
            "target": str(document.path),
            "file": name,
            "live_sha256": document.sha256,
            "live_block_sha256": managed_block_sha256(document.text) if document.exists else None,
            "live_block": raw_block(document.text) if document.exists else None,
            "proposed_sha256": sha256_text(new_text),
        })
    if entries:
        write_json_atomic(proposed_dir / "manifest.json", {"format": "skillopt-sleep-proposal/1",
                                                           "documents": entries}, mode=0o600)
    return entries
