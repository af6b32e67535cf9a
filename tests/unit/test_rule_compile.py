"""Rule compilation (skillopt_sleep/mine/compile.py, rulebook.written_line): a stated rule is written as the short
imperative its validated checks demand, with one example from an answer the user accepted, only when the rule reader
reads the line back as the same checks and it passes the screens; the user's words stay its provenance and every later
night still knows the line as the rule. Wordings are the users' corrections of benchmarks/world.py and world2.py."""

from __future__ import annotations

import pytest

from benchmarks import world
from skillopt_sleep.backends.base import CallMeter
from skillopt_sleep.backends.mock import MockBackend
from skillopt_sleep.checks import negative_word_regex
from skillopt_sleep.config import SleepConfig
from skillopt_sleep.engine.edits import apply_edits
from skillopt_sleep.engine.reflect import screen_edits
from skillopt_sleep.engine.replay import ReplayCache, Replayer
from skillopt_sleep.engine.step import StepInput, StepSettings, run_step
from skillopt_sleep.grammar.statements import checks_for_rule
from skillopt_sleep.mine.compile import compile_rule
from skillopt_sleep.mine.provenance import UserText, provenance_reason
from skillopt_sleep.mine.rulebook import (
    admissible,
    contradicted_line,
    keys_overlap,
    restated_rule_reason,
    rule_edit,
    rule_line,
    stated_rules,
    stating_line,
    user_rule_edits,
    written_line,
)
from skillopt_sleep.models import Check, EditRecord, Judge, TaskEvidence, TaskRecord


def task(number: int, phrasing: str, *, accepted: str | None = None, checks: list[Check] | None = None,
         corrected: tuple[str, ...] = ()) -> TaskRecord:
    """A train task whose user stated ``phrasing``, with the checks the rule reader gives it (or ``checks``) validated
    for it, the answers the user corrected and the answer they accepted."""
    found = checks if checks is not None else checks_for_rule(phrasing)
    return TaskRecord(id=f"t-{number}", source="claude", request=f"request {number}", rules=[phrasing],
                      judge=Judge(checks=[check.model_copy(update={"rule": phrasing}) for check in found]),
                      split="train", evidence=TaskEvidence(accepted_answer=accepted,
                                                           corrected_answers=list(corrected)))


def rule(phrasing: str, *accepted: str, checks: list[Check] | None = None):
    [stated] = stated_rules([task(number, phrasing, accepted=answer, checks=checks)
                             for number, answer in enumerate(accepted or [None])])
    return stated


# --------------------------------------------------------------------------- the compiled forms


@pytest.mark.parametrize(("phrasing", "line"), [
    ("we use pnpm in this repo, never npm", "- Use `pnpm`, never `npm`."),
    ("we use pathlib here, never os.path", "- Use `pathlib`, never `os.path`."),
    ("logger, not print", "- Use `logger`, never `print`."),
    ("we moved from black to ruff: ruff format, never black", "- Use `ruff`, never `black`."),
    ("we don't use pip in this project, add it with uv", "- Use `uv`, never `pip`."),
    ("we're a uv shop", "- Use `uv`."),
    ("dates are ISO here, YYYY-MM-DD please", "- Write every date as `YYYY-MM-DD`."),
    ("no, dates must be ISO 8601 in this repo", "- Write every date as `YYYY-MM-DD`."),
    ("wrong format, commit messages must follow conventional commits",
     "- Write every commit message as a Conventional Commit, `type(scope): subject`."),
    ("always respond in German", "- Respond in German."),
    ("keep answers under 120 words", "- Keep answers under 120 words."),
    ("keep commit titles under 72 characters", "- Keep answers under 72 characters."),
    ("always include a ## Summary section", "- Include a `## Summary` section."),
    ("answer in JSON only", "- Answer in JSON only."),
])
def test_each_kind_of_check_compiles_to_an_imperative_the_reader_reads_back_as_the_same_checks(phrasing, line):
    stated = rule(phrasing)
    assert stated.checked
    assert rule_line(compile_rule(stated, [])) == line
    assert admissible(line, stated) and written_line(stated) == line
    assert written_line(stated, wording="user") == rule_line(phrasing)


