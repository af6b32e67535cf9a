"""Rules in the user's words, the checks they imply, reaction classification and the LLM miner's plumbing."""

from __future__ import annotations

import re
from typing import get_args

import pytest

from skillopt_sleep.backends.base import CallMeter
from skillopt_sleep.backends.mock import MockBackend
from skillopt_sleep.checks import check_passes, negative_word_regex, validate_check
from skillopt_sleep.grammar.statements import checks_for_rule, extract_rules
from skillopt_sleep.grammar.typed import typed_text
from skillopt_sleep.mine.llm_miner import llm_miner_schema, make_llm_miner
from skillopt_sleep.mine.reactions import classify_reaction
from skillopt_sleep.models import Check, CheckOp, TaskEvidence, TaskRecord


def ops(checks: list[Check]) -> list[tuple[str, object]]:
    return [(check.op, check.value) for check in checks]


def passes(checks: list[Check], response: str) -> bool:
    return all(check_passes(check, response, None) for check in checks)


# --------------------------------------------------------------------------- extract_rules


@pytest.mark.parametrize(
    ("message", "rule"),
    [
        ("No, use pnpm, not npm.", "use pnpm, not npm"),
        ("use pnpm instead of npm", "use pnpm instead of npm"),
        ("Dates are ISO, YYYY-MM-DD.", "Dates are ISO, YYYY-MM-DD"),
        ("Use Conventional Commits.", "Use Conventional Commits"),
        ("Please use pathlib not os.path", "use pathlib not os.path"),
        ("Keep answers under 120 words.", "Keep answers under 120 words"),
        ("Always include a ## Testing section in PR descriptions.",
         "Always include a ## Testing section in PR descriptions"),
        ("Never use print, use logging", "Never use print, use logging"),
        ("don't use var", "don't use var"),
        ("We use ruff in this repo.", "We use ruff in this repo"),
        ("Prefer httpx over requests.", "Prefer httpx over requests"),
        ("pnpm, not npm!", "pnpm, not npm"),
        ("Tabs, not spaces.", "Tabs, not spaces"),
        ("Never commit directly to main.", "Never commit directly to main"),
        ("No console.log in production code.", "No console.log in production code"),
        ("Always answer in JSON.", "Always answer in JSON"),
        ("I said use `uv`, not pip", "use `uv`, not pip"),
        ("Stop using moment.js", "Stop using moment.js"),
        ("commit messages must always follow conventional commits",
         "commit messages must always follow conventional commits"),
        ("In this repo we always use black for formatting", "In this repo we always use black for formatting"),
    ],
)
def test_extract_rules_finds_a_rule_in_the_users_own_words(message, rule):
    assert extract_rules(message) == [rule]


@pytest.mark.parametrize(
    "message",
    [
        "It still doesn't work",
        "don't forget to update the changelog",
        "Never mind, it was my fault",
        "I always forget the --force flag",
        "Can you use pnpm?",
        "Why did you use npm?",
        "thanks!",
        "This is not what I asked",
        "It's not working",
        "Use the output of the previous command to fix the bug",
        "Use pathlib to read config.toml and print the keys",
        "the tests never pass on CI",
        "no problem",
        "No tests were run",
        "Fix the failing test in this repo",
        "Add a new endpoint that doesn't use the cache",
        "The function should return a list",
        "I meant the staging server, not prod",
        "the tests, not the docs",
        "Write a commit message for this change",
        "",
    ],
)
def test_extract_rules_ignores_requests_questions_and_complaints(message):
    assert extract_rules(message) == []


def test_extract_rules_reads_each_sentence_and_bullet_but_not_code_blocks():
    message = (
        "Bump the version and tag the release.\n"
        "- use pnpm, not npm\n"
        "- dates are ISO, YYYY-MM-DD\n"
        "```\n# never use sudo here\nnpm publish\n```\n"
        "Thanks!"
    )
    assert extract_rules(message) == ["use pnpm, not npm", "dates are ISO, YYYY-MM-DD"]


def test_extract_rules_keeps_each_rule_once():
    assert extract_rules("Use pnpm, not npm. Again: use pnpm, not npm!") == ["Use pnpm, not npm"]


# --------------------------------------------------------------------------- checks_for_rule


