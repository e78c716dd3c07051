"""The shared extractor and matcher: normalisers by hand, Paper A's regexes reproduced, any input."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tomrl.rewards.answer import (
    SCHEMES,
    answer_kind,
    answers_match,
    check_answer,
    extract_answer,
    last_answer_tag,
    last_boxed,
    normalize,
    paper_format_ok,
    paper_suffix_match,
    parse_number,
)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Green_Drawer", "green drawer"),
        ("  The  red_box. ", "red box"),
        ("the the box", "the box"),  # one leading "the" only
        ("theatre", "theatre"),
        ("Anna's \"box\"!?", "annas box"),
        ("a;b:c,d", "abcd"),
        ("green\n\t drawer", "green drawer"),
        ("", ""),
        ("...", ""),
    ],
)
def test_strict_normalisation(text, expected):
    assert normalize(text, "strict") == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Green_Drawer", "green drawer"),
        ("  The  red_box. ", "the red box"),  # Paper A keeps "the"
        ("green_ drawer", "green  drawer"),  # underscores become spaces after the whitespace collapse
        ("box .", "box "),  # punctuation removed after the strip
        ("Anna's \"box\"", "anna's \"box\""),  # quotes and apostrophes kept
    ],
)
def test_paper_normalisation_keeps_its_order(text, expected):
    assert normalize(text, "paper") == expected


def _official_normalize(answer: str) -> str:
    # Paper A's normalize_answer (ToM-RL eval_tom/reasoning_model_eval.py), re-typed for the comparison.
    normalized = answer.lower()
    normalized = re.sub(r"\s+", " ", normalized).strip()
    normalized = re.sub(r"[.,;:!?]", "", normalized)
    return re.sub(r"_", " ", normalized)


def _official_correct(predicted: str | None, ground_truth: str) -> bool:
    if not predicted:
        return False
    norm_pred, norm_truth = _official_normalize(predicted), _official_normalize(ground_truth)
    if norm_pred == norm_truth:
        return True
    return re.match(r".*?" + re.escape(norm_truth) + r"\s*\b$", norm_pred) is not None


def _official_extract(text: str) -> str | None:
    matches = list(re.finditer(r"<answer>(.*?)</answer>", text, re.DOTALL))
    return matches[-1].group(1).strip() if matches else None


_ANSWERISH = st.lists(st.sampled_from(list("abx _.,;:!?'\"\n\t\u00a0é") + ["box", "the ", "toolbox"]), max_size=10).map("".join)


@settings(max_examples=400, deadline=None)
@given(predicted=_ANSWERISH, gold=_ANSWERISH)
def test_paper_matcher_equals_the_released_regex(predicted, gold):
    assert answers_match(predicted, gold, "paper") == _official_correct(predicted.strip(), gold)
    assert normalize(predicted, "paper") == _official_normalize(predicted)


@settings(max_examples=400, deadline=None)
@given(
    text=st.lists(st.sampled_from(["<answer>", "</answer>", "box", " ", "\n", "<think>", "</think>", "x"]), max_size=14).map("".join)
)
def test_last_answer_tag_equals_the_released_regex(text):
    assert last_answer_tag(text) == _official_extract(text)


@settings(max_examples=200, deadline=None)
@given(pred=st.text(max_size=20), gold=st.text(max_size=8))
def test_suffix_match_equals_the_regex_on_normalised_text(pred, gold):
    norm_pred, norm_gold = _official_normalize(pred), _official_normalize(gold)
    regex = re.match(r".*?" + re.escape(norm_gold) + r"\s*\b$", norm_pred) is not None
    assert paper_suffix_match(norm_pred, norm_gold) == regex


def test_paper_format_counts_the_prefill():
    assert paper_format_ok("r</think><answer>x</answer>")[0]
    assert not paper_format_ok("<think>r</think><answer>x</answer>")[0]
    assert paper_format_ok("<think>r</think><answer>x</answer>", prefill="")[0]
    ok, reason = paper_format_ok("<answer>x</answer>r</think>")
    assert not ok and "order" in reason


def test_extraction_per_scheme():
    completion = "r</think><answer>a</answer> then <answer>b</answer>"
    assert extract_answer(completion, "strict") is None  # malformed: strict reads nothing
    assert extract_answer(completion, "paper") == "b"
    assert extract_answer(completion, "paper_eval") == "b"
    assert extract_answer("r</think><answer> a </answer>", "strict") == "a"


def test_text_after_the_answer_fails_strict_and_paper_eval_reads_the_last_tag():
    # What generation to EOS (the papers' setting, stop_at_answer off) can produce: the model answers,
    # goes on, and answers again. Strict fails the format; Paper A's evaluation scores the last tag.
    completion = "r</think><answer>basket</answer> Wait, the box. <answer>box</answer>"
    strict = check_answer(completion, "box", scheme="strict")
    assert not strict.format_ok and not strict.correct and strict.extracted is None and "<answer> appears 2 times" in strict.reason
    trailing = check_answer("r</think><answer>box</answer> I hope that helps.", "box", scheme="strict")
    assert not trailing.format_ok and not trailing.correct and "text after </answer>" in trailing.reason
    assert check_answer("r</think><answer>box</answer> I hope that helps.", "box", scheme="paper_eval").correct
    paper_eval = check_answer(completion, "box", scheme="paper_eval")
    assert paper_eval.format_ok and paper_eval.extracted == "box" and paper_eval.correct
    # Truncated at the first </answer> (the speed option), the same model is well formed and wrong.
    truncated = check_answer("r</think><answer>basket</answer>", "box", scheme="strict")
    assert truncated.format_ok and truncated.extracted == "basket" and not truncated.correct


def test_unknown_scheme_is_an_error():
    with pytest.raises(ValueError, match="unknown answer scheme"):
        check_answer("x", "y", scheme="lenient")  # type: ignore[arg-type]


def test_reasons_say_what_went_wrong():
    assert "text after </answer>" in check_answer("r</think><answer>box</answer>!", "box").reason
    assert "prefill" in check_answer("<think>r</think><answer>box</answer>", "box").reason
    assert "empty answer" in check_answer("r</think><answer> </answer>", "box").reason
    assert "wrong" in check_answer("r</think><answer>basket</answer>", "box").reason


_ANY_TEXT = st.text(alphabet=st.characters(blacklist_categories=()), max_size=300)
_TAGGY_TEXT = st.lists(
    st.one_of(st.sampled_from(["<think>", "</think>", "<answer>", "</answer>", "< answer >", "<Answer>", "box", "\x00", "\ud800"]), st.text(max_size=5)),
    max_size=20,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(completion=st.one_of(_ANY_TEXT, _TAGGY_TEXT), gold=st.text(max_size=30), prefill=st.sampled_from(["<think>", "", "x"]))
def test_checking_never_raises(completion, gold, prefill):
    for scheme in SCHEMES:
        check = check_answer(completion, gold, scheme, prefill=prefill)
        assert isinstance(check.format_ok, bool) and isinstance(check.correct, bool)
        if check.correct:
            assert check.extracted is not None


@pytest.mark.timeout(60)
def test_megabyte_and_adversarial_inputs_finish():
    """Inputs that make the naive regexes quadratic (hours) are handled in linear time."""
    unclosed = "</answer>" + "<answer>" * 120_000  # the released extractor rescans to the end from each
    spaces = "<" + " " * 500_000 + "x"  # a tag pattern with ambiguous \s* runs
    long_answer = "r</think><answer>" + "box " * 250_000 + "</answer>"
    for completion in (unclosed, spaces, long_answer, "\x00" * 1_000_000):
        for scheme in SCHEMES:
            check_answer(completion, "box " * 50_000, scheme)


# --------------------------------------------------------------------------- answer kinds: sets (FANToM lists), numbers (GSM8K)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize(
    "answer, correct",
    [
        ("Alice, Bob", True),
        ("Bob, Alice", True),  # the order of the names does not matter
        ("Bob and Alice", True),
        ("bob; alice.", True),
        ("Alice", False),  # an aware character left out
        ("Alice, Bob, Carol", False),  # an unaware character included
        ("none", False),
    ],
)
def test_list_questions_are_scored_as_sets_under_every_scheme(scheme, answer, correct):
    completion = f"reasoning</think><answer>{answer}</answer>"
    # Carol is the unaware character: paper_eval (FANToM's evaluate_list_q) fails an answer naming her only
    # when told so; the set schemes fail it as a name outside the gold (tests/rewards/test_fantom_official_rule.py).
    check = check_answer(completion, "Alice, Bob", scheme, question_type="answerability:list", unaware=["Carol"])
    assert check.format_ok and check.correct is correct
    # Without the question type the same answers are text: only the gold's own order is right.
    assert check_answer(completion, "Alice, Bob", scheme).correct is (answer in ("Alice, Bob",) or (scheme.startswith("paper") and answer == "Alice, Bob"))


def test_an_empty_list_is_none_and_reasons_name_the_difference():
    assert check_answer("x</think><answer>Nobody</answer>", "none", question_type="info_accessibility:list").correct
    wrong = check_answer("x</think><answer>Carol, Alice</answer>", "Alice, Bob", question_type="answerability:list")
    assert not wrong.correct and "missing bob" in wrong.reason and "carol" in wrong.reason
    assert answer_kind("answerability:list") == "set" and answer_kind("math") == "number" and answer_kind("first_order") == "text"


def test_the_training_reward_scores_list_questions_as_evaluation_does():
    from tomrl.evaluation.runner import score
    from tomrl.rewards.functions import make_reward

    completions = ["x</think><answer>Bob, Alice</answer>", "x</think><answer>Alice</answer>"]
    rewards = make_reward("strict")(None, completions, answer=["Alice, Bob"] * 2, question_type=["answerability:list"] * 2)
    assert rewards == [3.0, -1.0]
    assert [score(c, "Alice, Bob", "<think>", ("strict",), "answerability:list")["correct"] for c in completions] == [True, False]


@pytest.mark.parametrize(
    "completion, strict, lenient",
    [
        ("1000 + 24 = 1024, so the answer is \\boxed{1024}.", True, True),
        ("Total: \\boxed{\\$1,024.00}", True, True),  # currency, thousands separator, decimals
        ("\\boxed{\\frac{2048}{2}}", True, True),
        ("<answer>1024 apples</answer>", True, True),  # tomrl's gsm8k prompt asks for the answer tag
        ("first \\boxed{5}, then I recounted: \\boxed{1024}", True, True),  # the last box counts
        ("the answer is 1024", False, True),  # no box, no tag: only the lenient pipeline reads the last number
        ("\\boxed{1023}", False, False),
        ("\\boxed{10 or 1024}", False, True),  # two numbers: strict refuses to pick one
        ("no number at all", False, False),
    ],
)
def test_math_answers_are_read_from_boxed_and_compared_as_numbers(completion, strict, lenient):
    assert check_answer(completion, "1024", "strict", prefill="", question_type="math").correct is strict
    assert check_answer(completion, "1024", "paper_eval", prefill="", question_type="math").correct is lenient


def test_boxed_extraction_is_balanced_and_linear():
    assert last_boxed("a \\boxed{\\frac{3}{4}} b") == "\\frac{3}{4}" and parse_number("\\frac{3}{4}") == 0.75
    assert last_boxed("\\boxed{1} and \\boxed{2") == "1"  # an unclosed box does not count
    assert last_boxed("no box") is None
    started = time.perf_counter()
    assert last_boxed("\\boxed{" * 200_000) is None
    assert check_answer("\\boxed{" * 200_000, "1", "paper_eval", prefill="", question_type="math").correct is False
    assert time.perf_counter() - started < 5
