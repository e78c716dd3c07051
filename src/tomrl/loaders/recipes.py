"""Recipes: the exact train / validation / test data of an experiment, declared as YAML data.

    tomrl data load recipe:tomrl-paper --out data/tomrl-paper       # writes train.jsonl, validation.jsonl,
                                                                     # test/<name>.jsonl, manifest.json
    tomrl data load recipe:configs/recipes/paper-b-hitom.yaml --out data/paper-b-hitom

    from tomrl.loaders.recipes import build_recipe, load_recipe
    splits = build_recipe("paper-b-all")    # {"train": [...], "validation": [...], "test": {"hitom": [...], …}}

A recipe (``configs/recipes/<name>.yaml``) is a list of *components*. Each takes rows from a
loader (``loader: hitom`` …, see :mod:`tomrl.loaders.registry`) or from tomrl's generator
(``generate: {…GenerateConfig fields…}``), filters them (orders, question types, metadata
values, stories of earlier components), and either puts them into one split (``split: test``,
optionally ``count`` rows) or divides them *by story* into several splits (``split_counts:
{train: 900, validation: 300, test: 300}``), so no story is shared between splits. ``strata``
fixes the mix inside each split (e.g. 70 % ToM questions, 30 % simpler ones). Test parts are
named test sets (the component's name); training and validation parts are pooled.
``validation_share: 0.05`` on a ``split: train`` component holds 5 % of its stories out of training
as a dev set (the validation split): training monitors and picks ``best/`` on it, never on a test
set (see :mod:`tomrl.training.split_rule`).

``extends: other-recipe`` starts from another recipe and replaces the keys given, so Paper B's
mixtures share one declaration of their data and differ only in ``train_on`` (which components
are trained on; the others keep only their test part, drawn exactly as when they are trained on)
and ``train_orders`` (orders kept in a component's train and validation parts: those are drawn
afresh from the same train and validation stories at the component's full ``split_counts``, Paper
B's 900 / 300 for its Hi-ToM order subsets, and where the stories hold too few rows of those orders
every one of them is taken and the build's notes say so).

Rules enforced here: a data set whose card is evaluation-only (OpenToM) can never feed a training
or validation split (:func:`tomrl.loaders.registry.refuse_evaluation_only`); a component used for
training fails loudly when its data are missing (FANToM says how to obtain it), while a test-only
component marked ``optional`` is skipped with a note; ``forbid_story_overlap: true`` makes the build
fail if any story is shared between splits; every row's answer must pass
:func:`tomrl.data_checks.validate_answers_in_story` (in location data sets the answer is a place the
story names).

``write_recipe`` is all or nothing: it writes ``OUT.partial`` and renames it to ``OUT``, replacing
an earlier recipe folder as a whole (never a folder without ``manifest.json``; see
:func:`tomrl.io.write_folder_atomically`).
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from tomrl.config import ConfigError, config_from_dict, read_yaml, setting
from tomrl.data_checks import validate_answers_in_story
from tomrl.io import BadInputError, atomic_write_json, atomic_write_text, recover_interrupted_publish, write_folder_atomically
from tomrl.loaders import registry
from tomrl.loaders.base import DataMissingError, story_key, story_keys, story_lines
from tomrl.schema import SPLITS, Example, write_examples

RECIPES_DIR = Path(__file__).resolve().parents[3] / "configs" / "recipes"
Split = Literal["train", "validation", "test"]


@dataclass(frozen=True)
class Stratum:
    name: str = setting(help="name of this share of a split, e.g. 'tom' or 'simple'")
    share: float = setting(help="fraction of every split's rows drawn from this stratum (the shares of a component sum to 1)")
    orders: list[int] | None = setting(None, help="rows of these orders belong to the stratum (null: any order)")
    question_types: list[str] | None = setting(None, help="rows whose question_type starts with one of these (null: any)")

    def __post_init__(self) -> None:
        if not 0 < self.share <= 1:
            raise ValueError(f"stratum '{self.name}': share must be in (0, 1], got {self.share}")

    def matches(self, example: Example) -> bool:
        if self.orders is not None and example.order not in self.orders:
            return False
        return self.question_types is None or example.question_type.startswith(tuple(self.question_types))


@dataclass(frozen=True)
class Component:
    name: str = setting(help="name of the component; its test part is the test set of this name")
    loader: str | None = setting(None, help="loader to read rows from (tomrl data load --list); give loader or generate")
    generate: dict[str, Any] | None = setting(None, help="GenerateConfig fields for tomrl's generator (instead of a loader)")
    path: str | None = setting(None, help="file or folder for the loader (default: the data root)")
    options: dict[str, Any] = setting(default_factory=dict, help="loader options, e.g. {split: train} for tomi")
    orders: list[int] | None = setting(None, help="keep only rows of these orders")
    question_types: list[str] | None = setting(None, help="keep only rows whose question_type starts with one of these")
    exclude_question_types: list[str] = setting(default_factory=list, help="drop rows whose question_type starts with one of these")
    meta_equals: dict[str, Any] = setting(default_factory=dict, help="keep only rows whose meta[key] equals the value, e.g. {binary: false}")
    exclude_stories_of: list[str] = setting(
        default_factory=list, help="drop rows whose story (whitespace-normalised) occurs in these earlier components"
    )
    split: Split | None = setting(None, help="put the (sampled) rows into this one split; give split or split_counts")
    count: int | None = setting(None, help="with split: sample this many rows (null: all)")
    split_counts: dict[str, int] | None = setting(
        None, help="divide the rows by story into splits of these sizes, e.g. {train: 900, validation: 300, test: 300}"
    )
    strata: list[Stratum] | None = setting(None, help="fixed mix of every split: shares of row groups (by order / question type)")
    validation_share: float | None = setting(
        None,
        help="with split: train, hold this fraction of the component's stories out of training as a dev set: all "
        "their rows go to the validation split (seeded, story-disjoint from training), e.g. 0.05",
    )
    story_format: Literal["keep", "lines", "spaces"] = setting(
        "keep",
        help="rewrite the stories: keep them, one sentence per line without line numbers, or joined by spaces "
        "without line numbers (the form of ToM-RL's training stories)",
    )
    optional: bool = setting(False, help="a test-only component whose data may be missing: skipped with a note instead of failing")
    seed: int | None = setting(None, help="sampling seed (null: the recipe's seed)")

    def __post_init__(self) -> None:
        where = f"component '{self.name}'"
        if (self.loader is None) == (self.generate is None):
            raise ValueError(f"{where}: give exactly one of loader or generate")
        if (self.split is None) == (self.split_counts is None):
            raise ValueError(f"{where}: give exactly one of split or split_counts")
        if self.count is not None and (self.split is None or self.count < 1):
            raise ValueError(f"{where}: count needs split and must be at least 1")
        if self.split_counts is not None:
            unknown = sorted(set(self.split_counts) - set(SPLITS))
            if unknown:
                raise ValueError(f"{where}: split_counts: unknown split '{unknown[0]}' (use {', '.join(SPLITS)})")
            if not self.split_counts or any(n < 0 for n in self.split_counts.values()) or sum(self.split_counts.values()) == 0:
                raise ValueError(f"{where}: split_counts must give non-negative sizes that are not all 0")
        if self.strata is not None:
            total = sum(s.share for s in self.strata)
            if abs(total - 1) > 1e-6:
                raise ValueError(f"{where}: strata shares must sum to 1, got {total}")
            if self.split is not None and self.count is None:
                raise ValueError(f"{where}: strata need count (with split) or split_counts")
        if self.path is not None and self.loader is None:
            raise ValueError(f"{where}: path is for loaders, not generate")
        if self.validation_share is not None:
            if self.split != "train":
                raise ValueError(f"{where}: validation_share needs split: train (it carves a dev set out of training stories)")
            if not 0 < self.validation_share < 1:
                raise ValueError(f"{where}: validation_share must be in (0, 1), got {self.validation_share}")

    def splits(self) -> tuple[str, ...]:
        if self.split is not None:
            return (self.split, "validation") if self.validation_share is not None else (self.split,)
        return tuple(s for s, n in (self.split_counts or {}).items() if n > 0)


@dataclass(frozen=True)
class Task:
    name: str = setting(help="the task's name in results (after the recipe's: paper-b-all:hitom-order1)")
    title: str = setting(help="the task's name in tables, e.g. the paper's ('HiToM 1st order')")
    component: str = setting(help="the component whose test part the task is")
    orders: list[int] | None = setting(None, help="only the test rows of these orders (null: all of them)")


@dataclass(frozen=True)
class Recipe:
    name: str = setting(help="recipe name (the file name under configs/recipes/)")
    description: str = setting("", help="what the recipe reproduces and how it departs from the paper")
    paper: Literal["A", "B", "tomrl"] = setting("tomrl", help="the paper whose data it reproduces (A: ToM-RL, B: Sarangi & Salam) or tomrl")
    extends: str | None = setting(None, help="start from this recipe (name or path) and replace the keys given here")
    seed: int = setting(0, help="seed of every sampling step (components may override)")
    components: list[Component] = setting(default_factory=list, help="the data: loaders or generator runs, filters and split sizes")
    train_on: list[str] | None = setting(
        None, help="components whose train/validation parts are kept (null: all); the others contribute their test part only"
    )
    train_orders: dict[str, list[int]] = setting(
        default_factory=dict,
        help="component -> orders kept in its train and validation parts, drawn at the component's full split_counts from the "
        "same stories (the test keeps all orders; a note says where the stories hold too few rows of these orders)",
    )
    forbid_story_overlap: bool = setting(False, help="fail the build if a story occurs in two splits (clean recipes)")
    tasks: list[Task] = setting(
        default_factory=list,
        help="how `tomrl eval --benchmark recipe:NAME:test` reports the test split: named tasks (a component's test part, or "
        "its rows of some orders), e.g. Paper B's 12; empty: one task per test component",
    )

    def __post_init__(self) -> None:
        if self.extends is not None:
            return  # validated once resolved (load_recipe)
        if not self.components:
            raise ValueError(f"recipe '{self.name}': no components")
        names = [c.name for c in self.components]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"recipe '{self.name}': component name '{duplicates[0]}' is used twice")
        for key in list(self.train_on or []) + list(self.train_orders):
            if key not in names:
                raise ValueError(f"recipe '{self.name}': train_on/train_orders name '{key}', which is not a component ({', '.join(names)})")
        tested = [c.name for c in self.components if "test" in c.splits()]
        for task in self.tasks:
            if task.component not in tested:
                raise ValueError(f"recipe '{self.name}': task '{task.name}' names component '{task.component}', which has no test part "
                                 f"(components with one: {', '.join(tested)})")
        task_names = [t.name for t in self.tasks]
        if len(set(task_names)) != len(task_names):
            raise ValueError(f"recipe '{self.name}': task names must be unique, got {task_names}")
        for index, component in enumerate(self.components):
            for other in component.exclude_stories_of:
                if other not in names[:index]:
                    raise ValueError(f"component '{component.name}': exclude_stories_of '{other}' must name an earlier component")
        for component in self.components:
            if component.loader is None:
                continue
            if component.loader not in registry.LOADERS:
                raise ValueError(f"component '{component.name}': unknown loader '{component.loader}' (known: {', '.join(registry.LOADERS)})")
            if registry.LOADERS[component.loader].card.evaluation_only:
                used = [s for s in component.splits() if s in ("train", "validation") and self.trains_on(component.name)]
                if used:
                    raise ValueError(
                        f"component '{component.name}': data set '{component.loader}' is evaluation-only (its authors forbid "
                        f"training or fine-tuning on it) and cannot go into the {used[0]} split; use it as a test set only"
                    )

    def trains_on(self, component_name: str) -> bool:
        return self.train_on is None or component_name in self.train_on

    def component(self, name: str) -> Component:
        for c in self.components:
            if c.name == name:
                return c
        raise KeyError(name)


# ------------------------------------------------------------------------------------ loading


def recipe_names() -> list[str]:
    return sorted(p.stem for p in RECIPES_DIR.glob("*.yaml"))


def _recipe_file(name_or_path: str | Path) -> Path:
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists():
        return path
    candidate = RECIPES_DIR / f"{name_or_path}.yaml"
    if not candidate.is_file():
        raise ConfigError(f"unknown recipe '{name_or_path}'; known: {', '.join(recipe_names())} (or give a YAML path)")
    return candidate


def _resolved_dict(name_or_path: str | Path, seen: tuple[str, ...] = ()) -> tuple[dict, str]:
    file = _recipe_file(name_or_path)
    if str(file.resolve()) in seen:
        raise ConfigError(f"{file}: 'extends' loops back to itself")
    data = read_yaml(file)
    source = str(file)
    base_name = data.get("extends")
    if base_name is None:
        return data, source
    # A bare name is looked up beside the extending file first, then among the shipped recipes.
    sibling = file.parent / f"{base_name}.yaml"
    base_file = sibling if sibling.is_file() else _recipe_file(str(base_name))
    base, base_source = _resolved_dict(base_file, seen + (str(file.resolve()),))
    merged = {**base, **{k: v for k, v in data.items() if k != "extends"}}
    return merged, f"{source} (extends {base_source})"


def load_recipe(name_or_path: str | Path) -> Recipe:
    """The recipe of that name (``configs/recipes/<name>.yaml``) or file, with ``extends`` resolved."""
    data, source = _resolved_dict(name_or_path)
    return config_from_dict(Recipe, data, source)


# ------------------------------------------------------------------------------------ building


def _seed_rng(seed: int, component: str) -> random.Random:
    return random.Random(f"{seed}:{component}")  # str seeds are hashed deterministically (sha512)


def _targets(count: int, strata: list[Stratum] | None) -> list[int]:
    """Rows per stratum for a split of ``count`` rows (largest remainders, so they sum to count)."""
    if not strata:
        return [count]
    raw = [count * s.share for s in strata]
    base = [int(x) for x in raw]
    order = sorted(range(len(raw)), key=lambda i: raw[i] - base[i], reverse=True)
    for i in order[: count - sum(base)]:
        base[i] += 1
    return base


def _stratum_of(example: Example, strata: list[Stratum] | None) -> int | None:
    if not strata:
        return 0
    for index, stratum in enumerate(strata):
        if stratum.matches(example):
            return index
    return None


def _sample(rows: list[Example], count: int | None, strata: list[Stratum] | None, rng: random.Random, where: str) -> list[Example]:
    if count is None:
        return rows
    groups: dict[int, list[int]] = {}
    for position, row in enumerate(rows):
        stratum = _stratum_of(row, strata)
        if stratum is not None:
            groups.setdefault(stratum, []).append(position)
    chosen: list[int] = []
    for index, target in enumerate(_targets(count, strata)):
        available = groups.get(index, [])
        if len(available) < target:
            label = f" stratum '{strata[index].name}'" if strata else ""
            raise ConfigError(f"{where}:{label} needs {target} rows, only {len(available)} are available after filtering")
        chosen.extend(rng.sample(available, target))
    return [rows[p] for p in sorted(chosen)]  # keep the source's order: stable and readable


def _filter(rows: list[Example], c: Component, excluded_stories: set[str]) -> list[Example]:
    kept = []
    for row in rows:
        if c.orders is not None and row.order not in c.orders:
            continue
        if c.question_types is not None and not row.question_type.startswith(tuple(c.question_types)):
            continue
        if c.exclude_question_types and row.question_type.startswith(tuple(c.exclude_question_types)):
            continue
        if any(row.meta.get(k) != v for k, v in c.meta_equals.items()):
            continue
        if excluded_stories and story_keys(row) & excluded_stories:
            continue
        kept.append(row)
    return kept


def _reformat(rows: list[Example], story_format: str) -> list[Example]:
    if story_format == "keep":
        return rows
    if story_format == "spaces":
        return [r.replace(story=story_key(r.story)) for r in rows]
    return [r.replace(story="\n".join(story_lines(r.story))) for r in rows]


def _rows_of(c: Component, cache: dict | None = None) -> list[Example]:
    if c.loader is not None:
        key = (c.loader, c.path, repr(sorted(c.options.items())))
        if cache is None or key not in cache:
            rows = registry.load(c.loader, c.path, **c.options)
            if cache is None:
                return rows
            cache[key] = rows
        return cache[key]
    from tomrl.generators import generate  # imported here: it takes half a second, and most recipes only read files
    from tomrl.generators.config import GenerateConfig

    cfg = config_from_dict(GenerateConfig, dict(c.generate or {}), f"component '{c.name}'.generate")
    return list(generate(cfg))


def _story_groups(rows: list[Example]) -> dict[int, str]:
    """Row index -> story group: rows sharing a story_id or a story text (whitespace-normalised, or the
    structured form of an infilled story) are one story, whatever the loader's ids say."""
    parent: dict[str, str] = {}

    def find(node: str) -> str:
        while parent.setdefault(node, node) != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for row in rows:
        nodes = [f"id:{row.story_id}"] + [f"text:{k}" for k in sorted(story_keys(row))]
        for node in nodes[1:]:
            a, b = find(nodes[0]), find(node)
            if a != b:
                parent[max(a, b)] = min(a, b)
    return {i: find(f"id:{row.story_id}") for i, row in enumerate(rows)}


