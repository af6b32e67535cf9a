"""Simulated-team benchmark: does a team learn its house rules once, through its own git, without leaking anyone's
sessions or personal rules?

N members (default 12) on one machine, each with their own HOME, state dir and Claude Code home under one temp
dir, each a persona world of real-format sessions (``benchmarks/team_world.py``: three team rules every member
states, staggered over nights; one rule that contradicts between two sub-teams; one or two personal rules each;
noise; a planted fake secret in member 0's sessions). One bare git repository on disk is the team's remote; each
member works in a clone of it (the team store in-repo: ``.skillopt-sleep/team/rules/``). Each of K nights (default 5):

1. every member's new sessions of the day are written and their night runs (``night.run_night``, ``apply=True``,
   at the settings a user gets), which gates the team rules present in their work tree on their own val tasks;
2. every member publishes (``team.publish.plan_publish`` + ``publish(push=True)``: what ``team publish --push``
   calls), a branch per member and day pushed to the remote;
3. a reviewer merges every pushed branch into ``main`` (the team's pull-request review; a merge conflict fails the
   run) and every member pulls ``main`` (``git pull --ff-only``); the next night reads the rules from the work tree.

The same members also learn **alone** in the same run: the same worlds, clones that never publish or pull.

Goals (the exit status is 1 when one fails): no personal rule of a member ever reaches another member's memory;
no member's memory ever holds the other sub-team's variant of the contradicting rule; every publish, push, merge
and pull succeeds; every file of every branch of the remote parses as a rule file and holds no sentence (6+ words)
of any member's requests and no secret (the planted one, or anything ``provenance.secret_reason`` calls one); the
same for every commit message. Reported (markdown, ``--json FILE``): team rules held per member per night (team /
alone), the nights a team saved, the contradicting rule per sub-team, LLM calls per member-night (team vs alone),
what reached the remote.

Default backend: ``mock``, a deterministic SIMULATOR (no model: it measures the mechanics, not a model's
learning). ``--base-url URL`` runs every night on an OpenAI-compatible server instead (``openai`` backend, one
worker, no call budget, as ``benchmarks/learning.py``); keep it small there (``--members 3 --nights 2``).

Usage (from the repository root):
    python benchmarks/team.py --json /tmp/team.json                  # 12 members, 5 nights, mock simulator
    python benchmarks/team.py --members 3 --nights 2 --base-url http://127.0.0.1:18432/v1 --model qwen2.5-coder
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # run as a script: make `skillopt_sleep` and `benchmarks` importable
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks import team_world  # noqa: E402

#: Words a sentence of a request needs to count as request text on the remote.
MIN_SENTENCE_WORDS = 6
BRANCH_PREFIX = "skillopt-sleep/"


# --------------------------------------------------------------------------- git and the environment


def git(cwd: Path, *args: str) -> str:
    """``git -C cwd args...``; stdout stripped. Raises RuntimeError with git's stderr when it fails."""
    done = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} in {cwd}: {(done.stderr or done.stdout).strip()}")
    return done.stdout.strip()


