"""Run the peer (``skillopt==0.2.0``) nightly cycle on the learning world, with a stand-in ``claude`` on PATH.

Run with the peer's interpreter (its virtualenv), from the repository root:
    STANDIN_BASE_URL=http://127.0.0.1:PORT/v1 /tmp/peer-venv/bin/python benchmarks/peer/run_peer.py \\
        --nights 3 --scratch /tmp/learn/peer --json /tmp/learn/peer-docs.json

Each night writes that night's sessions (``benchmarks/world.py``, or ``world2.py`` / ``world3.py`` with
``--world 2`` / ``--world 3``), runs ``run_sleep_cycle`` with the peer's defaults except: backend ``claude``
(the stand-in, ``benchmarks/peer/claude``), the project and ``claude_home`` of the world, ``lookback_hours`` 0
(the first night reads every session), ``max_tasks_per_night`` (default 8, as ours), ``auto_adopt`` on (accepted
documents are applied), and the night's clock (``world.night_run_time``). It records the live documents after each
night (skill: the peer's managed SKILL.md; memory: the project's CLAUDE.md) and the stand-in's call log per night.
``benchmarks/learning.py --score-peer FILE`` scores them with the probes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
STANDIN_DIR = Path(__file__).resolve().parent


def _load_world(number: int):
    import importlib.util

    name = "world.py" if number == 1 else f"world{number}.py"
    if str(REPO_ROOT / "benchmarks") not in sys.path:  # world2 imports world (never skillopt_sleep)
        sys.path.append(str(REPO_ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location("learning_world", REPO_ROOT / "benchmarks" / name)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world", type=int, default=1, choices=(1, 2, 3))
    parser.add_argument("--nights", type=int, default=3)
    parser.add_argument("--scratch", type=Path, required=True)
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--max-tasks", type=int, default=8)
    args = parser.parse_args()
    scratch = args.scratch.resolve()
    scratch.mkdir(parents=True, exist_ok=False)
    os.environ["HOME"] = str(scratch / "home")  # before the peer's import: its ~/.skillopt-sleep is fresh
    os.environ["PATH"] = f"{STANDIN_DIR}{os.pathsep}{os.environ.get('PATH', '')}"
    os.environ.pop("ANTHROPIC_API_KEY", None)
    log = scratch / "standin.jsonl"
    os.environ["STANDIN_LOG"] = str(log)
    if "STANDIN_BASE_URL" not in os.environ:
        raise SystemExit("set STANDIN_BASE_URL to the llama.cpp server's /v1 URL")
    world = _load_world(args.world)  # by file: the repository root on sys.path would shadow the peer's skillopt_sleep
    from skillopt_sleep.cycle import run_sleep_cycle

    from skillopt_sleep.config import load_config

    project = scratch / "project"
    project.mkdir()
    (project / "CLAUDE.md").write_text(world.INITIAL_MEMORY, encoding="utf-8")
    claude_home = scratch / "claude-home"
    config = load_config(backend="claude", claude_home=str(claude_home), invoked_project=str(project),
                         projects="invoked", lookback_hours=0, max_tasks_per_night=args.max_tasks,
                         auto_adopt=True, state_dir=str(scratch / "peer-state"), progress=True)
    skill_path = Path(config.managed_skill_path())

    def documents() -> dict:
        return {"skill": skill_path.read_text("utf-8") if skill_path.exists() else "",
                "memory": (project / "CLAUDE.md").read_text("utf-8")}

    rows = [{"night": 0, "status": "baseline", **documents()}]
    for night in range(1, args.nights + 1):
        world.write_night_sessions(claude_home, project, night)
        before = len(log.read_text().splitlines()) if log.exists() else 0
        started = time.monotonic()
        error = None
        try:
            outcome = run_sleep_cycle(config, clock=world.night_run_time(night).timestamp())
            report = outcome.report
            status = "accepted" if report.accepted else "rejected"
            detail = {"gate": report.gate_action, "n_tasks": report.n_tasks, "baseline": report.baseline_score,
                      "candidate": report.candidate_score, "adopted": outcome.adopted_paths,
                      "edits": [e.content for e in report.edits], "notes": report.notes[:5]}
        except Exception as exc:  # noqa: BLE001 - record why the peer failed, keep the table honest
            status, detail, error = "error", {}, f"{type(exc).__name__}: {exc}"
        wall = time.monotonic() - started
        calls = [json.loads(line) for line in log.read_text().splitlines()[before:]] if log.exists() else []
        kinds: dict[str, int] = {}
        for call in calls:
            kinds[call["kind"]] = kinds.get(call["kind"], 0) + 1
        rows.append({"night": night, "status": status, "error": error, "wall_seconds": round(wall, 1),
                     "calls": len(calls), "calls_by_kind": kinds,
                     "failed_calls": sum(1 for c in calls if c.get("error")),
                     "tokens": sum(c.get("prompt_tokens", 0) + c.get("completion_tokens", 0) for c in calls),
                     **detail, **documents()})
        print(f"[peer] night {night}: {status} {detail.get('gate')} {len(calls)} calls {wall:.0f}s {kinds}",
              file=sys.stderr, flush=True)
        args.json.write_text(json.dumps(rows, indent=1, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
