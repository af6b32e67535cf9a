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

from skillopt_sleep.grammar.clauses import _QUESTION_START, is_question, strip_frame
from skillopt_sleep.grammar.formats import format_rule_hit
from skillopt_sleep.grammar.literals import ARTICLES, PRONOUNS, literal_of

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


_SUBJECT_PREFER = re.compile(
    rf"^(?!(?:i|it|this|that|there|he|she|they|we|you|which|who)\b)(?P<subject>(?:[\w.'/-]+\s+){{1,3}}?)"
    rf"(?:always\s+|only\s+)?uses?\s+(?P<x>[^,]{{1,40}}?)\s*{_CONTRAST}\s+(?P<y>[^,]{{1,40}})$",
    re.IGNORECASE,
)
"""A house rule with its subject first: "Tests use vitest, never jest", "the backend uses httpx, not requests"."""


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


_WITH_TOOL = re.compile(
    r"^\s*(?:and\s+|but\s+|just\s+)?(?:add|install|format|lint|test|run|build|manage|bundle|compile|deploy|package|"
    r"type-?check)(?:\s+(?:it|them|this|that|packages?|deps|dependencies|the code|everything))?\s+(?:with|using|via)\s+"
    r"(?P<x>[\w.@/+-]+)\s*$", re.IGNORECASE)
"""A tool named by what it does, beside a rule ("never pip, add it with uv"; "no black, format with ruff"): a use."""


_FORBID = re.compile(r"^(?:(?:we|you)\s+)?(?:never|don't|dont|do not|avoid|stop)\s+(?P<y>.+)$", re.IGNORECASE)


#: A negated use inside a constraint: "ensure the code does not use jQuery", "the client must not import requests".
_NEGATED_USE = re.compile(
    r"^(?:(?:ensure|make sure|check|verify)\s+(?:that\s+)?)?(?:[\w.'/-]+\s+){0,4}?(?:does not|doesn't|do not|"
    r"don't|must not|mustn't|should not|shouldn't|shall not|may not|never|will not|won't)\s+(?:ever\s+)?"
    r"(?:use|import|call|include|contain|depend on|require)s?\s+(?P<y>.+)$",
    re.IGNORECASE,
)


_FORBID_NEUTRAL = re.compile(
    r"^(?:never|don't|dont|do not|stop)\s+(?:mind|forget|worry|bother|know|think|understand|see|care|get|need|"
    r"want|like|seem|be sorry|apologi[sz]e|hesitate|wait|have|remember|believe|recall|feel)\b",
    re.IGNORECASE,
)


_NO_THING = re.compile(r"^no\s+(?P<y>[^,;]+)$", re.IGNORECASE)


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
    rf"^(?:we|i)\s+(?:always\s+|only\s+)?(?!\w+ed\b)\w+(?:\s+(?:and|or)\s+\w+)?(?:\s+(?!with\b|using\b|via\b)\w+){{0,2}}\s+"
    rf"(?:with|using|via|through|in)\s+(?P<x>[^,]{{1,30}}?)\s*{_CONTRAST}\s+(?P<y>.+)$",
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
    match = _SUBJECT_PREFER.match(text)
    if match and len(match.group("x").split()) <= 4:
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
    if match:  # what to use instead follows after a comma, or as the next sentence ("never X. Use Y.")
        forbidden, after = (re.split(r",|(?<=[^\s.])[.;]\s+", match.group("y"), maxsplit=1) + [""])[:2]
        positive = (re.match(rf"^\s*(?:but\s+|and\s+)?(?:always\s+)?{USE_VERBS}\s+(?P<x>.+)$", after, re.IGNORECASE)
                    or _WITH_TOOL.match(after))
        if positive:  # "never use print, use logging"; "don't use pip, add it with uv"
            return ParsedRule("prefer", preferred=positive.group("x"), forbidden=forbidden)
        return ParsedRule("forbid", forbidden=forbidden)
    match = _FORBID.match(text)
    if match:
        return ParsedRule("forbid", rest=match.group("y"))
    match = _NEGATED_USE.match(text)
    if match:
        return ParsedRule("forbid", forbidden=match.group("y"))
    match = _NO_THING.match(text)
    if match and not _NO_NEUTRAL.match(text) and not _REPORT.match(text):
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


