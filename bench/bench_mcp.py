"""MCP server latency under concurrent clients, over streamable HTTP, on the embedded store.

Builds the example organisation (``examples/make_example_org.py``), ingests it with the CLI, starts
``graphmem serve --transport http`` and measures ``search`` from concurrent clients, each with a
session of its own issuing questions one after another:

- idle: the clients alone;
- during an ingest: the same while one client asks the server to ingest a copy of the repository
  with a commit of ``--extra-files`` new modules (parsing, writing and embedding them); only the
  searches that start while the ingest runs are counted;
- during another process's ingest: the same while ``graphmem ingest`` runs in a process of its
  own on the same home (as the git hooks do) with one more commit of new modules; then how long
  after that process ends ``search`` first finds one of the new functions.

Prints p50 / p95 / max latency, errors and throughput per phase, and the ingest's duration. With
``--one-lock`` the server runs every tool call under one process-wide lock, as it once did: the
same machine's baseline for the concurrent design.

    python bench/bench_mcp.py [--clients 20] [--rounds 5] [--mode hybrid-rerank] [--extra-files 150] [--one-lock]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from mcp import Client

REPO = Path(__file__).resolve().parents[1]
GIT_ENV = {"GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "bench@example.com",
           "GIT_COMMITTER_NAME": "Bench", "GIT_COMMITTER_EMAIL": "bench@example.com"}
NOW = "2026-06-01"
# The server with every tool call under one lock (--one-lock): how calls were served before.
ONE_LOCK = """
import sys, threading, functools
from graphmem import mcp_server
lock = threading.RLock()
def locked(fn):
    @functools.wraps(fn)
    def call(*args, **kwargs):
        with lock:
            return fn(*args, **kwargs)
    return call
for name in ("search", "explain", "get_node", "neighbors", "cypher", "ingest", "status"):
    setattr(mcp_server.Service, name, locked(getattr(mcp_server.Service, name)))
from graphmem.cli import main
sys.exit(main(sys.argv[1:]))
"""


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env={**os.environ, **GIT_ENV})


def env() -> dict[str, str]:
    out = dict(os.environ)
    out["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), out.get("PYTHONPATH", "")) if p)
    return out


def cli(home: Path, *args: str) -> None:
    subprocess.run([sys.executable, "-m", "graphmem.cli", "--home", str(home), "--project", "acme", *args],
                   check=True, capture_output=True, env=env())


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def add_modules(repo: Path, count: int, prefix: str = "reconcile") -> None:
    """Commit ``count`` new modules of documented functions (work for parsing and embedding)."""
    pkg = repo / "services" / f"bench_{prefix}"
    pkg.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        (pkg / f"module_{i}.py").write_text("".join(
            f"def {prefix}_batch_{i}_{j}(entries, ledger):\n"
            f'    """Reconcile batch {j} of module {i}: match ledger entries against invoices, flag '
            f'mismatches and record the settlement for the payments team."""\n'
            f"    total = sum(e.amount for e in entries)\n"
            f"    return ledger.settle(total, batch={j})\n\n\n" for j in range(6)))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", f"Add {count} {prefix} modules")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def summary(name: str, latencies: list[float], seconds: float) -> dict[str, Any]:
    return {"phase": name, "searches": len(latencies), "p50_s": round(statistics.median(latencies), 3),
            "p95_s": round(percentile(latencies, 0.95), 3), "max_s": round(max(latencies), 3),
            "searches_per_s": round(len(latencies) / seconds, 2)}


async def client_loop(url: str, questions: list[str], rounds: int, mode: str, offset: int,
                      out: list[tuple[float, float]], stop: asyncio.Event | None = None) -> None:
    """One client: ``rounds`` questions one after another (or until ``stop``); (start, seconds) each."""
    async with Client(url, read_timeout_seconds=600) as client:
        i = 0
        while (stop is None and i < rounds) or (stop is not None and not stop.is_set()):
            question = questions[(offset + i) % len(questions)]
            started = time.perf_counter()
            result = await client.call_tool("search", {"question": question, "k": 10, "mode": mode})
            if result.is_error:
                raise RuntimeError(result.content[0].text)
            out.append((started, time.perf_counter() - started))
            i += 1


async def idle_phase(url: str, questions: list[str], clients: int, rounds: int, mode: str) -> dict[str, Any]:
    samples: list[tuple[float, float]] = []
    t = time.perf_counter()
    await asyncio.gather(*(client_loop(url, questions, rounds, mode, c * 7, samples) for c in range(clients)))
    return summary(f"idle, {clients} clients", [s for _, s in samples], time.perf_counter() - t)