@contextlib.contextmanager
def environment(**values: str) -> Iterator[None]:
    """Set environment variables for the block and restore them after."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class Member:
    """One member on one side (``team`` or ``alone``): their folders, clone and config."""

    def __init__(self, root: Path, side: str, index: int, remote: Path, settings: dict[str, Any]) -> None:
        from skillopt_sleep.config import SleepConfig

        self.index, self.side = index, side
        self.id = f"member-{index:02d}"
        self.dir = root / side / self.id
        self.home, self.state, self.claude = self.dir / "home", self.dir / "state", self.dir / "claude"
        self.project = self.dir / "work" / team_world.PROJECT
        self.project.parent.mkdir(parents=True)
        self.home.mkdir()
        git(self.project.parent, "clone", "--quiet", str(remote), str(self.project))
        git(self.project, "config", "user.email", f"{self.id}@example.test")
        git(self.project, "config", "user.name", f"Member {index:02d}")
        (self.project / "CLAUDE.md").write_text(team_world.INITIAL_MEMORY, encoding="utf-8")
        self.config = SleepConfig(**settings, source="claude", scope="project", claude_home=self.claude,
                                  lookback_hours=0, team_member_id=self.id)

    @contextlib.contextmanager
    def env(self) -> Iterator[None]:
        """The member's own HOME and config/state dirs while their commands run."""
        with environment(HOME=str(self.home), SKILLOPT_SLEEP_HOME=str(self.dir / "skillopt"),
                         XDG_CONFIG_HOME=str(self.home / ".config"), XDG_STATE_HOME=str(self.home / ".local/state"),
                         XDG_DATA_HOME=str(self.home / ".local/share")):
            yield

    def documents(self) -> str:
        """The managed blocks of every document the member's agent obeys (skill and memory files)."""
        from skillopt_sleep.documents.block import managed_block
        from skillopt_sleep.review.rule_ledger import managed_files

        return "\n".join(managed_block(path.read_text("utf-8")) for _kind, path in managed_files(self.project))


def _seed_remote(root: Path) -> Path:
    """A bare repository with a ``main`` branch holding a README (the team's project)."""
    remote = root / "remote" / f"{team_world.PROJECT}.git"
    remote.parent.mkdir(parents=True)
    git(root, "init", "--quiet", "--bare", "-b", "main", str(remote))
    seed = root / "seed"
    git(root, "clone", "--quiet", str(remote), str(seed))
    (seed / "README.md").write_text(f"# {team_world.PROJECT}\n", encoding="utf-8")
    git(seed, "add", "README.md")
    git(seed, "-c", "user.email=seed@example.test", "-c", "user.name=Seed", "commit", "--quiet", "-m", "start")
    git(seed, "push", "--quiet", "origin", "main")
    return remote


# --------------------------------------------------------------------------- one night


def _held(blocks: str) -> list[tuple[set[tuple[str, str]], bool]]:
    """(keys, is a team line) of every rule line of the managed blocks."""
    from skillopt_sleep.documents.block import team_rule_of
    from skillopt_sleep.mine.rulebook import document_rules

    return [(keys, team_rule_of(line) is not None) for line, keys in document_rules(blocks)]


def _holds(held: list[tuple[set[tuple[str, str]], bool]], rule: team_world.Rule) -> str | None:
    """``"team"`` when a team line demands ``rule``'s literal, ``"own"`` for the member's own line, else None."""
    sources = [team for keys, team in held if ("has", rule.use) in keys]
    if not sources:
        return None
    return "own" if not all(sources) else "team"


def _run_night(member: Member, night: int) -> dict[str, Any]:
    """Write the member's sessions of ``night``, run the night, and read what their memory holds after it."""
    from skillopt_sleep.night import run_night

    team_world.write_night_sessions(member.claude, member.project, member.index, night)
    started = time.monotonic()
    with member.env():
        result = run_night(member.config, project=member.project, apply=True, state_root=member.state,
                           now=team_world.night_run_time(night))
    diagnostics = result.diagnostics
    held = _held(member.documents())
    team = diagnostics.team or {}
    return {"status": diagnostics.status, "calls": sum(cost.calls for cost in diagnostics.cost.values()),
            "tokens": sum(c.prompt_tokens + c.completion_tokens for c in diagnostics.cost.values()),
            "seconds": round(time.monotonic() - started, 2),
            "team_rules": {rule.name: _holds(held, rule) for rule in team_world.TEAM_RULES},
            "subteam": {name: _holds(held, rule) for name, rule in team_world.SUBTEAM_RULES.items()},
            "personal": {rule.name: _holds(held, rule) for rule in team_world.PERSONAL_RULES},
            "gated": {name: [entry["id"] for entry in team.get(name, [])]
                      for name in ("accepted", "rejected", "pending", "overridden")},
            "errors": diagnostics.errors[:3]}


