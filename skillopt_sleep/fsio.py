"""Atomic, permission-aware file writes: a temp file beside the target, fsync, ``os.replace``, fsync of the directory.

Files that hold transcript text are created mode 0600. A user's existing document keeps its mode.
Standard library only; every atomic write in the package goes through ``open_atomic``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import orjson

PRIVATE_MODE = 0o600
#: Temp files of atomic writes are named ``.skillopt-sleep-XXXX.tmp`` beside their target, so a temp file left
#: by a SIGKILL between the write and the rename is recognisably ours.
TEMP_PREFIX = ".skillopt-sleep-"
TEMP_SUFFIX = ".tmp"


def _fsync(fd: int) -> None:
    """Flush ``fd`` to stable storage (on macOS ``fsync`` only reaches the drive's cache: F_FULLFSYNC)."""
    if sys.platform == "darwin":
        import fcntl

        fcntl.fcntl(fd, fcntl.F_FULLFSYNC)
    else:
        os.fsync(fd)


def _fsync_directory(directory: Path) -> None:
    """Make a rename in ``directory`` durable. Skipped on Windows, where a directory cannot be opened."""
    if os.name == "nt":
        return
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        _fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def open_atomic(path: Path, *, mode: int = PRIVATE_MODE) -> Iterator[BinaryIO]:
    """Yield a binary file that replaces ``path`` (with permission bits ``mode``) when the block exits normally.

    The file is a temp file in ``path``'s directory (which must exist); on a clean exit it gets ``mode``, is
    fsynced, renamed over ``path`` with ``os.replace`` and the directory is fsynced. If the block (or any step
    before the rename) raises, including KeyboardInterrupt, the temp file is deleted, ``path`` is left as it was
    and the exception propagates. Raises OSError when the directory cannot be written.
    """
    import tempfile  # here: the CLI imports this module at start-up

    path = Path(path)
    fd, temp_name = tempfile.mkstemp(dir=path.parent, prefix=TEMP_PREFIX, suffix=TEMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            if os.name == "posix":
                os.fchmod(handle.fileno(), mode)
            else:
                os.chmod(temp_name, mode)
            _fsync(handle.fileno())
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
    _fsync_directory(path.parent)


def write_text_atomic(path: Path, text: str, *, mode: int | None = None) -> None:
    """Write ``text`` (UTF-8, newlines as given) to ``path`` atomically.

    mode: permission bits for the new file; default keeps the mode of an existing file, else 0600.
    Raises OSError if the directory cannot be written. Parent directories are created (0700).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if mode is None:
        try:
            mode = path.stat().st_mode & 0o777
        except FileNotFoundError:
            mode = PRIVATE_MODE
    data = text.encode("utf-8")
    with open_atomic(path, mode=mode) as handle:
        handle.write(data)


def write_json_atomic(path: Path, data: Any, *, mode: int | None = None) -> None:
    """Write ``data`` as indented JSON atomically (pydantic models: pass ``model.model_dump(mode="json")``)."""
    text = orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS).decode()
    write_text_atomic(path, text + "\n", mode=mode)


def write_jsonl_atomic(path: Path, rows: list[Any], *, mode: int | None = None) -> None:
    """Write one JSON object per line atomically."""
    text = "".join(orjson.dumps(row, option=orjson.OPT_NON_STR_KEYS).decode() + "\n" for row in rows)
    write_text_atomic(path, text, mode=mode)


def read_json(path: Path, default: Any = None) -> Any:
    """Return the parsed JSON of ``path``, or ``default`` when it does not exist."""
    try:
        return orjson.loads(Path(path).read_bytes())
    except FileNotFoundError:
        return default
