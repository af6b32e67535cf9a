"""Wording chosen by evidence (skillopt_sleep/engine/wording.py): each stated rule the step writes is worded the way
its own train tasks are passed most, within a budget of calls spent on the most-stated rules first; an adopted rule
still corrected is re-worded when another wording passes more of its tasks.

The target here is scripted: it answers with the form a rule demands only when one of the lines it ``follows`` stands
in its system prompt, else with the forbidden form; so exactly the wordings it follows pass the rule's checks.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from transcripts import PNPM_CONVERSATIONS, write_claude_sessions

from skillopt_sleep.backends.base import Budget, CallMeter, ChatRequest
from skillopt_sleep.backends.mock import MockBackend
from skillopt_sleep.config import SleepConfig
from skillopt_sleep.documents.block import BLOCK_BEGIN, BLOCK_END
from skillopt_sleep.engine.replay import ReplayCache, Replayer, replay_tasks
from skillopt_sleep.engine.rewrite import make_rewriter
from skillopt_sleep.engine.step import StepInput, StepSettings, run_step
from skillopt_sleep.engine.wording import choose_wordings, wordings
from skillopt_sleep.errors import BackendError
from skillopt_sleep.grammar.statements import checks_for_rule
from skillopt_sleep.mine.rulebook import admissible, stated_rules, user_rule_edits, written_line
from skillopt_sleep.models import Judge, TaskEvidence, TaskRecord
from skillopt_sleep.night import run_night

PNPM = "we use pnpm in this repo, never npm"
LOGGER = "logger, not print"
#: The candidate lines of PNPM (its accepted answers show `pnpm add axios`).
COMPILED = "- Use `pnpm add`, never `npm` (e.g. `pnpm add axios`)."
PLAIN = "- Use `pnpm`, never `npm`."
WORDS = "- we use pnpm in this repo, never npm."
JOINED = "- Use `pnpm`, never `npm`: we use pnpm in this repo, never npm."
ANSWERS = {PNPM: ("Run `pnpm add axios`.", "Run `npm install axios`."),
           LOGGER: ("Call `logger.info(x)`.", "Call `print(x)`.")}


class Follows(MockBackend):
    """A target that gives a rule's good answer only when a line it follows is in its system prompt."""

    def __init__(self, *lines: str, only: str = ""):
        super().__init__()
        self.follows, self.only = lines, only  # only: follows them only in requests holding this text

    def _target(self, request: ChatRequest) -> str:
        system = request.messages[0].content
        request_text = request.messages[-1].content
        phrasing = PNPM if "pnpm" in request_text else LOGGER
        good, bad = ANSWERS[phrasing]
        followed = any(line in system for line in self.follows) and self.only in request_text
        return good if followed else bad


def task(number: int, phrasing: str = PNPM, *, split: str = "train") -> TaskRecord:
    checks = [check.model_copy(update={"rule": phrasing}) for check in checks_for_rule(phrasing)]
    topic = "pnpm" if phrasing == PNPM else "logging"
    return TaskRecord(id=f"t-{topic}-{number}", source="claude", request=f"{topic}: set up part {number}",
                      rules=[phrasing], judge=Judge(checks=checks), split=split,
                      evidence=TaskEvidence(accepted_answer=ANSWERS[phrasing][0]))


def memory(*lines: str) -> dict[str, str]:
    block = "\n".join(["## Learned rules", "", *lines, ""]) if lines else ""
    return {"memory": f"# Notes\n\n{BLOCK_BEGIN}\n{block}\n{BLOCK_END}\n"}


def choose(train, backend, *, budget=12, documents=None, cache=None, rules=None, rewriter=None):
    documents = documents or memory()
    stated = rules if rules is not None else stated_rules(train)
    edits = user_rule_edits(stated, documents, target="memory")
    replayer = Replayer(CallMeter(backend), workers=1, cache=cache if cache is not None else ReplayCache())
    results = replay_tasks(train, replayer, **{"skill": "", "memory": documents["memory"]})
    before = backend.calls
    out, report = choose_wordings(stated, edits, train=train, train_results=results, documents=documents,
                                  replayer=replayer, budget=budget,
                                  rewriter=rewriter(replayer.meter) if callable(rewriter) else None)
    return out, report, backend.calls - before


