"""``team init / publish / pull / status`` end to end: three members and a bare repository, everything through the
real CLI (``skillopt-sleep team ...`` and ``skillopt-sleep run-now``, typer's CliRunner) and the real ``git``.

Each member has their own HOME, config file (``backend = "mock"``, their ``team_member_id``) and state dir, and their
own clone of the bare repository. Night 1: member one learns "pnpm, never npm" and member two "black, never autopep8"
from their own (real-format, Claude Code) sessions; both publish their rule with ``--push``, and member three reviews
and merges the two branches. Night 2: every member pulls; ``team pull`` says what the night will gate; each night
gates the team rules on that member's own val tasks: member two's held-out requests want pnpm (accepted), member
three's want pnpm but also autopep8: black loses there, gate repair (``gate_samples = 2``) drops it and the rest of
three's candidate is accepted (the night that once crashed when the support test re-gated a repaired candidate).
``team status`` shows what is shared and what is accepted, rejected or not gated yet on this member's work; the
members' held-out records flow back through ``team publish --push``, and after the review every member's ``team
status`` shows on how many members' tasks each rule helped or hurt. Hermetic: temp dirs, no global or system git
config, no network.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from test_team_git import member_clone, seeded_remote, sh
from test_team_night import split_of
from transcripts import PNPM_CONVERSATIONS, write_claude_sessions
from typer.testing import CliRunner

from skillopt_sleep.cli.app import app
from skillopt_sleep.documents.block import TEAM_HEADING, managed_block, team_rule_of
from skillopt_sleep.team.store import RULES_DIR

MEMBERS = ("one", "two", "three")
BLACK_CORRECTION = "no, we format with black in this repo, never autopep8"
AUTOPEP8_CORRECTION = "no, we format with autopep8 in this repo, never black"
#: Format requests of member two's sessions and the file each answer ran autopep8 on (distinct requests: distinct
#: tasks; "this repo" and "format" words are what the mock simulator matches a rule with).
FORMAT_REQUESTS = [
    ("format the api module of this repo", "api"), ("fix the indentation of views.py in this repo", "views.py"),
    ("clean up the code style of the billing package in this repo", "billing"),
    ("make the tests folder of this repo pass the style check", "tests"),
    ("tidy the long lines in the search service of this repo", "search"),
    ("reformat the settings file of this repo before the release", "settings.py"),
    ("normalize the quotes in the auth helpers of this repo", "auth"),
    ("prepare the jobs scheduler code of this repo for review", "jobs"),
    ("fix the trailing whitespace in the cli entry point of this repo", "cli.py"),
    ("restyle the admin views of this repo after the merge", "admin"),
    ("format the new export script of this repo", "export.py"),
    ("clean the formatting of the mail templates code in this repo", "mail"),
]


def black_conversations() -> list[tuple[str, str, str]]:
    """Format requests answered with autopep8 and corrected "black, never autopep8": train ones teach the rule,
    val ones are its held-out evidence."""
    return [(request, f"Run `autopep8 {target}`.", BLACK_CORRECTION) for request, target in FORMAT_REQUESTS]


def autopep8_val() -> list[tuple[str, str, str]]:
    """Val requests that ask for autopep8, answered with black and corrected "autopep8, never black": the unguided
    answer (which repeats the request) passes them, one that follows a black rule fails them."""
    requests = [(f"{request} with autopep8", target) for request, target in FORMAT_REQUESTS]
    return [(request, f"Run `black {target}`.", AUTOPEP8_CORRECTION) for request, target in requests
            if split_of(request) == "val"][:2]


def approved_train() -> list[tuple[str, str, str]]:
    """Train requests whose answers the user approved: member three's own work, teaching no rule (a night with no
    train task would move a val task to train)."""
    requests = [f"write the changelog entry for the {name} fix" for name in
                ("search", "billing", "login", "upload", "export", "cache", "queue", "mail")]
    return [(request, "Added the entry under Unreleased.", "thanks, perfect") for request in requests
            if split_of(request) == "train"]


def row(table: str, rule_id: str) -> str:
    """The cells of ``team status``'s row for ``rule_id``, joined by single spaces."""
    [line] = [line for line in table.splitlines() if rule_id in line]
    return " ".join(cell.strip() for cell in line.strip("│┃ ").split("│"))


def pnpm_val() -> list[tuple[str, str, str]]:
    """The pnpm requests whose tasks are val tasks (never a train task: the night does not state the rule)."""
    return [conversation for conversation in PNPM_CONVERSATIONS if split_of(conversation[0]) == "val"]


