"""The reasoning-fidelity reward: statement parsing, verdicts by hand, and separation of correct
from corrupted reasoning traces on tomrl-generated Hi-ToM and ToMi stories."""

from __future__ import annotations

import json
import random
import statistics

import pytest

from tomrl.config import ConfigError
from tomrl.generators import generate
from tomrl.generators.config import GenerateConfig
from tomrl.rewards.fidelity import (
    check_reasoning,
    reasoning_text,
    world_from_events,
    world_from_story,
)
from tomrl.rewards.functions import make_reward
from tomrl.world.world import Enter, Exit, Move, ObjectLocation

# Sally-Anne: Ben leaves before Anna moves the apple. By hand: reality red_box then blue_box;
# Anna: blue_box (saw both); Ben: red_box; Anna thinks Ben thinks: red_box; Ben thinks Anna thinks: red_box.
SALLY_ANNE = (
    "1 Anna and Ben entered the kitchen.\n"
    "2 The apple is in the red_box.\n"
    "3 Ben exited the kitchen.\n"
    "4 Anna moved the apple to the blue_box.\n"
)


def _score(reasoning: str, **options) -> tuple[float | None, dict]:
    report = check_reasoning(reasoning, SALLY_ANNE, "hitom", **options)
    return report.score, report.components()


@pytest.mark.parametrize(
    "sentence, verdict",
    [
        ("Ben thinks the apple is in the red_box.", "true"),
        ("Ben believes that the apple is in the red box.", "true"),
        ("ben thinks the apple is in the Red_Box.", "true"),
        ("Anna thinks the apple is in the blue_box.", "true"),
        ("Anna thinks Ben thinks the apple is in the red_box.", "true"),
        ("Anna knows that Ben believes the apple is still in the red_box.", "true"),
        ("Ben thinks that Anna thinks the apple is in the red_box.", "true"),
        ("Ben will look for the apple in the red_box.", "true"),
        ("Anna thinks Ben will look for the apple in the red_box.", "true"),
        ("According to Ben, the apple is in the red_box.", "true"),
        ("The apple is in the blue_box.", "true"),
        ("I think the apple is in the blue_box.", "true"),
        ("Ben thinks the apple is in the blue_box.", "false"),
        ("Ben will look for the apple in the blue_box.", "false"),
        ("Ben thinks that Anna thinks the apple is in the blue_box.", "false"),
    ],
)
def test_single_statement_verdicts(sentence, verdict):
    score, counts = _score(sentence)
    assert counts["checkable"] == 1
    assert score == (1.0 if verdict == "true" else -1.0)


@pytest.mark.parametrize(
    "sentence",
    [
        "Ben does not think the apple is in the blue_box.",
        "Ben doesn't think the apple is in the blue_box.",
        "He thinks the apple is in the blue_box.",
        "Ben might think the apple is in the blue_box.",
        "If Ben thinks the apple is in the blue_box, he is wrong.",
        "Does Ben think the apple is in the blue_box?",
        "Anna publicly claimed that the apple is in the green_box.",
        "Anna privately told Ben that the apple is in the blue_box.",
        "It is not true that the apple is in the red_box.",
        "Ben thinks the apple is in the fridge.",  # a container the story never names
        "Carl thinks the apple is in the red_box.",  # an agent the story never names
    ],
)
def test_uncheckable_statements_are_not_judged(sentence):
    score, counts = _score(sentence)
    assert counts["checkable"] == 0 and score == 0.0


def test_timing_any_accepts_an_earlier_state_final_does_not():
    stale = "The apple is in the red_box."
    assert _score(stale) == (1.0, {"found": 1, "skipped": 0, "checkable": 1, "true": 1, "false": 0, "final_true": 0})
    assert _score(stale, timing="final")[0] == -1.0


