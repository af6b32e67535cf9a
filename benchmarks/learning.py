"""Learning benchmark: do nights learn the user's house rules from corrections? Held-out compliance per night.

A simulated developer (``benchmarks/world.py``) teaches four house rules only through corrections inside Claude Code
sessions, new sessions each night. Each night runs ``run_night(..., apply=True)`` with the local Qwen model (target,
optimizer and judge) behind ``python -m llama_cpp.server`` on 127.0.0.1 (our ``openai`` backend); after each night
the held-out probes (never in a transcript) are answered with the adopted skill document + memory as the system
prompt (``engine.replay.system_prompt``, as replay does) and scored by deterministic checkers. Night 0 is the
baseline with the initial documents.

Variants (``--variant``, repeatable): ``main`` (paired gate, rollouts_k 1, recall_k 3, rule mining on),
``strict`` (gate_rule strict), ``k3`` (rollouts_k 3), ``recall0`` (recall_k 0), ``norepair`` (gate_repair
off), ``norules`` (rule mining from
corrections off: there is no config key, so this process replaces ``mine._Candidate.add_rules`` by a no-op; tasks
then carry no ``rules`` and no correction checks and are judged by the heuristic rubric).

The peer (``skillopt==0.2.0``) runs separately: ``benchmarks/peer/run_peer.py`` (see its docstring); it writes
the same JSON shape, and ``--render`` joins result files into the markdown table.

Usage (from the repository root; takes long, not a test):
    python benchmarks/learning.py --nights 3 --variant main --json /tmp/learning-main.json
    python benchmarks/learning.py --render /tmp/learning-main.json /tmp/learning-peer.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from unittest import mock

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # run as a script: make `skillopt_sleep` and `benchmarks` importable
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks import world  # noqa: E402

DEFAULT_MODEL = Path("/tmp/skillopt-data/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
PROBE_MAX_TOKENS = 80
TARGET_MAX_TOKENS = 80
VARIANTS = {
    "main": {},
    "strict": {"gate_rule": "strict"},
    "k3": {"rollouts_k": 3},
    "recall0": {"recall_k": 0},
    "norules": {},
    "norepair": {"gate_repair": False},
}


# --------------------------------------------------------------------------- probes


def chat(base_url: str, system: str, user: str, *, max_tokens: int) -> dict:
    """One chat completion at temperature 0, seed 0; returns {"text", "prompt_tokens", "completion_tokens"}."""
    body = json.dumps({"model": "probe", "messages": [{"role": "system", "content": system},
                                                      {"role": "user", "content": user}],
                       "max_tokens": max_tokens, "temperature": 0.0, "seed": 0}).encode()
    request = urllib.request.Request(f"{base_url}/chat/completions", data=body,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as response:
        reply = json.loads(response.read())
    usage = reply.get("usage") or {}
    return {"text": reply["choices"][0]["message"]["content"] or "",
            "prompt_tokens": usage.get("prompt_tokens", 0), "completion_tokens": usage.get("completion_tokens", 0)}


def score_documents(base_url: str, skill: str, memory: str, probes: list[world.Probe]) -> dict:
    """Answer every probe with ``system_prompt(prompt_view(skill), prompt_view(memory))``; score with the checkers.

    Returns {"compliance": float in [0, 1], "by_rule": {rule: passed/total}, "answers": [...], "seconds": float}.
    """
    from skillopt_sleep.documents import prompt_view
    from skillopt_sleep.engine.replay import system_prompt

    system = system_prompt(prompt_view(skill), prompt_view(memory))
    started = time.monotonic()
    answers, by_rule = [], {}
    for probe in probes:
        reply = chat(base_url, system, probe.prompt, max_tokens=PROBE_MAX_TOKENS)
        print(f"  probe {len(answers) + 1}/{len(probes)} {probe.rule}: {time.monotonic() - started:.0f}s",
              file=sys.stderr, flush=True)
        passed = world.score_probe(probe, reply["text"])
        answers.append({"rule": probe.rule, "prompt": probe.prompt, "answer": reply["text"], "pass": passed})
        counts = by_rule.setdefault(probe.rule, [0, 0])
        counts[0] += int(passed)
        counts[1] += 1
    return {"compliance": round(sum(a["pass"] for a in answers) / len(answers), 4),
            "by_rule": {rule: f"{ok}/{total}" for rule, (ok, total) in by_rule.items()},
            "answers": answers, "seconds": round(time.monotonic() - started, 1)}


# --------------------------------------------------------------------------- our nights


def _rule_mining(variant: str) -> contextlib.AbstractContextManager:
    """Ablation ``norules``: while the context is open, rules stated in corrections/requests are not mined (no
    TaskRecord.rules, no checks). Other variants: no change. Restored on exit, so a later variant in the same
    process mines rules again."""
    from skillopt_sleep import mine

    if variant != "norules":
        return contextlib.nullcontext()
    return mock.patch.object(mine._Candidate, "add_rules", lambda self, text, origin: None)


def run_variant(name: str, *, base_url: str, model: Path, nights: int, probes: list[world.Probe],
                scratch: Path, gate_samples: int, max_tasks: int, progress=None) -> dict:
    """Run ``nights`` nights of variant ``name`` in a fresh project/state under ``scratch``; score after each.

    progress: optional ``callable(partial_result)`` called after every night (to save partial results).
    """
    os.environ["SKILLOPT_SLEEP_HOME"] = str(scratch / "skillopt")
    from skillopt_sleep.config import SleepConfig
    from skillopt_sleep.engine.replay import replay_tasks
    from skillopt_sleep.night import run_night

    project = scratch / "project"
    project.mkdir(parents=True)
    (project / "CLAUDE.md").write_text(world.INITIAL_MEMORY, encoding="utf-8")
    claude_home = scratch / "claude-home"
    settings = dict(backend="openai", base_url=base_url, api_key="local", target_model=model.stem,
                    optimizer_model=model.stem, source="claude", scope="project", claude_home=claude_home,
                    lookback_hours=0, workers=1, llm_mine=False, max_tasks_per_night=max_tasks,
                    gate_samples=gate_samples, max_retries=1, request_timeout_s=600, max_calls_per_night=0,
                    max_tokens_per_night=0, max_minutes_per_night=0)
    settings.update(VARIANTS[name])
    config = SleepConfig(**settings)
    replay_tasks.__kwdefaults__["max_tokens"] = TARGET_MAX_TOKENS

    def documents() -> tuple[str, str]:
        skill_file = project / ".claude" / "skills" / "skillopt-sleep" / "SKILL.md"
        skill = skill_file.read_text("utf-8") if skill_file.exists() else ""
        return skill, (project / "CLAUDE.md").read_text("utf-8")

    rows = []
    baseline = score_documents(base_url, *documents(), probes)
    rows.append({"night": 0, "status": "baseline", **_probe_row(baseline)})
    print(f"[{name}] night 0: compliance {baseline['compliance']:.2f}", file=sys.stderr, flush=True)
    previous = documents()
    for night in range(1, nights + 1):
        world.write_night_sessions(claude_home, project, night)
        started = time.monotonic()
        result = run_night(config, project=project, apply=True, state_root=scratch / "skillopt" / "state",
                           now=world.night_run_time(night))
        wall = time.monotonic() - started
        diagnostics = result.diagnostics
        roles = {role: {"calls": c.calls, "prompt_tokens": c.prompt_tokens, "completion_tokens": c.completion_tokens}
                 for role, c in diagnostics.cost.items()}
        current = documents()
        if current == previous and rows[-1].get("answers") is not None:
            scored = {**rows[-1]["probe_full"], "reused": True}
        else:
            scored = score_documents(base_url, *current, probes)
        previous = current
        row = {"night": night, "status": diagnostics.status,
               "gate": diagnostics.gate.verdict if diagnostics.gate else None,
               "gate_reason": diagnostics.gate.reason if diagnostics.gate else None,
               "repair": diagnostics.gate.details.get("repair") if diagnostics.gate else None,
               "tasks": diagnostics.tasks, "applied": diagnostics.applied,
               "edits": [{"status": e.status, "target": e.target, "op": e.op, "content": e.content}
                         for e in diagnostics.edits],
               "wall_seconds": round(wall, 1), "roles": roles,
               "calls": sum(r["calls"] for r in roles.values()),
               "tokens": sum(r["prompt_tokens"] + r["completion_tokens"] for r in roles.values()),
               "failure": diagnostics.failure, "errors": diagnostics.errors[:5], **_probe_row(scored)}
        rows.append(row)
        print(f"[{name}] night {night}: {row['status']} ({row['gate']}), {row['calls']} calls, {wall:.0f}s, "
              f"compliance {row['compliance']:.2f}", file=sys.stderr, flush=True)
        if progress is not None:
            progress({"side": "ours", "variant": name, "nights": rows, "partial": True})
    skill, memory = documents()
    settings.update(probe_max_tokens=PROBE_MAX_TOKENS, target_max_tokens=TARGET_MAX_TOKENS, probes=len(probes))
    return {"side": "ours", "variant": name, "config": {k: str(v) for k, v in settings.items() if k != "api_key"},
            "nights": rows, "final_skill": skill, "final_memory": memory}


def _probe_row(scored: dict) -> dict:
    return {"compliance": scored["compliance"], "by_rule": scored["by_rule"], "answers": scored["answers"],
            "probe_seconds": scored["seconds"], "probe_full": scored}


# --------------------------------------------------------------------------- the peer


def score_peer(path: Path, *, base_url: str, probes: list[world.Probe]) -> dict:
    """Score the peer's documents after each night (``run_peer.py`` output) with the same probes and prompt.

    Documents unchanged since the previous night reuse that night's scores (temperature 0: same answers).
    """
    rows = []
    last_documents, last_scored = None, None
    for night in json.loads(Path(path).read_text("utf-8")):
        documents = (night.get("skill", ""), night.get("memory", ""))
        scored = last_scored if documents == last_documents else score_documents(base_url, *documents, probes)
        last_documents, last_scored = documents, scored
        row = {key: night.get(key) for key in ("night", "status", "gate", "n_tasks", "calls", "calls_by_kind",
                                                "failed_calls", "tokens", "wall_seconds", "error", "edits")}
        rows.append({**row, **_probe_row(scored)})
        print(f"[peer] night {row['night']}: compliance {scored['compliance']:.2f}", file=sys.stderr, flush=True)
    return {"side": "peer", "variant": "skillopt 0.2.0", "nights": rows,
            "final_skill": documents[0], "final_memory": documents[1]}


# --------------------------------------------------------------------------- report


def render(results: list[dict]) -> str:
    """Markdown: one compliance table (rows: side/variant, columns: nights) and one cost table per result."""
    most = max(len(r["nights"]) for r in results)
    head = "| side / variant | " + " | ".join(f"night {n}" for n in range(most)) + " |"
    out = ["Held-out compliance (probes passed / probes; per rule p=pnpm, d=ISO date, c=Conventional Commits, "
           "l=pathlib):", "", head, "|---|" + "---:|" * most]
    short = {"pnpm": "p", "iso_date": "d", "conventional_commits": "c", "pathlib": "l"}
    for result in results:
        cells = []
        for row in result["nights"]:
            rules = " ".join(f"{short[k]}{v.split('/')[0]}" for k, v in row["by_rule"].items())
            mark = "" if row["night"] == 0 else f" ({row.get('status')})"
            cells.append(f"{row['compliance']:.0%} [{rules}]{mark}")
        cells += [""] * (most - len(cells))
        out.append(f"| {result['side']} / {result['variant']} | " + " | ".join(cells) + " |")
    out += ["", "Cost per night (LLM calls, tokens prompt+completion, wall seconds; probes not counted):", "",
            "| side / variant | night | status (gate) | tasks train/val/test | calls | tokens | wall s |",
            "|---|---:|---|---|---:|---:|---:|"]
    for result in results:
        for row in result["nights"][1:]:
            tasks = row.get("tasks") or {}
            split = f"{tasks.get('train', '-')}/{tasks.get('val', '-')}/{tasks.get('test', '-')}" if tasks else (
                f"{row['n_tasks']} tasks" if row.get("n_tasks") is not None else "-")
            out.append(f"| {result['side']} / {result['variant']} | {row['night']} | {row['status']} "
                       f"({row.get('gate')}) | {split} | {row['calls']} | {row['tokens']} | "
                       f"{(row.get('wall_seconds') or 0):.0f} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nights", type=int, default=3, choices=range(1, len(world.NIGHTS) + 1))
    parser.add_argument("--variant", action="append", choices=sorted(VARIANTS), default=None)
    parser.add_argument("--probes", type=int, default=len(world.PROBES),
                        help="first N probes per rule x 4 (default: all)")
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--base-url", default=None, help="reuse a running server instead of starting one")
    parser.add_argument("--server-threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--gate-samples", type=int, default=2)
    parser.add_argument("--max-tasks", type=int, default=8)
    parser.add_argument("--probe-max-tokens", type=int, default=PROBE_MAX_TOKENS)
    parser.add_argument("--target-max-tokens", type=int, default=TARGET_MAX_TOKENS,
                        help="max_tokens of replay (the product default is 400)")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--render", type=Path, nargs="+", default=None, help="render result JSON files and exit")
    parser.add_argument("--score-peer", type=Path, default=None,
                        help="score the documents of a benchmarks/peer/run_peer.py JSON file (needs --base-url)")
    args = parser.parse_args(argv)
    if args.render:
        results = [item for path in args.render for item in json.loads(path.read_text("utf-8"))]
        print(render(results))
        return 0
    globals().update(PROBE_MAX_TOKENS=args.probe_max_tokens, TARGET_MAX_TOKENS=args.target_max_tokens)
    per_rule = max(1, args.probes // 4)
    probes = [p for rule in world.CHECKERS for p in [q for q in world.PROBES if q.rule == rule][:per_rule]]
    if args.score_peer:
        if not args.base_url:
            raise SystemExit("--score-peer needs --base-url (a running llama.cpp server)")
        results = [score_peer(args.score_peer, base_url=args.base_url, probes=probes)]
        if args.json:
            args.json.write_text(json.dumps(results, indent=1, default=str), encoding="utf-8")
        print(render(results))
        return 0
    from benchmarks.night_cost import start_server, stop_server, warm_up

    results = []
    with tempfile.TemporaryDirectory(prefix="skillopt-learning-") as scratch_root:
        scratch_root = Path(scratch_root)
        process = None
        base_url = args.base_url
        if base_url is None:
            process, base_url = start_server(args.model, args.server_threads, scratch_root / "server.log")
        try:
            warm_up(base_url)
            for name in args.variant or ["main"]:
                def save_partial(partial: dict) -> None:
                    if args.json:
                        args.json.write_text(json.dumps([*results, partial], indent=1, default=str), "utf-8")

                with _rule_mining(name):
                    results.append(run_variant(name, base_url=base_url, model=args.model, nights=args.nights,
                                               probes=probes, scratch=scratch_root / name,
                                               gate_samples=args.gate_samples, max_tasks=args.max_tasks,
                                               progress=save_partial))
                if args.json:
                    args.json.write_text(json.dumps(results, indent=1, default=str), encoding="utf-8")
        finally:
            if process is not None:
                stop_server(process)
    print(render(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
