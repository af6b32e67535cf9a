"""What the user typed in a message, as opposed to what they pasted into it: recognised by what it is, not its length.

A user message often carries text nobody on the team wrote: a log, a stack trace, a compiler's or a server's output, a
JSON or XML document, code, a diff, a terminal screen. Such a paste is recognised by its shape:

* a fenced block (```` ``` ```` or ``~~~``, closed by the same fence or by the message's end), and ``>`` quoted lines;
* machine-shaped lines (``PASTE_SHAPES``): log lines (a timestamp, a level such as ``INFO`` / ``ERROR``), traces
  (``Traceback (most recent call last):``, ``  File "x.py", line 3``, ``    at f (app.js:1:2)``, ``FooError: …``),
  compiler and linter diagnostics (``src/a.ts(3,5): error TS2345``, ``a.c:3:5: warning:``, ``error[E0425]:``, a code
  frame ``  12 | …`` and its ``^^^``, a problem copied from an editor, ending in its source and code: ``ts(2307)``),
  HTTP lines (``GET /x HTTP/1.1``, ``HTTP/1.1 404``, ``Status Code: 500``), JSON and XML lines, shell prompts
  (``$ cmd``, ``PS C:\\>``, ``user@host:~$``), diffs (``@@ -1 +1 @@``, ``+++ b/x``), tree
  drawings (``├──``), and code (a line that opens with a keyword such as ``def`` / ``import`` / ``const`` and holds
  code punctuation, or ends in ``;`` / ``{`` / ``}``, before a trailing ``//`` or ``#`` comment), a command line
  (``npm run dev``, ``COMMAND_LINE``), lines that repeat one template (``TEMPLATE_REPEATS``: a program's output),
  and a page's chrome (``PAGE_LINES`` lines, most of them a word or three);
* inside a paragraph, every line between its first and last machine-shaped lines is pasted too (the code line of a
  traceback, a value of a document); the prose that opens or closes the paragraph ("here is the log:", "why?") is
  typed;
* a message holding ``DOCUMENT_PASTES`` or more separate unfenced pastes is a pasted document (a library's docs page
  with its examples, a tutorial): the prose between its first and last paste is the document's too ("Error Handling:
  Always check the result.success flag" between two code examples is crawl4ai's advice, not the user's rule). What
  opens or closes the message stays typed.

Everything else is typed: a long message and a typed instruction block are read line by line, and an indented line is
not code because it is indented. A block an agent wrote earlier (pasted back into a message) is recognised against
the transcript by ``mine.requests.AgentTexts.without_copies`` before the text comes here.

``typed_text(message)``: the typed part, which rules and the names a correction mentions are read from;
``authored_text(message)``: the same, compacted and cut, kept as ``TaskRecord.authored`` (the provenance an edit's
commands, URLs and paths must come from); ``segments(message)``: the message as ``(kind, text)`` pieces, kind ``typed``
or how it was pasted (``fenced``, ``quoted``, ``machine``).
"""

from __future__ import annotations

import re

#: Characters of one user-authored text kept (a longer one is cut).
AUTHORED_CHARS = 4000

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_QUOTED = re.compile(r"^\s*>")
_CODE_START = re.compile(
    r"^\s*(?:def|class|import|from\s+\S+\s+import|function|const|let|var|return|public|private|protected|static|"
    r"async|await|package|func|fn|impl|struct|enum|interface|type|module|export|#include|#define|using|namespace|"
    r"if\s*\(|for\s*\(|while\s*\(|switch\s*\(|try\s*\{|catch\s*\(|else\s*\{|\}\s*else|elif\b|except\b|with\s+\S+\s+as)"
    r"\b[^\n]*[(){}\[\]=:;<>]")
