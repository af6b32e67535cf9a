"""``team pull --from-peer FILE``: the rules a SkillOpt-Sleep user exported, taken in as team rules to re-prove.

The closest peer, SkillOpt-Sleep (github.com/microsoft/SkillOpt), exports the rules its gate accepted with
``skillopt-sleep export-rules`` as a JSON "community rules" manifest. Its format 1 is specified in that repository's
``docs/sleep/community-rules.md`` (read there at commit 73fa811; the PyPI release ``skillopt`` 0.2.0 predates it and
has no ``export-rules``). Every key below is required and no other key is allowed:

* the file: ``schema`` = ``"skillopt.community-rules"``, ``schema_version`` = ``1``, ``license`` (text), ``rules``
  (1 to ``MAX_RULES`` entries);
* each rule: ``id`` (1 to 128 of ``A-Z a-z 0-9 . _ : -``, unique in the file), ``category``, ``rule`` (its text),
  ``rationale``, ``observed_effect``;
* ``observed_effect``: ``metric`` (text), ``baseline``, ``candidate``, ``delta`` (finite numbers), ``sample_size``
  (an integer >= 1) and ``scope`` = ``"candidate_set"``: what the exporter's gate measured for its whole candidate
  set, on its tasks.

``read_peer_manifest`` parses a file strictly (``PeerManifest``); a file that is not such a manifest raises
``TeamError`` naming the file and the key, before anything is written. ``import_peer_rules`` makes each rule a team
rule file (``store.RuleFile``) of the member ``PEER_MEMBER``:

* its text: the rule on one line (white space runs made one space); a rule longer than a team rule's line
  (``store.MAX_TEXT_CHARS``) is skipped;
* its checks: what this project's deterministic rule reader derives from the text
  (``grammar.statements.checks_for_rule``; the manifest carries none); a rule from which no valid check is derived is
  skipped, since a team rule is known by its checks (``store.team_rule_id``);
* an empty held-out record: the exporter's effect was measured elsewhere and is never counted as a member's evidence;
  the rationale names the manifest's rule id and license.

A secret in a rule's text blocks it first, whether or not a check can be derived from it; each file then passes the
screen ``team publish`` applies (``store.screen_rule``: a secret in any field; a command, URL, path or host that
nothing this member typed holds; the text of one of the member's requests): a hit blocks that rule, with the reason
(the rule's text is shown with its secrets redacted). A rule whose team id the rules folder holds already is left
alone (``present``). The rest are written into the team rules folder (``location.locate``: the project's work tree,
or the rules repository's clone), where every night finds them like any other team rule and gates them on this
member's own val tasks (``team.night``). Nothing is written into a document here, and no rule is adopted without
that gate.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, FiniteFloat, StringConstraints, ValidationError, field_validator

from skillopt_sleep.errors import TeamError
from skillopt_sleep.paths import ProjectPaths
from skillopt_sleep.team.location import TeamLocation, locate
from skillopt_sleep.team.night import TeamNight, preview_team_night
from skillopt_sleep.team.publish import _requests, _scope_name
from skillopt_sleep.team.store import (
    MAX_TEXT_CHARS,
    Record,
    RuleFile,
    Scope,
    _key_of,
    load_rule_files,
    screen_rule,
    team_rule_id,
    write_rule_file,
)

#: The manifest's ``schema`` and ``schema_version`` this reader knows.
PEER_SCHEMA = "skillopt.community-rules"
PEER_SCHEMA_VERSION = 1
#: The member id of imported rule files: where a team rule came from when no member of the team proposed it.
PEER_MEMBER = "peer-skillopt"
#: Bounds of a manifest: rules in one file, characters of a rule and of a rationale, bytes of the file.
MAX_RULES = 100
MAX_RULE_CHARS = 4000
MAX_RATIONALE_CHARS = 2000
MAX_MANIFEST_BYTES = 2_000_000
#: Characters of the manifest's license named in a rule file's rationale.
LICENSE_SHOWN_CHARS = 40

_Short = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=128)]


class PeerEffect(BaseModel):
    """``observed_effect``: the exporter's measurement (module docstring). Read, shown, never counted here."""

    model_config = ConfigDict(extra="forbid", strict=True)

    metric: _Short
    baseline: FiniteFloat
    candidate: FiniteFloat
    delta: FiniteFloat
    sample_size: int = Field(ge=1)
    scope: Literal["candidate_set"]


