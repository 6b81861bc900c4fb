"""A command argument that a caller's value can turn into an option.

## What it does
Reports an item of a `command:` argv, after the program and before any `--`
item, that lets a parameter's value be read as an option:

- an item that starts with a template (`{{ path }}`, `{% if ... %}`), when a
  parameter it reads can render as text that starts with `-`: a string whose
  schema has no `pattern` anchoring a first character other than `-` (such as
  `^[^-]`, `^[A-Za-z0-9]` or `^(?!-)`), no `format` that cannot start with `-`
  (`date`, `date-time`, `time`, `ipv4`, `ipv6`, `uuid`, `uri`, `hostname`) and
  no `enum` or `const` whose values all start otherwise; a number without
  `minimum: 0`; a list or mapping the template takes apart (a loop over it);
- an item made of dashes and then a template (`--{{ flag }}`), which lets the
  value choose the option itself, unless every parameter it reads has an `enum`
  or a `const`.

A value glued to a literal option (`--max-count={{ count }}`, `-n{{ count }}`)
is never read as an option and is not reported.

## Why is this bad?
Commands never run through a shell, so a value cannot inject shell syntax, but
the program still parses its own arguments. A value such as `-r`, `--help` or
`--output=/etc/passwd` where the program reads options is taken as an option:
`grep {{ word }} notes/` with `word = "-r"` searches recursively, and
`sort --output={{ name }}` writes wherever the value says. The model, or
whoever wrote the text it read, chooses the arguments.

## Example
```yaml
tools:
  find_word:
    description: Find the lines of the notes that hold a word
    parameters:
      type: object
      properties:
        word: {type: string, description: The word to find}
      required: [word]
    command: [grep, -n, "{{ word }}", notes/]
```

## Use instead
```yaml
tools:
  find_word:
    description: Find the lines of the notes that hold a word
    parameters:
      type: object
      properties:
        word: {type: string, pattern: "^[^-]", description: The word to find}
      required: [word]
    command: [grep, -n, --, "{{ word }}", notes/]
```
Either fix is enough: `--` ends the options of most programs (check yours),
and the `pattern` refuses such a value before the program runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import LintContext, Rule
from toolflow._model import ToolSpec

SAFE_FORMATS = frozenset({"date", "date-time", "time", "ipv4", "ipv6", "uuid", "uri", "hostname"})
"""String formats the runtime validators assert whose values never start with ``-``."""

_OPENERS = ("{{", "{%", "{#")
_DASHES_THEN_TEMPLATE = re.compile(r"-+(?:\{\{|\{%)")
_CAN_LEAD = re.compile(r"-*\{[{%#]")
"""An item whose rendering a value can begin: it starts with a template, maybe after dashes."""
# Filters that keep the first character of the value they are given (or give their argument).
_KEEPING_FILTERS = frozenset({"default", "d", "string", "e", "escape", "forceescape", "trim", "lower", "upper"})


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    commands = [(tool, argv) for tool in ctx.tools if (argv := _command_argv(tool)) is not None]
    if not commands:
        return
    # Imported here: Jinja2 is loaded only when some tool has a command.
    from toolflow._lint._template_facts import TemplateFacts, template_facts  # noqa: PLC0415

    for tool, argv in commands:
        facts: dict[str, TemplateFacts] | None = None
        for index, item in enumerate(argv):
            if item == "--":
                break  # what follows is never read as an option (by programs that honour it)
            if index == 0 or not isinstance(item, str) or not _CAN_LEAD.match(item):
                continue  # most items are literal, or glue a value to an option (--name={{ x }})
            if facts is None:
                facts = {f.label: f for f in template_facts(tool)}
            found = facts.get(f"argv[{index}]")
            if found is None or found.problems:
                continue
            properties = tool.parameters.get("properties") if isinstance(tool.parameters, Mapping) else None
            schemas = properties if isinstance(properties, Mapping) else {}
            message = _problem(tool.name, index, item, found.variables, schemas)
            if message is not None:
                yield RULE.diag(tool, found.pointer, message)


def _command_argv(tool: ToolSpec) -> list[Any] | None:
    return next((_argv(impl.config) for impl in tool.implementations if impl.kind == "command"), None)


def _argv(config: object) -> list[Any] | None:
    argv = config.get("argv") if isinstance(config, dict) else None
    return argv if isinstance(argv, list) else None


def _problem(tool: str, index: int, item: str, variables: frozenset[str], schemas: Mapping[str, Any]) -> str | None:
    """Why the argv item at *index* lets a value be read as an option, or ``None``."""
    from toolflow._templates import TEMPLATE_GLOBALS  # noqa: PLC0415 - Jinja2 only for a tool with a command

    read = sorted(v for v in variables if v in schemas and v not in TEMPLATE_GLOBALS)
    where = f"command argv[{index}] of tool {tool!r}"
    if _DASHES_THEN_TEMPLATE.match(item):
        free = [name for name in read if not _enumerated(schemas[name])]
        if free:
            return (
                f"{where} lets {_names(free)} choose the option itself ({item!r});"
                f" give {_them(free)} an 'enum' of the options allowed"
            )
        return None
    if not item.startswith(_OPENERS):
        return None
    direct = _direct_variable(item)
    risky = [name for name in read if _may_start_with_dash(schemas[name], nested=direct != name)]
    if not risky:
        return None
    numeric = all(_numeric(schemas[name]) for name in risky)
    fix = "a 'minimum' of 0" if numeric else "a 'pattern' that refuses a leading '-' (such as '^[^-]')"
    return (
        f"{where} starts with a value of {_names(risky)}, so a value such as {'-1' if numeric else '-r'!r}"
        f" would be read as an option; put '--' before it, or give {_them(risky)} {fix}"
    )


def _names(names: list[str]) -> str:
    quoted = [repr(name) for name in names]
    if len(quoted) == 1:
        return f"parameter {quoted[0]}"
    return f"parameters {', '.join(quoted[:-1])} and {quoted[-1]}"


def _them(names: list[str]) -> str:
    return "it" if len(names) == 1 else "them"


def _direct_variable(item: str) -> str | None:
    """The parameter whose value the item renders as it is (``{{ name }}``, maybe filtered), else ``None``.

    Such a value renders by itself, so a list or a mapping renders as ``[...]`` or ``{...}``;
    anything else (loops, several outputs, other filters) may put any part of any value first.
    """
    import jinja2.nodes  # noqa: PLC0415 - only for a tool with a command

    from toolflow._templates import parse_template  # noqa: PLC0415

    tree = parse_template(item)
    if not isinstance(tree, jinja2.nodes.Template) or len(tree.body) != 1:
        return None
    output = tree.body[0]
    if not isinstance(output, jinja2.nodes.Output) or len(output.nodes) != 1:
        return None
    node = output.nodes[0]
    while isinstance(node, jinja2.nodes.Filter) and node.name in _KEEPING_FILTERS and node.node is not None:
        node = node.node
    return node.name if isinstance(node, jinja2.nodes.Name) else None


def _enumerated(schema: object) -> bool:
    return isinstance(schema, Mapping) and ("const" in schema or isinstance(schema.get("enum"), list))


def _numeric(schema: object) -> bool:
    types = _types(schema)
    return types is not None and bool(types) and types <= {"number", "integer"}


def _types(schema: object) -> set[str] | None:
    """The JSON types *schema* names, or ``None`` when it names none (any type)."""
    if not isinstance(schema, Mapping):
        return None
    declared = schema.get("type")
    if isinstance(declared, str):
        return {declared}
    if isinstance(declared, list):
        return {t for t in declared if isinstance(t, str)}
    return None


def _may_start_with_dash(schema: object, *, nested: bool) -> bool:
    """Whether a value *schema* accepts can render as text that starts with ``-``.

    With *nested*, the value may be taken apart by the template (iterated, indexed, joined), so
    the items of arrays and the keys and values of objects count too. A ``$ref`` is not
    followed: what it refers to cannot make the schema refuse such a value here.
    """
    return bool(_dash_kinds(schema, nested=nested))


_KINDS = frozenset({"string", "number", "array", "object"})
"""The JSON kinds whose text can start with ``-`` (``true``, ``false`` and ``null`` never do)."""


def _dash_kinds(schema: object, *, nested: bool) -> frozenset[str]:
    """The kinds of value *schema* accepts that can render with a leading ``-``."""
    if schema is False:
        return frozenset()
    if not isinstance(schema, Mapping):
        return _KINDS if nested else _KINDS - {"array", "object"}
    if "const" in schema:
        return _value_kinds([schema["const"]], nested=nested)
    if isinstance(schema.get("enum"), list):
        return _value_kinds(schema["enum"], nested=nested)
    declared = _types(schema)
    kinds = set(_KINDS) if declared is None else {"number" if t == "integer" else t for t in declared} & _KINDS
    if _string_refuses_dash(schema):
        kinds.discard("string")
    if _never_negative(schema):
        kinds.discard("number")
    if not nested:
        kinds -= {"array", "object"}
    elif "array" in kinds:
        items = [schema.get("items", True), *_list(schema.get("prefixItems"))]
        if not any(_dash_kinds(sub, nested=True) for sub in items):
            kinds.discard("array")
    for sub in _list(schema.get("allOf")):
        kinds &= _dash_kinds(sub, nested=nested)
    for keyword in ("anyOf", "oneOf"):
        branches = _list(schema.get(keyword))
        if branches:
            kinds &= frozenset().union(*(_dash_kinds(sub, nested=nested) for sub in branches))
    return frozenset(kinds)


def _value_kinds(values: list[Any], *, nested: bool) -> frozenset[str]:
    kinds = set()
    for value in values:
        if isinstance(value, str) and value.startswith("-"):
            kinds.add("string")
        elif isinstance(value, int | float) and not isinstance(value, bool) and str(value).startswith("-"):
            kinds.add("number")
        elif nested and isinstance(value, list) and _value_kinds(value, nested=True):
            kinds.add("array")
        elif nested and isinstance(value, Mapping) and _value_kinds([*value, *value.values()], nested=True):
            kinds.add("object")
    return frozenset(kinds)


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _never_negative(schema: Mapping[str, Any]) -> bool:
    for keyword in ("minimum", "exclusiveMinimum"):
        bound = schema.get(keyword)
        if isinstance(bound, int | float) and not isinstance(bound, bool) and bound >= 0:
            return True
    return False


def _string_refuses_dash(schema: Mapping[str, Any]) -> bool:
    if schema.get("format") in SAFE_FORMATS or schema.get("maxLength") == 0:
        return True
    pattern = schema.get("pattern")
    return isinstance(pattern, str) and pattern_refuses_dash(pattern)


# --- patterns ----------------------------------------------------------------------------------


def pattern_refuses_dash(pattern: str) -> bool:
    """Whether the ECMA-262 *pattern* refuses every string that starts with ``-``.

    True when each top-level alternative is anchored with ``^`` and then either looks ahead
    for no ``-`` (``(?!-)``) or must match a first character that is not ``-``: a literal, a
    class or an escape that cannot match it, or a group whose alternatives all do. Anything
    this does not understand counts as not refusing, so the rule may warn about a pattern that
    does refuse, never the other way round.
    """
    return all(_branch_refuses(branch) for branch in _alternatives(pattern))


def _alternatives(pattern: str) -> list[str]:
    """*pattern* split at its top-level ``|``."""
    branches, depth, start = [], 0, 0
    for i, char in _structure(pattern):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif depth == 0:
            branches.append(pattern[start:i])
            start = i + 1
    branches.append(pattern[start:])
    return branches


def _structure(pattern: str) -> Iterator[tuple[int, str]]:
    """The positions of the ``(``, ``)`` and ``|`` of *pattern* outside escapes and classes."""
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 2
            continue
        if char == "[":
            i = _class_end(pattern, i)
            continue
        if char in "()|":
            yield i, char
        i += 1


def _class_end(pattern: str, start: int) -> int:
    """The index just past the character class that opens at *start*."""
    i = start + 1
    if pattern[i : i + 1] == "^":
        i += 1
    if pattern[i : i + 1] == "]":
        i += 1
    while i < len(pattern) and pattern[i] != "]":
        i += 2 if pattern[i] == "\\" else 1
    return i + 1


def _branch_refuses(branch: str) -> bool:
    if not branch.startswith("^"):
        return False
    return _first_refuses(branch[1:])


_OPTIONAL = re.compile(r"[?*]|\{0[,}]")
"""A quantifier that lets the atom before it match nothing."""


def _first_refuses(rest: str) -> bool:
    """Whether the pattern *rest* (what follows ``^``) cannot match ``-`` as its first character."""
    if not rest:
        return False
    if rest.startswith("$"):
        return True  # only the empty string
    end = _atom_end(rest)
    if end is None:
        return False
    if rest.startswith(("(?=", "(?!")):
        inner = rest[3 : end - 1]
        if rest.startswith("(?=") and _group_refuses(inner):
            return True
        if rest.startswith("(?!") and _atom_end(inner) == len(inner) and _matches_dash(inner):
            return True
        return _first_refuses(rest[end:])  # a lookahead consumes nothing: the next atom decides
    if _OPTIONAL.match(rest, end):
        return False  # an optional first atom lets what follows come first
    if rest.startswith("(?:"):
        return _group_refuses(rest[3 : end - 1])
    if rest.startswith("(?"):
        return False  # a lookbehind or a named group: not understood
    if rest.startswith("("):
        return _group_refuses(rest[1 : end - 1])
    return not _matches_dash(rest[:end])


def _group_refuses(inner: str) -> bool:
    return all(branch != "" and _first_refuses(branch) for branch in _alternatives(inner))


def _matches_dash(atom: str) -> bool:
    """Whether the one-character *atom* (a character, an escape, a class) matches ``-``; true when unsure."""
    try:
        return re.fullmatch(atom, "-") is not None
    except re.error:
        return True


def _atom_end(rest: str) -> int | None:
    """The end of the first atom of *rest*: a class, an escape, a group or one character."""
    if rest.startswith("["):
        end = _class_end(rest, 0)
        return end if end <= len(rest) else None
    if rest.startswith("\\"):
        return 2 if len(rest) >= 2 else None
    if rest.startswith("("):
        depth = 0
        for i, char in _structure(rest):
            if char == "(":
                depth += 1
            elif char == ")":
                depth -= 1
                if depth == 0:
                    return i + 1
        return None
    return 1 if rest[0] not in ")|*+?{" else None


RULE = Rule(code="TF226", name="argv-option-injection", severity=Severity.WARNING, doc=__doc__ or "", check=check)
