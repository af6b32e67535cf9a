"""Rule compilation: a stated rule written as the short imperative its validated checks demand.

A small model follows "Use `pnpm`, never `npm` (e.g. `pnpm add`)." where it ignores "we use pnpm in this repo, never
npm" (issue 26: 0/4 -> 3/4 held-out tasks with Qwen2.5-Coder-1.5B). ``compile_rule(rule, examples_from)`` builds that
line from the rule's validated checks (``StatedRule.checks``; what each operator means is ``checks.py``'s), one
sentence per kind of check, no shouting, one line:

| checks | sentence |
|---|---|
| ``contains X``, ``not_contains Y`` (or its ``negative_word_regex``) | ``Use `X`, never `Y`.`` (``Never use `Y`.``) |
| ``regex`` a dotted name X is used (``grammar.literals.name_use_regex``: ``pathlib.Path``) | as ``contains X`` |
| ``regex`` any of X, Z is used (``checks.any_word_regex``: "const or let") | ``Use `X` or `Z`, never `Y`.`` |
| ``regex`` ISO date (``grammar.formats.ISO_DATE_REGEX``) | ``Write every date as `YYYY-MM-DD`.`` |
| ``regex`` ISO date, no month names (``grammar.formats.ISO_DATE_NO_MONTHS_REGEX``) | ``..., with no month names.`` |
| ``regex`` Conventional Commits | ``Write every commit message as a Conventional Commit, `type(scope): subject`.`` |
| ``language de`` | ``Respond in German.`` |
| ``max_words N`` / ``max_chars N`` | ``Keep answers under N words.`` / ``... N characters.`` |
| ``section_present S`` | ``Include a `## S` section.`` |
| ``json_valid`` | ``Answer in JSON only.`` |

Any other check (another regex, ``starts_with``, ``tool_called``, ...) has no imperative that says what it demands:
the rule is not compiled (None) and is written in the user's words. Literals keep the case the user typed them in; a
literal to use that another one holds is said by that one (``ruff format`` says ``ruff``), and a literal to avoid
that holds another one by that one (never ``os`` says never ``os.path``).

A literal to avoid that every answer the user corrected used as the same command, in at least two of them, is named
by that command: ``Use `uv add`, never `pip install```, where the corrected answers ran ``pip install numpy`` and
``pip install jinja2`` (the issue's form; Qwen2.5-Coder-1.5B on world 2's uv probes with the night-3 memory: 1 of 4
with ``never `pip```, 2 of 4 with ``never `pip install```); when they used it as different commands (``docker
build``, ``docker ps``), or one answer alone shows it, the literal alone is named.

A literal to use that its example uses as a command is named by that command: ``Use `uv add`, never `pip` (e.g. `uv
add polars`).`` where the example starts with the literal and the next word and shows more (the exact command in
backticks is what a small model follows: world 2's uv probes on Qwen2.5-Coder-1.5B, 2 of 4 with ``Use `uv```, 4 of
4 with ``Use `uv add```, and 0 of 4 either way without the example).

One example is added from the answers the user accepted (``TaskEvidence.accepted_answer``) that pass every check of
the rule: for ``contains X``, the code span, code line or tool input holding X, trimmed to X and the next word or two
(``pnpm add``); for a format regex, its first match (``2026-11-03``; a line-anchored regex: the matched line). No
example when no accepted answer passes, or when none shows more than the literal itself.

Whether a compiled line may be written (it reads back as the same checks, and passes the screens every edit passes)
is ``rulebook.written_line``'s to decide; this module only builds text.
"""

from __future__ import annotations

import json
import re
from typing import Protocol

from skillopt_sleep.checks import any_words_of_regex, check_key, check_passes, word_regex
from skillopt_sleep.grammar.formats import (
    CONVENTIONAL_COMMIT_REGEX,
    ISO_DATE_NO_MONTHS_REGEX,
    ISO_DATE_REGEX,
    LANGUAGES,
)
from skillopt_sleep.grammar.literals import name_of_use_regex
from skillopt_sleep.mine.validation import ACTIONS_HEADER
from skillopt_sleep.models import Check


