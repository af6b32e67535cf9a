"""The grammar of rule statements: how English states a house rule, and the deterministic checks a rule implies.

Input: a user message or one rule line (``str``). Output: clauses, rule forms (``forms.ParsedRule``), rule statements
in the user's words and ``models.Check``s. Pure functions of the text: no model, no I/O, never raises. The modules,
bottom up:

| module | job |
|---|---|
| ``typed`` | what the user typed in a message, as opposed to what they pasted into it (fenced, quoted, logs, ...) |
| ``clauses`` | a message as clauses, without the discourse words that only frame them |
| ``literals`` | the literal a rule names (``pnpm``, ``os.path``), or none for a style ("tabs") |
| ``formats`` | format rules (Conventional Commits, ISO dates, length limits, sections, JSON) and their checks |
| ``forms`` | the form of a rule statement: prefer, use, forbid, always, declare |
| ``statements`` | the rule statements of a message, in the user's words, and the checks each implies |

It stands on ``skillopt_sleep.checks`` and ``skillopt_sleep.models`` only, below the backends: the evidence layer
(``skillopt_sleep.mine``) reads sessions with it, and the simulator backend (``backends.mock``) reads the rules in its
system prompt with it, so both read a rule the same way.
"""
