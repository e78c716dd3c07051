"""The report of a study folder (``tomrl study``): matrix, divergence, curves, difficulty, seeds, arms.

    tomrl report --study runs/study/cpu_mini          # writes runs/study/cpu_mini/report/

    from tomrl.analysis.study_report import write_study_report
    write_study_report(Path("runs/study/cpu_mini"))   # {"html": …, "markdown": …, "json": …}

A study folder holds a grid of training runs (data mixture × arm × seed [× model]), each run's
evaluations at its checkpoints, and the base model's evaluations (the contract is in
docs/analysis.md, "Study reports"). The report has, in this order:

1. what it was computed on (the grid, every cell's status, the tasks, which are held out);
2. the **generalization matrix**: training mixture · arm (rows) × evaluation task (columns),
   accuracy of the final models pooled over seeds, with Wilson intervals, and the change from the
   base model on the same questions with a paired bootstrap interval; held-out tasks marked;
3. **in-distribution vs held-out accuracy over checkpoints**, per run (Paper B's divergence),
   with the ID/OOD divergence detector of :mod:`tomrl.analysis.detectors`;
4. **reward and response length over training steps** per arm and mixture (Paper A's Figure 3);
5. **accuracy by order** per task with the best no-ToM baseline (:mod:`tomrl.audit.baseline`: the best agent-agnostic
   rule or agent-blind learner) overlaid;
6. **seed spread**: per mixture · arm and task, the mean and range over seeds;
7. the **arm comparison**: every pair of arms on the same questions (exact McNemar and a paired
   bootstrap interval, :mod:`tomrl.analysis.paired`), Holm-corrected over all comparisons.

The training effects (the change from the base model in 2, the arm differences in 7) pool the
seeds for their interval, which covers question sampling only; beside it stands each seed's own
effect with their range and sd (the run-to-run spread of training), and a gain, loss or "better"
is claimed only when every seed's effect has its sign ("inconclusive: training seeds disagree
(…)" otherwise). A group with one seed says that the spread is not measured
(:data:`tomrl.analysis.significance.ONE_TRAINING_SEED`).

The study's own files (``grid.json``, and the per-answer ``benchmark``, ``id``, ``correct``,
``order`` and ``source`` of each ``samples.jsonl``) are read here; training runs are read by
:mod:`tomrl.analysis.runs`, the paired tests are :mod:`tomrl.analysis.paired`. Decisions (pairing
on seed and question, where the no-ToM rule's questions come from) are in docs/analysis.md,
"Study reports".

Only cells whose status is ``done`` enter the numbers (an unfinished cell may hold a partial
``samples.jsonl``); the others are listed with their status. Files written into the output
folder (atomically): ``report.html``, ``report.md``, the PNGs and ``study_report.json`` (every
number, for scripts).
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterable

from tomrl.analysis.detectors import detect_id_ood_divergence
from tomrl.analysis.document import Document, Figure, Finding, Paragraph, Section, Table, write_document
from tomrl.analysis.paired import PairedComparison, holm_adjust, paired_comparison
from tomrl.analysis.plots import Curve, Panel, accuracy_curve, plot_accuracy_by_order, plot_generalization_matrix, plot_panels
from tomrl.analysis.runs import TrainingRun, read_training_run, task_family
from tomrl.analysis.significance import ONE_TRAINING_SEED, Interval, SeedEffects, from_counts, training_effect_verdict
from tomrl.io import BadInputError, atomic_write_json, iter_jsonl, loads_json
from tomrl.stats import Accuracy

GRID_FILE = "grid.json"
CONFIG_FILE = "study.yaml"
RUNS_FOLDER = "runs"
EVALS_FOLDER = "evals"
BASE_PREFIX = "base__"
FINAL = "final"
DONE = "done"
LEVEL = 0.95
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
# Arms are compared on the answer-and-format reward each RL run logs under the reward's name
# ("rewards/paper/mean"): the total ("reward", the fallback) also holds the fidelity arm's weighted
# fidelity score, which is drawn beside it instead.
REWARD_KEY = "reward"
FIDELITY_KEY = "rewards/fidelity/mean"
LENGTH_KEY = "response_length/mean"


# ---------------------------------------------------------------------------- the study folder


@dataclass(frozen=True)
class StudyTask:
    name: str
    held_out: bool  # the study declares it held out of training
    benchmark: str  # a benchmark name, a recipe ("recipe:NAME:SPLIT") or a JSONL file


@dataclass(frozen=True)
class StudyCell:
    id: str
    mixture: str
    arm: str
    seed: int
    model: str | None
    status: str

    @property
    def group(self) -> tuple[str | None, str, str]:
        """(model, mixture, arm): the cells of one group differ only by seed."""
        return self.model, self.mixture, self.arm


@dataclass
class Answers:
    """One model's answers on the study's tasks: task → question id → (correct, order, source)."""

    by_task: dict[str, dict[str, tuple[bool, int | None, str | None]]] = field(default_factory=dict)

    def count(self) -> int:
        return sum(len(rows) for rows in self.by_task.values())


@dataclass
class Study:
    folder: Path
    config: dict
    tasks: list[StudyTask]
    cells: list[StudyCell]
    runs: dict[str, TrainingRun]  # cell id → its training run (done cells with metrics)
    checkpoints: dict[str, dict[str, Answers]]  # cell id → checkpoint ("final", "step-50") → answers
    base: dict[str | None, Answers]  # model → the base model's answers
    base_folders: dict[str | None, Path]
    notes: list[str] = field(default_factory=list)
    loaders: dict[str, object] = field(default_factory=dict)  # task name → tomrl.evaluation Benchmark, to reload its questions
    aliases: dict[str, str] = field(default_factory=dict)  # a benchmark name in results.json / samples.jsonl → its task

    @property
    def models(self) -> list[str | None]:
        return list(dict.fromkeys(cell.model for cell in self.cells))

    @property
    def arms(self) -> list[str]:
        return list(dict.fromkeys(cell.arm for cell in self.cells))

    @property
    def done(self) -> list[StudyCell]:
        return [cell for cell in self.cells if cell.status == DONE]

    def task(self, name: str) -> StudyTask | None:
        return next((task for task in self.tasks if task.name == name), None)

    def group_label(self, group: tuple[str | None, str, str]) -> str:
        model, mixture, arm = group
        return f"{mixture} · {arm}" + (f" · {model}" if len(self.models) > 1 and model else "")

    def base_label(self, model: str | None) -> str:
        return f"base · {model}" if model else "base"


def _read_json(path: Path) -> dict:
    try:
        data = loads_json(path.read_text(encoding="utf-8"), str(path))
    except ValueError as err:
        raise BadInputError(f"{path}: invalid JSON ({err})") from None
    if not isinstance(data, dict):
        raise BadInputError(f"{path}: expected a JSON object at the top level")
    return data


def _field(obj: dict, key: str, kind, where: str, optional: bool = False):
    value = obj.get(key)
    if value is None and optional:
        return None
    if (isinstance(value, bool) and kind is not bool) or not isinstance(value, kind):  # True is an int too
        raise BadInputError(f"{where}: field '{key}': expected {getattr(kind, '__name__', kind)}, got {value!r}")
    return value


def read_grid(path: Path) -> tuple[list[StudyCell], list[StudyTask]]:
    """The cells and tasks of ``grid.json``."""
    data = _read_json(path)
    cells, tasks = [], []
    for index, raw in enumerate(_field(data, "cells", list, str(path))):
        where = f"{path}: cells[{index}]"
        if not isinstance(raw, dict):
            raise BadInputError(f"{where}: expected an object")
        cells.append(StudyCell(_field(raw, "id", str, where), str(_field(raw, "mixture", str, where)),
                               str(_field(raw, "arm", str, where)), _field(raw, "seed", int, where),
                               _field(raw, "model", str, where, optional=True), _field(raw, "status", str, where)))
    for index, raw in enumerate(_field(data, "tasks", list, str(path))):
        where = f"{path}: tasks[{index}]"
        if not isinstance(raw, dict):
            raise BadInputError(f"{where}: expected an object")
        tasks.append(StudyTask(_field(raw, "name", str, where), _field(raw, "held_out", bool, where),
                               _field(raw, "benchmark", str, where)))
    return cells, tasks


def _file_of(folder: Path, benchmark: str) -> Path | None:
    """A task's JSONL file: absolute, or relative to the study folder, else to the working folder."""
    for candidate in (folder / Path(benchmark).expanduser(), Path(benchmark).expanduser()):
        if candidate.is_file():
            return candidate
    return None


