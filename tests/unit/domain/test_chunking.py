from __future__ import annotations

from ctxstore.domain.chunking import chunk_markdown

DOC = (
    "# Title\n\nIntro. "
    + " ".join(f"Sentence {i} says something useful." for i in range(60))
    + "\n\n## Table\n\n| a | b |\n|---|---|\n"
    + "\n".join(f"| {i} | v{i} |" for i in range(80))
    + "\n\n## End\nShort."
)


def test_sizes_headings_and_tables() -> None:
    chunks = chunk_markdown("d", DOC, size=400, overlap=60)
    assert all(len(c.text) <= 400 for c in chunks)
    assert chunks[0].text.startswith("# Title") and chunks[0].heading == "Title"
    table_chunks = [c for c in chunks if "| a | b |" in c.text]
    assert len(table_chunks) > 1 and all(
        c.text.split("\n")[1].startswith("|---") or c.text.startswith("## Table") for c in table_chunks
    )
    assert not any(c.text.strip() in ("## Table", "## End") for c in chunks)  # headings travel with content
    assert chunks[-1].heading.endswith("End") or "Short." in chunks[-1].text
    assert [c.position for c in chunks] == list(range(len(chunks)))


def test_overlap_repeats_the_tail_of_the_previous_chunk() -> None:
    chunks = chunk_markdown("d", DOC, size=400, overlap=60)
    prose = [c for c in chunks if c.heading == "Title"]
    assert len(prose) >= 3
    tail = prose[0].text[-40:]
    assert tail in prose[1].text


def test_ids_are_stable_and_scoped() -> None:
    a = chunk_markdown("d", DOC, scope="db1")
    b = chunk_markdown("d", DOC, scope="db1")
    c = chunk_markdown("d", DOC, scope="db2")
    assert [x.id for x in a] == [x.id for x in b]
    assert {x.id for x in a}.isdisjoint({x.id for x in c})
    changed = chunk_markdown("d", DOC.replace("Sentence 59", "Sentence fifty-nine"), scope="db1")
    assert a[0].id == changed[0].id  # an edit far away keeps the first chunk's id (and its vector)


def test_empty_and_huge_words() -> None:
    assert chunk_markdown("d", "") == []
    [only] = chunk_markdown("d", "   \n\n  ")[:1] or [None]
    assert only is None
    long = chunk_markdown("d", "x" * 5000, size=1000, overlap=0)
    assert sum(len(c.text) for c in long) == 5000 and all(len(c.text) <= 1000 for c in long)


def test_code_fences_stay_whole_when_they_fit() -> None:
    text = "Intro.\n\n```python\ndef f():\n\n    return 1\n```\n\nAfter."
    [chunk] = chunk_markdown("d", text)
    assert "```python\ndef f():\n\n    return 1\n```" in chunk.text


def test_a_short_document_stays_one_chunk() -> None:
    abstract = "# Title\n\n" + " ".join(f"Sentence {i} says something about cells." for i in range(40))
    assert 1200 < len(abstract) <= 2400
    whole = chunk_markdown("d", abstract, whole_below=2400)
    assert [c.text for c in whole] == [abstract] and whole[0].heading == "Title"
    assert len(chunk_markdown("d", abstract)) == 2  # the limit is opt-in: long texts still split
    assert len(chunk_markdown("d", abstract * 2, whole_below=2400)) > 1
