"""The agent-blind learner: it never reads the question's agents, finds a planted pattern, stays at chance
without one, never answers a question with a model that saw its story, and AFLite removes what it finds."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest

from tomrl.audit.heuristics import parsed, read_question
from tomrl.audit.learner import (
    FEATURE_NAMES, LEARNERS, adversarial_filter, cross_fitted_answers, features, fit_learner, learned_baseline, story_folds,
)
from tomrl.audit.rules import _normalised, chance_of, timeline
from tomrl.generators import generate
from tomrl.generators.config import GenerateConfig
from tomrl.schema import Example


def plain(seed: int, n: int = 240) -> list[Example]:
    """The plain Hi-ToM generator, order 2, one chapter: its gold is strongly tied to exit positions."""
    return generate(GenerateConfig(benchmark="hitom", n=n, seed=seed, orders=[2], agents=4, lengths=[1],
                                   deception=[False], distractor_prob=0.0))


@pytest.fixture(scope="module")
def seed_one() -> list[Example]:
    return plain(1)


@pytest.fixture(scope="module")
def seed_two() -> list[Example]:
    return plain(2)


def score(examples: list[Example], answers: dict[str, str | None]) -> tuple[float, float]:
    """(accuracy, chance) of ``answers`` on ``examples``."""
    hits = [bool(_normalised(answers[e.id])) and _normalised(answers[e.id]) == _normalised(e.answer) for e in examples]
    chance = sum(chance_of(e.story, e.question, e.answer) for e in examples) / len(examples)
    return sum(hits) / len(hits), chance


def path_places(e: Example) -> list[str]:
    facts = parsed(e.story)
    info = read_question(facts, e.question)
    return list(dict.fromkeys(timeline(facts, info.thing, info.asks_room).path))


def test_features_never_read_the_agents_of_the_question(seed_one):
    checked = 0
    for e in seed_one[:20]:
        agents = parsed(e.story).agents
        named = read_question(parsed(e.story), e.question).agents
        assert len(named) == 2 and len(agents) == 4
        others = [a for a in agents if a not in named]
        swapped = re.sub(rf"\b{named[0]}\b", "\0", e.question)
        swapped = re.sub(rf"\b{named[1]}\b", others[0], swapped).replace("\0", others[1])
        assert swapped != e.question
        candidates, matrix = features(e)
        other_candidates, other_matrix = features(e.replace(question=swapped))
        assert candidates == other_candidates and np.array_equal(matrix, other_matrix)
        assert matrix.shape == (len(candidates), len(FEATURE_NAMES))
        checked += 1
    assert checked == 20
    # …but they do read its order: one agent fewer is another feature row
    e = seed_one[0]
    first = read_question(parsed(e.story), e.question).agents[0]
    shorter = re.sub(rf"Where does {first} think (\w+) thinks", r"Where does \1 think", e.question)
    assert shorter != e.question
    assert not np.array_equal(features(e)[1], features(e.replace(question=shorter))[1])


def test_non_location_questions_are_skipped(seed_one):
    e = seed_one[0].replace(question="Is the apple in the box? Answer yes or no.")
    assert features(e)[0] == ()
    assert fit_learner(seed_one, "logistic regression").predict([e]) == {e.id: None}


def test_a_planted_pattern_is_found_on_another_seed_and_cross_fitted(seed_one, seed_two):
    for learner in LEARNERS:
        accuracy, chance = score(seed_two, fit_learner(seed_one, learner).predict(seed_two))
        assert accuracy > chance + 0.2, (learner, accuracy, chance)
        accuracy, chance = score(seed_one, cross_fitted_answers(seed_one, learner))
        assert accuracy > chance + 0.2, (learner, accuracy, chance)
    result = learned_baseline(seed_two, train=seed_one)
    assert set(result) == {"2", "all"} and result["2"].flagged and result["2"].n == len(seed_two)
    assert result["2"].rule.startswith("learner: ") and set(result["2"].answers) == {e.id for e in seed_two}


def test_a_random_gold_stays_near_chance(seed_one):
    rng = random.Random(0)
    shuffled = [e.replace(answer=rng.choice(path_places(e))) for e in seed_one]
    for learner in LEARNERS:
        accuracy, chance = score(shuffled, cross_fitted_answers(shuffled, learner))
        assert abs(accuracy - chance) < 0.1, (learner, accuracy, chance)


def test_cross_fitting_never_uses_the_question_s_own_story(seed_one):
    # two questions per story with one random gold each story: only a model that saw the story can know it
    rng = random.Random(1)
    memorisable = []
    for e in seed_one:
        gold = rng.choice(path_places(e))
        memorisable += [e.replace(id=e.id + "-a", answer=gold), e.replace(id=e.id + "-b", answer=gold)]
    folds = story_folds(memorisable, 5)
    fold_of_story: dict[str, set[int]] = {}
    for e, fold in zip(memorisable, folds):
        fold_of_story.setdefault(e.story_id, set()).add(fold)
    assert all(len(f) == 1 for f in fold_of_story.values()) and len(set(folds)) == 5
    crossed, chance = score(memorisable, cross_fitted_answers(memorisable, "gradient boosting"))
    seen, _ = score(memorisable, fit_learner(memorisable, "gradient boosting").predict(memorisable))
    assert crossed < chance + 0.1 and seen > chance + 0.25, (crossed, seen, chance)


def test_few_stories():
    story = "Al and Bo entered the den.\nThe pen is in the red_box.\nBo exited the den.\nAl moved the pen to the blue_bag."
    rows = [Example(id=f"q{i}", source="toy", split="test", story=story, question="Where does Bo think the pen is?",
                    answer="red_box", order=1, question_type="q", deception=None, story_length=4, story_id="s") for i in range(3)]
    assert cross_fitted_answers(rows, "gradient boosting") == {"q0": None, "q1": None, "q2": None}
    two = rows[:2] + [rows[2].replace(story=story.replace("pen", "cup"), question="Where does Bo think the cup is?", story_id="t")]
    answers = cross_fitted_answers(two, "logistic regression", folds=5)  # two stories: two folds
    assert all(a in ("red_box", "blue_bag") for a in answers.values())


def test_aflite_removes_a_planted_pattern(seed_one, seed_two):
    kept_one = adversarial_filter(seed_one, partitions=8, remove_fraction=0.1, seed=0)
    kept_two = adversarial_filter(seed_two, partitions=8, remove_fraction=0.1, seed=0)
    assert len(seed_one) // 2 <= len(kept_one) < len(seed_one)
    assert [e.id for e in kept_one] == [e.id for e in seed_one if e in kept_one]  # input order
    before, _ = score(seed_two, fit_learner(seed_one, "logistic regression").predict(seed_two))
    after, _ = score(kept_two, fit_learner(kept_one, "logistic regression").predict(kept_two))
    assert after < before - 0.1, (before, after)
    assert adversarial_filter(seed_one, partitions=8, remove_fraction=0.1, seed=0) == kept_one


def test_same_input_same_answers(seed_one, seed_two):
    for learner in LEARNERS:
        assert cross_fitted_answers(seed_one, learner, seed=3) == cross_fitted_answers(list(seed_one), learner, seed=3)
    first = learned_baseline(seed_two, train=seed_one)
    again = learned_baseline(seed_two, train=seed_one)
    assert {k: (v.to_dict(), v.answers) for k, v in first.items()} == {k: (v.to_dict(), v.answers) for k, v in again.items()}
