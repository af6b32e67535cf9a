"""Near-duplicate requests are one task: grouping by token Jaccard after light stemming.
"""

from __future__ import annotations

import math
import re
from collections import Counter

from skillopt_sleep.mine.candidates import EPOCH, Candidate
from skillopt_sleep.mine.reactions import jaccard
from skillopt_sleep.mine.split import normalize_request

#: Token Jaccard (after light stemming) from which two requests are the same task.
DUPLICATE_SIMILARITY = 0.7


def stem_tokens(text: str) -> set[str]:
    words = re.findall(r"[a-z0-9_]+", normalize_request(text))
    return {word[:-1] if len(word) > 3 and word.endswith("s") else word for word in words}


def group_duplicates(candidates: list[Candidate]) -> list[list[Candidate]]:
    """Cluster near-duplicate requests (greedy, earliest first); each group's first item is its representative.
    A command family (``Candidate.family``) groups by its key alone.

    A candidate joins the first group, in the order groups were made, whose representative has its grouping key or
    (not a command) a token Jaccard >= ``DUPLICATE_SIMILARITY`` with it; else it makes a new group. Only the groups
    that could pass are compared (prefix filtering, as in Bayardo et al.'s All-Pairs): with the tokens of every
    request in one order, rarest first, two sets with Jaccard >= t share a token among the first ``|x| - ceil(t*|x|)
    + 1`` of each (``_prefix``), so each group is indexed by the tokens of its representative's prefix and a
    candidate is compared with the groups its own prefix finds. Same groups as comparing with every group (tested),
    without the time that grows with requests x groups on a long history."""
    ordered = sorted(candidates, key=lambda item: (item.seen_at or EPOCH,))
    token_sets = [stem_tokens(candidate.request) for candidate in ordered]
    frequency = Counter(token for tokens in token_sets for token in tokens)
    groups: list[list[Candidate]] = []
    representatives: list[set[str]] = []
    by_key: dict[str, int] = {}
    by_prefix_token: dict[str, list[int]] = {}
    for candidate, candidate_tokens in zip(ordered, token_sets):
        key = candidate.family()
        found = by_key.get(key)
        prefix = _prefix(candidate_tokens, frequency)
        if candidate.kind != "command":
            for index in sorted({index for token in prefix for index in by_prefix_token.get(token, ())}):
                if found is not None and index >= found:
                    break
                group_tokens = representatives[index]
                small, large = sorted((len(candidate_tokens), len(group_tokens)))
                if small / large < DUPLICATE_SIMILARITY:
                    continue
                if jaccard(candidate_tokens, group_tokens) >= DUPLICATE_SIMILARITY:
                    found = index
                    break
        if found is not None:
            groups[found].append(candidate)
            continue
        by_key[key] = len(groups)
        for token in prefix:
            by_prefix_token.setdefault(token, []).append(len(groups))
        groups.append([candidate])
        representatives.append(candidate_tokens)
    return groups


def _prefix(tokens: set[str], frequency: Counter[str]) -> list[str]:
    """The first ``|tokens| - ceil(DUPLICATE_SIMILARITY * |tokens|) + 1`` tokens, rarest first (ties by the token)."""
    if not tokens:
        return []
    length = len(tokens) - math.ceil(DUPLICATE_SIMILARITY * len(tokens) - 1e-9) + 1
    return sorted(tokens, key=lambda token: (frequency[token], token))[:length]
