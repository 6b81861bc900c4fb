"""MCP tasks in ``toolflow serve``: calls of background categories answered with a task, fetched later.

The service under test is the one ``toolflow serve`` builds (:meth:`ToolService.under_policy`),
connected in process to the ``mcp`` SDK's own ``Client`` on trio's mock clock (a report takes a
virtual minute): over the 2025-11-25 handshake (``mode="legacy"``: tasks in the core protocol)
and over 2026-07-28 (the Tasks extension). The SDK 2.3 has the 2025-11-25 task messages as types
only and validates a ``tools/call`` answer as a ``CallToolResult``, so a legacy task is created
through the client session's dispatcher, raw; every other request goes through its generic
``send_request`` with the SDK's types. Real processes follow, for both generations:
``toolflow serve`` over HTTP with two principals, and over stdio.
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import httpx2
import pytest
import trio
import trio.testing
from _mcp_project import HTTPServer, serve_argv, server_environment
from mcp import Client, ClientSession, StdioServerParameters, stdio_client, types
from mcp.client.extension import ClaimContext, ClientExtension, NotificationBinding, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

import toolflow
from toolflow._policy import OnExit
from toolflow._serve import Lifecycle, ToolService, build_server
from toolflow._serve_conversation import CONVERSATION_META
from toolflow._serve_tasks import RELATED_TASK, TASKS_EXTENSION, CreateExtensionTask, ExtensionTask, TaskLimits

pytestmark = pytest.mark.filterwarnings(
    r"ignore:Async generator '(httpx2|httpcore2)\..*' was garbage collected:ResourceWarning"
)

SPEC = """\
toolflow: 1
tools:
  report:
    description: Write a report on a topic (it takes a minute).
    category: async_required
    timeout: 10m
    retry: false
    parameters:
      type: object
      properties:
        topic: {type: string, description: The topic.}
      required: [topic]
    implementation: tasks.report
  forever:
    description: Never finishes.
    category: async_required
    timeout: 90m
    retry: false
    implementation: tasks.forever
  broken:
    description: Always fails.
    category: async_required
    retry: false
    implementation: tasks.broken
  whoami:
    description: Who is calling.
    category: async_required
    context: {who: principal.id}
    parameters:
      type: object
      properties:
        who: {type: string, description: The caller.}
      required: [who]
    template: "you are {{ who }}"
  publish:
    description: Publish the report (needs approval).
    category: risky
    template: published
  greet:
    description: Greet.
    category: safe_chain
    template: hello
policy:
  categories:
    async_required: {background: true}
    risky: {background: true, approval: true}
"""

PLUGIN = '''\
"""The served tools: a report takes a (virtual, or real in a subprocess) while."""

import os

import trio

import toolflow


async def report(topic):
    await trio.sleep(float(os.environ.get("REPORT_SECONDS", "60")))
    if os.environ.get("REPORT_DONE"):
        with open(os.environ["REPORT_DONE"], "a", encoding="utf-8") as done:
            done.write(topic + "\\n")
    return f"report on {topic}"


async def forever():
    await trio.sleep_forever()


async def broken():
    raise ValueError("the printer is on fire")


@toolflow.hookimpl
def toolflow_register_implementations(register):
    for function in (report, forever, broken):
        register(f"tasks.{function.__name__}", function)
'''

TOKENS = {"alice": "tf-alice-0123456789abcdef", "bob": "tf-bob-fedcba9876543210"}


class Project:
    """The project on disk and what ``toolflow serve`` builds of it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        suffix = re.sub(r"\W", "_", root.name)  # a plugin module stays in sys.modules: a name of its own
        (root / "specs").mkdir(exist_ok=True)
        (root / "specs" / "tools.yaml").write_text(SPEC.replace("tasks.", f"tasks_{suffix}."), encoding="utf-8")
        (root / f"tasks_{suffix}.py").write_text(PLUGIN.replace("tasks.", f"tasks_{suffix}."), encoding="utf-8")
        (root / "pyproject.toml").write_text(
            f'[project]\nname = "tasks"\n\n[tool.toolflow]\nspecs = ["specs"]\nplugins = ["tasks_{suffix}"]\n',
            encoding="utf-8",
        )
        tokens = "".join(f'[principals.{name}]\ntoken = "{token}"\n\n' for name, token in TOKENS.items())
        (root / "tokens.toml").write_text(tokens, encoding="utf-8")
        (root / "tokens.toml").chmod(0o600)
        self.plugins = toolflow.load_plugins(entry_points=False, project_plugins=[f"tasks_{suffix}"], project_root=root)
        self.specs = toolflow.load_specs([root / "specs"], kinds=self.plugins.kind_schemas())
        assert self.specs.ok, [d.render() for d in self.specs.diagnostics]
        self.registry = toolflow.Registry.build(self.specs, self.plugins)
        self.policy = toolflow.Policy.from_specs(self.specs)

    def service(self, **options: Any) -> ToolService:
        return ToolService.under_policy(self.registry, policy=self.policy, plugins=self.plugins, **options)


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path)


