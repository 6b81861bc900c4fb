"""`toolflow serve --transport http`: authentication, Host and Origin checks on every bind, session limits.

Real servers on 127.0.0.1 (or 0.0.0.0) and real HTTP clients (httpx). The `toolflow serve`
process is used where the command line is what is tested; the session limits run the same
server in process, on trio's mock clock, so that a 30-minute idle timeout passes at once.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
import trio
import trio.testing
from _mcp_project import HTTPServer, write_project
from _mcp_wire import GREET_SPECS, HTTP_HEADERS, INITIALIZE, StdioServer, answers, call, open_session

from toolflow import hookimpl, load_plugins, load_registry, open_engine
from toolflow._cli import run
from toolflow._errors import ConfigError
from toolflow._executor import Engine
from toolflow._serve import Lifecycle, ToolService, build_server
from toolflow._serve_http import BearerTokens, HTTPSettings, Principal, listen, principal_of, serve_http

TOKEN = "tf-alice-0123456789abcdef"
OTHER_TOKEN = "tf-ci-bot-fedcba9876543210"

TOKENS_TOML = f"""\
[principals.alice]
token = "{TOKEN}"
claims = {{team = "games", level = 3}}

[principals.ci-bot]
token = "{OTHER_TOKEN}"
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = write_project(tmp_path_factory.mktemp("served"))
    tokens = root / "tokens.toml"
    tokens.write_text(TOKENS_TOML, encoding="utf-8")
    tokens.chmod(0o600)
    return root


