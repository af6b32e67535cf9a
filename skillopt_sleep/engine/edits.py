"""Bounded edits to a skill or memory document, applied only inside its managed block.

The managed block (``skillopt_sleep/documents/block.py``: the markers, finding and reading it) is the run of lines
between a ``BLOCK_BEGIN`` line and a ``BLOCK_END`` line. Everything outside it belongs to the user and is never changed,
byte for byte. Inside it, edits address lines exactly:

- ``append``: append the content (a line, or a paragraph after a blank line) at the end of the block;
  rejected as ``duplicate`` when the content's lines already stand together in the block. The team rules' part
  (``block.TEAM_HEADING``) stays last: a team rule's line (``block.team_line``) is appended to it (the heading is
  added first when there is none), any other content lands just above it.
- ``prepend``: insert the content at the top of the block, under its heading (``BLOCK_HEADING`` and the blank line
  after it), and after what earlier ``prepend`` edits of the same application put there (so several stand in the
  order they were given); rejected as ``duplicate`` like ``append``. The night writes a user's new rules this way,
  newest first (``mine/rulebook.py``).
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

from skillopt_sleep.documents.block import (
    BLOCK_BEGIN,
    BLOCK_END,
    BLOCK_HEADING,
    TEAM_HEADING,
    ensure_block,
    find_block,
    render_block,
    team_rule_of,
    tidy,
)
from skillopt_sleep.models import EditRecord


def _content_lines(text: str | None) -> list[str]:
    return tidy((text or "").splitlines())


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


def _append(lines: list[str], content: list[str]) -> list[str]:
    """``content`` appended to the block ``lines``: a team rule's line at the end of the team rules' part (made when
    missing), anything else at the end of the block above that part (module docstring)."""
    if len(content) == 1 and team_rule_of(content[0]):
        if TEAM_HEADING not in lines:
            return [*lines, "", TEAM_HEADING, *content] if lines else [TEAM_HEADING, *content]
        return [*lines, *content]
    head, team = lines, []
    if TEAM_HEADING in lines:
        at = lines.index(TEAM_HEADING)
        head, team = tidy(lines[:at]), ["", *lines[at:]]
        if head == [BLOCK_HEADING]:
            head = [BLOCK_HEADING, ""]
    separator = [""] if len(content) > 1 and head and head[-1] else []
    return [*head, *separator, *content, *team]


def _top(lines: list[str]) -> int:
    """Where the block's content starts: after ``BLOCK_HEADING`` and the blank line that follows it, else 0."""
    if lines[:1] != [BLOCK_HEADING]:
        return 0
    return 2 if lines[1:2] == [""] else 1


def _apply_one(lines: list[str], edit: EditRecord, prepended: int = 0) -> tuple[list[str], str, str]:
    """Apply one edit to the block lines; return (new lines, status, reason). prepended: how many lines earlier
    ``prepend`` edits of the same application put at the top (a ``prepend`` goes after them)."""
    content = _content_lines(edit.content)
    if edit.op != "delete":
        if not content:
            return lines, "rejected", f"empty content for {edit.op}"
        if any(BLOCK_BEGIN in line or BLOCK_END in line for line in content):
            return lines, "rejected", "content contains a managed-block marker"
    if edit.op in ("append", "prepend"):
        if _find_run(lines, content):
            return lines, "rejected", "duplicate: the content is already in the managed block"
        if edit.op == "append":
            return _append(lines, content), "applied", ""
        at = _top(lines) + prepended
        return [*lines[:at], *content, *lines[at:]], "applied", ""
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
        block = find_block(document)
    except ValueError as exc:
        for index in mine:
            result[index] = edits[index].model_copy(update={"status": "rejected", "reason": str(exc)})
        return document, result

    original = tidy(block.lines) if block else []
    lines = list(original)
    prepended = 0
    for index in mine:
        before = len(lines)
        lines, status, reason = _apply_one(lines, edits[index], prepended)
        result[index] = edits[index].model_copy(update={"status": status, "reason": reason})
        if edits[index].op == "prepend" and status == "applied":
            prepended += len(lines) - before
        lines = tidy(lines)

    if lines == original:
        return document, result
    if not original and lines and lines[0] != BLOCK_HEADING:
        lines = [BLOCK_HEADING, "", *lines]
    if block is None:
        document = ensure_block(document)
        block = find_block(document)
        assert block is not None
    rendered = render_block(lines, block.newline)
    if block.end_has_newline:
        rendered += block.newline
    return document[: block.start] + rendered + document[block.end:], result