def test_a_literal_that_another_one_says_is_left_to_it():
    # world 2: "always use timezone-aware UTC: datetime.now(timezone.utc)" validates contains UTC and the call
    utc = rule("always use timezone-aware UTC: datetime.now(timezone.utc)",
               checks=[Check(op="contains", value="UTC"), Check(op="contains", value="datetime.now(timezone.utc)")])
    assert written_line(utc) == "- Use `datetime.now(timezone.utc)`."
    # world 2's rule change: "ruff format" says "ruff"; world 1: never "os" says never "os.path"
    ruff = rule("we moved from black to ruff: ruff format, never black", checks=[
        Check(op="contains", value="ruff"), Check(op="not_contains", value="black"),
        Check(op="contains", value="ruff format")])
    assert written_line(ruff) == "- Use `ruff format`, never `black`."
    pathlib = rule("we use pathlib, not os", checks=[Check(op="contains", value="pathlib"),
                                                    Check(op="not_contains", value="os.path"),
                                                    Check(op="regex", value=negative_word_regex("os"))])
    assert written_line(pathlib) == "- Use `pathlib`, never `os`."


def test_a_literal_keeps_the_case_the_user_typed_it_in():
    stated = rule("use PostgreSQL, never MySQL")
    assert compile_rule(stated, []) == "Use `PostgreSQL`, never `MySQL`."
    negative = rule("we use pnpm here, never NPM", checks=[Check(op="contains", value="pnpm"),
                                                         Check(op="regex", value=negative_word_regex("npm"))])
    assert compile_rule(negative, []) == "Use `pnpm`, never `NPM`."


@pytest.mark.parametrize("check", [Check(op="starts_with", value="Summary:"), Check(op="tool_called", value="Bash"),
                                   Check(op="regex", value=r"v\d+\.\d+"), Check(op="ends_with", value="Done.")])
def test_a_check_without_an_imperative_leaves_the_rule_in_the_users_words(check):
    stated = rule("the release notes go my way", checks=[check])
    assert compile_rule(stated, []) is None
    assert written_line(stated) == "- the release notes go my way."


def test_a_rule_known_only_by_its_words_is_never_compiled():
    stated = rule("Never commit to main.")
    assert not stated.checked and compile_rule(stated, []) is None
    assert written_line(stated) == "- Never commit to main."


# --------------------------------------------------------------------------- examples from accepted answers


def test_a_contains_example_is_the_accepted_command_trimmed_to_the_literal_and_the_next_words():
    # world 1: "use pnpm, not npm"; night 3's "add eslint as a dev dependency" -> "Run `pnpm add -D eslint`." (a
    # flag ends the example)
    stated = rule("use pnpm, not npm", "Run `pnpm add -D eslint`.")
    assert compile_rule(stated, stated.accepted_answers) == "Use `pnpm`, never `npm` (e.g. `pnpm add`)."
    # a tool input the agent ran counts as well (world 2's uv session)
    uv = rule("we're a uv shop", "Added polars.\n\n[actions]\n[Bash] uv add polars")
    assert compile_rule(uv, uv.accepted_answers) == "Use `uv add` (e.g. `uv add polars`)."  # named by its command
    # inside a code block: the line that holds it
    httpx = rule("use httpx instead of requests", "```python\nimport httpx\nresponse = httpx.get(url)\n```")
    assert compile_rule(httpx, httpx.accepted_answers) == "Use `httpx`, never `requests` (e.g. `import httpx`)."
    # code that opens with the literal but is no command: the whole line (world 2's logger; on its night-3 memory
    # Qwen2.5-Coder-1.5B followed the line with this example in 3 of 4 logging probes, 2 of 4 without it)
    logger = rule("logger, not print", "```python\nimport logging\n\nlogger = logging.getLogger(__name__)\n\n"
                                       "logger.info('start')\n```")
    assert compile_rule(logger, logger.accepted_answers) == (
        "Use `logger`, never `print` (e.g. `logger = logging.getLogger(__name__)`).")