def serve(project: Path, *args: str) -> tuple[int, str]:
    """`toolflow serve` in process, for the command lines that must not start; its exit code and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(project):
        code = run(["serve", "--transport", "http", "--port", "0", *args], stdout=out, stderr=err)
    return code, err.getvalue()


# --- binding -----------------------------------------------------------------------------------


def test_non_loopback_bind_without_authentication_is_refused(project: Path) -> None:
    """`--host 0.0.0.0` without tokens and without `--insecure-no-auth`: exit 2 before anything listens."""
    code, err = serve(project, "--host", "0.0.0.0", "--allow-host", "mcp.example")
    assert code == 2
    assert err == (
        "toolflow: error: serve: 0.0.0.0 is not a loopback address, so HTTP clients must authenticate: give bearer"
        " tokens with --auth-tokens FILE or --auth-token-env VAR (or [tool.toolflow.serve]), or serve without"
        " authentication with --insecure-no-auth\n"
    )


def test_wildcard_bind_needs_the_host_names_it_serves(project: Path) -> None:
    """`--host 0.0.0.0` answers any name: without `--allow-host` it is exit 2, so DNS rebinding stays impossible."""
    code, err = serve(project, "--host", "0.0.0.0", "--insecure-no-auth")
    assert code == 2
    assert err.startswith(
        "toolflow: error: serve: --host 0.0.0.0 accepts connections for any host name: list the names clients use"
        " with --allow-host NAME"
    )


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--allow-origin", "app.example"], "the allowed origin 'app.example' (--allow-origin"),
        (["--allow-origin", "https://app.example/mcp"], "the allowed origin 'https://app.example/mcp' (--allow-origin"),
        (
            ["--allow-origin", "https://app.example:http"],
            "the allowed origin 'https://app.example:http' (--allow-origin",
        ),
        (["--allow-host", "https://mcp.example"], "the allowed host 'https://mcp.example' (--allow-host"),
        (["--allow-host", "mcp.example/mcp"], "the allowed host 'mcp.example/mcp' (--allow-host"),
    ],
)
def test_an_allowed_name_no_request_could_carry_is_refused(project: Path, args: list[str], said: str) -> None:
    """A URL given as a host, an origin without a scheme or with a path: exit 2 at start, not a 403 at every request."""
    code, err = serve(project, *args)
    assert code == 2
    assert err.startswith(f"toolflow: error: serve: {said}")


async def test_wildcard_bind_checks_tokens_hosts_and_origins(project: Path) -> None:
    """On 0.0.0.0 with tokens: 401 without a valid token, 421 for a host not listed, 403 for a foreign origin."""
    server = await trio.to_thread.run_sync(
        lambda: HTTPServer(project, "--host", "0.0.0.0", "--auth-tokens", "tokens.toml", "--allow-host", "mcp.example")
    )
    try:
        port = server.url.rsplit(":", 1)[1].split("/")[0]
        local = f"http://127.0.0.1:{port}/mcp"
        named = {"Host": f"mcp.example:{port}"}
        with trio.fail_after(30):
            async with httpx.AsyncClient() as client:
                anonymous = await client.post(local, json=INITIALIZE, headers={**HTTP_HEADERS, **named})
                wrong = await client.post(
                    local, json=INITIALIZE, headers={**HTTP_HEADERS, **named, "Authorization": "Bearer " + "x" * 24}
                )
                bearer = {"Authorization": f"Bearer {TOKEN}"}
                foreign_host = await client.post(
                    local, json=INITIALIZE, headers={**HTTP_HEADERS, **bearer, "Host": f"evil.example:{port}"}
                )
                foreign_origin = await client.post(
                    local,
                    json=INITIALIZE,
                    headers={**HTTP_HEADERS, **bearer, **named, "Origin": "http://evil.example"},
                )
                session = await open_session(client, local, headers={**bearer, **named})
                greeted = await client.post(local, json=call(1, "greet", {"name": "Ada"}), headers=session)
    finally:
        await trio.to_thread.run_sync(server.close)
    for refused in (anonymous, wrong):
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"].startswith("Bearer ")
    assert foreign_host.status_code == 421
    assert foreign_origin.status_code == 403
    assert answers(greeted)[0]["result"]["content"][0]["text"] == "Hello, Ada!"
    output = "".join(server.output)
    assert "without authentication" not in output


async def test_insecure_no_auth_serves_with_a_warning(project: Path) -> None:
    """`--insecure-no-auth` on 0.0.0.0: served without tokens, with a warning line, and the hosts still checked."""
    server = await trio.to_thread.run_sync(
        lambda: HTTPServer(project, "--host", "0.0.0.0", "--insecure-no-auth", "--allow-host", "mcp.example")
    )
    try:
        port = server.url.rsplit(":", 1)[1].split("/")[0]
        with trio.fail_after(30):
            async with httpx.AsyncClient() as client:
                session = await open_session(client, f"http://127.0.0.1:{port}/mcp", headers={"Host": "mcp.example"})
                foreign = await client.post(
                    f"http://127.0.0.1:{port}/mcp", json=INITIALIZE, headers={**HTTP_HEADERS, "Host": "evil.example"}
                )
    finally:
        await trio.to_thread.run_sync(server.close)
    assert session["Mcp-Session-Id"]
    assert foreign.status_code == 421
    assert any(
        "toolflow: warning: serving http://0.0.0.0:" in line and "without authentication (--insecure-no-auth)" in line
        for line in server.output
    )


async def test_loopback_checks_host_and_origin(project: Path) -> None:
    """The default bind, 127.0.0.1: local names pass; another Host is 421 and another Origin 403."""
    server = await trio.to_thread.run_sync(lambda: HTTPServer(project))
    try:
        with trio.fail_after(30):
            async with httpx.AsyncClient() as client:
                port = server.url.rsplit(":", 1)[1].split("/")[0]
                local = await open_session(client, server.url, headers={"Host": f"localhost:{port}"})
                rebound = await client.post(
                    server.url, json=INITIALIZE, headers={**HTTP_HEADERS, "Host": "evil.example"}
                )
                origin = await client.post(
                    server.url, json=INITIALIZE, headers={**HTTP_HEADERS, "Origin": "https://evil.example"}
                )
    finally:
        await trio.to_thread.run_sync(server.close)
    assert local["Mcp-Session-Id"]
    assert (rebound.status_code, origin.status_code) == (421, 403)


def test_allowed_hosts_and_origins_from_pyproject(tmp_path: Path) -> None:
    """`[tool.toolflow.serve]` adds hosts and origins to the bind address's; the listener checks them."""
    (tmp_path / "pyproject.toml").write_text(
        '[tool.toolflow.serve]\nallowed-hosts = ["mcp.example"]\nallowed-origins = ["https://app.example"]\n',
        encoding="utf-8",
    )
    from toolflow._project import load_project

    config = load_project(tmp_path).serve
    listener = listen(HTTPSettings(port=0, allowed_hosts=config.allowed_hosts, allowed_origins=config.allowed_origins))
    listener.close()
    assert {"127.0.0.1:*", "localhost:*", "[::1]:*", "mcp.example", "mcp.example:*"} <= set(
        listener.security.allowed_hosts
    )
    assert {"https://app.example", "https://mcp.example", "http://localhost:*"} <= set(
        listener.security.allowed_origins
    )


