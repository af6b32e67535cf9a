"""Harvest speed: skillopt-sleep's harvest against the peer (``skillopt==0.2.0``), side by side.

One run generates (or reuses) a realistic corpus (``benchmarks/corpus.py``: Claude Code and Codex
sessions with long tool-result lines) and measures, each in its own subprocess so that peak memory
is per run:

* ours, cold: ``harvest(source="auto", scope="all", lookback_hours=0, checkpoints=None)``;
* ours, nothing new: the same call with the checkpoints the cold run returned;
* ours, 1% grown: new turns appended to 1% of the session files, then the same call again
  (the files are truncated back afterwards, so the corpus can be reused);
* ours, per source (Claude Code only, Codex only), to compare with the peer source by source;
* ours, cold, on a corpus with a tenth of the sessions and of the bytes, and on one with a tenth of the
  sessions but all the bytes: peak memory must not grow with the bytes (streaming);
* the peer, cold, per source, run with the Python of a separate virtualenv (``--peer-venv``,
  created with ``pip install skillopt==0.2.0`` when missing), plus its "nothing new" and
  "1% grown" nights (it has no checkpoint, so those re-read everything).

Times are the harvest call itself (measured inside the subprocess, after imports). Throughput is
corpus bytes (or session files) of the sources read, divided by that time. The page cache is
warmed before measuring, so both sides measure parsing, not the disk.

    python benchmarks/harvest.py --quick                 # ~100 MB smoke run
    python benchmarks/harvest.py --json harvest.json     # 2,000 sessions, ~1 GB
    python benchmarks/harvest.py --sources all --repeat 3   # every registered source side by side (< 60 s)

``--sources`` (``all`` or names such as ``gemini,cline``) measures instead every registered source
(``skillopt_sleep.harvest.sources.REGISTRY``) on the same generated conversations (``--source-sessions`` x
``--source-turns``, tool calls with corpus.py's output sizes) written in each agent's on-disk layout: per source
the cold harvest (MB/s, sessions/s) and the same call with the checkpoints it returned (nothing new), through
``harvest(source=..., scope="project", project=..., homes={source: root}, lookback_hours=0)``, with each
throughput's ratio to Claude Code's in the same run.

``--real`` measures instead process to process (the ``harvest`` command of each tool, start to exit, best of
``--repeat``): ours and the peer on a real-history corpus (the public real sessions in ``examples/`` and
``tests/fixtures/transcripts/``, replayed into ~350 sessions with the same record mix, see ``generate_real_corpus``)
and on the synthetic corpus, and ours on the real-history corpus with nothing new (checkpoints stored by a night)
against cold:

    python benchmarks/harvest.py --real --quick --repeat 3

With ``--compare TREE`` (a directory holding another version's ``skillopt_sleep/`` package, e.g. from ``git
archive``), ``--real`` also times that version's ``harvest`` command on every case, cold and with nothing new,
interleaved with this one's (the same console script with ``PYTHONPATH=TREE``), and prints the speed-ups.

Prints a markdown table; ``--json FILE`` writes the raw numbers.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import platform
import random
import re
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import closing
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # run as a script: make `benchmarks` and `skillopt_sleep` importable
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.corpus import (  # noqa: E402
    DEFAULT_SESSIONS,
    DEFAULT_TARGET_MB,
    QUICK_SESSIONS,
    QUICK_TARGET_MB,
    CorpusInfo,
    generate_corpus,
    grow_files,
    restore_files,
)

PEER_REQUIREMENT = "skillopt==0.2.0"
DEFAULT_PEER_VENV = "/tmp/peer-venv"
WORKER_FLAG = "--run-worker"
BACKGROUND_BUILD_NAMES = ("cc1plus", "cc1", "cmake", "ninja", "make", "ld")

# The peer's driver, written to a temp file and run by the peer venv's Python. It only calls the
# peer's public harvest functions: harvest(transcripts_dir, ...) for Claude Code projects and
# harvest_codex(archived_sessions_dir, ...) for a flat directory of Codex rollouts.
PEER_DRIVER = r'''
import json, resource, sys, time

spec = json.load(open(sys.argv[1]))
from skillopt_sleep.harvest import harvest
from skillopt_sleep.harvest_codex import harvest_codex

def high_water_kb():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0

baseline = high_water_kb()
started, cpu_started = time.perf_counter(), time.process_time()
if spec["source"] == "claude":
    digests = harvest(spec["directory"], scope="all", since_iso=spec.get("since_iso"))
else:
    digests = harvest_codex(spec["directory"], scope="all", since_iso=spec.get("since_iso"))
seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
json.dump({
    "seconds": seconds,
    "cpu_seconds": cpu_seconds,
    "sessions_returned": len(digests),
    "prompts_returned": sum(len(d.user_prompts) for d in digests),
    "peak_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    "baseline_rss_kb": baseline,
}, open(spec["result"], "w"))
'''


# ---------------------------------------------------------------------------------------------
# Subprocess workers


def _high_water_kb() -> int:
    """VmHWM of this process in kB (peak resident set so far)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def _ours_worker(spec_path: str) -> int:
    """Runs one harvest() in this process and writes its numbers to spec["result"]."""
    spec = json.loads(Path(spec_path).read_text())
    from skillopt_sleep.harvest import harvest
    from skillopt_sleep.models import FileCheckpoint

    checkpoints = None
    if spec.get("checkpoints_in"):
        raw = json.loads(Path(spec["checkpoints_in"]).read_text())
        checkpoints = {path: FileCheckpoint.model_validate(value) for path, value in raw.items()}
    # One-time set-up, like the imports: the secret detectors are built once per process (detect-secrets import,
    # pattern compilation). Timed apart and reported as its own row, not inside the harvest call.
    setup_started, setup_cpu_started = time.perf_counter(), _cpu_time()
    prepare = getattr(importlib.import_module("skillopt_sleep.redaction.redact"), "prepare", None)
    if prepare is not None:
        prepare()
    setup_seconds, setup_cpu_seconds = time.perf_counter() - setup_started, _cpu_time() - setup_cpu_started
    baseline = _high_water_kb()
    started, cpu_started = time.perf_counter(), _cpu_time()
    result = harvest(source=spec["source"], scope="all", claude_home=spec["claude_home"],
                     codex_home=spec["codex_home"], lookback_hours=0, checkpoints=checkpoints)
    seconds, cpu_seconds = time.perf_counter() - started, _cpu_time() - cpu_started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result_json_bytes = sum(len(session.model_dump_json()) for session in result.sessions)
    warm_seconds = None
    if spec.get("second_call"):
        # The same call again in this process: what is left without one-time costs (lazy imports, first-use
        # caches). Measured after the peak, so it cannot raise it.
        again = time.perf_counter()
        harvest(source=spec["source"], scope="all", claude_home=spec["claude_home"], codex_home=spec["codex_home"],
                lookback_hours=0, checkpoints=checkpoints)
        warm_seconds = time.perf_counter() - again
    if spec.get("checkpoints_out"):
        Path(spec["checkpoints_out"]).write_text(json.dumps(
            {path: checkpoint.model_dump(mode="json") for path, checkpoint in result.checkpoints.items()}))
    Path(spec["result"]).write_text(json.dumps({
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "second_call_seconds": warm_seconds,
        "setup_seconds": setup_seconds,
        "setup_cpu_seconds": setup_cpu_seconds,
        "sessions_returned": len(result.sessions),
        "turns_returned": sum(len(session.turns) for session in result.sessions),
        "result_json_bytes": result_json_bytes,
        "stats": result.stats.model_dump(mode="json"),
        "sources": list(result.sources),
        "peak_rss_kb": peak,
        "baseline_rss_kb": baseline,
    }))
    return 0


def _isolated_env(home: str, info: CorpusInfo) -> dict[str, str]:
    """An environment whose HOME is empty, so neither tool can read the real ~/.claude or ~/.codex."""
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(HOME=home, CLAUDE_CONFIG_DIR=info.claude_home, CODEX_HOME=info.codex_home,
               PYTHONDONTWRITEBYTECODE="1")
    return env


def _run_child(command: list[str], env: dict[str, str], result_path: Path, cwd: str) -> dict:
    started = time.perf_counter()
    completed = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if completed.returncode != 0 or not result_path.exists():
        raise RuntimeError(f"{' '.join(command[:3])} failed (exit {completed.returncode}):\n"
                           f"{completed.stderr[-3000:]}")
    numbers = json.loads(result_path.read_text())
    numbers["process_wall_s"] = wall
    return numbers


class Runner:
    """Starts the measured subprocesses; keeps temp files in one directory."""

    def __init__(self, info: CorpusInfo, work: Path, peer_python: str | None, repeat: int) -> None:
        self.info = info
        self.work = work
        self.peer_python = peer_python
        self.repeat = max(1, repeat)
        self.home = str(work / "home")
        os.makedirs(self.home, exist_ok=True)
        self.counter = 0

    def _paths(self, label: str) -> tuple[Path, Path]:
        self.counter += 1
        stem = f"{self.counter:02d}-{label}"
        return self.work / f"{stem}.spec.json", self.work / f"{stem}.result.json"

    def _repeat(self, once) -> dict:
        """Runs ``once`` self.repeat times; median seconds, max memory, the last run's other fields."""
        runs = [once() for _ in range(self.repeat)]
        merged = dict(runs[-1])
        merged["seconds"] = statistics.median(run["seconds"] for run in runs)
        merged["seconds_all"] = [round(run["seconds"], 4) for run in runs]
        merged["cpu_seconds"] = statistics.median(run["cpu_seconds"] for run in runs)
        merged["peak_rss_kb"] = max(run["peak_rss_kb"] for run in runs)
        for key in ("second_call_seconds", "setup_seconds", "setup_cpu_seconds"):
            if runs[-1].get(key) is not None:
                merged[key] = statistics.median(run[key] for run in runs)
        return merged

    def ours(self, label: str, *, source: str = "auto", info: CorpusInfo | None = None,
             checkpoints_in: Path | None = None, checkpoints_out: Path | None = None,
             second_call: bool = False) -> dict:
        info = info or self.info

        def once() -> dict:
            spec_path, result_path = self._paths(label)
            spec_path.write_text(json.dumps({
                "source": source, "claude_home": info.claude_home, "codex_home": info.codex_home,
                "checkpoints_in": str(checkpoints_in) if checkpoints_in else None,
                "checkpoints_out": str(checkpoints_out) if checkpoints_out else None,
                "second_call": second_call, "result": str(result_path)}))
            command = [sys.executable, str(Path(__file__).resolve()), WORKER_FLAG, str(spec_path)]
            return _run_child(command, _isolated_env(self.home, info), result_path, str(REPO_ROOT))

        return self._repeat(once)

    def peer(self, label: str, *, source: str, directory: str, since_iso: str | None = None) -> dict:
        assert self.peer_python
        driver = self.work / "peer_driver.py"
        driver.write_text(PEER_DRIVER)

        def once() -> dict:
            spec_path, result_path = self._paths(label)
            spec_path.write_text(json.dumps({"source": source, "directory": directory, "since_iso": since_iso,
                                             "result": str(result_path)}))
            # -I: isolated mode, so our own skillopt_sleep (same top-level name) can never shadow the peer's.
            command = [self.peer_python, "-I", str(driver), str(spec_path)]
            return _run_child(command, _isolated_env(self.home, self.info), result_path, str(self.work))

        return self._repeat(once)


# ---------------------------------------------------------------------------------------------
# The peer's virtualenv


def ensure_peer(venv: Path, *, install: bool, log=print) -> tuple[str | None, str]:
    """Returns (python path or None, a note). Creates the venv and installs the peer when asked."""
    python = venv / "bin" / "python"

    def installed_version() -> str | None:
        if not python.exists():
            return None
        probe = subprocess.run([str(python), "-I", "-c",
                                "import importlib.metadata as m; print(m.version('skillopt'))"],
                               capture_output=True, text=True)
        return probe.stdout.strip() if probe.returncode == 0 else None

    version = installed_version()
    if version is None and install:
        log(f"peer: creating {venv} and installing {PEER_REQUIREMENT} (one time)")
        try:
            if not python.exists():
                subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
            subprocess.run([str(python), "-m", "pip", "install", "-q", PEER_REQUIREMENT], check=True,
                           capture_output=True, text=True, timeout=900)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as error:
            detail = getattr(error, "stderr", "") or str(error)
            return None, f"peer not installable ({PEER_REQUIREMENT}): {str(detail).strip()[-300:]}"
        version = installed_version()
    if version is None:
        return None, f"peer not installed in {venv} (run without --no-peer-install to install {PEER_REQUIREMENT})"
    if version != PEER_REQUIREMENT.split("==")[1]:
        return None, f"peer in {venv} is skillopt {version}, not {PEER_REQUIREMENT}"
    return str(python), f"skillopt {version} in {venv}"


def peer_codex_directory(info: CorpusInfo) -> str:
    """A flat directory of links to the corpus's Codex rollouts.

    The peer only reads a flat ``archived_sessions`` directory (it does not walk Codex's
    ``sessions/YYYY/MM/DD`` tree), so it is given links to the very same files.
    """
    directory = Path(info.root) / "peer-codex-archived"
    directory.mkdir(exist_ok=True)
    for path in info.main_files():
        if "/codex/" in path:
            link = directory / os.path.basename(path)
            if not link.exists():
                link.symlink_to(path)
    return str(directory)


# ---------------------------------------------------------------------------------------------
# Measurements


