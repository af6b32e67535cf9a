"""What the user meets in the morning: what a night changed, its report, adopting or reverting it, the rules ledger.

| module | job |
|---|---|
| ``verdicts`` | one word per night (``learned``, ``staged``, ...), the same in every view |
| ``staged`` | which nights' staged proposals wait for ``adopt`` |
| ``changes`` | what a night changed in the user's files: learned, kept, rejected, waiting for more evidence |
| ``adopt`` | adopt a night's staged proposal into the project, revert it, list what was adopted |
| ``retention`` | keep the newest nights, never one that ``revert`` still needs |
| ``report`` | what a night did, for the terminal and as an HTML page |
| ``report_view`` | the typed view of one night's report (``NightView``), also the ``report --json`` shape |
| ``rule_ledger`` | every rule learned or proposed, where it lives and where it stands; ``forget`` |

The morning reads what a night left on disk (``diagnostics.json``, ``proposed/``, the task archive): nothing here
imports the night (``night.py``) nor the engine. ``verdicts`` and ``staged`` read plain JSON only (``status`` imports
them on its fast path), so this face imports nothing.
"""
