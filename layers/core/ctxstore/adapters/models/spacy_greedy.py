"""Runs the spaCy pipeline with its parser decoded step by step from Python (the entity recogniser: its own
array decoding, spacy_entity_decoder.py, unless entities are preset; then this one).

spaCy 3.8's wheels compile the parse state's `B()` and `S()` (they index C++ vectors with `.at()`) so that every
call takes and releases the GIL. Its greedy decoder (`Parser.greedy_parse`) runs in C *without* the GIL, so each
validity check of each action at each token waited for a GIL hand-off: under `perf`, `take_gil`, `drop_gil` and
their mutexes were ~35 % of `ner`. The same decoding driven from Python, one step for the whole batch at a time
(`transition_states`, as spaCy's own training loop does), holds the GIL throughout and those calls cost nothing.
SciFact abstracts, one thread, batches of 64 (docs/benchmarks.md, seventh pass): `ner` 12.6 -> 6.9 and the parser
4.2 -> 2.8 CPU-ms an abstract, every token's annotations the same (tests/unit/test_graph_extraction.py).

Both get their labels checked first as spaCy does (`ensure_labels`, without reading docs that carry none).
A Python step costs ~0.1 ms whatever the batch holds, so the texts of a batch are decoded together, sorted by
length (states that end together leave no short tail of steps); spaCy's own `pipe` cuts a batch in four.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ctxstore.adapters.models import spacy_entity_decoder as ed
from ctxstore.adapters.models.spacy_step_scores import StepScores

if TYPE_CHECKING:  # spaCy takes seconds to import: spacy_extractor.py imports it only when a model is needed
    from spacy.language import Language
    from spacy.tokens import Doc


_entity_moves_of: dict[int, tuple[Any, Any]] = {}


def annotate(nlp: Language, texts: Iterable[str], batch_size: int = 64) -> list[Doc]:
    """`list(nlp.pipe(texts, batch_size=batch_size))`, with the transition-based components decoded from Python."""
    out: list[Doc] = []
    batch: list[str] = []
    for text in texts:
        batch.append(text)
        if len(batch) >= batch_size:
            out += _annotate_batch(nlp, batch)
            batch = []
    if batch:
        out += _annotate_batch(nlp, batch)
    return out


def _annotate_batch(nlp: Language, texts: list[str]) -> list[Doc]:
    from spacy.pipeline.ner import EntityRecognizer  # type: ignore[import-not-found]
    from spacy.pipeline.transition_parser import Parser  # type: ignore[import-not-found]  # (Cython, no stubs)

    docs = [nlp.make_doc(t) for t in texts]
    for _, proc in nlp.pipeline:  # the enabled components, in order
        if isinstance(proc, EntityRecognizer) and not ed.has_preset_entities(docs):
            by_length = sorted(docs, key=len)
            ensure_labels(proc, by_length, "ENT_IOB")
            ed.set_entities(by_length, ed.decode_entities(proc, by_length, _entity_moves(proc)))
        elif isinstance(proc, Parser):
            by_length = sorted(docs, key=len)
            proc.set_annotations(by_length, decode(proc, by_length))
        elif hasattr(proc, "pipe"):
            docs = list(proc.pipe(docs, batch_size=len(docs)))
        else:
            docs = [proc(doc) for doc in docs]
    return docs


def _entity_moves(ner: Any) -> Any:
    """The recogniser's action tables, made once per loaded component (a Cython class: no attributes of ours)."""
    held = _entity_moves_of.get(id(ner))
    if held is None or held[0] is not ner or held[1].kind.size != ner.moves.n_moves:  # (labels added: resized)
        held = _entity_moves_of[id(ner)] = (ner, ed.moves_of(ner))
    return held[1]


def decode(parser: Any, docs: list[Doc]) -> list[Any]:
    """The parse states `parser.predict(docs)` returns with a beam width of 1, decoded with the GIL held."""
    batch: list[Any] = parser.moves.init_batch(docs)
    if not any(len(doc) for doc in docs):
        return batch
    ensure_labels(parser, docs, "DEP")  # as greedy_parse does first
    scores = StepScores(parser, docs)  # the docs' features once; a step scores the states' next actions
    states = [s for s in batch if not s.is_final()]
    while states:
        states = step(parser, states, scores.of_states(states))
    return batch


def ensure_labels(component: Any, docs: list[Doc], attr: str) -> None:
    """The component's `_ensure_labels_are_added(docs)`, as spaCy calls it before decoding, without reading every
    token of docs that carry no labels yet (0.4 CPU-ms an abstract each for the parser and `ner`): those add only
    the system's built-in labels, which one of them stands for."""
    labelled = [doc for doc in docs if len(doc) and doc.has_annotation(attr)]
    component._ensure_labels_are_added(labelled or docs[:1])


def step(parser: Any, states: list[Any], scores: Any) -> list[Any]:
    """Takes each state's best valid action; the states not final yet (a seam for the tests)."""
    unfinished: list[Any] = parser.transition_states(states, scores)
    return unfinished
