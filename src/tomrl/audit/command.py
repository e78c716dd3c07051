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
of Mind (see :mod:`tomrl.audit.heuristics`), by data set and order. ``--json`` writes the same
numbers (and the ids of every leaked test row) as JSON.

A FILE is a unified-schema JSONL file (``tomrl data load`` / ``tomrl data generate`` output);
a name that is not a file is loaded with that loader (``tomrl data load --list``).
"""

from __future__ import annotations

import argparse
from pathlib import Path


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--train", help="training data: JSONL file or loader name (omit for shortcuts and balance only)")
    parser.add_argument("--test", action="append", required=True, help="test data: JSONL file or loader name (repeatable)")
    parser.add_argument("--json", dest="json_out", help="write the report as JSON here")
    parser.add_argument("--markdown", help="also write the Markdown report here")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random-location heuristic (default 0)")
    parser.add_argument("--by-question-type", action="store_true", help="add a shortcut table per question type")
    parser.add_argument("--train-shortcuts", action="store_true", help="also compute balance and shortcuts on the training data")
    parser.add_argument("--data", help="data root for loader names (default: $TOMRL_DATA or ../shared/data)")


def read_input(spec: str):
    """Examples from a JSONL file, or from the loader of that name."""
    from tomrl.config import ConfigError
    from tomrl.loaders.registry import LOADERS, load
    from tomrl.schema import read_examples

    path = Path(spec).expanduser()
    if path.exists():
        return read_examples(path)
    if spec in LOADERS:
        return load(spec)
    raise ConfigError(f"{spec}: no such file, and not a data set name (tomrl data load --list)")


def run(args: argparse.Namespace) -> int:
    import os

    from tomrl.audit.report import audit, to_markdown
    from tomrl.io import atomic_write_json, atomic_write_text

    if args.data:
        os.environ["TOMRL_DATA"] = str(Path(args.data).expanduser())
    train = (args.train, read_input(args.train)) if args.train else None
    tests = [(spec, read_input(spec)) for spec in args.test]
    report = audit(train, tests, seed=args.seed, by_question_type=args.by_question_type, train_shortcuts=args.train_shortcuts)
    markdown = to_markdown(report)
    print(markdown)
    if args.markdown:
        atomic_write_text(args.markdown, markdown)
    if args.json_out:
        atomic_write_json(args.json_out, report)
    return 0
