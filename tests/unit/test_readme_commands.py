"""The README's two commands stay what CI and a newcomer run."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def readme_commands() -> list[str]:
    section = (REPO / "README.md").read_text().split("## The two commands", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.+?)\n```", section, flags=re.S)


def test_the_readme_has_exactly_two_commands_and_the_first_runs_a_night_on_the_embedded_model():
    first, second = readme_commands()
    assert "pip install -e '.[local]'" in first and "skillopt-sleep run-now" in first
    assert "--claude-home examples/demo-home" in first and "--source claude" in first  # never the user's ~/.codex
    assert "--backend" not in first  # the embedded default is chosen by backend = auto
    assert "pytest" in second


def test_ci_runs_the_readmes_test_command_verbatim():
    _, test_command = readme_commands()
    assert test_command.strip() in (REPO / ".ci" / "run").read_text()


def test_the_example_homes_the_first_command_reads_exist():
    assert any((REPO / "examples" / "demo-home" / "projects").rglob("*.jsonl"))
    assert any((REPO / "examples" / "claude-home" / "projects").rglob("*.jsonl"))
    assert any((REPO / "examples" / "codex-home" / "sessions").rglob("rollout-*.jsonl"))


def test_the_demo_history_is_what_its_generator_writes(tmp_path):
    import subprocess
    import sys

    subprocess.run([sys.executable, str(REPO / "benchmarks" / "demo_history.py"), "--out", str(tmp_path)], check=True,
                   capture_output=True)
    committed = REPO / "examples" / "demo-home"
    written = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*.jsonl"))
    assert written == sorted(p.relative_to(committed) for p in committed.rglob("*.jsonl"))
    assert all((tmp_path / name).read_bytes() == (committed / name).read_bytes() for name in written)


def test_the_demo_history_teaches_two_lasting_rules_with_held_out_tasks_for_each(tmp_path):
    """README command 1's history: both rules are read as lasting and validated, and the split leaves val tasks
    (the gate's held-out evidence) for each rule. Mining is deterministic: no model involved."""
    from skillopt_sleep.config import SleepConfig
    from skillopt_sleep.mine.preview import preview_harvest

    config = SleepConfig(scope="all", lookback_hours=0, source="claude", claude_home=REPO / "examples" / "demo-home")
    preview = preview_harvest(config, project=tmp_path)
    rules = {rule.text: rule for task in preview.tasks for rule in task.rules}
    assert {"we use pnpm in this repo, never npm", "dates are ISO here, YYYY-MM-DD please"} <= set(rules)
    val = [task for task in preview.tasks if task.split == "val"]
    assert any("pnpm" in " ".join(r.text for r in t.rules) for t in val)
    assert any("ISO" in " ".join(r.text for r in t.rules) for t in val)