def warm_page_cache(info: CorpusInfo) -> float:
    started = time.perf_counter()
    for path in info.files:
        with open(path, "rb") as handle:
            while handle.read(1 << 22):
                pass
    return time.perf_counter() - started


def background_load() -> dict:
    """Load average and whether a compiler/build is running beside us (e.g. a llama.cpp build)."""
    builds = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                name = Path(f"/proc/{entry}/comm").read_text().strip()
            except OSError:
                continue
            if name in BACKGROUND_BUILD_NAMES:
                builds += 1
    return {"loadavg_1m": round(os.getloadavg()[0], 2), "build_processes": builds}


def source_totals(info: CorpusInfo) -> dict[str, dict[str, int]]:
    return {
        "claude": {"bytes": info.claude_bytes, "sessions": info.claude_sessions},
        "codex": {"bytes": info.codex_bytes, "sessions": info.codex_sessions},
        "auto": {"bytes": info.total_bytes, "sessions": info.sessions},
    }


def _throughput(run: dict, totals: dict[str, int]) -> dict:
    seconds, cpu_seconds = max(run["seconds"], 1e-9), max(run["cpu_seconds"], 1e-9)
    return {"mb_per_s": totals["bytes"] / 1e6 / seconds, "sessions_per_s": totals["sessions"] / seconds,
            "mb_per_cpu_s": totals["bytes"] / 1e6 / cpu_seconds}


def measure(args: argparse.Namespace, log=print) -> dict:
    sessions = args.sessions or (QUICK_SESSIONS if args.quick else DEFAULT_SESSIONS)
    target_mb = args.target_mb or (QUICK_TARGET_MB if args.quick else DEFAULT_TARGET_MB)
    out = args.out or os.path.join(tempfile.gettempdir(), f"skillopt-harvest-corpus-{sessions}-{target_mb:g}")
    info = generate_corpus(out, sessions=sessions, target_mb=target_mb, seed=args.seed, log=log)
    # Memory scaling: the same harvest on a corpus with a tenth of the sessions and a tenth of the bytes, and on
    # one with a tenth of the sessions but all the bytes (ten times larger files). Returned sessions grow with the
    # session count; nothing may grow with the bytes.
    scaled: dict[str, CorpusInfo] = {}
    if not args.no_memory_scaling:
        few = max(10, sessions // 10)
        scaled["tenth"] = generate_corpus(f"{out}-tenth", sessions=few, target_mb=target_mb / 10, seed=args.seed,
                                          log=log)
        scaled["tenth_sessions_same_bytes"] = generate_corpus(f"{out}-tenth-sessions", sessions=few,
                                                              target_mb=target_mb, seed=args.seed, log=log)

    report: dict = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform(), "memory_gb": _memory_gb()},
        "background_before": background_load(),
        "corpus": _corpus_summary(info),
        "repeat": args.repeat,
        "ours": {}, "peer": {}, "notes": [],
    }
    totals = source_totals(info)
    cache_s = warm_page_cache(info)
    for other in scaled.values():
        warm_page_cache(other)
    log(f"page cache warmed ({info.total_bytes / 1e6:.0f} MB read in {cache_s:.1f} s)")

    peer_python, peer_note = (None, "peer skipped (--no-peer)")
    if not args.no_peer:
        peer_python, peer_note = ensure_peer(Path(args.peer_venv), install=not args.no_peer_install, log=log)
    report["peer_status"] = peer_note
    log(f"peer: {peer_note}")

    with tempfile.TemporaryDirectory(prefix="skillopt-harvest-bench-") as work_dir:
        work = Path(work_dir)
        runner = Runner(info, work, peer_python, args.repeat)
        ours = report["ours"]
        cold_checkpoints, quiet_checkpoints = work / "cold.ckpt.json", work / "quiet.ckpt.json"
        log("ours: cold harvest")
        ours["cold"] = runner.ours("cold", checkpoints_out=cold_checkpoints)
        ours["cold"].update(_throughput(ours["cold"], totals["auto"]))
        log("ours: nothing new")
        ours["nothing_new"] = runner.ours("quiet", checkpoints_in=cold_checkpoints, checkpoints_out=quiet_checkpoints,
                                          second_call=True)
        for source in ("claude", "codex"):
            log(f"ours: cold, {source} only")
            ours[f"cold_{source}"] = runner.ours(f"cold-{source}", source=source)
            ours[f"cold_{source}"].update(_throughput(ours[f"cold_{source}"], totals[source]))
        for name, other in scaled.items():
            log(f"ours: cold harvest, memory scaling corpus '{name}'")
            ours[f"cold_{name}"] = runner.ours(f"cold-{name}", info=other)
            report[f"corpus_{name}"] = _corpus_summary(other)

        peer = report["peer"]
        codex_flat = peer_codex_directory(info) if peer_python else ""
        if peer_python:
            for source, directory in (("claude", str(Path(info.claude_home) / "projects")), ("codex", codex_flat)):
                log(f"peer: cold, {source}")
                peer[f"cold_{source}"] = runner.peer(f"peer-cold-{source}", source=source, directory=directory)
                peer[f"cold_{source}"].update(_throughput(peer[f"cold_{source}"], totals[source]))
            peer["cold"] = _combine(peer["cold_claude"], peer["cold_codex"])
            peer["cold"].update(_throughput(peer["cold"], totals["auto"]))
            since = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")
            peer["nothing_new"] = _combine(*[
                runner.peer(f"peer-quiet-{source}", source=source, directory=directory, since_iso=since)
                for source, directory in (("claude", str(Path(info.claude_home) / "projects")),
                                          ("codex", codex_flat))])

        grown = grow_files(info, fraction=0.01, seed=args.seed + 4)
        try:
            grown_bytes = sum(os.path.getsize(path) - before for path, before in grown)
            report["grown"] = {"files": len(grown), "bytes_appended": grown_bytes}
            log(f"ours: 1% grown ({len(grown)} files, +{grown_bytes / 1e6:.1f} MB)")
            ours["grown"] = runner.ours("grown", checkpoints_in=quiet_checkpoints, second_call=True)
            if peer_python:
                log("peer: 1% grown")
                peer["grown"] = _combine(*[
                    runner.peer(f"peer-grown-{source}", source=source, directory=directory, since_iso=since)
                    for source, directory in (("claude", str(Path(info.claude_home) / "projects")),
                                              ("codex", codex_flat))])
        finally:
            restore_files(grown)

    report["background_after"] = background_load()
    report["ratios"] = ratios(report)
    return report


def _combine(*runs: dict) -> dict:
    """Two per-source runs as one night: times add up, memory is the larger of the two."""
    return {
        "seconds": sum(run["seconds"] for run in runs),
        "cpu_seconds": sum(run["cpu_seconds"] for run in runs),
        "sessions_returned": sum(run["sessions_returned"] for run in runs),
        "peak_rss_kb": max(run["peak_rss_kb"] for run in runs),
        "parts": list(runs),
    }


def _corpus_summary(info: CorpusInfo) -> dict:
    summary = {key: value for key, value in asdict(info).items() if key != "files"}
    summary["total_bytes"] = info.total_bytes
    summary["files"] = len(info.files)
    summary["largest_file"] = max(os.path.getsize(path) for path in info.files)
    return summary


def _memory_gb() -> float:
    return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)


def memory_per_thousand_turns_mb(run: dict) -> float:
    """Peak RSS above the post-import baseline, in MB per 1,000 turns returned."""
    return (run["peak_rss_kb"] - run["baseline_rss_kb"]) / 1024 / max(1, run["turns_returned"]) * 1000


def ratios(report: dict) -> dict:
    ours, peer = report["ours"], report["peer"]
    result = {
        "nothing_new_over_cold": ours["nothing_new"]["seconds"] / ours["cold"]["seconds"],
        "nothing_new_over_cold_cpu": ours["nothing_new"]["cpu_seconds"] / ours["cold"]["cpu_seconds"],
        "grown_over_cold": ours["grown"]["seconds"] / ours["cold"]["seconds"],
        "grown_over_cold_cpu": ours["grown"]["cpu_seconds"] / ours["cold"]["cpu_seconds"],
        "grown_second_call_over_cold": ours["grown"]["second_call_seconds"] / ours["cold"]["seconds"],
    }
    if "cold_tenth" in ours:
        tenth = ours["cold_tenth"]["peak_rss_kb"]
        result["peak_rss_full_over_tenth"] = ours["cold"]["peak_rss_kb"] / tenth
        result["peak_rss_ten_times_bytes_same_sessions"] = ours["cold_tenth_sessions_same_bytes"]["peak_rss_kb"] / tenth
        result["per_turn_memory_ten_times_bytes_over_small"] = (
            memory_per_thousand_turns_mb(ours["cold_tenth_sessions_same_bytes"])
            / memory_per_thousand_turns_mb(ours["cold_tenth"]))
    if peer:
        result["throughput_ours_over_peer"] = peer["cold"]["seconds"] / ours["cold"]["seconds"]
        result["cpu_throughput_ours_over_peer"] = peer["cold"]["cpu_seconds"] / ours["cold"]["cpu_seconds"]
        for source in ("claude", "codex"):
            result[f"throughput_ours_over_peer_{source}"] = (
                peer[f"cold_{source}"]["seconds"] / ours[f"cold_{source}"]["seconds"])
            result[f"cpu_throughput_ours_over_peer_{source}"] = (
                peer[f"cold_{source}"]["cpu_seconds"] / ours[f"cold_{source}"]["cpu_seconds"])
    return result


# ---------------------------------------------------------------------------------------------
# Rendering


def _mb(kb: float) -> str:
    return f"{kb / 1024:.0f}"


def _cell(run: dict | None, key: str, fmt: str) -> str:
    if not run:
        return "n/a"
    return format(run[key], fmt)


def render(report: dict) -> str:
    corpus, ours, peer, ratio = report["corpus"], report["ours"], report["peer"], report["ratios"]
    lines = [
        f"Corpus: {corpus['sessions']} sessions ({corpus['claude_sessions']} Claude Code + {corpus['codex_sessions']} "
        f"Codex, {corpus['sidechain_files']} sub-agent files), {corpus['total_bytes'] / 1e6:.0f} MB, longest line "
        f"{corpus['longest_line'] / 1e3:.0f} KB. Machine: {report['machine']['cpus']} CPUs, "
        f"{report['machine']['memory_gb']} GiB, Python {report['machine']['python']}. {report['date']}.",
        f"Peer: {report['peer_status']}. Median of {report['repeat']} run(s); times are the harvest call (wall clock "
        "unless marked CPU; on a shared machine CPU time is the steadier figure).",
        "",
        "| measurement | ours | peer | throughput, ours / peer |",
        "|---|---:|---:|---:|",
    ]

    def row(name: str, key: str, fmt: str, ours_run: dict | None, peer_run: dict | None, ratio_text: str = "") -> None:
        lines.append(f"| {name} | {_cell(ours_run, key, fmt)} | {_cell(peer_run, key, fmt)} | {ratio_text} |")

    faster = ratio.get("throughput_ours_over_peer")
    row("cold, all sources: seconds", "seconds", ".2f", ours["cold"], peer.get("cold"),
        f"{faster:.2f}x" if faster else "")
    cpu_faster = ratio.get("cpu_throughput_ours_over_peer")
    row("cold, all sources: CPU seconds", "cpu_seconds", ".2f", ours["cold"], peer.get("cold"),
        f"{cpu_faster:.2f}x" if cpu_faster else "")
    row("cold, all sources: MB/s", "mb_per_s", ".0f", ours["cold"], peer.get("cold"))
    row("cold, all sources: sessions/s", "sessions_per_s", ".0f", ours["cold"], peer.get("cold"))
    for source, title in (("claude", "Claude Code"), ("codex", "Codex")):
        per = ratio.get(f"throughput_ours_over_peer_{source}")
        row(f"cold, {title} only: MB/s", "mb_per_s", ".0f", ours[f"cold_{source}"], peer.get(f"cold_{source}"),
            f"{per:.2f}x" if per else "")
        per_cpu = ratio.get(f"cpu_throughput_ours_over_peer_{source}")
        row(f"cold, {title} only: MB per CPU second", "mb_per_cpu_s", ".0f", ours[f"cold_{source}"],
            peer.get(f"cold_{source}"), f"{per_cpu:.2f}x" if per_cpu else "")
    if ours["cold"].get("setup_seconds") is not None:
        setup = f"{ours['cold']['setup_seconds']:.2f}; {ours['cold']['setup_cpu_seconds']:.2f}"
        lines.append("| one-time set-up before the first call, not in the times above (secret detectors): "
                     f"seconds; CPU seconds | {setup} | | |")
    lines.append(f"| cold: peak RSS (MB) | {_mb(ours['cold']['peak_rss_kb'])} | "
                 f"{_mb(peer['cold']['peak_rss_kb']) if peer else 'n/a'} | |")
    lines.append(f"| cold: sessions returned | {ours['cold']['sessions_returned']} | "
                 f"{peer['cold']['sessions_returned'] if peer else 'n/a'} | |")
    quiet, grown = ours["nothing_new"], ours["grown"]
    lines.append(f"| nothing new: seconds (second call in the same process) | {quiet['seconds']:.3f} "
                 f"({quiet['second_call_seconds']:.3f}) | {_cell(peer.get('nothing_new'), 'seconds', '.2f')} | |")
    lines.append(f"| 1% grown ({report['grown']['files']} files, +{report['grown']['bytes_appended'] / 1e6:.1f} MB): "
                 f"seconds (second call) | {grown['seconds']:.3f} ({grown['second_call_seconds']:.3f}) | "
                 f"{_cell(peer.get('grown'), 'seconds', '.2f')} | |")
    lines += ["", "| ratio | value | goal |", "|---|---:|---|"]
    if faster:
        lines.append(f"| cold throughput, ours / peer (wall; CPU time) | {faster:.2f}x; {cpu_faster:.2f}x | "
                     f">= 3x: {'met' if min(faster, cpu_faster) >= 3 else 'MISSED'} |")
    quiet = ratio["nothing_new_over_cold"]
    lines.append(f"| nothing new / cold (ours; CPU time) | {quiet:.1%}; {ratio['nothing_new_over_cold_cpu']:.1%} | "
                 f"<= 10%: {'met' if max(quiet, ratio['nothing_new_over_cold_cpu']) <= 0.10 else 'MISSED'} |")
    lines.append(f"| 1% grown / cold (ours; CPU time; second call in the same process) | "
                 f"{ratio['grown_over_cold']:.1%}; {ratio['grown_over_cold_cpu']:.1%}; "
                 f"{ratio['grown_second_call_over_cold']:.1%} | |")
    if "cold_tenth" in ours:
        growth = ratio["peak_rss_ten_times_bytes_same_sessions"]
        turns = ours["cold_tenth_sessions_same_bytes"]["turns_returned"] / max(1, ours["cold_tenth"]["turns_returned"])
        lines.append(f"| peak RSS, 10x the bytes in as many sessions / the small corpus (ours) | {growth:.2f}x | "
                     f"flat: {'met' if growth <= 1.25 else f'MISSED (the turns returned grow {turns:.1f}x)'} |")
        lines.append(f"| peak RSS, 10x the bytes in 10x the sessions / the small corpus (ours) | "
                     f"{ratio['peak_rss_full_over_tenth']:.2f}x | |")
        per_turn = ratio["per_turn_memory_ten_times_bytes_over_small"]
        lines.append(f"| memory per 1,000 returned turns, 10x the bytes / the small corpus (ours) | {per_turn:.2f}x | "
                     f"reading streams (no growth with bytes): {'met' if per_turn <= 1.25 else 'MISSED'} |")
        lines += ["", "| memory scaling corpus (ours, cold) | sessions | MB | longest file MB | turns returned | "
                      "peak RSS MB | above baseline MB | MB per 1,000 turns | returned sessions as JSON, MB |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for name, title in (("tenth", "small"), ("tenth_sessions_same_bytes", "10x bytes, same sessions"),
                            ("", "10x bytes, 10x sessions (the main corpus)")):
            summary, run = report[f"corpus_{name}" if name else "corpus"], ours[f"cold_{name}" if name else "cold"]
            lines.append(f"| {title} | {summary['sessions']} | {summary['total_bytes'] / 1e6:.0f} | "
                         f"{summary['largest_file'] / 1e6:.1f} | {run['turns_returned']} | {_mb(run['peak_rss_kb'])} | "
                         f"{_mb(run['peak_rss_kb'] - run['baseline_rss_kb'])} | "
                         f"{memory_per_thousand_turns_mb(run):.1f} | {run['result_json_bytes'] / 1e6:.1f} |")
    before, after = report["background_before"], report["background_after"]
    lines += ["", f"Background: load average {before['loadavg_1m']} before, {after['loadavg_1m']} after; "
                  f"build processes running: {before['build_processes']} before, {after['build_processes']} after."]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Every registered source, side by side (--sources)
