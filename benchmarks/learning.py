"""Learning benchmark: do nights learn the user's house rules from their sessions? Held-out compliance per night.

Three simulated developers teach their rules only through their Claude Code sessions, new sessions each night:
``benchmarks/world.py`` (world 1, a web shop: pnpm, ISO dates, Conventional Commits, pathlib; "no, we use X here"),
``benchmarks/world2.py`` (world 2, written independently: a Python data team with five rules taught tersely,
politely, indirectly, over two messages, as the reply to a refused tool call, one of them once, one of them changed
on night 3, plus noise sessions), and ``benchmarks/world3.py`` (world 3, a platform team whose six rules are stated
the way real users state them: a sentence inside a longer request, "Do NOT ...", a typed instruction block, Spanish,
"from now on" once). Each night runs ``run_night(..., apply=True)`` at the **default settings** with
the local Qwen model (target, optimizer and judge) behind ``python -m llama_cpp.server`` on 127.0.0.1 (our
``openai`` backend). Deviations from the defaults, and why: ``workers = 1`` and ``request_timeout_s = 600`` (one
llama.cpp server serves one request at a time: concurrent calls only queue and time out, ``docs/benchmarks.md``
"Night cost"); no call/token/minute budget (the numbers are what a night costs, not where a budget cut it).

After each night the held-out probes (never in a transcript) are answered with the live skill document + memory as
the system prompt (``engine.replay.system_prompt``, as replay does) and scored by the world's deterministic
checkers (the rule in force after that night). On the night the rules in force change (world 2's formatter), the
previous night's documents are scored under the new rules too (``before``), so that an accepted night is compared with
what it replaced under the same rules. Night 0 is the baseline with the initial documents. The **ceiling**
(``--ceiling``) scores the same probes with the world's rules written as well as we can into the memory
(``world.perfect_rules``): a 1.5B model does not follow every rule even when told, and that is the limit to approach.

Variants (``--variant``, repeatable): ``main`` (the defaults), ``strict`` (gate_rule strict), ``k3`` (rollouts_k 3),
``recall0`` (recall_k 0), ``norepair`` (gate_repair off), ``greedy`` (gate_mode off), ``norules`` (no rule mining:
this process replaces ``mine.candidates.Candidate.add_rules`` by a no-op).

The peer (``skillopt==0.2.0``) runs separately: ``benchmarks/peer/run_peer.py --world N`` (see its docstring); it
writes the documents after each night, and ``--score-peer`` scores them with the same probes.

Usage (from the repository root; takes long, not a test):
    python benchmarks/learning.py --world 2 --nights 4 --base-url http://127.0.0.1:18432/v1 --json /tmp/w2.json
    python benchmarks/learning.py --world 2 --ceiling --base-url http://127.0.0.1:18432/v1 --json /tmp/w2-ceil.json
    python benchmarks/learning.py --render /tmp/w2.json /tmp/w2-ceil.json /tmp/w2-peer.json
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

from benchmarks import world as world1  # noqa: E402
from benchmarks import world2, world3  # noqa: E402

WORLDS = {1: world1, 2: world2, 3: world3}
world = world1  # the world of this process (``--world``)

DEFAULT_MODEL = Path("/tmp/skillopt-data/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
PROBE_MAX_TOKENS = 80
#: max_tokens of a replay; None keeps the product's (``replay_tasks``: 400).
TARGET_MAX_TOKENS: int | None = None
VARIANTS = {
    "main": {},
    "strict": {"gate_rule": "strict"},
    "k3": {"rollouts_k": 3},
    "recall0": {"recall_k": 0},
    "norules": {},
    "norepair": {"gate_repair": False},
    "greedy": {"gate_mode": "off"},
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


def score_documents(base_url: str, skill: str, memory: str, probes: list, night: int = 0) -> dict:
    """Answer every probe with ``system_prompt(prompt_view(skill), prompt_view(memory))``; score with the checkers
    of the rules in force after ``night``.

    Returns {"compliance": float in [0, 1], "by_rule": {rule: passed/total}, "answers": [...], "seconds": float}.
    """
    from skillopt_sleep.documents.targets import prompt_view
    from skillopt_sleep.engine.replay import system_prompt

    system = system_prompt(prompt_view(skill), prompt_view(memory))
    started = time.monotonic()
    answers, by_rule = [], {}
    for probe in probes:
        reply = chat(base_url, system, probe.prompt, max_tokens=PROBE_MAX_TOKENS)
        print(f"  probe {len(answers) + 1}/{len(probes)} {probe.rule}: {time.monotonic() - started:.0f}s",
              file=sys.stderr, flush=True)
        passed = world.score_probe(probe, reply["text"], night)
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
    from skillopt_sleep.mine.candidates import Candidate

    if variant != "norules":
        return contextlib.nullcontext()
    return mock.patch.object(Candidate, "add_rules", lambda self, text, origin: None)


def _rules_table(state_dir: Path) -> list[dict]:
    """The archive's rules after a night (``archive/rule_history.py``): text, status, times stated, wins/losses."""
    import sqlite3

    found = list(state_dir.glob("projects/*/archive.sqlite3"))
    if not found:
        return []
    connection = sqlite3.connect(found[0])
    try:
        rows = connection.execute("SELECT text, status, stated, wins, losses, nights, replaced_by, id FROM rules "
                                  "ORDER BY stated DESC").fetchall()
    except sqlite3.Error:
        return []
    finally:
        connection.close()
    return [{"text": t, "status": st, "stated": n, "wins": w, "losses": l, "nights": json.loads(ni),
             "replaced_by": r, "id": i} for t, st, n, w, l, ni, r, i in rows]


