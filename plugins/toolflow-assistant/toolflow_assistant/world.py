"""The small in-memory game world the assistant's tools act on.

A :class:`World` holds rooms, exits, objects and characters (all :class:`Thing`
records keyed by dbref such as ``"#12"``), the assistant's long-term memories,
the tasks it delegated, the messages it sent, a logical clock and the worker's
experiments. Everything is deterministic: ids are sequential and the clock only
moves when a tool moves it.

The tools use one module-level world, :func:`current`. Tests start from a fresh
demo world with :func:`reset` (or install their own ``World``)::

    from toolflow_assistant import world

    def test_something():
        w = world.reset()            # a fresh demo town, now the current world
        w.things["#11"].status = "away"
"""

from __future__ import annotations

import datetime as dt
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "EPOCH",
    "Attribute",
    "Experiment",
    "Memory",
    "Message",
    "Task",
    "Thing",
    "World",
    "current",
    "reset",
]

EPOCH = dt.datetime(2025, 12, 6, 12, 0, tzinfo=dt.UTC)
"""What the world's clock reads at 0 seconds."""


@dataclass
class Attribute:
    """A value stored on a thing, optionally in a category."""

    value: str
    category: str | None = None


@dataclass
class Thing:
    """A room, exit, object or character.

    Attributes:
        kind: ``room``, ``exit``, ``object`` or ``character``.
        location: The dbref of the room (or character) holding it; ``None`` for rooms.
        destination: For an exit, the room it leads to.
        door: For an exit, the dbref of a door that must be open to pass.
        player: For a character, whether a player controls it (players can be paged).
        status: For a player: ``online``, ``away``, ``busy`` or ``offline``.
    """

    dbref: str
    name: str
    kind: str
    location: str | None = None
    description: str = ""
    aliases: tuple[str, ...] = ()
    attributes: dict[str, Attribute] = field(default_factory=dict)
    destination: str | None = None
    door: str | None = None
    player: bool = False
    status: str = "online"
    portable: bool = False
    openable: bool = False
    is_open: bool = False

    def names(self) -> tuple[str, ...]:
        """The name and aliases, lower-cased, for matching."""
        return (self.name.lower(), *(a.lower() for a in self.aliases))

    def summary(self) -> dict[str, object]:
        """The short form tools return for a thing."""
        return {"dbref": self.dbref, "name": self.name, "type": self.kind}


@dataclass
class Memory:
    """A long-term memory."""

    id: str
    content: str
    tags: tuple[str, ...] = ()
    importance: str = "medium"
    stored_at: int = 0

    def as_dict(self) -> dict[str, object]:
        """The form tools return."""
        return {"id": self.id, "content": self.content, "tags": list(self.tags), "importance": self.importance}


@dataclass
class Task:
    """A task delegated to a helper agent; it advances one step each time its status is checked."""

    id: str
    task: str
    agent: str
    priority: str = "normal"
    status: str = "queued"
    result: str | None = None


@dataclass
class Message:
    """Something the assistant said, posed, paged or whispered."""

    kind: str
    text: str
    recipients: tuple[str, ...] = ()


@dataclass
class Experiment:
    """An experiment the worker launched (simulated: the script is not run)."""

    pid: int
    script: str
    args: tuple[str, ...]
    log_file: str
    resumed_from: str | None = None


_WORD = re.compile(r"[a-z0-9]+")


