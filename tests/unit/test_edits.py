"""Edits apply only inside the managed block, with exact anchors, and never touch the user's text."""

from __future__ import annotations

import pytest
import yaml

from skillopt_sleep.documents.block import (
    BLOCK_BEGIN,
    BLOCK_END,
    BLOCK_HEADING,
    TEAM_HEADING,
    ensure_block,
    managed_block,
    new_skill_document,
    team_line,
)
from skillopt_sleep.engine.edits import apply_edits
from skillopt_sleep.models import EditRecord

BEFORE = "# Project notes\n\n\n\nKeep   these    spaces.   \n- a\n\n"
AFTER = "\n\n\nTail written by the user.\n\n\n"


def document(*lines: str) -> str:
    return BEFORE + "\n".join([BLOCK_BEGIN, *lines, "", BLOCK_END]) + "\n" + AFTER


def edit(op, content="", anchor=None, target="skill") -> EditRecord:
    return EditRecord(target=target, op=op, anchor=anchor, content=content)


def outside(doc: str) -> tuple[str, str]:
    start = doc.index(BLOCK_BEGIN)
    end = doc.index(BLOCK_END) + len(BLOCK_END)
    return doc[:start], doc[end:]


def test_add_appends_to_the_end_of_the_block_and_keeps_outside_bytes():
    doc = document("- use pnpm")
    new, (record,) = apply_edits(doc, [edit("add", "- run tests with pytest -q  ")], "skill")
    assert record.status == "applied"
    assert managed_block(new) == "- use pnpm\n- run tests with pytest -q"
    assert outside(new) == outside(doc)
    assert f"- run tests with pytest -q\n\n{BLOCK_END}" in new


def test_insert_after_places_content_after_the_anchor_line():
    doc = document("- one", "- three")
    new, (record,) = apply_edits(doc, [edit("insert_after", "- two", anchor="- one")], "skill")
    assert record.status == "applied"
    assert managed_block(new) == "- one\n- two\n- three"


def test_replace_and_delete_act_on_the_exact_anchor_lines():
    doc = document("- one", "- two", "- three")
    new, records = apply_edits(doc, [
        edit("replace", "- 2", anchor="- two"),
        edit("delete", anchor="- one"),
    ], "skill")
    assert [r.status for r in records] == ["applied", "applied"]
    assert managed_block(new) == "- 2\n- three"


def test_a_multi_line_anchor_matches_a_contiguous_run_of_lines():
    doc = document("- one", "- two", "- three")
    new, (record,) = apply_edits(doc, [edit("delete", anchor="- one\n- two")], "skill")
    assert record.status == "applied"
    assert managed_block(new) == "- three"


def test_a_one_letter_anchor_never_deletes_lines_that_merely_contain_it():
    doc = document("- always run a build", "- avoid npm")
    new, (record,) = apply_edits(doc, [edit("delete", anchor="a")], "skill")
    assert record.status == "unmatched"
    assert "not found" in record.reason
    assert new is doc


def test_an_anchor_must_match_the_whole_line_not_a_substring():
    doc = document("- use pnpm for installs")
    _, (record,) = apply_edits(doc, [edit("replace", "- use yarn", anchor="use pnpm")], "skill")
    assert record.status == "unmatched"


def test_an_ambiguous_anchor_is_unmatched_with_the_count():
    doc = document("- same", "- other", "- same")
    new, (record,) = apply_edits(doc, [edit("delete", anchor="- same")], "skill")
    assert record.status == "unmatched"
    assert "ambiguous" in record.reason and "2" in record.reason
    assert new == doc


def test_anchors_ignore_trailing_whitespace_but_not_leading_indentation():
    doc = document("- top", "  - nested   ")
    new, (record,) = apply_edits(doc, [edit("delete", anchor="  - nested")], "skill")
    assert record.status == "applied" and managed_block(new) == "- top"
    _, (unindented,) = apply_edits(doc, [edit("delete", anchor="- nested")], "skill")
    assert unindented.status == "unmatched"


