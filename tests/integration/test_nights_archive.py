"""The archive across nights (``skillopt_sleep.archive``), through ``run_night`` with the mock simulator, night
after night.

The world (``tests/transcripts.write_claude_sessions``): each session is one request, an answer, the
user's reaction and an apology. Requests about "this repo" carry the correction "no, we use pnpm in this repo,
never npm", so their judge wants "pnpm" and no "npm"; the mock target passes them only when a pnpm rule is in its
memory. Other requests ("write a haiku about autumn", ...) get a rubric judge that no pnpm rule changes.
Splits are a hash of the task id (``val_fraction`` 0.3, ``test_fraction`` 0): the request lists below were
chosen for the split each one hashes to (``VAL`` / ``TRAIN``), so each night's val set is known.

Each night gets new session files (a fresh session id), as a real night would: the harvest checkpoint makes an
old session unreadable twice.
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pytest

import skillopt_sleep.night as night_module
from skillopt_sleep.archive.tasks import TaskArchive
from skillopt_sleep.backends.base import ChatRequest, ChatResult
from skillopt_sleep.backends.mock import MockBackend
from skillopt_sleep.backends.select import BackendChoice
from skillopt_sleep.config import SleepConfig
from skillopt_sleep.mine import assign_split, task_id_for
from skillopt_sleep.night import run_night
from skillopt_sleep.state import ProjectPaths, load_state

PNPM = "no, we use pnpm in this repo, never npm"
REPHRASE = "no, that is not what I meant, try again"
NPM_TRAIN = ["add lodash to this repo", "how do I run the tests in this repo", "start the dev server of this repo",
             "remove the unused left-pad package from this repo", "build this repo for production"]
NPM_VAL = ["install the deps for this repo", "update the dependencies of this repo",
           "publish this repo package to the registry", "clean the node modules cache of this repo"]
OTHER_TRAIN = ["write a haiku about autumn", "explain what a monad is", "describe the water cycle",
               "define the word serendipity"]
OTHER_VAL = ["summarize the plot of hamlet", "translate good morning into german", "name three prime numbers",
             "list the planets of the solar system"]


def npm(*requests: str) -> list[tuple[str, str, str]]:
    return [(request, "Run `npm install` first.", PNPM) for request in requests]


def other(*requests: str) -> list[tuple[str, str, str]]:
    return [(request, "Here you go.", REPHRASE) for request in requests]


def named(*requests: str) -> list[tuple[str, str, str]]:
    """Requests whose correction names what was missing: their check ("contains Zephyr") is validated, so they are
    hard evidence that no pnpm rule changes (the mock target never says Zephyr)."""
    return [(request, "Here you go.", "no, it has to mention the Zephyr release") for request in requests]


def test_the_request_lists_hash_to_the_splits_their_names_say():
    for requests, split in ((NPM_TRAIN, "train"), (NPM_VAL, "val"), (OTHER_TRAIN, "train"), (OTHER_VAL, "val")):
        assert {assign_split(task_id_for(request), 0.3, 0.0) for request in requests} == {split}


class World:
    """A project, its Claude Code home, its state dir, and one scripted mock backend per night."""

    def __init__(self, tmp_path: Path, write_sessions, monkeypatch):
        self.tmp_path = tmp_path
        self.project = tmp_path / "project"
        self.project.mkdir()
        self.claude_home = tmp_path / "claude"
        self.state_root = tmp_path / "state"
        self._write = write_sessions
        self.backends: list[MockBackend] = []
        self.next_backend: MockBackend | None = None
        monkeypatch.setattr(night_module, "choose_backend", self._choose)

    def _choose(self, config, sources):
        backend = self.next_backend or MockBackend()
        self.next_backend = None
        self.backends.append(backend)
        return BackendChoice(backend=backend, name="mock", reason="test")

    def memory_file(self, text: str) -> None:
        (self.project / "CLAUDE.md").write_text(text, encoding="utf-8")

    def sessions(self, conversations: list[tuple[str, str, str]]) -> None:
        """Write the conversations as new session files (fresh session ids)."""
        staging = self.tmp_path / f"staging-{uuid.uuid4().hex[:8]}"
        folder = self._write(staging, self.project, conversations)
        target = self.claude_home / "projects" / folder.name
        target.mkdir(parents=True, exist_ok=True)
        for path in folder.glob("*.jsonl"):
            fresh = str(uuid.uuid4())
            (target / f"{fresh}.jsonl").write_text(path.read_text().replace(path.stem, fresh))
        shutil.rmtree(staging)

    def config(self, **overrides) -> SleepConfig:
        settings = dict(backend="mock", source="claude", scope="project", claude_home=self.claude_home,
                        lookback_hours=0, workers=1, val_fraction=0.3, test_fraction=0.0, gate_samples=1)
        return SleepConfig(**{**settings, **overrides})

    def night(self, conversations=None, *, backend: MockBackend | None = None, **overrides):
        if conversations:
            self.sessions(conversations)
        self.next_backend = backend
        result = run_night(self.config(**overrides), project=self.project, state_root=self.state_root)
        assert result.diagnostics.status in ("accepted", "rejected"), result.diagnostics.summary
        return result

    @property
    def paths(self) -> ProjectPaths:
        return ProjectPaths(self.project, self.state_root)

    def archive(self) -> TaskArchive:
        return TaskArchive(self.paths.archive)

    def reflect_prompts(self, night: int) -> list[str]:
        backend = self.backends[night]
        return [request.messages[-1].content if len(request.messages) == 1 else request.messages[0].content
                for request in backend.requests if MockBackend.prompt_kind(request) == "reflect"]


@pytest.fixture
def world(tmp_path, write_sessions, monkeypatch) -> World:
    made = World(tmp_path, write_sessions, monkeypatch)
    made.memory_file("# Web app\n\nHand-written notes.\n")
    return made


def edits_reply(*contents: str) -> str:
    return json.dumps({"edits": [{"target": "memory", "op": "append", "anchor": None, "content": content,
                                  "rationale": "scripted", "evidence": []} for content in contents]})


def context_of(prompt: str) -> str:
    """The ``## Context`` section of a reflect prompt ("" when there is none)."""
    if "## Context\n" not in prompt:
        return ""
    return prompt.split("## Context\n", 1)[1].split("## Tasks", 1)[0]


