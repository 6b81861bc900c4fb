"""Where each of a fleet's settings comes from, said once: the keys, serve's conversations, the lease TTL.

The keys a process signs and seals with come from ``TOOLFLOW_STATE_SECRET`` or are its own
(:class:`toolflow._state_config.FleetKeys`); ``toolflow serve`` hands them to the service, whose
task ids, conversation handles and approval seal all use them. The commands read
``TOOLFLOW_LEASE_TTL`` and give it to the state backend (``state_from_url(url, lease_ttl=)``),
whose leases the engine then takes for that long: the engine reads no environment. A
conversation's document is waited for as long as the engine's ``cache_timeout`` when that is
longer than two seconds.
"""

from __future__ import annotations

import io
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
import redis
import trio
import trio.testing
from _redis import RedisServer

import toolflow
from toolflow._cache import DEFAULT_CACHE_TIMEOUT
from toolflow._cli_support import project_cache_settings, serve_state_settings
from toolflow._serve import ToolService
from toolflow._serve_http import HTTPSettings
from toolflow._state import Conversation, HandleKeys, MemoryState
from toolflow._state_config import FleetKeys, state_from_url
from toolflow._state_redis import RedisState

SECRET = "the fleet's shared secret, 0123"

SPEC = """\
toolflow: 1
tools:
  later:
    description: Runs in the background.
    category: later
    template: "done"
policy:
  categories:
    later: {background: true}
"""


def _service(tmp_path: Path, **options: Any) -> ToolService:
    (tmp_path / "tools.yaml").write_text(SPEC, encoding="utf-8")
    specs = toolflow.load_specs([tmp_path / "tools.yaml"])
    registry = toolflow.Registry.build(specs, toolflow.load_plugins(entry_points=False))
    return ToolService.under_policy(registry, policy=toolflow.Policy.from_specs(specs), **options)


def test_the_keys_come_from_the_fleets_secret_or_are_the_process_own() -> None:
    """With the secret, every replica's keys verify each other's handles; without, each process has its own."""
    fleet = FleetKeys.from_environ({"TOOLFLOW_STATE_SECRET": SECRET})
    assert fleet.from_secret
    assert fleet.secret_keys is fleet.keys
    handle = HandleKeys.from_secrets(SECRET).sign("c1", None, 4e9)
    assert fleet.keys.verify(handle, None, 0.0) == "c1"
    own, other = FleetKeys.from_environ({}), FleetKeys()
    assert not own.from_secret
    assert own.secret_keys is None
    assert own.keys.verify(other.keys.sign("c1", None, 4e9), None, 0.0) is None
    with pytest.raises(toolflow.UsageError, match="16 characters or more"):
        FleetKeys.from_environ({"TOOLFLOW_STATE_SECRET": "short"})


def test_the_service_signs_tasks_and_handles_with_its_keys_and_seals_with_the_fleets(tmp_path: Path) -> None:
    """One record: task ids and handles under its keys; the task records and the approval seal only with the secret."""
    fleet = FleetKeys.of_secret(HandleKeys.from_secrets(SECRET))
    state = RedisState("redis://127.0.0.1:1/0")  # nothing connects until the first operation
    try:
        shared = _service(tmp_path, keys=fleet, state=state, conversation_ttl=60.0)
        alone = _service(tmp_path, state=state, conversation_ttl=60.0)
    finally:
        state.close()
    assert shared.tasks is not None
    assert shared.tasks.keys is fleet.keys
    assert shared.tasks.records is not None
    assert shared.conversations is not None
    assert shared.conversations.keys is fleet.keys
    assert alone.tasks is not None
    assert alone.tasks.records is None  # the other replicas could not verify its task ids
    assert alone.conversations is not None
    assert alone.conversations.keys is alone.keys.keys
    assert alone.tasks.keys is alone.keys.keys
    # The approval seal across replicas: test_serve_conversation.py's approval asked by one replica.


def test_without_a_conversation_lifetime_no_conversation_is_kept(tmp_path: Path) -> None:
    """stdio and --stateless: the service keys no request by conversation."""
    assert _service(tmp_path, state=MemoryState()).conversations is None


