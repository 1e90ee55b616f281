"""Server-side indexes (``GRAPHMEM_INDEX=neo4j``): BM25 and vectors served by Neo4j itself.

Several graphmem processes over one Neo4j then share one copy of the indexes, always current:

- each chunk node holds ``embedding`` (its vector, float32) and ``index_tokens`` (the tokens
  ``graphmem.retrieval.tokenize`` gives the local BM25 index, joined by spaces), written by the
  store in the transaction that writes the chunk (``Neo4jStore.index_chunks_with``); deleting or
  replacing a chunk takes its index entries with it, and a failed transaction leaves neither;
- each project has a vector index of its own (cosine, HNSW) over ``embedding``, on a label only its
  chunks carry: Neo4j 5 cannot filter a vector search, and one shared index would have to be asked
  for many more neighbours than wanted to leave enough of one project's;
- one full-text index with the whitespace analyzer over ``index_tokens`` (so identifiers split
  exactly as in the local BM25 index) and ``index_project``, shared by all projects: a query
  requires its project as a zero-weight clause;
- one query per retrieval list, filtered to the project inside that query, which also returns
  each hit's chunk (``search_chunks``), so a question reads no chunk separately.

Scoring differs from the local indexes in two details, measured in README.md: Lucene's BM25 uses
k1 = 1.2 (graphmem's 1.5) with one-byte length norms and counts documents of every project in idf;
the vector index reports cosine as (1 + cos) / 2, which is turned back into cos here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from graphmem.errors import StoreError
from graphmem.model import Chunk, Provenance
from graphmem.retrieval.indexes import (
    Consistency,
    LazyEmbedder,
    Progress,
    SerialEmbedder,
    SyncReport,
    document_text,
    embed_chunks,
    text_digest,
)
from graphmem.retrieval.tokenize import tokenize
from graphmem.stores.neo4j import _CHUNK, _chunk_from, vector_index_name, vector_label

if TYPE_CHECKING:
    from graphmem.retrieval.embed import Embedder
    from graphmem.stores.neo4j import Neo4jStore

TEXT_INDEX = "graphmem_chunk_tokens"
# HNSW build parameters (Neo4j's defaults are m=16, ef_construction=100); see README.md for the
# measured recall against exact search. Quantization is off, so the index compares the same float32
# vectors as the local index does (quantized search was not measured).
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 100
# Distinct query terms sent to Lucene: far below its 1,024-clause limit, far above any question.
MAX_TERMS = 256
# Neighbours asked of the vector index beyond k: its search list is as wide as what is asked, so
# asking a little wider raises recall (measured in README.md).
MIN_EXTRA = 64
COUNT_TTL = 30.0  # seconds between re-reads of the project's chunk count
WRITE_BATCH = 500


def _lucene_phrase(term: str) -> str:
    """``term`` as a quoted Lucene phrase: only a backslash and a double quote need escaping."""
    return '"' + term.replace("\\", "\\\\").replace('"', '\\"') + '"'


def text_query(project: str, text: str) -> str | None:
    """The full-text query for ``text`` in ``project``: the project as a required, zero-weight
    clause, and the distinct tokens of ``text`` (as the local BM25 index counts them), any of which
    may match. ``None`` when ``text`` has no token."""
    terms = list(dict.fromkeys(tokenize(text)))[:MAX_TERMS]
    if not terms:
        return None
    return (f"+index_project:{_lucene_phrase(project)}^0 +("
            + " ".join(f"index_tokens:{_lucene_phrase(t)}" for t in terms) + ")")


# Each search returns its hits' chunks (the store's chunk fields, as ``Neo4jStore.get_chunks_by_id``
# reads them) with their scores, best first, as one collected row.
_HITS = f"WITH c, score ORDER BY score DESC, c.id LIMIT $k RETURN collect([{_CHUNK}, score])"

_TEXT_SEARCH = """
CALL db.index.fulltext.queryNodes($index, $lucene, {limit: $fetch}) YIELD node AS c, score
""" + _HITS

_VECTOR_SEARCH = """
CALL db.index.vector.queryNodes($index, $fetch, $vector) YIELD node AS c, score
WITH c, score WHERE c.project = $project
""" + _HITS
# The index holds only the project's chunks; the filter above is a second guard (k + 64 reads).

_VECTOR_SCAN = """
MATCH (c:Chunk {project: $project}) WHERE c.embedding IS NOT NULL
WITH c, vector.similarity.cosine(c.embedding, $vector) AS score
""" + _HITS

_COUNT = "MATCH (c:Chunk {project: $project}) RETURN count(c) AS n"

_BACKFILL = """
UNWIND $rows AS row
MATCH (c:Chunk {project: $project, id: row.id}) WHERE c.node_key = row.node_key AND c.text = row.text
SET c.index_tokens = row.tokens, c.index_digest = row.digest, c.index_project = $project, c:`%(label)s`
WITH c, row
CALL db.create.setNodeVectorProperty(c, 'embedding', row.vector)
"""

_STATE = """
MATCH (c:Chunk {project: $project})
RETURN c.id AS id, c.node_key AS node_key, c.ordinal AS ordinal, c.kind AS kind, c.text AS text,
       c.index_digest AS digest,
       c.index_tokens IS NOT NULL AS tokens, c.embedding IS NOT NULL AND c:`%(label)s` AS vector
