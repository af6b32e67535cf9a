"""A user message as clauses: sentence-like parts, and the discourse words that only frame them.

* ``split_clauses(text)``: lines, then sentences (``. ! ? ;``), without fenced blocks or list bullets (an indented
  line is a clause like any other: what was pasted is ``typed.typed_text``'s to leave out);
* ``strip_frame(clause)``: without "No," / "Please" / "I said" / a short label / a polite "Could you please ...?"
  around an instruction, and without end punctuation;
* ``is_question(clause)``: ends with "?" or opens like a question.
"""

from __future__ import annotations

import re

_FENCED_CODE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)


_BULLET = re.compile(r"^(?:[-*+•>]|\d+[.)])\s+")


_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|(?<=[。！？；])")


def clean_quotes(text: str) -> str:
    return text.replace("\u2019", "'").replace("\u2018", "'").replace("\u201c", '"').replace("\u201d", '"')


def split_clauses(text: str) -> list[str]:
    """Split a message into sentence-like clauses (lines, then ``. ! ? ;``), without code blocks or bullets."""
    return [clause for line in clause_lines(text) for clause in line]


def clause_lines(text: str) -> list[list[str]]:
    """``split_clauses`` line by line: the clauses of each non-empty line of ``text``, in order."""
    text = _FENCED_CODE.sub("\n", clean_quotes(text or ""))
    lines = []
    for line in text.splitlines():
        line = _BULLET.sub("", line.strip()).strip()
        clauses = [part.strip() for part in _SENTENCE_END.split(line) if part.strip()]
        if clauses:
            lines.append(clauses)
    return lines


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


CONTRASTIVE_RULE = re.compile(r"\b(?:not|instead|rather than|never|don't|do not|avoid|stop)\b", re.IGNORECASE)


def strip_frame(clause: str) -> str:
    """Drop the discourse words that only frame a clause ("No,", "Please", "I said", a short label such as
    "wrong tool:", a polite "Could you please ...?" around an instruction) and end punctuation."""
    stripped = _FRAME.sub("", clause.strip()).strip()
    labelled = _LABEL.match(stripped)
    if labelled and len(stripped[: labelled.end()].split()) <= 3:
        stripped = _FRAME.sub("", stripped[labelled.end():]).strip()
    polite = _POLITE.match(stripped)
    if polite and CONTRASTIVE_RULE.search(stripped[polite.end():]):
        # "Could you please use httpx instead of requests?" corrects; "Can you use pnpm?" only asks
        stripped = stripped[polite.end():].rstrip(" ?")
    return stripped.rstrip(" .!;")


_KEPT_FRAME = re.compile(r"\b(?:remember(?: to| that)?|always remember to|from now on|going forward|in general|"
                         r"in the future|for the future|make sure (?:to|that|you)|be sure to|you should|you must|"
                         r"you need to|you have to)\b", re.IGNORECASE)
"""Frame words that make a clause an instruction or say that it lasts: ``strip_frame`` drops them to read the rule's
form, ``statement`` keeps them (they are part of what the user taught)."""


def statement(clause: str) -> str:
    """``clause`` as a rule statement in the user's words: ``strip_frame``, except that frame words which make it an
    instruction or say it lasts ("Make sure you ...", "From now on ...", "You must ...") stay ("No, from now on use
    pnpm" -> "from now on use pnpm"; "Please make sure you configure the namespace" -> "make sure you configure the
    namespace")."""
    bare = strip_frame(clause)
    head = clause.strip()
    end = head.rfind(bare) if bare else -1
    marker = _KEPT_FRAME.search(head, 0, end) if end > 0 else None
    return head[marker.start():end] + bare if marker else bare


_QUESTION_START = re.compile(
    r"^(?:why|what|how|when|where|which|who|whom|whose|can|could|would|will|shall|should|do|does|did|is|are|was|"
    r"were|am|have|has|had|may|might|isn't|aren't|doesn't|didn't|won't|wouldn't|shouldn't|couldn't)\b"
    r"(?!\s+not\b|\s+NOT\b)",  # "Do not ..." / "Do NOT ..." is a prohibition, not a question
    re.IGNORECASE,
)


def is_question(clause: str) -> bool:
    return clause.rstrip().endswith("?") or bool(_QUESTION_START.match(clause.strip()))
