"""The unified Example record: round trip, and malformed files fail naming file, line and field."""

from __future__ import annotations

import json

import pytest

from tomrl.io import BadInputError
from tomrl.schema import Example, ReadReport, read_examples, write_examples


def make(i: int = 0, **changes) -> Example:
    example = Example(
        id=f"ex-{i}",
        source="tomrl-hitom",
        split="train",
        story="Anna entered the kitchen.\nThe apple is in the box.",
        question="Where is the apple really?",
        answer="box",
        order=0,
        question_type="reality",
        deception=False,
        story_length=1,
        story_id="story-0",
        choices=["box", "basket"],
        meta={"seed": 1},
    )
    return example.replace(**changes)


def write_rows(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_round_trip(tmp_path):
    examples = [make(0), make(1, order=None, deception=None, choices=None, story_length=None)]
    path = tmp_path / "ex.jsonl"
    assert write_examples(path, examples) == 2
    assert read_examples(path) == examples


@pytest.mark.parametrize(
    "change, field",
    [
        ({"answer": None}, "answer"),
        ({"order": "2"}, "order"),
        ({"order": True}, "order"),
        ({"deception": "yes"}, "deception"),
        ({"story": "  "}, "story"),
        ({"split": "dev"}, "split"),
        ({"choices": "a, b"}, "choices"),
        ({"meta": []}, "meta"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_bad_field_names_file_line_and_field(tmp_path, change, field):
    good = make(0).to_dict()
    bad = {**make(1).to_dict(), **change}
    path = tmp_path / "bad.jsonl"
    write_rows(path, [good, bad])
    with pytest.raises(BadInputError) as err:
        read_examples(path)
    message = str(err.value)
    assert f"{path}:2" in message and f"field '{field}'" in message


def test_missing_field(tmp_path):
    row = make(0).to_dict()
    del row["story_id"]
    path = tmp_path / "missing.jsonl"
    write_rows(path, [row])
    with pytest.raises(BadInputError, match=r"missing.jsonl:1: field 'story_id': missing"):
        read_examples(path)


def test_truncated_line_non_utf8_and_duplicates(tmp_path):
    path = tmp_path / "torn.jsonl"
    path.write_text(json.dumps(make(0).to_dict()) + "\n" + json.dumps(make(1).to_dict())[:40])
    with pytest.raises(BadInputError, match=r"torn.jsonl:2: invalid JSON"):
        read_examples(path)
    path = tmp_path / "bytes.jsonl"
    path.write_bytes(json.dumps(make(0).to_dict()).encode() + b"\n\xff\xfe{}\n")
    with pytest.raises(BadInputError, match=r"bytes.jsonl:2: not valid UTF-8"):
        read_examples(path)
    path = tmp_path / "dup.jsonl"
    write_rows(path, [make(0).to_dict(), make(1).to_dict(), make(0).to_dict()])
    with pytest.raises(BadInputError, match=r"dup.jsonl:3: field 'id': duplicate id 'ex-0' \(first on line 1\)"):
        read_examples(path)


def test_skip_bad_counts_instead_of_stopping(tmp_path):
    path = tmp_path / "mixed.jsonl"
    path.write_text(json.dumps(make(0).to_dict()) + "\nnot json\n" + json.dumps({**make(2).to_dict(), "order": "x"}) + "\n")
    report = ReadReport(str(path))
    examples = read_examples(path, skip_bad=True, report=report)
    assert [e.id for e in examples] == ["ex-0"]
    assert len(report.skipped) == 2 and "mixed.jsonl:2" in report.skipped[0] and "field 'order'" in report.skipped[1]


def test_write_is_atomic(tmp_path):
    path = tmp_path / "out.jsonl"
    write_examples(path, [make(0)])

    def exploding():
        yield make(1)
        raise RuntimeError("crash mid-write")

    with pytest.raises(RuntimeError):
        write_examples(path, exploding())
    assert read_examples(path) == [make(0)]
    assert [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]