class StatedRule(Protocol):
    """What compilation reads of a rule (``mine.rulebook.StatedRule`` has it): its validated checks and the user's
    phrasings. A protocol, so that this module stays below the rulebook that calls it."""

    checks: list[Check]
    phrasings: list[str]

#: Longest example (characters) a compiled line shows.
EXAMPLE_CHARS = 40
#: Most words after the literal a command example keeps (``pnpm add axios``).
EXAMPLE_WORDS = 2
#: Different corrected answers that must use a literal to avoid as one command for the line to name that command.
AVOIDED_ANSWERS = 2

#: The sentence of each format regex the rule reader produces (``grammar.formats.format_checks``).
_FORMAT_SENTENCES = {
    ISO_DATE_REGEX: "Write every date as `YYYY-MM-DD`",
    ISO_DATE_NO_MONTHS_REGEX: "Write every date as `YYYY-MM-DD`, with no month names",
    CONVENTIONAL_COMMIT_REGEX: "Write every commit message as a Conventional Commit, `type(scope): subject`",
}
#: ISO 639-1 code -> the language's English name (the first name ``grammar.formats.LANGUAGES`` gives it).
_LANGUAGE_NAMES: dict[str, str] = {}
for _name, _code in LANGUAGES.items():
    _LANGUAGE_NAMES.setdefault(_code, _name.title())

_CODE_SPAN = re.compile(r"`([^`\n]+)`")
_FENCED = re.compile(r"```[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_TOOL_PREFIX = re.compile(r"^\[[^\]\n]{1,40}\]\s*")
_NEXT_WORD = re.compile(r"\s+[A-Za-z][\w-]*(?=\s|$)")


def compile_rule(rule: StatedRule, examples_from: list[str], avoided_from: list[str] | None = None) -> str | None:
    """The rule as one imperative line body (no bullet): ``Use `pnpm`, never `npm` (e.g. `pnpm add`).``, or None when
    a check of the rule has no imperative (module docstring) or the rule has no check.

    rule: a ``rulebook.StatedRule`` (its ``checks`` and ``phrasings`` are read); examples_from: answers the user
    accepted (``StatedRule.accepted_answers``; [] for no example); avoided_from: answers the user corrected
    (``StatedRule.corrected_answers``), where a literal to avoid takes its command form (None or [] for none). Never
    raises.
    """
    checks = list(rule.checks)
    if not checks:
        return None
    wanted = [_wanted_literals(check) for check in checks]
    single = _longest([_as_typed(literals[0], rule) for literals in wanted if literals and len(literals) == 1])
    either = [[_as_typed(literal, rule) for literal in literals]
              for literals in wanted if literals and len(literals) > 1]
    banned = [check for check in checks if check_key(check)[0] == "not"]
    sentences: list[str] = []
    example_after: int | None = None  # the sentence the example belongs to
    example: str | None = None
    if single or either or banned:
        banned_literals = [_avoided_form(literal, avoided_from or []) or literal for literal in
                           _shortest([_as_typed(check_key(check)[1], rule) for check in banned])]
        if any("`" in literal for literal in [*single, *banned_literals, *(x for one in either for x in one)]):
            return None
        uses = [f"`{literal}`" for literal in single] + [" or ".join(f"`{x}`" for x in one) for one in either]
        if uses:
            sentence = "Use " + " and ".join(uses)
            if banned_literals:
                sentence += ", never " + " or ".join(f"`{literal}`" for literal in banned_literals)
            if single:
                example = _literal_example(single[0], _passing(examples_from, checks))
                form = _use_form(single[0], example)
                if form is not None:  # "Use `uv add`, never `pip` (e.g. `uv add polars`)."
                    sentence = sentence.replace(f"`{single[0]}`", f"`{form}`", 1)
        else:
            sentence = "Never use " + " or ".join(f"`{literal}`" for literal in banned_literals)
        sentences.append(sentence)
        example_after = 0 if example else None
    for check, literals in zip(checks, wanted):
        if check_key(check)[0] == "not" or literals is not None:
            continue
        sentence = _sentence(check)
        if sentence is None:
            return None
        if sentence in sentences:
            continue
        sentences.append(sentence)
        if example is None and check.op == "regex":
            example = _regex_example(str(check.value), _passing(examples_from, checks))
            example_after = len(sentences) - 1 if example else None
    if example is not None and example_after is not None:
        sentences[example_after] += f" (e.g. `{example}`)"
    return " ".join(sentence + "." for sentence in sentences)


