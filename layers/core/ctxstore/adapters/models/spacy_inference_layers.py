"""The loaded spaCy models' layers, set up for inference on this machine's BLAS with the same outputs.

- Every layer multiplies through numpy's OpenBLAS and sums its hash embeddings' rows with numpy. Loading under
  `use_ops("numpy", use_blis=False)` left the parser's and recogniser's output layers on thinc's bundled BLIS,
  which runs its generic reference kernel here (they were called once per decoding step once decoding moved to
  Python, spacy_greedy.py), and thinc's own row sums call that kernel's `saxpy` once per row.
- A maxout layer takes the max over its pieces with `np.maximum` over strided views instead of thinc's per-unit
  arg-max loop (10 % of the pipeline's CPU). The product is the one thinc's numpy ops take, with its weights in
  its layout: a piece-major copy of the weights was as fast but summed in another order on another EPYC, so its
  outputs differed in the last bits.
SciFact abstracts, one thread (docs/benchmarks.md, seventh pass): 17.3 -> 15.1 CPU-ms an abstract.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float32]
# Rows of a maxout product per block: 1.2 MB of pieces at 96 x 3 outputs, this machine's L2. Blocks of 1,024 took
# 15.4 ms where one product over the 17,000 rows of 64 SciFact abstracts took 20.7 (256: 16.8, 4,096: 14.9).
ROWS_PER_BLOCK = 1024


def prepare(nlp: Any) -> int:
    """Applies these changes to every trainable component of `nlp`; the number of layers rewritten."""
    from thinc.api import NumpyOps
    from thinc.layers import layernorm as thinc_layernorm
    from thinc.layers import maxout as thinc_maxout

    ops = _inference_ops()
    rewritten = 0
    for _, pipe in nlp.pipeline:
        model = getattr(pipe, "model", None)
        if model is None:
            continue
        for node in model.walk():
            if type(node.ops) is NumpyOps:  # (any other backend is the caller's choice)
                node.ops = ops
            if node._func is thinc_maxout.forward:  # thinc's Maxout, not rewritten yet
                node._func = _maxout_forward(node)
                rewritten += 1
            elif node._func is thinc_layernorm.forward:
                node._func = _layernorm_forward
                rewritten += 1
    return rewritten


@functools.cache
def _inference_ops() -> Any:
    """numpy's ops with the hash embeddings' row sums by numpy: thinc adds each row with BLIS's generic `saxpy`
    (1.0 ms a table for 8,300 tokens of four rows, 0.7 so), onto zeros in the same order, so the same floats."""
    from thinc.api import NumpyOps

    class InferenceOps(NumpyOps):  # type: ignore[misc]
        def gather_add(self, table: Any, indices: Any) -> Any:
            if table.dtype != np.float32 or indices.ndim != 2 or not len(indices):
                return super().gather_add(table, indices)
            if int(indices.max()) >= len(table):  # thinc checks too (its bound is off by one)
                raise IndexError("embedding index out of bounds")
            out = np.zeros((len(indices), table.shape[1]), dtype=np.float32)
            for k in range(indices.shape[1]):
                out += table[indices[:, k]]
            return out

    return InferenceOps(use_blis=False)


def _maxout_forward(model: Any) -> Callable[[Any, Any, bool], tuple[Any, Any]]:
    """thinc's Maxout forward for prediction; training keeps thinc's own (it needs the arg-max for backprop)."""
    from thinc.layers import maxout as thinc_maxout

    n_out, pieces, n_in = model.get_dim("nO"), model.get_dim("nP"), model.get_dim("nI")
    weights = model.get_param("W").reshape(n_out * pieces, n_in)
    bias = model.get_param("b").reshape(n_out * pieces)

    def forward(m: Any, x: Any, is_train: bool) -> tuple[Any, Any]:
        if is_train:
            return thinc_maxout.forward(m, x, is_train)
        if pieces == 1:
            return x @ weights.T + bias, _no_backprop
        # In blocks of about ROWS_PER_BLOCK rows, none small (a one-row product would go to gemv): each block's
        # pieces are still in cache when their max is taken, and the buffer is reused instead of a fresh array
        # of every row's pieces (~20 MB at a batch of 64 abstracts, zeroed by the kernel page by page).
        n = len(x)
        bounds = np.linspace(0, n, max(1, round(n / ROWS_PER_BLOCK)) + 1).astype(np.int64)
        best = np.empty((n, n_out), dtype=np.float32)
        buffer = np.empty((int(np.diff(bounds).max(initial=0)), n_out * pieces), dtype=np.float32)
        for start, end in itertools.pairwise(bounds.tolist()):
            # The product thinc's numpy ops take, in thinc's column order: the same BLAS blocking, the same sums.
            y = buffer[: end - start]
            np.matmul(x[start:end], weights.T, out=y)
            y += bias
            by_unit = y.reshape(end - start, n_out, pieces)
            out = best[start:end]
            np.maximum(by_unit[:, :, 0], by_unit[:, :, 1], out=out)
            for p in range(2, pieces):
                np.maximum(out, by_unit[:, :, p], out=out)
        return best, _no_backprop

    return forward


def _layernorm_forward(model: Any, x: Any, is_train: bool) -> tuple[Any, Any]:
    """thinc's LayerNorm for prediction with the same floats in fewer passes: the deviations from the mean are
    taken once (np.var takes them itself, and thinc then again) and scaled in place."""
    from thinc.layers import layernorm as thinc_layernorm

    if is_train:
        return thinc_layernorm.forward(model, x, is_train)
    mean = x.mean(axis=1, keepdims=True)
    deviation = x - mean
    # np.var: the squares' sum over the row, divided by its length (the same reduction and division)
    var = np.true_divide(np.add.reduce(deviation * deviation, axis=1, keepdims=True), x.shape[1])
    var += 1e-08
    deviation *= var ** (-1.0 / 2.0)
    deviation *= model.get_param("G")
    deviation += model.get_param("b")
    return deviation, _no_backprop


def _no_backprop(_: Floats) -> Floats:
    raise RuntimeError("this pipeline was prepared for inference; reload it to train")
