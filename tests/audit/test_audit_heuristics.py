"""The no-ToM heuristics and their story parser, on hand-written stories with hand-derived answers."""

from __future__ import annotations

import pytest

from tomrl.audit.heuristics import (
    HEURISTICS,
    RULES,
    answers_match,
    is_location_question,
    normalise_answer,
    parse_story,
    random_expected_hit,
    read_question,
)
from tomrl.loaders.registry import load
from tomrl.schema import Example
from tomrl.world.parsers import parse_hitom_story

# Hi-ToM style: Ben leaves before Anna moves the apple; Cara moves it again after Anna left;
# a private tell and a public claim mention other containers; a distractor names a container.
HITOM = """Anna, Ben and Cara entered the kitchen.
The apple is in the red_box.
Ben exited the kitchen.
Dan likes the green_cup.
Anna moved the apple to the blue_crate.
Anna exited the kitchen.
Cara moved the apple to the green_cup.
Cara exited the kitchen.
Anna, Ben and Cara entered the waiting_room.
Cara privately told Ben that the apple is in the blue_crate.
Anna publicly claimed that apple is in the red_box."""

# ToMi style, joined by spaces, noise sentences without a period (as in the ToM-RL release).
TOMI = ("Amelia entered the hall. Mila loves the plum Hunter loves the tomato Mila entered the lounge. Hunter entered the hall. "
        "The jeans is in the container. Hunter exited the hall. Amelia moved the jeans to the treasure_chest. Amelia exited the hall.")

# ExploreToM structured style: multi-word names, rooms, a move to another room.
EXPLORE = ("Kaylee entered the hotel lobby. Kaylee moved the silver letter opener to the wooden desk drawer, which is also located in "
           "the hotel lobby. Liam entered the hotel lobby. Kaylee left the hotel lobby. Liam moved the silver letter opener to the "
           "leather briefcase, which is also located in the hotel lobby. Liam moved the silver letter opener to the back office, "
           "leaving the leather briefcase in its original location.")


def answer(name: str, story: str, question: str):
    return RULES[name](parse_story(story), question)


def test_parser_reads_the_hitom_forms():
    facts = parse_story(HITOM)
    assert facts.agents[:3] == ["Anna", "Ben", "Cara"]
    assert facts.containers == ["red_box", "blue_crate", "green_cup"]  # "likes the green_cup" is not a location statement
    assert facts.rooms == ["kitchen", "waiting_room"]
    kinds = [e.kind for e in facts.events]
    assert kinds == ["enter", "place", "exit", "move", "exit", "move", "exit", "enter", "claim", "claim"]
    tell, claim = facts.events[-2:]
    assert (tell.public, tell.agents, tell.location) == (False, ("Cara", "Ben"), "blue_crate")
    assert (claim.public, claim.thing, claim.location) == (True, "apple", "red_box")


def test_hitom_heuristics():
    q_reality = "Where is the apple really?"
    q_ben = "Where does Ben think Anna thinks the apple is?"
    assert answer("true_location", HITOM, q_reality) == "green_cup"
    assert answer("first_location", HITOM, q_reality) == "blue_crate"  # first move, not the initial red_box
    assert answer("first_mentioned", HITOM, q_reality) == "red_box"
    assert answer("last_mentioned", HITOM, q_reality) == "red_box"  # the public claim names it last
    assert answer("exit_location", HITOM, q_ben) == "red_box"  # Ben left before any move
    assert answer("exit_location", HITOM, "Where does Anna think the apple is?") == "blue_crate"
    assert answer("exit_location", HITOM, q_reality) == "green_cup"  # no agent asked: the true location
    # red_box: statement + claim = 2; blue_crate: move + tell = 2; green_cup: likes + move = 2 -> the earliest named
    assert answer("most_mentioned", HITOM, q_reality) == "red_box"
    assert read_question(parse_story(HITOM), q_ben).agents == ("Ben", "Anna")


