"""Paper A's Table 1 layout in Markdown, with tomrl's results and the paper's own numbers.

    tomrl eval --table runs/eval/smollm2-135m-1a2b3c4d runs/eval/qwen0.5b-…   # print the table of finished runs
    from tomrl.evaluation.table import markdown_table
    print(markdown_table([json.load(open("results.json"))]))

Columns are Paper A's five (Hi-ToM, 4th-order, ToMi, ExploreToM, ExploreToM infilled). Each
run gives two rows, scored with Paper A's evaluation rule (``paper_eval``: last answer tag,
suffix match, no format check; comparable with the paper) and with tomrl's ``strict`` rule; each
cell is accuracy in % with its 95 % interval and n. Where the run's model is one of the paper's
(by name, or ``paper_row`` in the config for a trained checkpoint), the paper's row follows.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from tomrl.evaluation.results import results_answered

COLUMNS = ("Hi-ToM", "4th-order", "ToMi", "ExploreToM", "ExploreToM infilled")

# Paper A (arXiv 2504.01698), Table 1: accuracy in %, columns as COLUMNS. Full test sets
# (600, 600, 5,994, 1,066, 1,066), one sample at temperature 0.6, top-p 0.95; no intervals given.
PAPER_A_TABLE1: dict[str, tuple[float, float, float, float, float]] = {
    "GPT-4o": (69.00, 46.17, 61.96, 67.35, 62.48),
    "DeepSeek-v3": (70.17, 58.67, 57.17, 65.01, 64.73),
    "Qwen2.5-0.5B-Instruct": (30.33, 23.83, 29.38, 60.51, 54.97),
    "Qwen2.5-7B-Instruct": (52.17, 28.83, 54.65, 59.38, 45.40),
    "0.5B + RL": (70.83, 85.83, 54.25, 93.34, 72.61),
    "1.5B + RL": (79.17, 89.33, 75.89, 90.06, 70.73),
    "3B + RL": (81.17, 88.17, 80.18, 93.43, 78.14),
    "7B + RL": (83.33, 82.83, 73.99, 91.65, 74.77),
    "7B-1M + RL": (84.50, 94.50, 81.08, 92.31, 77.20),
}

SCORING_LABELS = {"paper_eval": "paper scoring", "strict": "strict"}


def _simplify(name: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "", name.lower())


def paper_row_for(model: str, override: str | None = None) -> str | None:
    """The paper's row for ``model``: ``override`` if given, else a name match (``Qwen/Qwen2.5-0.5B-Instruct``)."""
    if override is not None:
        if override not in PAPER_A_TABLE1:
            raise ValueError(f"paper_row {override!r} is not a row of Paper A's Table 1: {', '.join(PAPER_A_TABLE1)}")
        return override
    tail = _simplify(model.rstrip("/").split("/")[-1])
    for row in PAPER_A_TABLE1:
        if _simplify(row) == tail:
            return row
    return None


def _cell(summary: dict[str, Any] | None) -> str:
    if summary is None or summary["n"] == 0:
        return "–"
    return f"{100 * summary['value']:.1f} [{100 * summary['low']:.1f}, {100 * summary['high']:.1f}] n={summary['n']}"


def result_rows(results: dict[str, Any]) -> list[list[str]]:
    """Table rows (paper scoring, strict, then the paper's row if the model matches) for one run."""
    by_column: dict[str, dict[str, Any]] = {}
    for bench in results["benchmarks"].values():
        if bench.get("paper_column"):
            by_column[bench["paper_column"]] = bench
    model = results["model"]
    rows = []
    for scheme in ("paper_eval", "strict"):
        cells = []
        for column in COLUMNS:
            bench = by_column.get(column)
            cells.append(_cell(bench["overall"][scheme]["accuracy"] if bench else None))
        rows.append([f"{model} (tomrl, {SCORING_LABELS[scheme]})", *cells])
    paper_row = results.get("paper_row")
    if paper_row:
        rows.append([f"{paper_row} (Paper A)", *[f"{v:.2f}" for v in PAPER_A_TABLE1[paper_row]]])
    return rows


