"""Bounded edits to a skill or memory document, applied only inside its managed block.

The managed block is the run of lines between a ``BLOCK_BEGIN`` line and a ``BLOCK_END`` line. Everything
outside it belongs to the user and is never changed, byte for byte. Inside it, edits address lines
exactly:

- ``append``: append the content (a line, or a paragraph after a blank line) at the end of the block;
  rejected as ``duplicate`` when the content's lines already stand together in the block.
- ``insert_after``: insert the content after the anchor line(s).
- ``replace``: replace the anchor line(s) with the content.
- ``delete``: remove the anchor line(s).

An anchor is one whole line, or a run of consecutive whole lines, compared exactly after stripping trailing
whitespace (leading whitespace and case count). It must match exactly once: none or several matches leave
the edit ``unmatched`` with the reason; there is never a substring or fuzzy match.

The block is kept tidy when it changes: no trailing spaces, no blank lines at its start, exactly one blank
line before ``BLOCK_END``. A block that was empty gets ``BLOCK_HEADING`` and a blank line before its first
edit. A document whose block content does not change is returned as the identical string.
"""

from __future__ import annotations

import re

import yaml

from skillopt_sleep.models import EditRecord

BLOCK_BEGIN = "<!-- skillopt-sleep:begin -->"
BLOCK_END = "<!-- skillopt-sleep:end -->"
#: The first line of a block that was empty before tonight's edits. Small targets follow a learned rule more often
#: when the rules stand under a heading that says they are rules to follow (``docs/benchmarks.md``, "Learning":
#: 11 of 24 train requests of the learning world passed with this heading, 5 with none).
BLOCK_HEADING = "## Rules the user taught (follow them in every answer)"

#: Claude Code skill names: lowercase letters, digits and hyphens, at most 64 characters.
_SKILL_NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?")
_MAX_DESCRIPTION = 1024


class _Block:
    """Where the managed block sits in a document: ``start``/``end`` are character offsets of the begin
    marker line's first character and just after the end marker line (its newline included)."""

    def __init__(self, start: int, end: int, lines: list[str], newline: str, end_has_newline: bool):
        self.start = start
        self.end = end
        self.lines = lines
        self.newline = newline
        self.end_has_newline = end_has_newline


def _newline_of(document: str) -> str:
    return "\r\n" if "\r\n" in document else "\n"


def _find_block(document: str) -> _Block | None:
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
    return _Block(start, stop, inner, _newline_of(document), raw_lines[end].endswith(("\n", "\r")))


def _tidy(lines: list[str]) -> list[str]:
    """Strip trailing whitespace of each line and the blank lines at both ends."""
    cleaned = [line.rstrip() for line in lines]
    while cleaned and not cleaned[0]:
        cleaned.pop(0)
    while cleaned and not cleaned[-1]:
        cleaned.pop()
    return cleaned


def _render_block(lines: list[str], newline: str) -> str:
    """The block text from the begin marker to the end marker (no newline after the end marker)."""
    return newline.join([BLOCK_BEGIN, *lines, "", BLOCK_END])


def managed_block(document: str) -> str:
    """Return the content inside the managed block (tidied, lines joined by ``\\n``), or ``""`` when the
    document has no block or a malformed one."""
    try:
        block = _find_block(document)
    except ValueError:
        return ""
    return "\n".join(_tidy(block.lines)) if block else ""


def block_rule_lines(document: str) -> list[tuple[int, str]]:
    """(1-based line number in ``document``, stripped text) of each rule line of the managed block: not blank, not
    the block's heading. [] when the document has no block or a malformed one."""
    try:
        if _find_block(document) is None:
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
        elif inside and stripped and stripped != BLOCK_HEADING:
            out.append((number, stripped))
    return out


def ensure_block(document: str) -> str:
    """Return ``document`` with a managed block: unchanged when it has one, else with an empty block
    appended at the end (after one blank line). Raises ValueError for malformed markers."""
    if _find_block(document) is not None:
        return document
    newline = _newline_of(document)
    prefix = document
    if prefix and not prefix.endswith(("\n", "\r")):
        prefix += newline
    if prefix.strip():
        prefix += newline
    return prefix + _render_block([], newline) + newline


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
    return f"---\n{frontmatter}---\n\n{body}{_render_block([], chr(10))}\n"


