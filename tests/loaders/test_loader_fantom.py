"""FANToM loader on a small fantom_v1.json written by the test (no copy of the data exists here)."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from tomrl.io import BadInputError
from tomrl.loaders.registry import load


def _question_set(set_id: str) -> dict:
    return {
        "set_id": set_id,
        "part_id": set_id.rsplit("-", 1)[0],
        "full_context": "Kim: Hi all.\nLee: I grew up in Busan.\nKim: Sorry, I have to go.\nLee: My dog is called Bori.\nKim: I am back.",
        "short_context": "Lee: My dog is called Bori.\nKim: I am back.",
        "joining_speaker": "Kim",
        "missed_info": "Lee's dog is called Bori.",
        "factQA": {"question": "What is the name of Lee's dog?", "correct_answer": "Bori"},
        "beliefQAs": [
            {"question": "What does Kim believe Lee's dog is called?", "question_type": "tom:belief:inaccessible",
             "tom_type": "first-order", "correct_answer": "Kim does not know the dog's name.",
             "wrong_answer": "Kim believes the dog is called Bori.", "missed_info_accessibility": "inaccessible"},
            {"question": "What does Lee think Kim believes the dog is called?", "question_type": "tom:belief:inaccessible",
             "tom_type": "second-order:cyclic", "correct_answer": "Lee thinks Kim does not know.",
             "wrong_answer": "Lee thinks Kim knows it is Bori.", "missed_info_accessibility": "inaccessible"},
        ],
        "answerabilityQA_list": {"question": "Who knows the answer to this question?", "correct_answer": ["Lee"],
                                 "wrong_answer": ["Kim"], "missed_info_accessibility": "inaccessible"},
        "answerabilityQAs_binary": [
            {"question": "Does Lee know the answer?", "correct_answer": "yes", "missed_info_accessibility": "inaccessible"},
            {"question": "Does Kim know the answer?", "correct_answer": "no", "missed_info_accessibility": "inaccessible"},
        ],
        "infoAccessibilityQA_list": {"question": "Who knows this information?", "correct_answer": ["Lee"], "wrong_answer": ["Kim"],
                                     "missed_info_accessibility": "inaccessible"},
        "infoAccessibilityQAs_binary": [
            {"question": "Does Kim know this information?", "correct_answer": "no:long", "missed_info_accessibility": "inaccessible"},
        ],
    }


@pytest.fixture()
def fantom_file(tmp_path):
    path = tmp_path / "fantom_v1.json"
    path.write_text(json.dumps([_question_set("7-0-0"), _question_set("7-1-0")]))
    return path


def test_flattening(fantom_file):
    examples = load("fantom", path=fantom_file)
    types = Counter(e.question_type for e in examples)
    assert types == {"fact": 2, "belief:inaccessible": 4, "belief:inaccessible:multiple-choice": 4, "answerability:list": 2,
                     "answerability:binary": 4, "info_accessibility:list": 2}  # "no:long" dropped with the short context
    assert {e.story_id for e in examples} == {"fantom-7"}
    mc = [e for e in examples if e.question_type.endswith("multiple-choice")]
    assert all(sorted(e.choices) == sorted([e.answer, e.meta["wrong_answer"]]) for e in mc)
    assert [e.order for e in mc[:2]] == [1, 2]
    listing = next(e for e in examples if e.question_type == "answerability:list")
    assert listing.answer == "Lee" and listing.meta["wrong_answer_list"] == ["Kim"]
    assert listing.question.startswith("Target: What is the name of Lee's dog?\n")
    binary = next(e for e in examples if e.question_type == "answerability:binary")
    assert binary.question.endswith("Answer yes or no.") and binary.answer == "yes"


def test_full_context_keeps_no_long(fantom_file):
    examples = load("fantom", path=fantom_file, context="full")
    info = [e for e in examples if e.question_type == "info_accessibility:binary"]
    assert len(info) == 2 and all(e.answer == "no" and e.meta["no_long"] for e in info)
    assert examples[0].story.startswith("Kim: Hi all.")


def test_column_oriented_json(tmp_path):
    rows = [_question_set("3-0-0")]
    columns = {key: {"0": rows[0][key]} for key in rows[0]}
    path = tmp_path / "fantom_v1.json"
    path.write_text(json.dumps(columns))
    assert len(load("fantom", path=path)) == 9  # fact, 2 × 2 belief, 2 lists, 2 answerability binary


def test_missing_file_says_how_to_obtain(tmp_path, monkeypatch):
    monkeypatch.setenv("TOMRL_DATA", str(tmp_path))
    with pytest.raises(BadInputError) as err:
        load("fantom")
    message = str(err.value)
    assert "fantom.tar.gz" in message and "1d08dfa0ea474c7f83b9bc7e3a7b466eab25194043489dd618b4c5223e1253a4" in message


def test_bad_row_names_field(tmp_path):
    row = _question_set("1-0-0")
    row["beliefQAs"][0]["tom_type"] = "third-order"
    path = tmp_path / "fantom_v1.json"
    path.write_text(json.dumps([row]))
    with pytest.raises(BadInputError, match=r"fantom_v1\.json: row 0: beliefQAs\[0\]: field 'tom_type'"):
        load("fantom", path=path)
