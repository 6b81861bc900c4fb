"""`toolflow graph`: the tools, their pipelines' steps and their `depends_on` rules, as Mermaid or DOT.

Real spec files in tmp_path, in-process through `toolflow._cli.run`. Graphviz is not a test
dependency: the DOT output is checked by a small parser of the subset the command writes.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from _cli_project import make_project, toolflow

SPECS = """\
toolflow: 1
tools:
  lookup_order:
    description: Look an order up.
    expose: false
    parameters: {type: object, properties: {order_id: {type: string, description: The id.}}}
    template: '{"items": []}'
  item_notes:
    description: Notes of an item.
    parameters: {type: object, properties: {sku: {type: string, description: The sku.}}}
    template: note
  refund_order:
    description: Refund an order.
    category: dangerous
    parameters: {type: object, properties: {order_id: {type: string, description: The id.}}}
    depends_on: [lookup_order, {tool: order_report, scope: session}, {tool: audit, scope: loop}]
    template: refunded
  order_report:
    description: Summarise an order.
    category: dangerous
    parameters: {type: object, properties: {order_id: {type: string, description: The id.}}}
    pipeline:
      steps:
        order:
          tool: lookup_order
          with: {order_id: "{{ order_id }}"}
        notes:
          for_each: "{{ steps.order['items'] }}"
          tool: item_notes
          with: {sku: "{{ item.sku }}"}
        refund:
          when: "{{ order_id == '42' }}"
          tool: refund_order
          with: {order_id: "{{ order_id }}"}
"""

MERMAID = """\
flowchart LR
  t_audit("audit<br/>not declared"):::missing
  t_item_notes["item_notes<br/>safe_chain"]
  t_lookup_order["lookup_order<br/>safe_chain, not exposed"]:::hidden
  t_order_report[["order_report<br/>dangerous, pipeline"]]
  t_refund_order["refund_order<br/>dangerous"]
  t_order_report -->|"order"| t_lookup_order
  t_order_report -->|"notes, for_each steps.order['items']"| t_item_notes
  t_order_report -->|"refund, when order_id == '42'"| t_refund_order
  t_refund_order -.-> t_audit
  t_refund_order -.-> t_lookup_order
  t_refund_order -.->|"session"| t_order_report
  classDef hidden stroke-dasharray: 4 4
  classDef missing stroke:#c00,color:#c00
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project with the specs above in specs/; the working directory."""
    return make_project(tmp_path, monkeypatch, SPECS)


_ID = r"t_\w+"
_LABEL = r"<[^<>]*(?:<br/>[^<>]*)?>"
_ATTRIBUTES = rf"(?: \[(?P<attributes>[a-z]+=(?:{_LABEL}|[a-z0-9]+)(?:, [a-z]+=(?:{_LABEL}|[a-z0-9]+))*)\])?"
_DOT_NODE = re.compile(rf"  (?P<node>{_ID}){_ATTRIBUTES};", re.ASCII)
_DOT_EDGE = re.compile(rf"  (?P<source>{_ID}) -> (?P<target>{_ID}){_ATTRIBUTES};", re.ASCII)
_DOT_ATTRIBUTE = re.compile(rf"([a-z]+)=({_LABEL}|[a-z0-9]+)")
_ENTITIES = {"&amp;": "&", "&lt;": "<", "&gt;": ">", "&quot;": '"'}


def _text(value: str) -> str:
    """An attribute's value; an HTML-like label as its text, entities decoded, `<br/>` a line break."""
    if not value.startswith("<"):
        return value
    assert not re.search(r"&(?!amp;|lt;|gt;|quot;)", value), f"unescaped & in {value}"
    return re.sub(r"&\w+;", lambda m: _ENTITIES[m[0]], value[1:-1].replace("<br/>", "\n"))


def parse_dot(text: str) -> tuple[dict[str, dict[str, str]], list[tuple[str, str, dict[str, str]]]]:
    """The nodes (by name: their label's first line) and edges of the DOT subset `toolflow graph` writes.

    Fails on any other statement, a node declared twice, an edge between undeclared nodes.
    """
    lines = text.splitlines()
    assert lines[:3] == ["digraph toolflow {", "  rankdir=LR;", "  node [shape=box];"], lines[:3]
    assert lines[-1] == "}"
    assert text.endswith("}\n")
    ids: dict[str, str] = {}
    nodes: dict[str, dict[str, str]] = {}
    edges: list[tuple[str, str, dict[str, str]]] = []
    for line in lines[3:-1]:
        edge, node = _DOT_EDGE.fullmatch(line), _DOT_NODE.fullmatch(line)
        assert edge or node, f"not a DOT statement: {line!r}"
        match = edge or node
        assert match is not None
        attributes = {k: _text(v) for k, v in _DOT_ATTRIBUTE.findall(match["attributes"] or "")}
        if edge:
            edges.append((ids[edge["source"]], ids[edge["target"]], attributes))
        else:
            assert match["node"] not in ids, f"node {match['node']} twice"
            ids[match["node"]] = name = attributes["label"].split("\n")[0]
            nodes[name] = attributes
    return nodes, edges


