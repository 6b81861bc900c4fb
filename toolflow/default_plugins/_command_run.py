"""The ``command`` kind's runner: compile a tool's argv and run the program per call.

Registering the kind (``toolflow.default_plugins.command``, whose docstring says what a call
does) imports nothing of this module: the kind's ``build`` imports it when a command tool is
built, so ``toolflow lint`` never loads ``subprocess``, ``signal`` or the telemetry seam.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import signal
import subprocess
from collections.abc import Callable, Collection, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from toolflow._model import ToolSpec
from toolflow._telemetry import trace_context
from toolflow.default_plugins.template import json_output

if TYPE_CHECKING:
    import trio

__all__ = ["DEFAULT_MAX_OUTPUT", "build", "run_argv"]

DEFAULT_MAX_OUTPUT = 65536
"""Bytes of stdout and of stderr kept when the spec does not say."""

_CHUNK = 65536
_DRAIN_GRACE = 1.0
"""Seconds to finish reading output after the program's group is gone (a detached process may hold the pipes)."""
_ERROR_LINE_CHARS = 200
_UNLISTED = (
    "is not readable by command templates; they see only the arguments"
    " (write ${NAME} in the spec to use a variable of the environment)"
)


def build(spec: ToolSpec) -> Callable[..., Coroutine[Any, Any, object]]:
    """The command tool *spec*: see :func:`toolflow.default_plugins.command.build`.

    Raises:
        TemplateError: The argv is empty or one of its items does not compile.
    """
    from toolflow._rendering import render_each_template  # noqa: PLC0415
    from toolflow._templates import TemplateEnv, TemplateError, TemplateProblem, compile_template  # noqa: PLC0415

    config = _config(spec)
    if config is None or not config["argv"]:
        msg = "the command has an empty argv"
        raise TemplateError(msg)
    templates = []
    for index, item in enumerate(config["argv"]):
        template = compile_template(item)
        if isinstance(template, TemplateProblem):
            msg = f"command argv[{index}] does not compile: {template.message}"
            raise TemplateError(msg, line=template.line)
        templates.append(template)
    cwd: str | None = config["cwd"]
    extra_env: dict[str, str] = config["env"]
    max_output: int = config["max_output"]
    output: str = config["output"]
    success_codes: frozenset[int] = frozenset(config["success_codes"])

    async def run(**arguments: Any) -> object:
        variables = {"env": TemplateEnv((), {}, unlisted=_UNLISTED), **arguments}
        try:
            argv = await render_each_template(templates, variables)
        except TemplateError as exc:
            where = "argv" if exc.line is None else f"argv[{exc.line}]"
            return {"success": False, "error": f"command {where}: {exc}"}
        env = {**os.environ, **extra_env} if extra_env else None
        traced = trace_context()  # the span of this call, when one is being traced
        if traced:
            env = {**(os.environ if env is None else env), **{key.upper(): value for key, value in traced.items()}}
        return await run_argv(argv, cwd=cwd, env=env, max_output=max_output, output=output, success_codes=success_codes)

    run.__name__ = run.__qualname__ = f"command:{spec.name}"
    return run


def _config(spec: ToolSpec) -> dict[str, Any] | None:
    """The tool's ``command`` settings, normalised as the loader does; ``None`` when there is no argv."""
    config = next((impl.config for impl in spec.implementations if impl.kind == "command"), None)
    if isinstance(config, list):
        config = {"argv": config}
    if not isinstance(config, Mapping) or not isinstance(config.get("argv"), list):
        return None
    return {
        "argv": [str(item) for item in config["argv"]],
        "cwd": config.get("cwd"),
        "env": {str(k): str(v) for k, v in (config.get("env") or {}).items()},
        "max_output": config.get("max_output") or DEFAULT_MAX_OUTPUT,
        "output": config.get("output") or "text",
        "success_codes": list(config.get("success_codes") or (0,)),
    }


@attrs.define
class _Capture:
    """The first *limit* bytes of a stream; the rest is read and dropped."""

    limit: int
    _data: bytearray = attrs.field(factory=bytearray)
    truncated: bool = False

    async def drain(self, stream: trio.abc.ReceiveStream) -> None:
        while chunk := await stream.receive_some(_CHUNK):
            room = self.limit - len(self._data)
            if room > 0:
                self._data += chunk[:room]
            if len(chunk) > room:
                self.truncated = True

    def text(self) -> str:
        """The kept bytes as text; invalid UTF-8 is replaced, and a character cut by the limit dropped."""
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        return decoder.decode(bytes(self._data), final=not self.truncated)


