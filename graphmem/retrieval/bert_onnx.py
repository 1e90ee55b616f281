"""A BERT encoder's ONNX graph built from its safetensors weights with ``onnx.helper``: no torch.

The graph follows the layout torch's exporter gives ``BertModel`` (embeddings, then per layer self-attention with
the attention mask as an additive bias, a residual LayerNorm, a GELU feed-forward block and another residual
LayerNorm), node for node where it matters, so onnxruntime's BERT optimizer fuses it into the same
EmbedLayerNormalization, Attention, SkipLayerNormalization and BiasGelu operators. ``head="logits"`` adds the
pooler and classifier of ``BertForSequenceClassification`` (the reranker). ``reference_forward`` is an
independent numpy forward pass of the same weights: what a build is checked against where transformers is not
installed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from graphmem.errors import ModelError

if TYPE_CHECKING:
    import onnx

Head = Literal["hidden", "logits"]
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
# Added to the attention scores of padding: the value onnxruntime's fused Attention uses, far below any score.
MASK_BIAS = -10000.0
_WORD = "embeddings.word_embeddings.weight"


class UnsupportedModel(ModelError):
    """The model is not a BERT encoder this builder reproduces (torch's exporter may still handle it)."""


@dataclass(frozen=True)
class BertSpec:
    """The architecture numbers of a BERT encoder, from its ``config.json``."""

    hidden: int
    heads: int
    layers: int
    intermediate: int
    eps: float
    num_labels: int

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


def read_spec(model_dir: Path) -> BertSpec:
    """Architecture of the model in ``model_dir``; ``UnsupportedModel`` unless it is a plain BERT encoder."""
    try:
        cfg = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelError(f"unreadable config.json in {model_dir}: {exc}") from exc
    if not isinstance(cfg, dict):
        raise ModelError(f"config.json in {model_dir} is not an object")
    kind = cfg.get("model_type")
    if kind != "bert":
        raise UnsupportedModel(f"model_type {kind!r} is not a BERT encoder (only 'bert' is built without torch)")
    # transformers' "gelu" for BERT is the exact erf form; the tanh approximations would need another graph.
    act = cfg.get("hidden_act", "gelu")
    if act != "gelu":
        raise UnsupportedModel(f"hidden_act {act!r} is not supported (only 'gelu', the erf form)")
    position = cfg.get("position_embedding_type", "absolute")
    if position != "absolute":
        raise UnsupportedModel(f"position_embedding_type {position!r} is not supported (only 'absolute')")
    if cfg.get("is_decoder") or cfg.get("add_cross_attention"):
        raise UnsupportedModel("decoder / cross-attention BERT variants are not supported")
    try:
        spec = BertSpec(hidden=int(cfg["hidden_size"]), heads=int(cfg["num_attention_heads"]),
                        layers=int(cfg["num_hidden_layers"]), intermediate=int(cfg["intermediate_size"]),
                        eps=float(cfg.get("layer_norm_eps", 1e-12)),
                        num_labels=len(cfg["id2label"]) if cfg.get("id2label") else int(cfg.get("num_labels", 2)))
    except (KeyError, TypeError, ValueError) as exc:
        raise UnsupportedModel(f"config.json lacks BERT architecture numbers: {exc}") from exc
    if min(spec.hidden, spec.heads, spec.layers, spec.intermediate) <= 0 or spec.hidden % spec.heads:
        raise UnsupportedModel(f"hidden_size {spec.hidden} is not a multiple of {spec.heads} attention heads")
    return spec


def load_weights(model_dir: Path, spec: BertSpec, head: Head = "hidden") -> dict[str, np.ndarray]:
    """The tensors the graph needs, float32, under ``BertModel`` names (a ``bert.`` style prefix is dropped).

    Only ``model.safetensors`` is read: ``pytorch_model.bin`` is a pickle that needs torch.
    """
    path = model_dir / "model.safetensors"
    if not path.is_file():
        raise UnsupportedModel(f"no model.safetensors in {model_dir} (other weight formats need torch)")
    try:
        from safetensors.numpy import load_file

        raw = load_file(str(path))
    except ImportError as exc:
        raise UnsupportedModel(f"reading safetensors weights needs the safetensors package: {exc}") from exc
    except Exception as exc:  # noqa: BLE001 - bfloat16 (no numpy dtype) or a damaged file
        raise UnsupportedModel(f"cannot read {path} with numpy: {exc.__class__.__name__}: {exc}") from exc
    prefix = next((k[: -len(_WORD)] for k in raw if k.endswith(_WORD)), None)
    if prefix is None:
        raise UnsupportedModel(f"{path} has no {_WORD}: not a BERT checkpoint")
    h, i = spec.hidden, spec.intermediate
    shapes: dict[str, tuple[int, ...]] = {
        "embeddings.word_embeddings.weight": (-1, h), "embeddings.position_embeddings.weight": (-1, h),
        "embeddings.token_type_embeddings.weight": (-1, h),
        "embeddings.LayerNorm.weight": (h,), "embeddings.LayerNorm.bias": (h,)}
    for n in range(spec.layers):
        p = f"encoder.layer.{n}."
        for part in ("query", "key", "value"):
            shapes |= {f"{p}attention.self.{part}.weight": (h, h), f"{p}attention.self.{part}.bias": (h,)}
        shapes |= {f"{p}attention.output.dense.weight": (h, h), f"{p}attention.output.dense.bias": (h,),
                   f"{p}attention.output.LayerNorm.weight": (h,), f"{p}attention.output.LayerNorm.bias": (h,),
                   f"{p}intermediate.dense.weight": (i, h), f"{p}intermediate.dense.bias": (i,),
                   f"{p}output.dense.weight": (h, i), f"{p}output.dense.bias": (h,),
                   f"{p}output.LayerNorm.weight": (h,), f"{p}output.LayerNorm.bias": (h,)}
    if head == "logits":
        shapes |= {"pooler.dense.weight": (h, h), "pooler.dense.bias": (h,)}
    out: dict[str, np.ndarray] = {}
    for name, shape in shapes.items():
        tensor = raw.get(prefix + name)
        if tensor is None or tensor.ndim != len(shape) or any(s not in (-1, d) for s, d in zip(shape, tensor.shape)):
            got = "missing" if tensor is None else f"shape {tuple(tensor.shape)}"
            raise UnsupportedModel(f"{path}: {prefix + name} is {got}, expected {shape} for this config")
        out[name] = np.ascontiguousarray(tensor, dtype=np.float32)
    if head == "logits":
        # The classifier sits beside the encoder (``classifier.*``), not under its prefix.
        w, b = raw.get("classifier.weight"), raw.get("classifier.bias")
        if w is None or b is None or w.shape != (spec.num_labels, h) or b.shape != (spec.num_labels,):
            raise UnsupportedModel(f"{path}: no classifier of {spec.num_labels} labels over {h} features")
        out["classifier.weight"], out["classifier.bias"] = w.astype(np.float32), b.astype(np.float32)
    return out


def build_graph(weights: dict[str, np.ndarray], spec: BertSpec, head: Head = "hidden", *,
                opset: int = 17) -> onnx.ModelProto:
    """The ONNX model: inputs ``INPUTS`` (int64, [batch, seq]), output ``last_hidden_state``
    [batch, seq, hidden] or, for ``head="logits"``, ``logits`` [batch, labels]."""
    from onnx import TensorProto, helper, numpy_helper

    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []
    count = 0

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(op: str, inputs: list[str], name: str, **attrs: object) -> str:
        nonlocal count
        count += 1
        out = f"{name}_{count}"
        nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def weight(key: str, transpose: bool = False) -> str:
        # torch's Linear keeps [out, in]; MatMul wants [in, out].
        value = weights[key].T if transpose else weights[key]
        return const(key, np.ascontiguousarray(value, dtype=np.float32))

    def linear(x: str, key: str, name: str) -> str:
        # Add(bias, MatMul): the operand order of torch's export, the one onnxruntime's fusions are written against.
        mm = node("MatMul", [x, weight(f"{key}.weight", transpose=True)], f"{name}/MatMul")
        return node("Add", [weight(f"{key}.bias"), mm], f"{name}/Add")

    def layer_norm(x: str, key: str, name: str) -> str:
        return node("LayerNormalization", [x, weight(f"{key}.weight"), weight(f"{key}.bias")], name,
                    axis=-1, epsilon=spec.eps)

    i64 = np.int64
    one_i, zero_i = const("const_one_1d", np.array([1], i64)), const("const_zero_1d", np.array([0], i64))

    # Embeddings: word + token type, then + position ids sliced to the batch's length (the BERT pattern the
    # EmbedLayerNormalization fusion recognises), then LayerNorm.
    word = node("Gather", [weight("embeddings.word_embeddings.weight"), "input_ids"], "embeddings/word")
    types = node("Gather", [weight("embeddings.token_type_embeddings.weight"), "token_type_ids"], "embeddings/type")
    summed = node("Add", [word, types], "embeddings/Add")
    positions = weights["embeddings.position_embeddings.weight"].shape[0]
    pos_ids = const("embeddings.position_ids", np.arange(positions, dtype=i64)[None, :])
    shape = node("Shape", ["input_ids"], "embeddings/Shape")
    seq = node("Gather", [shape, const("const_one", np.array(1, i64))], "embeddings/seq_len", axis=0)
    seq1 = node("Unsqueeze", [seq, zero_i], "embeddings/Unsqueeze")
    sliced = node("Slice", [pos_ids, zero_i, seq1, one_i, one_i], "embeddings/position_ids")
    pos = node("Gather", [weight("embeddings.position_embeddings.weight"), sliced], "embeddings/position")
    hidden = layer_norm(node("Add", [summed, pos], "embeddings/Add"), "embeddings.LayerNorm", "embeddings/LayerNorm")

    # Attention mask [batch, seq] -> additive bias [batch, 1, 1, seq]: 0 for tokens, MASK_BIAS for padding.
    mask = node("Unsqueeze", ["attention_mask", one_i], "mask/Unsqueeze")
    mask = node("Unsqueeze", [mask, const("const_two_1d", np.array([2], i64))], "mask/Unsqueeze")
    mask = node("Cast", [mask], "mask/Cast", to=TensorProto.FLOAT)
    mask = node("Sub", [const("const_one_f", np.array(1.0, np.float32)), mask], "mask/Sub")
    bias = node("Mul", [mask, const("mask_bias", np.array(MASK_BIAS, np.float32))], "mask/Mul")

    split = const("shape_heads", np.array([0, 0, spec.heads, spec.head_dim], i64))  # 0: keep that input dim
    merge = const("shape_hidden", np.array([0, 0, spec.hidden], i64))
    # Div, not Mul by the reciprocal: the Attention fusion looks for the mask's Mul among the Add's parents.
    scale = const("attention_scale", np.array(np.sqrt(spec.head_dim), np.float32))
    sqrt2 = const("const_sqrt2", np.array(np.sqrt(2.0), np.float32))
    one_f, half = const("const_one_gelu", np.array(1.0, np.float32)), const("const_half", np.array(0.5, np.float32))
    for n in range(spec.layers):
        p, at = f"encoder.layer.{n}.", f"layer{n}/attention"
        q = node("Transpose", [node("Reshape", [linear(hidden, f"{p}attention.self.query", f"{at}/query"), split],
                                    f"{at}/q/Reshape")], f"{at}/q/Transpose", perm=[0, 2, 1, 3])
        k = node("Transpose", [node("Reshape", [linear(hidden, f"{p}attention.self.key", f"{at}/key"), split],
                                    f"{at}/k/Reshape")], f"{at}/k/Transpose", perm=[0, 2, 3, 1])
        v = node("Transpose", [node("Reshape", [linear(hidden, f"{p}attention.self.value", f"{at}/value"), split],
                                    f"{at}/v/Reshape")], f"{at}/v/Transpose", perm=[0, 2, 1, 3])
        scores = node("Div", [node("MatMul", [q, k], f"{at}/scores"), scale], f"{at}/scale")
        probs = node("Softmax", [node("Add", [scores, bias], f"{at}/mask")], f"{at}/Softmax", axis=-1)
        ctx = node("Transpose", [node("MatMul", [probs, v], f"{at}/context")], f"{at}/ctx/Transpose",
                   perm=[0, 2, 1, 3])
        ctx = node("Reshape", [ctx, merge], f"{at}/ctx/Reshape")
        attended = node("Add", [linear(ctx, f"{p}attention.output.dense", f"{at}/output"), hidden], f"{at}/residual")
        attended = layer_norm(attended, f"{p}attention.output.LayerNorm", f"{at}/LayerNorm")
        ff = f"layer{n}/ffn"
        up = linear(attended, f"{p}intermediate.dense", f"{ff}/up")
        # GELU, erf form: x * (1 + erf(x / sqrt 2)) * 0.5, the node order the Gelu fusion expects.
        gelu = node("Add", [node("Erf", [node("Div", [up, sqrt2], f"{ff}/Div")], f"{ff}/Erf"), one_f], f"{ff}/Add")
        gelu = node("Mul", [node("Mul", [up, gelu], f"{ff}/Mul"), half], f"{ff}/Mul")
        down = node("Add", [linear(gelu, f"{p}output.dense", f"{ff}/down"), attended], f"{ff}/residual")
        hidden = layer_norm(down, f"{p}output.LayerNorm", f"{ff}/LayerNorm")

    dims = ["batch", "seq"]
    if head == "logits":
        first = node("Gather", [hidden, const("const_zero", np.array(0, i64))], "pooler/first", axis=1)
        pooled = node("Tanh", [linear(first, "pooler.dense", "pooler/dense")], "pooler/Tanh")
        result = linear(pooled, "classifier", "classifier")
        output = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", spec.num_labels])
    else:
        result = hidden
        output = helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, [*dims, spec.hidden])
    # The last node writes the graph output under its public name (no Identity node).
    assert nodes[-1].output[0] == result
    nodes[-1].output[0] = output.name
    graph = helper.make_graph(
        nodes, "bert", [helper.make_tensor_value_info(name, TensorProto.INT64, dims) for name in INPUTS], [output],
        initializer=inits, doc_string="BERT encoder built from safetensors weights by graphmem (no torch)")
    # No producer_name: onnxruntime's optimizer warns about any producer but torch's, and fuses this graph alike.
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 8)  # readable by every onnxruntime graphmem supports (>= 1.18)
    return model


