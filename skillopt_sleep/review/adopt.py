"""Adopt a night's staged proposal into the project, revert it, and list what was adopted.

A night that passes the gate stages ``<night dir>/proposed/`` (see ``documents.targets.stage_proposal``): the proposed
documents, a diff beside each and ``manifest.json``. ``adopt_night`` writes them onto the live targets,
``revert_adoption`` puts the pre-adoption versions back, and both record what they did in the project's
adoption records (``<project state dir>/adoptions.json``, format ``ADOPTIONS_FORMAT``)::

    {"format": "skillopt-sleep-adoptions/1",
     "adoptions": [{"night_id", "status": "pending|adopted|reverted", "adopted_at", "reverted_at",
                    "documents": [{"kind", "target", "file", "backup", "existed_before", "sha256_before",
                                   "sha256_after", "rebased", "status": "adopted|reverted"}]}]}

Safety rules:

- Every write is atomic (``fsio.write_text_atomic``: temp file + fsync + rename): a reader, or a process killed
  at any instant, sees the old file or the new one, never a part.
- A target must resolve inside the project and be one of the configured targets; a symlink pointing elsewhere,
  a manifest edited to point elsewhere, or a proposed file that does not match its recorded sha256 is refused.
- When the live file is still the one the proposal was computed from (same sha256), the proposed file is written.
  When it changed since (the user edited it, or another night was adopted into it), the night's *change* of the
  managed block is re-applied onto it (``documents.merge.merge_block``: three-way, base = the block the night started
  from, recorded in the manifest): the user's text outside the block is kept byte for byte, a rule line already
  there is not written twice, and a line the night replaced that someone changed since is a conflict, which refuses
  the adoption naming the file and the line (the night stays staged). So staged nights add up: ``adopt_all``
  adopts every staged night oldest first, each on top of the previous, and ``adopt <night>`` leaves the others
  adoptable. (Manifests staged before the base block was recorded are re-applied only while the live block is
  byte-identical to theirs.)
- ``adoptions.json`` records an adoption as ``pending`` before the first document is written and ``adopted`` after
  the last; a ``pending`` record left by a killed process is settled by the next adopt or revert (finished when
  every document was written, rolled back from the backups otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable, Literal

from filelock import FileLock
from pydantic import BaseModel, Field, TypeAdapter

from skillopt_sleep.documents.block import ensure_block, managed_block_segments
from skillopt_sleep.documents.merge import merge_block
from skillopt_sleep.documents.targets import is_within, read_document, via_symlink
from skillopt_sleep.errors import (
    AdoptError,
    DamagedFileError,
    LiveFileChanged,
    NothingToAdopt,
    ProposalTampered,
    SleepError,
    TargetRefused,
)
from skillopt_sleep.fsio import load_json, open_atomic, write_json_atomic, write_text_atomic
from skillopt_sleep.hashing import sha256_text
from skillopt_sleep.lock import take_project_lock
from skillopt_sleep.review.staged import adoptable_nights, night_sort_key, night_status
from skillopt_sleep.state import ProjectPaths

#: The ``format`` of ``adoptions.json`` (users have these files: a change of format is a new value).
ADOPTIONS_FORMAT = "skillopt-sleep-adoptions/1"
MANIFEST_FORMAT = "skillopt-sleep-proposal/1"
#: Mode of a document that adoption creates (it is the user's project file, not private state).
NEW_DOCUMENT_MODE = 0o644


class AdoptedDocument(BaseModel):
    """One document written by an adoption. sha256 values are of the UTF-8 text; None = the file did not exist."""

    kind: str
    target: str
    """Absolute path of the live document that was written."""
    file: str
    """Name of the proposal under ``<night dir>/proposed/``."""
    backup: str | None = None
    """Copy of the live document taken before writing (None when it did not exist)."""
    existed_before: bool
    sha256_before: str | None = None
    sha256_after: str
    rebased: bool = False
    """The live file had changed since staging and the proposed managed block was re-applied onto it."""
    status: Literal["adopted", "reverted"] = "adopted"
    kept_edit: str | None = None
    """Where a forced revert saved the live document the user had edited since the adoption, before restoring the
    backup over it (``backups/<night id>/<UTC stamp>/<file>``, like the backups); None when nothing needed saving."""


class Adoption(BaseModel):
    """One adoption of one night's proposal (a night adopted, reverted and adopted again has two records)."""

    night_id: str
    status: Literal["pending", "adopted", "reverted"]
    adopted_at: datetime
    reverted_at: datetime | None = None
    forced_revert: bool = False
    documents: list[AdoptedDocument] = Field(default_factory=list)

    @property
    def targets(self) -> list[str]:
        return [document.target for document in self.documents]