# --------------------------------------------------------------------------- the archive


def test_the_archive_dedupes_tasks_across_nights_with_recurrence_and_score_history(world):
    first = world.night(npm(*NPM_TRAIN[:3], NPM_VAL[0]))
    second = world.night(npm(NPM_TRAIN[0], NPM_VAL[0], NPM_TRAIN[3]))
    with world.archive() as archive:
        assert archive.count() == 5  # 4 tasks, then 2 of them again and 1 new
        repeated = archive.get(task_id_for(NPM_TRAIN[0]))
        assert (repeated.recurrence, repeated.nights) == (2, 2)
        assert (repeated.first_night, repeated.last_night) == (first.diagnostics.night_id,
                                                                second.diagnostics.night_id)
        assert archive.get(task_id_for(NPM_TRAIN[1])).nights == 1
        history = archive.history(task_id_for(NPM_TRAIN[0]))
        assert [row.night_id for row in history] == [first.diagnostics.night_id, second.diagnostics.night_id]
        assert all(row.split == "train" and row.hard == 0.0 and row.samples == 1 for row in history)
        val_history = archive.history(task_id_for(NPM_VAL[0]))
        assert {row.split for row in val_history} == {"val"}
        # on night 1 the val task has a baseline and a candidate entry, told apart by the documents replayed;
        # the baseline's documents are those the train tasks were replayed with
        night_one = [row for row in val_history if row.night_id == first.diagnostics.night_id]
        assert len(night_one) == 2 and night_one[0].documents != night_one[1].documents
        assert history[0].documents in [row.documents for row in night_one]
    assert second.diagnostics.memory["archive"] == {"search": "fts5", "new": 1, "recurring": 2, "total": 5}
    assert stat_mode(world.paths.archive) == 0o600


def stat_mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


# --------------------------------------------------------------------------- recall


