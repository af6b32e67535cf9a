"""Checks: the deterministic tests a judge applies to one response (the vocabulary every layer shares).

A ``models.Check`` is an operator and a value (``contains "pnpm"``, ``max_words 120``, ``json_valid``). This module
is the one place that knows what each operator means:

* ``validate_check(check)``: why a check cannot be scored at all (wrong value type, empty, a regex that does not
  compile), or None;
* ``evaluate_check(check, response, tools_called)`` / ``check_passes(...)``: the verdict on one response
  (``UnverifiableCheck`` / None when it cannot be decided);
* ``check_key(check)``: what a check demands, independent of how it is written (two checks with one key are one
  check; a rule is identified by the keys of its validated checks);
* ``describe_check(check)``: its short label in reasons;
* ``word_regex`` / ``negative_word_regex``: a literal as a whole word, and "never as a whole word";
* ``language_of(text)`` / ``LANGUAGE_MIN_CHARS``: what ``language`` checks with (``py3langid``, a maintained
  language-identification library); ``foreign_language(text)``: the language of a sentence that is surely not
  English (what the rule reader translates).

It imports nothing of the pipeline: the miner, the judges, the rulebook and the mock simulator all stand on it.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from typing import get_args

from skillopt_sleep.models import Check, CheckOp

#: Every operator (``models.CheckOp``).
CHECK_OPS: tuple[str, ...] = get_args(CheckOp)
#: Operators whose value is a text.
TEXT_OPS = frozenset({"contains", "not_contains", "regex", "starts_with", "ends_with", "section_present",
                      "tool_called", "language"})
#: Operators whose value is a positive integer.
INT_OPS = frozenset({"max_chars", "max_words"})
#: Longest text value (characters) a check may carry at all (``validate_check``).
MAX_CHECK_VALUE_CHARS = 200
#: Fewest letters of prose a response needs before its language is decided (shorter: unverifiable).
LANGUAGE_MIN_CHARS = 20
#: An ASCII sentence is another language only when English's probability is below this (``foreign_language``) ...
ENGLISH_DOUBT = 0.01
#: ... and the most likely language holds at least this share (spread thinner, the words are code or names) ...
FOREIGN_LANGUAGE_SHARE = 0.2
#: ... and it has at least this many words.
FOREIGN_MIN_WORDS = 3


class UnverifiableCheck(Exception):
    """A check that cannot be decided for this response (the message says why)."""


# --------------------------------------------------------------------------- validation


def validate_check(check: Check) -> str | None:
    """Return why ``check`` cannot be scored (bad regex, wrong value type, empty or overlong value), or None.

    Text ops (contains, not_contains, regex, starts_with, ends_with, section_present, tool_called, language) need a
    non-empty string of at most ``MAX_CHECK_VALUE_CHARS``; ``regex`` must compile; ``language`` must be an ISO 639-1
    code the identifier knows; ``max_chars``/``max_words`` need an int > 0 (not a bool, not a string);
    ``json_valid`` takes no value.
    """
    value = check.value
    if check.op in TEXT_OPS:
        if not isinstance(value, str):
            return f"{check.op} needs a text value, got {type(value).__name__}"
        if not value.strip():
            return f"{check.op} has an empty value"
        if len(value) > MAX_CHECK_VALUE_CHARS:
            return f"{check.op} value is longer than {MAX_CHECK_VALUE_CHARS} characters"
        if check.op == "regex":
            try:
                re.compile(value)
            except re.error as exc:
                return f"regex {value!r} does not compile ({exc})"
        if check.op == "language" and value not in known_languages():
            return f"language {value!r} is not an ISO 639-1 code the identifier knows"
        return None
    if check.op in INT_OPS:
        if isinstance(value, bool) or not isinstance(value, int):
            return f"{check.op} needs an integer value, got {type(value).__name__}"
        if value <= 0:
            return f"{check.op} needs a positive integer, got {value}"
        return None
    if check.op == "json_valid":
        if value not in (None, ""):
            return f"json_valid takes no value, got {value!r}"
        return None
    return f"unknown check op {check.op!r}"


# --------------------------------------------------------------------------- evaluation


@functools.cache
def _markdown():
    """The CommonMark parser (markdown-it), built on first use: a harvest that mines nothing never imports it."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark")


