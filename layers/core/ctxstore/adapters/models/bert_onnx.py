"""all-MiniLM-L6-v2 (a BERT encoder) with masked mean pooling, written as an ONNX graph from its weights.

The model's package carries safetensors, not ONNX; local_embedder.py builds the graph in memory on first use,
and bench/peers/export_model.py writes the same graph to disk so that every system compared embeds with it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

WORD_EMBEDDINGS = "word_emb"  # the graph's initializer name: sessions share one copy (local_embedder.py)


def build_bert_onnx(
    weights: dict[str, npt.NDArray[Any]], *, heads: int, layers: int, eps: float = 1e-12, int8: bool = False
) -> bytes:
    """A BERT encoder with masked mean pooling as a serialised ONNX model (opset 20).

    Inputs `input_ids` and `attention_mask` (int64, [batch, seq]); output `embedding` (float32,
    [batch, hidden]), not yet normalised. Token type ids are all zero, so that row is folded in.
    With `int8`, every weight matrix is stored as int8 with one scale per output column and runs as
    onnxruntime's DynamicQuantizeMatMul (activations quantised per call, VNNI/AMX int8 kernels);
    attention products, norms and pooling stay float32.
    """
    from onnx import TensorProto, helper, numpy_helper

    nodes: list[Any] = []
    inits: list[Any] = []

    def const(name: str, value: npt.NDArray[Any]) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def node(op: str, inputs: list[str], name: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    f32 = np.float32
    hidden = int(weights["embeddings.word_embeddings.weight"].shape[1])
    head_dim = hidden // heads
    const(WORD_EMBEDDINGS, weights["embeddings.word_embeddings.weight"].astype(f32))
    pos = weights["embeddings.position_embeddings.weight"].astype(f32)
    const("pos_emb", pos + weights["embeddings.token_type_embeddings.weight"][0].astype(f32))
    const("i_zero", np.array([0], dtype=np.int64))
    const("i_one", np.array([1], dtype=np.int64))
    const("f_one", np.array(1.0, dtype=f32))
    const("f_neg", np.array(-1.0e9, dtype=f32))
    const("f_tiny", np.array(1.0e-9, dtype=f32))
    const("f_scale", np.array(1.0 / np.sqrt(head_dim), dtype=f32))
    const("split_heads", np.array([0, 0, heads, head_dim], dtype=np.int64))
    const("merge_heads", np.array([0, 0, hidden], dtype=np.int64))

    shape = node("Shape", ["input_ids"], "ids_shape")
    seq_len = node("Slice", [shape, "i_one", "ids_shape_end"], "seq_len")
    const("ids_shape_end", np.array([2], dtype=np.int64))
    positions = node("Slice", ["pos_emb", "i_zero", seq_len, "i_zero"], "positions")
    words = node("Gather", [WORD_EMBEDDINGS, "input_ids"], "words")
    x = node("Add", [words, positions], "emb_sum")

    def layer_norm(inp: str, prefix: str, out: str) -> str:
        g = const(f"{prefix}.g", weights[f"{prefix}.weight"].astype(f32))
        b = const(f"{prefix}.b", weights[f"{prefix}.bias"].astype(f32))
        return node("LayerNormalization", [inp, g, b], out, axis=-1, epsilon=eps)

    def dense(inp: str, prefix: str, out: str) -> str:
        wt = weights[f"{prefix}.weight"].astype(f32).T  # [in, out]
        b = const(f"{prefix}.b", weights[f"{prefix}.bias"].astype(f32))
        if not int8:
            return node("Add", [node("MatMul", [inp, const(f"{prefix}.wt", wt)], f"{out}.mm"), b], out)
        # Symmetric per-column scales: the columns' ranges differ by an order of magnitude in BERT.
        scale = (np.maximum(np.abs(wt).max(axis=0), 1e-8) / 127.0).astype(f32)
        wq = const(f"{prefix}.wq", np.clip(np.rint(wt / scale), -127, 127).astype(np.int8))
        nodes.append(
            helper.make_node(
                "DynamicQuantizeMatMul",
                [inp, wq, const(f"{prefix}.ws", scale), "", b],
                [out],
                name=out,
                domain="com.microsoft",
            )
        )
        return out

    x = layer_norm(x, "embeddings.LayerNorm", "emb_out")
    mask_f = node("Cast", ["attention_mask"], "mask_f", to=TensorProto.FLOAT)
    mask_4d = node("Unsqueeze", [mask_f, "axes_12"], "mask_4d")
    const("axes_12", np.array([1, 2], dtype=np.int64))
    bias = node("Mul", [node("Sub", ["f_one", mask_4d], "mask_inv"), "f_neg"], "mask_bias")

    for i in range(layers):
        p = f"encoder.layer.{i}"
        q = node("Reshape", [dense(x, f"{p}.attention.self.query", f"l{i}.q"), "split_heads"], f"l{i}.q4")
        k = node("Reshape", [dense(x, f"{p}.attention.self.key", f"l{i}.k"), "split_heads"], f"l{i}.k4")
        v = node("Reshape", [dense(x, f"{p}.attention.self.value", f"l{i}.v"), "split_heads"], f"l{i}.v4")
        q = node("Transpose", [q], f"l{i}.qt", perm=[0, 2, 1, 3])
        k = node("Transpose", [k], f"l{i}.kt", perm=[0, 2, 3, 1])
        v = node("Transpose", [v], f"l{i}.vt", perm=[0, 2, 1, 3])
        scores = node("Mul", [node("MatMul", [q, k], f"l{i}.qk"), "f_scale"], f"l{i}.scores")
        probs = node("Softmax", [node("Add", [scores, bias], f"l{i}.masked")], f"l{i}.probs", axis=-1)
        ctx = node("Transpose", [node("MatMul", [probs, v], f"l{i}.ctx")], f"l{i}.ctxt", perm=[0, 2, 1, 3])
        ctx = node("Reshape", [ctx, "merge_heads"], f"l{i}.ctx3")
        attn = dense(ctx, f"{p}.attention.output.dense", f"l{i}.attn")
        x = layer_norm(node("Add", [attn, x], f"l{i}.res1"), f"{p}.attention.output.LayerNorm", f"l{i}.ln1")
        inter = node("Gelu", [dense(x, f"{p}.intermediate.dense", f"l{i}.ff1")], f"l{i}.gelu")
        out = dense(inter, f"{p}.output.dense", f"l{i}.ff2")
        x = layer_norm(node("Add", [out, x], f"l{i}.res2"), f"{p}.output.LayerNorm", f"l{i}.ln2")

    mask_3d = node("Unsqueeze", [mask_f, "axis_2"], "mask_3d")
    const("axis_2", np.array([2], dtype=np.int64))
    summed = node("ReduceSum", [node("Mul", [x, mask_3d], "masked_tokens"), "i_one"], "summed", keepdims=0)
    counts = node("ReduceSum", [mask_3d, "i_one"], "counts", keepdims=0)
    node("Div", [summed, node("Max", [counts, "f_tiny"], "counts_safe")], "embedding")

    graph = helper.make_graph(
        nodes,
        "bert_mean_pool",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"]),
        ],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", hidden])],
        inits,
    )
    opsets = [helper.make_opsetid("", 20)] + ([helper.make_opsetid("com.microsoft", 1)] if int8 else [])
    model = helper.make_model(graph, opset_imports=opsets, producer_name="ctxstore")
    model.ir_version = 10
    return bytes(model.SerializeToString())
