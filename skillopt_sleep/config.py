"""Configuration: one pydantic model, four layered sources (later wins).

defaults < TOML file (``paths.config_file()``, or ``--config`` / ``$SKILLOPT_SLEEP_CONFIG``)
< environment ``SKILLOPT_SLEEP_<KEY>`` (upper-case key) < CLI flags.

Unknown keys and invalid values raise ``ConfigError`` naming the source (file path, env var, flag) and the key.
"""

from __future__ import annotations

import os
import shlex
import sys
import warnings
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from skillopt_sleep import paths
from skillopt_sleep.errors import ConfigError
from skillopt_sleep.fsio import write_text_atomic

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ENV_PREFIX = "SKILLOPT_SLEEP_"
#: Environment variables with our prefix that are not config keys.
_NON_KEY_ENV = {"CONFIG", "CONFIG_DIR", "STATE_DIR", "DATA_DIR", "HOME", "RAISE_ERRORS", "CRONTAB", "REPLAY",
                "AGENT_CLIS",  # the real agent CLIs of the tests (.ci/install-agent-clis)
                "MODELS_FIND_LINKS"}  # model_store.FIND_LINKS_ENV: an offline folder of the model's part wheels


def _source_names() -> tuple[str, ...]:
    from skillopt_sleep.models import SourceName  # its pydantic models are not needed to load a config

    return get_args(SourceName)


#: Most val tasks a night's gate may replay (``gate_max_val``; the trainer's step has no such cap).
MAX_NIGHT_VAL = 100
#: Longest file name and path the tool accepts for a managed target, in bytes (Linux's NAME_MAX and PATH_MAX).
NAME_MAX = 255
PATH_MAX = 4096
#: The config keys that name a document a night writes (relative to the project).
TARGET_KEYS = ("skill_path", "memory_path")
#: Keys renamed, old name -> its one name. The old name is still accepted where users could have it (deprecated).
RENAMED_KEYS = {"lr_scheduler": "edit_budget_schedule"}

_Settings = TypeVar("_Settings", bound="StepConfig")


