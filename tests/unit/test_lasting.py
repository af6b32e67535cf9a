"""Lasting or one-off (``mine/lasting.py``): recurrence across independent tasks, lasting scope in the words, the
scope of one task, and statements read through their English gloss."""

from __future__ import annotations

import pytest

from skillopt_sleep.mine.lasting import (
    IMPERATIVE_RECURRENCE_TASKS,
    TEMPORARY,
    decide_scopes,
    lasting_scope,
    one_off_scope,
    recurrence_needed,
    similar,
)
from skillopt_sleep.mine.rulebook import stated_rules
from skillopt_sleep.models import Check, Judge, RuleStatement, TaskRecord


def task(number: int, request: str, *statements: RuleStatement | str) -> TaskRecord:
    rules = [RuleStatement(text=s) if isinstance(s, str) else s for s in statements]
    return TaskRecord(id=f"t-{number}", source="claude", request=request, authored=[request], rules=rules)


@pytest.mark.parametrize(("text", "reason"), [
    ("Always run the tests before committing", "always"),
    ("From now on use pnpm", "from now on"),
    ("DO NOT modify the schema", "a prohibition in capitals"),
    ("Do NOT remove console.log lines – they are for debugging", "a prohibition in capitals"),
    ("Respond in German", "a language to answer in"),
    ("We use tabs in this repo", "project-wide"),
    ("Project uses Arduino framework — use Serial.println for logging", "we use"),  # BBXtreme/Waterfront, Aider
])
def test_words_that_say_a_rule_lasts(text, reason):
    assert lasting_scope(text) == reason


@pytest.mark.parametrize("text", [
    "Fix the bug that always crashes on startup",  # an adverb deep in a task's description
    "Use pnpm for installs",
    "Add a retry to the upload client",
    "Do not remove the logs",  # no capitals, no lasting word: it may be this task's detail
    "The NOT gate output is inverted",
])
def test_a_statement_without_lasting_words_has_no_lasting_scope(text):
    assert lasting_scope(text) is None


@pytest.mark.parametrize(("text", "tie"), [
    ("Don't touch this file", "this task"),
    ("No other changes", "nothing else"),
    ("Don't edit config.yaml", "a file"),
])
def test_words_that_tie_a_statement_to_its_task(text, tie):
    assert one_off_scope(text).startswith(tie)


@pytest.mark.parametrize("text", [
    "You must ensure that the Cloud Run service runs as the mra-app-runner service account",  # mike4567, Cline
    "make sure that the keys are nested under the right namespace",
    "Keep the logs so that we can debug the booking flow",
])
def test_a_that_which_opens_a_clause_ties_nothing(text):
    assert one_off_scope(text) is None


def test_a_that_pointing_at_the_tasks_object_still_ties():
    assert one_off_scope("Revert that change").startswith("this task")
    assert one_off_scope("ensure that this file compiles").startswith("this task")  # "this" still ties


def test_similar_is_the_same_instruction_in_other_words_not_shared_vocabulary():
    assert similar("keep it backwards compatible", "make sure the change stays backwards compatible")
    assert not similar("use pnpm for installs", "use the npm registry for installs")
    assert similar("请用中文回答所有问题", "所有问题请用中文回答")  # a script without spaces: character pairs
    assert not similar("请用中文回答所有问题", "把这个函数改成异步")
    # ``clusterpj/cluster-estate`` (Aider): two words of a short statement inside a long spec sentence of another
    # task are not the same instruction (they made a spec sentence "stated in 2 tasks")
    assert not similar("Maintain dark mode support",
                       "The calendar should support both single-property and all-properties view modes")
    assert similar("Maintain dark mode support", "keep the dark mode support working")


def test_an_instruction_stated_in_independent_tasks_lasts_however_phrased():
    tasks = [task(1, "Refactor the billing module; keep it backwards compatible", "keep it backwards compatible"),
             task(2, "Rename the export helpers, stays backwards compatible please",
                  "stays backwards compatible please"),
             task(3, "Add retries to the upload client")]
    decide_scopes(tasks)
    for stated in (tasks[0].rules[0], tasks[1].rules[0]):
        assert (stated.scope, stated.why) == ("lasting", "stated in 2 tasks")


def test_a_request_sent_again_with_its_spec_restates_nothing():
    spec = ("Build the invoice exporter for the accounting team with CSV output and per-customer totals. "
            "Use the decimal module for money.")
    tasks = [task(1, spec, "Use the decimal module for money"),
             task(2, spec + " Also handle refunds.", "Use the decimal module for money")]
    decide_scopes(tasks)
    assert [rule.scope for t in tasks for rule in t.rules] == ["candidate", "candidate"]


def test_stated_once_a_rule_waits_unless_its_words_say_it_lasts_or_tie_it_to_the_task():
    tasks = [task(1, "Add a cache layer", "Use redis for the cache"),
             task(2, "Migrate the users table", "From now on write migrations with alembic"),
             task(3, "Tidy the README", "Don't touch this file")]
    decide_scopes(tasks)
    scopes = [(t.rules[0].scope, t.rules[0].why) for t in tasks]
    assert scopes[0][0] == "candidate"
    assert scopes[1] == ("lasting", "lasting scope: from now on")
    assert scopes[2][0] == "one_off" and "this" in scopes[2][1]


