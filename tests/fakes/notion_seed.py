"""The wiki the Notion tests share (nested pages, a data source, an unshared page) and a bulk tree for benchmarks."""

from __future__ import annotations

import time
from dataclasses import dataclass

from tests.fakes.notion_api import DAY, USER, FakeNotion
from tests.fakes.notion_blocks import (
    bookmark,
    bullet,
    callout,
    code,
    columns,
    divider,
    equation,
    heading,
    link_to_page,
    mention,
    numbered,
    para,
    quote,
    table,
    text,
    todo,
    toggle,
)


@dataclass
class Wiki:
    handbook: str  # shared top-level page
    release: str  # child of handbook
    hotfix: str  # child of release
    rollback: str  # child of hotfix (4 levels)
    runbook: str  # child of handbook, mentions release
    oncall: str  # sub-page inside a toggle block of the handbook
    ancient: str  # child of handbook, last edited 60 days ago
    design: str  # another shared top-level page (gets unshared)
    cache: str  # child of design
    private: str  # not shared
    projects: str  # data source inside the handbook
    rows: dict[str, str]  # title -> row id
    overview_block: str  # the handbook's first paragraph


def seed_wiki(fake: FakeNotion, now: float | None = None) -> Wiki:
    t = now if now is not None else time.time()
    with fake._lock:
        handbook = fake.add_page("Engineering Handbook", at=t - 20 * DAY, edited=t - 2 * DAY, shared=True)
        release = fake.add_page(
            "Release Process",
            [
                heading(2, "Cadence"),
                para("Deploys of the billing service happen every Tuesday after the release review."),
                numbered("Freeze the branch"),
                numbered("Run the migration checks"),
                numbered("Announce in #releases"),
            ],
            parent=handbook,
            at=t - 18 * DAY,
            edited=t - 3 * DAY,
        )
        hotfix = fake.add_page(
            "Hotfix Procedure",
            [para("A hotfix skips the release train and needs two reviewers.")],
            parent=release,
            at=t - 15 * DAY,
            edited=t - 4 * DAY,
        )
        rollback = fake.add_page(
            "Rollback Checklist",
            [todo("Stop the canary", checked=True), todo("Restore the previous image")],
            parent=hotfix,
            at=t - 14 * DAY,
            edited=t - 5 * DAY,
        )
        runbook = fake.add_page(
            "Incident Runbook",
            [para("When latency alerts fire, follow the ", mention(release, "Release Process"), " rollback steps.")],
            parent=handbook,
            at=t - 12 * DAY,
            edited=t - 1 * DAY,
        )
        ancient = fake.add_page(
            "Ancient Wiki Page",
            [para("Notes about the mainframe era.")],
            parent=handbook,
            at=t - 90 * DAY,
            edited=t - 60 * DAY,
        )
        projects = fake.add_data_source(
            "Projects",
            handbook,
            {
                "Name": "title",
                "Status": "status",
                "Owner": "people",
                "Tags": "multi_select",
                "Due": "date",
                "Blocked by": "relation",
                "Budget": "number",
            },
            description="Every engineering project with its owner",
            at=t - 19 * DAY,
        )
        rows = {
            "Billing migration": fake.add_row(
                projects,
                "Billing migration",
                {
                    "Status": {"type": "status", "status": {"name": "In progress"}},
                    "Owner": {"type": "people", "people": [{"object": "user", "id": USER, "name": "Alice"}]},
                    "Tags": {"type": "multi_select", "multi_select": [{"name": "billing"}, {"name": "database"}]},
                    "Due": {"type": "date", "date": {"start": "2026-12-01", "end": None}},
                    "Budget": {"type": "number", "number": 12000},
                },
                [para("Move invoices to the new ledger tables.")],
                at=t - 10 * DAY,
                edited=t - 2 * DAY,
            ),
            "Search revamp": fake.add_row(
                projects,
                "Search revamp",
                {"Status": {"type": "status", "status": {"name": "Planned"}}},
                [para("Hybrid retrieval for the help center.")],
                at=t - 9 * DAY,
                edited=t - 8 * DAY,
            ),
            "Old archive cleanup": fake.add_row(
                projects,
                "Old archive cleanup",
                {"Status": {"type": "status", "status": {"name": "Done"}}},
                [para("Removed the 2019 archives.")],
                at=t - 80 * DAY,
                edited=t - 60 * DAY,
            ),
        }
        rows["Latency budget"] = fake.add_row(
            projects,
            "Latency budget",
            {
                "Status": {"type": "status", "status": {"name": "In progress"}},
                "Blocked by": {"type": "relation", "relation": [{"id": rows["Billing migration"]}], "has_more": False},
            },
            [para("p99 under 300 ms for the invoice API."), bullet("measure", children=[bullet("per region")])],
            at=t - 6 * DAY,
            edited=t - 1 * DAY,
        )
        toggle_spec = toggle("On-call", children=[para("Who is on call this week")])
        handbook_blocks = [
            para("The handbook describes how we ", text("build and ship", bold=True), " the billing service."),
            heading(1, "Principles"),
            bullet("Small changes", children=[bullet("reviewed within a day")]),
            bullet("Observability first"),
            numbered("Write the design doc"),
            numbered("Get a review"),
            todo("Read the security policy", checked=True),
            todo("Set up the laptop"),
            code("def deploy(service):\n    return ship(service)", "python"),
            quote("Ship small, ship often."),
            callout("Ask in #eng-help when blocked", "🚨"),
            toggle_spec,
            table([["Team", "Owner"], ["Billing", "Alice"], ["Search", "Bob"]]),
            divider(),
            equation("E = mc^2"),
            bookmark("https://example.com/architecture", "Architecture overview"),
            para("See the ", mention(runbook, "Incident Runbook"), " for outages."),
            link_to_page(release),
            columns([para("Left column: budgets")], [para("Right column: hiring")]),
        ]
        fake.pages[handbook].children = (
            fake._add_blocks(handbook_blocks, ("page_id", handbook), t - 20 * DAY) + fake.pages[handbook].children
        )
        toggle_id = fake.block_ids(handbook, "toggle")[0]
        oncall = fake.add_page(
            "On-call Rotation",
            [para("Rotation changes every Monday at 09:00.")],
            in_block=toggle_id,
            at=t - 11 * DAY,
            edited=t - 3 * DAY,
        )
        design = fake.add_page(
            "Design Docs",
            [para("Design documents for platform work.")],
            at=t - 30 * DAY,
            edited=t - 6 * DAY,
            shared=True,
        )
        cache = fake.add_page(
            "Cache Design",
            [para("A write-through cache in front of the ledger.")],
            parent=design,
            at=t - 25 * DAY,
            edited=t - 6 * DAY,
        )
        private = fake.add_page("Private Notes", [para("Salary negotiations")], at=t - 5 * DAY)
        return Wiki(
            handbook=handbook,
            release=release,
            hotfix=hotfix,
            rollback=rollback,
            runbook=runbook,
            oncall=oncall,
            ancient=ancient,
            design=design,
            cache=cache,
            private=private,
            projects=projects,
            rows=rows,
            overview_block=fake.block_ids(handbook, "paragraph")[0],
        )


