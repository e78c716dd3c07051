"""Generated Hi-ToM / ToMi examples: deterministic, balanced, schema-valid, labels re-derivable from the text."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tomrl.config import ConfigError, load_config
from tomrl.generators import generate
from tomrl.generators.config import GenerateConfig
from tomrl.generators.hitom import build_story, chapter_sizes
from tomrl.generators.verify import verify_examples
from tomrl.schema import validate_example, write_examples
from tomrl.world.oracle import BeliefOracle
from tomrl.world.parsers import parse_question, parse_story
from tomrl.world.world import Enter, Move, ObjectLocation


def _bytes(tmp_path: Path, name: str, cfg: GenerateConfig) -> bytes:
    path = tmp_path / name
    write_examples(path, generate(cfg))
    return path.read_bytes()


def test_same_seed_same_bytes_other_seed_other_data(tmp_path):
    cfg = GenerateConfig(n=60, seed=7, split_fractions={"train": 0.5, "test": 0.5})
    assert _bytes(tmp_path, "a.jsonl", cfg) == _bytes(tmp_path, "b.jsonl", cfg)
    assert _bytes(tmp_path, "c.jsonl", cfg) != _bytes(tmp_path, "d.jsonl", GenerateConfig(n=60, seed=8, split_fractions={"train": 0.5, "test": 0.5}))
    tomi = GenerateConfig(benchmark="tomi", n=36, stories=6, seed=7)
    assert _bytes(tmp_path, "e.jsonl", tomi) == _bytes(tmp_path, "f.jsonl", tomi)


def test_same_bytes_across_processes_and_hash_seeds(tmp_path):
    outputs = []
    for hash_seed in ("1", "2"):
        out = tmp_path / f"hash{hash_seed}.jsonl"
        env = dict(os.environ, PYTHONHASHSEED=hash_seed)
        command = [sys.executable, "-m", "tomrl", "data", "generate", "hitom", "--n", "25", "--seed", "3", "--out", str(out), "--split-fractions", "train=0.6,test=0.4"]
        subprocess.run(command, check=True, env=env, capture_output=True)
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]


@pytest.mark.parametrize("benchmark", ["hitom", "tomi"])
def test_every_label_is_rederived_from_the_story_text_alone(tmp_path, benchmark):
    cfg = GenerateConfig(benchmark=benchmark, n=300, stories=100, seed=11, split_fractions={"train": 0.8, "test": 0.2})
    examples = generate(cfg)
    for example in examples:
        validate_example(example)
        events = parse_story(example.story, benchmark)
        assert BeliefOracle(events).answer(parse_question(example.question)) == example.answer
    path = tmp_path / "gen.jsonl"
    write_examples(path, examples)
    table, wrong = verify_examples(path)
    assert not wrong and len(table.all()) == 300


def test_verify_catches_a_wrong_label(tmp_path):
    examples = generate(GenerateConfig(n=10, seed=1, orders=[2]))
    bad = examples[3]
    wrong_answer = next(c for c in bad.choices if c != bad.answer)
    path = tmp_path / "bad.jsonl"
    write_examples(path, examples[:3] + [bad.replace(answer=wrong_answer)] + examples[4:])
    _, wrong = verify_examples(path)
    assert [w["id"] for w in wrong] == [bad.id]


def test_hitom_mix_is_balanced_and_follows_the_hitom_forms():
    examples = generate(GenerateConfig(n=600, seed=2))
    assert Counter(e.order for e in examples) == {k: 120 for k in range(5)}
    assert Counter((e.deception, e.story_length) for e in examples) == {(d, n): 100 for d in (False, True) for n in (1, 2, 3)}
    for e in examples:
        assert e.source == "tomrl-hitom" and e.story_id.startswith("tomrl-hitom-")
        assert len(e.choices) == 15 and len(set(e.choices)) == 15 and e.answer in e.choices
        assert e.question_type == ("reality", "first_order", "second_order", "third_order", "fourth_order")[e.order]
        assert len(e.meta["query"]["chain"]) == e.order
        lines = e.story.splitlines()
        assert all(line.split(" ", 1)[0] == str(i) for i, line in enumerate(lines, start=1))
        has_tells = "publicly claimed" in e.story or "privately told" in e.story
        assert has_tells == e.deception == (e.meta["tells"] > 0)
    questions = {e.order: e.question for e in examples}
    assert questions[0].startswith("Where is the ") and questions[0].endswith(" really?")
    assert " really think the " in questions[1]
    assert questions[4].count(" thinks ") == 3
    # the oracle's answers are not all the true location (false beliefs are common at every order >= 1)
    for order in range(1, 5):
        assert 0.15 < sum(e.meta["tom"] for e in examples if e.order == order) / 120 < 0.9


def test_questions_spread_over_fewer_stories_use_distinct_orders():
    examples = generate(GenerateConfig(n=50, stories=12, seed=5, orders=[1, 2, 3, 4]))
    by_story: dict[str, list[int]] = {}
    for e in examples:
        by_story.setdefault(e.story_id, []).append(e.order)
    assert len(by_story) == 12
    assert sorted(len(v) for v in by_story.values()) == [4] * 10 + [5] * 2
    assert all(len(set(orders)) == min(len(orders), 4) for orders in by_story.values())
    assert sorted(Counter(e.order for e in examples).values()) == [12, 12, 13, 13]


def test_excluded_stories_are_never_generated_again(tmp_path):
    first = generate(GenerateConfig(n=80, seed=0, lengths=[1], deception=[False]))
    path = tmp_path / "train.jsonl"
    write_examples(path, first)
    again = generate(GenerateConfig(n=80, seed=0, lengths=[1], deception=[False], exclude_stories_from=[str(path)]))
    assert not {e.story_id for e in first} & {e.story_id for e in again}
    assert not {e.story for e in first} & {e.story for e in again}


def test_easy_curriculum_and_fewer_agents():
    easy = generate(GenerateConfig(n=40, seed=3, orders=[0, 1], lengths=[1], deception=[False]))
    assert {e.order for e in easy} == {0, 1} and {e.story_length for e in easy} == {1} and not any(e.deception for e in easy)
    small = generate(GenerateConfig(n=40, seed=3, agents=3, orders=[0, 1, 2, 3]))
    assert all(len(e.meta["agents"]) == 3 for e in small)
    assert chapter_sizes(3) == [3, 2, 2, 2] and chapter_sizes(5) == [5, 3, 4, 2]


@pytest.mark.parametrize("returns", [True, False])
def test_last_mover_return_option(returns):
    back_to_start = 0
    for seed in range(200):
        story = build_story(random.Random(seed), chapters=1, deception=False, last_mover_returns=returns, distractor_prob=0.0)
        start = next(e.container for e in story.events if isinstance(e, ObjectLocation))
        fifth = [e for e in story.events if isinstance(e, Move) and e.agent == story.events[0].agents[4]]
        back_to_start += any(m.container == start for m in fifth)
    assert (back_to_start > 20) if returns else (back_to_start == 0)


def test_tomi_question_and_story_types():
    examples = generate(GenerateConfig(benchmark="tomi", n=600, stories=100, seed=4))
    assert Counter(e.question_type for e in examples) == {"first_order": 200, "second_order": 200, "reality": 100, "memory": 100}
    stories = {e.story_id: e.meta["story_type"] for e in examples}
    assert set(stories.values()) == {"true_belief", "false_belief", "second_order_false_belief"}
    assert sorted(Counter(stories.values()).values()) == [33, 33, 34]
    for e in examples:
        kind, roles = e.meta["story_type"], tuple(e.meta["query"]["chain"])
        mover_first = e.meta["asked_agent"] == 0
        if e.question_type == "memory":
            assert e.answer == e.meta["first_location"]
        if e.question_type == "reality" or kind == "true_belief" and e.question_type != "memory":
            assert not e.meta["tom"] or e.question_type == "memory"
        if kind == "false_belief" and e.question_type == "first_order":
            assert e.meta["tom"] != mover_first  # the other agent missed the move
        if kind == "second_order_false_belief" and e.question_type == "second_order" and mover_first:
            assert e.meta["tom"]  # the mover thinks the other still believes the old place
        if kind == "second_order_false_belief" and e.question_type == "first_order":
            assert not e.meta["tom"]  # both know where it is now
        assert e.story_length == len(e.story.splitlines()) and not e.story[0].isdigit()
        assert len(roles) == e.order


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["orders=[5]"], "orders"),
        (["lengths=[0]"], "lengths"),
        (["agents=1"], "agents"),
        (["agents=3", "orders=[4]"], "order 4"),
        (["split_fractions={train: 0.5, test: 0.4}"], "sum to 1"),
        (["split_fractions={dev: 1.0}"], "unknown split"),
        (["n=0"], "n must"),
        (["stories=0"], "stories"),
        (["orders=[1, 1]"], "twice"),
        (["tomi_story_types=[fake]"], "tomi_story_types"),
        (["n=10", "stories=5", "orders=[0]"], "too few"),
        (["benchmark=tomi", "n=70", "stories=10"], "too few"),
    ],
)
def test_impossible_configs_are_rejected(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(GenerateConfig, None, overrides)


def test_missing_exclude_file_is_a_clear_error(tmp_path):
    from tomrl.io import BadInputError

    with pytest.raises(BadInputError, match="not found"):
        generate(GenerateConfig(n=5, exclude_stories_from=[str(tmp_path / "nope.jsonl")]))


def test_first_chapter_holds_every_agent():
    for e in generate(GenerateConfig(n=30, seed=9)):
        first = parse_story(e.story, "hitom")[0]
        assert isinstance(first, Enter) and sorted(first.agents) == sorted(e.meta["agents"])
