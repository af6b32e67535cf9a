"""Split lineage: a request ever trained (any night, any project) is never val or test again."""

from __future__ import annotations

from skillopt_sleep.archive.lineage import hold_lineage, trained_keys
from skillopt_sleep.archive.tasks import TaskArchive
from skillopt_sleep.mine.split import assign_split, assign_splits, content_key
from skillopt_sleep.models import TaskRecord

VAL, TEST = 0.3, 0.2
REQUEST = "Add lodash to the web app and wire up a debounced search box"
RETYPED = "  ADD lodash to the Web App\u200b and wire up a   debounced search box.\n"


def ids_hashing_to(split: str, count: int, prefix: str) -> list[str]:
    found = [f"t-{prefix}{n:08d}" for n in range(5000) if assign_split(f"t-{prefix}{n:08d}", VAL, TEST) == split]
    return found[:count]


def task(task_id: str, request: str, split: str = "train") -> TaskRecord:
    return TaskRecord(id=task_id, source="claude", request=request, split=split)


def test_content_key_folds_case_whitespace_format_characters_and_end_punctuation():
    assert content_key(RETYPED) == content_key(REQUEST)
    assert content_key("ｆｉｘ the bug") == content_key("fix the bug")
    assert content_key("fix the bug") != content_key("fix the other bug")


def test_a_trained_request_is_train_and_no_set_level_rule_moves_it_out():
    val_id = ids_hashing_to("val", 1, "a")[0]
    tasks = [task(val_id, RETYPED)] + [task(i, f"request {i}") for i in ids_hashing_to("train", 5, "b")]
    assign_splits(tasks, VAL, TEST)
    assert tasks[0].split == "val"  # the hash alone holds it out
    assign_splits(tasks, VAL, TEST, trained={content_key(REQUEST)})
    assert tasks[0].split == "train"
    assert sum(t.split == "val" for t in tasks) == 1  # the val slot is filled by an untouched task


def test_when_every_task_was_trained_val_stays_empty_rather_than_hold_out_a_trained_one():
    tasks = [task(i, f"request {i}") for i in ids_hashing_to("val", 3, "c")]
    assign_splits(tasks, VAL, TEST, trained={content_key(t.request) for t in tasks})
    assert {t.split for t in tasks} == {"train"}


def test_trained_on_night_one_in_project_a_is_train_on_night_two_in_project_b(tmp_path):
    projects = tmp_path / "state" / "projects"
    with TaskArchive(projects / "alpha-0123456789" / "archive.sqlite3", use_fts5=False) as archive_a:
        archive_a.record_tasks([task("t-aaaaaaaaaaaa", REQUEST, "train"),
                                task("t-bbbbbbbbbbbb", "explain the val-only request", "val")], night_id="n1")
    (projects / "beta-9876543210").mkdir(parents=True)

    val_ids, train_ids = ids_hashing_to("val", 2, "d"), ids_hashing_to("train", 4, "e")
    tonight = ([task(val_ids[0], RETYPED), task(val_ids[1], "Explain the VAL-only request")]
               + [task(i, f"request {i}") for i in train_ids])
    assign_splits(tonight, VAL, TEST)
    assert tonight[0].split == "val" and tonight[1].split == "val"  # what the hash alone would do

    lineage = hold_lineage(tonight, projects_dir=projects, val_fraction=VAL, test_fraction=TEST)
    assert tonight[0].split == "train"  # ever train -> never held out, under another id and project
    assert lineage.moved == [val_ids[0]]
    assert tonight[1].split == "val"  # once val may stay val (and may later train): only train is sticky
    assert lineage.report()["moved_to_train"] == [val_ids[0]] and lineage.errors == []


def test_no_trained_request_leaves_the_splits_alone(tmp_path):
    tonight = [task(i, f"request {i}") for i in ids_hashing_to("val", 2, "f") + ids_hashing_to("train", 4, "g")]
    assign_splits(tonight, VAL, TEST)
    before = [t.split for t in tonight]
    lineage = hold_lineage(tonight, projects_dir=tmp_path / "no-such-dir", val_fraction=VAL, test_fraction=TEST)
    assert [t.split for t in tonight] == before and lineage.keys == set() and lineage.moved == []


def test_an_unreadable_archive_is_named_and_the_others_still_count(tmp_path):
    projects = tmp_path / "projects"
    with TaskArchive(projects / "good-0000000000" / "archive.sqlite3", use_fts5=False) as archive:
        archive.record_tasks([task("t-aaaaaaaaaaaa", REQUEST, "train")], night_id="n1")
    broken = projects / "broken-1111111111" / "archive.sqlite3"
    broken.parent.mkdir(parents=True)
    broken.write_bytes(b"not a database at all" * 50)
    lineage = trained_keys(projects)
    assert lineage.keys == {content_key(REQUEST)}
    assert len(lineage.errors) == 1 and lineage.errors[0].startswith("broken-1111111111")
