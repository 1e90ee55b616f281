"""Learned fusion: a small ranker over per-candidate features, with a floor.

Hand-set multipliers cannot know when to trust each list: a graph list that started from what the
question names is decisive for "what calls X" and noise for "where is the code that parses
dates". The ranker sees, for every candidate, each retriever's rank and normalised score, how many
lists agree, how clearly a list it leads puts it first, whether its kind is the one asked for,
whether and why the question named it, the length and relationship types of the graph path that
reached it, and the question's shape; it is
trained on a development split by ``eval/train_fusion.py`` and shipped as a JSON artefact, one
ranker per retrieval path (the organisation walk, the passage entity layer). A ranker is linear
(pairwise: gold above non-gold of the same question, RankNet's logistic loss) or a sum of
gradient-boosted regression trees (:class:`TreeRanker`), which can learn that a feature matters
only beside another (a two-step path when the question asks for a relationship twice removed).

The floor bounds the damage of a wrong model: the first ``floor_top`` candidates of every single
list stay within the first ``floor_rank`` places of the fused list.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from graphmem.errors import ConfigError
from graphmem.model import NodeKind, is_test_key, kind_of, path_of_key

LISTS = ("bm25", "vector", "graph")
KIND_FEATURES = (NodeKind.SYMBOL, NodeKind.FILE, NodeKind.COMMIT, NodeKind.DOCUMENT, NodeKind.ENTITY,
                 NodeKind.SERVICE, NodeKind.PERSON, NodeKind.TEAM, NodeKind.DECISION, NodeKind.INCIDENT)
MODELS = Path(__file__).resolve().parent / "models"
FORMAT = 3
READABLE_FORMATS = (2, 3)  # format 2: linear rankers only, without a "type"
PATHS = ("walk", "layer")
WORDS_CAP = 24  # question length (plain words) at which the length features saturate


@dataclass(slots=True)
class QuestionSignals:
    """What the question and the graph search say about all candidates alike."""

    asks_kind: bool = False
    anchored: bool = False  # graph search started from organisation nodes the question names
    layer: bool = False  # the graph list ranks passages over the entity layer
    named: int = 0  # nodes the question names outright
    relations: frozenset[str] = frozenset()  # relationship types the question names
    main_relations: frozenset[str] = frozenset()  # ... in its main clause (what leads to the answer)
    directed: bool = False  # the question reads a relationship with a direction ("what calls X")
    words: int = 0  # plain English words of the question (names written as code left out)


@dataclass(slots=True)
class CandidateSignals:
    """Per-candidate inputs of the features."""

    ranks: dict[str, int] = field(default_factory=dict)  # list -> rank (1-based)
    scores: dict[str, float] = field(default_factory=dict)  # list -> score normalised to the list's best
    kind_match: bool = False
    named: bool = False  # the question names it outright
    linked: bool = False  # a seed of the graph search for any reason
    subject: bool = False  # what the question is about, of the kind it asks for
    path_length: int | None = None
    path_relations: frozenset[str] = frozenset()
    last_relation: str | None = None  # type of the path's last step, into the candidate
    last_directed: bool = False  # that step is a relationship the question directs, and the candidate is its asked end
    bridged: bool = False  # a passage the entity layer reached through another passage, as the entity it is about
    shape: int = 0  # "which method ...": +1 for a function or method, -1 for another symbol (a type)


def feature_names() -> list[str]:
    names = []
    for lst in LISTS:
        names += [f"{lst}_rr", f"{lst}_in", f"{lst}_score", f"{lst}_top1"]
    names += ["agree", "kind_match", "asks_kind", "named", "linked", "subject", "path_len", "path_asked_rel",
              "anchored", "layer", "q_named", "directed",
              "graph_rr_x_anchored", "graph_rr_x_layer", "graph_rr_x_directed", "graph_rr_x_kind",
              "bm25_rr_x_anchored", "vector_rr_x_anchored", "graph_rr_x_relations",
              "last_main_rel", "last_directed", "linked_x_kind", "linked_x_directed", "named_x_kind",
              "graph_top5", "graph_top5_x_layer", "graph_score_x_layer", "lexical_rr_x_layer", "bridged",
              "bridged_x_graph_rr"]
    names += [f"is_{k.value}" for k in KIND_FEATURES]
    names += ["named_plain", "in_tests"]
    names += ["text_agree", "text_agree_x_anchored", "describes", "named_x_describes", "graph_rr_x_describes"]
    for lst in LISTS:
        names += [f"{lst}_top1_margin", f"{lst}_top1_margin_x_describes"]
    names += ["callable_match", "callable_mismatch"]
    return names


def _describes(q: QuestionSignals) -> float:
    """How much the question describes (its plain-word length, saturating) when it asks for no relationship."""
    return min(q.words, WORDS_CAP) / WORDS_CAP * (not q.relations and not q.directed)


def list_margins(cands: Mapping[str, CandidateSignals]) -> dict[str, float]:
    """How far each list's first candidate stands above its second: one minus the ratio of their
    scores (1 when the list has a single candidate, 0 for a tie). The vector list's scores are
    cosines, the others' are normalised to their best; a ratio reads both alike."""
    first = {lst: 0.0 for lst in LISTS}
    second = {lst: 0.0 for lst in LISTS}
    for c in cands.values():
        for lst, rank in c.ranks.items():
            if rank == 1:
                first[lst] = c.scores.get(lst, 0.0)
            elif rank == 2:
                second[lst] = c.scores.get(lst, 0.0)
    return {lst: min(max(1.0 - second[lst] / first[lst], 0.0), 1.0) if first[lst] > 0 else 1.0 for lst in LISTS}


