"""Every agent's own memory file: which files a night writes, how mirrors get the memory's managed block, and
adopt/revert over all of them as one change (real staging, real adoption, real files)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from skillopt_sleep.documents.block import BLOCK_BEGIN, BLOCK_END, ensure_block
from skillopt_sleep.documents.targets import (
    MDC_FRONTMATTER,
    MEMORY_FILES,
    load_documents,
    mirror_candidates,
    mirror_paths,
    mirror_text,
    stage_proposal,
    target_paths,
    written_agents,
)
from skillopt_sleep.engine.edits import apply_edits
from skillopt_sleep.fsio import write_json_atomic
from skillopt_sleep.models import Diagnostics, EditRecord
from skillopt_sleep.review.adopt import adopt_night, revert_adoption
from skillopt_sleep.state import ProjectPaths

RULE = "we use pnpm in this repo, never npm."


def with_rule(text: str) -> str:
    new, records = apply_edits(ensure_block(text), [EditRecord(target="memory", op="append", content=f"- {RULE}")],
                               "memory")
    assert records[0].status == "applied"
    return new


@pytest.mark.parametrize("sources, targets, memory, mirrors", [
    (["claude"], None, "CLAUDE.md", []),
    (["codex", "claude"], None, "CLAUDE.md", ["AGENTS.md"]),
    (["codex", "opencode"], None, "AGENTS.md", []),  # two agents, one file
    (["aider"], None, "CONVENTIONS.md", []),
    (["cline", "cursor", "copilot", "gemini"], None, "GEMINI.md",  # in MEMORY_FILES order, not as read
     [".github/copilot-instructions.md", ".cursor/rules/skillopt-sleep.mdc", ".clinerules/skillopt-sleep.md"]),
    (["claude", "gemini"], ["aider"], "CONVENTIONS.md", []),  # targets win over the sources read
    ([], None, "CLAUDE.md", []),
])
def test_which_files_a_night_writes(tmp_path, sources, targets, memory, mirrors):
    skill, primary = target_paths(tmp_path, sources, None, None, targets)
    assert primary == tmp_path / memory
    assert sorted(str(p.relative_to(tmp_path)) for p in mirror_paths(tmp_path, sources, None, targets).values()) \
        == sorted(mirrors)
    assert (skill is not None) == ("claude" in written_agents(sources, targets))


def test_memory_path_replaces_the_first_agents_file_and_keeps_the_others(tmp_path):
    _, primary = target_paths(tmp_path, ["claude", "gemini"], None, "NOTES.md")
    assert primary == tmp_path / "NOTES.md"
    assert list(mirror_paths(tmp_path, ["claude", "gemini"], "NOTES.md").values()) == [tmp_path / "GEMINI.md"]


def test_a_mirror_gets_the_block_and_keeps_everything_else():
    memory = with_rule("# Shop\n")
    live = "# Gemini notes\r\n\r\nWritten by hand.\r\n"
    mirrored = mirror_text(live, memory, Path("GEMINI.md"))
    assert mirrored.startswith(live) and RULE in mirrored
    assert mirrored.count(BLOCK_BEGIN) == mirrored.count(BLOCK_END) == 1
    again = mirror_text(mirrored, with_rule(memory.replace(RULE, "dates are ISO")), Path("GEMINI.md"))
    assert again.startswith(live) and "dates are ISO" in again and again.count(BLOCK_BEGIN) == 1


def test_a_new_cursor_rule_starts_with_frontmatter_that_applies_it_always():
    mirrored = mirror_text("", with_rule(""), Path(".cursor/rules/skillopt-sleep.mdc"))
    assert mirrored.startswith(MDC_FRONTMATTER) and "alwaysApply: true" in mirrored and RULE in mirrored
    assert mirror_text("", "no block here", Path("GEMINI.md")) is None


def stage(project: Path, paths: ProjectPaths, night_id: str, sources: list[str]) -> list[dict]:
    documents = load_documents(project, sources, skill_path=None, memory_path=None, evolve_skill=True,
                               evolve_memory=True)
    candidate = {"memory": with_rule(documents["memory"].text)}
    night_dir = paths.nights / night_id
    night_dir.mkdir(parents=True)
    entries = stage_proposal(night_dir, documents, mirror_candidates(documents, candidate))
    write_json_atomic(night_dir / "diagnostics.json", Diagnostics(
        night_id=night_id, status="accepted", summary="", project=str(project),
        started_at=datetime(2026, 1, 1, tzinfo=timezone.utc), sources=sources).model_dump(mode="json"))
    return entries


def test_adopt_and_revert_cover_every_agents_file_as_one_change(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "GEMINI.md").write_text("# Mine\n\nKeep me.\n", encoding="utf-8")
    paths = ProjectPaths(project, tmp_path / "state")
    sources = ["gemini", "cursor", "aider"]
    entries = stage(project, paths, "2026-01-01T000000Z", sources)
    assert sorted(entry["kind"] for entry in entries) == ["memory", "memory:aider", "memory:cursor"]
    allowed = [project / MEMORY_FILES[name] for name in sources]
    record = adopt_night(project, paths=paths, night_id="2026-01-01T000000Z", allowed_targets=allowed)
    assert sorted(Path(d.target).name for d in record.documents) == ["CONVENTIONS.md", "GEMINI.md",
                                                                     "skillopt-sleep.mdc"]
    for name in sources:
        text = (project / MEMORY_FILES[name]).read_text(encoding="utf-8")
        assert RULE in text
    assert (project / "GEMINI.md").read_text(encoding="utf-8").startswith("# Mine\n\nKeep me.\n")
    revert_adoption(project, paths=paths, night_id="2026-01-01T000000Z")
    assert (project / "GEMINI.md").read_text(encoding="utf-8") == "# Mine\n\nKeep me.\n"
    assert not (project / "CONVENTIONS.md").exists() and not (project / MEMORY_FILES["cursor"]).exists()
