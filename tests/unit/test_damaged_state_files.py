"""Damaged files the tool reads back: every command names the file, says what is wrong and what to do, exits 1
(never 70, the internal-error code), and loses nothing; rebuildable files (the harvest checkpoints) are moved aside
and the night goes on (``fsio.load_json``)."""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from pathlib import Path

import pytest
from transcripts import PNPM_CONVERSATIONS, write_claude_sessions
from typer.testing import CliRunner

from skillopt_sleep import errors
from skillopt_sleep.cli.app import app
from skillopt_sleep.fsio import write_json_atomic
from skillopt_sleep.models import Diagnostics
from skillopt_sleep.state import ProjectPaths, load_state

GARBAGE = b"\x00\x01 this is not json {"
#: adoptions.json as a user's hand edit might leave it: valid JSON, a record without its ``adopted_at``.
WRONG_SHAPE = {"format": "skillopt-sleep-adoptions/1", "adoptions": [{"night_id": "n1", "status": "adopted"}]}


@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "CLAUDE.md").write_text("# Notes\n", encoding="utf-8")
    write_claude_sessions(tmp_path / "claude", root, PNPM_CONVERSATIONS)
    return root


@pytest.fixture
def paths(project) -> ProjectPaths:
    paths = ProjectPaths(project)
    paths.root.mkdir(parents=True, exist_ok=True)
    return paths


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def night_args(project: Path, tmp_path: Path) -> list[str]:
    return ["run-now", "--backend", "mock", "--lookback-hours", "0", "--project", str(project), "--claude-home",
            str(tmp_path / "claude"), "--source", "claude"]


# --------------------------------------------------------------------------- the loader


def load_json(*args, **kwargs):
    from skillopt_sleep.fsio import load_json

    return load_json(*args, **kwargs)


def damaged() -> type[Exception]:
    return errors.DamagedFileError


def test_a_missing_file_gives_the_default_and_a_good_one_its_validated_value(tmp_path):
    path = tmp_path / "x.json"
    assert load_json(path, what="x", default=[]) == []
    path.write_text('{"a": 1}')
    assert load_json(path, what="x", validate=lambda data: data["a"] + 1) == 2


def test_a_file_that_is_not_json_is_refused_naming_it_its_line_and_the_fix(tmp_path):
    path = tmp_path / "state.json"
    path.write_bytes(GARBAGE)
    with pytest.raises(damaged()) as error:
        load_json(path, what="the project's state")
    message = str(error.value)
    assert str(path) in message and "is not valid JSON" in message and "line 1" in message
    assert f"mv {path} {path}.bad" in message
    assert error.value.exit_code != errors.INTERNAL_ERROR_EXIT_CODE
    assert path.read_bytes() == GARBAGE  # nothing moved, nothing lost


def test_a_rebuildable_file_is_moved_aside_with_a_warning_and_the_default_returned(tmp_path, caplog):
    path = tmp_path / "cache.json"
    path.write_bytes(GARBAGE)
    with caplog.at_level(logging.WARNING, logger="skillopt_sleep.fsio"):
        assert load_json(path, what="the cache", default={}, rebuildable=True) == {}
    [aside] = tmp_path.glob("cache.json.corrupt-*")
    assert aside.read_bytes() == GARBAGE and not path.exists()
    assert str(path) in caplog.text and aside.name in caplog.text


def test_a_wrong_shape_names_the_first_bad_field(paths):
    paths.root.joinpath("adoptions.json").write_text(json.dumps(WRONG_SHAPE))
    from skillopt_sleep.review.adopt import load_adoptions

    with pytest.raises(damaged(), match=r"adoptions\.json has the wrong shape \(field 0\.adopted_at: Field "
                                               r"required\)"):
        load_adoptions(paths)


def test_a_directory_where_the_state_file_should_be_is_refused_naming_it(paths):
    paths.state_file.mkdir(parents=True)
    with pytest.raises(damaged(), match="cannot read the project's state"):
        load_state(paths)


# --------------------------------------------------------------------------- state.json through the commands


def test_a_garbage_state_file_refuses_the_night_naming_it_and_keeps_it(project, paths, tmp_path):
    paths.state_file.write_bytes(GARBAGE)
    result = invoke(*night_args(project, tmp_path))
    assert result.exit_code == 1, result.output
    assert str(paths.state_file) in result.output and "is not valid JSON" in result.output
    assert "to start the project's history afresh" in result.output
    assert paths.state_file.read_bytes() == GARBAGE
    assert not paths.nights.exists()  # refused before anything ran


