"""``config validate``: every problem of a config file at once, each with its file, line and key.

``config.load_config`` stops at the first problem (a night needs one clear error, and it names the file and the
key); someone fixing the file wants them all, with the line to go to. Values are checked by the same model
(``SleepConfig``), so the two never disagree; a mistyped key gets the closest valid one (``config.did_you_mean``).
The line of a key is found in the file's text (a top-level ``key = ...``, quoted or not, or a ``[key]`` table); a
TOML syntax error gives tomlkit's line.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from skillopt_sleep import paths
from skillopt_sleep.config import SleepConfig, problem_message


@dataclass(frozen=True)
class ConfigProblem:
    """One problem of a config file. line: 1-based, None when no one line holds it (an unreadable file, a missing
    explicit file). key: the top-level key at fault, None for a problem of the whole file."""

    file: Path
    line: int | None
    key: str | None
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else str(self.file)
        return f"{where}: key '{self.key}': {self.message}" if self.key else f"{where}: {self.message}"


def key_line(text: str, key: str) -> int | None:
    """The 1-based line of the first top-level ``key = ...`` / ``"key" = ...`` / ``key.sub = ...`` or ``[key]`` /
    ``[[key]]`` header in ``text``, None when none is found."""
    name = re.escape(key)
    pattern = re.compile(rf"""^\s*(?:\[\[?\s*)?(?:{name}|"{name}"|'{name}')\s*[=.\]]""")
    for number, line in enumerate(text.splitlines(), 1):
        if pattern.match(line):
            return number
    return None


def validate_config_file(config_path: Path | None = None) -> tuple[Path, list[ConfigProblem]]:
    """Check the config file (default ``paths.config_file()``) against ``SleepConfig``.

    Returns (the file checked, its problems in file order; [] when it is valid). A missing default file is valid
    (the defaults apply); a missing explicit file, an unreadable file or bad TOML is one problem. Never raises for
    the file's content; the environment and flags are not checked (``config show`` shows their effect).
    """
    import tomlkit
    from tomlkit.exceptions import ParseError

    path = Path(config_path) if config_path is not None else paths.config_file()
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        return path, ([ConfigProblem(path, None, None, "config file not found")] if config_path is not None else [])
    except (OSError, UnicodeDecodeError) as exc:
        return path, [ConfigProblem(path, None, None, f"cannot read: {exc}")]
    try:
        data = tomlkit.parse(text).unwrap()
    except ParseError as exc:
        return path, [ConfigProblem(path, exc.line, None, f"invalid TOML: {exc}")]
    try:
        with warnings.catch_warnings():  # a deprecated key name is valid
            warnings.simplefilter("ignore", DeprecationWarning)
            SleepConfig.model_validate(data)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            key = str(error["loc"][0]) if error["loc"] else None
            problem = ConfigProblem(path, key_line(text, key) if key else None, key, problem_message(error))
            if problem not in problems:
                problems.append(problem)
        return path, sorted(problems, key=lambda p: p.line or 0)
    return path, []
