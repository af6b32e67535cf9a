"""Atomic, permission-aware file writes (temp file in the same dir + fsync + rename, via ``atomicwrites``).

Files that hold transcript text are created mode 0600. A user's existing document keeps its mode.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
from atomicwrites import AtomicWriter

PRIVATE_MODE = 0o600
#: Temp files of atomic writes are named ``.skillopt-sleep-XXXX.tmp`` beside their target.
TEMP_PREFIX = ".skillopt-sleep-"
TEMP_SUFFIX = ".tmp"


class _ModeWriter(AtomicWriter):
    def __init__(self, path: str, mode_bits: int, **kwargs: Any):
        super().__init__(path, overwrite=True, **kwargs)
        self._mode_bits = mode_bits

    def get_fileobject(self, suffix: str = "", prefix: str = "tmp", dir=None, **kwargs: Any):
        # A recognisable name, so a temp file left by a SIGKILL between write and rename is ours to clean up.
        return super().get_fileobject(suffix=TEMP_SUFFIX, prefix=TEMP_PREFIX, dir=dir, **kwargs)

    def sync(self, f) -> None:  # called before the rename
        os.chmod(f.name, self._mode_bits)
        super().sync(f)


def write_text_atomic(path: Path, text: str, *, mode: int | None = None) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically.

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
    with _ModeWriter(str(path), mode, mode="w", encoding="utf-8", newline="").open() as handle:
        handle.write(text)


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
