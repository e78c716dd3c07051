"""Trace interventions as tables and a plot: the console table and the report's section.

    from tomrl.analysis.interventions_report import console_table, report_sections
    Console().print(console_table(summary))                       # summary: interventions.json, loaded
    sections = report_sections([Path("runs/demo/analysis/interventions/interventions.json")], Path("report"))

``report_sections`` (called by ``tomrl report`` for every ``**/interventions.json``) gives one
section: what each file was computed on, the verdict per model, a table per model × condition ×
order with 95 % Wilson intervals, and a bar plot of the answer-change rates (PNG in ``out_dir``).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Mapping, Sequence

from tomrl.analysis.document import Figure, Paragraph, Section, Table
from tomrl.io import BadInputError, loads_json

SECTION_TITLE = "Trace interventions: does the answer follow the reasoning?"
PLOTTED = ("falsified", "falsified_asked", "empty", "other_story")
SHORT = {"own": "own (control)", "falsified": "falsified belief", "falsified_asked": "falsified asked belief",
         "empty": "empty trace", "other_story": "other story's trace"}
EXPLANATION = (
    "Each model wrote its own reasoning for each held-out question; the reasoning was then kept (own, the control), "
    "had one belief statement the oracle judges true replaced by a false one (falsified; 'asked' when it was the belief "
    "the question asks about), emptied, or replaced by another story's reasoning, and the answer was generated after it "
    "(greedy). 'Changed' is the share of answers that differ from the control's answer (for the control itself: from "
    "the model's free answer). An answer that does not move when its supporting belief is falsified is not carried by "
    "the reasoning. Intervals are 95 % Wilson; n/a counts questions whose trace had no checkable true belief."
)


def _pct(rate: Mapping[str, Any] | None) -> str:
    if not rate or not rate.get("n"):
        return "n/a"
    return f"{100 * rate['value']:.1f} % [{100 * rate['low']:.1f}, {100 * rate['high']:.1f}]"


def load_summary(path: Path) -> dict[str, Any]:
    summary = loads_json(path.read_text(encoding="utf-8"), str(path))
    if not isinstance(summary, dict) or summary.get("kind") != "tomrl trace interventions" or not isinstance(summary.get("models"), dict):
        raise BadInputError(f"{path}: not an interventions.json written by tomrl analyze interventions")
    return summary


def table_rows(summary: Mapping[str, Any], by_order: bool = True) -> list[list[str]]:
    """model, condition, order, n, n/a, changed, accuracy — overall first, then each order."""
    rows = []
    for label, entry in summary["models"].items():
        for condition, cell in entry["conditions"].items():
            groups = [("all", cell["overall"])] + (list(cell["by_order"].items()) if by_order else [])
            for order, values in groups:
                rows.append([label, SHORT.get(condition, condition), order, str(values["n"]), str(values["n_not_applicable"]),
                             _pct(values["changed"]), _pct(values["accuracy"])])
    return rows


COLUMNS = ["model", "condition", "order", "n", "n/a", "answer changed", "accuracy"]


def console_table(summary: Mapping[str, Any]):
    """A rich table of every model and condition, overall only (the orders are in interventions.json)."""
    from rich.table import Table as RichTable

    computed = summary["computed_on"]
    table = RichTable(title=f"Trace interventions on {computed['n_selected']} questions of {computed['data']} (seed {computed['seed']})")
    for column in COLUMNS:
        table.add_column(column, justify="right" if column in ("n", "n/a") else "left")
    for row in table_rows(summary, by_order=False):
        table.add_row(*row)
    return table


def plot_change_rates(path: Path, summaries: Sequence[tuple[str, Mapping[str, Any]]]) -> Path:
    """Grouped bars: answer-change rate per condition (x) for each model (bars), 95 % Wilson error bars."""
    from matplotlib.figure import Figure as MplFigure

    from tomrl.analysis.plots import _save

    series: dict[str, dict[str, Mapping[str, Any]]] = {}
    for prefix, summary in summaries:
        for label, entry in summary["models"].items():
            name = f"{prefix}{label}"
            series[name] = {c: entry["conditions"][c]["overall"]["changed"] for c in PLOTTED if c in entry["conditions"]}
    conditions = [c for c in PLOTTED if any((rates.get(c) or {}).get("n") for rates in series.values())]
    if not conditions:
        raise ValueError("nothing to plot: no answer-change rate with n > 0")
    figure = MplFigure(figsize=(max(6.0, 0.5 * len(conditions) * len(series) + 3), 4), layout="constrained")
    ax = figure.subplots()
    width = 0.8 / len(series)
    for index, (name, rates) in enumerate(series.items()):
        present = [c for c in conditions if (rates.get(c) or {}).get("n")]
        xs = [conditions.index(c) + (index - (len(series) - 1) / 2) * width for c in present]
        values = [100 * rates[c]["value"] for c in present]
        errors = [[max(0.0, 100 * (rates[c]["value"] - rates[c]["low"])) for c in present],
                  [max(0.0, 100 * (rates[c]["high"] - rates[c]["value"])) for c in present]]
        ax.bar(xs, values, width, yerr=errors, capsize=3, label=name, alpha=0.85)
    ax.set_xticks(range(len(conditions)), [SHORT[c] for c in conditions])
    ax.set_ylabel("answers changed vs own trace (%)")
    ax.set_ylim(0, 100)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("Answer-change rate under trace interventions (95 % Wilson intervals)", fontsize=10)
    return _save(figure, path)


def report_sections(files: list[Path], out_dir: Path) -> list[Section]:
    """One section for all ``interventions.json`` files: inputs, verdicts, tables, the change-rate plot."""
    if not files:
        return []
    summaries = [(Path(f), load_summary(Path(f))) for f in files]
    section = Section(SECTION_TITLE, [Paragraph(EXPLANATION)])
    several = len(summaries) > 1
    labelled = []
    for path, summary in summaries:
        computed = summary["computed_on"]
        prefix = f"{path.parent.name}/" if several else ""
        labelled.append((prefix, summary))
        settings = summary.get("settings", {})
        section.blocks.append(Paragraph(
            f"{path}: {computed['n_selected']} of {computed['n_available']} questions of {computed['data']} "
            f"(splits {', '.join(f'{k} {v}' for k, v in computed['splits'].items())}; seed {computed['seed']}); "
            f"reasoning budget {settings.get('max_new_tokens')} tokens, answer budget {settings.get('answer_tokens')}."))
        for label, entry in summary["models"].items():
            incomplete = "" if entry.get("complete", True) else " (incomplete: the run was stopped before every row was generated)"
            section.blocks.append(Paragraph(f"{prefix}{label} ({entry['path']}): {entry['verdict']}{incomplete}"))
        section.blocks.append(Table(COLUMNS, table_rows(summary), caption=f"Trace interventions by model, condition and order ({path})"))
    try:
        digest = hashlib.sha256("|".join(str(p) for p, _ in summaries).encode()).hexdigest()[:8]
        png = plot_change_rates(Path(out_dir) / f"interventions-{digest}.png", labelled)
        section.blocks.append(Figure(png.name, "Answers changed by each intervention, against the model's own trace (95 % Wilson intervals)"))
    except ValueError as nothing:
        section.blocks.append(Paragraph(f"No plot: {nothing}."))
    return [section]
