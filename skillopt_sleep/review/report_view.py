"""The typed view of one night's report (``report.night_view``): what the terminal view (``cli/report_cmd.py``) and
the HTML page (``report.render_html``) show, in the order a user reads it.

Every model forbids unknown fields and documents its fields (``NightView.model_json_schema()`` carries them);
``NightView.model_dump(mode="json")`` is the view as JSON. The view is read from ``diagnostics.json``
(``models.Diagnostics``): texts that come from a transcript or a model are kept as they are and escaped by whoever
renders them. Scores are in [0, 1], seconds are wall-clock seconds, tokens are prompt + completion tokens.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from skillopt_sleep.models import FileChange, Scores


class _View(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class ChangeView(FileChange):
    """What tonight did to one managed file (``models.FileChange``), with the line that says it."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    line: str
    """One sentence for a developer (``changes.describe_change``), e.g. ``CLAUDE.md: learned 1 rule (...)``."""


class EditView(_View):
    """One edit of a candidate, as a report shows it."""

    target: str
    """The document it edits: ``skill`` or ``memory``."""
    op: str
    """``append``, ``prepend``, ``insert_after``, ``replace`` or ``delete``."""
    status: str
    """What became of it, in the report's words (``report.EDIT_STATUS_WORDS``): ``in the candidate``, ``did not
    apply``, ``rejected`` (another status as it is)."""
    reason: str
    """Why it was rejected or did not apply (empty otherwise)."""
    rationale: str
    """Why reflection proposed it."""
    evidence: list[str]
    """Ids of the tasks that motivated it."""
    diff: str
    """A unified-style diff inside the managed block (``report.edit_diff``): ``-`` anchor lines, ``+`` content."""


class BlockedEdit(_View):
    """An edit the provenance screen stopped before it reached a document (docs/security.md)."""

    target: str
    """The document it would have edited: ``skill`` or ``memory``."""
    content: str
    """The text it would have written."""
    token: str | None
    """What no user typed (a URL, a command, a package) or the kind of secret it carried; None: not named."""
    reason: str
    """The screen's reason, as recorded in the edit."""


class HeldOutTask(_View):
    """One held-out (val) task the gate compared: mean scores of the scored samples (an errored sample is left out;
    None: no scored sample)."""

    task_id: str
    request: str
    """The head of the task's request."""
    baseline_hard: float | None
    baseline_soft: float | None
    candidate_hard: float | None
    candidate_soft: float | None
    outcome: str
    """``win``, ``loss``, ``tie`` or ``n/a`` (for the candidate)."""


class DocumentDiff(_View):
    """The diff of one document the night proposed (``<night>/proposed/<file>.diff``, cut at
    ``report.MAX_DIFF_CHARS`` characters)."""

    file: str
    """Its file name under ``proposed/``."""
    target: str
    """The user's file it would replace."""
    diff: str


class ErrorView(_View):
    """One call or stage error of the night (redacted)."""

    stage: str
    """The stage, else the role of the call."""
    kind: str
    message: str


class RoleCostView(_View):
    """What one role's LLM calls cost tonight."""

    calls: int
    failed_calls: int
    cached_calls: int
    prompt_tokens: int
    completion_tokens: int
    tokens: int
    """prompt_tokens + completion_tokens."""
    seconds: float
    """Wall-clock seconds, rounded to milliseconds."""


class NightScores(_View):
    """The night's pass rates on held-out tasks."""

    baseline: Scores
    """Tonight's documents on the val tasks."""
    candidate: Scores
    """The candidate on the same val tasks."""
    test: dict[str, Scores]
    """Document name -> its scores on the test tasks (empty when none were run)."""


class NightTotals(_View):
    """The whole night's cost."""

    calls: int
    tokens: int
    seconds: float
    """The sum of ``stage_seconds``, rounded to milliseconds."""


class NightView(_View):
    """One night's report: what changed in the user's files first, then why, then the statistics."""

    night_id: str
    project: str | None
    """The project's absolute path."""
    status: str
    """The night's status (``models.NightStatus``)."""
    outcome: str
    """The verdict word of every command (``verdicts.verdict``): learned, waiting, rejected, kept, failed or
    interrupted."""
    headline: str
    """What changed in the user's files, in one line (``changes.changes_sentence``)."""
    changes: list[ChangeView]
    """One per managed file read tonight."""
    staged_from: str | None
    """The earlier night whose pending candidate won its re-test tonight and was promoted (None: tonight's own)."""
    staged_edits: list[EditView]
    """The edits in what was staged or written: that earlier candidate's, else tonight's applied edits when a file
    changed, else none."""
    summary: str
    """The night's one human line (for a failure: what to fix)."""
    started_at: str
    """When the night began (ISO 8601, UTC)."""
    verdict: str | None
    """The gate's verdict (``accept_new_best``, ``accept``, ``reject``, ``skipped``); None: no gate ran."""
    why: str
    """The gate's reason, else the summary."""
    adoption: str | None
    """``adopted``, ``reverted`` or ``pending`` when ``skillopt-sleep adopt`` recorded this night; else None."""
    edit_budget: int
    """Most edits the step could make tonight."""
    tasks: dict[str, int]
    """Tasks per split (``train``, ``val``, ``test``) and ``total``."""
    scores: NightScores
    per_task: list[HeldOutTask]
    edits: list[EditView]
    """Every edit tonight's step proposed (applied to its candidate, never to a file)."""
    blocked: list[BlockedEdit]
    document_diffs: list[DocumentDiff]
    proposed: list[str]
    """Documents written under ``proposed/`` (only those that changed)."""
    applied: list[str]
    """Documents written to the user's files."""
    errors: list[ErrorView]
    failure: dict[str, Any] | None
    """For a failed or interrupted night: ``reason`` and ``fix`` (and the role, model, signal or stage);
    None otherwise."""
    cost: dict[str, RoleCostView]
    """Role (miner, target, judge, optimizer) -> its calls."""
    stage_seconds: dict[str, float]
    """Stage -> wall-clock seconds."""
    totals: NightTotals