def _publish(member: Member, night: int) -> dict[str, Any]:
    """What ``team publish --push`` does, on the night's own date (one branch per member and day)."""
    from skillopt_sleep.errors import TeamError
    from skillopt_sleep.team.publish import plan_publish, publish

    today = team_world.night_day(night).date()
    try:
        with member.env():
            plan = plan_publish(member.project, member.config, today=today, state_root=member.state)
            result = publish(plan, push=True)
    except TeamError as exc:
        return {"error": exc.message, "files": [], "blocked": []}
    return {"branch": plan.branch if result.commit else None, "error": None,
            "files": [{"rule_id": f.rule_id, "role": f.role, "text": f.text, **f.record.model_dump()}
                      for f in plan.files],
            "blocked": [{"rule_id": b.rule_id, "text": b.text, "reason": b.reason} for b in plan.blocked]}


def _review_and_pull(reviewer: Path, members: list[Member], merged: set[str]) -> dict[str, Any]:
    """The reviewer merges every pushed team branch not merged yet into ``main`` and pushes; members pull."""
    git(reviewer, "fetch", "--quiet", "--prune", "origin")
    branches = [name for name in git(reviewer, "for-each-ref", "--format=%(refname:short)",
                                     f"refs/remotes/origin/{BRANCH_PREFIX}").splitlines() if name]
    report: dict[str, Any] = {"merged": [], "conflicts": [], "pull_errors": []}
    for branch in sorted(set(branches) - merged):
        try:
            git(reviewer, "merge", "--quiet", "--no-edit", branch)
            report["merged"].append(branch)
        except RuntimeError as exc:
            git(reviewer, "merge", "--abort")
            report["conflicts"].append(f"{branch}: {exc}")
        merged.add(branch)
    git(reviewer, "push", "--quiet", "origin", "main")
    for member in members:
        try:
            git(member.project, "pull", "--quiet", "--ff-only", "origin", "main")
        except RuntimeError as exc:
            report["pull_errors"].append(f"{member.id}: {exc}")
    return report


# --------------------------------------------------------------------------- the remote


def _normal(text: str) -> str:
    return " ".join(text.casefold().split())


def request_sentences(requests: list[str]) -> set[str]:
    """The sentences of ``requests`` with at least ``MIN_SENTENCE_WORDS`` words, normalised (case, spacing)."""
    out = set()
    for request in requests:
        for sentence in re.split(r"[.!?\n]+", request):
            if len(sentence.split()) >= MIN_SENTENCE_WORDS:
                out.add(_normal(sentence))
    return out


def _blobs(repository: Path, shas: list[str]) -> list[str]:
    """The texts of blobs ``shas`` in order, read by one ``git cat-file --batch``."""
    done = subprocess.run(["git", "-C", str(repository), "cat-file", "--batch"], capture_output=True, check=True,
                          input="".join(f"{sha}\n" for sha in shas).encode())
    out, data, at = [], done.stdout, 0
    for _sha in shas:
        header_end = data.index(b"\n", at)
        size = int(data[at:header_end].split()[2])
        out.append(data[header_end + 1:header_end + 1 + size].decode("utf-8", "replace"))
        at = header_end + 1 + size + 1
    return out