#
# One conversation model (N sessions x M turns: a request, 1-6 tool calls with outputs of corpus.py's sizes, 3% of
# them failing, a final answer) is drawn once from the seed and written in each agent's own on-disk layout (the
# formats of tests/agent_sessions.py and of the harvesters' docstrings, with tool calls added), so every source
# holds the same conversations; only each format's overhead differs (Claude Code repeats tool outputs in
# toolUseResult, Cline in ui_messages.json, aider's history holds no tool output but its edit blocks).

SOURCE_SESSIONS = 150
SOURCE_TURNS = 8
SOURCE_OUTPUT_SCALE = 0.35  # corpus._payload_size scale: mean tool output ~12 KB, 3% of 150-300 KB
SOURCE_CORPUS_FORMAT = 1
SOURCE_WORKER_FLAG = "--run-source-worker"
SOURCE_BASELINE = "claude"
_SOURCE_TOOLS = ("read",) * 5 + ("shell",) * 3 + ("edit",) * 2
_SHELL_COMMANDS = ("pytest -q", "ruff check .", "git status", "make build", "ls -la src", "rg -n parser")


@dataclass
class _Tool:
    kind: str  # read | shell | edit
    target: str  # the path read or edited, the command run
    output: str
    failed: bool
    old: str = ""
    new: str = ""


@dataclass
class _Turn:
    request: str
    tools: list
    answer: str


@dataclass
class _Conversation:
    index: int
    session_id: str
    start: datetime
    turns: list

    def moment(self, turn: int, step: int = 0) -> datetime:
        """Turn ``turn`` starts 3 minutes after the previous one; its steps are 5 s apart."""
        return self.start + timedelta(minutes=3 * turn, seconds=5 * step)


def _draw_conversations(sessions: int, turns: int, seed: int, project: str) -> list[_Conversation]:
    from benchmarks.corpus import _WORDS, CORPUS_END, _payload_size, _pools, _prompt

    pools = _pools(seed)
    conversations = []
    for index in range(sessions):
        rng = random.Random(seed * 7_000_003 + index)
        start = CORPUS_END - timedelta(hours=2 * (sessions - index))
        drawn = []
        for _ in range(turns):
            tools = []
            for _ in range(rng.randrange(1, 7)):
                kind = rng.choice(_SOURCE_TOOLS)
                size = _payload_size(rng, SOURCE_OUTPUT_SCALE)
                failed = rng.random() < 0.03
                path = f"{project}/src/{rng.choice(_WORDS)}/{rng.choice(_WORDS)}.py"
                if kind == "read":
                    tool = _Tool(kind, path, pools.slice(pools.numbered, rng, size), failed)
                elif kind == "shell":
                    tool = _Tool(kind, rng.choice(_SHELL_COMMANDS), pools.slice(pools.shell, rng, size), failed)
                else:
                    original = pools.slice(pools.raw, rng, size)
                    old = pools.slice(original, rng, 200)
                    tool = _Tool(kind, path, original, failed, old=old, new=old.replace("self", "this", 1) + "\n# x")
                if failed:
                    tool.output = "Error: Exit code 1\n" + tool.output[:2000]
                tools.append(tool)
            answer = (f"Done: I changed the {rng.choice(_WORDS)} handling and the tests pass. "
                      + pools.slice(pools.raw, rng, int(rng.uniform(100, 1500))))
            drawn.append(_Turn(_prompt(rng), tools, answer))
        conversations.append(_Conversation(index, str(uuid.UUID(int=rng.getrandbits(128), version=4)), start, drawn))
    return conversations


def _iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def _write_jsonl(path: Path, records: list[dict], touched: datetime) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n" for record in records)
    os.utime(path, (touched.timestamp(), touched.timestamp()))


def _write_claude(root: Path, project: str, conversations: list[_Conversation]) -> None:
    folder = root / "projects" / re.sub(r"[^A-Za-z0-9]", "-", project)
    for conversation in conversations:
        records: list[dict] = []
        parent: list[str | None] = [None]
        counter = [0]

        def envelope(kind: str, moment: datetime, parent: list = parent, counter: list = counter,
                     conversation: _Conversation = conversation) -> dict:
            counter[0] += 1
            record = {"parentUuid": parent[0], "isSidechain": False, "userType": "external", "cwd": project,
                      "sessionId": conversation.session_id, "version": "2.1.56", "gitBranch": "main",
                      "type": kind, "uuid": str(uuid.UUID(int=conversation.index * 100_000 + counter[0])),
                      "timestamp": _iso(moment)}
            parent[0] = record["uuid"]
            return record

        def assistant(block: dict, stop: str | None, moment: datetime, envelope=envelope, counter: list = counter,
                      records: list = records) -> dict:
            record = envelope("assistant", moment)
            record["message"] = {"model": "claude-sonnet-4-5-20250929", "id": f"msg_01{counter[0]:024d}",
                                 "type": "message", "role": "assistant", "content": [block], "stop_reason": stop,
                                 "stop_sequence": None, "usage": {"input_tokens": 12, "output_tokens": 300}}
            record["requestId"] = f"req_011{counter[0]:024d}"
            records.append(record)
            return record

        for number, turn in enumerate(conversation.turns):
            record = envelope("user", conversation.moment(number))
            record["message"] = {"role": "user", "content": turn.request}
            record["permissionMode"] = "default"
            records.append(record)
            for step, tool in enumerate(turn.tools, start=1):
                tool_id = f"toolu_01{conversation.index:08d}{number:04d}{step:04d}"
                if tool.kind == "read":
                    name, arguments = "Read", {"file_path": tool.target}
                    text, result = tool.output, {"type": "text", "file": {"filePath": tool.target,
                                                                          "content": tool.output}}
                elif tool.kind == "shell":
                    name, arguments = "Bash", {"command": tool.target, "description": f"Run {tool.target}"}
                    text, result = tool.output, {"stdout": tool.output, "stderr": "", "interrupted": False,
                                                 "isImage": False}
                else:
                    name, arguments = "Edit", {"file_path": tool.target, "old_string": tool.old,
                                               "new_string": tool.new}
                    text = f"The file {tool.target} has been updated."
                    result = {"filePath": tool.target, "oldString": tool.old, "newString": tool.new,
                              "originalFile": tool.output, "replaceAll": False, "userModified": False}
                block = {"type": "tool_use", "id": tool_id, "name": name, "input": arguments}
                used = assistant(block, "tool_use", conversation.moment(number, step))
                record = envelope("user", conversation.moment(number, step))
                item: dict = {"tool_use_id": tool_id, "type": "tool_result", "content": tool.output
                              if tool.failed else text}
                if tool.failed:
                    item["is_error"] = True
                record["message"] = {"role": "user", "content": [item]}
                record["toolUseResult"] = "Error: Exit code 1" if tool.failed else result
                record["sourceToolAssistantUUID"] = used["uuid"]
                records.append(record)
            assistant({"type": "text", "text": turn.answer}, "end_turn",
                      conversation.moment(number, len(turn.tools) + 1))
        _write_jsonl(folder / f"{conversation.session_id}.jsonl", records, conversation.moment(len(conversation.turns)))


def _write_codex(root: Path, project: str, conversations: list[_Conversation]) -> None:
    for conversation in conversations:
        start = conversation.start
        records: list[dict] = []

        def emit(kind: str, payload: dict, moment: datetime, records: list = records) -> None:
            records.append({"timestamp": _iso(moment), "type": kind, "payload": payload})

        emit("session_meta", {"id": conversation.session_id, "timestamp": _iso(start), "cwd": project,
                              "originator": "codex_cli_rs", "cli_version": "0.77.0", "source": "cli",
                              "model_provider": "openai"}, start)
        emit("response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": (
            f"<environment_context>\n  <cwd>{project}</cwd>\n  <approval_policy>on-request</approval_policy>\n"
            "  <sandbox_mode>workspace-write</sandbox_mode>\n  <shell>bash</shell>\n</environment_context>")}]}, start)
        for number, turn in enumerate(conversation.turns):
            moment = conversation.moment(number)
            turn_id = f"{conversation.index:04d}{number:04d}"
            emit("turn_context", {"turn_id": turn_id, "cwd": project, "approval_policy": "on-request",
                                  "sandbox_policy": {"type": "workspace-write", "network_access": False},
                                  "model": "gpt-5.1-codex", "effort": "high", "summary": "auto"}, moment)
            emit("event_msg", {"type": "task_started", "turn_id": turn_id, "model_context_window": 272000}, moment)
            emit("response_item", {"type": "message", "role": "user",
                                   "content": [{"type": "input_text", "text": turn.request}]}, moment)
            emit("event_msg", {"type": "user_message", "message": turn.request, "images": []}, moment)
            for step, tool in enumerate(turn.tools, start=1):
                moment = conversation.moment(number, step)
                call_id = f"call_{conversation.index:08d}{number:04d}{step:04d}"
                if tool.kind == "edit" and not tool.failed:
                    patch = (f"*** Begin Patch\n*** Update File: {tool.target}\n@@\n-{tool.old}\n+{tool.new}\n"
                             "*** End Patch")
                    emit("response_item", {"type": "custom_tool_call", "status": "completed", "call_id": call_id,
                                           "name": "apply_patch", "input": patch}, moment)
                    emit("response_item", {"type": "custom_tool_call_output", "call_id": call_id, "output": (
                        f"Success. Updated the following files:\nM {tool.target}")}, moment)
                    continue
                command = f"sed -n '1,400p' {tool.target}" if tool.kind != "shell" else tool.target
                emit("response_item", {"type": "function_call", "name": "shell", "call_id": call_id, "arguments":
                                       json.dumps({"command": ["bash", "-lc", command], "workdir": project})}, moment)
                emit("response_item", {"type": "function_call_output", "call_id": call_id, "output": json.dumps(
                    {"output": tool.output, "metadata": {"exit_code": 1 if tool.failed else 0,
                                                         "duration_seconds": 0.4}})}, moment)
                emit("event_msg", {"type": "token_count", "info": {"total_token_usage": {"input_tokens": 1000}}},
                     moment)
            moment = conversation.moment(number, len(turn.tools) + 1)
            emit("event_msg", {"type": "agent_message", "message": turn.answer}, moment)
            emit("response_item", {"type": "message", "role": "assistant",
                                   "content": [{"type": "output_text", "text": turn.answer}]}, moment)
            emit("event_msg", {"type": "task_complete", "turn_id": turn_id, "last_agent_message": turn.answer}, moment)
        name = f"rollout-{start.strftime('%Y-%m-%dT%H-%M-%S')}-{conversation.session_id}.jsonl"
        _write_jsonl(root / "sessions" / start.strftime("%Y/%m/%d") / name, records,
                     conversation.moment(len(conversation.turns)))


