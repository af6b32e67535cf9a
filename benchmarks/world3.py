"""A third learning world: rules stated the way real users state them, not as replies of their own.

A platform team (TypeScript services, shell and containers) with six rules, each stated in one of the ways real
histories show and the first two worlds do not:

* ``podman``: build and run containers with podman, never docker. Stated as **one sentence inside a longer request**
  (a 4-6 line request about something else: "We build and run containers with podman here, never docker."); twice
  the agent ignores it and the user points back ("I said podman, not docker."), once it is a short correction.
* ``force_with_lease``: "**Do not** ..." / "**Do NOT** ...": never ``git push --force``, always
  ``--force-with-lease``. Corrections ("Do NOT use --force on shared branches. Use --force-with-lease.") and a
  sentence of a request ("Do not use plain --force, use --force-with-lease.").
* ``vitest`` and ``const``: a **typed instruction block**, a bulleted list of three instructions at the top of a
  test-writing request ("Instructions:" / "- Tests use vitest, never jest." / "- Use const or let, never var." /
  a third bullet tied to that task: "- Keep it to one test file."). The block recurs, the third bullet changes.
* ``fetch``: a rule **in another language**: a Spanish-speaking teammate asks in Spanish and corrects the agent's
  axios ("no uses axios, usa siempre fetch"). The checker is deterministic (``fetch(`` and no axios), whatever the
  language of the answer.
* ``rg``: stated **once**, with "**from now on**" ("from now on use rg instead of grep, it's much faster here"),
  on night 1, as the reply to a ``grep`` the agent proposed.

Every night also holds two noise sessions; one of them carries an instruction tied to its own task ("Don't touch
the tests."), which no night should write as a house rule. The rules never change in this world (``night`` is
unused by the checkers).

Splits are a hash of the request (``mine.assign_split``, val 0.3, test 0.15). The rules' phrasings were written
first and never changed; request wordings were then varied (a "please", a detail) so that each rule has a train
session on night 1 (``rg``, stated once, too). ``write_night_sessions`` writes Claude Code 2.1.x JSONL as
``world2.session_records`` does. ``PROBES`` (24: four per rule) never appear in a transcript; ``score_probe`` is a
deterministic checker (``CHECKERS``). No LLM and no side effect at import.
"""

from __future__ import annotations

import re
from pathlib import Path

try:  # the calendar, the project folder convention and the session format the worlds share
    from benchmarks.world import night_day, night_run_time, sanitized_cwd  # noqa: F401
    from benchmarks.world2 import Probe, Session, agent, session, user, write_sessions
except ImportError:  # loaded by path beside world.py (benchmarks/peer/run_peer.py, in the peer's interpreter)
    from world import night_day, night_run_time, sanitized_cwd  # type: ignore[no-redef]  # noqa: F401
    from world2 import Probe, Session, agent, session, user, write_sessions  # type: ignore[no-redef]

NAME = "platform-team"

# --------------------------------------------------------------------------- checkers

_PODMAN = re.compile(r"\bpodman\b")
_DOCKER = re.compile(r"\bdocker(?:-compose\b|\s+(?:build|run|compose|push|pull|ps|exec|images?|tag|login|stop|rm|"
                     r"container|logs|inspect)\b)")
_LEASE = re.compile(r"--force-with-lease\b")
_FORCE = re.compile(r"--force(?![\w-])|\bgit\s+push\b[^\n`]*\s-f\b")
_VITEST = re.compile(r"\bvitest\b|\bvi\.(?:fn|mock|spyOn|useFakeTimers)\(")
_JEST = re.compile(r"\bjest\b", re.IGNORECASE)
_CONST = re.compile(r"\b(?:const|let)\s+[\w{\[]")
_VAR = re.compile(r"\bvar\s+[\w{\[]")
_FETCH = re.compile(r"\bfetch\(")
_AXIOS = re.compile(r"\baxios\b", re.IGNORECASE)
_RG = re.compile(r"\brg\s")
_GREP = re.compile(r"\bgrep\b")


