"""Secret redaction for every text a harvest stores (requests, answers, tool inputs and errors, feedback).

Four layers, applied to the same text and merged into one pass of replacements:

* detect-secrets' own detector regexes (the ``RegexBasedDetector`` plugins: AWS, GitHub, GitLab, Slack, Stripe,
  OpenAI, JWT, private-key headers, basic-auth URLs, SendGrid, Twilio, Discord, ...) plus its ``KeywordDetector``
  assignment regexes in the quotes-required form (``password = "..."``, ``"api_key": "..."``). The high-entropy
  detectors (they flag every git SHA and UUID) and the public-IP detector (an address is not a secret) are not used.
* structural patterns the library lacks: ``sk-``/``sk-ant-`` API keys, ``ghp_``/``github_pat_`` tokens of any
  length, ``Bearer``/``Basic`` authorization values, unquoted ``NAME_TOKEN=value`` / ``password: value``
  assignments (also escaped as in JSON inside a JSON string), ``user:password@`` in URLs (also with an empty
  user: ``redis://:password@``), and PEM private-key blocks spanning lines (with or without their END line).
* token shapes of common providers (``_PROVIDER_TOKENS``): Docker ``dckr_pat_``, npm ``npm_``, Stripe test keys
  and webhook secrets, whole three-part JWTs, Google OAuth tokens and client secrets, Slack app tokens, Shopify,
  DigitalOcean, Linear, Atlassian, Groq, Replicate, Perplexity, Tavily, xAI, New Relic, Vault, Doppler, Postman,
  age, Grafana, Sentry, Databricks, Pulumi, PlanetScale; Azure connection-string keys (``AccountKey=``,
  ``SharedAccessKey=``, ``SharedAccessSignature=``) and the signatures of pre-signed URLs (``sig=``,
  ``X-Amz-Signature=``).
* passwords typed on a command line, keyed by the command (``credential_args``): ``sshpass -p``,
  ``docker login -p``, ``mysql -pVALUE`` / ``--password``, ``mongosh -p``, ``redis-cli -a``, ``curl -u user:VALUE``,
  ``wget --password``, and ``PGPASSWORD=`` / ``MYSQL_PWD=`` / ``REDISCLI_AUTH=`` / ``SSHPASS=`` assignments.

Each secret becomes ``[REDACTED:<kind>]``, e.g. ``[REDACTED:github_token]``. Redaction is idempotent: a redacted
text contains nothing that is redacted again.

Speed: a pre-filter runs first (``_candidate_shapes``, one RE2 set, google-re2): for every detector pattern it
holds a shape that each match of that pattern contains (its literal prefix and what must follow, or its keyword
followed by an assignment), so a text in which no shape matches cannot hold a secret and is returned as it is
(nearly all harvested texts: ~2 us each, and ``redact_many`` checks many texts in one pass); a text in which some
shapes match runs only the detectors of those shapes. The pre-filter is used only while the detector patterns are
exactly the ones its shapes were derived from (``_PATTERNS_DIGEST``) and google-re2 is installed; otherwise every
text takes the full pass. In the full pass, cheap tests must pass before a pattern runs: one of its trigger
substrings is present, the text has a whitespace-free run long enough to hold that kind of secret, and
keyword-anchored patterns scan only a small window around each keyword hit (one line at most). The detectors are
built once per process (``prepare()``; detect-secrets is imported lazily; ~0.15 s).
"""

from __future__ import annotations

import hashlib
import re
from bisect import bisect_right
from dataclasses import dataclass, field
from functools import cache
from typing import Callable, Iterable, Pattern

from skillopt_sleep.redaction import credential_args

REDACTED_PREFIX = "[REDACTED:"

# A value we never treat as a secret in an assignment (placeholders, code, already-redacted text).
_PLACEHOLDER_VALUES = frozenset({
    "none", "null", "true", "false", "undefined", "nil", "str", "string", "int", "bytes", "optional", "secret",
    "password", "changeme", "example", "redacted", "xxxxxx", "********", "hidden", "required", "your_api_key",
})


@dataclass(frozen=True)
class _Rule:
    """One pattern: ``group`` 0 replaces the whole match, n replaces only group n (the secret value)."""

    kind: str
    pattern: Pattern[str]
    group: int = 0
    triggers: tuple[str, ...] = ()
    """Substrings of which at least one must be in the text (case-sensitive); empty = always run."""
    lower_triggers: tuple[str, ...] = ()
    """Like ``triggers`` but tested against the lower-cased text."""
    accept: Callable[[str], bool] | None = None
    """Extra test on the matched secret value (False = not a secret)."""
    min_token: int = 0
    """Run only when the text has a whitespace-free run at least this long (a secret of that shape fits)."""
    windowed: bool = False
    """Keyword-anchored pattern: run only on the lines around a keyword hit (these regexes are costly on long
    texts, so they never scan a whole document)."""
    window_needs: tuple[str, ...] = ()
    """Characters of which a window must hold one for the pattern to match there (quotes, ``=`` or ``:``)."""
    values: Callable[[str, re.Match[str]], Iterable[tuple[int, int]]] | None = None
    """Where the secrets of one match are, as ``(start, end)`` in the text (replaces ``group``): a command line
    holds any number of password options."""


