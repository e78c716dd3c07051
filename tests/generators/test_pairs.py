"""Counterfactual minimal pairs and agent-swap pairs: gold flips, one-event edits, oracle-checked."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from tomrl.generators import generate
from tomrl.generators.config import GenerateConfig
from tomrl.generators.pairs import consistent, move_edits, witness_edits
from tomrl.schema import write_examples
from tomrl.world.oracle import BeliefOracle
from tomrl.world.parsers import parse_question, parse_story
from tomrl.world.world import Enter, Exit, Move, ObjectLocation, Stay, WorldSetup


def _grouped(examples, key: str) -> dict[str, list]:
    groups: dict[str, list] = defaultdict(list)
    for example in examples:
        groups[example.meta[key]].append(example)
    for members in groups.values():
        members.sort(key=lambda e: e.meta[key.replace("_id", "_member")])
    return groups


def _text_answer(example) -> str | None:
    """The oracle's answer from the story text alone (parsed events, inferred setup)."""
    return BeliefOracle(parse_story(example.story, "hitom")).answer(parse_question(example.question))


def _sentences(story: str) -> list[str]:
    return [line.split(" ", 1)[1] for line in story.splitlines()]


def _one_event_apart(a: list[str], b: list[str]) -> str | None:
    """"moved" if b is a with one sentence moved, "replaced" if one sentence replaced, else None."""
    if len(a) == len(b) and sum(x != y for x, y in zip(a, b)) == 1:
        return "replaced"
    if len(a) == len(b):
        for i in range(len(a)):
            for j in range(len(b)):
                if a[i] == b[j] and a[:i] + a[i + 1 :] == b[:j] + b[j + 1 :]:
                    return "moved"
    return None


@pytest.fixture(scope="module")
def pairs():
    return generate(GenerateConfig(n=120, seed=3, pairs=True, split_fractions={"train": 0.5, "test": 0.5}))


def test_pair_labels_flip_and_come_from_the_text(pairs):
    groups = _grouped(pairs, "pair_id")
    assert len(groups) == 60
    for pair_id, (first, second) in groups.items():
        assert (first.meta["pair_member"], second.meta["pair_member"]) == (0, 1)
        assert first.question == second.question and first.choices == second.choices
        assert first.answer != second.answer, pair_id
        assert first.story_id != second.story_id and first.story != second.story
        assert first.split == second.split
        assert _text_answer(first) == first.answer and _text_answer(second) == second.answer
        assert first.meta["edit"] == second.meta["edit"] and first.meta["edit_kind"] == second.meta["edit_kind"]


def test_each_pair_differs_in_exactly_one_event(pairs):
    kinds = Counter()
    for first, second in _grouped(pairs, "pair_id").values():
        apart = _one_event_apart(_sentences(first.story), _sentences(second.story))
        kinds[(first.meta["edit_kind"], apart)] += 1
        if first.meta["edit_kind"] == "witness":
            # Only who saw the move differs: reality is the same in both stories.
            assert first.meta["true_location"] == second.meta["true_location"]
    assert set(kinds) == {("witness", "moved"), ("move", "replaced")}


def test_pairs_are_balanced_over_orders_and_splits(pairs):
    by_order = Counter(e.order for e in pairs if e.meta["pair_member"] == 0)
    assert by_order == {order: 12 for order in range(5)}
    assert all(e.meta["edit_kind"] == ("move" if e.order == 0 else "witness") for e in pairs)
    assert Counter(e.split for e in pairs) == {"train": 60, "test": 60}
    # Both directions of each edit kind appear (member 1 has one witness more, or fewer).
    assert {"more" in e.meta["edit"] for e in pairs if e.meta["edit_kind"] == "witness"} == {True, False}


