"""Retrieval policy as data: every weight, threshold and candidate depth in one place.

Each stage has a frozen settings object validated at construction (linking, the organisation-graph
walk, the passage entity layer, fusion, reranking); a ``RetrievalConfig`` is one recipe of them,
and ``PRESETS`` names the recipes the CLI, the Python API, the MCP server and the evaluation
harness share. ``RetrievalConfig.with_overrides`` applies a nested mapping (``eval run --config``)
so a sweep changes numbers, never code.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from graphmem.errors import ConfigError
from graphmem.model import NodeKind, RelType

RETRIEVERS = ("bm25", "vector", "graph")


def _check(cond: bool, message: str) -> None:
    if not cond:
        raise ConfigError(message)


def _nonneg(obj: object, *names: str) -> None:
    for name in names:
        value = getattr(obj, name)
        _check(isinstance(value, (int, float)) and value >= 0, f"{type(obj).__name__}.{name} must be >= 0, not {value!r}")


def _unit(obj: object, *names: str) -> None:
    for name in names:
        value = getattr(obj, name)
        _check(isinstance(value, (int, float)) and 0 <= value <= 1,
               f"{type(obj).__name__}.{name} must lie in [0, 1], not {value!r}")


def _frozen_map(value: Mapping[str, float]) -> Mapping[str, float]:
    return MappingProxyType(dict(value))


@dataclass(frozen=True, slots=True)
class CandidateConfig:
    """How deep each retriever looks before fusion."""

    chunk_candidates: int = 100  # chunk hits fetched per lexical / vector retriever
    node_candidates: int = 50  # node candidates each retriever hands to fusion
    lexical_seeds: int = 5  # best lexical and vector nodes that join the graph retriever's seeds

    def __post_init__(self) -> None:
        for name in ("chunk_candidates", "node_candidates"):
            _check(getattr(self, name) >= 1, f"CandidateConfig.{name} must be >= 1")
        _nonneg(self, "lexical_seeds")


@dataclass(frozen=True, slots=True)
class LinkConfig:
    """Linking a question to the nodes it names or describes."""

    max_name_words: int = 8  # longest word sequence looked up as a name
    fuzzy_min_length: int = 5
    fuzzy_cutoff: float = 88.0  # rapidfuzz ratio: one or two typos in a word of 6-12 letters
    fuzzy_weight: float = 0.8
    # Cosine thresholds are in the default embedder's units (bge-small-en-v1.5; see the README on embedders).
    name_similarity: float = 0.75  # cosine of name vectors: clearly about the same thing
    name_matches: int = 3
    name_similarity_weight: float = 0.6
    title_overlap: float = 0.6  # share of a decision or incident title's words the question repeats
    title_weight: float = 0.8
    lexical_seed_weight: float = 0.35  # lexical and vector hits as seeds when nothing is named
    anchored_lexical_seed_weight: float = 0.02  # the same beside named nodes
    described_seed_weight: float = 0.6  # "the incident that hit X": that kind next to X
    stepped_from_weight: float = 0.2  # what a relative clause steps away from
    # The members of the code a question names seed the walk too, together weighing this much
    # against the code itself, where a relationship reaches the code through them: "which commits
    # changed StaticFiles" (a change to a method changes its class), "what imports
    # starlette.datastructures" (an import takes one of the module's definitions).
    member_weight: float = 1.0
    # A plain word that is the name of a member of a type the question names ("where does a Request
    # read its body": ``Request.body``) links that member with this weight; a name written as code
    # links with weight 1.
    member_word_weight: float = 0.5
    # Whether the project's own name (and a service that is the whole project) anchors a question.
    project_name_anchors: bool = False
    # "Which middleware ...": the project's types named after the noun make a sort of thing when
    # there are this many of them (one type so named is a name, not a convention).
    sort_min_members: int = 2

    def __post_init__(self) -> None:
        _nonneg(self, "max_name_words", "fuzzy_min_length", "name_matches", "fuzzy_weight", "name_similarity_weight",
                "title_weight", "lexical_seed_weight", "anchored_lexical_seed_weight", "described_seed_weight",
                "stepped_from_weight", "member_weight", "member_word_weight", "sort_min_members")
        _unit(self, "name_similarity", "title_overlap")
        _check(0 <= self.fuzzy_cutoff <= 100, "LinkConfig.fuzzy_cutoff must lie in [0, 100]")


BASE_WEIGHTS: Mapping[str, float] = _frozen_map({
    RelType.CONTAINS.value: 0.6, RelType.IMPORTS.value: 0.5, RelType.CALLS.value: 1.0,
    RelType.INHERITS.value: 0.6, RelType.DEPENDS_ON.value: 1.0, RelType.OWNS.value: 0.8,
    RelType.MEMBER_OF.value: 0.5, RelType.AUTHORED.value: 0.6, RelType.PARENT.value: 0.05,
    RelType.CHANGED.value: 0.4, RelType.MODIFIED.value: 0.8, RelType.REFERENCES.value: 0.8,
    RelType.FIXES.value: 1.0, RelType.SUPERSEDES.value: 1.0, RelType.DECIDED.value: 0.6,
    RelType.MENTIONS.value: 0.4, RelType.AFFECTED.value: 1.0, RelType.CAUSED_BY.value: 1.0,
    RelType.RESOLVED_BY.value: 1.0, RelType.IMPLEMENTS.value: 1.0, RelType.RELATED_TO.value: 0.7,
    RelType.TOUCHED.value: 0.8, RelType.RELEASED_IN.value: 0.8,
})


@dataclass(frozen=True, slots=True)
class WalkConfig:
    """The organisation-graph walk: expansion limits and the personalised PageRank over what it reached."""

    base_weights: Mapping[str, float] = field(default_factory=lambda: dict(BASE_WEIGHTS))  # per relationship type, before the question emphasis
    emphasis: float = 6.0  # a relationship type the question names weighs 1 + emphasis times more
    damping: float = 0.75
    iterations: int = 40
    off_kind_factor: float = 0.1  # nodes of a kind the question does not ask for
    latest_change_boost: float = 5.0  # "who last changed X": the newest change relationship
    older_change_factor: float = 0.1  # ... and the older ones
    against_direction: float = 0.25  # a directed relationship walked away from the answer's end
    direct_first: bool = True  # one directed step from what the question names comes before the rest
    max_depth: int = 4
    max_nodes: int = 2500
    deep_limit: int = 400  # the last hop only out of a neighbourhood smaller than this
    hub_degree: int = 60  # past this many relationships a node is a hub (see stores.base.Hub)
    hub_type_limit: int = 15
    unknown_type_weight: float = 0.5
    # Among the first ``role_depth`` candidates of the asked kind, those playing the role the
    # question's main clause gives its answer come first (walk._role_order): the dependents of the
    # incident's service, not that service.
    role_order: bool = True
    role_depth: int = 20
    # "Which module is imported by the most files?": the code counted first (walk._most_related_first).
    most_related: int = 20
    # A relationship that stands for others the question may name: services DEPENDS_ON each other
    # because code in one calls or imports code in the other.
    stands_for: Mapping[str, tuple[str, ...]] = field(
        default_factory=lambda: {RelType.DEPENDS_ON.value: (RelType.CALLS.value, RelType.IMPORTS.value)})

    def __post_init__(self) -> None:
        object.__setattr__(self, "base_weights", _frozen_map(self.base_weights))
        object.__setattr__(self, "stands_for", MappingProxyType({k: tuple(v) for k, v in self.stands_for.items()}))
        types = {t.value for t in RelType}
        odd = sorted((set(self.stands_for) | {t for v in self.stands_for.values() for t in v}) - types)
        _check(not odd, f"WalkConfig.stands_for: unknown relationship types {odd}")
        unknown = set(self.base_weights) - {t.value for t in RelType}
        _check(not unknown, f"WalkConfig.base_weights: unknown relationship types {sorted(unknown)}")
        _check(all(v >= 0 for v in self.base_weights.values()), "WalkConfig.base_weights must be >= 0")
        _nonneg(self, "emphasis", "iterations", "latest_change_boost", "older_change_factor", "max_depth",
                "max_nodes", "deep_limit", "hub_degree", "hub_type_limit", "unknown_type_weight", "role_depth",
                "most_related")
        _unit(self, "damping", "off_kind_factor", "against_direction")


@dataclass(frozen=True, slots=True)
class LayerConfig:
    """The passage entity layer (HippoRAG-style PageRank over extracted entities)."""

    damping: float = 0.85  # long walks: passages two or three names away are the next hops
    iterations: int = 40
    related_weight: float = 2.0  # an extracted relation between entities, against a mention
    about_weight: float = 10.0  # the mention joining a passage to the entity it is about, against another
    lexical_seed_weight: float = 0.05  # the best lexical and vector passages, against one named entity
    doc_seed_weight: float = 1.0  # a passage whose title the question spells
    specificity_power: float = 1.0  # an entity mentioned by n passages weighs n ** -power
    facts: int = 3  # extracted facts nearest the question whose ends seed the walk
    fact_similarity: float = 0.61
    fact_seed_weight: float = 1.0
    synonym_similarity: float = 0.82  # names this close in meaning are joined by a synonymy edge
    synonyms: int = 10  # nearest names per entity considered
    synonym_weight: float = 1.0

    def __post_init__(self) -> None:
        _unit(self, "damping", "fact_similarity", "synonym_similarity")
        _nonneg(self, "iterations", "related_weight", "about_weight", "lexical_seed_weight", "doc_seed_weight",
                "specificity_power", "facts", "fact_seed_weight", "synonyms", "synonym_weight")


@dataclass(frozen=True, slots=True)
class FusionConfig:
    """How the retrievers' node lists become one.

    ``method="rrf"``: weighted reciprocal rank fusion (Cormack et al., SIGIR 2009) with constant
    ``rrf_k``. ``method="learned"``: a small ranker over per-candidate features
    (``graphmem.retrieval.learned``) with a floor: the first ``floor_top`` candidates of every
    single list stay within the first ``floor_rank`` places.
    """

    method: str = "rrf"
    weights: Mapping[str, float] = field(default_factory=lambda: {"bm25": 1.0, "vector": 1.0, "graph": 1.0})
    rrf_k: float = 60.0
    model: str = "fusion-v9"  # learned: a model shipped in graphmem/retrieval/models/, or a path
    floor_top: int = 1
    floor_rank: int = 10
    # Learned: the named end of an asked relationship ("X" in "what calls X") stays out of the
    # first ``subject_rank`` places (0: the model alone decides).
    subject_rank: int = 5
    # A candidate in a package the question reads its answer to lie outside ("which code outside
    # middleware/ calls X", "who uses X from other packages"), or outside the package or module it
    # places the answer in ("the functions in the assertion module"), goes after the others.
    scope_last: bool = True
    # Learned: for a question that names no kind of answer ("how does the runner handle a
    # timeout?"), each of the first ``spread_window`` candidates moves ``file_spread`` places down
    # for every candidate of its file above it (0: off).
    file_spread: int = 2
    spread_window: int = 15

    def __post_init__(self) -> None:
        object.__setattr__(self, "weights", _frozen_map(self.weights))
        _check(self.method in ("rrf", "learned"), f"FusionConfig.method must be 'rrf' or 'learned', not {self.method!r}")
        unknown = set(self.weights) - set(RETRIEVERS)
        _check(not unknown, f"FusionConfig.weights: unknown retrievers {sorted(unknown)}")
        _check(all(v >= 0 for v in self.weights.values()), "FusionConfig.weights must be >= 0")
        _check(any(v > 0 for v in self.weights.values()), "FusionConfig.weights: at least one retriever must count")
        _nonneg(self, "rrf_k", "floor_top", "floor_rank", "subject_rank", "file_spread", "spread_window")

    @property
    def retrievers(self) -> tuple[str, ...]:
        return tuple(r for r in RETRIEVERS if self.weights.get(r, 0.0) > 0)


@dataclass(frozen=True, slots=True)
class RerankConfig:
    enabled: bool = False
    # Fused candidates the cross-encoder reorders: its cost grows with them, and on the realcode dev
    # split 8, 10 and 15 ranked alike (the eval reports hold the figures).
    depth: int = 10
    # The general model (`graphmem reranker build-general`), used when a project has none: the weight
    # of the fused-rank prior added to its logit (``CrossEncoderReranker.prior_weight``), the answer
    # kinds it reorders ("any": the question names none), whether it also reorders questions that
    # ask for a relationship ("what calls X", "which release removed X"), where a text-only model
    # cannot see which candidate plays the asked role, and questions whose head is prose passages
    # ranked over the entity layer (far from the code and docstrings it learned from): more than
    # ``general_prose_share`` of the head documents or extracted entities. A code corpus with
    # documentation has an entity layer too, and ranks its code over it for a question that names
    # nothing; that head is code, which the model reads. Chosen on development sets (eval/realcode's
    # dev split, HotpotQA): the model alone, on relational questions or on passages lost to the
    # fused order.
    general_prior_weight: float = 4.0
    general_answer_kinds: tuple[str, ...] = ("any", *(k.value for k in NodeKind))
    general_relational: bool = False
    general_passages: bool = False
    general_prose_share: float = 0.5

    def __post_init__(self) -> None:
        _check(self.depth >= 1, "RerankConfig.depth must be >= 1")
        _check(self.general_prior_weight >= 0, "RerankConfig.general_prior_weight must be >= 0")
        _check(0.0 <= self.general_prose_share <= 1.0, "RerankConfig.general_prose_share must be in [0, 1]")
        object.__setattr__(self, "general_answer_kinds", tuple(self.general_answer_kinds))


@dataclass(frozen=True, slots=True)
class RetrievalConfig:
    """One recipe: which retrievers, how deep, how linked, walked, fused and reranked."""

    name: str
    fusion: FusionConfig = field(default_factory=FusionConfig)
    candidates: CandidateConfig = field(default_factory=CandidateConfig)
    link: LinkConfig = field(default_factory=LinkConfig)
    walk: WalkConfig = field(default_factory=WalkConfig)
    layer: LayerConfig = field(default_factory=LayerConfig)
    rerank: RerankConfig = field(default_factory=RerankConfig)

    @property
    def retrievers(self) -> tuple[str, ...]:
        return self.fusion.retrievers

    @property
    def searches(self) -> frozenset[str]:
        """The lists a question under this recipe searches: its retrievers, and BM25 and vectors
        whenever the graph retriever runs (it seeds from their best hits)."""
        runs = set(self.retrievers)
        return frozenset(runs | {"bm25", "vector"} if "graph" in runs else runs)

    def with_overrides(self, overrides: Mapping[str, Any], *, name: str | None = None) -> RetrievalConfig:
        """A copy with ``{"fusion": {"floor_rank": 3}, "walk": {"damping": 0.8}}`` applied (validated)."""
        changes: dict[str, Any] = {}
        for section, values in overrides.items():
            if section == "name":
                continue
            current = getattr(self, section, None)
            if current is None or not dataclasses.is_dataclass(current):
                raise ConfigError(f"unknown retrieval setting section {section!r}")
            if not isinstance(values, Mapping):
                raise ConfigError(f"retrieval setting {section!r} must be a table of values")
            known = {f.name for f in dataclasses.fields(current)}
            unknown = set(values) - known
            if unknown:
                raise ConfigError(f"unknown {section} settings: {', '.join(sorted(unknown))}")
            merged = dict(values)
            for key, value in values.items():  # tables merge into tables ("base_weights", "weights")
                old = getattr(current, key)
                if isinstance(old, Mapping) and isinstance(value, Mapping):
                    merged[key] = {**old, **value}
            try:
                changes[section] = dataclasses.replace(current, **merged)
            except TypeError as exc:
                raise ConfigError(f"{section}: {exc}") from None
        return dataclasses.replace(self, name=name or str(overrides.get("name") or self.name), **changes)

    def as_dict(self) -> dict[str, Any]:
        """Every setting, as plain JSON-ready values."""
        def plain(value: Any) -> Any:
            if dataclasses.is_dataclass(value):
                return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
            if isinstance(value, Mapping):
                return {k: plain(v) for k, v in value.items()}
            return value

        return plain(self)  # type: ignore[no-any-return]


def _recipe(name: str, weights: Mapping[str, float], *, method: str = "rrf", rerank: bool = False) -> RetrievalConfig:
    return RetrievalConfig(name, fusion=FusionConfig(method=method, weights=weights), rerank=RerankConfig(enabled=rerank))


ALL = {"bm25": 1.0, "vector": 1.0, "graph": 1.0}
PRESETS: Mapping[str, RetrievalConfig] = MappingProxyType({
    "bm25": _recipe("bm25", {"bm25": 1.0}),
    "vector": _recipe("vector", {"vector": 1.0}),
    "graph": _recipe("graph", {"graph": 1.0}),
    "rrf": _recipe("rrf", ALL),  # plain reciprocal rank fusion of the three lists, the documented baseline
    "hybrid": _recipe("hybrid", ALL, method="learned"),
    "hybrid-rerank": _recipe("hybrid-rerank", ALL, method="learned", rerank=True),
})
DEFAULT_MODE = "hybrid-rerank"


def preset(mode: str | RetrievalConfig) -> RetrievalConfig:
    if isinstance(mode, RetrievalConfig):
        return mode
    try:
        return PRESETS[mode]
    except KeyError:
        raise ConfigError(f"unknown mode {mode!r}: choose one of {', '.join(PRESETS)}") from None


def load_overrides(path: str | Path) -> dict[str, Any]:
    """A sweep file: TOML or JSON, ``{section: {setting: value}}``, optionally ``mode`` and ``name``."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
        if p.suffix == ".toml":
            import tomllib  # Python 3.11+; JSON works everywhere

            data = tomllib.loads(text)
        else:
            data = json.loads(text)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read retrieval settings {p}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: retrieval settings must be a table")
    return data


def load_recipe(path: str | Path) -> RetrievalConfig:
    """A swept recipe from a settings file: its ``mode`` (default ``hybrid``) changed by the rest,
    named by its ``name`` (default the file's stem)."""
    overrides = load_overrides(path)
    base = preset(str(overrides.pop("mode", "hybrid")))
    return base.with_overrides(overrides, name=str(overrides.pop("name", Path(path).stem)))
