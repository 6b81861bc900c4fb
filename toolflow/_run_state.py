"""A run's state, saved to resume it later, in this process or another (issue 21, section 3).

:meth:`toolflow.Agent.snapshot` writes a :class:`SavedRun`; :meth:`toolflow.Agent.resume`
takes one up; ``toolflow run --save FILE`` / ``--resume FILE`` keep it in a file, as one JSON
document with a ``version`` (:data:`STATE_VERSION`)::

    {"version": 1, "format": "openai", "system": "...", "deliberate": false,
     "history": [...],                       # every message, in the format's shape
     "run": {"iteration": 2, "errors": 0, "restarts": 0, "tools_offered": true,
             "last_turn": "token_critical", "required": [], "final_answer": "...",
             "usage": {"prompt_tokens": 900, "completion_tokens": 40}},
     "decision": {...},                      # the decision that ended the run (null before one)
     "pending": [{"id", "tool", "arguments"}],  # deferred calls waiting for their results
     "held": {"turn", "text", "tokens", "tools_offered", "uncounted",
              "entries": [{"id", "tool", "arguments", "result"}]},  # the turn's results, kept back
     "gates": {"rules": {...}, "succeeded_loop": [...], "succeeded_session": [...]},
     "retention": {"message": 1, "until": {...}},   # deliberate mode's triggers
     "tasks_started": 2,                     # background calls started so far (their task ids)
     "background": [{"task_id", "id", "tool", "arguments", "result"}]}  # outcomes not noted yet

Background calls (:mod:`toolflow._background`): whatever ends a run, each of its tasks has
finished or been cancelled before the run returns (``policy.on_exit``), so a saved run has no
task in flight. Their outcomes are in the history, except after a run that ended ``deferred``:
its turn's results wait for the application's, and a note must not come between a model's calls
and their results, so those outcomes wait in ``background`` and reach the model at the first turn
boundary after the resume. ``tasks_started`` lets the resumed run number its tasks on
(``task-3`` after ``task-2``), so that a task id names one task in the whole history.

A saved run is input like any other: :meth:`SavedRun.from_json` checks the version, the shape
(a JSON Schema), the history's shape for its format and that the waiting calls are the calls of
the turn kept back, and reads at most :data:`MAX_STATE_BYTES`; anything else is a
:class:`~toolflow.UsageError` with a message, never a traceback. It holds what the run held:
the history, the tools' arguments and results (but not the caller's context, and not the values
of the specs' ``${...}`` strings, which the history never holds).

This module is part of the loop layer; only :meth:`SavedRun.save` and :meth:`SavedRun.load`
touch files.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from toolflow._deferred import PendingCall
from toolflow._errors import UsageError, expect
from toolflow._gates_document import COUNT, COUNTS, GATES_SCHEMA, NAMES, record
from toolflow._json import loads
from toolflow._loop_records import RunState
from toolflow._providers import Usage
from toolflow._results import json_text

__all__ = ["MAX_STATE_BYTES", "STATE_VERSION", "SavedRun", "check_resumable", "counters", "restored"]

STATE_VERSION = 1
"""The version of the saved run's format; a file of another version is refused."""

MAX_STATE_BYTES = 64 * 1024 * 1024
"""The largest saved run read (64 MiB); a larger file is refused before it is parsed."""

_OBJECT: dict[str, Any] = {"type": "object"}
_BOOLEAN: dict[str, Any] = {"type": "boolean"}