def check_podman(answer: str) -> bool:
    """pass: a podman command and no docker command (``docker build``, ``docker run``, ``docker-compose``...)."""
    return bool(_PODMAN.search(answer)) and not _DOCKER.search(answer)


def check_force_with_lease(answer: str) -> bool:
    """pass: ``--force-with-lease`` and never a bare ``--force`` or ``git push ... -f``."""
    return bool(_LEASE.search(answer)) and not _FORCE.search(answer)


def check_vitest(answer: str) -> bool:
    """pass: vitest (the word, or its ``vi.fn``/``vi.mock`` helpers) and no jest."""
    return bool(_VITEST.search(answer)) and not _JEST.search(answer)


def check_const(answer: str) -> bool:
    """pass: declares with ``const`` or ``let`` and never with ``var``."""
    return bool(_CONST.search(answer)) and not _VAR.search(answer)


def check_fetch(answer: str) -> bool:
    """pass: calls ``fetch(`` and never names axios."""
    return bool(_FETCH.search(answer)) and not _AXIOS.search(answer)


def check_rg(answer: str) -> bool:
    """pass: an ``rg`` command and no ``grep`` (``git grep`` included)."""
    return bool(_RG.search(answer)) and not _GREP.search(answer)


CHECKERS = {
    "podman": check_podman,
    "force_with_lease": check_force_with_lease,
    "vitest": check_vitest,
    "const": check_const,
    "fetch": check_fetch,
    "rg": check_rg,
}
RULE_NAMES = tuple(CHECKERS)


def score_probe(probe: Probe, answer: str, night: int = 0) -> bool:
    """Score one probe answer with its rule's checker (the rules never change here: ``night`` is unused). Raises
    KeyError for an unknown rule."""
    return CHECKERS[probe.rule](answer or "")


def perfect_rules(night: int = 0) -> list[str]:
    """The world's rules, written as well as we can (for the ceiling)."""
    return ["Build and run containers with podman (`podman build`, `podman run`); never docker.",
            "Force-push only with `git push --force-with-lease`; never `--force` or `-f`.",
            "Write tests with vitest (`import { describe, it, expect } from 'vitest'`); never jest.",
            "Declare JavaScript and TypeScript variables with `const` or `let`; never `var`.",
            "Make HTTP calls with the built-in `fetch()`; never axios.",
            "Search code with ripgrep (`rg PATTERN`); never grep."]


# --------------------------------------------------------------------------- the sessions

_BLOCK = "Instructions:\n- Tests use vitest, never jest.\n- Use const or let, never var.\n- {third}\n\n{request}"
_VITEST_TEST = ("```ts\nimport {{ describe, it, expect }} from 'vitest'\nimport {{ {fn} }} from '{module}'\n\n"
                "describe('{fn}', () => {{\n  it('{case}', () => {{\n    const result = {fn}({arg})\n"
                "    expect(result).toBe({expected})\n  }})\n}})\n```")
_JEST_TEST = ("```ts\nimport {{ describe, it, expect }} from '@jest/globals'\nimport {{ {fn} }} from '{module}'\n\n"
              "describe('{fn}', () => {{\n  it('{case}', () => {{\n    const result = {fn}({arg})\n"
              "    expect(result).toBe({expected})\n  }})\n}})\n```")
_AXIOS_CODE = ("```ts\nimport axios from 'axios'\n\nexport async function {fn}() {{\n"
               "  const response = await axios.get('{url}')\n  return response.data\n}}\n```")
_FETCH_CODE = ("```ts\nexport async function {fn}() {{\n  const response = await fetch('{url}')\n"
               "  if (!response.ok) throw new Error(`HTTP ${{response.status}}`)\n  return response.json()\n}}\n```")


