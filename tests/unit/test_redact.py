"""Secret redaction: detect-secrets' detectors plus the structural patterns, idempotence, false positives, speed."""

from __future__ import annotations

import dataclasses
import random

import pytest

from skillopt_sleep.redaction import redact as redact_module
from skillopt_sleep.redaction.redact import redact, redact_text

# Synthetic secrets, built from pieces so no real-looking key sits in the source as one literal.
GITHUB = "ghp_" + "a1B2c3D4e5F6g7H8i9J0" * 2   # 40 characters after the prefix
ANTHROPIC = "sk-ant-api03-" + "Zx9" * 12
OPENAI_PROJECT = "sk-proj-" + "Qw3rTy" * 5
AWS_ACCESS = "AKIA" + "IOSFODNN7EXAMPLE"
SLACK = "xoxb-" + "123456789012-1234567890123-" + "abcdefghijklmnopqrstuvwx"
STRIPE = "sk_live_" + "abcdefghijklmnopqrstuvwx"
JWT = ("eyJhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0." + "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U")


SECRET_CASES = [
    (f"use {GITHUB} to push", GITHUB, "github_token"),
    (f"my key is {ANTHROPIC} ok", ANTHROPIC, "anthropic_api_key"),
    (f"export OPENAI_API_KEY={OPENAI_PROJECT}", OPENAI_PROJECT, None),
    (f"aws id {AWS_ACCESS} here", AWS_ACCESS, "aws_access_key"),
    (f"slack {SLACK}", SLACK, "slack_token"),
    (f"stripe {STRIPE}", STRIPE, "stripe_access_key"),
    (f"jwt {JWT}", JWT, None),
    (f'curl -H "Authorization: Bearer {"abcDEF123456ghiJKL789"}"', "abcDEF123456ghiJKL789", "bearer_token"),
    ("psql postgres://admin:hunter2secret@db.example.com:5432/app", "hunter2secret", "basic_auth_credentials"),
    ('config = {"api_key": "abcd1234efgh5678"}', "abcd1234efgh5678", None),
    ('password = "correct-horse-battery"', "correct-horse-battery", None),
    ("I set DB_PASSWORD=S3cr3t!pass and restarted", "S3cr3t!pass", "secret_assignment"),
    ("password: hunter22x", "hunter22x", "secret_assignment"),
    ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA==", "basic_auth_credentials"),
]
PEM_BLOCK = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7x\nq9Zt0Rw==\n-----END RSA PRIVATE KEY-----"
PEM_CUT = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n"
IDEMPOTENCE_TEXT = (f"token {GITHUB} and password = 'pa55word!x' at https://u:pw12345@host/x "
                    f"GITHUB_TOKEN={GITHUB}")
ORDINARY_TEXTS = [
    "the password: field must be required",
    "fix the secret handling in auth.py please",
    "max_tokens=512 tokenizer = AutoTokenizer.from_pretrained('x')",
    "commit 5c0375b4a57a5f4b12dd022ee4e51b7aa1b2c3d4 uuid 019a93b9-f380-7600-98ff-940e6b99603c",
    "key = os.environ.get('OPENAI_API_KEY')",
    "GITHUB_TOKEN=${{ secrets.GITHUB_TOKEN }}",
    "Assert App was constructed with token=settings.slack_bot_token",
    "/home/user/projects/temp/chatbot-ui/components/chat/chat-helpers/index.ts",
    "Endpoint http://localhost:1234/v1 is LM Studio",
    "refresh the token expiration_timestamp_field before use",
    "Basic Authentication is disabled on this server",
]


@pytest.mark.parametrize(("text", "secret", "kind"), SECRET_CASES)
def test_each_kind_of_secret_is_replaced_by_a_redaction_marker(text, secret, kind):
    redacted, count = redact(text)
    assert secret not in redacted
    assert count == 1
    assert "[REDACTED:" in redacted
    if kind is not None:
        assert f"[REDACTED:{kind}]" in redacted


def test_pem_private_key_block_spanning_lines_is_replaced_whole_and_text_after_it_survives():
    redacted, count = redact(f"here it is:\n{PEM_BLOCK}\nthanks")
    assert redacted == "here it is:\n[REDACTED:private_key]\nthanks"
    assert count == 1


