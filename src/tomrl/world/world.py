"""The simulated world of Hi-ToM and ToMi stories: agents, rooms, containers, objects, events.

A story is a list of events. Each event is a small frozen record; what an event *means* for
anyone's beliefs is decided by the belief oracle (:mod:`tomrl.world.oracle`), and how it is
written as a sentence by :mod:`tomrl.world.sentences` (parsed back by :mod:`tomrl.world.parsers`).

    from tomrl.world.world import Enter, ObjectLocation, Move, Exit, WorldSetup
    events = [
        Enter(("Anna", "Ben"), "kitchen"),
        ObjectLocation("apple", "red_box"),
        Exit("Ben", "kitchen"),
        Move("Anna", "apple", "blue_crate"),
    ]
    setup = WorldSetup.infer(events)   # containers' rooms and objects' first places, from the story alone

Events
------
``Enter(agents, room)``            agents walk into a room together ("A, B and C entered the R.")
``Exit(agent, room)``              an agent leaves the room it is in ("A exited the R.")
``ObjectLocation(obj, container)`` the narrator states where an object is ("The O is in the C.")
``Move(agent, obj, container)``    an agent moves an object to another container of its room
``Stay(agent, room)``              an agent stays without moving anything (changes nothing)
``PublicClaim(speaker, obj, c)``   a speaker tells everybody the object is in ``c`` (true or not)
``PrivateTell(speaker, listener, obj, c)``  a speaker tells one listener, privately
``Distractor(text)``               a sentence that changes nothing ("A likes the C.")

World
-----
Every container stands in exactly one room and never moves; every object is in exactly one
container and moves only by ``Move`` (within its room). A room without containers (Hi-ToM's
``waiting_room``, ToMi's second location) is a place where nothing can be hidden; entering it
reveals nothing and does not open a chapter (see the oracle's trust rule).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Literal, Mapping, Union

WAITING_ROOM = "waiting_room"


@dataclass(frozen=True, slots=True)
class Enter:
    agents: tuple[str, ...]
    room: str


@dataclass(frozen=True, slots=True)
class Exit:
    agent: str
    room: str


@dataclass(frozen=True, slots=True)
class ObjectLocation:
    obj: str
    container: str


@dataclass(frozen=True, slots=True)
class Move:
    agent: str
    obj: str
    container: str


@dataclass(frozen=True, slots=True)
class Stay:
    agent: str
    room: str


@dataclass(frozen=True, slots=True)
class PublicClaim:
    speaker: str
    obj: str
    container: str


@dataclass(frozen=True, slots=True)
class PrivateTell:
    speaker: str
    listener: str
    obj: str
    container: str


@dataclass(frozen=True, slots=True)
class Distractor:
    text: str


Event = Union[Enter, Exit, ObjectLocation, Move, Stay, PublicClaim, PrivateTell, Distractor]

QueryKind = Literal["reality", "belief", "memory"]


@dataclass(frozen=True, slots=True)
class Query:
    """A question about one object.

    ``kind="reality"``: where the object is (``chain == ()``); ``kind="belief"``: where the chain
    of agents believes it is (``("A",)`` = where A thinks, ``("A", "B")`` = where A thinks B
    thinks, …); ``kind="memory"``: where it was at the beginning of the story (``chain == ()``).
    """

    chain: tuple[str, ...]
    obj: str
    kind: QueryKind = "belief"

    def __post_init__(self) -> None:
        if self.kind == "belief" and not self.chain:
            raise ValueError("a belief query needs at least one agent in its chain")
        if self.kind != "belief" and self.chain:
            raise ValueError(f"a {self.kind} query has no chain of agents, got {self.chain}")
        if len(set(self.chain)) != len(self.chain):
            raise ValueError(f"chain {self.chain} repeats an agent; chains are of distinct agents")

    @property
    def order(self) -> int:
        """ToM order: 0 for reality and memory, else the number of agents in the chain."""
        return len(self.chain)


def agents_of(events: Iterable[Event]) -> tuple[str, ...]:
    """Every agent named in the events, in order of first appearance."""
    seen: dict[str, None] = {}
    for event in events:
        if isinstance(event, Enter):
            names: tuple[str, ...] = event.agents
        elif isinstance(event, (Exit, Stay)):
            names = (event.agent,)
        elif isinstance(event, Move):
            names = (event.agent,)
        elif isinstance(event, PublicClaim):
            names = (event.speaker,)
        elif isinstance(event, PrivateTell):
            names = (event.speaker, event.listener)
        else:
            names = ()
        for name in names:
            seen.setdefault(name, None)
    return tuple(seen)


@dataclass(frozen=True)
class WorldSetup:
    """The world a story starts in: its agents, where containers stand, where objects start.

    ``agents`` are everyone in the story (all of them hear a public claim). Containers absent
    from ``container_rooms`` and objects absent from ``initial_locations`` are simply unknown:
    nobody learns about them by entering a room.
    """

    agents: tuple[str, ...]
    container_rooms: Mapping[str, str] = field(default_factory=dict)
    initial_locations: Mapping[str, str] = field(default_factory=dict)

    def rooms_with_containers(self) -> set[str]:
        return set(self.container_rooms.values())

    @classmethod
    def infer(cls, events: Iterable[Event]) -> "WorldSetup":
        """Reconstruct the setup from the story text's events alone.

        - an object's first place is the container of its first ``ObjectLocation`` statement, if
          that comes before any move of it (objects move only when a sentence says so);
        - a container stands in the room where an agent moves an object into or out of it; a
          container only named in a statement or a claim stands in the room of its object, or,
          failing that, in the room most recently entered when it was first named.
        """
        events = list(events)
        location: dict[str, str | None] = {}
        current: dict[str, str] = {}  # object -> container, as the story goes
        initial: dict[str, str] = {}
        moved: set[str] = set()
        container_rooms: dict[str, str] = {}
        object_rooms: dict[str, str] = {}
        fallback: dict[str, str] = {}  # container -> room most recently entered when first named
        last_entered: str | None = None
        for event in events:
            if isinstance(event, Enter):
                for agent in event.agents:
                    location[agent] = event.room
                if event.room != WAITING_ROOM:
                    last_entered = event.room
            elif isinstance(event, Exit):
                location[event.agent] = None
            elif isinstance(event, ObjectLocation):
                if event.obj not in moved:
                    initial.setdefault(event.obj, event.container)
                current[event.obj] = event.container
                if last_entered is not None:
                    fallback.setdefault(event.container, last_entered)
            elif isinstance(event, Move):
                room = location.get(event.agent) or last_entered
                if room is not None:
                    previous = current.get(event.obj)
                    if previous is not None:
                        container_rooms.setdefault(previous, room)
                    container_rooms.setdefault(event.container, room)
                    object_rooms.setdefault(event.obj, room)
                moved.add(event.obj)
                current[event.obj] = event.container
            elif isinstance(event, (PublicClaim, PrivateTell)):
                if last_entered is not None:
                    fallback.setdefault(event.container, last_entered)
        # Containers never moved into or out of: the room of an object stated to be in them.
        for event in events:
            if isinstance(event, ObjectLocation) and event.container not in container_rooms:
                room = object_rooms.get(event.obj) or fallback.get(event.container)
                if room is not None:
                    container_rooms[event.container] = room
        for container, room in fallback.items():
            container_rooms.setdefault(container, room)
        return cls(agents=agents_of(events), container_rooms=container_rooms, initial_locations=initial)