def expand_tasks(folder: Path, tasks: list[StudyTask]) -> tuple[list[StudyTask], dict[str, str], dict[str, object]]:
    """The report's task columns, what a sample row's ``benchmark`` may say → its column, and each
    column's benchmark (to reload its questions for the no-ToM rule).

    Each task's ``benchmark`` is resolved as ``tomrl eval`` resolves it
    (:func:`tomrl.evaluation.benchmarks.resolve`), so the names in ``samples.jsonl`` are known: a
    file becomes ``file-<stem>``, a registered benchmark keeps its name. A recipe test split
    (``recipe:paper-b-all:test``) stands for several benchmarks (Paper B's 12 tasks): each becomes
    its own column, held out when the study's task is or when the recipe says so. A benchmark that
    cannot be resolved (a file no longer there) keeps the task's own name and aliases.
    """
    from tomrl.evaluation.benchmarks import resolve

    columns: list[StudyTask] = []
    aliases: dict[str, str] = {}
    loaders: dict[str, object] = {}
    for task in tasks:
        reference = task.benchmark
        if reference.endswith(".jsonl"):
            found = _file_of(folder, reference)
            reference = str(found) if found is not None else reference
        try:
            benchmarks = [benchmark for benchmark, _ in resolve([reference])]
        except Exception:  # an unknown name or a missing file: the samples may still name the task
            benchmarks = []
        file_name = f"file-{Path(task.benchmark).stem}" if task.benchmark.endswith(".jsonl") else None
        for alias in (task.name, task.benchmark, file_name):
            if alias:
                aliases.setdefault(alias, task.name)
        if len(benchmarks) <= 1:
            columns.append(task)
            if benchmarks:
                aliases.setdefault(benchmarks[0].name, task.name)
                loaders[task.name] = benchmarks[0]
            continue
        for benchmark in benchmarks:
            held_out = task.held_out or bool(getattr(benchmark, "held_out", False))
            columns.append(StudyTask(benchmark.name, held_out, task.benchmark))
            aliases.setdefault(benchmark.name, benchmark.name)
            loaders[benchmark.name] = benchmark
    return columns, aliases, loaders


def read_answers(folder: Path, task_names: dict[str, str]) -> Answers:
    """The strict-scored answers in an evaluation folder's ``samples.jsonl``."""
    path = folder / "samples.jsonl"
    answers = Answers()
    if not path.exists():
        return answers
    for line, row in iter_jsonl(path, allow_torn_tail=True):
        where = f"{path}:{line}"
        benchmark, question, correct = row.get("benchmark"), row.get("id"), row.get("correct")
        if not isinstance(benchmark, str) or not isinstance(question, str):
            raise BadInputError(f"{where}: fields 'benchmark' and 'id': expected strings")
        if not isinstance(correct, bool):
            raise BadInputError(f"{where}: field 'correct': expected true or false")
        order = row.get("order")
        source = row.get("source")
        answers.by_task.setdefault(task_names.get(benchmark, benchmark), {})[question] = (
            correct, order if isinstance(order, int) and not isinstance(order, bool) else None,
            source if isinstance(source, str) else None)
    return answers


def _model_slugs(model: str) -> list[str]:
    """Folder-name forms of a model reference; the first is tomrl study's (its last path component,
    odd characters replaced by '-')."""
    last = model.rstrip("/").split("/")[-1]
    return list(dict.fromkeys([re.sub(r"[^A-Za-z0-9.-]+", "-", last).strip("-"), model, model.replace("/", "_"),
                               model.replace("/", "--"), last]))


def read_study(folder: str | Path) -> Study:
    """Everything the report needs from a study folder (see the module docstring)."""
    from tomrl.config import yaml_safe_load

    folder = Path(folder)
    grid = folder / GRID_FILE
    if not grid.exists():
        raise BadInputError(f"{folder}: no {GRID_FILE}: not a study folder (written by `tomrl study`)")
    cells, tasks = read_grid(grid)
    config_path = folder / CONFIG_FILE
    config = yaml_safe_load(config_path.read_text(encoding="utf-8")) if config_path.exists() else {}
    tasks, names, loaders = expand_tasks(folder, tasks)
    study = Study(folder, config if isinstance(config, dict) else {}, tasks, cells, {}, {}, {}, {}, loaders=loaders, aliases=names)
    for cell in study.done:
        run_dir = folder / RUNS_FOLDER / cell.id
        if (run_dir / "metrics.jsonl").exists():
            study.runs[cell.id] = read_training_run(run_dir)
        else:
            study.notes.append(f"cell {cell.id}: no training metrics ({run_dir / 'metrics.jsonl'} is missing)")
        evals = folder / EVALS_FOLDER / cell.id
        found = {}
        for checkpoint in sorted(p for p in evals.iterdir() if p.is_dir()) if evals.is_dir() else []:
            answers = read_answers(checkpoint, names)
            if answers.count():
                found[checkpoint.name] = answers
        study.checkpoints[cell.id] = found
        if not found:
            study.notes.append(f"cell {cell.id}: no evaluated answers under {evals}")
    base_dirs = sorted(p for p in (folder / EVALS_FOLDER).glob(BASE_PREFIX + "*") if p.is_dir())
    by_suffix = {p.name[len(BASE_PREFIX):]: p for p in base_dirs}
    for model in study.models:
        match = next((by_suffix[s] for s in _model_slugs(model) if s in by_suffix), None) if model else None
        if match is None and len(base_dirs) == 1:
            match = base_dirs[0]  # one base model in the study: it is every cell's
        if match is None:
            study.notes.append(f"no base-model evaluation for model {model or '(unnamed)'} "
                               f"(expected {folder / EVALS_FOLDER / (BASE_PREFIX + (model or 'MODEL'))})")
            continue
        study.base[model] = read_answers(match, names)
        study.base_folders[model] = match
    return study


# ---------------------------------------------------------------------------- what is in distribution


