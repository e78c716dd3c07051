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
  questions), and whether it is significant (interval above or below zero). That change is a
  training effect (``training_effect=True``, the default), and the interval covers question
  sampling only: a model given as :class:`TrainingSeeds` (one model per training seed) is pooled
  over its seeds and the change is also given per seed, with their range and sd; a gain or loss is
  then claimed only when every seed's change has its sign ("inconclusive: training seeds disagree
  (…)" otherwise). A model given once is one training seed, and the change says so
  (:data:`tomrl.analysis.significance.ONE_TRAINING_SEED`).

Rows with questions of order >= 2 also give the best partial-ToM rule (one named agent's own
first-order belief, :mod:`tomrl.world.partial`), beside the no-ToM baseline. Sets with questions of
order >= 2 that need nesting (:func:`tomrl.audit.partial.nesting_required_ids`:
no agent the question names has the answer as its own first-order belief) get two more rows: those
questions, and the ones a single agent's first-order belief answers.

Contrast-pair sets (counterfactual pairs, agent swaps) get a second row: *pair* accuracy, both
members right. The two members' gold answers differ, so a rule that ignores the edited event or
the swapped agent cannot get both right unless it happens to read that event.

Model rows come from evaluation samples (``samples.jsonl`` rows: ``id`` and ``correct``).

    compare(sets, {"warm start": TrainingSeeds({0: rows_w0, 1: rows_w1}), "RL": TrainingSeeds({0: rows_r0, 1: rows_r1})})
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence, Union

from tomrl.analysis.significance import ONE_TRAINING_SEED, SeedEffects, difference_interval, training_effect_verdict
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


@dataclass(frozen=True)
class TrainingSeeds:
    """One model trained with several seeds: training seed -> its rows ({set name: {example id: sample row}})."""

    by_seed: Mapping[object, Mapping[str, Mapping[str, dict]]]


ModelRows = Union[Mapping[str, Mapping[str, dict]], TrainingSeeds]
ONE_RUN = "one run"  # the seed name of a model given once (its seed is not known here)


def _by_seed(model: ModelRows) -> dict[str, Mapping[str, Mapping[str, dict]]]:
    """A model's rows per training seed; a model given once is one run of one seed (:data:`ONE_RUN` names it)."""
    if isinstance(model, TrainingSeeds):
        if not model.by_seed:
            raise ValueError("TrainingSeeds needs at least one seed")
        return {str(seed): rows for seed, rows in model.by_seed.items()}
    return {ONE_RUN: model}


def compare(sets: Sequence[EvalSet], models: Mapping[str, ModelRows], train: Sequence[Example] | None = None,
            training_effect: bool = True) -> dict:
    """The comparison as JSON-able rows; ``models``: label -> {example id -> sample row} per set name
    (``models[label][set.name]`` is that set's rows by id), or a :class:`TrainingSeeds` of such rows
    (pooled in the model's column, and the change computed per seed); ``train``: the no-ToM baseline's
    learners are also fitted on these questions (e.g. the training data) besides being cross-fitted on
    each set; ``training_effect``: the last two models differ by training (warm start → RL, base →
    trained), so their change carries the spread over training seeds, or the note that one seed does
    not measure it; False for models that differ otherwise (two base models)."""
    from tomrl.audit.baseline import no_tom_baseline
    from tomrl.audit.heuristics import is_location_question
    from tomrl.audit.partial import audit_questions
    from tomrl.audit.rules import chance_of
    from tomrl.rewards.answer import answers_match

    labels = list(models)
    seeds = {label: _by_seed(models[label]) for label in labels}
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
            per_seed = {label: {seed: _model_flags(rows.get(eval_set.name, {}), members) for seed, rows in by_seed.items()}
                        for label, by_seed in seeds.items()}
            group_chance = sum(chance[e.id] for e in members) / len(members)
            row = _row(eval_set, group, "item", rule, rule_acc, per_seed, labels, difference_interval, group_chance,
                       training_effect)
            row["partial"] = _partial_accuracy([e for e in members if e.id in audited], audited, answers_match)
            rows.append(row)
        pairs = pair_units(examples)
        if pairs:
            by_id = {e.id: e for e in examples}
            rule_pairs = None
            if combined is not None:
                rule_pairs = accuracy([all(answers_match(combined.answers.get(i), by_id[i].answer) for i in pair) for pair in pairs])
            per_seed = {label: {seed: _pair_flags(rows.get(eval_set.name, {}), pairs) for seed, rows in by_seed.items()}
                        for label, by_seed in seeds.items()}
            pair_chance = sum(chance[a] * chance[b] for a, b in pairs) / len(pairs)
            row = _row(eval_set, "pairs", "pair", combined, rule_pairs, per_seed, labels, difference_interval, pair_chance,
                       training_effect)
            row["partial"] = _partial_pair_accuracy(pairs, by_id, audited, answers_match)
            rows.append(row)
    return {"models": labels, "rows": rows, "training_effect": training_effect,
            "training_seeds": {label: list(models[label].by_seed) if isinstance(models[label], TrainingSeeds) else None
                               for label in labels}}


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


