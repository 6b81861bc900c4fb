"""The toolflow exception tree.

::

    ToolflowError                 base of everything toolflow raises on purpose
    ├── UsageError                a command line or API misuse          (exit 2)
    ├── ConfigError               bad [tool.toolflow] configuration     (exit 2)
    └── SpecError                 spec files with error diagnostics     (exit 1)

Each error carries the object it is about, and an ``exit_code`` used by the CLI.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from toolflow._diagnostics import Diagnostic

__all__ = ["ConfigError", "SpecError", "ToolflowError", "UsageError"]


class ToolflowError(Exception):
    """Base class of the errors toolflow raises on purpose."""

    exit_code: int = 2


class UsageError(ToolflowError):
    """The command line or an API call was used wrongly."""

    exit_code = 2


class ConfigError(ToolflowError):
    """The ``[tool.toolflow]`` configuration is invalid.

    Attributes:
        path: The configuration file, when known.
    """

    exit_code = 2

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path


class SpecError(ToolflowError):
    """Loading specs produced error diagnostics.

    Attributes:
        diagnostics: Every diagnostic of the load, errors and warnings.
    """

    exit_code = 1

    def __init__(self, diagnostics: Sequence[Diagnostic]) -> None:
        self.diagnostics = tuple(diagnostics)
        errors = [d for d in self.diagnostics if d.severity.value == "error"]
        lines = "\n".join(d.render() for d in errors[:20])
        more = f"\n... and {len(errors) - 20} more" if len(errors) > 20 else ""
        super().__init__(f"{len(errors)} error(s) in spec files:\n{lines}{more}")
