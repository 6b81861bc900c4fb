"""The game assistant's tools (seeds 000 and 001), over :func:`toolflow_assistant.world.current`.

Each function takes its spec's parameters as keyword arguments (toolflow passes
the validated, cleaned arguments) and returns plain data, which toolflow wraps
as ``{"success": true, "data": ...}``, or ``{"success": False, "error": ...}``.
The look-and-talk tools are plain functions; the memory and delegation tools
stand for network services and are ``async`` (they checkpoint with trio).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from typing import Any

import trio

from toolflow_assistant.commands import CommandError, run_command
from toolflow_assistant.world import Attribute, Message, Task, Thing, current

__all__ = [
    "delegate_task",
    "execute_command",
    "get_attributes",
    "get_delegation_status",
    "get_system_status",
    "go_to_sleep",
    "inspect_location",
    "page",
    "pose",
    "recall_memories",
    "search_object",
    "set_attribute",
    "store_memory",
    "whisper",
]

DETAIL_LEVELS = ("brief", "normal", "detailed")
SCOPES = ("location", "inventory", "global")
IMPORTANCE = {"low": 1, "medium": 2, "high": 3}
AGENTS = ("builder", "researcher", "scribe")


def fail(error: str, **extra: Any) -> dict[str, Any]:
    """A failure result the model can read."""
    return {"success": False, "error": error, **extra}


def _choice(name: str, value: str, allowed: Sequence[str]) -> str | None:
    if value in allowed:
        return None
    return f"{name} must be one of {', '.join(allowed)}, got {value!r}"


# -- the world ----------------------------------------------------------------


def inspect_location(*, detail_level: str = "normal") -> dict[str, Any]:
    """Describe the assistant's location: its exits, characters and objects."""
    if problem := _choice("detail_level", detail_level, DETAIL_LEVELS):
        return fail(problem)
    w = current()
    room = w.here()
    exits = [t.name for t in w.contents(room.dbref, "exit")]
    characters = [t for t in w.contents(room.dbref, "character") if t.dbref != w.assistant]
    objects = w.contents(room.dbref, "object")
    location: dict[str, Any] = {"dbref": room.dbref, "name": room.name}
    result: dict[str, Any] = {"location": location, "exits": exits}
    if detail_level == "brief":
        result["characters"] = [c.name for c in characters]
        return result
    location["description"] = room.description
    if detail_level == "normal":
        result["characters"] = [c.name for c in characters]
        result["objects"] = [o.name for o in objects]
        return result
    result["exits"] = [_exit_detail(w.things, e) for e in w.contents(room.dbref, "exit")]
    result["characters"] = [{**c.summary(), "description": c.description} for c in characters]
    result["objects"] = [{**o.summary(), "description": o.description} for o in objects]
    result["time"] = w.timestamp()
    return result


def _exit_detail(things: dict[str, Thing], exit_: Thing) -> dict[str, Any]:
    detail: dict[str, Any] = {"name": exit_.name, "to": things[exit_.destination or ""].name}
    if exit_.door is not None:
        detail["door"] = "open" if things[exit_.door].is_open else "closed"
    return detail


def search_object(
    *, name: str | None = None, dbref: str | None = None, scope: str = "location", limit: int = 10
) -> dict[str, Any]:
    """Find things by name (exact name or alias first, else by prefix) or by dbref, within *scope*."""
    if problem := _choice("scope", scope, SCOPES):
        return fail(problem)
    if (name is None) == (dbref is None):
        return fail("give exactly one of name and dbref")
    w = current()
    candidates = w.in_scope(scope)
    if dbref is not None:
        found = [t for t in candidates if t.dbref == dbref]
        if not found and scope != "global" and dbref in w.things:
            return {"matches": [], "count": 0, "hint": f"{dbref} exists elsewhere; search with scope 'global'"}
    else:
        found = w.match(name or "", candidates)
    matches = [{**t.summary(), "location": t.location} for t in found[: max(limit, 0)]]
    return {"matches": matches, "count": len(found)}