class TasksClient(ClientExtension):
    """The client's half of the Tasks extension: a ``task`` answer is polled to its end; status notifications are kept."""

    identifier = TASKS_EXTENSION

    def __init__(self) -> None:
        self.statuses: list[tuple[str, str]] = []

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreateExtensionTask, resolve=self.resolve)]

    def notifications(self) -> list[NotificationBinding[Any]]:
        binding = NotificationBinding(
            method="notifications/tasks/status", params_type=types.TaskStatusNotificationParams, handler=self.status
        )
        return [binding]

    async def status(self, params: types.TaskStatusNotificationParams) -> None:
        self.statuses.append((params.task_id, params.status))

    async def resolve(self, task: CreateExtensionTask, context: ClaimContext) -> types.CallToolResult:
        while True:
            polled = await get_modern(context.session, task.task_id)
            if polled.status == "completed":
                return types.CallToolResult.model_validate(polled.result)
            assert polled.status == "working", polled
            await trio.sleep((polled.poll_interval_ms or 1000) / 1000)


@contextlib.asynccontextmanager
async def serving(
    service: ToolService, mode: str, *, lifecycle: Lifecycle | None = None, extension: bool = True
) -> AsyncIterator[Client]:
    """The SDK's client, in process, speaking *mode*, on one engine (as over stdio), with tasks running."""
    assert service.tasks is not None
    extensions = [TasksClient()] if extension else []
    async with service.open_engine() as engine, service.tasks.running():
        service.shared = engine
        async with Client(build_server(service, lifecycle), mode=mode, extensions=extensions) as client:
            yield client


async def create_legacy(
    session: ClientSession, name: str, arguments: dict[str, Any], ttl: int | None = None
) -> types.Task:
    """A 2025-11-25 task-augmented ``tools/call``, through the dispatcher (the SDK would validate a CallToolResult)."""
    params = types.CallToolRequestParams(name=name, arguments=arguments, task=types.TaskMetadata(ttl=ttl))
    raw = await session._dispatcher.send_raw_request(  # private: see the module's docstring
        "tools/call", params.model_dump(by_alias=True, mode="json", exclude_none=True), None
    )
    return types.CreateTaskResult.model_validate(raw).task


async def get_legacy(session: ClientSession, task_id: str) -> types.GetTaskResult:
    request = types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id))
    return await session.send_request(request, types.GetTaskResult)


async def result_legacy(session: ClientSession, task_id: str) -> types.CallToolResult:
    request = types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=task_id))
    return await session.send_request(request, types.CallToolResult)


