"""What a night did, as data for the terminal view and as a self-contained HTML page.

``load_night`` reads ``<night dir>/diagnostics.json``; ``night_view`` turns it into a ``NightView`` (verdict and why,
scores, per-task table, edits with rationale and diff, errors, cost by role, time by stage); ``trend_points``
summarises the last nights (verdict, baseline and candidate pass rates on the night's own val tasks, accepted
edits, cost), ``score_chart_data`` lays them out (one baseline -> candidate segment per night, never a line across
nights: each night holds out other tasks) and ``trend_chart_png`` draws them with matplotlib (Agg backend, no
display). ``render_html`` builds one page with everything inline (CSS, the chart as
a base64 PNG); every text that may come from a transcript or a model is escaped with ``html.escape``.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from skillopt_sleep.errors import DamagedFileError, SleepError
from skillopt_sleep.fsio import load_json, read_json, write_text_atomic
from skillopt_sleep.mine.provenance import blocked_token, is_blocked
from skillopt_sleep.models import Diagnostics, EditRecord, ReplayResult
from skillopt_sleep.review.adopt import load_adoptions, night_sort_key
from skillopt_sleep.review.changes import changes_sentence, describe_change
from skillopt_sleep.review.report_view import (
    BlockedEdit,
    ChangeView,
    DocumentDiff,
    EditView,
    ErrorView,
    HeldOutTask,
    NightScores,
    NightTotals,
    NightView,
    RoleCostView,
)
from skillopt_sleep.review.verdicts import verdict
from skillopt_sleep.state import ProjectPaths

#: Nights shown in the trend chart.
TREND_NIGHTS = 30
#: Most characters of one diff shown (the full diff stays in the night directory).
MAX_DIFF_CHARS = 20_000


# --------------------------------------------------------------------------- loading


def night_ids(paths: ProjectPaths) -> list[str]:
    """Ids of the nights that wrote a ``diagnostics.json``, oldest first."""
    if not paths.nights.is_dir():
        return []
    return sorted((p.name for p in paths.nights.iterdir()
                   if not p.name.startswith(".") and (p / "diagnostics.json").is_file()), key=night_sort_key)


def load_night(paths: ProjectPaths, night_id: str | None = None) -> tuple[Diagnostics, Path]:
    """Return (diagnostics, night dir) of ``night_id`` (default: the newest night with diagnostics).

    Raises SleepError when the project has no night, the night is unknown, or its diagnostics.json is not valid.
    """
    if night_id is None:
        ids = night_ids(paths)
        if not ids:
            raise SleepError(f"no night has run for this project yet (nights dir {paths.nights}); "
                             "run 'skillopt-sleep run-now' first")
        night_id = ids[-1]
    night_dir = paths.nights / night_id
    path = night_dir / "diagnostics.json"
    if not path.is_file():
        known = ", ".join(night_ids(paths)[-5:]) or "none"
        raise SleepError(f"no diagnostics for night {night_id!r} (latest nights: {known})")
    try:
        return Diagnostics.model_validate(read_json(path)), night_dir
    except (ValueError, ValidationError) as exc:
        raise SleepError(f"{path} is not a valid diagnostics file ({str(exc).splitlines()[0]})") from None


# --------------------------------------------------------------------------- one night


def _mean(results: list[ReplayResult], field: str) -> float | None:
    scored = [r for r in results if r.error is None]
    if not scored:
        return None
    return round(sum(getattr(r, field) for r in scored) / len(scored), 4)


def edit_diff(edit: EditRecord) -> str:
    """A small unified-style diff of one edit inside the managed block (``-`` anchor lines, ``+`` content)."""
    anchor = (edit.anchor or "").splitlines()
    content = edit.content.splitlines()
    if edit.op in ("append", "prepend"):
        lines = [f"+{line}" for line in content]
    elif edit.op == "insert_after":
        lines = [f" {line}" for line in anchor] + [f"+{line}" for line in content]
    elif edit.op == "replace":
        lines = [f"-{line}" for line in anchor] + [f"+{line}" for line in content]
    else:  # delete
        lines = [f"-{line}" for line in anchor]
    return "\n".join(lines)


def _document_diffs(night_dir: Path) -> list[DocumentDiff]:
    path = night_dir / "proposed" / "manifest.json"
    try:
        manifest = load_json(path, what=f"night {night_dir.name}'s proposal manifest", default=None)
    except DamagedFileError as exc:  # the report still shows the rest of the night, and says why no diff is shown
        return [DocumentDiff(file=path.name, target=str(path), diff=f"(no diff shown: {exc.message})")]
    manifest = manifest if isinstance(manifest, dict) else {}
    diffs = []
    for entry in manifest.get("documents", []) if isinstance(manifest.get("documents"), list) else []:
        if not isinstance(entry, dict):
            continue
        name = str(entry.get("file", ""))
        if not name or Path(name).name != name:
            continue
        diff_path = night_dir / "proposed" / f"{name}.diff"
        text = diff_path.read_text("utf-8", errors="replace") if diff_path.is_file() else ""
        if len(text) > MAX_DIFF_CHARS:
            text = text[:MAX_DIFF_CHARS] + f"\n[... diff truncated; full diff: {diff_path} ...]\n"
        diffs.append(DocumentDiff(file=name, target=str(entry.get("target", "")), diff=text))
    return diffs


#: How an edit's status reads in a report: the step applies edits to the *candidate*, never to a file.
EDIT_STATUS_WORDS = {"applied": "in the candidate", "unmatched": "did not apply", "rejected": "rejected"}


def outcome_word(diagnostics: Diagnostics) -> str:
    """The night's verdict, in the one vocabulary of every command (``verdicts.verdict``: learned, waiting,
    rejected, kept, failed, interrupted)."""
    return verdict(diagnostics.model_dump(mode="json"))


def _promoted_edits(diagnostics: Diagnostics, paths: ProjectPaths | None) -> tuple[str | None, list[EditRecord]]:
    """(night id, edits in its candidate) of an earlier night's pending candidate promoted tonight; (None, [])
    otherwise, or when that night's diagnostics are gone."""
    pending = diagnostics.pending or {}
    origin = pending.get("from_night")
    if pending.get("action") != "promoted" or not origin or paths is None:
        return None, []
    try:
        data = read_json(paths.nights / str(origin) / "diagnostics.json", default=None) or {}
    except ValueError:  # damaged: shown like diagnostics that are gone
        return None, []
    try:
        edits = [EditRecord.model_validate(edit) for edit in data.get("edits") or []]
    except ValidationError:
        return str(origin), []
    return str(origin), [edit for edit in edits if edit.status == "applied"]


