"""The attribute ruler of spaCy's small English pipeline, evaluated as array operations.

The pipeline's `attribute_ruler` sets each token's POS and morphology from its fine tag (56 rules of one
`TAG` each, the ruler's first rules), then applies 123 exceptions (a word and a tag, a dependency, two
words), every rule through spaCy's Matcher and every match through a Span: 5.5-6.6 of the ~41 CPU-ms spaCy
spends on a SciFact abstract, 3 of them in the Matcher's per-token predicates (docs/benchmarks.md).

This component gives the same annotations. The tag rules are a table from tag to (POS, morphology),
written with one `Doc.from_array`. Each exception is a set of predicates on the doc's LOWER, TAG, DEP and
IS_SPACE columns (the operators the rules use: equal, IN, NOT_IN, REGEX), checked only where the word it names
occurs when it names one and as masks over the doc otherwise; its matches are written with the ruler's own
`set_token_attrs`. The ruler applies its matches in rule order, later ones overwriting, and every tag rule
comes before every exception, so the result is the ruler's: tests/unit/test_graph_extraction.py compares every
token of SciFact abstracts and informal English against the unchanged pipeline. A rule of another shape (an
operator or attribute not listed) fails the load instead of being applied differently.
"""

import re
from typing import Any

import numpy as np
import numpy.typing as npt
from spacy.attrs import DEP, IS_SPACE, LOWER, MORPH, POS, TAG  # type: ignore[import-not-found]
from spacy.language import Language
from spacy.tokens import Doc
from spacy.tokens._retokenize import normalize_token_attrs, set_token_attrs

NAME = "ctxstore_tag_attributes"
COLUMNS = {"LOWER": 0, "TAG": 1, "DEP": 2, "IS_SPACE": 3}
Mask = npt.NDArray[np.bool_]
Ids = npt.NDArray[np.uint64]


def _tag_rule(rule: dict[str, Any]) -> str | None:
    """The tag of a rule that matches one token by its tag alone and sets only POS and morphology."""
    patterns = rule["patterns"]
    if len(patterns) != 1 or len(patterns[0]) != 1 or set(patterns[0][0]) != {"TAG"}:
        return None
    tag = patterns[0][0]["TAG"]
    if not isinstance(tag, str) or not set(rule["attrs"]) <= {"POS", "MORPH"} or rule.get("index", 0) not in (0, -1):
        return None
    return tag


class _Predicate:
    """One token constraint of a pattern (attribute, operator, value) as a mask over a doc's columns."""

    def __init__(self, nlp: Language, key: str, spec: Any) -> None:
        if key not in COLUMNS:
            raise ValueError(f"attribute ruler: unsupported attribute {key!r}")
        self.column = COLUMNS[key]
        self.regex: re.Pattern[str] | None = None
        self.negate = False
        if isinstance(spec, bool):
            self.values = np.array([int(spec)], dtype=np.uint64)
        elif isinstance(spec, str):
            self.values = np.array([nlp.vocab.strings.add(spec)], dtype=np.uint64)
        elif isinstance(spec, dict) and len(spec) == 1 and next(iter(spec)) in ("IN", "NOT_IN", "REGEX"):
            op, arg = next(iter(spec.items()))
            if op == "REGEX":
                self.regex = re.compile(arg)  # the Matcher's REGEX is re.search on the attribute's text
                self.values = np.zeros(0, dtype=np.uint64)
            else:
                self.values = np.array([nlp.vocab.strings.add(v) for v in arg], dtype=np.uint64)
                self.negate = op == "NOT_IN"
        else:
            raise ValueError(f"attribute ruler: unsupported pattern {key}: {spec!r}")
        self.accepted = frozenset(int(v) for v in self.values)

    @property
    def words(self) -> set[int] | None:
        """The LOWER values this predicate accepts, when it is a LOWER equal or IN (the rule's anchor)."""
        if self.column != COLUMNS["LOWER"] or self.regex is not None or self.negate:
            return None
        return {int(v) for v in self.values}

    def mask(self, doc: Doc, cols: Ids) -> Mask:
        col = cols[:, self.column]
        if self.regex is not None:
            found = [h for h in np.unique(col).tolist() if self.regex.search(doc.vocab.strings[h])]
            return np.isin(col, np.array(found, dtype=np.uint64))
        hit = np.isin(col, self.values)
        return ~hit if self.negate else hit

    def holds(self, doc: Doc, row: list[int]) -> bool:
        """Whether one token (its row of the doc's columns, as Python ints) meets the predicate."""
        value = row[self.column]
        if self.regex is not None:
            return self.regex.search(doc.vocab.strings[value]) is not None
        return (value in self.accepted) != self.negate