def _block(third: str, request: str, fn: str, module: str, case: str, arg: str, expected: str, *,
           correction: str | None = None) -> Session:
    """A test request under the typed instruction block; the agent follows it, or writes jest and is corrected."""
    text = _BLOCK.format(third=third, request=request)
    fields = dict(fn=fn, module=module, case=case, arg=arg, expected=expected)
    if correction is None:
        return session("vitest", user(text), agent(_VITEST_TEST.format(**fields)), user("thanks"))
    return session("vitest", user(text), agent(_JEST_TEST.format(**fields)), user(correction),
                   agent(_VITEST_TEST.format(**fields)))


def _spanish(request: str, fn: str, url: str, correction: str) -> Session:
    return session("fetch", user(request), agent(_AXIOS_CODE.format(fn=fn, url=url)), user(correction),
                   agent(_FETCH_CODE.format(fn=fn, url=url)))


def _force(request: str, branch: str, correction: str) -> Session:
    return session("force_with_lease", user(request), agent(f"Run `git push --force origin {branch}`."),
                   user(correction), agent(f"Run `git push --force-with-lease origin {branch}`."))


def _noise(request: str, answer: str, thanks: str = "thanks") -> Session:
    return session(None, user(request), agent(answer), user(thanks))


NIGHTS: list[list[Session]] = [
    [  # night 1
        session("podman",
                user("I'm setting up the ingest worker on the new build box.\n"
                     "It needs the image built from services/ingest/Dockerfile and tagged ingest:dev.\n"
                     "We build and run containers with podman here, never docker.\n"
                     "Then start it with port 8080 published so I can curl it.\n"
                     "What are the commands, please?"),
                agent("```sh\npodman build -t ingest:dev -f services/ingest/Dockerfile .\n"
                      "podman run -d -p 8080:8080 ingest:dev\n```"),
                user("perfect, thanks")),
        _force("I rebased feature/billing onto main, how do I update the remote branch?", "feature/billing",
               "Do NOT use --force on shared branches. Use --force-with-lease."),
        _block("Keep it to one test file.", "Write unit tests for the slugify() helper in src/utils/slug.ts.",
               "slugify", "../src/utils/slug", "lowercases and joins words with dashes", "'Hello World'",
               "'hello-world'"),
        _spanish("escribe una función que descargue el catálogo de productos de la API",
                 "downloadCatalog", "https://api.example.com/catalog", "no uses axios, usa siempre fetch"),
        session("rg", user("find every TODO comment in the repo for me"), agent("Run `grep -rn TODO .`."),
                user("from now on use rg instead of grep, it's much faster here"), agent("Run `rg -n TODO`.")),
        session("podman",
                user("The nightly report job keeps dying on the staging runner.\n"
                     "Give me the commands to rebuild its image from jobs/report/Dockerfile as report:nightly\n"
                     "and to run it once interactively so I can watch the logs.\n"
                     "Containers are podman only on our runners, docker isn't installed there.\n"
                     "Thanks."),
                agent("```sh\ndocker build -t report:nightly -f jobs/report/Dockerfile .\n"
                      "docker run --rm -it report:nightly\n```"),
                user("I said podman, not docker."),
                agent("```sh\npodman build -t report:nightly -f jobs/report/Dockerfile .\n"
                      "podman run --rm -it report:nightly\n```")),
        _noise("what does the HTTP status 409 mean?", "409 Conflict: the request conflicts with the resource's "
                                                      "current state, e.g. an edit against a stale version."),
        _noise("Rename the config loader function to loadSettings in src/config.ts. Don't touch the tests.",
               "Renamed `loadConfig` to `loadSettings` in src/config.ts and updated its two call sites."),
    ],
    [  # night 2
        session("podman",
                user("Quick one before standup.\n"
                     "I need to clean up the old images on the CI box, anything older than a week.\n"
                     "We use podman for everything container related, so no docker commands please.\n"
                     "What should I run?"),
                agent("```sh\npodman image prune --all --filter until=168h\n```"),
                user("great, thanks")),
        session("force_with_lease",
                user("I amended the last commit message on feature/search.\n"
                     "Do not use plain --force, use --force-with-lease.\n"
                     "What's the push command?"),
                agent("Run `git push --force-with-lease origin feature/search`."),
                user("thanks")),
        _block("Cover the empty string case.", "Write tests for parseDuration() in src/time/duration.ts.",
               "parseDuration", "../src/time/duration", "parses minutes", "'5m'", "300",
               correction="vitest, not jest, as the instructions say"),
        _spanish("necesito una función que mande el pedido a https://api.example.com/orders por POST",
                 "sendOrder", "https://api.example.com/orders", "aquí no usamos axios, solo fetch nativo"),
        _block("No snapshot tests.", "Add tests for the cart total calculation in src/cart/total.ts please.",
               "cartTotal", "../src/cart/total", "sums the line items", "[{ price: 2, qty: 3 }]", "6"),
        session("podman", user("how do I see which containers are running on the staging box?"),
                agent("Run `docker ps`."), user("we don't have docker here, use podman"), agent("Run `podman ps`.")),
        _noise("explain the difference between a Promise.all and Promise.allSettled",
               "`Promise.all` rejects as soon as one promise rejects; `Promise.allSettled` waits for all and "
               "reports each outcome."),
        _noise("what's a good name for a function that turns cents into a formatted price?",
               "`formatCents` or `centsToPrice` both read well."),
    ],
    [  # night 3
        session("podman",
                user("We're adding a healthcheck to the billing service image.\n"
                     "The Dockerfile is at services/billing/Dockerfile and the tag should be billing:health.\n"
                     "Build it, run it detached with the name billing-hc, and show me how to read its health status.\n"
                     "Use podman, not docker, like everywhere else here.\n"
                     "Thanks!"),
                agent("```sh\ndocker build -t billing:health -f services/billing/Dockerfile .\n"
                      "docker run -d --name billing-hc billing:health\n"
                      "docker inspect --format '{{.State.Health.Status}}' billing-hc\n```"),
                user("I said podman, not docker."),
                agent("```sh\npodman build -t billing:health -f services/billing/Dockerfile .\n"
                      "podman run -d --name billing-hc billing:health\n"
                      "podman healthcheck run billing-hc\n```")),
        _force("I squashed the fixups on feature/refunds locally, what's the push?", "feature/refunds",
               "do not force push with --force. --force-with-lease only"),
        _block("Mock the clock.", "Write tests for isExpired() in src/auth/token.ts.",
               "isExpired", "../src/auth/token", "is false before the expiry", "{ exp: 2000000000 }", "false"),
        _spanish("escribe una función que lea el inventario desde https://api.example.com/stock",
                 "readStock", "https://api.example.com/stock", "usa fetch, nunca axios por favor"),
        _block("One describe block per function.", "Write tests for the clamp() helper in src/math/clamp.ts.",
               "clamp", "../src/math/clamp", "keeps values in range", "15, 0, 10", "10",
               correction="no jest here. vitest, like the instructions say"),
        _force("my PR branch fix/timeouts is behind after the rebase, how do I update it on GitHub?",
               "fix/timeouts", "Do NOT use `git push --force`, we always use --force-with-lease"),
        _noise("how many bytes are in a UUID?", "16 bytes (128 bits); its text form is 36 characters."),
        _noise("turn this into a one-liner: if (x) { return true } else { return false }", "`return Boolean(x)`"),
    ],
    [  # night 4
        session("podman",
                user("I'm writing the runbook for the search indexer.\n"
                     "Step one rebuilds the image from services/indexer/Dockerfile as indexer:latest.\n"
                     "Step two runs it with the data volume mounted at /data.\n"
                     "Everything container related is podman, never docker.\n"
                     "Can you give me both commands?"),
                agent("```sh\npodman build -t indexer:latest -f services/indexer/Dockerfile .\n"
                      "podman run -d -v indexer-data:/data indexer:latest\n```"),
                user("thanks, that's it")),
        _force("I reworded two commits on feature/exports, now the push is rejected. what do I do?",
               "feature/exports", "Do NOT force push with --force. Use --force-with-lease."),
        _block("Keep each test under ten lines.", "Write tests for the capitalize() helper in src/utils/text.ts.",
               "capitalize", "../src/utils/text", "uppercases the first letter", "'abc'", "'Abc'"),
        _spanish("hazme una función que consulte el estado del pago en https://api.example.com/payments",
                 "paymentStatus", "https://api.example.com/payments", "otra vez axios... no uses axios, usa fetch"),
        session("podman", user("how do I tail the logs of the worker container?"),
                agent("Run `docker logs -f worker`."), user("podman, not docker"),
                agent("Run `podman logs -f worker`.")),
        _block("Test the error path too.", "Write tests for the divide() helper in src/math/divide.ts.",
               "divide", "../src/math/divide", "divides two numbers", "6, 3", "2"),
        _noise("what does the tsconfig option strictNullChecks do?",
               "It makes `null` and `undefined` their own types, so they must be handled explicitly."),
        _noise("Add a --verbose flag to scripts/deploy.sh. Don't change the other flags.",
               "Added `--verbose` (sets `set -x`) to scripts/deploy.sh; the other flags are unchanged."),
    ],
]

