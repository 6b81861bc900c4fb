"""``toolflow graph``: the tools of the specs, their pipelines' steps and their ``depends_on`` rules, drawn.

The drawing is Mermaid (for a README or a pull request, which GitHub renders) or Graphviz DOT. It
reads the specs as ``toolflow list`` does, from the loader alone: like ``toolflow lint``, it
imports neither trio nor the engine nor any plugin's implementation. The output depends only on
the specs: nodes sorted by name, a pipeline's edges in its steps' order, the pipelines sorted by
name, then the ``depends_on`` edges sorted. A string from ``${...}`` shows as its reference.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterable, Mapping
from typing import Any, TextIO

import attrs

from toolflow._cli_support import spec_paths
from toolflow._loader import load_specs
from toolflow._model import ToolSpec
from toolflow._provenance import masked

__all__ = ["GRAPH_FORMATS", "Edge", "Node", "command", "render", "tool_graph"]

GRAPH_FORMATS = ("mermaid", "dot")


@attrs.frozen(kw_only=True)
class Node:
    """A tool: its name, category and kind, whether models are offered it, whether the specs declare it."""

    name: str
    category: str = ""
    kind: str = ""
    exposed: bool = True
    declared: bool = True

    @property
    def details(self) -> str:
        """The second line of the node's label: ``dangerous, pipeline, not exposed``."""
        if not self.declared:
            return "not declared"
        parts = [
            self.category,
            *(["pipeline"] if self.kind == "pipeline" else []),
            *([] if self.exposed else ["not exposed"]),
        ]
        return ", ".join(parts)


@attrs.frozen(kw_only=True)
class Edge:
    """A pipeline's step (solid, labelled with the step) or a ``depends_on`` rule (dashed)."""

    source: str
    target: str
    label: str = ""
    dependency: bool = False


def tool_graph(tools: Iterable[ToolSpec]) -> tuple[tuple[Node, ...], tuple[Edge, ...]]:
    """The nodes and edges of *tools*; a tool named by a step or a ``depends_on`` but not declared is a node too.

    A tool declared twice is drawn once, as its first declaration says (the loader's order).
    """
    specs: dict[str, ToolSpec] = {}
    for spec in tools:
        specs.setdefault(masked(spec.name), spec)
    steps: list[Edge] = []
    dependencies: list[Edge] = []
    for name in sorted(specs):
        spec = specs[name]
        pipeline = spec.pipeline
        steps.extend(
            Edge(source=name, target=masked(step.tool), label=_step_label(step.name, step.for_each, step.when))
            for step in (pipeline.steps if pipeline is not None else ())
        )
        for rule in spec.depends_on:
            label = "session" if rule.scope == "session" else ""
            dependencies.append(Edge(source=name, target=masked(rule.tool), label=label, dependency=True))
    dependencies.sort(key=lambda edge: (edge.source, edge.target, edge.label))
    edges = (*steps, *dependencies)
    nodes = [_node(spec) for spec in specs.values()]
    nodes += [Node(name=name, declared=False) for name in {e.target for e in edges} - specs.keys()]
    return tuple(sorted(nodes, key=lambda node: node.name)), edges


def _node(spec: ToolSpec) -> Node:
    kind = spec.implementation.kind if spec.implementation is not None else ""
    return Node(name=masked(spec.name), category=masked(spec.category), kind=kind, exposed=spec.expose)


_SINGLE_EXPRESSION = re.compile(r"\s*\{\{(?P<expression>(?:(?!\{\{|\}\}).)*)\}\}\s*", re.DOTALL)


def _step_label(step: str, for_each: Any, when: Any) -> str:
    """``notes, for_each steps.order.items``: the step's name, then what repeats or guards it."""
    label = step
    for keyword, value in (("for_each", for_each), ("when", when)):
        if value is not None:
            label += f", {keyword} {_expression(value)}"
    return label


def _expression(value: Any) -> str:
    """A ``for_each`` or ``when`` value as a label shows it: the expression of ``{{ ... }}``, on one line, short.

    Here and in every name, a string from ``${...}`` shows its reference (``masked``), never its value.
    """
    shown = masked(value)
    text = shown if isinstance(shown, str) else repr(shown)
    match = _SINGLE_EXPRESSION.fullmatch(text)
    text = " ".join((match["expression"] if match else text).split())
    return text if len(text) <= 60 else text[:57] + "..."