@dataclass
class World:
    """The whole game state shared by the tools.

    Attributes:
        things: Every room, exit, object and character by dbref.
        assistant: The dbref of the assistant's own character.
        clock: Seconds since :data:`EPOCH`; moved by the tools that take time.
        workspace: The worker's workspace directory; ``None`` means
            ``$TOOLFLOW_WORKSPACE``, or the working directory when that is unset.
    """

    things: dict[str, Thing] = field(default_factory=dict)
    assistant: str = "#10"
    memories: list[Memory] = field(default_factory=list)
    tasks: dict[str, Task] = field(default_factory=dict)
    messages: list[Message] = field(default_factory=list)
    experiments: list[Experiment] = field(default_factory=list)
    clock: int = 0
    asleep_until: int | None = None
    workspace: Path | None = None
    next_pid: int = 55555
    status_outages: int = 1
    """How many of the next ``get_system_status`` calls fail with a transient connection error."""
    _sequence: dict[str, int] = field(default_factory=dict)

    # -- ids and time -------------------------------------------------------

    def next_id(self, prefix: str) -> str:
        """The next sequential id with *prefix*: ``mem-0005``, ``task-0001``."""
        number = self._sequence.get(prefix, 0) + 1
        self._sequence[prefix] = number
        return f"{prefix}-{number:04x}"

    def timestamp(self, seconds: int | None = None) -> str:
        """The clock (or *seconds* since the epoch) as an ISO 8601 UTC timestamp."""
        moment = EPOCH + dt.timedelta(seconds=self.clock if seconds is None else seconds)
        return moment.isoformat().replace("+00:00", "Z")

    def workspace_root(self) -> Path:
        """The worker's workspace directory, resolved."""
        root = self.workspace if self.workspace is not None else Path(os.environ.get("TOOLFLOW_WORKSPACE") or ".")
        return root.resolve()

    # -- looking things up --------------------------------------------------

    def me(self) -> Thing:
        """The assistant's character."""
        return self.things[self.assistant]

    def here(self) -> Thing:
        """The room the assistant is in."""
        return self.things[self.me().location or self.assistant]

    def contents(self, holder: str, *kinds: str) -> list[Thing]:
        """The things located in *holder*, in dbref order, optionally only of *kinds*."""
        found = [t for t in self.things.values() if t.location == holder and (not kinds or t.kind in kinds)]
        return sorted(found, key=lambda t: int(t.dbref[1:]))

    def in_scope(self, scope: str) -> list[Thing]:
        """What a search in *scope* (``location``, ``inventory``, ``global``) can see."""
        if scope == "inventory":
            return self.contents(self.assistant)
        if scope == "global":
            return sorted(self.things.values(), key=lambda t: int(t.dbref[1:]))
        here = self.here()
        return [here, *self.contents(here.dbref), *self.contents(self.assistant)]

    def match(self, name: str, candidates: list[Thing]) -> list[Thing]:
        """Candidates whose name or an alias is *name* (case-insensitive); else those starting with it."""
        wanted = name.strip().lower()
        exact = [t for t in candidates if wanted in t.names()]
        if exact:
            return exact
        return [t for t in candidates if any(n.startswith(wanted) for n in t.names())] if wanted else []

    def resolve(self, target: str) -> Thing | str:
        """The thing *target* names (``me``, ``here``, a dbref, or a name nearby), or why there is none."""
        text = target.strip()
        lowered = text.lower()
        if lowered in {"me", "self"}:
            return self.me()
        if lowered == "here":
            return self.here()
        if text.startswith("#"):
            thing = self.things.get(text)
            return thing if thing is not None else f"no object has the dbref {text!r}"
        found = self.match(text, self.in_scope("location"))
        if not found:
            return f"nothing called {text!r} is here; search with scope 'global' or use a dbref"
        if len(found) > 1:
            listed = ", ".join(f"{t.name} ({t.dbref})" for t in found)
            return f"{text!r} is ambiguous: {listed}; use a dbref"
        return found[0]

    def players(self) -> dict[str, Thing]:
        """Player characters by lower-cased name."""
        return {t.name.lower(): t for t in self.things.values() if t.kind == "character" and t.player}

    # -- memory ---------------------------------------------------------------

    def remember(self, content: str, tags: tuple[str, ...] = (), importance: str = "medium") -> Memory:
        """Store a memory and return it."""
        memory = Memory(id=self.next_id("mem"), content=content, tags=tags, importance=importance, stored_at=self.clock)
        self.memories.append(memory)
        return memory

    @staticmethod
    def words(text: str) -> set[str]:
        """The content words of *text*, lower-cased, for matching memories."""
        return {w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS}

    # -- the demo town --------------------------------------------------------

    @classmethod
    def demo(cls) -> World:
        """A fresh copy of the demo town the example specs talk about."""
        w = cls()
        for thing in _demo_things():
            w.things[thing.dbref] = thing
        w.remember("Mira ordered a longsword from the smithy; it is ready on Friday.", ("mira", "smithy"))
        w.remember(
            "The north gate was damaged in the last raid; the guard captain wants it repaired.",
            ("quest", "north-gate"),
            "high",
        )
        w.remember("Aldric likes to be greeted by name and dislikes being paged.", ("aldric", "preferences"), "low")
        w.remember(
            "The old map (#1234) in the library shows a tunnel under the north gate.",
            ("quest", "north-gate", "library"),
        )
        w.tasks["task-7f3a"] = Task(
            id="task-7f3a",
            task="Find out who built the north gate.",
            agent="researcher",
            status="running",
            result="The north gate was built by the masons of Kharum in the year 312.",
        )
        return w