_SCHEMA = record(
    {
        "version": {"const": STATE_VERSION},
        "format": {"enum": ["openai", "anthropic", "fallback", "text", "gemini"]},
        "system": {"type": "string"},
        "deliberate": {"type": "boolean"},
        "history": {"type": "array", "items": {"type": "object", "required": ["role"]}},
        "run": record(
            {
                "iteration": COUNT,
                "errors": COUNT,
                "restarts": COUNT,
                "tools_offered": {"type": "boolean"},
                "last_turn": {"enum": ["token_critical", "max_iterations"]},
                "required": NAMES,
                "final_answer": {"type": "string"},
                "usage": record({"prompt_tokens": COUNT, "completion_tokens": COUNT}),
            }
        ),
        "decision": {
            "oneOf": [
                {"type": "null"},
                record(
                    {
                        "should_continue": {"type": "boolean"},
                        "reason": {"type": "string"},
                        "message": {"type": "string"},
                        "advisory": {"type": ["object", "null"]},
                        "iterations_remaining": COUNT,
                    }
                ),
            ]
        },
        "pending": {
            "type": "array",
            "items": record(
                {"id": {"type": "string"}, "tool": {"type": "string"}, "arguments": _OBJECT, "approval": _BOOLEAN},
                optional=("approval",),
            ),
        },
        "held": {
            "oneOf": [
                {"type": "null"},
                record(
                    {
                        "turn": {"type": "integer", "minimum": 1},
                        "text": {"type": "string"},
                        "tokens": {"type": ["integer", "null"], "minimum": 0},
                        "tools_offered": {"type": "boolean"},
                        "uncounted": NAMES,
                        "entries": {
                            "type": "array",
                            "items": record(
                                {
                                    "id": {"type": "string"},
                                    "tool": {"type": "string"},
                                    "arguments": {"type": ["object", "null"]},
                                    "result": {
                                        "oneOf": [
                                            {"type": "null"},
                                            {
                                                "type": "object",
                                                "required": ["success"],
                                                "properties": {"success": {"type": "boolean"}},
                                            },
                                        ]
                                    },
                                }
                            ),
                        },
                    }
                ),
            ]
        },
        "gates": GATES_SCHEMA,  # the gates document, as a conversation in the fleet's state checks it
        "retention": record({"message": COUNT, "until": COUNTS}),
        "tasks_started": {"type": "integer", "minimum": 0},
        "background": {
            "type": "array",
            "items": record(
                {
                    "task_id": {"type": "string"},
                    "id": {"type": "string"},
                    "tool": {"type": "string"},
                    "arguments": {"type": "object"},
                    "result": {
                        "type": "object",
                        "required": ["success"],
                        "properties": {"success": {"type": "boolean"}},
                    },
                }
            ),
        },
    },
    optional=("deliberate", "tasks_started", "background"),
)
"""The shape of a saved run (version 1)."""

_ROLES = {
    "openai": {"system", "user", "assistant", "tool"},
    "anthropic": {"user", "assistant"},
    "fallback": {"user", "assistant"},
    "text": {"user", "assistant"},
    "gemini": {"user", "model"},
}
"""The roles of each history format's messages: a history in another format has others."""


