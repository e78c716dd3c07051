"""Partial-ToM rules and nesting_required on hand-built stories, against hand-computed answers."""

from __future__ import annotations

from itertools import permutations

from tomrl.world.oracle import BeliefOracle
from tomrl.world.partial import PARTIAL_RULES, first_order_beliefs, nesting_required, partial_answers
from tomrl.world.world import Enter, Exit, Move, ObjectLocation, PrivateTell, PublicClaim, Stay

# Two chapters. Anna leaves chapter 1 before Ben; then Anna alone re-enters and moves the apple again.
TWO_CHAPTERS = [
    Enter(("Anna", "Ben", "Cleo"), "kitchen"),  # 0
    ObjectLocation("apple", "red_box"),  # 1  all three see: every chain -> red_box
    Exit("Anna", "kitchen"),  # 2
    Move("Cleo", "apple", "green_box"),  # 3  Ben and Cleo see
    Exit("Ben", "kitchen"),  # 4
    Exit("Cleo", "kitchen"),  # 5
    Enter(("Anna",), "kitchen"),  # 6  chapter 2: Anna sees the apple in the green_box
    Move("Anna", "apple", "blue_box"),  # 7  Anna alone
    Exit("Anna", "kitchen"),  # 8
]

# One chapter, four agents leaving one by one, the apple moved between exits: a chain's belief is
# always fixed when its earliest leaver walks out.
ONE_CHAPTER = [
    Enter(("Anna", "Ben", "Cleo", "Dan"), "hall"),  # 0
    ObjectLocation("apple", "red_box"),  # 1
    Stay("Anna", "hall"),  # 2  changes nothing
    Exit("Anna", "hall"),  # 3  Anna: red_box
    Move("Ben", "apple", "green_box"),  # 4
    Exit("Ben", "hall"),  # 5  Ben: green_box
    Move("Cleo", "apple", "blue_box"),  # 6
    Exit("Cleo", "hall"),  # 7  Cleo: blue_box
    Move("Dan", "apple", "gold_box"),  # 8  Dan never leaves: gold_box
]


def test_two_chapter_story_needs_nesting():
    oracle = BeliefOracle(TWO_CHAPTERS)
    assert first_order_beliefs(oracle, ("Anna", "Ben"), "apple") == {"Anna": "blue_box", "Ben": "green_box"}
    assert oracle.belief(("Anna", "Ben"), "apple") == "red_box"  # last seen together: event 1
    assert partial_answers(oracle, ("Anna", "Ben"), "apple") == {
        "first_named": "blue_box",  # Anna
        "last_named": "green_box",  # Ben
        "left_first": "blue_box",  # Anna left first (event 2 < 4)
        "left_last": "green_box",
        "oldest_knowledge": "green_box",  # Ben's belief dates from event 3, Anna's from 7
        "newest_knowledge": "blue_box",
    }
    assert nesting_required(oracle, ("Anna", "Ben"), "apple")
    # (Ben, Anna) has the same answer and is just as nesting-required.
    assert oracle.belief(("Ben", "Anna"), "apple") == "red_box"
    assert nesting_required(oracle, ("Ben", "Anna"), "apple")
    # (Ben, Cleo): both saw the move, Ben's own belief is the answer.
    assert oracle.belief(("Ben", "Cleo"), "apple") == "green_box"
    assert not nesting_required(oracle, ("Ben", "Cleo"), "apple")
    assert partial_answers(oracle, ("Ben", "Cleo"), "apple")["first_named"] == "green_box"


def test_without_the_second_chapter_the_earliest_leaver_answers():
    oracle = BeliefOracle(TWO_CHAPTERS[:6])
    assert oracle.belief(("Anna", "Ben"), "apple") == "red_box"
    assert partial_answers(oracle, ("Anna", "Ben"), "apple")["left_first"] == "red_box"
    assert not nesting_required(oracle, ("Anna", "Ben"), "apple")


