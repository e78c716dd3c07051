"""Belief probes: can a linear probe read the asked agents' belief from each layer, above a shuffled-label control?

    tomrl analyze probes --demo runs/demo                        # base, warm start and RL models of a demo run
    tomrl analyze probes --model base=smollm2-135m --model rl=runs/rl/final \\
        --data runs/demo/eval_sets/neutral.jsonl --out runs/probes --limit 200 --folds 5 --seed 0

For each model, each question of the data (at most ``--limit``, seeded and stratified by order)
is prompted exactly as ``tomrl eval`` prompts it, and the hidden state of every layer at the last
prompt token (the prefill's last token, where the answer starts) is read
(:mod:`tomrl.analysis.probes_features`, cached in ``OUT/features-LABEL.npz``). Logistic-regression
probes, cross-validated by story, predict three labels from the belief oracle
(:mod:`tomrl.analysis.probes_labels`): the container the asked chain believes the object is in,
the true location, and whether the two differ; a shuffled-label control and the majority rate sit
beside every accuracy (:mod:`tomrl.analysis.probes_fit`).

``--demo RUN_DIR`` takes the demo's three models (the base model named in RUN_DIR/train/config.yaml,
RUN_DIR/train/warm_start/model when present, RUN_DIR/train/final), its shortcut-neutral sets
(eval_sets/neutral.jsonl and, when present, neutral-orders3-4.jsonl) and writes to
RUN_DIR/analysis/probes. The output folder gets ``probes.json`` (every number, per model, target,
layer and order) and the feature caches; ``tomrl report`` draws them (:func:`report_sections`).
On 2 idle CPU cores, 95 questions on the demo's three SmolLM2-135M models took 9 minutes: 4 for the
states, 5 for the 8,370 probe fits (a rerun reuses the states). ``--threads 1`` helps on a busy machine.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from tomrl.analysis.analyzed_models import demo_models, parse_model
from tomrl.analysis.probes_fit import ALL_ORDERS, ProbeOptions
from tomrl.analysis.probes_report import FEW_QUESTIONS, RESULTS_KIND, report_sections, widest_half_width
from tomrl.config import ConfigError, check_seed, help_of
from tomrl.prompts import PROMPT_STYLES, PromptConfig, check_prompts

__all__ = ["register", "run", "report_sections", "probe_models", "DEFAULT_LIMIT"]

DEFAULT_LIMIT = 100


@dataclass(frozen=True)
class ProbePlan:
    models: list[tuple[str, str]]  # (label, model path or name)
    data: list[str]
    out: Path
    prompt: PromptConfig


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", action="append", default=[], metavar="LABEL=PATH",
                        help="a model to probe (repeat for several); a plain PATH is labelled by its folder name")
    parser.add_argument("--demo", metavar="RUN_DIR", help="probe a demo run's base, warm-start and RL models on its "
                                                          "shortcut-neutral sets; output in RUN_DIR/analysis/probes")
    parser.add_argument("--data", action="append", default=[], metavar="FILE.jsonl",
                        help="questions in the unified schema with the oracle's meta.query and meta.true_location "
                             "(repeat for several; with --demo: instead of its neutral sets)")
    parser.add_argument("--limit", type=int, default=DEFAULT_LIMIT,
                        help=f"at most this many questions, seeded and stratified by order (default {DEFAULT_LIMIT}; "
                             "0 = all)")
    for name in ("seed", "folds", "shuffles", "regularization"):
        field_type = float if name == "regularization" else int
        parser.add_argument(f"--{name}", type=field_type, default=getattr(ProbeOptions(), name),
                            help=f"{help_of(ProbeOptions, name)} (default %(default)s)")
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads of the forward passes (torch.set_num_threads; default: torch's, one per "
                             "core). On a machine busy with other jobs 1 is often much faster")
    parser.add_argument("--prompt-style", choices=PROMPT_STYLES, default=None,
                        help="prompt style (default: the demo's training prompt with --demo, else paper_a)")
    parser.add_argument("--prefill", default=None, help="assistant prefill (default: the style's, '<think>' for paper_a)")
    parser.add_argument("--out", metavar="DIR", help="output folder (default with --demo: RUN_DIR/analysis/probes)")


def demo_plan(run_dir: Path) -> ProbePlan:
    """The demo's models, data and prompt, as ``tomrl demo`` left them in ``run_dir``."""
    from tomrl.config import load_config
    from tomrl.models import DEFAULT_MODEL

    if not run_dir.is_dir():
        raise ConfigError(f"--demo {run_dir}: no such folder")
    base, prompt = DEFAULT_MODEL, PromptConfig()
    config = run_dir / "train" / "config.yaml"
    if config.exists():
        from tomrl.training.config import TrainConfig

        train = load_config(TrainConfig, config)
        base, prompt = train.model, train.prompt
    models = demo_models(run_dir, base)
    neutral = run_dir / "eval_sets" / "neutral.jsonl"
    if not neutral.exists():
        raise ConfigError(f"--demo {run_dir}: {neutral} is missing (run tomrl demo first, or give --data)")
    data = [str(neutral)] + [str(p) for p in [run_dir / "eval_sets" / "neutral-orders3-4.jsonl"] if p.exists()]
    return ProbePlan(models, data, run_dir / "analysis" / "probes", prompt)


