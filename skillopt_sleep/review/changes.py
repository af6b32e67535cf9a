"""What a night changed in the user's files, in the words a developer uses: learned, kept, rejected, waiting for
more evidence.

``file_changes`` compares each managed target's live text with what the night staged for it: the rule lines (the
lines of the managed block, heading and blank lines aside) added and removed, and whether the change was written to
the file tonight (``written``), only staged for ``skillopt-sleep adopt`` (``staged``), or nothing changed
(``unchanged``). ``changes_sentence`` says it in one line, and when nothing changed, why, in one sentence
(``nothing_changed_reason``). Edits "applied" by the step are applied to the *candidate*; only ``written`` means
the user's file changed.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from skillopt_sleep.documents.block import block_rule_lines
from skillopt_sleep.mine.provenance import is_blocked
from skillopt_sleep.mine.rulebook import line_keys, text_key
from skillopt_sleep.models import Diagnostics, FileChange, ReplayResult
from skillopt_sleep.review.staged import STAGED_NOTE

if TYPE_CHECKING:
    from skillopt_sleep.documents.targets import Document

#: Most rule lines quoted in a one-line summary.
QUOTED_RULES = 2
#: Most characters of one quoted rule.
QUOTE_CHARS = 60


def rule_lines(text: str) -> list[str]:
    """The rule lines of a document's managed block (``edits.block_rule_lines``), in order."""
    return [line for _, line in block_rule_lines(text)]


def file_changes(project: Path, documents: dict[str, Document], staged: dict[str, str],
                 applied: list[str]) -> list[FileChange]:
    """One ``FileChange`` per managed target (``documents``, kind -> Document), in order.

    staged: kind -> the text the night staged (absent: nothing staged for it); applied: the targets written to the
    project tonight (absolute paths, ``Diagnostics.applied``). ``file`` is project-relative.
    """
    written = {str(Path(path)) for path in applied}
    out = []
    for kind, document in documents.items():
        new_text = staged.get(kind)
        before, after = rule_lines(document.text), rule_lines(new_text) if new_text is not None else None
        try:
            name = str(document.path.relative_to(project))
        except ValueError:
            name = str(document.path)
        if after is None or new_text == document.text:
            out.append(FileChange(file=name, kind=kind, state="unchanged"))
            continue
        added = [line for line in after if line not in before]
        new_lines = new_text.splitlines()
        out.append(FileChange(
            file=name, kind=kind, state="written" if str(document.path) in written else "staged",
            added=added, removed=[line for line in before if line not in after],
            added_at=[new_lines.index(line) + 1 if line in new_lines else 0 for line in added]))
    return out


def _quote(lines: list[str]) -> str:
    shown = [line.lstrip("-*+ ").strip() for line in lines[:QUOTED_RULES]]
    shown = [text if len(text) <= QUOTE_CHARS else text[:QUOTE_CHARS - 1] + "…" for text in shown]
    more = f", +{len(lines) - QUOTED_RULES} more" if len(lines) > QUOTED_RULES else ""
    return "; ".join(f'"{text}"' for text in shown) + more


def _rules(count: int) -> str:
    return f"{count} rule{'s' if count != 1 else ''}"


def describe_change(change: FileChange) -> str:
    """One file's change: ``CLAUDE.md: learned 1 rule ("...")``, ``... staged, not written yet``, or ``unchanged``."""
    if change.state == "unchanged":
        return f"{change.file}: unchanged"
    parts = []
    if change.added:
        parts.append(f"learned {_rules(len(change.added))} ({_quote(change.added)})")
    if change.removed:
        parts.append(f"dropped {_rules(len(change.removed))} ({_quote(change.removed)})")
    text = f"{change.file}: {', '.join(parts) or 'reworded its rules'}"
    return text if change.state == "written" else text + STAGED_NOTE


def _failed_optimizer(diagnostics: Diagnostics) -> str | None:
    """When the optimizer's calls failed and so nothing could be proposed: why, with the fix; else None.

    Replies cut off at their token budget (errors with reason ``reply_cut_off``, after the meter's retry and
    repair) come first: ``the optimizer's replies were cut off at 512 tokens (2 of 2 calls); fix: ...``. Any other
    failure counts only when every optimizer call failed."""
    cost = diagnostics.cost.get("optimizer")
    failed = [error for error in diagnostics.errors if error.get("role") == "optimizer" and error.get("message")]
    calls = max(cost.calls if cost else 0, len(failed))
    cut = [error for error in failed if error.get("reason") == "reply_cut_off"]
    if cut:
        budget = max(int(error.get("max_tokens") or 0) for error in cut)
        return (f"the optimizer's replies were cut off at {budget} tokens ({len(cut)} of {calls} "
                f"call{'s' if calls != 1 else ''}); fix: raise structured_max_tokens "
                f"('skillopt-sleep config set structured_max_tokens {2 * budget}') or use a larger model")
    if failed and len(failed) == calls:
        return f"the optimizer's {len(failed)} call(s) all failed ({failed[-1]['message'][:QUOTE_CHARS * 2]})"
    return None


