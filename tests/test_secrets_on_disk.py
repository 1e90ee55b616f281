"""Secrets never leak: a repository full of planted credentials goes through a real ``graphmem
ingest`` into each store, ``graphmem reranker train`` and ``graphmem enrich`` (against the local
chat completions double), and none of them is found afterwards in any byte under the home (graph,
indexes, caches, models, training data, logs), in any property of the project's nodes,
relationships and chunks in Neo4j, or in anything the LLM endpoint received.

Every credential is built at run time from a seeded generator, so no credential-shaped literal sits
in this file.
"""

from __future__ import annotations

import base64
import json
import os
import random
import re
import string
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from extractors.secrets import redact
from tests.llm_double import ChatDouble, Reply, text_of

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


# name -> secret value; every value is distinct and planted somewhere in the repository below (or,
# for llm_api_key, in the environment of the enrichment run).
S: dict[str, str] = {
    # cloud providers
    "aws_id": "AKIA" + rand(UPPER, 16),
    "aws_secret": rand(B64, 40),
    "aws_session_id": "ASIA" + rand(UPPER, 16),
    "aws_session_token": "IQoJb3JpZ2luX2Vj" + rand(B64, 180),
    "google": "AIza" + rand(URLSAFE, 35),
    "gcp_oauth": "GOCSPX-" + rand(URLSAFE, 28),
    "azure_account_key": rand(B64, 86) + "==",
    "azure_client_secret": rand(ALNUM, 3) + "8Q~" + rand(ALNUM + "~._-", 31),
    "do_token": "dop_v1_" + rand(HEX, 64),
    "vault_token": "hvs.CAESI" + rand(URLSAFE, 88),
    # code hosting, chat, payments, registries, model providers
    "ghp": "ghp_" + rand(ALNUM, 36),
    "gho": "gho_" + rand(ALNUM, 36),
    "ghs": "ghs_" + rand(ALNUM, 36),
    "github_pat": "github_pat_" + rand(ALNUM, 22) + "_" + rand(ALNUM, 59),
    "glpat": "glpat-" + rand(URLSAFE, 20),
    "glrt": "glrt-" + rand(URLSAFE, 20),
    "slack_bot": "xoxb-" + rand(string.digits, 12) + "-" + rand(string.digits, 13) + "-" + rand(ALNUM, 24),
    "slack_user": "xoxp-" + rand(string.digits, 12) + "-" + rand(ALNUM, 32),
    "slack_app": "xapp-1-A" + rand(UPPER, 10) + "-" + rand(string.digits, 13) + "-" + rand(HEX, 64),
    "slack_hook": "https://hooks.slack.com/services/T" + rand(UPPER, 8) + "/B" + rand(UPPER, 8) + "/" + rand(ALNUM, 24),
    "stripe": "sk_live_" + rand(ALNUM, 24),
    "stripe_restricted": "rk_live_" + rand(ALNUM, 24),
    "stripe_whsec": "whsec_" + rand(ALNUM, 32),
    "npm": "npm_" + rand(ALNUM, 36),
    "pypi": "pypi-AgEIcHlwaS5vcmc" + rand(URLSAFE, 70),
    "hf": "hf_" + rand(ALNUM, 34),
    "sendgrid": "SG." + rand(URLSAFE, 22) + "." + rand(URLSAFE, 43),
    "twilio": "SK" + rand(HEX, 32),
    "openai": "sk-proj-" + rand(URLSAFE, 100),
    "anthropic": "sk-ant-api03-" + rand(URLSAFE, 93) + "AA",
    "llm_api_key": "sk-" + rand(ALNUM, 48),
    "jwt": _jwt(),
    "jwt_header": _jwt(),
    "discord_hook": "https://discord.com/api/webhooks/" + rand(string.digits, 18) + "/" + rand(URLSAFE, 68),
    "teams_hook": f"https://acme.webhook.office.com/webhookb2/{_guid()}@{_guid()}/IncomingWebhook/"
                  f"{rand(HEX, 32)}/{_guid()}",
    "chat_hook": "https://chat.acme.io/hooks/" + rand(ALNUM, 26),
    # connection strings
    "url_password": rand(ALNUM, 14),  # postgres://
    "mongo_password": rand(ALNUM, 16),
    "redis_password": rand(ALNUM, 20),
    "amqp_password": rand(ALNUM, 12) + "9",
    "mysql_password": rand(ALNUM, 12) + "4",
    "smtp_password": rand(ALNUM, 12) + "2",
    "jdbc_pg_password": rand(ALNUM, 12) + "5",
    "mssql_password": rand(ALNUM, 12) + "6!",
    "oracle_password": rand(ALNUM, 12) + "3",
    "ado_password": rand(ALNUM, 12) + "8",
    # secrets in code and configuration
    "db_password": rand(ALNUM, 10) + "7!",
    "signing_key": rand(ALNUM, 40),
    "service_token": rand(LOWER, 32),
    "java_pw": word_password(),
    "props_pw": word_password(),
    "go_struct_pw": word_password(),
    "rust_api_key": rand(ALNUM, 32),
    "ts_fallback": rand(ALNUM, 32),
    "api_key_header": rand(HEX, 32),
    "rails_secret": rand(HEX, 128),
    "xml_pw": word_password(),
    "dotnet_key": rand(ALNUM, 28),
    "toml_pw": word_password(),
    "setup_cfg_pw": word_password(),
    "spring_pw": word_password(),
    "compose_pw": word_password(),
    "k8s_b64": base64.b64encode(rand(ALNUM, 18).encode()).decode(),
    "basic_auth": base64.b64encode(f"deploy:{rand(ALNUM, 16)}".encode()).decode(),
    "curl_pw": word_password(),
    "mysql_cli_pw": word_password(),
    "pgpassword": word_password(),
    "netrc_pw": word_password(),
    # prose: comments, docstrings, commit messages, decision records, postmortems, documents
    "admin_pw": word_password(),
    "docstring_pw": word_password(),
    "commit_pw": word_password(),
    "passwd_eq": word_password(),
    "pwd_bare": word_password(),
    "token_is": rand(ALNUM, 20),
    "api_key_is": rand(ALNUM, 24),
    "secret_eq": rand(ALNUM, 8) + "-" + rand(ALNUM, 8),
    "yaml_pw": word_password(),
    "passphrase_for": word_password(),
    "root_pw_reset": word_password(),
    "hmac_hex": rand(HEX, 64),
    "encryption_key": rand(B64, 43) + "=",
}
# Private keys, each a list of body lines (every line is looked for on its own).
PEM = _pem_body()  # RSA, in a postmortem
GO_PEM = _pem_body()  # in a Go raw string
OPENSSH_PEM = [rand(B64, 70) for _ in range(50)]  # in a runbook's code block: longer than a chunk
EC_PEM = _pem_body()  # in Java string concatenation
PGP_PEM = _pem_body()  # in a runbook
GCP_PEM = _pem_body()  # in a service account JSON with \n escapes, inside Python
ID_RSA = _pem_body()  # a key file: never opened
KEYS = {"rsa": PEM, "go": GO_PEM, "openssh": OPENSSH_PEM, "ec": EC_PEM, "pgp": PGP_PEM, "gcp": GCP_PEM,
        "id_rsa": ID_RSA}