async def run_argv(
    argv: Sequence[str],
    *,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    max_output: int = DEFAULT_MAX_OUTPUT,
    output: str = "text",
    success_codes: Collection[int] = (0,),
) -> object:
    """Run *argv* (no shell) in its own process group and return the command result.

    Args:
        argv: The program and its arguments.
        cwd: Working directory (default: the current one).
        env: The whole environment of the program (default: inherited).
        max_output: Bytes of stdout and of stderr kept.
        output: ``"json"``: the stdout of a program that succeeded is parsed as JSON.
        success_codes: The exit statuses that mean success (default: 0 alone).

    Returns:
        ``{"success", "data": {"exit_code", "stdout", "stderr", "truncated"}}``
        plus ``"error"`` when the program failed or could not be started; with
        ``output="json"`` and exit 0, the parsed stdout instead (see the module docstring).

    Raises:
        trio.Cancelled: The call was cancelled; the process group was killed and
            the program reaped first. Nothing else escapes.
    """
    import trio  # noqa: PLC0415 - trio is imported only when a command runs

    if not argv:
        return {"success": False, "error": "the command has an empty argv"}
    try:
        process = await trio.lowlevel.open_process(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
    except OSError as exc:
        return {"success": False, "error": _start_error(argv[0], cwd, exc)}
    except ValueError as exc:  # a NUL character in an argument or in the environment
        return {"success": False, "error": f"cannot run command {argv[0]!r}: {exc}"}
    stdout, stderr = process.stdout, process.stderr
    assert stdout is not None
    assert stderr is not None
    out, err = _Capture(max_output), _Capture(max_output)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(out.drain, stdout)
            nursery.start_soon(err.drain, stderr)
            await process.wait()
            _kill_group(process)
            nursery.cancel_scope.deadline = trio.current_time() + _DRAIN_GRACE
        incomplete = nursery.cancel_scope.cancelled_caught
    finally:
        # Also on cancellation: nothing of the command may outlive the call, and the program is reaped.
        _kill_group(process)
        with trio.CancelScope(shield=True):
            await process.wait()
            await stdout.aclose()
            await stderr.aclose()
    ok = process.returncode in success_codes
    return _result(process.returncode, out, err, incomplete=incomplete, output=output, ok=ok)


def _result(code: int | None, out: _Capture, err: _Capture, *, incomplete: bool, output: str, ok: bool) -> object:
    """The result of a program that exited with *code*, having written *out* and *err*."""
    stderr_text, stdout_text = err.text(), out.text()
    data = {
        "exit_code": code,
        "stdout": stdout_text,
        "stderr": stderr_text,
        "truncated": out.truncated or err.truncated or incomplete,
    }
    if not ok:
        return {"success": False, "data": data, "error": _exit_error(code, stderr_text)}
    if output != "json":
        return {"success": True, "data": data}
    if out.truncated or incomplete:
        # A prefix of a document can parse (a number, cut short) and would be wrong data.
        cut = f"longer than max_output ({out.limit} bytes)" if out.truncated else "not read to its end"
        return {"success": False, "data": data, "error": f"command output is not read as JSON: stdout was {cut}"}
    try:
        return json_output(stdout_text, "command output")
    except ValueError as exc:
        return {"success": False, "data": data, "error": str(exc)}


def _kill_group(process: trio.Process) -> None:
    """SIGKILL the process group of *process* (its session); a group already gone is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def _start_error(program: str, cwd: str | None, exc: OSError) -> str:
    if cwd is not None and exc.filename == cwd and not os.path.isdir(cwd):
        return f"working directory not found: {cwd!r}"
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {program!r}"
    if isinstance(exc, PermissionError):
        return f"command not executable: {program!r}"
    return f"cannot run command {program!r}: {exc.strerror or exc}"


def _exit_error(code: int | None, stderr: str) -> str:
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        text = f"command was killed by {name}"
    else:
        text = f"command exited with status {code}"
    line = next((line.strip() for line in stderr.splitlines() if line.strip()), "")
    if len(line) > _ERROR_LINE_CHARS:
        line = line[:_ERROR_LINE_CHARS] + "..."
    return f"{text}: {line}" if line else text
