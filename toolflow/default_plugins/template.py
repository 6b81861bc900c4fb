"""The built-in ``template:`` implementation kind: a sandboxed Jinja2 template whose rendering is the result.

The template is compiled once per tool, when the tool is built. Each call
renders it with the validated arguments as variables, plus ``env`` holding
exactly the environment variables the spec lists (read at call time). An
argument named ``env`` hides the environment, so a tool that lists variables
may not also have a parameter called ``env``.

With ``output: text`` (the default) the rendering is the result; with
``output: json`` it is parsed, and a parsed object with a ``success`` key is a
result dict like any implementation's. A rendering that fails (an undefined
variable, a refused attribute, an unlisted environment variable) or JSON that
does not parse is a failure result, ``{"success": false, "error": ...}``; only
cancellation escapes a call.

Every rendering runs in a template worker process (``toolflow.render_template``), under the
tool's timeout and the per-render memory budget: a template that loops or grows past either
fails its call alone, and its worker is killed, so it never slows the engine or another call.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from toolflow import hookspecs
from toolflow._model import ToolSpec
from toolflow._plugins import ImplementationKind

__all__ = ["KIND", "SCHEMA", "build", "json_output", "toolflow_register_kinds"]

SCHEMA: Mapping[str, Any] = {
    "description": (
        "A sandboxed Jinja2 template whose rendering is the result; the arguments are its variables"
        " (`{{ name }}`). A string, or a mapping with `source`."
    ),
    "type": ["string", "object"],
    "required": ["source"],
    "additionalProperties": False,
    "properties": {
        "source": {"type": "string", "description": "The template text."},
        "env": {
            "type": "array",
            "items": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
            "description": "Environment variables the template may read, as `env.NAME`.",
        },
        "output": {
            "enum": ["text", "json"],
            "description": "`text` (default): the rendering is the result; `json`: the rendering is parsed as JSON.",
        },
    },
}
"""JSON Schema (draft-07) of the ``template:`` value; the same as the spec schema's ``definitions/template``."""

_PREVIEW_CHARS = 60


def build(spec: ToolSpec) -> Callable[..., Coroutine[Any, Any, object]]:
    """Compile the template of *spec* and return the async callable that renders it per call.

    Raises:
        TemplateError: The template does not compile, or the tool both lists
            environment variables and has a parameter named ``env``.
    """
    from toolflow._rendering import render_template  # noqa: PLC0415
    from toolflow._templates import TemplateEnv, TemplateError, TemplateProblem, compile_template  # noqa: PLC0415

    config = _config(spec)
    if config is None:
        msg = "the tool has no template source"
        raise TemplateError(msg)
    template = compile_template(config["source"])
    if isinstance(template, TemplateProblem):
        msg = f"the template does not compile (line {template.line}): {template.message}"
        raise TemplateError(msg, line=template.line)
    listed: tuple[str, ...] = tuple(config["env"])
    properties = spec.parameters.get("properties") if isinstance(spec.parameters, Mapping) else None
    if listed and isinstance(properties, Mapping) and "env" in properties:
        msg = "the parameter 'env' would hide the environment variables the template lists"
        raise TemplateError(msg)
    as_json = config["output"] == "json"

    async def run(**arguments: Any) -> object:
        variables = {"env": TemplateEnv(listed, os.environ), **arguments}
        try:
            text = await render_template(template, variables)
        except TemplateError as exc:
            return {"success": False, "error": str(exc)}
        if not as_json:
            return text
        try:
            return json_output(text, "template output")
        except ValueError as exc:
            return {"success": False, "error": str(exc)}

    run.__name__ = run.__qualname__ = f"template:{spec.name}"
    return run


def _config(spec: ToolSpec) -> dict[str, Any] | None:
    """The tool's ``template`` settings, normalised as the loader does; ``None`` without a source."""
    config = next((impl.config for impl in spec.implementations if impl.kind == "template"), None)
    if isinstance(config, str):
        config = {"source": config}
    if not isinstance(config, Mapping) or not isinstance(config.get("source"), str):
        return None
    return {"source": config["source"], "env": list(config.get("env") or ()), "output": config.get("output", "text")}


def json_output(text: str, what: str) -> object:
    """*text* parsed as JSON (``NaN`` and ``Infinity`` refused): the ``output: json`` of ``template`` and ``command``.

    Raises:
        ValueError: *text* is not JSON (or nests past Python's recursion limit); the message
            names *what* and shows the start of *text*.
    """
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except ValueError as exc:
        preview = text if len(text) <= _PREVIEW_CHARS else text[:_PREVIEW_CHARS] + "..."
        msg = f"{what} is not valid JSON ({exc}): {preview!r}"
        raise ValueError(msg) from None
    except RecursionError:
        msg = f"{what} nests too deeply to be read as JSON"
        raise ValueError(msg) from None


def _refuse_constant(name: str) -> object:
    msg = f"{name} is not JSON"
    raise ValueError(msg)


KIND = ImplementationKind(
    name="template",
    schema=SCHEMA,
    build=build,
    description="A sandboxed Jinja2 template rendered with the arguments; its text (or parsed JSON) is the result.",
)


@hookspecs.hookimpl
def toolflow_register_kinds(register: Callable[[Any], None]) -> None:
    """Register the ``template`` kind."""
    register(KIND)
