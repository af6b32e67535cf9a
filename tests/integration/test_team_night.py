"""Every night pulls: team rules from the team's git are gated on each member's own val tasks, in real nights (mock
simulator) over a bare repository on disk (``test_team_git``'s fixture: clones with their own identities, each
member with their own state dir; hermetic, no network).

A learns the pnpm rule and publishes it; B pulls, and B's next night gates it on B's val tasks (requests B corrected
the same way, but only in held-out tasks, so B's night never states the rule itself), accepts it and writes it into
the Team rules part of the managed block; B's ``forget`` sticks across nights. On C's work the same rule loses (C's
held-out requests want npm) and is rejected and recorded; a rule naming a command nobody on C's machine typed is
allowed (its reviewed team file is its provenance) while one carrying a secret is blocked; and a local rule D stated
overrides a contradicting team rule.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import test_team_git
from test_team_git import as_member, cli, learn, sh
from transcripts import PNPM_CONVERSATIONS, write_claude_sessions

from skillopt_sleep.config import SleepConfig
from skillopt_sleep.documents.block import TEAM_HEADING, managed_block, team_rule_of
from skillopt_sleep.mine.provenance import SECRET as SECRET_REASON
from skillopt_sleep.mine.split import assign_split, task_id_for
from skillopt_sleep.models import Check
from skillopt_sleep.night import run_night
from skillopt_sleep.paths import ProjectPaths
from skillopt_sleep.review.rule_ledger import forget_rule, list_rules
from skillopt_sleep.team.local import load_local
from skillopt_sleep.team.store import Record, RuleFile, Scope, team_rule_id, write_rule_file

team = test_team_git.team  # the fixture: a bare repository and the members' clones
BLACK_CORRECTION = "no, we format with black in this repo, never autopep8"
SECRET = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"


def split_of(request: str) -> str:
    config = SleepConfig()
    return assign_split(task_id_for(request), config.val_fraction, config.test_fraction)


def black_conversations(count: int = 4) -> list[tuple[str, str, str]]:
    """``count`` train requests corrected with B's own rule (black, not autopep8)."""
    names = ["api", "cli", "models", "views", "utils", "tests", "billing", "search", "auth", "admin", "jobs"]
    requests = [f"format the {name} module of this repo" for name in names]
    train = [request for request in requests if split_of(request) == "train"][:count]
    assert len(train) == count
    return [(request, f"Run `autopep8 {request.split()[2]}`.", BLACK_CORRECTION) for request in train]


def held_out_pnpm() -> list[tuple[str, str, str]]:
    """The pnpm requests whose tasks are val tasks: corrected, never a train task, so the night does not state
    their rule."""
    return [conversation for conversation in PNPM_CONVERSATIONS if split_of(conversation[0]) == "val"]


def held_out_yarn() -> list[tuple[str, str, str]]:
    """Val requests that ask for yarn, answered with pnpm and corrected "we use yarn, never pnpm": the unguided
    answer (which repeats the request) passes them, one that follows a pnpm rule fails them."""
    requests = [f"{request} with yarn" for request, _answer, _ in PNPM_CONVERSATIONS]
    return [(request, "Run `pnpm install`.", "no, we use yarn in this repo, never pnpm") for request in requests
            if split_of(request) == "val"]


def night(project: Path, state: Path, tmp_path: Path, name: str, conversations, hours_ago: float = 3.0):
    claude = tmp_path / "claude" / name
    write_claude_sessions(claude, project, conversations, hours_ago=hours_ago, fixed_answer="Sorry, fixed.")
    config = SleepConfig(backend="mock", lookback_hours=0, claude_home=claude, gate_rule="strict", gate_samples=1,
                         auto_adopt=True, rule_wording="user")
    return run_night(config, project=project, state_root=state).diagnostics


def memory(project: Path) -> str:
    path = project / "CLAUDE.md"
    return path.read_text("utf-8") if path.exists() else ""


