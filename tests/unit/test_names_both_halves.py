"""Names have both halves (issue 26, item 3): a dotted code name in a rule ("pathlib.Path only, no os.path") is checked
by its use (the module named or the symbol called), which a correct ``from pathlib import Path`` answer passes, and the
name to avoid by a whole-word negative; an ISO-date rule is checked on the dates an answer writes or the code that
prints one (``%Y-%m-%d``, ``isoformat()``), with no M/D/Y date (a month-name date too, when the rule says so). Every
check still goes through validation against the transcript, and compiles to a line that reads back as itself.
Wordings: the users' corrections of benchmarks/world.py, and rules of the real-rules corpus labels."""

from __future__ import annotations

import pytest

from benchmarks import world
from skillopt_sleep.checks import (
    any_word_regex,
    any_words_of_regex,
    check_key,
    check_passes,
    negative_word_regex,
    word_regex,
)
from skillopt_sleep.grammar.formats import ISO_DATE_NO_MONTHS_REGEX, ISO_DATE_REGEX
from skillopt_sleep.grammar.literals import dotted_name, literal_alternatives, name_of_use_regex, name_use_regex
from skillopt_sleep.grammar.statements import checks_for_rule, rule_statements
from skillopt_sleep.mine.compile import compile_rule
from skillopt_sleep.mine.rulebook import admissible, stated_rules, written_line
from skillopt_sleep.mine.validation import Evidence, evidence_checks, validate_checks
from skillopt_sleep.models import Check, Judge, TaskEvidence, TaskRecord

PATHLIB_RIGHT = "```python\nfrom pathlib import Path\nparent = Path(file_path).parent\n```"
PATHLIB_WRONG = "```python\nimport os\nparent = os.path.dirname(file_path)\n```"


def ops(checks: list[Check]) -> list[tuple[str, object]]:
    return [(check.op, check.value) for check in checks]


def passes(value: str, answer: str) -> bool | None:
    return check_passes(Check(op="regex", value=value), answer, None)


# --------------------------------------------------------------------------- dotted names


@pytest.mark.parametrize(("literal", "parts", "pattern"), [
    ("pathlib.Path", ("pathlib", "Path"), r"\bpathlib\b|\bPath\("),
    ("os.path", ("os", "path"), r"\bos\b|\bpath\("),
    ("os.path.join", ("os.path", "join"), r"\bos\.path\b|\bjoin\("),
    ("datetime.now()", ("datetime", "now"), r"\bdatetime\b|\bnow\("),
    ("logging.getLogger", ("logging", "getLogger"), r"\blogging\b|\bgetLogger\("),
])
def test_a_dotted_name_is_a_module_and_a_symbol_and_its_use_regex_reads_back(literal, parts, pattern):
    assert dotted_name(literal) == parts
    assert name_use_regex(literal) == pattern
    assert name_of_use_regex(pattern) == literal.removesuffix("()")


@pytest.mark.parametrize("literal", [
    "pathlib", "datetime.now(timezone.utc)", "3.11", "v1.2", "e.g",
    # file and host names of the real-rules corpus labels (en.json, Goals.vue, Next.js, error.log, ...)
    "en.json", "Goals.vue", "Next.js", "Node.js", "error.log", "run_dictation_local.sh", "example.com",
])
def test_a_word_a_call_with_arguments_a_version_or_a_file_name_is_no_dotted_name(literal):
    assert dotted_name(literal) is None and name_use_regex(literal) is None


def test_a_pattern_that_only_looks_like_a_use_regex_names_nothing():
    assert name_of_use_regex(r"\bpathlib\b|\bPath\(|x") is None
    assert name_of_use_regex(negative_word_regex("os.path")) is None