def make_plan(args: argparse.Namespace) -> ProbePlan:
    from tomrl.outputs import require_path

    if args.out is not None:
        require_path(args.out, "--out")  # '' is no folder, not the working folder
    if args.demo and args.model:
        raise ConfigError("give --demo RUN_DIR or --model LABEL=PATH, not both")
    if args.demo:
        plan = demo_plan(Path(args.demo))
    elif args.model:
        plan = ProbePlan([parse_model(m) for m in args.model], [], Path(args.out or "."), PromptConfig())
        if args.out is None:
            raise ConfigError("say where the probes go with --out DIR (or use --demo RUN_DIR)")
    else:
        raise ConfigError("nothing to probe: give --model LABEL=PATH (repeatable) or --demo RUN_DIR")
    labels = [label for label, _ in plan.models]
    duplicated = sorted({label for label in labels if labels.count(label) > 1})
    if duplicated:
        raise ConfigError(f"--model: label {duplicated[0]!r} given twice; name them LABEL=PATH")
    data = args.data or plan.data
    if not data:
        raise ConfigError("no questions: give --data FILE.jsonl")
    style = args.prompt_style or plan.prompt.style
    prefill = args.prefill if args.prefill is not None else (plan.prompt.prefill if style == plan.prompt.style else None)
    return ProbePlan(plan.models, list(data), plan.out if args.out is None else Path(args.out).expanduser(), PromptConfig(style, prefill))


