"""Parsing Hi-ToM / ToMi sentences and questions, and writing them back."""

from __future__ import annotations

import pytest

from tomrl.world.parsers import answer_question, parse_hitom_story, parse_question, parse_sentence, parse_tomi_story
from tomrl.world.sentences import render_event, render_question, render_story
from tomrl.world.world import Distractor, Enter, Exit, Move, ObjectLocation, PrivateTell, PublicClaim, Query, Stay

SENTENCES = [
    ("Avery, Charlotte, Isabella, Elizabeth and Owen entered the living_room.", Enter(("Avery", "Charlotte", "Isabella", "Elizabeth", "Owen"), "living_room")),
    ("Emily and Logan entered the TV_room.", Enter(("Emily", "Logan"), "TV_room")),
    ("Aria entered the front_yard.", Enter(("Aria",), "front_yard")),
    ("The lettuce is in the green_drawer.", ObjectLocation("lettuce", "green_drawer")),
    ("Avery moved the sweet_potato to the green_bathtub.", Move("Avery", "sweet_potato", "green_bathtub")),
    ("Avery exited the living_room.", Exit("Avery", "living_room")),
    ("Isabella made no movements and stayed in the living_room for 1 minute.", Stay("Isabella", "living_room")),
    ("Emily publicly claimed that peas is in the blue_suitcase.", PublicClaim("Emily", "peas", "blue_suitcase")),
    ("Isabella privately told Logan that the peas is in the green_bottle.", PrivateTell("Isabella", "Logan", "peas", "green_bottle")),
    ("Owen likes the green_envelope.", Distractor("Owen likes the green_envelope.")),
    ("Noah lost his gloves.", Distractor("Noah lost his gloves.")),
    ("Jack saw a monkey.", Distractor("Jack saw a monkey.")),
    ("Isla dislikes the hall", Distractor("Isla dislikes the hall")),  # ToMi: no final period
]


@pytest.mark.parametrize("sentence, event", SENTENCES, ids=[s for s, _ in SENTENCES])
def test_every_sentence_form_parses(sentence, event):
    assert parse_sentence(sentence) == event


@pytest.mark.parametrize("sentence, event", SENTENCES[:9], ids=[s for s, _ in SENTENCES[:9]])
def test_rendering_gives_back_the_official_sentence(sentence, event):
    assert render_event(event, "hitom") == sentence


QUESTIONS = [
    ("Where is the lettuce really?", Query((), "lettuce", "reality")),
    ("Where was the orange at the beginning?", Query((), "orange", "memory")),
    ("Where does Hannah really think the carrot is?", Query(("Hannah",), "carrot")),
    ("Where does Hannah think William thinks the carrot is?", Query(("Hannah", "William"), "carrot")),
    ("Where does Owen think Emily thinks Nathan thinks the onion is?", Query(("Owen", "Emily", "Nathan"), "onion")),
    ("Where does Liam think Owen thinks Emily thinks Nathan thinks the green_pepper is?", Query(("Liam", "Owen", "Emily", "Nathan"), "green_pepper")),
    ("Where will Aria look for the grapefruit?", Query(("Aria",), "grapefruit")),
    ("Where does Aria think that Aiden searches for the grapefruit?", Query(("Aria", "Aiden"), "grapefruit")),
]


@pytest.mark.parametrize("text, query", QUESTIONS, ids=[q for q, _ in QUESTIONS])
def test_question_forms(text, query):
    assert parse_question(text) == query
    style = "tomi" if ("look for" in text or "searches" in text or "beginning" in text) else "hitom"
    assert render_question(query, style) == text


def test_unknown_text_is_an_error_naming_the_line():
    with pytest.raises(ValueError, match="story sentence 2"):
        parse_hitom_story("1 Anna entered the kitchen.\n2 Anna juggled the apple.")
    with pytest.raises(ValueError, match="unrecognised question"):
        parse_question("Why is the apple sad?")


def test_numbering_instruction_and_separator_lines_are_skipped():
    text = (
        "Read the following story and answer the multiple-choice question. Please provide answer without explanations.\n"
        "1 Anna and Ben entered the kitchen.\n2 The apple is in the red_box.\n3 Anna moved the apple to the blue_crate.\n\n***"
    )
    events = parse_hitom_story(text)
    assert len(events) == 3
    assert answer_question(text, "Where does Ben really think the apple is?", "hitom") == "blue_crate"
    assert render_story(events, "hitom").splitlines()[0] == "1 Anna and Ben entered the kitchen."


def test_tomi_story_and_a_question_the_story_cannot_answer():
    text = "Aria entered the den.\nThe apple is in the red_box.\nAria exited the den.\nNoah entered the hall.\nNoah likes the apple"
    events = parse_tomi_story(text)
    assert render_story(events, "tomi") == text
    assert answer_question(text, "Where will Aria look for the apple?", "tomi") == "red_box"
    with pytest.raises(ValueError, match="does not determine"):
        answer_question(text, "Where will Noah look for the apple?", "tomi")
