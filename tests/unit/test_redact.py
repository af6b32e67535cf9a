"""Secret redaction: detect-secrets' detectors plus the structural patterns, idempotence, false positives, speed."""

from __future__ import annotations

import time

import pytest

from skillopt_sleep.redact import redact, redact_text

# Synthetic secrets, built from pieces so no real-looking key sits in the source as one literal.
GITHUB = "ghp_" + "a1B2c3D4e5F6g7H8i9J0" * 2   # 40 characters after the prefix
ANTHROPIC = "sk-ant-api03-" + "Zx9" * 12
OPENAI_PROJECT = "sk-proj-" + "Qw3rTy" * 5
AWS_ACCESS = "AKIA" + "IOSFODNN7EXAMPLE"
SLACK = "xoxb-" + "123456789012-1234567890123-" + "abcdefghijklmnopqrstuvwx"
STRIPE = "sk_live_" + "abcdefghijklmnopqrstuvwx"
JWT = ("eyJhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0." + "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U")


@pytest.mark.parametrize(("text", "secret", "kind"), [
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
])
def test_each_kind_of_secret_is_replaced_by_a_redaction_marker(text, secret, kind):
    redacted, count = redact(text)
    assert secret not in redacted
    assert count == 1
    assert "[REDACTED:" in redacted
    if kind is not None:
        assert f"[REDACTED:{kind}]" in redacted


def test_pem_private_key_block_spanning_lines_is_replaced_whole_and_text_after_it_survives():
    block = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7x\nq9Zt0Rw==\n-----END RSA PRIVATE KEY-----"
    redacted, count = redact(f"here it is:\n{block}\nthanks")
    assert redacted == "here it is:\n[REDACTED:private_key]\nthanks"
    assert count == 1


def test_pem_block_cut_before_its_end_line_is_still_redacted():
    redacted, count = redact("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n")
    assert "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ" not in redacted
    assert count == 1


def test_several_secrets_in_one_text_are_each_counted():
    redacted, count = redact(f"a {GITHUB} b {SLACK} c {AWS_ACCESS}")
    assert count == 3
    assert all(secret not in redacted for secret in (GITHUB, SLACK, AWS_ACCESS))


def test_redaction_is_idempotent():
    text = (f"token {GITHUB} and password = 'pa55word!x' at https://u:pw12345@host/x "
            f"GITHUB_TOKEN={GITHUB}")
    once, first_count = redact(text)
    twice, second_count = redact(once)
    assert first_count >= 3
    assert twice == once
    assert second_count == 0


@pytest.mark.parametrize("text", [
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
])
def test_ordinary_text_code_hashes_and_references_are_left_alone(text):
    assert redact(text) == (text, 0)


def test_redact_text_returns_only_the_text():
    assert redact_text(f"x {GITHUB}") == "x [REDACTED:github_token]"


def test_empty_text_is_returned_unchanged():
    assert redact("") == ("", 0)


def test_redaction_is_fast_enough_for_every_harvested_text():
    # A 5 KB chunk of code-like text with keyword hits and long tokens, the costly case for the keyword regexes.
    line = ('    api_key_name = settings.openai_api_key  # see https://example.com/docs/path/to/page.html\n'
            '    result = client.call(token_count=512, secret_name="display-name", retries=3)\n')
    text = line * 30
    start = time.perf_counter()
    for _ in range(100):
        redact(text)
    elapsed = time.perf_counter() - start
    assert elapsed < 3.0, f"100 redactions of 5 KB took {elapsed:.2f}s"
