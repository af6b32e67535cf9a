"""Passwords typed on a command line: where in a text ``redact`` finds them (``sshpass -p VALUE``, ``mysql -pVALUE``,
``curl -u user:VALUE``, ``PGPASSWORD=VALUE psql``).

An option is read as a password only on the command line of a program that takes one there: ``-p`` is a password
to ``sshpass``, ``mongosh`` and ``docker login``, but a port to ``docker run``, ``psql`` and ``redis-cli``, a
plugin to ``pytest``, and nothing to ``grep``. So a finding starts from a known command name (``COMMAND_LINE``);
its options are read up to the end of that command (a newline or an unquoted ``;``, ``|``, ``&``), and only those
that command takes a password with (``OPTIONS``):

============================================  =================================================================
command                                       password options
============================================  =================================================================
sshpass                                       ``-p VALUE``, ``-pVALUE``
docker, podman, nerdctl, buildah, skopeo,     ``-p``/``--password`` (space, ``=`` or attached), only after a
oras, helm (``login``, ``repo add``)          ``login`` or ``add`` word (``docker run -p 8080:80`` is a port map)
mysql, mysqldump, mysqladmin, mariadb, ...    ``-pVALUE`` (attached; ``-p`` alone prompts, and mysql reads
                                              ``-p WORD`` as the database name), ``--password``/``--pass``
mongo, mongosh, mongodump, mongorestore, ...  ``-p``/``--password`` (``-p`` alone prompts)
redis-cli                                     ``-a VALUE``, ``--pass VALUE`` (its ``-p`` is the port)
curl                                          the password part of ``-u``/``--user``/``-U``/``--proxy-user``
                                              ``user:VALUE`` (``-u user`` alone prompts)
wget                                          ``--password``, ``--http-password``, ``--ftp-password``,
                                              ``--proxy-password``
============================================  =================================================================

``psql`` takes no password argument (its ``-p`` is the port); it reads ``PGPASSWORD``. The environment
variables these programs read a password from (``PGPASSWORD``, ``MYSQL_PWD``, ``REDISCLI_AUTH``, ``SSHPASS``)
are found wherever they are assigned (``ENV_ASSIGNMENT``).

A value is the next shell word: bare, ``'single'`` or ``"double"`` quoted, or ``\\"quoted\\"`` as inside a JSON
string (tool inputs are harvested as JSON); a quote cut before it closes runs to the end of the line. A value
that names a password instead of holding one (``$PW``, ``%PW%``, ``<password>``, ``***``) is not a finding
(``real_value``). Texts are Python ``str``; positions are ``str`` indices.
"""

from __future__ import annotations

import re
from typing import Iterator

_DOCKER_LIKE = ("docker", "podman", "nerdctl", "buildah", "skopeo", "oras", "helm")
_MYSQL_LIKE = ("mysql", "mysqldump", "mysqladmin", "mysqlimport", "mysqlshow", "mysqlcheck", "mysqlpump", "mysqlsh",
               "mariadb", "mariadb-dump", "mariadb-admin")
_MONGO_LIKE = ("mongo", "mongosh", "mongodump", "mongorestore", "mongoexport", "mongoimport", "mongostat",
               "mongotop", "mongofiles")

# One shell word as a value: "double" (or \"double\" inside JSON), 'single', or bare. A quote that is never closed
# runs to the end of the line (a text cut inside the secret).
_VALUE = (r"""(?:\\?"(?P<dq>(?:[^"\\\n]|\\[^"\n])*)(?:\\?")?"""
          r"""|'(?P<sq>[^'\n]*)'?"""
          r"""|(?P<bare>[^\s'"`;|&<>()\\]+))""")
_SPACE = r"[ \t]+"


def _options(short: str | None, attached_only: bool, longs: tuple[str, ...]) -> re.Pattern[str]:
    """An option at the start of a word, then its value: ``-pVALUE`` / ``-p VALUE`` (``short``; attached only when
    ``attached_only``) or ``--long VALUE`` / ``--long=VALUE``. A spaced value never starts with ``-`` (the next
    option: ``-p`` alone prompts)."""
    forms = []
    if short is not None:
        forms.append(f"-{short}" + ("(?=[^\\s-])" if attached_only else f"(?:=|{_SPACE}(?=[^\\s-])|(?=[^\\s-]))"))
    for name in longs:
        forms.append(f"--{name}(?:=|{_SPACE}(?=[^\\s-]))")
    return re.compile(r"(?<![^\s\"'])(?:" + "|".join(forms) + ")" + _VALUE)


_CURL_USER = re.compile(r"(?<![^\s\"'])(?:-[uU](?:" + _SPACE + r")?|--(?:proxy-)?user(?:=|" + _SPACE + "))"
                        r"""(?:\\?"[^"\\:\n]*:(?P<dq>(?:[^"\\\n]|\\[^"\n])*)(?:\\?")?"""
                        r"""|'[^':\n]*:(?P<sq>[^'\n]*)'?"""
                        r"""|[^\s'"`;|&<>()\\:]*:(?P<bare>[^\s'"`;|&<>()\\]+))""")

