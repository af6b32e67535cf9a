"""The trainer (skillopt_sleep/trainer.py): config validation, learning on QAEnv with the mock simulator, the gate
blocking a harmful edit, the selection cache, the two-client router, resume after an interruption, the edit budget
schedule over steps, prompt overrides, the night's decision on the same tasks, and the README's library example.

The QA world: each group of questions is answered by one tool (pnpm installs, pytest tests, ruff lints). An item
carries the rule its asker stated ("Use pnpm to install the dependencies"); the mock optimizer proposes a failing
item's rule as an edit, and the mock target follows a skill line that shares a word with the question. So a group's
items fail until its rule is in the skill document and pass after.
"""

from __future__ import annotations

import json
import re
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from pydantic import ValidationError

from skillopt_sleep import prompts
from skillopt_sleep.backends.mock import MockBackend
from skillopt_sleep.config import SleepConfig
from skillopt_sleep.envs import QAEnv, TaskFileEnv
from skillopt_sleep.errors import ConfigError
from skillopt_sleep.night import run_night
from skillopt_sleep.trainer import RoleRouterBackend, SkillOptConfig, SkillOptTrainer

REPO = Path(__file__).resolve().parents[2]
GROUPS = [
    ("pnpm", "Use pnpm to install the dependencies", "Which tool should install the dependencies of service {}?"),
    ("pytest", "Use pytest to run the tests", "Which command should run the tests of module {}?"),
    ("ruff", "Use ruff to lint the code", "Which tool should lint the code of package {}?"),
]
INITIAL = "# Project tools\n\nAnswer with the tool's name.\n"


def items(split: str, per_group: int, *, rules: bool = True) -> list[dict]:
    out = []
    for answer, rule, question in GROUPS:
        for number in range(per_group):
            item = {"id": f"{split}-{answer}-{number}", "question": question.format(f"{split}{number}"),
                    "answers": [answer]}
            if rules:
                item["rules"] = [rule]
            out.append(item)
    return out


def qa_env(**overrides) -> QAEnv:
    values = dict(train_items=items("train", 2), val_items=items("val", 2, rules=False),
                  test_items=items("test", 1, rules=False), initial_skill=INITIAL, match="contains")
    return QAEnv(**{**values, **overrides})


def trainer(tmp_path: Path, *, env=None, backend=None, name: str = "run", **config) -> SkillOptTrainer:
    settings = SkillOptConfig(**{"out_root": tmp_path / name, "batch_size": 2, "gate_samples": 1, **config})
    return SkillOptTrainer(config=settings, env=env or qa_env(), optimizer_client=backend or MockBackend())


def edits_reply(*contents: str) -> str:
    return json.dumps({"edits": [{"target": "skill", "op": "append", "anchor": None, "content": content,
                                  "rationale": "r", "evidence": []} for content in contents]})


def history(root: Path) -> list[dict]:
    data = json.loads((root / "history.json").read_text())
    assert data["format"] == "skillopt-sleep-train-history/1"
    return data["steps"]


# --------------------------------------------------------------------------- config


@pytest.mark.parametrize(("field", "value"), [
    ("num_epochs", 0), ("batch_size", 0), ("minibatch_size", 13), ("edit_budget", 0), ("lr_scheduler", "step"),
    ("gate_metric", "f1"), ("gate_rule", "lenient"), ("gate_mixed_weight", 1.5), ("workers", 0),
    ("merge_batch_size", 1), ("unknown_field", 1),
])
def test_an_invalid_config_value_raises_an_error_that_names_the_field(field, value):
    with pytest.raises(ValidationError, match=field):
        SkillOptConfig(**{field: value})


def test_the_selection_split_must_be_held_out_from_training():
    with pytest.raises(ValidationError, match="selection_split"):
        SkillOptConfig(selection_split="train")
    with pytest.raises(ValidationError, match="test_split"):
        SkillOptConfig(selection_split="val", test_split="val")


