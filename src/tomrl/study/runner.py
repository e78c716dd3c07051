"""Run a study: every cell of the grid trained, then evaluated on the study's tasks; resumable at every level.

    from tomrl.study.runner import run_study
    run_study(cfg)                 # cfg: StudyConfig; or `tomrl study --config configs/study/smoke.yaml`

The study folder (read by :func:`tomrl.analysis.study_report.write_study_report`)::

    STUDY_DIR/study.yaml                     the resolved study config (train_base.yaml: the base training config)
    STUDY_DIR/grid.json                      cells with their status, and the tasks (tomrl.study.grid)
    STUDY_DIR/tasks/NAME.jsonl               generated tasks, written once
    STUDY_DIR/starts/<mixture>__s<seed>/     the warm start shared by the arms of a mixture and seed (when the
                                             training config has one: the arms then differ only in their updates)
    STUDY_DIR/runs/<cell id>/                the training run (as tomrl train writes it; study_arm.json: the budget used)
    STUDY_DIR/evals/base__<model>/           tomrl eval of the base model on every task
    STUDY_DIR/evals/<cell id>/<checkpoint>/  tomrl eval of final/ and of each step-N snapshot
    STUDY_DIR/report/                        the study report

Before any work (and before the study folder is written), every cell's full settings are checked
(:func:`check_study`): its training config with the study's and the arm's overrides, seed and model,
its mixture's data (recipe known, generator configs, files), its evaluation config, every task's
benchmark or generator config and every model; a bad study is one error naming the cell (or the
mixture, task) and the key. A study folder moved or copied elsewhere is continued where it is:
``out_dir`` is where the folder is now, and paths are compared as paths (:func:`tomrl.outputs.same_setting`).

Order of work: the tasks, each base model's evaluation, then cell by cell: train (an RL run killed
midway continues from its last checkpoint), evaluate each snapshot and final/. Nothing finished
is redone: a run is finished when it has ``final/`` and ``summary.json``; an evaluation when its
``results.json`` has every task complete (then tomrl eval is not even called, so its files are not
touched). A cell that fails (FANToM data missing, no correct sample for rft …) is marked failed
with its error, the study goes on, and the next start tries it again.
"""

from __future__ import annotations

import json
import shutil
import time
import traceback
import zlib
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from tomrl.config import ConfigError, config_to_dict, load_config, read_yaml, save_config
from tomrl.io import atomic_write_text
from tomrl.study.arms import SNAPSHOTS, arm_train_config, run_arm
from tomrl.training.checkpoints import CHECKPOINTS
from tomrl.training.preflight import preflight
from tomrl.study.config import StudyConfig, model_slug
from tomrl.study.grid import Cell, Grid, expand

REPO_ROOT = Path(__file__).resolve().parents[3]
STUDY_FILE = "study.yaml"
TRAIN_BASE_FILE = "train_base.yaml"
# Keys a started study may change: they add cells or tasks (a named mixture or task stays as it was), or change
# nothing a finished cell did.
CHANGEABLE_KEYS = ("mixtures", "arms", "seeds", "models", "tasks", "report", "description", "threads", "keep_checkpoints", "keep_snapshots")


def find_config(path: str | Path) -> Path:
    """``path`` from the working folder, else from the repository root."""
    candidate = Path(path)
    if candidate.exists():
        return candidate
    in_repo = REPO_ROOT / path
    if in_repo.exists():
        return in_repo
    raise ConfigError(f"config not found: {path} (also looked in {REPO_ROOT})")


def base_train_config(cfg: StudyConfig):
    from tomrl.training.config import TrainConfig

    return load_config(TrainConfig, find_config(cfg.train_config), cfg.train_overrides)


def cell_train_config(cfg: StudyConfig, cell: Cell, study_dir: Path):
    mixture = next(m for m in cfg.mixtures if m.name == cell.mixture)
    return arm_train_config(cell.arm, cfg, find_config(cfg.train_config), mixture, cell.seed, cell.model, study_dir / "runs" / cell.id)