def test_use_x_not_y_requires_x_and_forbids_y_as_a_whole_word():
    checks = checks_for_rule("use pnpm, not npm")
    assert ops(checks)[0] == ("contains", "pnpm")
    # "npm" is inside "pnpm": a plain not_contains would fail every good answer, so it is a whole-word check
    assert passes(checks, "Run `pnpm install lodash` in packages/web.")
    assert not passes(checks, "Run `npm install lodash` in packages/web.")
    assert not passes(checks, "Run pnpm install, or npm install if you prefer.")


@pytest.mark.parametrize(("rule", "checks"), [
    # a dotted name to avoid is a whole-word negative (``os.path`` but not ``myos.pathname``); same check key
    ("use pathlib not os.path", [("contains", "pathlib"), ("regex", negative_word_regex("os.path"))]),
    ("Always answer in JSON", [("json_valid", None)]),
    ("We use ruff in this repo", [("contains", "ruff")]),
    # "requests" is also an English word: forbidding it would fail "send HTTP requests with httpx"
    ("Prefer httpx over requests", [("contains", "httpx")]),
], ids=["use-x-not-y-gives-contains-and-a-negative", "a-json-output-rule-gives-json-valid",
        "we-use-x-requires-x", "prefer-x-over-y-only-requires-x"])
def test_a_rule_gives_its_checks(rule, checks):
    assert ops(checks_for_rule(rule)) == checks


def test_use_x_instead_of_y_forbids_y():
    checks = checks_for_rule("Use httpx instead of requests for HTTP calls")
    assert ("contains", "httpx") in ops(checks)
    assert ("not_contains", "requests") in ops(checks)


def test_iso_dates_rule_gives_a_date_regex_and_no_literal_check():
    checks = checks_for_rule("Dates are ISO, YYYY-MM-DD")
    assert [check.op for check in checks] == ["regex"]
    assert passes(checks, "## 2.3.0 - 2025-05-01")
    assert not passes(checks, "## 2.3.0 - 05/01/2025")


def test_conventional_commits_rule_accepts_a_typed_subject_line_anywhere():
    checks = checks_for_rule("Use Conventional Commits")
    assert [check.op for check in checks] == ["regex"]
    assert passes(checks, "Here is the message:\n\nfeat(parser): accept trailing commas")
    assert passes(checks, "fix!: drop python 3.8")
    assert not passes(checks, "Added trailing comma support to the parser")


def test_word_limit_rule_gives_max_words():
    assert ops(checks_for_rule("Keep answers under 120 words")) == [("max_words", 120)]
    assert ops(checks_for_rule("PR titles must be at most 72 characters")) == [("max_chars", 72)]


def test_section_rule_gives_section_present_with_the_heading_text():
    checks = checks_for_rule("Always include a ## Testing section")
    assert ops(checks) == [("section_present", "Testing")]
    assert passes(checks, "## Summary\nx\n\n## Testing\nran pytest")
    assert ops(checks_for_rule("Add a section called Changelog")) == [("section_present", "Changelog")]


def test_forbid_rules_give_not_contains_for_literals():
    assert ops(checks_for_rule("Stop using moment.js")) == [("not_contains", "moment.js")]
    assert ops(checks_for_rule("No console.log in production code")) == [("not_contains", "console.log")]
    assert ops(checks_for_rule("never use print, use logging")) == [("contains", "logging"), ("not_contains", "print")]


def test_short_forbidden_word_is_matched_as_a_whole_word():
    checks = checks_for_rule("don't use var")
    assert passes(checks, "const value = 1; let variable = 2;")
    assert not passes(checks, "var value = 1;")


def test_a_rule_with_its_subject_first_prefers_and_forbids():
    """``benchmarks/world3.py``, and how real users state a stack: the subject first, then the contrast."""
    checks = checks_for_rule("Tests use vitest, never jest.")
    assert ops(checks) == [("contains", "vitest"), ("not_contains", "jest")]
    assert ops(checks_for_rule("the backend uses httpx, not requests")) == [("contains", "httpx"),
                                                                            ("not_contains", "requests")]
    assert checks_for_rule("It uses a lot of memory, not disk") == []  # a description, not a rule