async def cancel(session: ClientSession, task_id: str) -> dict[str, Any]:
    """tasks/cancel: the task under 2025-11-25, an empty acknowledgement under 2026-07-28."""
    request = types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task_id))
    modern = session.protocol_version == "2026-07-28"
    answer: types.Result = await session.send_request(request, types.EmptyResult if modern else types.CancelTaskResult)
    return answer.model_dump(by_alias=True, exclude_none=True)


async def get_modern(session: Any, task_id: str) -> ExtensionTask:
    request = types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id))
    answer: ExtensionTask = await session.send_request(request, ExtensionTask)
    return answer


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


# --- what is advertised ------------------------------------------------------------------------


async def test_background_tools_advertise_task_support_and_the_server_its_capability(project: Project) -> None:
    """2025-11-25: the `tasks` capability and taskSupport optional on background tools; 2026-07-28: the extension."""
    with trio.fail_after(30):
        async with serving(project.service(), "legacy") as client:
            capabilities = client.session.server_capabilities
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        async with serving(project.service(), "2026-07-28") as modern:
            # An explicit mode adopts a made-up discover result: ask the server itself.
            discovered = types.DiscoverResult.model_validate(await modern.session.send_discover("2026-07-28"))
            modern_capabilities = discovered.capabilities
            modern_listed = (await modern.list_tools()).tools
    assert capabilities is not None
    assert capabilities.tasks is not None
    assert capabilities.tasks.model_dump(by_alias=True, exclude_none=True) == {
        "list": {},
        "cancel": {},
        "requests": {"tools": {"call": {}}},
    }
    supported = {name: tool.execution.task_support if tool.execution else None for name, tool in listed.items()}
    assert supported == {
        "report": "optional",
        "forever": "optional",
        "broken": "optional",
        "whoami": "optional",
        "publish": "optional",
        "greet": None,
    }
    assert modern_capabilities is not None
    assert modern_capabilities.extensions == {TASKS_EXTENSION: {}}
    assert all(tool.execution is None for tool in modern_listed)  # 2026-07-28 has no execution field


async def test_no_background_category_means_no_tasks(project: Project) -> None:
    """Without a background category the server is as before: no capability, no task support, no methods."""
    policy = toolflow.Policy()  # the defaults: no category runs in the background
    service = ToolService.under_policy(project.registry, policy=policy, plugins=project.plugins)
    assert service.tasks is None
    with trio.fail_after(30):
        async with service.open_engine() as engine:
            service.shared = engine
            async with Client(build_server(service), mode="legacy") as client:
                capabilities = client.session.server_capabilities
                with pytest.raises(MCPError) as missing:
                    await get_legacy(client.session, "anything")
    assert capabilities is not None
    assert capabilities.tasks is None
    assert missing.value.error.code == -32601


# --- 2025-11-25 --------------------------------------------------------------------------------


async def test_legacy_task_is_created_polled_listed_and_its_result_fetched(
    project: Project, autojump_clock: trio.testing.MockClock
) -> None:
    """tools/call with `task` answers at once (working); tasks/result waits for the CallToolResult; a notification."""
    with trio.fail_after(600):
        async with serving(project.service(), "legacy") as client:
            task = await create_legacy(client.session, "report", {"topic": "tides"}, ttl=120_000)
            started = trio.current_time()
            polled = await get_legacy(client.session, task.task_id)
            listed = await client.session.send_request(types.ListTasksRequest(), types.ListTasksResult)
            result = await result_legacy(client.session, task.task_id)
            waited = trio.current_time() - started
            done = await get_legacy(client.session, task.task_id)
    assert (task.status, task.ttl, task.poll_interval) == ("working", 120_000, 1000)
    assert polled.status == "working"
    assert [listed_task.task_id for listed_task in listed.tasks] == [task.task_id]
    assert (result.is_error, text(result)) == (False, "report on tides")
    assert result.meta == {RELATED_TASK: {"taskId": task.task_id}}
    assert 59 <= waited <= 61  # the task ran in the background for its virtual minute
    assert done.status == "completed"


