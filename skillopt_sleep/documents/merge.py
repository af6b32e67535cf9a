"""Re-apply one night's change of a managed block onto a live document that changed since the night computed it.

A night's proposal is a whole document computed from the live file of that night. Nights that were not adopted
each start from the same live file, so adopting two of them in turn must add up: the second is applied as the
*change* it makes to the block (``base`` block -> proposed block: lines added, removed, replaced), not as the whole
proposed file. ``merge_block`` is that three-way merge, line by line inside the block only:

* everything outside the live block stays byte for byte (the user's text);
* a line the night added is inserted after the nearest line above it that the live block still holds, and after
  the lines added there since (an earlier adoption's rules come first), at the end of the block when none is;
  unless the live block holds it already (never duplicated);
* a line the night removed is removed when the live block still holds it (already gone: nothing to do);
* a line the night *replaced* that the live block no longer holds, while its replacement is not there either, is
  a **conflict**: someone changed the same rule since. Conflicts are returned, and nothing is decided for them.

Lines are compared by their words (``text.normalize``, whitespace folded); inserted lines take the live file's
line endings. When the live block still says what the base block said, the result's block is the proposed one
exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from difflib import SequenceMatcher

from skillopt_sleep.documents.block import ensure_block, managed_block_segments, newline_of
from skillopt_sleep.text import normalize


@dataclass
class Merged:
    """text: the merged document (None when there are conflicts); conflicts: one sentence per conflicting line."""

    text: str | None
    conflicts: list[str] = field(default_factory=list)


def _key(line: str) -> str:
    return " ".join(normalize(line).split())


def _inner(block: str) -> list[str]:
    """The lines between the markers of a raw block (line breaks kept)."""
    return block.splitlines(keepends=True)[1:-1]


def merge_block(base_block: str | None, proposed: str, live: str) -> Merged:
    """Apply the change ``base_block`` -> ``proposed``'s block onto ``live`` (module docstring).

    base_block: the raw managed block (markers included) of the document the night computed its proposal from,
    None when it had none; proposed: the staged document; live: the current document. Raises SleepError for
    malformed markers in ``proposed`` or ``live``, ValueError when ``proposed`` has no managed block.
    """
    proposed_parts = managed_block_segments(proposed)
    if proposed_parts is None:
        raise ValueError("the proposal has no managed block")
    live_parts = managed_block_segments(live) or managed_block_segments(ensure_block(live))
    assert live_parts is not None
    before, live_block, after = live_parts
    base, new, current = (_inner(base_block) if base_block else []), _inner(proposed_parts[1]), _inner(live_block)
    head, tail = live_block.splitlines(keepends=True)[0], live_block.splitlines(keepends=True)[-1]
    if [_key(x) for x in base if _key(x)] == [_key(x) for x in current if _key(x)]:
        return Merged(before + head + "".join(_with_newline(new, newline_of(live))) + tail + after)
    result = list(current)
    conflicts: list[str] = []
    newline = newline_of(live)
    matcher = SequenceMatcher(None, [_key(x) for x in base], [_key(x) for x in new], autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        old = [line for line in base[i1:i2] if _key(line)]
        added = _trim_blank(new[j1:j2])
        held = {_key(line) for line in result}
        if tag == "replace" and old and not any(_key(line) in held for line in old) \
                and not all(_key(line) in held for line in added if _key(line)):
            conflicts += [f"the night replaces {line.strip()!r}, which is no longer in the file" for line in old]
            continue
        position = None
        for line in old:  # removed or replaced: drop it where it still stands
            keys = [_key(x) for x in result]
            if _key(line) in keys:
                position = keys.index(_key(line))
                del result[position]
        if position is None:
            position = _insert_point(result, base, i1)
        for line in added:
            if _key(line) and _key(line) in {_key(x) for x in result}:
                continue
            result.insert(position, line.rstrip("\r\n") + newline)
            position += 1
    if conflicts:
        return Merged(None, conflicts)
    return Merged(before + head + "".join(result) + tail + after)


def _with_newline(lines: list[str], newline: str) -> list[str]:
    return [line.rstrip("\r\n") + newline for line in lines]


def _trim_blank(lines: list[str]) -> list[str]:
    start, stop = 0, len(lines)
    while start < stop and not _key(lines[start]):
        start += 1
    while stop > start and not _key(lines[stop - 1]):
        stop -= 1
    return lines[start:stop]


def _insert_point(result: list[str], base: list[str], i1: int) -> int:
    """Where lines the night added above base line ``i1`` go in ``result``: after the nearest base line above the
    change still in ``result``, and after the lines added there since (by the user or an earlier adoption: they
    were there first); else after the last non-blank line of ``result``."""
    keys = [_key(x) for x in result]
    known = {_key(x) for x in base}
    position = None
    for line in reversed(base[:i1]):
        if _key(line) and _key(line) in keys:
            position = len(keys) - keys[::-1].index(_key(line))
            break
    if position is None:
        filled = [index for index, key in enumerate(keys) if key]
        return filled[-1] + 1 if filled else 0
    while position < len(keys) and keys[position] and keys[position] not in known:
        position += 1
    return position
