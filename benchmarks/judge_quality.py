"""Judge quality: do a night's checks hold against the transcripts' own evidence, and how much of a real history
can be replayed at all? No LLM: the heuristics and the validation of ``mine.py`` / ``validation.py`` only.

Two tables:

1. **The learning worlds** (``benchmarks/world.py``, ``benchmarks/world2.py``): every session of every night is mined
   (each night on its own, as a night would); for every task the user corrected: the checks that score it, and
   whether each passes the answer the user accepted and fails the one the user corrected (recomputed here with
   ``engine.judges.check_passes``, not read from the validation), the candidate checks validation dropped and why,
   and the corrected tasks left without a check.
2. **Real histories** (``--history DIR`` Claude Code homes or folders of session files, e.g. ``examples/claude-home``
   and the public dagster-io/erk sessions): sessions, tasks, how many are replayable, how many carry a validated
   check (hard evidence), and the top reasons for the rest.

Usage (from the repository root):
    python benchmarks/judge_quality.py --history examples/claude-home --history /tmp/erk-history
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks import world as world1  # noqa: E402
from benchmarks import world2  # noqa: E402
from skillopt_sleep.checks import check_passes  # noqa: E402
from skillopt_sleep.harvest import harvest  # noqa: E402
from skillopt_sleep.mine import mine_tasks  # noqa: E402


def _mine(claude_home: Path):
    result = harvest(source="claude", scope="all", project=None, claude_home=claude_home, codex_home=None,
                     include_sdk_sessions=False, lookback_hours=0, checkpoints=None)
    return result, mine_tasks(result.sessions, project=None, val_fraction=0.3, test_fraction=0.15, max_tasks=40)


def world_table(world) -> dict:
    """Every corrected task of every night of ``world``: its checks against its own corrected and accepted answers."""
    out = Counter()
    rejected: Counter = Counter()
    examples: list[str] = []
    with tempfile.TemporaryDirectory() as scratch:
        project = Path(scratch) / "project"
        project.mkdir()
        for night in range(1, len(world.NIGHTS) + 1):
            home = Path(scratch) / f"home-{night}"
            world.write_night_sessions(home, project, night)
            _result, mined = _mine(home)
            for task in mined.tasks:
                if task.evidence.reaction != "correction":
                    continue
                out["corrected tasks"] += 1
                if task.judge.checks:
                    out["with a validated check"] += 1
                if task.hard_evidence:
                    out["hard evidence"] += 1
                for check in task.judge.checks:
                    out["checks"] += 1
                    fails = any(check_passes(check, answer, None) is False
                                for answer in task.evidence.corrected_answers)
                    accepted = task.evidence.accepted_answer
                    passes = accepted is None or check_passes(check, accepted, None) is True
                    out["fail the corrected answer"] += int(fails)
                    out["pass the accepted answer"] += int(passes)
                    out["accepted answer present"] += int(accepted is not None)
                for reason in task.rejected_checks:
                    rejected[reason.split(": ", 1)[-1]] += 1
                    if len(examples) < 6:
                        examples.append(reason)
    return {"world": world.NAME, "counts": dict(out), "rejected": dict(rejected.most_common()), "examples": examples}


def _as_home(path: Path, scratch: Path) -> Path:
    """A Claude Code home for ``path``: itself when it has ``projects/``, else a home holding its ``*.jsonl``."""
    if (path / "projects").is_dir():
        return path
    home = scratch / path.name
    folder = home / "projects" / "-history"
    folder.mkdir(parents=True)
    for file in sorted(path.glob("*.jsonl")):
        shutil.copyfile(file, folder / file.name)
    return home


def history_table(path: Path) -> dict:
    """What a night makes of a real history: tasks, replayable, validated checks, and why the rest are not."""
    with tempfile.TemporaryDirectory() as scratch:
        result, mined = _mine(_as_home(path, Path(scratch)))
    tasks = mined.tasks
    reasons: Counter = Counter()
    for task in tasks:
        if not task.replayable:
            reasons[f"not replayable: {task.not_replayable}"] += 1
        elif not task.judge.checks:
            if task.evidence.reaction == "correction":
                reasons["corrected, no check the answers confirm"] += 1
            else:
                reasons[f"no correction or rule (reaction {task.evidence.reaction}): rubric only"] += 1
        elif not task.hard_evidence:
            reasons["checks pass a vacuous reply"] += 1
    return {"history": str(path), "sessions": result.stats.sessions_harvested, "requests": result.stats.requests,
            "dropped": dict(mined.dropped), "tasks": len(tasks), "recurring": sum(1 for t in tasks if t.recurrence > 1),
            "replayable": sum(1 for task in tasks if task.replayable),
            "with a validated check": sum(1 for task in tasks if task.judge.checks),
            "hard evidence": sum(1 for task in tasks if task.hard_evidence),
            "rules stated": sum(len(task.rules) for task in tasks),
            "reasons": dict(reasons.most_common())}


def render(worlds: list[dict], histories: list[dict]) -> str:
    out = ["| world | corrected tasks | with a validated check | hard evidence | checks | fail the corrected answer "
           "| pass the accepted answer | candidate checks dropped (top reasons) |",
           "|---|---:|---:|---:|---:|---:|---:|---|"]
    for item in worlds:
        counts = item["counts"]
        dropped = "; ".join(f"{reason} ({count})" for reason, count in list(item["rejected"].items())[:3]) or "none"
        out.append(f"| {item['world']} | {counts.get('corrected tasks', 0)} | {counts.get('with a validated check', 0)}"
                   f" | {counts.get('hard evidence', 0)} | {counts.get('checks', 0)} | "
                   f"{counts.get('fail the corrected answer', 0)} | {counts.get('pass the accepted answer', 0)} | "
                   f"{dropped} |")
    if histories:
        out += ["", "| history | sessions | tasks | replayable | with a validated check | hard evidence | rules stated "
                "| top reasons for the rest |", "|---|---:|---:|---:|---:|---:|---:|---|"]
        for item in histories:
            reasons = "; ".join(f"{reason} ({count})" for reason, count in list(item["reasons"].items())[:4])
            out.append(f"| {item['history']} | {item['sessions']} | {item['tasks']} | {item['replayable']} | "
                       f"{item['with a validated check']} | {item['hard evidence']} | {item['rules stated']} | "
                       f"{reasons} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--history", type=Path, action="append", default=[],
                        help="a Claude Code home, or a folder of session files (repeatable)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    worlds = [world_table(world) for world in (world1, world2)]
    histories = [history_table(path) for path in args.history]
    if args.json:
        args.json.write_text(json.dumps({"worlds": worlds, "histories": histories}, indent=1), encoding="utf-8")
    print(render(worlds, histories))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