def sample_in_distribution(run: TrainingRun | None, task: StudyTask | None, task_name: str, order: int | None,
                           source: str | None) -> bool | None:
    """Did this cell's run train on the data of this answer's question?

    From the run's own training data (``data/train.jsonl``: families and orders, as the ordinary
    report decides); when that is unknown, from the study's task list (a task declared held out is
    held out, any other is taken as in distribution); None when neither says.
    """
    if run is not None and run.mixture:
        return bool(run.in_distribution(source or (task.benchmark if task else task_name), order))
    if task is not None:
        return not task.held_out
    return None


def checkpoint_step(run: TrainingRun | None, name: str, cell_folder: Path) -> float | None:
    """"step-50" → 50; "final" → the run's last logged step (or summary.json's steps); else None."""
    match = re.fullmatch(r"(?:step|checkpoint)-(\d+)", name)
    if match:
        return float(match.group(1))
    if name == FINAL:
        if run is not None and run.metrics:
            return float(run.metrics[-1]["step"])
        summary = cell_folder / "summary.json"
        if summary.exists():
            steps = _read_json(summary).get("steps")
            if isinstance(steps, (int, float)) and not isinstance(steps, bool):
                return float(steps)
    return None


# ---------------------------------------------------------------------------- the numbers


def _pooled(answers: Iterable[Answers], task: str) -> Accuracy:
    flags = [correct for a in answers for correct, _, _ in a.by_task.get(task, {}).values()]
    return from_counts(sum(flags), len(flags))


def _groups(study: Study) -> dict[tuple[str | None, str, str], list[StudyCell]]:
    groups: dict[tuple[str | None, str, str], list[StudyCell]] = {}
    for cell in study.done:
        groups.setdefault(cell.group, []).append(cell)
    return groups


def _task_columns(study: Study) -> list[str]:
    names = [task.name for task in study.tasks]
    for answers in [*study.base.values(), *(a for found in study.checkpoints.values() for a in found.values())]:
        for task in answers.by_task:
            if task not in names:
                names.append(task)  # answers under a benchmark the grid does not list
    return names


def _column_label(study: Study, task: str) -> str:
    declared = study.task(task)
    return f"{task} (held out)" if declared is not None and declared.held_out else task


def _final(study: Study, cell: StudyCell) -> Answers | None:
    return study.checkpoints.get(cell.id, {}).get(FINAL)


def _pairs_against_base(finals: list[tuple[StudyCell, Answers]], base: Answers, task: str):
    """(trained correct, base correct, question id) over every seed's answer to a question the base answered."""
    base_rows = base.by_task.get(task, {})
    trained, reference, questions = [], [], []
    for _, answers in finals:
        for question, (correct, _, _) in answers.by_task.get(task, {}).items():
            if question in base_rows:
                trained.append(correct)
                reference.append(base_rows[question][0])
                questions.append(question)
    return trained, reference, questions


def _points(interval: Interval) -> str:
    return interval.format_points()


def _direction(interval: Interval) -> int:
    return 1 if interval.above_zero else (-1 if interval.below_zero else 0)


def _paired_share(a: list[bool], b: list[bool]) -> float:
    """Mean of a − b over paired answers (accuracy A − accuracy B on the same questions)."""
    return (sum(a) - sum(b)) / len(a)


def _base_change_per_seed(finals: list[tuple[StudyCell, Answers]], base: Answers, task: str) -> SeedEffects:
    """Each seed's final model − the base model on the questions both answered."""
    effects = {}
    for cell, answers in finals:
        trained, reference, _ = _pairs_against_base([(cell, answers)], base, task)
        if trained:
            effects[cell.seed] = _paired_share(trained, reference)
    return SeedEffects.of(effects)


@dataclass
class _Matrix:
    rows: list[str]
    columns: list[str]
    cells: dict[tuple[str, str], Accuracy]
    in_distribution: set[tuple[str, str]]
    table: list[list[str]]
    changes: list[list[str]]
    data: list[dict]
    seed_counts: set[int] = field(default_factory=set)  # training seeds behind the changes from the base model


def _in_distribution_share(study: Study, group_cells: list[tuple[StudyCell, Answers]], task: str) -> float | None:
    flags = []
    for cell, answers in group_cells:
        run = study.runs.get(cell.id)
        for _, order, source in answers.by_task.get(task, {}).values():
            verdict = sample_in_distribution(run, study.task(task), task, order, source)
            if verdict is not None:
                flags.append(verdict)
    return sum(flags) / len(flags) if flags else None


def generalization_matrix(study: Study) -> _Matrix:
    tasks = _task_columns(study)
    labels = {task: _column_label(study, task) for task in tasks}
    matrix = _Matrix([], [labels[t] for t in tasks], {}, set(), [], [], [])
    for model in study.models:
        base = study.base.get(model)
        if base is None:
            continue
        row = study.base_label(model)
        matrix.rows.append(row)
        accs = [_pooled([base], task) for task in tasks]
        for task, acc in zip(tasks, accs):
            matrix.cells[(row, labels[task])] = acc
            matrix.data.append({"row": row, "task": task, "kind": "base", "accuracy": acc.to_dict()})
        matrix.table.append([row, "1 (base)", *[acc.format() if acc.n else "–" for acc in accs]])
    for group, cells in _groups(study).items():
        finals = [(cell, answers) for cell in cells if (answers := _final(study, cell)) is not None]
        if not finals:
            continue
        row = study.group_label(group)
        matrix.rows.append(row)
        table_row, change_row = [row, str(len(finals))], [row]
        base = study.base.get(group[0])
        for task in tasks:
            acc = _pooled([a for _, a in finals], task)
            share = _in_distribution_share(study, finals, task)
            mark = "" if share is None or share == 0 else (" ID" if share == 1 else f" partly ID ({100 * share:.0f} %)")
            entry = {"row": row, "task": task, "kind": "trained", "accuracy": acc.to_dict(), "seeds": len(finals),
                     "in_distribution_share": share}
            if acc.n:
                matrix.cells[(row, labels[task])] = acc
                if share:
                    matrix.in_distribution.add((row, labels[task]))
            table_row.append(f"{acc.format()}{mark}" if acc.n else "–")
            matrix.data.append(entry)
            trained, reference, questions = _pairs_against_base(finals, base, task) if base else ([], [], [])
            if trained:
                result = paired_comparison(trained, reference, questions, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, LEVEL)
                seeds = _base_change_per_seed(finals, base, task)
                direction = _direction(result.difference)
                verdict = training_effect_verdict(direction, seeds, {1: "gain", -1: "loss"}.get(direction, ""),
                                                  "inconclusive")
                spread = seeds.describe() if seeds.seeds >= 2 else "one training seed"
                change_row.append(f"{_points(result.difference)} (n={result.pairs} pairs, {result.clusters} questions); "
                                  f"{spread}: {verdict}")
                entry["change_from_base"] = result.to_dict()
                entry["change_per_seed"] = seeds.to_dict()
                entry["change_verdict"] = verdict
                matrix.seed_counts.add(seeds.seeds)
            else:
                change_row.append("–")
        matrix.table.append(table_row)
        matrix.changes.append(change_row)
    return matrix


