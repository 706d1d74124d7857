"""What the benchmarks share: a `ctxstore serve` driven over HTTP as a client would, the corpora, and the
bare embedder that every ingest figure is compared with.

The server is a real subprocess on a fresh data dir (tests/support/server.py); ingestion goes through
`POST /context/ingest` in requests of 100 items, readiness through `GET /context/status`, retrieval through
`POST /query`. The bare embedder runs in this process, on the same texts, when the server is idle: it is
the physical reference (one text per call, int8, the server's thread count), so load on the shared
machine cancels in the ratio.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import httpx
from tests.support.server import ServerProcess

from ctxstore.client.models import ItemStatus
from ctxstore.client.status_polls import poll_oldest_first
from ctxstore.client.transport import form_fields

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
SCIFACT = SHARED / "beir_scifact"
LOCOMO = SHARED / "locomo" / "locomo10.json"
SEARCHABLE = ("graph_creation", "completed")
DONE = ("completed", "errored")
FINAL_POLL_IDS = 100  # this few ids outstanding: poll every FINAL_POLL_S instead of every `poll`
FINAL_POLL_S = 0.1


def _searchable(status: ItemStatus) -> bool:
    return status.indexing_status in (*SEARCHABLE, "errored") or not status.found


def load() -> float:
    return round(os.getloadavg()[0], 2)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.open(encoding="utf-8") if line.strip()]


# ---- corpora -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SciFact:
    docs: list[dict[str, Any]]
    queries: dict[str, str]  # test queries with judgements
    qrels: dict[str, dict[str, int]]
    held_out: dict[str, str]  # train-split claims with judgements (never used for tuning here)
    held_out_qrels: dict[str, dict[str, int]]

    @staticmethod
    def load(n_docs: int = 0) -> SciFact:
        docs = read_jsonl(SCIFACT / "corpus.jsonl")
        if n_docs:
            docs = docs[:n_docs]
        texts = {q["_id"]: q["text"] for q in read_jsonl(SCIFACT / "queries.jsonl")}
        qrels = _qrels(SCIFACT / "qrels" / "test.tsv")
        train = _qrels(SCIFACT / "qrels" / "train.tsv") if (SCIFACT / "qrels" / "train.tsv").exists() else {}
        return SciFact(
            docs,
            {q: texts[q] for q in qrels},
            qrels,
            {q: texts[q] for q in train if q in texts},
            train,
        )

    def items(self) -> list[dict[str, Any]]:
        return [
            {"id": d["_id"], "title": d.get("title") or d["_id"], "type": "note", "content": {"text": d["text"]}}
            for d in self.docs
        ]

    def texts(self) -> list[str]:
        """What the peers and the bare embedder embed per document (the BEIR convention)."""
        return [f"{d.get('title', '')} {d['text']}".strip() for d in self.docs]


def _qrels(path: Path) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for i, line in enumerate(path.read_text().splitlines()):
        if i == 0 or not line.strip():
            continue
        qid, did, score = line.split("\t")
        out.setdefault(qid, {})[did] = int(score)
    return out


@dataclass(frozen=True)
class LoCoMo:
    """Conversations as turns (dia_id, speaker, text), and the questions whose evidence turns exist."""

    sessions: dict[str, list[list[tuple[str, str, str]]]]  # sample -> sessions -> turns
    questions: list[tuple[str, str, str, list[str]]]  # qid, sample, question, evidence dia_ids

    @staticmethod
    def load(n_conversations: int = 0) -> LoCoMo:
        samples = json.loads(LOCOMO.read_text(encoding="utf-8"))
        if n_conversations:
            samples = samples[:n_conversations]
        sessions: dict[str, list[list[tuple[str, str, str]]]] = {}
        questions = []
        for s in samples:
            sid, conv = s["sample_id"], s["conversation"]
            keys = sorted((k for k in conv if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1]))
            sessions[sid] = [
                [
                    (
                        t["dia_id"].replace(":", "-"),
                        t["speaker"],
                        t["text"] + (f" [shares an image: {t['blip_caption']}]" if t.get("blip_caption") else ""),
                    )
                    for t in conv[k]
                ]
                for k in keys
            ]
            known = {t[0] for sess in sessions[sid] for t in sess}
            for i, qa in enumerate(s["qa"]):
                if qa.get("category") not in (1, 2, 3, 4):
                    continue
                ev = {e.replace(":", "-") for ref in qa.get("evidence", []) for e in re.split(r"[;\s]+", ref) if e}
                ev &= known
                if ev:
                    questions.append((f"{sid}#{i}", sid, str(qa["question"]), sorted(ev)))
        return LoCoMo(sessions, questions)

    def turns(self, sample: str) -> list[tuple[str, str, str]]:
        return [t for sess in self.sessions[sample] for t in sess]


# ---- metrics -------------------------------------------------------------------------------------


def ndcg10(runs: dict[str, list[str]], qrels: dict[str, dict[str, int]]) -> float:
    """nDCG@10 as pytrec_eval/BEIR: linear gain, log2 discount, ideal from all judged docs; mean over qrels."""
    import math

    scores = []
    for qid, rel in qrels.items():
        ranked = runs.get(qid, [])[:10]
        dcg = sum(rel.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked))
        ideal = sorted(rel.values(), reverse=True)[:10]
        idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
        scores.append(dcg / idcg if idcg > 0 else 0.0)
    return round(sum(scores) / len(scores), 4)


def recall10(runs: dict[str, list[str]], questions: Sequence[tuple[str, str, str, list[str]]]) -> float:
    vals = [len(set(ev) & set(runs.get(qid, [])[:10])) / len(ev) for qid, _, _, ev in questions]
    return round(sum(vals) / len(vals), 4)


def pct(values: Sequence[float], q: float) -> float:
    import numpy as np

    return round(float(np.percentile(np.asarray(values), q)), 2)


def dedup(xs: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(xs))


# ---- the bare embedder ---------------------------------------------------------------------------


def bare_embedder(texts: Sequence[str]) -> dict[str, Any]:
    """Texts/s of the server's embedding model alone, in this process (diagnostic reference, not ctxstore)."""
    from ctxstore.adapters.models.local_embedder import LocalEmbedder
    from ctxstore.config import Settings

    emb = LocalEmbedder(precision=Settings().embedding.precision)
    emb.embed_documents(["warm up the model"])
    before = load()
    t0 = time.perf_counter()
    for text in texts:  # one call per text, as the server embeds
        emb.embed_documents([text])
    dt = time.perf_counter() - t0
    return {"texts": len(texts), "seconds": round(dt, 2), "texts_per_s": round(len(texts) / dt, 1), "load": before}