def scan_remote(remote: Path, *, sentences: set[str], secrets: list[str], root: Path) -> dict[str, Any]:
    """Every file of every branch of the bare ``remote`` and every commit message: rule files that parse, with no
    request sentence, no secret (``secrets`` verbatim, or ``provenance.secret_reason``), no local path."""
    from skillopt_sleep.errors import TeamError
    from skillopt_sleep.mine.provenance import secret_reason
    from skillopt_sleep.team.store import RULES_DIR, parse_rule_file

    branches = git(remote, "for-each-ref", "--format=%(refname:short)", "refs/heads/").splitlines()
    where_of: dict[str, str] = {}  # blob -> the first "<branch>:<path>" holding it
    for branch in branches:
        for line in git(remote, "ls-tree", "-r", branch).splitlines():
            meta, path = line.split("\t", 1)
            where_of.setdefault(meta.split()[2], f"{branch}:{path}")
    texts = {where: text for where, text in zip(where_of.values(), _blobs(remote, list(where_of)))}
    log = git(remote, "log", "--all", "--format=%H%x00%B%x00")
    for commit, message in zip(*[iter(part.strip() for part in log.split("\x00"))] * 2):
        texts[f"commit {commit[:12]}"] = message
    problems: list[str] = []
    rule_files, rule_ids = 0, set()
    for where, text in texts.items():
        normal = _normal(text)
        problems += [f"{where}: holds request text {s!r}" for s in sentences if s in normal]
        problems += [f"{where}: holds a planted secret" for s in secrets if s in text]
        reason = secret_reason(text)
        if reason:
            problems.append(f"{where}: {reason}")
        if str(root) in text:
            problems.append(f"{where}: holds a local path")
        path = where.split(":", 1)[1] if not where.startswith("commit ") else ""
        if path.startswith(str(RULES_DIR) + "/"):
            try:
                rule_ids.add(parse_rule_file(text, where=where).id)
                rule_files += 1
            except TeamError as exc:
                problems.append(exc.message)
    return {"branches": len(branches), "blobs": len(where_of),
            "rule_files": rule_files, "rules": len(rule_ids), "commits": sum(1 for w in texts
                                                                             if w.startswith("commit ")),
            "bytes": sum(len(t.encode()) for t in texts.values()), "problems": problems}


# --------------------------------------------------------------------------- the run


def backend_settings(base_url: str | None, model: str) -> dict[str, Any]:
    """The night's backend: the mock simulator, or an OpenAI-compatible server at ``base_url`` (one worker, no
    budget, as ``learning.py``)."""
    if base_url is None:
        return {"backend": "mock", "workers": 1}
    return {"backend": "openai", "base_url": base_url, "api_key": "local", "target_model": model,
            "optimizer_model": model, "workers": 1, "request_timeout_s": 600, "max_calls_per_night": 0,
            "max_tokens_per_night": 0, "max_minutes_per_night": 0}


def run_team(root: Path, *, members: int = 12, nights: int = 5, base_url: str | None = None,
             model: str = "local", log=None, checkpoint=None) -> dict[str, Any]:
    """Run the benchmark under ``root`` (an empty folder) and return the result (``render`` shows it; ``goals``
    says what failed). log: ``callable(str)`` told each member-night; checkpoint: ``callable(dict)`` given the rows
    so far after each night (to save a long run's partial result). Raises ValueError for sizes the world does not
    have (nights 1 to 5, members 2 to 12)."""
    if not 1 <= nights <= team_world.MAX_NIGHTS:
        raise ValueError(f"--nights: 1 to {team_world.MAX_NIGHTS}")
    if members < 2:
        raise ValueError("--members: at least 2 (one per sub-team)")
    team_world.personal_rules(members - 1)  # ValueError beyond the pool of personal rules
    say = log or (lambda text: None)
    settings = backend_settings(base_url, model)
    started = time.monotonic()
    with environment(GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1", GIT_TERMINAL_PROMPT="0",
                     GIT_CEILING_DIRECTORIES=str(root)):
        remote = _seed_remote(root)
        reviewer = root / "reviewer"
        git(root, "clone", "--quiet", str(remote), str(reviewer))
        git(reviewer, "config", "user.email", "reviewer@example.test")
        git(reviewer, "config", "user.name", "Reviewer")
        sides = {side: [Member(root, side, index, remote, settings) for index in range(members)]
                 for side in ("team", "alone")}
        rows: list[dict[str, Any]] = []
        reviews: list[dict[str, Any]] = []
        merged: set[str] = set()
        phases = dict.fromkeys(("setup", "nights", "publish", "review_and_pull", "scan"), 0.0)
        phases["setup"] = time.monotonic() - started
        for night in range(1, nights + 1):
            for side, group in sides.items():
                for member in group:
                    row = {"night": night, "side": side, "member": member.id, "index": member.index,
                           "subteam": team_world.subteam(member.index), **_run_night(member, night)}
                    phases["nights"] += row["seconds"]
                    if side == "team":
                        clock = time.monotonic()
                        row["publish"] = _publish(member, night)
                        phases["publish"] += time.monotonic() - clock
                    rows.append(row)
                    say(f"night {night} {side} {member.id}: {row['status']}, {row['calls']} calls, "
                        f"{row['seconds']:.1f}s")
            clock = time.monotonic()
            reviews.append({"night": night, **_review_and_pull(reviewer, sides["team"], merged)})
            phases["review_and_pull"] += time.monotonic() - clock
            if checkpoint is not None:
                checkpoint({"partial": True, "members": members, "nights": night, "rows": rows, "reviews": reviews})
        clock = time.monotonic()
        requests = [r for index in range(members) for r in team_world.requests_of(index, nights)]
        remote_scan = scan_remote(remote, sentences=request_sentences(requests), secrets=[team_world.SECRET],
                                  root=root)
        phases["scan"] = time.monotonic() - clock
    result = {"backend": settings["backend"], "simulator": base_url is None, "base_url": base_url,
              "model": model if base_url else None, "members": members, "nights": nights,
              "rows": rows, "reviews": reviews, "remote": remote_scan,
              "seconds": round(time.monotonic() - started, 1),
              "phase_seconds": {name: round(value, 1) for name, value in phases.items()}}
    result["summary"] = summarize(result)
    result["goals"] = goals(result)
    return result


