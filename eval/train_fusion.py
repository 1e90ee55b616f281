"""Train the learned fusion (``graphmem/retrieval/learned.py``) on development sets only.

``python -m eval.train_fusion [--out graphmem/retrieval/models/fusion-v9.json] [--trees walk] [--cv]``

Development sets: the real-code repositories of the ``dev`` split (``eval/realcode``, built and
ingested first with ``python -m eval.realcode build`` / ``run``), a synthetic organisation with
another seed and size than the regression gate's, the HotpotQA passage sample and the dev half of
the MuSiQue sample (``eval.datasets.split_of``). The real-code test split, the gate's
organisation, MuSiQue's test half and 2WikiMultiHopQA are never read here.

For every question, the candidates of the ``hybrid`` recipe are collected with their features;
a linear ranker is fitted with RankNet's pairwise logistic loss (each gold candidate against each
non-gold candidate of the same question; every question of a set weighing the same, a set's
questions weighing as ``SourceWeights`` says) and an L2 penalty, on standardised features; with
``--trees PATH``, that path's ranker is gradient-boosted trees instead (:func:`fit_trees`). The ``walk`` ranker learns from every question; unless ``--pooled``, questions
ranked over the passage entity layer also get a ``layer`` ranker of their own.

``--cv`` writes no model: it holds out each real-code dev repository in turn and reports how
rankers trained on the rest order its questions (how the penalty and the ranker type were chosen).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import minimize

from graphmem.api import Graphmem
from graphmem.model import key_contains
from graphmem.retrieval.config import preset
from graphmem.retrieval.learned import PATHS, FusionModel, LinearRanker, TreeRanker, feature_names, matrix

OUT = Path(__file__).resolve().parents[1] / "graphmem" / "retrieval" / "models" / "fusion-v9.json"
SCALE_FLOOR = 0.1
L2 = 0.3  # chosen by --cv (see the README: the held-out repositories ranked best at this penalty)
SYNTHETIC_SEED, SYNTHETIC_SIZE, SYNTHETIC_NOW = 1, "default", "2026-06-01"
PASSAGE_SETS = frozenset({"hotpotqa", "musique-dev"})


@dataclass(frozen=True, slots=True)
class SourceWeights:
    """How much one question of each kind of development set weighs in the loss (a real-code
    question weighs 1). The synthetic organisation's questions come from a few templates: at full
    weight its many questions pull the ranker towards their shapes. The passage samples teach the
    entity layer's ranker nearly alone, so they keep their weight. Chosen by ``--cv`` and the
    passage samples' figures (see the README's fusion section)."""

    synthetic: float = 0.5
    passages: float = 1.0

    def __post_init__(self) -> None:
        for name in ("synthetic", "passages"):
            value = getattr(self, name)
            if not 0.0 < value <= 10.0:
                raise ValueError(f"SourceWeights.{name} must be in (0, 10], got {value}")

    def of(self, source: str) -> float:
        if source.startswith("synthetic"):
            return self.synthetic
        return self.passages if source in PASSAGE_SETS else 1.0


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Row:
    """One teaching question: its candidates' features, which are gold, and where it came from."""

    x: np.ndarray
    labels: np.ndarray
    path: str  # the retrieval path whose ranker scores it ("walk" or "layer")
    source: str  # the development set (a real-code repository's name, "synthetic-dev", ...)
    type: str  # the question's type, when the set gives one


def question_rows(gm: Graphmem, questions: list[dict[str, Any]], now: Any = None, source: str = ""
                  ) -> Iterator[Row]:
    """The features and labels of each question's hybrid candidates; questions without a gold
    candidate or without a non-gold one teach nothing and are left out."""
    spec = preset("hybrid")
    retriever = gm.retriever
    for q in questions:
        cands = retriever.candidates(q["question"], spec, now=now)
        qs, signals = cands.signals()
        keys = sorted(signals)
        if not keys:
            continue
        labels = np.array([any(key_contains(g, key) for g in q["gold"]) for key in keys], dtype=bool)
        if labels.all() or not labels.any():
            continue
        yield Row(matrix(qs, keys, signals), labels, "layer" if qs.layer else "walk", source, str(q.get("type", "")))


def realcode_dev(home: Path) -> Iterator[tuple[str, Graphmem, list[dict[str, Any]], Any]]:
    from eval.realcode.cli import ingested

    for manifest, gm, qs in ingested("dev", None, home):
        yield manifest.name, gm, qs, None


