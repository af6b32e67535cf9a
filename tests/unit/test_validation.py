"""Checks validated by the session's own evidence (skillopt_sleep/validation.py).

The phrasings below were collected for their variety (terse, polite, indirect, shouted, with backticks, with a
rule of our own making no part of it); none of them is in the learning worlds, and validation must not need to know
any of them: the answers the user rejected and accepted decide.
"""

from __future__ import annotations

import random
import re

import pytest

from skillopt_sleep.checks import check_key, negative_word_regex, word_regex
from skillopt_sleep.grammar.statements import checks_for_rule
from skillopt_sleep.mine.validation import (
    ASCII_LOOKALIKES,
    Evidence,
    _Text,
    behaviour,
    check_verdict,
    evidence_checks,
    hard_evidence,
    is_vacuous,
    merge_alternatives,
    validate_checks,
    wants_artefact,
)
from skillopt_sleep.models import Check


def contains(value: str, origin: str = "llm_miner") -> Check:
    return Check(op="contains", value=value, origin=origin)


# --------------------------------------------------------------------------- the four rules


def test_a_check_must_fail_the_corrected_answer_and_pass_the_accepted_one():
    evidence = Evidence(corrected=["Run `npm install lodash`."], accepted="Run `pnpm add lodash`.")
    assert check_verdict(contains("pnpm"), evidence) is None
    assert check_verdict(contains("lodash"), evidence) == "does not fail the answer the user corrected"
    assert check_verdict(contains("ISO format"), evidence) == "fails the answer the user accepted"
    assert check_verdict(contains("yarn"), Evidence(corrected=["npm i"], accepted="pnpm add")) == (
        "fails the answer the user accepted")


def test_a_check_nothing_in_the_session_can_confirm_is_rejected():
    assert check_verdict(contains("pnpm"), Evidence()) == "no answer in the session to validate it against"


def test_without_an_accepted_answer_failing_the_corrected_one_is_enough():
    assert check_verdict(contains("pnpm"), Evidence(corrected=["npm install"])) is None


def test_malformed_and_tool_checks_are_rejected_with_their_reason():
    evidence = Evidence(corrected=["x"], accepted="y")
    assert "does not compile" in check_verdict(Check(op="regex", value="(open"), evidence)
    assert "runs no tool" in check_verdict(Check(op="tool_called", value="Bash"), evidence)


def test_validate_checks_keeps_the_supported_ones_once_and_says_why_the_others_went():
    evidence = Evidence(corrected=["Run `npm install`."], accepted="Run `pnpm install`.")
    checks = [contains("pnpm"), Check(op="regex", value=negative_word_regex("npm"), origin="correction"),
              Check(op="not_contains", value="npm", origin="house_rule"),  # the same demand, written otherwise
              contains("install")]
    kept, rejected = validate_checks(checks, evidence)
    assert [check_key(check) for check in kept] == [("has", "pnpm"), ("not", "npm")]
    assert rejected == ["llm_miner contains 'install': does not fail the answer the user corrected"]


def test_check_keys_name_what_a_check_demands_however_it_is_written():
    assert check_key(Check(op="not_contains", value="NPM")) == check_key(
        Check(op="regex", value=negative_word_regex("npm"))) == ("not", "npm")
    assert check_key(Check(op="regex", value=negative_word_regex("os.path"))) == ("not", "os.path")
    assert check_key(contains("Pnpm")) == ("has", "pnpm")
    assert check_key(Check(op="max_words", value=50)) == ("max_words", "50")


# --------------------------------------------------------------------------- alternatives and vacuous replies


def test_contains_checks_for_allowed_forms_become_one_regex():
    evidence = Evidence(corrected=["Fixed typo"], accepted="fix(auth): correct the typo")
    checks = [contains(value) for value in ("feat", "fix", "docs", "chore", "refactor", "test")]
    [merged] = merge_alternatives(checks, evidence)
    # whole words: "Fixed typo" is not the form "fix"
    assert merged.op == "regex" and merged.value == r"(?<!\w)(?:feat|fix|docs|chore|refactor|test)(?!\w)"
    kept, _ = validate_checks(checks, evidence)
    assert kept == [merged]


def test_two_demands_the_accepted_answer_meets_are_not_alternatives():
    evidence = Evidence(corrected=["npm i"], accepted="pnpm add lodash")
    assert merge_alternatives([contains("pnpm"), contains("lodash")], evidence) == [contains("pnpm"),
                                                                                  contains("lodash")]


@pytest.mark.parametrize("text, vacuous", [
    ("", True), ("Done.", True), ("Sorry, fixed.", True), ("You're right, I updated it.", True),
    ("pnpm add lodash", False), ("Run `pnpm install`.", False), ("Released on 2026-10-30.", False),
    ("Three fixes and one feature.", False), (behaviour("Done.", ["[Bash] pnpm add lodash"]), False),
])
def test_a_vacuous_answer_shows_no_work(text, vacuous):
    assert is_vacuous(text) is vacuous


def test_only_checks_that_fail_a_vacuous_reply_are_hard_evidence_for_a_request_for_an_artefact():
    evidence = Evidence(corrected=["npm install"], accepted="pnpm install")
    assert hard_evidence([contains("pnpm")], evidence)
    # "no npm" alone passes "OK.": it cannot tell a good answer from no answer
    assert not hard_evidence([Check(op="regex", value=negative_word_regex("npm"))], evidence)
    assert not hard_evidence([], evidence)
    question = Evidence(corrected=["yes"], accepted="no", wants_artefact=False)
    assert hard_evidence([Check(op="regex", value=negative_word_regex("yes"))], question)


