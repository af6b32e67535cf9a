"""The secret shapes a harvest must redact, and look-alikes it must leave alone (``test_secret_corpus.py``).

Every secret is built at import time from its public prefix and a random tail (a fixed seed: the same corpus on
every run), so no real-looking secret sits in the repository for a scanner to flag. ``SHAPES``: ``Shape(name, text,
secret)`` where ``text`` holds ``secret`` the way a user types it or an agent runs it; ``NEGATIVES``: ``(name,
text)`` texts shaped like a secret or a password option that hold none.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass

_RNG = random.Random(20240523)
ALNUM = string.ascii_letters + string.digits
B64URL = ALNUM + "-_"
B64 = ALNUM + "+/"
HEX = "0123456789abcdef"
UPPER = string.ascii_uppercase + string.digits


def tail(length: int, alphabet: str = ALNUM) -> str:
    """``length`` random characters of ``alphabet`` (a fake secret's body); with at least one digit and one letter
    when the alphabet has both and ``length`` allows."""
    mixed = length >= 2 and any(c.isdigit() for c in alphabet) and any(c.isalpha() for c in alphabet)
    while True:
        text = "".join(_RNG.choice(alphabet) for _ in range(length))
        if not mixed or (any(c.isdigit() for c in text) and any(c.isalpha() for c in text)):
            return text


def password() -> str:
    """A fake typed password: letters, digits and a symbol shells pass through quoted or bare."""
    return tail(10) + "!" + tail(3)


@dataclass(frozen=True)
class Shape:
    """One secret as it appears in a text: ``secret`` (the value that must vanish) inside ``text``."""

    name: str
    text: str
    secret: str

    @property
    def pieces(self) -> tuple[str, str]:
        """What must not survive: the secret, and its last 12 characters (random: a secret cut or half redacted
        still shows them)."""
        return self.secret, self.secret[-12:]


def _shape(name: str, secret: str, template: str = "use {} here") -> Shape:
    return Shape(name, template.format(secret), secret)


def _shapes() -> list[Shape]:
    pw = {name: password() for name in ("docker", "docker_long", "mysql_long", "mysql_eq", "mysql_attached",
                                         "mariadb", "sshpass", "sshpass_attached", "mongosh", "redis", "redis_pass",
                                         "curl", "curl_long", "wget", "pg_env", "mysql_env", "redis_env", "helm")}
    bare = tail(14)  # inside a JSON string a bare value needs no shell quoting
    jwt = "eyJhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiJ" + tail(24, B64URL) + "." + tail(43, B64URL)
    return [
        # passwords given as command-line arguments (credential_args)
        _shape("docker_login_pat", "dckr_pat_" + tail(27, B64URL), "docker login -u dev -p {} registry.example.com"),
        _shape("docker_login_password", pw["docker"], "docker login -u dev -p '{}' ghcr.io"),
        _shape("docker_login_long_eq", pw["docker_long"], "podman login --username dev --password='{}' quay.io"),
        _shape("mysql_password_space", pw["mysql_long"], 'mysql -h db -u root --password "{}" shop'),
        _shape("mysql_password_eq", pw["mysql_eq"], "mysqldump --user=root --password='{}' shop > dump.sql"),
        _shape("mysql_attached", bare, "mysql -uroot -p{} -e 'select 1'"),
        _shape("mariadb_attached_quoted", pw["mariadb"], "mariadb -u admin -p'{}' shop"),
        _shape("sshpass_p", pw["sshpass"], "sshpass -p '{}' ssh deploy@10.0.0.5 uptime"),
        _shape("sshpass_attached", pw["sshpass_attached"], 'sshpass -p"{}" scp a.txt deploy@host:/tmp'),
        _shape("mongosh_p", pw["mongosh"], "mongosh -u admin -p '{}' --authenticationDatabase admin"),
        _shape("redis_cli_a", pw["redis"], "redis-cli -h cache -p 6379 -a '{}' ping"),
        _shape("redis_cli_pass", pw["redis_pass"], "redis-cli --pass '{}' --scan"),
        _shape("curl_user", pw["curl"], "curl -u 'alice:{}' https://api.example.com/v1/items"),
        _shape("curl_user_long", pw["curl_long"], 'curl --user "bob:{}" -X POST https://example.com'),
        _shape("wget_http_password", pw["wget"], "wget --http-user=ci --http-password='{}' https://example.com/a"),
        _shape("helm_repo_password", pw["helm"], "helm repo add internal https://charts.example --password '{}'"),
        _shape("pgpassword_env", pw["pg_env"], "PGPASSWORD='{}' psql -h db -p 5432 -U app shop"),
        _shape("mysql_pwd_env", pw["mysql_env"], "export MYSQL_PWD='{}'"),
        _shape("rediscli_auth_env", pw["redis_env"], "REDISCLI_AUTH='{}' redis-cli ping"),
        _shape("redis_url_empty_user", tail(20), "connect to redis://:{}@cache:6379/0"),
        # provider tokens
        _shape("docker_pat_bare", "dckr_pat_" + tail(27, B64URL)),
        _shape("gitlab_pat", "glpat-" + tail(20, B64URL)),
        _shape("slack_bot", "xoxb-" + tail(12, string.digits) + "-" + tail(13, string.digits) + "-" + tail(24)),
        _shape("slack_user", "xoxp-" + tail(12, string.digits) + "-" + tail(12, string.digits) + "-"
               + tail(13, string.digits) + "-" + tail(32, HEX)),
        _shape("slack_app", "xapp-1-" + tail(11, UPPER) + "-" + tail(13, string.digits) + "-" + tail(64, HEX)),
        _shape("stripe_secret_live", "sk_" + "live_" + tail(24)),
        _shape("stripe_restricted_live", "rk_" + "live_" + tail(24)),
        _shape("stripe_secret_test", "sk_" + "test_" + tail(24)),
        _shape("stripe_webhook", "whsec_" + tail(32)),
        _shape("npm_token", "npm_" + tail(36), "NPM_AUTH={} in CI"),
        _shape("pypi_token", "pypi-AgEIcHlwaS5vcmc" + tail(70, B64URL)),
        _shape("huggingface", "hf_" + tail(34)),
        _shape("google_api_key", "AIza" + tail(35, B64URL)),
        _shape("google_oauth_access", "ya29." + tail(60, B64URL)),
        _shape("google_oauth_client_secret", "GOCSPX-" + tail(28, B64URL)),
        _shape("jwt", jwt, "Authorization header was {} and it expired"),
        _shape("azure_account_key", tail(86, B64) + "==",
               "DefaultEndpointsProtocol=https;AccountName=shop;AccountKey={};EndpointSuffix=core.windows.net"),
        _shape("azure_shared_access_key", tail(43, B64) + "=",
               "Endpoint=sb://shop.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey={}"),
        _shape("azure_sas_connection", "sv=2022-11-02&ss=b&srt=sco&sp=rl&sig=" + tail(43, ALNUM) + "%3D",
               "BlobEndpoint=https://shop.blob.core.windows.net/;SharedAccessSignature={}"),
        _shape("azure_sas_url_sig", tail(43, ALNUM) + "%3D",
               "https://shop.blob.core.windows.net/c/a.txt?sv=2022-11-02&se=2030-01-01&sp=r&sig={}"),
        _shape("aws_presigned_signature", tail(64, HEX),
               "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature={}"),
        _shape("github_classic", "ghp_" + tail(36)),
        _shape("github_fine_grained", "github_pat_" + tail(22) + "_" + tail(59)),
        _shape("openai_project", "sk-proj-" + tail(48, B64URL)),
        _shape("anthropic", "sk-ant-api03-" + tail(93, B64URL) + "AA"),
        _shape("aws_access_key_id", "AKIA" + tail(16, UPPER)),
        _shape("aws_secret_access_key", tail(40, B64), "aws_secret_access_key = {}"),
        _shape("aws_secret_in_json", tail(40, B64), '{{"AccessKeyId": "x", "SecretAccessKey": "{}"}}'),
        _shape("sendgrid", "SG." + tail(22, B64URL) + "." + tail(43, B64URL)),
        _shape("shopify", "shpat_" + tail(32, HEX)),
        _shape("digitalocean", "dop_v1_" + tail(64, HEX)),
        _shape("linear", "lin_api_" + tail(40)),
        _shape("atlassian", "ATATT3xFfGF0" + tail(60, B64URL)),
        _shape("groq", "gsk_" + tail(52)),
        _shape("replicate", "r8_" + tail(37)),
        _shape("perplexity", "pplx-" + tail(48)),
        _shape("new_relic", "NRAK-" + tail(27, UPPER)),
        _shape("vault", "hvs." + tail(90, B64URL)),
        _shape("doppler", "dp.st." + tail(43)),
        _shape("postman", "PMAK-" + tail(24, HEX) + "-" + tail(34, HEX)),
        _shape("age", "AGE-SECRET-KEY-1" + tail(58, UPPER)),
        _shape("grafana_service_account", "glsa_" + tail(32) + "_" + tail(8, HEX)),
        _shape("databricks", "dapi" + tail(32, HEX)),
        _shape("grafana_cloud", "glc_" + tail(40, B64)),
        _shape("sentry_user", "sntryu_" + tail(64, HEX)),
        _shape("tavily", "tvly-dev-" + tail(32)),
        _shape("xai", "xai-" + tail(80)),
        _shape("pulumi", "pul-" + tail(40, HEX)),
        _shape("planetscale", "pscale_tkn_" + tail(43, B64URL)),
        _shape("private_key_block", tail(64, B64),
               "-----BEGIN OPENSSH PRIVATE KEY-----\n{}\n-----END OPENSSH PRIVATE KEY-----"),
        _shape("basic_auth_url", password().replace("!", "x"), "git clone https://ci:{}@git.example.com/shop.git"),
    ]


SHAPES: list[Shape] = _shapes()

#: Texts shaped like a secret, a password option or a token prefix that hold no secret: left exactly as they are.
NEGATIVES: list[tuple[str, str]] = [
    ("ls_a", "ls -a ~/projects && ls -la"),
    ("grep_p", "grep -p 'def main' src/*.py"),
    ("pytest_plugin", "pytest -p no:cacheprovider -q tests/unit"),
    ("mysql_prompt", "mysql -h db -u root -p"),
    ("mysql_prompt_then_database", "mysql -u root -p shop < dump.sql"),
    ("mysql_password_from_env", 'mysql -u root -p"$MYSQL_PASSWORD" shop'),
    ("mysql_placeholder", "mysql -u root -p<password> shop"),
    ("docker_run_port", "docker run -p 8080:80 -p 127.0.0.1:9000:9000 nginx"),
    ("docker_login_stdin", "cat token.txt | docker login -u dev --password-stdin ghcr.io"),
    ("docker_run_then_ls", "docker run -p 5432:5432 postgres; ls -a"),
    ("psql_port", "psql -h db -p 5432 -U app shop"),
    ("redis_port", "redis-cli -h cache -p 6379 ping"),
    ("ssh_port", "ssh -p 2222 deploy@host"),
    ("curl_prompted_user", "curl -u alice https://api.example.com/v1/items"),
    ("curl_header", "curl -s -H 'Accept: application/json' https://api.example.com:8443/"),
    ("sshpass_from_env", "sshpass -e ssh deploy@host"),
    ("sshpass_variable", 'sshpass -p "$DEPLOY_PASSWORD" ssh deploy@host'),
    ("mongosh_prompt", "mongosh -u admin -p --authenticationDatabase admin"),
    ("pgpassword_reference", "PGPASSWORD=$(cat ~/.pgpass_prod) psql -h db"),
    ("npm_config_variable", "npm_config_cache=/tmp/npm-cache npm install"),
    ("stripe_test_helper", "from stripe_helpers import sk_test_mode, rk_live_flag"),
    ("hf_hub_call", "hf_hub_download(repo_id='gpt2', filename='config.json')"),
    ("jwt_header_only", "the header eyJhbGciOiJIUzI1NiJ9 decodes to the algorithm"),
    ("shared_access_key_name", "SharedAccessKeyName=RootManageSharedAccessKey"),
    ("git_sha_and_uuid", "commit 5c0375b4a57a5f4b12dd022ee4e51b7aa1b2c3d4 uuid 019a93b9-f380-7600-98ff-940e6b99603c"),
    ("glc_word", "run glc_report and docker logs dckr_helper"),
]
