"""Models side by side on the same evaluation sets, every accuracy beside the best no-ToM rule.

    from tomrl.analysis.comparison import EvalSet, compare, to_markdown
    sets = [EvalSet("neutral", "neutral held-out", "stories and words", examples)]
    table = compare(sets, {"base": rows_base, "warm start": rows_warm, "RL": rows_rl})
    print(to_markdown(table))

``tomrl demo`` builds its final table with it (``runs/demo/comparison.md`` / ``.json``). For each
set, and for each order within it, a row gives:

- the best agent-agnostic rule on exactly these questions (:func:`tomrl.audit.rules.best_rules`,
  chosen per order, so the rule column is an *upper* estimate of what a shortcut gets);
- each model's strict accuracy with its 95 % Wilson interval;
- which models beat the rule: the model's whole interval lies above the rule's accuracy;
- the change from the second-to-last model to the last (warm start → RL) with a 95 % Newcombe
  interval (treating the two as independent samples, which is conservative for the same
  questions), and whether it is significant (interval above or below zero).

Contrast-pair sets (counterfactual pairs, agent swaps) get a second row: *pair* accuracy, both
members right. The two members' gold answers differ, so a rule that ignores the edited event or
the swapped agent cannot get both right unless it happens to read that event.

Model rows come from evaluation samples (``samples.jsonl`` rows: ``id`` and ``correct``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from tomrl.schema import Example
from tomrl.stats import Accuracy, accuracy


@dataclass(frozen=True)
class EvalSet:
    """One evaluation set of the comparison and what it is held out over."""

    name: str
    title: str
    held_out_over: str  # what differs from training: "nothing (dev)", "stories and words", "orders", …
    examples: tuple[Example, ...]

    def __init__(self, name: str, title: str, held_out_over: str, examples: Sequence[Example]):
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "title", title)
        object.__setattr__(self, "held_out_over", held_out_over)
        object.__setattr__(self, "examples", tuple(examples))


def pair_units(examples: Sequence[Example]) -> list[tuple[str, str]]:
    """The (member 0 id, member 1 id) of each complete contrast pair in ``examples``."""
    from tomrl.evaluation.benchmarks import pair_key

    members: dict[str, dict[int, str]] = {}
    for example in examples:
        key = pair_key(example)
        if key is None:
            continue
        member = example.meta.get("pair_member", example.meta.get("swap_member"))
        members.setdefault(key, {})[int(member)] = example.id
    return [(pair[0], pair[1]) for pair in members.values() if set(pair) == {0, 1}]


def compare(sets: Sequence[EvalSet], models: Mapping[str, Mapping[str, dict]]) -> dict:
    """The comparison as JSON-able rows; ``models``: label -> {example id -> sample row} per set name
    (``models[label][set.name]`` is that set's rows by id)."""
    from tomrl.analysis.significance import difference_interval
    from tomrl.audit.rules import best_rules
    from tomrl.rewards.answer import answers_match

    labels = list(models)
    rows = []
    for eval_set in sets:
        examples = list(eval_set.examples)
        if not examples:
            continue
        rules = best_rules(examples)
        combined = rules.get("all")
        groups: list[tuple[str, list[Example]]] = [("all", examples)]
        orders = sorted({e.order for e in examples if e.order is not None})
        if len(orders) > 1:
            groups += [(f"order {o}", [e for e in examples if e.order == o]) for o in orders]
        for group, members in groups:
            rule = combined if group == "all" else rules.get(str(members[0].order))
            rule_acc = _rule_accuracy(rule, members, answers_match) if rule is not None else None
            model_accs = {label: _model_accuracy(models[label].get(eval_set.name, {}), members) for label in labels}
            rows.append(_row(eval_set, group, "item", rule, rule_acc, model_accs, labels, difference_interval))
        pairs = pair_units(examples)
        if pairs:
            by_id = {e.id: e for e in examples}
            rule_pairs = None
            if combined is not None:
                rule_pairs = accuracy([all(answers_match(combined.answers.get(i), by_id[i].answer) for i in pair) for pair in pairs])
            model_accs = {}
            for label in labels:
                samples = models[label].get(eval_set.name, {})
                answered = [pair for pair in pairs if all(i in samples for i in pair)]
                model_accs[label] = accuracy([all(bool(samples[i]["correct"]) for i in pair) for pair in answered])
            rows.append(_row(eval_set, "pairs", "pair", combined, rule_pairs, model_accs, labels, difference_interval))
    return {"models": labels, "rows": rows}


def _rule_accuracy(rule, members: Sequence[Example], answers_match) -> Accuracy:
    return accuracy([answers_match(rule.answers.get(e.id), e.answer) for e in members])


def _model_accuracy(samples: Mapping[str, dict], members: Sequence[Example]) -> Accuracy:
    return accuracy([bool(samples[e.id]["correct"]) for e in members if e.id in samples])


def _row(eval_set: EvalSet, group: str, unit: str, rule, rule_acc, model_accs, labels, difference_interval) -> dict:
    row = {
        "set": eval_set.name,
        "title": eval_set.title,
        "held_out_over": eval_set.held_out_over,
        "group": group,
        "unit": unit,  # "item": questions; "pair": both members of a contrast pair right
        "rule": rule.rule if rule is not None else None,
        "rule_accuracy": rule_acc.to_dict() if rule_acc is not None else None,
        "models": {label: acc.to_dict() for label, acc in model_accs.items()},
        "beats_rule": [label for label, acc in model_accs.items() if acc.n and rule_acc is not None and acc.low > rule_acc.value + 1e-9],
    }
    if len(labels) >= 2:
        before, after = model_accs[labels[-2]], model_accs[labels[-1]]
        if before.n and after.n:
            diff = difference_interval(after, before)
            row["change"] = {"from": labels[-2], "to": labels[-1], **diff.to_dict(),
                             "verdict": "gain" if diff.above_zero else ("loss" if diff.below_zero else "inconclusive")}
    return row


def _cell(value: dict | None) -> str:
    if not value or not value.get("n"):
        return "-"
    return f"{100 * value['value']:.1f} [{100 * value['low']:.1f}, {100 * value['high']:.1f}]"


def table_rows(comparison: dict) -> tuple[list[str], list[list[str]]]:
    """Column names and cell texts of the comparison (shared by Markdown and the terminal)."""
    labels = comparison["models"]
    columns = ["set (held out over)", "group", "n", "best no-ToM rule", *labels, "beats the rule"]
    change_title = f"{labels[-1]} − {labels[-2]}" if len(labels) >= 2 else None
    if change_title:
        columns.append(change_title)
    cells = []
    for row in comparison["rows"]:
        n = max((m.get("n", 0) for m in row["models"].values()), default=0)
        rule = f"{_cell(row['rule_accuracy'])} {row['rule'] or ''}".strip() if row["rule_accuracy"] else "-"
        line = [
            f"{row['title']} ({row['held_out_over']})" if row["group"] == "all" else "",
            row["group"] if row["unit"] == "item" else "pairs: both right",
            str(n),
            rule,
            *[_cell(row["models"][label]) for label in labels],
            ", ".join(row["beats_rule"]) or "none",
        ]
        if change_title:
            change = row.get("change")
            line.append(f"{100 * change['value']:+.1f} [{100 * change['low']:+.1f}, {100 * change['high']:+.1f}] {change['verdict']}" if change else "-")
        cells.append(line)
    return columns, cells


def to_markdown(comparison: dict, caption: str = "") -> str:
    columns, cells = table_rows(comparison)
    lines = [caption, ""] if caption else []
    lines.append("| " + " | ".join(columns) + " |")
    lines.append("|" + "---|" * len(columns))
    lines += ["| " + " | ".join(line) + " |" for line in cells]
    lines += ["", NOTE]
    return "\n".join(lines) + "\n"


NOTE = (
    "Strict scoring, accuracy % [95 % Wilson interval]. The rule column is the best agent-agnostic rule "
    "(tomrl.audit.rules), chosen per order on these very questions, so it over- rather than underestimates "
    "what a shortcut gets. 'beats the rule': the model's whole interval lies above the rule's accuracy. "
    "The last column: the change between the last two models with a 95 % Newcombe interval (independent-"
    "samples interval, conservative for the same questions); 'inconclusive' where it includes zero."
)
