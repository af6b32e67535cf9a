"""The quick commands import only what they use (issue 13, item 6): which modules are loaded, not how fast.

Each command runs in a fresh interpreter through the console script's ``main``; the modules it left in
``sys.modules`` are compared with the heavy ones a night needs. Timing lives in ``benchmarks/startup.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

#: What a night, a report or a backend needs, and nothing of --version, --help, status or config show does.
HEAVY = [
    "openai",
    "matplotlib",
    "detect_secrets",
    "apscheduler",
    "skillopt_sleep.engine.step",
    "skillopt_sleep.engine.judges",
    "skillopt_sleep.backends.base",
    "skillopt_sleep.backends.openai_compat",
    "skillopt_sleep.backends.local",
    "skillopt_sleep.night",
    "skillopt_sleep.harvest.base",
    "skillopt_sleep.report",
    "skillopt_sleep.trainer",
    "skillopt_sleep.redact",
]

RUN = """
import json, sys
out, args = sys.argv[1], json.loads(sys.argv[2])
sys.argv = ["skillopt-sleep", *args]
from skillopt_sleep.cli import main
try:
    main()
    code = 0
except SystemExit as exc:
    code = exc.code or 0
with open(out, "w") as handle:
    json.dump({"code": code, "modules": sorted(sys.modules)}, handle)
"""


def loaded_modules(args: list[str], tmp_path: Path) -> set[str]:
    """Run ``skillopt-sleep ARGS`` in a new interpreter (in a scratch project) and return its ``sys.modules``."""
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    out = tmp_path / "modules.json"
    env = dict(os.environ, SKILLOPT_SLEEP_CRONTAB=str(tmp_path / "no-crontab"))
    done = subprocess.run([sys.executable, "-c", RUN, str(out), json.dumps(args)], cwd=project, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert result["code"] == 0, done.stderr
    return set(result["modules"])


def heavy_in(modules: set[str], extra: tuple[str, ...] = ()) -> list[str]:
    return sorted(name for name in [*HEAVY, *extra] if name in modules)


def test_version_imports_neither_typer_nor_the_library(tmp_path):
    modules = loaded_modules(["--version"], tmp_path)
    assert heavy_in(modules, ("typer", "click", "rich", "pydantic", "skillopt_sleep.cli.app")) == []


def test_version_through_the_typer_app_stays_light(tmp_path):
    modules = loaded_modules(["--verbose", "--version"], tmp_path)  # not the fast path: the root callback answers
    assert "typer" in modules
    assert heavy_in(modules, ("rich", "pydantic", "skillopt_sleep.config")) == []


@pytest.mark.parametrize("args", [["--help"], ["status", "--help"], ["config", "--help"]])
def test_help_needs_no_rich_and_no_library(tmp_path, args):
    modules = loaded_modules(args, tmp_path)
    assert heavy_in(modules, ("rich", "skillopt_sleep.config", "skillopt_sleep.models")) == []


def test_status_reads_state_without_the_models(tmp_path):
    modules = loaded_modules(["status"], tmp_path)
    assert "skillopt_sleep.schedule.status" in modules
    # state.json is read as plain JSON: the state model would import every pydantic model of the package
    assert heavy_in(modules, ("skillopt_sleep.state", "skillopt_sleep.models", "skillopt_sleep.config", "rich")) == []


def test_config_show_loads_the_config_only(tmp_path):
    modules = loaded_modules(["config", "show"], tmp_path)
    assert "skillopt_sleep.config" in modules
    assert heavy_in(modules, ("rich", "tomlkit", "skillopt_sleep.models")) == []
