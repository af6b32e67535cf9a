"""Does the order of the learned lines change what the target follows? A world's held-out probes, all of them,
answered with the same rule lines in the memory's managed block in each order given, at temperature 0.

Each ``--order LABEL=LINE||LINE||...`` is written into the world's initial memory as a night writes its lines (in
the order given), and every probe is scored with the checkers of the rules in force after ``--night``. One client
on the server: a llama.cpp server shared with another client does not answer twice alike (docs/benchmarks.md).

Usage (a llama.cpp server on 127.0.0.1):

    python benchmarks/line_order.py --world 2 --night 3 --base-url http://127.0.0.1:18432/v1 \\
        --order 'written=- Use `logger`, never `print`.||- Use `uv add`, never `pip`.' \\
        --order 'newest=- Use `uv add`, never `pip`.||- Use `logger`, never `print`.'
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import benchmarks.learning as learning  # noqa: E402
from benchmarks.rule_lines import memory_with  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world", type=int, choices=sorted(learning.WORLDS), required=True)
    parser.add_argument("--night", type=int, default=1, help="score with the rules in force after this night")
    parser.add_argument("--order", action="append", required=True, metavar="LABEL=LINE||LINE...")
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    world = learning.WORLDS[args.world]
    learning.world = world  # score_documents scores with the module's world
    results = {}
    print("| order | compliance | by rule |")
    print("|---|---:|---|")
    for item in args.order:
        label, _, lines = item.partition("=")
        scored = learning.score_documents(args.base_url, "", memory_with(world, lines.split("||")), world.PROBES,
                                          night=args.night)
        results[label] = scored
        by_rule = ", ".join(f"{rule} {passed}" for rule, passed in scored["by_rule"].items())
        print(f"| {label} | {scored['compliance']:.0%} | {by_rule} |", flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
