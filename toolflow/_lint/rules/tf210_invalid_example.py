"""An example's arguments or result would be rejected by the tool's own validators.

## What it does
Runs each entry of `examples` through the validators a real call goes
through. Its `args` are checked exactly as a call's arguments are: strings
coerced to the declared types (unless the tool is `strict`), defaults filled
in, undeclared keys dropped (or rejected where `additionalProperties` is
`false`), then `parameters` with `format` asserted and ECMA-262 `pattern`s,
then the `parameter_rules` (unless the example declares `expect_error`: it shows
a call that fails, and `toolflow test` checks that it does). Parameters the tool
binds to the caller's context (`context:`) come from the example's own `context`,
as a call's come from its caller's: `args` that set one, or no value for a
required one, are reported as the engine would refuse the call. Its `result`, when given, is checked as a result's
data is, against `output_schema`, when declared. Reports one problem per
example, the first error in the validator's own words, at the failing argument
when the error names one.

## Why is this bad?
Examples document how to call the tool: readers take them as correct usage,
and tests run them. An example that fails validation teaches a call that is
rejected, and usually means the schema and the examples drifted apart.

## Example
```yaml
tools:
  notify:
    parameters:
      type: object
      properties:
        to:
          type: string
          format: email
          description: Who to write to
        retries:
          type: integer
          description: How often to try again
      required: [to]
    examples:
      - args: {to: the manager, retries: "twice"}
```

## Use instead
```yaml
tools:
  notify:
    parameters:
      type: object
      properties:
        to:
          type: string
          format: email
          description: Who to write to
        retries:
          type: integer
          description: How often to try again
      required: [to]
    examples:
      - args: {to: manager@example.com, retries: 2}
```
"""  # noqa: D214, D405, D411 - `examples:` here is YAML, not a docstring section

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Literal

from toolflow._checking import ARGUMENTS, CompiledSchema, ErrorExplainer, ParameterError, show
from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import LintContext, Rule
from toolflow._lint._schema_facts import has_remote_ref
from toolflow._model import MISSING, Example, ToolSpec, look_up
from toolflow._results import ToolResult
from toolflow._schemas import json_pointer

_INDEX = re.compile(r"\[(\d+)\]")
_UNKNOWN_KEY = ("additionalProperties:", "unevaluatedProperties:")
_NONE = object()


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    for tool in ctx.tools:
        if not tool.examples:
            continue
        yield from _check_args(ctx, tool)
        yield from _check_results(ctx, tool)


def _check_args(ctx: LintContext, tool: ToolSpec) -> Iterator[Diagnostic]:
    if has_remote_ref(tool):
        return
    validator = ctx.validator(tool)
    if validator is None:
        return
    for i, example in enumerate(tool.examples):
        if example.expect_error is not None:
            continue  # it shows a call that fails, which rejected arguments do: `toolflow test` checks how
        args = example.args
        if tool.context:
            bound = _bound_problem(tool, i, example)
            if bound is not None:
                yield _at(tool, example, *bound, key=True)
                continue
            args = _filled(tool, example)
        outcome = validator.validate(args)
        if outcome.valid:
            continue
        first = outcome.errors[0]
        path = [] if first.parameter == ARGUMENTS else _path_named(first.parameter, example.args)
        unknown = bool(path) and (first.constraint or "").startswith(_UNKNOWN_KEY)
        message = f"examples[{i}] args are rejected: {first.describe()}{_more(outcome.errors)}"
        yield _at(tool, example, "args", path, message, key=unknown or not path)


def _bound_problem(tool: ToolSpec, i: int, example: Example) -> tuple[str, list[str | int], str] | None:
    """Where and why example *i* of a tool with bound parameters would be refused before validation, if it would."""
    for name in tool.context:
        if name in example.args:
            message = (
                f"examples[{i}] args set {name!r}, which the tool binds to the caller's context: "
                f"the call would be refused; give it under the example's 'context' ({tool.context[name]!r})"
            )
            return "args", [name], message
    required = tool.parameters.get("required", ())
    for name, path in tool.context.items():
        if isinstance(required, list) and name in required and look_up(example.context or {}, path) is MISSING:
            message = (
                f"examples[{i}] has no value for the bound parameter {name!r}: "
                f"add 'context' with {path!r} to the example"
            )
            return "args", [], message
    return None


