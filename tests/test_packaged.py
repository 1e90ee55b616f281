"""The default embedder's install from its Maven Central jar: the real jar (the copy ``scripts/bootstrap`` fetched
or the local Maven repository's), converted and compared with the jar's own ONNX graph; no mocks."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from graphmem.errors import ModelError
from graphmem.retrieval import packaged
from graphmem.retrieval.embed import (DEFAULT_MODEL_NAME, MINILM_NAME, OnnxEmbedder, _pool, load_embedder,
                                      pad_encodings, resolve_model)
from tests.conftest import require

TEXTS = ["def parse_args(argv):\n    return build_parser().parse_args(argv)",
         "Fix a race in the connection pool when idle sockets are closed",
         "ADR 12: the ledger keeps its own database; billing reaches it through events."]


@pytest.fixture(scope="module")
def jar() -> Path:
    found = packaged.local_jar()
    require(found is not None, f"a local copy of {packaged.BGE_SMALL.jar_name} (scripts/bootstrap downloads it)")
    assert found is not None
    return found


def test_installed_default_reproduces_the_jars_own_graph(jar: Path, tmp_path: Path) -> None:
    import onnxruntime as ort
    from tokenizers import Tokenizer

    with zipfile.ZipFile(jar) as archive:
        graph = archive.read(packaged.BGE_SMALL.onnx_entry)
    tokenizer = Tokenizer.from_file(str(resolve_model().path / "tokenizer.json"))
    tokenizer.no_padding()
    ids, mask, types = pad_encodings(tokenizer.encode_batch(TEXTS))
    session = ort.InferenceSession(graph, providers=["CPUExecutionProvider"])
    hidden = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})[0]
    want = _pool(hidden, mask, "cls")
    want /= np.linalg.norm(want, axis=1, keepdims=True)
    fp32 = load_embedder(backend="onnx", precision="fp32", cache_dir=tmp_path / "cache")
    assert isinstance(fp32, OnnxEmbedder) and fp32.name == DEFAULT_MODEL_NAME
    assert (fp32.encode(TEXTS) * want).sum(axis=1).min() > 0.9999


def test_install_writes_a_complete_model_once(jar: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRAPHMEM_MODELS_DIR", str(tmp_path / "models"))
    monkeypatch.delenv("GRAPHMEM_EMBEDDER", raising=False)
    with pytest.raises(ModelError, match="graphmem.retrieval.packaged install"):
        resolve_model()
    where = packaged.install(jar=jar)
    assert where == packaged.installed() == tmp_path / "models" / DEFAULT_MODEL_NAME
    stamp = json.loads((where / ".installed.json").read_text(encoding="utf-8"))
    assert stamp["sha256"] == packaged.BGE_SMALL.sha256
    assert all(p.stat().st_mode & 0o044 == 0o044 for p in where.rglob("*"))  # readable by the service's user
    info = resolve_model()
    assert (info.name, info.pooling, info.normalize, info.max_seq_length) == (DEFAULT_MODEL_NAME, "cls", True, 512)
    assert info.query_prompt == packaged.BGE_SMALL.query_prompt
    before = (where / "model.safetensors").stat().st_mtime_ns
    assert packaged.install(jar=jar) == where and (where / "model.safetensors").stat().st_mtime_ns == before
    assert not [p for p in where.parent.iterdir() if p.name.startswith(".")]  # no staging left behind


def test_a_wrong_jar_is_refused_and_the_installed_model_kept(jar: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRAPHMEM_MODELS_DIR", str(tmp_path / "models"))
    where = packaged.install(jar=jar)
    fake = tmp_path / packaged.BGE_SMALL.jar_name
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(packaged.BGE_SMALL.onnx_entry, b"not a graph")
    fake.write_bytes(buffer.getvalue())
    with pytest.raises(ModelError, match="sha256 differs"):
        packaged.install(jar=fake, force=True)
    with pytest.raises(ModelError, match="cannot read"):
        packaged.install(jar=tmp_path / "missing.jar", force=True)
    assert packaged.installed() == where and (where / "model.safetensors").is_file()
    with pytest.raises(ModelError, match="unreadable ONNX graph"):
        packaged.onnx_bert_weights(b"not a graph")


def test_questions_carry_the_query_prompt_and_passages_do_not(embedder: Any) -> None:
    emb = embedder
    question = "where are command line options parsed?"
    assert np.allclose(emb.encode_query(question), emb.encode([packaged.BGE_SMALL.query_prompt + question])[0],
                       atol=1e-6)
    assert not np.allclose(emb.encode_query(question), emb.encode([question])[0], atol=1e-3)
    passages = emb.encode(TEXTS)
    assert int(np.argmax(passages @ emb.encode_query("which change fixed closing idle pooled sockets"))) == 1


def test_the_embedder_can_be_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRAPHMEM_EMBEDDER", MINILM_NAME)
    info = resolve_model()
    assert info.name == MINILM_NAME and info.pooling == "mean" and info.query_prompt == ""
    monkeypatch.setenv("GRAPHMEM_EMBEDDER", str(info.path))
    assert resolve_model().name == MINILM_NAME  # the packaged model named by its path keeps its name
    monkeypatch.setenv("GRAPHMEM_EMBEDDER", "/no/such/model")
    with pytest.raises(ModelError, match="not a directory"):
        resolve_model()
