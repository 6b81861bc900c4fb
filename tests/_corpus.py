"""The adversarial corpora's counts, printed at the end of the test run (``tests/conftest.py``).

Each corpus test calls :func:`record` with how many hostile inputs it ran, so that CI's log
says how large every corpus was, not only that its tests passed (issue 14).
"""

from __future__ import annotations

COUNTS: dict[str, int] = {}


def record(corpus: str, count: int) -> None:
    """Add *count* inputs run to *corpus* (``templates``, ``argv``, ``specs``, ``json-rpc``, ...)."""
    COUNTS[corpus] = COUNTS.get(corpus, 0) + count
