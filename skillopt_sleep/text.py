"""Text as every layer reads it: the one normal form, word tokens, stopwords, and a short head of a long text.

* ``normalize(text)``: the one normal form every screen reads text in: NFKC, without format characters. A screen
  that matches raw text can be walked around with letters that look the same and are not: fullwidth forms
  (``ｃｕｒｌ``), a zero-width space inside a word (``cu\u200brl``), a soft hyphen, a bidi override. ``normalize``
  folds the first to ASCII (Unicode NFKC compatibility decomposition) and drops the rest (every character of general
  category ``Cf``, "format"). The provenance screen, the restatement and placeholder checks and the replay-marker
  check all match on ``normalize(text)``, so what they see is what the model reads.
* ``mixed_script_words(text)``: what NFKC cannot fold is a letter of another script that looks like a Latin one
  (Cyrillic ``с`` in ``сurl``); the provenance screen treats each word that mixes scripts as a token the user must
  have typed (``docs/security.md``).
* ``words(text)`` / ``content_words(text)``: word tokens of a text, and the ones that carry meaning (not a
  ``STOPWORDS`` word, 3+ characters): the restatement screens, archive recall, the mock.
* ``head(text, limit)``: the text on one line, cut to ``limit`` characters with ``...`` (what a prompt or a context
  section quotes of a long request or answer).
"""

from __future__ import annotations

import re
import unicodedata

# --------------------------------------------------------------------------- the normal form

_SCRIPT_WORD = re.compile(r"\w+")


def normalize(text: str) -> str:
    """``text`` in NFKC with every format character (category Cf: zero-width spaces and joiners, soft hyphen, bidi
    controls, BOM) removed. Idempotent; ASCII text comes back unchanged."""
    if text.isascii():
        return text
    folded = unicodedata.normalize("NFKC", text)
    return "".join(char for char in folded if unicodedata.category(char) != "Cf")


def script_of(char: str) -> str | None:
    """The script of a letter, from its Unicode name's first word (``LATIN``, ``CYRILLIC``, ``GREEK``, ``CJK``, ...);
    None for a character that is not a letter (digits, ``_``, marks)."""
    if not char.isalpha():
        return None
    name = unicodedata.name(char, "")
    return name.split(" ", 1)[0] if name else None


def mixed_script_words(text: str) -> list[str]:
    """The words of ``normalize(text)`` whose letters come from more than one script (``сurl`` with a Cyrillic
    ``с``), in order of appearance, each once. Japanese text mixing kana and kanji is one writing system and is not
    reported (``HIRAGANA``, ``KATAKANA`` and ``CJK`` count as one script)."""
    found: list[str] = []
    for word in _SCRIPT_WORD.findall(normalize(text)):
        if word.isascii():
            continue
        scripts = {_JAPANESE.get(script, script) for char in word if (script := script_of(char))}
        if len(scripts) > 1 and word not in found:
            found.append(word)
    return found


_JAPANESE = {"HIRAGANA": "CJK", "KATAKANA": "CJK", "HANGUL": "CJK",
             "KATAKANA-HIRAGANA": "CJK", "IDEOGRAPHIC": "CJK"}  # ``コード``'s ``ー``, ``時々``'s ``々``

# --------------------------------------------------------------------------- words

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

# --------------------------------------------------------------------------- a head of a long text


def head(text: str | None, limit: int) -> str:
    """``text`` on one line (every run of whitespace one space; None is ""), cut to at most ``limit`` characters:
    a longer text keeps its first ``limit - 3`` characters, trailing spaces stripped, and ends with ``...``."""
    flat = " ".join((text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 3].rstrip() + "..."