def _write_gemini(root: Path, project: str, conversations: list[_Conversation]) -> None:
    project_hash = hashlib.sha256(project.encode("utf-8")).hexdigest()
    chats = root / "tmp" / project_hash / "chats"
    names = {"read": "read_file", "shell": "run_shell_command", "edit": "replace"}
    for conversation in conversations:
        records: list[dict] = [{"sessionId": conversation.session_id, "projectHash": project_hash,
                                "startTime": _iso(conversation.start), "lastUpdated": _iso(conversation.start),
                                "kind": "main"}]
        for number, turn in enumerate(conversation.turns):
            moment = conversation.moment(number)
            records.append({"id": f"{conversation.session_id[:8]}-{number}-u", "timestamp": _iso(moment),
                            "type": "user", "content": [{"text": turn.request}]})
            records.append({"$set": {"lastUpdated": _iso(moment)}})
            for step, tool in enumerate(turn.tools, start=1):
                moment = conversation.moment(number, step)
                call_id = f"{conversation.index:04d}{number:02d}{step:02d}"
                if tool.kind == "read":
                    arguments, output, display = {"absolute_path": tool.target}, tool.output, ""
                elif tool.kind == "shell":
                    output = (f"Command: {tool.target}\nDirectory: (root)\nOutput: {tool.output}\nError: (none)\n"
                              f"Exit Code: {1 if tool.failed else 0}\nSignal: (none)\nBackground PIDs: (none)\n"
                              "Process Group PGID: 4242")
                    arguments, display = {"command": tool.target, "description": f"Run {tool.target}"}, tool.output
                else:
                    arguments = {"file_path": tool.target, "old_string": tool.old, "new_string": tool.new}
                    output, display = f"Successfully modified file: {tool.target} (1 replacements).", tool.output
                call = {"id": call_id, "name": names[tool.kind], "args": arguments,
                        "result": [{"functionResponse": {"id": call_id, "name": names[tool.kind],
                                                         "response": {"output": output}}}],
                        "status": "error" if tool.failed and tool.kind != "shell" else "success",
                        "timestamp": _iso(moment), "resultDisplay": display, "displayName": names[tool.kind],
                        "renderOutputAsMarkdown": tool.kind != "shell"}
                records.append({"id": f"{conversation.session_id[:8]}-{number}-{step}", "timestamp": _iso(moment),
                                "type": "gemini", "content": "", "thoughts": [],
                                "tokens": {"input": 13906, "output": 185, "cached": 0, "thoughts": 0, "tool": 0,
                                           "total": 14091}, "model": "gemini-2.5-pro", "toolCalls": [call]})
                records.append({"$set": {"lastUpdated": _iso(moment)}})
            moment = conversation.moment(number, len(turn.tools) + 1)
            records.append({"id": f"{conversation.session_id[:8]}-{number}-a", "timestamp": _iso(moment),
                            "type": "gemini", "content": turn.answer, "thoughts": [],
                            "tokens": {"input": 1200, "output": 300, "cached": 0, "thoughts": 0, "tool": 0,
                                       "total": 1500}, "model": "gemini-2.5-pro"})
            records.append({"$set": {"lastUpdated": _iso(moment)}})
        name = f"session-{conversation.start.strftime('%Y-%m-%dT%H-%M')}-{conversation.session_id[:8]}.jsonl"
        _write_jsonl(chats / name, records, conversation.moment(len(conversation.turns)))


def _write_copilot(root: Path, project: str, conversations: list[_Conversation]) -> None:
    names = {"read": "view", "shell": "bash", "edit": "edit"}
    for conversation in conversations:
        folder = root / "session-state" / conversation.session_id
        events: list[dict] = []

        def event(kind: str, data: dict, moment: datetime, events: list = events,
                  conversation: _Conversation = conversation) -> None:
            events.append({"type": kind, "data": data, "id": str(uuid.UUID(int=conversation.index * 100_000
                                                                              + len(events) + 1)),
                           "timestamp": _iso(moment), "parentId": events[-1]["id"] if events else None})

        event("session.start", {"sessionId": conversation.session_id, "version": 1, "producer": "copilot-agent",
                                "copilotVersion": "1.0.34", "startTime": _iso(conversation.start),
                                "context": {"cwd": project, "gitRoot": project, "branch": "main"},
                                "alreadyInUse": False}, conversation.start)
        for number, turn in enumerate(conversation.turns):
            moment = conversation.moment(number)
            interaction = f"{conversation.index:08d}-{number:04d}"
            event("user.message", {"content": turn.request, "transformedContent": (
                f"<current_datetime>{_iso(moment)}</current_datetime>\n\n{turn.request}"), "attachments": [],
                "agentMode": "interactive", "interactionId": interaction}, moment)
            event("assistant.turn_start", {"turnId": str(number), "interactionId": interaction}, moment)
            for step, tool in enumerate(turn.tools, start=1):
                moment = conversation.moment(number, step)
                call_id = f"toolu_{conversation.index:08d}{number:04d}{step:04d}"
                if tool.kind == "edit":
                    arguments = {"path": tool.target, "old_str": tool.old, "new_str": tool.new}
                else:
                    arguments = {"path": tool.target} if tool.kind == "read" else {"command": tool.target}
                output = tool.output + (f"\n<exited with exit code {1 if tool.failed else 0}>"
                                        if tool.kind == "shell" else "")
                event("assistant.message", {"messageId": f"{call_id}-m", "content": "", "toolRequests": [
                    {"toolCallId": call_id, "name": names[tool.kind], "arguments": arguments, "type": "function"}],
                    "interactionId": interaction}, moment)
                event("tool.execution_start", {"toolCallId": call_id, "toolName": names[tool.kind],
                                               "arguments": arguments}, moment)
                complete: dict = {"toolCallId": call_id, "model": "claude-sonnet-4.6", "interactionId": interaction}
                if tool.failed and tool.kind != "shell":
                    complete.update(success=False, error={"message": tool.output[:300], "code": "failure"})
                else:
                    complete.update(success=True, result={"content": output, "detailedContent": output})
                event("tool.execution_complete", complete, moment)
            moment = conversation.moment(number, len(turn.tools) + 1)
            event("assistant.message", {"messageId": f"{interaction}-a", "content": turn.answer, "toolRequests": [],
                                        "interactionId": interaction}, moment)
            event("assistant.turn_end", {"turnId": str(number)}, moment)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "workspace.yaml").write_text(f"id: {conversation.session_id}\ncwd: {project}\n", encoding="utf-8")
        _write_jsonl(folder / "events.jsonl", events, conversation.moment(len(conversation.turns)))


def _write_opencode(root: Path, project: str, conversations: list[_Conversation]) -> None:
    fixture = (REPO_ROOT / "tests" / "fixtures" / "transcripts" / "opencode"
               / "suhd550-dev__stunning-memory__opencode.REAL-DERIVED.events-seq0-119.db")
    tables = ("project", "session", "message", "part")
    with closing(sqlite3.connect(f"file:{fixture}?mode=ro", uri=True)) as source:
        schema = [sql for (sql,) in source.execute(
            "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND tbl_name IN (?, ?, ?, ?) "
            "ORDER BY type = 'index', name", tables)]
    names = {"read": "read", "shell": "bash", "edit": "edit"}
    root.mkdir(parents=True, exist_ok=True)
    project_id = hashlib.sha1(project.encode("utf-8")).hexdigest()
    model = {"providerID": "anthropic", "modelID": "claude-sonnet-4-5"}
    with closing(sqlite3.connect(root / "opencode.db", isolation_level=None)) as db:
        db.execute("PRAGMA journal_mode=WAL")
        for sql in schema:
            db.execute(sql)
        db.execute("BEGIN")
        first = _ms(conversations[0].start)
        db.execute("INSERT INTO project (id, worktree, vcs, time_created, time_updated, sandboxes) "
                   "VALUES (?, ?, 'git', ?, ?, '[]')", (project_id, project, first, first))
        for conversation in conversations:
            session_id = f"ses_{conversation.index + 1:026d}"
            db.execute("INSERT INTO session (id, project_id, parent_id, slug, directory, title, version, time_created, "
                       "time_updated) VALUES (?, ?, NULL, ?, ?, ?, 'v1.16.0', ?, ?)",
                       (session_id, project_id, f"session-{conversation.index}", project,
                        conversation.turns[0].request[:50], _ms(conversation.start),
                        _ms(conversation.moment(len(conversation.turns)))))
            counter = [0]

            def message(data: dict, parts: list[dict], moment: datetime, counter: list = counter,
                        conversation: _Conversation = conversation, session_id: str = session_id) -> str:
                counter[0] += 1
                message_id = f"msg_{conversation.index:06d}{counter[0]:06d}{'0' * 14}"
                stamp = _ms(moment)
                db.execute("INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES "
                           "(?, ?, ?, ?, ?)", (message_id, session_id, stamp, stamp + 400, json.dumps(data)))
                for index, part in enumerate(parts):
                    db.execute("INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) "
                               "VALUES (?, ?, ?, ?, ?, ?)", (f"prt_{message_id[4:]}{index:04d}", message_id,
                                                             session_id, stamp + index, stamp + index,
                                                             json.dumps(part)))
                return message_id

            def assistant_data(parent: str, moment: datetime) -> dict:
                stamp = _ms(moment)
                return {"parentID": parent, "role": "assistant", "mode": "build", "agent": "build",
                        "path": {"cwd": project, "root": project}, "cost": 0,
                        "tokens": {"total": 1500, "input": 1200, "output": 300, "reasoning": 0,
                                   "cache": {"write": 0, "read": 0}}, "modelID": model["modelID"],
                        "providerID": model["providerID"], "time": {"created": stamp, "completed": stamp + 400},
                        "finish": "stop"}

            finish = {"type": "step-finish", "reason": "stop", "cost": 0, "tokens": {"input": 1200, "output": 300}}
            for number, turn in enumerate(conversation.turns):
                moment = conversation.moment(number)
                parent = message({"role": "user", "time": {"created": _ms(moment)}, "agent": "build",
                                  "model": model}, [{"type": "text", "text": turn.request}], moment)
                for step, tool in enumerate(turn.tools, start=1):
                    moment = conversation.moment(number, step)
                    stamp = _ms(moment)
                    if tool.kind == "edit":
                        arguments = {"filePath": tool.target, "oldString": tool.old, "newString": tool.new}
                    else:
                        arguments = {"filePath": tool.target} if tool.kind == "read" else {"command": tool.target}
                    if tool.failed and tool.kind != "shell":
                        state = {"status": "error", "input": arguments, "error": tool.output[:300],
                                 "time": {"start": stamp, "end": stamp + 200}}
                    else:
                        metadata = {"exit": 1 if tool.failed else 0, "output": tool.output[:30000]} \
                            if tool.kind == "shell" else {"preview": tool.output[:2000], "truncated": False}
                        state = {"status": "completed", "input": arguments, "output": tool.output,
                                 "metadata": metadata, "title": tool.target, "time": {"start": stamp,
                                                                                      "end": stamp + 200}}
                    message(assistant_data(parent, moment), [
                        {"type": "step-start"}, {"type": "tool", "tool": names[tool.kind],
                                                 "callID": f"call_{conversation.index:06d}{number:03d}{step:03d}",
                                                 "state": state}, finish], moment)
                moment = conversation.moment(number, len(turn.tools) + 1)
                message(assistant_data(parent, moment), [
                    {"type": "step-start"}, {"type": "text", "text": turn.answer,
                                             "time": {"start": _ms(moment), "end": _ms(moment) + 300}}, finish],
                    moment)
        db.execute("COMMIT")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def _write_cursor(root: Path, project: str, conversations: list[_Conversation]) -> None:
    folder = root / "projects" / re.sub(r"[^A-Za-z0-9]+", "-", project).strip("-") / "agent-transcripts"
    names = {"read": "Read", "shell": "Shell", "edit": "StrReplace"}
    for conversation in conversations:
        records: list[dict] = []
        for number, turn in enumerate(conversation.turns):
            moment = conversation.moment(number).astimezone(timezone.utc)
            hour = moment.hour % 12 or 12
            stamp = (f"<timestamp>{moment.strftime('%A')}, {moment.strftime('%b')} {moment.day}, {moment.year}, "
                     f"{hour}:{moment.minute:02d} {'PM' if moment.hour >= 12 else 'AM'} (UTC)</timestamp>")
            records.append({"role": "user", "message": {"content": [
                {"type": "text", "text": f"{stamp}\n<user_query>\n{turn.request}\n</user_query>"}]}})
            for step, tool in enumerate(turn.tools, start=1):
                tool_id = f"tool_{conversation.index:06d}{number:03d}{step:03d}"
                if tool.kind == "edit":
                    arguments = {"path": tool.target, "old_string": tool.old, "new_string": tool.new}
                else:
                    arguments = {"path": tool.target} if tool.kind == "read" else {"command": tool.target}
                records.append({"role": "assistant", "message": {"content": [
                    {"type": "text", "text": "Let me look at that."},
                    {"type": "tool_use", "id": tool_id, "name": names[tool.kind], "input": arguments}]}})
                result: dict = {"type": "tool_result", "tool_use_id": tool_id,
                                "content": [{"type": "text", "text": tool.output}]}
                if tool.failed:
                    result["is_error"] = True
                records.append({"role": "user", "message": {"content": [result]}})
            records.append({"role": "assistant", "message": {"content": [{"type": "text", "text": turn.answer}]}})
            records.append({"type": "turn_ended", "status": "success"})
        path = folder / conversation.session_id / f"{conversation.session_id}.jsonl"
        _write_jsonl(path, records, conversation.moment(len(conversation.turns)))


