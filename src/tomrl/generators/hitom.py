"""Hi-ToM-style stories and questions, labelled by the belief oracle.

    tomrl data generate hitom --n 1000 --seed 0 --out data/hitom_generated.jsonl
    tomrl data generate hitom --n 200 --orders 0,1 --lengths 1 --deception off --out easy.jsonl

    from tomrl.generators import generate
    from tomrl.generators.config import GenerateConfig
    examples = generate(GenerateConfig(benchmark="hitom", n=100, seed=1))

A story follows the official Hi-ToM generator (github ying-hui-he/Hi-ToM_dataset, tasks.py):

- 5 agents (``agents``), 3 rooms with 5 containers each (the 15 containers are the answer
  choices), 6 objects, two per room.
- Chapters (``lengths``: 1-4) have 5, 3, 4 and 2 agents (with fewer agents: all, then two less,
  one less, three less, at least two). Each chapter: the chapter's agents enter a random room
  together; the narrator says where one of the room's objects is; in turn each agent either moves
  it to another container of the room or stays for a minute, and leaves; they all enter the
  waiting room. Targets are distinct containers; in a five-agent chapter the fifth mover puts
  the object back where it started (``last_mover_returns``). A move to where the object already
  is becomes a stay (the official generator writes "moved the O to the C" then).
- Deception (``deception``): the last chapter, and every second one before it, ends with a public
  claim and/or private tells in one of the official forms for its number of agents (e.g. "the
  third to leave lies to everybody, and the fifth tells the third privately"); the claimed
  containers are random containers of the room, so a claim may happen to be true.
- Distractors ("A saw a cat.", "A lost his phone.", "A likes the C.", "A dislikes the O.") follow
  any sentence with probability ``distractor_prob``.
- Every question is about the object of the first chapter, which all agents saw. Order 0 asks
  "Where is the O really?", order 1 "Where does A really think the O is?", order k "Where does A
  think B thinks … the O is?" with k distinct agents, drawn at random.

Words come from the ``vocabulary`` pool (:func:`tomrl.generators.vocabulary.vocabulary`). With
``shortcut_neutral`` a later chapter is about the first chapter's object again, in its room, with
probability ½, made by the agents who left the first chapter earliest (so that nested beliefs
differ from every single agent's), and the question is drawn by :mod:`tomrl.generators.neutral`.

Labels come from :class:`tomrl.world.oracle.BeliefOracle` (``semantics``); each generated story
is parsed back from its text and every label re-derived, and generation stops on any difference.
Stories are balanced over (deception, length) and questions over orders; the same config and
seed give byte-identical files.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from tomrl.generators.vocabulary import ANIMALS, PERSONAL_ITEMS, Vocabulary, vocabulary
from tomrl.world.oracle import BeliefOracle, Semantics
from tomrl.world.world import (
    WAITING_ROOM,
    Distractor,
    Enter,
    Event,
    Exit,
    Move,
    ObjectLocation,
    PrivateTell,
    PublicClaim,
    Query,
    Stay,
    WorldSetup,
)

ROOMS_PER_STORY = 3
CONTAINERS_PER_ROOM = 5
OBJECTS_PER_ROOM = 2
ORDER_NAMES = ("reality", "first_order", "second_order", "third_order", "fourth_order")

# The official tell forms, by number of agents in the chapter. Agents are named by their exit
# position (1 = first to leave); "outsider" is a random agent not in the chapter; the container
# is the first (0) or second (1) of two random containers of the room, or the true one.
# Forms that need an outsider are only drawn when the chapter has one (as in tasks.py).
_TELL_FORMS: dict[int, list[list[tuple[str, int, int | str | None, int | str]]]] = {
    2: [
        [("claim", 1, None, 0), ("tell", 2, 1, 1)],
        [("claim", 2, None, 0), ("tell", 1, 2, 1)],
        [("tell", 1, "outsider", 0)],
    ],
    3: [
        [("claim", 2, None, 0), ("tell", 3, 2, 1)],
        [("claim", 3, None, 0), ("tell", 1, 3, 1)],
        [("claim", 1, None, 0), ("tell", 3, "outsider", "true")],
        [("tell", 2, 3, 0), ("tell", 3, "outsider", "true")],
    ],
    4: [
        [("claim", 2, None, 0), ("tell", 4, 3, 1)],
        [("claim", 3, None, 0), ("tell", 1, 4, 1)],
        [("claim", 1, None, 0), ("tell", 4, "outsider", "true")],
        [("tell", 2, 3, 0), ("tell", 4, "outsider", "true")],
    ],
    5: [
        [("claim", 3, None, 0), ("tell", 5, 3, 1)],
        [("claim", 4, None, 0), ("tell", 5, 1, "true")],
        [("tell", 3, 1, 0), ("tell", 2, 4, 1)],
    ],
}


@dataclass(frozen=True)
class HitomStory:
    """One generated story with the world it was generated in."""

    events: tuple[Event, ...]
    setup: WorldSetup
    agents: tuple[str, ...]
    target: str  # the first chapter's object: every question asks about it
    choices: tuple[str, ...]  # the story's 15 containers, in answer-choice order
    chapter_rooms: tuple[str, ...]
    deception: bool


def chapter_sizes(agents: int) -> list[int]:
    """Agents per chapter: the official 5, 3, 4, 2 for five agents (all, −2, −1, −3; at least 2)."""
    return [agents] + [max(2, agents - d) for d in (2, 1, 3)]


def chapters_with_tells(chapters: int) -> list[bool]:
    """Official pattern: the last chapter has tells, and every second one before it."""
    return [(chapters - 1 - c) % 2 == 0 for c in range(chapters)]


def _distractor(rng: random.Random, agents: tuple[str, ...], containers: tuple[str, ...], objects: tuple[str, ...]) -> Distractor:
    agent = rng.choice(agents)
    kind = rng.randrange(4)
    if kind == 0:
        return Distractor(f"{agent} saw a {rng.choice(ANIMALS)}.")
    if kind == 1:
        return Distractor(f"{agent} lost his {rng.choice(PERSONAL_ITEMS)}.")  # Hi-ToM's wording
    if kind == 2:
        return Distractor(f"{agent} likes the {rng.choice(containers)}.")
    return Distractor(f"{agent} dislikes the {rng.choice(objects)}.")


def build_story(
    rng: random.Random,
    *,
    chapters: int,
    deception: bool,
    agents: int = 5,
    distractor_prob: float = 0.1,
    last_mover_returns: bool = True,
    words: Vocabulary | None = None,
    revisit_prob: float = 0.0,
    revisit_early_leavers: bool = False,
) -> HitomStory:
    """Draw one Hi-ToM-style story from ``rng`` (see the module docstring for its structure).

    ``words``: the word pool (default: every word); ``revisit_prob``: the chance that a later
    chapter is about the first chapter's object again, in its room (shortcut-neutral generation
    uses it so that the answer is not always settled by the first chapter's exits);
    ``revisit_early_leavers``: such a revisit is made by the agents who left the first chapter
    earliest, so that what each of them now believes differs from what they last saw together
    with later leavers (questions of order >= 2 then need nested beliefs more often).
    """
    words = words or vocabulary("all")
    names = tuple(rng.sample(words.names, agents))
    rooms = tuple(rng.sample(words.rooms, ROOMS_PER_STORY))
    containers = rng.sample(words.containers, ROOMS_PER_STORY * CONTAINERS_PER_ROOM)
    objects = tuple(rng.sample(words.objects, ROOMS_PER_STORY * OBJECTS_PER_ROOM))
    room_containers = {room: containers[i * CONTAINERS_PER_ROOM : (i + 1) * CONTAINERS_PER_ROOM] for i, room in enumerate(rooms)}
    container_rooms = {c: room for room, cs in room_containers.items() for c in cs}
    where: dict[str, str] = {}
    room_objects: dict[str, list[str]] = {}
    for i, room in enumerate(rooms):
        room_objects[room] = list(objects[i * OBJECTS_PER_ROOM : (i + 1) * OBJECTS_PER_ROOM])
        for obj, container in zip(room_objects[room], rng.sample(room_containers[room], OBJECTS_PER_ROOM)):
            where[obj] = container
    setup = WorldSetup(agents=names, container_rooms=container_rooms, initial_locations=dict(where))

    events: list[Event] = []
    chapter_rooms: list[str] = []
    target = ""
    sizes = chapter_sizes(agents)
    tells = chapters_with_tells(chapters)
    for chapter in range(chapters):
        room = rng.choice(rooms)
        obj = rng.choice(room_objects[room])
        revisit = False
        if chapter == 0:
            target = obj
        elif revisit_prob and rng.random() < revisit_prob:
            room, obj = chapter_rooms[0], target
            revisit = True
        chapter_rooms.append(room)
        order = rng.sample(names, agents)
        members = order[: sizes[chapter]]
        if chapter == 0:
            first_leavers = list(members)  # the first chapter's agents in the order they leave it
        elif revisit and revisit_early_leavers:
            # The first chapter's earliest leavers come back (and leave in a new order): what
            # they now see is newer than what they saw together with the later leavers.
            members = first_leavers[: sizes[chapter]]
            rng.shuffle(members)
        start = where[obj]
        others = [c for c in room_containers[room] if c != start]
        rng.shuffle(others)
        events.append(Enter(tuple(members), room))
        events.append(ObjectLocation(obj, where[obj]))
        for position, agent in enumerate(members):
            if position < len(others):
                destination = others[position]
            elif last_mover_returns:
                destination = start
            else:
                destination = rng.choice([c for c in others if c != where[obj]])
            if rng.random() < 0.5 and destination != where[obj]:
                events.append(Move(agent, obj, destination))
                where[obj] = destination
            else:
                events.append(Stay(agent, room))
            events.append(Exit(agent, room))
        events.append(Enter(tuple(members), WAITING_ROOM))
        if deception and tells[chapter]:
            events.extend(_tell_events(rng, members, names, obj, where[obj], room_containers[room]))

    story_events: list[Event] = []
    for event in events:
        story_events.append(event)
        if rng.random() < distractor_prob:
            story_events.append(_distractor(rng, names, tuple(containers), objects))
    choices = list(containers)
    rng.shuffle(choices)
    return HitomStory(tuple(story_events), setup, names, target, tuple(choices), tuple(chapter_rooms), deception)


def _tell_events(
    rng: random.Random, members: list[str], everyone: tuple[str, ...], obj: str, true_container: str, room_containers: list[str]
) -> list[Event]:
    size = min(len(members), 5)
    outsiders = [agent for agent in everyone if agent not in members]
    forms = _TELL_FORMS[size]
    usable = [form for form in forms if outsiders or all(step[2] != "outsider" for step in form)]
    form = rng.choice(usable)
    said = rng.sample(room_containers, 2)
    events: list[Event] = []
    for kind, speaker_position, listener, container_choice in form:
        speaker = members[speaker_position - 1]
        container = true_container if container_choice == "true" else said[int(container_choice)]
        if kind == "claim":
            events.append(PublicClaim(speaker, obj, container))
        else:
            hearer = rng.choice(outsiders) if listener == "outsider" else members[int(listener) - 1]  # type: ignore[arg-type]
            events.append(PrivateTell(speaker, hearer, obj, container))
    return events


def question_query(rng: random.Random, story: HitomStory, order: int, asked: set[tuple[str, ...]]) -> Query:
    """A question of ``order`` about the story's target object, with a chain not asked before."""
    if order == 0:
        return Query((), story.target, "reality")
    for _ in range(100):
        chain = tuple(rng.sample(story.agents, order))
        if chain not in asked:
            asked.add(chain)
            return Query(chain, story.target, "belief")
    raise ValueError(f"no new chain of order {order} left for this story")


def label(story: HitomStory, query: Query, semantics: Semantics) -> str:
    answer = BeliefOracle(story.events, story.setup, semantics).answer(query)
    if answer is None:  # every agent saw the first chapter, so this cannot happen
        raise RuntimeError(f"the oracle has no answer for {query}")
    return answer