def parse_part(part: str, *, beside: bool = False) -> ParsedRule | None:
    """``parse_rule``, a bare "not X", a tool named by what it does ("add it with uv") and, ``beside`` another part
    of its clause, a bare "never X" of one word: each a rule only beside another part ("ruff format, not black"; "no
    pip, add it with uv"; "never npm, install with pnpm"; alone, "never guess" forbids no word)."""
    parsed = parse_rule(part)
    if parsed is None:
        match = _NOT_THING.match(part)
        if match and _side_ok(match.group("y")):
            return ParsedRule("forbid", forbidden=match.group("y"))
        match = _WITH_TOOL.match(part)
        if match and _side_ok(match.group("x")):
            return ParsedRule("use", preferred=match.group("x"))
    elif beside and parsed.form == "forbid" and not parsed.forbidden and len((parsed.rest or "").split()) == 1 \
            and _side_ok(parsed.rest or ""):
        return ParsedRule("forbid", forbidden=parsed.rest)  # "never npm" beside "install with pnpm"
    return parsed


def rule_parts(clause: str) -> list[str]:
    """The comma/colon/dash-separated parts of a clause that parse as rules on their own; a bare "not X" counts only
    beside a part that is a rule by itself ("I meant the staging server, not prod" states no rule)."""
    parts = [part for part in _PART_SPLIT.split(clause) if part]
    whole = [part for part in parts if parse_rule(strip_frame(part)) is not None]
    if not whole:
        return []
    return [part for part in parts if parse_part(strip_frame(part)) is not None]


# --------------------------------------------------------------------------- normative statements
#
# ``parse_rule`` knows the forms a check can be derived from. Real users state house rules in many more ways, inside
# long requests and instruction blocks (issue 22); ``normative`` recognises the grammatical shape of an instruction
# about *how* to work, whatever its subject. It only finds candidates: whether one lasts is ``mine.lasting``'s to
# decide.

_CONSTRAINT_VERBS = (r"use|keep|ensure|make sure|be sure|maintain|preserve|follow|stick (?:to|with)|prefer|respect|"
                     r"remember|stay|avoid|only|always|never|try to keep|try to use|reuse|prioriti[sz]e|favou?r|"
                     r"align (?:with|to)|orient (?:on|to)|base (?:it|them|everything) on|mirror|default to")
"""Verbs that say how to work, not what to build ("keep", "ensure", "follow"; "create", "add", "fix" are tasks)."""
_IMPERATIVE = re.compile(rf"^(?:please\s+|pls\s+|kindly\s+|also\s+|and\s+)?(?:{_CONSTRAINT_VERBS})\b", re.IGNORECASE)
_VERBS = (r"add|apply|ask|build|check|comment|commit|create|document|explain|format|generate|give|handle|implement|"
          r"include|label|list|log|make|mark|move|name|put|read|record|refactor|remove|rename|report|return|run|save|"
          r"show|sign|store|test|translate|type|update|validate|verify|wrap|write")
_TASK_VERBS = (rf"{_VERBS}|change|clean|confirm|delete|describe|fix|pause|proceed|reference|refresh|remind|replace|"
               r"suggest|summari[sz]e|utili[sz]e|wait")
_PLAIN_IMPERATIVE = re.compile(rf"^(?:please\s+|pls\s+|kindly\s+|also\s+|and\s+|then\s+)?(?:{_TASK_VERBS})"
                               r"\s+(?=[\w\"'`])", re.IGNORECASE)
"""A task verb opening a clause and followed by a word (``print(x)`` is code, not an imperative)."""
_UNIVERSAL_IMPERATIVE = re.compile(rf"^(?:please\s+)?(?:{_VERBS})\b[^.?]{{0,40}}\b(?:every|each|all)\b",
                                   re.IGNORECASE)
_LANGUAGE_ASK = re.compile(r"^(?:please\s+)?(?:respond|answer|reply|talk|speak|write|comment)\w*\b[^.?]{0,30}\b"
                           r"(?:in|using)\s+(?:english|german|french|spanish|portuguese|italian|dutch|polish|"
                           r"russian|chinese|japanese|korean|indonesian|turkish|catalan|czech|danish|swedish)\b",
                           re.IGNORECASE)
_PROHIBITION = re.compile(
    r"^(?:please\s+)?(?:do not|don't|dont|never|avoid|stop|no longer|refrain from|under no circumstances|without)\b"
    r"|^(?:i|we)\s+(?:do not|don't|dont|never)\s+(?:want|need|like|use|allow)\b"
    r"|^(?:you\s+)?(?:must not|mustn't|should not|shouldn't|cannot|can't|may not)\b", re.IGNORECASE)
