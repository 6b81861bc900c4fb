"""Generate the reference parts of the documentation from the code.

``docs/rules.md`` is rendered in full from the rule modules' docstrings, and the
field table of ``docs/spec-reference.md`` (between :data:`BEGIN_FIELDS` and
:data:`END_FIELDS`) from the spec-file JSON Schema. ``python -m toolflow._docgen``
rewrites both; ``--check`` only reports whether they are current.
``tests/test_docs.py`` fails when either is stale.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from toolflow._lint._rule import Rule

__all__ = [
    "BEGIN_FIELDS",
    "END_FIELDS",
    "FAMILIES",
    "SECTIONS",
    "Family",
    "Field",
    "family_of",
    "iter_fields",
    "main",
    "render_rules",
    "render_spec_fields",
    "splice_fields",
]

BEGIN_FIELDS = "<!-- BEGIN GENERATED FIELDS -->"
END_FIELDS = "<!-- END GENERATED FIELDS -->"

SECTIONS = ("What it does", "Why is this bad?", "Example", "Use instead")
"""The ``##`` sections every rule docstring has, in this order, after its one-line summary."""


@attrs.frozen(kw_only=True)
class Family:
    """A range of rule codes: ``TF2`` covers ``TF200`` to ``TF299``."""

    prefix: str
    title: str
    about: str
    loader: bool = False
    """Reported while loading or by the engine, not by a rule's ``check``."""


FAMILIES = (
    Family(
        prefix="TF0",
        title="Parse",
        about=(
            "The file cannot be read, or its YAML is malformed or unsafe. Reported by the loader; a file that "
            "cannot be read or parsed declares no tools."
        ),
        loader=True,
    ),
    Family(
        prefix="TF1",
        title="Spec schema",
        about=(
            "The document does not match the spec-file schema (`toolflow spec-schema`). Reported by the loader; "
            "a tool with such a problem is skipped, so the rules below never see it."
        ),
        loader=True,
    ),
    Family(
        prefix="TF2",
        title="Semantics",
        about=(
            "Schema-valid specs that are still wrong: tool names, parameter schemas, examples, dependency rules, "
            "templates, commands, categories, policies and pipelines (TF227-TF235)."
        ),
    ),
    Family(
        prefix="TF3",
        title="Provider compatibility",
        about=(
            "Schema features a model provider or client rejects. Checked only for the providers named with "
            "`--target` (or `target` in the configuration): `openai`, `anthropic`, `gemini`, `mcp`."
        ),
    ),
    Family(
        prefix="TF4",
        title="Implementation bindings",
        about=(
            "Whether plugins bind each `implementation:` name exactly once, with a callable that accepts the "
            "tool's parameters. Checked when plugins are loaded (the default; `--no-plugins` skips them)."
        ),
    ),
    Family(
        prefix="TF5",
        title="Documentation and style",
        about="Descriptions and naming that make tools harder for a model to choose and call well.",
    ),
    Family(
        prefix="TF9",
        title="Suppression",
        about="Meta-rules about `# toolflow: ignore[...]` comments. Reported by the engine.",
        loader=True,
    ),
)


def family_of(code: str) -> Family | None:
    """Return the family of a rule *code* (``TF203`` → semantics), or ``None`` if it has none."""
    return next((f for f in FAMILIES if code.startswith(f.prefix) and len(code) == 5), None)


# --- docs/rules.md ----------------------------------------------------------------

_FENCE = re.compile(r"^\s*(```|~~~)")


def _cell(text: str) -> str:
    """Escape *text* for a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def _rule_body(doc: str) -> str:
    """The docstring after its summary line, with ``##`` headings demoted to ``####``."""
    lines = doc.strip().splitlines()[1:]
    out: list[str] = []
    fenced = False
    for line in lines:
        if _FENCE.match(line):
            fenced = not fenced
        demote = not fenced and line.startswith("#")
        out.append(("##" + line if demote else line).rstrip())
    return "\n".join(out).strip()


def _checked_by(rule: Rule) -> str:
    family = family_of(rule.code)
    if rule.check is not None or rule.check_project is not None:
        if family is not None and family.prefix == "TF3":
            return "checked on the loaded tools for each `--target` provider"
        if family is not None and family.prefix == "TF4":
            return "checked on the loaded tools against the loaded plugins"
        return "checked on the loaded tools"
    if family is not None and family.prefix == "TF9":
        return "reported by the engine while applying suppression comments"
    return "reported by the loader"


