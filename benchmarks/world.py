"""A simulated developer world for the learning benchmark: house rules taught only through corrections.

The developer has four house rules (``RULES``): pnpm not npm, ISO dates (YYYY-MM-DD), Conventional Commits,
pathlib not os.path. Each night they hold a few Claude Code sessions: a request, the answer an unguided model
gives (``npm install``, ``11/03/2026``, ``Updated files``, ``os.path.join``), a correction in the user's own
words (varied phrasing), and the agent's fixed answer. New requests every night, same rules.

``write_night_sessions`` writes those sessions as real Claude Code 2.1.x JSONL (FORMATS.md §1) under
``<claude_home>/projects/<sanitized cwd>/<sessionId>.jsonl``. ``PROBES`` are held-out prompts that never appear in
any transcript; ``score_probe`` scores an answer with a deterministic checker (``CHECKERS``).

No side effects at import; no LLM here.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

#: Claude Code version written into every record (a 2.1.x envelope).
CLAUDE_CODE_VERSION = "2.1.80"


@dataclass(frozen=True)
class Conversation:
    """One session: the request, the unguided answer, the user's correction and the agent's fixed answer."""

    rule: str
    request: str
    wrong_answer: str
    correction: str
    fixed_answer: str


@dataclass(frozen=True)
class Probe:
    """A held-out prompt and the rule its answer is checked against."""

    rule: str
    prompt: str


# --------------------------------------------------------------------------- checkers

_PNPM = re.compile(r"\bpnpm\b", re.IGNORECASE)
_BARE_NPM = re.compile(r"\bnpm\b", re.IGNORECASE)  # "pnpm" does not match: no word boundary between p and n
_ISO = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_MDY = re.compile(r"\b\d{1,2}/\d{1,2}/\d{2,4}\b")
_CONVENTIONAL_SUBJECT = re.compile(
    r"^(?:feat|fix|docs|style|refactor|perf|test|build|ci|chore|revert)(?:\([\w.,/ -]+\))?!?: \S")
_PATHLIB = re.compile(r"\bpathlib\b|\bPath\(")
_OS_PATH = re.compile(r"\bos\.path\b")
_LINE_PREFIX = re.compile(r"^(?:[-*>]\s+|git commit -m\s+|commit message:\s*|subject:\s*)", re.IGNORECASE)


def check_pnpm(answer: str) -> bool:
    """pass: the answer names pnpm and has no bare ``npm`` word (``pnpm`` itself is not a bare npm)."""
    return bool(_PNPM.search(answer)) and not _BARE_NPM.search(answer)


def check_iso_date(answer: str) -> bool:
    """pass: the answer holds an ISO date (YYYY-MM-DD) and no M/D/Y date (``11/21/2026``, ``3/5/27``)."""
    return bool(_ISO.search(answer)) and not _MDY.search(answer)


def commit_subject_lines(answer: str) -> list[str]:
    """Candidate subject lines: every non-empty line, stripped of quotes, backticks, bullets, ``git commit -m``."""
    lines = []
    for raw in answer.splitlines():
        line = raw.strip().strip("`'\"").strip()
        line = _LINE_PREFIX.sub("", line).strip().strip("`'\"").strip()
        if line and not line.startswith("```"):
            lines.append(line)
    return lines


def check_conventional_commit(answer: str) -> bool:
    """pass: some line of the answer is a Conventional Commit subject (``type(scope)?!?: subject``).

    type: feat, fix, docs, style, refactor, perf, test, build, ci, chore, revert (lower case, as the spec
    writes them). A line may be wrapped in quotes/backticks or follow ``git commit -m``.
    """
    return any(_CONVENTIONAL_SUBJECT.match(line) for line in commit_subject_lines(answer))


def check_pathlib(answer: str) -> bool:
    """pass: the answer uses pathlib (``pathlib`` or ``Path(``) and never ``os.path``."""
    return bool(_PATHLIB.search(answer)) and not _OS_PATH.search(answer)


CHECKERS = {
    "pnpm": check_pnpm,
    "iso_date": check_iso_date,
    "conventional_commits": check_conventional_commit,
    "pathlib": check_pathlib,
}

#: The four house rules, in the words a skill document might use (for reports only; never shown to a model).
RULES = {
    "pnpm": "use pnpm, never npm",
    "iso_date": "write dates as ISO YYYY-MM-DD",
    "conventional_commits": "commit messages follow Conventional Commits",
    "pathlib": "use pathlib, never os.path",
}


NAME = "webshop"
RULE_NAMES = tuple(CHECKERS)


def score_probe(probe: Probe, answer: str, night: int = 0) -> bool:
    """Score one probe answer with its rule's checker (the rules never change in this world: ``night`` is unused).
    Raises KeyError for an unknown rule."""
    return CHECKERS[probe.rule](answer or "")


def perfect_rules(night: int = 0) -> list[str]:
    """The world's rules, written as well as we can (for the ceiling: compliance with them in the memory)."""
    return ["Install and run packages with pnpm (`pnpm add`, `pnpm install`, `pnpm run`); never npm.",
            "Write every date as ISO 8601, YYYY-MM-DD (e.g. 2026-11-21), never MM/DD/YYYY or month names.",
            "Write commit messages as Conventional Commits: `type(scope): subject` with type feat, fix, docs, "
            "chore, refactor, test, ci or build.",
            "In Python, handle paths with pathlib (`from pathlib import Path`); never os.path."]


# --------------------------------------------------------------------------- the sessions

_P, _D, _C, _L = "pnpm", "iso_date", "conventional_commits", "pathlib"

#: Per night, two sessions per rule; requests never repeat across nights. Night k uses ``NIGHTS[k-1]``.
NIGHTS: list[list[Conversation]] = [
    [
        Conversation(_P, "install the dependencies for this repo", "Run `npm install`.",
                     "no, we use pnpm in this repo, never npm", "Run `pnpm install`."),
        Conversation(_P, "add axios to the project", "Run `npm install axios`.",
                     "wrong tool: use pnpm, not npm", "Run `pnpm add axios`."),
        Conversation(_D, "add a changelog entry for the 1.3.0 release, which shipped on November 3, 2026",
                     "## 1.3.0 - 11/03/2026\n- Bug fixes and improvements.",
                     "dates are ISO here, YYYY-MM-DD please", "## 1.3.0 - 2026-11-03\n- Bug fixes and improvements."),
        Conversation(_D, "write a one-line notice that staging is down for maintenance on December 1, 2026",
                     "Staging will be down for maintenance on 12/01/2026.",
                     "no, use ISO dates (YYYY-MM-DD) in this repo",
                     "Staging will be down for maintenance on 2026-12-01."),
        Conversation(_C, "write the commit message for the change that adds rate limiting to the API",
                     "Updated files", "no, we use Conventional Commits here",
                     "feat(api): add rate limiting"),
        Conversation(_C, "commit message for fixing the typo in the signup form", "Fixed typo",
                     "wrong format, commit messages must follow conventional commits",
                     "fix(signup): correct typo in the form"),
        Conversation(_L, "write python that reads settings.json next to the current script",
                     "```python\nimport os, json\npath = os.path.join(os.path.dirname(__file__), 'settings.json')\n"
                     "with open(path) as f:\n    settings = json.load(f)\n```",
                     "no, we use pathlib here, never os.path",
                     "```python\nimport json\nfrom pathlib import Path\n"
                     "settings = json.loads((Path(__file__).parent / 'settings.json').read_text())\n```"),
        Conversation(_L, "python snippet that creates the build/output directory if it is missing",
                     "```python\nimport os\nif not os.path.exists('build/output'):\n"
                     "    os.makedirs('build/output')\n```",
                     "use pathlib, not os.path",
                     "```python\nfrom pathlib import Path\n"
                     "Path('build/output').mkdir(parents=True, exist_ok=True)\n```"),
    ],
    [
        Conversation(_P, "how do I start the dev server?", "Run `npm run dev`.",
                     "nope, we use pnpm in this project, not npm", "Run `pnpm dev`."),
        Conversation(_P, "remove the unused left-pad package", "Run `npm uninstall left-pad`.",
                     "don't use npm here, use pnpm", "Run `pnpm remove left-pad`."),
        Conversation(_D, "put the release date October 30, 2026 in the footer text",
                     "Released on 10/30/2026.", "wrong date format, we always write dates as YYYY-MM-DD",
                     "Released on 2026-10-30."),
        Conversation(_D, "draft the header of the notes for the sprint review on November 12, 2026",
                     "# Sprint review - 11/12/2026", "no, dates must be ISO 8601 in this repo",
                     "# Sprint review - 2026-11-12"),
        Conversation(_C, "write a commit message for bumping the node version in CI", "Update CI",
                     "no, use conventional commits for every commit message", "ci: bump node version"),
        Conversation(_C, "give me a commit message for the new CSV export button", "Added CSV export",
                     "not like that, we follow Conventional Commits in this repo", "feat(export): add CSV button"),
        Conversation(_L, "python code that prints the size of report.pdf in bytes",
                     "```python\nimport os\nprint(os.path.getsize('report.pdf'))\n```",
                     "no, use pathlib instead of os.path",
                     "```python\nfrom pathlib import Path\nprint(Path('report.pdf').stat().st_size)\n```"),
        Conversation(_L, "python to check whether the cache folder exists",
                     "```python\nimport os\nexists = os.path.isdir('cache')\n```",
                     "we always use pathlib in this codebase, never os.path",
                     "```python\nfrom pathlib import Path\nexists = Path('cache').is_dir()\n```"),
    ],
    [
        Conversation(_P, "add eslint as a dev dependency", "Run `npm install --save-dev eslint`.",
                     "no, pnpm only in this repo, never npm", "Run `pnpm add -D eslint`."),
        Conversation(_P, "how do I build the project for production?", "Run `npm run build`.",
                     "wrong, we use pnpm, not npm", "Run `pnpm build`."),
        Conversation(_D, "write the release note line for version 3.0 released on September 9, 2026",
                     "v3.0 released 9/9/2026.", "dates are ISO in this repo: YYYY-MM-DD",
                     "v3.0 released 2026-09-09."),
        Conversation(_D, "add a 'last reviewed' line to the security policy, reviewed on August 14, 2026",
                     "Last reviewed: 08/14/2026", "no, use ISO dates, YYYY-MM-DD", "Last reviewed: 2026-08-14"),
        Conversation(_C, "commit message for splitting the user service into two modules", "Refactored user service",
                     "no, commit messages follow conventional commits here", "refactor(user): split the service"),
        Conversation(_C, "commit message for adding tests for the cart total", "Added tests",
                     "wrong, use conventional commits", "test(cart): cover the total"),
        Conversation(_L, "python that lists every .log file under ./logs",
                     "```python\nimport os\nlogs = [f for f in os.listdir('logs') if f.endswith('.log')]\n```",
                     "no, we use pathlib, not os",
                     "```python\nfrom pathlib import Path\nlogs = list(Path('logs').glob('*.log'))\n```"),
        Conversation(_L, "python to get the parent directory of a given file path",
                     "```python\nimport os\nparent = os.path.dirname(file_path)\n```",
                     "don't use os.path in this codebase, use pathlib",
                     "```python\nfrom pathlib import Path\nparent = Path(file_path).parent\n```"),
    ],
]

#: Held-out probes: four per rule; none appears in any transcript.
PROBES: list[Probe] = [
    Probe(_P, "Give me the command to add lodash to this project."),
    Probe(_P, "What command installs the dependencies after cloning this repo?"),
    Probe(_P, "What command runs the test script of this project?"),
    Probe(_P, "Give me the command to add vitest as a dev dependency."),
    Probe(_D, "Write the changelog heading for today's release, version 2.4.0. Today is November 21, 2026."),
    Probe(_D, "Write a one-line note saying the API freeze starts on March 5, 2027."),
    Probe(_D, "Write a 'Last updated' line for the README; it was updated on July 4, 2026."),
    Probe(_D, "Write a deprecation notice: the v1 endpoint will be removed on January 15, 2027."),
    Probe(_C, "Write a commit message for a fix to the login timeout."),
    Probe(_C, "Write a commit message for adding a dark mode toggle to the settings page."),
    Probe(_C, "Write a commit message for updating the README installation steps."),
    Probe(_C, "Write a commit message for removing the unused logger module."),
    Probe(_L, "Show Python code that lists the .md files in ./docs."),
    Probe(_L, "Write a Python function that returns True if config.yaml exists in the project root."),
    Probe(_L, "Show Python code that joins the folder 'data' and the file name 'users.csv'."),
    Probe(_L, "Write Python code that gets the file extension of a given filename."),
]

#: Night 1's sessions happen on this day; night k's on the day k-1 later.
FIRST_NIGHT_DAY = datetime(2026, 11, 18, tzinfo=timezone.utc)


def night_day(night: int) -> datetime:
    """Midnight UTC of night ``night`` (1-based)'s working day."""
    return FIRST_NIGHT_DAY + timedelta(days=night - 1)


def night_run_time(night: int) -> datetime:
    """When night ``night`` runs: 23:30 UTC of its working day (after all its sessions)."""
    return night_day(night) + timedelta(hours=23, minutes=30)


def sanitized_cwd(project: Path) -> str:
    """Claude Code's project folder name: the absolute cwd with every non-alphanumeric character as ``-``."""
    return re.sub(r"[^A-Za-z0-9]", "-", str(project))


def conversations_for(night: int) -> list[Conversation]:
    """The sessions of night ``night`` (1-based). Raises ValueError beyond ``len(NIGHTS)``."""
    if not 1 <= night <= len(NIGHTS):
        raise ValueError(f"the world has nights 1..{len(NIGHTS)}, got {night}")
    return NIGHTS[night - 1]


def session_records(conversation: Conversation, *, session_id: str, project: Path, start: datetime,
                    id_seed: int) -> list[dict]:
    """The JSONL records of one session: user request, assistant answer, user correction, assistant fix.

    Envelope of Claude Code 2.1.x: parentUuid, isSidechain, userType, cwd, sessionId, version, gitBranch, type,
    message, uuid, timestamp (ISO 8601 with ``Z``), entrypoint ``cli``; assistant messages carry id, model,
    content blocks and stop_reason. Deterministic for a given ``id_seed``.
    """
    turns = (("user", conversation.request), ("assistant", conversation.wrong_answer),
             ("user", conversation.correction), ("assistant", conversation.fixed_answer))
    records, parent, moment = [], None, start
    for turn, (role, text) in enumerate(turns):
        moment += timedelta(seconds=30 + 15 * turn)
        record_id = str(uuid.UUID(int=id_seed * 100 + turn))
        record = {"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": str(project),
                  "sessionId": session_id, "version": CLAUDE_CODE_VERSION, "gitBranch": "main", "type": role,
                  "uuid": record_id, "timestamp": moment.strftime("%Y-%m-%dT%H:%M:%S.000Z"), "entrypoint": "cli"}
        if role == "user":
            record["message"] = {"role": "user", "content": text}
        else:
            record["message"] = {"role": "assistant", "id": f"msg_{record_id[-12:]}", "type": "message",
                                 "model": "claude-sonnet-4-5", "content": [{"type": "text", "text": text}],
                                 "stop_reason": "end_turn", "usage": {"input_tokens": 50, "output_tokens": 20}}
        records.append(record)
        parent = record_id
    return records


def write_night_sessions(claude_home: Path, project: Path, night: int) -> list[Path]:
    """Write night ``night``'s sessions under ``<claude_home>/projects/<sanitized project>/``; return the files.

    One session per conversation, 40 minutes apart from 09:00 UTC of the night's day. Session ids are
    deterministic (``uuid(int=night*1000+n)``). Raises ValueError for a night the world does not have.
    """
    folder = Path(claude_home) / "projects" / sanitized_cwd(Path(project))
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for number, conversation in enumerate(conversations_for(night)):
        session_id = str(uuid.UUID(int=night * 1000 + number))
        start = night_day(night) + timedelta(hours=9, minutes=40 * number)
        records = session_records(conversation, session_id=session_id, project=Path(project), start=start,
                                  id_seed=night * 1000 + number)
        path = folder / f"{session_id}.jsonl"
        path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
        written.append(path)
    return written


def transcript_text() -> str:
    """Every user and assistant text of every night, joined (to prove probes are held out)."""
    return "\n".join(part for night in NIGHTS for c in night
                     for part in (c.request, c.wrong_answer, c.correction, c.fixed_answer))


INITIAL_MEMORY = "# Web shop\n\nA TypeScript web shop with a few Python maintenance scripts.\n"
