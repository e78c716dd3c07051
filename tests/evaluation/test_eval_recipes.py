"""`tomrl eval --benchmark recipe:NAME:SPLIT`: a recipe's test tasks evaluated one by one, each with the
best no-ToM rule beside it; absent data listed with how to obtain it; list questions scored as sets.

The recipe here is a small one written by the test (tomrl-generated Hi-ToM stories, a JSONL file of
list questions, and a FANToM component whose file is absent), so the test runs in seconds; the shipped
Paper B recipe is checked for its 12 task names without building it.
"""

from __future__ import annotations

import json
import re

import pytest
from fake_openai_server import FakeOpenAIServer

from tomrl.cli import main
from tomrl.config import ConfigError
from tomrl.evaluation.benchmarks import check_names, recipe_benchmarks
from tomrl.schema import Example, write_examples

RECIPE = """
name: mini
paper: tomrl
description: a small recipe for the evaluation tests
seed: 0
components:
  - name: hitom
    generate: {{benchmark: hitom, n: 80, stories: 40, orders: [1, 2], seed: 5}}
    split_counts: {{train: 24, test: 16}}
    strata:
      - {{name: order-1, orders: [1], share: 0.5}}
      - {{name: order-2, orders: [2], share: 0.5}}
  - name: lists
    loader: jsonl
    path: {lists}
    split: test
  - name: fantom-list
    loader: fantom
    path: {absent}
    question_types: ["answerability:list"]
    split: test
    optional: true
train_on: [hitom]
train_orders: {{hitom: [1]}}
tasks:
  - {{name: order1, title: Hi-ToM order 1, component: hitom, orders: [1]}}
  - {{name: order2, title: Hi-ToM order 2, component: hitom, orders: [2]}}
  - {{name: lists, title: Who knows (list), component: lists}}
  - {{name: fantom-list, title: FANToM answerability (list), component: fantom-list}}
"""


def list_questions(count: int) -> list[Example]:
    return [
        Example(id=f"list-{i}", source="custom", split="test", story=f"Alice, Bob and Carol talk. Carol leaves. Alice tells Bob about trip {i}.",
                question="Who knows about the trip?", answer="Alice, Bob", order=1, question_type="answerability:list",
                deception=None, story_length=3, story_id=f"list-story-{i}")
        for i in range(count)
    ]


def answer(prompt: str) -> str:
    """Names in the other order for list questions (right as a set, wrong as a string); else the first place named."""
    if "Who knows" in prompt:
        return "Bob and Alice"
    match = re.search(r"is in the (\w+)", prompt)
    return match.group(1) if match else "nowhere"


@pytest.fixture
def mini_recipe(tmp_path):
    lists = tmp_path / "lists.jsonl"
    write_examples(lists, list_questions(6))
    path = tmp_path / "mini.yaml"
    path.write_text(RECIPE.format(lists=lists, absent=tmp_path / "no_such_fantom_v1.json"))
    return path


def test_recipe_tasks_are_evaluated_one_by_one_with_the_rule_beside_them(mini_recipe, tmp_path, capsys):
    extra = tmp_path / "extra.jsonl"
    write_examples(extra, list_questions(2))
    out = tmp_path / "run"
    with FakeOpenAIServer(answer_fn=answer) as server:
        code = main(["eval", "--engine", "openai", "--model", "fake", "--out", str(out), "--greedy",
                     "--benchmark", f"recipe:{mini_recipe}:test", "--benchmark", str(extra),  # the flag repeats
                     f"openai.base_url={server.base_url}"])
    assert code == 0
    printed = capsys.readouterr().out
    results = json.loads((out / "results.json").read_text())
    benchmarks = results["benchmarks"]
    assert set(benchmarks) == {"mini:order1", "mini:order2", "mini:lists", "file-extra"}
    # In distribution: the order trained on; held out: the other order and a component never trained on.
    assert {name: bench.get("held_out") for name, bench in benchmarks.items()} == {
        "mini:order1": False, "mini:order2": True, "mini:lists": True, "file-extra": None}
    assert benchmarks["mini:order1"]["n_answered"] == 8 and set(benchmarks["mini:order1"]["by_order"]) == {"1"}
    # List questions answered in another order are right: scored as sets.
    assert benchmarks["mini:lists"]["overall"]["strict"]["accuracy"]["k"] == 6
    assert benchmarks["file-extra"]["overall"]["strict"]["accuracy"]["k"] == 2
    # The best no-ToM rule on the same questions, overall and per order; none for questions it cannot read.
    rule = benchmarks["mini:order2"]["no_tom_rule"]
    assert rule["overall"]["rule"] and rule["overall"]["accuracy"]["n"] == 8 and rule["by_order"]["2"]["rule"]
    assert benchmarks["mini:lists"]["no_tom_rule"]["overall"]["rule"] is None
    # The absent FANToM task is listed with how to obtain its file.
    why = results["skipped"]["mini:fantom-list"]
    assert "fantom.tar.gz" in why and "sha256" in why
    table = (out / "table.md").read_text()
    assert "## Tasks" in table and "| Hi-ToM order 2 | held out | 8 |" in table and "| mini:fantom-list | absent |" in table
    assert "fantom.tar.gz" in table and "fantom.tar.gz" in printed


def test_recipe_references_are_checked_before_any_model_time(mini_recipe):
    assert check_names([f"recipe:{mini_recipe}:test"]) == [f"recipe:{mini_recipe}:test"]
    with pytest.raises(ConfigError, match="recipe:NAME:SPLIT"):
        check_names([f"recipe:{mini_recipe}:dev"])
    with pytest.raises(ConfigError, match="unknown recipe 'no-such-recipe'"):
        check_names(["recipe:no-such-recipe:test"])


def test_paper_b_recipes_report_the_twelve_tasks_in_and_out_of_distribution():
    tasks = recipe_benchmarks("recipe:paper-b-all:test")
    assert [b.title for b in tasks] == [
        "HiToM 1st order", "HiToM 2nd order", "HiToM 3rd order", "HiToM 4th order", "FANToM false belief (binary)", "ExploreToM",
        "OpenToM coarse location", "OpenToM fine location", "OpenToM multihop", "OpenToM attitude",
        "FANToM answerability (list)", "FANToM info accessibility (list)"]
    held_out = lambda recipe: [b.name.split(":")[1] for b in recipe_benchmarks(f"recipe:{recipe}:test") if b.held_out]
    assert held_out("paper-b-all") == ["opentom-location-coarse", "opentom-location-fine", "opentom-multihop", "opentom-attitude",
                                       "fantom-answerability-list", "fantom-info-accessibility-list"]
    assert held_out("paper-b-hitom-o1-3")[:2] == ["hitom-order4", "fantom"]  # the unseen order; a data set not trained on
    # FANToM's tasks are optional: a run skips them, with how to obtain the file, when it is absent.
    assert [b.name for b in tasks if b.needs_user_file] == ["paper-b-all:fantom", "paper-b-all:fantom-answerability-list",
                                                           "paper-b-all:fantom-info-accessibility-list"]