def test_a_format_example_is_the_first_match_in_an_accepted_answer():
    dates = rule("dates are ISO here, YYYY-MM-DD please", "## 1.3.0 - 2026-11-03\n- Bug fixes and improvements.")
    assert compile_rule(dates, dates.accepted_answers) == "Write every date as `YYYY-MM-DD` (e.g. `2026-11-03`)."
    commits = rule("we use Conventional Commits here", "feat(api): add rate limiting")
    assert compile_rule(commits, commits.accepted_answers) == (
        "Write every commit message as a Conventional Commit, `type(scope): subject` "
        "(e.g. `feat(api): add rate limiting`).")


def test_no_example_comes_from_an_answer_that_fails_the_rule_or_from_none():
    # the accepted answer of the other task still says npm: it is no example of "never npm"
    stated = rule("we use pnpm in this repo, never npm", "Run `npm run dev`, or `pnpm dev`.", "Run `pnpm install`.")
    assert compile_rule(stated, stated.accepted_answers) == "Use `pnpm`, never `npm` (e.g. `pnpm install`)."
    failing = rule("we use pnpm in this repo, never npm", "Run `npm install`, then `pnpm build`.")
    assert compile_rule(failing, failing.accepted_answers) == "Use `pnpm`, never `npm`."
    # an answer that shows nothing but the literal is no example either
    bare = rule("we use pnpm in this repo, never npm", "Use `pnpm`.")
    assert compile_rule(bare, bare.accepted_answers) == "Use `pnpm`, never `npm`."


def test_the_accepted_answers_of_held_out_tasks_are_never_examples():
    val = task(1, "we use pnpm in this repo, never npm", accepted="Run `pnpm add axios`.").model_copy(
        update={"split": "val"})
    [stated] = stated_rules([task(0, "we use pnpm in this repo, never npm", accepted="Run `pnpm dev`."), val])
    assert stated.accepted_answers == ["Run `pnpm dev`."]


# --------------------------------------------------------------------------- admissibility


def test_a_literal_named_by_its_command_is_the_same_rule_and_nothing_more():
    """``Use `uv add`, never `pip``` states "has uv, not pip" (the command holds the literal and one more word); a
    longer command or another tool does not, and every comparison of what lines demand sees the command's literal."""
    uv = rule("we don't use pip in this project, add it with uv", "Run `uv add scikit-learn`.")
    assert written_line(uv) == "- Use `uv add`, never `pip` (e.g. `uv add scikit-learn`)."
    assert admissible("- Use `uv add`, never `pip`.", uv)
    assert not admissible("- Use `uv add numpy`, never `pip`.", uv)  # demands a package: more than the rule
    assert not admissible("- Use `uvx add`, never `pip`.", uv)
    assert keys_overlap({("has", "uv add")}, {("has", "uv")}) and not keys_overlap({("has", "uvx")}, {("has", "uv")})
    assert stating_line(uv, {"memory": "- Use `uv add` for packages."}) == "- Use `uv add` for packages."


def corrected_rule(phrasing: str, accepted: str, *corrected: str):
    [stated] = stated_rules([task(number, phrasing, accepted=accepted, corrected=(answer,))
                             for number, answer in enumerate(corrected)])
    return stated


def test_a_literal_to_avoid_is_named_by_the_command_every_corrected_answer_used():
    """The issue's form, ``Use `pnpm add`, never `npm install```: the answers the user corrected ran ``pip install``
    every time (world 2's uv sessions), so the line forbids that command; it reads back as the same rule. On world 2's
    uv probes with the night-3 memory, Qwen2.5-Coder-1.5B followed ``never `pip``` in 1 of 4, ``never `pip
    install``` in 2 of 4 (``benchmarks/rule_lines.py``)."""
    uv = corrected_rule("we don't use pip in this project, add it with uv", "Run `uv add scikit-learn`.",
                        "Run `pip install numpy`.", "```sh\npip install jinja2\n```")
    line = written_line(uv)
    assert line == "- Use `uv add`, never `pip install` (e.g. `uv add scikit-learn`)."
    assert admissible(line, uv)
    assert keys_overlap({("not", "pip install")}, {("not", "pip")})
    assert not keys_overlap({("not", "pipx install")}, {("not", "pip")})
    assert not admissible("- Use `uv add`, never `pip install numpy`.", uv)  # a package: more than the rule


