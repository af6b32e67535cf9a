"""Aggregate and select: exact dedupe, one merge call per group, one rank call, and safe fallbacks."""

from __future__ import annotations

import json

from skillopt_sleep.backends.base import CallMeter
from skillopt_sleep.backends.mock import MockBackend
from skillopt_sleep.engine.aggregate import (
    PatchList,
    dedupe_edits,
    merge_patches,
    parse_order,
    rank_edits,
    render_patch_lists,
)
from skillopt_sleep.engine.reflect import parse_edits
from skillopt_sleep.models import EditRecord
from skillopt_sleep.prompts import PATCH_LIST_HEADER


def edit(content: str, *evidence: str, target: str = "memory", op: str = "append",
         anchor: str | None = None) -> EditRecord:
    return EditRecord(target=target, op=op, anchor=anchor, content=content, evidence=list(evidence))


def test_dedupe_joins_exact_duplicates_up_to_case_and_spacing_and_keeps_their_evidence():
    edits = [edit("Use pnpm, not npm", "t-1"), edit("use  PNPM, not npm ", "t-2", "t-1"), edit("Use ruff", "t-3")]
    deduped = dedupe_edits(edits)
    assert [e.content for e in deduped] == ["Use pnpm, not npm", "Use ruff"]
    assert deduped[0].evidence == ["t-1", "t-2"]
    assert edits[0].evidence == ["t-1"]  # the input is not changed


def test_dedupe_keeps_edits_that_differ_in_target_op_or_anchor():
    edits = [edit("Use pnpm", target="memory"), edit("Use pnpm", target="skill"),
             edit("Use pnpm", op="insert_after", anchor="- a"), edit("Use pnpm", op="insert_after", anchor="- b")]
    assert len(dedupe_edits(edits)) == 4


def test_the_old_op_name_add_is_read_as_append():
    assert EditRecord(target="memory", op="add", content="x").op == "append"
    parsed, invalid = parse_edits(json.dumps({"edits": [{"target": "memory", "op": "ADD", "content": "Use pnpm"}]}))
    assert [(e.op, e.content) for e in parsed] == [("append", "Use pnpm")] and invalid == 0


def test_patch_lists_render_with_headers_the_mock_and_the_merge_prompt_agree_on():
    text = render_patch_lists([PatchList(kind="failure", edits=[edit("Use pnpm", "t-1")]),
                               PatchList(kind="success", edits=[edit("Use ruff", "t-2")])])
    headers = PATCH_LIST_HEADER.findall(text)
    assert headers == [("1", "failing"), ("2", "passing")]
    assert json.loads(text.splitlines()[1])["content"] == "Use pnpm"


def test_merge_combines_the_same_rule_from_two_lists_into_one_edit_with_joined_evidence():
    backend = MockBackend()
    first = PatchList(kind="failure", edits=[edit("Use pnpm, not npm.", "t-1"), edit("Use ruff", "t-2")])
    second = PatchList(kind="failure", edits=[edit("use pnpm, not npm", "t-3")])
    outcome = merge_patches([first, second], skill="", memory="# Notes", targets=["memory"], meter=CallMeter(backend))
    assert outcome.error is None
    assert [(e.content, e.evidence) for e in outcome.edits] == [("Use pnpm, not npm.", ["t-1", "t-3"]),
                                                                ("Use ruff", ["t-2"])]
    assert backend.calls_by_kind == {"merge": 1}
    # the reply may not hold more edits than the group's distinct input edits (3 here: no exact duplicate)
    assert backend.requests[0].json_schema["properties"]["edits"]["maxItems"] == 3


def test_an_unusable_merge_reply_falls_back_to_the_deduped_lists_after_one_retry():
    backend = MockBackend(scripted={"merge": ["no idea", "still no JSON"]})
    outcome = merge_patches([PatchList(kind="failure", edits=[edit("Use pnpm", "t-1")]),
                             PatchList(kind="success", edits=[edit("use pnpm", "t-2"), edit("Use ruff", "t-3")])],
                            skill="", memory="", targets=["memory"], meter=CallMeter(backend))
    assert backend.calls_by_kind == {"merge": 2}
    assert outcome.error and "deduped concatenation" in outcome.error
    assert [(e.content, e.evidence) for e in outcome.edits] == [("Use pnpm", ["t-1", "t-2"]), ("Use ruff", ["t-3"])]


def test_parse_order_accepts_a_full_or_partial_order_of_distinct_numbers_in_range():
    assert parse_order('{"order": [2, 0, 1]}', 3) == [2, 0, 1]
    assert parse_order("[1]", 3) == [1, 0, 2]  # unlisted edits follow in merged order
    assert parse_order('Sure: {"order": ["2", 0]}', 3) == [2, 0, 1]


def test_parse_order_names_what_is_wrong_with_an_invalid_reply():
    assert "out of range" in parse_order('{"order": [0, 3]}', 3)
    assert "twice" in parse_order('{"order": [1, 1]}', 3)
    assert "not an edit number" in parse_order('{"order": [true]}', 3)
    assert "no non-empty" in parse_order("the first one is best", 3)
    assert "no non-empty" in parse_order('{"order": []}', 3)


def test_the_mock_ranks_edits_backed_by_more_tasks_first():
    backend = MockBackend()
    edits = [edit("Use ruff", "t-1"), edit("Use pnpm", "t-2", "t-3", "t-4"), edit("Use uv", "t-5", "t-6")]
    outcome = rank_edits(edits, keep=2, skill="", memory="", meter=CallMeter(backend))
    assert outcome.fallback is None
    assert outcome.order == [1, 2, 0]
    assert backend.calls_by_kind == {"rank": 1}
    assert "Only 2 of the 3 edits" in backend.requests[0].messages[0].content


def test_an_invalid_rank_reply_keeps_the_merged_order_and_says_why():
    backend = MockBackend(scripted={"rank": ['{"order": [0, 7]}']})
    outcome = rank_edits([edit("a"), edit("b"), edit("c")], keep=1, skill="", memory="", meter=CallMeter(backend))
    assert outcome.order == [0, 1, 2]
    assert outcome.fallback and "out of range" in outcome.fallback
    assert backend.calls_by_kind == {"rank": 1}  # one call, no retry


def test_a_failed_rank_call_is_a_fallback_not_a_failed_night():
    backend = MockBackend(fail_with="timed out", fail_kind="transient", fail_roles=["optimizer"])
    outcome = rank_edits([edit("a"), edit("b")], keep=1, skill="", memory="", meter=CallMeter(backend))
    assert outcome.order == [0, 1] and "timed out" in outcome.fallback