_KIND_COLUMN = {kind: i for i, kind in enumerate(KIND_FEATURES)}
_WIDTH = len(feature_names())


def matrix(q: QuestionSignals, keys: Sequence[str], cands: Mapping[str, CandidateSignals]) -> np.ndarray:
    """Feature rows of ``keys`` (float32, the columns of ``feature_names``).

    Per candidate: each list's reciprocal rank, presence, normalised score and first place; how
    many lists agree; whether its kind is the one asked for; whether and why the question names it
    (named without a relationship asked, it is the answer: "where is X defined"); the graph path's
    length and relationship types; its kind and whether it is test code. Both text lists ranking
    a candidate high is evidence no single list gives. A long question that names a node and asks
    for no relationship mostly describes something else (the named node is its context: "what
    code tests whether this Option has a long name"), where a short one asks for the node itself.
    A list's first place counts more when it stands clear of the second (see ``list_margins``):
    a text list whose best match stands well clear is seldom wrong about a described behaviour,
    one whose first few tie says little. Over the entity layer the graph list already holds the
    best lexical passages (they seed the walk), so its order below the first place may carry more
    than a reciprocal rank says; and a passage reached through another one, as the entity it is
    about, is a multi-hop question's next hop. When the question asks for a callable ("which
    method cancels a timeout?"), a type ranked high for words one of its methods holds is not the
    answer. The candidates are read once into arrays; the columns are computed on those."""
    n = len(keys)
    rank = np.zeros((n, len(LISTS)))
    score = np.zeros((n, len(LISTS)))
    # Per candidate: kind_match, named, linked, subject, path_len, path_asked_rel, last_main_rel,
    # last_directed, bridged, callable_match, callable_mismatch, lists agreeing, in_tests.
    own = np.zeros((n, 13))
    kinds = np.zeros((n, len(KIND_FEATURES)))
    for i, key in enumerate(keys):
        c = cands[key]
        for j, lst in enumerate(LISTS):
            r = c.ranks.get(lst)
            if r:
                rank[i, j] = r
            score[i, j] = c.scores.get(lst, 0.0)
        own[i] = (c.kind_match, c.named, c.linked, c.subject,
                  min(c.path_length, 4) / 4.0 if c.path_length is not None else 0.0,
                  bool(c.path_relations & q.relations), c.last_relation in q.main_relations, c.last_directed,
                  c.bridged, c.shape > 0, c.shape < 0, len(c.ranks), is_test_key(key))
        column = _KIND_COLUMN.get(kind_of(key))
        if column is not None:
            kinds[i, column] = 1.0
    present = rank > 0
    rr = np.divide(1.0, rank, out=np.zeros_like(rank), where=present)
    top1 = (rank == 1).astype(np.float64)
    bm25_rr, vector_rr, graph_rr = rr[:, 0], rr[:, 1], rr[:, 2]
    (kind_match, named, linked, subject, path_len, asked_rel, last_main, last_directed, bridged,
     callable_match, callable_mismatch, agree, in_tests) = own.T
    anchored, layer, directed = float(q.anchored), float(q.layer), float(q.directed)
    describes = _describes(q)
    graph_top5 = (present[:, 2] & (rank[:, 2] <= 5)).astype(np.float64)
    margins = list_margins(cands)
    margin_top = top1 * np.asarray([margins[lst] for lst in LISTS])
    text_agree = np.minimum(bm25_rr, vector_rr)
    ones = np.ones(n)
    columns = [
        *(col for j in range(len(LISTS)) for col in (rr[:, j], present[:, j], score[:, j], top1[:, j])),
        agree / len(LISTS), kind_match, ones * q.asks_kind, named, linked, subject, path_len, asked_rel,
        ones * anchored, ones * layer, ones * (min(q.named, 3) / 3.0), ones * directed,
        graph_rr * anchored, graph_rr * layer, graph_rr * directed, graph_rr * kind_match,
        bm25_rr * anchored, vector_rr * anchored, graph_rr * bool(q.relations),
        last_main, last_directed, linked * kind_match, linked * directed, named * kind_match,
        graph_top5, graph_top5 * layer, score[:, 2] * layer, np.maximum(bm25_rr, vector_rr) * layer, bridged,
        graph_rr * bridged,
        *kinds.T,
        named * float(not q.relations and not q.directed), in_tests,
        text_agree, text_agree * anchored, ones * describes,
        named * describes, graph_rr * describes,
        *(col for j in range(len(LISTS)) for col in (margin_top[:, j], margin_top[:, j] * describes)),
        callable_match, callable_mismatch,
    ]
    return np.stack(columns, axis=1).astype(np.float32).reshape(n, _WIDTH)


