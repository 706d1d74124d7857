"""Diagnostic preparation: a copy of latency_1m.py's 1M data dir, its directly written rows given real-shaped vectors.

    nice -n 10 uv run python -m bench.retrieval.mix_1m --source /work/benchdata/r1m/data \
        --work /work/benchdata/r1m-mix/data

latency_1m.py grows the API-ingested 100k corpus to 1M with noisy copies of real vectors (isotropic noise,
cosine ~0.71 to the source), a shape no embedded text has and one an HNSW graph finds hard (ann_1m.py's
docstring). This copies that data dir and gives each directly written row (chunk ids `big…`) a normalised
mixture of 2-3 real vectors of the corpus instead, ann_1m.grow_mix's recipe, so the HNSW lane can be measured
over HTTP on the shape ann_1m.py measures its recall on. Texts are unchanged (three random SciFact sentences):
the keyword lane sees the same corpus. The vector snapshot is dropped, so the first start reads the new
vectors from SQLite; the uploaded blobs are linked, not copied (queries never read them). An offline rewrite
of a stopped data dir: the service itself never updates a row's vector.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import time
from pathlib import Path

import numpy as np
from bench.retrieval.ann_1m import grow_mix


def revector(search_db: Path) -> dict[str, float | int]:
    conn = sqlite3.connect(search_db)
    real = np.stack(
        [
            np.frombuffer(blob, dtype=np.float32)
            for (blob,) in conn.execute(
                "SELECT vector FROM chunks WHERE database='lat' AND vector IS NOT NULL AND chunk_id NOT LIKE 'big%'"
            )
        ]
    )
    grown = [r for (r,) in conn.execute("SELECT rowid FROM chunks WHERE chunk_id LIKE 'big%' ORDER BY rowid")]
    mixed = grow_mix(real, len(real) + len(grown))[len(real) :]
    t0 = time.perf_counter()
    for start in range(0, len(grown), 20_000):
        block = zip((v.tobytes() for v in mixed[start : start + 20_000]), grown[start : start + 20_000], strict=True)
        conn.executemany("UPDATE chunks SET vector=? WHERE rowid=?", block)
        conn.commit()
    conn.close()
    return {"real_rows": len(real), "mixed_rows": len(grown), "update_s": round(time.perf_counter() - t0, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", type=Path, required=True)
    ap.add_argument("--work", type=Path, required=True)
    args = ap.parse_args()
    if args.work.exists():
        raise SystemExit(f"{args.work} exists")
    shutil.copytree(
        args.source, args.work, ignore=shutil.ignore_patterns("serve.lock", "search.db.vectors", "*.ann", "blobs")
    )
    (args.work / "blobs").symlink_to((args.source / "blobs").resolve())  # 100k small files, never read by a query
    done = revector(args.work / "search.db")
    (args.work.parent / "mixed.json").write_text(json.dumps(done) + "\n")
    print(json.dumps(done), flush=True)


if __name__ == "__main__":
    main()
