"""Cline / Roo Code / Kilo Code harvester: the user's own requests, and what followed each, from the task folders
these VS Code extensions keep.

Layout: ``<globalStorage>/<extension id>/tasks/<task id>/`` (extension ids ``saoudrizwan.claude-dev`` (Cline),
``rooveterinaryinc.roo-cline`` (Roo Code), ``kilocode.kilo-code`` (Kilo Code)), each task folder holding whole-file
JSON rewritten on every save (see ``shared/FORMATS.md`` §3 and §3.1):

* ``ui_messages.json``: the chat as shown, ``[{ts (epoch ms), type: "say"|"ask", say|ask, text, partial, ...}]``.
  Read first when present: it has the human's words with their times. Fixture ``roo-bc93a6f7`` (Roo Code, Sept
  2025): the task is the first ``say text`` (newer Cline: ``say task``), each later ``say user_feedback`` is a human
  turn (after ``completion_result``, as the answer to a ``followup`` question, or typed on ``resume_task``).
* ``api_conversation_history.json``: Anthropic-style messages. Read when there is no ``ui_messages.json`` (fixture
  ``gmfstu`` (Cline 3.51, native ``tool_use`` blocks, no ``ts``); ``roo-bc93a6f7`` (Roo, XML tool calls in text,
  ``ts`` on every message)). The human's words are the ``<task>`` of the first message, the ``<feedback>`` of an
  ``attempt_completion`` result (its last block: newer Cline writes the notice and the ``<feedback>`` as blocks of
  their own), the ``<answer>`` of an ``ask_followup_question`` result and the ``<user_message>`` of a "New
  instructions for task continuation" (plan mode: "New message to respond to with plan_mode_respond tool") block,
  in the "[TASK RESUMPTION]" block or the block right after it. Both versions return tool results as *user text*
  starting ``[tool_name for 'x'] Result:`` (a ``tool_result`` block is read too). Authorship is structural: an
  envelope or a ``Result:`` header counts only at the start of a section of a message (its first block, or the first
  after an ``<environment_details>`` block); inside a result's body (a file, command output) it is data. A denial's
  or an approval's feedback is the human's only when a ``ui_messages.json`` ``user_feedback`` typed it; an answer
  that is one of the options the agent offered was clicked, and is the agent's words.
* ``task_metadata.json`` (Cline): ``environment_history[].cline_version`` gives the version.

Never a request: ``<environment_details>`` (read only for the cwd, "Current Working Directory (…)" / "Current
Workspace Directory (…)"), tool results (file contents, command output, sub-task reports ``[new_task completed]``),
the extension's own instructions (task_progress reminders, "[TASK RESUMPTION]" preambles) and the agent's text.
What follows a request: the last agent text or ``attempt_completion`` result, tools (from the ``Result:`` headers:
name and the ``for '…'`` head, or the ``tool_use`` input), tool errors ("The tool execution failed…", ``say error``,
a non-zero ``Exit code``), denials ("The user denied this operation", with its ``<feedback>`` as
``rejection_feedback``; the ``user_feedback`` that typed it is then not a new turn), approvals with a typed context
(a queued message) and user cancels (``cancelReason: "user_cancelled"``, "[Response interrupted by user]").

Skipped: sub-tasks (``new_task`` children: a ``parentTaskId`` in ``task_metadata.json``/``history_item.json``, or a
first request equal to the message of a ``newTask`` another task gave), ``subagent``; our own replay sessions
(``own_marker``); a task with no known cwd unless the scope is ``all`` (``out_of_scope``).

Checkpoint: key = the task's main file (``ui_messages.json``, else ``api_conversation_history.json``); ``offset`` =
the number of messages already harvested; only turns whose request is at or after it are emitted. ``UNCOUNTED``
(-1) marks a file never counted (too old), and a file that shrank (a checkpoint restore cut the history) is
treated the same: then only turns asked after the checkpoint's mtime are new.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import orjson

from skillopt_sleep.harvest.read_plan import (
    HarvestContext,
    ReadPlan,
    file_mtime,
    keep_previous_checkpoint,
    kept_unchanged,
    lists_sessions,
    plan_read,
    read_isolated,
)
from skillopt_sleep.harvest.reader import MAX_LINE_BYTES
from skillopt_sleep.harvest.turns import (
    REQUEST_MAX_CHARS,
    DraftTurn,
    compact_json,
    harvested_turns,
    parse_timestamp,
    text_of_blocks,
)
from skillopt_sleep.models import FileCheckpoint, HarvestStats, Session
from skillopt_sleep.prompts.marker import is_own_request

SOURCE = "cline"

EXTENSION_IDS = ("saoudrizwan.claude-dev", "rooveterinaryinc.roo-cline", "kilocode.kilo-code")
UI_FILE = "ui_messages.json"
API_FILE = "api_conversation_history.json"
SIDE_FILES = ("task_metadata.json", "history_item.json")
UNCOUNTED = -1
"""``FileCheckpoint.offset`` of a file whose messages were never counted."""

_TEXT_CAP = REQUEST_MAX_CHARS + 1024
_ENV = re.compile(r"<environment_details>.*?(?:</environment_details>|\Z)", re.DOTALL)
_CWD = re.compile(r"Current (?:Working|Workspace) Directory \((.+)\)(?: Files)?[ \t]*$", re.MULTILINE)
_HEADER = re.compile(r"\[([a-z_]+)((?: for '| in ).*?| completed|)\] Result:", re.DOTALL)
_LINE_START = re.compile(r"\[[a-z_]+[] ]")
_RESUME = re.compile(r"\A\s*(?:\[TASK RESUMPTION\].*?)?(?:New instructions for task continuation|New message to "
                     r"respond to with plan_mode_respond tool \(be sure to provide your response in the <response> "
                     r"parameter\)):\s*<user_message>\n?(.*?)\n?</user_message>", re.DOTALL)
_RESUMPTION = "[TASK RESUMPTION]"
_TASK = re.compile(r"\A\s*<task>\n?(.*?)\n?</task>", re.DOTALL)
_ANSWER = re.compile(r"\A\s*<answer>\n?(.*?)\n?</answer>", re.DOTALL)
_FEEDBACK_NOTICE = ("The user has provided feedback on the results. Consider their input to continue the task, and "
                    "then attempt completion again.")
_COMPLETION_FEEDBACK = re.compile(r"\A\s*The user has provided feedback on the results\..*?<feedback>\n?(.*?)\n?"
                                  r"</feedback>", re.DOTALL)
_ATTACHED = ("Files attached by the user:", "<file_content ")
_FEEDBACK = re.compile(r"\A\s*<feedback>\n?(.*?)\n?</feedback>\s*\Z", re.DOTALL)
_DENIED = re.compile(r"\A\s*The user denied this operation(?: and provided the following feedback:\s*<feedback>\n?"
                     r"(.*?)\n?</feedback>)?", re.DOTALL)
_APPROVED = re.compile(r"\A\s*The user approved this operation and provided the following context:\s*<feedback>\n?"
                       r"(.*?)\n?</feedback>", re.DOTALL)
_TOOL_FAILED = re.compile(r"\A\s*The tool execution failed with the following error:\s*(?:<error>\n?(.*?)\n?</error>)?",
                          re.DOTALL)
_EXIT_CODE = re.compile(r"Exit code: (-?\d+)")
_THINKING = re.compile(r"<thinking>.*?(?:</thinking>|\Z)", re.DOTALL)
_XML_TOOL = re.compile(r"(?m)^<([a-z]+(?:_[a-z]+)+)>\s*$")
_XML_RESULT = re.compile(r"<(attempt_completion|plan_mode_respond)>\s*<(?:result|response)>\n?(.*?)\n?"
                         r"</(?:result|response)>", re.DOTALL)
_XML_NEW_TASK = re.compile(r"<new_task>.*?<message>\n?(.*?)\n?</message>", re.DOTALL)
_TOOL_NOISE = "[Response interrupted by a tool use result"
_USER_INTERRUPT = "[Response interrupted by user"
_DIALOGUE_TOOLS = frozenset({"attempt_completion", "ask_followup_question", "plan_mode_respond"})
"""Tools that are the agent talking to the human, not actions (their results carry the human's reply)."""


# --------------------------------------------------------------------------- listing


def default_root() -> Path:
    """VS Code's user ``globalStorage`` folder, which holds one folder per extension id: Linux
    ``$XDG_CONFIG_HOME/Code/User/globalStorage`` (default ``~/.config/...``), macOS ``~/Library/Application
    Support/Code/User/globalStorage``, Windows ``%APPDATA%/Code/User/globalStorage`` (absolute, ``~`` expanded).
    A root may also be one extension's folder or its ``tasks/`` folder."""
    if sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    elif os.name == "nt":
        base = Path(os.environ.get("APPDATA") or Path.home() / "AppData" / "Roaming")
    else:
        base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return (base.expanduser() / "Code" / "User" / "globalStorage").absolute()


def _task_dirs(tasks: Path) -> list[Path]:
    try:
        entries = [entry for entry in os.scandir(tasks) if entry.is_dir(follow_symlinks=False)]
    except OSError:
        return []
    return [Path(entry.path) for entry in entries
            if os.path.isfile(os.path.join(entry.path, UI_FILE)) or os.path.isfile(os.path.join(entry.path, API_FILE))]


def list_tasks(root: Path) -> list[tuple[Path, str | None]]:
    """``(task folder, extension id or None)`` of every task under ``root`` (a globalStorage folder, one
    extension's folder, or a ``tasks/`` folder), sorted. Listing only; an unreadable folder lists nothing."""
    root = Path(root)

    def known(name: str) -> str | None:
        return name.lower() if name.lower() in EXTENSION_IDS else None

    if (root / "tasks").is_dir():
        found = [(path, known(root.name)) for path in _task_dirs(root / "tasks")]
    elif _task_dirs(root):
        found = [(path, known(root.parent.name)) for path in _task_dirs(root)]
    else:
        try:
            children = {entry.name.lower(): entry.path for entry in os.scandir(root) if entry.is_dir()}
        except OSError:
            return []
        found = [(path, ext) for ext in EXTENSION_IDS if ext in children
                 for path in _task_dirs(Path(children[ext]) / "tasks")]
    return sorted(found, key=lambda item: str(item[0]))


def has_sessions(root: Path) -> bool:
    """True when ``root`` holds at least one Cline, Roo Code or Kilo Code task folder (listing only)."""
    return lists_sessions(lambda: list_tasks(root))


# --------------------------------------------------------------------------- events


@dataclass
class Event:
    """One thing in a task's history, in order. kind: ``request``, ``answer``, ``tool``, ``error``, ``rejected``,
    ``queued``, ``interrupt``; ``index`` is the message's position in the main file."""

    kind: str
    index: int
    text: str = ""
    name: str = ""
    timestamp: datetime | None = None


@dataclass
class Task:
    """What one task folder holds, reduced to events."""

    events: list[Event] = field(default_factory=list)
    cwd: str | None = None
    first_time: datetime | None = None
    last_time: datetime | None = None
    spawned: list[str] = field(default_factory=list)
    """The messages of the ``new_task`` children this task started."""
    offered: frozenset[str] = frozenset()
    """The options the agent offered with its latest ``ask_followup_question``: an answer that is one of them was
    clicked, not typed (the agent's words)."""


_XML_OPTIONS = re.compile(r"<options>\s*(\[.*?\])\s*</options>", re.DOTALL)
_XML_SUGGEST = re.compile(r"<suggest(?:\s[^>]*)?>\s*(.*?)\s*</suggest>", re.DOTALL)


def _options(value: object) -> frozenset[str]:
    """The options of an ``ask_followup_question``: a list, or a JSON array in a string (Cline's ``options``; Roo
    Code's ``suggest`` items are ``{"answer": ...}``)."""
    if isinstance(value, str):
        try:
            value = orjson.loads(value)
        except ValueError:
            return frozenset()
    if not isinstance(value, list):
        return frozenset()
    items = [item.get("answer") if isinstance(item, dict) else item for item in value]  # Roo: {"answer": ...}
    return frozenset(item.strip() for item in items if isinstance(item, str) and item.strip())


def _xml_offered(text: str) -> frozenset[str] | None:
    """The options of an XML-era ``<ask_followup_question>`` in the agent's text (Cline ``<options>``, Roo Code
    ``<suggest>``), or None when the text asks no question."""
    if "<ask_followup_question>" not in text:
        return None
    found = _XML_OPTIONS.search(text)
    return _options(found.group(1)) if found else frozenset(
        item.strip() for item in _XML_SUGGEST.findall(text) if item.strip())


def _tag_text(value: object) -> str:
    return value.strip()[:_TEXT_CAP] if isinstance(value, str) else ""


@dataclass(frozen=True)
class Block:
    """One text block of a user message: its text, and whether it was a structural ``tool_result`` block (its header,
    ``[name] Result:``, is ours to write, not found in the text)."""

    text: str
    tool_result: bool = False


def result_events(task: Task, blocks: list[Block], index: int, stamp: datetime | None, *, requests: bool,
                  pending: dict[str, list[str]], typed: frozenset[str] = frozenset()) -> None:
    """Read the blocks of one user message (or of one ``api_req_started`` request): cwd, tool results and, when
    ``requests``, the human's words. ``pending``: tool name -> input heads of ``tool_use`` calls not yet answered.

    Cline writes its envelopes only at the start of a section of a message: its first block, or the first block after
    the ``<environment_details>`` that ends a section (Roo Code resumes a task after a tool result that way). They are
    the ``<task>``, a task resumption's ``<user_message>``, and a ``[name] Result:`` header (Roo Code puts that header
    alone in a block and the result in the next); a structural ``tool_result`` block starts with its header too.
    Anything else is a result's body (a file, command output, another agent's report): never read for an envelope or a
    header, whatever it holds. typed: the human's own feedback texts (``ui_messages.json``'s ``user_feedback``): the
    feedback of a denied or approved operation counts only when the human typed it. A tool result's body is any text
    (a file can begin "The user denied this operation …"), so without ``ui_messages.json`` to check it against, a
    denial keeps its structure (``rejected``) and drops the words."""
    name: str | None = None
    body: list[str] = []
    section_start = True
    resumed = False  # the previous block opened a section with the "[TASK RESUMPTION]" preamble

    def close() -> None:
        if name is not None:
            _segment_events(task, name, body, index, stamp, requests, typed)

    for block in blocks:
        raw = block.text
        for details in _ENV.finditer(raw):
            found = _CWD.search(details.group(0))
            if found and task.cwd is None:
                task.cwd = found.group(1).strip()
        text = _ENV.sub("", raw)
        if not text.strip():
            if "<environment_details>" in raw:  # the end of a section: what follows may be an envelope again
                close()
                name, body, section_start = None, [], True
            continue
        first, section_start = section_start, False
        after_resumption, resumed = resumed, first and text.lstrip().startswith(_RESUMPTION)
        header = _HEADER.match(text.lstrip()) if first or block.tool_result else None
        if header is not None:
            close()
            name, rest = header.group(1), header.group(2).strip()
            body = [text.lstrip()[header.end():]]
            if rest == "completed":  # a sub-task's report, not a tool call of this task
                name = None
                continue
            if name not in _DIALOGUE_TOOLS:
                queue = pending.get(name)
                head = queue.pop(0) if queue else rest.removeprefix("for ").strip("'")
                task.events.append(Event("tool", index, head, name))
            continue
        if name is not None:
            body.append(text)  # a result's body: data
            continue
        if not first and not after_resumption:
            continue
        resume = _RESUME.match(text)
        if after_resumption:  # the preamble and the user's message are two blocks (Cline >= 3.x)
            if requests and resume:
                task.events.append(Event("request", index, _tag_text(resume.group(1)), timestamp=stamp))
            continue
        opening = _TASK.match(text) if "<environment_details>" not in raw else None
        if opening and any(event.kind == "request" for event in task.events):
            opening = None  # the task opens the first message only
        if requests and (resume or opening):
            task.events.append(Event("request", index, _tag_text((resume or opening).group(1)), timestamp=stamp))
    close()


def _segment_events(task: Task, name: str, blocks: list[str], index: int, stamp: datetime | None, requests: bool,
                    typed: frozenset[str]) -> None:
    """The events of one ``[name] Result:`` body, its text blocks in order (markers are matched at the start of the
    body only: a file that quotes them is a file); typed: see ``result_events``."""
    body = "\n".join(blocks)
    if name == "ask_followup_question" or name == "attempt_completion":
        found = _ANSWER.match(body) if name == "ask_followup_question" else _completion_feedback(blocks)
        if found and name == "ask_followup_question" and found.group(1).strip() in task.offered:
            return  # an option the agent offered, clicked: the agent's words, not the human's
        if requests and found:
            task.events.append(Event("request", index, _tag_text(found.group(1)), timestamp=stamp))
        return
    denied = _DENIED.match(body)
    approved = _APPROVED.match(body)
    failed = _TOOL_FAILED.match(body)
    if denied:
        task.events.append(Event("rejected", index, _feedback(denied.group(1), typed)))
    elif approved:
        task.events.append(Event("queued", index, _feedback(approved.group(1), typed)))
    elif failed:
        task.events.append(Event("error", index, (failed.group(1) or body).strip()[:_TEXT_CAP]))
    elif name == "execute_command":  # only a command's own status line: other tools may show any text
        code = _EXIT_CODE.search(body[:500])
        if code and int(code.group(1)) != 0:
            task.events.append(Event("error", index, body.strip()[:_TEXT_CAP]))


def _completion_feedback(blocks: list[str]) -> re.Match | None:
    """The human's feedback on an ``attempt_completion``. Cline writes it as the result's last text block (the notice
    and the ``<feedback>`` in one block, or the notice alone and then a ``<feedback>`` block), after the output of the
    completion's command, whose text can be anything, and before the files the human attached ("Files attached by the
    user:", "<file_content …>"); with no feedback the result is empty. So only the last block (before attached
    files) is read: a command output shaped like feedback always comes before the real one."""
    at = len(blocks) - 1
    while at > 0 and blocks[at].lstrip().startswith(_ATTACHED):
        at -= 1
    found = _COMPLETION_FEEDBACK.match(blocks[at])
    if found is None and at > 0 and blocks[at - 1].strip() == _FEEDBACK_NOTICE:
        found = _FEEDBACK.match(blocks[at])
    return found


def _feedback(value: object, typed: frozenset[str]) -> str:
    """The feedback typed with a denial or an approval; "" when the human did not type it (not in ``typed``)."""
    text = _tag_text(value)
    return text if text in typed else ""


def _agent_text(text: str) -> str:
    """The agent's visible words in a text block: ``attempt_completion`` result when present, else the text before
    its first XML tool call (Roo XML era), without ``<thinking>``."""
    found = _XML_RESULT.search(text)
    if found:
        return found.group(2)
    text = _THINKING.sub("", text)
    call = _XML_TOOL.search(text)
    if call:
        text = text[:call.start()]
    return text.split(_TOOL_NOISE)[0].split(_USER_INTERRUPT)[0]


def read_api(messages: list, task: Task, *, requests: bool) -> None:
    """Fill ``task`` from ``api_conversation_history.json`` messages. With ``requests`` False only the cwd and the
    spawned sub-tasks are taken (the events and times come from ``ui_messages.json``)."""
    pending: dict[str, list[str]] = {}
    by_id: dict[str, tuple[str, str]] = {}
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        stamp = parse_timestamp(message.get("ts"))
        if stamp is not None and requests:
            task.first_time = task.first_time or stamp
            task.last_time = stamp
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list):
            continue
        if message.get("role") == "assistant":
            for block in blocks:
                if isinstance(block, dict):
                    _assistant_block(task, block, index, pending, by_id, requests)
            continue
        if message.get("role") != "user":
            continue
        texts: list[Block] = []
        for block in blocks:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                texts.append(Block(block["text"]))
            elif block.get("type") == "tool_result":
                name, head = by_id.get(str(block.get("tool_use_id")), ("unknown", ""))
                body = text_of_blocks(block.get("content"))
                prefix = f"[{name} for '{head}'] Result:\n" if head else f"[{name}] Result:\n"
                if block.get("is_error") and not _TOOL_FAILED.match(body):
                    body = f"The tool execution failed with the following error:\n<error>\n{body}\n</error>"
                texts.append(Block(prefix + body, tool_result=True))
        if requests:
            result_events(task, texts, index, stamp, requests=True, pending=pending)
        else:
            scratch = Task()
            result_events(scratch, texts, index, stamp, requests=False, pending={})
            task.cwd = task.cwd or scratch.cwd


