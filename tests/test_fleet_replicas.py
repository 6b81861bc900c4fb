"""Three real replicas of ``toolflow serve --transport http`` on one real Redis (issue 19, "Tests with real parts").

Each test starts three processes on loopback (``tests/_fleet.py``) on a real ``redis-server``
(the ``redis_server`` fixture, skipped, saying how to install it, where there is none), and
drives them with the ``mcp`` SDK's own client whose requests rotate across the replicas, one
request to each in turn: no stickiness at all. What the tools did is read from the journal file
the replicas' tools append to, never from the clients' view alone. Nothing waits for time:
every wait is for a condition, under a generous guard (``trio.fail_after``), so a loaded machine
makes a test slower, not wrong.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from _fleet import Fleet, fleet_client, journal, most_at_once, write_fleet_project
from _redis import RedisServer
from mcp import types

# The SDK's HTTP client (httpx2) leaves its SSE streams' async generators to the garbage
# collector when a session ends under trio; trio's finalizer warns about each one.
pytestmark = pytest.mark.filterwarnings(
    r"ignore:Async generator '(httpx2|httpcore2)\..*' was garbage collected:ResourceWarning"
)

CALLS = 50
"""Concurrent calls of the fleet-wide ``concurrency: 2`` test."""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return write_fleet_project(tmp_path / "fleet")


@pytest.fixture
def fleet(project: Path, redis_server: RedisServer) -> Iterator[Fleet]:
    """Three replicas on the test's Redis."""
    replicas = Fleet(project, "--state", redis_server.url)
    try:
        yield replicas
    finally:
        replicas.close()


def structured(result: types.CallToolResult) -> dict[str, object]:
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict), result
    return result.structured_content


async def test_concurrency_holds_across_three_replicas_under_fifty_calls(fleet: Fleet) -> None:
    """50 calls at once, one to each replica in turn: never more than two inside the tool, fleet-wide."""
    answered: list[dict[str, object]] = []
    with trio.fail_after(300):
        async with fleet_client(fleet, "2026-07-28") as (client, rotating):

            async def one(n: int) -> None:
                answered.append(structured(await client.call_tool("hold", {"n": n, "seconds": 0.1})))

            async with trio.open_nursery() as nursery:
                for n in range(CALLS):
                    nursery.start_soon(one, n)
    entries = journal(fleet.journal)
    assert most_at_once(entries) == 2  # each replica alone would have let two of its own in: six
    assert sorted(int(str(answer["n"])) for answer in answered) == list(range(CALLS))
    assert Counter(n for what, n, _ in entries if what == "enter") == dict.fromkeys(range(CALLS), 1)
    assert {pid for _, _, pid in entries} == set(fleet.pids())  # every replica ran some
    assert set(rotating.sent) == set(fleet.ports)
