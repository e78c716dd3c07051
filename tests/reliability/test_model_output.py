"""Bad model output: every reward and every scorer returns a value for any completion and never raises.

Completions tried: empty, whitespace, None, 1 MB of text / tags / one huge answer, control
characters, ANSI escapes, lone surrogates, right-to-left overrides, a phrase repeated up to the
token limit (4,096 tokens of the embedded tokenizer), the four tags in all 24 orders, nested, doubled,
unclosed and misspelled tags, and TRL's conversational form. Each goes through the four rewards
(with and without a prefill), :func:`tomrl.rewards.answer.check_answer` under every scheme, the
evaluation scorer (:func:`tomrl.evaluation.runner.score`), the training validator's scorer
(:func:`tomrl.training.validation.score_completions`) and ``tomrl reward score``.
"""

from __future__ import annotations

import itertools
import json
import math
import time

import pytest

from tomrl.rewards.answer import SCHEMES, check_answer
from tomrl.rewards.functions import REWARDS, make_reward

GOLD = "green_drawer"
TAGS = ["<think>", "</think>", "<answer>", "</answer>"]
MEGABYTE = 1_000_000
# Scores each reward can give; anything else is a bug in the reward's arithmetic.
POSSIBLE = {"strict": {3.0, -1.0, -3.0}, "paper": {3.0, -1.0, -3.0}, "paper_b": {0.0, 0.1, 1.0, 1.1}}
SECONDS_PER_CALL = 10.0  # generous on a loaded 2-core machine; catastrophic regex backtracking takes hours


