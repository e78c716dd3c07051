"""Assemble the report: training curves, collapse (length, entropy, what the traces still do),
before/after tables, accuracy by order, the generalization matrix, shortcut comparison, traces
side by side, other analyses' sections, and every detector with its evidence.

    tomrl report runs/demo --out runs/demo/report

    from tomrl.analysis.report import write_report
    write_report(load_runs(["runs/demo"]), "runs/demo/report")

Writes into the output folder: ``report.html`` (self-contained, PNGs inlined), ``report.md``
(same content, linking the PNGs), the PNGs, and ``detectors.json`` (every detector's verdict
and numbers, for scripts and CI). Every accuracy is printed with its n and 95 % interval, and
every table says which evaluation (folder, model, seed) it comes from. Result files of
``tomrl analyze`` found under the run folders (``interventions.json``, ``probes.json``) are
rendered by their own modules' ``report_sections(files, out_dir)``.

Every training effect (trained − base in the generalization matrix and the negative-transfer
detector, the shortcut shift before vs after training, the before/after table, the demo's change
between its last two models) carries the run-to-run spread of training beside its interval, which
covers question sampling only. Evaluated models of runs that differ only by training seed (the
runs' ``config.yaml`` equal but for ``seed`` and ``run_dir``, the same output: final, best, a
checkpoint) are one setup: their effects are given per seed with range and sd, and an effect is
claimed only when every seed shows it. A setup with one training seed says
:data:`~tomrl.analysis.significance.ONE_TRAINING_SEED` beside its numbers.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterable

from tomrl.analysis.detectors import (
    BeliefCount,
    DetectorResult,
    StepShare,
    detect_entropy_collapse,
    detect_id_ood_divergence,
    detect_inverted_difficulty,
    detect_negative_transfer,
    detect_reasoning_collapse,
)
from tomrl.analysis.document import Document, Figure, Finding, Paragraph, Section, Table, verdict_label, write_document
from tomrl.analysis.plots import (
    Curve,
    Panel,
    accuracy_curve,
    plot_accuracy_by_order,
    plot_generalization_matrix,
    plot_panels,
)
from tomrl.analysis.runs import ROLLOUT_TRACES_PER_STEP, BenchmarkScores, Evaluation, RunSet, TrainingRun, task_family
from tomrl.analysis.significance import (
    ONE_TRAINING_SEED,
    SeedEffects,
    difference_interval,
    from_counts,
    pooled,
    seeds_disagree,
    training_effect_verdict,
)
from tomrl.analysis.shortcuts import ShortcutRecord, compare_with_heuristics, paired_records, shortcut_shift
from tomrl.analysis.trace_shares import shares_by_step
from tomrl.evaluation.table import COLUMNS as PAPER_A_COLUMNS
from tomrl.evaluation.table import PAPER_A_TABLE1
from tomrl.io import atomic_write_json
from tomrl.stats import Accuracy

def paper_a_column(scores: BenchmarkScores) -> str | None:
    """The column of Paper A's Table 1 a benchmark reproduces (as ``tomrl eval`` declares it)."""
    if scores.paper_column:
        return scores.paper_column
    from tomrl.evaluation.benchmarks import BENCHMARKS

    known = BENCHMARKS.get(scores.name)
    return known.paper_column if known is not None else None


@dataclass
class ReportOptions:
    title: str = "tomrl report"
    level: float = 0.95
    min_relative_drop: float = 0.2
    # (completion, prefill, story, source) → does it state a belief? (tomrl.analysis.beliefs); None = unavailable
    states_a_belief: Callable[[str, str, str | None, str | None], bool | None] | None = None
    # Shortcut records of an evaluation's answers and notes on what was left out; None = skip.
    shortcut_records: Callable[[Evaluation], tuple[list[ShortcutRecord], list[str]]] | None = None
    shortcut_matcher: Callable[[str, str], bool] | None = None
    notes: list[str] = field(default_factory=list)
    # Models beside the best no-ToM rule on the same sets (tomrl.analysis.comparison.compare); None = no such section.
    comparison: dict | None = None
    min_entropy_drop: float = 0.5  # smallest relative fall of the mean token entropy that counts as collapse
    trace_views: int = 6  # questions shown side by side (0 = no trace viewer)
    trace_seed: int = 0  # which questions the trace viewer draws


def _acc(acc: Accuracy | None) -> str:
    return acc.format() if acc is not None and acc.n > 0 else "–"


def _slug(text: str) -> str:
    return re.sub(r"[^a-zA-Z0-9]+", "-", text).strip("-").lower() or "x"


def _trained_model_name(run: TrainingRun, evaluation: Evaluation) -> str:
    """"rl-hitom" for the run's final model, else "rl-hitom/best", "rl-hitom/checkpoints/checkpoint-50"."""
    output = run.output_name(evaluation.model)
    return run.label if output in (None, "final") else f"{run.label}/{output}"


def _eval_label(runs: RunSet, evaluation: Evaluation) -> str:
    run = runs.run_that_trained(evaluation)
    return f"after: {_trained_model_name(run, evaluation)}" if run is not None else f"before: {evaluation.label}"


def _eval_source(evaluation: Evaluation) -> str:
    seed = f", seed {evaluation.seed}" if evaluation.seed is not None else ""
    return f"{evaluation.path.name} ({evaluation.model}{seed})"


def _seed_name(run: TrainingRun) -> str:
    """The run's training seed as the report names it (the run's folder name when its seed is unknown)."""
    return str(run.training_seed) if run.training_seed is not None else run.label


def _setup_key(runs: RunSet, evaluation: Evaluation) -> tuple[str, str | None, str] | None:
    """Evaluations with equal keys are of one setup's models, differing only by training seed: (the run's
    setup, which of its models, how answers were sampled); None for a model no run here trained."""
    run = runs.run_that_trained(evaluation)
    if run is None:
        return None
    output = run.output_name(evaluation.model)
    sampling = json.dumps(evaluation.info.get("sampling"), sort_keys=True, default=str)
    return (run.setup if run.setup is not None else f"run folder {run.path}", output, sampling)