def test_pem_block_cut_before_its_end_line_is_still_redacted():
    redacted, count = redact(PEM_CUT)
    assert "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ" not in redacted
    assert count == 1


def test_several_secrets_in_one_text_are_each_counted():
    redacted, count = redact(f"a {GITHUB} b {SLACK} c {AWS_ACCESS}")
    assert count == 3
    assert all(secret not in redacted for secret in (GITHUB, SLACK, AWS_ACCESS))


def test_a_key_prefix_inside_a_word_is_not_a_key_but_one_after_punctuation_is():
    # A real Roo Code transcript (examples/cline-home) pasted
    # "docs\\technical-notes\\roo-task-reassociation-analysis.md": the "sk-" of "task-..." is no API key.
    path = "docs\\technical-notes\\roo-task-reassociation-analysis.md and dask-distributed-scheduler-settings"
    assert redact(path) == (path, 0)
    for text in (f"OPENAI_API_KEY={OPENAI_PROJECT}", f"key:{ANTHROPIC}", f"({OPENAI_PROJECT})"):
        redacted, count = redact(text)
        assert count == 1 and OPENAI_PROJECT not in redacted and ANTHROPIC not in redacted


def test_redaction_is_idempotent():
    once, first_count = redact(IDEMPOTENCE_TEXT)
    twice, second_count = redact(once)
    assert first_count >= 3
    assert twice == once
    assert second_count == 0


@pytest.mark.parametrize("text", ORDINARY_TEXTS)
def test_ordinary_text_code_hashes_and_references_are_left_alone(text):
    assert redact(text) == (text, 0)


def test_redact_text_returns_only_the_text():
    assert redact_text(f"x {GITHUB}") == "x [REDACTED:github_token]"


def test_empty_text_is_returned_unchanged():
    assert redact("") == ("", 0)


# --------------------------------------------------------------------------- the pre-filter


@pytest.fixture(scope="module")
def rule_set():
    return redact_module._rule_set()


@pytest.fixture(scope="module")
def prefilter(rule_set):
    if rule_set.prefilter is None:
        pytest.skip("google-re2 is not installed, or the detector patterns changed (see redact._PATTERNS_DIGEST)")
    return rule_set.prefilter


def test_prefilter_is_active_with_the_installed_detectors():
    pytest.importorskip("re2")
    rules = redact_module._rule_set().rules
    assert redact_module._patterns_digest(rules) == redact_module._PATTERNS_DIGEST, (
        "detect-secrets changed its patterns: check redact._candidate_shapes against them, then update the digest")
    assert redact_module._rule_set().prefilter is not None


def test_every_detector_kind_is_stood_for_by_a_prefilter_shape(rule_set):
    covered = {kind for _shape, kinds in redact_module._candidate_shapes("x") for kind in kinds}
    assert {rule.kind for rule in rule_set.rules} <= covered


@pytest.mark.parametrize(("text", "kind"), [(text, kind) for text, _secret, kind in SECRET_CASES]
                         + [(PEM_BLOCK, "private_key"), (PEM_CUT, "private_key"), (IDEMPOTENCE_TEXT, None)])
def test_prefilter_lets_every_secret_case_through_to_its_detector(prefilter, text, kind):
    kinds = prefilter.kinds_in(text)
    assert kinds is None or kinds
    if kind is not None and kinds is not None:
        assert kind in kinds


@pytest.mark.parametrize("text", [
    '{"file_path":"/home/dev/proj11/src/score/test.py"}',
    '{"command":"pytest -q","description":"Run pytest -q"}',
    "I updated the token handling; all tests pass.\ntoken = self.index.get('token', 3693) + len(index)",
    "rename record to handler everywhere and update the docs — see → notes ✓",
])
def test_prefilter_keeps_ordinary_harvested_text_away_from_the_detectors(prefilter, text):
    assert prefilter.kinds_in(text) == frozenset()
    assert redact(text) == (text, 0)


