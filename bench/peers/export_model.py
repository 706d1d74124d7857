"""Writes all-MiniLM-L6-v2 as ONNX (fp32 and int8) with ctxstore's own graph builder, for the peers.

    python -m bench.peers.export_model OUT_DIR

The weights come from the installed model package (sha256-checked by the embedder), the graph from
`build_bert_onnx`, so every system in bench/peers embeds with a byte-identical graph and tokenizer.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from ctxstore.adapters.models.bert_onnx import build_bert_onnx
from ctxstore.adapters.models.local_embedder import (
    MINILM_L6_V2,
    SPECS,
    _bundled_model_dir,
    _read_safetensors,
)


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    spec = SPECS[MINILM_L6_V2]
    src = _bundled_model_dir(MINILM_L6_V2)
    cfg = json.loads((src / "config.json").read_text())
    weights = _read_safetensors(src / "model.safetensors", spec.sha256)
    for name, int8 in (("minilm_fp32.onnx", False), ("minilm_int8.onnx", True)):
        graph = build_bert_onnx(
            weights,
            heads=int(cfg["num_attention_heads"]),
            layers=int(cfg["num_hidden_layers"]),
            eps=float(cfg.get("layer_norm_eps", 1e-12)),
            int8=int8,
        )
        (out / name).write_bytes(graph)
    shutil.copy(src / "tokenizer.json", out / "tokenizer.json")
    print("wrote", sorted(p.name for p in out.iterdir()))


if __name__ == "__main__":
    main()
