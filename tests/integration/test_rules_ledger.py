"""The rules ledger and ``forget``, end to end: real nights (mock simulator) write a rule the user stated into
CLAUDE.md; ``rules`` finds it (file, line, what taught it); ``forget`` removes it as a change of its own (atomic,
backed up, in ``history``, undone by ``revert``); the next night does not propose it again from statements made
before the forget, and does once the user states it again afterwards; an unexercised rule turns stale."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from transcripts import PNPM_CONVERSATIONS, write_claude_sessions
from typer.testing import CliRunner

from skillopt_sleep.cli.app import app
from skillopt_sleep.config import SleepConfig
from skillopt_sleep.documents.block import BLOCK_END
from skillopt_sleep.night import run_night
from skillopt_sleep.review.rule_ledger import list_rules, load_forgotten
from skillopt_sleep.state import ProjectPaths

RULE = "we use pnpm in this repo, never npm"
NOTES = "# Web app\n\nHand-written notes.\n"


@pytest.fixture
def world(tmp_path):
    """(project, state root, run(claude_home, **config) -> Diagnostics) with CLAUDE.md holding the user's notes."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "CLAUDE.md").write_text(NOTES, encoding="utf-8")
    state = tmp_path / "state"

    def run(claude_home: Path, **overrides):
        config = SleepConfig(backend="mock", lookback_hours=0, claude_home=claude_home, gate_rule="strict",
                             gate_samples=1, auto_adopt=True, **overrides)
        return run_night(config, project=project, state_root=state).diagnostics

    return project, state, run


def cli(project: Path, state: Path, monkeypatch, *args: str):
    monkeypatch.setenv("SKILLOPT_SLEEP_STATE_DIR", str(state))
    result = CliRunner().invoke(app, [*args, "--project", str(project)], terminal_width=200)
    assert result.exit_code == 0, result.output
    return result.output


def learn(world, tmp_path) -> tuple[Path, Path, dict]:
    project, state, run = world
    write_claude_sessions(tmp_path / "claude-1", project, PNPM_CONVERSATIONS, fixed_answer="Sorry, I will use pnpm.")
    diagnostics = run(tmp_path / "claude-1")
    assert diagnostics.status == "accepted" and diagnostics.applied == [str(project / "CLAUDE.md")]
    return project, state, diagnostics


def test_rules_lists_the_learned_rule_with_where_it_lives_and_what_taught_it(world, tmp_path, monkeypatch):
    project, state, diagnostics = learn(world, tmp_path)
    text = (project / "CLAUDE.md").read_text(encoding="utf-8")
    # a line the user typed into the managed block by hand, or one learned from replays, is listed too
    (project / "CLAUDE.md").write_text(text.replace(BLOCK_END, "- keep answers short\n" + BLOCK_END), encoding="utf-8")
    listed = json.loads(cli(project, state, monkeypatch, "rules", "--json"))
    ours, learned = listed["rules"]
    number = next(n for n, line in enumerate(text.splitlines(), 1) if "pnpm" in line)
    assert ours["origin"] == "you" and ours["status"] == "adopted" and RULE in ours["text"]
    assert ours["locations"] == [{"file": "CLAUDE.md", "kind": "memory", "line": number,
                                  "text": text.splitlines()[number - 1].strip()}]
    assert ours["nights"] == [diagnostics.night_id] and ours["stated"] >= 5 and len(ours["sessions"]) >= 5
    assert ours["last_exercised"] == diagnostics.night_id and ours["stale"] is False
    assert ours["wins"] >= 1 and ours["losses"] == 0
    assert (learned["origin"], learned["status"], learned["text"]) == ("replays", "adopted", "keep answers short")
    table = cli(project, state, monkeypatch, "rules")
    assert ours["id"] in table and "CLAUDE.md:" in table and "adopted" in table