def test_prefilter_classes_cover_pythons_unicode_whitespace_and_digits(prefilter):
    import re as stdlib_re

    import re2

    every_char = "".join(chr(code) for code in range(0x110000) if not 0xD800 <= code <= 0xDFFF)
    spaces = "".join(stdlib_re.findall(r"\s", every_char))
    digits = "".join(stdlib_re.findall(r"\d", every_char))
    assert re2.fullmatch(redact_module._WS + "+", spaces)
    assert re2.fullmatch(r"\p{Nd}+", digits)
    folded = [char for char in stdlib_re.findall(r"(?i)[a-z]", every_char) if not char.isascii()]
    assert folded  # K, ſ, İ, ı
    assert all(re2.fullmatch(r"(?i)[a-z]", char) or prefilter.kinds_in(char) is None for char in folded)


def test_text_with_a_lone_surrogate_is_still_redacted():
    redacted, count = redact(f"use {GITHUB} now \ud800")
    assert count == 1 and GITHUB not in redacted


def test_redaction_without_the_prefilter_gives_the_same_results(rule_set, monkeypatch):
    texts = [text for text, _secret, _kind in SECRET_CASES] + ORDINARY_TEXTS + [PEM_BLOCK, IDEMPOTENCE_TEXT]
    with_prefilter = [redact(text) for text in texts]
    monkeypatch.setattr(redact_module, "_rule_set", lambda: dataclasses.replace(rule_set, prefilter=None))
    assert [redact(text) for text in texts] == with_prefilter


