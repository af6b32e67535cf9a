"""The transcript sources a night can read, one harvester module each, and the memory file each agent reads.

=========  ====================  ===============================================  ======================================
source     agent                 sessions (default root; ``<source>_home`` or     memory file it reads
                                 ``--home source=PATH`` overrides)                (project-relative)
=========  ====================  ===============================================  ======================================
claude     Claude Code           ``$CLAUDE_CONFIG_DIR`` or ``~/.claude``          ``CLAUDE.md``
codex      Codex CLI             ``$CODEX_HOME`` or ``~/.codex``                  ``AGENTS.md``
gemini     Gemini CLI            ``$GEMINI_CLI_HOME/.gemini`` or ``~/.gemini``    ``GEMINI.md``
                                 (``tmp/<hash>/chats/``, ``data/``)
copilot    Copilot CLI           ``$COPILOT_HOME`` or ``~/.copilot``              ``.github/copilot-instructions.md``
                                 (``session-state/<id>/events.jsonl``, legacy
                                 ``history-session-state/``)
opencode   OpenCode              ``$XDG_DATA_HOME/opencode`` or                   ``AGENTS.md``
                                 ``~/.local/share/opencode`` (``opencode.db``,
                                 legacy ``storage/``)
cursor     Cursor                ``~/.cursor`` (``projects/<path>/agent-          ``.cursor/rules/skillopt-sleep.mdc``
                                 transcripts/``)
aider      Aider                 ``$AIDER_CHAT_HISTORY_FILE``, else the project   ``CONVENTIONS.md`` (read with
                                 (``.aider.chat.history.md``)                     ``--read``)
cline      Cline, Roo Code,      VS Code ``globalStorage`` (Linux                 ``.clinerules/skillopt-sleep.md``
           Kilo Code             ``$XDG_CONFIG_HOME/Code/User/globalStorage``)
                                 ``/<extension-id>/tasks/<id>/``
=========  ====================  ===============================================  ======================================

``parse_sources`` reads the ``source`` setting: ``auto`` (every source whose root holds sessions), ``all``, one
name, or several separated by commas (``gemini,aider``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import get_args

from skillopt_sleep.errors import HarvestError
from skillopt_sleep.harvest import aider, claude_code, cline, codex, copilot_cli, cursor, gemini_cli, opencode
from skillopt_sleep.harvest.read_plan import HarvestContext
from skillopt_sleep.models import HarvestStats, Session, SourceName

#: Every source name skillopt-sleep knows (``models.SourceName``), in the order sources are read and listed.
SOURCE_NAMES: tuple[str, ...] = get_args(SourceName)


@dataclass(frozen=True)
class Source:
    """One agent's transcripts. default_root: where its sessions live when no root is configured (given the
    project, for agents that keep their history in the project); has_sessions(root): cheap detection for ``auto``;
    read(root, context, stats): the harvester. (The memory file each agent reads:
    ``documents.targets.MEMORY_FILES``.)"""

    name: str
    label: str
    default_root: Callable[[Path | None], Path]
    has_sessions: Callable[[Path], bool]
    read: Callable[[Path, HarvestContext, HarvestStats], list[Session]]


REGISTRY: dict[str, Source] = {source.name: source for source in (
    Source("claude", "Claude Code", lambda project: claude_code.default_root(),
           claude_code.has_sessions, claude_code.harvest_claude),
    Source("codex", "Codex CLI", lambda project: codex.default_root(), codex.has_sessions,
           codex.harvest_codex),
    Source("gemini", "Gemini CLI", lambda project: gemini_cli.default_root(), gemini_cli.has_sessions,
           gemini_cli.harvest_gemini),
    Source("copilot", "Copilot CLI", lambda project: copilot_cli.default_root(), copilot_cli.has_sessions,
           copilot_cli.harvest_copilot),
    Source("opencode", "OpenCode", lambda project: opencode.default_root(), opencode.has_sessions,
           opencode.harvest_opencode),
    Source("cursor", "Cursor", lambda project: cursor.default_root(), cursor.has_sessions, cursor.harvest_cursor),
    Source("aider", "Aider", aider.default_root, aider.has_sessions, aider.harvest_aider),
    Source("cline", "Cline / Roo Code / Kilo Code", lambda project: cline.default_root(), cline.has_sessions,
           cline.harvest_cline),
)}


def resolve_root(name: str, explicit: Path | None, project: Path | None = None) -> Path:
    """The root to read for source ``name``: ``explicit`` (``~`` expanded, absolute), else its default."""
    if explicit is not None:
        return Path(explicit).expanduser().absolute()
    return REGISTRY[name].default_root(project)


def parse_sources(value: str) -> list[str] | None:
    """The sources a ``source`` setting names, in ``SOURCE_NAMES`` order; None for ``auto``. Raises HarvestError
    for an empty or unknown name (naming the known ones)."""
    text = (value or "").strip().lower()
    if text == "auto":
        return None
    if text == "all":
        return [name for name in SOURCE_NAMES if name in REGISTRY]
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [name for name in names if name not in REGISTRY]
    if not names or unknown:
        raise HarvestError(f"unknown source {', '.join(unknown) or repr(value)}; use 'auto', 'all' or one or more of "
                           f"{', '.join(REGISTRY)} separated by commas")
    return [name for name in SOURCE_NAMES if name in names]
