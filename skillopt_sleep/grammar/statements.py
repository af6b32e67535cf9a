"""Rule statements in the user's own words, and the deterministic checks each implies.

A *rule* is a standing instruction about how work is done ("use pnpm, not npm", "dates are ISO, YYYY-MM-DD",
"never commit to main", "keep answers under 120 words").

* ``rule_statements(text)``: the rule statements of one message, each a clause in the user's words (a leading "No,"
  / "Please" / "I said" is dropped, nothing else is rewritten), read only from what the user typed
  (``typed.typed_text``): the forms a check comes from (``extract_rules``, ``forms.parse_rule``), and any other
  instruction about how to work (``forms.normative``: "Do NOT ...", "Ensure ...", "X must ...", "we use ..."), and
  a plain imperative after the message's first clause (``forms.plain_imperative``: "Show the diff and explain the
  changes" appended to a request; the first clause is the request itself), long messages and instruction blocks
  included; of "<a remark>, but <an instruction>" the statement is the instruction. Whether a statement lasts is
  ``mine.lasting``'s to decide.
* ``checks_for_rule(rule)``: deterministic checks a response can be scored with. Values stay short and literal; a
  rule whose subject is not a literal ("use tabs, not spaces", "never commit to main") yields no check and is judged
  by the rubric. A forbidden word that is part of the preferred one ("pnpm" contains "npm"), or a very short word
  ("var"), becomes a whole-word negative regex (``checks.negative_word_regex``) so that "pnpm install" passes.
  A dotted code name has both halves (``literals.dotted_name``): to use one is to name its module or call its symbol
  (``pathlib.Path`` -> regex ``literals.name_use_regex``, which ``from pathlib import Path`` passes), and to avoid
  one is never to write it as a whole word (``negative_word_regex("os.path")``). Alternatives to use ("const or
  let", ``literals.literal_alternatives``) give one check that either is used (``checks.any_word_regex``), never a
  ``contains`` of the first.
"""

from __future__ import annotations

import re

from skillopt_sleep.checks import any_word_regex, negative_word_regex
from skillopt_sleep.grammar.clauses import (
    clause_lines,
    clean_quotes,
    is_question,
    split_clauses,
    statement,
    strip_frame,
)
from skillopt_sleep.grammar.formats import ISO_DATE_NO_MONTHS_REGEX, ISO_DATE_REGEX, format_checks, format_rule_hit
from skillopt_sleep.grammar.forms import (
    _PART_SPLIT,
    USE_VERBS,
    normative,
    parse_part,
    parse_rule,
    plain_imperative,
    rule_parts,
)
from skillopt_sleep.grammar.literals import (
    MAX_LITERAL_CHARS,
    dotted_name,
    literal_alternatives,
    literal_of,
    name_use_regex,
    quoted_part,
)
from skillopt_sleep.grammar.typed import typed_text
from skillopt_sleep.models import Check

#: Most rules taken from one message.
MAX_RULES_PER_MESSAGE = 8


def extract_rules(text: str) -> list[str]:
    """Return the rule statements in one message that a check can be derived from (``forms.parse_rule``: "use pnpm,
    not npm", "never X", "we're a uv shop"), in the user's words (frame words like "No," dropped).

    text: a user message (request, correction, rejection feedback). Returns at most ``MAX_RULES_PER_MESSAGE``
    distinct clauses, in order. Pasted text (``typed_text``) is ignored. Never raises. What a message *reacts* with is
    read from these (``mine.reactions``); what a night may learn is ``rule_statements``.
    """
    return _statements(text, broad=False)


def rule_statements(text: str) -> list[str]:
    """``extract_rules``, and every other instruction about how to work the message holds (``forms.normative``: "Do
    NOT ...", "Ensure ...", "X must ...", "I want to use X", "we use ..."), and every plain imperative after the first
    clause ("Show the diff and explain the changes"), long messages and instruction blocks included: the candidates
    of what a user teaches. Whether one lasts is ``mine.lasting``'s to decide."""
    return _statements(text, broad=True)


#: Most words of the sentence after a prohibition that says what to use instead ("Use --force-with-lease.").
INSTEAD_WORDS = 6


