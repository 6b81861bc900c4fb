"""Which strings of a spec came from the environment (``${VAR}``), and how toolflow shows them.

The loader (``toolflow._yaml.convert``) returns each string value in which it replaced a
``${...}`` as an :class:`Interpolated`: a ``str`` whose value is the interpolated text, so it
is used like any other string to *run* a tool (a header, an argv item, a default handed to the
implementation), and which also carries the text as the spec file writes it
(:attr:`Interpolated.reference`, such as ``Bearer ${TRACKER_TOKEN}``) and the value of each
``${...}`` it replaced. Whatever toolflow *shows* — to a model, to an MCP client, in a lint
diagnostic, in ``toolflow list`` — shows the reference, never the value:

- ``repr()`` of an :class:`Interpolated` is the ``repr()`` of its reference, so a message that
  names a value with ``!r`` (STYLE rule 6) names the reference;
- :func:`masked` copies a JSON-like value with every :class:`Interpolated` replaced by its
  reference: tool definitions, validation messages and listings are built from it;
- a :class:`Redactor` is the backstop for text toolflow did not build from the strings
  themselves (an exception's message, a URL an HTTP client rendered): it replaces each value
  of at least :data:`MIN_MASKED_LENGTH` characters, in its usual escaped forms too, with its
  ``${...}`` reference.

The loader also records where each such string is (``SpecFile.interpolated`` and
``ToolSpec.interpolated``: JSON pointer and string), which the lint rule TF505 and the engine
use. What "shown" covers, and why, is in ``docs/security.md``.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Callable, Container, Iterable, Iterator, Mapping
from typing import Any, TypeVar, final

__all__ = ["MIN_MASKED_LENGTH", "Interpolated", "Redactor", "exact_types", "iter_interpolated", "masked", "plain"]

_T = TypeVar("_T")

MIN_MASKED_LENGTH = 8
"""Shortest value a :class:`Redactor` replaces in free text.

