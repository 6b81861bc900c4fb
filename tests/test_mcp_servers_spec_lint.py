"""Lint and the registry over ``mcp_servers:``: listed remote tools count as declared, nothing starts."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from toolflow._cli import run
from toolflow._diagnostics import Severity
from toolflow._lint._config import LintConfig
from toolflow._lint._engine import LintReport, lint_paths
from toolflow._loader import load_specs
from toolflow._plugins import load_plugins
from toolflow._registry import Registry, RegistryError
from toolflow._tool_references import unknown_references

SERVERS = """\
toolflow: 1
mcp_servers:
  files:
    command: [sh, -c, "touch {marker}"]
    prefix: fs_
    tools: [read_file, list_directory]
    overrides:
      read_file: {{category: safe_chain, depends_on: [fs_list_directory]}}
      list_directory: {{category: safe_chain}}  # else dangerous, and the survey pipeline would need TF233's fix
"""

REFERENCES = """\
toolflow: 1
tools:
  survey:
    description: List the workspace, then read its readme
    pipeline:
      steps:
        listing: {tool: fs_list_directory, with: {path: "."}}
        readme: {tool: fs_read_file, with: {path: README.md}, needs: [listing]}
  report:
    description: Report what the survey found
    template: "done"
    depends_on: [fs_read_file, survey]
toolsets:
  reading: {tools: [fs_read_file, survey], exclude: [fs_list_directory]}
policy:
  allow: [fs_read_file, fs_list_directory, survey, report]
  deny: [fs_list_directory]
  deliberate: [fs_read_file]
"""


def _project(tmp_path: Path, *files: str) -> list[Path]:
    paths = []
    for index, text in enumerate(files):
        path = tmp_path / f"spec{index}.yaml"
        path.write_text(textwrap.dedent(text).replace("{marker}", str(tmp_path / "started")), encoding="utf-8")
        paths.append(path)
    return paths


def _lint(paths: list[Path]) -> LintReport:
    return lint_paths(paths, LintConfig(), environ={"TOKEN": "t0ken-from-the-environment"})


def _found(report: LintReport) -> list[tuple[str, str, int, int]]:
    return [(Path(d.file).name, d.code, d.line, d.column) for d in report.diagnostics]


def test_listed_remote_tools_count_as_declared_for_every_reference(tmp_path: Path) -> None:
    """depends_on, pipeline steps, toolsets and the policy's lists may name listed remote tools, in any file."""
    paths = _project(tmp_path, SERVERS.format(marker="{marker}"), REFERENCES)
    report = _lint(paths)
    assert _found(report) == []


def test_the_registry_builds_with_references_to_listed_remote_tools(tmp_path: Path) -> None:
    """Registry.build accepts pipeline steps and toolset members naming listed remote tools; nothing starts."""
    paths = _project(tmp_path, SERVERS.format(marker="{marker}"), REFERENCES)
    registry = Registry.build(load_specs(paths), load_plugins())
    assert set(registry.names()) == {"survey", "report"}  # the remote tools join when the engine lists them
    assert not (tmp_path / "started").exists()


