"""A whole night through the ``openai`` backend against a REAL OpenAI-compatible server.

The server is llama-cpp-python's ``python -m llama_cpp.server`` serving the bundled SmolLM2-135M GGUF on
127.0.0.1 (the session-scoped ``llama_server`` fixture in ``conftest.py``). One night runs once per module on a
temporary project with five corrected Claude Code sessions; the tests then check pipeline facts, never the
tiny model's quality: calls per role, token usage, diagnostics consistent with the gate decision, nothing
written to the project without ``--apply``, and the structured-output fallback (this server rejects
``response_format: json_schema`` but grammar-constrains ``json_object`` with a schema).

To keep the file fast on 2 cores: five tasks, no LLM miner, an edit budget of 1, one gate sample, and replies
of the target capped at 48 tokens (the default of ``replay_tasks``' ``max_tokens`` is lowered for the module).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skillopt_sleep import paths as sleep_paths
from skillopt_sleep.backends import STRUCTURED_CACHE_FILE
from skillopt_sleep.backends.openai_compat import OpenAIBackend
from skillopt_sleep.config import SleepConfig
from skillopt_sleep.engine.replay import replay_tasks
from skillopt_sleep.night import run_night
from skillopt_sleep.state import ProjectPaths

pytestmark = pytest.mark.llama

ORIGINAL_MEMORY = "# Shop app\n\nHand-written notes: deploy after review.\n"
CONVERSATIONS = [
    ("install the deps for this repo", "Run `npm install`.", "no, we use pnpm in this repo, never npm"),
    ("add lodash to this repo", "Run `npm install lodash`.", "no, use pnpm here, not npm"),
    ("run the tests of this repo", "Run `npm test`.", "wrong: we use pnpm, never npm"),
    ("start the dev server of this repo", "Run `npm run dev`.", "no, pnpm please, not npm"),
    ("build this repo for production", "Run `npm run build`.", "no, we use pnpm in this repo, never npm"),
]
TARGET_MAX_TOKENS = 48


class Night:
    def __init__(self, result, config: SleepConfig, project: Path, project_paths: ProjectPaths, state_dir: Path):
        self.result = result
        self.diagnostics = result.diagnostics
        self.config = config
        self.project = project
        self.paths = project_paths
        self.state_dir = state_dir


@pytest.fixture(scope="module")
def night(llama_server, write_sessions, tmp_path_factory) -> Night:
    base = tmp_path_factory.mktemp("night-on-llama-server")
    project = base / "project"
    project.mkdir()
    (project / "CLAUDE.md").write_text(ORIGINAL_MEMORY, encoding="utf-8")
    claude_home = base / "claude"
    write_sessions(claude_home, project, CONVERSATIONS)
    with pytest.MonkeyPatch.context() as patch:  # the autouse hermetic env is per test; this fixture is per module
        patch.setenv("HOME", str(base / "home"))
        patch.setenv("SKILLOPT_SLEEP_HOME", str(base / "skillopt"))
        for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "CLAUDE_CONFIG_DIR", "CODEX_HOME",
                     "SKILLOPT_SLEEP_STATE_DIR", "SKILLOPT_SLEEP_CONFIG", "SKILLOPT_SLEEP_DATA_DIR"):
            patch.delenv(name, raising=False)
        patch.setitem(replay_tasks.__kwdefaults__, "max_tokens", TARGET_MAX_TOKENS)
        config = SleepConfig(
            backend="openai", base_url=llama_server.base_url, target_model=llama_server.model,
            optimizer_model=llama_server.model, workers=2, source="claude", scope="project",
            claude_home=claude_home, lookback_hours=0, llm_mine=False, edit_budget=1, gate_samples=1,
            val_fraction=0.4, test_fraction=0.0, max_retries=1, request_timeout_s=120,
        )
        state_root = base / "skillopt" / "state"
        result = run_night(config, project=project, state_root=state_root)
        return Night(result, config, project, ProjectPaths(project, state_root), sleep_paths.state_dir())


def test_the_night_completes_against_the_real_server_with_train_and_val_tasks(night, llama_server):
    diagnostics = night.diagnostics
    assert diagnostics.status in ("accepted", "rejected"), (diagnostics.summary, diagnostics.failure)
    assert night.result.exit_code == 0
    assert diagnostics.tasks["train"] >= 1 and diagnostics.tasks["val"] >= 1, diagnostics.tasks
    assert diagnostics.backend["name"] == "openai"
    assert diagnostics.backend["models"]["target"] == llama_server.model
    answered = [r for r in diagnostics.train_results if r.error is None]
    assert answered and all(r.response.strip() for r in answered)


def test_target_calls_are_the_replays_the_diagnostics_show(night):
    diagnostics = night.diagnostics
    gate = diagnostics.gate
    # train replays, then the gate's val replays of both sides (hard-evidence val tasks only), then the replays the
    # gate's follow-ups report: the users' rules on their own tasks, the support test and gate repair; and the
    # wording choice's replays of each stated rule's own tasks (engine/wording.py, mining["wording"])
    shown = [*diagnostics.train_results, *(r for c in gate.per_task for r in [*c.baseline, *c.candidate])]
    extra = sum((gate.details.get(name) or {}).get("calls", 0) for name in ("stated_rules", "support", "repair"))
    extra += (diagnostics.mining.get("wording") or {}).get("calls", 0)
    assert diagnostics.cost["target"].calls == sum(1 for r in shown if not r.cached) + extra
    assert {c.task_id for c in gate.per_task} <= {c.task_id for c in gate.per_task if c.origin == "tonight"}
    assert len(gate.per_task) <= diagnostics.tasks["val_gated"]
    assert diagnostics.cost["optimizer"].calls >= 1
    assert "miner" not in diagnostics.cost  # llm_mine is off


def test_every_role_that_made_calls_recorded_token_usage_and_seconds(night):
    for role, cost in night.diagnostics.cost.items():
        assert cost.calls > 0, role
        assert cost.prompt_tokens > 0, role
        assert cost.completion_tokens > 0, role
        assert cost.seconds > 0, role
    target = night.diagnostics.cost["target"]
    assert target.completion_tokens <= target.calls * TARGET_MAX_TOKENS


def test_status_proposal_and_gate_verdict_agree(night):
    diagnostics = night.diagnostics
    gate = diagnostics.gate
    assert gate is not None
    accepted = gate.verdict in ("accept", "accept_new_best")
    assert (diagnostics.status == "accepted") == accepted
    night_dir = night.result.night_dir
    assert (night_dir / "proposed").exists() == accepted
    assert bool(diagnostics.proposed) == accepted
    saved = json.loads((night_dir / "diagnostics.json").read_text(encoding="utf-8"))
    assert saved["status"] == diagnostics.status and saved["gate"]["verdict"] == gate.verdict


def test_the_project_memory_is_untouched_without_apply(night):
    assert (night.project / "CLAUDE.md").read_text(encoding="utf-8") == ORIGINAL_MEMORY
    assert sorted(p.name for p in night.project.iterdir()) == ["CLAUDE.md"]
    assert night.diagnostics.applied == []


def test_the_backend_falls_back_from_json_schema_to_json_object_on_this_server(night, llama_server):
    # The night's backend remembered, per endpoint and model, the first structured-output format the server
    # accepted; a fresh backend reads that memory from the state dir.
    cache_path = night.state_dir / STRUCTURED_CACHE_FILE
    assert cache_path.is_file()
    backend = OpenAIBackend(base_url=llama_server.base_url, target_model=llama_server.model,
                            optimizer_model=llama_server.model, structured_cache_path=cache_path)
    assert backend.structured_mode(llama_server.model) == "json_object"
