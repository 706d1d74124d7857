"""The loaded spaCy models' layers, set up for inference on this machine's BLAS with the same outputs.

- Every layer multiplies through numpy's OpenBLAS. Loading under `use_ops("numpy", use_blis=False)` left the
  parser's and recogniser's output layers on thinc's bundled BLIS, which runs its generic reference kernel here
  (they were called once per decoding step once decoding moved to Python, spacy_greedy.py).
- A maxout layer takes the max over its pieces with `np.maximum` over strided views instead of thinc's per-unit
  arg-max loop (10 % of the pipeline's CPU). The product is the one thinc's numpy ops take, with its weights in
  its layout: a piece-major copy of the weights was as fast but summed in another order on another EPYC, so its
  outputs differed in the last bits.
SciFact abstracts, one thread (docs/benchmarks.md, seventh pass): 17.3 -> 15.1 CPU-ms an abstract.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float32]


def prepare(nlp: Any) -> int:
    """Applies both changes to every trainable component of `nlp`; the number of maxout layers rewritten."""
    from thinc.api import NumpyOps
    from thinc.layers import maxout as thinc_maxout

    ops = NumpyOps(use_blis=False)
    rewritten = 0
    for _, pipe in nlp.pipeline:
        model = getattr(pipe, "model", None)
        if model is None:
            continue
        for node in model.walk():
            if getattr(node.ops, "use_blis", False):
                node.ops = ops
            if node._func is thinc_maxout.forward:  # thinc's Maxout, not rewritten yet
                node._func = _maxout_forward(node)
                rewritten += 1
    return rewritten


def _maxout_forward(model: Any) -> Callable[[Any, Any, bool], tuple[Any, Any]]:
    """thinc's Maxout forward for prediction; training keeps thinc's own (it needs the arg-max for backprop)."""
    from thinc.layers import maxout as thinc_maxout

    n_out, pieces, n_in = model.get_dim("nO"), model.get_dim("nP"), model.get_dim("nI")
    weights = model.get_param("W").reshape(n_out * pieces, n_in)
    bias = model.get_param("b").reshape(n_out * pieces)

    def forward(m: Any, x: Any, is_train: bool) -> tuple[Any, Any]:
        if is_train:
            return thinc_maxout.forward(m, x, is_train)
        # The product thinc's numpy ops take, in thinc's column order: the same BLAS blocking, the same sums.
        y = x @ weights.T
        y += bias
        if pieces == 1:
            return y, _no_backprop
        by_unit = y.reshape(len(y), n_out, pieces)
        best = np.maximum(by_unit[:, :, 0], by_unit[:, :, 1])
        for p in range(2, pieces):
            np.maximum(best, by_unit[:, :, p], out=best)
        return best, _no_backprop

    return forward


def _no_backprop(_: Floats) -> Floats:
    raise RuntimeError("this pipeline was prepared for inference; reload it to train")
