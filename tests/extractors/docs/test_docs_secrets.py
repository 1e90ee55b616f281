"""Secret redaction: planted secrets of many kinds are hidden; code, prose and shas are not."""

from __future__ import annotations

import random
import string
import time

import pytest

from extractors.secrets import contains_secret, redact

_rng = random.Random(20240301)


def rand(alphabet: str, n: int) -> str:
    """Random material built at run time, so no credential-shaped literal sits in the sources."""
    return "".join(_rng.choice(alphabet) for _ in range(n))


ALNUM = string.ascii_letters + string.digits
UPPER = string.ascii_uppercase + string.digits
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"
HEX = "0123456789abcdef"


def _jwt() -> str:
    return "eyJ" + rand(URLSAFE, 30) + ".eyJ" + rand(URLSAFE, 60) + "." + rand(URLSAFE, 43)


def _pem(kind: str) -> str:
    body = "\n".join(rand(B64, 64) for _ in range(6))
    return f"-----BEGIN {kind}PRIVATE KEY-----\n{body}\n-----END {kind}PRIVATE KEY-----"


# (expected marker kind, the text around the secret with {} where it goes, the secret)
PLANTED: list[tuple[str, str, str]] = [
    ("aws-access-key", "aws_access_key_id = {}", "AKIA" + rand(UPPER, 16)),
    ("aws-access-key", "temporary creds {} expire soon", "ASIA" + rand(UPPER, 16)),
    ("aws-secret-key", "aws_secret_access_key = {}", rand(B64, 40)),
    ("aws-secret-key", 'AWS_SECRET_ACCESS_KEY: "{}"', rand(B64, 40)),
    ("github-token", "token used: {}", "ghp_" + rand(ALNUM, 36)),
    ("github-token", "GH_OAUTH={}", "gho_" + rand(ALNUM, 36)),
    ("github-token", "pat {} in CI", "github_pat_" + rand(ALNUM + "_", 82)),
    ("gitlab-token", "glab auth {}", "glpat-" + rand(URLSAFE, 20)),
    ("slack-token", "bot: {}", "xoxb-" + rand(string.digits, 12) + "-" + rand(ALNUM, 24)),
    ("slack-token", "user token {}", "xoxp-" + rand(string.digits, 12) + "-" + rand(ALNUM, 32)),
    (
        "slack-webhook",
        "post to {}",
        "https://hooks.slack.com/services/T" + rand(UPPER, 8) + "/B" + rand(UPPER, 8) + "/" + rand(ALNUM, 24),
    ),
    ("stripe-key", "Stripe.api_key = '{}'", "sk_live_" + rand(ALNUM, 24)),
    ("stripe-key", "restricted {}", "rk_live_" + rand(ALNUM, 24)),
    ("google-api-key", "maps key {}", "AIza" + rand(URLSAFE, 35)),
    ("api-key", "OPENAI {}", "sk-" + rand(ALNUM, 20) + "T3BlbkFJ" + rand(ALNUM, 20)),
    ("api-key", "client = Client({})", "sk-proj-" + rand(URLSAFE, 60) + "7"),
    ("jwt", "Authorization header was {}", _jwt()),
    ("private-key", "key:\n{}\n", _pem("RSA ")),
    ("private-key", "{}", _pem("")),
    ("private-key", "{}", _pem("OPENSSH ")),
    ("url-password", "DATABASE_URL=postgres://app:{}@db.internal:5432/app", rand(ALNUM, 14)),
    ("url-password", "amqp://guest:{}@rabbit/vhost", "p4ss" + rand(ALNUM, 6)),
    ("password", 'password = "{}"', rand(ALNUM, 12)),
    ("password", "DB_PASSWORD={}", rand(ALNUM, 10) + "9!"),
    ("password", '"password": "{}",', rand(ALNUM, 16)),
    ("secret", "client_secret: {}", rand(ALNUM, 20) + "1"),
    ("secret", "api_key='{}'", rand(ALNUM, 32)),
    ("secret", "const apiKey = \"{}\";", rand(ALNUM, 28)),
    ("secret", "auth_token := \"{}\"", rand(HEX, 40)),
    ("secret", "signing_key = \"{}\"", rand(HEX, 31) + "Z"),
    (
        "azure-connection-string",
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={};EndpointSuffix=core.windows.net",
        rand(B64, 86) + "==",
    ),
    (
        "azure-connection-string",
        "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=root;SharedAccessKey={}",
        rand(B64, 43) + "=",
    ),
    ("npm-token", "//registry.npmjs.org/:_authToken={}", "npm_" + rand(ALNUM, 36)),
    ("bearer-token", "Authorization: Bearer {}", rand(URLSAFE, 40)),
    ("sendgrid-key", "SENDGRID {}", "SG." + rand(URLSAFE, 22) + "." + rand(URLSAFE, 43)),
    ("stripe-webhook-secret", "endpoint secret {}", "whsec_" + rand(ALNUM, 32)),
]


@pytest.mark.parametrize(("kind", "template", "secret"), PLANTED, ids=[f"{i}-{p[0]}" for i, p in enumerate(PLANTED)])
def test_each_planted_secret_is_redacted(kind: str, template: str, secret: str) -> None:
    text = template.format(secret)
    out, count = redact(text)
    assert secret not in out
    assert count >= 1
    assert "[REDACTED:" in out
    # the most specific rule names the secret (named rules may only add to that)
    assert f"[REDACTED:{kind}]" in out, out


