"""Run retrieval modes over a question set and score them (``graphmem eval run``).

Every mode answers every question through the same :class:`graphmem.api.Graphmem` a user would
call; the report holds the SPEC.md metrics per mode, latency percentiles per stage, breakdowns by
question type and hop count, and paired bootstrap intervals for the differences between modes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from eval.metrics import mean, paired_bootstrap, percentile, question_metrics
from graphmem.errors import GraphmemError

METRICS = ("recall@2", "recall@5", "recall@10", "mrr", "ndcg@10", "all_recall@5")
STAGES = ("bm25", "vector", "graph", "fusion", "rerank", "total")


def load_questions(path: str | Path) -> list[dict[str, Any]]:
    """Questions from a SPEC.md JSON Lines file; a malformed line is an error naming it."""
    out = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise GraphmemError(f"{path}:{n}: not JSON ({exc.msg})") from None
        if not isinstance(item, dict) or not isinstance(item.get("question"), str) \
                or not isinstance(item.get("gold"), list) or not item["gold"]:
            raise GraphmemError(f"{path}:{n}: a question needs 'question' (text) and 'gold' (non-empty list of keys)")
        item.setdefault("id", f"q{n}")
        out.append(item)
    if not out:
        raise GraphmemError(f"{path}: no questions")
    return out


def _summary(rows: list[dict[str, Any]]) -> dict[str, float]:
    out = {m: round(mean([r["metrics"][m] for r in rows]), 4) for m in METRICS}
    totals = [r["timings_ms"]["total"] for r in rows]
    out["p50_ms"], out["p95_ms"] = round(percentile(totals, 50), 2), round(percentile(totals, 95), 2)
    return out


def run(gm: Any, questions: Sequence[dict[str, Any]], modes: Sequence[Any], *, k: int = 10,
        now: datetime | None = None, dataset: str = "",
        progress: Callable[[str, int, int], None] | None = None,
        baselines: Mapping[str, Callable[[str], list[str]]] | None = None) -> dict[str, Any]:
    """Answer every question in every mode (and with every plain baseline: name -> question ->
    ranked keys); return the report (see the module docstring)."""
    note = progress or (lambda stage, done, total: None)
    per_mode: dict[str, list[dict[str, Any]]] = {}
    for mode in modes:
        name = mode if isinstance(mode, str) else mode.name  # a preset's name, or a swept recipe
        rows = []
        for i, q in enumerate(questions):
            answer = gm.query(q["question"], mode=mode, k=k, now=now)
            rows.append(_row(q, answer.keys, answer.timings_ms))
            note(name, i + 1, len(questions))
        per_mode[name] = rows
    for name, search in (baselines or {}).items():
        rows = []
        for i, q in enumerate(questions):
            started = time.perf_counter()
            keys = search(q["question"])[:k]
            rows.append(_row(q, keys, {"total": (time.perf_counter() - started) * 1000.0}))
            note(name, i + 1, len(questions))
        per_mode[name] = rows
    report: dict[str, Any] = {"dataset": dataset, "questions": len(questions), "k": k, "modes": {}}
    for mode, rows in per_mode.items():
        summary: dict[str, Any] = _summary(rows)
        summary["stages"] = {s: {"p50": round(percentile([r["timings_ms"].get(s, 0.0) for r in rows], 50), 2),
                                 "p95": round(percentile([r["timings_ms"].get(s, 0.0) for r in rows], 95), 2)}
                             for s in STAGES}
        for field in ("type", "hops"):
            groups: dict[str, list[dict[str, Any]]] = {}
            for r in rows:
                groups.setdefault(str(r[field]), []).append(r)
            summary[f"by_{field}"] = {g: {"n": len(v), **{m: round(mean([r["metrics"][m] for r in v]), 4)
                                                          for m in ("recall@5", "mrr")}}
                                      for g, v in sorted(groups.items())}
        report["modes"][mode] = summary
    names = list(per_mode)
    report["comparisons"] = {
        f"{b} vs {a}": {m: {k2: round(v, 4) for k2, v in paired_bootstrap(
            [r["metrics"][m] for r in per_mode[a]], [r["metrics"][m] for r in per_mode[b]]).items()}
            for m in ("recall@5", "mrr")}
        for i, a in enumerate(names) for b in names[i + 1:]}
    report["per_question"] = {mode: [{"id": r["id"], "recall@5": r["metrics"]["recall@5"], "keys": r["keys"][:10]}
                                     for r in rows] for mode, rows in per_mode.items()}
    return report


def _row(q: dict[str, Any], keys: list[str], timings: dict[str, float]) -> dict[str, Any]:
    return {"id": q["id"], "type": q.get("type", "-"), "hops": q.get("hops"), "keys": keys,
            "metrics": question_metrics(keys, q["gold"]), "timings_ms": timings}


def spec_summary(report: dict[str, Any]) -> dict[str, Any]:
    """The ``eval run --json`` object of SPEC.md."""
    return {"dataset": report["dataset"], "questions": report["questions"],
            "modes": {mode: {m: s[m] for m in (*METRICS, "p50_ms", "p95_ms")} for mode, s in report["modes"].items()}}