def seed_bulk(
    fake: FakeNotion, *, pages: int, per_parent: int = 20, words: list[str] | None = None
) -> tuple[str, list[str]]:
    """A shared root with `pages` sub-pages (a tree, `per_parent` children each), each a few blocks: for benchmarks.
    Returns (root id, the texts of the pages)."""
    vocab = words or [
        "deploy",
        "release",
        "incident",
        "customer",
        "billing",
        "invoice",
        "latency",
        "database",
        "index",
        "query",
        "cache",
        "migration",
        "roadmap",
        "design",
        "review",
        "budget",
    ]
    t = time.time() - 60
    texts: list[str] = []
    with fake._lock:
        root = fake.add_page("Bulk Root", [para("The root of a large wiki.")], at=t - 10 * DAY, shared=True)
        parents = [root]
        for i in range(pages):
            w = " ".join(vocab[(i * 5 + k * 3) % len(vocab)] for k in range(14))
            body = [heading(2, f"Section {i}"), para(f"Page {i}: {w}."), bullet(f"owner {i % 13}"), bullet(w[:40])]
            pid = fake.add_page(f"Bulk page {i}", body, parent=parents[i // per_parent], at=t - 9 * DAY + i)
            parents.append(pid)
            texts.append(f"Bulk page {i} Section {i} Page {i}: {w}.")
    return root, texts