def test_anchors_outside_the_block_do_not_match():
    doc = document("- inside")
    new, (record,) = apply_edits(doc, [edit("delete", anchor="Tail written by the user.")], "skill")
    assert record.status == "unmatched"
    assert new == doc


def test_empty_content_is_rejected_for_add_insert_and_replace():
    doc = document("- one")
    new, records = apply_edits(doc, [
        edit("add", "  \n "),
        edit("insert_after", "", anchor="- one"),
        edit("replace", "", anchor="- one"),
    ], "skill")
    assert [r.status for r in records] == ["rejected"] * 3
    assert all("empty content" in r.reason for r in records)
    assert new == doc


def test_an_add_of_an_existing_line_is_rejected_as_duplicate_and_changes_nothing():
    doc = document("- use pnpm")
    new, (record,) = apply_edits(doc, [edit("add", "- use pnpm")], "skill")
    assert record.status == "rejected" and record.reason.startswith("duplicate")
    assert new is doc


def test_content_carrying_a_block_marker_is_rejected():
    doc = document("- one")
    _, (record,) = apply_edits(doc, [edit("add", f"- x\n{BLOCK_END}\nrm -rf")], "skill")
    assert record.status == "rejected" and "marker" in record.reason


def test_edits_for_the_other_target_or_already_decided_are_left_untouched():
    doc = document("- one")
    memory_edit = edit("add", "- memory line", target="memory")
    decided = edit("add", "- over budget").model_copy(update={"status": "rejected", "reason": "over budget"})
    new, records = apply_edits(doc, [memory_edit, decided], "skill")
    assert records[0] is memory_edit and records[0].status == "proposed"
    assert records[1] is decided
    assert new is doc


def test_a_document_without_a_block_gets_one_at_the_end_only_when_an_edit_applies():
    user_text = "# Memory\n\nuser text, no trailing newline"
    unchanged, (unmatched,) = apply_edits(user_text, [edit("delete", anchor="user text", target="memory")], "memory")
    assert unchanged is user_text and unmatched.status == "unmatched"
    new, (record,) = apply_edits(user_text, [edit("add", "- prefer pnpm", target="memory")], "memory")
    assert record.status == "applied"
    assert new.startswith(user_text + "\n")
    assert new.endswith(f"{BLOCK_BEGIN}\n{BLOCK_HEADING}\n\n- prefer pnpm\n\n{BLOCK_END}\n")
    assert managed_block(new) == f"{BLOCK_HEADING}\n\n- prefer pnpm"


def test_an_empty_document_gets_just_the_block():
    new, _ = apply_edits("", [edit("add", "- first rule")], "skill")
    assert new == f"{BLOCK_BEGIN}\n{BLOCK_HEADING}\n\n- first rule\n\n{BLOCK_END}\n"


def test_the_heading_is_written_once_when_an_empty_block_gets_its_first_rules():
    first, _ = apply_edits("", [edit("add", "- first rule"), edit("add", "- second rule")], "skill")
    second, _ = apply_edits(first, [edit("add", "- third rule")], "skill")
    assert managed_block(second) == f"{BLOCK_HEADING}\n\n- first rule\n- second rule\n- third rule"
    # a block that already has content (e.g. written by hand) gets no heading
    own = document("- my own rule")
    new, _ = apply_edits(own, [edit("add", "- learned rule")], "skill")
    assert managed_block(new) == "- my own rule\n- learned rule"


def test_a_replace_with_identical_content_is_a_no_op_returning_the_same_string():
    doc = document("- one   ", "")
    new, (record,) = apply_edits(doc, [edit("replace", "- one", anchor="- one")], "skill")
    assert record.status == "rejected" and "no change" in record.reason
    assert new is doc


def test_edits_that_cancel_out_return_the_identical_document():
    doc = document("- one")
    new, records = apply_edits(doc, [edit("add", "- two"), edit("delete", anchor="- two")], "skill")
    assert [r.status for r in records] == ["applied", "applied"]
    assert new is doc