def _fold(text: str, case_sensitive: bool) -> str:
    return text if case_sensitive else text.casefold()


def _text_value(check: Check) -> str:
    if not isinstance(check.value, str) or check.value == "":
        raise UnverifiableCheck(f"{check.op} needs a non-empty text value")
    return check.value


def _int_value(check: Check) -> int:
    value = check.value
    if isinstance(value, bool):
        raise UnverifiableCheck(f"{check.op} needs an integer value")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    raise UnverifiableCheck(f"{check.op} needs an integer value, got {value!r}")


def _normalize_heading(text: str, case_sensitive: bool) -> str:
    text = text.strip().lstrip("#").strip()
    text = text.strip("*_` ").rstrip(":").strip("*_` ")
    return _fold(" ".join(text.split()), case_sensitive)


def _headings(response: str) -> list[str]:
    """Text of every Markdown heading (ATX ``#``..``######`` and setext), outside code blocks."""
    tokens = _markdown().parse(response)
    return [tokens[i + 1].content for i, token in enumerate(tokens)
            if token.type == "heading_open" and i + 1 < len(tokens)]


def _is_json_container(text: str) -> bool:
    try:
        return isinstance(json.loads(text), (dict, list))
    except ValueError:
        return False


def _json_valid(response: str) -> bool:
    """The whole response (stripped) is a JSON object or array, or the response has ```json fenced
    blocks and every one of them holds a JSON object or array. Scalars (``42``) do not count."""
    if _is_json_container(response.strip()):
        return True
    fences = [token.content for token in _markdown().parse(response)
              if token.type == "fence" and token.info.strip().casefold() == "json"]
    return bool(fences) and all(_is_json_container(body.strip()) for body in fences)


_CODE = re.compile(r"```.*?(?:```|\Z)|`[^`\n]*`|https?://\S+", re.DOTALL)


def prose_of(text: str) -> str:
    """``text`` without code blocks, inline code and URLs: the part a language is decided on."""
    return _CODE.sub(" ", text or "")


@functools.cache
def _identifier():
    """py3langid's identifier, loaded on first use (its model is read from the package, about 0.5 s with numpy)."""
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


@functools.cache
def known_languages() -> frozenset[str]:
    """The ISO 639-1 codes the identifier can name."""
    return frozenset(str(code) for code in _identifier().nb_classes)


def language_of(text: str) -> str | None:
    """The ISO 639-1 code of the language ``text`` is written in (``"es"``), decided on its prose (``prose_of``), or
    None when it holds fewer than ``LANGUAGE_MIN_CHARS`` letters of prose. Source: py3langid (langid.py's model)."""
    prose = prose_of(text)
    if sum(1 for char in prose if char.isalpha()) < LANGUAGE_MIN_CHARS:
        return None
    language, _probability = _identifier().classify(prose)
    return str(language)


def foreign_language(text: str) -> str | None:
    """The ISO 639-1 code of the language other than English that the sentence ``text`` is surely written in, or None
    (English, too little prose, or not sure).

    With a letter outside ASCII, ``language_of`` decides. An ASCII sentence is written alike in English, code, names
    and many languages ("usa fetch, nunca axios por favor"), and short ones split the identifier's belief between
    neighbours (Spanish, Galician, Asturian); it is foreign only when it holds at least ``FOREIGN_MIN_WORDS`` words,
    English has a probability below ``ENGLISH_DOUBT`` and one language at least ``FOREIGN_LANGUAGE_SHARE`` ("zxx",
    no language, never counts). Measured on the ASCII clauses users typed in ``benchmarks/real_rules.py``'s corpora:
    none of the English projects' clauses is foreign, 25 of the French, Catalan, Czech and Spanish ones are."""
    if not text.isascii():
        language = language_of(text)
        return language if language not in (None, "en") else None
    prose = prose_of(text)
    if len(prose.split()) < FOREIGN_MIN_WORDS or sum(1 for char in prose if char.isalpha()) < LANGUAGE_MIN_CHARS:
        return None
    ranks = dict(_identifier().rank(prose))
    language, share = max(ranks.items(), key=lambda item: item[1])
    if ranks.get("en", 0.0) >= ENGLISH_DOUBT or share < FOREIGN_LANGUAGE_SHARE or language == "zxx":
        return None
    return str(language)


