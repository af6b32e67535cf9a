"""What the user taught, on real histories nobody here wrote: recall and precision of the lasting rules a night finds.

The corpus is real public agent histories (Aider's ``.aider.chat.history.md``, Claude Code sessions, Codex rollouts,
Cline tasks), each labelled by hand before the tool ran (``benchmarks/real_rules/labels/<id>.json``: every lasting
convention with the user's exact words, every one-off correction, files that state no rule kept as negatives; the
labelling guide is ``benchmarks/real_rules/GUIDE.md``). The histories themselves are not committed (third-party data):
each label names the repository, commit, path and sha256 of its files, and ``assemble`` fetches them again from git
mirrors (``git --git-dir MIRROR show COMMIT:PATH``, sha256-checked) into ``--corpus``.

For each project the night's own code runs on its files (harvest at scope ``all``; mining at the defaults; the rule
reader on a model when ``--base-url`` is given) and the rules it would write into the memory (``scope == "lasting"``)
are matched with the labels:

* a mined rule *matches* a label when one of its phrasings and one of the label's quotes hold each other (after
  case, punctuation and spacing are normalised) or share most of their content words (``MATCH_OVERLAP``);
* recall: lasting labels matched by a lasting rule (overall, non-English, stated once); precision: lasting rules that
  match a lasting label. A false rule is sorted by kind: it matches a one-off label (``one-off``), its words are the
  agent's or a tool's (not in any typed text of the file: ``not typed``), or it is left for the reader (``other``,
  listed with ``--show``);
* assistant or tool text taken as typed: harvested requests whose text appears in the file outside what the user typed
  (an Aider reply or hand-off, a tool result), goal 0;
* tasks mined per typed request (the labels count the typed messages).

    python benchmarks/real_rules.py assemble --mirrors /work/.mirror --corpus ~/.cache/skillopt-sleep-real-rules
    python benchmarks/real_rules.py --corpus ~/.cache/skillopt-sleep-real-rules [--show] [--json FILE]
    python benchmarks/real_rules.py --corpus DIR --base-url http://127.0.0.1:18432/v1   # with the LLM rule reader
    python benchmarks/real_rules.py --corpus DIR --holdout    # the held-out projects (owners 0-9, A, B): run rarely
    python benchmarks/real_rules.py --corpus DIR --tree OLD_CHECKOUT    # an older version, same labels

The held-out projects (``benchmarks/real_rules/holdout/``) were labelled like the others but looked at only after the
rules were built, to check that what was tuned on the main corpus holds on histories it never saw.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
#: Another checkout's ``skillopt_sleep`` to measure instead (``--tree DIR``, read before anything is imported).
TREE = next((sys.argv[i + 1] for i, arg in enumerate(sys.argv[:-1]) if arg == "--tree"), str(REPO_ROOT))
sys.path.insert(0, TREE)

LABELS = REPO_ROOT / "benchmarks" / "real_rules" / "labels"
HOLDOUT = REPO_ROOT / "benchmarks" / "real_rules" / "holdout"
DEFAULT_CORPUS = Path(os.environ.get("SKILLOPT_SLEEP_REAL_RULES", Path.home() / ".cache" / "skillopt-sleep-real-rules"))
#: Share of the shorter text's content words the other must hold for a phrasing and a quote to match.
MATCH_OVERLAP = 0.6
_STOP = frozenset("a an and are as at be but by do does for from had has have i if in into is it its me my no not of "
                  "on or our so than that the their them then there these they this those to too us was we were what "
                  "when where which while who why will with would you your please just".split())


# --------------------------------------------------------------------------- the corpus


def load_labels(folder: Path = LABELS) -> list[dict]:
    return [json.loads(path.read_text(encoding="utf-8")) for path in sorted(folder.glob("*.json"))]


def files_of(label: dict) -> list[dict]:
    """Every file a label names: its history files, then its context files (e.g. Codex custom prompts)."""
    main = label.get("files") or [{"path": label["path"], "commit": label["commit"], "sha256": label["sha256"]}]
    return [*main, *label.get("context_files", [])]


def local_path(corpus: Path, label: dict, entry: dict) -> Path:
    """Where a labelled file lies in the corpus: ``files/<id>`` for a one-file Aider history, else
    ``files/<owner>__<repo>/<path in the repository>``."""
    if label["agent"] == "aider":
        return corpus / "files" / label["id"]
    return corpus / "files" / label["id"] / entry["path"]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def assemble(corpus: Path, mirrors: Path, labels: list[dict]) -> int:
    """Write every labelled file from the git mirrors ``mirrors/<owner>+<repo>`` (as the search tool's ``fetch``
    leaves them), checking each sha256. Returns the number of files missing or wrong."""
    bad = 0
    for label in labels:
        owner, repo = label["repo"].split("/")
        git_dir = mirrors / f"{owner}+{repo}" / "repo"
        for entry in files_of(label):
            target = local_path(corpus, label, entry)
            if target.is_file() and _sha256(target) == entry["sha256"]:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            done = subprocess.run(["git", "--git-dir", str(git_dir), "show", f"{entry['commit']}:{entry['path']}"],
                                  capture_output=True)
            if done.returncode != 0 or hashlib.sha256(done.stdout).hexdigest() != entry["sha256"]:
                print(f"missing or changed: {label['repo']}@{entry['commit'][:8]}:{entry['path']}", file=sys.stderr)
                bad += 1
                continue
            target.write_bytes(done.stdout)
    return bad


def layout(corpus: Path, label: dict, scratch: Path) -> dict[str, Path]:
    """The project's files laid out where its agent's harvester looks (source name -> root)."""
    agent = label["agent"]
    if agent == "aider":
        return {"aider": local_path(corpus, label, {})}
    root = scratch / agent
    for entry in files_of(label):
        source = local_path(corpus, label, entry)
        name = Path(entry["path"]).name
        if agent == "claude":
            target = root / "projects" / "-corpus" / name
        elif agent == "codex":
            day = re.search(r"(\d{4})/(\d{2})/(\d{2})/", entry["path"])
            if name.endswith(".md"):
                target = root / "prompts" / name
            else:
                target = root / "sessions" / (day.group(0) if day else "2025/01/01/") / name
        elif agent == "cline":
            target = root / "saoudrizwan.claude-dev" / "tasks" / "1700000000000" / name
        else:
            raise ValueError(f"no layout for agent {agent!r}")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
    return {agent: root}


# --------------------------------------------------------------------------- matching


def _norm(text: str) -> str:
    text = unicodedata.normalize("NFKC", text or "").casefold()
    return " ".join(re.findall(r"\w+", text))


def _content(text: str) -> set[str]:
    words = re.findall(r"\w+", unicodedata.normalize("NFKC", text or "").casefold())
    if any(ord(char) > 0x2E80 for char in "".join(words)):  # CJK: characters are the units
        return {char for word in words for char in word if char.isalnum()}
    return {word for word in words if word not in _STOP and len(word) > 1}


def matches(phrasing: str, quote: str) -> bool:
    """A mined phrasing and a label's quote say the same thing (module docstring)."""
    left, right = _norm(phrasing), _norm(quote)
    if not left or not right:
        return False
    if len(min(left, right, key=len)) >= 8 and (left in right or right in left):
        return True
    a, b = _content(phrasing), _content(quote)
    if not a or not b:
        return False
    return len(a & b) >= MATCH_OVERLAP * min(len(a), len(b)) and len(a & b) >= 2