def _divide_by_story(rows: list[Example], c: Component, rng: random.Random, where: str) -> tuple[dict[str, list[Example]], dict[str, list[Example]]]:
    """Stories shuffled and cut in proportion to split_counts; then each split sampled to its size.
    Returns the sampled parts and each split's whole pool of rows (all rows of its stories)."""
    group = _story_groups(rows)
    stories = sorted(set(group.values()))
    rng.shuffle(stories)
    counts = {s: n for s, n in (c.split_counts or {}).items() if n > 0}
    total = sum(counts.values())
    owner: dict[str, str] = {}
    start = 0
    names = list(counts)
    for i, split in enumerate(names):
        end = len(stories) if i == len(names) - 1 else start + round(len(stories) * counts[split] / total)
        for story in stories[start:end]:
            owner[story] = split
        start = end
    parts, pools = {}, {}
    for split, n in counts.items():
        pools[split] = [r for i, r in enumerate(rows) if owner[group[i]] == split]
        parts[split] = _sample(pools[split], n, c.strata, rng, f"{where}, {split} split")
    return parts, pools


def _order_subset(pool: list[Example], count: int, orders: list[int], strata: list[Stratum] | None, rng: random.Random) -> tuple[list[Example], str | None]:
    """Up to ``count`` rows of ``orders`` from a split's whole pool (the rows of its stories), the
    component's strata kept among those orders with their shares rescaled; where a stratum has
    fewer rows than its target, all of them, and a line saying so (None when the target is met)."""
    rows = [r for r in pool if r.order in orders]
    kept = [s for s in strata or [] if s.orders is None or set(s.orders) & set(orders)]
    if strata and not kept:
        kept = list(strata)
    if kept:
        total = sum(s.share for s in kept)
        kept = [dataclasses.replace(s, share=s.share / total) for s in kept]
    groups: dict[int, list[int]] = {}
    for position, row in enumerate(rows):
        stratum = _stratum_of(row, kept or None)
        if stratum is not None:
            groups.setdefault(stratum, []).append(position)
    chosen: list[int] = []
    short = []
    for index, target in enumerate(_targets(count, kept or None)):
        available = groups.get(index, [])
        take = min(target, len(available))
        if take < target:
            short.append(f"{kept[index].name if kept else 'rows'} {len(available)} of {target}")
        chosen.extend(rng.sample(available, take))
    picked = [rows[p] for p in sorted(chosen)]
    return picked, ("; ".join(short) if short else None)