def test_first_location_ignores_public_claims_but_not_private_tells():
    claimed = "Al and Bo entered the den.\nThe pen is in the red_box.\nAl exited the den.\nBo publicly claimed that pen is in the blue_bag."
    assert answer("first_location", claimed, "Where is the pen really?") is None
    told = claimed.replace("publicly claimed that pen", "privately told Al that the pen")
    assert answer("first_location", told, "Where is the pen really?") == "blue_bag"


def test_tomi_story_joined_by_spaces():
    facts = parse_story(TOMI)
    assert facts.rooms == ["hall", "lounge"] and facts.containers == ["container", "treasure_chest"]
    assert answer("true_location", TOMI, "Where is the jeans really?") == "treasure_chest"
    assert answer("first_mentioned", TOMI, "Where was the jeans at the beginning?") == "container"
    assert answer("exit_location", TOMI, "Where will Hunter look for the jeans?") == "container"  # left before the move
    assert answer("exit_location", TOMI, " Where does Amelia think that Hunter searches for the jeans?") == "treasure_chest"


def test_exploretom_rooms_and_multiword_names():
    facts = parse_story(EXPLORE)
    assert facts.containers == ["wooden desk drawer", "leather briefcase"]
    assert facts.rooms == ["hotel lobby", "back office"]
    assert facts.things == ["silver letter opener"]
    q_container = "In which container will Kaylee search for the silver letter opener?"
    q_room = "In which room does Kaylee think that Liam will search for the silver letter opener?"
    assert answer("exit_location", EXPLORE, q_container) == "wooden desk drawer"  # Kaylee left before Liam's moves
    assert answer("true_location", EXPLORE, q_room) == "back office"
    assert answer("first_location", EXPLORE, q_container) == "wooden desk drawer"
    assert answer("last_mentioned", EXPLORE, q_room) == "back office"
    assert answer("true_location", EXPLORE, "In which room is the leather briefcase now?") == "hotel lobby"


def test_one_room_story_answers_room_questions():
    story = "Jo entered the lab. Jo painted the compass red. Max entered the lab."
    assert answer("true_location", story, "In which room does Max think that Jo will search for the compass?") == "lab"


def test_random_location_is_seeded_and_its_expectation_exact():
    facts = parse_story(HITOM)
    question = "Where is the apple really?"
    draws = {RULES["random_location"](facts, question, key=str(i)) for i in range(50)}
    assert draws == {"red_box", "blue_crate", "green_cup"}
    assert RULES["random_location"](facts, question, key="x") == RULES["random_location"](facts, question, key="x")
    assert random_expected_hit(facts, question, "green_cup") == pytest.approx(1 / 3)
    assert random_expected_hit(facts, question, "yellow_bin") == 0.0


def test_heuristics_on_examples_skip_non_location_questions():
    example = Example(id="x", source="t", split="test", story=HITOM, question="Where is the apple really?", answer="green_cup",
                      order=0, question_type="reality", deception=False, story_length=1, story_id="s")
    assert HEURISTICS["true_location"](example) == "green_cup"
    yes_no = example.replace(question="Does Ben know about it? Answer yes or no.", answer="no")
    assert all(h(yes_no) is None for h in HEURISTICS.values())
    assert not is_location_question(yes_no.question) and is_location_question("In which room is the box?")


def test_answer_matching_is_exact_after_normalisation():
    assert normalise_answer("The Green_Drawer.") == "green drawer"
    # The audit scores heuristics with the rewards' strict matcher, so only one leading "the " goes.
    assert answers_match("green_drawer", "green drawer") and answers_match("the donation bin", "donation bin")
    assert not answers_match("a donation bin", "donation bin")
    assert not answers_match("toolbox", "box") and not answers_match("red box or blue box", "blue box") and not answers_match(None, "x")


def test_parser_agrees_with_the_world_model_on_hitom(shared_data):
    for example in load("hitom", oracle=False)[::7]:
        ours = [(e.kind, e.thing, e.location) for e in parse_story(example.story).events if e.kind in ("place", "move")]
        theirs = []
        for event in parse_hitom_story(example.story):
            kind = type(event).__name__
            if kind == "ObjectLocation":
                theirs.append(("place", event.obj, event.container))
            elif kind == "Move":
                theirs.append(("move", event.obj, event.container))
        assert ours == theirs, example.id
