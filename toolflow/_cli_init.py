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
import importlib.metadata
import json
from pathlib import Path
from typing import TextIO

from toolflow._errors import UsageError
from toolflow._schemas import spec_schema

__all__ = ["command", "project_files"]

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


def _distribution() -> str:
    """The name toolflow is installed under (what a project depends on)."""
    names = importlib.metadata.packages_distributions().get("toolflow") or ["toolflow"]
    return min(names)


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


def command(args: argparse.Namespace, stdout: TextIO) -> int:
    """Write a new project into ``args.directory``; 0, or a usage error when a file exists already."""
    root = Path(args.directory)
    name = args.name or root.resolve().name
    if not name or not name.replace("-", "").replace("_", "").isalnum():
        msg = f"init: {name!r} is not a project name (letters, digits, '-' and '_'); give one with --name"
        raise UsageError(msg)
    files = project_files(name)
    existing = sorted(path for path in files if (root / path).exists())
    if existing:
        msg = f"init: {root} already has {', '.join(existing)}; nothing was written (init never overwrites)"
        raise UsageError(msg)
    for path, text in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    stdout.write(f"Created project {name!r} in {root}:\n")
    for path in files:
        stdout.write(f"  {path}\n")
    stdout.write(
        "Next, in that directory:\n"
        "  toolflow lint\n"
        '  toolflow call welcome \'{"name": "Ada"}\'\n'
        "  toolflow run --model scripted:sessions/hello.yaml\n"
    )
    return 0
