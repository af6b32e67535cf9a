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
    assert "examples/claude-home" in first and "examples/codex-home" in first
    assert "--backend" not in first  # the embedded default is chosen by backend = auto
    assert "pytest" in second


def test_ci_runs_the_readmes_test_command_verbatim():
    _, test_command = readme_commands()
    assert test_command.strip() in (REPO / ".ci" / "run").read_text()


def test_the_example_homes_the_first_command_reads_exist():
    assert any((REPO / "examples" / "claude-home" / "projects").rglob("*.jsonl"))
    assert any((REPO / "examples" / "codex-home" / "sessions").rglob("rollout-*.jsonl"))