# --------------------------------------------------------------------------- applying edits


def _content_lines(text: str | None) -> list[str]:
    return _tidy((text or "").splitlines())


def _find_run(lines: list[str], run: list[str]) -> list[int]:
    """Start indices where ``run`` equals consecutive lines of ``lines`` (compared after rstrip)."""
    size = len(run)
    return [start for start in range(len(lines) - size + 1) if lines[start:start + size] == run]


def _locate(lines: list[str], anchor: str | None) -> tuple[int, int] | str:
    """Return (start, stop) of the one run of lines the anchor names, or the reason it cannot be used."""
    run = _content_lines(anchor)
    if not run:
        return "empty anchor"
    starts = _find_run(lines, run)
    if not starts:
        return "anchor not found in the managed block"
    if len(starts) > 1:
        return f"ambiguous anchor: matches {len(starts)} places in the managed block"
    return starts[0], starts[0] + len(run)


def _apply_one(lines: list[str], edit: EditRecord) -> tuple[list[str], str, str]:
    """Apply one edit to the block lines; return (new lines, status, reason)."""
    content = _content_lines(edit.content)
    if edit.op != "delete":
        if not content:
            return lines, "rejected", f"empty content for {edit.op}"
        if any(BLOCK_BEGIN in line or BLOCK_END in line for line in content):
            return lines, "rejected", "content contains a managed-block marker"
    if edit.op == "append":
        if _find_run(lines, content):
            return lines, "rejected", "duplicate: the content is already in the managed block"
        separator = [""] if len(content) > 1 and lines else []
        return [*lines, *separator, *content], "applied", ""
    if edit.anchor is None or not edit.anchor.strip():
        return lines, "rejected", f"{edit.op} needs an anchor line"
    where = _locate(lines, edit.anchor)
    if isinstance(where, str):
        return lines, "unmatched", where
    start, stop = where
    if edit.op == "insert_after":
        if _find_run(lines, content):
            return lines, "rejected", "duplicate: the content is already in the managed block"
        return [*lines[:stop], *content, *lines[stop:]], "applied", ""
    if edit.op == "replace":
        if content == lines[start:stop]:
            return lines, "rejected", "no change: the content equals the anchor"
        return [*lines[:start], *content, *lines[stop:]], "applied", ""
    if edit.op == "delete":
        return [*lines[:start], *lines[stop:]], "applied", ""
    return lines, "rejected", f"unknown edit op {edit.op!r}"


def apply_edits(document: str, edits: list[EditRecord], target: str) -> tuple[str, list[EditRecord]]:
    """Apply the ``proposed`` edits whose ``target`` equals ``target`` to the document's managed block.

    document: the skill or memory document text ("" for a document that does not exist yet).
    target: ``"skill"`` or ``"memory"``. Returns (new document, edits): the edits in their order, those
    applied here as copies with status ``applied``/``unmatched``/``rejected`` and a reason; edits for the
    other target or not ``proposed`` are returned as they were. Edits apply in order, each on the result
    of the previous one. When the document has no block and an edit applies, an empty block is appended
    first. When the block content ends up unchanged the identical ``document`` is returned. A malformed
    block rejects every edit for this target (with the reason) and leaves the document as it was.
    """
    mine = [index for index, edit in enumerate(edits) if edit.target == target and edit.status == "proposed"]
    result = list(edits)
    if not mine:
        return document, result
    try:
        block = _find_block(document)
    except ValueError as exc:
        for index in mine:
            result[index] = edits[index].model_copy(update={"status": "rejected", "reason": str(exc)})
        return document, result

    original = _tidy(block.lines) if block else []
    lines = list(original)
    for index in mine:
        lines, status, reason = _apply_one(lines, edits[index])
        result[index] = edits[index].model_copy(update={"status": status, "reason": reason})
        lines = _tidy(lines)

    if lines == original:
        return document, result
    if not original and lines and lines[0] != BLOCK_HEADING:
        lines = [BLOCK_HEADING, "", *lines]
    if block is None:
        document = ensure_block(document)
        block = _find_block(document)
        assert block is not None
    rendered = _render_block(lines, block.newline)
    if block.end_has_newline:
        rendered += block.newline
    return document[: block.start] + rendered + document[block.end:], result
