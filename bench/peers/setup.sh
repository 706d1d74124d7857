#!/usr/bin/env bash
# Installs the peer systems of bench/peers, each in its own venv under $PEERS_HOME (default
# ~/.cache/ctxstore-peers), pinned, so none of them becomes a ctxstore dependency; then writes the
# shared ONNX model (ctxstore's own graph builder over the weights ctxstore ships with) that every
# peer embeds with. Run from the project root after `make setup`. About 5 minutes.
set -euo pipefail
peers=${PEERS_HOME:-$HOME/.cache/ctxstore-peers}
mkdir -p "$peers"
py=$(command -v python3.11 || command -v python3)
uvpip() { python3 -m uv pip install --quiet --python "$1" "${@:2}"; }
common=(onnxruntime==1.31.1 tokenizers==0.23.3 numpy==2.4.6)
for v in chroma lancedb txtai mem0; do [ -x "$peers/$v/bin/python" ] || "$py" -m venv "$peers/$v"; done
uvpip "$peers/chroma/bin/python" chromadb==1.5.9 "${common[@]}"
uvpip "$peers/lancedb/bin/python" lancedb==0.40.0 pyarrow==26.0.1 pandas==3.1.1 "${common[@]}"
# txtai needs torch installed even though it embeds through the ONNX function here: the CPU wheel only.
uvpip "$peers/txtai/bin/python" torch==2.13.0 --index-strategy unsafe-best-match
uvpip "$peers/txtai/bin/python" txtai==9.14.0 faiss-cpu==1.15.1 torch==2.13.0 "${common[@]}"
uvpip "$peers/mem0/bin/python" mem0ai==2.2.1 qdrant-client==1.20.0 "${common[@]}"
./.venv/bin/python -m bench.peers.export_model "$peers/model"
echo "peers ready in $peers"
