"""``toolflow serve`` and pipelines: annotations from the steps, hidden step tools, steps outside the selection.

Through the ``mcp`` SDK's own ``Client``, connected in-process to the service ``toolflow serve``
builds (:meth:`ToolService.under_policy`), as in tests/test_serve_policy.py; one test runs the
real command.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp import Client, types

import toolflow
from toolflow._serve import ToolService, build_server

PY = sys.executable

SPEC = """\
toolflow: 1
tools:
  lookup_order:
    description: Look an order up (a step only).
    expose: false
    parameters:
      type: object
      properties:
        order_id: {type: string, description: The order.}
      required: [order_id]
    template:
      output: json
      source: '{"customer_id": "c-{{ order_id }}", "items": ["a", "b"]}'
  lookup_customer:
    description: Look a customer up.
    parameters:
      type: object
      properties:
        customer_id: {type: string, description: The customer.}
      required: [customer_id]
    template:
      output: json
      source: '{"name": "Ann {{ customer_id }}"}'
  refund_order:
    description: Refund an order (a step only).
    category: dangerous
    expose: false
    parameters:
      type: object
      properties:
        order_id: {type: string, description: The order.}
      required: [order_id]
    template: 'refunded {{ order_id }}'
  send_note:
    description: Send a note; doing it twice sends one note.
    category: terminal
    idempotent: true
    parameters:
      type: object
      properties:
        text: {type: string, description: The note.}
      required: [text]
    template: 'sent {{ text }}'
  stamp:
    description: The date, from a program.
    expose: false
    command: [PYTHON, -c, "print('\\"2026-11-26\\"')"]
  order_summary:
    description: An order's customer; reads only, though it ends the loop.
    category: terminal
    parameters:
      type: object
      properties:
        order_id: {type: string, description: The order.}
      required: [order_id]
    pipeline:
      steps:
        order:
          tool: lookup_order
          with: {order_id: "{{ order_id }}"}
        customer:
          tool: lookup_customer
          with: {customer_id: "{{ steps.order.customer_id }}"}
      result:
        customer: "{{ steps.customer.name }}"
        items: "{{ steps.order['items'] }}"
  order_report:
    description: Summarise an order and refund it.
    category: dangerous
    parameters:
      type: object
      properties:
        order_id: {type: string, description: The order.}
      required: [order_id]
    pipeline:
      steps:
        summary:
          tool: order_summary
          with: {order_id: "{{ order_id }}"}
        refund:
          tool: refund_order
          with: {order_id: "{{ order_id }}"}
  dated_summary:
    description: An order's customer, dated by a program.
    parameters:
      type: object
      properties:
        order_id: {type: string, description: The order.}
      required: [order_id]
    pipeline:
      steps:
        summary:
          tool: order_summary
          with: {order_id: "{{ order_id }}"}
        date:
          tool: stamp
  noted_summary:
    description: An order's customer, noted.
    category: terminal
    parameters:
      type: object
      properties:
        order_id: {type: string, description: The order.}
      required: [order_id]
    pipeline:
      steps:
        summary:
          tool: order_summary
          with: {order_id: "{{ order_id }}"}
        note:
          tool: send_note
          with: {text: "{{ steps.summary.customer }}"}
"""


class Project:
    """The specs on disk, their registry and policy."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "specs").mkdir()
        text = SPEC.replace("PYTHON", PY)
        (root / "specs" / "orders.yaml").write_text(text, encoding="utf-8")
        (root / "pyproject.toml").write_text('[project]\nname = "orders"\n', encoding="utf-8")
        self.plugins = toolflow.load_plugins(entry_points=False)
        self.specs = toolflow.load_specs([root / "specs"], kinds=self.plugins.kind_schemas())
        assert self.specs.ok, [d.render() for d in self.specs.diagnostics]
        self.registry = toolflow.Registry.build(self.specs, self.plugins)
        self.policy = toolflow.Policy.from_specs(self.specs)

    def service(self, **options: Any) -> ToolService:
        return ToolService.under_policy(self.registry, policy=self.policy, plugins=self.plugins, **options)


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path)