def test_the_candidates_are_the_compiled_line_with_and_without_example_the_words_and_both():
    [rule] = stated_rules([task(0)])
    candidates = wordings(rule)
    assert [(c.label, c.line) for c in candidates] == [("compiled", COMPILED), ("compiled_plain", PLAIN),
                                                       ("user", WORDS), ("user+compiled", JOINED)]
    assert all(admissible(c.line, rule) for c in candidates if c.label != "user")
    # a screen that refuses the example: the compiled candidate is the line the step writes, without it
    refuse_example = lambda line: "no" if "e.g." in line else None  # noqa: E731
    assert [(c.label, c.line) for c in wordings(rule, screen=refuse_example)] == [
        ("compiled", PLAIN), ("user", WORDS), ("user+compiled", JOINED)]
    assert written_line(rule, screen=refuse_example) == PLAIN
    # a screen that refuses every compiled line leaves the user's words only
    refuse_compiled = lambda line: "no" if "`" in line else None  # noqa: E731
    assert [c.label for c in wordings(rule, screen=refuse_compiled)] == ["user"]
    assert written_line(rule, screen=refuse_compiled) == WORDS


@pytest.mark.parametrize("followed", [WORDS, JOINED, COMPILED])
def test_the_wording_the_target_follows_is_the_one_written(followed):
    train = [task(n) for n in range(3)]
    edits, report, calls = choose(train, Follows(followed))
    assert [edit.content for edit in edits] == [followed]
    assert "wording chosen by replay on its own tasks" in edits[0].rationale
    assert f'you said: "{PNPM}"' in edits[0].rationale  # the user's words stay its provenance
    [choice] = report.rules
    assert choice.line == followed and choice.kind == "new"
    # replayed shortest first, until one passes every own task: the longer ones are not replayed (0 tasks)
    shortest_first = [PLAIN, WORDS, COMPILED, JOINED]
    replayed = shortest_first[: shortest_first.index(followed) + 1]
    assert {c.line: (c.passes, c.tasks) for c in choice.candidates} == {
        line: ((3 if line == followed else 0), 3 if line in replayed else 0) for line in shortest_first}
    assert calls == choice.calls == report.calls == 3 * len(replayed)  # 3 own tasks per wording replayed


def test_a_tie_goes_to_the_shortest_line():
    train = [task(n) for n in range(2)]
    edits, report, _ = choose(train, Follows(COMPILED, JOINED))
    assert [edit.content for edit in edits] == [COMPILED]  # both pass 2/2; COMPILED is shorter than JOINED
    edits, report, _ = choose(train, Follows(JOINED, COMPILED, only="part 0"))  # every wording replayed
    assert {c.line: c.passes for c in report.rules[0].candidates} == {PLAIN: 0, WORDS: 0, COMPILED: 1, JOINED: 1}
    assert [edit.content for edit in edits] == [COMPILED]  # both pass 1/2: the shorter
    edits, _, _ = choose(train, Follows("pnpm"))  # every wording passes
    assert [edit.content for edit in edits] == [PLAIN]


def test_no_wording_passing_keeps_the_compiled_line():
    edits, report, calls = choose([task(0)], Follows("no such line"))
    assert [edit.content for edit in edits] == [COMPILED] and calls == 4  # every wording replayed
    assert report.rules[0].outcome == "kept: no wording passed an own task"


def test_the_budget_caps_the_calls_and_goes_to_the_most_stated_rule_first():
    train = [task(0, LOGGER), *(task(n) for n in range(3))]
    stated = stated_rules(train)
    assert [rule.text for rule in stated] == [PNPM, LOGGER] and stated[0].stated_total == 3
    # the least-stated rule listed first: the budget still goes to the most stated one
    edits, report, calls = choose(train, Follows(JOINED), budget=10, rules=stated[::-1])
    assert calls == report.calls == 8 <= 10  # 4 wordings x 2 of its 3 tasks fit (3 tasks would be 12)
    assert [choice.rule for choice in report.rules] == [PNPM, LOGGER]
    assert report.rules[0].task_ids == ["t-pnpm-0", "t-pnpm-1"] and report.rules[0].line == JOINED
    assert report.rules[1].outcome.startswith("kept: no budget left") and report.rules[1].calls == 0
    # the rules' order kept
    assert [edit.content for edit in edits] == ["- Use `logger`, never `print` (e.g. `logger.info(x)`).", JOINED]


