"""Lasting or one-off: is a rule the user stated meant for every future session, or for this one task?

Most of what users write in a request is the task: what to build, which file to touch, a value to use, "no other
changes". A house rule is what they want every time. Two signals tell them apart (``decide_scopes``):

1. **Recurrence**, the strongest: the same instruction stated in two or more different tasks (``similar``: most of
   the same content words, stemmed, on both sides; for scripts without spaces, the same character pairs) is lasting,
   however it is phrased ("keep it backwards compatible" in three refactors). A task counts only when it asks
   something else than the others (``recurrence``): a request sent again with its spec, or a document pasted into two
   requests, is not a restatement. A plain imperative (a task verb after the request: "Show the diff and explain the
   changes", ``forms.plain_imperative``) is how tasks are asked too: it lasts only from a third task
   (``IMPERATIVE_RECURRENCE_TASKS``), its words never make it last sooner, and one that names its object ("Write
   tests for slugify() in src/utils/slug.ts", four times) is a kind of task, however often it comes.
2. **Lasting scope** in the words (``lasting_scope``): "always" or "never" near the start of the statement (not an
   adverb deep in a task's description), "from now on", "going forward", "by default", "in this project/repo", "we
   use" (or "we format with", "we test using") opening a statement, "this is an X codebase", "anymore" closing one,
   a rule shouted in capitals ("DO NOT ...", "MUST", "SHOULD"), a language to answer in, "every"/"each" over the
   agent's own work ("Explain each command", "Show diffs for each change"; over anything else, "each card", it counts
   one feature's objects).

3. **A substitution the session validates**: the user corrected an answer with "X, not Y" / "use X instead of Y",
   and a check it implies fails the answer they corrected and passes the one they accepted ("logger, not print"
   after a ``print``): the agent broke a convention about which tool or library to use, in words that name no task
   ("this", a file, "no other changes" keep it tied to its task). Other corrections, validated or not, are most
   often one-offs on real histories ("put the header back"): they wait like any statement.

Otherwise a statement is ``one_off`` when its words tie it to the task at hand (``one_off_scope``: "this", "it",
"these", "here", a file name, "no other changes", "for now"; such a tie also overrides "every"/"each", which then count
the task's own objects; a temporary tie, "for now", "not ... yet", overrides every lasting word, capitals included)
and ``candidate`` when nothing says either way: a candidate waits, and becomes lasting when it is stated again
(tonight in another task, or on a later night: the rules archive counts nights). The decision and its reason are kept
on each ``RuleStatement`` (``scope``, ``why``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from functools import lru_cache

from skillopt_sleep.grammar.clauses import strip_frame
from skillopt_sleep.grammar.forms import parse_rule, plain_imperative
from skillopt_sleep.models import RuleStatement, TaskRecord

#: Different tasks from which the same instruction is lasting.
RECURRENCE_TASKS = 2
#: Different tasks from which a plain imperative is lasting (a task verb and nothing normative: "Show the diff after
#: applying"): tasks are asked in the imperative too, so such a statement is a habit only when it comes back in a third
#: task, and no word of it makes it last sooner.
IMPERATIVE_RECURRENCE_TASKS = 3
#: Share of the shorter statement's content stems the other must hold to be the same instruction.
SIMILAR_SHARE = 0.5
#: Share of the two statements' content stems together that they must exceed in common (Jaccard): a short
#: statement's two words inside a long spec sentence ("Maintain dark mode support", "The calendar should support
#: ... view modes") are not the same instruction.
SIMILAR_COMMON = 1 / 3
#: Share of the smaller context two tasks may share and still ask different things (``_independent``).
INDEPENDENT_SHARE = 0.5
#: Stems two statements must share at least.
SIMILAR_MIN_SHARED = 2
#: Share of character pairs two statements without spaces (Chinese, Japanese) must share.
SIMILAR_PAIRS = 0.35
#: Characters of a stem (a light stemmer that also forgives typos at a word's end: "compatibility", "compatible").
STEM_CHARS = 6

_LANGUAGES = ("english|german|french|spanish|portuguese|italian|dutch|polish|russian|ukrainian|czech|danish|swedish|"
              "norwegian|finnish|turkish|chinese|japanese|korean|arabic|hebrew|hindi|indonesian|vietnamese|thai|"
              "catalan|greek|romanian|hungarian")
#: What the agent's own work is made of: "every"/"each" over these is a habit ("Explain each command", "Show diffs
#: for each change"); over anything else it counts a task's objects ("add a margin to each card").
_WORK = (r"change|edit|command|commit|step|response|answer|reply|message|request|task|time|session|feature|function|"
         r"method|class|file|module|component|test|pr|pull request|script|endpoint|migration|query")
_LASTING = [
    ("always", r"(?:^|[,;:(]\s*|\bbut\s+|\band\s+)(?:\S+\s+){0,3}?always\b"),
    ("never", r"(?:^|[,;:(]\s*|\bbut\s+|\band\s+)(?:\S+\s+){0,3}?never\b"),
    ("every", rf"^(?:please\s+)?[a-z]+\b[^.;]{{0,40}}\b(?:every|each)\s+(?:single\s+|new\s+)?(?:{_WORK})s?\b"),
    ("from now on", r"\bfrom now on\b|\bfrom here on\b|\bgoing forward\b|\bin (?:the )?future\b|\bhenceforth\b"),
    ("by default", r"\bby default\b|\bas (?:a|the) default\b|\bdefault (?:language|behaviou?r|format)\b"),
    ("every time", r"^(?:\S+\s+){0,3}?(?:every ?time|whenever|at all times|each time)\b"),
    ("project-wide", r"\bin (?:this|our|the) (?:project|repo|repository|codebase|code ?base|team|company|vault|"
                     r"workspace)\b|\bacross (?:the|our|this) (?:codebase|project|repo|app|board)\b|"
                     r"\b(?:project|repo|vault|codebase|team)[- ]wide\b|\bacross the board\b|"
                     r"^(?:\S+\s+)?(?:this|it)(?: is|'s) an? [\w.+#-]+ (?:codebase|code ?base|project|repo|shop|"
                     r"team|house)\b"),
    ("we use", r"^(?:\S+\s+)?we(?:'re| are)? (?:always |only |usually |generally |completely )?(?:use|prefer|"
               r"do not use|don't use|write|work with|dropping|moving to|switching to)\b(?!.*\bto\s+\w+\b)|"
               r"^(?:\S+\s+)?we (?:always |usually )?[a-z]+(?<!ed) (?:with|using)\b|"  # habitual, not narrated
               r"\bour (?:convention|standard|style|house rule|policy)s?\b|"
               r"^(?:the |this |our )?(?:project|repo|repository|codebase|app|firmware|backend|frontend) uses\b|"
               r"\b(?:we're|we are) an? \S+ (?:shop|house|team)\b"),
    ("anymore", r"\bany ?more\s*[.!]?$|\bno longer\b|\bever again\b|\bdon't ever\b|\bdo not ever\b"),
    ("a language to answer in", rf"\b(?:respond|answer|reply|write|speak|talk|comment|text)\w*\b[^.;]{{0,30}}"
                                rf"\b(?:in|using)\s+(?:{_LANGUAGES})\b|\b(?:{_LANGUAGES})\s+(?:only|please)\b|"
                                rf"\blanguage is (?:{_LANGUAGES})\b"),
]
_LASTING_PATTERNS = [(name, re.compile(pattern, re.IGNORECASE)) for name, pattern in _LASTING]
#: The lasting scope that a tie to the task overrides: "every"/"each" then quantify over the task's own objects
#: ("Remove variant="outline" from EVERY Badge in this file").
QUANTIFIER = "every"
_SHOUTED = re.compile(r"^(?:\S+\s+){0,2}?(?:[Dd]o(?:es)? NOT|DO NOT|DON'T|NEVER|ALWAYS|STOP|ONLY EVER)\b"
                      r"|^(?:\S+\s+){1,6}?(?:MUST(?: NOT)?|SHOULD(?: NOT)?|SHALL|NOT ALLOWED)\b")
#: The tie that says the statement is temporary ("for now", "not yet", "this time"): it outweighs any lasting word.
TEMPORARY = "for now"
_ONE_OFF = [
    ("this task", r"\b(?:this|that|these|those|it|here)\b"),
    (TEMPORARY, r"\bfor now\b|(?:\bnot|\bno|n't)\b[^.;]*\byet\b|\bthis time\b|"
                r"\bfor this (?:one|task|file|change|pr|feature)\b|\bjust once\b"),
    ("nothing else", r"\bno other changes?\b|\b(?:anything|nothing) else\b|\bonly (?:change|touch|edit|modify)\b"),
    ("a file", r"\b[\w./-]+\.(?:py|js|jsx|ts|tsx|vue|rb|go|rs|java|kt|cs|cpp|c|h|md|json|ya?ml|toml|html|css|sql|"
               r"sh)\b"),
]
_ONE_OFF_PATTERNS = [(name, re.compile(pattern, re.IGNORECASE)) for name, pattern in _ONE_OFF]
#: Words that carry no content of an instruction (the rule's frame, not its subject).
_FRAME_WORDS = frozenset(
    """a an and are as at be been but by can could do does did for from had has have i if in into is it its me my of on
    or our so than that the their them then there these they this those to too us was we were what when where which
    while who why will with would you your please pls just also make sure ensure keep use using always never don't
    dont not no must should need needs want like all any every each same other new existing one ones thing things
    way it's that's i'm we're you're let's can't won't only really very still again here now then""".split()
)
_WORD = re.compile(r"\w+")


def lasting_scope(text: str) -> str | None:
    """What in ``text`` says it lasts ("always", "we use", ...; module docstring), or None."""
    if _SHOUTED.search(text or ""):
        return "a prohibition in capitals"
    for name, pattern in _LASTING_PATTERNS:
        if pattern.search(text or ""):
            return name
    return None


_CONJUNCTION_BEFORE = frozenset("ensure ensures ensuring sure so such note means mean check verify remember given "
                                "assume say says said think know believe state states stated confirm".split())
_CLAUSE_START = frozenset("the a an all every each no they it we you i our your its their there he she this these "
                          "those any some none nothing everything".split())


def _conjunction(text: str, match: re.Match) -> bool:
    """The "that" at ``match`` opens a clause ("ensure that the service runs as X", "that they are nested"): a
    conjunction, not a word pointing at the task's object ("fix that", "that file")."""
    if match.group(0).casefold() != "that":
        return False
    before = re.findall(r"\w+", text[:match.start()])[-1:]
    after = re.findall(r"\w+", text[match.end():])[:1]
    return bool(before and before[0].casefold() in _CONJUNCTION_BEFORE) or bool(
        after and after[0].casefold() in _CLAUSE_START)


