"""The Python API: one object per project that ingests, keeps the indexes in step and answers.

    from graphmem import Graphmem

    with Graphmem.open(project="acme", home=".graphmem") as gm:
        gm.ingest("path/to/repo")
        answer = gm.query("Which commit caused INC-042?", mode="hybrid", k=5)
        for hit in answer.results:
            print(hit.rank, hit.key, hit.evidence)

The command line, the MCP server and the evaluation harness all go through this class.

One ``Graphmem`` may answer from several threads at once. ``query`` first drops indexes another
process has saved since they were loaded, and the store reloads a graph another process changed,
so every answer reflects the latest committed ingest; over Neo4j, local indexes that no process
sharing this home has synced with another process's ingest are synced within seconds
(``Indexes.follow``). ``ingest`` syncs a fork of the indexes and
swaps it in whole at the end, so queries running meanwhile use the old indexes or the new ones.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphmem.config import Settings, prepare_home
from graphmem.model import check_project
from graphmem.stores.base import INCOMPLETE
from graphmem.retrieval.config import DEFAULT_MODE, RetrievalConfig, preset

if TYPE_CHECKING:
    from graphmem.enrich import EnrichReport
    from graphmem.ingest import IngestReport, Progress
    from graphmem.readonly import CypherResult
    from graphmem.retrieval.embed import Embedder
    from graphmem.retrieval.engine import Answer, Reranker, Retriever
    from graphmem.retrieval.indexes import Consistency, Indexes, SyncReport
    from graphmem.retrieval.rerank import TrainReport
    from graphmem.stores.base import GraphStore


RERANKER_RECHECK_SECONDS = 60.0  # how often a process without a reranker looks for a newly built one


def index_dir(settings: Settings, project: str) -> Path:
    """Where a project's BM25 and vector indexes live: beside the embedded graph, or under
    ``<home>/neo4j/<project>`` for a Neo4j project."""
    base = settings.home if settings.store == "embedded" else settings.home / settings.store
    return base / project / "index"


class Graphmem:
    """One project's graph, indexes and retrieval."""

    def __init__(self, settings: Settings, project: str, *, store: GraphStore | None = None,
                 embedder: Embedder | None = None, reranker: Reranker | None | str = "auto",
                 now: datetime | None = None) -> None:
        self.settings = settings
        self.project = check_project(project)
        self._store = store
        self._embedder = embedder
        self._reranker = reranker
        self._reranker_auto = reranker == "auto"  # chosen by load_reranker: may appear later
        self._reranker_checked = 0.0
        self._indexes: Indexes | None = None
        self._retriever: Retriever | None = None
        self._reader: GraphStore | None = None  # the schema-free connection of cypher()
        self.now = now
        self._parts_lock = threading.RLock()  # parts are opened once even when threads ask together
        self._preparing: list[threading.Thread] = []  # loads prepare_for started

    @classmethod
    def open(cls, project: str, *, store: str | None = None, home: str | Path | None = None,
             **kwargs: Any) -> Graphmem:
        """Settings from the arguments, then ``GRAPHMEM_*`` / ``NEO4J_*`` variables, then defaults."""
        return cls(Settings.from_env(store=store, home=home, project=project), project, **kwargs)

    def __enter__(self) -> Graphmem:  # noqa: PYI034 - no subclasses; Self needs Python 3.11
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- parts ----------------------------------------------------------------------------------

    @property
    def store(self) -> GraphStore:
        if self._store is None or (self.settings.index == "neo4j" and self._indexes is None):
            with self._parts_lock:
                if self._store is None:
                    from graphmem.stores import open_store

                    self._store = open_store(self.settings, self.project)
                if self.settings.index == "neo4j" and self._indexes is None:
                    # Server-side indexes ride on the store's chunk writes, from its first one.
                    self._indexes = _server_indexes(self._store, self._embedder, self.cache_dir)
        return self._store

    @property
    def cache_dir(self) -> Path:
        return self.settings.home / "cache"

    @property
    def indexes(self) -> Indexes:
        if self._indexes is None:
            with self._parts_lock:
                if self.settings.index == "neo4j":
                    self.store  # opens the store with its server-side indexes
                elif self._indexes is None:
                    from graphmem.retrieval.indexes import Indexes

                    self._indexes = Indexes(index_dir(self.settings, self.project), embedder=self._embedder,
                                            cache_dir=self.cache_dir)
        return self._indexes  # type: ignore[return-value]

    @property
    def reranker(self) -> Reranker | None:
        # With none found, look again now and then: a long-lived server picks up the general model
        # that scripts/build-reranker finishes after it started.
        if self._reranker == "auto" or (self._reranker_auto and self._reranker is None
                                        and time.monotonic() - self._reranker_checked > RERANKER_RECHECK_SECONDS):
            with self._parts_lock:
                if self._reranker == "auto" or self._reranker is None:
                    self._reranker = _load_reranker(self.settings.home, self.project)
                    self._reranker_checked = time.monotonic()
                    if self._retriever is not None:
                        self._retriever.reranker = self._reranker
        return self._reranker  # type: ignore[return-value]

    @property
    def retriever(self) -> Retriever:
        retriever = self._retriever
        if retriever is not None and self._reranker_auto and self._reranker is None:
            self.reranker  # noqa: B018 - looks for a model built since the last look
        if retriever is None:
            with self._parts_lock:
                if self._retriever is None:
                    from graphmem.retrieval.engine import Retriever

                    self._retriever = Retriever(self.store, self.indexes, reranker=self.reranker, now=self.now)
                retriever = self._retriever
        return retriever

    # --- work -----------------------------------------------------------------------------------

    def ingest(self, path: str | Path, *, progress: Progress | None = None, index: bool = True,
               llm: bool | None = None, force: bool = False, replay: int | None = None) -> IngestReport:
        """Bring the graph up to date with ``path``, then the indexes with the graph, then (with
        ``llm``; by default when ``GRAPHMEM_LLM_BASE_URL`` is set) enrich it with an LLM.

        The deterministic graph is complete before enrichment starts; enrichment failures are
        reported in ``report.enrichment``, never raised. ``llm=True`` without an endpoint raises
        :class:`~graphmem.errors.ConfigError` before anything is ingested. A folder that would close
        most of the project raises :class:`~graphmem.errors.IngestRefused` unless ``force``.
        ``replay``: on a project's first ingest, first ingest up to this many earlier commits of the
        repository (oldest first), so facts that no longer hold at ``HEAD`` keep their history
        (default: the settings', 12 unless ``GRAPHMEM_REPLAY`` says otherwise).
        """
        from graphmem.ingest import ingest, replay_history

        use_llm = self.settings.llm.configured if llm is None else llm
        if use_llm:
            self.settings.llm.require()
        prepare_home(self.settings.home)  # caches and indexes go there whichever the store
        replay = self.settings.replay if replay is None else replay
        replayed = replay_history(path, self.store, cache_dir=self.cache_dir, points=replay,
                                  progress=progress) if replay else []
        report = ingest(path, self.store, cache_dir=self.cache_dir, progress=progress,
                        force=force)
        report.fold_in(replayed)
        if index:
            report.index = self.sync_indexes(progress=progress).as_dict()
        if use_llm:
            report.enrichment = self.enrich(progress=progress).as_dict()
        else:
            from graphmem.enrich import withdraw_stale

            # Facts an LLM read from texts that have changed since no longer hold.
            withdraw_stale(self.store, min_chars=self.settings.llm.min_chars)
        self.store.save_snapshot()  # the next process to open the graph reads it faster
        return report

    def enrich(self, *, retry_failed: bool = False, kinds: list[str] | None = None, limit: int | None = None,
               progress: Progress | None = None) -> EnrichReport:
        """Add LLM-extracted entities and relationships to the graph (see :mod:`graphmem.enrich`):
        only what is new or changed since the last run; cached answers cost no calls."""
        from graphmem.enrich import enrich

        return enrich(self.store, self.settings, retry_failed=retry_failed, kinds=kinds, limit=limit,
                      progress=progress)

    def sync_indexes(self, *, progress: Progress | None = None, full: bool = False) -> SyncReport:
        """Apply the graph's chunk changes to the BM25 and vector indexes.

        The work happens on a fork of the indexes (loaded apart, same embedder), swapped in when
        saved: queries from other threads meanwhile never see an index half updated."""
        prepare_home(self.settings.home)
        fork = self.indexes.fork()
        report = fork.sync(self.store, progress=progress, full=full)
        self.indexes.adopt(fork)
        return report

    def prepare_for(self, text: str, mode: str | RetrievalConfig = DEFAULT_MODE) -> None:
        """Start loading, on threads of their own, what the question ``text`` will wait for: the
        graph, and the models it will use (the embedder, and the reranker when it will likely
        reorder the answer). They then load beside each other and beside the imports, instead of
        one after another. A command that will ask one question calls it first thing; ``query``
        starts the models not started yet."""
        from graphmem.retrieval.warm import in_background, load_models

        self._preparing += [
            in_background(lambda: load_models(lambda: self.indexes, lambda: self.reranker, text, mode, self.now),
                          "graphmem-models"),
            in_background(lambda: self.store.get_nodes([]), "graphmem-graph"),  # reading any node loads the graph
        ]

    def warm_up(self, mode: str | RetrievalConfig = DEFAULT_MODE) -> dict[str, float]:
        """Load now everything a question under ``mode`` may wait for (the graph, the name catalog,
        the indexes, the embedder and the reranker, each model run once), so that a long-lived
        process's first question is answered as fast as the next. Seconds per part."""
        spec, took = preset(mode), {}

        def timed(name: str, work: Callable[[], object]) -> None:
            started = time.perf_counter()
            work()
            took[name] = round(time.perf_counter() - started, 3)

        timed("graph", lambda: self.store.get_nodes([]))  # reading any node loads the graph
        timed("snapshot", self.store.save_snapshot)  # for the next process to open the graph
        if "graph" in spec.retrievers:
            timed("catalog", lambda: self.retriever.graph_for(spec).refresh())
        if "bm25" in spec.searches:
            timed("bm25", lambda: self.indexes.bm25)
        if "vector" in spec.searches:
            timed("vectors", lambda: self.indexes.vectors)
            timed("embedder", lambda: self.indexes.embedder.encode_query("warm up"))
        reranker = self.reranker if spec.rerank.enabled else None
        if reranker is not None:
            timed("reranker", lambda: reranker.score("warm up", ["warm up"]))
        return took

    def query(self, text: str, *, mode: str | RetrievalConfig = DEFAULT_MODE, k: int = 10, kinds: list[str] | None = None,
              path_prefix: str | None = None, now: datetime | None = None, as_of: str | None = None) -> Answer:
        """Answer a question (see :class:`graphmem.retrieval.engine.Retriever`); ``as_of`` (ISO time)
        walks the graph as it was then."""
        if self._retriever is None:
            # Before the graph is loaded: the model sessions load beside it (see start_models).
            self.retriever.start_models(text, mode)
        if self.settings.index == "local":
            self.indexes.follow(self.store)  # chunk writes no sync of this home has seen (another server's)
        self.indexes.refresh()  # indexes another process saved since they were loaded
        answer = self.retriever.query(text, mode=mode, k=k, kinds=kinds, path_prefix=path_prefix, now=now,
                                      as_of=as_of)
        since = self.store.get_meta(INCOMPLETE)
        if since:
            answer.notes.append(f"an ingest has been writing since {since} (or was interrupted): "
                                "the graph may be partly updated")
        return answer

    def cypher(self, query: str | None = None, params: Mapping[str, Any] | None = None, *,
               saved: str | None = None, row_limit: int = 1000, timeout_s: float = 30.0) -> CypherResult:
        """Run a read-only Cypher ``query``, or the saved query named ``saved`` (``cypher/saved/``),
        on the Neo4j store; ``$project`` is this project (see :mod:`graphmem.readonly`)."""
        from graphmem import readonly
        from graphmem.errors import NotSupported

        if self._store is None and self.settings.store != "neo4j":
            raise NotSupported(readonly.NEEDS_NEO4J)  # before opening (and creating) an embedded home
        if (query is None) == (saved is None):
            raise readonly.CypherError("give either a Cypher query or the name of a saved query, not both")
        store = self._store if self._store is not None else self._read_store()
        if saved is not None:
            return readonly.run_saved(store, saved, params, row_limit=row_limit, timeout_s=timeout_s)
        return readonly.run_read_only(store, str(query), params, row_limit=row_limit, timeout_s=timeout_s)

    def _read_store(self) -> GraphStore:
        """A Neo4j connection that, unlike :attr:`store`, applies no schema: an account that may only
        read can still run Cypher."""
        if self._reader is None:
            with self._parts_lock:
                if self._reader is None:
                    from graphmem.stores.neo4j import Neo4jStore

                    n = self.settings.neo4j
                    self._reader = Neo4jStore.connect(self.project, uri=n.uri, username=n.username,
                                                      password=n.password, database=n.database)
        return self._reader

    def train_reranker(self, *, time_budget: float | None = 600.0, max_pairs: int = 4000,
                       progress: Progress | None = None) -> TrainReport:
        """Fine-tune the project's cross-encoder on questions mined from its own graph and save it
        (with its held-out evaluation) where ``hybrid-rerank`` finds it."""
        from graphmem.retrieval.rerank import default_reranker_dir, train_reranker

        self.sync_indexes()
        report = train_reranker(self.store, self.indexes, default_reranker_dir(self.settings.home, self.project),
                                time_budget=time_budget, max_pairs=max_pairs, progress=progress)
        self._reranker, self._retriever = "auto", None  # the next query loads the new model
        self._reranker_auto = True
        return report

    def check_indexes(self) -> Consistency:
        """Whether the indexes hold exactly the graph's chunks, with the text they have now."""
        return self.indexes.verify(self.store)

    def doctor(self, *, repair: bool = False) -> dict[str, Any]:
        """Check the indexes against the graph; with ``repair``, rebuild what differs."""
        before = self.check_indexes()
        out: dict[str, Any] = {"indexes": before.as_dict(), "repaired": None}
        if repair and not before.ok:
            report = self.sync_indexes(full=before.error is not None)  # a fork reads the files afresh
            out["repaired"] = report.as_dict()
            out["after"] = self.check_indexes().as_dict()
        return out

    def status(self) -> dict[str, Any]:
        """Counts by kind and type, the last ingested commit against the repository's HEAD
        (freshness) and index consistency: what ``graphmem status`` and the MCP ``status`` show."""
        store = self.store
        report: dict[str, Any] = {
            "project": self.project,
            "store": self.settings.store,
            **store.counts().as_dict(),
            "last_ingested_commit": store.get_meta("last_commit"),
            "last_ingested_at": store.get_meta("last_ingested_at"),
            "root": store.get_meta("root"),
            "ingest_incomplete": store.get_meta(INCOMPLETE),
            "indexes": self.check_indexes().as_dict(),
        }
        report["freshness"] = freshness(report["root"], report["last_ingested_commit"])
        from graphmem.retrieval.rerank import reranker_status

        report["reranker"] = reranker_status(self.settings.home, self.project)
        return report

    def close(self) -> None:
        for thread in self._preparing:  # a question's loads (prepare_for) end before what they use closes
            thread.join()
        self._preparing = []
        if self._store is not None:
            self._store.close()
            self._store = None
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        self._retriever = None
        if self.settings.index == "neo4j":
            self._indexes = None  # they belong to the closed store; a reopened one gets its own