"""


class TextSearch:
    """BM25 over the chunks' tokens through the full-text index (what ``Indexes.bm25`` offers)."""

    def __init__(self, owner: Neo4jIndexes) -> None:
        self._owner = owner

    def search(self, query: str, k: int = 10) -> list[tuple[int, float]]:
        """The ``k`` best ``(chunk id, score)`` pairs, best first (ties by ascending id)."""
        return [(c.id, score) for c, score in self.search_chunks(query, k)]

    def search_chunks(self, query: str, k: int = 10) -> list[tuple[Chunk, float]]:
        """``search`` with each hit's chunk, read in the same query."""
        store = self._owner.store
        lucene = text_query(store.project, query)
        if lucene is None or k <= 0:
            return []
        # A few more than k, so that ties at the cut are broken by id as the local index does.
        return _hits(store._values(_TEXT_SEARCH, index=TEXT_INDEX, lucene=lucene, fetch=k + 16, k=k))


class VectorSearch:
    """Nearest chunks through the vector index (what ``Indexes.vectors`` offers)."""

    def __init__(self, owner: Neo4jIndexes) -> None:
        self._owner = owner

    def search(self, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        """The ``k`` nearest chunk ids to a normalised query vector, best first, with cosine scores."""
        return [(c.id, score) for c, score in self.search_chunks(query, k)]

    def search_chunks(self, query: np.ndarray, k: int) -> list[tuple[Chunk, float]]:
        """``search`` with each hit's chunk, read in the same query."""
        if k <= 0:
            return []
        owner = self._owner
        vector = np.asarray(query, dtype=np.float32).reshape(-1).tolist()
        hits = _hits(owner.store._values(_VECTOR_SEARCH, index=vector_index_name(owner.store.project),
                                         fetch=k + MIN_EXTRA, vector=vector, k=k), cosine=True)
        if len(hits) < k and len(hits) < owner.chunk_count():  # HNSW may miss a few of a tiny project
            return self._scan(vector, k)
        return hits

    def scan(self, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        """The exact answer: a scan of every vector of the project."""
        return [(c.id, score) for c, score in self._scan(np.asarray(query, dtype=np.float32).reshape(-1).tolist(), k)]

    def _scan(self, vector: list[float], k: int) -> list[tuple[Chunk, float]]:
        return _hits(self._owner.store._values(_VECTOR_SCAN, vector=vector, k=k), cosine=True)


def _hits(rows: list[list[Any]], *, cosine: bool = False) -> list[tuple[Chunk, float]]:
    """Chunks and scores from a search's collected row. Neo4j reports cosine similarity as
    (1 + cos) / 2: with ``cosine`` it is turned back into cos, as the local index gives it."""
    return [(_chunk_from(values), 2.0 * float(score) - 1.0 if cosine else float(score))
            for values, score in rows[0][0]]


class Neo4jIndexes(LazyEmbedder):
    """The server-side counterpart of ``graphmem.retrieval.indexes.Indexes`` for one project.

    Attaching it to the store (``attach``) makes every chunk write carry its index entries; ``sync``
    fills in chunks written without them (before the mode was switched on, or by another embedder).
    Nothing is held locally but the embedding cache, so any number of processes can serve queries.
    """

    remote = True  # searches wait on the server: the engine runs the BM25 one beside the embedding

    def __init__(self, store: Neo4jStore, *, embedder: Embedder | Callable[[], Embedder] | None = None,
                 cache_dir: str | Path) -> None:
        self.store = store
        self.cache_dir = Path(cache_dir)
        self._embedder_source = embedder
        self._embedder: SerialEmbedder | None = None
        self._embedder_lock = threading.Lock()
        self._count: tuple[float, int] | None = None  # (read at, the project's chunks)
        self.bm25 = TextSearch(self)
        self.vectors = VectorSearch(self)

    # --- parts ----------------------------------------------------------------------------------

    def ensure_schema(self) -> None:
        """Create the project's vector index and the full-text index (idempotent); refuse a vector
        index of another dimension (another embedder's), which would serve nothing."""
        dim = self.embedder.dim
        name, label = vector_index_name(self.store.project), vector_label(self.store.project)
        statements = [
            f"""CREATE VECTOR INDEX {name} IF NOT EXISTS FOR (c:`{label}`) ON (c.embedding)
                OPTIONS {{indexConfig: {{`vector.dimensions`: {int(dim)}, `vector.similarity_function`: 'cosine',
                `vector.hnsw.m`: {HNSW_M}, `vector.hnsw.ef_construction`: {HNSW_EF_CONSTRUCTION},
                `vector.quantization.enabled`: false}}}}""",
            f"""CREATE FULLTEXT INDEX {TEXT_INDEX} IF NOT EXISTS FOR (c:Chunk) ON EACH [c.index_tokens, c.index_project]
                OPTIONS {{indexConfig: {{`fulltext.analyzer`: 'whitespace', `fulltext.eventually_consistent`: false}}}}""",
        ]
        driver, database = self.store.driver, self.store.database
        with driver.session(database=database) as session:
            for statement in statements:
                session.run(statement).consume()
            rows = session.run("SHOW VECTOR INDEXES YIELD name, options WHERE name = $name RETURN options",
                               name=name).data()
            session.run("CALL db.awaitIndexes(300)").consume()
        have = rows[0]["options"]["indexConfig"].get("vector.dimensions") if rows else None
        if have is not None and int(have) != dim:
            raise StoreError(f"the Neo4j vector index {name} of project {self.store.project} holds {have}-dimensional "
                             f"vectors, but the embedder {self.embedder.fingerprint()} makes {dim}: drop the project "
                             "and ingest it again, or use the embedder it was made with")

    def attach(self) -> None:
        """Make the store write each chunk's index entries with the chunk, from now on."""
        self.store.index_chunks_with(self.fields)

    def digest(self, chunk_text: str) -> int:
        """What ``index_digest`` holds for a chunk's document text: a digest of the text and of the
        embedder, so a vector of another model counts as stale."""
        return text_digest(f"{self.embedder.fingerprint()}\n{chunk_text}")

    def fields(self, chunks: list[Chunk], report: SyncReport | None = None,
               progress: Progress | None = None) -> list[dict[str, Any]]:
        """Tokens, digest and vector of each chunk (vectors from the embedding cache where known)."""
        texts = [document_text(c) for c in chunks]
        vectors = embed_chunks(self.embedder, self.cache_dir, chunks, texts, [text_digest(t) for t in texts],
                               report or SyncReport(), progress or (lambda stage, done, total: None))
        return [{"tokens": " ".join(tokenize(text)), "digest": self.digest(text), "vector": vec.tolist()}
                for text, vec in zip(texts, vectors)]

    def chunk_count(self) -> int:
        """The project's chunks (re-read every ``COUNT_TTL`` seconds)."""
        now = time.monotonic()
        known = self._count
        if known is None or now - known[0] > COUNT_TTL:
            known = self._count = (now, self.store._read(_COUNT)[0]["n"])
        return known[1]

    # --- the interface of Indexes -----------------------------------------------------------------

    def refresh(self) -> bool:
        """Nothing is loaded locally: the indexes are always the database's."""
        return False

    def reload(self) -> None:
        self._count = None

    def fork(self) -> Neo4jIndexes:
        """Writes go to the database in transactions; a sync needs no private copy."""
        return self

    def adopt(self, other: Neo4jIndexes) -> None:
        self._count = None

    def _state(self) -> tuple[list[dict[str, Any]], dict[int, Chunk]]:
        """Every chunk's index state, and the chunk itself (as far as indexing reads it)."""
        rows = self.store._read(_STATE % {"label": vector_label(self.store.project)})
        # Only what indexing reads: key, text and kind (the embedder may treat kinds apart).
        return rows, {r["id"]: Chunk(r["node_key"], r["ordinal"], r["text"], r["kind"], Provenance("", ""),
                                     id=r["id"]) for r in rows}

    def sync(self, store: Neo4jStore | None = None, *, progress: Progress | None = None,
             full: bool = False) -> SyncReport:
        """Write index entries for the chunks that lack them or hold stale ones (``full``: all)."""
        started = time.perf_counter()
        report = SyncReport()
        rows, chunks = self._state()
        want = {cid: self.digest(document_text(c)) for cid, c in chunks.items()}
        todo = [r for r in rows if full or r["digest"] != want[r["id"]] or not r["tokens"] or not r["vector"]]
        report.added = sum(1 for r in todo if r["digest"] is None)
        report.updated = len(todo) - report.added
        for start in range(0, len(todo), WRITE_BATCH):
            part = todo[start:start + WRITE_BATCH]
            values = self.fields([chunks[r["id"]] for r in part], report, progress)
            batch = [{"id": r["id"], "node_key": r["node_key"], "text": r["text"], **v} for r, v in zip(part, values)]
            statement = _BACKFILL % {"label": vector_label(self.store.project)}
            self.store._write(lambda tx, batch=batch: tx.run(statement, project=self.store.project,
                                                                 rows=batch).consume())
        self._count = None
        report.seconds = time.perf_counter() - started
        return report

    def verify(self, store: Neo4jStore | None = None) -> Consistency:
        """Compare each chunk's index entries with its text (and the embedder)."""
        result = Consistency()
        rows, chunks = self._state()
        want = {cid: self.digest(document_text(c)) for cid, c in chunks.items()}
        result.chunks = len(rows)
        result.vectors = sum(1 for r in rows if r["vector"])
        result.bm25 = sum(1 for r in rows if r["tokens"])
        result.missing_vectors = sorted(r["id"] for r in rows if not r["vector"])
        result.missing_bm25 = sorted(r["id"] for r in rows if not r["tokens"])
        result.stale_vectors = sorted(r["id"] for r in rows if r["vector"] and r["digest"] != want[r["id"]])
        return result
