"""Models side by side on the same evaluation sets, every accuracy beside the best no-ToM baseline.

    from tomrl.analysis.comparison import EvalSet, compare, to_markdown
    sets = [EvalSet("neutral", "neutral held-out", "stories and words", examples)]
    table = compare(sets, {"base": rows_base, "warm start": rows_warm, "RL": rows_rl})
    print(to_markdown(table))

``tomrl demo`` builds its final table with it (``runs/demo/comparison.md`` / ``.json``). For each
set, and for each order within it, a row gives:

- the best no-ToM baseline on exactly these questions (:func:`tomrl.audit.baseline.no_tom_baseline`:
  per order the better of the best agent-agnostic rule and an agent-blind learner, cross-fitted by
  story and, with ``train``, also fitted on it; chosen per order on these questions, so the column is
  an *upper* estimate of what a shortcut gets);
- each model's strict accuracy with its 95 % Wilson interval;
- chance (a uniform pick among the places the object has been in; for pairs, the product of the
  members' chances) and which models beat the baseline: the model's whole interval lies above both
  the baseline's accuracy and chance (the rules get no pair right by construction, guessing does);
- the change from the second-to-last model to the last (warm start → RL) with a 95 % Newcombe
  interval (treating the two as independent samples, which is conservative for the same
  questions), and whether it is significant (interval above or below zero).

Rows with questions of order >= 2 also give the best partial-ToM rule (one named agent's own
first-order belief, :mod:`tomrl.world.partial`), beside the no-ToM baseline. Sets with questions of
order >= 2 that need nesting (:func:`tomrl.audit.partial.nesting_required_ids`:
no agent the question names has the answer as its own first-order belief) get two more rows: those
questions, and the ones a single agent's first-order belief answers.

Contrast-pair sets (counterfactual pairs, agent swaps) get a second row: *pair* accuracy, both
members right. The two members' gold answers differ, so a rule that ignores the edited event or
the swapped agent cannot get both right unless it happens to read that event.

Model rows come from evaluation samples (``samples.jsonl`` rows: ``id`` and ``correct``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from tomrl.generators.pairs import pair_units  # the contrast pairs of a set (also imported from here)
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


def compare(sets: Sequence[EvalSet], models: Mapping[str, Mapping[str, dict]], train: Sequence[Example] | None = None) -> dict:
    """The comparison as JSON-able rows; ``models``: label -> {example id -> sample row} per set name
    (``models[label][set.name]`` is that set's rows by id); ``train``: the no-ToM baseline's learners
    are also fitted on these questions (e.g. the training data) besides being cross-fitted on each set."""
    from tomrl.analysis.significance import difference_interval
    from tomrl.audit.baseline import no_tom_baseline
    from tomrl.audit.heuristics import is_location_question
    from tomrl.audit.partial import audit_questions
    from tomrl.audit.rules import chance_of
    from tomrl.rewards.answer import answers_match

    labels = list(models)
    rows = []
    for eval_set in sets:
        examples = list(eval_set.examples)
        if not examples:
            continue
        rules = no_tom_baseline(examples, train=train)
        combined = rules.get("all")
        groups: list[tuple[str, list[Example]]] = [("all", examples)]
        orders = sorted({e.order for e in examples if e.order is not None})
        if len(orders) > 1:
            groups += [(f"order {o}", [e for e in examples if e.order == o]) for o in orders]
        chance = {e.id: chance_of(e.story, e.question, e.answer) if is_location_question(e.question) else 0.0 for e in examples}
        audited = {i: q for i, q in audit_questions(examples).items() if q is not None}
        flags = {i: q.nesting_required for i, q in audited.items()}
        for title, wanted in ((NESTING_REQUIRED, True), (PARTIALLY_ANSWERABLE, False)):
            subset = [e for e in examples if flags.get(e.id) is wanted]
            if subset and any(flags.values()):
                groups.append((title, subset))
        for group, members in groups:
            rule = rules.get(str(members[0].order)) if group.startswith("order ") else combined
            rule_acc = _rule_accuracy(rule, members, answers_match) if rule is not None else None
            model_accs = {label: _model_accuracy(models[label].get(eval_set.name, {}), members) for label in labels}
            group_chance = sum(chance[e.id] for e in members) / len(members)
            row = _row(eval_set, group, "item", rule, rule_acc, model_accs, labels, difference_interval, group_chance)
            row["partial"] = _partial_accuracy([e for e in members if e.id in audited], audited, answers_match)
            rows.append(row)
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
            pair_chance = sum(chance[a] * chance[b] for a, b in pairs) / len(pairs)
            row = _row(eval_set, "pairs", "pair", combined, rule_pairs, model_accs, labels, difference_interval, pair_chance)
            row["partial"] = _partial_pair_accuracy(pairs, by_id, audited, answers_match)
            rows.append(row)
    return {"models": labels, "rows": rows}


# Row groups of questions of order >= 2 by whether one named agent's own first-order belief answers them
# (tomrl.audit.partial): accuracy on the first is the one a model cannot earn by tracking what one person saw.
NESTING_REQUIRED = "orders ≥ 2, nesting required"
PARTIALLY_ANSWERABLE = "orders ≥ 2, one agent's belief answers"


def _partial_accuracy(members: Sequence[Example], audited: Mapping, answers_match) -> dict | None:
    """The best partial-ToM rule (one named agent's own first-order belief, :mod:`tomrl.world.partial`) on
    the group's questions of order >= 2, chosen on them: ``{"rule", "n", "value", "low", "high", …}``."""
    if not members:
        return None
    names = list(audited[members[0].id].rule_answers)
    scored = {name: accuracy([answers_match(audited[e.id].rule_answers[name], e.answer) for e in members]) for name in names}
    best = max(names, key=lambda name: scored[name].k)
    return {"rule": best, **scored[best].to_dict()}


def _partial_pair_accuracy(pairs, by_id: Mapping[str, Example], audited: Mapping, answers_match) -> dict | None:
    """The best partial-ToM rule's pair accuracy (both members right) on pairs of order >= 2."""
    units = [pair for pair in pairs if all(i in audited for i in pair)]
    if not units:
        return None
    names = list(audited[units[0][0]].rule_answers)
    scored = {name: accuracy([all(answers_match(audited[i].rule_answers[name], by_id[i].answer) for i in pair) for pair in units])
              for name in names}
    best = max(names, key=lambda name: scored[name].k)
    return {"rule": best, **scored[best].to_dict()}


def _rule_accuracy(rule, members: Sequence[Example], answers_match) -> Accuracy:
    return accuracy([answers_match(rule.answers.get(e.id), e.answer) for e in members])


def _model_accuracy(samples: Mapping[str, dict], members: Sequence[Example]) -> Accuracy:
    return accuracy([bool(samples[e.id]["correct"]) for e in members if e.id in samples])


def _row(eval_set: EvalSet, group: str, unit: str, rule, rule_acc, model_accs, labels, difference_interval, chance: float) -> dict:
    # To beat the baseline a model must also beat a random pick: by construction the rules get no pair and no
    # nesting-required question right, but guessing among the object's places does.
    bar = max(rule_acc.value if rule_acc is not None else 0.0, chance)
    row = {
        "set": eval_set.name,
        "title": eval_set.title,
        "held_out_over": eval_set.held_out_over,
        "group": group,
        "unit": unit,  # "item": questions; "pair": both members of a contrast pair right
        "rule": rule.rule if rule is not None else None,
        "rule_accuracy": rule_acc.to_dict() if rule_acc is not None else None,
        "models": {label: acc.to_dict() for label, acc in model_accs.items()},
        "chance": chance,  # a uniform pick among the object's places (pairs: both members, the product)
        "beats_rule": [label for label, acc in model_accs.items() if acc.n and rule_acc is not None and acc.low > bar + 1e-9],
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
    columns = ["set (held out over)", "group", "n", "chance", "best no-ToM baseline (rules and an agent-blind learner)",
               "best partial-ToM rule (one agent's belief; orders ≥ 2)", *labels, "beats the baseline"]
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
            f"{100 * row['chance']:.1f}" if row.get("chance") is not None else "-",
            rule,
            f"{_cell(row['partial'])} {row['partial']['rule']}" if row.get("partial") else "-",
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
    "Strict scoring, accuracy % [95 % Wilson interval]. The baseline column is the best no-ToM rule or agent-blind "
    "learner (tomrl.audit.baseline: the best agent-agnostic rule of tomrl.audit.rules, or gradient boosting / logistic "
    "regression on features that never read the question's agents, cross-fitted by story), chosen per order on these "
    "very questions, so it over- rather than underestimates what a shortcut gets. 'beats the baseline': the model's "
    "whole interval lies above both the baseline's accuracy and chance (a uniform pick among the places the object has "
    "been in; for pairs, of both members). The partial-ToM column answers a question of order >= 2 with one "
    "named agent's own first-order belief (tomrl.world.partial; the best such rule, chosen on these questions): what a "
    "model gets by tracking what one person saw, without nesting; rows 'nesting required' hold the questions no such "
    "answer gets right. "
    "The last column: the change between the last two models with a 95 % Newcombe interval (independent-"
    "samples interval, conservative for the same questions); 'inconclusive' where it includes zero."
)