@dataclass(frozen=True, slots=True)
class LinearRanker:
    """``score = ((x - mean) / scale) @ weights``."""

    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray

    def check(self, n: int, name: str) -> None:
        for arr in (self.mean, self.scale, self.weights):
            if arr.shape != (n,) or not np.all(np.isfinite(arr)):
                raise ConfigError(f"fusion model {name!r} is malformed")
        if np.any(self.scale <= 0):
            raise ConfigError(f"fusion model {name!r} has a non-positive scale")

    def score(self, x: np.ndarray) -> np.ndarray:
        return ((x - self.mean) / self.scale) @ self.weights

    def as_dict(self) -> dict[str, Any]:
        return {"type": "linear", **{key: [round(float(v), 6) for v in getattr(self, key)]
                                     for key in ("mean", "scale", "weights")}}

    @classmethod
    def from_dict(cls, part: Mapping[str, Any]) -> LinearRanker:
        return cls(*(np.asarray(part[key], dtype=np.float64) for key in ("mean", "scale", "weights")))


@dataclass(frozen=True, slots=True)
class TreeRanker:
    """``score = base + the sum of one leaf value per tree``; a tree node sends a candidate left when
    ``x[feature] <= threshold``. The trees are packed into flat arrays (a leaf's children are itself),
    so all trees walk all candidates together, one numpy step per level of the deepest tree."""

    base: float
    feature: np.ndarray  # per node; 0 at leaves (never read: a leaf stays where it is)
    threshold: np.ndarray
    left: np.ndarray  # index of the node's left child in the packed arrays
    right: np.ndarray
    value: np.ndarray  # leaf values (0 at inner nodes)
    roots: np.ndarray  # the packed index of each tree's root
    depth: int

    def check(self, n: int, name: str) -> None:
        size = len(self.feature)
        ok = (all(len(a) == size for a in (self.threshold, self.left, self.right, self.value))
              and size > 0 and len(self.roots) > 0 and self.depth >= 0 and np.isfinite(self.base)
              and np.all((self.feature >= 0) & (self.feature < n))
              and all(np.all((a >= 0) & (a < size)) for a in (self.left, self.right, self.roots))
              and np.all(np.isfinite(self.value)) and not np.any(np.isnan(self.threshold)))
        if not ok:
            raise ConfigError(f"fusion model {name!r} is malformed")

    def score(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        flat = x.ravel()
        row = (np.arange(len(x), dtype=np.int32) * x.shape[1])[None, :]  # where each candidate's row starts
        node = np.repeat(self.roots[:, None], len(x), axis=1)  # trees x candidates
        for _ in range(self.depth):
            left = flat[row + self.feature[node]] <= self.threshold[node]
            node = np.where(left, self.left[node], self.right[node])
        return self.base + self.value[node].sum(axis=0)

    def as_dict(self) -> dict[str, Any]:
        return {"type": "trees", "base": round(float(self.base), 8), "depth": self.depth,
                "roots": self.roots.tolist(), "feature": self.feature.tolist(),
                "threshold": [float(v) for v in self.threshold], "left": self.left.tolist(),
                "right": self.right.tolist(), "value": [round(float(v), 8) for v in self.value]}

    @classmethod
    def from_dict(cls, part: Mapping[str, Any]) -> TreeRanker:
        ints = {key: np.asarray(part[key], dtype=np.int32) for key in ("feature", "left", "right", "roots")}
        return cls(float(part["base"]), ints["feature"], np.asarray(part["threshold"], dtype=np.float64),
                   ints["left"], ints["right"], np.asarray(part["value"], dtype=np.float64), ints["roots"],
                   int(part["depth"]))


Ranker = LinearRanker | TreeRanker
_RANKERS: dict[str, type[LinearRanker] | type[TreeRanker]] = {"linear": LinearRanker, "trees": TreeRanker}


@dataclass(frozen=True, slots=True)
class FusionModel:
    """Linear rankers by retrieval path: ``walk`` (the organisation graph, and questions that name
    nothing) and optionally ``layer`` (passages ranked over the entity layer); without a ``layer``
    ranker the ``walk`` one serves both (a pooled model, whose features already say which path
    the graph list came from)."""

    name: str
    names: tuple[str, ...]
    rankers: Mapping[str, Ranker]
    about: Mapping[str, Any] = field(default_factory=dict)
    _columns: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        known = feature_names()
        unknown = [n for n in self.names if n not in known]
        if unknown or len(set(self.names)) != len(self.names):
            raise ConfigError(f"fusion model {self.name!r} was trained on features this version does not "
                              f"compute ({', '.join(unknown) or 'repeated names'}); retrain it (python -m eval.train_fusion)")
        # A model trained before a feature was added reads its own columns of the full matrix.
        columns = [known.index(n) for n in self.names]
        object.__setattr__(self, "_columns", None if columns == list(range(len(known))) else np.asarray(columns))
        if "walk" not in self.rankers or set(self.rankers) - set(PATHS):
            raise ConfigError(f"fusion model {self.name!r} needs a 'walk' ranker (and at most {', '.join(PATHS)})")
        for ranker in self.rankers.values():
            ranker.check(len(self.names), self.name)

    def score(self, x: np.ndarray, path: str = "walk") -> np.ndarray:
        """Scores of the rows of ``x``, a :func:`matrix` (every feature this version computes)."""
        if self._columns is not None:
            x = x[:, self._columns]
        return self.rankers.get(path, self.rankers["walk"]).score(x)

    def as_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "name": self.name, "features": list(self.names),
                "rankers": {path: r.as_dict() for path, r in self.rankers.items()}, "about": dict(self.about)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FusionModel:
        try:
            if data.get("format") not in READABLE_FORMATS:
                raise ConfigError(f"fusion model format {data.get('format')!r} is not one of {READABLE_FORMATS}")
            rankers: dict[str, Ranker] = {}
            for path, part in dict(data["rankers"]).items():
                kind = part.get("type", "linear")
                if kind not in _RANKERS:
                    raise ConfigError(f"fusion model ranker type {kind!r} is not one of {sorted(_RANKERS)}")
                rankers[path] = _RANKERS[kind].from_dict(part)
            return cls(str(data["name"]), tuple(data["features"]), rankers, dict(data.get("about") or {}))
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"malformed fusion model: {exc}") from None

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.as_dict(), indent=1) + "\n", encoding="utf-8")