def _seed_groups(runs: RunSet, evaluations: Iterable[Evaluation]) -> list[list[tuple[str, Evaluation]]]:
    """Trained evaluations grouped by setup, each group a list of (training seed, evaluation) by seed
    (the first evaluation of a seed; a run whose seed or config is unknown is a group of its own)."""
    groups: dict[tuple, dict[str, Evaluation]] = {}
    for evaluation in evaluations:
        key = _setup_key(runs, evaluation)
        if key is not None:
            groups.setdefault(key, {}).setdefault(_seed_name(runs.run_that_trained(evaluation)), evaluation)
    return [sorted(by_seed.items(), key=lambda item: _seed_order(item[0])) for by_seed in groups.values()]


def _seed_order(seed: str) -> tuple:
    """Numeric seeds in numeric order, then seeds named by their run folder."""
    return (not seed.isdigit(), int(seed) if seed.isdigit() else 0, seed)


# ---------------------------------------------------------------------------- sections


def _inputs_section(runs: RunSet) -> Section:
    rows = []
    for run in runs.training:
        steps = [row["step"] for row in run.metrics]
        span = f"{len(steps)} logged steps ({steps[0]:g}–{steps[-1]:g})" if steps else "no steps logged"
        traces = f"{len(run.traces)} traces from {run.trace_source}" if run.traces else "no traces"
        traces += f"; {len(run.rollouts)} rollouts from samples.jsonl" if run.rollouts else "; no rollouts logged"
        rows.append(["training run", str(run.path), run.base_model or "?", f"training seed {_seed_name(run)}; {span}; "
                     f"trained on {run.describe_mixture()}; {len({p.step for p in run.validation})} validation passes; {traces}"])
    for run in runs.origins:
        rows.append(["training run (origin of an evaluated model)", str(run.path), run.base_model or "?",
                     f"training seed {_seed_name(run)}; trained on {run.describe_mixture()}; not below the given folders, "
                     "so read only for its config and data (no curves or detectors)"])
    for evaluation in runs.evaluations:
        details = "; ".join(f"{name}: n={scores.overall.n}" for name, scores in evaluation.benchmarks.items())
        seed = f"; seed {evaluation.seed}" if evaluation.seed is not None else ""
        interval = f"; intervals: {evaluation.info['interval']}" if isinstance(evaluation.info.get("interval"), str) else ""
        rows.append(["evaluation", str(evaluation.path), evaluation.model, details + seed + interval])
    return Section("What this report was computed on", [
        Table(["kind", "folder", "model", "contents"], rows),
        Paragraph("Every accuracy below is printed as value [95 % interval] (n = questions scored); the interval is "
                  "the one the evaluation wrote (listed above), Wilson for training-run numbers. Evaluations marked "
                  "'before' are of models no run in these folders produced (base models); 'after' are of a training "
                  "run's final model, best model or checkpoint. Runs whose config.yaml is the same but for seed and "
                  "run_dir are one setup trained with several seeds: an effect of training is then given per seed, "
                  "with its range and sd, and claimed only when every seed shows it; with one seed, the report says "
                  f"'{ONE_TRAINING_SEED}'."),
    ])


LENGTH_KEY = "response_length/mean"
REWARD_KEY = "reward"


ENTROPY_KEY = "entropy"


def _training_panels(run: TrainingRun) -> list[Panel]:
    """Panels over training steps from ``metrics.jsonl`` (TRL's keys, as tomrl train renames them);
    response length, entropy and the traces' shares are in the collapse figure."""
    keys = run.metric_keys()
    panels = []
    reward_keys = [k for k in keys if k == REWARD_KEY or (k.startswith("rewards/") and k.endswith("/mean"))]
    if reward_keys:
        panels.append(Panel("Reward (total and per reward function, batch means)", "reward",
                            [Curve(k, *run.series(k)) for k in reward_keys]))
    component_keys = [k for k in keys if k.startswith("reward_components/")]
    if component_keys:
        panels.append(Panel("Reward components (batch means)", "value",
                            [Curve(k.removeprefix("reward_components/"), *run.series(k)) for k in component_keys]))
    rate_keys = [k for k in ("answer/accuracy", "answer/format_rate", "response_length/clipped_ratio") if k in keys]
    if rate_keys:
        panels.append(Panel("Training batches: accuracy, format rate, truncated share", "share",
                            [Curve(k, *run.series(k)) for k in rate_keys], percent=True))
    orders = sorted({p.order for p in run.validation if p.order is not None})
    if orders:
        curves = []
        for order in orders:
            by_step: dict[float, list[Accuracy]] = {}
            for point in run.validation:
                if point.order == order:
                    by_step.setdefault(point.step, []).append(point.accuracy)
            steps = sorted(by_step)
            curves.append(accuracy_curve(f"order {order}", steps, [pooled(by_step[s]) for s in steps]))
        panels.append(Panel("Validation accuracy by order (band: 95 % interval)", "accuracy", curves, percent=True))
    if "kl" in keys:
        panels.append(Panel("KL to the reference", "nats", [Curve("kl", *run.series("kl"))]))
    return panels


def _share_curve(label: str, shares: list[StepShare]) -> Curve:
    return accuracy_curve(label, [s.step for s in shares], [from_counts(s.hits, s.traces) for s in shares])


def _collapse_panels(run: TrainingRun, belief_counts: list[BeliefCount], shares) -> list[Panel]:
    """Response length, entropy and what the traces still do, over the same steps."""
    keys = run.metric_keys()
    panels = []
    if LENGTH_KEY in keys:
        steps, mean = run.series(LENGTH_KEY)
        low = run.series("response_length/min")[1] if "response_length/min" in keys else None
        high = run.series("response_length/max")[1] if "response_length/max" in keys else None
        panels.append(Panel("Response length (mean; band: min–max)", "tokens",
                            [Curve("mean response length", steps, mean, low, high)]))
    if ENTROPY_KEY in keys:
        panels.append(Panel("Policy's mean token entropy", "nats", [Curve("entropy", *run.series(ENTROPY_KEY))]))
    curves = []
    if belief_counts:
        curves.append(_share_curve(f"state an agent's belief ({run.trace_source})",
                                   [StepShare(c.step, c.with_beliefs, c.traces) for c in belief_counts]))
    if shares is not None and shares.mention:
        curves.append(_share_curve("rollouts naming every asked agent", shares.mention))
    if shares is not None and shares.reflection:
        curves.append(_share_curve("rollouts with a self-reflection phrase", shares.reflection))
    if curves:
        panels.append(Panel("What the traces still do (band: 95 % Wilson interval)", "share", curves, percent=True))
    return panels


