"""What the user typed in a message, as opposed to what they pasted into it.

``typed_text(message)``: the part rules and the names a correction mentions are read from; ``authored_text(message)``:
the part kept as ``TaskRecord.authored``, the provenance an edit's commands, URLs and paths must come from.
"""

from __future__ import annotations

import re

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


_FENCE = re.compile(r"^[ \t]*(```|~~~).*?^[ \t]*\1[^\n]*$", re.MULTILINE | re.DOTALL)


_OPEN_FENCE = re.compile(r"^[ \t]*(```|~~~).*\Z", re.MULTILINE | re.DOTALL)


_QUOTED_LINE = re.compile(r"^[ \t]*>.*$", re.MULTILINE)


_INDENTED_CODE = re.compile(r"^(?: {4}|\t).*$", re.MULTILINE)


#: Characters of one user-authored text kept (a longer one is cut).
AUTHORED_CHARS = 4000


def authored_text(message: str) -> str:
    """The part of one user message the user typed: ``rules.typed_text`` (a long paste keeps only its short first and
    last paragraphs), then fenced blocks, ``>`` quoted lines and indented code removed; cut to ``AUTHORED_CHARS``.
    message: a user message as harvested (already redacted)."""
    text = typed_text(message or "")
    text = _FENCE.sub("", text)
    text = _OPEN_FENCE.sub("", text)
    text = _QUOTED_LINE.sub("", text)
    text = _INDENTED_CODE.sub("", text)
    text = "\n".join(line.rstrip() for line in text.splitlines() if line.strip())
    return text[:AUTHORED_CHARS]