def _kind_from_secret_type(secret_type: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", secret_type.lower()).strip("_")


# detect-secrets plugin class name -> (group holding the secret (0 = whole match), trigger substrings,
# lower-case trigger substrings, shortest whitespace-free run the secret needs)
_LIBRARY_DETECTORS: dict[str, tuple[int, tuple[str, ...], tuple[str, ...], int]] = {
    "ArtifactoryDetector": (0, ("AKC", "AP"), (), 11),
    "AWSKeyDetector": (0, ("A3T", "ABIA", "ACCA", "AKIA", "ASIA"), ("aws",), 20),
    "AzureStorageKeyDetector": (0, ("AccountKey=",), (), 88),
    "BasicAuthDetector": (1, ("://",), (), 8),
    "CloudantDetector": (1, (), ("cl",), 24),
    "DiscordBotTokenDetector": (0, (), (), 59),
    "GitHubTokenDetector": (0, ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), (), 40),
    "GitLabTokenDetector": (0, ("glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "GR1348941", "glcbt-", "glimt-",
                                "glptt-", "glagent-", "gloas-"), (), 20),
    "IbmCloudIamDetector": (1, (), ("key", "pwd", "pass", "token"), 44),
    "IbmCosHmacDetector": (1, (), ("secret",), 48),
    "JwtTokenDetector": (0, ("eyJ",), (), 16),
    "MailchimpDetector": (0, ("-us",), (), 36),
    "NpmDetector": (1, ("_authToken",), (), 20),
    "OpenAIDetector": (0, ("T3BlbkFJ",), (), 51),
    "PrivateKeyDetector": (0, ("PRIVATE KEY", "PuTTY-User-Key-File"), (), 0),
    "PypiTokenDetector": (0, ("pypi-",), (), 70),
    "SendGridDetector": (0, ("SG.",), (), 69),
    "SlackDetector": (0, ("xox", "hooks.slack.com"), (), 8),
    "SoftlayerDetector": (1, (), ("softlayer", "sl"), 64),
    "SquareOAuthDetector": (0, ("sq0csp-",), (), 50),
    "StripeDetector": (0, ("k_live_",), (), 32),
    "TelegramBotTokenDetector": (0, tuple(f"{digit}:" for digit in range(10)), (), 44),
    "TwilioKeyDetector": (0, ("AC", "SK"), (), 34),
}


# Library detectors whose regexes start with a keyword alternation or a look-behind (no literal prefix).
_KEYWORD_ANCHORED = frozenset({"AWSKeyDetector", "CloudantDetector", "IbmCloudIamDetector", "IbmCosHmacDetector",
                               "SoftlayerDetector"})
_ANCHOR_WORDS = ("key", "pass", "pwd", "secret", "token", "contras", "aws", "softlayer", "cloudant")
_WINDOW_BEFORE = 48
_WINDOW_AFTER = 200


def _keyword_windows(text: str, lowered: str) -> list[tuple[int, int]]:
    """Merged ``(start, end)`` windows of ``text`` around every anchor keyword, bounded by the line."""
    windows: list[tuple[int, int]] = []
    for word in _ANCHOR_WORDS:
        position = lowered.find(word)
        while position != -1:
            line_start = text.rfind("\n", 0, position) + 1
            line_end = text.find("\n", position)
            if line_end == -1:
                line_end = len(text)
            windows.append((max(line_start, position - _WINDOW_BEFORE), min(line_end, position + _WINDOW_AFTER)))
            position = lowered.find(word, position + len(word))
    if not windows:
        return windows
    windows.sort()
    merged = [windows[0]]
    for start, end in windows[1:]:
        if start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


_CODE_REFERENCE = re.compile(r"[A-Za-z_]+(?:\.[A-Za-z_]+)+|[A-Za-z]+(?:_[A-Za-z]+)+")


def _looks_random(value: str) -> bool:
    """A token value mixes letters and digits (so "token expiration_timestamp_field" is prose, not a secret)."""
    return any(char.isdigit() for char in value) and any(char.isalpha() for char in value)


def _accept_assignment_value(value: str) -> bool:
    """An assigned value is a secret unless it is a placeholder, code, a number, or already redacted."""
    stripped = value.strip()
    if len(stripped) < 6 or stripped.isdigit():
        return False
    if stripped.startswith(("$", "<", "{", "[", "%", "os.", "process.", "env", "ENV", "getenv", "***")):
        return False
    if "(" in stripped or stripped.lower() in _PLACEHOLDER_VALUES:
        return False
    if _CODE_REFERENCE.fullmatch(stripped):
        return False  # a variable or attribute (settings.api_token, my_secret_var), not a literal secret
    return True