def test_recall_shows_similar_past_train_tasks_and_never_a_val_task(world):
    world.night(npm(*NPM_TRAIN, *NPM_VAL[:2]) + other(OTHER_VAL[0]))
    second = world.night(npm("add express to this repo", "how do I run the linter in this repo"))
    recalled = second.diagnostics.memory["recalled"]
    assert 1 <= len(recalled) <= 3
    assert set(recalled) <= {task_id_for(request) for request in NPM_TRAIN}
    contexts = [context_of(prompt) for prompt in world.reflect_prompts(1)]
    assert contexts and all("Similar past train tasks" in context for context in contexts)
    assert any("add lodash to this repo" in context for context in contexts)
    for prompt in world.reflect_prompts(1):
        for held_out in (*NPM_VAL[:2], OTHER_VAL[0]):
            assert held_out not in prompt


def test_an_edit_copying_a_recalled_request_is_rejected_as_a_restatement(world):
    world.night(npm(*NPM_TRAIN, NPM_VAL[0]))
    past = NPM_TRAIN[3]  # "remove the unused left-pad package from this repo", recalled by tonight's request
    copied = f"{past.capitalize()} [asked 1x over 1 night(s); last score hard 0.00, soft 0.00]"
    second = world.night(npm("remove the unused express package from this repo", NPM_VAL[1]),
                         propose_user_rules=False, backend=MockBackend(scripted={"reflect": [edits_reply(copied)]}))
    assert task_id_for(past) in second.diagnostics.memory["recalled"]
    [edit] = [edit for edit in second.diagnostics.edits if "left-pad" in (edit.content or "")]
    assert edit.status == "rejected" and edit.reason.startswith(f"restates task {task_id_for(past)}")
    assert "left-pad" not in (world.project / "CLAUDE.md").read_text()


def test_recall_k_zero_adds_no_recalled_tasks(world):
    world.night(npm(*NPM_TRAIN[:3], NPM_VAL[0]))
    second = world.night(npm("add express to this repo"), recall_k=0)
    assert second.diagnostics.memory["recalled"] == []
    assert all("Similar past train tasks" not in prompt for prompt in world.reflect_prompts(1))


# --------------------------------------------------------------------------- the rejected-edit ledger


def test_the_ledger_blocks_an_identical_edit_on_the_next_night(world):
    useless = "Always answer in French."
    # the scripted optimizer alone proposes edits (the users' stated pnpm rule would otherwise be proposed too)
    first = world.night(npm(*NPM_TRAIN[:2], NPM_VAL[0]), gate_rule="strict", propose_user_rules=False,
                        backend=MockBackend(scripted={"reflect": [edits_reply(useless)]}))
    assert first.diagnostics.gate.verdict == "reject" and first.diagnostics.gate.details["clause"] == "mean"
    night_one = first.diagnostics.night_id

    second = world.night(npm(NPM_TRAIN[2], NPM_VAL[1]), gate_rule="strict", propose_user_rules=False,
                         backend=MockBackend(scripted={"reflect": [edits_reply("  always answer in FRENCH ")]}))
    blocked = [edit for edit in second.diagnostics.edits if edit.reason.startswith("already rejected")]
    assert len(blocked) == 1 and blocked[0].status == "rejected"
    assert blocked[0].reason == f"already rejected on night {night_one}"
    # not re-tested: no document changed, so the gate had nothing to replay a candidate for
    assert second.diagnostics.gate.reason == "no edit changed a document: nothing to test"
    assert second.diagnostics.memory["ledger"] == {"shown": 1, "blocked": 1}
    assert "did not help" in context_of(world.reflect_prompts(1)[0])
    assert useless in context_of(world.reflect_prompts(1)[0])


# --------------------------------------------------------------------------- slow update


