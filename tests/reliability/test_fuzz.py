"""Seeded fuzzing (hypothesis) of the three places user input enters: the example schema, config
overrides and reward inputs.

The promise under test: whatever arrives, the outcome is a value or tomrl's own error
(``BadInputError`` / ``ConfigError``, which the CLI prints as one line), never another exception, and
a config that loads holds only finite numbers. ``derandomize=True`` makes every run draw the same
cases (the seed is the test's name); the example counts keep the whole file near 30 s on a busy
2-core machine, within the minute the default run allows.
"""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tomrl.config import ConfigError, describe, load_config
from tomrl.evaluation.config import EvalConfig
from tomrl.generators.config import GenerateConfig
from tomrl.io import BadInputError, scan_jsonl
from tomrl.rewards.answer import check_answer
from tomrl.rewards.functions import make_reward
from tomrl.schema import FIELD_NAMES, example_from_dict
from tomrl.training.config import TrainConfig

FUZZ = settings(derandomize=True, database=None, deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow])

json_leaf = st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | st.floats() | st.text(max_size=40)
json_value = st.recursive(json_leaf, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)

VALID_ROW = {
    "id": "x-1", "source": "tomrl-hitom", "split": "test", "story": "1 Anna entered the hall.", "question": "Where is the apple?",
    "answer": "box", "order": 0, "question_type": "reality", "deception": False, "story_length": 1, "story_id": "s1",
    "choices": None, "meta": {},
}


@FUZZ
@given(changes=st.dictionaries(st.sampled_from([*FIELD_NAMES, "extra"]), json_value, max_size=4), dropped=st.sets(st.sampled_from(FIELD_NAMES), max_size=2))
def test_the_example_schema_accepts_or_names_the_field(changes, dropped):
    row = {k: v for k, v in {**VALID_ROW, **changes}.items() if k not in dropped}
    try:
        example = example_from_dict(row, "fuzz:1")
    except BadInputError as err:
        assert str(err).startswith("fuzz:1: field '"), err
        return
    assert isinstance(example.story, str) and example.story.strip()
    assert example.order is None or (isinstance(example.order, int) and example.order >= 0)


@FUZZ
@given(lines=st.lists(st.binary(max_size=60) | json_value.map(lambda v: json.dumps(v).encode()), max_size=6))
def test_jsonl_reading_yields_a_row_or_a_located_error_per_line(tmp_path_factory, lines):
    path = tmp_path_factory.mktemp("fuzz") / "f.jsonl"
    path.write_bytes(b"\n".join(line.replace(b"\n", b" ") for line in lines))
    for index, obj, error in scan_jsonl(path):
        assert (obj is None) != (error is None)
        assert error is None or error.startswith(f"{path}:{index}: ")


def _keys(cls) -> list[str]:
    return [key for key, *_ in describe(cls)]


override_value = st.sampled_from(["nan", ".inf", "-.inf", "-1", "0", "1e400", "99999999999", "[]", "{}", "null", "''", "true", "x", "[1, 2]",
                                  "{a: 1}", "{a: 1, a: 2}", "0.5", "-0.0", "1e-300", "[nan]"]) | st.text(max_size=12)


@pytest.mark.parametrize("cls", [TrainConfig, EvalConfig, GenerateConfig], ids=lambda c: c.__name__)
def test_config_overrides_load_or_fail_with_a_config_error(cls):
    keys = _keys(cls)

    @FUZZ
    @given(items=st.lists(st.tuples(st.sampled_from(keys) | st.text(max_size=10), override_value), min_size=1, max_size=3))
    def check(items):
        overrides = [f"{key}={value}" for key, value in items]
        try:
            cfg = load_config(cls, None, overrides)
        except ConfigError:
            return
        _assert_finite(cfg)

    check()


def _assert_finite(value) -> None:
    import dataclasses

    if dataclasses.is_dataclass(value):
        for f in dataclasses.fields(value):
            _assert_finite(getattr(value, f.name))
    elif isinstance(value, (list, tuple)):
        for item in value:
            _assert_finite(item)
    elif isinstance(value, float):
        assert math.isfinite(value), value


completion_text = st.text(max_size=200) | st.lists(
    st.sampled_from(["<think>", "</think>", "<answer>", "</answer>", "box", " ", "\n", "A thinks", "<", ">", "\x00", "\u202e"]), max_size=30
).map("".join)


@FUZZ
@given(completion=completion_text, gold=st.text(min_size=1, max_size=20), prefill=st.sampled_from(["", "<think>"]))
def test_rewards_score_any_completion(completion, gold, prefill):
    for scheme in ("strict", "paper", "paper_eval", "paper_b"):
        check = check_answer(completion, gold, scheme=scheme, prefill=prefill)
        assert isinstance(check.correct, bool) and isinstance(check.format_ok, bool)
    for name in ("strict", "paper", "paper_b"):
        scores = make_reward(name, prefill=prefill)(prompts=["p"], completions=[completion], answer=[gold])
        assert len(scores) == 1 and math.isfinite(scores[0])