def markdown_table(results_list: Sequence[dict[str, Any]], all_paper_rows: bool = False) -> str:
    """Markdown table in Table 1's layout for one or more runs' results; a run without one answered question
    (a failed evaluation) is left out, with a note."""
    failed = [results for results in results_list if results_answered(results) == 0]
    results_list = [results for results in results_list if results_answered(results) > 0]
    header = ["Model", *COLUMNS]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    shown_paper_rows = set()
    for results in results_list:
        for row in result_rows(results):
            lines.append("| " + " | ".join(row) + " |")
        if results.get("paper_row"):
            shown_paper_rows.add(results["paper_row"])
    if all_paper_rows:
        for name, values in PAPER_A_TABLE1.items():
            if name not in shown_paper_rows:
                lines.append("| " + " | ".join([f"{name} (Paper A)", *[f"{v:.2f}" for v in values]]) + " |")
    notes = [
        "",
        "Cells: accuracy % [95 % interval] n=questions. 'paper scoring' = Paper A's evaluation rule (last "
        "<answer> tag, suffix match, no format check); 'strict' = tomrl's rule (well-formed output, exact "
        "match after normalisation). Paper A rows: the paper's Table 1 (full sets, no intervals).",
    ]
    for results in failed:
        notes.append(f"{results.get('model', '?')}: no answered question (a failed evaluation, or every benchmark skipped); left out of the table.")
    for results in results_list:
        limited = results.get("config", {}).get("limit")
        sampling = results.get("sampling", {})
        notes.append(
            f"{results['model']}: engine {results.get('engine', {}).get('engine', '?')}, "
            f"temperature {sampling.get('temperature')}, top-p {sampling.get('top_p')}, "
            f"max_new_tokens {sampling.get('max_new_tokens')}, seed {results.get('seed')}"
            + (f", limit {limited} per benchmark" if limited else "")
            + "."
        )
    return "\n".join(lines + notes) + "\n"


def _pct(group: dict[str, Any], scheme: str, key: str) -> str:  # "–" where the benchmark has no such scheme
    summary = group.get(scheme, {}).get(key)
    if summary is None or summary["n"] == 0:
        return "–"
    return f"{100 * summary['value']:.1f} [{100 * summary['low']:.1f}, {100 * summary['high']:.1f}]"


def _rule_cell(rule: dict[str, Any] | None) -> str:
    if not rule or rule.get("accuracy") is None:
        return "– (no location question)" if rule else "–"
    accuracy = rule["accuracy"]
    if accuracy["n"] == 0:
        return "–"
    return f"{100 * accuracy['value']:.1f} [{100 * accuracy['low']:.1f}, {100 * accuracy['high']:.1f}] {rule['rule']}"


def tasks_markdown(results: dict[str, Any]) -> list[str]:
    """Recipe tasks (``recipe:NAME:test``, Paper B's 12 for its recipes): in distribution or held out, accuracy
    with its interval and the best no-ToM baseline (rules and an agent-blind learner) on the same questions; absent tasks with how to obtain their data."""
    tasks = {name: bench for name, bench in results["benchmarks"].items() if "held_out" in bench}
    skipped = {name: why for name, why in results.get("skipped", {}).items() if ":" in name}
    if not tasks and not skipped:
        return []
    lines = [
        "", "## Tasks", "",
        "| Task | | n | strict % [95 % CI] | paper scoring % [95 % CI] | best no-ToM baseline % [95 % CI] (rule or learner) |",
        "|---|---|---|---|---|---|",
    ]
    for name, bench in tasks.items():
        overall, metric = bench["overall"], bench.get("metric", "accuracy")
        n = f"{overall['n']}" + ("" if bench.get("complete", True) else f" of {bench['n_selected']}")
        kind = "held out" if bench["held_out"] else "in distribution"
        rule = (bench.get("no_tom_rule") or {}).get("overall")
        lines.append(f"| {bench.get('title', name)} | {kind} | {n} | {_pct(overall, 'strict', metric)} | "
                     f"{_pct(overall, 'paper_eval', metric)} | {_rule_cell(rule)} |")
    for name, why in skipped.items():
        lines.append(f"| {name} | absent | 0 | – | – | – |")
    for name, why in skipped.items():
        lines += ["", f"{name}: not evaluated: {why}"]
    lines += ["", "The rule is the best agent-agnostic rule of tomrl.audit.rules chosen per order on these very questions "
              "(an upper estimate of what a shortcut gets); it reads location questions only, others count as wrong."]
    return lines


