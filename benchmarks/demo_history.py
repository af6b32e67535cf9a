"""Write the README's demo history: ``examples/demo-home``, a developer who teaches two house rules.

The sessions are real-format Claude Code 2.1.x JSONL (FORMATS.md §1), written by ``world.session_records``: each is
a request, the answer an unguided model gives, the user's correction in their own words, and the agent's fixed
answer. Two rules (``world.RULES``): pnpm, never npm; ISO dates (YYYY-MM-DD). ``SESSIONS`` picks which of
``world.NIGHTS``' conversations the demo holds (all on one day, 25 minutes apart), so that README command 1 learns
both rules in one night at the default settings (docs/benchmarks.md, "README command 1").

    python benchmarks/demo_history.py [--out examples/demo-home]

Deterministic: session ids, record ids and times depend only on the conversation's position.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import world  # noqa: E402

#: The demo project's working directory, as the sessions record it (no real user's path).
PROJECT = Path("/home/demo/webshop")
#: (night, index) of each conversation in ``world.NIGHTS`` that the demo holds.
SESSIONS = [(1, 0), (1, 2), (2, 0), (2, 2), (1, 1), (3, 0), (3, 2), (3, 3)]


def write_demo(out: Path) -> list[Path]:
    """Write the demo sessions under ``<out>/projects/<sanitized PROJECT>/``; return the files written."""
    folder = out / "projects" / world.sanitized_cwd(PROJECT)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for number, (night, index) in enumerate(SESSIONS):
        conversation = world.NIGHTS[night - 1][index]
        session_id = str(uuid.UUID(int=7000 + number))
        start = world.night_day(1) + timedelta(hours=9, minutes=25 * number)
        records = world.session_records(conversation, session_id=session_id, project=PROJECT, start=start,
                                        id_seed=7000 + number)
        path = folder / f"{session_id}.jsonl"
        path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
        written.append(path)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "examples" / "demo-home")
    args = parser.parse_args()
    for path in write_demo(args.out):
        print(path)


if __name__ == "__main__":
    main()
