"""Reflect: ask the optimizer model for at most ``edit_budget`` bounded edits to the skill document and memory.

Two modes, one structured call each (``ChatRequest(role="optimizer", json_schema=edits_schema(...))``):

* single-shot (``reflect.md``): failing and passing train tasks with the current skill document, memory, judge
  verdicts, and the user's own rules (``TaskRecord.rules``) and reactions (``evidence.reaction_text``);
* K-rollout contrastive (``reflect_contrastive.md``): for tasks whose K samples both passed and failed, a passing
  and a failing answer side by side, asking which general rule explains the difference.

The evidence is budgeted for a small local model (~4k tokens of context): at most ``MAX_TASKS_PER_CALL`` tasks
and ``MAX_EVIDENCE_CHARS`` characters of evidence, every text cut to a few hundred characters, each document to
``DOCUMENT_CHARS``. Only train tasks are shown: val/test tasks are held out and never
reach reflection.

The reply is parsed tolerantly (``backends.jsonextract.extract_json``: JSON inside prose or a fence). An invalid
reply is retried once with a short follow-up; a second invalid reply is reported in ``ReflectOutcome.error``.
Proposed edits are then filtered, each rejection with its reason (``EditRecord.status = "rejected"``):
the caller's content screen first (``screen``: provenance, see ``skillopt_sleep/provenance.py``), a target that may
not evolve, a missing anchor or content, a restatement of one task (``reject_restatements``),
a code fragment (``is_code_fragment``), and edits beyond the budget.

Minibatches: ``plan_minibatches`` cuts many train tasks into slices (failing tasks first) so that each reflect
call sees at most ``minibatch_size`` tasks; ``engine/step.py`` runs one ``reflect`` call per minibatch in
parallel and merges the patches (``engine/aggregate.py``). ``context`` adds caller-supplied evidence (recalled
past tasks, rejected edits) to the prompt.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from skillopt_sleep.backends.base import CallMeter, ChatMessage, ChatRequest
from skillopt_sleep.backends.jsonextract import extract_json
from skillopt_sleep.backends.structured import REPLY_CUT_OFF
from skillopt_sleep.documents.block import managed_block
from skillopt_sleep.models import EditRecord, ReplayResult, TaskRecord
from skillopt_sleep.prompts import USER_RULE_PREFIX, load_prompt, quote_data, render_prompt
from skillopt_sleep.text import STOPWORDS, content_words, head, normalize, words

#: Most tasks shown to the optimizer in one call.
MAX_TASKS_PER_CALL = 12
#: Of those, at most this many passing tasks (they show what must not break).
MAX_PASSING_TASKS = 3
#: Characters kept of a request or an answer (reactions, rules and verdicts keep fewer).
HEAD_CHARS = 240
#: Characters of all task evidence together (~2k tokens), so the prompt fits a ~4k-token local model.
MAX_EVIDENCE_CHARS = 8000
#: Characters kept of the caller's extra context (``build_prompt(context=...)``).
CONTEXT_CHARS = 2000
#: Characters kept of the current skill document and of the memory.
DOCUMENT_CHARS = 1200
#: Characters of the raw optimizer reply kept for diagnostics.
RAW_HEAD_CHARS = 500
#: Restatement: an edit sharing this many consecutive words with a task's request or final answer.
RESTATEMENT_RUN = 8
#: Restatement: an edit with at least this many distinct content words ...
RESTATEMENT_MIN_CONTENT_WORDS = 10
#: ... of which at least this share appears in one task's request + final answer.
RESTATEMENT_SHARE = 0.75
#: Code fragment: more than this share of the edit's non-empty lines look like code.
CODE_LINE_SHARE = 0.5


#: A check on an edit's content: the reason it may not be written, or None (``screen_edits``).
ContentScreen = Callable[[str], "str | None"]

#: The edit ops an optimizer may use (``"add"`` in a reply is accepted as ``"append"``, see ``models.EditRecord``).
EDIT_OPS = ("append", "insert_after", "replace", "delete")

RETRY_MESSAGE = (
    "Your reply was not valid JSON matching the schema. Reply again with only the JSON object "
    '{"edits": [...]}, nothing else.'
)


class ReflectOutcome(BaseModel):
    """What reflection produced.

    edits: accepted proposals (status ``proposed``), at most the edit budget; rejected: proposals dropped before
    the gate (status ``rejected``, ``reason`` set); raw_head: first 500 characters of the last optimizer reply;
    error: why no usable reply came back (None when the reply parsed); invalid_items: edit objects in the reply
    that did not validate as an ``EditRecord`` (bad op or target) and were dropped.
    """

    edits: list[EditRecord] = Field(default_factory=list)
    raw_head: str = ""
    rejected: list[EditRecord] = Field(default_factory=list)
    error: str | None = None
    invalid_items: int = 0


@dataclass(frozen=True)
class EditScope:
    """What proposed edits may do: at most ``edit_budget`` of them, to the documents that may evolve, each content
    passing ``screen`` (``screen_edits`` applies it). One per step (``engine/step.py``)."""

    edit_budget: int
    """L: the most edits a reflect call may propose (0 = none)."""
    evolve_skill: bool = True
    """The skill document may be edited."""
    evolve_memory: bool = True
    """The memory document may be edited."""
    screen: ContentScreen | None = None
    """Checked first on the content of every edit (the step passes ``provenance.provenance_reason``); None: none."""

    @property
    def targets(self) -> list[str]:
        """The documents that may evolve, in the order the prompts name them (memory first)."""
        return [name for name, allowed in (("memory", self.evolve_memory), ("skill", self.evolve_skill)) if allowed]


# --------------------------------------------------------------------------- text helpers


def _longest_common_run(left: list[str], right: list[str]) -> int:
    """Length of the longest run of consecutive words shared by two word lists (dynamic programming)."""
    best = 0
    previous = [0] * (len(right) + 1)
    for left_word in left:
        current = [0] * (len(right) + 1)
        for index, right_word in enumerate(right, start=1):
            if left_word == right_word and left_word:
                current[index] = previous[index - 1] + 1
                best = max(best, current[index])
        previous = current
    return best


def _without_rules(text_words: list[str], rules: list[str]) -> list[str]:
    """``text_words`` with every occurrence of a rule's word sequence blanked (runs cannot cross the gap)."""
    out = list(text_words)
    for rule in rules:
        rule_words = words(rule)
        size = len(rule_words)
        if not size:
            continue
        for start in range(len(out) - size + 1):
            if out[start:start + size] == rule_words:
                out[start:start + size] = [""] * size
    return out


