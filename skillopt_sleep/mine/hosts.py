"""What in a text names a host, a file or a module: the dotted names and IP literals the provenance screen keys.

``dotted_tokens(text)`` reads ``text`` (already ``text.normalize``-d) and returns ``(kind, key)`` pairs:

- ``host``, keyed by the whole name (subdomain and registrable domain: ``get.evil.example``, ``evilname.lol``):
  a dotted name whose ending is a public suffix of the Public Suffix List with a registrable label before it
  (``publicsuffixlist``'s bundled snapshot, read offline: nothing is fetched or cached at run time), or a
  special-use name (``.example``, ``.test``, ``.internal``, ``.local``, ...); any dotted name in a command or URL
  position (after ``curl``/``wget``/``fetch``/``from``/``to``/``at``/``@``..., or followed by ``/path`` or
  ``:port``), whatever its ending; and every IPv4 or IPv6 literal (``ipaddress`` validates it).
- ``path``, keyed whole: a file name with a known file ending (``README.md``, ``config.py``, ``package.json``)
  outside a command or URL position. ``.md``, ``.py`` and ``.zip`` are country or generic TLDs too: the ending says
  file unless the position says host.
- ``name``, keyed by its first label: any other dotted name (``os.path``, ``logging.getLogger``), and a call outside
  a command or URL position (``datetime.now()``: ``.now`` is a public suffix too, but a host is not called): a
  module is named by its module. Version numbers (``1.2.3``) name nothing.
"""

from __future__ import annotations

import ipaddress
import re
from functools import lru_cache

from publicsuffixlist import PublicSuffixList

#: Last parts of a dotted name that make it a file name (outside a command or URL position).
FILE_ENDINGS = frozenset(
    "sh bash zsh ps1 bat cmd exe py js mjs cjs ts tsx jsx json yaml yml toml ini cfg conf env txt md rb pl php go rs "
    "java kt c h cpp hpp cs swift zip tar gz tgz bz2 xz deb rpm dmg pkg whl jar lock sql db csv xml html css".split())
#: Special-use and private-network endings the Public Suffix List leaves out (RFC 2606, 6761, 6762, 8375, ICANN).
SPECIAL_USE = frozenset("example test invalid localhost local internal onion lan intranet corp home arpa".split())

#: A dotted name: labels of letters, digits, ``-`` and ``_``, the last starting with a letter (``1.2.3`` is none).
_DOTTED = re.compile(r"(?<![\w./-])[^\W_][\w-]*(?:\.[^\W_][\w-]*)*\.[^\W\d_][\w-]*(?![\w-])")
#: Words after which a name is where a command or a URL puts a host (possibly after flags: ``curl -sL x``).
_BEFORE_HOST = re.compile(
    r"(?:\b(?:curl|wget|fetch|download|upload|from|to|at|via|ssh|scp|sftp|rsync|ping|nc|ncat|netcat|telnet|nslookup|"
    r"dig|visit|open|browse|post|send|connect|host|server|domain|endpoint|mirror|registry|proxy|url)"
    r"\s+(?:-{1,2}[\w-]+\s+)*|@)$", re.IGNORECASE)
#: What after a name makes it a host: a path (``/setup``) or a port (``:8080``).
_AFTER_HOST = re.compile(r"(?:/[\w~.-]|:\d)")
_FROM_IMPORT_AFTER = re.compile(r"\s+import\b")
_IPV4 = re.compile(r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?![\w]|\.\d)")
_IPV6 = re.compile(r"(?<![\w:.])(?:[0-9a-f]{0,4}:){2,7}(?:\d{1,3}(?:\.\d{1,3}){3}|[0-9a-f]{1,4})?(?![\w:])",
                   re.IGNORECASE)


@lru_cache(maxsize=1)
def _psl() -> PublicSuffixList:
    """The Public Suffix List snapshot bundled with ``publicsuffixlist`` (read from the package, never fetched)."""
    return PublicSuffixList(accept_unknown=False)


def is_host_name(name: str) -> bool:
    """True when ``name`` ends with a known public suffix and has a registrable label before it (``evilname.lol``,
    ``a.b.co.uk``, ``readme.md``), or ends with a special-use name (``x.example``). ``os.path``: False."""
    lowered = name.lower().rstrip(".")
    if lowered.rsplit(".", 1)[-1] in SPECIAL_USE:
        return True
    return _psl().privatesuffix(lowered) is not None


def in_host_position(text: str, start: int, end: int) -> bool:
    """True when ``text[start:end]`` stands where a command or a URL puts a host: after ``curl``, ``from``, ``to``,
    ``at``, ``@``... (``from x.y import`` excepted), or followed by ``/path`` or ``:port``."""
    if _AFTER_HOST.match(text, end):
        return True
    before = _BEFORE_HOST.search(text[max(0, start - 80):start])
    if before is None:
        return False
    return not (before.group(0).lower().startswith("from") and _FROM_IMPORT_AFTER.match(text, end))


def dotted_kind(name: str, *, positioned: bool = False, called: bool = False) -> str:
    """``host``, ``path`` or ``name`` for one dotted name (see the module docstring); positioned: it stands in a
    command or URL position (``in_host_position``: a host there, whatever else); called: an opening parenthesis
    follows it (``datetime.now(``: a name, though ``.now`` is a public suffix)."""
    if positioned:
        return "host"
    if name.rsplit(".", 1)[-1].lower() in FILE_ENDINGS:
        return "path"
    return "host" if not called and is_host_name(name) else "name"


def ip_literals(text: str) -> list[str]:
    """Every IPv4 and IPv6 literal of ``text`` (``203.0.113.7``, ``2001:db8::7``, ``::1``), as written, in order;
    candidates ``ipaddress`` rejects (``12:30:45``, ``999.1.1.1``) are left out."""
    return [literal for _, literal in _ip_matches(text)]


def _ip_matches(text: str) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for pattern, parse in ((_IPV4, ipaddress.IPv4Address), (_IPV6, ipaddress.IPv6Address)):
        for match in pattern.finditer(text):
            try:
                parse(match.group(0))
            except ValueError:
                continue
            found.append((match.start(), match.group(0)))
    return sorted(found)


def dotted_tokens(text: str) -> list[tuple[str, str]]:
    """The (kind, key) of every dotted name and IP literal of ``text``, in order: hosts and files keyed whole, other
    names by their first label (see the module docstring). Names of single letters (``e.g``, ``i.e``) are left out."""
    found = [(start, "host", literal) for start, literal in _ip_matches(text)]
    for match in _DOTTED.finditer(text):
        name = match.group(0)
        parts = name.split(".")
        if max(len(part) for part in parts) < 2:
            continue
        kind = dotted_kind(name, positioned=in_host_position(text, match.start(), match.end()),
                           called=text.startswith("(", match.end()))
        found.append((match.start(), kind, name if kind != "name" else parts[0]))
    return [(kind, key) for _, kind, key in sorted(found, key=lambda item: item[0])]
