"""The demo's comparison table: models beside the best no-ToM rule, pair rows, the change between models."""

from __future__ import annotations

from tomrl.analysis.comparison import EvalSet, compare, pair_units, to_markdown
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
    assert overall["change"]["verdict"] == "gain" and overall["change"]["from"] == "silent"
    assert {r["group"] for r in comparison["rows"]} == {"all", "order 0", "order 1", "order 2"}
    markdown = to_markdown(comparison, "caption")
    assert "best no-ToM rule" in markdown and "100.0 [" in markdown


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
