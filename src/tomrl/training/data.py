"""Training and validation examples of a run: built once, frozen in RUN_DIR/data, read on resume.

The data come from one of three sources (``TrainConfig.data``): unified-schema JSONL files, a
paper recipe (``tomrl.loaders.recipes.build_recipe``), or tomrl's generator — optionally as a
curriculum, one generator config per stage, trained in stage order. Generated stages never
share a story with an earlier stage, and the validation set never shares one with training.

The first run writes ``RUN_DIR/data/train.jsonl`` and ``validation.jsonl`` in training order
(shuffled within each stage with the run's seed), then ``complete.json``; ``--resume`` reads them
back, so a resumed run sees exactly the same examples in the same order. Without the marker the
data are rebuilt (a crash between the files must not pass for "no validation set").

    from tomrl.training.data import prepare_data
    train, validation = prepare_data(cfg, run_dir)

Evaluation-only data (OpenToM, whose licence and authors ask that it is used for evaluation only)
is refused in both sets (:func:`tomrl.loaders.registry.refuse_evaluation_only`). The validation set
must be a dev split, never a test set (:mod:`tomrl.training.split_rule`): the check runs when the
data are built, and its finding is frozen beside them in ``split_check.json``. It must not be the
training data either: ``data.validation_files`` that are ``data.train_files`` (the same path, or the
same bytes) or that ask about a story of the training set are refused.

:func:`check_data` checks the data settings in a moment, without building anything (``tomrl study``
and ``tomrl demo`` run it for every run before any work starts).
"""

from __future__ import annotations

import random
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from tomrl.config import ConfigError, load_config
from tomrl.io import atomic_write_json
from tomrl.loaders.base import story_keys
from tomrl.loaders.registry import refuse_evaluation_only
from tomrl.outputs import same_content, same_path
from tomrl.schema import Example, ReadReport, read_examples, write_examples
from tomrl.training.split_rule import SPLIT_CHECK_FILE, check_splits

TRAIN_FILE = "train.jsonl"
VALIDATION_FILE = "validation.jsonl"
SKIPPED_FILE = "skipped.json"  # with data.skip_bad: the bad rows left out, with their reasons
RECIPE_NOTES_FILE = "recipe_notes.json"  # what a recipe's build said (e.g. an order subset short of its target size)
COMPLETE_MARKER = "complete.json"  # written after both files: its presence means the data are frozen


def prepare_data(cfg, run_dir: str | Path) -> tuple[list[Example], list[Example]]:
    """The run's (train, validation) examples: read from RUN_DIR/data if frozen, else built and frozen."""
    data_dir = Path(run_dir) / "data"
    train_path, validation_path = data_dir / TRAIN_FILE, data_dir / VALIDATION_FILE
    if (data_dir / COMPLETE_MARKER).exists():
        train = read_examples(train_path)
        validation = read_examples(validation_path) if validation_path.exists() else []
        return train, validation
    # No marker: nothing frozen yet, or a crash cut the freezing short. Rebuild from scratch
    # (the build is deterministic in the seed), never reading half of the files.
    shutil.rmtree(data_dir, ignore_errors=True)
    skipped: list[str] = []
    recipe_tests: dict[str, list[Example]] = {}
    recipe_notes: list[str] = []
    train, validation = build_data(cfg, data_dir, skipped, recipe_tests, recipe_notes)
    refuse_evaluation_only([*train, *validation], "the training or validation set")
    if cfg.data.max_train_examples is not None:
        train = train[: cfg.data.max_train_examples]
    if cfg.data.max_validation_examples is not None:
        validation = validation[: cfg.data.max_validation_examples]
    if not train:
        raise ConfigError("the training set is empty: check data.* in the config")
    if cfg.data.validation_files:
        refuse_shared_stories(train, validation, cfg.data)
    split_check = check_splits(train, validation, cfg.data, _validation_source(cfg.data), cfg.data.recipe, recipe_tests)
    write_examples(train_path, train)
    if validation:
        write_examples(validation_path, validation)
    atomic_write_json(data_dir / SPLIT_CHECK_FILE, split_check.to_dict())
    if recipe_notes:
        atomic_write_json(data_dir / RECIPE_NOTES_FILE, {"recipe": cfg.data.recipe, "notes": recipe_notes})
    if skipped:
        atomic_write_json(data_dir / SKIPPED_FILE, {"skipped_lines": len(skipped), "reasons": skipped})
    atomic_write_json(data_dir / COMPLETE_MARKER, {"train": len(train), "validation": len(validation), "skipped_lines": len(skipped)})  # written last
    return train, validation


