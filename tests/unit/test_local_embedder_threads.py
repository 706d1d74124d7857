"""`serve` embeds documents on one session thread per ingestion worker and queries on every core.

Two workers each calling a 1-thread session keep both cores busy without four threads fighting over
two (issue 15); a query, which arrives alone, still gets every core."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ctxstore.adapters.local import local_embedder as le


def test_documents_and_queries_run_on_their_own_thread_counts() -> None:
    emb = le.LocalEmbedder(threads=2, document_threads=1)
    before = set(le.LocalEmbedder._runtimes)
    doc = emb.embed_documents(["Caroline went to the support group."])[0]
    query = emb.embed_query("Caroline went to the support group.")
    used = {(key[1], key[2]) for key in set(le.LocalEmbedder._runtimes) | before}
    assert (1, "int8") in used and (2, "int8") in used
    assert (
        le.LocalEmbedder._runtimes[(le.MINILM_L6_V2, 1, "int8")].session.get_session_options().intra_op_num_threads == 1
    )
    assert (
        le.LocalEmbedder._runtimes[(le.MINILM_L6_V2, 2, "int8")].session.get_session_options().intra_op_num_threads == 2
    )
    assert float(np.dot(doc, query)) > 0.999  # the same text: the thread count does not change the vector


def test_the_cores_are_shared_out_between_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXSTORE_EMBED_THREADS", "2")
    assert le.document_threads_per_worker(2) == 1
    assert le.document_threads_per_worker(1) == 2
    monkeypatch.setenv("CTXSTORE_EMBED_THREADS", "4")
    assert le.document_threads_per_worker(2) == 2
    assert le.document_threads_per_worker(8) == 1


def test_serve_builds_its_embedder_with_a_thread_per_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxstore.bootstrap import build_container
    from ctxstore.config import Settings

    monkeypatch.setenv("CTXSTORE_EMBED_THREADS", "2")
    container = build_container(Settings(data_dir=tmp_path / "data", workers=2))
    try:
        inner = container.embedder._inner  # type: ignore[union-attr]
        assert (inner._threads, inner._document_threads) == (2, 1)
    finally:
        container.close()
