"""Atomic, permission-aware file writes: a temp file beside the target, fsync, ``os.replace``, fsync of the directory;
and ``load_json``, the one checked reader of the JSON files the tool writes and reads back.

Files that hold transcript text are created mode 0600. A user's existing document keeps its mode.
Every atomic write in the package goes through ``open_atomic``.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from skillopt_sleep.errors import DamagedFileError

logger = logging.getLogger("skillopt_sleep.fsio")

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


def _shape_problem(exc: Exception) -> str:
    """What is wrong with the shape of a file's data, from the exception its validator raised: the first field of a
    pydantic ``ValidationError`` (``adoptions.0.adopted_at: Field required``), else the exception's text."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            first, count = errors()[0], exc.error_count()  # type: ignore[attr-defined]
        except (AttributeError, IndexError, TypeError):
            return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        field = ".".join(str(part) for part in first.get("loc", ())) or "(top level)"
        more = f" (and {count - 1} more)" if count > 1 else ""
        return f"field {field}: {first.get('msg')}{more}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def move_aside(path: Path) -> Path:
    """Rename ``path`` to ``<name>.corrupt-<UTC stamp>`` beside it and return the new path. Raises OSError."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    aside = path.with_name(f"{path.name}.corrupt-{stamp}")
    os.replace(path, aside)
    return aside


def load_json(path: Path, *, what: str, validate: Callable[[Any], Any] | None = None, default: Any = None,
              rebuildable: bool = False, fix: str | None = None) -> Any:
    """Read back a JSON file the tool wrote (state, adoption records, checkpoints, manifests, diagnostics, caches).

    what: what the file holds, in words, for the messages ("the project's state"). validate: turns the parsed data
    into the value returned, raising ValueError, TypeError or KeyError (a pydantic ValidationError is a ValueError)
    when it has the wrong shape; None returns the parsed JSON as it is. default: returned when the file does not
    exist (or, rebuildable, when it was damaged).

    A file that is not valid JSON (or UTF-8) or has the wrong shape is damaged:

    - ``rebuildable`` (a cache, the harvest checkpoints: losing it costs only work the next night redoes): it is
      moved aside to ``<name>.corrupt-<UTC stamp>`` (``move_aside``), a warning naming both files is logged on
      ``skillopt_sleep.fsio`` (shown on stderr even without ``-v``), and ``default`` is returned;
    - otherwise ``DamagedFileError`` names the file, what is wrong (the JSON error with its line, or the first bad
      field) and ``fix`` (default: move it aside with ``mv``, which starts ``what`` afresh).

    A file that exists but cannot be read (a directory, no permission) is ``DamagedFileError`` in both cases:
    moving it would not help.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return default
    except OSError as exc:
        raise DamagedFileError(f"cannot read {what} {path}: {exc.strerror or exc}",
                               fix="fix its permissions, or move it aside") from None
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        problem = f"is not valid JSON ({exc})"
    else:
        if validate is None:
            return data
        try:
            return validate(data)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            problem = f"has the wrong shape ({_shape_problem(exc)})"
    if rebuildable:
        try:
            aside = move_aside(path)
        except OSError as exc:
            raise DamagedFileError(f"{what} {path} {problem}, and moving it aside failed: {exc.strerror or exc}",
                                   fix=f"delete it (rm {path}); it is rebuilt") from None
        logger.warning("%s %s %s: moved aside to %s; it is rebuilt", what, path, problem, aside.name)
        return default
    raise DamagedFileError(f"{what} {path} {problem}",
                           fix=fix or f"move it aside (mv {path} {path}.bad) to start {what} afresh")
