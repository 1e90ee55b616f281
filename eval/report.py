"""Human-readable output of an evaluation report (``eval.runner.run``): Markdown, PNG plots, and the
comparison of two reports (``graphmem eval compare``) that flags regressions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eval.runner import METRICS, STAGES

LABELS = {"recall@2": "R@2", "recall@5": "R@5", "recall@10": "R@10", "mrr": "MRR", "ndcg@10": "nDCG@10",
          "all_recall@5": "allR@5", "p50_ms": "p50 ms", "p95_ms": "p95 ms"}
LATENCY_SLACK = (1.2, 5.0)  # p95 regresses when more than 20 % AND more than 5 ms slower


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    align = ["---"] + ["---:"] * (len(header) - 1)
    return ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |",
            *("| " + " | ".join(r) + " |" for r in rows)]


def _hops_order(key: str) -> tuple[int, float | str]:
    try:
        return (0, float(key))
    except ValueError:
        return (1, key)


def _groups(report: dict[str, Any], field: str) -> list[str]:
    keys = {g for s in report["modes"].values() for g in s.get(field, {})}
    return sorted(keys, key=_hops_order) if field == "by_hops" else sorted(keys)


def write_markdown(report: dict[str, Any], path: str | Path) -> Path:
    """Write the report as Markdown: summary table, breakdowns, stage latency and paired comparisons."""
    modes = report["modes"]
    lines = [f"# Retrieval evaluation: {report.get('dataset') or '(unnamed dataset)'}", "",
             f"{report['questions']} questions, k = {report.get('k', 10)}, modes: {', '.join(modes)}.", "",
             "## Summary", ""]
    cols = [*METRICS, "p50_ms", "p95_ms"]
    lines += _table(["mode", *(LABELS[c] for c in cols)],
                    [[m, *(f"{s[c]:.3f}" if c in METRICS else f"{s[c]:.1f}" for c in cols)] for m, s in modes.items()])
    for field, title, label in (("by_type", "Recall@5 by question type", "type"),
                                ("by_hops", "Recall@5 by hop count", "hops")):
        lines += ["", f"## {title}", ""]
        rows = []
        for g in _groups(report, field):
            n = next((s[field][g]["n"] for s in modes.values() if g in s.get(field, {})), 0)
            rows.append([g, str(n), *(f"{s[field][g]['recall@5']:.3f}" if g in s.get(field, {}) else "-"
                                      for s in modes.values())])
        lines += _table([label, "n", *modes], rows)
    lines += ["", "## Latency per stage (ms, p50 / p95)", ""]
    lines += _table(["stage", *modes], [[st, *(f"{s['stages'][st]['p50']:.1f} / {s['stages'][st]['p95']:.1f}"
                                              if st in s.get("stages", {}) else "-" for s in modes.values())]
                                        for st in STAGES])
    comparisons = report.get("comparisons") or {}
    if comparisons:
        lines += ["", "## Paired comparisons (difference B − A, 95 % bootstrap interval)", "",
                  "**bold** marks a difference whose interval excludes 0.", ""]
        rows = []
        for pair, per_metric in comparisons.items():
            for metric, c in per_metric.items():
                sig = c["low"] > 0 or c["high"] < 0
                diff = f"{c['diff']:+.3f}"
                rows.append([pair, LABELS.get(metric, metric), f"**{diff}**" if sig else diff,
                             f"[{c['low']:+.3f}, {c['high']:+.3f}]", "yes" if sig else "no"])
        lines += _table(["B vs A", "metric", "diff", "95 % interval", "excludes 0"], rows)
    path = Path(path)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_plots(report: dict[str, Any], out_dir: str | Path) -> list[Path]:
    """Write ``recall_by_mode.png``, ``recall_by_hops.png`` and ``latency_by_stage.png``; return their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    modes = list(report["modes"])
    title = f"{report.get('dataset') or 'evaluation'} ({report['questions']} questions)"
    paths: list[Path] = []

    def grouped(ax: Any, groups: list[str], series: dict[str, list[float]], *, fmt: str) -> list[Any]:
        width = 0.8 / max(len(series), 1)
        x = np.arange(len(groups))
        bars = []
        for i, (name, values) in enumerate(series.items()):
            b = ax.bar(x + (i - (len(series) - 1) / 2) * width, values, width, label=name)
            shown = [format(v, fmt) if float(format(v, fmt)) > 0 else "" for v in values]  # no labels on empty bars
            ax.bar_label(b, labels=shown, fontsize=7, padding=1)
            bars.append(b)
        ax.set_xticks(x, groups)
        ax.grid(axis="y", alpha=0.3)
        ax.set_axisbelow(True)
        return bars

    def save(fig: Any, name: str) -> None:
        fig.tight_layout()
        fig.savefig(out / name, dpi=120)
        plt.close(fig)
        paths.append(out / name)

    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(modes) + 2), 4.5))
    grouped(ax, modes, {LABELS[m]: [report["modes"][mode][m] for mode in modes]
                        for m in ("recall@2", "recall@5", "recall@10")}, fmt=".2f")
    ax.set(ylim=(0, 1.2), xlabel="mode", ylabel="recall", title=f"Recall@k by mode — {title}")
    ax.legend(title="metric", loc="upper center", ncols=3)
    save(fig, "recall_by_mode.png")

    hops = _groups(report, "by_hops")
    fig, ax = plt.subplots(figsize=(min(12.0, max(6.0, 0.7 * len(hops) * len(modes) + 2)), 4.5))
    grouped(ax, hops, {mode: [report["modes"][mode].get("by_hops", {}).get(h, {}).get("recall@5", 0.0) for h in hops]
                       for mode in modes}, fmt=".2f")
    ns = [next((s["by_hops"][h]["n"] for s in report["modes"].values() if h in s.get("by_hops", {})), 0) for h in hops]
    ax.set_xticks(range(len(hops)), [f"{h} hop{'' if h == '1' else 's'}\n(n={n})" for h, n in zip(hops, ns)])
    ax.set(ylim=(0, 1.25), xlabel="hop count of the question", ylabel="Recall@5",
           title=f"Recall@5 by hop count — {title}")
    ax.legend(title="mode", loc="upper center", ncols=min(len(modes), 6))
    save(fig, "recall_by_hops.png")

    stages = [s for s in STAGES if s != "total"
              and any(report["modes"][m].get("stages", {}).get(s, {}).get("p95", 0.0) > 0 for m in modes)] or ["total"]
    fig, ax = plt.subplots(figsize=(min(12.0, max(6.0, 0.5 * len(stages) * len(modes) + 2)), 4.5))
    p50 = {m: [report["modes"][m]["stages"].get(s, {}).get("p50", 0.0) for s in stages] for m in modes}
    bars = grouped(ax, stages, p50, fmt=".1f")
    for mode, b in zip(modes, bars):
        p95 = [report["modes"][mode]["stages"].get(s, {}).get("p95", 0.0) for s in stages]
        ax.scatter([r.get_x() + r.get_width() / 2 for r in b], p95, marker="_", s=200, color="black", zorder=3)
    ax.scatter([], [], marker="_", s=200, color="black", label="p95")
    ax.set(xlabel="stage", ylabel="latency (ms)", title=f"Latency per stage: bars p50, ticks p95 — {title}")
    ax.set_ylim(0, 1.3 * max([*ax.get_ylim()[1:], 1.0]))
    ax.legend(title="mode", loc="upper center", ncols=len(modes) + 1)
    save(fig, "latency_by_stage.png")
    return paths


