"""Every benchmark ``tomrl eval`` knows, declared as data: loader, prompt, scoring, metric, version.

    tomrl eval --list                                     # this table, with suites
    tomrl eval --model smollm2-135m --benchmark paper     # Paper A's five columns
    tomrl eval --model M --benchmark tomi,opentom --limit 50
    tomrl eval --model M --benchmark recipe:paper-b-all:test            # a recipe's test tasks (Paper B's 12)

A :class:`Benchmark` says where its examples come from (a loader of :mod:`tomrl.loaders.registry`,
the tomrl generators, a user's file, or a function of its own module), which prompt renders them
(:mod:`tomrl.prompts`), which answer-checking schemes score them (via :func:`tomrl.rewards.answer.check_answer`,
the one definition of "correct"), the metric, how results are broken down, and a version that
changes whenever any of these does (results carry it; a run folder refuses to mix two versions).
The runner reads it all from here; :func:`register_benchmark` adds one (then known to config
validation, ``--list`` and ``--help``).

Scoring: by default every sample is checked under two schemes side by side:

- ``strict`` (tomrl): the completion must be well formed (``<think>…</think><answer>…</answer>``
  with the prefill) and the answer must *equal* the gold after normalisation;
- ``paper_eval`` (Paper A's evaluation script): last ``<answer>`` tag, no format check, and the
  answer may merely *end with* the gold ("toolbox" counts for "box").

The gap between them separates format failures and lenient matches from reasoning.

Recipes (``recipe:NAME:SPLIT``, :func:`recipe_benchmarks`): a recipe's test split becomes one benchmark per
task it declares (Paper B's 12 for its recipes; else one per test component), each marked in distribution
or held out for that recipe and reported beside the best no-ToM rule on the same questions.

Suites: ``paper`` = Paper A's Table 1 columns (Hi-ToM 600, 4th-order, ToMi, ExploreToM
structured and infilled); ``tom`` = ``paper`` + OpenToM + FANToM (skipped unless its file is
present) + tomrl-generated Hi-ToM held-out sets by order; ``all`` = ``tom`` + GSM8K (skipped unless
the user supplies ``data_paths.gsm8k``).
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from typing import Any

from tomrl.config import ConfigError
from tomrl.evaluation.results import DEFAULT_SCHEMES, METRICS
from tomrl.io import BadInputError, scan_jsonl
from tomrl.prompts import PromptConfig
from tomrl.rewards.answer import SCHEMES, Scheme
from tomrl.schema import Example


@dataclass(frozen=True)
class Benchmark:
    """One evaluation set and how it is prompted and scored."""

    name: str  # what users type: --benchmark NAME
    title: str  # column / row title in tables
    version: str  # bump when the loader options, prompt, scoring or selection change
    loader: str  # a tomrl.loaders.registry name, "tomrl-generate", "gsm8k-jsonl", "jsonl-file" or "module:function"
    loader_options: dict[str, Any] = field(default_factory=dict)
    prompt: PromptConfig | None = None  # None = the run's prompt (EvalConfig.prompt, default paper_a); set = always this one
    schemes: tuple[Scheme, ...] = DEFAULT_SCHEMES  # answer-checking schemes, reported side by side
    metric: str = "accuracy"  # what each scheme reports: a name of tomrl.evaluation.results.METRICS
    group_by: tuple[str, ...] = ("order", "question_type")
    paper_column: str | None = None  # the column of Paper A's Table 1 this reproduces
    needs_user_file: bool = False  # data the user must supply (suites skip it when absent)
    description: str = ""
    held_out: bool | None = None  # recipe tasks: not in the recipe's training distribution (None: not a recipe task)
    compare_rules: bool = False  # report the best agent-agnostic rule on the same questions beside every accuracy

    def __post_init__(self) -> None:
        if not self.schemes or not set(self.schemes) <= set(SCHEMES) or self.metric not in METRICS:
            raise ValueError(f"benchmark {self.name!r}: schemes must be some of {SCHEMES} and metric one of {tuple(METRICS)}")

    def prompt_for(self, run_prompt: PromptConfig | None) -> PromptConfig:
        return self.prompt or run_prompt or PromptConfig()


def _heldout(order: int) -> Benchmark:
    return Benchmark(
        name=f"tomrl-hitom-order{order}",
        title=f"tomrl Hi-ToM order {order}",
        version="1",
        loader="tomrl-generate",
        loader_options={"benchmark": "hitom", "orders": [order]},
        group_by=("order", "question_type", "deception", "story_length"),
        description=f"tomrl-generated Hi-ToM-style questions of order {order} (heldout_n of them, stories from "
        "heldout_seed, labels from the belief oracle); a held-out set as long as no training data used that seed",
    )


PAIRED_GROUP_BY = ("order", "question_type", "deception", "story_length")


def _paired() -> list[Benchmark]:
    """The contrast-pair sets (:mod:`tomrl.generators.pairs`): scored per item and per pair."""
    return [
        Benchmark(
            name="tomrl-hitom-pairs",
            title="tomrl Hi-ToM counterfactual pairs",
            version="2",
            loader="tomrl-generate",
            loader_options={"benchmark": "hitom", "pairs": True, "orders": [0, 1, 2, 3], "vocabulary": "heldout", "shortcut_neutral": True},
            group_by=PAIRED_GROUP_BY,
            description="tomrl-generated counterfactual minimal pairs (heldout_n questions per order 0-3, held-out words): "
            "two stories one event apart (an exit moved across a move; a move made a stay for order 0) whose gold "
            "answers differ; pair accuracy = both members right (order 4 is not neutral as a pair: see "
            "tomrl.generators.pairs, 'Limits'; tomrl-hitom-swap covers it)",
        ),
        Benchmark(
            name="tomrl-hitom-swap",
            title="tomrl Hi-ToM agent swap",
            version="1",
            loader="tomrl-generate",
            loader_options={"benchmark": "hitom", "agent_swap": True, "orders": [1, 2, 3, 4], "vocabulary": "heldout"},
            group_by=PAIRED_GROUP_BY,
            description="tomrl-generated agent-swap pairs (heldout_n questions per order 1-4, held-out words): one story, "
            "two questions one agent apart with different gold answers; an unchanged answer is the signature of a "
            "shortcut that ignores who is asked",
        ),
    ]


PAPER_SUITE = ("hitom600", "hitom4", "tomi", "exploretom", "exploretom-infilled")
SUITES: dict[str, tuple[str, ...]] = {
    "paper": PAPER_SUITE,
    "tom": PAPER_SUITE + ("opentom", "fantom") + tuple(f"tomrl-hitom-order{k}" for k in range(5)),
    "contrast": ("tomrl-hitom-pairs", "tomrl-hitom-swap"),
}
SUITES["all"] = SUITES["tom"] + ("gsm8k",)
BENCHMARKS: dict[str, Benchmark] = {}


def register_benchmark(benchmark: Benchmark) -> Benchmark:
    """Make ``benchmark`` known to ``tomrl eval``; a name already taken (by a benchmark or a suite) is
    an error, since it would silently change what a config naming it evaluates."""
    if benchmark.name in BENCHMARKS or benchmark.name in SUITES:
        raise ValueError(f"benchmark {benchmark.name!r} is already registered")
    BENCHMARKS[benchmark.name] = benchmark
    return benchmark


for _benchmark in [
    Benchmark(
        name="hitom600",
        title="Hi-ToM",
        version="1",
        loader="tomrl-paper-hitom600",
        paper_column="Hi-ToM",
        group_by=("order", "question_type", "deception", "story_length"),
        description="Paper A's Hi-ToM (600): the original release, orders 0-4, open questions (question_old)",
    ),
    Benchmark(
        name="hitom4",
        title="4th-order",
        version="1",
        loader="tomrl-paper-hitom4",
        paper_column="4th-order",
        description="Paper A's '4th-order ToM' set (600): generated order-4 questions; every story is also in "
        "Paper A's training set (orders 0-3)",
    ),
    Benchmark(
        name="tomi",
        title="ToMi",
        version="1",
        loader="tomrl-paper-tomi",
        paper_column="ToMi",
        description="Paper A's ToMi set (5,994 questions)",
    ),
    Benchmark(
        name="exploretom",
        title="ExploreToM",
        version="1",
        loader="tomrl-paper-exploretom",
        paper_column="ExploreToM",
        description="Paper A's ExploreToM set (1,066, structured story text, no yes/no questions)",
    ),
    Benchmark(
        name="exploretom-infilled",
        title="ExploreToM infilled",
        version="1",
        loader="tomrl-paper-exploretom-infilled",
        paper_column="ExploreToM infilled",
        description="the same 1,066 ExploreToM questions over the LLM-infilled narrative stories",
    ),
    Benchmark(
        name="opentom",
        title="OpenToM",
        version="1",
        loader="opentom",
        description="OpenToM (13,708 questions over 596 narratives; evaluation only): location, multihop, attitude",
    ),
    Benchmark(
        name="fantom",
        title="FANToM",
        version="1",
        loader="fantom",
        needs_user_file=True,
        description="FANToM conversations (needs fantom_v1.json: see `tomrl data load fantom`)",
    ),
    *[_heldout(order) for order in range(5)],
    *_paired(),
    Benchmark(
        name="gsm8k",
        title="GSM8K",
        version="3",  # 2: answers read from \boxed{} or the answer tag, compared as numbers; 3: the \boxed{} prompt
        loader="gsm8k-jsonl",
        prompt=PromptConfig("gsm8k"),
        group_by=(),
        needs_user_file=True,
        description="side check that ToM training leaves arithmetic alone: a GSM8K-format JSONL file the user "
        "supplies (data_paths.gsm8k), rows {question, answer} with the answer's final number after '####'; asked "
        "with the Qwen2.5 math prompt (reason step by step, final answer within \\boxed{}); the model's answer is read "
        "from its last \\boxed{} (else its answer tag) and compared as a number",
    ),
]:
    register_benchmark(_benchmark)


def check_names(names: list[str]) -> list[str]:
    """The comma-separated entries of ``names``, once each is known: a benchmark, a suite, a ``.jsonl``
    file or ``recipe:NAME:SPLIT``."""
    names = [n.strip() for raw in names for n in raw.split(",") if n.strip()]
    if not names:
        raise ConfigError("give at least one benchmark or suite")
    for name in names:
        if name.startswith(RECIPE_PREFIX):
            parse_recipe_reference(name)
            continue
        if name not in SUITES and name not in BENCHMARKS and not name.endswith(".jsonl"):
            close = difflib.get_close_matches(name, [*BENCHMARKS, *SUITES], n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ConfigError(f"unknown benchmark '{name}'{hint}; known: {', '.join([*SUITES, *BENCHMARKS])}")
    return names


def resolve(names: list[str]) -> list[tuple[Benchmark, bool]]:
    """``(benchmark, optional)`` for names and suites, in order, without repeats.

    ``optional`` is True for a benchmark that came from a suite and needs a user's file: the
    runner skips it (saying so) when the file is absent, instead of failing.
    """
    chosen: dict[str, bool] = {}
    files: dict[str, Benchmark] = {}
    for name in check_names(names):
        if name in SUITES:
            for member in SUITES[name]:
                chosen.setdefault(member, BENCHMARKS[member].needs_user_file)
        elif name in BENCHMARKS:
            chosen[name] = False
        elif name.startswith(RECIPE_PREFIX):
            for benchmark in recipe_benchmarks(name):
                files[benchmark.name] = benchmark
                chosen[benchmark.name] = benchmark.needs_user_file  # a task of optional data (FANToM) is skipped when absent
        else:  # a .jsonl file
            benchmark = file_benchmark(name)
            earlier = files.get(benchmark.name)
            if earlier is not None and Path(earlier.loader_options["path"]).resolve() != Path(benchmark.loader_options["path"]).resolve():
                raise ConfigError(
                    f"--benchmark: {earlier.loader_options['path']} and {name} would both be named {benchmark.name} "
                    "(a file benchmark is named after the file); rename or copy one of them"
                )
            files[benchmark.name] = benchmark
            chosen[benchmark.name] = False
    return [(files.get(name) or BENCHMARKS[name], optional) for name, optional in chosen.items()]


def file_benchmark(path: str) -> Benchmark:
    """A benchmark made of a unified-schema JSONL file (``--benchmark FILE.jsonl``), named after the file.

    Its version is the file's content hash, so a run folder refuses to mix samples of two files
    that share a name.
    """
    file = Path(path).expanduser()
    if not file.is_file():
        raise ConfigError(f"benchmark file not found: {path}")
    digest = hashlib.sha256(file.read_bytes()).hexdigest()[:12]
    return Benchmark(
        name=f"file-{file.stem}",
        title=file.stem,
        version=digest,
        loader="jsonl-file",
        loader_options={"path": str(file)},
        group_by=("order", "question_type", "deception", "story_length"),
        description=f"examples of {file} (unified schema)",
    )


# ------------------------------------------------------------------------------ recipes as benchmarks

RECIPE_PREFIX = "recipe:"


def parse_recipe_reference(reference: str) -> tuple[str, str]:
    """``recipe:NAME:SPLIT`` (NAME a shipped recipe or a YAML path) -> (NAME, SPLIT), checked."""
    from tomrl.loaders.recipes import load_recipe
    from tomrl.schema import SPLITS

    body = reference.removeprefix(RECIPE_PREFIX)
    name, _, split = body.rpartition(":")
    if not name or split not in SPLITS:
        raise ConfigError(f"benchmark '{reference}': write recipe:NAME:SPLIT with SPLIT one of {', '.join(SPLITS)} (e.g. recipe:paper-b-all:test)")
    load_recipe(name)  # an unknown recipe or a bad YAML fails here, before any model time
    return name, split


def task_held_out(recipe, task) -> bool:
    """Is a recipe's test task outside what the recipe trains on? A component it does not train on (or a
    test-only one: OpenToM, FANToM's lists) is held out; so are orders outside its ``train_orders``."""
    component = recipe.component(task.component)
    if not recipe.trains_on(component.name) or not set(component.splits()) & {"train", "validation"}:
        return True
    kept = recipe.train_orders.get(component.name)
    return kept is not None and task.orders is not None and not set(task.orders) <= set(kept)


