"""Finding tool calls in a model's text: fenced code blocks, and the text protocol's tags and template.

The ``fallback`` and ``text`` history formats (:mod:`toolflow._history`) read calls that a
model wrote into its answer. Both treat fenced code blocks as examples, not calls
(:func:`fences`, :func:`blank_spans`, :func:`remove_spans`); the ``text`` format finds its
``<tool_call>`` blocks with :func:`tool_call_blocks` and writes its ``## Tool-Use Protocol``
section from a template checked by :func:`compile_protocol`. Nothing here raises on what a
model wrote.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator, Sequence

import attrs

from toolflow._errors import UsageError
from toolflow._schemas import did_you_mean
from toolflow._templates import (
    TEMPLATE_GLOBALS,
    CompiledTemplate,
    TemplateProblem,
    compile_template,
    parse_template,
    template_variables,
)

__all__ = [
    "DEFAULT_TEXT_PROTOCOL_TEMPLATE",
    "TEXT_PROTOCOL_TIMEOUT",
    "TEXT_PROTOCOL_VARIABLES",
    "blank_spans",
    "compile_protocol",
    "default_protocol",
    "fences",
    "remove_spans",
    "tool_call_blocks",
]

_DECODER = json.JSONDecoder()

# --------------------------------------------------------------------------- fenced code blocks

# A fence opens on a line of three or more backticks or tildes, indented any amount (Markdown allows
# three spaces; list items indent further, and a fence there is an example all the same). A backtick
# fence's info string has no backtick (else the line is inline code), and the fence closes at a line
# of at least as many of the same character and nothing else, or at the end of the text.
_FENCE_LINE = re.compile(r"[ \t]*(?P<fence>`{3,}|~{3,})(?P<info>[^\n]*)")


@attrs.frozen(kw_only=True)
class _Fence:
    start: int
    end: int
    info: str
    body: str


@attrs.frozen(kw_only=True)
class _FenceLine:
    start: int
    end: int
    fence: str
    info: str


def _fence_lines(text: str) -> Iterator[_FenceLine]:
    """Lines that start (after blanks) with a fence, in order.

    Found with ``str.find`` (a line-anchored regular expression search costs microseconds per
    kilobyte); only a line's first mark can start a fence, so the search moves on line by line.
    """
    starts: set[int] = set()
    for mark in ("```", "~~~"):
        pos = text.find(mark)
        while pos != -1:
            start = text.rfind("\n", 0, pos) + 1
            if not text[start:pos].strip(" \t"):
                starts.add(start)
            newline = text.find("\n", pos)
            pos = -1 if newline == -1 else text.find(mark, newline)
    for start in sorted(starts):
        line = _FENCE_LINE.match(text, start)
        if line is not None:
            yield _FenceLine(start=start, end=line.end(), fence=line["fence"], info=line["info"].strip())


def fences(text: str) -> Iterator[_Fence]:
    """The fenced code blocks of *text*, in order; an unclosed fence runs to the end of *text*."""
    if "```" not in text and "~~~" not in text:
        return
    opening: _FenceLine | None = None
    for line in _fence_lines(text):
        if opening is None:
            if not (line.fence[0] == "`" and "`" in line.info):
                opening = line
        elif line.fence[0] == opening.fence[0] and len(line.fence) >= len(opening.fence) and not line.info:
            body = text[opening.end + 1 : line.start]
            yield _Fence(start=opening.start, end=line.end, info=opening.info, body=body)
            opening = None
    if opening is not None:
        yield _Fence(start=opening.start, end=len(text), info=opening.info, body=text[opening.end + 1 :])


def remove_spans(text: str, spans: Sequence[tuple[int, int]]) -> str:
    """*text* without the (ordered, disjoint) *spans*, stripped."""
    if not spans:
        return text.strip()
    parts = []
    pos = 0
    for start, end in spans:
        parts.append(text[pos:start])
        pos = end
    parts.append(text[pos:])
    return "".join(parts).strip()


def blank_spans(text: str, spans: Sequence[tuple[int, int]]) -> str:
    """*text* with the (ordered, disjoint) *spans* overwritten by spaces, line breaks kept, so offsets stay true."""
    if not spans:
        return text
    parts = []
    pos = 0
    for start, end in spans:
        parts.append(text[pos:start])
        parts.append("\n".join(" " * len(line) for line in text[start:end].split("\n")))
        pos = end
    parts.append(text[pos:])
    return "".join(parts)


# --------------------------------------------------------------------------- the text protocol

DEFAULT_TEXT_PROTOCOL_TEMPLATE = """\
## Tool-Use Protocol

