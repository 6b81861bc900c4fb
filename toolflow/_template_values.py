"""Templated values: the ``with:``, ``when:``, ``for_each:`` and ``result:`` of a pipeline.

A templated value is what a spec writes: a mapping or a list (at any depth) whose strings are
templates of the sandbox (:mod:`toolflow._templates`), and scalars that stay as they are. A
string that is exactly one ``{{ expression }}`` keeps the expression's type (a list stays a
list, an integer an integer); any other string with Jinja syntax renders as text; a string
without Jinja syntax is itself.

:func:`compile_value` compiles one once (per tool); :func:`evaluate` gives its value in a
template worker, where every template renders (``toolflow._rendering``); :func:`references`
says which variables its templates read, and which steps (``steps.NAME``, ``errors.NAME``) --
what the pipeline's scheduler waits for and what lint checks.

What an expression gives must be JSON data (strings, numbers, booleans, null, lists and
mappings with string keys); anything else (a function, an iterator, ``range(3)``) fails the
evaluation with a :class:`~toolflow._templates.TemplateError`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import attrs
import jinja2
import jinja2.nodes

from toolflow._templates import (
    CompiledTemplate,
    TemplateError,
    TemplateProblem,
    compile_template,
    evaluate_expression,
    parse_template,
    render,
    single_expression,
    template_variables,
)

__all__ = [
    "MAX_FOR_EACH_ITEMS",
    "CompiledValue",
    "Reference",
    "compile_value",
    "constant_of",
    "evaluate",
    "evaluate_step",
    "is_constant",
    "is_true",
    "iter_references",
    "references",
]

STEP_ROOTS = ("steps", "errors")
"""The variables through which a pipeline's templates read its steps."""


@attrs.frozen
class _Constant:
    value: Any


@attrs.frozen
class _Text:
    template: CompiledTemplate


@attrs.frozen
class _Expression:
    source: str


@attrs.frozen
class _Mapping:
    items: tuple[tuple[str, Any], ...]


@attrs.frozen
class _List:
    items: tuple[Any, ...]


CompiledValue = _Constant | _Text | _Expression | _Mapping | _List
"""A templated value compiled by :func:`compile_value` (plain data: it travels to template workers)."""


@attrs.frozen(kw_only=True)
class Reference:
    """One read of a step in a template.

    ``steps.order.customer_id`` is root ``steps``, step ``order``, path ``("customer_id",)``.
    """

    root: str
    step: str | None
    """The step's name; ``None`` when the template picks it at run time (``steps[name]``)."""
    path: tuple[str, ...] = ()
    """The constant attribute and key names read from the step's value, outermost first."""
    line: int = 1


def compile_value(value: object, pointer: str = "") -> CompiledValue | tuple[str, TemplateProblem]:
    """Compile *value*; return it, or ``(JSON pointer, problem)`` of the first string that does not compile.

    The pointer is under *pointer*, the value's own.
    """
    if isinstance(value, str):
        return _compile_string(value, pointer)
    if isinstance(value, Mapping):
        items = [(str(key), item, f"{pointer}/{_escape(str(key))}") for key, item in value.items()]
    elif isinstance(value, list | tuple):
        items = [(str(index), item, f"{pointer}/{index}") for index, item in enumerate(value)]
    else:
        return _Constant(value)
    compiled: list[tuple[str, CompiledValue]] = []
    for key, item, where in items:
        compiled_item = compile_value(item, where)
        if isinstance(compiled_item, tuple):
            return compiled_item
        compiled.append((key, compiled_item))
    if all(isinstance(c, _Constant) for _, c in compiled):
        return _Constant(dict(value) if isinstance(value, Mapping) else list(value))
    if isinstance(value, Mapping):
        return _Mapping(tuple(compiled))
    return _List(tuple(c for _, c in compiled))


def _compile_string(value: str, pointer: str) -> CompiledValue | tuple[str, TemplateProblem]:
    if "{" not in value:
        return _Constant(value)
    compiled = compile_template(value)
    if isinstance(compiled, TemplateProblem):
        return pointer, compiled
    if compiled.constant is not None:
        return _Constant(compiled.constant)
    tree = parse_template(value)
    if not isinstance(tree, TemplateProblem) and single_expression(tree) is not None:
        return _Expression(value)
    return _Text(compiled)


def is_constant(value: CompiledValue) -> bool:
    """Whether *value* needs no template worker: it has no template in it."""
    return isinstance(value, _Constant)


def constant_of(value: CompiledValue) -> Any:
    """The value of a constant (:func:`is_constant`)."""
    assert isinstance(value, _Constant)
    return value.value


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


# --- references -----------------------------------------------------------------------------------


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def iter_references(source: str) -> Iterator[Reference]:
    """Every read of ``steps`` and ``errors`` in the template *source* (nothing when it does not parse)."""
    if "{" not in source:
        return
    tree = parse_template(source)
    if not isinstance(tree, TemplateProblem):
        yield from _tree_references(tree)


