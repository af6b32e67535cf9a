"""``team pull --from-peer``: a rules manifest exported by SkillOpt-Sleep (``tests/peer_manifest.py``: its format and
where it is specified) is taken in as team rule files and re-proved by each member's own nights, through the real CLI,
real git and real nights (mock simulator) over ``test_team_git``'s bare repository.

B imports it: the checkable rule is written into the team rules folder, the rest is skipped or blocked, no document
changes; B's next night gates the rule on B's val tasks (held-out requests B corrected the pnpm way), accepts it into
the Team rules part of the block, and B's publish sends the record back. C imports the same file, but C's held-out
requests want yarn: C's gate rejects it and C's documents never hold it. A malformed manifest is an error naming the
file and the key, and writes nothing.
"""

from __future__ import annotations

import json

import test_team_git
from peer_manifest import PNPM_RULE, SECRET, SECRET_RULE, UNCHECKABLE_RULE, URL_RULE, manifest, mutated, write_manifest
from test_team_git import as_member, cli
from test_team_night import black_conversations, held_out_pnpm, held_out_yarn, memory, night
from typer.testing import CliRunner

from skillopt_sleep.cli.app import app
from skillopt_sleep.documents.block import TEAM_HEADING, managed_block, team_rule_of
from skillopt_sleep.paths import ProjectPaths
from skillopt_sleep.team.local import load_local
from skillopt_sleep.team.peer import PEER_MEMBER
from skillopt_sleep.team.store import RULES_DIR

team = test_team_git.team  # the fixture: a bare repository and the members' clones


def _peer_file(tmp_path):
    return write_manifest(tmp_path / "downloads" / "community-rules.json",
                          manifest(PNPM_RULE, UNCHECKABLE_RULE, SECRET_RULE, URL_RULE))


def test_a_peer_rule_is_imported_screened_and_gated_on_each_member_s_own_val_tasks(team, tmp_path, monkeypatch):
    _remote, clones = team
    b, c = clones["b"], clones["c"]
    peer = _peer_file(tmp_path)

    state_b = as_member(monkeypatch, tmp_path, "b")
    pulled = json.loads(cli(b, "pull", "--from-peer", str(peer), "--json"))
    statuses = {rule["text"]: rule["status"] for rule in pulled["peer"]["rules"]}
    assert statuses[PNPM_RULE] == "imported" and statuses[UNCHECKABLE_RULE] == "skipped"
    assert sorted(statuses.values()).count("blocked") == 2 and SECRET not in json.dumps(pulled)
    [rule_id] = [rule["rule_id"] for rule in pulled["peer"]["rules"] if rule["status"] == "imported"]
    assert pulled["next_night"]["proposed"] == [rule_id]
    assert [p.parent.name for p in (b / RULES_DIR).glob(f"*/{PEER_MEMBER}.toml")] == [rule_id]
    assert not (b / "CLAUDE.md").exists()  # imported, not adopted: only a gate writes a document
    text = cli(b, "pull")
    assert f"next night gates {rule_id}: {PNPM_RULE}" in text and "proven by 0 member(s)" in text

    diagnostics = night(b, state_b, tmp_path, "b", [*black_conversations(), *held_out_pnpm()])
    assert diagnostics.status == "accepted", diagnostics.summary
    [accepted] = diagnostics.team["accepted"]
    assert accepted["id"] == rule_id and accepted["wins"] >= 1 and accepted["losses"] == 0
    block = managed_block(memory(b)).splitlines()
    at = block.index(TEAM_HEADING)
    assert [team_rule_of(line) for line in block[at + 1:]] == [rule_id] and "pnpm" in block[at + 1]
    paths_b = ProjectPaths(b.resolve(), state_b)
    assert load_local(paths_b).rules[rule_id].status == "accepted"
    [shared] = json.loads(cli(b, "status", "--json"))["shared"]
    assert shared["proposer"] == PEER_MEMBER and shared["local"]["status"] == "accepted"
    # B's held-out record of the peer rule flows back like any team rule's
    published = json.loads(cli(b, "publish", "--json"))
    assert any(f["rule_id"] == rule_id and f["role"] == "tested" and f["record"]["wins"] >= 1
               for f in published["plan"]["files"])

    # C imports the same manifest; C's held-out requests want yarn: the gate rejects the rule on C's work
    state_c = as_member(monkeypatch, tmp_path, "c")
    assert "peer rule" in cli(c, "pull", "--from-peer", str(peer))
    diagnostics = night(c, state_c, tmp_path, "c", [*black_conversations(), *held_out_yarn()])
    assert rule_id in diagnostics.team["proposed"]
    assert rule_id in {entry["id"] for entry in diagnostics.team["rejected"]}
    local = load_local(ProjectPaths(c.resolve(), state_c)).rules[rule_id]
    assert local.status == "rejected" and local.record.losses >= 1 and local.record.wins == 0
    assert rule_id not in memory(c) and "pnpm" not in managed_block(memory(c) or "")


def test_a_malformed_peer_manifest_is_an_error_naming_the_file_and_the_key_and_writes_nothing(
        team, tmp_path, monkeypatch):
    _remote, clones = team
    b = clones["b"]
    as_member(monkeypatch, tmp_path, "b")
    bad = write_manifest(tmp_path / "bad.json", mutated(manifest(), "rules.0.observed_effect.scope", "one_rule"))
    result = CliRunner().invoke(app, ["team", "pull", "--from-peer", str(bad), "--project", str(b)],
                                terminal_width=400)
    assert result.exit_code == 1
    assert f"{bad}: key 'rules.0.observed_effect.scope'" in " ".join(result.output.split())
    assert not (b / RULES_DIR).exists()