async def test_legacy_status_notifications(project: Project, autojump_clock: trio.testing.MockClock) -> None:
    """Each change of status reaches the session as notifications/tasks/status."""
    service = project.service()
    assert service.tasks is not None
    watcher = TasksClient()
    with trio.fail_after(600):
        async with service.open_engine() as engine, service.tasks.running():
            service.shared = engine
            async with Client(build_server(service), mode="legacy", extensions=[watcher]) as client:
                finishing = await create_legacy(client.session, "report", {"topic": "a"})
                cancelled = await create_legacy(client.session, "forever", {})
                await cancel(client.session, cancelled.task_id)
                await result_legacy(client.session, finishing.task_id)
                await trio.sleep(1)
    assert sorted(watcher.statuses) == sorted([(cancelled.task_id, "cancelled"), (finishing.task_id, "completed")])


async def test_legacy_cancel_and_failures(project: Project, autojump_clock: trio.testing.MockClock) -> None:
    """tasks/cancel: cancelled at once, the result says so, a second cancel is -32602; an isError result fails the task."""
    with trio.fail_after(600):
        async with serving(project.service(), "legacy") as client:
            task = await create_legacy(client.session, "forever", {})
            cancelled = await cancel(client.session, task.task_id)
            result = await result_legacy(client.session, task.task_id)
            with pytest.raises(MCPError) as again:
                await cancel(client.session, task.task_id)
            broken = await create_legacy(client.session, "broken", {})
            broken_result = await result_legacy(client.session, broken.task_id)
            broken_task = await get_legacy(client.session, broken.task_id)
            publish = await create_legacy(client.session, "publish", {})
            refused = await result_legacy(client.session, publish.task_id)
    assert cancelled["status"] == "cancelled"
    assert (result.is_error, text(result)) == (
        True,
        "Error: cancelled - the client cancelled the task (tasks/cancel) before it finished",
    )
    assert again.value.error.code == -32602
    assert again.value.error.message == "Cannot cancel task: already in terminal status 'cancelled'"
    assert broken_result.is_error
    assert text(broken_result) == "Error: tool 'broken' raised ValueError: the printer is on fire"
    assert (broken_task.status, broken_task.status_message) == ("failed", text(broken_result))
    # Nobody is there to approve a task's call: refused, as a synchronous call without an approver is.
    assert refused.is_error
    assert text(refused).startswith("Error: 'publish' needs approval before it runs")


async def test_legacy_task_of_a_tool_without_support_and_plain_calls(project: Project) -> None:
    """A task asked of a tool without task support is -32601; without `task`, every tool answers synchronously."""
    with trio.fail_after(30):
        async with serving(project.service(), "legacy") as client:
            with pytest.raises(MCPError) as refused:
                await create_legacy(client.session, "greet", {})
            greeted = await client.call_tool("greet", {})
            broken = await client.call_tool("broken", {})
            with pytest.raises(MCPError) as unknown:
                await get_legacy(client.session, "not-a-task")
    assert refused.value.error.code == -32601
    assert refused.value.error.message == "tool 'greet' cannot run as a task (its execution.taskSupport is 'forbidden')"
    assert text(greeted) == "hello"
    assert broken.is_error  # a background tool called without a task runs in the request, as before
    assert unknown.value.error.code == -32602


