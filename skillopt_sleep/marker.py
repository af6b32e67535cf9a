"""The text that marks a transcript as skillopt-sleep's own call, never a user's session.

Every backend puts ``SESSION_MARKER`` into the prompts it sends (``backends/subprocess_call.MARKER_LINE`` for the
agent CLIs); every harvester skips a session whose request carries it (skip reason ``own_marker``), so a night
never mines the transcripts its own replays left behind (e.g. ``claude -p`` writes a session file).
"""

SESSION_MARKER = "[skillopt-sleep:replay]"
