"""Settings: from command-line options first, then environment variables, then defaults."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from graphmem.errors import ConfigError

STORES = ("embedded", "neo4j")
# Where BM25 and vectors are served from: files beside the process, or Neo4j itself (neo4j store only).
INDEX_MODES = ("local", "neo4j")
DEFAULT_NEO4J_URI = "bolt://127.0.0.1:7687"
# The password scripts/neo4j-local and docker-compose.yml give a server bound to 127.0.0.1; any real
# deployment sets NEO4J_PASSWORD.
DEFAULT_NEO4J_PASSWORD = "graphmem-local"


# What the official driver speaks Bolt with: direct (bolt) or routing (neo4j: a cluster's leader for
# writes, its readers for read transactions; Aura), each plain, TLS (+s) or TLS with a self-signed
# certificate (+ssc). A single server accepts neo4j:// too.
NEO4J_SCHEMES = ("bolt", "bolt+s", "bolt+ssc", "neo4j", "neo4j+s", "neo4j+ssc")


def check_neo4j_uri(uri: str) -> str:
    """``uri`` if it is a Bolt URI the driver can use, else a :class:`ConfigError` saying which are."""
    scheme, sep, rest = uri.strip().partition("://")
    if not sep or scheme.lower() not in NEO4J_SCHEMES or not rest.strip("/"):
        got = f"a {scheme[:20]!r} URI" if sep else "no URI scheme"  # never the rest: it may hold a password
        raise ConfigError(f"NEO4J_URI must be a URI such as bolt://host:7687, neo4j://host:7687 or "
                          f"neo4j+s://<id>.databases.neo4j.io (schemes: {', '.join(NEO4J_SCHEMES)}); got {got}")
    return uri.strip()


@dataclass(slots=True)
class Neo4jSettings:
    """How to reach Neo4j (``NEO4J_URI``, ``NEO4J_USERNAME``, ``NEO4J_PASSWORD``, ``NEO4J_DATABASE``)."""

    uri: str = DEFAULT_NEO4J_URI
    username: str = "neo4j"
    password: str = DEFAULT_NEO4J_PASSWORD
    database: str | None = None

    @classmethod
    def from_env(cls) -> Neo4jSettings:
        return cls(
            uri=os.environ.get("NEO4J_URI") or DEFAULT_NEO4J_URI,
            username=os.environ.get("NEO4J_USERNAME") or "neo4j",
            password=os.environ.get("NEO4J_PASSWORD") or DEFAULT_NEO4J_PASSWORD,
            database=os.environ.get("NEO4J_DATABASE") or None,
        )


def _env_number(name: str, default: float, kind: type = float, *, minimum: float = 0) -> float:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = kind(raw.strip())
    except ValueError:
        raise ConfigError(f"{name} must be a {'whole ' if kind is int else ''}number, not {raw!r}") from None
    if value < minimum:
        raise ConfigError(f"{name} must be at least {minimum}, not {raw!r}")
    return value


LLM_RESPONSE_FORMATS = ("json_schema", "json_object", "none")
# The texts LLM enrichment reads (``extractors.llm``); here so that the command line offers them
# without importing the extractor and its HTTP client.
LLM_SOURCE_KINDS = ("decision", "incident", "commit", "docstring", "document")


@dataclass(slots=True)
class LLMSettings:
    """An OpenAI-compatible chat completions endpoint for optional entity extraction (``GRAPHMEM_LLM_*``).

    Without ``base_url`` there is no LLM: ingestion stays rule-based and deterministic.
    """

    base_url: str | None = None
    model: str | None = None
    api_key: str | None = None
    concurrency: int = 4
    timeout: float = 60.0  # seconds per request
    max_retries: int = 4  # after the first attempt, on 429, 5xx, timeouts and connection errors
    backoff: float = 1.0  # first retry delay in seconds; doubles on each retry
    backoff_max: float = 30.0  # longest wait between attempts, Retry-After included
    response_format: str = "json_schema"
    min_chars: int = 40  # shorter texts (one-line commit messages, "Return x.") are not worth a call

    @property
    def configured(self) -> bool:
        return bool(self.base_url)

    def require(self) -> LLMSettings:
        """These settings, or a :class:`ConfigError` saying what is missing."""
        if not self.base_url:
            raise ConfigError("no LLM endpoint configured: set GRAPHMEM_LLM_BASE_URL (and GRAPHMEM_LLM_MODEL), "
                              "e.g. http://localhost:11434/v1")
        if not self.model:
            raise ConfigError(f"GRAPHMEM_LLM_MODEL is not set (the model to ask at {self.base_url})")
        if self.response_format not in LLM_RESPONSE_FORMATS:
            raise ConfigError(f"GRAPHMEM_LLM_RESPONSE_FORMAT must be one of {', '.join(LLM_RESPONSE_FORMATS)}, "
                              f"not {self.response_format!r}")
        return self

    @classmethod
    def from_env(cls) -> LLMSettings:
        return cls(
            base_url=(os.environ.get("GRAPHMEM_LLM_BASE_URL") or "").strip() or None,
            model=(os.environ.get("GRAPHMEM_LLM_MODEL") or "").strip() or None,
            api_key=os.environ.get("GRAPHMEM_LLM_API_KEY") or None,
            concurrency=int(_env_number("GRAPHMEM_LLM_CONCURRENCY", 4, int, minimum=1)),
            timeout=_env_number("GRAPHMEM_LLM_TIMEOUT", 60.0, minimum=0.001),
            max_retries=int(_env_number("GRAPHMEM_LLM_MAX_RETRIES", 4, int)),
            backoff=_env_number("GRAPHMEM_LLM_BACKOFF", 1.0),
            backoff_max=_env_number("GRAPHMEM_LLM_BACKOFF_MAX", 30.0),
            response_format=(os.environ.get("GRAPHMEM_LLM_RESPONSE_FORMAT") or "json_schema").strip().lower(),
            min_chars=int(_env_number("GRAPHMEM_LLM_MIN_CHARS", 40, int)),
        )


HOME_DIR = ".graphmem"


def find_home(start: str | Path | None = None) -> Path:
    """The default home: the nearest ``.graphmem`` folder holding a graph, in ``start`` (the
    working directory) or a folder above it, as git finds ``.git``; else ``./.graphmem``."""
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / HOME_DIR
        if (candidate / "last-project").is_file() or (candidate / "projects.json").is_file():
            return candidate if folder != here else Path(HOME_DIR)
    return Path(HOME_DIR)


def prepare_home(home: str | Path) -> Path:
    """Create the home folder ``home`` if needed. A home graphmem creates, or any folder named
    ``.graphmem``, gets a ``.gitignore`` of ``*`` when it has none, so a home inside a repository
    (the one a first ``graphmem query`` makes) is never committed by ``git add -A``. An existing
    folder of another name is left alone: ``--home`` may name a folder the user keeps in git."""
    home = Path(home).expanduser()
    new = not home.exists()
    home.mkdir(parents=True, exist_ok=True)
    if new or home.name == HOME_DIR:
        try:
            with open(home / ".gitignore", "x", encoding="utf-8") as fh:
                fh.write("# graphmem's home: the graph, indexes and caches are not for git\n*\n")
        except FileExistsError:
            pass  # the owner's own, or a concurrent process wrote it
        except OSError:
            pass  # a read-only home still serves reads; the ignore file is a convenience
    return home


DEFAULT_REPLAY = 12
MAX_REPLAY = 10_000


@dataclass(slots=True)
class Settings:
    """Where the graph lives. ``store`` is ``embedded`` (default) or ``neo4j``; ``index`` is ``local``
    (default: BM25 and vector files beside the process) or ``neo4j`` (served by Neo4j's own indexes)."""

    store: str = "embedded"
    home: Path = Path(".graphmem")
    project: str | None = None
    neo4j: Neo4jSettings = field(default_factory=Neo4jSettings)
    llm: LLMSettings = field(default_factory=LLMSettings)
    index: str = "local"
    # Earlier commits a project's first ingest replays before HEAD, so what no longer holds keeps
    # the interval it held (``--as-of``); 0 reads HEAD alone.
    replay: int = DEFAULT_REPLAY

    def __post_init__(self) -> None:
        if not isinstance(self.replay, int) or isinstance(self.replay, bool) or not 0 <= self.replay <= MAX_REPLAY:
            raise ConfigError(f"replay must be a whole number of commits from 0 to {MAX_REPLAY}, not {self.replay!r}")
        if self.store not in STORES:
            raise ConfigError(f"unknown store {self.store!r}: choose one of {', '.join(STORES)}")
        if self.index not in INDEX_MODES:
            raise ConfigError(f"unknown index mode {self.index!r}: choose one of {', '.join(INDEX_MODES)}")
        self.home = Path(self.home).expanduser()

    @classmethod
    def from_env(cls, *, store: str | None = None, home: str | Path | None = None,
                 project: str | None = None, index: str | None = None) -> Settings:
        """Explicit arguments win over ``GRAPHMEM_STORE``, ``GRAPHMEM_HOME``, ``GRAPHMEM_PROJECT``,
        ``GRAPHMEM_INDEX``; ``GRAPHMEM_REPLAY`` sets ``replay``."""
        raw = os.environ.get("GRAPHMEM_REPLAY", "").strip()
        try:
            replay = int(raw) if raw else DEFAULT_REPLAY
        except ValueError:
            raise ConfigError(f"GRAPHMEM_REPLAY must be a whole number of commits, not {raw[:40]!r}") from None
        return cls(
            replay=replay,
            store=store or os.environ.get("GRAPHMEM_STORE") or "embedded",
            home=Path(home or os.environ.get("GRAPHMEM_HOME") or find_home()),
            project=project or os.environ.get("GRAPHMEM_PROJECT") or None,
            neo4j=Neo4jSettings.from_env(),
            llm=LLMSettings.from_env(),
            index=(index or os.environ.get("GRAPHMEM_INDEX") or "local").strip().lower(),
        )
