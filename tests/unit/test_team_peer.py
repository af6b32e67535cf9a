"""Rules exported by SkillOpt-Sleep taken in as team rules (skillopt_sleep/team/peer.py): strict parsing of the
peer's manifest (``tests/peer_manifest.py`` says where its format comes from), the rule files made from it, and the
screens: a secret or a URL nobody here typed is blocked, a rule with no derivable check is skipped, a malformed file
names the file and the key and writes nothing, and nothing reaches a document."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
from pathlib import Path

import pytest
from peer_manifest import (
    DELETE,
    PNPM_RULE,
    SECRET,
    SECRET_RULE,
    UNCHECKABLE_RULE,
    UNCHECKABLE_SECRET_RULE,
    URL_RULE,
    manifest,
    mutated,
    peer_rule_id,
    write_manifest,
)

from skillopt_sleep.checks import check_key, evaluate_check
from skillopt_sleep.config import SleepConfig
from skillopt_sleep.errors import TeamError
from skillopt_sleep.paths import ProjectPaths
from skillopt_sleep.team.peer import (
    MAX_RULES,
    PEER_MEMBER,
    PeerManifest,
    import_peer_rules,
    peer_rule_file,
    read_peer_manifest,
)
from skillopt_sleep.team.store import RULES_DIR, load_rule_files, parse_rule_file, render_rule_file, team_rule_id

DAY = dt.date(2025, 6, 1)


@pytest.fixture
def repo(tmp_path, monkeypatch) -> Path:
    """A git work tree named like a project (no commit needed: rules are read from the work tree)."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    project = tmp_path / "shop-web"
    project.mkdir()
    subprocess.run(["git", "init", "--quiet", "-b", "main", str(project)], check=True)
    return project


def _import(repo: Path, tmp_path: Path, data=None):
    path = write_manifest(tmp_path / "in" / "community-rules.json", data)
    return import_peer_rules(repo, SleepConfig(), path, paths=ProjectPaths(repo, tmp_path / "state"), today=DAY,
                             state_root=tmp_path / "state", preview=False)


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(root).parts}


def test_a_real_format_manifest_parses_with_every_field(tmp_path):
    path = write_manifest(tmp_path / "community-rules.json")
    parsed = read_peer_manifest(path)
    assert parsed.license == "MIT" and [rule.rule for rule in parsed.rules] == [PNPM_RULE, UNCHECKABLE_RULE]
    first = parsed.rules[0]
    assert first.id == peer_rule_id("coding", PNPM_RULE) and first.category == "coding"
    assert first.observed_effect.scope == "candidate_set" and first.observed_effect.sample_size == 8
    assert first.observed_effect.delta == pytest.approx(0.25)


@pytest.mark.parametrize(("key", "value", "says"), [
    ("schema", "skillopt.rules", "schema"),
    ("schema_version", 2, "schema_version"),
    ("schema_version", True, "schema_version"),  # a JSON boolean is not the version 1
    ("license", "", "license"),
    ("rules", [], "rules"),
    ("rules.0.rule", DELETE, "rules.0.rule"),
    ("rules.0.rule", 42, "rules.0.rule"),
    ("rules.1.id", "rule with spaces", "rules.1.id"),
    ("rules.1.observed_effect.scope", "rule", "rules.1.observed_effect.scope"),
    ("rules.0.observed_effect.sample_size", 0, "rules.0.observed_effect.sample_size"),
    ("rules.0.observed_effect.baseline", "0.5", "rules.0.observed_effect.baseline"),
    ("rules.0.tasks", ["install the deps"], "rules.0.tasks"),  # no field for a transcript or a task
    ("transcripts", [], "transcripts"),
])
def test_a_malformed_manifest_names_the_file_and_the_key(tmp_path, key, value, says):
    path = write_manifest(tmp_path / "bad.json", mutated(manifest(), key, value))
    with pytest.raises(TeamError) as caught:
        read_peer_manifest(path)
    assert f"{path}: key '{says}'" in caught.value.message


def test_duplicate_ids_too_many_rules_and_text_that_is_not_json_are_refused(tmp_path):
    twice = manifest(PNPM_RULE, PNPM_RULE)
    with pytest.raises(TeamError, match=r"key 'rules\.1\.id': rule-[0-9a-f]{16} appears twice"):
        read_peer_manifest(write_manifest(tmp_path / "twice.json", twice))
    many = manifest(*[f"Use tool{i} in this repo, never npm." for i in range(MAX_RULES + 1)])
    with pytest.raises(TeamError, match="key 'rules'"):
        read_peer_manifest(write_manifest(tmp_path / "many.json", many))
    assert len(read_peer_manifest(write_manifest(tmp_path / "max.json", mutated(many, f"rules.{MAX_RULES}",
                                                                                  DELETE))).rules) == MAX_RULES
    broken = tmp_path / "broken.json"
    broken.write_text('{"schema": "skillopt.community-rules",', encoding="utf-8")
    with pytest.raises(TeamError, match=f"{broken}: not valid JSON"):
        read_peer_manifest(broken)
    with pytest.raises(TeamError, match="cannot read the rules manifest"):
        read_peer_manifest(tmp_path / "missing.json")


