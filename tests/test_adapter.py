"""The reranker kept as a low-rank adapter: its arithmetic, its file, the model it materialises (checked
against the torch model it was trained in) and the adapter graphmem ships, used with no training step."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest

from graphmem.errors import ModelError
from graphmem.retrieval import general_reranker
from graphmem.retrieval.adapter import file_digest, materialise, merged_weights, read_adapter, save_adapter
from graphmem.retrieval.rerank import CrossEncoderReranker, _chosen, load_reranker, packaged_base_model, reranker_status

os.environ.setdefault("HF_HUB_OFFLINE", "1")
QUESTION = "which function books an entry in the ledger"
TEXTS = ["def post_entry(ledger, entry):\n    ledger.append(entry)\n    return len(ledger) - 1",
         "def parse_header(line):\n    return line.split(':', 1)", "class Account:\n    pass"]


def test_updates_are_added_to_the_base_weights_and_must_fit() -> None:
    rng = np.random.default_rng(0)
    w = rng.normal(size=(4, 3)).astype(np.float32)
    a, b = rng.normal(size=(2, 3)), rng.normal(size=(4, 2))
    base = {"encoder.layer.0.attention.self.query.weight": w, "embeddings.word_embeddings.weight": np.zeros((5, 3))}
    arrays = {"encoder.layer.0.attention.self.query.lora_a": a, "encoder.layer.0.attention.self.query.lora_b": b,
              "encoder.layer.0.attention.self.query.lora_scale": np.float32(2.0),
              "classifier.weight": np.ones((1, 3)), "classifier.bias": np.zeros(1)}
    merged = merged_weights(base, arrays)
    np.testing.assert_allclose(merged["encoder.layer.0.attention.self.query.weight"], w + 2.0 * b @ a, rtol=1e-6)
    assert merged["classifier.weight"].shape == (1, 3)
    np.testing.assert_array_equal(base["encoder.layer.0.attention.self.query.weight"], w)  # base untouched
    with pytest.raises(ModelError, match="does not fit"):
        merged_weights(base, arrays | {"encoder.layer.0.attention.self.query.lora_b": np.ones((5, 2))})
    with pytest.raises(ModelError, match="does not have"):
        merged_weights(base, {k.replace("layer.0", "layer.7"): v for k, v in arrays.items()})
    with pytest.raises(ModelError, match="no classifier.bias"):
        merged_weights(base, {k: v for k, v in arrays.items() if k != "classifier.bias"})


def test_the_adapter_file_keeps_arrays_and_metadata_and_refuses_other_files(tmp_path: Path) -> None:
    arrays = {"pooler.dense.lora_a": np.full((2, 3), 0.125), "pooler.dense.lora_scale": np.float32(2.0)}
    path = save_adapter(tmp_path / "a.npz", arrays, {"kind": "general", "steps": 3})
    back, meta = read_adapter(path)
    assert meta["kind"] == "general" and meta["steps"] == 3 and meta["format"] == 1
    np.testing.assert_array_equal(back["pooler.dense.lora_a"], arrays["pooler.dense.lora_a"])
    assert back["pooler.dense.lora_scale"] == 2.0
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    np.savez(tmp_path / "other.npz", x=np.zeros(2))
    with pytest.raises(ModelError, match="not a graphmem reranker adapter"):
        read_adapter(tmp_path / "other.npz")
    (tmp_path / "broken.npz").write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(ModelError, match="cannot read reranker adapter"):
        read_adapter(tmp_path / "broken.npz")


def test_a_materialised_adapter_scores_as_the_torch_model_it_came_from(tmp_path: Path) -> None:
    import torch
    from graphmem.retrieval.general_reranker import _add_lora, _lora_arrays
    from graphmem.retrieval.rerank import load_base_cross_encoder

    base = packaged_base_model()
    tokenizer, model = load_base_cross_encoder(str(base), "the test")
    torch.manual_seed(1)
    for param in model.parameters():
        param.requires_grad_(False)
    lora = _add_lora(model.base_model, 3, 4)
    with torch.no_grad():  # as after training: updates far from zero, a classifier of its own
        for module in lora.values():
            module.lora_b.normal_(0.0, 0.05)
        model.classifier.weight.normal_(0.0, 1.0)
    model.eval()
    enc = tokenizer([QUESTION] * len(TEXTS), TEXTS, truncation="longest_first", max_length=128, padding=True,
                    return_tensors="pt")
    with torch.no_grad():
        want = model(**enc).logits[:, 0].numpy()
    adapter = save_adapter(tmp_path / "a.npz", _lora_arrays(model, lora),
                           {"kind": "general", "base_sha256": file_digest(base / "model.safetensors")})
    out = materialise(adapter, base, tmp_path / "model")
    got = CrossEncoderReranker(out, backend="onnx").logits(QUESTION, TEXTS)
    np.testing.assert_allclose(got, want, atol=0.02)  # the adapter is stored in float16
    # Without the updates the scores differ: the check above is not passing on the base alone.
    bare = save_adapter(tmp_path / "b.npz", {k: (v * 0 if ".lora_b" in k else v)
                                            for k, v in _lora_arrays(model, lora).items()}, {"kind": "general"})
    assert np.abs(np.array(CrossEncoderReranker(materialise(bare, base, tmp_path / "bare"), backend="onnx")
                           .logits(QUESTION, TEXTS)) - want).max() > 0.2
    # An adapter trained on other base weights is refused, and nothing is written.
    other = save_adapter(tmp_path / "c.npz", _lora_arrays(model, lora), {"kind": "general", "base_sha256": "0" * 64})
    with pytest.raises(ModelError, match="other base weights"):
        materialise(other, base, tmp_path / "refused")
    assert not (tmp_path / "refused").exists()


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("GRAPHMEM_RERANKER", raising=False)
    cache = tmp_path / "models"
    monkeypatch.setenv("GRAPHMEM_MODEL_CACHE", str(cache))
    return cache


def test_the_shipped_adapter_is_the_reranker_of_a_machine_that_built_none(fresh_cache: Path, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    assert general_reranker.SHIPPED_ADAPTER.is_file(), "graphmem ships its general reranker as an adapter"
    _, meta = read_adapter(general_reranker.SHIPPED_ADAPTER)
    assert meta["kind"] == "general" and meta["lora_rank"] > 0 and meta["steps"] > 0
    # Asking which model would be used writes nothing.
    status = reranker_status(tmp_path, "acme")
    assert status["source"] == "shipped" and not Path(status["path"]).exists()
    # scripts/bootstrap prepares it: the model folder and its int8 ONNX graph, before any query.
    assert general_reranker.main(["prepare"]) == 0 and Path(status["path"]).is_dir()
    rr = load_reranker(tmp_path, "acme")
    assert rr is not None and rr.onnx_path(quantized=True).is_file()
    assert isinstance(rr, CrossEncoderReranker) and rr.general and rr.path == Path(status["path"]).resolve()
    logits = rr.logits(QUESTION, TEXTS)
    assert all(math.isfinite(x) for x in logits) and logits[0] > logits[2]
    written = (rr.path / "model.safetensors").stat().st_mtime_ns
    assert _chosen(tmp_path, "acme") == ("shipped", rr.path) and (rr.path / "model.safetensors").stat().st_mtime_ns == written
    # GRAPHMEM_RERANKER=none turns reranking off; without an adapter there is no model at all.
    monkeypatch.setenv("GRAPHMEM_RERANKER", "none")
    assert load_reranker(tmp_path, "acme") is None
    monkeypatch.delenv("GRAPHMEM_RERANKER")
    monkeypatch.setattr(general_reranker, "SHIPPED_ADAPTER", tmp_path / "absent.npz")
    assert load_reranker(tmp_path, "acme") is None and reranker_status(tmp_path, "acme")["source"] is None
