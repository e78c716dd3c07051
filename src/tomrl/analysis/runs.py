"""Read training-run and evaluation folders into plain records the report and detectors use.

    runs = load_runs(["runs/demo"])        # searches the folders recursively
    runs.training[0].series("response_length/mean")
    runs.evaluations[0].benchmarks["hitom600"].by_order[4]      # an Accuracy with n and interval

A folder is an **evaluation** when it holds ``results.json`` (written by ``tomrl eval``) and a
**training run** when it holds ``metrics.jsonl`` (written by ``tomrl train``); any folder below
the given ones is searched, so ``tomrl report runs/demo`` finds everything the demo wrote. The
exact files and keys read are listed in docs/analysis.md. Bad input raises
:class:`tomrl.io.BadInputError` naming the file, line and field.

This module is the only one that knows the producers' file formats; everything downstream sees
:class:`Evaluation`, :class:`TrainingRun` and :class:`tomrl.stats.Accuracy`.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from tomrl.analysis.detectors import BeliefCount
from tomrl.analysis.significance import from_counts
from tomrl.config import yaml_safe_load
from tomrl.evaluation.results import results_answered
from tomrl.io import BadInputError, iter_jsonl, loads_json
from tomrl.prompts import PromptConfig
from tomrl.schema import Example, read_examples
from tomrl.stats import Accuracy

RESULTS_FILE = "results.json"  # tomrl eval
SAMPLES_FILE = "samples.jsonl"  # tomrl eval: one row per answered question; tomrl train: one per rollout
METRICS_FILE = "metrics.jsonl"  # tomrl train: one row per optimizer step
VALIDATION_FILE = "validation.jsonl"  # tomrl train: one row per validation pass
VALIDATION_SAMPLES_FILE = "validation_samples.jsonl"  # tomrl train: one row per validation answer
RUN_CONFIG_FILE = "config.yaml"  # tomrl train: the resolved TrainConfig
DATA_FOLDER = "data"  # tomrl train: train.jsonl and validation.jsonl (unified Example records)
OUTPUT_FOLDERS = ("final", "best", "checkpoints")  # tomrl train: models a run writes
# Keys of a run's config.yaml that may differ between runs of one setup trained with different seeds.
SEED_FREE_KEYS = ("seed", "run_dir")
# tomrl analyze interventions / probes: result files whose own modules render report sections.
ANALYSIS_FILES = ("interventions.json", "probes.json")
# Traces read per step for belief counting: enough for a share with a tight interval, few enough
# that a long run's report takes seconds (about 0.1-1 ms per trace with the fidelity parser).
VALIDATION_TRACES_PER_STEP = 256  # the first ones in file order: the same questions at every step
ROLLOUT_TRACES_PER_STEP = 64

# Data-set families; a benchmark or source belongs to the first one its name contains.
FAMILIES = ("exploretom", "opentom", "fantom", "hitom", "tomi", "gsm8k")


def task_family(name: str) -> str:
    """The data-set family of a benchmark or data source: "hitom600" → "hitom", "tomrl-hitom-order4" → "hitom"."""
    squashed = re.sub(r"[^a-z0-9]", "", name.lower())
    if squashed.startswith("tomrl"):
        squashed = squashed[len("tomrl"):]
    for family in FAMILIES:
        if family in squashed:
            return family
    return squashed or name


# ---------------------------------------------------------------------------- records


@dataclass
class BenchmarkScores:
    """One benchmark's scores in one evaluation (under the scheme the report uses)."""

    name: str
    overall: Accuracy
    by_order: dict[int, Accuracy] = field(default_factory=dict)
    by_question_type: dict[str, Accuracy] = field(default_factory=dict)
    paper_column: str | None = None  # the column of Paper A's Table 1 it reproduces
    lenient: Accuracy | None = None  # Paper A's own scoring (paper_eval), for its table
    format_failure: Accuracy | None = None
    mean_response_tokens: float | None = None


