"""Which nights' staged proposals are waiting for ``skillopt-sleep adopt``: the one answer ``adopt``, ``status`` and
the report share (so ``status`` never says "run 'skillopt-sleep adopt'" when ``adopt`` has nothing to adopt).

A night is *adoptable* when its ``diagnostics.json`` says ``accepted``, it staged ``proposed/manifest.json``, and the
adoption records (``adoptions.json``) hold no record of it: a night adopted, or adopted and then reverted (the user
undid it on purpose), is not offered again; ``adopt <night>`` can still adopt a reverted night by name.

Light on purpose (JSON reads only, no pydantic models): ``skillopt-sleep status`` imports it on its fast path.
"""

from __future__ import annotations

from skillopt_sleep.errors import DamagedFileError
from skillopt_sleep.fsio import load_json
from skillopt_sleep.paths import ProjectPaths

#: How a night's headline marks a change that is staged, not written (``changes.describe_change``); ``status`` says
#: what became of it instead once the night is no longer adoptable (``headline_now``).
STAGED_NOTE = " -- staged, not written yet: run 'skillopt-sleep adopt'"


def night_sort_key(night_id: str) -> tuple[str, int]:
    """Sort key of a night id: its timestamp, then its numeric same-second counter (``<stamp>-2`` after
    ``<stamp>``)."""
    base, _, counter = night_id.partition("Z-")
    return (base if counter else night_id.rstrip("Z"), int(counter) if counter.isdigit() else 1)


def night_dirs(paths: ProjectPaths) -> list[str]:
    """Names of the project's night directories (changes of ``forget`` included), oldest first."""
    if not paths.nights.is_dir():
        return []
    return sorted((p.name for p in paths.nights.iterdir() if p.is_dir() and not p.name.startswith(".")),
                  key=night_sort_key)


def night_status(paths: ProjectPaths, night_id: str) -> str | None:
    """The ``status`` in a night's ``diagnostics.json`` (None when it has none). Raises DamagedFileError (naming the
    file) for one that is not JSON."""
    path = paths.nights / night_id / "diagnostics.json"
    data = load_json(path, what=f"night {night_id}'s diagnostics", default=None,
                     fix=f"move the night aside (mv {path.parent} {path.parent}.bad) or adopt another night")
    return str(data.get("status")) if isinstance(data, dict) and data.get("status") else None


def has_proposal(paths: ProjectPaths, night_id: str) -> bool:
    """True when the night staged ``proposed/manifest.json``."""
    return (paths.nights / night_id / "proposed" / "manifest.json").is_file()


def adoptable_nights(paths: ProjectPaths, recorded: set[str]) -> list[str]:
    """Ids of the adoptable nights (module docstring), oldest first. recorded: the night ids the adoption records
    hold (any status). A night whose diagnostics are damaged is left out (``adopt <night>`` names the damage)."""
    out = []
    for night_id in night_dirs(paths):
        if night_id in recorded or not has_proposal(paths, night_id):
            continue
        try:
            if night_status(paths, night_id) == "accepted":
                out.append(night_id)
        except DamagedFileError:
            continue
    return out



def headline_now(headline: str, adoptable: bool, recorded: str | None) -> str:
    """A night's stored headline as it reads today: its ``STAGED_NOTE`` kept while the night is adoptable, else
    replaced by what became of it (recorded: the status of its latest adoption record, ``adopted`` / ``reverted``,
    None when it has none)."""
    if adoptable or STAGED_NOTE not in headline:
        return headline
    return headline.replace(STAGED_NOTE, f" -- {recorded or 'not adoptable'}")