def test_a_claude_code_bash_input_is_read_as_its_command():
    """Claude Code's Bash tool input is JSON (``{"command": ..., "description": ...}``), as world 2's refused tool
    calls are harvested: its command is the code, for the example and for the forbidden command alike."""
    bash = '[actions]\n[Bash] {{"command":"{command}","description":"run it"}}'
    uv = corrected_rule("we don't use pip in this project, add it with uv", bash.format(command="uv add polars"),
                        bash.format(command="pip install pyarrow"), bash.format(command="pip install numpy"))
    assert written_line(uv) == "- Use `uv add`, never `pip install` (e.g. `uv add polars`)."


def test_a_forbidden_command_the_screens_refuse_is_dropped_before_the_users_words_are_written():
    uv = corrected_rule("we don't use pip in this project, add it with uv", "Run `uv add scikit-learn`.",
                        "Run `pip install numpy`.")

    def refuses_install(line: str) -> str | None:
        return "no_user_provenance: `install`" if "pip install" in line else None

    assert written_line(uv, screen=refuses_install) == "- Use `uv add`, never `pip` (e.g. `uv add scikit-learn`)."


@pytest.mark.parametrize(("phrasing", "accepted", "corrected", "banned"), [
    ("podman, not docker", "Run `podman ps`.", ("Run `docker build -t api .`", "Then `docker ps` shows it."),
     "docker"),  # two different commands: the literal alone
    ("we don't use pip in this project, add it with uv", "Run `uv add numpy`.",
     ("Run `pip install numpy`.", "```sh\npip\n```"), "pip"),  # once bare
    ("use httpx, not requests", "```python\nimport httpx\n```", ("```python\nimport requests\n```",),
     "requests"),  # never as a command
    ("we use pnpm in this repo, never npm", "Run `pnpm dev`.", ("Run `npm run dev`.",),
     "npm"),  # one corrected answer: an anecdote, not the form of the rule
])
def test_a_literal_to_avoid_used_as_different_commands_or_never_as_one_is_named_alone(phrasing, accepted, corrected,
                                                                                     banned):
    stated = corrected_rule(phrasing, accepted, *corrected)
    assert ("not", banned) in stated.key_set
    line = written_line(stated)
    assert f"never `{banned}`" in line and admissible(line, stated), line


def test_a_line_whose_re_read_loses_a_key_is_not_written():
    # "Use `uv` (e.g. ...)" reads as no check at all: the example is dropped, the line without it reads as "has uv"
    uv = rule("we're a uv shop", "Added polars.\n\n[actions]\n[Bash] uv add polars")
    assert not admissible(rule_line(compile_rule(uv, uv.accepted_answers)), uv)
    assert written_line(uv) == "- Use `uv`."
    # two tools to use: "Use `ruff` and `mypy`, never `flake8`." reads as has ruff only: the user's words are written
    both = rule("we lint with ruff and mypy, not flake8", checks=[
        Check(op="contains", value="ruff"), Check(op="contains", value="mypy"),
        Check(op="not_contains", value="flake8")])
    assert compile_rule(both, []) == "Use `ruff` and `mypy`, never `flake8`."
    assert not admissible("- Use `ruff` and `mypy`, never `flake8`.", both)
    assert written_line(both) == "- we lint with ruff and mypy, not flake8."


def test_a_line_that_demands_more_than_the_rule_is_not_admissible():
    stated = rule("we use pnpm in this repo, never npm")
    assert not admissible("- Use `pnpm`, never `npm`, and write every date as `YYYY-MM-DD`.", stated)


# --------------------------------------------------------------------------- the screens


def world_user_text(*more: str) -> UserText:
    """What the world-1 user typed on night 1 (requests and corrections), and ``more``: the provenance of a line."""
    return UserText.of([text for conversation in world.NIGHTS[0]
                        for text in (conversation.request, conversation.correction)] + list(more))