def freshness(root: str | None, last_commit: str | None) -> dict[str, Any]:
    """Whether the graph is behind the repository it was ingested from (HEAD or working tree)."""
    from extractors.git import GitError, head_commit, is_git_repo, working_tree_dirty

    if not root or not Path(root).is_dir() or not is_git_repo(root):
        return {"head": None, "up_to_date": None, "dirty": None}
    try:
        head = head_commit(root)
        dirty = working_tree_dirty(root)
    except GitError as exc:  # a repository git cannot read right now never fails a status report
        return {"head": None, "up_to_date": None, "dirty": None, "error": str(exc)}
    return {"head": head, "dirty": dirty, "up_to_date": head == last_commit and not dirty}


def _server_indexes(store: GraphStore, embedder: Embedder | None, cache_dir: Path) -> Indexes:
    """BM25 and vectors served by Neo4j (``GRAPHMEM_INDEX=neo4j``), attached to the store's writes."""
    from graphmem.errors import ConfigError
    from graphmem.retrieval.neo4j_index import Neo4jIndexes
    from graphmem.stores.neo4j import Neo4jStore

    if not isinstance(store, Neo4jStore):
        raise ConfigError("GRAPHMEM_INDEX=neo4j serves the indexes from Neo4j itself: it needs the Neo4j store "
                          "(--store neo4j); the embedded store uses the local indexes")
    indexes = Neo4jIndexes(store, embedder=embedder, cache_dir=cache_dir)
    indexes.ensure_schema()
    indexes.attach()
    return indexes  # type: ignore[return-value]  # the same interface as Indexes


def _load_reranker(home: Path, project: str) -> Reranker | None:
    """The project's trained reranker (or ``GRAPHMEM_RERANKER``), if there is one."""
    from graphmem.retrieval.rerank import load_reranker

    return load_reranker(home, project)