async def test_tasks_expire_and_are_limited(project: Project, autojump_clock: trio.testing.MockClock) -> None:
    """A finished task is gone after its ttl; a running one is cancelled at its ttl; running tasks per client are capped."""
    service = attrs.evolve(project.service(), task_limits=TaskLimits(running=2, kept=3, ttl=600, max_ttl=3600))
    with trio.fail_after(100_000):
        async with serving(service, "legacy") as client:
            short = await create_legacy(client.session, "report", {"topic": "x"}, ttl=90_000)
            assert (await result_legacy(client.session, short.task_id)).is_error is False
            await trio.sleep(31)
            with pytest.raises(MCPError) as expired:
                await get_legacy(client.session, short.task_id)
            capped = await create_legacy(client.session, "forever", {}, ttl=10_000_000)
            other = await create_legacy(client.session, "forever", {}, ttl=1000)
            with pytest.raises(MCPError) as too_many:
                await create_legacy(client.session, "forever", {})
            ended = await result_legacy(client.session, other.task_id)  # cancelled when its ttl ran out
            await cancel(client.session, capped.task_id)
            listed = await client.session.send_request(types.ListTasksRequest(), types.ListTasksResult)
    assert expired.value.error.code == -32602
    assert capped.ttl == 3_600_000  # asked for more than max_ttl
    assert too_many.value.error.code == -32600
    assert too_many.value.error.message.startswith("too many tasks running: at most 2 per client")
    assert text(ended) == "Error: cancelled - the task's retention (ttl) ended before it finished"
    assert {task.task_id for task in listed.tasks} <= {capped.task_id, other.task_id}


async def test_past_the_kept_limit_the_oldest_finished_task_is_dropped(
    project: Project, autojump_clock: trio.testing.MockClock
) -> None:
    """At most `kept` tasks per client: a new one drops the client's oldest finished task, never a running one."""
    service = attrs.evolve(project.service(), task_limits=TaskLimits(running=2, kept=2))
    with trio.fail_after(600):
        async with serving(service, "legacy") as client:
            running = await create_legacy(client.session, "forever", {})
            oldest = await create_legacy(client.session, "report", {"topic": "a"})
            await result_legacy(client.session, oldest.task_id)
            newest = await create_legacy(client.session, "report", {"topic": "b"})
            with pytest.raises(MCPError) as dropped:
                await get_legacy(client.session, oldest.task_id)
            listed = await client.session.send_request(types.ListTasksRequest(), types.ListTasksResult)
            await cancel(client.session, running.task_id)
    assert dropped.value.error.code == -32602
    assert [task.task_id for task in listed.tasks] == [running.task_id, newest.task_id]


async def test_a_forged_or_other_sessions_task_id_is_not_found(project: Project) -> None:
    """A task id is a signed handle bound to its session: edited, or presented by another session, it is not found."""
    service = project.service()
    assert service.tasks is not None
    with trio.fail_after(60):
        async with service.open_engine() as engine, service.tasks.running():
            service.shared = engine
            server = build_server(service)
            async with Client(server, mode="legacy") as first, Client(server, mode="legacy") as second:
                task = await create_legacy(first.session, "forever", {})
                payload, _, mac = task.task_id.partition(".")
                forged = payload + "." + ("A" if mac[0] != "A" else "B") + mac[1:]
                errors = []
                for client, task_id in ((second, task.task_id), (first, forged), (first, "x" * 2000)):
                    with pytest.raises(MCPError) as refused:
                        await get_legacy(client.session, task_id)
                    errors.append(refused.value.error.code)
                listed = await second.session.send_request(types.ListTasksRequest(), types.ListTasksResult)
                await cancel(first.session, task.task_id)
    assert errors == [-32602, -32602, -32602]
    assert listed.tasks == []


# --- 2026-07-28 --------------------------------------------------------------------------------


