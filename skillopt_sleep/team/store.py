"""Team rule files: one member's word on one rule, as a small reviewable TOML file in a git work tree.

Layout: ``<repository>/.skillopt-sleep/team/rules/<rule id>/<member id>.toml`` (``RULES_DIR``). The rule id is
content-addressed (``team_rule_id``: a hash of the check keys of its validated checks, ``checks.check_key``), so two
members who learned the same rule, whatever their words, write into the same folder; each writes only its own file,
so their branches never conflict. A file (``RuleFile``)::

    format = "skillopt-sleep-team-rule/1"
    id = "t-3f2a9c0d1e7b"
    text = "Use pnpm, never npm."
    rationale = "stated 3 times on 2 nights; won 4 held-out tasks, lost 0"
    member = "m-1a2b3c4d"
    role = "proposed"            # or "tested": the member re-proved someone else's rule on their own tasks
    first = 2025-06-01
    updated = 2025-06-03
    checks = [                   # validated checks, the rule's identity (models.Check: op, value, case_sensitive)
        { op = "contains", value = "pnpm" },
        { op = "not_contains", value = "npm install" },
    ]

    [scope]
    repository = "shop-web"      # a name, never a path
    paths = ["web/**"]           # optional globs, relative to the repository
    languages = []

    [record]                     # this member's held-out record for the rule: counts only
    wins = 4
    losses = 0
    ties = 1

``load_rule_file`` parses strictly: unknown or missing keys, wrong types, an invalid check, an id that is not the
hash of the checks, a folder or file name that does not match the id or member: ``TeamError`` naming the file and
the key. ``screen_rule`` is what every file passes before it is written: the secret screen
(``provenance.secret_reason``) on every text field, the provenance screen on the rule's text and check values when the
user's text is given, no request text, and scope paths inside the repository.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import sys
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from skillopt_sleep.checks import INT_OPS, check_key, validate_check
from skillopt_sleep.errors import TeamError
from skillopt_sleep.fsio import write_text_atomic
from skillopt_sleep.models import Check

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

#: Where team rules live, relative to the repository's root.
RULES_DIR = PurePosixPath(".skillopt-sleep/team/rules")
FORMAT = "skillopt-sleep-team-rule/1"
#: Longest rule text and rationale (characters): a rule is one line, never a transcript.
MAX_TEXT_CHARS = 300
MAX_RATIONALE_CHARS = 200
#: A request shorter than this is not looked for in a rule file (a short request can be a rule's own words).
MIN_REQUEST_CHARS = 24
_ID = re.compile(r"t-[0-9a-f]{12}")
_MEMBER = re.compile(r"[a-z0-9][a-z0-9-]{2,31}")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
#: Keys a check table may hold.
_CHECK_KEYS = {"op", "value", "case_sensitive"}


class Record(BaseModel):
    """One member's held-out record for one rule: val tasks testing it that its candidate won, lost or tied."""

    model_config = ConfigDict(extra="forbid")

    wins: int = Field(0, ge=0)
    losses: int = Field(0, ge=0)
    ties: int = Field(0, ge=0)

    @property
    def outcome(self) -> Literal["helped", "hurt", "tied", "untested"]:
        """``helped`` (more wins than losses), ``hurt`` (more losses), ``tied`` (as many, some tested), else
        ``untested``."""
        if self.wins > self.losses:
            return "helped"
        if self.losses > self.wins:
            return "hurt"
        return "tied" if self.wins + self.ties else "untested"


class Scope(BaseModel):
    """Where a rule applies: repository (a name: the repository's folder name), optional path globs relative to it,
    optional languages (e.g. ``python``)."""

    model_config = ConfigDict(extra="forbid")

    repository: str
    paths: list[str] = Field(default_factory=list)
    languages: list[str] = Field(default_factory=list)

    @field_validator("repository")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.fullmatch(value):
            raise ValueError("a repository name (letters, digits, '.', '_', '-'), never a path")
        return value

    @field_validator("paths")
    @classmethod
    def _inside(cls, value: list[str]) -> list[str]:
        for glob in value:
            problem = path_problem(glob)
            if problem:
                raise ValueError(f"{glob!r}: {problem}")
        return value

    @field_validator("languages")
    @classmethod
    def _languages(cls, value: list[str]) -> list[str]:
        for name in value:
            if not _NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not a language name")
        return value