def _repeated_to_tokens(phrase: str, tokens: int) -> str:
    from transformers import AutoTokenizer

    from tomrl.models import embedded_tokenizer_dir

    tokenizer = AutoTokenizer.from_pretrained(str(embedded_tokenizer_dir()))
    ids = tokenizer(phrase, add_special_tokens=False)["input_ids"]
    return tokenizer.decode((ids * (tokens // len(ids) + 1))[:tokens])


def nasty_completions() -> dict[str, object]:
    cases: dict[str, object] = {
        "empty": "",
        "whitespace": " \n\t ",
        "none": None,
        "1 MB of letters": "a" * MEGABYTE,
        "1 MB of answer tags": "<answer>" * (MEGABYTE // 8),
        "1 MB of closing tags": "</think></answer>" * (MEGABYTE // 17),
        "1 MB inside one answer": "r</think><answer>" + "green drawer " * (MEGABYTE // 13) + "</answer>",
        "1 MB of belief statements": "Anna thinks the apple is in the green_drawer. " * (MEGABYTE // 46) + "</think><answer>x</answer>",
        "1 MB of unclosed angle brackets": "<" * MEGABYTE,
        "control characters": "".join(map(chr, range(32))) + "\x7f r</think><answer>\x00green_drawer\x07</answer>",
        "ANSI escapes": "\x1b[31mred\x1b[0m</think><answer>\x1b[1mgreen_drawer</answer>",
        "lone surrogates": "\ud800 r</think><answer>\udfff</answer>",
        "bidi override and zero width": "r\u202e</think><answer>green\u200b_drawer</answer>\u2066",
        "NUL-only answer": "r</think><answer>\x00</answer>",
        "doubled tags": "r</think></think><answer>green_drawer</answer><answer>green_drawer</answer>",
        "nested answer": "r</think><answer><answer>green_drawer</answer></answer>",
        "unclosed answer": "r</think><answer>green_drawer",
        "own think tag": "<think> r</think><answer>green_drawer</answer>",
        "upper-case tags": "r</THINK><ANSWER>green_drawer</ANSWER>",
        "spaced tags": "r</ think>< answer >green_drawer</ answer >",
        "answer before think": "<answer>green_drawer</answer> r</think>",
        "conversational": [{"role": "assistant", "content": "r</think><answer>green_drawer</answer>"}],
        "conversational with None content": [{"role": "assistant", "content": None}],
        "conversational parts": [{"role": "assistant", "content": [{"type": "text", "text": "r</think>"}, "<answer>x</answer>"]}],
    }
    for order in itertools.permutations(TAGS):
        cases["tags " + "".join(order)] = "".join(tag + ("green_drawer" if tag == "<answer>" else " r ") for tag in order)
    return cases


CASES = nasty_completions()


@pytest.fixture(scope="module")
def repetition_cases() -> dict[str, str]:
    """Endless repetition, as a sampling loop writes it, cut at the token budget."""
    return {
        "repeated reasoning, 4096 tokens": _repeated_to_tokens(" Anna thinks the apple is in the green_drawer.", 4096),
        "repeated answer tag, 4096 tokens": _repeated_to_tokens("<answer>green_drawer</answer>", 4096),
        "repeated think tag, 2048 tokens": _repeated_to_tokens("<think>", 2048),
    }


@pytest.fixture(scope="module")
def story(generated_examples):
    hitom, _ = generated_examples
    return hitom[0]


def _all_cases(repetition_cases):
    return {**CASES, **repetition_cases}


def _timed(call):
    started = time.perf_counter()
    value = call()
    return value, time.perf_counter() - started


@pytest.mark.parametrize("prefill", ["<think>", ""])
@pytest.mark.parametrize("reward_name", list(REWARDS))
def test_every_reward_scores_every_nasty_completion(reward_name, prefill, repetition_cases, story):
    reward = make_reward(reward_name, prefill=prefill)
    columns = {"answer": story.answer, "story": story.story, "source": story.source, "meta": story.meta}
    for name, completion in _all_cases(repetition_cases).items():
        result, seconds = _timed(lambda: reward.score(completion, **columns))
        assert seconds < SECONDS_PER_CALL, f"{reward_name} on {name!r}: {seconds:.1f} s"
        if reward_name == "fidelity":
            assert result.score is not None and -1.0 <= result.score <= 1.0, (name, result)
        else:
            assert result.score in POSSIBLE[reward_name], (name, result)
            if not result.format_ok:
                assert not (reward_name != "paper_b" and result.score > 0), (name, result)
        assert isinstance(result.reason, str)
        json.dumps(result.to_dict())  # loggable as it is


@pytest.mark.parametrize("reward_name", list(REWARDS))
def test_trl_call_returns_one_finite_score_per_completion(reward_name, repetition_cases, story):
    """TRL calls rewards with a batch and its dataset columns; a batch of only bad outputs still scores."""
    completions = list(_all_cases(repetition_cases).values())
    n = len(completions)
    scores = make_reward(reward_name)(
        prompts=["p"] * n, completions=completions, answer=[story.answer] * n, story=[story.story] * n, source=[story.source] * n
    )
    assert len(scores) == n and all(isinstance(s, float) and math.isfinite(s) for s in scores)


def test_check_answer_under_every_scheme(repetition_cases):
    for name, completion in _all_cases(repetition_cases).items():
        if not isinstance(completion, str):
            continue
        for scheme in SCHEMES:
            for prefill in ("<think>", ""):
                check, seconds = _timed(lambda: check_answer(completion, GOLD, scheme, prefill=prefill))
                assert seconds < SECONDS_PER_CALL, (name, scheme, seconds)
                assert isinstance(check.correct, bool) and isinstance(check.format_ok, bool), (name, scheme)
                if scheme in ("strict", "paper", "paper_b") and check.correct:
                    assert check.extracted is not None, (name, scheme)


def test_a_megabyte_of_junk_is_never_correct():
    for completion in ("a" * MEGABYTE, "<answer>" * (MEGABYTE // 8), "<" * MEGABYTE, "</think></answer>" * (MEGABYTE // 17)):
        for scheme in SCHEMES:
            assert not check_answer(completion, GOLD, scheme).correct, scheme


def test_evaluation_scorer(repetition_cases):
    from tomrl.evaluation.runner import score

    for name, completion in _all_cases(repetition_cases).items():
        if not isinstance(completion, str):
            continue
        row = score(completion, GOLD, "<think>")
        assert {"correct", "format_ok", "paper_correct", "paper_format_ok"} <= set(row), name
        assert all(isinstance(row[k], bool) for k in ("correct", "format_ok", "paper_correct", "paper_format_ok")), name
        json.dumps(row)


def test_training_validation_scorer(repetition_cases, story):
    from tomrl.training.validation import score_completions

    texts = [c for c in _all_cases(repetition_cases).values() if isinstance(c, str)]
    examples = [story] * len(texts)
    for scheme in ("strict", "paper", "paper_eval", "paper_b"):
        result = score_completions(examples, [(t, 4096) for t in texts], scheme, "<think>")
        assert result.accuracy.n == len(texts) and 0.0 <= result.format_rate <= 1.0


def test_reward_score_command_on_every_nasty_completion(tmp_path, repetition_cases, story, capsys):
    from tomrl.cli import main

    rows = [
        {"completion": completion, "answer": story.answer, "story": story.story, "source": story.source, "case": name}
        for name, completion in _all_cases(repetition_cases).items()
        if completion is not None
    ]
    path = tmp_path / "completions.jsonl"
    # ensure_ascii: lone surrogates travel as JSON escapes, the way a JSON writer stores them.
    path.write_text("".join(json.dumps(r, ensure_ascii=True) + "\n" for r in rows), encoding="utf-8")
    for reward in REWARDS:
        out = tmp_path / f"{reward}.jsonl"
        assert main(["reward", "score", "--reward", reward, "--input", str(path), "--out", str(out)]) == 0, capsys.readouterr().err
        scored = [json.loads(line) for line in out.read_text().splitlines()]
        assert [r["case"] for r in scored] == [r["case"] for r in rows]
        assert all(r["score"] is not None for r in scored)
