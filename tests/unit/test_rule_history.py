"""Rules and val tasks across nights in the task archive: the ``rules`` table (archive/rule_history.py), the archived
val tasks and the gate's val pool (engine/val_pool.py)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from skillopt_sleep.archive.rule_history import held_rules, record_night, with_history
from skillopt_sleep.archive.tasks import TaskArchive
from skillopt_sleep.checks import check_key, check_of_key
from skillopt_sleep.engine.step import StepResult
from skillopt_sleep.engine.val_pool import select_val, touches
from skillopt_sleep.mine.rulebook import (
    restated_rule_reason,
    rule_line,
    stated_rules,
    user_rule_edits,
    written_line,
)
from skillopt_sleep.models import (
    Check,
    EditRecord,
    GateDecision,
    Judge,
    RuleStatement,
    TaskComparison,
    TaskRecord,
)

T0 = datetime(2026, 11, 18, tzinfo=timezone.utc)


def task(task_id: str, rule: str, value: str, *, split: str = "train", day: int = 0) -> TaskRecord:
    return TaskRecord(id=task_id, source="claude", request=f"request {task_id}", rules=[rule], split=split,
                      judge=Judge(checks=[Check(op="contains", value=value, rule=rule)]), hard_evidence=True,
                      last_seen=T0 + timedelta(days=day), session_ids=[f"s-{task_id}"])


def applied(rule_text: str, op: str = "append", anchor: str | None = None) -> EditRecord:
    return EditRecord(target="memory", op=op, anchor=anchor, content=rule_line(rule_text), status="applied")


def night(archive, rules, night_id, *, edits, verdict="reject", clause=None, pending=False, adopted=False,
          per_task=(), val=(), documents_after=None):
    # a pending candidate changed a document (``pending.is_pending``)
    gate = GateDecision(mode="on", metric="hard", verdict=verdict, reason="", per_task=list(per_task),
                        details={"clause": clause, "pending": pending})
    step = StepResult(edits=edits, val=list(val), changed=["memory"] if pending else [], gate=gate)
    record_night(archive, rules, step, night_id=night_id, adopted=adopted, replayed=list(val),
                 documents_after=documents_after or {"memory": ""})


def test_a_rule_keeps_its_statements_nights_and_status_across_nights(tmp_path):
    archive = TaskArchive(tmp_path / "archive.sqlite3")
    first = stated_rules([task("t-1", "use pnpm", "pnpm"), task("t-2", "use pnpm", "pnpm")])
    night(archive, first, "n1", edits=[applied("use pnpm")], clause="margin", pending=True)
    [entry] = archive.rules()
    assert (entry["text"], entry["stated"], entry["status"], entry["nights"]) == ("use pnpm", 2, "pending", ["n1"])
    assert entry["sessions"] == ["s-t-1", "s-t-2"]
    # night 2: stated again in other words; history orders it by all nights' statements
    second = stated_rules([task("t-3", "we're a pnpm shop", "pnpm")])
    [known] = with_history(second, archive)
    assert known.id == entry["id"] and known.stated_total == 3
    val = [task("t-v", "use pnpm", "pnpm", split="val")]
    night(archive, [known], "n2", edits=[applied("we're a pnpm shop")], verdict="accept_new_best",
          clause="accepted", adopted=True, val=val,
          per_task=[TaskComparison(task_id="t-v", outcome="win")])
    [entry] = archive.rules()
    assert (entry["stated"], entry["status"], entry["status_night"]) == (3, "adopted", "n2")
    assert entry["phrasings"] == ["use pnpm", "we're a pnpm shop"] and entry["nights"] == ["n1", "n2"]
    assert (entry["wins"], entry["losses"], entry["last_exercised"]) == (1, 0, "n2")
    # the same night recorded twice counts its statements once
    night(archive, [known], "n2", edits=[], verdict="reject")
    assert archive.rules()[0]["stated"] == 3


def test_a_rule_the_gate_rejected_on_its_scores_is_rejected_and_counted(tmp_path):
    archive = TaskArchive(tmp_path / "archive.sqlite3")
    rules = stated_rules([task("t-1", "use pnpm", "pnpm")])
    night(archive, rules, "n1", edits=[applied("use pnpm")], clause="regression")
    night(archive, rules, "n2", edits=[applied("use pnpm")], clause="failed_calls")  # not evidence against it
    [entry] = archive.rules()
    assert (entry["status"], entry["rejections"]) == ("rejected", 1)


def test_a_rule_a_document_already_states_is_adopted_and_a_replaced_rule_retires(tmp_path):
    archive = TaskArchive(tmp_path / "archive.sqlite3")
    black = stated_rules([task("t-1", "format with black", "black")])
    night(archive, black, "n1", edits=[], documents_after={"memory": "- Format with black.\n"})
    assert archive.rules()[0]["status"] == "adopted"
    ruff = stated_rules([TaskRecord(id="t-2", source="claude", request="r", rules=["ruff, not black"], judge=Judge(
        checks=[Check(op="contains", value="ruff", rule="ruff, not black"),
                Check(op="not_contains", value="black", rule="ruff, not black")]))])
    night(archive, ruff, "n3", edits=[applied("ruff, not black", op="replace", anchor="- format with black.")],
          verdict="accept", clause="accepted", adopted=True)
    statuses = {entry["text"]: (entry["status"], entry["replaced_by"]) for entry in archive.rules()}
    ruff_id = next(entry["id"] for entry in archive.rules() if entry["text"] == "ruff, not black")
    assert statuses == {"format with black": ("retired", ruff_id), "ruff, not black": ("adopted", None)}


def test_archived_val_tasks_are_listed_newest_first(tmp_path):
    archive = TaskArchive(tmp_path / "archive.sqlite3")
    archive.record_tasks([task("t-a", "use pnpm", "pnpm", split="val"), task("t-b", "use uv", "uv")], night_id="n1")
    archive.record_tasks([task("t-c", "use ruff", "ruff", split="val")], night_id="n2")
    assert [item.task.id for item in archive.val_tasks()] == ["t-c", "t-a"]
    assert [item.task.id for item in archive.val_tasks(exclude_ids={"t-c"})] == ["t-a"]


def test_the_val_pool_takes_tonight_then_archived_tasks_the_edits_touch_then_the_rest_newest_first():
    tonight = [task("t-1", "use uv", "uv", split="val", day=3)]
    archived = [task("t-old", "use ruff", "ruff", split="val", day=0),
                task("t-new", "use httpx", "httpx", split="val", day=2),
                task("t-pnpm", "use pnpm", "pnpm", split="val", day=1),
                task("t-1", "use uv", "uv", split="val", day=1)]  # tonight's copy wins
    edits = [applied("use pnpm")]
    assert touches(archived[2], edits) and not touches(archived[1], edits)
    assert [t.id for t in select_val(tonight, archived, edits, limit=12)] == ["t-1", "t-pnpm", "t-new", "t-old"]
    assert [t.id for t in select_val(tonight, archived, edits, limit=2)] == ["t-1", "t-pnpm"]


def test_an_archived_val_task_a_newer_user_rule_contradicts_is_stale_and_left_out():
    black = task("t-black", "we format with black", "black", split="val", day=0)
    ruff = applied("we moved from black to ruff: use ruff format, never black")
    tonight = [task("t-1", "use uv", "uv", split="val", day=3)]
    assert [t.id for t in select_val(tonight, [black], [ruff], limit=12, stated=[ruff])] == ["t-1"]
    # an optimizer's edit never retires held-out evidence
    assert [t.id for t in select_val(tonight, [black], [ruff], limit=12)] == ["t-1", "t-black"]
    # tonight's tasks are never stale
    assert [t.id for t in select_val([black], [], [ruff], limit=12, stated=[ruff])] == ["t-black"]


def test_a_rule_written_in_an_earlier_nights_words_counts_as_written(tmp_path):
    from skillopt_sleep.mine.rulebook import user_rule_edits

    archive = TaskArchive(tmp_path / "archive.sqlite3")
    pip = TaskRecord(id="t-1", source="claude", request="r", rules=["we don't use pip, add it with uv"], judge=Judge(
        checks=[Check(op="not_contains", value="pip", rule="we don't use pip, add it with uv"),
                Check(op="contains", value="uv", rule="we don't use pip, add it with uv")]))
    first = stated_rules([pip])
    night(archive, first, "n1", edits=[applied("we don't use pip, add it with uv")], verdict="accept",
          clause="accepted", adopted=True)
    memory = "- we don't use pip, add it with uv.\n"
    [again] = with_history(stated_rules([task("t-2", "we're a uv shop", "uv")]), archive)
    assert "we don't use pip, add it with uv" in again.phrasings
    assert user_rule_edits([again], {"memory": memory}, target="memory") == []


def words_only(task_id: str, statement: RuleStatement) -> TaskRecord:
    """A task whose rule has no check: it is known by its words."""
    return TaskRecord(id=task_id, source="claude", request=f"request {task_id}", rules=[statement],
                      session_ids=[f"s-{task_id}"])


def candidate(text: str) -> RuleStatement:
    return RuleStatement(text=text, scope="candidate", why="stated once, no lasting scope: waits to be stated again")


def test_a_candidate_stated_again_on_a_later_night_in_other_words_becomes_lasting(tmp_path):
    archive = TaskArchive(tmp_path / "archive.sqlite3")
    [first] = stated_rules([words_only("t-1", candidate("keep the public API backwards compatible"))])
    assert first.scope == "candidate"
    assert with_history([first], archive)[0].scope == "candidate"  # nothing archived yet: it waits
    night(archive, [first], "n1", edits=[])
    [entry] = archive.rules()
    assert (entry["scope"], entry["status"]) == ("candidate", "stated")
    [again] = with_history(stated_rules([words_only("t-2", candidate("stay backwards compatible in the API"))]),
                           archive)
    assert again.id == entry["id"] and again.stated_total == 2
    assert (again.scope, again.scope_reason) == ("lasting", "stated on 2 nights")
    night(archive, [again], "n2", edits=[])
    assert archive.rules()[0]["scope"] == "lasting"


def test_a_plain_imperative_waits_for_its_third_statement_across_nights(tmp_path):
    """"Show the diff ..." (a task verb, ``lasting.IMPERATIVE_RECURRENCE_TASKS``) lasts from its third statement, on
    whichever nights they came."""
    archive = TaskArchive(tmp_path / "archive.sqlite3")
    show = "Show the diff and explain the changes"
    waiting = RuleStatement(text=show, scope="candidate", why="a plain imperative stated in 1 task(s)")
    night(archive, with_history(stated_rules([words_only("t-1", waiting)]), archive), "n1", edits=[])
    [second] = with_history(stated_rules([words_only("t-2", waiting.model_copy())]), archive)
    assert (second.scope, second.stated_total) == ("candidate", 2)
    night(archive, [second], "n2", edits=[])
    [third] = with_history(stated_rules([words_only("t-3", waiting.model_copy())]), archive)
    assert (third.scope, third.scope_reason, third.stated_total) == ("lasting", "stated on 3 nights", 3)


def test_a_one_off_stays_one_and_an_unrelated_candidate_keeps_waiting(tmp_path):
    archive = TaskArchive(tmp_path / "archive.sqlite3")
    one_off = RuleStatement(text="no other changes to this file", scope="one_off", why="scoped to its task")
    night(archive, stated_rules([words_only("t-1", one_off), words_only("t-2", candidate("use redis for caching"))]),
          "n1", edits=[])
    later = with_history(stated_rules([words_only("t-3", one_off.model_copy()),
                                       words_only("t-4", candidate("write migrations with alembic"))]), archive)
    assert sorted(rule.scope for rule in later) == ["candidate", "one_off"]


def test_a_lasting_rule_no_night_has_gated_yet_is_carried_to_the_next_night_until_gated(tmp_path):
    """``benchmarks/world3.py``'s rg rule: stated once, "from now on", over night 1's edit budget. Night 2 proposes it
    again though nobody states it (checks read from its words, so it is worded like any checked rule); a carried rule
    counts no statement; once the gate has decided it (adopted, rejected) it is no longer carried."""
    archive = TaskArchive(tmp_path / "archive.sqlite3")
    rg = stated_rules([task("t-1", "from now on use rg instead of grep", "rg")])
    pnpm = stated_rules([task("t-2", "use pnpm", "pnpm"), task("t-3", "use pnpm", "pnpm")])
    assert rg[0].scope == "lasting"
    night(archive, [*pnpm, *rg], "n1", edits=[applied("use pnpm")], verdict="accept_new_best", clause="accepted",
          adopted=True, documents_after={"memory": rule_line("use pnpm")})  # rg: over the budget, never proposed
    statuses = {entry["text"]: entry["status"] for entry in archive.rules()}
    assert statuses == {"use pnpm": "adopted", "from now on use rg instead of grep": "stated"}
    [carried] = with_history([], archive)  # night 2: nobody states anything
    assert carried.text == "from now on use rg instead of grep" and carried.stated == 0 and carried.scope == "lasting"
    assert {(check.op, check.value) for check in carried.checks} >= {("contains", "rg")}
    night(archive, [carried], "n2", edits=[applied("Use `rg`, never `grep`.")], clause="margin")
    entry = next(entry for entry in archive.rules() if entry["id"] == carried.id)
    assert entry["nights"] == ["n1"] and entry["stated"] == 1  # carried: no statement counted
    assert entry["status"] == "rejected"
    assert with_history([], archive) == []  # the gate decided it: it waits to be stated again


def test_a_carried_rule_in_another_language_is_compiled_from_its_archived_keys(tmp_path):
    """``benchmarks/world3.py``'s Spanish rule "no uses axios, usa siempre fetch": its checks came from the gloss (the
    deterministic reader reads no check in the Spanish words). Carried to the next night, it used to be written in
    the user's words ("- no uses axios, usa siempre fetch."): the archive re-derived its checks from the phrasings
    only. Its archived keys now give its checks, so it is compiled like any checked rule."""
    archive = TaskArchive(tmp_path / "archive.sqlite3")
    spanish = "no uses axios, usa siempre fetch"
    glossed = checked("t-1", spanish, "fetch", "axios")
    [rule] = [rule.model_copy(update={"scope": "lasting"}) for rule in stated_rules([glossed])]
    assert rule.key_set == {("has", "fetch"), ("not", "axios")}
    night(archive, [rule], "n1", edits=[])  # over the edit budget: never proposed
    [carried] = with_history([], archive)
    assert carried.text == spanish and carried.key_set == rule.key_set
    assert {check_key(check) for check in carried.checks} == rule.key_set
    assert written_line(carried) == "- Use `fetch`, never `axios`."


def checked(task_id: str, rule: str, has: str, forbids: str, *, day: int = 0) -> TaskRecord:
    return task(task_id, rule, has, day=day).model_copy(update={"judge": Judge(checks=[
        Check(op="contains", value=has, rule=rule), Check(op="not_contains", value=forbids, rule=rule)])})


def test_a_newer_rule_supersedes_an_unwritten_one_it_contradicts(tmp_path):
    """``benchmarks/world2.py``'s rule change: "we format with black, not autopep8" (night 1, over the edit budget,
    so carried) and, on night 3, "we moved from black to ruff: use ruff format, never black". Night 3's candidate
    held both lines (it contradicted itself and tied every task); now the older rule is not carried once a newer
    one contradicts it, and the night that states the newer one retires it (``replaced_by``)."""
    archive = TaskArchive(tmp_path / "archive.sqlite3")
    black = stated_rules([checked("t-1", "we format with black, not autopep8", "black", "autopep8")])
    black = [rule.model_copy(update={"scope": "lasting"}) for rule in black]
    night(archive, black, "2026-11-18T233000Z", edits=[])  # over the edit budget: never proposed
    assert [rule.text for rule in with_history([], archive)] == ["we format with black, not autopep8"]  # carried
    ruff = [rule.model_copy(update={"scope": "lasting"}) for rule in stated_rules([checked(
        "t-2", "we moved from black to ruff: use ruff format, never black", "ruff format", "black", day=2)])]
    tonight = with_history(ruff, archive)
    assert [rule.text for rule in tonight] == ["we moved from black to ruff: use ruff format, never black"]
    night(archive, tonight, "2026-11-20T233000Z", edits=[])
    entries = {entry["text"]: entry for entry in archive.rules()}
    old, new = entries["we format with black, not autopep8"], entries[tonight[0].text]
    assert (old["status"], old["replaced_by"], old["status_night"]) == ("retired", new["id"], "2026-11-20T233000Z")
    assert [rule.text for rule in with_history([], archive)] == [tonight[0].text]  # only the newer one is carried
    # the user goes back to black, stated again: the old rule is tonight's again, and the ruff rule is not carried
    again = with_history(stated_rules([checked("t-3", "we format with black, not autopep8", "black", "autopep8",
                                               day=4)]), archive)
    assert [rule.text for rule in again] == ["we format with black, not autopep8"]


def test_a_candidate_never_holds_two_rules_that_contradict_each_other():
    """Both stated tonight, lasting: only the first (the most stated) is proposed; the other waits."""
    rules = stated_rules([checked("t-1", "always format with ruff format, never black", "ruff format", "black"),
                          checked("t-2", "always format with ruff format, never black", "ruff format", "black"),
                          checked("t-3", "always use black, never autopep8", "black", "autopep8")])
    assert all(rule.scope == "lasting" for rule in rules)
    edits = user_rule_edits(rules, {"memory": ""}, target="memory")
    assert [edit.content for edit in edits] == [written_line(rules[0])]
    assert "ruff format" in edits[0].content


def test_a_rule_known_by_more_keys_than_tonights_checks_is_compiled_from_all_of_them(tmp_path):
    """World 2 on Qwen, night 3: tonight's "we're a uv shop" validated `has uv` only, the archive knew the rule as
    `has uv` + `not pip` too; its line was the user's words ("we're a uv shop."), since the compiled "Use `uv`." does
    not read back as everything the rule demands. The checks its phrasings imply now join tonight's."""
    archive = TaskArchive(tmp_path / "archive.sqlite3")
    night(archive, stated_rules([checked("t-1", "we don't use pip in this project, add it with uv", "uv", "pip")]),
          "2026-11-19T233000Z", edits=[])
    [tonight] = with_history(stated_rules([task("t-2", "we're a uv shop", "uv", day=2)]), archive)
    assert tonight.key_set >= {("has", "uv"), ("not", "pip")}
    assert {check_key(check) for check in tonight.checks} == {("has", "uv"), ("not", "pip")}
    assert written_line(tonight) == "- Use `uv`, never `pip`."


