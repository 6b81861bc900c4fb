"""MCP tasks that any replica of a fleet answers for (issue 19): records in a real Redis.

Two real ``toolflow serve --transport http --state redis://...`` processes on loopback
(``tests/_fleet.py``) share a real ``redis-server`` (``tests/_redis.py``, skipped, saying how to install it, where there is
none) and one ``TOOLFLOW_STATE_SECRET``. A task runs on the replica that created it; the other
answers ``tasks/get``, ``tasks/result``, ``tasks/list`` and ``tasks/cancel`` from its record.
Under 2026-07-28 a request needs no session, so a client per replica shares a task id; under
2025-11-25 one fleet session's requests are sent to the replica the test names (a
``_fleet.Rotating`` transport over that replica's port alone, moved when the test says). The served tool notes its start and its end (or its being stopped) in a
journal file the replicas share, so a test sees where a cancelled task stopped.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import trio
from _fleet import Fleet, Rotating, authorization, fleet_client, write_tokens
from _redis import RedisServer
from mcp import Client, types
from mcp.shared.exceptions import MCPError
from test_serve_tasks import (
    TOKENS,
    Project,
    cancel,
    client_of,
    create_legacy,
    get_legacy,
    get_modern,
    result_legacy,
    text,
)

from toolflow._serve_conversation import CONVERSATION_META
from toolflow._serve_tasks import CreateExtensionTask
from toolflow._state import HandleKeys, MemoryState
from toolflow._state_config import FleetKeys
from toolflow._state_redis import RedisState
from toolflow._task_records import STALE_AFTER, STOPPED_REPLICA, ServedTask, TaskRecords, view

pytestmark = pytest.mark.filterwarnings(
    r"ignore:Async generator '(httpx2|httpcore2)\..*' was garbage collected:ResourceWarning"
)

SECRET = "the fleet's shared secret of the task tests"

SPEC = """\
toolflow: 1
tools:
  slow:
    description: Work on a topic ("quick" takes half a second, anything else an hour).
    category: async_required
    timeout: 90m
    retry: false
    parameters:
      type: object
      properties:
        topic: {type: string, description: The topic.}
      required: [topic]
    implementation: fleet_tasks.slow
policy:
  categories:
    async_required: {background: true}
"""

PLUGIN = '''\
"""The served tool: notes its start and its end, or its being stopped, in the fleet's journal."""

import os

import trio

import toolflow