def _hold_out_stories(rows: list[Example], share: float, rng: random.Random) -> dict[str, list[Example]]:
    """A dev set from the training distribution: ``share`` of the stories (at least one), drawn with
    ``rng``, and all their rows; the rest stay in training. Source order is kept in both."""
    group = _story_groups(rows)
    stories = sorted(set(group.values()))
    held_out = set(rng.sample(stories, max(1, round(len(stories) * share))))
    return {
        "train": [r for i, r in enumerate(rows) if group[i] not in held_out],
        "validation": [r for i, r in enumerate(rows) if group[i] in held_out],
    }


@dataclass
class BuildResult:
    splits: dict[str, Any]  # {"train": [...], "validation": [...], "test": {name: [...]}}
    notes: list[str]
    components: dict[str, dict[str, int]]  # component -> split -> rows


def build(recipe: Recipe) -> BuildResult:
    """Materialise a resolved recipe."""
    train: list[Example] = []
    validation: list[Example] = []
    test: dict[str, list[Example]] = {}
    notes: list[str] = []
    summary: dict[str, dict[str, int]] = {}
    stories_of: dict[str, set[str]] = {}
    cache: dict = {}  # several components often read the same data set (OpenToM by genre)
    for c in recipe.components:
        where = f"recipe '{recipe.name}', component '{c.name}'"
        trains = recipe.trains_on(c.name) and any(s in ("train", "validation") for s in c.splits())
        try:
            rows = _rows_of(c, cache)
        except DataMissingError as err:
            if c.optional and not trains:
                notes.append(f"skipped test set '{c.name}': {err}")
                continue
            raise ConfigError(f"{where}: {err}") from None
        except (BadInputError, ConfigError) as err:
            raise ConfigError(f"{where}: {err}") from None
        rows = _reformat(rows, c.story_format)
        try:  # loaders check their rows; this also covers generated rows and rewritten stories
            rows = validate_answers_in_story(rows)
        except BadInputError as err:
            raise ConfigError(f"{where}: {err}") from None
        excluded = set().union(*(stories_of.get(o, set()) for o in c.exclude_stories_of)) if c.exclude_stories_of else set()
        rows = _filter(rows, c, excluded)
        if not rows:
            raise ConfigError(f"{where}: no rows left after filtering")
        rng = _seed_rng(c.seed if c.seed is not None else recipe.seed, c.name)
        if c.split is not None:
            parts = {c.split: _sample(rows, c.count, c.strata, rng, where)}
            if c.validation_share is not None:
                parts = _hold_out_stories(parts[c.split], c.validation_share, rng)
        else:
            parts, pools = _divide_by_story(rows, c, rng, where)
            if c.name in recipe.train_orders and recipe.trains_on(c.name):
                parts = {**parts, **_order_parts(recipe, c, pools, notes)}
        stories_of[c.name] = {key for part in parts.values() for r in part for key in story_keys(r)}
        summary[c.name] = {}
        for split, part in parts.items():
            if split in ("train", "validation"):
                if not recipe.trains_on(c.name):
                    continue
                if c.name in recipe.train_orders:
                    part = [r for r in part if r.order in recipe.train_orders[c.name]]
                registry.refuse_evaluation_only(part, f"the {split} split ({where})")
            tagged = [r.replace(split=split, meta={**r.meta, "recipe": recipe.name, "recipe_component": c.name}) for r in part]
            summary[c.name][split] = len(tagged)
            if split == "train":
                train.extend(tagged)
            elif split == "validation":
                validation.extend(tagged)
            else:
                test[c.name] = tagged
    for split, rows in (("train", train), ("validation", validation), *((f"test/{n}", r) for n, r in test.items())):
        ids = [r.id for r in rows]
        if len(set(ids)) != len(ids):
            duplicate = next(i for i in ids if ids.count(i) > 1)
            raise ConfigError(f"recipe '{recipe.name}': id {duplicate!r} occurs twice in {split}")
    if recipe.forbid_story_overlap:
        _check_no_overlap(recipe, train, validation, test)
    if not train and not test:
        raise ConfigError(f"recipe '{recipe.name}': produced no rows")
    return BuildResult({"train": train, "validation": validation, "test": test}, notes, summary)