def run_variant(name: str, *, base_url: str, model: Path, nights: int, probes: list, scratch: Path,
                overrides: dict, progress=None) -> dict:
    """Run ``nights`` nights of variant ``name`` in a fresh project/state under ``scratch``; score after each.

    overrides: config keys set on top of the defaults (``--set``); progress: optional ``callable(partial_result)``
    called after every night (to save partial results).
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
                    lookback_hours=0, workers=1, request_timeout_s=600, max_calls_per_night=0,
                    max_tokens_per_night=0, max_minutes_per_night=0)
    settings.update(VARIANTS[name])
    settings.update(overrides)
    config = SleepConfig(**settings)
    if TARGET_MAX_TOKENS is not None:
        replay_tasks.__kwdefaults__["max_tokens"] = TARGET_MAX_TOKENS

    def documents() -> tuple[str, str]:
        skill_file = project / ".claude" / "skills" / "skillopt-sleep" / "SKILL.md"
        skill = skill_file.read_text("utf-8") if skill_file.exists() else ""
        return skill, (project / "CLAUDE.md").read_text("utf-8")

    rows = []
    baseline = score_documents(base_url, *documents(), probes, night=0)
    rows.append({"night": 0, "status": "baseline", **_probe_row(baseline)})
    print(f"[{world.NAME}/{name}] night 0: compliance {baseline['compliance']:.2f}", file=sys.stderr, flush=True)
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
        rules_in_force_changed = night == getattr(world, "FORMATTER_CHANGES_ON", 0)
        if current == previous and rows[-1].get("answers") is not None and not rules_in_force_changed:
            scored = {**rows[-1]["probe_full"], "reused": True}
        else:
            scored = score_documents(base_url, *current, probes, night=night)
        before = None
        if rules_in_force_changed and current != previous:  # did tonight's candidate lower compliance under the
            before = score_documents(base_url, *previous, probes, night=night)  # rules in force tonight?
        previous = current
        gate = diagnostics.gate
        row = {"night": night, "status": diagnostics.status, "summary": diagnostics.summary,
               "gate": gate.verdict if gate else None, "gate_reason": gate.reason if gate else None,
               "gate_details": {key: gate.details.get(key) for key in ("clause", "wins", "losses", "ties",
                                                                        "settled_tasks", "support", "repair")}
               if gate else None,
               "per_task": [{"task": c.task_id, "origin": c.origin, "outcome": c.outcome, "rules": c.rules,
                             "samples": [len(c.baseline), len(c.candidate)]} for c in gate.per_task] if gate else [],
               "tasks": diagnostics.tasks, "mining": diagnostics.mining, "applied": diagnostics.applied,
               "pending": diagnostics.pending,
               "edits": [{"status": e.status, "target": e.target, "op": e.op, "anchor": e.anchor,
                          "content": e.content, "reason": e.reason} for e in diagnostics.edits],
               "wall_seconds": round(wall, 1), "roles": roles,
               "calls": sum(r["calls"] for r in roles.values()),
               "tokens": sum(r["prompt_tokens"] + r["completion_tokens"] for r in roles.values()),
               "failure": diagnostics.failure, "errors": diagnostics.errors[:5],
               "rules": _rules_table(scratch / "skillopt" / "state"), "memory": current[1], "skill": current[0],
               **_probe_row(scored)}
        if before is not None:
            row["before"] = {"compliance": before["compliance"], "by_rule": before["by_rule"],
                             "answers": before["answers"]}
        rows.append(row)
        print(f"[{world.NAME}/{name}] night {night}: {row['status']} ({row['gate']}), {row['calls']} calls, "
              f"{wall:.0f}s, compliance {row['compliance']:.2f}", file=sys.stderr, flush=True)
        if progress is not None:
            progress({"side": "ours", "world": world.NAME, "variant": name, "nights": rows, "partial": True})
    skill, memory = documents()
    settings.update(probe_max_tokens=PROBE_MAX_TOKENS, target_max_tokens=TARGET_MAX_TOKENS, probes=len(probes))
    return {"side": "ours", "world": world.NAME, "variant": name,
            "config": {k: str(v) for k, v in settings.items() if k != "api_key"},
            "nights": rows, "final_skill": skill, "final_memory": memory}


def ceiling(base_url: str, probes: list, nights: int) -> dict:
    """Compliance with the world's rules written as well as we can into the memory (after night ``nights``), under
    the heading a night writes: the limit a night can approach with this target model."""
    from skillopt_sleep.documents.block import BLOCK_HEADING, ensure_block
    from skillopt_sleep.engine.edits import apply_edits
    from skillopt_sleep.models import EditRecord

    memory = ensure_block(world.INITIAL_MEMORY)
    edits = [EditRecord(target="memory", op="append", content=f"- {rule}") for rule in world.perfect_rules(nights)]
    memory, _ = apply_edits(memory, edits, "memory")
    assert BLOCK_HEADING in memory
    scored = score_documents(base_url, "", memory, probes, night=nights)
    print(f"[{world.NAME}/ceiling] compliance {scored['compliance']:.2f}", file=sys.stderr, flush=True)
    return {"side": "ceiling", "world": world.NAME, "variant": f"rules written perfectly (night {nights})",
            "nights": [{"night": nights, "status": "ceiling", **_probe_row(scored)}], "final_memory": memory}


def _probe_row(scored: dict) -> dict:
    return {"compliance": scored["compliance"], "by_rule": scored["by_rule"], "answers": scored["answers"],
            "probe_seconds": scored["seconds"], "probe_full": scored}


# --------------------------------------------------------------------------- the peer


def score_peer(path: Path, *, base_url: str, probes: list) -> dict:
    """Score the peer's documents after each night (``run_peer.py`` output) with the same probes and prompt.

    Documents unchanged since the previous night reuse that night's scores (temperature 0: same answers), unless
    the world's rules in force changed that night.
    """
    rows = []
    last_documents, last_scored = None, None
    changes_on = getattr(world, "FORMATTER_CHANGES_ON", 0)
    for night in json.loads(Path(path).read_text("utf-8")):
        documents = (night.get("skill", ""), night.get("memory", ""))
        number = int(night.get("night", 0))
        if documents == last_documents and number != changes_on:
            scored = last_scored
        else:
            scored = score_documents(base_url, *documents, probes, night=number)
        last_documents, last_scored = documents, scored
        row = {key: night.get(key) for key in ("night", "status", "gate", "n_tasks", "calls", "calls_by_kind",
                                                "failed_calls", "tokens", "wall_seconds", "error", "edits")}
        rows.append({**row, **_probe_row(scored), "memory": documents[1], "skill": documents[0]})
        print(f"[{world.NAME}/peer] night {row['night']}: compliance {scored['compliance']:.2f}", file=sys.stderr,
              flush=True)
    return {"side": "peer", "world": world.NAME, "variant": "skillopt 0.2.0", "nights": rows,
            "final_skill": documents[0], "final_memory": documents[1]}


# --------------------------------------------------------------------------- report


def render(results: list[dict]) -> str:
    """Markdown per world: one compliance table (rows: side/variant, columns: nights; the ceiling in its own row) and
    one cost table."""
    out: list[str] = []
    for name in dict.fromkeys(result.get("world", "webshop") for result in results):
        mine = [result for result in results if result.get("world", "webshop") == name]
        most = max(max(row["night"] for row in result["nights"]) for result in mine) + 1
        out += [f"World {name}: held-out compliance (probes passed / probes, per rule passed):", "",
                "| side / variant | " + " | ".join(f"night {n}" for n in range(most)) + " |",
                "|---|" + "---:|" * most]
        for result in mine:
            cells = [""] * most
            for row in result["nights"]:
                rules = " ".join(f"{key[:4]} {value.split('/')[0]}" for key, value in row["by_rule"].items())
                mark = "" if row["night"] == 0 or result["side"] == "ceiling" else f" ({row.get('status')})"
                cells[row["night"]] = f"{row['compliance']:.0%} [{rules}]{mark}"
                if row.get("before"):  # the rules in force changed tonight: last night's documents under them
                    cells[row["night"]] += f" (night {row['night'] - 1}'s documents: {row['before']['compliance']:.0%})"
            out.append(f"| {result['side']} / {result['variant']} | " + " | ".join(cells) + " |")
        out += ["", "| side / variant | night | status (gate) | tasks train/val/test | calls | tokens | wall s |",
                "|---|---:|---|---|---:|---:|---:|"]
        for result in mine:
            if result["side"] == "ceiling":
                continue
            for row in result["nights"][1:]:
                tasks = row.get("tasks") or {}
                split = (f"{tasks.get('train', '-')}/{tasks.get('val', '-')}/{tasks.get('test', '-')}" if tasks
                         else (f"{row['n_tasks']} tasks" if row.get("n_tasks") is not None else "-"))
                out.append(f"| {result['side']} / {result['variant']} | {row['night']} | {row['status']} "
                           f"({row.get('gate')}) | {split} | {row['calls']} | {row['tokens']} | "
                           f"{(row.get('wall_seconds') or 0):.0f} |")
        out.append("")
    return "\n".join(out)


def _probes(count: int) -> list:
    rules = list(world.RULE_NAMES)
    per_rule = max(1, count // len(rules))
    return [probe for rule in rules for probe in [q for q in world.PROBES if q.rule == rule][:per_rule]]


def _overrides(pairs: list[str]) -> dict:
    """``KEY=VALUE`` pairs (``--set``) as config overrides; values parsed as JSON when they parse."""
    out = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def main(argv: list[str] | None = None) -> int:
    global world
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world", type=int, default=1, choices=sorted(WORLDS))
    parser.add_argument("--nights", type=int, default=3)
    parser.add_argument("--variant", action="append", choices=sorted(VARIANTS), default=None)
    parser.add_argument("--ceiling", action="store_true", help="score the world's rules written perfectly, and exit")
    parser.add_argument("--probes", type=int, default=None, help="first N probes (evenly per rule; default: all)")
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--base-url", default=None, help="reuse a running server instead of starting one")
    parser.add_argument("--server-threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a config key on top of the defaults (an ablation); say why in docs/benchmarks.md")
    parser.add_argument("--probe-max-tokens", type=int, default=PROBE_MAX_TOKENS)
    parser.add_argument("--target-max-tokens", type=int, default=None,
                        help="max_tokens of replay (default: the product's, 400)")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--render", type=Path, nargs="+", default=None, help="render result JSON files and exit")
    parser.add_argument("--score-peer", type=Path, default=None,
                        help="score the documents of a benchmarks/peer/run_peer.py JSON file (needs --base-url)")
    args = parser.parse_args(argv)
    if args.render:
        results = [item for path in args.render for item in json.loads(path.read_text("utf-8"))]
        print(render(results))
        return 0
    world = WORLDS[args.world]
    if args.nights > len(world.NIGHTS):
        raise SystemExit(f"world {args.world} has {len(world.NIGHTS)} nights")
    globals().update(PROBE_MAX_TOKENS=args.probe_max_tokens, TARGET_MAX_TOKENS=args.target_max_tokens)
    probes = _probes(args.probes or len(world.PROBES))
    if args.score_peer or args.ceiling:
        if not args.base_url:
            raise SystemExit("--score-peer and --ceiling need --base-url (a running llama.cpp server)")
        results = [score_peer(args.score_peer, base_url=args.base_url, probes=probes) if args.score_peer
                   else ceiling(args.base_url, probes, args.nights)]
        if args.json:
            args.json.write_text(json.dumps(results, indent=1, default=str), encoding="utf-8")
        print(render(results))
        return 0
    from benchmarks.night_cost import start_server, stop_server, warm_up

    results: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="skillopt-learning-") as scratch_root:
        scratch = Path(scratch_root)
        process = None
        base_url = args.base_url
        if base_url is None:
            process, base_url = start_server(args.model, args.server_threads, scratch / "server.log")
        try:
            warm_up(base_url)
            for name in args.variant or ["main"]:
                def save_partial(partial: dict) -> None:
                    if args.json:
                        args.json.write_text(json.dumps([*results, partial], indent=1, default=str), "utf-8")

                with _rule_mining(name):
                    results.append(run_variant(name, base_url=base_url, model=args.model, nights=args.nights,
                                               probes=probes, scratch=scratch / name,
                                               overrides=_overrides(args.set), progress=save_partial))
                if args.json:
                    args.json.write_text(json.dumps(results, indent=1, default=str), encoding="utf-8")
        finally:
            if process is not None:
                stop_server(process)
    print(render(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
