"""Diagnostics: the data every checker yields.

A :class:`Diagnostic` names a problem in a spec file: a rule code (``TF203``) and
kebab name, a severity, a message, the file, a 1-based line and column (with the
end of the offending span), and a JSON pointer into the spec document.
"""

from __future__ import annotations

import enum
from typing import Protocol

import attrs

__all__ = ["Diagnostic", "Locator", "Severity", "Span"]


class Severity(enum.Enum):
    """How bad a diagnostic is; errors fail ``toolflow lint``, warnings do not by default."""

    ERROR = "error"
    WARNING = "warning"

    def __str__(self) -> str:
        return self.value


@attrs.frozen(kw_only=True)
class Span:
    """A 1-based, end-exclusive region of a source file."""

    line: int
    column: int
    end_line: int
    end_column: int


class Locator(Protocol):
    """Maps a JSON pointer into a spec document to a region of its source file."""

    def locate(self, pointer: str, *, key: bool = False) -> Span:
        """Return the span of the node at *pointer*.

        With ``key=True`` the span is that of the mapping key naming the node,
        which is where "unknown key" and "missing key" problems point. A pointer
        that does not resolve fully is located at its closest existing ancestor.
        """
        ...  # pragma: no cover - protocol

    def in_string(self, line: int, column: int) -> bool:
        """True when the 1-based position lies inside a quoted or block string (where ``#`` is text)."""
        ...  # pragma: no cover - protocol


@attrs.frozen(kw_only=True)
class Diagnostic:
    """One problem found in one place of one spec file."""

    code: str
    message: str
    file: str
    line: int = 1
    column: int = 1
    end_line: int = 0
    end_column: int = 0
    pointer: str = ""
    severity: Severity = Severity.ERROR
    name: str = ""

    def render(self) -> str:
        """Render as ``path:line:col: CODE message``, the default lint output."""
        return f"{self.file}:{self.line}:{self.column}: {self.code} {self.message}"

    @classmethod
    def at(
        cls,
        locator: Locator,
        pointer: str,
        *,
        code: str,
        message: str,
        file: str,
        key: bool = False,
        severity: Severity = Severity.ERROR,
        name: str = "",
    ) -> Diagnostic:
        """Build a diagnostic positioned by *locator* at *pointer*."""
        span = locator.locate(pointer, key=key)
        return cls(
            code=code,
            name=name,
            message=message,
            file=file,
            line=span.line,
            column=span.column,
            end_line=span.end_line,
            end_column=span.end_column,
            pointer=pointer,
            severity=severity,
        )

    def sort_key(self) -> tuple[str, int, int, str]:
        """Order by file, position, then code."""
        return (self.file, self.line, self.column, self.code)
