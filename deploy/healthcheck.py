# ruff: noqa: INP001 - a script copied into the image, not a package module
"""The container's health check: does ``toolflow serve`` answer HTTP at the URL given?

``toolflow serve`` has no health endpoint of its own; what can be checked from outside without a
token is that its HTTP server answers requests on ``/mcp``. A ``GET`` without a token gets 401
(with tokens) or 405/406 (a ``GET`` that does not ask for an event stream): any answer below 500
means the server is up and its app answering. Exit 0 when it is, 1 when not (no answer, or 5xx).
Standard library only: the image has no curl.
"""

from __future__ import annotations

import sys
import urllib.error
import urllib.request

TIMEOUT = 4.0
"""Seconds to wait for the answer (the HEALTHCHECK's own timeout is 5 s)."""


def healthy(url: str) -> bool:
    """Whether the server at *url* answers with a status below 500."""
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT) as response:  # noqa: S310 - the URL is the check's own
            status = int(response.status)
    except urllib.error.HTTPError as error:
        status = error.code
    except (OSError, ValueError):
        return False
    return status < 500


if __name__ == "__main__":
    sys.exit(0 if healthy(sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000/mcp") else 1)
