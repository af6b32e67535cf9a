"""Which one-line wording of a rule does the target follow? A world's held-out probes of one rule, answered with each
candidate line in the memory's managed block (beside the same other lines), at temperature 0.

Each ``--line LABEL=LINE`` is written into the world's initial memory after the ``--other`` lines (the rest of the
rules, as a night wrote them), and the rule's probes are scored with the checker of the rules in force after
``--night``. The answers' heads are printed, so a reader sees what the model did. Where the line stands matters to a
small model (world 2's uv probes with the night-3 memory: 4 of 4 with the uv line first, 1 of 4 with it fourth of
five, as the night wrote it), so give every line the night wrote before it as ``--other``, in order; a line that
followed it can be given as part of ``--line`` after a newline. Without ``--rule``, every probe of the world is
scored (compliance and each rule's count): give the same lines in several orders as ``--line`` values to see what the
order changes (``docs/benchmarks.md``, "New rules first").

Usage (a llama.cpp server on 127.0.0.1):

    python benchmarks/rule_lines.py --world 2 --rule uv --night 4 --base-url http://127.0.0.1:18432/v1 \\
        --other '- Use `logger`, never `print`.' \\
        --line 'compiled=- Use `uv`, never `pip` (e.g. `uv add scikit-learn`).' \\
        --line 'command=- Use `uv add`, never `pip` (e.g. `uv add scikit-learn`).'
    python benchmarks/rule_lines.py --world 2 --night 3 --base-url http://127.0.0.1:18432/v1 \\
        --line $'written=- Use `logger`, never `print`.\\n- Use `uv add`, never `pip`.' \\
        --line $'newest=- Use `uv add`, never `pip`.\\n- Use `logger`, never `print`.'
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import benchmarks.learning as learning  # noqa: E402
from skillopt_sleep.documents.block import ensure_block  # noqa: E402
from skillopt_sleep.engine.edits import apply_edits  # noqa: E402
from skillopt_sleep.models import EditRecord  # noqa: E402


def memory_with(world, lines: list[str]) -> str:
    """The world's initial memory with ``lines`` appended to its managed block, as a night appends them."""
    memory, _ = apply_edits(ensure_block(world.INITIAL_MEMORY),
                            [EditRecord(target="memory", op="append", content=line) for line in lines], "memory")
    return memory


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world", type=int, choices=sorted(learning.WORLDS), required=True)
    parser.add_argument("--rule", help="the rule whose probes are scored (a world's RULE_NAMES); default: all")
    parser.add_argument("--night", type=int, default=1, help="score with the rules in force after this night")
    parser.add_argument("--line", action="append", required=True, metavar="LABEL=LINE")
    parser.add_argument("--other", action="append", default=[], metavar="LINE", help="another rule's line, kept")
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    world = learning.WORLDS[args.world]
    learning.world = world  # score_documents scores with the module's world
    probes = [probe for probe in world.PROBES if args.rule in (None, probe.rule)]
    if not probes:
        raise SystemExit(f"world {args.world} has no probes of rule {args.rule!r}: {', '.join(world.RULE_NAMES)}")
    results = {}
    print("| line | probes passed |")
    print("|---|---:|")
    for item in args.line:
        label, _, line = item.partition("=")
        scored = learning.score_documents(args.base_url, "", memory_with(world, [*args.other, line]), probes,
                                          night=args.night)
        passed = scored["by_rule"][args.rule] if args.rule else f"{scored['compliance']:.0%} ({scored['by_rule']})"
        results[label] = {"line": line, "passed": passed, "by_rule": scored["by_rule"],
                          "answers": [answer["answer"][:120] for answer in scored["answers"]]}
        print(f"| {label}: `{line}` | {passed} |", flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