def _matrix_section(study: Study, out: Path, results: dict) -> Section:
    matrix = generalization_matrix(study)
    results["generalization_matrix"] = matrix.data
    section = Section("Generalization: training mixture · arm × evaluation task")
    if not matrix.rows or not matrix.columns:
        section.blocks.append(Paragraph("No evaluated final model or base model yet: nothing to tabulate."))
        return section
    file = "study-generalization-matrix.png"
    plot_generalization_matrix(out / file, matrix.rows, matrix.columns, matrix.cells, matrix.in_distribution,
                               title="Final models, pooled over seeds (ID = the row trained on that task)")
    section.blocks.append(Figure(file, "Accuracy of the base model(s) and of each mixture · arm's final models (pooled "
                                       "over seeds) on each task; boxed 'ID' cells hold questions the row's runs "
                                       "trained on; '(held out)' tasks are declared held out by the study."))
    section.blocks.append(Table(["row", "seeds", *matrix.columns], matrix.table,
                                caption="Strict accuracy % [95 % Wilson interval] (n = answers: seeds × questions, "
                                        "pooled); ID / partly ID: share of the answers whose questions the runs "
                                        "trained on (their data/train.jsonl families and orders)"))
    if matrix.changes:
        section.blocks.append(Table(["row", *matrix.columns], matrix.changes,
                                    caption="Change from the base model on the same questions: trained − base, "
                                            "percentage points [95 % paired bootstrap interval, resampling questions] "
                                            "(n = pairs: every seed's answer beside the base model's answer to it); "
                                            "then each training seed's own change, their range and sd, and the verdict: "
                                            "gain or loss only when the interval excludes zero and every seed's change "
                                            "has its sign"))
        if 1 in matrix.seed_counts:
            section.blocks.append(Paragraph(f"Rows with one training seed: {ONE_TRAINING_SEED}; their gain or loss is "
                                            "one run's."))
    return section


# ---------------------------------------------------------------------------- over checkpoints


def _id_held_out(study: Study, cell: StudyCell, answers: Answers) -> tuple[Accuracy, Accuracy]:
    run = study.runs.get(cell.id)
    flags: dict[bool, list[bool]] = {True: [], False: []}
    for task, rows in answers.by_task.items():
        for correct, order, source in rows.values():
            verdict = sample_in_distribution(run, study.task(task), task, order, source)
            if verdict is not None:
                flags[verdict].append(correct)
    return from_counts(sum(flags[True]), len(flags[True])), from_counts(sum(flags[False]), len(flags[False]))


def _mixture_of(run: TrainingRun | None) -> str:
    return f"trained on {run.describe_mixture()}" if run is not None else "its training data is unknown"


def _checkpoints_section(study: Study, out: Path, results: dict) -> Section:
    section = Section("In-distribution vs held-out accuracy over checkpoints (Paper B's divergence)")
    panels: dict[str, list[Panel]] = {}  # mixture → one panel per arm (and model)
    table, findings, data = [], [], []
    for group, cells in _groups(study).items():
        curves = []
        for cell in cells:
            run = study.runs.get(cell.id)
            evaluated = [(checkpoint_step(run, name, study.folder / RUNS_FOLDER / cell.id), name, answers)
                         for name, answers in study.checkpoints.get(cell.id, {}).items()]
            base = study.base.get(cell.model)
            if base is not None and evaluated and all(step != 0 for step, _, _ in evaluated):
                # The base model is the run at step 0: the curve starts where training started.
                evaluated.append((0.0, "base model", base))
            evaluated.sort(key=lambda item: (item[0] is None, item[0] or 0.0, item[1]))
            points = []
            for step, name, answers in evaluated:
                in_dist, held_out = _id_held_out(study, cell, answers)
                table.append([cell.id, name, f"{step:g}" if step is not None else "?",
                              in_dist.format() if in_dist.n else "–", held_out.format() if held_out.n else "–"])
                data.append({"cell": cell.id, "checkpoint": name, "step": step, "in_distribution": in_dist.to_dict(),
                             "held_out": held_out.to_dict()})
                if step is not None:
                    points.append((step, in_dist, held_out))
            points.sort(key=lambda p: p[0])
            steps = [p[0] for p in points]
            if any(p[1].n for p in points):
                curves.append(accuracy_curve(f"seed {cell.seed} ID", steps, [p[1] for p in points], "-o"))
            if any(p[2].n for p in points):
                curves.append(accuracy_curve(f"seed {cell.seed} held out", steps, [p[2] for p in points], "--s"))
            if not any(p[1].n for p in points):
                missing = f"none of the evaluated questions is in distribution for this run ({_mixture_of(run)})"
            elif not any(p[2].n for p in points):
                missing = f"every evaluated question is in distribution for this run ({_mixture_of(run)})"
            else:
                missing = f"{len(points)} evaluated checkpoint(s) with a known step"
            findings.append(detect_id_ood_divergence(steps, [p[1] for p in points], [p[2] for p in points],
                                                     subject=cell.id, level=LEVEL, missing_because=missing))
        if curves:
            panels.setdefault(group[1], []).append(Panel(study.group_label(group), "accuracy", curves, percent=True))
    results["checkpoints"] = data
    results["divergence"] = [f.to_dict() for f in findings]
    for index, (mixture, mixture_panels) in enumerate(panels.items()):
        # One figure per mixture: a study of many mixtures × arms would otherwise stack dozens of panels.
        file = f"study-id-vs-held-out-{index + 1}-{_slug(mixture)}.png"
        plot_panels(out / file, mixture_panels, title=f"{mixture}: ID (solid) vs held-out (dashed) accuracy")
        section.blocks.append(Figure(file, f"Mixture {mixture}, per run (one line per seed): strict accuracy on the "
                                           "questions its mixture trained on (ID) and on the others (held out), "
                                           "pooled over tasks, at each evaluated checkpoint, starting from the base "
                                           "model at step 0; bands are 95 % Wilson intervals."))
    if table:
        section.blocks.append(Table(["run", "checkpoint", "step", "in distribution", "held out"], table,
                                    caption="Strict accuracy % [95 % Wilson interval] (n = questions), pooled over tasks"))
    else:
        section.blocks.append(Paragraph("No evaluated checkpoints of finished runs yet."))
    section.blocks += [Finding(f) for f in findings]
    return section


# ---------------------------------------------------------------------------- training curves


def _mean_band(runs: list[TrainingRun], key: str) -> Curve | None:
    """Mean over seeds at the steps every seed logged, with the min–max range over seeds as its band."""
    series = []
    for run in runs:
        steps, values = run.series(key)
        series.append({s: v for s, v in zip(steps, values) if v is not None})
    common = sorted(set.intersection(*(set(s) for s in series))) if series else []
    if not common:
        return None
    values = [[s[step] for s in series] for step in common]
    return Curve("", common, [sum(v) / len(v) for v in values], [min(v) for v in values], [max(v) for v in values])


def _answer_reward_key(runs: list[TrainingRun]) -> str:
    """The per-reward mean of the run's answer reward (every logged ``rewards/NAME/mean`` but fidelity's), else the total."""
    keys = [k for k in runs[0].metric_keys() if k.startswith("rewards/") and k.endswith("/mean") and k != FIDELITY_KEY]
    return keys[0] if len(keys) == 1 else REWARD_KEY


