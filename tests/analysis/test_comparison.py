"""The demo's comparison table: models beside the best no-ToM rule, pair rows, the change between models."""

from __future__ import annotations

from tomrl.analysis.comparison import EvalSet, compare, pair_units, to_markdown
from tomrl.analysis.significance import ONE_TRAINING_SEED
from tomrl.generators import generate
from tomrl.generators.config import GenerateConfig


def rows_where(examples, correct) -> dict:
    return {e.id: {"id": e.id, "correct": correct(e)} for e in examples}


def test_a_perfect_model_beats_the_rule_and_a_silent_one_does_not():
    examples = generate(GenerateConfig(n=60, seed=3, orders=[0, 1, 2], lengths=[1], agents=3, deception=[False]))
    sets = [EvalSet("gen", "generated", "stories", examples)]
    comparison = compare(sets, {"silent": {"gen": rows_where(examples, lambda e: False)},
                                "perfect": {"gen": rows_where(examples, lambda e: True)}})
    overall = next(r for r in comparison["rows"] if r["group"] == "all")
    assert overall["models"]["perfect"]["value"] == 1.0 and overall["models"]["silent"]["value"] == 0.0
    assert overall["rule_accuracy"]["n"] == 60 and 0 < overall["rule_accuracy"]["value"] <= 1
    assert overall["beats_rule"] == (["perfect"] if overall["rule_accuracy"]["value"] < 0.94 else [])
    # The change between the last two models is a training effect, measured here on one model each: one training seed.
    assert overall["change"]["verdict"] == "gain (one training seed)" and overall["change"]["from"] == "silent"
    assert {r["group"] for r in comparison["rows"]} == {"all", "order 0", "order 1", "order 2"}
    markdown = to_markdown(comparison, "caption")
    assert "best no-ToM rule" in markdown and "100.0 [" in markdown
    assert ONE_TRAINING_SEED in markdown
    # Models that do not differ by training (two base models) keep the plain verdict and no seed note.
    untrained = compare(sets, {"silent": {"gen": rows_where(examples, lambda e: False)},
                               "perfect": {"gen": rows_where(examples, lambda e: True)}}, training_effect=False)
    assert next(r for r in untrained["rows"] if r["group"] == "all")["change"]["verdict"] == "gain"
    assert ONE_TRAINING_SEED not in to_markdown(untrained)


def test_pair_rows_count_a_pair_right_only_when_both_members_are():
    examples = generate(GenerateConfig(n=24, seed=5, orders=[1, 2], lengths=[1], agents=3, deception=[False], pairs=True))
    pairs = pair_units(examples)
    assert len(pairs) == 12
    first_members = {a for a, _ in pairs}
    comparison = compare([EvalSet("pairs", "pairs", "stories", examples)],
                         {"half": {"pairs": rows_where(examples, lambda e: e.id in first_members)},
                          "all": {"pairs": rows_where(examples, lambda e: True)}})
    pair_row = next(r for r in comparison["rows"] if r["unit"] == "pair")
    assert pair_row["models"]["half"]["n"] == 12 and pair_row["models"]["half"]["k"] == 0  # one member right is not a pair
    assert pair_row["models"]["all"]["k"] == 12
    item_row = next(r for r in comparison["rows"] if r["group"] == "all")
    assert item_row["models"]["half"]["k"] == 12


def test_nesting_required_questions_get_their_own_rows():
    from tomrl.analysis.comparison import NESTING_REQUIRED, PARTIALLY_ANSWERABLE
    from tomrl.audit.partial import nesting_required_ids

    # Two- and three-chapter stories whose later chapters revisit the asked object: some order-2 and
    # order-3 questions are answered by no single named agent's own belief.
    examples = generate(GenerateConfig(n=80, seed=8, orders=[2, 3], lengths=[2, 3], agents=4, deception=[False], shortcut_neutral=True))
    flags = nesting_required_ids(examples)
    nested = {i for i, flag in flags.items() if flag}
    assert nested and len(nested) < len(flags)
    comparison = compare([EvalSet("gen", "generated", "stories", examples)],
                         {"nesting only": {"gen": rows_where(examples, lambda e: e.id in nested)}})
    by_group = {r["group"]: r for r in comparison["rows"]}
    required, partial = by_group[NESTING_REQUIRED], by_group[PARTIALLY_ANSWERABLE]
    assert required["models"]["nesting only"]["n"] == len(nested) and required["models"]["nesting only"]["value"] == 1.0
    assert partial["models"]["nesting only"]["n"] == len(flags) - len(nested) and partial["models"]["nesting only"]["k"] == 0
    assert required["rule_accuracy"]["n"] == len(nested)
    # No single agent's belief answers a nesting-required question; on the others the best one-agent rule often does.
    assert required["partial"]["n"] == len(nested) and required["partial"]["k"] == 0
    assert partial["partial"]["value"] > 0.5
    assert "best partial-ToM rule" in to_markdown(comparison)


def test_sets_that_never_need_nesting_get_no_nesting_rows():
    examples = generate(GenerateConfig(n=40, seed=3, orders=[2], lengths=[1], agents=4, deception=[False]))
    comparison = compare([EvalSet("gen", "generated", "stories", examples)], {"m": {"gen": rows_where(examples, lambda e: True)}})
    assert {r["group"] for r in comparison["rows"]} == {"all"}


def test_beating_the_baseline_also_means_beating_chance():
    # Agent swaps: no rule that ignores who is asked gets a pair right, so the rule's pair accuracy is 0;
    # a model must still clear a random pick of both answers to "beat" it.
    examples = generate(GenerateConfig(n=24, seed=5, orders=[1, 2], lengths=[1], agents=3, deception=[False], agent_swap=True))
    pairs = pair_units(examples)
    one_pair = {pairs[0][0], pairs[0][1]}
    comparison = compare([EvalSet("swap", "swap", "stories", examples)],
                         {"lucky": {"swap": rows_where(examples, lambda e: e.id in one_pair)},
                          "all": {"swap": rows_where(examples, lambda e: True)}})
    pair_row = next(r for r in comparison["rows"] if r["unit"] == "pair")
    assert pair_row["rule_accuracy"]["k"] == 0 and 0 < pair_row["chance"] < 0.5
    assert pair_row["models"]["lucky"]["k"] == 1 and pair_row["models"]["lucky"]["low"] > 0
    assert pair_row["beats_rule"] == ["all"]  # one pair of 12 is above the rule (0) but not above chance