class StepConfig(BaseModel):
    """How a SkillOpt step rolls out, reflects, merges and gates: the keys a night (``SleepConfig``), the trainer
    (``trainer.SkillOptConfig``) and one step (``engine.step.StepSettings``) share, each defined here once."""

    model_config = ConfigDict(extra="forbid")

    # -- the step
    rollouts_k: int = Field(1, ge=1, le=8, description=(
        "Samples per train task; > 1 enables K-rollout contrastive reflection."))
    rollout_temperature: float = Field(0.7, ge=0, le=2, description="Sampling temperature for K > 1 rollouts.")
    minibatch_size: int = Field(8, ge=1, le=12, description=(
        "Most train tasks one reflect call sees (at most 12, what one reflect prompt shows); more train tasks are "
        "reflected on in parallel minibatches (failing tasks first) whose edits are then merged. One minibatch = one "
        "reflect call."))
    merge_batch_size: int = Field(4, ge=2, le=16, description=(
        "Patch lists (one per minibatch) merged by one optimizer call; more are merged hierarchically."))
    failure_only: bool = Field(False, description=(
        "Reflect only on failing train tasks (default: failing and passing ones)."))
    propose_user_rules: bool = Field(True, description=(
        "Rule mining from corrections: propose the rules users stated in their corrections of failing train tasks, in "
        "their own words, as edits (first in line for the edit budget; the gate still decides)."))
    rule_wording: Literal["compiled", "user"] = Field("compiled", description=(
        "How a rule you stated is written into the memory. ``compiled``: as the short imperative its validated checks "
        "demand, with the literals in backticks and one example from an answer you accepted (\"Use `pnpm`, never "
        "`npm` (e.g. `pnpm add`).\"), when the rule reader reads that line back as the same checks and it passes "
        "every screen; else in your words. ``user``: always in your words. Your words stay the rule's provenance in "
        "``rules`` and the report."))
    wording_max_calls: int = Field(0, ge=0, description=(
        "Wording chosen by evidence (``rule_wording = compiled``): most target calls a night spends choosing how "
        "each rule you stated is worded. The candidates (the compiled line with and without its example, your words, "
        "your words plus the compiled line; each read back as the same checks) are replayed on the rule's own train "
        "tasks and the one that passes most is written (ties: the shortest). A rule still corrected after its line "
        "was adopted is re-worded the same way when another wording passes more of its tasks. Spent on the rules you "
        "stated most first; replays are cached. 0 (the default) = off: the compiled line, else your words. Off "
        "because on the three learning worlds the choice wrote no better lines than compiling alone, at up to 12 "
        "more calls a night (docs/benchmarks.md)."))
    wording_rewrite: bool = Field(True, description=(
        "With the wording choice on: when no candidate line passes every own task of a rule, ask the optimizer once "
        "for another line (within ``wording_max_calls``: the call and its replays, after every rule's own lines were "
        "replayed). It is kept only when the rule "
        "reader reads it back as the same checks, it passes every screen, and it passes more own tasks than every "
        "other candidate."))

    # -- the gate
    gate_metric: Literal["hard", "soft", "mixed"] = Field("hard", description=(
        "Score the gate compares: hard, soft, or ``(1-w)*hard + w*soft``."))
    gate_mixed_weight: float = Field(0.3, ge=0, le=1, description="w of the mixed metric.")
    gate_rule: Literal["strict", "paired"] = Field("paired", description=(
        "``paired``: per val task win/loss/tie (baseline and candidate replayed tonight on the same tasks); accept "
        "iff wins - losses >= ``gate_margin``, a one-sided sign test gives p <= ``gate_alpha``, and no task the "
        "baseline passed in every sample fails. ``strict`` (SkillOpt's rule): the candidate's mean gate score must be "
        "strictly higher than the baseline's, and no val task the baseline passed in every sample may fail."))
    gate_margin: int = Field(1, ge=0, description="``paired`` gate: least (won val tasks - lost val tasks) to accept.")
    gate_alpha: float = Field(0.5, ge=0, le=1, description=(
        "``paired`` gate: largest one-sided exact sign-test p-value (wins vs losses, ties left out) to accept. At 0.5 "
        "the test blocks nothing beyond ``gate_margin = 1``; lower it (0.25) for more caution, fewer acceptances."))
    gate_samples: int = Field(4, ge=1, le=8, description=(
        "``paired`` gate: samples per side for a val task whose outcome could be noise (a win, a loss, or samples "
        "that disagree); other val tasks are replayed once. A task whose second samples repeat the first ones word "
        "for word on both sides (a deterministic backend) stops at two."))
    gate_repair: bool = Field(True, description=(
        "When the gate rejects a candidate that won some val tasks and lost one to three, find the edits to blame "
        "(the candidate without each edit, replayed on the lost tasks) and gate the candidate without them once more "
        "(``engine/repair.py``). Costs about edits x lost tasks + val tasks extra target calls, only on such nights."))
    gate_flip_samples: int = Field(4, ge=0, le=8, description=(
        "The flip re-test: at temperature 0 a line added to a document can change a small model's answer to an "
        "unrelated request. A val task the baseline passed in every sample and the candidate now fails (on at least "
        "two samples per side, so never with ``gate_samples`` 1) is replayed "
        "this many times per side at ``gate_flip_temperature``; it vetoes the candidate only if the candidate passes "
        "it significantly less often (``gate_flip_alpha``), else it is recorded as a flip: it still counts as a lost "
        "task but does not veto. 0 = off: every such task vetoes."))
    gate_flip_temperature: float = Field(0.7, ge=0, le=2, description=(
        "Sampling temperature of the flip re-test (sample i uses seed + i)."))
    gate_flip_alpha: float = Field(0.25, ge=0, le=1, description=(
        "Flip re-test: largest one-sided Fisher exact p-value (candidate passes fewer samples than the baseline) that "
        "confirms a regression. At 4 samples per side, 0.25 confirms a drop of two passes (4 vs 2) and calls a drop "
        "of one (4 vs 3) a flip; 0.5 confirms any drop."))
    gate_flip_max_tasks: int = Field(2, ge=0, le=12, description=(
        "Most val tasks one step (and the pending candidate's re-test) re-tests for a flip: at most this x "
        "``gate_flip_samples`` x 2 extra target calls. A regressed task beyond it vetoes as before."))

    # -- calls and sampling
    workers: int = Field(4, ge=1, le=64, description="Concurrent replay calls.")
    seed: int = Field(0, description="Seed for sampling and splits.")

    @classmethod
    def from_config(cls: type[_Settings], config: BaseModel, **values: Any) -> _Settings:
        """Return a ``cls`` holding every setting it shares (by name) with ``config``, ``values`` on top: the
        trainer's settings from a night's config (``SkillOptConfig.from_config(sleep_config, num_epochs=2)``), one
        step's from either. Names no field, so a key added to these models needs no copying code."""
        shared = cls.model_fields.keys() & type(config).model_fields.keys()
        return cls.model_validate({**{name: getattr(config, name) for name in shared}, **values})