def test_nothing_starts_and_trio_is_not_imported_by_lint(tmp_path: Path) -> None:
    """toolflow lint over servers runs no command and imports neither trio nor mcp."""
    paths = _project(tmp_path, SERVERS.format(marker="{marker}"), REFERENCES)
    script = textwrap.dedent(
        f"""\
        import io, json, sys
        from toolflow._cli import run
        code = run(["lint", {str(paths[0])!r}, {str(paths[1])!r}], stdout=io.StringIO(), stderr=io.StringIO())
        print(json.dumps({{"code": code, "modules": sorted(sys.modules)}}))
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    top_level = {name.split(".")[0] for name in report["modules"]}
    assert report["code"] == 0
    assert not {"trio", "mcp", "anyio"} & top_level
    assert not (tmp_path / "started").exists()


def test_unknown_references_stay_errors_without_a_server_importing_all(tmp_path: Path) -> None:
    """With every server's tools listed, a name nobody declares is an error of its rule, with a remote hint."""
    text = REFERENCES.replace("fs_read_file, survey]", "fs_read_fil, survey]").replace(
        "tool: fs_list_directory", "tool: fs_list_dir"
    )
    report = _lint(_project(tmp_path, SERVERS.format(marker="{marker}"), text))
    found = {(d.code, d.line) for d in report.diagnostics}
    assert found == {("TF227", 7), ("TF213", 12), ("TF222", 14)}
    messages = " ".join(d.message for d in report.diagnostics)
    assert "did you mean 'fs_read_file'?" in messages
    assert "did you mean 'fs_list_directory'?" in messages
    assert report.exit_code == 1


def test_a_reference_that_may_be_remote_is_a_warning(tmp_path: Path) -> None:
    """A server without tools: makes an unknown name under its prefix a TF244 warning naming lint --connect."""
    servers = """\
    toolflow: 1
    mcp_servers:
      search: {url: "http://127.0.0.1:8931/mcp", prefix: web_, headers: {Authorization: "Bearer ${TOKEN}"}}
    """
    uses = """\
    toolflow: 1
    tools:
      digest:
        description: Digest what a search found
        template: "digest"
        depends_on: [web_search, local_index]
    policy:
      allow: [web_search, digest]
    """
    report = _lint(_project(tmp_path, servers, uses))
    found = [(d.code, d.line, d.severity) for d in report.diagnostics]
    assert found == [
        ("TF244", 6, Severity.WARNING),
        ("TF213", 6, Severity.ERROR),  # local_index: not under the prefix web_, so it cannot be remote
        ("TF244", 8, Severity.WARNING),
    ]
    warning = report.diagnostics[0]
    assert "MCP server 'search'" in warning.message
    assert "'toolflow lint --connect' checks it" in warning.message
    assert warning.pointer == "/tools/digest/depends_on/0"


def test_the_registry_waits_for_the_listing_then_reports(tmp_path: Path) -> None:
    """Registry.build leaves names that may be remote to the listing; unknown_references reports them after."""
    servers = "toolflow: 1\nmcp_servers:\n  search: {url: 'http://127.0.0.1:8931/mcp', prefix: web_}\n"
    uses = """\
    toolflow: 1
    tools:
      find:
        description: Find with the server's search
        pipeline:
          steps:
            hits: {tool: web_search, with: {q: x}}
    toolsets:
      web: {tools: [web_search, find]}
    """
    specs = load_specs(_project(tmp_path, servers, uses))
    registry = Registry.build(specs, load_plugins())
    assert registry.names() == ("find",)
    # Once the engine has listed the servers' tools (here: web_fetch only):
    problems = unknown_references(specs, {*registry.names(), "web_fetch"}, listed=True)
    assert len(problems) == 2
    assert "step 'hits' of tool 'find' calls 'web_search', no such tool; did you mean 'web_fetch'?" in problems[0]
    assert "toolset 'web' names tool 'web_search'" in problems[1]
    assert unknown_references(specs, {*registry.names(), "web_search"}, listed=True) == []


def test_the_registry_refuses_duplicate_servers_and_remote_names_of_yaml_tools(tmp_path: Path) -> None:
    """Two entries of one server name, or a listed remote tool named like a YAML tool, stop the build."""
    one = "toolflow: 1\nmcp_servers:\n  files: {command: [srv], tools: [report]}\n"
    two = """\
    toolflow: 1
    mcp_servers:
      files: {command: [srv, --other]}
    tools:
      report: {description: Report, template: done}
    """
    paths = _project(tmp_path, one, two)
    with pytest.raises(RegistryError) as caught:
        Registry.build(load_specs(paths), load_plugins())
    assert caught.value.problems == (
        f"{paths[0]}:3:3: MCP server 'files' imports a tool named 'report', as does {paths[1]}",
        f"{paths[1]}:3:3: MCP server 'files' is declared twice (first in {paths[0]})",
    )
    codes = sorted(d.code for d in _lint(paths).diagnostics)
    assert codes == ["TF241", "TF241", "TF242"]


def test_header_secrets_never_reach_lint_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ${VAR} header of a server with problems shows as its reference in every lint format."""
    text = """\
    toolflow: 1
    mcp_servers:
      search:
        command: [srv]
        headers: {Authorization: "Bearer ${TOKEN}"}
        tools: ["Bearer ${TOKEN}"]
    """
    monkeypatch.setenv("TOKEN", "t0ken-from-the-environment")
    paths = _project(tmp_path, text)
    for output in ("text", "full", "json", "github", "sarif", "junit", "gitlab"):
        out, err = io.StringIO(), io.StringIO()
        code = run(["lint", "--output-format", output, str(paths[0])], stdout=out, stderr=err)
        assert code == 1
        assert "Bearer ${TOKEN}" in out.getvalue()  # TF240's message names the reference
        assert "t0ken-from" not in out.getvalue() + err.getvalue()