def test_pathlib_path_only_no_os_path_is_checked_by_its_use_not_its_literal():
    checks = checks_for_rule("pathlib.Path only, no os.path")
    assert ops(checks) == [("regex", r"\bpathlib\b|\bPath\("), ("regex", negative_word_regex("os.path"))]
    # the literal dotted name fails the answer the user accepts: that is why it is not the check
    assert check_passes(Check(op="contains", value="pathlib.Path"), PATHLIB_RIGHT, None) is False
    for answer in (PATHLIB_RIGHT, "Path('cache').is_dir()", "import pathlib\npathlib.Path('x')"):
        assert all(check_passes(check, answer, None) for check in checks), answer
    assert [check_passes(check, PATHLIB_WRONG, None) for check in checks] == [False, False]
    # the negative is a whole word: os.path.join is os.path, a name that holds it is not
    assert check_passes(checks[1], "x = os.path.join(a, b)", None) is False
    assert check_passes(checks[1], "from pathlib import Path  # myos.pathname", None) is True


@pytest.mark.parametrize(("rule", "expected"), [
    ("use logging.getLogger, not print", [("regex", r"\blogging\b|\bgetLogger\("), ("not_contains", "print")]),
    ("always use logging.getLogger", [("regex", r"\blogging\b|\bgetLogger\(")]),
    ("never use datetime.utcnow()", [("regex", negative_word_regex("datetime.utcnow()"))]),
    # a file name keeps its literal checks, as before
    ("we use settings.json, not config.ini", [("contains", "settings.json"), ("not_contains", "config.ini")]),
    # a call with arguments is the exact form: its literal
    ("use datetime.now(timezone.utc), not datetime.utcnow",
     [("contains", "datetime.now(timezone.utc)"), ("regex", negative_word_regex("datetime.utcnow"))]),
])
def test_a_rule_naming_a_dotted_name_gives_both_halves(rule, expected):
    assert ops(checks_for_rule(rule)) == expected


def test_a_logger_answer_passes_the_use_of_logging_get_logger_and_a_print_answer_fails_it():
    [uses, _] = checks_for_rule("use logging.getLogger, not print")
    assert check_passes(uses, "import logging\nlog = logging.getLogger(__name__)", None) is True
    assert check_passes(uses, "from logging import getLogger\nlog = getLogger(__name__)", None) is True
    assert check_passes(uses, "print('starting')", None) is False


# --------------------------------------------------------------------------- validation on the worlds' wordings


def world_conversations(rule: str) -> list[world.Conversation]:
    return [conversation for night in world.NIGHTS for conversation in night if conversation.rule == rule]


def validated(conversation: world.Conversation) -> list[Check]:
    evidence = Evidence(corrected=[conversation.wrong_answer], accepted=conversation.fixed_answer)
    checks = [check for rule in rule_statements(conversation.correction) for check in checks_for_rule(rule)]
    kept, _rejected = validate_checks(checks, evidence)
    return kept


@pytest.mark.parametrize("conversation", world_conversations("pathlib"), ids=lambda c: c.correction)
def test_every_pathlib_correction_of_world_1_validates_a_positive_and_a_negative(conversation):
    kept = validated(conversation)
    assert {check_key(check)[0] for check in kept} == {"has", "not"}, ops(kept)
    assert all(check_passes(check, conversation.fixed_answer, None) for check in kept)


@pytest.mark.parametrize(("wording", "wrong", "fixed"), [
    ("pathlib.Path only, no os.path", PATHLIB_WRONG, PATHLIB_RIGHT),
    ("use pathlib.Path, never os.path", world.NIGHTS[0][6].wrong_answer, world.NIGHTS[0][6].fixed_answer),
    ("no, we use pathlib.Path here, not os.path", world.NIGHTS[1][6].wrong_answer, world.NIGHTS[1][6].fixed_answer),
])
def test_a_dotted_pathlib_rule_validates_both_halves_on_world_1_answers(wording, wrong, fixed):
    kept = validated(world.Conversation("pathlib", "request", wrong, wording, fixed))
    assert ops(kept) == [("regex", r"\bpathlib\b|\bPath\("), ("regex", negative_word_regex("os.path"))]


