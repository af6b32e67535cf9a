"""``fsio``: atomic writes keep the old file on any failure, leave no temp file, and set the permission bits."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from skillopt_sleep import fsio
from skillopt_sleep.fsio import (
    PRIVATE_MODE,
    TEMP_PREFIX,
    TEMP_SUFFIX,
    open_atomic,
    read_json,
    write_json_atomic,
    write_jsonl_atomic,
    write_text_atomic,
)

posix_only = pytest.mark.skipif(os.name != "posix", reason="permission bits are POSIX")


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def temp_files(folder: Path) -> list[Path]:
    return [path for path in folder.iterdir() if path.name.startswith(TEMP_PREFIX) and path.name.endswith(TEMP_SUFFIX)]


def test_write_text_atomic_writes_utf8_bytes_without_translating_newlines(tmp_path):
    target = tmp_path / "doc.md"
    write_text_atomic(target, "caf\u00e9\r\nline two\n")
    assert target.read_bytes() == "caf\u00e9\r\nline two\n".encode()
    assert temp_files(tmp_path) == []


@posix_only
def test_a_new_file_is_private_and_its_missing_folder_is_created_private(tmp_path):
    target = tmp_path / "state" / "nested" / "data.json"
    write_text_atomic(target, "{}\n")
    assert target.read_text() == "{}\n"
    assert mode_of(target) == PRIVATE_MODE == 0o600
    assert mode_of(target.parent) == 0o700 & ~_umask()


@posix_only
def test_an_existing_file_keeps_its_mode_and_an_explicit_mode_wins(tmp_path):
    target = tmp_path / "CLAUDE.md"
    target.write_text("old\n")
    os.chmod(target, 0o664)
    write_text_atomic(target, "new\n")
    assert target.read_text() == "new\n" and mode_of(target) == 0o664
    write_text_atomic(target, "newer\n", mode=0o640)
    assert target.read_text() == "newer\n" and mode_of(target) == 0o640


def test_json_and_jsonl_round_trip(tmp_path):
    write_json_atomic(tmp_path / "a.json", {"b": 1, "a": [1, 2], 3: "x"})
    assert (tmp_path / "a.json").read_text().startswith('{\n  "3": "x",\n  "a": [')  # sorted, indented
    assert read_json(tmp_path / "a.json") == {"3": "x", "a": [1, 2], "b": 1}
    write_jsonl_atomic(tmp_path / "rows.jsonl", [{"n": 1}, {"n": 2}])
    assert (tmp_path / "rows.jsonl").read_text() == '{"n":1}\n{"n":2}\n'
    assert read_json(tmp_path / "missing.json", default=[]) == []


def test_a_failure_mid_write_leaves_the_old_file_intact_and_no_temp_file(tmp_path):
    target = tmp_path / "CLAUDE.md"
    target.write_bytes(b"the user's document\n")
    with pytest.raises(RuntimeError, match="disk full"):
        with open_atomic(target) as handle:
            handle.write(b"half of the new ")
            raise RuntimeError("disk full")
    assert target.read_bytes() == b"the user's document\n"
    assert temp_files(tmp_path) == []


def test_keyboard_interrupt_mid_write_also_removes_the_temp_file(tmp_path):
    folder = tmp_path / "models"
    folder.mkdir()
    target = folder / "model.gguf"
    with pytest.raises(KeyboardInterrupt):
        with open_atomic(target, mode=0o644) as handle:
            handle.write(b"part one")
            raise KeyboardInterrupt
    assert not target.exists()
    assert list(folder.iterdir()) == []


def test_a_failed_rename_leaves_the_old_file_intact_and_no_temp_file(tmp_path, monkeypatch):
    target = tmp_path / "state.json"
    write_json_atomic(target, {"night": 1})

    def refuse(source, destination):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(fsio.os, "replace", refuse)
    with pytest.raises(OSError, match="No space left"):
        write_json_atomic(target, {"night": 2})
    assert read_json(target) == {"night": 1}
    assert temp_files(tmp_path) == []


def test_an_unencodable_text_raises_before_touching_the_file(tmp_path):
    target = tmp_path / "doc.md"
    target.write_text("old\n")
    with pytest.raises(UnicodeEncodeError):
        write_text_atomic(target, "lone surrogate \udc80")
    assert target.read_text() == "old\n"
    assert temp_files(tmp_path) == []


def test_the_temp_file_lives_beside_the_target_and_is_named_ours(tmp_path):
    target = tmp_path / "out.bin"
    with open_atomic(target) as handle:
        handle.write(b"x")
        (seen,) = temp_files(tmp_path)
        assert seen.parent == tmp_path and not target.exists()
    assert target.read_bytes() == b"x"
    assert temp_files(tmp_path) == []


@posix_only
def test_open_atomic_fsyncs_the_file_and_then_the_directory_after_the_rename(tmp_path, monkeypatch):
    synced: list[str] = []
    real_fsync = fsio._fsync

    def spy(fd: int) -> None:
        synced.append("dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real_fsync(fd)

    monkeypatch.setattr(fsio, "_fsync", spy)
    write_text_atomic(tmp_path / "a.txt", "a")
    assert synced == ["file", "dir"]


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current
