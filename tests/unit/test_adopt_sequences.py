"""Property: any sequence of nights staging proposals, adopts (all, or one by name), reverts, forgets and the user's
own edits outside the managed block keeps the live file, the adoption records, the rules ledger and ``status``
consistent, and never loses a line the user wrote.

Nights are staged with the real staging code (``documents.targets.stage_proposal``) from the live file, as ``night.py``
does; each adds one rule line from a small pool (so two nights often stage the same line) or replaces the first
rule line with one (so adoptions conflict). A model keeps the rule lines the block must hold: an adoption adds its
night's change, a revert restores the lines the adoption found, a forget removes one. Budget: three explicit
sequences (two nights staging one line, a conflict, a forget reverted) and 50 derandomized examples of at most 12
steps (the same ones on every run, no example database), about ten seconds.
"""

from __future__ import annotations

import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from skillopt_sleep.documents.block import BLOCK_BEGIN, BLOCK_END, block_rule_lines
from skillopt_sleep.documents.targets import load_documents, stage_proposal
from skillopt_sleep.errors import AdoptError, NothingToAdopt
from skillopt_sleep.fsio import write_json_atomic, write_text_atomic
from skillopt_sleep.models import Diagnostics
from skillopt_sleep.review.adopt import adopt_all, adopt_night, adoptable, load_adoptions, revert_adoption
from skillopt_sleep.review.rule_ledger import forget_rule, list_rules, load_forgotten
from skillopt_sleep.schedule.status import pending_proposals
from skillopt_sleep.state import ProjectPaths

RULES = ["- Use pnpm, never npm.", "- Run the linter before committing.", "- Keep commits small.",
         "- Write tests first."]
START = f"# Project\n\nMy own notes.\n\n{BLOCK_BEGIN}\n- Answer briefly.\n\n{BLOCK_END}\n"

NIGHT = st.tuples(st.just("night"), st.sampled_from(["add", "replace"]), st.integers(0, len(RULES) - 1))
STEPS = st.lists(st.one_of(
    NIGHT, NIGHT,  # twice as likely: nights that stage the same line before either is adopted
    st.tuples(st.just("adopt_all")),
    st.tuples(st.just("adopt"), st.integers(0, 5)),
    st.tuples(st.just("revert")),
    st.tuples(st.just("forget"), st.integers(0, 5)),
    st.tuples(st.just("user_edit"), st.sampled_from(["top", "end"])),
), max_size=12)


def block_lines(text: str) -> list[str]:
    return [line for _, line in block_rule_lines(text)]