def synthetic_dev(work: Path) -> Iterator[tuple[str, Graphmem, list[dict[str, Any]], Any]]:
    from eval.synthetic import generate, questions

    from graphmem.model import parse_day

    import shutil

    shutil.rmtree(work / "org", ignore_errors=True)
    # Deterministic: the same files and commits every time, so the ingest below is incremental.
    org = generate(work / "org", seed=SYNTHETIC_SEED, size=SYNTHETIC_SIZE, now=SYNTHETIC_NOW)
    corpus = next(p for p in (work / "org").iterdir() if p.is_dir())
    gm = Graphmem.open("synthetic-dev", home=work / "home")
    gm.ingest(corpus)
    yield "synthetic-dev", gm, questions(org, seed=SYNTHETIC_SEED), parse_day(SYNTHETIC_NOW, "now")


def hotpot_dev(work: Path) -> Iterator[tuple[str, Graphmem, list[dict[str, Any]], Any]]:
    from eval import datasets as public

    ds = public.load("hotpotqa", public.DEFAULT_ROOT)
    gm = Graphmem.open("hotpotqa-rules", home=work / "home")
    public.import_corpus(gm, ds, graph="rules", root=public.DEFAULT_ROOT)
    yield "hotpotqa", gm, ds.questions, None


def musique_dev(work: Path) -> Iterator[tuple[str, Graphmem, list[dict[str, Any]], Any]]:
    """The dev half of the MuSiQue sample (``eval.datasets.split_of``) over its rule graph."""
    from eval import datasets as public

    ds = public.load("musique", public.DEFAULT_ROOT)
    gm = Graphmem.open("musique-rules", home=work / "home")
    public.import_corpus(gm, ds, graph="rules", root=public.DEFAULT_ROOT)
    yield "musique-dev", gm, public.split_questions(ds.questions, "dev"), None


def kind_columns() -> list[int]:
    """Columns of the features that say only what kind of node a candidate is."""
    return [i for i, name in enumerate(feature_names()) if name.startswith("is_")]


def fit(groups: list[tuple[np.ndarray, np.ndarray]], l2: float = L2, floored: Sequence[int] = (),
        weights: Sequence[float] | None = None) -> LinearRanker:
    """Standardise, then minimise the pairwise logistic loss (mean over questions, each question
    weighing its entry of ``weights``, 1 without them) plus ``l2 |w|^2``.

    The ``floored`` columns keep ``SCALE_FLOOR`` under their scale: a node kind one path's
    questions almost never reach, standardised by its tiny deviation, would outweigh every other
    feature whenever such a node appears. (Rare evidence about the question, such as a passage
    reached as the next hop, is not floored: its rarity is what it says.)"""
    allx = np.vstack([x for x, _ in groups]).astype(np.float64)
    mean = allx.mean(axis=0)
    scale = allx.std(axis=0)
    scale[scale < 1e-6] = 1.0
    if len(floored):
        scale[list(floored)] = np.maximum(scale[list(floored)], SCALE_FLOOR)
    question_weights = [1.0] * len(groups) if weights is None else list(weights)
    diffs, pair_weights = [], []
    for (x, y), weight in zip(groups, question_weights):
        z = (x - mean) / scale
        pos, neg = z[y], z[~y]
        d = (pos[:, None, :] - neg[None, :, :]).reshape(-1, z.shape[1])
        diffs.append(d)
        pair_weights.append(np.full(len(d), weight / len(d)))
    d = np.vstack(diffs)
    w_pair = np.concatenate(pair_weights) / sum(question_weights)

    def loss(w: np.ndarray) -> tuple[float, np.ndarray]:
        m = d @ w
        value = float(np.sum(w_pair * np.logaddexp(0.0, -m))) + l2 * float(w @ w) / len(w)
        sig = 1.0 / (1.0 + np.exp(np.clip(m, -50, 50)))
        grad = -(d.T @ (w_pair * sig)) + 2 * l2 * w / len(w)
        return value, grad

    res = minimize(loss, np.zeros(d.shape[1]), jac=True, method="L-BFGS-B", options={"maxiter": 500})
    return LinearRanker(mean, scale, res.x)


@dataclass(frozen=True, slots=True)
class TreeSettings:
    """Gradient boosting of the tree rankers (chosen by cross-validation over the real-code dev
    repositories, two held out at a time: see the eval report of the model that uses them)."""

    learning_rate: float = 0.05
    iterations: int = 300
    leaves: int = 7
    min_leaf: int = 20
    l2: float = 1.0