def _edit_rows(edits: list[EditRecord]) -> list[EditView]:
    return [EditView(target=e.target, op=e.op, status=EDIT_STATUS_WORDS.get(e.status, e.status), reason=e.reason,
                     rationale=e.rationale, evidence=list(e.evidence), diff=edit_diff(e)) for e in edits]


def night_view(diagnostics: Diagnostics, night_dir: Path | None = None,
               paths: ProjectPaths | None = None) -> NightView:
    """One night's report (``report_view.NightView``, its fields documented there), what changed in the user's files
    first. night_dir: where the proposed documents' diffs are read (None: none shown); paths: the project's state,
    for the adoption record and a promoted candidate's edits (None: neither)."""
    gate = diagnostics.gate
    per_task = []
    for comparison in gate.per_task if gate else []:
        per_task.append(HeldOutTask(
            task_id=comparison.task_id,
            request=comparison.request_head,
            baseline_hard=_mean(comparison.baseline, "hard"),
            baseline_soft=_mean(comparison.baseline, "soft"),
            candidate_hard=_mean(comparison.candidate, "hard"),
            candidate_soft=_mean(comparison.candidate, "soft"),
            outcome=comparison.outcome,
        ))
    edits = _edit_rows(diagnostics.edits)
    staged_from, promoted = _promoted_edits(diagnostics, paths)
    staged_edits = (_edit_rows(promoted) if staged_from else
                    _edit_rows([e for e in diagnostics.edits if e.status == "applied"])
                    if any(c.state != "unchanged" for c in diagnostics.changes) else [])
    blocked = [BlockedEdit(target=e.target, content=e.content, token=blocked_token(e.reason), reason=e.reason)
               for e in diagnostics.edits if is_blocked(e)]
    cost = {role: RoleCostView(calls=c.calls, failed_calls=c.failed_calls, cached_calls=c.cached_calls,
                               prompt_tokens=c.prompt_tokens, completion_tokens=c.completion_tokens,
                               tokens=c.prompt_tokens + c.completion_tokens, seconds=round(c.seconds, 3))
            for role, c in diagnostics.cost.items()}
    adoption = None
    if paths is not None:
        for record in load_adoptions(paths):
            if record.night_id == diagnostics.night_id:
                adoption = record.status
    return NightView(
        night_id=diagnostics.night_id,
        project=diagnostics.project,
        status=diagnostics.status,
        outcome=outcome_word(diagnostics),
        headline=changes_sentence(diagnostics),
        changes=[ChangeView(**change.model_dump(), line=describe_change(change)) for change in diagnostics.changes],
        staged_from=staged_from,
        staged_edits=staged_edits,
        summary=diagnostics.summary,
        started_at=diagnostics.started_at.isoformat(),
        verdict=gate.verdict if gate else None,
        why=gate.reason if gate else diagnostics.summary,
        adoption=adoption,
        edit_budget=diagnostics.edit_budget,
        tasks=dict(diagnostics.tasks),
        scores=NightScores(baseline=diagnostics.baseline, candidate=diagnostics.candidate, test=dict(diagnostics.test)),
        per_task=per_task,
        edits=edits,
        blocked=blocked,
        document_diffs=_document_diffs(night_dir) if night_dir else [],
        proposed=list(diagnostics.proposed),
        applied=list(diagnostics.applied),
        errors=[ErrorView(stage=str(e.get("stage") or e.get("role") or ""), kind=str(e.get("kind") or ""),
                          message=str(e.get("message") or "")) for e in diagnostics.errors],
        failure=diagnostics.failure,
        cost=cost,
        stage_seconds=dict(diagnostics.stage_seconds),
        totals=NightTotals(calls=sum(c.calls for c in cost.values()), tokens=sum(c.tokens for c in cost.values()),
                           seconds=round(sum(diagnostics.stage_seconds.values()), 3)),
    )