def evaluate_check(check: Check, response: str, tools_called: list[str] | None) -> bool:
    """Decide one check on ``response``; raise ``UnverifiableCheck`` (the message says why) when it cannot be decided.

    Case-insensitive unless ``check.case_sensitive``. ``tools_called``: names of the tools that really ran (from
    the backend), or None when the backend cannot run tools (``tool_called`` is then unverifiable).
    ``starts_with``/``ends_with``/``max_chars`` look at the response with surrounding whitespace stripped;
    ``max_words`` counts whitespace-separated words; ``section_present`` wants a Markdown heading (any level, outside
    code blocks) whose text equals the value, ignoring case, ``#``s, emphasis and a trailing colon; ``json_valid`` is
    described in ``_json_valid``; ``language`` wants the response's prose in that language (``language_of``;
    unverifiable for a response with too little prose).
    """
    op = check.op
    sensitive = check.case_sensitive
    if op in ("contains", "not_contains"):
        found = _fold(_text_value(check), sensitive) in _fold(response, sensitive)
        return found if op == "contains" else not found
    if op == "starts_with":
        return _fold(response.strip(), sensitive).startswith(_fold(_text_value(check).strip(), sensitive))
    if op == "ends_with":
        return _fold(response.strip(), sensitive).endswith(_fold(_text_value(check).strip(), sensitive))
    if op == "regex":
        pattern = _text_value(check)
        try:
            compiled = re.compile(pattern, 0 if sensitive else re.IGNORECASE)
        except re.error as exc:
            raise UnverifiableCheck(f"regex {pattern!r} does not compile ({exc})") from None
        return compiled.search(response) is not None
    if op == "max_chars":
        return len(response.strip()) <= _int_value(check)
    if op == "max_words":
        return len(response.split()) <= _int_value(check)
    if op == "section_present":
        wanted = _normalize_heading(_text_value(check), sensitive)
        return any(_normalize_heading(heading, sensitive) == wanted for heading in _headings(response))
    if op == "json_valid":
        return _json_valid(response)
    if op == "tool_called":
        name = _text_value(check).strip()
        if tools_called is None:
            raise UnverifiableCheck(f"tool_called {name!r} unverifiable: the backend cannot run tools")
        return any(_fold(tool, sensitive) == _fold(name, sensitive) for tool in tools_called)
    if op == "language":
        wanted = _text_value(check).strip().lower()
        found = language_of(response)
        if found is None:
            raise UnverifiableCheck(f"language {wanted!r} unverifiable: too little prose to tell the language")
        return found == wanted
    raise UnverifiableCheck(f"unknown check op {op!r}")


def check_passes(check: Check, response: str, tools_called: list[str] | None) -> bool | None:
    """Return True/False for one check on ``response`` (``evaluate_check``), or None when it cannot be verified
    (a regex that does not compile, a value of the wrong type, ``tool_called`` without tools, too little prose)."""
    try:
        return evaluate_check(check, response, tools_called)
    except UnverifiableCheck:
        return None


def describe_check(check: Check) -> str:
    """Short label of a check for reasons: ``not_contains 'npm install'``, ``json_valid``."""
    if check.value is None:
        return check.op
    value = check.value
    if isinstance(value, str) and len(value) > 60:
        value = value[:57] + "..."
    return f"{check.op} {value!r}"


# --------------------------------------------------------------------------- identity and literals