def _library_rules() -> list[_Rule]:
    from detect_secrets.plugins import (  # imported lazily: detect-secrets is slow to import
        artifactory,
        aws,
        azure_storage_key,
        basic_auth,
        cloudant,
        discord,
        github_token,
        gitlab_token,
        ibm_cloud_iam,
        ibm_cos_hmac,
        jwt,
        keyword,
        mailchimp,
        npm,
        openai,
        private_key,
        pypi_token,
        sendgrid,
        slack,
        softlayer,
        square_oauth,
        stripe,
        telegram_token,
        twilio,
    )

    modules = (artifactory, aws, azure_storage_key, basic_auth, cloudant, discord, github_token, gitlab_token,
               ibm_cloud_iam, ibm_cos_hmac, jwt, mailchimp, npm, openai, private_key, pypi_token, sendgrid, slack,
               softlayer, square_oauth, stripe, telegram_token, twilio)
    classes = {}
    for module in modules:
        for name in _LIBRARY_DETECTORS:
            if hasattr(module, name):
                classes[name] = getattr(module, name)
    rules: list[_Rule] = []
    for name, detector_class in classes.items():
        group, triggers, lower_triggers, min_token = _LIBRARY_DETECTORS[name]
        kind = _kind_from_secret_type(detector_class.secret_type)
        for pattern in detector_class.denylist:
            rule_group = group if pattern.groups >= 1 else 0
            rules.append(_Rule(kind, pattern, rule_group, triggers, lower_triggers, min_token=min_token,
                               windowed=name in _KEYWORD_ANCHORED and pattern.groups >= 1))
    # KeywordDetector: the library's own assignment regexes, in the quotes-required form it uses by default.
    for pattern, group in keyword.QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP.items():
        rules.append(_Rule("secret_keyword", pattern, group, (),
                           ("key", "pass", "pwd", "secret", "contras", "contraseña"), _accept_assignment_value,
                           min_token=6, windowed=True, window_needs=("\"", "'", "`")))
    return rules


_SECRET_NAME = (r"(?:api[_-]?key|apikey|access[_-]?key|secret[_-]?key|private[_-]?key|client[_-]?secret|"
                r"auth[_-]?token|access[_-]?token|refresh[_-]?token|token|secret|password|passwd|pwd|passphrase)")


@dataclass(frozen=True)
class _Token:
    """A provider's token shape: ``regex`` (RE2 syntax and Python syntax at once: ASCII classes only) is also its
    pre-filter shape unless ``shape`` is given; ``group`` 1 marks the secret when the regex names its key too."""

    kind: str
    regex: str
    triggers: tuple[str, ...]
    min_token: int
    group: int = 0
    shape: str | None = None