def _assistant_block(task: Task, block: dict, index: int, pending: dict[str, list[str]],
                     by_id: dict[str, tuple[str, str]], requests: bool) -> None:
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        text = block["text"]
        task.spawned.extend(found.strip() for found in _XML_NEW_TASK.findall(text))
        offered = _xml_offered(text)
        if offered is not None:
            task.offered = offered
        if _USER_INTERRUPT in text and requests:
            task.events.append(Event("interrupt", index))
        if requests:
            task.events.append(Event("answer", index, _agent_text(text).strip()[:_TEXT_CAP]))
    elif kind == "tool_use":
        name = str(block.get("name") or "unknown")
        raw_input = block.get("input")
        data = {key: value for key, value in raw_input.items() if key != "task_progress"} \
            if isinstance(raw_input, dict) else {}
        if name == "ask_followup_question":
            task.offered = _options(data.get("options"))
        if name == "new_task":
            task.spawned.extend(str(data[key]).strip() for key in ("message", "context") if data.get(key))
        result = data.get("result") or data.get("response")
        if name in _DIALOGUE_TOOLS and isinstance(result, str) and requests:
            task.events.append(Event("answer", index, result[:_TEXT_CAP]))
        head = compact_json(data)
        pending.setdefault(name, []).append(head)
        by_id[str(block.get("id"))] = (name, head)