def _collapse_findings(run: TrainingRun, options: ReportOptions, counts: list[BeliefCount], shares) -> list[DetectorResult]:
    keys = run.metric_keys()
    if LENGTH_KEY in keys and REWARD_KEY in keys:
        steps, reward = run.series(REWARD_KEY)
        _, length = run.series(LENGTH_KEY)
        if not run.traces:
            why = "no reasoning traces were logged"
        elif options.states_a_belief is None:
            why = "the fidelity reward's belief parser is not available"
        else:
            why = "none of the logged traces is about a story the fidelity parser can read"
        context = {}
        if shares is not None:
            context = {"share of rollouts naming every asked agent": shares.mention,
                       "share of rollouts with a self-reflection phrase": shares.reflection}
        collapse = detect_reasoning_collapse(steps, reward, length, counts or None, subject=run.label,
                                             min_relative_drop=options.min_relative_drop, level=options.level,
                                             beliefs_unmeasured_because=why, context_shares=context)
    else:
        collapse = DetectorResult("reasoning_collapse", "Reasoning collapse", run.label, False, "not enough data",
                                  "The run's metrics have no per-step reward and response length.", (), {})
    if ENTROPY_KEY in keys:
        entropy = detect_entropy_collapse(*run.series(ENTROPY_KEY), subject=run.label,
                                          min_relative_drop=options.min_entropy_drop, level=options.level)
    else:
        entropy = DetectorResult("entropy_collapse", "Entropy collapse", run.label, False, "not enough data",
                                 f"The run's metrics have no '{ENTROPY_KEY}' (the policy's mean token entropy, which "
                                 "TRL's GRPO trainer logs at every step).", (), {})
    return [collapse, entropy]


def _shares_note(run: TrainingRun, shares) -> str:
    if not run.rollouts:
        return ("The shares of rollouts naming every asked agent and using self-reflection phrases are not measured: "
                "the run logged no rollouts (samples.jsonl is missing or empty; training config log_samples).")
    sources = ", ".join(f"{how}: {n}" for how, n in sorted(shares.agents_from.items()))
    text = (f"Rollouts read: {len(run.rollouts)} from samples.jsonl (at most {ROLLOUT_TRACES_PER_STEP} per step). "
            f"The asked agents come from: {sources}. A rollout names every asked agent when its reasoning contains each "
            "agent of the question's chain as a whole word; it self-reflects when its reasoning holds one of the "
            "listed phrases (docs/analysis.md).")
    if shares.notes:
        text += " " + "; ".join(shares.notes) + "."
    return text


def _id_ood_series(run: TrainingRun) -> tuple[list[float], list[Accuracy], list[Accuracy]]:
    by_step: dict[float, tuple[list[Accuracy], list[Accuracy]]] = {}
    for point in run.validation:
        where = run.in_distribution(point.task, point.order)
        if where is None:
            continue
        in_dist, held_out = by_step.setdefault(point.step, ([], []))
        (in_dist if where else held_out).append(point.accuracy)
    steps = sorted(by_step)
    return (steps, [pooled(by_step[s][0]) for s in steps], [pooled(by_step[s][1]) for s in steps])


def _training_section(runs: RunSet, out: Path, options: ReportOptions, results: list[DetectorResult]) -> Section | None:
    if not runs.training:
        return None
    section = Section("Training dynamics")
    first_result = len(results)
    for index, run in enumerate(runs.training):
        section.blocks.append(Paragraph(f"Run {run.label} ({run.path}): base model {run.base_model or 'unknown'}, "
                                        f"training seed {_seed_name(run)}, trained on {run.describe_mixture()}."))
        counts = run.belief_counts(options.states_a_belief) if options.states_a_belief and run.traces else []
        shares = shares_by_step(run.rollouts, run.prefill) if run.rollouts else None
        panels = _training_panels(run)
        if panels:
            file = f"training-{index + 1}-{_slug(run.label)}.png"
            plot_panels(out / file, panels, title=run.label)
            section.blocks.append(Figure(file, f"Training curves of {run.label} (per logged step)."))
        panels = _collapse_panels(run, counts, shares)
        if panels:
            file = f"collapse-{index + 1}-{_slug(run.label)}.png"
            plot_panels(out / file, panels, title=f"{run.label}: collapse")
            section.blocks.append(Figure(file, f"Collapse of {run.label}: response length, the policy's entropy and "
                                               "what the traces still do, over the same steps."))
        section.blocks.append(Paragraph(_shares_note(run, shares)))
        for result in _collapse_findings(run, options, counts, shares):
            results.append(result)
            section.blocks.append(Finding(result))
        steps, id_acc, ood_acc = _id_ood_series(run)
        if steps and any(a.n for a in id_acc) and any(a.n for a in ood_acc):
            file = f"id-ood-{index + 1}-{_slug(run.label)}.png"
            plot_panels(out / file, [Panel("In-distribution vs held-out validation accuracy", "accuracy", [
                accuracy_curve("in-distribution", steps, id_acc), accuracy_curve("held-out", steps, ood_acc)], percent=True)],
                title=run.label)
            section.blocks.append(Figure(file, f"ID vs held-out validation accuracy over training ({run.label}); "
                                               "tasks pooled per step."))
        if not run.validation:
            missing = "the run logged no validation passes"
        elif not run.mixture:
            missing = "the run's training data (data/train.jsonl) is missing, so ID and held-out cannot be told apart"
        elif not any(a.n for a in ood_acc):
            missing = (f"its validation set holds no held-out questions: every family and order in it was trained on "
                       f"({run.describe_mixture()}); validate on other orders or data sets to measure transfer")
        elif not any(a.n for a in id_acc):
            missing = "its validation set holds no in-distribution questions"
        else:
            missing = ""
        result = detect_id_ood_divergence(steps, id_acc, ood_acc, subject=run.label, level=options.level,
                                          missing_because=missing)
        results.append(result)
        section.blocks.append(Finding(result))
    section.blocks += [Paragraph(text) for text in _dynamics_across_seeds(runs, results[first_result:])]
    return section


