"""One verdict vocabulary (``verdicts.verdict``) in ``history`` and in the night's one-line summary (run-now)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from typer.testing import CliRunner

from skillopt_sleep.cli.app import app
from skillopt_sleep.fsio import write_json_atomic
from skillopt_sleep.models import Diagnostics, EditRecord, FileChange
from skillopt_sleep.night import _summary
from skillopt_sleep.state import ProjectPaths


def night(night_id: str, status: str, *, state: str = "unchanged", applied_edit: bool = True,
          pending: dict | None = None, failure: dict | None = None) -> Diagnostics:
    return Diagnostics(
        night_id=night_id, status=status, summary="", started_at=datetime(2025, 1, 1, tzinfo=timezone.utc),
        changes=[FileChange(file="CLAUDE.md", kind="memory", state=state, added=["- a rule"] if state != "unchanged"
                            else [])],
        edits=[EditRecord(target="memory", op="append", content="- a rule", status="applied")] if applied_edit else [],
        pending=pending, failure=failure)


def test_the_nights_line_says_the_verdict_not_the_status():
    waiting = night("n1", "rejected", pending={"action": "stored"})
    assert "WAITING: 1 edit(s)" in _summary(waiting) and "REJECTED" not in _summary(waiting)
    assert "REJECTED: 1 edit(s)" in _summary(night("n2", "rejected"))
    assert "LEARNED: 1 edit(s)" in _summary(night("n3", "accepted", state="staged"))
    assert "KEPT: 0 edit(s)" in _summary(night("n4", "accepted", applied_edit=False))  # accepted, nothing changed
    assert "KEPT: no new sessions" in _summary(night("n5", "no_sessions"))
    failed = night("n6", "backend_error", failure={"role": "target", "reason": "401", "fix": "check the key"})
    assert "FAILED: backend error (target via" in _summary(failed) and "check the key" in _summary(failed)


def test_history_shows_each_adopted_nights_verdict(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    paths = ProjectPaths(project.resolve())
    paths.root.mkdir(parents=True)
    records = [{"night_id": night_id, "status": "adopted", "adopted_at": "2025-01-02T03:00:00+00:00",
                "documents": [{"kind": "memory", "target": "CLAUDE.md", "file": "CLAUDE.md", "existed_before": True,
                               "sha256_after": "0" * 64}]} for night_id in ("2025-01-01T000000Z", "2025-01-02T000000Z")]
    (paths.root / "adoptions.json").write_text(json.dumps({"adoptions": records}))
    write_json_atomic(paths.nights / "2025-01-01T000000Z" / "diagnostics.json",
                      night("2025-01-01T000000Z", "accepted", state="staged").model_dump(mode="json"))
    # the second night's diagnostics were pruned: its verdict is unknown, not guessed

    table = CliRunner().invoke(app, ["history", "--project", str(project)])
    assert table.exit_code == 0, table.output
    cells = [[cell.strip() for cell in line.split("│") if cell.strip()] for line in table.output.splitlines()]
    rows = {row[0]: row[1:3] for row in cells if row and row[0].startswith("2025")}
    assert rows == {"2025-01-01T000000Z": ["learned", "adopted"], "2025-01-02T000000Z": ["-", "adopted"]}
    data = json.loads(CliRunner().invoke(app, ["history", "--project", str(project), "--json"]).output)
    assert [a["verdict"] for a in data["adoptions"]] == ["learned", "-"]


def test_no_source_line_uses_the_old_status_words():
    source = (Path(__file__).parents[2] / "skillopt_sleep" / "night.py").read_text(encoding="utf-8")
    assert "status.upper()" not in source and "BACKEND ERROR" not in source