def _third_means(curve: Curve) -> tuple[float, float]:
    size = max(1, len(curve.values) // 3)
    return sum(curve.values[:size]) / size, sum(curve.values[-size:]) / size


def _training_section(study: Study, out: Path, results: dict) -> Section:
    section = Section("Reward and response length over training (Paper A's Figure 3)")
    panels: dict[str, dict[str, list[Curve]]] = {}  # mixture → metric → one curve per arm (and model)
    table, data = [], []
    for group, cells in _groups(study).items():
        runs = [study.runs[c.id] for c in cells if c.id in study.runs]
        if not runs:
            continue
        label = study.group_label(group)
        row = [label, str(len(runs))]
        for panel, key in ((REWARD_KEY, _answer_reward_key(runs)), (FIDELITY_KEY, FIDELITY_KEY), (LENGTH_KEY, LENGTH_KEY)):
            curve = _mean_band(runs, key)
            if curve is None:
                row.append("not logged")
                continue
            arm = group[2] + (f" · {group[0]}" if len(study.models) > 1 and group[0] else "")
            panels.setdefault(group[1], {}).setdefault(panel, []).append(
                Curve(arm, curve.steps, curve.values, curve.low, curve.high))
            early, late = _third_means(curve)
            row.append(f"{early:.3g} → {late:.3g} ({len(curve.steps)} steps)")
            data.append({"group": label, "metric": key, "seeds": len(runs), "steps": list(curve.steps),
                         "mean": list(curve.values), "min": list(curve.low or []), "max": list(curve.high or [])})
        table.append(row)
    results["training_curves"] = data
    for index, (mixture, by_metric) in enumerate(panels.items()):
        drawn = [Panel(title, unit, curves) for key, title, unit in
                 ((REWARD_KEY, "Answer + format reward (batch mean; line: mean over seeds, band: min–max over seeds)", "reward"),
                  (FIDELITY_KEY, "Fidelity reward (batch mean; arms that train on it)", "fidelity"),
                  (LENGTH_KEY, "Response length (batch mean; line: mean over seeds, band: min–max over seeds)", "tokens"))
                 if (curves := by_metric.get(key))]
        file = f"study-training-curves-{index + 1}-{_slug(mixture)}.png"
        plot_panels(out / file, drawn, title=f"Training curves, mixture {mixture}")
        section.blocks.append(Figure(file, f"Mixture {mixture}: reward and mean response length per logged step, one "
                                           "line per arm (mean over its seeds at the steps all seeds logged)."))
    if table:
        section.blocks.append(Table(["mixture · arm", "seeds", "answer + format reward: first third → last third",
                                     "fidelity reward: first third → last third",
                                     "response length (tokens): first third → last third"], table,
                                    caption="Means over the first and last third of the logged steps (means over "
                                            "seeds); an arm without a reward (supervised) or without the fidelity "
                                            "reward says 'not logged'. The answer + format reward is Paper A's, the "
                                            "same for every RL arm; the fidelity arm's total adds its weighted fidelity "
                                            "score, which is therefore shown apart"))
    else:
        section.blocks.append(Paragraph("No training metrics of finished runs yet."))
    return section


# ---------------------------------------------------------------------------- orders and rules


def _task_examples(study: Study, task: StudyTask) -> tuple[list | None, str]:
    """The task's questions, to find the best no-ToM rule on them, or (None, why not).

    They are reloaded the way ``tomrl eval`` loaded them: a JSONL file (unified schema) is read
    again, a registered benchmark or a recipe task is reloaded with its loader and the base
    evaluation's settings (``results.json`` → ``config``). A file no longer there, or data that
    cannot be loaded on this machine, leaves the rule "not computed", with the reason.
    """
    from tomrl.evaluation.benchmarks import load_examples

    benchmark = study.loaders.get(task.name)
    if benchmark is None:
        if task.benchmark.endswith(".jsonl"):
            return None, f"its file {task.benchmark} is not found"
        return None, f"its benchmark '{task.benchmark}' is not one tomrl eval knows"
    config = {}
    for folder in study.base_folders.values():
        if (folder / "results.json").exists():
            config = _read_json(folder / "results.json").get("config") or {}
            break
    try:
        examples = load_examples(benchmark, config.get("data_paths") or {}, int(config.get("heldout_n") or 0),
                                 int(config.get("heldout_seed") or 0))
    except Exception as error:  # a missing data file, a loader that needs the network …: say why, go on
        return None, f"its questions could not be reloaded ({type(error).__name__}: {error})"
    where = benchmark.loader_options.get("path") if benchmark.loader == "jsonl-file" else None
    return examples, f"read from {where}" if where else f"reloaded with the {benchmark.name} loader"


def best_rule_by_order(examples: list, answered: set[str]) -> dict[int, tuple[str, Accuracy]]:
    """The best no-ToM baseline per order on the answered questions (:func:`tomrl.audit.baseline.no_tom_baseline`:
    the best agent-agnostic rule or agent-blind learner, cross-fitted by story): order → (its name, accuracy)."""
    from tomrl.audit.baseline import no_tom_baseline

    rules = no_tom_baseline([e for e in examples if e.id in answered])
    return {int(key): (rule.rule, rule.accuracy) for key, rule in rules.items() if key not in ("all", "None")}


def _slug(text: str) -> str:
    return re.sub(r"[^a-zA-Z0-9]+", "-", text).strip("-").lower() or "x"


def _family_of(study: Study, task: str, source: str | None) -> str:
    """The data-set family a question belongs to: from its source, else from its task's benchmark or name."""
    if source:
        return task_family(source)
    declared = study.task(task)
    return task_family(Path(declared.benchmark).stem if declared is not None else task)


def _orders_section(study: Study, out: Path, results: dict) -> Section:
    """Accuracy by order per data-set family, pooling the tasks of one family: Paper B's tasks are one
    order each (Hi-ToM order 1 … order 4), so only together do they make a difficulty curve."""
    section = Section("Accuracy by order of belief, with the best no-ToM baseline")
    data = []
    groups = _groups(study)
    sources = [(study.base_label(m), [a]) for m, a in study.base.items()]
    sources += [(study.group_label(g), [a for c in cells if (a := _final(study, c)) is not None])
                for g, cells in groups.items()]
    # family → model label → order → answers; family → task → answered question ids
    flags: dict[str, dict[str, dict[int, list[bool]]]] = {}
    answered: dict[str, dict[str, set[str]]] = {}
    for label, answer_sets in sources:
        for answers in answer_sets:
            for task, rows in answers.by_task.items():
                for question, (correct, order, source) in rows.items():
                    if order is None:
                        continue
                    family = _family_of(study, task, source)
                    flags.setdefault(family, {}).setdefault(label, {}).setdefault(order, []).append(correct)
                    answered.setdefault(family, {}).setdefault(task, set()).add(question)
    for index, (family, by_label) in enumerate(flags.items()):
        models = {label: {o: from_counts(sum(f), len(f)) for o, f in sorted(by_order.items())}
                  for label, by_order in by_label.items()}
        orders = sorted({o for by in models.values() for o in by})
        if len(orders) < 2:
            continue
        tasks = [t for t in _task_columns(study) if t in answered[family]]  # in the grid's order
        examples, reasons = [], []
        for task in tasks:
            declared = study.task(task)
            loaded, why = _task_examples(study, declared) if declared is not None else \
                (None, "it is not in grid.json, so its questions are unknown")
            if loaded is None:
                reasons.append(f"{task}: not computed, {why}")
            else:
                examples += [e for e in loaded if e.id in answered[family][task]]
                reasons.append(f"{task}: {why}")
        rules = best_rule_by_order(examples, {e.id for e in examples}) if examples else {}
        rule_source = "; ".join(reasons) + ("" if rules or not examples else "; none of the questions asks for a location")
        file = f"study-orders-{index + 1}-{_slug(family)}.png"
        title = f"{family} ({', '.join(_column_label(study, t) for t in tasks)})"
        plot_accuracy_by_order(out / file, models, title=f"{title}: accuracy by order (95 % Wilson)",
                               reference={o: acc.value for o, (_, acc) in rules.items()} or None)
        section.blocks.append(Figure(file, f"{title}: strict accuracy by order, base model(s) and final models pooled "
                                           "over seeds; dashed line: the best no-ToM baseline (rule or agent-blind learner) per order, where computed."))
        rows = [[label, *[by[o].format() if o in by else "–" for o in orders]] for label, by in models.items()]
        rows.append(["best no-ToM baseline (rule or agent-blind learner)", *[f"{rules[o][1].format()} {rules[o][0]}" if o in rules else "not computed"
                                           for o in orders]])
        section.blocks.append(Table(["model", *[f"order {o}" for o in orders]], rows,
                                    caption=f"{title}: strict accuracy % [95 % Wilson] (n = answers, pooled over seeds); "
                                            f"rule: {rule_source}"))
        data.append({"family": family, "tasks": tasks, "orders": orders,
                     "models": {label: {str(o): a.to_dict() for o, a in by.items()} for label, by in models.items()},
                     "rule": {str(o): {"rule": r, "accuracy": a.to_dict()} for o, (r, a) in rules.items()},
                     "rule_source": rule_source})
    results["orders"] = data
    if not data:
        section.blocks.append(Paragraph("No data-set family has answers on two or more orders."))
    else:
        section.blocks.append(Paragraph(
            "Tasks of one data-set family are pooled, so single-order tasks (Paper B's Hi-ToM order 1 … 4) make one "
            "curve. The baseline is, per order, the better of the best agent-agnostic rule of tomrl.audit.rules and "
            "the agent-blind learner of tomrl.audit.learner (cross-fitted by story), chosen on exactly the questions "
            "answered here (in sample, so it over- rather than underestimates what a shortcut gets; with 10 questions "
            "the best of 66 rules finds luck); 'not computed' where a task's questions could not be reloaded (the "
            "reason is in the caption). A model bar below the dashed line is beaten by a reader that tracks no belief."))
    return section


# ---------------------------------------------------------------------------- seeds


def _seed_section(study: Study, results: dict) -> Section:
    tasks = _task_columns(study)
    rows, data = [], []
    for group, cells in _groups(study).items():
        finals = [(c, a) for c in cells if (a := _final(study, c)) is not None]
        if not finals:
            continue
        row = [study.group_label(group), ", ".join(str(c.seed) for c, _ in finals)]
        for task in tasks:
            accs = [(c.seed, _pooled([a], task)) for c, a in finals]
            accs = [(s, acc) for s, acc in accs if acc.n]
            if not accs:
                row.append("–")
                continue
            values = [acc.value for _, acc in accs]
            mean = sum(values) / len(values)
            sizes = sorted({acc.n for _, acc in accs})
            size = f"n={sizes[0]}" + (f"–{sizes[-1]}" if len(sizes) > 1 else "") + " each"
            row.append(f"{100 * mean:.1f} (range {100 * min(values):.1f}–{100 * max(values):.1f}; "
                       f"{_plural(len(values), 'seed')}, {size})")
            data.append({"group": study.group_label(group), "task": task, "mean": mean, "min": min(values),
                         "max": max(values), "per_seed": {str(s): acc.to_dict() for s, acc in accs}})
        rows.append(row)
    results["seed_spread"] = data
    section = Section("Seed spread")
    if not rows:
        section.blocks.append(Paragraph("No evaluated final models yet."))
        return section
    section.blocks.append(Table(["mixture · arm", "seeds", *[_column_label(study, t) for t in tasks]], rows,
                                caption="Final models: mean strict accuracy % over seeds and its range (lowest–highest "
                                        "seed); n = questions per seed"))
    section.blocks.append(Paragraph(
        "A range wider than the differences between arms says that one seed per arm cannot rank them; the arm "
        "comparison below pairs seeds and questions and tests the difference."))
    return section


# ---------------------------------------------------------------------------- arms


@dataclass(frozen=True)
class ArmComparison:
    model: str | None
    mixture: str
    task: str
    arm_a: str
    arm_b: str
    seeds: tuple[int, ...]
    result: PairedComparison
    holm_p: float = 1.0
    per_seed: SeedEffects | None = None  # accuracy A − accuracy B of each seed's runs, on their shared questions

    @property
    def verdict(self) -> str:
        """The better arm when the Holm-adjusted McNemar p is below 1 − LEVEL, the bootstrap interval
        excludes zero *and* every seed's difference has its sign (one seed: "… better (one training
        seed)"); seeds that differ in sign: "inconclusive: training seeds disagree (…)"; otherwise
        "inconclusive (n=… pairs)"."""
        interval = self.result.difference
        direction = _direction(interval) if self.holm_p < 1 - LEVEL else 0
        better = self.arm_a if direction > 0 else self.arm_b
        return training_effect_verdict(direction, self.per_seed, f"{better} better",
                                       f"inconclusive (n={self.result.pairs} pairs)")

    def to_dict(self) -> dict:
        return {"model": self.model, "mixture": self.mixture, "task": self.task, "arm_a": self.arm_a,
                "arm_b": self.arm_b, "seeds": list(self.seeds), **self.result.to_dict(), "holm_p": self.holm_p,
                "per_seed": self.per_seed.to_dict() if self.per_seed is not None else None, "verdict": self.verdict}


POOLED_HELD_OUT = "all held-out tasks"


def arm_comparisons(study: Study) -> list[ArmComparison]:
    """Every pair of arms, per model, mixture and task, on the final models' answers paired by
    (seed, question id); with two or more held-out tasks, also on all of them pooled
    (:data:`POOLED_HELD_OUT`). Holm-adjusted over all of them."""
    finals: dict[tuple[str | None, str, str], dict[int, Answers]] = {}
    for cell in study.done:
        answers = _final(study, cell)
        if answers is not None:
            finals.setdefault(cell.group, {})[cell.seed] = answers
    comparisons = []
    arms = study.arms
    columns = _task_columns(study)
    units = [(task, [task]) for task in columns]
    held_out = [task for task in columns if (declared := study.task(task)) is not None and declared.held_out]
    if len(held_out) >= 2:
        # The question the arms are compared for: does one generalise better? One more test in the family.
        units.append((POOLED_HELD_OUT, held_out))
    for model in study.models:
        for mixture in dict.fromkeys(cell.mixture for cell in study.cells):
            for arm_a, arm_b in itertools.combinations(arms, 2):
                a_seeds, b_seeds = finals.get((model, mixture, arm_a), {}), finals.get((model, mixture, arm_b), {})
                seeds = tuple(sorted(set(a_seeds) & set(b_seeds)))
                for label, tasks in units:
                    a_flags, b_flags, questions = [], [], []
                    per_seed = {}
                    for seed in seeds:
                        start = len(a_flags)
                        for task in tasks:
                            a_rows, b_rows = a_seeds[seed].by_task.get(task, {}), b_seeds[seed].by_task.get(task, {})
                            for question in sorted(set(a_rows) & set(b_rows)):
                                a_flags.append(a_rows[question][0])
                                b_flags.append(b_rows[question][0])
                                questions.append((task, question))
                        if len(a_flags) > start:
                            per_seed[seed] = _paired_share(a_flags[start:], b_flags[start:])
                    if a_flags:
                        result = paired_comparison(a_flags, b_flags, questions, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, LEVEL)
                        comparisons.append(ArmComparison(model, mixture, label, arm_a, arm_b, seeds, result,
                                                         per_seed=SeedEffects.of(per_seed)))
    adjusted = holm_adjust([c.result.p_value for c in comparisons])
    return [replace(c, holm_p=p) for c, p in zip(comparisons, adjusted)]


def _pair_counts(results_file: Path, aliases: dict[str, str]) -> dict[str, tuple[int, int]]:
    """Task → (pairs with both members right, pairs) of every counterfactual-pair benchmark in one results.json."""
    if not results_file.exists():
        return {}
    counts = {}
    for name, entry in (_read_json(results_file).get("benchmarks") or {}).items():
        pair = ((entry.get("pairs") or {}).get("strict") or {}).get("pair_accuracy") if isinstance(entry, dict) else None
        if isinstance(pair, dict) and isinstance(pair.get("n"), int) and isinstance(pair.get("k"), int):
            counts[aliases.get(name, name)] = (pair["k"], pair["n"])
    return counts


def _pooled_counts(study: Study, read: Callable[[Path, dict[str, str]], dict]) -> dict[str, dict]:
    """Row label (the base model, each mixture · arm) → key → [right, total] from ``read`` of each final
    evaluation's results.json (``read(path, aliases) -> {key: (right, total)}``), pooled over seeds."""
    rows: dict[str, dict] = {}
    for model, folder in study.base_folders.items():
        label = "base" + (f" · {model}" if model else "")
        for key, (k, n) in read(folder / "results.json", study.aliases).items():
            rows.setdefault(label, {})[key] = [k, n]
    for group, cells in _groups(study).items():
        label = study.group_label(group)
        for cell in cells:
            for key, (k, n) in read(study.folder / EVALS_FOLDER / cell.id / FINAL / "results.json", study.aliases).items():
                total = rows.setdefault(label, {}).setdefault(key, [0, 0])
                total[0], total[1] = total[0] + k, total[1] + n
    return rows


NESTING_GROUPS = ("nesting required", "partially answerable")  # the by_nesting groups of results.json (tomrl.evaluation.results)


def _nesting_counts(results_file: Path, aliases: dict[str, str]) -> dict[tuple[str, str], tuple[int, int]]:
    """(task, nesting group) → (right, questions) of every benchmark of one results.json with questions of
    order >= 2 split by whether one named agent's own belief answers them."""
    if not results_file.exists():
        return {}
    counts = {}
    for name, entry in (_read_json(results_file).get("benchmarks") or {}).items():
        groups = entry.get("by_nesting") if isinstance(entry, dict) else None
        for group in NESTING_GROUPS:
            acc = (((groups or {}).get(group) or {}).get("strict") or {}).get("accuracy")
            if isinstance(acc, dict) and isinstance(acc.get("n"), int) and isinstance(acc.get("k"), int):
                counts[(aliases.get(name, name), group)] = (acc["k"], acc["n"])
    return counts


def _nesting_section(study: Study, results: dict) -> Section | None:
    """Accuracy on the questions of order >= 2 that need nesting (no named agent believes the gold by itself),
    beside those one agent's own belief answers, base and final models pooled over seeds."""
    rows = _pooled_counts(study, _nesting_counts)
    keys = list(dict.fromkeys(key for by_key in rows.values() for key in by_key))
    if not any(group == "nesting required" and n for by_key in rows.values() for (_, group), (_, n) in by_key.items()):
        return None  # no task asks a question that needs nesting
    results["nesting"] = {label: {f"{task} · {group}": {"k": k, "n": n} for (task, group), (k, n) in by_key.items()}
                          for label, by_key in rows.items()}
    table = [[label, *[from_counts(*by_key[key]).format() if key in by_key else "–" for key in keys]] for label, by_key in rows.items()]
    titles = {"nesting required": "nesting required", "partially answerable": "one agent's belief answers"}
    return Section("Questions that need nesting", [Table(
        ["model", *[f"{_column_label(study, task)}: {titles[group]}" for task, group in keys]], table,
        caption="Strict accuracy % [95 % Wilson interval] (n = answers: seeds × questions, pooled) on the questions of order "
                "≥ 2, split by tomrl.audit.partial: 'nesting required' when no agent the question names believes the gold by "
                "itself, so tracking what one person saw cannot answer it; the others are answered by one named agent's own "
                "first-order belief")])


def _pairs_section(study: Study, results: dict) -> Section | None:
    """Pair accuracy (both members of a counterfactual pair right) of the base and final models, pooled over
    seeds: the matrix counts the pairs' questions one by one, which a model answering one fixed container
    for both members of a pair half passes."""
    rows = _pooled_counts(study, _pair_counts)
    tasks = list(dict.fromkeys(task for by_task in rows.values() for task in by_task))
    if not tasks:
        return None
    results["pair_accuracy"] = {label: {task: {"k": k, "n": n} for task, (k, n) in by_task.items()} for label, by_task in rows.items()}
    table = [[label, *[from_counts(*by_task[task]).format() if task in by_task else "–" for task in tasks]]
             for label, by_task in rows.items()]
    return Section("Counterfactual pairs: both members right", [Table(
        ["model", *[_column_label(study, task) for task in tasks]], table,
        caption="Pair accuracy % [95 % Wilson interval] (n = pairs: seeds × pairs, pooled); a pair is two stories one "
                "event apart whose gold answers differ, so a model that ignores the event gets at most one of them")])


def _arms_section(study: Study, results: dict) -> Section:
    comparisons = arm_comparisons(study)
    results["arm_comparisons"] = [c.to_dict() for c in comparisons]
    section = Section("Arm comparison: paired tests on the same questions")
    if not comparisons:
        section.blocks.append(Paragraph("No two arms have final models evaluated on the same seeds and questions yet."))
        return section
    rows = []
    for c in comparisons:
        r = c.result
        rows.append([
            (f"{c.model} · " if len(study.models) > 1 and c.model else "") + c.mixture, _column_label(study, c.task),
            f"{c.arm_a} vs {c.arm_b}", f"{r.pairs} ({_plural(len(c.seeds), 'seed')} × {_plural(r.clusters, 'question')})",
            f"{100 * r.accuracy_a:.1f} / {100 * r.accuracy_b:.1f}", f"{r.both} / {r.only_a} / {r.only_b} / {r.neither}",
            _points(r.difference),
            c.per_seed.describe() if c.per_seed is not None and c.per_seed.seeds >= 2 else "one training seed",
            _p(r.p_value), _p(c.holm_p), c.verdict,
        ])
    section.blocks.append(Table(
        ["mixture", "task", "arms A vs B", "n pairs", "accuracy A / B (%)", "both / only A / only B / neither",
         "A − B [95 % paired bootstrap]", "A − B per training seed", "McNemar p (exact)", "Holm p", "verdict"], rows,
        caption=f"Final models; a pair is one question answered by both arms' runs of the same seed; "
                f"{len(comparisons)} comparisons in the Holm family"))
    section.blocks.append(Paragraph(
        f"Pairs are (seed, question id): the run of arm A with seed s against the run of arm B with seed s, on every "
        f"question both answered, pooled over the seeds both arms finished. The exact McNemar test uses the discordant "
        f"pairs (only A right against only B right); Holm's correction runs over all {len(comparisons)} comparisons of "
        f"this table. The interval resamples questions (all seeds' pairs of a question together, "
        f"{BOOTSTRAP_RESAMPLES} resamples, seed {BOOTSTRAP_SEED}), because one question's pairs across seeds are "
        f"correlated; McNemar treats the pairs as independent, which overstates the evidence when seeds agree. Neither "
        f"measures the run-to-run spread of training: that is the spread of each seed's own A − B, shown beside them. So "
        f"an arm is called better only when the Holm-adjusted p is below {1 - LEVEL:.2f}, the interval excludes zero and "
        f"every seed's A − B has its sign; seeds that differ in sign read 'inconclusive: training seeds disagree', and "
        f"otherwise the verdict is 'inconclusive' with the number of pairs it had."))
    if any(c.per_seed is None or c.per_seed.seeds < 2 for c in comparisons):
        section.blocks.append(Paragraph(f"Comparisons of one training seed: {ONE_TRAINING_SEED}; an arm called better "
                                        "there is better in that one pair of runs."))
    return section


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _p(value: float) -> str:
    return f"{value:.2g}" if value >= 1e-4 else f"{value:.1e}"


# ---------------------------------------------------------------------------- inputs and methods


def _inputs_section(study: Study) -> Section:
    statuses: dict[str, int] = {}
    for cell in study.cells:
        statuses[cell.status] = statuses.get(cell.status, 0) + 1
    rows = []
    for cell in study.cells:
        run = study.runs.get(cell.id)
        steps = f"{len(run.metrics)} logged steps" if run is not None else "–"
        evaluated = study.checkpoints.get(cell.id, {})
        answers = ", ".join(f"{name}: {a.count()} answers" for name, a in sorted(evaluated.items())) or "–"
        included = "yes" if cell.status == DONE else "no (not done)"
        rows.append([cell.id, cell.mixture, cell.arm, str(cell.seed), cell.model or "–", cell.status, included, steps, answers])
    tasks = [[t.name, t.benchmark, "held out" if t.held_out else "not declared held out"] for t in study.tasks]
    bases = [[study.base_label(m), str(study.base_folders[m]), f"{a.count()} answers"] for m, a in study.base.items()]
    blocks = [
        Paragraph(f"Study folder {study.folder}: {len(study.cells)} cells ("
                  + ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())) + f"), {len(study.tasks)} tasks. "
                  "Only cells whose status is 'done' enter the numbers below."),
        Table(["task", "benchmark", "declared"], tasks, caption="Tasks (grid.json)"),
        Table(["cell", "mixture", "arm", "seed", "model", "status", "in the numbers", "training", "evaluations"], rows,
              caption="Cells (grid.json) and what was found for each"),
    ]
    if bases:
        blocks.append(Table(["base model", "folder", "answers"], bases, caption="Base-model evaluations"))
    if study.notes:
        blocks.append(Paragraph("Missing: " + "; ".join(study.notes) + "."))
    return Section("What this report was computed on", blocks)