def _with_instead(lines: list[list[str]]) -> list[str]:
    """The clauses of ``lines``, a prohibition joined with the short sentence after it on its line that names what
    to use instead: "Do NOT use --force on shared branches. Use --force-with-lease." is one substitution (both halves
    checked), not a prohibition and a separate rule."""
    out = []
    for clauses in lines:
        index = 0
        while index < len(clauses):
            clause = clauses[index]
            after = clauses[index + 1] if index + 1 < len(clauses) else ""
            if after and len(after.split()) <= INSTEAD_WORDS:
                alone, then = parse_rule(strip_frame(clause)), parse_rule(strip_frame(after))
                joined = parse_rule(strip_frame(f"{clause} {after}"))
                if (alone is not None and alone.form == "forbid" and then is not None and then.form == "use"
                        and joined is not None and joined.form == "prefer"):
                    out.append(f"{clause} {after}")
                    index += 2
                    continue
            out.append(clause)
            index += 1
    return out


def _instruction_after_but(clause: str) -> str:
    """The instruction of "<a remark>, but <instruction>" ("If things go well, you two can collaborate, but STOP and
    ask LOGAN before doing anything drastic"): what follows the last ", but" when the clause is no rule or
    instruction as a whole and that part is one; else ``clause``."""
    head, _, tail = clause.rpartition(", but ") if ", but " in clause else ("", "", "")
    if not head or parse_rule(strip_frame(clause)) is not None or instruction(head):
        return clause
    return tail if instruction(tail) else clause


def instruction(text: str) -> bool:
    """``text`` (frame words are stripped here) states an instruction about how to work: a rule form
    (``forms.parse_rule``), a ``forms.normative`` statement or a format rule; never a question."""
    bare = strip_frame(text)
    return not is_question(bare) and bool(parse_rule(bare) or normative(bare) or format_rule_hit(bare))


def _statements(text: str, *, broad: bool) -> list[str]:
    found: list[str] = []
    seen: set[str] = set()
    for index, clause in enumerate(_with_instead(clause_lines(typed_text(text)))):
        clause = _instruction_after_but(clause)
        bare, kept = strip_frame(clause), statement(clause)
        rules = [kept if rule == bare else rule for rule in _rule_statements(bare)]
        instructs = normative(bare) or normative(kept) or (index > 0 and plain_imperative(bare))
        for rule in rules or ([kept] if broad and instructs else []):
            key = rule.casefold()
            if key not in seen and len(found) < MAX_RULES_PER_MESSAGE:
                seen.add(key)
                found.append(rule)
    return found


def states_only_rules(text: str) -> bool:
    """True when every clause of ``text`` (frame words dropped) is a rule statement and there is at least one: a
    message that states rules and asks for nothing ("we're a pnpm shop. dates are ISO")."""
    clauses = [strip_frame(clause) for clause in split_clauses(text)]
    clauses = [clause for clause in clauses if clause]
    return bool(clauses) and all(_rule_statements(clause) for clause in clauses)


def _rule_statements(clause: str) -> list[str]:
    """The rule(s) of one clause: the clause itself, in the user's words, or two rules when a complete rule is
    followed by a different concrete one after a comma ("Don't touch the lockfile by hand, use pnpm not npm"). A
    clause that does not parse whole but whose parts do ("no black anymore, we switched to ruff format") is one
    rule."""
    if not clause:
        return []
    parsed = parse_rule(clause)
    if parsed is None:
        return [clause] if rule_parts(clause) and _PART_SPLIT.search(clause) else []
    if parsed.form == "prefer" or parsed.preferred or parsed.forbidden:
        return [clause]
    head, _, tail = clause.partition(", ")
    tail_parsed = parse_rule(tail) if tail else None
    if tail_parsed is None or tail_parsed.form not in ("prefer", "use", "forbid") or parse_rule(head) is None:
        return [clause]
    whole = {(check.op, check.value) for check in checks_of(clause, clause, "house_rule")}
    if {(check.op, check.value) for check in checks_for_rule(tail)} <= whole:
        return [clause]  # the tail only restates the rule ("dates are ISO here, YYYY-MM-DD please")
    return [head, tail]


def _use_check(literal: str, rule: str, origin: str) -> Check:
    """``contains literal``, or for a dotted code name the regex that it is used (``literals.name_use_regex``)."""
    pattern = name_use_regex(literal)
    if pattern is not None:
        return Check(op="regex", value=pattern, origin=origin, rule=rule)
    return Check(op="contains", value=literal, origin=origin, rule=rule)


