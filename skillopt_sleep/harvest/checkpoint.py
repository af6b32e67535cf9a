"""Per-file harvest checkpoints: where the last completed night stopped in each transcript file.

File format: JSON object ``{"format": "skillopt-sleep-checkpoints/1", "files": {<absolute path>: {size, mtime_ns,
offset, session_id}}}``, written atomically (``skillopt_sleep.fsio``, mode 0600). Sizes and offsets are bytes,
``mtime_ns`` nanoseconds. No time strings are stored, so nothing depends on the local timezone.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from skillopt_sleep.fsio import load_json, write_json_atomic
from skillopt_sleep.models import FileCheckpoint

CHECKPOINTS_FORMAT = "skillopt-sleep-checkpoints/1"


def load_checkpoints(path: Path) -> dict[str, FileCheckpoint] | None:
    """Return the checkpoint map stored at ``path``, or None when there is no file (the first night).

    A damaged file (not JSON, no ``files`` map) is moved aside to ``<name>.corrupt-<UTC stamp>`` with a warning and
    None is returned: the night reads the lookback window again (``fsio.load_json``, rebuildable). Raises
    ``DamagedFileError`` when the file cannot be read at all; entries that are individually invalid are dropped
    (their files are then read again from the start).
    """
    files = load_json(Path(path), what="the harvest checkpoints", validate=_files_map, rebuildable=True)
    if files is None:
        return None
    checkpoints: dict[str, FileCheckpoint] = {}
    for key, value in files.items():
        try:
            checkpoints[str(key)] = FileCheckpoint.model_validate(value)
        except ValidationError:
            continue
    return checkpoints


def _files_map(data: object) -> dict:
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict):
        raise TypeError("no 'files' map")
    return files


def save_checkpoints(path: Path, checkpoints: dict[str, FileCheckpoint]) -> None:
    """Write ``checkpoints`` to ``path`` atomically (mode 0600). Raises OSError when the directory is not
    writable."""
    files = {key: checkpoint.model_dump(mode="json") for key, checkpoint in sorted(checkpoints.items())}
    write_json_atomic(Path(path), {"format": CHECKPOINTS_FORMAT, "files": files}, mode=0o600)