def _dynamics_across_seeds(runs: RunSet, results: list[DetectorResult]) -> list[str]:
    """For runs that differ only by training seed: in how many seeds each per-run detector fired."""
    texts, seen = [], set()
    for run in runs.training:
        siblings = [r for r in runs.seed_siblings(run) if any(r is t for t in runs.training)]
        if len(siblings) < 2 or run.setup in seen:
            continue
        seen.add(run.setup)
        labels = {r.label for r in siblings}
        counts: dict[str, list[bool]] = {}
        for result in results:
            if result.subject in labels:
                counts.setdefault(result.title, []).append(result.fired)
        tally = "; ".join(f"{title} fired in {sum(flags)} of {len(flags)}" for title, flags in counts.items())
        texts.append(f"Runs {', '.join(r.label for r in siblings)} differ only by training seed (seeds "
                     f"{', '.join(_seed_name(r) for r in siblings)}): {tally}. A finding that some seeds show and others "
                     "do not belongs to that run, not to the training setup.")
    return texts


def _paper_a_section(runs: RunSet) -> Section | None:
    ours = []
    for evaluation in runs.evaluations:
        cells = {}
        for scores in evaluation.benchmarks.values():
            column = paper_a_column(scores)
            if column in PAPER_A_COLUMNS and column not in cells:
                cells[column] = scores
        if cells:
            ours.append((evaluation, cells))
    if not ours:
        return None
    rows = [[f"Paper A: {model}", *[f"{v:.2f} %" for v in values], "as reported"] for model, values in PAPER_A_TABLE1.items()]
    ordered = sorted(ours, key=lambda item: (not runs.is_base_evaluation(item[0]), str(item[0].path)))
    for evaluation, cells in ordered:
        label, source = _eval_label(runs, evaluation), _eval_source(evaluation)
        if any(scores.lenient is not None for scores in cells.values()):
            rows.append([f"{label} — Paper A's scoring",
                         *[_acc(cells[c].lenient if c in cells else None) for c in PAPER_A_COLUMNS], source])
        rows.append([f"{label} — strict", *[_acc(cells[c].overall if c in cells else None) for c in PAPER_A_COLUMNS], source])
    blocks = [
        Table(["model", *PAPER_A_COLUMNS, "source"], rows),
        Paragraph("Paper A's rows are copied from its Table 1 (accuracy only; it publishes no intervals, and its "
                  "4th-order set shares every story with its training data). Our rows: accuracy [95 % Wilson "
                  "interval] (n), scored two ways: 'strict' (well-formed answer equal to the gold after "
                  "normalisation) and 'Paper A's scoring' (last answer tag, no format check, the answer may end "
                  "with the gold), which is what Paper A's numbers use. A dash: not evaluated."),
    ]
    seeds = _paper_a_seeds(runs, ours)
    if seeds:
        blocks.append(Paragraph(seeds))
    return Section("Before and after training (Paper A's table layout)", blocks)


def _paper_a_seeds(runs: RunSet, ours: list[tuple[Evaluation, dict[str, BenchmarkScores]]]) -> str:
    """What the 'after' rows say about the run-to-run spread of training, per setup."""
    cells_of = {id(evaluation): cells for evaluation, cells in ours}
    lines = []
    for group in _seed_groups(runs, [evaluation for evaluation, _ in ours]):
        names = ", ".join(_eval_label(runs, evaluation) for _, evaluation in group)
        if len(group) == 1:
            lines.append(f"{names}: {ONE_TRAINING_SEED} (its difference from a 'before' row is one run's).")
            continue
        spans = []
        for column in PAPER_A_COLUMNS:
            values = [cells_of[id(e)][column].overall.value for _, e in group
                      if column in cells_of[id(e)] and cells_of[id(e)][column].overall.n]
            if len(values) >= 2:
                spans.append(f"{column} {100 * min(values):.1f}–{100 * max(values):.1f} %")
        lines.append(f"{names} differ only by training seed (seeds {', '.join(seed for seed, _ in group)}); strict "
                     f"accuracy from the lowest to the highest seed: {'; '.join(spans) or 'no column in common'}.")
    return ("Training seeds. " + " ".join(lines)) if lines else ""


_ORDER_SUFFIX = re.compile(r"[-_ ]?order[-_ ]?(\d+)$")


def accuracy_by_order_sets(evaluation: Evaluation) -> dict[str, dict[int, Accuracy]]:
    """Benchmark (or benchmark family) → accuracy by order, for every one with two or more orders.

    Held-out sets published one per order (``tomrl-hitom-order0`` … ``-order4``) are joined into
    one entry (``tomrl-hitom-order*``), so difficulty can be compared across them.
    """
    sets: dict[str, dict[int, Accuracy]] = {}
    for name, scores in evaluation.benchmarks.items():
        match = _ORDER_SUFFIX.search(name)
        if match and set(scores.by_order) <= {int(match.group(1))}:
            key = name[: match.start()] + "-order*"
            sets.setdefault(key, {})[int(match.group(1))] = scores.overall
        else:
            sets[name] = dict(scores.by_order)
    return {name: by_order for name, by_order in sets.items() if sum(1 for a in by_order.values() if a.n > 0) >= 2}


def _orders_section(runs: RunSet, out: Path, options: ReportOptions, results: list[DetectorResult]) -> Section | None:
    benchmarks: dict[str, list[tuple[Evaluation, dict[int, Accuracy]]]] = {}
    for evaluation in runs.evaluations:
        for name, by_order in accuracy_by_order_sets(evaluation).items():
            benchmarks.setdefault(name, []).append((evaluation, by_order))
    if not benchmarks:
        return None
    section = Section("Accuracy by order of belief")
    for name, entries in benchmarks.items():
        models = {f"{_eval_label(runs, e)} [{e.path.name}]": by_order for e, by_order in entries}
        file = f"orders-{_slug(name)}.png"
        plot_accuracy_by_order(out / file, models, title=f"{name}: accuracy by order (95 % Wilson intervals)")
        section.blocks.append(Figure(file, f"{name}: accuracy by order of belief per model."))
        orders = sorted({o for by in models.values() for o in by})
        section.blocks.append(Table(["model", *[f"order {o}" for o in orders]],
                                    [[label, *[_acc(by.get(o)) for o in orders]] for label, by in models.items()],
                                    caption=f"{name}, accuracy by order"))
        for evaluation, by_order in entries:
            result = detect_inverted_difficulty(by_order, subject=f"{_eval_label(runs, evaluation)} on {name}",
                                                level=options.level)
            results.append(result)
            section.blocks.append(Finding(result))
    return section


