"""The archive features (``skillopt_sleep.archive``), unit by unit: the rejected-edit ledger and its screen, the
context, the document store, dreaming, the pending candidate's re-test rules and the slow update's schedule."""

from __future__ import annotations

import json
import stat

import pytest

from skillopt_sleep.archive.context import build_context, render_rejected_edits
from skillopt_sleep.archive.docstore import DocumentStore
from skillopt_sleep.archive.dream import dream_variants, variant_id
from skillopt_sleep.archive.pending import retest_pending
from skillopt_sleep.archive.rejected_edits import RejectedEditScreen, rejected_edit_key
from skillopt_sleep.archive.slow_update import HISTORY_NIGHTS, is_due, record_night_documents
from skillopt_sleep.backends.base import CallMeter, ChatMessage, ChatRequest
from skillopt_sleep.backends.mock import MockBackend
from skillopt_sleep.engine.reflect import edits_schema
from skillopt_sleep.engine.replay import ReplayCache, Replayer
from skillopt_sleep.engine.step import StepSettings
from skillopt_sleep.hashing import sha256_text
from skillopt_sleep.models import Check, EditRecord, Judge, TaskRecord
from skillopt_sleep.state import PendingCandidate, ProjectState


def edit(content: str, *, op: str = "append", target: str = "memory", anchor: str | None = None) -> EditRecord:
    return EditRecord(target=target, op=op, anchor=anchor, content=content)


def task(task_id: str, request: str, split: str = "train") -> TaskRecord:
    return TaskRecord(id=task_id, source="claude", request=request, split=split, rules=["Use pnpm, not npm"],
                      judge=Judge(checks=[Check(op="contains", value="pnpm")]))


def optimizer_request(schema: dict) -> ChatRequest:
    return ChatRequest(role="optimizer", messages=[ChatMessage(role="user", content="reflect")], json_schema=schema)


# --------------------------------------------------------------------------- the rejected-edit ledger


def test_rejected_edit_keys_ignore_case_spacing_and_final_punctuation_but_not_target_or_op():
    assert rejected_edit_key(edit("Use pnpm,  not npm.")) == rejected_edit_key(edit("use PNPM, not npm"))
    assert rejected_edit_key(edit("Use pnpm")) != rejected_edit_key(edit("Use pnpm", target="skill"))
    assert rejected_edit_key(edit("Use pnpm")) != rejected_edit_key(edit("Use pnpm", op="replace", anchor="x"))
    # a prepend adds the line as an append does (only its place differs): rejected once, rejected in either op
    assert rejected_edit_key(edit("Use pnpm", op="prepend")) == rejected_edit_key(edit("Use pnpm"))
    # a delete has no content: its anchor tells two deletes apart
    assert (rejected_edit_key(edit("", op="delete", anchor="- old rule A"))
            != rejected_edit_key(edit("", op="delete", anchor="- old rule B")))


def test_the_screen_drops_ledger_edits_from_an_optimizer_reply_and_keeps_the_others():
    reply = json.dumps({"edits": [edit("Always answer in French.").model_dump(),
                                  edit("Run the tests before answering.").model_dump()]})
    meter = CallMeter(MockBackend(scripted={"reflect": [reply]}))
    screen = RejectedEditScreen(meter, {rejected_edit_key(edit("always answer in french")): "2026-01-01T000000Z"})
    result = screen.chat(optimizer_request(edits_schema(3, ["memory"])))
    contents = [item["content"] for item in json.loads(result.text)["edits"]]
    assert contents == ["Run the tests before answering."]
    assert [(e.content, e.status, e.reason) for e in screen.blocked] == [
        ("Always answer in French.", "rejected", "already rejected on night 2026-01-01T000000Z")]
    assert screen.calls == 1  # everything but chat is the wrapped meter's


