"""``benchmarks/replay_throughput.py`` on a tiny run: the product's replay path against the recording stand-in server
keeps at most ``workers`` calls in flight, scores every reply, and the team run reports its members."""

from __future__ import annotations

import json

from benchmarks import replay_throughput


def test_replays_stay_within_workers_and_are_scored(tmp_path):
    out = tmp_path / "throughput.json"
    assert replay_throughput.main(["--tasks", "6", "--latency", "0.05", "--slots", "8", "--workers", "1,3",
                                   "--members", "2", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    one, three = report["one_member"]
    assert one["peak_in_flight"] == 1 and 1 < three["peak_in_flight"] <= 3
    assert one["passed"] == three["passed"] == 6  # every stand-in reply says "pnpm add": the check passes
    assert three["seconds"] < one["seconds"]
    team = report["team"]
    assert team["members"] == 2 and team["calls"] == 12
    assert team["peak_in_flight"] <= 2 * replay_throughput.DEFAULT_WORKERS