# --------------------------------------------------------------------------- trend over nights


def paired_pass_rates(data: Mapping[str, Any]) -> tuple[float | None, float | None, int]:
    """(baseline, candidate, n): the held-out pass rates in [0, 1] of a night's baseline and candidate on *the same*
    val tasks, from its ``diagnostics.json`` (plain JSON) ``gate.per_task`` rows.

    A task counts only when both sides have a scored sample (one without ``error``); its pass rate is the mean
    ``hard`` of its scored samples, and a side's rate is the mean over those tasks (each task weighs the same).
    n is the number of such tasks; (None, None, 0) when there is none (no gate, a failed night, no val task).
    """
    gate = data.get("gate") if isinstance(data.get("gate"), Mapping) else {}
    base_rates, cand_rates = [], []
    for row in gate.get("per_task") or []:
        if not isinstance(row, Mapping):
            continue
        base, cand = _pass_rate(row.get("baseline")), _pass_rate(row.get("candidate"))
        if base is not None and cand is not None:
            base_rates.append(base)
            cand_rates.append(cand)
    if not base_rates:
        return None, None, 0
    n = len(base_rates)
    return round(sum(base_rates) / n, 4), round(sum(cand_rates) / n, 4), n


def _pass_rate(samples: Any) -> float | None:
    scored = [s for s in samples or [] if isinstance(s, Mapping) and s.get("error") is None]
    return sum(1 for s in scored if s.get("hard")) / len(scored) if scored else None


def trend_points(paths: ProjectPaths, limit: int = TREND_NIGHTS) -> list[dict[str, Any]]:
    """One point per night (the last ``limit`` with diagnostics, oldest first).

    Each: night_id, status, verdict (``verdicts.verdict``), baseline and candidate (``paired_pass_rates``: held-out
    pass rates in [0, 1] on that night's own val tasks, None when nothing was compared), val_tasks (their number),
    accepted_edits (rule lines a learned night changed: ``_accepted_edits``), tokens, calls. Two nights' rates
    are not comparable (each night holds out different tasks): only a night's baseline and candidate are.
    Unreadable diagnostics are skipped; a night directory without diagnostics (still running, or killed) is not
    a point.
    """
    points = []
    for night_id in night_ids(paths)[-limit:]:
        try:
            data = read_json(paths.nights / night_id / "diagnostics.json") or {}
        except ValueError:
            continue
        word = verdict(data)
        baseline, candidate, n = paired_pass_rates(data)
        cost = data.get("cost") or {}
        points.append({
            "night_id": night_id,
            "status": data.get("status"),
            "verdict": word,
            "baseline": baseline,
            "candidate": candidate,
            "val_tasks": n,
            "accepted_edits": _accepted_edits(data) if word == "learned" else 0,
            "tokens": sum(int(c.get("prompt_tokens", 0)) + int(c.get("completion_tokens", 0)) for c in cost.values()),
            "calls": sum(int(c.get("calls", 0)) for c in cost.values()),
        })
    return points