_STOPWORDS = frozenset(
    {"a", "an", "and", "are", "as", "at", "be", "by", "did", "do", "does", "for", "from", "has", "have", "how"}
    | {"i", "in", "is", "it", "its", "of", "on", "or", "so", "that", "the", "their", "them", "they", "this", "to"}
    | {"was", "we", "were", "what", "when", "where", "which", "who", "why", "will", "with", "you"}
)


def _demo_things() -> list[Thing]:
    a = Attribute
    return [
        Thing(
            "#2",
            "Town Square",
            "room",
            description="A cobbled square around an old well. A notice board stands by the well.",
            attributes={"desc": a("A cobbled square around an old well."), "climate": a("mild")},
        ),
        Thing("#3", "The Smithy", "room", description="A hot, smoky forge; tools hang from every beam."),
        Thing("#4", "North Gate", "room", description="A tall gate of oak and iron, scarred by the last raid."),
        Thing("#5", "Library", "room", description="Quiet shelves of maps and chronicles."),
        Thing(
            "#10",
            "Sage",
            "character",
            "#2",
            "A patient helper in a grey cloak.",
            aliases=("assistant",),
            attributes={
                "mood": a("curious"),
                "goal": a("help the townsfolk"),
                "desc": a("A patient helper in a grey cloak."),
            },
        ),
        Thing("#11", "Aldric", "character", "#2", "A broad-shouldered builder.", player=True),
        Thing("#12", "Mira", "character", "#3", "A smith with soot on her sleeves.", player=True, status="away"),
        Thing("#13", "Tobin", "character", "#5", "A young scribe.", player=True, status="offline"),
        Thing("#20", "rusty sword", "object", "#2", "An old blade, more rust than steel.", ("sword",), portable=True),
        Thing(
            "#21",
            "notice board",
            "object",
            "#2",
            "Notices are pinned to it.",
            ("board",),
            attributes={"text": a("Builders wanted for the north gate.")},
        ),
        Thing("#22", "longsword", "object", "#3", "A new longsword, still warm.", ("sword",), portable=True),
        Thing("#23", "brass key", "object", "#10", "A small brass key.", ("key",), portable=True),
        Thing("#30", "north door", "object", "#2", "A heavy oak door in the gate.", ("door",), openable=True),
        Thing("#40", "north", "exit", "#2", aliases=("n",), destination="#4", door="#30"),
        Thing("#41", "east", "exit", "#2", aliases=("e",), destination="#3"),
        Thing("#42", "west", "exit", "#2", aliases=("w",), destination="#5"),
        Thing("#43", "west", "exit", "#3", aliases=("w",), destination="#2"),
        Thing("#44", "south", "exit", "#4", aliases=("s",), destination="#2", door="#30"),
        Thing("#45", "east", "exit", "#5", aliases=("e",), destination="#2"),
        Thing(
            "#1234",
            "old map",
            "object",
            "#5",
            "A faded map of the town.",
            ("map",),
            attributes={
                "desc": a("A faded map of the town, drawn in brown ink."),
                "desc_short": a("a faded map"),
                "drawn_by": a("the masons of Kharum", "lore"),
            },
            portable=True,
        ),
    ]


_current = World.demo()


def current() -> World:
    """The world the tools act on."""
    return _current


def reset(world: World | None = None) -> World:
    """Make *world* (default: a fresh :meth:`World.demo`) the current world and return it."""
    global _current  # noqa: PLW0603 - the tools share one world by design; tests reset it
    _current = world if world is not None else World.demo()
    return _current