@dataclass
class ProjectResult:
    id: str
    agent: str
    languages: list[str]
    typed_messages: int
    requests: int = 0
    tasks: int = 0
    lasting_labels: int = 0
    lasting_found: list[str] = field(default_factory=list)  # label ids
    lasting_missed: list[dict] = field(default_factory=list)
    rules: list[dict] = field(default_factory=list)  # every lasting rule: phrasings, verdict, kind, label
    not_typed_requests: list[str] = field(default_factory=list)
    candidates: int = 0
    one_offs: int = 0
    held_back: dict[str, str] = field(default_factory=dict)
    """Lasting labels read as a rule but held back: label id -> the scope given (candidate / one_off)."""
    seconds: float = 0.0
    llm_calls: int = 0


def _typed_texts(label: dict, homes: dict[str, Path]) -> str:
    """Every text the user typed in the project's files, as one normalised string (Aider: the ``####`` lines; JSON
    formats: the user-role text), to tell the agent's or a tool's words from the user's in a false rule."""
    agent = label["agent"]
    root = homes[agent]
    paths = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    chunks: list[str] = []
    for path in paths:
        text = path.read_text(encoding="utf-8", errors="replace")
        if agent == "aider":
            chunks += [line[5:] for line in text.splitlines() if line.startswith("#### ")]
            continue
        for line in text.splitlines() if path.suffix == ".jsonl" else [text]:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            chunks += _user_strings(record)
    return _norm("\n".join(chunks))


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _strings(item)]
    return []


