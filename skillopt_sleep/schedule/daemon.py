"""``skillopt-sleep daemon``: a foreground scheduler for machines without cron or a systemd user manager.

APScheduler 3.x ``BlockingScheduler`` with one job: ``CronTrigger(hour, minute)`` (local time) or, for tests,
``IntervalTrigger(seconds=N)``; ``coalesce=True`` (missed runs collapse into one), ``misfire_grace_time=3600`` s,
``max_instances=1``.

Each night runs the CLI in a subprocess (``<python> -m skillopt_sleep run-now --project P --json``), not
``run_night`` in-process: a night that crashes, leaks memory or hangs cannot take the daemon down, each night
reads the config afresh, and SIGTERM can stop a running night. One log line per night (status, exit code,
night dir, seconds) goes to stderr and to ``<state dir>/logs/daemon-<key>.log``.

Files (``<state dir>`` = ``paths.state_dir()``): ``daemon-<key>.pid`` (the pid), ``daemon-<key>.json`` (pid,
trigger, start time; read by ``status``), ``daemon-<key>.lock`` (held while running: one daemon per project).
SIGTERM / SIGINT: stop scheduling, terminate a running night, remove the pid files, exit 0.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from filelock import FileLock, Timeout

from skillopt_sleep.errors import LockedError, ScheduleError
from skillopt_sleep.fsio import read_json, write_json_atomic, write_text_atomic
from skillopt_sleep.paths import state_dir
from skillopt_sleep.schedule import DEFAULT_AT, parse_at, schedule_key

LOGGER_NAME = "skillopt_sleep.daemon"
MISFIRE_GRACE_S = 3600
TERMINATE_GRACE_S = 20.0


@dataclass
class DaemonFiles:
    """Paths of one project's daemon files."""

    pid: Path
    info: Path
    lock: Path
    log: Path


def daemon_files(project: Path) -> DaemonFiles:
    """Return the pid, info, lock and log paths of the daemon of ``project``."""
    key = schedule_key(project)
    root = state_dir()
    return DaemonFiles(pid=root / f"daemon-{key}.pid", info=root / f"daemon-{key}.json",
                       lock=root / f"daemon-{key}.lock", log=root / "logs" / f"daemon-{key}.log")


