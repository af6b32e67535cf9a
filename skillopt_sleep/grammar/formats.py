"""Format rules: a rule about the shape of an answer, which a check can test whatever its phrasing.

Conventional Commits, ISO dates (``YYYY-MM-DD``: checked on the dates an answer writes or the code that prints one,
``%Y-%m-%d`` or ``.isoformat()``, with no M/D/Y date, nor a month-name date when the rule says so), a word or
character limit, a named section, JSON output, and the language answers are written in ("always respond in German":
a ``language`` check, decided by a language identifier, never a word of the rule, which a correct answer in that
language would not hold): ``format_rule_hit(clause)`` says whether a clause states one, ``format_checks(text, rule,
origin)`` gives its checks.
"""

from __future__ import annotations

import re

from skillopt_sleep.grammar.literals import GENERIC_WORDS
from skillopt_sleep.models import Check

CONVENTIONAL_COMMIT_REGEX = (
    r"(?m)^(feat|fix|docs|style|refactor|perf|test|build|ci|chore|revert)(\([^)\n]+\))?!?: \S"
)


#: An M/D/Y date (``11/03/2026``, ``3/5/27``): never ISO.
US_DATE = r"\b\d\d?/\d\d?/\d{2,4}\b"
#: A date with its month named (``November 3, 2026``, ``Nov 3rd, 2026``).
MONTH_NAME_DATE = r"\b(?:jan|feb|ma[ry]|apr|ju[nl]|aug|sep|oct|nov|dec)\S* \d\d?[a-z]*,? \d{4}"
#: What writes an ISO date: the date itself, or the code that prints one (``%Y-%m-%d``, ``isoformat()``,
#: ``toISOString()``); not the placeholder ``YYYY-MM-DD``, which an answer that echoes the rule writes instead of a
#: date. The match is the group ``example`` (``mine.compile``'s example).
_ISO_WRITTEN = r"(?P<example>\b\d{4}-\d\d-\d\d\b|(?-i:%Y-%m-%d)|isoformat|toISOString)"
#: An ISO-date rule's check: the answer writes an ISO date or the format string that prints one, and no M/D/Y date.
ISO_DATE_REGEX = rf"(?s)^(?!.*{US_DATE}).*?{_ISO_WRITTEN}"
#: ``ISO_DATE_REGEX`` for a rule that also names month names ("never month names", "not November 3, 2026"): no date
#: with its month named either.
ISO_DATE_NO_MONTHS_REGEX = rf"(?s)^(?!.*(?:{US_DATE}|{MONTH_NAME_DATE})).*?{_ISO_WRITTEN}"


#: Language names (in English and in the language itself) and their ISO 639-1 codes, for "respond in <language>".
LANGUAGES = {
    "english": "en", "german": "de", "deutsch": "de", "french": "fr", "français": "fr", "francais": "fr",
    "spanish": "es", "español": "es", "espanol": "es", "castellano": "es", "portuguese": "pt", "português": "pt",
    "portugues": "pt", "italian": "it", "italiano": "it", "dutch": "nl", "nederlands": "nl", "polish": "pl",
    "polski": "pl", "russian": "ru", "русском": "ru", "русский": "ru", "ukrainian": "uk", "czech": "cs",
    "čeština": "cs", "cesky": "cs", "danish": "da", "dansk": "da", "swedish": "sv", "svenska": "sv",
    "norwegian": "no", "norsk": "no", "finnish": "fi", "suomi": "fi", "turkish": "tr", "türkçe": "tr",
    "chinese": "zh", "中文": "zh", "japanese": "ja", "日本語": "ja", "korean": "ko", "한국어": "ko", "arabic": "ar",
    "hebrew": "he", "hindi": "hi", "indonesian": "id", "bahasa indonesia": "id", "vietnamese": "vi", "thai": "th",
    "catalan": "ca", "català": "ca", "greek": "el", "romanian": "ro", "hungarian": "hu", "magyar": "hu",
}
_LANGUAGE_NAMES = "|".join(sorted((re.escape(name) for name in LANGUAGES), key=len, reverse=True))
_ANSWER_LANGUAGE = re.compile(
    rf"\b(?:respond|answer|reply|write|speak|talk|comment|explain|text|output|communicate)\w*\b[^.;]{{0,40}}?"
    rf"\b(?:in|using)\s+(?P<a>{_LANGUAGE_NAMES})\b"
    rf"|\b(?P<b>{_LANGUAGE_NAMES})\s+(?:only|please|as the default language)\b"
    rf"|\blanguage\s+(?:is|should be|must be)\s+(?P<c>{_LANGUAGE_NAMES})\b"
    rf"|\buse\s+(?P<d>{_LANGUAGE_NAMES})\s+as\s+the\s+(?:default\s+)?language\b", re.IGNORECASE)


def answer_language(text: str) -> str | None:
    """The ISO 639-1 code of the language ``text`` says answers are written in ("respond in German" -> ``de``)."""
    match = _ANSWER_LANGUAGE.search(text or "")
    if match is None:
        return None
    name = next(group for group in match.groups() if group)
    return LANGUAGES.get(name.casefold())