class Member:
    """One member's machine: HOME, config file, state dir (under ``SKILLOPT_SLEEP_HOME``) and clone."""

    def __init__(self, root: Path, name: str, clone: Path, monkeypatch):
        self.name, self.clone, self.root, self._monkeypatch = name, clone, root, monkeypatch
        self.home = root / "home"
        self.home.mkdir(parents=True)
        config = root / "skillopt-home" / "config" / "config.toml"
        config.parent.mkdir(parents=True)
        config.write_text(f'team_member_id = "member-{name}"\nbackend = "mock"\nlookback_hours = 0\n'
                          'gate_rule = "strict"\ngate_samples = 2\nauto_adopt = true\nrule_wording = "user"\n',
                          encoding="utf-8")
        self.nights = 0

    def __enter__(self) -> Member:
        for name, value in (("HOME", self.home), ("SKILLOPT_SLEEP_HOME", self.root / "skillopt-home"),
                            ("XDG_CONFIG_HOME", self.home / ".config"), ("XDG_STATE_HOME", self.home / ".state")):
            self._monkeypatch.setenv(name, str(value))
        return self

    def __exit__(self, *_exc) -> None:
        return None  # the next member's ``with`` switches the environment again

    def cli(self, *args: str) -> str:
        result = CliRunner().invoke(app, [*args, "--project", str(self.clone)], terminal_width=240)
        if result.exception and not isinstance(result.exception, SystemExit):
            raise result.exception
        assert result.exit_code == 0, result.output
        return result.output

    def team(self, *args: str) -> str:
        return self.cli("team", *args)

    def night(self, conversations: list[tuple[str, str, str]], *, hours_ago: float) -> dict:
        """One night (``run-now --json``) over these sessions, written as Claude Code transcripts."""
        self.nights += 1
        claude = self.root / f"claude-{self.nights}"
        write_claude_sessions(claude, self.clone, conversations, hours_ago=hours_ago, fixed_answer="Sorry, fixed.")
        return json.loads(self.cli("run-now", "--json", "--quiet", "--claude-home", str(claude)))

    def memory(self) -> str:
        path = self.clone / "CLAUDE.md"
        return path.read_text("utf-8") if path.exists() else ""

    def team_lines(self) -> list[str]:
        block = managed_block(self.memory()).splitlines()
        return [team_rule_of(line) or line for line in block[block.index(TEAM_HEADING) + 1:]] if (
            TEAM_HEADING in block) else []


@pytest.fixture
def team(tmp_path, monkeypatch):
    """(remote, {name: Member}): a bare repository seeded with one commit, and three members' clones."""
    remote = seeded_remote(tmp_path, monkeypatch)
    members = {name: Member(tmp_path / name / "machine", name,
                            member_clone(remote, tmp_path / name / "shop-web", name), monkeypatch)
               for name in MEMBERS}
    return remote, members