ENV_VALUES = {"env_secret": "envonly-" + rand(ALNUM, 20), "env_stripe": "sk_live_" + rand(ALNUM, 24)}


def _pem(body: list[str], kind: str = "RSA") -> str:
    label = f"{kind} PRIVATE KEY" if kind else "PRIVATE KEY"
    return f"-----BEGIN {label}-----\n" + "\n".join(body) + f"\n-----END {label}-----"


def _pgp(body: list[str]) -> str:
    return ("-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n" + "\n".join(body)
            + "\n=" + rand(B64, 4) + "\n-----END PGP PRIVATE KEY BLOCK-----")


def _java_pem(body: list[str]) -> str:
    """The key as Java source writes a multi-line string: quoted lines with \\n, joined by +."""
    lines = ["-----BEGIN EC PRIVATE KEY-----", *body, "-----END EC PRIVATE KEY-----"]
    return " +\n".join(f'        "{line}\\n"' for line in lines)


PY_BILLING = f'''"""Invoices for the billing service."""

import os

import psycopg2
import redis

AWS_ACCESS_KEY_ID = "{S["aws_id"]}"
aws_secret_access_key = "{S["aws_secret"]}"
DB_PASSWORD = "{S["db_password"]}"
OPENAI_API_KEY = "{S["openai"]}"
STRIPE_WEBHOOK_SECRET = "{S["stripe_whsec"]}"

# the admin password is {S["admin_pw"]} (do not share)
REPORTS_DSN = "postgresql://reports:{S["url_password"]}@db.internal:5432/billing"
cache = redis.from_url("redis://:{S["redis_password"]}@cache.internal:6379/0")


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

    def open_reports(self):
        """Connect to the reports replica with the read-only role."""
        return psycopg2.connect(REPORTS_DSN)

    def _next_token(self):
        return "{S["ghp"]}"
'''

