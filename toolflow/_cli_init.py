"""``toolflow init``: a working project to start from (issue 17, section 7).

It writes a spec file with one tool of each built-in kind (a template, a command, a Python
implementation bound by the project's own plugin module, and a pipeline of the three), a
scripted model session that calls them, the ``[tool.toolflow]`` section of ``pyproject.toml``,
a pre-commit configuration and a CI workflow that lint the specs, and the spec schema for
editors. Every file is checked to be
new first: an existing one is never overwritten, and nothing is written then.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TextIO

from toolflow._errors import UsageError
from toolflow._plugins import DISTRIBUTION
from toolflow._schemas import spec_schema

__all__ = ["command", "plugin_files", "project_files"]

_SPECS = """\
# yaml-language-server: $schema=../.toolflow/spec-v1.schema.json
# (`toolflow spec-schema > .toolflow/spec-v1.schema.json` rewrites it, with your plugins' kinds)
toolflow: 1

tools:
  greet:
    description: Greet a person by name, in one short sentence.
    category: terminal
    parameters:
      type: object
      properties:
        name: {type: string, minLength: 1, description: Who to greet.}
      required: [name]
      additionalProperties: false
    template: "Hello, {{ name }}!"

  python_version:
    description: The version of the Python that runs the tools.
    timeout: 5s
    command: [python3, --version]

  word_count:
    description: Count the words of a text.
    parameters:
      type: object
      properties:
        text: {type: string, description: The text to count the words of.}
      required: [text]
      additionalProperties: false
    implementation: {package}.word_count

  welcome:
    description: Greet a person and say how many words their name has.
    category: terminal
    parameters:
      type: object
      properties:
        name: {type: string, minLength: 1, description: Who to greet.}
      required: [name]
      additionalProperties: false
    pipeline:
      steps:
        hello:
          tool: greet
          with: {name: "{{ name }}"}
        words:
          tool: word_count
          with: {text: "{{ name }}"}
      result: >-
        {{ steps.hello }} (Your name has {{ steps.words.words }}
        word{{ '' if steps.words.words == 1 else 's' }}.)
"""

_PLUGIN = '''\
"""The project's own tools: bound to spec names by toolflow (``[tool.toolflow] plugins``)."""

from collections.abc import Callable
from typing import Any

import toolflow


def word_count(text: str) -> dict[str, int]:
    """The number of words of *text*."""
    return {"words": len(text.split())}


@toolflow.hookimpl
def toolflow_register_implementations(register: Callable[[str, Any], None]) -> None:
    """Bind the spec name ``{package}.word_count`` to :func:`word_count`."""
    register("{package}.word_count", word_count)
'''

_SESSION = """\
# A scripted model session: `toolflow run --model scripted:sessions/hello.yaml`
# Each turn is what the model answers; replace it with a real model (`--model openai:MODEL`).
prompt: Please welcome Ada Lovelace.
turns:
  - text: Let me check the tools work first.
    tool_calls:
      - {{name: python_version, arguments: {{}}}}
  - text: Now the welcome.
    tool_calls:
      - {{name: welcome, arguments: {{name: Ada Lovelace}}}}
"""

_PYPROJECT = """\
[project]
name = "{name}"
version = "0.1.0"
requires-python = ">=3.11"
dependencies = ["{dist}"]

[tool.toolflow]
specs = ["specs"]
plugins = ["{package}"]
"""

_PRE_COMMIT = """\
# pre-commit (https://pre-commit.com): `pre-commit install`, then every commit lints the specs.
repos:
  - repo: local
    hooks:
      - id: toolflow-lint
        name: toolflow lint
        entry: toolflow lint
        language: system
        files: ^specs/.*\\.ya?ml$
        pass_filenames: false
"""

_WORKFLOW = """\
# GitHub Actions: lint the specs on every push, with annotations on the pull request.
name: toolflow
on: [push, pull_request]
jobs:
  specs:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with: {{python-version: "3.11"}}
      - run: pip install -e .
      - run: toolflow lint --output-format github
      - run: toolflow run --model scripted:sessions/hello.yaml
"""


_PLUGIN_PYPROJECT = """\
[build-system]
requires = ["setuptools>=69"]
build-backend = "setuptools.build_meta"

[project]
name = "{dist_name}"
version = "0.1.0"
description = "A toolflow plugin: the `{kind}:` implementation kind and its lint rule."
requires-python = ">=3.11"
dependencies = ["{dist}"]

[project.optional-dependencies]
test = ["pytest>=8", "pytest-trio>=0.8"]

[project.entry-points.toolflow]
{kind} = "{package}.plugin"

[tool.pytest.ini_options]
trio_mode = true
"""

_PLUGIN_MODULE = '''\
"""The `{kind}:` implementation kind: a tool whose result is a fixed greeting with the arguments filled in.

A spec writes ``{kind}: {{greeting: "Hello, {{name}}!"}}``; each call formats the greeting with
the validated arguments (Python's ``str.format_map``: an argument the greeting names but the
call lacks fails the call). Rule {code}101 reports an empty greeting.
"""

