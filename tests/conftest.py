"""Shared pytest hooks: print the adversarial corpora's sizes at the end of the run."""

from __future__ import annotations

import pytest
from _corpus import COUNTS


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line per adversarial corpus: how many hostile inputs its tests ran."""
    if not COUNTS:
        return
    terminalreporter.section("adversarial corpora")
    for corpus, count in sorted(COUNTS.items()):
        terminalreporter.write_line(f"{corpus}: {count:,} inputs")
