"""The one embedding function every peer uses: all-MiniLM-L6-v2 on onnxruntime, mean pooling + L2.

Same ONNX graph as ctxstore (export_model.py), same tokenizer (max 256 tokens, no padding for one
text), same session options (2 intra-op threads, no spinning). precision="int8": one text per call
(what ctxstore does: its activations are quantised per call); "fp32": length-sorted batches of 32.
It mirrors ctxstore's _Runtime on purpose instead of importing it: this file runs in the peers' venvs,
where ctxstore is not installed.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

MODEL_DIR = Path(
    os.environ.get(
        "PEER_MODEL_DIR", Path(os.environ.get("PEERS_HOME", Path.home() / ".cache/ctxstore-peers")) / "model"
    )
)


class MiniLM:
    dim = 384

    def __init__(self, precision: str = "int8", threads: int = 2, batch_size: int = 32) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.log_severity_level = 3
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(
            str(MODEL_DIR / f"minilm_{precision}.onnx"), sess_options=opts, providers=["CPUExecutionProvider"]
        )
        tok = Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))
        tok.enable_truncation(max_length=256)
        tok.no_padding()
        self.tok = tok
        self.precision = precision
        self.batch = 1 if precision == "int8" else batch_size
        self.embed(["warm up"])

    def _run(self, texts: list[str]) -> np.ndarray:
        enc = self.tok.encode_batch([t[:50_000] for t in texts])
        width = max(len(e.ids) for e in enc)
        ids = np.zeros((len(enc), width), dtype=np.int64)
        mask = np.zeros((len(enc), width), dtype=np.int64)
        for r, e in enumerate(enc):
            ids[r, : len(e.ids)] = e.ids
            mask[r, : len(e.ids)] = 1
        (out,) = self.session.run(["embedding"], {"input_ids": ids, "attention_mask": mask})
        return out

    def embed(self, texts: list[str]) -> np.ndarray:
        texts = list(texts)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for s in range(0, len(order), self.batch):
            idx = order[s : s + self.batch]
            out[idx] = self._run([texts[i] for i in idx])
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]