def start_folder(study_dir: Path, cell: Cell, several_models: bool) -> Path:
    """STUDY_DIR/starts/<mixture>__s<seed>[__<model>]: the warm start every arm of these cells begins from."""
    return study_dir / "starts" / (f"{cell.mixture}__s{cell.seed}" + (f"__{model_slug(cell.model)}" if several_models else ""))


def shared_start(train_cfg, folder: Path, say: Callable[[str], None]):
    """With a warm start in the training config, every arm of a mixture, seed and model starts from one warm
    start (the same oracle traces of the same frozen training data), trained once into ``folder``; returns the
    cell's config starting from it (its model, and so RL's KL reference; no warm start of its own)."""
    if not train_cfg.warm_start.enabled:
        return train_cfg
    from tomrl.training.data import prepare_data
    from tomrl.training.sft_warmstart import WARM_START, warm_start

    if not (folder / WARM_START / "done.json").exists():
        train, _ = prepare_data(train_cfg, folder)
        warm_start(train_cfg, folder, train, say)
    return replace(train_cfg, model=str((folder / WARM_START / "model").resolve()), warm_start=replace(train_cfg.warm_start, enabled=False))


# ----------------------------------------------------------------------------- the study folder


def check_and_record(cfg: StudyConfig, base, study_dir: Path) -> None:
    """Write study.yaml and train_base.yaml, or check that a started study is continued with the same
    settings (only the grid's lists may grow: CHANGEABLE_KEYS; a named mixture or task may not change).

    A folder moved or copied elsewhere is the same study: ``out_dir`` names the folder, not a setting; the
    base training config is compared on its content (train_base.yaml), not on the path of its file; and paths
    are compared as paths (:func:`tomrl.outputs.same_setting`: inside the folder, relative to it; elsewhere,
    resolved, or a data file by its bytes)."""
    from tomrl.outputs import same_setting

    study_file, base_file = study_dir / STUDY_FILE, study_dir / TRAIN_BASE_FILE
    now, now_base = json.loads(json.dumps(config_to_dict(cfg))), json.loads(json.dumps(config_to_dict(base)))
    if study_file.exists():
        before = read_yaml(study_file)
        for key in set(now) - set(before):  # a key tomrl gained after the study started: the study ran with its default
            default = study_defaults().get(key)
            if default is not None:
                before[key] = default
        folder_before = before.get("out_dir") if isinstance(before.get("out_dir"), str) and before.get("out_dir") else None
        folder_now = str(study_dir)

        def same(a, b) -> bool:
            return same_setting(a, b, folder_before, folder_now)

        ignored = {*CHANGEABLE_KEYS, "out_dir", *(("train_config",) if base_file.exists() else ())}
        changed = sorted(k for k in set(before) | set(now) if k not in ignored and not same(before.get(k), now.get(k)))
        for kind in ("mixtures", "tasks"):
            earlier = {item["name"]: item for item in before.get(kind, [])}
            changed += [f"{kind}[{item['name']}]" for item in now[kind] if item["name"] in earlier and not same(earlier[item["name"]], item)]
        if base_file.exists():
            before_base = read_yaml(base_file)
            changed += [f"train_config.{k}" for k in sorted(set(before_base) | set(now_base)) if not same(before_base.get(k), now_base.get(k))]
        if changed:
            raise ConfigError(
                f"{study_dir} holds a study started with other settings ({', '.join(changed)}); continue it with the same "
                f"config ({study_file}), or choose another out_dir. Adding mixtures, arms, seeds, models or tasks is allowed"
            )
    save_config(cfg, study_file)
    save_config(base, base_file)


