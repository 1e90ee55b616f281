"""Regression gate: the small synthetic organisation, every mode, on both stores, against the
Recall@5 baselines kept in ``eval/baselines.json`` (raised deliberately, in their own commit)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from eval.runner import load_questions, run
from eval.synthetic import generate, questions, write_questions
from graphmem.api import Graphmem
from graphmem.config import Settings
from tests.conftest import NOW, REPO

BASELINES = json.loads((REPO / "eval" / "baselines.json").read_text())
TOLERANCE = 0.02  # int8 vectors differ in the last digits across CPUs


@pytest.fixture(scope="module")
def small_org(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    out = tmp_path_factory.mktemp("gate")
    org = generate(out, seed=BASELINES["seed"], size=BASELINES["size"], now=NOW)
    path = out / "questions.jsonl"
    write_questions(path, questions(org, seed=BASELINES["seed"]))
    return out / org.name, path


@pytest.fixture(params=["embedded", "neo4j"], scope="module")
def gate_store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if request.param == "embedded":
        yield None
        return
    from graphmem.stores.neo4j import Neo4jStore

    store = Neo4jStore(request.getfixturevalue("neo4j_schema"), f"gate-{uuid.uuid4().hex[:8]}",
                       database=os.environ.get("NEO4J_DATABASE"))
    yield store
    store.drop_project()


def test_no_mode_falls_below_its_baseline(small_org: tuple[Path, Path], gate_store: Any, embedder: Any,
                                          tmp_path: Path) -> None:
    repo, qfile = small_org
    settings = Settings(store="neo4j" if gate_store is not None else "embedded", home=tmp_path)
    gm = Graphmem(settings, "gate", store=gate_store, embedder=embedder, reranker=None)
    gm.ingest(repo)
    report = run(gm, load_questions(qfile), list(BASELINES["recall@5"]),
                 now=datetime.fromisoformat(NOW).replace(tzinfo=timezone.utc))
    got = {mode: report["modes"][mode]["recall@5"] for mode in BASELINES["recall@5"]}
    low = {mode: (got[mode], floor) for mode, floor in BASELINES["recall@5"].items() if got[mode] < floor - TOLERANCE}
    assert not low, f"Recall@5 below baseline (got, baseline): {low}"
    assert got["hybrid"] >= 1.5 * got["vector"]


def test_eval_run_command_prints_the_spec_summary(small_org: tuple[Path, Path], tmp_path: Path) -> None:
    repo, qfile = small_org
    out = subprocess.run([sys.executable, "-m", "graphmem.cli", "--home", str(tmp_path / "home"), "eval", "run",
                          "--dataset", str(qfile), "--corpus", str(repo), "--modes", "bm25,graph",
                          "--now", NOW, "--out", str(tmp_path / "report"), "--json"],
                         capture_output=True, text=True, timeout=900, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    summary = json.loads(out.stdout)
    assert summary["questions"] == len(load_questions(qfile)) and set(summary["modes"]) == {"bm25", "graph"}
    assert set(summary["modes"]["graph"]) == {"recall@2", "recall@5", "recall@10", "mrr", "ndcg@10",
                                              "all_recall@5", "p50_ms", "p95_ms"}
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    assert report["comparisons"]["graph vs bm25"]["recall@5"]["low"] <= report["comparisons"]["graph vs bm25"][
        "recall@5"]["diff"] <= report["comparisons"]["graph vs bm25"]["recall@5"]["high"]
    assert report["modes"]["graph"]["by_type"] and report["modes"]["graph"]["by_hops"]


def test_hybrid_beats_each_single_retriever_on_the_musique_sample(embedder: Any, tmp_path: Path) -> None:
    from eval.datasets import import_corpus, load
    from tests.conftest import require

    data = REPO.parent / "shared" / "datasets"
    require(data.is_dir(), f"shared datasets not found at {data}")
    ds = load("musique", data)
    gm = Graphmem(Settings(store="embedded", home=tmp_path), "musique", embedder=embedder, reranker=None)
    import_corpus(gm, ds, triples=True, root=data)
    report = run(gm, ds.questions, ["bm25", "vector", "hybrid"], dataset="musique")
    got = {mode: report["modes"][mode]["recall@5"] for mode in ("bm25", "vector", "hybrid")}
    assert got["hybrid"] >= max(got["bm25"], got["vector"]), got
    assert got["hybrid"] >= BASELINES["musique"]["hybrid_recall@5"] - TOLERANCE, got
    gm.close()