def test_a_compiled_line_passes_the_screens_every_edit_passes_as_it_is():
    user_text = world_user_text("always include a ## Summary section")
    for line in ("- Use `pnpm`, never `npm` (e.g. `pnpm add`).",
                 "- Write every date as `YYYY-MM-DD` (e.g. `2026-11-03`).",
                 "- Use `pathlib`, never `os.path`.", "- Include a `## Summary` section."):
        [kept], rejected = screen_edits([EditRecord(target="memory", op="append", content=line)], [], edit_budget=1,
                                        evolve_skill=True, evolve_memory=True,
                                        screen=lambda content: provenance_reason(content, user_text))
        assert not rejected and kept.content == line


def test_an_example_the_provenance_screen_blocks_is_dropped_and_the_line_written_without_it():
    user_text = world_user_text()

    def screen(line: str) -> str | None:
        return provenance_reason(line, user_text)

    # world 1: the accepted commit message names `feat`, which the user never typed
    commits = rule("we use Conventional Commits here", "feat(api): add rate limiting")
    with_example = rule_line(compile_rule(commits, commits.accepted_answers))
    assert screen(with_example).startswith("no_user_provenance")
    assert written_line(commits, screen=screen) == (
        "- Write every commit message as a Conventional Commit, `type(scope): subject`.")
    # the pnpm command and the date pass: the user typed pnpm, and a date names nothing
    pnpm = rule("we use pnpm in this repo, never npm", "Run `pnpm add axios`.")
    assert written_line(pnpm, screen=screen) == "- Use `pnpm add`, never `npm` (e.g. `pnpm add axios`)."
    dates = rule("dates are ISO here, YYYY-MM-DD please", "## 1.3.0 - 2026-11-03")
    assert written_line(dates, screen=screen) == "- Write every date as `YYYY-MM-DD` (e.g. `2026-11-03`)."
    # an example the screens would rewrite (cleaning drops a "(... from ...)" annotation) is dropped as well
    pathlib = rule("we use pathlib here, never os.path", "```python\nfrom pathlib import Path\n```")

    def screens(line: str) -> str | None:
        kept, rejected = screen_edits([EditRecord(target="memory", op="append", content=line)], [], edit_budget=1,
                                      evolve_skill=True, evolve_memory=True, screen=screen)
        return rejected[0].reason if rejected else (None if kept[0].content == line else "rewritten")

    assert compile_rule(pathlib, pathlib.accepted_answers).endswith("(e.g. `from pathlib import Path`).")
    assert written_line(pathlib, screen=screens) == "- Use `pathlib`, never `os.path`."


def test_the_step_writes_the_compiled_line_and_drops_an_example_no_user_typed():
    # the user typed "pnpm" but never "zod": the accepted `pnpm add zod` would name a package from the agent's words
    train = [task(0, "we use pnpm in this repo, never npm", accepted="Run `pnpm add zod`.").model_copy(
                 update={"request": "add the validation library"}),
             task(1, "dates are ISO here, YYYY-MM-DD please", accepted="Released on 2026-10-30.")]
    settings = StepSettings(edit_budget=2, gate_mode="off", propose_user_rules=True, gate_samples=1)
    meter = CallMeter(MockBackend())
    result = run_step(StepInput(train=train, documents={"memory": "# Notes\n"}), settings=settings,
                      replayer=Replayer(meter, workers=1, cache=ReplayCache(), seed=0))
    assert [edit.content for edit in result.selected] == [
        "- Write every date as `YYYY-MM-DD` (e.g. `2026-10-30`).", "- Use `pnpm`, never `npm`."]
    words = run_step(StepInput(train=train, documents={"memory": "# Notes\n"}),
                     settings=settings.model_copy(update={"rule_wording": "user"}),
                     replayer=Replayer(CallMeter(MockBackend()), workers=1, cache=ReplayCache(), seed=0))
    assert [edit.content for edit in words.selected] == [
        "- dates are ISO here, YYYY-MM-DD please.", "- we use pnpm in this repo, never npm."]


def test_when_the_screens_refuse_every_compiled_line_the_users_words_are_written():
    stated = rule("we use pnpm in this repo, never npm")
    assert written_line(stated, screen=lambda line: "refused" if "`" in line else None) == (
        "- we use pnpm in this repo, never npm.")