def test_status_shows_a_garbage_state_file_as_a_warning_naming_it(project, paths):
    paths.state_file.write_bytes(GARBAGE)
    result = invoke("status", "--project", str(project), "--crontab-bin", "/nonexistent/crontab")
    assert result.exit_code == 0, result.output
    assert "warning:" in result.output and str(paths.state_file) in result.output
    assert "is not valid JSON" in result.output and "last night: -" in result.output


# --------------------------------------------------------------------------- adoptions.json through the commands


@pytest.mark.parametrize("command", ["adopt", "revert", "history"])
def test_a_wrong_shaped_adoptions_file_is_named_with_its_field_by_every_command(project, paths, command):
    path = paths.root / "adoptions.json"
    path.write_text(json.dumps(WRONG_SHAPE))
    before = path.read_bytes()
    result = invoke(command, "--project", str(project))
    assert result.exit_code == 1, result.output
    assert str(path) in result.output and "0.adopted_at: Field required" in result.output
    assert "to start the adoption records afresh" in result.output
    assert path.read_bytes() == before


def test_a_wrong_shaped_adoptions_file_refuses_the_night_before_it_starts(project, paths, tmp_path):
    path = paths.root / "adoptions.json"
    path.write_text(json.dumps(WRONG_SHAPE))
    result = invoke(*night_args(project, tmp_path))
    assert result.exit_code == 1, result.output
    assert str(path) in result.output and "adopted_at" in result.output
    assert not paths.nights.exists()


# --------------------------------------------------------------------------- checkpoints, manifests, diagnostics


def test_a_garbage_checkpoint_file_is_moved_aside_and_the_night_reads_the_window_again(project, paths, tmp_path,
                                                                                     caplog):
    paths.checkpoints.write_bytes(GARBAGE)
    with caplog.at_level(logging.WARNING, logger="skillopt_sleep.fsio"):
        result = invoke(*night_args(project, tmp_path))
    assert result.exit_code == 0, result.output
    [aside] = paths.root.glob("checkpoints.json.corrupt-*")
    assert aside.read_bytes() == GARBAGE
    assert str(paths.checkpoints) in caplog.text and aside.name in caplog.text
    assert json.loads(paths.checkpoints.read_text())["files"]  # rebuilt by the night


def stage_garbage_manifest(paths: ProjectPaths, project: Path, night_id: str = "2025-01-01T000000Z") -> Path:
    night_dir = paths.nights / night_id
    (night_dir / "proposed").mkdir(parents=True)
    diagnostics = Diagnostics(night_id=night_id, status="accepted", summary="a night", project=str(project),
                              started_at=datetime(2025, 1, 1, tzinfo=timezone.utc), sources=["claude"])
    write_json_atomic(night_dir / "diagnostics.json", diagnostics.model_dump(mode="json"))
    manifest = night_dir / "proposed" / "manifest.json"
    manifest.write_bytes(GARBAGE)
    return manifest


def test_report_still_shows_a_night_whose_manifest_is_garbage_and_says_why_no_diff(project, paths):
    stage_garbage_manifest(paths, project)
    result = invoke("report", "--project", str(project))
    assert result.exit_code == 0, result.output
    assert "no diff shown" in result.output and "not valid JSON" in result.output


def test_adopt_refuses_a_garbage_manifest_naming_it(project, paths):
    manifest = stage_garbage_manifest(paths, project)
    result = invoke("adopt", "2025-01-01T000000Z", "--project", str(project))
    assert result.exit_code == 1, result.output
    assert str(manifest) in result.output and "not valid JSON" in result.output
    assert manifest.read_bytes() == GARBAGE and (project / "CLAUDE.md").read_text() == "# Notes\n"


def test_adopt_refuses_garbage_diagnostics_naming_them(project, paths):
    stage_garbage_manifest(paths, project)
    diagnostics = paths.nights / "2025-01-01T000000Z" / "diagnostics.json"
    diagnostics.write_bytes(GARBAGE)
    result = invoke("adopt", "2025-01-01T000000Z", "--project", str(project))
    assert result.exit_code == 1, result.output
    assert str(diagnostics) in result.output and "not valid JSON" in result.output