def render_rules(rules: Iterable[Rule]) -> str:
    """Render the whole of ``docs/rules.md`` from *rules* (their codes, names, severities and docstrings)."""
    ordered = sorted(rules, key=lambda r: r.code)
    out = [
        "# Rule reference",
        "",
        "<!-- Generated by `python -m toolflow._docgen` from the docstrings of the modules in",
        "     toolflow/_lint/rules/. Edit those docstrings, not this file. -->",
        "",
        "`toolflow lint` reports each problem with a stable code (`TF201`) and a kebab-case name",
        "(`invalid-tool-name`). Either is accepted wherever a rule is named: on the command line, in",
        "`[tool.toolflow.lint]`, and in suppression comments. So is a code prefix (`TF2` selects every",
        "semantic rule) and `ALL`. `toolflow rule CODE` prints a rule's documentation in the terminal,",
        "and `toolflow rule --all` lists them.",
        "",
        "## Families",
        "",
        "| Codes | Family | What they report |",
        "|---|---|---|",
    ]
    out.extend(f"| {f.prefix}xx | {f.title} | {_cell(f.about)} |" for f in FAMILIES)
    out += [
        "",
        "## Choosing rules",
        "",
        "Every rule is on by default. Narrow or widen the selection, change severities, or silence one",
        "place (details in [linting.md](linting.md)):",
        "",
        "```console",
        "$ toolflow lint --select TF2,TF5 specs/          # only these families",
        "$ toolflow lint --ignore missing-description     # everything but one rule",
        "$ toolflow lint --extend-select TF3 --target openai",
        "$ toolflow lint --fail-on warning                # warnings fail the run too",
        "```",
        "",
        "```toml",
        "[tool.toolflow.lint]",
        'ignore = ["TF5"]',
        'per-file-ignores = { "specs/legacy/*.yaml" = ["TF201"] }',
        'severity = { TF901 = "error" }',
        "```",
        "",
        "```yaml",
        "tools:",
        "  legacy tool:  # toolflow: ignore[TF201]",
        "```",
        "",
        "A suppression comment covers its own line, or the next line when it stands alone on its line;",
        "one that suppresses nothing is reported as `TF901`.",
        "",
        "## Summary",
        "",
        "| Code | Name | Default severity | Summary |",
        "|---|---|---|---|",
    ]
    out.extend(
        f"| [{r.code}](#{r.code.lower()}) | `{r.name}` | {r.severity.value} | {_cell(r.summary)} |" for r in ordered
    )
    for family in FAMILIES:
        members = [r for r in ordered if family_of(r.code) is family]
        out += ["", f"## {family.prefix}xx: {family.title.lower()}", "", family.about]
        if not members:
            out += ["", "No rules in this family yet."]
        for rule in members:
            out += [
                "",
                f'<a id="{rule.code.lower()}"></a>',
                "",
                f"### {rule.code} `{rule.name}`",
                "",
                f"Default severity: **{rule.severity.value}**; {_checked_by(rule)}."
                + (f" From plugin `{rule.plugin}`." if rule.plugin else ""),
                "",
                rule.summary,
            ]
            body = _rule_body(rule.doc)
            if body:
                out += ["", body]
    others = [r for r in ordered if family_of(r.code) is None]
    if others:
        out += ["", "## Other rules"]
        for rule in others:
            out += ["", f'<a id="{rule.code.lower()}"></a>', "", f"### {rule.code} `{rule.name}`", ""]
            out += [f"Default severity: **{rule.severity.value}**.", "", rule.doc.strip()]
    return "\n".join(out) + "\n"


# --- the field table of docs/spec-reference.md -----------------------------------------


@attrs.frozen(kw_only=True)
class Field:
    """One property of the spec-file schema, at its path (``tools.<name>.retry.attempts``)."""

    path: str
    type: str
    default: str
    description: str