def test_assigning_an_invalid_value_is_refused_too():
    config = SkillOptConfig()
    with pytest.raises(ValidationError, match="num_epochs"):
        config.num_epochs = -1


def test_from_config_takes_the_nights_step_and_gate_settings():
    night = SleepConfig(edit_budget=5, edit_budget_schedule="cosine", gate_rule="strict", gate_samples=2, seed=9)
    config = SkillOptConfig.from_config(night, num_epochs=3)
    assert (config.edit_budget, config.edit_budget_schedule, config.gate_rule, config.gate_samples, config.seed,
            config.num_epochs) == (5, "cosine", "strict", 2, 9, 3)


def test_the_trainer_and_the_night_share_every_step_and_gate_default():
    night, run = SleepConfig(), SkillOptConfig()
    shared = SkillOptConfig.model_fields.keys() & SleepConfig.model_fields.keys()
    assert {"edit_budget_schedule", "gate_samples", "gate_rule", "minibatch_size", "workers", "seed"} <= shared
    assert {name: getattr(run, name) for name in shared} == {name: getattr(night, name) for name in shared}


def test_lr_scheduler_the_old_name_of_edit_budget_schedule_is_still_accepted():
    with pytest.warns(DeprecationWarning, match="lr_scheduler"):
        config = SkillOptConfig(lr_scheduler="cosine")
    assert config.edit_budget_schedule == "cosine"
    assert "lr_scheduler" not in config.model_dump()


# --------------------------------------------------------------------------- learning and the gate


def test_training_on_qa_learns_the_users_rules_and_improves_the_held_out_scores(tmp_path):
    run = trainer(tmp_path, num_epochs=2)
    summary = run.train()
    root = tmp_path / "run"
    # Before: the mock target only restates the question, so no val or test item names its tool.
    assert summary["baseline_selection_score"] == 0.0 and summary["test"]["baseline"]["hard"] == 0.0
    # After: every group's rule was learned from the train items, so every held-out item passes.
    assert summary["best_selection_score"] == 1.0
    assert summary["test"]["best"] == {"hard": 1.0, "soft": 1.0, "gate": 1.0, "n": 3}
    best = (root / "best_skill.md").read_text()
    for _answer, rule, _question in GROUPS:
        assert rule in best
    assert best.startswith(INITIAL.rstrip())  # the user's text outside the managed block is kept
    steps = history(root)
    assert len(steps) == summary["steps_total"] == 2 * 3  # 2 epochs x ceil(6 train items / batch 2)
    assert summary["best_step"] == max(step["step"] for step in steps if step["new_best"])
    # every accepted step made a new version of the skill document
    versions = sorted(path.name for path in (root / "skills").iterdir())
    assert len(versions) == 1 + summary["accepted_steps"] == summary["skill_versions"]
    assert (root / "current_skill.md").read_text() == (root / "skills" / versions[-1]).read_text()


def test_every_step_leaves_its_artifacts_with_a_format_version(tmp_path):
    trainer(tmp_path).train()
    root = tmp_path / "run"
    for name in ("config.json", "summary.json", "trainer_state.json"):
        assert json.loads((root / name).read_text())["format"].startswith("skillopt-sleep-train-")
    step = root / "steps" / "step_0001"
    for name in ("rollouts.json", "patches_raw.json", "patches_merged.json", "patches_ranked.json", "edits.json",
                 "selection.json", "step.json"):
        data = json.loads((step / name).read_text())
        assert data["format"] == "skillopt-sleep-train-step/1" and data["step"] == 1
    assert (step / "candidate_skill.md").read_text().startswith(INITIAL.rstrip())
    rollouts = json.loads((step / "rollouts.json").read_text())["results"]
    assert len(rollouts) == 2 and {r["task_id"] for r in rollouts} == set(history(root)[0]["items"])
    assert json.loads((root / "steps" / "step_0000" / "selection.json").read_text())["scores"]["n"] == 6


