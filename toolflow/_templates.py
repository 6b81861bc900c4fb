"""Sandboxed Jinja2 for ``template:`` and ``command:`` implementations.

Templates run in a :class:`jinja2.sandbox.ImmutableSandboxedEnvironment` with
``StrictUndefined``: only the call's arguments (and the environment variables a
spec lists, as ``env.NAME``) are visible, and attribute access that reaches for
Python internals raises a security error instead of leaking them.
"""

from __future__ import annotations

import functools
from collections.abc import Set as AbstractSet

import attrs
import jinja2
import jinja2.meta
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

__all__ = ["TemplateProblem", "environment", "parse_template", "template_variables"]

TEMPLATE_GLOBALS = frozenset({"env", "range", "dict", "lipsum", "cycler", "joiner", "namespace"})
"""Names a template may use without declaring them as parameters."""


@functools.cache
def environment() -> ImmutableSandboxedEnvironment:
    """Return the shared sandboxed environment (autoescape off: results are not HTML)."""
    return ImmutableSandboxedEnvironment(
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
    )


@attrs.frozen(kw_only=True)
class TemplateProblem:
    """A template that does not compile: the message and the 1-based line inside the template."""

    message: str
    line: int


def parse_template(source: str) -> jinja2.nodes.Template | TemplateProblem:
    """Parse *source*; return its syntax tree or the problem that stops it compiling."""
    try:
        return environment().parse(source)
    except jinja2.TemplateSyntaxError as exc:
        return TemplateProblem(message=exc.message or "template syntax error", line=exc.lineno or 1)


def template_variables(tree: jinja2.nodes.Template) -> AbstractSet[str]:
    """Return the free variables of a parsed template (those it reads but never sets)."""
    return jinja2.meta.find_undeclared_variables(tree)
