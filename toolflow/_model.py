"""Frozen records of loaded specs: tools, policies, spec files. No I/O here.

JSON-Schema documents (``parameters``, ``output_schema``) and free-form values
(``policy``, example arguments) are kept as the plain mappings the loader built;
treat them as read-only. A string the loader interpolated from ``${...}`` is a
``toolflow._provenance.Interpolated``; the records list where those are (``interpolated``).
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Mapping
from typing import Any, Literal

import attrs

from toolflow._diagnostics import Diagnostic, Locator
from toolflow._errors import UsageError, expect, expect_count, expect_names, expect_number
from toolflow._provenance import Interpolated

__all__ = [
    "BUILTIN_CATEGORIES",
    "CONTEXT_PATH",
    "DEFAULT_RETRY_ON",
    "MISSING",
    "CachePolicy",
    "CacheScope",
    "Category",
    "Example",
    "Implementation",
    "LoadResult",
    "McpServer",
    "McpToolRef",
    "ParameterRule",
    "Pipeline",
    "PipelineStep",
    "RateLimit",
    "RemoteTool",
    "RetryPolicy",
    "SpecFile",
    "ToolDependency",
    "ToolSpec",
    "Toolset",
    "duration_setting",
    "format_duration",
    "look_up",
    "parse_duration",
    "parse_duration_text",
]


class Category(enum.StrEnum):
    """The built-in tool categories; each decides what the agent loop does after a call."""

    SAFE_CHAIN = "safe_chain"
    """Read-only or low-risk; chains freely within a loop."""
    TERMINAL = "terminal"
    """Communicates outward; a successful call ends the loop."""
    DANGEROUS = "dangerous"
    """Modifies state; at most one per tick, never retried unless idempotent."""
    ASYNC_REQUIRED = "async_required"
    """External or long-running work; the loop continues."""


BUILTIN_CATEGORIES = frozenset(c.value for c in Category)


class CacheScope(enum.StrEnum):
    """How long a cached result lives."""

    TICK = "tick"
    SESSION = "session"
    PERSISTENT = "persistent"


DEFAULT_RETRY_ON = ("timeout", "connection", "network", "temporary", "rate_limit")

_DURATION = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s|m|h)\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_SECONDS = re.compile(r"\s*[0-9]+(?:\.[0-9]+)?\s*")


def parse_duration(value: object) -> float:
    """Return *value* in seconds: ``500ms``, ``30s``, ``5m``, ``1h`` or a number of seconds.

    Raises:
        ValueError: *value* is not a positive duration.
    """
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str) and (match := _DURATION.match(value)):
        seconds = float(match[1]) * _UNIT_SECONDS[match[2]]
    else:
        msg = f"expected a duration like '500ms', '30s', '5m' or a number of seconds, got {value!r}"
        raise ValueError(msg)
    if not seconds > 0:
        msg = f"a duration must be positive, got {value!r}"
        raise ValueError(msg)
    return seconds


def parse_duration_text(value: object) -> float:
    """As :func:`parse_duration`, where text that is a plain number counts as seconds (``"90"``).

    For the durations a person types: command-line options, environment variables,
    ``pyproject.toml``. Spec files keep to their schema, whose durations as text have a unit.

    Raises:
        ValueError: *value* is not a positive duration.
    """
    if isinstance(value, str) and _SECONDS.fullmatch(value):
        seconds = float(value)
        if not seconds > 0:
            msg = f"a duration must be positive, got {value!r}"
            raise ValueError(msg)
        return seconds
    return parse_duration(value)


def duration_setting(value: object, *, where: str) -> float:
    """:func:`parse_duration_text` of a setting a person gave (an option, a variable), in seconds.

    Raises:
        UsageError: *value* is not a positive duration; the message names *where* it was set.
    """
    try:
        return parse_duration_text(value)
    except ValueError as exc:
        msg = f"{where}: {exc}"
        raise UsageError(msg) from None


def format_duration(value: float) -> str:
    """A duration as a spec writes it: ``500ms`` below a second, else ``30s``, ``1.5s``."""
    # 15 significant digits: no exponent for long timeouts, no float noise (0.3 s is 300ms)
    return f"{value * 1000:.15g}ms" if value < 1 else f"{value:.15g}s"


@attrs.frozen(kw_only=True)
class RetryPolicy:
    """Attempts and exponential backoff; defaults follow seed 000."""

    attempts: int = 4
    initial: float = 1.0
    max: float = 10.0
    multiplier: float = 2.0
    jitter: bool = True
    on: tuple[str, ...] = DEFAULT_RETRY_ON

    def __attrs_post_init__(self) -> None:
        # The loader makes several per tool, all well-formed: one cheap test lets them through.
        if (
            type(self.attempts) is int
            and self.attempts >= 0
            and type(self.initial) in _REAL
            and type(self.max) in _REAL
            and type(self.multiplier) in _REAL
            and 0 <= self.initial < math.inf
            and 0 <= self.max < math.inf
            and 1 <= self.multiplier < math.inf
            and type(self.jitter) is bool
            and type(self.on) is tuple
        ):
            return
        expect_count(self.attempts, "RetryPolicy: attempts", minimum=0)  # 0 runs once, as 1 does
        for name in ("initial", "max"):
            expect_number(getattr(self, name), f"RetryPolicy: {name}", "seconds from 0", lambda x: 0 <= x < math.inf)
        expect_number(self.multiplier, "RetryPolicy: multiplier", "a number from 1", lambda x: 1 <= x < math.inf)
        expect(self.jitter, bool, "RetryPolicy: jitter", "True or False")
        expect_names(self.on, "RetryPolicy: on", what="error classes")


_REAL = (int, float)


NO_RETRY = RetryPolicy(attempts=1)


@attrs.frozen(kw_only=True)
class CachePolicy:
    """Cache successful results in *scope* for *ttl* seconds (``None``: for the whole scope)."""

    scope: CacheScope = CacheScope.SESSION
    ttl: float | None = None


@attrs.frozen(kw_only=True)
class RateLimit:
    """A tool's ``rate_limit``: at most *calls* calls in any *per* seconds (a sliding window).

    Counted by the engine's state backend, so across every engine that shares it: the process's
    (``toolflow serve``'s sessions) by default, the fleet's with a Redis state. Distinct from a
    category's ``per_turn`` and from the policy's call limits, which count one conversation's calls.
    *on_outage*: what a call does when the shared state cannot count it: ``closed`` (the default)
    is refused, ``open`` runs uncounted.
    """

    calls: int
    per: float
    on_outage: Literal["open", "closed"] = "closed"


@attrs.frozen(kw_only=True)
class ParameterRule:
    """A friendly parameter dependency rule.

    ``kind`` is one of:

    - ``requires``: when ``when`` is given (and, with ``when_values``, has those
      values), every name in ``params`` is required;
    - ``exclusive``: at most one of ``params``;
    - ``at_least_one``: one or more of ``params``;
    - ``exactly_one``: exactly one of ``params``.
    """

    kind: Literal["requires", "exclusive", "at_least_one", "exactly_one"]
    params: tuple[str, ...]
    when: str | None = None
    when_values: Mapping[str, Any] | None = None
    pointer: str = ""


@attrs.frozen(kw_only=True)
class ToolDependency:
    """This tool may run only after ``tool`` succeeded earlier in the same ``scope``."""

    tool: str
    scope: Literal["loop", "session"] = "loop"
    pointer: str = ""


@attrs.frozen(kw_only=True)
class Example:
    """An argument set that must validate, optionally with the expected result.

    ``result`` documents (it is checked against ``output_schema``, never run); the
    ``expect*`` fields are what ``toolflow test`` checks by running the example. Each is
    ``None`` when the example does not declare it (``expect: null`` is *expect_null*).
    """

    args: Mapping[str, Any]
    result: Any = None
    has_result: bool = False
    description: str = ""
    pointer: str = ""
    expect: Any = None
    expect_null: bool = False
    expect_contains: Any = None
    expect_error: str | None = None
    context: Mapping[str, Any] | None = None
    """The caller's context the example runs under, which fills the tool's bound parameters."""

    @classmethod
    def from_document(cls, example: Mapping[str, Any], pointer: str) -> Example:
        """The example a spec's ``examples`` entry *example* (checked by the schema) declares, at *pointer*."""
        return cls(
            args=example["args"],
            result=example.get("result"),
            has_result="result" in example,
            description=example.get("description", ""),
            pointer=pointer,
            expect=example.get("expect"),
            expect_null="expect" in example and example["expect"] is None,
            expect_contains=example.get("expect_contains"),
            expect_error=example.get("expect_error"),
            context=example.get("context"),
        )

    @property
    def has_expect(self) -> bool:
        """Whether the example declares ``expect`` (its value may be ``null``)."""
        return self.expect is not None or self.expect_null

    @property
    def is_test(self) -> bool:
        """Whether ``toolflow test`` runs the example: it declares an expected outcome."""
        return self.has_expect or self.expect_contains is not None or self.expect_error is not None


@attrs.frozen(kw_only=True)
class Implementation:
    """How a tool runs: ``kind`` is the spec key (``implementation``, ``template``, ``command``)."""

    kind: str
    config: Any
    pointer: str = ""


@attrs.frozen(kw_only=True)
class PipelineStep:
    """One step of a pipeline: a call of ``tool`` with the arguments ``with`` makes.

    The templated values (``with``, ``when``, ``for_each``) are kept as the spec wrote them; a
    string among them is a template over the pipeline's parameters, ``steps``, ``errors`` and,
    in a ``for_each`` step, the item (``item``, or the name ``item_name`` gives).
    """

    name: str
    tool: str
    arguments: Any = attrs.field(factory=dict)
    """The ``with:`` value: a mapping whose strings are templates (nested mappings and lists too)."""
    when: Any = None
    """A template: when it is false, the step is skipped (``None``: the step always runs)."""
    for_each: Any = None
    """A template whose value is a list: the step calls its tool once per item (``None``: once)."""
    item_name: str = "item"
    concurrency: int | None = None
    """At most this many items of a ``for_each`` step run at once (``None``: no limit of the step's own)."""
    needs: tuple[str, ...] = ()
    """Earlier steps this one waits for without reading their results."""
    on_error: Literal["stop", "continue"] = "stop"
    pointer: str = ""


@attrs.frozen(kw_only=True)
class Pipeline:
    """The ``pipeline:`` of a tool: its steps in the spec's order, and the template of its result."""

    steps: tuple[PipelineStep, ...] = ()
    result: Any = None
    """A template, or a mapping or list of templates (``None`` with ``has_result`` false: every step's data)."""
    has_result: bool = False
    pointer: str = ""

    def step(self, name: str) -> PipelineStep | None:
        """The step called *name*, or ``None``."""
        return next((step for step in self.steps if step.name == name), None)


CONTEXT_PATH = re.compile(r"[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*")
"""What a path of a tool's ``context:`` is (``fullmatch``): dot-separated keys (a key of digits also indexes a list)."""

MISSING: Any = object()
"""What :func:`look_up` finds where a context has no value."""


def look_up(context: Mapping[str, Any], path: str) -> Any:
    """The value at the dotted *path* of *context*, or :data:`MISSING`.

    A key of digits indexes a list; a ``None`` value counts as missing (no principal, no user).
    """
    value: Any = context
    for key in path.split("."):
        if isinstance(value, Mapping):
            value = value.get(key, MISSING)
        elif isinstance(value, list | tuple) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        else:
            return MISSING
        if value is MISSING or value is None:
            return MISSING
    return value


@attrs.frozen(kw_only=True)
class ToolSpec:
    """One tool as declared in a spec file, with the file's defaults applied."""

    name: str
    description: str = ""
    title: str = ""
    category: str = Category.SAFE_CHAIN.value
    parameters: Mapping[str, Any] = attrs.field(factory=lambda: {"type": "object"})
    output_schema: Mapping[str, Any] | None = None
    timeout: float = 30.0
    retry: RetryPolicy = RetryPolicy()
    idempotent: bool = False
    strict: bool = False
    concurrency: int | None = None
    concurrency_on_outage: Literal["open", "closed"] = "open"
    """What a call does when the fleet's ``concurrency`` leases cannot be taken (the shared state is
    unreachable): ``open`` runs it under the engine's own limit, ``closed`` refuses it."""
    rate_limit: RateLimit | None = None
    """At most so many calls per period, across every engine that shares the state (``None``: no limit)."""
    cache: CachePolicy | None = None
    parameter_rules: tuple[ParameterRule, ...] = ()
    depends_on: tuple[ToolDependency, ...] = ()
    examples: tuple[Example, ...] = ()
    implementations: tuple[Implementation, ...] = ()
    expose: bool = True
    """Whether models are offered the tool (``False``: it serves only as a pipeline step)."""
    approval: bool | str | None = None
    """The tool's own approval: ``True`` (every call), a template over the arguments (the calls for
    which it is true), ``False`` or ``None`` (not written): none of its own. It only adds to its
    category's (the policy's) approval: ``False`` never takes that away."""
    deferred: bool = False
    """Whether the agent loop leaves the tool's calls to the caller: the run ends with ``deferred``
    and the calls wait in its saved state for their results (so does every tool of a ``deferred``
    category)."""
    context: Mapping[str, str] = attrs.field(factory=dict)
    """Parameters bound to the caller's context: ``{parameter: dotted path}`` (``{"user_id": "user.id"}``).
    They are filled from the context, never from the model, and left out of every export."""
    file: str = ""
    pointer: str = ""
    locator: Locator | None = attrs.field(default=None, eq=False, repr=False)
    interpolated: tuple[tuple[str, Interpolated], ...] = attrs.field(default=(), eq=False, repr=False)
    """The strings of the tool's body that came from ``${...}``: ``(JSON pointer into the file, string)``."""

    @property
    def implementation(self) -> Implementation | None:
        """The tool's implementation when exactly one kind is declared, else ``None``."""
        return self.implementations[0] if len(self.implementations) == 1 else None

    @property
    def pipeline(self) -> Pipeline | None:
        """The tool's pipeline when it is implemented by one, else ``None``."""
        implementation = self.implementation
        if implementation is not None and isinstance(implementation.config, Pipeline):
            return implementation.config
        return None


@attrs.frozen(kw_only=True)
class Toolset:
    """A named selection: the tools named plus those of the categories, minus the excluded names."""

    name: str
    description: str = ""
    tools: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    file: str = ""
    pointer: str = ""

    def selects(self, tool: ToolSpec) -> bool:
        """True when *tool* belongs to this toolset."""
        if tool.name in self.exclude:
            return False
        return tool.name in self.tools or tool.category in self.categories


@attrs.frozen(kw_only=True)
class McpServer:
    """An MCP server whose tools a spec file imports (an entry of ``mcp_servers:``).

    Exactly one of ``command`` (the server runs as a subprocess and speaks over stdio) and ``url``
    (streamable HTTP) is set. ``tools``, ``overrides`` and the annotations use the server's own
    names; the registry knows a remote tool as ``prefix + name``.
    """

    name: str
    command: tuple[str, ...] = ()
    url: str = ""
    env: Mapping[str, str] = attrs.field(factory=dict)
    """Variables added to the subprocess's environment (stdio)."""
    cwd: str = ""
    """The subprocess's working directory (stdio; default: the current one)."""
    headers: Mapping[str, str] = attrs.field(factory=dict)
    """Headers sent with every HTTP request (``url``)."""
    tools: tuple[str, ...] | None = None
    """The server's tools to import (``None``: all it lists)."""
    prefix: str = ""
    defaults: Mapping[str, Any] = attrs.field(factory=dict)
    """The defaults that apply to this server's tools: the entry's ``defaults`` over its file's ``defaults:``.

    Merged key by key by the loader (``retry`` and ``cache`` mappings key by key too), so this is
    what ``remote_tool_spec`` hands the builder as a file's defaults, with the overrides on top.
    """
    overrides: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict)
    """Tool keys per remote tool (category, cache, timeout, ...), over what the server and defaults say."""
    trust_annotations: bool = False
    """Whether the server's tool annotations decide category and idempotence (else: dangerous, not idempotent)."""
    file: str = ""
    pointer: str = ""

    @property
    def transport(self) -> Literal["stdio", "http"]:
        """How toolflow reaches the server."""
        return "http" if self.url else "stdio"

    def local_name(self, remote: str) -> str:
        """The registry's name of the server's tool *remote*."""
        return self.prefix + remote

    def imports(self, remote: str) -> bool:
        """Whether the server's tool *remote* joins the registry."""
        return self.tools is None or remote in self.tools

    @property
    def declared(self) -> tuple[str, ...]:
        """The registry names of the tools listed under ``tools:`` (none when every tool is imported)."""
        return tuple(self.local_name(name) for name in self.tools or ())