def _user_strings(record) -> list[str]:
    """The strings of user-role messages in a JSON record (Claude Code, Codex, Cline), decoded."""
    if isinstance(record, list):
        return [text for item in record for text in _user_strings(item)]
    if not isinstance(record, dict):
        return []
    message = record.get("message") if isinstance(record.get("message"), dict) else record
    payload = record.get("payload") if isinstance(record.get("payload"), dict) else {}
    if message.get("role") == "user" or record.get("type") == "user" or payload.get("role") == "user" \
            or payload.get("type") == "user_message" or record.get("say") in ("task", "user_feedback"):
        return _strings(record)
    return []


def _file_text(homes: dict[str, Path]) -> str:
    root = next(iter(homes.values()))
    paths = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    return "\n".join(path.read_text(encoding="utf-8", errors="replace") for path in paths)


def run_project(corpus: Path, label: dict, *, reader_backend=None) -> ProjectResult:
    from skillopt_sleep.harvest import harvest
    from skillopt_sleep.mine import mine_tasks
    from skillopt_sleep.mine.rulebook import stated_rules

    result = ProjectResult(id=label["id"], agent=label["agent"], languages=label.get("languages", []),
                           typed_messages=int(label.get("typed_messages") or 0))
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        homes = layout(corpus, label, Path(scratch))
        harvested = harvest(source=label["agent"], scope="all", homes=homes, lookback_hours=0, workers=1)
        sessions = harvested.sessions
        result.requests = sum(len(session.turns) for session in sessions)
        options = {}
        if reader_backend is not None:
            from skillopt_sleep.mine.rule_reader import make_rule_reader

            options["rule_reader"] = make_rule_reader(reader_backend)
        mined = mine_tasks(sessions, project=None, val_fraction=0.0, test_fraction=0.0, max_tasks=10_000,
                           agent_answers=harvested.agent_answers, **options)
        result.llm_calls = getattr(mined, "reader_calls", 0)
        result.tasks = len(mined.tasks)
        rules = stated_rules([task.model_copy(update={"split": "train"}) for task in mined.tasks])
        typed = _typed_texts(label, homes)
        raw = _norm(_file_text(homes))
        result.not_typed_requests = [  # compared up to a secret the harvest redacted
            request[:120] for session in sessions for turn in session.turns if turn.kind != "command"
            for request in [turn.request.split("[REDACTED")[0]] if len(_norm(request)) >= 30
            and _norm(request)[:200] not in typed]  # a command's request is written from its name and arguments
    lasting = label.get("lasting", [])
    one_offs = label.get("one_off", [])
    result.lasting_labels = len(lasting)
    for rule in rules:
        scope = getattr(rule, "scope", "lasting")  # a tree from before scopes proposed every stated rule
        if scope != "lasting":
            result.candidates += scope == "candidate"
            result.one_offs += scope == "one_off"
            waiting = next((item for item in lasting if any(matches(p, q) for p in rule.phrasings
                                                            for q in item["quotes"])), None)
            if waiting is not None:
                result.held_back[waiting["id"]] = scope
            continue
        hit = next((item for item in lasting if any(matches(p, q) for p in rule.phrasings for q in item["quotes"])),
                   None)
        kind = "convention"
        if hit is None:
            if any(matches(p, item["quote"]) for p in rule.phrasings for item in one_offs):
                kind = "one-off"
            elif not any(_norm(p)[:60] in typed for p in rule.phrasings) and any(_norm(p)[:60] in raw
                                                                                  for p in rule.phrasings):
                kind = "not typed"
            else:
                kind = "other"
        result.rules.append({"phrasings": rule.phrasings[:3], "why": getattr(rule, "scope_reason", ""), "kind": kind,
                             "label": hit["id"] if hit else None, "stated": rule.stated})
    found = {rule["label"] for rule in result.rules if rule["label"]}
    result.lasting_found = sorted(found)
    result.lasting_missed = [{"id": item["id"], "rule": item["rule"], "quotes": item["quotes"][:2],
                              "language": item.get("language"), "times": item.get("times")}
                             for item in lasting if item["id"] not in found]
    result.seconds = time.perf_counter() - started
    return result


# --------------------------------------------------------------------------- the report