def _order_parts(recipe: Recipe, c: Component, pools: dict[str, list[Example]], notes: list[str]) -> dict[str, list[Example]]:
    """An order subset's train and validation parts at the component's full sizes (Paper B: 900 / 300).

    The stories stay where the whole component put them and the test part is left as drawn (the
    same in every mixture; this redraw has a random stream of its own); within the train and validation stories the
    rows of the kept orders are sampled afresh to ``split_counts``, instead of filtering the mixed
    sample (which would leave a quarter of it for one order of four). Where the stories hold fewer
    rows of those orders, all are taken and a note says so.
    """
    orders = recipe.train_orders[c.name]
    rng = _seed_rng(c.seed if c.seed is not None else recipe.seed, f"{c.name}:orders")  # apart from the test's draws
    parts, short = {}, []
    for split in ("train", "validation"):
        target = (c.split_counts or {}).get(split, 0)
        if target <= 0:
            continue
        parts[split], shortfall = _order_subset(pools.get(split, []), target, orders, c.strata, rng)
        if shortfall is not None:
            stories = len({story_key(r.story) for r in pools.get(split, [])})
            short.append(f"{split} {len(parts[split])} of {target} rows ({shortfall}: its {stories} stories hold no more)")
    if short:
        notes.append(
            f"component '{c.name}' ({c.loader or 'generated'}), orders {orders}: " + "; ".join(short) + ". The source has too few stories for the "
            "declared sizes of these orders alone; every available row of them is used"
        )
    return parts


