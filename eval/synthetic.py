"""A synthetic software organisation, deterministic for a seed, with multi-hop questions about it.

    python -m eval.synthetic OUT_DIR [--seed N] [--size small|default|large|N] [--now YYYY-MM-DD] [--force]

writes ``OUT_DIR/<org>/`` (a real git repository that ``graphmem ingest`` reads like any other),
``OUT_DIR/facts.json`` (the ground truth, outside the repository so an ingest never sees it) and
``OUT_DIR/questions.jsonl`` (SPEC.md evaluation format, gold keys from the construction, never
from graphmem).

The organisation: services in Python, Go, TypeScript and Java, each with a store, domain modules
and an HTTP API; every service publishes a client library per language of the services that call
it, and the client files belong to the called service (``graphmem.toml``), so a caller's import
and call of a client crosses a service boundary the way graphmem derives DEPENDS_ON from. Teams
own services (CODEOWNERS and ``graphmem.toml``), people are team members and commit authors.
Decision records (Nygard and MADR) are implemented by "Implement ADR-n" commits and some are
superseded; incidents name the services they hit, the function that failed and the commits that
caused and fixed them (Markdown with front matter, or JSON). Commits are written with
``git fast-import``: identities, dates, messages and contents depend on the seed, size and
``now`` only, so the commit shas are the same on every machine.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import posixpath
import random
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

# --- vocabulary ---------------------------------------------------------------------------------

LANGUAGES = ("python", "go", "typescript", "java")
LANGUAGE_NAMES = {"python": "Python", "go": "Go", "typescript": "TypeScript", "java": "Java"}
SIZES = {"small": 6, "default": 14, "large": 24}
ORG_NAMES = ("acme", "globex", "initech", "umbrella", "hooli", "vandelay", "wonka", "stark", "tyrell", "cyberdyne")
# (service, its two nouns). Nouns are unique across services, so "verb + noun" names a function.
SERVICE_BANK = (
    ("billing", ("invoice", "credit_note")), ("ledger", ("journal_entry", "account_balance")),
    ("payments", ("card_charge", "payout")), ("orders", ("order", "basket")),
    ("catalog", ("product", "category")), ("inventory", ("stock_level", "reservation")),
    ("shipping", ("parcel", "shipping_label")), ("notifications", ("email_message", "push_alert")),
    ("accounts", ("customer_profile", "postal_address")), ("auth", ("session_token", "api_key")),
    ("search", ("search_query", "ranking")), ("pricing", ("price_rule", "discount")),
    ("reviews", ("review", "star_rating")), ("recommendations", ("suggestion", "affinity_score")),
    ("analytics", ("event_batch", "funnel")), ("fraud", ("risk_signal", "fraud_case")),
    ("reporting", ("monthly_report", "export_job")), ("subscriptions", ("subscription", "renewal")),
    ("tax", ("tax_rate", "tax_filing")), ("warehouse", ("pick_list", "bin_location")),
    ("returns", ("return_request", "refund")), ("loyalty", ("reward_point", "loyalty_tier")),
    ("media", ("image_asset", "thumbnail")), ("scheduler", ("cron_job", "time_slot")),
    ("compliance", ("audit_record", "retention_policy")), ("gateway", ("route", "rate_limit")),
)
TEAM_BANK = (("payments-team", "PAY"), ("platform", "PLAT"), ("growth", "GRO"), ("logistics", "LOG"),
             ("trust", "TRU"), ("insights", "INS"), ("commerce", "COM"), ("core", "CORE"),
             ("mobile", "MOB"), ("risk", "RSK"), ("marketplace", "MKT"), ("foundations", "FND"))
FIRST_NAMES = ("Ana", "Bo", "Carla", "Dev", "Emma", "Femi", "Gus", "Hana", "Ivan", "Jia", "Kofi", "Lena",
               "Mateo", "Nia", "Omar", "Priya", "Quinn", "Rosa", "Sami", "Tara", "Uma", "Viktor", "Wen",
               "Xena", "Yusuf", "Zoe", "Aiko", "Bram", "Chidi", "Dana", "Eli", "Farah", "Goran", "Ines")
LAST_NAMES = ("Lima", "Chen", "Diaz", "Patel", "Novak", "Okafor", "Berg", "Sato", "Petrov", "Wang", "Mensah",
              "Keller", "Rossi", "Adeyemi", "Haddad", "Nair", "Moreau", "Silva", "Kaur", "Jensen", "Ito", "Costa")
# (verb, docstring): {a} is the noun with its article, {n} the noun, {svc} the service.
VERBS = (
    ("validate", "Checks that {a} has every required field before it is accepted."),
    ("normalise", "Normalises the text fields of {a}: trimmed values, lower-case keys."),
    ("round", "Rounds the amounts of {a} to whole cents, half to even."),
    ("reconcile", "Reconciles {a} against the records of the upstream system."),
    ("expire", "Expires {a} once its time to live has passed."),
    ("score", "Computes a risk score for {a} from its recent history."),
    ("enrich", "Adds derived attributes to {a} before it is stored."),
    ("deduplicate", "Drops repeated copies of {a} delivered more than once."),
    ("throttle", "Limits how often {a} may be processed per minute."),
    ("archive", "Moves {a} older than a year to cold storage."),
    ("summarise", "Builds a short human-readable summary of {a}."),
    ("schedule", "Schedules the next processing run for {a}."),
    ("merge", "Merges two versions of {a}, the newer field winning."),
    ("allocate", "Allocates capacity from the shared pool to {a}."),
    ("price", "Calculates the price of {a} including discounts."),
    ("redact", "Removes personal data from {a} before it is logged."),
    ("split", "Splits {a} into parts that fit the downstream size limit."),
    ("verify", "Verifies the signature attached to {a}."),
)
# Functions only decisions add: (verb, docstring).
ADR_VERBS = {
    "publish": "Publishes a change event for {a} to the message broker.",
    "cache": "Keeps {a} in the read cache so repeated reads are fast.",
}
TOPICS = {
    "storage": (("PostgreSQL", "MySQL", "DynamoDB", "MongoDB", "Cassandra"), "Store {svc} data in {tech}", None),
    "messaging": (("Kafka", "RabbitMQ", "NATS", "Amazon SQS"), "Publish {svc} events through {tech}", "publish"),
    "caching": (("Redis", "Memcached", "Hazelcast"), "Cache {svc} reads in {tech}", "cache"),
    "resilience": (("exponential backoff", "a circuit breaker", "a retry budget"),
                   "Protect calls made by {svc} with {tech}", None),
    "api": (("URL path versioning", "header versioning", "GraphQL"), "Version the {svc} API with {tech}", None),
}
TOPIC_PHRASES = {"storage": "storage", "messaging": "messaging", "caching": "caching",
                 "resilience": "resilience", "api": "API versioning"}
SYMPTOMS = (
    ("{Svc} {ns} failing with 500 errors", "requests for {ns} failed with HTTP 500"),
    ("Duplicate {ns} in {svc}", "some {ns} were processed twice"),
    ("{Svc} {n} processing stalled", "{n} processing stopped and a backlog built up"),
    ("Stale {ns} served by {svc}", "clients received outdated {ns}"),
    ("{Svc} timeouts on {n} requests", "{n} requests timed out"),
    ("Lost {ns} in {svc}", "a share of new {ns} was never stored"),
)
CAUSES = (
    "dropped the guard for empty input", "read a field that older clients never send",
    "retried writes without an idempotency key", "kept using a stale cache entry after an update",
    "overflowed the batch limit under peak load", "ignored a timeout from a downstream call",
)
FEATURE_MESSAGES = (
    "Tune {n} batch size in {svc} ({t})",
    "Raise the limit in {name} ({t})",
    "{Svc}: handle empty {ns} in {name} ({t})",
    "Speed up {name} for large {ns}\n\nRefs: {t}",
    "Refactor {name} ({t})",
    "Adjust {n} thresholds in {svc} after load test ({t})",
)

# --- names --------------------------------------------------------------------------------------


def _plural(word: str) -> str:
    if word.endswith("y") and word[-2:-1] not in "aeiou":
        return word[:-1] + "ies"
    if word.endswith(("s", "x", "ch", "sh")):
        return word + "es"
    return word + "s"


def _words(noun: str) -> str:
    return noun.replace("_", " ")


def _article(noun: str) -> str:
    return ("an " if noun[0] in "aeiou" else "a ") + _words(noun)


def _pascal(noun: str) -> str:
    return "".join(p.capitalize() for p in noun.split("_"))


def _camel(noun: str) -> str:
    pascal = _pascal(noun)
    return pascal[0].lower() + pascal[1:]


def _spell(language: str, snake: str) -> str:
    """A function name in the language's convention (Go: exported)."""
    return {"python": snake, "go": _pascal(snake), "typescript": _camel(snake), "java": _camel(snake)}[language]


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def _iso(when: datetime) -> str:
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- the model ----------------------------------------------------------------------------------


