"""Fuzz: no single transcript stops a harvest.

The real transcripts of all eight formats (``tests/fixtures/transcripts/``, laid out by ``tests/all_formats.py``)
are read in one ``harvest(source="all")`` run after one file of every format was mutated one to three times: a line
or the file truncated, a byte flipped, bytes inserted, a JSON value (one anywhere, or every value of one known field)
nested 300 to 1,100 levels deep or given a value of another type or a 1 MB string, invalid UTF-8, NUL bytes (an
OpenCode database also gets a mutated JSON row or session column). Each run must return (no exception escapes),
every session no mutated file can touch must come out exactly as from the pristine files, everything harvested must
serialise as the night writes it, and a second run from the first run's checkpoints must return too, harvesting
nothing again. Budget: ``max_examples`` derandomized examples (the same ones on every run, no example database, no
shrinking: a failure is reported as generated), about 0.2 to 0.5 s each on a loaded 2-CPU machine.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

import orjson
import pytest
from all_formats import Target, lay_out
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from skillopt_sleep.harvest import harvest

MUTATIONS = ("truncate", "flip", "insert", "deep", "wrong_type", "bad_utf8", "huge", "nul")
WRONG_VALUES = (None, True, 0, -1, 1.5e308, "", "x", [], {}, [[]], {"type": None}, [1, "a", None], {"": {}})
PLACEHOLDER = "__fuzz_value__"
KNOWN_FIELDS = frozenset({
    "input", "arguments", "args", "content", "text", "message", "payload", "name", "output", "result", "error",
    "state", "parts", "data", "toolCalls", "cwd", "directory", "timestamp", "time", "type", "role", "id", "sessionId",
    "say", "ask"})
"""Keys the harvesters read (every format's); most JSON mutations hit every value of one of them."""
DISPATCH_FIELDS = ("type", "role", "say", "ask")
"""The keys a parser dispatches on (drawn four times as often as the other known fields)."""


def _run(homes: dict[str, Path], checkpoints=None):
    return harvest(source="all", scope="all", homes=homes, lookback_hours=0, checkpoints=checkpoints, workers=1)


class World(tuple):
    """(homes, targets, the pristine sessions by path, the folder for pristine copies); a short repr for the
    falsifying example."""

    def __repr__(self) -> str:
        return "World(...)"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    base = tmp_path_factory.mktemp("fuzz")
    homes, targets = lay_out(base / "homes")
    pristine = _run(homes)
    sessions = {session.path: session.model_dump(mode="json") for session in pristine.sessions}
    assert {session.source for session in pristine.sessions} == set(homes)  # every format yields sessions
    saved = base / "saved"  # the pristine copies of the files an example mutates
    saved.mkdir()
    return World((homes, targets, sessions, saved))


def _nodes(document: object, limit: int = 2_000) -> list[tuple[object, object]]:
    """(container, key or index) of up to ``limit`` values in ``document``, breadth first."""
    found: list[tuple[object, object]] = []
    queue = [document]
    while queue and len(found) < limit:
        node = queue.pop(0)
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, value in items:
            found.append((node, key))
            queue.append(value)
    return found


def _replacement(data, kind: str) -> tuple[object, bytes]:
    """(the value put in place, the JSON text that stands for ``PLACEHOLDER`` when it is written)."""
    if kind == "deep":
        depth = data.draw(st.sampled_from((300, 1_000, 1_015, 1_100)), label="depth")
        shape = data.draw(st.sampled_from(("list", "object", "blocks")), label="shape")
        if shape == "list":
            return PLACEHOLDER, b"[" * depth + b"]" * depth
        if shape == "object":
            return PLACEHOLDER, b'{"input":' * depth + b"1" + b"}" * depth
        return PLACEHOLDER, b'[{"type":"text","text":' * depth + b'"x"' + b"}]" * depth
    if kind == "wrong_type":
        value = data.draw(st.sampled_from(WRONG_VALUES + ("big_int",)), label="value")
        return (PLACEHOLDER, b"123456789012345678901234567890") if value == "big_int" else (value, b"")
    ascii_only = data.draw(st.booleans(), label="ascii")
    return PLACEHOLDER, orjson.dumps("x" * 1_000_000 if ascii_only else "é\u2028" * 300_000)


def _mutate_documents(data, texts: list[bytes], kind: str) -> list[bytes] | None:
    """``texts`` (JSON documents: a file's lines, or one document) with values replaced: every value of one known
    field (in one document, or in all of them), or one value anywhere in one document. None when none is JSON."""
    documents = []
    for text in texts:
        try:
            documents.append(orjson.loads(text))
        except orjson.JSONDecodeError:
            documents.append(None)
    parsed = [index for index, document in enumerate(documents) if document is not None]
    if not parsed:
        return None
    every = len(parsed) > 1 and data.draw(st.booleans(), label="every document")
    chosen = parsed if every else [parsed[data.draw(st.integers(0, len(parsed) - 1), label="document")]]
    nodes = {index: _nodes(documents[index]) for index in chosen}
    fields = sorted({key for index in chosen for _, key in nodes[index] if key in KNOWN_FIELDS})
    fields += [field for field in fields if field in DISPATCH_FIELDS] * 3
    field = data.draw(st.sampled_from(fields), label="field") if fields and (
        every or data.draw(st.booleans(), label="known field")) else None
    value, raw = _replacement(data, kind)
    changed = list(texts)
    for index in chosen:
        if field is not None:
            places = [(container, key) for container, key in nodes[index] if key == field]
            places = places[:3] if kind == "huge" else places
        elif nodes[index]:
            places = [nodes[index][data.draw(st.integers(0, len(nodes[index]) - 1), label="node")]]
        else:
            continue
        for container, key in places:
            container[key] = value  # type: ignore[index]
        try:
            written = orjson.dumps(documents[index])
        except TypeError:  # nested too deep by an earlier mutation of the same file: left as it is
            continue
        changed[index] = written.replace(orjson.dumps(PLACEHOLDER), raw) if raw else written
    return changed


def _mutate_bytes(data, raw: bytes, kind: str) -> bytes:
    position = data.draw(st.integers(0, len(raw)), label="position")
    if kind == "truncate":
        return raw[:position]
    if kind == "flip" and raw:
        position = min(position, len(raw) - 1)
        flipped = raw[position] ^ data.draw(st.integers(1, 255), label="xor")
        return raw[:position] + bytes([flipped]) + raw[position + 1:]
    if kind == "bad_utf8":
        inserted = data.draw(st.sampled_from((b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80\x80")))
    elif kind == "nul":
        inserted = b"\x00" * data.draw(st.integers(1, 3), label="nuls")
    elif kind == "huge":
        inserted = b"y" * 1_000_000
    else:
        inserted = data.draw(st.binary(min_size=1, max_size=16), label="bytes")
    return raw[:position] + inserted + raw[position:]


def _mutate_lines(data, raw: bytes, kind: str) -> bytes:
    lines = raw.split(b"\n")
    if kind in ("deep", "wrong_type", "huge"):
        changed = _mutate_documents(data, lines, kind)
        if changed is not None:
            return b"\n".join(changed)
    index = data.draw(st.integers(0, len(lines) - 1), label="line")
    if kind == "truncate":
        cut = data.draw(st.integers(0, len(lines[index])), label="cut")
        lines[index] = lines[index][:cut]
        return b"\n".join(lines)
    return _mutate_bytes(data, raw, kind)


def _mutate_database(data, path: Path, kind: str) -> None:
    if kind not in ("deep", "wrong_type", "huge"):
        path.write_bytes(_mutate_bytes(data, path.read_bytes(), kind))
        return
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute("SELECT 1 FROM message, part, session LIMIT 1").fetchall()
    except sqlite3.DatabaseError:  # corrupted by an earlier mutation of the same file
        connection.close()
        path.write_bytes(_mutate_bytes(data, path.read_bytes(), kind))
        return
    try:
        table = data.draw(st.sampled_from(("message", "part", "session")), label="table")
        if table == "session":  # a column of another type (SQLite keeps what it is given)
            column = data.draw(st.sampled_from(("directory", "parent_id", "version", "time_created", "time_updated")))
            value = data.draw(st.sampled_from((None, 1, -1, 1.5e308, "", "x", b"\xff\x00")), label="value")
            connection.execute(f"UPDATE session SET {column} = ?", (value,))
            return
        rows = connection.execute(f"SELECT rowid, data FROM {table} ORDER BY rowid").fetchall()
        rowid, text = rows[data.draw(st.integers(0, len(rows) - 1), label="row")]
        changed = _mutate_documents(data, [text.encode("utf-8") if isinstance(text, str) else text], kind)
        if changed is not None:  # stored as text (as OpenCode does) or as a blob
            stored = changed[0].decode("utf-8", "replace") if data.draw(st.booleans(), label="as_text") else changed[0]
            connection.execute(f"UPDATE {table} SET data = ? WHERE rowid = ?", (stored, rowid))
    finally:
        connection.close()


def _mutate(data, target: Target, kind: str) -> None:
    path = target.path
    if path.suffix == ".db":
        _mutate_database(data, path, kind)
        return
    raw = path.read_bytes()
    if path.suffix == ".jsonl":
        path.write_bytes(_mutate_lines(data, raw, kind))
        return
    if path.suffix == ".json" and kind in ("deep", "wrong_type", "huge"):
        changed = _mutate_documents(data, [raw], kind)
        if changed is not None:
            path.write_bytes(changed[0])
            return
    path.write_bytes(_mutate_bytes(data, raw, kind))


def _touched(path: str, target: Target) -> bool:
    return path == target.affects or path.startswith((target.affects + os.sep, target.affects + "#"))


@settings(max_examples=80, deadline=None, derandomize=True, database=None, phases=[Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_no_mutated_transcript_stops_the_harvest_or_spoils_the_other_sessions(world, data):
    homes, targets, pristine, saved = world
    mutated: list[Target] = []
    try:
        for source in sorted(homes):  # one file of each format per run
            candidates = [target for target in targets if target.source == source]
            target = candidates[data.draw(st.integers(0, len(candidates) - 1), label=f"{source} file")]
            shutil.copy2(target.path, saved / str(len(mutated)))  # its modification time too: some sessions end at it
            mutated.append(target)
            for _ in range(data.draw(st.integers(1, 3), label=f"{source} mutations")):
                _mutate(data, target, data.draw(st.sampled_from(MUTATIONS), label=f"{source} mutation"))
        result = _run(homes)
        again = _run(homes, checkpoints=result.checkpoints)  # the next night starts from these checkpoints
    finally:
        for number, target in enumerate(mutated):
            os.replace(saved / str(number), target.path)
    found = {session.path: session.model_dump(mode="json") for session in result.sessions}
    for path, session in pristine.items():
        if not any(_touched(path, target) for target in mutated):
            assert found.get(path) == session, path
    for session in result.sessions:
        session.model_dump_json()  # what the night writes: e.g. no lone surrogate slipped into a text
    result.stats.model_dump_json()
    assert again.stats.sessions_harvested == 0, again.stats
