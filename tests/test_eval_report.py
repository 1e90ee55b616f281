"""Evaluation reports: Markdown and PNG output of a real run, and ``compare`` / ``graphmem eval compare``
catching a deliberately degraded run (the graph retriever switched off)."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from eval.report import compare, format_compare, write_markdown, write_plots
from eval.runner import run
from eval.synthetic import generate, questions
from graphmem.api import Graphmem
from graphmem.config import Settings
from graphmem.retrieval.graph import GraphResult
from tests.conftest import NOW, REPO

MODES = ["bm25", "graph", "hybrid"]
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> tuple[dict[str, Any], dict[str, Any], list[dict]]:
    """One ingest of the small synthetic organisation; a normal run and one with graph retrieval sabotaged."""
    out = tmp_path_factory.mktemp("report")
    org = generate(out, seed=0, size="small", now=NOW)
    qs = questions(org, seed=0)
    gm = Graphmem(Settings(store="embedded", home=out / "home"), "report", embedder=embedder, reranker=None)
    try:
        gm.ingest(out / org.name)
        now = datetime.fromisoformat(NOW).replace(tzinfo=timezone.utc)
        good = run(gm, qs, MODES, now=now, dataset="small")
        gm.retriever.graph.retrieve = lambda *a, **k: GraphResult([], {}, {})  # deliberate sabotage of one stage
        bad = run(gm, qs, MODES, now=now, dataset="small")
    finally:
        gm.close()
    return good, bad, qs


def test_markdown_and_plots_of_a_real_run(runs: tuple[dict[str, Any], dict[str, Any], list[dict]],
                                          tmp_path: Path) -> None:
    good, _, qs = runs
    md = write_markdown(good, tmp_path / "report.md").read_text(encoding="utf-8")
    assert f"{len(qs)} questions" in md
    for needle in (*MODES, *{q.get("type", "-") for q in qs}, "R@5", "nDCG@10", "p95", "graph vs bm25",
                   "Recall@5 by hop count", "Latency per stage"):
        assert needle in md, needle
    paths = write_plots(good, tmp_path / "plots")
    assert sorted(p.name for p in paths) == ["latency_by_stage.png", "recall_by_hops.png", "recall_by_mode.png"]
    import matplotlib.image

    for p in paths:
        data = p.read_bytes()
        assert data.startswith(PNG) and len(data) > 5_000, p
        h, w = matplotlib.image.imread(p).shape[:2]
        assert w >= 600 and h >= 400, (p, w, h)


def test_compare_flags_the_degraded_run(runs: tuple[dict[str, Any], dict[str, Any], list[dict]]) -> None:
    good, bad, _ = runs
    same = compare(good, good)
    assert same["regressed"] == [] and all(not e["regressed"] and not e["lost"] for e in same["modes"].values())
    assert "no regression" in format_compare(same)

    result = compare(good, bad)
    assert {"graph", "hybrid"} <= set(result["regressed"]), format_compare(result)
    for mode in ("graph", "hybrid"):
        assert "recall@5" in result["modes"][mode]["regressed"]
        assert result["modes"][mode]["lost"], mode
        assert result["modes"][mode]["metrics"]["recall@5"]["diff"] < 0
    assert "bm25" not in result["regressed"]  # the lexical retriever does not use the graph stage
    text = format_compare(result)
    assert "regressed" in text and result["modes"]["graph"]["lost"][0] in text


def test_eval_compare_command_exit_status(runs: tuple[dict[str, Any], dict[str, Any], list[dict]],
                                          tmp_path: Path) -> None:
    good, bad, _ = runs
    (tmp_path / "good.json").write_text(json.dumps(good), encoding="utf-8")
    (tmp_path / "bad.json").write_text(json.dumps(bad), encoding="utf-8")

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "graphmem.cli", "eval", "compare", *args],
                              check=False, capture_output=True, text=True, timeout=120, cwd=REPO)

    out = cli(str(tmp_path / "good.json"), str(tmp_path / "bad.json"))
    assert out.returncode == 1, out.stderr[-2000:]
    assert "regressed" in out.stdout and "graph" in out.stdout
    out = cli(str(tmp_path / "good.json"), str(tmp_path / "good.json"))
    assert out.returncode == 0, out.stdout + out.stderr[-2000:]
    assert "no regression" in out.stdout
    out = cli(str(tmp_path / "good.json"), str(tmp_path / "bad.json"), "--json", "--tolerance", "0.5")
    assert json.loads(out.stdout)["tolerance"] == 0.5
    assert out.returncode == (1 if json.loads(out.stdout)["regressed"] else 0)


def test_eval_compare_warns_when_the_reports_scored_different_questions(tmp_path: Path) -> None:
    def report(dataset: str, ids: list[str]) -> Path:
        scores = {"recall@2": 0.5, "recall@5": 0.5, "recall@10": 0.5, "mrr": 0.5, "ndcg@10": 0.5,
                  "all_recall@5": 0.5, "p50_ms": 1.0, "p95_ms": 2.0}
        data = {"dataset": dataset, "questions": len(ids), "modes": {"bm25": scores},
                "per_question": {"bm25": [{"id": i, "recall@5": 0.5, "keys": []} for i in ids]}}
        path = tmp_path / f"{dataset}-{len(ids)}-{ids[0]}.json"
        path.write_text(json.dumps(data), encoding="utf-8")
        return path

    def cli(a: Path, b: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "graphmem.cli", "eval", "compare", str(a), str(b)],
                              check=False, capture_output=True, text=True, timeout=120, cwd=REPO)

    musique, wiki = report("musique", ["q1", "q2"]), report("2wiki", ["w1", "w2"])
    out = cli(musique, wiki)
    assert out.returncode == 0 and "no regression" in out.stdout  # still compared, stdout as before
    assert "warning: the datasets differ: A is 'musique', B is '2wiki'" in out.stderr, out.stderr
    assert "the question sets differ: 2 question(s) only in A, 2 only in B" in out.stderr
    other_half = cli(musique, report("musique", ["q3", "q2"]))
    assert "datasets differ" not in other_half.stderr and "question sets differ" in other_half.stderr
    same = cli(musique, report("musique", ["q2", "q1"]))
    assert same.returncode == 0 and "warning" not in same.stderr


def test_exact_mrr_counts_only_the_gold_key_itself() -> None:
    """MRR finds a class through a method inside it (SPEC's rule); mrr_exact only through the class."""
    from eval.metrics import question_metrics

    cls, method = "sym:a.py::Parser", "sym:a.py::Parser.parse"
    assert question_metrics([method, cls], [cls])["mrr"] == 1.0
    assert question_metrics([method, cls], [cls])["mrr_exact"] == 0.5
    assert question_metrics([cls, method], [cls])["mrr_exact"] == 1.0
    assert question_metrics(["sym:b.py::other"], [cls])["mrr_exact"] == 0.0