_MODAL = re.compile(r"^(?!(?:why|what|how|when|where|which|who|can|could|would|will|shall|should|do|does|did|is|are|i|"
                    r"i'm|i've|if|when|while|because|since|although|though)\b)"
                    r"(?:(?!(?:when|if|because|since|so|that|which|who|where|while|unless|until|as|whether)\b)\S+\s+)"
                    r"{1,6}?(?:must|should|shall|needs? to|has to|have to|(?:is|are) supposed to|(?:is|are) required "
                    r"to|ought to|cannot|can't|must not|should not|shouldn't)\b", re.IGNORECASE)
"""A modal as the main verb of a statement, after a subject of a few words that is not "I" and holds no subordinate
clause ("X must ...", "the command needs to be ..."; not "this method is useful when you need to ...")."""
_WANT = re.compile(r"^(?:i|we)\s+(?:only\s+)?(?:want|would like|'d like|prefer|need)\s+(?:to\s+)?(?:use|keep|have|"
                   r"you to (?:always|never|use|keep|follow|stop|only))\b", re.IGNORECASE)
_DECLARE = re.compile(r"^(?:we(?:'re| are)?\s+(?:always\s+|only\s+|completely\s+)?(?:use|using|dropping|moving|"
                      r"switching|standardi[sz]ing|sticking)\b|our\s+\w+(?:\s+\w+)?\s+(?:is|are)\b|"
                      r"(?:the\s+|this\s+|our\s+)?(?:project|repo|repository|codebase|app|firmware|backend|frontend)\s+"
                      r"uses\b|"
                      r"[\w\s]{0,30}\blanguage is\b)", re.IGNORECASE)
_SHOUTING = re.compile(r"\b(?:DO NOT|DON'T|NEVER|ALWAYS|MUST|SHOULD|SHALL|ONLY|STOP|NOT ALLOWED)\b")
_LASTING_LEAD = re.compile(r"^(?:from now on|from here on|going forward|in the future)\b[,:;]?\s*", re.IGNORECASE)
_SCOPE_LEAD = re.compile(
    r"^(?:for|in|on|inside|within|across)\s+(?:[\w/.'-]+\s+){0,4}?[\w/.'-]+(?:,\s*|\s+(?=(?:we|you|i)\s+\w|"
    r"(?:please\s+)?(?:use|keep|always|never|do not|don't|make sure|ensure|avoid|prefer|only)\b))", re.IGNORECASE)
"""What an instruction is about, before it ("For the input components we want to use shadcn-vue", "In tests, never
mock the database"): the instruction is read after it."""
#: The fewest and most words of a normative statement (shorter: a fragment; longer: a paragraph of prose).
NORMATIVE_WORDS = (3, 45)
_REPORT = re.compile(r"^(?:no|not)\s+[\w\s]{0,40}\b(?:encountered|performed|found|modified|needed|required|changed|"
                     r"detected|done|made|given)\b", re.IGNORECASE)


def normative(clause: str) -> bool:
    """``clause`` (frame words stripped) is an instruction about how to work: a prohibition ("Do NOT ...", "without
    changing ..."), a constraint verb in the imperative ("Keep ...", "Ensure ...", "Make sure ...", "Use X as ..."),
    a modal statement ("X must ...", "the command needs to be ..."), a stated preference ("I want to use X"), a
    declaration ("we use ...", "display text language is german"), an imperative over every item ("Explain each
    command ..."), or shouted (``MUST``, ``NEVER``), after a leading "from now on". Questions and reports ("no errors
    encountered") are not."""
    whole = _LASTING_LEAD.sub("", clause.strip())
    text, words = _SCOPE_LEAD.sub("", whole), len(whole.split())
    if (not NORMATIVE_WORDS[0] <= words <= NORMATIVE_WORDS[1] or is_question(text) or _REPORT.match(text)
            or _FORBID_NEUTRAL.match(text)):
        return False
    return bool(_PROHIBITION.match(text) or _IMPERATIVE.match(text) or _MODAL.match(text) or _WANT.match(text)
                or _DECLARE.match(text) or _UNIVERSAL_IMPERATIVE.match(text) or _LANGUAGE_ASK.match(text)
                or _SHOUTING.search(text))


def plain_imperative(clause: str) -> bool:
    """``clause`` is an imperative with a task verb and nothing ``normative`` ("Show the diff after applying",
    "Remind me to run pnpm dev"; "From now on show the diff" is not plain): how tasks are asked, and how some habits
    are. Only coming back in several tasks tells the habit (``mine.lasting.IMPERATIVE_RECURRENCE_TASKS``)."""
    text = clause.strip()
    words = len(text.split())
    if not NORMATIVE_WORDS[0] <= words <= NORMATIVE_WORDS[1] or is_question(text) or _REPORT.match(text):
        return False
    return bool(_PLAIN_IMPERATIVE.match(text)) and not normative(text)