@contextlib.asynccontextmanager
async def connect(service: ToolService) -> AsyncIterator[Client]:
    """The SDK's client, in-process, on one engine for every request (as over stdio)."""
    async with service.open_engine() as engine:
        service.shared = engine
        async with Client(build_server(service)) as client:
            yield client


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def hints(tool: types.Tool) -> tuple[bool | None, ...]:
    annotations = tool.annotations
    assert annotations is not None
    return (
        annotations.read_only_hint,
        annotations.destructive_hint,
        annotations.idempotent_hint,
        annotations.open_world_hint,
    )


async def test_hidden_tools_are_not_listed(project: Project) -> None:
    """Without a selection, tools/list leaves out every `expose: false` tool."""
    with trio.fail_after(30):
        async with connect(project.service()) as client:
            listed = [tool.name for tool in (await client.list_tools()).tools]
    assert listed == ["lookup_customer", "send_note", "order_summary", "order_report", "dated_summary", "noted_summary"]


async def test_pipeline_annotations_come_from_the_steps(project: Project) -> None:
    """Read-only only if every step is, destructive if any is, idempotent only if every step is; nested too.

    (readOnly, destructive, idempotent, openWorld): `order_summary` reads only, though it is
    `terminal`; `order_report` refunds through a hidden step; `dated_summary` reaches a program
    (a `command`, open-world); `noted_summary` sends a note, which is idempotent but not read-only.
    """
    with trio.fail_after(30):
        async with connect(project.service()) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert hints(tools["order_summary"]) == (True, False, True, False)
    assert hints(tools["order_report"]) == (False, True, False, False)
    assert hints(tools["dated_summary"]) == (True, False, True, True)
    assert hints(tools["noted_summary"]) == (False, False, True, False)


async def test_a_pipeline_runs_its_hidden_and_unselected_steps_which_stay_unreachable(project: Project) -> None:
    """`--tool order_summary`: the pipeline runs its steps (hidden or outside the selection); they are not callable."""
    service = project.service(tools=["order_summary"])
    with trio.fail_after(30):
        async with connect(service) as client:
            listed = [tool.name for tool in (await client.list_tools()).tools]
            result = await client.call_tool("order_summary", {"order_id": "42"})
            direct = {name: await client.call_tool(name, args) for name, args in _STEP_CALLS.items()}
    assert listed == ["order_summary"]
    assert not result.is_error, text(result)
    assert result.structured_content == {"customer": "Ann c-42", "items": ["a", "b"]}
    for name, refused in direct.items():
        assert refused.is_error
        assert text(refused) == f"Error: tool {name!r} is not available now; allowed tools: 'order_summary'"


_STEP_CALLS = {"lookup_order": {"order_id": "42"}, "lookup_customer": {"customer_id": "c-42"}}


def test_selecting_a_hidden_tool_says_why_it_is_not_served(project: Project) -> None:
    """`--tool` of an `expose: false` tool is an error naming `expose: false`, not the policy."""
    with pytest.raises(toolflow.UsageError) as info:
        project.service(tools=["lookup_order"])
    assert str(info.value) == (
        "not served: 'lookup_order': 'expose: false' in the spec hides it from models, as a pipeline step only"
        " (serve a pipeline that calls it)"
    )


def test_the_command_refuses_to_serve_a_hidden_tool(project: Project) -> None:
    """The real `toolflow serve --tool lookup_order` exits 2 with that reason, before serving anything."""
    done = subprocess.run(
        [PY, "-m", "toolflow", "serve", "--tool", "lookup_order"],
        cwd=project.root,
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "TOOLFLOW_LOAD_PLUGINS": "none"},
    )
    assert done.returncode == 2
    assert "'lookup_order': 'expose: false' in the spec hides it from models" in done.stderr
