"""The ``git`` CLI in a subprocess: the few operations team rules need, each a small function.

Every call runs ``git -C <repository> ...`` with ``GIT_TERMINAL_PROMPT=0`` (a push or fetch that needs a password
fails instead of waiting on a prompt) and a timeout; a failure is a ``TeamError`` naming the command and git's
message. ``commit_files`` builds a commit from a base commit and a set of files through a private index
(``GIT_INDEX_FILE``) and points a new branch at it: the member's checkout, index and current branch are never
touched, so uncommitted work is safe.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from skillopt_sleep.errors import TeamError

#: Seconds one git command may take (a push or fetch over a slow link included).
GIT_TIMEOUT_S = 300.0


def git(repository: Path, *args: str, input_text: str | None = None, env: dict[str, str] | None = None,
        timeout: float = GIT_TIMEOUT_S) -> str:
    """Run ``git -C repository args...`` and return its stdout without the trailing newline. Raises TeamError when
    git is missing, times out or exits non-zero (the message names the command and git's stderr)."""
    command = ["git", "-C", str(repository), *args]
    try:
        done = subprocess.run(command, input=input_text, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "GIT_TERMINAL_PROMPT": "0", **(env or {})}, check=False)
    except FileNotFoundError:
        raise TeamError("git is not installed", fix="install git; team rules are shared through it") from None
    except subprocess.TimeoutExpired:
        raise TeamError(f"'git {' '.join(args)}' took more than {timeout:.0f} s") from None
    if done.returncode != 0:
        message = (done.stderr or done.stdout).strip().splitlines()
        raise TeamError(f"'git {' '.join(args)}' failed in {repository}: {message[-1] if message else done.returncode}")
    return done.stdout.rstrip("\n")


def toplevel(path: Path) -> Path:
    """The root of the git work tree holding ``path``. Raises TeamError when it is in none."""
    try:
        return Path(git(path, "rev-parse", "--show-toplevel")).resolve()
    except TeamError as exc:
        raise TeamError(f"{path} is not in a git work tree ({exc.message})",
                        fix="run it in the project's git checkout, or set team_repo ('team init --repo URL')") from None


def current_branch(repository: Path) -> str | None:
    """The checked-out branch, or None on a detached HEAD."""
    name = git(repository, "rev-parse", "--abbrev-ref", "HEAD")
    return None if name == "HEAD" else name


def has_commits(repository: Path) -> bool:
    """Whether HEAD points at a commit (False in a fresh or empty repository)."""
    try:
        git(repository, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    except TeamError:
        return False
    return True


def upstream(repository: Path) -> str | None:
    """The upstream of the current branch (``origin/main``), or None when it has none."""
    try:
        return git(repository, "rev-parse", "--abbrev-ref", "--symbolic-full-name", "@{upstream}")
    except TeamError:
        return None


def branch_exists(repository: Path, name: str) -> bool:
    """Whether a local branch ``name`` exists."""
    try:
        git(repository, "rev-parse", "--verify", "--quiet", f"refs/heads/{name}")
    except TeamError:
        return False
    return True


def branch_names(repository: Path) -> set[str]:
    """The names of the local branches and of the remote-tracking ones without their remote (``origin/x`` -> ``x``),
    as last fetched. Raises TeamError when git fails."""
    names = set()
    for ref in git(repository, "for-each-ref", "--format=%(refname)", "refs/heads", "refs/remotes").splitlines():
        if ref.startswith("refs/heads/"):
            names.add(ref.removeprefix("refs/heads/"))
        elif ref.count("/") >= 3:  # refs/remotes/<remote>/<name>
            names.add(ref.split("/", 3)[3])
    return names


def commit_files(repository: Path, *, branch: str, base: str | None, files: dict[str, str], message: str) -> str:
    """Create branch ``branch`` at a new commit: ``base``'s tree (None: an empty tree, no parent) with ``files``
    (path relative to the root, POSIX -> text) added or replaced, committed with ``message`` by the repository's
    configured identity. The work tree, the index and the current branch are untouched. Returns the commit's sha.
    Raises TeamError when the branch exists, no identity is configured, or a git command fails."""
    if branch_exists(repository, branch):
        raise TeamError(f"branch {branch} already exists in {repository}",
                        fix=f"delete it ('git branch -D {branch}') or publish again")
    with tempfile.TemporaryDirectory(prefix="skillopt-sleep-index-") as scratch:
        env = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
        if base is not None:
            git(repository, "read-tree", base, env=env)
        for path, text in sorted(files.items()):
            blob = git(repository, "hash-object", "-w", "--stdin", input_text=text, env=env)
            git(repository, "update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", env=env)
        tree = git(repository, "write-tree", env=env)
    parents = ["-p", base] if base is not None else []
    commit = git(repository, "commit-tree", tree, *parents, "-F", "-", input_text=message)
    git(repository, "branch", branch, commit)
    return commit


def push(repository: Path, branch: str, *, remote: str | None = None) -> str:
    """Push ``branch`` to ``remote`` (default: the remote of the current branch's upstream, else ``origin``) and set
    its upstream. Returns the remote's name. Raises TeamError when the push fails."""
    if remote is None:
        tracked = upstream(repository)
        remote = tracked.split("/", 1)[0] if tracked else "origin"
    git(repository, "push", "--set-upstream", remote, f"refs/heads/{branch}:refs/heads/{branch}")
    return remote


def clone(source: str, destination: Path) -> None:
    """Clone ``source`` (a path or URL) into ``destination`` (which must not exist). Raises TeamError."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    git(destination.parent, "clone", "--quiet", source, str(destination))


def pull(repository: Path) -> None:
    """Fetch the current branch's remote and fast-forward to its upstream (a rules repository's clone under the
    state dir, where nothing is committed on the checked-out branch). Nothing to do on a branch without upstream or
    a remote without commits. Raises TeamError when the fetch fails or the branch cannot be fast-forwarded."""
    git(repository, "fetch", "--quiet", "--prune")
    if upstream(repository) is not None:
        git(repository, "merge", "--ff-only", "--quiet", "@{upstream}")
