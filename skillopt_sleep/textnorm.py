"""The one normal form every screen reads text in: NFKC, without format characters.

A screen that matches raw text can be walked around with letters that look the same and are not: fullwidth forms
(``ｃｕｒｌ``), a zero-width space inside a word (``cu\u200brl``), a soft hyphen, a bidi override. ``normalize`` folds
the first to ASCII (Unicode NFKC compatibility decomposition) and drops the rest (every character of general
category ``Cf``, "format"). The provenance screen, the restatement and placeholder checks and the replay-marker check
all match on ``normalize(text)``, so what they see is what the model reads.

What NFKC cannot fold is a letter of another script that looks like a Latin one (Cyrillic ``с`` in ``сurl``).
``mixed_script_words`` finds words that mix scripts; the provenance screen treats each as a token the user must have
typed (``docs/security.md``).
"""

from __future__ import annotations

import re
import unicodedata

_WORD = re.compile(r"\w+")


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
    for word in _WORD.findall(normalize(text)):
        if word.isascii():
            continue
        scripts = {_JAPANESE.get(script, script) for char in word if (script := script_of(char))}
        if len(scripts) > 1 and word not in found:
            found.append(word)
    return found


_JAPANESE = {"HIRAGANA": "CJK", "KATAKANA": "CJK", "HANGUL": "CJK",
             "KATAKANA-HIRAGANA": "CJK", "IDEOGRAPHIC": "CJK"}  # ``コード``'s ``ー``, ``時々``'s ``々``
