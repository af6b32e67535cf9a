"""The text that marks a transcript as skillopt-sleep's own call, never a user's session.

Every backend puts ``SESSION_MARKER`` into the prompts it sends (``backends/subprocess_call.MARKER_LINE`` for the
agent CLIs); every harvester skips a session whose request carries it (skip reason ``own_marker``), so a night
never mines the transcripts its own replays left behind (e.g. ``claude -p`` writes a session file).

A second line of defence does not depend on the marker reaching the transcript (a backend that forgets it, an
agent CLI that strips or rewrites the first line): ``is_own_request`` also recognises the fixed text of our own
prompt templates. ``own_request_fragments`` derives it from the prompt registry (``skillopt_sleep.prompts``, user
overrides included), so a reworded template moves its markers with it: every line of a template's literal text
(between placeholders) that has at least ``MIN_FRAGMENT_CHARS`` characters, put in one form (``match_form``:
``text.normalize``, casefolded, whitespace collapsed). A user's request carries one only when it pastes a whole
sentence-long line of our prompts.

Imports point down: this module reads the registry (``prompts``, which imports only ``paths``); nothing below it
imports a harvester.
"""

from __future__ import annotations

from functools import lru_cache

from skillopt_sleep import prompts
from skillopt_sleep.text import normalize

SESSION_MARKER = "[skillopt-sleep:replay]"

#: Shortest template line (in ``match_form``) used as a marker: shorter lines ("## Rubric", "- Keep each edit to one
#: or two short lines.") could be typed by a user.
MIN_FRAGMENT_CHARS = 60


def match_form(text: str) -> str:
    """``text`` as markers are matched: ``text.normalize`` (NFKC, no format characters), casefolded, every run
    of whitespace one space, ends stripped."""
    return " ".join(normalize(text).casefold().split())


def fragments_of(template: str) -> list[str]:
    """The marker fragments of one template text: each line of its literal runs (``prompts.literal_runs``) with at
    least ``MIN_FRAGMENT_CHARS`` characters in ``match_form``, in that form, in template order, each once."""
    lines = [match_form(line) for run in prompts.literal_runs(template) for line in run.splitlines()]
    return list(dict.fromkeys(line for line in lines if len(line) >= MIN_FRAGMENT_CHARS))


@lru_cache(maxsize=1)
def own_request_fragments() -> tuple[str, ...]:
    """The marker fragments of every registered template (``prompts.PROMPT_NAMES``, read with
    ``prompts.load_prompt``: a user override counts), each once. Read once per process; ``cache_clear()`` reads
    the registry again (tests; a long-lived process after the user edits an override)."""
    found: dict[str, None] = {}
    for name in prompts.PROMPT_NAMES:
        found.update(dict.fromkeys(fragments_of(prompts.load_prompt(name))))
    return tuple(found)


def is_own_request(text: str) -> bool:
    """True when ``text`` (a request read from a transcript) is skillopt-sleep's own prompt: it carries
    ``SESSION_MARKER`` (also behind format characters or fullwidth forms), or it contains a whole marker fragment
    of a registered template (``own_request_fragments``). False for "" and for ordinary requests."""
    if SESSION_MARKER in text:
        return True
    form = match_form(text)
    if SESSION_MARKER in form:
        return True
    return len(form) >= MIN_FRAGMENT_CHARS and any(fragment in form for fragment in own_request_fragments())
