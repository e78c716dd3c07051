"""Properties of the belief oracle on random stories (hypothesis), and agreement with an eager reference.

The random stories walk a small world: four agents, two rooms with containers and a waiting
room; agents enter (alone or in groups) and leave, move objects in their room, stay, and make
claims and tells. The reference oracle below is written independently of tomrl.world.oracle: it
keeps a full table of every chain of up to four agents and updates it event by event, the way
the official Hi-ToM generator does.
"""

from __future__ import annotations

import random
from itertools import combinations, permutations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tomrl.generators.hitom import build_story
from tomrl.world.oracle import BeliefOracle
from tomrl.world.world import (
    WAITING_ROOM,
    Distractor,
    Enter,
    Exit,
    Move,
    ObjectLocation,
    PrivateTell,
    PublicClaim,
    Stay,
    WorldSetup,
)

AGENTS = ("Anna", "Ben", "Cara", "Dan")
ROOM_CONTAINERS = {"kitchen": ("k1", "k2", "k3"), "garden": ("g1", "g2")}
CONTAINER_ROOMS = {c: room for room, cs in ROOM_CONTAINERS.items() for c in cs}
INITIAL = {"apple": "k1", "pear": "g1"}
SETUP = WorldSetup(agents=AGENTS, container_rooms=CONTAINER_ROOMS, initial_locations=INITIAL)
FAST = settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def random_stories(draw):
    """A valid random event sequence in the small world."""
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    length = draw(st.integers(0, 30))
    location: dict[str, str | None] = {a: None for a in AGENTS}
    where = dict(INITIAL)
    events = []
    for _ in range(length):
        kind = rng.choice(["enter", "enter", "exit", "move", "move", "statement", "stay", "claim", "tell", "distractor"])
        outside = [a for a in AGENTS if location[a] in (None, WAITING_ROOM)]
        inside = [a for a in AGENTS if location[a] not in (None, WAITING_ROOM)]
        if kind == "enter" and outside:
            group = tuple(rng.sample(outside, rng.randint(1, len(outside))))
            room = rng.choice(["kitchen", "garden", WAITING_ROOM])
            for agent in group:
                location[agent] = room
            events.append(Enter(group, room))
        elif kind == "exit" and inside:
            agent = rng.choice(inside)
            events.append(Exit(agent, location[agent]))
            location[agent] = None
        elif kind == "move" and inside:
            agent = rng.choice(inside)
            room = location[agent]
            obj = "apple" if room == "kitchen" else "pear"
            choices = [c for c in ROOM_CONTAINERS[room] if c != where[obj]]
            where[obj] = rng.choice(choices)
            events.append(Move(agent, obj, where[obj]))
        elif kind == "statement":
            obj = rng.choice(["apple", "pear"])
            events.append(ObjectLocation(obj, where[obj]))
        elif kind == "stay" and inside:
            agent = rng.choice(inside)
            events.append(Stay(agent, location[agent]))
        elif kind == "claim":
            obj = rng.choice(["apple", "pear"])
            events.append(PublicClaim(rng.choice(AGENTS), obj, rng.choice(ROOM_CONTAINERS["kitchen" if obj == "apple" else "garden"])))
        elif kind == "tell":
            speaker, listener = rng.sample(AGENTS, 2)
            obj = rng.choice(["apple", "pear"])
            events.append(PrivateTell(speaker, listener, obj, rng.choice(ROOM_CONTAINERS["kitchen" if obj == "apple" else "garden"])))
        elif kind == "distractor":
            events.append(Distractor(f"{rng.choice(AGENTS)} saw a cat."))
    return events


class EagerReference:
    """Every chain's belief in a table, updated event by event (independent of BeliefOracle)."""

    def __init__(self, setup: WorldSetup, semantics: str):
        self.setup = setup
        self.semantics = semantics
        self.table: dict[tuple[tuple[str, ...], str], str] = {}
        self.where = dict(setup.initial_locations)
        self.present: dict[str, list[str]] = {}
        self.room_of: dict[str, str | None] = {}
        self.chapter_room: str | None = None
        self.chapter_members: list[str] = []
        self.exit_order: list[str] = []

    def _set_chains(self, observers, obj, container, rule):
        chains = []
        for k in range(1, 5):
            chains += permutations(observers, k) if rule == "joint" else combinations(observers, k)
        for chain in chains:
            self.table[(tuple(chain), obj)] = container

    def _trusts(self, listener, speaker):
        if listener not in self.chapter_members:
            return True
        if listener not in self.exit_order:
            return False
        if speaker not in self.exit_order:
            return speaker in self.chapter_members
        return self.exit_order.index(listener) < self.exit_order.index(speaker)

    def apply(self, event):
        rule = "joint" if self.semantics == "joint" else "combinations"
        if isinstance(event, Enter):
            for agent in event.agents:
                old = self.room_of.get(agent)
                if old and agent in self.present.get(old, []):
                    self.present[old].remove(agent)
            people = self.present.setdefault(event.room, [])
            if not people and event.room in self.setup.container_rooms.values():
                self.chapter_room, self.chapter_members, self.exit_order = event.room, [], []
            for agent in event.agents:
                self.room_of[agent] = event.room
                people.append(agent)
                if event.room == self.chapter_room:
                    if agent not in self.chapter_members:
                        self.chapter_members.append(agent)
                    if agent in self.exit_order:
                        self.exit_order.remove(agent)
            for obj, container in self.where.items():
                if self.setup.container_rooms.get(container) == event.room:
                    self._set_chains(people, obj, container, "joint")
        elif isinstance(event, Exit):
            room = self.room_of.get(event.agent)
            if room and event.agent in self.present.get(room, []):
                self.present[room].remove(event.agent)
            if room == self.chapter_room and event.agent in self.chapter_members:
                self.exit_order.append(event.agent)
            self.room_of[event.agent] = None
        elif isinstance(event, ObjectLocation):
            self.where[event.obj] = event.container
            room = self.setup.container_rooms.get(event.container)
            self._set_chains(list(self.present.get(room, [])), event.obj, event.container, rule)
        elif isinstance(event, Move):
            self.where[event.obj] = event.container
            room = self.room_of.get(event.agent)
            others = [a for a in self.present.get(room, []) if a != event.agent]
            self._set_chains(others + [event.agent], event.obj, event.container, rule)
        elif isinstance(event, PublicClaim):
            s, o, c = event.speaker, event.obj, event.container
            believers = [a for a in self.setup.agents if a != s and self._trusts(a, s)]
            for b in believers:
                self.table[((b,), o)] = c
                self.table[((b, s), o)] = c
            for listener in self.setup.agents:
                if listener != s:
                    self.table[((s, listener), o)] = c
        elif isinstance(event, PrivateTell):
            s, listener, o, c = event.speaker, event.listener, event.obj, event.container
            if self._trusts(listener, s):
                self.table[((listener,), o)] = c
                self.table[((listener, s), o)] = c
            self.table[((s, listener), o)] = c

    def belief(self, chain, obj):
        return self.table.get((tuple(chain), obj))