class _Exception:
    """One exception rule: its patterns as predicates per position, the attributes and the token they set."""

    def __init__(self, nlp: Language, rule: dict[str, Any]) -> None:
        self.patterns = [[[_Predicate(nlp, k, v) for k, v in tok.items()] for tok in p] for p in rule["patterns"]]
        self.attrs = normalize_token_attrs(nlp.vocab, rule["attrs"])
        self.index = int(rule.get("index", 0))
        # Most rules name a word: their matches can only start where that word is (offset, accepted LOWERs).
        self.anchors = [_anchor(p) for p in self.patterns]

    def targets(self, doc: Doc, cols: Ids, rows: list[Any], at_word: dict[int, list[int]]) -> list[int]:
        """The tokens this rule sets, in the order the ruler sets them (by match start)."""
        n = len(doc)
        found: list[tuple[int, int]] = []
        for pattern, anchor in zip(self.patterns, self.anchors, strict=True):
            size = len(pattern)
            if size > n:
                continue
            if anchor is None:
                ok = np.ones(n - size + 1, dtype=np.bool_)
                for offset, predicates in enumerate(pattern):
                    for predicate in predicates:
                        ok &= predicate.mask(doc, cols)[offset : offset + n - size + 1]
                starts = [int(s) for s in np.flatnonzero(ok)]
            else:
                offset, words = anchor
                near = sorted({i - offset for w in words for i in at_word.get(w, ())})
                starts = [
                    s
                    for s in near
                    if 0 <= s <= n - size
                    and all(p.holds(doc, rows[s + j]) for j, predicates in enumerate(pattern) for p in predicates)
                ]
            at = self.index if self.index >= 0 else size + self.index
            found += [(s, s + at) for s in starts]
        return [token for _, token in sorted(found)]


def _anchor(pattern: list[list[_Predicate]]) -> tuple[int, set[int]] | None:
    for offset, predicates in enumerate(pattern):
        for predicate in predicates:
            if predicate.words is not None:
                return offset, predicate.words
    return None


class TagAttributes:
    """Tag rules as one array write, then the exceptions in rule order."""

    def __init__(self, nlp: Language, rules: list[dict[str, Any]]) -> None:
        split = next((i for i, r in enumerate(rules) if _tag_rule(r) is None), len(rules))
        if any(_tag_rule(r) is not None for r in rules[split:]):
            raise ValueError("a tag rule comes after an exception: the ruler's order would not be kept")
        strings = nlp.vocab.strings
        self._tags: dict[int, tuple[int, int]] = {}
        for rule in rules[:split]:
            attrs = rule["attrs"]
            pos = strings.add(attrs["POS"]) if "POS" in attrs else 0
            morph = nlp.vocab.morphology.add(attrs["MORPH"]) if "MORPH" in attrs else 0
            self._tags[strings.add(_tag_rule(rule) or "")] = (pos, morph)
        self._exceptions = [_Exception(nlp, rule) for rule in rules[split:]]
        # Which exceptions can match a doc, from the words in it: most name a word, so a doc meets a few of the
        # 123 (checking each in turn was 0.6 CPU-ms a SciFact abstract). The others are checked on every doc.
        self._anywhere: set[int] = set()
        self._by_word: dict[int, set[int]] = {}
        for index, exception in enumerate(self._exceptions):
            for anchor in exception.anchors:
                if anchor is None:
                    self._anywhere.add(index)
                else:
                    for word in anchor[1]:
                        self._by_word.setdefault(word, set()).add(index)

    def __call__(self, doc: Doc) -> Doc:
        if not len(doc):
            return doc
        rows: Ids = np.asarray(doc.to_array([TAG, POS, MORPH]), dtype=np.uint64)
        tags, at = np.unique(rows[:, 0], return_inverse=True)
        known = [self._tags.get(int(t), (0, 0)) for t in tags]
        pos = np.array([p for p, _ in known], dtype=np.uint64)[at]
        morph = np.array([m for _, m in known], dtype=np.uint64)[at]
        rows[:, 1] = np.where(pos != 0, pos, rows[:, 1])
        rows[:, 2] = np.where(morph != 0, morph, rows[:, 2])
        doc.from_array([POS, MORPH], np.ascontiguousarray(rows[:, 1:]))  # type: ignore[arg-type]
        # Read once, before any exception is written, as the ruler's Matcher reads the doc (the tag rules set
        # only POS and morphology, which no exception reads).
        cols = doc.to_array([LOWER, TAG, DEP, IS_SPACE]).astype(np.uint64)
        token_rows = cols.tolist()
        at_word: dict[int, list[int]] = {}
        for i, row in enumerate(token_rows):
            at_word.setdefault(row[0], []).append(i)
        candidates = set(self._anywhere).union(*(self._by_word.get(w, ()) for w in at_word))
        for index in sorted(candidates):  # in rule order: a later match overwrites an earlier one
            rule = self._exceptions[index]
            for i in rule.targets(doc, cols, token_rows, at_word):
                set_token_attrs(doc[i], rule.attrs)
        return doc


def replace_attribute_ruler(nlp: Language) -> None:
    """Swap the pipeline's `attribute_ruler` for TagAttributes with the same rules, in the same place."""
    ruler: Any = nlp.get_pipe("attribute_ruler")
    nlp.replace_pipe("attribute_ruler", NAME, config={"rules": ruler.patterns})
    nlp.rename_pipe("attribute_ruler", NAME)


# No `from __future__ import annotations` in this module: spaCy reads the factory's annotations as types.
@Language.factory(NAME)
def _make(nlp: Language, name: str, rules: list[dict[str, Any]]) -> TagAttributes:
    return TagAttributes(nlp, rules)