# A service account JSON pasted into a test helper: the key's line breaks are \\n escapes.
PY_GCP_FIXTURE = '''"""A service account for the billing integration tests."""

SERVICE_ACCOUNT = {
    "type": "service_account",
    "project_id": "acme-billing",
    "private_key": "-----BEGIN PRIVATE KEY-----\\n''' + "\\n".join(GCP_PEM) + '''\\n-----END PRIVATE KEY-----\\n",
    "client_email": "ci@acme-billing.iam.gserviceaccount.com",
}


def service_account_email():
    """The account the integration tests act as."""
    return SERVICE_ACCOUNT["client_email"]
'''

GO_GATEWAY = f'''// Package gateway routes webhooks to the notification fan-out.
package gateway

import (
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"
)

const slackWebhook = "{S["slack_hook"]}"
const PAYMENTS_SIGNING_KEY = "{S["signing_key"]}"
const SERVICE_TOKEN = "{S["service_token"]}"
var mongoURI = "mongodb+srv://gateway:{S["mongo_password"]}@cluster0.ab1cd.mongodb.net/prod?retryWrites=true"

type smtpConfig struct {{
	Host     string
	Password string
}}

var alerts = smtpConfig{{Host: "smtp.acme.io", Password: "{S["go_struct_pw"]}"}}

// A key pasted into the code: several lines, so redaction must keep the line numbers below it.
const clientKey = `{_pem(GO_PEM)}`

// Dispatch sends the alert to the on-call channel.
// For the staging box use pwd {S["pwd_bare"]} with the ops account.
func DispatchAlertToOncall(msg string) string {{
	return fmt.Sprintf("%s -> %s", msg, slackWebhook)
}}

// PublishEvent puts the event on the bus; the Twilio SMS fallback key is {S["twilio"]}.
func PublishEvent(body []byte) error {{
	conn, err := amqp.Dial("amqp://gw:{S["amqp_password"]}@mq.internal:5672/")
	if err != nil {{
		return err
	}}
	defer conn.Close()
	return nil
}}
'''

JS_CLIENT = f'''// The storefront client: renders the checkout widget.
const stripeKey = "{S["stripe"]}";
const mapsKey = "{S["google"]}";
// session sample: {S["jwt"]}
// publish with {S["npm"]}
const hook = "{S["discord_hook"]}";
const anthropicKey = "{S["anthropic"]}";
const relay = "{S["chat_hook"]}";

function renderCheckoutWidget(cart) {{
  return cart.items.map((item) => item.label).join(", ");
}}

module.exports = {{ renderCheckoutWidget, stripeKey, mapsKey, hook, anthropicKey, relay }};
'''

TS_API = f'''// Calls the storefront API.
const clientSecret = process.env.CLIENT_SECRET ?? "{S["ts_fallback"]}";
const azureStorage = "DefaultEndpointsProtocol=https;AccountName=acmeshop;AccountKey={S["azure_account_key"]};EndpointSuffix=core.windows.net";

/** Lists the open orders of the signed-in customer. */
export async function fetchOpenOrders(customer: string): Promise<Response> {{
  return fetch(`https://api.acme.io/customers/${{customer}}/orders`, {{
    headers: {{ "X-Api-Key": "{S["api_key_header"]}", Authorization: "Bearer {S["jwt_header"]}" }},
  }});
}}

export {{ clientSecret, azureStorage }};
'''

JAVA_DB = f'''package com.acme.ledger;

import java.sql.Connection;
import java.sql.DriverManager;
import java.util.Properties;

/** Opens the ledger's database connections. */
public class LedgerDatabase {{
    private static final String DB_PASSWORD = "{S["java_pw"]}";
    static final String PG_URL = "jdbc:postgresql://db:5432/ledger?user=ledger&password={S["jdbc_pg_password"]}&ssl=true";
    static final String MSSQL_URL = "jdbc:sqlserver://mssql:1433;databaseName=ledger;user=sa;password={S["mssql_password"]};encrypt=true";
    static final String ORACLE_URL = "jdbc:oracle:thin:scott/{S["oracle_password"]}@//ora.internal:1521/ORCL";
    static final String SIGNING_KEY_PEM =
{_java_pem(EC_PEM)};

    /** Connects to the primary ledger database as the ledger role. */
    public Connection openLedgerConnection() throws Exception {{
        Properties props = new Properties();
        props.setProperty("user", "ledger");
        props.setProperty("password", "{S["props_pw"]}");
        return DriverManager.getConnection(PG_URL, props);
    }}
}}
'''