# --------------------------------------------------------------------------- rejection criteria


def restatement_reason(content: str, task: TaskRecord) -> str | None:
    """Why ``content`` merely restates ``task`` (None when it does not).

    Criterion, against the task's request and its original final answer (never against the user's rules):

    1. it shares a run of at least ``RESTATEMENT_RUN`` (8) consecutive words with either text, or
    2. it has at least ``RESTATEMENT_MIN_CONTENT_WORDS`` (10) distinct content words and at least
       ``RESTATEMENT_SHARE`` (75%) of them occur in the request + final answer.

    The user's own rules (``task.rules``) are blanked out of the request first: a request refined by a
    correction holds the rule's words, and an edit that states that rule is what reflection should produce.
    A short rule (fewer than 8 words, e.g. "Use pnpm, never npm") can therefore never be a restatement.

    Every text is compared in normal form (``text.normalize``): zero-width spaces or fullwidth letters in an edit
    do not hide a copied run.
    """
    edit_words = words(normalize(content))
    rules = [normalize(rule) for rule in task.rule_texts]
    request, final_answer = normalize(task.request), normalize(task.evidence.final_answer)
    for label, text in (("request", request), ("final answer", final_answer)):
        source_words = _without_rules(words(text), rules)
        run = _longest_common_run(edit_words, source_words)
        if run >= RESTATEMENT_RUN:
            return f"restates task {task.id}: {run} consecutive words copied from its {label}"
    edit_content = {word for word in edit_words if word not in STOPWORDS and len(word) >= 3}
    if len(edit_content) >= RESTATEMENT_MIN_CONTENT_WORDS:
        source = " ".join(w for w in _without_rules(words(request), rules) if w)
        source += " " + final_answer.lower()
        copied = edit_content & content_words(source)
        share = len(copied) / len(edit_content)
        if share >= RESTATEMENT_SHARE:
            return (f"restates task {task.id}: {len(copied)} of {len(edit_content)} content words copied from "
                    f"its request and final answer")
    return None


