"""The entity recogniser's greedy decoding as array operations over the whole batch.

spacy_greedy.py drives spaCy's transition system one step at a time; for `ner` that step still checked each of the
74 actions of each state in C (`transition_states`), where the parse state's accessors take the GIL state on every
call: 1.43 of `ner`'s 4.2 CPU-ms a SciFact abstract. The recogniser's BILUO system is small enough to decode here
instead: a state is its position, whether an entity is open and with which label, and where it began; an action's
validity follows from that, the token's whitespace flag and whether the next token starts a sentence (ner.pyx's
`is_valid`, for a document without preset entities). Each step scores the states through the component's own
layers (spacy_step_scores.py) with the same feature ids spaCy's state would give (`set_context_tokens`, three
features), takes the first best valid action as `arg_max_if_valid` does, and moves every state on one token, so the
entities are the ones spaCy decodes (tests/unit/test_spacy_inference.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ctxstore.adapters.models.spacy_step_scores import StepScores

if TYPE_CHECKING:
    from spacy.tokens import Doc

Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]

# ner.pyx's moves, by the letter its action names start with ("B-ORG", "O", "U-")
BEGIN, IN, LAST, UNIT, OUT = "B", "I", "L", "U", "O"


@dataclass(frozen=True)
class _Moves:
    kind: npt.NDArray[np.str_]  # a letter per action
    label: Ints  # the label's index in `labels`, -1 for none
    labels: list[str]
    valid: Bools  # (codes, actions): see `_codes`


def moves_of(ner: Any) -> _Moves:
    """The recogniser's actions and, per state code, which of them are valid."""
    names = [str(ner.moves.get_class_name(i)) for i in range(ner.moves.n_moves)]
    kind = np.array([name[0] for name in names])
    if set(kind.tolist()) - {BEGIN, IN, LAST, UNIT, OUT}:
        raise ValueError(f"not a BILUO entity recogniser: {sorted(set(kind.tolist()))}")
    labels = sorted({name[2:] for name in names if name[2:]})
    label = np.array([labels.index(name[2:]) if name[2:] else -1 for name in names], dtype=np.int64)
    labelled = label >= 0
    rows = []
    # No entity open: codes 0-3 are (may begin: two tokens left and the next not a sentence start) x (is space).
    for may_begin in (False, True):
        for space in (False, True):
            rows.append(
                (kind == OUT)
                | ((kind == UNIT) & labelled & (not space))
                | ((kind == BEGIN) & labelled & may_begin & (not space))
            )
    # An entity of label l open: code 4 + 2l + (may go on: two tokens left and the next not a sentence start).
    for index in range(len(labels)):
        for may_go_on in (False, True):
            same = label == index
            rows.append(((kind == LAST) & same) | ((kind == IN) & same & may_go_on))
    return _Moves(kind, label, labels, np.array(rows, dtype=bool))


def has_preset_entities(docs: list[Doc]) -> bool:
    """Entities or blocks set before the recogniser: its validity rules then read them, which this decoder does not."""
    from spacy.attrs import ENT_IOB  # type: ignore[import-not-found]

    return any(len(doc) and doc.has_annotation(ENT_IOB) for doc in docs)  # (an empty doc counts as annotated)


def decode_entities(ner: Any, docs: list[Doc], moves: _Moves) -> list[list[tuple[int, int, str]]]:
    """(start, end, label) of each doc's entities, as the recogniser's greedy decoding finds them (docs by length;
    the caller has made sure the recogniser knows their labels, as spaCy does before decoding)."""
    from spacy.attrs import IS_SPACE, SENT_START

    lengths = np.array([len(doc) for doc in docs], dtype=np.int64)
    found: list[list[tuple[int, int, str]]] = [[] for _ in docs]
    if not lengths.any():
        return found
    if np.any(np.diff(lengths) < 0):
        raise ValueError("docs must come sorted by length: the states still going are then a suffix")
    scorer = StepScores(ner, docs)  # the docs' features once, as spaCy's own decoding starts
    offsets = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    # Per token of the batch: may an entity begin or go on at it (the next token is there and starts no sentence).
    arrays = [doc.to_array([SENT_START, IS_SPACE]).reshape(-1, 2) for doc in docs if len(doc)]
    sent_start, space = np.concatenate(arrays).T.astype(np.int64)
    last = np.zeros(sent_start.size, dtype=bool)
    last[np.cumsum(lengths[lengths > 0]) - 1] = True
    next_starts = np.append(sent_start[1:] == 1, False) & ~last
    may_continue = ~last & ~next_starts
    n = len(docs)
    pos = np.zeros(n, dtype=np.int64)
    open_label = np.full(n, -1, dtype=np.int64)  # -1: no entity open
    start = np.zeros(n, dtype=np.int64)
    first = int(np.searchsorted(lengths, 0, side="right"))  # the states still going: docs[first:]
    for t in range(int(lengths.max())):
        first += int(np.searchsorted(lengths[first:], t, side="right"))
        live = slice(first, n)
        at = offsets[live] + pos[live]
        is_open = open_label[live] >= 0
        ids = np.full((n - first, 3), -1, dtype=np.int32)
        ids[:, 0] = at
        ids[is_open, 1] = offsets[live][is_open] + start[live][is_open]
        ids[is_open, 2] = at[is_open] - 1
        scores = scorer.of_ids(ids)
        code = np.where(is_open, 4 + 2 * open_label[live] + may_continue[at], 2 * may_continue[at] + space[at])
        best = np.where(moves.valid[code], scores, -np.inf).argmax(axis=1)
        kind, label = moves.kind[best], moves.label[best]
        begins = kind == BEGIN
        start[live][begins] = pos[live][begins]
        ending = (kind == LAST) | (kind == UNIT)
        for i in np.flatnonzero(ending):
            state = first + int(i)
            begin = int(pos[state]) if kind[i] == UNIT else int(start[state])
            found[state].append((begin, int(pos[state]) + 1, moves.labels[int(label[i])]))
        open_label[live] = np.where(begins, label, np.where(ending, -1, open_label[live]))
        pos[live] += 1
    return found


def set_entities(docs: list[Doc], found: list[list[tuple[int, int, str]]]) -> None:
    """The entities on their docs and every other token outside one, as the recogniser's `set_annotations` does."""
    from spacy.tokens import Span

    for doc, ents in zip(docs, found, strict=True):
        doc.set_ents([Span(doc, s, e, label=lab) for s, e, lab in ents], default="outside")
