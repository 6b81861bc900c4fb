"""The deployment files of ``deploy/`` (issue 19): what can be checked without a Docker engine.

There is no Docker engine here or in CI, so the image is never built. What is checked instead:
compose.yaml loads and its services, ports, build context and Dockerfile fit together; every
``toolflow`` command line of the Dockerfile and compose.yaml parses with toolflow's own argument
parser; nginx.conf names compose.yaml's replicas; the Python version and extras the image
installs exist in pyproject.toml. And, for real: the Dockerfile's command serves (three
processes on loopback, sharing a real Redis) behind the real nginx with deploy/nginx.conf (where
nginx is installed: ``apt-get install nginx``), round-robin as shipped, and every request of a
session served however nginx routes it (the replicas keep their sessions in Redis);
and the image's health check tells a serving replica from a dead one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
import yaml
from _fleet import Fleet
from _mcp_project import HTTPServer, write_project
from _mcp_wire import HTTP_HEADERS, INITIALIZE, answers, call
from _redis import RedisServer, _free_port
from packaging.specifiers import SpecifierSet

from toolflow._cli import _parser
from toolflow._state_config import state_from_url
from toolflow._state_redis import RedisState

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
TOKEN = "tf-deploy-0123456789abcdef"
MISSING_NGINX = os.environ.get("TOOLFLOW_TEST_MISSING_NGINX") or (
    "nginx is not installed (python3 tasks.py test installs it; or: apt-get install nginx)"
)

# --------------------------------------------------------------------------- reading the files


def dockerfile() -> dict[str, list[str]]:
    """The Dockerfile's instructions: each keyword and the arguments of its lines, continuations joined."""
    text = re.sub(r"\\\n", " ", (DEPLOY / "Dockerfile").read_text(encoding="utf-8"))
    instructions: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            keyword, _, rest = line.strip().partition(" ")
            instructions.setdefault(keyword.upper(), []).append(rest.strip())
    return instructions


def exec_form(text: str) -> list[str]:
    """An instruction's JSON (exec) form, which the Dockerfile uses throughout (no shell in between)."""
    argv = json.loads(text)
    assert isinstance(argv, list)
    assert all(isinstance(arg, str) for arg in argv)
    return argv


def entrypoint() -> list[str]:
    (line,) = dockerfile()["ENTRYPOINT"]
    return exec_form(line)