from collections.abc import Callable
from typing import Any

import toolflow

SCHEMA = {{
    "description": "A greeting whose {{name}} fields the arguments fill in.",
    "type": "object",
    "required": ["greeting"],
    "additionalProperties": False,
    "properties": {{"greeting": {{"type": "string", "description": "The text, with {{argument}} fields."}}}},
}}


def build(spec: toolflow.ToolSpec) -> Callable[..., Any]:
    """The callable of one tool: its greeting, formatted per call."""
    greeting = spec.implementation.config["greeting"]  # type: ignore[union-attr]

    async def run(**arguments: Any) -> str:
        return str(greeting.format_map(arguments))

    return run


KIND = toolflow.ImplementationKind(name="{kind}", schema=SCHEMA, build=build, description="A formatted greeting.")


def check_empty(ctx: toolflow.LintContext) -> Any:
    """Yield a diagnostic for each `{kind}:` tool whose greeting is empty."""
    for tool in ctx.tools:
        implementation = tool.implementation
        if implementation is not None and implementation.kind == "{kind}" and not implementation.config["greeting"]:
            yield EMPTY_GREETING.diag(tool, f"{{implementation.pointer}}/greeting", "the greeting is empty")


EMPTY_GREETING = toolflow.LintRule(
    code="{code}101",
    name="empty-greeting",
    severity=toolflow.Severity.ERROR,
    doc="""A `{kind}:` tool whose greeting is empty.

The model would get an empty result from every call.
""",
    check=check_empty,
)


@toolflow.hookimpl
def toolflow_register_kinds(register: Callable[[Any], None]) -> None:
    """Add the `{kind}:` kind."""
    register(KIND)


@toolflow.hookimpl
def toolflow_register_lint_rules(register: Callable[[Any], None]) -> None:
    """Add rule {code}101."""
    register(EMPTY_GREETING)
'''

_PLUGIN_TEST = '''\
"""Tests of the `{kind}:` kind, with toolflow's pytest plugin (fixtures `toolflow_plugins`, `toolflow_project`)."""

import toolflow

import {package}.plugin

SPEC = """
toolflow: 1
tools:
  hello:
    description: Greet someone.
    parameters:
      type: object
      properties:
        name: {{type: string, description: Who.}}
      required: [name]
    {kind}: {{greeting: "GREETING"}}
"""


async def test_a_tool_of_the_kind_answers(toolflow_plugins, toolflow_project):
    """The kind's tool formats its greeting with the arguments, through toolflow's own call."""
    toolflow_plugins.register({package}.plugin, "{kind}")
    toolflow_project.write_spec("tools.yaml", SPEC.replace("GREETING", "Hello, {{name}}!"))
    registry = toolflow_project.registry(toolflow_plugins)
    result = await toolflow.invoke(registry.get("hello"), {{"name": "Ada"}}, plugins=toolflow_plugins)
    assert (result.success, result.data) == (True, "Hello, Ada!")


def test_the_rule_reports_an_empty_greeting(toolflow_plugins, toolflow_project):
    """Rule {code}101 reports an empty greeting at its line (`toolflow lint` runs it once the plugin is installed)."""
    toolflow_plugins.register({package}.plugin, "{kind}")
    toolflow_project.write_spec("tools.yaml", SPEC.replace("GREETING", ""))
    loaded = toolflow_project.load(toolflow_plugins)
    context = toolflow.LintContext(files=loaded.files)
    found = list({package}.plugin.EMPTY_GREETING.check(context))
    assert [(d.code, d.line, d.message) for d in found] == [("{code}101", 10, "the greeting is empty")]
