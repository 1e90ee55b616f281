"""Secrets never reach disk: a real ``graphmem ingest`` of a repository full of planted credentials
leaves none of them anywhere under the home (graph, indexes, caches), and the code stays findable.

Every credential is built at run time from a seeded generator, so no credential-shaped literal sits
in this file.
"""

from __future__ import annotations

import json
import os
import random
import re
import string
import subprocess
import sys
from pathlib import Path

import pytest

from extractors.secrets import redact

REPO = Path(__file__).resolve().parents[1]

_rng = random.Random(7130)
ALNUM = string.ascii_letters + string.digits
UPPER = string.ascii_uppercase + string.digits
LOWER = string.ascii_lowercase + string.digits
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"
HEX = "0123456789abcdef"


def rand(alphabet: str, n: int) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


def word_password() -> str:
    """A short human-chosen password: a word, digits and a suffix ("hunter2-Zq9")."""
    return _rng.choice(["hunter", "dragon", "falcon", "summer", "tiger"]) + rand(string.digits, 2) + "-" + rand(ALNUM, 4)


def _jwt() -> str:
    return "eyJ" + rand(URLSAFE, 30) + ".eyJ" + rand(URLSAFE, 60) + "." + rand(URLSAFE, 43)


def _pem_body() -> list[str]:
    return [rand(B64, 64) for _ in range(5)]


def _guid() -> str:
    return f"{rand(HEX, 8)}-{rand(HEX, 4)}-{rand(HEX, 4)}-{rand(HEX, 4)}-{rand(HEX, 12)}"


# name -> secret value; every value is distinct and planted somewhere in the repository below.
S: dict[str, str] = {
    "aws_id": "AKIA" + rand(UPPER, 16),
    "aws_secret": rand(B64, 40),
    "ghp": "ghp_" + rand(ALNUM, 36),
    "gho": "gho_" + rand(ALNUM, 36),
    "github_pat": "github_pat_" + rand(ALNUM, 22) + "_" + rand(ALNUM, 59),
    "glpat": "glpat-" + rand(URLSAFE, 20),
    "slack_bot": "xoxb-" + rand(string.digits, 12) + "-" + rand(string.digits, 13) + "-" + rand(ALNUM, 24),
    "slack_user": "xoxp-" + rand(string.digits, 12) + "-" + rand(ALNUM, 32),
    "slack_hook": "https://hooks.slack.com/services/T" + rand(UPPER, 8) + "/B" + rand(UPPER, 8) + "/" + rand(ALNUM, 24),
    "stripe": "sk_live_" + rand(ALNUM, 24),
    "google": "AIza" + rand(URLSAFE, 35),
    "jwt": _jwt(),
    "url_password": rand(ALNUM, 14),
    "discord_hook": "https://discord.com/api/webhooks/" + rand(string.digits, 18) + "/" + rand(URLSAFE, 68),
    "teams_hook": f"https://acme.webhook.office.com/webhookb2/{_guid()}@{_guid()}/IncomingWebhook/"
                  f"{rand(HEX, 32)}/{_guid()}",
    "npm": "npm_" + rand(ALNUM, 36),
    "hf": "hf_" + rand(ALNUM, 34),
    "sendgrid": "SG." + rand(URLSAFE, 22) + "." + rand(URLSAFE, 43),
    "signing_key": rand(ALNUM, 40),
    "db_password": rand(ALNUM, 10) + "7!",
    "service_token": rand(LOWER, 32),
    # prose credentials, in comments, docstrings, commit messages and markdown
    "admin_pw": word_password(),
    "docstring_pw": word_password(),
    "commit_pw": word_password(),
    "passwd_eq": word_password(),
    "pwd_bare": word_password(),
    "token_is": rand(ALNUM, 20),
    "api_key_is": rand(ALNUM, 24),
    "secret_eq": rand(ALNUM, 8) + "-" + rand(ALNUM, 8),
    "yaml_pw": word_password(),
}
PEM = _pem_body()
GO_PEM = _pem_body()
ENV_VALUES = {"env_secret": "envonly-" + rand(ALNUM, 20), "env_stripe": "sk_live_" + rand(ALNUM, 24)}
ID_RSA = _pem_body()


