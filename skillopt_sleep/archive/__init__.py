"""The archive: what a project keeps from one night to the next, and the features that use it around the night's
step. (The *memory* is the memory document, CLAUDE.md / AGENTS.md / ..., only: see ``documents.py``.)

* ``tasks.py``: the task archive (SQLite FTS5): every mined task, its score history, recall, archived val tasks,
  the rules table and the rejected-edit table.
* ``rejected_edits.py``: the rejected-edit ledger and the screen that keeps its edits out of tonight's proposals.
* ``context.py``: what the archive tells tonight's reflection (recall, rejected edits; ``build_context``).
* ``rule_history.py``: each stated rule's statements, status and held-out record across nights.
* ``pending.py``: a candidate the gate tied on, re-tested on a later night's fresh val tasks.
* ``slow_update.py``: every N nights, old tasks replayed against old documents to find what a change broke.
* ``dream.py``: rephrased variants of tonight's train tasks (extra train tasks; nothing is stored).
* ``docstore.py``: document texts by sha256, for the slow update and the pending candidate.

``around_step.AcrossNights`` runs them in order around the night's step.
"""
