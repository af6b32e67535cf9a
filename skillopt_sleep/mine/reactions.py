"""The user's reaction to an answer: approval, correction, re-ask, or none.

* ``classify_reaction(next_message, previous_request)``: approval | correction | reask | none, from the lexical cues
  of FORMATS.md §1.8 / §2.10 ("actually", "continue", "don't forget" are neutral);
* ``reaction_to(text, request=..., answer=..., stopped=...)``: how a message reacts to the open task, or None when it
  is a new request or a refinement (mining folds a reaction into the task it labels, never into its prompt).
"""

from __future__ import annotations

import re
from functools import lru_cache

from skillopt_sleep.checks import check_passes
from skillopt_sleep.grammar.clauses import CONTRASTIVE_RULE, clean_quotes, split_clauses, strip_frame
from skillopt_sleep.grammar.forms import parse_rule
from skillopt_sleep.grammar.statements import checks_for_rule, extract_rules, states_only_rules
from skillopt_sleep.mine.requests import is_acknowledgement
from skillopt_sleep.mine.validation import Evidence, evidence_checks
from skillopt_sleep.models import Reaction

#: Longest message (words) in which a correction cue anywhere ("still", "instead", "broken") counts.
MAX_SHORT_REACTION_WORDS = 25


#: Jaccard similarity of token sets from which a message re-asks the previous request.
REASK_SIMILARITY = 0.7


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
    text = clean_quotes(next_message or "").strip()
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
        if parse_rule(first) is not None and CONTRASTIVE_RULE.search(first):
            return "correction"
    if len(lowered.split()) <= 8 and re.search(r"\bagain\b", lowered):
        return "correction"
    if (clauses and not neutral_start and len(lowered.split()) <= MAX_RULE_ONLY_WORDS
            and all(parse_rule(strip_frame(clause)) is not None for clause in clauses)):
        return "correction"  # a short message that only states rules ("dates are ISO here, YYYY-MM-DD please")
    if previous_request and jaccard(tokens(text), tokens(previous_request)) >= REASK_SIMILARITY:
        return "reask"
    if _APPROVAL.match(lowered) or _WEAK_APPROVAL.match(lowered):
        return "approval"
    return "none"


#: A message right after the user stopped the agent, of at most this many words, says what went wrong.
STEER_MAX_WORDS = 25


#: An approval of at most this many words is a reaction; a longer message may carry a new request.
APPROVAL_MAX_WORDS = 12


#: A request to redo the answer ("rewrite it with httpx") of at most this many words is a correction.
REDO_MAX_WORDS = 20


#: A first clause of at most this many words without a verb ("uv.", "httpx pls") is a terse correction.
TERSE_MAX_WORDS = 3


#: Verbs a short request starts with ("fix lint", "run tests"): such a message is a request, not a terse correction.
_REQUEST_VERBS = frozenset(
    """add fix run write make create update remove delete explain show list build install test refactor rename
    implement check review deploy commit push pull merge format generate convert move find read open set use
    describe summarize summarise translate draft give tell help try redo undo revert continue stop start restart
    clean lint debug profile document bump release publish ship sort count compute calculate plot print save load
    parse split join compare optimize optimise improve simplify rewrite edit change do go""".split()
)


REFINEMENT = re.compile(r"^(?:also|and also|oh and|plus|additionally|one more thing|btw,? also)\b", re.IGNORECASE)


_REDO = re.compile(
    r"^(?:(?:ok|okay|now|then|hmm|please|pls|can you|could you|would you|just|no|nope)[,.!\s]+)*"
    r"(?:rewrite|redo|re-do|change|convert|make|turn|update|fix|switch|rename|use|try|do|write|put|move|format|"
    r"translate|shorten|simplify|implement|finish|close|restart|rerun|re-run|undo|revert|split|merge|drop|remove)"
    r"\b(?:\W+\w+){0,6}?\W+(?:it|that|this|them|those|these)\b",
    re.IGNORECASE,
)


def _contradicts(text: str, answer: str) -> bool:
    """The message states a rule whose checks (from its words, or from the names it mentions) fail ``answer``: the
    user is correcting what the agent just did, however they phrased it ("we're a pnpm shop" after ``npm
    install``)."""
    if not answer.strip():
        return False
    evidence = Evidence(corrected=[answer])
    for rule in extract_rules(text):
        candidates = checks_for_rule(rule, origin="correction") + evidence_checks(rule, evidence, rule=rule)
        if any(check_passes(check, answer, None) is False for check in candidates):
            return True
    return False


_LEAD = re.compile(r"^(?:(?:now|then|next|and|ok|okay|so|also|great|thanks|thank you)[,.!:\s]+)+", re.IGNORECASE)


def _terse(text: str) -> bool:
    """The message opens with a bare name or two ("uv.", "httpx pls", "black. not autopep8"): no verb, no question,
    nothing to do on its own; after an answer it says what the answer should have used."""
    clauses = split_clauses(text)
    if not clauses:
        return False
    first = _LEAD.sub("", strip_frame(clauses[0]))
    words = first.split()
    return (1 <= len(words) <= TERSE_MAX_WORDS and not clauses[0].rstrip().endswith("?")
            and words[0].casefold().strip(",.") not in _REQUEST_VERBS and not is_acknowledgement(first))


def _asks_for_more(text: str) -> bool:
    """A clause of the message that is not a rule starts with a request verb ("now add axios"): it asks for new work."""
    for clause in split_clauses(text):
        if extract_rules(clause):
            continue
        words = _LEAD.sub("", strip_frame(clause)).split()
        if words and words[0].casefold().strip(",.") in _REQUEST_VERBS - {"use", "try", "do", "go", "continue"}:
            return True
    return False


def reaction_to(text: str, *, request: str, answer: str, stopped: bool) -> Reaction | None:
    """How a message reacts to the task before it, or None when it is not a reaction (a new request, or a
    refinement). request: that task's request; answer: what the agent did last (``validation.behaviour``);
    stopped: the last turn was interrupted, rejected or aborted.

    ``correction``: ``rules.classify_reaction`` says so (no / wrong / I said / a contrastive rule / a pasted error /
    a short rule-only reply ...); or the message came right after the user stopped the agent and is short (it says
    what went wrong); or it asks to redo the answer ("rewrite it with httpx", "make that shorter"); or it states a
    rule that the answer breaks (unless another of its clauses asks for new work: "now add axios; we use pnpm here"
    is a new request). ``reask`` / ``approval``: ``classify_reaction`` (a short approval only; "thanks, now add a
    test" is a new request). A message that only states rules is a reaction too (``none``: a label).
    """
    if REFINEMENT.match(text):
        return None
    words = len(text.split())
    reaction = classify_reaction(text, request)
    if reaction in ("correction", "reask"):
        return reaction
    if stopped and words <= STEER_MAX_WORDS:
        return "correction"
    if words <= REDO_MAX_WORDS and _REDO.match(text):
        return "correction"
    if _asks_for_more(text):
        return None  # "thanks, now add a test", "now add axios; we use pnpm here": new work
    if reaction == "approval" and words <= APPROVAL_MAX_WORDS:
        return "approval"
    if _terse(text):
        return "correction"
    if _contradicts(text, answer):
        return "correction"
    if states_only_rules(text):
        return "none"
    return None
