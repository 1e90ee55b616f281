"""Graph retrieval: link the question to nodes, then walk the organisation graph or rank passages
over the entity layer.

One module per job: ``catalog`` (the names of the project's nodes), ``linking`` (question ->
seeds, with typed reasons), ``walk`` (breadth-first expansion and a personalised PageRank over what
it reached), ``layer`` (HippoRAG-style PageRank over extracted entities for questions over prose),
``pagerank`` (the one PageRank both use). ``GraphRetriever`` chooses between the walk and the layer
and keeps what is built once per catalog (name vectors, the layer, fact vectors).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path as FsPath
from typing import TYPE_CHECKING

import numpy as np

from graphmem.model import NodeKind, is_test_path, kind_of, path_of_key
from graphmem.retrieval.config import LayerConfig, LinkConfig, WalkConfig
from graphmem.retrieval.graph.catalog import Catalog, node_date, singular, spelt_as, words_of
from graphmem.retrieval.graph.layer import EntityLayer, rank_passages
from graphmem.retrieval.graph.linking import Link, LinkReason, link, reference_date
from graphmem.retrieval.graph.result import GraphHit, GraphResult
from graphmem.retrieval.graph.sorts import implementers_of_outside_bases, sort_members
from graphmem.retrieval.graph.walk import edge_weights, walk
from graphmem.retrieval.question import Question
from graphmem.retrieval.files import write_bytes_atomic
from graphmem.stores.base import GENERATION, NAMES_STAMP, GraphStore

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from graphmem.retrieval.embed import Embedder

# Seeds of these kinds start a search without anchoring it on the organisation's graph.
UNANCHORING_KINDS = frozenset({NodeKind.ENTITY, NodeKind.DOCUMENT})
EMBEDDED_NAME_KINDS = (NodeKind.SERVICE, NodeKind.TEAM, NodeKind.DECISION, NodeKind.INCIDENT, NodeKind.ENTITY)
SYNONYM_BLOCK = 2048  # entities per block of the all-pairs name similarity


@dataclass(slots=True)
class _Built:
    """What is derived from one catalog: rebuilt when the project is ingested again."""

    stamp: str | None
    catalog: Catalog
    names: tuple[list[str], np.ndarray] | None = None
    layer: EntityLayer | None | bool = False  # False: not built yet
    facts: np.ndarray | None = None
    project_names: frozenset[tuple[str, ...]] = frozenset()


def file_paths(cat: Catalog) -> list[str]:
    """The paths of the project's open files."""
    return [key[5:] for key in cat.by_kind.get(NodeKind.FILE, [])]


def top_packages(paths: Iterable[str]) -> set[str]:
    """Names of the repository's top-level Python packages outside its tests (``src/_pytest``,
    ``conans``): the names its own code is imported by, so a question naming one names the project
    ("which functions of _pytest does it call"), not a symbol that happens to share the name. Only
    packages of the two layouts a Python project is published from count, at the root or in
    ``src/``: a monorepo's ``services/billing`` is the billing service, which a question names."""
    dirs = {p.rpartition("/")[0] for p in paths if p == "__init__.py" or p.endswith("/__init__.py")}
    return {d.rpartition("/")[2] for d in dirs
            if d and d.rpartition("/")[0] not in dirs and d.rpartition("/")[0] in ("", "src")
            and not is_test_path(d + "/__init__.py")}


def excluded_packages(q: Question, linked: dict[str, Link]) -> set[str]:
    """The packages (directories) the question reads its answer to lie outside: those it names
    after "outside", and for "from other packages" or "outside its own package" those of the code
    it names."""
    out = set(q.outside)
    if q.outside_own:
        out |= {(path_of_key(key) or "").rpartition("/")[0] for key, link in linked.items()
                if link.named and kind_of(key) in (NodeKind.SYMBOL, NodeKind.FILE)}
    return out


def scope_paths(scopes: Sequence[str], cat: Catalog) -> set[str]:
    """The project's paths that scope words name: a written directory ("src/app/") as itself, a
    name ("the assertion module") as every directory of that name (with a trailing "/") and every
    file of that stem. Words that name nothing in the project give nothing."""
    paths = file_paths(cat)
    out: set[str] = set()
    for scope in scopes:
        if scope.endswith("/"):
            if any(p.startswith(scope) for p in paths):
                out.add(scope)
            continue
        name = scope.lower()
        for p in paths:
            parts = p.split("/")
            for i, part in enumerate(parts[:-1]):
                if part.lower() == name:
                    out.add("/".join(parts[:i + 1]) + "/")
            if parts[-1].rsplit(".", 1)[0].lower().lstrip("_") == name.lstrip("_"):
                out.add(p)
    return out