class PeerRule(BaseModel):
    """One rule of the manifest (module docstring)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    id: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._:-]{1,128}$")]
    category: _Short
    rule: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_RULE_CHARS)]
    rationale: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_RATIONALE_CHARS)]
    observed_effect: PeerEffect


class PeerManifest(BaseModel):
    """A SkillOpt-Sleep community-rules manifest, format 1 (module docstring)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    schema_: Literal["skillopt.community-rules"] = Field(alias="schema")
    schema_version: int
    license: _Short
    rules: list[PeerRule] = Field(min_length=1, max_length=MAX_RULES)

    @field_validator("schema_version")
    @classmethod
    def _version(cls, value: int) -> int:
        if value != PEER_SCHEMA_VERSION:
            raise ValueError(f"format {value} is not supported (this reader knows {PEER_SCHEMA_VERSION})")
        return value


def read_peer_manifest(path: Path) -> PeerManifest:
    """Read and parse the manifest at ``path`` strictly (module docstring). Raises TeamError ``"<path>: key '<key>':
    <problem>"`` (the key as a dotted path, e.g. ``rules.0.observed_effect.scope``), or ``"<path>: not valid JSON
    (...)"``, or ``"cannot read ... <path>"``."""
    path = Path(path)
    fix = "export it again with SkillOpt-Sleep's 'export-rules' (format 1), or fix the key"
    try:
        if path.stat().st_size > MAX_MANIFEST_BYTES:
            raise TeamError(f"{path}: larger than {MAX_MANIFEST_BYTES} bytes: not a rules manifest", fix=fix)
        data = json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise TeamError(f"cannot read the rules manifest {path}: {exc}") from None
    except ValueError as exc:
        raise TeamError(f"{path}: not valid JSON ({exc})", fix=fix) from None
    try:
        manifest = PeerManifest.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        raise TeamError(f"{path}: key '{_key_of(error)}': {error['msg']}", fix=fix) from None
    seen: set[str] = set()
    for index, rule in enumerate(manifest.rules):
        if rule.id in seen:
            raise TeamError(f"{path}: key 'rules.{index}.id': {rule.id} appears twice", fix=fix)
        seen.add(rule.id)
    return manifest


class PeerRuleResult(BaseModel):
    """What became of one rule of the manifest. peer_id: its id in the manifest; text: its text on one line (a secret
    in it shown redacted); status: ``imported`` (written to ``path``, relative to the repository's root),
    ``present`` (the rules folder holds a team rule with its id), ``blocked`` (the screen's ``reason``) or
    ``skipped`` (no check derived, or longer than a team rule's line: ``reason``); rule_id: its team rule id (None
    when no check was derived)."""

    peer_id: str
    text: str
    status: Literal["imported", "present", "blocked", "skipped"]
    rule_id: str | None = None
    path: str | None = None
    reason: str = ""


class PeerImport(BaseModel):
    """What ``import_peer_rules`` did: the manifest (as given) and its license, where the rules went, each rule's
    result in the manifest's order, and what the next night will gate (``night.preview_team_night``; None: not
    computed)."""

    manifest: str
    license: str
    location: TeamLocation
    rules: list[PeerRuleResult] = Field(default_factory=list)
    preview: TeamNight | None = None

    def count(self, status: str) -> int:
        """How many rules have ``status``."""
        return sum(1 for rule in self.rules if rule.status == status)


def _member_texts(paths: ProjectPaths) -> tuple[Any, list[str]]:
    """(``provenance.UserText`` of what the member typed, the requests of their tasks), from the task archive."""
    from skillopt_sleep.archive.tasks import TaskArchive
    from skillopt_sleep.mine.provenance import UserText

    if not paths.archive.exists():
        return UserText([]), []
    archive = TaskArchive(paths.archive)
    try:
        return UserText(archive.authored_texts()), _requests(archive)
    finally:
        archive.close()