def test_one_chapter_story_earliest_leaver_answers_every_order():
    oracle = BeliefOracle(ONE_CHAPTER)
    agents = ("Anna", "Ben", "Cleo", "Dan")
    assert first_order_beliefs(oracle, agents, "apple") == {"Anna": "red_box", "Ben": "green_box", "Cleo": "blue_box", "Dan": "gold_box"}
    checked = 0
    for order in (2, 3, 4):
        for chain in permutations(agents, order):
            answers = partial_answers(oracle, chain, "apple")
            gold = oracle.belief(chain, "apple")
            assert answers["left_first"] == gold, chain
            assert answers["oldest_knowledge"] == gold, chain  # in one chapter: the same agent
            assert not nesting_required(oracle, chain, "apple"), chain
            checked += 1
    assert checked == 12 + 24 + 24


def test_one_chapter_rules_by_hand():
    oracle = BeliefOracle(ONE_CHAPTER)
    chain = ("Cleo", "Anna", "Dan")  # Anna left first: red_box
    assert oracle.belief(chain, "apple") == "red_box"
    assert partial_answers(oracle, chain, "apple") == {
        "first_named": "blue_box",  # Cleo
        "last_named": "gold_box",  # Dan
        "left_first": "red_box",  # Anna
        "left_last": "gold_box",  # Dan never leaves: counts as leaving last
        "oldest_knowledge": "red_box",  # Anna's belief from event 1
        "newest_knowledge": "gold_box",  # Dan's from event 8
    }
    assert set(PARTIAL_RULES) == {"first_named", "last_named", "left_first", "left_last", "oldest_knowledge", "newest_knowledge"}


def test_orders_below_two_are_never_nesting_required():
    oracle = BeliefOracle(TWO_CHAPTERS)
    assert not nesting_required(oracle, ("Anna",), "apple")
    assert not nesting_required(oracle, (), "apple")
    assert partial_answers(oracle, ("Ben",), "apple") == {name: "green_box" for name in PARTIAL_RULES}


def test_a_distrusted_private_tell_needs_nesting():
    # Ben left after Anna, so he does not trust her tell; Anna thinks he does: (Anna, Ben) is the lie.
    events = [
        Enter(("Anna", "Ben"), "attic"),
        ObjectLocation("key", "red_box"),
        Exit("Anna", "attic"),
        Move("Ben", "key", "green_box"),
        Exit("Ben", "attic"),
        Enter(("Anna", "Ben"), "waiting_room"),
        PrivateTell("Anna", "Ben", "key", "blue_box"),
    ]
    oracle = BeliefOracle(events)
    assert first_order_beliefs(oracle, ("Anna", "Ben"), "key") == {"Anna": "red_box", "Ben": "green_box"}
    assert oracle.belief(("Anna", "Ben"), "key") == "blue_box"
    assert nesting_required(oracle, ("Anna", "Ben"), "key")
    # Ben's view of Anna is what he last saw with her: no tell changes it.
    assert oracle.belief(("Ben", "Anna"), "key") == "red_box"
    assert not nesting_required(oracle, ("Ben", "Anna"), "key")
    assert partial_answers(oracle, ("Ben", "Anna"), "key")["left_first"] == "red_box"


def test_a_believed_public_claim_is_answered_by_the_believer():
    # Anna left first and trusts Ben, who left later: she and (Anna, Ben) now hold the claim.
    events = [
        Enter(("Anna", "Ben"), "attic"),
        ObjectLocation("key", "red_box"),
        Exit("Anna", "attic"),
        Move("Ben", "key", "green_box"),
        Exit("Ben", "attic"),
        PublicClaim("Ben", "key", "blue_box"),
    ]
    oracle = BeliefOracle(events)
    assert oracle.belief(("Anna",), "key") == "blue_box"
    assert oracle.belief(("Anna", "Ben"), "key") == "blue_box"
    assert not nesting_required(oracle, ("Anna", "Ben"), "key")
    answers = partial_answers(oracle, ("Anna", "Ben"), "key")
    assert answers["first_named"] == "blue_box" and answers["last_named"] == "green_box"
    assert answers["newest_knowledge"] == "blue_box"  # Anna's belief comes from the claim, the latest event