def build_data(
    cfg,
    data_dir: Path,
    skipped: list[str] | None = None,
    recipe_tests: dict[str, list[Example]] | None = None,
    recipe_notes: list[str] | None = None,
) -> tuple[list[Example], list[Example]]:
    """(train, validation) from the configured source; bad rows skipped (``data.skip_bad``) are appended to
    ``skipped``, a recipe's test sets are put into ``recipe_tests`` (for the split rule) and its build notes
    (e.g. an order subset short of Paper B's size) into ``recipe_notes``."""
    data = cfg.data
    rng = random.Random(cfg.seed)
    skipped = skipped if skipped is not None else []
    refuse_same_files(data)

    def read(paths: Sequence[str]) -> list[Example]:
        return _read_all(paths, data.skip_bad, skipped)

    if data.train_files:
        train = read(data.train_files)
        validation = read(data.validation_files)
        return _maybe_shuffle(train, data.shuffle, rng), validation
    if data.recipe is not None:
        train, validation, tests, notes = _from_recipe(data.recipe)
        if recipe_tests is not None:
            recipe_tests.update(tests)
        if recipe_notes is not None:
            recipe_notes.extend(notes)
        if data.validation_files:
            validation = read(data.validation_files)
        return _maybe_shuffle(train, data.shuffle, rng), validation
    if data.generate is not None:
        train, validation = _generate(cfg, data_dir, rng)
        if data.validation_files:
            validation = read(data.validation_files)
        return train, validation
    raise ConfigError("no training data: set data.train_files, data.recipe or data.generate")


def check_data(cfg) -> None:
    """Check ``cfg.data`` (``cfg``: a TrainConfig) without building anything: the data files exist and validation
    is not training, the recipe is known, and the generator config of every curriculum stage and of the validation
    set loads. Raises ConfigError naming the ``data.*`` key."""
    data = cfg.data
    for key in ("train_files", "validation_files"):
        for path in getattr(data, key):
            if not Path(path).expanduser().is_file():
                raise ConfigError(f"data.{key}: {path}: file not found")
    refuse_same_files(data)
    if data.recipe is not None:
        from tomrl.loaders.recipes import load_recipe

        try:
            load_recipe(data.recipe)
        except (ConfigError, OSError) as error:
            raise ConfigError(f"data.recipe: {error}") from None
    if data.generate is not None:
        from tomrl.generators.config import GenerateConfig

        base = _generator_base(data)
        keys = [f"data.stages[{index}]" if data.stages else "data.generate_overrides" for index in range(len(data.stages or [[]]))]
        checks = [(key, _stage_overrides(cfg, index, [])) for index, key in enumerate(keys)]
        checks.append(("data.validation_overrides", _validation_overrides(cfg, [])))
        for key, overrides in checks:
            try:
                load_config(GenerateConfig, base, overrides)
            except (ConfigError, ValueError, OSError) as error:
                raise ConfigError(f"{key} (data.generate {data.generate}): {str(error).splitlines()[0]}") from None


def refuse_same_files(data) -> None:
    """ConfigError when a file of ``data.validation_files`` is one of ``data.train_files``: the same path (resolved)
    or the same bytes. Validating on the training data would pick best/ on what the model trained on."""
    for validation_file in data.validation_files:
        for train_file in data.train_files:
            how = "the same file as" if same_path(validation_file, train_file) else "a copy of" if same_content(validation_file, train_file) else None
            if how:
                raise ConfigError(
                    f"data.validation_files {validation_file} is {how} data.train_files {train_file}: validation must be held "
                    "out of the training data; give validation_files of other stories (or none)"
                )


def refuse_shared_stories(train: Sequence[Example], validation: Sequence[Example], data) -> None:
    """ConfigError when a question of ``data.validation_files`` is about a story of the training set (compared as
    the split rule compares stories, :func:`tomrl.loaders.base.story_keys`): its validation accuracy would
    measure memory, and best/ would be picked on training stories."""
    train_keys = {key for example in train for key in story_keys(example)}
    shared = [example for example in validation if story_keys(example) & train_keys]
    if shared:
        source = "data.train_files" if data.train_files else f"data.recipe {data.recipe}" if data.recipe else f"data.generate {data.generate}"
        raise ConfigError(
            f"data.validation_files ({', '.join(data.validation_files)}): {len(shared)} of {len(validation)} questions are about "
            f"stories of the training data ({source}), the first: id {shared[0].id!r}; validation must be held out of the "
            "training stories: split by story, not by question"
        )