def probe_models(
    models: Sequence[tuple[str, str]],
    data: Sequence[str],
    out: Path,
    prompt: PromptConfig = PromptConfig(),
    limit: int | None = DEFAULT_LIMIT,
    options: ProbeOptions = ProbeOptions(),
    console: Any = None,
    threads: int | None = None,
) -> dict[str, Any]:
    """Read the questions, cache every model's states, fit the probes; write and return ``out/probes.json``."""
    import numpy as np
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from tomrl.analysis.probes_features import label_slug, model_features
    from tomrl.analysis.probes_fit import best_layers, probe_all_layers
    from tomrl.analysis.probes_labels import TARGETS, read_probe_questions, select_questions
    from tomrl.io import atomic_write_json, locked_folder
    from tomrl.models import check_model_reference
    from tomrl.outputs import check_folder, check_outputs, mark_folder

    console = console or Console(stderr=True)
    started = time.perf_counter()
    for _, model in models:
        check_model_reference(model, key="--model")
    check_folder(out, "analyze-probes", key="--out")  # not an eval, a demo, a train run …
    check_outputs({"--out": [out, out / "probes.json"]},
                  inputs={"--data": list(data), "--model": [model for _, model in models if Path(model).exists()]})
    # 1. Questions and labels first: a bad row fails before any model is loaded.
    questions = select_questions(read_probe_questions(data), limit or None, options.seed)
    where = {q.example.id: q.where for q in questions}
    check_prompts([q.example for q in questions], prompt.style, lambda e: where[e.id], key="--prompt-style")
    story_ids = [q.example.story_id for q in questions]
    orders = [int(q.example.order) for q in questions]  # type: ignore[arg-type]
    stories = len(set(story_ids))
    if stories < 2:
        raise ConfigError(f"{len(questions)} questions from {stories} story: cross-validation by story needs 2 or more")
    folds = min(options.folds, stories)
    console.print(f"{len(questions)} questions from {stories} stories "
                  f"({', '.join(f'order {o}: {orders.count(o)}' for o in sorted(set(orders)))}), {folds} folds by story")
    if len(questions) < FEW_QUESTIONS:
        console.print(f"[yellow]note:[/yellow] {len(questions)} questions are few for probes: every accuracy's 95 % "
                      f"interval is about ±{widest_half_width(len(questions)):.0f} points wide")
    with locked_folder(out, "tomrl analyze probes"):
        out.mkdir(parents=True, exist_ok=True)
        mark_folder(out, "analyze-probes")
        # 2. Hidden states, one model at a time (cached per model).
        features = {}
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, console=console, transient=False) as progress:
            for label, model in models:
                task = progress.add_task(f"states of {label}", total=len(questions))
                features[label] = model_features(label, model, questions, prompt, out / f"features-{label_slug(label)}.npz",
                                                 advance=lambda k, task=task: progress.advance(task, k), threads=threads)
            # 3. Probes: every model, target and layer, with its control.
            fit = progress.add_task("probes", total=len(models) * len(TARGETS))
            rows: list[dict[str, Any]] = []
            for label, _ in models:
                for target in TARGETS:
                    labels = np.asarray([q.labels[target] for q in questions])
                    for row in probe_all_layers(features[label].states, labels, story_ids, orders, options):
                        rows.append({"model": label, "target": target, **row})
                    progress.advance(fit)
        results = {
            "kind": RESULTS_KIND,
            "version": 1,
            "data": [str(d) for d in data],
            "n": len(questions),
            "stories": stories,
            "orders": {str(o): orders.count(o) for o in sorted(set(orders))},
            "limit": limit,
            "seed": options.seed,
            "folds": folds,
            "regularization": options.regularization,
            "shuffles": options.shuffles,
            "prompt": {"style": prompt.style, "prefill": prompt.resolved_prefill},
            "token": f"the last token of the chat-templated prompt including the prefill {prompt.resolved_prefill!r}: "
                     + ", ".join(sorted({repr(f.last_token) for f in features.values()})),
            "targets": TARGETS,
            "models": {
                label: {"model": model, "layers": int(features[label].states.shape[1]),
                        "hidden": int(features[label].states.shape[2]),
                        "features": f"features-{label_slug(label)}.npz", "reused": features[label].reused,
                        "computed": features[label].computed, "seconds": round(features[label].seconds, 1)}
                for label, model in models
            },
            "questions": [q.example.id for q in questions],
            "results": rows,
            "best": best_layers(rows),
            "seconds": round(time.perf_counter() - started, 1),
        }
        atomic_write_json(out / "probes.json", results)
    return results


def print_summary(results: dict[str, Any], console: Any) -> None:
    from rich.table import Table

    from tomrl.analysis.probes_fit import as_accuracy

    table = Table(title=f"Best layer per model and target, all orders (n = {results['n']} questions, "
                        f"{results['stories']} stories)")
    for column in ("model", "target", "layer", "probe", "control (its best layer)", "majority", "verdict"):
        table.add_column(column)
    for best in results["best"]:
        if best["order"] != ALL_ORDERS:
            continue
        table.add_row(best["model"], best["target"], str(best["layer"]), as_accuracy(best["accuracy"]).format(),
                      f"{as_accuracy(best['control']).format()} ({best['control_best_layer']})",
                      f"{100 * best['majority']:.1f} %", best["verdict"])
    console.print(table)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    if args.threads is not None and args.threads < 1:
        raise ConfigError(f"--threads must be >= 1, got {args.threads}")
    check_seed(args.seed, "--seed")  # sklearn's folds take 0..2**32-1 only
    if args.limit < 0:
        raise ConfigError(f"--limit must be >= 0 (0 = all), got {args.limit}")
    try:
        options = ProbeOptions(folds=args.folds, seed=args.seed, shuffles=args.shuffles, regularization=args.regularization)
    except ValueError as error:
        raise ConfigError(f"--folds/--shuffles/--regularization: {error}") from None
    plan = make_plan(args)
    console = Console(stderr=True)
    results = probe_models(plan.models, plan.data, plan.out, plan.prompt, args.limit or None, options, console, args.threads)
    print_summary(results, console)
    console.print(f"probes: {plan.out / 'probes.json'} ({results['seconds']:.0f} s; per order and layer in the file)")
    return 0