# --------------------------------------------------------------------------- report


def _rule_named(text: str) -> str | None:
    """The name of the world's rule whose literal a rule's text demands (``rulebook.line_keys``), or None."""
    from skillopt_sleep.mine.rulebook import line_keys

    keys = line_keys(text)
    rules = [*team_world.TEAM_RULES, *team_world.SUBTEAM_RULES.values(), *team_world.PERSONAL_RULES]
    return next((rule.name for rule in rules if ("has", rule.use) in keys), None)


def summarize(result: dict[str, Any]) -> dict[str, Any]:
    """The report's numbers from the rows: team rules held per member per night (team / alone), nights saved,
    personal rules wrongly held by others, the contradicting rule per sub-team, calls per member-night."""
    rows, members, nights = result["rows"], result["members"], result["nights"]
    by = {(row["side"], row["index"], row["night"]): row for row in rows}
    held = {side: [[sum(1 for v in by[(side, m, n)]["team_rules"].values() if v) for n in range(1, nights + 1)]
                   for m in range(members)] for side in ("team", "alone")}
    via_team = [[sum(1 for v in by[("team", m, n)]["team_rules"].values() if v == "team")
                 for n in range(1, nights + 1)] for m in range(members)]
    saved = 0  # member x rule: nights earlier the team side held it than the alone side (never held: night K+1)
    for m in range(members):
        for rule in team_world.TEAM_RULES:
            first = {side: next((n for n in range(1, nights + 1) if by[(side, m, n)]["team_rules"][rule.name]),
                                nights + 1) for side in ("team", "alone")}
            saved += first["alone"] - first["team"]
    own_personal = {m: {rule.name for rule in team_world.personal_rules(m)} for m in range(members)}
    leaks = [{"member": by[("team", m, n)]["member"], "night": n, "rule": name}
             for m in range(members) for n in range(1, nights + 1)
             for name, source in by[("team", m, n)]["personal"].items() if source and name not in own_personal[m]]
    named = {f["rule_id"]: _rule_named(f["text"]) for row in rows if row["side"] == "team"
             for f in row["publish"]["files"]}
    personal_names = {rule.name for rule in team_world.PERSONAL_RULES}
    published_personal = sorted({name for name in named.values() if name in personal_names})
    subteams: dict[str, Any] = {}
    for name, rule in team_world.SUBTEAM_RULES.items():
        other = next(n for n in team_world.SUBTEAM_RULES if n != name)
        group = [m for m in range(members) if team_world.subteam(m) == name]
        last = [by[("team", m, nights)] for m in group]
        subteams[name] = {"rule": f"{rule.use}, never {rule.never}", "members": len(group),
                          "hold_own": sum(1 for row in last if row["subteam"][name]),
                          "hold_other": sum(1 for m in group for n in range(1, nights + 1)
                                            if by[("team", m, n)]["subteam"][other]),
                          "other_overridden": sum(1 for m in group
                                                  if any(named.get(rule_id) == team_world.SUBTEAM_RULES[other].name
                                                         for n in range(1, nights + 1)
                                                         for rule_id in by[("team", m, n)]["gated"]["overridden"]))}
    calls = {side: [[by[(side, m, n)]["calls"] for n in range(1, nights + 1)] for m in range(members)]
             for side in ("team", "alone")}
    total = {side: sum(map(sum, calls[side])) for side in calls}
    gated = {name: sum(len(row["gated"][name]) for row in rows if row["side"] == "team")
             for name in ("accepted", "rejected", "pending", "overridden")}
    return {"held": held, "via_team": via_team, "nights_saved": saved,
            "held_final": {side: sum(row[-1] for row in held[side]) for side in held},
            "held_member_nights": {side: sum(map(sum, held[side])) for side in held},
            "leaks": leaks, "published_personal": published_personal, "subteams": subteams, "calls": calls,
            "calls_total": total, "calls_per_member_night": {side: round(total[side] / (members * nights), 1)
                                                             for side in total},
            "team_verdicts": gated,
            "published_files": sum(len(row["publish"]["files"]) for row in rows if row["side"] == "team"),
            "blocked": sum(len(row["publish"]["blocked"]) for row in rows if row["side"] == "team")}


