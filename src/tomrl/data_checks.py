"""Checks of example data beyond the schema: answers that cannot be right, and ``tomrl data check``.

The schema (:mod:`tomrl.schema`) checks each row on its own terms (fields, types, duplicate
ids). This module adds the checks that need to know what a data set's answers mean:

- **answer in story**: in Hi-ToM, ToMi, tomrl-generated data and the structured ExploreToM
  stories of the ToM-RL release, every answer is a container or place the story names. A row
  whose answer never occurs in its story is broken (a label computed for another story, a
  truncated story, a shifted column). The match ignores case, ``_`` versus space and spacing,
  and is whole-word (``box`` is not found in ``toolbox``). Sources whose answers are yes/no,
  attitudes, lists or retold stories (ExploreToM's full release, OpenToM, FANToM, the infilled
  ExploreToM stories, GSM8K) are not checked: :data:`LOCATION_ANSWER_SOURCES` lists the checked ones.
- **answer among choices**: a row that lists ``choices`` must have its answer among them.

    tomrl data check data/train.jsonl                                   # schema, duplicate ids, answers
    tomrl data check data/a.jsonl data/b.jsonl                          # several files
    tomrl data check data/raw.jsonl --skip-bad --out data/clean.jsonl   # drop and count bad rows

    from tomrl.data_checks import read_checked_examples, validate_answers_in_story
    examples = read_checked_examples("train.jsonl")          # errors name file, line and field
    examples = validate_answers_in_story(examples)           # in memory (loaders, generators)

``tomrl data check`` exits 0 when every row passed (or the bad ones were skipped and counted
with ``--skip-bad``) and 2 at the first bad row otherwise, with ``file:line: field 'x': ...``.
``--out`` is written atomically, only when the whole check finished.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path
from typing import Sequence

from tomrl.io import BadInputError, quoted, shortened
from tomrl.schema import Example, ReadReport, read_examples

# Sources whose every answer is a container or place named in the story (checked on the real
# files: 100 % of Hi-ToM 600, ToMi 5,994, the ToM-RL release's Hi-ToM/ToMi/structured ExploreToM).
LOCATION_ANSWER_SOURCES = frozenset(
    {
        "hitom",
        "tomi",
        "tomrl-hitom",
        "tomrl-tomi",
        "tomrl-paper-hitom",
        "tomrl-paper-hitom600",
        "tomrl-paper-tomi",
        "tomrl-paper-exploretom",
    }
)


def normalize_phrase(text: str) -> str:
    """Lower-case, ``_`` as a space, spacing collapsed: ``"Green_Drawer "`` → ``"green drawer"``."""
    return " ".join(text.lower().replace("_", " ").split())


def answer_in_story(answer: str, story: str) -> bool:
    """Whether ``answer`` occurs in ``story`` as whole words, after :func:`normalize_phrase`."""
    needle = normalize_phrase(answer)
    if not needle:
        return False
    return re.search(r"(?<!\w)" + re.escape(needle) + r"(?!\w)", normalize_phrase(story)) is not None


def answer_problem(example: Example) -> str | None:
    """Why ``example``'s answer cannot be right (field ``answer``), or None when it can."""
    if example.choices:
        if normalize_phrase(example.answer) not in {normalize_phrase(c) for c in example.choices}:
            shown = ", ".join(shortened(choice, 40) for choice in example.choices[:6]) + (" …" if len(example.choices) > 6 else "")
            return f"{quoted(example.answer)} is not one of the choices ({shown})"
    if example.source in LOCATION_ANSWER_SOURCES and not answer_in_story(example.answer, example.story):
        return f"{quoted(example.answer)} never occurs in the story (a {shortened(example.source, 40)} answer must be a place the story names)"
    return None


def _where(example: Example, report: ReadReport | None) -> str:
    if report is not None and example.id in report.line_numbers:
        return f"{report.path}:{report.line_numbers[example.id]}"
    return f"example {quoted(example.id)} ({shortened(example.source, 40)})"


def validate_answers_in_story(
    examples: Sequence[Example], report: ReadReport | None = None, skip_bad: bool = False
) -> list[Example]:
    """The examples whose answers pass :func:`answer_problem`.

    A failing example raises :class:`BadInputError` (``file:line: field 'answer': ...`` when
    ``report`` comes from :func:`tomrl.schema.read_examples`, else naming the example id); with
    ``skip_bad`` it is dropped and its reason appended to ``report.skipped``.
    """
    if skip_bad and report is None:
        raise ValueError("skip_bad needs a report to count the skipped rows in")
    kept = []
    for example in examples:
        problem = answer_problem(example)
        if problem is None:
            kept.append(example)
            continue
        message = f"{_where(example, report)}: field 'answer': {problem}"
        if not skip_bad:
            raise BadInputError(message)
        report.skipped.append(message)  # type: ignore[union-attr]
    if report is not None:
        report.read = len(kept)
    return kept


def read_checked_examples(path: str | Path, skip_bad: bool = False, report: ReadReport | None = None) -> list[Example]:
    """:func:`tomrl.schema.read_examples` plus :func:`validate_answers_in_story`, with file:line errors."""
    report = report if report is not None else ReadReport(str(path))
    examples = read_examples(path, skip_bad=skip_bad, report=report)
    return validate_answers_in_story(examples, report, skip_bad=skip_bad)


# ----------------------------------------------------------------------------- command


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE", help="unified-schema JSONL file(s) to check")
    parser.add_argument("--skip-bad", action="store_true", help="skip bad rows (counted and listed) instead of stopping at the first")
    parser.add_argument("--out", help="write the rows that passed to this JSONL file (one input file only)")
    parser.add_argument("--show", type=int, default=10, help="how many skipped rows to list (default 10)")


def run(args: argparse.Namespace) -> int:
    from tomrl.config import ConfigError
    from tomrl.schema import write_examples

    from tomrl.outputs import check_outputs

    if args.out is not None and len(args.files) != 1:
        raise ConfigError("--out takes the rows of one input file; check the files one at a time")
    check_outputs({"--out": args.out}, inputs={"FILE": args.files})
    for path in args.files:
        report = ReadReport(str(path))
        examples = read_checked_examples(path, skip_bad=args.skip_bad, report=report)
        sources = ", ".join(f"{shortened(name, 40)} {count}" for name, count in sorted(Counter(e.source for e in examples).items()))
        checked = sum(e.source in LOCATION_ANSWER_SOURCES or bool(e.choices) for e in examples)
        print(f"{path}: {len(examples)} rows passed, {len(report.skipped)} skipped ({sources or 'no rows'}); "
              f"answers checked against the story or choices on {checked}")
        for reason in report.skipped[: args.show]:
            print(f"  skipped: {reason}")
        if len(report.skipped) > args.show:
            print(f"  … and {len(report.skipped) - args.show} more")
        if args.out is not None:
            if not examples:
                raise BadInputError(f"{path}: no row passed the checks; nothing written to {args.out}")
            write_examples(args.out, examples)
            print(f"wrote {len(examples)} rows to {args.out}")
    return 0