def check_study(cfg: StudyConfig, base, cells: list[Cell], study_dir: Path) -> None:
    """Check every setting the study will use, before any work and before its folder is written: each mixture's
    data, each cell's full training config (the study's and the arm's overrides, its seed and model) and
    evaluation config, each task's benchmark or generator config, each model. One ConfigError naming the cell
    (or mixture, task) and the study key it comes from."""
    from tomrl.evaluation.benchmarks import resolve
    from tomrl.evaluation.config import EvalConfig
    from tomrl.generators.config import GenerateConfig
    from tomrl.models import check_model_reference
    from tomrl.training.data import check_data

    for model in dict.fromkeys(cell.model for cell in cells):
        check_model_reference(model, key="models")  # a missing model fails before any work
    for mixture in cfg.mixtures:
        try:
            check_data(replace(base, data=mixture.data_config))
        except (ConfigError, ValueError) as error:
            raise ConfigError(f"mixtures[{mixture.name}]: {_first_line(error)}") from None
    placeholders = []
    for task in cfg.tasks:
        try:
            if task.generate is not None:
                generator = None if task.generate == "default" else find_config(task.generate)
                load_config(GenerateConfig, generator, [*task.generate_overrides, "split_fractions={test: 1.0}"])
                placeholders.append(f"{task.name}.jsonl")
            else:
                if task.benchmark.endswith(".jsonl") and not Path(task.benchmark).expanduser().is_file():
                    raise ConfigError(f"benchmark file not found: {task.benchmark} (see the study config's comments for how to make it)")
                resolve([task.benchmark])
                placeholders.append(task.benchmark)
        except (ConfigError, ValueError, OSError) as error:
            raise ConfigError(f"tasks[{task.name}]: {_first_line(error)}") from None
    settings = cfg.eval
    for cell in cells:
        try:
            train_cfg = cell_train_config(cfg, cell, study_dir)
        except (ConfigError, ValueError, TypeError) as error:
            raise ConfigError(f"cell {cell.id}: {_culprit(cfg, cell, study_dir)}: {_first_line(error)}") from None
        try:
            preflight(train_cfg)  # vLLM and CUDA for use_vllm, the report_to loggers' packages
        except ConfigError as error:
            raise ConfigError(f"cell {cell.id}: {_first_line(error)}") from None
        try:
            EvalConfig(model=cell.model, benchmarks=placeholders, limit=settings.limit, engine=settings.engine,
                       temperature=settings.temperature, max_new_tokens=settings.max_new_tokens, stop_at_answer=settings.stop_at_answer,
                       seed=settings.seed, batch_size=settings.batch_size, prompt=train_cfg.prompt)
        except (ConfigError, ValueError) as error:
            raise ConfigError(f"cell {cell.id}: eval: {_first_line(error)}") from None


def _first_line(error: BaseException) -> str:
    return str(error).splitlines()[0] if str(error) else type(error).__name__


def _culprit(cfg: StudyConfig, cell: Cell, study_dir: Path) -> str:
    """The study key a cell's failing training config comes from: the first whose removal lets it build."""

    def builds(study: StudyConfig, trial: Cell) -> bool:
        try:
            cell_train_config(study, trial, study_dir)
        except (ConfigError, ValueError, TypeError):
            return False
        return True

    base_model = base_train_config(cfg).model
    trials = [
        (f"arm_overrides.{cell.arm}", lambda: cell.arm in cfg.arm_overrides and builds(replace(cfg, arm_overrides={}), cell)),
        ("seeds", lambda: builds(cfg, replace(cell, seed=0))),
        ("models", lambda: bool(cfg.models) and builds(cfg, replace(cell, model=base_model))),
        (f"arms ({cell.arm})", lambda: builds(cfg, replace(cell, arm="grpo"))),
    ]
    for key, fixed_without in trials:
        if fixed_without():
            return key
    return "train_config + train_overrides"


def study_defaults() -> dict:
    """The defaults of the StudyConfig fields that have one, as study.yaml writes them."""
    import dataclasses

    defaults = {}
    for f in dataclasses.fields(StudyConfig):
        value = f.default if f.default is not dataclasses.MISSING else f.default_factory() if f.default_factory is not dataclasses.MISSING else None
        if value is not None:
            defaults[f.name] = json.loads(json.dumps(config_to_dict(value) if dataclasses.is_dataclass(value) else value))
    return defaults


