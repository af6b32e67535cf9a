"""Tolerant extraction of one JSON value from a model's reply (shared by every backend and by reflect).

Models asked for JSON often wrap it: a ```json fence, a sentence before it, a ``<think>`` block, a trailing
remark. ``extract_json`` finds the first JSON object or array in such text, or says there is none.
"""

from __future__ import annotations

import json
import re
from typing import Any

_FENCE = re.compile(r"```[ \t]*(?:json[c5]?|JSON)?[ \t]*\r?\n(.*?)```", re.DOTALL)
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
#: Most opening brackets tried when scanning free text (bounds the work on long, brace-heavy replies).
_MAX_CANDIDATES = 200

_decoder = json.JSONDecoder()


def _as_container(value: Any) -> dict | list | None:
    return value if isinstance(value, (dict, list)) else None


def _parse_whole(text: str) -> dict | list | None:
    try:
        return _as_container(json.loads(text))
    except ValueError:
        return None


def _first_balanced(text: str) -> dict | list | None:
    """Return the first ``{...}`` or ``[...]`` that decodes as JSON, scanning left to right."""
    tried = 0
    for match in re.finditer(r"[{\[]", text):
        if tried >= _MAX_CANDIDATES:
            break
        tried += 1
        try:
            value, _end = _decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        found = _as_container(value)
        if found is not None:
            return found
    return None


def extract_json(text: str) -> dict | list | None:
    """Return the first JSON object or array in ``text``, or None when there is none.

    Tried in order: the whole text; the body of each fenced code block (```json ... ``` or ``` ... ```);
    the first ``{`` or ``[`` from which a complete JSON value decodes (brackets inside JSON strings are
    handled by the decoder). ``<think>...</think>`` blocks are ignored. Scalars (``42``, ``"x"``) are not
    returned: the callers want a structure. Never raises.
    """
    if not text or not isinstance(text, str):
        return None
    cleaned = _THINK.sub("", text).strip()
    found = _parse_whole(cleaned)
    if found is not None:
        return found
    for fence in _FENCE.finditer(cleaned):
        found = _parse_whole(fence.group(1).strip())
        if found is not None:
            return found
    return _first_balanced(cleaned)