def test_a_budget_of_zero_replays_nothing_and_keeps_the_compiled_line():
    train = [task(n) for n in range(3)]
    edits, report, calls = choose(train, Follows(WORDS), budget=0)
    assert calls == 0 and report.rules == [] and [edit.content for edit in edits] == [COMPILED]


def test_cached_replays_are_not_called_again():
    train = [task(n) for n in range(2)]
    cache = ReplayCache()
    first, _, calls = choose(train, Follows(JOINED), cache=cache)
    assert calls == 8
    again, report, calls = choose(train, Follows(JOINED), cache=cache)
    assert calls == 0 and report.calls == 0 and again == first


def test_an_adopted_rule_still_corrected_is_reworded_when_another_wording_passes_more():
    train = [task(n) for n in range(2)]
    documents = memory(WORDS)
    edits, report, calls = choose(train, Follows(PLAIN), documents=documents)
    [reword] = edits
    assert (reword.op, reword.anchor, reword.content, reword.target) == ("replace", WORDS, PLAIN, "memory")
    assert "still corrected" in reword.rationale and reword.evidence == ["t-pnpm-0", "t-pnpm-1"]
    [choice] = report.rules
    assert choice.kind == "reword" and choice.candidates[0].label == "current"
    assert calls == 2  # the current line's replays are the rollouts' (cached); then PLAIN, the shortest, passes


def test_an_adopted_rule_is_not_reworded_when_it_is_followed_or_nothing_does_better():
    train = [task(n) for n in range(2)]
    edits, report, calls = choose(train, Follows(WORDS), documents=memory(WORDS))
    assert edits == [] and report.rules == [] and calls == 0  # its tasks pass: not corrected tonight
    edits, report, _ = choose(train, Follows("no such line"), documents=memory(WORDS))
    assert edits == [] and report.rules[0].outcome == "kept: no wording passed an own task"


# --------------------------------------------------------------------------- the optimizer's rewrite

SITUATION = "- When you add a package, use `pnpm`, never `npm`."


class Rewrites:
    """A stand-in rewriter that answers ``line`` and records what it was shown (``rewriter(meter)`` builds it)."""

    def __init__(self, line: str | None):
        self.line, self.asked = line, []

    def __call__(self, meter):
        def rewriter(rule, tried, tasks):
            self.asked.append((rule.text, [(c.line, c.passes, c.tasks) for c in tried], [t.id for t in tasks]))
            return self.line
        return rewriter


def test_a_rewrite_is_asked_once_when_no_wording_passes_and_written_when_it_passes_more():
    rewrites = Rewrites(SITUATION[2:])
    edits, report, calls = choose([task(0)], Follows(SITUATION), rewriter=rewrites)
    assert [edit.content for edit in edits] == [SITUATION]
    [choice] = report.rules
    assert choice.outcome == "chose rewrite" and choice.rewrite == "replayed: 1/1"
    assert calls == 5 == choice.calls  # the 4 wordings, then the rewrite's one replay
    [(rule, tried, tasks)] = rewrites.asked
    assert rule == PNPM and tasks == ["t-pnpm-0"]
    assert tried[0] == (COMPILED, 0, 1) and len(tried) == 4  # the compiled line first, every line with its score


@pytest.mark.parametrize("line, why", [
    ("Use `yarn`, never `npm`.", "does not read back as the rule's checks"),  # changed what it demands
    ("Use `pnpm`, never `npm`.", "was tried already"),
    (None, "the reply held no line"),
])
def test_a_rewrite_that_is_not_the_rule_or_is_no_new_line_is_refused_without_a_replay(line, why):
    edits, report, calls = choose([task(0)], Follows("no such line"), rewriter=Rewrites(line))
    assert calls == 4 and why in report.rules[0].rewrite
    assert all(candidate.label != "rewrite" for candidate in report.rules[0].candidates)


def test_a_rewrite_that_passes_no_more_than_the_others_is_not_written():
    edits, report, _ = choose([task(0), task(1)], Follows(JOINED, SITUATION, only="part 0"),
                              rewriter=Rewrites(SITUATION[2:]))
    [choice] = report.rules
    assert choice.rewrite == "replayed: 1/2" and [edit.content for edit in edits] == [JOINED]  # 1/2 each: no gain


