"""The typed views are the documented ``--json`` shapes: ``harvest --json`` prints a ``HarvestPreview`` and nothing
else, and a night's report view (``NightView``) keeps its keys; every model documents its fields in its schema."""

from __future__ import annotations

import json

from test_report import diagnostics
from transcripts import PNPM_CONVERSATIONS, write_claude_sessions
from typer.testing import CliRunner

from skillopt_sleep.cli.app import app
from skillopt_sleep.mine.preview import HarvestPreview, PreviewSession, PreviewTask
from skillopt_sleep.review.report import night_view
from skillopt_sleep.review.report_view import NightView

PREVIEW_KEYS = ["sources", "harvest", "per_source", "sessions", "tasks"]
SESSION_KEYS = ["source", "session_id", "path", "cwd", "requests", "started_at"]
TASK_KEYS = ["id", "split", "recurrence", "reaction", "request_head", "rules", "replayable", "not_replayable",
             "hard_evidence", "checks", "rejected_checks"]
NIGHT_KEYS = ["night_id", "project", "status", "outcome", "headline", "changes", "staged_from", "staged_edits",
              "summary", "started_at", "verdict", "why", "adoption", "edit_budget", "tasks", "scores", "per_task",
              "edits", "blocked", "document_diffs", "proposed", "applied", "errors", "failure", "cost",
              "stage_seconds", "totals"]


def test_harvest_json_is_a_harvest_preview(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    write_claude_sessions(tmp_path / "claude", project, PNPM_CONVERSATIONS)
    shown = CliRunner().invoke(app, ["harvest", "--json", "--claude-home", str(tmp_path / "claude"), "--source",
                                     "claude", "--lookback-hours", "0", "--project", str(project)])
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.stdout)
    assert sorted(data) == sorted(PREVIEW_KEYS)  # (emit_json sorts the keys)
    assert HarvestPreview.model_validate(data).model_dump(mode="json") == data  # no key more, none less
    assert data["harvest"]["sessions_harvested"] == len(PNPM_CONVERSATIONS) == len(data["sessions"])
    assert all(sorted(session) == sorted(SESSION_KEYS) for session in data["sessions"])
    assert data["tasks"] and all(sorted(task) == sorted(TASK_KEYS) for task in data["tasks"])
    assert any(task["rules"] for task in data["tasks"])  # nested models (rules, checks) are written as before


def test_the_night_view_keeps_its_keys_and_round_trips_as_json():
    view = night_view(diagnostics("2025-01-01T000000Z"))
    data = view.model_dump(mode="json")
    assert list(data) == NIGHT_KEYS
    assert NightView.model_validate_json(view.model_dump_json()) == view
    assert data["totals"] == {"calls": 11, "tokens": 1800, "seconds": 3.1}
    assert list(data["changes"][0]) == ["file", "kind", "state", "added", "removed", "added_at", "line"]


def test_the_views_document_their_fields():
    for model, field in ((HarvestPreview, "per_source"), (PreviewSession, "started_at"),
                         (PreviewTask, "hard_evidence"), (NightView, "outcome")):
        assert model.model_json_schema()["properties"][field].get("description"), (model.__name__, field)