def test_mermaid_draws_tools_steps_and_dependencies(project: Path) -> None:
    """Mermaid (the default): a node per tool with its category, steps as labelled edges, depends_on dashed."""
    code, out, err = toolflow("graph")
    assert (code, err) == (0, "")
    assert out == MERMAID


def test_dot_draws_the_same_graph(project: Path) -> None:
    """DOT: the same nodes and edges, quoted; pipelines doubled, hidden tools dashed, unknown ones dotted."""
    code, out, err = toolflow("graph", "specs", "--format", "dot")
    assert (code, err) == (0, "")
    nodes, edges = parse_dot(out)
    assert list(nodes) == ["audit", "item_notes", "lookup_order", "order_report", "refund_order"]
    assert nodes["order_report"] == {"label": "order_report\ndangerous, pipeline", "peripheries": "2"}
    assert nodes["lookup_order"]["style"] == "dashed"
    assert nodes["audit"] == {"label": "audit\nnot declared", "style": "dotted"}
    assert edges == [
        ("order_report", "lookup_order", {"label": "order"}),
        ("order_report", "item_notes", {"label": "notes, for_each steps.order['items']"}),
        ("order_report", "refund_order", {"label": "refund, when order_id == '42'"}),
        ("refund_order", "audit", {"style": "dashed"}),
        ("refund_order", "lookup_order", {"style": "dashed"}),
        ("refund_order", "order_report", {"style": "dashed", "label": "session"}),
    ]


ODD = """\
toolflow: 1
tools:
  end:
    description: A Mermaid keyword as a name.
    parameters: {type: object, properties: {}}
    depends_on: ['say "hi"', 'a-b', 'a_b', 'x|y<z>#1 `q`', 'back\\slash']
    template: ok
"""


def test_odd_names_are_escaped_in_both_languages(project: Path) -> None:
    """Quotes, backslashes, pipes, angle brackets, `#`, a keyword, names that differ only by punctuation."""
    (project / "specs" / "odd.yaml").write_text(ODD, encoding="utf-8")
    code, dot, _ = toolflow("graph", "specs/odd.yaml", "--format", "dot")
    assert code == 0
    nodes, edges = parse_dot(dot)
    names = ["a-b", "a_b", "back\\slash", "end", 'say "hi"', "x|y<z>#1 `q`"]
    assert sorted(nodes) == names
    assert sorted(target for _, target, _ in edges) == sorted(set(names) - {"end"})
    code, mermaid, _ = toolflow("graph", "specs/odd.yaml")
    assert code == 0
    statements = mermaid.splitlines()[1:]
    ids = [line.split("[", 1)[0].split("(", 1)[0].strip() for line in statements if "<br/>" in line]
    assert len(ids) == len(set(ids)) == len(names)
    assert all(re.fullmatch(r"t_\w+", node_id, re.ASCII) for node_id in ids), ids
    assert "t_end[" in mermaid
    assert 'say #quot;hi#quot;<br/>not declared"' in mermaid
    assert "x#124;y#lt;z#gt;#35;1 #96;q#96;<br/>" in mermaid
    for line in statements:  # a label's own quotes are the only ones
        assert line.count('"') in {0, 2, 4}, line


def test_output_does_not_depend_on_the_order_of_the_files(project: Path) -> None:
    """The same specs given in another order draw the same graph."""
    (project / "specs" / "more.yaml").write_text(ODD, encoding="utf-8")
    forward = toolflow("graph", "specs/tools.yaml", "specs/more.yaml")
    backward = toolflow("graph", "specs/more.yaml", "specs/tools.yaml")
    assert forward == backward
    assert forward[0] == 0


def test_a_malformed_spec_is_reported_and_exits_1(project: Path) -> None:
    """As `toolflow list`: the loader's diagnostics on stderr, exit 1, the tools that loaded still drawn."""
    (project / "specs" / "broken.yaml").write_text("toolflow: 1\ntools:\n  bad: [unclosed\n", encoding="utf-8")
    code, out, err = toolflow("graph")
    assert code == 1
    assert re.search(r"specs/broken\.yaml:\d+:\d+: TF001 ", err), err
    assert "t_order_report" in out


def test_graph_reads_the_project_specs_setting(project: Path) -> None:
    """Without PATHs, `graph` reads `[tool.toolflow] specs`, as `lint` and `list` do."""
    (project / "specs").rename(project / "tools")
    (project / "pyproject.toml").write_text('[tool.toolflow]\nspecs = ["tools"]\n', encoding="utf-8")
    assert toolflow("graph") == (0, MERMAID, "")


def test_unknown_format_is_a_usage_error(project: Path) -> None:
    """`--format svg` exits 2 and names the choices."""
    code, _, err = toolflow("graph", "--format", "svg")
    assert code == 2
    assert "'mermaid', 'dot'" in err