def _methods_section() -> Section:
    return Section("How the numbers were computed", [Paragraph(
        "Every accuracy is tomrl's strict score ('correct' in the evaluations' samples.jsonl) as value % [95 % Wilson "
        "interval] (n = answers). Pooled over seeds, n counts every seed's answer, so the interval treats seeds × "
        "questions as independent and is narrower than a question-level interval; the seed spread section shows how far "
        "seeds differ. Changes from the base model and differences between arms are paired: the same questions, "
        f"percentile bootstrap over questions ({BOOTSTRAP_RESAMPLES} resamples, seed {BOOTSTRAP_SEED}). Arm differences "
        "are tested with the exact McNemar test and Holm's correction over all comparisons made. These intervals and "
        "tests cover question sampling only; beside them stands each training seed's own effect (its range and sd: the "
        "run-to-run spread of training), and a gain, loss or better arm is claimed only when every seed's effect has its "
        "sign ('inconclusive: training seeds disagree' otherwise; with one seed, the report says the spread is not "
        "measured). ID vs held out: a "
        "question is in distribution for a run when its data-set family (and order) is in the run's data/train.jsonl; "
        "when the run's training data is missing, the study's own held_out flag of the task decides. The checkpoint "
        "'final' is placed at the run's last logged step.")])


# ---------------------------------------------------------------------------- entry point


