"""How much do the words of the rules matter to the target? The memory a learning run wrote against the world's rules
written perfectly.

Each world's session requests of nights 1..N (the train side of the learning benchmark; never the held-out probes)
are answered at temperature 0 with (a) the CLAUDE.md a run of ``benchmarks/learning.py`` left after night N (the
user's rules in the user's words) and (b) the world's rules written as well as we can (``world.perfect_rules``), at
each ``--max-tokens``; each answer is scored by the checker of its session's rule in force that night.

Usage (a llama.cpp server on 127.0.0.1; a result file of learning.py):

    python benchmarks/rule_wording.py --world 1 --results /tmp/w1.json --night 3 --base-url http://127.0.0.1:18432/v1
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.learning import WORLDS, chat  # noqa: E402
from benchmarks.target_prompt import memory_for, requests_of  # noqa: E402
from skillopt_sleep.engine.replay import system_prompt  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world", type=int, choices=sorted(WORLDS), required=True)
    parser.add_argument("--results", type=Path, required=True, help="a learning.py --json file (its last result)")
    parser.add_argument("--night", type=int, required=True)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--max-tokens", type=int, nargs="+", default=[80, 400])
    args = parser.parse_args(argv)
    world = WORLDS[args.world]
    run = json.loads(args.results.read_text("utf-8"))[-1]
    written = next(row["memory"] for row in run["nights"] if row["night"] == args.night)
    items = [item for item in requests_of(world) if item[2] <= args.night]
    print("| memory | max_tokens | session requests passed |")
    print("|---|---:|---:|")
    for label, memory in ((f"written by the run (night {args.night})", written),
                          ("the rules written perfectly", memory_for(world, args.night))):
        for max_tokens in args.max_tokens:
            passed = 0
            for request, rule, night in items:
                answer = chat(args.base_url, system_prompt("", memory), request, max_tokens=max_tokens)["text"]
                passed += int(world.score_probe(type("P", (), {"rule": rule})(), answer, night))
            print(f"| {label} | {max_tokens} | {passed} / {len(items)} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
