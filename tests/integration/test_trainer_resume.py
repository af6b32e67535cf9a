"""Resume after a real kill: a training process is SIGKILLed (after a completed step, or in the middle of a step's
gate), then run again on the same out_root; the result must equal an uninterrupted run with the same seed, byte for
byte (best_skill.md, current_skill.md, history.json, summary.json).

The process runs the trainer on a QAEnv with the mock simulator (see tests/unit/test_trainer.py for the world): it
learns one rule per group of questions over 2 epochs of 3 steps, so the kill lands between accepted steps.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = r'''
import json, os, signal, sys
from pathlib import Path
from skillopt_sleep.backends.mock import MockBackend
from skillopt_sleep.envs import QAEnv
from skillopt_sleep.trainer import SkillOptConfig, SkillOptTrainer

out_root, kill_event, kill_step = sys.argv[1], sys.argv[2], int(sys.argv[3])
groups = [("pnpm", "Use pnpm to install the dependencies", "Which tool should install the dependencies of service {}?"),
          ("pytest", "Use pytest to run the tests", "Which command should run the tests of module {}?"),
          ("ruff", "Use ruff to lint the code", "Which tool should lint the code of package {}?")]

def items(split, count, rules):
    return [{"id": f"{split}-{answer}-{n}", "question": question.format(f"{split}{n}"), "answers": [answer],
             **({"rules": [rule]} if rules else {})}
            for answer, rule, question in groups for n in range(count)]

env = QAEnv(train_items=items("train", 2, True), val_items=items("val", 2, False),
            test_items=items("test", 1, False), initial_skill="# Project tools\n", match="contains")

def on_event(event):
    if event.get("step") != kill_step:
        return
    if (kill_event == "after_step" and event["event"] == "step_end") or (
            kill_event == "in_gate" and event["event"] == "stage" and event["stage"] == "gate"
            and event["phase"] == "begin"):
        os.kill(os.getpid(), signal.SIGKILL)

config = SkillOptConfig(out_root=out_root, num_epochs=2, batch_size=2, gate_samples=2, workers=2, seed=7)
summary = SkillOptTrainer(config=config, env=env, optimizer_client=MockBackend(), on_event=on_event).train()
print(json.dumps(summary))
'''

COMPARED = ("best_skill.md", "current_skill.md", "history.json", "summary.json")


def train(tmp_path: Path, out_root: Path, kill_event: str = "none", kill_step: int = 0):
    script = tmp_path / "train_script.py"
    script.write_text(SCRIPT, encoding="utf-8")
    return subprocess.run([sys.executable, str(script), str(out_root), kill_event, str(kill_step)],
                          capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parents[2])


@pytest.fixture
def uninterrupted(tmp_path) -> Path:
    root = tmp_path / "whole"
    done = train(tmp_path, root)
    assert done.returncode == 0, done.stderr
    steps = json.loads((root / "history.json").read_text())["steps"]
    assert len(steps) == 6 and sum(step["accepted"] for step in steps) >= 2  # a run worth resuming
    return root


@pytest.mark.parametrize(("kill_event", "kill_step", "steps_kept"), [
    ("after_step", 2, 2),  # killed right after step 2 was committed
    ("in_gate", 3, 2),  # killed in the middle of step 3 (its rollouts and reflection done, not committed)
])
def test_a_training_killed_with_sigkill_resumes_to_the_same_result_as_an_uninterrupted_run(
        tmp_path, uninterrupted, kill_event, kill_step, steps_kept):
    root = tmp_path / "killed"
    killed = train(tmp_path, root, kill_event, kill_step)
    assert killed.returncode == -signal.SIGKILL
    state = json.loads((root / "trainer_state.json").read_text())
    assert state["completed_steps"] == steps_kept
    assert not (root / "summary.json").exists()

    resumed = train(tmp_path, root)
    assert resumed.returncode == 0, resumed.stderr
    for name in COMPARED:
        assert (root / name).read_text() == (uninterrupted / name).read_text(), name
    assert json.loads(resumed.stdout) == json.loads((uninterrupted / "summary.json").read_text())