@dataclass
class _Matrix:
    rows: list[str]
    columns: list[str]
    cells: dict[tuple[str, str], Accuracy]
    in_distribution: set[tuple[str, str]]
    base_rows: dict[str, str]  # base model → its row label
    trained_rows: dict[str, tuple[str, TrainingRun]]  # row label → (base model, run)
    setups: dict[str, tuple] = field(default_factory=dict)  # trained row label → its setup (_setup_key)
    names: dict[str, str] = field(default_factory=dict)  # trained row label → the trained model's name


def _task_columns(runs: RunSet) -> list[tuple[str, str, int | None]]:
    """(column label, benchmark, order or None) for the matrix.

    Benchmarks are columns; a benchmark is also split by order when some run trained on only
    some orders of its family and the benchmark asks others (Paper A trains Hi-ToM orders 0-3 and
    tests order 4; Paper B's O4 and O1-3 mixtures), since then those orders are the held-out
    tasks that matter.
    """
    def some_orders_held_out(name: str, orders: Iterable[int]) -> bool:
        family = task_family(name)
        return any(family in run.mixture and not run.mixture[family] <= {None} and not set(orders) <= run.mixture[family]
                   for run in runs.training)

    columns: dict[tuple[str, int | None], None] = {}
    for evaluation in runs.evaluations:
        for name, scores in evaluation.benchmarks.items():
            if scores.by_order and some_orders_held_out(name, scores.by_order):
                for order in sorted(scores.by_order):
                    columns.setdefault((name, order), None)
            else:
                columns.setdefault((name, None), None)
    return [(f"{name} · order {order}" if order is not None else name, name, order) for name, order in columns]


def _generalization_matrix(runs: RunSet) -> _Matrix | None:
    columns = _task_columns(runs)
    if not columns:
        return None
    matrix = _Matrix([], [label for label, _, _ in columns], {}, set(), {}, {})
    for evaluation in runs.evaluations:
        run = runs.run_that_trained(evaluation)
        if run is None:
            row = f"base: {evaluation.label}"
            matrix.base_rows.setdefault(evaluation.model, row)
        else:
            row = f"{_trained_model_name(run, evaluation)} ({run.describe_mixture()})"
            matrix.trained_rows[row] = (run.base_model or "?", run)
            matrix.setups.setdefault(row, _setup_key(runs, evaluation))
            matrix.names.setdefault(row, _trained_model_name(run, evaluation))
        if row not in matrix.rows:
            matrix.rows.append(row)
        for label, name, order in columns:
            scores = evaluation.benchmarks.get(name)
            if scores is None:
                continue
            acc = scores.overall if order is None else scores.by_order.get(order)
            if acc is not None and (row, label) not in matrix.cells:
                matrix.cells[(row, label)] = acc
                if run is not None and run.in_distribution(name, order):
                    matrix.in_distribution.add((row, label))
    matrix.rows.sort(key=lambda r: (not r.startswith("base: "), r))
    return matrix


def _base_row_for(matrix: _Matrix, base_model: str) -> str | None:
    if base_model in matrix.base_rows:
        return matrix.base_rows[base_model]
    # Runs may name their base model by hub id or path while its evaluation names it otherwise.
    short = Path(base_model).name.lower()
    for model, row in matrix.base_rows.items():
        if Path(model).name.lower() == short:
            return row
    return None


def _generalization_section(runs: RunSet, out: Path, options: ReportOptions, results: list[DetectorResult]) -> Section | None:
    matrix = _generalization_matrix(runs)
    if matrix is None or not matrix.trained_rows:
        return None
    section = Section("Generalization: training mixture × evaluation task")
    file = "generalization-matrix.png"
    plot_generalization_matrix(out / file, matrix.rows, matrix.columns, matrix.cells, matrix.in_distribution)
    section.blocks.append(Figure(file, "Accuracy of each model (rows) on each task (columns); boxed 'ID' cells are "
                                       "tasks the row's mixture trained on, all others are held out."))
    rows = []
    for row in matrix.rows:
        cells = []
        for column in matrix.columns:
            acc = matrix.cells.get((row, column))
            mark = " (ID)" if (row, column) in matrix.in_distribution else ""
            cells.append(_acc(acc) + mark if acc is not None else "–")
        rows.append([row, *cells])
    section.blocks.append(Table(["model", *matrix.columns], rows, caption="Generalization matrix (ID = in distribution)"))

    by_base: dict[str | None, list[_SeedGroup]] = {}
    for group in _matrix_seed_groups(matrix):
        by_base.setdefault(_base_row_for(matrix, group.base_model), []).append(group)
    changes = []
    for base_row, groups in by_base.items():
        if base_row is None:
            bases = sorted({group.base_model for group in groups})
            result = DetectorResult("negative_transfer", "Negative transfer", ", ".join(g.label for g in groups), False,
                                    "not enough data", f"No evaluation of these runs' base model ({', '.join(bases)}) was "
                                    "found, so transfer cannot be measured against it. Evaluate the base model on the "
                                    "same tasks.", (), {})
        else:
            base = {c: matrix.cells[(base_row, c)] for c in matrix.columns if (base_row, c) in matrix.cells}
            trained = {group.label: group.pooled(matrix) for group in groups}
            in_dist = {group.label: {c for (r, c) in matrix.in_distribution if r == group.rows[0]}
                       for group in groups if group.run.mixture}
            effects = {group.label: group.effects(matrix, base) for group in groups}
            result = detect_negative_transfer(base, trained, in_dist, subject=f"against {base_row}", level=options.level)
            result = _transfer_across_seeds(result, effects)
            for group in groups:
                for column, pooled_acc in trained[group.label].items():
                    if column in base and pooled_acc.n and base[column].n:
                        change = difference_interval(pooled_acc, base[column], options.level)
                        seeds = effects[group.label][column]
                        changes.append([group.label, column, base_row, change.format_points(),
                                        seeds.describe() if seeds.seeds >= 2 else "one training seed"])
        results.append(result)
        section.blocks.append(Finding(result))
    if changes:
        section.blocks.append(Table(
            ["trained model", "task", "against", "trained − base [95 % MOVER-Wilson]", "per training seed"], changes,
            caption="Change from the base model: question sampling (the interval; several seeds pooled as seeds × "
                    "questions) beside the run-to-run spread of training (each seed's change, their range and sd)"))
        if any(cells[-1] == "one training seed" for cells in changes):
            section.blocks.append(Paragraph(f"Rows with one training seed: {ONE_TRAINING_SEED}. Train the setup with "
                                            "more seeds (same config, another seed) to measure it."))
    return section


