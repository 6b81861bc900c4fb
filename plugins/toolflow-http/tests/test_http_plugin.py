"""The plugin itself: its entry point, what it registers, lazy imports and lint."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

import toolflow_http.plugin
from toolflow_http._schema import SCHEMA

import toolflow
from toolflow import load_plugins
from toolflow._lint._engine import lint_paths
from toolflow._lint.rules import builtin_rules
from toolflow.testing import IsolatedPlugins, ToolflowProject


def test_registers_the_http_kind_and_its_rules(http_plugins: IsolatedPlugins) -> None:
    """The plugin provides the ``http`` kind with its schema, and the HTTP1xx lint rules."""
    kinds = http_plugins.kinds()
    (kind,) = kinds["http"]
    assert kind.plugin == "http"
    assert kind.schema is SCHEMA
    assert callable(kind.build)
    rules = [(plugin, rule.code, rule.name) for plugin, rule in http_plugins.lint_rules()]
    assert rules == [
        ("http", "HTTP101", "http-template-syntax"),
        ("http", "HTTP102", "http-unknown-variable"),
        ("http", "HTTP103", "http-unguarded-optional-parameter"),
    ]


def test_installed_entry_point_loads() -> None:
    """The installed distribution is found through the ``toolflow`` entry-point group and loads cleanly."""
    plugins = load_plugins(environ={"TOOLFLOW_LOAD_PLUGINS": "http"}, strict=True)
    info = next(i for i in plugins.infos if i.name == "http")
    assert (info.status, info.source, info.distribution, info.module) == (
        "loaded",
        "entry-point",
        "toolflow-http",
        "toolflow_http.plugin",
    )
    assert info.version == importlib.metadata.version("toolflow-http")
    assert "http" in plugins.kinds()


def test_loading_the_plugin_imports_neither_httpx_nor_trio() -> None:
    """Linting loads the plugin for the schema; httpx (and trio) wait until a tool is built."""
    code = (
        "import sys, toolflow_http.plugin; print(sorted({'httpx', 'trio', 'toolflow_http._request'} & {*sys.modules}))"
    )
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert output.strip() == "[]"


def test_lint_checks_http_keys(toolflow_project: ToolflowProject) -> None:
    """``toolflow lint`` knows the ``http`` key from the installed plugin and points at a misspelt setting."""
    toolflow_project.write_spec(
        "api.yaml",
        """
        toolflow: 1
        tools:
          search:
            description: Search the example API for matching items.
            parameters:
              type: object
              properties:
                q: {type: string, minLength: 1, description: What to look for.}
              required: [q]
            http:
              url: https://api.example.com/search
              query: {q: "{{ q }}"}
              methd: GET
        """,
    )
    env = {"TOOLFLOW_LOAD_PLUGINS": "http", "TOOLFLOW_DISABLE_PLUGINS": None}
    result = toolflow_project.lint(env=env)
    assert result.exit_code == 1
    assert (
        "specs/api.yaml:13:7: TF101 unknown key 'methd' in 'http' of tool 'search'; did you mean 'method'?"
        in result.stdout
    )
    toolflow_project.write_spec(
        "api.yaml", (toolflow_project.specs_dir / "api.yaml").read_text().replace("methd", "method")
    )
    assert toolflow_project.lint(env=env).exit_code == 0


def test_lint_rules_check_templates(toolflow_project: ToolflowProject) -> None:
    """HTTP101 points at a template that does not compile; HTTP102 at variables that are not parameters."""
    toolflow_project.write_spec(
        "api.yaml",
        """
        toolflow: 1
        tools:
          search:
            description: Search the example API for matching items.
            parameters:
              type: object
              properties:
                q: {type: string, minLength: 1, description: What to look for.}
              required: [q]
            http:
              url: https://api.example.com/search/{{ q }
              headers: {X-Key: "{{ env.API_KEY }}"}
              query: {q: "{{ query }}", n: 10}
              json: {a: ["{{ q }}", "{{ nope | default(1) }}"], "x/y": {"k": "{{ range(3) | list }}"}}
          short:
            description: A URL alone, whose template reads a missing argument.
            parameters: {type: object, properties: {}}
            http: https://api.example.com/{{ id }}
          odd:
            description: Parameters without properties are not checked for variables.
            parameters: {type: object, properties: [1, 2]}
            http: {url: "https://api.example.com/{{ anything }}", env: [API_KEY]}
        """,
    )
    result = toolflow_project.lint(env={"TOOLFLOW_LOAD_PLUGINS": "http", "TOOLFLOW_DISABLE_PLUGINS": None})
    assert result.exit_code == 1
    assert result.stdout.splitlines()[:-1] == [
        "specs/api.yaml:11:12: HTTP101 template of tool 'search' does not compile: unexpected '}' (template line 1)",
        "specs/api.yaml:12:24: HTTP102 template of tool 'search' reads 'env' but 'http' lists no 'env' names",
        "specs/api.yaml:13:18: HTTP102 template of tool 'search' reads 'query', which is not a parameter of the tool",
        "specs/api.yaml:14:29: HTTP102 template of tool 'search' reads 'nope', which is not a parameter of the tool",
        "specs/api.yaml:18:11: HTTP102 template of tool 'short' reads 'id', which is not a parameter of the tool",
        "specs/api.yaml:21:44: TF204 invalid JSON Schema at 'parameters.properties': [1, 2] is not of type 'object'",
    ]


def test_lint_reports_an_optional_parameter_read_without_a_guard(toolflow_project: ToolflowProject) -> None:
    """HTTP103: a URL or longer string reading an optional parameter fails without it; `{{ name }}` alone does not."""
    toolflow_project.write_spec(
        "api.yaml",
        """
        toolflow: 1
        tools:
          search:
            description: Search the example API for matching items.
            parameters:
              type: object
              properties:
                q: {type: string, description: What to look for.}
                page: {type: integer, description: Which page.}
                lang: {type: string, description: The language.}
                size: {type: integer, description: How many, default: 10}
              required: [q]
            http:
              url: https://api.example.com/{{ lang }}/search/{{ q }}
              query: {page: "{{ page }}", size: "{{ size }}", label: "page-{{ page }}"}
              headers: {Accept-Language: "{% if lang is defined %}{{ lang }}{% else %}en{% endif %}"}
        """,
    )
    result = toolflow_project.lint(
        "--select", "HTTP103", env={"TOOLFLOW_LOAD_PLUGINS": "http", "TOOLFLOW_DISABLE_PLUGINS": None}
    )
    assert result.exit_code == 1
    fix = "give it a 'default', make the value exactly '{{ %s }}' (the key is then left out), or read it under"
    assert result.stdout.splitlines()[:-1] == [
        (
            "specs/api.yaml:14:12: HTTP103 template of tool 'search' reads optional parameter 'lang', which has no "
            f"default, so a call that leaves it out fails ('lang' is undefined); {fix % 'lang'} "
            "'{% if lang is defined %}' or as 'lang | default(...)'"
        ),
        (
            "specs/api.yaml:15:62: HTTP103 template of tool 'search' reads optional parameter 'page', which has no "
            f"default, so a call that leaves it out fails ('page' is undefined); {fix % 'page'} "
            "'{% if page is defined %}' or as 'page | default(...)'"
        ),
    ]


def test_lint_rules_are_selectable_by_code(toolflow_project: ToolflowProject) -> None:
    """The plugin's rules take part in selection like built-in ones (``--ignore HTTP``)."""
    toolflow_project.write_spec(
        "api.yaml",
        {"tools": {"t": {"description": "A tool with a typo in its URL template.", "http": "https://x.example/{{ a"}}},
    )
    env = {"TOOLFLOW_LOAD_PLUGINS": "http", "TOOLFLOW_DISABLE_PLUGINS": None}
    assert "HTTP101" in toolflow_project.lint(env=env).stdout
    assert toolflow_project.lint("--ignore", "HTTP", env=env).exit_code == 0


def test_the_http_examples_pack_lints_clean_when_included(tmp_path: Path) -> None:
    """`include: [http-examples]` brings the plugin's two tools; they lint clean with the plugin's rules."""
    (tmp_path / "main.yaml").write_text("toolflow: 1\ninclude: [http-examples]\n", encoding="utf-8")
    plugins = toolflow.load_plugins(entry_points=False)
    plugins.register(toolflow_http.plugin, "http")
    loaded = toolflow.load_specs([tmp_path], **plugins.loader_options())
    assert loaded.ok, [d.render() for d in loaded.diagnostics]
    assert [tool.name for tool in loaded.tools] == ["public_ip", "weather_now"]
    rules = (*builtin_rules(), *(rule for _, rule in plugins.lint_rules()))
    report = lint_paths([tmp_path], rules=rules, **plugins.loader_options())
    assert report.diagnostics == ()
