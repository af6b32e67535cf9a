"""A second learning world, written independently of ``world.py``: a Python data team and its house rules.

Five rules, taught in other ways than world 1's "no, we use X here" (a rule per session in two sessions a night):

* ``uv``: install Python packages with uv, never pip. Stated in many sessions, in many styles: terse ("uv."), the
  indirect "we're a uv shop", and as the reply to a tool the user stopped (``pip install`` rejected in the permission
  prompt, then the correction).
* ``httpx``: HTTP calls with httpx, not requests. Polite and long ("Could you please use httpx instead? ...").
* ``logging``: the logging module, never print, for diagnostics. Terse ("logger, not print"), and a correction split
  over two messages ("no, not like that." / the agent asks / "use the logging module").
* ``utc``: timezone-aware UTC datetimes (``datetime.now(timezone.utc)``), never ``utcnow()`` or a naive ``now()``.
  Stated **once**, on night 1, after the agent's command had already run (the correction answers a tool result).
* ``formatter``: a rule that **changes on night 3**. Nights 1-2: format Python with black ("we format with black,
  not autopep8"); nights 3-4: "we moved from black to ruff: ruff format, never black". Probes are checked against the
  rule in force after that night.

Every night also holds two noise sessions: requests with no rule at all, answered and thanked.

Splits are a hash of the request (``mine.assign_split``, val 0.3, test 0.15), so the wording of a request decides
whether its session trains or is held out. The wordings were picked (small variations: "please", "for me") so that
each rule has a train session and, most nights, a val session; the rules' own phrasings were written first and not
changed.

``write_night_sessions`` writes Claude Code 2.1.x JSONL (FORMATS.md §1: uuid/parentUuid chain, sessionId, cwd,
version, tool_use / tool_result blocks with ``toolUseResult``, the rejection text and ``[Request interrupted by user
for tool use]`` marker as Claude Code writes them). ``PROBES`` (20: four per rule) never appear in a transcript;
``score_probe(probe, answer, night)`` is a deterministic checker. No LLM and no side effect at import.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

try:  # the calendar and the project folder convention both worlds share
    from benchmarks.world import night_day, night_run_time, sanitized_cwd  # noqa: F401
except ImportError:  # loaded by path beside world.py (benchmarks/peer/run_peer.py, in the peer's interpreter)
    from world import night_day, night_run_time, sanitized_cwd  # type: ignore[no-redef]  # noqa: F401

NAME = "data-team"
CLAUDE_CODE_VERSION = "2.1.97"
REJECTION = ("The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file "
             "edit, the new_string was NOT written to the file). STOP what you are doing and wait for the user to "
             "tell you how to proceed.")
INTERRUPT_FOR_TOOL = "[Request interrupted by user for tool use]"


@dataclass(frozen=True)
class Step:
    """One record group of a session: ``user`` text, ``assistant`` text, or an assistant ``tool`` call with its
    result (``output``; ``rejected``: the user refused it in the permission prompt)."""

    kind: str
    text: str = ""
    tool: str = "Bash"
    command: str = ""
    output: str = ""
    rejected: bool = False


def user(text: str) -> Step:
    return Step("user", text)


def agent(text: str) -> Step:
    return Step("assistant", text)


def tool(command: str, output: str = "", *, rejected: bool = False) -> Step:
    return Step("tool", command=command, output=output, rejected=rejected)


@dataclass(frozen=True)
class Session:
    """One session and the rule it teaches (None for noise)."""

    rule: str | None
    steps: tuple[Step, ...] = field(default_factory=tuple)


def session(rule: str | None, *steps: Step) -> Session:
    return Session(rule, tuple(steps))


@dataclass(frozen=True)
class Probe:
    rule: str
    prompt: str


# --------------------------------------------------------------------------- checkers

_UV = re.compile(r"\buv\s+(?:add|pip|sync|run|tool|lock|venv)\b")
_PIP = re.compile(r"(?<!uv )\bpip3?\s+install\b|\bpython3?\s+-m\s+pip\b")
_HTTPX = re.compile(r"\bhttpx\b")
_REQUESTS = re.compile(r"\bimport requests\b|\brequests\.(?:get|post|put|delete|patch|Session|request)\b")
_LOGGING = re.compile(r"\bimport logging\b|\blogging\.getLogger\b|\blogger\.\w+\(|\blogging\.(?:info|debug|warning|"
                      r"error|exception)\(")
_PRINT = re.compile(r"\bprint\(")
_AWARE = re.compile(r"timezone\.utc|\bUTC\b|ZoneInfo\(\s*['\"]UTC")
_NAIVE = re.compile(r"\butcnow\(|datetime\.now\(\s*\)|\bdatetime\.today\(")
_BLACK = re.compile(r"\bblack\b", re.IGNORECASE)
_RUFF_FORMAT = re.compile(r"\bruff\s+format\b")
_AUTOPEP8 = re.compile(r"\bautopep8\b|\byapf\b")


def check_uv(answer: str) -> bool:
    """pass: a uv command (``uv add``, ``uv pip install``, ``uv sync``...) and no bare ``pip install``."""
    return bool(_UV.search(answer)) and not _PIP.search(answer)


def check_httpx(answer: str) -> bool:
    """pass: uses httpx and never the requests library."""
    return bool(_HTTPX.search(answer)) and not _REQUESTS.search(answer)


def check_logging(answer: str) -> bool:
    """pass: uses the logging module (a logger) and no ``print(``."""
    return bool(_LOGGING.search(answer)) and not _PRINT.search(answer)


def check_utc(answer: str) -> bool:
    """pass: a timezone-aware UTC datetime and no ``utcnow()`` / naive ``datetime.now()``."""
    return bool(_AWARE.search(answer)) and not _NAIVE.search(answer)


def check_black(answer: str) -> bool:
    """pass (nights 1-2): formats with black, not autopep8/yapf/ruff format."""
    return bool(_BLACK.search(answer)) and not _AUTOPEP8.search(answer) and not _RUFF_FORMAT.search(answer)


def check_ruff_format(answer: str) -> bool:
    """pass (nights 3-4): formats with ``ruff format`` and never mentions black."""
    return bool(_RUFF_FORMAT.search(answer)) and not _BLACK.search(answer)


#: The night from which the formatter rule is ruff (it was black before).
FORMATTER_CHANGES_ON = 3


def checker(rule: str, night: int):
    """The checker of ``rule`` in force after night ``night`` (the formatter rule changes on night 3)."""
    if rule == "formatter":
        return check_ruff_format if night >= FORMATTER_CHANGES_ON else check_black
    return {"uv": check_uv, "httpx": check_httpx, "logging": check_logging, "utc": check_utc}[rule]


def score_probe(probe: Probe, answer: str, night: int) -> bool:
    """Score one probe answer with its rule's checker after night ``night``. Raises KeyError for an unknown rule."""
    return checker(probe.rule, night)(answer or "")


RULE_NAMES = ("uv", "httpx", "logging", "utc", "formatter")


def perfect_rules(night: int) -> list[str]:
    """The world's rules, written as well as we can, in force after night ``night`` (for the ceiling)."""
    formatter = ("Format Python with `ruff format`; never use black." if night >= FORMATTER_CHANGES_ON else
                 "Format Python with black; never autopep8 or yapf.")
    return ["Install Python packages with uv (`uv add PKG`, `uv pip install`); never plain `pip install`.",
            "Make HTTP calls with httpx (`import httpx`); never the requests library.",
            "Report diagnostics with the logging module (`logger = logging.getLogger(__name__)`); never print().",
            "Use timezone-aware UTC datetimes: `datetime.now(timezone.utc)`; never `utcnow()` or a naive now().",
            formatter]


# --------------------------------------------------------------------------- the sessions

_PIP_ANSWER = "Run `pip install {pkg}`."
_UV_ANSWER = "Run `uv add {pkg}`."


def _uv_terse(request: str, pkg: str) -> Session:
    return session("uv", user(request), agent(_PIP_ANSWER.format(pkg=pkg)), user("uv."),
                   agent(_UV_ANSWER.format(pkg=pkg)))


def _uv_shop(request: str, pkg: str) -> Session:
    return session("uv", user(request), agent(_PIP_ANSWER.format(pkg=pkg)), user("we're a uv shop"),
                   agent(_UV_ANSWER.format(pkg=pkg)))


def _uv_rejected_tool(request: str, pkg: str) -> Session:
    """The agent tries to run pip; the user refuses it in the permission prompt, then says why."""
    return session("uv", user(request), tool(f"pip install {pkg}", rejected=True),
                   user("we don't use pip in this project, add it with uv"),
                   tool(f"uv add {pkg}", f"Resolved 12 packages in 210ms\n + {pkg}"),
                   agent(f"Added {pkg} with `uv add {pkg}`."))


def _httpx_polite(request: str, wrong: str, right: str) -> Session:
    return session("httpx", user(request), agent(wrong),
                   user("Could you please use httpx instead of requests? That's what we use across the codebase. "
                        "Thanks!"), agent(right))


def _httpx_indirect(request: str, wrong: str, right: str) -> Session:
    return session("httpx", user(request), agent(wrong), user("this is an httpx codebase, requests is not installed"),
                   agent(right))


def _logging_terse(request: str, wrong: str, right: str) -> Session:
    return session("logging", user(request), agent(wrong), user("logger, not print"), agent(right))


def _logging_split(request: str, wrong: str, right: str) -> Session:
    """The correction comes in two messages: a bare "no", the agent asks, then the rule."""
    return session("logging", user(request), agent(wrong), user("no, not like that."),
                   agent("Sorry about that. What would you like me to change?"),
                   user("use the logging module for this, never print"), agent(right))


def _black(request: str, wrong: str, right: str, correction: str) -> Session:
    return session("formatter", user(request), agent(wrong), user(correction), agent(right))


def _noise(request: str, answer: str, thanks: str = "thanks") -> Session:
    return session(None, user(request), agent(answer), user(thanks))


_REQ_WRONG = "```python\nimport requests\n\nresponse = requests.get({url!r}, timeout=10)\n{tail}\n```"
_HTTPX_RIGHT = "```python\nimport httpx\n\nresponse = httpx.get({url!r}, timeout=10)\n{tail}\n```"
_PRINT_WRONG = "```python\ndef {fn}({args}):\n    print(f\"{msg}\")\n    {body}\n```"
_LOG_RIGHT = ("```python\nimport logging\n\nlogger = logging.getLogger(__name__)\n\n\ndef {fn}({args}):\n"
              "    logger.info(\"{msg2}\", {arg})\n    {body}\n```")


def _http(url: str, tail: str) -> tuple[str, str]:
    return _REQ_WRONG.format(url=url, tail=tail), _HTTPX_RIGHT.format(url=url, tail=tail)


def _log(fn: str, args: str, arg: str, body: str) -> tuple[str, str]:
    return (_PRINT_WRONG.format(fn=fn, args=args, msg=f"{fn} {{{arg}}}", body=body),
            _LOG_RIGHT.format(fn=fn, args=args, msg2=f"{fn} %s", arg=arg, body=body))


NIGHTS: list[list[Session]] = [
    [  # night 1
        _uv_terse("add pandas to the analytics project for me", "pandas"),
        _uv_shop("I need polars in this repo", "polars"),
        _httpx_polite("write a helper that downloads the daily exchange rates json",
                      *_http("https://rates.example.com/daily.json", "rates = response.json()")),
        _logging_terse("add a message when the nightly export starts", *_log("start_export", "job_id", "job_id",
                                                                              "run_export(job_id)")),
        session("utc", user("stamp each exported row with the time it was exported"),
                tool("python scripts/add_export_time.py", "patched scripts/export.py: exported_at = "
                                                          "datetime.utcnow()"),
                user("no, utcnow() is deprecated and naive. always use timezone-aware UTC: "
                     "datetime.now(timezone.utc)"),
                agent("```python\nfrom datetime import datetime, timezone\n\nrow[\"exported_at\"] = "
                      "datetime.now(timezone.utc).isoformat()\n```")),
        _black("what should I run to format the etl package?", "Run `autopep8 --in-place --recursive etl/`.",
               "Run `black etl/`.", "we format with black, not autopep8"),
        _noise("explain what the regex ^[A-Z]{3}-\\d{4}$ matches",
               "It matches three capital letters, a hyphen and four digits, e.g. `ABC-1234`."),
        _noise("write a SQL query that counts orders per customer please",
               "```sql\nSELECT customer_id, COUNT(*) AS orders\nFROM orders\nGROUP BY customer_id;\n```"),
    ],
    [  # night 2
        _uv_rejected_tool("install pyarrow for the parquet writer please", "pyarrow"),
        _uv_terse("add pytest-cov so we get coverage reports", "pytest-cov"),
        _httpx_indirect("fetch the list of open incidents from the status API for me",
                        *_http("https://status.example.com/api/incidents", "incidents = response.json()[\"items\"]")),
        _httpx_polite("please post the finished report to the webhook",
                      *_http("https://hooks.example.com/reports", "response.raise_for_status()")),
        _logging_split("report how many rows the loader skipped for me", *_log("load_rows", "rows", "skipped",
                                                                         "skipped = sum(1 for r in rows if not r)")),
        _black("how do I check formatting in CI without changing files?", "Run `autopep8 --diff --recursive .`.",
               "Run `black --check .`.", "black. not autopep8, we standardised on black"),
        _noise("what does git rebase --onto do?",
               "It replays the commits after a base onto a new base: `git rebase --onto new old branch`."),
        _noise("convert 72 degrees Fahrenheit to Celsius", "72 °F is about 22.2 °C."),
    ],
    [  # night 3: the formatter rule changes
        _uv_shop("add the duckdb package please", "duckdb"),
        _httpx_polite("write a function that checks whether the search service is up",
                      *_http("https://search.example.com/health", "return response.status_code == 200")),
        _logging_terse("log which file the importer is reading for me", *_log("import_file", "path", "path",
                                                                        "return parse(path.read_text())")),
        _logging_split("warn when the cache is older than a day for me", *_log("check_cache", "age_hours", "age_hours",
                                                                         "return age_hours < 24")),
        _black("format the whole repository please", "Run `black .`.", "Run `ruff format .`.",
               "we moved from black to ruff: use ruff format, never black"),
        _black("what do I run to format just the tests folder?", "Run `black tests/`.", "Run `ruff format tests/`.",
               "no black anymore, we switched to ruff format"),
        _noise("can you explain the difference between a list and a tuple in Python",
               "A list is mutable and a tuple is immutable; tuples can be dictionary keys."),
        _noise("write a SQL query for the ten largest invoices for me",
               "```sql\nSELECT id, total FROM invoices ORDER BY total DESC LIMIT 10;\n```"),
    ],
    [  # night 4: the change holds
        _uv_rejected_tool("install scikit-learn for the churn model please", "scikit-learn"),
        _uv_terse("add rich for nicer CLI output", "rich"),
        _httpx_indirect("download the holiday calendar as ics",
                        *_http("https://calendar.example.com/holidays.ics", "ics = response.text")),
        _logging_terse("say when the retry loop gives up for me", *_log("give_up", "attempts", "attempts",
                                                                 "raise TimeoutError(attempts)")),
        _black("format the notebooks helpers module", "Run `black helpers/notebooks.py`.",
               "Run `ruff format helpers/notebooks.py`.", "ruff format, not black. we moved off black"),
        _black("which pre-commit hook do we use for formatting?", "Use the `black` hook from psf/black.",
               "Use the `ruff-format` hook from astral-sh/ruff-pre-commit (`ruff format`).",
               "we switched from black to ruff format"),
        _noise("what is the time complexity of binary search?", "O(log n) comparisons on a sorted array."),
        _noise("rename the variable tmp to buffer in this snippet: tmp = []; tmp.append(1)",
               "```python\nbuffer = []\nbuffer.append(1)\n```"),
    ],
]

PROBES: list[Probe] = [
    Probe("uv", "Give me the command to add the requests-cache library to this project."),
    Probe("uv", "How do I install numpy here?"),
    Probe("uv", "Which command adds sqlalchemy as a dependency?"),
    Probe("uv", "Install the jinja2 package for the templates, what do I type?"),
    Probe("httpx", "Write Python that fetches https://api.example.com/users and returns the JSON."),
    Probe("httpx", "Show a Python function that sends a POST request with a JSON body to a URL."),
    Probe("httpx", "Write Python code that downloads a file from a URL and saves it to disk."),
    Probe("httpx", "Write a Python snippet that calls an HTTP endpoint with a bearer token header."),
    Probe("logging", "Write a Python function that divides two numbers and reports when the divisor is zero."),
    Probe("logging", "Add a diagnostic message to a Python function that connects to a database."),
    Probe("logging", "Write Python that reads a config file and tells the developer which keys are missing."),
    Probe("logging", "Write a Python loop over jobs that notes each job id as it starts."),
    Probe("utc", "Write Python that records the current time in a variable named created_at."),
    Probe("utc", "Show Python code that computes a timestamp one hour from now."),
    Probe("utc", "Write a Python function that returns today's date and time for an audit log entry."),
    Probe("utc", "Write Python that stores when a cache entry was written."),
    Probe("formatter", "What command formats all the Python files in this project?"),
    Probe("formatter", "How do I reformat the file app/main.py?"),
    Probe("formatter", "Which formatter should the CI job run on the code?"),
    Probe("formatter", "Give me the command to check formatting without modifying files."),
]

INITIAL_MEMORY = "# Data platform\n\nPython services and ETL jobs for the analytics team.\n"

def sessions_for(night: int) -> list[Session]:
    if not 1 <= night <= len(NIGHTS):
        raise ValueError(f"the world has nights 1..{len(NIGHTS)}, got {night}")
    return NIGHTS[night - 1]


def session_records(item: Session, *, session_id: str, project: Path, start: datetime, id_seed: int) -> list[dict]:
    """The JSONL records of one session (Claude Code 2.1.x envelope; deterministic for ``id_seed``)."""
    records: list[dict] = []
    parent: str | None = None
    moment = start
    counter = 0

    def envelope(kind: str) -> dict:
        nonlocal parent, moment, counter
        counter += 1
        moment += timedelta(seconds=20)
        record_id = str(uuid.UUID(int=id_seed * 1000 + counter))
        record = {"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": str(project),
                  "sessionId": session_id, "version": CLAUDE_CODE_VERSION, "gitBranch": "main", "type": kind,
                  "uuid": record_id, "timestamp": moment.strftime("%Y-%m-%dT%H:%M:%S.000Z"), "entrypoint": "cli"}
        parent = record_id
        return record

    def assistant(content: list[dict]) -> dict:
        record = envelope("assistant")
        record["message"] = {"role": "assistant", "id": f"msg_{record['uuid'][-12:]}", "type": "message",
                             "model": "claude-sonnet-4-5", "content": content, "stop_reason": "end_turn",
                             "usage": {"input_tokens": 50, "output_tokens": 20}}
        return record

    for step in item.steps:
        if step.kind == "user":
            record = envelope("user")
            record["message"] = {"role": "user", "content": step.text}
            records.append(record)
        elif step.kind == "assistant":
            records.append(assistant([{"type": "text", "text": step.text}]))
        else:
            call_id = f"toolu_{id_seed:04d}{counter:04d}"
            records.append(assistant([{"type": "tool_use", "id": call_id, "name": step.tool,
                                       "input": {"command": step.command, "description": "run it"}}]))
            result = envelope("user")
            if step.rejected:
                result["message"] = {"role": "user", "content": [
                    {"type": "tool_result", "content": REJECTION, "is_error": True, "tool_use_id": call_id}]}
                result["toolUseResult"] = "User rejected tool use"
                records.append(result)
                marker = envelope("user")
                marker["message"] = {"role": "user", "content": [{"type": "text", "text": INTERRUPT_FOR_TOOL}]}
                records.append(marker)
            else:
                result["message"] = {"role": "user", "content": [
                    {"tool_use_id": call_id, "type": "tool_result", "content": step.output, "is_error": False}]}
                result["toolUseResult"] = {"stdout": step.output, "stderr": "", "interrupted": False}
                records.append(result)
    return records


def write_sessions(claude_home: Path, project: Path, items: list[Session], *, first_seed: int, day: datetime,
                   minutes_apart: int = 45) -> list[Path]:
    """Write ``items`` as Claude Code sessions under ``<claude_home>/projects/<sanitized project>/``, the n-th one
    with uuid and record seed ``first_seed + n``, starting at 08:00 + ``minutes_apart`` x n on ``day``; return the
    files. Every world writes its nights through this."""
    folder = Path(claude_home) / "projects" / sanitized_cwd(Path(project))
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for number, item in enumerate(items):
        seed = first_seed + number
        session_id = str(uuid.UUID(int=seed))
        start = day + timedelta(hours=8, minutes=minutes_apart * number)
        records = session_records(item, session_id=session_id, project=Path(project), start=start, id_seed=seed)
        path = folder / f"{session_id}.jsonl"
        path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
        written.append(path)
    return written


def write_night_sessions(claude_home: Path, project: Path, night: int) -> list[Path]:
    """Write night ``night``'s sessions under ``<claude_home>/projects/<sanitized project>/``; return the files."""
    return write_sessions(claude_home, project, sessions_for(night), first_seed=(night + 50) * 1000,
                          day=night_day(night))


def transcript_text() -> str:
    """Every text of every session (to prove the probes are held out)."""
    return "\n".join(" ".join([step.text, step.command, step.output]) for night in NIGHTS for item in night
                     for step in item.steps)
