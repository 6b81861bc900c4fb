"""Validation of tool-call arguments and results: one compiled validator per tool, used for every call.

Arguments go through the stages of seed 000 §3, in this order:

1. shape: the arguments must be a mapping with string keys; keys the schema does not declare are
   dropped with a warning, unless the top-level ``additionalProperties`` (or
   ``unevaluatedProperties``) is ``false``, which rejects them, or is a schema, which keeps them;
2. coercion (not with ``strict: true``): a string sent for a top-level parameter whose ``type``
   has no ``string`` becomes what the type wants, when that loses nothing — ``"5"`` → 5 for
   ``integer`` (JSON integer syntax only: ``"5.5"``, ``"05"`` and ``"1e3"`` stay strings),
   ``"2.5"`` → 2.5 for ``number`` (JSON number syntax, finite), ``"true"``/``"false"`` in any
   case → a boolean (``"yes"``, ``"1"`` stay strings), and a string holding a JSON array or
   object → that value where the type wants one;
3. defaults: each top-level property's ``default`` is filled in when the parameter is missing
   (a copy, for lists and mappings);
4. the JSON Schema (``parameters`` plus the compiled ``parameter_rules``): required parameters,
   types, constraints (enum, ranges, pattern, format, ...) and the dependency rules, reported in
   that order, with the rules in words ("At most one of 'a', 'b' may be given").

The verdict is that of ``toolflow._checking.CompiledSchema``: ``jsonschema_rs`` on the happy
path, the ``jsonschema`` library (configured to agree) to explain failures. The happy path — a
dict whose keys are all declared, nothing to coerce, no default to fill — costs one
``is_valid`` call and the result object, about a microsecond (``tests/bench/bench_validation.py``).
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Literal, cast

import attrs

from toolflow._checking import (
    ARGUMENTS,
    STAGE_RULE,
    CompiledSchema,
    ErrorExplainer,
    ParameterError,
    pattern_matches,
    show,
)
from toolflow._errors import error_text
from toolflow._model import ParameterRule, ToolSpec
from toolflow._provenance import exact_types
from toolflow._results import RESERVED_RESULT_KEYS, ToolResult
from toolflow._schemas import compile_parameter_rules, did_you_mean, validation_schema

__all__ = [
    "ARGUMENTS",
    "ArgumentValidator",
    "ParameterError",
    "ResultValidator",
    "ValidationResult",
    "coerce_value",
]

_EMPTY: Mapping[str, Any] = MappingProxyType({})


# --- results of argument validation ---------------------------------------------


@attrs.frozen(kw_only=True)
class ValidationResult:
    """The outcome of validating one call's arguments.

    Attributes:
        valid: Whether the tool may be called with :attr:`cleaned`.
        errors: Why not, in stage order: required, types, constraints, dependency rules.
        warnings: What was changed or ignored on the way (dropped keys, coerced values).
        cleaned: The arguments the tool receives: undeclared keys dropped, values coerced,
            defaults filled in. When nothing had to change it is the very mapping passed to
            :meth:`ArgumentValidator.validate`. Treat it as read-only.
    """

    valid: bool
    errors: tuple[ParameterError, ...] = ()
    warnings: tuple[str, ...] = ()
    cleaned: Mapping[str, Any] = _EMPTY

    def format_for_llm(self, tool_name: str) -> str:
        """Return the errors as text for the model to correct its call (seed 001), or ``""`` when valid.

        The format is stable: a header line, one ``  - `` line per error (see
        :meth:`ParameterError.describe`), then, when there are warnings, a ``Warnings:`` line and
        one ``  - `` line per warning::

            Parameter validation failed for 'my_tool':
              - name: Expected string (expected: type: string) (got: 123)
              - count: Missing required parameter
            Warnings:
              - ignored unknown parameter 'nme'; did you mean 'name'?
        """
        if self.valid:
            return ""
        lines = [f"Parameter validation failed for {tool_name!r}:"]
        lines.extend(f"  - {error.describe()}" for error in self.errors)
        if self.warnings:
            lines.append("Warnings:")
            lines.extend(f"  - {warning}" for warning in self.warnings)
        return "\n".join(lines)


def _names(names: Sequence[str]) -> str:
    return ", ".join(repr(n) for n in names)


def _rule_errors(rule: ParameterRule, instance: Mapping[str, Any]) -> Iterator[ParameterError]:
    """The friendly errors of a broken parameter rule."""
    names = list(rule.params)
    given = [n for n in names if n in instance]
    if rule.kind == "requires":
        if rule.when_values is not None:
            condition = " and ".join(f"{k!r} is {show(v)}" for k, v in rule.when_values.items())
        else:
            condition = f"{rule.when!r} is given"
        for name in names:
            if name not in instance:
                yield ParameterError(parameter=name, message=f"{name!r} is required when {condition}")
    elif rule.kind == "exclusive":
        yield ParameterError(parameter=", ".join(given), message=f"At most one of {_names(names)} may be given")
    elif rule.kind == "at_least_one":
        yield ParameterError(parameter=", ".join(names), message=f"At least one of {_names(names)} must be given")
    else:
        yield ParameterError(
            parameter=", ".join(given or names), message=f"Exactly one of {_names(names)} must be given"
        )


# --- coercion -------------------------------------------------------------------------

_INTEGER = re.compile(r"-?(?:0|[1-9][0-9]*)")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_COERCIBLE = ("integer", "number", "boolean", "array", "object")
_NO = object()
_TYPE_OF = {int: "an integer", float: "a number", bool: "a boolean", list: "an array", dict: "an object"}


def coerce_value(value: str, types: Sequence[str]) -> object:
    """Return *value* converted to the first of *types* it safely converts to, or *value* itself.

    Safe means nothing is lost or guessed: see the module docstring. *types* are JSON Schema
    type names; a string is never converted when *types* allows ``string``.
    """
    if "string" in types:
        return value
    for wanted in _COERCIBLE:
        if wanted in types:
            converted = _convert(value, wanted)
            if converted is not _NO:
                return converted
    return value


def _convert(value: str, wanted: str) -> object:
    try:
        return _convert_or_raise(value, wanted)
    except ValueError:  # e.g. more digits than int() converts
        return _NO


def _convert_or_raise(value: str, wanted: str) -> object:
    if wanted == "integer":
        return int(value) if _INTEGER.fullmatch(value) else _NO
    if wanted == "number":
        if not _NUMBER.fullmatch(value):
            return _NO
        if _INTEGER.fullmatch(value):
            return int(value)
        number = float(value)
        return number if math.isfinite(number) else _NO
    if wanted == "boolean":
        lowered = value.lower()
        return True if lowered == "true" else False if lowered == "false" else _NO
    text = value.strip()
    if not text.startswith("[" if wanted == "array" else "{"):
        return _NO
    parsed = json.loads(text)
    return parsed if isinstance(parsed, list if wanted == "array" else dict) else _NO


# --- arguments -------------------------------------------------------------------------


def _in_place_subschemas(node: Mapping[str, Any]) -> list[object]:
    """The subschemas of *node* that apply to the same instance (``allOf``, ``if``, ``dependentSchemas``, ...)."""
    children: list[object] = []
    for keyword in ("allOf", "anyOf", "oneOf"):
        if isinstance(node.get(keyword), list):
            children.extend(node[keyword])
    children.extend(node[k] for k in ("if", "then", "else") if k in node)
    for keyword in ("dependentSchemas", "dependencies"):
        if isinstance(node.get(keyword), Mapping):
            children.extend(node[keyword].values())
    return children


def _extra_keys(parameters: Mapping[str, Any]) -> Literal["drop", "reject", "keep"]:
    """What the validator does with undeclared keys: ``reject`` or ``keep`` them as the schema says, else ``drop``."""
    extra: Literal["drop", "reject", "keep"] = "drop"
    for keyword in ("additionalProperties", "unevaluatedProperties"):
        if keyword in parameters:
            if parameters[keyword] is False:
                return "reject"
            extra = "keep"
    return extra


def _coercions_and_defaults(
    properties: Mapping[str, Any], *, strict: bool
) -> tuple[dict[str, tuple[str, ...]], list[tuple[str, Any, bool]]]:
    """The types of the parameters whose values may be coerced, and the defaults (with whether to copy each)."""
    coercions: dict[str, tuple[str, ...]] = {}
    defaults: list[tuple[str, Any, bool]] = []
    for name, schema in properties.items():
        if not isinstance(name, str) or not isinstance(schema, Mapping):
            continue
        types = _types(schema.get("type"))
        if not strict and "string" not in types and any(t in _COERCIBLE for t in types):
            coercions[name] = types
        if "default" in schema:
            default = schema["default"]
            defaults.append((name, default, isinstance(default, list | dict)))
    return coercions, defaults


def _result_of_dict(value: Mapping[Any, Any]) -> tuple[ToolResult, object]:
    """The result a tool wrote as a ``{"success": ...}`` dictionary, and the payload its output schema checks."""
    success, error = value["success"], value.get("error")
    if not isinstance(success, bool):
        return ToolResult.failure(f"invalid tool result: 'success' must be a boolean, got {show(success)}"), None
    if error is not None and not isinstance(error, str):
        return ToolResult.failure(f"invalid tool result: 'error' must be a string, got {show(error)}"), None
    if not success and not error:
        error = "the tool reported a failure without an error message"
    warnings = value.get("warnings")
    if warnings is None:
        warnings = ()
    elif not isinstance(warnings, list | tuple):
        warnings = (warnings,)
    extra = {str(k): v for k, v in value.items() if k not in RESERVED_RESULT_KEYS}
    data = value.get("data")
    result = ToolResult(success=success, data=data, error=error, warnings=tuple(str(w) for w in warnings), extra=extra)
    return result, (data if "data" in value else extra)


def _declared_names(schema: Mapping[str, Any]) -> tuple[frozenset[str] | None, tuple[str, ...]]:
    """Property names and patterns the object schema declares anywhere it applies to the arguments.

    Looks through ``properties`` and ``patternProperties`` of the schema and of its in-place
    applicators (``allOf``, ``anyOf``, ``oneOf``, ``if``/``then``/``else``, ``dependentSchemas``).
    ``None`` when a ``$ref`` makes that unknowable: then no key is dropped.
    """
    names: set[str] = set()
    patterns: list[str] = []

    def walk(node: object) -> bool:
        if not isinstance(node, Mapping):
            return True
        if "$ref" in node or "$dynamicRef" in node:
            return False
        properties = node.get("properties")
        if isinstance(properties, Mapping):
            names.update(k for k in properties if isinstance(k, str))
        pattern_properties = node.get("patternProperties")
        if isinstance(pattern_properties, Mapping):
            patterns.extend(k for k in pattern_properties if isinstance(k, str))
        return all(walk(child) for child in _in_place_subschemas(node))

    if not walk(schema):
        return None, ()
    return frozenset(names), tuple(patterns)


@attrs.define
class ArgumentValidator:
    """Validates the arguments of one tool's calls; compiled once, then :meth:`validate` per call.

    Build one with :meth:`for_spec`. Neither building nor validating raises. When the tool's
    schema cannot be used (not valid JSON Schema, an unknown ``$schema``), :attr:`problem` says
    why and every call is rejected with that reason.
    """

    name: str
    strict: bool
    compiled: CompiledSchema
    _declared: frozenset[str] | None
    _patterns: tuple[str, ...]
    _extra: Literal["drop", "reject", "keep"]
    _coercions: Mapping[str, tuple[str, ...]]
    _defaults: tuple[tuple[str, Any, bool], ...]
    _default_names: frozenset[str]
    _rules: Mapping[int, ParameterRule]
    _order: tuple[str, ...]
    _fast: Callable[[object], bool] | None
    _hot_keys: frozenset[str] | None

    @classmethod
    def for_spec(cls, spec: ToolSpec) -> ArgumentValidator:
        """Compile the validator of *spec*'s ``parameters`` and ``parameter_rules``."""
        parameters: Mapping[str, Any] = spec.parameters if isinstance(spec.parameters, Mapping) else {}
        compiled = CompiledSchema.compile(validation_schema(parameters, spec.parameter_rules))
        properties = parameters.get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        declared, patterns = _declared_names(compiled.schema)
        extra = _extra_keys(parameters)
        coercions, defaults = _coercions_and_defaults(properties, strict=spec.strict)
        return cls(
            name=spec.name,
            strict=spec.strict,
            compiled=compiled,
            declared=declared,
            patterns=patterns,
            extra=extra,
            coercions=coercions,
            defaults=tuple(defaults),
            default_names=frozenset(name for name, _, _ in defaults),
            rules=_rule_positions(parameters, spec.parameter_rules),
            order=tuple(k for k in properties if isinstance(k, str)),
            fast=compiled.fast,
            hot_keys=declared if extra == "drop" else None,
        )

    @property
    def problem(self) -> str | None:
        """Why the tool's schema cannot be used, or ``None``."""
        return self.compiled.problem

    def is_clean(self, arguments: object) -> bool:
        """Whether :meth:`validate` would pass *arguments* as they are: valid, nothing to drop, coerce or fill.

        The happy path, without building a result (the engine asks this first); ``False`` says
        only that :meth:`validate` has work to do, not that the arguments are invalid. Never raises.
        """
        # Nothing to drop, coerce (a value needing coercion fails is_valid) or fill. Every step
        # here counts: see tests/bench/bench_validation.py before changing it.
        if (
            type(arguments) is dict
            and self._fast is not None
            and (self._hot_keys is None or self._hot_keys.issuperset(arguments))
            and (not self._default_names or self._default_names.issubset(arguments))
        ):
            try:
                return bool(self._fast(arguments))
            except Exception:  # noqa: BLE001 - values jsonschema_rs cannot read take the slow path
                return False
        return False

    def validate(self, arguments: object) -> ValidationResult:
        """Validate one call's *arguments*; never raises. See the module docstring for the stages."""
        if self.is_clean(arguments):
            return ValidationResult(valid=True, cleaned=cast("dict[str, Any]", arguments))
        try:
            return self._validate(arguments)
        except Exception as error:  # noqa: BLE001 - validate() never raises: an unforeseen failure is an error
            problem = ParameterError(parameter=ARGUMENTS, message=f"Could not be checked: {error_text(error)}")
            return ValidationResult(valid=False, errors=(problem,))

    def _validate(self, arguments: object) -> ValidationResult:
        if not isinstance(arguments, Mapping):
            error = ParameterError(
                parameter=ARGUMENTS,
                message="Expected an object mapping parameter names to values",
                constraint="type: object",
                got=arguments,
                has_got=True,
            )
            return ValidationResult(valid=False, errors=(error,))
        errors: list[ParameterError] = []
        warnings: list[str] = []
        cleaned: dict[str, Any] = {}
        for key, value in arguments.items():
            if isinstance(key, str):
                cleaned[key] = value
            else:
                errors.append(
                    ParameterError(
                        parameter=show(key), message="Parameter names must be strings", got=key, has_got=True
                    )
                )
        self._drop_undeclared(cleaned, warnings)
        for name, types in self._coercions.items():
            value = cleaned.get(name, _NO)
            if isinstance(value, str):
                converted = coerce_value(value, types)
                if converted is not value:
                    cleaned[name] = converted
                    warnings.append(f"converted {name!r} from a string to {_TYPE_OF[type(converted)]}")
        filled: set[str] = set()
        for name, default, mutable in self._defaults:
            if name not in cleaned:
                cleaned[name] = copy.deepcopy(default) if mutable else default
                filled.add(name)
        errors.extend(_blame_the_spec(error, filled) for error in self._explain(cleaned))
        return ValidationResult(valid=not errors, errors=tuple(errors), warnings=tuple(warnings), cleaned=cleaned)

    def _drop_undeclared(self, cleaned: dict[str, Any], warnings: list[str]) -> None:
        if self._extra != "drop" or self._declared is None:
            return
        for key in list(cleaned):
            if key in self._declared or any(pattern_matches(None, p, key) for p in self._patterns):
                continue
            del cleaned[key]
            warnings.append(f"ignored unknown parameter {key!r}{did_you_mean(key, sorted(self._declared))}")

    def _explain(self, cleaned: dict[str, Any]) -> list[ParameterError]:
        compiled = self.compiled
        if compiled.fast is not None:
            try:
                if exact_types(compiled.fast, cleaned):  # a default from ${...} is a str subclass
                    return []
            except Exception:  # noqa: BLE001, S110 - values jsonschema_rs cannot read: ask jsonschema
                pass
        explainer = ErrorExplainer(root=ARGUMENTS, noun="parameter", names=sorted(self._declared or ()))
        broken: dict[int, ParameterRule] = {}
        fallback: list[ParameterError] = []
        for error in compiled.iter_errors(cleaned):
            if isinstance(error, ParameterError):
                fallback.append(error)
                continue
            schema_path = list(error.schema_path)
            if len(schema_path) >= 2 and schema_path[0] == "allOf" and schema_path[1] in self._rules:
                broken[schema_path[1]] = self._rules[schema_path[1]]
                continue
            explainer.explain(error)
        for position in sorted(broken):
            for rule_error in _rule_errors(broken[position], cleaned):
                explainer.add(STAGE_RULE, rule_error)
        return [*fallback, *explainer.result(self._order)]


