"""The text of the read-only commands people run most (``status``, ``config show``, any ``--json``), shared by their
typer commands and by ``cli.fast`` (which answers them without importing typer): no typer import here.

``style`` is how a caller colours a piece of text: ``typer.style`` under typer (its ``echo`` drops the codes when
stdout is not a terminal), ``fast.terminal_style`` on the fast path (codes only on a terminal).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

#: ``style(text, bold=..., dim=..., fg=...) -> text`` (the ``typer.style`` / ``click.style`` signature).
Style = Callable[..., str]
#: Keys whose value ``SleepConfig.public_dump`` masks as ``***``.
MASKED_KEYS = ("api_key",)
#: Where a description's first sentence ends: a full stop and a space, not the one of "e.g." or "i.e.".
_FIRST_SENTENCE = re.compile(r"(?<!e\.g\.)(?<!i\.e\.)(?<=[.!?])\s+")


def version_line() -> str:
    """What ``-V`` / ``--version`` prints: ``skillopt-sleep <version>``."""
    from skillopt_sleep import __version__

    return f"skillopt-sleep {__version__}"


def json_text(data: Any) -> str:
    """What ``--json`` prints: indented, sorted keys, anything else as ``str``."""
    return json.dumps(data, indent=2, sort_keys=True, default=str)


def status_lines(report: dict[str, Any], style: Style) -> list[str]:
    """``status`` as text, from ``schedule.status.schedule_status``'s report: what changed last night leads."""
    last = report["last_night"]
    lines = []
    if last["changed"]:  # what changed in the user's files leads
        lines.append(f"last night ({last['id']}): {last['headline']}")
    lines.append(f"project: {report['project']} (key {report['key']})")
    lines.append(f"scheduled by: {', '.join(report['scheduled_by']) or 'nothing'}"
                 f"; next run: {report['next_run'] or '-'}")
    units = report["systemd"]
    if units["installed"]:
        lines.append(f"systemd: {units['timer']} OnCalendar={units['on_calendar']} "
                     f"enabled={units['enabled'] or '?'} active={units['active'] or '?'}")
    if report["cron"]["installed"]:
        lines.append(f"cron: {report['cron']['line']}")
    if report["daemon"]["running"]:
        lines.append(f"daemon: pid {report['daemon']['pid']} {report['daemon']['trigger']}; "
                     f"log {report['daemon']['log_file']}")
    during = f" during {last['stage']}" if last.get("stage") else ""  # a night stopped by a signal
    word = last.get("verdict") or last["status"] or ""  # the one vocabulary (verdicts.verdict)
    lines.append(f"last night: {last['id'] or '-'} {word}{during} {last['finished_at'] or ''}".rstrip())
    pending = report["pending_proposals"]
    lines.append(f"pending proposals: {len(pending)}" + (f" ({', '.join(pending)})" if pending else ""))
    lines.extend(f"{style('warning:', fg='yellow')} {warning}" for warning in report["warnings"])
    return lines


def config_lines(fields: dict[str, Any], data: dict[str, Any], style: Style) -> list[str]:
    """``config show`` as TOML that reads back into the same effective config: each key (``SleepConfig.model_fields``)
    after the first sentence of its description (a comment), with its value (``data``: the config's ``public_dump``)
    written by ``tomli_w`` (a small writer: 6 ms to import where tomlkit takes about 30, and ``config show`` is a
    start-up-bounded command). A key without a value (None: its default applies elsewhere) and a masked secret are
    comments, so the text parses back to the same settings (the secret aside)."""
    import tomli_w

    lines = []
    for key, field in fields.items():
        if field.description:
            lines.append(style(f"# {_FIRST_SENTENCE.split(field.description, maxsplit=1)[0]}", dim=True))
        value = data[key]
        if value is None:
            lines.append(style(f"# {key}: not set", dim=True))
        elif key in MASKED_KEYS and value == "***":
            lines.append(style(f"# {key}: set, not printed", dim=True))
        else:
            shown = tomli_w.dumps({key: value}).rstrip("\n").partition(" = ")[2]
            lines.append(f"{style(key, bold=True)} = {shown}")
    return lines