_CODE_END = re.compile(r"(?:[;{}]|\)\s*:|=>\s*\{?|\):?\s*\{)\s*$")
_PROSE_WORD = re.compile(r"[^\W\d_]{2,}")
_TRAILING_COMMENT = re.compile(r"(?<=[;{}])\s*(?://|#)\s.*$")
PASTE_SHAPES = re.compile(
    r"^\s*\[?\d{1,4}[-/.:]\d{1,2}[-/.:]\d{1,4}[ T\]]"  # a timestamp that opens a log line
    r"|^\s*\d+:\d{2}:\d{2}[.,]\d+"  # a clock with fractions (gstreamer, syslog)
    r"|(?:^|[\s\[])(?:INFO|DEBUG|WARN|WARNING|ERROR|FATAL|TRACE|CRITICAL|NOTICE)(?:[\s:\]]|$)"  # a log level
    r"|^\s*Traceback \(most recent call last\)|^\s*File \"[^\"]+\", line \d+|^\s*at \S+ \(\S+:\d+:\d+\)"
    r"|^\s*at \S+:\d+:\d+|^\s*[A-Za-z_.]*(?:Error|Exception)(?::\s|$)|^\s*Caused by: "
    r"|^\S+\.\w+[:(]\d+[:,]\d+\)?:?\s*(?:error|warning|note|info)\b|^\s*error(?:\[\w+\])?:|^\s*--> \S+:\d+"
    r"|^\s*\d+\s*[|│]|^\s*[\^~]{2,}\s*$|\bnpm (?:ERR!|WARN)|^\s*(?:ERROR|WARNING) in "
    r"|(?:\b|(?<=\.))(?:ts|eslint|Pylance|pylint|Ruff|flake8|mypy|pyright)\([\w/@.-]+\)(?:\s*\[Ln \d+, Col \d+\])?\s*$"
    r"|^\s*(?:GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS) /\S* HTTP/|\bHTTP/\d(?:\.\d)? \d{3}\b"
    r"|\b[Ss]tatus(?: [Cc]ode)?[: ]+[1-5]\d\d\b"
    r"|^\s*[{}\[\]],?\s*$|^\s*\"[^\"]+\"\s*:\s*\S"  # JSON
    r"|^\s*</?[A-Za-z][\w:.-]*(?:\s[^>]*)?/?>.*>?\s*$"  # XML / HTML
    r"|^\s*(?:\$|PS [A-Z]:\\[^>]*>|\S+@\S+:\S*[$#])\s"  # shell prompts
    r"|^(?:\+\+\+|---) [ab/]|^@@ -\d|^diff --git "  # diffs
    r"|[├└│┌┐┘┬┴┼]"  # tree and table drawings
    r"|^\s*(?://|/\*|\*/|<!--)"  # code comments
)
"""Lines shaped like machine output (module docstring); case-sensitive: "ERROR" is a log level, "error" a word."""


COMMAND_LINE = re.compile(
    r"^\s*(?:\$\s*)?(?:sudo\s+)?(?:npm|npx|pnpm|yarn|pip3?|python3?|node|deno|bun|git|curl|wget|docker|kubectl|make|"
    r"cargo|go|uv|uvx|poetry|bash|sh|zsh|cd|ls|cat|rm|mv|cp|mkdir|chmod|chown|export|apt(?:-get)?|brew|conda|java|"
    r"mvn|gradle|dotnet|ruby|gem|bundle|rails|php|composer|terraform|gcloud|aws|az|kill|ps|grep|rg|find|sed|awk|tar|"
    r"unzip|ssh|scp|source|pytest|ruff|black|flake8|mypy|eslint|prettier|tsc|vite|next|flask|uvicorn|gunicorn)"
    r"(?:\s+\S+)+\s*$|^\s*(?:ls|pwd|ll)\s*$")
"""A command line: a program others run every day and its arguments (``npm run dev``, ``git status --short``)."""
_PROSE = frozenset("a an and are as but by can could for from how i if in into is it me my not of on or our please so "
                   "should that the then this to too us want we what when which why will with would you your only "
                   "always never no instead rather don't dont do use prefer here".split())


def command_line(line: str) -> bool:
    """``line`` is a command and its arguments, not a sentence that names one (``COMMAND_LINE``; "git check in and
    push" holds prose words: a request)."""
    return COMMAND_LINE.match(line) is not None and not any(
        word in _PROSE for word in re.findall(r"[a-z']+", line.lower()))


def _machine(line: str) -> bool:
    """A line shaped like output or code rather than prose (module docstring)."""
    if PASTE_SHAPES.search(line) or _CODE_START.match(line) or command_line(line):
        return True
    code = _TRAILING_COMMENT.sub("", line)  # "fetchFeedData(); // Call fetchFeedData here": code, then a comment
    words = len(_PROSE_WORD.findall(code))
    return bool(_CODE_END.search(code)) and words <= 6


