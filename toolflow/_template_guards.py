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

import re
from collections.abc import Collection, Iterator, Mapping

import attrs
import jinja2.nodes

from toolflow._templates import TemplateProblem, parse_template

__all__ = [
    "SIMPLE_DEPTH",
    "SIMPLE_KEYWORDS",
    "SIMPLE_OPENER",
    "SIMPLE_OUTPUT",
    "SIMPLE_TAG",
    "simple_pieces",
    "unguarded_template_reads",
]

# The grammar of a *simple* template: text, ``{{ name }}`` outputs (a name with attributes) and
# plain ``{% if %}`` blocks whose conditions are such a name, maybe after ``not`` and before ``is
# defined`` or ``is not defined``. Most templates tools declare are simple, and reading them
# with these expressions is several times faster than Jinja's parser: the lint's template facts
# (toolflow._lint._template_facts) and the guards below read them so, and fall back to the
# parser for any other template. Tests check both answers against the parser's.
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_PATH = rf"(?P<name>{_NAME})(?:\.(?P<attribute>{_NAME}))?(?:\.{_NAME})*"
SIMPLE_OPENER = re.compile(r"\{[{%#]")
SIMPLE_OUTPUT = re.compile(rf"\{{\{{-?[ \t]*{_PATH}[ \t]*-?\}}\}}")
SIMPLE_TAG = re.compile(
    rf"\{{%-?[ \t]*(?P<tag>if|elif|else|endif)"
    rf"(?:[ \t]+(?P<negated>not[ \t]+)?{_PATH}(?P<test>[ \t]+is[ \t]+(?P<not_defined>not[ \t]+)?defined)?)?[ \t]*-?%\}}"
)
SIMPLE_KEYWORDS = frozenset(
    {"and", "or", "not", "in", "is", "if", "elif", "else", "endif", "true", "false", "none", "True", "False", "None"}
)
"""Words that are not plain names to Jinja's parser (constants, operators, tags): not simple."""
SIMPLE_DEPTH = 64
"""The deepest nesting of ``if`` blocks a simple template may have (Python refuses code nested about 100 deep)."""

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
    implications = {name: frozenset(more) for name, more in (implied or {}).items()}
    simple = _simple_reads(source, _Scope(frozenset(names), implications))
    if simple is not None:
        return simple
    return _parsed_reads(source, _Scope(frozenset(names), implications))


def _parsed_reads(source: str, scope: _Scope) -> list[tuple[str, int]]:
    """:func:`unguarded_template_reads` of any template, by a walk of its syntax tree."""
    tree = parse_template(source)
    if isinstance(tree, TemplateProblem):
        return []
    assigned = {node.name for node in tree.find_all(jinja2.nodes.Name) if node.ctx in ("store", "param")}
    wanted = scope.wanted - assigned
    if not wanted:
        return []
    found: dict[str, int] = {}
    for name, line in _reads(tree, frozenset(), _Scope(wanted, scope.implied)):
        found.setdefault(name, line)
    return sorted(found.items(), key=lambda item: (item[1], item[0]))


@attrs.define
class _Branch:
    """An open ``if`` of a simple template: what holds outside it, and after its tests so far were false."""

    outside: frozenset[str]
    so_far: frozenset[str]


def simple_pieces(source: str) -> list[re.Match[str]] | None:
    """The outputs and tags of a simple template, in order (``SIMPLE_OUTPUT``/``SIMPLE_TAG`` matches); else ``None``.

    Simple: text, outputs and ``if``/``elif``/``else``/``endif`` tags only, no name that is a
    keyword, the blocks balanced and at most :data:`SIMPLE_DEPTH` deep (deeper, Python may refuse
    the code Jinja generates: the parser and the compiler decide). Such a template compiles.
    """
    pieces: list[re.Match[str]] = []
    open_blocks: list[bool] = []  # per open `if`: whether its `else` was seen
    position = 0
    while (opener := SIMPLE_OPENER.search(source, position)) is not None:
        if opener[0] == "{#":
            return None
        is_tag = opener[0] == "{%"
        match = (SIMPLE_TAG if is_tag else SIMPLE_OUTPUT).match(source, opener.start())
        if match is None or match["name"] in SIMPLE_KEYWORDS:
            return None
        if is_tag and not _balanced_step(match["tag"], match["name"] is not None, open_blocks):
            return None
        pieces.append(match)
        position = match.end()
    return None if open_blocks else pieces


def _balanced_step(tag: str, has_condition: bool, open_blocks: list[bool]) -> bool:
    """Follow one ``if``/``elif``/``else``/``endif`` tag on *open_blocks*; False when the template is not simple."""
    if has_condition == (tag in ("else", "endif")):
        return False  # `if`/`elif` need a condition; `else`/`endif` take none
    if tag == "if":
        if len(open_blocks) >= SIMPLE_DEPTH:
            return False
        open_blocks.append(False)
    elif not open_blocks:
        return False  # outside any `if`
    elif tag == "endif":
        open_blocks.pop()
    elif open_blocks[-1]:
        return False  # `elif` or `else` after the block's `else`
    elif tag == "else":
        open_blocks[-1] = True
    return True


def _simple_reads(source: str, scope: _Scope) -> list[tuple[str, int]] | None:
    """:func:`unguarded_template_reads` of a simple template (:func:`simple_pieces`), or ``None`` for any other.

    The same answers as the walk of the parsed template (``_if``, ``_facts``): a branch knows
    what its test proves and what the tests before it disproved.
    """
    if "\r" in source:
        return None  # Jinja counts a lone carriage return as a line break
    pieces = simple_pieces(source)
    if pieces is None:
        return None
    found: dict[str, int] = {}
    guarded: frozenset[str] = frozenset()
    branches: list[_Branch] = []
    line, counted = 1, 0
    for match in pieces:
        line += source.count("\n", counted, match.start())
        counted = match.start()
        tag = match.groupdict().get("tag")  # None for an output
        if tag == "elif":
            guarded = branches[-1].so_far  # an `elif`'s test runs where every test before it was false
        name = match["name"]
        if name in scope.wanted and name not in guarded and _reads_name(match, tag):
            found.setdefault(name, line)
        if tag is not None:
            guarded = _next_branch(tag, match, guarded, branches, scope.implied)
    return sorted(found.items(), key=lambda item: (item[1], item[0]))


def _reads_name(match: re.Match[str], tag: str | None) -> bool:
    """Whether the piece reads its name: every output does; a condition unless it only tests ``is defined``."""
    return tag is None or match["test"] is None or match["attribute"] is not None


def _next_branch(
    tag: str,
    match: re.Match[str],
    guarded: frozenset[str],
    branches: list[_Branch],
    implied: Mapping[str, frozenset[str]],
) -> frozenset[str]:
    """Follow the ``if``/``elif``/``else``/``endif`` *tag* on *branches*; what is known defined after it."""
    if tag == "endif":
        return branches.pop().outside
    if tag == "else":
        return branches[-1].so_far
    when_true, when_false = _NOTHING
    if match["test"] and match["attribute"] is None:
        names = frozenset({match["name"]}) | implied.get(match["name"], frozenset())
        flips = (match["negated"] is not None) + (match["not_defined"] is not None)
        when_true, when_false = (names, frozenset()) if flips % 2 == 0 else (frozenset(), names)
    if tag == "if":
        branches.append(_Branch(outside=guarded, so_far=guarded))
    branches[-1].so_far |= when_false
    return guarded | when_true


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