def test_three_members_init_publish_pull_and_status_through_a_bare_repository(team, tmp_path):
    remote, members = team
    one, two, three = members["one"], members["two"], members["three"]

    for member in members.values():
        with member:
            init = json.loads(member.team("init", "--json"))
            assert init["member"] == f"member-{member.name}" and init["location"]["mode"] == "project"
            assert Path(init["location"]["repository"]) == member.clone.resolve()
            assert "no team rule" in member.team("status")

    # night 1: one and two learn their own rules and publish them on pushed branches
    with one:
        assert one.night(PNPM_CONVERSATIONS, hours_ago=30)["status"] == "accepted"
        dry = one.team("publish", "--dry-run")
        assert "would commit on branch skillopt-sleep/team-" in dry and "member-one" in dry
        pushed_one = json.loads(one.team("publish", "--push", "--json"))
        [pnpm] = pushed_one["plan"]["files"]
    with two:
        assert two.night(black_conversations(), hours_ago=30)["status"] == "accepted"
        pushed_two = json.loads(two.team("publish", "--push", "--json"))
        [black] = pushed_two["plan"]["files"]
    assert pnpm["role"] == black["role"] == "proposed" and pnpm["rule_id"] != black["rule_id"]
    assert "pnpm" in pnpm["text"] and "black" in black["text"]
    for pushed in (pushed_one, pushed_two):
        assert sh(remote, "rev-parse", f"refs/heads/{pushed['plan']['branch']}") == pushed["commit"]

    # review: three merges both branches (one file per rule and member: no conflict) and pushes main
    sh(three.clone, "fetch", "--quiet", "origin")
    for pushed in (pushed_one, pushed_two):
        sh(three.clone, "merge", "--quiet", "--no-edit", f"origin/{pushed['plan']['branch']}")
    sh(three.clone, "push", "--quiet", "origin", "main")

    # night 2: everyone pulls; the team rules are gated on each member's own val tasks
    for member in (one, two):
        sh(member.clone, "pull", "--quiet", "origin", "main")
    with three:
        preview = three.team("pull")
        assert f"next night gates {pnpm['rule_id']}" in preview and f"next night gates {black['rule_id']}" in preview
        status = three.team("status")
        assert status.count("not gated yet") == 2 and "member-one" in status and "member-two" in status
        night = three.night([*approved_train(), *pnpm_val(), *autopep8_val()], hours_ago=6)
        report = night["team"]
        assert sorted(report["proposed"]) == sorted([pnpm["rule_id"], black["rule_id"]]), json.dumps(report)
        assert [entry["id"] for entry in report["accepted"]] == [pnpm["rule_id"]], json.dumps(report)
        [rejected] = report["rejected"]  # the candidate lost three's autopep8 tasks; repair blamed the black rule
        assert rejected["id"] == black["rule_id"] and rejected["losses"] >= 1 and rejected["wins"] == 0
        assert rejected["reason"].startswith("gate repair: blamed")
        assert three.team_lines() == [pnpm["rule_id"]]
    with two:
        preview = two.team("pull")
        assert f"next night gates {pnpm['rule_id']}" in preview
        assert f"not gated {black['rule_id']}: your documents hold it" in preview
        night = two.night([*approved_train(), *pnpm_val()], hours_ago=6)
        [accepted] = night["team"]["accepted"]
        assert accepted["id"] == pnpm["rule_id"] and accepted["wins"] >= 1 and accepted["losses"] == 0
        assert two.team_lines() == [pnpm["rule_id"]]
    with one:
        preview = one.team("pull")
        assert f"next night gates {black['rule_id']}" in preview and f"not gated {pnpm['rule_id']}" in preview
        assert row(one.team("status"), black["rule_id"]).endswith("not gated yet")  # pending here

    # team status shows, per member, what is shared and what was accepted or rejected here
    with three:
        status = json.loads(three.team("status", "--json"))
        here = {rule["id"]: rule["local"]["status"] for rule in status["shared"]}
        assert here == {pnpm["rule_id"]: "accepted", black["rule_id"]: "rejected"}
        text = three.team("status")
        assert "team rules (member-three)" in text
        assert row(text, pnpm["rule_id"]).endswith("accepted") and row(text, black["rule_id"]).endswith("rejected")
        assert row(text, black["rule_id"]).split()[-5] == "member-two"  # its proposer

    # evidence flows back: two and three publish their held-out records; one reviews and merges them. (A publish
    # branch is named by the day: two's first one, merged already, is deleted as publish says to, to publish again
    # on the same day.)
    with two:
        sh(two.clone, "branch", "-D", pushed_two["plan"]["branch"])
        flowed_two = json.loads(two.team("publish", "--push", "--json"))
    with three:
        flowed_three = json.loads(three.team("publish", "--push", "--json"))
    tested_two = {f["rule_id"]: f for f in flowed_two["plan"]["files"] if f["role"] == "tested"}
    tested_three = {f["rule_id"]: f for f in flowed_three["plan"]["files"] if f["role"] == "tested"}
    assert set(tested_two) == {pnpm["rule_id"]} and set(tested_three) == {pnpm["rule_id"], black["rule_id"]}
    assert tested_three[black["rule_id"]]["record"]["losses"] >= 1
    sh(one.clone, "fetch", "--quiet", "origin")
    for flowed in (flowed_two, flowed_three):
        sh(one.clone, "merge", "--quiet", "--no-edit", f"origin/{flowed['plan']['branch']}")
    sh(one.clone, "push", "--quiet", "origin", "main")
    with one:
        shared = {rule["id"]: rule for rule in json.loads(one.team("status", "--json"))["shared"]}
    assert shared[pnpm["rule_id"]]["helped"] == ["member-one", "member-three", "member-two"]
    assert shared[black["rule_id"]]["helped"] == ["member-two"]
    assert shared[black["rule_id"]]["hurt"] == ["member-three"]

    # what reached the repository: rule files only, no request, no local path, no git identity
    sh(two.clone, "pull", "--quiet", "origin", "main")
    files = sorted((two.clone / RULES_DIR).glob("*/*.toml"))
    assert [f"{p.parent.name}/{p.stem}" for p in files] == sorted(
        [f"{pnpm['rule_id']}/member-one", f"{pnpm['rule_id']}/member-two", f"{pnpm['rule_id']}/member-three",
         f"{black['rule_id']}/member-two", f"{black['rule_id']}/member-three"])
    tracked = subprocess.run(["git", "ls-files"], cwd=two.clone, capture_output=True, text=True, check=True).stdout
    assert set(tracked.split()) == {"README.md", *(str(p.relative_to(two.clone)) for p in files)}
    for path in files:
        content = path.read_text("utf-8")
        assert str(tmp_path) not in content and "example.test" not in content and "Member " not in content
        for request, _answer, _correction in [*PNPM_CONVERSATIONS, *black_conversations()]:
            assert request not in content
