"""A small MCP server, written with the `mcp` SDK, whose tools examples/remote/remote.yaml imports.

It stands for any third-party MCP server (a filesystem, a search engine, a ticket system): toolflow
starts it as a subprocess, lists its tools, and calls them over stdio. Run it alone with
``python examples/remote/lore_server.py`` (it then waits for an MCP client on standard input).
"""

from __future__ import annotations

import random

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

server = MCPServer("lore")

LORE = {
    "brannoc": "Brannoc the smith mends blades at the smithy by the north gate; he owes the mayor a favour.",
    "aldric": "Aldric is a travelling knight whose sword broke on the road from Varn.",
    "varn": "Varn is the river town two days south, known for its salt and its bridge tolls.",
}


@server.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True), structured_output=False)
def lookup(term: str) -> str:
    """Look up what the lore book says about a person or a place."""
    entry = LORE.get(term.strip().lower())
    if entry is None:
        msg = f"the lore book has no entry for {term!r}; it knows {', '.join(sorted(LORE))}"
        raise ToolError(msg)
    return entry


@server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=False)
def roll(sides: int = 20) -> str:
    """Roll one die with the given number of sides."""
    return str(random.randint(1, max(sides, 2)))  # noqa: S311 - a game die, not a secret


@server.tool(annotations=ToolAnnotations(destructive_hint=True), structured_output=False)
def forget(term: str) -> str:
    """Tear the page about a person or a place out of the lore book."""
    LORE.pop(term.strip().lower(), None)
    return f"the page about {term} is gone"


if __name__ == "__main__":
    server.run("stdio")
