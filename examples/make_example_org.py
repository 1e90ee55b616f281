#!/usr/bin/env python3
"""Create "acme", a small example software organisation, as a real git repository.

    python examples/make_example_org.py OUTDIR [--now YYYY-MM-DD] [--force]

Writes the monorepo to ``OUTDIR/acme`` (a git repository with ~35 commits spread over the four
months before ``--now``) and the ground truth about it to ``OUTDIR/facts.json``, outside the
repository so that ingesting the repository never sees the answers. Standard library only.
Deterministic: the same ``--now`` gives the same commit shas on every machine (identities, dates,
messages and file contents are fixed; the user's git configuration is ignored).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

# --- people and teams ---------------------------------------------------------------------------

PEOPLE = {
    "ana": ("Ana Lima", "ana@acme.dev"),
    "bo": ("Bo Chen", "bo@acme.dev"),
    "carla": ("Carla Diaz", "carla@acme.dev"),
    "dev": ("Dev Patel", "dev@acme.dev"),
    "emma": ("Emma Novak", "emma@acme.dev"),
    "femi": ("Femi Okafor", "femi@acme.dev"),
}
TEAMS = {
    "payments": {"members": ["ana", "bo"], "services": ["billing", "ledger"]},
    "platform": {"members": ["carla", "dev"], "services": ["gateway"]},
    "growth": {"members": ["emma", "femi"], "services": ["notifications"]},
}
SERVICES = {
    "billing": {
        "language": "python",
        "paths": ["services/billing/", "clients/ts/billing.ts"],
        "description": "Invoices: creation, tax, finalisation. Python.",
    },
    "gateway": {
        "language": "typescript",
        "paths": ["services/gateway/"],
        "description": "Public API gateway: authentication, rate limits, routing. TypeScript.",
    },
    "ledger": {
        "language": "go",
        "paths": ["services/ledger/", "clients/python/acme_clients/ledger.py",
                  "clients/java/src/main/java/dev/acme/clients/ledger/"],
        "description": "Double-entry ledger of account balances. Go.",
    },
    "notifications": {
        "language": "java",
        "paths": ["services/notifications/", "clients/python/acme_clients/notifications.py",
                  "clients/ts/notifications.ts"],
        "description": "Customer emails: invoices, statements. Java.",
    },
}
# Who calls whom, and through which client module (a file that belongs to the called service).
DEPENDENCIES = [
    ("gateway", "billing", "clients/ts/billing.ts"),
    ("gateway", "notifications", "clients/ts/notifications.ts"),
    ("billing", "ledger", "clients/python/acme_clients/ledger.py"),
    ("billing", "notifications", "clients/python/acme_clients/notifications.py"),
    ("notifications", "ledger", "clients/java/src/main/java/dev/acme/clients/ledger/LedgerClient.java"),
]

ADR_FILES = {
    "adr:1": "docs/adr/0001-record-architecture-decisions.md",
    "adr:2": "docs/adr/0002-use-postgresql-for-billing-and-ledger.md",
    "adr:3": "docs/adr/0003-synchronous-http-between-billing-and-ledger.md",
    "adr:4": "docs/adr/0004-typescript-api-gateway.md",
    "adr:5": "docs/adr/0005-publish-ledger-entries-through-kafka.md",
    "adr:6": "docs/adr/0006-idempotency-keys-for-the-invoice-api.md",
}
BILLING_HANDLERS = "services/billing/api/handlers.py"
FAILING_SYMBOL = f"sym:{BILLING_HANDLERS}::InvoiceHandler.post"
EMAIL_SENDER = "services/notifications/src/main/java/dev/acme/notifications/email/EmailSender.java"
DELIVERY_LOG = "services/notifications/src/main/java/dev/acme/notifications/email/DeliveryLog.java"
LEDGER_STORE = "services/ledger/internal/store/store.go"

# --- file contents ------------------------------------------------------------------------------


def graphmem_toml() -> str:
    lines = ["# Which folders make up which service, and who is on which team.", ""]
    for name, svc in SERVICES.items():
        lines += [f"[services.{name}]", f"paths = {json.dumps(svc['paths'])}",
                  f'language = "{svc["language"]}"', f'description = "{svc["description"]}"', ""]
    for name, team in TEAMS.items():
        members = [PEOPLE[m][1] for m in team["members"]]
        lines += [f"[teams.{name}]", f"members = {json.dumps(members)}",
                  f"services = {json.dumps(team['services'])}", ""]
    return "\n".join(lines)


CODEOWNERS = """\
# Default owners: the platform team.
*                                   @acme/platform

/services/billing/                  @acme/payments
/services/billing/api/              @acme/payments ana@acme.dev
/services/ledger/                   @acme/payments bo@acme.dev
/services/gateway/                  @acme/platform
/services/notifications/            @acme/growth

# Service clients are owned by the team of the service they call.
/clients/ts/billing.ts              @acme/payments
/clients/python/acme_clients/ledger.py         @acme/payments
/clients/python/acme_clients/notifications.py  @acme/growth
/clients/ts/notifications.ts        @acme/growth
/clients/java/                      @acme/payments

/libs/                              @acme/platform
/docs/adr/                          @acme/platform carla@acme.dev
/docs/incidents/                    @acme/platform
"""

README = """\
# acme monorepo

Services (see `graphmem.toml`):

- `services/billing` (Python): invoices. HTTP API `/v1/invoices`.
- `services/gateway` (TypeScript): the public API; forwards to billing and notifications.
- `services/ledger` (Go): account balances, entries consumed from Kafka.
- `services/notifications` (Java): invoice and statement emails.

Clients of each service live in `clients/<language>/` and are owned by the called service's team.
Shared libraries without an owner service live in `libs/`. Decisions are in `docs/adr/`,
postmortems in `docs/incidents/`.
"""

GO_MOD = """\
module acme.dev/acme

go 1.22

require (
\tgithub.com/jackc/pgx/v5 v5.5.5
\tgithub.com/segmentio/kafka-go v0.4.47
)
"""

HTTP_PY = '''\
"""Tiny JSON-over-HTTP client shared by the Python service clients."""

from __future__ import annotations

import json
import urllib.request


class JsonHttpClient:
    """Sends JSON requests to one base URL and decodes JSON answers."""

    def __init__(self, base_url: str, timeout: float = 5.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout

    def get(self, path: str) -> dict:
        """GET a JSON document."""
        return self._request("GET", path, None)

    def post(self, path: str, body: dict) -> dict:
        """POST a JSON body and return the JSON answer."""
        return self._request("POST", path, body)

    def _request(self, method: str, path: str, body: dict | None) -> dict:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.base_url + path, data=data, method=method,
            headers={"content-type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=self.timeout) as response:
            return json.loads(response.read() or b"{}")
'''

HTTP_TS = """\
/** Minimal JSON-over-HTTP client shared by the TypeScript service clients. */

export interface RequestOptions {
  headers?: Record<string, string>;
}

export class HttpClient {
  constructor(private readonly baseUrl: string, private readonly timeoutMs = 5000) {}

  /** GET a JSON document. */
  async get<T>(path: string, options: RequestOptions = {}): Promise<T> {
    return this.request<T>("GET", path, undefined, options);
  }

  /** POST a JSON body and return the JSON answer. */
  async post<T>(path: string, body: unknown, options: RequestOptions = {}): Promise<T> {
    return this.request<T>("POST", path, body, options);
  }

  private async request<T>(method: string, path: string, body: unknown, options: RequestOptions): Promise<T> {
    const headers = { "content-type": "application/json", ...(options.headers ?? {}) };
    const response = await fetch(this.baseUrl + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(this.timeoutMs),
    });
    if (!response.ok) {
      throw new Error(`${method} ${path} failed with ${response.status}`);
    }
    return (await response.json()) as T;
  }
}
"""

BILLING_INIT = '"""Billing service: invoices, tax and their HTTP API."""\n'

MODELS_PY = '''\
"""Invoice and line item models."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field


@dataclass
class LineItem:
    """One billed product: SKU, quantity and unit price in cents."""

    sku: str
    quantity: int
    unit_price: int

    def amount(self) -> int:
        """Quantity times unit price, in cents."""
        return self.quantity * self.unit_price


@dataclass
class Invoice:
    """An invoice for one customer."""

    id: str
    customer_id: str
    items: list[LineItem] = field(default_factory=list)
    status: str = "draft"
    total: int = 0

    @classmethod
    def new(cls, customer_id: str, items: list[LineItem]) -> "Invoice":
        """A fresh draft invoice with a random id."""
        return cls(id=uuid.uuid4().hex, customer_id=customer_id, items=list(items))

    def subtotal(self) -> int:
        """Sum of line amounts before tax, in cents."""
        return sum(item.amount() for item in self.items)

    def to_dict(self) -> dict:
        """JSON form returned by the API."""
        return {
            "id": self.id,
            "customer_id": self.customer_id,
            "status": self.status,
            "total": self.total,
            "items": [vars(item) for item in self.items],
        }
'''

TAX_PY = '''\
"""Tax computation for invoices."""

from __future__ import annotations

DEFAULT_TAX_RATE = 0.2


def round_money(amount: float) -> int:
    """Round an amount in cents to a whole cent."""
    return int(amount + 0.5)


def apply_tax(subtotal: int, rate: float = DEFAULT_TAX_RATE) -> int:
    """Subtotal plus tax at ``rate``, in whole cents."""
    return round_money(subtotal * (1 + rate))
'''

DB_PY = '''\
"""PostgreSQL persistence for invoices (ADR-2)."""

from __future__ import annotations

import json

from .invoices.models import Invoice, LineItem


class InvoiceRepository:
    """Stores invoices as JSON documents in the ``invoices`` table."""

    def __init__(self, conn) -> None:
        self.conn = conn

    def save(self, invoice: Invoice) -> None:
        """Insert or update one invoice."""
        with self.conn.cursor() as cur:
            cur.execute(
                "INSERT INTO invoices (id, body) VALUES (%s, %s) "
                "ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body",
                (invoice.id, json.dumps(invoice.to_dict())),
            )

    def get(self, invoice_id: str) -> Invoice | None:
        """Load one invoice by id."""
        with self.conn.cursor() as cur:
            cur.execute("SELECT body FROM invoices WHERE id = %s", (invoice_id,))
            row = cur.fetchone()
        if row is None:
            return None
        data = json.loads(row[0])
        items = [LineItem(**item) for item in data.pop("items")]
        return Invoice(items=items, **data)
'''

SERVICE_PY = '''\
"""Invoice use cases: create, finalize, read."""

from __future__ import annotations

from acme_clients.ledger import LedgerClient

from ..db import InvoiceRepository
from .models import Invoice, LineItem
from .tax import apply_tax


class InvoiceService:
    """Business logic behind the invoice API."""

    def __init__(self, repo: InvoiceRepository, ledger: LedgerClient) -> None:
        self.repo = repo
        self.ledger = ledger

    def get(self, invoice_id: str) -> Invoice | None:
        """Load an invoice, or None."""
        return self.repo.get(invoice_id)

    def create(self, customer_id: str, items: list[LineItem]) -> Invoice:
        """Create a draft invoice and store it."""
        invoice = Invoice.new(customer_id=customer_id, items=items)
        invoice.total = apply_tax(invoice.subtotal())
        self.repo.save(invoice)
        return invoice

    def finalize(self, invoice_id: str) -> Invoice:
        """Freeze an invoice and book it in the ledger."""
        invoice = self.repo.get(invoice_id)
        if invoice is None:
            raise KeyError(invoice_id)
        invoice.status = "final"
        self.repo.save(invoice)
        self._post_to_ledger(invoice)
        return invoice

    def _post_to_ledger(self, invoice: Invoice) -> None:
        """Book the invoice total on the customer's receivable account (ADR-3)."""
        self.ledger.post_entry(
            account=f"receivable:{invoice.customer_id}",
            amount=invoice.total,
            reference=invoice.id,
        )