#: Half the width of a night's baseline -> candidate segment on the chart (nights are 1 apart).
SEGMENT_HALF_WIDTH = 0.25


def score_chart_data(points: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """What the score panel draws, as data (``trend_points`` in, one entry per night out, at x = its index).

    ``segments``: a night that compared its baseline and candidate on the same val tasks: x, x0 / y0 (baseline) to
    x1 / y1 (candidate), x0 = x - ``SEGMENT_HALF_WIDTH``, x1 = x + ``SEGMENT_HALF_WIDTH``, verdict, val_tasks.
    A segment never leaves its night: nights hold out different tasks, so no line joins two nights.
    ``learned``: x, y of each night whose verdict is learned: its segment's candidate end (x1, y1), or (x, 1.0)
    with no comparison.
    ``marks``: x, word (the verdict word, or ``no val task``) of each night without a comparison (failed,
    interrupted, no task): drawn as an ``x`` with the word, never left as a gap.
    """
    data: dict[str, list[dict[str, Any]]] = {"segments": [], "learned": [], "marks": []}
    for x, point in enumerate(points):
        compared = point["baseline"] is not None and point["candidate"] is not None
        if compared:
            data["segments"].append({"x": x, "x0": x - SEGMENT_HALF_WIDTH, "y0": point["baseline"],
                                     "x1": x + SEGMENT_HALF_WIDTH, "y1": point["candidate"],
                                     "verdict": point["verdict"], "val_tasks": point["val_tasks"]})
        else:
            word = point["verdict"] if point["verdict"] in ("failed", "interrupted") else \
                f"{point['verdict']}: no val task"
            data["marks"].append({"x": x, "word": word})
        if point["verdict"] == "learned":
            data["learned"].append({"x": x + SEGMENT_HALF_WIDTH, "y": point["candidate"]} if compared else
                                   {"x": x, "y": 1.0})
    return data


def _accepted_edits(data: dict[str, Any]) -> int:
    """Rule lines an accepted night changed (added + removed, from ``changes``: also right when it staged an earlier
    night's pending candidate); diagnostics without ``changes``: the edits in its candidate."""
    changes = [c for c in data.get("changes") or [] if c.get("state") != "unchanged"]
    if data.get("changes"):
        return sum(len(c.get("added") or []) + len(c.get("removed") or []) for c in changes)
    return sum(1 for e in data.get("edits") or [] if e.get("status") == "applied")


def night_label(night_id: str, number: int) -> str:
    """A chart label that tells nights apart, also several of one day: ``#3 11-23 19:37`` (night ids are
    ``YYYY-MM-DDTHHMMSSZ[-n]``; another shape is shown as it is)."""
    if len(night_id) >= 15 and night_id[10] == "T":
        suffix = night_id[18:] if len(night_id) > 18 else ""
        return f"#{number} {night_id[5:10]} {night_id[11:13]}:{night_id[13:15]}{suffix}"
    return f"#{number} {night_id}"


def _draw_scores(axis: Any, data: dict[str, list[dict[str, Any]]]) -> None:
    """Draw ``score_chart_data`` on a matplotlib axis: one baseline -> candidate segment per night (grey dot, blue
    dot), a green star on learned nights, a red ``x`` and its word on nights without a comparison."""
    for number, segment in enumerate(data["segments"]):
        axis.plot([segment["x0"], segment["x1"]], [segment["y0"], segment["y1"]], color="#1f6feb", linewidth=2,
                  label="baseline -> candidate (same tasks)" if number == 0 else None)
        axis.plot([segment["x0"]], [segment["y0"]], marker="o", color="#8c959f", linestyle="none",
                  label="baseline" if number == 0 else None)
        axis.plot([segment["x1"]], [segment["y1"]], marker="o", color="#1f6feb", linestyle="none",
                  label="candidate" if number == 0 else None)
    if data["learned"]:
        axis.plot([m["x"] for m in data["learned"]], [m["y"] for m in data["learned"]], marker="*", markersize=14,
                  color="#2da44e", linestyle="none", label="learned")
    for mark in data["marks"]:
        axis.plot([mark["x"]], [0.5], marker="x", markersize=10, color="#cf222e", linestyle="none")
        axis.annotate(mark["word"], (mark["x"], 0.5), textcoords="offset points", xytext=(0, 8), ha="center",
                      fontsize=7, color="#cf222e")
    if data["segments"] or data["learned"]:
        axis.legend(loc="best", fontsize=7)


def chart_available() -> bool:
    """True when matplotlib is installed (the ``chart`` extra: ``pip install 'skillopt-sleep[chart]'``). It is
    optional because it and what it pulls in are about 170 MB, two thirds of the base install; without it the HTML
    report shows the same points as a table."""
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def _trend_table_html(points: list[dict[str, Any]]) -> str:
    """The trend points as an HTML table (``trend_points``' fields), with how to get the chart."""
    def rate(value: Any) -> str:
        return "-" if value is None else f"{value:.2f}"

    rows = "".join(
        f"<tr><td>{_e(point['night_id'])}</td><td>{_e(point['verdict'])}</td><td>{rate(point['baseline'])}</td>"
        f"<td>{rate(point['candidate'])}</td><td>{point['val_tasks']}</td><td>{point['accepted_edits']}</td>"
        f"<td>{point['calls']}</td></tr>" for point in points)
    return ('<table id="trend-table"><tr><th>night</th><th>verdict</th><th>baseline</th><th>candidate</th>'
            "<th>val tasks</th><th>rules learned</th><th>LLM calls</th></tr>" + rows + "</table>"
            "<p class=\"muted\">baseline and candidate: held-out pass rates on the night's own val tasks. "
            "<code>pip install 'skillopt-sleep[chart]'</code> draws them as a chart.</p>")


def trend_chart_png(points: list[dict[str, Any]], *, dpi: int = 100) -> bytes:
    """A PNG (bytes) with three panels over the nights: held-out pass rate of baseline and candidate on each night's
    own val tasks (``score_chart_data``), accepted edits, cost in tokens.

    Uses matplotlib's Agg canvas directly (no pyplot, no display, no global state).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(9, 6.5), dpi=dpi)
    FigureCanvasAgg(figure)
    axes = figure.subplots(3, 1, sharex=True)
    x = list(range(len(points)))
    labels = [night_label(p["night_id"], number) for number, p in enumerate(points, 1)]

    score_axis, edits_axis, cost_axis = axes
    _draw_scores(score_axis, score_chart_data(points))
    score_axis.set_ylim(-0.05, 1.05)
    score_axis.set_ylabel("held-out pass rate")
    score_axis.set_title("last nights: baseline -> candidate on each night's own held-out tasks, accepted edits, cost")
    edits_axis.bar(x, [p["accepted_edits"] for p in points], color="#2da44e")
    edits_axis.set_ylabel("accepted edits")
    cost_axis.bar(x, [p["tokens"] for p in points], color="#8250df")
    cost_axis.set_ylabel("tokens")
    cost_axis.set_xticks(x)
    cost_axis.set_xticklabels(labels, rotation=45, ha="right", fontsize=7)
    for axis in axes:
        axis.grid(True, alpha=0.3)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


# --------------------------------------------------------------------------- HTML

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2rem;color:#1f2328;background:#fff;max-width:70rem}
h1{font-size:1.4rem}h2{font-size:1.1rem;margin-top:2rem;border-bottom:1px solid #d0d7de;padding-bottom:.2rem}
table{border-collapse:collapse;margin:.5rem 0}th,td{border:1px solid #d0d7de;padding:.25rem .5rem;text-align:left;
vertical-align:top}th{background:#f6f8fa}td.num{text-align:right;font-variant-numeric:tabular-nums}
.verdict{font-weight:bold;padding:.1rem .4rem;border-radius:.3rem}.accepted{background:#dafbe1}
.rejected{background:#fff8c5}.failed{background:#ffebe9}.other{background:#ddf4ff}
pre{background:#f6f8fa;padding:.5rem;overflow-x:auto;font-size:.85rem}.add{color:#116329}.del{color:#82071e}
.win{color:#116329;font-weight:bold}.loss{color:#82071e;font-weight:bold}.muted{color:#656d76}
img.chart{max-width:100%;border:1px solid #d0d7de}h3{font-size:1rem;margin-top:1.5rem}
#changes td{white-space:pre-line}#headline{font-size:1.05rem}
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _num(value: Any, digits: int = 3) -> str:
    if value is None:
        return "&ndash;"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return _e(value)


def _diff_html(diff: str) -> str:
    lines = []
    for line in diff.splitlines():
        css = "add" if line.startswith("+") and not line.startswith("+++") else \
              "del" if line.startswith("-") and not line.startswith("---") else ""
        lines.append(f'<span class="{css}">{_e(line)}</span>' if css else _e(line))
    return "<pre>" + "\n".join(lines) + "</pre>"


def _table(headers: list[str], rows: list[list[str]], css_id: str) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(rows_cell for rows_cell in row) + "</tr>" for row in rows)
    return f'<table id="{css_id}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _cell(value: Any, numeric: bool = False, css: str = "") -> str:
    classes = " ".join(c for c in ("num" if numeric else "", css) if c)
    text = _num(value) if numeric else _e(value)
    return f'<td class="{classes}">{text}</td>' if classes else f"<td>{text}</td>"


def render_html(view: NightView, points: list[dict[str, Any]], *, generated_at: datetime | None = None) -> str:
    """A complete, self-contained HTML page (no external resource) for one night plus the trend chart.

    view: ``night_view(...)``; points: ``trend_points(...)`` (no chart when empty).
    """
    generated = (generated_at or datetime.now(timezone.utc)).isoformat(timespec="seconds")
    outcome = view.outcome
    css = {"learned": "accepted", "waiting": "rejected", "rejected": "rejected", "failed": "failed",
           "interrupted": "failed"}.get(outcome, "other")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>skillopt-sleep night {_e(view.night_id)}</title><style>{_CSS}</style></head><body>",
        f"<h1>skillopt-sleep night {_e(view.night_id)}</h1>",
        f'<p><span id="outcome" class="verdict {css}">{_e(outcome)}</span> '
        f'<span id="headline">{_e(view.headline)}</span></p>',
        "<h2>What changed in your files</h2>",
    ]
    state_words = {"written": "learned: written to the file", "staged": "staged: run 'skillopt-sleep adopt'",
                   "unchanged": "unchanged"}
    if view.changes:
        rows = [[_cell(c.file), _cell(state_words.get(c.state, c.state), css="win" if c.state == "written" else ""),
                 _cell("\n".join(c.added)), _cell("\n".join(c.removed))] for c in view.changes]
        parts.append(_table(["file", "tonight", "rules added", "rules removed"], rows, "changes"))
    else:
        parts.append('<p class="muted">no managed file was read tonight</p>')
    if view.staged_from:
        parts.append(f'<p id="staged-from">These rules are the candidate of night {_e(view.staged_from)}: it '
                     "waited for more evidence and won its re-test on tonight's held-out tasks.</p>")
    parts.append("<h2>Why</h2>")
    verdict = f"gate {view.verdict}: " if view.verdict else ""
    parts.append(f'<p id="why">Tonight\'s own candidate &mdash; {_e(verdict)}{_e(view.why)}</p>')
    parts.append(f'<p class="muted">project {_e(view.project)}; started {_e(view.started_at)}; '
                 f"adoption: {_e(view.adoption or 'not adopted')}; report generated {_e(generated)}</p>")
    parts.append(f'<p class="muted" id="summary">{_e(view.summary)}</p>')
    if view.failure:
        failure = view.failure
        parts.append(f'<p class="verdict failed">{_e(failure.get("reason"))} &mdash; fix: {_e(failure.get("fix"))}</p>')

    parts.append("<h2>Trend over the last nights</h2>")
    if points and not chart_available():
        parts.append(_trend_table_html(points))
    elif points:
        chart = base64.b64encode(trend_chart_png(points)).decode("ascii")
        parts.append(f'<img id="trend-chart" class="chart" alt="held-out pass rate of baseline and candidate '
                     f'per night, accepted edits and cost over the last {len(points)} nights" '
                     f'src="data:image/png;base64,{chart}">')
    else:
        parts.append('<p class="muted">no night with diagnostics yet</p>')

    if view.staged_edits:
        parts.append("<h2>Rules staged or written tonight</h2>")
        for number, edit in enumerate(view.staged_edits, 1):
            parts.append(f'<div class="staged-edit"><p><b>{number}. {_e(edit.op)} &rarr; {_e(edit.target)}'
                         f'</b></p><p>{_e(edit.rationale)}</p>{_diff_html(edit.diff)}</div>')

    parts.append("<h2>Statistics</h2>")
    scores = view.scores
    rows = []
    for name, s in (("baseline (val)", scores.baseline), ("candidate (val)", scores.candidate)):
        rows.append([_cell(name), _cell(s.hard, True), _cell(s.soft, True), _cell(s.gate, True),
                     _cell(s.n, True)])
    for name, s in scores.test.items():
        rows.append([_cell(f"{name} (test)"), _cell(s.hard, True), _cell(s.soft, True),
                     _cell(s.gate, True), _cell(s.n, True)])
    parts.append("<h3>Scores</h3>")
    parts.append(_table(["", "hard", "soft", "gate", "n"], rows, "scores"))
    tasks = view.tasks
    parts.append(f'<p class="muted">tasks: train {_e(tasks.get("train", 0))}, val {_e(tasks.get("val", 0))}, '
                 f'test {_e(tasks.get("test", 0))}; edit budget {_e(view.edit_budget)}</p>')

    parts.append("<h3>Held-out tasks</h3>")
    if view.per_task:
        rows = [[_cell(t.task_id), _cell(t.request), _cell(t.baseline_hard, True),
                 _cell(t.baseline_soft, True), _cell(t.candidate_hard, True), _cell(t.candidate_soft, True),
                 _cell(t.outcome, css=t.outcome if t.outcome in ("win", "loss") else "")]
                for t in view.per_task]
        parts.append(_table(["task", "request", "baseline hard", "baseline soft", "candidate hard",
                             "candidate soft", "outcome"], rows, "per-task"))
    else:
        parts.append('<p class="muted">no held-out comparison tonight</p>')

    if view.blocked:
        parts.append("<h3>Blocked edits</h3>")
        parts.append('<p class="muted">These edits named something no user typed (or carried a secret): they never '
                     "reached a document. See docs/security.md.</p>")
        rows = [[_cell(b.target), _cell(b.token, css="loss"), _cell(b.content), _cell(b.reason)]
                for b in view.blocked]
        parts.append(_table(["document", "token", "edit", "reason"], rows, "blocked"))

    parts.append("<h3>Edits tonight's step proposed (applied to its candidate, not to your files)</h3>")
    if view.edits:
        for number, edit in enumerate(view.edits, 1):
            reason = f" ({_e(edit.reason)})" if edit.reason else ""
            parts.append(f'<div class="edit"><p><b>{number}. {_e(edit.op)} &rarr; {_e(edit.target)}</b>: '
                         f'{_e(edit.status)}{reason}</p><p>{_e(edit.rationale)}</p>'
                         f'{_diff_html(edit.diff)}</div>')
    else:
        parts.append('<p class="muted">no edit proposed</p>')
    for document in view.document_diffs:
        parts.append(f"<h3>Staged change to {_e(document.target)}</h3>{_diff_html(document.diff)}")

    parts.append("<h3>Errors</h3>")
    if view.errors:
        rows = [[_cell(e.stage), _cell(e.kind), _cell(e.message)] for e in view.errors]
        parts.append(_table(["stage / role", "kind", "message"], rows, "errors"))
    else:
        parts.append('<p class="muted">none</p>')

    parts.append("<h3>Cost by role</h3>")
    rows = [[_cell(role), _cell(c.calls, True), _cell(c.failed_calls, True), _cell(c.cached_calls, True),
             _cell(c.prompt_tokens, True), _cell(c.completion_tokens, True), _cell(c.seconds, True)]
            for role, c in view.cost.items()]
    parts.append(_table(["role", "calls", "failed", "cached", "prompt tokens", "completion tokens", "seconds"],
                        rows, "cost"))
    parts.append("<h3>Time by stage</h3>")
    rows = [[_cell(stage), _cell(seconds, True)] for stage, seconds in view.stage_seconds.items()]
    parts.append(_table(["stage", "seconds"], rows, "stages"))
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def write_html_report(path: Path, paths: ProjectPaths, night_id: str | None = None) -> Path:
    """Write the HTML report of ``night_id`` (default newest) to ``path`` atomically (mode 0600: it quotes
    transcripts). Returns the path. Raises SleepError as ``load_night`` does."""
    diagnostics, night_dir = load_night(paths, night_id)
    view = night_view(diagnostics, night_dir, paths)
    page = render_html(view, trend_points(paths))
    path = Path(path).expanduser()
    write_text_atomic(path, page, mode=0o600)
    return path
