"""The reward casebook: every reward against its definition, case by case, hand-derived.

Each row: a completion (the text generated after the prompt), the gold answer, the prompt's
prefill, and what each reward must return as (score, format_ok, correct), plus whether Paper A's
evaluation script counts it correct. The expected values were worked out by hand from the
definitions in tomrl.rewards.answer, not by running the code.

strict / paper: format ±1, answer ±2 (format failure → −2): totals 3, −1, −3.
paper_b: 0.1 × format ok + 1.0 × correct: 0, 0.1, 1.0, 1.1.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tomrl.rewards.answer import check_answer
from tomrl.rewards.functions import make_reward

T, F = True, False
OK = (3.0, T, T)  # strict/paper: well formed and right
WRONG = (-1.0, T, F)  # well formed, wrong answer
BROKEN = (-3.0, F, F)  # format failure
B_BOTH, B_FORMAT, B_ANSWER, B_NONE = (1.1, T, T), (0.1, T, F), (1.0, F, T), (0.0, F, F)


@dataclass(frozen=True)
class Case:
    name: str
    completion: str
    gold: str
    strict: tuple
    paper: tuple
    paper_b: tuple
    paper_eval: bool
    prefill: str = "<think>"


CASES = [
    # --- well-formed, answers that are right under every definition
    Case("clean", "Anna left before the move.</think><answer>green_drawer</answer>", "green_drawer", OK, OK, B_BOTH, T),
    Case("space for underscore", "r</think><answer>green drawer</answer>", "green_drawer", OK, OK, B_BOTH, T),
    Case("case and final period", "r</think><answer>Green_Drawer.</answer>", "green_drawer", OK, OK, B_BOTH, T),
    Case("leading the", "r</think><answer>the green drawer</answer>", "green_drawer", OK, OK, B_BOTH, T),
    Case("whitespace around blocks", "r</think>\n\n<answer> box </answer>\n", "box", OK, OK, B_BOTH, T),
    Case("trailing whitespace only", "r</think><answer>box</answer>  \n\t", "box", OK, OK, B_BOTH, T),
    Case("period inside", "r</think><answer>box.</answer>", "box", OK, OK, B_BOTH, T),
    Case("unicode no-break space", "r</think><answer>green\u00a0drawer</answer>", "green_drawer", OK, OK, B_BOTH, T),
    Case("control characters in reasoning", "\x00\x07 r \x1b[31m</think><answer>box</answer>", "box", OK, OK, B_BOTH, T),
    Case("empty reasoning", "</think><answer>box</answer>", "box", OK, OK, B_BOTH, T),
    Case("multi-line reasoning", "Step 1: Anna saw it.\nStep 2: Ben left.\n</think>\n<answer>box</answer>", "box", OK, OK, B_BOTH, T),
    # --- where the definitions disagree: suffix match, hedges, superstrings
    Case("superstring toolbox", "r</think><answer>toolbox</answer>", "box", WRONG, OK, B_FORMAT, T),
    Case("plural boxes", "r</think><answer>boxes</answer>", "box", WRONG, WRONG, B_FORMAT, F),
    Case("red_box for box", "r</think><answer>red_box</answer>", "box", WRONG, OK, B_FORMAT, T),
    Case("gold longer than answer", "r</think><answer>box</answer>", "red_box", WRONG, WRONG, B_FORMAT, F),
    Case("part of gold", "r</think><answer>drawer</answer>", "green_drawer", WRONG, WRONG, B_FORMAT, F),
    Case("hedge X or gold", "r</think><answer>basket or box</answer>", "box", WRONG, OK, B_FORMAT, T),
    Case("hedge gold or Y", "r</think><answer>box or basket</answer>", "box", WRONG, WRONG, B_FORMAT, F),
    Case("hedge with slash", "r</think><answer>basket/box</answer>", "box", WRONG, OK, B_FORMAT, T),
    Case("full sentence", "r</think><answer>The apple is in the box.</answer>", "box", WRONG, OK, B_FORMAT, T),
    Case("in the gold", "r</think><answer>in the green_drawer</answer>", "green_drawer", WRONG, OK, B_FORMAT, T),
    Case("two leading the", "r</think><answer>the the box</answer>", "box", WRONG, OK, B_FORMAT, T),
    Case("quoted answer", 'r</think><answer>"box"</answer>', "box", OK, WRONG, B_BOTH, F),
    Case("newline in answer: Paper A's double space", "r</think><answer>\ngreen\n_drawer\n</answer>", "green_drawer", OK, WRONG, B_BOTH, F),
    Case("accented letter", "r</think><answer>b\u00f3x</answer>", "box", WRONG, WRONG, B_FORMAT, F),
    Case("wrong answer, right one only in reasoning", "It is the box.</think><answer>basket</answer>", "box", WRONG, WRONG, B_FORMAT, F),
    # --- reward hacking: several answers, answers outside the answer block, extra tags
    Case("two answer tags, last right", "r</think><answer>basket</answer><answer>box</answer>", "box", BROKEN, BROKEN, B_ANSWER, T),
    Case("two answer tags, first right", "r</think><answer>box</answer><answer>basket</answer>", "box", BROKEN, BROKEN, B_NONE, F),
    Case("nested answer tags", "r</think><answer><answer>box</answer></answer>", "box", BROKEN, BROKEN, B_NONE, T),
    Case("answer only in reasoning", "the answer is box</think>", "box", BROKEN, BROKEN, B_NONE, F),
    Case("answer block inside think", "<answer>box</answer></think>", "box", BROKEN, BROKEN, B_ANSWER, T),
    Case("answer before reasoning", "<answer>box</answer>r</think>", "box", BROKEN, BROKEN, B_ANSWER, T),
    Case("own <think> after the prefill", "<think>r</think><answer>box</answer>", "box", BROKEN, BROKEN, B_ANSWER, T),
    Case("two </think>", "a</think>b</think><answer>box</answer>", "box", BROKEN, BROKEN, B_ANSWER, T),
    Case("text after </answer>", "r</think><answer>box</answer> I hope this helps!", "box", BROKEN, OK, B_BOTH, T),
    Case("second guess after </answer>", "r</think><answer>box</answer> or maybe basket", "box", BROKEN, OK, B_BOTH, T),
    Case("text between </think> and <answer>", "r</think>So: <answer>box</answer>", "box", BROKEN, OK, B_BOTH, T),
    Case("self-closing think tag in reasoning", "a <think/> b</think><answer>box</answer>", "box", BROKEN, OK, B_BOTH, T),
    Case("upper-case answer tags", "r</think><ANSWER>box</ANSWER>", "box", BROKEN, BROKEN, B_NONE, F),
    Case("spaced answer tag", "r</think><answer >box</answer>", "box", BROKEN, BROKEN, B_NONE, F),
    # --- empty and missing answers
    Case("empty answer", "r</think><answer></answer>", "box", BROKEN, WRONG, B_FORMAT, F),
    Case("whitespace answer", "r</think><answer>   </answer>", "box", BROKEN, WRONG, B_FORMAT, F),
    Case("punctuation-only answer", "r</think><answer>.</answer>", "box", WRONG, WRONG, B_FORMAT, F),
    Case("missing </think>", "r <answer>box</answer>", "box", BROKEN, BROKEN, B_ANSWER, T),
    Case("unclosed answer", "r</think><answer>box", "box", BROKEN, BROKEN, B_NONE, F),
    Case("no tags at all", "box", "box", BROKEN, BROKEN, B_NONE, F),
    Case("empty completion", "", "box", BROKEN, BROKEN, B_NONE, F),
    Case("only the answer block", "<answer>box</answer>", "box", BROKEN, BROKEN, B_ANSWER, T),
    # --- prompts without a prefill (cot baseline): the think block is optional for strict
    Case("no prefill: bare reasoning", "Anna left, so box. <answer>box</answer>", "box", OK, BROKEN, B_ANSWER, T, prefill=""),
    Case("no prefill: full think block", "<think>r</think><answer>box</answer>", "box", OK, OK, B_BOTH, T, prefill=""),
    Case("no prefill: text before <think>", "Sure! <think>r</think><answer>box</answer>", "box", BROKEN, OK, B_BOTH, T, prefill=""),
    Case("no prefill: dangling </think>", "r</think><answer>box</answer>", "box", BROKEN, BROKEN, B_ANSWER, T, prefill=""),
]


def test_casebook_is_large_enough():
    assert len(CASES) >= 40
    assert len({case.name for case in CASES}) == len(CASES)


@pytest.mark.parametrize("reward", ["strict", "paper", "paper_b"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_reward_matches_definition(case: Case, reward: str):
    expected_score, expected_format, expected_correct = getattr(case, reward)
    result = make_reward(reward, prefill=case.prefill).score(case.completion, case.gold)
    assert result.score == pytest.approx(expected_score), result.reason
    assert result.format_ok is expected_format, result.reason
    assert result.correct is expected_correct, result.reason


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_paper_evaluation_matches_definition(case: Case):
    check = check_answer(case.completion, case.gold, "paper_eval", prefill=case.prefill)
    assert check.correct is case.paper_eval, check.reason


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_trl_call_agrees_with_the_casebook(case: Case):
    """The registry's callables (TRL's signature, conversational completions, the prefill as a
    dataset column) give the same scores."""
    completions = [case.completion, [{"role": "assistant", "content": case.completion}]]
    for name in ("strict", "paper", "paper_b"):
        scores = make_reward(name)(prompts=["p", "p"], completions=completions, answer=[case.gold] * 2, prefill=[case.prefill] * 2)
        assert scores == pytest.approx([getattr(case, name)[0]] * 2)


def test_every_total_is_a_paper_total():
    totals = {make_reward("paper", prefill=c.prefill).score(c.completion, c.gold).score for c in CASES}
    assert totals == {3.0, -1.0, -3.0}
    totals_b = {round(make_reward("paper_b", prefill=c.prefill).score(c.completion, c.gold).score, 6) for c in CASES}
    assert totals_b == {0.0, 0.1, 1.0, 1.1}