def recipe_benchmarks(reference: str) -> list[Benchmark]:
    """The benchmarks of ``recipe:NAME:SPLIT``: for the test split one per task the recipe declares (Paper B's
    12; without ``tasks``, one per test component), for train or validation the whole split as one.

    Names are ``<recipe>:<task>`` (``paper-b-all:hitom-order1``); the version hashes what decides the
    task's rows (seed, components, the task), so a run folder refuses to mix samples of two definitions.
    """
    from tomrl.loaders.recipes import Task, load_recipe

    name, split = parse_recipe_reference(reference)
    recipe = load_recipe(name)

    def version(*parts: Any) -> str:  # what decides the rows: not the description, not train_on for a test
        data = {"seed": recipe.seed, "components": [dataclasses.asdict(c) for c in recipe.components], "parts": parts}
        return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:12]

    options = {"recipe": name, "split": split}
    if split != "test":
        return [Benchmark(name=f"{recipe.name}:{split}", title=f"{recipe.name} {split}",
                          version=version(split, recipe.train_on, recipe.train_orders), loader="recipe",
                          loader_options=options, held_out=False, compare_rules=True,
                          description=f"the {split} split of recipe {recipe.name} (in distribution: not a test)")]
    tasks = list(recipe.tasks) or [Task(name=c.name, title=c.name, component=c.name) for c in recipe.components if "test" in c.splits()]
    benchmarks = []
    for task in tasks:
        held_out = task_held_out(recipe, task)
        orders = f", orders {task.orders}" if task.orders is not None else ""
        benchmarks.append(Benchmark(
            name=f"{recipe.name}:{task.name}",
            title=task.title,
            version=version(dataclasses.asdict(task)),
            loader="recipe",
            loader_options={**options, "component": task.component, "orders": task.orders},
            needs_user_file=recipe.component(task.component).optional,
            held_out=held_out,
            compare_rules=True,
            description=f"recipe {recipe.name}, test part of component '{task.component}'{orders} "
            f"({'held out' if held_out else 'in distribution'})",
        ))
    return benchmarks