#: Validates the ``adoptions`` list (errors are located as ``<index>.<field>``).
_ADOPTION_LIST = TypeAdapter(list[Adoption])

# --------------------------------------------------------------------------- adoption records (adoptions.json)


def adoptions_path(paths: ProjectPaths) -> Path:
    """``<project state dir>/adoptions.json``."""
    return paths.root / "adoptions.json"


def load_adoptions(paths: ProjectPaths) -> list[Adoption]:
    """Return the adoption records, oldest first ([] when there is none). Raises ``DamagedFileError`` naming
    ``adoptions.json`` and the first bad field when it is not valid JSON or has the wrong shape: adopt, revert and
    the night refuse to work without the record of what was adopted (revert needs it)."""
    path = adoptions_path(paths)
    return load_json(path, what="the adoption records", validate=_validate_adoptions, default=[],
                     fix=f"move it aside (mv {path} {path}.bad) to start the adoption records afresh: earlier "
                         f"adoptions can then no longer be reverted with 'skillopt-sleep revert' (their backups stay "
                         f"under {paths.backups})")


def _validate_adoptions(data: object) -> list[Adoption]:
    if not data:
        return []
    if not isinstance(data, dict):
        raise TypeError(f"expected a JSON object with 'adoptions', got {type(data).__name__}")
    records = data.get("adoptions", [])
    if not isinstance(records, list):
        raise TypeError(f"'adoptions' is a {type(records).__name__}, not a list")
    return _ADOPTION_LIST.validate_python(records)


def _save_adoptions(paths: ProjectPaths, adoptions: list[Adoption]) -> None:
    write_json_atomic(adoptions_path(paths), {"format": ADOPTIONS_FORMAT,
                                              "adoptions": [a.model_dump(mode="json") for a in adoptions]}, mode=0o600)


def active_adoption(adoptions: Iterable[Adoption], night_id: str) -> Adoption | None:
    """The record of ``night_id`` that is adopted and not reverted, if any."""
    found = None
    for adoption in adoptions:
        if adoption.night_id == night_id and adoption.status == "adopted":
            found = adoption
    return found


def protected_nights(paths: ProjectPaths) -> set[str]:
    """Night ids whose backups are still needed: adopted and not reverted, or pending."""
    return {a.night_id for a in load_adoptions(paths) if a.status in ("adopted", "pending")}


def history(paths: ProjectPaths) -> list[Adoption]:
    """Adopted and reverted nights of a project, oldest first (pending records of a killed adopt included)."""
    return load_adoptions(paths)


# --------------------------------------------------------------------------- helpers


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _live_sha(path: Path) -> str | None:
    return sha256_text(read_document(path)) if path.exists() else None


def _lock(paths: ProjectPaths) -> FileLock:
    return take_project_lock(paths, "a night (or another adopt/revert) is running for this project")


def _read_manifest(night_dir: Path) -> list[dict]:
    manifest = night_dir / "proposed" / "manifest.json"
    try:
        data = load_json(manifest, what=f"night {night_dir.name}'s proposal manifest", default=None)
    except DamagedFileError as exc:
        raise ProposalTampered(exc.message, fix="the proposal cannot be adopted; the next night proposes again") \
            from None
    if not isinstance(data, dict) or not data.get("documents"):
        raise NothingToAdopt(f"night {night_dir.name} staged no proposal ({manifest} is missing or empty)",
                             fix="only accepted nights that changed a document can be adopted")
    if data.get("format") != MANIFEST_FORMAT:
        raise ProposalTampered(f"{manifest}: unknown format {data.get('format')!r} (expected {MANIFEST_FORMAT})")
    documents = data["documents"]
    if not isinstance(documents, list) or not all(isinstance(entry, dict) for entry in documents):
        raise ProposalTampered(f"{manifest}: 'documents' is not a list of objects",
                               fix="the proposal cannot be adopted; the next night proposes again")
    return list(documents)