@dataclass(frozen=True)
class _SeedGroup:
    """Trained rows of the matrix that differ only by training seed (one row when the run has no siblings)."""

    rows: tuple[str, ...]  # by seed
    seeds: tuple[str, ...]
    base_model: str
    run: TrainingRun  # the first seed's, for the mixture (equal setups train on the same data)
    names: tuple[str, ...]  # the trained models' names, by seed

    @property
    def label(self) -> str:
        if len(self.rows) == 1:
            return self.rows[0]
        return f"{' + '.join(self.names)} ({self.run.describe_mixture()}; {len(self.rows)} training seeds, pooled)"

    def pooled(self, matrix: _Matrix) -> dict[str, Accuracy]:
        """Column → accuracy over the seeds' answers (one row: its own cells, intervals as written)."""
        cells: dict[str, Accuracy] = {}
        for column in matrix.columns:
            present = [matrix.cells[(row, column)] for row in self.rows if (row, column) in matrix.cells]
            if present:
                cells[column] = present[0] if len(self.rows) == 1 else pooled(present)
        return cells

    def effects(self, matrix: _Matrix, base: dict[str, Accuracy]) -> dict[str, SeedEffects]:
        """Column → each seed's trained − base."""
        return {column: SeedEffects.of({seed: matrix.cells[(row, column)].value - base[column].value
                                         for seed, row in zip(self.seeds, self.rows) if (row, column) in matrix.cells})
                for column in base if any((row, column) in matrix.cells for row in self.rows)}


def _matrix_seed_groups(matrix: _Matrix) -> list[_SeedGroup]:
    groups: dict[tuple, dict[str, str]] = {}
    for row, (_, run) in matrix.trained_rows.items():
        key = matrix.setups.get(row) or (f"row {row}", None)
        groups.setdefault(key, {}).setdefault(_seed_name(run), row)
    found = []
    for by_seed in groups.values():
        seeds = sorted(by_seed, key=_seed_order)
        rows = tuple(by_seed[seed] for seed in seeds)
        base_model, run = matrix.trained_rows[rows[0]]
        found.append(_SeedGroup(rows, tuple(seeds), base_model, run, tuple(matrix.names.get(row, row) for row in rows)))
    return found


def _transfer_across_seeds(result: DetectorResult, effects: dict[str, dict[str, SeedEffects]]) -> DetectorResult:
    """The negative-transfer finding with the run-to-run spread of training: each compared trained model's
    per-seed changes; a drop counts only when every seed dropped, and one seed's drop says it is one seed's."""
    comparisons = [dict(c) for c in result.data.get("comparisons", [])]
    if not comparisons:
        return result

    def seeds_of(comparison: dict) -> SeedEffects | None:
        found = effects.get(comparison["mixture"], {}).get(comparison["task"])
        return found if found is not None and found.seeds else None

    for comparison in comparisons:
        if (found := seeds_of(comparison)) is not None:
            comparison["training_seeds"] = found.to_dict()
    drops = [c for c in comparisons if c["significant_drop"]]
    held = [c for c in drops if (found := seeds_of(c)) is None or found.seeds < 2 or found.agree(-1)]
    for comparison in drops:
        comparison["holds_in_every_seed"] = any(comparison is kept for kept in held)
    data = {**result.data, "comparisons": comparisons}
    evidence = list(result.evidence)
    for comparison in comparisons:
        found = seeds_of(comparison)
        if found is not None and found.seeds >= 2 and (comparison["significant_drop"] or comparison is
                                                        min(comparisons, key=lambda c: c["difference"]["value"])):
            evidence.append((f"{comparison['mixture']} on {comparison['task']}, per training seed", found.describe()))
    one_seed = sorted({c["mixture"] for c in comparisons if (found := seeds_of(c)) is None or found.seeds < 2})
    if one_seed:
        evidence.append(("training seeds", f"{', '.join(one_seed)}: {ONE_TRAINING_SEED}"))
    if not result.fired:
        return replace(result, evidence=tuple(evidence), data=data)
    if not held:  # every significant drop is one that some training seed does not show
        worst = min(drops, key=lambda c: c["difference"]["value"])
        found = seeds_of(worst)
        data["seeds_disagree"] = True
        return replace(result, fired=False, verdict=seeds_disagree(found), evidence=tuple(evidence), data=data,
                       explanation=f"Inconclusive: pooled over its training seeds, {worst['mixture']} scores significantly "
                                   f"below the base model on {worst['task']}, but its seeds disagree ({found.describe()}); "
                                   "a drop that one training run shows and another does not is not shown to be an "
                                   "effect of the training setup.")
    worst = min(held, key=lambda c: c["difference"]["value"])
    explanation = result.explanation
    if len(held) < len(drops):
        explanation = (f"Negative transfer: training made the model worse on tasks it did not train on — the largest "
                       f"drop that every training seed shows is {worst['mixture']} on {worst['task']}, "
                       f"{100 * -worst['difference']['value']:.0f} points below the base model; other significant drops "
                       "are not shown by every seed (evidence below).")
    if all((found := seeds_of(c)) is None or found.seeds < 2 for c in held):
        return replace(result, verdict=f"{result.verdict} (one training seed)", evidence=tuple(evidence), data=data,
                       explanation=f"{explanation} Training seeds: {ONE_TRAINING_SEED}.")
    return replace(result, explanation=explanation, evidence=tuple(evidence), data=data)