# --- tokens ------------------------------------------------------------------------------------


def test_token_file_formats(tmp_path: Path) -> None:
    """A TOML file names principals with claims; a plain file has one token per line; a variable, one token."""
    toml = tmp_path / "tokens.toml"
    toml.write_text(TOKENS_TOML, encoding="utf-8")
    toml.chmod(0o600)
    plain = tmp_path / "tokens.txt"
    plain.write_text(f"# tokens\n\n{OTHER_TOKEN}\n", encoding="utf-8")
    plain.chmod(0o600)
    tokens, warnings = BearerTokens.load(path=str(toml), env=["CI_TOKEN"], environ={"CI_TOKEN": "c" * 20})
    assert warnings == ()
    assert tokens.lookup(TOKEN) == Principal(id="alice", claims={"team": "games", "level": 3})
    assert tokens.lookup(OTHER_TOKEN) == Principal(id="ci-bot")
    assert tokens.lookup("c" * 20) == Principal(id="CI_TOKEN")
    assert tokens.lookup(TOKEN[:-1]) is None
    lines, _ = BearerTokens.load(path=str(plain))
    (principal,) = lines.principals
    assert principal.id.startswith("token-")
    assert lines.lookup(OTHER_TOKEN) == principal


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[principals.a]\ntoken = "short"\n', "the token of principal 'a' must be at least 16 characters"),
        ('[principals.a]\ntoken = "has spaces in it, really"\n', "the token of principal 'a' must be"),
        (f'[principals.a]\ntoken = "{TOKEN}"\n[principals.b]\ntoken = "{TOKEN}"\n', "principals 'a' and 'b' have"),
        ('[principals.a]\ntokn = "x"\n', "[principals.a] must have a string token"),
        ("tokens = 1\n", "a TOML token file has one table"),
        ("[principals\n", "invalid TOML"),
    ],
)
def test_bad_token_files_are_configuration_errors(tmp_path: Path, text: str, message: str) -> None:
    """A token file that cannot be used is a ConfigError naming the problem, not a server that lets anyone in."""
    path = tmp_path / "tokens.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=None) as caught:
        BearerTokens.load(path=str(path))
    assert message in str(caught.value)


def test_token_file_readable_by_others_warns(tmp_path: Path) -> None:
    """Tokens in a file other users can read: served, with a warning to chmod it."""
    path = tmp_path / "tokens.txt"
    path.write_text(TOKEN + "\n", encoding="utf-8")
    path.chmod(0o644)
    _, warnings = BearerTokens.load(path=str(path))
    assert warnings == (f"{path}: other users can read the bearer tokens (chmod 600 it)",)


def test_unset_token_variable_is_an_error() -> None:
    """`--auth-token-env VAR` with VAR unset: a configuration error, never a server without tokens."""
    with pytest.raises(ConfigError, match="the bearer-token variable NOPE is not set"):
        BearerTokens.load(env=["NOPE"], environ={})


async def test_token_comparison_checks_every_token() -> None:
    """The verifier answers with the token's principal as client id and subject; unknown tokens get None."""
    tokens = BearerTokens([(TOKEN, Principal(id="alice", claims={"team": "games"})), (OTHER_TOKEN, Principal(id="ci"))])
    access = await tokens.verify_token(OTHER_TOKEN)
    assert access is not None
    assert (access.client_id, access.subject, access.claims) == ("ci", "ci", {})
    assert await tokens.verify_token(OTHER_TOKEN + "x") is None
    assert await tokens.verify_token("") is None


# --- in process: principals and sessions -------------------------------------------------------


@pytest.fixture
def slow_autojump_clock() -> trio.testing.MockClock:
    """Trio's mock clock, jumping ahead only after 50 ms of real idleness, so that loopback I/O is never skipped over."""
    return trio.testing.MockClock(autojump_threshold=0.05)