def reject_restatements(edits: list[EditRecord], tasks: list[TaskRecord]) -> list[EditRecord]:
    """Mark every edit that restates one of ``tasks`` (see ``restatement_reason``) as rejected, with the reason.

    Returns the same list (edits are updated in place); edits already rejected are left as they are.
    """
    for edit in edits:
        if edit.status == "rejected" or not edit.content.strip():
            continue
        for task in tasks:
            reason = restatement_reason(edit.content, task)
            if reason:
                edit.status = "rejected"
                edit.reason = reason
                break
    return edits


_CODE_START = re.compile(
    r"^(```|~~~|def |class |import |from \S+ import |return\b|const |let |var |function\b|#include|"
    r"public |private |if\s*\(|for\s*\(|while\s*\(|[}\])]|\$ |>>> )"
)
_CODE_CHARS = set("{}[]()<>=;$|&\\*`/")
_INLINE_CODE = re.compile(r"`([^`\n]+)`")


def looks_like_code(line: str) -> bool:
    """True for a line that reads as code rather than prose.

    A line (markdown bullet stripped) is code when it starts with a fence, a keyword (``def``, ``import``,
    ``const``, ``if (``...), a closing bracket or a shell/REPL prompt (``$ ``, ``>>> ``); when it ends with
    ``;`` or ``{``; or when more than 15% of its characters are code punctuation (``{}[]()<>=;$|&\\*`/``), the
    backticks that delimit inline code in prose aside ("Use `pnpm`, never `npm`." is a rule).
    """
    text = line.strip()
    text = re.sub(r"^([-*+]|\d+[.)])\s+", "", text)
    if not text:
        return False
    if _CODE_START.match(text) or text.endswith((";", "{")):
        return True
    punctuation = sum(1 for char in _INLINE_CODE.sub(r"\1", text) if char in _CODE_CHARS)
    return len(text) >= 4 and punctuation / len(text) > 0.15


def is_code_fragment(content: str) -> bool:
    """True when more than ``CODE_LINE_SHARE`` (50%) of the non-empty lines of ``content`` look like code."""
    lines = [line for line in content.splitlines() if line.strip()]
    if not lines:
        return False
    return sum(1 for line in lines if looks_like_code(line)) / len(lines) > CODE_LINE_SHARE


# --------------------------------------------------------------------------- schema