#: Lines of one shape (digits and hex runs aside) from which they are a program's output, not typing.
TEMPLATE_REPEATS = 3
#: Separate unfenced pastes from which a message is a pasted document (module docstring).
DOCUMENT_PASTES = 4
#: Lines from which a paragraph made mostly of very short lines (<= 3 words, no list bullet) is a pasted page.
PAGE_LINES = 8
_DIGITS = re.compile(r"\b(?:0x)?[0-9a-f]*\d[0-9a-f]*\b|\d+", re.IGNORECASE)
_LIST_ITEM = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s")


def _templated(lines: list[str]) -> set[int]:
    """Indexes of the lines that share their shape (words kept, numbers and hex runs masked) with at least
    ``TEMPLATE_REPEATS - 1`` others: a program's output repeats itself, a person rarely does."""
    shapes = [" ".join(_DIGITS.sub("#", line).split()) if len(line.split()) >= 3 else None for line in lines]
    counts: dict[str, int] = {}
    for shape in shapes:
        if shape is not None:
            counts[shape] = counts.get(shape, 0) + 1
    return {index for index, shape in enumerate(shapes) if shape is not None and counts[shape] >= TEMPLATE_REPEATS}


def _page(lines: list[str]) -> bool:
    """A pasted page's chrome: many lines, most of them a word or three with no list bullet ("Labels",
    "No assignees")."""
    short = [line for line in lines if len(line.split()) <= 3 and not _LIST_ITEM.match(line)]
    return len(lines) >= PAGE_LINES and len(short) >= 0.7 * len(lines)


def segments(message: str) -> list[tuple[str, str]]:
    """``message`` as ``(kind, text)`` pieces in order: ``typed``, or ``fenced`` / ``quoted`` / ``machine`` for what
    was pasted (module docstring). Consecutive pieces of one kind are joined."""
    pieces: list[tuple[str, str]] = []

    def add(kind: str, line: str) -> None:
        if pieces and pieces[-1][0] == kind:
            pieces[-1] = (kind, pieces[-1][1] + "\n" + line)
        else:
            pieces.append((kind, line))

    paragraph: list[str] = []

    def flush() -> None:
        lines = [line for line in paragraph if line.strip()]
        templated = _templated(lines)
        page = _page(lines)
        machine = [page or index in templated or _machine(line) for index, line in enumerate(lines)]
        marks = [index for index, shaped in enumerate(machine) if shaped]
        for index, line in enumerate(lines):
            # a line between two machine-shaped lines of its paragraph is part of that paste (a code line of a
            # traceback, a value of a document); the prose that opens or closes the paragraph stays typed
            inside = bool(marks) and marks[0] < index < marks[-1]
            add("machine" if machine[index] or inside else "typed", line)
        paragraph.clear()

    fence: str | None = None
    for line in (message or "").splitlines():
        if fence is not None:
            add("fenced", line)
            stripped = line.strip()
            if stripped and set(stripped) == {fence[0]} and len(stripped) >= len(fence):
                fence = None
            continue
        opening = _FENCE.match(line)
        if opening is not None:
            flush()
            fence = opening.group(1)
            add("fenced", line)
        elif _QUOTED.match(line):
            flush()
            add("quoted", line)
        elif not line.strip():
            flush()
            if pieces and pieces[-1][0] == "typed":
                add("typed", "")
        else:
            paragraph.append(line)
    flush()
    return _document(pieces)


def _document(pieces: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """``pieces`` with the typed pieces between the first and last of ``DOCUMENT_PASTES`` or more unfenced pastes
    marked ``machine``: a pasted document's prose (module docstring)."""
    pasted = [index for index, (kind, _) in enumerate(pieces) if kind == "machine"]
    if len(pasted) < DOCUMENT_PASTES:
        return pieces
    return [("machine" if kind == "typed" and pasted[0] < index < pasted[-1] else kind, text)
            for index, (kind, text) in enumerate(pieces)]


def typed_text(text: str) -> str:
    """The part of a message the user typed (``segments`` of kind ``typed``), lines and paragraph breaks kept. Rules
    and the names a correction mentions come from here, never from a pasted log, trace, document, code or quote."""
    return "\n".join(piece for kind, piece in segments(text) if kind == "typed").strip()


def authored_text(message: str) -> str:
    """What the user typed in one message (``typed_text``), blank lines dropped, cut to ``AUTHORED_CHARS``: kept as
    ``TaskRecord.authored``. message: a user message as harvested (already redacted)."""
    text = "\n".join(line.rstrip() for line in typed_text(message).splitlines() if line.strip())
    return text[:AUTHORED_CHARS]
