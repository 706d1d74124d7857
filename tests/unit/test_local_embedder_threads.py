"""`serve` embeds documents on one session thread per ingestion worker, short queries on a 1-thread session of
their own and long queries on every core.

Two workers each calling a 1-thread session keep both cores busy without four threads fighting over
two (issue 15); a short query is faster on one thread and leaves the other core to its keyword lane (issue 28);
a long query, which arrives alone, still gets every core."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from ctxstore.adapters.models import local_embedder as le


def _threads_of(key: tuple[str, int, str, str]) -> int:
    return int(le.LocalEmbedder._runtimes[key].session.get_session_options().intra_op_num_threads)


def test_documents_short_queries_and_long_queries_run_on_their_own_sessions() -> None:
    emb = le.LocalEmbedder(threads=2, document_threads=1)
    text = "Caroline went to the support group."
    long_text = " ".join([text] * 12)
    assert len(text) <= le.SHORT_QUERY_CHARS < len(long_text)
    le.LocalEmbedder._runtimes.clear()
    doc = emb.embed_documents([text])[0]
    assert set(le.LocalEmbedder._runtimes) == {(le.MINILM_L6_V2, 1, "int8", "")}
    query = emb.embed_query(text)
    short_key = (le.MINILM_L6_V2, 1, "int8", "query")
    assert set(le.LocalEmbedder._runtimes) == {(le.MINILM_L6_V2, 1, "int8", ""), short_key}
    assert _threads_of(short_key) == 1
    long_doc = emb.embed_documents([long_text])[0]
    long_query = emb.embed_query(long_text)
    long_key = (le.MINILM_L6_V2, 2, "int8", "")
    assert long_key in le.LocalEmbedder._runtimes and _threads_of(long_key) == 2
    # the same text gives the same vector whatever session embeds it
    assert float(np.dot(doc, query)) > 0.999
    assert float(np.dot(long_doc, long_query)) > 0.999


def test_a_one_thread_embedder_keeps_one_query_session() -> None:
    emb = le.LocalEmbedder(threads=1, document_threads=1)
    le.LocalEmbedder._runtimes.clear()
    emb.embed_query("a short question")
    assert set(le.LocalEmbedder._runtimes) == {(le.MINILM_L6_V2, 1, "int8", "")}


def test_the_cores_are_shared_out_between_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXSTORE_EMBED_THREADS", "2")
    assert le.document_threads_per_worker(2) == 1
    assert le.document_threads_per_worker(1) == 2
    monkeypatch.setenv("CTXSTORE_EMBED_THREADS", "4")
    assert le.document_threads_per_worker(2) == 2
    assert le.document_threads_per_worker(8) == 1


def test_serve_builds_its_embedder_with_a_thread_per_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxstore.config import Settings
    from ctxstore.runtime import build_container

    monkeypatch.setenv("CTXSTORE_EMBED_THREADS", "2")
    container = build_container(Settings(data_dir=tmp_path / "data", workers=2))
    try:
        inner = container.embedder._inner  # type: ignore[union-attr]
        assert (inner._threads, inner._document_threads, inner._document_sessions) == (2, 1, 2)
    finally:
        container.close()


def test_concurrent_document_calls_run_on_sessions_of_their_own() -> None:
    """While one document call holds a session, another gets a second one and finishes; with a pool of
    one it waits for the first. Every session gives the same vector as the single-session path."""
    text = ["Caroline went to the support group."]
    single = le.LocalEmbedder(threads=1, document_threads=1).embed_documents(text)[0]
    emb = le.LocalEmbedder(threads=1, document_threads=1, document_sessions=2)
    pool = emb._document_pool()
    out: list[np.ndarray] = []
    with pool.take() as held:
        t = threading.Thread(target=lambda: out.extend(emb.embed_documents(text)), daemon=True)
        t.start()
        t.join(60)
        assert len(out) == 1  # done while the first session was held
    assert len(pool._free) == 2 and pool._free[0] is not pool._free[1] and held in pool._free
    with pool.take() as a, pool.take() as b:
        assert a is not b
        # Both sessions read the one shared copy of the word embeddings (47 MB), not one each.
        assert list(le._word_embeddings) == [le.MINILM_L6_V2]
        assert float(np.dot(emb._embed_on(a, text)[0], single)) > 0.9999
        assert float(np.dot(emb._embed_on(b, text)[0], single)) > 0.9999

    alone = le.LocalEmbedder(threads=1, document_threads=1, document_sessions=1)
    one = le._RuntimePool(alone._runtime(1), lambda: alone._runtime(1), 1)
    waited: list[bool] = []

    def second() -> None:
        with one.take():
            waited.append(True)

    with one.take():
        t = threading.Thread(target=second, daemon=True)
        t.start()
        t.join(0.3)
        assert waited == []  # the only session is taken
    t.join(10)
    assert waited == [True]
