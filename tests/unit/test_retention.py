"""Retention of night directories: newest N kept, adopted nights never deleted, backups go with their night."""

from __future__ import annotations

import pytest

from skillopt_sleep.fsio import write_json_atomic
from skillopt_sleep.review.adopt import AdoptedDocument, Adoption, adoptions_path
from skillopt_sleep.review.retention import DELETING_PREFIX, prune_nights
from skillopt_sleep.state import ProjectPaths


@pytest.fixture
def paths(tmp_path) -> ProjectPaths:
    return ProjectPaths(tmp_path / "project")


def make_nights(paths: ProjectPaths, *night_ids: str) -> None:
    for night_id in night_ids:
        (paths.nights / night_id).mkdir(parents=True)
        (paths.nights / night_id / "diagnostics.json").write_text("{}")
        (paths.backups / night_id / "stamp").mkdir(parents=True)
        (paths.backups / night_id / "stamp" / "CLAUDE.md").write_text("backup")


def record(night_id: str, status: str) -> Adoption:
    return Adoption(night_id=night_id, status=status, adopted_at="2025-01-01T00:00:00Z", documents=[
        AdoptedDocument(kind="memory", target="/p/CLAUDE.md", file="CLAUDE.md", existed_before=True,
                        backup=f"/b/{night_id}", sha256_before="a", sha256_after="b")])


def remaining(paths: ProjectPaths) -> list[str]:
    return sorted(p.name for p in paths.nights.iterdir())


def test_prune_keeps_the_newest_nights_and_deletes_older_ones_with_their_backups(paths):
    make_nights(paths, "2025-01-01T000000Z", "2025-01-02T000000Z", "2025-01-03T000000Z", "2025-01-04T000000Z")

    deleted = prune_nights(paths, 2)

    assert deleted == ["2025-01-01T000000Z", "2025-01-02T000000Z"]
    assert remaining(paths) == ["2025-01-03T000000Z", "2025-01-04T000000Z"]
    assert sorted(p.name for p in paths.backups.iterdir()) == ["2025-01-03T000000Z", "2025-01-04T000000Z"]


def test_an_adopted_night_is_never_pruned_but_a_reverted_one_is(paths):
    make_nights(paths, "2025-01-01T000000Z", "2025-01-02T000000Z", "2025-01-03T000000Z")
    write_json_atomic(adoptions_path(paths), {"format": "skillopt-sleep-adoptions/1", "adoptions": [
        record("2025-01-01T000000Z", "adopted").model_dump(mode="json"),
        record("2025-01-02T000000Z", "reverted").model_dump(mode="json")]})

    deleted = prune_nights(paths, 1)

    assert deleted == ["2025-01-02T000000Z"]
    assert remaining(paths) == ["2025-01-01T000000Z", "2025-01-03T000000Z"]
    assert (paths.backups / "2025-01-01T000000Z" / "stamp" / "CLAUDE.md").read_text() == "backup"


def test_same_second_nights_are_ordered_by_their_counter_not_as_text(paths):
    make_nights(paths, "2025-01-01T000000Z", "2025-01-01T000000Z-2", "2025-01-01T000000Z-10")

    deleted = prune_nights(paths, 1)

    assert deleted == ["2025-01-01T000000Z", "2025-01-01T000000Z-2"]
    assert remaining(paths) == ["2025-01-01T000000Z-10"]


def test_leftovers_of_a_prune_killed_halfway_are_removed(paths):
    make_nights(paths, "2025-01-05T000000Z")
    leftover = paths.nights / (DELETING_PREFIX + "2025-01-01T000000Z")
    (leftover / "proposed").mkdir(parents=True)

    assert prune_nights(paths, 5) == []
    assert remaining(paths) == ["2025-01-05T000000Z"]


def test_prune_with_fewer_nights_than_keep_deletes_nothing(paths):
    make_nights(paths, "2025-01-01T000000Z")
    assert prune_nights(paths, 60) == []
    assert prune_nights(ProjectPaths(paths.root.parent / "never-ran"), 3) == []


def test_keep_below_one_is_refused(paths):
    with pytest.raises(ValueError):
        prune_nights(paths, 0)