async def test_modern_task_is_polled_to_its_result(project: Project, autojump_clock: trio.testing.MockClock) -> None:
    """A client declaring the extension gets `resultType: task` for a background tool and polls tasks/get."""
    with trio.fail_after(600):
        async with serving(project.service(), "2026-07-28") as client:
            resolved = await client.call_tool("report", {"topic": "tides"})  # the claim polls to the end
            raw = await client.session.call_tool("report", {"topic": "moons"}, allow_claimed=True)
            assert isinstance(raw, CreateExtensionTask)
            working = await get_modern(client.session, raw.task_id)
            await trio.sleep(61)
            completed = await get_modern(client.session, raw.task_id)
            broken = await client.call_tool("broken", {})
            greeted = await client.call_tool("greet", {})
            other = await client.session.call_tool("forever", {}, allow_claimed=True)
            assert isinstance(other, CreateExtensionTask)
            acknowledged = await cancel(client.session, other.task_id)
            cancelled = await get_modern(client.session, other.task_id)
            with pytest.raises(MCPError) as no_result_method:
                await result_legacy(client.session, raw.task_id)
    assert text(resolved) == "report on tides"
    assert (raw.status, raw.ttl_ms, raw.poll_interval_ms) == ("working", 900_000, 1000)
    assert (working.status, working.result) == ("working", None)
    assert completed.status == "completed"
    assert completed.result == {
        "content": [{"type": "text", "text": "report on moons"}],
        "isError": False,
        "resultType": "complete",
    }
    assert (broken.is_error, text(broken)) == (True, "Error: tool 'broken' raised ValueError: the printer is on fire")
    assert text(greeted) == "hello"  # not a background tool: answered in the request
    assert acknowledged["resultType"] == "complete"
    assert set(acknowledged) <= {"resultType", "_meta"}  # an empty acknowledgement
    assert cancelled.status == "cancelled"
    assert no_result_method.value.error.code == -32601


async def test_modern_client_without_the_extension_gets_synchronous_results(
    project: Project, autojump_clock: trio.testing.MockClock
) -> None:
    """A client that does not declare the extension gets the CallToolResult, and tasks/get is -32021."""
    with trio.fail_after(600):
        async with serving(project.service(), "2026-07-28", extension=False) as client:
            started = trio.current_time()
            result = await client.call_tool("report", {"topic": "tides"})
            waited = trio.current_time() - started
            with pytest.raises(MCPError) as missing:
                await get_modern(client.session, "anything")
    assert (result.is_error, text(result), round(waited)) == (False, "report on tides", 60)
    assert missing.value.error.code == -32021


# --- stop and kill -----------------------------------------------------------------------------


@pytest.mark.parametrize("on_exit", ["wait", "cancel"])
async def test_a_stop_waits_for_tasks_or_cancels_them(
    project: Project, autojump_clock: trio.testing.MockClock, on_exit: OnExit
) -> None:
    """policy.on_exit: a stop lets running tasks finish (wait) or cancels them (cancel); new tasks are refused."""
    project.policy = attrs.evolve(project.policy, on_exit=on_exit)
    service = project.service()
    lifecycle = Lifecycle()
    with trio.fail_after(600):
        async with serving(service, "legacy", lifecycle=lifecycle) as client:
            task = await create_legacy(client.session, "report", {"topic": "tides"})
            await trio.sleep(1)
            lifecycle.stop()
            with pytest.raises(MCPError) as refused:
                await create_legacy(client.session, "report", {"topic": "more"})
            started = trio.current_time()
            await lifecycle.closing()
            closed_after = trio.current_time() - started
            ended = await get_legacy(client.session, task.task_id)
            result = await result_legacy(client.session, task.task_id)
    assert refused.value.error.message == "the server is shutting down: no new tasks are started"
    if on_exit == "wait":
        assert (ended.status, text(result), round(closed_after)) == ("completed", "report on tides", 59)
    else:
        assert (ended.status, round(closed_after)) == ("cancelled", 0)
        assert text(result) == "Error: cancelled - the server stopped before the task finished"


async def test_a_kill_cancels_running_tasks(project: Project, autojump_clock: trio.testing.MockClock) -> None:
    """A kill cancels the running tasks, whatever on_exit says; they report cancelled."""
    lifecycle = Lifecycle()
    with trio.fail_after(600):
        async with serving(project.service(), "2026-07-28", lifecycle=lifecycle) as client:
            raw = await client.session.call_tool("forever", {}, allow_claimed=True)
            assert isinstance(raw, CreateExtensionTask)
            lifecycle.kill()
            await lifecycle.closing()
            ended = await get_modern(client.session, raw.task_id)
    assert ended.status == "cancelled"


