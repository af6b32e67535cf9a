"""The task archive (skillopt_sleep/archive.py): dedupe by id, recurrence, score history, recall, migrations."""

from __future__ import annotations

import sqlite3
import stat

import pytest

from skillopt_sleep.archive.tasks import MIGRATIONS, TaskArchive, fts5_available
from skillopt_sleep.models import ReplayResult, TaskRecord


def task(task_id: str, request: str, split: str = "train", recurrence: int = 1, rules=()) -> TaskRecord:
    return TaskRecord(id=task_id, source="claude", request=request, split=split, recurrence=recurrence,
                      rules=list(rules))


@pytest.fixture(params=["fts5", "like"])
def archive(request, tmp_path):
    if request.param == "fts5" and not fts5_available(sqlite3.connect(":memory:")):
        pytest.skip("this SQLite has no FTS5")
    with TaskArchive(tmp_path / "archive.sqlite3", use_fts5=request.param == "fts5") as opened:
        assert opened.search_backend == request.param
        yield opened


def test_the_archive_file_is_private(tmp_path):
    TaskArchive(tmp_path / "a.sqlite3").close()
    assert stat.S_IMODE((tmp_path / "a.sqlite3").stat().st_mode) == 0o600


def test_a_task_seen_on_two_nights_is_one_row_with_summed_recurrence(archive):
    archive.record_tasks([task("t-1", "install the deps with pnpm", recurrence=2)], night_id="n1")
    counts = archive.record_tasks([task("t-1", "install the deps with pnpm", recurrence=3),
                                   task("t-2", "add a README")], night_id="n2")
    assert (counts.new, counts.recurring) == (1, 1)
    assert archive.count() == 2
    stored = archive.get("t-1")
    assert (stored.recurrence, stored.nights, stored.first_night, stored.last_night) == (5, 2, "n1", "n2")


def test_recording_the_same_night_twice_counts_it_once(archive):
    archive.record_tasks([task("t-1", "install the deps")], night_id="n1")
    counts = archive.record_tasks([task("t-1", "install the deps")], night_id="n1")
    assert counts.skipped == 1 and archive.get("t-1").recurrence == 1


def test_score_history_keeps_one_entry_per_night_and_documents(archive):
    archive.record_tasks([task("t-1", "run the tests")], night_id="n1")
    results = [ReplayResult(task_id="t-1", sample=0, hard=1, soft=1.0),
               ReplayResult(task_id="t-1", sample=1, hard=0, soft=0.5),
               ReplayResult(task_id="t-1", sample=2, hard=0, error="timeout"),  # not a score
               ReplayResult(task_id="d-unknown", hard=1, soft=1.0)]  # not archived: skipped
    assert archive.record_scores(results, night_id="n1", split_of={"t-1": "train"},
                                 documents={"memory": "aa"}) == 1
    archive.record_scores([ReplayResult(task_id="t-1", hard=1, soft=1.0)], night_id="n2", split_of={},
                          documents={"memory": "bb"})
    history = archive.history("t-1")
    assert [(row.night_id, row.hard, row.soft, row.samples, row.documents) for row in history] == [
        ("n1", 0.5, 0.75, 2, {"memory": "aa"}), ("n2", 1.0, 1.0, 1, {"memory": "bb"})]


def test_recall_returns_similar_past_train_tasks_best_first(archive):
    archive.record_tasks([task("t-npm", "install the dependencies with npm in this repo"),
                          task("t-docker", "build the docker image for production"),
                          task("t-readme", "write a README for the command line tool")], night_id="n1")
    recalled = archive.recall(["please install the dependencies again"], k=2)
    assert [item.archived.task.id for item in recalled][:1] == ["t-npm"]
    assert all(item.archived.task.id != "t-docker" for item in recalled)