def _wanted_literals(check: Check) -> list[str] | None:
    """The literals a check demands be used, any one of them: ``contains X`` -> [X], a ``name_use_regex`` -> [its
    dotted name], an ``any_word_regex`` -> its literals ("const or let"); else None."""
    if check_key(check)[0] == "has":
        return [str(check.value)]
    if check.op != "regex" or not isinstance(check.value, str):
        return None
    name = name_of_use_regex(check.value)
    return [name] if name is not None else any_words_of_regex(check.value)


def _longest(literals: list[str]) -> list[str]:
    """The literals that no other one holds (``ruff format`` says ``ruff``; ``datetime.now(timezone.utc)`` says
    ``UTC``), in order."""
    folded = [literal.casefold() for literal in literals]
    return [literal for literal, fold in zip(literals, folded)
            if not any(fold != other and fold in other for other in folded)]


def _shortest(literals: list[str]) -> list[str]:
    """The literals that hold no other one (never ``os`` says never ``os.path``), in order."""
    folded = [literal.casefold() for literal in literals]
    return [literal for literal, fold in zip(literals, folded)
            if not any(fold != other and other in fold for other in folded)]


def _sentence(check: Check) -> str | None:
    """The imperative of one check that is not a literal to use or avoid, or None when it has none."""
    if check.op == "regex":
        return _FORMAT_SENTENCES.get(str(check.value))
    if check.op == "language":
        name = _LANGUAGE_NAMES.get(str(check.value).strip().lower())
        return f"Respond in {name}" if name else None
    if check.op == "max_words":
        return f"Keep answers under {check.value} words"
    if check.op == "max_chars":
        return f"Keep answers under {check.value} characters"
    if check.op == "section_present" and "`" not in str(check.value):
        return f"Include a `## {check.value}` section"
    if check.op == "json_valid":
        return "Answer in JSON only"
    return None


def _as_typed(literal: str, rule: StatedRule) -> str:
    """``literal`` in the case the user typed it in one of the rule's phrasings (``NPM`` stays ``NPM``), else as
    given."""
    pattern = re.compile(word_regex(literal), re.IGNORECASE)
    for phrasing in [rule.text, *rule.phrasings]:
        match = pattern.search(phrasing or "")
        if match:
            return match.group(0)
    return literal


def _passing(answers: list[str], checks: list[Check]) -> list[str]:
    """The answers every check passes (an undecidable check does not pass)."""
    return [answer for answer in answers
            if answer and all(check_passes(check, answer, None) is True for check in checks)]


def _fragments(answer: str) -> list[str]:
    """The code of an answer, one piece per item: inline code spans, lines of fenced blocks, and tool inputs (the
    lines after ``ACTIONS_HEADER``, without their ``[Tool]`` prefix; of a JSON input with a ``command``, as Claude
    Code's Bash tool writes it, the command's lines)."""
    text, _, actions = answer.partition(ACTIONS_HEADER)
    pieces = [line for block in _FENCED.findall(text) for line in block.splitlines()]
    pieces += _CODE_SPAN.findall(_FENCED.sub(" ", text))
    for line in actions.splitlines():
        tool_input = _TOOL_PREFIX.sub("", line)
        pieces += _command_lines(tool_input) or [tool_input]
    return [piece.strip() for piece in pieces if piece.strip()]


def _command_lines(tool_input: str) -> list[str]:
    """The lines of the ``command`` of a JSON tool input (``{"command": "pip install numpy", ...}``), else []."""
    if not tool_input.lstrip().startswith("{"):
        return []
    try:
        parsed = json.loads(tool_input)
    except ValueError:
        return []
    command = parsed.get("command") if isinstance(parsed, dict) else None
    return command.splitlines() if isinstance(command, str) else []


