"""Replay throughput against ``workers``: how to size one OpenAI-compatible endpoint a team shares.

A night's replays (train tasks, the gate's paired val replays) are independent chat calls; ``workers`` of them are in
flight at once (``engine/replay.Replayer``). When every member of a team points their nights at one endpoint (a vLLM
or llama.cpp server on the team's GPU box), what a night takes depends on how many calls that endpoint serves at once
and on how many each member sends.

This runs the product's own replay path (``OpenAIBackend`` -> ``CallMeter`` -> ``Replayer`` ->
``replay_tasks``, with its checks scored) against a **recording stand-in server** on 127.0.0.1: an HTTP server that
speaks ``/v1/chat/completions``, answers every request after a fixed latency, serves at most ``--slots`` requests at
once (a server's batch slots; more wait in its queue) and records how many were in flight. No model runs, so the
numbers are about concurrency, not about any model's speed:

* one member: replay wall time and tasks per second for each ``workers`` value, as a ratio to ``workers = 1``, and
  the most requests the server saw at once;
* a team: ``--members`` members replaying at the same time, each with the default ``workers``, against the same
  server: the slowest member's wall time against one member alone.

    python benchmarks/replay_throughput.py                       # 48 tasks, 0.25 s a call, 8 slots
    python benchmarks/replay_throughput.py --latency 0.5 --slots 16 --members 12 --json /tmp/throughput.json
    python benchmarks/replay_throughput.py --base-url http://127.0.0.1:18432/v1 --tasks 8   # a real server

With ``--base-url`` the same replays go to a real server instead of the stand-in (its model answers; the server
records nothing, so the peak in flight is not shown).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from skillopt_sleep.backends.base import CallMeter  # noqa: E402
from skillopt_sleep.backends.openai_compat import OpenAIBackend  # noqa: E402
from skillopt_sleep.config import SleepConfig  # noqa: E402
from skillopt_sleep.engine.replay import Replayer, replay_tasks  # noqa: E402
from skillopt_sleep.models import Check, Judge, TaskRecord  # noqa: E402

#: The replay ``workers`` a night uses by default.
DEFAULT_WORKERS: int = SleepConfig.model_fields["workers"].default


class StandIn:
    """A recording stand-in for an OpenAI-compatible server: each chat completion waits ``latency_s`` seconds in one
    of ``slots`` slots (more requests queue), then answers ``reply``. Records requests and the most in flight."""

    def __init__(self, *, latency_s: float, slots: int, reply: str = "Use pnpm add to install it."):
        self.latency_s, self.reply = latency_s, reply
        self._slots = threading.Semaphore(slots)
        self._lock = threading.Lock()
        self.in_flight = self.peak = self.requests = 0
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):  # /v1/models
                self._send({"object": "list", "data": [{"id": "stand-in", "object": "model"}]})

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with stand_in._lock:
                    stand_in.requests += 1
                    stand_in.in_flight += 1
                    stand_in.peak = max(stand_in.peak, stand_in.in_flight)
                try:
                    with stand_in._slots:
                        time.sleep(stand_in.latency_s)
                finally:
                    with stand_in._lock:
                        stand_in.in_flight -= 1
                self._send({"id": "c", "object": "chat.completion", "created": 0, "model": "stand-in",
                            "choices": [{"index": 0, "finish_reason": "stop",
                                         "message": {"role": "assistant", "content": stand_in.reply}}],
                            "usage": {"prompt_tokens": 50, "completion_tokens": 8, "total_tokens": 58}})

            def _send(self, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def reset(self) -> None:
        with self._lock:
            self.peak = self.requests = 0

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def tasks_of(count: int, member: int = 0) -> list[TaskRecord]:
    """``count`` replayable tasks with a deterministic check each (scored like a night's)."""
    return [TaskRecord(id=f"t-{member:02d}{index:010d}", source="claude", request=f"Install the date library ({index})",
                       judge=Judge(checks=[Check(op="contains", value="pnpm add", rule="use pnpm add")]))
            for index in range(count)]


def replay_seconds(base_url: str, model: str, tasks: list[TaskRecord], workers: int) -> tuple[float, int]:
    """Wall seconds to replay ``tasks`` once with ``workers`` in flight; and how many passed their check."""
    backend = OpenAIBackend(base_url=base_url, target_model=model, optimizer_model=model, max_retries=0,
                                  timeout_s=120.0)
    replayer = Replayer(meter=CallMeter(backend), workers=workers)
    started = time.perf_counter()
    results = replay_tasks(tasks, replayer, skill="", memory="- Use pnpm, never npm.", max_tokens=64)
    return time.perf_counter() - started, sum(result.hard for result in results)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=48, help="replays per member (default 48)")
    parser.add_argument("--latency", type=float, default=0.25, help="stand-in seconds per call (default 0.25)")
    parser.add_argument("--slots", type=int, default=8, help="stand-in calls served at once (default 8)")
    parser.add_argument("--workers", default="1,2,4,8,16", help="workers values for one member")
    parser.add_argument("--members", type=int, default=12, help="members replaying at once (default 12)")
    parser.add_argument("--base-url", help="a real OpenAI-compatible server instead of the stand-in")
    parser.add_argument("--model", default="stand-in")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)

    stand_in = None if args.base_url else StandIn(latency_s=args.latency, slots=args.slots)
    base_url = args.base_url or stand_in.base_url
    rows: list[dict] = []
    for workers in [int(value) for value in args.workers.split(",")]:
        if stand_in:
            stand_in.reset()
        seconds, passed = replay_seconds(base_url, args.model, tasks_of(args.tasks), workers)
        rows.append({"workers": workers, "seconds": round(seconds, 3), "tasks_per_s": round(args.tasks / seconds, 2),
                     "passed": passed, "peak_in_flight": stand_in.peak if stand_in else None})
    base = rows[0]["seconds"]
    print(f"## One member, {args.tasks} replays" + (f", stand-in: {args.latency} s a call, {args.slots} slots"
                                                  if stand_in else f", {base_url}"))
    print("\n| workers | seconds | tasks/s | speed-up vs 1 | most in flight at the server |")
    print("|---:|---:|---:|---:|---:|")
    for row in rows:
        print(f"| {row['workers']} | {row['seconds']:.2f} | {row['tasks_per_s']:.2f} | {base / row['seconds']:.2f}x "
              f"| {row['peak_in_flight'] if row['peak_in_flight'] is not None else '-'} |")

    team: dict = {}
    if args.members > 1:
        alone = next((row["seconds"] for row in rows if row["workers"] == DEFAULT_WORKERS), None)
        if alone is None:
            alone = replay_seconds(base_url, args.model, tasks_of(args.tasks), DEFAULT_WORKERS)[0]
        if stand_in:
            stand_in.reset()
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=args.members) as pool:
            each = list(pool.map(lambda member: replay_seconds(base_url, args.model, tasks_of(args.tasks, member),
                                                               DEFAULT_WORKERS)[0], range(args.members)))
        wall = time.perf_counter() - started
        team = {"members": args.members, "workers_each": DEFAULT_WORKERS, "alone_s": round(alone, 3),
                "slowest_member_s": round(max(each), 3), "wall_s": round(wall, 3),
                "slowdown_vs_alone": round(max(each) / alone, 2),
                "peak_in_flight": stand_in.peak if stand_in else None,
                "calls": args.members * args.tasks}
        print(f"\n## {args.members} members at once, {DEFAULT_WORKERS} workers each\n")
        print(f"slowest member {team['slowest_member_s']:.2f} s against {team['alone_s']:.2f} s alone "
              f"({team['slowdown_vs_alone']:.2f}x); {team['calls']} calls in {team['wall_s']:.2f} s"
              + (f"; at most {team['peak_in_flight']} in flight at the server" if stand_in else ""))
    if args.json:
        args.json.write_text(json.dumps({"tasks": args.tasks, "latency_s": args.latency, "slots": args.slots,
                                         "base_url": args.base_url, "one_member": rows, "team": team}, indent=2))
    if stand_in:
        stand_in.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