class RuleFile(BaseModel):
    """One team rule file (module docstring). ``checks`` are ``models.Check`` with ``origin = "team"``."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["skillopt-sleep-team-rule/1"] = FORMAT
    id: str
    text: str
    rationale: str
    member: str
    role: Literal["proposed", "tested"] = "proposed"
    first: dt.date
    updated: dt.date
    scope: Scope
    record: Record = Field(default_factory=Record)
    checks: list[Check] = Field(min_length=1)

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not _ID.fullmatch(value):
            raise ValueError("a rule id is 't-' and 12 hex digits")
        return value

    @field_validator("member")
    @classmethod
    def _member(cls, value: str) -> str:
        if not _MEMBER.fullmatch(value):
            raise ValueError("a member id is 3 to 32 lower-case letters, digits and dashes")
        return value

    @field_validator("text", "rationale")
    @classmethod
    def _one_line(cls, value: str, info: Any) -> str:
        limit = MAX_TEXT_CHARS if info.field_name == "text" else MAX_RATIONALE_CHARS
        if not value.strip() or "\n" in value or "\r" in value or len(value) > limit:
            raise ValueError(f"one non-empty line of at most {limit} characters")
        return value

    @field_validator("checks")
    @classmethod
    def _valid(cls, value: list[Check]) -> list[Check]:
        for check in value:
            problem = validate_check(check)
            if problem:
                raise ValueError(problem)
        return value

    def relative_path(self) -> PurePosixPath:
        """Where this file lives, relative to the repository's root."""
        return RULES_DIR / self.id / f"{self.member}.toml"


def path_problem(glob: str) -> str | None:
    """Why ``glob`` is not a path glob inside a repository (absolute, ``~``, a ``..`` part, a drive, a backslash),
    or None."""
    if not glob or glob.startswith(("/", "~")) or "\\" in glob or re.match(r"[A-Za-z]:", glob):
        return "must be a relative glob inside the repository"
    if ".." in PurePosixPath(glob).parts:
        return "must not leave the repository ('..')"
    return None


def team_rule_id(checks: Iterable[Check]) -> str:
    """The content-addressed id of a rule: ``t-`` + 12 hex of sha256 over its sorted check keys
    (``checks.check_key``). The same demands give the same id however they are worded. Raises ValueError for no
    checks."""
    keys = sorted({check_key(check) for check in checks})
    if not keys:
        raise ValueError("a team rule needs at least one validated check")
    digest = hashlib.sha256("\n".join(f"{kind}\x00{value}" for kind, value in keys).encode()).hexdigest()
    return "t-" + digest[:12]


def check_from_key(key: tuple[str, str] | list[str]) -> Check | None:
    """The check a check key (``checks.check_key``) demands, or None for a text key (a rule known only by its
    words) or a key no valid check gives. ``check_key(check_from_key(key)) == key`` for every key it returns a
    check for."""
    kind, value = key
    op, typed = {"has": ("contains", value), "not": ("not_contains", value)}.get(kind, (kind, value))
    if kind == "text":
        return None
    if op in INT_OPS:
        typed = int(value) if str(value).isdigit() else value
    elif op == "json_valid":
        typed = None
    try:
        check = Check(op=op, value=typed, origin="team")
    except ValidationError:
        return None
    if validate_check(check) or check_key(check) != (kind, value):
        return None
    return check


# --------------------------------------------------------------------------- reading


def _key_of(error: dict[str, Any]) -> str:
    return ".".join(str(part) for part in error.get("loc", ())) or "(top level)"


def parse_rule_file(text: str, *, where: str) -> RuleFile:
    """Parse one rule file's text strictly (module docstring). where: the file, for messages. Raises TeamError
    ``"<where>: key '<key>': <problem>"`` (or ``"<where>: not valid TOML (...)"``)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TeamError(f"{where}: not valid TOML ({exc})", fix="fix or remove the file") from None
    for index, table in enumerate(data.get("checks") or []):
        extra = set(table) - _CHECK_KEYS if isinstance(table, dict) else set()
        if extra:
            raise TeamError(f"{where}: key 'checks.{index}.{sorted(extra)[0]}': not a key of a check",
                            fix="a check has op, value and case_sensitive")
    if isinstance(data.get("checks"), list):
        data["checks"] = [{**table, "origin": "team"} if isinstance(table, dict) else table
                          for table in data["checks"]]
    try:
        rule = RuleFile.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        raise TeamError(f"{where}: key '{_key_of(error)}': {error['msg']}", fix="fix or remove the file") from None
    expected = team_rule_id(rule.checks)
    if rule.id != expected:
        raise TeamError(f"{where}: key 'id': {rule.id} is not the id of its checks ({expected})",
                        fix="a rule's id is the hash of its checks: fix the id or the checks")
    return rule


def load_rule_file(path: Path) -> RuleFile:
    """Read and parse ``<rules dir>/<id>/<member>.toml`` (``parse_rule_file``), and check that the folder is its
    id and the file name its member. Raises TeamError naming the file."""
    path = Path(path)
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TeamError(f"cannot read team rule {path}: {exc}") from None
    rule = parse_rule_file(text, where=str(path))
    if path.parent.name != rule.id:
        raise TeamError(f"{path}: key 'id': {rule.id} does not match its folder {path.parent.name}",
                        fix="a rule file lives in the folder named by its id")
    if path.stem != rule.member:
        raise TeamError(f"{path}: key 'member': {rule.member} does not match the file name {path.name}",
                        fix="a member's file is named by its member id")
    return rule


def load_rule_files(rules_dir: Path) -> list[RuleFile]:
    """Every rule file under ``rules_dir`` (``<id>/<member>.toml``; dotfiles ignored), sorted by id then member.
    [] when the folder does not exist. Raises TeamError for the first file that does not parse."""
    rules_dir = Path(rules_dir)
    if not rules_dir.is_dir():
        return []
    return [load_rule_file(path) for path in sorted(rules_dir.glob("*/*.toml")) if not path.name.startswith(".")]


class SharedRule(BaseModel):
    """One team rule as every member's files say it: the proposer's text and checks (the earliest ``proposed``
    file; else the earliest file), and each member's record (member id -> Record)."""

    id: str
    text: str
    checks: list[Check]
    scope: Scope
    proposer: str
    proposed: dt.date
    records: dict[str, Record] = Field(default_factory=dict)

    def members(self, outcome: str) -> list[str]:
        """The members whose record is ``outcome`` (``Record.outcome``)."""
        return sorted(member for member, record in self.records.items() if record.outcome == outcome)