RUST_SEARCH = f'''//! Full-text search over the catalogue.

const HF_TOKEN: &str = "{S["hf"]}";

/// Builds the search client; the vault token is {S["vault_token"]} until the agent is deployed.
pub fn build_search_client(endpoint: &str) -> Client {{
    let api_key = "{S["rust_api_key"]}";
    Client::new(endpoint, api_key, HF_TOKEN)
}}
'''

PYPROJECT = f'''[project]
name = "shop"
version = "0.1.0"

[tool.poetry.http-basic.private]
username = "ci"
password = "{S["toml_pw"]}"

[tool.semantic_release]
gitlab_token = "{S["glrt"]}"
'''

SETUP_CFG = f'''[metadata]
name = shop

[pypi]
username = __token__
password = {S["pypi"]}

[upload]
password = {S["setup_cfg_pw"]}
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

The Google login's OAuth client secret is {S["gcp_oauth"]}, and CI still exports
AZURE_CLIENT_SECRET={S["azure_client_secret"]} in its settings.

## Decision

Move every credential into Vault; CI reads them at run time.
'''

ADR_2 = f'''# 2. Move the catalogue to managed MongoDB

## Status

Accepted

## Context

The gateway reaches the cluster at mongodb+srv://gateway:{S["mongo_password"]}@cluster0.ab1cd.mongodb.net/prod,
and ops checks it with `curl -u admin:{S["curl_pw"]} https://ops.acme.io/mongo/health`.
The ledger still talks to Oracle through jdbc:oracle:thin:scott/{S["oracle_password"]}@//ora.internal:1521/ORCL.

## Decision

Use the managed cluster; the passphrase for the deploy key: {S["passphrase_for"]} moves to Vault.
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

The job's temporary AWS credentials were in the log too:

```ini
[reports]
aws_access_key_id = {S["aws_session_id"]}
aws_session_token = {S["aws_session_token"]}
```

## Resolution

Rotated all of them; Teams alerts now post to {S["teams_hook"]}. The root password was reset to
{S["root_pw_reset"]} until Vault took over.
'''

POSTMORTEM_2 = f'''---
id: INC-102
title: Cache outage after the Redis failover
severity: sev1
---

## Summary

The Slack app token {S["slack_app"]} posted the alerts. The cache came back at
redis://:{S["redis_password"]}@cache.internal:6379/0 after the failover; the health check used
`Authorization: Basic {S["basic_auth"]}`.

The Kubernetes secret applied during the incident:

```yaml
apiVersion: v1
kind: Secret
data:
  password: {S["k8s_b64"]}
```

The droplet was rebuilt with the DigitalOcean token {S["do_token"]}; the HMAC secret: {S["hmac_hex"]}
signs the webhooks, and the encryption key: {S["encryption_key"]} protects the backups.

## Resolution

Moved the cache behind the sidecar.
'''

README = f'''# Storefront

Local setup: copy the sample config. The old shared secret = {S["secret_eq"]} is revoked.
CI reads `GITHUB_TOKEN={S["ghs"]}` from its settings.
'''

RUNBOOK = f'''# Operations runbook

## Databases

Connect to the reporting database with `PGPASSWORD={S["pgpassword"]} psql -h db.internal reports`
or to MySQL with `mysql -h db.internal -uroot -p{S["mysql_cli_pw"]} shop`.

docker-compose for local work:

```yaml
services:
  db:
    environment:
      POSTGRES_PASSWORD: {S["compose_pw"]}
  app:
    environment:
      DATABASE_URL: mysql://root:{S["mysql_password"]}@db:3306/shop
      SMTP_URL: smtps://alerts:{S["smtp_password"]}@smtp.acme.io:465
```

Spring services read `spring.datasource.password={S["spring_pw"]}`; the .NET admin tool reads
`Server=sql.internal;Database=shop;User Id=sa;Password={S["ado_password"]};` and its app.config:

```xml
<appSettings>
  <add key="ApiKey" value="{S["dotnet_key"]}" />
</appSettings>
<servers>
  <server><id>nexus</id><username>deploy</username><password>{S["xml_pw"]}</password></server>
</servers>
```

The Rails admin has `config.secret_key_base = "{S["rails_secret"]}"`.

## Access

`~/.netrc`: `machine api.acme.io login deploy password {S["netrc_pw"]}`. Vault: `export VAULT_TOKEN={S["vault_token"]}`.

The bastion's key:

```
{_pem(OPENSSH_PEM, "OPENSSH")}
```

The release signing key:

{_pgp(PGP_PEM)}
'''