A shorter value (``1``, ``en``, ``true``) cannot be told apart from ordinary words and numbers
in a message, and replacing every occurrence would garble it; GitLab's masked CI variables have
the same limit. Values of any length are masked where toolflow builds the text from the string
itself (:func:`masked`, ``repr``).
"""


@final
class Interpolated(str):
    """A string value of a spec file in which the loader replaced ``${VAR}`` (or ``${VAR:-default}``).

    It equals, hashes, formats and serialises as its value; its ``repr()`` is that of
    :attr:`reference`. Copying returns the same object (it is immutable), so the mark survives
    ``copy.deepcopy``; pickling keeps it too. Operations that build new strings (``+``,
    slicing, ``str()``, rendering a template) return plain strings.

    Attributes:
        reference: The string as the spec file writes it, with its ``${...}`` (``Bearer ${TOKEN}``).
        substitutions: ``(reference, value)`` for each ``${...}`` replaced by a value of the
            environment, in order (``("${TOKEN}", "abc123")``); a ``${VAR:-default}`` that fell
            back to its default, or an unset variable, took nothing from the environment.
    """

    __slots__ = ("reference", "substitutions")
    reference: str
    substitutions: tuple[tuple[str, str], ...]

    def __new__(cls, value: str, *, reference: str, substitutions: tuple[tuple[str, str], ...]) -> Interpolated:
        """Mark *value*, interpolated from *reference* by *substitutions*."""
        self = super().__new__(cls, value)
        self.reference = str(reference)
        self.substitutions = substitutions
        return self

    def __repr__(self) -> str:
        return repr(self.reference)

    def __copy__(self) -> Interpolated:
        return self

    def __deepcopy__(self, memo: object) -> Interpolated:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (str(self), self.reference, self.substitutions))


def _rebuild(value: str, reference: str, substitutions: tuple[tuple[str, str], ...]) -> Interpolated:
    return Interpolated(value, reference=reference, substitutions=substitutions)


def masked(value: Any) -> Any:
    """*value* as toolflow shows it: a copy with every :class:`Interpolated` string replaced by its reference.

    Mappings become dicts, lists and tuples keep their type, and other values are returned as
    they are; the result shares no container with *value*, like ``copy.deepcopy`` of JSON data.
    """
    if type(value) is Interpolated:
        return value.reference
    if isinstance(value, Mapping):
        return {masked(k): masked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [masked(item) for item in value]
    if isinstance(value, tuple):
        return tuple(masked(item) for item in value)
    return value


def plain(value: Any, *, within: Container[int] | None = None) -> Any:
    """*value* with every :class:`Interpolated` string replaced by a plain ``str`` of its value.

    For libraries that accept only exact built-in types (``jsonschema_rs`` refuses ``str``
    subclasses). Containers are copied only where something changes; without any
    :class:`Interpolated` inside, *value* itself is returned. With *within* (the ``id()`` of
    every such string and of every container holding one, as ``toolflow._yaml.convert`` marks
    them), only those containers are visited.
    """
    kind = type(value)
    if kind is Interpolated:
        return str.__str__(value)
    if within is not None and id(value) not in within:
        return value
    if kind is dict or (kind is not list and kind is not tuple and kind is not str and isinstance(value, Mapping)):
        return _plain_mapping(value, within)
    if kind is list or kind is tuple:
        items = [plain(item, within=within) for item in value]
        if all(new is old for new, old in zip(items, value, strict=True)):
            return value
        return items if kind is list else tuple(items)
    return value


def _plain_mapping(value: Mapping[Any, Any], within: Container[int] | None) -> Mapping[Any, Any]:
    """:func:`plain` of a mapping: *value* itself, or a dict copy when an item changed."""
    changed: dict[Any, Any] | None = None
    for key, item in value.items():
        new = plain(item, within=within)
        if new is not item:
            if changed is None:
                changed = dict(value)
            changed[key] = new
    return value if changed is None else changed


def exact_types(function: Callable[[Any], _T], value: Any) -> _T:
    """``function(value)``, or ``function(plain(value))`` when *function* refuses *value* with a ``ValueError``.

    For ``jsonschema_rs``, which refuses ``str`` subclasses ("Unsupported type"): the plain
    copy is made only when a value holds one, so the usual call costs nothing more.
    """
    try:
        return function(value)
    except ValueError:
        exact = plain(value)
        if exact is value:
            raise
        return function(exact)


def iter_interpolated(
    value: Any, pointer: str = "", *, within: Container[int] | None = None
) -> Iterator[tuple[str, Interpolated]]:
    """Yield ``(JSON pointer, string)`` for every :class:`Interpolated` string inside *value*, in order.

    *pointer* is where *value* itself is; mapping keys and list indexes extend it. With
    *within* (see :func:`plain`), only the containers it names are visited.
    """
    stack: list[tuple[str, Any]] = [(pointer, value)]
    while stack:
        where, node = stack.pop()
        kind = type(node)
        if kind is Interpolated:
            yield where, node
            continue
        if within is not None and id(node) not in within:
            continue
        if kind is dict or (kind is not str and isinstance(node, Mapping)):
            items = [(f"{where}/{_escape(str(key))}", item) for key, item in node.items() if type(item) not in _SCALARS]
        elif kind is list or kind is tuple:
            items = [(f"{where}/{index}", item) for index, item in enumerate(node) if type(item) not in _SCALARS]
        else:
            continue
        stack.extend(reversed(items))


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1") if "~" in token or "/" in token else token


class Redactor:
    """Replaces the values of ``${...}`` substitutions in free text with their references.

    Built from the :class:`Interpolated` strings whose values must not appear; each value of at
    least :data:`MIN_MASKED_LENGTH` characters is replaced as it is and in the forms messages
    usually quote it in: JSON- and ``repr``-escaped, and percent-encoded (as in a URL). Longer
    values are replaced first, so a value inside another never leaves a piece of it behind.
    """

    __slots__ = ("_pattern", "_references")

    def __init__(self, strings: Iterable[Interpolated]) -> None:
        references: dict[str, str] = {}
        for string in strings:
            for reference, value in string.substitutions:
                if len(value) < MIN_MASKED_LENGTH:
                    continue
                for form in _quoted_forms(value):
                    references.setdefault(form, reference)
        self._references = references
        alternatives = sorted(references, key=len, reverse=True)
        self._pattern = re.compile("|".join(map(re.escape, alternatives))) if alternatives else None

    def __bool__(self) -> bool:
        """True when there is something to replace."""
        return self._pattern is not None

    def __call__(self, text: str) -> str:
        """*text* with every value replaced by its ``${...}`` reference."""
        if self._pattern is None:
            return text
        return self._pattern.sub(lambda match: self._references[match[0]], text)


def _quoted_forms(value: str) -> Iterator[str]:
    yield value
    yield json.dumps(value)[1:-1]
    yield json.dumps(value, ensure_ascii=False)[1:-1]
    yield repr(value)[1:-1]
    yield urllib.parse.quote(value, safe="")
    yield urllib.parse.quote(value)
    yield urllib.parse.quote_plus(value)