def _check_no_overlap(recipe: Recipe, train: list[Example], validation: list[Example], test: dict[str, list[Example]]) -> None:
    named = {"train": train, "validation": validation, **{f"test set '{n}'": rows for n, rows in test.items()}}
    keys = {name: {key for r in rows for key in story_keys(r)} for name, rows in named.items()}
    for a in ("train", "validation"):
        for b, kb in keys.items():
            if a == b or (a == "validation" and b == "train"):
                continue
            shared = keys[a] & kb
            if shared:
                raise ConfigError(f"recipe '{recipe.name}': {len(shared)} stories of {a} also occur in {b} (forbid_story_overlap)")


def build_recipe(name_or_path: str | Path) -> dict[str, Any]:
    """``{"train": [...], "validation": [...], "test": {name: [...]}}`` for a recipe name or file."""
    return build(load_recipe(name_or_path)).splits


RECIPE_FOLDER_MARKER = "manifest.json"  # written last: a folder holding it is a complete recipe output


def _check_out_dir(out: Path) -> None:
    """Refuse an ``--out`` that is not ours to replace: a file, or a folder of other things."""
    if not out.exists():
        return
    if not out.is_dir():
        raise ConfigError(f"{out}: exists and is not a folder; a recipe writes a folder (choose another --out)")
    if ((out / RECIPE_FOLDER_MARKER).is_file() and (out / "recipe.yaml").is_file()) or not any(out.iterdir()):
        return
    raise ConfigError(
        f"{out}: exists and is not a recipe folder (no {RECIPE_FOLDER_MARKER} and recipe.yaml); tomrl replaces the whole --out folder, "
        "so choose a new or empty folder, or remove this one"
    )


