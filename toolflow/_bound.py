"""Parameters bound to the caller's context (issue 21 section 4): filled by the engine, never by the model.

A tool's ``context: {parameter: path}`` binds each parameter to a dotted path into the caller's
context (:func:`toolflow._context.providing_context`). The exports leave bound parameters out
(:func:`toolflow._export.input_schema`), so the model never sees them; every call of the tool,
from any door (``toolflow call``, ``run``, ``serve``, pipelines' steps, the Python API), goes
through :func:`bind` before its arguments are validated:

- arguments that set a bound parameter are refused (a model-readable ``Error: `` result naming
  it), or their values dropped under the policy's ``bound_arguments: ignore``: the context is
  never overridden, by the model or by a pipeline step's ``with:``;
- each bound parameter whose path has a value in the context gets it; the value is then validated
  with the rest, against the tool's schema;
- a bound parameter the schema requires whose path has no value refuses the call: the caller gave
  no context (no principal, no ``--context``), or not that part of it. An optional one is left out.
"""

from __future__ import annotations

from collections.abc import Mapping

from toolflow._context import current_context
from toolflow._model import MISSING, ToolSpec, look_up
from toolflow._results import ToolResult

__all__ = ["bind"]


def bind(spec: ToolSpec, arguments: object, *, ignore_sent: bool = False) -> object:
    """*arguments* with the parameters *spec* binds filled from the caller's context, or the refusal.

    Arguments that set a bound parameter are refused, or with *ignore_sent* (the policy's
    ``bound_arguments: ignore``) have those values dropped: either way the context's value is
    the one the tool gets. Arguments that are not a JSON object are returned as they are
    (validation answers them). Returns a new dict (the caller's is not changed) or a failure
    :class:`ToolResult`.
    """
    if not isinstance(arguments, Mapping):
        return arguments
    sent = [name for name in spec.context if name in arguments]
    if sent and ignore_sent:
        arguments = {name: value for name, value in arguments.items() if name not in spec.context}
    elif sent:
        listed = ", ".join(repr(name) for name in sent)
        noun = "parameter" if len(sent) == 1 else "parameters"
        return ToolResult.failure(
            f"Error: {spec.name}: the {noun} {listed} is set by the application, not by you; "
            f"call {spec.name} again without it."
        )
    context = current_context()
    filled = dict(arguments)
    required = spec.parameters.get("required", ())
    for name, path in spec.context.items():
        value = look_up(context, path)
        if value is not MISSING:
            filled[name] = value
        elif isinstance(required, list) and name in required:
            return ToolResult.failure(
                f"Error: {spec.name} cannot be called here: its parameter {name!r} comes from the "
                f"application's context ({path!r}), and the caller gave no value there."
            )
    return filled