# --------------------------------------------------------------------------- provenance and later nights


def test_the_edit_keeps_the_users_words_as_its_rationale():
    tasks = [task(0, "we use pnpm in this repo, never npm", accepted="Run `pnpm install`."),
             task(1, "we use pnpm in this repo, never npm"), task(2, "use pnpm, not npm")]
    [edit] = user_rule_edits(stated_rules(tasks), {"memory": "# Notes\n"}, target="memory")
    assert edit.content == "- Use `pnpm`, never `npm` (e.g. `pnpm install`)."
    assert edit.rationale == 'stated by the user 3 time(s); you said: "we use pnpm in this repo, never npm"'
    assert edit.evidence == ["t-0", "t-1", "t-2"]


def test_a_second_night_knows_the_compiled_line_as_the_rule_and_does_not_propose_it_again():
    first = stated_rules([task(0, "we use pnpm in this repo, never npm", accepted="Run `pnpm add axios`.")])
    [edit] = user_rule_edits(first, {"memory": "# Notes\n"}, target="memory")
    memory, [applied] = apply_edits("# Notes\n", [edit], "memory")
    assert applied.status == "applied" and "- Use `pnpm add`, never `npm` (e.g. `pnpm add axios`)." in memory
    # night 2: the same rule in other words
    second = stated_rules([task(5, "we use pnpm in this project, not npm", accepted="Run `pnpm dev`.")])
    assert stating_line(second[0], {"memory": memory}) == "- Use `pnpm add`, never `npm` (e.g. `pnpm add axios`)."
    assert user_rule_edits(second, {"memory": memory}, target="memory") == []
    assert "already stated in the documents" in restated_rule_reason("- Always use pnpm.", [],
                                                                     {"memory": memory})
    # the archive links tonight's rule to its edit whatever its wording (rule_history.record_night)
    assert rule_edit(first[0], [EditRecord(target="memory", op="append", content="- Keep answers short."),
                                applied]) is applied


def test_a_rule_change_replaces_the_compiled_line_of_the_rule_it_contradicts():
    old = stated_rules([task(0, "we always use yarn here, never npm", accepted="Run `yarn add lodash`.")])
    memory, _ = apply_edits("# Notes\n", user_rule_edits(old, {"memory": "# Notes\n"}, target="memory"), "memory")
    assert "- Use `yarn add`, never `npm` (e.g. `yarn add lodash`)." in memory
    new = stated_rules([task(1, "we moved from yarn to pnpm", accepted="Run `pnpm add lodash`.")])
    assert contradicted_line(new[0], memory) == "- Use `yarn add`, never `npm` (e.g. `yarn add lodash`)."
    [edit] = user_rule_edits(new, {"memory": memory}, target="memory")
    assert (edit.op, edit.anchor, edit.content) == (
        "replace", "- Use `yarn add`, never `npm` (e.g. `yarn add lodash`).",
        "- Use `pnpm add`, never `yarn` (e.g. `pnpm add lodash`).")
    assert edit.rationale.endswith('you said: "we moved from yarn to pnpm"; replaces the rule it contradicts')
    replaced, [applied] = apply_edits(memory, [edit], "memory")
    assert applied.status == "applied" and "`yarn add lodash`" not in replaced


# --------------------------------------------------------------------------- the config key


def test_rule_wording_is_a_config_key_passed_down_to_the_step():
    assert SleepConfig().rule_wording == "compiled"
    assert StepSettings.from_config(SleepConfig(rule_wording="user"), edit_budget=1).rule_wording == "user"
    with pytest.raises(ValueError, match="rule_wording"):
        SleepConfig(rule_wording="shouted")
    stated = stated_rules([task(0, "we use pnpm in this repo, never npm", accepted="Run `pnpm dev`.")])
    compiled = user_rule_edits(stated, {"memory": ""}, target="memory", wording="compiled")
    user = user_rule_edits(stated, {"memory": ""}, target="memory", wording="user")
    assert [edit.content for edit in compiled] == ["- Use `pnpm`, never `npm` (e.g. `pnpm dev`)."]
    assert [edit.content for edit in user] == ["- we use pnpm in this repo, never npm."]
