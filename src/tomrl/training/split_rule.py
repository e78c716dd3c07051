"""The split rule: training validates on a dev split, never on a test set.

Validation during training monitors the run, picks ``best/`` and would stop it early, so it *selects*
on its data: a validation set that shares stories with a test set leaks that test set into the
checkpoint reported on it. :func:`check_splits` runs when a run's data are built (before the run
folder exists) and raises :class:`~tomrl.config.ConfigError` when the validation set shares a story
with a known test set, naming the data source and how many stories overlap:

    check = check_splits(train, validation, cfg.data, source="recipe 'tomrl-paper'", recipe_tests=tests)
    check.to_dict()      # written to RUN_DIR/data/split_check.json, and into summary.json

Known test sets: the test splits of the run's own recipe, and every evaluation benchmark of
:data:`tomrl.evaluation.benchmarks.BENCHMARKS` read by a loader of :mod:`tomrl.loaders.registry`
whose data are on this machine (in the data root; missing ones are skipped, generated held-out sets
and user files are not checked). Stories are compared by :func:`tomrl.loaders.base.story_keys`
(whitespace-normalised text, and an infilled story's structured form). Each benchmark's keys are
read once per process (about 3 s for all of them).

A test set that the *training* split already shares stories with is not a clean test of the run
whatever validation does (Paper A's release trains on every 4th-order story; Paper B's Hi-ToM pool
is those same stories): the check does not fail on it but records it under ``training_overlap``, so
a report can say its scores are not clean.

``data.allow_test_validation: true`` lets a run validate on test stories anyway (e.g. to reproduce
veRL's validation on Paper A's test file); it is recorded, and :func:`validation_on_test_warning` gives
the line that ``tomrl train``'s summary and ``tomrl report`` put first.
"""

from __future__ import annotations

import functools
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

from tomrl.config import ConfigError
from tomrl.schema import Example

SPLIT_CHECK_FILE = "split_check.json"  # under RUN_DIR/data, written with the frozen data


@dataclass
class SplitCheck:
    """What the split rule found for one run's data."""

    source: str  # where the validation set came from (recipe, files, generator)
    validation_rows: int
    test_sets_checked: list[str]
    validation_overlap: dict[str, int] = field(default_factory=dict)  # clean test set -> stories shared with validation
    training_overlap: dict[str, int] = field(default_factory=dict)  # test set -> stories shared with training (not clean)
    allow_test_validation: bool = False

    def to_dict(self) -> dict:
        return {"warning": self.warning(), **asdict(self)}

    def warning(self) -> str | None:
        """The first line of every report of a run that validated on test stories; None otherwise."""
        if not self.validation_overlap:
            return None
        shared = ", ".join(f"{n} stories with {name}" for name, n in self.validation_overlap.items())
        return (
            f"WARNING: validation (and best/ selection) used test data: the validation set ({self.source}) shares "
            f"{shared}; allowed by data.allow_test_validation. Scores on those test sets are not clean."
        )


def _keys(rows: Sequence[Example]) -> set[str]:
    from tomrl.loaders.base import story_keys

    return {key for row in rows for key in story_keys(row)}


@functools.lru_cache(maxsize=None)
def _benchmark_keys(loader: str, options: str, data_root: str) -> frozenset[str] | None:
    """Story keys of one loader's data under ``data_root``; None when its data are not there."""
    from tomrl.loaders.base import DataMissingError
    from tomrl.loaders.registry import load

    try:
        return frozenset(_keys(load(loader, **json.loads(options))))
    except DataMissingError:
        return None


def known_test_sets(recipe_name: str | None = None, recipe_tests: dict[str, list[Example]] | None = None) -> dict[str, frozenset[str]]:
    """Name -> story keys of every known test set present here (see the module docstring)."""
    from tomrl.evaluation.benchmarks import BENCHMARKS
    from tomrl.loaders.base import data_root
    from tomrl.loaders.registry import LOADERS

    sets: dict[str, frozenset[str]] = {}
    for name, rows in (recipe_tests or {}).items():
        sets[f"recipe '{recipe_name}' test set '{name}'"] = frozenset(_keys(rows))
    root = str(data_root())
    for benchmark in BENCHMARKS.values():
        if benchmark.loader not in LOADERS:
            continue  # generated held-out sets and user-supplied files
        keys = _benchmark_keys(benchmark.loader, json.dumps(benchmark.loader_options, sort_keys=True), root)
        if keys is not None:
            sets[f"benchmark '{benchmark.name}'"] = keys
    return sets


def check_splits(
    train: Sequence[Example],
    validation: Sequence[Example],
    data: Any,
    source: str,
    recipe_name: str | None = None,
    recipe_tests: dict[str, list[Example]] | None = None,
) -> SplitCheck:
    """Apply the split rule to a run's data (``data``: its DataConfig); raise ConfigError on a violation."""
    allowed = bool(data.allow_test_validation)
    if not validation:
        return SplitCheck(source, 0, [], allow_test_validation=allowed)
    sets = known_test_sets(recipe_name, recipe_tests)
    train_keys, validation_keys = _keys(train), _keys(validation)
    check = SplitCheck(source, len(validation), sorted(sets), allow_test_validation=allowed)
    for name, keys in sets.items():
        in_training = len(train_keys & keys)
        if in_training:
            check.training_overlap[name] = in_training
            continue
        shared = len(validation_keys & keys)
        if shared:
            check.validation_overlap[name] = shared
    if check.validation_overlap and not allowed:
        shared = ", ".join(f"{n} stories with {name}" for name, n in check.validation_overlap.items())
        raise ConfigError(
            f"the validation set ({source}) shares {shared}. Validation picks best/ and watches the run, so it must be "
            "a dev split held out of the training stories (e.g. a recipe component's validation_share), never a test "
            "set. To run anyway, set data.allow_test_validation=true (recorded; every report of the run then warns)"
        )
    return check


def read_split_check(run_dir: str | Path) -> dict | None:
    """The split check recorded with a run's frozen data (None for runs made before it existed)."""
    path = Path(run_dir) / "data" / SPLIT_CHECK_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def validation_on_test_warning(run_dir: str | Path) -> str | None:
    """The warning line for a training run that validated on test stories, else None."""
    recorded = read_split_check(run_dir)
    return recorded.get("warning") if recorded else None


def checkpoint_warning(model: str | Path) -> str | None:
    """The warning of the training run a model folder comes from (``RUN_DIR/best``, ``final``,
    ``checkpoints/checkpoint-N``), for ``tomrl eval``'s log and results.json; None otherwise."""
    folder = Path(model).expanduser()
    if not folder.is_dir():
        return None  # a hub id or an embedded name
    for run_dir in (folder.parent, folder.parent.parent):
        warning = validation_on_test_warning(run_dir)
        if warning:
            return f"{warning} (model {model} comes from training run {run_dir})"
    return None