@attrs.define
class Served:
    url: str
    lifecycle: Lifecycle
    engines: list[str]
    principals: list[Principal | None]


class _Greeter:
    """Binds ``wire.greet``: the HTTP tests' one quick tool."""

    @hookimpl
    def toolflow_register_implementations(self, register: Any) -> None:
        register("wire.greet", lambda name: f"Hello, {name}!")


@contextlib.asynccontextmanager
async def serving(tmp_path: Path, settings: HTTPSettings) -> AsyncIterator[Served]:
    """The HTTP server of `toolflow serve`, in this trio run: engines opened and closed, principals seen per call."""
    spec = tmp_path / "greet.yaml"
    # A Python implementation: a template would render in a worker process, whose start-up in
    # real time the autojump clock would skip past, timing the client out.
    spec.write_text(
        GREET_SPECS.replace('template: "Hello, {{ name }}!"', "implementation: wire.greet"), encoding="utf-8"
    )
    plugins = load_plugins(entry_points=False)
    plugins.register(_Greeter(), "wire-greeter")
    registry = load_registry([spec], plugins=plugins)
    engines: list[str] = []
    principals: list[Principal | None] = []

    @contextlib.asynccontextmanager
    async def tracked_engine() -> AsyncIterator[Engine]:
        async with open_engine(registry) as engine:
            engines.append("opened")
            try:
                yield engine
            finally:
                engines.append("closed")

    service = _RecordingService(registry=registry, open_engine=tracked_engine, principals=principals)
    lifecycle = Lifecycle()
    listener = listen(settings)
    async with trio.open_nursery() as nursery:
        url = await nursery.start(
            functools.partial(serve_http, build_server(service, lifecycle), listener, closing=lifecycle.closing)
        )
        yield Served(url=url, lifecycle=lifecycle, engines=engines, principals=principals)
        lifecycle.stop()


@attrs.define(kw_only=True)
class _RecordingService(ToolService):
    """Records `principal_of(ctx)` for every call, as a handler reads it."""

    principals: list[Principal | None]

    async def call_tool(self, ctx: Any, params: Any) -> Any:
        self.principals.append(principal_of(ctx))
        return await ToolService.call_tool(self, ctx, params)


async def test_each_call_records_its_principal(tmp_path: Path, slow_autojump_clock: trio.testing.MockClock) -> None:
    """`principal_of(ctx)` gives each call the principal of its request's token, with the configured claims."""
    tokens = BearerTokens([(TOKEN, Principal(id="alice", claims={"team": "games"})), (OTHER_TOKEN, Principal(id="ci"))])
    with trio.fail_after(60):
        async with serving(tmp_path, HTTPSettings(port=0, tokens=tokens)) as served, httpx.AsyncClient() as client:
            alice = await open_session(client, served.url, headers={"Authorization": f"Bearer {TOKEN}"})
            ci = await open_session(client, served.url, headers={"Authorization": f"Bearer {OTHER_TOKEN}"})
            for session in (alice, ci, alice):
                await client.post(served.url, json=call(1, "greet", {"name": "Ada"}), headers=session)
            stolen = await client.post(
                served.url,
                json=call(2, "greet", {"name": "Eve"}),
                headers={**ci, "Mcp-Session-Id": alice["Mcp-Session-Id"]},
            )
    assert served.principals == [
        Principal(id="alice", claims={"team": "games"}),
        Principal(id="ci"),
        Principal(id="alice", claims={"team": "games"}),
    ]
    assert stolen.status_code == 404  # a session answers only the token that opened it


async def test_stateless_requests_record_their_principal(
    tmp_path: Path, slow_autojump_clock: trio.testing.MockClock
) -> None:
    """A 2026-07-28 request, without a session, is authenticated too and gets its principal."""
    tokens = BearerTokens([(TOKEN, Principal(id="alice"))])
    request = call(1, "greet", {"name": "Ada"})
    request["params"]["_meta"] = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "wire", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    headers = {**HTTP_HEADERS, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "greet"}
    with trio.fail_after(60):
        async with serving(tmp_path, HTTPSettings(port=0, tokens=tokens)) as served, httpx.AsyncClient() as client:
            anonymous = await client.post(served.url, json=request, headers=headers)
            greeted = await client.post(
                served.url, json=request, headers={**headers, "Authorization": f"Bearer {TOKEN}"}
            )
    assert anonymous.status_code == 401
    assert answers(greeted)[0]["result"]["content"][0]["text"] == "Hello, Ada!"
    assert served.principals == [Principal(id="alice")]