def owners_named(name: str, cat: Catalog) -> set[str]:
    """The project's symbols that ``name`` names and that have members (``Client`` of "which
    methods of Client ...")."""
    keys = {key for key in cat.by_name.get(tuple(singular(w) for w in words_of(name)), set())
            if cat.nodes[key][0] is NodeKind.SYMBOL}
    # "Elements" is the type ``Elements`` where there is one, not ``Element`` as well.
    keys = spelt_as(keys, name) or keys
    return {key for key in keys if any(other.startswith(key + ".") for other in cat.by_kind.get(NodeKind.SYMBOL, ()))}


class GraphRetriever:
    """Question -> ranked nodes with the paths that reached them (see the module docstring)."""

    def __init__(self, store: GraphStore, *, embedder: Embedder | Callable[[], Embedder] | None = None,
                 cache_dir: PathLike[str] | str | None = None, link_config: LinkConfig | None = None,
                 walk_config: WalkConfig | None = None, layer_config: LayerConfig | None = None) -> None:
        self.store = store
        self._embedder = embedder
        self.cache_dir = FsPath(cache_dir) if cache_dir is not None else None
        self.link_config = link_config or LinkConfig()
        self.walk_config = walk_config or WalkConfig()
        self.layer_config = layer_config or LayerConfig()
        self._built: _Built | None = None
        self._refresh_lock = threading.Lock()  # one catalog build at a time when threads query together

    @property
    def embedder(self) -> Embedder | None:
        if callable(self._embedder) and not hasattr(self._embedder, "encode"):
            self._embedder = self._embedder()
        return self._embedder  # type: ignore[return-value]

    # --- what one catalog yields ------------------------------------------------------------------

    def refresh(self) -> _Built:
        """Check once whether the project changed since the catalog was built; rebuild if so."""
        stamp = self.store.get_meta(NAMES_STAMP)
        built = self._built
        if built is None or stamp != built.stamp:
            with self._refresh_lock:
                built = self._built
                if built is None or stamp != built.stamp:
                    cat = self._catalog()
                    built = self._built = _Built(stamp, cat,
                                                 project_names=self._project_names(cat, self._own_names(cat)))
        return built

    @property
    def catalog(self) -> Catalog:
        return self.refresh().catalog

    @property
    def catalog_path(self) -> FsPath | None:
        """Where the project's catalog is kept between processes (None: nowhere)."""
        return self.cache_dir / "catalogs" / f"{_safe(self.store.project)}.marshal" if self.cache_dir else None

    def _catalog(self) -> Catalog:
        """The project's catalog: as saved by an earlier process when the graph has not changed
        since (its ``GENERATION`` is the same), else built from the store and saved."""
        fuzzy = self.link_config.fuzzy_min_length
        path = self.catalog_path
        generation = self.store.get_meta(GENERATION) if path is not None else None
        if path is not None and generation is not None:
            try:
                saved = Catalog.from_bytes(path.read_bytes(), generation=generation, fuzzy_min_length=fuzzy)
                if saved is not None:
                    return saved
            except FileNotFoundError:
                pass
            except (OSError, ValueError) as exc:
                log.warning("name catalog %s is unreadable (%s): building it again", path, exc)
        cat = Catalog.build(self.store, fuzzy_min_length=fuzzy)
        # Saved only when no write came while it was built (it would be part old, part new).
        if path is not None and generation is not None and self.store.get_meta(GENERATION) == generation:
            try:
                write_bytes_atomic(path, cat.to_bytes(generation=generation, fuzzy_min_length=fuzzy))
            except OSError as exc:  # a read-only home: every process builds its own
                log.warning("cannot save the name catalog at %s: %s", path, exc)
        return cat

    def _own_names(self, cat: Catalog) -> frozenset[tuple[str, ...]]:
        """The project's name and the name of a service that covers the whole repository."""
        names = {self.store.project}
        for key in cat.by_kind.get(NodeKind.SERVICE, []):
            node = self.store.get_node(key)
            if node is not None and "" in (node.props.get("paths") or ()) and node.name:
                names.add(node.name)
        return frozenset(tuple(words_of(n)) for n in names if n)

    def _project_names(self, cat: Catalog, own: frozenset[tuple[str, ...]]) -> frozenset[tuple[str, ...]]:
        """How a question may name the project itself: its own names and its top-level packages.
        Unless configured otherwise these link nothing: every question about a project may name
        it, and that says nothing about where the answer is."""
        if self.link_config.project_name_anchors:
            return frozenset()
        return own | frozenset(tuple(words_of(n)) for n in top_packages(file_paths(cat)) if n)

    def _layer(self, built: _Built) -> EntityLayer | None:
        """The entity layer of this catalog (built on first use; ``None`` without entities)."""
        if built.layer is False:
            entities = built.catalog.by_kind.get(NodeKind.ENTITY, [])
            edges, facts, about = EntityLayer.read(self.store, entities) if entities else ([], [], set())
            # Synonymy edges join the names of extracted facts only: open extraction spells one
            # thing many ways ("Hank Snow", "Clarence Eugene Hank Snow"), while rule-extracted
            # names are spans as written, whose near-namesakes are mostly different things.
            ends = sorted({key for src, _, dst in facts for key in (src, dst)}) if edges else []
            built.layer = EntityLayer.build(edges, facts, self._synonyms(built.catalog, ends), self.layer_config,
                                            about)
        return built.layer  # type: ignore[return-value]

    @property
    def layer(self) -> EntityLayer | None:
        return self._layer(self.refresh())

    def _synonyms(self, cat: Catalog, entities: Sequence[str]) -> list[tuple[str, str, float]]:
        """Pairs of entities whose names embed within ``synonym_similarity`` of each other (each
        entity's ``synonyms`` nearest), in a fixed order; none without an embedder."""
        cfg = self.layer_config
        if self.embedder is None or not cfg.synonyms or not entities:
            return []
        keys = sorted(k for k in entities if cat.nodes[k][1])
        vecs = self._encode_names([cat.nodes[k][1] for k in keys])
        out: dict[tuple[str, str], float] = {}
        top = min(cfg.synonyms + 1, len(keys))
        for start in range(0, len(keys), SYNONYM_BLOCK):
            sims = vecs[start:start + SYNONYM_BLOCK] @ vecs.T
            near = np.argpartition(-sims, top - 1, axis=1)[:, :top]
            for row, cols in enumerate(near):
                a = start + row
                for b in cols.tolist():
                    sim = float(sims[row, b])
                    if b != a and sim >= cfg.synonym_similarity:
                        pair = (keys[min(a, b)], keys[max(a, b)])
                        out[pair] = max(out.get(pair, 0.0), sim)
        return [(a, b, sim) for (a, b), sim in sorted(out.items())]

    def kinds_present(self) -> set[NodeKind]:
        """The node kinds the project holds."""
        return set(self.catalog.by_kind)

    def _name_vectors(self, built: _Built) -> tuple[list[str], np.ndarray] | None:
        """Embeddings of the names of services, teams, decisions, incidents and entities (once per
        catalog; symbols are left to BM25 and the chunk vectors). The names a question may call the
        project by (its own, its top-level packages': ``_project_names``) are left out, as they are
        from the names matched by spelling: a question naming the project is no closer to them than
        any other."""
        if self.embedder is None:
            return None
        if built.names is None:
            cat = built.catalog
            keys = [k for kind in EMBEDDED_NAME_KINDS for k in cat.by_kind.get(kind, [])
                    if cat.nodes[k][1] and tuple(words_of(cat.nodes[k][1])) not in built.project_names]
            built.names = (keys, self._encode_names([cat.nodes[k][1] for k in keys]))
        return built.names

    def _fact_vectors(self, built: _Built, layer: EntityLayer) -> np.ndarray | None:
        """Embeddings of the layer's extracted facts, read as sentences ("Hank Snow moved to Nashville")."""
        if self.embedder is None:
            return None
        if built.facts is None:
            cat = built.catalog

            def name(key: str) -> str:
                return cat.nodes[key][1] if key in cat.nodes else key.rsplit(":", 1)[-1]

            built.facts = self._encode_names([f"{name(s)} {p} {name(d)}" for s, p, d in layer.facts])
        return built.facts

    def _encode_names(self, texts: list[str]) -> np.ndarray:
        """Name vectors, through the project's embedding cache when there is one (a corpus of
        passages has tens of thousands of entity names; each new catalog would embed them again)."""
        embedder = self.embedder
        assert embedder is not None
        if not texts:
            return np.zeros((0, embedder.dim), dtype=np.float32)
        if self.cache_dir is None:
            return embedder.encode(texts)
        from graphmem.retrieval.indexes import EmbeddingCache, text_digest

        cache = EmbeddingCache(self.cache_dir / "embeddings" / f"names-{_safe(embedder.fingerprint())}.sqlite",
                               embedder.dim)
        try:
            digests = [text_digest(t) for t in texts]
            known = cache.get_many(digests)
            missing = sorted({d: i for i, d in enumerate(digests) if d not in known}.values())
            if missing:
                vecs = embedder.encode([texts[i] for i in missing])
                cache.put_many((digests[i], vecs[j]) for j, i in enumerate(missing))
                known.update((digests[i], vecs[j]) for j, i in enumerate(missing))
            return np.stack([known[d] for d in digests]).astype(np.float32)
        finally:
            cache.close()

    # --- retrieval ----------------------------------------------------------------------------------

    def link(self, q: Question, query_vec: np.ndarray | None = None, *,
             plain: set[str] | None = None) -> dict[str, Link]:
        """Nodes the question names or describes (see ``linking.link``)."""
        built = self.refresh()
        return self._link(built, q, query_vec, plain)

    def _link(self, built: _Built, q: Question, query_vec: np.ndarray | None,
              plain: set[str] | None, sort: set[str] | None = None) -> dict[str, Link]:
        """``sort``: the project's types of the sort ``q`` asks for, when the caller has them."""
        if sort is None:
            sort = sort_members(built.catalog, q, self.link_config.sort_min_members)
        return link(built.catalog, q, self.link_config, names=self._name_vectors(built) if query_vec is not None else None,
                    query_vec=query_vec, plain=plain, ignore=built.project_names, sort=bool(sort))

    def reference_date(self, q: Question) -> str | None:
        return reference_date(self.catalog, q)

    def retrieve(self, q: Question, *, lexical_seeds: Sequence[str] = (), k: int = 50,
                 as_of: str | None = None, query_vec: np.ndarray | None = None,
                 built: _Built | None = None) -> GraphResult:
        """Rank nodes for ``q``; ``built`` is what ``refresh`` gave the caller for this question
        (the check reads the store: once per question is enough)."""
        built = built if built is not None else self.refresh()
        cat = built.catalog
        plain: set[str] = set()
        sort = sort_members(cat, q, self.link_config.sort_min_members)
        linked = self._link(built, q, query_vec, plain, sort)
        seeds = {key: lk.weight for key, lk in linked.items()}
        # Extracted entities and passages named in the question ("Lothair II") are where to look,
        # not what the organisation's graph knows for certain: the search starts there but is not
        # anchored on the organisation (fusion weighs it less).
        anchored = any(cat.nodes[key][0] not in UNANCHORING_KINDS for key in seeds)
        asked = set(q.answer_kinds) & set(cat.by_kind)
        dated = {NodeKind.COMMIT, NodeKind.INCIDENT, NodeKind.DECISION} & set(cat.by_kind)
        timeless = as_of is None and not (q.time.active and dated)
        # The entity layer is the graph as it is now, without dates: it answers questions that
        # name no organisation node, ask for no kind but passages, and speak of no time that
        # the graph's dated nodes could answer.
        records = set() if q.about_history else cat.changelogs
        if not anchored and timeless and asked <= {NodeKind.DOCUMENT, NodeKind.ENTITY}:
            layer = self._layer(built)
            if layer is not None:
                # Over prose, a name is what the question capitalises: "mother" is no film title here.
                linked = {key: lk for key, lk in linked.items() if key not in plain or not lk.named}
                ranked = rank_passages(layer, cat, q, linked, lexical_seeds, k,
                                       fact_vectors=self._fact_vectors(built, layer), query_vec=query_vec)
                ranked.sort, ranked.records = sort, records
                return ranked
        # Lexical and vector hits seed the search when the question names nothing; next to named
        # nodes they only nudge it (as seeds they would outrank what the named nodes lead to).
        cfg = self.link_config
        lexical_weight = cfg.lexical_seed_weight if not seeds else cfg.anchored_lexical_seed_weight
        for rank, key in enumerate(lexical_seeds):
            if key in cat.nodes and key not in seeds:
                seeds[key] = lexical_weight / (rank + 1)
        # "Which classes extend Exception?": a base outside the project has no node to walk from;
        # the types that declare it are the answers, and are of the sort asked for.
        if implementers := implementers_of_outside_bases(cat, q):
            for key in implementers:
                seeds[key] = max(seeds.get(key, 0.0), cfg.described_seed_weight / len(implementers))
            sort = sort | implementers
        owners = owners_named(q.members_of, cat) if q.members_of else set()
        if q.sort_owns_answer:
            owners, sort = owners | sort, set()  # "which builder methods": the builders' members
        result = GraphResult([], seeds, dict(linked), anchored=anchored, named=bool(linked),
                             outside=excluded_packages(q, linked),
                             inside=scope_paths(q.inside, cat) if q.inside else set(), sort=sort,
                             records=records, owners=owners)
        if not seeds:
            return result
        return walk(self.store, cat, q, linked, result, k=k, as_of=as_of, config=self.walk_config, link_config=cfg)


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)[:120]


__all__ = ["UNANCHORING_KINDS", "Catalog", "EntityLayer", "GraphHit", "GraphResult", "GraphRetriever", "Link",
           "LinkReason", "edge_weights", "node_date"]