def _write_aider(root: Path, project: str, conversations: list[_Conversation]) -> None:
    """One history file in the project, one run per conversation. Aider's history holds no tool output: reads
    are files added to the chat, shell runs only their command; edits are SEARCH/REPLACE blocks in the reply."""
    lines: list[str] = []
    for conversation in conversations:
        local = conversation.start.astimezone()
        lines += ["", f"# aider chat started at {local.strftime('%Y-%m-%d %H:%M:%S')}", "",
                  "> /usr/local/bin/aider --model sonnet  ", "> Aider v0.86.0  ",
                  "> Main model: anthropic/claude-sonnet-4-5 with diff edit format  ",
                  "> Git repo: .git with 120 files  ", "> Repo-map: using 4096 tokens, auto refresh  ", ""]
        for turn in conversation.turns:
            lines += [f"#### {turn.request}  ", ""]
            notices: list[str] = []
            reply: list[str] = []
            for tool in turn.tools:
                relative = tool.target.removeprefix(project + "/")
                if tool.kind == "read":
                    notices += [f"> {relative}  ", "> Add file to the chat? (Y)es/(N)o/(D)on't ask again [Yes]: y  "]
                elif tool.kind == "shell":
                    reply += ["```bash", tool.target, "```", ""]
                    notices += [f"> {tool.target}  ",
                                "> Run shell command? (Y)es/(N)o/(D)on't ask again [Yes]: y  ",
                                f"> Running {tool.target}  ",
                                "> Add command output to the chat? (Y)es/(N)o/(D)on't ask again [Yes]: y  ",
                                f"> Added {tool.output.count(chr(10)) + 1} lines of output to the chat.  "]
                else:
                    reply += [relative, "```python", "<<<<<<< SEARCH", tool.output, "=======",
                              tool.output.replace(tool.old, tool.new, 1), ">>>>>>> REPLACE", "```", ""]
                    notices.append(f"> Applied edit to {relative}  ")
            lines += reply + [turn.answer, "",
                              "> Tokens: 12k sent, 1.2k received. Cost: $0.05 message, $0.31 session.  "]
            lines += notices + [""]
    path = Path(root) / ".aider.chat.history.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    touched = conversations[-1].moment(len(conversations[-1].turns))
    os.utime(path, (touched.timestamp(), touched.timestamp()))


_CLINE_FEEDBACK = ("The user has provided feedback on the results. Consider their input to continue the task, and "
                   "then attempt completion again.")


def _write_cline(root: Path, project: str, conversations: list[_Conversation]) -> None:
    environment = (f"<environment_details>\n# Visual Studio Code Visible Files\npackage.json\n\n"
                   f"# Current Working Directory ({project}) Files\npackage.json\nsrc/\n</environment_details>")
    names = {"read": "read_file", "shell": "execute_command", "edit": "replace_in_file"}
    for conversation in conversations:
        folder = root / "saoudrizwan.claude-dev" / "tasks" / str(_ms(conversation.start))
        folder.mkdir(parents=True, exist_ok=True)
        ui: list[dict] = []
        api: list[dict] = []

        def say(kind: str, text: str, moment: datetime, asked: bool = False, ui: list = ui) -> None:
            ui.append({"ts": _ms(moment) + len(ui), "type": "ask" if asked else "say",
                       "ask" if asked else "say": kind, "text": text})

        def request(text: str, moment: datetime, say=say, api: list = api) -> None:
            say("api_req_started", json.dumps({"request": f"{text}\n\n{environment}", "tokensIn": 2400,
                                               "tokensOut": 300, "cacheWrites": 0, "cacheReads": 0,
                                               "cost": 0.0074}), moment)
            api.append({"role": "user", "content": [{"type": "text", "text": text},
                                                    {"type": "text", "text": environment}]})

        for number, turn in enumerate(conversation.turns):
            moment = conversation.moment(number)
            if number == 0:
                say("task", turn.request, moment)
                request(f"<task>\n{turn.request}\n</task>", moment)
            else:
                say("user_feedback", turn.request, moment)
                request(f"[attempt_completion] Result:\n\n{_CLINE_FEEDBACK}\n<feedback>\n{turn.request}\n"
                        "</feedback>", moment)
            for step, tool in enumerate(turn.tools, start=1):
                moment = conversation.moment(number, step)
                say("text", "Let me look at that.", moment)
                if tool.kind == "edit":
                    arguments = {"path": tool.target, "diff": f"------- SEARCH\n{tool.old}\n=======\n{tool.new}\n"
                                                              "+++++++ REPLACE"}
                else:
                    arguments = {"path": tool.target} if tool.kind == "read" else {"command": tool.target,
                                                                                   "requires_approval": "false"}
                api.append({"role": "assistant", "content": [
                    {"type": "text", "text": "Let me look at that."},
                    {"type": "tool_use", "id": f"toolu_{conversation.index:06d}{number:03d}{step:03d}",
                     "name": names[tool.kind], "input": arguments}]})
                if tool.kind == "shell":
                    say("command", tool.target, moment, asked=True)
                    say("command_output", tool.output, moment)
                    result = (f"[execute_command for '{tool.target}'] Result:\nCommand executed.\n"
                              f"{'Exit code: 1' if tool.failed else ''}\nOutput:\n{tool.output}")
                else:
                    say("tool", json.dumps({"tool": "readFile" if tool.kind == "read" else "editedExistingFile",
                                            "path": tool.target, "content": tool.target if tool.kind == "read"
                                            else arguments["diff"]}), moment, asked=tool.kind == "edit")
                    shown = tool.output if tool.kind == "read" else (
                        f"The content was successfully saved to {tool.target}.\n\n<final_file_content path="
                        f"\"{tool.target}\">\n{tool.output}\n</final_file_content>")
                    if tool.failed:
                        shown = f"The tool execution failed with the following error:\n<error>\n{tool.output}\n</error>"
                    result = f"[{names[tool.kind]} for '{tool.target}'] Result:\n{shown}"
                request(result, moment)
            moment = conversation.moment(number, len(turn.tools) + 1)
            say("completion_result", turn.answer, moment)
            say("completion_result", "", moment, asked=True)
            api.append({"role": "assistant", "content": [
                {"type": "tool_use", "id": f"toolu_{conversation.index:06d}{number:03d}999",
                 "name": "attempt_completion", "input": {"result": turn.answer}}]})
        metadata = {"files_in_context": [], "model_usage": [{"ts": _ms(conversation.start),
                                                             "model_id": "claude-sonnet-4-5",
                                                             "model_provider_id": "anthropic", "mode": "act"}],
                    "environment_history": [{"ts": _ms(conversation.start), "os_name": "linux",
                                             "host_name": "Visual Studio Code", "cline_version": "3.51.0"}]}
        last = conversation.moment(len(conversation.turns))
        for name, data in (("api_conversation_history.json", api), ("task_metadata.json", metadata),
                           ("ui_messages.json", ui)):
            (folder / name).write_text(json.dumps(data), encoding="utf-8")
            os.utime(folder / name, (last.timestamp(), last.timestamp()))


SOURCE_WRITERS = {"claude": _write_claude, "codex": _write_codex, "gemini": _write_gemini,
                  "copilot": _write_copilot, "opencode": _write_opencode, "cursor": _write_cursor,
                  "aider": _write_aider, "cline": _write_cline}


def _tree_size(path: Path) -> tuple[int, int]:
    """(bytes, files) of every file under ``path``."""
    total = files = 0
    for directory, _folders, names in os.walk(path):
        for name in names:
            total += os.path.getsize(os.path.join(directory, name))
            files += 1
    return total, files


def generate_source_corpus(out: Path, sources: list[str], *, sessions: int, turns: int, seed: int,
                           log=print) -> dict:
    """Writes (or reuses) one root per source under ``out``: ``out/<source>`` (aider: ``out/project``, where aider
    keeps its history; it is also the project every session ran in). Returns {source: {root, bytes, files,
    write_seconds}} and the project path. A source's root is reused when ``out/<source>.json`` records the same
    parameters."""
    out.mkdir(parents=True, exist_ok=True)
    project = out / "project"
    project.mkdir(exist_ok=True)
    params = {"format": SOURCE_CORPUS_FORMAT, "sessions": sessions, "turns": turns, "seed": seed,
              "project": str(project)}
    conversations: list[_Conversation] | None = None
    roots: dict[str, dict] = {}
    for source in sources:
        root = project if source == "aider" else out / source
        marker = out / f"{source}.json"
        try:
            recorded = json.loads(marker.read_text())
        except (OSError, ValueError):
            recorded = {}
        if recorded.get("params") != params:
            if conversations is None:
                started = time.perf_counter()
                conversations = _draw_conversations(sessions, turns, seed, str(project))
                log(f"conversations drawn ({sessions} x {turns} turns, {time.perf_counter() - started:.1f} s)")
            if source == "aider":
                (root / ".aider.chat.history.md").unlink(missing_ok=True)
            elif root.exists():
                shutil.rmtree(root)
            started = time.perf_counter()
            SOURCE_WRITERS[source](root, str(project), conversations)
            written = time.perf_counter() - started
            size, files = _tree_size(root)
            recorded = {"params": params, "bytes": size, "files": files, "write_seconds": written}
            marker.write_text(json.dumps(recorded))
            log(f"{source}: wrote {size / 1e6:.1f} MB in {files} files ({written:.1f} s)")
        roots[source] = {"root": str(root), "bytes": recorded["bytes"], "files": recorded["files"]}
    return {"project": str(project), "roots": roots}