def _model_flags(samples: Mapping[str, dict], members: Sequence[Example]) -> list[bool]:
    return [bool(samples[e.id]["correct"]) for e in members if e.id in samples]


def _pair_flags(samples: Mapping[str, dict], pairs) -> list[bool]:
    """Both members right, for every pair whose two members were answered."""
    return [all(bool(samples[i]["correct"]) for i in pair) for pair in pairs if all(i in samples for i in pair)]


def _seed_changes(before: Mapping[str, list[bool]], after: Mapping[str, list[bool]]) -> dict[str, float]:
    """The change after − before per training seed: seeds paired by name when both models have several,
    else every seed of the one against the single other."""
    def share(flags: list[bool]) -> float | None:
        return sum(flags) / len(flags) if flags else None

    if len(before) > 1 and len(after) > 1 and any(seed in before for seed in after):
        pairs = [(seed, before[seed], after[seed]) for seed in after if seed in before]
    elif len(after) > 1:
        if len(before) > 1:  # no seed in common: each seed against the other model's seeds pooled
            before = {ONE_RUN: [flag for flags in before.values() for flag in flags]}
        [only] = before.values()
        pairs = [(seed, only, flags) for seed, flags in after.items()]
    else:
        [only] = after.values()
        pairs = [(seed, flags, only) for seed, flags in before.items()]
    changes = {}
    for seed, b, a in pairs:
        if share(a) is not None and share(b) is not None:
            changes[seed] = share(a) - share(b)
    return changes


def _row(eval_set: EvalSet, group: str, unit: str, rule, rule_acc, per_seed, labels, difference_interval, chance: float,
         training_effect: bool) -> dict:
    # A model's column pools its training seeds' answers (seeds × questions).
    model_accs = {label: accuracy([flag for flags in by_seed.values() for flag in flags])
                  for label, by_seed in per_seed.items()}
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
            direction = 1 if diff.above_zero else (-1 if diff.below_zero else 0)
            words = {1: "gain", -1: "loss", 0: "inconclusive"}
            row["change"] = {"from": labels[-2], "to": labels[-1], **diff.to_dict(), "verdict": words[direction]}
            if training_effect:
                effects = SeedEffects.of(_seed_changes(per_seed[labels[-2]], per_seed[labels[-1]]))
                if effects.seeds:
                    row["change"]["seed_spread"] = effects.to_dict()
                row["change"]["verdict"] = training_effect_verdict(direction, effects if effects.seeds else None,
                                                                   words[direction], words[0])
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
            line.append(_change_cell(change) if change else "-")
        cells.append(line)
    return columns, cells


def _change_cell(change: dict) -> str:
    text = f"{100 * change['value']:+.1f} [{100 * change['low']:+.1f}, {100 * change['high']:+.1f}] {change['verdict']}"
    spread = change.get("seed_spread")
    if spread and spread["training_seeds"] >= 2:
        effects = SeedEffects.of(spread["per_seed"])
        text += f"; {effects.describe()}"
    return text


def to_markdown(comparison: dict, caption: str = "") -> str:
    columns, cells = table_rows(comparison)
    lines = [caption, ""] if caption else []
    lines.append("| " + " | ".join(columns) + " |")
    lines.append("|" + "---|" * len(columns))
    lines += ["| " + " | ".join(line) + " |" for line in cells]
    lines += ["", note_for(comparison)]
    return "\n".join(lines) + "\n"


def note_for(comparison: dict) -> str:
    """:data:`NOTE`, and what the last column's change says about training seeds."""
    spreads = [row["change"]["seed_spread"] for row in comparison["rows"] if "seed_spread" in row.get("change", {})]
    if not spreads:
        return NOTE
    counts = sorted({spread["training_seeds"] for spread in spreads})
    text = NOTE + " The change is a training effect."
    if counts[0] < 2:
        text += f" Seeds: {ONE_TRAINING_SEED}; a gain or loss says what these questions show for this one run."
    if counts[-1] >= 2:
        text += (" Where the models were trained with several seeds, their columns pool the seeds' answers (seeds × "
                 "questions) and the change is also given per seed, with its range and sd; a gain or loss is claimed only "
                 "when the interval excludes zero and every seed's change has its sign, else 'inconclusive: training seeds "
                 "disagree'.")
    return text


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
