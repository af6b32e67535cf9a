"""The learning benchmark's simulated world: probe checkers, held-out probes, Claude Code transcript shape."""

from __future__ import annotations

import json
import re
from datetime import datetime

import pytest

from benchmarks import world, world2, world3
from skillopt_sleep.harvest import harvest
from skillopt_sleep.mine import mine_tasks


@pytest.mark.parametrize("answer, expected", [
    ("Run `pnpm add lodash`.", True),
    ("Run `npm install lodash`.", False),
    ("Use pnpm: `pnpm install` (not npm install).", False),
    ("Run `yarn add lodash`.", False),
])
def test_pnpm_checker_needs_pnpm_and_no_bare_npm(answer, expected):
    assert world.check_pnpm(answer) is expected


@pytest.mark.parametrize("answer, expected", [
    ("## 2.4.0 - 2026-11-21", True),
    ("## 2.4.0 - 11/21/2026", False),
    ("## 2.4.0 - 2026-11-21 (11/21/2026)", False),
    ("## 2.4.0 - November 21, 2026", False),
])
def test_iso_date_checker_needs_an_iso_date_and_no_month_day_year(answer, expected):
    assert world.check_iso_date(answer) is expected


@pytest.mark.parametrize("answer, expected", [
    ("fix(auth): extend the login timeout", True),
    ("```\nfeat: add dark mode toggle\n```", True),
    ('git commit -m "docs(readme): update installation steps"', True),
    ("Here is a message:\n\n`chore!: drop the logger module`", True),
    ("Fixed the login timeout", False),
    ("Fix: extend the login timeout", False),
    ("feature: add dark mode", False),
])
def test_conventional_commit_checker_finds_a_typed_subject_line(answer, expected):
    assert world.check_conventional_commit(answer) is expected


@pytest.mark.parametrize("answer, expected", [
    ("from pathlib import Path\nfiles = list(Path('docs').glob('*.md'))", True),
    ("import os\nfiles = [f for f in os.listdir('docs') if f.endswith('.md')]", False),
    ("from pathlib import Path\nimport os.path\nos.path.join('a', 'b')", False),
])
def test_pathlib_checker_needs_pathlib_and_no_os_path(answer, expected):
    assert world.check_pathlib(answer) is expected


def test_every_wrong_answer_fails_and_every_fixed_answer_passes_its_rule():
    for night in world.NIGHTS:
        for conversation in night:
            checker = world.CHECKERS[conversation.rule]
            assert not checker(conversation.wrong_answer), conversation.wrong_answer
            assert checker(conversation.fixed_answer), conversation.fixed_answer


def test_probes_cover_every_rule_at_least_four_times_and_never_appear_in_a_transcript():
    assert len(world.PROBES) >= 16
    for rule in world.CHECKERS:
        assert sum(probe.rule == rule for probe in world.PROBES) >= 4
    transcripts = world.transcript_text().casefold()
    for probe in world.PROBES:
        assert probe.prompt.casefold() not in transcripts
    requests = [c.request.casefold() for night in world.NIGHTS for c in night]
    assert len(requests) == len(set(requests)), "a request repeats across nights"


def test_every_night_teaches_every_rule_with_new_wording():
    for night in world.NIGHTS:
        assert {c.rule for c in night} == set(world.CHECKERS)
    corrections = [c.correction for night in world.NIGHTS for c in night]
    assert len(set(corrections)) == len(corrections)


def test_sessions_are_claude_code_2_1_jsonl_under_the_sanitized_project_folder(tmp_path):
    project = tmp_path / "my.project"
    project.mkdir()
    files = world.write_night_sessions(tmp_path / "claude-home", project, 2)
    assert len(files) == len(world.NIGHTS[1])
    folder = files[0].parent.name
    assert all(f.parent.name == folder for f in files)
    assert folder == re.sub(r"[^A-Za-z0-9]", "-", str(project))  # Claude Code's sanitized cwd
    assert folder.endswith("-my-project")
    records = [json.loads(line) for line in files[0].read_text("utf-8").splitlines()]
    assert [r["type"] for r in records] == ["user", "assistant", "user", "assistant"]
    assert records[0]["parentUuid"] is None
    assert [r["parentUuid"] for r in records[1:]] == [r["uuid"] for r in records[:-1]]
    assert {r["sessionId"] for r in records} == {files[0].stem}
    assert all(r["cwd"] == str(project) and r["version"].startswith("2.1.") for r in records)
    day = world.night_day(2).date()
    assert all(datetime.fromisoformat(r["timestamp"].replace("Z", "+00:00")).date() == day for r in records)
    assert records[0]["message"] == {"role": "user", "content": world.NIGHTS[1][0].request}
    assert records[1]["message"]["content"][0]["text"] == world.NIGHTS[1][0].wrong_answer