def _random_texts(count: int, seed: int) -> list[str]:
    """Texts built from secret shapes, keyword assignments and ordinary words, with the variations the pre-filter
    must not trip on: letter case, Unicode spaces and digits, long values cut by keyword windows, quotes."""
    rng = random.Random(seed)
    words = ["api_key", "apikey", "secret_key", "client_secret", "auth_token", "token", "secret", "password", "passwd",
             "pwd", "passphrase", "db_pass", "key_pass", "contraseña", "aws_secret_access_key", "cloudant_password",
             "sl_api_key", "ibm_cloud_iam_api_key", "cos_hmac_secret_access_key", "bearer", "authorization", "key"]
    operators = ["=", ":", ":=", "=>", "==", "!=", " ", "::", " = ", ""]
    quotes = ['"', "'", "`", "", "]", '"]']
    spaces = [" ", "", "\t", "\xa0", "\u2003", "\x0b", "\x85", "\u3000", " " * 50]
    alphabets = ["abcdefghijklmnopqrstuvwxyz", "abcdefABCDEF0123456789", "0123456789abcdef", "ABCDEFGHIJ0123456789+/=",
                 "abc123_-", "abc.def~+/-9", "\u017f\u212a\u0130\u0131\u0663abcdef", "abc(def).$<{"]

    def run(length=None, alphabet=None):
        length = length or rng.choice([3, 6, 8, 10, 16, 20, 24, 32, 35, 36, 40, 44, 48, 64, 88, 96, 220])
        alphabet = alphabet or rng.choice(alphabets)
        return "".join(rng.choice(alphabet) for _ in range(length))

    def shaped():
        token, hexa, b64 = alphabets[1] + "_-", "0123456789abcdef", alphabets[3] + "abcxyz"
        return rng.choice([
            lambda: rng.choice(["AKC", "AP3"]) + run(12, alphabets[1]),
            lambda: rng.choice(["AKIA", "ASIA"]) + run(16, "ABCDEFGHIJ0123456789"),
            lambda: f"aws_secret_key = '{run(40, b64.replace('=', ''))}'",
            lambda: "AccountKey=" + run(88, b64),
            lambda: f"https://{run(6, alphabets[0])}:{run(12)}@db.example.com",
            lambda: "https://api.softlayer.com/soap/v3/" + run(64, alphabets[0] + "0123456789"),
            lambda: f"M{run(23, token)}.{run(6, token)}.{run(27, token)}",
            lambda: rng.choice(["ghp_", "github_pat_"]) + run(36, alphabets[1]),
            lambda: rng.choice(["glpat-", "GR1348941"]) + run(20, token),
            lambda: f"eyJ{run(10, token)}.{run(20, token)}.{run(20, token)}",
            lambda: run(32, hexa) + "-us12",
            lambda: f"//registry.npmjs.org/:_authToken={run(36, hexa)}",
            lambda: f"sk-{run(20, alphabets[1])}T3BlbkFJ{run(20, alphabets[1])}",
            lambda: rng.choice(["sk-", "sk-ant-", "sk-proj-"]) + run(rng.choice([20, 40]), token),
            lambda: "-----BEGIN RSA PRIVATE KEY-----\n" + run(64, b64),
            lambda: "pypi-AgEIcHlwaS5vcmc" + run(72, token),
            lambda: f"SG.{run(22, token)}.{run(43, token)}",
            lambda: rng.choice(["xoxb-1-", "XOXP-12-"]) + run(12, "abc123"),
            lambda: "https://hooks.slack.com/services/T1/B2/" + run(24, alphabets[1]),
            lambda: rng.choice(["sq0csp-", "sk_live_", "AIza"]) + run(43, alphabets[1]),
            lambda: "hf_" + run(34, alphabets[1]),
            lambda: rng.choice(["12345678:", "\u0663" * 8 + ":"]) + run(35, token),
            lambda: rng.choice(["AC", "SK"]) + run(32, hexa),
            lambda: rng.choice(["Bearer ", "TOKEN\xa0", "token "]) + run(24, alphabets[5] + "0123456789"),
            lambda: rng.choice(["Authorization: Basic ", "authorization=\u2003basic "]) + run(16, b64),
            lambda: rng.choice(["cloudant_password ", "ibm_cloud_iam_api_key  ", "SOFTLAYER_API_KEY "])
            + run(rng.choice([24, 44, 64]), rng.choice([alphabets[0], hexa])),
        ])()

    def assignment():
        word = rng.choice(words)
        word = rng.choice([word, word.upper(), word.title(), word.replace("s", "\u017f")])
        value = rng.choice([run(), "os.environ.get('X')", "${SECRET}", "changeme", "settings.api_token", run(130),
                            run() + "(" + run(4), "hunter2secret"])
        if rng.random() < 0.25:
            return f"{rng.choice(quotes)}{value}{rng.choice(quotes)} {rng.choice(['==', '!='])} {word}"
        return (f"{word}{rng.choice(quotes)}{rng.choice(spaces)}{rng.choice(operators)}{rng.choice(spaces)}"
                f"{rng.choice(quotes)}{value}{rng.choice(quotes + [';', ',', ')', ''])}")

    texts = []
    for _ in range(count):
        parts = [rng.choice([shaped, assignment, assignment])() for _ in range(rng.choice([1, 1, 2, 3]))]
        texts.append(rng.choice([" ", "\n", "", " " * 150]).join(parts))
    return texts


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_prefilter_never_hides_a_secret_the_detectors_would_find(rule_set, seed):
    texts = _random_texts(400, seed)
    assert sum(1 for text in texts if redact_module._redact_all(text, rule_set, None)[1]) > 60  # the test can fail
    for text in texts:
        assert redact(text) == redact_module._redact_all(text, rule_set, None), text


def test_redacting_many_texts_at_once_gives_what_redacting_each_gives():
    texts = _random_texts(60, 4) + ORDINARY_TEXTS + ["", "plain words only"]
    assert redact_module.redact_many(texts) == [redact(text) for text in texts]
    clean = ORDINARY_TEXTS[1:3] + ["plain words only"]
    assert redact_module.redact_many(clean) == [(text, 0) for text in clean]


def test_redacting_many_texts_redacts_only_the_texts_holding_a_shape(monkeypatch):
    # a shape that spans two texts once joined ("password" then "= '...'") is no secret in either of them; a clean
    # text after a text with a secret is still returned as it is
    texts = ["plain words", "password", "= 'hunter2secret'", f"use {GITHUB} now", "more plain words", "\ud800 lone"]
    expected = [redact(text) for text in texts]
    looked_at: list[str] = []
    original = redact_module.redact
    monkeypatch.setattr(redact_module, "redact", lambda text: looked_at.append(text) or original(text))
    assert redact_module.redact_many(texts) == expected
    assert redact_module.redact_many(texts[:5]) == expected[:5]
    assert "plain words" not in looked_at[len(texts):] and "more plain words" not in looked_at[len(texts):]