def publish_a(team_fixture, tmp_path, monkeypatch) -> str:
    """A learns the pnpm rule, publishes it on a pushed branch, and a reviewer merges it into main; its id."""
    remote, clones = team_fixture
    state_a = as_member(monkeypatch, tmp_path, "a")
    learn(clones["a"], state_a, tmp_path, "a")
    published = json.loads(cli(clones["a"], "publish", "--push", "--json"))
    reviewer = clones["reviewer"]
    sh(reviewer, "fetch", "--quiet", "origin")
    sh(reviewer, "merge", "--quiet", "--no-edit", f"origin/{published['plan']['branch']}")
    sh(reviewer, "push", "--quiet", "origin", "main")
    return published["plan"]["files"][0]["rule_id"]


def team_file(repository: Path, text: str, checks: list[Check], member: str = "m-team0001") -> str:
    """Write a reviewed team rule file into ``repository``'s work tree (as a merged pull request leaves it)."""
    checks = [check.model_copy(update={"origin": "team"}) for check in checks]
    rule_id = team_rule_id(checks)
    day = dt.date(2025, 6, 1)
    write_rule_file(repository, RuleFile(id=rule_id, text=text, rationale="won 3 held-out tasks", member=member,
                                         first=day, updated=day, scope=Scope(repository="shop-web"),
                                         record=Record(wins=3), checks=checks))
    return rule_id


def test_a_published_rule_is_re_proved_on_b_s_own_tasks_written_as_a_team_rule_and_forget_sticks(
        team, tmp_path, monkeypatch):
    _remote, clones = team
    rule_id = publish_a(team, tmp_path, monkeypatch)
    b = clones["b"]
    state_b = as_member(monkeypatch, tmp_path, "b")
    sh(b, "pull", "--quiet", "origin", "main")
    preview = cli(b, "pull")
    assert f"next night gates {rule_id}" in preview and "travel with the project's own 'git pull'" in preview

    diagnostics = night(b, state_b, tmp_path, "b", [*black_conversations(), *held_out_pnpm()])
    assert diagnostics.status == "accepted", diagnostics.summary
    report = diagnostics.team
    assert report["proposed"] == [rule_id] and report["read"] == 1
    [accepted] = report["accepted"]
    assert accepted["id"] == rule_id and accepted["wins"] >= 1 and accepted["losses"] == 0
    [edit] = [e for e in diagnostics.edits if team_rule_of(e.content or "") == rule_id]
    assert edit.status == "applied" and edit.rationale.startswith(f"team rule {rule_id}, proven by 1 member")
    block = managed_block((b / "CLAUDE.md").read_text("utf-8")).splitlines()
    # the team part is last in the block, attributed; B's own rule stands above it
    at = block.index(TEAM_HEADING)
    assert [team_rule_of(line) for line in block[at + 1:]] == [rule_id]
    assert any("black" in line for line in block[:at])
    paths_b = ProjectPaths(b.resolve(), state_b)
    local = load_local(paths_b).rules[rule_id]
    assert local.status == "accepted" and local.record.wins == accepted["wins"]
    status = json.loads(cli(b, "status", "--json"))
    assert status["shared"][0]["local"]["status"] == "accepted"
    [entry] = [r for r in list_rules(b, paths_b) if r.id == rule_id]
    assert entry.origin == "team" and entry.status == "adopted" and "<!--" not in entry.text

    # B's record flows back: publish writes B's "tested" file for the rule
    published = json.loads(cli(b, "publish", "--json"))
    assert any(f["rule_id"] == rule_id and f["role"] == "tested" and f["record"]["wins"] >= 1
               for f in published["plan"]["files"])

    # B forgets it: the line goes, team.json says forgotten, and the next night does not bring it back
    forget_rule(b, paths_b, rule_id)
    assert load_local(paths_b).rules[rule_id].status == "forgotten"
    assert rule_id not in (b / "CLAUDE.md").read_text("utf-8")
    later = night(b, state_b, tmp_path, "b2", [*black_conversations(), *held_out_pnpm()], hours_ago=1.0)
    assert later.team["proposed"] == [] and {"id": rule_id, "reason": "forgotten here"} in later.team["skipped"]
    assert rule_id not in (b / "CLAUDE.md").read_text("utf-8")