def pid_alive(pid: int) -> bool:
    """Return whether a process with ``pid`` exists (signal 0)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def running_daemon(project: Path) -> dict | None:
    """Return the info of the running daemon of ``project`` (``pid``, ``at``, ``every_seconds``, ``started_at``,
    ``log_file``), or None when there is no pid file or its process is gone (a stale file)."""
    files = daemon_files(project)
    try:
        pid = int(files.pid.read_text().strip())
    except (OSError, ValueError):
        return None
    if not pid_alive(pid):
        return None
    info = read_json(files.info, default=None) or {}
    return {**info, "pid": pid}


def night_argv(project: Path) -> list[str]:
    """Return the argv of one night run by the daemon: this interpreter, ``-m skillopt_sleep run-now --json``."""
    return [sys.executable, "-m", "skillopt_sleep", "run-now", "--project", str(project), "--json"]


class NightRunner:
    """The scheduled job: runs one night in a subprocess, logs one line, never raises."""

    def __init__(self, project: Path, logger: logging.Logger, argv: list[str] | None = None):
        self.project = project
        self.logger = logger
        self.argv = argv or night_argv(project)
        self._lock = threading.Lock()
        self._process: subprocess.Popen | None = None
        self._stopping = False
        self.idle = threading.Event()
        self.idle.set()

    def __call__(self) -> None:
        with self._lock:
            if self._stopping:
                return
            self.idle.clear()
            start = time.monotonic()
            try:
                self._process = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                                 stdin=subprocess.DEVNULL, text=True)
            except OSError as exc:
                self.logger.error("night project=%s status=error exit=- error=%s", self.project, exc)
                self.idle.set()
                return
        try:
            stdout, stderr = self._process.communicate()
            self._log(self._process.returncode, stdout, stderr, time.monotonic() - start)
        except Exception:  # the daemon outlives any night
            self.logger.exception("night project=%s status=error (daemon side)", self.project)
        finally:
            with self._lock:
                self._process = None
            self.idle.set()

    def _log(self, exit_code: int, stdout: str, stderr: str, seconds: float) -> None:
        if self._stopping and exit_code != 0:
            self.logger.warning("night project=%s status=interrupted exit=%d (daemon stopping) seconds=%.1f",
                                self.project, exit_code, seconds)
            return
        try:
            report = json.loads(stdout)
        except ValueError:
            report = None
        if isinstance(report, dict) and "status" in report:
            level = logging.INFO if exit_code == 0 else logging.ERROR
            self.logger.log(level, "night project=%s status=%s exit=%d night_dir=%s seconds=%.1f",
                            self.project, report["status"], exit_code, report.get("night_dir"), seconds)
            return
        lines = [line for line in stderr.strip().splitlines() if line.strip()]
        status = "locked" if exit_code == LockedError.exit_code else "error"
        self.logger.error("night project=%s status=%s exit=%d night_dir=- seconds=%.1f error=%s", self.project,
                          status, exit_code, seconds, lines[-1] if lines else "no output")

    def stop(self) -> None:
        """Refuse new nights and terminate a running one (SIGTERM, then SIGKILL after TERMINATE_GRACE_S)."""
        with self._lock:
            self._stopping = True
            process = self._process
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(TERMINATE_GRACE_S)
            except subprocess.TimeoutExpired:
                process.kill()


def _make_logger(log_file: Path) -> tuple[logging.Logger, list[logging.Handler]]:
    log_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    formatter = logging.Formatter("%(asctime)s %(levelname)s %(message)s")
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr),
                                       logging.FileHandler(log_file, encoding="utf-8")]
    for handler in handlers:
        handler.setFormatter(formatter)
    logger = logging.getLogger(LOGGER_NAME)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    scheduler_logger = logging.getLogger("apscheduler")
    for handler in handlers:
        logger.addHandler(handler)
        scheduler_logger.addHandler(handler)
    if scheduler_logger.level == logging.NOTSET or scheduler_logger.level < logging.WARNING:
        scheduler_logger.setLevel(logging.WARNING)
    return logger, handlers


def _remove_handlers(handlers: list[logging.Handler]) -> None:
    for name in (LOGGER_NAME, "apscheduler"):
        for handler in handlers:
            logging.getLogger(name).removeHandler(handler)
    for handler in handlers:
        handler.close()


def run_daemon(project: Path, *, at: str = DEFAULT_AT, every_seconds: float | None = None,
               argv: list[str] | None = None) -> int:
    """Run nights for ``project`` until SIGTERM / SIGINT; return 0 after a clean shutdown.

    at: "HH:MM" local time (daily CronTrigger); every_seconds: run every N seconds instead (IntervalTrigger,
    for tests). argv: the night command (default ``night_argv(project)``). Must run in the main thread (signal
    handlers). Raises ScheduleError for a bad ``at`` or when a daemon for this project is already running.
    """
    from apscheduler.schedulers import SchedulerNotRunningError
    from apscheduler.schedulers.blocking import BlockingScheduler
    from apscheduler.triggers.cron import CronTrigger
    from apscheduler.triggers.interval import IntervalTrigger
    from tzlocal import get_localzone

    hour, minute = parse_at(at)
    files = daemon_files(project)
    files.lock.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    lock = FileLock(str(files.lock), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        other = running_daemon(project)
        raise ScheduleError(f"a daemon for {project} is already running"
                            + (f" (pid {other['pid']})" if other else "") + f"; lock {files.lock}") from None
    logger, handlers = _make_logger(files.log)
    previous_handlers = {}
    try:
        zone = get_localzone()
        scheduler = BlockingScheduler(timezone=zone)
        trigger = (IntervalTrigger(seconds=every_seconds, timezone=zone) if every_seconds
                   else CronTrigger(hour=hour, minute=minute, second=0, timezone=zone))
        runner = NightRunner(project, logger, argv)
        scheduler.add_job(runner, trigger, id="night", name=f"skillopt-sleep night {project}",
                          coalesce=True, misfire_grace_time=MISFIRE_GRACE_S, max_instances=1)
        stopping, finished = threading.Event(), threading.Event()

        def shut_down() -> None:
            runner.stop()
            while not finished.is_set():  # a signal may arrive before the scheduler has started
                try:
                    scheduler.shutdown(wait=False)
                    return
                except SchedulerNotRunningError:
                    time.sleep(0.05)

        def on_signal(signum, frame) -> None:
            if stopping.is_set():
                return
            stopping.set()
            logger.info("daemon received %s: shutting down", signal.Signals(signum).name)
            threading.Thread(target=shut_down, name="skillopt-sleep-shutdown", daemon=True).start()

        for signum in (signal.SIGTERM, signal.SIGINT):
            previous_handlers[signum] = signal.signal(signum, on_signal)
        write_text_atomic(files.pid, f"{os.getpid()}\n", mode=0o644)
        write_json_atomic(files.info, {"pid": os.getpid(), "project": str(project), "at": at,
                                       "every_seconds": every_seconds, "log_file": str(files.log),
                                       "started_at": datetime.now(timezone.utc).isoformat()}, mode=0o644)
        first = trigger.get_next_fire_time(None, datetime.now(zone))
        logger.info("daemon started pid=%d project=%s trigger=%s next_run=%s log=%s", os.getpid(), project,
                    f"every {every_seconds}s" if every_seconds else f"daily at {hour:02d}:{minute:02d}",
                    first.isoformat() if first else "-", files.log)
        try:
            if not stopping.is_set():
                scheduler.start()  # blocks until shut_down() stops it
        finally:
            finished.set()
        if not runner.idle.wait(TERMINATE_GRACE_S + 5):
            logger.warning("daemon stopping while a night is still running")
        logger.info("daemon stopped pid=%d", os.getpid())
        return 0
    finally:
        for signum, handler in previous_handlers.items():
            signal.signal(signum, handler)
        for path in (files.pid, files.info):
            try:
                path.unlink()
            except FileNotFoundError:
                pass
        _remove_handlers(handlers)
        lock.release()