@attrs.frozen(kw_only=True)
class RemoteTool:
    """One tool as an MCP server lists it (``tools/list``); untrusted data from that server."""

    name: str
    description: str = ""
    title: str = ""
    input_schema: Mapping[str, Any] = attrs.field(factory=lambda: {"type": "object"})
    output_schema: Mapping[str, Any] | None = None
    annotations: Mapping[str, Any] = attrs.field(factory=dict)
    """The MCP tool annotations (``readOnlyHint``, ``destructiveHint``, ``idempotentHint``, ...): hints."""


@attrs.frozen(kw_only=True)
class McpToolRef:
    """The implementation config of a remote tool (kind ``mcp``): which server, which of its tools."""

    server: str
    tool: str


@attrs.frozen(kw_only=True)
class SpecFile:
    """One spec file: its tools, defaults, policy, and a locator for positions.

    A file that could not be read or parsed is still present, with ``ok=False``
    and no tools, so that suppression comments and statistics can see it.
    """

    path: str
    ok: bool = True
    version: int | None = None
    tools: tuple[ToolSpec, ...] = ()
    toolsets: tuple[Toolset, ...] = ()
    policy: Mapping[str, Any] | None = None
    includes: tuple[str, ...] = ()
    """The tool packs the file includes (``include:``) that a plugin provides."""
    mcp_servers: tuple[McpServer, ...] = ()
    """The MCP servers whose tools the file imports (``mcp_servers:``)."""
    data: Any = attrs.field(default=None, eq=False, repr=False)
    text: str = attrs.field(default="", eq=False, repr=False)
    locator: Locator | None = attrs.field(default=None, eq=False, repr=False)
    interpolated: tuple[tuple[str, Interpolated], ...] = attrs.field(default=(), eq=False, repr=False)
    """Every string of the document that came from ``${...}``: ``(JSON pointer, string)``, in document order."""


@attrs.frozen(kw_only=True)
class LoadResult:
    """What loading spec paths produced: files (with their tools) and diagnostics."""

    files: tuple[SpecFile, ...] = ()
    diagnostics: tuple[Diagnostic, ...] = ()

    @property
    def tools(self) -> tuple[ToolSpec, ...]:
        """Every tool of every file, in load order."""
        return tuple(tool for f in self.files for tool in f.tools)

    @property
    def toolsets(self) -> tuple[Toolset, ...]:
        """Every toolset of every file, in load order."""
        return tuple(toolset for f in self.files for toolset in f.toolsets)

    @property
    def mcp_servers(self) -> tuple[McpServer, ...]:
        """Every MCP server of every file, in load order."""
        return tuple(server for f in self.files for server in f.mcp_servers)

    @property
    def ok(self) -> bool:
        """True when no diagnostic is an error."""
        return not any(d.severity.value == "error" for d in self.diagnostics)
