"""Document texts kept by sha256 in the project state dir (``<state dir>/documents/<sha256>``, mode 0600).

The archive features need documents again on a later night: the slow update replays the documents of N nights
ago, and a pending candidate is re-tested with the texts it was proposed with. ``ProjectState`` stores only
hashes; the texts live here, written atomically, deduplicated by content. ``prune`` removes the texts no hash
in the state refers to any more.
"""

from __future__ import annotations

import re
from pathlib import Path

from skillopt_sleep.fsio import write_text_atomic
from skillopt_sleep.hashing import sha256_text

_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class DocumentStore:
    """Texts by sha256 under ``root`` (created 0700 on the first ``put``)."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def put(self, text: str) -> str:
        """Store ``text`` (once per content) and return its sha256."""
        digest = sha256_text(text)
        path = self.root / digest
        if not path.exists():
            self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
            write_text_atomic(path, text, mode=0o600)
        return digest

    def get(self, digest: str) -> str | None:
        """The stored text of ``digest``; None when it is missing, unreadable or does not match its hash."""
        if not _SHA256.match(digest or ""):
            return None
        try:
            text = (self.root / digest).read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        return text if sha256_text(text) == digest else None

    def prune(self, keep: set[str]) -> list[str]:
        """Delete stored texts whose hash is not in ``keep``; returns the deleted hashes (sorted)."""
        if not self.root.is_dir():
            return []
        deleted = []
        for path in sorted(self.root.iterdir()):
            if _SHA256.match(path.name) and path.name not in keep:
                path.unlink(missing_ok=True)
                deleted.append(path.name)
        return deleted