def test_the_gate_blocks_a_harmful_edit_and_the_best_skill_stays_the_initial_one(tmp_path):
    # The initial skill already holds the pnpm rule, so the pnpm val items pass. The optimizer proposes
    # "Never mention pnpm": the mock target then drops the word, and the items it passed regress.
    good = INITIAL + "\nUse pnpm to install the dependencies\n"
    pnpm_only = [item for item in items("val", 2, rules=False) if "pnpm" in item["answers"]]
    env = qa_env(initial_skill=good, val_items=pnpm_only, test_items=[])
    backend = MockBackend(scripted={"reflect": [edits_reply("Never mention pnpm")]})
    summary = trainer(tmp_path, env=env, backend=backend, batch_size=6, propose_user_rules=False).train()
    [step] = history(tmp_path / "run")
    assert step["edits"]["applied"] == ["- Never mention pnpm"] and step["changed"]
    assert step["verdict"] == "reject" and step["clause"] == "regression"
    assert step["selection"]["candidate"]["hard"] == 0.0 and step["selection"]["baseline"]["hard"] == 1.0
    assert (tmp_path / "run" / "best_skill.md").read_text() == good
    assert (tmp_path / "run" / "current_skill.md").read_text() == good
    assert summary["best_step"] == 0 and summary["accepted_steps"] == 0 and summary["test"] is None


def test_an_identical_candidate_is_never_evaluated_twice(tmp_path):
    # Two epochs of one step each; both steps propose the same harmful edit, which the gate rejects, so the second
    # step rolls out the same skill on the same items and tests the same candidate: every target call is cached.
    good = INITIAL + "\nUse pnpm to install the dependencies\n"
    pnpm_only = [item for item in items("val", 2, rules=False) if "pnpm" in item["answers"]]
    env = qa_env(initial_skill=good, val_items=pnpm_only, test_items=[])
    backend = MockBackend(scripted={"reflect": [edits_reply("Never mention pnpm")] * 2})
    calls_after_step: list[int] = []

    def count(event: dict) -> None:
        if event["event"] == "step_end":
            calls_after_step.append(backend.calls_by_role.get("target", 0))

    run = trainer(tmp_path, env=env, backend=backend, batch_size=6, num_epochs=2, propose_user_rules=False)
    run.on_event = count
    run.train()
    first, second = history(tmp_path / "run")
    assert first["candidate_sha256"] == second["candidate_sha256"] and second["verdict"] == "reject"
    # step 1: 6 train rollouts + 2 candidate val rollouts (the baseline val came from step 0's evaluation)
    assert calls_after_step[0] == 2 + 6 + 2
    assert calls_after_step[1] == calls_after_step[0]  # step 2 made no target call at all
    assert backend.calls_by_kind["reflect"] == 2  # the optimizer still reflected on the second batch
    state = json.loads((tmp_path / "run" / "trainer_state.json").read_text())
    assert state["selection_scores"][first["candidate_sha256"]]["hard"] == 0.0


def test_target_calls_go_to_the_target_client_and_the_others_to_the_optimizer_client(tmp_path):
    optimizer, target = MockBackend(), MockBackend()
    config = SkillOptConfig(out_root=tmp_path / "run", batch_size=2, gate_samples=1)
    SkillOptTrainer(config=config, env=qa_env(), optimizer_client=optimizer, target_client=target).train()
    assert set(target.calls_by_role) == {"target"} and target.calls > 0
    assert set(optimizer.calls_by_role) == {"optimizer"} and optimizer.calls > 0
    router = RoleRouterBackend(optimizer, target)
    assert router.client_for("target") is target and router.client_for("judge") is optimizer
    record = json.loads((tmp_path / "run" / "config.json").read_text())["clients"]
    assert record == {"optimizer": {"backend": "mock", "model": "mock-optimizer"},
                      "target": {"backend": "mock", "model": "mock-target"}}


