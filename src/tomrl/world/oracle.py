"""The belief oracle: where every chain of agents believes every object is, at any point of a story.

    from tomrl.world.oracle import BeliefOracle
    oracle = BeliefOracle(events)                     # setup inferred from the events
    oracle.belief(("Anna",), "apple")                 # where Anna thinks the apple is (end of story)
    oracle.belief(("Anna", "Ben"), "apple")           # where Anna thinks Ben thinks it is
    oracle.belief((), "apple")                        # where it really is (order 0)
    oracle.belief(("Anna",), "apple", at=3)           # after the first 3 events
    oracle.answer(Query(("Anna", "Ben"), "apple"))    # the same through a Query

A *chain* is a tuple of distinct agents: ``()`` is reality (order 0), ``("A",)`` is "where does
A think the O is" (order 1), ``("A", "B")`` is "where does A think B thinks the O is" (order 2),
and so on; chains of any length are answered (Hi-ToM asks up to order 4). ``belief`` returns the
container, or ``None`` when the chain has never come to a belief about the object.

Semantics
---------
Beliefs change only through *observations*. Each event that reveals "object O is in container
C" to a group of observers updates the chains made of those observers; everything else keeps
its previous value (a chain's belief never depends on an event none of its members observed).

- ``Enter(agents, room)``: everyone in the room afterwards (the newcomers and anyone already
  there) sees where every object of the room is; every chain made only of those agents now
  believes each object is where it really is. (Hi-ToM's generator updates the chains of the
  entering group, ToMi's also those already present; Hi-ToM groups always enter an empty room,
  so the two coincide.) Rooms without containers (``waiting_room``) reveal nothing.
- ``ObjectLocation(O, C)`` and ``Move(agent, O, C)``: observed by everyone in the room of the
  object at that moment (for a move: the mover and whoever has not left yet). Which of the
  observers' chains are updated depends on ``semantics``:

  * ``"joint"`` (default) — every chain made only of observers: they saw it together and saw
    each other see it (the physical-observation rule). Hi-ToM's CoT-prompt labels follow it
    (583 of 600 re-derived; the 17 others are label noise, ``tomrl data verify hitom`` lists
    each with its reason), and so do ToMi's first-order, memory and reality labels (100 %).
  * ``"ordered"`` — the official Hi-ToM generator code (``dynamic_actions.py``, which uses
    ``itertools.combinations``): observers are listed in arrival order, for a move the other
    observers first and the mover last, and only chains that follow that listing order are
    updated. So when A moves an object while B watches, "B thinks A thinks" is updated but
    "A thinks B thinks" is not. Hi-ToM's vanilla-prompt (VP) labels follow this rule exactly
    (600 of 600); it is offered to reproduce them, not as a model of minds.
- ``Exit``, ``Stay`` and ``Distractor`` reveal nothing.
- Claims and tells (Hi-ToM's deception) work the same under both semantics. The *trust rule*:
  a listener believes a speaker who exited that chapter's room later than the listener did, or
  any speaker when the listener was not in that chapter. A chapter is one visit to a room: it
  opens when agents enter an empty room that has containers, records the order of exits, and a
  claim concerns the latest chapter; an agent who leaves twice counts by the last exit. A
  listener still in the room, one who left after the speaker, or one told by an agent who was
  not in the chapter, trusts their own eyes.

  * ``PublicClaim(S, O, C)`` is heard by every agent of the story. Each believer B (every agent
    who trusts S) now thinks O is in C and thinks S thinks so: chains ``(B,)`` and ``(B, S)``.
    The speaker thinks every listener believes him: ``(S, L)`` for every other agent L.
  * ``PrivateTell(S, L, O, C)`` is heard by L only. If L trusts S: ``(L,)`` and ``(L, S)``
    become C. Either way the speaker thinks L believes him: ``(S, L)`` becomes C.
  * The teller's own belief ``(S,)`` never changes, and no chain longer than two agents is
    touched by a claim or a tell (as in the official generator: ``PublicTellAction`` and
    ``PrivateTellAction`` in ``dynamic_actions.py`` of ying-hui-he/Hi-ToM_dataset, commit 56dda76,
    set exactly these chains). That file also holds a commented-out block that would let every
    listener L know who believed a public claim (``(L, B)``) and believers and disbelievers know
    each other's beliefs; it does not run, neither released label set follows it (switched on, it
    lowers CoT-prompt agreement from 583 to 575 and VP agreement from 600 to 591), and tomrl
    follows the code that runs.

Reality (chain ``()``) changes only by ``Move`` (a narrator's ``ObjectLocation`` states it).
``initial_location(O)`` answers ToMi's memory question ("Where was the O at the beginning?").

Cost: the oracle keeps, per object, the list of observations; a query scans that list backwards
for the latest one its chain took part in, so any chain of any length is answered in
microseconds without a table of all chains.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from itertools import permutations
from typing import Iterable, Iterator, Literal, Sequence

from tomrl.world.world import (
    Enter,
    Event,
    Exit,
    Move,
    ObjectLocation,
    PrivateTell,
    PublicClaim,
    Query,
    WorldSetup,
)

Semantics = Literal["joint", "ordered"]
SEMANTICS: tuple[str, ...] = ("joint", "ordered")


@dataclass(frozen=True, slots=True)
class Observation:
    """One update of beliefs about one object, made by the event at ``index``.

    ``rule``: ``"joint"`` — every chain of agents from ``observers`` is updated; ``"ordered"`` —
    chains that are subsequences of ``observers`` (in that order); ``"exact"`` — exactly the
    chains in ``chains``.
    """

    index: int
    obj: str
    container: str
    rule: Literal["joint", "ordered", "exact"]
    observers: tuple[str, ...] = ()
    chains: frozenset[tuple[str, ...]] = frozenset()

    def updates(self, chain: tuple[str, ...]) -> bool:
        if self.rule == "exact":
            return chain in self.chains
        if self.rule == "joint":
            return all(agent in self.observers for agent in chain)
        position = 0  # "ordered": chain must be a subsequence of the observers
        for agent in chain:
            try:
                position = self.observers.index(agent, position) + 1
            except ValueError:
                return False
        return True


@dataclass
class _Chapter:
    room: str
    members: list[str]
    exit_rank: dict[str, int]


class BeliefOracle:
    """Run a story's events and answer belief, reality and memory queries about it."""

    def __init__(self, events: Iterable[Event], setup: WorldSetup | None = None, semantics: Semantics = "joint"):
        if semantics not in SEMANTICS:
            raise ValueError(f"semantics must be one of {SEMANTICS}, got {semantics!r}")
        self.events: tuple[Event, ...] = tuple(events)
        self.setup = setup if setup is not None else WorldSetup.infer(self.events)
        self.semantics = semantics
        self._observations: dict[str, list[Observation]] = {}
        self._reality: dict[str, tuple[list[int], list[str]]] = {}  # obj -> (event indices, containers)
        self._observers: list[tuple[str, ...]] = []  # who observed each event
        self._simulate()

    # ------------------------------------------------------------------ queries

    def belief(self, chain: Sequence[str], obj: str, at: int | None = None) -> str | None:
        """Where ``chain`` believes ``obj`` is after the first ``at`` events (default: all)."""
        chain = tuple(chain)
        at = len(self.events) if at is None else at
        if not chain:
            return self.reality(obj, at)
        for observation in reversed(self._observations.get(obj, ())):
            if observation.index < at and observation.updates(chain):
                return observation.container
        return None

    def belief_source(self, chain: Sequence[str], obj: str, at: int | None = None) -> int | None:
        """Index of the event that gave ``chain`` its current belief about ``obj`` (None: none did).

        For reality (``chain == ()``): the last move or statement of the object, or -1 when it
        is still where the story's setup put it.
        """
        chain = tuple(chain)
        at = len(self.events) if at is None else at
        if not chain:
            indices = self._reality.get(obj, ([], []))[0]
            position = bisect.bisect_left(indices, at)
            return indices[position - 1] if position else None
        for observation in reversed(self._observations.get(obj, ())):
            if observation.index < at and observation.updates(chain):
                return observation.index
        return None

    def reality(self, obj: str, at: int | None = None) -> str | None:
        """Where ``obj`` really is after the first ``at`` events (default: all)."""
        at = len(self.events) if at is None else at
        if obj not in self._reality:
            return None
        indices, containers = self._reality[obj]
        position = bisect.bisect_left(indices, at)  # entries with index < at
        return containers[position - 1] if position else None

    def initial_location(self, obj: str) -> str | None:
        """Where ``obj`` was at the beginning of the story."""
        return self.setup.initial_locations.get(obj)

    def answer(self, query: Query, at: int | None = None) -> str | None:
        if query.kind == "memory":
            return self.initial_location(query.obj)
        if query.kind == "reality":
            return self.reality(query.obj, at)
        return self.belief(query.chain, query.obj, at)

    def observers(self, index: int) -> tuple[str, ...]:
        """The agents who observed event ``index`` (for a tell: the listener; a claim: everyone)."""
        return self._observers[index]

    def objects(self) -> tuple[str, ...]:
        return tuple(self._reality)

    def chains(self, max_order: int = 4, agents: Sequence[str] | None = None) -> Iterator[tuple[str, ...]]:
        """Every chain of 1..``max_order`` distinct agents (default: the story's agents)."""
        agents = tuple(agents) if agents is not None else self.setup.agents
        for order in range(1, max_order + 1):
            yield from permutations(agents, order)

    # --------------------------------------------------------------- simulation

    def _observe(self, observation: Observation) -> None:
        self._observations.setdefault(observation.obj, []).append(observation)

    def _set_reality(self, index: int, obj: str, container: str) -> None:
        indices, containers = self._reality.setdefault(obj, ([], []))
        indices.append(index)
        containers.append(container)

    def _simulate(self) -> None:
        setup = self.setup
        rooms_with_containers = setup.rooms_with_containers()
        location: dict[str, str | None] = {}
        arrivals: dict[str, list[str]] = {}  # room -> agents present, in order of arrival
        where: dict[str, str] = {}  # object -> container now
        for obj, container in setup.initial_locations.items():
            where[obj] = container
            self._set_reality(-1, obj, container)
        chapter: _Chapter | None = None
        exits = 0

        def room_of(obj: str) -> str | None:
            container = where.get(obj)
            return setup.container_rooms.get(container) if container is not None else None

        def trusts(listener: str, speaker: str) -> bool:
            if chapter is None or listener not in chapter.members:
                return True
            if listener not in chapter.exit_rank:
                return False  # still in the room: sees for themself
            return speaker in chapter.members and chapter.exit_rank[listener] < chapter.exit_rank.get(speaker, 1 << 30)

        joint_or_ordered = self.semantics
        for index, event in enumerate(self.events):
            observers: tuple[str, ...] = ()
            if isinstance(event, Enter):
                for agent in event.agents:
                    previous = location.get(agent)
                    if previous is not None and agent in arrivals.get(previous, []):
                        arrivals[previous].remove(agent)
                present = arrivals.setdefault(event.room, [])
                if event.room in rooms_with_containers and not present:
                    chapter = _Chapter(event.room, [], {})
                for agent in event.agents:
                    location[agent] = event.room
                    if agent not in present:
                        present.append(agent)
                    if chapter is not None and chapter.room == event.room:
                        if agent not in chapter.members:
                            chapter.members.append(agent)
                        chapter.exit_rank.pop(agent, None)  # back in the room: its last exit counts
                observers = tuple(present)
                for obj, container in where.items():
                    if setup.container_rooms.get(container) == event.room:
                        self._observe(Observation(index, obj, container, "joint", observers))
            elif isinstance(event, Exit):
                room = location.get(event.agent)
                if room is not None and event.agent in arrivals.get(room, []):
                    arrivals[room].remove(event.agent)
                location[event.agent] = None
                if chapter is not None and room == chapter.room and event.agent in chapter.members:
                    chapter.exit_rank[event.agent] = exits
                    exits += 1
                observers = (event.agent,)
            elif isinstance(event, ObjectLocation):
                if where.get(event.obj) != event.container:
                    where[event.obj] = event.container
                    self._set_reality(index, event.obj, event.container)
                room = room_of(event.obj)
                observers = tuple(arrivals.get(room, [])) if room is not None else ()
                self._observe(Observation(index, event.obj, event.container, joint_or_ordered, observers))
            elif isinstance(event, Move):
                where[event.obj] = event.container
                self._set_reality(index, event.obj, event.container)
                room = location.get(event.agent) or room_of(event.obj)
                others = [agent for agent in arrivals.get(room, []) if agent != event.agent]
                observers = (*others, event.agent)
                self._observe(Observation(index, event.obj, event.container, joint_or_ordered, observers))
            elif isinstance(event, PublicClaim):
                speaker = event.speaker
                listeners = [agent for agent in setup.agents if agent != speaker]
                believers = [agent for agent in listeners if trusts(agent, speaker)]
                chains = {(b,) for b in believers} | {(b, speaker) for b in believers}
                chains |= {(speaker, listener) for listener in listeners}
                self._observe(Observation(index, event.obj, event.container, "exact", chains=frozenset(chains)))
                observers = tuple(setup.agents)
            elif isinstance(event, PrivateTell):
                speaker, listener = event.speaker, event.listener
                chains = {(speaker, listener)}
                if trusts(listener, speaker):
                    chains |= {(listener,), (listener, speaker)}
                self._observe(Observation(index, event.obj, event.container, "exact", chains=frozenset(chains)))
                observers = (speaker, listener)
            self._observers.append(observers)


def answer_query(events: Iterable[Event], query: Query, semantics: Semantics = "joint") -> str | None:
    """One-shot: run ``events`` through a fresh oracle and answer ``query`` at the end."""
    return BeliefOracle(events, semantics=semantics).answer(query)