PROBES: list[Probe] = [
    Probe("podman", "How do I build a container image from the Dockerfile in the current folder?"),
    Probe("podman", "What command lists the containers that are running right now?"),
    Probe("podman", "Give me the command to run the redis:7 image with port 6379 published."),
    Probe("podman", "How do I push the image api:1.4 to registry.example.com?"),
    Probe("force_with_lease", "I amended my last commit; how do I update the remote branch feature/login?"),
    Probe("force_with_lease", "After an interactive rebase, what is the push command for my branch topic/cache?"),
    Probe("force_with_lease", "How do I overwrite the remote branch fix/typo with my local history?"),
    Probe("force_with_lease", "I dropped a commit locally on feature/cart. How do I publish that?"),
    Probe("vitest", "Write a unit test for a TypeScript function add(a, b)."),
    Probe("vitest", "Show a test that checks formatPrice(1234) returns '$12.34'."),
    Probe("vitest", "How do I mock a module in our unit tests?"),
    Probe("vitest", "Write a test for an async function fetchUser that rejects on a 404."),
    Probe("const", "Write a JavaScript function that sums an array of numbers."),
    Probe("const", "Write JavaScript that counts the words in a string."),
    Probe("const", "Write a JavaScript loop that builds a list of the squares of 1 to 10."),
    Probe("const", "Write a JavaScript snippet that swaps the values of two variables."),
    Probe("fetch", "Write a TypeScript function that GETs https://api.example.com/users and returns the JSON."),
    Probe("fetch", "Show how to POST a JSON body to an endpoint from Node."),
    Probe("fetch", "Write JavaScript that downloads a text file over HTTP."),
    Probe("fetch", "Call an API with an Authorization bearer header in TypeScript."),
    Probe("rg", "How do I find every file that mentions 'deprecated' in the repo?"),
    Probe("rg", "Search the codebase for the function name parseConfig."),
    Probe("rg", "What command lists the lines containing FIXME under src/?"),
    Probe("rg", "Count how many times console.log appears in the project."),
]

INITIAL_MEMORY = "# Platform\n\nTypeScript services, shell tooling and the container build for the platform team.\n"


def sessions_for(night: int) -> list[Session]:
    """The sessions of night ``night`` (1-based). Raises ValueError beyond ``len(NIGHTS)``."""
    if not 1 <= night <= len(NIGHTS):
        raise ValueError(f"the world has nights 1..{len(NIGHTS)}, got {night}")
    return NIGHTS[night - 1]


def write_night_sessions(claude_home: Path, project: Path, night: int) -> list[Path]:
    """Write night ``night``'s sessions under ``<claude_home>/projects/<sanitized project>/``; return the files."""
    return write_sessions(claude_home, project, sessions_for(night), first_seed=(night + 90) * 1000,
                          day=night_day(night))


def transcript_text() -> str:
    """Every text of every session (to prove the probes are held out)."""
    return "\n".join(" ".join([step.text, step.command, step.output]) for night in NIGHTS for item in night
                     for step in item.steps)