def get_attributes(*, target: str, names: Sequence[str] | None = None, pattern: str | None = None) -> dict[str, Any]:
    """Read attributes of *target*: the *names* given, those matching the glob *pattern*, or all."""
    if names is not None and pattern is not None:
        return fail("give at most one of names and pattern")
    thing = current().resolve(target)
    if isinstance(thing, str):
        return fail(thing)
    stored = thing.attributes
    result: dict[str, Any] = {"target": thing.summary()}
    if names is not None:
        result["attributes"] = {n: stored[n].value for n in names if n in stored}
        missing = [n for n in names if n not in stored]
        if missing:
            result["missing"] = missing
    elif pattern is not None:
        glob = pattern.lower()
        result["attributes"] = {n: a.value for n, a in sorted(stored.items()) if fnmatch.fnmatchcase(n.lower(), glob)}
    else:
        result["attributes"] = {n: a.value for n, a in sorted(stored.items())}
    return result


def set_attribute(*, target: str, attribute: str, value: str, category: str | None = None) -> dict[str, Any]:
    """Store *value* in *attribute* of *target*; other players' characters are off limits."""
    w = current()
    thing = w.resolve(target)
    if isinstance(thing, str):
        return fail(thing)
    if thing.kind == "character" and thing.dbref != w.assistant:
        return fail(f"permission denied: only {thing.name} may change {thing.name}'s attributes")
    previous = thing.attributes.get(attribute)
    thing.attributes[attribute] = Attribute(value=value, category=category)
    return {
        "target": thing.summary(),
        "attribute": attribute,
        "value": value,
        "previous": previous.value if previous is not None else None,
    }


def execute_command(*, command: str) -> dict[str, Any]:
    """Run a game command as the assistant's character would type it."""
    try:
        output = run_command(current(), command)
    except CommandError as exc:
        return fail(str(exc))
    return {"command": command.strip(), "output": output}


# -- talking ------------------------------------------------------------------


def pose(*, action: str) -> dict[str, Any]:
    """Show the assistant doing *action* to everyone in the room."""
    w = current()
    me = w.me()
    text = f"{me.name} {action.strip()}"
    audience = tuple(c.name for c in w.contents(w.here().dbref, "character") if c.dbref != w.assistant)
    w.messages.append(Message(kind="pose", text=text, recipients=audience))
    return {"shown": text, "audience": list(audience)}


def page(*, recipients: Sequence[str], message: str, urgent: bool = False, reason: str | None = None) -> dict[str, Any]:
    """Page players anywhere; away or busy players get it when back, unless the page is urgent."""
    if urgent and not reason:
        return fail("an urgent page needs a reason")
    w = current()
    players = w.players()
    unknown = [r for r in recipients if r.lower() not in players]
    if unknown:
        known = ", ".join(sorted(p.name for p in players.values()))
        return fail(f"no player named {', '.join(repr(u) for u in unknown)}; players are {known}")
    delivered, held, offline = [], [], []
    for recipient in recipients:
        player = players[recipient.lower()]
        if player.status == "online" or (urgent and player.status in {"away", "busy"}):
            delivered.append(player.name)
        elif player.status == "offline":
            offline.append(player.name)
        else:
            held.append(player.name)
    w.messages.append(Message(kind="page", text=message, recipients=tuple(p.lower() for p in recipients)))
    result: dict[str, Any] = {"delivered": delivered}
    if held:
        result["held"] = held
    if offline:
        result["offline"] = offline
    return result


def whisper(*, target: str, message: str) -> dict[str, Any]:
    """Whisper *message* to a character in the same room."""
    w = current()
    present = [c for c in w.contents(w.here().dbref, "character") if c.dbref != w.assistant]
    found = w.match(target, present)
    if len(found) != 1:
        names = ", ".join(c.name for c in present) or "nobody"
        return fail(f"{target!r} is not here to whisper to; here: {names}")
    w.messages.append(Message(kind="whisper", text=message, recipients=(found[0].name,)))
    return {"to": found[0].name, "shown": f'You whisper to {found[0].name}, "{message}"'}


# -- memory and delegation (network services in a real game) -----------------


