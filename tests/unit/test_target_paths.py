"""Managed targets (``skill_path``, ``memory_path``) are judged on their fully resolved path and refused before a
night starts, naming the config file and the key: outside the project (also through a folder that does not exist
yet, or a symlink), a directory, a NUL byte, a name or path over the OS limits. And a forced revert keeps the
user's newer text."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest
from transcripts import PNPM_CONVERSATIONS, write_claude_sessions
from typer.testing import CliRunner

from skillopt_sleep.cli.app import app
from skillopt_sleep.documents.block import BLOCK_BEGIN, BLOCK_END
from skillopt_sleep.documents.targets import check_target, load_documents, stage_proposal
from skillopt_sleep.errors import ConfigError, SleepError
from skillopt_sleep.fsio import write_json_atomic
from skillopt_sleep.models import Diagnostics
from skillopt_sleep.review.adopt import adopt_night
from skillopt_sleep.state import ProjectPaths


@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "work" / "project"
    root.mkdir(parents=True)
    (root / "CLAUDE.md").write_text("# Notes\n", encoding="utf-8")
    write_claude_sessions(tmp_path / "claude", root, PNPM_CONVERSATIONS)
    return root


def night(project: Path, tmp_path: Path, config_text: str, *extra: str):
    config = tmp_path / "config.toml"
    config.write_text(config_text, encoding="utf-8")
    result = CliRunner().invoke(app, ["run-now", "--backend", "mock", "--apply", "--lookback-hours", "0",
                                      "--project", str(project), "--claude-home", str(tmp_path / "claude"),
                                      "--source", "claude", "--config", str(config), *extra])
    return result, config


def assert_refused_before_the_night(result, config: Path, key: str, project: Path, words: str) -> None:
    assert result.exit_code == 1, result.output
    assert f"{config}: key '{key}'" in result.output and words in result.output, result.output
    assert not ProjectPaths(project).nights.exists()  # nothing harvested, nothing staged
    assert (project / "CLAUDE.md").read_text() == "# Notes\n"


def test_a_memory_path_escaping_through_a_folder_not_yet_there_is_refused_before_staging(project, tmp_path):
    result, config = night(project, tmp_path, 'memory_path = "../../../outside/newdir/x.md"\n')
    assert_refused_before_the_night(result, config, "memory_path", project, "outside the project")
    assert not (tmp_path / "outside").exists()


def test_a_skill_path_escaping_through_a_symlink_is_refused_before_the_night(project, tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (project / "link").symlink_to(tmp_path / "elsewhere")
    result, config = night(project, tmp_path, 'skill_path = "link/SKILL.md"\n')
    assert_refused_before_the_night(result, config, "skill_path", project, "outside the project")


def test_a_memory_path_that_is_a_directory_is_refused_naming_the_key(project, tmp_path):
    (project / "docs").mkdir()
    result, config = night(project, tmp_path, 'memory_path = "docs"\n')
    assert_refused_before_the_night(result, config, "memory_path", project, "is a directory")


@pytest.mark.parametrize(("line", "why"), [
    ('memory_path = "CLAUDE.md/x.md"\n', "which is a file"),
    ('memory_path = "CLAUDE\\u0000.md"\n', "NUL byte"),
], ids=["under-a-file", "with-a-nul-byte"])
def test_a_memory_path_that_cannot_be_written_is_refused_naming_the_key(project, tmp_path, line, why):
    result, config = night(project, tmp_path, line)
    assert_refused_before_the_night(result, config, "memory_path", project, why)


@pytest.mark.parametrize("value, words", [("x" * 5000, "a path may have at most 4096"),
                                          ("notes/" + "y" * 300 + ".md", "a name may have at most 255")])
def test_an_over_long_memory_path_is_refused_naming_the_key(project, tmp_path, value, words):
    result, config = night(project, tmp_path, f'memory_path = "{value}"\n')
    assert_refused_before_the_night(result, config, "memory_path", project, words)
    assert len(result.output) < 1000  # the 5,000 characters are not echoed back


def test_a_flag_or_variable_is_named_as_the_source(project, tmp_path, monkeypatch):
    monkeypatch.setenv("SKILLOPT_SLEEP_MEMORY_PATH", "../outside.md")
    result, _ = night(project, tmp_path, "")
    assert result.exit_code == 1
    assert "environment SKILLOPT_SLEEP_MEMORY_PATH: key 'memory_path'" in result.output


def test_a_path_with_dots_that_stays_inside_the_project_is_accepted(project, tmp_path):
    result, _ = night(project, tmp_path, 'memory_path = "docs/../CLAUDE.md"\n')
    assert result.exit_code == 0, result.output


def test_check_target_judges_the_resolved_path_of_a_folder_not_yet_there(project):
    with pytest.raises(SleepError, match="outside the project"):
        check_target(project, project / "../../../outside/newdir/x.md")
    check_target(project, project / "new" / "folder" / "x.md")  # inside: fine


def test_load_config_refuses_the_same_values_naming_the_key():
    from skillopt_sleep.config import load_config

    with pytest.raises(ConfigError, match="key 'skill_path'.*NUL byte"):
        load_config(None, cli_overrides={"skill_path": "a\x00b"})


# --------------------------------------------------------------------------- revert --force keeps the user's text


def block(*lines: str) -> str:
    return "\n".join([BLOCK_BEGIN, *lines, "", BLOCK_END]) + "\n"


def test_a_forced_revert_keeps_the_users_newer_text_beside_the_backups_and_says_where(tmp_path):
    project = tmp_path / "p"
    project.mkdir()
    original = "# Mine\n\n" + block("- Keep commits small.")
    (project / "CLAUDE.md").write_text(original, encoding="utf-8")
    paths = ProjectPaths(project)
    documents = load_documents(project, ["claude"], skill_path=None, memory_path=None, evolve_skill=True,
                               evolve_memory=True)
    night_dir = paths.nights / "n1"
    night_dir.mkdir(parents=True)
    stage_proposal(night_dir, documents, {"memory": "# Mine\n\n" + block("- Keep commits small.", "- Use pnpm.")})
    write_json_atomic(night_dir / "diagnostics.json", Diagnostics(
        night_id="n1", status="accepted", summary="s", started_at=datetime(2025, 1, 1, tzinfo=timezone.utc),
        sources=["claude"]).model_dump(mode="json"))
    adopt_night(project, paths=paths, night_id="n1")
    users = (project / "CLAUDE.md").read_bytes() + "\nMy own line, written after the adoption.\r\n".encode()
    (project / "CLAUDE.md").write_bytes(users)

    result = CliRunner().invoke(app, ["revert", "--force", "--project", str(project)])
    assert result.exit_code == 0, result.output
    assert (project / "CLAUDE.md").read_text() == original
    [kept] = [p for p in paths.backups.rglob("CLAUDE.md") if p.read_bytes() == users]
    assert kept.parent.parent == paths.backups / "n1"  # backups/<night id>/<UTC stamp>/<file>, like the backups
    assert f"your edited version is kept at {kept}" in result.output
    history = json.loads(CliRunner().invoke(app, ["history", "--project", str(project), "--json"]).output)
    assert history["adoptions"][0]["documents"][0]["kept_edit"] == str(kept)
