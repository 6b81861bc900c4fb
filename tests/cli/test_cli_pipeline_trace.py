"""Pipeline steps in the traces: `toolflow call --trace` and `toolflow run`, text and JSON.

Real spec files in tmp_path, in-process through `toolflow._cli.run`; no assertion depends on timing.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from _cli_project import make_project, toolflow

SPECS = """\
toolflow: 1
tools:
  lookup:
    description: Look an order up.
    expose: false
    parameters:
      type: object
      properties:
        order_id: {type: string, description: The id.}
      required: [order_id]
    cache: {scope: session}
    template:
      output: json
      source: '{"id": "{{ order_id }}", "items": [{"sku": "a"}, {"sku": "b"}]}'
  note:
    description: A note on an item.
    parameters:
      type: object
      properties:
        sku: {type: string, description: The item.}
      required: [sku]
    template: "note for {{ sku }}"
  inner:
    description: A pipeline used as a step.
    parameters:
      type: object
      properties:
        order_id: {type: string, description: The id.}
      required: [order_id]
    pipeline:
      steps:
        again:
          tool: lookup
          with: {order_id: "{{ order_id }}"}
  report:
    description: Report on an order.
    parameters:
      type: object
      properties:
        order_id: {type: string, description: The id.}
      required: [order_id]
    pipeline:
      steps:
        order:
          tool: lookup
          with: {order_id: "{{ order_id }}"}
        notes:
          for_each: "{{ steps.order['items'] }}"
          concurrency: 1
          tool: note
          with: {sku: "{{ item.sku }}"}
        broken:
          tool: note
          with: {sku: 5}
          on_error: continue
        never:
          when: "{{ false }}"
          tool: note
          with: {sku: x}
        nested:
          needs: [order]
          tool: inner
          with: {order_id: "{{ order_id }}"}
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project with the specs above; the working directory."""
    return make_project(tmp_path, monkeypatch, SPECS)


MS = r"\d+\.\dms"

CALL_TRACE = [
    rf"toolflow: trace: report: success, 1 attempt, {MS}, no cache",
    rf'toolflow: trace:   order: lookup {{"order_id":"42"}}: succeeded, 1 attempt, {MS}, cache miss \(session\)',
    rf'toolflow: trace:   notes\[0\]: note {{"sku":"a"}}: succeeded, 1 attempt, {MS}, no cache',
    rf'toolflow: trace:   notes\[1\]: note {{"sku":"b"}}: succeeded, 1 attempt, {MS}, no cache',
    (
        rf'toolflow: trace:   broken: note {{"sku":5}}: failed, 0 attempts, {MS}, no cache: '
        r"Error: Parameter validation failed for 'note': - sku: Expected string .*"
    ),
    r"toolflow: trace:   never: note: skipped",
    rf'toolflow: trace:   nested: inner {{"order_id":"42"}}: succeeded, 1 attempt, {MS}, no cache',
    rf'toolflow: trace:     again: lookup {{"order_id":"42"}}: succeeded, 0 attempts, {MS}, cache hit \(session\)',
]


def test_call_trace_nests_a_line_per_step_under_the_pipeline(project: Path) -> None:
    """`--trace` prints the pipeline's line, then each step (each item, each nested step) indented under it."""
    code, _, err = toolflow("call", "report", '{"order_id": "42"}', "--trace")
    assert code == 0, err
    lines = err.splitlines()
    assert len(lines) == len(CALL_TRACE), lines
    for line, pattern in zip(lines, CALL_TRACE, strict=True):
        assert re.fullmatch(pattern, line), (line, pattern)


def test_call_trace_prints_the_step_records_as_json(project: Path) -> None:
    """With `--trace` the printed result carries `steps` (StepRecord.to_dict()); without it, the output is unchanged."""
    code, plain, _ = toolflow("call", "report", '{"order_id": "42"}')
    assert code == 0
    code, traced, _ = toolflow("call", "report", '{"order_id": "42"}', "--trace")
    assert code == 0
    document, bare = json.loads(traced), json.loads(plain)
    assert "steps" not in bare
    assert {k: v for k, v in document.items() if k != "steps"} == bare
    steps = document["steps"]
    assert [(s["step"], s.get("item"), s["status"]) for s in steps] == [
        ("order", None, "succeeded"),
        ("notes", 0, "succeeded"),
        ("notes", 1, "succeeded"),
        ("broken", None, "failed"),
        ("never", None, "skipped"),
        ("nested", None, "succeeded"),
    ]
    assert steps[1]["arguments"] == {"sku": "a"}
    assert steps[1]["result"]["data"] == "note for a"
    assert all(isinstance(s["duration_ms"], float) for s in steps if s["status"] != "skipped")
    assert [(s["step"], s["result"]["cached"]) for s in steps[5]["steps"]] == [("again", True)]