'''

HANDLERS_PY = '''\
"""HTTP handlers of the billing API (``/v1/invoices``)."""

from __future__ import annotations

from ..invoices.models import LineItem
from ..invoices.service import InvoiceService


class HealthHandler:
    """Liveness probe used by the load balancer."""

    def get(self, request: dict) -> tuple[int, dict]:
        """Report that the process is up."""
        return 200, {"status": "ok"}


class InvoiceHandler:
    """Create and read invoices. Called by the gateway through clients/ts/billing.ts."""

    def __init__(self, service: InvoiceService) -> None:
        self.service = service

    def get(self, request: dict) -> tuple[int, dict]:
        """Return one invoice by id: GET /v1/invoices/{invoice_id}."""
        invoice = self.service.get(request["params"]["invoice_id"])
        if invoice is None:
            return 404, {"error": "invoice not found"}
        return 200, invoice.to_dict()

    def post(self, request: dict) -> tuple[int, dict]:
        """Create an invoice from a customer id and line items: POST /v1/invoices."""
        body = request["body"]
        items = [
            LineItem(sku=line["sku"], quantity=int(line["quantity"]), unit_price=int(line["unit_price"]))
            for line in body["items"]
        ]
        invoice = self.service.create(customer_id=body["customer_id"], items=items)
        return 201, invoice.to_dict()
'''

APP_PY = '''\
"""Wires the billing service together and exposes its route table."""

from __future__ import annotations

from acme_clients.ledger import LedgerClient

from .api.handlers import HealthHandler, InvoiceHandler
from .db import InvoiceRepository
from .invoices.service import InvoiceService


def build_routes(conn) -> dict:
    """Route table: (method, path) -> handler method."""
    service = InvoiceService(InvoiceRepository(conn), LedgerClient())
    invoices = InvoiceHandler(service)
    return {
        ("GET", "/healthz"): HealthHandler().get,
        ("GET", "/v1/invoices/{invoice_id}"): invoices.get,
        ("POST", "/v1/invoices"): invoices.post,
    }
'''

LEDGER_CLIENT_PY = '''\
"""Client of the ledger service's HTTP API, owned by the payments team with the ledger."""

from __future__ import annotations

from acme_http.client import JsonHttpClient

LEDGER_URL = "http://ledger.internal:8080"


class LedgerClient:
    """Talks to services/ledger (Go): entries and balances."""

    def __init__(self, http: JsonHttpClient | None = None) -> None:
        self.http = http or JsonHttpClient(LEDGER_URL)

    def get_balance(self, account: str) -> int:
        """Balance of an account in cents: GET /v1/accounts/{account}/balance."""
        return int(self.http.get(f"/v1/accounts/{account}/balance")["balance"])

    def post_entry(self, account: str, amount: int, reference: str) -> None:
        """Book one entry synchronously: POST /v1/entries (ADR-3)."""
        self.http.post("/v1/entries", {"account": account, "amount": amount, "reference": reference})
'''

NOTIFICATIONS_CLIENT_PY = '''\
"""Client of the notifications service, owned by the growth team."""

from __future__ import annotations

from acme_http.client import JsonHttpClient

NOTIFICATIONS_URL = "http://notifications.internal:8081"


class NotificationsClient:
    """Asks services/notifications (Java) to email customers."""

    def __init__(self, http: JsonHttpClient | None = None) -> None:
        self.http = http or JsonHttpClient(NOTIFICATIONS_URL)

    def send_invoice_email(self, customer_id: str, invoice_id: str) -> None:
        """Email a finalized invoice: POST /v1/notifications/invoice."""
        self.http.post("/v1/notifications/invoice", {"customer_id": customer_id, "invoice_id": invoice_id})
'''

PUBLISHER_PY = '''\
"""Publishing domain events to Kafka (ADR-5)."""

from __future__ import annotations

import json


class EventPublisher:
    """Publishes JSON events to Kafka topics, keyed so one invoice stays in one partition."""

    def __init__(self, producer) -> None:
        self.producer = producer

    def publish(self, topic: str, key: str, event: dict) -> None:
        """Send one event and wait for the broker's acknowledgement."""
        payload = json.dumps(event, sort_keys=True).encode()
        self.producer.send(topic, key=key.encode(), value=payload)
        self.producer.flush()
'''

IDEMPOTENCY_PY = '''\
"""Idempotency keys for the invoice API, kept in Redis (ADR-6)."""

from __future__ import annotations

import json

TTL_SECONDS = 24 * 3600


class IdempotencyStore:
    """Remembers the answer given to each idempotency key for a day."""

    def __init__(self, redis) -> None:
        self.redis = redis

    def get(self, key: str) -> tuple[int, dict] | None:
        """The stored answer for ``key``, if any."""
        raw = self.redis.get(f"idem:{key}")
        if raw is None:
            return None
        status, body = json.loads(raw)
        return status, body

    def remember(self, key: str, status: int, body: dict) -> None:
        """Store the answer for ``key``."""
        self.redis.set(f"idem:{key}", json.dumps([status, body]), ex=TTL_SECONDS)
