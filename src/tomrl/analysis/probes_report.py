"""The belief probes in the report: accuracy by layer (PNG), the best layers (table), and what they show.

    from tomrl.analysis.probes_report import report_sections
    sections = report_sections([Path("runs/demo/analysis/probes/probes.json")], Path("runs/demo/report"))

Reads ``probes.json`` as ``tomrl analyze probes`` writes it (:mod:`tomrl.analysis.probes`) and
returns :class:`~tomrl.analysis.document.Section` blocks; the figures are written into ``out_dir``.
A file that cannot be read becomes a paragraph saying so, not an error: the rest of the report
still gets written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from tomrl.analysis.document import Figure, Paragraph, Section, Table
from tomrl.analysis.probes_fit import ALL_ORDERS, as_accuracy
from tomrl.analysis.probes_labels import TARGETS

RESULTS_KIND = "tomrl-probes"
FEW_QUESTIONS = 400  # below this, the console and the report say that the intervals are wide
REQUIRED_KEYS = ("data", "n", "stories", "orders", "seed", "folds", "regularization", "shuffles", "token", "targets",
                 "models", "results", "best")


def _percent(value: float) -> str:
    return f"{100 * value:.1f} %"


def plot_probe_layers(path: Path, results: dict[str, Any], title: str = "") -> Path:
    """Accuracy by layer (order "all"): one row of panels per model, one panel per target; the probe
    and the shuffled-label control with their 95 % Wilson bands, and the majority rate."""
    from matplotlib.figure import Figure as MplFigure

    from tomrl.analysis.plots import _save

    models = list(results["models"])
    targets = [t for t in TARGETS if t in results["targets"]]
    rows = [r for r in results["results"] if r["order"] == ALL_ORDERS]
    figure = MplFigure(figsize=(4.2 * len(targets), 2.8 * len(models) + 0.5), layout="constrained")
    axes = figure.subplots(len(models), len(targets), squeeze=False, sharex=True, sharey=True)
    for i, model in enumerate(models):
        for j, target in enumerate(targets):
            ax = axes[i][j]
            series = sorted((r for r in rows if r["model"] == model and r["target"] == target), key=lambda r: r["layer"])
            layers = [r["layer"] for r in series]
            for key, label, style, colour in (("accuracy", "probe", "-o", "tab:blue"),
                                               ("control", "shuffled-label control", "--", "tab:grey")):
                values = [100 * r[key]["value"] for r in series]
                ax.plot(layers, values, style, color=colour, label=label, markersize=3, linewidth=1.4)
                ax.fill_between(layers, [100 * r[key]["low"] for r in series], [100 * r[key]["high"] for r in series],
                                color=colour, alpha=0.18, linewidth=0)
            if series:
                ax.axhline(100 * series[0]["majority"], color="black", linestyle=":", linewidth=1.2,
                           label="majority (per order)")
            ax.set_ylim(0, 100)
            ax.grid(alpha=0.3)
            ax.set_title(f"{model} — {target}", fontsize=10, loc="left")
            if j == 0:
                ax.set_ylabel("accuracy (%)")
            if i == len(models) - 1:
                ax.set_xlabel("layer (0 = embeddings)")
    axes[0][0].legend(fontsize=7, loc="lower right")
    n, stories = results["n"], results["stories"]
    figure.suptitle(title or f"Belief probes by layer, all orders (n = {n} questions, {stories} stories; 95 % Wilson bands)",
                    fontsize=11)
    return _save(figure, path)


def _best_table(results: dict[str, Any]) -> Table:
    rows = []
    for best in results["best"]:
        probe, control, same = (as_accuracy(best[k]) for k in ("accuracy", "control", "control_same_layer"))
        rows.append([best["model"], best["target"], str(best["order"]), str(best["layer"]), probe.format(),
                     f"{control.format()} (layer {best['control_best_layer']}; permutations "
                     f"{_percent(best['control_range'][0])}–{_percent(best['control_range'][1])})", same.format(),
                     _percent(best["majority"]), best["verdict"]])
    return Table(
        ["model", "target", "order", "best layer", "probe accuracy", "control (its best layer)", "control at that layer",
         "majority", "verdict"],
        rows,
        caption="Best layer per model, target and order. The best layer is picked on the same out-of-fold predictions "
                "it is scored on (optimistic); the control's best layer is picked the same way and is the comparison. "
                "'above control' needs the probe's whole interval above the control's and above the majority rate.",
    )


def _findings(results: dict[str, Any]) -> Paragraph:
    overall = [b for b in results["best"] if b["order"] == ALL_ORDERS]
    above = [b for b in overall if b["verdict"] == "above control"]
    unclear = [b for b in overall if b["verdict"] != "above control"]
    parts = []
    if above:
        parts.append("Linearly decodable above the shuffled-label control and the majority rate (all orders): "
                     + "; ".join(f"{b['model']} / {b['target']} at layer {b['layer']} "
                                 f"({_percent(b['accuracy']['value'])} vs control {_percent(b['control']['value'])})"
                                 for b in above) + ".")
    if unclear:
        parts.append("Not linearly decodable above control at this n — inconclusive at n = "
                     f"{results['n']} ({results['stories']} stories): "
                     + "; ".join(f"{b['model']} / {b['target']} (best {_percent(b['accuracy']['value'])}, "
                                 f"control {_percent(b['control']['value'])}, majority {_percent(b['majority'])})"
                                 for b in unclear) + ".")
    parts.append("A probe that decodes a target shows the state carries it in a linearly readable form, not that "
                 "the model uses it to answer; a probe that does not, at this n, shows nothing either way.")
    return Paragraph(" ".join(parts))


def widest_half_width(n: int) -> float:
    """Half the width, in points, of a 95 % interval of an accuracy near 50 % on ``n`` questions (its widest)."""
    return 100 * 1.96 * 0.5 / max(1, n) ** 0.5


def _setup(results: dict[str, Any], source: Path) -> Paragraph:
    orders = ", ".join(f"order {o}: {k}" for o, k in results["orders"].items())
    few = (f" {results['n']} questions are few for probes: an interval is up to ±{widest_half_width(results['n']):.0f} "
           "points wide." if results["n"] < FEW_QUESTIONS else "")
    return Paragraph(
        f"From {source}: linear probes (logistic regression on standardized states, C = {results['regularization']}) "
        f"on each model's hidden state at the last prompt token ({results['token']}), at every layer, "
        f"{results['folds']}-fold cross-validated by story (seed {results['seed']}). n = {results['n']} questions "
        f"from {results['stories']} stories ({orders}); data: {', '.join(results['data'])}. Targets: belief = the "
        "container the asked chain believes the object is in; reality = the true location (both as the container's "
        "index in the story's order of first mention); false_belief = whether they differ. The control is the same "
        f"probe on labels permuted within each order (mean of {results['shuffles']} permutations); the majority rate "
        "guesses each order's commonest label." + few
    )


def report_sections(files: Sequence[Path], out_dir: Path) -> list[Section]:
    """One "Belief probes" section per ``probes.json`` (figures written into ``out_dir``)."""
    sections: list[Section] = []
    for index, file in enumerate(sorted(Path(f) for f in files)):
        title = "Belief probes" if len(files) == 1 else f"Belief probes — {file.parent}"
        try:
            results = json.loads(Path(file).read_text(encoding="utf-8"))
            if not isinstance(results, dict) or results.get("kind") != RESULTS_KIND:
                raise ValueError(f"not a {RESULTS_KIND} file")
            missing = [key for key in REQUIRED_KEYS if key not in results]
            if missing:
                raise ValueError(f"key '{missing[0]}' missing (written by an older tomrl analyze probes? run it again)")
        except (OSError, ValueError) as error:
            sections.append(Section(title, [Paragraph(f"{file}: left out, it could not be read: {error}")]))
            continue
        figure = f"probes-{index}.png" if len(files) > 1 else "probes.png"
        plot_probe_layers(Path(out_dir) / figure, results)
        sections.append(Section(title, [
            _setup(results, file),
            Figure(figure, "Probe accuracy by layer (all orders) with 95 % Wilson bands; dashed: the same probe on "
                           "shuffled labels; dotted: the majority rate."),
            _findings(results),
            _best_table(results),
        ]))
    return sections

