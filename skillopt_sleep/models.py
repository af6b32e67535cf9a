"""The data that flows through a night (pydantic v2 models).

harvest -> ``Session`` (with ``Turn``s) -> mine -> ``TaskRecord`` (with a ``Judge``) -> replay -> ``ReplayResult``
-> reflect -> ``EditRecord`` -> gate -> ``GateDecision`` -> ``Diagnostics`` (``diagnostics.json``).

All texts stored in these models are already secret-redacted (see ``skillopt_sleep.redaction.redact``).
All datetimes are timezone-aware (UTC).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

SourceName = Literal["claude", "codex", "gemini", "copilot", "opencode", "cursor", "aider", "cline"]
Role = Literal["miner", "target", "judge", "optimizer"]
Split = Literal["train", "val", "test"]
Reaction = Literal["approval", "correction", "reask", "interrupted", "rejected", "aborted", "none"]
CheckOp = Literal[
    "contains",
    "not_contains",
    "regex",
    "starts_with",
    "ends_with",
    "max_chars",
    "max_words",
    "section_present",
    "json_valid",
    "tool_called",
    "language",
]
EditOp = Literal["append", "prepend", "insert_after", "replace", "delete"]
#: Older spellings of edit ops, accepted on input (optimizer replies, old diagnostics.json) and normalized.
EDIT_OP_ALIASES = {"add": "append"}
EditTarget = Literal["skill", "memory"]
EditStatus = Literal["proposed", "applied", "unmatched", "rejected"]
NightStatus = Literal["accepted", "rejected", "no_sessions", "no_tasks", "backend_error", "budget_exhausted", "dry_run",
                      "interrupted"]
GateVerdict = Literal["accept_new_best", "accept", "reject", "skipped"]

DIAGNOSTICS_FORMAT = "skillopt-sleep-diagnostics/1"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --------------------------------------------------------------------------- harvest


class ToolUse(_Model):
    """One tool call the agent really made (evidence from the transcript, never from model text)."""

    name: str
    input_head: str = ""
    """First ~200 characters of the tool input (JSON or free text), redacted."""
    error: str | None = None
    """Head of the error text when the tool result was an error (``is_error`` / non-zero exit)."""


class Turn(_Model):
    """One human request in a session and what followed it up to the next human request."""

    index: int
    request: str
    """The user's own words (slash command: ``/name args``), redacted. Injected text is never here."""
    timestamp: datetime | None = None
    cwd: str | None = None
    kind: Literal["prompt", "command", "plan"] = "prompt"
    final_answer: str = ""
    """Text of the last non-synthetic assistant message of the span, redacted."""
    tools: list[ToolUse] = Field(default_factory=list)
    interrupted: bool = False
    """``[Request interrupted by user]`` (Claude) inside the span."""
    rejected_tool: bool = False
    """The user rejected a tool use (Claude) inside the span."""
    aborted: bool = False
    """``turn_aborted`` (Codex) ended the span."""
    rejection_feedback: str | None = None
    queued_messages: list[str] = Field(default_factory=list)
    """Text typed while the agent was busy (steering)."""
    command_body: str | None = None
    """Kind ``command``: the expansion of the slash command or skill as the transcript holds it (Claude Code's
    ``isMeta`` record after the command), redacted. It is the command file's text, not the user's words: it is
    replayed as the prompt, never mined for rules. None when the transcript holds no expansion."""
    tool_calls: int = 0
    """Tool calls the agent made in the span (all of them; ``tools`` keeps at most ``TOOLS_KEPT``)."""

    @property
    def tool_errors(self) -> int:
        return sum(1 for tool in self.tools if tool.error)


class Session(_Model):
    """One agent session (a transcript file, or the part of it read since the last checkpoint)."""

    source: SourceName
    session_id: str
    path: str
    cwd: str | None = None
    version: str | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    entrypoint: str | None = None
    """Claude ``entrypoint`` (``cli``/``sdk-cli``) or Codex ``originator``/``source``."""
    turns: list[Turn] = Field(default_factory=list)


