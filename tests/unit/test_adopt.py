"""Adopting a staged proposal, reverting it, and the adoption records (adoptions.json), on night directories built
with the real staging code (documents.stage_proposal) and the real managed-block edits."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path

import pytest
from filelock import FileLock
from typer.testing import CliRunner

import skillopt_sleep.review.adopt as adopt_module
from skillopt_sleep.cli.adopt_cmd import register
from skillopt_sleep.cli.app import app
from skillopt_sleep.documents.block import BLOCK_BEGIN, BLOCK_END, BLOCK_HEADING
from skillopt_sleep.documents.targets import load_documents, stage_proposal
from skillopt_sleep.engine.edits import apply_edits
from skillopt_sleep.errors import LockedError, SleepError
from skillopt_sleep.fsio import write_json_atomic
from skillopt_sleep.hashing import sha256_text
from skillopt_sleep.models import Diagnostics, EditRecord
from skillopt_sleep.review.adopt import (
    adopt_all,
    adopt_night,
    adoptable,
    default_night_to_adopt,
    load_adoptions,
    rebase_proposal,
    revert_adoption,
)
from skillopt_sleep.state import ProjectPaths

USER_TEXT = "# My project\n\nHand-written notes.\n"
RULE = "Use pnpm, never npm."


def block(*lines: str) -> str:
    return "\n".join([BLOCK_BEGIN, *lines, "", BLOCK_END]) + "\n"


def edited(document: str, content: str, target: str = "memory") -> str:
    new, records = apply_edits(document, [EditRecord(target=target, op="add", content=content)], target)
    assert records[0].status == "applied"
    return new


def stage_night(paths: ProjectPaths, project: Path, night_id: str, *, memory: str | None = None,
                skill: str | None = None, status: str = "accepted") -> list[dict]:
    """Stage a night's proposal from the project's live documents, as night.py does."""
    documents = load_documents(project, ["claude"], skill_path=None, memory_path=None, evolve_skill=True,
                               evolve_memory=True)
    candidate = {}
    if memory is not None:
        candidate["memory"] = memory
    if skill is not None:
        candidate["skill"] = skill
    night_dir = paths.nights / night_id
    night_dir.mkdir(parents=True, exist_ok=True)
    entries = stage_proposal(night_dir, documents, candidate)
    diagnostics = Diagnostics(night_id=night_id, status=status, summary="test night", project=str(project),
                              started_at=datetime(2025, 1, 1, tzinfo=timezone.utc), sources=["claude"],
                              proposed=[e["target"] for e in entries])
    write_json_atomic(night_dir / "diagnostics.json", diagnostics.model_dump(mode="json"))
    return entries


@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "CLAUDE.md").write_text(USER_TEXT + "\n" + block("- Keep commits small."), encoding="utf-8")
    return root


@pytest.fixture
def paths(project) -> ProjectPaths:
    return ProjectPaths(project)


def live(project: Path) -> str:
    return (project / "CLAUDE.md").read_text("utf-8")


def test_adopt_writes_the_proposal_keeps_a_backup_and_records_both_hashes(project, paths):
    before = live(project)
    proposal = edited(before, RULE)
    stage_night(paths, project, "2025-01-01T000000Z", memory=proposal)

    record = adopt_night(project, paths=paths)

    assert live(project) == proposal
    assert record.status == "adopted" and record.night_id == "2025-01-01T000000Z"
    [document] = record.documents
    assert Path(document.backup).read_text("utf-8") == before
    assert document.sha256_before == sha256_text(before) and document.sha256_after == sha256_text(proposal)
    ledger = json.loads((paths.root / "adoptions.json").read_text())
    assert ledger["adoptions"][0]["status"] == "adopted"
    assert ledger["adoptions"][0]["documents"][0]["target"] == str(project / "CLAUDE.md")


def test_staged_nights_add_up_adopt_takes_them_all_oldest_first(project, paths):
    before = live(project)
    stage_night(paths, project, "2025-01-01T000000Z", memory=edited(before, "Rule from night one."))
    stage_night(paths, project, "2025-01-02T000000Z", memory=edited(before, "Rule from night two."))
    stage_night(paths, project, "2025-01-03T000000Z", memory=edited(before, "Rule from night three."),
                status="rejected")
    assert adoptable(paths) == ["2025-01-01T000000Z", "2025-01-02T000000Z"]

    done = adopt_all(project, paths=paths)

    assert [record.night_id for record in done.adopted] == ["2025-01-01T000000Z", "2025-01-02T000000Z"]
    assert done.refused == {}
    result = live(project)
    assert "Rule from night one." in result and "Rule from night two." in result
    assert "Rule from night three." not in result
    assert result.index("Rule from night one.") < result.index("Rule from night two.")
    assert result.startswith(USER_TEXT) and result.count("- Keep commits small.") == 1
    assert adoptable(paths) == []
    with pytest.raises(SleepError, match="nothing to adopt"):
        adopt_all(project, paths=paths)


def test_adopting_the_newer_night_leaves_the_older_one_adoptable_on_top(project, paths):
    before = live(project)
    stage_night(paths, project, "n1", memory=edited(before, "Rule from night one."))
    stage_night(paths, project, "n2", memory=edited(before, "Rule from night two."))
    adopt_night(project, paths=paths, night_id="n2")
    assert adoptable(paths) == ["n1"] and default_night_to_adopt(paths) == "n1"

    record = adopt_night(project, paths=paths, night_id="n1")

    assert record.documents[0].rebased is True
    assert "Rule from night one." in live(project) and "Rule from night two." in live(project)


def test_a_line_two_nights_both_staged_is_written_once(project, paths):
    before = live(project)
    stage_night(paths, project, "n1", memory=edited(before, RULE))
    stage_night(paths, project, "n2", memory=edited(edited(before, RULE), "Another rule."))
    adopt_all(project, paths=paths)
    assert live(project).count(RULE) == 1 and "Another rule." in live(project)


def test_adopting_a_rejected_night_is_refused(project, paths):
    stage_night(paths, project, "2025-01-01T000000Z", memory=edited(live(project), RULE), status="rejected")
    with pytest.raises(SleepError, match="not accepted"):
        adopt_night(project, paths=paths, night_id="2025-01-01T000000Z")
    with pytest.raises(SleepError, match="nothing to adopt"):
        adopt_night(project, paths=paths)


def test_adopting_the_same_night_twice_is_refused(project, paths):
    stage_night(paths, project, "n1", memory=edited(live(project), RULE))
    adopt_night(project, paths=paths, night_id="n1")
    with pytest.raises(SleepError, match="already adopted"):
        adopt_night(project, paths=paths, night_id="n1")


def test_user_edits_outside_the_block_are_kept_when_the_proposal_is_reapplied(project, paths):
    proposal = edited(live(project), RULE)
    stage_night(paths, project, "n1", memory=proposal)
    user_version = live(project).replace("Hand-written notes.", "Hand-written notes, edited after the night.")
    (project / "CLAUDE.md").write_text(user_version + "\nA line the user appended.\n", encoding="utf-8")

    record = adopt_night(project, paths=paths, night_id="n1")

    result = live(project)
    assert record.documents[0].rebased is True
    assert "edited after the night" in result and result.endswith("\nA line the user appended.\n")
    assert f"- Keep commits small.\n{RULE}\n" in result
    assert Path(record.documents[0].backup).read_text("utf-8") == user_version + "\nA line the user appended.\n"


def test_a_rule_added_onto_a_block_the_user_edited_is_merged(project, paths):
    stage_night(paths, project, "n1", memory=edited(live(project), RULE))
    changed = live(project).replace("- Keep commits small.", "- Keep commits tiny.")
    (project / "CLAUDE.md").write_text(changed, encoding="utf-8")

    adopt_night(project, paths=paths, night_id="n1")

    assert live(project) == changed.replace("- Keep commits tiny.\n", f"- Keep commits tiny.\n{RULE}\n")


def test_a_line_the_night_replaced_and_the_user_changed_is_a_conflict_nothing_written(project, paths):
    proposal = live(project).replace("- Keep commits small.", "- Keep commits atomic.")
    stage_night(paths, project, "n1", memory=proposal)
    changed = live(project).replace("- Keep commits small.", "- Keep commits tiny.")
    (project / "CLAUDE.md").write_text(changed, encoding="utf-8")

    with pytest.raises(SleepError) as info:
        adopt_night(project, paths=paths, night_id="n1")
    assert str(project / "CLAUDE.md") in str(info.value) and "Keep commits small" in str(info.value)
    assert "by hand" in info.value.fix
    assert live(project) == changed and load_adoptions(paths) == []
    done = adopt_all(project, paths=paths)  # reported, not dropped: the night stays staged
    assert done.adopted == [] and "conflicts" in done.refused["n1"] and adoptable(paths) == ["n1"]


def test_a_manifest_without_its_base_block_still_needs_the_block_unchanged(project, paths):
    entries = stage_night(paths, project, "n1", memory=edited(live(project), RULE))
    manifest = paths.nights / "n1" / "proposed" / "manifest.json"
    data = json.loads(manifest.read_text())
    del data["documents"][0]["live_block"]  # staged by an older version
    manifest.write_text(json.dumps(data))
    assert entries[0]["live_block"] is not None
    changed = live(project).replace("- Keep commits small.", "- Keep commits tiny.")
    (project / "CLAUDE.md").write_text(changed, encoding="utf-8")
    with pytest.raises(SleepError, match="by hand"):
        adopt_night(project, paths=paths, night_id="n1")
    assert live(project) == changed


def test_rebase_keeps_crlf_line_endings_outside_the_block():
    base = "Title\r\n\r\n" + block("- one").replace("\n", "\r\n")
    proposed = edited(base, "- two")
    live_text = "Title changed\r\n\r\n" + block("- one").replace("\n", "\r\n") + "tail\r\n"
    from skillopt_sleep.documents.block import managed_block_sha256

    rebased = rebase_proposal(proposed, live_text, managed_block_sha256(base))

    assert rebased == "Title changed\r\n\r\n" + block("- one", "- two").replace("\n", "\r\n") + "tail\r\n"


def test_rebase_onto_a_file_that_still_has_no_block_appends_the_proposed_block():
    base = "Notes\n"
    proposed = edited(base, "- rule")
    assert (rebase_proposal(proposed, "Notes, edited\n", None)
            == "Notes, edited\n\n" + block(BLOCK_HEADING, "", "- rule"))
    assert rebase_proposal(proposed, "Notes\n\n" + block("- other"), None) is None


def test_a_manifest_edited_to_point_outside_the_project_is_refused(project, paths, tmp_path):
    stage_night(paths, project, "n1", memory=edited(live(project), RULE))
    manifest_path = paths.nights / "n1" / "proposed" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    elsewhere = tmp_path / "elsewhere" / "CLAUDE.md"
    elsewhere.parent.mkdir()
    manifest["documents"][0]["target"] = str(elsewhere)
    manifest["documents"][0]["live_sha256"] = None
    manifest_path.write_text(json.dumps(manifest))

    with pytest.raises(SleepError, match="outside the project"):
        adopt_night(project, paths=paths, night_id="n1")
    assert not elsewhere.exists()


def test_a_target_that_is_not_configured_is_refused(project, paths):
    stage_night(paths, project, "n1", memory=edited(live(project), RULE))
    before = live(project)
    with pytest.raises(SleepError, match="not a configured target"):
        adopt_night(project, paths=paths, night_id="n1", allowed_targets=[project / "AGENTS.md"])
    assert live(project) == before


def test_a_symlinked_target_pointing_outside_the_project_is_refused(project, paths, tmp_path):
    outside = tmp_path / "outside.md"
    outside.write_text(USER_TEXT, encoding="utf-8")
    stage_night(paths, project, "n1", memory=edited(live(project), RULE))
    (project / "CLAUDE.md").unlink()
    (project / "CLAUDE.md").symlink_to(outside)

    with pytest.raises(SleepError, match="symlink"):
        adopt_night(project, paths=paths, night_id="n1")
    assert outside.read_text("utf-8") == USER_TEXT


def test_a_proposal_modified_after_staging_is_refused(project, paths):
    stage_night(paths, project, "n1", memory=edited(live(project), RULE))
    (paths.nights / "n1" / "proposed" / "CLAUDE.md").write_text("rm -rf everything\n", encoding="utf-8")
    before = live(project)
    with pytest.raises(SleepError, match="sha256"):
        adopt_night(project, paths=paths, night_id="n1")
    assert live(project) == before


def test_revert_restores_the_pre_adoption_bytes(project, paths):
    before = (project / "CLAUDE.md").read_bytes()
    stage_night(paths, project, "n1", memory=edited(live(project), RULE))
    adopt_night(project, paths=paths)

    record = revert_adoption(project, paths=paths)

    assert (project / "CLAUDE.md").read_bytes() == before
    assert record.status == "reverted" and record.reverted_at is not None
    assert [d.status for d in record.documents] == ["reverted"]
    assert load_adoptions(paths)[0].status == "reverted"


def test_revert_refuses_when_the_file_changed_since_adoption_unless_forced(project, paths):
    before = live(project)
    stage_night(paths, project, "n1", memory=edited(before, RULE))
    adopt_night(project, paths=paths)
    (project / "CLAUDE.md").write_text(live(project) + "later user edit\n", encoding="utf-8")

    with pytest.raises(SleepError, match="--force"):
        revert_adoption(project, paths=paths, night_id="n1")
    assert live(project).endswith("later user edit\n")

    record = revert_adoption(project, paths=paths, night_id="n1", force=True)
    assert live(project) == before and record.forced_revert is True


def test_a_document_created_by_adoption_is_removed_on_revert(project, paths):
    skill_path = project / ".claude" / "skills" / "skillopt-sleep" / "SKILL.md"
    documents = load_documents(project, ["claude"], skill_path=None, memory_path=None, evolve_skill=True,
                               evolve_memory=True)
    new_skill = edited(documents["skill"].baseline_text, "- Run pnpm test before pushing.", "skill")
    stage_night(paths, project, "n1", skill=new_skill)

    record = adopt_night(project, paths=paths)
    assert skill_path.read_text("utf-8") == new_skill
    assert record.documents[0].existed_before is False and record.documents[0].backup is None
    assert oct(skill_path.stat().st_mode & 0o777) == oct(0o644)

    revert_adoption(project, paths=paths)
    assert not skill_path.exists()


def test_a_created_document_changed_since_is_kept_on_revert_unless_forced(project, paths):
    skill_path = project / ".claude" / "skills" / "skillopt-sleep" / "SKILL.md"
    documents = load_documents(project, ["claude"], skill_path=None, memory_path=None, evolve_skill=True,
                               evolve_memory=True)
    stage_night(paths, project, "n1", skill=edited(documents["skill"].baseline_text, "- a rule", "skill"))
    adopt_night(project, paths=paths)
    skill_path.write_text("the user's own skill now\n", encoding="utf-8")

    with pytest.raises(SleepError, match="changed since"):
        revert_adoption(project, paths=paths)
    assert skill_path.read_text("utf-8") == "the user's own skill now\n"
    revert_adoption(project, paths=paths, force=True)
    assert not skill_path.exists()


def test_revert_with_nothing_adopted_says_so(project, paths):
    with pytest.raises(SleepError, match="nothing to revert"):
        revert_adoption(project, paths=paths)


class Killed(BaseException):
    """Stands for SIGKILL in-process: not an Exception, so nothing catches it."""


def _two_document_night(project: Path, paths: ProjectPaths) -> tuple[str, str]:
    documents = load_documents(project, ["claude"], skill_path=None, memory_path=None, evolve_skill=True,
                               evolve_memory=True)
    memory = edited(live(project), RULE)
    skill = edited(documents["skill"].baseline_text, "- a skill rule", "skill")
    stage_night(paths, project, "n1", memory=memory, skill=skill)
    return memory, skill


def test_an_adoption_killed_between_documents_is_rolled_back_by_the_next_adopt(project, paths, monkeypatch):
    before = live(project)
    _two_document_night(project, paths)
    real_write = adopt_module.write_text_atomic
    project_writes = []

    def dying_write(path, text, **kwargs):
        if Path(path).is_relative_to(project):
            project_writes.append(path)
            if len(project_writes) == 2:
                raise Killed()
        real_write(path, text, **kwargs)

    monkeypatch.setattr(adopt_module, "write_text_atomic", dying_write)
    with pytest.raises(Killed):
        adopt_night(project, paths=paths)
    assert load_adoptions(paths)[0].status == "pending"
    monkeypatch.setattr(adopt_module, "write_text_atomic", real_write)

    with pytest.raises(SleepError, match="nothing to revert"):
        revert_adoption(project, paths=paths)  # settles the pending record first

    assert live(project) == before
    assert not (project / ".claude" / "skills" / "skillopt-sleep" / "SKILL.md").exists()
    assert load_adoptions(paths) == []
    assert adopt_night(project, paths=paths).status == "adopted"  # and the night can be adopted again


def test_an_adoption_killed_after_its_last_write_is_completed_by_the_next_command(project, paths, monkeypatch):
    memory, skill = _two_document_night(project, paths)
    real_save = adopt_module._save_adoptions
    saves = []

    def dying_save(paths_, adoptions):
        saves.append(adoptions[-1].status)
        if adoptions and adoptions[-1].status == "adopted":
            raise Killed()
        real_save(paths_, adoptions)

    monkeypatch.setattr(adopt_module, "_save_adoptions", dying_save)
    with pytest.raises(Killed):
        adopt_night(project, paths=paths)
    monkeypatch.setattr(adopt_module, "_save_adoptions", real_save)
    assert load_adoptions(paths)[0].status == "pending"

    record = revert_adoption(project, paths=paths)  # the pending record is settled as adopted, then reverted

    assert record.night_id == "n1" and record.status == "reverted"
    assert "pnpm" not in live(project)


def test_adopt_refuses_while_a_night_holds_the_lock(project, paths):
    stage_night(paths, project, "n1", memory=edited(live(project), RULE))
    lock = FileLock(str(paths.lock), timeout=0)
    lock.acquire()
    try:
        with pytest.raises(LockedError):
            adopt_night(project, paths=paths)
    finally:
        lock.release()
    assert RULE not in live(project)


def test_adopt_keeps_the_mode_of_an_existing_document(project, paths):
    os.chmod(project / "CLAUDE.md", 0o640)
    stage_night(paths, project, "n1", memory=edited(live(project), RULE))
    adopt_night(project, paths=paths)
    assert (project / "CLAUDE.md").stat().st_mode & 0o777 == 0o640


# --------------------------------------------------------------------------- CLI


@pytest.fixture
def cli():
    if not any(command.name == "adopt" for command in app.registered_commands):
        register(app)
    return CliRunner()


def test_cli_adopt_revert_and_history_round_trip(project, paths, cli):
    before = live(project)
    stage_night(paths, project, "2025-01-01T000000Z", memory=edited(before, RULE))

    adopted = cli.invoke(app, ["adopt", "--project", str(project)])
    assert adopted.exit_code == 0, adopted.output
    assert "adopted night 2025-01-01T000000Z" in adopted.output and RULE in live(project)

    history = cli.invoke(app, ["history", "--project", str(project), "--json"])
    assert json.loads(history.output)["adoptions"][0]["status"] == "adopted"

    reverted = cli.invoke(app, ["revert", "2025-01-01T000000Z", "--project", str(project)])
    assert reverted.exit_code == 0, reverted.output
    assert live(project) == before
    history = cli.invoke(app, ["history", "--project", str(project), "--json"])
    assert [a["status"] for a in json.loads(history.output)["adoptions"]] == ["reverted"]


def test_cli_adopt_refuses_a_target_the_config_does_not_name(project, paths, cli, tmp_path):
    stage_night(paths, project, "n1", memory=edited(live(project), RULE))
    config = tmp_path / "config.toml"
    config.write_text('memory_path = "NOTES.md"\n')
    result = cli.invoke(app, ["adopt", "n1", "--project", str(project), "--config", str(config)])
    assert result.exit_code == 1
    assert RULE not in live(project)