@attrs.frozen(kw_only=True)
class SavedRun:
    """A run's state: everything :meth:`toolflow.Agent.resume` needs to go on (see the module's docstring).

    Attributes:
        format: The history format.
        system: The system prompt the run was given (before the tools' descriptions).
        deliberate: Whether the run was in deliberate mode.
        history: Every message so far, in the format's shape.
        run: The run's counters (``iteration``, ``errors``, ``restarts``, ``tools_offered``,
            ``last_turn``, ``required``, ``final_answer``, ``usage``).
        decision: The decision that ended the run (``None`` before any run).
        pending: The deferred calls waiting for their results.
        held: The turn whose results wait for them: its entries (``result`` ``None`` for a
            waiting call), its text, its tokens, the calls that count for no error.
        gates: The rules' counts and the tools that succeeded (``depends_on``).
        retention: Deliberate mode's retention window.
        tasks_started: How many background calls the agent started (task ids go on from it).
        background: The outcomes of background calls not in the history yet (a run that ended
            ``deferred``): ``{"task_id", "id", "tool", "arguments", "result"}``.
    """

    format: str
    system: str
    deliberate: bool = False
    history: tuple[Mapping[str, Any], ...]
    run: Mapping[str, Any]
    decision: Mapping[str, Any] | None
    pending: tuple[PendingCall, ...] = ()
    held: Mapping[str, Any] | None = None
    gates: Mapping[str, Any]
    retention: Mapping[str, Any]
    tasks_started: int = 0
    background: tuple[Mapping[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The saved run as one JSON-ready document (its ``version`` first)."""
        return {
            "version": STATE_VERSION,
            "format": self.format,
            "system": self.system,
            "deliberate": self.deliberate,
            "history": [dict(message) for message in self.history],
            "run": dict(self.run),
            "decision": None if self.decision is None else dict(self.decision),
            "pending": [call.to_dict() for call in self.pending],
            "held": None if self.held is None else dict(self.held),
            "gates": dict(self.gates),
            "retention": dict(self.retention),
            "tasks_started": self.tasks_started,
            "background": [dict(outcome) for outcome in self.background],
        }

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON text; values JSON cannot express are written as text (``json_text``)."""
        return json_text(self.to_dict(), separators=(", ", ": "))

    @classmethod
    def from_dict(cls, data: object, *, source: str = "the saved run") -> SavedRun:
        """The saved run of *data*, a document :meth:`to_dict` wrote.

        Raises:
            UsageError: *data* is of another version or shape (the message names *source*
                and where the problem is).
        """
        _check(data, source)
        assert isinstance(data, dict)  # _check made sure
        return cls(
            format=data["format"],
            system=data["system"],
            deliberate=data.get("deliberate", False),
            history=tuple(data["history"]),
            run=data["run"],
            decision=data["decision"],
            pending=tuple(
                PendingCall(id=c["id"], tool=c["tool"], arguments=c["arguments"], approval=c.get("approval", False))
                for c in data["pending"]
            ),
            held=data["held"],
            gates=data["gates"],
            retention=data["retention"],
            tasks_started=int(data.get("tasks_started", 0)),
            background=tuple(data.get("background", ())),
        )

    @classmethod
    def from_json(cls, text: str | bytes, *, source: str = "the saved run") -> SavedRun:
        """The saved run of JSON *text* (at most :data:`MAX_STATE_BYTES`).

        Raises:
            UsageError: *text* is too long, not JSON, or not a saved run (see :meth:`from_dict`).
        """
        if len(text) > MAX_STATE_BYTES:
            msg = f"{source}: larger than {MAX_STATE_BYTES:,} bytes, the most a saved run may have"
            raise UsageError(msg)
        try:
            data = loads(text)
        except RecursionError:
            msg = f"{source}: not a saved run: the JSON nests too deeply"
            raise UsageError(msg) from None
        except ValueError as exc:
            msg = f"{source}: not a saved run: not JSON ({exc})"
            raise UsageError(msg) from None
        return cls.from_dict(data, source=source)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> SavedRun:
        """The saved run in the file at *path* (``toolflow run --resume``).

        Raises:
            UsageError: The file cannot be read, is too large, or holds no saved run.
        """
        source = os.fspath(path)
        try:
            with open(path, "rb") as file:  # one read, bounded
                text = file.read(MAX_STATE_BYTES + 1)
        except OSError as exc:
            msg = f"{source}: cannot read the saved run: {exc.strerror or exc}"
            raise UsageError(msg) from None
        return cls.from_json(text, source=source)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the run to *path* atomically: a temporary file beside it, then renamed over it.

        A reader never sees half a file, and a failed write leaves the old file as it was.

        Raises:
            UsageError: The file cannot be written (the message names it).
        """
        target = Path(path)
        text = self.to_json()
        try:
            descriptor, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
            try:
                with os.fdopen(descriptor, "w", encoding="utf-8") as file:
                    file.write(text)
                    file.flush()
                    os.fsync(file.fileno())
                os.replace(temporary, target)
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise
        except OSError as exc:
            msg = f"{target}: cannot save the run: {exc.strerror or exc}"
            raise UsageError(msg) from None


def _check(data: object, source: str) -> None:
    """Refuse *data* that is not a saved run of this version: a :class:`UsageError` saying where and why."""
    if not isinstance(data, dict):
        msg = f"{source}: not a saved run: expected a JSON object, got {type(data).__name__}"
        raise UsageError(msg)
    version = data.get("version")
    if version != STATE_VERSION:
        msg = f"{source}: a saved run of version {version!r}; this toolflow reads version {STATE_VERSION}"
        raise UsageError(msg)
    import jsonschema  # noqa: PLC0415 - only a resumed run needs it

    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(_SCHEMA).iter_errors(data))
    if error is not None:
        where = "".join(f"[{part!r}]" if isinstance(part, int) else f".{part}" for part in error.absolute_path)
        msg = f"{source}: not a saved run: at {where or 'the top'}: {error.message}"
        raise UsageError(msg)
    roles = _ROLES[data["format"]]
    for index, message in enumerate(data["history"]):
        if message["role"] not in roles:
            msg = (
                f"{source}: history[{index}] has the role {message['role']!r}, which the {data['format']!r} "
                f"format does not have ({', '.join(sorted(roles))}): a history in another format?"
            )
            raise UsageError(msg)
    _check_waiting(data, source)


def _check_waiting(data: Mapping[str, Any], source: str) -> None:
    """The waiting calls must be those of the turn kept back whose result is missing, each once."""
    held = data["held"]
    waiting = [call["id"] for call in data["pending"]]
    missing = [] if held is None else [entry["id"] for entry in held["entries"] if entry["result"] is None]
    if len(set(waiting)) != len(waiting) or sorted(waiting) != sorted(missing):
        msg = (
            f"{source}: not a saved run: the calls waiting ({', '.join(waiting) or 'none'}) are not the calls "
            f"of the turn kept back without a result ({', '.join(missing) or 'none'})"
        )
        raise UsageError(msg)
    if held is not None and not waiting:
        msg = f"{source}: not a saved run: a turn is kept back, but no call waits for a result"
        raise UsageError(msg)


def counters(state: RunState) -> dict[str, Any]:
    """*state*'s counters as plain JSON data (a saved run's ``run``); its turn records stay behind."""
    return {
        "iteration": state.iteration,
        "errors": state.errors,
        "restarts": state.restarts,
        "tools_offered": state.tools_offered,
        "last_turn": state.last_turn,
        "required": sorted(state.required),
        "final_answer": state.final_answer,
        "usage": {"prompt_tokens": state.usage.prompt_tokens, "completion_tokens": state.usage.completion_tokens},
    }


def restored(data: Mapping[str, Any]) -> RunState:
    """The run's state of the counters :func:`counters` wrote, with no turn records yet."""
    usage = data["usage"]
    return RunState(
        iteration=data["iteration"],
        tools_offered=data["tools_offered"],
        last_turn=data["last_turn"],
        required=frozenset(data["required"]),
        errors=data["errors"],
        final_answer=data["final_answer"],
        restarts=data["restarts"],
        usage=Usage(prompt_tokens=usage["prompt_tokens"], completion_tokens=usage["completion_tokens"]),
    )


def check_resumable(saved: object, format_name: str, *, waits: bool) -> None:
    """Refuse to resume *saved* with an agent of another history format, or with what it does not wait for.

    *waits*: the caller gives results (a run that ended ``deferred`` needs them), not a new message.
    """
    expect(saved, SavedRun, "Agent.resume: saved", "a toolflow.SavedRun (from Agent.snapshot() or SavedRun.load())")
    assert isinstance(saved, SavedRun)  # expect made sure
    if saved.format != format_name:
        msg = f"the saved run's history is in the {saved.format!r} format, not this agent's {format_name!r}"
        raise UsageError(msg)
    if waits != bool(saved.pending):
        msg = (
            "the saved run waits for the results of its deferred calls; give them, not a new message"
            if saved.pending
            else "the saved run waits for no results; give the next user message to go on"
        )
        raise UsageError(msg)