def _pem(body: list[str]) -> str:
    return "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(body) + "\n-----END RSA PRIVATE KEY-----"


PY_BILLING = f'''"""Invoices for the billing service."""

import os

AWS_ACCESS_KEY_ID = "{S["aws_id"]}"
aws_secret_access_key = "{S["aws_secret"]}"
DB_PASSWORD = "{S["db_password"]}"

# the admin password is {S["admin_pw"]} (do not share)


class InvoiceLedger:
    """Keeps the ledger of issued invoices and their line items."""

    def compute_invoice_total(self, lines):
        """Sum the reconciliation amounts; the fallback password is {S["docstring_pw"]}."""
        return sum(line.amount for line in lines)

    def login(self, request):
        password = request.form["password"]
        token = self._next_token()
        return self.check_password(password), token

    def check_password(self, password):
        return password == os.environ["ADMIN_PASSWORD"]

    def _next_token(self):
        return "{S["ghp"]}"
'''

GO_GATEWAY = f'''// Package gateway routes webhooks to the notification fan-out.
package gateway

import "fmt"

const slackWebhook = "{S["slack_hook"]}"
const PAYMENTS_SIGNING_KEY = "{S["signing_key"]}"
const SERVICE_TOKEN = "{S["service_token"]}"

// A key pasted into the code: several lines, so redaction must keep the line numbers below it.
const clientKey = `{_pem(GO_PEM)}`

// Dispatch sends the alert to the on-call channel.
// For the staging box use pwd {S["pwd_bare"]} with the ops account.
func DispatchAlertToOncall(msg string) string {{
	return fmt.Sprintf("%s -> %s", msg, slackWebhook)
}}
'''

JS_CLIENT = f'''// The storefront client: renders the checkout widget.
const stripeKey = "{S["stripe"]}";
const mapsKey = "{S["google"]}";
// session sample: {S["jwt"]}
// publish with {S["npm"]}
const hook = "{S["discord_hook"]}";

function renderCheckoutWidget(cart) {{
  return cart.items.map((item) => item.label).join(", ");
}}

module.exports = {{ renderCheckoutWidget, stripeKey, mapsKey, hook }};
'''

CONFIG_YAML = f'''database_url: postgres://svc:{S["url_password"]}@db.internal:5432/billing
gitlab_token: {S["glpat"]}
service_token: {S["service_token"]}
password: {S["yaml_pw"]}
teams: {S["teams_hook"]}
'''

ADR = f'''# 1. Keep credentials in Vault

## Status

Accepted

## Context

Until now the deploy token is {S["token_is"]} and the api key is {S["api_key_is"]}, both pasted
into the wiki. The Discord alerts go to {S["discord_hook"]}.

The shared secret = {S["secret_eq"]} is still in the old runbook, next to

- password: {S["yaml_pw"]}

## Decision

Move every credential into Vault; CI reads them at run time.
'''

POSTMORTEM = f'''---
id: INC-101
title: Leaked notification credentials
severity: sev2
---

## Summary

A debug log printed the Slack bot token {S["slack_bot"]} and the SendGrid key {S["sendgrid"]}.
The ops runbook said passwd={S["passwd_eq"]} for the bastion, the reports job connected to
postgres://reports:{S["url_password"]}@db.internal:5432/billing, and this key was in the log:

{_pem(PEM)}

## Resolution

Rotated all of them; Teams alerts now post to {S["teams_hook"]}.
'''

README = f'''# Storefront

Local setup: copy the sample config. The old shared secret = {S["secret_eq"]} is revoked.
'''

COMMITS = [
    f"Rotate CI credentials\n\nOld token {S['gho']} and {S['github_pat']} are revoked.",
    f"Fix bastion login\n\npassword: {S['commit_pw']}\nslack user {S['slack_user']}, hf {S['hf']}\n"
    f"CI token {S['glpat']}",
]


