"""Frozen attrs records built without their ``__init__``, for the hot paths of a call and of a loop turn.

Every tool call and every turn of the agent loop builds a handful of frozen records (the call,
its result, its history entry, the turn's request, response, decision and record). A frozen
attrs ``__init__`` sets each field through ``object.__setattr__`` and runs the field's
converter and validator; for records whose fields are already in their final form that costs
more than the trivial tool call they describe. :func:`unchecked_init` writes, once per class, a
function with the ``__init__``'s keyword-only parameters (with the same defaults) that sets
each slot directly.

The caller guarantees what the converters and validators would have ensured: use it only
where the values are known to be in their final form (a tuple where a converter would make
one, a read-only mapping where it would freeze one, ...). ``tests/test_records.py`` checks that
each such function builds the record ``__init__`` builds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import attrs

__all__ = ["unchecked_init"]

_T = TypeVar("_T")


def unchecked_init(cls: type[_T]) -> Callable[..., _T]:
    """A function building *cls* from its fields as its ``__init__`` does, minus converters and validators.

    Raises:
        TypeError: *cls* is not a slotted attrs class, or a field has a factory default or is
            not set by ``__init__``.
    """
    if not attrs.has(cls):
        msg = f"{cls.__name__} is not an attrs class"
        raise TypeError(msg)
    fields = attrs.fields(cls)
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    parameters: list[str] = []
    lines: list[str] = []
    for index, field in enumerate(fields):
        if not field.init or isinstance(field.default, attrs.Factory):  # type: ignore[arg-type]
            msg = f"{cls.__name__}.{field.name}: only fields set by __init__, without factories, can be set directly"
            raise TypeError(msg)
        descriptor: Any = next((k.__dict__[field.name] for k in cls.__mro__ if field.name in k.__dict__), None)
        if not hasattr(descriptor, "__set__"):
            msg = f"{cls.__name__} is not a slotted attrs class"
            raise TypeError(msg)
        namespace[f"_set{index}"] = descriptor.__set__
        name = field.alias or field.name
        if field.default is attrs.NOTHING:
            parameters.append(name)
        else:
            namespace[f"_default{index}"] = field.default
            parameters.append(f"{name}=_default{index}")
        lines.append(f"    _set{index}(record, {name})")
    source = "\n".join(
        [f"def make(*, {', '.join(parameters)}):", "    record = _new(_cls)", *lines, "    return record"]
    )
    exec(compile(source, f"<unchecked_init {cls.__qualname__}>", "exec"), namespace)  # noqa: S102 - generated from the field names above
    make: Callable[..., _T] = namespace["make"]
    make.__qualname__ = make.__name__ = f"unchecked_{cls.__name__}"
    make.__doc__ = f"``{cls.__name__}(...)`` without converters and validators (see toolflow._records)."
    return make