def edits_schema(edit_budget: int, targets: list[str]) -> dict[str, Any]:
    """JSON schema of the optimizer reply: ``{"edits": [edit, ...]}`` with at most ``edit_budget`` items.

    Each edit: target (one of ``targets``), op (append | insert_after | replace | delete), anchor (string or
    null: an exact line of the managed block for insert_after/replace/delete), content, rationale, evidence
    (task ids). Every property is required and no other is allowed (valid for strict structured outputs).
    """
    edit = {
        "type": "object",
        "properties": {
            "target": {"type": "string", "enum": list(targets)},
            "op": {"type": "string", "enum": list(EDIT_OPS)},
            "anchor": {"type": ["string", "null"]},
            "content": {"type": "string"},
            "rationale": {"type": "string"},
            "evidence": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["target", "op", "anchor", "content", "rationale", "evidence"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {"edits": {"type": "array", "items": edit, "maxItems": max(0, int(edit_budget))}},
        "required": ["edits"],
        "additionalProperties": False,
    }


# --------------------------------------------------------------------------- evidence


def _task_lines(task: TaskRecord) -> list[str]:
    lines = [f"Request: {quote_data(head(task.request, HEAD_CHARS), inline=True)}"]
    lines += [f"{USER_RULE_PREFIX}{head(rule, 160)}" for rule in task.rule_texts[:4]]
    if task.evidence.reaction_text and task.evidence.reaction != "none":
        lines.append(f"User reaction ({task.evidence.reaction}): {head(task.evidence.reaction_text, 160)}")
    return lines


def _verdict(result: ReplayResult) -> str:
    verdict = result.fail_reason or "passed"
    if result.rationale:
        verdict += f" ({quote_data(head(result.rationale, 160), inline=True)})"
    return verdict


def _single_block(task: TaskRecord, results: list[ReplayResult]) -> tuple[str, str]:
    failing = [r for r in results if not r.hard]
    shown = failing[0] if failing else results[0]
    status = "FAIL" if failing else "PASS"
    header = f"### task {task.id}: {status} (hard {shown.hard}, soft {shown.soft:.2f})"
    lines = [header, *_task_lines(task), f"Answer: {quote_data(head(shown.response, HEAD_CHARS), inline=True)}",
             f"Judge: {_verdict(shown)}"]
    return status, "\n".join(lines)


def _contrast_block(task: TaskRecord, results: list[ReplayResult]) -> tuple[str, str]:
    passing = [r for r in results if r.hard]
    failing = [r for r in results if not r.hard]
    if not (passing and failing):
        return _single_block(task, results)
    header = f"### task {task.id}: MIXED ({len(passing)} of {len(results)} samples passed)"
    lines = [
        header,
        *_task_lines(task),
        f"Passing answer (sample {passing[0].sample}): {quote_data(head(passing[0].response, 200), inline=True)}",
        f"Failing answer (sample {failing[0].sample}): {quote_data(head(failing[0].response, 200), inline=True)}",
        f"Judge on the failing answer: {_verdict(failing[0])}",
    ]
    return "MIXED", "\n".join(lines)


def _select_blocks(tasks: list[TaskRecord], results: list[ReplayResult], contrastive: bool,
                   max_passing: int = MAX_PASSING_TASKS) -> list[str]:
    """Render the evidence blocks: MIXED first, then FAIL (tasks with user rules first), then at most
    ``max_passing`` PASS."""
    by_task: dict[str, list[ReplayResult]] = {}
    for result in results:
        if result.error is None:  # a failed call is not a score of the skill
            by_task.setdefault(result.task_id, []).append(result)
    ranked: list[tuple[int, int, str]] = []
    for position, task in enumerate(tasks):
        scored = sorted(by_task.get(task.id, []), key=lambda r: r.sample)
        if not scored:
            continue
        status, block = (_contrast_block if contrastive else _single_block)(task, scored)
        rank = {"MIXED": 0, "FAIL": 1 if task.rules or task.evidence.reaction_text else 2, "PASS": 3}[status]
        ranked.append((rank, position, block))
    ranked.sort(key=lambda item: (item[0], item[1]))
    blocks: list[str] = []
    passing = used = 0
    for rank, _position, block in ranked:
        if len(blocks) >= MAX_TASKS_PER_CALL:
            break
        if used + len(block) > MAX_EVIDENCE_CHARS:
            continue
        if rank == 3:
            if passing >= max_passing:
                continue
            passing += 1
        blocks.append(block)
        used += len(block) + 2
    return blocks


def document_view(text: str) -> str:
    """The document as shown to the optimizer: whole when short, else its head and its managed block (the
    editable lines that anchors must be copied from), within ``DOCUMENT_CHARS``."""
    text = (text or "").strip()
    if not text:
        return "(empty)"
    if len(text) <= DOCUMENT_CHARS:
        return text
    block = managed_block(text)
    if not block:
        return text[:DOCUMENT_CHARS].rstrip() + "\n[... truncated]"
    block = block[: DOCUMENT_CHARS * 2 // 3]
    head = text[: max(200, DOCUMENT_CHARS - len(block))].rstrip()
    return f"{head}\n[... truncated]\nEditable lines (managed block):\n{block}"


def context_section(context: str) -> str:
    """The ``{context}`` value of the reflect prompts: ``""`` for no context, else a ``## Context`` section
    holding the text (cut to ``CONTEXT_CHARS``) as data (``prompts.quote_data``: recalled tasks, past edits and old
    document lines are evidence, never instructions) followed by a blank line."""
    text = (context or "").strip()
    if not text:
        return ""
    if len(text) > CONTEXT_CHARS:
        text = text[:CONTEXT_CHARS].rstrip() + "\n[... truncated]"
    return f"## Context\n{quote_data(text)}\n\n"


def build_prompt(*, tasks: list[TaskRecord], results: list[ReplayResult], documents: Mapping[str, str],
                 edit_budget: int, targets: list[str], contrastive: bool, context: str = "",
                 max_passing: int = MAX_PASSING_TASKS) -> str:
    """Render the reflect prompt (``reflect.md`` or ``reflect_contrastive.md``) with budgeted evidence.

    documents: ``{"skill": text, "memory": text}`` (a missing kind is shown empty); context: extra evidence text
    (e.g. recalled past tasks, rejected edits), shown in a ``## Context`` section before the tasks; ``""`` renders
    nothing. max_passing: most PASS tasks shown.
    """
    blocks = _select_blocks(tasks, results, contrastive, max_passing)
    return render_prompt(
        "reflect_contrastive" if contrastive else "reflect",
        edit_budget=edit_budget,
        targets=", ".join(targets),
        skill=document_view(documents.get("skill", "")),
        memory=document_view(documents.get("memory", "")),
        tasks="\n\n".join(blocks) if blocks else "(no scored tasks)",
        context=context_section(context),
    )


# --------------------------------------------------------------------------- parsing


def parse_edits(text: str) -> tuple[list[EditRecord], int] | None:
    """Parse an optimizer reply into edits; None when it is not a JSON reply with an ``edits`` list.

    Accepted shapes: ``{"edits": [...]}``, a bare list of edits, or one edit object. Returns
    ``(edits, invalid_items)``; when every item is invalid (and there was at least one), returns None.
    """
    data = extract_json(text)
    if isinstance(data, dict) and isinstance(data.get("edits"), list):
        items = data["edits"]
    elif isinstance(data, list):
        items = data
    elif isinstance(data, dict) and "op" in data and "target" in data:
        items = [data]
    else:
        return None
    edits: list[EditRecord] = []
    invalid = 0
    for item in items:
        if not isinstance(item, dict):
            invalid += 1
            continue
        fields = {key: item[key] for key in ("target", "op", "anchor", "content", "rationale") if key in item}
        fields["content"] = fields.get("content") or ""
        fields["rationale"] = fields.get("rationale") or ""
        evidence = item.get("evidence")
        fields["evidence"] = [str(e) for e in evidence] if isinstance(evidence, list) else []
        try:
            edits.append(EditRecord(**fields))
        except ValidationError:
            invalid += 1
    if items and not edits:
        return None
    return edits, invalid


def _reject(edit: EditRecord, reason: str) -> None:
    edit.status = "rejected"
    edit.reason = reason


def is_placeholder(content: str) -> bool:
    """True for content copied from the prompt's reply example: fewer than 2 words of letters (``...``, ``TBD``)
    or a ``<description in angle brackets>``, read in normal form (``text.normalize``: zero-width characters are
    no words)."""
    text = normalize(content).strip().lstrip("-* ").strip()
    return len(re.findall(r"[^\W\d_]{2,}", text)) < 2 or (text.startswith("<") and text.endswith(">"))


_ANNOTATION = re.compile(
    r"\s*[(\[](?:[^()\[\]]*?\b(?:night|evidence|task|tasks|see|from|per|cf\.?|source|rationale)\b[^()\[\]]*?|"
    r"\s*t-[0-9a-f]{6,}(?:\s*,\s*t-[0-9a-f]{6,})*\s*)[)\]]")
_TASK_ID = re.compile(r"\bt-[0-9a-f]{12}\b")


def clean_content(content: str) -> str:
    """An edit's content as a document line: context annotations that only make sense tonight removed ("(night
    2026-11-23T193736Z)", "(evidence: t-1a2b...)", "[t-...]"), and one bullet format (``- text``) for a one-line
    rule. Multi-line content keeps its lines."""
    text = _ANNOTATION.sub("", content or "")
    text = _TASK_ID.sub("", text)
    lines = [line.rstrip() for line in text.strip().splitlines()]
    if len(lines) == 1:
        body = re.sub(r"^\s*(?:[-*+•]|\d+[.)])\s+", "", lines[0]).strip()
        return f"- {body}" if body else ""
    return "\n".join(lines)


def _instruction_lines() -> list[set[str]]:
    """The content words of every instruction line of the optimizer prompts (reflect, contrastive, merge, rank)."""
    lines: list[set[str]] = []
    for name in ("reflect", "reflect_contrastive", "merge", "rank", "miner"):
        for line in load_prompt(name).splitlines():
            if "{" in line and "}" in line and len(line.strip()) < 40:
                continue
            found = content_words(line)
            if len(found) >= 4:
                lines.append(found)
    return lines


def restates_instructions(content: str) -> bool:
    """True when an edit copies the optimizer's own instructions (``RESTATEMENT_SHARE`` of its content words, at
    least 4, come from one instruction line of the prompts): "The user's rules and reactions are the strongest
    signal: turn them into rules." is our prompt speaking, not a rule of the user."""
    found = content_words(content)
    if len(found) < 4:
        return False
    return any(len(found & line) / len(found) >= RESTATEMENT_SHARE for line in _instruction_lines())


def screen_edits(edits: list[EditRecord], tasks: list[TaskRecord], *, edit_budget: int, evolve_skill: bool,
                 evolve_memory: bool, screen: ContentScreen | None = None) -> tuple[list[EditRecord], list[EditRecord]]:
    """Split proposals into (accepted, rejected). Accepted keep status ``proposed``, at most ``edit_budget``; their
    content is cleaned (``clean_content``). screen: checked first on the content of every edit that has one (the
    step passes ``provenance.provenance_reason``: an edit may name only what the user typed); a reason rejects."""
    allowed = {"skill": evolve_skill, "memory": evolve_memory}
    for edit in edits:
        if edit.op != "delete" and edit.content:
            edit.content = clean_content(edit.content)
        reason = screen(edit.content) if screen is not None and edit.op != "delete" and edit.content else None
        if reason:
            _reject(edit, reason)
        elif not allowed[edit.target]:
            _reject(edit, f"the {edit.target} document may not evolve (evolve_{edit.target} = false)")
        elif edit.op not in ("append", "prepend") and not (edit.anchor or "").strip():
            _reject(edit, f"op {edit.op} needs an anchor (an exact line of the managed block)")
        elif edit.op != "delete" and not edit.content.strip():
            _reject(edit, f"op {edit.op} needs content")
        elif edit.op != "delete" and is_placeholder(edit.content):
            _reject(edit, "placeholder content (fewer than 2 words): state a rule or a procedure")
        elif edit.op != "delete" and is_code_fragment(edit.content):
            _reject(edit, "mostly code: more than half of its lines look like code; state a rule instead")
        elif edit.op != "delete" and restates_instructions(edit.content):
            _reject(edit, "restates the optimizer's instructions, not a rule of the user or a procedure")
    reject_restatements([edit for edit in edits if edit.op != "delete"], tasks)
    accepted: list[EditRecord] = []
    rejected: list[EditRecord] = []
    for edit in edits:
        if edit.status == "rejected":
            rejected.append(edit)
        elif len(accepted) >= edit_budget:
            _reject(edit, f"over the edit budget ({edit_budget})")
            rejected.append(edit)
        else:
            accepted.append(edit)
    return accepted, rejected


# --------------------------------------------------------------------------- reflect


def reflect(*, tasks: list[TaskRecord], results: list[ReplayResult], documents: Mapping[str, str],
            scope: EditScope, meter: CallMeter, contrastive: bool = False, context: str = "",
            recalled: Sequence[TaskRecord] = (), max_passing: int = MAX_PASSING_TASKS) -> ReflectOutcome:
    """Ask the optimizer for at most ``scope.edit_budget`` edits from the train replays; see the module docstring.

    tasks: the train tasks (tasks of another split are ignored: held-out tasks never reach reflection);
    results: their replays (errored results are skipped: they are not scores); documents: ``{"skill": text,
    "memory": text}`` (a missing kind is shown empty); scope: what the edits may do (``EditScope``); contrastive: K
    samples per task at temperature > 0 were replayed and pass-vs-fail pairs are shown; context: extra evidence
    text for the prompt (see ``build_prompt``); recalled: the past tasks ``context`` shows (an edit that restates
    one is rejected like one that restates a train task: the optimizer copied a recalled request and its "[asked 1x
    ...]" note into the memory, world 2's night 4); max_passing: most passing tasks shown. Makes one optimizer call,
    two when the first reply is not valid JSON matching the schema. Raises ``BackendError`` / ``BudgetExhausted``
    from the meter (the night stops).
    """
    targets, edit_budget = scope.targets, scope.edit_budget
    if not targets:
        return ReflectOutcome(error="neither the skill document nor the memory may evolve")
    if edit_budget < 1:
        return ReflectOutcome(error=f"edit budget is {edit_budget}: nothing to propose")
    train = [task for task in tasks if task.split == "train"]
    prompt = build_prompt(tasks=train, results=results, documents=documents, edit_budget=edit_budget,
                          targets=targets, contrastive=contrastive, context=context, max_passing=max_passing)
    schema = edits_schema(edit_budget, targets)
    parsed, raw = request_edits(meter, prompt, schema, purpose="reflect")
    raw_head = raw[:RAW_HEAD_CHARS]
    if parsed is None:
        return ReflectOutcome(raw_head=raw_head,
                              error="optimizer reply was not valid JSON matching the edits schema (retried once)")
    edits, invalid = parsed
    accepted, rejected = screen_edits(edits, [*train, *recalled], edit_budget=edit_budget,
                                      evolve_skill=scope.evolve_skill,
                                      evolve_memory=scope.evolve_memory, screen=scope.screen)
    return ReflectOutcome(edits=accepted, rejected=rejected, raw_head=raw_head, invalid_items=invalid)


def request_edits(meter: CallMeter, prompt: str, schema: dict[str, Any], *,
                  purpose: str) -> tuple[tuple[list[EditRecord], int] | None, str]:
    """Make one optimizer call for an ``{"edits": [...]}`` reply (``purpose``: "reflect" or "merge", which sets its
    token budget in the meter); retry once with ``RETRY_MESSAGE`` when the reply does not parse (``parse_edits``)
    or the call failed transiently after the backend's own retries, except a reply the meter already retried with
    more room and could not repair (reason ``reply_cut_off``: asking again at the same budget cannot help).
    Returns (parsed edits and invalid-item count, or None after two invalid replies; the last raw reply or error).
    Raises ``BackendError`` (fatal errors) / ``BudgetExhausted``."""
    messages = [ChatMessage(role="user", content=prompt)]
    raw = ""
    for attempt in range(2):
        result = meter.chat(ChatRequest(role="optimizer", messages=messages, json_schema=schema,
                                         temperature=0.0, purpose=purpose), fail_on_error=False)
        if result.reason == REPLY_CUT_OFF:
            return None, f"(call failed: {result.error})"
        raw = result.text if result.ok else f"(call failed: {result.error})"
        parsed = parse_edits(raw)
        if parsed is not None:
            return parsed, raw
        if attempt == 0:
            messages = [*messages, ChatMessage(role="assistant", content=raw[:2000] or "(empty)"),
                        ChatMessage(role="user", content=RETRY_MESSAGE)]
    return None, raw


# --------------------------------------------------------------------------- minibatches


class Minibatch(BaseModel):
    """The train tasks one reflect call sees.

    index: 0-based position (failure minibatches come first); kind: ``"failure"`` when it holds at least one
    failing task, else ``"success"``; results: the scored replays of its tasks (errored ones left out).
    """

    index: int
    kind: Literal["failure", "success"]
    tasks: list[TaskRecord]
    results: list[ReplayResult]


def task_failed(results: list[ReplayResult]) -> bool:
    """True when one scored (error-free) replay of the task has hard 0."""
    return any(result.error is None and not result.hard for result in results)


def plan_minibatches(tasks: list[TaskRecord], results: list[ReplayResult], *, minibatch_size: int,
                     failure_only: bool = False) -> list[Minibatch]:
    """Cut the train tasks into minibatches for reflection.

    Kept: train tasks with at least one scored replay (N of them; errored replays are not scores). Order:
    failing tasks (``task_failed``) first, then passing ones, each in the given order; ``failure_only`` drops
    the passing ones. Cut into consecutive slices of ``minibatch_size``: ceil(N / minibatch_size) minibatches,
    none when N is 0. Raises ValueError when minibatch_size < 1.
    """
    if minibatch_size < 1:
        raise ValueError(f"minibatch_size must be >= 1, got {minibatch_size}")
    by_task: dict[str, list[ReplayResult]] = {}
    for result in results:
        if result.error is None:
            by_task.setdefault(result.task_id, []).append(result)
    scored = [task for task in tasks if task.split == "train" and by_task.get(task.id)]
    failing = [task for task in scored if task_failed(by_task[task.id])]
    passing = [] if failure_only else [task for task in scored if not task_failed(by_task[task.id])]
    ordered = failing + passing
    batches: list[Minibatch] = []
    for start in range(0, len(ordered), minibatch_size):
        chunk = ordered[start:start + minibatch_size]
        batches.append(Minibatch(
            index=len(batches),
            kind="failure" if any(task_failed(by_task[task.id]) for task in chunk) else "success",
            tasks=chunk,
            results=[result for task in chunk for result in by_task[task.id]],
        ))
    return batches
