"""``skillopt-sleep status``: what is scheduled for a project and how, the last night, pending proposals, next run.

Sources: the systemd unit files and ``systemctl --user is-enabled / is-active`` (``schedule/systemd.py``), our
crontab line (``schedule/cron.py``), the daemon's pid file (``schedule/daemon.py``), ``state.json``
(``skillopt_sleep.state``), ``nights/<id>/proposed/manifest.json`` and ``adoptions.json`` in the project's state
dir. Next run times come from APScheduler's ``CronTrigger`` (``schedule.next_fire_time``); systemd's
``RandomizedDelaySec`` may add up to its value to the timer's time.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from skillopt_sleep.errors import DamagedFileError, ScheduleError
from skillopt_sleep.fsio import load_json
from skillopt_sleep.paths import ProjectPaths
from skillopt_sleep.review.staged import adoptable_nights, headline_now
from skillopt_sleep.review.verdicts import verdict
from skillopt_sleep.schedule import next_fire_time, parse_at, schedule_key
from skillopt_sleep.schedule.conflicts import two_schedulers_warning
from skillopt_sleep.schedule.cron import crontab_binary, find_line, line_time, read_crontab
from skillopt_sleep.schedule.daemon import daemon_files, running_daemon
from skillopt_sleep.schedule.systemd import parse_on_calendar, unit_state

ADOPTIONS_FILE = "adoptions.json"


@dataclass(frozen=True)
class _LastNight:
    last_night_id: str | None = None
    last_status: str | None = None
    last_finished_at: datetime | None = None
    error: str | None = None
    """Why ``state.json`` could not be read (it names the file and the fix); None when it could."""


def _read_state(paths: ProjectPaths) -> _LastNight:
    """The fields of ``state.json`` that status shows, read as plain JSON: ``state.load_state`` would import every
    pydantic model of the package, which would double the start-up of ``skillopt-sleep status``. A damaged file
    gives empty fields and ``error``."""
    try:
        data = load_json(paths.state_file, what="the project's state", validate=_as_object,
                         fix=f"move it aside (mv {paths.state_file} {paths.state_file}.bad) to start the project's "
                             "history afresh; nights refuse to run until then")
    except DamagedFileError as exc:
        return _LastNight(error=str(exc))
    data = data or {}
    finished = data.get("last_finished_at")
    try:  # written by pydantic: ISO 8601, "Z" for UTC (which Python 3.10's fromisoformat does not read)
        finished = datetime.fromisoformat(finished[:-1] + "+00:00" if finished.endswith("Z") else finished)
    except (AttributeError, TypeError, ValueError):
        finished = None
    return _LastNight(data.get("last_night_id"), data.get("last_status"), finished)


def _as_object(data: object) -> dict:
    if not isinstance(data, dict):
        raise TypeError(f"expected a JSON object, got {type(data).__name__}")
    return data


def adopted_night_ids(adoptions_file: Path) -> set[str]:
    """Return the night ids recorded in ``adoptions.json`` (none when the file is missing): ``recorded_adoptions``'s
    keys. Raises ``DamagedFileError`` (naming the file) for a file that is not JSON."""
    return set(recorded_adoptions(adoptions_file))


def recorded_adoptions(adoptions_file: Path) -> dict[str, str | None]:
    """Night id -> the status of its latest record (``adopted``, ``reverted``, ``pending``; None when the record
    has none) in ``adoptions.json`` ({} when the file is missing).

    Accepted shapes: a list of records with ``night_id`` (or of night id strings), ``{"adoptions": [...]}``,
    or an object keyed by night id. Raises ``DamagedFileError`` (naming the file) for a file that is not JSON.
    """
    data = load_json(adoptions_file, what="the adoption records", default=None)
    if data is None:
        return {}
    if isinstance(data, dict) and isinstance(data.get("adoptions"), list):
        data = data["adoptions"]
    if isinstance(data, dict):
        return {str(key): None for key in data}
    out: dict[str, str | None] = {}
    for entry in data if isinstance(data, list) else []:
        if isinstance(entry, str):
            out[entry] = None
        elif isinstance(entry, dict) and entry.get("night_id"):
            out[str(entry["night_id"])] = str(entry["status"]) if entry.get("status") else None
    return out


def pending_proposals(paths: ProjectPaths) -> tuple[list[str], str | None]:
    """Return (the nights ``skillopt-sleep adopt`` would adopt, oldest first: ``staged.adoptable_nights``, the one
    answer adopt uses too; an error reading ``adoptions.json`` or None)."""
    pending, _, error = _pending(paths)
    return pending, error


def _pending(paths: ProjectPaths) -> tuple[list[str], dict[str, str | None], str | None]:
    """(adoptable nights, the adoption records' night id -> status, an error reading ``adoptions.json`` or None)."""
    error = None
    try:
        recorded = recorded_adoptions(paths.root / ADOPTIONS_FILE)
    except DamagedFileError as exc:
        recorded, error = {}, f"{exc} (counted as none adopted)"
    return adoptable_nights(paths, set(recorded)), recorded, error


def _last_change(paths: ProjectPaths, night_id: str | None, pending: list[str],
                 recorded: dict[str, str | None]) -> dict:
    """``{"headline", "changed", "stage"}`` of the night's diagnostics (what changed in the user's files; the stage
    an interrupted night was stopped in, else None); empty values when the night or its diagnostics are missing
    or unreadable. A staged change no longer adoptable reads as what became of it (``staged.headline_now``)."""
    try:
        data = load_json(paths.nights / night_id / "diagnostics.json", what="diagnostics") if night_id else None
    except DamagedFileError:
        data = None
    data = data if isinstance(data, dict) else {}
    changed = [str(c.get("file")) for c in data.get("changes") or []
               if isinstance(c, dict) and c.get("state") in ("written", "staged")]
    failure = data.get("failure") if isinstance(data.get("failure"), dict) else {}
    stage = failure.get("stage") if data.get("status") == "interrupted" else None
    headline = headline_now(str(data.get("headline") or ""), night_id in pending, recorded.get(night_id or ""))
    return {"headline": headline, "changed": changed, "verdict": verdict(data) if data else None,
            "stage": str(stage) if stage else None}


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


def _systemd_section(project: Path, systemctl: str, now: datetime | None) -> dict:
    section = unit_state(project, systemctl=systemctl)
    time = parse_on_calendar(section["on_calendar"]) if section["installed"] and section["on_calendar"] else None
    section["next_run"] = _iso(next_fire_time(*time, now=now)) if time else None
    return section


def _cron_section(project: Path, crontab_bin: str | None, now: datetime | None) -> dict:
    binary = crontab_binary(crontab_bin)
    if shutil.which(binary) is None:
        return {"installed": False, "line": None, "next_run": None, "error": f"{binary!r} not found"}
    try:
        line = find_line(read_crontab(binary), project)
    except ScheduleError as exc:
        return {"installed": None, "line": None, "next_run": None, "error": str(exc)}
    time = line_time(line) if line else None
    return {"installed": line is not None, "line": line, "next_run": _iso(next_fire_time(*time, now=now)) if time
            else None, "error": None}


def _daemon_section(project: Path, now: datetime | None) -> dict:
    files = daemon_files(project)
    info = running_daemon(project)
    section = {"running": info is not None, "pid": info.get("pid") if info else None, "pid_file": str(files.pid),
               "log_file": str(files.log), "trigger": None, "next_run": None}
    if info:
        if info.get("every_seconds"):
            section["trigger"] = f"every {info['every_seconds']}s"
        elif info.get("at"):
            section["trigger"] = f"daily at {info['at']}"
            section["next_run"] = _iso(next_fire_time(*parse_at(info["at"]), now=now))
    return section


def schedule_status(project: Path, *, crontab_bin: str | None = None, systemctl: str = "systemctl",
                    now: datetime | None = None) -> dict:
    """Return the status of ``project`` (absolute) as JSON-able data::

        {project, key, scheduled_by: [systemd|cron|daemon], next_run: ISO time | None,
         systemd: {installed, service, timer, on_calendar, enabled, active, next_run},
         cron: {installed (None when unreadable), line, next_run, error},
         daemon: {running, pid, pid_file, log_file, trigger, next_run},
         last_night: {id, status, finished_at, headline, changed: [file], verdict, stage},
         pending_proposals: [night id],
         warnings: [str]}

    ``last_night.changed`` lists the files the last night wrote or staged (``headline`` says how): ``status``
    leads with it. ``last_night.verdict``: the night in the one vocabulary (``verdicts.verdict``; None without
    diagnostics). ``last_night.stage``: the stage a night stopped by a signal was in (status ``interrupted``).

    Never raises for an unreadable crontab or a damaged ``state.json`` or ``adoptions.json``: those become
    ``error`` / ``warnings`` (naming the file and the fix).
    """
    paths = ProjectPaths(project)
    state = _read_state(paths)
    systemd = _systemd_section(project, systemctl, now)
    cron = _cron_section(project, crontab_bin, now)
    daemon = _daemon_section(project, now)
    pending, recorded, adoptions_error = _pending(paths)
    scheduled_by = [name for name, on in (("systemd", systemd["installed"]), ("cron", cron["installed"]),
                                          ("daemon", daemon["running"])) if on]
    next_runs = [s["next_run"] for s in (systemd, cron, daemon) if s["next_run"]]
    return {
        "project": str(project),
        "key": schedule_key(project),
        "scheduled_by": scheduled_by,
        "next_run": min(next_runs, key=datetime.fromisoformat) if next_runs else None,
        "systemd": systemd,
        "cron": cron,
        "daemon": daemon,
        "last_night": {"id": state.last_night_id, "status": state.last_status,
                       "finished_at": _iso(state.last_finished_at),
                       **_last_change(paths, state.last_night_id, pending, recorded)},
        "pending_proposals": pending,
        "warnings": [w for w in (state.error, adoptions_error, cron["error"] if cron["installed"] is None else None,
                                 two_schedulers_warning(scheduled_by)) if w],
    }