def one_off_scope(text: str) -> str | None:
    """What in ``text`` ties it to the task at hand ("this", a file name, "no other changes"; module docstring). A
    "that" which opens a clause ("make sure that the keys are nested") ties nothing."""
    for name, pattern in _ONE_OFF_PATTERNS:
        for match in pattern.finditer(text or ""):
            if not _conjunction(text, match):
                return f"{name}: {match.group(0)!r}"
    return None


def _spaceless(text: str) -> bool:
    return sum(1 for char in text if "\u2e80" <= char <= "\u9fff" or "\uac00" <= char <= "\ud7af") >= 4


@lru_cache(maxsize=4096)
def _stems(text: str) -> frozenset[str]:
    words = _WORD.findall(unicodedata.normalize("NFKC", text or "").casefold())
    return frozenset(word.removesuffix("s")[:STEM_CHARS] for word in words if word not in _FRAME_WORDS
                     and len(word) > 2 and not word.isdigit())


@lru_cache(maxsize=4096)
def _pairs(text: str) -> frozenset[str]:
    chars = [char for char in unicodedata.normalize("NFKC", text or "") if char.isalnum()]
    return frozenset(a + b for a, b in zip(chars, chars[1:]))


def similar(left: str, right: str) -> bool:
    """Two statements say the same instruction (module docstring): most of the shorter one's content stems are the
    other's (at least ``SIMILAR_MIN_SHARED``), and more than a third of the two's stems together (``SIMILAR_COMMON``);
    for a script without spaces, most of its character pairs."""
    if _spaceless(left) or _spaceless(right):
        a, b = _pairs(left), _pairs(right)
        return bool(a and b) and len(a & b) >= SIMILAR_PAIRS * min(len(a), len(b))
    a, b = _stems(left), _stems(right)
    shared = len(a & b)
    return (shared >= SIMILAR_MIN_SHARED and shared >= SIMILAR_SHARE * min(len(a), len(b))
            and shared > SIMILAR_COMMON * len(a | b))


