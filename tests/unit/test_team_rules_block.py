"""Team rules in a member's night, the parts below the night: the Team rules part of the managed block, the screens
a team rule's edit passes (its reviewed text is its own provenance; a secret never passes), and contradiction."""

from __future__ import annotations

import datetime as dt

from skillopt_sleep.documents.block import (
    TEAM_HEADING,
    block_rule_lines,
    managed_block,
    strip_team_mark,
    team_line,
    team_rule_of,
)
from skillopt_sleep.engine.edits import apply_edits
from skillopt_sleep.engine.reflect import EditScope
from skillopt_sleep.engine.step import _team_rules_stage
from skillopt_sleep.mine.provenance import NO_USER_PROVENANCE, SECRET, UserText, provenance_reason, unsupported_lines
from skillopt_sleep.mine.rulebook import line_keys
from skillopt_sleep.models import Check, EditRecord
from skillopt_sleep.team.night import TeamNight, contradicts, team_edit
from skillopt_sleep.team.store import Scope, SharedRule, team_rule_id

RULE_ID = "t-3f2a9c0d1e7b"


def shared(text: str, checks: list[Check]) -> SharedRule:
    checks = [check.model_copy(update={"origin": "team"}) for check in checks]
    return SharedRule(id=team_rule_id(checks), text=text, checks=checks, scope=Scope(repository="shop-web"),
                      proposer="m-aaaa1111", proposed=dt.date(2025, 6, 1))


def test_a_team_line_carries_its_id_and_reads_as_its_words():
    line = team_line("- Use pnpm, never npm.", RULE_ID)
    assert line == f"- Use pnpm, never npm. <!-- team {RULE_ID} -->"
    assert team_rule_of(line) == RULE_ID and team_rule_of("- Use pnpm, never npm.") is None
    assert strip_team_mark(line) == "- Use pnpm, never npm."
    assert line_keys(line) == line_keys("- Use pnpm, never npm.")


def test_team_lines_go_to_their_own_part_last_in_the_block_and_other_appends_stay_above_it():
    team = EditRecord(target="memory", op="append", content=team_line("- Use pnpm, never npm.", RULE_ID))
    own = EditRecord(target="memory", op="append", content="- Format with black.")
    document, applied = apply_edits("# Notes\n", [team, own], "memory")
    assert [edit.status for edit in applied] == ["applied", "applied"]
    lines = managed_block(document).splitlines()
    assert lines[lines.index(TEAM_HEADING) + 1:] == [team.content]
    assert lines.index("- Format with black.") < lines.index(TEAM_HEADING)
    other = team_line("- Run the linter.", "t-000000000001")
    document, _ = apply_edits(document, [EditRecord(target="memory", op="append", content=other)], "memory")
    assert managed_block(document).splitlines()[-2:] == [team.content, other]
    # the heading is not a rule line; a team line keeps its attribution there
    assert [text for _, text in block_rule_lines(document)] == ["- Format with black.", team.content, other]
    # a document without team rules is unchanged by the placement
    plain, _ = apply_edits("", [own, EditRecord(target="memory", op="append", content="- Two.\n- Lines.")], "memory")
    assert TEAM_HEADING not in plain and managed_block(plain).splitlines()[-4:] == ["- Format with black.", "",
                                                                                    "- Two.", "- Lines."]


def test_a_team_rule_is_its_own_provenance_but_a_secret_never_passes():
    scope = EditScope(edit_budget=3, evolve_skill=False, evolve_memory=True)
    user_text = UserText(["install the deps for this repo"])
    command = team_edit(shared("Run `make lint-all` before you commit.", [Check(op="contains",
                                                                                  value="make lint-all")]))
    secret = team_edit(shared("Log in with ghp_abcdefghijklmnopqrstuvwxyz0123456789.",
                              [Check(op="contains", value="registry")]))
    bare = strip_team_mark(command.content)
    assert (provenance_reason(bare, user_text) or "").startswith(NO_USER_PROVENANCE)  # nobody here typed it
    rejected: list[EditRecord] = []
    kept = _team_rules_stage([command, secret], user_text=user_text, scope=scope, rejected=rejected)
    assert [edit.content for edit in kept] == [command.content]
    [blocked] = rejected
    assert blocked.reason.startswith(SECRET) and "ghp_" not in blocked.content
    assert team_rule_of(blocked.content) == team_rule_of(secret.content)
    # the night's last provenance check of a candidate reads the team rules' reviewed text too
    before = {"memory": ""}
    after, _ = apply_edits("", kept, "memory")
    plan = TeamNight(mode="project", rules=[shared("Run `make lint-all` before you commit.",
                                                   [Check(op="contains", value="make lint-all")])])
    assert unsupported_lines(before, {"memory": after}, user_text)
    assert not unsupported_lines(before, {"memory": after}, plan.provenance(user_text))


def test_contradiction_is_one_demanding_what_the_other_forbids():
    assert contradicts({("has", "pnpm")}, {("not", "pnpm"), ("has", "npm")})
    assert contradicts({("not", "bun")}, {("has", "bun")})
    assert not contradicts({("has", "pnpm")}, {("has", "pnpm"), ("regex", "x")})
