"""ExploreToM loader: counts, the binary/knowledge marks, the order mapping and the official CSV."""

from __future__ import annotations

import csv
import json
from collections import Counter

import pytest

from tomrl.io import BadInputError
from tomrl.loaders.registry import load


@pytest.fixture(scope="module")
def explore(shared_data):
    return load("exploretom")


def test_counts_and_marks(explore):
    assert len(explore) == 13309
    assert len({e.story_id for e in explore}) == 619  # 621 global_idx values, two stories twice
    assert sum(e.meta["is_binary_yes_no"] for e in explore) == 3473
    assert sum(e.meta["is_knowledge_q"] for e in explore) == 6804
    assert sum(not e.meta["binary"] for e in explore) == 5178
    assert all(e.meta["binary"] == (e.answer.lower() in ("yes", "no", "knows about it", "does not know about it")) for e in explore)


def test_orders(explore):
    assert Counter(e.order for e in explore)[0] == 847
    assert all(e.order == max(e.meta["nth_order"], 0) for e in explore)
    assert all(e.meta["requires_tom"] == (e.order > 0) for e in explore)
    assert {e.question_type for e in explore if e.order == 0} == {
        "memory-container_location", "memory-room_location", "memory_before_event-container_location",
        "memory_before_event-room_location", "ground_truth-container_location", "ground_truth-room_location"}


def test_exclude_binary_and_infilled(shared_data, explore):
    open_questions = load("exploretom", exclude_binary=True)
    assert len(open_questions) == 5178
    infilled = load("exploretom", story_form="infilled")
    assert [e.story_id for e in infilled] == [e.story_id for e in explore]
    assert infilled[0].story != explore[0].story and infilled[0].meta["story_structure"] == explore[0].story


def test_official_csv(shared_data, tmp_path):
    rows = [json.loads(line) for line in (shared_data / "exploretom" / "exploretom_sample.jsonl").read_text().splitlines()[:5]]
    columns = [c for c in rows[0] if "=" in c or c in ("story_structure", "infilled_story", "question", "expected_answer")]
    path = tmp_path / "ExploreToM-data-sample.csv"
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        for r in rows:
            writer.writerow({c: "" if r[c] is None else r[c] for c in columns})
    loaded = load("exploretom", path=path)
    reference = load("exploretom")[:5]
    for a, b in zip(loaded, reference):
        assert (a.id, a.story, a.question, a.answer, a.order, a.question_type, a.story_id) == (b.id, b.story, b.question, b.answer, b.order, b.question_type, b.story_id)
        assert a.meta["binary"] == b.meta["binary"]


def test_bad_params_field(tmp_path):
    row = {"story_structure": "A entered the lab.", "infilled_story": "x", "question": "In which room is the box?",
           "expected_answer": "lab", "qprop=params": "not a tuple", "qprop=nth_order": -1, "sprop=global_idx": 0}
    path = tmp_path / "sample.jsonl"
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(BadInputError, match=r"sample\.jsonl:1: field 'qprop=params'"):
        load("exploretom", path=path)
