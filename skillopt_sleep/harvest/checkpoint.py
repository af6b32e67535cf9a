"""Per-file harvest checkpoints: where the last completed night stopped in each transcript file.

File format: JSON object ``{"format": "skillopt-sleep-checkpoints/1", "files": {<absolute path>: {size, mtime_ns,
offset, session_id}}}``, written atomically (``skillopt_sleep.fsio``, mode 0600). Sizes and offsets are bytes,
``mtime_ns`` nanoseconds. No time strings are stored, so nothing depends on the local timezone.
"""

from __future__ import annotations

from pathlib import Path

import orjson
from pydantic import ValidationError

from skillopt_sleep.errors import HarvestError
from skillopt_sleep.fsio import write_json_atomic
from skillopt_sleep.models import FileCheckpoint

CHECKPOINTS_FORMAT = "skillopt-sleep-checkpoints/1"


def load_checkpoints(path: Path) -> dict[str, FileCheckpoint] | None:
    """Return the checkpoint map stored at ``path``, or None when there is no file (the first night).

    Raises HarvestError when the file exists but is not a checkpoint file (the message names the file and the
    fix); entries that are individually invalid are dropped (their files are then read again from the start).
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as error:
        raise HarvestError(f"cannot read harvest checkpoints {path}: {error.strerror}; fix its permissions") from error
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        raise HarvestError(f"harvest checkpoints {path} are not valid JSON ({error}); delete the file to re-read "
                           "the lookback window") from error
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict):
        raise HarvestError(f"harvest checkpoints {path} have no 'files' map; delete the file to re-read the "
                           "lookback window")
    checkpoints: dict[str, FileCheckpoint] = {}
    for key, value in files.items():
        try:
            checkpoints[str(key)] = FileCheckpoint.model_validate(value)
        except ValidationError:
            continue
    return checkpoints


def save_checkpoints(path: Path, checkpoints: dict[str, FileCheckpoint]) -> None:
    """Write ``checkpoints`` to ``path`` atomically (mode 0600). Raises OSError when the directory is not
    writable."""
    files = {key: checkpoint.model_dump(mode="json") for key, checkpoint in sorted(checkpoints.items())}
    write_json_atomic(Path(path), {"format": CHECKPOINTS_FORMAT, "files": files}, mode=0o600)
