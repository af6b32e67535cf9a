"""The user's rules as objects (skillopt_sleep/mine/rulebook.py): one rule however phrased, proposed once (compiled from
its checks, or in the user's words); a newer rule replaces the one it contradicts; the optimizer's restatements
yield."""

from __future__ import annotations

import pytest

from skillopt_sleep.checks import negative_word_regex
from skillopt_sleep.engine.edits import apply_edits
from skillopt_sleep.mine.rulebook import (
    contradicted_line,
    contradicted_rule_reason,
    restated_rule_reason,
    rule_line,
    stated_rules,
    user_rule_edits,
)
from skillopt_sleep.models import Check, Judge, TaskRecord


def task(number: int, *rules: str, checks: dict[str, list[Check]] | None = None, split: str = "train",
         replayable: bool = True, recurrence: int = 1) -> TaskRecord:
    """A mined task whose checks were validated for its rules (``checks``: rule -> its validated checks)."""
    judge = [check.model_copy(update={"rule": rule}) for rule, found in (checks or {}).items() for check in found]
    return TaskRecord(id=f"t-{number}", source="claude", request=f"request {number}", rules=list(rules),
                      judge=Judge(checks=judge), split=split, replayable=replayable,
                      not_replayable=None if replayable else "long_tool_run", recurrence=recurrence,
                      session_ids=[f"s{number}"])


PNPM = [Check(op="contains", value="pnpm"), Check(op="regex", value=negative_word_regex("npm"))]


def test_phrasings_whose_validated_checks_overlap_are_one_rule_in_its_most_stated_words():
    tasks = [task(1, "use pnpm, not npm", checks={"use pnpm, not npm": PNPM}),
             task(2, "we're a pnpm shop", checks={"we're a pnpm shop": PNPM[:1]}),
             task(3, "use pnpm, not npm", checks={"use pnpm, not npm": PNPM}),
             task(4, "dates are ISO here", checks={"dates are ISO here": [
                 Check(op="regex", value=r"\b\d{4}-\d{2}-\d{2}\b")]})]
    pnpm, dates = stated_rules(tasks)
    assert pnpm.text == "use pnpm, not npm" and pnpm.stated == 3
    assert pnpm.phrasings == ["use pnpm, not npm", "we're a pnpm shop"]
    assert pnpm.task_ids == ["t-1", "t-2", "t-3"] and pnpm.session_ids == ["s1", "s2", "s3"]
    assert set(map(tuple, pnpm.keys)) == {("has", "pnpm"), ("not", "npm")} and pnpm.checked
    assert dates.stated == 1


def test_a_rule_without_a_validated_check_is_known_by_its_words():
    [rule] = stated_rules([task(1, "Never commit to main."), task(2, "never commit  to main")])
    assert rule.keys == [("text", "never commit to main")] and rule.stated == 2 and not rule.checked


def test_rules_of_held_out_tasks_are_never_proposed_but_evidence_only_tasks_teach():
    tasks = [task(1, "use pnpm, not npm", split="val"), task(2, "use ruff, not flake8", split="test"),
             task(3, "we're a uv shop", replayable=False)]
    assert [rule.text for rule in stated_rules(tasks)] == ["we're a uv shop"]


def test_recurrence_counts_every_statement():
    [rule] = stated_rules([task(1, "use pnpm", recurrence=3)])
    assert rule.stated == rule.stated_total == 3


@pytest.mark.parametrize(("wording", "line"), [("compiled", "- Use `pnpm`, never `npm`."),
                                               ("user", "- use pnpm, not npm.")])
def test_a_rule_is_proposed_once_as_one_bullet_and_not_again_once_a_document_says_it_in_other_words(wording, line):
    rules = stated_rules([task(1, "use pnpm, not npm", checks={"use pnpm, not npm": PNPM})])
    [edit] = user_rule_edits(rules, {"memory": "# Notes\n"}, target="memory", wording=wording)
    assert (edit.op, edit.content, edit.evidence) == ("prepend", line, ["t-1"])
    assert edit.rationale == 'stated by the user 1 time(s); you said: "use pnpm, not npm"'
    for written in ("- We always install with pnpm, never npm.\n", "Use PNPM, not npm\n"):
        assert user_rule_edits(rules, {"memory": "# Notes\n", "skill": written}, target="memory",
                               wording=wording) == []


@pytest.mark.parametrize(("wording", "old_line", "new_line"), [
    ("compiled", "- Use `black`, never `autopep8`.", "- Use `ruff`, never `black`."),
    ("user", "- we format with black, not autopep8.", "- we moved from black to ruff.")])