def test_a_compiled_rule_is_listed_in_the_users_words_at_the_line_it_lives(world, tmp_path, monkeypatch):
    project, state, run = world
    # requests that name npm (the simulator follows a line that shares a word with the request), fixed with pnpm
    conversations = [(f"{request} with npm", answer, correction) for request, answer, correction in PNPM_CONVERSATIONS]
    write_claude_sessions(tmp_path / "claude-c", project, conversations, fixed_answer="Run `pnpm install`.")
    # the compiled line with its example, as written without the wording choice (engine/wording.py picks by replay;
    # this test is about the ledger, not about which wording the simulator follows)
    diagnostics = run(tmp_path / "claude-c", rule_wording="compiled", wording_max_calls=0)
    assert diagnostics.status == "accepted", diagnostics.summary
    line = "- Use `pnpm`, never `npm` (e.g. `pnpm install`)."
    text = (project / "CLAUDE.md").read_text(encoding="utf-8")
    assert line in text.splitlines() and RULE not in text
    [ours] = json.loads(cli(project, state, monkeypatch, "rules", "--json"))["rules"]
    assert (ours["origin"], ours["status"], ours["text"]) == ("you", "adopted", RULE)
    assert ours["locations"] == [{"file": "CLAUDE.md", "kind": "memory", "line": text.splitlines().index(line) + 1,
                                  "text": line}]
    # a second night of the same rule proposes nothing new
    write_claude_sessions(tmp_path / "claude-c2", project, conversations[:3], fixed_answer="Run `pnpm install`.",
                          hours_ago=1.0)
    again = run(tmp_path / "claude-c2", rule_wording="compiled", wording_max_calls=0)
    assert [rule["text"] for rule in again.mining["rules"]] == [RULE]
    assert not [edit for edit in again.edits if edit.rationale.startswith("stated by the user")]
    assert (project / "CLAUDE.md").read_text(encoding="utf-8").count("pnpm") == text.count("pnpm")


def test_forget_removes_one_rule_atomically_and_revert_brings_it_back(world, tmp_path, monkeypatch):
    project, state, _ = learn(world, tmp_path)
    before = (project / "CLAUDE.md").read_text(encoding="utf-8")
    rule_id = json.loads(cli(project, state, monkeypatch, "rules", "--json"))["rules"][0]["id"]
    forgotten = json.loads(cli(project, state, monkeypatch, "forget", rule_id, "--json"))
    after = (project / "CLAUDE.md").read_text(encoding="utf-8")
    assert "pnpm" not in after and after.startswith(NOTES)
    assert [line for line in before.splitlines() if line not in after.splitlines()] == [
        next(line for line in before.splitlines() if "pnpm" in line)]  # only that line went
    change_id = forgotten["change_id"]
    assert change_id.endswith(f"-forget-{rule_id}") and forgotten["files"] == ["CLAUDE.md"]
    backup = Path(forgotten["adoption"]["documents"][0]["backup"])
    assert backup.read_text(encoding="utf-8") == before
    history = json.loads(cli(project, state, monkeypatch, "history", "--json"))["adoptions"]
    assert [(a["night_id"], a["status"]) for a in history][-1] == (change_id, "adopted")
    listed = {r["id"]: r for r in json.loads(cli(project, state, monkeypatch, "rules", "--json"))["rules"]}
    assert listed[rule_id]["status"] == "forgotten" and listed[rule_id]["locations"] == []

    cli(project, state, monkeypatch, "revert", change_id)
    assert (project / "CLAUDE.md").read_text(encoding="utf-8") == before
    # the revert restores the rule's record too: no longer forgotten anywhere (rules, the nights' filter)
    paths = ProjectPaths(project, state_root=state)
    assert load_forgotten(paths) == {}
    listed = {r["id"]: r for r in json.loads(cli(project, state, monkeypatch, "rules", "--json"))["rules"]}
    assert listed[rule_id]["status"] == "adopted" and listed[rule_id]["forgotten_at"] is None
    # status and adopt agree: nothing waits for adopt (the forget change is reverted, not staged)
    status = json.loads(cli(project, state, monkeypatch, "status", "--json"))
    assert status["pending_proposals"] == [] and "run 'skillopt-sleep adopt'" not in status["last_night"]["headline"]


def test_a_forgotten_rule_is_proposed_again_only_once_the_user_states_it_again(world, tmp_path, monkeypatch):
    project, state, _ = learn(world, tmp_path)
    _, _, run = world
    rule_id = json.loads(cli(project, state, monkeypatch, "rules", "--json"))["rules"][0]["id"]
    cli(project, state, monkeypatch, "forget", rule_id)
    forgotten_text = (project / "CLAUDE.md").read_text(encoding="utf-8")

    # sessions from before the forget, read by a later night: the rule is not proposed again
    write_claude_sessions(tmp_path / "claude-2", project, PNPM_CONVERSATIONS, hours_ago=2.0,
                          fixed_answer="Sorry, I will use pnpm.")
    quiet = run(tmp_path / "claude-2")
    assert not any("pnpm" in edit.content for edit in quiet.edits if edit.status == "applied")
    assert (project / "CLAUDE.md").read_text(encoding="utf-8") == forgotten_text

    # the user states it again after the forget: proposed and learned again
    write_claude_sessions(tmp_path / "claude-3", project, PNPM_CONVERSATIONS, hours_ago=-1.0,
                          fixed_answer="Sorry, I will use pnpm.")
    again = run(tmp_path / "claude-3")
    assert again.status == "accepted" and "pnpm" in (project / "CLAUDE.md").read_text(encoding="utf-8")