def _read_all(paths: Sequence[str], skip_bad: bool = False, skipped: list[str] | None = None) -> list[Example]:
    """Examples of ``paths`` (schema and answer checks); with ``skip_bad`` bad rows go to ``skipped``."""
    from tomrl.data_checks import read_checked_examples

    examples: list[Example] = []
    seen: set[str] = set()
    for path in paths:
        report = ReadReport(str(path))
        read = read_checked_examples(path, skip_bad=skip_bad, report=report)
        if skipped is not None:
            skipped.extend(report.skipped)
        for example in read:
            if example.id in seen:
                raise ConfigError(f"{path}: id {example.id!r} already used by an earlier data file")
            seen.add(example.id)
            examples.append(example)
    return examples


def _maybe_shuffle(examples: list[Example], shuffle: bool, rng: random.Random) -> list[Example]:
    examples = list(examples)
    if shuffle:
        rng.shuffle(examples)
    return examples


def _validation_source(data) -> str:
    """Where the validation set comes from, as the split rule's messages name it."""
    if data.validation_files:
        return "data.validation_files " + ", ".join(data.validation_files)
    if data.recipe is not None:
        return f"recipe '{data.recipe}'"
    return "data.generate's validation set"


def _from_recipe(name: str) -> tuple[list[Example], list[Example], dict[str, list[Example]], list[str]]:
    from tomrl.loaders.recipes import build, load_recipe

    built = build(load_recipe(name))
    splits = built.splits
    tests = splits.get("test", {})
    return _examples_of(splits, "train"), _examples_of(splits, "validation"), dict(tests), list(built.notes)


def _examples_of(built, split: str) -> list[Example]:
    """Examples of ``split`` from whatever build_recipe returned (a mapping of splits or a list)."""
    if isinstance(built, dict):
        return list(built.get(split, []))
    for attribute in (split, f"{split}_examples"):
        if hasattr(built, attribute):
            return list(getattr(built, attribute))
    return [e for e in built if e.split == split]


def _generate(cfg, data_dir: Path, rng: random.Random) -> tuple[list[Example], list[Example]]:
    """Generate each curriculum stage (stories disjoint from earlier stages), then the validation set."""
    from tomrl.generators import generate
    from tomrl.generators.config import GenerateConfig

    data = cfg.data
    base = _generator_base(data)
    stage_dir = data_dir / "stages"
    stage_files: list[str] = []
    train: list[Example] = []
    for index in range(len(data.stages or [[]])):
        gen_cfg = load_config(GenerateConfig, base, _stage_overrides(cfg, index, stage_files))
        stage = [_tag(e, f"stage{index}", "train") for e in generate(gen_cfg)]
        stage = _maybe_shuffle(stage, data.shuffle, rng)
        path = stage_dir / f"stage{index}.jsonl"
        write_examples(path, stage)
        stage_files.append(str(path))
        train.extend(stage)
    overrides = _validation_overrides(cfg, stage_files)
    validation = [_tag(e, "validation", "validation") for e in generate(load_config(GenerateConfig, base, overrides))]
    return train, validation


def _generator_base(data) -> str | None:
    return None if data.generate == "default" else data.generate


def _stage_overrides(cfg, index: int, stage_files: list[str]) -> list[str]:
    """The generator overrides of curriculum stage ``index`` (stories of ``stage_files`` excluded)."""
    data = cfg.data
    overrides = [*data.generate_overrides, *(data.stages[index] if data.stages else [])]
    return _with_defaults(overrides, seed=cfg.seed * 1000 + index, splits="{train: 1.0}", exclude=stage_files)


def _validation_overrides(cfg, stage_files: list[str]) -> list[str]:
    data = cfg.data
    overrides = [*data.generate_overrides, *data.validation_overrides]
    return _with_defaults(overrides, seed=cfg.seed * 1000 + 999, splits="{validation: 1.0}", exclude=stage_files)


def _with_defaults(overrides: list[str], seed: int, splits: str, exclude: list[str]) -> list[str]:
    keys = {item.split("=", 1)[0].strip() for item in overrides}
    result = list(overrides)
    if "seed" not in keys:
        result.append(f"seed={seed}")
    if "split_fractions" not in keys:
        result.append(f"split_fractions={splits}")
    if exclude and "exclude_stories_from" not in keys:
        result.append("exclude_stories_from=[" + ", ".join(f"'{p}'" for p in exclude) + "]")
    return result


def _tag(example: Example, prefix: str, split: str) -> Example:
    """Make ids unique across stages and mark the split the example is used as."""
    return replace(example, id=f"{prefix}-{example.id}", split=split)