@dataclass
class Evaluation:
    """An evaluation folder: one model on one or more benchmarks."""

    path: Path
    model: str
    benchmarks: dict[str, BenchmarkScores]
    seed: int | None = None
    info: dict = field(default_factory=dict)
    samples_path: Path | None = None

    @property
    def label(self) -> str:
        return Path(self.model).name if ("/" in self.model or "\\" in self.model) else self.model


@dataclass(frozen=True)
class ValidationPoint:
    """Accuracy on one family's validation questions of one order at one training step."""

    step: float
    task: str  # data-set family ("hitom"), or "validation" when the questions' sources are unknown
    order: int | None
    accuracy: Accuracy


@dataclass(frozen=True)
class Trace:
    """One completion of the policy at a training step, with the story it reasons about."""

    step: float
    completion: str
    story: str | None
    source: str | None
    question: str | None = None
    query_chain: tuple[str, ...] | None = None  # the example's meta.query.chain, when its data logged it


@dataclass
class TrainingRun:
    """A training-run folder: per-step metrics, validation passes, its data and config."""

    path: Path
    config: dict
    metrics: list[dict]
    validation: list[ValidationPoint] = field(default_factory=list)
    traces: list[Trace] = field(default_factory=list)
    trace_source: str = ""  # which file the traces came from
    rollouts: list[Trace] = field(default_factory=list)  # training rollouts (samples.jsonl), capped per step
    mixture: dict[str, set[int | None]] = field(default_factory=dict)  # family → orders trained on

    @property
    def label(self) -> str:
        return self.path.name

    @property
    def base_model(self) -> str | None:
        value = self.config.get("model")
        return str(value) if value else None

    @property
    def training_seed(self) -> int | None:
        """The seed the run trained with (``config.yaml``'s ``seed``), None when unknown."""
        seed = self.config.get("seed")
        return seed if isinstance(seed, int) and not isinstance(seed, bool) else None

    @property
    def setup(self) -> str | None:
        """Everything in the run's config but its seed and folder, as one comparable text: runs whose
        setups are equal differ only by training seed. None when the config is unknown."""
        if not self.config or self.training_seed is None:
            return None
        return json.dumps({k: v for k, v in self.config.items() if k not in SEED_FREE_KEYS}, sort_keys=True, default=str)

    @property
    def prefill(self) -> str:
        old_layout = {"style": self.config.get("prompt_style", "paper_a"), "prefill": self.config.get("prefill")}  # runs before prompt:
        return PromptConfig(**(self.config.get("prompt") or old_layout)).resolved_prefill

    def in_distribution(self, task: str, order: int | None = None) -> bool | None:
        """Whether the run trained on ``task`` (at ``order``); None when its training data is unknown.

        A task is in distribution when its family is in the training mixture and, for a given
        order, when that order was trained on (families without orders count every order).
        """
        if not self.mixture:
            return None
        if task == "validation":  # sources unknown: judge by order alone
            if order is None:
                return None
            trained = set().union(*self.mixture.values())
            return order in trained or trained <= {None}
        family = task_family(task)
        if family not in self.mixture:
            return False
        orders = self.mixture[family]
        return order is None or order in orders or orders <= {None}

    def series(self, key: str) -> tuple[list[float], list[float | None]]:
        """``(steps, values)`` of one per-step metric; steps without it give None."""
        steps = [float(row["step"]) for row in self.metrics]
        values = [_number_or_none(row.get(key)) for row in self.metrics]
        return steps, values

    def metric_keys(self) -> list[str]:
        keys: dict[str, None] = {}
        for row in self.metrics:
            for key, value in row.items():
                if key != "step" and isinstance(value, (int, float)) and not isinstance(value, bool):
                    keys.setdefault(key, None)
        return list(keys)

    def belief_counts(self, states_a_belief: Callable[[str, str, str | None, str | None], bool | None]) -> list[BeliefCount]:
        """Per step, how many traces state an agent's belief (traces it cannot judge are left out).

        ``states_a_belief(completion, prefill, story, source)``: see :mod:`tomrl.analysis.beliefs`.
        """
        by_step: dict[float, list[bool]] = {}
        for trace in self.traces:
            verdict = states_a_belief(trace.completion, self.prefill, trace.story, trace.source)
            if verdict is not None:
                by_step.setdefault(trace.step, []).append(bool(verdict))
        return [BeliefCount(step, sum(flags), len(flags)) for step, flags in sorted(by_step.items())]

    def describe_mixture(self) -> str:
        """"hitom orders 0-3 + exploretom" (or "unknown mixture")."""
        parts = []
        for family, orders in sorted(self.mixture.items()):
            known = sorted(o for o in orders if o is not None)
            parts.append(f"{family} orders {_ranges(known)}" if known and None not in orders else family)
        return " + ".join(parts) or "unknown mixture"

    def output_name(self, model: str) -> str | None:
        """Which of this run's models ``model`` is ("final", "best", "checkpoints/checkpoint-50"), or
        None when it is not one of them.

        A path inside the run folder is one of its models; so is a relative path written from
        another working directory that ends in ``<run folder name>/final``, ``/best`` or
        ``/checkpoints/…``.
        """
        path = Path(model)
        try:
            inside = path.resolve().relative_to(self.path.resolve())
            return inside.as_posix() or "."
        except (ValueError, OSError):
            pass
        parts = path.parts
        for index, part in enumerate(parts[:-1]):
            if part == self.path.name and parts[index + 1] in OUTPUT_FOLDERS:
                return "/".join(parts[index + 1:])
        return None

    def is_output_of(self, model: str) -> bool:
        return self.output_name(model) is not None