def test_the_product_harvests_the_night_and_mines_tasks_whose_requests_hide_the_rules(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    world.write_night_sessions(tmp_path / "claude-home", project, 1)
    result = harvest(source="claude", scope="project", project=project, claude_home=tmp_path / "claude-home",
                     lookback_hours=0, now=world.night_run_time(1))
    assert len(result.sessions) == len(world.NIGHTS[0])
    mined = mine_tasks(result.sessions, project=str(project), val_fraction=0.3, test_fraction=0.15)
    with_rules = [task for task in mined.tasks if task.rules and task.judge.checks]
    assert len(with_rules) >= 4  # most corrections become a rule with a deterministic check
    for task in mined.tasks:  # the replayed prompt is the request alone: the corrections are labels
        assert task.request in {c.request for c in world.NIGHTS[0]}


def test_a_night_the_world_does_not_have_is_refused(tmp_path):
    with pytest.raises(ValueError):
        world.write_night_sessions(tmp_path, tmp_path, len(world.NIGHTS) + 1)


# --------------------------------------------------------------------------- the second world


@pytest.mark.parametrize("answer, rule, night, expected", [
    ("Run `uv add pandas`.", "uv", 1, True),
    ("Run `uv pip install numpy`.", "uv", 1, True),
    ("Run `pip install numpy`.", "uv", 1, False),
    ("```python\nimport httpx\nhttpx.get(url)\n```", "httpx", 1, True),
    ("```python\nimport requests\nrequests.get(url)\n```", "httpx", 1, False),
    ("```python\nlogger = logging.getLogger(__name__)\nlogger.info('x')\n```", "logging", 1, True),
    ("```python\nprint('x')\n```", "logging", 1, False),
    ("created_at = datetime.now(timezone.utc)", "utc", 1, True),
    ("created_at = datetime.utcnow()", "utc", 1, False),
    ("Run `black .`.", "formatter", 2, True),
    ("Run `black .`.", "formatter", 3, False),  # the rule changed on night 3
    ("Run `ruff format .`.", "formatter", 3, True),
])
def test_world2_checkers_follow_the_rule_in_force_that_night(answer, rule, night, expected):
    assert world2.checker(rule, night)(answer) is expected


def test_world2_probes_are_held_out_and_cover_every_rule():
    assert len(world2.PROBES) >= 16
    for rule in world2.RULE_NAMES:
        assert sum(probe.rule == rule for probe in world2.PROBES) >= 4
    transcripts = world2.transcript_text().casefold()
    for probe in world2.PROBES:
        assert probe.prompt.casefold() not in transcripts


def test_world2_teaches_each_rule_in_train_sessions_and_the_ways_the_issue_asks_for():
    from skillopt_sleep.mine import assign_split, task_id_for

    def trained(night: list) -> set:
        return {item.rule for item in night if assign_split(task_id_for(item.steps[0].text), 0.3, 0.15) == "train"}

    assert trained(world2.NIGHTS[0]) >= set(world2.RULE_NAMES)  # every rule can be learned on night 1
    assert "formatter" in trained(world2.NIGHTS[2])  # and the changed one on the night it changes
    assert all(sum(item.rule is None for item in night) == 2 for night in world2.NIGHTS)  # noise sessions
    texts = [step.text for night in world2.NIGHTS for item in night for step in item.steps if step.kind == "user"]
    assert "uv." in texts and "we're a uv shop" in texts and "no, not like that." in texts
    assert any(text.startswith("Could you please") for text in texts)
    assert sum(item.rule == "utc" for night in world2.NIGHTS for item in night) == 1  # stated once
    assert any(step.rejected for night in world2.NIGHTS for item in night for step in item.steps)


def test_world2_sessions_refuse_a_tool_as_claude_code_writes_it(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    files = world2.write_night_sessions(tmp_path / "home", project, 2)
    records = [json.loads(line) for line in files[0].read_text("utf-8").splitlines()]
    refused = next(record for record in records if record.get("toolUseResult") == "User rejected tool use")
    assert refused["message"]["content"][0]["is_error"] is True
    assert records[records.index(refused) + 1]["message"]["content"][0]["text"] == world2.INTERRUPT_FOR_TOOL
    assert [r["parentUuid"] for r in records[1:]] == [r["uuid"] for r in records[:-1]]


# --------------------------------------------------------------------------- the third world


@pytest.mark.parametrize("answer, rule, expected", [
    ("```sh\npodman build -t api:1 .\n```", "podman", True),
    ("```sh\ndocker build -t api:1 .\n```", "podman", False),
    ("Run `podman ps` (or `docker ps` elsewhere).", "podman", False),
    ("Run `git push --force-with-lease origin feature/x`.", "force_with_lease", True),
    ("Run `git push --force origin feature/x`.", "force_with_lease", False),
    ("Run `git push -f origin feature/x`, or --force-with-lease.", "force_with_lease", False),
    ("import { it, expect } from 'vitest'", "vitest", True),
    ("const spy = vi.fn()", "vitest", True),
    ("import { it } from '@jest/globals'", "vitest", False),
    ("const total = items.reduce((a, b) => a + b, 0)", "const", True),
    ("var total = 0", "const", False),
    ("const data = await fetch(url).then((r) => r.json())", "fetch", True),
    ("const { data } = await axios.get(url)", "fetch", False),
    ("Run `rg -n deprecated`.", "rg", True),
    ("Run `grep -rn deprecated .`.", "rg", False),
])
def test_world3_checkers_are_deterministic_and_need_both_halves(answer, rule, expected):
    assert world3.CHECKERS[rule](answer) is expected


def test_world3_probes_are_held_out_and_cover_every_rule():
    assert len(world3.PROBES) == 24 and len(world3.perfect_rules()) == len(world3.RULE_NAMES)
    for rule in world3.RULE_NAMES:
        assert sum(probe.rule == rule for probe in world3.PROBES) >= 4
    transcripts = world3.transcript_text().casefold()
    for probe in world3.PROBES:
        assert probe.prompt.casefold() not in transcripts
    requests = [item.steps[0].text for night in world3.NIGHTS for item in night]
    assert len(requests) == len(set(requests)), "a request repeats across nights"


def test_world3_every_corrected_answer_fails_its_rule_and_every_last_answer_passes():
    for night in world3.NIGHTS:
        for item in night:
            if item.rule is None:
                continue
            answers = [step.text for step in item.steps if step.kind == "assistant"]
            assert world3.CHECKERS[item.rule](answers[-1]), answers[-1]
            assert all(not world3.CHECKERS[item.rule](answer) for answer in answers[:-1]), answers


def test_world3_states_its_rules_the_ways_real_users_do_with_a_train_session_on_night_1():
    from skillopt_sleep.mine import assign_split, task_id_for

    first = {item.rule for item in world3.NIGHTS[0]
             if assign_split(task_id_for(item.steps[0].text), 0.3, 0.15) == "train"}
    assert first >= set(world3.RULE_NAMES) - {"const"}  # const is stated in the instruction block beside vitest
    texts = [step.text for night in world3.NIGHTS for item in night for step in item.steps if step.kind == "user"]
    long_requests = [item.steps[0].text for night in world3.NIGHTS for item in night if item.rule == "podman"
                     and 4 <= len(item.steps[0].text.splitlines()) <= 6]
    assert len(long_requests) >= 3 and all("podman" in text for text in long_requests)  # one sentence of many
    assert any(text.startswith("Do NOT") for text in texts) and any("\nDo not " in text for text in texts)
    blocks = [text for text in texts if text.startswith("Instructions:\n")]
    assert len(blocks) >= 4 and all(len(text.split("\n\n")[0].splitlines()) == 4 for text in blocks)  # 3 bullets
    assert any("usa" in text and "axios" in text for text in texts)  # Spanish
    assert sum("from now on" in text for text in texts) == 1
    assert sum(item.rule == "rg" for night in world3.NIGHTS for item in night) == 1  # stated once
    assert all(sum(item.rule is None for item in night) == 2 for night in world3.NIGHTS)


def test_world3_writes_claude_code_sessions_and_refuses_a_night_it_does_not_have(tmp_path):
    files = world3.write_night_sessions(tmp_path / "home", tmp_path, 1)
    assert len(files) == len(world3.NIGHTS[0])
    records = [json.loads(line) for line in files[2].read_text("utf-8").splitlines()]
    assert records[0]["message"]["content"].startswith("Instructions:\n- Tests use vitest, never jest.")
    assert [r["parentUuid"] for r in records[1:]] == [r["uuid"] for r in records[:-1]]
    with pytest.raises(ValueError):
        world3.write_night_sessions(tmp_path, tmp_path, len(world3.NIGHTS) + 1)
