"""Graph benchmark: extraction quality and speed, subgraph and relations read latency.

    uv run python -m bench.graph.run [--items 10000] [--relations 50000] [--samples 50]

1. Extraction on bench/graph/annotated.txt (hand-annotated sentences): precision/recall of
   directed (subject, object) pairs, predicate accuracy on matched pairs, sentences/s.
2. Subgraph at depth 5 (max_sources 200) over `--items` linked items (threads, parents, links).
3. `GET /context/relations` service read of a collection holding `--relations` relations.

Writes bench/results/graph.json and prints a table. Graph data is written through the graph
service (batched UNWIND), the reads go through the same service methods the routes call.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from ctxstore.domain.graph_keys import entity_id, graph_name, normalize_name
from ctxstore.services.access.principal import Principal
from ctxstore.services.graphs.entity_graph import EXTRACTED, EntityRow, ItemAccess, RelationRow
from ctxstore.services.graphs.item_graph import SourceProps
from ctxstore.services.graphs.service import GraphService

HERE = Path(__file__).parent
RESULTS = HERE.parent / "results" / "graph.json"


def load_annotated(path: Path = HERE / "annotated.txt") -> list[tuple[str, list[tuple[str, str, str]]]]:
    out: list[tuple[str, list[tuple[str, str, str]]]] = []
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if line.startswith("  >"):
            s, p, o = (x.strip() for x in line[3:].split("|"))
            out[-1][1].append((s, p, o))
        else:
            out.append((line.strip(), []))
    return out


def evaluate_extraction() -> dict[str, Any]:
    from ctxstore.adapters.models.spacy_extractor import SpacyExtractor, load_pipeline

    load_pipeline()
    data = load_annotated()
    ex = SpacyExtractor()
    started = time.perf_counter()
    results = ex.extract_many([s for s, _ in data])
    elapsed = time.perf_counter() - started
    tp = fp = fn = pred_ok = 0
    misses: list[str] = []
    for (sentence, gold), found in zip(data, results, strict=True):
        names = {e.key: normalize_name(e.name) for e in found.entities}
        got = {(names[r.source], names[r.target]): r.canonical_predicate for r in found.relations}
        want = {(normalize_name(s), normalize_name(o)): p for s, p, o in gold}
        for pair, pred in got.items():
            if pair in want:
                tp += 1
                pred_ok += pred == want[pair]
            else:
                fp += 1
                misses.append(f"FP {pair} in: {sentence}")
        for pair in want:
            if pair not in got:
                fn += 1
                misses.append(f"FN {pair} in: {sentence}")
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    # throughput on a larger batch of the same sentences
    batch = [s for s, _ in data] * 5
    t0 = time.perf_counter()
    ex.extract_many(batch)
    rate = len(batch) / (time.perf_counter() - t0)
    return {
        "sentences": len(data),
        "gold_relations": sum(len(g) for _, g in data),
        "true_positives": tp,
        "false_positives": fp,
        "false_negatives": fn,
        "precision": round(precision, 3),
        "recall": round(recall, 3),
        "f1": round(2 * precision * recall / (precision + recall), 3) if precision + recall else 0.0,
        "predicate_accuracy_on_matches": round(pred_ok / tp, 3) if tp else 0.0,
        "sentences_per_s": round(rate, 1),
        "first_pass_s": round(elapsed, 3),
        "errors_sample": misses[:25],
    }


def _pcts(samples: list[float]) -> dict[str, float]:
    s = sorted(samples)
    return {
        "p50_ms": round(statistics.median(s) * 1000, 2),
        "p95_ms": round(s[int(0.95 * (len(s) - 1))] * 1000, 2),
        "n": len(s),
    }


def build_items(graphs: GraphService, org: str, graph: str, n: int, rng: random.Random) -> None:
    """n items: threads of ~10, a parent for most, one or two explicit links each."""
    ig = graphs.item_graph
    for i in range(n):
        links = [(f"it{rng.randrange(n)}", "references") for _ in range(rng.choice((1, 2)))]
        ig.upsert_source(
            org,
            graph,
            SourceProps(
                item_id=f"it{i}",
                title=f"Item {i}",
                kind="message",
                provider="slack",
                external_id=str(i),
                thread_id=f"t{i // 10}",
                parent_id=f"it{rng.randrange(i)}" if i and rng.random() < 0.7 else None,
                acl="",
                public=True,
                timestamp=float(i),
            ),
            links,
        )


def build_relations(graphs: GraphService, org: str, graph: str, n: int, rng: random.Random) -> None:
    """n relations among 5,000 entities, spread over 1,000 items (batched UNWIND per item)."""
    ents = [EntityRow(entity_id(f"E{i}", "organization", ""), f"E{i}", "organization", "") for i in range(5000)]
    per_item = n // 1000
    eg = graphs.entities
    for item in range(1000):
        picked = [ents[rng.randrange(len(ents))] for _ in range(per_item * 2)]
        rels = [
            RelationRow(
                a.eid,
                b.eid,
                "works with",
                "works_with",
                f"E{a.name} works with {b.name}.",
                rng.random(),
                None,
                f"r{item}#0",
                EXTRACTED,
            )
            for a, b in zip(picked[::2], picked[1::2], strict=True)
        ]
        graphs.item_graph.upsert_source(
            org, graph, SourceProps(f"r{item}", "", "doc", "", "", None, None, "", True, 0.0), []
        )
        eg.write_item(org, graph, f"r{item}", picked, rels, ItemAccess("", True, time.time(), ""))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=10000)
    ap.add_argument("--relations", type=int, default=50000)
    ap.add_argument("--samples", type=int, default=50)
    ap.add_argument("--skip-extraction", action="store_true")
    args = ap.parse_args()
    from tests.support.app import make_app

    out: dict[str, Any] = {}
    if not args.skip_extraction:
        out["extraction"] = evaluate_extraction()
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        la = make_app(Path(tmp) / "data")
        try:
            la.create_ready_database("bench")
            graphs = la.services.graphs
            assert graphs is not None
            principal = Principal(org="default", key_prefix="bench")
            # subgraph
            g_items = graph_name("knowledge", "bench", "items")
            graphs._ensure_indexes("default", g_items)
            t0 = time.perf_counter()
            build_items(graphs, "default", g_items, args.items, rng)
            build_s = time.perf_counter() - t0
            samples = []
            sizes = []
            for _ in range(args.samples):
                start = f"it{rng.randrange(args.items)}"
                t = time.perf_counter()
                d = graphs.subgraph(
                    principal,
                    "bench",
                    "items",
                    "knowledge",
                    start,
                    depth_raw="5",
                    max_sources_raw=None,
                    principals=None,
                )
                samples.append(time.perf_counter() - t)
                sizes.append(len(d["sources"]))
            acl_samples = []
            for _ in range(args.samples):
                start = f"it{rng.randrange(args.items)}"
                t = time.perf_counter()
                graphs.subgraph(
                    principal,
                    "bench",
                    "items",
                    "knowledge",
                    start,
                    depth_raw="5",
                    max_sources_raw=None,
                    principals=["alice"],
                )
                acl_samples.append(time.perf_counter() - t)
            out["subgraph_depth5"] = {
                "items": args.items,
                "build_s": round(build_s, 1),
                "mean_members": statistics.mean(sizes),
                **_pcts(samples),
                "with_acl": _pcts(acl_samples),
            }
            # relations
            g_rel = graph_name("knowledge", "bench", "rels")
            graphs._ensure_indexes("default", g_rel)
            t0 = time.perf_counter()
            build_relations(graphs, "default", g_rel, args.relations, rng)
            build_s = time.perf_counter() - t0
            reads: dict[str, Any] = {"relations": args.relations, "build_s": round(build_s, 1)}
            for label, limit, acl in (
                ("limit_100", "100", None),
                ("limit_default_5000", None, None),
                ("limit_100_acl", "100", ["alice"]),
            ):

                def read(limit: str | None = limit, acl: list[str] | None = acl) -> dict[str, Any]:
                    return graphs.relations(
                        principal,
                        "bench",
                        "rels",
                        "knowledge",
                        item_id=None,
                        limit_raw=limit,
                        cursor_raw=None,
                        principals=acl,
                    )

                # cold: the first read after a write (the ranking is computed); warm: later reads
                # (the ranking is cached under the graph's version token until the next write)
                cold = []
                for _ in range(3):
                    graphs.entities.new_version("default", g_rel)
                    t = time.perf_counter()
                    read()
                    cold.append(time.perf_counter() - t)
                s = []
                for _ in range(max(5, args.samples // 5)):
                    t = time.perf_counter()
                    d = read()
                    s.append(time.perf_counter() - t)
                reads[label] = {**_pcts(s), "cold": _pcts(cold), "groups": len(d["relations"])}
            out["relations_read"] = reads
        finally:
            la.close()
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    out["load_average"] = [round(x, 2) for x in os.getloadavg()]  # other work on the machine skews timings
    RESULTS.write_text(json.dumps(out, indent=2))
    print(f"{'measure':45s} {'result':>30s}")
    if "extraction" in out:
        e = out["extraction"]
        print(f"{'extraction precision / recall / F1':45s} {e['precision']:>10} / {e['recall']} / {e['f1']}")
        print(f"{'predicate accuracy on matched pairs':45s} {e['predicate_accuracy_on_matches']:>30}")
        print(f"{'extraction sentences/s':45s} {e['sentences_per_s']:>30}")
    sg = out["subgraph_depth5"]
    print(f"{'subgraph depth 5 p50 / p95 ms':45s} {sg['p50_ms']:>20} / {sg['p95_ms']}")
    print(f"{'subgraph depth 5 with acl p50 / p95 ms':45s} {sg['with_acl']['p50_ms']:>20} / {sg['with_acl']['p95_ms']}")
    for k, v in out["relations_read"].items():
        if isinstance(v, dict):
            print(f"{'relations read ' + k + ' p50 / p95 ms':45s} {v['p50_ms']:>20} / {v['p95_ms']}")
            print(f"{'  first read after a write (cold) p50 ms':45s} {v['cold']['p50_ms']:>20}")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