def nothing_changed_reason(diagnostics: Diagnostics) -> str:
    """Why no file changed tonight, in one sentence a developer reads in the morning. When the optimizer's calls
    failed and nothing was proposed, that comes first (``_failed_optimizer``), not "no rule was proposed"."""
    status = diagnostics.status
    if status == "no_sessions":
        return "no new sessions since the last night"
    if status == "no_tasks":
        return "the new sessions held no request that can be replayed and no rule you stated"
    if status == "dry_run":
        return "a dry run never writes"
    if status == "backend_error":
        return f"the model backend failed ({(diagnostics.failure or {}).get('fix', 'see the report')})"
    if status == "budget_exhausted":
        return "the night's call or token budget ran out before a decision"
    if status == "interrupted":
        return f"the night was stopped by {(diagnostics.failure or {}).get('signal', 'a signal')} before a decision"
    proposed = [edit for edit in diagnostics.edits if edit.status == "applied"]
    failed = None if proposed else _failed_optimizer(diagnostics)
    if failed:
        return failed
    if not proposed:
        blocked = sum(1 for edit in diagnostics.edits if is_blocked(edit))
        if blocked:
            return f"the only proposals were blocked ({blocked} named something you never typed)"
        train, kept = diagnostics.tasks.get("train", 0), diagnostics.tasks.get("not_replayable", 0)
        evidence = f" ({kept} more kept as evidence only)" if kept else ""
        if not train:
            return f"no request tonight could be replayed{evidence}"
        return (f"no rule was proposed: the {train} replayed request{'s' if train != 1 else ''} "
                f"gave nothing to learn{evidence}")
    gate = diagnostics.gate
    details = gate.details if gate else {}
    pending = (diagnostics.pending or {}).get("action") in ("stored", "kept")
    if status == "accepted":
        return "the accepted change only repeats what your files already say"
    if details.get("clause") == "regression":
        return f"{_rules(len(proposed))} rejected: they broke a held-out task your files passed before"
    if details.get("clause") in ("no_tasks",) or (pending and not details.get("wins")):
        return f"{_rules(len(proposed))} waiting for more evidence: no held-out task tested them yet"
    if pending:
        return f"{_rules(len(proposed))} waiting for more evidence: not enough held-out wins yet"
    if details.get("clause") == "failed_calls":
        return f"{_rules(len(proposed))} not judged: some held-out replays failed"
    if details.get("losses", 0) > details.get("wins", 0):
        return f"{_rules(len(proposed))} rejected: they lost more held-out tasks than they won"
    return f"{_rules(len(proposed))} rejected: no held-out task showed they help"


def changes_sentence(diagnostics: Diagnostics) -> str:
    """The morning line: what changed in each managed file, or ``nothing changed: <why>``."""
    changed = [change for change in diagnostics.changes if change.state != "unchanged"]
    if not changed:
        return f"nothing changed: {nothing_changed_reason(diagnostics)}"
    origin = (diagnostics.pending or {})
    source = (f" (the candidate of night {origin.get('from_night')}, now proven)"
              if origin.get("action") == "promoted" else "")
    unchanged = [change for change in diagnostics.changes if change.state == "unchanged"]
    return "; ".join(describe_change(change) for change in changed + unchanged) + source


def _taught_by(line: str, rules: list[dict]) -> dict | None:
    """The stated rule (a ``Diagnostics.mining["rules"]`` entry) an added line writes: the one in the same words, else
    the one whose check keys (``keys``) the line demands (``rulebook.line_keys``: a line compiled from the rule's
    checks, "Use `pnpm`, never `npm`."), else None."""
    same_words = next((rule for rule in rules if text_key(rule.get("text", "")) == text_key(line)), None)
    if same_words is not None:
        return same_words
    demanded = {key for key in line_keys(line) if key[0] != "text"}
    return next((rule for rule in rules if demanded & {tuple(key) for key in rule.get("keys") or []}), None)


def _tasks_passed(results: list[list[ReplayResult]]) -> int:
    """How many val tasks passed: every scored sample of the task hard 1 (samples that failed to run are left out)."""
    passed = 0
    for samples in results:
        scored = [result.hard for result in samples if result.error is None]
        passed += bool(scored) and all(hard == 1 for hard in scored)
    return passed


def learned_lines(diagnostics: Diagnostics) -> list[str]:
    """What a night that learned shows under its one-line summary, one string per line (empty when no file changed):
    each rule line added, with the file and line it goes to (``CLAUDE.md:12``) and, when it is a rule the user
    stated (in their words or compiled from its checks: ``_taught_by``), how often and in which words; then the
    held-out val tasks passed before -> after (the gate's hard score on the same tasks) and, for stated rules, their
    own train tasks won and lost."""
    changed = [change for change in diagnostics.changes if change.added]
    if not changed:
        return []
    stated = diagnostics.mining.get("rules", [])
    lines = []
    for change in changed:
        where = "written to this file" if change.state == "written" else "staged for skillopt-sleep adopt"
        lines.append(f"{change.file} ({where}):")
        for text, number in zip(change.added, change.added_at or [0] * len(change.added)):
            lines.append(f"  line {number}: {text.strip()}" if number else f"  {text.strip()}")
            rule = _taught_by(text, stated)
            if rule:
                lines.append(f"    you taught it: \"{rule['text']}\" ({rule.get('scope_reason') or rule.get('scope')})")
    gate = diagnostics.gate
    if gate is not None and gate.per_task:
        tasks = len(gate.per_task)
        before = _tasks_passed([comparison.baseline for comparison in gate.per_task])
        after = _tasks_passed([comparison.candidate for comparison in gate.per_task])
        lines.append(f"held-out: {before}/{tasks} val tasks passed before, {after}/{tasks} after "
                     f"(hard score {gate.baseline.hard:.2f} -> {gate.candidate.hard:.2f}, the same tasks)")
        own = gate.details.get("stated_rules") or {}
        if own.get("own_tasks"):
            lines.append(f"the rules' own tasks: {len(own.get('won', []))} won, {len(own.get('lost', []))} lost, "
                         f"of {len(own['own_tasks'])}")
    return lines
