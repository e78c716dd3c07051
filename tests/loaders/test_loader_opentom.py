"""OpenToM loader: counts per genre, the evaluation-only mark, OpenToM-L, and the official JSON folder."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from tomrl.io import BadInputError
from tomrl.loaders.registry import LOADERS, load


@pytest.fixture(scope="module")
def opentom(shared_data):
    return load("opentom")


def test_counts_and_genres(opentom):
    card = LOADERS["opentom"].card
    assert len(opentom) == card.counts["rows"] == 13708
    assert len({e.story_id for e in opentom}) == 596
    types = Counter(e.question_type for e in opentom)
    for genre in ("attitude", "location_coarse", "location_fine", "multihop_fullness", "multihop_accessibility"):
        assert types[genre] == card.counts[genre]
    assert Counter(e.order for e in opentom) == {1: 5960, 2: 5960, 0: 1192, None: 596}


def test_every_row_is_evaluation_only(opentom):
    assert LOADERS["opentom"].card.evaluation_only
    assert all(e.meta["evaluation_only"] is True for e in opentom)


def test_long_subset(shared_data):
    long = load("opentom", long=True)
    assert len(long) == 2300 and len({e.story_id for e in long}) == 100
    assert all(e.meta["long"] for e in long)


def test_official_folder(shared_data, tmp_path):
    metas = [json.loads(line) for line in (shared_data / "opentom" / "opentom_meta.jsonl").read_text().splitlines()[:2]]
    keep = {m["story_id"] for m in metas}
    questions = [json.loads(line) for line in (shared_data / "opentom" / "opentom_questions.jsonl").read_text().splitlines()]
    questions = [q for q in questions if q["story_id"] in keep]
    (tmp_path / "meta_data.json").write_text(json.dumps({m["story_id"]: {k: v for k, v in m.items() if k != "story_id"} for m in metas}))
    by_file: dict = {}
    for q in questions:
        by_file.setdefault(q["source_file"], {}).setdefault(q["story_id"], []).append({"question": q["question"], "answer": q["answer"], "type": q["type"]})
    for name, content in by_file.items():
        (tmp_path / name).write_text(json.dumps(content))
    loaded = load("opentom", path=tmp_path)
    reference = {e.id: e for e in load("opentom") if e.story_id in {f"opentom-{k}" for k in keep}}
    assert len(loaded) == len(reference) == 46
    for e in loaded:
        ref = reference[e.id]
        assert (e.story, e.question, e.answer, e.order, e.question_type) == (ref.story, ref.question, ref.answer, ref.order, ref.question_type)


def test_missing_story_names_the_row(shared_data, tmp_path):
    (tmp_path / "opentom_meta.jsonl").write_text(json.dumps({"story_id": "1", "narrative": "A story."}) + "\n")
    (tmp_path / "opentom_questions.jsonl").write_text(
        json.dumps({"story_id": "2", "genre": "attitude", "question": "As A, what is your attitude?", "answer": "positive"}) + "\n")
    with pytest.raises(BadInputError, match=r"opentom_questions\.jsonl:1: field 'story_id': story 2"):
        load("opentom", path=tmp_path)
