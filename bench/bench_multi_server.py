"""Two graphmem MCP servers over one Neo4j: visibility of an ingest and latency under concurrent clients.

Builds the example organisation (``examples/make_example_org.py``), starts two ``graphmem serve
--transport http`` processes for one fresh Neo4j project (the second through a ``neo4j://``
routing URI), ingests through the first with the MCP ``ingest`` tool, then measures:

- how long after the ingest returns the second server first ranks a question's gold key;
- ``search`` from concurrent clients, half on each server, each asking ``--rounds`` questions one
  after another: p50 / p95 / max, errors, and whether both servers gave the same ranking (keys,
  ranks, scores) to every question.

``--index neo4j`` (default): indexes served by Neo4j, each server with a home of its own.
``--index local``: local indexes in one home shared by both servers.

    NEO4J_URI=bolt://127.0.0.1:7687 NEO4J_PASSWORD=... \\
      python bench/bench_multi_server.py [--clients 20] [--rounds 5] [--mode hybrid] [--index neo4j|local]
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
import uuid
from pathlib import Path
from typing import Any

from bench_mcp import NOW, REPO, env, free_port, percentile  # the sibling bench's helpers
from mcp import Client


def start(project: str, home: Path, index: str, roots: Path, uri: str | None) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc_env = {k: v for k, v in env().items() if not k.startswith("GRAPHMEM_")}
    proc_env.update({"GRAPHMEM_REPLAY": "0", **({"NEO4J_URI": uri} if uri else {})})
    proc = subprocess.Popen(
        [sys.executable, "-m", "graphmem.cli", "--store", "neo4j", "--index", index, "--home", str(home),
         "--project", project, "serve", "--transport", "http", "--port", str(port), "--no-bootstrap",
         "--ingest-root", str(roots)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=proc_env)
    return proc, f"http://127.0.0.1:{port}"


def wait_healthy(proc: subprocess.Popen[bytes], base: str) -> None:
    for _ in range(600):
        try:
            urllib.request.urlopen(f"{base}/healthz", timeout=2).close()
            return
        except OSError:
            if proc.poll() is not None:
                raise SystemExit(proc.stderr.read().decode() if proc.stderr else "a server exited") from None
            time.sleep(0.2)
    raise SystemExit(f"{base} did not answer within 120 s")


async def search(client: Client, question: str, mode: str) -> dict[str, Any]:
    result = await client.call_tool("search", {"question": question, "k": 10, "mode": mode})
    if result.is_error:
        raise RuntimeError(result.content[0].text)
    return json.loads(result.content[0].text)


def ranking(answer: dict[str, Any]) -> list[tuple[str, int, float]]:
    return [(h["key"], h["rank"], round(h["score"], 9)) for h in answer["results"]]


async def run(urls: list[str], repo: Path, questions: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    probe = next(q for q in questions if q.get("gold"))
    for url in urls:  # both load their models first: what follows measures visibility, not a cold start
        async with Client(url, read_timeout_seconds=600) as client:
            await search(client, probe["question"], args.mode)
    async with Client(urls[0], read_timeout_seconds=3600) as one:
        started = time.perf_counter()
        result = await one.call_tool("ingest", {"path": str(repo)})
        if result.is_error:
            raise SystemExit(result.content[0].text)
        out["ingest_through_server_1_s"] = round(time.perf_counter() - started, 1)
    async with Client(urls[1], read_timeout_seconds=600) as two:
        ingested = time.perf_counter()
        while probe["gold"][0] not in [h["key"] for h in (await search(two, probe["question"], args.mode))["results"]]:
            if time.perf_counter() - ingested > 60:
                raise SystemExit("server 2 did not find the ingest's keys within 60 s")
            await asyncio.sleep(0.1)
        out["server_2_found_it_after_s"] = round(time.perf_counter() - ingested, 2)

    texts = [q["question"] for q in questions]
    latencies: list[float] = []
    errors: list[str] = []
    answers: dict[tuple[int, str], list[tuple[str, int, float]]] = {}
    changed: set[tuple[int, str]] = set()

    async def client(n: int) -> None:
        server = n % 2
        try:
            async with Client(urls[server], read_timeout_seconds=600) as session:
                for i in range(args.rounds):
                    text = texts[(n // 2 + i) % len(texts)]  # clients 2m and 2m+1 ask alike
                    t = time.perf_counter()
                    try:
                        got = ranking(await search(session, text, args.mode))
                    except Exception as exc:  # noqa: BLE001 - counted and reported, not raised
                        errors.append(f"{type(exc).__name__}: {exc}"[:200])
                        continue
                    latencies.append(time.perf_counter() - t)
                    if answers.setdefault((server, text), got) != got:
                        changed.add((server, text))
        except Exception as exc:  # noqa: BLE001 - a client that could not connect is an error too
            errors.append(f"{type(exc).__name__}: {exc}"[:200])

    for n in range(2):  # warm-up: models and catalogs of both servers
        await client(n)
    latencies.clear()
    answers.clear()
    started = time.perf_counter()
    await asyncio.gather(*(client(n) for n in range(args.clients)))
    seconds = time.perf_counter() - started
    both = sorted({text for server, text in answers if server == 0} & {text for server, text in answers if server == 1})
    out.update({
        "clients": args.clients, "searches": len(latencies), "errors": len(errors), "first_errors": errors[:3],
        "p50_s": round(statistics.median(latencies), 3) if latencies else None,
        "p95_s": round(percentile(latencies, 0.95), 3) if latencies else None,
        "max_s": round(max(latencies), 3) if latencies else None,
        "searches_per_s": round(len(latencies) / seconds, 2),
        "questions_asked_of_both": len(both),
        "same_ranking_on_both": sum(answers[(0, t)] == answers[(1, t)] for t in both),
        "answers_that_changed_on_one_server": len(changed),
    })
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5, help="searches per client")
    parser.add_argument("--mode", default="hybrid")
    parser.add_argument("--index", choices=["neo4j", "local"], default="neo4j")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder and the Neo4j project")
    args = parser.parse_args()

    from graphmem.stores.neo4j import Neo4jStore

    work = Path(tempfile.mkdtemp(prefix="graphmem-bench-multi-"))
    project = f"bench-multi-{uuid.uuid4().hex[:8]}"
    uri = os.environ.get("NEO4J_URI", "bolt://127.0.0.1:7687")
    routing = uri.replace("bolt", "neo4j", 1) if uri.startswith("bolt") else uri
    procs: list[subprocess.Popen[bytes]] = []
    try:
        subprocess.run([sys.executable, str(REPO / "examples" / "make_example_org.py"), str(work / "repos"),
                        "--now", NOW], check=True, capture_output=True)
        questions = json.loads((work / "repos" / "facts.json").read_text())["questions"]
        homes = [work / "home-1", work / "home-2"] if args.index == "neo4j" else [work / "home"] * 2
        started = [start(project, home, args.index, work / "repos", u) for home, u in zip(homes, [None, routing])]
        procs = [p for p, _ in started]
        for proc, base in started:
            wait_healthy(proc, base)
        result = asyncio.run(run([f"{base}/mcp" for _, base in started], work / "repos" / "acme", questions, args))
        print(json.dumps({"index": args.index, "mode": args.mode, "cpus": os.cpu_count(), "neo4j": uri,
                          "server_2_neo4j": routing, **result}, indent=2))
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=30)
        if args.keep:
            print(f"kept {work} and project {project}", file=sys.stderr)
        else:
            with Neo4jStore.connect(project) as store:
                store.drop_project()
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