def _validated_correction(statement: RuleStatement, task: TaskRecord) -> bool:
    """``statement`` corrected an answer with a substitution ("X, not Y"), and a check it implies is validated by the
    session: the answer the user corrected breaks it and the answer they accepted keeps it (``mine.validation``)."""
    if statement.origin != "correction" or not any(check.rule == statement.text for check in task.judge.checks):
        return False
    parsed = parse_rule(strip_frame(statement.text))
    return parsed is not None and parsed.form == "prefer"


def recurrence_needed(text: str) -> int:
    """Different tasks that must state ``text`` for it to last by recurrence: ``IMPERATIVE_RECURRENCE_TASKS`` for a
    plain imperative no rule form parses (``forms.plain_imperative``), else ``RECURRENCE_TASKS``."""
    plain = plain_imperative(text) and parse_rule(strip_frame(text)) is None  # "from now on, write ..." is not plain
    return IMPERATIVE_RECURRENCE_TASKS if plain else RECURRENCE_TASKS


def _decide(statement: RuleStatement, tasks_stating: int, *, validated: bool = False) -> None:
    needed = recurrence_needed(statement.text)
    plain = needed > RECURRENCE_TASKS
    tied = one_off_scope(statement.gloss or statement.text)
    if tasks_stating >= needed and not (tied and plain):  # a plain imperative naming its object: a kind of task
        statement.scope, statement.why = "lasting", f"stated in {tasks_stating} tasks"
        return
    if plain or (tied and tied.startswith(TEMPORARY)):  # no word makes these last
        statement.scope, statement.why = ("one_off", f"scoped to its task ({tied})") if tied else (
            "candidate", f"a plain imperative stated in {tasks_stating} task(s): lasting once stated in {needed}")
        return
    if validated and tied is None:
        statement.scope = "lasting"
        statement.why = "a substitution the session validates: the corrected answer broke it"
        return
    scope = lasting_scope(statement.gloss or statement.text) or lasting_scope(statement.text)
    if scope and not (scope == QUANTIFIER and tied):  # "every Badge in this file": the task's objects, not a habit
        statement.scope, statement.why = "lasting", f"lasting scope: {scope}"
        return
    if tied:
        statement.scope, statement.why = "one_off", f"scoped to its task ({tied})"
    else:
        statement.scope, statement.why = "candidate", "stated once, no lasting scope: waits to be stated again"


