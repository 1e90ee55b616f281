"""A first question in a new process: `graphmem query` run again and again, each in a fresh process.

Each run starts the command line as a user would (a new interpreter: imports, the graph, the
indexes, the model sessions, the question, the output) and measures the whole process: wall time,
CPU time (user + system, all threads) and peak memory, with the stage timings it prints. The
questions take turns, so a slow minute of the machine touches each alike.

    python bench/bench_cold_query.py --home ~/.graphmem --project pytest \\
        "Which function parses the config file?" "Which functions call getoption?"
    python bench/bench_cold_query.py --home H --project P --runs 20 --json /tmp/cold.json "..."

The operating system's page cache is left as it is: the first run of a series may read the model
and index files from disk, the others from memory (the `min` column shows the warm-cache floor).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def one_run(home: Path, project: str, question: str, mode: str) -> dict[str, Any]:
    """Run one `graphmem query --json` in a new process; its wall, CPU and memory and its stage timings."""
    cmd = [sys.executable, "-m", "graphmem.cli", "--home", str(home), "--project", project, "query",
           "--no-bootstrap", "--mode", mode, "--json", question]
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate()
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"graphmem query failed ({proc.returncode}): {err.decode(errors='replace')[-2000:]}")
    answer = json.loads(out)
    return {"wall_s": wall, "timings_ms": answer.get("timings_ms", {}), "results": [r["key"] for r in answer["results"]]}


def measured(home: Path, project: str, question: str, mode: str) -> dict[str, Any]:
    """``one_run`` with the CPU time and peak memory of its process."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    run = one_run(home, project, question, mode)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    run["cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    # The largest of any child so far (KiB on Linux): per question, the maximum over its runs is
    # bounded by the largest process of the whole series.
    run["max_rss_mib"] = after.ru_maxrss / 1024
    return run


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    walls = sorted(r["wall_s"] for r in runs)
    p95 = walls[min(len(walls) - 1, round(0.95 * (len(walls) - 1)))]
    stages = sorted({name for r in runs for name in r["timings_ms"]})
    return {
        "runs": len(runs), "wall_median_s": statistics.median(walls), "wall_p95_s": p95, "wall_min_s": walls[0],
        "cpu_median_s": statistics.median(r["cpu_s"] for r in runs),
        "max_rss_mib": max(r["max_rss_mib"] for r in runs),
        "stages_median_ms": {s: statistics.median(r["timings_ms"].get(s, 0.0) for r in runs) for s in stages},
        "same_results": all(r["results"] == runs[0]["results"] for r in runs),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("questions", nargs="+")
    ap.add_argument("--home", type=Path, required=True, help="graphmem home holding the project")
    ap.add_argument("--project", required=True)
    ap.add_argument("--mode", default="hybrid-rerank")
    ap.add_argument("--runs", type=int, default=10, help="runs per question (default 10)")
    ap.add_argument("--warmup", type=int, default=1, help="unmeasured runs per question first (default 1)")
    ap.add_argument("--json", type=Path, default=None, help="also write the runs and summaries here")
    args = ap.parse_args()
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # compiled modules are reused, as when installed
    for _ in range(args.warmup):
        for q in args.questions:
            one_run(args.home, args.project, q, args.mode)
    runs: dict[str, list[dict[str, Any]]] = {q: [] for q in args.questions}
    for _ in range(args.runs):
        for q in args.questions:
            runs[q].append(measured(args.home, args.project, q, args.mode))
    report = {"mode": args.mode, "project": args.project, "questions": {q: summary(r) for q, r in runs.items()}}
    for q, s in report["questions"].items():
        stages = ", ".join(f"{k} {v:.0f}" for k, v in s["stages_median_ms"].items())
        print(f"{q!r}: wall median {s['wall_median_s']:.2f} s, p95 {s['wall_p95_s']:.2f} s, "
              f"min {s['wall_min_s']:.2f} s; cpu median {s['cpu_median_s']:.2f} s; peak RSS "
              f"{s['max_rss_mib']:.0f} MiB; stages (ms, medians) {stages}"
              + ("" if s["same_results"] else "; RESULTS DIFFERED BETWEEN RUNS"))
    if args.json:
        args.json.write_text(json.dumps({"report": report, "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