def read_ui(messages: list, task: Task) -> None:
    """Fill ``task`` from ``ui_messages.json``: requests (the task, ``user_feedback``), answers, tools and their
    outcomes (from each ``api_req_started`` request), ``say error``, cancels and ``newTask`` children. The feedback of a
    denied or approved operation is the human's only when a ``user_feedback`` typed it."""
    typed = frozenset(_tag_text(message.get("text")) for message in messages if isinstance(message, dict)
                      and message.get("type") == "say" and message.get("say") == "user_feedback")
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        stamp = parse_timestamp(message.get("ts"))
        if stamp is not None:
            task.first_time = task.first_time or stamp
            task.last_time = stamp
        kind = message.get("say") if message.get("type") == "say" else message.get("ask")
        text = message.get("text") if isinstance(message.get("text"), str) else ""
        if kind == "task" or (kind == "text" and index == 0):
            task.events.append(Event("request", index, text[:_TEXT_CAP], timestamp=stamp))
        elif kind == "followup" and message.get("type") == "ask":
            question = _json_object(text)
            task.offered = _options(question.get("options") or question.get("suggest"))
        elif kind == "user_feedback":
            if text.strip() in task.offered:
                continue  # an option the agent offered, clicked
            if not _feedback_answers_tool(messages, index):
                task.events.append(Event("request", index, text[:_TEXT_CAP], timestamp=stamp))
        elif kind in ("text", "completion_result") and message.get("type") == "say":
            task.events.append(Event("answer", index, text[:_TEXT_CAP]))
        elif kind == "error":
            task.events.append(Event("error", index, text[:_TEXT_CAP]))
        elif kind in ("api_req_started", "tool", "plan_mode_respond"):
            data = _json_object(text)
            if kind == "api_req_started":
                request = data.get("request")
                if isinstance(request, str):
                    result_events(task, [Block(part, tool_result=True) for part in split_results(request)], index,
                                  stamp, requests=False, pending={}, typed=typed)
                if data.get("cancelReason") == "user_cancelled":
                    task.events.append(Event("interrupt", index))
            elif kind == "plan_mode_respond" and isinstance(data.get("response"), str):
                task.events.append(Event("answer", index, data["response"][:_TEXT_CAP]))
            elif data.get("tool") == "newTask" and isinstance(data.get("content"), str):
                task.spawned.append(data["content"].strip())


