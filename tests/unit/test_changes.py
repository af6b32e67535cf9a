"""What a night changed in the user's files, and the morning line that says it (``changes.py``), and the labels
and words the report uses for it (``report.outcome_word``, ``report.night_label``)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from skillopt_sleep.documents.block import BLOCK_BEGIN, BLOCK_END, BLOCK_HEADING
from skillopt_sleep.documents.targets import Document
from skillopt_sleep.models import (
    Diagnostics,
    EditRecord,
    FileChange,
    GateDecision,
    ReplayResult,
    Scores,
    TaskComparison,
)
from skillopt_sleep.review.changes import (
    changes_sentence,
    file_changes,
    learned_lines,
    nothing_changed_reason,
    rule_lines,
)
from skillopt_sleep.review.report import night_label, outcome_word
from skillopt_sleep.review.verdicts import VERDICTS, verdict


def block(*lines: str, before: str = "# Notes\n\nKeep commits small.\n\n") -> str:
    return before + "\n".join([BLOCK_BEGIN, BLOCK_HEADING, "", *lines, BLOCK_END]) + "\n"


def document(project: Path, kind: str, name: str, text: str) -> Document:
    return Document(kind=kind, path=project / name, text=text, exists=bool(text), sha256=None, evolve=True,
                    baseline_text=text)


def night(status: str = "rejected", **update) -> Diagnostics:
    return Diagnostics(night_id="2026-11-23T193736Z", status=status, summary="",
                       started_at=datetime(2026, 11, 23, tzinfo=timezone.utc), **update)


def test_rule_lines_are_the_managed_blocks_lines_without_heading_or_blanks():
    assert rule_lines(block("- use pnpm", "", "- dates are ISO")) == ["- use pnpm", "- dates are ISO"]
    assert rule_lines("# no block here\n- a user's own line\n") == []


def test_file_changes_tell_written_staged_and_unchanged_files_with_rules_added_and_removed(tmp_path):
    documents = {
        "skill": document(tmp_path, "skill", "SKILL.md", block("- keep answers short")),
        "memory": document(tmp_path, "memory", "CLAUDE.md", block("- always use yarn")),
        "memory:gemini": document(tmp_path, "memory:gemini", "GEMINI.md", ""),
    }
    staged = {"memory": block("- use pnpm, never npm"), "memory:gemini": block("- use pnpm, never npm", before="")}
    changes = file_changes(tmp_path, documents, staged, applied=[str(tmp_path / "CLAUDE.md")])
    assert [(c.file, c.state, c.added, c.removed) for c in changes] == [
        ("SKILL.md", "unchanged", [], []),
        ("CLAUDE.md", "written", ["- use pnpm, never npm"], ["- always use yarn"]),
        ("GEMINI.md", "staged", ["- use pnpm, never npm"], []),
    ]


def test_file_changes_give_the_line_each_added_rule_lands_on(tmp_path):
    documents = {"memory": document(tmp_path, "memory", "CLAUDE.md", "# Shop\n")}
    staged = {"memory": block("- use pnpm, never npm", "- ISO dates", before="# Shop\n\n")}
    [change] = file_changes(tmp_path, documents, staged, applied=[])
    lines = staged["memory"].splitlines()
    assert [lines[number - 1] for number in change.added_at] == change.added == ["- use pnpm, never npm",
                                                                                  "- ISO dates"]


def test_what_was_learned_shows_file_line_the_users_words_and_held_out_before_after():
    changes = [FileChange(file="CLAUDE.md", kind="memory", state="staged", added=["- we use pnpm, never npm."],
                          added_at=[7]),
               FileChange(file="SKILL.md", kind="skill", state="unchanged")]
    def samples(*hards):  # two samples per side: a task passes when every sample does
        return [ReplayResult(task_id="t", hard=hard, soft=float(hard)) for hard in hards]

    per_task = [TaskComparison(task_id="a", baseline=samples(1, 1), candidate=samples(1, 1)),
                TaskComparison(task_id="b", baseline=samples(0, 0), candidate=samples(1, 1)),
                TaskComparison(task_id="c", baseline=samples(0, 1), candidate=samples(1, 1)),
                TaskComparison(task_id="d", baseline=samples(0, 0), candidate=samples(1, 0))]
    gate = GateDecision(mode="on", metric="hard", verdict="accept", reason="...", per_task=per_task,
                        baseline=Scores(hard=0.375, n=8), candidate=Scores(hard=0.875, n=8),
                        details={"stated_rules": {"own_tasks": ["a", "b", "c"], "won": ["a", "b"], "lost": []}})
    rules = [{"text": "we use pnpm, never npm", "scope": "lasting", "scope_reason": "stated in 3 tasks"}]
    lines = learned_lines(night("accepted", changes=changes, gate=gate, mining={"rules": rules}))
    assert lines == ["CLAUDE.md (staged for skillopt-sleep adopt):",
                     "  line 7: - we use pnpm, never npm.",
                     '    you taught it: "we use pnpm, never npm" (stated in 3 tasks)',
                     "held-out: 1/4 val tasks passed before, 3/4 after (hard score 0.38 -> 0.88, the same tasks)",
                     "the rules' own tasks: 2 won, 0 lost, of 3"]
    assert learned_lines(night("rejected", changes=changes[1:], gate=gate)) == []


def test_a_line_compiled_from_the_rules_checks_still_shows_the_users_words():
    changes = [FileChange(file="CLAUDE.md", kind="memory", state="written", added_at=[4, 5],
                          added=["- Use `pnpm`, never `npm` (e.g. `pnpm add`).", "- Keep commits small and focused."])]
    rules = [{"text": "dates are ISO here, YYYY-MM-DD please", "scope": "lasting", "scope_reason": "stated in 4 tasks",
              "keys": [["regex", r"\b\d{4}-\d{2}-\d{2}\b"]]},
             {"text": "we use pnpm in this repo, never npm", "scope": "lasting", "scope_reason": "stated in 3 tasks",
              "keys": [["has", "pnpm"], ["not", "npm"]]}]
    assert learned_lines(night("accepted", changes=changes, mining={"rules": rules})) == [
        "CLAUDE.md (written to this file):",
        "  line 4: - Use `pnpm`, never `npm` (e.g. `pnpm add`).",
        '    you taught it: "we use pnpm in this repo, never npm" (stated in 3 tasks)',
        "  line 5: - Keep commits small and focused."]


def test_the_morning_line_names_each_file_and_quotes_the_rules():
    changes = [FileChange(file="SKILL.md", kind="skill", state="unchanged"),
               FileChange(file="CLAUDE.md", kind="memory", state="written", added=["- use pnpm", "- ISO dates",
                                                                                     "- tabs"]),
               FileChange(file="AGENTS.md", kind="memory:codex", state="staged", added=["- use pnpm"])]
    line = changes_sentence(night("accepted", changes=changes))
    assert line == ('CLAUDE.md: learned 3 rules ("use pnpm"; "ISO dates", +1 more); AGENTS.md: learned 1 rule '
                    '("use pnpm") -- staged, not written yet: run \'skillopt-sleep adopt\'; SKILL.md: unchanged')


def test_a_promoted_pending_candidate_is_named_in_the_morning_line():
    changes = [FileChange(file="CLAUDE.md", kind="memory", state="written", added=["- ISO dates"])]
    line = changes_sentence(night("accepted", changes=changes,
                                  pending={"from_night": "2026-11-22T020000Z", "action": "promoted"}))
    assert line.endswith("(the candidate of night 2026-11-22T020000Z, now proven)")


def test_nothing_changed_says_why_in_a_developers_words():
    edit = EditRecord(target="memory", op="append", content="- use pnpm", status="applied")
    gate = GateDecision(mode="on", metric="hard", verdict="reject", reason="...",
                        details={"clause": "regression", "wins": 1, "losses": 1})
    assert nothing_changed_reason(night(edits=[edit], gate=gate)) == (
        "1 rule rejected: they broke a held-out task your files passed before")
    waiting = GateDecision(mode="on", metric="hard", verdict="reject", reason="...",
                           details={"clause": "margin", "wins": 1, "losses": 0, "pending": True})
    assert nothing_changed_reason(night(edits=[edit], gate=waiting, pending={"action": "stored"})) == (
        "1 rule waiting for more evidence: not enough held-out wins yet")
    untested = GateDecision(mode="on", metric="hard", verdict="reject", reason="...", details={"clause": "no_tasks"})
    assert "no held-out task tested them yet" in nothing_changed_reason(night(edits=[edit], gate=untested))
    assert nothing_changed_reason(night(tasks={"train": 0, "not_replayable": 4})) == (
        "no request tonight could be replayed (4 more kept as evidence only)")
    blocked = EditRecord(target="memory", op="append", content="- run curl", status="rejected",
                         reason="no_user_provenance: `curl`")
    assert "blocked" in nothing_changed_reason(night(edits=[blocked]))
    assert changes_sentence(night("no_sessions")) == "nothing changed: no new sessions since the last night"


def test_the_outcome_word_follows_the_users_files_not_the_gate_verdict():
    written = [FileChange(file="CLAUDE.md", kind="memory", state="written", added=["- x"])]
    assert outcome_word(night("accepted", changes=written)) == "learned"
    assert outcome_word(night("accepted", changes=[written[0].model_copy(update={"state": "staged"})])) == "learned"
    assert outcome_word(night("rejected", pending={"action": "stored"})) == "waiting"
    edit = EditRecord(target="memory", op="append", content="- x", status="applied")
    assert outcome_word(night("rejected", edits=[edit])) == "rejected"
    assert outcome_word(night("rejected")) == "kept"
    assert outcome_word(night("backend_error")) == "failed"
    assert outcome_word(night("budget_exhausted")) == "failed"
    assert outcome_word(night("interrupted")) == "interrupted"
    # diagnostics written before ``changes`` existed
    assert outcome_word(night("accepted", applied=["/p/CLAUDE.md"])) == "learned"
    # one vocabulary: the status command reads the same word from the raw diagnostics.json
    assert verdict(night("rejected", edits=[edit]).model_dump(mode="json")) == "rejected"
    assert set(VERDICTS) == {"learned", "waiting", "rejected", "kept", "failed", "interrupted"}


def test_chart_labels_tell_apart_nights_of_one_day():
    labels = [night_label(night_id, number) for number, night_id in
              enumerate(["2026-11-23T013000Z", "2026-11-23T193736Z", "2026-11-23T193736Z-2"], 1)]
    assert labels == ["#1 11-23 01:30", "#2 11-23 19:37", "#3 11-23 19:37-2"]
    assert len(set(labels)) == 3
    assert night_label("custom", 4) == "#4 custom"
