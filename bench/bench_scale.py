"""Scale run: a large real repository, ingested into the embedded store and into Neo4j.

Three consecutive Django feature releases from PyPI (sdists pinned by sha256 below) are assembled
into one git history with ``eval.realcode.build`` (fixed author and release dates, so the SHAs are
reproducible), cached under ``~/.cache/graphmem/scale/``. Each store then runs in a child process of
its own, so its peak RSS (``ru_maxrss`` of that process; its parse workers and other children sampled
together, ``ChildMemory``) is the store's alone:

1. a first ingest of the history's HEAD into a fresh project (``--replay``, 0 by default: HEAD
   alone), with the wall time of each stage the ingest reports progress for, and the index sync;
2. what the project holds: files, nodes by kind, chunks, relationships by type;
3. query latency p50/p95 of ``hybrid``, ``bm25`` and ``graph`` over the fixed questions below
   (latency only: they have no gold answers), after one warm-up query per mode;
4. one extra commit on top (a function added, one modified) and the incremental ingest's time.

Neo4j is the shared server of ``NEO4J_*`` (its own memory is not in the child's RSS); the Neo4j
run uses a unique project, dropped afterwards unless ``--keep``. ``--neo4j-index`` chooses where
its BM25 and vector indexes live: ``local`` files beside the process (the default) or ``neo4j``
(served by Neo4j's own indexes).

    PYTHONPATH=. NEO4J_URI=bolt://127.0.0.1:27687 NEO4J_PASSWORD=... \\
        nice -n 10 python bench/bench_scale.py [--stores embedded,neo4j] [--exclude 'tests/**'] \\
        [--graph-only] [--out /tmp/scale.json]

``--graph-only`` stops after step 1's graph (no index sync, so no embedding): the write stage of
both stores in a few minutes. ``--repeat N`` runs each store N times, interleaved, and reports the
median of each stage, every run's write stage and the load average around each run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from eval.metrics import percentile
from eval.realcode import build as builder

RELEASES = (
    builder.Release("5.0", "2023-12-04T13:12:50+00:00",
                    "https://files.pythonhosted.org/packages/be/a6/46e250737d46e955e048f6bbc2948fb22f0de3f3ab828d3803070dc1260e/Django-5.0.tar.gz",
                    "7d29e14dfbc19cb6a95a4bd669edbde11f5d4c6a71fdaa42c2d40b6846e807f7"),
    builder.Release("5.1", "2024-08-07T13:34:10+00:00",
                    "https://files.pythonhosted.org/packages/1e/0c/d854d25bb74a8a3b41e642bbd27fe6af12fadd0edfd07d487809cf0ef719/Django-5.1.tar.gz",
                    "848a5980e8efb76eea70872fb0e4bc5e371619c70fffbe48e3e1b50b2c09455d"),
    builder.Release("5.2", "2025-04-02T13:08:06+00:00",
                    "https://files.pythonhosted.org/packages/4c/1b/c6da718c65228eb3a7ff7ba6a32d8e80fa840ca9057490504e099e4dd1ef/Django-5.2.tar.gz",
                    "1a47f7a7a3d43ce64570d350e008d2949abe8c7e21737b351b6a1611277c6d89"),
)

# Generic questions about Django, for latency only.
QUESTIONS = (
    "where are database migrations applied",
    "who calls get_object_or_404",
    "how does the ORM build a SQL query for a filter",
    "where is the CSRF token checked",
    "how are template variables resolved",
    "which middleware handles sessions",
    "where are URL patterns resolved to views",
    "how does the admin register a model",
    "where is the password hasher chosen",
    "how are signals dispatched to receivers",
    "what validates an email field in a form",
    "where does the test client send a request",
    "how is a database transaction committed atomically",
    "who calls reverse",
    "where are static files collected",
    "how does QuerySet prefetch_related work",
    "which function sends an email message",
    "where is the cache backend selected",
    "how are model fields deconstructed for migrations",
    "what raises ImproperlyConfigured when settings are missing",
    "how does the autodetector find renamed models",
    "where is the request body parsed for file uploads",
    "how are translations activated for a request",
    "where does runserver reload on code changes",
    "how is a foreign key's related manager created",
    "which class renders a form widget",
    "where are content types created after migrate",
    "how does the paginator count pages",
    "who calls select_related",
    "where is the timezone converted to the current time zone",
    "how does the authentication backend check a user's permissions",
    "where are management commands discovered",
    "how is JSONField stored on PostgreSQL",
    "what changed in the query compiler",
)
MODES = ("hybrid", "bm25", "graph")
STAGE_ORDER = ("read", "parse", "write", "index", "embed")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def cache_root() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return Path(os.environ.get("GRAPHMEM_SCALE_HOME", base / "graphmem" / "scale"))


def manifest(exclude: tuple[str, ...]) -> builder.Manifest:
    return builder.Manifest(name="django", language="python", split="dev", source="pypi", releases=RELEASES,
                            project_words=("django",), exclude=exclude,
                            author=("Django maintainers", "maintainers@django.invalid"))


def history(exclude: tuple[str, ...]) -> tuple[Path, list[dict[str, str]]]:
    """The assembled repository (built once per exclude set, then reused) and its commits."""
    root = cache_root()
    tag = "full" if not exclude else "x-" + "-".join("".join(ch if ch.isalnum() else "_" for ch in p)
                                                   for p in exclude)
    built = root / "built" / f"{tag}.json"
    repo_root = root / tag
    if built.exists() and (repo_root / "repos" / "django" / ".git").is_dir():
        return repo_root / "repos" / "django", json.loads(built.read_text(encoding="utf-8"))
    t = time.perf_counter()
    commits = builder.assemble(manifest(exclude), repo_root, archives=root / "archives")
    built.parent.mkdir(parents=True, exist_ok=True)
    built.write_text(json.dumps(commits), encoding="utf-8")
    log(f"built the history in {time.perf_counter() - t:.0f} s: {[c['version'] for c in commits]}")
    return repo_root / "repos" / "django", commits


class StageClock:
    """Wall time per stage from the ingest's progress calls: a stage runs from its first call to
    the next stage's first call, so work that reports no progress of its own counts with the stage
    before it (``parse`` holds the graph build, ownership, history and documents; ``write`` the
    closing of what changed and the recording of sources, up to the ingest's return). The index
    sync is a stage of its own (``index``: chunks read back, BM25, vectors from the cache), with
    the model's encoding apart (``embed``)."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.marks: list[tuple[str, float]] = []

    def __call__(self, stage: str, done: int, total: int) -> None:
        if not self.marks or self.marks[-1][0] != stage:
            self.marks.append((stage, time.perf_counter()))
            log(f"  {stage} ({total:,}) at {self.marks[-1][1] - self.start:.0f} s")

    def spans(self, end: float) -> dict[str, float]:
        out: dict[str, float] = {}
        if self.marks:
            out["setup (discover, replay)"] = self.marks[0][1] - self.start
        for (stage, at), nxt in zip(self.marks, [*self.marks[1:], (None, end)]):
            out[stage] = out.get(stage, 0.0) + (nxt[1] - at)
        return {k: round(v, 2) for k, v in out.items()}


def one_commit(repo: Path, when: str) -> None:
    """A small change on top: a function added to django/shortcuts.py, capfirst modified."""
    shortcuts = repo / "django" / "shortcuts.py"
    shortcuts.write_text(shortcuts.read_text(encoding="utf-8") + (
        "\n\ndef get_list_or_empty(klass, *args, **kwargs):\n"
        '    """Like get_list_or_404, but an empty list where it would raise Http404."""\n'
        "    queryset = _get_queryset(klass)\n"
        "    return list(queryset.filter(*args, **kwargs))\n"), encoding="utf-8")
    text_py = repo / "django" / "utils" / "text.py"
    source = text_py.read_text(encoding="utf-8")
    old = "def capfirst(x):\n"
    if old not in source:
        raise SystemExit(f"cannot make the incremental commit: {old.strip()!r} is not in {text_py}")
    text_py.write_text(source.replace(old, old + "    # Lazy strings are formatted first.\n", 1), encoding="utf-8")
    env = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.invalid",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@example.invalid",
           "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
    for args in (["add", "-A"], ["commit", "-q", "--no-verify", "-m", "Add get_list_or_empty; note capfirst"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)


class ChildMemory:
    """Peak resident memory of this process's descendants together (parse workers, their fork
    server, git), sampled every ``every`` seconds. ``ru_maxrss`` of the children cannot say it: a
    forked child counts the pages it shares with its parent at the fork, and the parse workers are
    not this process's own children. Pages shared between them count once per process (an upper
    bound)."""

    def __init__(self, every: float = 0.2) -> None:
        import psutil

        self.peak_mb = 0.0
        self._me = psutil.Process()
        self._every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        import psutil

        while not self._stop.wait(self._every):
            total = 0
            for proc in self._me.children(recursive=True):
                try:
                    total += proc.memory_info().rss
                except psutil.Error:
                    continue  # ended between the listing and the reading
            self.peak_mb = max(self.peak_mb, total / 2**20)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.peak_mb


def child(args: argparse.Namespace) -> dict[str, Any]:
    """One store's run (in its own process): ingest, counts, latency, incremental commit."""
    from graphmem.api import Graphmem
    from graphmem.config import Neo4jSettings, Settings

    repo = Path(args.repo)
    work = Path(tempfile.mkdtemp(prefix="graphmem-scale-"))
    children = ChildMemory()
    try:
        clone = work / "django"
        subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
        settings = Settings(store=args.store, home=work / "home", replay=args.replay, neo4j=Neo4jSettings.from_env(),
                            index=args.neo4j_index if args.store == "neo4j" else "local")
        project = args.project
        out: dict[str, Any] = {"store": args.store, "project": project, "replay": args.replay,
                               "index": settings.index,
                               "embedding_cache": str(args.embedding_cache) if args.embedding_cache else None}
        if args.embedding_cache:
            # Only the embeddings are shared: parsed facts and everything else start empty.
            (work / "home" / "cache").mkdir(parents=True)
            Path(args.embedding_cache).mkdir(parents=True, exist_ok=True)
            (work / "home" / "cache" / "embeddings").symlink_to(Path(args.embedding_cache).resolve())
        with Graphmem(settings, project, reranker=None) as gm:
            try:
                clock = StageClock()
                t = time.perf_counter()
                # The graph, then the indexes (as ``gm.ingest`` would), so the write stage ends
                # where the graph is written.
                report = gm.ingest(clone, progress=clock, llm=False, index=False)
                if not args.graph_only:
                    clock("index", 0, 0)
                    report.index = gm.sync_indexes(progress=clock).as_dict()
                end = time.perf_counter()
                out["ingest_s"] = round(end - t, 1)
                out["stages_s"] = clock.spans(end)
                out["ingest_report_s"] = round(report.seconds, 1)
                out["index_sync_s"] = (report.index or {}).get("seconds")
                out["files"], out["commits"] = report.files, report.commits
                out["written"] = report.as_dict()["written"]
                counts = gm.store.counts()
                out["nodes"], out["rels"], out["chunks"] = counts.nodes, counts.rels, counts.chunks
                out["rss_after_ingest_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
                log(f"[{args.store}] ingested {report.files} files in {out['ingest_s']} s; "
                    f"{counts.total_nodes} nodes, {counts.total_rels} rels, {counts.chunks} chunks")

                if not args.graph_only:  # queries need the indexes
                    latency: dict[str, dict[str, float]] = {}
                    for mode in MODES:
                        gm.query(QUESTIONS[0], mode=mode)  # load indexes, models and catalog once
                        times = []
                        for q in QUESTIONS:
                            t = time.perf_counter()
                            gm.query(q, mode=mode, k=10)
                            times.append((time.perf_counter() - t) * 1000)
                        latency[mode] = {"p50_ms": round(percentile(times, 50), 1),
                                         "p95_ms": round(percentile(times, 95), 1)}
                    out["latency"] = latency
                    log(f"[{args.store}] latency {latency}")

                    one_commit(clone, args.commit_date)
                    t = time.perf_counter()
                    again = gm.ingest(clone, llm=False)
                    out["incremental_s"] = round(time.perf_counter() - t, 2)
                    out["incremental"] = {"changed": again.changed, "commits": again.commits,
                                          "ingest_s": round(again.seconds, 2),
                                          "index_sync_s": (again.index or {}).get("seconds"),
                                          "written": again.as_dict()["written"]}
                    log(f"[{args.store}] one more commit: {out['incremental_s']} s")
            finally:
                if args.store == "neo4j" and not args.keep:
                    gm.store.drop_project()
        out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
        out["peak_rss_children_mb"] = round(children.stop())
        return out
    finally:
        children.stop()
        shutil.rmtree(work, ignore_errors=True)


def neo4j_reachable() -> None:
    """Exit with one clear line when the Neo4j of ``NEO4J_*`` cannot be reached."""
    from graphmem.errors import GraphmemError
    from graphmem.stores.neo4j import Neo4jStore

    try:
        Neo4jStore.connect(f"scale-check-{uuid.uuid4().hex[:8]}").close()
    except GraphmemError as exc:
        raise SystemExit(f"bench_scale: {exc}") from None


def table(results: list[dict[str, Any]]) -> str:
    """The README's table: one column per store."""
    def row(name: str, fn: Any) -> str:
        return f"| {name} | " + " | ".join(str(fn(r)) for r in results) + " |"

    kinds = sorted({k for r in results for k in r["nodes"]})
    stages = [s for s in ("setup (discover, replay)", *STAGE_ORDER) if any(s in r["stages_s"] for r in results)]
    lines = ["| | " + " | ".join(f"{r['store']} (index {r['index']})" for r in results) + " |",
             "|---|" + "---:|" * len(results),
             row("files", lambda r: f"{r['files']:,}"),
             row("nodes", lambda r: f"{sum(r['nodes'].values()):,}"),
             *(row(f"&nbsp;&nbsp;{k}", lambda r, k=k: f"{r['nodes'].get(k, 0):,}") for k in kinds),
             row("chunks", lambda r: f"{r['chunks']:,}"),
             row("relationships", lambda r: f"{sum(r['rels'].values()):,}"),
             row("first ingest, wall (replay)", lambda r: f"{r['ingest_s']} s ({r['replay']})"),
             *(row(f"&nbsp;&nbsp;{s}", lambda r, s=s: f"{r['stages_s'].get(s, '-')} s") for s in stages),
             row("peak RSS (process / its parse workers and other children together)",
                 lambda r: f"{r['peak_rss_mb']:,} / {r['peak_rss_children_mb']:,} MB")]
    if all("latency" in r for r in results):  # not with --graph-only
        lines += [row("&nbsp;&nbsp;of which index sync", lambda r: f"{r['index_sync_s']} s"),
                  *(row(f"{m} p50 / p95", lambda r, m=m: f"{r['latency'][m]['p50_ms']} / {r['latency'][m]['p95_ms']} ms")
                    for m in MODES),
                  row("one more commit (ingest + index)", lambda r: f"{r['incremental_s']} s")]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stores", default="embedded,neo4j", help="comma-separated: embedded, neo4j")
    parser.add_argument("--exclude", action="append", default=[],
                        help="glob of release paths to leave out (repeatable), e.g. 'tests/**'")
    parser.add_argument("--replay", type=int, default=0, help="earlier commits the first ingest replays (0: HEAD)")
    parser.add_argument("--neo4j-index", choices=("local", "neo4j"), default="local")
    parser.add_argument("--keep", action="store_true", help="keep the Neo4j project")
    parser.add_argument("--embedding-cache", type=Path,
                        help="share this embedding cache between runs (a later run embeds nothing new: "
                             "its index sync then times reading vectors, not the model)")
    parser.add_argument("--graph-only", action="store_true",
                        help="the first ingest's graph alone: no index sync, queries or extra commit "
                             "(times the write stage without the embedder)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="runs per store, interleaved (embedded, neo4j, embedded, ...): the table shows "
                             "each stage's median and every run's write stage")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--repo", help=argparse.SUPPRESS)
    parser.add_argument("--project", help=argparse.SUPPRESS)
    parser.add_argument("--commit-date", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        args.store = args.child
        print(json.dumps(child(args)))
        return

    stores = [s.strip() for s in args.stores.split(",") if s.strip()]
    unknown = set(stores) - {"embedded", "neo4j"}
    if unknown:
        raise SystemExit(f"bench_scale: unknown store {', '.join(sorted(unknown))}: choose embedded, neo4j")
    if "neo4j" in stores:
        neo4j_reachable()
    repo, commits = history(tuple(args.exclude))
    log(f"history {repo}: {' -> '.join(c['version'] + ' ' + c['sha'][:10] for c in commits)}")
    load = os.getloadavg()
    runs: dict[str, list[dict[str, Any]]] = {store: [] for store in stores}
    for _ in range(max(1, args.repeat)):
        for store in stores:
            project = f"scale{uuid.uuid4().hex[:8]}" if store == "neo4j" else "django"
            cmd = [sys.executable, __file__, "--child", store, "--repo", str(repo), "--project", project,
                   "--replay", str(args.replay), "--neo4j-index", args.neo4j_index,
                   "--commit-date", "2025-04-03T10:00:00+0000", *(["--keep"] if args.keep else []),
                   *(["--graph-only"] if args.graph_only else []),
                   *(["--embedding-cache", str(args.embedding_cache)] if args.embedding_cache else [])]
            before = os.getloadavg()[0]
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
            if proc.returncode != 0:
                raise SystemExit(f"bench_scale: the {store} run failed (exit {proc.returncode})")
            result = json.loads(proc.stdout.strip().splitlines()[-1])
            result["load_1min"] = [round(before, 2), round(os.getloadavg()[0], 2)]
            runs[store].append(result)
            log(f"[{store}] write {result['stages_s'].get('write')} s, load {result['load_1min']}")
    results = [median_run(runs[store]) for store in stores]
    summary = {"releases": [c["version"] for c in commits], "exclude": args.exclude,
               "load_before": [round(x, 2) for x in load], "load_after": [round(x, 2) for x in os.getloadavg()],
               "results": results}
    if args.out:
        args.out.write_text(json.dumps(summary, indent=1), encoding="utf-8")
    print(table(results))
    if args.repeat > 1:
        for r in results:
            print(f"{r['store']}: write stage per run {[run['stages_s'].get('write') for run in r['runs']]} s, "
                  f"load average (1 min) before/after each run {[run['load_1min'] for run in r['runs']]}")
    print(f"load average before {summary['load_before']}, after {summary['load_after']}")


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One store's runs as one result: the first run's counts (and latencies and extra commit), the
    stage and ingest times and peak RSS the median over the runs (every run kept under ``runs``)."""
    if len(runs) == 1:
        return runs[0]
    out = dict(runs[0])
    out["stages_s"] = {stage: round(percentile([r["stages_s"][stage] for r in runs if stage in r["stages_s"]], 50), 2)
                       for stage in runs[0]["stages_s"]}
    for key in ("ingest_s", "ingest_report_s"):
        if all(r.get(key) is not None for r in runs):
            out[key] = round(percentile([r[key] for r in runs], 50), 1)
    for key in ("peak_rss_mb", "peak_rss_children_mb"):
        out[key] = round(percentile([r[key] for r in runs], 50))
    out["runs"] = runs
    return out


if __name__ == "__main__":
    main()