def compose() -> dict[str, Any]:
    data = yaml.safe_load((DEPLOY / "compose.yaml").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def interpolate(value: str, environ: dict[str, str]) -> str:
    """Compose's ``${VAR}``, ``${VAR:-default}`` and ``${VAR:?message}``, as ``docker compose`` does them."""

    def one(match: re.Match[str]) -> str:
        name, operator, word = match.group(1), match.group(2), match.group(3)
        if environ.get(name):
            return environ[name]
        if operator == ":?":
            msg = f"compose.yaml needs {name}: {word}"
            raise KeyError(msg)
        return word or ""

    return re.sub(r"\$\{(\w+)(?:(:-|:\?)([^}]*))?\}", one, value)


def replicas() -> dict[str, dict[str, Any]]:
    return {name: service for name, service in compose()["services"].items() if "build" in service}


def nginx_upstream() -> list[str]:
    text = (DEPLOY / "nginx.conf").read_text(encoding="utf-8")
    (block,) = re.findall(r"upstream toolflow \{(.*?)\}", text, re.DOTALL)
    return re.findall(r"^\s*server\s+(\S+?)[\s;]", block, re.MULTILINE)


def option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


# --------------------------------------------------------------------------- the files fit together


def test_compose_names_a_redis_an_nginx_and_replicas_of_the_image() -> None:
    """compose.yaml loads; its replicas build deploy/Dockerfile from the repository root."""
    services = compose()["services"]
    assert {"redis", "nginx"} <= set(services)
    assert len(replicas()) >= 2
    for service in replicas().values():
        context = (DEPLOY / service["build"]["context"]).resolve()
        assert context == ROOT
        assert (context / service["build"]["dockerfile"]).resolve() == DEPLOY / "Dockerfile"
        assert "ports" not in service  # only nginx is reached from outside
        assert service["depends_on"]["redis"] == {"condition": "service_healthy"}
        assert [secret["target"] for secret in service["secrets"]] == ["tokens.toml"]
    assert "ports" not in services["redis"]  # keep Redis private
    # nginx resolves the upstream's names at start: the replicas must be up by then
    assert services["nginx"]["depends_on"] == {name: {"condition": "service_healthy"} for name in replicas()}


def test_every_toolflow_command_line_parses() -> None:
    """The image's command and each replica's, interpolated as compose does, are valid ``toolflow serve`` lines."""
    command = entrypoint()
    assert command[:2] == ["toolflow", "serve"]
    lines = [command + exec_form(line) for line in dockerfile()["CMD"]]
    environ = {"TOOLFLOW_STATE_SECRET": "a secret of the fleet, long enough"}
    lines += [command + [interpolate(arg, environ) for arg in s["command"]] for s in replicas().values()]
    for argv in lines:
        parsed = _parser().parse_args(argv[1:])  # raises UsageError, naming it, on an unknown option
        assert (parsed.command, parsed.transport, parsed.host) == ("serve", "http", "0.0.0.0")
        assert parsed.allow_host  # a wildcard bind refuses to start without the names clients use
        assert parsed.auth_tokens == "/run/secrets/tokens.toml"  # where compose mounts the secret
        assert parsed.auth_tokens.endswith(".toml")  # so that it is read as TOML, with principals


def test_the_image_and_the_replicas_agree_on_port_state_and_secret() -> None:
    """The port serve listens on is the one exposed and nginx's; the state URL parses; the secret is required."""
    port = option(entrypoint(), "--port")
    assert dockerfile()["EXPOSE"] == [port]
    for name, service in replicas().items():
        assert service["expose"] == [port]
        assert f"{name}:{port}" in nginx_upstream()
        environment = service["environment"]
        backend = state_from_url(environment["TOOLFLOW_STATE"])  # nothing connects yet
        assert isinstance(backend, RedisState)
        assert backend.url == "redis://redis:6379/0"  # the compose service named redis
        backend.close()
        with pytest.raises(KeyError, match="TOOLFLOW_STATE_SECRET"):
            interpolate(environment["TOOLFLOW_STATE_SECRET"], {})


def test_nginx_names_exactly_the_replicas_and_listens_where_compose_publishes() -> None:
    """nginx.conf's upstream is compose.yaml's replicas; its listening port is the one published."""
    port = option(entrypoint(), "--port")
    assert sorted(nginx_upstream()) == sorted(f"{name}:{port}" for name in replicas())
    text = (DEPLOY / "nginx.conf").read_text(encoding="utf-8")
    (listen,) = re.findall(r"^\s*listen\s+(\d+);", text, re.MULTILINE)
    assert compose()["services"]["nginx"]["ports"] == [f"{listen}:{listen}"]
    assert "./nginx.conf:/etc/nginx/nginx.conf:ro" in compose()["services"]["nginx"]["volumes"]
    assert re.search(r"^\s*proxy_buffering off;", text, re.MULTILINE)  # server-sent events pass as they come


def test_the_image_installs_what_pyproject_declares() -> None:
    """The base image's Python satisfies requires-python; the extras installed exist; the copied paths exist."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    (base,) = dockerfile()["FROM"]
    version = re.fullmatch(r"python:(\d+\.\d+)-slim", base)
    assert version is not None
    assert version.group(1) in SpecifierSet(project["requires-python"])
    (install,) = (line for line in dockerfile()["RUN"] if line.startswith("pip install"))
    extras = re.search(r'"\.\[([\w,-]+)\]"', install)
    assert extras is not None
    assert set(extras.group(1).split(",")) == {"mcp", "redis"}
    assert set(extras.group(1).split(",")) <= set(project["optional-dependencies"])
    ignored = {
        line.strip() for line in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines() if line.strip()
    }
    for line in dockerfile()["COPY"]:
        sources = [arg for arg in line.split()[:-1] if not arg.startswith("--")]
        for source in sources:
            assert (ROOT / source).exists(), source
            assert source.split("/")[0] not in ignored, f"{source} is left out of the build context"
    user = dockerfile()["USER"]
    assert user == ["toolflow"]  # not root


# --------------------------------------------------------------------------- running them for real


def image_command(project: Path, state: str) -> list[str]:
    """The image's ``toolflow serve`` arguments, with the container's paths and bind made this machine's."""
    local = {
        "/app/specs": str(project / "specs"),
        "/run/secrets/tokens.toml": str(project / "tokens.toml"),
        "0.0.0.0": "127.0.0.1",  # serve on loopback only: nothing but this test may reach it
        "8000": "0",
    }
    argv = [local.get(arg, arg) for arg in entrypoint()[2:]]
    (cmd,) = dockerfile()["CMD"]
    return [*argv, *exec_form(cmd), "--state", state]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = write_project(tmp_path / "served")
    tokens = root / "tokens.toml"
    tokens.write_text(f'[principals.alice]\ntoken = "{TOKEN}"\n', encoding="utf-8")
    tokens.chmod(0o600)
    return root


def healthcheck(url: str) -> int:
    (line,) = dockerfile()["HEALTHCHECK"]
    argv = exec_form(line.split(" CMD ", 1)[1])
    assert argv[:2] == ["python", "/usr/local/lib/toolflow/healthcheck.py"]
    script = DEPLOY / "healthcheck.py"
    return subprocess.run([sys.executable, script, url], check=False, timeout=30).returncode


def test_the_health_check_tells_a_serving_replica_from_a_dead_one(project: Path) -> None:
    """The image's health check passes against the image's command, and fails once it has stopped."""
    server = HTTPServer(project, *image_command(project, "memory"))
    try:
        assert healthcheck(server.url) == 0  # 401: the server answers, and wants a token
    finally:
        server.close()
    assert healthcheck(server.url) == 1  # nothing listens


@pytest.fixture
def nginx(tmp_path: Path) -> tuple[str, Path]:
    """The nginx executable and a directory for its files; skips, saying how to install it, where there is none."""
    executable = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if executable is None:
        pytest.skip(MISSING_NGINX)
    return executable, tmp_path / "nginx"


class Nginx:
    """deploy/nginx.conf, its replicas and port made local, run by the real nginx."""

    def __init__(self, executable: str, directory: Path, replicas: list[str], upstream_hash: str | None) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        self._executable = executable
        self._directory = directory
        text = (DEPLOY / "nginx.conf").read_text(encoding="utf-8")
        servers = iter(replicas)
        text = re.sub(r"server toolflow-\d+:8000", lambda _: f"server {next(servers)}", text)
        text = re.sub(r"listen 8080;", f"listen 127.0.0.1:{self.port};", text)
        temp = " ".join(f"{kind}_temp_path {directory / kind};" for kind in ("client_body", "proxy", "fastcgi"))
        temp += f" uwsgi_temp_path {directory / 'uwsgi'}; scgi_temp_path {directory / 'scgi'};"
        # Test-only: where files go, and which replica answered (nginx's own variable).
        text = text.replace("http {", f"http {{\n    access_log off; {temp}", 1)
        text = text.replace(
            "proxy_pass http://toolflow;", "proxy_pass http://toolflow;\n add_header X-Upstream $upstream_addr always;"
        )
        if upstream_hash is not None:  # as shipped: round-robin
            text = text.replace("upstream toolflow {", f"upstream toolflow {{\n hash {upstream_hash} consistent;", 1)
        (directory / "nginx.conf").write_text(text, encoding="utf-8")
        self._process = subprocess.Popen(
            [executable, "-p", str(directory), "-c", str(directory / "nginx.conf"), "-e", str(directory / "error.log"),
             "-g", f"daemon off; pid {directory / 'nginx.pid'}; error_log {directory / 'error.log'};"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while not self._listening():
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.close()
                pytest.fail(f"nginx did not start: {(directory / 'error.log').read_text(errors='replace')}")
            time.sleep(0.02)

    def _listening(self) -> bool:
        try:
            with httpx.Client() as client:
                client.get(f"http://127.0.0.1:{self.port}/", timeout=1)
        except httpx.TransportError:
            return False
        return True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def close(self) -> None:
        if self._process.poll() is None:
            self._process.send_signal(signal.SIGQUIT)  # graceful: workers finish, then the master exits
            try:
                self._process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        if self._process.stderr is not None:
            self._process.stderr.close()


CLIENTS = 15
"""Clients, each from an address of its own on loopback (127.0.0.11 ...), as many machines would be."""


async def sessions_through(url: str) -> list[tuple[set[str], list[int], list[int]]]:
    """Each client opens a session and calls ``ticket`` three times.

    Returns, per client: the replicas that answered, the HTTP statuses, the tickets.
    """
    outcomes = []
    for index in range(CLIENTS):
        transport = httpx.AsyncHTTPTransport(local_address=f"127.0.0.{11 + index}")
        auth = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(transport=transport, timeout=30) as client:
            response = await client.post(url, json=INITIALIZE, headers={**HTTP_HEADERS, **auth})
            assert response.status_code == 200, response.text
            upstreams = {response.headers["x-upstream"]}
            session = {**HTTP_HEADERS, **auth, "Mcp-Session-Id": response.headers["mcp-session-id"]}
            statuses, tickets = [], []
            for request_id in range(1, 4):
                response = await client.post(url, json=call(request_id, "ticket"), headers=session)
                upstreams.add(response.headers["x-upstream"])
                statuses.append(response.status_code)
                if response.status_code == 200:
                    (answer,) = answers(response)
                    tickets.append(answer["result"]["structuredContent"]["ticket"])
            outcomes.append((upstreams, statuses, tickets))
    return outcomes


async def test_nginx_spreads_each_client_over_the_replicas_and_any_routing_serves_the_sessions(
    project: Path, redis_server: RedisServer, nginx: tuple[str, Path]
) -> None:
    """Three replicas of the image's command behind deploy/nginx.conf: round-robin, and every session is served.

    The replicas share a Redis and the fleet's secret, so they keep their 2025-11-25 sessions in
    it (a fleet): any replica serves any request of a session. So the shipped round-robin serves
    every request (before fleet sessions, most got 404 "Session not found"), and so do a hash on
    the client's address (what a fleet without the secret needs, docs/deploying.md) and one on the
    session id. The session's conversation state is in Redis too: the ``ticket`` tool's session
    cache holds whichever replicas the session's requests reach.
    """
    executable, directory = nginx
    fleet = Fleet(project, *image_command(project, redis_server.url), count=3)
    try:
        addresses = [server.url.removeprefix("http://").removesuffix("/mcp") for server in fleet.replicas]
        spread: dict[str | None, set[str]] = {}
        for key in (None, "$binary_remote_addr", "$http_mcp_session_id"):  # as shipped, by address, by session
            proxy = Nginx(executable, directory / f"by-{key or 'default'}".replace("$", ""), addresses, key)
            try:
                with trio.fail_after(120):
                    outcomes = await sessions_through(proxy.url)
            finally:
                proxy.close()
            for upstreams, statuses, tickets in outcomes:
                assert statuses == [200, 200, 200], key
                assert len(tickets) == 3
                assert len(set(tickets)) == 1, key  # the session cache held on every replica: the tool ran once
                if key == "$binary_remote_addr":
                    assert len(upstreams) == 1, upstreams  # one replica for the whole client
            spread[key] = set().union(*(upstreams for upstreams, _, _ in outcomes))
        assert len(spread[None]) == 3  # round-robin: the sessions' requests went everywhere, and were served
        assert len(spread["$binary_remote_addr"]) >= 2  # the clients spread out
    finally:
        fleet.close()