def goals(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each goal: ``{"ok": bool, "detail": str}``."""
    summary, rows = result["summary"], result["rows"]
    publish_errors = [f"{row['member']} night {row['night']}: {row['publish']['error']}" for row in rows
                      if row["side"] == "team" and row["publish"]["error"]]
    git_errors = [e for review in result["reviews"] for e in [*review["conflicts"], *review["pull_errors"]]]
    night_errors = [f"{row['side']} {row['member']} night {row['night']}: {row['status']}" for row in rows
                    if row["status"] not in ("accepted", "rejected")]
    other = sum(team["hold_other"] for team in summary["subteams"].values())
    return {
        "no_personal_leak": {"ok": not summary["leaks"], "detail": f"{len(summary['leaks'])} member-night(s) "
                                                                   "with another member's personal rule"},
        "subteams_keep_their_variant": {"ok": other == 0, "detail": f"{other} member-night(s) holding the other "
                                                                    "sub-team's variant"},
        "remote_clean": {"ok": not result["remote"]["problems"],
                         "detail": "; ".join(result["remote"]["problems"][:5]) or "no request text, no secret"},
        "git_ok": {"ok": not publish_errors and not git_errors,
                   "detail": "; ".join([*publish_errors, *git_errors][:5]) or "every publish, merge and pull"},
        "nights_ok": {"ok": not night_errors, "detail": "; ".join(night_errors[:5]) or "every night ran"},
    }


def render(result: dict[str, Any]) -> str:
    """The markdown report."""
    summary, members, nights = result["summary"], result["members"], result["nights"]
    backend = ("mock — a deterministic SIMULATOR, not a model: it measures the mechanics of sharing, not a "
               "model's learning" if result["simulator"] else f"openai-compatible server {result['base_url']} "
                                                              f"(model {result['model']})")
    out = [f"# Simulated team: {members} members, {nights} nights", "", f"Backend: {backend}.",
           f"Wall time: {result['seconds']:.0f} s ("
           + ", ".join(f"{name} {value:.0f} s" for name, value in result["phase_seconds"].items()) + ").", "",
           "## Team rules held after each night (of 3; team side / alone; `+k`: k of them came as team lines)", "",
           "| member | sub-team | " + " | ".join(f"night {n}" for n in range(1, nights + 1)) + " |",
           "|---|---|" + "---:|" * nights]
    for m in range(members):
        cells = []
        for n in range(nights):
            team, alone, via = summary["held"]["team"][m][n], summary["held"]["alone"][m][n], summary["via_team"][m][n]
            cells.append(f"{team}{f' (+{via})' if via else ''} / {alone}")
        out.append(f"| member-{m:02d} | {team_world.subteam(m)} | " + " | ".join(cells) + " |")
    out += ["", f"Team rules held at the end: team {summary['held_final']['team']} / alone "
                f"{summary['held_final']['alone']} (of {3 * members}); member-nights holding a team rule: team "
                f"{summary['held_member_nights']['team']} / alone {summary['held_member_nights']['alone']}; nights "
                f"saved by the team (member x rule, sum): {summary['nights_saved']}.",
            f"Team rules gated on members' own val tasks: {summary['team_verdicts']}.", "",
            "## The contradicting rule per sub-team (at the last night)", "",
            "| sub-team | rule | members | hold their own | member-nights holding the other's | members who "
            "overrode the other's |", "|---|---|---:|---:|---:|---:|"]
    for name, team in summary["subteams"].items():
        out.append(f"| {name} | {team['rule']} | {team['members']} | {team['hold_own']} | {team['hold_other']} | "
                   f"{team['other_overridden']} |")
    calls = summary["calls_per_member_night"]
    out += ["", "## LLM calls per member-night", "",
            "| side | " + " | ".join(f"night {n}" for n in range(1, nights + 1)) + " | total | per member-night |",
            "|---|" + "---:|" * (nights + 2)]
    for side in ("team", "alone"):
        per_night = [sum(summary["calls"][side][m][n] for m in range(members)) for n in range(nights)]
        out.append(f"| {side} | " + " | ".join(str(c) for c in per_night)
                   + f" | {summary['calls_total'][side]} | {calls[side]} |")
    per_member = [f"member-{m:02d} {sum(summary['calls']['team'][m])} / {sum(summary['calls']['alone'][m])}"
                  for m in range(members)]
    out += ["", "Calls per member, all nights (team / alone): " + "; ".join(per_member) + "."]
    remote = result["remote"]
    out += ["", "## What reached the rules repository", "",
            f"{remote['branches']} branches, {remote['blobs']} distinct files ({remote['rule_files']} rule files, "
            f"{remote['rules']} distinct rules), {remote['commits']} commits, {remote['bytes']} bytes, all scanned; "
            f"{summary['published_files']} files published, {summary['blocked']} blocked by the screen. Personal "
            f"rules published to the team: {len(summary['published_personal'])} "
            f"({', '.join(summary['published_personal']) or '-'}).",
            "", "## Goals", ""]
    out += [f"- {'PASS' if goal['ok'] else 'FAIL'} {name}: {goal['detail']}" for name, goal in result["goals"].items()]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", type=int, default=12)
    parser.add_argument("--nights", type=int, default=5)
    parser.add_argument("--base-url", default=None, help="an OpenAI-compatible server (default: the mock simulator)")
    parser.add_argument("--model", default="local", help="the model name the server serves (with --base-url)")
    parser.add_argument("--json", type=Path, default=None, help="write the full result here")
    parser.add_argument("--keep", type=Path, default=None, help="run under this empty folder and keep it")
    args = parser.parse_args(argv)

    def log(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    with contextlib.ExitStack() as stack:
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=False)
            root = args.keep.resolve()
        else:
            root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="skillopt-team-"))).resolve()
        def save(partial: dict[str, Any]) -> None:
            if args.json:
                args.json.write_text(json.dumps(partial, indent=1, default=str), encoding="utf-8")

        try:
            result = run_team(root, members=args.members, nights=args.nights, base_url=args.base_url,
                              model=args.model, log=log, checkpoint=save)
        except ValueError as exc:
            raise SystemExit(str(exc)) from None
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, default=str), encoding="utf-8")
    print(render(result))
    return 0 if all(goal["ok"] for goal in result["goals"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
