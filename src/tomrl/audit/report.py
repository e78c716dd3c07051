"""The audit report: leakage, label balance, the shortcut table, the best agent-agnostic rule and the learned agent-blind baseline, as JSON and Markdown.

    from tomrl.audit.report import audit, to_markdown
    report = audit(train=("train.jsonl", train_rows), tests=[("test.jsonl", test_rows)], seed=0)
    print(to_markdown(report))

Every accuracy carries its n and 95 % Wilson interval (:func:`tomrl.stats.accuracy`) and the
report says which file and how many rows it was computed on; the random heuristic's seed is
recorded with it. Each test file also gets the partial-ToM audit (``partial_tom``,
:mod:`tomrl.audit.partial`): how many questions of order >= 2 one named agent's own belief answers.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from tomrl.audit.balance import label_balance
from tomrl.audit.heuristics import DESCRIPTIONS, HEURISTICS, shortcut_table
from tomrl.audit.rules import FLAG_MARGIN, best_rules_by_source
from tomrl.audit.learner import fit_learners, learned_by_mode
from tomrl.audit.leakage import find_leakage
from tomrl.audit.partial import partial_tom
from tomrl.loaders.base import story_key
from tomrl.schema import Example

COLUMN_TITLES = {
    "last_mentioned": "last named",
    "first_mentioned": "first named",
    "first_location": "first location",
    "true_location": "true location",
    "exit_location": "exit location",
    "most_mentioned": "most named",
    "random_location": "random",
}


def _summary(name: str, rows: list[Example]) -> dict:
    return {
        "file": name,
        "rows": len(rows),
        "stories": len({story_key(e.story) for e in rows}),
        "sources": dict(Counter(e.source for e in rows)),
    }


def audit(
    train: tuple[str, list[Example]] | None,
    tests: list[tuple[str, list[Example]]],
    seed: int = 0,
    by_question_type: bool = False,
    train_shortcuts: bool = False,
) -> dict[str, Any]:
    """Run every audit; returns the JSON-ready report."""
    report: dict[str, Any] = {
        "seed": seed,
        "heuristics": DESCRIPTIONS,
        "train": _summary(*train) if train is not None else None,
        "tests": [],
    }
    # the agent-blind learners fitted once on the training rows, then tested on every test file
    fitted = fit_learners(train[1], seed) if train is not None else []
    for name, rows in tests:
        entry: dict[str, Any] = _summary(name, rows)
        entry["leakage"] = find_leakage(train[1], rows).to_dict() if train is not None else None
        entry["balance"] = [r.to_dict() for r in label_balance(rows)]
        entry["shortcuts"] = [r.to_dict() for r in shortcut_table(rows, by="order", seed=seed)]
        entry["agnostic_rules"] = _agnostic_rules(rows)
        entry["learned_baseline"] = _learned_baseline(rows, fitted, seed)
        entry["partial_tom"] = _partial_tom(rows)
        if by_question_type:
            entry["shortcuts_by_question_type"] = [r.to_dict() for r in shortcut_table(rows, by="question_type", seed=seed)]
        report["tests"].append(entry)
    if train is not None and train_shortcuts:
        report["train"]["balance"] = [r.to_dict() for r in label_balance(train[1])]
        report["train"]["shortcuts"] = [r.to_dict() for r in shortcut_table(train[1], by="order", seed=seed)]
        report["train"]["agnostic_rules"] = _agnostic_rules(train[1])
    return report


def _partial_tom(rows: list[Example]) -> dict[str, dict[str, dict]]:
    """The partial-ToM audit (:mod:`tomrl.audit.partial`) per data set and order >= 2, JSON-ready."""
    return {source: {str(order): r.to_dict() for order, r in by_order.items()} for source, by_order in partial_tom(rows).items()}


def _learned_baseline(rows: list[Example], fitted: list, seed: int) -> dict[str, dict[str, dict[str, dict]]]:
    """The agent-blind learners (:mod:`tomrl.audit.learner`) per data set, way of fitting and order, JSON-ready."""
    by_source: dict[str, list[Example]] = {}
    for e in rows:
        by_source.setdefault(e.source, []).append(e)
    return {source: {mode: {key: best.to_dict() for key, best in result.items()} for mode, result in learned_by_mode(members, fitted, seed).items()}
            for source, members in sorted(by_source.items())}


def _agnostic_rules(rows: list[Example]) -> dict[str, dict[str, dict]]:
    """The best agent-agnostic rule (:mod:`tomrl.audit.rules`) per data set and order, JSON-ready."""
    return {source: {key: best.to_dict() for key, best in result.items()} for source, result in best_rules_by_source(rows).items()}


# ------------------------------------------------------------------------------ Markdown


def _pct(k: int, n: int) -> str:
    return f"{k:,} ({100 * k / n:.1f} %)" if n else "0"


def _acc(d: dict) -> str:
    if d["n"] == 0:
        return "n/a"
    return f"{100 * d['value']:.1f} [{100 * d['low']:.1f}, {100 * d['high']:.1f}]"


def _order(o: int | None) -> str:
    return "—" if o is None else str(o)


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _describe(entry: dict) -> str:
    sources = ", ".join(f"{s} {n:,}" for s, n in entry["sources"].items())
    return f"`{entry['file']}`: {entry['rows']:,} rows, {entry['stories']:,} stories ({sources})"


def _shortcut_lines(rows: list[dict], title: str, seed: int, key: str = "order") -> list[str]:
    names = list(HEURISTICS)
    header = ["data set", "order" if key == "order" else "order / question type", "n"] + [COLUMN_TITLES[n] for n in names] + ["random (expected)", "gold named in story"]
    body = []
    for r in rows:
        if r["n"] == 0:
            continue
        group = _order(r["order"]) if key == "order" else f"{_order(r['order'])} / {r['question_type']}"
        body.append(
            [r["source"], group, f"{r['n']:,}"]
            + [_acc(r["heuristics"][n]) for n in names]
            + [f"{100 * r['random_expected']:.1f}", f"{100 * r['gold_in_story']:.1f}"]
        )
    skipped = sum(r["skipped_non_location"] for r in rows)
    lines = [f"### {title}", ""]
    lines.append(
        f"Accuracy in % with its 95 % Wilson interval; n = questions asking for a location (the heuristics do not apply to "
        f"the {skipped:,} other questions, e.g. yes/no). Exact match after lower-casing and `_` → space; random draws with seed {seed}."
    )
    lines.append("")
    lines += _table(header, body) if body else ["(no location questions)"]
    return lines


def _agnostic_rule_lines(by_source: dict[str, dict[str, dict]], title: str) -> list[str]:
    body = []
    for source, result in by_source.items():
        for key, best in result.items():
            cv = best["cross_validated"]
            body.append([
                source, "all (best rule of each order)" if key == "all" else key, f"{best['n']:,}", best["rule"], _acc(best["accuracy"]),
                f"{100 * best['chance']:.1f}", f"{100 * best['margin']:+.1f}", _acc(cv) if cv else "n/a", "FLAG" if best["flagged"] else "",
            ])
    lines = [f"### {title}", ""]
    lines.append(
        "The best of the rules of `tomrl.audit.rules` (answers read off the order of events, never which agents the question "
        "names), in % with its 95 % Wilson interval; chance = a uniform pick among the places the object has been in; "
        f"held-out = the rule selected on even-indexed questions, scored on odd-indexed ones; FLAG: margin over chance > {100 * FLAG_MARGIN:.0f} points."
    )
    lines.append("")
    header = ["data set", "order", "n", "best rule", "accuracy", "chance", "margin (points)", "held-out accuracy", ""]
    lines += _table(header, body) if body else ["(no location questions)"]
    return lines


PARTIAL_TOM_TITLE = "Partial ToM: one agent's first-order belief for a nested question"


def _partial_tom_lines(by_source: dict[str, dict[str, dict]], title: str = PARTIAL_TOM_TITLE) -> list[str]:
    body = []
    for source, by_order in by_source.items():
        for order, r in by_order.items():
            best = r["best"]
            body.append([
                source, order, f"{r['n']:,}", f"{r['n_not_parsed']:,}", _acc(r["partially_answerable"]), _acc(r["nesting_required"]),
                r["best_rule"] or "—", _acc(best) if best else "n/a", f"{100 * r['chance']:.1f}" if r["n"] else "n/a",
                f"{100 * r['margin']:+.1f}" if r["n"] else "n/a", "FLAG" if r["flagged"] else "",
            ])
    lines = [f"### {title}", ""]
    lines.append(
        "Location questions of order ≥ 2 read by the belief oracle (`tomrl.audit.partial`). Partially answerable: some agent "
        "the question names believes, by itself, that the object is where the gold says; nesting-required: no named agent's "
        "own belief is the oracle's nested answer. A partial rule answers with the own belief of one named agent (first / "
        "last named, first / last to leave a room, oldest / newest knowledge), in % with its 95 % Wilson interval; chance = a "
        f"uniform pick among the places the object has been in; FLAG: best rule > chance + {100 * FLAG_MARGIN:.0f} points. "
        "Not parsed: questions the story and question parsers (or the oracle) cannot read, left out of every other column."
    )
    lines.append("")
    header = ["data set", "order", "n", "not parsed", "partially answerable", "nesting-required", "best partial rule", "accuracy", "chance", "margin (points)", ""]
    lines += _table(header, body) if body else ["(no location questions of order ≥ 2)"]
    return lines


LEARNED_TITLE = "Learned agent-blind baseline"


def _learned_lines(by_source: dict[str, dict[str, dict[str, dict]]], title: str = LEARNED_TITLE) -> list[str]:
    body = []
    for source, by_mode in by_source.items():
        for mode, result in by_mode.items():
            for key, best in result.items():
                body.append([
                    source, mode, "all (best learner of each order)" if key == "all" else key, best["rule"].split(", ")[0].removeprefix("learner: "),
                    f"{best['n']:,}", _acc(best["accuracy"]), f"{100 * best['chance']:.1f}", f"{100 * best['margin']:+.1f}",
                    "FLAG" if best["flagged"] else "",
                ])
    lines = [f"### {title}", ""]
    lines.append(
        "Classifiers on features of each candidate answer that never read which agents the question names "
        "(`tomrl.audit.learner`: positions in the object's path, after each exit, mention counts, the move/stay pattern, "
        "the question's order), gradient boosting or logistic regression, the better per order (chosen on these questions, "
        "so optimistic). Cross-fitted by story: each question answered by a model fitted on the other stories of the set "
        "(5 folds); fitted on train: fitted on the `--train` file. Accuracy in % with its 95 % Wilson interval; chance = a "
        f"uniform pick among the places the object has been in; FLAG: margin over chance > {100 * FLAG_MARGIN:.0f} points."
    )
    lines.append("")
    header = ["data set", "fitted", "order", "learner", "n", "accuracy", "chance", "margin (points)", ""]
    lines += _table(header, body) if body else ["(no location questions)"]
    return lines


def to_markdown(report: dict) -> str:
    seed = report["seed"]
    out = ["# Data audit", ""]
    if report["train"] is not None:
        out.append(f"- Train: {_describe(report['train'])}")
    for entry in report["tests"]:
        out.append(f"- Test: {_describe(entry)}")
    for name, reasons in (report.get("skipped_lines") or {}).items():
        out.append(f"- Skipped (--skip-bad): {len(reasons):,} bad lines of `{name}`, not counted in any number below (first: {reasons[0]})")
    out.append("")
    for entry in report["tests"]:
        out += [f"## Test file `{entry['file']}`", ""]
        leakage = entry["leakage"]
        if leakage is not None:
            out += ["### Leakage: test questions whose story occurs in training", ""]
            out.append(
                f"Stories compared after collapsing whitespace (and line numbers); an infilled ExploreToM story counts as its "
                f"structured original. Training file: {leakage['train_rows']:,} rows, {leakage['train_stories']:,} stories."
            )
            out.append("")
            body = [
                [g["source"], _order(g["order"]), f"{g['n']:,}", _pct(g["story_leaked"], g["n"]), _pct(g["pair_leaked"], g["n"]),
                 _pct(g["answer_leaked"], g["n"]), f"{g['stories_leaked']:,} / {g['stories']:,}"]
                for g in leakage["groups"]
            ]
            t = leakage["total"]
            body.append(["**all**", "", f"{t['n']:,}", _pct(t["story_leaked"], t["n"]), _pct(t["pair_leaked"], t["n"]),
                         _pct(t["answer_leaked"], t["n"]), f"{t['stories_leaked']:,} / {t['stories']:,}"])
            out += _table(["data set", "order", "n", "story in train", "story + question in train", "story + question + answer in train", "leaked stories"], body)
            out.append("")
        out += ["### Label balance", ""]
        out.append("Most common answer and its share of the group; entropy of the answers (1 = uniform); where the gold location stands among the story's locations in order of first mention.")
        out.append("")
        body = []
        for b in entry["balance"]:
            top = b["top_answers"][0] if b["top_answers"] else {"answer": "", "count": 0}
            pos = b["answer_position"]
            where = " / ".join(f"{pos[p]:,}" for p in ("first", "last", "other", "absent")) if b["location_questions"] else "—"
            body.append([b["source"], _order(b["order"]), f"{b['n']:,}", f"{b['distinct_answers']:,}", f"{top['answer']} ({_acc(b['majority_answer_accuracy'])})",
                         f"{b['normalised_entropy']:.2f}", where])
        out += _table(["data set", "order", "n", "distinct answers", "most common answer (share %, 95 % CI)", "entropy", "gold location first / last / other / absent"], body)
        out.append("")
        out += _shortcut_lines(entry["shortcuts"], "Shortcuts: accuracy of answers that need no Theory of Mind", seed)
        out.append("")
        if "agnostic_rules" in entry:
            out += _agnostic_rule_lines(entry["agnostic_rules"], "Best agent-agnostic rule")
            out.append("")
        if "learned_baseline" in entry:
            out += _learned_lines(entry["learned_baseline"])
            out.append("")
        if "partial_tom" in entry:
            out += _partial_tom_lines(entry["partial_tom"])
            out.append("")
        if "shortcuts_by_question_type" in entry:
            out += _shortcut_lines(entry["shortcuts_by_question_type"], "Shortcuts by question type", seed, key="question_type")
            out.append("")
    train = report["train"]
    if train is not None and "shortcuts" in train:
        out += [f"## Training file `{train['file']}`", ""]
        out += _shortcut_lines(train["shortcuts"], "Shortcuts on the training data", seed)
        out.append("")
        if "agnostic_rules" in train:
            out += _agnostic_rule_lines(train["agnostic_rules"], "Best agent-agnostic rule on the training data")
            out.append("")
    out += ["### Heuristics", ""]
    out += [f"- **{COLUMN_TITLES[name]}**: {text}" for name, text in report["heuristics"].items()]
    out.append("")
    return "\n".join(out)