def _literal_example(literal: str, answers: list[str]) -> str | None:
    """The first fragment of ``answers`` that holds ``literal`` as a whole word, trimmed: when the fragment starts
    with it and a word follows (a command), the literal and at most ``EXAMPLE_WORDS`` following words, not a flag
    (``pnpm add`` of ``pnpm add -D eslint``); else the whole fragment (``logger = logging.getLogger(__name__)``).
    Commands come first. None when no fragment shows more than the literal within ``EXAMPLE_CHARS``."""
    pattern = re.compile(word_regex(literal), re.IGNORECASE)
    leading: list[str] = []
    inside: list[str] = []
    for answer in answers:
        for fragment in _fragments(answer):
            match = pattern.search(fragment)
            if match is None:
                continue
            end = _words_after(fragment, match.end(), EXAMPLE_WORDS)
            if match.start() == 0 and end > match.end():
                leading.append(fragment[:end])
            else:  # the literal inside code, or opening code that is no command (``logger = logging.getLogger()``)
                inside.append(fragment)
    for example in leading + inside:
        if example.casefold() != literal.casefold() and len(example) <= EXAMPLE_CHARS and "`" not in example:
            return example
    return None


def _use_form(literal: str, example: str | None) -> str | None:
    """The command a literal to use is used as in its example: the literal and the next word, when the example
    starts with them and shows more (``uv add`` of ``uv add polars``); else None."""
    if example is None or not example.casefold().startswith(literal.casefold()):
        return None
    end = _words_after(example, len(literal), 1)
    return example[:end] if len(literal) < end < len(example.rstrip()) else None


def _avoided_form(literal: str, answers: list[str]) -> str | None:
    """The command a literal to avoid was used as in the answers the user corrected: the literal and the next word,
    when every fragment of those answers that starts with the literal goes on with that same word, in at least
    ``AVOIDED_ANSWERS`` different answers (``pip install`` of ``pip install numpy`` and ``pip install jinja2``); None
    when they differ (``docker build``, ``docker ps``), when one uses it bare, or when fewer answers show it (one
    ``npm run dev`` does not make "never npm" a rule about ``npm run``)."""
    pattern = re.compile(word_regex(literal), re.IGNORECASE)
    forms: dict[str, str] = {}
    showing = 0
    for answer in answers:
        shown = False
        for fragment in _fragments(answer):
            match = pattern.match(fragment)
            if match is None:
                continue
            end = _words_after(fragment, match.end(), 1)
            if end == match.end():
                return None
            form = fragment[:end]
            forms.setdefault(form.casefold(), form)
            shown = True
        showing += shown
    if len(forms) != 1 or showing < AVOIDED_ANSWERS:
        return None
    form = next(iter(forms.values()))
    return form if len(form) <= EXAMPLE_CHARS and "`" not in form else None


def _words_after(text: str, start: int, most: int) -> int:
    """Where the words that follow ``start`` in ``text`` end: at most ``most`` of them, each a space and then a word
    that starts with a letter (no flag, no path: ``add`` of `` add -D``); ``start`` when none follows."""
    end = start
    for _ in range(most):
        following = _NEXT_WORD.match(text, end)
        if following is None:
            break
        end = following.end()
    return end


def _regex_example(pattern: str, answers: list[str]) -> str | None:
    """The first match of ``pattern`` in ``answers`` (its group ``example`` when it has one; the whole line for a
    line-anchored pattern, ``(?m)^``), at most ``EXAMPLE_CHARS``, or None."""
    try:
        compiled = re.compile(pattern, re.IGNORECASE)
    except re.error:
        return None
    for answer in answers:
        match = compiled.search(answer)
        if match is None:
            continue
        found = match.group("example") if "example" in compiled.groupindex else match.group(0)
        if pattern.startswith("(?m)^"):
            line_end = answer.find("\n", match.start())
            found = answer[match.start(): line_end if line_end >= 0 else len(answer)]
        found = found.strip()
        if found and len(found) <= EXAMPLE_CHARS and "`" not in found:
            return found
    return None