@pytest.mark.parametrize(
    ("http", "kept"),
    [(None, None), (HTTPSettings(stateless=True), None), (HTTPSettings(session_idle_timeout=90.0), 90.0)],
)
def test_serve_keeps_conversations_over_http_only(
    http: HTTPSettings | None, kept: float | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``toolflow serve``: the conversations live the HTTP sessions' idle timeout; none over stdio or stateless."""
    monkeypatch.setenv("TOOLFLOW_STATE_SECRET", SECRET)
    settings = serve_state_settings(http, MemoryState(), io.StringIO())
    assert settings["conversation_ttl"] == kept
    assert settings["keys"].from_secret


def test_serve_warns_once_of_a_fleet_without_the_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    """A shared state over HTTP without the secret: one warning; the keys are the process's own."""
    monkeypatch.delenv("TOOLFLOW_STATE_SECRET", raising=False)
    monkeypatch.delenv("TOOLFLOW_STATE_SECRET_PREVIOUS", raising=False)
    state = RedisState("redis://127.0.0.1:1/0")
    try:
        err = io.StringIO()
        settings = serve_state_settings(HTTPSettings(), state, err)
        quiet = io.StringIO()
        serve_state_settings(HTTPSettings(), MemoryState(), quiet)
    finally:
        state.close()
    assert not settings["keys"].from_secret
    assert err.getvalue().count("TOOLFLOW_STATE_SECRET is not set") == 1
    assert quiet.getvalue() == ""


# --------------------------------------------------------------------------- the lease TTL

LEASED = """\
toolflow: 1
tools:
  probe:
    description: One at a time across the fleet; reads its own lease while it runs.
    concurrency: 1
    implementation: settings.probe
"""


class Probe:
    """The plugin of ``probe``: notes the expiry of the lease it runs under, as Redis holds it."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.expiries: list[float] = []

    @toolflow.hookimpl
    def toolflow_register_implementations(self, register: Callable[[str, Any], None]) -> None:
        """``settings.probe``."""

        def probe() -> str:
            client = redis.Redis.from_url(self.url)
            try:
                held = cast("list[tuple[bytes, float]]", client.zrange("toolflow:lease:probe", 0, -1, withscores=True))
                self.expiries += [score for _, score in held]
            finally:
                client.close()
            return "probed"

        register("settings.probe", probe)


async def test_the_engine_takes_its_leases_for_the_backends_ttl_not_the_environments(
    tmp_path: Path, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lease lives the TTL the state backend was given; TOOLFLOW_LEASE_TTL in the environment changes nothing here."""
    monkeypatch.setenv("TOOLFLOW_LEASE_TTL", "2s")  # the commands' business: an engine never reads it
    (tmp_path / "leased.yaml").write_text(LEASED, encoding="utf-8")
    probe = Probe(redis_server.url)
    plugins = toolflow.load_plugins(entry_points=False)
    plugins.register(probe, "settings")
    registry = toolflow.load_registry([tmp_path / "leased.yaml"], plugins=plugins)
    now = 1_000_000.0
    for ttl, state in (
        (6.0, RedisState(redis_server.url, timeout=10, clock=lambda: now, lease_ttl=6.0)),
        (30.0, RedisState(redis_server.url, timeout=10, clock=lambda: now)),  # the default
    ):
        try:
            with trio.fail_after(30):
                async with toolflow.open_engine(registry, plugins=plugins, state=state) as engine:
                    result = await engine.call("probe", {})
        finally:
            state.close()
        assert result.success, result.error
        assert probe.expiries.pop() == now + ttl


def test_the_commands_give_the_state_the_lease_ttl_of_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``call``, ``run`` and ``serve`` build their state with TOOLFLOW_LEASE_TTL (project_cache_settings)."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "ttl"\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOOLFLOW_STATE", "redis://127.0.0.1:1/0")  # nothing listens there: nothing connects
    monkeypatch.setenv("TOOLFLOW_LEASE_TTL", "6s")
    state = project_cache_settings()["state"]
    try:
        assert isinstance(state, RedisState)
        assert state.lease_ttl == 6.0
    finally:
        state.close()
    monkeypatch.delenv("TOOLFLOW_LEASE_TTL")
    state = project_cache_settings()["state"]
    try:
        assert state.lease_ttl == 30.0
    finally:
        state.close()


def test_a_lease_ttl_below_one_second_is_refused() -> None:
    """In Python as from the environment: a lease renewed every third of a TTL under 1 s would be lost to a stall."""
    for bad in (0.5, 0, -1, float("inf"), "10"):
        with pytest.raises(ValueError, match="lease_ttl must be a number of seconds of at least 1"):
            state_from_url("redis://127.0.0.1:1/0", lease_ttl=bad)  # type: ignore[arg-type]
    state_from_url("redis://127.0.0.1:1/0", lease_ttl=1).close()


# --------------------------------------------------------------------------- the conversation's wait


class Hung(MemoryState):
    """A state whose conversation documents never come (a worker thread stuck on a lock) until unblocked."""

    def __init__(self) -> None:
        super().__init__()
        self.unblocked = threading.Event()

    def load(self, conversation: str) -> Conversation:
        self.unblocked.wait(60)
        return super().load(conversation)


@pytest.mark.parametrize(("cache_timeout", "wait"), [(DEFAULT_CACHE_TIMEOUT, 2.0), (0.5, 2.0), (5.0, 5.0)])
async def test_a_conversations_document_is_waited_for_the_cache_timeout_when_longer(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, cache_timeout: float, wait: float
) -> None:
    """A loaded machine raises ``cache_timeout``, and the conversation's load waits as long (at least 2 s)."""
    (tmp_path / "tools.yaml").write_text(SPEC, encoding="utf-8")
    registry = toolflow.load_registry([tmp_path / "tools.yaml"], plugins=toolflow.load_plugins(entry_points=False))
    state = Hung()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            start = trio.current_time()
            async with toolflow.open_engine(
                registry, state=state, conversation="c1", cache_timeout=cache_timeout
            ) as engine:
                began = trio.current_time() - start
                assert engine.conversation is not None
                assert engine.conversation.wait == wait
    finally:
        state.unblocked.set()
    assert began == pytest.approx(wait)
    assert [type(w.message) for w in caught] == [toolflow.CacheWarning]  # one per outage: the commit's is silent
    assert f"the conversation state is unavailable (no answer within {wait:g}s)" in str(caught[0].message)
