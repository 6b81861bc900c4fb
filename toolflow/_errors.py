"""The toolflow exception tree, and the argument checks of the public constructors.

Every exception and warning class toolflow defines, its module (``_errors`` when none is
given) and the exit code the CLI gives an error; ``tests/test_architecture.py`` fails when a
class is missing, drawn under another base, or given another module or exit code::

    Exception
    ├── ToolflowError                 base of everything toolflow raises on purpose   (exit 2)
    │   ├── UsageError                a command line or API misuse                     (exit 2)
    │   ├── ConfigError               bad [tool.toolflow] configuration                (exit 2)
    │   ├── SpecError                 spec files with error diagnostics                (exit 1)
    │   ├── TemplateError             a template that does not compile or render       (exit 1)  _templates
    │   ├── PluginError               a broken plugin or lazy implementation           (exit 2)  _plugins
    │   ├── RegistryError             specs and plugins that do not fit together       (exit 1)  _registry
    │   ├── UnknownToolError          no such tool; also a LookupError                 (exit 2)  _registry
    │   │   ├── UnknownToolsetError   no such toolset                                  (exit 2)  _registry
    │   │   └── UnknownCategoryError  no such category                                 (exit 2)  _registry
    │   ├── ProviderError             a model provider failed to answer                (exit 1)  _providers
    │   └── ToolSourceError           an MCP server of the specs cannot be used        (exit 2)  _mcp_specs
    └── DocumentError                 unusable YAML; the loader makes it a diagnostic            _yaml
    UserWarning
    ├── PluginLoadWarning             a plugin could not be loaded; toolflow goes on without it  _plugins
    ├── CacheWarning                  a cache store is unusable; the call ran without it         _cache
    ├── CallHookWarning               a plugin's call hook raised; the call went on              _attempts
    ├── OperationHookWarning          a plugin's operation hook raised; it went on untraced      _telemetry
    ├── ApprovalWarning               an approver raised; the call was refused                   _approval
    └── ToolSourceWarning             an MCP server is down, or a remote tool was left out       _mcp_specs

Each error carries the object it is about, and an ``exit_code`` used by the CLI.

Public constructors and factories check their arguments with :func:`expect`,
:func:`expect_count` and :func:`expect_names`, which raise the standard ``TypeError``
or ``ValueError`` (as attrs validators do) naming the argument, what it must be and
the type given, rather than let a wrong argument fail later, deep inside, with an
``AttributeError``. Calls and turns are not checked again (they are the hot paths).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from toolflow._diagnostics import Diagnostic

__all__ = [
    "ConfigError",
    "SpecError",
    "ToolflowError",
    "UsageError",
    "error_message",
    "error_text",
    "expect",
    "expect_count",
    "expect_names",
    "expect_number",
]


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


def error_text(error: BaseException) -> str:
    """*error* as ``TypeName: message`` (``TypeName`` alone when the message is empty); never raises.

    The message is :func:`error_message`'s.
    """
    message = error_message(error)
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def error_message(error: BaseException) -> str:
    """*error*'s message, its ``str()``; never raises.

    An exception's message is code of whoever raised it: a ``__str__`` that raises, or an
    argument Python will not write (an integer longer than ``sys.get_int_max_str_digits()``),
    gives ``<a message that cannot be written as text>`` rather than a second exception where
    the first one is being reported.
    """
    try:
        return str(error)
    except Exception:  # noqa: BLE001 - the message is the raiser's code; its failure is not the report's
        return "<a message that cannot be written as text>"


def _given(value: object) -> str:
    return "None" if value is None else repr(type(value).__name__)


def expect(value: object, kinds: type | tuple[type, ...], name: str, expected: str) -> None:
    """Raise ``TypeError`` unless *value* is an instance of *kinds*.

    The message reads ``{name} must be {expected}, got {type}``: *name* says where
    (``"Agent: engine"``) and *expected* what in words (``"a toolflow.Engine"``).
    """
    if not isinstance(value, kinds):
        msg = f"{name} must be {expected}, got {_given(value)}"
        raise TypeError(msg)


def expect_count(value: object, name: str, *, minimum: int, optional: bool = False) -> None:
    """Raise ``TypeError`` unless *value* is an ``int`` (a ``bool`` is not; ``None`` is when *optional*).

    Raises ``ValueError`` when it is below *minimum*.
    """
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        expected = f"an integer of at least {minimum}" + (" or None" if optional else "")
        msg = f"{name} must be {expected}, got {_given(value)}"
        raise TypeError(msg)
    if value < minimum:
        msg = f"{name} must be at least {minimum}, got {value!r}"
        raise ValueError(msg)


def expect_number(value: object, name: str, expected: str, within: Callable[[float], bool]) -> None:
    """Raise ``TypeError`` unless *value* is a real number (not a ``bool``, not NaN), ``ValueError`` unless *within* it.

    *expected* says the range in words (``"a number from 0 to 1"``).
    """
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        msg = f"{name} must be {expected}, got {_given(value)}"
        raise TypeError(msg)
    if not within(value):
        msg = f"{name} must be {expected}, got {value!r}"
        raise ValueError(msg)


def expect_names(value: object, name: str, *, what: str = "names", optional: bool = False) -> None:
    """Raise ``TypeError`` unless *value* is an iterable of strings (``None`` too when *optional*).

    A single string (or path) is refused: iterating it would give its characters.
    """
    if value is None and optional:
        return
    if isinstance(value, str | bytes | os.PathLike):
        msg = f"{name} must be a list of {what}, got the single {_given(value)} {value!r}: put it in a list"
        raise TypeError(msg)
    if not isinstance(value, Iterable):
        msg = f"{name} must be a list of {what}{' or None' if optional else ''}, got {_given(value)}"
        raise TypeError(msg)
