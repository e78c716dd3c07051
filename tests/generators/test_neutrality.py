"""`tomrl data neutrality`: fresh seeds, attackers chosen or fitted elsewhere, verdicts that can fail."""

from __future__ import annotations

import json

from tomrl.cli import main
from tomrl.generators.config import GenerateConfig
from tomrl.generators.neutrality import INCONCLUSIVE, OUTSIDE, WITHIN, answerer_verdict, check
from tomrl.stats import accuracy

PLAIN = dict(benchmark="hitom", n=120, orders=[2], agents=4, lengths=[1], deception=[False], distractor_prob=0.0)


def _pooled(result: dict, group: str) -> dict:
    return next(r for r in result["rows"] if r["seed"] == "pooled" and r["group"] == group)


def test_a_generator_whose_gold_follows_the_exits_is_caught_on_fresh_seeds():
    # The plain generator: an order-2 belief is the place when the first of the two agents left, so a learner
    # fitted on one seed reads the next seed's golds off the exit positions.
    result = check(GenerateConfig(**PLAIN), [11, 12], None)
    row = _pooled(result, "2")
    other_seeds = row["answerers"]["learner, fitted on other seeds"]
    assert other_seeds["value"] > row["chance"] + 0.15 and other_seeds["verdict"] == OUTSIDE
    assert row["verdict"] == OUTSIDE and not result["passed"]
    assert row["nesting_required"] == 0.0  # one chapter, no claims: the first leaver's own belief answers all
    assert row["answerers"]["partial ToM, chosen on other seeds"]["value"] == 1.0


def test_the_neutral_generator_holds_on_fresh_seeds():
    neutral = dict(PLAIN, orders=[1, 2], lengths=[2, 3], vocabulary="heldout", shortcut_neutral=True, n=240)
    result = check(GenerateConfig(**neutral), [21, 22], None, margin=0.10)
    for group in ("1", "2"):
        row = _pooled(result, group)
        assert row["verdict"] != OUTSIDE, row
        for name, answerer in row["answerers"].items():
            if name.startswith("learner") or name.startswith("rules, chosen"):
                assert abs(answerer["margin"]) < 0.12, (group, name, answerer)
    assert _pooled(result, "2")["nesting_required"] >= 0.4


def test_verdicts_say_within_outside_or_inconclusive():
    assert answerer_verdict(accuracy([True] * 42 + [False] * 58), 0.40, 0.05) == WITHIN
    assert answerer_verdict(accuracy([True] * 70 + [False] * 30), 0.40, 0.05) == OUTSIDE
    assert answerer_verdict(accuracy([True] * 5 + [False] * 5), 0.40, 0.05) == INCONCLUSIVE  # n = 10: cannot tell
    assert answerer_verdict(accuracy([False] * 100), 0.10, 0.05, one_sided=True) == WITHIN  # pairs: below chance is fine
    assert answerer_verdict(accuracy([False] * 100), 0.10, 0.05) == OUTSIDE


def test_the_command_writes_its_tables_and_exits_1_when_a_group_is_outside(tmp_path, capsys):
    config = tmp_path / "plain.yaml"
    config.write_text("benchmark: hitom\norders: [2]\nagents: 4\nlengths: [1]\ndeception: [false]\ndistractor_prob: 0.0\n")
    out = tmp_path / "n.json"
    code = main(["data", "neutrality", "--config", str(config), "--seeds", "3,4", "--json", str(out),
                 "--markdown", str(tmp_path / "n.md"), "n=80"])
    assert code == 1
    result = json.loads(out.read_text())
    assert result["seeds"] == [3, 4] and not result["passed"]
    assert "OUTSIDE" in (tmp_path / "n.md").read_text() and "Neutrality on fresh seeds" in capsys.readouterr().out
    assert main(["data", "neutrality", "--config", str(config), "--seeds", "3"]) == 2  # one seed: nothing to fit elsewhere
