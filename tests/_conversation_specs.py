"""The spec the conversation tests share: ``test_conversation.py`` (engines in process) and ``test_serve_conversation.py`` (serve).

Four tools whose state a conversation keeps from one request to the next: ``login`` and
``fetch`` (``depends_on: [login]``), ``stamp`` (a fresh stamp per run, kept in the session
cache; each test module says how it runs) and ``limited`` (``max_calls: {per_run: 2}``).
"""

from __future__ import annotations

_TOOLS = """\
toolflow: 1
tools:
  login:
    description: Logs in.
    template: "logged in"
  fetch:
    description: Fetches what only a logged-in caller may.
    depends_on: [login]
    template: "fetched"
  stamp:
    description: A fresh stamp per run; kept in the session cache.
    cache: {scope: session}
    parameters:
      type: object
      properties:
        topic: {type: string, description: What the stamp is for}
      required: [topic]
    %s
  limited:
    description: At most twice per conversation.
    template: "done"
"""

_RULES = """\
  rules:
    - tool: limited
      max_calls: {per_run: 2}
"""


def conversation_spec(stamp: str, *, more_tools: str = "", policy: str = "") -> str:
    """The spec file's text.

    Args:
        stamp: The line that says how ``stamp`` runs (``implementation: ...`` or ``command: [...]``).
        more_tools: More tools' text, indented as entries of ``tools:``.
        policy: More of the ``policy:`` mapping (``categories:``, indented), before its ``rules:``.
    """
    return _TOOLS % stamp + more_tools + "policy:\n" + policy + _RULES
