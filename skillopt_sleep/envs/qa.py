"""``QAEnv``: question answering with accepted answers, the smallest complete environment.

Items: ``{"id": str, "question": str, "answers": [str, ...]}`` (optional ``"rules"``: rules the asker stated, shown
to the optimizer like a user's rules). An episode is one target call: the system message is the engine's
``target_system.md`` frame holding the skill document (no memory), the user message the question.

Scoring (answers and response normalized: case folded, punctuation and the articles a / an / the removed, spaces
collapsed; the response's final answer is the text after its last ``Answer:`` line marker, else the whole
response):

* ``hard`` in {0, 1}: ``match="exact"``: the final answer equals an accepted answer; ``match="contains"``: an
  accepted answer appears in the final answer as a whole-word phrase.
* ``soft`` in [0, 1]: 1.0 when hard is 1, else the best token F1 between the final answer and an accepted answer
  (the SQuAD partial-credit score).
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable
from typing import Any, Literal

import orjson

from skillopt_sleep.backends.base import Backend, ChatMessage, ChatRequest
from skillopt_sleep.engine.replay import doc_hash, system_prompt
from skillopt_sleep.envs.base import RolloutResult
from skillopt_sleep.envs.task_file import as_rollout_client
from skillopt_sleep.models import TaskRecord
from skillopt_sleep.prompts import load_prompt

Match = Literal["exact", "contains"]
SPLITS = ("train", "val", "test")

_ANSWER_LINE = re.compile(r"^[\W_]*answer[*_\s]*:[*_\s]*(.*)$", re.IGNORECASE | re.MULTILINE)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans({character: " " for character in string.punctuation})


def normalize_answer(text: str) -> str:
    """Lower-case, punctuation and articles (a, an, the) removed, whitespace collapsed. A text that is only
    articles keeps them (the multiple-choice answer "A" stays "a")."""
    text = " ".join((text or "").casefold().translate(_PUNCTUATION).split())
    return " ".join(_ARTICLES.sub(" ", text).split()) or text


def final_answer(response: str) -> str:
    """The text after the last ``Answer:`` line marker (``**Answer:**`` too), else the whole response, stripped."""
    found = _ANSWER_LINE.findall(response or "")
    return found[-1].strip() if found else (response or "").strip()


def token_f1(prediction: str, reference: str) -> float:
    """Token F1 in [0, 1] between two texts after ``normalize_answer`` (0.0 when either is empty)."""
    predicted, expected = normalize_answer(prediction).split(), normalize_answer(reference).split()
    common = sum((Counter(predicted) & Counter(expected)).values())
    if not predicted or not expected or not common:
        return 0.0
    precision, recall = common / len(predicted), common / len(expected)
    return 2 * precision * recall / (precision + recall)


def score_answer(response: str, answers: list[str], *, match: Match = "exact") -> tuple[int, float, str | None, str]:
    """Score ``response`` against the accepted ``answers``; return (hard 0/1, soft in [0, 1], fail_reason or None,
    rationale). See the module docstring for the rules."""
    answer = final_answer(response)
    normalized = normalize_answer(answer)
    for accepted in answers:
        target = normalize_answer(accepted)
        if not target:
            continue
        if normalized == target or (match == "contains" and f" {target} " in f" {normalized} "):
            return 1, 1.0, None, f"{match} match: {accepted!r}"
    soft = max((token_f1(answer, accepted) for accepted in answers), default=0.0)
    shown = ", ".join(repr(accepted[:60]) for accepted in answers[:3])
    return 0, round(soft, 4), f"answer mismatch ({match}): expected one of {shown}", f"best token F1 {soft:.2f}"


def _checked_items(items: Iterable[dict[str, Any]], split: str) -> list[dict[str, Any]]:
    checked = []
    for position, item in enumerate(items):
        where = f"QAEnv {split} item {position}"
        if not isinstance(item, dict):
            raise ValueError(f"{where}: an item is a dict {{'id', 'question', 'answers'}}, got {type(item).__name__}")
        if not isinstance(item.get("id"), (str, int)) or not str(item["id"]).strip():
            raise ValueError(f"{where}: 'id' must be a non-empty string")
        if not isinstance(item.get("question"), str) or not item["question"].strip():
            raise ValueError(f"{where} ({item['id']}): 'question' must be a non-empty string")
        answers = item.get("answers")
        if (not isinstance(answers, list) or not answers
                or not all(isinstance(answer, str) and normalize_answer(answer) for answer in answers)):
            raise ValueError(f"{where} ({item['id']}): 'answers' must be a non-empty list of non-empty strings")
        checked.append({**item, "id": str(item["id"])})
    return checked


class QAEnv:
    """Question answering as a ``SkillEnv``.

    train_items / val_items / test_items: lists of ``{"id", "question", "answers": [...]}`` (ids unique across
    splits); initial_skill: the skill document to start from; match: ``"exact"`` or ``"contains"`` (see the module
    docstring); max_tokens: most tokens of one answer. Raises ValueError naming the split, position and field of
    an invalid item, or a duplicated id.
    """

    def __init__(self, *, train_items: Iterable[dict[str, Any]], val_items: Iterable[dict[str, Any]] = (),
                 test_items: Iterable[dict[str, Any]] = (), initial_skill: str = "", match: Match = "exact",
                 max_tokens: int = 256):
        if match not in ("exact", "contains"):
            raise ValueError(f"QAEnv match must be 'exact' or 'contains', got {match!r}")
        self.items = {"train": _checked_items(train_items, "train"), "val": _checked_items(val_items, "val"),
                      "test": _checked_items(test_items, "test")}
        seen: set[str] = set()
        for split in SPLITS:
            for item in self.items[split]:
                if item["id"] in seen:
                    raise ValueError(f"QAEnv: item id {item['id']!r} is used twice; ids must be unique across splits")
                seen.add(item["id"])
        self.initial_skill = initial_skill
        self.match: Match = match
        self.max_tokens = max_tokens

    def get_items(self, split: str) -> list[dict[str, Any]]:
        return [dict(item) for item in self.items.get(split, [])]

    def get_initial_skill(self) -> str:
        return self.initial_skill

    def task_for(self, item: dict[str, Any]) -> TaskRecord:
        """The question as the request; the item's ``rules`` (if any) as the user's rules."""
        rules = [rule for rule in item.get("rules", []) if isinstance(rule, str)]
        return TaskRecord(id=str(item["id"]), source="claude", request=item["question"], rules=rules,
                          authored=[item["question"], *rules])

    def fingerprint(self) -> str:
        data = orjson.dumps(self.items, option=orjson.OPT_SORT_KEYS).decode()
        return (f"QAEnv|match={self.match}|max_tokens={self.max_tokens}|"
                f"frame={doc_hash(load_prompt('target_system'))}|items={doc_hash(data)}")

    def rollout_one(self, *, item: dict[str, Any], skill: str, target_client: Backend) -> RolloutResult:
        """Ask the question once with ``skill`` in the system message; score the reply (module docstring)."""
        client = as_rollout_client(target_client)
        system = system_prompt(skill, "")
        request = ChatRequest(role="target", max_tokens=self.max_tokens,
                              messages=[ChatMessage(role="system", content=system),
                                        ChatMessage(role="user", content=item["question"])])
        conversation: list[dict[str, Any]] = [{"role": "system", "content": system},
                                              {"role": "user", "content": item["question"]}]
        chat = client.chat(request)
        if not chat.ok:
            return RolloutResult(hard=0, soft=0.0, conversation=conversation,
                                 error=f"{chat.error_kind or 'error'}: {chat.error}")
        if not chat.text.strip():
            return RolloutResult(hard=0, soft=0.0, conversation=conversation,
                                 error="empty response from the target model")
        conversation.append({"role": "assistant", "content": chat.text})
        hard, soft, fail_reason, rationale = score_answer(chat.text, item["answers"], match=self.match)
        return RolloutResult(hard=hard, soft=soft, fail_reason=fail_reason, rationale=rationale,
                             conversation=conversation, response=chat.text)