def _shortcut_tables(title: str, records: list[ShortcutRecord], matcher) -> list[Table]:
    rows = compare_with_heuristics(records, matcher)
    tables = [Table(
        ["heuristic", "heuristic right", "model agrees when heuristic wrong",
         "model right where heuristic right", "model right where heuristic wrong"],
        [[r.heuristic, _acc(r.heuristic_accuracy), _acc(r.agreement_when_wrong),
          _acc(r.model_accuracy_when_right), _acc(r.model_accuracy_when_wrong)] for r in rows],
        caption=f"{title}: {len(records)} questions")]
    orders = sorted({r.order for r in records if r.order is not None})
    if len(orders) >= 2:
        per_order = {o: {row.heuristic: row for row in compare_with_heuristics([r for r in records if r.order == o], matcher)}
                     for o in orders}
        tables.append(Table(
            ["heuristic", *[f"order {o}" for o in orders]],
            [[r.heuristic, *[_acc(per_order[o][r.heuristic].agreement_when_wrong) if r.heuristic in per_order[o] else "–"
                             for o in orders]] for r in rows],
            caption=f"{title}: model agrees with the heuristic where it is wrong, by order"))
    return tables


def _comparison_section(options: ReportOptions) -> Section | None:
    if not options.comparison:
        return None
    from tomrl.analysis.comparison import note_for, table_rows

    columns, rows = table_rows(options.comparison)
    return Section("Models beside the best no-ToM rule", [Table(columns, rows), Paragraph(note_for(options.comparison))])


def _shortcut_section(runs: RunSet, options: ReportOptions) -> Section | None:
    if options.shortcut_records is None or options.shortcut_matcher is None:
        return None
    matcher = options.shortcut_matcher
    grouped: dict[str, list[tuple[Evaluation, list[ShortcutRecord]]]] = {}
    notes: list[str] = []
    for evaluation in runs.evaluations:
        by_benchmark: dict[str, list[ShortcutRecord]] = {}
        records, left_out = options.shortcut_records(evaluation)
        notes += left_out
        for record in records:
            by_benchmark.setdefault(record.group, []).append(record)
        for benchmark, group in by_benchmark.items():
            grouped.setdefault(benchmark, []).append((evaluation, group))
    if not grouped and not notes:
        return None
    section = Section("Shortcuts: does the model answer like a no-ToM heuristic?", [Paragraph(
        "For each question, each heuristic of the audit gives an answer that needs no belief tracking. Where a "
        "heuristic is wrong, a model that tracks beliefs should rarely give its answer; 'agrees when wrong' is the "
        "share of those questions the model answers exactly like the heuristic (its last answer tag, matched "
        "strictly). The random-container heuristic, where present, shows the agreement expected by chance.")])
    if notes:
        section.blocks.append(Paragraph("Left out: " + "; ".join(notes) + "."))
    for benchmark, entries in grouped.items():
        for evaluation, records in entries:
            section.blocks += _shortcut_tables(f"{benchmark}, {_eval_label(runs, evaluation)} — {_eval_source(evaluation)}",
                                               records, matcher)
        bases = [(e, r) for e, r in entries if runs.is_base_evaluation(e)]
        records_of = {id(e): r for e, r in entries}
        for group in _seed_groups(runs, [e for e, _ in entries]):
            for base_eval, base_records in bases:
                per_seed = []
                for seed, evaluation in group:
                    before, after = paired_records(base_records, records_of[id(evaluation)])
                    if not before:
                        continue
                    shifts = shortcut_shift(compare_with_heuristics(before, matcher),
                                            compare_with_heuristics(after, matcher), options.level)
                    per_seed.append((seed, after, shifts))
                    seeds = (f"training seed {seed}, one of {len(group)}: the last table of this benchmark gives the "
                             "spread over seeds" if len(group) > 1 else ONE_TRAINING_SEED)
                    section.blocks.append(Table(
                        ["heuristic", f"agrees when wrong: {base_eval.label}",
                         f"agrees when wrong: {_eval_label(runs, evaluation)}", "change"],
                        [[s.heuristic, _acc(s.before), _acc(s.after), s.change.format_points() if s.change else "–"]
                         for s in shifts],
                        caption=f"{benchmark}, before vs after training on the same {len(before)} questions "
                                f"(change: MOVER-Wilson 95 % interval; {seeds})"))
                if len(per_seed) >= 2:
                    section.blocks.append(_shortcut_seed_table(benchmark, runs, base_eval, base_records, per_seed,
                                                               [e for _, e in group], matcher, options.level))
    return section


def _shortcut_seed_table(benchmark: str, runs: RunSet, base_eval: Evaluation, base_records: list[ShortcutRecord],
                         per_seed: list, evaluations: list[Evaluation], matcher, level: float) -> Table:
    """The shift of one setup trained with several seeds: pooled over the seeds' answers, each seed's change
    beside it, and a direction claimed only when every seed shows it."""
    pooled_after = [record for _, after, _ in per_seed for record in after]
    before, _ = paired_records(base_records, pooled_after)
    pooled_shifts = shortcut_shift(compare_with_heuristics(before, matcher), compare_with_heuristics(pooled_after, matcher),
                                   level)
    by_seed = {seed: {s.heuristic: s for s in shifts} for seed, _, shifts in per_seed}
    rows = []
    for shift in pooled_shifts:
        changes = {seed: found[shift.heuristic].change.value for seed, found in by_seed.items()
                   if shift.heuristic in found and found[shift.heuristic].change is not None}
        if shift.change is None or not changes:
            rows.append([shift.heuristic, "–", "–", "–"])
            continue
        effects = SeedEffects.of(changes)
        direction = 1 if shift.change.above_zero else (-1 if shift.change.below_zero else 0)
        verdict = training_effect_verdict(direction, effects, "rose" if direction > 0 else "fell", "inconclusive")
        rows.append([shift.heuristic, shift.change.format_points(), effects.describe(), verdict])
    names = ", ".join(_eval_label(runs, e) for e in evaluations)
    return Table(["heuristic", "change, seeds pooled [95 % MOVER-Wilson]", "per training seed", "verdict"], rows,
                 caption=f"{benchmark}, agreement when the heuristic is wrong, {base_eval.label} → {names} "
                         f"({len(per_seed)} training seeds of one setup): 'rose' or 'fell' only when the pooled interval "
                         "excludes zero and every seed's change has its sign")