@pytest.mark.parametrize("conversation", world_conversations("iso_date"), ids=lambda c: c.correction)
def test_every_date_correction_of_world_1_validates_the_date_check(conversation):
    assert ops(validated(conversation)) == [("regex", ISO_DATE_REGEX)]


def test_a_correction_naming_a_dotted_name_gives_its_use_from_the_evidence():
    evidence = Evidence(corrected=[PATHLIB_WRONG], accepted=PATHLIB_RIGHT)
    checks = evidence_checks("no, use pathlib.Path, not os.path", evidence, rule=None)
    kept, _ = validate_checks(checks, evidence)
    assert ops(kept) == [("regex", r"\bpathlib\b|\bPath\("), ("regex", negative_word_regex("os.path"))]


# --------------------------------------------------------------------------- dates


@pytest.mark.parametrize(("answer", "expected"), [
    ("## 1.3.0 - 2026-11-03", True),
    ("stamp = now.strftime(\"%Y-%m-%d\")", True),
    ("stamp = date.today().isoformat()", True),
    ("const day = new Date().toISOString().slice(0, 10);", True),
    ("## 1.3.0 - 11/03/2026", False),
    ("Released 2026-11-03 (US: 11/03/2026)", False),
    ("stamp = now.strftime(\"%y-%m-%d\")", False),  # a two-digit year is not ISO
    ("Released on YYYY-MM-DD.", False),  # the rule's placeholder echoed is not a date
    ("OK.", False),
])
def test_an_iso_date_rule_is_checked_on_the_dates_written_or_the_format_used(answer, expected):
    assert ops(checks_for_rule("dates are ISO here, YYYY-MM-DD please")) == [("regex", ISO_DATE_REGEX)]
    assert passes(ISO_DATE_REGEX, answer) is expected


def test_a_month_name_date_fails_the_date_rule_only_when_the_rule_says_so():
    answer = "Released 2026-11-03 (November 3, 2026)."
    assert passes(ISO_DATE_REGEX, answer) is True
    for rule in ("Write every date as ISO 8601, YYYY-MM-DD, never MM/DD/YYYY or month names",
                 "dates are ISO here, not November 3, 2026"):
        assert [check.value for check in checks_for_rule(rule) if check.op == "regex"] == [ISO_DATE_NO_MONTHS_REGEX]
    assert passes(ISO_DATE_NO_MONTHS_REGEX, answer) is False
    assert passes(ISO_DATE_NO_MONTHS_REGEX, "Released on Nov. 3rd, 2026") is False
    assert passes(ISO_DATE_NO_MONTHS_REGEX, "Released on 2026-11-03") is True


def test_the_date_checks_are_well_formed_checks():
    from skillopt_sleep.checks import validate_check

    for value in (ISO_DATE_REGEX, ISO_DATE_NO_MONTHS_REGEX):
        assert validate_check(Check(op="regex", value=value)) is None


# --------------------------------------------------------------------------- compilation


def stated(phrasing: str, *accepted: str):
    tasks = [TaskRecord(id=f"t-{number}", source="claude", request=f"request {number}", rules=[phrasing],
                        judge=Judge(checks=[check.model_copy(update={"rule": phrasing})
                                            for check in checks_for_rule(phrasing)]),
                        split="train", evidence=TaskEvidence(accepted_answer=answer))
             for number, answer in enumerate(accepted or (None,))]
    [rule] = stated_rules(tasks)
    return rule