COMMITS = [
    f"Rotate CI credentials\n\nOld token {S['gho']} and {S['github_pat']} are revoked.",
    f"Rotate Stripe restricted key\n\n{S['stripe_restricted']} is revoked; the webhook secret {S['stripe_whsec']} "
    f"moved to Vault.",
    f"Deploy the droplet\n\nUses the DigitalOcean token {S['do_token']} for now and AWS key {S['aws_session_id']}.",
    f"Fix bastion login\n\npassword: {S['commit_pw']}\nslack user {S['slack_user']}, hf {S['hf']}\n"
    f"CI token {S['glpat']}",
]


def git(repo: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "Ana", "GIT_AUTHOR_EMAIL": "ana@example.com",
           "GIT_COMMITTER_NAME": "Ana", "GIT_COMMITTER_EMAIL": "ana@example.com"}
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)


FILES = {
    "services/billing/ledger.py": PY_BILLING,
    "services/billing/gcp_fixture.py": PY_GCP_FIXTURE,
    "services/gateway/dispatch.go": GO_GATEWAY,
    "web/client.js": JS_CLIENT,
    "web/api.ts": TS_API,
    "services/ledger/src/main/java/com/acme/ledger/LedgerDatabase.java": JAVA_DB,
    "services/search/src/lib.rs": RUST_SEARCH,
    "pyproject.toml": PYPROJECT,
    "setup.cfg": SETUP_CFG,
    "config/app.yaml": CONFIG_YAML,
    "docs/adr/0001-keep-credentials-in-vault.md": ADR,
    "docs/adr/0002-move-the-catalogue-to-managed-mongodb.md": ADR_2,
    "docs/postmortems/INC-101.md": POSTMORTEM,
    "docs/postmortems/INC-102.md": POSTMORTEM_2,
    "docs/runbook.md": RUNBOOK,
    "README.md": README,
    ".env": "".join(f"{k.upper()}={v}\n" for k, v in ENV_VALUES.items()),
    "deploy/id_rsa": _pem(ID_RSA) + "\n",
}


def build_repo(repo: Path) -> None:
    """A repository with credentials in code, configuration, documents, key files and commit messages."""
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    paths = list(FILES)
    cuts = [3, 7, 11, len(paths)]  # one commit per slice of the files
    done = 0
    for cut, message in zip(cuts, COMMITS):
        for path in paths[done:cut]:
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            (repo / path).write_text(FILES[path], encoding="utf-8")
        done = cut
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", message)


def planted() -> dict[str, str]:
    """Every planted secret by name: the values of S, the secret files' values, each key line."""
    out = dict(S)
    out.update(ENV_VALUES)
    for kind, body in KEYS.items():
        out.update({f"{kind}_key_line{i}": line for i, line in enumerate(body)})
    return out


def test_the_planted_secrets_are_many_distinct_and_of_many_kinds() -> None:
    values = list(planted().values())
    assert len(set(values)) == len(values)
    secrets = len(S) + len(ENV_VALUES) + len(KEYS)  # a key counts once, however many lines it has
    assert secrets >= 60, secrets
    text = "\n".join(FILES.values()) + "\n".join(COMMITS)
    missing = [name for name, value in planted().items() if value not in text and name != "llm_api_key"]
    assert not missing  # each is really in the repository
    kinds = set(re.findall(r"\[REDACTED:([a-z0-9-]+)\]", redact(text)[0]))
    assert len(kinds) >= 20, sorted(kinds)


def fragments(value: str) -> set[str]:
    """The secret itself and its distinctive pieces, lower-cased: a tokeniser may have split it
    (BM25 vocabularies hold tokens, not whole strings)."""
    pieces = {value.lower()}
    for run in re.findall(r"[A-Za-z0-9]{10,}", value):
        if re.search(r"[0-9]", run) and re.search(r"[A-Za-z]", run):
            pieces.add(run.lower())
    return pieces