def split_results(text: str) -> list[str]:
    """Cut a joined request text into blocks, one starting at each ``[name ...] Result:`` header at a line start.
    Line starts are found with ``str.find`` (a multi-line ``^`` regex tries every position of long tool outputs)."""
    starts = [0]
    position = text.find("\n[")
    while position != -1:
        start = position + 1
        if _LINE_START.match(text, start) and _HEADER.match(text, start):
            starts.append(start)
        position = text.find("\n[", start)
    return [text[start:end] for start, end in zip(starts, starts[1:] + [len(text)])]


def _feedback_answers_tool(messages: list, index: int) -> bool:
    """True when the ``user_feedback`` at ``index`` is the reason typed with a tool denial or approval (the next
    ``api_req_started`` request says so): it is then that tool's outcome, not a new turn."""
    for message in messages[index + 1:]:
        if isinstance(message, dict) and message.get("say") == "api_req_started":
            request = _json_object(message.get("text")).get("request")
            return isinstance(request, str) and ("denied this operation and provided the following feedback" in request
                                                 or "approved this operation and provided the following context"
                                                 in request)
    return False


def _json_object(text: object) -> dict:
    if not isinstance(text, str) or not text.startswith("{"):
        return {}
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


def build_turns(events: list[Event], cwd: str | None) -> list[tuple[int, DraftTurn]]:
    """One draft turn per request event, with the position of its message and what followed it."""
    drafts: list[tuple[int, DraftTurn]] = []
    current: DraftTurn | None = None
    for event in events:
        if event.kind == "request":
            current = DraftTurn(request=event.text, timestamp=event.timestamp, cwd=cwd)
            drafts.append((event.index, current))
        elif current is None:
            continue
        elif event.kind == "answer":
            current.set_answer(event.text, event.index)
        elif event.kind == "tool":
            current.add_tool(event.name, event.text, None)
        elif event.kind == "error":
            if current.tools:
                current.tools[-1].set_error(event.text)
        elif event.kind == "rejected":
            current.rejected_tool = True
            current.rejection_feedback = event.text or current.rejection_feedback
        elif event.kind == "queued":
            current.add_queued(event.text)
        elif event.kind == "interrupt":
            current.interrupted = True
    return drafts


