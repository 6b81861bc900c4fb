"""The research worker's tools (seed 004): list the workspace, write a script into it, launch it.

The workspace is ``World.workspace``, else ``$TOOLFLOW_WORKSPACE``, else the
working directory. Every path is relative to it and may not leave it: not
absolute, not through ``..``, not through a symbolic link (paths are resolved
before they are used). A name may not start with ``-`` (it would read as an
option to a program it is passed to) nor hold control characters (which would
forge lines of a log). Sizes are bounded: a listing gives at most ``limit``
names and reads at most :data:`MAX_SCANNED` entries of a directory.
``launch_experiment`` is simulated, so that results are deterministic: it
checks the script exists, writes the experiment's log file and returns a pid
counting up from 55555, but does not run the script.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import trio

from toolflow_assistant.world import Experiment, current

__all__ = ["MAX_SCANNED", "launch_experiment", "list_directory", "write_file"]

MAX_SCANNED = 100_000
"""The most entries of one directory ``list_directory`` reads; more are reported as truncated."""

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _inside(relative: str, *, root_too: bool = False) -> trio.Path | str:
    """The workspace path of *relative*, resolved, or why it is refused.

    With *root_too*, the workspace itself (``.``) is allowed (a listing); a file never is.
    """
    root = current().workspace_root()
    if not relative or PurePosixPath(relative).is_absolute():
        return f"path {relative!r} must be relative to the workspace"
    if relative.startswith("-") or _CONTROL.search(relative):
        return f"path {relative!r} may not start with '-' nor hold control characters"
    try:
        target = (root / relative).resolve()
    except (OSError, RuntimeError, ValueError) as exc:  # a loop of symbolic links (RuntimeError before 3.13)
        return f"path {relative!r} cannot be used: {exc}"
    if not target.is_relative_to(root) or (target == root and not root_too):
        return f"path {relative!r} leaves the workspace"
    return trio.Path(target)


def _scan(directory: Path, limit: int) -> tuple[list[str], bool]:
    """The first *limit* names of *directory*, sorted (directories end with ``/``), and whether there were more."""
    names: list[str] = []
    more = False
    with os.scandir(directory) as entries:
        for entry in entries:
            if len(names) == MAX_SCANNED:
                more = True
                break
            # The link itself, not what it points to: nothing outside is looked at.
            names.append(entry.name + "/" if entry.is_dir(follow_symlinks=False) else entry.name)
    names.sort()
    return names[:limit], more or len(names) > limit


async def list_directory(*, path: str = ".", limit: int = 200) -> dict[str, Any]:
    """List the names in the directory *path* of the workspace, sorted; directory names end with ``/``."""
    target = _inside(path, root_too=True)
    if isinstance(target, str):
        return {"success": False, "error": target}
    if not await target.is_dir():
        return {"success": False, "error": f"{path!r} is not a directory of the workspace"}
    try:
        names, truncated = await trio.to_thread.run_sync(_scan, Path(target), max(limit, 0))
    except OSError as exc:
        return {"success": False, "error": f"cannot list {path!r}: {exc.strerror or exc}"}
    return {"path": path, "entries": names, "truncated": truncated}


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
    if resume and isinstance(refused := _inside(checkpoint or ""), str):
        return {"success": False, "error": f"checkpoint: {refused}"}
    if any(_CONTROL.search(arg) for arg in args or ()):
        return {"success": False, "error": "script arguments may not hold control characters"}
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