_PIECES = sorted({(piece, name) for name, value in planted().items() for piece in fragments(value)})
# Every piece is made of these bytes, so an occurrence of one lies inside a run of them at least as
# long as the shortest piece: looking for the pieces in those runs only finds exactly what looking
# in the whole file would, and skips most of a model's weights at C speed.
_ALPHABET = sorted({c for piece, _ in _PIECES for c in piece.encode()})
_RUNS = re.compile(b"[" + b"".join(re.escape(bytes([c])) for c in _ALPHABET) + b"]{%d,}"
                   % min(len(piece) for piece, _ in _PIECES))


def leaks_in(data: bytes | str, where: str) -> list[str]:
    """``where: <secret name> (<piece>)`` for every planted piece ``data`` holds (in any case)."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    runs = b"\n".join(_RUNS.findall(data.lower())).decode("ascii")
    return [f"{where}: {name} ({piece})" for piece, name in _PIECES if piece in runs]


def scan_files(root: Path, *, since: float | None = None) -> tuple[int, list[str]]:
    """How many files under ``root`` were read (only those changed after ``since``, when given),
    and the leaks they hold. Files are read as bytes: SQLite pages, npz, ONNX and JSON alike."""
    count, leaks = 0, []
    for path in root.rglob("*"):
        if not path.is_file() or (since is not None and path.stat().st_mtime < since):
            continue
        count += 1
        leaks += leaks_in(path.read_bytes(), str(path.relative_to(root)))
    return count, leaks


def graphmem(home: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # No endpoint, store or project from the caller's environment: each run says what it uses.
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith("GRAPHMEM_LLM_") and k not in ("GRAPHMEM_STORE", "GRAPHMEM_PROJECT")}
    return subprocess.run([sys.executable, "-m", "graphmem.cli", "--home", str(home), *args],
                          capture_output=True, text=True, env={**clean, "PYTHONPATH": str(REPO), **(env or {})},
                          cwd=REPO, timeout=600)


def echoing(request: dict[str, Any]) -> Reply:
    """The double's answer: up to 25 words of the text it was sent, as entities. Whatever the
    endpoint receives thus flows back into the graph, where the scans look for it."""
    words = list(dict.fromkeys(re.findall(r"[A-Za-z][A-Za-z0-9_]{3,40}", text_of(request))))[:25]
    return Reply.answer([(w, "concept") for w in words])


def enrich_env(double: ChatDouble) -> dict[str, str]:
    return {"GRAPHMEM_LLM_BASE_URL": double.url, "GRAPHMEM_LLM_MODEL": "test-model",
            "GRAPHMEM_LLM_API_KEY": S["llm_api_key"], "GRAPHMEM_LLM_BACKOFF": "0.01"}


@dataclass
class Run:
    """One store's run: the repository, its home, the project, and what the LLM double received."""

    repo: Path
    home: Path
    project: str
    requests: list[dict[str, Any]]
    started: float
    model_cache: Path


