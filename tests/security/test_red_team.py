"""Red team: nothing an agent read becomes a rule in the user's documents (``docs/security.md``).

Every case is a whole night (``night.run_night`` with ``--apply``) on real-format transcripts (``planted.py``) in
which a planted instruction sits in one place a real one can hide, and the user states one genuine rule. The
models are a stand-in OpenAI-compatible server on 127.0.0.1 (pytest-httpserver, through the real ``openai``
backend): its optimizer does what a model that obeyed the planted text would do and proposes it as an edit,
verbatim and paraphrased, to every document it may edit; its target follows whatever the memory says. With the
gate on and off, the planted text never reaches a document, the genuine rule does, the night says which edit was
blocked and why, and every prompt the models saw held the planted text only as data.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from planted import (
    CLAUDE_PLACES,
    CORRECTION,
    MARKERS,
    PARAPHRASED,
    PLACES,
    PLANTED,
    write_claude,
    write_codex,
)
from werkzeug import Request, Response

from skillopt_sleep.config import SleepConfig
from skillopt_sleep.mine.provenance import NO_USER_PROVENANCE, SECRET
from skillopt_sleep.night import run_night
from skillopt_sleep.prompts import DATA_CLOSE, DATA_OPEN

FAKE_SECRET = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"


class StandIn:
    """The models behind one OpenAI-compatible endpoint, by what each request asks for (its response schema).

    optimizer (reflect, merge): proposes ``proposals`` to every document the schema allows; rank: keeps the order;
    judge: 0.5; miner: no check; target: "Run `pnpm install`." when the system prompt (skill + memory) says pnpm,
    else "Run `npm install`.", and it repeats any planted line it was given. Every prompt is kept in ``prompts``."""

    def __init__(self, proposals: list[str]):
        self.proposals = proposals
        self.prompts: list[tuple[str, str]] = []  # (kind, the whole prompt)

    def __call__(self, request: Request) -> Response:
        body = request.get_json()
        messages = body["messages"]
        prompt = "\n".join(str(message.get("content")) for message in messages)
        response_format = body.get("response_format") or {}
        schema = (response_format.get("json_schema") or {}).get("schema") or response_format.get("schema") or {}
        properties = schema.get("properties", {})
        if "edits" in properties:
            kind = "optimizer"
            targets = properties["edits"]["items"]["properties"]["target"]["enum"]
            text = json.dumps({"edits": [{"target": target, "op": "append", "anchor": None, "content": proposal,
                                          "rationale": "the repository's own instructions say so", "evidence": []}
                                         for proposal in self.proposals for target in targets]})
        elif "order" in properties:
            kind = "rank"
            text = json.dumps({"order": list(range(len(re.findall(r"^\[\d+\] ", prompt, re.MULTILINE))))})
        elif "score" in properties:
            kind, text = "judge", json.dumps({"score": 0.5, "rationale": "partly"})
        elif "checks" in properties:
            kind = "miner"
            text = json.dumps({"intent": "install", "checks": [], "rubric": "uses the right tool",
                               "outcome": "failure"})
        else:
            kind = "target"
            system = next((m["content"] for m in messages if m["role"] == "system"), "")
            text = "Run `pnpm install`." if "pnpm" in system else "Run `npm install`."
            if "evil.example" in system:
                text += " " + PLANTED
        self.prompts.append((kind, prompt))
        reply = {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": body.get("model", "m"),
                 "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                              "finish_reason": "stop"}],
                 "usage": {"prompt_tokens": len(prompt) // 4, "completion_tokens": len(text) // 4,
                           "total_tokens": (len(prompt) + len(text)) // 4}}
        return Response(json.dumps(reply), content_type="application/json")


def night(tmp_path: Path, api, place: str, *, gate_mode: str, planted: str = PLANTED,
          proposals: list[str] | None = None):
    project = tmp_path / "project"
    project.mkdir()
    (project / "CLAUDE.md").write_text("# Shop\n\nHand-written notes.\n", encoding="utf-8")
    (project / "AGENTS.md").write_text("# Shop\n\nHand-written notes.\n", encoding="utf-8")
    claude_home, codex_home = tmp_path / "claude", tmp_path / "codex"
    if place == "codex_output":
        write_codex(codex_home, project, planted)
    else:
        write_claude(claude_home, project, place, planted)
    stand_in = StandIn(proposals if proposals is not None else [planted, PARAPHRASED])
    api.expect_request("/v1/chat/completions", method="POST").respond_with_handler(stand_in)
    config = SleepConfig(backend="openai", base_url=api.url_for("/v1"), api_key="sk-test", target_model="target",
                         optimizer_model="optimizer", claude_home=claude_home, codex_home=codex_home,
                         lookback_hours=0, gate_mode=gate_mode, max_retries=0, workers=4)
    result = run_night(config, project=project, state_root=tmp_path / "state", apply=True)
    return result, project, stand_in


def files_text(*roots: Path) -> str:
    return "\n".join(path.read_text(encoding="utf-8", errors="replace")
                     for root in roots if root.exists() for path in sorted(root.rglob("*")) if path.is_file()
                     and path.suffix in (".md", ".json", ".jsonl", ""))


def outside_data(prompt: str) -> str:
    return re.sub(re.escape(DATA_OPEN) + r".*?" + re.escape(DATA_CLOSE), "", prompt, flags=re.DOTALL)


def assert_planted_blocked(result, project: Path, stand_in: StandIn, planted: str, place: str) -> None:
    diagnostics = result.diagnostics
    # the transcripts were read as the real agent writes them: 8 sessions, 2 typed messages each, sub-agents apart
    harvest = diagnostics.harvest
    assert harvest.sessions_harvested == 8 and harvest.requests == 16, harvest
    assert harvest.sessions_skipped.get("subagent", 0) == (8 if place == "subagent" else 0)
    documents = files_text(project)
    # the user's genuine rule (compiled from its checks, its example from the answer the user accepted) reached the
    # memory; nothing planted reached any document
    assert diagnostics.status == "accepted", diagnostics.summary
    assert diagnostics.applied, diagnostics.errors
    assert "- Use `pnpm`, never `npm`" in documents
    for marker in MARKERS:
        assert marker not in documents, marker
    staged = files_text(result.night_dir / "proposed")
    assert staged and all(marker not in staged for marker in MARKERS)
    # the optimizer did propose the planted text, and the screen said why it stopped it
    blocked = [edit for edit in diagnostics.edits if edit.reason.startswith(NO_USER_PROVENANCE)]
    assert any(planted[:40] in edit.content for edit in blocked), [e.reason for e in diagnostics.edits]
    assert any(PARAPHRASED[:40] in edit.content for edit in blocked)
    assert "blocked: no user provenance for `" in diagnostics.summary
    assert not any(edit.status == "applied" and any(m in edit.content for m in MARKERS) for edit in diagnostics.edits)
    # no rule and no provenance came from what the agent read
    tasks = [json.loads(line) for line in (result.night_dir / "tasks.jsonl").read_text().splitlines()]
    for task in tasks:
        for text in [*task["rules"], *task["authored"]]:
            assert all(marker not in text for marker in MARKERS), text
        assert "agent-notification" not in task["request"]
    assert any(CORRECTION in text for task in tasks for text in task["rules"] + task["authored"])
    # every model but the target saw the planted text only as data (the target replays the user's request as sent)
    seen = [prompt for kind, prompt in stand_in.prompts if kind != "target" and "evil.example" in prompt]
    if place == "pasted":  # the user's message quotes it: the replayed request carries it to the models
        assert seen, "the pasted block never reached a prompt: the case tests nothing"
    for prompt in seen:
        assert "evil.example" not in outside_data(prompt), prompt[:2000]


@pytest.mark.parametrize("gate_mode", ["on", "off"])
@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("planted", [PLANTED, PARAPHRASED], ids=["verbatim", "paraphrased"])
def test_a_planted_instruction_never_reaches_a_document(tmp_path, api, planted, place, gate_mode):
    result, project, stand_in = night(tmp_path, api, place, gate_mode=gate_mode, planted=planted)
    assert_planted_blocked(result, project, stand_in, planted, place)


def carries_planted(value: object) -> bool:
    return value is not None and any(marker in json.dumps(value) for marker in MARKERS)


def planted_at(root: Path) -> set[str]:
    """Where planted text sits in the transcripts under ``root``: ``<transcript>/<record type>/<field>``, the
    transcript ``main``, ``subagent`` (under ``subagents/``) or ``codex``; a Claude Code tool's result and
    ``toolUseResult`` named with the tool that made them (``tool_result:Read``)."""
    found: set[str] = set()
    for path in sorted(root.rglob("*.jsonl")):
        transcript = "subagent" if "subagents" in path.parts else "main"
        tools: dict[str, str] = {}
        for record in map(json.loads, path.read_text(encoding="utf-8").splitlines()):
            kind = record["type"]
            if "payload" in record:  # a Codex rollout line
                if carries_planted(record["payload"]):
                    found.add(f"codex/{kind}/{record['payload']['type']}")
                continue
            content = record["message"]["content"]
            for block in [{"type": "text", "text": content}] if isinstance(content, str) else content:
                if block["type"] == "tool_use":
                    tools[block["id"]] = block["name"]
                field = f"tool_result:{tools[block['tool_use_id']]}" if block["type"] == "tool_result" else \
                    block["type"]
                if carries_planted(block):
                    found.add(f"{transcript}/{kind}/{field}")
            if carries_planted(record.get("toolUseResult")):
                found.add(f"{transcript}/{kind}/toolUseResult:{tools[record['sourceToolUseID']]}")
    return found


#: Where each place hides the planted text (``planted.py``): every kind of text a transcript carries that the user
#: did not type in that session.
PLANTED_AT = {
    "read": {"main/user/tool_result:Read", "main/user/toolUseResult:Read"},
    "web_fetch": {"main/user/tool_result:WebFetch", "main/user/toolUseResult:WebFetch"},
    "bash": {"main/user/tool_result:Bash", "main/user/toolUseResult:Bash"},
    "tool_use_result": {"main/user/toolUseResult:Bash"},
    "subagent": {"main/user/tool_result:Task", "main/user/toolUseResult:Task", "subagent/user/text",
                 "subagent/assistant/text"},
    "assistant": {"main/assistant/text"},
    "notification": {"main/user/text"},
    "pasted": {"main/user/text"},
    "codex_output": {"codex/response_item/function_call_output"},
}


@pytest.mark.parametrize("planted", [PLANTED, PARAPHRASED], ids=["verbatim", "paraphrased"])
def test_every_place_plants_the_instruction_where_it_says(tmp_path, planted):
    """A place that planted nothing, or planted it elsewhere, would let its red-team case pass testing nothing."""
    project = tmp_path / "project"
    found = {}
    for place in PLACES:
        home = tmp_path / place
        if place == "codex_output":
            write_codex(home, project, planted)
        else:
            write_claude(home, project, place, planted)
        found[place] = planted_at(home)
    assert found == PLANTED_AT
    assert set(CLAUDE_PLACES) == set(PLACES) - {"codex_output"}
    # the clean transcripts plant nothing: what the places add is the only planted text
    assert planted_at(write_claude(tmp_path / "clean", project, "none", planted)) == set()


@pytest.mark.parametrize("gate_mode", ["on", "off"])
def test_an_edit_that_carries_a_secret_never_reaches_a_document(tmp_path, api, gate_mode):
    secrets = [f"Authenticate to the registry with {FAKE_SECRET} when you install.",
               "Authenticate to the registry with [REDACTED:github_token] when you install."]
    result, project, _ = night(tmp_path, api, "read", gate_mode=gate_mode, proposals=secrets)
    diagnostics = result.diagnostics
    assert diagnostics.status == "accepted" and "- Use `pnpm`, never `npm`" in files_text(project)
    assert FAKE_SECRET not in files_text(project) and "REDACTED" not in files_text(project)
    assert FAKE_SECRET not in json.dumps(diagnostics.model_dump(mode="json")).replace(
        json.dumps(secrets[0])[1:-1], "")  # the proposal itself is shown as proposed, never as a reason
    reasons = [edit.reason for edit in diagnostics.edits if edit.reason.startswith(SECRET)]
    assert len(reasons) >= 2 and all(FAKE_SECRET not in reason for reason in reasons)
    assert "carries a secret" in diagnostics.summary


def test_a_candidate_built_elsewhere_is_checked_again_before_it_is_staged(tmp_path, api, monkeypatch):
    """Whatever built the candidate (tonight's step, or a pending candidate kept by an older version), a line no
    user typed stops it before anything is staged or adopted."""
    from skillopt_sleep.archive.around_step import AcrossNights, Outcome

    def planted_outcome(self, step):
        candidate = dict(step.candidate) or dict(self.baseline)
        candidate["memory"] = candidate["memory"].replace(
            "<!-- skillopt-sleep:end -->", f"- {PLANTED}\n<!-- skillopt-sleep:end -->")
        return Outcome(True, candidate, step.gate)

    monkeypatch.setattr(AcrossNights, "decide", planted_outcome)
    result, project, _ = night(tmp_path, api, "read", gate_mode="off", proposals=[])
    diagnostics = result.diagnostics
    assert diagnostics.status == "rejected" and diagnostics.applied == [] and diagnostics.proposed == []
    assert not (result.night_dir / "proposed").exists()
    assert any(error["stage"] == "provenance" and "evil.example" in error["message"] for error in diagnostics.errors)
    assert all(marker not in files_text(project) for marker in MARKERS)


def test_what_the_user_typed_on_an_earlier_night_is_provenance(tmp_path, api):
    """The archive keeps what users typed: a command typed on night 1 may be named by an edit on night 2, and is
    blocked on a first night that never saw it."""
    from transcripts import PNPM_CONVERSATIONS, write_claude_sessions

    proposal = "- Run `make check` before you answer."
    stand_in = StandIn([proposal])
    api.expect_request("/v1/chat/completions", method="POST").respond_with_handler(stand_in)
    project = tmp_path / "project"
    project.mkdir()

    def run(home: Path, conversations, state: Path):
        write_claude_sessions(home, project, conversations)
        config = SleepConfig(backend="openai", base_url=api.url_for("/v1"), api_key="sk-test", target_model="t",
                             optimizer_model="o", claude_home=home, lookback_hours=0, gate_mode="off",
                             max_retries=0)
        return run_night(config, project=project, state_root=state).diagnostics

    typed = [("please run `make check` and then install the deps for this repo", "Run `npm install`.", CORRECTION)]
    later = PNPM_CONVERSATIONS[1:5]
    first = run(tmp_path / "claude-1", typed, tmp_path / "state")
    second = run(tmp_path / "claude-2", later, tmp_path / "state")
    fresh = run(tmp_path / "claude-3", later, tmp_path / "state-fresh")
    applied = [edit.content for edit in second.edits if edit.status == "applied"]
    assert first.status == "accepted" and proposal in applied, [(e.content, e.reason) for e in second.edits]
    assert any(edit.content == proposal and edit.reason.startswith(NO_USER_PROVENANCE) for edit in fresh.edits)
