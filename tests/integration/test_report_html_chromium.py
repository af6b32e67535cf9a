"""The HTML report opened in headless Chromium: the chart and the tables render, and escaped transcript text
stays text (no script runs). Skipped when no Chromium binary is installed (Debian: ``apt-get install chromium``)."""

from __future__ import annotations

import shutil
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import pytest
from PIL import Image

from skillopt_sleep.fsio import write_json_atomic
from skillopt_sleep.models import (
    Diagnostics,
    EditRecord,
    FileChange,
    GateDecision,
    ReplayResult,
    RoleCost,
    Scores,
    TaskComparison,
)
from skillopt_sleep.review.report import write_html_report
from skillopt_sleep.state import ProjectPaths

CHROMIUM = next((shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(name)), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary (apt-get install chromium)")

HOSTILE = '<script>document.title="pwned"</script>'


def night(night_id: str, held_out: float, edits: int) -> Diagnostics:
    return Diagnostics(
        night_id=night_id, status="accepted", summary="ACCEPTED", project="/p",
        started_at=datetime(2025, 1, 1, tzinfo=timezone.utc),
        baseline=Scores(hard=held_out - 0.2, soft=held_out - 0.2, gate=held_out - 0.2, n=2),
        candidate=Scores(hard=held_out, soft=held_out, gate=held_out, n=2),
        gate=GateDecision(mode="on", metric="hard", verdict="accept", reason="candidate beats baseline",
                          per_task=[TaskComparison(task_id="t-123", request_head=HOSTILE, outcome="win",
                                                   baseline=[ReplayResult(task_id="t-123")],
                                                   candidate=[ReplayResult(task_id="t-123", hard=1, soft=1.0)])]),
        edits=[EditRecord(target="memory", op="add", content=f"rule {i}", status="applied") for i in range(edits)],
        cost={"target": RoleCost(calls=4, prompt_tokens=400 * edits + 100, completion_tokens=50)},
        stage_seconds={"replay_baseline": 1.0},
    )


def chromium(*args: str, profile: Path) -> subprocess.CompletedProcess:
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
               f"--user-data-dir={profile}", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=90)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """(report path, dumped DOM, screenshot path) for a project with three nights."""
    base = tmp_path_factory.mktemp("chromium")
    paths = ProjectPaths(base / "project", state_root=base / "state")
    for index, (score, edits) in enumerate(((0.4, 1), (0.6, 2), (0.9, 1)), 1):
        diagnostics = night(f"2025-01-0{index}T000000Z", score, edits)
        write_json_atomic(paths.nights / diagnostics.night_id / "diagnostics.json", diagnostics.model_dump(mode="json"))
    page = write_html_report(base / "report.html", paths)
    dom = chromium("--dump-dom", page.as_uri(), profile=base / "profile-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    shot = base / "shot.png"
    taken = chromium(f"--screenshot={shot}", "--window-size=1200,1600", "--hide-scrollbars", page.as_uri(),
                     profile=base / "profile-shot")
    assert taken.returncode == 0 and shot.exists(), taken.stderr[-2000:]
    return page, dom.stdout, shot


def test_the_chart_image_is_in_the_rendered_dom(rendered):
    _, dom, _ = rendered
    assert '<img id="trend-chart"' in dom and 'src="data:image/png;base64,' in dom


def test_the_scores_per_task_cost_and_stage_tables_render(rendered):
    _, dom, _ = rendered
    for table in ("scores", "per-task", "cost", "stages"):
        assert f'<table id="{table}">' in dom, table
    assert "t-123" in dom


def test_transcript_text_stays_text_and_no_script_runs(rendered):
    _, dom, _ = rendered
    assert "&lt;script&gt;" in dom
    assert "<script" not in dom
    assert "<title>skillopt-sleep night 2025-01-03T000000Z</title>" in dom  # the title was not rewritten


def test_the_screenshot_is_not_blank_and_shows_the_chart_colors(rendered):
    _, _, shot = rendered
    image = Image.open(shot).convert("RGB")
    colors = image.getcolors(maxcolors=1 << 20)
    assert colors is not None and len(colors) > 50, "screenshot is (nearly) one color"
    raw = image.tobytes()
    pixels = [tuple(raw[i:i + 3]) for i in range(0, len(raw), 3)]
    non_white = sum(1 for p in pixels if p != (255, 255, 255))
    assert non_white / len(pixels) > 0.02
    # the held-out line (#1f6feb) and the edits bars (#2da44e) of the chart are painted
    assert any(abs(r - 0x1F) < 30 and abs(g - 0x6F) < 30 and abs(b - 0xEB) < 30 for r, g, b in pixels)
    assert any(abs(r - 0x2D) < 30 and abs(g - 0xA4) < 30 and abs(b - 0x4E) < 30 for r, g, b in pixels)


# --------------------------------------------------------------------------- the morning view: what changed leads

OUTCOME_GREEN = (0xDA, 0xFB, 0xE1)  # the "learned" badge
HELD_OUT_BLUE = (0x1F, 0x6F, 0xEB)  # the chart's held-out line


@pytest.fixture(scope="module")
def morning(tmp_path_factory):
    """Three nights of one day; the last one adopted the pending candidate of the second (its own candidate was
    rejected for a regression). Returns (dumped DOM, screenshot path)."""
    base = tmp_path_factory.mktemp("morning")
    paths = ProjectPaths(base / "project", state_root=base / "state")
    first, second, third = "2025-01-01T010000Z", "2025-01-01T020000Z", "2025-01-01T030000Z"
    write_json_atomic(paths.nights / first / "diagnostics.json", night(first, 0.4, 1).model_dump(mode="json"))
    pending = night(second, 0.5, 0).model_copy(update={
        "status": "rejected", "edits": [EditRecord(target="memory", op="append", content="- dates are ISO 8601",
                                                   status="applied")],
        "pending": {"from_night": second, "action": "stored", "reason": "not enough evidence"}})
    write_json_atomic(paths.nights / second / "diagnostics.json", pending.model_dump(mode="json"))
    tonight = night(third, 0.7, 0).model_copy(update={
        "status": "accepted", "summary": "CLAUDE.md: learned 1 rule",
        "gate": GateDecision(mode="on", metric="hard", verdict="reject", reason="regressed 1 protected task",
                             details={"clause": "regression"}),
        "edits": [EditRecord(target="memory", op="append", content="- always use tabs", status="applied")],
        "pending": {"from_night": second, "action": "promoted", "reason": "won its re-test"},
        "applied": ["/p/CLAUDE.md"],
        "changes": [FileChange(file="CLAUDE.md", kind="memory", state="written", added=["- dates are ISO 8601"]),
                    FileChange(file=".claude/skills/skillopt-sleep/SKILL.md", kind="skill", state="unchanged")]})
    write_json_atomic(paths.nights / third / "diagnostics.json", tonight.model_dump(mode="json"))
    page = write_html_report(base / "report.html", paths)
    dom = chromium("--dump-dom", page.as_uri(), profile=base / "profile-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    shot = base / "shot.png"
    taken = chromium(f"--screenshot={shot}", "--window-size=1200,1400", "--hide-scrollbars", page.as_uri(),
                     profile=base / "profile-shot")
    assert taken.returncode == 0 and shot.exists(), taken.stderr[-2000:]
    return dom.stdout, shot


def test_the_page_leads_with_what_changed_in_the_users_files(morning):
    dom, _ = morning
    body = dom[dom.index("<body"):]
    assert body.index('id="outcome"') < body.index('id="changes"') < body.index('id="why"') < body.index(
        'id="trend-chart"') < body.index('id="scores"')
    assert '>learned</span>' in body
    assert 'CLAUDE.md: learned 1 rule ("dates are ISO 8601")' in body
    assert "SKILL.md: unchanged" in body


def test_an_adopted_pending_candidate_shows_its_own_edits_not_tonights_rejected_ones(morning):
    dom, _ = morning
    staged = dom[dom.index("Rules staged or written tonight"):dom.index("<h2>Statistics</h2>")]
    assert "dates are ISO 8601" in staged and "always use tabs" not in staged
    assert 'id="staged-from">These rules are the candidate of night 2025-01-01T020000Z' in dom
    # tonight's own candidate is shown as rejected by the gate, and its edit as in *its candidate*, never "applied"
    assert "gate reject: regressed 1 protected task" in dom
    step = dom[dom.index("Edits tonight's step proposed"):]
    assert "always use tabs" in step and "in the candidate" in step and ": applied" not in step


def test_the_screenshot_shows_the_outcome_and_the_chart_in_the_first_screen(morning):
    _, shot = morning
    image = Image.open(shot).convert("RGB")
    width, height = image.size
    raw = image.tobytes()

    def rows_with(color: tuple[int, int, int]) -> list[int]:
        return sorted({(i // 3) // width for i in range(0, len(raw), 3)
                       if all(abs(raw[i + k] - color[k]) < 12 for k in range(3))})

    badge, line = rows_with(OUTCOME_GREEN), rows_with(HELD_OUT_BLUE)
    assert badge and badge[0] < 200, "the outcome badge is not at the top of the page"
    assert line and line[-1] < height, "the chart is not painted in the first screen"