def _note(*words):
    # One write(2) on a file opened O_APPEND: lines of several processes never interleave.
    fd = os.open(os.environ["FLEET_JOURNAL"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (" ".join(words) + "\\n").encode())
    finally:
        os.close(fd)


async def slow(topic):
    _note("start", topic, str(os.getpid()))
    finished = False
    try:
        await trio.sleep(0.5 if topic == "quick" else 3600)
        finished = True
        return f"done: {topic}"
    finally:
        _note("end" if finished else "stopped", topic, str(os.getpid()))


@toolflow.hookimpl
def toolflow_register_implementations(register):
    register("fleet_tasks.slow", slow)
'''


@pytest.fixture
def fleet(tmp_path: Path, redis_server: RedisServer) -> Iterator[Fleet]:
    """Two replicas (``fleet.urls``: A, B) of one project on *redis_server*, with the tests' secret and tokens."""
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "tools.yaml").write_text(SPEC, encoding="utf-8")
    (tmp_path / "fleet_tasks.py").write_text(PLUGIN, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "fleet-tasks"\n\n[tool.toolflow]\nspecs = ["specs"]\nplugins = ["fleet_tasks"]\n',
        encoding="utf-8",
    )
    write_tokens(tmp_path, TOKENS)
    served = Fleet(tmp_path, "--auth-tokens", "tokens.toml", "--state", redis_server.url, count=2, secret=SECRET)
    try:
        yield served
    finally:
        served.close()


async def until_noted(fleet: Fleet, line: str) -> None:
    """Wait until the journal has a line starting with *line* (the caller's guard bounds the wait)."""
    while not any(noted.startswith(line) for noted in fleet.lines()):  # noqa: ASYNC110 - another process writes it
        await trio.sleep(0.05)


async def create_modern(client: Client, topic: str) -> CreateExtensionTask:
    created = await client.session.call_tool("slow", {"topic": topic}, allow_claimed=True)
    assert isinstance(created, CreateExtensionTask)
    return created


# --- 2026-07-28 --------------------------------------------------------------------------------


async def test_another_replica_answers_for_a_task_until_its_result(fleet: Fleet) -> None:
    """A task created on A is found on B by its id alone, working, then completed with its result inlined."""
    a, b = fleet.urls
    with trio.fail_after(120):
        async with client_of(a, "alice") as on_a:
            long = await create_modern(on_a, "long")
            quick = await create_modern(on_a, "quick")
        async with client_of(b, "alice") as on_b:
            working = await get_modern(on_b.session, long.task_id)
            while (polled := await get_modern(on_b.session, quick.task_id)).status == "working":  # noqa: ASYNC110
                await trio.sleep(0.05)  # polling, as a client of the extension does
            await cancel(on_b.session, long.task_id)
    assert (working.task_id, working.status, working.created_at) == (long.task_id, "working", long.created_at)
    assert working.ttl_ms == long.ttl_ms
    assert polled.status == "completed"
    assert polled.result is not None
    assert {key: value for key, value in polled.result.items() if key != "_meta"} == {
        "content": [{"type": "text", "text": "done: quick"}],
        "isError": False,
        "resultType": "complete",
    }
    assert CONVERSATION_META in polled.result["_meta"]  # the conversation's handle, as on the replica that ran it
    assert [line.split()[:2] for line in fleet.lines() if "quick" in line] == [["start", "quick"], ["end", "quick"]]


async def test_a_cancel_on_another_replica_stops_the_task_where_it_runs(fleet: Fleet) -> None:
    """tasks/cancel on B: the task says cancelled on B and on A at once, and A stops it."""
    a, b = fleet.urls
    with trio.fail_after(120):
        async with client_of(a, "alice") as on_a, client_of(b, "alice") as on_b:
            task = await create_modern(on_a, "long")
            await until_noted(fleet, "start long")
            acknowledged = await cancel(on_b.session, task.task_id)
            on_b_after = await get_modern(on_b.session, task.task_id)
            on_a_after = await get_modern(on_a.session, task.task_id)
            await until_noted(fleet, "stopped long")
            again = await cancel(on_b.session, task.task_id)  # the extension acknowledges a finished task
    assert set(acknowledged) <= {"resultType", "_meta"}
    assert set(again) <= {"resultType", "_meta"}
    assert on_b_after.status == on_a_after.status == "cancelled"
    assert (
        on_b_after.status_message
        == "Error: cancelled - the client cancelled the task (tasks/cancel) before it finished"
    )
    starts = [line.split()[2] for line in fleet.lines() if line.startswith("start long")]
    stops = [line.split()[2] for line in fleet.lines() if line.startswith("stopped long")]
    assert starts == stops == [str(fleet.replicas[0].process.pid)]  # it ran, and stopped, on A


async def test_another_principal_or_a_forged_id_is_not_found_on_any_replica(fleet: Fleet) -> None:
    """B verifies an id as A would: bob's token, an edited id and a made-up one all get -32602."""
    a, b = fleet.urls
    with trio.fail_after(120):
        async with client_of(a, "alice") as on_a:
            task = await create_modern(on_a, "long")
        payload, _, mac = task.task_id.partition(".")
        forged = payload + "." + ("A" if mac[0] != "A" else "B") + mac[1:]
        other = HandleKeys.from_secrets("another fleet's secret, not ours").sign("x", '["alice", null]', 4e9)
        errors = []
        async with client_of(b, "bob") as bob, client_of(b, "alice") as alice:
            for client, task_id in ((bob, task.task_id), (alice, forged), (alice, other), (alice, "x" * 2000)):
                with pytest.raises(MCPError) as refused:
                    await get_modern(client.session, task_id)
                errors.append((refused.value.error.code, refused.value.error.message))
            with pytest.raises(MCPError) as not_bobs:
                await cancel(bob.session, task.task_id)
            found = await get_modern(alice.session, task.task_id)
            await cancel(alice.session, task.task_id)
    assert {code for code, _ in errors} == {-32602}
    assert {message for _, message in errors} == {
        "Failed to retrieve task: no task of yours has this id (it may have expired)"
    }
    assert not_bobs.value.error.code == -32602
    assert found.status == "working"


async def test_redis_down_the_running_replica_answers_and_the_other_says_why_not(
    fleet: Fleet, redis_server: RedisServer
) -> None:
    """Redis unavailable: the task runs on and A answers from memory; B cannot know it: -32602 saying so."""
    a, b = fleet.urls
    with trio.fail_after(120):
        async with client_of(a, "alice") as on_a:
            task = await create_modern(on_a, "quick")
        await trio.to_thread.run_sync(redis_server.stop)
        async with client_of(b, "alice") as on_b:
            with pytest.raises(MCPError) as unknown:
                await get_modern(on_b.session, task.task_id)
        await until_noted(fleet, "end quick")
        async with client_of(a, "alice") as on_a:
            done = await get_modern(on_a.session, task.task_id)
    assert unknown.value.error.code == -32602
    assert "the shared state that would tell of it is unavailable" in unknown.value.error.message
    assert done.status == "completed"
    warned = [line for line in fleet.output().splitlines() if "the shared state is unavailable (task records)" in line]
    assert 1 <= len(warned) <= 2  # once per replica that met the outage (B; A when it wrote the end)


# --- 2025-11-25 --------------------------------------------------------------------------------


async def test_a_fleet_session_fetches_its_task_from_any_replica(fleet: Fleet) -> None:
    """2025-11-25 in a fleet session: created on A; tasks/result waits on B; tasks/list on B; another session: -32602."""
    a, b = fleet.ports
    pinned, alice = Rotating([a]), authorization("alice", TOKENS)
    with trio.fail_after(120):
        async with fleet_client(fleet, "legacy", pinned, headers=alice) as (session, _):
            task = await create_legacy(session.session, "slow", {"topic": "quick"})
            pinned.ports = [b]
            result = await result_legacy(session.session, task.task_id)  # B polls A's record to its end
            listed = await session.session.send_request(types.ListTasksRequest(), types.ListTasksResult)
            done = await get_legacy(session.session, task.task_id)
            with pytest.raises(MCPError) as finished:
                await cancel(session.session, task.task_id)
            async with fleet_client(fleet, "legacy", Rotating([b]), headers=alice) as (other, _):
                with pytest.raises(MCPError) as refused:
                    await get_legacy(other.session, task.task_id)
                others = await other.session.send_request(types.ListTasksRequest(), types.ListTasksResult)
    assert (result.is_error, text(result)) == (False, "done: quick")
    assert (result.meta or {}).get("io.modelcontextprotocol/related-task") == {"taskId": task.task_id}
    assert [listed_task.task_id for listed_task in listed.tasks] == [task.task_id]
    assert done.status == "completed"
    assert finished.value.error.message == "Cannot cancel task: already in terminal status 'completed'"
    assert refused.value.error.code == -32602
    assert others.tasks == []


# --- the records ---------------------------------------------------------------------------------


async def test_a_record_whose_replica_stopped_reports_failed(redis_server: RedisServer) -> None:
    """A working record not refreshed for STALE_AFTER seconds (its replica was SIGKILLed) reads as failed."""
    now = [1_000_000.0]
    state = RedisState(redis_server.url, timeout=10, keys=HandleKeys.from_secrets(SECRET))
    records = TaskRecords(state, clock=lambda: now[0])
    owner = json.dumps(["alice", None])
    task = ServedTask(
        id="signed-id",
        local="local-id",
        owner=owner,
        modern=True,
        created="2026-11-26T13:00:00.000Z",
        updated="2026-11-26T13:00:00.000Z",
        expires=0.0,
        until=now[0] + 900,
        ttl_ms=900_000,
    )
    try:
        with trio.fail_after(60):
            await records.created(task)
            fresh = await records.find("local-id", "signed-id", owner)
            now[0] += STALE_AFTER + 1
            stale = await records.find("local-id", "signed-id", owner)
            listed = await records.of_owner(owner)
            ended = await records.finished(stale) if stale is not None else None
            assert await records.find("local-id", "signed-id", json.dumps(["bob", None])) is None
    finally:
        state.close()
    assert fresh is not None
    assert fresh.status == "working"
    assert stale is not None
    assert (stale.status, stale.message) == ("failed", STOPPED_REPLICA)
    assert [t.status for t in listed] == ["failed"]
    assert ended is not None
    assert ended.result is not None
    assert ended.result.is_error
    assert view({"status": "completed", "beat": 0}, now[0])["status"] == "completed"  # an ended task stays ended


def test_records_are_sealed_with_the_fleet_secret(redis_server: RedisServer) -> None:
    """A record planted in Redis by someone without the secret is no record: the replicas do not read it."""
    client = redis.Redis.from_url(redis_server.url, socket_timeout=10)
    state = RedisState(redis_server.url, timeout=10, keys=HandleKeys.from_secrets(SECRET))
    try:
        unsealed = RedisState(redis_server.url, timeout=10)
        unsealed.store("task:planted", {"id": "x", "owner": "y", "status": "completed"}, 0, 60)
        unsealed.close()
        assert client.exists("toolflow:conversation:task:planted")
        assert state.load("task:planted").version == 0
    finally:
        state.close()
        client.close()


# --- the keys ------------------------------------------------------------------------------------


def test_records_need_a_shared_state_and_the_fleet_secret(tmp_path: Path) -> None:
    """Without the secret the replicas cannot verify each other's ids: no records (serve warns at start-up)."""
    project = Project(tmp_path)
    keys = HandleKeys.from_secrets(SECRET)
    state = RedisState("redis://127.0.0.1:1/0")  # nothing connects until the first operation
    try:
        alone = project.service(state=state)
        shared = project.service(state=state, keys=FleetKeys.of_secret(keys))
        memory = project.service(state=MemoryState(), keys=FleetKeys.of_secret(keys))
    finally:
        state.close()
    assert alone.tasks is not None
    assert alone.tasks.records is None
    assert shared.tasks is not None
    assert shared.tasks.records is not None
    assert shared.tasks.keys is keys
    assert memory.tasks is not None
    assert memory.tasks.records is None  # one replica: nothing is written