def _all_chains(agents):
    return [chain for k in range(1, 5) for chain in permutations(agents, k)]


@FAST
@given(random_stories(), st.sampled_from(["joint", "ordered"]))
def test_lazy_oracle_matches_the_eager_reference_at_every_step(events, semantics):
    oracle = BeliefOracle(events, SETUP, semantics)
    reference = EagerReference(SETUP, semantics)
    for t, event in enumerate(events):
        reference.apply(event)
        for obj in ("apple", "pear"):
            for chain in _all_chains(AGENTS):
                assert oracle.belief(chain, obj, at=t + 1) == reference.belief(chain, obj), (t, chain, obj)


@FAST
@given(random_stories(), st.sampled_from(["joint", "ordered"]))
def test_a_chain_changes_belief_only_at_events_all_its_members_observed(events, semantics):
    oracle = BeliefOracle(events, SETUP, semantics)
    for t in range(len(events)):
        observers = set(oracle.observers(t))
        for obj in ("apple", "pear"):
            for chain in _all_chains(AGENTS):
                if not set(chain) <= observers:
                    assert oracle.belief(chain, obj, at=t + 1) == oracle.belief(chain, obj, at=t)


@FAST
@given(random_stories())
def test_claims_and_tells_never_change_the_tellers_own_belief_or_reality(events):
    oracle = BeliefOracle(events, SETUP)
    for t, event in enumerate(events):
        if isinstance(event, (PublicClaim, PrivateTell)):
            assert oracle.belief((event.speaker,), event.obj, at=t + 1) == oracle.belief((event.speaker,), event.obj, at=t)
            assert oracle.reality(event.obj, at=t + 1) == oracle.reality(event.obj, at=t)


@FAST
@given(random_stories())
def test_an_agent_who_saw_every_move_believes_the_true_location(events):
    events = [e for e in events if not isinstance(e, (PublicClaim, PrivateTell))]
    oracle = BeliefOracle(events, SETUP)
    for obj in ("apple", "pear"):
        moves = [t for t, e in enumerate(events) if isinstance(e, Move) and e.obj == obj]
        for agent in AGENTS:
            saw_all = all(agent in oracle.observers(t) for t in moves)
            belief = oracle.belief((agent,), obj)
            if saw_all and belief is not None:
                assert belief == oracle.reality(obj)
            # every group that saw every move together shares the true location as well
            for other in AGENTS:
                if other != agent and all({agent, other} <= set(oracle.observers(t)) for t in moves):
                    joint = oracle.belief((agent, other), obj)
                    assert joint in (None, oracle.reality(obj))


@FAST
@given(st.integers(0, 10**9), st.integers(1, 4), st.booleans(), st.integers(2, 5))
def test_generated_stories_keep_the_properties(seed, chapters, deception, agents):
    story = build_story(random.Random(seed), chapters=chapters, deception=deception, agents=agents)
    oracle = BeliefOracle(story.events, story.setup)
    # every agent saw the first chapter, so every chain of up to four agents has a belief
    for chain in _all_chains(story.agents):
        assert oracle.belief(chain, story.target) is not None
    for t, event in enumerate(story.events):
        if isinstance(event, (PublicClaim, PrivateTell)):
            assert oracle.belief((event.speaker,), event.obj, at=t + 1) == oracle.belief((event.speaker,), event.obj, at=t)
    # the world the story text implies answers every chain exactly as the true world does
    inferred = BeliefOracle(story.events, WorldSetup.infer(story.events))
    for chain in [()] + _all_chains(story.agents):
        assert inferred.belief(chain, story.target) == oracle.belief(chain, story.target)


def test_generated_labels_agree_with_the_eager_reference_run_on_the_parsed_text():
    from tomrl.generators import generate
    from tomrl.generators.config import GenerateConfig
    from tomrl.world.parsers import parse_question, parse_story

    for benchmark in ("hitom", "tomi"):
        for example in generate(GenerateConfig(benchmark=benchmark, n=200, stories=80, seed=12)):
            events = parse_story(example.story, benchmark)
            query = parse_question(example.question)
            setup = WorldSetup.infer(events)
            reference = EagerReference(setup, "joint")
            for event in events:
                reference.apply(event)
            if query.kind == "belief":
                expected = reference.belief(query.chain, query.obj)
            elif query.kind == "reality":
                expected = reference.where[query.obj]
            else:
                expected = setup.initial_locations[query.obj]
            assert expected == example.answer, (example.id, example.question)