@dataclass
class RunSet:
    training: list[TrainingRun] = field(default_factory=list)
    evaluations: list[Evaluation] = field(default_factory=list)
    # Other analyses' result files found under the given folders: file name → paths (ANALYSIS_FILES).
    analysis_files: dict[str, list[Path]] = field(default_factory=dict)
    # Run folders that trained an evaluated model but lie outside the given folders (found from the
    # model's path, :func:`run_folder_of`): read for the model's origin and seed, not reported on.
    origins: list[TrainingRun] = field(default_factory=list)
    # Evaluation folders left out, with why: a results.json with no answered question is a failed
    # evaluation (older tomrl versions wrote one), never an evaluation at 0 %.
    skipped: list[str] = field(default_factory=list)

    def run_that_trained(self, evaluation: Evaluation) -> TrainingRun | None:
        for run in [*self.training, *self.origins]:
            if run.is_output_of(evaluation.model):
                return run
        return None

    def is_base_evaluation(self, evaluation: Evaluation) -> bool:
        return self.run_that_trained(evaluation) is None

    def seed_siblings(self, run: TrainingRun) -> list[TrainingRun]:
        """The runs that differ from ``run`` only by training seed (``run`` among them), one per seed, by
        seed; just ``run`` when its setup or seed is unknown."""
        if run.setup is None:
            return [run]
        by_seed: dict[int, TrainingRun] = {}
        for other in [*self.training, *self.origins]:
            if other.setup == run.setup and other.training_seed is not None:
                by_seed.setdefault(other.training_seed, run if other.training_seed == run.training_seed else other)
        return [by_seed[seed] for seed in sorted(by_seed)]


# ---------------------------------------------------------------------------- reading


def _ranges(numbers: list[int]) -> str:
    """[0, 1, 2, 4] → "0-2, 4"."""
    spans: list[list[int]] = []
    for number in numbers:
        if spans and number == spans[-1][1] + 1:
            spans[-1][1] = number
        else:
            spans.append([number, number])
    return ", ".join(f"{a}-{b}" if b > a else f"{a}" for a, b in spans)