class NightStepConfig(StepConfig):
    """The step keys a night sets and the trainer fixes (it trains the skill document only, always gates, on its
    whole selection split)."""

    evolve_skill: bool = Field(True, description="Let the night edit the skill document.")
    evolve_memory: bool = Field(True, description="Let the night edit the memory document (CLAUDE.md / AGENTS.md).")
    gate_mode: Literal["on", "off"] = Field("on", description=(
        "``on``: accept only if held-out (val) tasks improve; ``off``: accept greedily (daily use)."))
    gate_max_val: int = Field(12, ge=1, description=(
        "Most val tasks the gate replays a night: tonight's, then those of earlier nights from the task archive (the "
        "ones that test what tonight's edits state first), newest first. Only tasks with validated checks count. A "
        "night allows at most 100 (``MAX_NIGHT_VAL``); the trainer gates on its whole selection split."))
    gate_stated_rules: Literal["own_tasks", "held_out"] = Field("own_tasks", description=(
        "How a candidate made only of rules you stated is gated. ``own_tasks``: a val tie is no evidence against your "
        "own rule; when the candidate lost no val task and regressed none, it is replayed on the train tasks the "
        "rules came from and accepted if it passes one the baseline failed and fails none it passed. ``held_out``: it "
        "must win val tasks like any other edit."))