# Token shapes of common providers that detect-secrets lacks (or, for JWTs and Stripe, finds only in part).
_PROVIDER_TOKENS: tuple[_Token, ...] = (
    _Token("docker_token", r"dckr_(?:pat|oat)_[A-Za-z0-9_-]{20,}", ("dckr_",), 29),
    _Token("npm_token", r"npm_[A-Za-z0-9]{36}", ("npm_",), 40),
    _Token("stripe_access_key", r"[rs]k_(?:live|test)_[A-Za-z0-9]{10,}", ("k_live_", "k_test_"), 18),
    _Token("stripe_webhook_secret", r"whsec_[A-Za-z0-9+/]{24,}", ("whsec_",), 30),
    _Token("json_web_token", r"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}", ("eyJ",), 29),
    _Token("google_oauth_token", r"ya29\.[A-Za-z0-9_-]{20,}", ("ya29.",), 25),
    _Token("google_oauth_client_secret", r"GOCSPX-[A-Za-z0-9_-]{20,}", ("GOCSPX-",), 27),
    _Token("slack_token", r"(?:xapp-[0-9]+|xoxe)-[A-Za-z0-9-]{20,}", ("xapp-", "xoxe-"), 25),
    _Token("shopify_token", r"shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}", ("shpat_", "shpss_", "shpca_", "shppa_"), 38),
    _Token("digitalocean_token", r"do[opr]_v1_[a-f0-9]{64}", ("_v1_",), 71),
    _Token("linear_api_key", r"lin_api_[A-Za-z0-9]{40}", ("lin_api_",), 48),
    _Token("atlassian_api_token", r"ATATT3[A-Za-z0-9_=-]{50,}", ("ATATT3",), 56),
    _Token("groq_api_key", r"gsk_[A-Za-z0-9]{40,}", ("gsk_",), 44),
    _Token("replicate_api_token", r"r8_[A-Za-z0-9]{30,}", ("r8_",), 33),
    _Token("perplexity_api_key", r"pplx-[A-Za-z0-9]{40,}", ("pplx-",), 45),
    _Token("tavily_api_key", r"tvly-(?:dev-|prod-)?[A-Za-z0-9]{24,}", ("tvly-",), 29),
    _Token("xai_api_key", r"xai-[A-Za-z0-9]{60,}", ("xai-",), 64),
    _Token("new_relic_key", r"NRA[AKI]-[A-Z0-9]{27}", ("NRAK-", "NRAA-", "NRAI-"), 32),
    _Token("vault_token", r"hv[sbr]\.[A-Za-z0-9_-]{24,}", ("hvs.", "hvb.", "hvr."), 28),
    _Token("doppler_token", r"dp\.(?:pt|st|ct|sa|scim|audit)\.[A-Za-z0-9_-]{40,}", ("dp.",), 46),
    _Token("postman_api_key", r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}", ("PMAK-",), 64),
    _Token("age_secret_key", r"AGE-SECRET-KEY-1[0-9A-Z]{58}", ("AGE-SECRET-KEY-1",), 74),
    _Token("grafana_token", r"glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}|glc_[A-Za-z0-9+/]{32,}={0,2}", ("glsa_", "glc_"),
           36),
    _Token("sentry_token", r"sntry[su]_[A-Za-z0-9+/=_]{40,}", ("sntrys_", "sntryu_"), 47),
    _Token("databricks_token", r"dapi[a-f0-9]{32}(?:-[0-9])?", ("dapi",), 36),
    _Token("pulumi_token", r"pul-[a-f0-9]{40}", ("pul-",), 44),
    _Token("planetscale_token", r"pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_.-]{32,}", ("pscale_",), 43),
    # Azure connection strings (storage, Service Bus, Event Hubs): the key's value, up to the next ";".
    _Token("azure_connection_string_key", r"(?:AccountKey|SharedAccessKey|SharedAccessSignature)=([^;\s\"'`]{8,})",
           ("AccountKey=", "SharedAccessKey=", "SharedAccessSignature="), 19, 1,
           r"(?:AccountKey|SharedAccessKey|SharedAccessSignature)=[^;\s\"'`]{8}"),
    # The signature of a pre-signed URL (Azure SAS, AWS, Google Cloud Storage, CloudFront): the URL is the key.
    _Token("signed_url_signature", r"[?&](?:sig|X-Amz-Signature|X-Goog-Signature|Signature)=([A-Za-z0-9%+/=_-]{20,})",
           ("sig=", "Signature="), 24, 1),
)


def _token_rules() -> list[_Rule]:
    rules = []
    for token in _PROVIDER_TOKENS:
        # a token starts a word (the "pul-" of "rpul-..." or the "npm_" of "my_npm_..." is no token); a pattern
        # that names its key first needs no such guard
        guard = "" if token.group else "(?<![A-Za-z0-9])"
        rules.append(_Rule(token.kind, re.compile(f"{guard}(?:{token.regex})"), token.group, token.triggers,
                           min_token=token.min_token))
    return rules


def _command_line_rules() -> list[_Rule]:
    return [
        _Rule("command_line_password", credential_args.COMMAND_LINE, 0, credential_args.COMMANDS,
              values=credential_args.password_spans),
        _Rule("password_variable", credential_args.ENV_ASSIGNMENT, 0, credential_args.ENV_NAMES,
              values=credential_args.env_password_spans),
    ]