async def ingest_phase(url: str, questions: list[str], clients: int, mode: str, path: Path) -> dict[str, Any]:
    samples: list[tuple[float, float]] = []
    stop = asyncio.Event()
    window: dict[str, float] = {}

    async def ingest() -> None:
        async with Client(url, read_timeout_seconds=1800) as client:
            window["start"] = time.perf_counter()
            result = await client.call_tool("ingest", {"path": str(path)})
            window["end"] = time.perf_counter()
            stop.set()
            if result.is_error:
                raise RuntimeError(result.content[0].text)
            window["nodes"] = json.loads(result.content[0].text)["written"]["nodes"]

    loops = [client_loop(url, questions, 0, mode, c * 7, samples, stop) for c in range(clients)]
    await asyncio.gather(ingest(), *loops)
    during = [s for started, s in samples if window["start"] <= started <= window["end"]]
    out = summary(f"during an ingest, {clients} clients", during or [0.0], window["end"] - window["start"])
    out["ingest_s"] = round(window["end"] - window["start"], 2)
    out["ingest_nodes_written"] = window.get("nodes")
    return out


async def external_phase(url: str, questions: list[str], clients: int, mode: str, home: Path, path: Path,
                         marker: str) -> dict[str, Any]:
    """Searches while ``graphmem ingest`` runs in another process; then the seconds until ``search``
    finds ``marker`` (a function that ingest adds)."""
    samples: list[tuple[float, float]] = []
    stop = asyncio.Event()
    window: dict[str, float] = {}

    async def ingest() -> None:
        window["start"] = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "graphmem.cli", "--home", str(home), "--project", "acme", "ingest", str(path),
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE, env=env())
        _, err = await proc.communicate()
        window["end"] = time.perf_counter()
        stop.set()
        if proc.returncode != 0:
            raise RuntimeError(err.decode()[-2000:])

    loops = [client_loop(url, questions, 0, mode, c * 7, samples, stop) for c in range(clients)]
    await asyncio.gather(ingest(), *loops)
    during = [s for started, s in samples if window["start"] <= started <= window["end"]]
    out = summary(f"during another process's ingest, {clients} clients", during or [0.0],
                  window["end"] - window["start"])
    out["ingest_s"] = round(window["end"] - window["start"], 2)
    async with Client(url, read_timeout_seconds=600) as client:
        while True:
            result = await client.call_tool("search", {"question": marker, "k": 5, "mode": mode})
            found = not result.is_error and marker in result.content[0].text
            if found or time.perf_counter() - window["end"] > 60:
                break
            await asyncio.sleep(0.2)
    out["new_symbol_found_after_s"] = round(time.perf_counter() - window["end"], 2) if found else None
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5, help="searches per client in the idle phase")
    parser.add_argument("--mode", default="hybrid-rerank")
    parser.add_argument("--extra-files", type=int, default=150, help="modules the ingest phase adds")
    parser.add_argument("--one-lock", action="store_true", help="serve every call under one lock (baseline)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="graphmem-bench-mcp-"))
    try:
        subprocess.run([sys.executable, str(REPO / "examples" / "make_example_org.py"), str(work), "--now", NOW],
                       check=True, capture_output=True)
        repo, home = work / "acme", work / "home"
        questions = [q["question"] for q in json.loads((work / "facts.json").read_text())["questions"]]
        cli(home, "ingest", str(repo))
        copy = work / "ingest" / "acme"
        shutil.copytree(repo, copy)
        add_modules(copy, args.extra_files)

        port = free_port()
        launch = ["-c", ONE_LOCK] if args.one_lock else ["-m", "graphmem.cli"]
        server = subprocess.Popen(
            [sys.executable, *launch, "--home", str(home), "--project", "acme", "serve",
             "--transport", "http", "--port", str(port), "--ingest-root", str(work / "ingest")],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env())
        try:
            for _ in range(300):
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2).close()
                    break
                except OSError:
                    if server.poll() is not None:
                        raise SystemExit(server.stderr.read().decode() if server.stderr else "server exited")
                    time.sleep(0.2)
            url = f"http://127.0.0.1:{port}/mcp"
            asyncio.run(idle_phase(url, questions, 1, 2, args.mode))  # warm-up: models, catalog
            results = [asyncio.run(idle_phase(url, questions, 1, args.rounds * 2, args.mode)),
                       asyncio.run(idle_phase(url, questions, args.clients, args.rounds, args.mode)),
                       asyncio.run(ingest_phase(url, questions, args.clients, args.mode, copy))]
            if not args.one_lock:
                add_modules(copy, args.extra_files, prefix="settle")
                results.append(asyncio.run(external_phase(url, questions, args.clients, args.mode, home, copy,
                                                          "settle_batch_0_0")))
        finally:
            server.terminate()
            server.wait(timeout=30)
        print(json.dumps({"mode": args.mode, "clients": args.clients, "cpus": os.cpu_count(),
                          "one_lock": args.one_lock, "phases": results}, indent=2))
    finally:
        if args.keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