@lru_cache(maxsize=8)
def load_model(spec: str) -> FusionModel:
    """A model by name (``graphmem/retrieval/models/<name>.json``) or by path."""
    path = Path(spec)
    if not path.suffix:
        path = MODELS / f"{spec}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"no fusion model {spec!r} ({path})") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read fusion model {path}: {exc}") from None
    return FusionModel.from_dict(data)


def demote_subjects(order: list[str], subjects: set[str], rank: int) -> list[str]:
    """Keep the question's subjects (the named end of the relationship it asks about: X in "what
    calls X") out of the first ``rank`` places while other candidates remain: a relationship's
    named end is not its answer, whatever the lists' agreement on its text says."""
    if rank <= 0 or not subjects:
        return order
    others = [key for key in order if key not in subjects]
    head = others[:rank]
    return head + [key for key in order if key not in head]


def apply_floor(order: list[str], lists: Mapping[str, Sequence[str]], top: int, rank: int) -> list[str]:
    """Move the first ``top`` of every list into the first ``rank`` places if the order left them out.

    Those that must move take the places just before ``rank`` in the order of their best list rank;
    what they displace moves down by one."""
    if top <= 0 or rank <= 0:
        return order
    required: list[str] = []
    for i in range(top):
        for lst in lists.values():
            if i < len(lst) and lst[i] not in required:
                required.append(lst[i])
    head = order[:rank]
    missing = [key for key in required if key not in head and key in order]
    if not missing:
        return order
    room = rank - len(missing)
    if room < 0:
        missing, room = missing[:rank], 0
    keep = [key for key in head if key in required] + [key for key in head if key not in required]
    new_head = keep[:room] + missing
    rest = [key for key in order if key not in new_head]
    # The head keeps the model's order among its members.
    position = {key: i for i, key in enumerate(order)}
    new_head.sort(key=lambda key: position[key])
    return new_head + rest


