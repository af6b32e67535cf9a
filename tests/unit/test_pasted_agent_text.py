"""An agent's answer pasted back is not a request (``replayable.AgentTexts``, mining drop ``pasted_agent_text``).

Real case: the Roo Code task ``bc93a6f7`` (``tests/fixtures/transcripts/cline``). Its ``ui_messages.json`` [76] and
[98] are ``say user_feedback`` whose text is a sub-task's report the human pasted when resuming the orchestrator
(markdown headings, "MISSION ... COMPLÈTE", "ÉCHEC DE LA MISSION"); the sub-tasks' own folders are not in the
fixture, so the test lays out one child task whose ``completion_result`` is that report, as Roo writes it. Mined
together, the pasted report is the child's answer, never a task; the human's own short messages stay tasks.
"""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timezone
from pathlib import Path

from skillopt_sleep.harvest import harvest
from skillopt_sleep.mine import mine_tasks
from skillopt_sleep.mine.requests import COPY_MIN_WORDS, AgentTexts
from skillopt_sleep.models import Session, Turn

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts" / "cline"
ROO = "jsboige__jsboige-mcp-servers__roo-bc93a6f7__"
T0 = datetime(2026, 5, 1, 10, 0, tzinfo=timezone.utc)


def _ui() -> list[dict]:
    return json.loads((FIXTURES / (ROO + "ui_messages.json")).read_text(encoding="utf-8"))


def _storage(tmp_path: Path, *, with_child: bool) -> Path:
    tasks = tmp_path / "globalStorage" / "rooveterinaryinc.roo-cline" / "tasks"
    parent = tasks / "bc93a6f7"
    parent.mkdir(parents=True)
    for name in ("ui_messages.json", "api_conversation_history.json"):
        shutil.copyfile(FIXTURES / (ROO + name), parent / name)
    if with_child:
        ui = _ui()
        report = ui[76]["text"]
        start = ui[74]["ts"] + 1000
        child = tasks / "child-architect"
        child.mkdir()
        instruction = json.loads(ui[74]["text"])["content"]
        (child / "ui_messages.json").write_text(json.dumps([
            {"ts": start, "type": "say", "say": "text", "text": instruction},
            {"ts": start + 5000, "type": "say", "say": "completion_result", "text": report},
        ]), encoding="utf-8")
    return tmp_path / "globalStorage"


def _requests(storage: Path) -> tuple[list[str], dict[str, int]]:
    result = harvest(source="cline", scope="all", homes={"cline": storage}, lookback_hours=0)
    mined = mine_tasks(result.sessions, project=None, val_fraction=0.0, test_fraction=0.0, max_tasks=100,
                       agent_answers=result.agent_answers)
    return [task.request for task in mined.tasks], dict(mined.dropped)


def test_a_sub_task_report_pasted_into_its_parent_is_not_a_request(tmp_path):
    ui = _ui()
    report_head = ui[76]["text"][:40]
    requests, dropped = _requests(_storage(tmp_path, with_child=True))
    assert not any(request.startswith(report_head) for request in requests), requests
    assert dropped.get("pasted_agent_text") == 1
    # the human's own words around it stay requests
    assert any(request.startswith("Instruis une sous-tâche") for request in requests)
    assert any(request.startswith(ui[0]["text"][:30]) for request in requests)


def test_without_the_answer_it_copies_the_same_message_is_kept(tmp_path):
    """No answer holds the text: nothing tells a paste from a long message the user wrote, so it stays."""
    report_head = _ui()[76]["text"][:40]
    requests, dropped = _requests(_storage(tmp_path, with_child=False))
    assert any(request.startswith(report_head) for request in requests)
    assert "pasted_agent_text" not in dropped


ANSWER = ("I updated the build script so that it installs the dependencies with npm ci before it runs the test "
          "suite, then I added a cache step for the node modules folder keyed on the lock file, and I changed the "
          "release job to publish only from tags that match the version in the package manifest file.")


def test_a_quote_of_the_answer_with_the_users_own_correction_stays_the_users():
    texts = AgentTexts([(0, ANSWER)])
    assert texts.pasted(ANSWER, session=1)
    assert texts.pasted(f"> {ANSWER}\n\nok", session=1)  # a bare paste with a word or two around it
    assert not texts.pasted(f"You wrote: {ANSWER}\n\nNo, we use pnpm here, never npm ci in this repository, ever.",
                            session=1)
    assert not texts.pasted(f"> {ANSWER}\n\nno, pnpm", session=0)  # quoting its own session's answer: a reaction
    assert not AgentTexts([]).pasted(ANSWER)
    short = " ".join(ANSWER.split()[: COPY_MIN_WORDS - 1])
    assert not texts.pasted(short, session=1)  # too short to tell


def test_mining_drops_a_pasted_answer_from_another_session_and_ends_the_thread():
    earlier = Session(source="claude", session_id="a", path="a.jsonl", started_at=T0, turns=[
        Turn(index=0, request="Set up CI for the web app", final_answer=ANSWER, timestamp=T0)])
    later = Session(source="claude", session_id="b", path="b.jsonl", started_at=T0.replace(hour=11), turns=[
        Turn(index=0, request="Write a changelog entry for the parser fix", final_answer="Added.",
             timestamp=T0.replace(hour=11)),
        Turn(index=1, request=ANSWER, final_answer="Thanks for the summary.", timestamp=T0.replace(hour=11, minute=5)),
        Turn(index=2, request="no, use pnpm", final_answer="Switched to pnpm.",
             timestamp=T0.replace(hour=11, minute=6)),
    ])
    mined = mine_tasks([earlier, later], project=None, val_fraction=0.0, test_fraction=0.0)
    requests = [task.request for task in mined.tasks]
    assert ANSWER not in requests and mined.dropped.get("pasted_agent_text") == 1
    changelog = next(task for task in mined.tasks if task.request.startswith("Write a changelog"))
    assert changelog.evidence.reaction != "correction"  # the reply after the paste does not react to it
