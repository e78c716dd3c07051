"""The belief oracle on small stories whose answers are worked out by hand."""

from __future__ import annotations

import pytest

from tomrl.world.oracle import BeliefOracle
from tomrl.world.world import (
    WAITING_ROOM,
    Enter,
    Exit,
    Move,
    ObjectLocation,
    PrivateTell,
    PublicClaim,
    Query,
    Stay,
    WorldSetup,
)

# A, B and C see the apple in the red_box; A moves it (all watch) and leaves; B moves it (C watches).
TWO_MOVES = [
    Enter(("A", "B", "C"), "kitchen"),
    ObjectLocation("apple", "red_box"),
    Move("A", "apple", "blue_crate"),
    Exit("A", "kitchen"),
    Move("B", "apple", "green_drawer"),
    Exit("B", "kitchen"),
    Stay("C", "kitchen"),
    Exit("C", "kitchen"),
]


@pytest.mark.parametrize(
    "chain, expected",
    [
        ((), "green_drawer"),
        (("A",), "blue_crate"),
        (("B",), "green_drawer"),
        (("C",), "green_drawer"),
        (("A", "B"), "blue_crate"),
        (("B", "A"), "blue_crate"),
        (("C", "A"), "blue_crate"),
        (("B", "C"), "green_drawer"),
        (("C", "B"), "green_drawer"),
        (("A", "B", "C"), "blue_crate"),
        (("C", "B", "A"), "blue_crate"),
    ],
)
def test_joint_semantics_by_hand(chain, expected):
    assert BeliefOracle(TWO_MOVES).belief(chain, "apple") == expected


@pytest.mark.parametrize(
    "chain, expected",
    [
        # A's move is listed (B, C, A): chains ending with the mover, or among B, C in that order.
        (("B", "A"), "blue_crate"),
        (("A", "B"), "red_box"),  # not a subsequence of (B, C, A): keeps the value from the entry
        (("B", "C"), "blue_crate"),  # B's move is listed (C, B), so (B, C) keeps A's move
        (("C", "B"), "green_drawer"),
        (("A",), "blue_crate"),
    ],
)
def test_ordered_semantics_follows_listing_order(chain, expected):
    assert BeliefOracle(TWO_MOVES, semantics="ordered").belief(chain, "apple") == expected


def test_belief_at_any_point_and_its_source():
    oracle = BeliefOracle(TWO_MOVES)
    assert oracle.belief(("B",), "apple", at=0) is None
    assert oracle.belief(("B",), "apple", at=2) == "red_box"
    assert oracle.belief(("B",), "apple", at=3) == "blue_crate"
    assert oracle.reality("apple", at=4) == "blue_crate"
    assert oracle.belief_source(("C", "B"), "apple") == 4
    assert oracle.belief_source((), "apple") == 4
    assert oracle.initial_location("apple") == "red_box"
    assert oracle.answer(Query((), "apple", "memory")) == "red_box"
    assert oracle.observers(4) == ("C", "B")


def _deception_story():
    # A leaves first, then B after moving the apple, then C (who saw the move). D is not in the chapter.
    return [
        Enter(("A", "B", "C"), "kitchen"),
        ObjectLocation("apple", "c1"),
        Exit("A", "kitchen"),
        Move("B", "apple", "c2"),
        Exit("B", "kitchen"),
        Exit("C", "kitchen"),
        Enter(("A", "B", "C", "D"), WAITING_ROOM),
        PublicClaim("B", "apple", "c3"),  # believers: A (left before B) and D (not in the chapter)
        PrivateTell("C", "A", "apple", "c4"),  # A left before C: A believes C
        PrivateTell("A", "C", "apple", "c1"),  # C left after A: C does not believe A
    ]


def test_trust_rule_for_claims_and_tells():
    events = _deception_story()
    setup = WorldSetup(agents=("A", "B", "C", "D"), container_rooms={"c1": "kitchen", "c2": "kitchen", "c3": "kitchen", "c4": "kitchen"}, initial_locations={"apple": "c1"})
    oracle = BeliefOracle(events, setup)
    after_claim = 8
    assert oracle.belief(("A",), "apple", at=after_claim) == "c3"
    assert oracle.belief(("D",), "apple", at=after_claim) == "c3"
    assert oracle.belief(("C",), "apple", at=after_claim) == "c2"  # saw the move, left after B
    assert oracle.belief(("A", "B"), "apple", at=after_claim) == "c3"  # a believer thinks the speaker believes it
    assert oracle.belief(("B", "C"), "apple", at=after_claim) == "c3"  # the speaker thinks everyone believes him
    assert oracle.belief(("C", "B"), "apple", at=after_claim) == "c2"  # C did not believe: unchanged
    # private tells
    assert oracle.belief(("A",), "apple") == "c4"
    assert oracle.belief(("A", "C"), "apple", at=9) == "c4"
    assert oracle.belief(("A", "C"), "apple") == "c1"  # A then told C "c1" and thinks C believes it
    assert oracle.belief(("C", "A"), "apple") == "c4"  # C thinks A believes C; A's tell did not convince C...
    assert oracle.belief(("C",), "apple") == "c2"  # ...but C trusts their own eyes
    # tellers' own beliefs never change
    assert oracle.belief(("B",), "apple") == "c2"
    assert oracle.belief((), "apple") == "c2"
    # claims touch no chain longer than two
    assert oracle.belief(("D", "A", "B"), "apple") is None


def test_setup_inferred_from_the_story_matches_the_true_one():
    events = _deception_story()
    inferred = WorldSetup.infer(events)
    assert inferred.agents == ("A", "B", "C", "D")
    assert inferred.initial_locations == {"apple": "c1"}
    assert inferred.container_rooms["c1"] == "kitchen" and inferred.container_rooms["c2"] == "kitchen"


def test_entering_a_room_reveals_its_objects_and_the_waiting_room_nothing():
    events = [
        Enter(("A",), "kitchen"),
        ObjectLocation("apple", "red_box"),
        Exit("A", "kitchen"),
        Enter(("B",), WAITING_ROOM),
        Enter(("B", "C"), "kitchen"),  # B and C learn where the apple is, and that each other knows
    ]
    oracle = BeliefOracle(events)
    assert oracle.belief(("B",), "apple", at=4) is None
    assert oracle.belief(("B", "C"), "apple") == "red_box"
    assert oracle.belief(("A", "B"), "apple") is None


def test_a_query_rejects_repeated_agents_and_reality_with_a_chain():
    with pytest.raises(ValueError, match="repeats"):
        Query(("A", "B", "A"), "apple")
    with pytest.raises(ValueError):
        Query(("A",), "apple", "reality")
    with pytest.raises(ValueError):
        BeliefOracle([], semantics="psychic")  # type: ignore[arg-type]


def test_unknown_objects_and_agents_have_no_belief():
    oracle = BeliefOracle(TWO_MOVES)
    assert oracle.belief(("Z",), "apple") is None
    assert oracle.belief(("A",), "pear") is None
    assert oracle.reality("pear") is None
    assert len(list(oracle.chains(max_order=4))) == 3 + 6 + 6