# --- real processes ----------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def client_of(url: str, name: str) -> AsyncIterator[Client]:
    """The SDK's client over HTTP with *name*'s bearer token, speaking 2026-07-28 with the Tasks extension."""
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKENS[name]}"}) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, mode="2026-07-28", extensions=[TasksClient()]) as client:
            yield client


async def test_http_process_binds_tasks_to_their_principal(project: Project) -> None:
    """Over HTTP, 2026-07-28 without sessions: a task is found by its id alone, by its principal and no other."""
    server = await trio.to_thread.run_sync(lambda: HTTPServer(project.root, "--auth-tokens", "tokens.toml"))
    try:
        with trio.fail_after(60):
            async with client_of(server.url, "alice") as alice:
                raw = await alice.session.call_tool("whoami", {}, allow_claimed=True)
                assert isinstance(raw, CreateExtensionTask)
                resolved = await alice.call_tool("whoami", {})
            async with client_of(server.url, "bob") as bob:
                with pytest.raises(MCPError) as refused:
                    await get_modern(bob.session, raw.task_id)
            async with client_of(server.url, "alice") as again:  # a later request, a new connection: the id finds it
                found = await get_modern(again.session, raw.task_id)
    finally:
        await trio.to_thread.run_sync(server.close)
    assert text(resolved) == "you are alice"
    assert refused.value.error.code == -32602
    assert found.status == "completed"
    assert found.result is not None
    handle = found.result.pop("_meta")[CONVERSATION_META]  # the task's conversation, to echo in the next request
    assert isinstance(handle, str)
    assert found.result == {
        "content": [{"type": "text", "text": "you are alice"}],
        "isError": False,
        "resultType": "complete",
    }


async def test_http_process_binds_legacy_tasks_to_their_session(project: Project) -> None:
    """Over HTTP, 2025-11-25: a task lives on its session; another session of the same principal cannot reach it."""
    server = await trio.to_thread.run_sync(lambda: HTTPServer(project.root, "--auth-tokens", "tokens.toml"))
    watcher = TasksClient()
    try:
        with trio.fail_after(60):
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKENS['alice']}"}) as http:
                transport = streamable_http_client(server.url, http_client=http)
                async with Client(transport, mode="legacy", extensions=[watcher]) as first:
                    task = await create_legacy(first.session, "whoami", {})
                    result = await result_legacy(first.session, task.task_id)
                    other_transport = streamable_http_client(server.url, http_client=http)
                    async with Client(other_transport, mode="legacy") as second:
                        with pytest.raises(MCPError) as refused:
                            await get_legacy(second.session, task.task_id)
                        listed = await second.session.send_request(types.ListTasksRequest(), types.ListTasksResult)
                    done = await get_legacy(first.session, task.task_id)
    finally:
        await trio.to_thread.run_sync(server.close)
    assert (result.is_error, text(result)) == (False, "you are alice")
    assert refused.value.error.code == -32602
    assert listed.tasks == []
    assert done.status == "completed"


async def test_stateless_http_binds_legacy_tasks_to_their_principal(project: Project) -> None:
    """``--stateless``, 2025-11-25: no session to bind a task to, so its principal alone finds it from any request."""
    server = await trio.to_thread.run_sync(
        lambda: HTTPServer(project.root, "--auth-tokens", "tokens.toml", "--stateless")
    )
    try:
        with trio.fail_after(60):
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKENS['alice']}"}) as http:
                transport = streamable_http_client(server.url, http_client=http)
                async with Client(transport, mode="legacy") as first:
                    task = await create_legacy(first.session, "whoami", {})
                again_transport = streamable_http_client(server.url, http_client=http)
                async with Client(again_transport, mode="legacy") as again:
                    result = await result_legacy(again.session, task.task_id)
            async with (
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKENS['bob']}"}) as http,
                Client(streamable_http_client(server.url, http_client=http), mode="legacy") as bob,
            ):
                with pytest.raises(MCPError) as refused:
                    await get_legacy(bob.session, task.task_id)
    finally:
        await trio.to_thread.run_sync(server.close)
    assert (result.is_error, text(result)) == (False, "you are alice")
    assert refused.value.error.code == -32602