You can call the tools listed below. To call one, write a block like this in your answer:

<tool_call>{"name": "TOOL_NAME", "args": {"PARAMETER": "VALUE"}}</tool_call>

- A block holds one JSON object: "name" is the tool's name and "args" an object of its arguments.
- Write one block per call; the calls of one answer run in order.
- Blocks inside fenced code blocks (``` or ~~~) are examples: they are not run.
- The results come back in the next user message, one block per call, in the same order:
  <tool_result name="TOOL_NAME">{"success": true, "data": ...}</tool_result>
  A failed call's result has "success": false and an "error" saying what went wrong.
- When you need no more tools, answer without any <tool_call> block: that answer is final.

### Tools
{% for tool in tools %}
#### {{ tool.name }}
{% if tool.description %}
{{ tool.description }}
{% endif %}
Parameters (JSON Schema): {{ tool.parameters_json }}
{% endfor %}"""
"""The built-in ``## Tool-Use Protocol`` section of the ``text`` format (a Jinja2 template)."""

TEXT_PROTOCOL_VARIABLES = frozenset({"tools"})
"""The variables a text protocol template sees (besides Jinja's ``range``, ``dict``, ``namespace``, ...).

``tools`` is a list with one mapping per tool: ``name``, ``description``, ``parameters`` (the
JSON Schema as sent to models), ``parameters_json`` (that schema as one line of JSON, in its
own key order) and ``category``.
"""

TEXT_PROTOCOL_TIMEOUT = 30.0
"""Seconds the text protocol template may take to render (in a template worker, under the per-render budget)."""

_TEMPLATE_NAMES = TEXT_PROTOCOL_VARIABLES | (TEMPLATE_GLOBALS - {"env"})
_OPEN_TAG = re.compile(r"<tool_call\s*>")
_CLOSE_TAG = re.compile(r"</tool_call\s*>")
_NOT_BLANK = re.compile(r"\S")


def _template_problem(problem: TemplateProblem) -> str:
    return f"text protocol template does not compile: line {problem.line}: {problem.message}"


def compile_protocol(source: str) -> CompiledTemplate:
    """Compile a text protocol template, checking the variables it reads.

    Raises:
        UsageError: The template does not compile, or reads a variable it is not given.
    """
    tree = parse_template(source)
    if isinstance(tree, TemplateProblem):
        raise UsageError(_template_problem(tree))
    compiled = compile_template(source)
    if isinstance(compiled, TemplateProblem):
        raise UsageError(_template_problem(compiled))
    unknown = sorted(template_variables(tree) - _TEMPLATE_NAMES)
    if unknown:
        names = ", ".join(repr(name) for name in unknown)
        msg = f"text protocol template reads unknown variables {names}: it is given only 'tools'"
        raise UsageError(msg + did_you_mean(unknown[0], sorted(TEXT_PROTOCOL_VARIABLES)))
    return compiled


@functools.cache
def default_protocol() -> CompiledTemplate:
    """The built-in text protocol template, compiled on first use."""
    return compile_protocol(DEFAULT_TEXT_PROTOCOL_TEMPLATE)


def tool_call_blocks(content: str, searchable: str) -> Iterator[tuple[int, int, str]]:
    """``(start, end, body)`` of each ``<tool_call>`` block of *content*.

    Tags are looked for in *searchable*, *content* with its fenced blocks blanked out. Which
    blocks are calls is said in :meth:`toolflow._history.TextFormat.read_response`.
    """
    tags = list(_OPEN_TAG.finditer(searchable))
    # A block ends at the next tag at the latest (with no tags at all, the one limit is not used).
    limits = [*(after.start() for after in tags[1:]), len(content)]
    for tag, limit in zip(tags, limits, strict=False):
        close = _CLOSE_TAG.search(searchable, tag.end(), limit)
        if close is not None:
            yield tag.start(), close.end(), content[tag.end() : close.start()].strip()
            continue
        first = _NOT_BLANK.search(content, tag.end(), limit)
        if first is None or first.group() != "{":
            continue  # prose that mentions the tag
        # Decoded only up to the next tag, so text full of broken blocks costs linear time.
        body = content[first.start() : limit]
        try:
            _, length = _DECODER.raw_decode(body)
        except (ValueError, RecursionError):
            # Meant as a call but broken: parsing the rest tells the model what is wrong.
            length = len(body)
        yield tag.start(), first.start() + length, body[:length].strip()
