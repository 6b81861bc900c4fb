"""A hostile MCP server over stdio: raw JSON-RPC lines, written by hand, so that it can send anything.

    python tests/_mcp_hostile_server.py [LISTING]

It answers ``initialize`` and lists the tools of LISTING (default ``results``: one tool per hostile
answer below; other listings attack ``tools/list`` itself). Calling a tool answers as its name
says; what the SDK's own servers would never send is the point. Standard error gets nothing.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from typing import Any

OPEN = {"type": "object", "properties": {}}
MB = 1024 * 1024


def tool(name: str, schema: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """A listed tool named *name*."""
    return {"name": name, "description": f"The hostile {name}.", "inputSchema": schema or OPEN, **extra}


RESULTS: dict[str, Any] = {
    "huge_text": lambda: {"content": [{"type": "text", "text": "x" * (200 * MB)}]},
    "long_text": lambda: {"content": [{"type": "text", "text": "x" * (24 * MB)}]},
    "deep_structured": lambda: {"content": [], "structuredContent": {"deep": "DEEP"}},
    "big_number": lambda: {"content": [], "structuredContent": {"n": int("9" * 5000)}},
    "blob": lambda: {
        "content": [
            {"type": "image", "data": "QUJD" * (25 * MB), "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "file:///b", "blob": "QUJD" * 1000, "mimeType": "x/y"}},
            {"type": "resource_link", "uri": "file:///etc/passwd", "name": "passwd"},
            {"type": "audio", "data": "QUJD", "mimeType": "audio/wav"},
        ]
    },
    "error_empty": lambda: {"content": [], "isError": True},
    "error_structured": lambda: {"content": [], "structuredContent": {"why": "quota"}, "isError": True},
    "off_schema": lambda: {"content": [], "structuredContent": {"sum": "not a number"}},
}
"""The answer of each tool of the ``results`` listing."""

LISTINGS: dict[str, Any] = {
    "results": lambda: [
        *(tool(name) for name in RESULTS if name != "off_schema"),
        tool("off_schema", outputSchema={"type": "object", "properties": {"sum": {"type": "number"}}}),
        tool("silent"),
        tool("wrong_id"),
        tool("chatty"),
        tool("big_log"),
        tool("asks_back"),
        tool("garbage"),
    ],
    "names": lambda: [tool("bell\x07\x1b[2J"), tool("n" * 10_000), tool("fine"), tool("fine")],
    "huge_description": lambda: [{**tool("wordy"), "description": "w" * (10 * MB)}, tool("fine")],
    "huge_schema": lambda: [
        tool("sprawling", {"type": "object", "properties": {"a": {"enum": [f"v{i}" for i in range(100_000)]}}}),
        tool("fine"),
    ],
    "refs": lambda: [
        tool("remote_ref", {"type": "object", "properties": {"a": {"$ref": "http://127.0.0.1:8765/schema.json"}}}),
        tool("recursive_ref", {"type": "object", "$ref": "#"}),
        tool("recursive_def", {"type": "object", "$defs": {"x": {"$ref": "#/$defs/x"}}, "$ref": "#/$defs/x"}),
        tool(
            "evil_pattern",
            {"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}}, "required": ["s"]},
        ),
        tool("fine"),
    ],
}


def send(message: dict[str, Any]) -> None:
    """Write one JSON-RPC message (one line); the string "DEEP" in it is a list nested 10,000 levels."""
    # json.dumps itself cannot write that deep a value.
    sys.stdout.write(json.dumps(message).replace('"DEEP"', "[" * 10_000 + "1" + "]" * 10_000) + "\n")
    sys.stdout.flush()


def answer_call(request_id: Any, name: str) -> None:
    """Answer ``tools/call`` of *name* as hostilely as its name says."""
    if name == "silent":
        return  # never answers
    if name == "wrong_id":
        send({"jsonrpc": "2.0", "id": 987654321, "result": {"content": [{"type": "text", "text": "stray"}]}})
        return
    if name == "chatty":
        for i in range(100_000):
            send({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": i}})
    elif name == "big_log":
        send({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "l" * 100 * MB}})
    elif name == "asks_back":
        for i, method in enumerate(("sampling/createMessage", "elicitation/create", "roots/list")):
            send({"jsonrpc": "2.0", "id": f"back{i}", "method": method, "params": {}})
    elif name == "garbage":
        sys.stdout.write("this is not JSON\n")
    result = RESULTS.get(name, lambda: {"content": [{"type": "text", "text": f"{name} done"}]})()
    send({"jsonrpc": "2.0", "id": request_id, "result": result})


def main() -> None:
    """Answer requests line by line until standard input ends."""
    listing = LISTINGS[sys.argv[1] if len(sys.argv) > 1 else "results"]
    for line in sys.stdin:
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if request_id is None or method is None:
            continue  # notifications, and the answers to our requests back
        if method == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {"listChanged": True}, "logging": {}},
                "serverInfo": {"name": "hostile", "version": "1"},
            }
            send({"jsonrpc": "2.0", "id": request_id, "result": result})
            send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": listing()}})
        elif method == "tools/call":
            answer_call(request_id, message["params"]["name"])
        else:
            send({"jsonrpc": "2.0", "id": request_id, "result": {}})


async def http_app(scope: dict[str, Any], receive: Any, send_event: Any) -> None:
    """Streamable HTTP, JSON answers only: every tools/call is answered with a body of ``HOSTILE_BODY_MB`` MB."""
    if scope["type"] != "http":
        return
    body = b""
    while True:
        event = await receive()
        body += event.get("body", b"")
        if not event.get("more_body"):
            break
    message = json.loads(body) if body else {}
    method, request_id = message.get("method"), message.get("id")
    headers = [(b"content-type", b"application/json"), (b"mcp-session-id", b"hostile")]
    if request_id is None:
        await send_event({"type": "http.response.start", "status": 202, "headers": headers})
        await send_event({"type": "http.response.body", "body": b""})
        return
    if method == "initialize":
        result: Any = {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "hostile", "version": "1"},
        }
    elif method == "tools/list":
        result = {"tools": [tool("huge_json")]}
    else:
        result = {"content": [{"type": "text", "text": "x" * (int(os.environ.get("HOSTILE_BODY_MB", "200")) * MB)}]}
    await send_event({"type": "http.response.start", "status": 200, "headers": headers})
    await send_event(
        {
            "type": "http.response.body",
            "body": json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode(),
        }
    )


def serve_http() -> None:
    """Serve http_app on a free loopback port, printing ``URL http://127.0.0.1:PORT/mcp`` first."""
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    print(f"URL http://127.0.0.1:{sock.getsockname()[1]}/mcp", flush=True)
    uvicorn.Server(uvicorn.Config(http_app, log_level="warning", lifespan="off")).run(sockets=[sock])


if __name__ == "__main__":
    sys.set_int_max_str_digits(0)
    if sys.argv[1:] == ["http"]:
        serve_http()
    else:
        main()