async def test_stdio_process_serves_tasks_and_sigterm_waits_for_them(project: Project) -> None:
    """Over stdio, 2026-07-28: a report runs as a task; SIGTERM lets it finish (on_exit: wait) before the exit."""
    argv = serve_argv("--project", str(project.root))
    env = {**server_environment(), "REPORT_SECONDS": "0.5"}
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env)
    with trio.fail_after(60):
        async with Client(params, extensions=[TasksClient()]) as client:
            result = await client.call_tool("report", {"topic": "tides"})
            assert client.session.protocol_version not in {None, "2025-11-25"}
    assert text(result) == "report on tides"
    created, code = await trio.to_thread.run_sync(sigterm_with_a_task_running, project.root)
    assert created["result"]["resultType"] == "task"
    assert code == 143
    assert (project.root / "done.txt").read_text(encoding="utf-8") == "x\n"  # the task finished before the exit


async def test_stdio_process_serves_legacy_tasks(project: Project) -> None:
    """Over stdio, 2025-11-25 (the SDK's ClientSession after `initialize`): create, list, result, a notification."""
    argv = serve_argv("--project", str(project.root))
    params = StdioServerParameters(
        command=argv[0], args=argv[1:], env={**server_environment(), "REPORT_SECONDS": "0.2"}
    )
    statuses: list[tuple[str, str]] = []
    notified = trio.Event()

    async def status(notification: types.TaskStatusNotificationParams) -> None:
        statuses.append((notification.task_id, notification.status))
        notified.set()

    binding = NotificationBinding(
        method="notifications/tasks/status", params_type=types.TaskStatusNotificationParams, handler=status
    )
    with trio.fail_after(60), (project.root / "stdio.log").open("w", encoding="utf-8") as log:
        async with (
            stdio_client(params, errlog=log) as (read, write),
            ClientSession(read, write, notification_bindings=[binding]) as session,
        ):
            initialized = await session.initialize()
            task = await create_legacy(session, "report", {"topic": "tides"})
            listed = await session.send_request(types.ListTasksRequest(), types.ListTasksResult)
            result = await result_legacy(session, task.task_id)
            await notified.wait()  # the notification may follow the result
    assert initialized.capabilities.tasks is not None
    assert [listed_task.task_id for listed_task in listed.tasks] == [task.task_id]
    assert (result.is_error, text(result)) == (False, "report on tides")
    assert statuses == [(task.task_id, "completed")]


def sigterm_with_a_task_running(root: Path) -> tuple[dict[str, Any], int]:
    """``toolflow serve`` over stdio: a task-augmented call (2026-07-28), then SIGTERM; the answer and the exit code."""
    argv = serve_argv("--project", str(root), "--shutdown-grace", "30s")
    env = {**server_environment(), "REPORT_SECONDS": "1", "REPORT_DONE": str(root / "done.txt")}
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS_EXTENSION: {}}},
    }
    request = {"name": "report", "arguments": {"topic": "x"}, "_meta": meta}
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": request}).encode() + b"\n"
    with subprocess.Popen(
        argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as process:
        try:
            assert process.stdin is not None
            assert process.stdout is not None
            process.stdin.write(line)
            process.stdin.flush()
            created = json.loads(process.stdout.readline())
            process.send_signal(signal.SIGTERM)  # the task is running: the process waits for it
            code = process.wait(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
            process.communicate(timeout=30)
    return created, code