def _checked_target(project: Path, target: str, allowed: set[Path] | None) -> Path:
    """Return the real path to write for a manifest target, or raise TargetRefused.

    The target must be absolute, be one of ``allowed`` (when given), and resolve (symlinks followed) inside the
    project.
    """
    project = project.resolve()
    path = Path(target)
    if not path.is_absolute():
        raise TargetRefused(f"refusing to adopt: manifest target {target!r} is not an absolute path")
    if allowed is not None and path not in allowed and path.resolve() not in allowed:
        names = ", ".join(sorted(str(p) for p in allowed)) or "none"
        raise TargetRefused(f"refusing to adopt: {path} is not a configured target (configured: {names})",
                            fix="check skill_path / memory_path ('skillopt-sleep config show'): the manifest may "
                                "have been edited, or they changed since the night")
    real = path.resolve()
    if not is_within(real, project):
        what = "a symlink that points outside" if via_symlink(path, project) else "outside"
        raise TargetRefused(f"refusing to adopt: {path} is {what} the project {project} (it resolves to {real})")
    if real.exists() and not real.is_file():
        raise TargetRefused(f"refusing to adopt: {real} is not a regular file")
    return real


def _proposed_text(night_dir: Path, entry: dict) -> str:
    name = str(entry.get("file") or "")
    if not name or Path(name).name != name or name in (".", ".."):
        raise ProposalTampered(f"refusing to adopt: manifest file name {name!r} is not a plain file name")
    path = night_dir / "proposed" / name
    try:
        text = read_document(path)
    except FileNotFoundError:
        raise ProposalTampered(f"refusing to adopt: staged file {path} is missing") from None
    if sha256_text(text) != entry.get("proposed_sha256"):
        raise ProposalTampered(f"refusing to adopt: {path} does not match the sha256 recorded in the manifest "
                               "(it was modified after staging)")
    return text


def rebase_proposal(proposed: str, live: str, base_block_sha256: str | None) -> str | None:
    """Re-apply a proposal's managed block onto a live document that changed since the proposal was computed.

    proposed: the staged document; live: the current document; base_block_sha256: sha256 of the raw managed
    block of the document the proposal was computed from (None: it had no block). Returns the live document
    with its managed block replaced by the proposed one (everything outside the block kept byte for byte), or
    None when the live block is no longer the one the proposal was computed from (or is malformed).
    """
    try:
        live_parts = managed_block_segments(live)
        proposed_parts = managed_block_segments(proposed)
    except SleepError:
        return None
    if proposed_parts is None:
        return None
    live_block_sha = sha256_text(live_parts[1]) if live_parts else None
    if live_block_sha != base_block_sha256:
        return None
    if live_parts is None:
        live_parts = managed_block_segments(ensure_block(live))
        assert live_parts is not None
    before, _, after = live_parts
    return before + proposed_parts[1] + after


def _plan_document(night_dir: Path, entry: dict, real: Path) -> tuple[str, str | None, bool]:
    """Return (text to write, live text or None, rebased) for one manifest entry; raise ProposalTampered,
    TargetRefused (live file not UTF-8) or LiveFileChanged (deleted since, or a conflict, named)."""
    proposed = _proposed_text(night_dir, entry)
    live = None
    if real.exists():
        try:  # exact text, line endings kept (the night reads it the same way: documents.read_document)
            live = real.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            raise TargetRefused(f"refusing to adopt: {real} is not valid UTF-8; "
                                "skillopt-sleep never rewrites it") from None
    live_sha = sha256_text(live) if live is not None else None
    if live_sha == entry.get("live_sha256"):
        return proposed, live, False
    review = night_dir / "proposed" / f"{entry.get('file')}.diff"
    if live is None:
        raise LiveFileChanged(f"{real} was deleted since night {night_dir.name} staged its proposal; not adopting",
                              fix=f"restore it, or apply the change by hand (see {review})")
    base = _base_block(entry)
    if base is False:  # a manifest staged before the base block was recorded: the block must be unchanged
        rebased = rebase_proposal(proposed, live, entry.get("live_block_sha256", "?"))
        if rebased is not None:
            return rebased, live, True
        raise LiveFileChanged(f"{real} changed since night {night_dir.name} staged its proposal, and its managed "
                              "block changed too, so the proposal cannot be re-applied safely; not adopting",
                              fix=f"review {review} and apply it by hand, or wait for the next night (it starts "
                                  "from the new file)")
    try:
        merged = merge_block(base, proposed, live)
    except (SleepError, ValueError) as exc:
        raise LiveFileChanged(f"cannot re-apply night {night_dir.name}'s change onto {real}: {exc}; not adopting",
                              fix=f"fix the markers, or apply the change by hand (see {review})") from None
    if merged.text is None:
        raise LiveFileChanged(f"night {night_dir.name} conflicts with {real} as it is now: "
                              + "; ".join(merged.conflicts) + "; not adopting",
                              fix=f"apply the change by hand (see {review}), or leave it: the next night starts from "
                                  "the file as it is")
    return merged.text, live, True