def render(nodes: Iterable[Node], edges: Iterable[Edge], graph_format: str) -> str:
    """The graph in *graph_format* (``mermaid`` or ``dot``), ending with a newline."""
    return _mermaid(tuple(nodes), tuple(edges)) if graph_format == "mermaid" else _dot(tuple(nodes), tuple(edges))


def _ids(nodes: tuple[Node, ...]) -> Mapping[str, str]:
    """A node id per tool name, the same in both languages: ``t_`` and the name's word characters.

    Generated, because a tool may be called ``end`` (a Mermaid keyword) or have any character in
    its name (a DOT quoted string cannot end with a backslash); numbered when two collide.
    """
    ids: dict[str, str] = {}
    taken: set[str] = set()
    for node in nodes:
        base = "t_" + re.sub(r"\W", "_", node.name, flags=re.ASCII)
        candidate, number = base, 1
        while candidate in taken:
            number += 1
            candidate = f"{base}_{number}"
        taken.add(candidate)
        ids[node.name] = candidate
    return ids


# Mermaid: a label is quoted; inside it, what Mermaid or its HTML labels would read is an entity code.
_MERMAID_ESCAPES = str.maketrans(
    {
        "#": "#35;",
        '"': "#quot;",
        "&": "#amp;",
        "<": "#lt;",
        ">": "#gt;",
        "|": "#124;",
        "`": "#96;",
        "\n": " ",
        "\r": " ",
    }
)


def _mermaid_text(text: str) -> str:
    return text.translate(_MERMAID_ESCAPES)


def _mermaid(nodes: tuple[Node, ...], edges: tuple[Edge, ...]) -> str:
    ids = _ids(nodes)
    lines = ["flowchart LR"]
    for node in nodes:
        label = f'"{_mermaid_text(node.name)}<br/>{_mermaid_text(node.details)}"'
        shape = f"[[{label}]]" if node.kind == "pipeline" else f"({label})" if not node.declared else f"[{label}]"
        style = ":::missing" if not node.declared else "" if node.exposed else ":::hidden"
        lines.append(f"  {ids[node.name]}{shape}{style}")
    for edge in edges:
        arrow = "-.->" if edge.dependency else "-->"
        label = f'|"{_mermaid_text(edge.label)}"|' if edge.label else ""
        lines.append(f"  {ids[edge.source]} {arrow}{label} {ids[edge.target]}")
    if any(not node.exposed for node in nodes):
        lines.append("  classDef hidden stroke-dasharray: 4 4")
    if any(not node.declared for node in nodes):
        lines.append("  classDef missing stroke:#c00,color:#c00")
    return "\n".join(lines) + "\n"


# DOT: labels are HTML-like (`<...>`), where only entities are special: a quoted string's
# backslash escapes (`\n`, `\N`, a closing `\"`) never apply to a tool's name.
_DOT_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "\n": " ", "\r": " "})


def _dot_text(text: str) -> str:
    return text.translate(_DOT_ESCAPES)


def _dot(nodes: tuple[Node, ...], edges: tuple[Edge, ...]) -> str:
    ids = _ids(nodes)
    lines = ["digraph toolflow {", "  rankdir=LR;", "  node [shape=box];"]
    for node in nodes:
        attributes = [f"label=<{_dot_text(node.name)}<br/>{_dot_text(node.details)}>"]
        if node.kind == "pipeline":
            attributes.append("peripheries=2")
        if not node.declared:
            attributes.append("style=dotted")
        elif not node.exposed:
            attributes.append("style=dashed")
        lines.append(f"  {ids[node.name]} [{', '.join(attributes)}];")
    for edge in edges:
        attributes = [
            *(["style=dashed"] if edge.dependency else []),
            *([f"label=<{_dot_text(edge.label)}>"] if edge.label else []),
        ]
        suffix = f" [{', '.join(attributes)}]" if attributes else ""
        lines.append(f"  {ids[edge.source]} -> {ids[edge.target]}{suffix};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def command(args: argparse.Namespace, loading: Mapping[str, Any], stdout: TextIO, stderr: TextIO) -> int:
    """Run ``toolflow graph`` with parsed *args* and what the loader needs of the plugins; 1 on a load error.

    As ``toolflow list``: the loader's diagnostics go to standard error, and what loaded is drawn.
    """
    result = load_specs(spec_paths(args.paths), **loading)
    for diagnostic in result.diagnostics:
        print(diagnostic.render(), file=stderr)
    nodes, edges = tool_graph(result.tools)
    stdout.write(render(nodes, edges, args.format))
    return 0 if result.ok else 1
