"""Is a message a request at all, and can a task be replayed as text (skillopt_sleep/replayable.py)?

The pasted screen and page are the two real messages of the public dagster-io/erk history (351 Claude Code sessions,
``shared/fixtures/transcripts/PROVENANCE.md``) that a night mined as requests before this module existed.
"""

from __future__ import annotations

import random
import re

import pytest

from skillopt_sleep.mine.replayable import (
    _JSON_STRING,
    _SINGLE_COMMAND,
    INSPECTION_CALLS,
    LONG_TOOL_RUN,
    inspects,
    needs_repo_state,
    not_replayable_reason,
)
from skillopt_sleep.mine.requests import pasted_reason

#: The head of a real message (erk session 52bc43f3, Claude Code 2.1.53): the user pasted the agent's own screen.
PASTED_TERMINAL = ("▐▛███▜▌   Claude Code v2.1.53\n▝▜█████▛▘  Opus 4.6 · Claude Max\n  ▘▘ ▝▝    /workspaces/erk\n\n"
                   "❯ erk objective plan 8036\n\n● Skill(/erk:objective-plan)\n"
                   "  ⎿  Successfully loaded skill · 5 tools allowed\n\n● Loading objective #8036...\n")
#: The head of a real message (erk session 5968a0da, 2.1.63): a pull request page copied from the browser.
PASTED_PAGE = ("\nThis pull request was updated while you were viewing it\n\nSee latest version\n\n"
               "PR inbox \nG\nthen\nI\n99+\nMerge Queue \nG\nthen\nM\nAutomations \nG\nthen\nA\n"
               "Insights \nG\nthen\nT\nAI Reviews \nG\nthen\nR\n\n\n\n\nSettings \nG\nthen\nS\n\n"
               "Nick Schrock\n#8457 [erk-plan] Fix: Rebase stacked plan branch onto parent\n")


def test_a_pasted_terminal_screen_and_a_pasted_page_are_not_requests():
    assert pasted_reason(PASTED_TERMINAL) == "pasted_terminal"
    assert pasted_reason(PASTED_PAGE) == "pasted_page"


@pytest.mark.parametrize("text", [
    "why does this fail?\nTraceback (most recent call last):\n  File \"app.py\", line 3, in <module>\n"
    "    main()\n  File \"app.py\", line 2, in main\n    raise ValueError('bad config value for retries')\n"
    "ValueError: bad config value for retries\n",
    "add a retry to the client",
    "- item one\n- item two\n- item three",
    "│ a table someone drew │",
])
def test_a_request_with_a_paste_or_a_box_character_is_still_a_request(text):
    assert pasted_reason(text) is None


@pytest.mark.parametrize("request_text, kind", [
    ("/erk:plan-implement 8215", "command"),
    ("/erk:pr-address --pr 8528", "command"),
    ("/review 1a2b3c4d", "command"),
    ("address the review comments on PR #8528", "prompt"),
    ("implement plan 7838", "prompt"),
    ("look at https://github.com/dagster-io/erk/pull/8457 and fix it", "prompt"),
    ("cherry-pick 9d2fce56ee92 onto main", "prompt"),
])
def test_a_request_that_points_at_repository_objects_needs_the_repository(request_text, kind):
    assert needs_repo_state(request_text, kind=kind)
    assert not_replayable_reason(request_text, kind=kind, command_body="# body", tool_calls=0) == "needs_repo_state"


@pytest.mark.parametrize("request_text, kind", [
    ("/review", "command"),
    ("/changelog 2.4.0", "command"),  # a version is not an id of a repository object
    ("install the dependencies for this repo", "prompt"),
    ("write the release note for version 3.0", "prompt"),
    ("add issue #12 to the changelog: the login form now keeps the email after a failed attempt, the reset link "
     "works on mobile, and the session cookie is refreshed on every request", "prompt"),
])
def test_a_request_that_says_what_to_do_is_replayable(request_text, kind):
    assert not needs_repo_state(request_text, kind=kind)


def test_a_custom_command_without_its_expansion_cannot_be_replayed():
    assert not_replayable_reason("/team:plan", kind="command", command_body=None, tool_calls=0) == (
        "command_body_missing")
    assert not_replayable_reason("/team:plan", kind="command", command_body="Plan the work.", tool_calls=0) is None


def test_a_plan_handoff_and_a_long_tool_run_are_kept_as_evidence_only():
    assert not_replayable_reason("Implement the following plan: ...", kind="plan", command_body=None,
                                 tool_calls=0) == "plan_handoff"
    assert not_replayable_reason("refactor the importer", kind="prompt", command_body=None,
                                 tool_calls=LONG_TOOL_RUN) == "long_tool_run"
    assert not_replayable_reason("refactor the importer", kind="prompt", command_body=None,
                                 tool_calls=LONG_TOOL_RUN - 1) is None


def test_an_answer_that_read_the_repository_needs_the_repository():
    assert not_replayable_reason("explain how the importer works", kind="prompt", command_body=None, tool_calls=4,
                                 inspections=INSPECTION_CALLS) == "needs_repo_state"


@pytest.mark.parametrize("name, input_head, reads", [
    ("Read", '{"file_path":"/repo/app.py"}', True),
    ("Grep", '{"pattern":"def main"}', True),
    ("read_file", '{"path":"app.py"}', True),
    ("Bash", '{"command":"cat pyproject.toml","description":"show"}', True),
    ("shell", '{"command":["bash","-lc","rg -n TODO src"]}', True),
    ("Bash", '{"command":"pnpm install","description":"install"}', False),
    ("Bash", '{"command":"git commit -m \\"fix: x\\""}', False),
    ("Edit", '{"file_path":"app.py"}', False),
])
def test_reading_tools_and_reading_shell_commands_inspect_the_repository(name, input_head, reads):
    assert inspects(name, input_head) is reads


def test_a_shell_command_is_read_from_its_json_string_as_the_one_char_at_a_time_pattern_reads_it():
    reference_single = re.compile(r'"(?:command|cmd)"\s*:\s*"((?:[^"\\]|\\.)*)"')
    reference_string = re.compile(r'"((?:[^"\\]|\\.)*)"')
    rng = random.Random(3)
    for _ in range(5000):  # escapes, quotes, and heads cut anywhere (input heads are cut at 200 characters)
        head = '{"command": "' + "".join(rng.choice('ab "\\:{}[],n') for _ in range(rng.randint(0, 40)))
        for ours, reference in ((_SINGLE_COMMAND, reference_single), (_JSON_STRING, reference_string)):
            found, expected = ours.search(head), reference.search(head)
            assert (found and found.span(1)) == (expected and expected.span(1)), head