def test_every_in_a_statement_tied_to_its_task_counts_the_tasks_objects():
    """``BBXtreme/Waterfront`` (Aider, held-out set): "from EVERY Badge in this file" is the task's badges; "each
    command you'd like to execute" (``mike4567/MRA04242026``, Cline) is a habit."""
    tasks = [task(1, "Restyle the status badges", 'Remove variant="outline" from EVERY Badge in this file'),
             task(2, "Deploy the service", "Explain each command you'd like to execute before asking to execute")]
    decide_scopes(tasks)
    assert tasks[0].rules[0].scope == "one_off" and "this" in tasks[0].rules[0].why
    assert (tasks[1].rules[0].scope, tasks[1].rules[0].why) == ("lasting", "lasting scope: every")


def test_every_over_a_tasks_objects_is_not_a_habit():
    """``BBXtreme/Waterfront`` and ``djha786543-gif/career-os-v2`` (Aider): "each card", "each broker", "each job card"
    count the objects of one feature; "each change", "every commit" count the agent's own work."""
    for text in ("add margin right to each button of 10px", "Ensure each job card is a clickable <a> tag",
                 "Use independent mqtt clients for each broker"):
        assert lasting_scope(text) is None, text
    for text in ("Show diffs for each change", "Run the linter before every commit",
                 "Explain each command you'd like to execute"):
        assert lasting_scope(text) == "every", text


def test_a_temporary_statement_is_one_off_whatever_its_capitals_say():
    """``BBXtreme/Waterfront``: "Do NOT add new features yet" is a limit of this step, shouted or not."""
    tasks = [task(1, "Strip the MDB code", "Do NOT add new features yet (relay, sensor) — focus only on stripping"),
             task(2, "Fix the build", "Do NOT add new MQTT code for now"),
             task(3, "Fix the build again", "Do NOT touch the vendored SDK")]
    decide_scopes(tasks)
    assert [t.rules[0].scope for t in tasks] == ["one_off", "one_off", "lasting"]
    assert one_off_scope("don't add the relay yet").startswith(TEMPORARY)
    assert one_off_scope("yet another helper") is None  # "yet" without a negation limits nothing


def test_a_plain_imperative_lasts_only_when_a_third_task_states_it():
    """A task verb is how tasks are asked ("Show the diff ..."): ``BBXtreme/Waterfront`` appended "Show diff and explain
    changes" to 25 requests; two tasks are not enough, and no lasting word makes it last sooner."""
    show = "Show the diff and explain the changes"
    assert recurrence_needed(show) == IMPERATIVE_RECURRENCE_TASKS == 3
    assert recurrence_needed("Keep the diff small") == 2  # a constraint verb: normative
    two = [task(1, f"Add a dark mode toggle. {show}", show), task(2, f"Move the login form to a modal. {show}", show),
           task(3, "Rename the broker card", "Show the test output across our codebase")]
    decide_scopes(two)
    assert [t.rules[0].scope for t in two[:2]] == ["candidate", "candidate"]
    assert "plain imperative" in two[0].rules[0].why
    assert lasting_scope(two[2].rules[0].text) == "project-wide" and two[2].rules[0].scope == "candidate"
    [rule] = [rule for rule in stated_rules(two[:2]) if rule.text == show]
    assert (rule.scope, len(rule.task_ids)) == ("candidate", 2)  # the rule book needs the same third task
    three = two[:2] + [task(4, f"Add a refresh button to the status page. {show}", show)]
    decide_scopes(three)
    assert [(t.rules[0].scope, t.rules[0].why) for t in three] == [("lasting", "stated in 3 tasks")] * 3


def test_a_plain_imperative_that_names_its_object_is_a_kind_of_task_however_often():
    """``benchmarks/world3.py``: "Write unit tests for the slugify() helper in src/utils/slug.ts." after the typed
    instruction block, and three more such requests: the same kind of task, each naming its file, not a habit."""
    block = "Instructions:\n- Tests use vitest, never jest.\n\n"
    requests = ["Write unit tests for the slugify() helper in src/utils/slug.ts",
                "Write unit tests for the clamp() helper in src/math/clamp.ts",
                "Write unit tests for the capitalize() helper in src/utils/text.ts",
                "Write unit tests for the divide() helper in src/math/divide.ts"]
    tasks = [task(n, block + request, request) for n, request in enumerate(requests)]
    decide_scopes(tasks)
    assert {t.rules[0].scope for t in tasks} == {"one_off"}
    assert all(rule.scope == "one_off" for rule in stated_rules(tasks))