def test_a_newer_rule_replaces_the_managed_line_it_contradicts(wording, old_line, new_line):
    old = stated_rules([task(1, "we format with black, not autopep8", checks={
        "we format with black, not autopep8": [Check(op="contains", value="black"),
                                               Check(op="not_contains", value="autopep8")]})])
    memory, _ = apply_edits("# Notes\n", user_rule_edits(old, {"memory": "# Notes\n"}, target="memory",
                                                         wording=wording), "memory")
    new = stated_rules([task(2, "we moved from black to ruff", checks={
        "we moved from black to ruff": [Check(op="contains", value="ruff"), Check(op="not_contains", value="black")]})])
    [edit] = user_rule_edits(new, {"memory": memory}, target="memory", wording=wording)
    assert (edit.op, edit.anchor, edit.content) == ("replace", old_line, new_line)
    replaced, [applied] = apply_edits(memory, [edit], "memory")
    assert applied.status == "applied" and old_line not in replaced and "ruff" in replaced


def test_a_contradiction_outside_the_managed_block_is_not_touched():
    rules = stated_rules([task(1, "use ruff, not black", checks={
        "use ruff, not black": [Check(op="contains", value="ruff"), Check(op="not_contains", value="black")]})])
    assert contradicted_line(rules[0], "") is None
    [edit] = user_rule_edits(rules, {"memory": "# Notes\n\nFormat with black.\n"}, target="memory")
    assert edit.op == "prepend"


def test_rules_come_most_stated_first_across_nights():
    rules = stated_rules([task(1, "use pnpm"), task(2, "use ruff"), task(3, "use ruff")])
    assert [rule.text for rule in rules] == ["use ruff", "use pnpm"]
    earlier = [rules[1].model_copy(update={"stated_total": 9}), rules[0]]  # the archive knows pnpm was stated more
    assert [edit.content for edit in user_rule_edits(sorted(earlier, key=lambda r: -r.stated_total), {"memory": ""},
                                                     target="memory")] == ["- use pnpm.", "- use ruff."]


def test_a_nights_new_rules_stand_first_most_stated_first_above_the_earlier_nights_rules():
    memory = "# Notes\n"
    for night_tasks in ([task(1, "use pnpm")], [task(2, "use ruff"), task(3, "use ruff"), task(4, "use tabs")]):
        rules = stated_rules(night_tasks)
        memory, applied = apply_edits(memory, user_rule_edits(rules, {"memory": memory}, target="memory"), "memory")
        assert {edit.status for edit in applied} == {"applied"}
    assert [line for line in memory.splitlines() if line.startswith("- ")] == [
        "- use ruff.", "- use tabs.", "- use pnpm."]


def test_an_optimizer_edit_that_restates_a_user_rule_or_a_written_line_yields():
    rules = stated_rules([task(1, "use pnpm, not npm", checks={"use pnpm, not npm": PNPM})])
    assert "restates the user's rule" in restated_rule_reason("- Always use pnpm for packages.", rules, {})
    assert "already stated in the documents" in restated_rule_reason(
        "- Prefer pathlib over os.path.", [], {"memory": "- Use pathlib, never os.path.\n"})
    assert restated_rule_reason("- Answer in one short paragraph.", rules, {"memory": "- use pnpm"}) is None


def test_an_optimizer_edit_that_contradicts_a_lasting_user_rule_is_refused():
    ruff = "we moved from black to ruff: use ruff format, never black"
    rules = stated_rules([task(1, ruff, checks={ruff: [Check(op="contains", value="ruff format"),
                                                       Check(op="regex", value=negative_word_regex("black"))]})])
    assert rules[0].scope == "lasting"
    reason = contradicted_rule_reason("- Use `black`, never `autopep8`.", rules)
    assert reason is not None and ruff in reason
    assert contradicted_rule_reason("- Use `ruff check` before committing.", rules) is None
    assert contradicted_rule_reason("- Use `black`, never `autopep8`.", []) is None
    waiting = [rule.model_copy(update={"scope": "candidate"}) for rule in rules]  # not a rule the night writes yet
    assert contradicted_rule_reason("- Use `black`, never `autopep8`.", waiting) is None


def test_rule_line_is_the_one_bullet_format():
    assert rule_line("use pnpm, not npm") == "- use pnpm, not npm."
    assert rule_line("- Dates are ISO!") == "- Dates are ISO!"
