"""The agent-agnostic rule family and its search, on hand-written stories with hand-derived answers."""

from __future__ import annotations

import random

from tomrl.audit.heuristics import parse_story
from tomrl.audit.report import audit, to_markdown
from tomrl.audit.rules import FLAG_MARGIN, RULE_FAMILY, BestRule, best_rules, rule_answers, timeline
from tomrl.schema import Example

STORY = """Anna, Ben and Cara entered the kitchen.
The apple is in the red_box.
Anna moved the apple to the blue_crate.
Anna exited the kitchen.
Ben moved the apple to the green_cup.
Ben exited the kitchen.
Cara exited the kitchen.
Anna, Ben and Cara entered the waiting_room.
Cara privately told Ben that the apple is in the red_box."""

CONTAINERS = ["red_box", "blue_crate", "green_cup", "white_bag", "black_tin", "pink_jar"]
NAMES = ["Anna", "Ben", "Cara", "Dan"]


def test_timeline_and_rules_on_a_hand_written_story():
    t = timeline(parse_story(STORY), "apple", asks_room=False)
    assert t.path == ("red_box", "blue_crate", "green_cup")
    assert t.said == ("red_box", "blue_crate", "green_cup", "red_box")
    assert t.at_exit == ("blue_crate", "green_cup", "green_cup")
    assert t.at_room_exit == t.at_exit
    answers = rule_answers(STORY, "Where does Ben think Anna thinks the apple is?")
    assert answers["path_start_2"] == "blue_crate" and answers["path_end_1"] == "green_cup"
    assert answers["path_start_4"] is None  # the path has three places
    assert answers["said_end_1"] == "red_box" and answers["exit_start_1"] == "blue_crate"
    assert answers["first_moved_to"] == "blue_crate"
    assert rule_answers(STORY, "Is the apple in the red_box? Answer yes or no.") is None


def test_rules_do_not_read_the_agents_of_the_question():
    one = rule_answers(STORY, "Where does Ben think Anna thinks the apple is?")
    other = rule_answers(STORY, "Where does Cara think the apple is?")
    assert one == other


def story_with_path(rng: random.Random, places: list[str]) -> str:
    agents = rng.sample(NAMES, 3)
    lines = [f"{', '.join(agents[:-1])} and {agents[-1]} entered the kitchen.", f"The apple is in the {places[0]}."]
    for i, place in enumerate(places[1:]):
        lines.append(f"{agents[i % 3]} moved the apple to the {place}.")
        lines.append(f"{agents[i % 3]} exited the kitchen.")
    return "\n".join(lines)


def make_examples(gold_of, n: int = 80, seed: int = 0) -> list[Example]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        places = rng.sample(CONTAINERS, rng.randint(3, 5))
        story = story_with_path(rng, places)
        rows.append(Example(id=f"q{i}", source="toy", split="test", story=story, question="Where does Anna think the apple is?",
                            answer=gold_of(rng, places), order=1 + i % 2, question_type="belief", deception=None,
                            story_length=len(places), story_id=f"s{i}"))
    return rows


def test_a_planted_shortcut_is_found():
    result = best_rules(make_examples(lambda rng, places: places[1]))
    assert set(result) == {"1", "2", "all"}
    for key in ("1", "2"):
        best = result[key]
        assert isinstance(best, BestRule)
        assert best.accuracy.value == 1.0 and best.flagged
        assert best.rule in ("path_start_2", "said_start_2", "first_moved_to")  # the same answer on these stories
        assert best.cross_validated is not None and best.cross_validated.value == 1.0
        assert abs(best.margin - (1.0 - best.chance)) < 1e-9
    assert result["all"].rule == "by order" and result["all"].n == 80
    assert set(result["all"].answers) == {f"q{i}" for i in range(80)}
    assert "answers" not in result["all"].to_dict()


def test_a_random_gold_is_not_flagged():
    result = best_rules(make_examples(lambda rng, places: rng.choice(places), n=400, seed=1))
    for key in ("1", "2"):
        assert not result[key].flagged, result[key].to_dict()
        assert result[key].margin < FLAG_MARGIN
        # selecting on half and scoring on the other half removes the in-sample optimism
        assert result[key].cross_validated.value <= result[key].accuracy.value + 0.1


def test_rule_names_are_stable():
    assert {"path_start_1", "path_end_1", "exit_start_1", "room_exit_end_6", "most_named", "least_named"} <= set(RULE_FAMILY)


def test_audit_report_has_the_best_rule_table():
    rows = make_examples(lambda rng, places: places[1], n=20)
    report = audit(None, [("toy.jsonl", rows)], seed=0)
    (entry,) = report["tests"]
    assert entry["agnostic_rules"]["toy"]["1"]["flagged"] is True
    markdown = to_markdown(report)
    assert "### Best agent-agnostic rule" in markdown and "| toy | 1 | 10 |" in markdown and "FLAG" in markdown