def test_same_seed_same_bytes(tmp_path):
    cfg = GenerateConfig(n=40, seed=5, pairs=True)
    for name in ("a", "b"):
        write_examples(tmp_path / f"{name}.jsonl", generate(cfg))
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    swaps = GenerateConfig(n=40, seed=5, agent_swap=True, orders=[1, 2, 3, 4])
    write_examples(tmp_path / "c.jsonl", generate(swaps))
    write_examples(tmp_path / "d.jsonl", generate(swaps))
    assert (tmp_path / "c.jsonl").read_bytes() == (tmp_path / "d.jsonl").read_bytes()


def test_witness_edit_on_a_hand_made_story():
    events = (
        Enter(("Anna", "Ben"), "kitchen"),
        ObjectLocation("apple", "box"),
        Stay("Anna", "kitchen"),
        Exit("Anna", "kitchen"),
        Move("Ben", "apple", "crate"),
        Exit("Ben", "kitchen"),
        Enter(("Anna", "Ben"), "waiting_room"),
    )
    (edit,) = witness_edits(events)
    assert edit.events[3:5] == (Move("Ben", "apple", "crate"), Exit("Anna", "kitchen"))
    assert BeliefOracle(events).belief(("Anna",), "apple") == "box"
    assert BeliefOracle(edit.events).belief(("Anna",), "apple") == "crate"
    assert "one witness more" in edit.forward


def test_move_edits_keep_the_story_consistent():
    setup = WorldSetup(("Anna", "Ben"), {"box": "kitchen", "crate": "kitchen"}, {"apple": "box"})
    events = (
        Enter(("Anna", "Ben"), "kitchen"),
        ObjectLocation("apple", "box"),
        Move("Anna", "apple", "crate"),
        Exit("Anna", "kitchen"),
        Move("Ben", "apple", "box"),  # as a Stay, Anna's move would leave the apple where Ben "moves" it
        Exit("Ben", "kitchen"),
    )
    assert consistent(events, setup)
    edits = list(move_edits(events, setup, "apple"))
    assert [e.events[4] for e in edits] == [Stay("Ben", "kitchen")]  # only Ben's move can become a stay


def test_agent_swaps_change_the_gold_on_the_same_story():
    examples = generate(GenerateConfig(n=80, seed=2, agent_swap=True, orders=[1, 2, 3, 4]))
    groups = _grouped(examples, "swap_id")
    assert len(groups) == 40
    assert Counter(members[0].order for members in groups.values()) == {1: 10, 2: 10, 3: 10, 4: 10}
    for first, second in groups.values():
        assert first.story == second.story and first.story_id == second.story_id and first.split == second.split
        assert first.answer != second.answer and first.order == second.order
        assert _text_answer(first) == first.answer and _text_answer(second) == second.answer
        chain_0, chain_1 = first.meta["query"]["chain"], second.meta["query"]["chain"]
        assert sum(a != b for a, b in zip(chain_0, chain_1)) == 1
        assert [a for a, b in zip(chain_0, chain_1) if a != b] + [b for a, b in zip(chain_0, chain_1) if a != b] == first.meta["swapped"]


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"pairs": True, "n": 7}, "even"),
        ({"pairs": True, "agent_swap": True}, "choose one"),
        ({"agent_swap": True}, "order 0"),
        ({"pairs": True, "stories": 2}, "stories"),
        ({"agent_swap": True, "orders": [1, 4], "agents": 4}, "another agent"),
        ({"pairs": True, "benchmark": "tomi", "orders": [1]}, "Hi-ToM"),
    ],
)
def test_impossible_pair_configs_are_rejected(changes, message):
    with pytest.raises(ValueError, match=message):
        GenerateConfig(**{"n": 10, **changes})


def test_shortcut_neutral_pairs_defeat_every_agent_agnostic_rule():
    from tomrl.audit.rules import rule_hits

    examples = generate(GenerateConfig(n=40, seed=4, pairs=True, orders=[1, 2, 3, 4], shortcut_neutral=True))
    for first, second in _grouped(examples, "pair_id").values():
        hits_first, _ = rule_hits(first.story, first.question, first.answer)
        hits_second, _ = rule_hits(second.story, second.question, second.answer)
        assert not any(a and b for a, b in zip(hits_first, hits_second))