def _filled(tool: ToolSpec, example: Example) -> dict[str, object]:
    """The example's arguments with the tool's bound parameters filled from the example's context."""
    filled = dict(example.args)
    for name, path in tool.context.items():
        value = look_up(example.context or {}, path)
        if value is not MISSING:
            filled[name] = value
    return filled


def _check_results(ctx: LintContext, tool: ToolSpec) -> Iterator[Diagnostic]:
    for i, example, path, problem in output_mismatches(ctx, tool, "result"):
        message = f"examples[{i}] result does not match 'output_schema': {problem}"
        yield _at(tool, example, "result", path, message, key=not path)


def output_mismatches(
    ctx: LintContext, tool: ToolSpec, part: Literal["result", "expect"]
) -> Iterator[tuple[int, Example, list[str | int], str]]:
    """The examples whose *part* breaks the tool's ``output_schema`` (TF210's ``result``, TF238's ``expect``).

    Yields the example's index, the example, the path to the offending value in *part*, and the
    first problem (with how many more). An ``expect`` beside ``expect_error`` is left out.
    """
    if tool.output_schema is None or has_remote_ref(tool, "output_schema"):
        return
    validator = ctx.validator(tool, "output_schema")
    if validator is None or validator.compiled is None:
        return
    for i, example in enumerate(tool.examples):
        if part == "result" and not example.has_result:
            continue
        if part == "expect" and (not example.has_expect or example.expect_error is not None):
            continue
        data = example.result if part == "result" else example.expect
        # The verdict is the runtime's: the value is the data of a successful call.
        if validator.normalize(ToolResult(success=True, data=data)).success:
            continue
        problems = _result_problems(validator.compiled, data)
        if problems:
            path = _path_named(problems[0].parameter.removeprefix("data"), data, dotted=True)
            yield i, example, path, f"{problems[0].describe()}{_more(problems)}"


def _result_problems(compiled: CompiledSchema, data: object) -> list[ParameterError]:
    """The problems of *data*, as ``ResultValidator.normalize`` words them."""
    explainer = ErrorExplainer(root="data", noun="property", under_root=True)
    problems: list[ParameterError] = []
    for error in compiled.iter_errors(data, root="data"):
        if isinstance(error, ParameterError):
            problems.append(error)
        else:
            explainer.explain(error)
    problems.extend(explainer.result(()))
    return problems


def _more(errors: Sequence[ParameterError]) -> str:
    return f"; and {len(errors) - 1} more" if len(errors) > 1 else ""


def _path_named(label: str, instance: object, *, dotted: bool = False) -> list[str | int]:
    """The path into *instance* that a validator's label names (``address.city``, ``tags[0]``).

    Only as much of the path as exists in *instance* is returned: a missing parameter, one filled
    in from its default, or the names of a rule (``a, b``) give the path of what holds them.
    Keys are matched against *instance*'s own keys, so names with dots or brackets resolve too.
    *dotted* says that a key is preceded by a dot even at the top (``.count`` under ``data``).
    """
    path: list[str | int] = []
    node, rest = instance, label
    while rest:
        if isinstance(node, list) and (index := _INDEX.match(rest)):
            position = int(index[1])
            if position >= len(node):
                break
            path.append(position)
            node, rest = node[position], rest[index.end() :]
        elif isinstance(node, Mapping):
            if dotted or path:
                if not rest.startswith("."):
                    break
                rest = rest[1:]
            key = _longest_key(node, rest)
            if key is _NONE:
                break
            path.append(key if isinstance(key, str) else show(key))
            node, rest = node[key], rest[len(_spelt(key)) :]
        else:
            break
    return path


def _spelt(key: object) -> str:
    return key if isinstance(key, str) else show(key)


def _longest_key(node: Mapping[object, object], rest: str) -> object:
    """The longest key of *node* that *rest* starts with, followed by nothing, a dot or a bracket; else ``_NONE``."""
    found: object = _NONE
    for key in node:
        text = _spelt(key)
        if (rest == text or rest.startswith((text + ".", text + "["))) and (
            found is _NONE or len(text) > len(_spelt(found))
        ):
            found = key
    return found


def _at(tool: ToolSpec, example: Example, part: str, path: list[str | int], message: str, *, key: bool) -> Diagnostic:
    pointer = f"{example.pointer}/{part}{json_pointer(path)}"
    return RULE.diag(tool, pointer, message, key=key)


RULE = Rule(code="TF210", name="invalid-example", severity=Severity.ERROR, doc=__doc__ or "", check=check)