def test_the_linear_schedule_lowers_the_edit_budget_step_by_step(tmp_path):
    trainer(tmp_path, edit_budget_schedule="linear", edit_budget=3, min_edit_budget=1).train()
    # 3 steps, horizon 2: 3 - 2 * (n / 2) for n = 0, 1, 2
    assert [step["edit_budget"] for step in history(tmp_path / "run")] == [3, 2, 1]


def test_train_refuses_an_env_without_held_out_items(tmp_path):
    with pytest.raises(ConfigError, match="no 'val' items"):
        trainer(tmp_path, env=qa_env(val_items=[])).train()


# --------------------------------------------------------------------------- resume


class Interrupt(Exception):
    pass


def stop_after(step: int):
    def on_event(event: dict) -> None:
        if event["event"] == "step_end" and event["step"] == step:
            raise Interrupt(f"stopped after step {step}")
    return on_event


def test_a_run_interrupted_after_step_two_and_resumed_equals_an_uninterrupted_run(tmp_path):
    whole = trainer(tmp_path, name="whole", num_epochs=2).train()
    interrupted = trainer(tmp_path, name="resumed", num_epochs=2)
    interrupted.on_event = stop_after(2)
    with pytest.raises(Interrupt):
        interrupted.train()
    assert len(history(tmp_path / "resumed")) == 2
    backend = MockBackend()
    resumed = trainer(tmp_path, name="resumed", num_epochs=2, backend=backend).train()
    assert resumed == whole
    for name in ("best_skill.md", "current_skill.md", "history.json", "summary.json"):
        assert (tmp_path / "resumed" / name).read_text() == (tmp_path / "whole" / name).read_text(), name
    # the resumed trainer did not redo steps 1-2: one reflect call for each of steps 3-6
    assert backend.calls_by_kind["reflect"] == 4


def test_resuming_with_other_settings_is_refused_and_names_what_changed(tmp_path):
    trainer(tmp_path).train()
    with pytest.raises(ConfigError, match=r"edit_budget 3 -> 2"):
        trainer(tmp_path, edit_budget=2).train()
    with pytest.raises(ConfigError, match="environment or its items changed"):
        trainer(tmp_path, env=qa_env(test_items=[])).train()


def test_a_run_saved_under_the_old_key_lr_scheduler_resumes(tmp_path):
    trainer(tmp_path).train()
    config_file = tmp_path / "run" / "config.json"
    record = json.loads(config_file.read_text())
    record["config"]["lr_scheduler"] = record["config"].pop("edit_budget_schedule")
    config_file.write_text(json.dumps(record))
    backend = MockBackend()
    trainer(tmp_path, backend=backend).train()
    assert backend.calls == 0


def test_a_finished_run_run_again_changes_nothing_and_returns_the_same_summary(tmp_path):
    first = trainer(tmp_path).train()
    before = (tmp_path / "run" / "history.json").read_text()
    backend = MockBackend()
    again = trainer(tmp_path, backend=backend).train()
    assert again == first and (tmp_path / "run" / "history.json").read_text() == before
    assert backend.calls == 0  # nothing left to do, and the test scores come from the cache


# --------------------------------------------------------------------------- prompt overrides


def test_prompt_overrides_reach_the_optimizer_only_while_training(tmp_path):
    shipped = prompts.load_prompt("reflect")
    custom = "OVERRIDDEN REFLECT PROMPT\n" + shipped
    backend = MockBackend()
    config = SkillOptConfig(out_root=tmp_path / "run", batch_size=6, gate_samples=1)
    SkillOptTrainer(config=config, env=qa_env(), optimizer_client=backend,
                    prompt_overrides={"reflect": custom}).train()
    reflect = [r for r in backend.requests if MockBackend.prompt_kind(r) == "reflect"]
    assert reflect and all("OVERRIDDEN REFLECT PROMPT" in r.messages[0].content for r in reflect)
    assert prompts.load_prompt("reflect") == shipped


def test_an_unknown_prompt_override_name_is_refused():
    with pytest.raises(ConfigError, match="unknown prompt template 'reflex'"):
        SkillOptTrainer(config=SkillOptConfig(), env=qa_env(), optimizer_client=MockBackend(),
                        prompt_overrides={"reflex": "x"})


