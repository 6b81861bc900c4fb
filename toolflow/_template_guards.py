"""Which reads of a template fail when a variable is not there: reads outside an ``is defined`` guard.

Templates render with strict undefined variables, so reading a name the call did not give
fails the rendering. A read is guarded, and so safe, when it is:

- the subject of an ``is defined`` or ``is undefined`` test (``tone is defined``), or of a test
  that only looks at the value's type (``tone is string``, ``tone is none``);
- the subject of a ``default`` (or ``d``) filter (``tone | default('plain')``);
- inside the branch where a test says the name is defined: ``{% if tone is defined %}``
  (the ``else`` of ``is not defined``), ``tone is defined and tone != 'x'``,
  ``tone is not defined or ...``, ``tone if tone is defined else 'plain'``.

A guard also proves what the tool's parameter rules tie to it: with ``when: target, require:
[message]``, ``target is defined`` proves ``message`` defined too (the caller passes these as
*implied*).

A name the template assigns anywhere (``set``, a ``for`` target, a macro's argument) is never
reported: which binding a read sees is the code generator's business, and a false report
would be worse than a missed one.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping

import attrs
import jinja2.nodes

from toolflow._templates import TemplateProblem, parse_template

__all__ = ["unguarded_template_reads"]

_DEFAULT_FILTERS = frozenset({"default", "d"})
_DEFINED_TESTS = frozenset({"defined", "undefined"})
_TYPE_TESTS = frozenset(
    {"boolean", "callable", "false", "float", "integer", "mapping", "none", "number", "sameas", "string", "true"}
)
"""Tests that only look at what a value is (``isinstance``, ``is``), which an undefined value survives."""

_Facts = tuple[frozenset[str], frozenset[str]]
"""The names known to be defined when a condition is true, and when it is false."""
_NOTHING: _Facts = (frozenset(), frozenset())


@attrs.frozen
class _Scope:
    """What a walk looks for: the *wanted* names, and the names each name's presence implies."""

    wanted: frozenset[str]
    implied: Mapping[str, frozenset[str]]


def unguarded_template_reads(
    source: str, names: Collection[str], implied: Mapping[str, Collection[str]] | None = None
) -> list[tuple[str, int]]:
    """``(name, template line)`` of the first unguarded read of each of *names* in *source*, by line.

    The reads that fail when the variable is not there (see the module docstring for the
    guards). *implied* maps a name to the names that are defined whenever it is (a parameter
    rule's ``when`` and ``require``). Nothing for a template that does not parse (lint reports
    its syntax).
    """
    tree = parse_template(source)
    if isinstance(tree, TemplateProblem):
        return []
    assigned = {node.name for node in tree.find_all(jinja2.nodes.Name) if node.ctx in ("store", "param")}
    wanted = frozenset(names) - assigned
    if not wanted:
        return []
    found: dict[str, int] = {}
    scope = _Scope(wanted, {name: frozenset(more) for name, more in (implied or {}).items()})
    for name, line in _reads(tree, frozenset(), scope):
        found.setdefault(name, line)
    return sorted(found.items(), key=lambda item: (item[1], item[0]))


def _reads(node: jinja2.nodes.Node, guarded: frozenset[str], scope: _Scope) -> Iterator[tuple[str, int]]:
    """The unguarded reads of *wanted* names under *node*, with *guarded* known to be defined."""
    if isinstance(node, jinja2.nodes.Name):
        if node.ctx == "load" and node.name in scope.wanted and node.name not in guarded:
            yield node.name, node.lineno
    elif isinstance(node, jinja2.nodes.Test) and node.name in _DEFINED_TESTS | _TYPE_TESTS and _is_name(node.node):
        yield from _each(node.args, guarded, scope)
    elif isinstance(node, jinja2.nodes.Filter) and node.name in _DEFAULT_FILTERS and _is_name(node.node):
        yield from _each([*node.args, *(k.value for k in node.kwargs)], guarded, scope)
    elif isinstance(node, jinja2.nodes.If):
        yield from _if(node, guarded, scope)
    elif isinstance(node, jinja2.nodes.And | jinja2.nodes.Or | jinja2.nodes.CondExpr):
        yield from _conditional(node, guarded, scope)
    else:
        yield from _each(node.iter_child_nodes(), guarded, scope)


def _conditional(
    node: jinja2.nodes.And | jinja2.nodes.Or | jinja2.nodes.CondExpr, guarded: frozenset[str], scope: _Scope
) -> Iterator[tuple[str, int]]:
    """``a and b``, ``a or b``, ``x if a else y``: what the condition proves holds where it is evaluated."""
    if isinstance(node, jinja2.nodes.CondExpr):
        yield from _reads(node.test, guarded, scope)
        when_true, when_false = _facts(node.test, scope.implied)
        yield from _reads(node.expr1, guarded | when_true, scope)
        if node.expr2 is not None:
            yield from _reads(node.expr2, guarded | when_false, scope)
        return
    yield from _reads(node.left, guarded, scope)
    when_true, when_false = _facts(node.left, scope.implied)
    proven = when_true if isinstance(node, jinja2.nodes.And) else when_false
    yield from _reads(node.right, guarded | proven, scope)


def _is_name(node: jinja2.nodes.Node | None) -> bool:
    return isinstance(node, jinja2.nodes.Name)


def _each(nodes: object, guarded: frozenset[str], scope: _Scope) -> Iterator[tuple[str, int]]:
    for child in nodes:  # type: ignore[attr-defined]
        if isinstance(child, jinja2.nodes.Node):
            yield from _reads(child, guarded, scope)


def _if(node: jinja2.nodes.If, guarded: frozenset[str], scope: _Scope) -> Iterator[tuple[str, int]]:
    """An ``if`` with its ``elif``s and ``else``: each branch knows what the tests before it said."""
    so_far = guarded  # what every test before the current branch being false tells
    for branch in (node, *node.elif_):
        yield from _reads(branch.test, so_far, scope)
        when_true, when_false = _facts(branch.test, scope.implied)
        yield from _each(branch.body, so_far | when_true, scope)
        so_far |= when_false
    yield from _each(node.else_, so_far, scope)


def _facts(test: jinja2.nodes.Node, implied: Mapping[str, frozenset[str]]) -> _Facts:
    """The names *test* proves defined when it is true, and when it is false (with what they imply)."""
    if isinstance(test, jinja2.nodes.Test) and test.name in _DEFINED_TESTS and isinstance(test.node, jinja2.nodes.Name):
        name = frozenset({test.node.name}) | implied.get(test.node.name, frozenset())
        return (name, frozenset()) if test.name == "defined" else (frozenset(), name)
    if isinstance(test, jinja2.nodes.Not):
        when_true, when_false = _facts(test.node, implied)
        return when_false, when_true
    if isinstance(test, jinja2.nodes.And):
        (left_true, left_false), (right_true, right_false) = _facts(test.left, implied), _facts(test.right, implied)
        return left_true | right_true, left_false & right_false
    if isinstance(test, jinja2.nodes.Or):
        (left_true, left_false), (right_true, right_false) = _facts(test.left, implied), _facts(test.right, implied)
        return left_true & right_true, left_false | right_false
    return _NOTHING