def test_call_trace_of_a_plain_tool_has_no_steps(project: Path) -> None:
    """A tool that is not a pipeline prints one trace line and no `steps` key."""
    code, out, err = toolflow("call", "note", '{"sku": "a"}', "--trace")
    assert code == 0
    assert len(err.splitlines()) == 1
    assert "steps" not in json.loads(out)


def _transcript(project: Path) -> str:
    turns = [{"tool_calls": [{"name": "report", "arguments": {"order_id": "42"}}]}, {"text": "done"}]
    (project / "session.yaml").write_text(yaml.safe_dump({"prompt": "go", "turns": turns}), encoding="utf-8")
    return "scripted:session.yaml"


RUN_TRACE = [
    r'  → report {"order_id": "42"}',
    r'    ok: \{"order": .*\} \(\d+(\.\d)? ms\)',
    r'    · order → lookup {"order_id": "42"}: ok: \{"id": "42", .*\} \(\d+(\.\d)? ms\)',
    r'    · notes\[0\] → note {"sku": "a"}: ok: "note for a" \(\d+(\.\d)? ms\)',
    r'    · notes\[1\] → note {"sku": "b"}: ok: "note for b" \(\d+(\.\d)? ms\)',
    r'    · broken → note {"sku": 5}: failed: Error: Parameter validation failed for \'note\': - sku: .* \(\d+(\.\d)? ms\)',
    r"    · never → note: skipped",
    r'    · nested → inner {"order_id": "42"}: ok: \{"again": .*\} \(\d+(\.\d)? ms\)',
    r'      · again → lookup {"order_id": "42"}: ok: \{"id": "42", .*\} \(cached, \d+(\.\d)? ms\)',
]


def test_run_trace_shows_each_step_under_its_call(project: Path) -> None:
    """The text trace of `toolflow run` lists the steps of a pipeline call under it, nested pipelines deeper."""
    code, out, err = toolflow("run", "--model", _transcript(project))
    assert (code, err) == (0, "")
    lines = out.splitlines()
    start = lines.index('  → report {"order_id": "42"}')
    for line, pattern in zip(lines[start : start + len(RUN_TRACE)], RUN_TRACE, strict=True):
        assert re.fullmatch(pattern, line), (line, pattern)
    assert lines[start + len(RUN_TRACE)].startswith("turn 2")


def test_run_json_carries_the_step_records_of_each_call(project: Path) -> None:
    """`--output-format json`: a pipeline call has its `steps`, nested ones inside; other calls have none."""
    code, out, _ = toolflow("run", "--model", _transcript(project), "--output-format", "json")
    assert code == 0
    calls: list[dict[str, Any]] = [c for t in json.loads(out)["turns"] for c in t["calls"]]
    assert [c["tool"] for c in calls] == ["report"]
    steps = calls[0]["steps"]
    assert [s["step"] for s in steps] == ["order", "notes", "notes", "broken", "never", "nested"]
    assert steps[3]["status"] == "failed"
    assert steps[5]["steps"][0]["step"] == "again"


SECRET_SPECS = """\
toolflow: 1
tools:
  size:
    description: The length of a token.
    parameters: {type: object, properties: {token: {type: string, description: A token.}}, required: [token]}
    template: "{{ token | length }}"
  check:
    description: Check the token two ways.
    parameters: {type: object, properties: {}}
    pipeline:
      steps:
        as_is:
          tool: size
          with: {token: "${TRACE_TOKEN}"}
        rendered:
          tool: size
          with: {token: "Bearer ${TRACE_TOKEN} {{ 1 + 1 }}"}
"""

TOKEN = "s3cr3t-trace-value"


def test_traces_show_a_secret_in_step_arguments_as_its_reference(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `${VAR}` in `with:` shows as `${VAR}` in both traces, text and JSON, even once a template rendered it."""
    make_project(tmp_path, monkeypatch, SECRET_SPECS)
    monkeypatch.setenv("TRACE_TOKEN", TOKEN)
    turns = [{"tool_calls": [{"name": "check", "arguments": {}}]}, {"text": "done"}]
    (tmp_path / "session.yaml").write_text(yaml.safe_dump({"prompt": "go", "turns": turns}), encoding="utf-8")
    outputs = [
        toolflow("call", "check", "--trace"),
        toolflow("run", "--model", "scripted:session.yaml"),
        toolflow("run", "--model", "scripted:session.yaml", "--output-format", "json"),
    ]
    for code, out, err in outputs:
        assert code == 0, err
        assert TOKEN not in out + err
    call_err, run_text = outputs[0][2], outputs[1][1]
    assert '  as_is: size {"token":"${TRACE_TOKEN}"}: succeeded' in call_err
    assert '  rendered: size {"token":"Bearer ${TRACE_TOKEN} 2"}: succeeded' in call_err
    assert '    · rendered → size {"token": "Bearer ${TRACE_TOKEN} 2"}: ok: "27"' in run_text
    steps = json.loads(outputs[0][1])["steps"]
    assert [s["arguments"]["token"] for s in steps] == ["${TRACE_TOKEN}", "Bearer ${TRACE_TOKEN} 2"]
