"""Pipelines stopped or killed at any point (issue 16): every step accounted for, nothing cached from a killed step."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import hypothesis
import hypothesis.strategies as st
import trio
import trio.testing
from _process_tree import assert_gone, wait_for_tree, write_tree_project

import toolflow
from toolflow._executor import open_engine
from toolflow._results import STEP_STATUSES

SPEC = """\
toolflow: 1
tools:
  nap:
    description: Sleeps, then says who it was; cached for the session.
    cache: {scope: session}
    parameters:
      type: object
      properties:
        seconds: {type: number, description: How long.}
        name: {type: string, description: A label.}
      required: [seconds, name]
    implementation: i.nap
  chores:
    description: Naps in parallel, in a chain, and over a list.
    timeout: 1h
    pipeline:
      steps:
        a: {tool: nap, with: {seconds: 0.3, name: a}}
        b: {tool: nap, with: {seconds: 0.5, name: b}}
        c: {tool: nap, with: {seconds: 0.2, name: c}, needs: [a]}
        items:
          for_each: [1, 2, 3, 4]
          concurrency: 2
          tool: nap
          with: {seconds: 0.25, name: item}
          needs: [c]
        last: {tool: nap, with: {seconds: 0.1, name: last}, needs: [b, items]}
"""

STEPS = ("a", "b", "c", "items", "last")


class Naps:
    """The `nap` implementation, recording the naps that ended."""

    def __init__(self) -> None:
        self.ended: list[str] = []

    @toolflow.hookimpl
    def toolflow_register_implementations(self, register: Callable[[str, Any], None]) -> None:
        async def nap(seconds: float, name: str) -> str:
            await trio.sleep(seconds)
            self.ended.append(name)
            return name

        register("i.nap", nap)


def _registry(directory: Path) -> tuple[toolflow.Registry, toolflow.Plugins, Naps]:
    spec = directory / "tools.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    naps = Naps()
    plugins = toolflow.load_plugins(entry_points=False)
    plugins.register(naps, "i")
    return toolflow.load_registry([spec], plugins=plugins), plugins, naps


@hypothesis.settings(max_examples=60, deadline=None)
@hypothesis.given(at=st.floats(min_value=0, max_value=1.6), kill=st.booleans())
def test_a_stop_or_a_kill_at_any_point_accounts_for_every_step(at: float, kill: bool) -> None:
    """Whenever it comes, each step ends in one known status, and a cancelled nap is never cached."""
    with tempfile.TemporaryDirectory() as directory:
        registry, plugins, naps = _registry(Path(directory))

        async def main() -> None:
            async with open_engine(registry, plugins=plugins) as engine, trio.open_nursery() as nursery:

                async def interrupt() -> None:
                    await trio.sleep(at)
                    engine.kill() if kill else engine.request_stop()

                nursery.start_soon(interrupt)
                result = await engine.call("chores", {})
                nursery.cancel_scope.cancel()
                records = result.steps
                # Every step has records, in order; a for_each has at most one per item.
                assert [r.step for r in records if r.item is None or r.item == 0] == list(STEPS)
                assert all(r.status in STEP_STATUSES for r in records)
                assert sum(r.step == "items" for r in records) in {1, 4}  # not reached, or one per item
                succeeded = [r for r in records if r.status == "succeeded"]
                ran = [r for r in succeeded if r.result is not None and not r.result.extra.get("cached")]
                assert len(ran) == len(naps.ended)  # every nap that ended is a success, and only those
                if result.success:
                    assert len(succeeded) == len(records) == 8
                else:
                    assert result.extra["status"] == "aborted"
                    assert result.extra["reason"] == ("killed" if kill else "stopped")
                if not kill:
                    assert not [r for r in records if r.status == "cancelled"]  # a stop lets running steps finish
                # Nothing of a cancelled nap was cached: calling it again runs it.
                engine.tick()
                done = [r.arguments for r in succeeded]
                for record in records:
                    if record.status == "cancelled" and record.arguments is not None and record.arguments not in done:
                        before = len(naps.ended)
                        again = await engine.call("nap", record.arguments)
                        assert again.success
                        assert "cached" not in again.extra
                        assert len(naps.ended) == before + 1

        trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


async def test_a_kill_reaches_the_process_group_of_a_command_step(tmp_path: Path) -> None:
    """A kill while a pipeline's command step runs: the step is cancelled and its whole process tree is gone."""
    project = write_tree_project(tmp_path)
    specs = project / "specs" / "tools.yaml"
    specs.write_text(
        specs.read_text(encoding="utf-8")
        + """\
  grow:
    description: Grows a process tree in a step.
    parameters:
      type: object
      properties:
        pids: {type: string, description: The file of the pids.}
      required: [pids]
    pipeline:
      steps:
        tree: {tool: tree, with: {pids: "{{ pids }}"}}
""",
        encoding="utf-8",
    )
    pids_file = tmp_path / "pids"
    registry = toolflow.load_registry([specs], plugins=toolflow.load_plugins(entry_points=False))
    with trio.fail_after(60):
        async with open_engine(registry) as engine, trio.open_nursery() as nursery:

            async def kill_when_grown() -> None:
                await trio.to_thread.run_sync(wait_for_tree, pids_file)
                engine.kill()

            nursery.start_soon(kill_when_grown)
            result = await engine.call("grow", {"pids": str(pids_file)})
    assert result.extra["reason"] == "killed"
    assert [(r.step, r.status) for r in result.steps] == [("tree", "cancelled")]
    assert_gone([int(line) for line in pids_file.read_text().split()])