def test_no_rewrite_is_asked_when_a_wording_passes_every_task_or_no_budget_is_left():
    rewrites = Rewrites(SITUATION[2:])
    edits, report, calls = choose([task(0)], Follows(COMPILED), rewriter=rewrites)
    assert rewrites.asked == [] and report.rules[0].rewrite == "" and [e.content for e in edits] == [COMPILED]
    edits, report, calls = choose([task(0)], Follows(SITUATION), budget=4, rewriter=rewrites)
    assert rewrites.asked == [] and report.rules[0].rewrite == "not asked: no budget left" and calls == 4


def test_the_optimizers_rewrite_is_one_metered_call_whose_prompt_quotes_the_requests_as_data():
    backend = Follows("Always use `pnpm add`, never `npm` (e.g. `pnpm add axios`).")
    edits, report, calls = choose([task(0)], backend, rewriter=make_rewriter)
    [request] = [r for r in backend.requests if r.role == "optimizer"]
    assert MockBackend.prompt_kind(request) == "rewrite" and request.purpose == "rewrite"
    prompt = request.messages[0].content
    assert "<data>pnpm: set up part 0</data>" in prompt and f"- {PNPM}" in prompt
    assert f"- {COMPILED[2:]} (right on 0 of 1)" in prompt
    assert calls == 6 == report.calls  # 4 wordings, the rewrite call, its replay: all within the budget
    assert [edit.content for edit in edits] == ["- Always use `pnpm add`, never `npm` (e.g. `pnpm add axios`)."]


def run(train, backend, documents=None, **overrides):
    settings = StepSettings(**{"edit_budget": 3, "gate_samples": 1, "gate_mode": "off", "wording_max_calls": 12,
                               **overrides})
    replayer = Replayer(CallMeter(backend), workers=1, cache=ReplayCache())
    return run_step(StepInput(train=train, documents=documents or memory()), settings=settings, replayer=replayer)


def test_the_step_rewords_an_adopted_rule_its_tasks_still_fail():
    result = run([task(n) for n in range(2)], Follows(PLAIN), documents=memory(WORDS))
    [reword] = [edit for edit in result.edits if edit.op == "replace"]
    assert (reword.anchor, reword.content, reword.status) == (WORDS, PLAIN, "applied")
    assert PLAIN in result.candidate["memory"] and WORDS not in result.candidate["memory"]
    assert result.wording["rules"][0]["kind"] == "reword"


def test_the_step_writes_the_chosen_wording_and_records_the_choice():
    result = run([task(n) for n in range(2)], Follows(WORDS))
    rule_edits = [edit for edit in result.edits if edit.rationale.startswith("stated by the user")]
    assert [(edit.content, edit.status) for edit in rule_edits] == [(WORDS, "applied")]
    # no user typed `axios`: the provenance screen refuses the example, so the compiled candidate is the line without
    # it, as the step writes it; PLAIN fails, WORDS passes
    assert result.wording["budget"] == 12 and result.wording["calls"] == 4
    [choice] = result.wording["rules"]
    assert choice["line"] == WORDS and choice["outcome"] == "chose user"
    assert [(c["label"], c["line"]) for c in choice["candidates"]] == [
        ("compiled", PLAIN), ("user", WORDS), ("user+compiled", JOINED)]
    assert result.calls_by_stage["aggregate"] == 4  # the wording replays count in the aggregate stage


@pytest.mark.parametrize("overrides", [{"wording_max_calls": 0}, {"rule_wording": "user"}])
def test_the_choice_is_off_with_no_calls_or_with_the_users_words(overrides):
    result = run([task(n) for n in range(2)], Follows(WORDS), **overrides)
    assert result.wording == {} and result.calls_by_stage["aggregate"] == 0
    expected = WORDS if overrides.get("rule_wording") == "user" else PLAIN  # the example is screened (no `axios`)
    assert expected in [edit.content for edit in result.edits]


def test_the_meter_budget_leaves_room_for_the_gate():
    backend = Follows(JOINED)
    replayer = Replayer(CallMeter(backend, Budget(max_calls=14)), workers=1, cache=ReplayCache())
    val = [task(9, split="val")]
    result = run_step(StepInput(train=[task(0), task(1)], val=val, documents=memory()),
                      settings=StepSettings(edit_budget=3, gate_samples=1, wording_max_calls=12), replayer=replayer)
    # 14 calls: 2 rollouts, 1 reflect; 2 kept for the gate's first val replays: 9 left, 6 for 3 wordings x 2 tasks
    # (the longest, JOINED, passes)
    assert result.wording["budget"] == 9 and result.wording["calls"] == 6


