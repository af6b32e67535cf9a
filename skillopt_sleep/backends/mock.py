"""``mock``: a deterministic simulator of an LLM backend, for tests and demos. It calls no model."""

from __future__ import annotations

import hashlib
import math
import re
import threading
import time
from collections.abc import Iterable
from functools import lru_cache

import orjson

from skillopt_sleep.backends.base import ChatRequest, ChatResult, ErrorKind
from skillopt_sleep.checks import check_key, word_regex
from skillopt_sleep.grammar.clauses import split_clauses, strip_frame
from skillopt_sleep.grammar.forms import parse_part, parse_rule, rule_parts
from skillopt_sleep.grammar.statements import checks_for_rule
from skillopt_sleep.models import Role, Usage
from skillopt_sleep.prompts import (
    DATA_CLOSE,
    DATA_OPEN,
    PATCH_LIST_HEADER,
    RANK_ITEM,
    TASK_HEADER,
    TRIED_LINE,
    USER_RULE_PREFIX,
    load_prompt,
)
from skillopt_sleep.text import content_words, words

#: Words that name no subject: the verbs and markers a rule or a rubric is phrased with ("use", "always", "not",
#: "instead"). They never make a rule relevant to a request, nor count as a rubric word the judge looks for
#: (``_stems``). Reading a rule (what it prefers and forbids) is the grammar's job (``read_rule``), not this list's.
NON_SUBJECT_WORDS = frozenset(
    "use using used always never not avoid instead rather prefer run make sure please don't".split()
)
#: Failed check op (first word of a judge verdict) -> the general procedure the mock optimizer proposes. It
#: never repeats the check's literal value, so it cannot pass a check by echoing the looked-for string.
PROCEDURES = {
    "contains": "make sure the answer includes every tool, name and term the user explicitly asked for",
    "not_contains": "leave out anything the user said not to use",
    "regex": "follow the exact format the user asked for",
    "starts_with": "start the answer the way the user asked",
    "ends_with": "end the answer the way the user asked",
    "max_chars": "keep the answer as short as the user asked",
    "max_words": "keep the answer as short as the user asked",
    "section_present": "use the sections the user asked for, as Markdown headings",
    "json_valid": "reply with valid JSON when the user asks for JSON",
    "tool_called": "run the tools the task needs instead of describing them",
}
_BULLET = re.compile(r"^([-*+]|\d+[.)])\s+")
_CORRECTION_WORDS = {"no", "not", "wrong", "don't", "instead", "never", "actually", "stop", "again"}
_APPROVAL_WORDS = {"thanks", "thank", "great", "perfect", "works", "lgtm", "nice", "good"}