@pytest.mark.parametrize(("phrasing", "line"), [
    ("pathlib.Path only, no os.path", "- Use `pathlib.Path`, never `os.path`."),
    ("no, we use pathlib here, never os.path", "- Use `pathlib`, never `os.path` (e.g. `from pathlib import Path`)."),
    ("use logging.getLogger, not print", "- Use `logging.getLogger`, never `print`."),
    ("dates are ISO here, YYYY-MM-DD please", "- Write every date as `YYYY-MM-DD` (e.g. `2026-10-30`)."),
    ("Write every date as ISO 8601, YYYY-MM-DD, never MM/DD/YYYY or month names",
     "- Write every date as `YYYY-MM-DD`, with no month names (e.g. `2026-10-30`)."),
])
def test_the_new_check_shapes_compile_to_an_admissible_line(phrasing, line):
    accepted = "Released on 2026-10-30." if "date" in phrasing else PATHLIB_RIGHT
    rule = stated(phrasing, accepted)
    assert compile_rule(rule, rule.accepted_answers) is not None
    assert written_line(rule) == line
    assert admissible(line, rule)


# --------------------------------------------------------------------------- alternatives: "use const or let"

CONST_RIGHT = "```js\nconst total = items.reduce((sum, x) => sum + x, 0)\n```"
LET_RIGHT = "```js\nlet count = 0\nfor (const word of words) count++\n```"
VAR_WRONG = "```js\nvar total = 0\nfor (var i = 0; i < items.length; i++) total += items[i]\n```"


@pytest.mark.parametrize(("phrasing", "literals"), [
    ("const or let", ["const", "let"]),
    ("`const` or `let`", ["const", "let"]),
    ("pnpm, yarn or bun", ["pnpm", "yarn", "bun"]),
    ("const or let for variables", ["const", "let"]),
    ("a list or a table", None),  # styles, not literals
    ("tabs or spaces", None),
    ("npm or npm", None),  # one literal twice
    ("ruff or ruff format", None),  # one holds the other
])
def test_a_phrase_naming_alternatives_gives_each_literal(phrasing, literals):
    assert literal_alternatives(phrasing) == literals


def test_use_const_or_let_never_var_demands_either_one_not_the_first():
    """``benchmarks/world3.py``'s instruction block: "Use const or let, never var". Before, the positive half was lost
    (no literal in "const or let") and the rule compiled to "Never use `var`.", which Qwen2.5-Coder-1.5B followed on
    fewer probes than no rule at all. A ``contains const`` would fail the accepted answer that uses ``let`` only."""
    [either, never] = checks_for_rule("Use const or let, never var")
    assert either.op == "regex" and any_words_of_regex(str(either.value)) == ["const", "let"]
    assert check_key(never) == ("not", "var")
    assert [passes(str(either.value), answer) for answer in (CONST_RIGHT, LET_RIGHT, VAR_WRONG)] == [True, True, False]
    assert passes(str(either.value), "constant = 1  # a letter") is False  # whole words only
    assert ops(checks_for_rule("Use `const` or `let`, never `var`.")) == ops([either, never])


def test_an_alternatives_regex_reads_back_and_nothing_else_does():
    for literals in (["const", "let"], ["pnpm", "yarn", "bun"], ["--force-with-lease", "--no-verify"]):
        assert any_words_of_regex(any_word_regex(literals)) == literals
    for pattern in (word_regex("const"), negative_word_regex("var"), r"\bpathlib\b|\bPath\(", ISO_DATE_REGEX, "a|b"):
        assert any_words_of_regex(pattern) is None, pattern


def test_alternatives_validate_on_the_session_and_compile_to_a_line_that_reads_back():
    evidence = Evidence(corrected=[VAR_WRONG], accepted=LET_RIGHT)
    kept, _rejected = validate_checks(checks_for_rule("Use const or let, never var"), evidence)
    assert {check_key(check)[0] for check in kept} == {"regex", "not"}
    rule = stated("Use const or let, never var", LET_RIGHT)
    line = written_line(rule)
    assert line == "- Use `const` or `let`, never `var`."
    assert admissible(line, rule)
    assert not admissible("- Use `const`, never `var`.", rule)  # half the alternatives is another rule