_FLAG = re.compile(r"(?<![\w-])--[a-z][\w-]*")


def _flag(rest: str) -> str | None:
    """The one command-line flag a prohibition names ("Do NOT force push with --force" -> ``--force``), else None."""
    flags = set(_FLAG.findall(rest))
    return flags.pop() if len(flags) == 1 else None


def _forbid_check(literal: str, preferred: str | None, rule: str, origin: str) -> Check:
    """``not_contains literal``, or a whole-word negative regex when a substring match would misfire, the literal is
    a dotted code name (``os.path``) or a flag (``--force`` is not in ``--force-with-lease``)."""
    inside_preferred = preferred is not None and literal.casefold() in preferred.casefold()
    short_word = re.fullmatch(r"\w{1,3}", literal) is not None
    word_edges = re.match(r"\w", literal) and re.search(r"\w$", literal)
    if dotted_name(literal) is not None or literal.startswith("-") or ((inside_preferred or short_word) and word_edges):
        return Check(op="regex", value=negative_word_regex(literal), origin=origin, rule=rule)
    return Check(op="not_contains", value=literal, origin=origin, rule=rule)


def checks_for_rule(rule: str, *, origin: str = "house_rule") -> list[Check]:
    """Return the deterministic checks a rule statement implies (possibly none).

    rule: one statement as returned by ``extract_rules``. origin: stored on each check (``house_rule`` for a
    rule stated in a request, ``correction`` for one stated in a correction). Each check carries ``rule``.
    Format rules (Conventional Commits, ISO dates, word/character limits, a named section, JSON output) give
    their format check and no literal ``contains`` of the rule's words. Never raises.
    """
    text = strip_frame(clean_quotes(rule or ""))
    parsed = parse_rule(text)
    checks = checks_of(text, rule, origin) if parsed is not None else []
    if parsed is None or parsed.form not in ("prefer", "use", "forbid") or not checks:
        parts = rule_parts(text)
        checks += [check for part in parts for check in checks_of(strip_frame(part), rule, origin,
                                                                   beside=len(parts) > 1)]
    if any(check.value == ISO_DATE_NO_MONTHS_REGEX for check in checks):  # a part's looser date check is implied
        checks = [check for check in checks if check.value != ISO_DATE_REGEX]
    return _unique(checks)


def _unique(checks: list[Check]) -> list[Check]:
    unique: list[Check] = []
    for check in checks:
        if all((c.op, c.value) != (check.op, check.value) for c in unique):
            unique.append(check)
    return unique


def checks_of(text: str, rule: str, origin: str, *, beside: bool = False) -> list[Check]:
    """The checks of one statement that parses (``parse_part``; ``beside``: another part of its clause is a rule)."""
    parsed = parse_part(text, beside=beside)
    if parsed is None:
        return []
    checks = format_checks(text, rule, origin)
    formatted = bool(checks)
    alternatives = literal_alternatives(parsed.preferred) if parsed.preferred else None
    preferred = literal_of(parsed.preferred) if parsed.preferred and not alternatives else None
    if parsed.form in ("prefer", "use") and alternatives and not formatted:  # "use const or let": either one
        checks.append(Check(op="regex", value=any_word_regex(alternatives), origin=origin, rule=rule))
    if parsed.form in ("prefer", "use") and preferred and not formatted:
        checks.append(_use_check(preferred, rule, origin))
    if parsed.form == "prefer" and parsed.forbidden:
        forbidden = literal_of(parsed.forbidden)
        if forbidden and forbidden.casefold() != (preferred or "").casefold():
            checks.append(_forbid_check(forbidden, parsed.preferred, rule, origin))
    if parsed.form == "forbid":
        forbidden = literal_of(parsed.forbidden) if parsed.forbidden else (quoted_part(parsed.rest or "")
                                                                            or _flag(parsed.rest or ""))
        if forbidden and len(forbidden) <= MAX_LITERAL_CHARS:
            checks.append(_forbid_check(forbidden, None, rule, origin))
    if parsed.form == "always" and not formatted and parsed.rest:
        use = re.match(rf"^{USE_VERBS}\s+(?P<x>.+)$", parsed.rest, re.IGNORECASE)
        literal = literal_of(use.group("x")) if use else quoted_part(parsed.rest)
        if literal:
            checks.append(_use_check(literal, rule, origin))
    return checks
