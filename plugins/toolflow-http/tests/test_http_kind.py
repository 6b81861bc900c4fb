"""The ``http`` kind end to end: specs loaded with the plugin, tools run against a real server on 127.0.0.1."""

from __future__ import annotations

import datetime as dt
import email.utils
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

import jsonschema
import pytest
import trio
from toolflow_http._schema import SCHEMA

from toolflow import PluginError, Registry, ToolResult, load_specs
from toolflow.testing import IsolatedPlugins, ToolflowProject


class Server(Protocol):
    """The ``server`` fixture (see conftest.py)."""

    base: str
    requests: list[tuple[str, str, dict[str, str], bytes]]


Call = Callable[..., Awaitable[ToolResult]]
MakeRegistry = Callable[..., Registry]

STRING = {"type": "string"}


def tool(http: Any, properties: Mapping[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """A spec file with one ``http`` tool called ``fetch``."""
    return {
        "tools": {
            "fetch": {
                "description": "Fetch something.",
                "parameters": {"type": "object", "properties": dict(properties or {})},
                "http": http,
                **extra,
            }
        }
    }


async def run(make_registry: MakeRegistry, call: Call, spec: Mapping[str, Any], **arguments: Any) -> ToolResult:
    with trio.fail_after(10):
        return await call(make_registry(spec), "fetch", arguments)


# --- requests ----------------------------------------------------------------------------------


async def test_get_sends_query_parameters_url_encoded(server: Server, make_registry: MakeRegistry, call: Call) -> None:
    """GET with templated query values: the server receives each value intact, encoded by the client."""
    spec = tool(
        {"url": f"{server.base}/echo", "query": {"q": "{{ q }}", "limit": "{{ limit }}", "lang": "en"}},
        {"q": STRING, "limit": {"type": "integer"}},
    )
    result = await run(make_registry, call, spec, q="fish & chips=#1 ?", limit=3)
    assert result.success, result.error
    assert result.data["method"] == "GET"
    assert result.data["query"] == {"q": ["fish & chips=#1 ?"], "limit": ["3"], "lang": ["en"]}
    assert "%26" in result.data["raw_path"]
    assert "#" not in result.data["raw_path"]
    assert result.extra["status"] == 200


async def test_unset_argument_leaves_its_query_parameter_out(
    server: Server, make_registry: MakeRegistry, call: Call
) -> None:
    """A query value that is just ``{{ name }}`` of an argument the call did not give is not sent."""
    spec = tool(
        {"url": f"{server.base}/echo", "query": {"q": "{{ q }}", "page": "{{ page }}"}}, {"q": STRING, "page": STRING}
    )
    result = await run(make_registry, call, spec, q="owls")
    assert result.data["query"] == {"q": ["owls"]}


async def test_list_argument_repeats_the_query_parameter(
    server: Server, make_registry: MakeRegistry, call: Call
) -> None:
    """A list value gives the parameter once per item; booleans are written ``true``/``false``."""
    spec = tool(
        {"url": f"{server.base}/echo", "query": {"tag": "{{ tags }}", "all": "{{ all }}"}},
        {"tags": {"type": "array", "items": STRING}, "all": {"type": "boolean"}},
    )
    result = await run(make_registry, call, spec, tags=["a b", "c&d"], all=True)
    assert result.data["query"] == {"tag": ["a b", "c&d"], "all": ["true"]}


async def test_post_sends_a_json_body_built_from_the_arguments(
    server: Server, make_registry: MakeRegistry, call: Call
) -> None:
    """A one-expression string keeps the argument's type; other strings render as text; unset keys are left out."""
    spec = tool(
        {
            "method": "POST",
            "url": f"{server.base}/echo/items",
            "json": {
                "name": "{{ name }}",
                "count": "{{ count }}",
                "tags": "{{ tags }}",
                "title": "Item: {{ name }} x{{ count }}",
                "fixed": 1,
                "meta": {"note": "{{ note }}", "source": "toolflow"},
                "list": ["{{ name }}", "{{ note }}", True],
            },
        },
        {"name": STRING, "count": {"type": "integer"}, "tags": {"type": "array"}, "note": STRING},
    )
    result = await run(make_registry, call, spec, name='a "quoted" name', count=2, tags=["x", 1])
    assert result.success, result.error
    assert result.data["method"] == "POST"
    assert result.data["headers"]["content-type"] == "application/json"
    assert result.data["body"] == {
        "name": 'a "quoted" name',
        "count": 2,
        "tags": ["x", 1],
        "title": 'Item: a "quoted" name x2',
        "fixed": 1,
        "meta": {"source": "toolflow"},
        "list": ['a "quoted" name', True],
    }


async def test_whole_body_from_one_argument(server: Server, make_registry: MakeRegistry, call: Call) -> None:
    """``json: "{{ payload }}"`` sends the argument as the body, and no body when it is not given."""
    spec = tool(
        {"method": "PUT", "url": f"{server.base}/echo", "json": "{{ payload }}"}, {"payload": {"type": "object"}}
    )
    sent = await run(make_registry, call, spec, payload={"a": [1, None]})
    assert sent.data["body"] == {"a": [1, None]}
    assert (await run(make_registry, call, spec)).data["body"] is None
    assert "content-type" not in server.requests[-1][2]


async def test_shorthand_string_is_a_get(server: Server, make_registry: MakeRegistry, call: Call) -> None:
    """``http: URL`` is a GET of that URL."""
    result = await run(make_registry, call, tool(f"{server.base}/echo/short"))
    assert result.success
    assert result.data["path"] == "/echo/short"


async def test_head_request_has_no_data(server: Server, make_registry: MakeRegistry, call: Call) -> None:
    """A HEAD request succeeds with ``data`` None and the status and headers."""
    result = await run(make_registry, call, tool({"method": "HEAD", "url": f"{server.base}/echo"}))
    assert result.success
    assert result.data is None
    assert result.extra["headers"]["content-type"] == "application/json"


async def test_result_keeps_only_useful_response_headers(
    server: Server, make_registry: MakeRegistry, call: Call
) -> None:
    """The result carries content-type, etag and the rate-limit headers, not every header."""
    result = await run(make_registry, call, tool(f"{server.base}/echo"))
    assert result.extra["headers"] == {
        "content-type": "application/json",
        "etag": '"v1"',
        "x-ratelimit-remaining": "41",
    }


# --- headers and environment -------------------------------------------------------------------


async def test_header_env_variables_are_interpolated_by_the_loader(
    server: Server, toolflow_project: ToolflowProject, http_plugins: IsolatedPlugins, call: Call
) -> None:
    """``${VAR}`` in a header is replaced from the environment when the spec is loaded."""
    toolflow_project.write_spec(
        "api.yaml",
        f"""
        toolflow: 1
        tools:
          fetch:
            description: Fetch with a token.
            parameters: {{type: object, properties: {{}}}}
            http:
              url: {server.base}/echo
              headers:
                Authorization: "Bearer ${{TEST_API_TOKEN}}"
                X-Client: "${{TEST_CLIENT:-toolflow}}"
        """,
    )
    kinds = {name: found[0].schema for name, found in http_plugins.kinds().items()}
    loaded = load_specs(toolflow_project.spec_paths(), kinds=kinds, environ={"TEST_API_TOKEN": "s3cret"})
    assert loaded.ok, loaded.diagnostics
    result = await call(Registry.build(loaded, http_plugins), "fetch", {})
    assert result.data["headers"]["authorization"] == "Bearer s3cret"
    assert result.data["headers"]["x-client"] == "toolflow"


async def test_listed_env_names_are_read_at_call_time(
    server: Server, make_registry: MakeRegistry, call: Call, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Names under ``env`` are visible as ``env.NAME``; an unset one fails the call with a clear error."""
    spec = tool(
        {"url": f"{server.base}/echo", "env": ["TF_HTTP_TOKEN"], "headers": {"X-Token": "{{ env.TF_HTTP_TOKEN }}"}}
    )
    registry = make_registry(spec)
    monkeypatch.delenv("TF_HTTP_TOKEN", raising=False)
    missing = await call(registry, "fetch", {})
    assert not missing.success
    assert missing.error == "Error: cannot build the HTTP request: environment variable 'TF_HTTP_TOKEN' is not set"
    monkeypatch.setenv("TF_HTTP_TOKEN", "t0ken")
    result = await call(registry, "fetch", {})
    assert result.data["headers"]["x-token"] == "t0ken"


async def test_env_is_not_visible_unless_listed(server: Server, make_registry: MakeRegistry, call: Call) -> None:
    """Without ``env``, a template cannot read environment variables."""
    result = await run(
        make_registry, call, tool({"url": f"{server.base}/echo", "headers": {"X-Home": "{{ env.HOME }}"}})
    )
    assert not result.success
    assert "'env' is undefined" in (result.error or "")
    assert server.requests == []


async def test_header_injection_is_refused(server: Server, make_registry: MakeRegistry, call: Call) -> None:
    """A header value with a line break fails the call and sends nothing."""
    spec = tool({"url": f"{server.base}/echo", "headers": {"X-Name": "{{ name }}"}}, {"name": STRING})
    result = await run(make_registry, call, spec, name="ok\r\nX-Admin: yes")
    assert not result.success
    assert (
        result.error == "Error: cannot build the HTTP request: headers.X-Name: the value contains a line break or NUL"
    )
    assert server.requests == []


# --- the URL and its escaping ------------------------------------------------------------------


async def test_url_expression_is_percent_encoded(server: Server, make_registry: MakeRegistry, call: Call) -> None:
    """An argument in the URL fills one path segment: ``/``, ``?``, ``#`` and ``&`` are encoded."""
    spec = tool({"url": f"{server.base}/echo/users/{{{{ user }}}}/info?v=1"}, {"user": STRING})
    result = await run(make_registry, call, spec, user="../status/500?x=1&y=2#frag")
    assert result.success, result.error
    assert result.data["raw_path"] == "/echo/users/..%2Fstatus%2F500%3Fx%3D1%26y%3D2%23frag/info?v=1"
    assert result.data["query"] == {"v": ["1"]}


@pytest.mark.parametrize("value", [".", ".."])
async def test_dot_segments_from_arguments_are_refused(
    value: str, server: Server, make_registry: MakeRegistry, call: Call
) -> None:
    """An argument of ``.`` or ``..`` would move up the path, so the call fails before sending."""
    spec = tool({"url": f"{server.base}/echo/users/{{{{ user }}}}"}, {"user": STRING})
    result = await run(make_registry, call, spec, user=value)
    assert not result.success
    assert result.error == f"Error: cannot build the HTTP request: url: the value {value!r} would change the path"
    assert server.requests == []


async def test_url_argument_cannot_change_the_host(server: Server, make_registry: MakeRegistry, call: Call) -> None:
    """A host label from an argument is encoded too, so ``evil.com/`` cannot redirect the request."""
    spec = tool({"url": "http://{{ host }}/echo"}, {"host": STRING})
    result = await run(make_registry, call, spec, host=server.base.removeprefix("http://"))
    assert not result.success  # '127.0.0.1%3A1234' is not a host the client can reach
    assert server.requests == []


async def test_safe_filter_inserts_a_value_unescaped(server: Server, make_registry: MakeRegistry, call: Call) -> None:
    """``| safe`` is the spec author's explicit opt-out of URL escaping."""
    spec = tool({"url": f"{server.base}/echo/{{{{ path | safe }}}}"}, {"path": STRING})
    result = await run(make_registry, call, spec, path="a/b")
    assert result.data["raw_path"] == "/echo/a/b"


async def test_non_http_url_is_refused(make_registry: MakeRegistry, call: Call) -> None:
    """The rendered URL must be absolute http or https."""
    result = await run(
        make_registry, call, tool({"url": "{{ where | safe }}"}, {"where": STRING}), where="file:///etc/passwd"
    )
    assert not result.success
    assert (
        result.error
        == "Error: cannot build the HTTP request: url: expected an absolute http or https URL, got scheme 'file'"
    )


async def test_sandbox_escape_fails_safely(server: Server, make_registry: MakeRegistry, call: Call) -> None:
    """A template reaching for Python internals is a failed call, not a leak, in the URL and in the body."""
    for http in (
        {"url": f"{server.base}/echo/{{{{ q.__class__.__mro__ }}}}"},
        {
            "url": f"{server.base}/echo",
            "method": "POST",
            "json": {"x": "{{ q.__class__.__mro__[1].__subclasses__() }}"},
        },
    ):
        result = await run(make_registry, call, tool(http, {"q": STRING}), q="x")
        assert not result.success
        assert "unsafe" in (result.error or "")
    assert server.requests == []


# --- failures ----------------------------------------------------------------------------------


async def test_404_is_a_failure_with_the_body(server: Server, make_registry: MakeRegistry, call: Call) -> None:
    """A 4xx status is a failure naming the status; the body stays available as data; not retryable."""
    result = await run(make_registry, call, tool(f"{server.base}/status/404"))
    assert not result.success
    assert result.error == "Error: HTTP 404 Not Found"
    assert result.data == {"error": "status 404 as asked"}
    assert result.extra["status"] == 404
    assert "retryable" not in result.extra


async def test_429_is_retryable_with_retry_after_seconds(
    server: Server, make_registry: MakeRegistry, call: Call
) -> None:
    """429 carries ``retryable`` and the Retry-After delay in seconds."""
    result = await run(make_registry, call, tool(f"{server.base}/status/429?retry_after=2"))
    assert result.to_dict() | {"data": None, "headers": None} == {
        "success": False,
        "data": None,
        "error": "Error: HTTP 429 Too Many Requests",
        "status": 429,
        "headers": None,
        "retryable": True,
        "retry_after": 2.0,
    }


async def test_503_retry_after_http_date_becomes_seconds(
    server: Server, make_registry: MakeRegistry, call: Call
) -> None:
    """An HTTP-date Retry-After is turned into the seconds from now."""
    when = email.utils.format_datetime(dt.datetime.now(dt.UTC) + dt.timedelta(seconds=120), usegmt=True)
    result = await run(make_registry, call, tool({"url": f"{server.base}/status/503", "query": {"retry_after": when}}))
    assert result.error == "Error: HTTP 503 Service Unavailable"
    assert result.extra["retryable"] is True
    assert 100 < result.extra["retry_after"] <= 120


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("9" * 400, None),  # float() makes it infinite
        ("Wed, 21 Oct 2015 07:28:00 +99999999999999999999", None),  # an OverflowError in the date parser
        ("Wed, 21 Oct 99999999999999999999 07:28:00 GMT", None),
        ("Wed, 21 Oct 2999 07:28:00 GMT", 86_400.0),  # capped at a day, like every Retry-After toolflow reads
        ("100000", 86_400.0),
        ("soon", None),
    ],
    ids=["400-digits", "zone-overflow", "year-overflow", "far-future", "over-a-day", "words"],
)
async def test_a_hostile_retry_after_is_left_out_or_capped(
    header: str, seconds: float | None, server: Server, make_registry: MakeRegistry, call: Call
) -> None:
    """A Retry-After that overflows or is absurd is no delay, or a day; the 429 is still the result, not a crash."""
    spec = tool({"url": f"{server.base}/status/429", "query": {"retry_after": header}})
    result = await run(make_registry, call, spec)
    assert result.error == "Error: HTTP 429 Too Many Requests"
    assert result.extra["retryable"] is True
    assert result.extra.get("retry_after") == seconds


async def test_503_without_retry_after(server: Server, make_registry: MakeRegistry, call: Call) -> None:
    """Without the header a 503 is still retryable, with no delay given."""
    result = await run(make_registry, call, tool(f"{server.base}/status/503"))
    assert result.extra["retryable"] is True
    assert "retry_after" not in result.extra


async def test_500_is_not_retryable_by_default(server: Server, make_registry: MakeRegistry, call: Call) -> None:
    """Only the ``retry_status`` statuses are flagged retryable."""
    plain = await run(make_registry, call, tool(f"{server.base}/status/500"))
    assert plain.error == "Error: HTTP 500 Internal Server Error"
    assert "retryable" not in plain.extra
    custom = await run(make_registry, call, tool({"url": f"{server.base}/status/500", "retry_status": [500]}))
    assert custom.extra["retryable"] is True


async def test_ok_status_decides_success(server: Server, make_registry: MakeRegistry, call: Call) -> None:
    """With ``ok_status``, a 404 can be the expected answer."""
    result = await run(make_registry, call, tool({"url": f"{server.base}/status/404", "ok_status": [200, 404]}))
    assert result.success
    assert result.extra["status"] == 404


async def test_connection_refused_names_the_error_class(
    refused_url: str, make_registry: MakeRegistry, call: Call
) -> None:
    """Nothing listening: a retryable failure naming httpx's error class and the request."""
    result = await run(make_registry, call, tool(refused_url))
    assert not result.success
    assert (result.error or "").startswith("Error: ConnectError: ")
    assert (result.error or "").endswith(f"(GET {refused_url})")
    assert result.extra["retryable"] is True


async def test_timeout_is_a_retryable_failure(
    server: Server, make_registry: MakeRegistry, call: Call, autojump_clock: Any
) -> None:
    """A server that never answers hits the tool's time limit (virtual time here)."""
    result = await run(make_registry, call, tool({"url": f"{server.base}/hang", "timeout": "5s"}))
    assert not result.success
    assert "Timeout" in (result.error or "")
    assert result.extra["retryable"] is True


# --- response bodies ---------------------------------------------------------------------------


async def test_text_response_is_text_data(server: Server, make_registry: MakeRegistry, call: Call) -> None:
    """A non-JSON response is returned as text, decoded with its charset."""
    result = await run(make_registry, call, tool(f"{server.base}/text"))
    assert result.success
    assert result.data == "hello, wörld"
    assert result.extra["headers"]["content-type"] == "text/plain; charset=utf-8"


async def test_invalid_json_is_kept_as_text_with_a_warning(
    server: Server, make_registry: MakeRegistry, call: Call
) -> None:
    """A body that claims JSON but is not parses as text, with a warning."""
    result = await run(make_registry, call, tool(f"{server.base}/bad-json"))
    assert result.success
    assert result.data == "{not json"
    why = "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"
    assert result.warnings == (f"the response says 'application/json' but is not valid JSON ({why}); kept as text",)


async def test_response_json_mode_requires_json(server: Server, make_registry: MakeRegistry, call: Call) -> None:
    """``response: json`` makes a non-JSON body a failure; ``response: text`` never parses."""
    strict = await run(make_registry, call, tool({"url": f"{server.base}/text", "response": "json"}))
    assert not strict.success
    assert (strict.error or "").startswith("Error: the response is not JSON: ")
    text = await run(make_registry, call, tool({"url": f"{server.base}/echo", "response": "text"}))
    assert isinstance(text.data, str)


async def test_redirects_are_followed_unless_turned_off(
    server: Server, make_registry: MakeRegistry, call: Call
) -> None:
    """Redirects are followed by default; with ``follow_redirects: false`` a 302 is a failure with its Location."""
    followed = await run(make_registry, call, tool(f"{server.base}/redirect"))
    assert followed.data["path"] == "/echo/redirected"
    kept = await run(make_registry, call, tool({"url": f"{server.base}/redirect", "follow_redirects": False}))
    assert kept.error == "Error: HTTP 302 Found"
    assert kept.extra["headers"]["location"] == "/echo/redirected"


async def test_response_size_is_capped(server: Server, make_registry: MakeRegistry, call: Call) -> None:
    """A body larger than ``max_bytes`` (declared or chunked) is a failure rather than a memory hog."""
    small = await run(make_registry, call, tool({"url": f"{server.base}/bytes/1000", "max_bytes": 1000}))
    assert small.success
    big = await run(make_registry, call, tool({"url": f"{server.base}/bytes/1001", "max_bytes": 1000}))
    assert big.error == f"Error: the response of GET {server.base}/bytes/1001 is larger than 1000 bytes"
    chunked = await run(make_registry, call, tool({"url": f"{server.base}/chunked/1001", "max_bytes": 1000}))
    assert chunked.error == f"Error: the response of GET {server.base}/chunked/1001 is larger than 1000 bytes"
    fits = await run(make_registry, call, tool({"url": f"{server.base}/chunked/1000", "max_bytes": 1000}))
    assert fits.data == "x" * 1000


async def test_output_schema_checks_the_response_data(server: Server, make_registry: MakeRegistry, call: Call) -> None:
    """The tool's ``output_schema`` applies to the parsed response, like any implementation's data."""
    spec = tool(f"{server.base}/echo", output_schema={"type": "object", "required": ["method", "nope"]})
    result = await run(make_registry, call, spec)
    assert not result.success
    assert "nope" in (result.error or "")


# --- building ----------------------------------------------------------------------------------


def test_template_syntax_error_fails_the_build(make_registry: MakeRegistry) -> None:
    """A template that does not compile is reported when the tool is built, naming the kind and plugin."""
    registry = make_registry(tool({"url": "http://example.invalid/{{ q "}, {"q": STRING}))
    with pytest.raises(
        PluginError, match=r"the 'http' kind of plugin 'http' cannot build tool 'fetch': template syntax"
    ):
        registry.get("fetch").resolve()


def test_bad_config_is_a_spec_error(toolflow_project: ToolflowProject, http_plugins: IsolatedPlugins) -> None:
    """The loader checks ``http:`` against the kind's schema, with positions."""
    toolflow_project.write_spec(
        "bad.yaml",
        """
        toolflow: 1
        tools:
          fetch:
            description: Fetch.
            http:
              url: http://example.invalid/
              methd: GET
        """,
    )
    loaded = toolflow_project.load(http_plugins)
    assert not loaded.ok
    assert any(d.line == 7 and "methd" in d.message for d in loaded.diagnostics), loaded.diagnostics


def test_schema_is_draft7_valid() -> None:
    """The kind's schema is itself a valid draft-07 schema."""
    jsonschema.Draft7Validator.check_schema(SCHEMA)


def test_toolflow_call_runs_an_http_tool(server: Server, toolflow_project: ToolflowProject) -> None:
    """``toolflow call`` loads the installed plugin, builds the tool and prints the response as the result."""
    spec = tool({"url": f"{server.base}/echo/{{{{ id }}}}", "query": {"v": "{{ v }}"}}, {"id": STRING, "v": STRING})
    toolflow_project.write_spec("api.yaml", spec)
    env = {"TOOLFLOW_LOAD_PLUGINS": "http", "TOOLFLOW_DISABLE_PLUGINS": None}
    result = toolflow_project.run("call", "fetch", '{"id": "a b", "v": "1"}', env=env)
    assert result.exit_code == 0, result.stderr
    printed = json.loads(result.stdout)
    assert printed["data"]["raw_path"] == "/echo/a%20b?v=1"
    assert printed["status"] == 200
    missing = toolflow_project.run("call", "fetch", '{"id": "nope"}', env=env)
    assert json.loads(missing.stdout)["data"]["query"] == {}
