"""The form of a rule statement: which clause is a rule, and what it prefers, forbids or declares.

``parse_rule(clause)`` (frame words already stripped) returns a ``ParsedRule`` (``form``: ``prefer`` "use X, not Y",
``use`` "use X", ``forbid`` "never Y", ``always``, ``declare`` a modal statement with a universal or a repository
scope, ``keyword`` a format rule) or None when the clause is not a rule: questions, descriptions ("it never works") and
neutral phrases ("don't forget", "never mind", "no problem") are not. ``rule_parts(clause)``: the comma/colon/dash
parts of a clause that parse as rules on their own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from skillopt_sleep.mine.clauses import _QUESTION_START, is_question, strip_frame
from skillopt_sleep.mine.formats import format_rule_hit
from skillopt_sleep.mine.literals import ARTICLES, PRONOUNS, literal_of

#: Longest clause (characters) still read as a rule statement; longer sentences are prose or pasted text.
MAX_RULE_CHARS = 200


@dataclass(frozen=True)
class ParsedRule:
    """One rule statement: its ``form`` and the phrases it names."""

    form: str  # "prefer" (use X not Y), "use" (use X), "forbid" (never Y), "always", "declare", "keyword"
    preferred: str | None = None
    forbidden: str | None = None
    rest: str | None = None


_WORD = r"[^\s,;]+"


USE_VERBS = r"(?:use|using|go with|switch to|stick (?:to|with)|pick|choose|write|call|import)"


_CONTRAST = r"(?:,?\s*(?:and\s+|but\s+)?(?:not|never)|instead of|rather than|over|in place of)"


_PREFER = re.compile(
    rf"^(?:(?:we|i)\s+(?:always\s+|only\s+)?)?(?:always\s+)?{USE_VERBS}\s+(?P<x>.+?)\s*{_CONTRAST}\s+(?P<y>.+)$",
    re.IGNORECASE,
)


_PREFER_VERB = re.compile(
    r"^(?:(?:we|i)\s+)?(?:always\s+)?prefer\s+(?P<x>.+?)(?:\s+(?:over|to|instead of|rather than)\s+(?P<y>.+))?$",
    re.IGNORECASE,
)


_USE_INSTEAD = re.compile(rf"^(?:always\s+)?{USE_VERBS}\s+(?P<x>.+?)\s+instead$", re.IGNORECASE)


_SHORT_CONTRAST = re.compile(r"^(?P<x>[^,]{1,40}?),?\s+(?:not|instead of|rather than|over)\s+(?P<y>[^,]{1,40})$",
                             re.IGNORECASE)


_FORBID_USE = re.compile(
    r"^(?:(?:we|you)\s+)?(?:never|don't|dont|do not|avoid|stop|quit|no more)\s+(?:ever\s+)?"
    r"(?:use|using|import|importing|call|calling|add|adding|write|writing|print|printing|include|including|"
    r"mention|mentioning|run|running|say|saying|type|typing|put|putting)\s+(?P<y>.+)$",
    re.IGNORECASE,
)


_FORBID = re.compile(r"^(?:(?:we|you)\s+)?(?:never|don't|dont|do not|avoid|stop)\s+(?P<y>.+)$", re.IGNORECASE)


_FORBID_NEUTRAL = re.compile(
    r"^(?:never|don't|dont|do not|stop)\s+(?:mind|forget|worry|bother|know|think|understand|see|care|get|need|"
    r"want|like|seem|be sorry|apologi[sz]e|hesitate|wait|have|remember|believe|recall|feel)\b",
    re.IGNORECASE,
)


_NO_THING = re.compile(r"^no\s+(?P<y>.+)$", re.IGNORECASE)


_NO_NEUTRAL = re.compile(
    r"^no\s+(?:problem|worries|need|idea|way|thanks|thank|luck|clue|change|changes|difference|longer|more|one|"
    r"rush|matter|doubt|wonder|big deal|kidding|offense|pressure|hurry|i|it|it's|that|this|you|we)\b",
    re.IGNORECASE,
)


_AUX_VERB = re.compile(r"\b(?:is|are|was|were|has|have|had|did|does|do|will|can|got|gets|seems?)\b", re.IGNORECASE)


_ALWAYS = re.compile(r"^(?:(?:we|you)\s+)?always\s+(?P<rest>.+)$", re.IGNORECASE)


_WE_USE = re.compile(r"^we\s+(?:always\s+|only\s+|usually\s+)?use\s+(?P<x>.+)$", re.IGNORECASE)


_BARE_USE = re.compile(
    r"^use\s+(?P<x>.+?)(?:\s+(?:for\s+.{1,40}|in (?:this|our|the) \w+|here|everywhere|from now on|going forward|"
    r"always|only|by default))?$",
    re.IGNORECASE,
)


_SHOP = re.compile(
    r"^(?:we're|we are|we're all|this is|it's|here we're|our team is|our shop is)\s+(?:an?\s+|all\s+)?"
    r"(?P<x>[^,]{1,30}?)\s+(?:shop|house|team|project|repo|repository|codebase|code base|company|org|"
    r"organization|people|folks|users)\b",
    re.IGNORECASE,
)


_MOVED = re.compile(
    r"^(?:we(?:'ve| have)?\s+)?(?:moved|switched|migrated|changed|went)\s+(?:over\s+)?from\s+(?P<y>[^,]{1,30}?)"
    r"\s+to\s+(?P<x>[^,]{1,30}?)(?:\s+(?:now|recently|last \w+|this \w+))?$",
    re.IGNORECASE,
)


_WE_VERB_WITH = re.compile(
    rf"^(?:we|i)\s+(?:always\s+|only\s+)?\w+\s+(?:with|using|via|through|in)\s+(?P<x>[^,]{{1,30}}?)\s*{_CONTRAST}\s+"
    r"(?P<y>.+)$",
    re.IGNORECASE,
)


_SWITCHED_TO = re.compile(
    r"^(?:we(?:'ve| have)?\s+)?(?:switched|moved|migrated|changed|went over)\s+(?:over\s+)?to\s+"
    r"(?P<x>[^,]{1,30}?)(?:\s+(?:now|recently|last \w+|this \w+))?$",
    re.IGNORECASE,
)


_NOT_THING = re.compile(r"^not\s+(?P<y>[^,]{1,30}?)(?:\s+(?:anymore|any more|here|please))?$", re.IGNORECASE)


_TERSE = re.compile(r"^(?P<x>[^,]{1,30}?)\s*,?\s+(?:only|please|pls|here|from now on|always)$", re.IGNORECASE)


_MODAL_RULE = re.compile(r"\b(?:must|should|has to|have to|needs? to)\b", re.IGNORECASE)


_UNIVERSAL = re.compile(r"\b(?:always|never|all|every|each|any)\b", re.IGNORECASE)


_REPO_SCOPE = re.compile(r"\b(?:in|for|across) (?:this|our|the) (?:repo|repository|project|codebase|code base|team)\b",
                         re.IGNORECASE)


_POLICY_WORD = re.compile(r"\b(?:we|always|never|use|prefer|don't|do not|must|should)\b", re.IGNORECASE)


_FIRST_PERSON_START = re.compile(r"^(?:i|i'm|i've|i'd|it|it's|this|that|that's|there|there's|here|here's)\b",
                                 re.IGNORECASE)


def _side_ok(phrase: str) -> bool:
    """Both sides of a bare "X, not Y" must be short names, not a sentence ("it's not working")."""
    tokens = phrase.strip().split()
    if not 1 <= len(tokens) <= 3:
        return False
    first = tokens[0].lower()
    return (first not in PRONOUNS and not ARTICLES.match(phrase.strip()) and not _AUX_VERB.search(phrase)
            and not _QUESTION_START.match(phrase.strip()) and first not in _NOT_A_SIDE)


_NOT_A_SIDE = frozenset(
    "but and or so just still also maybe then now yet why what working done sure really quite right correct "
    "good bad needed necessary true false enough always only exactly even well please thanks".split()
)


# Cached: mining parses the same clause several times per message (``extract_rules``, ``states_only_rules``,
# ``classify_reaction``, ``rule_parts``, ``checks_for_rule``) and the same short replies ("continue", "use pnpm") recur
# across sessions; the function is pure and ``ParsedRule`` is frozen.
@lru_cache(maxsize=8192)
def parse_rule(clause: str) -> ParsedRule | None:
    """Return the rule form of one clause (frame words already stripped), or None when it is not a rule."""
    text = clause.strip()
    if not text or len(text) > MAX_RULE_CHARS or is_question(text):
        return None
    if _FORBID_NEUTRAL.match(text):
        return None
    for pattern in (_PREFER,):
        match = pattern.match(text)
        if match and len(match.group("x").split()) <= 6:
            return ParsedRule("prefer", preferred=match.group("x"), forbidden=match.group("y"))
    match = _PREFER_VERB.match(text)
    if match:  # softer than "use X, not Y": only the preferred literal is checked
        return ParsedRule("use", preferred=match.group("x"))
    match = _USE_INSTEAD.match(text)
    if match:
        return ParsedRule("use", preferred=match.group("x"))
    match = _MOVED.match(text)
    if match:  # "we moved from yarn to pnpm": a new rule that replaces the old one
        return ParsedRule("prefer", preferred=match.group("x"), forbidden=match.group("y"))
    match = _SWITCHED_TO.match(text)
    if match:  # "we switched to ruff format"
        return ParsedRule("use", preferred=match.group("x"))
    match = _WE_VERB_WITH.match(text)
    if match and len(match.group("x").split()) <= 4:  # "we format with black, not autopep8"
        return ParsedRule("prefer", preferred=match.group("x"), forbidden=match.group("y"))

    match = _SHOP.match(text)
    if match and _side_ok(match.group("x")):  # "we're a pnpm shop"
        return ParsedRule("use", preferred=match.group("x"))
    match = _FORBID_USE.match(text)
    if match:
        forbidden, _, after = match.group("y").partition(",")
        positive = re.match(rf"^\s*(?:but\s+|and\s+)?(?:always\s+)?{USE_VERBS}\s+(?P<x>.+)$", after, re.IGNORECASE)
        if positive:  # "never use print, use logging"
            return ParsedRule("prefer", preferred=positive.group("x"), forbidden=forbidden)
        return ParsedRule("forbid", forbidden=forbidden)
    match = _FORBID.match(text)
    if match:
        return ParsedRule("forbid", rest=match.group("y"))
    match = _NO_THING.match(text)
    if match and not _NO_NEUTRAL.match(text):
        thing = match.group("y")
        if len(thing.split()) <= 6 and not _AUX_VERB.search(thing):
            return ParsedRule("forbid", forbidden=thing)
        return None
    match = _ALWAYS.match(text)
    if match:
        return ParsedRule("always", rest=match.group("rest"))
    match = _WE_USE.match(text)
    if match:
        return ParsedRule("use", preferred=match.group("x"))
    match = _BARE_USE.match(text)
    if match and len(match.group("x").split()) <= 4 and not re.search(r"\b(?:to|and|so|then|the output|it)\b",
                                                                      match.group("x"), re.IGNORECASE):
        return ParsedRule("use", preferred=match.group("x"))
    match = _SHORT_CONTRAST.match(text)
    if match and _side_ok(match.group("x")) and _side_ok(match.group("y")):
        return ParsedRule("prefer", preferred=match.group("x"), forbidden=match.group("y"))
    match = _TERSE.match(text)
    if match and _side_ok(match.group("x")) and literal_of(match.group("x")):  # "pnpm only", "ISO dates please"
        return ParsedRule("use", preferred=match.group("x"))
    if _FIRST_PERSON_START.match(text):
        return None
    if _MODAL_RULE.search(text) and _UNIVERSAL.search(text):
        return ParsedRule("declare", rest=text)
    if _REPO_SCOPE.search(text) and _POLICY_WORD.search(text):
        return ParsedRule("declare", rest=text)
    if format_rule_hit(text):
        return ParsedRule("keyword", rest=text)
    return None


_PART_SPLIT = re.compile(r"\s*(?:,|:|\s-\s|\s\u2014\s)\s*")


def parse_part(part: str) -> ParsedRule | None:
    """``parse_rule``, and a bare "not X" (which is a rule only beside another part: "ruff format, not black")."""
    parsed = parse_rule(part)
    if parsed is None:
        match = _NOT_THING.match(part)
        if match and _side_ok(match.group("y")):
            return ParsedRule("forbid", forbidden=match.group("y"))
    return parsed


def rule_parts(clause: str) -> list[str]:
    """The comma/colon/dash-separated parts of a clause that parse as rules on their own; a bare "not X" counts only
    beside a part that is a rule by itself ("I meant the staging server, not prod" states no rule)."""
    parts = [part for part in _PART_SPLIT.split(clause) if part]
    whole = [part for part in parts if parse_rule(strip_frame(part)) is not None]
    if not whole:
        return []
    return [part for part in parts if parse_part(strip_frame(part)) is not None]
