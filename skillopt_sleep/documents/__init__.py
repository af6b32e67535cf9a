"""The documents a night may edit: the managed block inside them, and what is written where.

| module | job |
|---|---|
| ``block`` | the managed block format: its markers and heading, finding, splitting and reading it in a document |
| ``merge`` | re-applying one night's change of a managed block onto a live document that changed since |
| ``targets`` | the skill document and each agent's memory file: which files a night reads, writes and stages |
"""
