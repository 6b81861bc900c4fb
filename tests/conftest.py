"""Shared pytest hooks: print the adversarial corpora's sizes at the end of the run.

``toolflow.testing`` also collects the ``*.toolflow.yaml`` test files under ``tests/`` (those
of the example specs are in ``tests/specs/``), so that ``pytest`` runs them as ``toolflow
test`` does.
"""

from __future__ import annotations

import pytest
from _corpus import COUNTS

pytest_plugins = ["toolflow.testing", "_redis"]  # _redis: the redis_server fixture (issue 19)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line per adversarial corpus: how many hostile inputs its tests ran."""
    if not COUNTS:
        return
    terminalreporter.section("adversarial corpora")
    for corpus, count in sorted(COUNTS.items()):
        terminalreporter.write_line(f"{corpus}: {count:,} inputs")
