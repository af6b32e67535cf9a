"""Memory across nights: the task archive (SQLite FTS5), recall, the rejected-edit ledger, the slow update,
dream variants, the pending candidate, and the document store.

``memory.night.NightMemory`` runs them in order around the night's step.
"""