def test_recall_never_returns_a_task_that_was_ever_val_or_test(archive):
    archive.record_tasks([task("t-val", "install the dependencies with npm", split="val"),
                          task("t-test", "install the dependencies with yarn", split="test"),
                          task("t-train", "install the dependencies with pnpm")], night_id="n1")
    # a held-out task stays out of recall even after a night where it was mined as train
    archive.record_tasks([task("t-val", "install the dependencies with npm", split="train")], night_id="n2")
    recalled = archive.recall(["install the dependencies"], k=5)
    assert [item.archived.task.id for item in recalled] == ["t-train"]


def test_recall_excludes_the_given_ids_and_is_off_at_k_zero(archive):
    archive.record_tasks([task("t-1", "deploy the staging server"), task("t-2", "deploy the production server")],
                         night_id="n1")
    assert [r.archived.task.id for r in archive.recall(["deploy the server"], k=3, exclude_ids={"t-1"})] == ["t-2"]
    assert archive.recall(["deploy the server"], k=0) == []


def test_migrations_are_recorded_by_name_and_not_rerun(tmp_path):
    path = tmp_path / "a.sqlite3"
    TaskArchive(path, use_fts5=False).close()
    with TaskArchive(path, use_fts5=False) as archive:
        names = archive.applied_migrations()
    assert names == [name for name, _sql, fts in MIGRATIONS if not fts]


def test_the_fts5_index_is_built_from_stored_tasks_when_fts5_becomes_available(tmp_path):
    if not fts5_available(sqlite3.connect(":memory:")):
        pytest.skip("this SQLite has no FTS5")
    path = tmp_path / "a.sqlite3"
    with TaskArchive(path, use_fts5=False) as archive:
        archive.record_tasks([task("t-1", "rotate the nginx logs weekly")], night_id="n1")
    with TaskArchive(path) as archive:
        assert archive.search_backend == "fts5"
        assert "0003_tasks_fts5" in archive.applied_migrations()
        assert [r.archived.task.id for r in archive.recall(["nginx logs"], k=1)] == ["t-1"]


def test_a_corrupt_archive_is_moved_aside_and_a_new_one_started(tmp_path):
    path = tmp_path / "a.sqlite3"
    path.write_bytes(b"this is not a database at all" * 100)
    with TaskArchive(path) as archive:
        assert archive.count() == 0
        assert archive.moved_aside is not None and archive.moved_aside.exists()
        assert archive.moved_aside.read_bytes().startswith(b"this is not a database")


def test_the_rejected_edit_ledger_keeps_the_first_night(archive):
    assert archive.add_rejected_edit(key="k", night_id="n1", target="memory", op="append", anchor=None,
                                     content="Use pnpm", reason="lost")
    assert not archive.add_rejected_edit(key="k", night_id="n2", target="memory", op="append", anchor=None,
                                         content="Use pnpm", reason="lost")
    assert [(e["key"], e["night_id"]) for e in archive.rejected_edits()] == [("k", "n1")]


def test_authored_texts_are_what_users_typed_over_every_night(archive):
    typed = task("t-1", "BODY OF /deploy: ./ship.sh").model_copy(update={"authored": ["/deploy staging"]})
    archive.record_tasks([typed, task("t-2", "add a README")], night_id="n1")
    archive.put_rule({"id": "r-1", "keys": [["contains", "pnpm"]], "text": "we use pnpm", "phrasings":
                      ["we use pnpm", "pnpm, not npm"], "sessions": [], "nights": ["n1"], "stated": 2,
                      "status": "stated", "rejections": 0, "wins": 0, "losses": 0, "first_night": "n1",
                      "last_night": "n1", "last_exercised": None, "status_night": None, "replaced_by": None})
    # a record from before ``authored`` existed, and a damaged one, give nothing
    archive.connection.execute("INSERT INTO tasks VALUES ('t-3', 'old', '{\"id\": \"t-3\"}', 'train', 0, 1, 1, 'n0', "
                               "'n0')")
    archive.connection.execute("INSERT INTO tasks VALUES ('t-4', 'bad', 'not json', 'train', 0, 1, 1, 'n0', 'n0')")
    assert archive.authored_texts() == ["/deploy staging", "we use pnpm", "pnpm, not npm"]