def test_slow_update_proposes_a_repair_when_a_document_change_made_an_old_task_fail(world):
    world.memory_file("# Web app\n\nAlways use pnpm, never npm.\n")
    first = world.night(npm(*NPM_TRAIN[:3], NPM_VAL[0]), slow_update_every=1)
    assert all(result.hard == 1 for result in first.diagnostics.train_results)  # the rule is in memory
    world.memory_file("# Web app\n\nHand-written notes.\n")  # the user dropped the rule

    second = world.night(other(*OTHER_TRAIN[:2], OTHER_VAL[0]), slow_update_every=1)
    slow = second.diagnostics.memory["slow_update"]
    assert slow["ran"] is True and slow["compared_night"] == first.diagnostics.night_id
    assert set(slow["forgotten"]) == {task_id_for(request) for request in NPM_TRAIN[:3]}
    assert NPM_VAL[0] not in json.dumps(slow)  # the val task is never replayed by the slow update
    assert any("pnpm" in repair for repair in slow["repairs"])
    context = context_of(world.reflect_prompts(1)[0])
    assert "Forgotten since night" in context and "Always use pnpm, never npm." in context
    # the forgotten tasks were reflected on as train tasks
    assert {task_id_for(request) for request in NPM_TRAIN[:3]} <= {r.task_id for r in second.diagnostics.train_results}


def test_slow_update_does_nothing_when_the_documents_did_not_change(world):
    world.night(npm(*NPM_TRAIN[:2], NPM_VAL[0]), slow_update_every=1)
    second = world.night(npm(NPM_TRAIN[2], NPM_VAL[1]), slow_update_every=1)
    slow = second.diagnostics.memory["slow_update"]
    assert slow["ran"] is False and "did not change" in slow["reason"]


# --------------------------------------------------------------------------- dreaming


class DreamingMock(MockBackend):
    """The mock simulator, plus paraphrases for dream prompts (schema with ``requests``): two variants of
    the request, and one copy of a held-out request (which must be dropped)."""

    def __init__(self, leak: str):
        super().__init__()
        self.leak = leak

    def chat(self, request: ChatRequest) -> ChatResult:
        if "requests" in (request.json_schema or {}).get("properties", {}):
            self.requests.append(request)
            asked = request.messages[0].content.split("## Request\n<data>\n", 1)[1].split("\n", 1)[0]
            variants = [f"please {asked} now", f"could you {asked}", self.leak]
            return ChatResult(text=json.dumps({"requests": variants}), model="mock-optimizer")
        return super().chat(request)


def test_dream_variants_are_extra_train_tasks_and_never_val_or_test(world):
    result = world.night(npm(*NPM_TRAIN[:2], NPM_VAL[0]), dream_factor=2, backend=DreamingMock(NPM_VAL[0]))
    diagnostics = result.diagnostics
    dream = diagnostics.memory["dream"]
    assert dream["calls"] == 2 and dream["variants"] == 4
    assert dream["dropped"] == {"equals_a_held_out_request": 2}
    variant_ids = set(dream["variant_of"])
    assert {r.task_id for r in diagnostics.train_results} == variant_ids | {task_id_for(r) for r in NPM_TRAIN[:2]}
    assert all(task_id.startswith("d-") for task_id in variant_ids)
    assert not variant_ids & {comparison.task_id for comparison in diagnostics.gate.per_task}
    assert diagnostics.tasks == {"total": 3, "train": 2, "val": 1, "test": 0, "val_gated": 1, "not_replayable": 0,
                                 "hard_evidence": 3}  # mined tasks only
    with world.archive() as archive:
        assert archive.count() == 3 and all(archive.get(task_id) is None for task_id in variant_ids)


# --------------------------------------------------------------------------- the pending candidate


def pending_first_night(world: World):
    """Night 1: the pnpm rule is proposed from npm train tasks, but the val tasks are unrelated and judged by a
    rubric only (soft evidence, never gated): the gate has no val task to test on and leaves it pending."""
    first = world.night(npm(*NPM_TRAIN[:2]) + other(*OTHER_VAL[:2]))
    assert first.diagnostics.gate.details["pending"] is True
    assert first.diagnostics.gate.details["clause"] == "no_tasks"
    state = load_state(world.paths)
    assert state.pending is not None and state.pending.night_id == first.diagnostics.night_id
    assert state.pending.tested_val_ids == []
    assert first.diagnostics.pending["action"] == "stored"
    return first


