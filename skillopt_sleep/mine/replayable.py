"""Can a task be replayed as text, and why not?

``not_replayable_reason(...)``: a task whose text cannot be answered or judged on its own is kept as evidence (its
corrections and rules count) but never replayed or gated. Reasons, in this order:

- ``plan_handoff``: "Implement the following plan:" (the plan is the agent's text, its work the repository's);
- ``command_body_missing``: a custom slash command or skill whose expansion the transcript does not hold
  (``/team:plan 8511`` alone does not say what to do);
- ``needs_repo_state``: the request points at repository objects by number or id and says little else: an issue, pull
  request, plan or objective number (``#8215``, ``PR 8528``, ``--pr 8528``, a GitHub URL to one), or a commit hash; or a
  slash command whose arguments are only such ids. It also needs the repository when the agent read it to answer:
  at least ``INSPECTION_CALLS`` calls that read files or search the tree (``Read``, ``Grep``, ``Glob``, ``read_file``,
  a shell ``cat`` / ``rg`` / ``ls`` ...); commands that act (install, build, commit) do not count: "install the deps"
  stays replayable;
- ``long_tool_run``: the original span made at least ``LONG_TOOL_RUN`` tool calls: work done in the repository, of
  which a text answer shows nothing.
"""

from __future__ import annotations

import re

from skillopt_sleep.models import NotReplayable

#: Tool calls in one span from which the work is a long tool-driven run.
LONG_TOOL_RUN = 20


#: Calls that read the repository (files, searches) from which the answer depended on its content.
INSPECTION_CALLS = 3


#: Tool names that read files or search the tree (Claude Code, Codex, Gemini CLI, Cursor and others), lower case.
INSPECTION_TOOLS = frozenset({
    "read", "grep", "glob", "ls", "notebookread", "read_file", "read_many_files", "list_dir", "list_directory",
    "glob_file_search", "grep_search", "codebase_search", "file_search", "search_files", "view", "find",
    "search_file_content", "web_fetch", "webfetch",
})


_SHELL_READ = re.compile(r"^\W*(?:bash\s+-lc\s+\W*)?(?:cat|rg|grep|ls|find|head|tail|sed\s+-n|less|tree|wc|git\s+"
                         r"(?:show|log|diff|status|grep|blame))\b")


_ISSUE_REF = re.compile(
    r"(?:(?<![\w&])#\d{1,7}\b"
    r"|\b(?:pr|pull request|pull|issue|ticket|plan|objective|mr|merge request|bug|story)\s*(?:#|no\.?\s*|number\s*)?"
    r"\d{1,7}\b"
    r"|--(?:pr|issue|plan|objective)[= ]\d+"
    r"|github\.com/[^\s/]+/[^\s/]+/(?:pull|issues)/\d+"
    r"|\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b)",
    re.IGNORECASE,
)


_ID_ARGUMENT = re.compile(r"^(?:--?[\w-]+[= ]?)?#?\d+$|^https?://\S+$|^(?=[0-9a-f]*\d)[0-9a-f]{7,40}$",
                          re.IGNORECASE)


_WORD = re.compile(r"[A-Za-z]{3,}")


#: Content words besides the reference up to which a request is "only a reference".
REFERENCE_ONLY_WORDS = 12


def _command_arguments(request: str) -> list[str]:
    """The arguments of a ``/name args`` request, split on whitespace (``--pr 8528`` stays one argument)."""
    parts = request.strip().split()[1:]
    joined: list[str] = []
    for part in parts:
        if joined and joined[-1].startswith("-") and "=" not in joined[-1] and not _ID_ARGUMENT.match(joined[-1]):
            joined[-1] += " " + part
        else:
            joined.append(part)
    return joined


def needs_repo_state(request: str, *, kind: str = "prompt") -> bool:
    """True when the request points at repository objects by number or id and says little else (module
    docstring); a slash command whose every argument is such an id counts too."""
    text = (request or "").strip()
    if kind == "command":
        arguments = _command_arguments(text)
        if arguments and all(_ID_ARGUMENT.match(argument) for argument in arguments):
            return True
    references = list(_ISSUE_REF.finditer(text))
    if not references:
        return False
    rest = _ISSUE_REF.sub(" ", text)
    return len(_WORD.findall(rest)) <= REFERENCE_ONLY_WORDS


# Compiled once: ``inspects`` runs for every tool call of every mined turn.
_LISTED_COMMAND = re.compile(r'"(?:command|cmd)"\s*:\s*\[([^\]]*)')


# A JSON string's body as an unrolled loop (runs of plain characters between escapes): the same matches as
# (?:[^"\\]|\\.)*, without one alternation per character.
_SINGLE_COMMAND = re.compile(r'"(?:command|cmd)"\s*:\s*"([^"\\]*(?:\\.[^"\\]*)*)"')


_JSON_STRING = re.compile(r'"([^"\\]*(?:\\.[^"\\]*)*)"')


def inspects(name: str, input_head: str) -> bool:
    """A tool call that reads the repository: a reading tool, or a shell command that reads (``cat``, ``rg``...)."""
    if name.casefold() in INSPECTION_TOOLS:
        return True
    if name.casefold() in ("bash", "shell", "exec_command", "local_shell", "run_shell_command", "terminal"):
        command = input_head
        if command.startswith("{"):  # JSON arguments: {"command": "..."} or {"command": ["bash", "-lc", "..."]}
            if listed := _LISTED_COMMAND.search(command):
                command = " ".join(_JSON_STRING.findall(listed.group(1)))
            elif single := _SINGLE_COMMAND.search(command):
                command = single.group(1)
        return _SHELL_READ.match(command) is not None
    return False


def not_replayable_reason(request: str, *, kind: str, command_body: str | None, tool_calls: int,
                          inspections: int = 0) -> NotReplayable | None:
    """Why a task cannot be replayed as text (module docstring), or None when it can.

    request: the user's own words (``/name args`` for a command); kind: ``Turn.kind``; command_body: the
    command's expansion (None when the transcript has none); tool_calls: tool calls of the original span;
    inspections: those of them that read the repository (``inspects``).
    """
    if kind == "plan":
        return "plan_handoff"
    if kind == "command" and not (command_body or "").strip():
        return "command_body_missing"
    if needs_repo_state(request, kind=kind) or inspections >= INSPECTION_CALLS:
        return "needs_repo_state"
    if tool_calls >= LONG_TOOL_RUN:
        return "long_tool_run"
    return None
