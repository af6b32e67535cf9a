"""The one content hash of a text: hex sha256 of its UTF-8 bytes (documents, staged proposals, the document store)."""

from __future__ import annotations

import hashlib


def sha256_text(text: str) -> str:
    """Return the hex sha256 of ``text`` encoded as UTF-8."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