def summary_markdown(results: dict[str, Any]) -> str:
    """Every benchmark of one run, overall and per order / nesting (nesting required or partially answerable) /
    question type, its metric under both house schemes."""
    lines = [
        f"## {results['model']}: all benchmarks",
        "",
        "| Benchmark | n | paper scoring % [95 % CI] | strict % [95 % CI] | strict format failures % | mean tokens | tokens/s |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, bench in results["benchmarks"].items():
        overall = bench["overall"]
        n = f"{overall['n']}" + ("" if bench.get("complete", True) else f" of {bench['n_selected']}")
        speed, metric = f"{bench['tokens_per_s']:.0f}" if bench.get("tokens_per_s") else "–", bench.get("metric", "accuracy")
        lines.append(
            f"| {name} | {n} | {_pct(overall, 'paper_eval', metric)} | {_pct(overall, 'strict', metric)} | "
            f"{_pct(overall, 'strict', 'format_failure')} | {overall['mean_response_tokens']:.0f} | {speed} |"
        )
    paired = {name: bench["pairs"] for name, bench in results["benchmarks"].items() if bench.get("pairs")}
    if paired:
        lines += [
            "",
            "### Contrast pairs (both members of a pair must be right; an unchanged answer is a shortcut's signature)",
            "",
            "| Benchmark | kind | pairs | strict item % | strict pair % [95 % CI] | paper pair % [95 % CI] | strict answer unchanged % |",
            "|---|---|---|---|---|---|---|",
        ]
        for name, pairs in paired.items():
            lines.append(
                f"| {name} | {pairs['kind']} | {pairs['n_pairs']} | {_pct(pairs, 'strict', 'item_accuracy')} | {_pct(pairs, 'strict', 'pair_accuracy')} | "
                f"{_pct(pairs, 'paper_eval', 'pair_accuracy')} | {_pct(pairs, 'strict', 'answer_unchanged')} |"
            )
    lines += tasks_markdown(results)
    for name, bench in results["benchmarks"].items():
        metric = bench.get("metric", "accuracy")
        rules = bench.get("no_tom_rule") or {}
        for group in ("by_order", "by_nesting", "by_question_type"):  # by_nesting: orders >= 2, tomrl.audit.partial
            breakdown = bench.get(group)
            if not breakdown or len(breakdown) < 2 and group == "by_question_type":
                continue
            label = group.removeprefix("by_").replace("_", " ")
            rule_header = (" best no-ToM baseline % [95 % CI] (rule or learner) |", "---|") if rules else ("", "")
            lines += ["", f"### {name} by {label}", "",
                      f"| {label} | n | paper scoring % [95 % CI] | strict % [95 % CI] | strict format failures % |{rule_header[0]}",
                      "|---|---|---|---|---|" + rule_header[1]]
            for key, summary in breakdown.items():
                rule = f" {_rule_cell(rules.get(group, {}).get(key))} |" if rules else ""
                lines.append(
                    f"| {key} | {summary['n']} | {_pct(summary, 'paper_eval', metric)} | {_pct(summary, 'strict', metric)} | "
                    f"{_pct(summary, 'strict', 'format_failure')} |{rule}"
                )
    if results.get("skipped"):
        lines += ["", "Skipped (data not present): " + ", ".join(sorted(results["skipped"])) + "."]
    return "\n".join(lines) + "\n"
