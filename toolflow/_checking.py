r"""JSON Schema checks with two engines and one verdict: ``jsonschema_rs`` decides, ``jsonschema`` explains.

A compiled ``jsonschema_rs`` validator answers "valid?" on the happy path; only when it says no
does the ``jsonschema`` library walk the instance again to explain each failure. Where the two
libraries differ, the explaining one is configured to follow ``jsonschema_rs``, so that they
agree (``tests/test_validation.py`` checks it on generated schemas and instances):

- ``format`` is asserted for every format ``jsonschema_rs`` knows (date, date-time, time,
  duration, email, idn-email, hostname, idn-hostname, ipv4, ipv6, uri, uri-reference, iri,
  iri-reference, uri-template, uuid, json-pointer, relative-json-pointer, regex); unknown
  formats are ignored. The explaining validator asks ``jsonschema_rs`` about each format check.
- ``pattern`` and ``patternProperties`` use ECMA-262 regular expressions, as JSON Schema
  specifies, not Python's ``re``: ``\d`` and ``\w`` are ASCII, ``\p{L}`` works, and ``$`` does
  not match before a trailing newline.
- ``multipleOf`` is decided exactly (``0.3`` is a multiple of ``0.1``).
- A tuple is an array, and NaN and the infinities are not numbers (JSON has neither).
- A schema using both ``patternProperties`` and ``unevaluatedProperties`` is never trusted to the
  fast path, because there the explaining library still matches property names with Python's
  ``re``: such a schema is always checked by the ``jsonschema`` library alone (slower, and with
  Python's regular expressions).
- A ``$ref`` cycle that never descends into the instance (``x`` refers to itself) has no
  meaning; the explaining library gives up on it and the instance is rejected.

The ``jsonschema`` library is imported only when a failure is explained.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs
import jsonschema_rs

from toolflow._errors import error_text
from toolflow._provenance import exact_types, masked
from toolflow._schemas import did_you_mean, iter_schema_problems

__all__ = [
    "ARGUMENTS",
    "MAX_FAST_DEPTH",
    "STAGE_CONSTRAINT",
    "STAGE_REQUIRED",
    "STAGE_RULE",
    "STAGE_TYPE",
    "CompiledSchema",
    "ErrorExplainer",
    "ParameterError",
    "pattern_matches",
    "show",
]

ARGUMENTS = "(arguments)"
"""The ``parameter`` of an error about the arguments as a whole (not a mapping, a failed ``anyOf``)."""

_DIALECT = re.compile(r"https?://json-schema\.org/(draft-0[467]|draft/2019-09|draft/2020-12)/schema#?")
_DIALECT_CLASSES = {
    "draft-04": "Draft4Validator",
    "draft-06": "Draft6Validator",
    "draft-07": "Draft7Validator",
    "draft/2019-09": "Draft201909Validator",
    "draft/2020-12": "Draft202012Validator",
}
"""``$schema`` values both libraries understand (http or https, with or without ``#``)."""


def show(value: object, limit: int = 80) -> str:
    """*value* as compact, readable JSON for messages (``"abc"``, ``[1, 2]``), cut at *limit*.

    A string from ``${...}`` shows as its reference (``"${API_KEY}"``), never its value.
    """
    value = masked(value)
    try:
        text = json.dumps(value, ensure_ascii=False, default=repr)
    except Exception:  # noqa: BLE001 - a cycle, NaN in a key, nesting too deep, a __repr__ that raises
        try:
            text = repr(value)
        except Exception:  # noqa: BLE001 - an int with more digits than Python converts, a __repr__ that raises
            text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


@attrs.frozen(kw_only=True)
class ParameterError:
    """One reason the arguments were rejected.

    Attributes:
        parameter: Where: a parameter name, a path into one (``address.city``, ``tags[0]``), the
            names a dependency rule is about (``a, b``), or :data:`ARGUMENTS`.
        message: What is wrong, for people and models: ``Expected string``.
        constraint: The schema constraint broken, as ``keyword: value`` (``type: string``,
            ``maximum: 50``); ``None`` when the message says it all (a missing parameter, a rule).
        got: The value received, when there is one (see *has_got*).
        has_got: Whether *got* is meaningful (a missing parameter has no value; ``None`` may be one).
    """

    parameter: str
    message: str
    constraint: str | None = None
    got: Any = None
    has_got: bool = False

    def describe(self) -> str:
        """Return ``name: Expected string (expected: type: string) (got: 123)``; the parts are optional."""
        text = f"{self.parameter}: {self.message}"
        if self.constraint is not None:
            text += f" (expected: {self.constraint})"
        if self.has_got:
            text += f" (got: {show(self.got)})"
        return text


# --- compiling for both engines -----------------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def _leaf(dialect: str | None, keyword: str, value_json: str) -> Callable[[object], bool] | None:
    """A ``jsonschema_rs`` check of one keyword (``{"pattern": ...}``), or ``None`` when it does not compile."""
    document: dict[str, Any] = {keyword: json.loads(value_json)}
    try:
        if dialect is None:
            return jsonschema_rs.Draft202012Validator(document, offline=True, validate_formats=True).is_valid
        document["$schema"] = dialect
        return jsonschema_rs.validator_for(document, offline=True, validate_formats=True).is_valid
    except Exception:  # noqa: BLE001 - whatever jsonschema_rs refuses is left to the explaining library
        return None


MAX_FAST_DEPTH = 1000
"""The deepest nesting ``jsonschema_rs`` is given; deeper values are left to ``jsonschema``.

``jsonschema_rs`` recurses on the native stack, once per level a recursive schema (``$ref``)
follows: some tens of thousands of levels overflow it and end the process. No real argument or
result nests so deep; ``jsonschema`` decides (or fails the check) with a Python ``RecursionError``.
"""


def _readable(instance: object) -> bool:
    """Whether ``jsonschema_rs`` reads *instance* as it is, so that its verdict may stand.

    Not when it holds an integer outside 64 bits (``jsonschema_rs`` reads a longer one through its
    text, and one longer than Python writes in digits as 0: ``10**5000`` passed ``maximum: 5``),
    nests deeper than :data:`MAX_FAST_DEPTH` levels, or holds a container twice (a cycle has no
    end); ``jsonschema`` decides those, only more slowly.
    """
    kind = type(instance)
    if kind is dict:
        return _readable_within(instance, instance.values())  # type: ignore[attr-defined]
    if kind is list or kind is tuple:
        return _readable_within(instance, instance)  # type: ignore[arg-type]
    return not isinstance(instance, int) or -_LONG <= instance < _LONG


def _readable_within(container: object, children: Iterable[Any]) -> bool:
    """:func:`_readable` of *container*, whose items (its values, for a dict) are *children*."""
    todo: list[tuple[Any, int]] = []
    seen = {id(container)}
    depth = 0
    while True:
        for child in children:
            kind = type(child)
            if kind is str:
                continue
            if kind is dict or kind is list or kind is tuple:
                if depth + 1 >= MAX_FAST_DEPTH or id(child) in seen:
                    return False
                seen.add(id(child))
                todo.append((child, depth + 1))
            elif isinstance(child, int) and not -_LONG <= child < _LONG:
                return False
        if not todo:
            return True
        node, depth = todo.pop()
        children = node.values() if type(node) is dict else node


_LONG = 2**63


def _fast_check(is_valid: Callable[[object], bool]) -> Callable[[object], bool]:
    """*is_valid* of ``jsonschema_rs``, answering ``False`` (ask ``jsonschema``) for what it cannot read."""

    def check(instance: object) -> bool:
        return _readable(instance) and is_valid(instance)

    return check


def _leaf_verdict(dialect: str | None, keyword: str, value: object, instance: object) -> bool | None:
    """What ``jsonschema_rs`` says of *instance* against ``{keyword: value}``; ``None`` if it cannot say."""
    if not _readable(instance):
        return None
    try:
        check = _leaf(dialect, keyword, json.dumps(value, allow_nan=False))
        return None if check is None else exact_types(check, instance)
    except Exception:  # noqa: BLE001 - odd values: let the explaining library decide
        return None


def pattern_matches(dialect: str | None, pattern: str, text: str) -> bool:
    """Whether the ECMA-262 *pattern* matches somewhere in *text* (Python's ``re`` when only it can tell)."""
    verdict = _leaf_verdict(dialect, "pattern", pattern, text)
    return _search(pattern, text) if verdict is None else verdict


def _search(pattern: str, text: str) -> bool:
    try:
        return re.search(pattern, text) is not None
    except (re.error, TypeError):
        return False


@functools.cache
def _explaining_class(base: Any) -> Any:
    """*base* (a ``jsonschema`` validator class) made to agree with ``jsonschema_rs`` (module docstring)."""
    import jsonschema  # noqa: PLC0415 - imported only to explain failures

    meta = base.META_SCHEMA
    dialect = meta.get("$id", meta.get("id"))
    originals = base.VALIDATORS

    def pattern(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if not validator.is_type(instance, "string"):
            return
        verdict = _leaf_verdict(dialect, "pattern", value, instance)
        if verdict is None:
            yield from originals["pattern"](validator, value, instance, schema)
        elif not verdict:
            yield jsonschema.ValidationError(f"{show(instance)} does not match {show(value)}")

    def multiple_of(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if not validator.is_type(instance, "number"):
            return
        verdict = _leaf_verdict(dialect, "multipleOf", value, instance)
        if verdict is None:
            yield from originals["multipleOf"](validator, value, instance, schema)
        elif not verdict:
            yield jsonschema.ValidationError(f"{show(instance)} is not a multiple of {show(value)}")

    def pattern_properties(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if not validator.is_type(instance, "object"):
            return
        for regex, subschema in value.items():
            for key, item in instance.items():
                if pattern_matches(dialect, regex, key):
                    yield from validator.descend(item, subschema, path=key, schema_path=regex)

    def additional_properties(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if not validator.is_type(instance, "object"):
            return
        properties, patterns = schema.get("properties", {}), schema.get("patternProperties", {})
        extras = [
            key
            for key in instance
            if key not in properties and not any(pattern_matches(dialect, p, key) for p in patterns)
        ]
        if validator.is_type(value, "object"):
            for key in extras:
                yield from validator.descend(instance[key], value, path=key)
        elif not value and extras:
            names = ", ".join(repr(key) for key in sorted(extras, key=str))
            verb = "was" if len(extras) == 1 else "were"
            yield jsonschema.ValidationError(f"Additional properties are not allowed ({names} {verb} unexpected)")

    def format_(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if isinstance(instance, str) and _leaf_verdict(dialect, "format", value, instance) is False:
            yield jsonschema.ValidationError(f"{show(instance)} is not a valid {show(value)}")

    def is_number(checker: Any, instance: object) -> bool:
        if isinstance(instance, float) and not math.isfinite(instance):
            return False
        return base.TYPE_CHECKER.is_type(instance, "number")  # type: ignore[no-any-return]

    def is_array(checker: Any, instance: object) -> bool:
        return isinstance(instance, list | tuple)

    type_checker = base.TYPE_CHECKER.redefine_many({"number": is_number, "array": is_array})
    validators = {
        "pattern": pattern,
        "patternProperties": pattern_properties,
        "additionalProperties": additional_properties,
        "multipleOf": multiple_of,
        "format": format_,
    }
    return jsonschema.validators.extend(base, validators=validators, type_checker=type_checker)  # type: ignore[no-untyped-call]


def _uses_keyword(schema: object, keyword: str) -> bool:
    """Whether *keyword* is a key anywhere in *schema* (an over-approximation: property names count)."""
    if isinstance(schema, Mapping):
        return keyword in schema or any(_uses_keyword(v, keyword) for v in schema.values())
    if isinstance(schema, list):
        return any(_uses_keyword(v, keyword) for v in schema)
    return False


def _meta_problem(document: Mapping[str, Any]) -> str:
    """Why *document* is not valid JSON Schema: its first problem, and where."""
    first = next(iter_schema_problems(document), None)
    if first is None:  # the engines disagree; say no more than jsonschema_rs did
        return "the schema is not valid JSON Schema"
    message, path = first
    where = f" (at {_label(path, '')!r})" if path else ""
    return f"the schema is not valid JSON Schema: {message}{where}"


@attrs.define
class CompiledSchema:
    """A JSON Schema compiled for both engines: ``jsonschema_rs`` to decide, ``jsonschema`` to explain.

    Build one with :meth:`compile`; it never raises. When the schema cannot be used at all,
    :attr:`problem` says why and :meth:`iter_errors` yields that one problem.
    """

    schema: dict[str, Any]
    problem: str | None = None
    _is_valid: Callable[[object], bool] | None = None
    _explainer: Any = None

    @classmethod
    def compile(cls, schema: Mapping[str, Any]) -> CompiledSchema:
        """Compile *schema* (JSON Schema 2020-12 unless it names another ``$schema``)."""
        document = dict(schema)
        dialect = document.get("$schema")
        if "$schema" in document and not (isinstance(dialect, str) and _DIALECT.fullmatch(dialect)):
            return cls(document, problem=f"unsupported '$schema' {dialect!r}")
        try:
            meta_ok = exact_types(jsonschema_rs.meta.is_valid, document)
        except Exception as error:  # noqa: BLE001 - a remote meta-schema, an odd value
            return cls(document, problem=f"the schema cannot be checked: {error}")
        if not meta_ok:
            return cls(document, problem=_meta_problem(document))
        fast: jsonschema_rs.Validator
        try:
            if dialect is None:
                fast = exact_types(
                    functools.partial(jsonschema_rs.Draft202012Validator, offline=True, validate_formats=True), document
                )
            else:
                fast = exact_types(
                    functools.partial(jsonschema_rs.validator_for, offline=True, validate_formats=True), document
                )
        except Exception:  # noqa: BLE001 - e.g. a regex only Python's re accepts: the slow path decides
            return cls(document)
        # unevaluatedProperties in jsonschema matches patternProperties with Python's re.
        trusted = not (
            _uses_keyword(document, "patternProperties") and _uses_keyword(document, "unevaluatedProperties")
        )
        return cls(document, is_valid=_fast_check(fast.is_valid) if trusted else None)

    @property
    def fast(self) -> Callable[[object], bool] | None:
        """The fast ``is_valid`` when its verdict can be trusted alone, else ``None``."""
        return self._is_valid

    def is_valid(self, instance: object) -> bool:
        """Whether *instance* is valid; the fast engine when trusted, else the explaining one."""
        if self._is_valid is not None:
            try:
                if exact_types(self._is_valid, instance):
                    return True
            except Exception:  # noqa: BLE001, S110 - values jsonschema_rs cannot read: ask jsonschema
                pass
        return not any(True for _ in self.iter_errors(instance))

    def explainer(self) -> Any:
        """The ``jsonschema`` validator (configured to agree with ``jsonschema_rs``), built on first use."""
        if self._explainer is None:
            import jsonschema  # noqa: PLC0415 - imported only to explain failures

            dialect = _DIALECT.fullmatch(
                str(self.schema.get("$schema", "https://json-schema.org/draft/2020-12/schema"))
            )
            base = getattr(jsonschema, _DIALECT_CLASSES[dialect[1] if dialect else "draft/2020-12"])
            self._explainer = _explaining_class(base)(self.schema)
        return self._explainer

    def iter_errors(self, instance: object, *, root: str = ARGUMENTS) -> Iterator[Any]:
        """Yield the ``jsonschema`` errors of *instance*, or one :class:`ParameterError` about *root*.

        Never raises: a schema that cannot be used, or a failure of the explaining library
        itself (a ``$ref`` cycle, a regex Python rejects), is yielded as a
        :class:`ParameterError` whose ``parameter`` is *root*.
        """
        if self.problem is not None:
            yield ParameterError(parameter=root, message=f"The tool's schema cannot be used: {self.problem}")
            return
        try:
            errors = list(self.explainer().iter_errors(instance))
        except Exception as error:  # noqa: BLE001 - an unresolvable $ref, a regex Python rejects
            yield ParameterError(parameter=root, message=f"Could not be checked: {error_text(error)}")
            return
        yield from errors


# --- explaining errors in words -----------------------------------------------------

STAGE_REQUIRED, STAGE_TYPE, STAGE_CONSTRAINT, STAGE_RULE = range(4)
"""The stages errors are sorted by: required, types, constraints, dependency rules."""

_WORDS = {
    "minimum": "at least",
    "maximum": "at most",
    "exclusiveMinimum": "greater than",
    "exclusiveMaximum": "less than",
}


def _one_of(value: Any, instance: Any) -> str:
    if not isinstance(value, list):
        return ""
    hint = did_you_mean(instance, [v for v in value if isinstance(v, str)]) if isinstance(instance, str) else ""
    return f"Must be one of {', '.join(show(v) for v in value)}{hint}"


def _properties(value: Any) -> str:
    return f"{value} {'property' if value == 1 else 'properties'}"


_MESSAGES: dict[str, Callable[[Any, Any], str]] = {
    "multipleOf": lambda value, _: f"Must be a multiple of {show(value)}",
    "enum": _one_of,
    "const": lambda value, _: f"Must be {show(value)}",
    "minLength": lambda value, _: (
        "Must not be empty" if value == 1 else f"Must be at least {_plural(value, 'character')} long"
    ),
    "maxLength": lambda value, _: f"Must be at most {_plural(value, 'character')} long",
    "pattern": lambda value, _: f"Must match the pattern {masked(value)}",
    "format": lambda value, _: f"Must be a valid {masked(value)}",
    "minItems": lambda value, _: f"Must have at least {_plural(value, 'item')}",
    "maxItems": lambda value, _: f"Must have at most {_plural(value, 'item')}",
    "uniqueItems": lambda _value, _instance: "Must not contain duplicate items",
    "minProperties": lambda value, _: f"Must have at least {_properties(value)}",
    "maxProperties": lambda value, _: f"Must have at most {_properties(value)}",
    "not": lambda value, _: f"Must not match the schema {show(value)}",
    "contains": lambda value, _: f"Must contain an item that matches the schema {show(value)}",
    "unevaluatedItems": lambda value, _: "Must not have items the schema does not describe" if value is False else "",
}
"""Keyword to the message of a value that fails it, from the keyword's value and the instance."""


def _message(error: Any) -> str:
    """The words for *error*: ours where jsonschema's would quote values as Python (``None``), else its own."""
    keyword, value = error.validator, error.validator_value
    if keyword in _WORDS:
        return f"Must be {_WORDS[keyword]} {show(value)}"
    if value is False and keyword in ("items", "additionalItems"):
        listed = error.schema.get("prefixItems" if keyword == "items" else "items") if error.schema else None
        if isinstance(listed, list):
            return f"Must have at most {_plural(len(listed), 'item')}"
    found = _MESSAGES[keyword](value, error.instance) if keyword in _MESSAGES else ""
    if found:
        return found
    message = str(error.message)
    return message[:1].upper() + message[1:]


def _label(path: Sequence[str | int], root: str, *, under_root: bool = False) -> str:
    """``address.city``, ``tags[0]``; *root* for the empty path, or as the first part *under_root*."""
    out = root if under_root else ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or root


def _constraint(keyword: str, value: object) -> str:
    return f"{keyword}: {masked(value)}" if isinstance(value, str) else f"{keyword}: {show(value)}"


def _plural(n: object, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


@attrs.frozen
class _Explanation:
    stage: int
    error: ParameterError


class ErrorExplainer:
    """Turns the ``jsonschema`` errors of one instance into :class:`ParameterError`s, in words.

    Args:
        root: What the instance itself is called in messages: :data:`ARGUMENTS`, ``data``.
        noun: What its top-level keys are: ``parameter`` (arguments) or ``property``.
        names: Its declared top-level keys, for did-you-mean hints on unknown keys.
        under_root: Whether paths start with *root* (``data.count``) or not (``address.city``).

    Call :meth:`explain` for each error, :meth:`add` for errors made elsewhere (dependency
    rules), then :meth:`result` for them all, sorted by stage and parameter, duplicates merged.
    """

    def __init__(self, *, root: str, noun: str, names: Sequence[str] = (), under_root: bool = False) -> None:
        self.root = root
        self.noun = noun
        self.names = list(names)
        self.under_root = under_root
        self.out: list[_Explanation] = []
        self.seen: set[tuple[str, str]] = set()

    def add(self, stage: int, error: ParameterError) -> None:
        """Add *error* at *stage* (``STAGE_*``), unless the same parameter already has the same message."""
        key = (error.parameter, error.message)
        if key not in self.seen:
            self.seen.add(key)
            self.out.append(_Explanation(stage, error))

    def where(self, path: Sequence[str | int]) -> str:
        """Name the place at *path*: ``address.city``, ``tags[0]``, or the root."""
        return _label(path, self.root, under_root=self.under_root)

    def noun_at(self, path: Sequence[str | int]) -> str:
        """What a key of the object at *path* is called."""
        return self.noun if not path else "property"

    def explain(self, error: Any) -> None:
        """Add the :class:`ParameterError`s that say what the ``jsonschema`` *error* means."""
        path = list(error.absolute_path)
        if not self._explained(error, path):  # never lose an error: say it in jsonschema's words
            message = str(error.message)
            self.add(
                STAGE_CONSTRAINT,
                self._error(
                    self.where(path),
                    message[:1].upper() + message[1:],
                    error.validator,
                    error.validator_value,
                    error.instance,
                ),
            )

    def _explained(self, error: Any, path: list[str | int]) -> bool:
        """Add the errors that explain *error*; False when none could."""
        keyword, value, instance = error.validator, error.validator_value, error.instance
        if keyword == "required" and isinstance(instance, Mapping) and isinstance(value, list):
            return self._required(path, instance, value)
        if (keyword == "additionalProperties" or (keyword == "unevaluatedProperties" and not path)) and value is False:
            return self._unexpected(path, instance, error.schema, keyword)
        if keyword in ("dependentRequired", "dependencies") and isinstance(instance, Mapping):
            return self._dependencies(path, instance, value)
        self._constraint(error, self.where(path))
        return True

    def _required(self, path: list[str | int], instance: Mapping[str, Any], value: list[Any]) -> bool:
        missing = [name for name in value if isinstance(name, str) and name not in instance]
        for name in missing:
            message = f"Missing required {self.noun_at(path)}"
            self.add(STAGE_REQUIRED, ParameterError(parameter=self.where([*path, name]), message=message))
        return bool(missing)

    def _constraint(self, error: Any, where: str) -> None:
        keyword, value, instance = error.validator, error.validator_value, error.instance
        if keyword == "type":
            types = [value] if isinstance(value, str) else [str(t) for t in value]
            self.add(STAGE_TYPE, self._error(where, "Expected " + " or ".join(types), keyword, value, instance))
        elif keyword is None:  # a false schema
            self.add(
                STAGE_CONSTRAINT,
                ParameterError(parameter=where, message="No value is allowed here", got=instance, has_got=True),
            )
        elif keyword in ("anyOf", "oneOf"):
            self._alternatives(where, error)
        else:
            self.add(STAGE_CONSTRAINT, self._error(where, _message(error), keyword, value, instance))

    def _error(self, where: str, message: str, keyword: str, value: object, instance: object) -> ParameterError:
        return ParameterError(
            parameter=where, message=message, constraint=_constraint(keyword, value), got=instance, has_got=True
        )

    def _unexpected(self, path: list[str | int], instance: object, schema: Any, keyword: str) -> bool:
        if not isinstance(instance, Mapping) or not isinstance(schema, Mapping):
            return False
        found = False
        properties = schema.get("properties")
        known = [k for k in properties if isinstance(k, str)] if isinstance(properties, Mapping) else []
        if not path:
            known = list(dict.fromkeys([*known, *self.names]))
        patterns = schema.get("patternProperties")
        patterns = list(patterns) if isinstance(patterns, Mapping) else []
        for key, got in instance.items():
            if key in known or any(pattern_matches(None, p, str(key)) for p in patterns):
                continue
            message = f"Unknown {self.noun_at(path)}{did_you_mean(str(key), known)}"
            error = self._error(self.where([*path, str(key)]), message, keyword, value=False, instance=got)
            self.add(STAGE_CONSTRAINT, error)
            found = True
        return found

    def _dependencies(self, path: list[str | int], instance: Mapping[str, Any], value: Any) -> bool:
        if not isinstance(value, Mapping):
            return False
        found = False
        for trigger, needed in value.items():
            if trigger not in instance or not isinstance(needed, list):
                continue
            for name in needed:
                if name not in instance:
                    message = f"{name!r} is required when {trigger!r} is given"
                    self.add(STAGE_RULE, ParameterError(parameter=self.where([*path, name]), message=message))
                    found = True
        return found

    def _alternatives(self, where: str, error: Any) -> None:
        context = list(error.context or ())
        keyword = error.validator
        constraint = _constraint(keyword, error.validator_value)
        if context and all(e.validator == "type" and not e.relative_path for e in context):
            types: list[str] = []
            for e in context:
                types.extend([e.validator_value] if isinstance(e.validator_value, str) else e.validator_value)
            types = list(dict.fromkeys(str(t) for t in types))
            message = "Expected " + " or ".join(types)
            constraint = _constraint("type", types[0] if len(types) == 1 else types)
        elif keyword == "oneOf" and not context:
            message = "Must match exactly one of the allowed forms, but matches several"
        else:
            message = f"Must match {'exactly' if keyword == 'oneOf' else 'at least'} one of the allowed forms"
        self.add(
            STAGE_CONSTRAINT,
            ParameterError(parameter=where, message=message, constraint=constraint, got=error.instance, has_got=True),
        )

    def result(self, order: Sequence[str]) -> tuple[ParameterError, ...]:
        """Every error added, by stage, then by the position of its top-level name in *order*."""
        position = {name: i for i, name in enumerate(order)}

        def key(item: _Explanation) -> tuple[int, int, str]:
            head = re.split(r"[.\[]", item.error.parameter, maxsplit=1)[0]
            return (item.stage, position.get(head, len(position)), item.error.parameter)

        return tuple(item.error for item in sorted(self.out, key=key))