# --------------------------------------------------------------------------- harvest


class _NotASession(Exception):
    """A task folder whose files hold no list of messages (the reason is the message)."""


def _load_list(path: Path, stats: HarvestStats) -> list | None:
    """The JSON array in ``path``; None when absent. Raises ValueError (``bad_json``, ``too_large``) or
    ``_NotASession`` (``not_a_session``: not an array), the reason as the message."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_LINE_BYTES + 1)
    except FileNotFoundError:
        return None
    stats.bytes_read += len(raw)
    if len(raw) > MAX_LINE_BYTES:
        raise ValueError("too_large")
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        raise ValueError("bad_json") from error
    if not isinstance(data, list):
        raise _NotASession("not_a_session")
    return data


def _side_info(folder: Path) -> tuple[bool, str | None]:
    """``(has a parent task id, extension version)`` from ``task_metadata.json`` / ``history_item.json``."""
    parent, version = False, None
    for name in SIDE_FILES:
        try:
            data = orjson.loads((folder / name).read_bytes())
        except (OSError, orjson.JSONDecodeError):
            continue
        if not isinstance(data, dict):
            continue
        parent = parent or any(data.get(key) for key in ("parentTaskId", "parent_task_id", "parentId"))
        history = data.get("environment_history")
        if isinstance(history, list) and history and isinstance(history[-1], dict):
            version = history[-1].get("cline_version") or version
    return parent, version


@dataclass
class _Loaded:
    folder: Path
    extension: str | None
    main: Path
    plan: ReadPlan
    task: Task
    count: int
    parent: bool
    version: str | None


def harvest_cline(root: Path, context: HarvestContext, stats: HarvestStats) -> list[Session]:
    """Harvest the Cline / Roo Code / Kilo Code tasks under ``root``; updates ``stats`` and
    ``context.new_checkpoints``.

    Returns the tasks holding at least one new request, in task-folder path order. A bad file never raises: it is
    counted (``unreadable``, ``bad_json``, ``not_a_session``, ``too_large``) and keeps its previous checkpoint.
    """
    loaded: list[_Loaded] = []
    for folder, extension in list_tasks(root):
        item = read_isolated(_main_file(folder), context, stats,
                             functools.partial(_load_task, folder=folder, extension=extension))
        if item is not None:
            loaded.append(item)
    spawned = {text for item in loaded for text in item.task.spawned}
    sessions = []
    for item in loaded:
        session = read_isolated(item.main, context, stats, functools.partial(_session, item=item, spawned=spawned))
        if session is not None:
            sessions.append(session)
    return sessions


def _main_file(folder: Path) -> Path:
    """The file a task's checkpoint is kept for: its UI messages, else its API history."""
    ui_path = folder / UI_FILE
    return ui_path if ui_path.is_file() else folder / API_FILE


