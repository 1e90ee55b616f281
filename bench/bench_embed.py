"""Embedding throughput and retrieval quality of the embedder backends.

Speed: texts/s on a deterministic mix of generated chunk texts (60 % code with docstrings ~150-290 word pieces,
20 % commit messages ~20-60, 20 % doc paragraphs ~100-220), best of ``--repeat`` runs, against plain
sentence-transformers fp32 at max_seq_length 256 (the baseline). Quality: Recall@5 and MRR of exact cosine search
on MuSiQue and HotpotQA train samples (questions -> supporting passages, /work/shared/datasets or $GRAPHMEM_DATASETS)
and on a code-search task built from the Python standard library (first docstring sentence -> function body without
its docstring), plus the mean/min cosine between each variant's passage vectors and the baseline's.

    python bench/bench_embed.py
    python bench/bench_embed.py --texts 200 --variants onnx-int8 onnx-fp32 --tasks code musique
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import sys
import sysconfig
import time
from collections.abc import Callable, Sequence
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from graphmem.retrieval.embed import default_model_path, load_embedder

DATASETS = Path(os.environ.get("GRAPHMEM_DATASETS", Path(__file__).resolve().parents[2] / "shared" / "datasets"))
if not DATASETS.is_dir():
    DATASETS = Path("/work/shared/datasets")

# ------------------------------------------------------------------------------------------ the timing mix

VERBS = ["load", "parse", "build", "merge", "flush", "resolve", "index", "fetch", "encode", "validate", "render"]
NOUNS = ["config", "graph", "node", "chunk", "cache", "commit", "record", "batch", "token", "session", "index",
         "manifest", "schema", "payload", "edge", "snapshot", "vector", "incident", "owner", "service"]
ADJ = ["stale", "pending", "partial", "sorted", "remote", "local", "cached", "empty", "duplicate", "missing"]
_PROSE = ("the of a to in is that for it as with be on by this are or from at which an when but not was all can has "
         "more if their will one about would there they so what these only other into must may should each then "
         "because however before after while during every without within between through")
PROSE = _PROSE.split()


def _ident(rng: random.Random) -> str:
    return f"{rng.choice(VERBS)}_{rng.choice(ADJ)}_{rng.choice(NOUNS)}"


def _sentence(rng: random.Random, n: int) -> str:
    words = []
    for _ in range(n):
        r = rng.random()
        words.append(rng.choice(NOUNS) if r < 0.25 else rng.choice(ADJ) if r < 0.35
                     else rng.choice(VERBS) + "s" if r < 0.45 else rng.choice(PROSE))
    text = " ".join(words)
    return text[0].upper() + text[1:] + "."


def _code(rng: random.Random) -> str:
    args = ", ".join(rng.sample(NOUNS, rng.randint(1, 3)))
    lines = [f"def {_ident(rng)}(self, {args}, *, timeout: float = {rng.randint(1, 60)}.0) -> dict[str, int]:",
             f'    """{_sentence(rng, rng.randint(8, 14))}', "", f"    {_sentence(rng, rng.randint(10, 18))}", '    """']
    for _ in range(rng.randint(3, 7)):
        a, b = rng.sample(NOUNS, 2)
        k = rng.random()
        if k < 0.3:
            lines.append(f"    {a}_{b} = self._{_ident(rng)}({a}, key={b!r}, limit={rng.randint(1, 999)})")
        elif k < 0.5:
            lines.append(f"    if {a} is None or len({b}) > {rng.randint(2, 64)}:")
            lines.append(f'        raise ValueError(f"{a} {{{b}}} is {rng.choice(ADJ)}")')
        elif k < 0.7:
            lines.append(f"    for {a} in sorted({b}.items(), key=lambda kv: kv[1]):")
            lines.append(f"        result[{a}[0]] += {rng.randint(1, 9)}  # {rng.choice(PROSE)} {rng.choice(NOUNS)}")
        else:
            lines.append(f"    {a}.{rng.choice(VERBS)}({b}.{rng.choice(NOUNS)}, strict={rng.choice(['True', 'False'])})")
    lines.append("    return result")
    return "\n".join(lines)


def _commit(rng: random.Random) -> str:
    head = f"{rng.choice(NOUNS).capitalize()}: {rng.choice(VERBS)} {rng.choice(ADJ)} {rng.choice(NOUNS)} " \
           f"on {rng.choice(NOUNS)}"
    return head + "\n\n" + " ".join(_sentence(rng, rng.randint(8, 14)) for _ in range(rng.randint(1, 3)))


def _doc(rng: random.Random) -> str:
    return " ".join(_sentence(rng, rng.randint(12, 22)) for _ in range(rng.randint(5, 10)))


def timing_mix(n: int, seed: int = 7) -> tuple[list[str], list[str]]:
    """n texts and their chunk kinds (graphmem's node kinds: symbol, commit, document)."""
    rng = random.Random(seed)
    texts, kinds = [], []
    for _ in range(n):
        r = rng.random()
        kind, make = ("symbol", _code) if r < 0.6 else ("commit", _commit) if r < 0.8 else ("document", _doc)
        texts.append(make(rng))
        kinds.append(kind)
    return texts, kinds


# ------------------------------------------------------------------------------------------ retrieval tasks


class Task:
    """Passages, queries and the gold passage indexes of each query."""

    def __init__(self, name: str, passages: list[str], kind: str, queries: list[str], gold: list[set[int]]) -> None:
        self.name, self.passages, self.kind, self.queries, self.gold = name, passages, kind, queries, gold


def task_musique() -> Task:
    corpus = json.loads((DATASETS / "musique_train_sample" / "musique_train_corpus.json").read_text())
    questions = json.loads((DATASETS / "musique_train_sample" / "musique_train.json").read_text())
    passages = [f"{p['title']}\n{p['text']}" for p in corpus]
    where = {(p["title"], p["text"]): i for i, p in enumerate(corpus)}
    gold = [{where[(p["title"], p["paragraph_text"])] for p in q["paragraphs"] if p["is_supporting"]}
            for q in questions]
    return Task("musique", passages, "document", [q["question"] for q in questions], gold)


def task_hotpotqa() -> Task:
    corpus = json.loads((DATASETS / "hotpotqa_train_sample" / "hotpotqa_train_corpus.json").read_text())
    questions = json.loads((DATASETS / "hotpotqa_train_sample" / "hotpotqa_train.json").read_text())
    titles = sorted(corpus)
    where = {t: i for i, t in enumerate(titles)}
    passages = [f"{t}\n{''.join(corpus[t])}" for t in titles]
    gold = [{where[t] for t, _ in q["supporting_facts"]} for q in questions]
    return Task("hotpotqa", passages, "document", [q["question"] for q in questions], gold)


def task_2wiki() -> Task:
    corpus = json.loads((DATASETS / "2wikimultihopqa" / "2wikimultihopqa_corpus.json").read_text())
    questions = json.loads((DATASETS / "2wikimultihopqa" / "2wikimultihopqa_first37.json").read_text())
    where = {p["title"]: i for i, p in enumerate(corpus)}
    passages = [f"{p['title']}\n{p['text']}" for p in corpus]
    gold = [{where[t] for t, _ in q["supporting_facts"]} for q in questions]
    return Task("2wiki37", passages, "document", [q["question"] for q in questions], gold)


STDLIB_MODULES = ("argparse", "ast", "base64", "calendar", "configparser", "csv", "difflib", "email/message",
                  "email/utils", "fnmatch", "fractions", "ftplib", "gettext", "gzip", "heapq", "http/client",
                  "http/cookiejar", "imaplib", "inspect", "ipaddress", "json/decoder", "json/encoder", "locale",
                  "logging/__init__", "logging/handlers", "mailbox", "netrc", "ntpath", "optparse", "pathlib",
                  "pickletools", "platform", "plistlib", "poplib", "posixpath", "pprint", "shlex", "shutil",
                  "smtplib", "socket", "statistics", "string", "subprocess", "tarfile", "tempfile", "textwrap",
                  "threading", "tokenize", "traceback", "urllib/parse", "urllib/request", "uuid", "zipfile")


def task_code(limit: int = 300) -> Task:
    """Code search on the running Python's standard library: docstring summary -> function without docstring."""
    root = Path(sysconfig.get_paths()["stdlib"])
    pairs: list[tuple[str, str]] = []
    for mod in STDLIB_MODULES:
        path = root / f"{mod}.py"
        if not path.is_file():
            path = root / mod / "__init__.py"
        if not path.is_file():
            continue
        src = path.read_text(encoding="utf-8", errors="replace")
        lines = src.splitlines()
        for node in ast.walk(ast.parse(src)):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.name.startswith("__"):
                continue
            doc = ast.get_docstring(node)
            if not doc or len(doc.split()) < 6 or node.end_lineno is None:
                continue
            summary = doc.strip().split("\n\n")[0].replace("\n", " ")
            d = node.body[0]
            body = lines[node.lineno - 1:d.lineno - 1] + lines[(d.end_lineno or d.lineno):node.end_lineno]
            if len(body) < 3:
                continue
            pairs.append((summary, "\n".join(body)))
    rng = random.Random(11)
    rng.shuffle(pairs)
    pairs = pairs[:limit]
    return Task("code", [p for _, p in pairs], "symbol", [q for q, _ in pairs], [{i} for i in range(len(pairs))])


TASKS: dict[str, Callable[[], Task]] = {"code": task_code, "musique": task_musique, "hotpotqa": task_hotpotqa,
                                        "2wiki": task_2wiki}


def score(passages: np.ndarray, queries: np.ndarray, gold: Sequence[set[int]], k: int = 5) -> tuple[float, float]:
    """Recall@k (share of gold passages in the top k) and MRR (first gold hit), exact cosine search."""
    sims = queries @ passages.T
    order = np.argsort(-sims, axis=1, kind="stable")
    recall, mrr = [], []
    for row, g in zip(order, gold):
        recall.append(len(g & set(row[:k].tolist())) / len(g))
        ranks = np.flatnonzero(np.isin(row, list(g)))
        mrr.append(1.0 / (ranks[0] + 1) if len(ranks) else 0.0)
    return float(np.mean(recall)), float(np.mean(mrr))


# ------------------------------------------------------------------------------------------ variants


class Baseline:
    """Plain sentence-transformers fp32, max_seq_length 256, its default batch size 32, no per-kind budgets."""

    name = "st-fp32 (baseline)"

    def __init__(self) -> None:
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(str(default_model_path()), device="cpu")
        self.model.max_seq_length = 256

    def encode(self, texts: Sequence[str], kinds: Sequence[str] | None = None) -> np.ndarray:
        return np.asarray(self.model.encode(list(texts), batch_size=32, normalize_embeddings=True,
                                            show_progress_bar=False), dtype=np.float32)


class Variant:
    def __init__(self, name: str, batch_size: int | None = None, **kwargs: object) -> None:
        self.name = name
        self.emb = load_embedder(**kwargs)  # type: ignore[arg-type]
        self.batch_size = batch_size

    def encode(self, texts: Sequence[str], kinds: Sequence[str] | None = None) -> np.ndarray:
        return self.emb.encode(texts, kinds=kinds, batch_size=self.batch_size)


VARIANTS: dict[str, dict[str, object]] = {
    "torch-fp32": {"backend": "torch"},  # the reference backend with per-kind budgets, batch 16
    "onnx-fp32": {"backend": "onnx", "precision": "fp32"},
    "onnx-int8": {"backend": "onnx", "precision": "int8"},  # the default (backend="auto")
    "onnx-int8-b8": {"backend": "onnx", "precision": "int8", "batch_size": 8},
    "onnx-int8-b32": {"backend": "onnx", "precision": "int8", "batch_size": 32},
    "onnx-int8-b64": {"backend": "onnx", "precision": "int8", "batch_size": 64},
    "onnx-int8-1thread": {"backend": "onnx", "precision": "int8", "threads": 1},
    "onnx-int8-code256": {"backend": "onnx", "precision": "int8", "max_tokens": {"commit": 128}},
}
DEFAULT_VARIANTS = ["torch-fp32", "onnx-fp32", "onnx-int8", "onnx-int8-b8", "onnx-int8-b32", "onnx-int8-code256"]


def timed(model: Baseline | Variant, texts: list[str], kinds: list[str], repeat: int) -> tuple[float, float]:
    """Best texts/s over ``repeat`` runs, wall clock and per CPU-second of this process.

    Best-of, and CPU time besides wall time, because a shared machine's other load slows wall time a lot while it
    changes the CPU time a run needs much less (spinning worker threads count as CPU time, so that figure is
    conservative for both backends).
    """
    model.encode(texts[:8], kinds[:8])  # warm-up
    best, best_cpu = float("inf"), float("inf")
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        model.encode(texts, kinds)
        best, best_cpu = min(best, time.perf_counter() - t0), min(best_cpu, time.process_time() - c0)
    return len(texts) / best, len(texts) / best_cpu


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--texts", type=int, default=400, help="texts in the timing mix (default 400)")
    ap.add_argument("--variants", nargs="+", default=DEFAULT_VARIANTS, choices=sorted(VARIANTS),
                    help="variants besides the baseline")
    ap.add_argument("--tasks", nargs="+", default=["code", "musique", "hotpotqa"], choices=sorted(TASKS),
                    help="retrieval tasks (2wiki embeds 6,119 passages: slow)")
    ap.add_argument("--repeat", type=int, default=3, help="timing runs per variant; the best counts")
    ap.add_argument("--no-quality", action="store_true", help="timing only")
    args = ap.parse_args(argv)

    texts, kinds = timing_mix(args.texts)
    tasks = [] if args.no_quality else [TASKS[t]() for t in args.tasks]
    print(f"timing mix: {len(texts)} texts ({kinds.count('symbol')} code, {kinds.count('commit')} commit, "
          f"{kinds.count('document')} doc); tasks: "
          + ", ".join(f"{t.name} {len(t.passages)}p/{len(t.queries)}q" for t in tasks), flush=True)

    rows: list[dict[str, object]] = []
    ref: dict[str, np.ndarray] = {}
    models: list[Callable[[], Baseline | Variant]] = [Baseline]
    models += [lambda v=v: Variant(v, **VARIANTS[v]) for v in args.variants]  # type: ignore[misc]
    base_speed = base_cpu = 0.0
    for make in models:
        model = make()
        speed, per_cpu = timed(model, texts, kinds, args.repeat)
        base_speed, base_cpu = base_speed or speed, base_cpu or per_cpu
        row: dict[str, object] = {"variant": model.name, "texts/s": speed, "x": speed / base_speed,
                                  "texts/cpu-s": per_cpu, "x cpu": per_cpu / base_cpu}
        cosines = []
        for t in tasks:
            p = model.encode(t.passages, [t.kind] * len(t.passages))
            q = np.stack([model.encode([x])[0] for x in t.queries]) if isinstance(model, Baseline) else \
                np.stack([model.emb.encode_query(x) for x in t.queries])
            r5, mrr = score(p, q, t.gold)
            row[f"{t.name} R@5"], row[f"{t.name} MRR"] = r5, mrr
            if t.name in ref:
                cosines.append((p * ref[t.name]).sum(axis=1))
            else:
                ref[t.name] = p
        if cosines:
            c = np.concatenate(cosines)
            row["cos mean"], row["cos min"] = float(c.mean()), float(c.min())
        rows.append(row)
        print("  " + "  ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()),
              flush=True)
        del model

    cols = list(dict.fromkeys(k for r in rows for k in r))
    fmt = {"texts/s": "{:.1f}", "x": "{:.2f}", "texts/cpu-s": "{:.1f}", "x cpu": "{:.2f}"}
    table = [[fmt.get(c, "{:.4f}").format(r[c]) if isinstance(r.get(c), float) else str(r.get(c, "-"))
              for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in table)) for i, c in enumerate(cols)]
    print(f"\npython {sys.version.split()[0]}, {os.cpu_count()} CPUs; texts/s = best of {args.repeat}; "
          "cos = variant vs baseline passage vectors")
    print(" | ".join(c.ljust(w) for c, w in zip(cols, widths)))
    print("-|-".join("-" * w for w in widths))
    for row in table:
        print(" | ".join(v.ljust(w) for v, w in zip(row, widths)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
