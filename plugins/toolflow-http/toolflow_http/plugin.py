"""The toolflow plugin: registers the ``http`` implementation kind, its lint rules and the ``http-examples`` tool pack.

Entry point ``[project.entry-points.toolflow] http = "toolflow_http.plugin"``.
Loading it (as ``toolflow lint`` does, to check ``http:`` keys against the
schema) imports neither httpx nor trio: they are imported when the first
``http`` tool is built.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from importlib.resources import files
from typing import Any

from toolflow import ImplementationKind, ToolSpec, hookimpl
from toolflow_http._schema import SCHEMA

__all__ = ["KIND", "build", "toolflow_register_kinds", "toolflow_register_lint_rules", "toolflow_register_tool_packs"]


def build(spec: ToolSpec) -> Callable[..., Awaitable[dict[str, Any]]]:
    """Compile *spec*'s ``http:`` configuration into the async callable that runs it."""
    from toolflow_http._request import build as build_request  # noqa: PLC0415 - httpx only when a tool is built

    return build_request(spec)


KIND = ImplementationKind(
    name="http",
    schema=SCHEMA,
    build=build,
    description="An HTTP request templated from the arguments; the response is the result.",
)
"""The ``http`` implementation kind."""


@hookimpl
def toolflow_register_kinds(register: Callable[[Any], None]) -> None:
    """Add the ``http`` implementation kind."""
    register(KIND)


@hookimpl
def toolflow_register_lint_rules(register: Callable[[Any], None]) -> None:
    """Add the ``HTTP1xx`` rules: templates of ``http:`` values compile and read only parameters."""
    from toolflow_http._lint import RULES  # noqa: PLC0415 - only lint needs the rules

    for rule in RULES:
        register(rule)


@hookimpl
def toolflow_register_tool_packs(register: Callable[[str, Any], None]) -> None:
    """Ship ``http-examples``: two tools that call public services without a key (``include: [http-examples]``)."""
    register("http-examples", [str(files("toolflow_http") / "packs" / "http_examples.yaml")])
