"""Two things the simulated-team benchmark (``benchmarks/team.py``, twelve members) found, each pinned by a real
night (mock simulator) over a bare repository on disk (``test_team_git``'s fixture; hermetic, no network):

* a published rule is the line the member's documents hold (the wording that won the held-out tasks), not the
  conversational words it was stated in ("no, we use pnpm in this repo, never npm");
* with many members, the team tree holds many rules personal to others that no val task of this member tests; the
  rules this member's val tasks do test are gated first, so the edit budget is not spent on rules that can only wait.
"""

from __future__ import annotations

import json

import test_team_git
from test_team_git import as_member, cli
from test_team_night import black_conversations, held_out_pnpm, memory, night, team_file
from transcripts import PNPM_CONVERSATIONS, PNPM_CORRECTION, write_claude_sessions

from skillopt_sleep.config import SleepConfig
from skillopt_sleep.documents.block import managed_block
from skillopt_sleep.models import Check
from skillopt_sleep.night import run_night
from skillopt_sleep.team.store import team_rule_id

team = test_team_git.team  # the fixture: a bare repository and the members' clones


def test_a_published_rule_is_the_adopted_line_not_the_words_it_was_stated_in(team, tmp_path, monkeypatch):
    _remote, clones = team
    a = clones["a"]
    state = as_member(monkeypatch, tmp_path, "a")
    claude = tmp_path / "claude" / "a"
    write_claude_sessions(claude, a, PNPM_CONVERSATIONS, fixed_answer="Sorry, I will use pnpm.")
    config = SleepConfig(backend="mock", lookback_hours=0, claude_home=claude, gate_rule="strict", gate_samples=1,
                         auto_adopt=True)  # rule_wording: the default, compiled from the rule's checks
    assert run_night(config, project=a, state_root=state).diagnostics.status == "accepted"
    [line] = [line for line in managed_block(memory(a)).splitlines() if "pnpm" in line]
    [planned] = json.loads(cli(a, "publish", "--dry-run", "--json"))["plan"]["files"]
    assert planned["text"] == line.lstrip("- ").strip()
    assert planned["text"] != PNPM_CORRECTION and "in this repo" not in planned["text"]
    assert f'text = "{planned["text"]}"' in planned["content"].replace('\\"', '"')


def test_rules_this_member_s_val_tasks_test_are_gated_before_rules_none_of_them_tests(team, tmp_path, monkeypatch):
    _remote, clones = team
    b = clones["b"]
    state = as_member(monkeypatch, tmp_path, "b")
    pnpm_checks = [Check(op="contains", value="pnpm"), Check(op="not_contains", value="npm")]
    pnpm = team_file(b, "Use `pnpm`, never `npm`.", pnpm_checks)
    # rules personal to other members, which none of B's val tasks tests, whose ids come before pnpm's: in id
    # order they would take the edit budget's two places left beside B's own rule
    others = [(tool, team_rule_id([Check(op="contains", value=tool, origin="team")]))
              for tool in ("rg", "podman", "mypy", "helm", "zstd", "rsync", "celery", "alembic", "loguru", "vim")]
    before = [(tool, rule_id) for tool, rule_id in others if rule_id < pnpm][:3]
    assert len(before) >= 2
    untested = [team_file(b, f"Use `{tool}` for it.", [Check(op="contains", value=tool)], member="m-team0003")
                for tool, _rule_id in before]
    diagnostics = night(b, state, tmp_path, "b", [*black_conversations(), *held_out_pnpm()])
    report = diagnostics.team
    assert report["proposed"][0] == pnpm and set(report["proposed"]) == {pnpm, *untested}
    assert [entry["id"] for entry in report["accepted"]] == [pnpm]
    assert pnpm in memory(b) and not any(rule_id in memory(b) for rule_id in untested)
    assert {entry["id"] for entry in report["pending"]} == set(untested)

