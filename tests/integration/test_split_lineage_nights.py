"""Split lineage through ``run_night``: a request trained in one project is never held out in another.

Night 1 runs in project A with ``val_fraction`` 0, so every task trains. Night 2 runs in project B (same state
dir) with ``val_fraction`` 0.3; its first request is night 1's, re-typed with other case and spacing, and its id
hashes to val. The lineage (``archive/lineage.py``) puts it in train and says so in ``diagnostics.mining``.
"""

from __future__ import annotations

import json
import shutil
import uuid

import pytest

import skillopt_sleep.night as night_module
from skillopt_sleep.backends.mock import MockBackend
from skillopt_sleep.backends.select import BackendChoice
from skillopt_sleep.config import SleepConfig
from skillopt_sleep.mine import assign_split, task_id_for
from skillopt_sleep.night import run_night

PNPM = "no, we use pnpm in this repo, never npm"
HELD_OUT = "install the deps for this repo"  # hashes to val at val_fraction 0.3
RETYPED = "  Install the DEPS   for this repo"
TRAIN = ["add lodash to this repo", "how do I run the tests in this repo", "start the dev server of this repo"]


@pytest.fixture
def night_in(tmp_path, write_sessions, monkeypatch):
    monkeypatch.setattr(night_module, "choose_backend",
                        lambda config, sources: BackendChoice(backend=MockBackend(), name="mock", reason="test"))
    claude_home, state_root = tmp_path / "claude", tmp_path / "state"

    def run(name: str, requests: list[str], val_fraction: float):
        project = tmp_path / name
        project.mkdir()
        (project / "CLAUDE.md").write_text("# Web app\n", encoding="utf-8")
        staging = tmp_path / f"staging-{name}"
        folder = write_sessions(staging, project, [(r, "Run `npm install` first.", PNPM) for r in requests])
        target = claude_home / "projects" / folder.name
        target.mkdir(parents=True)
        for path in folder.glob("*.jsonl"):
            fresh = str(uuid.uuid4())
            (target / f"{fresh}.jsonl").write_text(path.read_text().replace(path.stem, fresh))
        shutil.rmtree(staging)
        config = SleepConfig(backend="mock", source="claude", scope="project", claude_home=claude_home,
                             lookback_hours=0, workers=1, val_fraction=val_fraction, test_fraction=0.0,
                             gate_samples=1)
        result = run_night(config, project=project, state_root=state_root)
        tasks = {}
        night_dir = state_root / "projects"
        for line in next(night_dir.glob(f"{name}-*/nights/*/tasks.jsonl")).read_text().splitlines():
            record = json.loads(line)
            tasks[record["id"]] = record["split"]
        return result, tasks

    return run


def test_a_request_trained_in_project_a_is_not_held_out_in_project_b(night_in):
    assert assign_split(task_id_for(RETYPED), 0.3, 0.0) == "val"
    first, first_tasks = night_in("alpha", [HELD_OUT, *TRAIN[:1]], val_fraction=0.0)
    assert first_tasks[task_id_for(HELD_OUT)] == "train"
    assert first.diagnostics.status in ("accepted", "rejected"), first.diagnostics.summary

    second, second_tasks = night_in("beta", [RETYPED, *TRAIN[1:]], val_fraction=0.3)
    assert second_tasks[task_id_for(RETYPED)] == "train"
    assert second.diagnostics.mining["lineage"]["moved_to_train"] == [task_id_for(RETYPED)]