def _blame_the_spec(error: ParameterError, filled: set[str]) -> ParameterError:
    """*error*, said to be the spec's fault when it is about a default the validator filled in.

    The caller never sent the value: a model told that its argument is wrong would try to fix a
    call that has nothing to fix (lint reports such a default as TF208).
    """
    if not filled:
        return error
    head = re.split(r"[.\[]", error.parameter, maxsplit=1)[0]
    if head not in filled:
        return error
    message = (
        f"The tool's default for {head!r} is invalid, a fault of the tool's spec, not of this call "
        f"(give {head!r} a value to avoid it): {error.message[:1].lower()}{error.message[1:]}"
    )
    return attrs.evolve(error, message=message)


def _types(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    return tuple(t for t in value if isinstance(t, str)) if isinstance(value, list) else ()


def _rule_positions(parameters: Mapping[str, Any], rules: Sequence[ParameterRule]) -> dict[int, ParameterRule]:
    """Map each ``allOf`` index of :func:`validation_schema`'s output to the rule compiled there."""
    own = parameters.get("allOf")
    position = len(own) if isinstance(own, list) else 0
    draft7 = "draft-0" in str(parameters.get("$schema", ""))
    positions: dict[int, ParameterRule] = {}
    for rule in rules:
        for _ in compile_parameter_rules([rule], draft7=draft7):
            positions[position] = rule
            position += 1
    return positions


# --- results ----------------------------------------------------------------------------


@attrs.define
class ResultValidator:
    """Normalises what an implementation returned into a :class:`ToolResult` (seed 000 §4).

    Build one with :meth:`for_spec`; :meth:`normalize` never raises.
    """

    name: str
    compiled: CompiledSchema | None

    @classmethod
    def for_spec(cls, spec: ToolSpec) -> ResultValidator:
        """Compile *spec*'s ``output_schema``, if it has one."""
        schema = spec.output_schema
        compiled = CompiledSchema.compile(schema) if isinstance(schema, Mapping) else None
        return cls(name=spec.name, compiled=compiled)

    def normalize(self, value: object) -> ToolResult:
        """Return *value* as a :class:`ToolResult`.

        - ``None`` is a failure: "tool returned no result".
        - A :class:`ToolResult` is taken as it is.
        - A mapping with a ``success`` key is a result dictionary: ``success`` must be a boolean
          and ``error``, when present and not null, a string (else the result is a failure
          saying so); ``data`` becomes :attr:`ToolResult.data`, ``warnings`` (a list, or one
          value) :attr:`ToolResult.warnings` as text, every other key goes to
          :attr:`ToolResult.extra`. A failure without an error message gets one.
        - Anything else, including a mapping without ``success``, is the data of a success.

        When the tool declares an ``output_schema``, the data of a success must match it, or the
        result is a failure naming the violation. A result dictionary with no ``data`` key
        (seed 000's flat ``{"success": true, "location": ...}``) is checked as the mapping of its
        other keys.
        """
        try:
            result, payload = self._normalize(value)
            if result.success and self.compiled is not None:
                return self._check_output(result, payload)
        except Exception as error:  # noqa: BLE001 - normalize() never raises
            return ToolResult.failure(f"the tool result could not be read: {error_text(error)}")
        return result

    def _normalize(self, value: object) -> tuple[ToolResult, object]:
        if value is None:
            return ToolResult.failure("tool returned no result"), None
        if isinstance(value, ToolResult):
            return value, value.data
        if not isinstance(value, Mapping) or "success" not in value:
            return ToolResult(success=True, data=value), value
        return _result_of_dict(value)

    def _check_output(self, result: ToolResult, payload: object) -> ToolResult:
        compiled = cast("CompiledSchema", self.compiled)
        if compiled.is_valid(payload):
            return result
        if compiled.problem is not None:
            return ToolResult.failure(f"the tool's output_schema cannot be used: {compiled.problem}")
        explainer = ErrorExplainer(root="data", noun="property", under_root=True)
        problems: list[ParameterError] = []
        for error in compiled.iter_errors(payload, root="data"):
            if isinstance(error, ParameterError):
                problems.append(error)
            else:
                explainer.explain(error)
        problems.extend(explainer.result(()))
        if not problems:  # the engines disagreed; jsonschema's verdict (no errors) stands
            return result
        details = "; ".join(p.describe() for p in problems[:5])
        more = f"; and {len(problems) - 5} more" if len(problems) > 5 else ""
        return ToolResult.failure(f"the tool's result does not match its output_schema: {details}{more}")
