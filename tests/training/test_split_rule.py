"""The split rule: validation is a dev split held out of training, never a test set (tomrl.training.split_rule)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tomrl.config import ConfigError, config_to_dict, load_config
from tomrl.loaders.base import story_keys
from tomrl.loaders.registry import load
from tomrl.loaders.recipes import build_recipe
from tomrl.schema import write_examples
from tomrl.training.config import DataConfig, TrainConfig
from tomrl.training.data import prepare_data
from tomrl.training.run import RunSummary
from tomrl.training.split_rule import SPLIT_CHECK_FILE, check_splits, checkpoint_warning, validation_on_test_warning

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "train"


def _keys(rows) -> set[str]:
    return {key for row in rows for key in story_keys(row)}


def _files(tmp_path: Path) -> tuple[str, str]:
    """Training rows of Paper A's release, and validation rows taken from Paper A's ToMi test set."""
    train, validation = tmp_path / "train.jsonl", tmp_path / "validation.jsonl"
    write_examples(train, load("tomrl-paper-train")[:16])
    write_examples(validation, load("tomrl-paper-tomi")[:12])  # 12 questions, each over its own ToMi story
    return str(train), str(validation)


def test_validation_on_a_test_set_is_an_error_before_the_run_folder_exists(shared_data, tmp_path):
    from tomrl.training.run import train

    train_file, validation_file = _files(tmp_path)
    cfg = TrainConfig(run_dir=str(tmp_path / "run"), data=DataConfig(train_files=[train_file], validation_files=[validation_file]))
    with pytest.raises(ConfigError, match=r"validation_files .*validation\.jsonl\) shares 12 stories with benchmark 'tomi'.*allow_test_validation"):
        train(cfg)
    assert not (tmp_path / "run").exists()


def test_a_recipe_validating_on_its_test_file_is_an_error(shared_data, tmp_path):
    recipe = tmp_path / "validates-on-test.yaml"
    recipe.write_text(
        "name: validates-on-test\ncomponents:\n"
        "  - {name: train, loader: tomrl-paper-train, split: train}\n"
        "  - {name: validation, loader: tomrl-paper-test-merged, split: validation}\n"
        "  - {name: tomi, loader: tomrl-paper-tomi, split: test}\n"
    )
    cfg = TrainConfig(run_dir=str(tmp_path / "run"), data=DataConfig(recipe=str(recipe)))
    with pytest.raises(ConfigError, match=r"recipe '.*validates-on-test\.yaml'\) shares 999 stories with recipe .* test set 'tomi'"):
        prepare_data(cfg, tmp_path / "staging")


def test_opting_in_is_recorded_and_every_report_warns_first(shared_data, tmp_path):
    train_file, validation_file = _files(tmp_path)
    data = DataConfig(train_files=[train_file], validation_files=[validation_file], allow_test_validation=True)
    train, validation = prepare_data(TrainConfig(data=data), tmp_path / "run")
    assert len(validation) == 12
    recorded = json.loads((tmp_path / "run" / "data" / SPLIT_CHECK_FILE).read_text())
    assert recorded["allow_test_validation"] and recorded["validation_overlap"] == {"benchmark 'tomi'": 12}
    warning = validation_on_test_warning(tmp_path / "run")
    assert warning == recorded["warning"] and warning.startswith("WARNING: validation (and best/ selection) used test data")
    (tmp_path / "run" / "best").mkdir()  # tomrl eval of the run's checkpoints logs it and puts it first in results.json
    assert checkpoint_warning(tmp_path / "run" / "best").startswith(warning)
    assert checkpoint_warning("Qwen/Qwen2.5-0.5B-Instruct") is None
    from tomrl.analysis.document import render_markdown
    from tomrl.analysis.report import build_report, default_options
    from tomrl.analysis.runs import RunSet, TrainingRun

    document, _ = build_report(RunSet(training=[TrainingRun(tmp_path / "run", {}, [])]), tmp_path / "report", default_options())
    assert render_markdown(document).splitlines()[2].startswith(warning)  # the first line under the title
    summary = RunSummary(str(tmp_path / "run"), 1, 1.0, 16, 12, 0, None, None, None, None, None, None, split_check=recorded)
    assert next(iter(summary.to_dict())) == "warning" and summary.to_dict()["warning"] == warning


def test_clean_validation_records_no_warning(tmp_path):
    data = DataConfig(generate="default", generate_overrides=["n=8", "orders=[0, 1]"], validation_overrides=["n=4"])
    prepare_data(TrainConfig(data=data), tmp_path / "run")
    recorded = json.loads((tmp_path / "run" / "data" / SPLIT_CHECK_FILE).read_text())
    assert recorded["warning"] is None and recorded["validation_overlap"] == {} and not recorded["allow_test_validation"]
    assert validation_on_test_warning(tmp_path / "run") is None
    assert validation_on_test_warning(tmp_path / "elsewhere") is None  # runs made before the rule


def test_a_test_set_training_already_shares_is_recorded_not_refused(shared_data):
    # Paper A's release trains on every 4th-order story: that test set is not clean for the run,
    # whatever validation does, so the rule records it instead of failing on it.
    pool = load("tomrl-paper-hitom-pool")
    first, second = sorted({e.story_id for e in pool})[:2]
    train = [e for e in pool if e.story_id == first and e.order < 4]
    validation = [e for e in pool if e.story_id == second and e.order < 4]
    test = {"order4": [e for e in pool if e.story_id in (first, second) and e.order == 4]}
    check = check_splits(train, validation, DataConfig(), "rows", "mine", test)
    assert check.training_overlap["recipe 'mine' test set 'order4'"] == 1 and check.training_overlap["benchmark 'hitom4'"] == 1
    assert check.validation_overlap == {} and check.warning() is None
    # A test set holding only the validation story is clean for training, so validating on it is refused.
    only_first = {"order4": [e for e in test["order4"] if e.story_id == first]}
    with pytest.raises(ConfigError, match=r"\(rows\) shares 1 stories with recipe 'mine' test set 'order4'"):
        check_splits(validation, train, DataConfig(), "rows", "mine", only_first)


def test_tomrl_paper_dev_split_is_held_out_of_training(shared_data):
    splits = build_recipe("tomrl-paper")
    train, dev = splits["train"], splits["validation"]
    assert len(train) + len(dev) == 3200 and 100 < len(dev) < 220  # 5 % of the 900 stories: 45 stories
    assert len({e.story_id for e in dev}) == 45 and not _keys(train) & _keys(dev)
    assert {e.id for e in train} | {e.id for e in dev} == {e.id for e in load("tomrl-paper-train")}
    assert build_recipe("tomrl-paper")["validation"] == dev  # seeded
    # The dev split shares no story with the test file beyond the release's own leakage: the test
    # stories it shares (4th-order, ExploreToM) are stories Paper A's training file holds too.
    test_file = _keys(load("tomrl-paper-test-merged"))
    assert _keys(dev) & test_file <= _keys(load("tomrl-paper-train"))
    assert not _keys(dev) & (_keys(splits["test"]["tomi"]) | _keys(splits["test"]["hitom600"]))


_CHECKED: dict[str, dict] = {}


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_train_config_passes_the_split_rule(path, shared_data, tmp_path):
    cfg = load_config(TrainConfig, path)
    assert not cfg.data.allow_test_validation, "a shipped config validates on test data"
    key = json.dumps([config_to_dict(cfg.data), cfg.seed], sort_keys=True, default=str)
    if key not in _CHECKED:  # the Paper A configs share their data: built once
        prepare_data(cfg, tmp_path / "run")  # raises ConfigError on a violation
        _CHECKED[key] = json.loads((tmp_path / "run" / "data" / SPLIT_CHECK_FILE).read_text())
    recorded = _CHECKED[key]
    assert recorded["validation_overlap"] == {} and recorded["warning"] is None
    if cfg.data.recipe == "paper-b-hitom":
        # Paper B validates on its own 300-row split, story-disjoint from its train and test splits.
        assert recorded["validation_rows"] == 300 and "recipe 'paper-b-hitom' test set 'hitom'" in recorded["test_sets_checked"]


def test_a_recipe_short_of_its_target_size_says_so_in_the_run(shared_data, tmp_path):
    """Paper B's order-4 subset has fewer stories than 900/300 rows: the run's data folder records the build's note."""
    from tomrl.training.data import RECIPE_NOTES_FILE

    cfg = TrainConfig(run_dir=str(tmp_path / "run"), data=DataConfig(recipe="paper-b-hitom-o4"))
    train, validation = prepare_data(cfg, tmp_path / "run")
    assert (len(train), len(validation)) == (360, 120)
    notes = json.loads((tmp_path / "run" / "data" / RECIPE_NOTES_FILE).read_text())
    assert notes["recipe"] == "paper-b-hitom-o4"
    assert any("train 360 of 900 rows" in note for note in notes["notes"])
