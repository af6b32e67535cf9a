"""The managed block: where skillopt-sleep writes inside a user's document, and how it is found and read.

The managed block is the run of lines between a ``BLOCK_BEGIN`` line and a ``BLOCK_END`` line. Everything outside it
belongs to the user and is never changed, byte for byte (``engine/edits.py`` applies edits inside it). This module is
the format: the markers and the heading (``BLOCK_HEADING``), locating the one block (``find_block``; malformed markers
raise ValueError), reading it (``managed_block``, ``block_rule_lines``), cutting a document around it
(``managed_block_segments``: before, block, after; malformed markers raise SleepError; ``raw_block``,
``managed_block_sha256``) and creating it (``ensure_block``, ``new_skill_document``).

Team rules (``skillopt_sleep/team``) that a night accepted stand in their own part at the end of the block, under
``TEAM_HEADING``, one line each, attributed by the rule's id in an HTML comment (``team_line``: ``- Use pnpm, never
npm. <!-- team t-3f2a9c0d1e7b -->``); ``team_rule_of`` reads the id back and ``strip_team_mark`` takes it off.
"""

from __future__ import annotations

import re

import yaml

from skillopt_sleep.errors import SleepError
from skillopt_sleep.hashing import sha256_text

BLOCK_BEGIN = "<!-- skillopt-sleep:begin -->"
BLOCK_END = "<!-- skillopt-sleep:end -->"
#: The first line of a block that was empty before tonight's edits. Small targets follow a learned rule more often
#: when the rules stand under a heading that says they are rules to follow (``docs/benchmarks.md``, "Learning":
#: 11 of 24 train requests of the learning world passed with this heading, 5 with none).
BLOCK_HEADING = "## Rules the user taught (follow them in every answer)"
#: The heading of the team rules' part of the block (module docstring); always its last part.
TEAM_HEADING = "### Team rules (shared through your team's git, each re-proved on your own tasks)"
_TEAM_MARK = re.compile(r"\s*<!-- team (t-[0-9a-f]{12}) -->\s*$")

#: Claude Code skill names: lowercase letters, digits and hyphens, at most 64 characters.
_SKILL_NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?")
_MAX_DESCRIPTION = 1024


class Block:
    """Where the managed block sits in a document: ``start``/``end`` are character offsets of the begin
    marker line's first character and just after the end marker line (its newline included)."""

    def __init__(self, start: int, end: int, lines: list[str], newline: str, end_has_newline: bool):
        self.start = start
        self.end = end
        self.lines = lines
        self.newline = newline
        self.end_has_newline = end_has_newline


def newline_of(document: str) -> str:
    return "\r\n" if "\r\n" in document else "\n"


def find_block(document: str) -> Block | None:
    """Locate the one managed block; None when there is none. Raises ValueError when the markers are
    malformed (a marker without its partner, markers in the wrong order, or more than one block)."""
    begins: list[int] = []
    ends: list[int] = []
    raw_lines = document.splitlines(keepends=True)
    for index, raw in enumerate(raw_lines):
        stripped = raw.strip()
        if stripped == BLOCK_BEGIN:
            begins.append(index)
        elif stripped == BLOCK_END:
            ends.append(index)
    if not begins and not ends:
        return None
    if len(begins) != 1 or len(ends) != 1 or ends[0] < begins[0]:
        raise ValueError(
            f"malformed managed block: found {len(begins)} begin and {len(ends)} end marker(s); "
            f"expected one '{BLOCK_BEGIN}' line followed by one '{BLOCK_END}' line - fix the markers by hand"
        )
    begin, end = begins[0], ends[0]
    start = sum(len(line) for line in raw_lines[:begin])
    stop = sum(len(line) for line in raw_lines[: end + 1])
    inner = [line.rstrip("\r\n") for line in raw_lines[begin + 1:end]]
    return Block(start, stop, inner, newline_of(document), raw_lines[end].endswith(("\n", "\r")))


def tidy(lines: list[str]) -> list[str]:
    """Strip trailing whitespace of each line and the blank lines at both ends."""
    cleaned = [line.rstrip() for line in lines]
    while cleaned and not cleaned[0]:
        cleaned.pop(0)
    while cleaned and not cleaned[-1]:
        cleaned.pop()
    return cleaned


def render_block(lines: list[str], newline: str) -> str:
    """The block text from the begin marker to the end marker (no newline after the end marker)."""
    return newline.join([BLOCK_BEGIN, *lines, "", BLOCK_END])


def team_line(line: str, rule_id: str) -> str:
    """A team rule's line in the block: ``line`` (a rule bullet) attributed to team rule ``rule_id``
    (``t-`` + 12 hex)."""
    return f"{strip_team_mark(line)} <!-- team {rule_id} -->"


def team_rule_of(line: str) -> str | None:
    """The team rule id a block line is attributed to (``team_line``), or None for any other line."""
    found = _TEAM_MARK.search(line or "")
    return found.group(1) if found else None