class HarvestStats(_Model):
    """Counts of what a harvest looked at; every skip has a reason."""

    files_scanned: int = 0
    files_unchanged: int = 0
    """Skipped by the checkpoint: same size and mtime as last night."""
    files_grown: int = 0
    """Read from the stored byte offset."""
    bytes_read: int = 0
    sessions_harvested: int = 0
    sessions_skipped: dict[str, int] = Field(default_factory=dict)
    """reason -> count (``subagent``, ``sdk_cli``, ``own_marker``, ``out_of_scope``, ``too_old``, ``no_requests``,
    ``unreadable``, ...)."""
    messages_skipped: dict[str, int] = Field(default_factory=dict)
    """reason -> count of messages the human typed that are not requests (``command``: a control command such as
    Aider's ``/add`` or ``/undo``)."""
    malformed_lines: dict[str, int] = Field(default_factory=dict)
    """reason -> count (``bad_json``, ``truncated_last_line``, ``not_an_object``, ``binary``, ``too_long``, ...)."""
    records_unknown: int = 0
    requests: int = 0
    secrets_redacted: int = 0
    errors: list[str] = Field(default_factory=list)
    """Where reading raised and was contained (``harvest.read_plan.read_isolated``): ``"<reason> <file>: <exception
    type>"``, reason ``record_error`` (counted in ``malformed_lines``), ``file_error`` or ``source_error`` (counted in
    ``sessions_skipped``); one entry per file and reason, the first ``ERRORS_KEPT``."""

    ERRORS_KEPT: ClassVar[int] = 50

    def skip(self, reason: str, count: int = 1) -> None:
        self.sessions_skipped[reason] = self.sessions_skipped.get(reason, 0) + count

    def error(self, reason: str, where: object, error: BaseException) -> None:
        """Name the input (a file, ``db#session``, a source) where ``error`` was contained under ``reason`` (the
        exception's type only: its message may quote the transcript)."""
        if len(self.errors) < self.ERRORS_KEPT:
            self.errors.append(f"{reason} {where}: {type(error).__name__}")

    def malformed(self, reason: str, count: int = 1) -> None:
        self.malformed_lines[reason] = self.malformed_lines.get(reason, 0) + count

    def merge(self, other: HarvestStats) -> None:
        for name in ("files_scanned", "files_unchanged", "files_grown", "bytes_read", "sessions_harvested",
                     "records_unknown", "requests", "secrets_redacted"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for reason, count in other.sessions_skipped.items():
            self.skip(reason, count)
        for reason, count in other.malformed_lines.items():
            self.malformed(reason, count)
        for reason, count in other.messages_skipped.items():
            self.messages_skipped[reason] = self.messages_skipped.get(reason, 0) + count
        self.errors.extend(other.errors[: max(0, self.ERRORS_KEPT - len(self.errors))])


class FileCheckpoint(_Model):
    """Where the harvest stopped in one transcript file."""

    size: int
    mtime_ns: int
    offset: int
    """Byte offset just after the last complete line that was read."""
    session_id: str | None = None


# --------------------------------------------------------------------------- tasks and judges


class Check(_Model):
    """One deterministic rule check on a response.

    ``value`` is a string for text ops, an int for ``max_chars``/``max_words``, a heading text for
    ``section_present``, a tool name for ``tool_called``, an ISO 639-1 code for ``language`` (the response's prose
    is in that language) and ``None`` for ``json_valid``. What each op means: ``skillopt_sleep.checks``.
    """

    op: CheckOp
    value: str | int | None = None
    case_sensitive: bool = False
    origin: str = "rule"
    """Where it came from: ``correction``, ``house_rule``, ``llm_miner``, ``config``."""
    rule: str | None = None
    """The rule in the user's own words, when the check was derived from one."""


class Judge(_Model):
    """How a task's response is scored. hard in {0, 1}: all checks pass (and reference matches if set);
    soft in [0, 1]: fraction of checks passed, or the rubric score when there are no checks."""

    checks: list[Check] = Field(default_factory=list)
    rubric: str | None = None
    reference: str | None = None

    @property
    def empty(self) -> bool:
        return not self.checks and not self.rubric and not self.reference


class TaskEvidence(_Model):
    """How the original session went for this request (input for reflection and for validating the task's
    checks; never shown to the target). Texts are redacted and cut (``mine.BEHAVIOUR_CHARS``)."""

    final_answer: str = ""
    """The answer the user reacted to: the first corrected answer when there was a correction, else the last."""
    tools: list[str] = Field(default_factory=list)
    tool_errors: list[str] = Field(default_factory=list)
    reaction: Reaction = "none"
    reaction_text: str = ""
    """The user's messages that reacted to this task (corrections, re-asks, thanks), redacted. Labels only: they
    are never part of the replayed prompt."""
    corrected_answers: list[str] = Field(default_factory=list)
    """What the agent did in each span the user objected to (correction, re-ask, rejection, interrupt): the answer
    text followed by its tool inputs (commands run, file contents written), in order. A check must fail one of
    them (``validation.validate_checks``)."""
    accepted_answer: str | None = None
    """What the agent did in the last span when the user did not object to it (approved, moved on, or ended the
    session) and it is not a vacuous reply: a check must pass it. None when the session has no such answer."""


NotReplayable = Literal["command_body_missing", "plan_handoff", "needs_repo_state", "long_tool_run"]
RuleScope = Literal["lasting", "candidate", "one_off"]


class RuleStatement(_Model):
    """One rule the user stated in a task, in their own words, and whether it is meant to last.

    scope: ``lasting`` (a house rule for every future session: it may become a line of the memory), ``candidate``
    (stated once without a lasting scope: it waits until it is stated again) or ``one_off`` (the scope or detail of
    this one task: never a memory line); why: the reason for that decision (``mine/lasting.py``); origin:
    ``house_rule`` (stated in a request), ``correction`` (in a reaction to an answer) or ``rule_reader`` (read by the
    LLM rule reader from a sentence the deterministic reader did not know); language: ISO 639-1 of the words, when
    known; gloss: the rule in English when the words are in another language (``rule_reader``)."""

    text: str
    origin: str = "house_rule"
    scope: RuleScope = "candidate"
    why: str = ""
    language: str | None = None
    gloss: str | None = None


def _statements(value: Any) -> Any:
    """Tasks archived before scopes were decided hold plain strings: each was proposed, so it reads as lasting."""
    if isinstance(value, list):
        return [RuleStatement(text=item, scope="lasting", why="recorded before scopes were decided")
                if isinstance(item, str) else item for item in value]
    return value


class TaskRecord(_Model):
    """A task mined from a real user request: replayed as text when ``replayable``; otherwise evidence only (its
    rules and corrections still count)."""

    id: str
    """Stable id: ``t-`` + 12 hex of sha256 of the normalized request (so a task keeps its split)."""
    source: SourceName
    project: str | None = None
    request: str
    """The replayed prompt: the user's request (a slash command: its expansion, then its arguments) followed by
    its refinements, redacted. Never a correction or a rule statement: those are labels (``evidence``, ``rules``)."""
    refinements: list[str] = Field(default_factory=list)
    """Messages that added requirements to the request ("also add a test"); already part of ``request``."""
    replayable: bool = True
    """False when a text replay cannot mean anything (``not_replayable`` says why): never replayed or gated."""
    not_replayable: NotReplayable | None = None
    intent: str | None = None
    session_ids: list[str] = Field(default_factory=list)
    recurrence: int = 1
    """How many near-duplicate requests were merged into this task."""
    evidence: TaskEvidence = Field(default_factory=TaskEvidence)
    rules: list[RuleStatement] = Field(default_factory=list)
    """Rules the user stated, in their own words, each with its scope (the strongest signal a session holds). A
    plain string is read as a lasting statement (tasks archived before scopes were decided)."""
    authored: list[str] = Field(default_factory=list)
    """What the user typed for this task, redacted: the request as typed (a slash command: ``/name args``, never its
    expansion), its refinements and the user's reactions, pasted blocks left out (``provenance.authored_text``). The
    only transcript text an edit's commands, URLs and paths may come from (``provenance.UserText``)."""
    judge: Judge = Field(default_factory=Judge)
    split: Split = "train"
    first_seen: datetime | None = None
    last_seen: datetime | None = None
    rejected_checks: list[str] = Field(default_factory=list)
    """Checks dropped at mining time, each with its reason: a regex that does not compile, or a check that the
    session's own answers do not support (``validation.validate_checks``)."""
    hard_evidence: bool = False
    """The task is replayable and its checks (each validated against the session) fail a vacuous reply when the
    request asks for an artefact: only such tasks decide the gate. A task judged by its rubric alone is soft
    evidence: it can never make a candidate win."""

    @field_validator("rules", mode="before")
    @classmethod
    def _plain_rules(cls, value: Any) -> Any:
        return _statements(value)

    @property
    def rule_texts(self) -> list[str]:
        """The rules' words, in order."""
        return [rule.text for rule in self.rules]


# --------------------------------------------------------------------------- replay


class Usage(_Model):
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class ReplayResult(_Model):
    """One scored rollout of a task. hard in {0, 1}; soft in [0, 1]; latency_s in seconds."""

    task_id: str
    sample: int = 0
    response: str = ""
    hard: int = 0
    soft: float = 0.0
    fail_reason: str | None = None
    rationale: str = ""
    tools_called: list[str] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    latency_s: float = 0.0
    error: str | None = None
    """Set when the target call itself failed: the result is then not a score of the skill."""
    cached: bool = False
    llm_judged: bool = False
    """A rubric score from an LLM judge was used (``JudgeOutcome.llm_judged``): the soft score is then an
    opinion, so the paired gate does not count a soft-only rise as a win."""

    @field_validator("soft")
    @classmethod
    def _clamp_soft(cls, value: float) -> float:
        return min(1.0, max(0.0, float(value)))


# --------------------------------------------------------------------------- reflect and edit


class EditRecord(_Model):
    """One bounded edit proposed by reflection, and what became of it."""

    target: EditTarget
    op: EditOp
    anchor: str | None = None
    """Exact line (inside the managed block) that ``insert_after``/``replace``/``delete`` act on."""
    content: str = ""
    rationale: str = ""
    evidence: list[str] = Field(default_factory=list)
    """Task ids that motivated the edit."""
    status: EditStatus = "proposed"
    reason: str = ""
    """Why it was rejected / unmatched."""

    @field_validator("op", mode="before")
    @classmethod
    def _op_alias(cls, value: Any) -> Any:
        """Accept ``"add"`` (the op's former name) as ``"append"``, and ops in any case (``"Replace"``)."""
        if isinstance(value, str):
            normalized = value.strip().lower()
            return EDIT_OP_ALIASES.get(normalized, normalized)
        return value


# --------------------------------------------------------------------------- calls and diagnostics


class CallRecord(_Model):
    """One LLM call made by the night (successful or not)."""

    role: Role
    backend: str
    model: str
    ok: bool
    usage: Usage = Field(default_factory=Usage)
    latency_s: float = 0.0
    attempts: int = 1
    error: str | None = None
    error_kind: str | None = None
    cached: bool = False
    reason: str | None = None
    """Machine-readable cause: ``reply_cut_off`` (a structured reply cut at its token budget, not repairable) on a
    failure, ``reply_repaired`` on a success whose cut-off JSON was repaired; None otherwise."""
    max_tokens: int | None = None
    """Completion-token budget of a structured call (the last one asked, after a retry); None for free text."""


class RoleCost(_Model):
    calls: int = 0
    failed_calls: int = 0
    cached_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0


class Scores(_Model):
    """Mean scores over a set of replays. hard, soft, gate: floats in [0, 1]; n = number of results."""

    hard: float = 0.0
    soft: float = 0.0
    gate: float = 0.0
    n: int = 0


class TaskComparison(_Model):
    """Per held-out (val) task: baseline vs candidate."""

    task_id: str
    request_head: str = ""
    baseline: list[ReplayResult] = Field(default_factory=list)
    candidate: list[ReplayResult] = Field(default_factory=list)
    outcome: Literal["win", "loss", "tie", "n/a"] = "n/a"
    origin: str = ""
    """Where the val task came from: ``tonight``, or ``archive <night id>`` (mined on an earlier night)."""
    rules: list[str] = Field(default_factory=list)
    """The user's rules the task's checks test (their phrasings)."""


class GateDecision(_Model):
    mode: Literal["on", "off"]
    metric: str
    rule: str = "strict"
    verdict: GateVerdict
    reason: str
    baseline: Scores = Field(default_factory=Scores)
    candidate: Scores = Field(default_factory=Scores)
    per_task: list[TaskComparison] = Field(default_factory=list)
    details: dict[str, Any] = Field(default_factory=dict)


class FileChange(_Model):
    """What a night did to one managed file (``changes.file_changes``). file: project-relative; state: ``written``
    (the file changed tonight), ``staged`` (waits for ``skillopt-sleep adopt``) or ``unchanged``; added / removed:
    rule lines of its managed block."""

    file: str
    kind: str
    state: Literal["written", "staged", "unchanged"]
    added: list[str] = Field(default_factory=list)
    removed: list[str] = Field(default_factory=list)
    added_at: list[int] = Field(default_factory=list)
    """1-based line number of each ``added`` line in the staged or written file (same order)."""


class Diagnostics(_Model):
    """``diagnostics.json``: what happened tonight and why. See README "Diagnostics fields"."""

    format: str = DIAGNOSTICS_FORMAT
    night_id: str
    status: NightStatus
    summary: str
    """One human line; for failures it says what to fix."""
    project: str | None = None
    headline: str = ""
    """What changed in the user's files, in one line (``changes.changes_sentence``; the summary starts with it)."""
    changes: list[FileChange] = Field(default_factory=list)
    """What changed in each managed file tonight (written, staged or unchanged), rule lines added and removed."""
    started_at: datetime
    finished_at: datetime | None = None
    sources: list[str] = Field(default_factory=list)
    backend: dict[str, Any] = Field(default_factory=dict)
    """name, models per role, and why it was chosen."""
    harvest: HarvestStats = Field(default_factory=HarvestStats)
    """All sources read tonight, merged."""
    harvest_per_source: dict[str, HarvestStats] = Field(default_factory=dict)
    """source name -> what was read and skipped in that source's sessions (``harvest`` is their sum)."""
    tasks: dict[str, int] = Field(default_factory=dict)
    """Counts per split (train/val/test) and ``total``."""
    mining: dict[str, Any] = Field(default_factory=dict)
    """What mining made of the sessions: ``dropped`` messages by reason (acknowledgement, injected, pasted screen,
    folded reactions, ...), ``replayable`` / ``not_replayable`` tasks (with counts by reason), ``hard_evidence``
    tasks, ``validated_checks``, ``rejected_checks`` (each with its task and reason), ``rules`` stated tonight and
    the gate's val pool (``val_pool``: tonight / archive)."""
    edit_budget: int = 0
    baseline: Scores = Field(default_factory=Scores)
    candidate: Scores = Field(default_factory=Scores)
    test: dict[str, Scores] = Field(default_factory=dict)
    gate: GateDecision | None = None
    train_results: list[ReplayResult] = Field(default_factory=list)
    edits: list[EditRecord] = Field(default_factory=list)
    optimizer_raw_head: str = ""
    proposed: list[str] = Field(default_factory=list)
    """Documents written under ``proposed/`` (only those that changed)."""
    applied: list[str] = Field(default_factory=list)
    errors: list[dict[str, Any]] = Field(default_factory=list)
    """Call and stage errors: role, model, kind, message (redacted)."""
    failure: dict[str, Any] | None = None
    """For ``backend_error``/``budget_exhausted``: role, model, reason, fix; for ``interrupted``: signal, stage,
    reason, fix."""
    cost: dict[str, RoleCost] = Field(default_factory=dict)
    """Calls and tokens by role (miner, target, judge, optimizer)."""
    stage_seconds: dict[str, float] = Field(default_factory=dict)
    stage_calls: dict[str, int] = Field(default_factory=dict)
    """LLM calls by stage: the night's (``mine_llm``; ``memory``: the pending candidate's re-test; ``test``) and the
    step's (``rollout``, ``reflect``, ``aggregate``: the wording choice, ``gate``: val replays, re-tests, flips);
    they add up to the calls of ``cost``."""
    memory: dict[str, Any] = Field(default_factory=dict)
    """The archive across nights (``archive.around_step.AcrossNights.report``; the field keeps its name, a
    diagnostics.json format): ``archive`` (search backend, tasks new / recurring / total), ``recalled`` (past
    train task ids shown to the optimizer), ``meter`` (the rejected-edit ledger: edits shown as already rejected,
    edits blocked), ``slow_update`` and ``dream`` (what they did)."""
    pending: dict[str, Any] | None = None
    """The gate's pending candidate: ``from_night``, ``action`` (``promoted``, ``dropped``, ``kept``, or
    ``stored`` for tonight's own), ``reason``, earlier and re-test wins / losses. None when there was none."""
    team: dict[str, Any] | None = None
    """Tonight's team rules (``team/night.py``): ``mode``, rules ``read``, ``proposed`` ids, ``skipped`` and
    ``overridden`` (``{id, reason}``), ``contradictions``, ``error``, and the gate's ``accepted``, ``rejected`` and
    ``pending`` (``{id, wins, losses, ties, reason}``). None when the project has no team rules."""
    config: dict[str, Any] = Field(default_factory=dict)
    versions: dict[str, str] = Field(default_factory=dict)


def diagnostics_json_schema() -> dict[str, Any]:
    """Return the JSON schema of ``diagnostics.json`` (exported as ``docs/diagnostics.schema.json``)."""
    return Diagnostics.model_json_schema()
