"""What does the provenance screen cost learning? Its verdict on every edit the learning runs proposed.

For each learning result (``benchmarks/learning.py --json``) and each of its nights N, the world's sessions of
nights 1..N are written as Claude Code transcripts, harvested and mined by the real pipeline (``harvest``,
``mine_tasks``), and the user-authored text of those tasks, their stated rules and the documents the run held
before night N make the ``provenance.UserText``. Every edit the run proposed on night N (applied or not, the
optimizer's and the users' own) is screened with ``provenance.provenance_reason``; so are the world's rules written
"perfectly" (``perfect_rules``: what the ceiling's memory holds, with concrete commands and imports), as if an
optimizer had proposed them on the last night. Nothing is replayed: no model is needed.

Usage::

    python benchmarks/provenance_screen.py --results 1=/tmp/learn/w1-main.json --results 2=/tmp/learn/w2-main.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.learning import WORLDS  # noqa: E402
from skillopt_sleep.harvest import harvest  # noqa: E402
from skillopt_sleep.mine import mine_tasks  # noqa: E402
from skillopt_sleep.mine.provenance import UserText, provenance_reason  # noqa: E402


def user_text(world, night: int, documents: list[str]) -> UserText:
    """The UserText a night ``night`` of ``world`` would build: its tasks of nights 1..night, their rules, and
    ``documents``."""
    with tempfile.TemporaryDirectory() as scratch:
        claude_home, project = Path(scratch) / "claude", Path(scratch) / "project"
        project.mkdir()
        for number in range(1, night + 1):
            world.write_night_sessions(claude_home, project, number)
        sessions = harvest(source="claude", claude_home=claude_home, scope="all", lookback_hours=0).sessions
        tasks = mine_tasks(sessions, project=str(project), val_fraction=0.3, test_fraction=0.15).tasks
    return UserText.of_tasks(tasks, rules=[rule.text for task in tasks for rule in task.rules], documents=documents)


def screen_run(world_number: int, path: Path) -> list[dict]:
    world = WORLDS[world_number]
    run = json.loads(path.read_text("utf-8"))[-1]
    rows, memory = [], world.INITIAL_MEMORY
    nights = [row for row in run["nights"] if row["night"] > 0]
    for row in nights:
        text = user_text(world, row["night"], [memory, row.get("skill") or ""])
        for edit in row.get("edits") or []:
            content = edit.get("content") or ""
            if not content:
                continue
            reason = provenance_reason(content, text)
            rows.append({"world": world_number, "night": row["night"], "status": edit.get("status"),
                         "content": content, "blocked": reason})
        memory = row.get("memory") or memory
    last = nights[-1]["night"] if nights else 1
    text = user_text(world, last, [world.INITIAL_MEMORY])
    for rule in world.perfect_rules(last):
        rows.append({"world": world_number, "night": "perfect", "status": "-", "content": rule,
                     "blocked": provenance_reason(rule, text)})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", action="append", required=True, metavar="WORLD=FILE",
                        help="a world number and a learning.py --json file, e.g. 1=/tmp/w1.json (repeatable)")
    args = parser.parse_args(argv)
    rows: list[dict] = []
    for item in args.results:
        number, _, file = item.partition("=")
        rows += screen_run(int(number), Path(file))
    print("| world | proposed edits | blocked | blocked among applied | perfect rules blocked |")
    print("|---|---:|---:|---:|---:|")
    for number in sorted({row["world"] for row in rows}):
        proposed = [r for r in rows if r["world"] == number and r["night"] != "perfect"]
        perfect = [r for r in rows if r["world"] == number and r["night"] == "perfect"]
        print(f"| {number} | {len(proposed)} | {sum(1 for r in proposed if r['blocked'])} | "
              f"{sum(1 for r in proposed if r['blocked'] and r['status'] == 'applied')} of "
              f"{sum(1 for r in proposed if r['status'] == 'applied')} | "
              f"{sum(1 for r in perfect if r['blocked'])} of {len(perfect)} |")
    print()
    for row in rows:
        if row["blocked"]:
            print(f"- world {row['world']}, night {row['night']} ({row['status']}): {row['content'][:90]!r}: "
                  f"{row['blocked']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