def strip_team_mark(line: str) -> str:
    """``line`` without its team attribution (unchanged when it has none)."""
    return _TEAM_MARK.sub("", line or "")


def without_marks(document: str) -> str:
    """``document`` without what this tool writes around the rules: the block's begin and end markers, its headings
    and team attributions (``skillopt-sleep``, ``t-3f2a...`` are ours, never words the document's authors wrote)."""
    marks = {BLOCK_BEGIN, BLOCK_END, BLOCK_HEADING, TEAM_HEADING}
    return "\n".join(strip_team_mark(line) for line in (document or "").splitlines() if line.strip() not in marks)


def managed_block(document: str) -> str:
    """Return the content inside the managed block (tidied, lines joined by ``\\n``), or ``""`` when the
    document has no block or a malformed one."""
    try:
        block = find_block(document)
    except ValueError:
        return ""
    return "\n".join(tidy(block.lines)) if block else ""


def block_rule_lines(document: str) -> list[tuple[int, str]]:
    """(1-based line number in ``document``, stripped text) of each rule line of the managed block: not blank, not
    the block's heading nor the team rules' heading (a team rule's line keeps its attribution, ``team_rule_of``).
    [] when the document has no block or a malformed one."""
    try:
        if find_block(document) is None:
            return []
    except ValueError:
        return []
    out, inside = [], False
    for number, line in enumerate(document.splitlines(), 1):
        stripped = line.strip()
        if stripped == BLOCK_BEGIN:
            inside = True
        elif stripped == BLOCK_END:
            inside = False
        elif inside and stripped and stripped not in (BLOCK_HEADING, TEAM_HEADING):
            out.append((number, stripped))
    return out


def managed_block_segments(text: str) -> tuple[str, str, str] | None:
    """Split a document into ``(before, block, after)`` around its managed block, or None when it has none.

    ``block`` runs from the first character of the ``BLOCK_BEGIN`` line to just after the ``BLOCK_END`` line
    (its line break included), so ``before + block + after == text``. Raises SleepError when the markers are
    malformed (not exactly one begin line followed by one end line).
    """
    lines = text.splitlines(keepends=True)
    begins = [index for index, line in enumerate(lines) if line.strip() == BLOCK_BEGIN]
    ends = [index for index, line in enumerate(lines) if line.strip() == BLOCK_END]
    if not begins and not ends:
        return None
    if len(begins) != 1 or len(ends) != 1 or ends[0] < begins[0]:
        raise SleepError(f"malformed managed block: {len(begins)} begin and {len(ends)} end marker(s); "
                         f"expected one '{BLOCK_BEGIN}' line followed by one '{BLOCK_END}' line")
    begin, end = begins[0], ends[0]
    return "".join(lines[:begin]), "".join(lines[begin:end + 1]), "".join(lines[end + 1:])


def managed_block_sha256(text: str) -> str | None:
    """sha256 of the raw managed block of ``text`` (markers included), None when it has no (or a malformed)
    block."""
    try:
        segments = managed_block_segments(text)
    except SleepError:
        return None
    return sha256_text(segments[1]) if segments else None


def raw_block(text: str) -> str | None:
    """The raw managed block of ``text`` (markers included), None when it has none or a malformed one."""
    try:
        segments = managed_block_segments(text)
    except SleepError:
        return None
    return segments[1] if segments else None


def ensure_block(document: str) -> str:
    """Return ``document`` with a managed block: unchanged when it has one, else with an empty block
    appended at the end (after one blank line). Raises ValueError for malformed markers."""
    if find_block(document) is not None:
        return document
    newline = newline_of(document)
    prefix = document
    if prefix and not prefix.endswith(("\n", "\r")):
        prefix += newline
    if prefix.strip():
        prefix += newline
    return prefix + render_block([], newline) + newline


def new_skill_document(name: str, description: str) -> str:
    """Return a new SKILL.md: YAML frontmatter (``name``, ``description``), a title and an empty managed
    block. name: lowercase letters, digits and hyphens, 1-64 characters; description: non-empty, at most
    1024 characters, newlines folded into spaces. Raises ValueError otherwise."""
    if not _SKILL_NAME.fullmatch(name or ""):
        raise ValueError(f"invalid skill name {name!r}: use 1-64 lowercase letters, digits and hyphens")
    folded = " ".join((description or "").split())
    if not folded:
        raise ValueError("a skill needs a non-empty description")
    if len(folded) > _MAX_DESCRIPTION:
        raise ValueError(f"skill description is {len(folded)} characters; the limit is {_MAX_DESCRIPTION}")
    frontmatter = yaml.safe_dump({"name": name, "description": folded}, sort_keys=False, allow_unicode=True,
                                 width=10_000)
    body = (f"# {name}\n\n"
            "Lines between the markers below are maintained by skillopt-sleep; edit anything outside them.\n\n")
    return f"---\n{frontmatter}---\n\n{body}{render_block([], chr(10))}\n"