def _number_or_none(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _read_json(path: Path) -> dict:
    try:
        data = loads_json(path.read_text(encoding="utf-8"), str(path))
    except json.JSONDecodeError as err:
        raise BadInputError(f"{path}: invalid JSON ({err.msg} at line {err.lineno}, column {err.colno})") from None
    except UnicodeDecodeError as err:
        raise BadInputError(f"{path}: not UTF-8 ({err.reason})") from None
    if not isinstance(data, dict):
        raise BadInputError(f"{path}: expected a JSON object at the top level")
    return data


def accuracy_from(obj: Any, where: str) -> Accuracy:
    """An Accuracy from a ``{"n", "k", "low", "high", "method"}`` object (:meth:`Accuracy.to_dict`).

    The interval is kept as written when it is there (it may be a bootstrap interval), else
    the Wilson interval is computed from n and k.
    """
    if not isinstance(obj, dict):
        raise BadInputError(f"{where}: expected an object with 'n' and 'k', got {type(obj).__name__}")
    n, k = obj.get("n"), obj.get("k")
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise BadInputError(f"{where}: field 'n': expected a non-negative integer, got {n!r}")
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= n:
        raise BadInputError(f"{where}: field 'k': expected an integer between 0 and n={n}, got {k!r}")
    computed = from_counts(k, n)
    low, high = obj.get("low"), obj.get("high")
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1 for v in (low, high)) and n > 0:
        return Accuracy(n=n, k=k, value=computed.value, low=float(low), high=float(high), method=str(obj.get("method", "wilson")))
    return computed


def _order_key(key: str, where: str) -> int | None:
    if key.lower() in ("none", "null"):
        return None
    try:
        return int(key)
    except ValueError:
        raise BadInputError(f"{where}: key {key!r} is not an order (an integer or 'none')") from None


def read_evaluation(folder: str | Path, scheme: str = "strict") -> Evaluation:
    """An evaluation folder written by ``tomrl eval`` (``results.json`` + ``samples.jsonl``)."""
    folder = Path(folder)
    path = folder / RESULTS_FILE
    data = _read_json(path)
    benchmarks_raw = data.get("benchmarks")
    if not isinstance(benchmarks_raw, dict) or not benchmarks_raw:
        raise BadInputError(f"{path}: field 'benchmarks': expected a non-empty object of benchmark results")
    benchmarks = {}
    for name, raw in benchmarks_raw.items():
        where = f"{path}: benchmarks.{name}"
        if not isinstance(raw, dict) or not isinstance(raw.get("overall"), dict):
            raise BadInputError(f"{where}: field 'overall': expected an object")

        def scheme_accuracy(summary: Any, at: str, wanted: str = scheme, metric: str = "accuracy") -> Accuracy:
            if not isinstance(summary, dict) or not isinstance(summary.get(wanted), dict):
                raise BadInputError(f"{at}: field '{wanted}': expected the {wanted} scheme's results")
            return accuracy_from(summary[wanted].get(metric), f"{at}.{wanted}.{metric}")

        overall = raw["overall"]
        by_order = {}
        for key, summary in (raw.get("by_order") or {}).items():
            order = _order_key(str(key), f"{where}.by_order")
            if order is not None:
                by_order[order] = scheme_accuracy(summary, f"{where}.by_order.{key}")
        by_type = {str(key): scheme_accuracy(summary, f"{where}.by_question_type.{key}")
                   for key, summary in (raw.get("by_question_type") or {}).items()}
        lenient = scheme_accuracy(overall, f"{where}.overall", "paper_eval") if "paper_eval" in overall else None
        benchmarks[name] = BenchmarkScores(
            name=name, overall=scheme_accuracy(overall, f"{where}.overall"), by_order=by_order,
            by_question_type=by_type, paper_column=raw.get("paper_column"), lenient=lenient,
            format_failure=scheme_accuracy(overall, f"{where}.overall", metric="format_failure")
            if isinstance(overall.get(scheme), dict) and "format_failure" in overall[scheme] else None,
            mean_response_tokens=_number_or_none(overall.get("mean_response_tokens")),
        )
    model = data.get("model")
    if isinstance(model, dict):
        model = model.get("path") or model.get("name")
    if not isinstance(model, str) or not model:
        raise BadInputError(f"{path}: field 'model': expected the model's name or path")
    samples = folder / SAMPLES_FILE
    seed = data.get("seed")
    return Evaluation(path=folder, model=model, benchmarks=benchmarks, seed=seed if isinstance(seed, int) else None,
                      info=data, samples_path=samples if samples.exists() else None)


