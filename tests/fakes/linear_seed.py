"""The Linear workspace the tests share (nested issues, relations, comment threads) and a bulk one (benchmarks)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from tests.fakes.linear_api import FakeLinear


@dataclass
class Seeded:
    """Ids of the seeded workspace that tests refer to (by role)."""

    key: str
    user: str
    team: str
    other_team: str
    private_team: str
    issues: dict[str, str]
    comments: dict[str, str]
    relations: dict[str, str]


def seed_workspace(fake: FakeLinear, *, key: str = "lin_api_seeded_key", filler: int = 60) -> Seeded:
    """A team with nested issues (ENG-1 > ENG-2 > ENG-3, ENG-1 > ENG-4), a relation of each type, comment
    threads with replies, an archived and a trashed issue, `filler` more issues (pagination across pages),
    a second public team and a private team the key's user is not a member of. Spread over the last 10
    days, all in the past, so a sync after seeding sees it all and later changes are newer."""
    now = time.time()
    day = 86400.0
    alice = fake.add_user("Alice Doe")
    bob = fake.add_user("Bob Roe")
    fake.add_api_key(key, alice)
    eng = fake.add_team("ENG", "Engineering", description="Platform engineering", at=now - 30 * day)
    ops = fake.add_team("OPS", "Operations", at=now - 30 * day)
    sec = fake.add_team("SEC", "Security", private=True, at=now - 30 * day)
    t = now - 10 * day
    issues: dict[str, str] = {}
    issues["epic"] = fake.add_issue(
        eng, "Billing service migration", "Move **billing** to the new cluster.", state="In Progress",
        priority=2, creator=alice, assignee=bob, labels=["migration"], at=t,
    )  # fmt: skip
    issues["child"] = fake.add_issue(
        eng, "Migrate invoice rendering", "Invoices render through the new template engine.",
        creator=bob, parent=issues["epic"], labels=["migration", "invoices"], at=t + 60,
    )  # fmt: skip
    issues["grandchild"] = fake.add_issue(
        eng, "Port the PDF fonts", "The fonts live in the old asset bucket.", creator=bob,
        parent=issues["child"], at=t + 120,
    )  # fmt: skip
    issues["child2"] = fake.add_issue(
        eng, "Cut over the payment webhooks", "Webhooks point at the new endpoint.", state="Done",
        creator=alice, parent=issues["epic"], at=t + 180,
    )  # fmt: skip
    issues["blocker"] = fake.add_issue(
        eng, "Database failover drill", "Rehearse the failover before the cut-over.", priority=1,
        creator=alice, at=t + 240,
    )  # fmt: skip
    issues["dupe"] = fake.add_issue(eng, "Invoices look wrong", "Same as the rendering work.", creator=bob, at=t + 300)
    issues["similar"] = fake.add_issue(eng, "Receipt rendering", "Receipts use the old engine.", at=t + 360)
    issues["related"] = fake.add_issue(
        ops, "Provision the new cluster", "Capacity for billing.", creator=alice, at=t + 420
    )
    issues["archived"] = fake.add_issue(eng, "Old spike on caching", "Archived long ago.", at=t + 480)
    issues["trashed"] = fake.add_issue(eng, "Accidental duplicate ticket", "Deleted by its author.", at=t + 540)
    issues["secret"] = fake.add_issue(sec, "Rotate the signing keys", "Private team work.", at=t + 600)
    relations = {
        "blocks": fake.relate(issues["blocker"], issues["epic"], "blocks", at=t + 700),
        "duplicate": fake.relate(issues["dupe"], issues["child"], "duplicate", at=t + 710),
        "related": fake.relate(issues["epic"], issues["related"], "related", at=t + 720),
        "similar": fake.relate(issues["similar"], issues["child"], "similar", at=t + 730),
    }
    comments: dict[str, str] = {}
    comments["root"] = fake.add_comment(
        issues["epic"], "Kick-off: the migration starts with invoices.", user=alice, at=t + 800
    )
    comments["reply"] = fake.add_comment(
        issues["epic"], "Agreed, invoices first, then webhooks.", user=bob, parent=comments["root"], at=t + 860
    )
    comments["reply2"] = fake.add_comment(
        issues["epic"], "I will pair on the fonts.", user=alice, parent=comments["root"], at=t + 920
    )
    comments["other"] = fake.add_comment(issues["child"], "Template engine chosen: Jinja.", bot="GitHub", at=t + 980)
    comments["on_archived"] = fake.add_comment(issues["archived"], "Closing this spike.", user=bob, at=t + 1000)
    for n in range(filler):
        fake.add_issue(
            eng if n % 3 else ops, f"Routine task {n}", f"Housekeeping item {n} about {FILLER[n % len(FILLER)]}.",
            creator=alice if n % 2 else bob, at=t + 2000 + n * 600,
        )  # fmt: skip
    fake.archive_issue(issues["archived"])
    fake.issues[issues["archived"]].archived_at = fake.issues[issues["archived"]].updated_at = fake.stamp(now - day)
    fake.trash_issue(issues["trashed"])
    fake.issues[issues["trashed"]].archived_at = fake.issues[issues["trashed"]].updated_at = fake.stamp(now - day + 1)
    return Seeded(key, alice, eng, ops, sec, issues, comments, relations)


FILLER = ["backups", "alerts", "dashboards", "on-call", "runbooks", "certificates", "quotas", "logs"]

WORDS = [
    "deploy", "release", "incident", "customer", "billing", "invoice", "latency", "database", "index", "query",
    "cache", "migration", "roadmap", "design", "review", "budget", "security", "audit", "backup", "outage",
]  # fmt: skip


def seed_bulk(fake: FakeLinear, *, teams: int, issues: int, comments_per_issue: int, key: str) -> list[str]:
    """The benchmark workspace: `issues` issues over `teams` teams, each with `comments_per_issue` comments
    (every other one a reply), spread over the last 20 days. Returns the team ids."""
    now, span = time.time() - 60, 20 * 86400.0
    user = fake.add_user("Bench User")
    fake.add_api_key(key, user)
    team_ids = [fake.add_team(f"T{n:02d}", f"Team {n}", at=now - span - 60) for n in range(teams)]
    for n in range(issues):
        at = now - span + span * n / max(1, issues)
        text = " ".join(WORDS[(n * 7 + k * 3) % len(WORDS)] for k in range(14))
        iid = fake.add_issue(team_ids[n % teams], f"Task {n}: {text[:40]}", f"Issue {n}: {text}.", creator=user, at=at)
        parent: str | None = None
        for c in range(comments_per_issue):
            body = f"Comment {c} on task {n}: {' '.join(reversed(text.split()))}."
            cid = fake.add_comment(iid, body, user=user, parent=parent, at=at + 1 + c)
            parent = cid if c % 2 == 0 else None
    return team_ids
