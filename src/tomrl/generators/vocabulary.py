"""The words generated stories are made of: agents' names, rooms, objects and containers.

The word classes are those of Hi-ToM and ToMi (first names; rooms of a house; fruit and
vegetables; coloured containers written with an underscore, e.g. ``green_drawer``), so a model
trained on generated stories meets the same kinds of words in the official test sets. Names are
single capitalised words and every other word is lower case with underscores, which is what
:mod:`tomrl.world.parsers` relies on.
"""

from __future__ import annotations

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
