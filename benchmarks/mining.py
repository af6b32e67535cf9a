"""Mining speed: ``mine_for_config`` on harvested corpora, and near-duplicate grouping as the requests grow.

Two measures, each in a fresh process per run, this tree and (``--compare``) another one interleaved in the same
rounds, so a change in the machine's load hits both alike:

* ``mine``: a corpus is harvested (not timed), then ``mine_for_config`` is timed on it: every request of every
  session goes through the reaction and rule parsers, duplicates are grouped, and the checks are validated against
  the sessions' answers. A corpus is ``SOURCE:HOME[:PROJECT]`` (``claude:/tmp/corpus-full/claude``: scope ``all``;
  with a project, scope ``project``), e.g. the corpora ``benchmarks/harvest.py`` writes.
* ``group``: ``mine._group_duplicates`` on N distinct requests (seeded: 4-30 words of a 3,000-word vocabulary mixed
  with common words), the worst case for grouping (every request its own group).

    python benchmarks/mining.py --corpus claude:/tmp/corpus-full/claude --corpus codex:/tmp/corpus-full/codex
    python benchmarks/mining.py --group 1000,4000,16000 --compare /tmp/before   # a 'git archive' of an older commit
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

_WORKER = "--worker"


def _worker(kind: str, spec: str) -> float:
    """In the timed process: seconds of one measure (``kind`` ``mine`` or ``group``)."""
    import random
    import time
    from datetime import datetime, timedelta, timezone

    if kind == "group":
        from skillopt_sleep.mine.candidates import Candidate
        from skillopt_sleep.mine.duplicates import group_duplicates

        rng = random.Random(7)
        vocabulary = [f"w{index}" for index in range(3000)] + "the a to in of and fix add use test file".split() * 50
        start = datetime(2026, 11, 1, tzinfo=timezone.utc)
        candidates = [Candidate(source="claude", session_id="s", kind="prompt", seen_at=start + timedelta(seconds=i),
                                 request=" ".join(rng.choice(vocabulary) for _ in range(rng.randint(4, 30))))
                      for i in range(int(spec))]
        began = time.perf_counter()
        group_duplicates(candidates)
        return time.perf_counter() - began
    from skillopt_sleep.config import load_config
    from skillopt_sleep.harvest import harvest_for_config
    from skillopt_sleep.mine import mine_for_config

    source, home, *project = spec.split(":")
    overrides = {"source": source, f"{source}_home": home, "lookback_hours": 0,
                 "scope": "project" if project else "all"}
    config = load_config(None, cli_overrides=overrides)
    where = project[0] if project else str(Path(home).parent)
    result = harvest_for_config(config, project=Path(where), checkpoints={})
    began = time.perf_counter()
    mine_for_config(result, config, project=where)
    return time.perf_counter() - began


def _run(tree: Path | None, kind: str, spec: str) -> float:
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(tree), *filter(None, [env.get("PYTHONPATH")])])
    done = subprocess.run([sys.executable, __file__, _WORKER, kind, spec], env=env, capture_output=True, text=True,
                          check=True)
    return float(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == [_WORKER]:
        print(_worker(argv[1], argv[2]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", action="append", default=[], help="SOURCE:HOME[:PROJECT] to mine (repeatable)")
    parser.add_argument("--group", default="", help="request counts to group, comma-separated (e.g. 1000,4000)")
    parser.add_argument("--runs", type=int, default=3, help="runs per measure and tree (default 3)")
    parser.add_argument("--compare", type=Path, help="also run from this source tree, interleaved")
    parser.add_argument("--json", type=Path, help="write the raw times here")
    args = parser.parse_args(argv)
    cases = [("mine", spec) for spec in args.corpus] + [("group", n) for n in filter(None, args.group.split(","))]
    if not cases:
        parser.error("nothing to measure: give --corpus and/or --group")
    trees: dict[str, Path | None] = {"this tree": None}
    if args.compare is not None:
        trees["@compare"] = args.compare
    times: dict[str, dict[str, list[float]]] = {f"{kind} {spec}": {name: [] for name in trees} for kind, spec in cases}
    for _ in range(args.runs):
        for kind, spec in cases:
            for name, tree in trees.items():
                times[f"{kind} {spec}"][name].append(_run(tree, kind, spec))
    load = os.getloadavg() if hasattr(os, "getloadavg") else ("?",) * 3
    print(f"# mining, median of {args.runs} (fresh process each); {platform.machine()}, {os.cpu_count()} CPUs, "
          f"load {load[0]:.2f}, Python {platform.python_version()}")
    compare = " | @compare s | speed-up" if args.compare else ""
    print(f"| measure | this tree s{compare} |")
    print("|---|---:|" + ("---:|---:|" if args.compare else ""))
    for label, by_tree in times.items():
        ours = statistics.median(by_tree["this tree"])
        row = f"| {label} | {ours:.3f}"
        if args.compare:
            theirs = statistics.median(by_tree["@compare"])
            row += f" | {theirs:.3f} | {theirs / ours:.2f}x"
        print(row + " |")
    if args.json:
        args.json.write_text(json.dumps(times, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
