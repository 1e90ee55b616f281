"""The reranker graphmem trains itself: mined data, a (tiny) training run, scoring on every backend.

Uses the real packaged MiniLM weights and the example organisation; training runs for two steps on a
small mined set, enough to check saving, reloading, metadata and backend agreement in about a minute.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from graphmem.ingest import ingest
from graphmem.retrieval import general_reranker
from graphmem.retrieval.indexes import Indexes
from graphmem.retrieval.mining import mine, mine_questions, split_questions
from graphmem.retrieval.rerank import (
    META_FILE,
    CrossEncoderReranker,
    default_reranker_dir,
    load_reranker,
    train_reranker,
)
from graphmem.stores.embedded import EmbeddedStore

os.environ.setdefault("HF_HUB_OFFLINE", "1")
MAX_QUESTIONS = 40
PASSAGES = [
    "def post_entry(self, entry):\n    \"\"\"Book one entry in the ledger.\"\"\"\n    return self.http.post('/v1/entries', entry)",
    "INC-042 Invoice creation failing with HTTP 500 — Root Cause\n\nA change read body['tax_rate'] unconditionally.",
    "ADR-5 Publish ledger entries through Kafka — Decision\n\nBilling publishes ledger entries to Kafka.",
    "payments (team:payments)",
    "x",
]


@pytest.fixture(scope="module")
def org(example_org: tuple[Path, dict], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    repo, facts = example_org
    home = tmp_path_factory.mktemp("rerank-home")
    store = EmbeddedStore(home, "acme")
    ingest(repo, store, cache_dir=home / "cache")
    indexes = Indexes(home / "acme" / "index", cache_dir=home / "cache")
    indexes.sync(store)
    return {"home": home, "store": store, "indexes": indexes, "facts": facts}


@pytest.fixture(scope="module")
def mined(org: dict[str, Any]) -> Any:
    return mine(org["store"], org["indexes"], seed=0, max_questions=MAX_QUESTIONS)


@pytest.fixture(scope="module")
def trained(org: dict[str, Any], mined: Any) -> Any:
    out = default_reranker_dir(org["home"], "acme")
    report = train_reranker(org["store"], org["indexes"], out, mined=mined, max_pairs=8, batch_size=4,
                            max_length=64, measure_speed=False, fit_questions=4, seed=0)
    return report


def test_mined_questions_cover_every_source_and_name_real_nodes(org: dict[str, Any]) -> None:
    questions = mine_questions(org["store"])
    sources = {q.source.split(":")[0] for q in questions}
    assert {"docstring", "commit", "decision", "incident", "relation"} <= sources
    rels = {q.source for q in questions if q.source.startswith("relation:")}
    assert {"relation:CAUSED_BY", "relation:IMPLEMENTS", "relation:OWNS", "relation:CALLS"} <= rels
    nodes = org["store"].get_nodes({g for q in questions for g in q.gold})
    for q in questions:
        assert q.query.strip() and q.gold and q.positives
        assert all(g in nodes for g in q.gold)
        assert not set(q.gold) & set(q.ignore)
    # The ground truth of the example organisation is among what is mined.
    caused = next(q for q in questions if q.query == "Which commit caused INC-042?")
    gold = next(x["gold"] for x in org["facts"]["questions"] if x["question"] == "Which commit caused INC-042?")
    assert set(caused.gold) == set(gold)


def test_mined_triples_are_well_formed_and_deterministic(org: dict[str, Any], mined: Any) -> None:
    assert mined.train and mined.held_out
    by_query = {q.query: q for q in mined.train_questions + mined.eval_questions}
    for t in mined.train + mined.held_out:
        assert t.query in by_query and t.positive.strip() and t.negative.strip()
        q = by_query[t.query]
        assert t.negative_key not in q.gold and t.negative_key not in q.ignore
        assert t.positive != t.negative
    assert any(t.hard for t in mined.train) and any(not t.hard for t in mined.train)
    again = mine(org["store"], org["indexes"], seed=0, max_questions=MAX_QUESTIONS)
    assert again.train == mined.train and again.held_out == mined.held_out
    assert again.eval_questions == mined.eval_questions
    other = mine(org["store"], org["indexes"], seed=1, max_questions=MAX_QUESTIONS)
    assert [q.query for q in other.eval_questions] != [q.query for q in mined.eval_questions]


def test_held_out_questions_are_not_trained_on(org: dict[str, Any], mined: Any) -> None:
    train_queries = {t.query for t in mined.train} | {q.query for q in mined.train_questions}
    held_queries = {t.query for t in mined.held_out} | {q.query for q in mined.eval_questions}
    assert held_queries and not train_queries & held_queries
    # Split by the node a question is about: no group is on both sides.
    assert not {q.group for q in mined.train_questions} & {q.group for q in mined.eval_questions}
    train, held = split_questions(mine_questions(org["store"]), held_out=0.25, seed=0)
    assert 0.1 < len(held) / (len(train) + len(held)) < 0.4


def test_trained_model_is_saved_with_its_evaluation_and_reloads(org: dict[str, Any], trained: Any) -> None:
    out = default_reranker_dir(org["home"], "acme")
    assert trained.out_dir == out and trained.steps == 2 and trained.pairs == 8
    for name in ("config.json", "model.safetensors", "tokenizer.json", META_FILE):
        assert (out / name).is_file(), name
    meta = json.loads((out / META_FILE).read_text())
    assert meta["base_model"] and meta["trained_at"] and meta["data"]["train_triples"] == len(trained_data(meta))
    ev = meta["evaluation"]
    assert ev["questions"] > 0 and isinstance(meta["helps"], bool) and ev["helps"] is meta["helps"]
    for name in ("fused_mrr@10", "rerank_mrr@10", "fused_recall@5", "rerank_recall@5"):
        assert 0.0 <= ev[name] <= 1.0
    assert ev["by_source"] and ev["by_answer_kind"]
    assert meta["prior_weight"] in [float(w) for w in meta["prior_fit"]["mrr@10_by_weight"]]

    loaded = load_reranker(org["home"], "acme")
    assert isinstance(loaded, CrossEncoderReranker)
    assert loaded.helps is meta["helps"] and loaded.prior_weight == meta["prior_weight"]
    assert isinstance(loaded.helps_for(["symbol"]), bool)
    scores = loaded.score("Which commit caused INC-042?", PASSAGES)
    assert len(scores) == len(PASSAGES) and all(isinstance(s, float) and math.isfinite(s) for s in scores)
    assert loaded.score("anything", []) == []


def trained_data(meta: dict[str, Any]) -> range:
    return range(meta["data"]["train_triples"])


def test_onnx_and_torch_scores_agree(org: dict[str, Any], trained: Any) -> None:
    out = default_reranker_dir(org["home"], "acme")
    query = "Which code books ledger entries?"
    texts = PASSAGES + [p * 20 for p in PASSAGES[:2]]  # long ones are truncated alike
    ref = np.array(CrossEncoderReranker(out, backend="torch").logits(query, texts))
    fast = CrossEncoderReranker(out, backend="onnx")
    got = np.array(fast.logits(query, texts))
    assert fast.backend == "onnx" and list(fast.onnx_path().parent.glob("model-*.onnx"))
    assert np.allclose(ref, got, atol=1e-3 * max(1.0, float(np.abs(ref).max())))
    int8 = np.array(CrossEncoderReranker(out, backend="onnx-int8").logits(query, texts))
    assert _spearman(ref, int8) > 0.8
    # Batching and order do not change a text's score.
    small = CrossEncoderReranker(out, backend="onnx", batch_size=2)
    assert np.allclose(np.array(small.logits(query, texts[::-1]))[::-1], got, atol=1e-4)


def test_scoring_from_an_exported_model_does_not_import_torch(org: dict[str, Any], trained: Any) -> None:
    out = default_reranker_dir(org["home"], "acme")
    CrossEncoderReranker(out, backend="onnx-int8").logits("warm", ["up"])  # make sure the export exists
    code = ("import sys; from graphmem.retrieval.rerank import load_reranker; "
            f"r = load_reranker({str(org['home'])!r}, 'acme'); s = r.score('who owns billing', ['payments']); "
            "assert r.backend == 'onnx-int8', r.backend; assert 'torch' not in sys.modules, 'torch imported'; print(s)")
    env = {k: v for k, v in os.environ.items() if k not in ("GRAPHMEM_RERANKER", "GRAPHMEM_RERANKER_BACKEND")}
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, env=env, timeout=120)


def test_load_reranker_without_a_model(tmp_path: Path, org: dict[str, Any], trained: Any,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GRAPHMEM_RERANKER", raising=False)
    monkeypatch.setenv("GRAPHMEM_MODEL_CACHE", str(tmp_path / "models"))  # no general model either
    monkeypatch.setattr(general_reranker, "SHIPPED_ADAPTER", tmp_path / "absent.npz")  # nor a shipped one
    assert load_reranker(tmp_path, "acme") is None
    # GRAPHMEM_RERANKER names a model to use instead (here the one trained above).
    monkeypatch.setenv("GRAPHMEM_RERANKER", str(default_reranker_dir(org["home"], "acme")))
    named = load_reranker(tmp_path, "acme")
    assert named is not None and named.evaluation


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])
