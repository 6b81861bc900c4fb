"""The ``mcp_servers:`` section of spec files: the schema, the loader's records, its diagnostics."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolflow._loader import load_specs
from toolflow._mcp_specs import remote_tool_spec
from toolflow._model import LoadResult, RemoteTool
from toolflow._provenance import Interpolated
from toolflow._schemas import spec_schema

ISSUE_EXAMPLE = """\
toolflow: 1
defaults: {timeout: 20s, retry: {attempts: 3, initial: 2s}, cache: {scope: tick}, strict: true}
mcp_servers:
  files:
    command: [npx, -y, "@modelcontextprotocol/server-filesystem", "./workspace"]
    env: {LOG_LEVEL: warn}
    tools: [read_file, list_directory]       # import only these (default: all)
    prefix: fs_                               # optional name prefix
    defaults: {timeout: 10s, retry: {attempts: 2}}
    overrides:
      read_file: {category: safe_chain, cache: {scope: session}}
  search:
    url: http://127.0.0.1:8931/mcp            # streamable HTTP
    headers: {Authorization: "Bearer ${SEARCH_TOKEN}"}
"""

SECRET = "s3cr3t-t0ken-value"


def _load(tmp_path: Path, text: str, environ: dict[str, str] | None = None) -> LoadResult:
    path = tmp_path / "spec.yaml"
    path.write_text(text, encoding="utf-8")
    return load_specs([path], environ=environ if environ is not None else {"SEARCH_TOKEN": SECRET})


def _problems(result: LoadResult) -> list[tuple[str, int, int]]:
    return [(d.code, d.line, d.column) for d in result.diagnostics]


def test_the_issues_example_loads_into_server_records(tmp_path: Path) -> None:
    """Each entry becomes an McpServer with its file, pointer, transport and keys."""
    result = _load(tmp_path, ISSUE_EXAMPLE)
    assert result.ok, result.diagnostics
    files, search = result.mcp_servers
    assert (files.name, files.transport, files.command[0], files.env) == (
        "files",
        "stdio",
        "npx",
        {"LOG_LEVEL": "warn"},
    )
    assert (files.tools, files.prefix, files.declared) == (
        ("read_file", "list_directory"),
        "fs_",
        ("fs_read_file", "fs_list_directory"),
    )
    assert files.overrides == {"read_file": {"category": "safe_chain", "cache": {"scope": "session"}}}
    assert (files.file, files.pointer) == (str(tmp_path / "spec.yaml"), "/mcp_servers/files")
    assert (search.transport, search.url, search.tools, search.imports("anything")) == (
        "http",
        "http://127.0.0.1:8931/mcp",
        None,
        True,
    )
    assert result.files[0].mcp_servers == (files, search)


def test_server_defaults_merge_over_the_files_key_by_key(tmp_path: Path) -> None:
    """McpServer.defaults is what applies: the entry's keys over the file's, retry and cache mappings merged."""
    files, search = _load(tmp_path, ISSUE_EXAMPLE).mcp_servers
    assert files.defaults == {
        "timeout": "10s",
        "retry": {"attempts": 2, "initial": "2s"},
        "cache": {"scope": "tick"},
        "strict": True,
    }
    assert search.defaults == {
        "timeout": "20s",
        "retry": {"attempts": 3, "initial": "2s"},
        "cache": {"scope": "tick"},
        "strict": True,
    }
    spec = remote_tool_spec(files, RemoteTool(name="read_file"))
    assert (spec.timeout, spec.retry.attempts, spec.retry.initial, spec.strict) == (10.0, 2, 2.0, True)
    assert spec.cache is not None
    assert spec.cache.scope.value == "session"  # the override over the defaults


def test_a_server_turning_off_what_the_file_turns_on(tmp_path: Path) -> None:
    """retry: false and cache: false in a server's defaults win over the file's mappings."""
    text = ISSUE_EXAMPLE.replace(
        "defaults: {timeout: 10s, retry: {attempts: 2}}", "defaults: {retry: false, cache: false}"
    )
    files = _load(tmp_path, text).mcp_servers[0]
    assert (files.defaults["retry"], files.defaults["cache"], files.defaults["timeout"]) == (False, False, "20s")
    spec = remote_tool_spec(files, RemoteTool(name="list_directory"))
    assert (spec.retry.attempts, spec.cache) == (1, None)


def test_interpolated_headers_are_marked_and_never_shown(tmp_path: Path) -> None:
    """A ${VAR} header is an Interpolated string: the value to send, the reference to show."""
    search = _load(tmp_path, ISSUE_EXAMPLE).mcp_servers[1]
    header = search.headers["Authorization"]
    assert isinstance(header, Interpolated)
    assert header == f"Bearer {SECRET}"
    assert SECRET not in repr(search)
    assert "Bearer ${SEARCH_TOKEN}" in repr(search)


def test_interpolation_works_in_url_command_and_env(tmp_path: Path) -> None:
    """${VAR} is interpolated in every string of an entry, as elsewhere in a spec."""
    text = """\
toolflow: 1
mcp_servers:
  remote:
    url: "https://${HOST}/mcp"
  local:
    command: ["${SERVER_BIN}", --token, "${TOKEN}"]
    env: {API_KEY: "${TOKEN}"}