@pytest.mark.parametrize("request_text, wanted", [
    ("why does the build fail on CI?", False),
    ("is the cache shared between workers?", False),
    ("add lodash to the web app", True),
    ("how do I start the dev server?", True),  # asks for a command
    ("write a commit message for the login fix", True),
])
def test_a_bare_question_asks_for_no_artefact(request_text, wanted):
    assert wants_artefact(request_text) is wanted


# --------------------------------------------------------------------------- checks from the evidence


NPM = Evidence(corrected=["Run `npm install axios`."], accepted="Run `pnpm add axios`.")


@pytest.mark.parametrize("correction", [
    "we're a pnpm house",
    "pnpm!!",
    "NO. pnpm.",
    "stick to pnpm please",
    "I keep telling you: pnpm",
    "Please don't use npm here, we have pnpm",
    "use `pnpm`, npm breaks the lockfile",
])
def test_the_answers_tell_the_polarity_of_a_name_whatever_the_phrasing(correction):
    checks = evidence_checks(correction, NPM, rule=None)
    kept, _ = validate_checks(checks, NPM)
    keys = {check_key(check) for check in kept}
    assert ("has", "pnpm") in keys
    if re.search(r"(?<!p)npm", correction):  # the correction names what not to use
        assert ("not", "npm") in keys


def test_a_name_the_answers_do_not_tell_apart_gives_no_check():
    evidence = Evidence(corrected=["Use `requests.get(url)`."], accepted="Use `httpx.get(url)`.")
    checks = evidence_checks("in this project we care about the lockfile and httpx", evidence, rule=None)
    assert [check_key(check) for check in checks] == [("has", "httpx")]  # "lockfile" is in neither answer


def test_without_an_accepted_answer_the_user_words_give_the_polarity():
    evidence = Evidence(corrected=["Use `moment().format()` here."])
    checks = evidence_checks("don't use moment, we use date-fns", evidence, rule=None)
    assert {check_key(check) for check in checks} == {("not", "moment"), ("has", "date-fns")}


def test_a_format_placeholder_is_not_a_name():
    evidence = Evidence(corrected=["Released 11/03/2026."])
    assert evidence_checks("dates are YYYY-MM-DD here", evidence, rule=None) == []
    # the rule's own check covers the format
    assert [check.op for check in checks_for_rule("dates are YYYY-MM-DD here")] == ["regex"]


def test_a_listed_set_of_allowed_forms_is_one_regex():
    evidence = Evidence(corrected=["Updated files"], accepted="docs: update the readme")
    [check] = evidence_checks("types are feat, fix, docs or chore", evidence, rule="types")
    assert check.op == "regex" and check.rule == "types"
    kept, _ = validate_checks([check], evidence)
    assert kept == [check]


def test_tool_inputs_are_part_of_what_the_agent_did():
    corrected = behaviour("Installed it.", ["[Bash] npm install axios"])
    evidence = Evidence(corrected=[corrected], accepted=behaviour("Done.", ["[Bash] pnpm add axios"]))
    kept, rejected = validate_checks(evidence_checks("no, we use pnpm, not npm", evidence, rule=None), evidence)
    assert {check_key(check) for check in kept} == {("has", "pnpm"), ("not", "npm")} and rejected == []


# --------------------------------------------------------------------------- looking for names in answers


def test_the_lookalike_table_holds_every_character_ignorecase_matches_to_ascii() -> None:
    ascii_char = re.compile("[\x00-\x7f]", re.IGNORECASE)
    matched = {chr(code) for code in range(128, 0x110000) if ascii_char.fullmatch(chr(code))}

    assert matched == set(ASCII_LOOKALIKES)
    for char, plain in ASCII_LOOKALIKES.items():
        assert re.fullmatch(re.escape(plain), char, re.IGNORECASE)


@pytest.mark.parametrize("seed", range(6))
def test_a_name_is_found_where_the_whole_word_regex_finds_it(seed: int) -> None:
    rng = random.Random(seed)
    pieces = ["pnpm", "npm", "Path(", "use_httpx", "KiB", "\u212aib", "fIle", "f\u0131le", "F\u0130LE", "\u017fize",
              "size", "naïve", "Straße", "STRASSE", "—", "→", " ", "\n", "-", ".", "`"]
    names = ["npm", "pnpm", "Path(", "kib", "file", "size", "naïve", "straße", "use_httpx", "httpx", "-x"]
    for _ in range(300):
        text = _Text("".join(rng.choice(pieces) for _ in range(rng.randint(0, 30))))
        for name in names:
            expected = re.search(word_regex(name), text.text, re.IGNORECASE) is not None
            assert text.has_word(name) is expected, (name, text.text)


@pytest.mark.parametrize(("literal", "text", "found"), [
    ("--force", "git push --force-with-lease origin main", False),  # a longer flag is another word
    ("--force", "git push --force origin main", True),
    ("left-pad", "npm i left-pad-ng", False),
    ("left-pad", "remove left-pad now", True),
    ("npm", "pnpm add zod", False),
    ("npm", "npm-run-all is installed", True),  # a word without a hyphen keeps the plain word boundary
], ids=["flag-prefix", "flag", "package-prefix", "package", "npm-in-pnpm", "npm-before-hyphen"])
def test_a_hyphenated_literal_is_a_whole_word_of_hyphens_too(literal, text, found):
    assert (re.search(word_regex(literal), text) is not None) is found
    negative = negative_word_regex(literal)
    assert (re.search(negative, text) is None) is found
    assert check_key(Check(op="regex", value=negative)) == ("not", literal)  # the rule's identity is unchanged
