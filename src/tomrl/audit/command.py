"""Audit data for leakage and shortcuts: tomrl data audit --train FILE --test FILE [--json OUT].

    tomrl data load tomrl-paper-train --out train.jsonl
    tomrl data load tomrl-paper-test-merged --out test.jsonl
    tomrl data audit --train train.jsonl --test test.jsonl --json audit.json --markdown audit.md
    tomrl data audit --train tomrl-paper-train --test tomrl-paper-test-merged    # loader names work too
    tomrl data audit --test hitom --test tomi --test tomrl-paper-exploretom     # shortcuts only

Prints Markdown to stdout: for each test file, (1) leakage — test questions whose story, or story
and question, occur in the training file, by data set and order; (2) label balance — answer
distribution and the gold location's position among the story's locations; (3) the shortcut
table — the accuracy, with n and 95 % Wilson intervals, of answer heuristics that need no Theory
of Mind (see :mod:`tomrl.audit.heuristics`), by data set and order; (4) the best agent-agnostic rule
— the best of a searched family of rules that read only the order of events, with chance, margin,
a held-out check and FLAG above 10 points (:mod:`tomrl.audit.rules`); (5) partial ToM — for
location questions of order >= 2, the share that one named agent's own first-order belief answers
("partially answerable"), the share that needs nesting, and the best rule picking that agent
(first / last named, first / last to leave, oldest / newest knowledge) against chance, FLAG above
10 points (:mod:`tomrl.audit.partial`; unparsable questions are counted, not fatal); (6) the learned
agent-blind baseline — gradient boosting and logistic regression on features that never read the
question's agents (:mod:`tomrl.audit.learner`), cross-fitted by story on each test set and, with
``--train``, fitted on the training file (so ``--train`` is also the learners' training set: for a
generated test set, another seed of the same generator config), with chance, margin and FLAG above
10 points. ``--json`` writes the same numbers (and the ids of every leaked test row) as JSON.

A FILE is a unified-schema JSONL file (``tomrl data load`` / ``tomrl data generate`` output);
a name that is not a file is loaded with that loader (``tomrl data load --list``). Both are checked
like ``tomrl data check`` (schema, duplicate ids, answers that cannot be right): the first bad row
stops the audit (exit 2, ``file:line: field 'x': ...``, no report written). With ``--skip-bad``,
bad rows of JSONL files are skipped instead; the count (and the first few reasons) is printed to
stderr and recorded in the reports (``skipped_lines`` in the JSON, a note in the Markdown), so the
audit says what it was computed on:

    tomrl data audit --test raw.jsonl --skip-bad --json audit.json
"""

from __future__ import annotations

import argparse
from pathlib import Path


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--train", help="training data: JSONL file or loader name (omit for shortcuts and balance only)")
    parser.add_argument("--test", action="append", required=True, help="test data: JSONL file or loader name (repeatable)")
    parser.add_argument("--json", dest="json_out", help="write the report as JSON here")
    parser.add_argument("--markdown", help="also write the Markdown report here")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random-location heuristic and of the learners' folds (default 0)")
    parser.add_argument("--by-question-type", action="store_true", help="add a shortcut table per question type")
    parser.add_argument("--train-shortcuts", action="store_true", help="also compute balance and shortcuts on the training data")
    parser.add_argument("--data", help="data root for loader names (default: $TOMRL_DATA or ../shared/data)")
    parser.add_argument("--skip-bad", action="store_true", help="skip bad rows of JSONL inputs (counted and reported) instead of stopping at the first")


def read_input(spec: str, skip_bad: bool = False, report=None):
    """Examples from a JSONL file (schema and answer checks, :func:`tomrl.data_checks.read_checked_examples`),
    or from the loader of that name. ``skip_bad`` (files only) records skipped rows in ``report``."""
    from tomrl.config import ConfigError
    from tomrl.data_checks import read_checked_examples
    from tomrl.loaders.registry import LOADERS, load

    path = Path(spec).expanduser()
    if path.exists():
        return read_checked_examples(path, skip_bad=skip_bad, report=report)
    if spec in LOADERS:
        return load(spec)
    raise ConfigError(f"{spec}: no such file, and not a data set name (tomrl data load --list)")


SHOWN_SKIPS = 5


def _read_all(specs: list[str], skip_bad: bool) -> tuple[list, dict[str, list[str]]]:
    """``[(spec, examples)]`` and ``{spec: skipped reasons}`` for the specs that skipped rows."""
    import sys

    from tomrl.io import BadInputError
    from tomrl.schema import ReadReport

    inputs, skipped = [], {}
    for spec in specs:
        report = ReadReport(spec)
        rows = read_input(spec, skip_bad=skip_bad, report=report)
        if report.skipped:
            skipped[spec] = list(report.skipped)
            print(f"{spec}: skipped {len(report.skipped)} bad lines, kept {len(rows)} rows", file=sys.stderr)
            for reason in report.skipped[:SHOWN_SKIPS]:
                print(f"  skipped: {reason}", file=sys.stderr)
            if len(report.skipped) > SHOWN_SKIPS:
                print(f"  … and {len(report.skipped) - SHOWN_SKIPS} more", file=sys.stderr)
        if not rows:
            raise BadInputError(f"{spec}: no row passed the checks; nothing to audit")
        inputs.append((spec, rows))
    return inputs, skipped


def run(args: argparse.Namespace) -> int:
    import os

    from tomrl.audit.report import audit, to_markdown
    from tomrl.config import check_seed
    from tomrl.io import atomic_write_json, atomic_write_text
    from tomrl.outputs import check_outputs

    check_seed(args.seed, "--seed")  # before any reading: the learners hand it to sklearn, which takes 0..2**32-1 only
    if args.data:
        os.environ["TOMRL_DATA"] = str(Path(args.data).expanduser())
    specs = {"--train": [args.train] if args.train else [], "--test": list(args.test)}
    files = {flag: [spec for spec in given if Path(spec).expanduser().exists()] for flag, given in specs.items()}  # not loader names
    check_outputs({"--json": args.json_out, "--markdown": args.markdown}, inputs=files)
    inputs, skipped = _read_all(([args.train] if args.train else []) + list(args.test), args.skip_bad)
    train = inputs[0] if args.train else None
    tests = inputs[1:] if args.train else inputs
    report = audit(train, tests, seed=args.seed, by_question_type=args.by_question_type, train_shortcuts=args.train_shortcuts)
    if args.skip_bad:
        report["skipped_lines"] = skipped
    markdown = to_markdown(report)
    print(markdown)
    if args.markdown is not None:
        atomic_write_text(args.markdown, markdown)
    if args.json_out is not None:
        atomic_write_json(args.json_out, report)
    return 0