def write_recipe(name_or_path: str | Path, out_dir: str | Path) -> tuple[BuildResult, dict]:
    """Build a recipe and write ``train.jsonl``, ``validation.jsonl``, ``test/<name>.jsonl``,
    ``recipe.yaml`` and ``manifest.json`` (counts, notes, the resolved recipe) as the folder ``out_dir``;
    returns the build and the manifest.

    All or nothing: the files are written into ``OUT.partial`` and the finished folder is renamed
    to ``OUT``, replacing an earlier recipe folder there as a whole (so no stale test file of an
    earlier build survives). A crash leaves ``OUT`` as it was (absent, or the earlier complete
    version); leftovers of a crashed write are cleaned up by the next one. An ``OUT`` that exists
    and is neither empty nor a recipe folder (``manifest.json`` and ``recipe.yaml``) is refused, never replaced.
    """
    recipe = load_recipe(name_or_path)
    out = Path(out_dir).expanduser().resolve()
    recover_interrupted_publish(out)  # first: a crash between two renames must not leave OUT looking foreign
    _check_out_dir(out)  # before the build: a refused --out costs no work
    result = build(recipe)
    files: dict[str, dict] = {}
    manifest = {"recipe": recipe.name, "paper": recipe.paper, "seed": recipe.seed, "files": files, "components": result.components, "notes": result.notes}

    def write(staging: Path) -> None:
        for split in ("train", "validation"):
            rows = result.splits[split]
            if rows:
                write_examples(staging / f"{split}.jsonl", rows)
                files[split] = {"file": f"{split}.jsonl", "rows": len(rows)}
        for name, rows in result.splits["test"].items():
            write_examples(staging / "test" / f"{name}.jsonl", rows)
            files[f"test/{name}"] = {"file": f"test/{name}.jsonl", "rows": len(rows)}
        resolved = dataclasses.asdict(recipe)
        atomic_write_text(staging / "recipe.yaml", yaml.safe_dump(resolved, sort_keys=False, allow_unicode=True))
        atomic_write_json(staging / RECIPE_FOLDER_MARKER, manifest)

    write_folder_atomically(out, write)
    return result, manifest