def task_benchmarks(cfg: StudyConfig, study_dir: Path) -> list[dict]:
    """Each task as grid.json lists it, generating the generated ones once into STUDY_DIR/tasks/."""
    from tomrl.evaluation.benchmarks import resolve
    from tomrl.generators import generate
    from tomrl.generators.config import GenerateConfig
    from tomrl.schema import write_examples

    tasks = []
    for task in cfg.tasks:
        benchmark = task.benchmark
        if task.generate is not None:
            path = study_dir / "tasks" / f"{task.name}.jsonl"
            if not path.exists():  # write_examples is atomic: an existing file is complete
                base = None if task.generate == "default" else find_config(task.generate)
                keys = {item.split("=", 1)[0].strip() for item in task.generate_overrides}
                # A seed of the task's name (adding a task changes no other's), far from the training data's
                # (seed × 1000 + stage, + 999 for validation).
                extra = [f"seed={7_000_000 + zlib.crc32(task.name.encode()) % 1_000_000}"] if "seed" not in keys else []
                write_examples(path, generate(load_config(GenerateConfig, base, [*task.generate_overrides, *extra, "split_fractions={test: 1.0}"])))
            benchmark = str(path.resolve())  # the same file from any working folder
        elif benchmark.endswith(".jsonl") and not Path(benchmark).expanduser().is_file():
            raise ConfigError(f"task {task.name}: benchmark file not found: {benchmark} (see the study config's comments for how to make it)")
        resolved = resolve([benchmark])
        if len(resolved) == 1:
            tasks.append({"name": task.name, "held_out": task.held_out, "benchmark": benchmark})
            continue
        # A suite or a recipe's test split (recipe:paper-b-all:test: Paper B's 12 tasks): one grid task per
        # benchmark, named as its samples are, held out as the recipe says where it says.
        for member, _ in resolved:
            held_out = getattr(member, "held_out", None)
            tasks.append({"name": member.name, "held_out": task.held_out if held_out is None else held_out, "benchmark": benchmark})
    return tasks


def benchmark_names(benchmarks: list[str]) -> list[str]:
    """The names tomrl eval gives these benchmarks (samples.jsonl's ``benchmark`` column)."""
    from tomrl.evaluation.benchmarks import resolve

    return [benchmark.name for benchmark, _ in resolve(benchmarks)]


def eval_complete(folder: Path, names: list[str]) -> bool:
    """Whether ``folder`` holds a finished evaluation of every benchmark in ``names`` (skipped ones, whose
    data are not on this machine, count as finished)."""
    path = folder / "results.json"
    if not path.exists():
        return False
    try:
        results = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        return False
    entries, skipped = results.get("benchmarks", {}), results.get("skipped", {})
    if results.get("failed_prompts"):
        return False
    return all(name in skipped or (name in entries and entries[name].get("complete")) for name in names)


def run_finished(run_dir: Path) -> bool:
    return (run_dir / "final").is_dir() and (run_dir / "summary.json").exists()


def checkpoints_to_evaluate(cfg: StudyConfig, cell: Cell, run_dir: Path) -> list[tuple[str, Path]]:
    """``(name, model folder)`` of each snapshot the study asks for (that the run kept), then final/."""
    every = cfg.eval.checkpoint_every
    found = []
    for step in range(every, cfg.updates_of(cell.mixture), every) if every else ():
        folder = run_dir / SNAPSHOTS / f"step-{step}"
        if folder.is_dir():
            found.append((f"step-{step}", folder))
    return [*found, ("final", run_dir / "final")]


# ----------------------------------------------------------------------------- running


