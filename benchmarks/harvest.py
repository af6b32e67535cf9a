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

Prints a markdown table; ``--json FILE`` writes the raw numbers.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from datetime import datetime, timezone
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
    setup_started, setup_cpu_started = time.perf_counter(), time.process_time()
    prepare = getattr(importlib.import_module("skillopt_sleep.redact"), "prepare", None)
    if prepare is not None:
        prepare()
    setup_seconds, setup_cpu_seconds = time.perf_counter() - setup_started, time.process_time() - setup_cpu_started
    baseline = _high_water_kb()
    started, cpu_started = time.perf_counter(), time.process_time()
    result = harvest(source=spec["source"], scope="all", claude_home=spec["claude_home"],
                     codex_home=spec["codex_home"], lookback_hours=0, checkpoints=checkpoints)
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
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
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == [WORKER_FLAG]:
        return _ours_worker(argv[1])
    args = parse_args(argv)
    report = measure(args, log=lambda message: print(message, file=sys.stderr, flush=True))
    print(render(report))
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(report, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