def reference_forward(weights: dict[str, np.ndarray], spec: BertSpec, input_ids: np.ndarray,
                      attention_mask: np.ndarray, token_type_ids: np.ndarray, head: Head = "hidden") -> np.ndarray:
    """The same network in numpy (float64), written from the BERT definition rather than from the graph."""
    from scipy.special import erf

    w = {k: v.astype(np.float64) for k, v in weights.items()}

    def ln(x: np.ndarray, key: str) -> np.ndarray:
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + spec.eps) * w[f"{key}.weight"] + w[f"{key}.bias"]

    def dense(x: np.ndarray, key: str) -> np.ndarray:
        return x @ w[f"{key}.weight"].T + w[f"{key}.bias"]

    b, s = input_ids.shape
    x = (w["embeddings.word_embeddings.weight"][input_ids] + w["embeddings.token_type_embeddings.weight"][token_type_ids]
         + w["embeddings.position_embeddings.weight"][np.arange(s)][None])
    x = ln(x, "embeddings.LayerNorm")
    bias = (1.0 - attention_mask.astype(np.float64))[:, None, None, :] * MASK_BIAS

    def heads(t: np.ndarray) -> np.ndarray:  # [b, s, h] -> [b, heads, s, d]
        return t.reshape(b, s, spec.heads, spec.head_dim).transpose(0, 2, 1, 3)

    for n in range(spec.layers):
        p = f"encoder.layer.{n}."
        q, k, v = (heads(dense(x, f"{p}attention.self.{part}")) for part in ("query", "key", "value"))
        scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(spec.head_dim) + bias
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        ctx = (scores / scores.sum(-1, keepdims=True)) @ v
        ctx = ctx.transpose(0, 2, 1, 3).reshape(b, s, spec.hidden)
        x = ln(dense(ctx, f"{p}attention.output.dense") + x, f"{p}attention.output.LayerNorm")
        up = dense(x, f"{p}intermediate.dense")
        x = ln(dense(0.5 * up * (1.0 + erf(up / np.sqrt(2.0))), f"{p}output.dense") + x, f"{p}output.LayerNorm")
    if head == "logits":
        return dense(np.tanh(dense(x[:, 0], "pooler.dense")), "classifier")
    return x


__all__ = ["INPUTS", "BertSpec", "UnsupportedModel", "build_graph", "load_weights", "read_spec", "reference_forward"]
