"""Regression gate on real code: two small repositories of the real-code set (one from the
development split, one from the test split), assembled from their registry releases, every single
retriever against ``hybrid``. ``hybrid`` may not fall below its own best single retriever by more
than ``TOLERANCE`` Recall@5."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from eval.realcode import build as builder
from eval.realcode.cli import questions_for
from eval.runner import run
from graphmem.api import Graphmem
from graphmem.config import Settings

GATE_REPOS = ("query-core", "h11")  # typescript (dev), python (test)
SINGLE = ("bm25", "vector", "graph")
TOLERANCE = 0.02


@pytest.mark.slow
@pytest.mark.parametrize("name", GATE_REPOS)
def test_hybrid_holds_against_its_single_retrievers_on_real_code(name: str, embedder: Any, tmp_path: Path) -> None:
    manifest = next(m for m in builder.manifests([name]))
    builder.assemble(manifest, tmp_path, archives=builder.home() / "archives")
    questions = questions_for(name)
    assert len(questions) >= 40
    gm = Graphmem(Settings(store="embedded", home=tmp_path / "home"), name, embedder=embedder, reranker=None)
    try:
        gm.ingest(tmp_path / "repos" / name)
        report = run(gm, questions, [*SINGLE, "hybrid"], dataset=name)
    finally:
        gm.close()
    got = {mode: report["modes"][mode]["recall@5"] for mode in (*SINGLE, "hybrid")}
    print(f"\n{name}: " + ", ".join(f"{mode} {v:.3f}" for mode, v in got.items()))
    assert got["hybrid"] >= max(got[m] for m in SINGLE) - TOLERANCE, got
