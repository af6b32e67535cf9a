"""Replay markers derived from the prompt registry: our own prompt is recognised even without SESSION_MARKER."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from skillopt_sleep.backends.base import ChatMessage, ChatRequest
from skillopt_sleep.backends.subprocess_call import MARKER_LINE, render_prompt
from skillopt_sleep.engine.replay import system_prompt
from skillopt_sleep.harvest import harvest
from skillopt_sleep.prompts import marker
from skillopt_sleep.prompts import render_prompt as render_template
from skillopt_sleep.prompts.marker import SESSION_MARKER, is_own_request, own_request_fragments

TRANSCRIPTS = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts"
REWORDED_OPENING = "You tune the written guidance of a coding assistant from replays of what its owner asked for."


@pytest.fixture(autouse=True)
def fresh_fragments(tmp_path, monkeypatch):
    """Each test reads the registry afresh, with an empty override dir of its own."""
    monkeypatch.setenv("SKILLOPT_SLEEP_CONFIG_DIR", str(tmp_path / "config"))
    own_request_fragments.cache_clear()
    yield
    own_request_fragments.cache_clear()


def reflect_prompt() -> str:
    return render_template("reflect", edit_budget=3, targets="memory", skill="(none)", memory="Use pnpm.",
                           context="", tasks="1. install the deps")


def replay_prompt_without_marker(request: str = "install the deps for this repo") -> str:
    chat = ChatRequest(role="target", messages=[ChatMessage(role="system", content=system_prompt("", "Use pnpm.")),
                                                ChatMessage(role="user", content=request)])
    text = render_prompt(chat)
    assert text.startswith(MARKER_LINE)
    return text.removeprefix(MARKER_LINE).lstrip()  # an agent CLI that strips the first line


def test_our_prompts_without_the_marker_are_recognised():
    assert SESSION_MARKER not in reflect_prompt()
    assert is_own_request(reflect_prompt())
    assert is_own_request(replay_prompt_without_marker())
    # re-wrapped by a CLI, or with a zero-width space slipped in: still ours
    assert is_own_request(" \n".join(reflect_prompt().split(" ")))
    assert is_own_request(reflect_prompt().replace("coding agent", "coding\u200b agent"))
    assert is_own_request("[skillopt-sleep\u200b:replay] hi")


@pytest.mark.parametrize("request_text", [
    "install the deps for this repo",
    "You are a coding agent: fix the failing build, please",
    "Reply with only a JSON object, and improve the agent's instructions in the memory file",
    "review the skill document and the memory below; the rubric is in docs/rubric.md",
    "",
])
def test_ordinary_requests_that_share_words_with_our_prompts_are_not_ours(request_text):
    assert is_own_request(request_text) is False


def test_derived_markers_follow_a_reworded_template(tmp_path):
    original = reflect_prompt()
    reflect_opening = marker.match_form(original.splitlines()[0])
    assert reflect_opening in own_request_fragments()

    override = tmp_path / "config" / "prompts" / "reflect.md"
    override.parent.mkdir(parents=True)
    shipped = original  # the rendered text is fine as a template: it has no placeholders left
    override.write_text(shipped.replace(original.splitlines()[0], REWORDED_OPENING), encoding="utf-8")
    own_request_fragments.cache_clear()

    assert marker.match_form(REWORDED_OPENING) in own_request_fragments()
    assert reflect_opening not in own_request_fragments()
    assert is_own_request(f"{REWORDED_OPENING}\n\nsome tasks")
    assert not is_own_request(f"{original.splitlines()[0]}\n\nsome tasks")  # the old wording is no longer ours


# --------------------------------------------------------------------------- through the harvest


def claude_session(claude_home: Path, name: str, request: str) -> None:
    folder = claude_home / "projects" / "-home-dev-repo"
    folder.mkdir(parents=True, exist_ok=True)
    base = {"sessionId": name, "cwd": "/home/dev/repo", "version": "2.1.51", "isSidechain": False,
            "userType": "external"}
    records = [
        {**base, "type": "user", "uuid": "u1", "timestamp": "2026-03-01T10:00:00.000Z",
         "message": {"role": "user", "content": request}},
        {**base, "type": "assistant", "uuid": "a1", "parentUuid": "u1", "timestamp": "2026-03-01T10:01:00.000Z",
         "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4",
                     "content": [{"type": "text", "text": "Done."}]}},
    ]
    (folder / f"{name}.jsonl").write_bytes(b"".join(orjson.dumps(record) + b"\n" for record in records))


def test_a_session_whose_request_is_our_prompt_without_the_marker_is_skipped_as_own_marker(tmp_path):
    home = tmp_path / "claude"
    claude_session(home, "11111111-0000-0000-0000-000000000001", reflect_prompt())
    claude_session(home, "11111111-0000-0000-0000-000000000002", replay_prompt_without_marker())
    claude_session(home, "11111111-0000-0000-0000-000000000003", "install the deps for this repo")
    result = harvest(source="claude", claude_home=home, scope="all", lookback_hours=0)
    assert result.stats.sessions_skipped.get("own_marker") == 2
    assert [turn.request for session in result.sessions for turn in session.turns] == [
        "install the deps for this repo"]


def strings_in(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in strings_in(item)]
    if isinstance(value, list):
        return [text for item in value for text in strings_in(item)]
    return []


def fixture_strings() -> list[str]:
    texts: list[str] = []
    for path in sorted(TRANSCRIPTS.rglob("*")):
        if not path.is_file() or path.suffix not in (".json", ".jsonl", ".md"):
            continue
        raw = path.read_text(encoding="utf-8", errors="replace")
        if path.suffix == ".md":
            texts.append(raw)
            continue
        for line in raw.splitlines() if path.suffix == ".jsonl" else [raw]:
            try:
                texts.extend(strings_in(json.loads(line)))
            except ValueError:
                texts.append(line)
    return texts


def test_no_text_in_the_real_transcript_fixtures_is_taken_for_ours():
    texts = fixture_strings()
    assert len(texts) > 1000  # the fixtures were read
    assert [text[:80] for text in texts if is_own_request(text) and SESSION_MARKER not in text] == []


def test_the_harvest_of_the_real_claude_and_codex_fixtures_skips_the_same_sessions(tmp_path, monkeypatch):
    def harvest_all() -> list[tuple[dict, int]]:
        claude_home, codex_home = tmp_path / "claude", tmp_path / "codex"
        counts = []
        for fixture in sorted((TRANSCRIPTS / "claude_code").glob("*.jsonl")):
            target = claude_home / "projects" / "-home-dev-repo" / fixture.name.split("__")[-1]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(fixture.read_bytes())
        for fixture in sorted((TRANSCRIPTS / "codex").glob("*.jsonl")):
            target = codex_home / "sessions" / "2025" / "11" / "17" / fixture.name.split("__")[-1]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(fixture.read_bytes())
        monkeypatch.setenv("CODEX_HOME", str(codex_home))
        for source in ("claude", "codex"):
            result = harvest(source=source, claude_home=claude_home, scope="all", lookback_hours=0,
                             include_sdk_sessions=True)
            counts.append((dict(result.stats.sessions_skipped), len(result.sessions)))
        return counts

    with_fragments = harvest_all()
    monkeypatch.setattr(marker, "own_request_fragments", lambda: ())  # the SESSION_MARKER check alone
    assert harvest_all() == with_fragments
    assert sum(sessions for _, sessions in with_fragments) > 0