def pnpm_night(tmp_path: Path):
    """One night (the mock simulator) on sessions where the user corrects npm to pnpm; its diagnostics."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "CLAUDE.md").write_text("# Web app\n\nHand-written notes.\n", encoding="utf-8")
    write_claude_sessions(tmp_path / "claude", project, PNPM_CONVERSATIONS, fixed_answer="Sorry, I will use pnpm.")
    config = SleepConfig(backend="mock", lookback_hours=0, claude_home=tmp_path / "claude", wording_max_calls=12)
    return run_night(config, project=project, state_root=tmp_path / "state").diagnostics


def test_a_night_records_the_wording_in_its_diagnostics(tmp_path: Path):
    diagnostics = pnpm_night(tmp_path)
    wording = diagnostics.mining["wording"]
    [choice] = wording["rules"]
    assert choice["rule"] == PNPM and choice["calls"] == wording["calls"] <= wording["budget"] == 12
    assert choice["line"] in [edit.content for edit in diagnostics.edits if edit.status == "applied"]


def test_a_rewrite_that_copies_the_listings_score_is_read_without_it():
    """Qwen2.5-Coder-1.5B on world 2 answered "Use the logging module for this, never print. (right on 0 of 1).":
    the score is the prompt's, not the line's."""
    reply = '{"line": "Use `pnpm` for packages, never `npm`. (right on 0 of 1)."}'
    backend = MockBackend(scripted={"rewrite": [reply]})
    rewriter = make_rewriter(CallMeter(backend))
    assert rewriter(stated_rules([task(0)])[0], [], [task(0)]) == "Use `pnpm` for packages, never `npm`."


def test_a_nights_calls_by_stage_add_up_to_its_calls(tmp_path: Path):
    """``diagnostics.stage_calls``: where a night's calls went (the wording choice in ``aggregate``), each call once."""
    diagnostics = pnpm_night(tmp_path)
    calls = sum(cost.calls for cost in diagnostics.cost.values())
    assert calls > 0 and sum(diagnostics.stage_calls.values()) == calls
    assert diagnostics.stage_calls["aggregate"] >= diagnostics.mining["wording"]["calls"] > 0
    assert diagnostics.stage_calls["rollout"] > 0


def test_rewrites_come_after_every_rules_own_lines_so_they_never_starve_a_less_stated_rule():
    """World 1 on Qwen at ``d489ba5``: the date rule's lines, then its rewrite, spent 11 of the 12 calls and the
    three other rules were left "no budget left". Now every rule's own lines are replayed first."""
    train = [task(0, LOGGER), task(0), task(1), task(2)]
    stated = stated_rules(train)
    assert [rule.text for rule in stated] == [PNPM, LOGGER]
    pnpm_lines, logger_lines = (len(wordings(rule)) for rule in stated)
    rewrites = Rewrites("Always use `pnpm`, never `npm`.")
    budget = 3 * pnpm_lines + logger_lines  # pnpm's 3 tasks and logger's 1 in every line; nothing left to rewrite
    _, report, calls = choose(train, Follows("no such line"), budget=budget + 1, rules=stated, rewriter=rewrites)
    assert [choice.rule for choice in report.rules] == [PNPM, LOGGER]
    assert report.rules[1].calls == logger_lines and report.rules[1].outcome == "kept: no wording passed an own task"
    assert rewrites.asked == [] and report.rules[0].rewrite == "not asked: no budget left"
    assert calls == report.calls == budget


def test_a_failed_rewrite_call_is_no_line_and_a_fatal_one_stops_the_night():
    """A transient failure (after the backend's own retries) leaves the lines already replayed; a fatal one is the
    night's backend error, as for every other call."""
    rule = stated_rules([task(0)])[0]
    transient = make_rewriter(CallMeter(MockBackend(fail_with="503 from the server", fail_kind="transient")))
    assert transient(rule, [], [task(0)]) is None
    fatal = make_rewriter(CallMeter(MockBackend(fail_with="invalid API key", fail_kind="fatal")))
    with pytest.raises(BackendError):
        fatal(rule, [], [task(0)])
