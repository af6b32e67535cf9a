"""Write Claude Code 2.1 transcripts for tests: one session per conversation (request, answer, correction, fix).

Shared by the unit and integration tests (``tests/`` is on ``sys.path`` through the root ``conftest.py``).
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

PNPM_CORRECTION = "no, we use pnpm in this repo, never npm"
#: Eight requests about "this repo" answered with npm and corrected with ``PNPM_CORRECTION``, as
#: ``(request, answer, correction)`` for ``write_claude_sessions``.
PNPM_CONVERSATIONS = [
    (request, f"Run `npm {command}`.", PNPM_CORRECTION) for request, command in [
        ("install the deps for this repo", "install"),
        ("add lodash to this repo", "install lodash"),
        ("how do I run the tests in this repo", "test"),
        ("update the dependencies of this repo", "update"),
        ("start the dev server of this repo", "run dev"),
        ("remove the unused left-pad package from this repo", "uninstall left-pad"),
        ("build this repo for production", "run build"),
        ("audit this repo for vulnerable dependencies", "audit"),
    ]
]


#: Three requests corrected without saying why ("no, that is not how we do it here"): nothing in the user's words
#: gives a check, so these are the tasks the LLM miner is asked about (``mine.wants_miner``).
UNEXPLAINED_CONVERSATIONS = [
    (request, f"Run `npm {command}`.", "no, that is not how we do it here") for request, command in [
        ("clean the build cache of this repo", "cache clean --force"),
        ("list the outdated packages of this repo", "outdated"),
        ("publish the web package of this repo", "publish"),
    ]
]


def write_claude_sessions(claude_home: Path, project: Path, conversations: list[tuple[str, str, str]], *,
                          hours_ago: float = 3.0, fixed_answer: str = "Sorry, fixed.") -> Path:
    """Write one Claude Code 2.1 session per ``(request, answer, correction)``; return the project folder.

    Session ids and record uuids are fixed (derived from the conversation index), so task ids and the
    train/val/test split they hash to are the same on every run.
    """
    folder = claude_home / "projects" / str(project).replace("/", "-")
    folder.mkdir(parents=True, exist_ok=True)
    start = datetime.now(timezone.utc) - timedelta(hours=hours_ago)
    for number, (request, answer, correction) in enumerate(conversations):
        session_id = str(uuid.UUID(int=number + 1))
        moment = start + timedelta(minutes=10 * number)
        parent, lines = None, []
        turns = (("user", request), ("assistant", answer), ("user", correction), ("assistant", fixed_answer))
        for turn, (role, text) in enumerate(turns):
            moment += timedelta(seconds=20)
            record_id = str(uuid.UUID(int=(number + 1) * 1000 + turn))
            record = {"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": str(project),
                      "sessionId": session_id, "version": "2.1.80", "type": role, "uuid": record_id,
                      "entrypoint": "cli", "timestamp": moment.isoformat().replace("+00:00", "Z")}
            if role == "user":
                record["message"] = {"role": "user", "content": text}
            else:
                record["message"] = {"role": "assistant", "id": f"msg_{record_id[-8:]}", "model": "claude-sonnet",
                                     "content": [{"type": "text", "text": text}], "stop_reason": "end_turn"}
            lines.append(json.dumps(record))
            parent = record_id
        (folder / f"{session_id}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder
