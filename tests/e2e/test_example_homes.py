"""End to end: one night of the real ``skillopt-sleep`` CLI, in a subprocess, on each bundled example home of the
newer sources (``examples/<source>-home``: real sessions laid out where each agent keeps them, see
``examples/README.md``).

The backend is the mock simulator; the harvest, mining, replay, gate and diagnostics are the real code. The expected
counts were read off the example files themselves (see ``EXPECTED``); the status is whatever the night decides on
them (these nights have no held-out task with a validated check, so the gate rejects; cursor mines no replayable task).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_subprocess import EXAMPLES, run_cli


@dataclass(frozen=True)
class Expected:
    sessions: int
    requests: int
    skipped: dict[str, int]
    status: str


EXPECTED = {
    # tmp/<sha256(/home/wei/repo/discordbot)>/chats/session-2026-04-23T12-52-0ab84937.jsonl: line 4 the `/init` request
    # (displayContent "/init", content its expansion) and line 22 the human follow-up ("幫我做一個小修改 …"); line 18
    # ("System: Please continue.", an update_topic functionResponse) is written by the tool, not typed -> 2.
    # tmp/<sha256(/home/wei/repo/VibeCodingTracker)>/chats/session-2026-03-27T10-19-8a20078e.json: messages[0] -> 1.
    "gemini": Expected(sessions=2, requests=3, skipped={}, status="rejected"),
    # session-state/96ef38f0-…/events.jsonl: line 7, the only typed user.message (line 44 is the autopilot nudge,
    # content "") -> 1. history-session-state/0b2a81da-….json (legacy): timeline[2], the only `user` entry -> 1.
    "copilot": Expected(sessions=2, requests=2, skipped={}, status="rejected"),
    # opencode.db: one session (ses_04ca851f…); its 8 user messages (positions 0, 5, 9, 13, 18, 22, 25, 29 of the 35
    # messages ordered by time_created) are the 8 requests.
    "opencode": Expected(sessions=1, requests=8, skipped={}, status="rejected"),
    # projects/Users-karuo-Documents-2/agent-transcripts/cf7a11df-….txt: the 4 `user:` blocks at lines 1, 45, 913,
    # 987. Mining folds the last three into the first ("运行起来", which needs the repository): no replayable task.
    "cursor": Expected(sessions=1, requests=4, skipped={}, status="no_tasks"),
    # .aider.chat.history.md: 2 runs ("# aider chat started at", lines 2 and 36); requests are the `####` lines 17
    # (run 1) and 44, 86, 105, 125, 170 (run 2) -> 6; the 6 commands /exit (34), /add (83), /load (100, 103),
    # /drop (119), /add (122) are not requests: counted in messages_skipped["command"].
    "aider": Expected(sessions=2, requests=6, skipped={}, status="rejected"),
    # rooveterinaryinc.roo-cline/tasks/bc93a6f7-…/ui_messages.json: [0] `say text` (the task) and the `say
    # user_feedback` at [55] [64] [70] [76] [98] [125] [131] -> 8 ([116] "❌ ÉCHEC …" is one of the answers the
    # agent suggested at [115]: clicked, not typed). saoudrizwan.claude-dev/tasks/1769053680585/
    # api_conversation_history.json (no ui_messages.json): the <task> of message [0] -> 1.
    "cline": Expected(sessions=2, requests=9, skipped={}, status="rejected"),
}


def files_under(root: Path) -> dict[str, int]:
    return {str(path.relative_to(root)): path.stat().st_size for path in sorted(root.rglob("*")) if path.is_file()}


@pytest.mark.parametrize("source", list(EXPECTED))
def test_a_night_on_the_example_home(source, tmp_path, cli_env):
    expected = EXPECTED[source]
    home = EXAMPLES / f"{source}-home"
    before = files_under(home)
    project = tmp_path / "project"
    project.mkdir()
    env = {**cli_env, "SKILLOPT_SLEEP_BACKEND": "mock"}
    done = run_cli("run-now", "--source", source, "--home", f"{source}={home}", "--scope", "all",
                   "--lookback-hours", "0", "--json", env=env, cwd=project)
    assert done.returncode == 0, done.stderr
    night_dir = Path(json.loads(done.stdout)["night_dir"])
    diagnostics = json.loads((night_dir / "diagnostics.json").read_text())

    assert diagnostics["sources"] == [source]
    harvest = diagnostics["harvest"]
    assert diagnostics["harvest_per_source"][source] == harvest
    assert harvest["files_scanned"] >= 1
    assert harvest["sessions_harvested"] == expected.sessions
    assert harvest["requests"] == expected.requests
    assert harvest["sessions_skipped"] == expected.skipped
    assert harvest["malformed_lines"] == {}
    assert harvest["messages_skipped"] == ({"command": 6} if source == "aider" else {})
    assert harvest["secrets_redacted"] == 0  # real sessions with no secret in them: nothing is redacted
    assert diagnostics["status"] == expected.status, diagnostics["summary"]

    # proposing never writes the project (no --apply), and reading never touches the example home
    assert list(project.iterdir()) == []
    assert diagnostics["proposed"] == [] and not (night_dir / "proposed").exists()
    assert files_under(home) == before