def test_a_tool_named_by_what_it_does_beside_a_prohibition_is_the_tool_to_use():
    """``benchmarks/world2.py``'s uv rule, stated "we don't use pip in this project, add it with uv"."""
    assert ops(checks_for_rule("we don't use pip in this project, add it with uv.")) == [
        ("contains", "uv"), ("regex", negative_word_regex("pip"))]
    assert ops(checks_for_rule("no black, format with ruff")) == [("not_contains", "black"), ("contains", "ruff")]
    assert ops(checks_for_rule("never npm, install with pnpm")) == [("regex", negative_word_regex("npm")),
                                                                   ("contains", "pnpm")]
    assert checks_for_rule("Add it with uv") == []  # alone, a task
    assert checks_for_rule("never guess") == []  # alone, "never X" forbids no word
    assert checks_for_rule("don't use a for loop, build it with a loop") == []  # an article is no literal


def test_a_prohibition_that_names_one_flag_forbids_the_flag_as_a_whole_word():
    checks = checks_for_rule("Do NOT force push with --force.")
    assert passes(checks, "git push --force-with-lease origin main")
    assert not passes(checks, "git push --force origin main")
    assert checks_for_rule("Do not run it with --force or --yes") == []  # which one? none is read


def test_a_prohibition_then_what_to_use_instead_on_its_line_is_one_substitution():
    """Issue 26: a terse rule given as two sentences ("no X. Y.") was written as its negative half only
    (``benchmarks/world3.py``: "Do NOT use --force on shared branches. Use --force-with-lease.")."""
    message = "Do NOT use --force on shared branches. Use --force-with-lease."
    [rule] = extract_rules(message)
    assert rule == "Do NOT use --force on shared branches. Use --force-with-lease"
    checks = checks_for_rule(rule)
    assert passes(checks, "git push --force-with-lease origin main")
    assert not passes(checks, "git push --force origin main") and not passes(checks, "git push origin main")
    assert extract_rules("Never use var.\nUse pnpm for installs.") == ["Never use var", "Use pnpm for installs"]
    assert len(extract_rules("Never use npm. Use pnpm, yarn or bun whenever you add a package.")) == 2  # too long


@pytest.mark.parametrize("rule", ["Tabs, not spaces", "Never commit directly to main", "No emojis in commit messages",
                                  "don't be so verbose"])
def test_rules_without_a_literal_give_no_check(rule):
    assert extract_rules(rule) == [rule]
    assert checks_for_rule(rule) == []


def test_checks_carry_the_rule_and_origin():
    checks = checks_for_rule("use pnpm, not npm", origin="correction")
    assert {check.rule for check in checks} == {"use pnpm, not npm"}
    assert {check.origin for check in checks} == {"correction"}


def test_every_derived_check_is_valid():
    for rule in ["use pnpm, not npm", "Dates are ISO, YYYY-MM-DD", "Use Conventional Commits", "don't use var",
                 "Keep answers under 120 words", "Always include a ## Testing section", "Always answer in JSON",
                 "Avoid `any` in TypeScript"]:
        for check in checks_for_rule(rule):
            assert validate_check(check) is None, (rule, check)


# --------------------------------------------------------------------------- validate_check


@pytest.mark.parametrize(
    ("check", "reason_part"),
    [
        (Check(op="regex", value="(unclosed"), "does not compile"),
        (Check(op="contains", value=""), "empty"),
        (Check(op="contains", value="   "), "empty"),
        (Check(op="contains", value=3), "text value"),
        (Check(op="max_words", value="many"), "integer"),
        (Check(op="max_words", value=0), "positive"),
        (Check(op="json_valid", value="yes"), "no value"),
        (Check(op="section_present", value=None), "text value"),
        (Check(op="not_contains", value="x" * 500), "longer"),
    ],
)
def test_validate_check_names_why_a_check_is_invalid(check, reason_part):
    reason = validate_check(check)
    assert reason is not None and reason_part in reason


@pytest.mark.parametrize(
    "check",
    [Check(op="regex", value=r"\d{4}-\d{2}-\d{2}"), Check(op="max_chars", value=280), Check(op="json_valid"),
     Check(op="tool_called", value="Bash"), Check(op="contains", value="pnpm")],
)
def test_validate_check_accepts_well_formed_checks(check):
    assert validate_check(check) is None


# --------------------------------------------------------------------------- classify_reaction