def test_all_planted_secrets_in_one_document() -> None:
    assert len(PLANTED) >= 30
    assert len({kind for kind, _, _ in PLANTED}) >= 15
    doc = "\n\n".join(f"Step {i}: " + t.format(s) for i, (_, t, s) in enumerate(PLANTED))
    out, count = redact(doc)
    for _, _, secret in PLANTED:
        assert secret not in out
    assert count >= len(PLANTED)
    assert out.count("Step ") == len(PLANTED)  # the surrounding prose survives
    assert redact(out) == (out, 0)  # redaction is idempotent


SHA = "3f2a9c1d4e5b6a7f8091a2b3c4d5e6f708192a3b"

UNCHANGED = [
    f"commit {SHA}\nAuthor: Ana <ana@example.com>\n\n    Fix rounding (#42)",
    f"Reverted {SHA[:7]} and {SHA}; see https://github.com/acme/billing/commit/{SHA}",
    f'sha = "{SHA}"',
    f'key = "{SHA}"',
    'password = request.form["password"]',
    "def check_password(password: str) -> bool:\n    return hmac.compare_digest(password, stored)",
    'token_type = "bearer"',
    'cache_key = f"user:{uid}"',
    'sort_key = "created_at"',
    '"key": "sym:billing/api/handlers.py::InvoiceHandler.post"',
    "max_tokens = 4096\nMAX_TOKENS=100000",
    'api_key = os.environ["API_KEY"]',
    "const apiKey = process.env.API_KEY;",
    "secret = settings.SECRET_KEY",
    "password: str\nsecret: Optional[str] = None\ntoken: Token",
    "Password: cfg.Password,",
    "token: ${{ secrets.GITHUB_TOKEN }}",
    'password = "${DB_PASSWORD}"\npassword: "<your-password>"\npassword = "changeme"',
    "postgres://localhost:5432/app and postgres://app@db:5432/app and ssh://git@github.com/acme/x.git",
    "git@github.com:acme/billing.git",
    "http://localhost:8080/health",
    "id = 550e8400-e29b-41d4-a716-446655440000\ncolor: #ff00aa",
    "We use scikit-learn (sk-learn) and task-runner-with-a-long-name-for-tests here.",
    "The token bucket refills every second; rotate the secret key monthly.",
    "Rotate the API key: see the runbook in docs/runbooks/rotate.md",
    "class PasswordResetHandler:\n    def post(self, request):\n        return self.reset_password(request.user)",
    "Authorization: Bearer ${TOKEN}",
    "monkey = 'banana'\nturkey_sandwich = 'with cheese and onions'",
    "INC-042 was caused by 9e8d7c6; ADR-0005 supersedes ADR-0003.",
    "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
    "primary_key = 'invoice_id'\nforeign_key = 'customer_id'",
    "eyJhbGciOi is only the start of a header",
    'toolskey = "VS%0.f0COMNTOOLS" % version',
    'FAILING_EXAMPLES_KEY = "_hypothesis_failing_examples"',
    "min_key = self.G2_node_order.__getitem__",
    'Token: "#cccccc",',
    'help="Specify a proxy in the form scheme://[user:passwd@]proxy.server:port."',
    'password = ":****"',
    'error_token = "Token expired, please log in again"',
]


@pytest.mark.parametrize("text", UNCHANGED)
def test_ordinary_code_prose_and_shas_are_unchanged(text: str) -> None:
    assert redact(text) == (text, 0)
    assert not contains_secret(text)


def test_keeps_the_assignment_and_quotes_around_a_redacted_value() -> None:
    out, n = redact('db_password = "' + rand(ALNUM, 12) + '"  # prod')
    assert out == 'db_password = "[REDACTED:password]"  # prod' and n == 1
    url = "redis://:" + rand(ALNUM, 12) + "@cache:6379/0"
    assert redact(url)[0] == "redis://:[REDACTED:url-password]@cache:6379/0"


def test_unterminated_private_key_is_still_redacted() -> None:
    text = "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(rand(B64, 64) for _ in range(4)) + "\n(truncated)"
    out, n = redact(text)
    assert n == 1 and out.startswith("[REDACTED:private-key]") and out.endswith("(truncated)")


def test_redaction_is_fast_on_large_text() -> None:
    code = (
        "def handler(request):\n    user = request.user\n    total = sum(i.amount for i in items)\n"
        f"    log.info('commit {SHA} key=%s', cache_key)\n    return {{'ok': True}}\n"
    )
    big = code * 8000  # ~1.3 MB of code without secrets
    start = time.perf_counter()
    out, n = redact(big)
    elapsed = time.perf_counter() - start
    assert n == 0 and out == big
    assert elapsed < 3.0, f"redaction took {elapsed:.2f}s"
    pathological = "a" * 200_000 + "=" + "b" * 200_000 + " password" * 2000 + "-----BEGIN PRIVATE KEY-----" * 50
    start = time.perf_counter()
    redact(pathological)
    assert time.perf_counter() - start < 3.0