def test_a_pending_candidate_that_wins_on_fresh_val_tasks_is_promoted_next_night(world):
    first = pending_first_night(world)
    second = world.night(npm(NPM_TRAIN[2], *NPM_VAL[:2]))
    pending = second.diagnostics.pending
    assert pending["action"] == "promoted" and pending["from_night"] == first.diagnostics.night_id
    assert sorted(pending["fresh_val_ids"]) == sorted(task_id_for(r) for r in NPM_VAL[:2])
    assert pending["retest"]["wins"] == 2 and pending["retest"]["losses"] == 0
    assert second.diagnostics.status == "accepted"
    proposed = (second.night_dir / "proposed" / "CLAUDE.md").read_text()
    assert "- use `pnpm`, never `npm install`" in proposed.lower()  # the command both corrected answers ran
    state = load_state(world.paths)
    assert state.pending is None and state.current_documents["memory"]


def test_a_pending_candidate_that_does_not_win_is_dropped_and_never_retested_again(world):
    first = pending_first_night(world)
    # the optimizer's path alone: a rule the user states again gets one more test (see the test below)
    second = world.night(npm(NPM_TRAIN[2]) + named(*OTHER_VAL[2:]), propose_user_rules=False)
    pending = second.diagnostics.pending
    assert pending["action"] == "dropped" and pending["from_night"] == first.diagnostics.night_id
    assert pending["retest"]["wins"] == 0 and pending["retest"]["verdict"] == "reject"
    with world.archive() as archive:  # its edit is now in the rejected-edit ledger
        assert [entry["night_id"] for entry in archive.rejected_edits()
                if "pnpm" in entry["content"]] == [second.diagnostics.night_id]
    # tonight's optimizer was told, and did not get the dropped rule tested again
    assert "did not help" in context_of(world.reflect_prompts(1)[0])
    assert "we use pnpm in this repo, never npm" in context_of(world.reflect_prompts(1)[0])
    assert not [edit for edit in second.diagnostics.edits if edit.status == "applied" and "pnpm" in edit.content]
    state = load_state(world.paths)
    assert state.pending is None or state.pending.night_id == second.diagnostics.night_id  # never night 1's
    third = world.night(npm(NPM_TRAIN[3]) + other(OTHER_TRAIN[0]))
    assert (third.diagnostics.pending or {}).get("from_night") != first.diagnostics.night_id


def test_a_stated_user_rule_the_gate_rejected_is_not_proposed_again_the_next_night(world):
    # The users' rules are proposed by the step itself (not by an optimizer reply): the ledger must screen them too.
    from skillopt_sleep.archive.rejected_edits import RejectedEditScreen, rejected_edit_key
    from skillopt_sleep.mine.rulebook import stated_rules, user_rule_edits
    from skillopt_sleep.models import EditRecord, TaskRecord

    rule = EditRecord(target="memory", op="append", content="we use pnpm in this repo, never npm")
    screen = RejectedEditScreen(meter=None, rejected={rejected_edit_key(rule): "n1"})
    task = TaskRecord(id="t-1", source="claude", request="install deps", rules=["We use pnpm in this repo, never npm"])
    proposed = user_rule_edits(stated_rules([task]), {"memory": ""}, target="memory")
    assert proposed and screen.filter(proposed) == []
    assert screen.blocked[0].reason == "already rejected on night n1"


def test_a_rule_the_user_keeps_stating_is_retested_until_rejected_on_two_nights(tmp_path):
    from skillopt_sleep.archive.rejected_edits import STATED_RULE_REJECTIONS, rejected_keys, stated_rule_keys
    from skillopt_sleep.archive.tasks import TaskArchive

    archive = TaskArchive(tmp_path / "archive.sqlite3")
    entry = dict(key="memory|append|use pnpm, never npm", target="memory", op="append", anchor=None,
                 content="- Use pnpm, never npm.", reason="paired gate: regression")
    assert archive.add_rejected_edit(night_id="n1", **entry) is True
    assert rejected_keys(archive) == {entry["key"]: "n1"}  # the optimizer's identical edit is blocked at once
    assert stated_rule_keys(archive) == {}  # the user's own rule gets another test
    assert archive.add_rejected_edit(night_id="n1", **entry) is False  # the same night counts once
    assert stated_rule_keys(archive) == {}
    archive.add_rejected_edit(night_id="n2", **entry)
    assert STATED_RULE_REJECTIONS == 2 and stated_rule_keys(archive) == {entry["key"]: "n1"}
    assert archive.rejected_edits()[0]["rejections"] == 2