def test_the_screen_leaves_replies_without_a_ledger_edit_untouched():
    reply = '```json\n{"edits": [{"target": "memory", "op": "append", "content": "Keep answers short."}]}\n```'
    meter = CallMeter(MockBackend(scripted={"reflect": [reply]}))
    screen = RejectedEditScreen(meter, {rejected_edit_key(edit("something else")): "n1"})
    assert screen.chat(optimizer_request(edits_schema(3, ["memory"]))).text == reply
    assert screen.blocked == []


def test_build_context_gives_every_section_a_share_of_the_limit():
    long_section = "x" * 5000
    context = build_context(long_section, "", "recall: short section", limit=1000)
    assert len(context) <= 1000
    assert context.endswith("recall: short section")
    assert "[... cut]" in context
    assert build_context("", "  ") == ""


def test_render_rejected_edits_shows_each_rejected_edit_with_its_night():
    text = render_rejected_edits([{"target": "memory", "op": "append", "anchor": None, "content": "Answer in French",
                           "night_id": "n7"}])
    assert "did not help" in text and "[memory append] Answer in French (night n7)" in text


# --------------------------------------------------------------------------- the document store


def test_the_document_store_keeps_texts_by_hash_privately_and_prunes_unreferenced_ones(tmp_path):
    store = DocumentStore(tmp_path / "documents")
    keep, drop = store.put("# notes\nUse pnpm\n"), store.put("# old notes\n")
    assert keep == sha256_text("# notes\nUse pnpm\n")
    assert store.get(keep) == "# notes\nUse pnpm\n"
    assert stat.S_IMODE((tmp_path / "documents" / keep).stat().st_mode) == 0o600
    assert store.prune({keep}) == [drop]
    assert store.get(drop) is None and store.get(keep) is not None


def test_a_tampered_stored_text_is_not_returned(tmp_path):
    store = DocumentStore(tmp_path)
    digest = store.put("original")
    (tmp_path / digest).write_text("changed")
    assert store.get(digest) is None
    assert store.get("../etc/passwd") is None


# --------------------------------------------------------------------------- dreaming


def test_dream_variants_are_train_tasks_with_the_judge_and_rules_of_their_task():
    reply = json.dumps({"requests": ["add lodash to the repo please", "install lodash here",
                                     "install the deps", "install lodash here", "", "one too many"]})
    meter = CallMeter(MockBackend(scripted={"reflect": [reply]}))
    source = task("t-1", "add lodash to this repo")
    held_out = [task("t-2", "Install the deps.", split="val")]
    outcome = dream_variants([source, held_out[0]], factor=2, meter=meter, held_out=held_out, workers=1)
    assert outcome.calls == 1  # the val task is not dreamed on
    assert [v.request for v in outcome.variants] == ["add lodash to the repo please", "install lodash here"]
    assert outcome.dropped == {"equals_a_held_out_request": 1, "duplicate": 1, "empty_or_too_long": 1,
                               "over_factor": 1}
    for variant in outcome.variants:
        assert variant.split == "train" and variant.id == variant_id(variant.request)
        assert variant.judge == source.judge and variant.rules == source.rules
        assert outcome.variant_of[variant.id] == "t-1"


def test_an_unusable_dream_reply_gives_no_variants_and_an_error():
    meter = CallMeter(MockBackend(scripted={"reflect": ["I cannot do that."]}))
    outcome = dream_variants([task("t-1", "add lodash")], factor=2, meter=meter, held_out=[], workers=1)
    assert outcome.variants == [] and outcome.errors[0]["task_id"] == "t-1"


def test_dream_factor_zero_makes_no_call():
    backend = MockBackend()
    assert dream_variants([task("t-1", "x")], factor=0, meter=CallMeter(backend), held_out=[]).variants == []
    assert backend.calls == 0


# --------------------------------------------------------------------------- the pending candidate


def pending_record(store: DocumentStore, *, baseline: str, candidate: str, tested=("t-val-1",)) -> PendingCandidate:
    return PendingCandidate(night_id="n1", documents={"memory": store.put(candidate)},
                            baseline={"memory": store.put(baseline)}, tested_val_ids=list(tested), wins=1,
                            losses=0)