def _cpu_time() -> float:
    """CPU seconds of this process and of its reaped children (the harvest's worker processes, config
    ``harvest_workers``: a big Claude Code or Codex corpus is read by forked workers, whose CPU counts too)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def _source_worker(spec_path: str) -> int:
    """One cold harvest of one source, then the same call with the checkpoints it returned (nothing new)."""
    spec = json.loads(Path(spec_path).read_text())
    from skillopt_sleep.harvest import harvest

    prepare = getattr(importlib.import_module("skillopt_sleep.redaction.redact"), "prepare", None)
    if prepare is not None:
        prepare()
    source, project, homes = spec["source"], Path(spec["project"]), {spec["source"]: Path(spec["root"])}
    started, cpu_started = time.perf_counter(), _cpu_time()
    cold = harvest(source=source, scope="project", project=project, homes=homes, lookback_hours=0, checkpoints=None)
    seconds, cpu_seconds = time.perf_counter() - started, _cpu_time() - cpu_started
    peak = _high_water_kb()  # VmHWM: ru_maxrss would keep the parent's peak across exec
    started, cpu_started = time.perf_counter(), _cpu_time()
    quiet = harvest(source=source, scope="project", project=project, homes=homes, lookback_hours=0,
                    checkpoints=cold.checkpoints)
    quiet_seconds, quiet_cpu_seconds = time.perf_counter() - started, _cpu_time() - cpu_started
    Path(spec["result"]).write_text(json.dumps({
        "seconds": seconds, "cpu_seconds": cpu_seconds, "peak_rss_kb": peak,
        "quiet_seconds": quiet_seconds, "quiet_cpu_seconds": quiet_cpu_seconds,
        "sessions_returned": len(cold.sessions), "turns_returned": sum(len(s.turns) for s in cold.sessions),
        "tools_returned": sum(len(turn.tools) for s in cold.sessions for turn in s.turns),
        "quiet_sessions_returned": len(quiet.sessions), "checkpoints": len(cold.checkpoints),
        "stats": cold.stats.model_dump(mode="json"),
    }))
    return 0


def _source_names(text: str) -> list[str]:
    from skillopt_sleep.harvest.sources import REGISTRY

    names = list(REGISTRY) if text.strip().lower() in ("all", "") else [
        name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in REGISTRY]
    if unknown:
        raise SystemExit(f"unknown source(s) {', '.join(unknown)}; registered: {', '.join(REGISTRY)}")
    missing = [name for name in REGISTRY if name not in SOURCE_WRITERS]
    if missing:
        raise SystemExit(f"no corpus writer for registered source(s) {', '.join(missing)}: add one to SOURCE_WRITERS")
    if SOURCE_BASELINE not in names:
        names.insert(0, SOURCE_BASELINE)  # the baseline of every ratio is measured in the same run
    return [name for name in REGISTRY if name in names]


def measure_sources(args: argparse.Namespace, log=print) -> dict:
    names = _source_names(args.sources)
    out = Path(args.out or os.path.join(tempfile.gettempdir(),
                                        f"skillopt-harvest-sources-{args.source_sessions}x{args.source_turns}"
                                        f"-{args.seed}"))
    corpus = generate_source_corpus(out, names, sessions=args.source_sessions, turns=args.source_turns,
                                    seed=args.seed, log=log)
    for entry in corpus["roots"].values():  # warm the page cache: measure parsing, not the disk
        for directory, _folders, files in os.walk(entry["root"]):
            for name in files:
                with open(os.path.join(directory, name), "rb") as handle:
                    while handle.read(1 << 22):
                        pass
    report: dict = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "memory_gb": _memory_gb()},
        "background_before": background_load(),
        "corpus": {"dir": str(out), "sessions": args.source_sessions, "turns": args.source_turns, "seed": args.seed,
                   "project": corpus["project"]},
        "repeat": max(1, args.repeat), "sources": {},
    }
    with tempfile.TemporaryDirectory(prefix="skillopt-harvest-sources-") as work_dir:
        work = Path(work_dir)
        home = work / "home"
        home.mkdir()
        env = {key: value for key, value in os.environ.items()
               if key not in ("PYTHONPATH", "PYTHONHOME", "AIDER_CHAT_HISTORY_FILE")}
        env.update(HOME=str(home), PYTHONDONTWRITEBYTECODE="1")
        # Interleaved rounds (every source once, then again): a load change on a shared machine hits all sources.
        runs: dict[str, list[dict]] = {name: [] for name in names}
        for round_number in range(max(1, args.repeat)):
            for name in names:
                log(f"{name}: cold + nothing new (round {round_number + 1})")
                spec_path, result_path = work / f"{name}-{round_number}.spec.json", work / f"{name}-{round_number}.json"
                spec_path.write_text(json.dumps({"source": name, "root": corpus["roots"][name]["root"],
                                                 "project": corpus["project"], "result": str(result_path)}))
                command = [sys.executable, str(Path(__file__).resolve()), SOURCE_WORKER_FLAG, str(spec_path)]
                runs[name].append(_run_child(command, env, result_path, str(REPO_ROOT)))
    for name in names:
        merged = dict(runs[name][-1])
        for key in ("seconds", "cpu_seconds", "quiet_seconds", "quiet_cpu_seconds"):
            merged[key] = statistics.median(run[key] for run in runs[name])
        merged["seconds_all"] = [round(run["seconds"], 4) for run in runs[name]]
        merged["peak_rss_kb"] = max(run["peak_rss_kb"] for run in runs[name])
        entry = corpus["roots"][name]
        merged.update(entry)
        merged["mb_per_s"] = entry["bytes"] / 1e6 / max(merged["seconds"], 1e-9)
        merged["mb_per_cpu_s"] = entry["bytes"] / 1e6 / max(merged["cpu_seconds"], 1e-9)
        merged["sessions_per_s"] = args.source_sessions / max(merged["seconds"], 1e-9)
        report["sources"][name] = merged
    base = report["sources"][SOURCE_BASELINE]
    for run in report["sources"].values():
        run["mb_per_s_over_baseline"] = run["mb_per_s"] / base["mb_per_s"]
        run["sessions_per_s_over_baseline"] = run["sessions_per_s"] / base["sessions_per_s"]
        run["sessions_per_cpu_s_over_baseline"] = base["cpu_seconds"] / max(run["cpu_seconds"], 1e-9)
        run["quiet_over_cold"] = run["quiet_seconds"] / max(run["seconds"], 1e-9)
    report["background_after"] = background_load()
    return report


def render_sources(report: dict) -> str:
    from skillopt_sleep.harvest.sources import REGISTRY

    corpus, sessions, turns = report["corpus"], report["corpus"]["sessions"], report["corpus"]["turns"]
    lines = [
        (f"Corpus: the same {sessions} sessions x {turns} turns (seed {corpus['seed']}) written in each agent's "
         f"layout. Machine: {report['machine']['cpus']} CPUs, {report['machine']['memory_gb']} GiB, Python "
         f"{report['machine']['python']}. {report['date']}. Median of {report['repeat']} round(s), sources "
         "interleaved; times are the harvest call (cold: no checkpoints; nothing new: the same call with the "
         "checkpoints the cold call returned, same process). Ratios: to Claude Code in this run."),
        "",
        ("| source | MB on disk (files) | cold s | cold CPU s | MB/s | MB/s / Claude Code | sessions/s | "
         "sessions/s / Claude Code (wall; CPU) | nothing new s | nothing new / cold | "
         "sessions; turns; tool calls returned | peak RSS MB |"),
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, run in report["sources"].items():
        complete = "" if (run["sessions_returned"], run["turns_returned"]) == (sessions, sessions * turns) else " (!)"
        lines.append(
            f"| {REGISTRY[name].label} (`{name}`) | {run['bytes'] / 1e6:.1f} ({run['files']}) | {run['seconds']:.3f} | "
            f"{run['cpu_seconds']:.3f} | {run['mb_per_s']:.0f} | {run['mb_per_s_over_baseline']:.2f}x | "
            f"{run['sessions_per_s']:.0f} | {run['sessions_per_s_over_baseline']:.2f}x; "
            f"{run['sessions_per_cpu_s_over_baseline']:.2f}x | "
            f"{run['quiet_seconds']:.4f} | {run['quiet_over_cold']:.1%} | {run['sessions_returned']}; "
            f"{run['turns_returned']}; {run['tools_returned']}{complete} | {_mb(run['peak_rss_kb'])} |")
    before, after = report["background_before"], report["background_after"]
    lines += ["", (f"Expected per source: {sessions} sessions, {sessions * turns} turns ((!) marks a difference). "
                   f"Background: load average {before['loadavg_1m']} before, {after['loadavg_1m']} after; build "
                   f"processes running: {before['build_processes']} before, {after['build_processes']} after.")]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Real sessions, process to process (--real)
#
# The real-history corpus: the public real sessions of examples/ and tests/fixtures/transcripts/ (PROVENANCE.md
# there), replayed into more session files with the same record mix. Each real file is cut into segments: the
# records before its first request (the head: snapshots, queue operations) and then one segment per request (a
# main-chain user prompt for Claude Code, a turn_context line for Codex) with every record up to the next one, tool
# results, progress records, snapshots and inline sidechains included. A new session copies the head of one real
# file, drawn with a probability proportional to its size, then segments drawn uniformly from all real files until
# it reaches its size (drawn from a log-normal fitted to the 346 real sessions of dagster-io/erk: median 400 KB,
# mean 640 KB, 39% under 300 KB). Records are copied as bytes, so their real types, sizes, key order and escapes are
# kept; only these values are rewritten: UUIDs (a fresh one per UUID per segment copy; the file's session id becomes
# the new session's), tool-call ids (same length), ISO timestamps (the new session's clock, same length), cwd (the
# benchmark's project) and the Claude Code entrypoint (the head file's, so one headless segment does not turn a
# session headless). Schema fixtures are left out (they are not sessions), and so are duplicates (examples/ holds
# byte copies of the fixtures).

REAL_CORPUS_FORMAT = 2
REAL_CLAUDE_SESSIONS = 351
REAL_CLAUDE_MB = 224.0
REAL_CODEX_SESSIONS = 60
REAL_CODEX_MB = 30.0
REAL_MEDIAN_BYTES = 400_000
REAL_SIGMA = 0.97
_UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_ISO_TIME = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")
_TOOL_ID = re.compile(rb"\b(toolu_|call_)([A-Za-z0-9]{10,})")
_CWD_VALUE = re.compile(rb'("cwd":\s*)"(?:[^"\\]|\\.)*"')
_CWD_TAG = re.compile(rb"<cwd>[^<]*</cwd>")
_ENTRYPOINT = re.compile(rb'("entrypoint":\s*)"[^"]*"')
_ID_CHARS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


@dataclass
class _RealFile:
    name: str
    size: int
    session_id: bytes
    head: list  # [(line bytes, seconds after the segment's first record)]
    segments: list  # [[(line bytes, seconds), ...], ...]
    entrypoint: bytes | None


def _real_paths(source: str) -> list[Path]:
    """The real session files of one source (``claude`` or ``codex``), duplicates and schema fixtures left out."""
    fixtures = REPO_ROOT / "tests" / "fixtures" / "transcripts" / ("claude_code" if source == "claude" else "codex")
    home = REPO_ROOT / "examples" / ("claude-home" if source == "claude" else "codex-home")
    seen: set[str] = set()
    chosen = []
    for path in sorted(fixtures.glob("*.jsonl")) + sorted(home.rglob("*.jsonl")):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest in seen:
            continue
        seen.add(digest)
        if "SCHEMA-FIXTURE" not in path.name:
            chosen.append(path)
    return chosen


def _is_request(source: str, record: dict) -> bool:
    if source == "codex":
        return record.get("type") == "turn_context"
    if record.get("type") != "user" or record.get("isSidechain") or record.get("isMeta"):
        return False
    content = (record.get("message") or {}).get("content")
    if isinstance(content, str):
        return True
    return isinstance(content, list) and not any(
        isinstance(block, dict) and block.get("type") == "tool_result" for block in content)


def _load_real_file(source: str, path: Path) -> _RealFile:
    data = path.read_bytes()
    session_id = b""
    entrypoint = None
    head: list = []
    segments: list = []
    current = head
    first_time: datetime | None = None
    for line in data.splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        if not session_id:
            found = record.get("sessionId") or ((record.get("payload") or {}).get("id")
                                                if record.get("type") == "session_meta" else None)
            if found and _UUID.fullmatch(found.encode()):
                session_id = found.encode()
        if entrypoint is None and record.get("entrypoint"):
            entrypoint = record["entrypoint"].encode()
        if _is_request(source, record):
            current = []
            segments.append(current)
            first_time = None
        stamp = _ISO_TIME.search(line)
        moment = datetime.fromisoformat(stamp.group(0).decode().replace("Z", "+00:00")) if stamp else None
        if moment is not None and first_time is None:
            first_time = moment
        offset = (moment - first_time).total_seconds() if moment is not None and first_time is not None else 0.0
        current.append((line, min(max(offset, 0.0), 3600.0)))
    if not segments:  # no request at all (a sub-agent excerpt): the whole file is one segment
        segments, head = [head], []
    return _RealFile(path.name, len(data), session_id, head, segments, entrypoint)


def _rewrite(line: bytes, *, ids: dict, rng: random.Random, moment: datetime, cwd: bytes,
             entrypoint: bytes | None) -> bytes:
    def fresh_uuid(match: re.Match) -> bytes:
        old = match.group(0)
        if old not in ids:
            ids[old] = str(uuid.UUID(int=rng.getrandbits(128), version=4)).encode()
        return ids[old]

    def fresh_tool_id(match: re.Match) -> bytes:
        old = match.group(0)
        if old not in ids:
            ids[old] = match.group(1) + bytes(rng.choice(_ID_CHARS) for _ in range(len(match.group(2))))
        return ids[old]

    def new_time(match: re.Match) -> bytes:
        fraction = match.group(1)
        text = moment.strftime("%Y-%m-%dT%H:%M:%S")
        if fraction:
            digits = len(fraction) - 1
            text += "." + f"{moment.microsecond:06d}"[:digits].ljust(digits, "0")
        return text.encode() + b"Z"

    line = _UUID.sub(fresh_uuid, line)
    line = _TOOL_ID.sub(fresh_tool_id, line)
    line = _ISO_TIME.sub(new_time, line)
    line = _CWD_VALUE.sub(lambda match: match.group(1) + json.dumps(cwd.decode()).encode(), line)
    line = _CWD_TAG.sub(lambda _match: b"<cwd>" + cwd + b"</cwd>", line)
    if entrypoint is not None:
        line = _ENTRYPOINT.sub(lambda match: match.group(1) + b'"' + entrypoint + b'"', line)
    return line


def _record_kind(source: str, line: bytes) -> str:
    """A record's kind for the mix table: its type, with tool results, sidechains and Codex payload types apart."""
    record = json.loads(line)
    if source == "codex":
        payload = record.get("payload") if isinstance(record.get("payload"), dict) else {}
        kind = f"{record.get('type', '?')}/{payload.get('type', '')}".rstrip("/")
        return kind + (f"/{payload.get('role')}" if payload.get("type") == "message" else "")
    kind = str(record.get("type", "?"))
    content = (record.get("message") or {}).get("content") if isinstance(record.get("message"), dict) else None
    if kind == "user" and isinstance(content, list) and any(
            isinstance(block, dict) and block.get("type") == "tool_result" for block in content):
        kind = "user/tool_result"
    return kind + ("/sidechain" if record.get("isSidechain") else "")


def _mix(source: str, lines) -> dict:
    counts: dict[str, list[int]] = {}
    for line in lines:
        entry = counts.setdefault(_record_kind(source, line), [0, 0])
        entry[0] += 1
        entry[1] += len(line) + 1
    return counts


def _session_sizes(rng: random.Random, sessions: int, target_bytes: int) -> list[int]:
    """Log-normal session sizes (median REAL_MEDIAN_BYTES, sigma REAL_SIGMA), scaled to add up to the target."""
    import math

    drawn = [min(max(rng.lognormvariate(math.log(REAL_MEDIAN_BYTES), REAL_SIGMA), 6_000), 20_000_000)
             for _ in range(sessions)]
    scale = target_bytes / sum(drawn)
    return [max(2_000, int(size * scale)) for size in drawn]