def _reasoning_sections(study_dir: Path, out: Path, results: dict) -> list[Section]:
    """`tomrl analyze interventions` / `probes` results kept in the study folder (e.g. STUDY_DIR/analysis/),
    rendered as in `tomrl report`; the report folder itself is not searched."""
    from tomrl.analysis.report import analysis_sections
    from tomrl.analysis.runs import find_analysis_files

    found = {name: [f for f in files if out.resolve() not in f.parents]
             for name, files in find_analysis_files([study_dir]).items()}
    found = {name: files for name, files in found.items() if files}
    results["reasoning_analyses"] = {name: [str(f) for f in files] for name, files in found.items()}
    notes: list[str] = []
    sections = analysis_sections(found, out, notes)
    if notes:
        sections.append(Section("Reasoning analyses left out", [Paragraph(note) for note in notes]))
    return sections


def write_study_report(study_dir: Path, out_dir: Path | None = None) -> dict[str, Path]:
    """Read ``study_dir`` and write the report into ``out_dir`` (default ``study_dir/report``).

    Returns the paths written: ``html``, ``markdown``, ``json`` and one ``png:<name>`` per figure.
    """
    study_dir = Path(study_dir)
    out = Path(out_dir) if out_dir is not None else study_dir / "report"
    study = read_study(study_dir)
    out.mkdir(parents=True, exist_ok=True)
    results: dict = {"study": str(study_dir), "cells": len(study.cells), "done": len(study.done)}
    sections = [
        _inputs_section(study),
        _matrix_section(study, out, results),
        _checkpoints_section(study, out, results),
        _training_section(study, out, results),
        _orders_section(study, out, results),
        _seed_section(study, results),
        _pairs_section(study, results),
        _nesting_section(study, results),
        _arms_section(study, results),
        *_reasoning_sections(study_dir, out, results),
        _methods_section(),
    ]
    sections = [section for section in sections if section is not None]  # a study without pair tasks has no pairs section
    name = study.config.get("name") if isinstance(study.config.get("name"), str) else study_dir.name
    document = Document(f"tomrl study report: {name}", sections)
    markdown, html_path = write_document(document, out)
    json_path = out / "study_report.json"
    atomic_write_json(json_path, _finite(results))
    written = {"html": html_path, "markdown": markdown, "json": json_path}
    for section in sections:
        for block in section.blocks:
            if isinstance(block, Figure):
                written[f"png:{block.file}"] = out / block.file
    return written


def _finite(value):
    """JSON has no NaN: replace non-finite floats with None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value