def compare(a: dict[str, Any], b: dict[str, Any], *, tolerance: float = 0.01) -> dict[str, Any]:
    """Compare report B against baseline A for the modes both carry.

    A quality metric regresses when B is lower than A by more than ``tolerance``; p95 latency when B
    is more than 20 % and more than 5 ms slower (improvements symmetrically). With per-question
    results in both, ``lost`` lists the questions with a gold key in the top 5 in A and none in B.
    """
    ratio, slack = LATENCY_SLACK
    out: dict[str, Any] = {"tolerance": tolerance, "dataset": [a.get("dataset"), b.get("dataset")],
                           "questions": [a.get("questions"), b.get("questions")], "modes": {},
                           "only_in_a": [m for m in a["modes"] if m not in b["modes"]],
                           "only_in_b": [m for m in b["modes"] if m not in a["modes"]]}
    for mode in (m for m in a["modes"] if m in b["modes"]):
        sa, sb = a["modes"][mode], b["modes"][mode]
        entry: dict[str, Any] = {"metrics": {}, "regressed": [], "improved": []}
        for metric in (*METRICS, "p50_ms", "p95_ms"):
            if metric not in sa or metric not in sb:
                continue
            va, vb = float(sa[metric]), float(sb[metric])
            entry["metrics"][metric] = {"a": va, "b": vb, "diff": round(vb - va, 4)}
            if metric in METRICS:
                worse, better = vb < va - tolerance, vb > va + tolerance
            elif metric == "p95_ms":
                worse = vb > va * ratio and vb - va > slack
                better = va > vb * ratio and va - vb > slack
            else:
                continue
            if worse:
                entry["regressed"].append(metric)
            elif better:
                entry["improved"].append(metric)
        qa, qb = (a.get("per_question") or {}).get(mode), (b.get("per_question") or {}).get(mode)
        if qa is not None and qb is not None:
            before = {q["id"]: q["recall@5"] for q in qa}
            after = {q["id"]: q["recall@5"] for q in qb}
            common = [i for i in before if i in after]
            entry["lost"] = [i for i in common if before[i] > 0 and after[i] == 0]
            entry["gained"] = [i for i in common if before[i] == 0 and after[i] > 0]
        out["modes"][mode] = entry
    out["regressed"] = sorted(m for m, e in out["modes"].items() if e["regressed"])
    return out