def test_a_statement_in_another_language_is_decided_on_its_english_gloss():
    reader = RuleStatement(text="Responde siempre en español", gloss="Always respond in Spanish", language="es",
                           origin="rule_reader")
    tied = RuleStatement(text="No cambies este archivo", gloss="Don't change this file", language="es",
                         origin="rule_reader")
    tasks = [task(1, "Arregla el login. Responde siempre en español", reader),
             task(2, "Mejora el test. No cambies este archivo", tied)]
    decide_scopes(tasks)
    assert reader.scope == "lasting" and tied.scope == "one_off"
    assert reader.text == "Responde siempre en español"  # the user's words stay the rule


def corrected(number: int, text: str, *, validated: bool) -> TaskRecord:
    """A task whose user corrected the answer with ``text`` (a check of it validated by the session, or not)."""
    checks = [Check(op="not_contains", value="print", rule=text)] if validated else []
    return TaskRecord(id=f"t-{number}", source="claude", request=f"request {number}", authored=[text],
                      rules=[RuleStatement(text=text, origin="correction")], judge=Judge(checks=checks))


def test_a_substitution_the_session_validates_lasts_other_corrections_wait():
    tasks = [corrected(1, "logger, not print", validated=True),
             corrected(2, "use the async client instead of this one", validated=True),
             corrected(3, "put the header back where it was", validated=True),
             corrected(4, "httpx, not requests", validated=False)]
    decide_scopes(tasks)
    assert (tasks[0].rules[0].scope, tasks[0].rules[0].why) == (
        "lasting", "a substitution the session validates: the corrected answer broke it")
    assert tasks[1].rules[0].scope == "one_off"  # "this": tied to its task
    assert tasks[2].rules[0].scope != "lasting" and tasks[3].rules[0].scope == "candidate"


@pytest.mark.parametrize(("message", "statement", "scope"), [
    ("No, from now on use pnpm.", "from now on use pnpm", "from now on"),
    ("Please, from now on, make sure you run ruff.", "from now on, make sure you run ruff", "from now on"),
    ("Make sure you configure the translations properly using the correct namespace",  # clusterpj, Aider
     "Make sure you configure the translations properly using the correct namespace", None),
])
def test_frame_words_that_make_an_instruction_or_say_it_lasts_stay_in_the_statement(message, statement, scope):
    """"Make sure you ...", "From now on ..." are part of what the user taught: the statement keeps them, so that it
    is read as an instruction and its lasting scope is seen (a discourse frame, "No,", "Please", is dropped)."""
    from skillopt_sleep.grammar.statements import checks_for_rule, rule_statements

    assert rule_statements(message) == [statement]
    assert lasting_scope(statement) == scope
    if "pnpm" in message:
        same = [(check.op, check.value) for check in checks_for_rule(statement)]
        assert same == [(check.op, check.value) for check in checks_for_rule("use pnpm")]  # read on the bare form


def test_a_task_verb_after_the_request_is_a_statement_the_request_itself_is_not():
    """The first clause of a message is its request; a plain imperative after it may be a habit appended to the task
    (``BBXtreme/Waterfront``: "After fix, remind to run pnpm dev and refresh the page." at the end of 26 requests)."""
    from skillopt_sleep.grammar.forms import plain_imperative
    from skillopt_sleep.grammar.statements import rule_statements

    message = "Fix the broker reconnect loop in the dashboard. Show the diff and explain the changes."
    assert rule_statements(message) == ["Show the diff and explain the changes"]
    assert rule_statements("Show the diff and explain the changes.") == []  # alone it is the request
    assert plain_imperative("Remind me to run pnpm dev and refresh the page")
    assert not plain_imperative('print("done", result)')  # code, not an imperative
    assert not plain_imperative("Keep the diff small")  # a constraint verb: normative, not plain
    assert not plain_imperative("show me?")


@pytest.mark.parametrize(("message", "statement"), [
    ("For the input components we want to use shadcn-vue.", "For the input components we want to use shadcn-vue"),
    ("Build the table. For Input and Table Elements use shadcn-vue.", "For Input and Table Elements use shadcn-vue"),
    ("In tests, never mock the database.", "In tests, never mock the database"),
])
def test_an_instruction_after_what_it_is_about_is_read(message, statement):
    """``Sprayer115/KLIMA`` (Aider) stated its shadcn-vue rule six times, each after what it is about ("For the input
    components ..."): the instruction is read after that phrase, and the statement keeps it."""
    from skillopt_sleep.grammar.statements import rule_statements

    assert statement in rule_statements(message)
    assert rule_statements("For the login page we got a new design.") == []  # what it is about, then no instruction


def test_the_instruction_after_a_remark_and_but_is_the_statement():
    """``LAF-US/IDAHO-VAULT`` (Claude Code): "If things go well, you two can collaborate, but STOP and ask LOGAN
    before doing anything drastic." teaches what follows the "but"; a rule that is whole keeps its two halves."""
    from skillopt_sleep.grammar.statements import rule_statements

    message = "If things go well, you two can collaborate, but STOP and ask LOGAN before doing anything drastic."
    assert rule_statements(message) == ["STOP and ask LOGAN before doing anything drastic"]
    assert rule_statements("Never use npm, but use pnpm.") == ["Never use npm, but use pnpm"]
    assert rule_statements("Keep it short, but always add a summary.") == ["Keep it short, but always add a summary"]
