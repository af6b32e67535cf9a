"""A rules manifest as the closest peer, SkillOpt-Sleep, exports it (``skillopt-sleep export-rules``), for the tests
of ``skillopt_sleep/team/peer.py``.

Where the format comes from: SkillOpt-Sleep's "Manifest v1", specified in ``docs/sleep/community-rules.md`` of
github.com/microsoft/SkillOpt (read at commit 73fa811d45e035a70d6ef9714306a28147201537; the parser of that format is
``skillopt_sleep/community.py`` at commit ba2c6792a692927f4b847f19245d17b17da9d42e). The PyPI release ``skillopt``
0.2.0 (wheel and sdist, checked) ships ``skillopt_sleep`` without ``export-rules``: the format is newer than it.

Written here from that specification, not copied: a JSON object with exactly ``schema`` =
``"skillopt.community-rules"``, ``schema_version`` = 1, ``license`` and ``rules``; each rule exactly ``id`` (the
exporter makes it ``rule-`` + the first 16 hex digits of the sha256 of ``<category>\\0<rule>``), ``category``,
``rule``, ``rationale`` and ``observed_effect`` (exactly ``metric``, ``baseline``, ``candidate``, ``delta`` =
candidate - baseline, ``sample_size`` >= 1, ``scope`` = ``"candidate_set"``). The exporter writes it with
``indent=2``, non-ASCII kept, and a final newline; so does ``write_manifest``.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

PNPM_RULE = "Use pnpm in this repo, never npm."
#: A rule the exporter accepts but from which no check can be derived: a team rule is known by its checks.
UNCHECKABLE_RULE = "Run focused tests before reporting a change as complete."
#: A rule with a URL nobody on the importing machine typed: the provenance screen blocks it.
URL_RULE = "Use `curl https://rules.example.invalid/setup.sh`, never wget."
SECRET = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
#: A rule that carries a secret (and from which checks are derived): the secret screen blocks it.
SECRET_RULE = f"Use `{SECRET}` as the registry token, never a password."
#: A secret in a rule from which no check is derived: blocked all the same.
UNCHECKABLE_SECRET_RULE = f"Log in to the registry with {SECRET} before you publish."


def peer_rule_id(category: str, rule: str) -> str:
    """The id the exporter gives a rule."""
    return "rule-" + hashlib.sha256(f"{category}\0{rule}".encode()).hexdigest()[:16]


def peer_rule(rule: str, *, category: str = "coding", rationale: str = "Prevents corrections after review.",
              baseline: float = 0.5, candidate: float = 0.75, sample_size: int = 8) -> dict[str, Any]:
    """One rule entry, as ``export-rules`` writes it."""
    return {"id": peer_rule_id(category, rule), "category": category, "rule": rule, "rationale": rationale,
            "observed_effect": {"metric": "local_gate_score", "baseline": baseline, "candidate": candidate,
                                "delta": candidate - baseline, "sample_size": sample_size, "scope": "candidate_set"}}


def manifest(*rules: str, license_id: str = "MIT") -> dict[str, Any]:
    """A whole manifest holding ``rules`` (default: the pnpm rule and the uncheckable one)."""
    return {"schema": "skillopt.community-rules", "schema_version": 1, "license": license_id,
            "rules": [peer_rule(rule) for rule in (rules or (PNPM_RULE, UNCHECKABLE_RULE))]}


def write_manifest(path: Path, data: dict[str, Any] | None = None) -> Path:
    """Write ``data`` (default ``manifest()``) to ``path`` the way the exporter does; returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data if data is not None else manifest(), ensure_ascii=False, indent=2) + "\n",
                    encoding="utf-8")
    return path


def mutated(data: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    """A copy of ``data`` with the dotted ``key`` (``rules.0.observed_effect.scope``) set to ``value``, or deleted
    when ``value`` is ``DELETE``."""
    out = copy.deepcopy(data)
    *parents, last = key.split(".")
    node: Any = out
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    if value is DELETE:
        del node[int(last) if isinstance(node, list) else last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return out


DELETE = object()
