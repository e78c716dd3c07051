"""Reward callables: TRL's calling convention, details for logging, the registry, any input."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tomrl.rewards.functions import REWARDS, RewardResult, make_reward, register_reward, score_one

GOOD = "Ben left before the move.</think><answer>red_box</answer>"
HEDGE = "r</think><answer>blue_box or red_box</answer>"


def test_registry_names():
    assert list(REWARDS) == ["strict", "paper", "paper_b", "fidelity"]
    for name in REWARDS:
        assert make_reward(name).__name__ == name  # TRL labels its reward columns by __name__
    with pytest.raises(ValueError, match="already registered"):
        register_reward("strict", REWARDS["strict"].make, help="a second strict")


def test_trl_signature_with_every_column_trl_passes():
    extra_logs: dict[str, list] = {}
    metrics: dict[str, list] = {}
    scores = make_reward("strict")(
        prompts=["p1", "p2"],
        completions=[GOOD, HEDGE],
        completion_ids=[[1, 2], [3]],
        answer=["red_box", "red_box"],
        story=["s", "s"],
        trainer_state=object(),
        log_extra=lambda column, values: extra_logs.setdefault(column, []).extend(values),
        log_metric=lambda name, value: metrics.setdefault(name, []).append(value),
    )
    assert scores == [3.0, -1.0]
    assert extra_logs == {
        "strict/format_ok": [True, True],
        "strict/correct": [True, False],
        "strict/extracted": ["red_box", "blue_box or red_box"],
    }
    assert metrics == {"strict/format_ok_rate": [1.0], "strict/correct_rate": [0.5]}


def test_conversational_completions():
    completions = [[{"role": "assistant", "content": GOOD}], [{"role": "assistant", "content": None}]]
    assert make_reward("paper")(prompts=None, completions=completions, answer=["red_box", "red_box"]) == [3.0, -3.0]


def test_details_carry_components_and_reasons():
    [result] = make_reward("paper_b").details(None, [HEDGE], answer=["red_box"])
    assert isinstance(result, RewardResult)
    assert result.components == {"format": 0.1, "correctness": 0.0}
    assert result.extracted == "blue_box or red_box" and result.format_ok and not result.correct
    assert "wrong" in result.reason
    assert result.to_dict()["score"] == pytest.approx(0.1)


def test_prefill_from_factory_and_from_a_column():
    cot = "Ben left. <answer>red_box</answer>"
    assert make_reward("strict", prefill="")(None, [cot], answer=["red_box"]) == [3.0]
    assert make_reward("strict")(None, [cot], answer=["red_box"]) == [-3.0]  # "<think>" prefill: </think> missing
    assert make_reward("strict")(None, [cot, cot], answer=["red_box"] * 2, prefill=["", "<think>"]) == [3.0, -3.0]


def test_missing_answer_column_is_a_clear_error():
    with pytest.raises(ValueError, match="needs the dataset column 'answer'"):
        make_reward("strict")(prompts=["p"], completions=[GOOD])
    with pytest.raises(ValueError, match="2 values for 1 completions"):
        make_reward("strict")(prompts=["p"], completions=[GOOD], answer=["a", "b"])


def test_score_one_and_unknown_names():
    assert score_one("paper", "r</think><answer>toolbox</answer>", "box").score == 3.0
    assert score_one("strict", "r</think><answer>toolbox</answer>", "box").score == -1.0
    with pytest.raises(ValueError, match="unknown reward 'lenient'; known: strict, paper, paper_b, fidelity"):
        score_one("lenient", GOOD, "red_box")
    with pytest.raises(ValueError, match="unknown reward"):
        make_reward("lenient")
    with pytest.raises(TypeError, match="takes no options"):
        make_reward("strict", timing="final")


def test_rewards_pickle():
    for name in REWARDS:
        copy = pickle.loads(pickle.dumps(make_reward(name, prefill="")))
        assert copy.__name__ == name and copy.prefill == ""
    assert pickle.loads(pickle.dumps(make_reward("strict")))(None, [GOOD], answer=["red_box"]) == [3.0]


STORY = "1 Anna and Ben entered the kitchen.\n2 The apple is in the red_box.\n3 Ben exited the kitchen.\n4 Anna moved the apple to the blue_box.\n"


@settings(max_examples=200, deadline=None)
@given(
    completion=st.one_of(
        st.text(max_size=400),
        st.lists(st.sampled_from(["<think>", "</think>", "<answer>", "</answer>", "Ben thinks ", "the apple is in the ", "red_box", "blue_box", ". ", "\x00"]), max_size=30).map("".join),
    ),
    answer=st.text(max_size=20),
)
def test_no_reward_raises_on_any_text(completion, answer):
    for name in REWARDS:
        [score] = make_reward(name)(None, [completion], answer=[answer], story=[STORY], source=["tomrl-hitom"])
        assert score is None or -3.0 <= score <= 3.0