@pytest.mark.parametrize("key", [("has", "fetch"), ("not", "axios"), ("not", "--force"), ("language", "de"),
                                 ("max_words", "120"), ("section_present", "Summary"), ("tool_called", "Bash"),
                                 ("regex", r"(?<!\w)const(?!\w)|(?<!\w)let(?!\w)")])
def test_a_key_gives_back_a_check_that_demands_it(key):
    check = check_of_key(key, rule="the user's words")
    assert check is not None and check_key(check) == key and check.rule == "the user's words"


@pytest.mark.parametrize("key", [("text", "use pnpm"), ("regex", "("), ("max_words", "many"), ("shouts", "x")])
def test_a_text_key_or_a_broken_one_gives_no_check(key):
    assert check_of_key(key) is None


def test_a_rule_a_document_holds_is_known_by_its_users_words_and_an_optimizer_restatement_yields(tmp_path):
    """World 2, night 2: the memory held ``Use `datetime.now(timezone.utc)`.`` (night 1's compiled line of "always use
    timezone-aware UTC: datetime.now(timezone.utc)"), and the optimizer proposed "Always use timezone-aware UTC when
    working with dates and times." again; nothing it demands is the line's, so it reached the gate, and the support
    test spent 17 calls to drop it. Known by the user's words, the adopted rule makes it yield."""
    archive = TaskArchive(tmp_path / "archive.sqlite3")
    words = "always use timezone-aware UTC: datetime.now(timezone.utc)"
    [rule] = stated_rules([task("t-1", words, "datetime.now(timezone.utc)")])
    line = written_line(rule)
    assert line == "- Use `datetime.now(timezone.utc)`."
    memory = {"memory": f"# Notes\n\n{line}\n"}
    night(archive, [rule], "n1", edits=[applied(words)], verdict="accept_new_best", clause="accepted", adopted=True,
          documents_after=memory)
    [held] = held_rules(archive, memory)
    assert held.text == words
    optimizer = "- Always use timezone-aware UTC when working with dates and times."
    assert restated_rule_reason(optimizer, [], memory) is None  # the line alone does not say it
    reason = restated_rule_reason(optimizer, [], memory, [held])
    assert reason is not None and line in reason and words in reason
    assert restated_rule_reason("- Answer in one short paragraph.", [], memory, [held]) is None
    # a rule no document states any more (the user deleted the line) is not held
    assert held_rules(archive, {"memory": "# Notes\n"}) == []
    assert held_rules(None, memory) == []


def test_a_held_rule_the_user_contradicts_tonight_is_not_held(tmp_path):
    """World 2: black adopted, then "we moved from black to ruff" on night 3. Until the night replaces the black line,
    the black rule is no longer the user's: an optimizer line for ruff is not refused as contradicting it."""
    archive = TaskArchive(tmp_path / "archive.sqlite3")
    [black] = stated_rules([task("t-1", "we format with black, not autopep8", "black")])
    memory = {"memory": f"# Notes\n\n{written_line(black)}\n"}
    night(archive, [black], "n1", edits=[applied("we format with black, not autopep8")], verdict="accept_new_best",
          clause="accepted", adopted=True, documents_after=memory)
    assert [rule.text for rule in held_rules(archive, memory)] == ["we format with black, not autopep8"]
    ruff = stated_rules([checked("t-2", "we moved from black to ruff", "ruff", "black")])
    ruff = [rule.model_copy(update={"scope": "lasting"}) for rule in ruff]
    assert held_rules(archive, memory, ruff) == []