def _base_block(entry: dict) -> str | None | bool:
    """The raw managed block the proposal was computed from (None: the file had none or did not exist), or False
    when the manifest does not say (staged before ``live_block`` was recorded)."""
    if entry.get("live_sha256") is None:
        return None
    if "live_block" not in entry:
        return False
    block = entry["live_block"]
    if block is not None and (not isinstance(block, str) or sha256_text(block) != entry.get("live_block_sha256")):
        raise ProposalTampered("refusing to adopt: the manifest's base block does not match its recorded sha256")
    return block


# --------------------------------------------------------------------------- pending records


def _settle_pending(paths: ProjectPaths, adoptions: list[Adoption]) -> list[Adoption]:
    """Finish or roll back records left ``pending`` by a killed adopt. Returns the settled list (saved)."""
    settled: list[Adoption] = []
    changed = False
    for adoption in adoptions:
        if adoption.status != "pending":
            settled.append(adoption)
            continue
        changed = True
        states = [_live_sha(Path(d.target)) for d in adoption.documents]
        if all(sha == d.sha256_after for sha, d in zip(states, adoption.documents)):
            settled.append(adoption.model_copy(update={"status": "adopted"}))
            continue
        for sha, document in zip(states, adoption.documents):  # roll back what was written
            if sha == document.sha256_after and sha != document.sha256_before:
                _restore(document)
        still = [d for d in adoption.documents if _live_sha(Path(d.target)) != d.sha256_before]
        if still:  # neither before nor after: leave the record for the user to see
            settled.append(adoption)
    if changed:
        _save_adoptions(paths, settled)
    return settled


def _keep_edited(paths: ProjectPaths, record: Adoption, stamp: str) -> dict[str, str]:
    """Save, byte for byte, every live document of ``record`` that is neither what the adoption wrote nor what it
    replaced (the user edited it since: only a forced revert gets here with one) to
    ``backups/<night id>/<stamp>/<file>``, so that restoring the backup over it loses nothing. Returns target ->
    the saved copy."""
    kept: dict[str, str] = {}
    for document in record.documents:
        target = Path(document.target)
        if _live_sha(target) in (document.sha256_after, document.sha256_before, None):
            continue
        copy = paths.backups / record.night_id / stamp / document.file
        copy.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with open_atomic(copy, mode=0o600) as handle:
            handle.write(target.read_bytes())
        kept[document.target] = str(copy)
    return kept


def _restore(document: AdoptedDocument) -> None:
    target = Path(document.target)
    if document.existed_before and document.backup:
        write_text_atomic(target, read_document(Path(document.backup)))
    elif target.exists():
        target.unlink()


# --------------------------------------------------------------------------- adopt / revert


def adoptable(paths: ProjectPaths) -> list[str]:
    """The nights ``adopt`` takes when none is named, oldest first: accepted, staged, never adopted
    (``staged.adoptable_nights`` on the adoption records; ``status`` counts the same)."""
    return adoptable_nights(paths, {a.night_id for a in load_adoptions(paths)})


def default_night_to_adopt(paths: ProjectPaths) -> str:
    """The oldest adoptable night (``adoptable``). Raises NothingToAdopt if none."""
    nights = adoptable(paths)
    if not nights:
        raise NothingToAdopt("nothing to adopt: no accepted night with a staged proposal that was not adopted yet",
                             fix="'skillopt-sleep history' lists adopted nights")
    return nights[0]