# ---- ctxstore over HTTP --------------------------------------------------------------------------


class Api:
    """One `ctxstore serve` on a fresh data dir, and a client for it."""

    def __init__(self, data_dir: Path, env: dict[str, str] | None = None, key: str | None = None) -> None:
        self.server = ServerProcess(data_dir, env=env)
        self.server.wait_ready(300)
        if key is None:  # a fresh data dir prints its first key once
            [key] = self.server.printed_keys
        self.key = key
        self.http = self.server.client(key)
        self.http.timeout = httpx.Timeout(300)

    def close(self) -> None:
        self.http.close()
        self.server.stop()

    def __enter__(self) -> Api:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def create_db(self, name: str) -> None:
        r = self.http.post("/databases", json={"database": name})
        assert r.status_code in (200, 201, 202), r.text
        while True:
            body = self.http.get("/databases/status", params={"database": name}).json()
            if body["data"]["infra"]["ready_for_ingestion"]:
                return
            time.sleep(0.05)

    def timed_scifact(self, sf: SciFact, *, until: str = "completed") -> tuple[float, dict[str, Any]]:
        """Warm the server (model, extraction process, graph engine) outside the timer, then send the SciFact
        notes in requests of 100 and wait: (t0, timings from the first request)."""
        self.create_db("warm")
        self.create_db("scifact")
        self.ingest_app("warm", [{"id": "w1", "title": "Warm", "type": "note", "content": {"text": "Cells."}}])
        self.wait("warm", {None: ["w1"]}, time.perf_counter(), poll=0.2)
        res: dict[str, Any] = {"load_before_ingest": load()}
        t0 = time.perf_counter()
        self.ingest_app("scifact", sf.items())
        res["accept_s"] = round(time.perf_counter() - t0, 2)
        res.update(self.wait("scifact", {None: [d["_id"] for d in sf.docs]}, t0, until=until))
        res["docs_per_s_searchable"] = round(len(sf.docs) / res["searchable_s"], 1)
        res["load_after_ingest"] = load()
        return t0, res

    def ingest(self, fields: dict[str, str]) -> None:
        for _ in range(20):
            r = self.http.post("/context/ingest", files=form_fields(fields))  # as CtxstoreClient sends them
            if r.status_code == 503:  # admission control: wait what it says
                time.sleep(float(r.headers.get("Retry-After", "1")))
                continue
            assert r.status_code == 202, r.text[:500]
            return
        raise RuntimeError("ingest refused 20 times")

    def ingest_app(self, db: str, items: list[dict[str, Any]], batch: int = 100, collection: str | None = None) -> None:
        for s in range(0, len(items), batch):
            fields = {"database": db, "app_knowledge": json.dumps(items[s : s + batch])}
            if collection is not None:
                fields["collection"] = collection
            self.ingest(fields)

    def ingest_memories(self, db: str, collection: str, memories: list[dict[str, Any]], batch: int = 100) -> None:
        for s in range(0, len(memories), batch):
            self.ingest(
                {
                    "database": db,
                    "collection": collection,
                    "type": "memory",
                    "memories": json.dumps(memories[s : s + batch]),
                }
            )

    def item_statuses(self, db: str, collection: str | None, ids: Sequence[str]) -> list[ItemStatus]:
        return [ItemStatus.model_validate(s) for s in self.statuses(db, list(ids), collection).values()]

    def statuses(self, db: str, ids: list[str], collection: str | None = None) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for s in range(0, len(ids), 200):
            params = {"database": db, "ids": ",".join(ids[s : s + 200])}
            if collection is not None:
                params["collection"] = collection
            r = self.http.get("/context/status", params=params)
            assert r.status_code == 200, r.text[:300]
            out.update({x["id"]: x for x in r.json()["data"]["statuses"]})
        return out

    def wait(
        self,
        db: str,
        ids_by_collection: dict[str | None, list[str]],
        t0: float,
        poll: float = 1.0,
        *,
        until: str = "completed",
        limit_s: float | None = None,
    ) -> dict[str, Any]:
        """Poll until every item is searchable, then (until="completed") until every one is done or `limit_s` has
        passed since t0 (then completed_s is None). With until="searchable" completed_items counts only the items
        seen done on the way. Each poll asks for the ids not there yet oldest first, as the client's `wait_for`
        does (ctxstore/client/status_polls.py): a few requests a second, not one per 200 pending ids."""
        seen: dict[str | None, dict[str, ItemStatus]] = {c: {} for c in ids_by_collection}
        not_searchable = {c: list(v) for c, v in ids_by_collection.items()}
        pending = {c: list(v) for c, v in ids_by_collection.items()}
        total = sum(len(v) for v in ids_by_collection.values())
        searchable_s: float | None = None
        while True:
            for col in ids_by_collection:
                ask = partial(self.item_statuses, db, col)
                if searchable_s is None:
                    not_searchable[col] = poll_oldest_first(
                        ask, not_searchable[col], seen[col], 200, settled=_searchable
                    )
                else:
                    pending[col] = poll_oldest_first(ask, pending[col], seen[col], 200)
            now = time.perf_counter() - t0
            if searchable_s is None and not any(not_searchable.values()):
                searchable_s = now
                pending = {c: [i for i in v if not (i in seen[c] and seen[c][i].done)] for c, v in pending.items()}
            left = sum(len(v) for v in pending.values())
            over = limit_s is not None and now > limit_s
            if searchable_s is not None and (until == "searchable" or not left or over):
                done = [s for statuses in seen.values() for s in statuses.values() if s.done]
                return {
                    "searchable_s": round(searchable_s, 2),
                    "completed_s": round(now, 2) if not left else None,
                    "completed_items": total - left,
                    "chunks": sum(s.chunk_count or 0 for s in done),
                    "errored": sum(s.indexing_status == "errored" for s in done),
                }
            # A moment is seen up to one poll late (0.5 s on average at 1 s, ~1 % of a SciFact run; the peers'
            # times have no such lag): near the end, when a poll asks for few ids, poll often.
            waiting = sum(len(v) for v in not_searchable.values()) if searchable_s is None else left
            time.sleep(min(poll, FINAL_POLL_S) if waiting <= FINAL_POLL_IDS else poll)

    def query(self, body: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        t = time.perf_counter()
        r = self.http.post("/query", json=body)
        dt = (time.perf_counter() - t) * 1000
        assert r.status_code == 200, r.text[:300]
        return dt, r.json()["data"]
