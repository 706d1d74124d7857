"""Names and keys of the entity and item graphs: graph names, entity ids, predicates, ACL tokens.

Pure functions, shared by the graph services and the extractors, so the same entity
gets the same id whichever way (extraction or `graph_payload`) it arrived.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable

from ctxstore.domain.errors import invalid

GRAPH_PREFIX = "ctx:"
ACL_SEP = "\x1f"  # cannot occur in a principal (control characters are refused)
SOURCE_TYPE = "SOURCE"  # entity type of item nodes in subgraph relations

_SPACE = re.compile(r"\s+")
_EDGE_PUNCT = re.compile(r"^[\W_]+|[\W_]+$")
_ARTICLE = re.compile(r"^(the|a|an)\s+", re.IGNORECASE)
_NON_WORD = re.compile(r"[^a-z0-9]+")


def graph_name(store: str, database: str, collection: str) -> str:
    """One isolated graph per database, collection and store (database names carry no ':')."""
    return f"{GRAPH_PREFIX}{store}:{database}:{collection}"


def database_graph_prefix(store: str, database: str) -> str:
    return f"{GRAPH_PREFIX}{store}:{database}:"


def normalize_name(name: str) -> str:
    """The merge key of an entity name: case, accents, spacing, edge punctuation and a leading article ignored."""
    text = unicodedata.normalize("NFKD", name)
    text = "".join(c for c in text if not unicodedata.combining(c)).casefold()
    text = _EDGE_PUNCT.sub("", _SPACE.sub(" ", text).strip())
    text = _ARTICLE.sub("", text)
    if text.endswith("'s"):
        text = text[:-2]
    return text.strip()


def entity_id(name: str, type_: str, namespace: str) -> str:
    """Stable id of an entity: mentions with the same normalised name, type and namespace are one node."""
    key = f"{namespace.strip().casefold()}\x1f{type_.strip().casefold()}\x1f{normalize_name(name)}"
    return "ent_" + hashlib.sha1(key.encode()).hexdigest()[:20]


# Raw predicates (lemmatised, lower case) that mean the same thing share one canonical name.
_CANONICAL = {
    "work at": "works_at",
    "work for": "works_at",
    "join": "works_at",
    "employ by": "works_at",
    "be employ by": "works_at",
    "hire by": "works_at",
    "be hire by": "works_at",
    "work with": "works_with",
    "found": "founded",
    "co-found": "founded",
    "cofound": "founded",
    "start": "founded",
    "create": "created",
    "build": "created",
    "develop": "created",
    "be found by": "founded_by",
    "be co-found by": "founded_by",
    "be create by": "created_by",
    "be develop by": "created_by",
    "be build by": "created_by",
    "acquire": "acquired",
    "buy": "acquired",
    "purchase": "acquired",
    "be acquire by": "acquired_by",
    "be buy by": "acquired_by",
    "lead": "leads",
    "head": "leads",
    "run": "leads",
    "manage": "manages",
    "be lead by": "led_by",
    "be base in": "located_in",
    "be headquarter in": "located_in",
    "be locate in": "located_in",
    "headquarter in": "located_in",
    "base in": "located_in",
    "locate in": "located_in",
    "live in": "lives_in",
    "be bear in": "born_in",
    "bear in": "born_in",
    "move to": "moved_to",
    "relocate to": "moved_to",
    "partner with": "partners_with",
    "collaborate with": "partners_with",
    "sign with": "partners_with",
    "invest in": "invested_in",
    "fund": "invested_in",
    "back": "invested_in",
    "be fund by": "funded_by",
    "be back by": "funded_by",
    "use": "uses",
    "adopt": "uses",
    "depend on": "depends_on",
    "rely on": "depends_on",
    "integrate with": "integrates_with",
    "compete with": "competes_with",
    "sue": "sued",
    "meet": "met",
    "meet with": "met",
    "visit": "visited",
    "marry": "married",
    "be marry to": "married",
    "report to": "reports_to",
    "own": "owns",
    "be own by": "owned_by",
    "release": "released",
    "launch": "released",
    "announce": "announced",
    "publish": "published",
    "write": "wrote",
    "author": "wrote",
    "be write by": "written_by",
    "graduate from": "studied_at",
    "study at": "studied_at",
    "attend": "studied_at",
    "teach at": "works_at",
    "be ceo of": "ceo_of",
    "be founder of": "founded",
    "be cofounder of": "founded",
    "be co-founder of": "founded",
    "be member of": "member_of",
    "be part of": "part_of",
    "be subsidiary of": "part_of",
    "be president of": "leads",
    "be director of": "leads",
    "be head of": "leads",
    "be capital of": "capital_of",
    "be engineer at": "works_at",
    "be employee of": "works_at",
    "be employee at": "works_at",
    "be professor at": "works_at",
    "be student at": "studied_at",
    "reply to": "reply_to",
    "reference": "references",
    "mention": "mentions",
    "supply": "supplies",
    "provide": "supplies",
    "sell": "sells",
    "merge with": "merged_with",
}


def canonical_predicate(raw: str) -> str:
    """`works_at` for "works at", "joined", "is employed by"…; otherwise the words in snake case."""
    text = _SPACE.sub(" ", raw.strip().casefold())
    if text in _CANONICAL:
        return _CANONICAL[text]
    words = [_BE.get(w, w) for w in _NON_WORD.split(text) if w and w not in ("the", "a", "an")]
    key = " ".join(words)
    if key in _CANONICAL:
        return _CANONICAL[key]
    # an inflected verb as written ("works at", "was acquired by"): try its stems
    for i, w in enumerate(words):
        if w in ("be", "not"):
            continue
        for stem in (w[:-1], w[:-2], w[:-3] if w.endswith(("ied", "ies")) else "") if len(w) > 3 else ():
            for cand in (stem, stem + "y" if w.endswith(("ied", "ies")) else ""):
                alt = " ".join([*words[:i], cand, *words[i + 1 :]])
                if cand and alt in _CANONICAL:
                    return _CANONICAL[alt]
        break
    return "_".join(words) or "related_to"


_BE = {"is": "be", "are": "be", "was": "be", "were": "be", "been": "be", "being": "be"}


# ---- ACLs ---------------------------------------------------------------------------------------
def item_readers(additional_metadata: object) -> list[str] | None:
    """The principals listed in `additional_metadata.acl`; None when the item is visible to everyone."""
    if not isinstance(additional_metadata, dict):
        return None
    acl = additional_metadata.get("acl")
    if acl is None:
        return None
    values = [acl] if isinstance(acl, str) else acl if isinstance(acl, list) else []
    readers = sorted({v.strip() for v in values if isinstance(v, str) and v.strip() and ACL_SEP not in v})
    return readers


def acl_key(readers: list[str] | None) -> str:
    """Stored form of an item's readers: "\\x1fa\\x1fb\\x1f", matched with CONTAINS (portable openCypher)."""
    if not readers:
        return ""
    return ACL_SEP + ACL_SEP.join(readers) + ACL_SEP


def parse_principals(values: Iterable[str] | None) -> list[str] | None:
    """`acl` query values, repeated or comma-separated; None when the caller sent none."""
    if values is None:
        return None
    out: list[str] = []
    for v in values:
        for part in v.split(","):
            p = part.strip()
            if not p:
                continue
            if any(ord(c) < 32 for c in p):
                raise invalid("'acl' principals cannot contain control characters")
            out.append(p)
    return sorted(set(out)) if out or values else None


def principal_tokens(principals: list[str]) -> list[str]:
    return [ACL_SEP + p + ACL_SEP for p in principals]
