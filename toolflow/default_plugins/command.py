"""The built-in ``command:`` implementation kind: run a program from an argv list, never through a shell.

Each argv item is a template, compiled once per tool and rendered per call
with the validated arguments as variables (all of them in one job of a template
worker, under the tool's timeout and the per-render budget), so an argument such as
``; rm -rf /`` or ``$(id)`` reaches the program as one literal argument. Command
templates see only the arguments: ``env.NAME`` is refused (write ``${NAME}``
in the spec to use a variable of the environment; the loader fills it in).
``cwd`` and the values of ``env`` are used as written, not templated; ``env``
is added to the inherited environment.

The program runs in its own session (and so its own process group), with
stdin from ``/dev/null``; stdout and stderr are read as they arrive and the
first ``max_output`` bytes of each are kept (the rest is read and dropped, and
``truncated`` is set), so a chatty program never fills memory. When the program
exits, whatever it left running in its process group is killed (a daemon must
detach with its own session). When the call is cancelled (a timeout, a stop),
the whole process group is killed with ``SIGKILL`` and the program reaped
before the cancellation goes on.

The result is ``{"success": exit status in success_codes, "data": {"exit_code",
"stdout", "stderr", "truncated"}}`` (``success_codes`` defaults to ``[0]``), with
``"error": "command exited with status N: <first line of stderr>"`` on failure. A program that cannot be started (not
found, not executable, a missing working directory) is a failure result too.

With ``output: json`` a program that succeeds has its stdout parsed as JSON, as a
``template:`` with ``output: json`` has its rendering (a parsed object with a
``success`` key is a result dict); stderr is then dropped. Stdout that is not
JSON, or that was cut at ``max_output``, is a failure naming it, with the text
result's ``data``. A non-zero exit is the same failure as with ``output: text``:
stdout is not parsed, since a failing program rarely finishes its document.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from toolflow import hookspecs
from toolflow._model import ToolSpec
from toolflow._plugins import ImplementationKind

__all__ = ["KIND", "SCHEMA", "build", "toolflow_register_kinds"]

SCHEMA: Mapping[str, Any] = {
    "description": (
        "A program to run, never through a shell: an argv list whose items are templated like `template`,"
        " or a mapping with `argv`."
    ),
    "type": ["array", "object"],
    "items": {"type": "string"},
    "required": ["argv"],
    "additionalProperties": False,
    "properties": {
        "argv": {
            "type": "array",
            "items": {"type": "string"},
            "description": "The program and its arguments; each item is a template.",
        },
        "cwd": {"type": "string", "description": "Working directory (default: the current directory)."},
        "env": {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "description": "Extra environment variables for the program.",
        },
        "max_output": {
            "type": "integer",
            "minimum": 1,
            "description": "Bytes of stdout and of stderr kept (default 65536).",
        },
        "output": {
            "enum": ["text", "json"],
            "description": (
                "`text` (default): the result's data holds exit code, stdout and stderr;"
                " `json`: stdout is parsed as JSON into the result's data."
            ),
        },
        "success_codes": {
            "type": "array",
            "items": {"type": "integer", "minimum": 0, "maximum": 255},
            "minItems": 1,
            "uniqueItems": True,
            "description": (
                "Exit statuses that mean success (default `[0]`; `grep` says 1 when nothing matched: `[0, 1]`)."
            ),
        },
    },
}
"""JSON Schema (draft-07) of the ``command:`` value; the same as the spec schema's ``definitions/command``."""


def build(spec: ToolSpec) -> Callable[..., Coroutine[Any, Any, object]]:
    """Compile the argv templates of *spec* and return the async callable that runs the program per call.

    The runner (``toolflow.default_plugins._command_run``) is imported here, when a command tool
    is built: registering the kind, and linting, load nothing of it.

    Raises:
        TemplateError: The argv is empty or one of its items does not compile.
    """
    from toolflow.default_plugins import _command_run  # noqa: PLC0415 - imported when a command tool is built

    return _command_run.build(spec)


KIND = ImplementationKind(
    name="command",
    schema=SCHEMA,
    build=build,
    description="A program run from an argv list of templates, never through a shell; its exit status decides.",
)


@hookspecs.hookimpl
def toolflow_register_kinds(register: Callable[[Any], None]) -> None:
    """Register the ``command`` kind."""
    register(KIND)
