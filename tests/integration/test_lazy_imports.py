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
    "skillopt_sleep.harvest.read_plan",
    "skillopt_sleep.review.report",
    "skillopt_sleep.trainer",
    "skillopt_sleep.redaction.redact",
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
    assert heavy_in(modules, ("rich", "tomlkit", "skillopt_sleep.models")) == []  # tomli_w writes its TOML


def test_config_show_json_needs_no_toml_writer(tmp_path):
    modules = loaded_modules(["config", "show", "--json"], tmp_path)
    assert heavy_in(modules, ("rich", "tomlkit", "tomli_w", "skillopt_sleep.models")) == []


@pytest.mark.parametrize("args", [["status"], ["status", "--json"], ["config", "show"], ["config", "show", "--json"]])
def test_the_fast_commands_do_not_import_typer(tmp_path, args):
    modules = loaded_modules(args, tmp_path)
    assert heavy_in(modules, ("typer", "skillopt_sleep.cli.app", "rich")) == []


# --------------------------------------------------------------------------- the fast path prints what typer prints


def _cli(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "skillopt_sleep", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.fixture
def quiet_env(tmp_path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "SKILLOPT_SLEEP_"))}
    env.update(HOME=str(tmp_path / "home"), SKILLOPT_SLEEP_HOME=str(tmp_path / "sleep-home"),
               SKILLOPT_SLEEP_CRONTAB=str(tmp_path / "no-crontab"))
    return env


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_status_on_the_fast_path_prints_what_the_typer_command_prints(tmp_path, quiet_env, json_flag):
    project = tmp_path / "project"
    project.mkdir()
    fast = _cli(["status", *json_flag], quiet_env, project)
    typed = _cli(["status", "--project", str(project), *json_flag], quiet_env, project)  # not FAST: typer answers
    assert fast.returncode == typed.returncode == 0, (fast.stderr, typed.stderr)
    assert fast.stdout == typed.stdout
    assert ('"project":' if json_flag else "project: ") in fast.stdout


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_config_show_on_the_fast_path_prints_what_the_typer_command_prints(tmp_path, quiet_env, json_flag):
    config = tmp_path / "config.toml"
    config.write_text('gate_mode = "off"\napi_key = "sk-do-not-print-0123456789"\n')
    fast = _cli(["config", "show", *json_flag], {**quiet_env, "SKILLOPT_SLEEP_CONFIG": str(config)}, tmp_path)
    typed = _cli(["config", "show", "--config", str(config), *json_flag], quiet_env, tmp_path)
    assert fast.returncode == typed.returncode == 0, (fast.stderr, typed.stderr)
    assert fast.stdout == typed.stdout
    assert "'off'" in fast.stdout or '"off"' in fast.stdout
    assert "sk-do-not-print" not in fast.stdout


def test_a_bad_config_on_the_fast_path_is_reported_by_the_typer_app(tmp_path, quiet_env):
    config = tmp_path / "config.toml"
    config.write_text("gate_mode = 'sideways'\n")
    done = _cli(["config", "show"], {**quiet_env, "SKILLOPT_SLEEP_CONFIG": str(config)}, tmp_path)
    assert done.returncode == 1 and done.stdout == ""
    assert "gate_mode" in done.stderr and str(config) in done.stderr  # names the file and the key, once
    assert done.stderr.count("gate_mode") == 1
