"""The JSON Schema (draft-07) of a tool's ``http:`` key; plain data, so linting imports nothing else."""

from __future__ import annotations

from typing import Any

__all__ = ["ADDRESS_GROUPS", "DEFAULT_MAX_BYTES", "DEFAULT_RETRY_STATUS", "METHODS", "SCHEMA"]

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
DEFAULT_RETRY_STATUS = (429, 503)
DEFAULT_MAX_BYTES = 10 * 1024 * 1024

_STATUS_LIST: dict[str, Any] = {
    "type": "array",
    "items": {"type": "integer", "minimum": 100, "maximum": 599},
    "minItems": 1,
    "uniqueItems": True,
}

_SCALAR: dict[str, Any] = {"type": ["string", "number", "boolean"]}

ADDRESS_GROUPS = ("loopback", "private", "link-local", "metadata")
"""The named groups of networks ``deny_addresses`` and ``allow_addresses`` accept (``toolflow_http._network``)."""

_ADDRESSES: dict[str, Any] = {
    "type": "array",
    "items": {
        "type": "string",
        # A group, or something shaped like an IP network; the build checks that it is one.
        "pattern": f"^({'|'.join(ADDRESS_GROUPS)}|[0-9A-Fa-f.:]+(/[0-9]{{1,3}})?)$",
    },
}

SCHEMA: dict[str, Any] = {
    "description": (
        "An HTTP request whose response is the result: a URL (a GET), or a mapping with `url` and optionally "
        "`method`, `headers`, `query`, `json`, `env`, `timeout`, `ok_status`, `retry_status`, `response`, "
        "`follow_redirects`, `max_bytes`, `deny_addresses` and `allow_addresses`. String values are sandboxed Jinja2 "
        "templates over the arguments."
    ),
    "type": ["string", "object"],
    "minLength": 1,
    "required": ["url"],
    "additionalProperties": False,
    "properties": {
        "method": {"enum": list(METHODS), "description": "The HTTP method (default GET)."},
        "url": {
            "type": "string",
            "minLength": 1,
            "description": (
                "An absolute http or https URL. Each `{{ expression }}` is percent-encoded (nothing but letters, "
                "digits and `-._~` stays as it is), so an argument fills one path segment or query value and "
                "cannot add `/`, `?`, `#` or `&`; `{{ value | safe }}` inserts a value as it is."
            ),
        },
        "headers": {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "description": (
                "Request headers; values are templates (a header whose value is an unset argument is left out)."
            ),
        },
        "query": {
            "type": "object",
            "additionalProperties": {"anyOf": [_SCALAR, {"type": "array", "items": _SCALAR}]},
            "description": (
                "Query parameters, URL-encoded by the client; values are templates. `{{ name }}` alone keeps the "
                "argument's type (a list repeats the parameter); an unset argument or null leaves the parameter out."
            ),
        },
        "json": {
            "description": (
                "The request body, sent as JSON. Strings anywhere inside are templates; a string that is one "
                "`{{ expression }}` becomes the expression's value with its type (a key whose value is an unset "
                "argument is left out)."
            ),
        },
        "env": {
            "type": "array",
            "items": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
            "description": "Environment variables the templates may read as `env.NAME`, read at call time.",
        },
        "timeout": {
            "type": ["string", "number"],
            "pattern": "^\\s*[0-9]+(\\.[0-9]+)?\\s*(ms|s|m|h)\\s*$",
            "exclusiveMinimum": 0,
            "description": "Time limit of the whole request, like `10s` (default: the tool's `timeout`).",
        },
        "ok_status": dict(_STATUS_LIST, description="Statuses that make the call a success (default: 200-299)."),
        "retry_status": dict(
            _STATUS_LIST, description="Failure statuses flagged retryable, with their Retry-After (default [429, 503])."
        ),
        "response": {
            "enum": ["auto", "json", "text"],
            "description": (
                "How to read the body: `auto` (default) parses JSON content types, `json` always, `text` never."
            ),
        },
        "follow_redirects": {
            "type": "boolean",
            "description": (
                "Follow redirects (default true), at most 20. A hop to another origin (scheme, host or port) drops "
                "every header of `headers` and the request body."
            ),
        },
        "max_bytes": {
            "type": "integer",
            "minimum": 1,
            "description": "Largest response body read, counted after its Content-Encoding is undone (default 10 MiB).",
        },
        "deny_addresses": dict(
            _ADDRESSES,
            description=(
                "Also refuse connections to these addresses, checked after DNS resolution on every redirect hop: "
                "`loopback`, `private`, or IP networks like `10.1.0.0/16`. Link-local and cloud-metadata addresses "
                "are always refused (unless `allow_addresses` names them)."
            ),
        ),
        "allow_addresses": dict(
            _ADDRESSES,
            description=(
                "Exceptions to the refused addresses, like `169.254.170.2` (the host names of metadata services stay "
                "refused)."
            ),
        ),
    },
}
"""The ``http:`` key's schema; the loader and ``toolflow lint`` check specs against it."""