'''

_PLUGIN_CONFTEST = """\
pytest_plugins = ["toolflow.testing"]
"""

_PLUGIN_README = """\
# {dist_name}

A toolflow plugin: the `{kind}:` implementation kind and lint rule `{code}101`.

    pip install -e '.[test]'
    toolflow plugins        # lists {kind}: kind:{kind}, rule:{code}101
    pytest
"""


def plugin_files(name: str) -> dict[str, str]:
    """The files of a new plugin package called *name*: relative path to text."""
    words = name.lower().replace("-", " ").replace("_", " ").split()
    kind = "_".join(words)
    package = "toolflow_" + kind
    code = "".join(word[0] for word in words).upper()[:4] or "X"
    code = code if len(code) >= 2 else (kind[:3].upper())
    values = {
        "dist_name": "toolflow-" + "-".join(words),
        "dist": _distribution(),
        "kind": kind,
        "package": package,
        "code": code,
    }
    return {
        "pyproject.toml": _PLUGIN_PYPROJECT.format(**values),
        "README.md": _PLUGIN_README.format(**values),
        f"{package}/__init__.py": '"""The {dist_name} plugin of toolflow."""\n'.format(**values),
        f"{package}/plugin.py": _PLUGIN_MODULE.format(**values),
        "tests/conftest.py": _PLUGIN_CONFTEST,
        "tests/test_plugin.py": _PLUGIN_TEST.format(**values),
    }


def _distribution() -> str:
    """The name toolflow is published under (what a project depends on)."""
    return DISTRIBUTION


def project_files(name: str) -> dict[str, str]:
    """The files of a new project called *name*: relative path to text."""
    package = "_".join(name.lower().replace("-", " ").split()) + "_tools"
    dist = _distribution()
    return {
        "pyproject.toml": _PYPROJECT.format(name=name, dist=dist, package=package),
        "specs/tools.yaml": _SPECS.replace("{package}", package),
        f"{package}.py": _PLUGIN.replace("{package}", package),
        "sessions/hello.yaml": _SESSION.format(),
        ".pre-commit-config.yaml": _PRE_COMMIT,
        ".github/workflows/toolflow.yml": _WORKFLOW.format(),
        ".toolflow/spec-v1.schema.json": json.dumps(spec_schema(), indent=2) + "\n",
    }


def _write(root: Path, files: dict[str, str]) -> None:
    """Write *files* under *root*; a file that cannot be written is a usage error naming those written before it."""
    written: list[str] = []
    for path, text in files.items():
        target = root / path
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        except OSError as exc:
            done = f"written before it: {', '.join(written)}" if written else "nothing was written"
            msg = f"init: cannot write {target}: {exc.strerror or exc}; {done}"
            raise UsageError(msg) from None
        written.append(path)


def command(args: argparse.Namespace, stdout: TextIO) -> int:
    """Write a new project into ``args.directory``; 0, or a usage error when a file exists already."""
    root = Path(args.directory)
    name = args.plugin or args.name or root.resolve().name
    if not name or not name.replace("-", "").replace("_", "").isalnum() or not name[0].isalpha():
        msg = f"init: {name!r} is not a name (a letter, then letters, digits, '-' and '_'); give one with --name"
        raise UsageError(msg)
    files = plugin_files(name) if args.plugin else project_files(name)
    existing = sorted(path for path in files if (root / path).exists())
    if existing:
        msg = f"init: {root} already has {', '.join(existing)}; nothing was written (init never overwrites)"
        raise UsageError(msg)
    _write(root, files)
    what = "plugin" if args.plugin else "project"
    stdout.write(f"Created {what} {name!r} in {root}:\n")
    stdout.writelines(f"  {path}\n" for path in files)
    if args.plugin:
        stdout.write("Next, in that directory:\n  pip install -e '.[test]'\n  pytest\n")
        return 0
    stdout.write(
        "Next, in that directory:\n"
        "  toolflow lint\n"
        '  toolflow call welcome \'{"name": "Ada"}\'\n'
        "  toolflow run --model scripted:sessions/hello.yaml\n"
    )
    return 0