def outside_scope_last(order: list[str], excluded: set[str], inside: Collection[str] = (),
                       tests: bool = False, code: bool = False) -> list[str]:
    """``order`` with the code outside the question's scope moved after the rest, in its order:
    code in an ``excluded`` package (one directory: ``cli/help/`` is another package than
    ``cli/``), and, when the question places its answer ``inside`` some paths (directory prefixes
    ending in "/", or files), code elsewhere. Nodes without a path (commits, people) stay, unless
    the question asks for ``tests`` (then whatever is not test code goes after) or for ``code``
    inside some paths ("what calls X in the models module": a commit is in no module)."""
    if not excluded and not inside and not tests:
        return order

    def out(key: str) -> bool:
        path = path_of_key(key)
        if tests and not is_test_key(key):
            return True
        if path is None:
            return code and bool(inside)
        if path.rpartition("/")[0] in excluded:
            return True
        return bool(inside) and not any(path == p or (p.endswith("/") and path.startswith(p)) for p in inside)

    away = {key for key in order if out(key)}
    return [key for key in order if key not in away] + [key for key in order if key in away]


def spread_over_files(order: list[str], places: int, window: int) -> list[str]:
    """``order`` with each of its first ``window`` keys moved ``places`` places down for every key
    of the same file above it: an open question ("how does the runner handle a timeout?") is
    answered by places in the code, and a third method of one class tells less than the first hit
    in another file, while a far weaker hit elsewhere still stays below. Keys without a path
    (commits, people, passages) are each their own place."""
    if places <= 0 or window <= 0:
        return order
    head, tail = order[:window], order[window:]
    seen: dict[str, int] = {}
    moved = []
    for rank, key in enumerate(head):
        place = path_of_key(key) or key
        earlier = seen.get(place, 0)
        seen[place] = earlier + 1
        # On a tie the key that was already there stays ahead of the one moved down to it.
        moved.append((rank + places * earlier, earlier > 0, rank, key))
    return [key for *_, key in sorted(moved)] + tail