def _replay_source(source: str, out: Path, project: str, *, sessions: int, target_mb: float, seed: int) -> dict:
    """Writes ``sessions`` replayed session files of one source; returns its summary (bytes, files, record mix)."""
    from benchmarks.corpus import CORPUS_DAYS, CORPUS_END

    real = [_load_real_file(source, path) for path in _real_paths(source)]
    pool = [segment for file in real for segment in file.segments]
    weights = [file.size for file in real]
    rng = random.Random(seed * 1_000_003 + (1 if source == "claude" else 2))
    cwd = project.encode()
    mix: dict[str, list[int]] = {}
    written = longest = 0
    paths = []
    for index, size in enumerate(_session_sizes(rng, sessions, int(target_mb * 1e6))):
        template = rng.choices(real, weights)[0]
        session_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        start = CORPUS_END - timedelta(days=rng.uniform(0.2, CORPUS_DAYS))
        clock = start
        chunks = [template.head] if template.head else []
        total = sum(len(line) + 1 for line, _ in template.head)
        while total < size:
            segment = rng.choice(pool)
            chunks.append(segment)
            total += sum(len(line) + 1 for line, _ in segment)
        lines = []
        for chunk in chunks:
            ids = {file.session_id: session_id.encode() for file in real if file.session_id}  # fresh ids per copy
            for line, offset in chunk:
                moment = clock + timedelta(seconds=offset)
                lines.append(_rewrite(line, ids=ids, rng=rng, moment=moment, cwd=cwd,
                                      entrypoint=(template.entrypoint or b"cli") if source == "claude" else None))
            clock = moment + timedelta(seconds=rng.uniform(20, 240))
        if source == "claude":
            path = out / "claude" / "projects" / re.sub(r"[^A-Za-z0-9]", "-", project) / f"{session_id}.jsonl"
        else:
            path = (out / "codex" / "archived_sessions"
                    / f"rollout-{start.strftime('%Y-%m-%dT%H-%M-%S')}-{session_id}.jsonl")
        path.parent.mkdir(parents=True, exist_ok=True)
        data = b"\n".join(lines) + b"\n"
        path.write_bytes(data)
        os.utime(path, (clock.timestamp(), clock.timestamp()))
        for kind, (count, size_bytes) in _mix(source, lines).items():
            entry = mix.setdefault(kind, [0, 0])
            entry[0] += count
            entry[1] += size_bytes
        written += len(data)
        longest = max(longest, max(len(line) for line in lines))
        paths.append(str(path))
    real_mix: dict[str, list[int]] = {}
    for file in real:
        for kind, (count, size_bytes) in _mix(source, [line for chunk in [file.head, *file.segments]
                                                      for line, _ in chunk]).items():
            entry = real_mix.setdefault(kind, [0, 0])
            entry[0] += count
            entry[1] += size_bytes
    return {"sessions": sessions, "bytes": written, "longest_line": longest, "files_used": [f.name for f in real],
            "real_bytes": sum(file.size for file in real), "segments": len(pool), "mix": mix, "real_mix": real_mix}


def generate_real_corpus(out: Path, *, claude_sessions: int, claude_mb: float, codex_sessions: int, codex_mb: float,
                         seed: int, log=print) -> dict:
    """Writes (or reuses, when ``out/real.json`` records the same parameters) the real-mix corpus under ``out``:
    ``claude/projects/<sanitized project>/`` and ``codex/archived_sessions/``, every session in ``out/project``."""
    params = {"format": REAL_CORPUS_FORMAT, "claude_sessions": claude_sessions, "claude_mb": claude_mb,
              "codex_sessions": codex_sessions, "codex_mb": codex_mb, "seed": seed,
              "real": {source: [hashlib.sha256(path.read_bytes()).hexdigest() for path in _real_paths(source)]
                       for source in ("claude", "codex")}}
    marker = out / "real.json"
    try:
        recorded = json.loads(marker.read_text())
    except (OSError, ValueError):
        recorded = {}
    if recorded.get("params") == params:
        return recorded
    for folder in ("claude", "codex"):
        shutil.rmtree(out / folder, ignore_errors=True)
    (out / "project").mkdir(parents=True, exist_ok=True)
    project = str((out / "project").resolve())
    started = time.perf_counter()
    recorded = {"params": params, "project": project, "claude_home": str(out / "claude"),
                "codex_home": str(out / "codex"),
                "claude": _replay_source("claude", out, project, sessions=claude_sessions, target_mb=claude_mb,
                                         seed=seed),
                "codex": _replay_source("codex", out, project, sessions=codex_sessions, target_mb=codex_mb,
                                        seed=seed)}
    recorded["write_seconds"] = time.perf_counter() - started
    marker.write_text(json.dumps(recorded))
    log(f"real-mix corpus: {recorded['claude']['bytes'] / 1e6:.0f} MB Claude Code, "
        f"{recorded['codex']['bytes'] / 1e6:.0f} MB Codex ({recorded['write_seconds']:.1f} s)")
    return recorded


PERSIST_CHECKPOINTS = r'''
import sys
from pathlib import Path
from skillopt_sleep.config import load_config
from skillopt_sleep.harvest import harvest_for_config
from skillopt_sleep.harvest.checkpoint import save_checkpoints
from skillopt_sleep.state import ProjectPaths
claude_home, codex_home, project = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
config = load_config(None, cli_overrides={"scope": "project", "source": "claude,codex", "lookback_hours": 0,
                                          "claude_home": claude_home, "codex_home": codex_home})
result = harvest_for_config(config, project=project, checkpoints=None)
save_checkpoints(ProjectPaths(project).checkpoints, result.checkpoints)
'''
"""Harvests both sources as a night does and stores the checkpoints (one file per project, every source's files in
it) where the next night, and ``harvest``, read them."""

LIBRARY_HARVEST = r'''
import sys
from pathlib import Path
from skillopt_sleep.config import load_config
from skillopt_sleep.harvest import harvest_for_config
from skillopt_sleep.harvest.checkpoint import load_checkpoints
from skillopt_sleep.state import ProjectPaths
source, home, project = sys.argv[1], sys.argv[2], Path(sys.argv[3])
config = load_config(None, cli_overrides={"scope": "project", "source": source, "lookback_hours": 0,
                                          f"{source}_home": Path(home)})
harvest_for_config(config, project=project, checkpoints=load_checkpoints(ProjectPaths(project).checkpoints))
'''
"""A night's harvest alone in a fresh process: imports, config, stored checkpoints, the harvest."""


def _cli(python: str) -> list[str]:
    """The ``skillopt-sleep`` console script next to ``python`` (as a user runs it), else ``python -m``."""
    script = Path(python).parent / "skillopt-sleep"
    return [str(script)] if script.exists() else [python, "-m", "skillopt_sleep"]