def test_at_first_statements_are_judged_against_the_first_belief():
    # Changed with the consistency option (issue 18): "at first" used to be ignored, so under timing final the
    # oracle-written traces ("The apple is in the red_box at first. …") had a false statement.
    for narration in ("At first the apple is in the red_box. Then Anna moved it, so the apple is in the blue_box.",
                      "The apple is in the red_box at first. Then Anna moved it, so the apple is in the blue_box."):
        for timing in ("any", "final"):
            assert _score(narration, timing=timing) == (1.0, {"found": 2, "skipped": 0, "checkable": 2, "true": 2, "false": 0, "final_true": 1})
    assert _score("At first the apple is in the blue_box.")[0] == -1.0
    assert _score("Initially, Ben thinks the apple is in the red_box.")[0] == 1.0
    # The qualifier belongs to its own statement, not to a later one in the same sentence.
    report = check_reasoning("Initially the apple is in the red_box, but now the apple is in the blue_box.", SALLY_ANNE, "hitom", timing="final")
    assert [c.statement.at_first for c in report.statements] == [True, False] and report.score == 1.0


def test_consistency_judges_a_chain_in_two_places_at_the_end():
    narration = "The apple is in the red_box. Then Anna moved it, so the apple is in the blue_box."
    assert _score(narration, consistency=False) == (1.0, {"found": 2, "skipped": 0, "checkable": 2, "true": 2, "false": 0, "final_true": 1})
    score, counts = _score(narration)  # one belief in two places: judged at the end, so one of them is false
    assert (score, counts["true"], counts["false"]) == (0.0, 1, 1)
    assert _score(narration, timing="final")[0] == 0.0
    # Other chains are not affected: Ben's single statement is still judged at any moment.
    assert _score(narration + " Ben thinks the apple is in the red_box.")[0] == pytest.approx(1 / 3)


def test_repeating_a_true_statement_earns_nothing():
    one_false = "Ben thinks the apple is in the blue_box. "
    padded = one_false + "The apple is in the blue_box. " * 50
    score, counts = _score(padded)
    assert counts["checkable"] == 2 and score == 0.0  # (1 true − 1 false) / 2


def test_contradiction_penalty():
    text = "Ben thinks the apple is in the red_box. Ben thinks that Anna thinks the apple is in the blue_box. The apple is in the blue_box."
    assert _score(text)[0] == pytest.approx((2 - 1) / 3)
    assert _score(text, contradiction_penalty=2.0)[0] == pytest.approx((2 - 2) / 3)
    assert _score(text, contradiction_penalty=0.0)[0] == pytest.approx(2 / 3)


def test_reasoning_text_is_the_think_block():
    assert reasoning_text("Ben thinks X.</think><answer>the apple is in the blue_box</answer>").strip() == "Ben thinks X."
    assert reasoning_text("Ben thinks X. <answer>y</answer>", prefill="").strip() == "Ben thinks X."
    assert reasoning_text("<think>own</think><answer>y</answer>").strip() == "own"


def test_world_from_events_matches_the_story_text():
    events = [Enter(("Anna", "Ben"), "kitchen"), ObjectLocation("apple", "red_box"), Exit("Ben", "kitchen"), Move("Anna", "apple", "blue_box")]
    world = world_from_events(events)
    assert world.agents == ("Anna", "Ben") and world.objects == ("apple",)
    assert set(world.containers) == {"red_box", "blue_box"}
    assert world.held_beliefs(("Ben",), "apple") == (("red_box",), "red_box")
    assert world_from_story(SALLY_ANNE, "hitom").held_beliefs(("Anna", "Ben"), "apple") == (("red_box",), "red_box")


def test_reward_columns_and_not_applicable_rows():
    reward = make_reward("fidelity")
    completions = ["Ben thinks the apple is in the red_box.</think><answer>red_box</answer>"] * 3
    scores = reward(
        None,
        completions,
        answer=["red_box"] * 3,
        story=[SALLY_ANNE, SALLY_ANNE, "not a story at all"],
        source=["tomrl-hitom", "opentom", "hitom"],
        meta=[{"semantics": "joint"}, {}, {}],
    )
    assert scores == [1.0, None, None]
    details = reward.details(None, completions[:1], story=[SALLY_ANNE], source=["hitom"])
    assert details[0].components["checkable"] == 1 and details[0].correct
    with pytest.raises(ValueError, match="needs the dataset column 'story'"):
        reward(None, completions, source=["hitom"] * 3)
    with pytest.raises(ConfigError, match="timing"):
        make_reward("fidelity", timing="sometimes")
    with pytest.raises(ConfigError, match="key 'contradiction_penalty': Input should be greater than or equal to 0"):
        make_reward("fidelity", contradiction_penalty=-1.0)
    with pytest.raises(ConfigError, match="unknown key 'timng'"):
        make_reward("fidelity", timng="final")


