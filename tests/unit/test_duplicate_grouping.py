"""Near-duplicate grouping (``mine._group_duplicates``): the prefix-filtered search makes the groups that comparing
each request with every group makes (the reference below, the loop it replaced)."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

import pytest

from skillopt_sleep.mine.candidates import EPOCH, Candidate
from skillopt_sleep.mine.duplicates import DUPLICATE_SIMILARITY, group_duplicates, stem_tokens
from skillopt_sleep.mine.reactions import jaccard

WORDS = ("fix the flaky test in parser module add type hints rename config loader use httpx not requests "
         "write docs for cli bump version run ruff format tests update changelog").split()
COMMANDS = ("/review", "/deploy", "/issue")


def reference_groups(candidates: list[Candidate]) -> list[list[Candidate]]:
    """Every candidate compared with every group, in order."""
    ordered = sorted(candidates, key=lambda item: (item.seen_at or EPOCH,))
    groups: list[list[Candidate]] = []
    keys: list[tuple[str, set[str]]] = []
    for candidate in ordered:
        normalized = candidate.family()
        candidate_tokens = stem_tokens(candidate.request)
        for index, (group_text, group_tokens) in enumerate(keys):
            if normalized == group_text:
                groups[index].append(candidate)
                break
            if candidate.kind == "command":
                continue
            small, large = sorted((len(candidate_tokens), len(group_tokens)))
            if large and small / large < DUPLICATE_SIMILARITY:
                continue
            if jaccard(candidate_tokens, group_tokens) >= DUPLICATE_SIMILARITY:
                groups[index].append(candidate)
                break
        else:
            groups.append([candidate])
            keys.append((normalized, candidate_tokens))
    return groups


def random_candidate(rng: random.Random, start: datetime, bases: list[list[str]]) -> Candidate:
    roll = rng.random()
    if roll < 0.1:
        request, kind = f"{rng.choice(COMMANDS)} {rng.choice(['8454', '8463', 'now', 'the parser', ''])}", "command"
    elif roll < 0.15:
        request, kind = rng.choice(["", "!!!", "  ", "?"]), "prompt"  # no tokens at all
    else:
        words = list(rng.choice(bases))  # a near-duplicate of an earlier request: words dropped, added, plural
        for _ in range(rng.randrange(3)):
            edit = rng.random()
            if edit < 0.4 and len(words) > 1:
                words.pop(rng.randrange(len(words)))
            elif edit < 0.8:
                words.insert(rng.randrange(len(words) + 1), rng.choice(WORDS))
            else:
                words = [word + "s" for word in words]
        request, kind = " ".join(words).capitalize() + rng.choice(["", ".", "?"]), "prompt"
    seen_at = None if rng.random() < 0.05 else start + timedelta(minutes=rng.randrange(10_000))
    return Candidate(source="claude", session_id=f"s{rng.randrange(50)}", request=request, kind=kind,
                      seen_at=seen_at)


@pytest.mark.parametrize("seed", range(12))
def test_the_groups_are_those_of_comparing_with_every_group(seed: int) -> None:
    rng = random.Random(seed)
    start = datetime(2026, 11, 1, tzinfo=timezone.utc)
    bases = [[rng.choice(WORDS) for _ in range(rng.randint(1, 12))] for _ in range(rng.randint(3, 40))]
    candidates = [random_candidate(rng, start, bases) for _ in range(rng.randint(50, 400))]

    groups = group_duplicates(candidates)

    assert [[id(item) for item in group] for group in groups] == \
        [[id(item) for item in group] for group in reference_groups(candidates)]
    assert sum(len(group) for group in groups) == len(candidates)
    assert len(groups) < len(candidates)  # the cases merge something, or the test shows nothing


def test_a_reworded_request_joins_its_group_and_another_task_does_not() -> None:
    start = datetime(2026, 11, 1, tzinfo=timezone.utc)
    texts = ["Add type hints to the config loader", "add type hints to the config loaders please",
             "Rename the config loader", "/deploy 8454", "/deploy 8463"]
    candidates = [Candidate(source="claude", session_id="s", request=text,
                             kind="command" if text.startswith("/") else "prompt",
                             seen_at=start + timedelta(minutes=index)) for index, text in enumerate(texts)]

    groups = group_duplicates(candidates)

    assert [[item.request for item in group] for group in groups] == [texts[:2], texts[2:3], texts[3:]]
