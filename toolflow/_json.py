"""JSON on the hot paths: the standard library's own C scanner and encoder, without their Python wrappers.

Every tool call decodes its arguments and every result is written as JSON, and for documents
of a few dozen bytes :func:`json.loads` and :meth:`json.JSONEncoder.encode` spend most of their
time in Python-level wrappers: three calls and two regular-expression matches around the C
scanner, and a C encoder object built anew for every document. :func:`loads` and
:func:`encoder` call the same C accelerators directly and hand everything they do not cover to
the documented API, so values, text and error messages are exactly :mod:`json`'s
(``tests/test_json.py`` checks that with hypothesis). Without the C accelerators (other Python
implementations) they are the documented API.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from json.encoder import c_make_encoder, encode_basestring, encode_basestring_ascii  # type: ignore[attr-defined]
from typing import Any

__all__ = ["decode_problem", "encoder", "loads"]

_scan_once = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def loads(text: str | bytes | bytearray) -> Any:
    """``json.loads(text)``: the same value, or the same error.

    A string that starts with a value and ends where it ends (no whitespace around it, the
    shape every model and serializer writes) goes straight to the scanner; anything else, and
    every error, goes through :func:`json.loads`, which decides.

    Raises:
        json.JSONDecodeError: *text* is not JSON.
        RecursionError: *text* nests too deeply.
    """
    if type(text) is str:
        try:
            value, end = _scan_once(text, 0)
        except Exception:  # noqa: BLE001 - json.loads raises the error, with its own message
            return json.loads(text)
        if end == len(text):
            return value
    return json.loads(text)


def decode_problem(error: ValueError | RecursionError) -> str:
    """Why :func:`loads` (or :func:`json.loads`) refused a text, for a message that names no internals.

    The decoder's own words for text that is not JSON, ``nested too deeply`` past Python's
    recursion limit, and Python's limit on a number's digits without its advice to programmers
    (``Exceeds the limit (4300 digits) for integer string conversion: value has 5000 digits``).
    Every reader of JSON from outside catches ``(ValueError, RecursionError)`` and says this.
    """
    if isinstance(error, RecursionError):
        return "nested too deeply"
    if isinstance(error, json.JSONDecodeError):
        return str(error)
    return str(error).split(";", 1)[0]


def encoder(
    *,
    ensure_ascii: bool = True,
    allow_nan: bool = True,
    sort_keys: bool = False,
    default: Callable[[Any], Any] | None = None,
    separators: tuple[str, str] = (",", ":"),
) -> Callable[[Any], str]:
    """A function writing JSON as ``json.JSONEncoder(...).encode`` does (compact unless *separators* say otherwise).

    The C encoder is built once and called without checking for circular references; a
    cycle, which overflows its recursion guard instead, and every other error are handed to
    the documented encoder, which raises its own error (``ValueError: Circular reference
    detected``, ``TypeError: Object of type set is not JSON serializable``, ...). So for a value
    that fails, *default* may be called twice on the same object: it should have no side effects.
    """
    stdlib = json.JSONEncoder(
        ensure_ascii=ensure_ascii, allow_nan=allow_nan, sort_keys=sort_keys, default=default, separators=separators
    ).encode
    if c_make_encoder is None:
        return stdlib
    try:
        # The arguments JSONEncoder.iterencode passes (CPython 3.11 to 3.14).
        make = c_make_encoder(
            None,  # no markers: no check for cycles (see above)
            default if default is not None else json.JSONEncoder().default,
            encode_basestring_ascii if ensure_ascii else encode_basestring,
            None,  # no indent
            separators[1],  # between a key and its value
            separators[0],  # between items
            sort_keys,
            False,  # noqa: FBT003 - skipkeys, positional in the C signature
            allow_nan,
        )
    except TypeError:  # a Python whose C encoder takes other arguments
        return stdlib
    join = "".join

    def encode(value: Any) -> str:
        try:
            return join(make(value, 0))
        except Exception:  # noqa: BLE001 - the documented encoder raises the error, with its own message
            return stdlib(value)

    return encode
