"""The shared extractor and matcher: normalisers by hand, Paper A's regexes reproduced, any input."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tomrl.rewards.answer import (
    SCHEMES,
    answers_match,
    check_answer,
    extract_answer,
    last_answer_tag,
    normalize,
    paper_format_ok,
    paper_suffix_match,
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