PREVIOUS = "Add lodash to the web app and wire up a debounced search box"


@pytest.mark.parametrize(
    ("message", "reaction"),
    [
        ("thanks!", "approval"),
        ("perfect, now add tests for the parser", "approval"),
        ("looks good", "approval"),
        ("No problem, thanks", "approval"),
        ("ok", "approval"),
        ("Thanks, but it's still broken", "correction"),
        ("no, use pnpm", "correction"),
        ("use pnpm, not npm", "correction"),
        ("that's not what I asked", "correction"),
        ("why did you delete the config file?", "correction"),
        ("It says connection refused, is the server running?", "correction"),
        ("Traceback (most recent call last):\n  File \"app.py\", line 3\nValueError: bad", "correction"),
        ("try again", "correction"),
        ("it still fails on CI", "correction"),
        ("revert that", "correction"),
        ("Use yarn instead", "correction"),
        ("You forgot the tests", "correction"),
        ("add lodash to the web app and wire up the debounced search box", "reask"),
        ("continue", "none"),
        ("actually, can you also add docs?", "none"),
        ("don't forget to update the changelog", "none"),
        ("Actually I guess today is day 4", "none"),
        ("Now write the README for the CLI", "none"),
        ("", "none"),
    ],
)
def test_classify_reaction_reads_the_users_next_message(message, reaction):
    assert classify_reaction(message, PREVIOUS) == reaction


# --------------------------------------------------------------------------- the LLM miner


def test_llm_miner_schema_lists_every_check_op_and_requires_all_fields():
    schema = llm_miner_schema()
    assert set(schema["required"]) == {"intent", "checks", "rubric", "outcome"}
    item = schema["properties"]["checks"]["items"]
    assert set(item["properties"]["op"]["enum"]) == set(get_args(CheckOp))
    assert schema["additionalProperties"] is False


def _task() -> TaskRecord:
    return TaskRecord(id="t-000000000001", source="claude", request="Add lodash to the web app",
                      rules=["use pnpm, not npm"],
                      evidence=TaskEvidence(final_answer="npm install lodash", reaction="correction",
                                            reaction_text="No, use pnpm, not npm."))


def test_make_llm_miner_makes_one_structured_miner_call_through_the_ledger():
    backend = MockBackend()
    meter = CallMeter(backend)
    reply = make_llm_miner(meter)(_task())
    assert set(reply) >= {"intent", "checks", "rubric", "outcome"}
    assert reply["outcome"] == "failure"  # the mock reads the correction in the prompt's reaction section
    assert [record.role for record in meter.records] == ["miner"]
    sent = backend.requests[-1]
    assert sent.json_schema == llm_miner_schema()
    prompt = sent.messages[-1].content
    assert "Add lodash to the web app" in prompt and "use pnpm, not npm" in prompt
    assert len(prompt) < 3000


def test_make_llm_miner_raises_value_error_on_a_reply_without_json():
    meter = CallMeter(MockBackend(scripted={"miner": ["I think the user wanted pnpm."]}))
    with pytest.raises(ValueError, match="not a JSON object"):
        make_llm_miner(meter)(_task())


def test_conventional_commit_regex_is_multiline_and_compiles():
    (check,) = checks_for_rule("Use Conventional Commits")
    assert re.compile(check.value).flags & re.MULTILINE


def test_a_long_new_request_that_mentions_instead_is_not_a_correction():
    request = ("Refactor the CSV loader to stream rows instead of reading the whole file into memory, then add "
               "tests for rows that span two chunks and update the README section about large imports")
    assert classify_reaction(request, PREVIOUS) == "none"
    assert classify_reaction("Stream the rows instead", PREVIOUS) == "correction"


def test_a_vague_rule_followed_by_a_concrete_one_gives_both():
    assert extract_rules("Don't touch the lockfile by hand, use pnpm not npm") == [
        "Don't touch the lockfile by hand", "use pnpm not npm"]


def test_a_short_label_before_a_rule_is_framing():
    assert extract_rules("wrong tool: use pnpm, not npm") == ["use pnpm, not npm"]
    assert extract_rules("note: this is fine") == []
    assert extract_rules("wrong format, commit messages must follow conventional commits") == [
        "commit messages must follow conventional commits"]
    assert extract_rules("wrong date format, we always write dates as YYYY-MM-DD") == [
        "we always write dates as YYYY-MM-DD"]
    assert extract_rules("not like that, we follow Conventional Commits in this repo") == [
        "we follow Conventional Commits in this repo"]


