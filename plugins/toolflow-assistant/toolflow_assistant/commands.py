"""The game commands ``execute_command`` understands, as a player would type them.

``look [thing]``, ``inventory`` (``i``), ``go EXIT`` or just the exit's name
(``north``, ``n``), ``get``/``take THING``, ``drop THING``, ``open``/``close THING``.
"""

from __future__ import annotations

from collections.abc import Callable

from toolflow_assistant.world import Thing, World

__all__ = ["COMMANDS", "CommandError", "run_command"]


class CommandError(Exception):
    """The command cannot be carried out; the message says why, for the model."""


def _one(world: World, name: str, candidates: list[Thing], what: str) -> Thing:
    if not name:
        msg = f"{what} what?"
        raise CommandError(msg)
    found = world.match(name, candidates)
    if not found:
        msg = f"you see no {name!r} here"
        raise CommandError(msg)
    if len(found) > 1:
        msg = f"which {name!r}? " + ", ".join(f"{t.name} ({t.dbref})" for t in found)
        raise CommandError(msg)
    return found[0]


def _look(world: World, rest: str) -> str:
    if not rest:
        room = world.here()
        exits = ", ".join(e.name for e in world.contents(room.dbref, "exit")) or "none"
        return f"{room.name}\n{room.description}\nExits: {exits}"
    thing = _one(world, rest, world.in_scope("location"), "look at")
    return thing.description or f"You see nothing special about the {thing.name}."


def _inventory(world: World, rest: str) -> str:
    carried = [t.name for t in world.contents(world.assistant)]
    return "You carry: " + ", ".join(carried) if carried else "You carry nothing."


def _go(world: World, rest: str) -> str:
    room = world.here()
    exit_ = _one(world, rest, world.contents(room.dbref, "exit"), "go")
    door = world.things.get(exit_.door or "")
    if door is not None and not door.is_open:
        msg = f"the {door.name} is closed"
        raise CommandError(msg)
    destination = world.things[exit_.destination or ""]
    world.me().location = destination.dbref
    return f"You go {exit_.name} to {destination.name}."


def _get(world: World, rest: str) -> str:
    thing = _one(world, rest, world.contents(world.here().dbref, "object"), "get")
    if not thing.portable:
        msg = f"the {thing.name} cannot be picked up"
        raise CommandError(msg)
    thing.location = world.assistant
    return f"You pick up the {thing.name}."


def _drop(world: World, rest: str) -> str:
    thing = _one(world, rest, world.contents(world.assistant), "drop")
    thing.location = world.here().dbref
    return f"You drop the {thing.name}."


def _opener(opening: bool) -> Callable[[World, str], str]:
    verb = "open" if opening else "close"

    def command(world: World, rest: str) -> str:
        thing = _one(world, rest, world.in_scope("location"), verb)
        if not thing.openable:
            msg = f"the {thing.name} cannot be {'opened' if opening else 'closed'}"
            raise CommandError(msg)
        if thing.is_open == opening:
            msg = f"the {thing.name} is already {'open' if opening else 'closed'}"
            raise CommandError(msg)
        thing.is_open = opening
        return f"You {verb} the {thing.name}."

    return command


COMMANDS: dict[str, Callable[[World, str], str]] = {
    "look": _look,
    "l": _look,
    "inventory": _inventory,
    "i": _inventory,
    "go": _go,
    "get": _get,
    "take": _get,
    "drop": _drop,
    "open": _opener(opening=True),
    "close": _opener(opening=False),
}


def run_command(world: World, command: str) -> str:
    """Carry out *command* in *world* and return what the character sees.

    Raises:
        CommandError: The command is unknown or cannot be carried out.
    """
    verb, _, rest = command.strip().partition(" ")
    verb, rest = verb.lower(), rest.strip()
    handler = COMMANDS.get(verb)
    if handler is not None:
        return handler(world, rest)
    if not rest and world.match(verb, world.contents(world.here().dbref, "exit")):
        return _go(world, verb)
    known = ", ".join(sorted({"look", "inventory", "go", "get", "drop", "open", "close"}))
    msg = f"unknown command {verb!r}; commands: {known}, or an exit's name"
    raise CommandError(msg)