class EditBudgetConfig(BaseModel):
    """The edit budget (the textual learning rate) and its schedule across nights or a run's steps: the keys a night
    and the trainer share (one step gets the resolved budget, ``StepSettings.edit_budget``)."""

    model_config = ConfigDict(extra="forbid")

    edit_budget: int = Field(3, ge=1, description=(
        "Most edits a night may apply (the textual learning rate; max of the scheduler)."))
    min_edit_budget: int = Field(1, ge=1, description="Floor of the edit-budget scheduler.")
    edit_budget_schedule: Literal["constant", "linear", "cosine", "autonomous"] = Field(
        "constant", validation_alias=AliasChoices("edit_budget_schedule", "lr_scheduler"), description=(
        "How the budget changes across nights (the trainer: across its steps). ``lr_scheduler``, the trainer's old "
        "name for this key, is still accepted (deprecated)."))

    @model_validator(mode="before")
    @classmethod
    def _warn_renamed(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for old, new in RENAMED_KEYS.items():
                if old in data:
                    warnings.warn(f"{old!r} is deprecated: use {new!r}", DeprecationWarning, stacklevel=2)
        return data


class SleepConfig(NightStepConfig, EditBudgetConfig):
    """Every setting of skillopt-sleep. Field descriptions are the reference (``config show``); the step and gate
    keys are defined once, in ``StepConfig``, ``NightStepConfig`` and ``EditBudgetConfig``."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)
    _sources: dict[str, str] = PrivateAttr(default_factory=dict)  # key -> where it was set (``source_of``)

    # -- harvest
    source: str = Field("auto", description=(
        "Which transcripts to read: ``auto`` = every source that has sessions (never a silent fallback), ``all``, one "
        "source (``claude``, ``codex``, ``gemini``, ``copilot``, ``opencode``, ``cursor``, ``aider``, ``cline``) or "
        "several separated by commas (``gemini,aider``)."))
    scope: Literal["project", "all"] = Field("project", description=(
        "``project``: only sessions whose cwd is the project or below it; ``all``: every session."))
    claude_home: Path | None = Field(None, description=(
        "Claude Code root (default ``$CLAUDE_CONFIG_DIR`` or ``~/.claude``)."))
    codex_home: Path | None = Field(None, description="Codex CLI root (default ``$CODEX_HOME`` or ``~/.codex``).")
    gemini_home: Path | None = Field(None, description="Gemini CLI root (default ``~/.gemini``).")
    copilot_home: Path | None = Field(None, description="GitHub Copilot CLI root (default ``~/.copilot``).")
    opencode_home: Path | None = Field(None, description=(
        "OpenCode data folder (default ``$XDG_DATA_HOME/opencode`` or ``~/.local/share/opencode``)."))
    cursor_home: Path | None = Field(None, description="Cursor root (default ``~/.cursor``).")
    aider_home: Path | None = Field(None, description=(
        "Aider chat history file, or the folder holding ``.aider.chat.history.md`` (default "
        "``$AIDER_CHAT_HISTORY_FILE``, else the project)."))
    cline_home: Path | None = Field(None, description=(
        "VS Code ``User/globalStorage`` folder holding Cline, Roo Code and Kilo tasks (default: VS Code's)."))
    include_sdk_sessions: bool = Field(False, description=(
        "Also mine headless Claude Code runs (``entrypoint: sdk-cli``, i.e. ``claude -p``)."))
    lookback_hours: float = Field(72.0, ge=0, description=(
        "First night only: how far back to read (0 = all history). Later nights read what is new."))
    harvest_workers: int = Field(0, ge=0, le=64, description=(
        "Worker processes that read Claude Code and Codex files when at least 32 MB are left to read (a first night "
        "over a long history): 0 = one per core (at most 8), 1 = one loop. Beside other threads (progress on a "
        "terminal) a forkserver starts them, from 128 MB left to read."))

    # -- mining and splits
    llm_mine: bool | None = Field(None, description=(
        "Ask the optimizer model for checks on the tasks the user corrected whose own words gave no validated check "
        "(one call each; its checks are validated against the session like every other). None = on, except for the "
        "mock simulator and the tiny embedded model."))
    rule_reader_calls: int = Field(4, ge=0, le=100, description=(
        "Most calls a night of the LLM rule reader (role ``miner``, on when ``llm_mine`` is): it translates the "
        "sentences the user typed in a language other than English (10 a call) so the rules in them are read; the "
        "rule stays in the user's words. 0 = off."))
    val_fraction: float = Field(0.3, ge=0, lt=1, description=(
        "Share of tasks held out for the gate (by a hash of the task id, stable across nights)."))
    test_fraction: float = Field(0.15, ge=0, lt=1, description=(
        "Share of tasks held out for the report only (never reflected on, never gated on)."))
    max_tasks_per_night: int = Field(40, ge=1, description=(
        "Most tasks a night replays (recurring and corrected tasks first)."))

    # -- backend
    backend: Literal["auto", "openai", "local", "claude", "codex", "gemini", "copilot", "opencode", "mock"] = Field(
        "auto", description=(
        "LLM backend. ``auto``: configured endpoint/key > your agent CLI > embedded local model > error."))
    base_url: str | None = Field(None, description="OpenAI-compatible endpoint (default ``$OPENAI_BASE_URL``).")
    api_key: str | None = Field(None, description="API key (prefer ``$OPENAI_API_KEY``; never printed).")
    target_model: str = Field("gpt-4o-mini", description="Model replayed as the agent (openai backend).")
    optimizer_model: str = Field("gpt-4o-mini", description="Model that mines, reflects and judges (openai backend).")
    judge_model: str | None = Field(None, description="Rubric judge model (default: the optimizer model).")
    model_path: Path | None = Field(None, description=(
        "Model of ``backend = local``: a .gguf file, a catalog name (``qwen2.5-coder-1.5b``, pulled with "
        "``models pull``), ``hf.co/<user>/<repo>[:QUANT]`` or ``<user>/<repo>[:QUANT]`` (a Hugging Face GGUF repo "
        "in the Hugging Face cache), or ``ollama:<name>``: with backend ``local`` or ``auto`` that one means "
        "backend ``openai`` at ``ollama_base_url`` with ``target_model`` and ``optimizer_model`` ``<name>``. "
        "Default: the largest pulled model, else the bundled SmolLM2-135M-Instruct."))
    ollama_base_url: str = Field("http://127.0.0.1:11434/v1", description=(
        "Ollama's OpenAI-compatible endpoint, used when ``model_path = \"ollama:<name>\"``."))
    claude_bin: str = Field("claude", description=(
        "``claude`` executable: a name looked up on PATH or an absolute path."))
    codex_bin: str = Field("codex", description="``codex`` executable: a name looked up on PATH or an absolute path.")
    claude_model: str | None = Field(None, description=(
        "Model of ``backend = claude`` (``--model``, e.g. ``sonnet``); None = Claude Code's own default."))
    codex_model: str | None = Field(None, description=(
        "Model of ``backend = codex`` (``-m``); None = the Codex CLI's own default."))
    claude_base_url: str | None = Field(None, description=(
        "Anthropic Messages-compatible endpoint for ``backend = claude`` (e.g. a local model behind a proxy): the "
        "replay goes through the real ``claude`` CLI with ``ANTHROPIC_BASE_URL`` set to it, the skill and memory as "
        "its whole system prompt and no tools; no Claude login needed. None = Anthropic, with your login."))
    codex_base_url: str | None = Field(None, description=(
        "OpenAI Responses-compatible endpoint (ending in ``/v1``) for ``backend = codex``: the replay goes through "
        "the real ``codex`` CLI with a model provider on it, the skill and memory as its whole instructions and its "
        "tools turned off; no Codex login needed. None = OpenAI, with your login."))
    gemini_bin: str = Field("gemini", description=(
        "``gemini`` executable (``backend = gemini``): a name looked up on PATH or an absolute path."))
    copilot_bin: str = Field("copilot", description=(
        "``copilot`` executable (``backend = copilot``): a name looked up on PATH or an absolute path."))
    gemini_model: str | None = Field(None, description=(
        "Model of ``backend = gemini`` (``--model``, e.g. ``gemini-2.5-flash``); None = the Gemini CLI's default."))
    copilot_model: str | None = Field(None, description=(
        "Model of ``backend = copilot`` (``--model``); None = the Copilot CLI's default."))
    opencode_bin: str = Field("opencode", description=(
        "``opencode`` executable (``backend = opencode``): a name looked up on PATH or an absolute path."))
    opencode_model: str | None = Field(None, description=(
        "Model of ``backend = opencode`` (``-m``): ``provider/model`` (e.g. ``anthropic/claude-sonnet-4-5``), or with "
        "``opencode_base_url`` the model id at that endpoint; None = OpenCode's default for your login."))
    opencode_base_url: str | None = Field(None, description=(
        "OpenAI-compatible Chat Completions endpoint (ending in ``/v1``) for ``backend = opencode``: the replay goes "
        "through the real ``opencode`` CLI with a provider on it, the skill and memory as its whole system prompt and "
        "no tools; no OpenCode login needed. None = your OpenCode login (``opencode auth login``)."))
    request_timeout_s: float = Field(120.0, gt=0, description=(
        "Seconds before one LLM call times out (then retried as transient)."))
    max_retries: int = Field(3, ge=0, description=(
        "Retries for transient errors (429, 5xx, timeouts, empty replies), exponential backoff with jitter."))
    structured_max_tokens: int = Field(0, ge=0, description=(
        "Completion-token budget of every JSON reply (the optimizer's edits, merge and rank, the judge's score, the "
        "miners'). 0 = sized per reply: reflect and merge 2048, rank 512, miner and rule reader 1024, judge 256. A "
        "reply cut off at its budget is asked once more with twice as many tokens (the local backend: at most half "
        "its context), then its JSON is repaired; one that cannot be is a failed call (reason ``reply_cut_off``)."))

    # -- the step (the other step and gate keys: StepConfig, NightStepConfig, EditBudgetConfig)
    edit_budget_horizon: int = Field(30, ge=1, description=(
        "Nights over which ``linear``/``cosine`` decay from ``edit_budget`` to ``min_edit_budget``."))

    # -- memory across nights
    recall_k: int = Field(3, ge=0, le=12, description=(
        "Past train tasks from the task archive most similar to tonight's, shown to the optimizer when it reflects "
        "(with their last score and the user's rules); 0 = off. Val and test tasks are never recalled."))
    slow_update_every: int = Field(7, ge=0, description=(
        "Every N nights, replay archived train tasks with the documents of N nights ago and with today's; tasks that "
        "passed then and fail now join tonight's train tasks with the contrast as context; 0 = off."))
    slow_update_max_tasks: int = Field(8, ge=1, le=40, description=(
        "Most archived train tasks one slow update replays (twice each: old and new documents)."))
    dream_factor: int = Field(0, ge=0, le=5, description=(
        "Synthetic variants per train task (one optimizer call each paraphrases the request, keeping its judge and "
        "rules), used as extra train tasks, never val or test; 0 = off."))

    # -- documents
    skill_path: str | None = Field(None, description=(
        "Skill document, relative to the project (default ``.claude/skills/skillopt-sleep/SKILL.md`` for Claude Code; "
        "none for Codex)."))
    memory_path: str | None = Field(None, description=(
        "Memory document, relative to the project (default: the first written agent's file, ``CLAUDE.md`` for Claude "
        "Code; see ``targets``)."))
    targets: list[str] | None = Field(None, description=(
        "The agents whose memory files receive what a night learns, e.g. ``[\"claude\", \"aider\"]`` (``CLAUDE.md``, "
        "``CONVENTIONS.md``, ...: README \"Sources\"); None = every source read tonight."))
    auto_adopt: bool = Field(False, description=(
        "Write accepted documents to the project (atomically, with a backup) instead of only staging them."))
    stale_after_nights: int = Field(default=30, ge=1, description=(
        "A learned rule that no replayed task has tested for this many nights is shown as stale (``rules``, the "
        "report); nothing is deleted automatically."))
    notify: bool = Field(False, description=(
        "After a night that wrote or staged a change, show a desktop notification (``notify-send``; skipped silently "
        "where it does not exist)."))

    # -- team rules (``skillopt_sleep/team``)
    team_repo: str | None = Field(None, description=(
        "Where team rules are shared: None = the project's own git repository (``.skillopt-sleep/team/rules/``, "
        "travelling with ``git pull``); else a separate rules repository, a path or git URL, cloned under the state "
        "dir (``team init --repo``)."))
    team_member_id: str | None = Field(None, description=(
        "Your id in team rule files: 3 to 32 lower-case letters, digits and dashes, never a name or e-mail. None = a "
        "random id made once and kept in the state dir."))
    team_min_stated: int = Field(2, ge=1, description=(
        "``team publish`` shares an adopted rule that won held-out tasks once you stated it this many times (or it "
        "has been adopted for ``team_min_nights`` nights)."))
    team_min_nights: int = Field(3, ge=1, description=(
        "``team publish``: nights a rule must have been adopted to be shared without ``team_min_stated`` "
        "statements."))

    # -- budgets
    max_calls_per_night: int = Field(400, ge=0, description="All roles together; 0 = unlimited.")
    max_tokens_per_night: int = Field(400_000, ge=0, description=(
        "Prompt + completion tokens, all roles; 0 = unlimited."))
    max_minutes_per_night: float = Field(90.0, ge=0, description="Wall-clock minutes; 0 = unlimited.")
    max_usd_per_night: float = Field(0.0, ge=0, description=(
        "Only enforced when ``usd_per_1k_tokens`` is set; 0 = unlimited."))
    usd_per_1k_tokens: float = Field(0.0, ge=0, description="Price used for ``max_usd_per_night``.")

    # -- misc
    keep_nights: int = Field(60, ge=1, description="Night directories kept per project.")

    @field_validator("claude_home", "codex_home", "gemini_home", "copilot_home", "opencode_home", "cursor_home",
                     "aider_home", "cline_home", "model_path", mode="before")
    @classmethod
    def _expand(cls, value: Any) -> Any:
        if isinstance(value, str) and value:
            return Path(value).expanduser()
        return value

    @model_validator(mode="before")
    @classmethod
    def _ollama_model(cls, data: Any) -> Any:
        """``model_path = "ollama:<name>"`` with backend ``local``/``auto``: the openai backend at Ollama's endpoint
        (``models_hub.ollama_settings``; an ``api_key`` already set is kept)."""
        if not isinstance(data, dict):
            return data
        ref = str(data.get("model_path") or "")
        if ref.startswith("ollama:") and ref[len("ollama:"):].strip() and data.get("backend", "auto") in (
                "auto", "local"):
            from skillopt_sleep.models_hub import OLLAMA_BASE_URL, ollama_settings

            mapped = ollama_settings(ref[len("ollama:"):].strip(), data.get("ollama_base_url") or OLLAMA_BASE_URL)
            if data.get("api_key"):
                mapped.pop("api_key")
            data = {**data, **mapped}
        return data

    @field_validator(*TARGET_KEYS)
    @classmethod
    def _target_path(cls, value: str | None) -> str | None:
        problem = None if value is None else target_path_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("team_member_id")
    @classmethod
    def _member_id(cls, value: str | None) -> str | None:
        import re

        if value is not None and not re.fullmatch(r"[a-z0-9][a-z0-9-]{2,31}", value):
            raise ValueError("a member id is 3 to 32 lower-case letters, digits and dashes (never a name or e-mail)")
        return value

    @field_validator("gate_max_val")
    @classmethod
    def _night_val_cap(cls, value: int) -> int:
        if value > MAX_NIGHT_VAL:
            raise PydanticCustomError("less_than_equal", "Input should be less than or equal to {le}",
                                      {"le": MAX_NIGHT_VAL})
        return value

    @field_validator("targets")
    @classmethod
    def _known_targets(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        known = _source_names()
        names = [str(name).strip().lower() for name in value if str(name).strip()]
        unknown = [name for name in names if name not in known]
        if not names or unknown:
            raise ValueError(f"unknown target {', '.join(unknown) or '(none)'}: use one or more of {', '.join(known)}")
        return names

    @field_validator("source")
    @classmethod
    def _known_sources(cls, value: str) -> str:
        text = ",".join(part.strip() for part in value.lower().split(",") if part.strip())
        if text in ("auto", "all"):
            return text
        known = _source_names()
        unknown = [name for name in text.split(",") if name not in known]
        if not text or unknown:
            raise ValueError(f"unknown source {', '.join(unknown) or repr(value)}: use auto, all, or one or more of "
                             f"{', '.join(known)} separated by commas")
        return text

    def source_of(self, key: str) -> str:
        """Where ``key``'s value was set: the config file's path, ``environment SKILLOPT_SLEEP_<KEY>``, the
        ``--flag``, or ``defaults`` (``load_config`` records it; a config built otherwise says ``defaults``)."""
        return self._sources.get(key, "defaults")

    def check_targets(self, project: Path) -> None:
        """Refuse, before a night starts, a ``skill_path`` / ``memory_path`` the night could not write safely: one
        whose fully resolved path (``Path.resolve``: symlinks followed as far as the path exists, ``..`` applied to
        the rest) is outside ``project`` or is the project itself, a directory, under a file, or longer than
        PATH_MAX. Raises ConfigError naming where the key was set (``source_of``) and the key."""
        root = Path(project).resolve()
        for key in TARGET_KEYS:
            value = getattr(self, key)
            if not value:
                continue
            problem = _resolved_target_problem(root, Path(project) / value)
            if problem:
                raise ConfigError(problem, source=self.source_of(key), key=key,
                                  fix=f"set a file inside the project, relative to it ('skillopt-sleep config set "
                                      f"{key} {'CLAUDE.md' if key == 'memory_path' else DEFAULT_SKILL_PATH}')")

    def homes(self) -> dict[str, Path | None]:
        """Source name -> the root configured for it (``<source>_home``; None: its default)."""
        return {name: getattr(self, f"{name}_home") for name in _source_names()}

    def public_dump(self) -> dict[str, Any]:
        """Return the config as JSON-able data with secrets masked (for diagnostics and ``config show``)."""
        data = self.model_dump(mode="json")
        if data.get("api_key"):
            data["api_key"] = "***"
        return data


#: Default skill document, relative to the project (``documents.targets.DEFAULT_SKILL_PATH``: not imported here,
#: the config loads without the documents package).
DEFAULT_SKILL_PATH = ".claude/skills/skillopt-sleep/SKILL.md"


def target_path_problem(value: str) -> str | None:
    """What makes ``value`` unusable as a managed target's path whatever the project, or None: a NUL byte, a name
    over NAME_MAX bytes or a path over PATH_MAX bytes (UTF-8). An empty value means the default target."""
    if "\x00" in value:
        return "holds a NUL byte"
    size = len(value.encode("utf-8", "surrogateescape"))
    if size > PATH_MAX:
        return f"is {size} bytes long; a path may have at most {PATH_MAX}"
    for name in Path(value).parts:
        length = len(name.encode("utf-8", "surrogateescape"))
        if length > NAME_MAX:
            return f"has a name of {length} bytes; a name may have at most {NAME_MAX}"
    return None


def _resolved_target_problem(root: Path, path: Path) -> str | None:
    """What makes ``path`` unusable as a target of the project ``root`` (resolved), or None."""
    try:
        real = path.resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop (RuntimeError before Python 3.13)
        return f"cannot be resolved ({exc})"
    if real == root or not real.is_relative_to(root):
        return f"resolves to {real}, outside the project {root}"
    if len(str(real).encode("utf-8", "surrogateescape")) > PATH_MAX:
        return f"resolves to a path over {PATH_MAX} bytes"
    if real.is_dir():
        return f"is a directory ({real}), not a file"
    existing = next((parent for parent in real.parents if parent.exists()), None)
    if existing is not None and not existing.is_dir():
        return f"is under {existing}, which is a file, not a folder"
    return None


def did_you_mean(key: str) -> str:
    """``"; did you mean 'edit_budget'?"`` for a mistyped config key (the closest ``SleepConfig`` key by
    ``difflib.get_close_matches``, ratio >= 0.6), ``""`` when no key is close."""
    import difflib

    close = difflib.get_close_matches(key, list(SleepConfig.model_fields), n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


def problem_message(error: Any) -> str:
    """One pydantic error (an item of ``ValidationError.errors()``) as the text after the key: ``unknown key; did
    you mean 'edit_budget'?`` or the message and the value given, cut to about 80 characters."""
    if error["type"] == "extra_forbidden":
        return "unknown key" + did_you_mean(str(error["loc"][0]) if error["loc"] else "")
    shown = repr(error.get("input"))
    if len(shown) > 80:
        shown = f"{shown[:60]}... ({len(shown)} characters)"
    return f"{error['msg']} (got {shown})"


def _errors_to_config_error(exc: ValidationError, source: str, fix: str | None = None) -> ConfigError:
    first = exc.errors()[0]
    key = ".".join(str(part) for part in first["loc"]) or "?"
    return ConfigError(problem_message(first), source=source, key=key, fix=fix)


def read_config_file(path: Path) -> dict[str, Any]:
    """Return the TOML file as a dict ({} when it does not exist). Raises ConfigError on bad TOML."""
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc}", source=str(path)) from None
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"invalid TOML: {exc}", source=str(path)) from None


def env_overrides(environ: dict[str, str] | None = None) -> dict[str, str]:
    """Return ``{key: value}`` from ``SKILLOPT_SLEEP_<KEY>`` variables (unknown keys are kept, and rejected)."""
    environ = os.environ if environ is None else environ
    out = {}
    for name, value in environ.items():
        if name.startswith(ENV_PREFIX) and name[len(ENV_PREFIX):] not in _NON_KEY_ENV:
            out[name[len(ENV_PREFIX):].lower()] = value
    return out


def _apply_layer(merged: dict[str, Any], layer: dict[str, Any], source: str,
                 fix: str | None = None) -> dict[str, Any]:
    candidate = {**merged, **layer}
    try:
        SleepConfig.model_validate(candidate)
    except ValidationError as exc:
        raise _errors_to_config_error(exc, source, fix) from None
    return candidate


def load_config(
    config_path: Path | None = None,
    cli_overrides: dict[str, Any] | None = None,
    environ: dict[str, str] | None = None,
) -> SleepConfig:
    """Load the layered config.

    config_path: TOML file (default ``paths.config_file()``); a missing default file is fine, a missing
    explicit file is a ConfigError. cli_overrides: ``{key: value}`` of flags the user set (None values ignored).
    Raises ConfigError naming the source and the key for an unknown key or an invalid value. The source of each
    key that was set is kept (``SleepConfig.source_of``).
    """
    explicit = config_path is not None
    path = Path(config_path) if explicit else paths.config_file()
    if explicit and not path.exists():
        raise ConfigError("config file not found", source=str(path))
    merged: dict[str, Any] = {}
    file_layer = read_config_file(path)
    merged = _apply_layer(merged, file_layer, str(path),  # every problem of the file, each with its line:
                          fix=f"run 'skillopt-sleep config validate --config {shlex.quote(str(path))}' to see "
                              "them all")
    sources = {key: str(path) for key in file_layer}
    for key, value in env_overrides(environ).items():
        sources[key] = f"environment {ENV_PREFIX}{key.upper()}"
        merged = _apply_layer(merged, {key: value}, sources[key])
    flags = {k: v for k, v in (cli_overrides or {}).items() if v is not None}
    for key, value in flags.items():
        sources[key] = f"--{key.replace('_', '-')}"
        merged = _apply_layer(merged, {key: value}, sources[key])
    config = SleepConfig.model_validate(merged)
    config._sources = sources
    return config


def set_config_value(key: str, value: str, config_path: Path | None = None) -> Path:
    """Validate ``key = value`` and write it into the TOML file atomically, keeping comments and other keys.

    Returns the file written. Raises ConfigError for an unknown key or an invalid value.
    """
    import tomlkit  # only writing needs it (reading uses tomllib)

    path = Path(config_path) if config_path else paths.config_file()
    if key not in SleepConfig.model_fields:
        raise ConfigError(f"unknown key{did_you_mean(key)}", source=str(path), key=key,
                          fix="'skillopt-sleep config show' lists the keys")
    existing = read_config_file(path)
    _apply_layer(existing, {key: value}, f"config set {key}")
    parsed = SleepConfig.model_validate({**existing, key: value})
    typed = parsed.model_dump(mode="json")[key]
    try:
        document = tomlkit.parse(path.read_text("utf-8")) if path.exists() else tomlkit.document()
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc}", source=str(path)) from None
    if typed is None:
        document.pop(key, None)
    else:
        document[key] = typed
    write_text_atomic(path, tomlkit.dumps(document))
    return path