def adopt_night(project: Path, *, paths: ProjectPaths, night_id: str | None = None,
                allowed_targets: Iterable[Path] | None = None, take_lock: bool = True) -> Adoption:
    """Write night ``night_id``'s staged proposal onto the live documents, keeping a backup of each.

    project: the project directory (every target must resolve inside it). night_id: default
    ``default_night_to_adopt``. allowed_targets: the configured target paths (None: any path inside the
    project). take_lock: False when the caller already holds the project's night lock (the night itself, or
    ``adopt_all``). Another night adopted since this one was staged does not make it "older": its change is
    re-applied onto the live file as it is now (``_plan_document``).
    Backups go to ``<state dir>/backups/<night id>/<UTC stamp>/<file>``. Returns the adoption record.
    Raises (nothing written) NothingToAdopt for an unknown, unaccepted or already adopted night, TargetRefused for
    a target outside the project or not configured, ProposalTampered for a tampered proposal, LiveFileChanged for
    a live file that changed in a way the proposal cannot be re-applied to (each an ``AdoptError``); LockedError
    while a night runs.
    """
    project = Path(project).expanduser().resolve()
    allowed = {Path(p) for p in allowed_targets} if allowed_targets is not None else None
    if allowed is not None:
        allowed |= {p.resolve() for p in allowed}
    lock = _lock(paths) if take_lock else None
    try:
        adoptions = _settle_pending(paths, load_adoptions(paths))
        night_id = night_id or default_night_to_adopt(paths)
        night_dir = paths.nights / night_id
        if not night_dir.is_dir():
            raise NothingToAdopt(f"no night {night_id!r} for this project (nights are under {paths.nights})")
        if active_adoption(adoptions, night_id):
            raise NothingToAdopt(f"night {night_id} is already adopted",
                                 fix=f"'skillopt-sleep revert {night_id}' undoes it")
        status = night_status(paths, night_id)
        if status not in (None, "accepted"):
            raise NothingToAdopt(f"night {night_id} was {status}, not accepted",
                                 fix="only accepted nights can be adopted")
        entries = _read_manifest(night_dir)

        plans = []  # (entry, real path, new text, live text)
        for entry in entries:
            real = _checked_target(project, str(entry.get("target")), allowed)
            text, live, rebased = _plan_document(night_dir, entry, real)
            plans.append((entry, real, text, live, rebased))
        stamp = _now().strftime("%Y%m%dT%H%M%S%fZ")
        backup_dir = paths.backups / night_id / stamp
        record = Adoption(night_id=night_id, status="pending", adopted_at=_now(), documents=[
            AdoptedDocument(kind=str(entry.get("kind")), target=str(real), file=str(entry["file"]),
                            backup=str(backup_dir / entry["file"]) if live is not None else None,
                            existed_before=live is not None,
                            sha256_before=sha256_text(live) if live is not None else None,
                            sha256_after=sha256_text(text), rebased=rebased)
            for entry, real, text, live, rebased in plans])
        for document, (_, _, _, live, _) in zip(record.documents, plans):
            if live is not None and document.backup:
                write_text_atomic(Path(document.backup), live, mode=0o600)
        adoptions.append(record)
        _save_adoptions(paths, adoptions)  # pending: a kill from here on is settled by the next adopt/revert
        for _, real, text, live, _ in plans:
            write_text_atomic(real, text, mode=None if live is not None else NEW_DOCUMENT_MODE)
        adoptions[-1] = record.model_copy(update={"status": "adopted"})
        _save_adoptions(paths, adoptions)
        return adoptions[-1]
    finally:
        if lock is not None:
            lock.release()


@dataclass
class AdoptedAll:
    """What ``adopt_all`` did: adopted, the records written, oldest first; refused, night id -> why it was left
    staged (a conflict with the live file, a file deleted since, a tampered proposal), in night order."""

    adopted: list[Adoption] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)


