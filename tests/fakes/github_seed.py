"""Seeded repositories for the fake GitHub API: a small realistic one (end to end), a large one (benchmarks)."""

from __future__ import annotations

from tests.fakes.github_api import FakeGitHub


def seed_small_repo(
    fake: FakeGitHub, full_name: str = "acme/widgets", *, owner_token: str = "ghp_owner"
) -> dict[str, int]:
    """A small realistic repo: issues, a PR that fixes one, comments, a review thread, cross-references.

    Objects are spread over 10 days of fake time ending at the fake's current clock (which it leaves
    advanced past them). Returns the numbers and ids tests refer to.
    """
    owner = full_name.split("/")[0]
    fake.add_token(owner_token, owner)
    if full_name not in fake.repos:
        fake.add_repo(full_name, description="Widgets and gadgets")
    day = 86400
    ids: dict[str, int] = {}
    ids["old_issue"] = fake.add_issue(full_name, "Ancient crash on startup", "Happens on cold boot.", labels=["bug"])
    fake.advance(8 * day)
    ids["bug"] = fake.add_issue(
        full_name, "Widget renders blank", "Seen after #1 was closed; see also acme/gadgets#7.", labels=["bug", "ui"]
    )
    fake.advance(3600)
    ids["pr"] = fake.add_issue(
        full_name,
        "Fix blank widget",
        f"Fixes #{ids['bug']}. Related: https://github.com/{full_name}/issues/{ids['old_issue']}",
        pull_request=True,
        author="hubot",
    )
    fake.advance(3600)
    ids["comment"] = fake.add_comment(
        full_name, ids["bug"], f"Reproduced. Probably fixed by #{ids['pr']}.", author="hubot"
    )
    fake.advance(600)
    ids["review"] = fake.add_review_comment(
        full_name, ids["pr"], "Use a guard clause here.", path="src/widget.py", line=12
    )
    fake.advance(600)
    ids["review_reply"] = fake.add_review_comment(
        full_name, ids["pr"], "Done.", author="hubot", path="src/widget.py", line=12, in_reply_to=ids["review"]
    )
    fake.advance(day)
    return ids


def seed_large_repo(
    fake: FakeGitHub,
    full_name: str = "bench/big",
    *,
    issues: int = 2000,
    comments_per_issue: int = 2,
    pr_every: int = 5,
    span_days: int = 25,
    owner_token: str = "ghp_bench",
) -> None:
    """The benchmark repository: `issues` issues and PRs (every `pr_every`-th is a PR) with comments and
    cross-references, created evenly over `span_days` of fake time ending at the current clock."""
    owner = full_name.split("/")[0]
    fake.add_token(owner_token, owner)
    fake.add_repo(full_name, description="benchmark repository")
    step = max(1, (span_days * 86400) // max(1, issues))
    with fake.lock:
        fake.now -= span_days * 86400
        for n in range(1, issues + 1):
            is_pr = n % pr_every == 0
            ref = f" Relates to #{n - 1}." if n > 1 else ""
            fake.add_issue(
                full_name,
                f"{'Change' if is_pr else 'Problem'} {n}: component {n % 37} misbehaves under load {n % 11}",
                f"Steps to reproduce for item {n}: open view {n % 13}, click {n % 7} times.{ref}",
                labels=[f"area-{n % 9}"],
                pull_request=is_pr,
                author=f"user{n % 17}",
            )
            for c in range(comments_per_issue):
                fake.add_comment(full_name, n, f"Comment {c} on {n}: tried build {n * 3 + c}, still seen.")
            fake.now += step