def _trace_section(runs: RunSet, options: ReportOptions) -> Section | None:
    """The same questions answered by the base and the trained models, side by side."""
    if options.trace_views <= 0 or len(runs.evaluations) < 2:
        return None
    from tomrl.analysis.trace_viewer import trace_views

    ordered = sorted(runs.evaluations, key=lambda e: not runs.is_base_evaluation(e))  # base models first
    labelled = [(f"{_eval_label(runs, e)} [{e.path.name}]", e) for e in ordered]
    views, notes = trace_views(labelled, count=options.trace_views, seed=options.trace_seed)
    if not views and not notes:
        return None
    section = Section("Traces side by side", [Paragraph(
        f"{len(views)} questions answered by two or more of the evaluated models, drawn at random (seed "
        f"{options.trace_seed}) round robin over the orders of belief. Each shows the story, the question, the gold "
        "answer and the oracle's belief chain for the asked object (reality, each asked agent's belief, and each "
        "nested belief the question builds on), then every model's trace with its answer. In each trace the first "
        "statement the oracle judges false is marked; the statements are read and judged as the fidelity reward judges "
        "them (its parser and default options: true when the chain held that belief at some moment of the story, "
        "'at first' statements against the chain's first belief), and listed under the trace.")])
    if notes:
        section.blocks.append(Paragraph("Left out: " + "; ".join(notes) + "."))
    section.blocks += views
    return section


# Result files of `tomrl analyze` and the modules that render them: file name → (module, what it is).
ANALYSIS_RENDERERS = {"interventions.json": ("tomrl.analysis.interventions", "trace interventions"),
                      "probes.json": ("tomrl.analysis.probes", "belief probes")}


def analysis_sections(analysis_files: dict[str, list[Path]], out: Path, notes: list[str]) -> list[Section]:
    """Sections of other analyses' result files (``runs.find_analysis_files``: file name → paths), rendered
    by their own modules' ``report_sections(files, out_dir)``; a module without it is noted and skipped.
    Shared by this report and the study report."""
    sections: list[Section] = []
    for name, files in analysis_files.items():
        module_name, what = ANALYSIS_RENDERERS[name]
        try:
            module = importlib.import_module(module_name)
        except ImportError as error:
            notes.append(f"{len(files)} {name} file(s) found, but {module_name} cannot be imported ({error}); "
                         f"the {what} are left out.")
            continue
        render = getattr(module, "report_sections", None)
        if render is None:
            notes.append(f"{len(files)} {name} file(s) found, but {module_name} has no report_sections yet; the {what} "
                         "are left out.")
            continue
        sections += render(list(files), out)
    return sections


def _detector_summary(results: list[DetectorResult]) -> Section:
    return Section("Detectors at a glance", [
        Table(["detector", "computed on", "verdict"],
              [[r.title, r.subject or "–", verdict_label(r)] for r in results]),
        Paragraph("Each detector decides by significance tests at a 95 % family-wise level and shows its evidence "
                  "in the sections below; 'not enough data' says what is missing."),
    ])


def _methods_section(options: ReportOptions) -> Section:
    blocks = [Paragraph(
        "Intervals: accuracies carry 95 % Wilson score intervals; differences of accuracies carry MOVER-Wilson "
        "(Newcombe) intervals, which treat the two accuracies as independent and are therefore conservative when "
        "both were measured on the same questions. Changes over training compare the mean of the last third of the "
        "logged steps with the mean of the first third; their intervals model the per-step noise as AR(1), estimated "
        "from first differences so that a smooth fall is not mistaken for noise. Accuracy against order uses the "
        "Cochran–Armitage trend test. Where a detector runs several tests, a Bonferroni "
        "correction keeps the family-wise level at 95 %. These intervals cover question sampling only. The run-to-run "
        "spread of training is measured only where one setup was trained with several seeds (runs whose config.yaml "
        "differs only in seed and run_dir): each seed's effect is shown with their range and sd, several seeds' "
        "answers are pooled for the interval, and an effect of training is claimed only when every seed shows it "
        "('inconclusive: training seeds disagree' otherwise).")]
    blocks += [Paragraph(note) for note in options.notes]
    return Section("How the numbers were computed", blocks)


# ---------------------------------------------------------------------------- entry points


def build_report(runs: RunSet, out: str | Path, options: ReportOptions | None = None) -> tuple[Document, list[DetectorResult]]:
    """Write the figures into ``out`` and return the document and every detector's result."""
    options = options or ReportOptions()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    results: list[DetectorResult] = []
    notes: list[str] = []
    body = [
        _comparison_section(options),
        _training_section(runs, out, options, results),
        _paper_a_section(runs),
        _orders_section(runs, out, options, results),
        _generalization_section(runs, out, options, results),
        _shortcut_section(runs, options),
        _trace_section(runs, options),
        *analysis_sections(runs.analysis_files, out, notes),
    ]
    methods = _methods_section(options)
    methods.blocks += [Paragraph(note) for note in notes]
    sections = [_inputs_section(runs), _detector_summary(results), *[s for s in body if s is not None], methods]
    from tomrl.training.split_rule import validation_on_test_warning  # runs that validated on test stories: said first

    warnings = [f"{w} (training run {run.path})" for run in runs.training if (w := validation_on_test_warning(run.path))]
    return Document(options.title, sections, preamble=[Paragraph(w) for w in warnings]), results


def default_options(**overrides) -> ReportOptions:
    """Options wired to the project's own parts: the fidelity reward's belief parser, the audit's
    heuristics and the shared answer matcher. A part that is missing is left out, and a note in
    the report says so."""
    options = ReportOptions(**overrides)
    notes = list(options.notes)
    if importlib.util.find_spec("tomrl.rewards.fidelity") is None:
        notes.append("The fidelity reward's belief parser (tomrl.rewards.fidelity) is not available, so the share of "
                     "traces stating beliefs is not measured.")
    else:
        from tomrl.analysis.beliefs import states_a_belief

        options.states_a_belief = states_a_belief
    try:
        from tomrl.analysis.shortcuts import answers_match, records_for_evaluation
    except ImportError as error:
        notes.append(f"The shortcut comparison is left out: {error}.")
    else:
        options.shortcut_records = records_for_evaluation
        options.shortcut_matcher = answers_match
    options.notes = notes
    return options


def write_report(runs: RunSet, out: str | Path, options: ReportOptions | None = None) -> dict[str, Path]:
    """Build the report and write ``report.html``, ``report.md``, the PNGs and ``detectors.json`` into ``out``."""
    out = Path(out)
    document, results = build_report(runs, out, options)
    markdown, html_path = write_document(document, out)
    detectors = out / "detectors.json"
    atomic_write_json(detectors, {"detectors": [r.to_dict() for r in results]})
    return {"html": html_path, "markdown": markdown, "detectors": detectors}