def _read_yaml(path: Path) -> dict:
    import yaml

    try:
        data = yaml_safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise BadInputError(f"{path}: invalid YAML: {err}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise BadInputError(f"{path}: expected a mapping at the top level")
    return data


def _read_examples(path: Path) -> dict[str, Example]:
    return {example.id: example for example in read_examples(path)} if path.exists() else {}


def _mixture(examples: Iterable[Example]) -> dict[str, set[int | None]]:
    mixture: dict[str, set[int | None]] = {}
    for example in examples:
        mixture.setdefault(task_family(example.source), set()).add(example.order)
    return mixture


def _step_of(row: dict, where: str) -> float:
    step = row.get("step")
    if isinstance(step, bool) or not isinstance(step, (int, float)):
        raise BadInputError(f"{where}: field 'step': expected a number, got {step!r}")
    return float(step)


def _validation_points(folder: Path, validation_examples: dict[str, Example]) -> list[ValidationPoint]:
    """Per step, family and order, from the per-answer log joined with the validation examples;
    without them, per order from ``validation.jsonl`` (sources unknown)."""
    samples_path = folder / VALIDATION_SAMPLES_FILE
    if samples_path.exists() and validation_examples:
        groups: dict[tuple[float, str, int | None], list[bool]] = {}
        for line, row in iter_jsonl(samples_path, allow_torn_tail=True):
            where = f"{samples_path}:{line}"
            example = validation_examples.get(row.get("id"))
            if example is None:
                raise BadInputError(f"{where}: field 'id': {row.get('id')!r} is not in {folder / DATA_FOLDER / 'validation.jsonl'}")
            if not isinstance(row.get("correct"), bool):
                raise BadInputError(f"{where}: field 'correct': expected true or false")
            key = (_step_of(row, where), task_family(example.source), example.order)
            groups.setdefault(key, []).append(row["correct"])
        return [ValidationPoint(step, task, order, from_counts(sum(flags), len(flags)))
                for (step, task, order), flags in sorted(groups.items(), key=lambda item: (item[0][0], item[0][1], item[0][2] is None, item[0][2] or 0))]
    path = folder / VALIDATION_FILE
    points = []
    if path.exists():
        for line, row in iter_jsonl(path, allow_torn_tail=True):
            where = f"{path}:{line}"
            step = _step_of(row, where)
            for key, acc in (row.get("by_order") or {}).items():
                points.append(ValidationPoint(step, "validation", _order_key(str(key), f"{where}: by_order"),
                                              accuracy_from(acc, f"{where}: by_order.{key}")))
    return points


def query_chain(example: Example) -> tuple[str, ...] | None:
    query = example.meta.get("query") if isinstance(example.meta, dict) else None
    chain = query.get("chain") if isinstance(query, dict) else None
    if isinstance(chain, list) and all(isinstance(agent, str) for agent in chain):
        return tuple(chain)
    return None


def _read_traces(path: Path, examples: dict[str, Example], cap: int) -> list[Trace]:
    """The first ``cap`` completions of each step of a per-answer log, joined to their examples by id."""
    traces, per_step = [], {}
    for line, row in iter_jsonl(path, allow_torn_tail=True):
        where = f"{path}:{line}"
        step = _step_of(row, where)
        if per_step.get(step, 0) >= cap:
            continue
        completion = row.get("completion")
        if not isinstance(completion, str):
            raise BadInputError(f"{where}: field 'completion': expected a string")
        example = examples.get(row.get("id"))
        traces.append(Trace(step, completion, example.story if example else None, example.source if example else None,
                            example.question if example else None, query_chain(example) if example else None))
        per_step[step] = per_step.get(step, 0) + 1
    return traces


def _traces(folder: Path, train: dict[str, Example], validation: dict[str, Example]) -> tuple[list[Trace], str, list[Trace]]:
    """``(traces, their file, rollouts)``. Traces, to count belief statements in: the validation
    answers (the same questions at every step) when logged, else the training rollouts; at most
    a fixed number per step. Rollouts: the training rollouts (``samples.jsonl``), capped alike."""
    rollouts_path = folder / SAMPLES_FILE
    rollouts = _read_traces(rollouts_path, train, ROLLOUT_TRACES_PER_STEP) if rollouts_path.exists() else []
    validation_path = folder / VALIDATION_SAMPLES_FILE
    if validation_path.exists():
        traces = _read_traces(validation_path, validation, VALIDATION_TRACES_PER_STEP)
        if traces:
            return traces, VALIDATION_SAMPLES_FILE, rollouts
    return rollouts, SAMPLES_FILE if rollouts else "", rollouts


def read_training_run(folder: str | Path) -> TrainingRun:
    """A run folder written by ``tomrl train`` (see :mod:`tomrl.training.checkpoints` for its layout)."""
    folder = Path(folder)
    metrics_path = folder / METRICS_FILE
    metrics = []
    for line, row in iter_jsonl(metrics_path, allow_torn_tail=True):
        _step_of(row, f"{metrics_path}:{line}")
        metrics.append(row)
    metrics.sort(key=lambda row: row["step"])
    config_path = folder / RUN_CONFIG_FILE
    config = _read_yaml(config_path) if config_path.exists() else {}
    train = _read_examples(folder / DATA_FOLDER / "train.jsonl")
    validation = _read_examples(folder / DATA_FOLDER / "validation.jsonl")
    traces, trace_source, rollouts = _traces(folder, train, validation)
    return TrainingRun(path=folder, config=config, metrics=metrics, validation=_validation_points(folder, validation),
                       traces=traces, trace_source=trace_source, rollouts=rollouts, mixture=_mixture(train.values()))


def find_run_folders(paths: Iterable[str | Path]) -> tuple[list[Path], list[Path]]:
    """(training-run folders, evaluation folders) at or below ``paths``, each once, in path order."""
    training: dict[Path, None] = {}
    evaluations: dict[Path, None] = {}
    for given in paths:
        root = Path(given)
        if not root.exists():
            raise BadInputError(f"{root}: no such folder")
        if not root.is_dir():
            raise BadInputError(f"{root}: not a folder (give a run or evaluation folder)")
        for marker, found in ((METRICS_FILE, training), (RESULTS_FILE, evaluations)):
            for file in sorted(root.rglob(marker)):
                if file.is_file():
                    found.setdefault(file.parent.resolve(), None)
    return list(training), list(evaluations)


def find_analysis_files(paths: Iterable[str | Path]) -> dict[str, list[Path]]:
    """The :data:`ANALYSIS_FILES` at or below ``paths``: file name → paths, each once, in path order."""
    found: dict[str, dict[Path, None]] = {name: {} for name in ANALYSIS_FILES}
    for given in paths:
        root = Path(given)
        for name in ANALYSIS_FILES:
            for file in sorted(root.rglob(name)) if root.is_dir() else ():
                if file.is_file():
                    found[name].setdefault(file.resolve(), None)
    return {name: list(files) for name, files in found.items() if files}


def run_folder_of(model: str) -> Path | None:
    """The ``tomrl train`` run folder a model path lies in (``RUN/final``, ``RUN/best``,
    ``RUN/checkpoints/checkpoint-50``, ``RUN/warm_start/model``), or None: the nearest folder above
    the model, up to three levels, holding both ``config.yaml`` and ``metrics.jsonl``."""
    path = Path(model).expanduser()
    try:
        if not path.exists():
            return None
        parents = path.resolve().parents
    except OSError:
        return None
    for folder in list(parents)[:3]:
        if (folder / RUN_CONFIG_FILE).is_file() and (folder / METRICS_FILE).is_file():
            return folder
    return None


def read_run_origin(folder: Path) -> TrainingRun:
    """A run folder read only for what says where its models came from: config (model, seed) and training mixture."""
    config_path = folder / RUN_CONFIG_FILE
    return TrainingRun(path=folder, config=_read_yaml(config_path), metrics=[],
                       mixture=_mixture(_read_examples(folder / DATA_FOLDER / "train.jsonl").values()))


def load_runs(paths: Iterable[str | Path], scheme: str = "strict") -> RunSet:
    """Every training run and evaluation at or below ``paths``, and other analyses' result files.

    An evaluated model inside a run folder that is not below ``paths`` (``tomrl report`` given only
    evaluation folders) is traced to that folder (:func:`run_folder_of`), so it is still reported as a
    trained model, with its training seed."""
    paths = list(paths)
    training_dirs, evaluation_dirs = find_run_folders(paths)
    analysis_files = find_analysis_files(paths)
    if not training_dirs and not evaluation_dirs and not analysis_files:
        raise BadInputError(
            f"no runs found under {', '.join(map(str, paths))}: expected folders with {METRICS_FILE} "
            f"(tomrl train), {RESULTS_FILE} (tomrl eval) or {' / '.join(ANALYSIS_FILES)} (tomrl analyze)"
        )
    evaluations, skipped = [], []
    for folder in evaluation_dirs:
        evaluation = read_evaluation(folder, scheme)
        if results_answered(evaluation.info) == 0:
            skipped.append(f"{folder}: {RESULTS_FILE} has no answered question (a failed evaluation); left out")
        else:
            evaluations.append(evaluation)
    if not training_dirs and not evaluations and not analysis_files:
        raise BadInputError(f"no runs to report under {', '.join(map(str, paths))}: " + "; ".join(skipped))
    runs = RunSet(training=[read_training_run(d) for d in training_dirs], evaluations=evaluations,
                  analysis_files=analysis_files, skipped=skipped)
    known = set(training_dirs)
    for evaluation in runs.evaluations:
        if runs.run_that_trained(evaluation) is None and (folder := run_folder_of(evaluation.model)) is not None:
            if folder not in known:
                known.add(folder)
                runs.origins.append(read_run_origin(folder))
    return runs


# ---------------------------------------------------------------------------- an evaluation's questions


def _file_benchmark_path(evaluation: Evaluation, name: str) -> tuple[Path | None, str]:
    """The JSONL file a ``file-*`` benchmark was read from, as ``results.json`` names it.

    ``tomrl eval`` writes the path as given on its command line, often relative to where it ran;
    it is tried as written, then against each folder above the evaluation. The file must still
    hash to the benchmark's version (its content hash), else it is another file now.
    """
    import hashlib

    raw = evaluation.info.get("benchmarks", {}).get(name, {})
    written = (raw.get("loader_options") or {}).get("path") if isinstance(raw, dict) else None
    if not isinstance(written, str) or not written:
        return None, f"results.json names no file for {name} (benchmarks.{name}.loader_options.path)"
    written_path = Path(written).expanduser()
    candidates = [written_path] if written_path.is_absolute() else [
        written_path, *[parent / written_path for parent in evaluation.path.resolve().parents]]
    for candidate in candidates:
        if candidate.is_file():
            version = raw.get("version")
            digest = hashlib.sha256(candidate.read_bytes()).hexdigest()[:12]
            if isinstance(version, str) and version and version != digest:
                return None, f"{candidate} has changed since the evaluation (hash {digest}, evaluated {version})"
            return candidate, ""
    return None, f"{written} (benchmarks.{name}.loader_options.path) was not found from here or above {evaluation.path}"


def benchmark_examples(evaluation: Evaluation, name: str) -> tuple[dict[str, Example], str]:
    """``(question id → Example, note)`` of one benchmark of an evaluation, reloaded the way
    ``tomrl eval`` loaded it; empty with a note saying why when it cannot be reloaded."""
    from tomrl.evaluation.benchmarks import BENCHMARKS, DataMissing, load_examples

    raw = evaluation.info.get("benchmarks", {}).get(name, {})
    if isinstance(raw, dict) and raw.get("loader") == "jsonl-file":
        path, why = _file_benchmark_path(evaluation, name)
        if path is None:
            return {}, why
        return _read_examples(path), ""
    benchmark = BENCHMARKS.get(name)
    if benchmark is None:
        return {}, f"{name} is neither a registered benchmark nor a file benchmark results.json can locate"
    config = evaluation.info.get("config") or {}
    try:
        examples = load_examples(benchmark, config.get("data_paths") or {}, config.get("heldout_n", 0),
                                 config.get("heldout_seed", 0))
    except (DataMissing, BadInputError) as error:
        return {}, f"{name}: its questions cannot be reloaded ({error})"
    return {example.id: example for example in examples}, ""
