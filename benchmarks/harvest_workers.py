"""How the harvest's worker processes pay off: one loop, forked workers, and workers started by a forkserver.

Each run is a fresh process that loads the config and times one ``harvest_for_config`` call (the harvest alone: no
mining, no output) on a corpus, in one of three ways:

* one loop (``harvest_workers = 1``) with another thread running, as ``run-now`` reads on a terminal before;
* forkserver: ``harvest_workers = N`` with another thread running (``harvest/workers.py`` then has a forkserver
  start the workers; it costs about 0.15 s once per process);
* fork: ``harvest_workers = N`` with no other thread (cron, systemd, the ``harvest`` command).

It sets ``FORKSERVER_MIN_BYTES`` (``harvest/workers.py``): from how many bytes the forkserver beats one loop.

    python benchmarks/harvest_workers.py --corpus claude:/tmp/hb/real-corpus/claude \\
        --corpus codex:/tmp/hb/real-corpus/codex --runs 5

``--corpus SOURCE:HOME`` (repeatable) is a source name and its root, e.g. the corpora ``benchmarks/harvest.py``
writes (``--real-out``, ``--out``). Prints a markdown table of medians; ``--json FILE`` writes every time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: One timed harvest in a fresh process: argv = source, home, workers, "thread" or "alone"; prints seconds.
RUN = """
import sys, threading, time
from pathlib import Path
from skillopt_sleep.config import load_config
from skillopt_sleep.harvest import harvest_for_config, workers

# This script guards its main code, so a forkserver's workers may import it again (harvest/workers.py allows that only
# for the skillopt-sleep command line by default).
workers._main_is_ours = lambda: True


def run():
    source, home, count, thread = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "thread"
    config = load_config(None, cli_overrides={"source": source, f"{source}_home": home, "lookback_hours": 0,
                                              "scope": "all", "harvest_workers": count})
    stop = threading.Event()
    if thread:
        threading.Thread(target=stop.wait, daemon=True).start()
    started = time.perf_counter()
    result = harvest_for_config(config, project=Path(home), checkpoints={})
    print(time.perf_counter() - started, len(result.sessions))
    stop.set()


if __name__ == "__main__":  # a forkserver's workers import __main__ again
    run()
"""

#: (label, workers: None = --workers, whether another thread runs)
MODES = (("one loop, beside a thread", 1, True), ("forkserver, beside a thread", None, True),
         ("fork, alone", None, False))


def corpus_bytes(home: Path) -> int:
    return sum(path.stat().st_size for path in home.rglob("*") if path.is_file())


def time_run(script: Path, source: str, home: str, workers: int, thread: bool, env: dict[str, str]) -> float:
    done = subprocess.run([sys.executable, str(script), source, home, str(workers), "thread" if thread else "alone"],
                          env=env, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{source} {home}: exit {done.returncode}\n{done.stderr[-3000:]}")
    return float(done.stdout.split()[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", action="append", required=True, metavar="SOURCE:HOME",
                        help="a source name and its root (repeatable)")
    parser.add_argument("--runs", type=int, default=5, help="runs per mode, interleaved (median kept)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes of the two worker modes")
    parser.add_argument("--json", dest="json_path", default=None, help="write every time here")
    args = parser.parse_args(argv)
    env = {key: value for key, value in os.environ.items() if not key.startswith("SKILLOPT_SLEEP_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as an installed package: byte code cached
    env.setdefault("PYTHONPYCACHEPREFIX", os.path.join(tempfile.gettempdir(), "skillopt-harvest-pycache"))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    times: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="skillopt-workers-") as work:
        script = Path(work) / "run_harvest.py"
        script.write_text(RUN)
        env["HOME"] = work
        for corpus in args.corpus:
            source, _, home = corpus.partition(":")
            for label, workers, thread in MODES:  # warm-up: page cache and byte code
                time_run(script, source, home, workers or args.workers, thread, env)
            for _ in range(args.runs):
                for label, workers, thread in MODES:
                    seconds = time_run(script, source, home, workers or args.workers, thread, env)
                    times.setdefault(corpus, {}).setdefault(label, []).append(seconds)
    print(f"# harvest_for_config, fresh process per run, median of {args.runs}, {args.workers} workers; "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    print("| corpus | MB | " + " | ".join(label for label, _, _ in MODES) + " | forkserver's speed-up over one loop |")
    print("|---|---:|" + "---:|" * (len(MODES) + 1))
    for corpus, rows in times.items():
        medians = [statistics.median(rows[label]) for label, _, _ in MODES]
        size = corpus_bytes(Path(corpus.partition(":")[2])) / 1e6
        print(f"| {corpus} | {size:.0f} | " + " | ".join(f"{m:.3f}" for m in medians)
              + f" | {medians[0] / medians[1]:.2f}x |")
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(times, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
