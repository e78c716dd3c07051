"""Hi-ToM loader: counts, labels, the oracle's disputed rows, and the official file formats."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from tomrl.io import BadInputError
from tomrl.loaders.registry import load

# PROVENANCE.md of shared/data/hitom: CoTP rows whose label the oracle re-implementation disputes.
DISPUTED = [241, 242, 261, 262, 281, 285, 292, 296, 742, 758, 762, 774, 778, 782, 794, 857, 881]


@pytest.fixture(scope="module")
def hitom(shared_data):
    return load("hitom")


def test_counts_orders_and_stories(hitom):
    assert len(hitom) == 600
    assert Counter(e.order for e in hitom) == {o: 120 for o in range(5)}
    assert len({e.story_id for e in hitom}) == 120
    assert Counter(e.deception for e in hitom) == {True: 300, False: 300}
    assert all(e.meta["prompting_type"] == "CoTP" and e.source == "hitom" for e in hitom)
    assert all(len(e.choices) == 15 and e.answer in e.choices for e in hitom)


def test_story_is_clean_sentences(hitom):
    for e in hitom:
        lines = e.story.split("\n")
        assert not any(line[:1].isdigit() for line in lines), e.id
        assert not any(line.startswith("***") or line.startswith("Read the following") for line in lines), e.id


def test_both_prompting_styles_share_stories(shared_data):
    both = load("hitom", prompting="both", oracle=False)
    assert len(both) == 1200
    by_key = {}
    for e in both:
        by_key.setdefault((e.story_id, e.question), set()).add(e.answer)
    assert len(by_key) == 600  # VP and CoTP copies of each question share story and question
    assert sum(len(answers) > 1 for answers in by_key.values()) == 138  # ... but not always the label


def test_oracle_disputes_the_documented_rows(hitom):
    disputed = sorted(e.meta["sample_id"] for e in hitom if e.meta["oracle_disputes"])
    assert disputed == DISPUTED
    dropped = load("hitom", drop_disputed=True)
    assert len(dropped) == 583


def test_official_json_file(shared_data, tmp_path):
    rows = [json.loads(line) for line in (shared_data / "hitom" / "hitom_data.jsonl").read_text().splitlines()[:3]]
    original = [{k: r[k] for k in ("prompting_type", "deception", "story_length", "question_order", "sample_id", "story", "question", "choices", "answer")} for r in rows]
    path = tmp_path / "Hi-ToM_data.json"
    path.write_text(json.dumps({"data": original}))
    loaded = load("hitom", path=path, oracle=False)
    reference = {e.id: e for e in load("hitom", oracle=False)}
    assert [e.id for e in loaded] == ["hitom-cotp-0", "hitom-cotp-1", "hitom-cotp-2"]
    for e in loaded:
        ref = reference[e.id]
        assert (e.story, e.question, e.answer, e.choices, e.order, e.story_id) == (ref.story, ref.question, ref.answer, ref.choices, ref.order, ref.story_id)


def test_official_txt_folder(shared_data, tmp_path):
    row = json.loads((shared_data / "hitom" / "hitom_data.jsonl").read_text().splitlines()[0])
    folder = tmp_path / "Hi-ToM_data" / "No_Tell" / "CoT" / "length_1" / "sample_1"
    folder.mkdir(parents=True)
    text = (
        "Read the following story and answer the multiple-choice question. Think step-by-step.\nStory:\n"
        + row["story"].rstrip("\n*").rstrip()
        + f"\nQuestion: {row['question']}\nAnswer: {row['answer']}\nChoices: {row['choices']}\n\nNote: You should assume the following.\n"
    )
    (folder / "order_0.txt").write_text(text)
    (loaded,) = load("hitom", path=tmp_path / "Hi-ToM_data", oracle=False)
    reference = load("hitom", oracle=False)[0]
    assert loaded.id == "hitom-cotp-0" == reference.id
    assert (loaded.story, loaded.question, loaded.answer, loaded.choices) == (reference.story, reference.question, reference.answer, reference.choices)


def test_bad_file_names_row_and_field(tmp_path):
    path = tmp_path / "Hi-ToM_data.json"
    row = {"prompting_type": "CoTP", "deception": "yes", "story_length": 1, "question_order": 0, "sample_id": 0,
           "story": "1 A entered the kitchen.", "question": "Where is the apple really?", "choices": "A. box", "answer": "box"}
    path.write_text(json.dumps({"data": [row]}))
    with pytest.raises(BadInputError, match=r"Hi-ToM_data\.json: row 0: field 'deception'"):
        load("hitom", path=path, oracle=False)
    del row["answer"]
    row["deception"] = False
    path.write_text(json.dumps({"data": [row]}))
    with pytest.raises(BadInputError, match=r"row 0: field 'answer': missing"):
        load("hitom", path=path, oracle=False)
