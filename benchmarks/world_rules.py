"""What a mining change does to the learning worlds: the rules each night's sessions state, mined by this tree (or
``--tree``), without an LLM.

For each world of ``benchmarks/learning.py`` and each night, the sessions of nights 1..N are written to a scratch
Claude Code home, harvested and mined (deterministic reader) as a night would, and the rules are listed with their
scope and its reason (``mine.rulebook.stated_rules``). Two runs, before and after a change, diffed, show whether the
change moves what the learning benchmark's nights may propose (a lasting rule gained or lost) or only what waits.

    python benchmarks/world_rules.py > /tmp/after.txt
    python benchmarks/world_rules.py --tree /tmp/before > /tmp/before.txt    # an older checkout
    diff /tmp/before.txt /tmp/after.txt
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
#: Another checkout's ``skillopt_sleep`` to mine with (``--tree DIR``, read before anything is imported).
TREE = next((sys.argv[i + 1] for i, arg in enumerate(sys.argv[:-1]) if arg == "--tree"), str(REPO_ROOT))
sys.path.insert(0, TREE)
sys.path.insert(1, str(REPO_ROOT))

from benchmarks import world as world1  # noqa: E402
from benchmarks import world2, world3  # noqa: E402

WORLDS = {1: world1, 2: world2, 3: world3}


def world_rules(world, nights: int, *, candidates: bool = True) -> list[str]:
    """One line per night and per rule: ``scope stated text | reason`` (one-offs left out)."""
    from skillopt_sleep.harvest import harvest
    from skillopt_sleep.mine import mine_tasks
    from skillopt_sleep.mine.rulebook import stated_rules

    lines = []
    with tempfile.TemporaryDirectory() as scratch:
        home, project = Path(scratch) / "claude", Path(scratch) / "project"
        project.mkdir()
        for night in range(1, nights + 1):
            world.write_night_sessions(home, project, night)
            harvested = harvest(source="claude", scope="all", homes={"claude": home}, lookback_hours=0, workers=1)
            mined = mine_tasks(harvested.sessions, project=None, val_fraction=0.0, test_fraction=0.0,
                               max_tasks=10_000)
            rules = stated_rules([task.model_copy(update={"split": "train"}) for task in mined.tasks])
            lines.append(f"night {night}: {len(mined.tasks)} tasks")
            lines += [f"  {rule.scope} {rule.stated}x {rule.text} | {rule.scope_reason}" for rule in rules
                      if rule.scope == "lasting" or (candidates and rule.scope == "candidate")]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world", type=int, action="append", choices=sorted(WORLDS),
                        help="a world (repeatable; default: all)")
    parser.add_argument("--tree", help="mine with another checkout's skillopt_sleep")
    parser.add_argument("--lasting-only", action="store_true", help="leave out the candidates that wait")
    args = parser.parse_args(argv)
    for number in args.world or sorted(WORLDS):
        world = WORLDS[number]
        print(f"## world {number}")
        for line in world_rules(world, len(world.NIGHTS), candidates=not args.lasting_only):
            print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