async def test_stateless_mode_issues_no_session_and_each_request_stands_alone(
    tmp_path: Path, slow_autojump_clock: trio.testing.MockClock
) -> None:
    """``--stateless``: no ``Mcp-Session-Id``; a 2025-11-25 client's calls each get an engine of their own."""
    headers = {**HTTP_HEADERS, "MCP-Protocol-Version": "2025-11-25"}
    with trio.fail_after(60):
        async with (
            serving(tmp_path, HTTPSettings(port=0, stateless=True)) as served,
            httpx.AsyncClient() as client,
        ):
            opened = await client.post(served.url, json=INITIALIZE, headers=HTTP_HEADERS)
            first = await client.post(served.url, json=call(1, "greet", {"name": "Ada"}), headers=headers)
            second = await client.post(served.url, json=call(2, "greet", {"name": "Bo"}), headers=headers)
    assert opened.status_code == 200
    assert "mcp-session-id" not in opened.headers
    assert answers(first)[0]["result"]["content"][0]["text"] == "Hello, Ada!"
    assert answers(second)[0]["result"]["content"][0]["text"] == "Hello, Bo!"
    assert served.engines == ["opened", "closed", "opened", "closed"]  # one engine per request


async def test_sessions_over_the_limit_get_503_with_retry_after(
    tmp_path: Path, slow_autojump_clock: trio.testing.MockClock
) -> None:
    """At `max_sessions`, a new session is refused with 503 and `Retry-After`; the open ones go on."""
    settings = HTTPSettings(port=0, max_sessions=2, session_idle_timeout=30)
    with trio.fail_after(60):
        async with serving(tmp_path, settings) as served, httpx.AsyncClient() as client:
            first = await open_session(client, served.url)
            await open_session(client, served.url)
            refused = await client.post(served.url, json=INITIALIZE, headers=HTTP_HEADERS)
            still = await client.post(served.url, json=call(1, "greet", {"name": "Ada"}), headers=first)
    assert refused.status_code == 503
    assert refused.headers["retry-after"] == "30"
    assert answers(still)[0]["result"]["content"][0]["text"] == "Hello, Ada!"


async def test_idle_session_expires_with_its_engine(
    tmp_path: Path, slow_autojump_clock: trio.testing.MockClock
) -> None:
    """A session without requests for the idle timeout is closed with its engine; its id then answers 404."""
    with trio.fail_after(7200):
        async with (
            serving(tmp_path, HTTPSettings(port=0, session_idle_timeout=1800)) as served,
            httpx.AsyncClient() as client,
        ):
            session = await open_session(client, served.url)
            await client.post(served.url, json=call(1, "greet", {"name": "Ada"}), headers=session)
            assert served.engines == ["opened"]
            await trio.sleep(1700)
            kept = await client.post(served.url, json=call(2, "greet", {"name": "Bo"}), headers=session)
            await trio.sleep(1801)
            assert served.engines == ["opened", "closed"]
            expired = await client.post(served.url, json=call(3, "greet", {"name": "Cy"}), headers=session)
            fresh = await open_session(client, served.url)
    assert answers(kept)[0]["result"]["content"][0]["text"] == "Hello, Bo!"
    assert expired.status_code == 404
    assert fresh["Mcp-Session-Id"] != session["Mcp-Session-Id"]


def test_session_options_are_checked(project: Path) -> None:
    """`--max-sessions` must be positive and `--session-idle-timeout` a duration: usage errors otherwise."""
    assert serve(project, "--max-sessions", "0") == (
        2,
        "toolflow: error: serve: --max-sessions must be at least 1, got 0\n",
    )
    code, err = serve(project, "--session-idle-timeout", "forever")
    assert code == 2
    assert err.startswith("toolflow: error: serve: --session-idle-timeout: expected a duration")


# --- cancellation ------------------------------------------------------------------------------


def _waiting_call(request_id: int) -> dict[str, Any]:
    request = call(request_id, "wait_forever")
    request["params"]["_meta"] = {"progressToken": f"progress-{request_id}"}
    return request