# Keyword detectors: a rule about a format the response can be checked for, whatever its phrasing.
_CONVENTIONAL = re.compile(r"\bconventional[- ]commits?\b", re.IGNORECASE)


_ISO_DATE = re.compile(r"\byyyy-mm-dd\b|\biso[- ]?8601\b|\biso\b.*\bdates?\b|\bdates?\b.*\biso\b", re.IGNORECASE)


#: A rule that names month names as a form of date it rules out ("never MM/DD/YYYY or month names").
_MONTH_NAMES = re.compile(rf"\bmonth names?\b|\bspelled[- ]out\b|{MONTH_NAME_DATE}", re.IGNORECASE)


_LENGTH_LIMIT = re.compile(
    r"\b(?:under|below|less than|fewer than|at most|no more than|not more than|max(?:imum)?(?: of)?|within|"
    r"up to|<=?)\s*(?P<n>\d{1,6})\s*(?P<unit>words?|characters?|chars?)\b",
    re.IGNORECASE,
)


_LENGTH_CONTEXT = re.compile(
    r"^(?:keep|limit|make|write|answer|reply|respond|stay|be|use|cap)\b|\b(?:should|must|keep|limit|max|at most|"
    r"no more than)\b|^(?:(?:all|your|the|my)\s+)?(?:answers?|responses?|replies|reply|summaries|summary|"
    r"messages?|descriptions?|explanations?|comments?|commit messages?|titles?|output)\b",
    re.IGNORECASE,
)


_SECTION_HASHED = re.compile(r"#{2,6}\s*(?P<name>[\w][\w &/-]{0,40}?)(?=\s+(?:section|heading|header)\b|[\"'`.,;:]|$)",
                             re.IGNORECASE)


_SECTION_NAMED = re.compile(
    r"\b(?:section|heading|header)\s+(?:called|named|titled)\s+[\"'`]?(?:#+\s*)?(?P<name>[\w][\w &/-]{0,40}?)"
    r"[\"'`]?(?=[.,;:]|$|\s+(?:at|in|to|for|with)\b)",
    re.IGNORECASE,
)


_SECTION_BEFORE = re.compile(
    r"\b(?:a|an)\s+[\"'`]?(?P<name>[A-Z][\w&/-]*(?:\s+[A-Z][\w&/-]*){0,3})[\"'`]?\s+(?:section|heading|header)\b"
)


_SECTION_VERB = re.compile(r"\b(?:include|add|have|with|end with|start with|contain|put|keep|need)\b", re.IGNORECASE)


_JSON_OUTPUT = re.compile(
    r"\b(?:answer|reply|respond|output|return|format|print|emit|give)\w*\s+(?:\w+\s+){0,3}?(?:in|with|as)\s+"
    r"(?:valid\s+|pure\s+|plain\s+|raw\s+)?json\b|\bjson\s+only\b|\bonly\s+(?:valid\s+)?json\b",
    re.IGNORECASE,
)


def format_rule_hit(clause: str) -> bool:
    """``clause`` states a format rule (module docstring)."""
    return bool(_CONVENTIONAL.search(clause) or _ISO_DATE.search(clause) or section_name(clause)
                or _JSON_OUTPUT.search(clause) or answer_language(clause)
                or (_LENGTH_LIMIT.search(clause) and _LENGTH_CONTEXT.search(clause)))


_MODAL_WORD = re.compile(r"\b(?:always|must|should)\b", re.IGNORECASE)  # compiled once: asked of every clause


def section_name(clause: str) -> str | None:
    if not (_SECTION_VERB.search(clause) or _MODAL_WORD.search(clause)):
        return None
    for pattern in (_SECTION_HASHED, _SECTION_NAMED, _SECTION_BEFORE):
        match = pattern.search(clause)
        if match:
            name = match.group("name").strip(" \"'`")
            if name and name.lower() not in GENERIC_WORDS:
                return name
    return None


def format_checks(text: str, rule: str, origin: str) -> list[Check]:
    checks: list[Check] = []
    if _CONVENTIONAL.search(text):
        checks.append(Check(op="regex", value=CONVENTIONAL_COMMIT_REGEX, origin=origin, rule=rule))
    if _ISO_DATE.search(text):
        value = ISO_DATE_NO_MONTHS_REGEX if _MONTH_NAMES.search(text) else ISO_DATE_REGEX
        checks.append(Check(op="regex", value=value, origin=origin, rule=rule))
    limit = _LENGTH_LIMIT.search(text)
    if limit and _LENGTH_CONTEXT.search(text):
        op = "max_words" if limit.group("unit").lower().startswith("word") else "max_chars"
        checks.append(Check(op=op, value=int(limit.group("n")), origin=origin, rule=rule))
    section = section_name(text)
    if section:
        checks.append(Check(op="section_present", value=section, origin=origin, rule=rule))
    if _JSON_OUTPUT.search(text):
        checks.append(Check(op="json_valid", value=None, origin=origin, rule=rule))
    language = answer_language(text)
    if language is not None:
        checks.append(Check(op="language", value=language, origin=origin, rule=rule))
    return checks
