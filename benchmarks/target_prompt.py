"""Which target system prompt lets a small model show a rule on a replayed request? (``prompts/target_system.md``)

A replay is text: the target cannot run the tools the agent ran in the session, so a request such as "post the
finished report to the webhook" gets "please give me the URL" unless the prompt asks for the command or the code.
This script writes each world's rules into the memory (as a night would, under ``edits.BLOCK_HEADING``) and has
the target answer every session request of the world (the train side of the benchmark: the requests of all nights,
never the held-out probes) with each candidate frame, at temperature 0; each answer is scored by the checker of the
session's rule (the rule in force that night). Requests of noise sessions are not scored.

Usage (a llama.cpp server on 127.0.0.1 serving the model, e.g. Qwen2.5-Coder-1.5B)::

    python benchmarks/target_prompt.py --base-url http://127.0.0.1:18432/v1
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks import world as world1  # noqa: E402
from benchmarks import world2  # noqa: E402
from benchmarks.learning import chat  # noqa: E402
from skillopt_sleep import prompts  # noqa: E402
from skillopt_sleep.documents.block import ensure_block  # noqa: E402
from skillopt_sleep.engine.edits import apply_edits  # noqa: E402
from skillopt_sleep.models import EditRecord  # noqa: E402
from skillopt_sleep.prompts import render  # noqa: E402

FRAMES = {
    "shipped": prompts.load_prompt("target_system").split("\n\n# Skill document")[0],
    "commands": ("You are a coding agent answering one request from your user. You cannot run tools here: answer with "
                 "the exact command to run or the code to write. Follow the skill document and the memory below: "
                 "they hold the user's rules and procedures. Answer directly and briefly."),
    "rules-first": ("You are a coding agent answering one request from your user. You cannot run tools here: answer "
                    "with the exact command to run or the code to write. The skill document and the memory below hold "
                    "the user's rules: follow every rule that applies to the request. Answer directly and briefly."),
}


def requests_of(world) -> list[tuple[str, str, int]]:
    """(request, rule, night) of every session that teaches a rule."""
    if world is world1:
        return [(c.request, c.rule, night) for night, items in enumerate(world.NIGHTS, 1) for c in items]
    return [(item.steps[0].text, item.rule, night) for night, items in enumerate(world.NIGHTS, 1) for item in items
            if item.rule]


def memory_for(world, night: int) -> str:
    edits = [EditRecord(target="memory", op="append", content=f"- {rule}") for rule in world.perfect_rules(night)]
    return apply_edits(ensure_block(world.INITIAL_MEMORY), edits, "memory")[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--max-tokens", type=int, default=200)
    args = parser.parse_args(argv)
    print("| world | frame | session requests passed |")
    print("|---|---|---:|")
    for world in (world1, world2):
        items = requests_of(world)
        for name, frame in FRAMES.items():
            passed = 0
            for request, rule, night in items:
                system = render(frame + "\n\n# Skill document\n{skill}\n\n# Memory\n{memory}\n",
                                {"skill": "(none)", "memory": memory_for(world, night).strip()})
                answer = chat(args.base_url, system, request, max_tokens=args.max_tokens)["text"]
                score = world.score_probe(type("P", (), {"rule": rule})(), answer, night)
                passed += int(score)
            print(f"| {world.NAME} | {name} | {passed} / {len(items)} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