def _load_task(main: Path, context: HarvestContext, stats: HarvestStats, *, folder: Path,
               extension: str | None) -> _Loaded | None:
    ui_path, api_path = folder / UI_FILE, folder / API_FILE
    plan = plan_read(main, context, stats)
    if plan is None:
        return None
    if kept_unchanged(plan, context, stats):
        return None
    if plan.action == "too_old":
        stats.skip("too_old")
        context.new_checkpoints[plan.key] = FileCheckpoint(size=plan.size, mtime_ns=plan.mtime_ns, offset=UNCOUNTED)
        return None
    if plan.previous is not None:
        stats.files_grown += 1
    task = Task()
    try:
        ui = _load_list(ui_path, stats) if main == ui_path else None
        if ui is not None:
            read_ui(ui, task)
        # With the UI file read, the API history adds only the cwd and sub-tasks (the UI lists them too): it is
        # read only when the UI gave no cwd. Every tool output is in both files, so this halves what is decoded.
        api = _load_list(api_path, stats) if ui is None or task.cwd is None else None
        if ui is None and api is None:
            raise _NotASession("not_a_session")
    except (OSError, ValueError, _NotASession) as error:
        reason = "unreadable" if isinstance(error, OSError) else str(error)
        if reason == "bad_json":
            stats.malformed(reason)
        else:
            stats.skip(reason)
        keep_previous_checkpoint(plan, context)
        return None
    if api is not None:
        read_api(api, task, requests=ui is None)
    count = len(ui if ui is not None else api)  # type: ignore[arg-type]
    context.new_checkpoints[plan.key] = FileCheckpoint(size=plan.size, mtime_ns=plan.mtime_ns, offset=count,
                                                       session_id=folder.name)
    parent, version = _side_info(folder)
    return _Loaded(folder, extension, main, plan, task, count, parent, version)


