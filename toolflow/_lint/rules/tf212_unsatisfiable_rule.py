"""Parameter rules that can never be satisfied, or that make a parameter impossible to give.

## What it does
Reads the tool's top-level `required` list and its `parameter_rules` together and
reports:

- an `exclusive` or `exactly_one` rule two of whose parameters are required in
  every call (by `required`, by a one-name `at_least_one`/`exactly_one`, or by
  `when`/`require` rules those trigger): no call can ever be valid;
- parameters that can never be given: one that an `exclusive`/`exactly_one`
  rule pairs with an always-required parameter (reported at that rule), and a
  `when` parameter whose `require` list leads, directly or through other rules,
  to two parameters that may not be given together (reported at the `when` rule);
- an `at_least_one` or `exactly_one` rule none of whose parameters can be given;
- a rule that lists the same parameter twice, and a rule that requires its own
  `when` parameter. A name repeated in `exclusive` or `exactly_one` forbids that
  parameter outright; elsewhere the repetition has no effect, but it is kept an
  error like the rest of this rule, because it nearly always stands for another
  name that was meant.

Rules whose `when` is a mapping of values are not analysed: whether the values
can occur is a question for the parameter schemas.

## Why is this bad?
The rules are compiled into the tool's parameter schema. An unsatisfiable rule
makes every call fail validation, and an impossible parameter is documented to
the model but rejected whenever it is used: the model keeps retrying a call that
can never succeed.

## Example
```yaml
tools:
  search:
    parameters:
      type: object
      properties:
        query: {type: string, description: Words to look for}
        id: {type: string, description: Exact object id}
      required: [query]
    parameter_rules:
      - exclusive: [query, id]
      - when: id
        require: [query]
```

## Use instead
```yaml
tools:
  search:
    parameters:
      type: object
      properties:
        query: {type: string, description: Words to look for}
        id: {type: string, description: Exact object id}
    parameter_rules:
      - exactly_one: [query, id]
```
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import LintContext, Rule
from toolflow._model import ParameterRule, ToolSpec


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    for tool in ctx.tools:
        if tool.parameter_rules:
            yield from _repetitions(tool)
            yield from _Analysis(tool).check()


def _form(rule: ParameterRule) -> str:
    return "require" if rule.kind == "requires" else rule.kind


def _repetitions(tool: ToolSpec) -> Iterator[Diagnostic]:
    for rule in tool.parameter_rules:
        seen: set[str] = set()
        form = _form(rule)
        for i, name in enumerate(rule.params):
            pointer = f"{rule.pointer}/{form}/{i}"
            if name in seen:
                if rule.kind == "exactly_one" and len(set(rule.params)) == 1:
                    message = f"parameter {name!r} is listed twice in {form!r}, so the rule can never be satisfied"
                elif rule.kind in ("exclusive", "exactly_one"):
                    message = f"parameter {name!r} is listed twice in {form!r}, which forbids giving it at all"
                else:
                    message = f"parameter {name!r} is listed twice in {form!r}"
                yield RULE.diag(tool, pointer, message)
            elif name == rule.when:
                message = f"the rule requires {name!r} when {name!r} is given, which has no effect"
                yield RULE.diag(tool, pointer, message)
            seen.add(name)


def _names(names: Sequence[str]) -> str:
    """``parameter 'a'``, ``parameters 'a' and 'b'``."""
    quoted = [repr(n) for n in names]
    if len(quoted) == 1:
        return f"parameter {quoted[0]}"
    return f"parameters {', '.join(quoted[:-1])} and {quoted[-1]}"


Conflict = tuple[int, str, str]
"""A rule index and two distinct parameters it allows only one of."""


class _Analysis:
    """Closure of the always-required names under the `when`/`require` implications."""

    def __init__(self, tool: ToolSpec) -> None:
        self.tool = tool
        self.rules = tool.parameter_rules
        required = tool.parameters.get("required") if isinstance(tool.parameters, Mapping) else None
        forced = {n for n in required if isinstance(n, str)} if isinstance(required, list) else set()
        self.groups: list[tuple[int, tuple[str, ...]]] = []
        self.implications: dict[str, list[int]] = {}
        for i, rule in enumerate(self.rules):
            names = tuple(dict.fromkeys(rule.params))
            if rule.kind in ("exclusive", "exactly_one") and len(names) < len(rule.params):
                continue  # a repetition here forbids a parameter; reported as such, not analysed further
            if rule.kind in ("exclusive", "exactly_one") and len(names) >= 2:
                self.groups.append((i, names))
            if rule.kind in ("at_least_one", "exactly_one") and len(names) == 1:
                forced.add(names[0])
            if rule.kind == "requires" and rule.when is not None:
                self.implications.setdefault(rule.when, []).append(i)
        self.forced = self.closure(forced)

    def closure(self, start: Iterable[str], skip: str | None = None) -> set[str]:
        """*start* and every name it requires, transitively; *skip*'s own rules are not applied."""
        seen = set(start)
        todo = list(seen)
        while todo:
            name = todo.pop()
            if name == skip:
                continue
            for i in self.implications.get(name, ()):
                for required in self.rules[i].params:
                    if required not in seen:
                        seen.add(required)
                        todo.append(required)
        return seen

    def conflict(self, given: set[str]) -> Conflict | None:
        for i, names in self.groups:
            inside = [n for n in names if n in given]
            if len(inside) >= 2:
                return i, inside[0], inside[1]
        return None

    def diag(self, index: int, message: str) -> Diagnostic:
        return RULE.diag(self.tool, self.rules[index].pointer, message)

    def check(self) -> Iterator[Diagnostic]:
        unsatisfiable = False
        for i, names in self.groups:
            inside = [n for n in names if n in self.forced]
            if len(inside) >= 2:
                unsatisfiable = True
                yield self.diag(
                    i,
                    f"{_names(inside)} are required in every call, but this {_form(self.rules[i])!r} rule "
                    "allows only one of them: no call can ever be valid",
                )
        if unsatisfiable:
            return  # everything else would follow from this
        impossible: set[str] = set()
        yield from self.excluded_by_forced(impossible)
        yield from self.impossible_triggers(impossible)
        for i, rule in enumerate(self.rules):
            names = tuple(dict.fromkeys(rule.params))
            if rule.kind in ("at_least_one", "exactly_one") and names and all(n in impossible for n in names):
                yield self.diag(
                    i,
                    f"none of {', '.join(repr(n) for n in names)} can ever be given, "
                    f"so this {_form(rule)!r} rule can never be satisfied",
                )

    def excluded_by_forced(self, impossible: set[str]) -> Iterator[Diagnostic]:
        for i, names in self.groups:
            forced = next((n for n in names if n in self.forced), None)
            if forced is None:
                continue
            others = [n for n in names if n != forced]
            impossible.update(others)
            yield self.diag(
                i,
                f"{_names(others)} can never be given: {forced!r} is required in every call "
                f"and this {_form(self.rules[i])!r} rule allows only one of them",
            )

    def impossible_triggers(self, impossible: set[str]) -> Iterator[Diagnostic]:
        for trigger, indexes in self.implications.items():
            if trigger in self.forced or trigger in impossible:
                continue
            found = self.conflict(self.closure({*self.forced, trigger}))
            if found is None:
                continue
            impossible.add(trigger)
            reported = False
            for i in indexes:
                own = self.conflict(self.closure({*self.forced, trigger, *self.rules[i].params}, skip=trigger))
                if own is not None:
                    reported = True
                    yield self.diag(i, self.trigger_message(trigger, own))
            if not reported:
                yield self.diag(indexes[0], self.trigger_message(trigger, found))

    def trigger_message(self, trigger: str, conflict: Conflict) -> str:
        index, a, b = conflict
        where = f"parameter_rules[{index}]"
        if trigger in (a, b):
            other = b if a == trigger else a
            return (
                f"parameter {trigger!r} can never be given: it requires {other!r}, "
                f"and {where} allows only one of {trigger!r} and {other!r}"
            )
        if a in self.forced or b in self.forced:
            forced, other = (a, b) if a in self.forced else (b, a)
            return (
                f"parameter {trigger!r} can never be given: it requires {other!r}, and {where} allows only one of "
                f"{other!r} and {forced!r}, which every call requires"
            )
        return (
            f"parameter {trigger!r} can never be given: it requires both {a!r} and {b!r}, "
            f"and {where} allows only one of them"
        )


RULE = Rule(code="TF212", name="unsatisfiable-rule", severity=Severity.ERROR, doc=__doc__ or "", check=check)
