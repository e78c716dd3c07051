"""ToMi-style stories and questions, labelled by the belief oracle.

    tomrl data generate tomi --n 600 --seed 0 --out data/tomi_generated.jsonl
    tomrl data generate tomi --n 600 --stories 100 --out tomi.jsonl   # six questions per story

A story (after ToMi's tomi/story.py, github facebookresearch/ToMi) has two main agents A (who
moves the object) and B, a distractor agent C, a main room with two containers, and a second
room. A and B enter the main room one by one (random order), the narrator says where the object
is, and then, by story type (``tomi_story_types``):

- ``true_belief``: A moves the object while B watches; B may leave afterwards (and may go to
  the other room), or B leaves and comes back before the move.
- ``false_belief``: B leaves (and may go to the other room, before or after the move); A moves
  the object while B is away.
- ``second_order_false_belief``: B leaves, A moves the object, A leaves, B comes back and sees
  where it now is; A still thinks B believes the old place.

C enters the main room or the other room at a random point (and may leave later), or not at
all, and up to two distractors ("C likes the apple", no final period, as in the release) are
scattered through the story. Questions (``tomi_question_types``), with ToMi's wording:

- ``first_order``  "Where will A look for the O?" (asked of A and of B)
- ``second_order`` "Where does A think that B searches for the O?" (A about B, and B about A)
- ``reality``      "Where is the O really?"
- ``memory``       "Where was the O at the beginning?"

Labels use the physical-observation rule (semantics ``joint``): every event is executed in the
order the story tells it, so they are free of the second-order artifacts of the ToMi release
(see ``tomrl data verify tomi``). ``meta.tom`` says whether the answer differs from the object's
true location, as ToMi's ``*_tom`` / ``*_no_tom`` question types do.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from tomrl.generators.vocabulary import Vocabulary, vocabulary
from tomrl.world.world import Distractor, Enter, Event, Exit, Move, ObjectLocation, Query, WorldSetup

# Question slots of one story, in ToMi's order of asking: (type, chain of agent roles).
TOMI_SLOTS: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("memory", ()),
    ("first_order", (0,)),
    ("second_order", (0, 1)),
    ("reality", ()),
    ("first_order", (1,)),
    ("second_order", (1, 0)),
)
_NOISE_VERBS = ("likes", "dislikes", "loves", "hates")


@dataclass(frozen=True)
class TomiStory:
    events: tuple[Event, ...]
    setup: WorldSetup
    mover: str  # agent A
    other: str  # agent B
    target: str  # the object
    containers: tuple[str, str]
    story_type: str


def build_story(rng: random.Random, story_type: str, noise: bool = True, words: Vocabulary | None = None) -> TomiStory:
    """Draw one ToMi-style story of ``story_type`` from ``rng`` (``words``: the word pool, default every word)."""
    words = words or vocabulary("all")
    a, b, c = rng.sample(words.names, 3)
    room, other_room = rng.sample(words.rooms, 2)
    obj = rng.choice(words.objects)
    first, second = rng.sample(words.containers, 2)
    setup = WorldSetup(agents=(a, b, c), container_rooms={first: room, second: room}, initial_locations={obj: first})

    entering = [a, b]
    rng.shuffle(entering)
    core: list[Event] = [Enter((entering[0],), room), Enter((entering[1],), room), ObjectLocation(obj, first)]
    move = Move(a, obj, second)
    variant = rng.randrange(3)
    if story_type == "true_belief":
        if variant == 0:
            core += [move, Exit(b, room)]
        elif variant == 1:
            core += [move, Exit(b, room), Enter((b,), other_room)]
        else:
            core += [Exit(b, room), Enter((b,), room), move]
    elif story_type == "false_belief":
        if variant == 0:
            core += [Exit(b, room), move]
        elif variant == 1:
            core += [Exit(b, room), move, Enter((b,), other_room)]
        else:
            core += [Exit(b, room), Enter((b,), other_room), move]
    elif story_type == "second_order_false_belief":
        core += [Exit(b, room), move, Exit(a, room), Enter((b,), room)]
    else:
        raise ValueError(f"unknown ToMi story type {story_type!r}")

    # The distractor agent C: enters the main or the other room at a random point, maybe leaves later.
    steps = rng.randrange(3)
    if steps:
        c_room = room if rng.random() < 0.5 else other_room
        positions = sorted(rng.sample(range(len(core) + 1), steps))
        for offset, (position, event) in enumerate(zip(positions, [Enter((c,), c_room), Exit(c, c_room)])):
            core.insert(position + offset, event)
    if noise:
        things = words.objects + words.rooms
        for _ in range(rng.randrange(3)):
            sentence = Distractor(f"{rng.choice((a, b, c))} {rng.choice(_NOISE_VERBS)} the {rng.choice(things)}")
            core.insert(rng.randrange(len(core) + 1), sentence)
    return TomiStory(tuple(core), setup, a, b, obj, (first, second), story_type)


def slot_query(story: TomiStory, slot: tuple[str, tuple[int, ...]]) -> Query:
    question_type, roles = slot
    if question_type in ("memory", "reality"):
        return Query((), story.target, question_type)  # type: ignore[arg-type]
    agents = (story.mover, story.other)
    return Query(tuple(agents[r] for r in roles), story.target, "belief")