def adopt_all(project: Path, *, paths: ProjectPaths,
              allowed_targets: Callable[[str], Iterable[Path] | None] | None = None) -> AdoptedAll:
    """Adopt every adoptable night (``adoptable``), oldest first, each onto the live files the previous one left
    (``adopt_night``: the night's change of the managed block is merged, a line already there is not written
    twice). A night that cannot be adopted (``AdoptError``) is reported in ``refused`` and stays staged; the others
    go on. allowed_targets: night id -> its configured target paths (None: any path inside the project). Takes
    the project lock once. Raises NothingToAdopt when no night is adoptable; LockedError while a night runs."""
    lock = _lock(paths)
    try:
        _settle_pending(paths, load_adoptions(paths))
        nights = adoptable(paths)
        if not nights:
            raise NothingToAdopt("nothing to adopt: no accepted night with a staged proposal that was not adopted "
                                 "yet", fix="'skillopt-sleep history' lists adopted nights")
        done = AdoptedAll()
        for night_id in nights:
            try:
                allowed = allowed_targets(night_id) if allowed_targets is not None else None
                done.adopted.append(adopt_night(project, paths=paths, night_id=night_id, allowed_targets=allowed,
                                                take_lock=False))
            except AdoptError as exc:
                done.refused[night_id] = str(exc)
        return done
    finally:
        lock.release()


def revert_adoption(project: Path, *, paths: ProjectPaths, night_id: str | None = None, force: bool = False,
                    take_lock: bool = True) -> Adoption:
    """Restore the documents an adoption replaced (a document it created is removed).

    night_id: default the most recently adopted, not reverted night. Each live document must still be exactly
    what the adoption wrote (sha256), else LiveFileChanged naming it, unless ``force``. A document already back
    to its pre-adoption version is left as is (so a revert killed halfway can be run again). A document the user
    edited since (only with ``force``) is first copied to ``backups/<night id>/<UTC stamp>/<file>``
    (``AdoptedDocument.kept_edit`` says where), so the user's newer text is never lost. Returns the updated
    adoption record. Raises NothingToAdopt when there is nothing to revert, AdoptError when a backup is missing,
    TargetRefused when a target is outside the project; LockedError while a night runs.
    """
    project = Path(project).expanduser().resolve()
    lock = _lock(paths) if take_lock else None
    try:
        adoptions = _settle_pending(paths, load_adoptions(paths))
        if night_id is None:
            active = [a for a in adoptions if a.status == "adopted"]
            if not active:
                raise NothingToAdopt("nothing to revert: no adopted night",
                                     fix="'skillopt-sleep history' lists adopted and reverted nights")
            record = active[-1]
        else:
            record = active_adoption(adoptions, night_id)
            if record is None:
                raise NothingToAdopt(f"night {night_id} is not adopted (or was already reverted)",
                                     fix="'skillopt-sleep history' lists adopted nights")
        for document in record.documents:
            target = Path(document.target)
            if not is_within(target.resolve(), project):
                raise TargetRefused(f"refusing to revert: {target} is outside the project {project}")
            if document.existed_before and (not document.backup or not Path(document.backup).exists()):
                raise AdoptError(f"cannot revert {target}: its backup {document.backup} is missing")
            live_sha = _live_sha(target)
            if live_sha not in (document.sha256_after, document.sha256_before) and not force:
                raise LiveFileChanged(f"{target} changed since night {record.night_id} was adopted; not reverting",
                                      fix="run 'skillopt-sleep revert --force' to restore the pre-adoption version "
                                          "anyway (your edited version is then kept as a copy beside the backups)")
        kept = _keep_edited(paths, record, _now().strftime("%Y%m%dT%H%M%S%fZ"))
        for document in record.documents:
            if _live_sha(Path(document.target)) != document.sha256_before:
                _restore(document)
        now = _now()
        updated = record.model_copy(update={
            "status": "reverted", "reverted_at": now, "forced_revert": force,
            "documents": [d.model_copy(update={"status": "reverted", "kept_edit": kept.get(d.target)})
                          for d in record.documents]})
        adoptions = [updated if a is record else a for a in adoptions]
        _save_adoptions(paths, adoptions)
        return updated
    finally:
        if lock is not None:
            lock.release()


def is_adopted(paths: ProjectPaths, night_id: str) -> bool:
    """True when ``night_id`` is adopted and not reverted."""
    return active_adoption(load_adoptions(paths), night_id) is not None


__all__ = [
    "AdoptedAll", "AdoptedDocument", "Adoption", "active_adoption", "adopt_all", "adopt_night", "adoptable",
    "adoptions_path", "default_night_to_adopt",
    "history", "is_adopted", "load_adoptions", "night_sort_key", "protected_nights", "rebase_proposal",
    "revert_adoption",
]
