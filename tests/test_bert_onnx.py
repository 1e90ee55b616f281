"""The torch-free ONNX builder: what it refuses, and the cross-encoder head scored where torch cannot be imported.

Runs on the real packaged weights (the default embedder, and all-MiniLM-L6-v2, the reranker's base); no mocks. The
processes that must not use torch block their import (``sys.modules[name] = None``), as an installation without the
``train`` extra would.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from graphmem.errors import ModelError
from graphmem.retrieval.bert_onnx import UnsupportedModel, load_weights, read_spec
from graphmem.retrieval.embed import default_model_path, minilm_path
from tests.conftest import require

os.environ.setdefault("HF_HUB_OFFLINE", "1")
NO_TORCH = ("import sys\n"
            "for name in ('torch', 'transformers', 'sentence_transformers'):\n"
            "    sys.modules[name] = None\n")
MINILM = {"model_type": "bert", "hidden_size": 384, "num_attention_heads": 12, "num_hidden_layers": 6,
          "intermediate_size": 1536, "hidden_act": "gelu", "layer_norm_eps": 1e-12}


def _run_without_torch(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", NO_TORCH + code], capture_output=True, text=True, timeout=300)


def _model_dir(tmp_path: Path, **config: object) -> Path:
    d = tmp_path / "model"
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps(MINILM | config), encoding="utf-8")
    return d


def test_reads_the_packaged_models_architecture() -> None:
    spec = read_spec(default_model_path())
    assert (spec.hidden, spec.heads, spec.layers, spec.intermediate, spec.head_dim) == (384, 12, 12, 1536, 32)
    assert spec.eps == pytest.approx(1e-12)
    weights = load_weights(default_model_path(), spec)
    assert weights["encoder.layer.11.output.dense.weight"].shape == (384, 1536)
    assert read_spec(minilm_path()).layers == 6
    assert all(w.dtype == np.float32 for w in weights.values())


@pytest.mark.parametrize(("config", "reason"), [
    ({"model_type": "roberta"}, "model_type 'roberta'"),
    ({"model_type": "distilbert"}, "model_type 'distilbert'"),
    ({"hidden_act": "gelu_new"}, "hidden_act 'gelu_new'"),
    ({"position_embedding_type": "relative_key"}, "relative_key"),
    ({"num_attention_heads": 7}, "not a multiple"),
    ({"is_decoder": True}, "decoder"),
])
def test_refuses_what_it_does_not_build(tmp_path: Path, config: dict[str, object], reason: str) -> None:
    with pytest.raises(UnsupportedModel, match=reason):
        read_spec(_model_dir(tmp_path, **config))


def test_refuses_weights_it_cannot_read(tmp_path: Path) -> None:
    d = _model_dir(tmp_path)
    (d / "pytorch_model.bin").write_bytes(b"a pickle only torch reads")
    with pytest.raises(UnsupportedModel, match="model.safetensors"):
        load_weights(d, read_spec(d))
    from safetensors.numpy import save_file

    save_file({"embeddings.word_embeddings.weight": np.zeros((10, 384), np.float32)}, str(d / "model.safetensors"))
    with pytest.raises(UnsupportedModel, match="position_embeddings"):
        load_weights(d, read_spec(d))
    with pytest.raises(ModelError, match="unreadable config.json"):
        (d / "config.json").write_text("{not json", encoding="utf-8")
        read_spec(d)


def test_unsupported_model_without_torch_says_what_to_install(tmp_path: Path) -> None:
    d = _model_dir(tmp_path, model_type="roberta")
    shutil.copy(default_model_path() / "tokenizer.json", d / "tokenizer.json")
    from safetensors.numpy import save_file

    save_file({"x": np.zeros(4, np.float32)}, str(d / "model.safetensors"))
    out = _run_without_torch("from graphmem.retrieval.embed import load_embedder\n"
                             f"load_embedder({str(d)!r}, cache_dir={str(tmp_path / 'cache')!r})\n")
    assert out.returncode != 0
    assert "ModelError" in out.stderr and "without torch" in out.stderr and "'train' extra" in out.stderr


def test_cross_encoder_scores_without_torch(tmp_path: Path) -> None:
    """A BertForSequenceClassification (the reranker's shape) exported by the builder's logits head, in a process
    without torch, scores as transformers does."""
    import importlib.util

    require(importlib.util.find_spec("torch") is not None and importlib.util.find_spec("transformers") is not None,
            "torch and transformers (the 'train' extra, part of 'dev') build the reference model")
    import torch
    import transformers

    from graphmem.retrieval.rerank import CrossEncoderReranker

    torch.manual_seed(0)
    base = str(minilm_path())
    model = transformers.AutoModelForSequenceClassification.from_pretrained(base, num_labels=1, local_files_only=True)
    out_dir = tmp_path / "cross-encoder"
    model.save_pretrained(out_dir)
    transformers.AutoTokenizer.from_pretrained(base, local_files_only=True).save_pretrained(out_dir)
    query = "Which code books ledger entries?"
    texts = ["def post_entry(self, entry):\n    return self.http.post('/v1/entries', entry)",
             "INC-042 Invoice creation failing with HTTP 500", "payments (team:payments)", "x", "ledger " * 200]
    want = np.array(CrossEncoderReranker(out_dir, backend="torch").logits(query, texts))
    code = ("import json\n"
            "from graphmem.retrieval.rerank import CrossEncoderReranker\n"
            f"r = CrossEncoderReranker({str(out_dir)!r}, backend='onnx')\n"
            f"print(json.dumps(r.logits({query!r}, {texts!r})))\n")
    out = _run_without_torch(code)
    assert out.returncode == 0, out.stderr[-3000:]
    got = np.array(json.loads(out.stdout.strip().splitlines()[-1]))
    assert np.allclose(got, want, atol=1e-3 * max(1.0, float(np.abs(want).max()))), (got, want)