def _question_ids(report: dict[str, Any]) -> set[str] | None:
    """The ids of the questions a report scored (from its per-question results), or ``None``."""
    per_mode = report.get("per_question") or {}
    rows = next(iter(per_mode.values()), None) if isinstance(per_mode, dict) else None
    return {str(q.get("id")) for q in rows} if isinstance(rows, list) else None


def mismatch(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Why reports A and B may not measure the same thing: another dataset (or split), or another
    set of questions. Empty when they agree; :func:`compare` compares them either way."""
    reasons = []
    if a.get("dataset") != b.get("dataset"):
        reasons.append(f"the datasets differ: A is {a.get('dataset')!r}, B is {b.get('dataset')!r}")
    ids_a, ids_b = _question_ids(a), _question_ids(b)
    if ids_a is not None and ids_b is not None:
        if ids_a != ids_b:
            reasons.append(f"the question sets differ: {len(ids_a - ids_b)} question(s) only in A, "
                           f"{len(ids_b - ids_a)} only in B")
    elif a.get("questions") != b.get("questions"):
        reasons.append(f"the question counts differ: {a.get('questions')} in A, {b.get('questions')} in B")
    return reasons


def format_compare(result: dict[str, Any], *, max_ids: int = 12) -> str:
    """A compact text table of :func:`compare`'s result, one row per mode and metric."""
    da, db = result.get("dataset", [None, None])
    na, nb = result.get("questions", [None, None])
    lines = [f"A: {da} ({na} questions)   B: {db} ({nb} questions)   tolerance {result['tolerance']}",
             f"{'mode':<14}{'metric':<10}{'A':>9}{'B':>9}{'B-A':>9}"]
    for mode, e in result["modes"].items():
        for metric, v in e["metrics"].items():
            flag = "regressed" if metric in e["regressed"] else "improved" if metric in e["improved"] else ""
            num = ".1f" if metric.endswith("_ms") else ".3f"
            lines.append(f"{mode:<14}{LABELS.get(metric, metric):<10}{v['a']:>9{num}}{v['b']:>9{num}}"
                         f"{v['diff']:>+9{num}}  {flag}".rstrip())
    for mode, e in result["modes"].items():
        for what in ("lost", "gained"):
            ids = e.get(what) or []
            if ids:
                more = f" (+{len(ids) - max_ids} more)" if len(ids) > max_ids else ""
                lines.append(f"{mode}: {what} {len(ids)} question(s) at recall@5: {', '.join(ids[:max_ids])}{more}")
    for side in ("a", "b"):
        if result.get(f"only_in_{side}"):
            lines.append(f"only in {side.upper()}: {', '.join(result[f'only_in_{side}'])}")
    if result["regressed"]:
        lines.append("regressed: " + "; ".join(f"{m} ({', '.join(result['modes'][m]['regressed'])})"
                                               for m in result["regressed"]))
    else:
        lines.append("no regression")
    return "\n".join(lines)
