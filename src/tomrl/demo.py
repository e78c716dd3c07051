"""``tomrl demo``: the whole pipeline on the embedded model, with progress shown throughout.

    tomrl demo                                   # everything, into runs/demo
    tomrl demo out_dir=runs/demo2 seed=1         # key=value overrides of DemoConfig
    tomrl demo --config configs/demo/default.yaml

Stages, each writing into ``out_dir`` (a stage whose output is already there is skipped, so a
demo stopped with Ctrl-C continues where it stopped when started again):

1. prepare the model (the embedded SmolLM2-135M: GGUF → safetensors, verified);
2. generate the training curriculum and the held-out validation stories (tomrl's generator;
   labels from the belief oracle; no story shared between them) → ``train/data/``;
3. audit them: leakage between the two and how far no-ToM shortcuts get → ``audit.md``;
4. baseline evaluation of the base model → ``eval/base/``;
5. training with the demo config (validation by order before, during and after;
   warm start on oracle-written reasoning traces, then GRPO on a curriculum) → ``train/``;
6. the same evaluation of the trained model → ``eval/trained/``;
7. the report (HTML + Markdown + plots) over all of it → ``report/``.

The default evaluation uses the held-out generated sets the demo trains for (orders 0-2, one
chapter) plus Hi-ToM 600, Paper A's benchmark, as an out-of-distribution check; every accuracy is
printed with n and its 95 % interval.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

from tomrl.config import ConfigError, describe_text, load_config, setting

REPO_CONFIGS = Path(__file__).resolve().parents[2] / "configs"


@dataclass(frozen=True)
class DemoConfig:
    model: str = setting("smollm2-135m", help="model to run the demo on: an embedded name, hub id or local path")
    out_dir: str = setting("runs/demo", help="folder for the demo's data, runs, evaluations and report")
    seed: int = setting(0, help="seed for data generation, sampling and training")
    train_config: str = setting(
        "configs/train/demo_cpu.yaml", help="training config (relative paths are tried from the working folder, then the repo)"
    )
    train_overrides: list[str] = setting(default_factory=list, help="key=value overrides applied to the training config")
    eval_benchmarks: list[str] = setting(
        default_factory=lambda: ["hitom600"],
        help="tomrl eval benchmarks run before and after training; those whose data is not on this machine are "
        "skipped with a note (the held-out validation by order is always reported)",
    )
    eval_limit: int = setting(100, help="questions per evaluation benchmark (spread over orders, seeded)")
    eval_max_new_tokens: int = setting(160, help="token budget of each evaluation answer")

    def __post_init__(self) -> None:
        if self.eval_limit < 1:
            raise ValueError(f"eval_limit must be >= 1, got {self.eval_limit}")


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="YAML file with DemoConfig keys")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="override config keys")
    parser.epilog = describe_text(DemoConfig)


def _find_config(path: str) -> Path:
    candidate = Path(path)
    if candidate.exists():
        return candidate
    in_repo = REPO_CONFIGS.parent / path
    if in_repo.exists():
        return in_repo
    raise ConfigError(f"training config not found: {path} (also looked in {REPO_CONFIGS.parent})")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    cfg = load_config(DemoConfig, args.config, args.overrides)
    console = Console()
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    stages = 7

    def stage(number: int, title: str) -> None:
        console.rule(f"[bold]tomrl demo · {number}/{stages} · {title} · {time.time() - started:.0f} s")

    # 1. The model.
    stage(1, f"prepare model {cfg.model}")
    from tomrl.models import EMBEDDED_MODELS, prepare

    model_path = str(prepare(cfg.model)) if cfg.model in EMBEDDED_MODELS else cfg.model
    console.print(f"model: {model_path}")

    # The training config decides the data; fix it (and check it) before any work starts.
    from tomrl.training.config import TrainConfig

    train_dir = out / "train"
    train_cfg = load_config(
        TrainConfig,
        _find_config(cfg.train_config),
        [f"model={cfg.model}", f"run_dir={train_dir}", f"seed={cfg.seed}", *cfg.train_overrides],
    )

    # 2. Data: the curriculum and the held-out validation stories, frozen in train/data.
    stage(2, "generate data")
    from tomrl.training.data import prepare_data

    train_examples, validation_examples = prepare_data(train_cfg, train_dir)
    console.print(
        f"{len(train_examples)} training and {len(validation_examples)} held-out validation questions "
        f"in {train_dir / 'data'} (seed {cfg.seed})"
    )

    # 3. Audit: leakage between them and the no-ToM shortcuts on the held-out set.
    stage(3, "audit")
    from tomrl.audit.report import audit, to_markdown
    from tomrl.io import atomic_write_json, atomic_write_text

    report = audit(("train", train_examples), [("validation", validation_examples)], seed=cfg.seed)
    atomic_write_text(out / "audit.md", to_markdown(report))
    atomic_write_json(out / "audit.json", report)
    leaked = report["tests"][0]["leakage"]
    console.print(f"audit written to {out / 'audit.md'}; leakage: {_leak_summary(leaked)}")

    # 4-6. Baseline evaluation, training, evaluation of the trained model.
    stage(4, "baseline evaluation")
    base_eval = _evaluate(cfg, cfg.model, out / "eval" / "base", console)
    stage(5, "train")
    summary = _train(train_cfg, train_dir, console)
    stage(6, "evaluate the trained model")
    trained_eval = _evaluate(cfg, str(train_dir / "final"), out / "eval" / "trained", console)

    # 7. The report.
    stage(7, "report")
    from tomrl.analysis.report import default_options, write_report
    from tomrl.analysis.runs import load_runs

    folders = [folder for folder in (train_dir, base_eval, trained_eval) if folder is not None]
    written = write_report(load_runs(folders), out / "report", default_options())
    _print_before_after(summary, console)
    console.rule(f"[bold green]demo finished in {(time.time() - started) / 60:.1f} min")
    for kind, path in written.items():
        console.print(f"report ({kind}): {path}")
    return 0


def _leak_summary(leakage: dict | None) -> str:
    if not leakage:
        return "not computed"
    total = leakage["total"]
    return f"{total['story_leaked']} of {total['n']} held-out questions share a story with training"


def available_benchmarks(names: list[str], console) -> list[str]:
    """The benchmarks whose data is on this machine; the others are named and skipped."""
    from tomrl.evaluation.benchmarks import BENCHMARKS, load_examples
    from tomrl.io import BadInputError

    available = []
    for name in names:
        benchmark = BENCHMARKS.get(name)
        if benchmark is None:
            raise ConfigError(f"eval_benchmarks: unknown benchmark {name!r}; known: {', '.join(BENCHMARKS)}")
        if benchmark.loader != "tomrl-generate":  # generated sets need no files
            try:
                load_examples(benchmark, {}, heldout_n=1, heldout_seed=0)
            except BadInputError as err:
                console.print(f"[yellow]skipping {name}: {err}")
                continue
        available.append(name)
    return available


def _evaluate(cfg: DemoConfig, model: str, out: Path, console) -> Path | None:
    from tomrl.evaluation.config import EvalConfig
    from tomrl.evaluation.runner import run_eval

    benchmarks = available_benchmarks(list(cfg.eval_benchmarks), console)
    if not benchmarks:
        console.print("no evaluation benchmark has its data here; the held-out validation below stands in for it")
        return None
    eval_cfg = EvalConfig(
        model=model,
        benchmarks=benchmarks,
        limit=cfg.eval_limit,
        out=str(out),
        temperature=0.0,
        max_new_tokens=cfg.eval_max_new_tokens,
        seed=cfg.seed,
    )
    run_eval(eval_cfg, log=console.print)
    return out


def _train(train_cfg, train_dir: Path, console):
    from tomrl.training.run import RunSummary, train

    summary_file = train_dir / "summary.json"
    if summary_file.exists() and (train_dir / "final").exists():
        import json

        console.print(f"training already finished in {train_dir}; reusing it")
        return RunSummary(**json.loads(summary_file.read_text()))
    from tomrl.training import checkpoints

    resume = checkpoints.latest_checkpoint(train_dir) is not None
    return train(train_cfg, resume=resume, console=console)


def _print_before_after(summary, console) -> None:
    """Held-out validation accuracy by order: the base model, then the trained model."""
    from rich.table import Table

    rows = [("base model", summary.base_validation or summary.first_validation), ("after training", summary.last_validation)]
    if summary.best_validation and summary.best_validation != summary.last_validation:
        rows.append(("best checkpoint", summary.best_validation))
    table = Table(title=f"held-out generated stories ({summary.validation_examples} questions), strict scoring, 95 % intervals")
    orders = sorted({k for _, v in rows if v for k in (v.get("by_order") or {})}, key=str)
    table.add_column("model")
    for order in orders:
        table.add_column(f"order {order}")
    table.add_column("all")
    for label, validation in rows:
        if not validation:
            continue
        by_order = validation.get("by_order") or {}
        cells = [_format_accuracy(by_order.get(order)) for order in orders]
        table.add_row(label, *cells, _format_accuracy(validation.get("accuracy")))
    console.print(table)


def _format_accuracy(value) -> str:
    if not isinstance(value, dict) or "n" not in value:
        return "-"
    from tomrl.stats import Accuracy

    return Accuracy(**{k: value[k] for k in ("n", "k", "value", "low", "high")}).format()