# ----------------------------------------------------------------------------- generated stories

_LINKS = ["{agent} thinks ", "{agent} believes that ", "{agent} thinks that ", "according to {agent}, "]
_CORES = ["the {obj} is in the {container}", "the {obj} is still in the {container}", "the {obj} is in the {spaced}"]


def _sentence(chain, obj, container, rng):
    text = rng.choice(_CORES).format(obj=obj, container=container, spaced=container.replace("_", " "))
    for agent in reversed(chain):
        text = rng.choice(_LINKS).format(agent=agent) + text
    return text[0].upper() + text[1:] + "."


def _traces(example, rng, timing):
    """A faithful reasoning trace and a corrupted copy: every container swapped for one the chain
    never believed (timing "any") or does not believe at the end (timing "final")."""
    style = "hitom" if example.source.endswith("hitom") else "tomi"
    world = world_from_story(example.story, style, example.meta.get("semantics", "joint"))
    query = example.meta["query"]
    chain, obj = tuple(query["chain"]), query["object"]
    chains = {chain[:k] for k in range(len(chain) + 1)} | {(agent,) for agent in world.agents}
    good, bad = [], []
    for sub_chain in sorted(chains, key=len):
        held, final = world.held_beliefs(sub_chain, obj)
        never = [c for c in world.containers if (c not in held if timing == "any" else c != final)]
        if final is None or not never:
            continue
        good.append(_sentence(sub_chain, obj, final, rng))
        bad.append(_sentence(sub_chain, obj, rng.choice(never), rng))
    return " ".join(good), " ".join(bad), len(good)


@pytest.mark.parametrize("benchmark, timing", [("hitom", "any"), ("hitom", "final"), ("tomi", "any"), ("tomi", "final")])
def test_fidelity_separates_correct_from_corrupted_traces(benchmark, timing):
    examples = generate(GenerateConfig(benchmark=benchmark, n=100, seed=7))
    rng = random.Random(0)
    reward = make_reward("fidelity", timing=timing)
    good_scores, bad_scores, half_scores = [], [], []
    for example in examples:
        good, bad, count = _traces(example, rng, timing)
        if count == 0:
            continue
        columns = {"story": [example.story] * 3, "source": [example.source] * 3, "meta": [example.meta] * 3}
        half = " ".join(good.split(". ")[: count // 2] + bad.split(". ")[count // 2 :])
        results = reward.details(None, [good + "</think><answer>x</answer>", bad + "</think>", half], **columns)
        assert results[0].components["checkable"] == count, results[0].reason
        good_scores.append(results[0].score)
        bad_scores.append(results[1].score)
        if count >= 2:
            half_scores.append(results[2].score)
    assert len(good_scores) >= 30 and len(half_scores) >= 10
    assert min(good_scores) == 1.0 and max(bad_scores) == -1.0
    assert min(good_scores) > statistics.mean(half_scores) > max(bad_scores)


def test_copying_an_official_hitom_story_is_all_true(shared_data):
    """On the released Hi-ToM texts (claims and tells included) the story's own statements all check
    out, and its public claims and private tells, which may be lies, are never judged. Judged statement by
    statement (consistency off): a copied story states the object's place once per chapter, and with
    consistency those places of one object are judged at the end of the story, so all but the last are false."""
    path = shared_data / "hitom" / "hitom_data.jsonl"
    if not path.exists():
        pytest.skip(f"{path} not found")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()[:600:12]]
    for row in rows:
        report = check_reasoning(row["story"], row["story"], "hitom", consistency=False)
        assert report.checkable >= 1 and report.false == 0 and report.score == 1.0, row["sample_id"]


@pytest.mark.timeout(60)
def test_megabyte_reasoning_finishes():
    for text in ("Ben thinks " * 100_000 + "the apple is in the red_box", "the apple is in the red_box. " * 40_000, "Anna " * 200_000):
        report = check_reasoning(text, SALLY_ANNE, "hitom")
        assert report.checkable <= 1 and report.score in (0.0, 1.0)
