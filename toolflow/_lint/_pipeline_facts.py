"""What the pipeline rules need to know about a tool's pipeline, gathered once per tool.

A pipeline's templated strings are its steps' ``with:`` values (at any depth), ``when:`` and
``for_each:``, and its ``result:``. For each, :func:`pipeline_strings` gives whether it compiles
(TF215), its free variables (TF231) and its reads of ``steps`` and ``errors``, with the constant
attribute names and indexes each read follows (TF228, and through the project summary TF232,
TF234 and TF235). :func:`read_span` finds a read's token inside the spec file's text, so that a
diagnostic points at ``cusomer_id`` in ``"{{ steps.order.cusomer_id }}"`` rather than at the
whole string.

Jinja2 is imported here: callers import this module only when a tool has a pipeline.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Mapping

import attrs
import jinja2
import jinja2.nodes

from toolflow._diagnostics import Diagnostic, Span
from toolflow._lint._memo import ToolMemo
from toolflow._lint._template_facts import analyse_source
from toolflow._model import Pipeline, SpecFile, ToolSpec
from toolflow._templates import TemplateProblem, parse_template, single_expression
from toolflow._yaml import NodeLocator

__all__ = [
    "PipelineString",
    "Read",
    "iter_pipelines",
    "moved",
    "name_span",
    "pipeline_strings",
    "read_pattern",
    "read_span",
    "string_span",
]

STEP_ROOTS = ("steps", "errors")
"""The variables through which a pipeline's templates read its steps."""


@attrs.frozen(kw_only=True)
class Read:
    """One read of a step: ``steps.order.items[0].sku`` is root ``steps``, step ``order``, path ``("items", 0, "sku")``.

    The path stops at the first part computed at run time (``steps.order[key]``) and leaves out a
    method called on the value (``steps.order.get('x')``).
    """

    root: str
    step: str | None
    """The step's name; ``None`` when the template picks it at run time (``steps[name]``)."""
    path: tuple[str | int, ...] = ()
    line: int = 1
    complete: bool = True
    """False when the chain went on with parts computed at run time (so *path* is only its start)."""


@attrs.frozen(kw_only=True)
class PipelineString:
    """One templated string of a pipeline: where it is and what it reads."""

    step: str | None
    """The step whose string it is; ``None`` for the pipeline's ``result:``."""
    key: str
    """``with``, ``when``, ``for_each`` or ``result``."""
    pointer: str
    source: str
    problems: tuple[TemplateProblem, ...]
    variables: frozenset[str]
    """Its free variables (template globals left out); empty when it has problems."""
    reads: tuple[Read, ...]
    chain: Read | None
    """The read, when the string is exactly one ``{{ steps.NAME... }}`` made of constant parts."""


_memo: ToolMemo[tuple[PipelineString, ...]] = ToolMemo()


def iter_pipelines(files: Iterable[SpecFile]) -> Iterator[tuple[str, ToolSpec, Pipeline]]:
    """``(file text, tool, pipeline)`` of each tool of *files* that is a pipeline."""
    for spec_file in files:
        for tool in spec_file.tools:
            pipeline = tool.pipeline
            if pipeline is not None:
                yield spec_file.text, tool, pipeline


def pipeline_strings(tool: ToolSpec) -> tuple[PipelineString, ...]:
    """Every templated string of *tool*'s pipeline (none when it has no pipeline)."""
    return _memo.get(tool, "pipeline", lambda: tuple(_collect(tool.pipeline)))


def _collect(pipeline: Pipeline | None) -> Iterator[PipelineString]:
    if pipeline is None:
        return
    for step in pipeline.steps:
        for key, value in (("with", step.arguments), ("when", step.when), ("for_each", step.for_each)):
            for pointer, source in _strings(value, f"{step.pointer}/{key}"):
                yield _string(step.name, key, pointer, source)
    if pipeline.has_result:
        for pointer, source in _strings(pipeline.result, f"{pipeline.pointer}/result"):
            yield _string(None, "result", pointer, source)


def _strings(value: object, pointer: str) -> Iterator[tuple[str, str]]:
    """``(JSON pointer, string)`` of every string in *value*, at any depth."""
    if isinstance(value, str):
        yield pointer, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _strings(item, f"{pointer}/{str(key).replace('~', '~0').replace('/', '~1')}")
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _strings(item, f"{pointer}/{index}")


def _string(step: str | None, key: str, pointer: str, source: str) -> PipelineString:
    problems, variables, _ = analyse_source(source)
    reads: tuple[Read, ...] = ()
    chain = None
    if not problems and "{" in source:
        reads, chain = _reads(source)
    return PipelineString(
        step=step,
        key=key,
        pointer=pointer,
        source=source,
        problems=problems,
        variables=variables,
        reads=reads,
        chain=chain,
    )


