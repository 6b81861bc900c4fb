"""The research worker's tools (seed 004): write a script into the workspace, launch it.

The workspace is ``World.workspace``, else ``$TOOLFLOW_WORKSPACE``, else the
working directory (the spec's ``list_directory`` command lists the same
place). Paths are relative to it and may not leave it, not even through a
symbolic link. ``launch_experiment`` is simulated, so that results are
deterministic: it checks the script exists, writes the experiment's log file
and returns a pid counting up from 55555, but does not run the script.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import Any

import trio

from toolflow_assistant.world import Experiment, current

__all__ = ["launch_experiment", "write_file"]


def _inside(relative: str) -> trio.Path | str:
    """The workspace path of *relative*, or why it is refused."""
    root = current().workspace_root()
    if not relative or PurePosixPath(relative).is_absolute():
        return f"path {relative!r} must be relative to the workspace"
    target = (root / relative).resolve()
    if not target.is_relative_to(root) or target == root:
        return f"path {relative!r} leaves the workspace"
    return trio.Path(target)


async def write_file(*, path: str, content: str) -> dict[str, Any]:
    """Write *content* (UTF-8) to *path* in the workspace, creating folders; return the bytes written."""
    target = _inside(path)
    if isinstance(target, str):
        return {"success": False, "error": target}
    data = content.encode("utf-8")
    try:
        await target.parent.mkdir(parents=True, exist_ok=True)
        await target.write_bytes(data)
    except OSError as exc:
        return {"success": False, "error": f"cannot write {path!r}: {exc.strerror or exc}"}
    return {"path": path, "bytes": len(data)}


async def launch_experiment(
    *,
    script: str,
    args: Sequence[str] | None = None,
    resume: bool = False,
    checkpoint: str | None = None,
) -> dict[str, Any]:
    """Launch *script* (simulated): record the experiment, write its log, return its pid and log file."""
    target = _inside(script)
    if isinstance(target, str):
        return {"success": False, "error": target}
    if not await target.is_file():
        return {"success": False, "error": f"script {script!r} does not exist; write it with write_file first"}
    if resume and not checkpoint:
        return {"success": False, "error": "resuming needs a checkpoint"}
    w = current()
    log_file = f"logs/{PurePosixPath(script).stem}.log"
    log = _inside(log_file)
    if isinstance(log, str):  # pragma: no cover - a fixed relative path stays inside
        return {"success": False, "error": log}
    argv = ["python", script, *(args or ())]
    if resume:
        argv += ["--resume", checkpoint or ""]
    experiment = Experiment(
        pid=w.next_pid,
        script=script,
        args=tuple(args or ()),
        log_file=log_file,
        resumed_from=checkpoint if resume else None,
    )
    w.next_pid += 1
    w.experiments.append(experiment)
    await log.parent.mkdir(parents=True, exist_ok=True)
    await log.write_text(f"[{w.timestamp()}] pid {experiment.pid}: {shlex.join(argv)}\n", encoding="utf-8")
    return {"pid": experiment.pid, "log_file": log_file}
