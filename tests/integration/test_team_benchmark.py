"""The simulated-team benchmark (``benchmarks/team.py``) at a tiny size: three members, two nights, the mock
simulator, a bare repository on disk, real git. Its goals hold, its report has its fields, the team side learns a
team rule before a member states it (what the alone side cannot), and the scan of the remote is not vacuous: a file
carrying a request's sentence and the planted secret, pushed to the remote, is caught. Hermetic: temp dirs, no
global or system git config (the benchmark sets its own), no network."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from benchmarks import team as bench
from benchmarks import team_world


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """(result JSON, report text, exit status, run folder) of ``team.py --members 3 --nights 2``."""
    root = tmp_path_factory.mktemp("team-bench")
    with pytest.MonkeyPatch.context() as patch:  # hermetic for the module's run too
        patch.setenv("HOME", str(root / "home"))
        patch.setenv("SKILLOPT_SLEEP_HOME", str(root / "skillopt-home"))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            status = bench.main(["--members", "3", "--nights", "2", "--json", str(root / "team.json"),
                                 "--keep", str(root / "run")])
    return json.loads((root / "team.json").read_text("utf-8")), out.getvalue(), status, root / "run"


def test_the_goals_hold_and_the_run_exits_zero(run):
    result, report, status, _root = run
    assert status == 0, report
    assert set(result["goals"]) == {"no_personal_leak", "subteams_keep_their_variant", "remote_clean", "git_ok",
                                    "nights_ok"}
    assert all(goal["ok"] for goal in result["goals"].values()), result["goals"]
    assert "FAIL" not in report and report.count("PASS") == 5


def test_the_report_has_its_fields_and_says_the_backend_is_a_simulator(run):
    result, report, _status, _root = run
    summary = result["summary"]
    assert result["simulator"] is True and result["backend"] == "mock" and "SIMULATOR" in report
    assert len(result["rows"]) == 3 * 2 * 2  # members x nights x (team, alone)
    for side in ("team", "alone"):
        assert len(summary["held"][side]) == 3 and all(len(row) == 2 for row in summary["held"][side])
        assert len(summary["calls"][side]) == 3 and all(c > 0 for row in summary["calls"][side] for c in row)
        assert summary["calls_per_member_night"][side] > 0
    assert set(summary["subteams"]) == {"A", "B"} and summary["leaks"] == []
    assert result["remote"]["rule_files"] > 0 and result["remote"]["problems"] == []
    for heading in ("## Team rules held after each night", "## The contradicting rule per sub-team",
                    "## LLM calls per member-night", "## What reached the rules repository", "## Goals"):
        assert heading in report


def test_the_team_brings_a_rule_before_the_member_states_it_and_personal_rules_stay_home(run):
    result, _report, _status, _root = run
    summary = result["summary"]
    # member-02 states pnpm and pathlib first on night 3; member-00 stated both on night 1 and published them
    assert team_world.first_stated(2, 0) == 3 and team_world.first_stated(0, 0) == 1
    assert summary["held"]["team"][2][1] > summary["held"]["alone"][2][1] and summary["via_team"][2][1] >= 1
    assert summary["nights_saved"] > 0
    # personal rules were shared (re-proved by the others on their own tasks), yet none reached another's memory
    assert summary["published_personal"] and summary["leaks"] == []
    assert all(team["hold_own"] == team["members"] and team["hold_other"] == 0
               for team in summary["subteams"].values())


def test_the_remote_scan_catches_a_request_sentence_and_the_secret(run):
    _result, _report, _status, root = run
    remote = root / "remote" / f"{team_world.PROJECT}.git"
    clone = root / "intruder"
    env = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
    with bench.environment(**env):
        bench.git(root, "clone", "--quiet", str(remote), str(clone))
        request = next(r for r in team_world.requests_of(0, 1) if len(r.split()) >= bench.MIN_SENTENCE_WORDS)
        (clone / "notes.md").write_text(f"Seen today: {request.upper()}.\nkey {team_world.SECRET}\n", "utf-8")
        bench.git(clone, "add", "notes.md")
        bench.git(clone, "-c", "user.email=x@example.test", "-c", "user.name=X", "commit", "--quiet", "-m", "notes")
        bench.git(clone, "push", "--quiet", "origin", "HEAD:refs/heads/leak")
        sentences = bench.request_sentences(team_world.requests_of(0, 2))
        scan = bench.scan_remote(remote, sentences=sentences, secrets=[team_world.SECRET], root=root)
    problems = " ".join(scan["problems"])
    assert "leak:notes.md: holds request text" in problems and "leak:notes.md: holds a planted secret" in problems