class World:
    """A project, its state dir, and the model of what its managed block must hold."""

    def __init__(self, root: Path) -> None:
        self.project = root / "project"
        self.project.mkdir()
        self.file = self.project / "CLAUDE.md"
        self.file.write_text(START, encoding="utf-8")
        self.paths = ProjectPaths(self.project, state_root=root / "state")
        self.user_lines = ["# Project", "My own notes."]
        self.rules = ["- Answer briefly."]  # the model: the block's rule lines, in any order
        self.staged: dict[str, tuple[list[str], list[str]]] = {}  # night id -> (its base, its proposal) rule lines
        self.found: dict[str, list[str]] = {}  # adopted night id -> the model's rules before it
        self.clock = datetime(2026, 1, 1, tzinfo=timezone.utc)
        self.count = 0

    def live(self) -> str:
        return self.file.read_text(encoding="utf-8")

    def night(self, how: str, rule: str) -> None:
        text = self.live()
        lines = text.splitlines(keepends=True)
        rules_at = [number - 1 for number, _ in block_rule_lines(text)]
        if how == "add":
            if rule in block_lines(text):
                return  # nothing to learn: the night stages nothing
            end = next(i for i, line in enumerate(lines) if line.strip() == BLOCK_END)
            lines.insert(end - 1 if lines[end - 1].strip() == "" else end, rule + "\n")
        else:
            if not rules_at or rule in block_lines(text):
                return
            lines[rules_at[0]] = rule + "\n"
        proposal = "".join(lines)
        self.count += 1
        night_id = f"2025-01-01T0000{self.count:02d}Z"
        documents = load_documents(self.project, ["claude"], skill_path=None, memory_path=None, evolve_skill=False,
                                   evolve_memory=True)
        night_dir = self.paths.nights / night_id
        night_dir.mkdir(parents=True)
        stage_proposal(night_dir, documents, {"memory": proposal})
        write_json_atomic(night_dir / "diagnostics.json", Diagnostics(
            night_id=night_id, status="accepted", summary="", project=str(self.project),
            started_at=self.clock, sources=["claude"]).model_dump(mode="json"))
        self.staged[night_id] = (block_lines(text), block_lines(proposal))

    def adopted(self, night_id: str) -> None:
        """The model after night ``night_id``'s change was adopted: its removed lines gone, its added ones there."""
        base, proposed = self.staged[night_id]
        self.found[night_id] = list(self.rules)
        removed = [line for line in base if line not in proposed]
        self.rules = [line for line in self.rules if line not in removed]
        self.rules += [line for line in proposed if line not in base and line not in self.rules]

    def step(self, action: tuple) -> None:
        kind = action[0]
        if kind == "night":
            self.night(action[1], RULES[action[2]])
        elif kind == "adopt_all":
            try:
                done = adopt_all(self.project, paths=self.paths)
            except NothingToAdopt:
                assert adoptable(self.paths) == []
                return
            for record in done.adopted:
                self.adopted(record.night_id)
            assert set(done.refused) == set(adoptable(self.paths))  # refused ones stay staged, reported
        elif kind == "adopt":
            nights = sorted(self.staged)
            if not nights:
                return
            night_id = nights[action[1] % len(nights)]
            try:
                adopt_night(self.project, paths=self.paths, night_id=night_id)
            except AdoptError:
                return
            self.adopted(night_id)
        elif kind == "revert":
            try:
                record = revert_adoption(self.project, paths=self.paths)
            except AdoptError:
                return
            self.rules = self.found.pop(record.night_id)
        elif kind == "forget":
            rules = [rule for rule in list_rules(self.project, self.paths) if rule.locations]
            if not rules:
                return
            rule = rules[action[1] % len(rules)]
            self.clock += timedelta(seconds=1)
            result = forget_rule(self.project, self.paths, rule.id, now=self.clock)
            line = rule.locations[0].text
            self.staged[result["change_id"]] = (list(self.rules), [r for r in self.rules if r != line])
            self.adopted(result["change_id"])
        else:
            note = f"User note {len(self.user_lines)}."
            text = self.live()
            write_text_atomic(self.file, note + "\n" + text if action[1] == "top" else text + note + "\n")
            self.user_lines.append(note)

    def check(self) -> None:
        text = self.live()
        lines = [line.strip() for line in text.splitlines()]
        assert all(line in lines for line in self.user_lines), "a line the user wrote was lost"
        assert lines.count(BLOCK_BEGIN) == 1 and lines.count(BLOCK_END) == 1
        in_block = block_lines(text)
        assert len(in_block) == len(set(in_block)), "a rule line was written twice"
        assert sorted(in_block) == sorted(self.rules)
        records = load_adoptions(self.paths)
        assert all(record.status in ("adopted", "reverted") for record in records)
        active = {record.night_id for record in records if record.status == "adopted"}
        assert active == set(self.found)
        # status and adopt read the same answer; the ledger agrees with the file
        assert pending_proposals(self.paths)[0] == adoptable(self.paths)
        assert all(night_id not in active for night_id in adoptable(self.paths))
        listed = list_rules(self.project, self.paths)
        assert {rule.locations[0].text for rule in listed if rule.status == "adopted"} == set(in_block)
        forgotten = load_forgotten(self.paths)
        assert all(entry["change"] in active for entry in forgotten.values())


@settings(max_examples=50, deadline=None, derandomize=True, database=None, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow])
@given(STEPS)
@example([("night", "add", 0), ("night", "add", 0), ("night", "add", 1), ("user_edit", "top"), ("adopt_all",)])
@example([("night", "add", 0), ("night", "replace", 1), ("night", "replace", 2), ("adopt", 1), ("adopt_all",),
          ("revert",), ("revert",)])
@example([("night", "add", 0), ("adopt_all",), ("forget", 0), ("night", "add", 1), ("revert",), ("revert",),
          ("adopt", 0), ("user_edit", "end"), ("forget", 1), ("revert",)])
def test_any_sequence_of_nights_adopts_reverts_forgets_and_user_edits_stays_consistent(steps):
    with tempfile.TemporaryDirectory() as root:
        world = World(Path(root))
        for action in steps:
            world.step(action)
            world.check()