def _structural_rules() -> list[_Rule]:
    return _token_rules() + _command_line_rules() + [
        # user:password@ with an empty user (redis://:password@host): the rule below wants a user.
        _Rule("basic_auth_credentials", re.compile(r"://:([^\s/@]+)@"), 1, ("://:",)),
        # PEM private key blocks, END line included; a block cut before its END runs to the end of the base64.
        _Rule("private_key", re.compile(
            r"-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY((?: BLOCK)?)-----"
            r"(?:.*?-----END \1PRIVATE KEY\2-----|[A-Za-z0-9+/=\s:,\-\\]*)", re.DOTALL), 0, ("PRIVATE KEY",)),
        _Rule("anthropic_api_key", re.compile(r"(?<![A-Za-z0-9])sk-ant-[A-Za-z0-9_\-]{16,}"), 0, ("sk-ant-",),
              min_token=23),
        _Rule("api_key", re.compile(r"(?<![A-Za-z0-9])sk-(?:proj-|svcacct-|admin-|or-v1-|live-)?[A-Za-z0-9_\-]{20,}"),
              0, ("sk-",), min_token=23),
        _Rule("github_token", re.compile(r"(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"),
              0, ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"), min_token=24),
        _Rule("slack_token", re.compile(r"xox[abposr]-[A-Za-z0-9\-]{10,}"), 0, ("xox",), min_token=15),
        _Rule("google_api_key", re.compile(r"AIza[0-9A-Za-z_\-]{35}"), 0, ("AIza",), min_token=39),
        _Rule("huggingface_token", re.compile(r"(?<![A-Za-z0-9])hf_[A-Za-z0-9]{30,}"), 0, ("hf_",), min_token=33),
        _Rule("bearer_token", re.compile(r"(?i)(?:bearer|token)\s+([A-Za-z0-9._~+/\-]{16,}=*)"), 1, (),
              ("bearer", "token"), _looks_random, min_token=16),
        _Rule("basic_auth_credentials", re.compile(
            r"(?i)authorization[\"']?\s*[:=]\s*[\"']?basic\s+([A-Za-z0-9+/]{8,}={0,2})"), 1, (), ("authorization",),
            min_token=8),
        # user:password@host in any URL (the library's pattern excludes some characters from passwords).
        _Rule("basic_auth_credentials", re.compile(r"://[^\s:/@]+:([^\s/@]+)@"), 1, ("://",), min_token=8),
        # NAME_TOKEN=value, "api_key": "value", password: value (value without spaces; quotes optional, or
        # escaped as in JSON inside a JSON string: {\"api_key\": \"value\"}).
        _Rule("secret_assignment", re.compile(
            r"(?i)" + _SECRET_NAME + r"\\?[\"']?\s*(?::=|=>|=|:)\s*\\?[\"'`]?([^\s\"'`,;]+)"), 1, (),
            ("key", "token", "secret", "pass", "pwd"), _accept_assignment_value, min_token=6, windowed=True,
            window_needs=("=", ":")),
    ]


_LONG_RUN = 16


# The pre-filter, in RE2 syntax: for every detector pattern (library and structural), a shape that each of its
# matches contains. Keyword-anchored patterns only ever match inside one line (their windows never cross a
# newline), hence ``[^\n]``. RE2 classes are ASCII where Python's are Unicode, so ``\s`` and ``\d`` of a pattern
# become ``_WS`` and ``\p{Nd}`` here (a negated ``\s`` class may stay: it is only wider in RE2). RE2's
# case-insensitive matching folds K and ſ like Python's but not İ and ı: a text holding either always passes.
_WS = r"[\t-\r\x{1c}-\x{1f}\x{85}\pZ]"
_OPERATOR = r"(?::=|=>|=|:)"
_ASSIGNMENT = r"(?i:key|token|secret|passw(?:or)?d|pwd|passphrase)\\?[\"']?" + _WS + "*" + _OPERATOR
_VALUE = r"[^\t-\r\x{1c}-\x{1f}\x{85}\pZ\"'`,;(]"


def _candidate_shapes(keywords: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``(shape, kinds of the rules it stands for)``; an empty kinds tuple stands for every rule."""
    return (
        (r"AKC[a-zA-Z0-9]{10}|AP[\p{Nd}A-F][a-zA-Z0-9]{8}", ("artifactory_credentials",)),
        (r"(?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA)[0-9A-Z]{16}", ("aws_access_key",)),  # access key id
        (r"(?i:aws.{0,20}?(?:key|pw|pass|token))", ("aws_access_key",)),            # keyword form
        (r"AccountKey=", ("azure_storage_account_access_key",)),
        (r"://[^\s:/@]+:[^\s/@]+@", ("basic_auth_credentials", "cloudant_credentials")),  # user:password@ in a URL
        (r"(?i:authorization[\"']?" + _WS + r"*[:=]" + _WS + r"*[\"']?basic" + _WS + ")",
         ("basic_auth_credentials",)),
        (r"(?i:://api.softlayer.com/soap/)", ("softlayer_credentials",)),
        (r"\.[a-zA-Z\p{Nd}_-]{6}\.[a-zA-Z\p{Nd}_-]{27}", ("discord_bot_token",)),   # its two dots and what follows
        (r"gh[pousr]_[A-Za-z0-9_]{20}|github_pat_", ("github_token",)),
        (r"(?:glpat|gldt|glft|glsoat|glrt|glcbt|glimt|glptt|glagent|gloas)-|GR1348941", ("gitlab_token",)),
        (r"eyJ[A-Za-z0-9_=-]+\.", ("json_web_token",)),
        (r"-us[0-9]", ("mailchimp_access_key",)),
        (r"/:_authToken=", ("npm_tokens",)),
        (r"T3BlbkFJ", ("openai_token",)),
        (r"sk-[A-Za-z0-9_-]{20}", ("api_key", "anthropic_api_key", "openai_token")),
        (r"PRIVATE KEY|PuTTY-User-Key-File-2", ("private_key",)),
        (r"pypi-AgE", ("pypi_token",)),
        (r"SG\.[a-zA-Z0-9_-]{22}\.", ("sendgrid_api_key",)),
        (r"(?i:xox[abposr]-|hooks\.slack\.com)", ("slack_token",)),
        (r"sq0csp-", ("square_oauth_secret",)),
        (r"k_live_", ("stripe_access_key",)),
        (r"AIza", ("google_api_key",)),
        (r"hf_[A-Za-z0-9]{30}", ("huggingface_token",)),
        (r"\p{Nd}:[0-9A-Za-z_-]{35}", ("telegram_bot_token",)),
        (r"(?:AC|SK)[a-z0-9]{32}", ("twilio_api_key",)),
        # Keyword forms of Cloudant, IBM Cloud IAM, IBM COS HMAC, SoftLayer: keyword, assignment, long value.
        (r"(?i:(?:key|pwd|pw|password|pass|token)[\"']?\]? *(?:=|:|:=|=>| +|::) *[\"']?[a-z0-9_-]{24})",
         ("cloudant_credentials", "ibm_cloud_iam_key", "ibm_cos_hmac_credentials", "softlayer_credentials")),
        (r"(?i:(?:bearer|token)" + _WS + r"+[a-z0-9._~+/-]{16})", ("bearer_token",)),
        # NAME=value assignments (structural rule). The value (a run of non-space characters other than quotes,
        # commas, semicolons) is accepted only with 6 characters and no "(": so it is such a run ending before a
        # delimiter; or, cut by its keyword window (~200 characters after the keyword), a long run, or one that
        # starts far after the keyword.
        (_ASSIGNMENT + _WS + r"*\\?[\"'`]?(?:" + _VALUE + r"{6,}(?:" + _WS[:-1] + r"\"'`,;]|$)|" + _VALUE
         + r"{90})|" + _ASSIGNMENT[:-len(_OPERATOR)] + _WS + r"{45}|" + _ASSIGNMENT + _WS + r"{45}",
         ("secret_assignment",)),
        # detect-secrets KeywordDetector, quotes required: a keyword then a quote on its line, or a quoted value
        # compared (== / !=) with a keyword.
        (r"(?i:(?:" + keywords + r")[^\n]*[\"'`])|[!=]{2}[^\n]*(?i:" + keywords + r")", ("secret_keyword",)),
        *((token.shape or token.regex, (token.kind,)) for token in _PROVIDER_TOKENS),
        *((shape, ("command_line_password",)) for shape in credential_args.COMMAND_LINE_SHAPES),
        ("|".join(credential_args.ENV_NAMES), ("password_variable",)),
        (r"://:[^\s/@]+@", ("basic_auth_credentials",)),                             # redis://:password@host
        (r"\x{130}|\x{131}", ()),                                                    # İ, ı: see above
    )


@dataclass(frozen=True)
class _Prefilter:
    """The pre-filter: ``shapes`` is an RE2 set of the candidate shapes (one pass tells which of them match)."""

    shapes: object
    kinds: tuple[frozenset[str] | None, ...]
    """Rule kinds per shape (None: every rule)."""
    first: object = None
    """The same shapes as one RE2 alternation: where the first of them starts in a text (``redact_many``)."""

    def kinds_in(self, text: str) -> frozenset[str] | None:
        """The kinds of the rules that may match ``text`` (empty: none can; None: any may)."""
        try:
            matched = self.shapes.Match(text)
        except UnicodeEncodeError:  # a lone surrogate: RE2 reads only UTF-8
            return None
        if not matched:
            return frozenset()
        kinds: set[str] = set()
        for index in matched:
            if self.kinds[index] is None:
                return None
            kinds |= self.kinds[index]
        return frozenset(kinds)


def _build_prefilter(keywords: str) -> _Prefilter | None:
    """The compiled pre-filter, or None when google-re2 is not installed (every text then takes the full pass)."""
    try:
        import re2
    except ImportError:
        return None
    options = re2.Options()
    options.never_capture = True
    options.max_mem = 64 << 20
    shapes = _candidate_shapes(keywords)
    shape_set = re2.Set.SearchSet(options)
    for shape, _kinds in shapes:
        shape_set.Add(shape)
    shape_set.Compile()
    first = re2.compile("|".join(f"(?:{shape})" for shape, _kinds in shapes), options)
    return _Prefilter(shape_set, tuple(frozenset(kinds) if kinds else None for _shape, kinds in shapes), first)


_PATTERNS_DIGEST = "d273ad19c499f57b7a32af5942cdef2fe365c67f4ed01e18c5d5ff6793f037e1"
"""sha256 of the detector patterns (text and flags) the shapes above were derived from."""


def _patterns_digest(rules: Iterable[_Rule]) -> str:
    digest = hashlib.sha256()
    for rule in rules:
        digest.update(f"{rule.pattern.pattern}\x00{rule.pattern.flags}\x00{rule.group}\n".encode("utf-8"))
    return digest.hexdigest()


@dataclass(frozen=True)
class _RuleSet:
    rules: tuple[_Rule, ...]
    by_trigger: dict[str, tuple[int, tuple[int, ...]]]
    """trigger substring -> (smallest ``min_token`` of its rules, indices of the rules it enables)."""
    by_lower_trigger: dict[str, tuple[int, tuple[int, ...]]]
    always: tuple[int, ...]
    """Indices of the rules with no trigger."""
    by_kind: dict[frozenset[str] | None, tuple[int, ...]] = field(default_factory=dict, compare=False)
    """Cache of ``indices_for``."""
    prefilter: _Prefilter | None = None
    """The compiled pre-filter; None when google-re2 is missing or the detector patterns changed since the
    shapes were derived: every text then takes the full pass."""

    def indices_for(self, kinds: frozenset[str] | None) -> tuple[int, ...]:
        """Indices of the rules of ``kinds`` (None: every rule), in rule order."""
        indices = self.by_kind.get(kinds)
        if indices is None:
            indices = tuple(index for index, rule in enumerate(self.rules) if kinds is None or rule.kind in kinds)
            self.by_kind[kinds] = indices
        return indices


def prepare() -> None:
    """Build the detectors and the pre-filter now (imports detect-secrets, compiles the patterns; ~0.15 s of CPU,
    once per process) instead of inside the first ``redact`` call. Optional: ``redact`` builds them on first use."""
    _rule_set()


@cache
def _rule_set() -> _RuleSet:
    from detect_secrets.plugins import keyword

    rules = tuple(_library_rules() + _structural_rules())
    by_trigger: dict[str, list[int]] = {}
    by_lower_trigger: dict[str, list[int]] = {}
    always: list[int] = []
    for index, rule in enumerate(rules):
        for trigger in rule.triggers:
            by_trigger.setdefault(trigger, []).append(index)
        for trigger in rule.lower_triggers:
            by_lower_trigger.setdefault(trigger, []).append(index)
        if not rule.triggers and not rule.lower_triggers:
            always.append(index)

    def index(mapping: dict[str, list[int]]) -> dict[str, tuple[int, tuple[int, ...]]]:
        return {key: (min(rules[i].min_token for i in value), tuple(value)) for key, value in mapping.items()}

    prefilter = None
    if _patterns_digest(rules) == _PATTERNS_DIGEST:
        prefilter = _build_prefilter("|".join(keyword.DENYLIST))
    return _RuleSet(rules, index(by_trigger), index(by_lower_trigger), tuple(always), prefilter=prefilter)


def _rules() -> tuple[_Rule, ...]:
    return _rule_set().rules


def _spans(text: str, rule_set: _RuleSet, kinds: frozenset[str] | None = None) -> list[tuple[int, int, str, bool]]:
    """Every finding ``(start, end, kind, keyword-anchored)`` of the rules of ``kinds`` (None: all) in ``text``."""
    # A token-shaped secret is one whitespace-free run: the longest run rules most detectors out at once, and
    # their triggers are looked for only in the runs long enough to hold a secret (a small part of most texts).
    # (Below _LONG_RUN, ``longest`` only needs the text's length: the text split into words only when a rule needs
    # a longer run.)
    long_words: list[str] | None = None
    longest = min(len(text), _LONG_RUN - 1)
    long_runs: str | None = None
    lowered: str | None = None
    windows: list[tuple[int, int]] | None = None
    whole = [(0, len(text))]
    found: list[tuple[int, int, str, bool]] = []
    for index in rule_set.indices_for(kinds):
        rule = rule_set.rules[index]
        if rule.min_token >= _LONG_RUN and long_words is None:
            long_words = [word for word in text.split() if len(word) >= _LONG_RUN]
            if long_words:
                longest = max(map(len, long_words))
        if longest < rule.min_token:
            continue
        selected = index in rule_set.always
        for trigger in rule.triggers:
            min_token = rule_set.by_trigger[trigger][0]
            if min_token >= _LONG_RUN:
                if long_runs is None:
                    long_runs = " ".join(long_words or ())
                if trigger in long_runs:
                    selected = True
                    break
            elif trigger in text:
                selected = True
                break
        if not selected and rule.lower_triggers:
            if lowered is None:
                lowered = text.lower()
            selected = any(trigger in lowered for trigger in rule.lower_triggers)
        if not selected:
            continue
        if rule.windowed:
            if windows is None:
                if lowered is None:
                    lowered = text.lower()
                windows = _keyword_windows(text, lowered)
            ranges = windows
            if rule.window_needs:
                ranges = [(start, end) for start, end in windows
                          if any(char in text[start:end] for char in rule.window_needs)]
        else:
            ranges = whole
        for range_start, range_end in ranges:
            found.extend(_matches(text, rule, range_start, range_end))
    return found


def _matches(text: str, rule: _Rule, range_start: int, range_end: int) -> list[tuple[int, int, str, bool]]:
    found: list[tuple[int, int, str, bool]] = []
    position = range_start
    while position <= range_end:
        match = rule.pattern.search(text, position, range_end)
        if match is None:
            break
        position = max(match.end(), match.start() + 1)
        if rule.values is not None:
            found.extend((start, end, rule.kind, rule.windowed) for start, end in rule.values(text, match)
                         if REDACTED_PREFIX not in text[start:end])
            continue
        group = rule.group if rule.group <= (rule.pattern.groups or 0) else 0
        start, end = match.span(group)
        if start < 0 or end <= start:
            continue
        value = text[start:end]
        if REDACTED_PREFIX in value:
            continue
        if rule.accept is not None and not rule.accept(value):
            # a value refused may hold the next assignment ("aws_key: AWS_SECRET_KEY=..."): search on from it
            position = max(start, match.start() + 1)
            continue
        # trim delimiters some library patterns include around the secret
        while start < end and text[start] in " \t\r\n\"'=:":
            start += 1
        while end > start and text[end - 1] in " \t\r\n\"'\\":
            end -= 1
        if end > start:
            found.append((start, end, rule.kind, rule.windowed))
    return found


def _inside_redaction(text: str, start: int) -> bool:
    """True when ``start`` falls inside an existing ``[REDACTED:...]`` marker."""
    opening = text.rfind(REDACTED_PREFIX, 0, start + 1)
    return opening != -1 and text.find("]", opening) >= start


def redact(text: str) -> tuple[str, int]:
    """Return ``(text with secrets replaced by [REDACTED:<kind>], number of secrets replaced)``.

    Overlapping findings are merged into one replacement (the first-starting, widest one names the kind).
    Never raises; a non-string input is returned unchanged with 0.
    """
    if not text or not isinstance(text, str):
        return text, 0
    rule_set = _rule_set()
    kinds = None if rule_set.prefilter is None else rule_set.prefilter.kinds_in(text)
    if kinds is not None and not kinds:
        return text, 0
    return _redact_all(text, rule_set, kinds)


def redact_many(texts: list[str]) -> list[tuple[str, int]]:
    """``[redact(text) for text in texts]``, faster for many short texts: one pre-filter search over all of them
    together (a shape found in one text is found in the texts joined by newlines); only a text in which a shape
    starts is redacted on its own, and the search goes on from the next text."""
    prefilter = _rule_set().prefilter
    if prefilter is None or prefilter.first is None or not texts:
        return [redact(text) for text in texts]
    try:
        encoded = [text.encode("utf-8") for text in texts]
    except UnicodeEncodeError:  # a lone surrogate: RE2 reads only UTF-8
        return [redact(text) for text in texts]
    # Searching for the leftmost shape, rather than asking the set whether any shape matches, means that one text
    # with a candidate shape (a session quoting hooks.slack.com) no longer sends every text of the batch through
    # the pre-filter again one by one: the texts before the match hold no shape (a match inside one of them would
    # start further left), so they are returned as they are.
    joined = b"\n".join(encoded)
    results: list[tuple[str, int]] = []
    starts: list[int] | None = None
    done = position = 0
    while done < len(texts):
        match = prefilter.first.search(joined, position)  # type: ignore[attr-defined]
        if match is None:
            break
        if starts is None:
            starts, offset = [], 0
            for piece in encoded:
                starts.append(offset)
                offset += len(piece) + 1
        index = bisect_right(starts, match.start()) - 1
        results.extend((text, 0) for text in texts[done:index])
        results.append(redact(texts[index]))
        done = index + 1
        position = starts[done] if done < len(texts) else len(joined)
    results.extend((text, 0) for text in texts[done:])
    return results


def _redact_all(text: str, rule_set: _RuleSet, kinds: frozenset[str] | None) -> tuple[str, int]:
    """The detectors' pass over ``text``, limited to the rules of ``kinds`` (None: all)."""
    spans = _spans(text, rule_set, kinds)
    if not spans:
        return text, 0
    # the first-starting, widest finding names the kind; on a tie a token-shaped detector beats a keyword one
    spans.sort(key=lambda span: (span[0], -span[1], span[3]))
    merged: list[list] = []
    for start, end, kind, _keyword in spans:
        if _inside_redaction(text, start):
            continue
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
            continue
        merged.append([start, end, kind])
    if not merged:
        return text, 0
    pieces: list[str] = []
    cursor = 0
    for start, end, kind in merged:
        pieces.append(text[cursor:start])
        pieces.append(f"{REDACTED_PREFIX}{kind}]")
        cursor = end
    pieces.append(text[cursor:])
    return "".join(pieces), len(merged)


def redact_text(text: str) -> str:
    """Return ``text`` with its secrets replaced (see ``redact``)."""
    return redact(text)[0]
