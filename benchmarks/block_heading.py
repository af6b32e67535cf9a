"""Does a heading above the learned rules change how often a small target follows them? (``edits.BLOCK_HEADING``)

The learning world's four house rules (``benchmarks/world.py``) are written into CLAUDE.md's managed block, with
no heading or with each candidate heading, and the target answers every request of the world's sessions (the
train side: 24 requests over the three nights; never the held-out probes) at temperature 0 through
``engine.replay.system_prompt``, as replay shows documents. Each answer is scored by the checker of its rule.

Usage (a llama.cpp server on 127.0.0.1 serving the model, e.g. Qwen2.5-Coder-1.5B)::

    python benchmarks/block_heading.py --base-url http://127.0.0.1:18431/v1
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks import world  # noqa: E402
from benchmarks.learning import chat  # noqa: E402
from skillopt_sleep.documents.block import BLOCK_BEGIN, BLOCK_END, BLOCK_HEADING  # noqa: E402
from skillopt_sleep.engine.replay import system_prompt  # noqa: E402

RULES = ["- we use pnpm in this repo, never npm.", "- use ISO dates (YYYY-MM-DD) in this repo.",
         "- commit messages must follow conventional commits.", "- we use pathlib here, never os.path."]
HEADINGS = {"none": None, "sessions": "## Learned from the user's sessions (follow in every answer)",
            "shipped": BLOCK_HEADING}


def memory_with(heading: str | None) -> str:
    """The world's initial CLAUDE.md with the four rules in a managed block under ``heading``."""
    lines = [BLOCK_BEGIN, *([heading, ""] if heading else []), *RULES, "", BLOCK_END]
    return world.INITIAL_MEMORY.rstrip("\n") + "\n\n" + "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--max-tokens", type=int, default=48, help="as the learning benchmark's replays")
    args = parser.parse_args(argv)
    conversations = [conversation for night in world.NIGHTS for conversation in night]
    print("| heading | train requests passed |")
    print("|---|---:|")
    for name, heading in HEADINGS.items():
        system = system_prompt("", memory_with(heading))
        passed = sum(world.CHECKERS[c.rule](chat(args.base_url, system, c.request, max_tokens=args.max_tokens)["text"])
                     for c in conversations)
        print(f"| {name}: {heading or '(none)'} | {passed} / {len(conversations)} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