def test_a_peer_rule_becomes_a_team_rule_file_with_derived_checks_and_no_counted_evidence():
    rule = PeerManifest.model_validate(manifest()).rules[0]
    made = peer_rule_file(rule, license_id="MIT", repository="shop-web", today=DAY)
    assert not isinstance(made, str)
    assert made.text == PNPM_RULE and made.member == PEER_MEMBER and made.role == "proposed"
    assert made.id == team_rule_id(made.checks) and made.record.outcome == "untested"
    assert rule.id in made.rationale and "MIT" in made.rationale
    assert {check.origin for check in made.checks} == {"team"}
    # the derived checks demand what the rule says: a pnpm answer passes them, an npm one does not
    assert all(evaluate_check(check, "Run `pnpm install`.", None) for check in made.checks)
    assert not all(evaluate_check(check, "Run `npm install`.", None) for check in made.checks)
    # and the file round-trips through the strict parser of team rule files
    again = parse_rule_file(render_rule_file(made), where="x.toml")
    assert {check_key(c) for c in again.checks} == {check_key(c) for c in made.checks} and again.id == made.id

    uncheckable = PeerManifest.model_validate(manifest()).rules[1]
    assert "no check" in peer_rule_file(uncheckable, license_id="MIT", repository="shop-web", today=DAY)
    long = PeerManifest.model_validate(manifest("Use pnpm, never npm, " + "really " * 60 + "always.")).rules[0]
    assert "one line" in peer_rule_file(long, license_id="MIT", repository="shop-web", today=DAY)


def test_import_writes_checkable_rules_blocks_secrets_and_unknown_urls_and_skips_the_rest(repo, tmp_path):
    (repo / "CLAUDE.md").write_text("# Notes\n", encoding="utf-8")
    data = manifest(PNPM_RULE, UNCHECKABLE_RULE, SECRET_RULE, UNCHECKABLE_SECRET_RULE, URL_RULE)
    result = _import(repo, tmp_path, data)
    by_text = {rule.peer_id: rule for rule in result.rules}
    status = {text: by_text[peer_rule_id("coding", text)].status for text in
              (PNPM_RULE, UNCHECKABLE_RULE, SECRET_RULE, UNCHECKABLE_SECRET_RULE, URL_RULE)}
    assert status == {PNPM_RULE: "imported", UNCHECKABLE_RULE: "skipped", SECRET_RULE: "blocked",
                      UNCHECKABLE_SECRET_RULE: "blocked", URL_RULE: "blocked"}
    url = by_text[peer_rule_id("coding", URL_RULE)]
    assert "no_user_provenance" in url.reason and "rules.example.invalid" in url.reason
    assert by_text[peer_rule_id("coding", SECRET_RULE)].reason.startswith("text: secret")
    # the secret is nowhere: not in the result (its text is shown redacted), not in any file of the repository
    assert SECRET not in result.model_dump_json()
    assert all(SECRET.encode() not in content for content in _tree(repo).values())

    [written] = load_rule_files(repo / RULES_DIR)
    pnpm = by_text[peer_rule_id("coding", PNPM_RULE)]
    assert written.id == pnpm.rule_id and written.member == PEER_MEMBER and written.text == PNPM_RULE
    assert pnpm.path == str(RULES_DIR / written.id / f"{PEER_MEMBER}.toml") and (repo / pnpm.path).is_file()
    assert written.scope.repository == "shop-web"
    # nothing reaches a document: the next night's gate decides
    assert (repo / "CLAUDE.md").read_text("utf-8") == "# Notes\n"
    assert not (repo / ".claude").exists()

    # a second import of the same manifest changes nothing
    before = _tree(repo)
    again = _import(repo, tmp_path, data)
    assert again.count("present") == 1 and again.count("imported") == 0 and _tree(repo) == before


def test_a_malformed_manifest_changes_nothing(repo, tmp_path):
    before = _tree(repo)
    state = tmp_path / "state"
    bad = write_manifest(tmp_path / "in" / "bad.json", mutated(manifest(), "rules.0.observed_effect.scope", "x"))
    with pytest.raises(TeamError, match=r"key 'rules\.0\.observed_effect\.scope'"):
        import_peer_rules(repo, SleepConfig(), bad, state_root=state, today=DAY)
    assert _tree(repo) == before and not (repo / RULES_DIR).exists() and not state.exists()


def test_the_import_result_is_json_and_names_no_local_path_in_the_files(repo, tmp_path):
    result = _import(repo, tmp_path)
    json.loads(result.model_dump_json())
    for path in (repo / RULES_DIR).rglob("*.toml"):
        assert str(tmp_path) not in path.read_text("utf-8")