def _tree_references(tree: jinja2.nodes.Template) -> Iterator[Reference]:
    seen: set[int] = set()
    for node in tree.find_all((jinja2.nodes.Getattr, jinja2.nodes.Getitem, jinja2.nodes.Name)):
        if id(node) in seen:
            continue
        reference = _reference(node, seen)
        if reference is not None:
            yield reference


def _reference(node: jinja2.nodes.Node, seen: set[int]) -> Reference | None:
    """The reference an outermost look-up chain makes, marking its inner nodes as seen."""
    chain: list[str | None] = []
    current = node
    while isinstance(current, jinja2.nodes.Getattr | jinja2.nodes.Getitem):
        seen.add(id(current))
        if isinstance(current, jinja2.nodes.Getattr):
            chain.append(current.attr)
        elif isinstance(current.arg, jinja2.nodes.Const) and isinstance(current.arg.value, str):
            chain.append(current.arg.value)
        else:
            chain.append(None)  # an index or a key computed at run time
        current = current.node
    if not isinstance(current, jinja2.nodes.Name) or current.name not in STEP_ROOTS or current.ctx != "load":
        return None
    seen.add(id(current))
    chain.reverse()
    step = chain[0] if chain else None
    path: list[str] = []
    for part in chain[1:]:
        if part is None:
            break
        path.append(part)
    return Reference(root=current.name, step=step, path=tuple(path), line=node.lineno or 1)


def references(value: object) -> tuple[frozenset[str], frozenset[str], bool]:
    """What the templates of *value* read.

    Returns their free variables, the steps they name, and whether one picks a step at run time.
    """
    variables: set[str] = set()
    steps: set[str] = set()
    dynamic = False
    for source in _strings(value):
        if "{" not in source:
            continue
        tree = parse_template(source)
        if isinstance(tree, TemplateProblem):
            continue
        variables |= template_variables(tree)
        for reference in _tree_references(tree):  # the tree parsed once for both
            if reference.step is None:
                dynamic = True
            else:
                steps.add(reference.step)
    return frozenset(variables), frozenset(steps), dynamic


# --- evaluation (in a template worker) --------------------------------------------------------------


def evaluate(value: CompiledValue, variables: Mapping[str, Any]) -> Any:
    """The value of *value* with *variables*; run only in a template worker.

    Raises:
        TemplateError: A template failed, or an expression gave something that is not JSON data.
    """
    if isinstance(value, _Constant):
        return value.value
    if isinstance(value, _Text):
        return render(value.template, variables)
    if isinstance(value, _Expression):
        return evaluate_expression(value.source, variables)
    if isinstance(value, _Mapping):
        return {key: evaluate(item, variables) for key, item in value.items}
    return [evaluate(item, variables) for item in value.items]


def is_true(value: object) -> bool:
    """Whether a ``when:`` value lets its step run.

    An expression's value by its truth; text unless it is empty, ``false``, ``no``, ``0``, ``none`` or ``null``.
    """
    if isinstance(value, str):
        return value.strip().lower() not in {"", "false", "no", "0", "none", "null"}
    return bool(value)


MAX_FOR_EACH_ITEMS = 10_000
"""The most items a ``for_each`` may give: each is a call, and a longer list is refused."""


def evaluate_step(
    when: CompiledValue | None,
    for_each: CompiledValue | None,
    arguments: CompiledValue,
    item_name: str,
    variables: Mapping[str, Any],
) -> list[Any] | None:
    """A step's arguments with *variables*, in one job of a template worker: ``None`` when ``when`` is false.

    One set of arguments for a plain step; one per item, in the items' order, for a ``for_each`` step.

    Raises:
        TemplateError: A template failed, ``for_each`` gave no list (or more than
            :data:`MAX_FOR_EACH_ITEMS` items), or ``with`` gave no mapping.
    """
    if when is not None and not is_true(evaluate(when, variables)):
        return None
    if for_each is None:
        return [_arguments(evaluate(arguments, variables))]
    items = evaluate(for_each, variables)
    if not isinstance(items, list):
        msg = f"for_each gives {_described(items)}, not a list"
        raise TemplateError(msg)
    if len(items) > MAX_FOR_EACH_ITEMS:
        msg = f"for_each gives {len(items):,} items, more than the {MAX_FOR_EACH_ITEMS:,} a step may call"
        raise TemplateError(msg)
    return [_arguments(evaluate(arguments, {**variables, item_name: item})) for item in items]


def _arguments(value: Any) -> Any:
    if not isinstance(value, dict):
        msg = f"with gives {_described(value)}, not a mapping of arguments"
        raise TemplateError(msg)
    return value


def _described(value: object) -> str:
    if value is None:
        return "null"
    return {str: "text", bool: "a boolean", int: "a number", float: "a number", dict: "a mapping"}.get(
        type(value), "a list"
    )