def git(repo: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "Ana", "GIT_AUTHOR_EMAIL": "ana@example.com",
           "GIT_COMMITTER_NAME": "Ana", "GIT_COMMITTER_EMAIL": "ana@example.com"}
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)


def build_repo(repo: Path) -> None:
    """A small repository with credentials in code, config, docs, secret files and commit messages."""
    files = {
        "services/billing/ledger.py": PY_BILLING,
        "services/gateway/dispatch.go": GO_GATEWAY,
        "web/client.js": JS_CLIENT,
        "config/app.yaml": CONFIG_YAML,
        "docs/adr/0001-keep-credentials-in-vault.md": ADR,
        "docs/postmortems/INC-101.md": POSTMORTEM,
        "README.md": README,
        ".env": "".join(f"{k.upper()}={v}\n" for k, v in ENV_VALUES.items()),
        "deploy/id_rsa": _pem(ID_RSA) + "\n",
    }
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for i, (path, text) in enumerate(files.items()):
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text, encoding="utf-8")
        if i == 2:
            git(repo, "add", "-A")
            git(repo, "commit", "-q", "-m", COMMITS[0])
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", COMMITS[1])


def graphmem(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("GRAPHMEM_LLM_BASE_URL", None)  # no enrichment: this test is about the deterministic ingest
    return subprocess.run([sys.executable, "-m", "graphmem.cli", "--home", str(home), *args],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=600)


def fragments(value: str) -> set[str]:
    """The secret itself and its distinctive pieces, lower-cased: a tokeniser may have split it
    (BM25 vocabularies hold tokens, not whole strings)."""
    pieces = {value.lower()}
    for run in re.findall(r"[A-Za-z0-9]{10,}", value):
        if re.search(r"[0-9]", run) and re.search(r"[A-Za-z]", run):
            pieces.add(run.lower())
    return pieces


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("secrets-on-disk")
    repo, home = base / "shop", base / "home"
    build_repo(repo)
    out = graphmem(home, "ingest", str(repo), "--no-llm", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["redactions"] >= 20
    assert {".env", "deploy/id_rsa"} <= {s["path"] for s in report["skipped"]}
    return repo, home


def test_no_planted_secret_is_anywhere_under_the_home(ingested: tuple[Path, Path]) -> None:
    _, home = ingested
    planted = [*S.values(), *ENV_VALUES.values(), *PEM, *GO_PEM, *ID_RSA]
    assert len(planted) >= 30 and len(set(planted)) == len(planted)
    files = [p for p in home.rglob("*") if p.is_file()]
    assert any(p.parent.name == "facts" or p.parent.parent.name == "facts" for p in files)  # the parse cache
    leaks: list[str] = []
    for path in files:
        data = path.read_bytes().lower()
        for value in planted:
            for piece in fragments(value):
                if piece.encode() in data:
                    leaks.append(f"{path.relative_to(home)}: {piece}")
    assert not leaks, "\n".join(leaks)


def test_secret_files_are_never_stored(ingested: tuple[Path, Path]) -> None:
    repo, home = ingested
    env_text = (repo / ".env").read_bytes()
    for path in home.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert env_text not in data and b"ENVONLY-" not in data.upper(), path


def test_the_code_is_still_found(ingested: tuple[Path, Path]) -> None:
    _, home = ingested
    for question, key in [
        ("compute invoice total ledger", "sym:services/billing/ledger.py::InvoiceLedger.compute_invoice_total"),
        ("dispatch alert to oncall", "sym:services/gateway/dispatch.go::DispatchAlertToOncall"),
        ("render checkout widget", "sym:web/client.js::renderCheckoutWidget"),
    ]:
        out = graphmem(home, "query", question, "--mode", "bm25", "-k", "5", "--json")
        assert out.returncode == 0, out.stderr
        results = json.loads(out.stdout)["results"]
        assert key in [r["key"] for r in results], [r["key"] for r in results]
    out = graphmem(home, "query", "compute invoice total", "--mode", "bm25", "-k", "3", "--json")
    hit = json.loads(out.stdout)["results"][0]
    # the redacted docstring keeps its words around the marker
    assert "reconciliation amounts" in hit["text"] and "[REDACTED:password]" in hit["text"]
    # a redacted multi-line key above a function leaves the function's lines where they were
    out = graphmem(home, "query", "dispatch alert oncall", "--mode", "bm25", "-k", "3", "--json")
    hit = next(r for r in json.loads(out.stdout)["results"] if r["key"].endswith("::DispatchAlertToOncall"))
    assert "func DispatchAlertToOncall(msg string) string {" in hit["text"]
    assert hit["text"].rstrip().endswith("}") and "BEGIN" not in hit["text"]
    # code that only names credentials is stored as written
    out = graphmem(home, "query", "login request form next token", "--mode", "bm25", "-k", "5", "--json")
    hit = next(r for r in json.loads(out.stdout)["results"] if r["key"].endswith("::InvoiceLedger.login"))
    assert 'password = request.form["password"]' in hit["text"] and "token = self._next_token()" in hit["text"]


# --- the parse cache ------------------------------------------------------------------------------


def test_parsed_facts_are_redacted_and_keep_their_lines() -> None:
    from graphmem.ingest import _parse

    data = GO_GATEWAY.encode()
    facts, found = _parse(("services/gateway/dispatch.go", data))
    text = json.dumps(facts)
    for value in [S["slack_hook"], S["signing_key"], S["pwd_bare"], *GO_PEM]:
        assert value not in text
    assert found >= 4
    assert facts["source"].count("\n") == GO_GATEWAY.count("\n")
    fn = next(sym for sym in facts["symbols"] if sym["name"] == "DispatchAlertToOncall")
    lines = facts["source"].splitlines()
    assert lines[fn["start_line"] - 1].startswith("func DispatchAlertToOncall")


def test_facts_written_under_other_rules_are_dropped(tmp_path: Path) -> None:
    from graphmem.ingest import FactsCache

    legacy = tmp_path / "facts" / "ab" / ("ab" + "0" * 30 + ".json")
    legacy.parent.mkdir(parents=True)
    legacy.write_text(json.dumps({"path": "a.py", "source": "TOKEN = '" + S["ghp"] + "'"}))
    unrelated = tmp_path / "facts" / "notes.txt"
    unrelated.write_text("kept")
    cache = FactsCache.open(tmp_path / "facts")
    assert not legacy.exists() and unrelated.exists()
    assert (tmp_path / "facts" / "FORMAT").read_text().strip() == FactsCache.FORMAT
    cache.put("cd" + "1" * 30, {"path": "b.py"})
    FactsCache.open(tmp_path / "facts")  # same rules: what is cached stays
    assert (tmp_path / "facts" / "cd" / ("cd" + "1" * 30 + ".json")).exists()


# --- the patterns ---------------------------------------------------------------------------------

PW = "hunter2-Zq9"

# (text, the secret it holds)
PROSE: list[tuple[str, str]] = [
    (f"# the admin password is {PW} (do not share)", PW),
    (f'"""Connect; the fallback password is {PW}."""', PW),
    (f"The password for the admin account is '{PW}'.", PW),
    ("the root password was set to s3cr3t99x.", "s3cr3t99x"),
    (f"password: {PW}", PW),
    (f"passwd={PW}", PW),
    (f"// for staging use pwd {PW} with the ops account", PW),
    (f"Password {PW}", PW),
    ("Until now the deploy token is Zx8Kq2LmP0aB7tYw9Q and nobody rotated it", "Zx8Kq2LmP0aB7tYw9Q"),
    ("the api key is Kq2LmP0aB7tYw9Zx8Q, pasted in the wiki", "Kq2LmP0aB7tYw9Zx8Q"),
    ("The old shared secret = Ab3dE5fG-hI7jK9lM is revoked.", "Ab3dE5fG-hI7jK9lM"),
    ("* access key: P0aB7tYw9Zx8Kq2Lm", "P0aB7tYw9Zx8Kq2Lm"),
    ("token: abcDEF123ghi456JKL7.", "abcDEF123ghi456JKL7"),
    (f"**Password:** {PW}", PW),
]


@pytest.mark.parametrize(("text", "secret"), PROSE)
def test_prose_credentials_are_redacted(text: str, secret: str) -> None:
    out, n = redact(text)
    assert secret not in out and n >= 1, out
    assert redact(out) == (out, 0)


# Formats, each built at run time: (marker kind, text).
FORMATS: list[tuple[str, str]] = [
    ("aws-access-key", "key id " + S["aws_id"]),
    ("aws-secret-key", "aws_secret_access_key = " + S["aws_secret"]),
    ("github-token", "export GH=" + S["ghp"]),
    ("github-token", S["github_pat"]),
    ("gitlab-token", "CI uses " + S["glpat"]),
    ("slack-token", "bot " + S["slack_bot"]),
    ("slack-webhook", "POST " + S["slack_hook"]),
    ("stripe-key", "Stripe.api_key = " + S["stripe"]),
    ("google-api-key", "maps " + S["google"]),
    ("jwt", "Authorization sample " + S["jwt"]),
    ("url-password", f"amqp://svc:{S['url_password']}@mq:5672/"),
    ("discord-webhook", "alerts to " + S["discord_hook"]),
    ("teams-webhook", "alerts to " + S["teams_hook"]),
    ("npm-token", "//registry.npmjs.org/:_authToken=" + S["npm"]),
    ("huggingface-token", "HF " + S["hf"]),
    ("private-key", _pem(PEM)),
    ("webhook-url", "https://chat.acme.io/hooks/" + rand(ALNUM, 26)),
    ("secret", "PAYMENTS_SIGNING_KEY = '" + S["signing_key"] + "'"),
    ("secret", "SERVICE_TOKEN=" + S["service_token"]),
    ("password", "DB_PASSWORD=" + S["db_password"]),
]


@pytest.mark.parametrize(("kind", "text"), FORMATS, ids=[f"{i}-{k}" for i, (k, _) in enumerate(FORMATS)])
def test_key_formats_are_redacted(kind: str, text: str) -> None:
    out, n = redact(text)
    assert f"[REDACTED:{kind}]" in out and n >= 1, out


UNCHANGED = [
    'password = request.form["password"]',
    "token = self._next_token()",
    "def check_password(password):",
    "def check_password(password: str) -> bool:",
    "password = new_password2",
    "password = hashed2",
    "token = token_v2",
    "API_TOKEN = get_token2()",
    "token = settings2.value()",
    "if token is None:",
    "while token is not None and password is not None:",
    "password: Optional[str] = None",
    "Password: cfg.Password,",
    "const password = req.body.password;",
    "func Login(password uint64) error",
    "the password is required",
    "The password is hashed with bcrypt2 before storage.",
    "password hashing uses argon2id",
    "the token is sha256-signed and expires after 3600s",
    "the token is v1.2.3 of the format",
    "the api key is rotated monthly",
    "pwd /home/user2/dir && cd $(pwd)",
    "password: <your-password>",
    "the secret is ${DB_SECRET}",
    "See the repository settings/hooks/12345678 page.",
    "token is 32bytes long",
]


@pytest.mark.parametrize("text", UNCHANGED)
def test_code_and_prose_without_secrets_are_unchanged(text: str) -> None:
    assert redact(text) == (text, 0)


def test_keep_lines_leaves_the_line_count() -> None:
    text = "a = 1\n" + _pem(PEM) + "\ndef f():\n    return 2\n"
    out, n = redact(text, keep_lines=True)
    assert n == 1 and out.count("\n") == text.count("\n")
    assert out.splitlines()[-2] == "def f():"
    assert redact(text)[0].count("\n") < text.count("\n")  # by default the block becomes one marker


def test_prose_rules_stay_fast_on_hostile_text() -> None:
    import time

    hostile = ("password is " + "a1" * 300 + " ") * 300 + ("token for a b c d " * 2000) + ("pwd " * 5000)
    start = time.perf_counter()
    redact(hostile)
    assert time.perf_counter() - start < 3.0
