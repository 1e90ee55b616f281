"""The packaged-embedder comparison's ranking and pins (``eval/embedders.py``); fetching needs the network."""

from __future__ import annotations

import re

import numpy as np

from eval.embedders import PACKAGED, ranked_nodes


def test_a_node_ranks_by_its_best_chunk_and_appears_once() -> None:
    matrix = np.array([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0], [0.8, 0.6]], dtype=np.float32)
    keys = ["sym:a", "sym:b", "sym:c", "sym:a"]
    assert ranked_nodes(matrix, keys, np.array([0.0, 1.0], dtype=np.float32)) == ["sym:c", "sym:b", "sym:a"]
    assert ranked_nodes(matrix, keys, np.array([1.0, 0.0], dtype=np.float32), k=2) == ["sym:a", "sym:b"]


def test_every_packaged_model_is_pinned_by_coordinates_and_digest() -> None:
    for name, model in PACKAGED.items():
        group, artifact, version = model.artifact.split(":")
        assert group and artifact and re.fullmatch(r"\d+(\.\d+)*", version), name
        assert re.fullmatch(r"[0-9a-f]{64}", model.sha256), name
        assert model.onnx.endswith(".onnx") and model.tokenizer.endswith(".json"), name
        assert model.pooling in ("cls", "mean"), name