_RECIPE_BUILDS: dict[tuple, Any] = {}  # one build per recipe, split and data root in a process: its tasks share it


def recipe_examples(recipe: str, split: str, component: str | None = None, orders: list[int] | None = None) -> list[Example]:
    """The examples of one recipe task. The test split is built as if nothing were trained on (its parts
    are drawn exactly as in every mixture; a mixture that trains on absent FANToM still has its other
    tests); an absent optional component raises :class:`DataMissing` with the loader's how-to-obtain."""
    from tomrl.loaders.recipes import build, load_recipe

    resolved = load_recipe(recipe)
    key = (str(recipe), split, os.environ.get("TOMRL_DATA"), repr(dataclasses.asdict(resolved)))
    if key not in _RECIPE_BUILDS:
        _RECIPE_BUILDS[key] = build(dataclasses.replace(resolved, train_on=[]) if split == "test" else resolved)
    built = _RECIPE_BUILDS[key]
    if split != "test":
        return list(built.splits[split])
    if component not in built.splits["test"]:
        note = next((n for n in built.notes if f"'{component}'" in n), f"component '{component}' produced no test rows")
        raise DataMissing(f"recipe {resolved.name}, task data absent: {note}")
    rows = built.splits["test"][component]
    return [r for r in rows if orders is None or r.order in orders]