def _stem(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") else word


def _stems(text: str) -> set[str]:
    return {_stem(word) for word in content_words(text)} - NON_SUBJECT_WORDS


def _unit_hash(*parts: object) -> float:
    """A number in [0, 1) from a hash of ``parts`` (reproducible 'randomness')."""
    digest = hashlib.sha256("|".join(str(part) for part in parts).encode()).hexdigest()
    return int(digest[:8], 16) / 2**32


@lru_cache(maxsize=1024)
def read_rule(rule: str) -> tuple[tuple[str, ...], frozenset[str]]:
    """Read one rule line with the grammar of rule statements, as the miner reads a statement: ``(positive forms,
    forbidden literals)``.

    The line is cut into clauses (``grammar.clauses.split_clauses``, frame words dropped by ``strip_frame``). The
    forbidden literals are those the miner's checks of each clause forbid (``grammar.statements.checks_for_rule``:
    a ``not_contains`` check or a whole-word negative regex, ``checks.check_key`` ``"not"``), case-folded. The
    positive forms come from the rule parts of each clause (the clause itself when it parses whole as a rule, or not
    at all; else its ``grammar.forms.rule_parts``), by form (``forms.parse_part``): "use X, not Y" (``prefer``: also
    "never use Y, use X", "we moved from Y to X") gives ``Use <X>``; a prohibition (``forbid``) gives none, as a model
    that obeys one does not restate it; any other part is one as written. ``"Use pnpm, not npm"`` -> ``(("Use
    pnpm",), {"npm"})``; ``"use tabs, not spaces"`` -> ``(("Use tabs",), set())``: a style names no literal to leave
    out. Never raises.
    """
    positives: list[str] = []
    forbidden: set[str] = set()
    for clause in split_clauses(rule):
        bare = strip_frame(clause)
        if not bare:
            continue
        forbidden |= {literal for kind, literal in map(check_key, checks_for_rule(bare)) if kind == "not"}
        parts = [bare] if parse_rule(bare) is not None else (rule_parts(bare) or [bare])
        for part in (strip_frame(part) for part in parts):
            parsed = parse_part(part)
            if parsed is None or parsed.form not in ("prefer", "forbid"):
                positives.append(part)
            elif parsed.form == "prefer":
                positives.append(f"Use {parsed.preferred}")
    return tuple(positives), frozenset(forbidden)


_TRAILING_INSTRUCTION = re.compile(r"\n\s*\n(Reply with|Score the answer)\b.*\Z", re.DOTALL)


def _sections(text: str) -> dict[str, str]:
    """Markdown ``## heading`` -> body (heading lower-cased, data tags of ``prompts.quote_data`` dropped). A closing
    instruction paragraph after the last section (``Reply with ...``, ``Score the answer ...``) is not part of that
    section."""
    found: dict[str, str] = {}
    parts = re.split(r"^##\s+(.+?)\s*$", text, flags=re.MULTILINE)
    for index in range(1, len(parts) - 1, 2):
        body = _TRAILING_INSTRUCTION.sub("", parts[index + 1]).replace(DATA_OPEN, "").replace(DATA_CLOSE, "")
        found.setdefault(parts[index].strip().lower(), body.strip())
    return found


def _section(sections: dict[str, str], *starts: str) -> str | None:
    for heading, body in sections.items():
        if heading.startswith(starts):
            return body
    return None


class MockBackend:
    """A deterministic SIMULATOR of an LLM backend for tests and demos. It runs no model and its answers are
    not model output: they are computed from the prompt by the fixed rules below.

    Roles (the model for role ``r`` is named ``mock-<r>``):

    * ``target``: answers the request (the last user message) with an "unguided" answer,
      ``Here is my answer to: <first 25 words of the request>``. It obeys rules in the system prompt (skill
      document + memory): a rule is any non-empty line of the system prompt that is not a heading, an HTML
      comment, a ``---`` line, a ``name:``/``description:`` line, ``(none)``, or a fixed line of the
      ``target_system.md`` template (bullets are stripped). A rule applies when it shares a content word with
      the request (3+ letters, not a stopword nor one of ``NON_SUBJECT_WORDS``, a trailing ``s`` ignored), starts
      with "always"/"never", or names a literal in backticks (a rule compiled from its checks, "Use `pnpm`, never
      `npm`.", is meant for every request). It reads each applied rule with the project's own grammar of rule
      statements, as the miner reads a statement (``read_rule``: ``grammar.clauses``, ``grammar.forms``,
      ``grammar.statements.checks_for_rule``), appends ``Following the rule: <positive form>.`` for each of its
      positive forms, and removes every literal that the rule's checks forbid from the whole answer, as a whole word
      (``checks.word_regex``), case-insensitively. So with "Use pnpm, not npm" in memory, "install the deps with
      npm" is answered without "npm" and with "pnpm"; without the rule the answer contains "npm" and no "pnpm". It
      follows only literals: a format rule (ISO dates, a word limit, JSON) is echoed, not obeyed. Because it reads
      rules exactly as the miner does, a test on this simulator cannot catch a rule the reader misreads: the
      real-model tests and ``benchmarks/real_rules.py`` do that. At temperature > 0, each applicable rule is skipped
      in a sample with probability temperature / 2, decided by a hash of (seed, rule): reproducible sampling noise
      for K-rollout tests.
    * ``optimizer``, reflect prompt (``engine/reflect.py`` format): proposes one ``append`` edit per
      distinct user rule (lines ``- user rule: ...``) of the FAIL and MIXED tasks, skipping rules already in the
      prompt's current documents, up to the schema's ``maxItems`` (default 3), targeting ``memory`` (``skill``
      when the schema allows only that). Without such rules it proposes one generic procedure edit built from the
      first failing task's judge verdict (``PROCEDURES``, by the failed check's op; never the check's literal
      value); with no failing task, no edit. Reply: ``{"edits": [...]}``.
    * ``optimizer``, merge prompt (``engine/aggregate.py``: ``### patch list`` headers, one JSON edit per line):
      the union of the lists' edits in order, where edits with the same target and the same content up to case,
      spacing and final punctuation are one edit whose evidence joins theirs; at most the schema's ``maxItems``.
    * ``optimizer``, rank prompt (``[i] {JSON edit}`` lines, schema with ``order``): the edit numbers ordered by
      the number of evidence task ids, most first, ties in listed order. Reply: ``{"order": [...]}``.
    * ``optimizer``, rewrite prompt (schema with ``line``, ``engine/rewrite.py``): the first line tried
      (``TRIED_LINE``) prefixed with "Always" (a line the simulated target applies to every request); ``""`` when
      the prompt lists none. Reply: ``{"line": ...}``.
    * ``judge``: reads the ``## Rubric`` and ``## Answer`` sections and replies
      ``{"score": <share of the rubric's content words present in the answer>, "rationale": ...}``.
    * ``miner``: reads the ``## Request`` and ``## ...reaction`` sections and replies ``{"intent": <first 12
      words of the request>, "checks": [], "rubric": "A good answer addresses: <request head>", "outcome":
      "failure" | "success" | "unknown"}`` (outcome from correction or approval words in the reaction).

    Options: ``fail_with`` makes calls fail with ``ChatResult(error=fail_with, error_kind=fail_kind)`` (only for
    ``fail_roles`` when given); ``scripted`` maps a role, or an optimizer prompt kind (``reflect``, ``merge``,
    ``rank``, ``rewrite``: tried first), to replies returned in order before simulating. Counters: ``calls``,
    ``calls_by_role``, ``calls_by_kind`` (optimizer calls by prompt kind, other calls by role), ``requests``
    (every request received). Usage is estimated as
    characters / 4 (rounded up), so token budgets work. Thread-safe.
    """

    name = "mock"
    runs_tools = False

    def __init__(self, fail_with: str | None = None, fail_kind: ErrorKind = "fatal",
                 fail_roles: Iterable[str] | None = None, scripted: dict[str, list[str]] | None = None):
        self.fail_with = fail_with
        self.fail_kind = fail_kind
        self.fail_roles = set(fail_roles) if fail_roles is not None else None
        self.scripted = {role: list(replies) for role, replies in (scripted or {}).items()}
        self.calls = 0
        self.calls_by_role: dict[str, int] = {}
        self.calls_by_kind: dict[str, int] = {}
        self.requests: list[ChatRequest] = []
        self._lock = threading.Lock()

    def model_for(self, role: Role) -> str:
        return f"mock-{role}"

    # -- the protocol
    def chat(self, request: ChatRequest) -> ChatResult:
        started = time.perf_counter()
        kind = self.prompt_kind(request)
        with self._lock:
            self.calls += 1
            self.calls_by_role[request.role] = self.calls_by_role.get(request.role, 0) + 1
            self.calls_by_kind[kind] = self.calls_by_kind.get(kind, 0) + 1
            self.requests.append(request)
            script = self.scripted.get(kind) or self.scripted.get(request.role)
            scripted_reply = script.pop(0) if script else None
        prompt_chars = sum(len(message.content) for message in request.messages)
        usage = Usage(prompt_tokens=math.ceil(prompt_chars / 4))
        model = self.model_for(request.role)
        if self.fail_with is not None and (self.fail_roles is None or request.role in self.fail_roles):
            return ChatResult(error=self.fail_with, error_kind=self.fail_kind, usage=usage, model=model,
                              latency_s=time.perf_counter() - started)
        if scripted_reply is not None:
            text = scripted_reply
        elif request.role == "target":
            text = self._target(request)
        elif kind == "merge":
            text = self._merge(request)
        elif kind == "rank":
            text = self._rank(request)
        elif kind == "rewrite":
            text = self._rewrite(request)
        elif request.role == "optimizer":
            text = self._optimizer(request)
        elif request.role == "judge":
            text = self._judge(request)
        else:
            text = self._miner(request)
        usage.completion_tokens = math.ceil(len(text) / 4)
        return ChatResult(text=text, usage=usage, model=model, latency_s=time.perf_counter() - started)

    @staticmethod
    def prompt_kind(request: ChatRequest) -> str:
        """``"rank"``, ``"rewrite"``, ``"merge"`` or ``"reflect"`` for an optimizer request (by its schema and
        prompt), else the request's role."""
        if request.role != "optimizer":
            return request.role
        properties = (request.json_schema or {}).get("properties", {})
        if "order" in properties:
            return "rank"
        if "line" in properties:
            return "rewrite"
        prompt = "\n".join(message.content for message in request.messages if message.role == "user")
        return "merge" if PATCH_LIST_HEADER.search(prompt) else "reflect"

    # -- target
    @staticmethod
    def _template_lines() -> set[str]:
        template = load_prompt("target_system")
        return {line.strip() for line in template.splitlines() if line.strip() and "{" not in line}

    def rule_lines(self, system: str) -> list[str]:
        """The lines of a system prompt that the simulated target treats as rules (see the class docstring)."""
        frame = self._template_lines()
        rules = []
        for line in system.splitlines():
            text = line.strip()
            if (not text or text in frame or text.startswith(("#", "<!--", "---")) or text == "(none)"
                    or text.lower().startswith(("name:", "description:"))):
                continue
            text = _BULLET.sub("", text).strip()
            if text:
                rules.append(text)
        return rules

    def _target(self, request: ChatRequest) -> str:
        system = "\n".join(message.content for message in request.messages if message.role == "system")
        users = [message.content for message in request.messages if message.role == "user"]
        asked = users[-1] if users else ""
        lines = ["Here is my answer to: " + " ".join(asked.split()[:25])]
        asked_stems = _stems(asked)
        forbidden: set[str] = set()
        for rule in self.rule_lines(system):
            general = rule.lower().startswith(("always", "never")) or "`" in rule
            if not general and not (_stems(rule) & asked_stems):
                continue
            if request.temperature > 0 and _unit_hash(request.seed, rule) < request.temperature / 2:
                continue  # simulated sampling noise
            positives, rule_forbidden = read_rule(rule)
            lines += [f"Following the rule: {positive}." for positive in positives]
            forbidden |= rule_forbidden
        text = "\n".join(lines)
        for literal in sorted(forbidden):
            text = re.sub(word_regex(literal), "", text, flags=re.IGNORECASE)
        return re.sub(r"[ \t]{2,}", " ", text)

    # -- optimizer
    @staticmethod
    def _schema_limits(request: ChatRequest) -> tuple[list[str], int]:
        targets, budget = ["memory", "skill"], 3
        try:
            edits = request.json_schema["properties"]["edits"]  # type: ignore[index]
            targets = list(edits["items"]["properties"]["target"]["enum"]) or targets
            budget = int(edits.get("maxItems", budget))
        except (TypeError, KeyError, ValueError):
            pass
        return targets, budget

    def _optimizer(self, request: ChatRequest) -> str:
        prompt = "\n".join(message.content for message in request.messages if message.role == "user")
        targets, budget = self._schema_limits(request)
        target = "memory" if "memory" in targets else targets[0]
        headers = list(TASK_HEADER.finditer(prompt))
        documents = prompt[: headers[0].start()].lower() if headers else prompt.lower()
        rules: dict[str, tuple[str, list[str]]] = {}
        verdicts: list[tuple[str, str]] = []
        for index, header in enumerate(headers):
            task_id, status = header.group(1), header.group(2)
            if status == "PASS":
                continue
            end = headers[index + 1].start() if index + 1 < len(headers) else len(prompt)
            for line in prompt[header.end():end].splitlines():
                line = line.strip()
                if line.startswith(USER_RULE_PREFIX.strip()):
                    rule = line[len(USER_RULE_PREFIX.strip()):].strip()
                    if rule and rule.lower() not in documents:
                        rules.setdefault(rule.lower(), (rule, []))[1].append(task_id)
                elif line.startswith(("Judge:", "Judge on the failing answer:")):
                    verdict = line.split(":", 1)[1].strip().split(" (", 1)[0]
                    verdicts.append((task_id, verdict))
        edits = [
            {"target": target, "op": "append", "anchor": None, "content": rule,
             "rationale": f"The user stated this rule; {len(ids)} failing task(s) broke it.", "evidence": ids}
            for rule, ids in rules.values()
        ]
        if not edits and verdicts:
            task_id, verdict = verdicts[0]
            op = verdict.split(" ", 1)[0]
            procedure = PROCEDURES.get(op, "check the answer against every requirement the user stated")
            content = f"Before answering, {procedure}."
            if content.lower() not in documents:
                edits = [{"target": target, "op": "append", "anchor": None, "content": content,
                          "rationale": f"Generic procedure for the failed check ({verdict}).",
                          "evidence": [task_id]}]
        return orjson.dumps({"edits": edits[: max(0, budget)]}).decode()

    # -- merge and rank
    def _merge(self, request: ChatRequest) -> str:
        prompt = request.messages[0].content if request.messages else ""
        _targets, budget = self._schema_limits(request)
        merged: dict[tuple[str, str], dict] = {}
        for section in PATCH_LIST_HEADER.split(prompt)[3::3]:
            for line in section.splitlines():
                try:
                    edit = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                if not isinstance(edit, dict) or "content" not in edit:
                    continue
                key = (str(edit.get("target")), " ".join(str(edit["content"]).lower().split()).rstrip(".!"))
                if key in merged:
                    kept = merged[key]
                    kept["evidence"] = list(dict.fromkeys([*kept["evidence"], *edit.get("evidence", [])]))
                else:
                    merged[key] = {**edit, "evidence": list(edit.get("evidence", []))}
        return orjson.dumps({"edits": list(merged.values())[: max(0, budget)]}).decode()

    @staticmethod
    def _rank(request: ChatRequest) -> str:
        prompt = request.messages[0].content if request.messages else ""
        support: list[tuple[int, int]] = []
        for match in RANK_ITEM.finditer(prompt):
            try:
                evidence = orjson.loads(match.group(2)).get("evidence", [])
            except (orjson.JSONDecodeError, AttributeError):
                evidence = []
            support.append((int(match.group(1)), len(evidence) if isinstance(evidence, list) else 0))
        order = [index for index, _count in sorted(support, key=lambda item: (-item[1], item[0]))]
        return orjson.dumps({"order": order}).decode()

    @staticmethod
    def _rewrite(request: ChatRequest) -> str:
        prompt = "\n".join(message.content for message in request.messages if message.role == "user")
        first = TRIED_LINE.search(prompt)
        if first is None:
            return orjson.dumps({"line": ""}).decode()
        line = first.group(1).strip()
        return orjson.dumps({"line": f"Always {line[:1].lower()}{line[1:]}"}).decode()

    # -- judge and miner
    def _judge(self, request: ChatRequest) -> str:
        sections = _sections("\n".join(message.content for message in request.messages))
        rubric = _section(sections, "rubric") or ""
        answer = _section(sections, "answer", "response") or ""
        wanted = _stems(rubric)
        found = wanted & _stems(answer)
        score = round(len(found) / len(wanted), 3) if wanted else 0.0
        return orjson.dumps({"score": score,
                             "rationale": f"{len(found)} of {len(wanted)} rubric words appear in the answer"}
                            ).decode()

    def _miner(self, request: ChatRequest) -> str:
        text = "\n".join(message.content for message in request.messages if message.role == "user")
        sections = _sections(text)
        asked = _section(sections, "request") or text
        reaction = next((body for heading, body in sections.items() if "reaction" in heading), "")
        reaction_words = set(words(reaction))
        if reaction_words & _CORRECTION_WORDS:
            outcome = "failure"
        elif reaction_words & _APPROVAL_WORDS:
            outcome = "success"
        else:
            outcome = "unknown"
        flat = " ".join(asked.split())
        return orjson.dumps({
            "intent": " ".join(flat.split()[:12]),
            "checks": [],
            "rubric": "A good answer addresses: " + flat[:120],
            "outcome": outcome,
        }).decode()
