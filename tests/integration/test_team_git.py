"""Team rules through real git, end to end: a bare repository on disk is the team's remote; three members clone it,
each with their own state dir. A and B learn the same rule in real nights (mock simulator) and publish it on
branches they push; both branches merge into main without conflict (one file per rule and member); C pulls and sees
the rule with both members' held-out records; C's own (losing) record flows back. Nothing in the shared files holds a
request, a local path or the members' git identities. Hermetic: temp dirs, no global or system git config, no
network."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from transcripts import PNPM_CONVERSATIONS, write_claude_sessions
from typer.testing import CliRunner

from skillopt_sleep.cli.app import app
from skillopt_sleep.config import SleepConfig
from skillopt_sleep.night import run_night
from skillopt_sleep.paths import ProjectPaths, config_file
from skillopt_sleep.team.local import record_result
from skillopt_sleep.team.store import RULES_DIR, load_rule_files

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def sh(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


def seeded_remote(tmp_path: Path, monkeypatch) -> Path:
    """A bare repository on disk (the team's remote) whose ``main`` holds one commit; no user or system git config
    is read."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    remote = tmp_path / "remote.git"
    sh(tmp_path, "init", "--quiet", "--bare", "-b", "main", str(remote))
    seed = member_clone(remote, tmp_path / "seed" / "shop-web", "seed")
    (seed / "README.md").write_text("# shop-web\n", encoding="utf-8")
    sh(seed, "add", "README.md")
    sh(seed, "commit", "--quiet", "-m", "start")
    sh(seed, "push", "--quiet", "origin", "main")
    return remote


def member_clone(remote: Path, clone: Path, name: str) -> Path:
    """A member's clone of ``remote`` at ``clone``, with the member's own git identity."""
    clone.parent.mkdir(parents=True, exist_ok=True)
    sh(clone.parent, "clone", "--quiet", str(remote), str(clone))
    sh(clone, "config", "user.email", f"{name}@example.test")
    sh(clone, "config", "user.name", f"Member {name.upper()}")
    return clone


@pytest.fixture
def team(tmp_path, monkeypatch):
    """(remote, {name: clone}) with a seeded main branch and each clone's own identity."""
    remote = seeded_remote(tmp_path, monkeypatch)
    clones = {name: member_clone(remote, tmp_path / "members" / name / "shop-web", name)
              for name in ("a", "b", "c", "reviewer")}
    return remote, clones


def as_member(monkeypatch, tmp_path: Path, name: str) -> Path:
    state = tmp_path / "state" / name
    monkeypatch.setenv("SKILLOPT_SLEEP_STATE_DIR", str(state))
    return state


def cli(project: Path, *args: str) -> str:
    result = CliRunner().invoke(app, ["team", *args, "--project", str(project)], terminal_width=200)
    assert result.exit_code == 0, result.output
    return result.output


def learn(project: Path, state: Path, tmp_path: Path, name: str) -> None:
    claude = tmp_path / "claude" / name
    write_claude_sessions(claude, project, PNPM_CONVERSATIONS, fixed_answer="Sorry, I will use pnpm.")
    config = SleepConfig(backend="mock", lookback_hours=0, claude_home=claude, gate_rule="strict", gate_samples=1,
                         auto_adopt=True, rule_wording="user")
    diagnostics = run_night(config, project=project, state_root=state).diagnostics
    assert diagnostics.status == "accepted"


def shared_texts(clone: Path) -> list[str]:
    return [path.read_text("utf-8") for path in sorted((clone / RULES_DIR).glob("*/*.toml"))]


def test_three_members_share_a_rule_through_a_bare_repository(team, tmp_path, monkeypatch):
    remote, clones = team
    a, b, c = clones["a"], clones["b"], clones["c"]

    # A learns the rule in a night and publishes it: dry run first, then a branch, pushed; A's checkout untouched
    state_a = as_member(monkeypatch, tmp_path, "a")
    learn(a, state_a, tmp_path, "a")
    head_before = sh(a, "rev-parse", "HEAD")
    dry = cli(a, "publish", "--dry-run")
    assert "would commit on branch skillopt-sleep/team-" in dry and "[record]" in dry
    assert not sh(a, "branch", "--list", "skillopt-sleep/*")
    published = json.loads(cli(a, "publish", "--push", "--json"))
    plan = published["plan"]
    [planned] = plan["files"]
    assert planned["role"] == "proposed" and planned["record"]["wins"] >= 1
    assert plan["message"].startswith("team rules: add 1 (") and f"on {plan['member']}'s work" in plan["message"]
    assert planned["content"] in dry  # the dry run printed exactly what was committed
    branch_a = plan["branch"]
    assert sh(a, "rev-parse", "HEAD") == head_before and sh(a, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert not (a / RULES_DIR).exists()  # committed beside the work tree, not into it
    assert sh(remote, "rev-parse", f"refs/heads/{branch_a}") == published["commit"]
    assert sh(a, "log", "-1", "--format=%s", branch_a) == plan["message"].splitlines()[0]

    # B learns the same rule (same content-addressed id) and publishes before seeing A's branch
    state_b = as_member(monkeypatch, tmp_path, "b")
    learn(b, state_b, tmp_path, "b")
    published_b = json.loads(cli(b, "publish", "--push", "--json"))
    [planned_b] = published_b["plan"]["files"]
    assert planned_b["rule_id"] == planned["rule_id"] and planned_b["path"] != planned["path"]
    assert published_b["plan"]["member"] != plan["member"]

    # review: both branches merge into main without a conflict
    reviewer = clones["reviewer"]
    sh(reviewer, "fetch", "--quiet", "origin")
    sh(reviewer, "merge", "--quiet", "--no-edit", f"origin/{branch_a}")
    sh(reviewer, "merge", "--quiet", "--no-edit", f"origin/{published_b['plan']['branch']}")
    sh(reviewer, "push", "--quiet", "origin", "main")

    # C pulls: one rule, proposed by A and B on one day (the proposer: the lower id), helped both; not gated here yet
    state_c = as_member(monkeypatch, tmp_path, "c")
    sh(c, "pull", "--quiet", "origin", "main")
    [rule] = json.loads(cli(c, "status", "--json"))["shared"]
    proposers = sorted([plan["member"], published_b["plan"]["member"]])
    assert rule["id"] == planned["rule_id"] and rule["proposer"] == proposers[0]
    assert rule["helped"] == proposers and rule["local"] is None

    # C's nights re-proved it and lost: that record flows back as C's own file, and status lists C as hurt
    paths_c = ProjectPaths(c.resolve(), state_c)
    record_result(paths_c, rule["id"], status="rejected", night_id="2025-06-02T010000Z", losses=2, ties=1,
                  reason="lost 2 of C's val tasks")
    published_c = json.loads(cli(c, "publish", "--json"))
    [planned_c] = published_c["plan"]["files"]
    assert planned_c["role"] == "tested" and planned_c["record"] == {"wins": 0, "losses": 2, "ties": 1}
    sh(c, "merge", "--quiet", "--no-edit", published_c["plan"]["branch"])
    status_c = json.loads(cli(c, "status", "--json"))
    [rule] = status_c["shared"]
    assert rule["hurt"] == [published_c["plan"]["member"]] and rule["local"]["status"] == "rejected"
    assert status_c["hurting"] == []  # helped two members, hurt one
    assert "hurt more members" not in cli(c, "status")

    # what reached the repository: parseable rule files, no request, no local path, no git identity
    files = shared_texts(c)
    assert len(files) == 3 and len(load_rule_files(c / RULES_DIR)) == 3
    for text in files:
        for request, _answer, _correction in PNPM_CONVERSATIONS:
            assert request not in text
        assert str(tmp_path) not in text and "example.test" not in text and "Member" not in text

    # C's record changes again the same day: a second publish gets a branch of its own (the first one exists)
    record_result(paths_c, rule["id"], status="rejected", night_id="2025-06-02T020000Z", losses=1,
                  reason="lost 1 more of C's val tasks")
    again = json.loads(cli(c, "publish", "--json"))
    assert again["plan"]["branch"] == published_c["plan"]["branch"] + "-2" and again["commit"]
    [planned_again] = again["plan"]["files"]
    assert planned_again["record"]["losses"] == 3
    # a branch deleted here but still on the remote is not reused either (its push would be refused)
    sh(b, "branch", "-D", published_b["plan"]["branch"])
    sh(b, "fetch", "--quiet", "origin")
    as_member(monkeypatch, tmp_path, "b")
    assert json.loads(cli(b, "publish", "--dry-run", "--json"))["plan"]["branch"] != published_b["plan"]["branch"]


def test_a_rules_repository_is_cloned_under_the_state_dir_and_published_to(team, tmp_path, monkeypatch):
    remote, clones = team
    a = clones["a"]
    state_a = as_member(monkeypatch, tmp_path, "a")
    learn(a, state_a, tmp_path, "a")
    rules_remote = tmp_path / "house-rules.git"
    sh(tmp_path, "init", "--quiet", "--bare", "-b", "main", str(rules_remote))
    init = json.loads(cli(a, "init", "--repo", str(rules_remote), "--json"))
    clone = Path(init["location"]["repository"])
    assert init["location"]["mode"] == "rules_repo" and clone.is_relative_to(state_a)
    assert SleepConfig.model_validate(tomllib.loads(config_file().read_text("utf-8"))).team_repo == str(rules_remote)
    sh(clone, "config", "user.email", "a@example.test")
    sh(clone, "config", "user.name", "Member A")
    published = json.loads(cli(a, "publish", "--push", "--json"))
    [planned] = published["plan"]["files"]
    assert sh(rules_remote, "cat-file", "-p", f"{published['plan']['branch']}:{planned['path']}") == (
        planned["content"].rstrip("\n"))
    assert 'repository = "shop-web"' in planned["content"]
    assert not sh(a, "branch", "--list", "skillopt-sleep/*")  # nothing in the project's own repository
