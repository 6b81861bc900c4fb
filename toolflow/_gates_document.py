"""The gates document: the JSON shape of :meth:`toolflow._gates.Gates.dump`, said once for all its readers.

A gates document reaches ``Gates.restore`` (and ``RuleBook.restore`` for its ``rules``) from
outside the process by two doors, and both check it against :data:`GATES_SCHEMA` first, since
``restore`` indexes it without checks of its own:

- a saved run (:mod:`toolflow._run_state`), a file the user hands back: its JSON Schema holds
  this one as its ``"gates"`` record, so a bad document is refused with the saved run's message;
- a conversation's part of the fleet's stored document (:mod:`toolflow._conversation`): one
  that fails :func:`gates_ok` is read as nothing stored.

The shape (names are tool names; counts are whole numbers of at least 0)::

    {"rules": null | {"turn_calls": {name: count}, "run_calls": {name: count},
                      "last": null | name, "called": bool, "succeeded": [name]},
     "succeeded_loop": [name], "succeeded_session": [name]}

:data:`NAMES`, :data:`COUNT`, :data:`COUNTS` and :func:`record` are the pieces it is built from,
for the saved run's schema to use too. This module is in the schemas layer: data, and a
compiled validator (``jsonschema_rs``, as the engine's argument checks).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from toolflow._schemas import fast_validator

__all__ = ["COUNT", "COUNTS", "GATES_SCHEMA", "NAMES", "gates_ok", "record"]

NAMES: dict[str, Any] = {"type": "array", "items": {"type": "string"}}
"""A list of names (tools)."""

COUNT: dict[str, Any] = {"type": "integer", "minimum": 0}
"""A count: a whole number of at least 0."""

COUNTS: dict[str, Any] = {"type": "object", "additionalProperties": COUNT}
"""A count per name."""


def record(properties: Mapping[str, Any], *, optional: Sequence[str] = ()) -> dict[str, Any]:
    """A JSON Schema object with exactly *properties*, all required but *optional*."""
    return {
        "type": "object",
        "properties": dict(properties),
        "required": [name for name in properties if name not in optional],
        "additionalProperties": False,
    }


GATES_SCHEMA: dict[str, Any] = record(
    {
        "rules": {
            "oneOf": [
                {"type": "null"},
                record(
                    {
                        "turn_calls": COUNTS,
                        "run_calls": COUNTS,
                        "last": {"type": ["string", "null"]},
                        "called": {"type": "boolean"},
                        "succeeded": NAMES,
                    }
                ),
            ]
        },
        "succeeded_loop": NAMES,
        "succeeded_session": NAMES,
    }
)
"""The JSON Schema (2020-12) of a gates document (see the module's docstring)."""


@functools.cache
def _validator() -> Any:
    return fast_validator(GATES_SCHEMA)


def gates_ok(document: object) -> bool:
    """Whether *document* is a gates document (:data:`GATES_SCHEMA`), which ``Gates.restore`` may take."""
    return bool(_validator().is_valid(document))