class Study:
    """One invocation of a study: the config, its folder, the grid, and how to say things."""

    def __init__(self, cfg: StudyConfig, console: Any = None):
        from rich.console import Console

        self.cfg = cfg
        self.dir = Path(cfg.out_dir).expanduser()
        self.console = console or Console()
        self.base = base_train_config(cfg)
        self.cells = expand(cfg, self.base.model)
        check_study(cfg, self.base, self.cells, self.dir)  # every cell's settings, before any work or write
        self.started = time.time()
        self.grid: Grid | None = None
        self.tasks: list[dict] = []
        self.names: list[str] = []
        self.benchmarks: list[str] = []

    def say(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False)

    def run(self) -> int:
        from tomrl.io import locked_folder
        from tomrl.outputs import check_folder

        # Before anything is written: not a demo, a train run, an eval … (out_dir: '' is refused too).
        check_folder(self.cfg.out_dir, "study", key="out_dir")
        if self.cfg.threads is not None:
            import torch

            torch.set_num_threads(self.cfg.threads)
        self.dir.mkdir(parents=True, exist_ok=True)
        with locked_folder(self.dir, "tomrl study"):  # a second study on the same folder fails at once
            return self._run()

    def _run(self) -> int:
        from tomrl.outputs import mark_folder

        check_and_record(self.cfg, self.base, self.dir)
        mark_folder(self.dir, "study")  # after the settings check: a refused continuation writes nothing new
        self.tasks = task_benchmarks(self.cfg, self.dir)
        self.benchmarks = list(dict.fromkeys(t["benchmark"] for t in self.tasks))  # what tomrl eval is given
        self.names = benchmark_names(self.benchmarks)
        self.grid = Grid(self.dir, self.cfg.name, self.cells, self.tasks)
        for cell in self.cells:  # what the files say is finished
            if self._cell_finished(cell):
                self.grid.status[cell.id] = "done"
        self.grid.write()
        self.show()
        for model in dict.fromkeys(cell.model for cell in self.cells):
            self._evaluate(model, self.base.prompt, self.dir / "evals" / f"base__{model_slug(model)}", f"base model {model}")
        for cell in self.cells:
            if self.grid.status[cell.id] == "done":
                continue
            self._run_cell(cell)
            self.show()
        counts = self.grid.counts()
        if self.cfg.report and counts["pending"] == 0:
            self._report()
        elapsed = (time.time() - self.started) / 60
        self.console.rule(f"[bold]study {self.cfg.name}: {counts['done']} of {len(self.cells)} cells done, {counts['failed']} failed, {elapsed:.1f} min")
        for cell in self.cells:
            if self.grid.status[cell.id] == "failed":
                self.say(f"failed: {cell.id}: {self.grid.errors.get(cell.id)}")
        return 0 if counts["failed"] == 0 else 1

    def _cell_finished(self, cell: Cell) -> bool:
        run_dir = self.dir / "runs" / cell.id
        if not run_finished(run_dir):
            return False
        return all(eval_complete(self.dir / "evals" / cell.id / name, self.names) for name, _ in checkpoints_to_evaluate(self.cfg, cell, run_dir))

    def _run_cell(self, cell: Cell) -> None:
        assert self.grid is not None
        run_dir = self.dir / "runs" / cell.id
        try:
            cfg = cell_train_config(self.cfg, cell, self.dir)
            if not run_finished(run_dir):
                self.grid.set(cell.id, "training")
                self.console.rule(f"[bold]{cell.id}: training ({cell.arm}, {self.cfg.updates_of(cell.mixture)} updates) · {self._elapsed()}")
                several_models = len({c.model for c in self.cells}) > 1
                cfg = shared_start(cfg, start_folder(self.dir, cell, several_models), self.say)
                run_arm(cell.arm, cfg, self.cfg, say=self.say, console=self.console)
            if not self.cfg.keep_checkpoints and run_finished(run_dir):
                # A mini study on the embedded model otherwise keeps ~1.6 GB of optimizer state per cell.
                shutil.rmtree(run_dir / CHECKPOINTS, ignore_errors=True)
            self.grid.set(cell.id, "evaluating")
            for name, model_dir in checkpoints_to_evaluate(self.cfg, cell, run_dir):
                self._evaluate(str(model_dir), cfg.prompt, self.dir / "evals" / cell.id / name, f"{cell.id} {name}")
            if not self.cfg.keep_snapshots:  # evaluated: their answers are kept, the weights (a model each) are not needed
                shutil.rmtree(run_dir / SNAPSHOTS, ignore_errors=True)
            self.grid.set(cell.id, "done")
        except KeyboardInterrupt:
            self.grid.set(cell.id, "pending")
            raise
        except Exception as error:  # noqa: BLE001 - one failed cell must not stop the grid; the error is kept
            message = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
            run_dir.mkdir(parents=True, exist_ok=True)
            atomic_write_text(run_dir / "study_error.txt", traceback.format_exc())
            self.grid.set(cell.id, "failed", error=message)
            self.say(f"{cell.id} failed: {message} (traceback in {run_dir / 'study_error.txt'})")

    def _evaluate(self, model: str, prompt, out: Path, what: str) -> None:
        from tomrl.evaluation.config import EvalConfig
        from tomrl.evaluation.runner import run_eval

        if eval_complete(out, self.names):
            return
        settings = self.cfg.eval
        self.console.rule(f"[bold]evaluating {what} on {len(self.names)} tasks · {self._elapsed()}")
        eval_cfg = EvalConfig(
            model=model,
            benchmarks=self.benchmarks,
            limit=settings.limit,
            out=str(out),
            engine=settings.engine,
            temperature=settings.temperature,
            max_new_tokens=settings.max_new_tokens,
            stop_at_answer=settings.stop_at_answer,
            seed=settings.seed,
            batch_size=settings.batch_size,
            prompt=prompt,  # the run's own prompt (answer_only: its prefill)
        )
        outcome = run_eval(eval_cfg, log=self.say)
        if outcome.errors:
            raise RuntimeError(f"evaluation of {what}: {len(outcome.errors)} prompts failed, the first: {outcome.errors[0]}")

    def _report(self) -> None:
        try:
            from tomrl.analysis.study_report import write_study_report
        except ImportError as error:
            self.say(f"no study report: tomrl.analysis.study_report is not available ({error})")
            return
        self.console.rule(f"[bold]report · {self._elapsed()}")
        written = write_study_report(self.dir)
        for kind, path in written.items():
            self.say(f"report ({kind}): {path}")

    def _elapsed(self) -> str:
        return f"{(time.time() - self.started) / 60:.1f} min"

    def show(self) -> None:
        """The grid as a table: one row per model and mixture, one column per arm and seed."""
        from rich.table import Table

        assert self.grid is not None
        styles = {"pending": "dim", "training": "yellow", "evaluating": "cyan", "done": "green", "failed": "red"}
        columns = list(dict.fromkeys((cell.arm, cell.seed) for cell in self.cells))
        rows = list(dict.fromkeys((cell.model, cell.mixture) for cell in self.cells))
        several_models = len({cell.model for cell in self.cells}) > 1
        counts = self.grid.counts()
        table = Table(title=f"study {self.cfg.name}: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n) + f" · {self._elapsed()}")
        table.add_column("mixture" + (" (model)" if several_models else ""))
        for arm, seed in columns:
            table.add_column(f"{arm} s{seed}")
        by_key = {(c.model, c.mixture, c.arm, c.seed): c for c in self.cells}
        for model, mixture in rows:
            line = [f"{mixture} ({model_slug(model)})" if several_models else mixture]
            for arm, seed in columns:
                status = self.grid.status[by_key[(model, mixture, arm, seed)].id]
                line.append(f"[{styles[status]}]{status}[/]")
            table.add_row(*line)
        self.console.print(table)


def run_study(cfg: StudyConfig, console: Any = None) -> int:
    """Run (or continue) the study ``cfg``; returns 0 when every cell is done, 1 when some failed."""
    return Study(cfg, console).run()


__all__ = ["run_study", "Study", "check_study", "eval_complete", "run_finished", "checkpoints_to_evaluate", "find_config", "STUDY_FILE"]
