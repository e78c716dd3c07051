"""Story-disjoint splits: exact counts, stratified, deterministic, and checked."""

from __future__ import annotations

from collections import Counter

import pytest

from tomrl.generators import generate
from tomrl.generators.config import GenerateConfig
from tomrl.generators.splits import assign_splits, check_story_disjoint, split_counts, story_id_for


def test_split_counts_by_hand():
    assert split_counts(10, {"train": 0.8, "validation": 0.1, "test": 0.1}) == {"train": 8, "validation": 1, "test": 1}
    assert split_counts(7, {"train": 0.5, "test": 0.5}) == {"train": 4, "test": 3}  # tie: earlier split first
    assert split_counts(3, {"test": 1.0}) == {"test": 3}
    assert split_counts(9, {"train": 0.7, "validation": 0.2, "test": 0.1}) == {"train": 6, "validation": 2, "test": 1}


def test_assign_splits_exact_stratified_deterministic():
    ids = [f"s{i}" for i in range(300)]
    strata = [i % 3 for i in range(300)]
    fractions = {"train": 0.8, "validation": 0.1, "test": 0.1}
    first = assign_splits(ids, strata, fractions, seed=1)
    assert first == assign_splits(ids, strata, fractions, seed=1)
    assert first != assign_splits(ids, strata, fractions, seed=2)
    assert Counter(first.values()) == {"train": 240, "validation": 30, "test": 30}
    for stratum in range(3):
        per = Counter(first[i] for i, s in zip(ids, strata) if s == stratum)
        assert abs(per["train"] - 80) <= 2 and abs(per["test"] - 10) <= 2
    with pytest.raises(ValueError):
        assign_splits(["a", "a"], [0, 0], fractions, seed=0)


def test_generated_splits_never_share_a_story():
    examples = generate(GenerateConfig(n=400, stories=120, seed=3, split_fractions={"train": 0.8, "validation": 0.1, "test": 0.1}))
    assert check_story_disjoint(examples) == {"train": 96, "validation": 12, "test": 12}
    stories_by_split: dict[str, set[str]] = {}
    for e in examples:
        stories_by_split.setdefault(e.split, set()).add(e.story)
    assert not stories_by_split["train"] & stories_by_split["test"]
    assert not stories_by_split["train"] & stories_by_split["validation"]


def test_check_story_disjoint_names_the_shared_story():
    examples = generate(GenerateConfig(n=4, stories=2, seed=0))
    leaked = [examples[0], examples[1].replace(split="test")]
    with pytest.raises(ValueError, match=examples[0].story_id):
        check_story_disjoint(leaked)


def test_story_ids_are_content_hashes():
    assert story_id_for("tomrl-hitom", "1 A entered the den.") == story_id_for("tomrl-hitom", "1 A entered the den.")
    assert story_id_for("tomrl-hitom", "1 A entered the den.") != story_id_for("tomrl-hitom", "1 B entered the den.")
