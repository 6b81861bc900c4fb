"""What the lint rules need to know about a tool's templates, gathered once per tool.

A tool's templates are its ``template:`` source and each item of its
``command:`` argv. TF215 (syntax) and TF216 (undeclared variables) both read
the facts gathered here. The facts of a tool are kept while the tool lives, and
each distinct template text is parsed once however many tools use it (argv
items such as ``--query={{ query }}`` recur across tools).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import attrs
import jinja2
import jinja2.nodes

from toolflow._lint._memo import ToolMemo
from toolflow._model import ToolSpec
from toolflow._schemas import did_you_mean
from toolflow._template_guards import simple_pieces
from toolflow._templates import TemplateProblem, compile_template, environment, parse_template, template_variables
from toolflow._yaml import NodeLocator

__all__ = ["TemplateFacts", "analyse_source", "file_position", "template_facts"]


@attrs.frozen(kw_only=True)
class TemplateFacts:
    """One template of a tool: where it is, whether it compiles, and what it reads.

    ``variables`` and ``env_reads`` are empty when the template has problems.
    ``env_listed`` is the template's ``env:`` list (empty for the string form),
    or ``None`` for command items, whose environment names are not declared.
    """

    label: str
    """How messages name the template: ``template`` or ``argv[1]``."""
    pointer: str
    """JSON pointer of the string value."""
    source: str
    problems: tuple[TemplateProblem, ...]
    variables: frozenset[str]
    env_reads: tuple[str, ...]
    """Names read as ``env.NAME`` or ``env['NAME']``, in order of appearance."""
    env_listed: frozenset[str] | None


_memo: ToolMemo[tuple[TemplateFacts, ...]] = ToolMemo()


def template_facts(tool: ToolSpec) -> tuple[TemplateFacts, ...]:
    """Return the facts of every template of *tool* (none for an ``implementation:`` tool)."""
    return _memo.get(tool, "templates", lambda: tuple(_collect(tool)))


def _collect(tool: ToolSpec) -> Iterator[TemplateFacts]:
    for impl in tool.implementations:
        config = impl.config
        if not isinstance(config, dict):
            continue
        mapping_form = _is_mapping(tool, impl.pointer)
        if impl.kind == "template" and isinstance(config.get("source"), str):
            pointer = f"{impl.pointer}/source" if mapping_form else impl.pointer
            listed = frozenset(n for n in config.get("env", ()) if isinstance(n, str))
            yield _facts("template", pointer, config["source"], listed)
        elif impl.kind == "command" and isinstance(config.get("argv"), list):
            base = f"{impl.pointer}/argv" if mapping_form else impl.pointer
            for i, item in enumerate(config["argv"]):
                if isinstance(item, str):
                    yield _facts(f"argv[{i}]", f"{base}/{i}", item, None)


def _facts(label: str, pointer: str, source: str, listed: frozenset[str] | None) -> TemplateFacts:
    problems, variables, env_reads = _analyse(source)
    return TemplateFacts(
        label=label,
        pointer=pointer,
        source=source,
        problems=problems,
        variables=variables,
        env_reads=env_reads,
        env_listed=listed,
    )


def _is_mapping(tool: ToolSpec, pointer: str) -> bool:
    if not isinstance(tool.locator, NodeLocator):
        return False
    return tool.locator.kind(pointer) == "mapping"


Analysis = tuple[tuple[TemplateProblem, ...], frozenset[str], tuple[str, ...]]

_PLAIN: Analysis = ((), frozenset(), ())

_SIMPLE_STATEMENTS = (jinja2.nodes.Output, jinja2.nodes.If, jinja2.nodes.ExprStmt)
"""Statements that bind no names: in a tree of only these, every name read is a free variable."""

_BLOCKS = (
    jinja2.nodes.If,
    jinja2.nodes.For,
    jinja2.nodes.Macro,
    jinja2.nodes.CallBlock,
    jinja2.nodes.FilterBlock,
    jinja2.nodes.With,
    jinja2.nodes.Block,
    jinja2.nodes.ScopedEvalContextModifier,
)
"""Statements with a body: each nests the Python code Jinja generates for what it holds."""

_CHECKED_LOOPS = 16
_CHECKED_BLOCKS = 64
# Python refuses code nested more than 20 loops or 100 indentation levels deep, and Jinja's code
# for a template nests about as deep as its blocks do (21 nested `for`s, or 99 nested `if`s,
# fail to compile). A template with fewer loops and blocks than these in all cannot nest that
# deep; one with more is compiled, as the tool's first call would, to find out.


@functools.lru_cache(maxsize=4096)
def _analyse(source: str) -> Analysis:
    """Problems, free variables and ``env`` reads of *source*; the same text in many tools is analysed once."""
    if "{{" not in source and "{%" not in source and "{#" not in source:
        return _PLAIN  # no Jinja syntax at all: plain text, as most argv items are
    simple = _simple(source)
    if simple is not None:
        return simple
    try:
        return _analyse_tree(source)
    except RecursionError:
        # Jinja's parser and code generator recurse once per nesting level.
        return (TemplateProblem(message="the template nests too deeply", line=1),), frozenset(), ()


def analyse_source(source: str) -> Analysis:
    """Problems, free variables (template globals left out) and ``env`` reads of the template *source*.

    What :func:`template_facts` gives of each template, for templates that are not a tool's own
    (a pipeline's strings).
    """
    return _analyse(source)


def _simple(source: str) -> Analysis | None:
    """The analysis of a template made of text, ``{{ name }}`` and plain ``{% if %}`` blocks, else None.

    Outputs are a name with attributes (``{{ name }}``, ``{{ env.HOME }}``); conditions are such a
    name, maybe after ``not`` and before ``is defined`` or ``is not defined``; blocks are balanced
    ``if``/``elif``/``else``/``endif``. Such templates (most argv items, and most templates tools
    declare) compile as long as they are balanced, and their free variables are the names they
    read, so Jinja's parser, several times slower, has nothing to add. Anything else: ``None``.
    ``tests/lint/test_template_fast_path.py`` checks the answers against the parser's.
    """
    pieces = simple_pieces(source)
    if pieces is None:
        return None
    names: set[str] = set()
    env_reads: list[str] = []
    for match in pieces:
        name, attribute = match["name"], match["attribute"]
        if name is None:
            continue
        names.add(name)
        if name == "env" and attribute is not None and attribute not in env_reads:
            env_reads.append(attribute)
    return (), frozenset(names - environment().globals.keys() - {"self"}), tuple(env_reads)


@attrs.define
class _Scan:
    """What one walk over a parsed template finds."""

    problems: list[TemplateProblem] = attrs.field(factory=list)
    env_reads: list[str] = attrs.field(factory=list)
    names: set[str] = attrs.field(factory=set)
    simple: bool = True
    """Only statements that bind no names (see ``_SIMPLE_STATEMENTS``)."""
    loops: int = 0
    blocks: int = 0

    def visit(self, node: jinja2.nodes.Node, env: jinja2.Environment) -> None:
        if isinstance(node, _BLOCKS):
            self.blocks += 1
            self.loops += isinstance(node, jinja2.nodes.For)
        if isinstance(node, jinja2.nodes.Name):
            self.names.add(node.name)
        elif isinstance(node, jinja2.nodes.Filter | jinja2.nodes.Test):
            kind, known = ("filter", env.filters) if isinstance(node, jinja2.nodes.Filter) else ("test", env.tests)
            if node.name not in known:
                hint = did_you_mean(node.name, sorted(known))
                self.problems.append(TemplateProblem(message=f"unknown {kind} {node.name!r}{hint}", line=node.lineno))
        elif isinstance(node, jinja2.nodes.Getattr | jinja2.nodes.Getitem):
            if isinstance(node.node, jinja2.nodes.Name) and node.node.name == "env":
                name = _env_name(node)
                if name is not None and name not in self.env_reads:
                    self.env_reads.append(name)
        elif isinstance(node, jinja2.nodes.Stmt) and not isinstance(node, _SIMPLE_STATEMENTS):
            self.simple = False


def _analyse_tree(source: str) -> Analysis:
    tree = parse_template(source)
    if isinstance(tree, TemplateProblem):
        return (tree,), frozenset(), ()
    env = environment()
    scan = _Scan()
    for node in tree.find_all(jinja2.nodes.Node):
        scan.visit(node, env)
    if scan.problems:
        return tuple(scan.problems), frozenset(), ()
    env_reads = scan.env_reads
    if scan.loops >= _CHECKED_LOOPS or scan.blocks >= _CHECKED_BLOCKS:
        compiled = compile_template(source)
        if isinstance(compiled, TemplateProblem):
            return (compiled,), frozenset(), ()
    if scan.simple:
        # Jinja's own analysis runs its code generator, several times slower than the
        # parse; without loops, assignments, macros or blocks it has nothing to add.
        return (), frozenset(scan.names - env.globals.keys() - {"self"}), tuple(env_reads)
    try:
        variables = template_variables(tree)
    except jinja2.TemplateError as exc:
        # The code generator refuses some trees that parse; that is a compile error like any other.
        line = getattr(exc, "lineno", None) or 1
        return (TemplateProblem(message=exc.message or "template error", line=line),), frozenset(), ()
    return (), frozenset(variables), tuple(env_reads)


def _env_name(node: jinja2.nodes.Getattr | jinja2.nodes.Getitem) -> str | None:
    """The name of an ``env.NAME`` or ``env['NAME']`` read; ``None`` when computed at run time."""
    if isinstance(node, jinja2.nodes.Getattr):
        return node.attr
    if isinstance(node.arg, jinja2.nodes.Const) and isinstance(node.arg.value, str):
        return node.arg.value
    return None


def file_position(tool: ToolSpec, pointer: str, line_in_template: int) -> tuple[int, int] | None:
    """Map a 1-based line of the template at *pointer* to a line and column of the spec file.

    A flow scalar written on one line can still hold several template lines
    (through quoted newline escapes); they all map to its start. ``None`` when the tool
    has no node locator.
    """
    locator = tool.locator
    if not isinstance(locator, NodeLocator):
        return None
    return locator.value_position(pointer, line_in_template)