def _ingest(run: Run, *store: str) -> None:
    out = graphmem(run.home, *store, "ingest", str(run.repo), "--project", run.project, "--no-llm", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["redactions"] >= 60, report["redactions"]
    assert {".env", "deploy/id_rsa"} <= {s["path"] for s in report["skipped"]}


def _enrich(run: Run, *store: str) -> None:
    with ChatDouble(echoing) as double:
        out = graphmem(run.home, *store, "--project", run.project, "enrich", "--json", env=enrich_env(double))
        assert out.returncode == 0, out.stderr
        result = json.loads(out.stdout)
        assert result["complete"] and result["called"] > 10 and result["written"]["mentions"] > 0, result
        run.requests.extend(double.requests)


def _model_cache() -> Path:
    from graphmem.retrieval.embed import model_cache_dir

    return model_cache_dir()


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("secrets-repo") / "shop"
    build_repo(repo)
    return repo


@pytest.fixture(scope="module")
def embedded(shop: Path, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The repository ingested into the embedded store."""
    run = Run(shop, tmp_path_factory.mktemp("secrets-embedded") / "home", "shop", [], time.time(), _model_cache())
    _ingest(run)
    return run


@pytest.fixture(scope="module")
def embedded_trained_and_enriched(embedded: Run) -> Run:
    """The embedded project after ``graphmem reranker train`` and ``graphmem enrich``."""
    out = graphmem(embedded.home, "--project", embedded.project, "reranker", "train", "--budget", "10",
                   "--max-pairs", "64", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["pairs"] > 0
    _enrich(embedded)
    return embedded


@pytest.fixture(scope="module")
def in_neo4j(shop: Path, neo4j_schema: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """The repository ingested into Neo4j (a fresh project), then enriched; dropped afterwards."""
    from graphmem.stores.neo4j import Neo4jStore

    project = f"shop-{uuid.uuid4().hex[:8]}"
    run = Run(shop, tmp_path_factory.mktemp("secrets-neo4j") / "home", project, [], time.time(), _model_cache())
    try:
        _ingest(run, "--store", "neo4j")
        yield run
    finally:
        Neo4jStore(neo4j_schema, project, database=os.environ.get("NEO4J_DATABASE")).drop_project()


def neo4j_texts(driver: Any, project: str) -> Iterable[tuple[str, str]]:
    """``(where, text)`` for every node (chunks, meta and source records included) and every
    relationship of ``project``: labels or type and all properties, as JSON."""
    database = os.environ.get("NEO4J_DATABASE")
    nodes = driver.execute_query("MATCH (n {project: $p}) RETURN elementId(n) AS id, labels(n) AS labels, "
                                 "properties(n) AS props", p=project, database_=database).records
    for r in nodes:
        yield f"node {r['labels']} {r['props'].get('key') or r['props'].get('id') or r['id']}", \
            json.dumps([r["labels"], r["props"]], default=str)
    rels = driver.execute_query("MATCH (a {project: $p})-[r]->(b) RETURN type(r) AS type, properties(r) AS props, "
                                "a.key AS src, b.key AS dst", p=project, database_=database).records
    for r in rels:
        yield f"rel {r['src']} -{r['type']}-> {r['dst']}", json.dumps([r["type"], r["props"]], default=str)


def assert_nothing_leaked(run: Run, driver: Any | None = None) -> None:
    """Scan the home, model files written since the run began, the LLM requests and Neo4j."""
    files, leaks = scan_files(run.home)
    assert files > 10
    if run.model_cache.is_dir():
        leaks += scan_files(run.model_cache, since=run.started)[1]
    for i, request in enumerate(run.requests):
        leaks += leaks_in(json.dumps(request), f"LLM request {i}")
    if driver is not None:
        elements = 0
        for where, text in neo4j_texts(driver, run.project):
            elements += 1
            leaks += leaks_in(text, where)
        assert elements > 100, elements
    assert not leaks, f"{len(leaks)} leaks:\n" + "\n".join(leaks)


def test_no_planted_secret_is_anywhere_under_the_home_after_ingest(embedded: Run) -> None:
    assert_nothing_leaked(embedded)
    files = [p for p in embedded.home.rglob("*") if p.is_file()]
    assert any("facts" in p.relative_to(embedded.home).parts for p in files)  # the parse cache was scanned


def test_no_planted_secret_is_anywhere_after_training_and_enrichment(embedded_trained_and_enriched: Run) -> None:
    run = embedded_trained_and_enriched
    reranker = run.home / run.project / "reranker"
    assert (reranker / "graphmem-reranker.json").is_file() and any(reranker.rglob("*.onnx"))
    assert (run.home / "cache" / "llm").is_dir() and len(run.requests) > 10
    sent = "\n".join(text_of(r) for r in run.requests)
    assert sent.count("[REDACTED:") >= 40  # what was sent is the redacted text, not nothing
    assert_nothing_leaked(run)


@pytest.mark.neo4j
def test_no_planted_secret_is_in_neo4j_or_under_its_home(in_neo4j: Run, neo4j_schema: Any) -> None:
    assert_nothing_leaked(in_neo4j, neo4j_schema)
    _enrich(in_neo4j, "--store", "neo4j")
    assert_nothing_leaked(in_neo4j, neo4j_schema)


def test_secret_files_are_never_stored(embedded: Run) -> None:
    env_text = (embedded.repo / ".env").read_bytes()
    for path in embedded.home.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert env_text not in data and b"ENVONLY-" not in data.upper(), path


def test_the_code_is_still_found(embedded: Run) -> None:
    home = embedded.home
    for question, key in [
        ("compute invoice total ledger", "sym:services/billing/ledger.py::InvoiceLedger.compute_invoice_total"),
        ("dispatch alert to oncall", "sym:services/gateway/dispatch.go::DispatchAlertToOncall"),
        ("render checkout widget", "sym:web/client.js::renderCheckoutWidget"),
        ("open ledger connection", "sym:services/ledger/src/main/java/com/acme/ledger/LedgerDatabase.java::"
                                   "LedgerDatabase.openLedgerConnection"),
        ("build search client", "sym:services/search/src/lib.rs::build_search_client"),
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
    (f"The root password was reset to\n{PW} until Vault took over.", PW),  # wrapped prose
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
    ("digitalocean-token", "the DigitalOcean token " + S["do_token"]),
    ("vault-token", "vault login " + S["vault_token"]),
    ("url-password", f"jdbc:oracle:thin:scott/{S['oracle_password']}@//ora:1521/ORCL"),
    ("url-password", f'"jdbc:postgresql://db/app?user=app&password={S["jdbc_pg_password"]}&ssl=true"'),
    ("url-password", f"Server=sql;User Id=sa;Password={S['ado_password']};"),
    ("password", f"curl -u admin:{S['curl_pw']} https://ops.acme.io/health"),
    ("password", f"mysql -h db -uroot -p{S['mysql_cli_pw']} shop"),
    ("password", f'props.setProperty("password", "{S["props_pw"]}");'),
    ("password", f"<server><password>{S['xml_pw']}</password></server>"),
    ("secret", f'<add key="ApiKey" value="{S["dotnet_key"]}" />'),
    ("secret", f'config.secret_key_base = "{S["rails_secret"]}"'),
    ("secret", f'const clientSecret = process.env.CLIENT_SECRET ?? "{S["ts_fallback"]}";'),
    ("secret", f'os.environ.setdefault("API_TOKEN", "{S["rust_api_key"]}")'),
]


@pytest.mark.parametrize(("text", "body"), [(PY_GCP_FIXTURE, GCP_PEM), (JAVA_DB, EC_PEM), (RUNBOOK, PGP_PEM)],
                         ids=["json-with-escaped-newlines", "java-concatenation", "pgp-armour"])
def test_keys_written_as_string_literals_are_redacted_whole(text: str, body: list[str]) -> None:
    out, n = redact(text, keep_lines=True)
    assert n >= 1 and "[REDACTED:private-key]" in out and out.count("\n") == text.count("\n")
    assert not [line for line in body if line in out or line[:20] in out]


def test_secrets_are_redacted_before_text_is_split_into_chunks() -> None:
    """A key longer than a chunk, or with a blank line inside, is one secret, not pieces of one."""
    from extractors.text import split_paragraphs

    text = "Intro.\n\n" + RUNBOOK + "\n\nOutro."
    pieces = split_paragraphs(text, 1, 400)
    assert len(pieces) > 3 and pieces[-1].end_line == text.count("\n") + 1
    joined = "\n".join(p.text for p in pieces)
    assert not leaks_in(joined, "chunks")
    assert "[REDACTED:private-key]" in joined


def test_the_scan_finds_what_is_planted() -> None:
    """The scanner itself: a secret inside binary data, in another case, or only a piece of it."""
    blob = os.urandom(4096) + S["jwt"].upper().encode() + os.urandom(4096)
    assert any("jwt" in leak for leak in leaks_in(blob, "blob"))
    piece = max(fragments(S["github_pat"]) - {S["github_pat"].lower()}, key=len)
    assert leaks_in(b"\x00\x01" + piece.encode() + b"\xff", "blob")
    assert leaks_in(json.dumps({"v": S["admin_pw"]}), "json")
    assert not leaks_in(redact(PY_BILLING)[0], "redacted")


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
    'tokenizer = AutoTokenizer.from_pretrained("sentence-transformers/all-MiniLM-L6-v2")',
    'TOKEN_URL = "https://auth.acme.io/oauth2/v1/token"',
    'access_token_type = "urn:ietf:params:oauth:token-type:jwt"',
    'HEX_DIGITS_FOR_TOKENS = "0123456789abcdef"',
    'image_token = "<|image_pad|>"',
    'curl -u "admin:${OPS_PASSWORD}" https://ops.acme.io/health',
    'SPECIAL = ("token", "eos_token", "Qwen2_5OmniToken2WavBigVGANModel")',
    '_no_split_modules = ["Qwen2_5OmniToken2WavDiTModel", "Qwen2_5OmniToken2WavBigVGANModel"]',
    'SECRET_FILES = (".htpasswd", ".pgpass")',
    "<password>${env.NEXUS_PASSWORD}</password>",
    'curl -u "$USER:$PASS" https://ops.acme.io/health',
    "mysql -u root -p shop",
    "jdbc:postgresql://db/app?user=app&password=${DB_PASSWORD}",
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
