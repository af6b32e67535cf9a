"""Checks validated by the session's own evidence: no check scores anything the session does not support.

A check decides whether a replayed answer does what the user wanted. It may come from a rule the user stated
(``rules.checks_for_rule``), from the literals a correction names (``evidence_checks``), or from the LLM miner.
Wherever it comes from, ``validate_checks`` keeps it only when the session itself supports it:

1. it is well-formed (``rules.validate_check``) and can be decided on text (``tool_called`` cannot: a text
   replay runs no tool);
2. when the user objected to an answer (``TaskEvidence.corrected_answers``), the check fails one of them;
3. when the user accepted an answer (``TaskEvidence.accepted_answer``), the check passes it;
4. at least one of the two exists: a check that nothing in the session can confirm is a guess.

An "answer" here is what the agent did in the span: its text and its tool inputs (``behaviour``), because a
rule is often broken in a command the agent ran rather than in what it wrote. Alternatives are one check: when
several ``contains`` checks name forms of which the accepted answer uses only one, they are the allowed forms of one
rule and become one regex (``merge_alternatives``).

The task as a whole is hard evidence (``hard_evidence``) when it has validated checks and, if the request asks
for an artefact, those checks fail a vacuous reply ("OK.", "Done."): a judge that "OK." passes cannot tell a
good answer from no answer.

``evidence_checks`` turns the user's own words into candidate checks without a list of phrasings: a name the
user wrote in a correction (``pnpm``, ``os.path``, ``httpx``) that the agent used as code or ran in exactly one
of the two answers tells the check's polarity: present only in the accepted answer -> the answer must contain it (a
dotted name: name its module or call its symbol, ``grammar.literals.name_use_regex``); present only in the corrected
one -> it must not. Whether "we're a pnpm shop", "pnpm please" or "no npm, pnpm" was written, the evidence decides.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from skillopt_sleep.checks import (
    check_key,
    check_passes,
    describe_check,
    negative_word_regex,
    validate_check,
    word_regex,
)
from skillopt_sleep.grammar.literals import GENERIC_WORDS, name_use_regex
from skillopt_sleep.grammar.typed import typed_text
from skillopt_sleep.models import Check, TaskRecord

#: Replies that do nothing; a judge of a request for an artefact must fail them.
VACUOUS_REPLIES = ("OK.", "Done.", "Sure, I can help with that.")
#: Most candidate literals taken from one correction.
MAX_EVIDENCE_LITERALS = 6
#: Longest literal (characters) a check may look for.
MAX_LITERAL_CHARS = 40
#: The line that starts the tool inputs in a behaviour text.
ACTIONS_HEADER = "[actions]"

_COMMON = frozenset(
    """a an and are as at be been but by can could do does did for from had has have he her his how i if in into is
    it its me my of on or our should so than that the their them then there these they this those to too us was we
    were what when where which while who why will with would you your yours also just only any all each every some
    such here no not never don't dont do use using used instead rather please pls thanks thank yes ok okay wrong
    right again always prefer avoid stop make sure want wanted need needs meant mean said told like one ones
    let's lets it's that's we're i'm i've you're isn't aren't doesn't didn't won't can't shouldn't now still
    actually really sorry hmm ugh nope nah yep yeah go going get got put keep way thing things stuff add install
    run remove delete update create write read set make call return import print show list build test check fix
    change move copy open close start stop load save send fetch format""".split()
)
_NAME = re.compile(r"(?<![\w.])[A-Za-z_][\w.+/()-]*[\w)]|(?<![\w.])[A-Za-z_]\b")
_QUOTED = re.compile(r"`([^`\n]{1,60})`|\"([^\"\n]{1,60})\"")
_CODE_SPAN = re.compile(r"```.*?(?:```|\Z)|`[^`\n]+`|^(?: {4}|\t).*$", re.DOTALL | re.MULTILINE)
_ENUMERATION = re.compile(
    r"(?<![\w.-])[\w.-]{1,20}(?:\s*(?:,|/|\|)\s*(?:or\s+|and\s+)?[\w.-]{1,20}|\s+(?:or|and)\s+[\w.-]{1,20}){2,}",
    re.IGNORECASE)
_NEGATION = re.compile(r"\b(?:not|never|no|don't|dont|do not|avoid|instead of|rather than|stop|without|drop)\s+"
                       r"(?:\w+\s+){0,2}$", re.IGNORECASE)
_PLACEHOLDER = re.compile(r"^(?:[YMDHhmsSxX]+|N+)(?:[-/:. T](?:[YMDHhmsSxX]+|N+))+$")
"""A format placeholder the user wrote to describe a shape (``YYYY-MM-DD``, ``HH:MM``, ``X.Y.Z``): not a literal."""
_CODE_LIKE = re.compile(r"[._/\\:()\[\]<>=@#$%&*+~|0-9-]")


def behaviour(answer: str, actions: list[str]) -> str:
    """What the agent did in one span, as one text: the answer, then ``ACTIONS_HEADER`` and one tool input per
    line (``[Bash] npm install``)."""
    text = (answer or "").strip()
    if actions:
        text += ("\n\n" if text else "") + ACTIONS_HEADER + "\n" + "\n".join(actions)
    return text


_FILLER = frozenset(
    """sorry apologies apologize right you you're correct corrected fixed fix done okay sure will let know anything
    else thanks thank updated update changed change here there that this the now all set good great absolutely
    got it it's that's have has been made make just should work works working again see above below below""".split()
)


def is_vacuous(text: str | None) -> bool:
    """True for an answer that shows no work: empty, or no code, no command, no tool input, no number and fewer than
    two words beyond apologies and acknowledgements ("Sorry, fixed.", "Done!", "You're right, updated it.")."""
    stripped = (text or "").strip()
    if not stripped:
        return True
    if "`" in stripped or ACTIONS_HEADER in stripped or re.search(r"\d", stripped):
        return False
    words = {word for word in re.findall(r"[a-z][a-z'-]+", stripped.casefold()) if word not in _FILLER
             and word not in _COMMON}
    return len(words) < 2


# --------------------------------------------------------------------------- evidence


@dataclass
class Evidence:
    """The session's answers a check is validated against (``behaviour`` texts).

    corrected: the spans the user objected to; accepted: the span the user accepted (None when there is none or
    it was vacuous); wants_artefact: the request asks for something to be produced (code, a command, text)."""

    corrected: list[str] = field(default_factory=list)
    accepted: str | None = None
    wants_artefact: bool = True

    @property
    def usable(self) -> bool:
        return bool(self.corrected) or self.accepted is not None


_QUESTION = re.compile(r"^(?:is|are|was|were|does|do|did|has|have|can|could|should|would|will|why|what|which|who|"
                       r"where|when)\b[^.!\n]*\?\s*$", re.IGNORECASE)


def wants_artefact(request: str) -> bool:
    """False for a bare question that asks for an explanation or a yes/no ("why does the build fail?"); True for
    any request that asks for something to be produced or done."""
    # At most 26 words are split off (a replayed request can be a 20,000-character plan): more than 25 means an
    # artefact, and 25 or fewer are the whole request.
    words = (request or "").split(None, 25)
    if len(words) > 25:
        return True
    return not _QUESTION.match(" ".join(words))


def check_verdict(check: Check, evidence: Evidence) -> str | None:
    """Why ``check`` may not score (module docstring, rules 1-4), or None when it is validated."""
    malformed = validate_check(check)
    if malformed:
        return malformed
    if check.op == "tool_called":
        return "a text replay runs no tool: tool_called cannot be decided"
    if not evidence.usable:
        return "no answer in the session to validate it against"
    if evidence.corrected:
        verdicts = [check_passes(check, answer, None) for answer in evidence.corrected]
        if None in verdicts:
            return "cannot be decided on the corrected answer"
        if all(verdicts):
            return "does not fail the answer the user corrected"
    if evidence.accepted is not None:
        verdict = check_passes(check, evidence.accepted, None)
        if verdict is None:
            return "cannot be decided on the accepted answer"
        if not verdict:
            return "fails the answer the user accepted"
    return None


def merge_alternatives(checks: list[Check], evidence: Evidence) -> list[Check]:
    """Replace a list of alternatives by one regex of the allowed forms: when at least two ``contains`` checks of
    one source (origin and rule) are absent from the accepted answer, all the ``contains`` checks of that source name
    forms of which the answer uses one (six checks for six commit types are one rule), and become one regex of whole
    words (in the first one's place). Unchanged without an accepted answer."""
    if evidence.accepted is None:
        return list(checks)
    accepted = evidence.accepted.casefold()
    out = list(checks)
    for source in dict.fromkeys((check.origin, check.rule) for check in checks):
        forms = [check for check in out if (check.origin, check.rule) == source and check.op == "contains"
                 and isinstance(check.value, str) and check.value.strip()]
        absent = [check for check in forms if check.value.casefold() not in accepted]  # type: ignore[union-attr]
        if len(absent) < 2 or len(forms) < 3:
            continue
        values = [check.value for check in forms]
        head = r"(?<!\w)" if all(re.match(r"\w", value) for value in values) else ""  # type: ignore[arg-type]
        tail = r"(?!\w)" if all(re.search(r"\w$", value) for value in values) else ""  # type: ignore[arg-type]
        pattern = head + "(?:" + "|".join(re.escape(value) for value in values) + ")" + tail  # type: ignore[arg-type]
        first = forms[0]
        merged = Check(op="regex", value=pattern, origin=first.origin, rule=first.rule)
        out = [merged if check is first else check for check in out if check is first or
               not any(check is form for form in forms)]
    return out






def validate_checks(checks: list[Check], evidence: Evidence) -> tuple[list[Check], list[str]]:
    """Keep the checks the session supports (module docstring). Returns (validated checks, one per
    ``check_key``; ``"<origin> <op> <value>: <reason>"`` for each one dropped)."""
    kept: list[Check] = []
    rejected: list[str] = []
    for check in merge_alternatives(checks, evidence):
        if any(check_key(known) == check_key(check) for known in kept):
            continue
        reason = check_verdict(check, evidence)
        if reason:
            rejected.append(f"{check.origin} {describe_check(check)}: {reason}")
        else:
            kept.append(check)
    return kept, rejected


def hard_evidence(checks: list[Check], evidence: Evidence) -> bool:
    """The validated ``checks`` can decide a replay: there is one, and (when the request asks for an artefact)
    together they fail every vacuous reply."""
    if not checks:
        return False
    if not evidence.wants_artefact:
        return True
    return all(any(check_passes(check, reply, None) is False for check in checks) for reply in VACUOUS_REPLIES)


def task_evidence(task: TaskRecord) -> Evidence:
    """The session evidence of a mined task, for validating checks proposed after mining (the LLM miner, the rule
    reader's glosses)."""
    return Evidence(corrected=list(task.evidence.corrected_answers), accepted=task.evidence.accepted_answer,
                    wants_artefact=wants_artefact(task.request))


def add_checks(task: TaskRecord, checks: list[Check]) -> list[Check]:
    """Add the validated ``checks`` whose key (``check_key``) the task's judge does not hold yet, in place, and
    recompute ``task.hard_evidence`` when one was added; returns the checks added."""
    added: list[Check] = []
    for check in checks:
        if all(check_key(check) != check_key(known) for known in [*task.judge.checks, *added]):
            added.append(check)
    if added:
        task.judge.checks.extend(added)
        task.hard_evidence = task.replayable and hard_evidence(task.judge.checks, task_evidence(task))
    return added


# --------------------------------------------------------------------------- checks from the evidence


def _code_text(text: str) -> str:
    """The parts of a behaviour text written as code: code spans and blocks, indented lines, tool inputs."""
    parts = [match.group(0) for match in _CODE_SPAN.finditer(text)]
    marker = text.find(ACTIONS_HEADER)
    if marker != -1:
        parts.append(text[marker + len(ACTIONS_HEADER):])
    return "\n".join(parts)


#: The characters beyond ASCII that ``re.IGNORECASE`` matches to an ASCII character (dotted and dotless i, long s,
#: Kelvin sign), each mapped to it; ``tests/unit/test_validation.py`` recomputes the set on the Python that runs it.
ASCII_LOOKALIKES = {"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"}
_TO_ASCII = str.maketrans(ASCII_LOOKALIKES)


class _Text:
    """A text that many names are looked for in (``has_word``). The whole-word regex scans every position of the text
    (``re.IGNORECASE`` with a look-behind has no fast literal search), so a name that cannot be there is ruled out
    first: an ASCII name that ``re.IGNORECASE`` matches is, lower-cased, a substring of the text lower-cased with
    ``ASCII_LOOKALIKES`` mapped (which is made once)."""

    __slots__ = ("_folded", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self._folded: str | None = None

    def has_word(self, literal: str) -> bool:
        """``literal`` occurs in the text as a whole word (``rules.word_regex``), case-insensitively."""
        if literal.isascii() and literal.lower() not in self.folded():
            return False
        return re.search(word_regex(literal), self.text, re.IGNORECASE) is not None

    def folded(self) -> str:
        """The text lower-cased with ``ASCII_LOOKALIKES`` mapped, made on first use."""
        if self._folded is None:
            text = self.text
            if not text.isascii() and any(char in text for char in ASCII_LOOKALIKES):
                text = text.translate(_TO_ASCII)
            self._folded = text.lower()
        return self._folded


def _literals(text: str) -> list[tuple[str, bool]]:
    """Candidate names in a user's message, in order, each with whether the user framed it negatively (after
    not / never / no / instead of / don't / avoid). Common words and style words are not names."""
    found: list[tuple[str, bool]] = []
    seen: set[str] = set()
    spans = [(match.start(), next(group for group in match.groups() if group)) for match in _QUOTED.finditer(text)]
    spans += [(match.start(), match.group(0)) for match in _NAME.finditer(text)]
    for start, raw in sorted(spans):
        literal = raw.strip().strip(".,;:!?'\"")
        while literal.endswith(")") and literal.count(")") > literal.count("("):
            literal = literal[:-1]
        key = literal.casefold()
        if (not literal or key in seen or key in _COMMON or key in GENERIC_WORDS or len(literal) > MAX_LITERAL_CHARS
                or len(literal) < 2 or _PLACEHOLDER.match(literal)):
            continue
        seen.add(key)
        negated = _NEGATION.search(text[max(0, start - 40):start]) is not None
        found.append((literal, negated))
    return found


def _is_name(literal: str, code: _Text) -> bool:
    """A literal counts as a name when it looks like code, is capitalized, or appears in the answers' code."""
    return bool(_CODE_LIKE.search(literal) or literal[:1].isupper() or code.has_word(literal))


def _used(text: _Text, uses: str | None, literal: str) -> bool:
    """``literal`` is used in ``text``: as a whole word, or (``uses``: its ``name_use_regex``, for a dotted name) its
    module named or its symbol called."""
    return text.has_word(literal) if uses is None else re.search(uses, text.text, re.IGNORECASE) is not None


def evidence_checks(text: str, evidence: Evidence, *, rule: str | None, origin: str = "correction") -> list[Check]:
    """Candidate checks from the names a correction ``text`` mentions (module docstring); still to be validated.

    With an accepted answer, a name present (as a whole word) only in the accepted answer gives ``contains``, one
    present only in the corrected answers gives a whole-word negative regex. Without one, a name absent from the
    corrected answers and framed positively gives ``contains``; one present there and framed negatively gives the
    negative regex. A list of three or more names ("feat, fix or docs") gives one regex of the allowed forms.
    rule: stored on each check (the rule phrasing, or None for a correction that states no rule).
    """
    if not evidence.corrected:
        return []
    text = typed_text(text)
    corrected = _Text("\n".join(evidence.corrected))
    accepted = None if evidence.accepted is None else _Text(evidence.accepted)
    code = _Text(_code_text(corrected.text + "\n" + (evidence.accepted or "")))
    checks: list[Check] = []
    listed: set[str] = set()
    for match in _ENUMERATION.finditer(text):
        names = [name for name in re.split(r"\s*(?:,|/|\||\bor\b|\band\b)\s*", match.group(0), flags=re.IGNORECASE)
                 if name.strip()]
        names = [name.strip() for name in names if name.strip().casefold() not in _COMMON]
        if len(names) >= 3:
            listed.update(name.casefold() for name in names)
            pattern = r"(?<![\w-])(?:" + "|".join(re.escape(name) for name in names) + r")(?![\w-])"
            checks.append(Check(op="regex", value=pattern, origin=origin, rule=rule))
    for literal, negated in _literals(text)[: MAX_EVIDENCE_LITERALS * 2]:
        if literal.casefold() in listed or not _is_name(literal, code):
            continue
        in_corrected = corrected.has_word(literal)
        uses = name_use_regex(literal)
        if accepted is not None:
            in_accepted = accepted.has_word(literal)
            positive = _used(accepted, uses, literal) and not _used(corrected, uses, literal)
            negative = in_corrected and not in_accepted
        else:
            positive = not negated and not _used(corrected, uses, literal)
            negative = negated and in_corrected
        if positive:
            checks.append(Check(op="contains", value=literal, origin=origin, rule=rule) if uses is None
                          else Check(op="regex", value=uses, origin=origin, rule=rule))
        elif negative:
            checks.append(Check(op="regex", value=negative_word_regex(literal), origin=origin, rule=rule))
        if len(checks) >= MAX_EVIDENCE_LITERALS:
            break
    return checks