def test_the_block_is_tidied_when_it_changes_and_the_rest_stays_byte_for_byte():
    doc = BEFORE + f"{BLOCK_BEGIN}\n\n\n- one   \n\n\n\n{BLOCK_END}" + AFTER
    new, _ = apply_edits(doc, [edit("add", "- two")], "skill")
    assert new == BEFORE + f"{BLOCK_BEGIN}\n- one\n- two\n\n{BLOCK_END}" + AFTER


def test_crlf_documents_keep_crlf_line_endings():
    doc = f"intro\r\n\r\n{BLOCK_BEGIN}\r\n- one\r\n\r\n{BLOCK_END}\r\nend\r\n"
    new, _ = apply_edits(doc, [edit("add", "- two")], "skill")
    assert new == f"intro\r\n\r\n{BLOCK_BEGIN}\r\n- one\r\n- two\r\n\r\n{BLOCK_END}\r\nend\r\n"


def test_a_malformed_block_rejects_the_edits_and_changes_nothing():
    doc = f"text\n{BLOCK_BEGIN}\n- one\n"
    new, (record,) = apply_edits(doc, [edit("add", "- two")], "skill")
    assert new is doc
    assert record.status == "rejected" and "malformed managed block" in record.reason
    with pytest.raises(ValueError, match="malformed"):
        ensure_block(doc)


def test_ensure_block_appends_an_empty_block_once():
    with_block = ensure_block("# Notes\n")
    assert with_block == f"# Notes\n\n{BLOCK_BEGIN}\n\n{BLOCK_END}\n"
    assert ensure_block(with_block) is with_block
    assert managed_block(with_block) == ""


def test_new_skill_document_has_yaml_frontmatter_and_an_empty_block():
    text = new_skill_document("skillopt-sleep", "Habits learned: use pnpm; don't run `npm install`.\nMore.")
    assert text.startswith("---\n")
    frontmatter = yaml.safe_load(text.split("---\n")[1])
    assert frontmatter == {"name": "skillopt-sleep",
                           "description": "Habits learned: use pnpm; don't run `npm install`. More."}
    assert managed_block(text) == ""
    new, (record,) = apply_edits(text, [edit("add", "- use pnpm")], "skill")
    assert record.status == "applied" and managed_block(new) == f"{BLOCK_HEADING}\n\n- use pnpm"


@pytest.mark.parametrize("name", ["Skill", "has space", "", "-lead", "x" * 65])
def test_new_skill_document_rejects_invalid_names(name):
    with pytest.raises(ValueError, match="invalid skill name"):
        new_skill_document(name, "desc")


def test_prepend_puts_new_lines_under_the_heading_in_the_order_given_above_the_older_ones():
    doc = document(BLOCK_HEADING, "", "- older rule one", "- older rule two")
    new, records = apply_edits(doc, [edit("prepend", "- newest, most stated"), edit("append", "- an appended line"),
                                     edit("prepend", "- newest, stated less")], "skill")
    assert [record.status for record in records] == ["applied"] * 3
    assert managed_block(new).splitlines() == [BLOCK_HEADING, "", "- newest, most stated", "- newest, stated less",
                                               "- older rule one", "- older rule two", "- an appended line"]
    assert outside(new) == outside(doc)


def test_prepend_to_an_empty_block_gets_the_heading_and_a_duplicate_is_rejected():
    new, [record] = apply_edits(document(), [edit("prepend", "- use pnpm")], "skill")
    assert record.status == "applied"
    assert managed_block(new).splitlines() == [BLOCK_HEADING, "", "- use pnpm"]
    again, [duplicate] = apply_edits(new, [edit("prepend", "- use pnpm")], "skill")
    assert (again, duplicate.status) == (new, "rejected") and duplicate.reason.startswith("duplicate")


def test_prepend_keeps_the_team_rules_part_last():
    team = team_line("- Use uv.", "t-0123456789ab")
    doc = document(BLOCK_HEADING, "", "- older rule", "", TEAM_HEADING, team)
    new, _ = apply_edits(doc, [edit("prepend", "- new rule")], "skill")
    assert managed_block(new).splitlines() == [BLOCK_HEADING, "", "- new rule", "- older rule", "", TEAM_HEADING,
                                               team]