# --------------------------------------------------------------------------- the night decides the same


CORRECTION = "no, we use pnpm in this repo, never npm"
REQUESTS = ["install the deps for this repo", "add lodash to this repo", "run the tests of this repo",
            "update the dependencies of this repo", "start the dev server of this repo",
            "remove the unused left-pad package from this repo", "build this repo for production",
            "audit this repo for vulnerable dependencies"]


def write_corrected_sessions(claude_home: Path, project: Path) -> None:
    """Claude Code 2.1 transcripts: each request answered with npm, then corrected by the user."""
    folder = claude_home / "projects" / str(project).replace("/", "-")
    folder.mkdir(parents=True)
    moment = datetime.now(timezone.utc) - timedelta(hours=2)
    for number, request in enumerate(REQUESTS):
        session, parent, lines = str(uuid.UUID(int=number + 1)), None, []
        turns = [("user", request), ("assistant", "Run `npm install`."), ("user", CORRECTION),
                 ("assistant", "Understood, pnpm.")]
        for index, (role, text) in enumerate(turns):
            moment += timedelta(seconds=30)
            uid = str(uuid.UUID(int=(number + 1) * 100 + index))
            message = ({"role": "user", "content": text} if role == "user" else
                       {"role": "assistant", "id": f"msg_{uid[:8]}", "model": "claude-sonnet",
                        "content": [{"type": "text", "text": text}], "stop_reason": "end_turn"})
            lines.append(json.dumps({"parentUuid": parent, "isSidechain": False, "userType": "external",
                                     "cwd": str(project), "sessionId": session, "version": "2.1.80", "type": role,
                                     "uuid": uid, "entrypoint": "cli",
                                     "timestamp": moment.isoformat().replace("+00:00", "Z"), "message": message}))
            parent = uid
        (folder / f"{session}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_the_trainer_and_the_night_decide_the_same_on_the_nights_tasks(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    write_corrected_sessions(tmp_path / "claude", project)
    config = SleepConfig(backend="mock", lookback_hours=0, claude_home=tmp_path / "claude", evolve_memory=False)
    night = run_night(config, project=project, state_root=tmp_path / "state")
    diagnostics = night.diagnostics
    assert diagnostics.status == "accepted"  # the world is built so that there is something to decide

    env = TaskFileEnv(night.night_dir / "tasks.jsonl")
    train_count = len(env.get_items("train"))
    settings = SkillOptConfig.from_config(config, out_root=tmp_path / "run", batch_size=train_count,
                                       shuffle=False)
    SkillOptTrainer(config=settings, env=env, optimizer_client=MockBackend()).train()
    [step] = history(tmp_path / "run")
    assert step["verdict"] == diagnostics.gate.verdict
    assert step["edits"]["applied"] == [edit.content for edit in diagnostics.edits if edit.status == "applied"]
    assert step["selection"]["baseline"] == diagnostics.gate.baseline.model_dump()
    assert step["selection"]["candidate"] == diagnostics.gate.candidate.model_dump()
    proposed = night.night_dir / "proposed" / "SKILL.md"
    assert (tmp_path / "run" / "best_skill.md").read_text() == proposed.read_text()


# --------------------------------------------------------------------------- the README's example


def readme_library_example() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Library", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)


def test_the_readme_library_example_runs_with_the_mock_backend(tmp_path, monkeypatch, capsys):
    code = readme_library_example()
    assert 'get_backend("local")' in code  # the documented example uses the bundled local model
    monkeypatch.chdir(tmp_path)
    exec(compile(code.replace('get_backend("local")', 'get_backend("mock")'), "README.md", "exec"), {})
    summary = json.loads((tmp_path / "runs" / "qa-demo" / "summary.json").read_text())
    assert summary["steps_completed"] == summary["steps_total"] >= 1
    assert summary["test"] is not None and "best step" in capsys.readouterr().out