class DataMissing(BadInputError):
    """A benchmark's data files are not there (a suite skips such a benchmark)."""


def load_examples(
    benchmark: Benchmark, data_paths: dict[str, str], heldout_n: int, heldout_seed: int, skip_bad: bool = False, skipped: list[str] | None = None
) -> list[Example]:
    """All examples of ``benchmark`` (before any ``limit``). With ``skip_bad``, bad rows of a
    line-based user file (gsm8k) are appended to ``skipped`` with their reasons instead of raising."""
    path = data_paths.get(benchmark.name)
    if benchmark.loader == "tomrl-generate":
        from tomrl.generators import generate
        from tomrl.generators.config import GenerateConfig

        options = dict(benchmark.loader_options)
        n = heldout_n
        if options.get("pairs") or options.get("agent_swap"):
            n = 2 * -(-heldout_n * len(options["orders"]) // 2)  # heldout_n per order, rounded up to whole pairs
        cfg = GenerateConfig(n=n, seed=heldout_seed, split_fractions={"test": 1.0}, **options)
        return generate(cfg)
    if benchmark.loader == "jsonl-file":
        from tomrl.data_checks import read_checked_examples
        from tomrl.schema import ReadReport

        report = ReadReport(benchmark.loader_options["path"])
        examples = read_checked_examples(benchmark.loader_options["path"], skip_bad=skip_bad, report=report)
        if skipped is not None:
            skipped.extend(report.skipped)
        return examples
    if benchmark.loader == "recipe":
        return recipe_examples(**benchmark.loader_options)
    if benchmark.loader == "gsm8k-jsonl":
        if path is None:
            raise DataMissing(f"benchmark 'gsm8k': no data file; set data_paths.gsm8k=FILE (JSONL rows with question and answer)")
        return read_gsm8k(Path(path).expanduser(), skip_bad, skipped)
    if ":" in benchmark.loader:  # "module:function": function(the run's data_paths[name] or None, **loader_options) -> examples
        module, function = benchmark.loader.split(":")
        return getattr(import_module(module), function)(path, **benchmark.loader_options)
    from tomrl.loaders.registry import load

    try:
        return load(benchmark.loader, path=path, **benchmark.loader_options)
    except BadInputError as error:
        if "data not found" in str(error):
            raise DataMissing(str(error)) from None
        raise


PAIR_KEYS = ("pair_id", "swap_id")  # meta keys that tie two examples into one contrast pair


def pair_key(example: Example) -> str | None:
    """The contrast pair ``example`` belongs to (counterfactual or agent swap), or None."""
    for key in PAIR_KEYS:
        if key in example.meta:
            return f"{key}:{example.meta[key]}"
    return None


def select(examples: list[Example], limit: int | None, seed: int) -> list[Example]:
    """At most ``limit`` examples spread evenly over orders (seeded), in their original order.

    Each order's examples are shuffled with ``seed`` and taken round-robin, so a larger limit
    selects a superset of a smaller one (a resumed, extended run reuses every finished sample).
    Members of a contrast pair (:func:`pair_key`) are taken together: ``limit // 2`` whole pairs
    (at least one).
    """
    if limit is None or limit >= len(examples):
        return list(examples)
    import random

    groups: dict[Any, list[list[int]]] = {}
    units: dict[str, list[int]] = {}
    for index, example in enumerate(examples):
        key = pair_key(example)
        if key is None:
            groups.setdefault(example.order, []).append([index])
        elif key in units:
            units[key].append(index)
        else:
            units[key] = [index]
            groups.setdefault(example.order, []).append(units[key])
    rng = random.Random(seed)
    queues = []
    for key in sorted(groups, key=lambda k: (k is None, k if k is not None else 0)):
        members = groups[key][:]
        rng.shuffle(members)
        queues.append(members)
    picked: list[int] = []
    while len(picked) < limit:
        taken = False
        for queue in queues:
            if queue and (len(picked) + len(queue[0]) <= limit or not picked):
                picked += queue.pop(0)
                taken = True
        if not taken:
            break
    return [examples[i] for i in sorted(picked)]


# ------------------------------------------------------------------------------ GSM8K files

_FINAL_NUMBER = re.compile(r"####\s*(.+?)\s*$", re.DOTALL)


def read_gsm8k(path: Path, skip_bad: bool = False, skipped: list[str] | None = None) -> list[Example]:
    """GSM8K-format JSONL (``question``, ``answer`` ending in ``#### N``) as examples; the gold
    answer is N with thousands separators removed. A bad row raises, or with ``skip_bad`` is
    appended to ``skipped`` (``file:line: field 'x': …``)."""
    if not path.is_file():
        raise DataMissing(f"{path}: GSM8K file not found")
    examples = []
    for line_number, row, error in scan_jsonl(path):
        where = f"{path}:{line_number}"
        if error is None:
            bad = [key for key in ("question", "answer") if not isinstance(row.get(key), str) or not row[key].strip()]
            error = f"{where}: field '{bad[0]}': expected a non-empty string" if bad else None
        if error is not None:
            if not skip_bad:
                raise BadInputError(error)
            if skipped is not None:
                skipped.append(error)
            continue
        match = _FINAL_NUMBER.search(row["answer"])
        gold = (match.group(1) if match else row["answer"]).replace(",", "").strip()
        examples.append(
            Example(
                id=str(row.get("id", f"gsm8k-{line_number}")),
                source="gsm8k",
                split="test",
                story=row["question"].strip(),
                question="What is the final answer?",
                answer=gold,
                order=None,
                question_type="math",
                deception=None,
                story_length=None,
                story_id=f"gsm8k-{line_number}",
            )
        )
    if not examples:
        raise BadInputError(f"{path}: no rows")
    return examples
