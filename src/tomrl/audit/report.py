"""The audit report: leakage, label balance, the shortcut table and the best agent-agnostic rule, as JSON and Markdown.

    from tomrl.audit.report import audit, to_markdown
    report = audit(train=("train.jsonl", train_rows), tests=[("test.jsonl", test_rows)], seed=0)
    print(to_markdown(report))

Every accuracy carries its n and 95 % Wilson interval (:func:`tomrl.stats.accuracy`) and the
report says which file and how many rows it was computed on; the random heuristic's seed is
recorded with it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from tomrl.audit.balance import label_balance
from tomrl.audit.heuristics import DESCRIPTIONS, HEURISTICS, shortcut_table
from tomrl.audit.rules import FLAG_MARGIN, best_rules_by_source
from tomrl.audit.leakage import find_leakage
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
    for name, rows in tests:
        entry: dict[str, Any] = _summary(name, rows)
        entry["leakage"] = find_leakage(train[1], rows).to_dict() if train is not None else None
        entry["balance"] = [r.to_dict() for r in label_balance(rows)]
        entry["shortcuts"] = [r.to_dict() for r in shortcut_table(rows, by="order", seed=seed)]
        entry["agnostic_rules"] = _agnostic_rules(rows)
        if by_question_type:
            entry["shortcuts_by_question_type"] = [r.to_dict() for r in shortcut_table(rows, by="question_type", seed=seed)]
        report["tests"].append(entry)
    if train is not None and train_shortcuts:
        report["train"]["balance"] = [r.to_dict() for r in label_balance(train[1])]
        report["train"]["shortcuts"] = [r.to_dict() for r in shortcut_table(train[1], by="order", seed=seed)]
        report["train"]["agnostic_rules"] = _agnostic_rules(train[1])
    return report


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