def _context(task: TaskRecord, statement: str) -> frozenset[str]:
    """What a task asks besides a statement: the content stems of its request without the statement's."""
    return _stems(task.request[:4000]) - _stems(statement)


def _independent(left: frozenset[str], right: frozenset[str]) -> bool:
    """Two tasks ask different things (their contexts share less than ``INDEPENDENT_SHARE`` of the smaller one)."""
    if not left or not right:
        return True
    return len(left & right) < INDEPENDENT_SHARE * min(len(left), len(right))


def recurrence(statement: str, task: TaskRecord, statements: list[tuple[TaskRecord, RuleStatement]]) -> int:
    """How many different tasks state ``statement`` (``similar``), counting a task only when it asks something else
    than the tasks already counted (``_independent``): a request sent again with its spec, or a document pasted into
    two requests, restates nothing; a house rule comes back with a new task."""
    contexts = [_context(task, statement)]
    for other_task, other in statements:
        if other_task.id == task.id or not similar(statement, other.gloss or other.text):
            continue
        context = _context(other_task, other.gloss or other.text)
        if all(_independent(context, known) for known in contexts):
            contexts.append(context)
    return len(contexts)


def decide_scopes(tasks: Iterable[TaskRecord]) -> None:
    """Set ``scope`` and ``why`` of every rule statement of ``tasks`` (module docstring), in place; a statement in
    another language is read through its English ``gloss``."""
    tasks = list(tasks)
    statements = [(task, rule) for task in tasks for rule in task.rules]
    for task, rule in statements:
        _decide(rule, recurrence(rule.gloss or rule.text, task, statements),
                validated=_validated_correction(rule, task))