@dataclass
class Func:
    """One function or method the generator writes; ``key`` is its SPEC symbol key."""

    key: str
    path: str
    qualname: str
    name: str
    cls: str | None
    service: str
    language: str
    layer: str  # store | domain | api | client
    doc: str
    desc: str  # how a question describes it without naming it
    noun: str = ""
    calls: list[str] = field(default_factory=list)
    limit: int = 100
    extras: list[tuple[int, str]] = field(default_factory=list)


@dataclass
class CodeFile:
    path: str
    language: str
    service: str
    doc: str
    package: str = ""  # Go package name, Java package
    cls: str | None = None  # Java class
    class_docs: dict[str, str] = field(default_factory=dict)  # Python classes
    funcs: list[str] = field(default_factory=list)


@dataclass
class Org:
    """The ground truth about a generated organisation; keys exactly as SPEC.md writes them."""

    name: str
    seed: int
    size: str | int
    now: str
    repo_dir: str
    head: str = ""
    services: dict[str, dict] = field(default_factory=dict)
    teams: dict[str, dict] = field(default_factory=dict)
    people: dict[str, str] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    symbols: dict[str, dict] = field(default_factory=dict)
    calls: list[list[str]] = field(default_factory=list)
    dependencies: list[list[str]] = field(default_factory=list)
    adrs: dict[str, dict] = field(default_factory=dict)
    supersedes: list[list[str]] = field(default_factory=list)
    incidents: dict[str, dict] = field(default_factory=dict)
    commits: dict[str, dict] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Org:
        return cls(**json.loads(text))


# --- git ----------------------------------------------------------------------------------------


