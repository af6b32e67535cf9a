r"""The literal a rule names: what a check can look for in an answer (``pnpm``, ``os.path``, ``React Query``).

``literal_of(phrase)`` returns the short literal of a phrase or None when it names a style rather than a literal
("tabs", "short answers"): a quoted or backticked part wins; otherwise, without articles and trailing qualifiers
("for installs", "in this repo"), 1-3 words that look like a name (code-like, capitalized, or not a common style word
of ``GENERIC_WORDS``).

A dotted code name (``pathlib.Path``, ``logging.getLogger``, ``datetime.now()``) is a symbol of a module, and a
correct answer rarely writes it whole (``from pathlib import Path`` ... ``Path(...)``): ``dotted_name(literal)`` splits
it into (module, symbol), ``name_use_regex(literal)`` is the check that it is used (``\bpathlib\b|\bPath\(``: the
module named, or the symbol called) and ``name_of_use_regex(pattern)`` reads the name back from that regex. A file or
host name (``settings.json``, ``Next.js``, ``example.com``: its last part in ``FILE_EXTENSIONS``) is not a code name.
"""

from __future__ import annotations

import re

#: Longest literal value (characters) of a derived ``contains``/``not_contains`` check.
MAX_LITERAL_CHARS = 40


PRONOUNS = frozenset(
    "it its it's this that that's these those them they one ones something anything everything nothing "
    "i i'm we you he she there here what which who".split()
)


ARTICLES = re.compile(r"^(?:the|a|an|our|your|my|their)\s+", re.IGNORECASE)


#: Common words that name a style rather than a literal the answer would contain ("use tabs, not spaces").
GENERIC_WORDS = frozenset(
    """tabs tab spaces space comments comment emojis emoji bullets bullet points headings heading headers header
    markdown tables table jargon abbreviations acronyms semicolons semicolon quotes quote prose sentences sentence
    words word lists list code examples example links link numbers caps capitals lowercase uppercase english
    british american spelling short long concise detail details simple plain text language tone voice passive
    active formal informal exclamation paragraphs paragraph names name variables variable functions function
    classes class types type tests test docs documentation docstrings logs files file folders folder directory
    directories lines line single double new old other same different good bad better best small big large
    full complete proper correct right wrong way style format formatting approach method methods version
    versions one two three all any some more less fewer few many much very really""".split()
)


#: Second words that make a tool name a command literal ("npm install").
_COMMAND_WORDS = frozenset("install add run test build exec init start remove uninstall publish format check lint sync "
                           "pip".split())


_TRAILING_QUALIFIER = re.compile(
    r"\s+(?:for|in|on|when|to|with|because|since|as|everywhere|anywhere|here|anymore|ever|again|please|"
    r"from now on|going forward|at all|whenever|if|unless|so|across|throughout|within|inside|by default|"
    r"instead|always|only|too)\b.*$",
    re.IGNORECASE,
)


_QUOTED = re.compile(r"`([^`]{1,80})`|\"([^\"]{1,80})\"|'([^'\s][^']{0,78}[^'\s]|[^'\s])'")


_CODE_CHARS = re.compile(r"[._/\\:()\[\]<>=@#$%&*+~|0-9-]")


def quoted_part(text: str) -> str | None:
    match = _QUOTED.search(text)
    if not match:
        return None
    return next(group for group in match.groups() if group is not None).strip() or None


def _is_code_like(token: str) -> bool:
    return bool(_CODE_CHARS.search(token)) or (token[:1].islower() and any(c.isupper() for c in token[1:]))


def literal_of(phrase: str) -> str | None:
    """Return the short literal a check can look for in ``phrase``, or None when it names no literal.

    A quoted/backticked part wins. Otherwise articles and trailing qualifiers ("for installs", "in this repo")
    are dropped; what is left must be 1-3 words and look like a name (code-like, capitalized, or not a common
    style word).
    """
    quoted = quoted_part(phrase)
    if quoted:
        return quoted if len(quoted) <= MAX_LITERAL_CHARS else None
    head = phrase.strip().split(",")[0]  # a comma ends a name ("grep, it's much faster here")
    text = _TRAILING_QUALIFIER.sub("", ARTICLES.sub("", head)).strip(" ,.;:!")
    text = ARTICLES.sub("", text).strip()
    if not text or len(text) > MAX_LITERAL_CHARS or ARTICLES.match(text + " "):
        return None  # an article alone names nothing ("a for loop")
    tokens = text.split()
    if len(tokens) > 3:
        return None
    first = tokens[0].lower()
    if first in PRONOUNS or first in GENERIC_WORDS:
        return None
    if len(tokens) == 1:
        return text
    # Several words: a name ("React Query"), a command ("npm install") or code ("os.path join").
    if all(token[:1].isupper() or _is_code_like(token) for token in tokens):
        return text
    if _is_code_like(tokens[0]) or (len(tokens) == 2 and tokens[1].lower() in _COMMAND_WORDS):
        return text
    return None