def summarise(results: list[ProjectResult], labels: dict[str, dict]) -> dict:
    lasting = [(result, item) for result in results for item in labels[result.id].get("lasting", [])]
    found = [(result, item) for result, item in lasting if item["id"] in result.lasting_found]

    def share(part: list, whole: list) -> str:
        return f"{len(part)}/{len(whole)}" + (f" ({100 * len(part) / len(whole):.0f}%)" if whole else "")

    non_english = [(r, i) for r, i in lasting if (i.get("language") or "en") != "en"]
    once = [(r, i) for r, i in lasting if int(i.get("times") or 1) == 1]
    clear = [(r, i) for r, i in lasting if i.get("confidence", "clear") == "clear"]
    rules = [rule for result in results for rule in result.rules]
    true = [rule for rule in rules if rule["kind"] == "convention"]
    kinds: dict[str, int] = {}
    for rule in rules:
        if rule["kind"] != "convention":
            kinds[rule["kind"]] = kinds.get(rule["kind"], 0) + 1
    typed = sum(result.typed_messages for result in results)
    return {
        "projects": len(results),
        "recall": share(found, lasting),
        "recall_clear": share([x for x in found if x[1].get("confidence", "clear") == "clear"], clear),
        "recall_non_english": share([x for x in found if x in non_english], non_english),
        "recall_stated_once": share([x for x in found if x in once], once),
        "precision": share(true, rules),
        "false_rules_by_kind": kinds,
        "not_typed_taken_as_typed": sum(len(result.not_typed_requests) for result in results),
        "tasks_per_typed_request": round(sum(result.tasks for result in results) / typed, 2) if typed else None,
        "candidates_waiting": sum(result.candidates for result in results),
        "missed_but_read": {scope: sum(1 for result in results for label, held in result.held_back.items()
                                       if held == scope and label not in result.lasting_found)
                            for scope in ("candidate", "one_off")},
        "llm_calls": sum(result.llm_calls for result in results),
        "seconds": round(sum(result.seconds for result in results), 1),
    }


def render(results: list[ProjectResult], summary: dict, *, show: bool) -> str:
    lines = ["| project | agent | typed | requests | tasks | lasting labels | found | rules | true |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for result in results:
        true = sum(1 for rule in result.rules if rule["kind"] == "convention")
        lines.append(f"| {result.id[:44]} | {result.agent} | {result.typed_messages} | {result.requests} | "
                     f"{result.tasks} | {result.lasting_labels} | {len(result.lasting_found)} | {len(result.rules)} | "
                     f"{true} |")
    lines += ["", *(f"* {key}: {value}" for key, value in summary.items())]
    if show:
        for result in results:
            lines.append(f"\n## {result.id}")
            for rule in result.rules:
                lines.append(f"  [{rule['kind']}{' ' + rule['label'] if rule['label'] else ''}] "
                             f"{rule['phrasings'][0][:140]!r} ({rule['why']})")
            for missed in result.lasting_missed:
                lines.append(f"  MISSED {missed['id']} ({missed['language']}, x{missed['times']}): "
                             f"{missed['quotes'][0][:140]!r}")
            for request in result.not_typed_requests[:5]:
                lines.append(f"  NOT TYPED: {request!r}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", nargs="?", default="run", choices=["run", "assemble"])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--mirrors", type=Path, help="assemble: the folder of fetched git mirrors")
    parser.add_argument("--holdout", action="store_true", help="the held-out projects (benchmarks/real_rules/holdout)")
    parser.add_argument("--only", help="a project id (prefix) to run alone")
    parser.add_argument("--tree", help="measure another checkout's skillopt_sleep (e.g. an older version)")
    parser.add_argument("--base-url", help="an OpenAI-compatible endpoint for the LLM rule reader (role miner)")
    parser.add_argument("--model", default="local", help="the model name at --base-url")
    parser.add_argument("--show", action="store_true", help="list every rule, missed label and text taken as typed")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    labels = load_labels(HOLDOUT if args.holdout else LABELS)
    if args.only:
        labels = [label for label in labels if label["id"].startswith(args.only)]
    if args.command == "assemble":
        if args.mirrors is None:
            parser.error("assemble needs --mirrors")
        return 1 if assemble(args.corpus, args.mirrors, labels) else 0
    backend = _reader_backend(args.base_url, args.model) if args.base_url else None
    results = [run_project(args.corpus, label, reader_backend=backend) for label in labels]
    summary = summarise(results, {label["id"]: label for label in labels})
    print(render(results, summary, show=args.show))
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "projects": [vars(r) for r in results]}, indent=2,
                                        ensure_ascii=False), encoding="utf-8")
    return 0


def _reader_backend(base_url: str, model: str):
    """A ``CallMeter`` on an OpenAI-compatible endpoint, as a night builds it (role ``miner``)."""
    from skillopt_sleep.backends.base import CallMeter
    from skillopt_sleep.backends.openai_compat import OpenAIBackend

    return CallMeter(OpenAIBackend(base_url=base_url, target_model=model, optimizer_model=model))


if __name__ == "__main__":
    raise SystemExit(main())