def shared_rules(files: Iterable[RuleFile]) -> list[SharedRule]:
    """Group rule files by id (``SharedRule``), sorted by id."""
    by_id: dict[str, list[RuleFile]] = {}
    for rule in files:
        by_id.setdefault(rule.id, []).append(rule)
    out = []
    for rule_id, group in sorted(by_id.items()):
        head = min(group, key=lambda r: (r.role != "proposed", r.first, r.member))
        out.append(SharedRule(id=rule_id, text=head.text, checks=head.checks, scope=head.scope,
                              proposer=head.member, proposed=head.first,
                              records={rule.member: rule.record for rule in group}))
    return out


# --------------------------------------------------------------------------- writing


def render_rule_file(rule: RuleFile) -> str:
    """The TOML text of ``rule`` (the layout of the module docstring, keys in a fixed order)."""
    import tomli_w

    checks = []
    for check in rule.checks:
        table: dict[str, Any] = {"op": check.op}
        if check.value is not None:
            table["value"] = check.value
        if check.case_sensitive:
            table["case_sensitive"] = True
        checks.append(table)
    data = {"format": rule.format, "id": rule.id, "text": rule.text, "rationale": rule.rationale,
            "member": rule.member, "role": rule.role, "first": rule.first, "updated": rule.updated,
            "scope": rule.scope.model_dump(), "record": rule.record.model_dump(), "checks": checks}
    header = "# A team rule (skillopt-sleep team publish). Re-proved on each member's own tasks before it is used.\n"
    return header + tomli_w.dumps(data)


def write_rule_file(repository: Path, rule: RuleFile) -> Path:
    """Write ``rule`` to its place in ``repository``'s work tree (atomic, mode 0644: a file of the repository).
    Returns the path. Raises OSError when it cannot be written."""
    path = Path(repository) / rule.relative_path()
    write_text_atomic(path, render_rule_file(rule), mode=0o644)
    return path


# --------------------------------------------------------------------------- screening


def _texts(rule: RuleFile) -> list[tuple[str, str]]:
    """(key, text) of every text field of a rule file."""
    out = [("text", rule.text), ("rationale", rule.rationale), ("member", rule.member),
           ("scope.repository", rule.scope.repository)]
    out += [(f"scope.paths.{i}", glob) for i, glob in enumerate(rule.scope.paths)]
    out += [(f"scope.languages.{i}", name) for i, name in enumerate(rule.scope.languages)]
    out += [(f"checks.{i}.value", check.value) for i, check in enumerate(rule.checks) if isinstance(check.value, str)]
    return out


def screen_rule(rule: RuleFile, *, user_text: Any = None, requests: Iterable[str] = ()) -> str | None:
    """Why ``rule`` may not be written into a shared file, or None. In order: a secret (or a ``[REDACTED:...]``
    placeholder) in any text field (``provenance.secret_reason``); a command, URL, path or host in the rule's text or
    a check's value that nothing the user typed holds (``provenance.provenance_reason``; only when ``user_text``, a
    ``provenance.UserText``, is given); a field that holds one of ``requests`` (the requests of the member's tasks, of
    at least ``MIN_REQUEST_CHARS``) whole. The reason names the key and what was found, never a secret's value."""
    from skillopt_sleep.mine.provenance import provenance_reason, screen_form, secret_reason

    fields = _texts(rule)
    for key, text in fields:
        reason = secret_reason(text)
        if reason:
            return f"{key}: {reason}"
    if user_text is not None:
        for key, text in fields:
            if key == "text" or key.startswith("checks."):
                reason = provenance_reason(text, user_text)
                if reason:
                    return f"{key}: {reason}"
    wanted = [form for form in (" ".join(screen_form(r).casefold().split()) for r in requests)
              if len(form) >= MIN_REQUEST_CHARS]
    for key, text in fields:
        form = " ".join(screen_form(text).casefold().split())
        if any(request in form for request in wanted):
            return f"{key}: request: holds the text of one of your requests"
    return None
