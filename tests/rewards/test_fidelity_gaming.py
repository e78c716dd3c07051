"""The fidelity reward cannot be gamed by stuffing the reasoning with belief statements.

For generated Hi-ToM questions of orders 0-4 (and ToMi questions) three stuffed traces are scored
against the faithful one, the oracle-written trace of :func:`tomrl.generators.traces.reasoning_trace`:

- **every guess**: every chain of the story's agents up to the question's order (reality included)
  puts the asked object in every container of the story;
- **every belief held**: every such chain puts it in every container it believed at some moment,
  in the order it believed them (under timing ``any`` each of these statements alone is true);
- **first place everywhere**: every chain puts it where it was at the start (no tracking at all).

None may score above the faithful trace, under either timing; with the default ``consistency``
the first two score below it wherever some chain changed its mind. Repeating statements earns
nothing, and an empty trace scores 0.
"""

from __future__ import annotations

import itertools
import json

import pytest

from tomrl.generators import generate
from tomrl.generators.config import GenerateConfig
from tomrl.generators.traces import belief_sentence, reasoning_trace
from tomrl.rewards.fidelity import MAX_STATEMENTS, world_from_story
from tomrl.rewards.functions import make_reward

STYLE = {"tomrl-hitom": "hitom", "tomrl-tomi": "tomi"}


def _questions(benchmark: str, n: int, seed: int):
    return generate(GenerateConfig(benchmark=benchmark, n=n, seed=seed))


def _chains(agents, order: int):
    return [chain for length in range(order + 1) for chain in itertools.permutations(agents, length)]


def stuffed_traces(example) -> dict[str, tuple[str, bool]]:
    """The stuffed traces of ``example``: name -> (text, whether one of its statements must be false at the end of
    the story: some chain believed several places; for "first place everywhere", some chain ends elsewhere)."""
    world = world_from_story(example.story, STYLE[example.source], example.meta.get("semantics", "joint"))
    query = example.meta["query"]
    obj, order = query["object"], len(query["chain"])
    guesses, held_all, first_all, changed, moved_on = [], [], [], False, False
    for chain in _chains(world.agents, order):
        held, final = world.held_beliefs(chain, obj)
        if not held:
            continue
        changed |= len(held) > 1
        moved_on |= held[0] != final
        guesses += [belief_sentence(chain, obj, container) for container in world.containers]
        held_all += [belief_sentence(chain, obj, container) for container in held]
        first_all.append(belief_sentence(chain, obj, held[0]))
    return {"every guess": (" ".join(guesses), True), "every belief held": (" ".join(held_all), changed),
            "first place everywhere": (" ".join(first_all), moved_on)}


def _score(reward, text: str, example) -> float | None:
    # meta as tomrl train's dataset rows carry it: JSON text
    result = reward.details(None, [text + "</think><answer>x</answer>"], story=[example.story], source=[example.source],
                            meta=[json.dumps(example.meta)])[0]
    return result.score


@pytest.mark.parametrize("timing", ["any", "final"])
@pytest.mark.parametrize("benchmark, n, seed", [("hitom", 50, 3), ("tomi", 30, 5)])
def test_stuffed_traces_never_beat_the_faithful_trace(benchmark, n, seed, timing):
    reward = make_reward("fidelity", timing=timing)
    examples = _questions(benchmark, n, seed)
    assert benchmark == "tomi" or {e.order for e in examples} == {0, 1, 2, 3, 4}
    below = {"every guess": 0, "every belief held": 0}
    for example in examples:
        faithful = _score(reward, reasoning_trace(example), example)
        assert faithful == 1.0, (example.id, reasoning_trace(example))
        for name, (text, changed) in stuffed_traces(example).items():
            score = _score(reward, text, example)
            assert score is not None and score <= faithful, (example.id, name, score)
            if name in below and changed:
                # one belief in several places: judged at the end, only one of them can be true
                assert score < faithful, (example.id, name, score)
                below[name] += 1
            if name == "first place everywhere" and timing == "final" and changed:
                assert score < faithful, (example.id, name, score)
    assert below["every guess"] >= n // 2 and below["every belief held"] >= n // 3, below


def test_without_consistency_listing_every_belief_ties_the_faithful_trace():
    """Why ``consistency`` is on by default: judged alone, each belief a chain ever held is true under timing any."""
    reward = make_reward("fidelity", consistency=False)
    ties = 0
    for example in _questions("hitom", 20, 3):
        text, changed = stuffed_traces(example)["every belief held"]
        if changed and len(text.split(". ")) <= MAX_STATEMENTS:
            ties += _score(reward, text, example) == 1.0
    assert ties >= 5


def test_repeating_statements_does_not_raise_the_score():
    reward, checked = make_reward("fidelity"), 0
    for example in _questions("hitom", 10, 4):
        faithful = reasoning_trace(example)
        guesses, _ = stuffed_traces(example)["every guess"]
        first = guesses.split(". ")[0] + "."
        for text in (faithful, guesses[:2000], first):
            once = _score(reward, text, example)
            assert _score(reward, " ".join([text] * 20), example) == once
        # Spamming one true statement after a false one changes nothing either.
        true_one = reasoning_trace(example).split(". ")[-1]
        wrong = next((s for s in guesses.split(". ") if _score(reward, s + ".", example) == -1.0), None)
        if wrong is None:  # the object was in every container at some moment: no guess is false alone
            continue
        checked += 1
        assert _score(reward, f"{wrong}. " + f"{true_one} " * 30, example) == _score(reward, f"{wrong}. {true_one}", example)
    assert checked >= 5


def test_empty_and_beliefless_traces_score_zero():
    reward = make_reward("fidelity")
    example = _questions("hitom", 2, 4)[0]
    for text in ("", " ", "Let me think about this story step by step.", "Nobody knows."):
        assert _score(reward, text, example) == 0.0