class _FastImport:
    """Streams commits into ``git fast-import`` and asks it for each commit's sha."""

    def __init__(self, repo: Path) -> None:
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(repo), "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull, "LC_ALL": "C", "TZ": "UTC",
        }
        self.repo = repo
        self.git("init", "-q", "-b", "main", "--template=")
        self.proc = subprocess.Popen(["git", "fast-import", "--quiet", "--done"], cwd=repo, env=self.env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.mark = 0

    def git(self, *args: str) -> str:
        proc = subprocess.run(["git", *args], cwd=self.repo, env=self.env, capture_output=True, check=False)
        if proc.returncode:
            raise RuntimeError(f"git {' '.join(args)}: {proc.stderr.decode(errors='replace').strip()}")
        return proc.stdout.decode()

    def commit(self, name: str, email: str, when: datetime, message: str, changes: dict[str, str]) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.mark += 1
        stamp = f"{int(when.timestamp())} +0000"
        msg = message.encode()
        out = [b"commit refs/heads/main\n", b"mark :%d\n" % self.mark,
               f"author {name} <{email}> {stamp}\ncommitter {name} <{email}> {stamp}\n".encode(),
               b"data %d\n%s\n" % (len(msg), msg)]
        for path in sorted(changes):
            data = changes[path].encode()
            out.append(b"M 100644 inline %s\ndata %d\n%s\n" % (path.encode(), len(data), data))
        out.append(b"\nget-mark :%d\n" % self.mark)
        self.proc.stdin.write(b"".join(out))
        self.proc.stdin.flush()
        sha = self.proc.stdout.readline().decode().strip()
        if len(sha) != 40:
            raise RuntimeError(f"git fast-import gave no sha for commit {self.mark}")
        return sha

    def finish(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"done\n")
        self.proc.stdin.close()
        if self.proc.wait():
            raise RuntimeError("git fast-import failed")
        self.git("reset", "-q", "--hard")


# --- the builder --------------------------------------------------------------------------------


@dataclass
class _Event:
    when: datetime
    seq: int
    run: Callable[[datetime], None]


class _Builder:
    def __init__(self, out: Path, seed: int, size: str | int, now: str) -> None:
        self.rng = random.Random(f"graphmem-synthetic:{seed}:{size}")
        n = SIZES[size] if isinstance(size, str) else int(size)
        self.n = max(4, min(n, len(SERVICE_BANK)))
        self.scale = self.n / SIZES["default"]
        self.base = datetime.combine(date.fromisoformat(now), datetime.min.time(), timezone.utc) + timedelta(hours=12)
        self.org_name = ORG_NAMES[seed % len(ORG_NAMES)]
        self.domain = f"{self.org_name}.dev"
        self.gomod = f"{self.domain}/{self.org_name}"
        self.out = out
        self.org = Org(self.org_name, seed, size, now, self.org_name)
        self.funcs: dict[str, Func] = {}
        self.code: dict[str, CodeFile] = {}
        self.texts: dict[str, str] = {}
        self.written: dict[str, str] = {}
        self.sym_history: dict[str, list[str]] = {}  # symbol key -> commit keys, oldest first
        self.tickets: dict[str, int] = {}
        self.events: list[_Event] = []

    # --- time and randomness ---

    def at(self, days_ago: float) -> datetime:
        return (self.base - timedelta(days=days_ago)).replace(second=0, microsecond=0)

    def event(self, days_ago: float, run: Callable[[datetime], None]) -> None:
        self.events.append(_Event(self.at(days_ago), len(self.events), run))

    def ticket(self, team: str) -> str:
        prefix = self.org.teams[team]["prefix"]
        self.tickets[prefix] = self.tickets.get(prefix, 0) + self.rng.randint(1, 4)
        return f"{prefix}-{self.tickets[prefix]}"

    # --- organisation plan ---

    def plan_org(self) -> None:
        rng = self.rng
        bank = rng.sample(SERVICE_BANK, self.n)
        langs = list(LANGUAGES)
        rng.shuffle(langs)
        langs += [rng.choice(LANGUAGES) for _ in range(self.n - len(langs))]
        n_teams = max(2, min(len(TEAM_BANK), math.ceil(self.n / 2)))
        teams = rng.sample(TEAM_BANK, n_teams)
        used: set[str] = set()
        for tname, prefix in teams:
            members = []
            for _ in range(rng.choice((2, 3, 3, 4))):
                while True:
                    full = f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"
                    if full not in used:
                        break
                used.add(full)
                email = f"{full.lower().replace(' ', '.')}@{self.domain}"
                self.org.people[f"person:{email}"] = full
                members.append(f"person:{email}")
            self.org.teams[f"team:{tname}"] = {"members": members, "services": [], "prefix": prefix,
                                                "handle": f"@{self.org_name}/{tname}"}
        team_keys = list(self.org.teams)
        order = list(range(self.n))
        rng.shuffle(order)
        owner = {i: team_keys[k % n_teams] for k, i in enumerate(order)}
        for i, (svc, nouns) in enumerate(bank):
            deps = sorted(rng.sample(range(i), min(i, rng.choice((1, 1, 2, 2, 3))))) if i else []
            self.org.services[f"service:{svc}"] = {
                "name": svc, "language": langs[i], "nouns": list(nouns), "team": owner[i],
                "depends_on": [f"service:{bank[j][0]}" for j in deps], "paths": [f"services/{svc}/"],
                "created": "",
            }
            self.org.teams[owner[i]]["services"].append(f"service:{svc}")

    def member(self, service: str) -> str:
        return self.rng.choice(self.org.teams[self.org.services[service]["team"]]["members"])

    def anyone(self, service: str) -> str:
        return self.member(service) if self.rng.random() < 0.8 else self.rng.choice(sorted(self.org.people))

    # --- code model ---

    def add_func(self, cf: CodeFile, name: str, layer: str, doc: str, desc: str, cls: str | None = None,
                 noun: str = "") -> Func:
        qual = f"{cls}.{name}" if cls else name
        key = f"sym:{cf.path}::{qual}"
        func = Func(key, cf.path, qual, name, cls, cf.service, cf.language, layer, doc, desc, noun,
                    limit=self.rng.randrange(10, 500, 5))
        self.funcs[key] = func
        cf.funcs.append(key)
        return func

    def service_files(self, skey: str) -> list[CodeFile]:
        """The store, domain and API files of one service (not yet written)."""
        info = self.org.services[skey]
        svc, lang, nouns = info["name"], info["language"], info["nouns"]
        rng = self.rng
        root = f"services/{svc}"
        files: list[CodeFile] = []

        def new(path: str, doc: str, package: str = "", cls: str | None = None) -> CodeFile:
            cf = CodeFile(path, lang, svc, doc, package, cls)
            files.append(cf)
            return cf

        java = f"dev.{self.org_name}.{svc}"
        jroot = f"{root}/src/main/java/dev/{self.org_name}/{svc}"
        Svc = svc.capitalize()
        paths = {
            "python": (f"{root}/store.py", lambda n: f"{root}/{_plural(n)}.py", f"{root}/api.py"),
            "go": (f"{root}/internal/store/store.go",
                   lambda n: f"{root}/internal/{_plural(n).replace('_', '')}/{_plural(n).replace('_', '')}.go",
                   f"{root}/internal/api/api.go"),
            "typescript": (f"{root}/src/store.ts", lambda n: f"{root}/src/{_plural(n).replace('_', '-')}.ts",
                           f"{root}/src/api.ts"),
            "java": (f"{jroot}/store/{Svc}Store.java",
                     lambda n: f"{jroot}/{n.replace('_', '')}/{_pascal(n)}Service.java",
                     f"{jroot}/api/{Svc}Controller.java"),
        }[lang]
        store = new(paths[0], f"Persistence of {svc} records.", "store" if lang == "go" else f"{java}.store",
                    f"{Svc}Store" if lang == "java" else None)
        stores: dict[str, list[Func]] = {}
        for noun in nouns:
            stores[noun] = [
                self.add_func(store, _spell(lang, f"save_{noun}"), "store",
                              f"Persists {_article(noun)} in the {svc} database.",
                              f"the function that persists {_article(noun)} in the {svc} database", store.cls, noun),
                self.add_func(store, _spell(lang, f"load_{noun}"), "store",
                              f"Loads {_article(noun)} by id from the {svc} database.",
                              f"the function that loads {_article(noun)} by id from the {svc} database", store.cls,
                              noun),
            ]
        domain: dict[str, list[Func]] = {}
        verbs = rng.sample(VERBS, 3 * len(nouns))
        for k, noun in enumerate(nouns):
            pkg = _plural(noun).replace("_", "")
            cf = new(paths[1](noun), f"Business rules for {_words(_plural(noun))}.",
                     pkg if lang == "go" else f"{java}.{noun.replace('_', '')}",
                     f"{_pascal(noun)}Service" if lang == "java" else None)
            domain[noun] = []
            for verb, template in verbs[3 * k:3 * k + 3]:
                doc = template.format(a=_article(noun), n=_words(noun), svc=svc)
                doc = doc[0].upper() + doc[1:]
                func = self.add_func(cf, _spell(lang, f"{verb}_{noun}"), "domain", doc,
                                     "the function that " + _lower_first(doc).rstrip("."), cf.cls, noun)
                func.calls.append(rng.choice(stores[noun]).key)
                if domain[noun] and rng.random() < 0.35:
                    func.calls.append(rng.choice(domain[noun]).key)
                domain[noun].append(func)
        api = new(paths[2], f"HTTP API of the {svc} service.", "api" if lang == "go" else f"{java}.api",
                  f"{Svc}Controller" if lang == "java" else None)
        for noun in nouns:
            ns = _plural(noun).replace("_", "-")
            cls = f"{_pascal(noun)}Handler" if lang == "python" else api.cls
            if lang == "python":
                api.class_docs[cls] = f"HTTP handlers for {_words(_plural(noun))}."
            create_name = "create" if lang == "python" else _spell(lang, f"handle_create_{noun}")
            show_name = "show" if lang == "python" else _spell(lang, f"handle_get_{noun}")
            if lang == "java":
                create_name, show_name = _spell(lang, f"create_{noun}"), _spell(lang, f"get_{noun}")
            create = self.add_func(api, create_name, "api", f"Handles POST /v1/{ns}: creates {_article(noun)}.",
                                   f"the handler of POST /v1/{ns} in the {svc} service", cls, noun)
            show = self.add_func(api, show_name, "api", f"Handles GET /v1/{ns}/{{id}}: returns one {_words(noun)}.",
                                 f"the handler of GET /v1/{ns}/{{id}} in the {svc} service", cls, noun)
            create.calls += [f.key for f in rng.sample(domain[noun], 2)]
            show.calls += [stores[noun][1].key, rng.choice(domain[noun]).key]
        # Calls into the services this one depends on, through their clients in this language.
        callers = [f for cf in files for f in (self.funcs[k] for k in cf.funcs) if f.layer in ("api", "domain")]
        for dep in info["depends_on"]:
            client = self.client_file(dep, lang)
            for caller in rng.sample(callers, rng.choice((1, 2))):
                caller.calls.append(rng.choice(client.funcs))
        return files

    def client_file(self, skey: str, lang: str) -> CodeFile:
        """The client of service ``skey`` in ``lang`` (part of that service), made on first use."""
        svc = self.org.services[skey]["name"]
        Svc = svc.capitalize()
        path = {
            "python": f"clients/python/{self.org_name}_clients/{svc}.py",
            "go": f"clients/go/{svc}client/client.go",
            "typescript": f"clients/ts/{svc}.ts",
            "java": f"clients/java/src/main/java/dev/{self.org_name}/clients/{svc}/{Svc}Client.java",
        }[lang]
        if path in self.code:
            return self.code[path]
        package = {"go": f"{svc}client", "java": f"dev.{self.org_name}.clients.{svc}"}.get(lang, "")
        cf = CodeFile(path, lang, svc, f"Client of the {svc} service's HTTP API.", package,
                      f"{Svc}Client" if lang == "java" else None)
        for noun in self.org.services[skey]["nouns"]:
            ns = _plural(noun).replace("_", "-")
            for verb, method, route in (("submit", "POST", f"/v1/{ns}"), ("fetch", "GET", f"/v1/{ns}/{{id}}")):
                self.add_func(cf, _spell(lang, f"{verb}_{noun}"), "client", f"Calls {method} {route} on the {svc} service.",
                              f"the {LANGUAGE_NAMES[lang]} client function that calls {method} {route} on {svc}",
                              cf.cls, noun)
        self.code[path] = cf
        self.org.services[skey]["paths"].append(path)
        return cf

    # --- rendering ---

    def render(self, cf: CodeFile) -> str:
        return {"python": self._python, "go": self._go, "typescript": self._ts, "java": self._java}[cf.language](cf)

    def _callees(self, cf: CodeFile) -> list[Func]:
        seen = {c: None for k in cf.funcs for c in self.funcs[k].calls}
        return [self.funcs[c] for c in seen if self.funcs[c].path != cf.path]

    def _py_module(self, cf: CodeFile, callee: Func) -> str:
        if callee.layer == "client":
            return f"{self.org_name}_clients.{posixpath.basename(callee.path)[:-3]}"
        return "." + posixpath.basename(callee.path)[:-3]

    def _python(self, cf: CodeFile) -> str:
        lines = [f'"""{cf.doc}"""', "", "from __future__ import annotations", ""]
        groups: dict[str, set[str]] = {}
        for callee in self._callees(cf):
            groups.setdefault(self._py_module(cf, callee), set()).add(callee.name)
        for relative in (False, True):
            mods = sorted(m for m in groups if m.startswith(".") == relative)
            lines += [f"from {m} import {', '.join(sorted(groups[m]))}" for m in mods]
            if mods:
                lines.append("")
        current: str | None = None
        for key in cf.funcs:
            f = self.funcs[key]
            if f.cls != current and f.cls:
                lines += ["", "", f"class {f.cls}:", f'    """{cf.class_docs[f.cls]}"""']
            current = f.cls
            ind = "    " if f.cls else ""
            lines += [""] if f.cls else ["", ""]
            self_ = "self, " if f.cls else ""
            lines += [f"{ind}def {f.name}({self_}record_id: str, amount: int) -> int:", f'{ind}    """{f.doc}"""',
                      f"{ind}    limit = {f.limit}", f"{ind}    total = amount + limit"]
            lines += [f"{ind}    total += {self.funcs[c].name}(record_id, amount)" for c in f.calls]
            lines += [f"{ind}    total += {v}  # {note}" for v, note in f.extras]
            lines.append(f"{ind}    return total")
        return "\n".join(_squeeze(lines)) + "\n"

    def _go(self, cf: CodeFile) -> str:
        lines = [f"// Package {cf.package}: {cf.doc}", f"package {cf.package}", ""]
        imports = sorted({f"{self.gomod}/{posixpath.dirname(c.path)}" for c in self._callees(cf)
                          if posixpath.dirname(c.path) != posixpath.dirname(cf.path)})
        if imports:
            lines += ["import ("] + [f'\t"{i}"' for i in imports] + [")", ""]
        for key in cf.funcs:
            f = self.funcs[key]
            lines += [f"// {f.name} {_lower_first(f.doc)}", f"func {f.name}(id string, amount int64) int64 {{",
                      f"\tlimit := int64({f.limit})", "\ttotal := amount + limit"]
            for c in f.calls:
                callee = self.funcs[c]
                same = posixpath.dirname(callee.path) == posixpath.dirname(cf.path)
                qual = callee.name if same else f"{self.code[callee.path].package}.{callee.name}"
                lines.append(f"\ttotal += {qual}(id, amount)")
            lines += [f"\ttotal += {v} // {note}" for v, note in f.extras]
            lines += ["\treturn total", "}", ""]
        return "\n".join(lines).rstrip("\n") + "\n"

    def _ts(self, cf: CodeFile) -> str:
        lines = [f"/** {cf.doc} */"]
        groups: dict[str, set[str]] = {}
        for callee in self._callees(cf):
            rel = posixpath.relpath(callee.path[:-3], posixpath.dirname(cf.path))
            groups.setdefault(rel if rel.startswith(".") else "./" + rel, set()).add(callee.name)
        lines += [f'import {{ {", ".join(sorted(groups[m]))} }} from "{m}";' for m in sorted(groups)]
        lines.append("")
        for key in cf.funcs:
            f = self.funcs[key]
            lines += [f"/** {f.doc} */", f"export function {f.name}(id: string, amount: number): number {{",
                      f"  const limit = {f.limit};", "  let total = amount + limit;"]
            lines += [f"  total += {self.funcs[c].name}(id, amount);" for c in f.calls]
            lines += [f"  total += {v}; // {note}" for v, note in f.extras]
            lines += ["  return total;", "}", ""]
        return "\n".join(lines).rstrip("\n") + "\n"

    def _java(self, cf: CodeFile) -> str:
        lines = [f"package {cf.package};", ""]
        imports = sorted({f"{self.code[c.path].package}.{c.cls}" for c in self._callees(cf)})
        if imports:
            lines += [f"import {i};" for i in imports] + [""]
        lines += [f"/** {cf.doc} */", f"public final class {cf.cls} {{"]
        for key in cf.funcs:
            f = self.funcs[key]
            lines += ["", f"    /** {f.doc} */", f"    public static long {f.name}(String id, long amount) {{",
                      f"        long limit = {f.limit}L;", "        long total = amount + limit;"]
            for c in f.calls:
                callee = self.funcs[c]
                qual = callee.name if callee.path == cf.path else f"{callee.cls}.{callee.name}"
                lines.append(f"        total += {qual}(id, amount);")
            lines += [f"        total += {v}; // {note}" for v, note in f.extras]
            lines += ["        return total;", "    }"]
        lines.append("}")
        return "\n".join(lines) + "\n"

    # --- commits ---

    def commit(self, when: datetime, who: str, message: str, *, symbols: list[str] = (), dirty: list[str] = (),
               texts: dict[str, str] | None = None, kind: str = "change", coauthors: list[str] = ()) -> str:
        """Write every changed file, commit, and record what the commit changed on purpose."""
        changes: dict[str, str] = {}
        for path in dirty:
            content = self.render(self.code[path])
            if self.written.get(path) != content:
                changes[path] = content
        for path, content in (texts or {}).items():
            if self.written.get(path) != content:
                changes[path] = content
        self.written.update(changes)
        message = message.strip() + "\n"
        if coauthors:
            message += "\n" + "".join(f"Co-authored-by: {self.org.people[c]} <{c[7:]}>\n" for c in coauthors)
        sha = self.git.commit(self.org.people[who], who[7:], when, message, changes)
        ckey = f"commit:{sha}"
        self.org.commits[ckey] = {
            "sha": sha, "author": who, "coauthors": list(coauthors), "date": _iso(when),
            "subject": message.split("\n", 1)[0], "kind": kind, "symbols": sorted(set(symbols)),
            "files": sorted(f"file:{p}" for p in changes),
        }
        for s in sorted(set(symbols)):
            self.sym_history.setdefault(s, []).append(ckey)
        return ckey

    def touch(self, key: str, note: str | None = None) -> None:
        """Change one function: a new limit, and maybe one more line."""
        f = self.funcs[key]
        f.limit = self.rng.choice([v for v in range(10, 500, 5) if v != f.limit])
        if note:
            f.extras.append((self.rng.randint(1, 99), note))

    # --- documents ---

    def config_texts(self) -> dict[str, str]:
        live = [s for s, v in self.org.services.items() if v["created"]]
        toml = ["# Which folders make up which service, and who is on which team.", ""]
        for skey in live:
            v = self.org.services[skey]
            toml += [f"[services.{v['name']}]", f"paths = {json.dumps(v['paths'])}",
                     f'language = "{v["language"]}"', f'team = "{v["team"][5:]}"', ""]
        for tkey, t in self.org.teams.items():
            toml += [f"[teams.{tkey[5:]}]", f"members = {json.dumps([m[7:] for m in t['members']])}", ""]
        first = next(iter(self.org.teams.values()))["handle"]
        owners = [f"*  {first}", ""]
        for skey in live:
            v = self.org.services[skey]
            handle = self.org.teams[v["team"]]["handle"]
            owners += [f"/{p}  {handle}" for p in v["paths"]]
        owners += ["", f"/docs/  {first}", ""]
        readme = [f"# {self.org_name} monorepo", "", "Services (see `graphmem.toml`):", ""]
        readme += [f"- `services/{self.org.services[s]['name']}` "
                   f"({LANGUAGE_NAMES[self.org.services[s]['language']]})" for s in live]
        readme += ["", "Clients of each service live in `clients/<language>/` and belong to the called service.",
                   "Decisions are in `docs/adr/`, postmortems in `docs/incidents/`.", ""]
        return {"graphmem.toml": "\n".join(toml), ".github/CODEOWNERS": "\n".join(owners),
                "README.md": "\n".join(readme), "go.mod": f"module {self.gomod}\n\ngo 1.22\n",
                f"clients/python/{self.org_name}_clients/__init__.py": '"""Python clients of the services."""\n'}

    def adr_text(self, adr: dict, status: str) -> str:
        deciders = [f"{self.org.people[p]} <{p[7:]}>" for p in adr["deciders"]]
        svc = adr["service_name"]
        if adr["key"] == "adr:1":
            context = "We need to record the architectural decisions made on this platform."
            decision = "We will keep Architecture Decision Records in docs/adr/, numbered in order."
            consequences = "Decisions are reviewed like code; superseded records stay, marked as superseded."
        else:
            tech = adr["tech"]
            context = (f"The {svc} service needs a clear {TOPIC_PHRASES[adr['topic']]} approach. "
                       + (f"ADR-{adr['supersedes_num']} no longer fits: {adr['reason']}." if adr.get("supersedes_num")
                          else f"Today each part of {svc} does something different."))
            decision = f"The {svc} service uses {tech} for {TOPIC_PHRASES[adr['topic']]}."
            if adr.get("adds"):
                decision += f" New code goes in `{adr['adds']}`."
            consequences = f"The owning team operates {tech} for {svc}; dependent services are told of the change."
        if adr["format"] == "madr":
            front = ["---", f"status: {status}", f"date: {adr['date']}", "deciders:"]
            front += [f"  - {d}" for d in deciders] + ["---", ""]
            return "\n".join(front + [
                f"# {adr['title']}", "", "## Context and Problem Statement", "", context, "",
                "## Decision Outcome", "", f'Chosen option: "{adr.get("tech", "ADRs")}". {decision}', "",
                "### Consequences", "", consequences, ""])
        return "\n".join([
            f"# {adr['number']}. {adr['title']}", "", f"Date: {adr['date']}", "", f"Deciders: {', '.join(deciders)}",
            "", "## Status", "", status, "", "## Context", "", context, "", "## Decision", "", decision, "",
            "## Consequences", "", consequences, ""])

    def incident_text(self, inc: dict) -> str:
        f = self.funcs[inc["failing_symbol"]]
        fields = {
            "id": inc["id"], "title": inc["title"], "severity": inc["severity"], "started_at": inc["started_at"],
            "ended_at": inc["ended_at"], "services": [s[8:] for s in inc["services"]],
            "caused_by": [c[7:] for c in inc["caused_by"]], "resolved_by": [c[7:] for c in inc["resolved_by"]],
            "decisions": [f"ADR-{int(a[4:]):04d}" for a in inc["decisions"]],
        }
        summary = f"Between {inc['started_at']} and {inc['ended_at']} {inc['impact']}."
        root = (f"`{f.qualname}` in `{f.path}` {inc['cause']}. The change came with commit "
                f"{inc['caused_by'][0][7:]}.")
        resolution = f"Commit {inc['resolved_by'][0][7:]} restored the previous behaviour of `{f.qualname}`."
        actions = [f"Add a regression test for `{f.qualname}`", f"Alert on {inc['service_name']} error rates"]
        if inc["format"] == "json":
            doc = {**fields, "summary": summary, "impact": inc["impact"][0].upper() + inc["impact"][1:] + ".",
                   "root_cause": root, "resolution": resolution, "action_items": actions}
            return json.dumps(doc, indent=2) + "\n"
        lines = ["---"]
        for k in ("id", "title", "severity", "started_at", "ended_at"):
            lines.append(f'{k}: "{fields[k]}"' if k == "title" else f"{k}: {fields[k]}")
        for k in ("services", "caused_by", "resolved_by", "decisions"):
            lines += [f"{k}:" if fields[k] else f"{k}: []"] + [f"  - {v}" for v in fields[k]]
        lines += ["---", "", f"# {inc['id']}: {inc['title']}", "", "## Summary", "", summary, "", "## Impact", "",
                  inc["impact"][0].upper() + inc["impact"][1:] + ".", "", "## Root Cause", "", root, "", "## Resolution", "", resolution,
                  "", "## Action Items", "", *[f"- [ ] {a}" for a in actions], ""]
        return "\n".join(lines)

    # --- history plan ---

    def plan_history(self) -> None:
        rng = self.rng
        span = 365
        services = list(self.org.services)
        first_team = next(iter(self.org.teams))
        adr1 = {"key": "adr:1", "number": 1, "title": "Record architecture decisions", "service": None,
                "service_name": "", "topic": "process", "format": "nygard", "path":
                "docs/adr/0001-record-architecture-decisions.md", "deciders": self.org.teams[first_team]["members"][:2]}
        self.adr_plans: list[dict] = [adr1]

        def bootstrap(when: datetime) -> None:
            adr1["date"] = when.date().isoformat()
            texts = self.config_texts()
            texts[adr1["path"]] = self.adr_text(adr1, "Accepted")
            ckey = self.commit(when, adr1["deciders"][0], "Initial monorepo layout and ADR-1", texts=texts,
                               kind="bootstrap")
            adr1["commit"] = ckey

        self.event(span, bootstrap)
        step = 50 / len(services)
        for i, skey in enumerate(services):
            self.event(span - 1 - i * step, lambda when, skey=skey: self.create_service(when, skey))
        # Decisions: per service a few topics, some later superseded by another choice on the topic.
        for skey in services:
            for topic in rng.sample(sorted(TOPICS), rng.choice((2, 2, 3))):
                techs = rng.sample(TOPICS[topic][0], 2)
                first = rng.uniform(120, 300)
                chain = [first]
                if rng.random() < 0.35:
                    chain.append(rng.uniform(max(8.0, first - 150), first - 30))
                prev: dict | None = None
                for k, days in enumerate(chain):
                    adr = {"service": skey, "service_name": self.org.services[skey]["name"], "topic": topic,
                           "tech": techs[k], "days": days, "format": rng.choice(("nygard", "madr")),
                           "deciders": rng.sample(self.org.teams[self.org.services[skey]["team"]]["members"], 2)}
                    adr["title"] = TOPICS[topic][1].format(svc=adr["service_name"], tech=techs[k])
                    if prev is not None:
                        adr["format"] = "nygard"  # "Supersedes ADR-n" in its Status section
                        adr["supersedes_plan"] = prev
                        adr["reason"] = rng.choice(("it did not scale with traffic", "operating it cost too much",
                                                    "incidents showed its limits"))
                    self.adr_plans.append(adr)
                    prev = adr
        # Numbers follow dates, as in a real decision log.
        for number, adr in enumerate(sorted(self.adr_plans[1:], key=lambda a: -a["days"]), start=2):
            adr["number"] = number
            adr["key"] = f"adr:{number}"
            slug = adr["title"].lower().replace(" ", "-")
            adr["path"] = f"docs/adr/{number:04d}-{''.join(c for c in slug if c.isalnum() or c == '-')}.md"
        for adr in self.adr_plans[1:]:
            self.event(adr["days"], lambda when, adr=adr: self.write_adr(when, adr))
            for k in range(rng.choice((0, 1, 1, 2))):
                days = max(1.5, adr["days"] - rng.uniform(1, 12) - k * 3)
                self.event(days, lambda when, adr=adr, k=k: self.implement_adr(when, adr, k))
        # Incidents: a change to one function, the outage, the fix, the postmortem.
        n_inc = max(4, round(2 * len(services) * 1.0))
        self.incident_plans: list[dict] = []
        for i in range(n_inc):
            skey = services[i % len(services)] if i < len(services) else rng.choice(services)
            self.incident_plans.append({"service": skey, "cause_days": rng.uniform(8, 290)})
        self.incident_plans.sort(key=lambda p: -p["cause_days"])
        for i, plan in enumerate(self.incident_plans, start=1):
            plan["id"] = f"INC-{i:03d}"
            plan["start_days"] = plan["cause_days"] - rng.uniform(0.5, 4)
            plan["end_days"] = plan["start_days"] - rng.uniform(1, 8) / 24
            plan["doc_days"] = plan["end_days"] - rng.uniform(1, 3)
            self.event(plan["cause_days"], lambda when, p=plan: self.incident_cause(when, p))
            self.event(plan["end_days"] + 0.2 / 24, lambda when, p=plan: self.incident_fix(when, p))
            self.event(plan["doc_days"], lambda when, p=plan: self.incident_doc(when, p))
        for _ in range(round(4.5 * len(services))):
            skey = rng.choice(services)
            self.event(rng.uniform(1, 300), lambda when, skey=skey: self.feature(when, skey))

    # --- history steps ---

    def create_service(self, when: datetime, skey: str) -> None:
        info = self.org.services[skey]
        info["created"] = _iso(when)
        files = self.service_files(skey)
        for cf in files:
            self.code[cf.path] = cf
        # The clients of this service that its (later) dependents will call.
        langs = sorted({v["language"] for v in self.org.services.values() if skey in v["depends_on"]})
        clients = [self.client_file(skey, lang) for lang in langs]
        paths = [cf.path for cf in files + clients]
        if info["language"] == "python":
            init = f"services/{info['name']}/__init__.py"
            extra = {init: f'"""The {info["name"]} service."""\n'}
        else:
            extra = {}
        symbols = [k for p in paths for k in self.code[p].funcs]
        team = info["team"]
        self.commit(when, self.member(skey), f"Add {info['name']} service ({self.ticket(team)})", symbols=symbols,
                    dirty=paths, texts={**self.config_texts(), **extra}, kind="create")

    def pick(self, skey: str, layers: tuple[str, ...] = ("domain", "api", "store"), k: int = 1) -> list[Func]:
        name = self.org.services[skey]["name"]
        pool = [f for f in self.funcs.values() if f.service == name and f.layer in layers]
        return self.rng.sample(pool, min(k, len(pool)))

    def feature(self, when: datetime, skey: str) -> None:
        info = self.org.services[skey]
        funcs = self.pick(skey, k=self.rng.choice((1, 1, 2)))
        t = self.ticket(info["team"])
        for f in funcs:
            self.touch(f.key, f"{t}: {self.rng.choice(('guard', 'tuning', 'edge case', 'metrics'))}"
                       if self.rng.random() < 0.4 else None)
        noun = funcs[0].noun
        msg = self.rng.choice(FEATURE_MESSAGES).format(n=_words(noun), ns=_words(_plural(noun)), svc=info["name"],
                                                       Svc=info["name"].capitalize(), name=funcs[0].qualname, t=t)
        self.commit(when, self.anyone(skey), msg, symbols=[f.key for f in funcs], dirty=[f.path for f in funcs],
                    kind="feature")

    def write_adr(self, when: datetime, adr: dict) -> None:
        adr["date"] = when.date().isoformat()
        texts = {}
        old = adr.get("supersedes_plan")
        status = "Accepted"
        if old is not None:
            adr["supersedes_num"] = old["number"]
            status = f"Accepted\n\nSupersedes ADR-{old['number']}"
            old["superseded_by_num"] = adr["number"]
            texts[old["path"]] = self.adr_text(
                old, f"superseded by ADR-{adr['number']:04d}" if old["format"] == "madr"
                else f"Superseded by ADR-{adr['number']}")
        verb = TOPICS[adr["topic"]][2]
        if verb:
            noun = self.rng.choice(self.org.services[adr["service"]]["nouns"])
            adr["noun"] = noun
            adr["adds"] = _spell(self.org.services[adr["service"]]["language"], f"{verb}_{noun}")
        texts[adr["path"]] = self.adr_text(adr, status)
        msg = f"ADR-{adr['number']}: {_lower_first(adr['title'])}"
        if old is not None:
            msg += f"\n\nSupersedes ADR-{old['number']}."
        adr["commit"] = self.commit(when, adr["deciders"][0], msg, texts=texts, kind="adr")

    def implement_adr(self, when: datetime, adr: dict, k: int) -> None:
        skey = adr["service"]
        info = self.org.services[skey]
        t = self.ticket(info["team"])
        changed: list[str] = []
        if adr.get("adds") and k == 0:
            noun = adr["noun"]
            mine = [f for f in self.funcs.values() if f.service == info["name"] and f.noun == noun]
            host = self.code[next(f.path for f in mine if f.layer == "domain")]
            key = f"sym:{host.path}::{host.cls + '.' if host.cls else ''}{adr['adds']}"
            if key in self.funcs:  # an earlier decision on the topic added it: change it
                self.touch(key, f"ADR-{adr['number']}: {adr['tech']}")
                changed.append(key)
            else:
                doc = ADR_VERBS[TOPICS[adr["topic"]][2]].format(a=_article(noun))
                func = self.add_func(host, adr["adds"], "domain", doc, "the function that " + _lower_first(doc)[:-1],
                                     host.cls, noun)
                func.calls.append(next(f.key for f in mine if f.layer == "store"))
                caller = next(f for f in mine if f.layer == "api")  # the POST handler of the noun
                caller.calls.append(key)
                changed += [key, caller.key]
        else:
            for f in self.pick(skey, ("domain", "api"), self.rng.choice((1, 2))):
                self.touch(f.key, f"ADR-{adr['number']}: {adr['tech']}")
                changed.append(f.key)
        verb_phrase = {"storage": f"move {info['name']} storage to {adr['tech']}",
                       "messaging": f"publish {info['name']} events through {adr['tech']}",
                       "caching": f"cache {info['name']} reads in {adr['tech']}",
                       "resilience": f"wrap {info['name']} calls with {adr['tech']}",
                       "api": f"serve the {info['name']} API with {adr['tech']}"}[adr["topic"]]
        ckey = self.commit(when, self.member(skey), f"Implement ADR-{adr['number']}: {verb_phrase} ({t})",
                           symbols=changed, dirty=sorted({self.funcs[c].path for c in changed}), kind="implement")
        adr.setdefault("implemented_by", []).append(ckey)

    def incident_cause(self, when: datetime, plan: dict) -> None:
        skey = plan["service"]
        info = self.org.services[skey]
        failing = self.pick(skey, ("domain", "api"))[0]
        plan["failing"] = failing.key
        t = self.ticket(info["team"])
        self.touch(failing.key)
        noun = failing.noun
        msg = self.rng.choice(FEATURE_MESSAGES).format(n=_words(noun), ns=_words(_plural(noun)), svc=info["name"],
                                                       Svc=info["name"].capitalize(), name=failing.qualname, t=t)
        plan["caused_by"] = self.commit(when, self.anyone(skey), msg, symbols=[failing.key], dirty=[failing.path],
                                        kind="cause")

    def incident_fix(self, when: datetime, plan: dict) -> None:
        skey = plan["service"]
        info = self.org.services[skey]
        failing = self.funcs[plan["failing"]]
        noun = failing.noun
        title, impact = self.rng.choice(SYMPTOMS)
        fmt = {"Svc": info["name"].capitalize(), "svc": info["name"], "n": _words(noun), "ns": _words(_plural(noun))}
        plan.update(title=title.format(**fmt), impact=impact.format(**fmt), cause=self.rng.choice(CAUSES))
        self.touch(failing.key, f"{plan['id']}: guard")
        who = self.member(skey)
        co = [p for p in self.org.teams[info["team"]]["members"] if p != who][:1] if self.rng.random() < 0.3 else []
        msg = (f"Fix {plan['title'][0].lower() + plan['title'][1:]}\n\n{failing.qualname} {plan['cause']}.\n\n"
               f"Fixes: {plan['id']}\nRefs: {self.ticket(info['team'])}")
        plan["fixers"] = [who] + co
        plan["resolved_by"] = self.commit(when, who, msg, symbols=[failing.key], dirty=[failing.path], kind="fix",
                                          coauthors=co)

    def incident_doc(self, when: datetime, plan: dict) -> None:
        skey = plan["service"]
        info = self.org.services[skey]
        start, end = self.at(plan["start_days"]), self.at(plan["end_days"])
        dependents = [s for s, v in self.org.services.items() if skey in v["depends_on"] and v["created"]]
        hit = [skey] + ([self.rng.choice(dependents)] if dependents and self.rng.random() < 0.3 else [])
        in_force = [a for a in self.adr_plans[1:] if a["service"] == skey and a.get("date")
                    and a["date"] < start.date().isoformat()]
        inc = {
            "id": plan["id"], "key": f"incident:{plan['id']}", "title": plan["title"], "impact": plan["impact"],
            "cause": plan["cause"], "severity": self.rng.choice(("SEV1", "SEV2", "SEV2", "SEV3")),
            "started_at": _iso(start), "ended_at": _iso(end), "service": skey, "service_name": info["name"],
            "services": hit, "failing_symbol": plan["failing"], "caused_by": [plan["caused_by"]],
            "resolved_by": [plan["resolved_by"]], "fixers": plan["fixers"],
            "decisions": [self.rng.choice(in_force)["key"]] if in_force and self.rng.random() < 0.4 else [],
            "format": "json" if self.rng.random() < 0.25 else "markdown",
        }
        inc["path"] = f"docs/incidents/{plan['id']}.{'json' if inc['format'] == 'json' else 'md'}"
        self.org.incidents[inc["key"]] = inc
        self.commit(when, self.member(skey), f"Add postmortem for {plan['id']}",
                    texts={inc["path"]: self.incident_text(inc)}, kind="postmortem")

    # --- run ---

    def build(self) -> Org:
        repo = self.out / self.org_name
        repo.mkdir(parents=True)
        self.plan_org()
        self.plan_history()
        self.git = _FastImport(repo)
        try:
            for ev in sorted(self.events, key=lambda e: (e.when, e.seq)):
                ev.run(ev.when)
        except BaseException:
            self.git.proc.kill()
            self.git.proc.wait()
            raise
        self.git.finish()
        self.collect()
        return self.org

    def collect(self) -> None:
        org = self.org
        org.head = list(org.commits)[-1]
        org.files = sorted(f"file:{p}" for p in self.written)
        for v in org.services.values():
            v["depends_on"] = sorted(v["depends_on"])
        by_name = {v["name"]: s for s, v in org.services.items()}
        for key, f in sorted(self.funcs.items()):
            history = self.sym_history.get(key, [])
            org.symbols[key] = {
                "path": f.path, "qualname": f.qualname, "name": f.name, "service": by_name[f.service],
                "language": f.language, "layer": f.layer, "doc": f.doc, "desc": f.desc, "calls": list(f.calls),
                "commits": history,
            }
            org.calls += [[key, c] for c in f.calls]
        org.dependencies = sorted({(by_name[self.funcs[a].service], by_name[self.funcs[b].service])
                                   for a, b in org.calls if self.funcs[a].service != self.funcs[b].service})
        org.dependencies = [list(d) for d in org.dependencies]
        for adr in sorted(self.adr_plans, key=lambda a: a["number"]):
            impl = adr.get("implemented_by", [])
            entry = {k: adr[k] for k in ("number", "title", "service", "topic", "format", "path", "date")
                     if k in adr}
            entry.update(tech=adr.get("tech"), deciders=adr["deciders"], commit=adr["commit"], implemented_by=impl,
                         symbols=sorted({s for c in impl for s in org.commits[c]["symbols"]}),
                         supersedes=f"adr:{adr['supersedes_num']}" if adr.get("supersedes_num") else None,
                         superseded_by=f"adr:{adr['superseded_by_num']}" if adr.get("superseded_by_num") else None)
            entry["status"] = "superseded" if entry["superseded_by"] else "accepted"
            org.adrs[adr["key"]] = entry
            if entry["supersedes"]:
                org.supersedes.append([adr["key"], entry["supersedes"]])


def _squeeze(lines: list[str]) -> list[str]:
    """At most two blank lines in a row (Python layout after the import block)."""
    out: list[str] = []
    for line in lines:
        if line == "" and len(out) >= 2 and out[-1] == "" and out[-2] == "":
            continue
        out.append(line)
    return out


# --- public API ---------------------------------------------------------------------------------


def generate(out_dir: Path, *, seed: int = 0, size: str | int = "default", now: str = "2026-06-01") -> Org:
    """Write the organisation's repository to ``out_dir/<org name>/`` and ``out_dir/facts.json``."""
    if isinstance(size, str) and size not in SIZES:
        size = int(size)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    org = _Builder(out_dir, seed, size, now).build()
    (out_dir / "facts.json").write_text(org.to_json())
    return org


# --- questions ----------------------------------------------------------------------------------

MAX_GOLD = 10
KINDS = (
    "callers", "callees", "service_dependents", "incident_cause_commit", "incident_failing_function",
    "incident_services", "incident_fixer", "incident_dependents", "incident_owner_team", "decision_in_force",
    "superseded_by", "adr_code", "superseding_code", "last_changer_of_caller", "team_incidents", "commit_changes",
)
TEMPLATES = {
    "callers": ("Which functions call {x}?", "Who calls {x}?", "Find every caller of {x}.",
                "What code invokes {x}?"),
    "callees": ("What does {x} call?", "Which functions are called by {x}?",
                "List the functions {x} calls directly."),
    "service_dependents": ("Which services call into the {svc} service?", "Which services depend on {svc}?",
                           "If {svc} goes down, which services calling it are affected?"),
    "incident_cause_commit": ("Which commit caused {i}?", "What change triggered {i}?",
                              "Find the commit that introduced the bug behind {i}."),
    "incident_failing_function": ("Which function failed in {i}?", "What code was at fault in {i}?",
                                  "Which function's change broke things during {i}?"),
    "incident_services": ("Which services were affected by {i}?", "What services did {i} hit?",
                          "Which services were impacted during {i}?"),
    "incident_fixer": ("Who fixed {i}?", "Which engineer resolved {i}?", "Who wrote the fix for {i}?"),
    "incident_dependents": ("Which services depend on the service that had {i}?",
                            "Which services call the service where {i} happened?",
                            "If the service behind {i} fails again, which services that depend on it are at risk?"),
    "incident_owner_team": ("Which team owns the service whose function caused {i}?",
                            "Which team is responsible for the code that failed in {i}?",
                            "Who owns the service where the faulty function of {i} lives? Name the team."),
    "decision_in_force": ("Which {topic} decision for {svc} was in force when {i} happened?",
                          "When {i} started, which decision record governed {topic} in {svc}?",
                          "What was the active {topic} ADR of the {svc} service at the time of {i}?"),
    "superseded_by": ("Which decision superseded {a}?", "What replaced {a}?",
                      "Is {a} still in force? If not, which decision took its place?"),
    "adr_code": ("What code changed because of {a}?", "Which functions were modified to implement {a}?",
                 "Show me the code that carries out {a}."),
    "superseding_code": ("Which decision replaced {a}, and what code implements it?",
                         "{A} was superseded: by which decision, and which functions changed for it?",
                         "Find the successor of {a} and the code written for it."),
    "last_changer_of_caller": ("Who last changed the function that calls {x}?",
                               "Who made the most recent change to the caller of {x}?",
                               "Which person last modified the code that invokes {x}?"),
    "team_incidents": ("Which incidents touched code owned by team {t}?",
                       "List the incidents whose failing code belongs to the {t} team.",
                       "Which postmortems concern functions that {t} owns?"),
    "commit_changes": ('Which functions did the commit "{c}" change?', 'What code was modified by "{c}"?',
                       'Which symbols did the change "{c}" touch?'),
}
HOPS = {"callers": 1, "callees": 1, "service_dependents": 1, "incident_cause_commit": 1,
        "incident_failing_function": 1, "incident_services": 1, "incident_fixer": 2, "incident_dependents": 2,
        "incident_owner_team": 3, "decision_in_force": 2, "superseded_by": 1, "adr_code": 2,
        "superseding_code": 3, "last_changer_of_caller": 3, "team_incidents": 3, "commit_changes": 1}


def questions(org: Org, *, seed: int = 0) -> list[dict]:
    """Multi-hop questions with gold keys, all derived from the construction (never from graphmem)."""
    rng = random.Random(f"graphmem-questions:{seed}:{org.name}")
    syms = org.symbols
    callers: dict[str, list[str]] = {}
    for a, b in org.calls:
        callers.setdefault(b, []).append(a)
    team_of = {s: v["team"] for s, v in org.services.items()}
    dependents: dict[str, list[str]] = {}
    for s, v in org.services.items():
        for d in v["depends_on"]:
            dependents.setdefault(d, []).append(s)

    def sym_ref(key: str) -> str:
        s = syms[key]
        svc = org.services[s["service"]]["name"]
        if s["layer"] == "client" or rng.random() < 0.55:
            return rng.choice((f"`{s['qualname']}`", f"`{s['qualname']}` in {s['path']}",
                               f"the {svc} function `{s['qualname']}`" if s["layer"] != "client"
                               else f"`{s['qualname']}` ({s['path']})"))
        return s["desc"]

    titles = Counter(inc["title"] for inc in org.incidents.values())

    def inc_ref(inc: dict) -> str:
        forms = [inc["id"], inc["id"], f'{inc["id"]} ("{inc["title"]}")']
        if titles[inc["title"]] == 1:  # a title alone names the incident only when no other shares it
            forms.append(f'the incident "{inc["title"]}"')
        return rng.choice(forms)

    def adr_ref(adr: dict) -> str:
        return rng.choice((f"ADR-{adr['number']}", f"ADR-{adr['number']:04d}",
                           f'ADR-{adr["number"]} ("{adr["title"]}")', f'the decision "{adr["title"]}"'))

    candidates: dict[str, list[tuple[dict, list[str]]]] = {k: [] for k in KINDS}

    def add(kind: str, gold: list[str], **slots: str) -> None:
        gold = sorted(dict.fromkeys(gold))
        if 0 < len(gold) <= MAX_GOLD:
            candidates[kind].append((slots, gold))

    for key in sorted(syms):
        if key in callers:
            add("callers", callers[key], x=key)
            if len(callers[key]) == 1:
                history = syms[callers[key][0]]["commits"]
                if history:
                    last = org.commits[history[-1]]
                    add("last_changer_of_caller", [last["author"], *last["coauthors"]], x=key)
        if syms[key]["calls"]:
            add("callees", syms[key]["calls"], x=key)
    for skey in sorted(org.services):
        add("service_dependents", dependents.get(skey, []), svc=org.services[skey]["name"])
    chains: dict[tuple[str, str], list[dict]] = {}
    for adr in org.adrs.values():
        if adr.get("service"):
            chains.setdefault((adr["service"], adr["topic"]), []).append(adr)
    for ikey in sorted(org.incidents):
        inc = org.incidents[ikey]
        fail = inc["failing_symbol"]
        add("incident_cause_commit", inc["caused_by"], i=ikey)
        add("incident_failing_function", [fail], i=ikey)
        add("incident_services", inc["services"], i=ikey)
        add("incident_fixer", inc["fixers"], i=ikey)
        add("incident_dependents", dependents.get(inc["service"], []), i=ikey)
        add("incident_owner_team", [team_of[syms[fail]["service"]]], i=ikey)
        start = datetime.fromisoformat(inc["started_at"].replace("Z", "+00:00")).date()
        for (skey, topic), chain in sorted(chains.items()):
            if skey != inc["service"]:
                continue
            dates = [date.fromisoformat(a["date"]) for a in chain]
            if any(abs((d - start).days) <= 1 for d in dates):
                continue  # too close to call from day-precision dates
            before = [a for a, d in zip(chain, dates) if d < start]
            if before:  # the latest decision on the topic taken before the incident
                latest = max(before, key=lambda a: (a["date"], a["number"]))
                add("decision_in_force", [f"adr:{latest['number']}"], i=ikey, topic=TOPIC_PHRASES[topic],
                    svc=org.services[skey]["name"])
    for akey in sorted(org.adrs, key=lambda k: int(k[4:])):
        adr = org.adrs[akey]
        add("adr_code", adr["symbols"], a=akey)
        if adr["superseded_by"]:
            add("superseded_by", [adr["superseded_by"]], a=akey)
            newer = org.adrs[adr["superseded_by"]]
            if newer["symbols"]:
                add("superseding_code", [adr["superseded_by"], *newer["symbols"]], a=akey)
    for tkey in sorted(org.teams):
        owned = [k for k, inc in sorted(org.incidents.items()) if team_of[syms[inc["failing_symbol"]]["service"]] == tkey]
        add("team_incidents", owned, t=tkey[5:])
    subjects: dict[str, int] = {}
    for c in org.commits.values():
        subjects[c["subject"]] = subjects.get(c["subject"], 0) + 1
    for c in org.commits.values():
        if c["kind"] in ("feature", "implement") and subjects[c["subject"]] == 1:
            add("commit_changes", c["symbols"], c=c["subject"])

    cap = max(10, round(40 * len(org.services) / SIZES["default"]))
    out: list[dict] = []
    for kind in KINDS:
        chosen = candidates[kind]
        if len(chosen) > cap:
            chosen = [chosen[i] for i in sorted(rng.sample(range(len(chosen)), cap))]
        for slots, gold in chosen:
            text_slots = dict(slots)
            if "x" in slots:
                text_slots["x"] = sym_ref(slots["x"])
            if "i" in slots:
                text_slots["i"] = inc_ref(org.incidents[slots["i"]])
            if "a" in slots:
                text_slots["a"] = adr_ref(org.adrs[slots["a"]])
                text_slots["A"] = text_slots["a"][0].upper() + text_slots["a"][1:]
            question = rng.choice(TEMPLATES[kind]).format(**text_slots)
            out.append({"id": f"{org.name}-{len(out) + 1:04d}", "question": question, "gold": gold,
                        "hops": HOPS[kind], "type": kind})
    return out


def write_questions(path: Path, items: list[dict]) -> None:
    path.write_text("".join(json.dumps(q, sort_keys=True) + "\n" for q in items))


# --- command line -------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.synthetic", description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder to create (repository in OUT/<org>)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--size", default="default", help="small, default, large, or a number of services")
    parser.add_argument("--now", default="2026-06-01", help="reference date YYYY-MM-DD (commits are before it)")
    parser.add_argument("--force", action="store_true", help="replace OUT if it exists")
    args = parser.parse_args(argv)
    size: str | int = args.size
    if size not in SIZES:
        try:
            size = int(size)
        except ValueError:
            print(f"error: --size must be one of {', '.join(SIZES)} or a number, got {args.size!r}", file=sys.stderr)
            return 2
    try:
        date.fromisoformat(args.now)
    except ValueError:
        print(f"error: --now must be YYYY-MM-DD, got {args.now!r}", file=sys.stderr)
        return 2
    out: Path = args.out
    if out.exists() and any(out.iterdir()):
        if not args.force:
            print(f"error: {out} exists and is not empty (use --force to replace it)", file=sys.stderr)
            return 2
        shutil.rmtree(out)
    org = generate(out, seed=args.seed, size=size, now=args.now)
    items = questions(org, seed=args.seed)
    write_questions(out / "questions.jsonl", items)
    print(f"created {out / org.repo_dir}: {len(org.services)} services, {len(org.symbols)} functions, "
          f"{len(org.commits)} commits, {len(org.adrs)} ADRs, {len(org.incidents)} incidents; "
          f"{len(items)} questions in {out / 'questions.jsonl'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