def _new_turns(drafts: list[tuple[int, DraftTurn]], previous: FileCheckpoint | None, count: int) -> list[DraftTurn]:
    """All drafts on a first read; else those at or after the stored count, or (never counted, or the history was
    cut back below the count) those asked after the checkpoint's mtime."""
    if previous is None:
        return [draft for _, draft in drafts]
    if previous.offset < 0 or count < previous.offset:
        since = datetime.fromtimestamp(previous.mtime_ns / 1e9, tz=timezone.utc)
        return [draft for _, draft in drafts if draft.timestamp is not None and draft.timestamp > since]
    return [draft for index, draft in drafts if index >= previous.offset]


def _session(main: Path, context: HarvestContext, stats: HarvestStats, *, item: _Loaded,
             spawned: set[str]) -> Session | None:
    task, plan = item.task, item.plan
    drafts = build_turns(task.events, task.cwd)
    if not drafts:
        stats.skip("no_requests")
        return None
    first = drafts[0][1].request
    if item.parent or first.strip() in spawned:
        stats.skip("subagent")
        context.agent_answers.extend(answer for _, draft in drafts if (answer := "\n".join(draft.answer_parts)))
        return None
    if is_own_request(first):
        stats.skip("own_marker")
        return None
    if not context.scope_all and not context.in_scope(task.cwd):
        stats.skip("out_of_scope")
        return None
    turns = harvested_turns(_new_turns(drafts, plan.previous, item.count), context, file_mtime(plan), stats)
    if turns is None:
        return None
    started = task.first_time
    if started is None and item.folder.name.isdigit():
        started = parse_timestamp(int(item.folder.name))  # Cline task ids are epoch milliseconds
    ended = task.last_time or file_mtime(plan)
    return Session(source=SOURCE, session_id=item.folder.name, path=str(item.main), cwd=task.cwd,
                   version=item.version, started_at=started, ended_at=ended, entrypoint=item.extension, turns=turns)
