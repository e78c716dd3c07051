"""Recipes: every YAML resolves; the paper recipes build the right data; the safety rules hold."""

from __future__ import annotations

from collections import Counter

import pytest

from tomrl.config import ConfigError
from tomrl.loaders.base import story_key
from tomrl.loaders.recipes import RECIPES_DIR, build, build_recipe, load_recipe, recipe_names, write_recipe
from tomrl.schema import read_examples

PAPER_B = ["paper-b-hitom", "paper-b-fantom", "paper-b-exploretom", "paper-b-hitom-fantom", "paper-b-hitom-exploretom",
           "paper-b-fantom-exploretom", "paper-b-all", "paper-b-hitom-o1", "paper-b-hitom-o4", "paper-b-hitom-o1-2", "paper-b-hitom-o1-3"]


@pytest.mark.parametrize("name", recipe_names())
def test_every_recipe_resolves(name):
    recipe = load_recipe(name)
    assert recipe.name == name and recipe.components and recipe.description


def test_the_paper_recipes_are_shipped():
    assert {"tomrl-paper", "tomrl-clean", *PAPER_B} <= set(recipe_names())


def test_tomrl_paper_is_the_release(shared_data, tmp_path):
    result, manifest = write_recipe("tomrl-paper", tmp_path)
    files = {k: v["rows"] for k, v in manifest["files"].items()}
    # Validation is a dev split: 5 % of the 900 training stories (45, with their 154 rows), never the test file.
    assert files == {"train": 3046, "validation": 154, "test/hitom600": 600, "test/hitom4": 600, "test/tomi": 5994,
                     "test/exploretom": 1066, "test/exploretom-infilled": 1066}
    train = read_examples(tmp_path / "train.jsonl")
    assert {e.split for e in train} == {"train"} and train[0].meta["recipe"] == "tomrl-paper"
    assert (tmp_path / "recipe.yaml").is_file()


def test_paper_b_splits_are_story_disjoint_and_mixed_as_declared(shared_data):
    result = build(load_recipe("paper-b-hitom-exploretom"))
    splits = result.splits
    assert len(splits["train"]) == 1800 and len(splits["validation"]) == 600
    for component in ("hitom", "exploretom"):
        parts = {s: [e for e in splits[s] if e.meta["recipe_component"] == component] for s in ("train", "validation")}
        parts["test"] = splits["test"][component]
        assert [len(parts[s]) for s in ("train", "validation", "test")] == [900, 300, 300]
        stories = {s: {story_key(e.story) for e in rows} for s, rows in parts.items()}
        assert not stories["train"] & stories["test"] and not stories["train"] & stories["validation"] and not stories["validation"] & stories["test"]
    hitom_train = [e for e in splits["train"] if e.meta["recipe_component"] == "hitom"]
    assert Counter(e.order for e in hitom_train) == {1: 225, 2: 225, 3: 225, 4: 225}
    explore_test = splits["test"]["exploretom"]
    assert sum(e.order > 0 for e in explore_test) == 210 and sum(e.order == 0 for e in explore_test) == 90
    assert not any(e.meta["binary"] for e in explore_test)
    for genre in ("opentom-location-coarse", "opentom-location-fine", "opentom-multihop", "opentom-attitude"):
        assert len(splits["test"][genre]) == 300
    assert any("skipped test set 'fantom'" in note for note in result.notes)


def test_mixtures_share_their_test_sets_and_order_subsets_fill_their_sizes(shared_data):
    o4 = build(load_recipe("paper-b-hitom-o4"))
    o13 = build(load_recipe("paper-b-hitom-o1-3"))
    assert [e.id for e in o4.splits["test"]["hitom"]] == [e.id for e in o13.splits["test"]["hitom"]]
    assert Counter(e.order for e in o4.splits["test"]["hitom"]) == {1: 75, 2: 75, 3: 75, 4: 75}
    # O4: every order-4 question of the training stories (360, one per story), not a quarter of the mixed sample (225).
    assert {e.order for e in o4.splits["train"]} == {4} and len(o4.splits["train"]) == 360 and len(o4.splits["validation"]) == 120
    assert any("orders [4]: train 360 of 900 rows" in note and "validation 120 of 300" in note for note in o4.notes)
    # O1-3: three questions per story are enough for Paper B's 900 / 300, a third per order, and no note.
    assert Counter(e.order for e in o13.splits["train"]) == {1: 300, 2: 300, 3: 300}
    assert Counter(e.order for e in o13.splits["validation"]) == {1: 100, 2: 100, 3: 100}
    assert not any("orders [1, 2, 3]" in note for note in o13.notes)
    # Both subsets use the one story split of the Hi-ToM component: no story crosses splits, between the two either.
    stories = {(name, split): {story_key(e.story) for e in rows} for name, built in (("o4", o4), ("o13", o13))
               for split, rows in (("train", built.splits["train"]), ("validation", built.splits["validation"]), ("test", built.splits["test"]["hitom"]))}
    for a in ("o4", "o13"):
        for b in ("o4", "o13"):
            assert not stories[a, "train"] & (stories[b, "validation"] | stories[b, "test"])
            assert not stories[a, "validation"] & stories[b, "test"]
    assert not any(e.meta["recipe_component"] == "exploretom" for e in o4.splits["train"])
    assert len(o4.splits["test"]["exploretom"]) == 300  # evaluated even when not trained on