def retest(store: DocumentStore, pending, documents, val):
    backend = MockBackend()
    meter = CallMeter(backend)
    outcome = retest_pending(pending, Replayer(meter, workers=1, cache=ReplayCache(), seed=0), documents=documents,
                             val=val, settings=StepSettings(edit_budget=1, gate_samples=1), store=store,
                             best_gate_score=None)
    return outcome, backend


@pytest.fixture
def store(tmp_path) -> DocumentStore:
    return DocumentStore(tmp_path / "documents")


def test_a_pending_candidate_is_dropped_without_replays_when_the_baseline_changed(store):
    pending = pending_record(store, baseline="# notes\n", candidate="# notes\nUse pnpm, not npm\n")
    outcome, backend = retest(store, pending, {"memory": "# notes\nedited by the user\n"},
                              [task("t-val-2", "install the deps", split="val")])
    assert outcome.action == "dropped" and "changed" in outcome.reason and backend.calls == 0


def test_a_pending_candidate_waits_when_no_val_task_is_fresh(store):
    pending = pending_record(store, baseline="# notes\n", candidate="# notes\nUse pnpm, not npm\n")
    outcome, backend = retest(store, pending, {"memory": "# notes\n"},
                              [task("t-val-1", "install the deps", split="val")])
    assert outcome.action == "kept" and backend.calls == 0


def test_a_pending_candidate_is_promoted_when_it_wins_on_fresh_val_tasks(store):
    pending = pending_record(store, baseline="# notes\n", candidate="# notes\nUse pnpm, not npm\n")
    fresh = [task("t-val-2", "install the deps with npm", split="val"),
             task("t-val-3", "update the npm packages", split="val")]
    outcome, _backend = retest(store, pending, {"memory": "# notes\n"},
                               [task("t-val-1", "old", split="val"), *fresh])
    assert outcome.action == "promoted", outcome.reason
    assert outcome.fresh_val_ids == ["t-val-2", "t-val-3"]
    assert outcome.documents == {"memory": "# notes\nUse pnpm, not npm\n"}
    assert outcome.report()["retest"]["wins"] == 2


def test_a_pending_candidate_that_only_ties_is_dropped(store):
    pending = pending_record(store, baseline="# notes\n", candidate="# notes\nUse pnpm, not npm\n")
    unrelated = [task("t-val-2", "write a haiku about autumn", split="val")]
    outcome, _backend = retest(store, pending, {"memory": "# notes\n"}, unrelated)
    assert outcome.action == "dropped" and outcome.gate is not None and outcome.gate.verdict == "reject"


# --------------------------------------------------------------------------- the slow update's schedule


@pytest.mark.parametrize(("completed", "last", "every", "due"),
                         [(6, 0, 7, True), (5, 0, 7, False), (13, 7, 7, True), (12, 7, 7, False), (40, 0, 0, False)])
def test_the_slow_update_is_due_every_n_nights(completed, last, every, due):
    assert is_due(ProjectState(nights_completed=completed, slow_update_at=last), every) is due


def test_night_documents_are_recorded_and_unreferenced_texts_pruned(tmp_path):
    store = DocumentStore(tmp_path)
    state = ProjectState()
    for number in range(HISTORY_NIGHTS + 2):
        record_night_documents(state, store, night_id=f"n{number}", baseline={"memory": f"night {number}\n"},
                               accepted=None)
        state.nights_completed += 1
    assert len(state.document_history) == HISTORY_NIGHTS
    assert state.document_history[0].night_id == "n2" and state.document_history[0].number == 3
    assert store.get(sha256_text("night 0\n")) is None
    assert store.get(sha256_text(f"night {HISTORY_NIGHTS + 1}\n")) == f"night {HISTORY_NIGHTS + 1}\n"
