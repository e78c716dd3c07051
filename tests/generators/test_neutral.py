"""Shortcut-neutral generation and the disjoint word pools: audit near chance, labels from the oracle, same bytes."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from tomrl.audit.rules import FLAG_MARGIN, best_rules
from tomrl.config import load_config
from tomrl.generators import generate
from tomrl.generators.config import GenerateConfig
from tomrl.generators.vocabulary import CONTAINERS, NAMES, OBJECTS, ROOMS, vocabulary
from tomrl.schema import write_examples
from tomrl.world.oracle import BeliefOracle
from tomrl.world.parsers import parse_question, parse_story

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "generate"


def _bytes(tmp_path: Path, name: str, cfg: GenerateConfig) -> bytes:
    path = tmp_path / name
    write_examples(path, generate(cfg))
    return path.read_bytes()


@pytest.fixture(scope="module")
def hitom_neutral():
    return generate(GenerateConfig(benchmark="hitom", n=160, seed=5, orders=[0, 1, 2, 3, 4], vocabulary="heldout", shortcut_neutral=True))


@pytest.fixture(scope="module")
def tomi_neutral():
    return generate(GenerateConfig(benchmark="tomi", n=180, seed=5, vocabulary="heldout", shortcut_neutral=True))


@pytest.mark.parametrize("name", ["hitom_neutral", "tomi_neutral"])
def test_no_rule_beats_chance_on_belief_orders(name, request):
    examples = request.getfixturevalue(name)
    result = best_rules(examples)
    belief_orders = sorted({e.order for e in examples if e.order >= 1})
    assert belief_orders
    for order in belief_orders:
        best = result[str(order)]
        assert best.margin <= FLAG_MARGIN and not best.flagged, (order, best.to_dict())
    assert result["0"].rule in ("path_end_1", "path_start_1", "exit_end_1")  # order 0: the last (or first) place, by definition


@pytest.mark.parametrize("name, style", [("hitom_neutral", "hitom"), ("tomi_neutral", "tomi")])
def test_labels_are_the_oracles_read_from_the_text(name, style, request):
    for e in request.getfixturevalue(name):
        assert BeliefOracle(parse_story(e.story, style)).answer(parse_question(e.question)) == e.answer


def test_pools_are_disjoint_and_cover_every_word():
    train, heldout = vocabulary("train"), vocabulary("heldout")
    for words, every in (("names", NAMES), ("rooms", ROOMS), ("objects", OBJECTS), ("containers", CONTAINERS)):
        a, b = set(getattr(train, words)), set(getattr(heldout, words))
        assert not a & b and a | b == set(every), words
    assert vocabulary("all") == vocabulary()
    assert len(heldout.containers) >= 15 and len(heldout.names) >= 5  # a Hi-ToM story needs 15 containers, 5 agents


def test_generated_words_come_from_their_pool(hitom_neutral):
    heldout = vocabulary("heldout")
    train_words = set(vocabulary("train").names) | set(vocabulary("train").containers) | set(vocabulary("train").objects)
    for e in hitom_neutral:
        assert set(e.meta["agents"]) <= set(heldout.names)
        assert set(e.choices) <= set(heldout.containers)
        assert e.meta["query"]["object"] in heldout.objects
        assert not set(re.findall(r"[\w']+", e.story)) & train_words
    tomi = generate(GenerateConfig(benchmark="tomi", n=30, seed=1, vocabulary="train"))
    assert all(set(e.meta["containers"]) <= set(vocabulary("train").containers) for e in tomi)


def test_same_seed_same_bytes(tmp_path):
    cfg = GenerateConfig(benchmark="hitom", n=30, seed=2, vocabulary="heldout", shortcut_neutral=True)
    assert _bytes(tmp_path, "a.jsonl", cfg) == _bytes(tmp_path, "b.jsonl", cfg)
    tomi = GenerateConfig(benchmark="tomi", n=30, seed=2, vocabulary="heldout", shortcut_neutral=True)
    assert _bytes(tmp_path, "c.jsonl", tomi) == _bytes(tmp_path, "d.jsonl", tomi)


def test_default_output_is_unchanged(tmp_path):
    # sha256 of the files written before vocabulary / shortcut_neutral existed (tomrl data generate
    # {hitom,tomi} --n 600 --seed 7): vocabulary "all" and shortcut_neutral false must keep them.
    hitom = hashlib.sha256(_bytes(tmp_path, "h.jsonl", GenerateConfig(benchmark="hitom", n=600, seed=7))).hexdigest()
    tomi = hashlib.sha256(_bytes(tmp_path, "t.jsonl", GenerateConfig(benchmark="tomi", n=600, seed=7))).hexdigest()
    assert hitom == "1af4aae223ec3b6bff9b220b95dc1e3ab6d7d36905bd21209dac80017d201ad6"
    assert tomi == "f348daa1932be3b54b7ead8b0dde21dad7080b58deb8d29b5a867bdad3401201"


def test_neutral_needs_one_question_per_story():
    with pytest.raises(ValueError, match="one question per story"):
        GenerateConfig(n=100, stories=20, shortcut_neutral=True)


@pytest.mark.parametrize("name", ["hitom_neutral_test.yaml", "tomi_neutral_test.yaml"])
def test_shipped_neutral_configs(name):
    cfg = load_config(GenerateConfig, CONFIGS / name, [])
    assert cfg.shortcut_neutral and cfg.vocabulary == "heldout" and cfg.split_fractions == {"test": 1.0}