@pytest.mark.parametrize("name", ["paper-b-fantom", "paper-b-all", "paper-b-hitom-fantom"])
def test_fantom_mixtures_fail_with_how_to_obtain(shared_data, name, tmp_path, monkeypatch):
    monkeypatch.setenv("TOMRL_DATA", str(shared_data))
    if (shared_data / "fantom" / "fantom_v1.json").exists():
        pytest.skip("FANToM is present")
    with pytest.raises(ConfigError, match="fantom.tar.gz.*sha256"):
        build_recipe(name)


def test_evaluation_only_data_is_refused_for_training(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: bad\ncomponents:\n  - {name: ot, loader: opentom, split: train}\n")
    with pytest.raises(ConfigError, match="evaluation-only.*train split"):
        load_recipe(path)
    path.write_text("name: bad\ncomponents:\n  - {name: ot, loader: opentom, split_counts: {validation: 10, test: 10}}\n")
    with pytest.raises(ConfigError, match="evaluation-only.*validation split"):
        load_recipe(path)
    path.write_text("name: ok\ncomponents:\n  - {name: ot, loader: opentom, split: test, count: 5}\n")
    assert load_recipe(path).components[0].loader == "opentom"


def test_validation_share_holds_whole_stories_out_of_training(tmp_path):
    path = tmp_path / "dev.yaml"
    path.write_text("name: dev\ncomponents:\n  - name: gen\n    generate: {benchmark: hitom, n: 40, stories: 20, seed: 3}\n"
                    "    split: train\n    validation_share: 0.1\n")
    splits = build_recipe(path)
    train, dev = splits["train"], splits["validation"]
    assert len({e.story_id for e in dev}) == 2 and len(train) + len(dev) == 40
    assert not {story_key(e.story) for e in train} & {story_key(e.story) for e in dev}
    assert [e.id for e in build_recipe(path)["validation"]] == [e.id for e in dev]  # seeded
    path.write_text("name: dev\ncomponents:\n  - {name: gen, generate: {n: 4}, split: test, validation_share: 0.1}\n")
    with pytest.raises(ConfigError, match="validation_share needs split: train"):
        load_recipe(path)


def test_unknown_keys_and_bad_values_are_errors(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("name: r\ncomponents:\n  - {name: a, loader: hitom, split: test, cuont: 5}\n")
    with pytest.raises(ConfigError, match=r"unknown key 'components\[0\]\.cuont'.*did you mean"):
        load_recipe(path)
    path.write_text("name: r\ncomponents:\n  - {name: a, loader: hitom, split: test, strata: [{name: x, share: 0.5}], count: 4}\n")
    with pytest.raises(ConfigError, match="shares must sum to 1"):
        load_recipe(path)
    path.write_text("name: r\ncomponents:\n  - {name: a, loader: nosuch, split: test}\n")
    with pytest.raises(ConfigError, match="unknown loader 'nosuch'"):
        load_recipe(path)
    path.write_text("name: r\nextends: tomrl-paper\ntrain_on: [nosuch]\n")
    with pytest.raises(ConfigError, match="train_on/train_orders name 'nosuch'"):
        load_recipe(path)


def test_story_overlap_is_caught_when_forbidden(shared_data, tmp_path):
    path = tmp_path / "leaky.yaml"
    path.write_text(
        "name: leaky\nforbid_story_overlap: true\ncomponents:\n"
        "  - {name: train, loader: tomrl-paper-train, split: train}\n"
        "  - {name: hitom4, loader: tomrl-paper-hitom4, split: test}\n"
    )
    with pytest.raises(ConfigError, match="600 stories of train also occur in test set 'hitom4'"):
        build_recipe(path)


def test_shipped_recipe_files_are_where_the_loader_looks():
    assert all((RECIPES_DIR / f"{name}.yaml").is_file() for name in recipe_names())


def test_tomrl_clean_has_no_shared_story(shared_data):
    splits = build_recipe("tomrl-clean")  # the build itself fails on any story shared between splits
    generated = [e for e in splits["train"] if e.meta["recipe_component"] == "hitom-train"]
    assert len(generated) == 2000 and {e.order for e in generated} == {0, 1, 2, 3}  # order 4 held out
    assert all("\n" not in e.story and not e.story[0].isdigit() for e in generated)  # the release's training form
    assert len(splits["train"]) == 2000 + 267 and len(splits["validation"]) == 400
    assert {name: len(rows) for name, rows in splits["test"].items()} == {
        "hitom600": 600, "hitom4": 600, "tomi": 5994, "exploretom": 1066, "exploretom-infilled": 1066}


def test_recipe_command(shared_data, tmp_path, capsys):
    from tomrl.cli import main

    assert main(["data", "load", "recipe:paper-b-hitom-o1", "--out", str(tmp_path / "o1")]) == 0
    captured = capsys.readouterr()
    assert "train.jsonl" in captured.out and "skipped test set 'fantom'" in captured.err
    # Every order-1 question of the training stories, and the build output says Paper B's 900 cannot be reached.
    assert len(read_examples(tmp_path / "o1" / "train.jsonl")) == 360
    assert "orders [1]: train 360 of 900 rows" in captured.err
    if not (shared_data / "fantom" / "fantom_v1.json").exists():
        assert main(["data", "load", "recipe:paper-b-fantom", "--out", str(tmp_path / "f")]) == 2
        assert "fantom.tar.gz" in capsys.readouterr().err
        assert not (tmp_path / "f" / "train.jsonl").exists()


def test_optional_test_sets_are_skipped_only_when_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("TOMRL_DATA", str(tmp_path))
    bad = tmp_path / "fantom_v1.json"
    bad.write_text("[1, 2]")
    path = tmp_path / "r.yaml"
    path.write_text("name: r\ncomponents:\n"
                    "  - {name: mine, loader: jsonl, path: PATH, split: test}\n"
                    "  - {name: fantom, loader: fantom, split: test, optional: true}\n".replace("PATH", str(tmp_path / "mine.jsonl")))
    from tomrl.schema import Example, write_examples

    write_examples(tmp_path / "mine.jsonl", [Example("a", "toy", "test", "Al entered the den.", "Where is Al?", "den", 0, "q", None, 1, "s")])
    bad.unlink()
    result = build(load_recipe(path))
    assert list(result.splits["test"]) == ["mine"] and "skipped test set 'fantom'" in result.notes[0]
    bad.write_text("[1, 2]")  # present but broken: an error, not a skip
    with pytest.raises(ConfigError, match=r"fantom_v1\.json: row 0: expected an object"):
        build(load_recipe(path))


GENERATED_RECIPE = """\
name: gen
components:
  - name: gen
    generate: {benchmark: tomi, n: 12, stories: 6}
    split_counts: {train: 4, test: 2}
"""


def test_write_recipe_replaces_only_recipe_folders(tmp_path):
    """--out is replaced as a whole, so a folder of other things (or a file) is refused and left untouched."""
    recipe = tmp_path / "gen.yaml"
    recipe.write_text(GENERATED_RECIPE)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    with pytest.raises(ConfigError, match="is not a recipe folder"):
        write_recipe(recipe, mine)
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="not a folder"):
        write_recipe(recipe, tmp_path / "file")
    empty = tmp_path / "empty"
    empty.mkdir()
    _, manifest = write_recipe(recipe, empty)
    assert sorted(p.name for p in empty.iterdir()) == ["manifest.json", "recipe.yaml", "test", "train.jsonl"]
    assert manifest["files"]["train"]["rows"] == 4
    (empty / "test" / "old-set.jsonl").write_text("stale")
    write_recipe(recipe, empty)  # a recipe folder is replaced whole: the stale test file goes
    assert sorted(p.name for p in (empty / "test").iterdir()) == ["gen.jsonl"]
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]


