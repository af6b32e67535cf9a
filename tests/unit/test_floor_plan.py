"""The house's ground floor: the shared vocabularies import nothing above them (``docs/architecture.md``).

Read from the source with ``ast`` (nothing is imported), so a lazy import inside a function counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "skillopt_sleep"

#: The ground floor: the vocabularies every layer shares, and the plain utilities under them.
GROUND = ["checks.py", "text.py", "prompts", "documents", "redaction", "models.py", "errors.py", "paths.py",
          "fsio.py", "hashing.py"]
#: The floors above it: what runs a night, and what the user meets in the morning.
ABOVE = ["harvest", "mine", "backends", "engine", "archive", "envs", "review", "schedule", "cli", "night",
         "trainer", "state", "config", "config_check"]


def imported_modules(path: Path) -> set[str]:
    """Every ``skillopt_sleep...`` module name that ``path`` imports, at any depth of its code."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name.startswith("skillopt_sleep.")}


def ground_files() -> list[Path]:
    files: list[Path] = []
    for name in GROUND:
        place = PACKAGE / name
        files += sorted(place.rglob("*.py")) if place.is_dir() else [place]
    return files


@pytest.mark.parametrize("path", ground_files(), ids=lambda path: str(path.relative_to(PACKAGE)))
def test_the_ground_floor_imports_nothing_above_it(path):
    assert path.is_file()
    above = sorted(name for name in imported_modules(path) if name.split(".")[1].removesuffix(".py") in ABOVE)
    assert above == []


def test_the_reader_sees_imports_inside_functions(tmp_path):
    source = tmp_path / "example.py"
    source.write_text("def late():\n    from skillopt_sleep.engine.step import run_step\n", encoding="utf-8")
    assert "skillopt_sleep.engine.step" in imported_modules(source)