_PLACEHOLDERS = {
    "tools": "<name>",
    "toolsets": "<name>",
    "steps": "<name>",
    "mcp_servers": "<name>",
    "overrides": "<name>",
}
_TYPE_WORDS = {
    "object": ("mapping", "mappings"),
    "array": ("list", "lists"),
    "string": ("string", "strings"),
    "integer": ("integer", "integers"),
    "number": ("number", "numbers"),
    "boolean": ("boolean", "booleans"),
    "null": ("null", "nulls"),
}
_NAMED_DEFINITIONS = frozenset({"duration"})
_DEFAULT_WORDS = re.compile(r"\(defaults?:?\s+([^)]*)\)")
_DEFAULT_MARK = re.compile(r"\(default[;)]")
_CODE = re.compile(r"`([^`]+)`")
_LITERAL = re.compile(r"^(?:true|false|null|-?[0-9]+(?:\.[0-9]+)?)$")


def _resolve(schema: Mapping[str, Any], root: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    """Merge a ``$ref`` target under the local keys; return it and the definition's name."""
    ref = schema.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#/"):
        return dict(schema), None
    target: Any = root
    for part in ref[2:].split("/"):
        target = target[part]
    merged, _ = _resolve(target, root)
    merged.update((k, v) for k, v in schema.items() if k != "$ref")
    return merged, ref.rsplit("/", 1)[-1]


def _has_fields(schema: Mapping[str, Any]) -> bool:
    return isinstance(schema.get("properties"), dict)


def _type_text(schema: Mapping[str, Any], definition: str | None, root: Mapping[str, Any], plural: bool = False) -> str:
    if definition in _NAMED_DEFINITIONS:
        return f"{definition}s" if plural else definition
    if "const" in schema:
        return f"`{schema['const']}`"
    if "enum" in schema:
        return " \\| ".join(f"`{v}`" for v in schema["enum"])
    types = schema.get("type")
    if types is None:
        return "any"
    names = [types] if isinstance(types, str) else list(types)
    return " or ".join(_type_word(name, schema, root, plural) for name in names) + _range_text(schema)


def _type_word(name: str, schema: Mapping[str, Any], root: Mapping[str, Any], plural: bool) -> str:
    """One JSON type of *schema* in words: ``string``, ``non-empty list of strings``, ``mapping of numbers``."""
    word = _TYPE_WORDS.get(name, (name, name + "s"))[1 if plural else 0]
    if name == "array" and isinstance(schema.get("items"), dict):
        items, items_def = _resolve(schema["items"], root)
        word = f"{word} of {_type_text(items, items_def, root, plural=True)}"
        return f"non-empty {word}" if schema.get("minItems") else word
    if name == "object" and isinstance(schema.get("additionalProperties"), dict):
        values, values_def = _resolve(schema["additionalProperties"], root)
        if not _has_fields(values) and "type" in values:
            return f"{word} of {_type_text(values, values_def, root, plural=True)}"
        return word
    if name == "string" and schema.get("minLength"):
        return f"non-empty {word}"
    return word


def _range_text(schema: Mapping[str, Any]) -> str:
    """``, 1 to 10``, ``, at least 0``, ``, at most 5`` or nothing, from ``minimum`` and ``maximum``."""
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None and high is not None:
        return f", {low} to {high}"
    if low is not None:
        return f", at least {low}"
    if high is not None:
        return f", at most {high}"
    return ""


def _default_text(schema: Mapping[str, Any], description: str) -> str:
    if "default" in schema:
        return f"`{schema['default']}`"
    if match := _DEFAULT_WORDS.search(description):
        value = match[1].strip()
        return f"`{value}`" if _LITERAL.match(value) else value
    if match := _DEFAULT_MARK.search(description):
        named = _CODE.findall(description[: match.start()])
        if named:
            return f"`{named[-1]}`"
    return ""


def iter_fields(schema: Mapping[str, Any]) -> Iterator[Field]:
    """Yield every property of the spec-file *schema*, depth first, with ``$ref`` followed.

    A list's items that are mappings appear as ``path[]``, and a mapping of
    named entries (``tools``) as ``path.<name>``; their own properties follow.
    """

    def walk(node: Mapping[str, Any], path: str, *, required: bool, parent_mapping_only: bool) -> Iterator[Field]:
        resolved, definition = _resolve(node, schema)
        description = " ".join(str(resolved.get("description", "")).split())
        default = _default_text(resolved, description)
        if required:
            default = "required" if parent_mapping_only else "required (in the mapping form)"
        yield Field(path=path, type=_type_text(resolved, definition, schema), default=default, description=description)
        yield from children(resolved, path)

    def children(resolved: Mapping[str, Any], path: str) -> Iterator[Field]:
        types = resolved.get("type")
        mapping_only = types == "object" or types is None
        required = resolved.get("required", [])
        for key, sub in (resolved.get("properties") or {}).items():
            name = f"{path}.{key}" if path else key
            yield from walk(sub, name, required=key in required, parent_mapping_only=mapping_only)
        items = resolved.get("items")
        if isinstance(items, dict) and _has_fields(_resolve(items, schema)[0]):
            yield from walk(items, f"{path}[]", required=False, parent_mapping_only=True)
        extra = resolved.get("additionalProperties")
        if isinstance(extra, dict) and _has_fields(_resolve(extra, schema)[0]):
            placeholder = _PLACEHOLDERS.get(path.rsplit(".", 1)[-1], "<key>")
            yield from walk(extra, f"{path}.{placeholder}", required=False, parent_mapping_only=True)

    yield from children(schema, "")


def render_spec_fields(schema: Mapping[str, Any]) -> str:
    """Render the field table of ``docs/spec-reference.md`` from the spec-file *schema*."""
    out = [
        "<!-- Generated by `python -m toolflow._docgen` from toolflow/data/spec-v1.schema.json; do not edit. -->",
        "",
        "| Field | Type | Default | Description |",
        "|---|---|---|---|",
    ]
    out.extend(
        f"| `{f.path}` | {f.type} | {_cell(f.default) or '—'} | {_cell(f.description)} |" for f in iter_fields(schema)
    )
    return "\n".join(out) + "\n"


def _markers(text: str) -> tuple[int, int]:
    start, end = text.find(BEGIN_FIELDS), text.find(END_FIELDS)
    if start < 0 or end < start:
        msg = f"expected {BEGIN_FIELDS!r} followed by {END_FIELDS!r}"
        raise ValueError(msg)
    return start + len(BEGIN_FIELDS), end


def splice_fields(text: str, fields: str) -> str:
    """Return *text* with the part between the markers replaced by *fields*.

    Raises:
        ValueError: The markers are missing or out of order.
    """
    start, end = _markers(text)
    return f"{text[:start]}\n{fields.strip()}\n{text[end:]}"


# --- python -m toolflow._docgen ---------------------------------------------------


def _default_docs() -> Path:
    return Path(__file__).resolve().parent.parent / "docs"


def main(argv: Sequence[str] | None = None) -> int:
    """Rewrite ``docs/rules.md`` and the field table of ``docs/spec-reference.md``; return an exit code.

    With ``--check`` nothing is written, and the exit code is 1 when a file is stale.
    """
    from toolflow._lint.rules import builtin_rules  # noqa: PLC0415 - only the generator needs every rule
    from toolflow._schemas import spec_schema  # noqa: PLC0415

    parser = argparse.ArgumentParser(prog="python -m toolflow._docgen", description=main.__doc__)
    parser.add_argument("--docs", type=Path, default=_default_docs(), help="the docs directory (default: %(default)s)")
    parser.add_argument("--check", action="store_true", help="only report stale files; exit 1 if any")
    args = parser.parse_args(argv)
    docs: Path = args.docs
    reference = docs / "spec-reference.md"
    try:
        current = reference.read_text(encoding="utf-8")
        wanted = {
            docs / "rules.md": render_rules(builtin_rules()),
            reference: splice_fields(current, render_spec_fields(spec_schema())),
        }
    except (OSError, ValueError) as exc:
        print(f"{reference}: {exc}", file=sys.stderr)
        return 2
    stale = 0
    for path, text in wanted.items():
        old = path.read_text(encoding="utf-8") if path.exists() else None
        if old == text:
            continue
        stale += 1
        if args.check:
            print(f"{path} is out of date; run python -m toolflow._docgen", file=sys.stderr)
        else:
            path.write_text(text, encoding="utf-8")
            print(f"rewrote {path}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