def peer_rule_file(rule: PeerRule, *, license_id: str, repository: str, today: dt.date) -> RuleFile | str:
    """The team rule file for ``rule`` (module docstring), or why there is none (a reason to show). repository: the
    scope's repository name."""
    from skillopt_sleep.checks import validate_check
    from skillopt_sleep.grammar.statements import checks_for_rule

    text = " ".join(rule.rule.split())
    if len(text) > MAX_TEXT_CHARS:
        return f"longer than a team rule's one line ({len(text)} > {MAX_TEXT_CHARS} characters)"
    checks = [check.model_copy(update={"origin": "team", "rule": None}) for check in checks_for_rule(text)]
    checks = [check for check in checks if validate_check(check) is None]
    if not checks:
        return "no check can be derived from its text (a team rule is known by its checks)"
    licensed = " ".join(license_id.split())[:LICENSE_SHOWN_CHARS]
    return RuleFile(id=team_rule_id(checks), text=text, member=PEER_MEMBER, role="proposed", first=today,
                    updated=today, scope=Scope(repository=repository), record=Record(), checks=checks,
                    rationale=f"imported from a SkillOpt-Sleep rules manifest (its rule {rule.id}, license "
                              f"{licensed}); its reported effect is not counted here")


def _shown(text: str) -> str:
    from skillopt_sleep.redaction.redact import redact

    return redact(" ".join(text.split()))[0]


def import_peer_rules(project: Path, config: Any, manifest_path: Path, *, paths: ProjectPaths | None = None,
                      today: dt.date | None = None, state_root: Path | None = None,
                      preview: bool = True) -> PeerImport:
    """Take the rules of the manifest at ``manifest_path`` in as team rule files of ``project`` (module docstring)
    and, with ``preview``, say what the next night will gate. config: a ``SleepConfig`` (``team_repo``,
    ``skill_path``, ``memory_path``). Raises TeamError (the manifest, before anything is written; git: not a work
    tree, a failed pull of the rules repository) and OSError (a rule file that cannot be written: the files written
    before it stay, each whole)."""
    from skillopt_sleep.mine.provenance import secret_reason

    manifest = read_peer_manifest(Path(manifest_path).expanduser())
    project = Path(project).expanduser().resolve()
    paths = paths or ProjectPaths(project, state_root)
    today = today or dt.date.today()
    location = locate(project, config.team_repo, sync=True, state_root=state_root)
    present = {rule.id for rule in load_rule_files(location.rules_dir)}
    user_text, requests = _member_texts(paths)
    result = PeerImport(manifest=str(manifest_path), license=manifest.license, location=location)
    for rule in manifest.rules:
        secret = secret_reason(rule.rule)
        if secret:  # blocked whether or not a check can be derived from it
            result.rules.append(PeerRuleResult(peer_id=rule.id, text=_shown(rule.rule), status="blocked",
                                               reason=f"text: {secret}"))
            continue
        made = peer_rule_file(rule, license_id=manifest.license, repository=_scope_name(location.project_name),
                              today=today)
        if isinstance(made, str):
            result.rules.append(PeerRuleResult(peer_id=rule.id, text=_shown(rule.rule), status="skipped",
                                               reason=made))
            continue
        entry = PeerRuleResult(peer_id=rule.id, text=_shown(made.text), status="imported", rule_id=made.id)
        reason = screen_rule(made, user_text=user_text, requests=requests)
        if reason:
            entry.status, entry.reason = "blocked", reason
        elif made.id in present:
            entry.status, entry.reason = "present", "the team rules folder holds this rule already"
        else:
            write_rule_file(location.repository, made)
            entry.path = str(made.relative_path())
            present.add(made.id)
        result.rules.append(entry)
    if preview:
        result.preview = preview_team_night(project, config, paths=paths, state_root=state_root)
    return result
