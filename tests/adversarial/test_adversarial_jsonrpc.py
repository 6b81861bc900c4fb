"""Malformed JSON-RPC thrown at `toolflow serve`, over stdio and over HTTP: every request with an id gets one answer.

A real server process each: the stdio one reads the corpus line by line, the HTTP one gets each
case as the body of a POST in an initialized session. The rules checked, after every input:

- a request with a valid id (a string or an integer) gets exactly one answer with that id, a
  result or a JSON-RPC error; one whose id cannot be used (a float, ``true``, ``null``, an object,
  a line cut short before its id) gets one error with a ``null`` id, as JSON-RPC 2.0 says;
- a notification, and a response, get no answer;
- the server stays up: a ``ping`` after each input is answered, and a tool call at the end works.

Over HTTP the answer to a body the SDK cannot use is an HTTP error status with a JSON-RPC error
(``null`` id: one request per POST, so the client knows which it answers).

Hand-written cases cover each kind of damage; Hypothesis adds random envelopes (every field
missing or of every type) checked against the same rules.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
from _corpus import record
from _mcp_project import HTTPServer
from _mcp_wire import GREET_SPECS, HTTP_HEADERS, INITIALIZE, StdioServer, answers, call
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

MAX_BODY = 4 * 1024 * 1024
"""The SDK's limit of an HTTP request body, and toolflow's of a line over stdio."""

NULL = "<null id>"
"""An expected answer whose id is ``null``."""


@attrs.frozen
class Case:
    """One hostile input and the ids it must be answered with, each exactly once."""

    name: str
    line: bytes
    answered: tuple[object, ...] = ()


def _line(message: object) -> bytes:
    return json.dumps(message).encode()


def _request(ident: object, method: str = "ping", **fields: object) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "method": method, **fields}


BIG = "9" * 100_000

CASES = [
    # params that are no object
    *(
        Case(f"params {kind}", _line(_request(f"params-{kind}", "tools/list", params=value)), (f"params-{kind}",))
        for kind, value in (("list", [1, 2]), ("string", "x"), ("number", 7), ("true", True), ("null", None))
    ),
    Case("call params list", _line(_request("call-list", "tools/call", params=["greet"])), ("call-list",)),
    # numbers too large, deep nesting, huge strings
    Case(
        "100,000-digit argument",
        b'{"jsonrpc":"2.0","id":"big-arg","method":"tools/call","params":{"name":"greet","arguments":{"name":'
        + BIG.encode()
        + b"}}}",
        ("big-arg",),
    ),
    Case("100,000-digit id", b'{"jsonrpc":"2.0","id":' + BIG.encode() + b',"method":"ping"}', (NULL,)),
    Case("4,300-digit id", _line(_request(int("9" * 4300))), (int("9" * 4300),)),
    Case(
        "negative huge number",
        b'{"jsonrpc":"2.0","id":"neg","method":"ping","params":{"x":-' + BIG.encode() + b"}}",
        ("neg",),
    ),
    Case(
        "float overflow",
        b'{"jsonrpc":"2.0","id":"inf","method":"tools/call","params":{"name":"greet","arguments":{"name":1e400}}}',
        ("inf",),
    ),
    Case("NaN", b'{"jsonrpc":"2.0","id":"nan","method":"ping","params":{"x":NaN}}', ("nan",)),
    Case(
        "nesting 100,000 deep",
        b'{"jsonrpc":"2.0","id":"deep","method":"tools/call","params":{"name":"greet","arguments":{"name":'
        + b"[" * 100_000
        + b"]" * 100_000
        + b"}}}",
        ("deep",),
    ),
    Case(
        "nesting 100 deep", _line(_request("deep-100", params={"x": json.loads("[" * 100 + "]" * 100)})), ("deep-100",)
    ),
    Case("1 MB string", _line(call("long-string", "greet", {"name": "x" * 1_000_000})), ("long-string",)),
    Case("5 MB line", _line(call("too-long", "greet", {"name": "x" * 5_000_000})), ("too-long",)),
    Case(
        "5 MB line, id last",
        b'{"jsonrpc":"2.0","method":"ping","params":{"x":"' + b"x" * 5_000_000 + b'"},"id":"late"}',
        (NULL,),
    ),
    Case("100,000-character method", _line(_request("long-method", "m" * 100_000)), ("long-method",)),
    # the envelope, field by field
    Case("jsonrpc 1.0", _line({"jsonrpc": "1.0", "id": "v1", "method": "ping"}), ("v1",)),
    Case("jsonrpc number", _line({"jsonrpc": 2, "id": "v2", "method": "ping"}), ("v2",)),
    Case("jsonrpc missing", _line({"id": "v3", "method": "ping"}), ("v3",)),
    Case("method number", _line({"jsonrpc": "2.0", "id": "m1", "method": 5}), ("m1",)),
    Case("method null", _line({"jsonrpc": "2.0", "id": "m2", "method": None}), ("m2",)),
    Case("method object", _line({"jsonrpc": "2.0", "id": "m3", "method": {}}), ("m3",)),
    Case("method empty", _line(_request("m4", "")), ("m4",)),
    Case("no method", _line({"jsonrpc": "2.0", "id": "m5"}), ("m5",)),
    Case("no method, no id", _line({"jsonrpc": "2.0", "params": {}}), (NULL,)),
    Case("id float", _line(_request(1.5)), (NULL,)),
    Case("id true", _line(_request(True)), (NULL,)),
    Case("id null", _line(_request(None)), (NULL,)),
    Case("id object", _line(_request({"a": 1})), (NULL,)),
    Case("id list", _line(_request([1])), (NULL,)),
    Case("id float, bad params", _line(_request(2.5, params=[1])), (NULL,)),
    # ids of every valid kind
    *(
        Case(f"id {ident!r:.20}", _line(_request(ident)), (ident,))
        for ident in (0, -1, 2**63, 10**30, "", "é✓", "x" * 1000)
    ),
    Case("duplicate ids", _line(_request("twice")) + b"\n" + _line(_request("twice")), ("twice", "twice")),
    Case("duplicate id keys", b'{"jsonrpc":"2.0","id":"first","id":"second","method":"ping"}', ("second",)),
    # methods
    Case("unknown method", _line(_request("unknown", "no/such/method")), ("unknown",)),
    Case("resources/list, not served", _line(_request("resources", "resources/list")), ("resources",)),
    Case("initialize again", _line({**INITIALIZE, "id": "init-again"}), ("init-again",)),
    Case("notification with an id", _line(_request("note-id", "notifications/initialized")), ("note-id",)),
    Case(
        "cancellation with an id",
        _line(_request("cancel-id", "notifications/cancelled", params={"requestId": 1})),
        ("cancel-id",),
    ),
    Case("request with a result", _line(_request("with-result", result={})), ("with-result",)),
    Case(
        "request with an error",
        _line(_request("with-error", "tools/list", params=[1], error={"code": 1})),
        ("with-error",),
    ),
    # notifications and responses: never answered
    Case("notification", _line({"jsonrpc": "2.0", "method": "notifications/initialized"})),
    Case("unknown notification", _line({"jsonrpc": "2.0", "method": "no/such/notification"})),
    Case("notification, params list", _line({"jsonrpc": "2.0", "method": "notifications/progress", "params": [1]})),
    Case(
        "cancellation of nothing",
        _line({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "nothing"}}),
    ),
    Case("response to nothing", _line({"jsonrpc": "2.0", "id": "resp", "result": {}})),
    Case("error to nothing", _line({"jsonrpc": "2.0", "id": "err", "error": {"code": 1, "message": "x"}})),
    Case("malformed response", _line({"jsonrpc": "2.0", "id": "resp2", "result": 5})),
    # batches
    Case("batch of requests", _line([_request("batch-1"), _request("batch-2")]), ("batch-1", "batch-2")),
    Case("batch of notifications", _line([{"jsonrpc": "2.0", "method": "notifications/initialized"}]), (NULL,)),
    Case("empty batch", b"[]", (NULL,)),
    Case("batch of numbers", b"[1, 2]", (NULL,)),
    # not JSON, or not a message
    *(
        Case(f"not JSON {text[:10]!r}", text.encode(), (NULL,))
        for text in ("hello", "{", "}", "{]", "'single'", "\x00")
    ),
    Case("not JSON, an id first", b'{"id": "unclosed"', ("unclosed",)),
    *(Case(f"scalar {text}", text.encode(), (NULL,)) for text in ("null", "true", "1", '"string"', "{}")),
    Case("cut short after the id", b'{"jsonrpc":"2.0","id":"cut","method":"tools/call","params":{"name":"gr', ("cut",)),
    Case("trailing garbage", _line(_request("trailing")) + b" xyz", ("trailing",)),
    Case("byte-order mark", "\ufeff".encode() + _line(_request("bom")), ("bom",)),
    Case("carriage return", _line(_request("crlf")) + b"\r", ("crlf",)),
    Case("blank line", b"   "),
    # encodings
    Case(
        "invalid UTF-8 in a string",
        b'{"jsonrpc":"2.0","id":"utf","method":"tools/call","params":{"name":"greet","arguments":{"name":"\xff\xfe"}}}',
        ("utf",),
    ),
    Case("invalid UTF-8 outside strings", b'{"jsonrpc":"2.0","id":"utf2",\xff"method":"ping"}', ("utf2",)),
    Case("NUL in a string", _line(call("nul", "greet", {"name": "a\x00b"})), ("nul",)),
    Case(
        "lone surrogate escape",
        b'{"jsonrpc":"2.0","id":"sur","method":"tools/call","params":{"name":"greet","arguments":{"name":"\\ud800"}}}',
        ("sur",),
    ),
]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("corpus")
    (root / "specs").mkdir()
    (root / "specs" / "tools.yaml").write_text(GREET_SPECS, encoding="utf-8")
    (root / "pyproject.toml").write_text('[project]\nname = "corpus"\n', encoding="utf-8")
    return root


class Checker:
    """Sends inputs to one stdio server and checks the answers after each, with a ``ping`` as a barrier."""

    def __init__(self, server: StdioServer) -> None:
        self.server = server
        self.probes = 0

    def check(self, line: bytes, answered: tuple[object, ...], what: str) -> None:
        self.server.send(line)
        self.probes += 1
        probe = f"probe-{self.probes}"
        self.server.send(_request(probe))
        expected = sorted(map(repr, answered))
        seen: list[str] = []
        probe_seen = False
        deadline = time.monotonic() + 30
        while not probe_seen or len(seen) < len(expected):
            answer = self.server.receive(timeout=max(0.1, deadline - time.monotonic()))
            assert answer is not None, f"{what}: the server stopped; answers so far {seen}"
            assert "result" in answer or "error" in answer, f"{what}: not an answer: {answer}"
            ident = answer.get("id")
            if ident == probe:
                assert "result" in answer, answer
                probe_seen = True
            else:
                seen.append(repr(NULL if ident is None else ident))
                assert len(seen) <= len(expected), f"{what}: unexpected answers {seen}, expected {expected}"
        assert sorted(seen) == expected, f"{what}: answers {seen}, expected {expected}"


@pytest.fixture(scope="module")
def stdio(project: Path) -> Iterator[Checker]:
    server = StdioServer(project)
    try:
        yield Checker(server)
        greeting = None
        server.send(call("last", "greet", {"name": "Ada"}))
        greeting = server.receive()
        assert greeting is not None
        assert greeting["result"]["content"][0]["text"] == "Hello, Ada!"
        assert server.stop() == 0
    finally:
        server.kill()
    assert "Traceback" not in server.log.read_text()


def test_stdio_requests_before_initialize_are_answered(project: Path) -> None:
    """Before `initialize`, requests get errors (ping a result), notifications nothing; then the session starts."""
    server = StdioServer(project)
    try:
        checker = Checker(server)
        cases = [
            Case("tools/list first", _line(_request("early-list", "tools/list")), ("early-list",)),
            Case("tools/call first", _line(call("early-call", "greet", {"name": "x"})), ("early-call",)),
            Case("notification first", _line({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}})),
            Case("malformed first", _line(_request("early-bad", "tools/list", params=[])), ("early-bad",)),
        ]
        for case in cases:
            checker.check(case.line, case.answered, case.name)
        server.start()
        checker.check(_line(call("after", "greet", {"name": "x"})), ("after",), "a call after initialize")
        assert server.stop() == 0
    finally:
        server.kill()
    record("json-rpc stdio", len(cases))


def test_stdio_corpus(stdio: Checker) -> None:
    """Each hand-written case gets exactly its answers over stdio, and the server goes on."""
    stdio.server.start()
    for case in CASES:
        stdio.check(case.line, case.answered, case.name)
    record("json-rpc stdio", len(CASES))


def _expected(message: object) -> tuple[object, ...]:
    """The answers JSON-RPC 2.0 and MCP ask for *message* (generated, so without duplicate keys or huge numbers)."""

    def valid(ident: object) -> bool:
        return type(ident) is str or (type(ident) is int)

    if isinstance(message, list):
        ids = [item["id"] for item in message if isinstance(item, dict) and "method" in item and "id" in item]
        return tuple(ident if valid(ident) else NULL for ident in ids) or (NULL,)
    if not isinstance(message, dict):
        return (NULL,)
    if "method" not in message:
        if "result" in message or "error" in message:
            return ()
        return (message["id"] if valid(message.get("id")) else NULL,)
    if "id" not in message:
        return ()
    return (message["id"] if valid(message["id"]) else NULL,)


_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
_ids = (
    st.integers()
    | st.text(max_size=12)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.booleans()
    | st.none()
    | st.lists(st.integers(), max_size=2)
    | st.dictionaries(st.text(max_size=3), st.integers(), max_size=1)
)
_methods = (
    st.sampled_from(
        [
            "ping",
            "tools/list",
            "tools/call",
            "initialize",
            "notifications/initialized",
            "notifications/cancelled",
            "resources/read",
            "x/y",
        ]
    )
    | st.text(max_size=10)
    | _values
)
_params = _values | st.fixed_dictionaries({"name": st.sampled_from(["greet", "nope"]), "arguments": _values})
_messages = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.just("2.0") | _values,
        "id": _ids,
        "method": _methods,
        "params": _params,
        "result": _values,
        "error": _values,
    },
)
_inputs = _messages | st.lists(_messages, max_size=3) | _values

GENERATED = {"stdio": 0, "http": 0}


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(message=_inputs)
def test_stdio_random_envelopes(stdio: Checker, message: object) -> None:
    """Random envelopes over stdio: each gets the answers the rules ask for, nothing more."""
    if not GENERATED["stdio"]:
        stdio.server.start()
    GENERATED["stdio"] += 1
    record("json-rpc stdio", 1)
    stdio.check(_line(message), _expected(message), repr(message)[:200])


# --- HTTP --------------------------------------------------------------------------------------


@attrs.define
class HTTPChecker:
    client: httpx.Client
    url: str
    session: dict[str, str]

    checked: int = 0

    def check(self, body: bytes, answered: tuple[object, ...], what: str, *, probe_every: int = 1) -> None:
        if len(body) <= MAX_BODY:
            response = self.client.post(self.url, content=body, headers=self.session)
        else:
            # Over the SDK's 4 MiB limit the 413 comes before the body is read, and the server closes
            # the connection: on a connection of its own, since a client still sending may see the
            # close first (servers such as nginx do the same).
            try:
                response = httpx.post(self.url, content=body, headers=self.session, timeout=60)
            except httpx.RemoteProtocolError:
                response = httpx.Response(413, text="Request body too large")
        messages = [m for m in answers(response) if "method" not in m]  # progress notifications aside
        valid = sorted(repr(ident) for ident in answered if ident is not NULL)
        if response.status_code == 200:
            assert sorted(repr(m.get("id")) for m in messages) == valid, f"{what}: {messages}"
        elif response.status_code == 202:
            assert (answered, messages) == ((), []), f"{what}: accepted, but {answered} await an answer"
        elif response.status_code == 413:
            assert response.text == "Request body too large", what  # the SDK's 4 MiB limit, before any parsing
        else:
            assert 400 <= response.status_code < 500, f"{what}: {response.status_code} {response.text[:300]}"
            assert len(messages) == 1, f"{what}: {response.status_code} {response.text[:300]}"
            assert messages[0]["error"]["code"] < 0, f"{what}: {messages}"
        self.checked += 1
        if self.checked % probe_every == 0:  # each POST stands alone: a probe now and then shows the server is up
            ping = self.client.post(self.url, json=_request("http-probe"), headers=self.session)
            assert [m.get("id") for m in answers(ping)] == ["http-probe"], f"after {what}: {ping.status_code}"


@pytest.fixture(scope="module")
def http(project: Path) -> Iterator[HTTPChecker]:
    server = HTTPServer(project)
    try:
        with httpx.Client(timeout=60) as client:
            opened = client.post(server.url, json=INITIALIZE, headers=HTTP_HEADERS)
            session = {
                **HTTP_HEADERS,
                "Mcp-Session-Id": opened.headers["mcp-session-id"],
                "MCP-Protocol-Version": "2025-11-25",
            }
            client.post(server.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
            yield HTTPChecker(client=client, url=server.url, session=session)
            greeting = answers(client.post(server.url, json=call("last", "greet", {"name": "Ada"}), headers=session))
            assert greeting[0]["result"]["content"][0]["text"] == "Hello, Ada!"
    finally:
        server.close()
    assert "Traceback" not in "".join(server.output)


def test_http_corpus(http: HTTPChecker) -> None:
    """Each hand-written case, as one POST body: the request is answered (or refused with an error), the server goes on."""
    cases = [case for case in CASES if b"\n" not in case.line]  # over HTTP, a body is one message
    for case in cases:
        http.check(case.line, case.answered, case.name)
    record("json-rpc http", len(cases))


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(message=_inputs)
def test_http_random_envelopes(http: HTTPChecker, message: object) -> None:
    """Random envelopes over HTTP: answered as the rules ask, or refused with a JSON-RPC error."""
    record("json-rpc http", 1)
    http.check(_line(message), _expected(message), repr(message)[:200], probe_every=10)