'''

BILLING_CLIENT_TS = """\
/** Client of the billing service's invoice API, used by the gateway. Owned by payments. */
import { HttpClient, RequestOptions } from "../../libs/ts/http";

export interface InvoiceLine {
  sku: string;
  quantity: number;
  unit_price: number;
}

export interface Invoice {
  id: string;
  customer_id: string;
  status: string;
  total: number;
}

export class BillingClient {
  constructor(private readonly http = new HttpClient("http://billing.internal:8000")) {}

  /** Create an invoice: POST /v1/invoices, served by InvoiceHandler.post in billing. */
  async createInvoice(customerId: string, items: InvoiceLine[], options: RequestOptions = {}): Promise<Invoice> {
    return this.http.post<Invoice>("/v1/invoices", { customer_id: customerId, items }, options);
  }

  /** Read an invoice: GET /v1/invoices/:id. */
  async getInvoice(invoiceId: string, options: RequestOptions = {}): Promise<Invoice> {
    return this.http.get<Invoice>(`/v1/invoices/${invoiceId}`, options);
  }
}
"""

NOTIFICATIONS_CLIENT_TS = """\
/** Client of the notifications service, used by the gateway. Owned by growth. */
import { HttpClient } from "../../libs/ts/http";

export interface Preferences {
  email: boolean;
  language: string;
}

export class NotificationsClient {
  constructor(private readonly http = new HttpClient("http://notifications.internal:8081")) {}

  /** A customer's notification preferences: GET /v1/preferences/:customerId. */
  async getPreferences(customerId: string): Promise<Preferences> {
    return this.http.get<Preferences>(`/v1/preferences/${customerId}`);
  }
}
"""

GATEWAY_PACKAGE = """\
{
  "name": "@acme/gateway",
  "version": "1.0.0",
  "private": true,
  "main": "dist/server.js",
  "scripts": {"build": "tsc -p .", "start": "node dist/server.js"},
  "dependencies": {"ioredis": "5.3.2"},
  "devDependencies": {"typescript": "5.3.3"}
}
"""

GATEWAY_TSCONFIG = """\
{
  "compilerOptions": {"target": "ES2022", "module": "commonjs", "strict": true, "outDir": "dist"},
  "include": ["src/**/*.ts", "../../clients/ts/**/*.ts", "../../libs/ts/**/*.ts"]
}
"""

ROUTES_TS = """\
/** Public invoice routes of the gateway. */
import { BillingClient, InvoiceLine } from "../../../../clients/ts/billing";
import { NotificationsClient } from "../../../../clients/ts/notifications";

export interface Request {
  params: Record<string, string>;
  headers: Record<string, string>;
  body: any;
}

export interface Response {
  status: number;
  body: unknown;
}

export class InvoiceRoutes {
  constructor(private readonly billing: BillingClient, private readonly notifications: NotificationsClient) {}

  /** POST /invoices: forward invoice creation to billing. */
  async create(req: Request): Promise<Response> {
    const items: InvoiceLine[] = req.body.items;
    const invoice = await this.billing.createInvoice(req.body.customer_id, items);
    return { status: 201, body: invoice };
  }

  /** GET /invoices/:id: the invoice and the customer's notification preferences. */
  async show(req: Request): Promise<Response> {
    const invoice = await this.billing.getInvoice(req.params.id);
    const preferences = await this.notifications.getPreferences(invoice.customer_id);
    return { status: 200, body: { invoice, preferences } };
  }
}
"""

AUTH_TS = """\
/** Authentication for the public API. */
import { Request } from "../routes/invoices";

/** Reject requests without a valid API key. */
export function requireApiKey(req: Request, validKeys: Set<string>): boolean {
  const key = req.headers["x-api-key"];
  return key !== undefined && validKeys.has(key);
}
"""

RATE_LIMITER_TS = """
/** Fixed-window rate limiter backed by Redis, one window per API key. */
export class RateLimiter {
  constructor(private readonly redis: any, private readonly limit = 100, private readonly windowSeconds = 60) {}

  /** Count one request; false when the key is over its limit. */
  async allow(apiKey: string): Promise<boolean> {
    const window = Math.floor(Date.now() / 1000 / this.windowSeconds);
    const counter = `rate:${apiKey}:${window}`;
    const count = await this.redis.incr(counter);
    if (count === 1) {
      await this.redis.expire(counter, this.windowSeconds);
    }
    return count <= this.limit;
  }
}
"""

SERVER_TS = """\
/** Entry point of the API gateway. */
import { BillingClient } from "../../../clients/ts/billing";
import { NotificationsClient } from "../../../clients/ts/notifications";
import { requireApiKey } from "./middleware/auth";
import { InvoiceRoutes, Request, Response } from "./routes/invoices";

type Handler = (req: Request) => Promise<Response>;

/** The route table of the public API. */
export function buildRoutes(): Map<string, Handler> {
  const invoices = new InvoiceRoutes(new BillingClient(), new NotificationsClient());
  return new Map<string, Handler>([
    ["POST /invoices", (req) => invoices.create(req)],
    ["GET /invoices/:id", (req) => invoices.show(req)],
  ]);
}

/** Authenticate, then dispatch. */
export async function handle(route: string, req: Request, keys: Set<string>): Promise<Response> {
  if (!requireApiKey(req, keys)) {
    return { status: 401, body: { error: "missing or invalid API key" } };
  }
  const handler = buildRoutes().get(route);
  return handler ? handler(req) : { status: 404, body: { error: "no such route" } };
}
"""

STORE_GO = """\
// Package store keeps ledger entries in PostgreSQL (ADR-2).
package store

import (
\t"context"
\t"database/sql"
\t"fmt"
)

// Entry is one booked amount on an account, in cents.
type Entry struct {
\tAccount   string
\tAmount    int64
\tReference string
}

// Store appends entries and computes balances.
type Store struct {
\tdb *sql.DB
}

// New returns a Store over an open database handle.
func New(db *sql.DB) *Store {
\treturn &Store{db: db}
}

// Append books one entry.
func (s *Store) Append(ctx context.Context, e Entry) error {
\t_, err := s.db.ExecContext(ctx,
\t\t"INSERT INTO entries (account, amount, reference) VALUES ($1, $2, $3)",
\t\te.Account, e.Amount, e.Reference)
\tif err != nil {
\t\treturn fmt.Errorf("append entry %s: %w", e.Reference, err)
\t}
\treturn nil
}

// Balance sums the entries of an account.
func (s *Store) Balance(ctx context.Context, account string) (int64, error) {
\tvar total sql.NullInt64
\terr := s.db.QueryRowContext(ctx,
\t\t"SELECT SUM(amount) FROM entries WHERE account = $1", account).Scan(&total)
\treturn total.Int64, err
}
"""

API_GO = """\
// Package api serves the ledger's HTTP endpoints.
package api

import (
\t"encoding/json"
\t"net/http"

\t"acme.dev/acme/services/ledger/internal/store"
)

// Server exposes the ledger store over HTTP.
type Server struct {
\tStore *store.Store
}

// HandleEntries books an entry: POST /v1/entries.
func (s *Server) HandleEntries(w http.ResponseWriter, r *http.Request) {
\tvar e store.Entry
\tif err := json.NewDecoder(r.Body).Decode(&e); err != nil {
\t\thttp.Error(w, err.Error(), http.StatusBadRequest)
\t\treturn
\t}
\tif err := s.Store.Append(r.Context(), e); err != nil {
\t\thttp.Error(w, err.Error(), http.StatusInternalServerError)
\t\treturn
\t}
\tw.WriteHeader(http.StatusCreated)
}

// HandleBalance returns an account balance: GET /v1/accounts/{account}/balance.
func (s *Server) HandleBalance(w http.ResponseWriter, r *http.Request) {
\tbalance, err := s.Store.Balance(r.Context(), r.PathValue("account"))
\tif err != nil {
\t\thttp.Error(w, err.Error(), http.StatusInternalServerError)
\t\treturn
\t}
\t_ = json.NewEncoder(w).Encode(map[string]int64{"balance": balance})
}

// Routes registers the handlers on a mux.
func (s *Server) Routes(mux *http.ServeMux) {
\tmux.HandleFunc("POST /v1/entries", s.HandleEntries)
\tmux.HandleFunc("GET /v1/accounts/{account}/balance", s.HandleBalance)
}
"""

MAIN_GO = """\
// Command ledger runs the ledger service.
package main

import (
\t"database/sql"
\t"log"
\t"net/http"
\t"os"

\t"acme.dev/acme/services/ledger/internal/api"
\t"acme.dev/acme/services/ledger/internal/store"
)

func main() {
\tdb, err := sql.Open("pgx", os.Getenv("LEDGER_DATABASE_URL"))
\tif err != nil {
\t\tlog.Fatal(err)
\t}
\tserver := &api.Server{Store: store.New(db)}
\tmux := http.NewServeMux()
\tserver.Routes(mux)
\tlog.Fatal(http.ListenAndServe(":8080", mux))
}
"""

CONSUMER_GO = """\
// Package consumer books ledger entries published on Kafka (ADR-5).
package consumer

import (
\t"context"
\t"encoding/json"
\t"fmt"

\t"github.com/segmentio/kafka-go"

\t"acme.dev/acme/services/ledger/internal/store"
)

// Topic is where billing publishes ledger entries.
const Topic = "ledger.entries"

// Consumer reads entries from Kafka and appends them to the store.
type Consumer struct {
\treader *kafka.Reader
\tstore  *store.Store
}

// NewConsumer returns a consumer in the ledger's consumer group.
func NewConsumer(brokers []string, s *store.Store) *Consumer {
\treader := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, GroupID: "ledger", Topic: Topic})
\treturn &Consumer{reader: reader, store: s}
}

// Handle books one message; the reference makes redelivery harmless.
func (c *Consumer) Handle(ctx context.Context, msg kafka.Message) error {
\tvar e store.Entry
\tif err := json.Unmarshal(msg.Value, &e); err != nil {
\t\treturn fmt.Errorf("decode entry at offset %d: %w", msg.Offset, err)
\t}
\treturn c.store.AppendBatch(ctx, []store.Entry{e})
}

// Run consumes until the context ends.
func (c *Consumer) Run(ctx context.Context) error {
\tfor {
\t\tmsg, err := c.reader.ReadMessage(ctx)
\t\tif err != nil {
\t\t\treturn err
\t\t}
\t\tif err := c.Handle(ctx, msg); err != nil {
\t\t\treturn err
\t\t}
\t}
}
"""

JAVA_BASE = "services/notifications/src/main/java/dev/acme/notifications"

BUILD_GRADLE = """\
plugins {
    id 'java'
    id 'application'
}

group = 'dev.acme'
version = '1.0.0'

dependencies {
    implementation 'com.sun.mail:jakarta.mail:2.0.1'
    implementation 'redis.clients:jedis:5.1.0'
}

sourceSets {
    main {
        java {
            srcDirs = ['src/main/java', '../../clients/java/src/main/java']
        }
    }
}

application {
    mainClass = 'dev.acme.notifications.NotificationsApplication'
}
"""

SMTP_TRANSPORT_JAVA = """\
package dev.acme.notifications.email;

/** Delivers one message to the SMTP relay; returns the relay's message id. */
public interface SmtpTransport {
    String deliver(String to, String subject, String body);
}
"""

EMAIL_SENDER_JAVA = """\
package dev.acme.notifications.email;

import java.util.Objects;

/** Sends emails through the company SMTP relay. */
public class EmailSender {
    private final SmtpTransport transport;

    public EmailSender(SmtpTransport transport) {
        this.transport = Objects.requireNonNull(transport);
    }

    /** Send one message; returns the relay's message id. */
    public String send(String to, String subject, String body) {
        return transport.deliver(to, subject, body);
    }
}
"""

COMPOSER_JAVA = """\
package dev.acme.notifications.email;

/** Builds the text of invoice emails. */
public class InvoiceEmailComposer {

    /** Subject line of an invoice email. */
    public String subject(String invoiceId) {
        return "Your invoice " + invoiceId;
    }

    /** Plain-text body of an invoice email; total is in cents. */
    public String body(String customerName, String invoiceId, long total) {
        return "Hello " + customerName + ",\\n\\nInvoice " + invoiceId + " totals "
            + String.format("%.2f", total / 100.0) + " EUR.\\n";
    }
}
"""

CONTROLLER_JAVA = """\
package dev.acme.notifications.api;

import dev.acme.notifications.email.EmailSender;
import dev.acme.notifications.email.InvoiceEmailComposer;
import java.util.Map;

/** HTTP endpoints of the notifications service. */
public class NotificationController {
    private final EmailSender sender;
    private final InvoiceEmailComposer composer;

    public NotificationController(EmailSender sender, InvoiceEmailComposer composer) {
        this.sender = sender;
        this.composer = composer;
    }

    /** POST /v1/notifications/invoice: email one invoice to its customer. */
    public Map<String, String> sendInvoiceEmail(Map<String, String> request) {
        String invoiceId = request.get("invoice_id");
        String to = request.get("customer_id") + "@customers.acme.dev";
        String id = sender.send(to, composer.subject(invoiceId), composer.body(to, invoiceId, 0));
        return Map.of("message_id", id);
    }

    /** GET /v1/preferences/{customerId}: a customer's notification preferences. */
    public Map<String, Object> preferences(String customerId) {
        return Map.of("email", true, "language", "en");
    }
}
"""

APPLICATION_JAVA = """\
package dev.acme.notifications;

import dev.acme.notifications.api.NotificationController;
import dev.acme.notifications.email.EmailSender;
import dev.acme.notifications.email.InvoiceEmailComposer;

/** Starts the notifications service. */
public class NotificationsApplication {

    public static void main(String[] args) {
        EmailSender sender = new EmailSender((to, subject, body) -> "queued");
        NotificationController controller = new NotificationController(sender, new InvoiceEmailComposer());
        System.out.println("notifications ready: " + controller);
    }
}
"""

LEDGER_CLIENT_JAVA = """\
package dev.acme.clients.ledger;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;

/** Client of the ledger service for JVM services; owned by the payments team. */
public class LedgerClient {
    private final HttpClient http = HttpClient.newHttpClient();
    private final String baseUrl;

    public LedgerClient(String baseUrl) {
        this.baseUrl = baseUrl;
    }

    /** Balance of an account in cents: GET /v1/accounts/{account}/balance. */
    public long balance(String account) throws Exception {
        HttpRequest request = HttpRequest.newBuilder(URI.create(baseUrl + "/v1/accounts/" + account + "/balance")).build();
        String body = http.send(request, HttpResponse.BodyHandlers.ofString()).body();
        return Long.parseLong(body.replaceAll("[^0-9-]", ""));
    }
}
"""

STATEMENT_JOB_JAVA = """\
package dev.acme.notifications.statements;

import dev.acme.clients.ledger.LedgerClient;
import dev.acme.notifications.email.EmailSender;

/** Monthly job that emails each customer their account balance. */
public class StatementJob {
    private final LedgerClient ledger;
    private final EmailSender sender;

    public StatementJob(LedgerClient ledger, EmailSender sender) {
        this.ledger = ledger;
        this.sender = sender;
    }

    /** Send one customer's statement. */
    public void sendStatement(String customerId) throws Exception {
        long balance = ledger.balance("receivable:" + customerId);
        sender.send(customerId + "@customers.acme.dev", "Your monthly statement",
            "Balance due: " + String.format("%.2f", balance / 100.0) + " EUR");
    }
}
"""

DELIVERY_LOG_JAVA = """\
package dev.acme.notifications.email;

import redis.clients.jedis.JedisPooled;

/** Remembers delivered messages in Redis so a retry never sends the same email twice. */
public class DeliveryLog {
    private static final long TTL_SECONDS = 7 * 24 * 3600;
    private final JedisPooled redis;

    public DeliveryLog(JedisPooled redis) {
        this.redis = redis;
    }

    /** True the first time a delivery key is seen, false for a duplicate. */
    public boolean firstDelivery(String deliveryKey) {
        return "OK".equals(redis.set("delivery:" + deliveryKey, "1",
            redis.clients.jedis.params.SetParams.setParams().nx().ex(TTL_SECONDS)));
    }
}
"""

# --- documentation ------------------------------------------------------------------------------
# READMEs, conventions, contribution rules and a runbook: questions such as "how do I restart the
# notifications worker?" are answered by these alone (facts.json["docs"]).

CONVENTIONS_MD = """\
# Engineering conventions

These conventions apply to every acme service, whatever its language. Reviewers point to this
file; `.editorconfig` and the linters enforce what they can.

## Logging

- Log structured JSON, one event per line, with the fields `service`, `request_id` and `level`.
- Log an error once, where it is handled: with the exception, its cause and the request id.
  Do not log and re-raise; the caller would log the same failure again.
- `INFO` for state changes (an invoice finalized), `WARN` for retries, `ERROR` only for
  failures that need a human.
- Never log credentials, tokens or full card numbers; customer e-mail addresses only hashed.

## Error handling

- Validate requests at the API edge and answer 400 with an error code; a missing field must
  never become a 500.
- Wrap errors with context and keep the cause (`fmt.Errorf("append entry %s: %w", ref, err)` in
  Go, `raise InvoiceError(...) from exc` in Python).
- Catch broad exceptions only at the top of a request handler or a job.
- A retried write needs an idempotency key or a deduplication record.

## Naming

- Services and their folders are single lower-case words: `billing`, `ledger`.
- Python functions and modules in `snake_case`, classes in `CapWords`; Go exports in
  `MixedCaps`; TypeScript and Java methods in `camelCase`.
- Kafka topics are named `<service>.<plural noun>`, for example `ledger.entries`.
- Money is an integer number of cents; say so in the name or the docstring.

## Testing

- Every bug fix comes with a test that fails without the fix.
- Unit tests live next to the code: `test_*.py`, `*_test.go`, `*.test.ts`, `*Test.java`.
- Each client in `clients/` has contract tests against the service it calls.
- Tests never reach the network; use the fakes in `libs/`.
"""

CONTRIBUTING_MD = """\
# Contributing to acme

## Workflow

Branch from `main` and name the branch after its ticket, for example `pay-12-refunds`. Keep a
pull request to one change; large features land behind a flag in several pull requests.

## Commit messages

- A subject line in the imperative mood, at most 72 characters, ending with the ticket in
  parentheses: `Add refund endpoint (PAY-12)`.
- A blank line, then the why of the change in wrapped prose.
- Name decisions as `ADR-<number>` and incidents as `INC-<number>`. A change that fixes an
  incident ends with a `Fixes: INC-<number>` trailer; shared work with `Co-authored-by:` trailers.

## Code review

- Every change needs an approval from the team that owns the code (`.github/CODEOWNERS`).
- A change to a decision record needs the approval of one of its deciders.
- Reviewers check the rules in `CONVENTIONS.md`.

## Checks

Run the linters and the tests of the services you touched before asking for a review:

    make lint test
"""

EDITORCONFIG = """\
root = true

[*]
charset = utf-8
end_of_line = lf
insert_final_newline = true
trim_trailing_whitespace = true

[*.py]
indent_style = space
indent_size = 4
max_line_length = 100

[*.{ts,json}]
indent_style = space
indent_size = 2

[*.java]
indent_style = space
indent_size = 4

[*.go]
indent_style = tab
"""

BILLING_README = """\
# Billing service

Billing creates, taxes and finalizes customer invoices. It serves the invoice API behind the
gateway: `POST /v1/invoices` creates an invoice, `GET /v1/invoices/{invoice_id}` reads one.

## Running locally

    createdb billing
    export BILLING_DATABASE_URL=postgresql://localhost:5432/billing
    python -m billing.app --port 8081

`build_routes` in `app.py` wires the handlers to their routes.

## Dependencies

- PostgreSQL, one database for billing alone (ADR-2).
- The ledger, for customer balances.
- Notifications, for invoice emails.
"""

LEDGER_README = """\
# Ledger service

The ledger keeps acme's double-entry book: every invoice becomes an entry on the customer's
receivable account, and balances are served over HTTP (`GET /v1/accounts/{account}/balance`).

## Running locally

Start a PostgreSQL server, create the `ledger` database, then run the service from the
repository root:

    LEDGER_DATABASE_URL=postgres://localhost/ledger go run ./services/ledger/cmd/ledger

It listens on port 8080.

## Dependencies

- PostgreSQL for the entries (ADR-2).
"""

LEDGER_README_KAFKA = """\
- PostgreSQL for the entries (ADR-2).
- Kafka: entries arrive on the topic `ledger.entries` (ADR-5); set `KAFKA_BROKERS` to a
  comma-separated list of brokers when running locally. Entries are booked idempotently by
  reference, so replaying the topic never books an entry twice.
"""

GATEWAY_README = """\
# API gateway

The gateway is acme's public API. It checks the API key of every request, applies rate limits
and forwards invoice calls to billing and preference reads to notifications.

## Running locally

    cd services/gateway
    npm install && npm run build
    BILLING_URL=http://localhost:8081 NOTIFICATIONS_URL=http://localhost:8083 npm start

## Dependencies

- billing, through `BillingClient` in `clients/ts/billing.ts`.
- notifications, through `clients/ts/notifications.ts`.
"""

NOTIFICATIONS_README = """\
# Notifications service

Sends customer emails: invoice emails on behalf of billing and the monthly account
statements. Java 21, built with Gradle.

## Running locally

    cd services/notifications
    ./gradlew run

Emails go to a local SMTP catcher on port 1025 unless `SMTP_HOST` is set.

## Dependencies

- An SMTP relay for outgoing mail.
- The ledger API, for the balances on statements (`LedgerClient`).
- Redis, for the delivery log.

Operating the service: see docs/runbooks/notifications.md.
"""

RUNBOOK_MD = """\
# Notifications runbook

Owner: growth team (@acme/growth). Escalate to Emma Novak (emma@acme.dev) or Femi Okafor
(femi@acme.dev).

## Overview

The notifications service runs as two deployments in the `notifications` namespace:
`notifications-api`, the HTTP API that billing and the gateway call, and
`notifications-worker`, which drains the outgoing email queue through the SMTP relay.

## Restarting the email worker

Restart the worker when the outgoing queue stops draining, or after the SMTP relay credentials
were rotated:

1. Stop new deliveries: `kubectl -n notifications scale deployment/notifications-worker --replicas=0`.
2. Wait until the `smtp_inflight` gauge on the Notifications dashboard is back at zero.
3. Start it again: `kubectl -n notifications scale deployment/notifications-worker --replicas=2`.
4. Check the worker logs for `EmailSender ready` and watch the queue depth fall.

A restart never sends an email twice: the Redis delivery log (DeliveryLog) drops deliveries it
has already seen.

## Duplicate emails

Customers reporting two copies of one email: check the Redis delivery log first (see INC-038).
If Redis was flushed, pause the worker as above until the backlog has been deduplicated.

## Monthly statements job

StatementJob runs on the first day of each month and needs the ledger API
(clients/java LedgerClient). When the ledger was down, rerun it for the failed accounts:

    kubectl -n notifications create job --from=cronjob/statements statements-rerun
"""


# Every document of the repository (decision records and postmortems aside): path -> (title,
# doc_type, {section heading: convention topic} for the sections that state conventions).
DOCS = {
    "README.md": ("acme monorepo", "readme", {}),
    "CONVENTIONS.md": ("Engineering conventions", "convention",
                       {"Logging": "logging", "Error handling": "error handling", "Naming": "naming",
                        "Testing": "testing"}),
    "CONTRIBUTING.md": ("Contributing to acme", "contributing",
                        {"Commit messages": "commit messages", "Code review": "code review"}),
    ".editorconfig": ("EditorConfig settings (.editorconfig)", "convention",
                      {"[*]": "formatting", "[*.py]": "formatting", "[*.{ts,json}]": "formatting",
                       "[*.java]": "formatting", "[*.go]": "formatting"}),
    "services/billing/README.md": ("Billing service", "readme", {}),
    "services/gateway/README.md": ("API gateway", "readme", {}),
    "services/ledger/README.md": ("Ledger service", "readme", {}),
    "services/notifications/README.md": ("Notifications service", "readme", {}),
    "docs/runbooks/notifications.md": ("Notifications runbook", "runbook", {}),
}
# Questions only the documentation answers: (id, question, document path, section heading).
DOC_QUESTIONS = [
    ("docs-1", "How do I restart the notifications worker?", "docs/runbooks/notifications.md",
     "Restarting the email worker"),
    ("docs-2", "What is our convention for logging errors?", "CONVENTIONS.md", "Logging"),
    ("docs-3", "How do I run the ledger service locally?", "services/ledger/README.md", "Running locally"),
    ("docs-4", "How should I write a commit message?", "CONTRIBUTING.md", "Commit messages"),
    ("docs-5", "What is the indentation size for Python?", ".editorconfig", "[*.py]"),
    ("docs-6", "How are Kafka topics named?", "CONVENTIONS.md", "Naming"),
]


# --- decision records ---------------------------------------------------------------------------


def adr_nygard(num: int, title: str, day: str, status: str, deciders: str, context: str,
               decision: str, consequences: str) -> str:
    return (
        f"# {num}. {title}\n\nDate: {day}\n\nDeciders: {deciders}\n\n## Status\n\n{status}\n\n"
        f"## Context\n\n{context}\n\n## Decision\n\n{decision}\n\n## Consequences\n\n{consequences}\n"
    )


def adr_madr(title: str, day: str, status: str, deciders: list[str], problem: str,
             options: list[str], outcome: str, consequences: str, extra_front: str = "") -> str:
    front = f"---\nstatus: {status}\ndate: {day}\ndeciders:\n"
    front += "".join(f"  - {d}\n" for d in deciders) + extra_front + "---\n\n"
    opts = "".join(f"* {o}\n" for o in options)
    return (
        f"{front}# {title}\n\n## Context and Problem Statement\n\n{problem}\n\n"
        f"## Considered Options\n\n{opts}\n## Decision Outcome\n\n{outcome}\n\n"
        f"### Consequences\n\n{consequences}\n"
    )


# --- the history --------------------------------------------------------------------------------


@dataclass
class Step:
    """One commit: who, when (days before --now, hour UTC), message, and what it changes."""

    label: str
    who: str
    days_ago: float
    message: str
    writes: dict = field(default_factory=dict)  # path -> content (str) or callable(ctx) -> str
    edits: list = field(default_factory=list)  # (path, old, new)
    deletes: list = field(default_factory=list)
    symbols: list = field(default_factory=list)  # symbol keys the commit changes on purpose
    coauthors: list = field(default_factory=list)
    branch: str | None = None  # commit on this branch instead of main
    merge: str | None = None  # merge this branch into main (no file changes)


def build_steps() -> list[Step]:
    """The history of acme, oldest first. Contents that need shas are callables of the context."""
    s = Step
    sym = lambda path, q: f"sym:{path}::{q}"  # noqa: E731 - keeps the table below readable
    B = "services/billing"
    H = BILLING_HANDLERS
    SVC = f"{B}/invoices/service.py"
    return [
        s("init", "carla", 120, "Initial monorepo layout and ADR-1 (PLAT-1)", writes={
            "README.md": README, "graphmem.toml": graphmem_toml(), ".github/CODEOWNERS": CODEOWNERS,
            "CONVENTIONS.md": CONVENTIONS_MD, "CONTRIBUTING.md": CONTRIBUTING_MD, ".editorconfig": EDITORCONFIG,
            "go.mod": GO_MOD, "libs/python/acme_http/__init__.py": '"""Shared HTTP helpers."""\n',
            "libs/python/acme_http/client.py": HTTP_PY, "libs/ts/http.ts": HTTP_TS,
            ADR_FILES["adr:1"]: lambda ctx: adr_nygard(
                1, "Record architecture decisions", ctx.day(120), "Accepted", "Carla Diaz, Ana Lima",
                "We need to record the architectural decisions made on the acme platform.",
                "We will use Architecture Decision Records, as described by Michael Nygard, kept in "
                "docs/adr/ and numbered in order.",
                "Decisions are reviewed like code. Superseded records stay, marked as superseded."),
        }),
        s("billing_models", "ana", 118, "Add billing service skeleton with invoice models (PAY-1)", writes={
            f"{B}/__init__.py": BILLING_INIT, f"{B}/invoices/__init__.py": "",
            f"{B}/invoices/models.py": MODELS_PY, f"{B}/invoices/tax.py": TAX_PY,
        }, symbols=[sym(f"{B}/invoices/models.py", "Invoice"), sym(f"{B}/invoices/tax.py", "apply_tax")]),
        s("adr2", "ana", 117, "ADR-2: use PostgreSQL for billing and ledger", writes={
            ADR_FILES["adr:2"]: lambda ctx: adr_nygard(
                2, "Use PostgreSQL for billing and ledger", ctx.day(117), "Accepted",
                "Ana Lima, Bo Chen, Carla Diaz",
                "Billing and the ledger need transactional storage with strong consistency; the team "
                "already runs PostgreSQL for other products.",
                "Billing (services/billing) and the ledger (services/ledger) store their data in "
                "PostgreSQL 15, one database per service.",
                "We operate PostgreSQL backups and failover. Cross-service queries go through APIs, "
                "never through the other service's database."),
        }),
        s("ledger_store", "bo", 116, "Add ledger service with PostgreSQL store (PAY-2, ADR-2)", writes={
            LEDGER_STORE: STORE_GO, "services/ledger/internal/api/api.go": API_GO,
            "services/ledger/cmd/ledger/main.go": MAIN_GO, "services/ledger/README.md": LEDGER_README,
        }, symbols=[sym(LEDGER_STORE, "Store.Append"), sym(LEDGER_STORE, "Store.Balance")]),
        s("billing_api", "ana", 115, "Add invoice API handlers (PAY-3)", writes={
            f"{B}/api/__init__.py": "", H: HANDLERS_PY, f"{B}/db.py": DB_PY, SVC: SERVICE_PY,
            f"{B}/app.py": APP_PY, f"{B}/README.md": BILLING_README,
        }, symbols=[sym(H, "InvoiceHandler.post"), sym(H, "InvoiceHandler.get"), sym(SVC, "InvoiceService.finalize")]),
        s("adr3", "bo", 114, "ADR-3: call the ledger synchronously over HTTP (PAY-4)", writes={
            "clients/python/acme_clients/__init__.py": '"""Python clients of acme services."""\n',
            "clients/python/acme_clients/ledger.py": LEDGER_CLIENT_PY,
            ADR_FILES["adr:3"]: lambda ctx: adr_madr(
                "Synchronous HTTP between billing and ledger", ctx.day(114), "accepted",
                ["Bo Chen", "Ana Lima"],
                "When billing finalizes an invoice the ledger must book it. How should billing tell "
                "the ledger?",
                ["Synchronous HTTP call from billing to the ledger", "Kafka topic consumed by the ledger",
                 "Shared PostgreSQL table"],
                'Chosen option: "Synchronous HTTP call from billing to the ledger", because it is the '
                "simplest to build now; the client lives in clients/python/acme_clients/ledger.py.",
                "Billing fails to finalize invoices while the ledger is down."),
        }),
        s("gateway", "carla", 112, "Add API gateway with invoice routes (PLAT-4, ADR-4)", writes={
            "services/gateway/package.json": GATEWAY_PACKAGE,
            "services/gateway/tsconfig.json": GATEWAY_TSCONFIG,
            "services/gateway/src/server.ts": SERVER_TS,
            "services/gateway/src/routes/invoices.ts": ROUTES_TS,
            "services/gateway/src/middleware/auth.ts": AUTH_TS,
            "clients/ts/billing.ts": BILLING_CLIENT_TS,
            "clients/ts/notifications.ts": NOTIFICATIONS_CLIENT_TS,
            "services/gateway/README.md": GATEWAY_README,
            ADR_FILES["adr:4"]: lambda ctx: adr_madr(
                "TypeScript API gateway in front of all services", ctx.day(112), "accepted",
                ["Carla Diaz", "Dev Patel"],
                "Customers call several services. Authentication and rate limiting should live in "
                "one place.",
                ["TypeScript gateway service", "Managed cloud API gateway", "Authentication in every service"],
                'Chosen option: "TypeScript gateway service" (services/gateway), owned by platform; '
                "it reaches billing and notifications through clients/ts/.",
                "One more service to run; rate limits can use Redis."),
        }, symbols=[sym("services/gateway/src/routes/invoices.ts", "InvoiceRoutes.create"),
                    sym("clients/ts/billing.ts", "BillingClient.createInvoice")]),
        s("notifications", "emma", 110, "Add notifications service for invoice emails (GRO-5)", writes={
            "services/notifications/build.gradle": BUILD_GRADLE,
            f"{JAVA_BASE}/NotificationsApplication.java": APPLICATION_JAVA,
            f"{JAVA_BASE}/api/NotificationController.java": CONTROLLER_JAVA,
            f"{JAVA_BASE}/email/SmtpTransport.java": SMTP_TRANSPORT_JAVA,
            EMAIL_SENDER: EMAIL_SENDER_JAVA,
            f"{JAVA_BASE}/email/InvoiceEmailComposer.java": COMPOSER_JAVA,
        }, symbols=[sym(EMAIL_SENDER, "EmailSender.send")]),
        s("billing_notify", "femi", 108, "Email customers when an invoice is finalized (GRO-6)", writes={
            "clients/python/acme_clients/notifications.py": NOTIFICATIONS_CLIENT_PY,
        }, edits=[
            (SVC, "from acme_clients.ledger import LedgerClient\n",
             "from acme_clients.ledger import LedgerClient\nfrom acme_clients.notifications import NotificationsClient\n"),
            (SVC, "    def __init__(self, repo: InvoiceRepository, ledger: LedgerClient) -> None:\n"
                  "        self.repo = repo\n        self.ledger = ledger\n",
             "    def __init__(\n        self, repo: InvoiceRepository, ledger: LedgerClient, notifications: NotificationsClient\n"
             "    ) -> None:\n        self.repo = repo\n        self.ledger = ledger\n        self.notifications = notifications\n"),
            (SVC, "        self._post_to_ledger(invoice)\n        return invoice\n",
             "        self._post_to_ledger(invoice)\n"
             "        self.notifications.send_invoice_email(invoice.customer_id, invoice.id)\n        return invoice\n"),
            (f"{B}/app.py", "from acme_clients.ledger import LedgerClient\n",
             "from acme_clients.ledger import LedgerClient\nfrom acme_clients.notifications import NotificationsClient\n"),
            (f"{B}/app.py", "InvoiceService(InvoiceRepository(conn), LedgerClient())",
             "InvoiceService(InvoiceRepository(conn), LedgerClient(), NotificationsClient())"),
        ], symbols=[sym(SVC, "InvoiceService.__init__"), sym(SVC, "InvoiceService.finalize"),
                    sym(f"{B}/app.py", "build_routes")]),
        s("rate_limit", "dev", 105, "Rate limit gateway requests with Redis (PLAT-7)", edits=[
            ("services/gateway/src/middleware/auth.ts", None, RATE_LIMITER_TS),
        ], symbols=[sym("services/gateway/src/middleware/auth.ts", "RateLimiter.allow")]),
        s("inc031_cause", "bo", 102, "Batch ledger inserts in Store.AppendBatch (PAY-9)", edits=[
            (LEDGER_STORE, "// Append books one entry.\nfunc (s *Store) Append(ctx context.Context, e Entry) error {\n"
             "\t_, err := s.db.ExecContext(ctx,\n\t\t\"INSERT INTO entries (account, amount, reference) VALUES ($1, $2, $3)\",\n"
             "\t\te.Account, e.Amount, e.Reference)\n\tif err != nil {\n\t\treturn fmt.Errorf(\"append entry %s: %w\", e.Reference, err)\n"
             "\t}\n\treturn nil\n}\n",
             "// Append books one entry.\nfunc (s *Store) Append(ctx context.Context, e Entry) error {\n"
             "\treturn s.AppendBatch(ctx, []Entry{e})\n}\n\n"
             "// AppendBatch books entries in one transaction, retrying the whole batch on failure.\n"
             "func (s *Store) AppendBatch(ctx context.Context, entries []Entry) error {\n"
             "\tvar err error\n\tfor attempt := 0; attempt < 3; attempt++ {\n"
             "\t\tfor _, e := range entries {\n"
             "\t\t\t_, err = s.db.ExecContext(ctx,\n"
             "\t\t\t\t\"INSERT INTO entries (account, amount, reference) VALUES ($1, $2, $3)\",\n"
             "\t\t\t\te.Account, e.Amount, e.Reference)\n"
             "\t\t\tif err != nil {\n\t\t\t\tbreak\n\t\t\t}\n\t\t}\n"
             "\t\tif err == nil {\n\t\t\treturn nil\n\t\t}\n\t}\n"
             "\treturn fmt.Errorf(\"append %d entries: %w\", len(entries), err)\n}\n"),
        ], symbols=[sym(LEDGER_STORE, "Store.Append"), sym(LEDGER_STORE, "Store.AppendBatch")]),
        s("inc031_fix", "ana", 101 + 1 / 24, "Make ledger appends idempotent per reference\n\n"
          "Retried batches inserted entries twice. Skip entries whose reference is already booked.\n\n"
          "Fixes: INC-031\nRefs: PAY-10\n", edits=[
            (LEDGER_STORE, "\"INSERT INTO entries (account, amount, reference) VALUES ($1, $2, $3)\",\n\t\t\t\te.Account",
             "\"INSERT INTO entries (account, amount, reference) VALUES ($1, $2, $3) \"+\n"
             "\t\t\t\t\t\"ON CONFLICT (reference) DO NOTHING\",\n\t\t\t\te.Account"),
        ], symbols=[sym(LEDGER_STORE, "Store.AppendBatch")], coauthors=["bo"]),
        s("inc031_doc", "bo", 99, "Add postmortem for INC-031", writes={
            "docs/incidents/INC-031.md": lambda ctx: ctx.incident_md("INC-031"),
        }),
        s("adr5", "carla", 95, "ADR-5: publish ledger entries through Kafka\n\nSupersedes ADR-3 after INC-031.\n", writes={
            ADR_FILES["adr:5"]: lambda ctx: adr_nygard(
                5, "Publish ledger entries through Kafka", ctx.day(95), "Accepted\n\nSupersedes ADR-3",
                "Carla Diaz, Ana Lima, Bo Chen",
                "ADR-3 made billing call the ledger synchronously. INC-031 showed that retries of "
                "synchronous writes double-book entries, and billing stalls when the ledger is slow.",
                "Billing publishes ledger entries to the Kafka topic `ledger.entries` through "
                "libs/python/acme_events (EventPublisher). The ledger consumes the topic "
                "(services/ledger/internal/consumer) and books each entry idempotently by reference. "
                "Billing keeps the HTTP client only for reading balances.",
                "We run Kafka for billing and ledger. Ledger balances are eventually consistent."),
        }, edits=[
            (ADR_FILES["adr:3"], "status: accepted\n",
             "status: superseded by ADR-0005\n"),
        ]),
        s("adr5_billing", "ana", 92, "Implement ADR-5: publish invoice ledger entries to Kafka (PAY-14)", writes={
            "libs/python/acme_events/__init__.py": '"""Domain events on Kafka."""\n',
            "libs/python/acme_events/publisher.py": PUBLISHER_PY,
        }, edits=[
            (SVC, "from acme_clients.notifications import NotificationsClient\n",
             "from acme_clients.notifications import NotificationsClient\nfrom acme_events.publisher import EventPublisher\n"),
            (SVC, "self, repo: InvoiceRepository, ledger: LedgerClient, notifications: NotificationsClient\n"
                  "    ) -> None:\n",
             "self,\n        repo: InvoiceRepository,\n        ledger: LedgerClient,\n"
             "        notifications: NotificationsClient,\n        events: EventPublisher,\n    ) -> None:\n"),
            (SVC, "        self.notifications = notifications\n",
             "        self.notifications = notifications\n        self.events = events\n"),
            (SVC, "        self._post_to_ledger(invoice)\n",
             "        self.events.publish(\n            \"ledger.entries\",\n            key=invoice.id,\n"
             "            event={\"account\": f\"receivable:{invoice.customer_id}\", \"amount\": invoice.total,\n"
             "                   \"reference\": invoice.id},\n        )\n"),
        ], symbols=[sym(SVC, "InvoiceService.__init__"), sym(SVC, "InvoiceService.finalize"),
                    sym("libs/python/acme_events/publisher.py", "EventPublisher.publish")],
            branch="adr-5-kafka"),
        s("composer", "emma", 91, "Compose invoice emails with totals in the customer's currency (GRO-11)", edits=[
            (f"{JAVA_BASE}/email/InvoiceEmailComposer.java", '+ String.format("%.2f", total / 100.0) + " EUR.\\n";',
             '+ String.format("%.2f", total / 100.0) + " " + currency + ".\\n";'),
            (f"{JAVA_BASE}/email/InvoiceEmailComposer.java", "public String body(String customerName, String invoiceId, long total) {",
             "public String body(String customerName, String invoiceId, long total, String currency) {"),
            (f"{JAVA_BASE}/api/NotificationController.java", "composer.body(to, invoiceId, 0)",
             'composer.body(to, invoiceId, 0, "EUR")'),
        ], symbols=[sym(f"{JAVA_BASE}/email/InvoiceEmailComposer.java", "InvoiceEmailComposer.body")]),
        s("adr5_ledger", "bo", 90, "Implement ADR-5: consume ledger entries from Kafka (PAY-15)", writes={
            "services/ledger/internal/consumer/consumer.go": CONSUMER_GO,
        }, edits=[
            ("services/ledger/cmd/ledger/main.go", '\t"os"\n\n\t"acme.dev/acme/services/ledger/internal/api"\n',
             '\t"os"\n\t"strings"\n\n\t"acme.dev/acme/services/ledger/internal/api"\n'
             '\t"acme.dev/acme/services/ledger/internal/consumer"\n'),
            ("services/ledger/cmd/ledger/main.go", "\tserver := &api.Server{Store: store.New(db)}\n",
             "\tst := store.New(db)\n\tserver := &api.Server{Store: st}\n"
             "\tgo func() {\n\t\tc := consumer.NewConsumer(strings.Split(os.Getenv(\"KAFKA_BROKERS\"), \",\"), st)\n"
             "\t\tlog.Fatal(c.Run(context.Background()))\n\t}()\n"),
            ("services/ledger/cmd/ledger/main.go", 'import (\n\t"database/sql"\n', 'import (\n\t"context"\n\t"database/sql"\n'),
        ], symbols=[sym("services/ledger/internal/consumer/consumer.go", "Consumer.Handle"),
                    sym("services/ledger/cmd/ledger/main.go", "main")], branch="adr-5-kafka"),
        s("adr5_merge", "carla", 89, "Merge branch 'adr-5-kafka': ledger entries through Kafka (ADR-5)",
          merge="adr-5-kafka"),
        s("request_ids", "dev", 85, "Propagate request ids to downstream services (PLAT-12)", edits=[
            ("libs/ts/http.ts", "  headers?: Record<string, string>;\n",
             "  headers?: Record<string, string>;\n  requestId?: string;\n"),
            ("libs/ts/http.ts", '    const headers = { "content-type": "application/json", ...(options.headers ?? {}) };\n',
             '    const headers: Record<string, string> = { "content-type": "application/json", ...(options.headers ?? {}) };\n'
             '    if (options.requestId) {\n      headers["x-request-id"] = options.requestId;\n    }\n'),
            ("services/gateway/src/routes/invoices.ts",
             "const invoice = await this.billing.createInvoice(req.body.customer_id, items);",
             'const invoice = await this.billing.createInvoice(req.body.customer_id, items, {\n'
             '      requestId: req.headers["x-request-id"],\n    });'),
        ], symbols=[sym("libs/ts/http.ts", "HttpClient.request"),
                    sym("services/gateway/src/routes/invoices.ts", "InvoiceRoutes.create")]),
        s("statements", "femi", 80, "Monthly statements from ledger balances (GRO-14)", writes={
            "clients/java/src/main/java/dev/acme/clients/ledger/LedgerClient.java": LEDGER_CLIENT_JAVA,
            f"{JAVA_BASE}/statements/StatementJob.java": STATEMENT_JOB_JAVA,
            "services/notifications/README.md": NOTIFICATIONS_README,
        }, symbols=[sym(f"{JAVA_BASE}/statements/StatementJob.java", "StatementJob.sendStatement")]),
        s("inc038_cause", "emma", 70, "Retry email delivery on SMTP timeouts (GRO-17)", edits=[
            (EMAIL_SENDER, "        return transport.deliver(to, subject, body);\n",
             "        RuntimeException last = null;\n        for (int attempt = 0; attempt < 3; attempt++) {\n"
             "            try {\n                return transport.deliver(to, subject, body);\n"
             "            } catch (RuntimeException timeout) {\n                last = timeout;\n            }\n"
             "        }\n        throw last;\n"),
        ], symbols=[sym(EMAIL_SENDER, "EmailSender.send")]),
        s("inc038_fix", "femi", 68 + 1.67 / 24, "Deduplicate email deliveries with a Redis delivery log\n\n"
          "A timed-out delivery had often reached the relay; the retry sent the email again.\n\n"
          "Fixes: INC-038\n", writes={DELIVERY_LOG: DELIVERY_LOG_JAVA}, edits=[
            (EMAIL_SENDER, "    private final SmtpTransport transport;\n\n    public EmailSender(SmtpTransport transport) {\n"
                           "        this.transport = Objects.requireNonNull(transport);\n    }\n",
             "    private final SmtpTransport transport;\n    private final DeliveryLog log;\n\n"
             "    public EmailSender(SmtpTransport transport, DeliveryLog log) {\n"
             "        this.transport = Objects.requireNonNull(transport);\n        this.log = log;\n    }\n"),
            (EMAIL_SENDER, "        RuntimeException last = null;\n",
             "        if (!log.firstDelivery(to + \"|\" + subject)) {\n            return \"duplicate\";\n        }\n"
             "        RuntimeException last = null;\n"),
            (f"{JAVA_BASE}/NotificationsApplication.java", 'new EmailSender((to, subject, body) -> "queued")',
             'new EmailSender((to, subject, body) -> "queued", null)'),
        ], symbols=[sym(EMAIL_SENDER, "EmailSender.send"), sym(DELIVERY_LOG, "DeliveryLog.firstDelivery")]),
        s("inc038_doc", "emma", 64, "Add INC-038 postmortem (exported from the incident tool)", writes={
            "docs/incidents/INC-038.json": lambda ctx: ctx.incident_json("INC-038"),
        }),
        s("drop_sync_ledger", "ana", 60, "Remove synchronous ledger posting from billing\n\n"
          "Entries go through Kafka since ADR-5; the HTTP client keeps only balance reads. PAY-18\n", edits=[
            (SVC, "\n    def _post_to_ledger(self, invoice: Invoice) -> None:\n"
                  "        \"\"\"Book the invoice total on the customer's receivable account (ADR-3).\"\"\"\n"
                  "        self.ledger.post_entry(\n            account=f\"receivable:{invoice.customer_id}\",\n"
                  "            amount=invoice.total,\n            reference=invoice.id,\n        )\n", ""),
            ("clients/python/acme_clients/ledger.py",
             "\n    def post_entry(self, account: str, amount: int, reference: str) -> None:\n"
             "        \"\"\"Book one entry synchronously: POST /v1/entries (ADR-3).\"\"\"\n"
             "        self.http.post(\"/v1/entries\", {\"account\": account, \"amount\": amount, \"reference\": reference})\n", ""),
        ], symbols=[sym(SVC, "InvoiceService._post_to_ledger"),
                    sym("clients/python/acme_clients/ledger.py", "LedgerClient.post_entry")]),
        s("balance", "bo", 45, "Show outstanding balance on invoices from the ledger (PAY-22)", edits=[
            (SVC, "    def create(self, customer_id: str, items: list[LineItem]) -> Invoice:\n",
             "    def outstanding_balance(self, customer_id: str) -> int:\n"
             "        \"\"\"What the customer still owes, from the ledger, in cents.\"\"\"\n"
             "        return self.ledger.get_balance(f\"receivable:{customer_id}\")\n\n"
             "    def create(self, customer_id: str, items: list[LineItem]) -> Invoice:\n"),
            ("services/ledger/internal/api/api.go", "\t_ = json.NewEncoder(w).Encode(map[string]int64{\"balance\": balance})\n",
             "\tw.Header().Set(\"content-type\", \"application/json\")\n"
             "\t_ = json.NewEncoder(w).Encode(map[string]int64{\"balance\": balance})\n"),
            ("services/ledger/README.md", "- PostgreSQL for the entries (ADR-2).\n", LEDGER_README_KAFKA),
        ], symbols=[sym(SVC, "InvoiceService.outstanding_balance"),
                    sym("services/ledger/internal/api/api.go", "Server.HandleBalance")]),
        s("deps", "dev", 38, "Upgrade gateway dependencies (PLAT-23)", edits=[
            ("services/gateway/package.json", '"ioredis": "5.3.2"', '"ioredis": "5.4.1"'),
            ("services/gateway/package.json", '"typescript": "5.3.3"', '"typescript": "5.4.5"'),
        ]),
        s("currency", "ana", 30, "Support multi-currency invoices (PAY-27)", edits=[
            (f"{B}/invoices/models.py", '    status: str = "draft"\n    total: int = 0\n',
             '    status: str = "draft"\n    total: int = 0\n    currency: str = "EUR"\n'),
            (f"{B}/invoices/models.py", '            "total": self.total,\n',
             '            "total": self.total,\n            "currency": self.currency,\n'),
            (H, "        return 200, invoice.to_dict()\n",
             "        payload = invoice.to_dict()\n"
             "        payload[\"display_total\"] = f\"{invoice.total / 100:.2f} {invoice.currency}\"\n"
             "        return 200, payload\n"),
        ], symbols=[sym(f"{B}/invoices/models.py", "Invoice"), sym(f"{B}/invoices/models.py", "Invoice.to_dict"),
                    sym(H, "InvoiceHandler.get")]),
        s("inc042_cause", "bo", 20, "Apply tax rates from the request in the invoice API (PAY-31)", edits=[
            (H, '        invoice = self.service.create(customer_id=body["customer_id"], items=items)\n',
             '        tax_rate = float(body["tax_rate"])\n'
             '        invoice = self.service.create(customer_id=body["customer_id"], items=items, tax_rate=tax_rate)\n'),
            (SVC, "    def create(self, customer_id: str, items: list[LineItem]) -> Invoice:\n",
             "    def create(self, customer_id: str, items: list[LineItem], tax_rate: float) -> Invoice:\n"),
            (SVC, "        invoice.total = apply_tax(invoice.subtotal())\n",
             "        invoice.total = apply_tax(invoice.subtotal(), tax_rate)\n"),
            (f"{B}/invoices/tax.py", "    return int(amount + 0.5)\n",
             "    return int(Decimal(str(amount)).quantize(Decimal(\"1\"), rounding=ROUND_HALF_EVEN))\n"),
            (f"{B}/invoices/tax.py", "from __future__ import annotations\n",
             "from __future__ import annotations\n\nfrom decimal import ROUND_HALF_EVEN, Decimal\n"),
        ], symbols=[FAILING_SYMBOL, sym(SVC, "InvoiceService.create"), sym(f"{B}/invoices/tax.py", "round_money")]),
        s("inc042_fix", "ana", 18 - 4.67 / 24, "Fix invoice creation without a tax rate\n\n"
          "Requests from the gateway carry no tax_rate; InvoiceHandler.post raised KeyError and\n"
          "answered 500. Fall back to the default rate.\n\nFixes: INC-042\nRefs: PAY-32\n", edits=[
            (H, '        tax_rate = float(body["tax_rate"])\n',
             '        tax_rate = float(body.get("tax_rate", DEFAULT_TAX_RATE))\n'),
            (H, "from ..invoices.service import InvoiceService\n",
             "from ..invoices.service import InvoiceService\nfrom ..invoices.tax import DEFAULT_TAX_RATE\n"),
        ], symbols=[FAILING_SYMBOL]),
        s("inc042_doc", "carla", 16, "Add postmortem for INC-042", writes={
            "docs/incidents/INC-042.md": lambda ctx: ctx.incident_md("INC-042"),
        }),
        s("adr6", "ana", 12, "ADR-0006: idempotency keys for the invoice API\n\nRefs INC-042\n", writes={
            ADR_FILES["adr:6"]: lambda ctx: adr_madr(
                "Idempotency keys for the invoice API", ctx.day(12), "accepted",
                ["Ana Lima", "Bo Chen", "Carla Diaz"],
                "During INC-042 the gateway retried failed POST /v1/invoices requests; once the handler "
                "was fixed some retries created duplicate invoices. How do we make invoice creation "
                "safe to retry?",
                ["Idempotency keys stored in Redis", "Unique constraint on a client reference in PostgreSQL",
                 "No retries in the gateway"],
                'Chosen option: "Idempotency keys stored in Redis". The gateway sends an '
                "`Idempotency-Key` header; InvoiceHandler.post in services/billing answers a repeated "
                "key with the stored response.",
                "Billing depends on Redis. Keys expire after 24 hours."),
        }),
        s("adr6_impl", "bo", 10, "Implement ADR-6: Redis idempotency keys in the invoice API (PAY-33)", writes={
            f"{B}/api/idempotency.py": IDEMPOTENCY_PY,
        }, edits=[
            (H, "from ..invoices.tax import DEFAULT_TAX_RATE\n",
             "from ..invoices.tax import DEFAULT_TAX_RATE\nfrom .idempotency import IdempotencyStore\n"),
            (H, "    def __init__(self, service: InvoiceService) -> None:\n        self.service = service\n",
             "    def __init__(self, service: InvoiceService, idempotency: IdempotencyStore) -> None:\n"
             "        self.service = service\n        self.idempotency = idempotency\n"),
            (H, '        body = request["body"]\n        items = [\n',
             '        key = request.get("headers", {}).get("idempotency-key")\n'
             "        if key:\n            stored = self.idempotency.get(key)\n"
             "            if stored is not None:\n                return stored\n"
             '        body = request["body"]\n        items = [\n'),
            (H, "        return 201, invoice.to_dict()\n",
             "        answer = invoice.to_dict()\n        if key:\n"
             "            self.idempotency.remember(key, 201, answer)\n        return 201, answer\n"),
            (f"{B}/app.py", "def build_routes(conn) -> dict:\n",
             "def build_routes(conn, redis) -> dict:\n"),
            (f"{B}/app.py", "    invoices = InvoiceHandler(service)\n",
             "    invoices = InvoiceHandler(service, IdempotencyStore(redis))\n"),
            (f"{B}/app.py", "from .api.handlers import HealthHandler, InvoiceHandler\n",
             "from .api.handlers import HealthHandler, InvoiceHandler\nfrom .api.idempotency import IdempotencyStore\n"),
        ], symbols=[FAILING_SYMBOL, sym(H, "InvoiceHandler.__init__"),
                    sym(f"{B}/api/idempotency.py", "IdempotencyStore.get"),
                    sym(f"{B}/api/idempotency.py", "IdempotencyStore.remember"),
                    sym(f"{B}/app.py", "build_routes")]),
        s("gateway_idem", "dev", 5, "Send idempotency keys on invoice creation (ADR-6, PLAT-35)", edits=[
            ("clients/ts/billing.ts", "    return this.http.post<Invoice>(\"/v1/invoices\", { customer_id: customerId, items }, options);\n",
             "    const headers = { ...(options.headers ?? {}), \"idempotency-key\": idempotencyKey(customerId, items) };\n"
             "    return this.http.post<Invoice>(\"/v1/invoices\", { customer_id: customerId, items }, { ...options, headers });\n"),
            ("clients/ts/billing.ts", "export class BillingClient {\n",
             "/** A key that is the same for the same customer and lines, so retries are recognised. */\n"
             "export function idempotencyKey(customerId: string, items: InvoiceLine[]): string {\n"
             "  return customerId + \":\" + items.map((i) => `${i.sku}x${i.quantity}@${i.unit_price}`).join(\",\");\n"
             "}\n\nexport class BillingClient {\n"),
        ], symbols=[sym("clients/ts/billing.ts", "BillingClient.createInvoice"),
                    sym("clients/ts/billing.ts", "idempotencyKey")], coauthors=["carla"]),
        s("runbook", "emma", 2, "Add notifications runbook (GRO-40)", writes={
            "docs/runbooks/notifications.md": RUNBOOK_MD,
        }),
    ]


# --- incidents ----------------------------------------------------------------------------------

INCIDENTS = {
    "INC-031": {
        "title": "Ledger double-booked invoice entries",
        "severity": "SEV-2",
        "start": (101, 8.5), "end": (101, 12.25),
        "services": ["ledger", "billing"],
        "caused_by": ["inc031_cause"], "resolved_by": ["inc031_fix"],
        "decisions": ["ADR-5"],
        "failing_symbol": f"sym:{LEDGER_STORE}::Store.AppendBatch",
        "summary": "Retried batches in Store.AppendBatch (services/ledger) inserted ledger entries twice; "
                   "customer balances showed double charges.",
        "impact": "About 1,200 invoices were booked twice for 4 hours. Billing showed wrong outstanding balances.",
        "root_cause": "Store.AppendBatch retried the whole batch after a partial failure without an "
                      "idempotency check on the entry reference.",
        "resolution": "Entries are inserted with ON CONFLICT (reference) DO NOTHING; duplicates were removed.",
        "actions": ["Move ledger writes to Kafka with idempotent consumers (ADR-5)",
                    "Alert on duplicate references"],
    },
    "INC-038": {
        "title": "Customers received duplicate invoice emails",
        "severity": "SEV-3",
        "start": (68, 7.2), "end": (68, 11.0),
        "services": ["notifications"],
        "caused_by": ["inc038_cause"], "resolved_by": ["inc038_fix"],
        "decisions": [],
        "failing_symbol": f"sym:{EMAIL_SENDER}::EmailSender.send",
        "summary": "EmailSender.send retried SMTP timeouts; many timed-out messages had been delivered, "
                   "so customers got two or three copies of invoice emails.",
        "impact": "Roughly 8,000 duplicate emails over 4 hours; support tickets from customers.",
        "root_cause": "Retries without deduplication in EmailSender.send (services/notifications).",
        "resolution": "A Redis DeliveryLog records each delivery; repeated sends are dropped.",
        "actions": ["Dashboard for SMTP timeouts"],
    },
    "INC-042": {
        "title": "Invoice creation failing with HTTP 500",
        "severity": "SEV-1",
        "start": (18, 14.08), "end": (18, 17.5),
        "services": ["billing"],
        "caused_by": ["inc042_cause"], "resolved_by": ["inc042_fix"],
        "decisions": ["ADR-6"],
        "failing_symbol": FAILING_SYMBOL,
        "summary": "POST /v1/invoices returned HTTP 500 for every request from the gateway. "
                   "InvoiceHandler.post in services/billing/api/handlers.py raised KeyError on the "
                   "missing tax_rate field.",
        "impact": "No invoices could be created through the public API for 3.5 hours; the gateway "
                  "(services/gateway) retried and some customers later got duplicate invoices.",
        "root_cause": "A change for PAY-31 read body[\"tax_rate\"] unconditionally; the gateway's "
                      "BillingClient.createInvoice never sends it. Tests only covered requests with a rate.",
        "resolution": "InvoiceHandler.post falls back to DEFAULT_TAX_RATE. Duplicates were voided by hand.",
        "actions": ["Idempotency keys for invoice creation (ADR-6)",
                    "Contract tests between clients/ts/billing.ts and the billing API"],
    },
}


class Context:
    """What generated file contents need: dates relative to --now and the shas made so far."""

    def __init__(self, now: date) -> None:
        self.base = datetime(now.year, now.month, now.day, 12, 0, tzinfo=timezone.utc)
        self.shas: dict[str, str] = {}
        self.root: Path | None = None  # the repository, once it is being written

    def at(self, days_ago: float, hour: float | None = None) -> datetime:
        """``days_ago`` days before noon UTC of --now; or at ``hour`` UTC of that day if given."""
        if hour is None:
            when = self.base - timedelta(days=days_ago)
        else:
            when = (self.base - timedelta(days=int(days_ago))).replace(hour=0) + timedelta(hours=hour)
        return when.replace(second=0, microsecond=0)  # whole minutes read better in documents

    def day(self, days_ago: int) -> str:
        return self.at(days_ago).date().isoformat()

    def incident_fields(self, ident: str) -> dict:
        inc = INCIDENTS[ident]
        return {
            "id": ident,
            "title": inc["title"],
            "severity": inc["severity"],
            "started_at": _iso(self.at(*inc["start"])),
            "ended_at": _iso(self.at(*inc["end"])),
            "services": inc["services"],
            "caused_by": [self.shas[label] for label in inc["caused_by"]],
            "resolved_by": [self.shas[label] for label in inc["resolved_by"]],
            "decisions": inc["decisions"],
        }

    def incident_md(self, ident: str) -> str:
        f = self.incident_fields(ident)
        inc = INCIDENTS[ident]
        lines = ["---"]
        for key in ("id", "title", "severity", "started_at", "ended_at"):
            lines.append(f"{key}: {f[key]}" if key != "title" else f'title: "{f[key]}"')
        for key in ("services", "caused_by", "resolved_by", "decisions"):
            lines.append(f"{key}:" if f[key] else f"{key}: []")
            lines += [f"  - {v}" for v in f[key]]
        lines.append("---")
        body = [
            f"# {ident}: {inc['title']}", "", "## Summary", "", inc["summary"], "", "## Impact", "",
            inc["impact"], "", "## Root Cause", "", inc["root_cause"],
            "", f"Caused by commit {f['caused_by'][0]}.", "", "## Resolution", "", inc["resolution"], "",
            f"Resolved by commit {f['resolved_by'][0]}.", "", "## Action Items", "",
            *[f"- [ ] {a}" for a in inc["actions"]], "",
        ]
        return "\n".join(lines + [""] + body)

    def incident_json(self, ident: str) -> str:
        inc = INCIDENTS[ident]
        doc = self.incident_fields(ident)
        doc.update(summary=inc["summary"], impact=inc["impact"], root_cause=inc["root_cause"],
                   resolution=inc["resolution"], action_items=inc["actions"])
        return json.dumps(doc, indent=2) + "\n"


def _iso(when: datetime) -> str:
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- git ----------------------------------------------------------------------------------------


class Git:
    """Runs git in the example repository with a neutral, fixed configuration."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(root),  # no user configuration leaks in
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "LC_ALL": "C",
            "TZ": "UTC",
        }

    def __call__(self, *args: str, env: dict | None = None, input: bytes | None = None) -> str:
        proc = subprocess.run(
            ["git", "-c", "core.autocrlf=false", "-c", "commit.gpgsign=false", "-c", "core.fileMode=true",
             *args],
            cwd=self.root, env={**self.env, **(env or {})}, input=input, capture_output=True,
        )
        if proc.returncode != 0:
            raise SystemExit(f"git {' '.join(args)} failed: {proc.stderr.decode(errors='replace').strip()}")
        return proc.stdout.decode().strip()

    def commit(self, who: str, when: datetime, message: str, coauthors: list[str], *,
               merge: str | None = None) -> str:
        name, email = PEOPLE[who]
        if coauthors:
            message = message.rstrip("\n") + "\n"
            if "\n\n" not in message.strip("\n") or not _ends_with_trailers(message):
                message += "\n"
            message += "".join(f"Co-authored-by: {PEOPLE[c][0]} <{PEOPLE[c][1]}>\n" for c in coauthors)
        stamp = f"{int(when.timestamp())} +0000"
        env = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_AUTHOR_DATE": stamp,
               "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email, "GIT_COMMITTER_DATE": stamp}
        if merge:
            self("merge", "--no-ff", "-q", "--no-edit", "-m", message, merge, env=env)
        else:
            self("add", "-A")
            self("commit", "-q", "--no-verify", "--cleanup=strip", "-F", "-", env=env,
                 input=message.encode())
        return self("rev-parse", "HEAD")


def _ends_with_trailers(message: str) -> bool:
    last = message.strip("\n").split("\n\n")[-1]
    return all(":" in line and " " not in line.split(":", 1)[0] for line in last.splitlines())


def _apply(root: Path, step: Step, ctx: Context) -> None:
    for path, content in step.writes.items():
        text = content(ctx) if callable(content) else content
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    for path, old, new in step.edits:
        target = root / path
        text = target.read_text(encoding="utf-8")
        if old is None:  # append
            text += new
        else:
            if text.count(old) != 1:
                raise SystemExit(f"internal error: edit for {step.label} does not match {path} once")
            text = text.replace(old, new)
        target.write_text(text, encoding="utf-8")
    for path in step.deletes:
        (root / path).unlink()


def make_org(out: Path, now: date) -> dict:
    """Build the repository in ``out/acme``; return the facts (also written to ``out/facts.json``)."""
    root = out / "acme"
    root.mkdir(parents=True)
    git = Git(root)
    git("init", "-q", "-b", "main", "--template=")
    ctx = Context(now)
    ctx.root = root
    steps = build_steps()
    files_by_label: dict[str, list[str]] = {}
    for step in steps:
        when = ctx.at(step.days_ago)
        if step.branch:
            if git("branch", "--list", step.branch) == "":
                git("checkout", "-q", "-b", step.branch)
            else:
                git("checkout", "-q", step.branch)
        _apply(root, step, ctx)
        ctx.shas[step.label] = git.commit(step.who, when, step.message, step.coauthors, merge=step.merge)
        files_by_label[step.label] = sorted(
            set(step.writes) | {e[0] for e in step.edits} | set(step.deletes))
        if step.branch:
            git("checkout", "-q", "main")
    facts = build_facts(ctx, steps, files_by_label, now)
    (out / "facts.json").write_text(json.dumps(facts, indent=2, sort_keys=True) + "\n")
    return facts


# --- ground truth -------------------------------------------------------------------------------


def build_facts(ctx: Context, steps: list[Step], files: dict[str, list[str]], now: date) -> dict:
    """Everything later tests and evaluations need to know, with keys exactly as SPEC.md writes them."""
    by_label = {s.label: s for s in steps}
    commit = lambda label: f"commit:{ctx.shas[label]}"  # noqa: E731
    owner_team = {svc: team for team, t in TEAMS.items() for svc in t["services"]}
    services = {}
    for name, svc in SERVICES.items():
        services[f"service:{name}"] = {
            "language": svc["language"],
            "paths": svc["paths"],
            "team": f"team:{owner_team[name]}",
            "depends_on": sorted(f"service:{d}" for s, d, _ in DEPENDENCIES if s == name),
        }
    adrs = {
        "adr:1": {"title": "Record architecture decisions", "format": "nygard", "status": "accepted"},
        "adr:2": {"title": "Use PostgreSQL for billing and ledger", "format": "nygard", "status": "accepted"},
        "adr:3": {"title": "Synchronous HTTP between billing and ledger", "format": "madr",
                  "status": "superseded", "superseded_by": "adr:5"},
        "adr:4": {"title": "TypeScript API gateway in front of all services", "format": "madr", "status": "accepted"},
        "adr:5": {"title": "Publish ledger entries through Kafka", "format": "nygard", "status": "accepted",
                  "supersedes": "adr:3"},
        "adr:6": {"title": "Idempotency keys for the invoice API", "format": "madr", "status": "accepted"},
    }
    implementations: dict[str, list[dict]] = {}
    references: dict[str, list[str]] = {}
    for step in steps:
        for m in re.finditer(r"ADR[-_ ]?0*(\d+)", step.message, re.IGNORECASE):
            key = f"adr:{int(m.group(1))}"
            implemented = re.search(rf"Implement\w*\s+ADR-0*{m.group(1)}\b", step.message)
            if implemented:
                entry = {"commit": commit(step.label), "files": [f"file:{p}" for p in files[step.label]],
                         "symbols": sorted(step.symbols)}
                if entry not in implementations.setdefault(key, []):
                    implementations[key].append(entry)
            elif commit(step.label) not in references.setdefault(key, []):
                references[key].append(commit(step.label))
    for key, info in adrs.items():
        info["implemented_by"] = implementations.get(key, [])
        info["referenced_by"] = references.get(key, [])
        info["path"] = ADR_FILES[key]
    incidents = {}
    for ident, inc in INCIDENTS.items():
        fields = ctx.incident_fields(ident)
        incidents[f"incident:{ident}"] = {
            "title": inc["title"],
            "severity": inc["severity"],
            "started_at": fields["started_at"],
            "ended_at": fields["ended_at"],
            "services": [f"service:{s}" for s in inc["services"]],
            "caused_by": [f"commit:{s}" for s in fields["caused_by"]],
            "resolved_by": [f"commit:{s}" for s in fields["resolved_by"]],
            "decisions": [f"adr:{int(d.split('-')[1])}" for d in inc["decisions"]],
            "failing_symbol": inc["failing_symbol"],
            "path": f"docs/incidents/{ident}.{'json' if ident == 'INC-038' else 'md'}",
            "format": "json" if ident == "INC-038" else "markdown",
            "fix_authors": [f"person:{PEOPLE[by_label[label].who][1]}" for label in inc["resolved_by"]],
        }
    latest = max(incidents, key=lambda k: incidents[k]["started_at"])
    month_ago = _iso(ctx.base - timedelta(days=30))
    recent = [k for k, v in incidents.items() if v["started_at"] >= month_ago]
    recent_services = {s for k in recent for s in incidents[k]["services"]}
    dependents = sorted(k for k, v in services.items() if set(v["depends_on"]) & recent_services)
    callers_of_failing = sorted(f"service:{s}" for s, d, _ in DEPENDENCIES
                                if f"service:{d}" in incidents[latest]["services"])
    # Code that changed because of ADR-5: what the commits implementing it changed, including the files
    # they created and every definition in them (deleted code is closed in the graph, so not asked for).
    adr5_code = sorted({s for e in implementations.get("adr:5", []) for s in e["symbols"]}
                       | {f"sym:{path}::{q}" for path, quals in CREATED_BY_ADR5.items() for q in quals}
                       | {f"file:{path}" for path in CREATED_BY_ADR5})
    questions = [
        {"id": "org-1", "question": "Which services depend on a service that had an incident in the last month?",
         "gold": dependents, "hops": 3},
        {"id": "org-2", "question": "Show me all code that changed because of ADR-5.",
         "gold": adr5_code, "hops": 2},
        {"id": "org-3", "question": "Which team owns the service that calls the endpoint that failed in the latest incident?",
         "gold": sorted({services[s]["team"] for s in callers_of_failing}), "hops": 4},
        {"id": "org-4", "question": "Which commit caused INC-042?", "gold": incidents["incident:INC-042"]["caused_by"],
         "hops": 1},
        {"id": "org-5", "question": "Who fixed the incident that hit the notifications service?",
         "gold": incidents["incident:INC-038"]["fix_authors"], "hops": 2},
        {"id": "org-6", "question": "Which decision replaced synchronous HTTP calls from billing to the ledger?",
         "gold": ["adr:5"], "hops": 2},
        {"id": "org-7", "question": "Which endpoint handler failed in the latest incident?",
         "gold": [incidents[latest]["failing_symbol"]], "hops": 1},
        # Asks about what code does, not how nodes relate: the kind of question the reranker reorders.
        {"id": "org-8", "question": "Which function computes the tax on an invoice?",
         "gold": ["sym:services/billing/invoices/tax.py::apply_tax"], "hops": 1},
    ]
    added = {}
    for step in steps:
        for path in step.writes:
            added.setdefault(path, step.label)
    docs = {
        "documents": {
            f"doc:{path}": {"path": path, "title": title, "doc_type": doc_type,
                            "format": {".md": "markdown"}.get(Path(path).suffix, "editorconfig"),
                            "added_by": commit(added[path]),
                            "sections": [h for h in _headings(path, ctx) if h != title],
                            "conventions": conventions}
            for path, (title, doc_type, conventions) in DOCS.items()
        },
        "questions": [{"id": qid, "question": text, "gold": [f"doc:{path}"], "section": section, "hops": 1,
                       "type": "documentation"} for qid, text, path, section in DOC_QUESTIONS],
    }
    return {
        "now": now.isoformat(),
        "repo_dir": "acme",
        "project": "acme",
        "head": commit(steps[-1].label),
        "commit_count": len(steps),
        "commits": {s.label: ctx.shas[s.label] for s in steps},
        "people": {f"person:{e}": n for n, e in PEOPLE.values()},
        "teams": {f"team:{t}": {"members": [f"person:{PEOPLE[m][1]}" for m in v["members"]],
                                "services": [f"service:{s}" for s in v["services"]]} for t, v in TEAMS.items()},
        "services": services,
        "dependencies": [{"from": f"service:{s}", "to": f"service:{d}", "via": f"file:{p}"}
                         for s, d, p in DEPENDENCIES],
        "adrs": adrs,
        "supersedes": [["adr:5", "adr:3"]],
        "incidents": incidents,
        "latest_incident": latest,
        "commit_symbols": {commit(s.label): sorted(s.symbols) for s in steps if s.symbols},
        "questions": questions,
        "docs": docs,
    }


def _headings(path: str, ctx: Context) -> list[str]:
    """Section headings of a document as the final tree has it (Markdown ``#`` lines, EditorConfig
    ``[glob]`` lines)."""
    assert ctx.root is not None
    text = (ctx.root / path).read_text(encoding="utf-8")
    pattern = r"^\[(.+)\]$" if path.endswith(".editorconfig") else r"^#{1,6} (.+)$"
    return [f"[{m}]" if path.endswith(".editorconfig") else m for m in re.findall(pattern, text, re.MULTILINE)]


# Definitions in the files the ADR-5 commits create (PUBLISHER_PY, CONSUMER_GO).
CREATED_BY_ADR5 = {
    "libs/python/acme_events/publisher.py": ["EventPublisher", "EventPublisher.__init__", "EventPublisher.publish"],
    "services/ledger/internal/consumer/consumer.go": ["Consumer", "NewConsumer", "Consumer.Handle", "Consumer.Run"],
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("outdir", type=Path, help="folder to create (repository in OUTDIR/acme)")
    parser.add_argument("--now", default=None, help="reference date YYYY-MM-DD (default: today, UTC)")
    parser.add_argument("--force", action="store_true", help="replace OUTDIR if it exists")
    args = parser.parse_args(argv)
    try:
        now = date.fromisoformat(args.now) if args.now else datetime.now(timezone.utc).date()
    except ValueError:
        print(f"error: --now must be YYYY-MM-DD, got {args.now!r}", file=sys.stderr)
        return 2
    out: Path = args.outdir
    if out.exists() and any(out.iterdir()):
        if not args.force:
            print(f"error: {out} exists and is not empty (use --force to replace it)", file=sys.stderr)
            return 2
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    facts = make_org(out, now)
    print(f"created {out / 'acme'} ({facts['commit_count']} commits, HEAD {facts['head'][7:19]}); "
          f"ground truth in {out / 'facts.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
