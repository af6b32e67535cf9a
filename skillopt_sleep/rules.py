"""Rules in the user's own words, the deterministic checks they imply, and the user's reaction to a turn.

A *rule* is a standing instruction about how work is done ("use pnpm, not npm", "dates are ISO, YYYY-MM-DD",
"never commit to main", "keep answers under 120 words"). Rules come from corrections and from house rules
stated inside a request; they are the strongest signal a session holds. This module only reads text:

* ``extract_rules(text)``: the rule statements of one message, each a clause in the user's words (a leading
  "No," / "Please" / "I said" is dropped, nothing else is rewritten). Questions, descriptions ("it never
  works"), and neutral phrases ("don't forget", "never mind", "no problem") are not rules.
* ``checks_for_rule(rule)``: deterministic checks a response can be scored with. Values stay short and
  literal; a rule whose subject is not a literal ("use tabs, not spaces", "never commit to main") yields no
  check and is judged by the rubric instead (mine.py puts it there).
  A forbidden word that is part of the preferred one ("pnpm" contains "npm"), or a very short word
  ("var"), becomes a whole-word negative regex (``negative_word_regex``) instead of ``not_contains`` so that
  "pnpm install" does not fail the check.
* ``classify_reaction(next_message, previous_request)``: approval | correction | reask | none, from the lexical
  cues of FORMATS.md §1.8 / §2.10 ("actually", "continue", "don't forget" are neutral).
* ``llm_miner_schema()`` / ``make_llm_miner(meter)`` / ``validate_check(check)``: the optional LLM miner
  (role ``miner``, one structured call per kept task) and the validation its checks go through.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, get_args

from skillopt_sleep.backends.base import ChatMessage, ChatRequest
from skillopt_sleep.backends.jsonextract import extract_json
from skillopt_sleep.engine.prompts import quote_data, render_prompt
from skillopt_sleep.models import Check, CheckOp, Reaction, TaskRecord

#: Longest clause (characters) still read as a rule statement; longer sentences are prose or pasted text.
MAX_RULE_CHARS = 200
#: Most rules taken from one message.
MAX_RULES_PER_MESSAGE = 8
#: Longest literal value (characters) of a derived ``contains``/``not_contains`` check.
MAX_LITERAL_CHARS = 40
#: Longest text value (characters) a check may carry at all (``validate_check``).
MAX_CHECK_VALUE_CHARS = 200
#: Longest message (words) in which a correction cue anywhere ("still", "instead", "broken") counts.
MAX_SHORT_REACTION_WORDS = 25
#: Jaccard similarity of token sets from which a message re-asks the previous request.
REASK_SIMILARITY = 0.7

CONVENTIONAL_COMMIT_REGEX = (
    r"(?m)^(feat|fix|docs|style|refactor|perf|test|build|ci|chore|revert)(\([^)\n]+\))?!?: \S"
)
ISO_DATE_REGEX = r"\b\d{4}-\d{2}-\d{2}\b"

TEXT_OPS = frozenset({"contains", "not_contains", "regex", "starts_with", "ends_with", "section_present",
                      "tool_called"})
INT_OPS = frozenset({"max_chars", "max_words"})
CHECK_OPS: tuple[str, ...] = get_args(CheckOp)

# --------------------------------------------------------------------------- clause splitting

_FENCED_CODE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
_INDENTED_CODE = re.compile(r"^(?: {4}|\t).*$", re.MULTILINE)
_BULLET = re.compile(r"^(?:[-*+•>]|\d+[.)])\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+")


def _clean_quotes(text: str) -> str:
    return text.replace("\u2019", "'").replace("\u2018", "'").replace("\u201c", '"').replace("\u201d", '"')


def split_clauses(text: str) -> list[str]:
    """Split a message into sentence-like clauses (lines, then ``. ! ? ;``), without code blocks or bullets."""
    text = _clean_quotes(text or "")
    text = _FENCED_CODE.sub("\n", text)
    text = _INDENTED_CODE.sub("", text)
    clauses: list[str] = []
    for line in text.splitlines():
        line = _BULLET.sub("", line.strip()).strip()
        for part in _SENTENCE_END.split(line):
            part = part.strip()
            if part:
                clauses.append(part)
    return clauses


# Discourse markers that only frame a rule: "No, use pnpm" / "Please use pnpm" / "I said use pnpm" / "Wrong format,".
_FRAME_PUNCTUATED = (
    r"(?:no|nope|nah|wrong(?:\s+\w+){0,2}|not like that|not quite|that's wrong|that is wrong|ok|okay|hmm|actually|"
    r"again|also|remember|reminder|note|fyi|so|sorry)"
)
_FRAME_FREE = (
    r"(?:please|pls|also|and|but|so|just|remember(?: to| that)?|note that|fyi|again|i said(?: to)?|as i said|"
    r"like i said|i told you(?: to)?|i already told you(?: to)?|once again|from now on|going forward|in general|"
    r"in the future|for the future|make sure (?:to|that|you)|be sure to|you should|you must|you need to|"
    r"you have to|always remember to)"
)
_FRAME = re.compile(rf"^(?:(?:{_FRAME_PUNCTUATED}\s*[,.:;!-]+|{_FRAME_FREE}\b[\s,:;-]*)\s*)+", re.IGNORECASE)


_LABEL = re.compile(r"^[\w' -]{1,24}:\s+(?=\S)")


_POLITE = re.compile(r"^(?:could|can|would|will)\s+you\s+(?:please\s+|kindly\s+|just\s+)?(?=\w)", re.IGNORECASE)


def strip_frame(clause: str) -> str:
    """Drop the discourse words that only frame a clause ("No,", "Please", "I said", a short label such as
    "wrong tool:", a polite "Could you please ...?" around an instruction) and end punctuation."""
    stripped = _FRAME.sub("", clause.strip()).strip()
    labelled = _LABEL.match(stripped)
    if labelled and len(stripped[: labelled.end()].split()) <= 3:
        stripped = _FRAME.sub("", stripped[labelled.end():]).strip()
    polite = _POLITE.match(stripped)
    if polite and _CONTRASTIVE_RULE.search(stripped[polite.end():]):
        # "Could you please use httpx instead of requests?" corrects; "Can you use pnpm?" only asks
        stripped = stripped[polite.end():].rstrip(" ?")
    return stripped.rstrip(" .!;")


_QUESTION_START = re.compile(
    r"^(?:why|what|how|when|where|which|who|whom|whose|can|could|would|will|shall|should|do|does|did|is|are|was|"
    r"were|am|have|has|had|may|might|isn't|aren't|doesn't|didn't|won't|wouldn't|shouldn't|couldn't)\b",
    re.IGNORECASE,
)


def _is_question(clause: str) -> bool:
    return clause.rstrip().endswith("?") or bool(_QUESTION_START.match(clause.strip()))


# --------------------------------------------------------------------------- literals

_PRONOUNS = frozenset(
    "it its it's this that that's these those them they one ones something anything everything nothing "
    "i i'm we you he she there here what which who".split()
)
_ARTICLES = re.compile(r"^(?:the|a|an|our|your|my|their)\s+", re.IGNORECASE)
#: Common words that name a style rather than a literal the answer would contain ("use tabs, not spaces").
GENERIC_WORDS = frozenset(
    """tabs tab spaces space comments comment emojis emoji bullets bullet points headings heading headers header
    markdown tables table jargon abbreviations acronyms semicolons semicolon quotes quote prose sentences sentence
    words word lists list code examples example links link numbers caps capitals lowercase uppercase english
    british american spelling short long concise detail details simple plain text language tone voice passive
    active formal informal exclamation paragraphs paragraph names name variables variable functions function
    classes class types type tests test docs documentation docstrings logs files file folders folder directory
    directories lines line single double new old other same different good bad better best small big large
    full complete proper correct right wrong way style format formatting approach method methods version
    versions one two three all any some more less fewer few many much very really""".split()
)
#: Second words that make a tool name a command literal ("npm install").
_COMMAND_WORDS = frozenset("install add run test build exec init start remove uninstall publish format check lint sync "
                           "pip".split())
_TRAILING_QUALIFIER = re.compile(
    r"\s+(?:for|in|on|when|to|with|because|since|as|everywhere|anywhere|here|anymore|ever|again|please|"
    r"from now on|going forward|at all|whenever|if|unless|so|across|throughout|within|inside|by default|"
    r"instead|always|only|too)\b.*$",
    re.IGNORECASE,
)
_QUOTED = re.compile(r"`([^`]{1,80})`|\"([^\"]{1,80})\"|'([^'\s][^']{0,78}[^'\s]|[^'\s])'")
_CODE_CHARS = re.compile(r"[._/\\:()\[\]<>=@#$%&*+~|0-9-]")


def _quoted(text: str) -> str | None:
    match = _QUOTED.search(text)
    if not match:
        return None
    return next(group for group in match.groups() if group is not None).strip() or None


def _is_code_like(token: str) -> bool:
    return bool(_CODE_CHARS.search(token)) or (token[:1].islower() and any(c.isupper() for c in token[1:]))


def _literal(phrase: str) -> str | None:
    """Return the short literal a check can look for in ``phrase``, or None when it names no literal.

    A quoted/backticked part wins. Otherwise articles and trailing qualifiers ("for installs", "in this repo")
    are dropped; what is left must be 1-3 words and look like a name (code-like, capitalized, or not a common
    style word).
    """
    quoted = _quoted(phrase)
    if quoted:
        return quoted if len(quoted) <= MAX_LITERAL_CHARS else None
    text = _TRAILING_QUALIFIER.sub("", phrase.strip()).strip(" ,.;:!")
    text = _ARTICLES.sub("", text).strip()
    if not text or len(text) > MAX_LITERAL_CHARS:
        return None
    tokens = text.split()
    if len(tokens) > 3:
        return None
    first = tokens[0].lower()
    if first in _PRONOUNS or first in GENERIC_WORDS:
        return None
    if len(tokens) == 1:
        return text
    # Several words: a name ("React Query"), a command ("npm install") or code ("os.path join").
    if all(token[:1].isupper() or _is_code_like(token) for token in tokens):
        return text
    if _is_code_like(tokens[0]) or (len(tokens) == 2 and tokens[1].lower() in _COMMAND_WORDS):
        return text
    return None


# --------------------------------------------------------------------------- rule forms


@dataclass(frozen=True)
class _Parsed:
    """One rule statement: its ``form`` and the phrases it names."""

    form: str  # "prefer" (use X not Y), "use" (use X), "forbid" (never Y), "always", "declare", "keyword"
    preferred: str | None = None
    forbidden: str | None = None
    rest: str | None = None


_WORD = r"[^\s,;]+"
_USE_VERBS = r"(?:use|using|go with|switch to|stick (?:to|with)|pick|choose|write|call|import)"
_CONTRAST = r"(?:,?\s*(?:and\s+|but\s+)?(?:not|never)|instead of|rather than|over|in place of)"
_PREFER = re.compile(
    rf"^(?:(?:we|i)\s+(?:always\s+|only\s+)?)?(?:always\s+)?{_USE_VERBS}\s+(?P<x>.+?)\s*{_CONTRAST}\s+(?P<y>.+)$",
    re.IGNORECASE,
)
_PREFER_VERB = re.compile(
    r"^(?:(?:we|i)\s+)?(?:always\s+)?prefer\s+(?P<x>.+?)(?:\s+(?:over|to|instead of|rather than)\s+(?P<y>.+))?$",
    re.IGNORECASE,
)
_USE_INSTEAD = re.compile(rf"^(?:always\s+)?{_USE_VERBS}\s+(?P<x>.+?)\s+instead$", re.IGNORECASE)
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

# Keyword detectors: a rule about a format the response can be checked for, whatever its phrasing.
_CONVENTIONAL = re.compile(r"\bconventional[- ]commits?\b", re.IGNORECASE)
_ISO_DATE = re.compile(r"\byyyy-mm-dd\b|\biso[- ]?8601\b|\biso\b.*\bdates?\b|\bdates?\b.*\biso\b", re.IGNORECASE)
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


def _keyword_hit(clause: str) -> bool:
    return bool(_CONVENTIONAL.search(clause) or _ISO_DATE.search(clause) or _section_name(clause)
                or _JSON_OUTPUT.search(clause)
                or (_LENGTH_LIMIT.search(clause) and _LENGTH_CONTEXT.search(clause)))


_MODAL_WORD = re.compile(r"\b(?:always|must|should)\b", re.IGNORECASE)  # compiled once: asked of every clause


def _section_name(clause: str) -> str | None:
    if not (_SECTION_VERB.search(clause) or _MODAL_WORD.search(clause)):
        return None
    for pattern in (_SECTION_HASHED, _SECTION_NAMED, _SECTION_BEFORE):
        match = pattern.search(clause)
        if match:
            name = match.group("name").strip(" \"'`")
            if name and name.lower() not in GENERIC_WORDS:
                return name
    return None


def _side_ok(phrase: str) -> bool:
    """Both sides of a bare "X, not Y" must be short names, not a sentence ("it's not working")."""
    tokens = phrase.strip().split()
    if not 1 <= len(tokens) <= 3:
        return False
    first = tokens[0].lower()
    return (first not in _PRONOUNS and not _ARTICLES.match(phrase.strip()) and not _AUX_VERB.search(phrase)
            and not _QUESTION_START.match(phrase.strip()) and first not in _NOT_A_SIDE)


_NOT_A_SIDE = frozenset(
    "but and or so just still also maybe then now yet why what working done sure really quite right correct "
    "good bad needed necessary true false enough always only exactly even well please thanks".split()
)


# Cached: mining parses the same clause several times per message (``extract_rules``, ``states_only_rules``,
# ``classify_reaction``, ``_parts``, ``checks_for_rule``) and the same short replies ("continue", "use pnpm") recur
# across sessions; the function is pure and ``_Parsed`` is frozen.
@lru_cache(maxsize=8192)
def _parse(clause: str) -> _Parsed | None:
    """Return the rule form of one clause (frame words already stripped), or None when it is not a rule."""
    text = clause.strip()
    if not text or len(text) > MAX_RULE_CHARS or _is_question(text):
        return None
    if _FORBID_NEUTRAL.match(text):
        return None
    for pattern in (_PREFER,):
        match = pattern.match(text)
        if match and len(match.group("x").split()) <= 6:
            return _Parsed("prefer", preferred=match.group("x"), forbidden=match.group("y"))
    match = _PREFER_VERB.match(text)
    if match:  # softer than "use X, not Y": only the preferred literal is checked
        return _Parsed("use", preferred=match.group("x"))
    match = _USE_INSTEAD.match(text)
    if match:
        return _Parsed("use", preferred=match.group("x"))
    match = _MOVED.match(text)
    if match:  # "we moved from yarn to pnpm": a new rule that replaces the old one
        return _Parsed("prefer", preferred=match.group("x"), forbidden=match.group("y"))
    match = _SWITCHED_TO.match(text)
    if match:  # "we switched to ruff format"
        return _Parsed("use", preferred=match.group("x"))
    match = _WE_VERB_WITH.match(text)
    if match and len(match.group("x").split()) <= 4:  # "we format with black, not autopep8"
        return _Parsed("prefer", preferred=match.group("x"), forbidden=match.group("y"))

    match = _SHOP.match(text)
    if match and _side_ok(match.group("x")):  # "we're a pnpm shop"
        return _Parsed("use", preferred=match.group("x"))
    match = _FORBID_USE.match(text)
    if match:
        forbidden, _, after = match.group("y").partition(",")
        positive = re.match(rf"^\s*(?:but\s+|and\s+)?(?:always\s+)?{_USE_VERBS}\s+(?P<x>.+)$", after, re.IGNORECASE)
        if positive:  # "never use print, use logging"
            return _Parsed("prefer", preferred=positive.group("x"), forbidden=forbidden)
        return _Parsed("forbid", forbidden=forbidden)
    match = _FORBID.match(text)
    if match:
        return _Parsed("forbid", rest=match.group("y"))
    match = _NO_THING.match(text)
    if match and not _NO_NEUTRAL.match(text):
        thing = match.group("y")
        if len(thing.split()) <= 6 and not _AUX_VERB.search(thing):
            return _Parsed("forbid", forbidden=thing)
        return None
    match = _ALWAYS.match(text)
    if match:
        return _Parsed("always", rest=match.group("rest"))
    match = _WE_USE.match(text)
    if match:
        return _Parsed("use", preferred=match.group("x"))
    match = _BARE_USE.match(text)
    if match and len(match.group("x").split()) <= 4 and not re.search(r"\b(?:to|and|so|then|the output|it)\b",
                                                                      match.group("x"), re.IGNORECASE):
        return _Parsed("use", preferred=match.group("x"))
    match = _SHORT_CONTRAST.match(text)
    if match and _side_ok(match.group("x")) and _side_ok(match.group("y")):
        return _Parsed("prefer", preferred=match.group("x"), forbidden=match.group("y"))
    match = _TERSE.match(text)
    if match and _side_ok(match.group("x")) and _literal(match.group("x")):  # "pnpm only", "ISO dates please"
        return _Parsed("use", preferred=match.group("x"))
    if _FIRST_PERSON_START.match(text):
        return None
    if _MODAL_RULE.search(text) and _UNIVERSAL.search(text):
        return _Parsed("declare", rest=text)
    if _REPO_SCOPE.search(text) and _POLICY_WORD.search(text):
        return _Parsed("declare", rest=text)
    if _keyword_hit(text):
        return _Parsed("keyword", rest=text)
    return None


#: A message with more non-empty lines than this holds pasted text (a page, a plan, a log).
TYPED_MAX_LINES = 12
#: Lines of its first and last paragraphs that still count as typed around a paste.
TYPED_PARAGRAPH_LINES = 3


def typed_text(text: str) -> str:
    """The part of a message the user typed: the whole of a short message; of a long one (a paste with a request),
    only its first and last paragraphs when they are short. Rules and the names a correction mentions come from
    here, never from a pasted page, plan or log."""
    lines = [line for line in (text or "").splitlines() if line.strip()]
    if len(lines) <= TYPED_MAX_LINES:
        return text or ""
    paragraphs = [block.strip() for block in re.split(r"\n\s*\n", text.strip()) if block.strip()]
    kept = [block for block in (paragraphs[0], paragraphs[-1]) if len(block.splitlines()) <= TYPED_PARAGRAPH_LINES]
    return "\n\n".join(dict.fromkeys(kept))


def extract_rules(text: str) -> list[str]:
    """Return the rule statements in one message, in the user's words (frame words like "No," dropped).

    text: a user message (request, correction, rejection feedback). Returns at most ``MAX_RULES_PER_MESSAGE``
    distinct clauses, in order. Code blocks, indented code and pasted text (``typed_text``) are ignored. Never raises.
    """
    found: list[str] = []
    seen: set[str] = set()
    for clause in split_clauses(typed_text(text)):
        for rule in _rule_statements(strip_frame(clause)):
            key = rule.casefold()
            if key not in seen and len(found) < MAX_RULES_PER_MESSAGE:
                seen.add(key)
                found.append(rule)
    return found


def states_only_rules(text: str) -> bool:
    """True when every clause of ``text`` (frame words dropped) is a rule statement and there is at least one: a
    message that states rules and asks for nothing ("we're a pnpm shop. dates are ISO")."""
    clauses = [strip_frame(clause) for clause in split_clauses(text)]
    clauses = [clause for clause in clauses if clause]
    return bool(clauses) and all(_rule_statements(clause) for clause in clauses)


_PART_SPLIT = re.compile(r"\s*(?:,|:|\s-\s|\s\u2014\s)\s*")


def _parse_part(part: str) -> _Parsed | None:
    """``_parse``, and a bare "not X" (which is a rule only beside another part: "ruff format, not black")."""
    parsed = _parse(part)
    if parsed is None:
        match = _NOT_THING.match(part)
        if match and _side_ok(match.group("y")):
            return _Parsed("forbid", forbidden=match.group("y"))
    return parsed


def _parts(clause: str) -> list[str]:
    """The comma/colon/dash-separated parts of a clause that parse as rules on their own; a bare "not X" counts only
    beside a part that is a rule by itself ("I meant the staging server, not prod" states no rule)."""
    parts = [part for part in _PART_SPLIT.split(clause) if part]
    whole = [part for part in parts if _parse(strip_frame(part)) is not None]
    if not whole:
        return []
    return [part for part in parts if _parse_part(strip_frame(part)) is not None]


def _rule_statements(clause: str) -> list[str]:
    """The rule(s) of one clause: the clause itself, in the user's words, or two rules when a complete rule is
    followed by a different concrete one after a comma ("Don't touch the lockfile by hand, use pnpm not npm"). A
    clause that does not parse whole but whose parts do ("no black anymore, we switched to ruff format") is one
    rule."""
    if not clause:
        return []
    parsed = _parse(clause)
    if parsed is None:
        return [clause] if _parts(clause) and _PART_SPLIT.search(clause) else []
    if parsed.form == "prefer" or parsed.preferred or parsed.forbidden:
        return [clause]
    head, _, tail = clause.partition(", ")
    tail_parsed = _parse(tail) if tail else None
    if tail_parsed is None or tail_parsed.form not in ("prefer", "use", "forbid") or _parse(head) is None:
        return [clause]
    whole = {(check.op, check.value) for check in _checks_of(clause, clause, "house_rule")}
    if {(check.op, check.value) for check in checks_for_rule(tail)} <= whole:
        return [clause]  # the tail only restates the rule ("dates are ISO here, YYYY-MM-DD please")
    return [head, tail]


# --------------------------------------------------------------------------- checks


def word_regex(literal: str) -> str:
    """A regex for ``literal`` as a whole word: not inside a longer word (``npm`` is not in ``pnpm``); an end that is
    not a word character (``Path(``) needs no boundary."""
    head = r"(?<!\w)" if re.match(r"\w", literal) else ""
    tail = r"(?!\w)" if re.search(r"\w$", literal) else ""
    return head + re.escape(literal) + tail


def negative_word_regex(literal: str) -> str:
    """A regex that matches a text in which ``literal`` never occurs as a whole word (``word_regex``)."""
    return r"\A(?![\s\S]*" + word_regex(literal) + ")"


def _forbid_check(literal: str, preferred: str | None, rule: str, origin: str) -> Check:
    """``not_contains literal``, or a whole-word negative regex when a substring match would misfire."""
    inside_preferred = preferred is not None and literal.casefold() in preferred.casefold()
    short_word = re.fullmatch(r"\w{1,3}", literal) is not None
    word_edges = re.match(r"\w", literal) and re.search(r"\w$", literal)
    if (inside_preferred or short_word) and word_edges:
        return Check(op="regex", value=negative_word_regex(literal), origin=origin, rule=rule)
    return Check(op="not_contains", value=literal, origin=origin, rule=rule)


def _keyword_checks(text: str, rule: str, origin: str) -> list[Check]:
    checks: list[Check] = []
    if _CONVENTIONAL.search(text):
        checks.append(Check(op="regex", value=CONVENTIONAL_COMMIT_REGEX, origin=origin, rule=rule))
    if _ISO_DATE.search(text):
        checks.append(Check(op="regex", value=ISO_DATE_REGEX, origin=origin, rule=rule))
    limit = _LENGTH_LIMIT.search(text)
    if limit and _LENGTH_CONTEXT.search(text):
        op = "max_words" if limit.group("unit").lower().startswith("word") else "max_chars"
        checks.append(Check(op=op, value=int(limit.group("n")), origin=origin, rule=rule))
    section = _section_name(text)
    if section:
        checks.append(Check(op="section_present", value=section, origin=origin, rule=rule))
    if _JSON_OUTPUT.search(text):
        checks.append(Check(op="json_valid", value=None, origin=origin, rule=rule))
    return checks


def checks_for_rule(rule: str, *, origin: str = "house_rule") -> list[Check]:
    """Return the deterministic checks a rule statement implies (possibly none).

    rule: one statement as returned by ``extract_rules``. origin: stored on each check (``house_rule`` for a
    rule stated in a request, ``correction`` for one stated in a correction). Each check carries ``rule``.
    Format rules (Conventional Commits, ISO dates, word/character limits, a named section, JSON output) give
    their format check and no literal ``contains`` of the rule's words. Never raises.
    """
    text = strip_frame(_clean_quotes(rule or ""))
    parsed = _parse(text)
    checks = _checks_of(text, rule, origin) if parsed is not None else []
    if parsed is None or parsed.form not in ("prefer", "use", "forbid") or not checks:
        checks += [check for part in _parts(text) for check in _checks_of(strip_frame(part), rule, origin)]
    return _unique(checks)


def _unique(checks: list[Check]) -> list[Check]:
    unique: list[Check] = []
    for check in checks:
        if all((c.op, c.value) != (check.op, check.value) for c in unique):
            unique.append(check)
    return unique


def _checks_of(text: str, rule: str, origin: str) -> list[Check]:
    """The checks of one statement that parses (``_parse_part``)."""
    parsed = _parse_part(text)
    if parsed is None:
        return []
    checks = _keyword_checks(text, rule, origin)
    formatted = bool(checks)
    preferred = _literal(parsed.preferred) if parsed.preferred else None
    if parsed.form in ("prefer", "use") and preferred and not formatted:
        checks.append(Check(op="contains", value=preferred, origin=origin, rule=rule))
    if parsed.form == "prefer" and parsed.forbidden:
        forbidden = _literal(parsed.forbidden)
        if forbidden and forbidden.casefold() != (preferred or "").casefold():
            checks.append(_forbid_check(forbidden, parsed.preferred, rule, origin))
    if parsed.form == "forbid":
        forbidden = _literal(parsed.forbidden) if parsed.forbidden else _quoted(parsed.rest or "")
        if forbidden and len(forbidden) <= MAX_LITERAL_CHARS:
            checks.append(_forbid_check(forbidden, None, rule, origin))
    if parsed.form == "always" and not formatted and parsed.rest:
        use = re.match(rf"^{_USE_VERBS}\s+(?P<x>.+)$", parsed.rest, re.IGNORECASE)
        literal = _literal(use.group("x")) if use else _quoted(parsed.rest)
        if literal:
            checks.append(Check(op="contains", value=literal, origin=origin, rule=rule))
    return checks


def validate_check(check: Check) -> str | None:
    """Return why ``check`` cannot be scored (bad regex, wrong value type, empty or overlong value), or None.

    Text ops (contains, not_contains, regex, starts_with, ends_with, section_present, tool_called) need a
    non-empty string of at most ``MAX_CHECK_VALUE_CHARS``; ``regex`` must compile; ``max_chars``/``max_words``
    need an int > 0 (not a bool, not a string); ``json_valid`` takes no value.
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


# --------------------------------------------------------------------------- reactions

_TOKEN = re.compile(r"[a-z0-9_]+")
_APPROVAL = re.compile(
    r"^(?:thanks?\b|thank you|thx\b|ty\b|cheers\b|great\b|perfect\b|nice\b|awesome\b|excellent\b|amazing\b|"
    r"cool\b|lgtm\b|looks (?:good|great|fine|right)|(?:that|it|this) works|works (?:now|great|perfectly|fine)|"
    r"good job|well done|love it|exactly\b|brilliant\b|sweet\b|no problem|no worries|\U0001f44d|\U0001f64f)",
    re.IGNORECASE,
)
_WEAK_APPROVAL = re.compile(r"^(?:ok(?:ay)?|yes|yep|yeah|yup|sure|alright|fine|good|done|k)\b", re.IGNORECASE)
_CORRECTION_START = re.compile(
    r"^(?:no|nope|nah|wrong|incorrect|not quite|not really|that's not|that is not|this is not|this isn't|"
    r"that isn't|it's not|it isn't|not what i|i said|i told you|i asked|i meant|stop|revert|undo|roll ?back|"
    r"why did you|why would you|you didn't|you did not|you forgot|you missed|you broke|don't|do not|"
    r"never do that|ugh|hmm,? no)\b",
    re.IGNORECASE,
)
_CORRECTION_ANYWHERE = re.compile(
    r"\b(?:doesn't work|does not work|didn't work|did not work|not working|isn't working|still (?:not|no|"
    r"doesn't|does not|isn't|is not|fails?|failing|broken|wrong|the same|getting|get|seeing|see|crash\w*|"
    r"happen\w*|shows?|has|have|returns?|errors?|there)|broke\b|broken\b|try again|"
    r"that's wrong|is wrong|was wrong|(?:the|a) wrong \w+|not what i (?:asked|wanted|meant|said)|instead\b|i said|"
    r"i told you|"
    r"why did you|you (?:ignored|forgot|missed))",
    re.IGNORECASE,
)
_NEUTRAL_START = re.compile(r"^(?:actually|continue|don't forget|do not forget|also|and|btw|by the way)\b",
                            re.IGNORECASE)
_PASTED_ERROR = re.compile(r"Traceback \(most recent call last\)|^\s*\w*(?:Error|Exception): |"
                           r"\berror\[?E?\d*\]?:|exit code [1-9]|\bFAILED\b|command not found|npm ERR!|"
                           r"connection refused|permission denied|no such file|segmentation fault|"
                           r"\b(?:it|this|that) (?:fails|failed|crashes|crashed)\b|"
                           r"\b(?:getting|got|get) (?:an? |the same )?(?:error|exception)",
                           re.MULTILINE | re.IGNORECASE)
_CONTRASTIVE_RULE = re.compile(r"\b(?:not|instead|rather than|never|don't|do not|avoid|stop)\b", re.IGNORECASE)


def tokens(text: str) -> set[str]:
    """Lower-case word tokens of ``text`` (letters, digits, underscore)."""
    return set(_TOKEN.findall((text or "").lower()))


def jaccard(left: set[str], right: set[str]) -> float:
    """Jaccard similarity of two token sets, in [0, 1] (0 when both are empty)."""
    if not left or not right:
        return 0.0
    return len(left & right) / len(left | right)


#: A reply of at most this many words made only of rule statements corrects the previous answer.
MAX_RULE_ONLY_WORDS = 12


@lru_cache(maxsize=64)  # mining asks twice about a new request: may it fold into the task before, is it an approval
def classify_reaction(next_message: str, previous_request: str) -> Reaction:
    """Classify the user's next message as a reaction to the previous turn.

    Returns ``correction`` (a message starting with no, wrong, that's not, not what I, I said, stop, don't,
    revert, why did you, ...; a short message (<= ``MAX_SHORT_REACTION_WORDS``) with still ..., doesn't work,
    try again, instead, broken anywhere; a pasted error; or a contrastive rule such as "use pnpm, not npm" as
    its first sentence), ``reask`` (token Jaccard with the previous request >= ``REASK_SIMILARITY``),
    ``approval`` (thanks, great, perfect, looks good, lgtm, works; or a bare ok/yes) or ``none``. Messages that
    start with "actually", "continue", "don't forget", "also" are neutral unless a strong cue follows. The
    structural reactions (interrupted, rejected, aborted) come from the turn itself, not from here.
    """
    text = _clean_quotes(next_message or "").strip()
    if not text:
        return "none"
    lowered = text.lower()
    neutral_start = bool(_NEUTRAL_START.match(lowered))
    if re.match(r"^no (?:problem|worries)\b", lowered):
        return "approval"
    if not neutral_start and _CORRECTION_START.match(lowered):
        return "correction"
    short = len(lowered.split()) <= MAX_SHORT_REACTION_WORDS  # a long message with "instead" is a new request
    if (short and _CORRECTION_ANYWHERE.search(lowered)) or _PASTED_ERROR.search(text):
        return "correction"
    clauses = split_clauses(text)
    if clauses and not neutral_start:
        first = strip_frame(clauses[0])
        if _parse(first) is not None and _CONTRASTIVE_RULE.search(first):
            return "correction"
    if len(lowered.split()) <= 8 and re.search(r"\bagain\b", lowered):
        return "correction"
    if (clauses and not neutral_start and len(lowered.split()) <= MAX_RULE_ONLY_WORDS
            and all(_parse(strip_frame(clause)) is not None for clause in clauses)):
        return "correction"  # a short message that only states rules ("dates are ISO here, YYYY-MM-DD please")
    if previous_request and jaccard(tokens(text), tokens(previous_request)) >= REASK_SIMILARITY:
        return "reask"
    if _APPROVAL.match(lowered) or _WEAK_APPROVAL.match(lowered):
        return "approval"
    return "none"


# --------------------------------------------------------------------------- the LLM miner

MINER_OUTCOMES = ("success", "partial", "failure", "unknown")
#: Characters of the request / final answer / reaction put into the miner prompt.
MINER_REQUEST_CHARS = 2000
MINER_ANSWER_CHARS = 800
MINER_REACTION_CHARS = 600


def llm_miner_schema() -> dict[str, Any]:
    """JSON schema of the miner's reply: ``{intent: str, checks: [{op, value}], rubric: str, outcome: str}``.

    op: one of the ``CheckOp`` names; value: string, integer or null; outcome: success|partial|failure|unknown.
    Every property is required and no other is allowed (strict structured output).
    """
    return {
        "type": "object",
        "properties": {
            "intent": {"type": "string"},
            "checks": {
                "type": "array",
                "maxItems": 6,
                "items": {
                    "type": "object",
                    "properties": {
                        "op": {"type": "string", "enum": list(CHECK_OPS)},
                        "value": {"type": ["string", "integer", "null"]},
                    },
                    "required": ["op", "value"],
                    "additionalProperties": False,
                },
            },
            "rubric": {"type": "string"},
            "outcome": {"type": "string", "enum": list(MINER_OUTCOMES)},
        },
        "required": ["intent", "checks", "rubric", "outcome"],
        "additionalProperties": False,
    }


def _head(text: str, limit: int) -> str:
    text = (text or "").strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def miner_prompt(task: TaskRecord) -> str:
    """Render the short miner prompt (template ``miner.md``) for one task."""
    reaction = task.evidence.reaction
    if task.evidence.reaction_text:
        reaction += ": " + _head(task.evidence.reaction_text, MINER_REACTION_CHARS)
    if task.rules:
        reaction += "\nRules the user stated: " + "; ".join(task.rules)
    rejected = task.evidence.corrected_answers[0] if task.evidence.corrected_answers else task.evidence.final_answer
    return render_prompt(
        "miner",
        request=quote_data(_head(task.request, MINER_REQUEST_CHARS)),
        final_answer=quote_data(_head(rejected, MINER_ANSWER_CHARS) or "(none)"),
        accepted_answer=quote_data(_head(task.evidence.accepted_answer or "", MINER_ANSWER_CHARS) or "(none)"),
        reaction=reaction,
    )


def make_llm_miner(meter) -> Callable[[TaskRecord], dict[str, Any]]:
    """Return the optional LLM miner: ``miner(task) -> {intent, checks, rubric, outcome}``.

    meter: a ``CallMeter``. Each call makes one ``ChatRequest(role="miner", json_schema=llm_miner_schema(),
    temperature=0)`` through it. Raises ``BackendError``/``BudgetExhausted`` (from the meter) when the call
    fails, and ValueError when the reply holds no JSON object; ``mine_tasks`` catches both and keeps the
    heuristic judge.
    """

    def miner(task: TaskRecord) -> dict[str, Any]:
        request = ChatRequest(
            role="miner",
            messages=[ChatMessage(role="user", content=miner_prompt(task))],
            json_schema=llm_miner_schema(),
            temperature=0.0,
            max_tokens=400,
        )
        result = meter.chat(request)
        reply = extract_json(result.text)
        if not isinstance(reply, dict):
            raise ValueError(f"miner reply is not a JSON object: {_head(result.text, 120)!r}")
        return reply

    return miner