def test_build_checks_every_answer_against_its_story(tmp_path, monkeypatch):
    """Rows from a loader that does not check its answers are still checked by the build."""
    from tomrl.loaders import registry
    from tomrl.schema import Example, write_examples

    rows = [Example("a", "tomi", "test", "Al entered the den.\nThe pen is in the red_box.", "Where is the pen?", "red_box", 0, "q", None, 2, "s1"),
            Example("b", "tomi", "test", "Bo entered the hall.\nThe cup is in the blue_bag.", "Where is the cup?", "green_bag", 0, "q", None, 2, "s2")]
    write_examples(tmp_path / "mine.jsonl", rows)
    path = tmp_path / "r.yaml"
    path.write_text(f"name: r\ncomponents:\n  - {{name: mine, loader: jsonl, path: {tmp_path / 'mine.jsonl'}, split: test}}\n")
    with pytest.raises(ConfigError, match=r"component 'mine': .*mine\.jsonl:2: field 'answer': 'green_bag' never occurs in the story"):
        build(load_recipe(path))  # the jsonl loader's own check, naming file and line
    monkeypatch.setattr(registry, "load", lambda name, path=None, **options: read_examples(path))  # schema checks only
    with pytest.raises(ConfigError, match=r"component 'mine': example 'b' \(tomi\): field 'answer': 'green_bag' never occurs"):
        build(load_recipe(path))