def test_a_rule_no_task_has_tested_for_stale_after_nights_is_stale_and_kept(world, tmp_path):
    project, state, diagnostics = learn(world, tmp_path)
    paths = ProjectPaths(project, state_root=state)
    rule = list_rules(project, paths, stale_after_nights=1)[0]
    assert (rule.nights_unexercised, rule.stale) == (0, False)
    # a later night that replayed nothing testing the rule (a completed night with diagnostics)
    later = paths.nights / "2999-01-01T000000Z"
    later.mkdir(parents=True)
    (later / "diagnostics.json").write_text("{}", encoding="utf-8")
    rule = list_rules(project, paths, stale_after_nights=1)[0]
    assert (rule.nights_unexercised, rule.stale, rule.status) == (1, True, "adopted")
    assert list_rules(project, paths, stale_after_nights=2)[0].stale is False
    assert "pnpm" in (project / "CLAUDE.md").read_text(encoding="utf-8")  # shown as stale, never deleted


def test_each_managed_file_has_its_own_kind_also_when_memory_path_names_another_file(tmp_path):
    from skillopt_sleep.review.rule_ledger import managed_files

    (tmp_path / "CLAUDE.md").write_text("x\n", encoding="utf-8")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "RULES.md").write_text("y\n", encoding="utf-8")
    (tmp_path / "GEMINI.md").write_text("z\n", encoding="utf-8")
    found = managed_files(tmp_path, memory_path="docs/RULES.md")
    assert [(kind, path.name) for kind, path in found] == [
        ("memory", "RULES.md"), ("memory:claude", "CLAUDE.md"), ("memory:gemini", "GEMINI.md")]
    assert [kind for kind, _ in managed_files(tmp_path)] == ["memory", "memory:gemini"]


def test_rules_shows_candidates_and_one_offs_with_why_and_a_later_night_promotes_a_candidate(
        world, tmp_path, monkeypatch):
    project, state, run = world
    write_claude_sessions(tmp_path / "claude-1", project, PNPM_CONVERSATIONS + [
        ("add a price field to the invoice model. Make sure money amounts use the decimal module.", "Done.", "thanks"),
        ("fix the rounding in the totals. Keep the spacing as it is.", "Done.", "thanks")],
        fixed_answer="Sorry, I will use pnpm.")
    run(tmp_path / "claude-1")
    by_text = {entry.text.casefold(): entry
               for entry in list_rules(project, ProjectPaths(project, state_root=state))}
    waiting = by_text["make sure money amounts use the decimal module"]
    assert (waiting.status, waiting.scope) == ("candidate", "candidate")
    assert "stated once" in waiting.scope_reason
    one_off = by_text["keep the spacing as it is"]
    assert (one_off.status, one_off.scope) == ("one-off", "one_off") and "'it'" in one_off.scope_reason
    listed = {rule["id"]: rule for rule in json.loads(cli(project, state, monkeypatch, "rules", "--json"))["rules"]}
    assert listed[waiting.id]["scope_reason"] == waiting.scope_reason and listed[one_off.id]["status"] == "one-off"
    monkeypatch.setenv("COLUMNS", "250")
    assert "candidate: stated once" in cli(project, state, monkeypatch, "rules")
    assert "decimal" not in (project / "CLAUDE.md").read_text(encoding="utf-8")
    # another night, another task, other words: stated on two nights, it lasts
    write_claude_sessions(tmp_path / "claude-2", project, [
        ("add a discount column to the orders report; make sure money amounts use the decimal module", "Done.",
         "thanks")], hours_ago=1.0)
    diagnostics = run(tmp_path / "claude-2")
    paths = ProjectPaths(project, state_root=state)
    promoted = next(entry for entry in list_rules(project, paths) if entry.id == waiting.id)
    assert promoted.scope == "lasting" and promoted.scope_reason == "stated on 2 nights"
    assert promoted.status != "candidate" and len(promoted.nights) == 2, diagnostics.status
