"""Prompt templates: Markdown files shipped in ``skillopt_sleep/engine/prompts/``, overridable by the user.

Templates: ``reflect.md``, ``reflect_contrastive.md``, ``merge.md``, ``rank.md``, ``target_system.md``,
``judge_rubric.md``, ``miner.md``.
A file of the same name in ``paths.config_dir() / "prompts"`` replaces the shipped one.

Placeholders are ``{name}`` where *name* is a Python identifier. Rendering replaces exactly the placeholders whose
name is given and leaves every other brace alone (so JSON examples in a template need no escaping, and a value that
itself contains ``{name}`` is never expanded a second time). Placeholders per template:

* ``target_system.md``: ``{skill}``, ``{memory}``
* ``reflect.md`` / ``reflect_contrastive.md``: ``{edit_budget}``, ``{targets}``, ``{skill}``, ``{memory}``,
  ``{context}`` (a ``## Context`` section or nothing), ``{tasks}``
* ``merge.md``: ``{max_edits}``, ``{targets}``, ``{skill}``, ``{memory}``, ``{patches}``
* ``rank.md``: ``{keep}``, ``{count}``, ``{skill}``, ``{memory}``, ``{edits}``
* ``judge_rubric.md``: ``{request}``, ``{rubric}``, ``{response}``
* ``miner.md``: ``{request}``, ``{final_answer}`` (the rejected answer), ``{accepted_answer}``, ``{reaction}``
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

from skillopt_sleep import paths

PROMPT_NAMES = ("reflect.md", "reflect_contrastive.md", "merge.md", "rank.md", "target_system.md", "judge_rubric.md",
                "miner.md")

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _file_name(name: str) -> str:
    file_name = name if name.endswith(".md") else f"{name}.md"
    if file_name not in PROMPT_NAMES:
        raise ValueError(f"unknown prompt template {name!r}; known: {', '.join(PROMPT_NAMES)}")
    return file_name


def override_path(name: str) -> Path:
    """Return where a user override of template ``name`` lives (it may not exist)."""
    return paths.config_dir() / "prompts" / _file_name(name)


def load_prompt(name: str) -> str:
    """Return the template text for ``name`` (``"reflect"`` or ``"reflect.md"``).

    The user's override (``override_path(name)``) wins when it is a file; otherwise the shipped template is read
    with ``importlib.resources``. Raises ValueError for a name that is not in ``PROMPT_NAMES``.
    """
    file_name = _file_name(name)
    override = override_path(file_name)
    if override.is_file():
        return override.read_text(encoding="utf-8")
    return resources.files("skillopt_sleep.engine").joinpath("prompts", file_name).read_text(encoding="utf-8")


def render(template: str, values: Mapping[str, Any]) -> str:
    """Replace each ``{name}`` whose name is a key of ``values`` by ``str(value)``; leave other braces alone."""

    def substitute(match: re.Match[str]) -> str:
        key = match.group(1)
        return str(values[key]) if key in values else match.group(0)

    return _PLACEHOLDER.sub(substitute, template)


def render_prompt(name: str, **values: Any) -> str:
    """Load template ``name`` and render it with ``values`` (see the module docstring for the placeholders)."""
    return render(load_prompt(name), values)