def test_a_rule_that_loses_on_c_s_tasks_is_rejected_a_reviewed_command_passes_and_a_secret_is_blocked(
        team, tmp_path, monkeypatch):
    _remote, clones = team
    c = clones["c"]
    state_c = as_member(monkeypatch, tmp_path, "c")
    pnpm = team_file(c, "Use pnpm in this repo, never npm.",
                     [Check(op="contains", value="pnpm"), Check(op="not_contains", value="npm install")])
    command = team_file(c, "Run `make lint-all` in this repo before you commit.",
                        [Check(op="contains", value="make lint-all")])
    secret = team_file(c, f"Log in to this repo's registry with {SECRET}.",
                       [Check(op="contains", value="registry login")])
    # C's held-out requests want yarn, never pnpm: the team's pnpm rule hurts C
    diagnostics = night(c, state_c, tmp_path, "c", [*black_conversations(), *held_out_yarn()])
    report = diagnostics.team
    assert sorted(report["proposed"]) == sorted([pnpm, command, secret])
    edits = {team_rule_of(e.content or ""): e for e in diagnostics.edits if team_rule_of(e.content or "")}
    # the secret never reaches a candidate; the command nobody typed here is not refused for its provenance
    assert edits[secret].status == "rejected" and edits[secret].reason.startswith(SECRET_REASON)
    assert SECRET not in memory(c) and SECRET not in diagnostics.model_dump_json()
    assert edits[command].status == "applied", edits[command].reason  # in the candidate C's gate tested
    local = load_local(ProjectPaths(c.resolve(), state_c)).rules
    assert local[pnpm].status == "rejected" and local[pnpm].record.losses >= 1 and local[pnpm].record.wins == 0
    assert local[secret].status == "rejected" and SECRET not in json.dumps(report)
    assert pnpm not in memory(c)
    rejected = {entry["id"] for entry in report["rejected"]}
    assert {pnpm, secret} <= rejected
    # the command rule rode in the rejected candidate, but no val task of C's tests it: it waits, it is not rejected
    assert local[command].status == "pending" and command not in rejected
    assert local[command].reason.startswith("no val task of yours tests it yet")
    assert command in {entry["id"] for entry in report["pending"]}
    # shown in the rules ledger with their status here
    waiting = {r.id: r for r in list_rules(c, ProjectPaths(c.resolve(), state_c)) if r.origin == "team"}
    assert waiting[pnpm].status == "rejected" and waiting[pnpm].losses >= 1


def test_a_local_rule_overrides_a_contradicting_team_rule_and_contradicting_team_rules_keep_the_newer(
        team, tmp_path, monkeypatch):
    _remote, clones = team
    d = clones["c"]
    state_d = as_member(monkeypatch, tmp_path, "d")
    pnpm = team_file(d, "Use pnpm in this repo, never npm.", [Check(op="contains", value="pnpm")])
    yarn_old = team_file(d, "Use yarn in this repo, never bun.",
                         [Check(op="contains", value="yarn"), Check(op="not_contains", value="bun")])
    checks = [Check(op="contains", value="bun", origin="team")]
    bun_new = team_rule_id(checks)
    write_rule_file(d, RuleFile(id=bun_new, text="Use bun in this repo.", rationale="won 2 held-out tasks",
                                member="m-team0002", first=dt.date(2025, 7, 1), updated=dt.date(2025, 7, 1),
                                scope=Scope(repository="shop-web"), record=Record(wins=2), checks=checks))
    # D stated npm, never pnpm, in its own (train) sessions
    own = [(request, "Run `pnpm install`.", "no, we use npm in this repo, never pnpm")
           for request, _answer, _ in PNPM_CONVERSATIONS if split_of(request) == "train"]
    diagnostics = night(d, state_d, tmp_path, "d", own)
    report = diagnostics.team
    assert [entry["id"] for entry in report["overridden"]] == [pnpm]
    assert load_local(ProjectPaths(d.resolve(), state_d)).rules[pnpm].status == "overridden"
    [contradiction] = report["contradictions"]
    assert contradiction["kept"] == bun_new and set(contradiction["ids"]) == {yarn_old, bun_new}
    assert yarn_old not in report["proposed"] and bun_new in report["proposed"]
    assert pnpm not in memory(d)