@functools.lru_cache(maxsize=1024)
def _reads(source: str) -> tuple[tuple[Read, ...], Read | None]:
    """The reads of steps in *source*, and the read it is made of when it is exactly one."""
    tree = parse_template(source)
    if isinstance(tree, TemplateProblem):
        return (), None
    called = {id(call.node) for call in tree.find_all(jinja2.nodes.Call)}
    seen: set[int] = set()
    reads: list[Read] = []
    for node in tree.find_all((jinja2.nodes.Getattr, jinja2.nodes.Getitem, jinja2.nodes.Name)):
        if id(node) not in seen:
            read = _read(node, seen, called)
            if read is not None:
                reads.append(read)
    expression = single_expression(tree)
    chain = None
    if isinstance(expression, jinja2.nodes.Getattr | jinja2.nodes.Getitem | jinja2.nodes.Name):
        chain = _read(expression, set(), called)
        if chain is not None and (chain.step is None or not chain.complete):
            chain = None
    return tuple(reads), chain


def _read(node: jinja2.nodes.Node, seen: set[int], called: set[int]) -> Read | None:
    """The read an outermost look-up chain makes, marking its inner nodes as seen."""
    parts: list[str | int | None] = []
    method = id(node) in called and isinstance(node, jinja2.nodes.Getattr)
    current = node
    while isinstance(current, jinja2.nodes.Getattr | jinja2.nodes.Getitem):
        seen.add(id(current))
        if isinstance(current, jinja2.nodes.Getattr):
            parts.append(current.attr)
        elif isinstance(current.arg, jinja2.nodes.Const) and isinstance(current.arg.value, str | int):
            parts.append(current.arg.value)
        else:
            parts.append(None)  # computed at run time
        current = current.node
    if not isinstance(current, jinja2.nodes.Name) or current.name not in STEP_ROOTS or current.ctx != "load":
        return None
    seen.add(id(current))
    parts.reverse()
    if method:
        parts.pop()  # the method's name, not a field: `steps.order.get('x')`
    step = parts[0] if parts and isinstance(parts[0], str) else None
    path: list[str | int] = []
    complete = True
    for part in parts[1:]:
        if part is None:
            complete = False
            break
        path.append(part)
    return Read(root=current.name, step=step, path=tuple(path), line=node.lineno or 1, complete=complete)


# --- positions inside the file ------------------------------------------------------------------


@functools.lru_cache(maxsize=4)
def _lines(text: str) -> list[str]:
    return text.splitlines()


def string_span(text: str, tool: ToolSpec, pointer: str, line: int, pattern: str) -> Span | None:
    """The span of *pattern*'s group ``at`` or ``at2`` (or whole match) in the string at *pointer*, on its *line*.

    Searched in the file's text, from the string's line *line* (1-based within the string) to the
    string's end; ``None`` when the file has no text or node locator, or the pattern is not
    found there (an escaped quote, a string folded over several lines).
    """
    locator = tool.locator
    if not text or not isinstance(locator, NodeLocator):
        return None
    start = locator.value_position(pointer, line)
    if start is None:
        return None
    whole = locator.locate(pointer)
    lines = _lines(text)
    compiled = re.compile(pattern)
    for number in range(start[0], min(whole.end_line, len(lines)) + 1):
        first = start[1] - 1 if number == start[0] else 0
        last = whole.end_column - 1 if number == whole.end_line else len(lines[number - 1])
        match = compiled.search(lines[number - 1], first, max(first, last))
        if match is not None:
            group = next((g for g in ("at", "at2") if g in compiled.groupindex and match.group(g) is not None), 0)
            return Span(line=number, column=match.start(group) + 1, end_line=number, end_column=match.end(group) + 1)
    return None


def _part(part: str | int) -> str:
    """A regex of one look-up: ``.name``, ``['name']``, ``["name"]`` or ``[0]``."""
    if isinstance(part, int):
        return rf"\[\s*{part}\s*\]"
    name = re.escape(part)
    return rf"(?:\.\s*{name}\b|\[\s*['\"]{name}['\"]\s*\])"


def read_pattern(read: Read, upto: int) -> str:
    """A regex of *read* whose group ``at`` is its step's name (*upto* 0) or its path's part ``upto - 1``."""
    parts: list[str | int] = [read.step or "", *read.path][: upto + 1]
    pieces = [rf"(?<![\w.]){re.escape(read.root)}"]
    for index, part in enumerate(parts):
        piece = _part(part)
        if index == upto and isinstance(part, int):
            piece = rf"\[\s*(?P<at>{part})\s*\]"
        elif index == upto:
            name = re.escape(str(part))
            piece = rf"(?:\.\s*(?P<at>{name})\b|\[\s*['\"](?P<at2>{name})['\"]\s*\])"
        pieces.append(r"\s*" + piece)
    return "".join(pieces)


def read_span(text: str, tool: ToolSpec, string: PipelineString, read: Read, upto: int) -> Span | None:
    """Where the step name (*upto* 0) or a path part of *read* is written, when it can be found."""
    return string_span(text, tool, string.pointer, read.line, read_pattern(read, upto))


def name_span(text: str, tool: ToolSpec, string: PipelineString, name: str) -> Span | None:
    """Where the variable *name* is first read in *string*."""
    return string_span(text, tool, string.pointer, 1, rf"(?<![\w.])(?P<at>{re.escape(name)})\b")


def moved(diagnostic: Diagnostic, span: Span | None) -> Diagnostic:
    """*diagnostic* at *span* (found inside its string); as it is when *span* is ``None``."""
    if span is None:
        return diagnostic
    return attrs.evolve(
        diagnostic, line=span.line, column=span.column, end_line=span.end_line, end_column=span.end_column
    )