"""
    remote, local = _load(tmp_path, text, {"HOST": "mcp.example.com", "SERVER_BIN": "srv", "TOKEN": SECRET}).mcp_servers
    assert remote.url == "https://mcp.example.com/mcp"
    assert local.command == ("srv", "--token", SECRET)
    assert local.env["API_KEY"] == SECRET
    assert SECRET not in repr(local)


def test_an_unset_variable_is_tf007(tmp_path: Path) -> None:
    """A header naming an unset variable is reported where it is written."""
    result = _load(tmp_path, ISSUE_EXAMPLE, environ={})
    assert _problems(result) == [("TF007", 14, 30)]


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ("{command: []}", [("TF104", 3, 16)]),
        ("{command: srv}", [("TF103", 3, 16)]),
        ("{url: ftp://host/mcp}", [("TF104", 3, 12)]),
        ("{url: 'http://'}", [("TF104", 3, 12)]),
        ("{url: 'https://h', headers: {X-Count: 3}}", [("TF103", 3, 44)]),
        ("{command: [srv], env: {N: 1}}", [("TF103", 3, 32)]),
        ("{command: [srv], tools: []}", [("TF104", 3, 30)]),
        ("{command: [srv], tools: [a, a]}", [("TF104", 3, 30)]),
        ("{command: [srv], prefix: 'fs.'}", [("TF104", 3, 31)]),
        ("{command: [srv], trust_annotations: yes please}", [("TF103", 3, 42)]),
        ("{command: [srv], overrides: {t: {parameters: {}}}}", [("TF101", 3, 39)]),
        ("{command: [srv], overrides: {t: {command: [x]}}}", [("TF101", 3, 39)]),
        ("{command: [srv], overrides: {t: {category: Bad}}}", [("TF104", 3, 49)]),
        ("{command: [srv], defaults: {timeout: soon}}", [("TF104", 3, 43)]),
        ("{command: [srv], transport: stdio}", [("TF101", 3, 23)]),
    ],
)
def test_the_schema_refuses_bad_values(tmp_path: Path, entry: str, expected: list[tuple[str, int, int]]) -> None:
    """Wrong types and values of an entry are TF1xx diagnostics at file:line:col."""
    result = _load(tmp_path, f"toolflow: 1\nmcp_servers:\n  s: {entry}\n")
    assert _problems(result) == expected
    assert not result.mcp_servers  # a server the schema refused is not built


def test_a_bad_server_name_is_refused(tmp_path: Path) -> None:
    """Server names are identifiers (with '-'): they name connections and appear in messages."""
    result = _load(tmp_path, "toolflow: 1\nmcp_servers:\n  'my server': {command: [srv]}\n")
    assert [d.code for d in result.diagnostics] == ["TF104"]


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ("{prefix: x_}", [("TF102", 3, 3, "needs 'command'")]),
        ("{command: [srv], url: 'http://h/mcp'}", [("TF104", 3, 23, "both 'command' and 'url'")]),
        ("{command: [srv], headers: {A: b}}", [("TF104", 3, 23, "'headers' of MCP server 's' goes with 'url'")]),
        ("{url: 'http://h/mcp', env: {A: b}}", [("TF104", 3, 28, "'env' of MCP server 's' goes with 'command'")]),
        ("{url: 'http://h/mcp', cwd: /tmp}", [("TF104", 3, 28, "'cwd' of MCP server 's' goes with 'command'")]),
        (
            "{command: [srv], overrides: {t: {timeout: 0.0s}}}",
            [("TF104", 3, 48, "must be a positive duration")],
        ),
        (
            "{command: [srv], overrides: {t: {parameter_rules: [{exclusive: [a, b], when: a}]}}}",
            [("TF104", 3, 57, "'when' goes with 'require'")],
        ),
    ],
)
def test_what_the_schema_admits_and_the_model_refuses(
    tmp_path: Path, entry: str, expected: list[tuple[str, int, int, str]]
) -> None:
    """One transport per server, its keys only, overrides that build a tool: TF102/TF104 at file:line:col."""
    result = _load(tmp_path, f"toolflow: 1\nmcp_servers:\n  s: {entry}\n")
    found = [(d.code, d.line, d.column, d.message) for d in result.diagnostics]
    assert [f[:3] for f in found] == [e[:3] for e in expected]
    for (_, _, _, message), (_, _, _, part) in zip(found, expected, strict=True):
        assert part in message


def test_every_property_of_a_server_is_described() -> None:
    """Editors show each key's description: every property of mcp_servers entries and overrides has one."""
    definitions = spec_schema()["definitions"]
    for name in ("mcp_server", "tool_override", "defaults"):
        assert definitions[name]["description"]
        for key, sub in definitions[name]["properties"].items():
            target = sub
            if "description" not in sub:
                parts = sub["$ref"].removeprefix("#/").split("/")
                target = spec_schema()
                for part in parts:
                    target = target[part]
            assert target.get("description"), f"{name}.{key}"
    assert spec_schema()["properties"]["mcp_servers"]["description"]


def test_overrides_admit_exactly_the_tool_keys_that_are_not_schemas_or_implementations() -> None:
    """A spec author may set everything of a remote tool but what the server owns: its schemas and how it runs."""
    tool_keys = set(spec_schema()["definitions"]["tool"]["properties"])
    override_keys = set(spec_schema()["definitions"]["tool_override"]["properties"])
    owned_by_server = {"parameters", "output_schema", "implementation", "template", "command", "pipeline"}
    assert override_keys == tool_keys - owned_by_server
