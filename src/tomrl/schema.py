"""The one example record every tomrl stage reads and writes, and its JSONL form.

Generators and loaders produce :class:`Example`; prompts, rewards, training, evaluation and the
audits consume it. On disk it is one JSON object per line with exactly the fields below.

    from tomrl.schema import read_examples, write_examples
    examples = read_examples("data/hitom_train.jsonl")      # errors name file, line and field
    write_examples("out.jsonl", examples)                    # atomic: all or nothing

A file that violates the schema fails with its path, line number and the field at fault
(``--skip-bad`` callers get the bad lines counted instead, see :func:`read_examples`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from tomrl.io import BadInputError, quoted, scan_jsonl, write_jsonl

SPLITS = ("train", "validation", "test")


@dataclass(frozen=True)
class Example:
    """One question about one story, with its gold answer."""

    id: str  # unique within a file
    source: str  # data set it came from: "hitom", "tomi", "exploretom", "opentom", "fantom", "tomrl-hitom", …
    split: str  # "train", "validation" or "test"
    story: str  # the story text, one sentence per line where the source has lines
    question: str
    answer: str  # gold answer as the source writes it (e.g. "green_drawer")
    order: int | None  # ToM order: 0 = reality, 1 = "where does A think", …; None where undefined
    question_type: str  # source-specific type, e.g. "first_order", "memory", "reality", "location_fine"
    deception: bool | None  # Hi-ToM: story contains claims/tells; None where undefined
    story_length: int | None  # Hi-ToM: chapters (1-3); otherwise the number of story sentences
    story_id: str  # questions about the same story share it; splits never share one
    choices: list[str] | None = None  # multiple-choice options, if the source has them
    meta: dict[str, Any] = field(default_factory=dict)  # anything else (source row, flags, oracle notes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def replace(self, **changes: Any) -> "Example":
        return dataclasses.replace(self, **changes)


# Question types that name their ToM order; a row giving another order is contradictory.
ORDER_OF_QUESTION_TYPE = {"reality": 0, "first_order": 1, "second_order": 2, "third_order": 3, "fourth_order": 4}

FIELD_NAMES = tuple(f.name for f in dataclasses.fields(Example))
_REQUIRED_STRINGS = ("id", "source", "split", "story", "question", "answer", "question_type", "story_id")


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def example_from_dict(row: dict, where: str) -> Example:
    """Validate one JSON object as an :class:`Example`; ``where`` is ``"file:line"`` for errors."""
    missing = [name for name in FIELD_NAMES if name not in row and name not in ("choices", "meta")]
    if missing:
        raise BadInputError(f"{where}: field '{missing[0]}': missing (required fields: {', '.join(FIELD_NAMES)})")
    unknown = sorted(set(row) - set(FIELD_NAMES))
    if unknown:
        raise BadInputError(f"{where}: field {quoted(unknown[0])}: unknown field (put extra data under 'meta')")
    for name in _REQUIRED_STRINGS:
        value = row[name]
        if not isinstance(value, str):
            raise BadInputError(f"{where}: field '{name}': expected a string, got {_type_name(value)}")
        if not value.strip():
            raise BadInputError(f"{where}: field '{name}': empty")
    if row["split"] not in SPLITS:
        raise BadInputError(f"{where}: field 'split': {quoted(row['split'])} is not one of {', '.join(SPLITS)}")
    for name in ("order", "story_length"):
        value = row[name]
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise BadInputError(f"{where}: field '{name}': expected an integer or null, got {_type_name(value)}")
    if row["order"] is not None and row["order"] < 0:
        raise BadInputError(f"{where}: field 'order': must be >= 0 or null, got {row['order']}")
    named_order = ORDER_OF_QUESTION_TYPE.get(row["question_type"])
    if named_order is not None and row["order"] is not None and row["order"] != named_order:
        raise BadInputError(
            f"{where}: field 'order': {row['order']} contradicts question_type {quoted(row['question_type'])} (order {named_order})"
        )
    if row["deception"] is not None and not isinstance(row["deception"], bool):
        raise BadInputError(f"{where}: field 'deception': expected true, false or null, got {_type_name(row['deception'])}")
    choices = row.get("choices")
    if choices is not None:
        if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
            raise BadInputError(f"{where}: field 'choices': expected a list of strings or null")
    meta = row.get("meta", {})
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise BadInputError(f"{where}: field 'meta': expected an object, got {_type_name(meta)}")
    values = {name: row.get(name) for name in FIELD_NAMES}
    values["meta"] = meta
    return Example(**values)


def validate_example(example: Example, where: str = "<example>") -> Example:
    """Check an in-memory example against the same rules as a file row."""
    return example_from_dict(example.to_dict(), where)


@dataclass
class ReadReport:
    """What :func:`read_examples` skipped when asked to (``skip_bad=True``)."""

    path: str
    read: int = 0
    skipped: list[str] = field(default_factory=list)
    line_numbers: dict[str, int] = field(default_factory=dict)  # example id -> its line, for later checks' messages


def read_examples(path: str | Path, skip_bad: bool = False, report: ReadReport | None = None) -> list[Example]:
    """Read a unified-schema JSONL file.

    Every line is validated; duplicated ids are an error. With ``skip_bad`` a bad line is recorded
    in ``report.skipped`` (with its reason) instead of stopping the read.
    """
    path = Path(path)
    report = report if report is not None else ReadReport(str(path))
    examples: list[Example] = []
    seen: dict[str, int] = {}
    for line_number, obj, line_error in scan_jsonl(path):
        where = f"{path}:{line_number}"
        try:
            if line_error is not None:
                raise BadInputError(line_error)
            example = example_from_dict(obj, where)
            if example.id in seen:
                raise BadInputError(f"{where}: field 'id': duplicate id {quoted(example.id)} (first on line {seen[example.id]})")
        except BadInputError as err:
            if not skip_bad:
                raise
            report.skipped.append(str(err))
            continue
        seen[example.id] = line_number
        report.line_numbers[example.id] = line_number
        examples.append(example)
    report.read = len(examples)
    if not examples and not report.skipped:
        raise BadInputError(f"{path}: no examples in file")
    return examples


def write_examples(path: str | Path, examples: Iterable[Example]) -> int:
    """Write examples as unified JSONL, atomically; returns the count."""
    return write_jsonl(path, (e.to_dict() for e in examples))
