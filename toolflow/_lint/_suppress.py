"""Suppression comments: ``# toolflow: ignore[TF203, missing-description]``.

A comment on a line of its own covers the next line; a comment after content
covers its own line. Without brackets (``# toolflow: ignore``) it covers every
rule.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import attrs

__all__ = ["Suppression", "find_suppressions"]

_COMMENT = re.compile(r"(?:^|\s)#\s*toolflow:\s*ignore(?:\[([^\]]*)\])?")


@attrs.define(kw_only=True)
class Suppression:
    """One suppression comment: where it is, which line it covers, and which selectors it names.

    ``selectors`` is empty for a bare ``ignore`` (every rule). ``used`` collects
    the selectors that matched a diagnostic (``"*"`` for a bare ignore).
    """

    line: int
    column: int
    covers: int
    selectors: tuple[str, ...]
    used: set[str] = attrs.field(factory=set)


def find_suppressions(text: str, in_string: Callable[[int, int], bool] | None = None) -> list[Suppression]:
    """Return the suppression comments of a spec file's *text*.

    *in_string* tells whether a position lies inside a string value, where a
    ``#`` is text rather than a comment.
    """
    if "toolflow:" not in text:
        return []
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        if "toolflow:" not in line:
            continue
        match = _COMMENT.search(line)
        if match is None:
            continue
        column = line.index("#", match.start()) + 1
        if in_string is not None and in_string(number, column):
            continue
        own_line = line.lstrip().startswith("#")
        raw = match[1]
        selectors = tuple(s.strip() for s in raw.split(",") if s.strip()) if raw is not None else ()
        found.append(
            Suppression(line=number, column=column, covers=number + 1 if own_line else number, selectors=selectors)
        )
    return found
