"""The agents' built-in slash commands that control the session or the UI: control events, never tasks.

The list is Claude Code's (the longest; the other agents' control commands are among these names). Two users:
``harvest/claude_code.py`` drops such a command when it reads a transcript, and ``mine.noise_reason`` labels a
request that is one of them ``control_command`` for every source.
"""

CONTROL_COMMANDS = frozenset({
    "add-dir", "agents", "bashes", "bug", "clear", "compact", "config", "context", "cost", "doctor", "exit",
    "export", "fast", "feedback", "fork", "help", "hooks", "ide", "install-github-app", "keybindings", "login",
    "logout", "mcp", "memory", "migrate-installer", "model", "output-style", "permissions", "plugin", "plugins",
    "privacy-settings", "quit", "release-notes", "rename", "resume", "rewind", "sandbox", "stats", "status",
    "statusline", "tasks", "terminal-setup", "theme", "todos", "upgrade", "usage", "vim", "effort", "reset",
    "new", "skills",
})
"""Built-in commands (names without the ``/``, lower case) that control the session or the UI."""