_ALTERNATIVE = re.compile(r"\s*,?\s+or\s+", re.IGNORECASE)
#: Most alternatives one phrase may name ("const or let"; "pnpm, yarn or bun").
MAX_ALTERNATIVES = 3


def literal_alternatives(phrase: str) -> list[str] | None:
    """The literals of a phrase that names two or three alternatives to use ("const or let", "`pnpm` or `yarn`"),
    each one a literal (``literal_of``) and none holding another, in order; None for any other phrase (one literal,
    "a list or a table" naming a style)."""
    parts = _ALTERNATIVE.split(phrase.strip())
    if len(parts) == 2 and "," in parts[0]:
        parts = [*parts[0].split(","), parts[1]]  # "pnpm, yarn or bun"
    if not 2 <= len(parts) <= MAX_ALTERNATIVES:
        return None
    literals = [literal_of(part) for part in parts]
    if any(literal is None for literal in literals):
        return None
    folded = [str(literal).casefold() for literal in literals]
    if any(one != other and one in other for one in folded for other in folded) or len(set(folded)) < len(folded):
        return None
    return [str(literal) for literal in literals]


#: Last parts that make a dotted literal a file or host name (``settings.json``, ``Next.js``, ``example.com``), not a
#: module's symbol. ``log`` is here (``error.log``), so ``console.log`` stays a literal too: a name not recognised
#: keeps its literal ``contains`` check.
FILE_EXTENSIONS = frozenset(
    """py pyi pyc ipynb js mjs cjs jsx ts tsx vue svelte json jsonl yaml yml toml ini cfg conf env lock txt md mdx rst
    csv tsv xml html htm css scss sass less sh bash zsh ps1 bat cmd rb go rs java kt kts swift c h cc cpp hpp cs php
    pl lua sql db sqlite log png jpg jpeg gif svg webp ico pdf zip gz tar tgz whl exe dll so dylib bin wasm lockb
    com org net io dev app ai""".split()
)


_DOTTED = re.compile(r"(?P<module>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\.(?P<symbol>[A-Za-z_]\w*)(?:\(\))?")


_NAME_USE = re.compile(r"\\b(?P<module>\w+(?:\\\.\w+)*)\\b\|\\b(?P<symbol>\w+)\\\(")


def dotted_name(literal: str) -> tuple[str, str] | None:
    """``(module, symbol)`` of a dotted code name (``os.path.join`` -> ``("os.path", "join")``; a trailing ``()`` is
    dropped), or None for anything else: one word, a call with arguments (``datetime.now(timezone.utc)``), a version
    (``3.11``), an abbreviation of one-letter parts (``e.g``) or a file or host name (``FILE_EXTENSIONS``)."""
    match = _DOTTED.fullmatch(literal.strip())
    if match is None:
        return None
    module, symbol = match.group("module"), match.group("symbol")
    parts = [*module.split("."), symbol]
    if symbol.casefold() in FILE_EXTENSIONS or all(len(part) == 1 for part in parts):
        return None
    return module, symbol


def name_use_regex(literal: str) -> str | None:
    r"""The regex that an answer using the dotted name ``literal`` matches: its module as a whole word, or its symbol
    called (``pathlib.Path`` -> ``\bpathlib\b|\bPath\(``, which ``from pathlib import Path`` and ``Path('x')`` both
    match), or None when ``literal`` is not a dotted code name (``dotted_name``)."""
    name = dotted_name(literal)
    if name is None:
        return None
    module, symbol = name
    return rf"\b{re.escape(module)}\b|\b{re.escape(symbol)}\("


def name_of_use_regex(pattern: str) -> str | None:
    r"""The dotted name a ``name_use_regex`` was made from (``\bpathlib\b|\bPath\(`` -> ``pathlib.Path``), or None
    for any other pattern."""
    match = _NAME_USE.fullmatch(pattern)
    if match is None:
        return None
    name = match.group("module").replace("\\.", ".") + "." + match.group("symbol")
    return name if name_use_regex(name) == pattern else None
