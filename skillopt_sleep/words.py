"""Word tokens of a text, and the ones that carry meaning (the restatement screens, archive recall, the mock)."""

from __future__ import annotations

import re

STOPWORDS = frozenset(
    "a an and are as at be been but by can could do does for from had has have he her his how i if in into is it "
    "its me my of on or our should so than that the their them then there these they this those to too us was we "
    "were what when where which while who why will with would you your yours also just only any all each every "
    "some such here".split()
)

_WORD = re.compile(r"[a-z0-9_]+(?:['.-][a-z0-9_]+)*")


def words(text: str) -> list[str]:
    """Lower-cased word tokens of ``text`` (letters, digits, ``_``; inner ``'.-`` kept: ``don't``, ``v1.2``)."""
    return _WORD.findall(text.lower())


def content_words(text: str) -> set[str]:
    """Distinct words of ``text`` that carry meaning: not a stopword, at least 3 characters."""
    return {word for word in words(text) if word not in STOPWORDS and len(word) >= 3}
