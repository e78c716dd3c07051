"""The words generated stories are made of: agents' names, rooms, objects and containers.

The word classes are those of Hi-ToM and ToMi (first names; rooms of a house; fruit and
vegetables; coloured containers written with an underscore, e.g. ``green_drawer``), so a model
trained on generated stories meets the same kinds of words in the official test sets. Names are
single capitalised words and every other word is lower case with underscores, which is what
:mod:`tomrl.world.parsers` relies on. :func:`vocabulary` splits every class into two disjoint pools,
``train`` and ``heldout`` (``GenerateConfig.vocabulary``), for test sets with unseen words.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

NAMES: tuple[str, ...] = (
    "Abigail", "Aiden", "Alexander", "Amelia", "Aria", "Ava", "Avery", "Benjamin", "Carter", "Charlotte",
    "Chloe", "Daniel", "Elizabeth", "Ella", "Emily", "Emma", "Ethan", "Evelyn", "Grace", "Hannah",
    "Harper", "Henry", "Hunter", "Isabella", "Isla", "Jack", "Jackson", "Jacob", "James", "Jayden",
    "Liam", "Lily", "Logan", "Lucas", "Mason", "Mia", "Mila", "Nathan", "Noah", "Oliver",
    "Olivia", "Owen", "Samuel", "Sophia", "William", "Zoe",
)  # fmt: skip

ROOMS: tuple[str, ...] = (
    "attic", "back_yard", "basement", "bathroom", "bedroom", "cellar", "closet", "crawlspace", "den",
    "dining_room", "front_yard", "garage", "garden", "hall", "hallway", "kitchen", "laundry", "living_room",
    "lounge", "master_bedroom", "office", "pantry", "patio", "playroom", "porch", "staircase", "study",
    "sunroom", "workshop", "TV_room",
)  # fmt: skip

OBJECTS: tuple[str, ...] = (
    "apple", "asparagus", "banana", "beans", "broccoli", "cabbage", "carrot", "cherry", "corn", "cucumber",
    "eggplant", "grapefruit", "grapes", "green_pepper", "lemon", "lettuce", "lime", "melon", "onion", "orange",
    "peach", "pear", "peas", "persimmon", "pineapple", "plum", "potato", "pumpkin", "radish", "spinach",
    "strawberry", "sweet_potato", "tangerine", "tomato", "turnip", "watermelon",
)  # fmt: skip

COLOURS: tuple[str, ...] = ("red", "green", "blue")
CONTAINER_KINDS: tuple[str, ...] = (
    "basket", "bathtub", "bottle", "box", "bucket", "container", "crate", "cupboard", "drawer", "envelope",
    "pantry", "suitcase", "treasure_chest",
)  # fmt: skip
CONTAINERS: tuple[str, ...] = tuple(f"{colour}_{kind}" for colour in COLOURS for kind in CONTAINER_KINDS)

ANIMALS: tuple[str, ...] = ("cat", "dog", "monkey", "mouse")
PERSONAL_ITEMS: tuple[str, ...] = ("watch", "gloves", "phone")


# ------------------------------------------------------------------------ disjoint word pools

Pool = Literal["all", "train", "heldout"]


@dataclass(frozen=True)
class Vocabulary:
    """The words one generator run draws from (see :func:`vocabulary`)."""

    names: tuple[str, ...]
    rooms: tuple[str, ...]
    objects: tuple[str, ...]
    containers: tuple[str, ...]


def _every_third(words: tuple[str, ...], heldout: bool) -> tuple[str, ...]:
    return tuple(w for i, w in enumerate(words) if (i % 3 == 2) == heldout)


def vocabulary(pool: Pool = "all") -> Vocabulary:
    """The words of ``pool``: ``"all"`` every word above (in the order above, so output is unchanged);
    ``"train"`` and ``"heldout"`` two disjoint parts of each class, so that a held-out test set
    shares no name, room, object or container with training data.

    The held-out part is every third name, room and object (15 names, 10 rooms, 12 objects) and
    the containers of every second kind (6 kinds x 3 colours = 18, enough for a Hi-ToM story's 15).
    """
    if pool == "all":
        return Vocabulary(NAMES, ROOMS, OBJECTS, CONTAINERS)
    if pool not in ("train", "heldout"):
        raise ValueError(f"unknown vocabulary pool {pool!r} (use all, train or heldout)")
    heldout = pool == "heldout"
    kinds = tuple(k for i, k in enumerate(CONTAINER_KINDS) if (i % 2 == 1) == heldout)
    containers = tuple(c for c in CONTAINERS if c.split("_", 1)[1] in kinds)
    return Vocabulary(_every_third(NAMES, heldout), _every_third(ROOMS, heldout), _every_third(OBJECTS, heldout), containers)