#: command name -> (the password options it takes, the word that must come before them or None).
OPTIONS: dict[str, tuple[re.Pattern[str], re.Pattern[str] | None]] = {
    "sshpass": (_options("p", False, ()), None),
    "redis-cli": (_options("a", False, ("pass",)), None),
    "curl": (_CURL_USER, None),
    "wget": (_options(None, False, ("password", "http-password", "ftp-password", "proxy-password")), None),
    **{name: (_options("p", True, ("password", "pass")), None) for name in _MYSQL_LIKE},
    **{name: (_options("p", False, ("password",)), None) for name in _MONGO_LIKE},
    **{name: (_options("p", False, ("password",)), re.compile(r"(?<!\S)(?:login|add)(?!\S)"))
       for name in _DOCKER_LIKE},
}

#: A known command name (alone or at the end of a path, ``.exe`` allowed) and the rest of its command: up to a
#: newline or an unquoted ``;``, ``|``, ``&`` (quoted strings, and ``\\"`` inside JSON, are crossed). Group
#: ``command`` is the name, group ``rest`` what follows it.
COMMAND_LINE = re.compile(
    r"(?<![\w.-])(?P<command>" + "|".join(sorted(map(re.escape, OPTIONS), key=len, reverse=True)) + r")"
    r"(?:\.exe)?(?![\w.-])"
    r"""(?P<rest>(?:[^\n;|&'"`\\]|\\[^\n]|'[^'\n]*'|"(?:[^"\\\n]|\\[^\n])*")*)""")

#: The commands, as trigger substrings (``redact`` runs ``COMMAND_LINE`` only on a text that holds one).
COMMANDS: tuple[str, ...] = ("sshpass", "redis-cli", "curl", "wget", "mysql", "mariadb", "mongo", *_DOCKER_LIKE)

ENV_NAMES: tuple[str, ...] = ("PGPASSWORD", "MYSQL_PWD", "REDISCLI_AUTH", "SSHPASS")

#: ``NAME=VALUE`` (also ``NAME: VALUE``, ``$env:NAME = "VALUE"``) of a password environment variable.
ENV_ASSIGNMENT = re.compile(r"(?<![A-Za-z0-9_])(?:" + "|".join(ENV_NAMES) + r")[\"']?[ \t]*[=:][ \t]*" + _VALUE)

#: RE2 shapes (``redact``'s pre-filter) of which every ``COMMAND_LINE`` finding's line holds one: the command
#: name, then on the same line the option's text.
COMMAND_LINE_SHAPES: tuple[str, ...] = (
    r"sshpass[^\n]*-p",
    r"redis-cli[^\n]*(?:-a|--pass)",
    r"curl[^\n]*-[uU][^\n]*:",
    r"wget[^\n]*-password",
    r"(?:mysql|mariadb|mongo)[^\n]*-p",
    r"(?:" + "|".join(_DOCKER_LIKE) + r")[^\n]*(?:login|add)[^\n]*-p",
)

_NAMED = re.compile(r"[$%<{]|\*\*\*|\[REDACTED:")
_PLACEHOLDERS = frozenset({"password", "passwd", "pass", "secret", "pw", "pwd", "xxx", "xxxx", "...", "…", "-"})


def real_value(value: str) -> bool:
    """False for a value that names a password instead of holding one (``$PW``, ``${PW}``, ``%PW%``, ``<password>``,
    ``{{ pw }}``, ``***``, an already redacted value, the bare word "password") or an empty one."""
    stripped = value.strip()
    return bool(stripped) and not _NAMED.match(stripped) and stripped.lower() not in _PLACEHOLDERS


def _value_span(match: re.Match[str]) -> tuple[int, int]:
    for group in ("dq", "sq", "bare"):
        if match.group(group) is not None:
            return match.span(group)
    return match.end(), match.end()


def password_spans(text: str, command: re.Match[str]) -> Iterator[tuple[int, int]]:
    """``(start, end)`` in ``text`` of every password value on the command line ``command`` (a ``COMMAND_LINE``
    match in ``text``)."""
    options, after = OPTIONS[command.group("command")]
    start, end = command.span("rest")
    if after is not None:
        word = after.search(text, start, end)
        if word is None:
            return
        start = word.end()
    line_end = text.find("\n", start)
    line_end = len(text) if line_end == -1 else line_end
    for option in options.finditer(text, start, line_end):
        if option.start() >= end:
            break
        value_start, value_end = _value_span(option)
        if value_end > value_start and real_value(text[value_start:value_end]):
            yield value_start, value_end


def env_password_spans(text: str, assignment: re.Match[str]) -> Iterator[tuple[int, int]]:
    """The value's ``(start, end)`` in ``text`` of an ``ENV_ASSIGNMENT`` match, unless it names no password."""
    start, end = _value_span(assignment)
    if end > start and real_value(text[start:end]):
        yield start, end