async def recall_memories(
    *, query: str | None = None, tags: Sequence[str] | None = None, limit: int = 5
) -> dict[str, Any]:
    """Recall memories having every tag in *tags* and sharing words with *query*, best first."""
    await trio.lowlevel.checkpoint()
    if query is None and not tags:
        return fail("give a query, tags, or both")
    w = current()
    wanted_tags = {t.lower() for t in tags or ()}
    query_words = w.words(query) if query is not None else set()
    scored = []
    for order, memory in enumerate(w.memories):
        if not wanted_tags <= {t.lower() for t in memory.tags}:
            continue
        overlap = len(query_words & (w.words(memory.content) | {t.lower() for t in memory.tags}))
        if query is not None and overlap == 0:
            continue
        scored.append((-overlap, -IMPORTANCE.get(memory.importance, 2), -order, memory, overlap))
    scored.sort(key=lambda item: item[:3])
    memories = [{**m.as_dict(), "relevance": overlap} for *_, m, overlap in scored[: max(limit, 0)]]
    return {"memories": memories, "count": len(memories)}


async def get_system_status() -> dict[str, Any]:
    """Report the assistant's state from the status service, which drops the first connection of a session.

    The service stands for a flaky network dependency: while ``World.status_outages`` is
    positive, a call fails with a transient :class:`ConnectionError` (which the spec retries).
    """
    await trio.lowlevel.checkpoint()
    w = current()
    if w.status_outages > 0:
        w.status_outages -= 1
        msg = "status service unreachable: connection reset by peer (temporary, try again)"
        raise ConnectionError(msg)
    open_tasks = sum(1 for task in w.tasks.values() if task.status != "completed")
    return {
        "time": w.timestamp(),
        "location": w.here().name,
        "asleep": w.asleep_until is not None and w.asleep_until > w.clock,
        "memories": len(w.memories),
        "open_tasks": open_tasks,
        "messages_sent": len(w.messages),
    }


async def store_memory(
    *, content: str, tags: Sequence[str] | None = None, importance: str = "medium"
) -> dict[str, Any]:
    """Store a memory; storing the same content again returns the existing memory."""
    await trio.lowlevel.checkpoint()
    if problem := _choice("importance", importance, tuple(IMPORTANCE)):
        return fail(problem)
    w = current()
    for memory in w.memories:
        if memory.content == content:
            return {"id": memory.id, "stored": False, "duplicate": True}
    memory = w.remember(content, tuple(dict.fromkeys(tags or ())), importance)
    return {"id": memory.id, "stored": True}


async def delegate_task(*, task: str, agent: str, priority: str = "normal") -> dict[str, Any]:
    """Queue *task* for a helper *agent*; poll it with get_delegation_status."""
    await trio.lowlevel.checkpoint()
    if problem := _choice("agent", agent, AGENTS):
        return fail(problem)
    w = current()
    task_id = w.next_id("task")
    w.tasks[task_id] = Task(id=task_id, task=task, agent=agent, priority=priority, result=f"{agent} finished: {task}")
    return {"task_id": task_id, "agent": agent, "status": "queued"}


_NEXT_STATUS = {"queued": "running", "running": "completed", "completed": "completed"}


async def get_delegation_status(*, task_id: str) -> dict[str, Any]:
    """Report a delegated task's status; each check moves it one step (queued, running, completed)."""
    await trio.lowlevel.checkpoint()
    w = current()
    task = w.tasks.get(task_id)
    if task is None:
        known = ", ".join(sorted(w.tasks)) or "none"
        return fail(f"no delegated task {task_id!r}; known tasks: {known}")
    task.status = _NEXT_STATUS.get(task.status, task.status)
    report: dict[str, Any] = {"task_id": task.id, "agent": task.agent, "status": task.status}
    if task.status == "completed":
        report["result"] = task.result
    return report


async def go_to_sleep(*, duration: int = 3600, reason: str | None = None) -> dict[str, Any]:
    """Sleep for *duration* seconds of game time (or until woken); sleeping again resets the alarm."""
    await trio.lowlevel.checkpoint()
    w = current()
    w.asleep_until = w.clock + duration
    result: dict[str, Any] = {"asleep": True, "wake_at": w.timestamp(w.asleep_until)}
    if reason:
        result["reason"] = reason
    return result