def fit_trees(groups: list[tuple[np.ndarray, np.ndarray]], settings: TreeSettings = TreeSettings(),
              weights: Sequence[float] | None = None) -> TreeRanker:
    """Gradient-boosted trees on each candidate's gold label (logistic loss), every question
    weighing its entry of ``weights`` (1 without them) whatever its number of candidates; exported
    to a :class:`TreeRanker`."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    x = np.vstack([x for x, _ in groups]).astype(np.float64)
    y = np.concatenate([y for _, y in groups])
    # Each question's candidates share a weight of one question (times the number of questions, so
    # min_leaf still counts candidates of typical weight).
    question_weights = [1.0] * len(groups) if weights is None else list(weights)
    weight = np.concatenate([np.full(len(labels), w * len(groups) / len(labels))
                             for (_, labels), w in zip(groups, question_weights)])
    clf = HistGradientBoostingClassifier(learning_rate=settings.learning_rate, max_iter=settings.iterations,
                                         max_leaf_nodes=settings.leaves, min_samples_leaf=settings.min_leaf,
                                         l2_regularization=settings.l2, early_stopping=False, random_state=0)
    clf.fit(x, y, sample_weight=weight)
    return export_trees(clf)


def export_trees(clf: Any) -> TreeRanker:
    """A fitted binary ``HistGradientBoostingClassifier`` as a :class:`TreeRanker` whose score is its
    ``decision_function`` (numeric features without missing values)."""
    feature, threshold, left, right, value, roots = [], [], [], [], [], []
    depth = 0
    for (predictor,) in clf._predictors:
        nodes = predictor.nodes
        offset = len(feature)
        roots.append(offset)
        for i, node in enumerate(nodes):
            here = offset + i
            leaf = bool(node["is_leaf"])
            feature.append(0 if leaf else int(node["feature_idx"]))
            threshold.append(0.0 if leaf else float(node["num_threshold"]))
            left.append(here if leaf else offset + int(node["left"]))
            right.append(here if leaf else offset + int(node["right"]))
            value.append(float(node["value"]) if leaf else 0.0)
            depth = max(depth, int(node["depth"]))
    return TreeRanker(float(np.ravel(clf._baseline_prediction)[0]), np.asarray(feature, dtype=np.int32),
                      np.asarray(threshold), np.asarray(left, dtype=np.int32), np.asarray(right, dtype=np.int32),
                      np.asarray(value), np.asarray(roots, dtype=np.int32), depth)


def fit_rankers(rows: list[Row], trees: set[str], l2: float, per_path: bool = True,
                weights: SourceWeights = SourceWeights()) -> dict[str, LinearRanker | TreeRanker]:
    """A ranker per retrieval path. The walk's learns from every set (it also serves passage
    questions that link no entity); the entity layer's, when there is one, from the passage
    questions alone."""
    rankers: dict[str, LinearRanker | TreeRanker] = {}
    for path in PATHS if per_path else ("walk",):
        taught = [r for r in rows if path == "walk" or r.path == path]
        if taught:
            part = [(r.x, r.labels) for r in taught]
            question_weights = [weights.of(r.source) for r in taught]
            rankers[path] = (fit_trees(part, weights=question_weights) if path in trees
                             else fit(part, l2, kind_columns(), question_weights))
    return rankers


def first_gold(scores: np.ndarray, labels: np.ndarray) -> int | None:
    """The 1-based place of the first gold candidate when candidates are sorted by ``scores``."""
    order = np.argsort(-scores, kind="stable")
    hits = np.flatnonzero(labels[order])
    return int(hits[0]) + 1 if len(hits) else None


def cross_validate(rows: list[Row], held: list[str], trees: set[str], l2: float, per_path: bool = True,
                   weights: SourceWeights = SourceWeights()) -> str:
    """Leave one source out: for each of ``held``, fit on every other row and order that source's
    questions by the fitted rankers. Reports, per question type and overall, the share of questions
    with a gold candidate in the first 5 and the mean reciprocal rank of the first (0 below 10).
    The fused list's floor (``FusionConfig.floor_top``) and the demotion of subjects are not
    applied, so the figures compare rankers rather than predict ``hybrid``'s."""
    places: dict[str, list[int | None]] = {}
    for source in held:
        rankers = fit_rankers([r for r in rows if r.source != source], trees, l2, per_path, weights)
        for r in rows:
            if r.source == source:
                place = first_gold(np.asarray(rankers.get(r.path, rankers["walk"]).score(r.x)), r.labels)
                places.setdefault(r.type or "?", []).append(place)
                places.setdefault("all", []).append(place)
    lines = [f"held out: {', '.join(held)}; l2 {l2}; trees: {', '.join(sorted(trees)) or 'none'}; "
             f"question weights: synthetic {weights.synthetic}, passages {weights.passages}",
             f"  {'type':16s} {'n':>4s} {'gold@5':>7s} {'MRR@10':>7s}"]
    for qtype, found in sorted(places.items(), key=lambda item: (item[0] != "all", item[0])):
        at5 = sum(1 for p in found if p is not None and p <= 5) / len(found)
        mrr = sum(1.0 / p for p in found if p is not None and p <= 10) / len(found)
        lines.append(f"  {qtype:16s} {len(found):4d} {at5:7.3f} {mrr:7.3f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.train_fusion")
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument("--home", default=None, help="graphmem home of the real-code repositories")
    parser.add_argument("--sets", default="realcode,synthetic,hotpotqa,musique")
    parser.add_argument("--l2", type=float, default=L2)
    parser.add_argument("--pooled", action="store_true",
                        help="one ranker for both retrieval paths (no separate entity-layer ranker)")
    parser.add_argument("--trees", default="",
                        help="paths whose ranker is gradient-boosted trees rather than linear (e.g. walk)")
    defaults = SourceWeights()
    parser.add_argument("--synthetic-weight", type=float, default=defaults.synthetic,
                        help="weight of one synthetic-organisation question (a real-code question weighs 1)")
    parser.add_argument("--passage-weight", type=float, default=defaults.passages,
                        help="weight of one question of the passage samples (HotpotQA, MuSiQue)")
    parser.add_argument("--cv", action="store_true",
                        help="write no model: hold out each real-code repository in turn, train on the rest, "
                             "and report how the rankers order the held-out questions")
    args = parser.parse_args(argv)
    try:
        weights = SourceWeights(args.synthetic_weight, args.passage_weight)
    except ValueError as exc:
        parser.error(str(exc))
    from eval.realcode import build as builder

    home = Path(args.home) if args.home else builder.home() / "graphmem-home"
    sets = set(args.sets.split(","))
    rows: list[Row] = []
    counts: dict[str, int] = {}
    # Kept between runs: the synthetic organisation and HotpotQA are ingested once, then incrementally.
    work = builder.home() / "fusion-dev"
    work.mkdir(parents=True, exist_ok=True)
    sources = []
    if "realcode" in sets:
        sources.append(realcode_dev(home))
    if "synthetic" in sets:
        sources.append(synthetic_dev(work))
    if "hotpotqa" in sets:
        sources.append(hotpot_dev(work))
    if "musique" in sets:
        sources.append(musique_dev(work))
    for source in sources:
        for name, gm, qs, now in source:
            started = time.perf_counter()
            try:
                taught = list(question_rows(gm, qs, now, name))
            finally:
                gm.close()
            rows += taught
            counts[name] = len(taught)
            _log(f"{name}: {len(taught)} of {len(qs)} questions teach ({time.perf_counter() - started:.0f} s)")
    trees = {p for p in args.trees.split(",") if p}
    if trees - set(PATHS):
        parser.error(f"--trees: paths are {', '.join(PATHS)}")
    per_path = not args.pooled
    if args.cv:
        dev_names = {m.name for m in builder.manifests() if m.split == "dev"}
        held = sorted({r.source for r in rows if r.source in dev_names})
        print(cross_validate(rows, held, trees, args.l2, per_path, weights))
        return 0
    rankers = fit_rankers(rows, trees, args.l2, per_path, weights)
    for path in rankers:
        _log(f"{path}: {sum(1 for r in rows if path == 'walk' or r.path == path)} questions")
    from graphmem.retrieval.embed import resolve_model

    # The vector list's features depend on the embedder: a model is for the embedder it was trained with.
    about: dict[str, Any] = {"trained_on": counts, "loss": "pairwise logistic (RankNet)", "l2": args.l2,
                             "question_weights": asdict(weights),
                             "pooled": not per_path, "embedder": resolve_model().name}
    if trees:
        about.update(trees=sorted(trees), tree_loss="pointwise logistic, questions weighted alike",
                     tree_settings=asdict(TreeSettings()))
    model = FusionModel(Path(args.out).stem, tuple(feature_names()), rankers, about)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    model.save(args.out)
    _log(f"wrote {args.out}: {len(rows)} questions")
    for path, ranker in rankers.items():
        if not isinstance(ranker, LinearRanker):
            continue
        top = sorted(zip(feature_names(), ranker.weights), key=lambda p: -abs(p[1]))[:8]
        _log(f"{path}: " + ", ".join(f"{name} {w:+.2f}" for name, w in top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
