"""PNG plots for the report: training curves, accuracy by order, the generalization matrix.

    plot_panels("curves.png", [Panel("Response length", "tokens", [Curve("mean", steps, lengths)])])
    plot_accuracy_by_order("orders.png", {"base": {0: acc0, 1: acc1}, "RL": {0: …, 1: …}})
    plot_generalization_matrix("matrix.png", rows, columns, cells, in_distribution={("O4", "hitom o4")})

Functions take plain data (steps, values, :class:`tomrl.stats.Accuracy`) and write one PNG each,
atomically. Accuracies are drawn with their 95 % intervals (error bars or shaded bands). They use
matplotlib's object API (``Figure``, no pyplot), so no global backend or state is touched and the
Agg renderer is used for PNG.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Collection, Mapping, Sequence

from tomrl.io import atomic_open
from tomrl.stats import Accuracy

_DPI = 110


@dataclass(frozen=True)
class Curve:
    """One line of a panel; ``low``/``high`` draw a shaded band (an interval or a min–max range)."""

    label: str
    steps: Sequence[float]
    values: Sequence[float | None]
    low: Sequence[float | None] | None = None
    high: Sequence[float | None] | None = None
    style: str = "-"


@dataclass(frozen=True)
class Panel:
    title: str
    ylabel: str
    curves: Sequence[Curve]
    percent: bool = False  # values are fractions shown as %


def accuracy_curve(label: str, steps: Sequence[float], accuracies: Sequence[Accuracy], style: str = "-o") -> Curve:
    """A curve of accuracies over steps, banded by their intervals (points with n = 0 skipped)."""
    points = [(s, a) for s, a in zip(steps, accuracies) if a.n > 0]
    return Curve(label, [s for s, _ in points], [a.value for _, a in points],
                 [a.low for _, a in points], [a.high for _, a in points], style)


def _save(figure, path: str | Path) -> Path:
    path = Path(path)
    buffer = io.BytesIO()
    # No software/date metadata: the same data gives the same bytes.
    figure.savefig(buffer, format="png", dpi=_DPI, bbox_inches="tight", metadata={"Software": None})
    with atomic_open(path, "wb") as handle:
        handle.write(buffer.getvalue())
    return path


def _present(steps, *series):
    """Indices where every series has a finite value."""
    keep = []
    for i in range(len(steps)):
        values = [s[i] for s in series if s is not None]
        if all(v is not None and math.isfinite(v) for v in values):
            keep.append(i)
    return keep


def plot_panels(path: str | Path, panels: Sequence[Panel], title: str = "") -> Path:
    """Stacked panels over training steps that share the x axis."""
    from matplotlib.figure import Figure

    if not panels:
        raise ValueError("nothing to plot: no panels")
    figure = Figure(figsize=(9, 2.4 * len(panels) + 0.4), layout="constrained")
    axes = figure.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    for ax, panel in zip(axes, panels):
        scale = 100 if panel.percent else 1
        for curve in panel.curves:
            keep = _present(curve.steps, curve.values)
            xs = [curve.steps[i] for i in keep]
            line = ax.plot(xs, [curve.values[i] * scale for i in keep], curve.style, label=curve.label,
                           markersize=3, linewidth=1.4)[0]
            if curve.low is not None and curve.high is not None:
                band = _present(curve.steps, curve.low, curve.high)
                ax.fill_between([curve.steps[i] for i in band], [curve.low[i] * scale for i in band],
                                [curve.high[i] * scale for i in band], color=line.get_color(), alpha=0.15, linewidth=0)
        ax.set_title(panel.title, fontsize=10, loc="left")
        ax.set_ylabel(panel.ylabel + (" (%)" if panel.percent else ""))
        ax.grid(alpha=0.3)
        if len(panel.curves) > 1:
            ax.legend(fontsize=8, loc="best", ncol=min(4, len(panel.curves)))
    axes[-1].set_xlabel("training step")
    if title:
        figure.suptitle(title, fontsize=11)
    return _save(figure, path)


def plot_accuracy_by_order(
    path: str | Path,
    models: Mapping[str, Mapping[int, Accuracy]],
    title: str = "",
    reference: Mapping[int, float] | None = None,
    reference_label: str = "best no-ToM rule",
) -> Path:
    """Grouped bars: accuracy by order of belief for each model, with 95 % Wilson intervals.

    ``reference`` (order → accuracy, 0-1), e.g. the best no-ToM rule on the same questions, is
    drawn over the bars as a dashed black line, so a bar below it is beaten by a shortcut.
    """
    from matplotlib.figure import Figure

    orders = sorted({o for by_order in models.values() for o, acc in by_order.items() if acc.n > 0})
    if not orders or not models:
        raise ValueError("nothing to plot: no accuracy by order")
    figure = Figure(figsize=(max(6.0, 0.6 * len(orders) * len(models) + 3), 4), layout="constrained")
    ax = figure.subplots()
    width = 0.8 / len(models)
    for index, (label, by_order) in enumerate(models.items()):
        present = [o for o in orders if o in by_order and by_order[o].n > 0]
        xs = [orders.index(o) + (index - (len(models) - 1) / 2) * width for o in present]
        values = [100 * by_order[o].value for o in present]
        # Floating point can put a Wilson bound a hair inside the estimate (high 0.9999… at 100 %).
        errors = [[max(0.0, 100 * (by_order[o].value - by_order[o].low)) for o in present],
                  [max(0.0, 100 * (by_order[o].high - by_order[o].value)) for o in present]]
        ax.bar(xs, values, width, yerr=errors, capsize=3, label=label, alpha=0.85)
    if reference:
        marked = [o for o in orders if o in reference]
        ax.plot([orders.index(o) for o in marked], [100 * reference[o] for o in marked], "k--D", markersize=5,
                linewidth=1.2, label=reference_label)
    ax.set_xticks(range(len(orders)), [f"order {o}" for o in orders])
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(0, 100)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title or "Accuracy by order of belief (95 % Wilson intervals)", fontsize=10)
    return _save(figure, path)


def plot_generalization_matrix(
    path: str | Path,
    rows: Sequence[str],
    columns: Sequence[str],
    cells: Mapping[tuple[str, str], Accuracy],
    in_distribution: Collection[tuple[str, str]] = (),
    title: str = "",
) -> Path:
    """Heatmap of accuracy, training mixture (rows) × evaluation task (columns).

    Each cell shows the accuracy and its 95 % interval; in-distribution cells (the mixture trained
    on that task) get a thick border and an "ID" mark, so held-out cells stand apart.
    """
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    if not rows or not columns:
        raise ValueError("nothing to plot: the matrix has no rows or columns")
    grid = [[(100 * cells[(r, c)].value if (r, c) in cells and cells[(r, c)].n > 0 else math.nan) for c in columns]
            for r in rows]
    figure = Figure(figsize=(max(5.0, 1.5 * len(columns) + 2.5), max(2.5, 0.75 * len(rows) + 1.8)), layout="constrained")
    ax = figure.subplots()
    image = ax.imshow(grid, cmap="viridis", vmin=0, vmax=100, aspect="auto")
    figure.colorbar(image, ax=ax, label="accuracy (%)")
    for i, r in enumerate(rows):
        for j, c in enumerate(columns):
            acc = cells.get((r, c))
            if acc is None or acc.n == 0:
                ax.text(j, i, "–", ha="center", va="center", color="grey")
                continue
            text = f"{100 * acc.value:.1f}\n[{100 * acc.low:.0f}, {100 * acc.high:.0f}]"
            if (r, c) in in_distribution:
                text += "\nID"
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="black", linewidth=2.5))
            ax.text(j, i, text, ha="center", va="center", fontsize=8, color="white" if acc.value < 0.6 else "black")
    ax.set_xticks(range(len(columns)), columns, rotation=30, ha="right")
    ax.set_yticks(range(len(rows)), rows)
    ax.set_xlabel("evaluation task")
    ax.set_ylabel("training mixture")
    ax.set_title(title or "Generalization matrix (ID = trained on that task; others held out)", fontsize=10)
    return _save(figure, path)