def _cancel(request_id: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id, "reason": "no"}}


async def test_cancelled_request_gets_no_answer_over_http(project: Path) -> None:
    """After `notifications/cancelled` the request's stream ends without an answer (the SDK would send -32800)."""
    server = await trio.to_thread.run_sync(lambda: HTTPServer(project))
    events: list[dict[str, Any]] = []
    try:
        with trio.fail_after(60):
            async with httpx.AsyncClient(timeout=60) as client:
                session = await open_session(client, server.url)
                async with client.stream("POST", server.url, json=_waiting_call(7), headers=session) as response:
                    async for line in response.aiter_lines():
                        if line.startswith("data:"):
                            events.append(json.loads(line[5:]))
                            if len(events) == 1:  # the tool reported that it started: cancel it
                                cancelled = await client.post(server.url, json=_cancel(7), headers=session)
                                assert cancelled.status_code == 202
                counted = answers(await client.post(server.url, json=call(8, "cancellations"), headers=session))
    finally:
        await trio.to_thread.run_sync(server.close)
    assert [event.get("method") for event in events] == ["notifications/progress"]
    assert counted[0]["result"]["structuredContent"] == {"cancelled": 1}


def test_cancelled_request_gets_no_answer_over_stdio(project: Path) -> None:
    """Over stdio too: the cancelled request is never answered, and the server goes on."""
    server = StdioServer(project)
    try:
        server.start()
        server.send(_waiting_call(7))
        progress = server.receive()
        assert progress is not None
        assert progress["method"] == "notifications/progress"
        server.send(_cancel(7))
        server.send(call(8, "cancellations"))
        counted = server.receive()
        server.send(call(9, "greet", {"name": "Ada"}))
        greeted = server.receive()
        assert server.stop() == 0
    finally:
        server.kill()
    assert counted is not None
    assert (counted["id"], counted["result"]["structuredContent"]) == (8, {"cancelled": 1})
    assert greeted is not None
    assert greeted["id"] == 9


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            "allowed-host = ['x']",
            "[tool.toolflow.serve] has unknown key 'allowed-host'; did you mean 'allowed-hosts'?",
        ),
        ("allowed-hosts = [1]", "[tool.toolflow.serve] allowed-hosts must be a list of non-empty strings"),
        ("max-sessions = 0", "[tool.toolflow.serve] max-sessions must be a positive integer, got 0"),
        ("max-sessions = true", "[tool.toolflow.serve] max-sessions must be a positive integer, got True"),
        ("session-idle-timeout = 'soon'", "[tool.toolflow.serve] session-idle-timeout: expected a duration"),
        ("session-idle-timeout = inf", "[tool.toolflow.serve] session-idle-timeout: expected a finite duration"),
        ("auth-tokens = 3", "[tool.toolflow.serve] auth-tokens must be a non-empty string (a file)"),
    ],
)
def test_serve_table_is_checked(tmp_path: Path, table: str, message: str) -> None:
    """A mistake in `[tool.toolflow.serve]` is a ConfigError naming the key, before anything is served."""
    (tmp_path / "pyproject.toml").write_text(f"[tool.toolflow.serve]\n{table}\n", encoding="utf-8")
    from toolflow._project import load_project

    with pytest.raises(ConfigError) as caught:
        load_project(tmp_path)
    assert message in str(caught.value)


def test_serve_table_paths_and_durations(tmp_path: Path) -> None:
    """`auth-tokens` is relative to pyproject.toml; durations are read as everywhere else."""
    (tmp_path / "pyproject.toml").write_text(
        '[tool.toolflow]\nshutdown-grace = 0\n\n[tool.toolflow.serve]\nauth-tokens = "secrets/tokens.toml"\n'
        'auth-token-env = "CI_TOKEN"\nmax-sessions = 5\nsession-idle-timeout = "10m"\n',
        encoding="utf-8",
    )
    from toolflow._project import ServeConfig, load_project

    project = load_project(tmp_path)
    assert project.shutdown_grace == 0.0
    assert project.serve == ServeConfig(
        auth_tokens=str(tmp_path / "secrets" / "tokens.toml"),
        auth_token_env=("CI_TOKEN",),
        max_sessions=5,
        session_idle_timeout=600.0,
    )