def word_regex(literal: str) -> str:
    """A regex for ``literal`` as a whole word: not inside a longer word (``npm`` is not in ``pnpm``); an end that is
    not a word character (``Path(``) needs no boundary. A literal with a hyphen (a flag, a package: ``--force``,
    ``left-pad``) is a word of hyphens too: ``--force`` is not in ``--force-with-lease``."""
    word = r"[\w-]" if "-" in literal else r"\w"
    head = rf"(?<!{word})" if re.match(r"\w", literal) else ""
    tail = rf"(?!{word})" if re.search(r"\w$", literal) else ""
    return head + re.escape(literal) + tail


def negative_word_regex(literal: str) -> str:
    """A regex that matches a text in which ``literal`` never occurs as a whole word (``word_regex``)."""
    return r"\A(?![\s\S]*" + word_regex(literal) + ")"


def check_of_key(key: tuple[str, str], *, origin: str = "rule", rule: str | None = None) -> Check | None:
    """A check that demands ``key`` (``check_key(check_of_key(key)) == key``): ``has`` -> ``contains``, ``not`` -> a
    whole-word negative regex (``negative_word_regex``), ``language``/``regex``/... -> that op, an int op's value
    as an int; None for a rule's ``text`` key or an op this module does not know. For a rule whose checks are known
    only by their keys (an archived rule, whose keys a gloss gave)."""
    kind, value = key
    if kind == "has":
        return Check(op="contains", value=value, origin=origin, rule=rule)
    if kind == "not":
        return Check(op="regex", value=negative_word_regex(value), origin=origin, rule=rule)
    if kind not in get_args(CheckOp):
        return None
    check = Check(op=kind, value=int(value) if kind in INT_OPS and value.isdigit() else (
        None if kind == "json_valid" else value), origin=origin, rule=rule)  # type: ignore[arg-type]
    return check if validate_check(check) is None and check_key(check) == key else None


def any_word_regex(literals: Sequence[str]) -> str:
    r"""A regex that a text using any of ``literals`` as a whole word matches (``word_regex`` of each, in order):
    "use const or let" is ``(?<!\w)const(?!\w)|(?<!\w)let(?!\w)``. literals: two or more."""
    return "|".join(word_regex(literal) for literal in literals)


def any_words_of_regex(pattern: str) -> list[str] | None:
    r"""The literals an ``any_word_regex`` was made from (``(?<!\w)const(?!\w)|(?<!\w)let(?!\w)`` -> ``["const",
    "let"]``), or None for any other pattern (one literal, a negative regex, a format)."""
    parts = [re.sub(r"\(\?<!(?:\\w|\[\\w-\])\)|\(\?!(?:\\w|\[\\w-\])\)", "", part) for part in pattern.split("|")]
    literals = [re.sub(r"\\(.)", r"\1", part) for part in parts]
    if len(literals) < 2 or any(not literal for literal in literals):
        return None
    return literals if any_word_regex(literals) == pattern else None


_NEGATIVE = re.compile(r"^\\A\(\?!\[\\s\\S\]\*(?:\(\?<!(?:\\w|\[\\w-\])\))?(?P<body>.+?)"
                       r"(?:\(\?!(?:\\w|\[\\w-\])\))?\)$")


def check_key(check: Check) -> tuple[str, str]:
    """What a check demands, independent of how it is written: ``("has", literal)`` for ``contains``, ``("not",
    literal)`` for ``not_contains`` and a whole-word negative regex, else ``(op, value)``; literals case-folded.
    Two checks with one key are one check; a rule is identified by the keys of its validated checks."""
    value = check.value
    if check.op == "contains" and isinstance(value, str):
        return "has", value.casefold()
    if check.op == "not_contains" and isinstance(value, str):
        return "not", value.casefold()
    if check.op == "regex" and isinstance(value, str):
        negative = _NEGATIVE.match(value)
        if negative:
            return "not", re.sub(r"\\(.)", r"\1", negative.group("body")).casefold()
    if check.op == "language" and isinstance(value, str):
        return "language", value.strip().lower()
    return check.op, str(value)