def _time_process(command: list[str], env: dict[str, str], cwd: str, *, keep_output: bool = False) -> dict:
    """One process, start to exit: wall seconds and the CPU seconds of it and its children; stdout discarded
    unless ``keep_output`` (then returned as ``output``)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    completed = subprocess.run(command, env=env, cwd=cwd, stderr=subprocess.PIPE, check=False,
                               stdout=subprocess.PIPE if keep_output else subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if completed.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:4])} ... failed (exit {completed.returncode}):\n"
                           f"{completed.stderr.decode(errors='replace')[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    timing = {"seconds": wall, "cpu_seconds": cpu}
    if keep_output:
        timing["output"] = completed.stdout
    return timing


def _best(runs: list[dict]) -> dict:
    best = min(runs, key=lambda run: run["seconds"])
    return {"seconds": best["seconds"], "cpu_seconds": min(run["cpu_seconds"] for run in runs),
            "seconds_all": [round(run["seconds"], 3) for run in runs]}


def measure_real(args: argparse.Namespace, log=print) -> dict:
    """Process to process, best of ``--repeat``: ours and the peer on the real-mix corpus and on the synthetic
    corpus (their harvest commands), and ours with nothing new (stored checkpoints) against cold."""
    tree = os.path.abspath(args.compare) if args.compare else None
    if tree and not os.path.isfile(os.path.join(tree, "skillopt_sleep", "__init__.py")):
        raise SystemExit(f"--compare {args.compare}: no skillopt_sleep/__init__.py there")
    out = Path(args.real_out or os.path.join(tempfile.gettempdir(), f"skillopt-harvest-real-{args.seed}"))
    real = generate_real_corpus(out, claude_sessions=args.real_sessions, claude_mb=args.real_mb,
                                codex_sessions=args.real_codex_sessions, codex_mb=args.real_codex_mb,
                                seed=args.seed, log=log)
    sessions = args.sessions or (QUICK_SESSIONS if args.quick else DEFAULT_SESSIONS)
    target_mb = args.target_mb or (QUICK_TARGET_MB if args.quick else DEFAULT_TARGET_MB)
    synthetic_out = args.out or os.path.join(tempfile.gettempdir(), f"skillopt-harvest-corpus-{sessions}-{target_mb:g}")
    info = generate_corpus(synthetic_out, sessions=sessions, target_mb=target_mb, seed=args.seed, log=log)
    peer_python, peer_note = ensure_peer(Path(args.peer_venv), install=not args.no_peer_install, log=log)
    if peer_python is None:
        raise SystemExit(f"--real compares with the peer: {peer_note}")
    # The peer reads Codex only from a flat archived_sessions directory: a home of links to the same rollouts.
    peer_codex_home = Path(info.root) / "peer-codex-home"
    (peer_codex_home / "archived_sessions").mkdir(parents=True, exist_ok=True)
    for path in info.main_files():
        link = peer_codex_home / "archived_sessions" / os.path.basename(path)
        if "/codex/" in path and not link.exists():
            link.symlink_to(path)
    for root in (real["claude_home"], real["codex_home"], info.claude_home, info.codex_home):
        for directory, _folders, names in os.walk(root):  # warm the page cache: measure parsing, not the disk
            for name in names:
                with open(os.path.join(directory, name), "rb") as handle:
                    while handle.read(1 << 22):
                        pass
    ours, peer = _cli(sys.executable), _cli(peer_python)
    project = real["project"]
    # (name, bytes, sessions, our arguments, the peer's arguments). The peer's harvest stops at --max-sessions
    # (default 120) sessions: set above the corpus so that both read every file.
    every = ["--max-sessions", "1000000"]
    cases = [
        ("real, Claude Code", real["claude"]["bytes"], real["claude"]["sessions"],
         ["--source", "claude", "--scope", "project", "--project", project, "--claude-home", real["claude_home"]],
         ["--source", "claude", "--scope", "invoked", "--project", project, "--claude-home", real["claude_home"],
          *every]),
        ("real, Codex", real["codex"]["bytes"], real["codex"]["sessions"],
         ["--source", "codex", "--scope", "project", "--project", project, "--codex-home", real["codex_home"]],
         ["--source", "codex", "--scope", "invoked", "--project", project, "--codex-home", real["codex_home"],
          *every]),
        ("synthetic, Claude Code", info.claude_bytes, info.claude_sessions,
         ["--source", "claude", "--scope", "all", "--claude-home", info.claude_home],
         ["--source", "claude", "--scope", "all", "--claude-home", info.claude_home, *every]),
        ("synthetic, Codex", info.codex_bytes, info.codex_sessions,
         ["--source", "codex", "--scope", "all", "--codex-home", info.codex_home],
         ["--source", "codex", "--scope", "all", "--codex-home", str(peer_codex_home), *every]),
    ]
    report: dict = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "memory_gb": _memory_gb()},
        "background_before": background_load(), "repeat": max(1, args.repeat), "peer_status": peer_note,
        "real_corpus": {key: value for key, value in real.items() if key != "params"},
        "synthetic_corpus": _corpus_summary(info), "commands": {}, "cases": {},
    }
    with tempfile.TemporaryDirectory(prefix="skillopt-harvest-real-") as work_dir:
        work = Path(work_dir)
        for name in ("home", "cold-state", "quiet-state"):
            (work / name).mkdir()
        base = {key: value for key, value in os.environ.items()
                if key not in ("PYTHONPATH", "PYTHONHOME", "CLAUDE_CONFIG_DIR", "CODEX_HOME")
                and not key.startswith("SKILLOPT_SLEEP_")}
        # Bytecode caches as an installed package has them (pip compiles at install): written once, to a cache
        # outside the trees, by the warm-up round below. Without them each process compiles every module again.
        base.pop("PYTHONDONTWRITEBYTECODE", None)
        base.update(HOME=str(work / "home"), NO_COLOR="1",
                    PYTHONPYCACHEPREFIX=os.path.join(tempfile.gettempdir(), "skillopt-harvest-pycache"))
        cold_env = dict(base, SKILLOPT_SLEEP_HOME=str(work / "cold-state"))
        quiet_env = dict(base, SKILLOPT_SLEEP_HOME=str(work / "quiet-state"))
        # The other version: the same console script, its package found first on PYTHONPATH (the processes run in
        # the work directory, so this checkout is not on sys.path).
        compare = {"cold": dict(cold_env, PYTHONPATH=tree), "quiet": dict(quiet_env, PYTHONPATH=tree)} if tree else {}
        log("storing the checkpoints of a night on the real-mix corpus")
        _time_process([sys.executable, "-c", PERSIST_CHECKPOINTS, real["claude_home"], real["codex_home"], project],
                      quiet_env, str(work))
        runs: dict[str, list[dict]] = {}
        log("warm-up round (bytecode caches; sessions each side returns), not timed")
        report["sessions_returned"] = {}
        for name, _bytes, _sessions, our_args, peer_args in cases:
            mine = _time_process([*ours, "harvest", *our_args, "--lookback-hours", "0", "--json"], cold_env,
                                 str(work), keep_output=True)["output"]
            theirs = _time_process([*peer, "harvest", *peer_args, "--lookback-hours", "0", "--json"], base,
                                   str(work), keep_output=True)["output"]
            mine, theirs = json.loads(mine), json.loads(theirs)
            report["sessions_returned"][name] = {"ours": len(mine["sessions"]), "ours_stats": mine["harvest"],
                                                 "peer": theirs["n_sessions"]}

        def run(key: str, command: list[str], env: dict[str, str]) -> None:
            report["commands"].setdefault(key, " ".join(command))
            runs.setdefault(key, []).append(_time_process(command, env, str(work)))

        for round_number in range(max(1, args.repeat)):  # interleaved: a load change hits every row alike
            log(f"round {round_number + 1}: start-up, ours and the peer on every case, nothing new")
            run("bare interpreter", [sys.executable, "-c", "pass"], base)
            run("ours --version", [*ours, "--version"], cold_env)
            for name, _bytes, _sessions, our_args, peer_args in cases:
                run(f"ours: {name}", [*ours, "harvest", *our_args, "--lookback-hours", "0", "--json"], cold_env)
                if compare:
                    run(f"compare: {name}", [*ours, "harvest", *our_args, "--lookback-hours", "0", "--json"],
                        compare["cold"])
                run(f"peer: {name}", [*peer, "harvest", *peer_args, "--lookback-hours", "0", "--json"], base)
            for source, home in (("claude", real["claude_home"]), ("codex", real["codex_home"])):
                label = "Claude Code" if source == "claude" else "Codex"
                our_args = cases[0][3] if source == "claude" else cases[1][3]
                run(f"ours, nothing new: real, {label}",
                    [*ours, "harvest", *our_args, "--lookback-hours", "0", "--json"], quiet_env)
                if compare:
                    run(f"compare, nothing new: real, {label}",
                        [*ours, "harvest", *our_args, "--lookback-hours", "0", "--json"], compare["quiet"])
                library = [sys.executable, "-c", LIBRARY_HARVEST, source, home, project]
                run(f"library, cold: real, {label}", library, cold_env)
                run(f"library, nothing new: real, {label}", library, quiet_env)
    timings = {key: _best(value) for key, value in runs.items()}
    report["timings"] = timings
    if tree:
        report["compare"] = {"tree": tree, "rows": {}}
        for key in runs:
            if key.startswith("compare"):
                mine = key.replace("compare", "ours", 1)
                before, after = runs[key], runs[mine]
                row = key.split(": ", 1)[1] + (" (nothing new)" if "nothing new" in key else "")
                report["compare"]["rows"][row] = {
                    "before_best": min(run["seconds"] for run in before),
                    "after_best": min(run["seconds"] for run in after),
                    "before_median": statistics.median(run["seconds"] for run in before),
                    "after_median": statistics.median(run["seconds"] for run in after)}
    for name, size, count, _ours, _peer in cases:
        mine, theirs = timings[f"ours: {name}"], timings[f"peer: {name}"]
        report["cases"][name] = {"bytes": size, "sessions": count, "ours": mine, "peer": theirs,
                                 "ratio": theirs["seconds"] / mine["seconds"],
                                 "cpu_ratio": theirs["cpu_seconds"] / mine["cpu_seconds"]}
    for label in ("Claude Code", "Codex"):
        cold, quiet = timings[f"ours: real, {label}"], timings[f"ours, nothing new: real, {label}"]
        library_cold, library_quiet = (timings[f"library, cold: real, {label}"],
                                       timings[f"library, nothing new: real, {label}"])
        report["cases"][f"real, {label}"].update(
            quiet=quiet, quiet_over_cold=quiet["seconds"] / cold["seconds"],
            library_cold=library_cold, library_quiet=library_quiet,
            library_quiet_over_cold=library_quiet["seconds"] / library_cold["seconds"])

    def combined(prefix: str) -> dict:
        parts = [report["cases"][f"{prefix}, {label}"] for label in ("Claude Code", "Codex")]
        mine = sum(part["ours"]["seconds"] for part in parts)
        theirs = sum(part["peer"]["seconds"] for part in parts)
        return {"ours": mine, "peer": theirs, "ratio": theirs / mine}

    report["combined"] = {"real": combined("real"), "synthetic": combined("synthetic")}
    report["background_after"] = background_load()
    return report


def render_real(report: dict) -> str:
    real, synthetic, timings = report["real_corpus"], report["synthetic_corpus"], report["timings"]
    lines = [
        (f"Real-mix corpus: {real['claude']['sessions']} Claude Code sessions, {real['claude']['bytes'] / 1e6:.0f} MB, "
         f"and {real['codex']['sessions']} Codex rollouts, {real['codex']['bytes'] / 1e6:.0f} MB, replayed from "
         f"{len(real['claude']['files_used'])} + {len(real['codex']['files_used'])} real files "
         f"({real['claude']['real_bytes'] / 1e3:.0f} KB + {real['codex']['real_bytes'] / 1e3:.0f} KB). Synthetic "
         f"corpus: {synthetic['claude_sessions']} Claude Code ({synthetic['claude_bytes'] / 1e6:.0f} MB) + "
         f"{synthetic['codex_sessions']} Codex ({synthetic['codex_bytes'] / 1e6:.0f} MB) sessions."),
        (f"Machine: {report['machine']['cpus']} CPUs, {report['machine']['memory_gb']} GiB, Python "
         f"{report['machine']['python']}. {report['date']}. Peer: {report['peer_status']}. Each time is one process, "
         f"start to exit (the `harvest` command, its output discarded), best of {report['repeat']}; rows interleaved."),
        "",
        ("| corpus | MB | session files | sessions returned, ours; peer | ours s (CPU s) | peer s (CPU s) | "
         "ours / peer, throughput (wall; CPU) | goal |"),
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    goals = {"real": 1.5, "synthetic": 3.0}
    for name, case in report["cases"].items():
        goal = goals[name.split(",")[0]]
        verdict = "met" if case["ratio"] >= goal else f"MISSED ({goal / case['ratio']:.2f}x short)"
        returned = report["sessions_returned"][name]
        lines.append(f"| {name} | {case['bytes'] / 1e6:.0f} | {case['sessions']} | {returned['ours']}; "
                     f"{returned['peer']} | {case['ours']['seconds']:.2f} "
                     f"({case['ours']['cpu_seconds']:.2f}) | {case['peer']['seconds']:.2f} "
                     f"({case['peer']['cpu_seconds']:.2f}) | {case['ratio']:.2f}x; {case['cpu_ratio']:.2f}x | "
                     f">= {goal:g}x: {verdict} |")
    for prefix, both in report["combined"].items():
        goal = goals[prefix]
        verdict = "met" if both["ratio"] >= goal else f"MISSED ({goal / both['ratio']:.2f}x short)"
        lines.append(f"| {prefix}, both sources (a night: the two added) | | | | "
                     f"{both['ours']:.2f} | {both['peer']:.2f} | {both['ratio']:.2f}x | >= {goal:g}x: {verdict} |")
    lines += ["", "| ours, real-mix corpus | cold s | nothing new s | nothing new / cold | goal |",
              "|---|---:|---:|---:|---|"]
    for label in ("Claude Code", "Codex"):
        case = report["cases"][f"real, {label}"]
        verdict = "met" if case["quiet_over_cold"] <= 0.10 else "MISSED"
        lines.append(f"| `harvest` command, {label} | {case['ours']['seconds']:.3f} | {case['quiet']['seconds']:.3f} | "
                     f"{case['quiet_over_cold']:.1%} | <= 10%: {verdict} |")
        verdict = "met" if case["library_quiet_over_cold"] <= 0.10 else "MISSED"
        lines.append(f"| a night's harvest alone (`python -c`: imports, config, checkpoints, harvest), {label} | "
                     f"{case['library_cold']['seconds']:.3f} | {case['library_quiet']['seconds']:.3f} | "
                     f"{case['library_quiet_over_cold']:.1%} | <= 10%: {verdict} |")
    if report.get("compare"):
        lines += ["", f"This tree against `--compare {report['compare']['tree']}` (the same command, interleaved):", "",
                  "| `harvest` command | compare: best / median s | this tree: best / median s | speed-up (medians) |",
                  "|---|---:|---:|---:|"]
        for name, row in report["compare"]["rows"].items():
            lines.append(f"| {name} | {row['before_best']:.3f} / {row['before_median']:.3f} | {row['after_best']:.3f} "
                         f"/ {row['after_median']:.3f} | {row['before_median'] / row['after_median']:.2f}x |")
    lines += ["", (f"Start-up: bare interpreter {timings['bare interpreter']['seconds']:.3f} s, `skillopt-sleep "
                   f"--version` {timings['ours --version']['seconds']:.3f} s.")]
    before, after = report["background_before"], report["background_after"]
    lines += ["", (f"Background: load average {before['loadavg_1m']} before, {after['loadavg_1m']} after; build "
                   f"processes running: {before['build_processes']} before, {after['build_processes']} after.")]
    lines += ["", "Record mix (share of records; share of bytes), real files vs the replayed corpus:", "",
              "| source | record | real files | replayed corpus |", "|---|---|---:|---:|"]
    for source in ("claude", "codex"):
        mix, real_mix = real[source]["mix"], real[source]["real_mix"]
        total, real_total = (sum(v[0] for v in mix.values()), sum(v[1] for v in mix.values())), (
            sum(v[0] for v in real_mix.values()), sum(v[1] for v in real_mix.values()))
        for kind in sorted(real_mix, key=lambda kind: -real_mix[kind][1]):
            have = mix.get(kind, [0, 0])
            lines.append(f"| {source} | {kind} | {real_mix[kind][0] / real_total[0]:.1%}; "
                         f"{real_mix[kind][1] / real_total[1]:.1%} | {have[0] / total[0]:.1%}; "
                         f"{have[1] / total[1]:.1%} |")
    return "\n".join(lines)



def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=None, help=f"session files (default {DEFAULT_SESSIONS})")
    parser.add_argument("--target-mb", type=float, default=None,
                        help=f"corpus size in MB (default {DEFAULT_TARGET_MB:.0f})")
    parser.add_argument("--quick", action="store_true",
                        help=f"smoke run: {QUICK_SESSIONS} sessions, ~{QUICK_TARGET_MB:.0f} MB")
    parser.add_argument("--out", default=None,
                        help="corpus directory (reused when its corpus.json matches; default under the temp dir)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=1, help="runs per measurement; the median time is kept")
    parser.add_argument("--peer-venv", default=DEFAULT_PEER_VENV, help="virtualenv holding skillopt==0.2.0")
    parser.add_argument("--no-peer", action="store_true", help="measure ours only")
    parser.add_argument("--no-peer-install", action="store_true", help="do not create the peer venv")
    parser.add_argument("--no-memory-scaling", action="store_true",
                        help="skip the cold run on a corpus one tenth the size")
    parser.add_argument("--json", dest="json_path", default=None, help="write the raw numbers here")
    parser.add_argument("--sources", default=None, metavar="LIST",
                        help="instead of the peer comparison: every registered source side by side on the same "
                             "generated conversations, 'all' or names separated by commas (Claude Code, the "
                             "baseline, is always added); --out is then the directory of their roots")
    parser.add_argument("--source-sessions", type=int, default=SOURCE_SESSIONS,
                        help=f"with --sources: sessions per source (default {SOURCE_SESSIONS})")
    parser.add_argument("--source-turns", type=int, default=SOURCE_TURNS,
                        help=f"with --sources: turns per session (default {SOURCE_TURNS})")
    parser.add_argument("--real", action="store_true",
                        help="instead: process to process (the harvest command), best of --repeat, ours and the peer "
                             "on the real-mix corpus and on the synthetic one (--quick: the small one), and ours with "
                             "nothing new against cold")
    parser.add_argument("--real-out", default=None, help="with --real: the real-mix corpus directory (reused)")
    parser.add_argument("--compare", default=None, metavar="TREE",
                        help="with --real: also time the harvest command of the skillopt_sleep package in TREE "
                             "(e.g. git archive REV skillopt_sleep | tar -x -C TREE), interleaved, and print the "
                             "speed-ups")
    parser.add_argument("--real-sessions", type=int, default=REAL_CLAUDE_SESSIONS,
                        help=f"with --real: Claude Code sessions (default {REAL_CLAUDE_SESSIONS})")
    parser.add_argument("--real-mb", type=float, default=REAL_CLAUDE_MB,
                        help=f"with --real: Claude Code MB (default {REAL_CLAUDE_MB:g})")
    parser.add_argument("--real-codex-sessions", type=int, default=REAL_CODEX_SESSIONS,
                        help=f"with --real: Codex rollouts (default {REAL_CODEX_SESSIONS})")
    parser.add_argument("--real-codex-mb", type=float, default=REAL_CODEX_MB,
                        help=f"with --real: Codex MB (default {REAL_CODEX_MB:g})")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == [WORKER_FLAG]:
        return _ours_worker(argv[1])
    if argv[:1] == [SOURCE_WORKER_FLAG]:
        return _source_worker(argv[1])
    args = parse_args(argv)
    if args.real:
        report = measure_real(args, log=lambda message: print(message, file=sys.stderr, flush=True))
        print(render_real(report))
        if args.json_path:
            Path(args.json_path).write_text(json.dumps(report, indent=2, default=str))
        return 0
    if args.sources is not None:
        report = measure_sources(args, log=lambda message: print(message, file=sys.stderr, flush=True))
        print(render_sources(report))
        if args.json_path:
            Path(args.json_path).write_text(json.dumps(report, indent=2, default=str))
        return 0
    report = measure(args, log=lambda message: print(message, file=sys.stderr, flush=True))
    print(render(report))
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(report, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