def test_a_short_reply_that_only_states_a_rule_is_a_correction():
    assert classify_reaction("dates are ISO here, YYYY-MM-DD please", "write the changelog heading") == "correction"
    assert classify_reaction("add a test for the parser", "write the changelog heading") == "none"


@pytest.mark.parametrize("message, rule, keys", [
    ("we're a uv shop", "we're a uv shop", {("contains", "uv")}),
    ("this is an httpx codebase, requests is not installed", "this is an httpx codebase, requests is not installed",
     {("contains", "httpx")}),
    ("Could you please use httpx instead of requests? Thanks!", "use httpx instead of requests",
     {("contains", "httpx"), ("not_contains", "requests")}),
    ("we format with black, not autopep8", "we format with black, not autopep8",
     {("contains", "black"), ("not_contains", "autopep8")}),
    ("we moved from black to ruff", "we moved from black to ruff", {("contains", "ruff"), ("not_contains", "black")}),
    ("no black anymore, we switched to ruff format", "no black anymore, we switched to ruff format",
     {("not_contains", "black"), ("contains", "ruff format")}),
    ("pnpm only", "pnpm only", {("contains", "pnpm")}),
])
def test_indirect_polite_and_changed_rules_are_rules_with_their_checks(message, rule, keys):
    assert extract_rules(message) == [rule]
    assert {(check.op, check.value) for check in checks_for_rule(rule)} == keys


@pytest.mark.parametrize("message", [
    "Can you use pnpm?",  # asks; "Could you use X instead of Y?" corrects
    "I meant the staging server, not prod",  # a bare "not X" is a rule only beside another rule
    "Note: the build takes five minutes",
])
def test_questions_facts_and_labels_are_not_rules(message):
    assert extract_rules(message) == []


def test_rules_come_only_from_the_typed_part_of_a_long_message():
    page = "\n".join(["No reviewers", "Labels", "erk-plan", "No assignees · Assign yourself"] * 6)
    message = f"{page}\n\nimplement this plan here, and use pnpm, not npm"
    assert typed_text(message) == "implement this plan here, and use pnpm, not npm"
    assert extract_rules(message) == ["implement this plan here, and use pnpm, not npm"]
    assert extract_rules(page + "\n\nimplement this plan here") == []  # "No reviewers" is the page, not a rule
    assert typed_text("use pnpm, not npm") == "use pnpm, not npm"


# --------------------------------------------------------------------------- polarity and language


@pytest.mark.parametrize(("rule", "forbidden"), [
    ("Do not use lodash", "lodash"),
    ("Do NOT use moment.js for dates", "moment.js"),
    ("Ensure the code does not use jQuery", "jQuery"),
    ("The client must not import requests", "requests"),
    ("make sure it never calls eval", "eval"),
])
def test_a_negated_use_forbids_the_thing_and_never_requires_it(rule, forbidden):
    checks = checks_for_rule(rule)
    assert checks and all(check.op in ("not_contains", "regex") for check in checks), ops(checks)
    assert not passes(checks, f"Here it is, using {forbidden} as you see.")
    assert passes(checks, "Here it is, written with the standard library only.")


@pytest.mark.parametrize(("rule", "language"), [
    ("Respond in Spanish", "es"),
    ("Always answer in German please", "de"),
    ("Reply in Deutsch only", "de"),
])
def test_a_language_requirement_gives_a_language_check_not_a_word_of_the_rule(rule, language):
    checks = checks_for_rule(rule)
    assert ops(checks) == [("language", language)]
    spanish = "Claro, aquí tienes la función que pediste para ordenar la lista de usuarios por fecha de alta."
    german = "Hier ist die Funktion, die du wolltest: sie sortiert die Benutzerliste nach dem Anmeldedatum."
    english = "Sure, here is the function you asked for: it sorts the users by the date they signed up."
    answers = {"es": spanish, "de": german}
    assert passes(checks, answers[language]) and not passes(checks, english)
    assert check_passes(checks[0], "ok", None) is None  # too little prose: unverifiable, not a fail
