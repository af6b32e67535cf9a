"""The evidence layer: what the user asked, how they reacted, and the rules they taught, read from harvested sessions.

Input: ``list[Session]`` (``skillopt_sleep.harvest``: only turns the transcript's structure says the user typed).
Output: ``MineResult`` with the ``TaskRecord``s a night replays, labels and learns from. It reads rules with the
grammar of rule statements (``skillopt_sleep.grammar``: typed text, clauses, literals, formats, forms, statements).
The modules, bottom up:

| module | job |
|---|---|
| ``lasting`` | lasting, candidate or one-off: recurrence across independent tasks, lasting scope in the words |
| ``rule_reader`` | the LLM rule reader (role ``miner``): English for sentences typed in other languages |
| ``reactions`` | the user's reaction to an answer: approval, correction, re-ask |
| ``requests`` | is a message a request at all (acknowledgements, pasted screens, an agent's answer pasted back) |
| ``replayable`` | can a task be replayed as text, and why not |
| ``validation`` | checks validated by the session's own answers (fail the corrected one, pass the accepted one) |
| ``candidates`` | each request assembled from its turn, refinements and reactions |
| ``duplicates`` | near-duplicate requests are one task |
| ``split`` | task ids and the train / val / test split |
| ``llm_miner`` | the optional LLM miner (role ``miner``) for tasks whose words gave no check |
| ``result`` | ``MineResult``: the tasks and the counts that explain them |
| ``tasks`` | ``mine_tasks``: candidates -> groups -> ``TaskRecord``s with validated judges, rules and splits |
| ``provenance`` | what an edit may name: only what users typed (the screen every edit passes) |
| ``compile`` | a rule as the short imperative its checks demand, with an example from an accepted answer |
| ``rulebook`` | the user's rules as objects: one rule however phrased, proposed once, compiled or in the user's words |
| ``preview`` | ``skillopt-sleep harvest``: what a night would read and mine, changing nothing |

It stands on ``skillopt_sleep.grammar`` and the check vocabulary ``skillopt_sleep.checks``; nothing here imports the
engine.
"""

from __future__ import annotations

from skillopt_sleep.mine.llm_miner import make_llm_miner, wants_miner
from skillopt_sleep.mine.result import MineResult
from skillopt_sleep.mine.split import MIN_TASKS_FOR_TEST, assign_split, normalize_request, task_id_for
from skillopt_sleep.mine.tasks import mine_for_config, mine_tasks

__all__ = ["MIN_TASKS_FOR_TEST", "MineResult", "assign_split", "make_llm_miner", "mine_for_config", "mine_tasks",
           "normalize_request", "task_id_for", "wants_miner"]
