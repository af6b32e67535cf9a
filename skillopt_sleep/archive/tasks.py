"""The task archive: every mined task across nights, in SQLite (``<project state dir>/archive.sqlite3``, 0600).

Tables (created by append-only named migrations, recorded in ``_migrations``; a new schema change is a new
entry at the end of ``MIGRATIONS``, never an edit of an old one):

* ``tasks``: one row per task id (``t-`` + hash of the request, so a request seen on two nights is one row):
  the request, the latest ``TaskRecord`` as JSON, its latest split, ``held_out`` (1 once it was ever a val or
  test task: such a task is never recalled into reflection), ``recurrence`` (user requests merged into it over
  all nights: the sum of ``TaskRecord.recurrence`` per night), ``nights`` (nights it was mined on), first and
  last night ids.
* ``sightings``: (task, night) -> split and recurrence that night (a night is counted once per task).
* ``scores``: the score history: per (task, night, documents) the split, mean hard and soft over the scored
  samples, the sample count and the documents replayed (kind -> sha256, as JSON).
* ``rejected_edits``: the rejected-edit ledger (``skillopt_sleep.archive.rejected_edits``): key -> first night,
  edit, reason.
* ``rules``: the user's rules across nights (``skillopt_sleep.archive.rule_history``): what each demands (its check
  keys), its phrasings, the sessions and nights that stated it, how often, its status and its held-out record.
* ``tasks_fts``: an FTS5 index of the requests, searched with BM25 (``recall``). When this SQLite has no FTS5
  (``PRAGMA compile_options`` lacks ``ENABLE_FTS5``), ``recall`` falls back to a LIKE scorer (count of the
  query's content words found in the request) and ``search_backend`` says ``"like"``; the FTS5 migration then
  runs on the first open with an FTS5-enabled SQLite, indexing what is already stored.

A corrupt database file is moved aside (``archive.sqlite3.corrupt-<timestamp>``) and a new one started: the
archive is an aid, a damaged one must not stop a night. Use it from one thread, with the night lock held.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from skillopt_sleep.models import ReplayResult, TaskRecord
from skillopt_sleep.text import content_words

logger = logging.getLogger("skillopt_sleep.archive.tasks")

#: (name, SQL script, needs FTS5). Append only.
MIGRATIONS: list[tuple[str, str, bool]] = [
    ("0001_tasks_sightings_scores", """
        CREATE TABLE tasks (
            id TEXT PRIMARY KEY, request TEXT NOT NULL, record TEXT NOT NULL, split TEXT NOT NULL,
            held_out INTEGER NOT NULL DEFAULT 0, recurrence INTEGER NOT NULL DEFAULT 0,
            nights INTEGER NOT NULL DEFAULT 0, first_night TEXT NOT NULL, last_night TEXT NOT NULL);
        CREATE TABLE sightings (
            task_id TEXT NOT NULL, night_id TEXT NOT NULL, split TEXT NOT NULL, recurrence INTEGER NOT NULL,
            PRIMARY KEY (task_id, night_id));
        CREATE TABLE scores (
            task_id TEXT NOT NULL, night_id TEXT NOT NULL, split TEXT NOT NULL, hard REAL NOT NULL,
            soft REAL NOT NULL, samples INTEGER NOT NULL, documents TEXT NOT NULL,
            PRIMARY KEY (task_id, night_id, documents));
    """, False),
    ("0002_rejected_edits", """
        CREATE TABLE rejected_edits (
            key TEXT PRIMARY KEY, night_id TEXT NOT NULL, target TEXT NOT NULL, op TEXT NOT NULL,
            anchor TEXT, content TEXT NOT NULL, reason TEXT NOT NULL, recorded_at REAL NOT NULL);
    """, False),
    ("0003_tasks_fts5", """
        CREATE VIRTUAL TABLE tasks_fts USING fts5(id UNINDEXED, request, tokenize = 'porter unicode61');
        INSERT INTO tasks_fts (id, request) SELECT id, request FROM tasks;
    """, True),
    ("0004_rejected_edit_count", """
        ALTER TABLE rejected_edits ADD COLUMN rejections INTEGER NOT NULL DEFAULT 1;
    """, False),
    ("0005_rules", """
        CREATE TABLE rules (
            id TEXT PRIMARY KEY, keys TEXT NOT NULL, text TEXT NOT NULL, phrasings TEXT NOT NULL,
            sessions TEXT NOT NULL, nights TEXT NOT NULL, stated INTEGER NOT NULL DEFAULT 0,
            status TEXT NOT NULL DEFAULT 'stated', rejections INTEGER NOT NULL DEFAULT 0,
            wins INTEGER NOT NULL DEFAULT 0, losses INTEGER NOT NULL DEFAULT 0, first_night TEXT NOT NULL,
            last_night TEXT NOT NULL, last_exercised TEXT, status_night TEXT, replaced_by TEXT);
    """, False),
    ("0006_rule_scope", """
        ALTER TABLE rules ADD COLUMN scope TEXT NOT NULL DEFAULT 'lasting';
        ALTER TABLE rules ADD COLUMN scope_reason TEXT NOT NULL DEFAULT 'recorded before scopes were decided';
    """, False),
]

#: Most query words used for one search (the longest requests are cut).
MAX_QUERY_WORDS = 24


def fts5_available(connection: sqlite3.Connection) -> bool:
    """True when this SQLite library was compiled with FTS5 (``ENABLE_FTS5`` in ``PRAGMA compile_options``)."""
    options = {row[0] for row in connection.execute("PRAGMA compile_options")}
    return "ENABLE_FTS5" in options


@dataclass
class ArchivedTask:
    """One archived task: the latest TaskRecord and its counts (recurrence: user requests merged over all
    nights; nights: nights it was mined on; held_out: it was once val or test)."""

    task: TaskRecord
    split: str
    held_out: bool
    recurrence: int
    nights: int
    first_night: str
    last_night: str


@dataclass
class ScoreRow:
    """One entry of a task's score history: hard and soft are means in [0, 1] over ``samples`` scored
    replays; documents: kind -> sha256 of the documents replayed."""

    night_id: str
    split: str
    hard: float
    soft: float
    samples: int
    documents: dict[str, str] = field(default_factory=dict)


@dataclass
class Recalled:
    """A past train task similar to tonight's: score is the search rank score (higher = more similar;
    BM25 negated, or the LIKE word count); last: its latest score entry (None when never scored)."""

    archived: ArchivedTask
    score: float
    last: ScoreRow | None


@dataclass
class RecordCounts:
    new: int = 0
    recurring: int = 0
    skipped: int = 0


def _documents_key(documents: dict[str, str]) -> str:
    return json.dumps(documents, sort_keys=True, separators=(",", ":"))


class TaskArchive:
    """The archive of one project (see the module docstring).

    path: the database file (created 0600); use_fts5: False forces the LIKE scorer, None detects FTS5.
    Raises sqlite3.Error only for errors other than a corrupt file (a full disk, a read-only dir).
    """

    def __init__(self, path: Path, *, use_fts5: bool | None = None):
        self.path = Path(path)
        self.moved_aside: Path | None = None
        self.connection = self._open(use_fts5)

    # -- opening and migrations
    def _open(self, use_fts5: bool | None) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        for attempt in range(2):
            if not self.path.exists():
                os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
            os.chmod(self.path, 0o600)
            connection = sqlite3.connect(self.path)
            try:
                available = fts5_available(connection) if use_fts5 is None else use_fts5 and fts5_available(
                    connection)
                self.search_backend = "fts5" if available else "like"
                self._migrate(connection, available)
                return connection
            except sqlite3.DatabaseError as exc:
                connection.close()
                if attempt or not _is_corruption(exc):
                    raise
                aside = self.path.with_name(f"{self.path.name}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}")
                os.replace(self.path, aside)
                self.moved_aside = aside
                logger.warning("task archive %s is damaged (%s); moved aside to %s, starting a new one",
                               self.path, exc, aside)
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    def _migrate(connection: sqlite3.Connection, fts5: bool) -> None:
        connection.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at REAL)")
        done = {row[0] for row in connection.execute("SELECT name FROM _migrations")}
        for name, script, needs_fts5 in MIGRATIONS:
            if name in done or (needs_fts5 and not fts5):
                continue
            connection.executescript(f"BEGIN; {script} INSERT INTO _migrations VALUES ('{name}', {time.time()}); "
                                     "COMMIT;")
        if not fts5:
            logger.info("SQLite without FTS5: the task archive recalls with a LIKE word scorer")

    def applied_migrations(self) -> list[str]:
        return [row[0] for row in self.connection.execute("SELECT name FROM _migrations ORDER BY rowid")]

    @property
    def has_fts_index(self) -> bool:
        return self.search_backend == "fts5"

    def close(self) -> None:
        self.connection.close()

    def __enter__(self) -> TaskArchive:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    # -- tasks
    def record_tasks(self, tasks: Iterable[TaskRecord], *, night_id: str) -> RecordCounts:
        """Add tonight's mined tasks: new ids get a row, known ids get the latest record, one more night and
        their recurrence added. Recording the same (task, night) twice counts it once."""
        counts = RecordCounts()
        with self.connection:
            for task in tasks:
                seen = self.connection.execute("SELECT 1 FROM sightings WHERE task_id = ? AND night_id = ?",
                                               (task.id, night_id)).fetchone()
                if seen:
                    counts.skipped += 1
                    continue
                self.connection.execute("INSERT INTO sightings VALUES (?, ?, ?, ?)",
                                        (task.id, night_id, task.split, task.recurrence))
                held_out = int(task.split != "train")
                record = task.model_dump_json()
                exists = self.connection.execute("SELECT 1 FROM tasks WHERE id = ?", (task.id,)).fetchone()
                if exists:
                    counts.recurring += 1
                    self.connection.execute(
                        "UPDATE tasks SET request = ?, record = ?, split = ?, held_out = MAX(held_out, ?), "
                        "recurrence = recurrence + ?, nights = nights + 1, last_night = ? WHERE id = ?",
                        (task.request, record, task.split, held_out, task.recurrence, night_id, task.id))
                    if self.has_fts_index:
                        self.connection.execute("DELETE FROM tasks_fts WHERE id = ?", (task.id,))
                else:
                    counts.new += 1
                    self.connection.execute("INSERT INTO tasks VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?)",
                                            (task.id, task.request, record, task.split, held_out,
                                             task.recurrence, night_id, night_id))
                if self.has_fts_index:
                    self.connection.execute("INSERT INTO tasks_fts (id, request) VALUES (?, ?)",
                                            (task.id, task.request))
        return counts

    def _archived(self, row: tuple) -> ArchivedTask | None:
        task_id, record, split, held_out, recurrence, nights, first_night, last_night = row
        try:
            task = TaskRecord.model_validate_json(record)
        except ValidationError:
            logger.warning("archived task %s has an unreadable record; skipped", task_id)
            return None
        return ArchivedTask(task=task, split=split, held_out=bool(held_out), recurrence=recurrence, nights=nights,
                            first_night=first_night, last_night=last_night)

    _COLUMNS = "id, record, split, held_out, recurrence, nights, first_night, last_night"

    def get(self, task_id: str) -> ArchivedTask | None:
        row = self.connection.execute(f"SELECT {self._COLUMNS} FROM tasks WHERE id = ?", (task_id,)).fetchone()
        return self._archived(row) if row else None

    def count(self) -> int:
        return self.connection.execute("SELECT COUNT(*) FROM tasks").fetchone()[0]

    def train_tasks(self, *, exclude_ids: Iterable[str] = (), limit: int = 100) -> list[ArchivedTask]:
        """Archived tasks that were never val or test, not in ``exclude_ids``: most recurrent first, then
        most recently seen."""
        return self._select("held_out = 0 AND split = 'train' ORDER BY recurrence DESC, last_night DESC, id",
                            exclude_ids, limit)

    def val_tasks(self, *, exclude_ids: Iterable[str] = (), limit: int = 200) -> list[ArchivedTask]:
        """Archived tasks whose latest split is val, not in ``exclude_ids``, most recently seen first."""
        return self._select("split = 'val' ORDER BY last_night DESC, id", exclude_ids, limit)

    def _select(self, where: str, exclude_ids: Iterable[str], limit: int) -> list[ArchivedTask]:
        excluded = set(exclude_ids)
        out: list[ArchivedTask] = []
        for row in self.connection.execute(f"SELECT {self._COLUMNS} FROM tasks WHERE {where}"):
            if row[0] in excluded:
                continue
            archived = self._archived(row)
            if archived is not None:
                out.append(archived)
            if len(out) >= limit:
                break
        return out

    # -- rules
    _RULE_COLUMNS = ("id", "keys", "text", "phrasings", "sessions", "nights", "stated", "status", "rejections",
                     "wins", "losses", "first_night", "last_night", "last_exercised", "status_night",
                     "replaced_by", "scope", "scope_reason")
    _RULE_JSON = ("keys", "phrasings", "sessions", "nights")

    def rules(self) -> list[dict[str, Any]]:
        """Every archived rule as a dict (``_RULE_COLUMNS``; keys as ``[kind, value]`` pairs), most stated first."""
        rows = self.connection.execute(f"SELECT {', '.join(self._RULE_COLUMNS)} FROM rules "
                                       "ORDER BY stated DESC, first_night, id")
        out = []
        for row in rows:
            entry = dict(zip(self._RULE_COLUMNS, row))
            for name in self._RULE_JSON:
                entry[name] = json.loads(entry[name])
            out.append(entry)
        return out

    def put_rule(self, entry: dict[str, Any]) -> None:
        """Insert or replace one rule row (``rules()``'s shape)."""
        values = [json.dumps(entry[name]) if name in self._RULE_JSON else entry.get(name)
                  for name in self._RULE_COLUMNS]
        with self.connection:
            self.connection.execute(f"INSERT OR REPLACE INTO rules ({', '.join(self._RULE_COLUMNS)}) VALUES "
                                    f"({', '.join('?' for _ in self._RULE_COLUMNS)})", values)

    # -- provenance
    def authored_texts(self) -> list[str]:
        """What users typed, over every archived task (``TaskRecord.authored`` of each task's latest record) and the
        phrasings of every archived rule: the archive's share of ``provenance.UserText``. A record that does not parse
        gives nothing."""
        texts: list[str] = []
        for (record,) in self.connection.execute("SELECT record FROM tasks ORDER BY rowid"):
            try:
                authored = json.loads(record).get("authored") or []
            except (ValueError, AttributeError):
                continue
            texts.extend(text for text in authored if isinstance(text, str))
        for (phrasings,) in self.connection.execute("SELECT phrasings FROM rules"):
            try:
                texts.extend(text for text in json.loads(phrasings) if isinstance(text, str))
            except (ValueError, TypeError):
                continue
        return texts

    # -- scores
    def record_scores(self, results: Iterable[ReplayResult], *, night_id: str, split_of: dict[str, str],
                      documents: dict[str, str]) -> int:
        """Add one score-history entry per archived task among ``results`` (errored replays are not scores):
        mean hard and soft over its scored samples, with the documents replayed (kind -> sha256). Tasks not
        in the archive (e.g. synthetic variants) are skipped. Returns the entries written."""
        by_task: dict[str, list[ReplayResult]] = {}
        for result in results:
            if result.error is None:
                by_task.setdefault(result.task_id, []).append(result)
        written = 0
        key = _documents_key(documents)
        with self.connection:
            for task_id, scored in by_task.items():
                if not self.connection.execute("SELECT 1 FROM tasks WHERE id = ?", (task_id,)).fetchone():
                    continue
                hard = sum(result.hard for result in scored) / len(scored)
                soft = sum(result.soft for result in scored) / len(scored)
                self.connection.execute("INSERT OR REPLACE INTO scores VALUES (?, ?, ?, ?, ?, ?, ?)",
                                        (task_id, night_id, split_of.get(task_id, "train"), hard, soft,
                                         len(scored), key))
                written += 1
        return written

    def history(self, task_id: str) -> list[ScoreRow]:
        """The score history of one task, in the order it was recorded."""
        rows = self.connection.execute(
            "SELECT night_id, split, hard, soft, samples, documents FROM scores WHERE task_id = ? ORDER BY rowid",
            (task_id,))
        return [ScoreRow(night_id=n, split=s, hard=h, soft=so, samples=c, documents=json.loads(d))
                for n, s, h, so, c, d in rows]

    # -- recall
    def recall(self, queries: Iterable[str], *, k: int, exclude_ids: Iterable[str] = ()) -> list[Recalled]:
        """The ``k`` archived train tasks most similar to any of ``queries`` (request texts), best first.

        Only tasks that were never val or test and are not in ``exclude_ids`` (tonight's tasks) are returned.
        Similarity: FTS5 BM25 over the requests (each query's content words OR-ed), or the LIKE word count
        without FTS5; a task's score is its best over the queries. k <= 0 returns [].
        """
        if k <= 0:
            return []
        excluded = set(exclude_ids)
        best: dict[str, float] = {}
        for query in queries:
            terms = sorted(content_words(query))[:MAX_QUERY_WORDS]
            if not terms:
                continue
            for task_id, score in self._search(terms, limit=k + len(excluded)):
                if task_id not in excluded and score > best.get(task_id, float("-inf")):
                    best[task_id] = score
        ranked = sorted(best.items(), key=lambda item: (-item[1], item[0]))
        out: list[Recalled] = []
        for task_id, score in ranked:
            archived = self.get(task_id)
            if archived is None or archived.held_out or archived.split != "train":
                continue
            history = self.history(task_id)
            out.append(Recalled(archived=archived, score=score, last=history[-1] if history else None))
            if len(out) >= k:
                break
        return out

    def _search(self, terms: list[str], *, limit: int) -> list[tuple[str, float]]:
        if self.has_fts_index:
            match = " OR ".join('"' + term.replace('"', "") + '"' for term in terms)
            rows = self.connection.execute(
                "SELECT tasks.id, bm25(tasks_fts) FROM tasks_fts JOIN tasks ON tasks.id = tasks_fts.id "
                "WHERE tasks_fts MATCH ? AND tasks.held_out = 0 AND tasks.split = 'train' "
                "ORDER BY bm25(tasks_fts) LIMIT ?", (match, limit))
            return [(task_id, -rank) for task_id, rank in rows]
        scorer = " + ".join("(lower(request) LIKE ? ESCAPE '\\')" for _ in terms)
        patterns = ["%" + term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
                    for term in terms]
        rows = self.connection.execute(
            f"SELECT id, {scorer} AS score FROM tasks WHERE held_out = 0 AND split = 'train' "
            "AND score > 0 ORDER BY score DESC, recurrence DESC, id LIMIT ?", (*patterns, limit))
        return [(task_id, float(score)) for task_id, score in rows]

    # -- the rejected-edit ledger
    def add_rejected_edit(self, *, key: str, night_id: str, target: str, op: str, anchor: str | None,
                          content: str, reason: str) -> bool:
        """Record an edit the gate rejected; the first night it was rejected is kept, and ``rejections`` counts
        the nights it was rejected on. Returns True if new."""
        with self.connection:
            known = self.connection.execute("SELECT 1 FROM rejected_edits WHERE key = ?", (key,)).fetchone()
            if known:
                self.connection.execute(
                    "UPDATE rejected_edits SET rejections = rejections + 1 WHERE key = ? AND night_id != ?",
                    (key, night_id))
                return False
            self.connection.execute(
                "INSERT INTO rejected_edits (key, night_id, target, op, anchor, content, reason, recorded_at, "
                "rejections) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1)",
                (key, night_id, target, op, anchor, content, reason, time.time()))
        return True

    def rejected_edits(self, *, limit: int | None = None) -> list[dict[str, Any]]:
        """Ledger entries, newest first: key, night_id (first rejection), target, op, anchor, content, reason,
        rejections (nights it was rejected on)."""
        sql = ("SELECT key, night_id, target, op, anchor, content, reason, rejections FROM rejected_edits "
               "ORDER BY recorded_at DESC, rowid DESC")
        rows = self.connection.execute(sql + (" LIMIT ?" if limit else ""), (limit,) if limit else ())
        names = ("key", "night_id", "target", "op", "anchor", "content", "reason", "rejections")
        return [dict(zip(names, row)) for row in rows]


def _is_corruption(exc: sqlite3.DatabaseError) -> bool:
    message = str(exc).lower()
    return "malformed" in message or "not a database" in message or "file is encrypted" in message
